//! Produce (key 0): validate each partition's batches, append them in request order, and
//! answer once the flush policy allows (acks 1: this leader's own append, synced under
//! sync-before-ack), once every ISR member holds the records (acks -1: the high watermark
//! passed them, Kafka's delayed produce), or not at all (acks 0).
//!
//! acks=all and the ISR (KIP-966's strict rule): a partition whose ISR is smaller than
//! `min.insync.replicas` refuses the append (NOT_ENOUGH_REPLICAS); one whose ISR shrank below
//! it after the append answers NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records stay in the log
//! and may still be replicated: the client retries, and an idempotent producer's retry is
//! deduplicated); the request's timeout gives REQUEST_TIMED_OUT.
//!
//! [`start`] runs inline on the connection, so appends keep the order of the connection's
//! requests; the wait for durability is deferred, so pipelined requests share one sync.
//! Produce v0-2 never reaches here: Kafka 4 removed them, and the connection closes (the
//! frame parser refuses them), though ApiVersions advertises v0 (design §4).
//!
//! Idempotent producers' batches are checked by the partition's log under its append lock. A
//! retry of a batch already in the log comes back as a duplicate `PendingAppend`: it is
//! answered NONE with the original's base offset (and, under LogAppendTime, its append time)
//! once the original may be acknowledged, never before. Refusals (OUT_OF_ORDER_SEQUENCE_NUMBER,
//! INVALID_PRODUCER_EPOCH) get their codes in `handlers::producer_error_code`.
//!
//! A partition this broker does not lead is NOT_LEADER_OR_FOLLOWER with KIP-951's hint
//! (v10+): the leader the applied image names, its epoch, and its endpoint in the answer's
//! `node_endpoints` (`cluster_view::leader_hint`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::broker::cluster_view;
use crate::broker::handlers::{encode_response, partition_error_code, Reply};
use crate::broker::partition::Partition;
use crate::broker::Broker;
use crate::log::validator::{self, ValidatorConfig};
use crate::log::PendingAppend;
use crate::protocol::error::ErrorCode;
use crate::protocol::produce::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use crate::protocol::record_batch;
use crate::protocol::types::{LeaderEpoch, NodeId, Offset};
use crate::protocol::wire::Uuid;
use crate::rt::time;

/// Why one partition's records were refused.
struct Failure {
    code: ErrorCode,
    message: Option<String>,
    record_errors: Vec<BatchIndexAndErrorMessage>,
}

impl Failure {
    fn new(code: ErrorCode, message: String) -> Failure {
        Failure {
            code,
            message: Some(message),
            record_errors: Vec::new(),
        }
    }
}

/// The outcome of the inline half for one partition.
enum Started {
    /// Appended, with the LogAppendTime stamped into the batch if the topic uses it.
    /// The flag: acks=all, which also waits for the ISR.
    Appended(Arc<Partition>, PendingAppend, Option<i64>, bool),
    Failed(Failure),
}

struct TopicStarted {
    name: String,
    topic_id: Uuid,
    partitions: Vec<(i32, Started)>,
}

