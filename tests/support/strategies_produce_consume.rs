//! Proptest strategies for the produce/consume milestone's messages (Produce, Fetch,
//! ListOffsets, FindCoordinator, CreateTopics, DeleteTopics, DeleteRecords, InitProducerId,
//! DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeLogDirs, CreatePartitions,
//! DescribeCluster), shared by their codec tests through `#[path]`.
//!
//! As in codec_strategies.rs, each strategy takes a version and sets only the fields present
//! in it (others keep their defaults), using null only where the version allows it, so every
//! value is valid in that version. Collections stay small to keep cases fast.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use samsa::protocol::message::Message;
use samsa::protocol::types::{LeaderEpoch, NodeId, Offset, ProducerEpoch, ProducerId};
use samsa::protocol::wire::{DecodeError, EncodeError, Uuid};
use samsa::protocol::{
    alter_configs as ac, create_partitions as cp, create_topics as ct, delete_records as dr,
    delete_topics as dt, describe_cluster as dc, describe_configs as dcf, describe_log_dirs as dld,
    fetch as f, find_coordinator as fc, incremental_alter_configs as iac, init_producer_id as ipi,
    list_offsets as lo, produce as p,
};

// The small helpers shared with the other strategy files. This file keeps its own `Msg`, which
// also says whether a value's top-level tagged section is empty.
#[path = "codec_strategies.rs"]
mod base;
use base::{nullable_string, string, uuid, when};

/// A message the codec tests drive generically: Samsa's [`Message`] plus a strategy.
pub trait Msg: Message + 'static {
    fn strategy(version: i16) -> BoxedStrategy<Self>;
    /// Whether the top-level tagged section is empty (then its encoding ends with one 0 byte).
    fn top_tags_empty(&self) -> bool {
        true
    }
    fn enc(&self, out: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        Message::encode(self, out, version)
    }
    fn len(&self, version: i16) -> usize {
        Message::encoded_len(self, version)
    }
    fn dec_exact(buf: Bytes, version: i16) -> Result<Self, DecodeError> {
        Message::decode_exact(buf, version)
    }
}

macro_rules! msg {
    ($t:ty, $strategy:ident) => {
        impl Msg for $t {
            fn strategy(version: i16) -> BoxedStrategy<Self> {
                $strategy(version)
            }
        }
    };
    ($t:ty, $strategy:ident, |$m:ident| $empty:expr) => {
        impl Msg for $t {
            fn strategy(version: i16) -> BoxedStrategy<Self> {
                $strategy(version)
            }
            fn top_tags_empty(&self) -> bool {
                let $m = self;
                $empty
            }
        }
    };
}

msg!(p::ProduceRequest, produce_request);
msg!(p::ProduceResponse, produce_response, |m| m
    .node_endpoints
    .is_empty());
msg!(f::FetchRequest, fetch_request, |m| m.cluster_id.is_none()
    && m.replica_state == f::ReplicaState::default());
msg!(f::FetchResponse, fetch_response, |m| m
    .node_endpoints
    .is_empty());
msg!(lo::ListOffsetsRequest, list_offsets_request);
msg!(lo::ListOffsetsResponse, list_offsets_response);
msg!(fc::FindCoordinatorRequest, find_coordinator_request);
msg!(fc::FindCoordinatorResponse, find_coordinator_response);
msg!(ct::CreateTopicsRequest, create_topics_request);
msg!(ct::CreateTopicsResponse, create_topics_response);
msg!(dt::DeleteTopicsRequest, delete_topics_request);
msg!(dt::DeleteTopicsResponse, delete_topics_response);
msg!(dr::DeleteRecordsRequest, delete_records_request);
msg!(dr::DeleteRecordsResponse, delete_records_response);
msg!(ipi::InitProducerIdRequest, init_producer_id_request);
msg!(ipi::InitProducerIdResponse, init_producer_id_response);
msg!(dcf::DescribeConfigsRequest, describe_configs_request);
msg!(dcf::DescribeConfigsResponse, describe_configs_response);
msg!(ac::AlterConfigsRequest, alter_configs_request);
msg!(ac::AlterConfigsResponse, alter_configs_response);
msg!(
    iac::IncrementalAlterConfigsRequest,
    incremental_alter_configs_request
);
msg!(
    iac::IncrementalAlterConfigsResponse,
    incremental_alter_configs_response
);
msg!(dld::DescribeLogDirsRequest, describe_log_dirs_request);
msg!(dld::DescribeLogDirsResponse, describe_log_dirs_response);
msg!(cp::CreatePartitionsRequest, create_partitions_request);
msg!(cp::CreatePartitionsResponse, create_partitions_response);
msg!(dc::DescribeClusterRequest, describe_cluster_request);
msg!(dc::DescribeClusterResponse, describe_cluster_response);

