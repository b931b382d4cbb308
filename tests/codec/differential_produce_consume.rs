//! Differential tests of the produce/consume milestone's messages against `kafka-protocol`
//! (0.18, generated from Kafka 4.1's schemas), an independent implementation used here only as
//! an oracle. The checks are those of codec_differential.rs, run at every version of every
//! message (a proptest runner per version, so no version is left to chance):
//! - Samsa encodes a proptest value; `kafka-protocol` decodes all of it and re-encodes the
//!   same bytes, with the same computed size; Samsa decodes those bytes back to the value.
//! - An unknown tagged field spliced into the top-level tagged section is kept by
//!   `kafka-protocol` and skipped by Samsa.
//! - `kafka-protocol`'s default message at every version decodes in Samsa and re-encodes to
//!   the same bytes, which are also the encoding of Samsa's default.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages as kp;
use kafka_protocol::protocol::{Decodable, Encodable};
use samsa::protocol::types::{LeaderEpoch, NodeId};
use samsa::protocol::wire::{DecodeErrorKind, EncodeErrorKind, Uuid};
use samsa::protocol::{
    alter_configs as ac, create_partitions as cp, create_topics as ct, delete_records as dr,
    delete_topics as dt, describe_cluster as dc, describe_configs as dcf, describe_log_dirs as dld,
    fetch as f, find_coordinator as fc, incremental_alter_configs as iac, init_producer_id as ipi,
    list_offsets as lo, produce as p,
};
use samsa::protocol::{request_header_version, response_header_version};

#[path = "../support/strategies_produce_consume.rs"]
mod strategies;
use strategies::Msg;

#[path = "../support/differential_support.rs"]
mod differential_support;
use differential_support::{differential_cases, kafka_default_roundtrip, samsa_bytes};

/// Proptest cases per message and version.
const CASES: u32 = 128;

/// `kafka-protocol`'s default of `T` at every version of `M`, decoded and re-encoded by Samsa.
fn kafka_defaults<M: Msg, T: Encodable + Default>() {
    for v in M::VERSIONS.0..=M::VERSIONS.1 {
        let (_, theirs) = kafka_default_roundtrip::<M, T>(v);
        // Samsa's own default encodes to the same bytes: both implement the schema defaults.
        assert_eq!(samsa_bytes(&M::default(), v), theirs, "{} v{v}", M::NAME);
    }
}

/// Every check, at every version of `M`: `CASES` proptest values each, then the defaults.
fn check<M: Msg, T: Encodable + Decodable + Default>() {
    for v in M::VERSIONS.0..=M::VERSIONS.1 {
        differential_cases::<M, T>(v, CASES, |m| m.top_tags_empty());
    }
    kafka_defaults::<M, T>();
}

#[test]
fn protocol_produce_matches_kafka_protocol() {
    check::<p::ProduceRequest, kp::ProduceRequest>();
    check::<p::ProduceResponse, kp::ProduceResponse>();
}

#[test]
fn protocol_fetch_matches_kafka_protocol() {
    check::<f::FetchRequest, kp::FetchRequest>();
    check::<f::FetchResponse, kp::FetchResponse>();
}

#[test]
fn protocol_list_offsets_matches_kafka_protocol() {
    check::<lo::ListOffsetsRequest, kp::ListOffsetsRequest>();
    check::<lo::ListOffsetsResponse, kp::ListOffsetsResponse>();
}

#[test]
fn protocol_find_coordinator_matches_kafka_protocol() {
    check::<fc::FindCoordinatorRequest, kp::FindCoordinatorRequest>();
    check::<fc::FindCoordinatorResponse, kp::FindCoordinatorResponse>();
}

#[test]
fn protocol_create_topics_matches_kafka_protocol() {
    check::<ct::CreateTopicsRequest, kp::CreateTopicsRequest>();
    check::<ct::CreateTopicsResponse, kp::CreateTopicsResponse>();
}

#[test]
fn protocol_delete_topics_matches_kafka_protocol() {
    check::<dt::DeleteTopicsRequest, kp::DeleteTopicsRequest>();
    check::<dt::DeleteTopicsResponse, kp::DeleteTopicsResponse>();
}