/// Validates and appends every partition of the request; returns the deferred answer.
pub async fn start(
    broker: &Arc<Broker>,
    correlation_id: i32,
    version: i16,
    request: ProduceRequest,
) -> Reply {
    let acks = request.acks;
    let acks_valid = matches!(acks, -1..=1);
    let mut started = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let resolved = broker
            .topics
            .find(version >= 13, &topic.name, topic.topic_id)
            .await;
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let outcome = if !acks_valid {
                Started::Failed(Failure::new(
                    ErrorCode::INVALID_REQUIRED_ACKS,
                    format!("acks {acks} is not one of -1, 0, 1"),
                ))
            } else if let Some(transactional_id) = &request.transactional_id {
                Started::Failed(Failure::new(
                    ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    format!(
                        "transactions are not supported yet (transactional id '{transactional_id}')"
                    ),
                ))
            } else if resolved.as_ref().is_some_and(|t| t.internal) {
                // Only the broker writes its internal topics (Kafka: "Cannot append to
                // internal topic").
                Started::Failed(Failure::new(
                    ErrorCode::INVALID_TOPIC_EXCEPTION,
                    format!("cannot append to internal topic {}", topic.name),
                ))
            } else {
                let partition = resolved.as_ref().and_then(|t| t.partition(data.index));
                match partition {
                    None => Started::Failed(Failure {
                        code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                        message: None,
                        record_errors: Vec::new(),
                    }),
                    Some(partition) => {
                        append(broker, (version, acks), partition, data.records).await
                    }
                }
            };
            partitions.push((data.index, outcome));
        }
        started.push(TopicStarted {
            name: topic.name,
            topic_id: topic.topic_id,
            partitions,
        });
    }
    let timeout_ms = u64::try_from(request.timeout_ms).unwrap_or(0);
    let broker = broker.clone();
    let finish = async move {
        let response = finish(&broker, version, started, timeout_ms).await;
        encode_response(correlation_id, ProduceRequest::API_KEY, version, &response)
    };
    if acks == 0 {
        // No answer, but the appends must still complete so the high watermark moves.
        Reply::Silent(Some(Box::pin(finish)))
    } else {
        Reply::Later(Box::pin(finish))
    }
}

async fn append(
    broker: &Arc<Broker>,
    (version, acks): (i16, i16),
    partition: Arc<Partition>,
    records: Option<Bytes>,
) -> Started {
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return Started::Failed(Failure::new(
            ErrorCode::INVALID_RECORD,
            "the partition's record set is empty or null".to_string(),
        ));
    };
    let config = partition.config();
    // The batch stays a slice of the request frame unless validation must stamp its header
    // (LogAppendTime, or a wrong CreateTime maxTimestamp): the log changes only the base
    // offset, which lies outside the CRC, so it needs no copy of its own.
    let validated = validator::validate_produce_bytes(
        records,
        &ValidatorConfig {
            topic: &partition.topic,
            partition: partition.index,
            produce_version: version,
            max_message_bytes: config.max_message_bytes,
            timestamp_type: config.message_timestamp_type,
            timestamp_before_max_ms: config.message_timestamp_before_max_ms,
            timestamp_after_max_ms: config.message_timestamp_after_max_ms,
            compacted: config.cleanup_policy.compacts(),
            now_ms: broker.clock.now_ms(),
            decompressed_bytes_max: record_batch::DECOMPRESSED_BATCH_BYTES_MAX,
            compression: config.compressor(),
        },
    );
    let (validated, records) = match validated {
        Ok(validated) => validated,
        Err(e) => {
            tracing::debug!(
                topic = %partition.topic,
                partition = partition.index,
                error = %e,
                "produce refused by validation"
            );
            return Started::Failed(Failure {
                code: e.code,
                message: Some(e.message),
                record_errors: e
                    .record_errors
                    .into_iter()
                    .map(|r| BatchIndexAndErrorMessage {
                        batch_index: r.batch_index,
                        batch_index_error_message: r.message,
                    })
                    .collect(),
            });
        }
    };
    if validated.is_transactional {
        return Started::Failed(Failure::new(
            ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "transactional batches are not supported yet".to_string(),
        ));
    }
    if acks == -1 {
        if let Err(e) = partition.check_enough_replicas() {
            tracing::debug!(error = %e, "produce refused");
            return Started::Failed(Failure::new(partition_error_code(&e), e.to_string()));
        }
    }
    match partition.append(&records).await {
        Ok(pending) => {
            // A duplicate answers with the original's append time (stamped into its max
            // timestamp under LogAppendTime), not the one validation just stamped.
            let log_append_time = if pending.duplicate {
                validated
                    .log_append_time_ms
                    .map(|_| pending.info.max_timestamp)
            } else {
                validated.log_append_time_ms
            };
            Started::Appended(partition, pending, log_append_time, acks == -1)
        }
        Err(e) => {
            let code = partition_error_code(&e);
            tracing::debug!(error = %e, %code, "produce refused");
            Started::Failed(Failure::new(code, e.to_string()))
        }
    }
}