/// A field that exists from `from` and is nullable wherever it exists.
fn nstring_from(v: i16, from: i16, default: Option<String>) -> BoxedStrategy<Option<String>> {
    when(v >= from, option::of(string()), default)
}

/// Record data: opaque bytes (neither implementation looks inside), or null.
fn records() -> BoxedStrategy<Option<Bytes>> {
    option::of(vec(any::<u8>(), 0..24).prop_map(Bytes::from)).boxed()
}

fn ints() -> BoxedStrategy<Vec<i32>> {
    vec(any::<i32>(), 0..4).boxed()
}

fn strings() -> BoxedStrategy<Vec<String>> {
    vec(string(), 0..3).boxed()
}

// ---- Produce ----

fn produce_request(v: i16) -> BoxedStrategy<p::ProduceRequest> {
    let partition = (any::<i32>(), records())
        .prop_map(|(index, records)| p::PartitionProduceData { index, records });
    let topic = (
        when(v <= 12, string(), String::new()),
        when(v >= 13, uuid(), Uuid::ZERO),
        vec(partition, 0..3),
    )
        .prop_map(|(name, topic_id, partition_data)| p::TopicProduceData {
            name,
            topic_id,
            partition_data,
        });
    (
        option::of(string()),
        any::<i16>(),
        any::<i32>(),
        vec(topic, 0..3),
    )
        .prop_map(
            |(transactional_id, acks, timeout_ms, topic_data)| p::ProduceRequest {
                transactional_id,
                acks,
                timeout_ms,
                topic_data,
            },
        )
        .boxed()
}

fn produce_leader(v: i16) -> BoxedStrategy<p::LeaderIdAndEpoch> {
    when(
        v >= 10,
        (any::<i32>(), any::<i32>()).prop_map(|(leader_id, leader_epoch)| p::LeaderIdAndEpoch {
            leader_id: NodeId(leader_id),
            leader_epoch: LeaderEpoch(leader_epoch),
        }),
        p::LeaderIdAndEpoch::default(),
    )
}

fn produce_response(v: i16) -> BoxedStrategy<p::ProduceResponse> {
    let record_error =
        (any::<i32>(), option::of(string())).prop_map(|(i, m)| p::BatchIndexAndErrorMessage {
            batch_index: i,
            batch_index_error_message: m,
        });
    let partition = (
        any::<i32>(),
        any::<i16>(),
        any::<i64>(),
        any::<i64>(),
        when(v >= 5, any::<i64>(), -1),
        when(v >= 8, vec(record_error, 0..3), Vec::new()),
        nstring_from(v, 8, None),
        produce_leader(v),
    )
        .prop_map(|(index, e, base, append, start, errors, msg, leader)| {
            p::PartitionProduceResponse {
                index,
                error_code: e,
                base_offset: Offset(base),
                log_append_time_ms: append,
                log_start_offset: Offset(start),
                record_errors: errors,
                error_message: msg,
                current_leader: leader,
            }
        });
    let topic = (
        when(v <= 12, string(), String::new()),
        when(v >= 13, uuid(), Uuid::ZERO),
        vec(partition, 0..3),
    )
        .prop_map(
            |(name, topic_id, partition_responses)| p::TopicProduceResponse {
                name,
                topic_id,
                partition_responses,
            },
        );
    let endpoint = (any::<i32>(), string(), any::<i32>(), option::of(string())).prop_map(
        |(node_id, host, port, rack)| p::NodeEndpoint {
            node_id: NodeId(node_id),
            host,
            port,
            rack,
        },
    );
    (
        vec(topic, 0..3),
        any::<i32>(),
        when(v >= 10, vec(endpoint, 0..3), Vec::new()),
    )
        .prop_map(
            |(responses, throttle_time_ms, node_endpoints)| p::ProduceResponse {
                responses,
                throttle_time_ms,
                node_endpoints,
            },
        )
        .boxed()
}

// ---- Fetch ----