#[test]
fn protocol_delete_records_matches_kafka_protocol() {
    check::<dr::DeleteRecordsRequest, kp::DeleteRecordsRequest>();
    check::<dr::DeleteRecordsResponse, kp::DeleteRecordsResponse>();
}

#[test]
fn protocol_init_producer_id_matches_kafka_protocol() {
    check::<ipi::InitProducerIdRequest, kp::InitProducerIdRequest>();
    check::<ipi::InitProducerIdResponse, kp::InitProducerIdResponse>();
}

#[test]
fn protocol_describe_configs_matches_kafka_protocol() {
    check::<dcf::DescribeConfigsRequest, kp::DescribeConfigsRequest>();
    check::<dcf::DescribeConfigsResponse, kp::DescribeConfigsResponse>();
}

#[test]
fn protocol_alter_configs_matches_kafka_protocol() {
    check::<ac::AlterConfigsRequest, kp::AlterConfigsRequest>();
    check::<ac::AlterConfigsResponse, kp::AlterConfigsResponse>();
}

#[test]
fn protocol_incremental_alter_configs_matches_kafka_protocol() {
    check::<iac::IncrementalAlterConfigsRequest, kp::IncrementalAlterConfigsRequest>();
    check::<iac::IncrementalAlterConfigsResponse, kp::IncrementalAlterConfigsResponse>();
}

#[test]
fn protocol_describe_log_dirs_matches_kafka_protocol() {
    check::<dld::DescribeLogDirsRequest, kp::DescribeLogDirsRequest>();
    check::<dld::DescribeLogDirsResponse, kp::DescribeLogDirsResponse>();
}

#[test]
fn protocol_create_partitions_matches_kafka_protocol() {
    check::<cp::CreatePartitionsRequest, kp::CreatePartitionsRequest>();
    check::<cp::CreatePartitionsResponse, kp::CreatePartitionsResponse>();
}

#[test]
fn protocol_describe_cluster_matches_kafka_protocol() {
    check::<dc::DescribeClusterRequest, kp::DescribeClusterRequest>();
    check::<dc::DescribeClusterResponse, kp::DescribeClusterResponse>();
}

#[test]
fn protocol_header_versions_match_kafka_protocol() {
    use kp::ApiKey;
    let apis = [
        (ApiKey::Produce, p::ProduceRequest::VERSIONS),
        (ApiKey::Fetch, f::FetchRequest::VERSIONS),
        (ApiKey::ListOffsets, lo::ListOffsetsRequest::VERSIONS),
        (
            ApiKey::FindCoordinator,
            fc::FindCoordinatorRequest::VERSIONS,
        ),
        (ApiKey::CreateTopics, ct::CreateTopicsRequest::VERSIONS),
        (ApiKey::DeleteTopics, dt::DeleteTopicsRequest::VERSIONS),
        (ApiKey::DeleteRecords, dr::DeleteRecordsRequest::VERSIONS),
        (ApiKey::InitProducerId, ipi::InitProducerIdRequest::VERSIONS),
        (
            ApiKey::DescribeConfigs,
            dcf::DescribeConfigsRequest::VERSIONS,
        ),
        (ApiKey::AlterConfigs, ac::AlterConfigsRequest::VERSIONS),
        (
            ApiKey::DescribeLogDirs,
            dld::DescribeLogDirsRequest::VERSIONS,
        ),
        (
            ApiKey::CreatePartitions,
            cp::CreatePartitionsRequest::VERSIONS,
        ),
        (
            ApiKey::IncrementalAlterConfigs,
            iac::IncrementalAlterConfigsRequest::VERSIONS,
        ),
        (
            ApiKey::DescribeCluster,
            dc::DescribeClusterRequest::VERSIONS,
        ),
    ];
    for (key, (lo, hi)) in apis {
        for v in lo..=hi {
            assert_eq!(
                request_header_version(key as i16, v),
                Some(key.request_header_version(v)),
                "{key:?} v{v}"
            );
            assert_eq!(
                response_header_version(key as i16, v),
                Some(key.response_header_version(v)),
                "{key:?} v{v}"
            );
        }
    }
}