/// The first Produce version whose answer carries KIP-951's leader hint and endpoints; an
/// older answer with them would not encode, and the connection would close.
pub const LEADER_HINT_VERSION_MIN: i16 = 10;

async fn finish(
    broker: &Broker,
    version: i16,
    started: Vec<TopicStarted>,
    timeout_ms: u64,
) -> ProduceResponse {
    let mut responses = Vec::with_capacity(started.len());
    // KIP-951: the leaders named in NOT_LEADER_OR_FOLLOWER answers, with their endpoints.
    let mut node_endpoints: BTreeMap<i32, NodeEndpoint> = BTreeMap::new();
    for topic in started {
        let mut partition_responses = Vec::with_capacity(topic.partitions.len());
        for (index, outcome) in topic.partitions {
            let response = match outcome {
                Started::Failed(failure) => {
                    let mut response = PartitionProduceResponse {
                        index,
                        error_code: failure.code.code(),
                        base_offset: Offset::NONE,
                        error_message: failure.message,
                        record_errors: failure.record_errors,
                        ..Default::default()
                    };
                    if failure.code == ErrorCode::NOT_LEADER_OR_FOLLOWER
                        && version >= LEADER_HINT_VERSION_MIN
                    {
                        if let Some((leader, epoch, at)) =
                            cluster_view::leader_hint(broker, &topic.name, index)
                        {
                            response.current_leader = LeaderIdAndEpoch {
                                leader_id: NodeId(leader),
                                leader_epoch: LeaderEpoch(epoch),
                            };
                            node_endpoints.insert(
                                leader,
                                NodeEndpoint {
                                    node_id: NodeId(leader),
                                    host: at.host,
                                    port: i32::from(at.port),
                                    rack: at.rack,
                                },
                            );
                        }
                    }
                    response
                }
                Started::Appended(partition, pending, log_append_time, all) => {
                    let acknowledged = async {
                        let info = partition.acknowledge(pending).await?;
                        if all {
                            partition.wait_replicated(info.last_offset).await?;
                        }
                        Ok::<_, crate::broker::partition::PartitionError>(info)
                    };
                    let waited = if timeout_ms == 0 {
                        Ok(acknowledged.await)
                    } else {
                        time::timeout(Duration::from_millis(timeout_ms), acknowledged).await
                    };
                    match waited {
                        Ok(Ok(info)) => PartitionProduceResponse {
                            index,
                            error_code: 0,
                            base_offset: Offset(info.base_offset),
                            log_append_time_ms: log_append_time.unwrap_or(-1),
                            log_start_offset: Offset(partition.log_start_offset().await),
                            ..Default::default()
                        },
                        Ok(Err(e)) => PartitionProduceResponse {
                            index,
                            error_code: partition_error_code(&e).code(),
                            base_offset: Offset::NONE,
                            error_message: Some(e.to_string()),
                            ..Default::default()
                        },
                        Err(_) => PartitionProduceResponse {
                            index,
                            error_code: ErrorCode::REQUEST_TIMED_OUT.code(),
                            base_offset: Offset::NONE,
                            error_message: Some(format!(
                                "not acknowledged within the request's timeout of {timeout_ms} ms"
                            )),
                            ..Default::default()
                        },
                    }
                }
            };
            partition_responses.push(response);
        }
        responses.push(TopicProduceResponse {
            name: topic.name,
            topic_id: topic.topic_id,
            partition_responses,
        });
    }
    ProduceResponse {
        responses,
        node_endpoints: node_endpoints.into_values().collect(),
        ..Default::default()
    }
}