fn fetch_request(v: i16) -> BoxedStrategy<f::FetchRequest> {
    let partition = (
        any::<i32>(),
        when(v >= 9, any::<i32>(), -1),
        any::<i64>(),
        when(v >= 12, any::<i32>(), -1),
        when(v >= 5, any::<i64>(), -1),
        any::<i32>(),
        when(v >= 17, prop_oneof![Just(Uuid::ZERO), uuid()], Uuid::ZERO),
        when(v >= 18, prop_oneof![Just(i64::MAX), any::<i64>()], i64::MAX),
    )
        .prop_map(
            |(partition, cle, offset, lfe, lso, max, dir, hw)| f::FetchPartition {
                partition,
                current_leader_epoch: LeaderEpoch(cle),
                fetch_offset: Offset(offset),
                last_fetched_epoch: LeaderEpoch(lfe),
                log_start_offset: Offset(lso),
                partition_max_bytes: max,
                replica_directory_id: dir,
                high_watermark: Offset(hw),
            },
        );
    let topic = (
        when(v <= 12, string(), String::new()),
        when(v >= 13, uuid(), Uuid::ZERO),
        vec(partition, 0..3),
    )
        .prop_map(|(topic, topic_id, partitions)| f::FetchTopic {
            topic,
            topic_id,
            partitions,
        });
    let forgotten = (
        when(v <= 12, string(), String::new()),
        when(v >= 13, uuid(), Uuid::ZERO),
        ints(),
    )
        .prop_map(|(topic, topic_id, partitions)| f::ForgottenTopic {
            topic,
            topic_id,
            partitions,
        });
    let replica_state = when(
        v >= 15,
        prop_oneof![
            Just(f::ReplicaState::default()),
            (any::<i32>(), any::<i64>()).prop_map(|(replica_id, replica_epoch)| {
                f::ReplicaState {
                    replica_id: NodeId(replica_id),
                    replica_epoch,
                }
            })
        ],
        f::ReplicaState::default(),
    );
    (
        (
            when(v <= 14, any::<i32>(), -1),
            any::<i32>(),
            any::<i32>(),
            any::<i32>(),
            any::<i8>(),
            when(v >= 7, any::<i32>(), 0),
            when(v >= 7, any::<i32>(), -1),
        ),
        (
            vec(topic, 0..3),
            when(v >= 7, vec(forgotten, 0..2), Vec::new()),
            when(v >= 11, string(), String::new()),
            nstring_from(v, 12, None),
            replica_state,
        ),
    )
        .prop_map(|(a, b)| f::FetchRequest {
            replica_id: NodeId(a.0),
            max_wait_ms: a.1,
            min_bytes: a.2,
            max_bytes: a.3,
            isolation_level: a.4,
            session_id: a.5,
            session_epoch: a.6,
            topics: b.0,
            forgotten_topics_data: b.1,
            rack_id: b.2,
            cluster_id: b.3,
            replica_state: b.4,
        })
        .boxed()
}

fn fetch_response(v: i16) -> BoxedStrategy<f::FetchResponse> {
    let flexible = v >= 12;
    let aborted = (any::<i64>(), any::<i64>()).prop_map(|(producer_id, first_offset)| {
        f::AbortedTransaction {
            producer_id: ProducerId(producer_id),
            first_offset: Offset(first_offset),
        }
    });
    let diverging = when(
        flexible,
        (any::<i32>(), any::<i64>()).prop_map(|(epoch, end_offset)| f::EpochEndOffset {
            epoch: LeaderEpoch(epoch),
            end_offset: Offset(end_offset),
        }),
        f::EpochEndOffset::default(),
    );
    let leader = when(
        flexible,
        (any::<i32>(), any::<i32>()).prop_map(|(leader_id, leader_epoch)| f::LeaderIdAndEpoch {
            leader_id: NodeId(leader_id),
            leader_epoch: LeaderEpoch(leader_epoch),
        }),
        f::LeaderIdAndEpoch::default(),
    );
    let snapshot = when(
        flexible,
        (any::<i64>(), any::<i32>()).prop_map(|(end_offset, epoch)| f::SnapshotId {
            end_offset: Offset(end_offset),
            epoch: LeaderEpoch(epoch),
        }),
        f::SnapshotId::default(),
    );
    let partition = (
        (
            any::<i32>(),
            any::<i16>(),
            any::<i64>(),
            any::<i64>(),
            when(v >= 5, any::<i64>(), -1),
            option::of(vec(aborted, 0..3)),
            when(v >= 11, any::<i32>(), -1),
            records(),
        ),
        (diverging, leader, snapshot),
    )
        .prop_map(|(a, b)| f::PartitionData {
            partition_index: a.0,
            error_code: a.1,
            high_watermark: Offset(a.2),
            last_stable_offset: Offset(a.3),
            log_start_offset: Offset(a.4),
            aborted_transactions: a.5,
            preferred_read_replica: NodeId(a.6),
            records: a.7,
            diverging_epoch: b.0,
            current_leader: b.1,
            snapshot_id: b.2,
        });
    let topic = (
        when(v <= 12, string(), String::new()),
        when(v >= 13, uuid(), Uuid::ZERO),
        vec(partition, 0..3),
    )
        .prop_map(|(topic, topic_id, partitions)| f::FetchableTopicResponse {
            topic,
            topic_id,
            partitions,
        });
    let endpoint = (any::<i32>(), string(), any::<i32>(), option::of(string())).prop_map(
        |(node_id, host, port, rack)| f::NodeEndpoint {
            node_id: NodeId(node_id),
            host,
            port,
            rack,
        },
    );
    (
        any::<i32>(),
        when(v >= 7, any::<i16>(), 0),
        when(v >= 7, any::<i32>(), 0),
        vec(topic, 0..3),
        when(v >= 16, vec(endpoint, 0..3), Vec::new()),
    )
        .prop_map(
            |(throttle, e, session, responses, endpoints)| f::FetchResponse {
                throttle_time_ms: throttle,
                error_code: e,
                session_id: session,
                responses,
                node_endpoints: endpoints,
            },
        )
        .boxed()
}