#[test]
fn protocol_produce_records_are_zero_copy_and_nullable() {
    let m = p::ProduceRequest {
        transactional_id: None,
        acks: -1,
        timeout_ms: 30_000,
        topic_data: vec![p::TopicProduceData {
            name: "t".into(),
            partition_data: vec![p::PartitionProduceData {
                index: 0,
                records: Some(Bytes::from_static(b"batch")),
            }],
            ..p::TopicProduceData::default()
        }],
    };
    #[rustfmt::skip]
    let v3: &[u8] = &[
        0xff, 0xff,             // transactional id: null
        0xff, 0xff,             // acks -1
        0x00, 0x00, 0x75, 0x30, // timeout 30000
        0x00, 0x00, 0x00, 0x01, // 1 topic
        0x00, 0x01, b't',       // name
        0x00, 0x00, 0x00, 0x01, // 1 partition
        0x00, 0x00, 0x00, 0x00, // index 0
        0x00, 0x00, 0x00, 0x05, b'b', b'a', b't', b'c', b'h', // records
    ];
    assert_eq!(&samsa_bytes(&m, 3)[..], v3);
    let frame = Bytes::from_static(v3);
    let back = p::ProduceRequest::decode_exact(frame.clone(), 3).unwrap();
    assert_eq!(back, m);
    let records = back.topic_data[0].partition_data[0]
        .records
        .as_ref()
        .unwrap();
    assert_eq!(records.as_ptr(), frame[v3.len() - 5..].as_ptr());

    // v13 names topics by id; a name there is ignorable and dropped, an id before v13 too.
    let by_id = p::ProduceRequest {
        topic_data: vec![p::TopicProduceData {
            topic_id: Uuid([7; 16]),
            ..p::TopicProduceData::default()
        }],
        ..p::ProduceRequest::default()
    };
    let back = p::ProduceRequest::decode_exact(samsa_bytes(&by_id, 13), 13).unwrap();
    assert_eq!(back, by_id);
}

#[test]
fn protocol_produce_and_fetch_refuse_versions_outside_kafka_4() {
    let err = p::ProduceRequest::default()
        .encode(&mut BytesMut::new(), 2)
        .unwrap_err();
    assert_eq!(
        err.kind,
        EncodeErrorKind::UnsupportedVersion {
            api_key: 0,
            version: 2
        }
    );
    let err = f::FetchRequest::decode_exact(Bytes::new(), 3).unwrap_err();
    assert_eq!(
        err.kind,
        DecodeErrorKind::UnsupportedVersion {
            api_key: 1,
            version: 3
        }
    );
    // A non-ignorable field absent from the version is refused, not dropped.
    let m = f::FetchRequest {
        replica_id: NodeId(3),
        ..f::FetchRequest::default()
    };
    let err = m.encode(&mut BytesMut::new(), 15).unwrap_err();
    assert_eq!(err.path, "FetchRequest.replica_id");
    assert_eq!(err.kind, EncodeErrorKind::FieldNotInVersion { version: 15 });
}

#[test]
fn protocol_fetch_response_tagged_fields() {
    // v12: a partition whose current leader is known carries it in tag 1.
    let m = f::FetchResponse {
        responses: vec![f::FetchableTopicResponse {
            topic: "t".into(),
            partitions: vec![f::PartitionData {
                current_leader: f::LeaderIdAndEpoch {
                    leader_id: NodeId(2),
                    leader_epoch: LeaderEpoch(5),
                },
                ..f::PartitionData::default()
            }],
            ..f::FetchableTopicResponse::default()
        }],
        ..f::FetchResponse::default()
    };
    let bytes = samsa_bytes(&m, 12);
    let tail: &[u8] = &[
        0x00, // null records (compact)
        0x01, // one tagged field
        0x01, 0x09, 0, 0, 0, 2, 0, 0, 0, 5, 0x00, // tag 1: leader 2, epoch 5, no tags
        0x00, // topic: no tagged fields
        0x00, // response: no tagged fields
    ];
    assert!(bytes.ends_with(tail), "{bytes:?}");
    assert_eq!(f::FetchResponse::decode_exact(bytes, 12).unwrap(), m);
}