// ---- ListOffsets ----

fn list_offsets_request(v: i16) -> BoxedStrategy<lo::ListOffsetsRequest> {
    let partition = (any::<i32>(), when(v >= 4, any::<i32>(), -1), any::<i64>()).prop_map(
        |(partition_index, current_leader_epoch, timestamp)| lo::ListOffsetsPartition {
            partition_index,
            current_leader_epoch: LeaderEpoch(current_leader_epoch),
            timestamp,
        },
    );
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(name, partitions)| lo::ListOffsetsTopic { name, partitions });
    (
        any::<i32>(),
        when(v >= 2, any::<i8>(), 0),
        vec(topic, 0..3),
        when(v >= 10, any::<i32>(), 0),
    )
        .prop_map(
            |(replica_id, isolation_level, topics, timeout_ms)| lo::ListOffsetsRequest {
                replica_id: NodeId(replica_id),
                isolation_level,
                topics,
                timeout_ms,
            },
        )
        .boxed()
}

fn list_offsets_response(v: i16) -> BoxedStrategy<lo::ListOffsetsResponse> {
    let partition = (
        any::<i32>(),
        any::<i16>(),
        any::<i64>(),
        any::<i64>(),
        when(v >= 4, any::<i32>(), -1),
    )
        .prop_map(
            |(partition_index, error_code, timestamp, offset, leader_epoch)| {
                lo::ListOffsetsPartitionResponse {
                    partition_index,
                    error_code,
                    timestamp,
                    offset: Offset(offset),
                    leader_epoch: LeaderEpoch(leader_epoch),
                }
            },
        );
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(name, partitions)| lo::ListOffsetsTopicResponse { name, partitions });
    (when(v >= 2, any::<i32>(), 0), vec(topic, 0..3))
        .prop_map(|(throttle_time_ms, topics)| lo::ListOffsetsResponse {
            throttle_time_ms,
            topics,
        })
        .boxed()
}

// ---- FindCoordinator ----

fn find_coordinator_request(v: i16) -> BoxedStrategy<fc::FindCoordinatorRequest> {
    (
        when(v <= 3, string(), String::new()),
        when(v >= 1, any::<i8>(), 0),
        when(v >= 4, strings(), Vec::new()),
    )
        .prop_map(
            |(key, key_type, coordinator_keys)| fc::FindCoordinatorRequest {
                key,
                key_type,
                coordinator_keys,
            },
        )
        .boxed()
}

fn find_coordinator_response(v: i16) -> BoxedStrategy<fc::FindCoordinatorResponse> {
    let old = v <= 3;
    let coordinator = (
        string(),
        any::<i32>(),
        string(),
        any::<i32>(),
        any::<i16>(),
        option::of(string()),
    )
        .prop_map(|(key, node_id, host, port, e, msg)| fc::Coordinator {
            key,
            node_id: NodeId(node_id),
            host,
            port,
            error_code: e,
            error_message: msg,
        });
    (
        when(v >= 1, any::<i32>(), 0),
        when(old, any::<i16>(), 0),
        when(
            (1..=3).contains(&v),
            option::of(string()),
            Some(String::new()),
        ),
        when(old, any::<i32>(), 0),
        when(old, string(), String::new()),
        when(old, any::<i32>(), 0),
        when(v >= 4, vec(coordinator, 0..3), Vec::new()),
    )
        .prop_map(|(throttle, e, msg, node_id, host, port, coordinators)| {
            fc::FindCoordinatorResponse {
                throttle_time_ms: throttle,
                error_code: e,
                error_message: msg,
                node_id: NodeId(node_id),
                host,
                port,
                coordinators,
            }
        })
        .boxed()
}

// ---- CreateTopics ----

fn create_topics_request(_v: i16) -> BoxedStrategy<ct::CreateTopicsRequest> {
    let assignment = (any::<i32>(), ints()).prop_map(|(partition_index, broker_ids)| {
        ct::CreatableReplicaAssignment {
            partition_index,
            broker_ids: broker_ids.into_iter().map(NodeId).collect(),
        }
    });
    let config = (string(), option::of(string()))
        .prop_map(|(name, value)| ct::CreatableTopicConfig { name, value });
    let topic = (
        string(),
        any::<i32>(),
        any::<i16>(),
        vec(assignment, 0..3),
        vec(config, 0..3),
    )
        .prop_map(
            |(name, num_partitions, replication_factor, assignments, configs)| ct::CreatableTopic {
                name,
                num_partitions,
                replication_factor,
                assignments,
                configs,
            },
        );
    (vec(topic, 0..3), any::<i32>(), any::<bool>())
        .prop_map(
            |(topics, timeout_ms, validate_only)| ct::CreateTopicsRequest {
                topics,
                timeout_ms,
                validate_only,
            },
        )
        .boxed()
}

fn create_topics_response(v: i16) -> BoxedStrategy<ct::CreateTopicsResponse> {
    let flexible = v >= 5;
    let config = (
        string(),
        option::of(string()),
        any::<bool>(),
        any::<i8>(),
        any::<bool>(),
    )
        .prop_map(|(name, value, read_only, config_source, is_sensitive)| {
            ct::CreatableTopicConfigs {
                name,
                value,
                read_only,
                config_source,
                is_sensitive,
            }
        });
    let topic = (
        string(),
        when(v >= 7, uuid(), Uuid::ZERO),
        any::<i16>(),
        option::of(string()),
        when(flexible, any::<i16>(), 0),
        when(flexible, any::<i32>(), -1),
        when(flexible, any::<i16>(), -1),
        when(flexible, option::of(vec(config, 0..3)), Some(Vec::new())),
    )
        .prop_map(
            |(name, topic_id, e, msg, tce, np, rf, configs)| ct::CreatableTopicResult {
                name,
                topic_id,
                error_code: e,
                error_message: msg,
                topic_config_error_code: tce,
                num_partitions: np,
                replication_factor: rf,
                configs,
            },
        );
    (any::<i32>(), vec(topic, 0..3))
        .prop_map(|(throttle_time_ms, topics)| ct::CreateTopicsResponse {
            throttle_time_ms,
            topics,
        })
        .boxed()
}

// ---- DeleteTopics ----

fn delete_topics_request(v: i16) -> BoxedStrategy<dt::DeleteTopicsRequest> {
    let state = (option::of(string()), uuid())
        .prop_map(|(name, topic_id)| dt::DeleteTopicState { name, topic_id });
    (
        when(v >= 6, vec(state, 0..3), Vec::new()),
        when(v <= 5, strings(), Vec::new()),
        any::<i32>(),
    )
        .prop_map(
            |(topics, topic_names, timeout_ms)| dt::DeleteTopicsRequest {
                topics,
                topic_names,
                timeout_ms,
            },
        )
        .boxed()
}

fn delete_topics_response(v: i16) -> BoxedStrategy<dt::DeleteTopicsResponse> {
    let result = (
        nullable_string(v >= 6),
        when(v >= 6, uuid(), Uuid::ZERO),
        any::<i16>(),
        nstring_from(v, 5, None),
    )
        .prop_map(
            |(name, topic_id, error_code, error_message)| dt::DeletableTopicResult {
                name,
                topic_id,
                error_code,
                error_message,
            },
        );
    (any::<i32>(), vec(result, 0..3))
        .prop_map(|(throttle_time_ms, responses)| dt::DeleteTopicsResponse {
            throttle_time_ms,
            responses,
        })
        .boxed()
}

// ---- DeleteRecords ----

fn delete_records_request(_v: i16) -> BoxedStrategy<dr::DeleteRecordsRequest> {
    let partition = (any::<i32>(), any::<i64>()).prop_map(|(partition_index, offset)| {
        dr::DeleteRecordsPartition {
            partition_index,
            offset: Offset(offset),
        }
    });
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(name, partitions)| dr::DeleteRecordsTopic { name, partitions });
    (vec(topic, 0..3), any::<i32>())
        .prop_map(|(topics, timeout_ms)| dr::DeleteRecordsRequest { topics, timeout_ms })
        .boxed()
}

fn delete_records_response(_v: i16) -> BoxedStrategy<dr::DeleteRecordsResponse> {
    let partition = (any::<i32>(), any::<i64>(), any::<i16>()).prop_map(
        |(partition_index, low_watermark, error_code)| dr::DeleteRecordsPartitionResult {
            partition_index,
            low_watermark: Offset(low_watermark),
            error_code,
        },
    );
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(name, partitions)| dr::DeleteRecordsTopicResult { name, partitions });
    (any::<i32>(), vec(topic, 0..3))
        .prop_map(|(throttle_time_ms, topics)| dr::DeleteRecordsResponse {
            throttle_time_ms,
            topics,
        })
        .boxed()
}

// ---- InitProducerId ----

fn init_producer_id_request(v: i16) -> BoxedStrategy<ipi::InitProducerIdRequest> {
    (
        option::of(string()),
        any::<i32>(),
        when(v >= 3, any::<i64>(), -1),
        when(v >= 3, any::<i16>(), -1),
    )
        .prop_map(
            |(id, timeout, producer_id, producer_epoch)| ipi::InitProducerIdRequest {
                transactional_id: id,
                transaction_timeout_ms: timeout,
                producer_id: ProducerId(producer_id),
                producer_epoch: ProducerEpoch(producer_epoch),
            },
        )
        .boxed()
}

fn init_producer_id_response(v: i16) -> BoxedStrategy<ipi::InitProducerIdResponse> {
    (
        any::<i32>(),
        any::<i16>(),
        any::<i64>(),
        any::<i16>(),
        when(v >= 6, any::<i64>(), -1),
        when(v >= 6, any::<i16>(), -1),
    )
        .prop_map(|(throttle, e, id, epoch, ongoing_id, ongoing_epoch)| {
            ipi::InitProducerIdResponse {
                throttle_time_ms: throttle,
                error_code: e,
                producer_id: ProducerId(id),
                producer_epoch: ProducerEpoch(epoch),
                ongoing_txn_producer_id: ProducerId(ongoing_id),
                ongoing_txn_producer_epoch: ProducerEpoch(ongoing_epoch),
            }
        })
        .boxed()
}

// ---- DescribeConfigs ----

fn describe_configs_request(v: i16) -> BoxedStrategy<dcf::DescribeConfigsRequest> {
    let resource = (any::<i8>(), string(), option::of(strings())).prop_map(
        |(resource_type, resource_name, configuration_keys)| dcf::DescribeConfigsResource {
            resource_type,
            resource_name,
            configuration_keys,
        },
    );
    (
        vec(resource, 0..3),
        any::<bool>(),
        when(v >= 3, any::<bool>(), false),
    )
        .prop_map(|(resources, syn, doc)| dcf::DescribeConfigsRequest {
            resources,
            include_synonyms: syn,
            include_documentation: doc,
        })
        .boxed()
}

fn describe_configs_response(v: i16) -> BoxedStrategy<dcf::DescribeConfigsResponse> {
    let synonym =
        (string(), option::of(string()), any::<i8>()).prop_map(|(name, value, source)| {
            dcf::DescribeConfigsSynonym {
                name,
                value,
                source,
            }
        });
    let config = (
        string(),
        option::of(string()),
        any::<bool>(),
        any::<i8>(),
        any::<bool>(),
        vec(synonym, 0..3),
        when(v >= 3, any::<i8>(), 0),
        when(v >= 3, option::of(string()), Some(String::new())),
    )
        .prop_map(|(name, value, ro, source, sensitive, synonyms, ty, doc)| {
            dcf::DescribeConfigsResourceResult {
                name,
                value,
                read_only: ro,
                config_source: source,
                is_sensitive: sensitive,
                synonyms,
                config_type: ty,
                documentation: doc,
            }
        });
    let result = (
        any::<i16>(),
        option::of(string()),
        any::<i8>(),
        string(),
        vec(config, 0..3),
    )
        .prop_map(|(e, msg, rt, rn, configs)| dcf::DescribeConfigsResult {
            error_code: e,
            error_message: msg,
            resource_type: rt,
            resource_name: rn,
            configs,
        });
    (any::<i32>(), vec(result, 0..3))
        .prop_map(|(throttle_time_ms, results)| dcf::DescribeConfigsResponse {
            throttle_time_ms,
            results,
        })
        .boxed()
}

// ---- AlterConfigs and IncrementalAlterConfigs ----

fn alter_configs_request(_v: i16) -> BoxedStrategy<ac::AlterConfigsRequest> {
    let config = (string(), option::of(string()))
        .prop_map(|(name, value)| ac::AlterableConfig { name, value });
    let resource = (any::<i8>(), string(), vec(config, 0..3)).prop_map(
        |(resource_type, resource_name, configs)| ac::AlterConfigsResource {
            resource_type,
            resource_name,
            configs,
        },
    );
    (vec(resource, 0..3), any::<bool>())
        .prop_map(|(resources, validate_only)| ac::AlterConfigsRequest {
            resources,
            validate_only,
        })
        .boxed()
}

fn alter_configs_response(_v: i16) -> BoxedStrategy<ac::AlterConfigsResponse> {
    let response =
        (any::<i16>(), option::of(string()), any::<i8>(), string()).prop_map(|(e, msg, rt, rn)| {
            ac::AlterConfigsResourceResponse {
                error_code: e,
                error_message: msg,
                resource_type: rt,
                resource_name: rn,
            }
        });
    (any::<i32>(), vec(response, 0..3))
        .prop_map(|(throttle_time_ms, responses)| ac::AlterConfigsResponse {
            throttle_time_ms,
            responses,
        })
        .boxed()
}

fn incremental_alter_configs_request(
    _v: i16,
) -> BoxedStrategy<iac::IncrementalAlterConfigsRequest> {
    let config = (string(), any::<i8>(), option::of(string())).prop_map(
        |(name, config_operation, value)| iac::AlterableConfig {
            name,
            config_operation,
            value,
        },
    );
    let resource = (any::<i8>(), string(), vec(config, 0..3)).prop_map(
        |(resource_type, resource_name, configs)| iac::AlterConfigsResource {
            resource_type,
            resource_name,
            configs,
        },
    );
    (vec(resource, 0..3), any::<bool>())
        .prop_map(
            |(resources, validate_only)| iac::IncrementalAlterConfigsRequest {
                resources,
                validate_only,
            },
        )
        .boxed()
}

fn incremental_alter_configs_response(
    _v: i16,
) -> BoxedStrategy<iac::IncrementalAlterConfigsResponse> {
    let response =
        (any::<i16>(), option::of(string()), any::<i8>(), string()).prop_map(|(e, msg, rt, rn)| {
            iac::AlterConfigsResourceResponse {
                error_code: e,
                error_message: msg,
                resource_type: rt,
                resource_name: rn,
            }
        });
    (any::<i32>(), vec(response, 0..3))
        .prop_map(
            |(throttle_time_ms, responses)| iac::IncrementalAlterConfigsResponse {
                throttle_time_ms,
                responses,
            },
        )
        .boxed()
}

// ---- DescribeLogDirs ----

fn describe_log_dirs_request(_v: i16) -> BoxedStrategy<dld::DescribeLogDirsRequest> {
    let topic = (string(), ints())
        .prop_map(|(topic, partitions)| dld::DescribableLogDirTopic { topic, partitions });
    option::of(vec(topic, 0..3))
        .prop_map(|topics| dld::DescribeLogDirsRequest { topics })
        .boxed()
}

fn describe_log_dirs_response(v: i16) -> BoxedStrategy<dld::DescribeLogDirsResponse> {
    let partition = (any::<i32>(), any::<i64>(), any::<i64>(), any::<bool>()).prop_map(
        |(partition_index, partition_size, offset_lag, is_future_key)| {
            dld::DescribeLogDirsPartition {
                partition_index,
                partition_size,
                offset_lag,
                is_future_key,
            }
        },
    );
    let topic = (string(), vec(partition, 0..3))
        .prop_map(|(name, partitions)| dld::DescribeLogDirsTopic { name, partitions });
    let result = (
        any::<i16>(),
        string(),
        vec(topic, 0..3),
        when(v >= 4, any::<i64>(), -1),
        when(v >= 4, any::<i64>(), -1),
    )
        .prop_map(
            |(e, log_dir, topics, total, usable)| dld::DescribeLogDirsResult {
                error_code: e,
                log_dir,
                topics,
                total_bytes: total,
                usable_bytes: usable,
            },
        );
    (
        any::<i32>(),
        when(v >= 3, any::<i16>(), 0),
        vec(result, 0..3),
    )
        .prop_map(|(throttle, e, results)| dld::DescribeLogDirsResponse {
            throttle_time_ms: throttle,
            error_code: e,
            results,
        })
        .boxed()
}

// ---- CreatePartitions ----

fn create_partitions_request(_v: i16) -> BoxedStrategy<cp::CreatePartitionsRequest> {
    let assignment = ints().prop_map(|broker_ids| cp::CreatePartitionsAssignment {
        broker_ids: broker_ids.into_iter().map(NodeId).collect(),
    });
    let topic = (string(), any::<i32>(), option::of(vec(assignment, 0..3))).prop_map(
        |(name, count, assignments)| cp::CreatePartitionsTopic {
            name,
            count,
            assignments,
        },
    );
    (vec(topic, 0..3), any::<i32>(), any::<bool>())
        .prop_map(
            |(topics, timeout_ms, validate_only)| cp::CreatePartitionsRequest {
                topics,
                timeout_ms,
                validate_only,
            },
        )
        .boxed()
}

fn create_partitions_response(_v: i16) -> BoxedStrategy<cp::CreatePartitionsResponse> {
    let result = (string(), any::<i16>(), option::of(string())).prop_map(
        |(name, error_code, error_message)| cp::CreatePartitionsTopicResult {
            name,
            error_code,
            error_message,
        },
    );
    (any::<i32>(), vec(result, 0..3))
        .prop_map(|(throttle_time_ms, results)| cp::CreatePartitionsResponse {
            throttle_time_ms,
            results,
        })
        .boxed()
}

// ---- DescribeCluster ----

fn describe_cluster_request(v: i16) -> BoxedStrategy<dc::DescribeClusterRequest> {
    (
        any::<bool>(),
        when(v >= 1, any::<i8>(), 1),
        when(v >= 2, any::<bool>(), false),
    )
        .prop_map(|(ops, endpoint_type, fenced)| dc::DescribeClusterRequest {
            include_cluster_authorized_operations: ops,
            endpoint_type,
            include_fenced_brokers: fenced,
        })
        .boxed()
}

fn describe_cluster_response(v: i16) -> BoxedStrategy<dc::DescribeClusterResponse> {
    let broker = (
        any::<i32>(),
        string(),
        any::<i32>(),
        option::of(string()),
        when(v >= 2, any::<bool>(), false),
    )
        .prop_map(
            |(broker_id, host, port, rack, is_fenced)| dc::DescribeClusterBroker {
                broker_id: NodeId(broker_id),
                host,
                port,
                rack,
                is_fenced,
            },
        );
    (
        any::<i32>(),
        any::<i16>(),
        option::of(string()),
        when(v >= 1, any::<i8>(), 1),
        string(),
        any::<i32>(),
        vec(broker, 0..3),
        any::<i32>(),
    )
        .prop_map(
            |(throttle, e, msg, endpoint_type, cluster_id, controller_id, brokers, ops)| {
                dc::DescribeClusterResponse {
                    throttle_time_ms: throttle,
                    error_code: e,
                    error_message: msg,
                    endpoint_type,
                    cluster_id,
                    controller_id: NodeId(controller_id),
                    brokers,
                    cluster_authorized_operations: ops,
                }
            },
        )
        .boxed()
}

/// A version of `M` together with a value valid in it.
pub fn versioned<M: Msg>() -> BoxedStrategy<(i16, M)> {
    (M::VERSIONS.0..=M::VERSIONS.1)
        .prop_flat_map(|v| (Just(v), M::strategy(v)))
        .boxed()
}

/// The encoding of a valid value of `M` at some version.
pub fn encoded<M: Msg>() -> BoxedStrategy<(i16, Bytes)> {
    versioned::<M>()
        .prop_map(|(v, m)| {
            let mut out = BytesMut::new();
            m.enc(&mut out, v).expect("strategy values are valid");
            (v, out.freeze())
        })
        .boxed()
}
