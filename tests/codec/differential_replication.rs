//! Differential tests of the replication and KRaft message descriptions against
//! `kafka-protocol` (0.18, generated from Kafka 4.1's schemas), used only as an oracle, in the
//! manner of `codec_differential.rs`:
//! - For every message and every version, Samsa encodes a proptest value; `kafka-protocol`
//!   decodes all of it and re-encodes the same bytes, with the same computed size; Samsa
//!   decodes those bytes back to the value and re-encodes them identically.
//! - An unknown tagged field spliced into the top-level tagged section is kept by
//!   `kafka-protocol` and skipped by Samsa.
//! - `kafka-protocol`'s default message at every version decodes in Samsa and re-encodes to the
//!   same bytes, and Samsa's defaults encode to those bytes too.
//! - The API table (versions, header versions) agrees with `kafka-protocol`'s.
//!
//! Every test name starts with "protocol_".

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages as kp;
use kafka_protocol::protocol::Encodable;
use proptest::prelude::*;
use samsa::protocol::allocate_producer_ids::*;
use samsa::protocol::alter_partition::*;
use samsa::protocol::alter_partition_reassignments::*;
use samsa::protocol::begin_quorum_epoch::*;
use samsa::protocol::broker_heartbeat::*;
use samsa::protocol::broker_registration::*;
use samsa::protocol::describe_quorum::*;
use samsa::protocol::describe_topic_partitions::*;
use samsa::protocol::elect_leaders::*;
use samsa::protocol::end_quorum_epoch::*;
use samsa::protocol::fetch_snapshot::*;
use samsa::protocol::list_partition_reassignments::*;
use samsa::protocol::offset_for_leader_epoch::*;
use samsa::protocol::types::NodeId;
use samsa::protocol::vote::*;
use samsa::protocol::wire::{DecodeErrorKind, EncodeErrorKind, Uuid};
use samsa::protocol::{api_info, request_header_version, response_header_version};

#[path = "../support/strategies_replication.rs"]
mod strategies;
use strategies::{versioned, Msg};

#[path = "../support/differential_support.rs"]
mod differential_support;
use differential_support::{differential, kafka_default_roundtrip, samsa_bytes};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        ..ProptestConfig::default()
    }
}

/// One proptest per message: every version, values from its strategy. `$empty` says whether
/// the message's top-level tagged section is empty (always, for messages without any).
macro_rules! differential_test {
    ($name:ident, $samsa:ty, $kafka:ty) => {
        differential_test!($name, $samsa, $kafka, |_m| true);
    };
    ($name:ident, $samsa:ty, $kafka:ty, |$m:ident| $empty:expr) => {
        proptest! {
            #![proptest_config(config())]
            #[test]
            fn $name((v, m) in versioned::<$samsa>()) {
                let $m = &m;
                let empty = $empty;
                differential::<$samsa, $kafka>(v, &m, empty)?;
            }
        }
    };
}

differential_test!(
    protocol_offset_for_leader_epoch_request_matches_kafka_protocol,
    OffsetForLeaderEpochRequest,
    kp::OffsetForLeaderEpochRequest
);
differential_test!(
    protocol_offset_for_leader_epoch_response_matches_kafka_protocol,
    OffsetForLeaderEpochResponse,
    kp::OffsetForLeaderEpochResponse
);
differential_test!(
    protocol_elect_leaders_request_matches_kafka_protocol,
    ElectLeadersRequest,
    kp::ElectLeadersRequest
);
differential_test!(
    protocol_elect_leaders_response_matches_kafka_protocol,
    ElectLeadersResponse,
    kp::ElectLeadersResponse
);
differential_test!(
    protocol_alter_partition_reassignments_request_matches_kafka_protocol,
    AlterPartitionReassignmentsRequest,
    kp::AlterPartitionReassignmentsRequest
);
differential_test!(
    protocol_alter_partition_reassignments_response_matches_kafka_protocol,
    AlterPartitionReassignmentsResponse,
    kp::AlterPartitionReassignmentsResponse
);
differential_test!(
    protocol_list_partition_reassignments_request_matches_kafka_protocol,
    ListPartitionReassignmentsRequest,
    kp::ListPartitionReassignmentsRequest
);
differential_test!(
    protocol_list_partition_reassignments_response_matches_kafka_protocol,
    ListPartitionReassignmentsResponse,
    kp::ListPartitionReassignmentsResponse
);
differential_test!(
    protocol_vote_request_matches_kafka_protocol,
    VoteRequest,
    kp::VoteRequest
);
differential_test!(
    protocol_vote_response_matches_kafka_protocol,
    VoteResponse,
    kp::VoteResponse,
    |m| m.node_endpoints.is_empty()
);
differential_test!(
    protocol_begin_quorum_epoch_request_matches_kafka_protocol,
    BeginQuorumEpochRequest,
    kp::BeginQuorumEpochRequest
);
differential_test!(
    protocol_begin_quorum_epoch_response_matches_kafka_protocol,
    BeginQuorumEpochResponse,
    kp::BeginQuorumEpochResponse,
    |m| m.node_endpoints.is_empty()
);
differential_test!(
    protocol_end_quorum_epoch_request_matches_kafka_protocol,
    EndQuorumEpochRequest,
    kp::EndQuorumEpochRequest
);
differential_test!(
    protocol_end_quorum_epoch_response_matches_kafka_protocol,
    EndQuorumEpochResponse,
    kp::EndQuorumEpochResponse,
    |m| m.node_endpoints.is_empty()
);
differential_test!(
    protocol_describe_quorum_request_matches_kafka_protocol,
    DescribeQuorumRequest,
    kp::DescribeQuorumRequest
);
differential_test!(
    protocol_describe_quorum_response_matches_kafka_protocol,
    DescribeQuorumResponse,
    kp::DescribeQuorumResponse
);
differential_test!(
    protocol_alter_partition_request_matches_kafka_protocol,
    AlterPartitionRequest,
    kp::AlterPartitionRequest
);
differential_test!(
    protocol_alter_partition_response_matches_kafka_protocol,
    AlterPartitionResponse,
    kp::AlterPartitionResponse
);
differential_test!(
    protocol_fetch_snapshot_request_matches_kafka_protocol,
    FetchSnapshotRequest,
    kp::FetchSnapshotRequest,
    |m| m.cluster_id.is_none()
);
differential_test!(
    protocol_fetch_snapshot_response_matches_kafka_protocol,
    FetchSnapshotResponse,
    kp::FetchSnapshotResponse,
    |m| m.node_endpoints.is_empty()
);
differential_test!(
    protocol_broker_registration_request_matches_kafka_protocol,
    BrokerRegistrationRequest,
    kp::BrokerRegistrationRequest
);
differential_test!(
    protocol_broker_registration_response_matches_kafka_protocol,
    BrokerRegistrationResponse,
    kp::BrokerRegistrationResponse
);
differential_test!(
    protocol_broker_heartbeat_request_matches_kafka_protocol,
    BrokerHeartbeatRequest,
    kp::BrokerHeartbeatRequest,
    |m| m.offline_log_dirs.is_empty()
);
differential_test!(
    protocol_broker_heartbeat_response_matches_kafka_protocol,
    BrokerHeartbeatResponse,
    kp::BrokerHeartbeatResponse
);
differential_test!(
    protocol_describe_topic_partitions_request_matches_kafka_protocol,
    DescribeTopicPartitionsRequest,
    kp::DescribeTopicPartitionsRequest
);
differential_test!(
    protocol_describe_topic_partitions_response_matches_kafka_protocol,
    DescribeTopicPartitionsResponse,
    kp::DescribeTopicPartitionsResponse
);
differential_test!(
    protocol_allocate_producer_ids_request_matches_kafka_protocol,
    AllocateProducerIdsRequest,
    kp::AllocateProducerIdsRequest
);
differential_test!(
    protocol_allocate_producer_ids_response_matches_kafka_protocol,
    AllocateProducerIdsResponse,
    kp::AllocateProducerIdsResponse
);

/// `kafka-protocol`'s default of `T` at every version of `M`: Samsa decodes it and re-encodes
/// the same bytes, and Samsa's own default encodes to those bytes as well (both implement the
/// same schema defaults).
fn kafka_defaults<M: Msg, T: Encodable + Default>() {
    for v in M::VERSIONS.0..=M::VERSIONS.1 {
        let (_, theirs) = kafka_default_roundtrip::<M, T>(v);
        assert_eq!(
            samsa_bytes(&M::default(), v),
            theirs,
            "{} v{v} default",
            M::NAME
        );
    }
}

#[test]
fn protocol_replication_kafka_protocol_defaults_roundtrip() {
    kafka_defaults::<OffsetForLeaderEpochRequest, kp::OffsetForLeaderEpochRequest>();
    kafka_defaults::<OffsetForLeaderEpochResponse, kp::OffsetForLeaderEpochResponse>();
    kafka_defaults::<ElectLeadersRequest, kp::ElectLeadersRequest>();
    kafka_defaults::<ElectLeadersResponse, kp::ElectLeadersResponse>();
    kafka_defaults::<AlterPartitionReassignmentsRequest, kp::AlterPartitionReassignmentsRequest>();
    kafka_defaults::<AlterPartitionReassignmentsResponse, kp::AlterPartitionReassignmentsResponse>(
    );
    kafka_defaults::<ListPartitionReassignmentsRequest, kp::ListPartitionReassignmentsRequest>();
    kafka_defaults::<ListPartitionReassignmentsResponse, kp::ListPartitionReassignmentsResponse>();
    kafka_defaults::<VoteRequest, kp::VoteRequest>();
    kafka_defaults::<VoteResponse, kp::VoteResponse>();
    kafka_defaults::<BeginQuorumEpochRequest, kp::BeginQuorumEpochRequest>();
    kafka_defaults::<BeginQuorumEpochResponse, kp::BeginQuorumEpochResponse>();
    kafka_defaults::<EndQuorumEpochRequest, kp::EndQuorumEpochRequest>();
    kafka_defaults::<EndQuorumEpochResponse, kp::EndQuorumEpochResponse>();
    kafka_defaults::<DescribeQuorumRequest, kp::DescribeQuorumRequest>();
    kafka_defaults::<DescribeQuorumResponse, kp::DescribeQuorumResponse>();
    kafka_defaults::<AlterPartitionRequest, kp::AlterPartitionRequest>();
    kafka_defaults::<AlterPartitionResponse, kp::AlterPartitionResponse>();
    kafka_defaults::<FetchSnapshotRequest, kp::FetchSnapshotRequest>();
    kafka_defaults::<FetchSnapshotResponse, kp::FetchSnapshotResponse>();
    kafka_defaults::<BrokerRegistrationRequest, kp::BrokerRegistrationRequest>();
    kafka_defaults::<BrokerRegistrationResponse, kp::BrokerRegistrationResponse>();
    kafka_defaults::<BrokerHeartbeatRequest, kp::BrokerHeartbeatRequest>();
    kafka_defaults::<BrokerHeartbeatResponse, kp::BrokerHeartbeatResponse>();
    kafka_defaults::<DescribeTopicPartitionsRequest, kp::DescribeTopicPartitionsRequest>();
    kafka_defaults::<DescribeTopicPartitionsResponse, kp::DescribeTopicPartitionsResponse>();
    kafka_defaults::<AllocateProducerIdsRequest, kp::AllocateProducerIdsRequest>();
    kafka_defaults::<AllocateProducerIdsResponse, kp::AllocateProducerIdsResponse>();
}

/// The request and response of an API share their versions and flexible versions, and both
/// agree with `kafka-protocol`'s.
fn api_agrees<Req, Resp, KReq, KResp>(key: kp::ApiKey)
where
    Req: Msg,
    Resp: Msg,
    KReq: kafka_protocol::protocol::Message,
    KResp: kafka_protocol::protocol::Message,
{
    let info = api_info(Req::API_KEY).unwrap_or_else(|| panic!("{} not in APIS", Req::NAME));
    assert_eq!(info.api_key, key as i16, "{}", Req::NAME);
    assert_eq!(Resp::API_KEY, Req::API_KEY, "{}", Resp::NAME);
    assert_eq!(info.versions, Req::VERSIONS, "{}", Req::NAME);
    assert_eq!(Resp::VERSIONS, Req::VERSIONS, "{}", Resp::NAME);
    assert_eq!(Resp::FLEXIBLE_VERSIONS_FROM, Req::FLEXIBLE_VERSIONS_FROM);
    assert_eq!(
        (KReq::VERSIONS.min, KReq::VERSIONS.max),
        Req::VERSIONS,
        "{}",
        Req::NAME
    );
    assert_eq!(
        (KResp::VERSIONS.min, KResp::VERSIONS.max),
        Resp::VERSIONS,
        "{}",
        Resp::NAME
    );
    for v in Req::VERSIONS.0..=Req::VERSIONS.1 {
        assert_eq!(
            request_header_version(Req::API_KEY, v),
            Some(key.request_header_version(v)),
            "{} v{v}",
            Req::NAME
        );
        assert_eq!(
            response_header_version(Req::API_KEY, v),
            Some(key.response_header_version(v)),
            "{} v{v}",
            Resp::NAME
        );
    }
}

#[test]
fn protocol_replication_api_table_matches_kafka_protocol() {
    use kp::ApiKey;
    api_agrees::<
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
        kp::OffsetForLeaderEpochRequest,
        kp::OffsetForLeaderEpochResponse,
    >(ApiKey::OffsetForLeaderEpoch);
    api_agrees::<
        ElectLeadersRequest,
        ElectLeadersResponse,
        kp::ElectLeadersRequest,
        kp::ElectLeadersResponse,
    >(ApiKey::ElectLeaders);
    api_agrees::<
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        kp::AlterPartitionReassignmentsRequest,
        kp::AlterPartitionReassignmentsResponse,
    >(ApiKey::AlterPartitionReassignments);
    api_agrees::<
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
        kp::ListPartitionReassignmentsRequest,
        kp::ListPartitionReassignmentsResponse,
    >(ApiKey::ListPartitionReassignments);
    api_agrees::<VoteRequest, VoteResponse, kp::VoteRequest, kp::VoteResponse>(ApiKey::Vote);
    api_agrees::<
        BeginQuorumEpochRequest,
        BeginQuorumEpochResponse,
        kp::BeginQuorumEpochRequest,
        kp::BeginQuorumEpochResponse,
    >(ApiKey::BeginQuorumEpoch);
    api_agrees::<
        EndQuorumEpochRequest,
        EndQuorumEpochResponse,
        kp::EndQuorumEpochRequest,
        kp::EndQuorumEpochResponse,
    >(ApiKey::EndQuorumEpoch);
    api_agrees::<
        DescribeQuorumRequest,
        DescribeQuorumResponse,
        kp::DescribeQuorumRequest,
        kp::DescribeQuorumResponse,
    >(ApiKey::DescribeQuorum);
    api_agrees::<
        AlterPartitionRequest,
        AlterPartitionResponse,
        kp::AlterPartitionRequest,
        kp::AlterPartitionResponse,
    >(ApiKey::AlterPartition);
    api_agrees::<
        FetchSnapshotRequest,
        FetchSnapshotResponse,
        kp::FetchSnapshotRequest,
        kp::FetchSnapshotResponse,
    >(ApiKey::FetchSnapshot);
    api_agrees::<
        BrokerRegistrationRequest,
        BrokerRegistrationResponse,
        kp::BrokerRegistrationRequest,
        kp::BrokerRegistrationResponse,
    >(ApiKey::BrokerRegistration);
    api_agrees::<
        BrokerHeartbeatRequest,
        BrokerHeartbeatResponse,
        kp::BrokerHeartbeatRequest,
        kp::BrokerHeartbeatResponse,
    >(ApiKey::BrokerHeartbeat);
    api_agrees::<
        DescribeTopicPartitionsRequest,
        DescribeTopicPartitionsResponse,
        kp::DescribeTopicPartitionsRequest,
        kp::DescribeTopicPartitionsResponse,
    >(ApiKey::DescribeTopicPartitions);
    api_agrees::<
        AllocateProducerIdsRequest,
        AllocateProducerIdsResponse,
        kp::AllocateProducerIdsRequest,
        kp::AllocateProducerIdsResponse,
    >(ApiKey::AllocateProducerIds);
}

#[test]
fn protocol_fixture_describe_topic_partitions_cursor_is_a_nullable_struct() {
    let mut m = DescribeTopicPartitionsRequest::default();
    #[rustfmt::skip]
    let null_cursor: &[u8] = &[
        0x01,                   // compact array: no topics
        0x00, 0x00, 0x07, 0xd0, // response partition limit 2000
        0xff,                   // cursor: null (-1)
        0x00,                   // no tagged fields
    ];
    assert_eq!(&samsa_bytes(&m, 0)[..], null_cursor);
    m.cursor = Some(DescribeTopicPartitionsCursor {
        topic_name: "t".into(),
        partition_index: 3,
    });
    #[rustfmt::skip]
    let with_cursor: &[u8] = &[
        0x01,
        0x00, 0x00, 0x07, 0xd0,
        0x01,                   // cursor: present
        0x02, b't',             // topic name
        0x00, 0x00, 0x00, 0x03, // partition index
        0x00,                   // the cursor's tagged fields
        0x00,
    ];
    assert_eq!(&samsa_bytes(&m, 0)[..], with_cursor);
    assert_eq!(
        DescribeTopicPartitionsRequest::decode_exact(Bytes::from_static(with_cursor), 0).unwrap(),
        m
    );
    // As Kafka's reader does, any negative marker is null; a truncated cursor is an error.
    let mut other_null = null_cursor.to_vec();
    other_null[5] = 0x80;
    let back = DescribeTopicPartitionsRequest::decode_exact(Bytes::from(other_null), 0).unwrap();
    assert_eq!(back.cursor, None);
    let err =
        DescribeTopicPartitionsRequest::decode_exact(Bytes::copy_from_slice(&with_cursor[..8]), 0)
            .unwrap_err();
    assert!(
        err.path
            .starts_with("DescribeTopicPartitionsRequest.cursor"),
        "{}",
        err.path
    );
}

#[test]
fn protocol_fixture_fetch_snapshot_tagged_fields() {
    let m = FetchSnapshotRequest {
        cluster_id: Some("c".into()),
        ..FetchSnapshotRequest::default()
    };
    #[rustfmt::skip]
    let expected: &[u8] = &[
        0xff, 0xff, 0xff, 0xff, // replica id -1
        0x7f, 0xff, 0xff, 0xff, // max bytes
        0x01,                   // no topics
        0x01,                   // one tagged field
        0x00, 0x02, 0x02, b'c', // tag 0, 2 bytes: compact string "c"
    ];
    assert_eq!(&samsa_bytes(&m, 0)[..], expected);
    assert_eq!(
        FetchSnapshotRequest::decode_exact(Bytes::from_static(expected), 0).unwrap(),
        m
    );
    // A response partition's current leader is tagged: written only when not the default.
    let mut p = FetchSnapshotResponsePartition::default();
    let plain = samsa_bytes_nested(&p);
    p.current_leader.leader_id = NodeId(1);
    let tagged = samsa_bytes_nested(&p);
    assert_eq!(plain.last(), Some(&0));
    // One tagged field: tag 0, 9 bytes (two int32s and the struct's empty tagged section).
    assert_eq!(&tagged[plain.len() - 1..plain.len() + 2], &[1, 0, 9]);
}

fn samsa_bytes_nested(p: &FetchSnapshotResponsePartition) -> Bytes {
    let m = FetchSnapshotResponse {
        topics: vec![FetchSnapshotResponseTopic {
            name: String::new(),
            partitions: vec![p.clone()],
        }],
        ..FetchSnapshotResponse::default()
    };
    // The partition is the last thing before the topic's and the response's tagged sections.
    let b = samsa_bytes(&m, 1);
    b.slice(..b.len() - 2)
}

#[test]
fn protocol_replication_refuses_fields_absent_from_version() {
    let m = VoteRequest {
        topics: vec![VoteRequestTopic {
            topic_name: "__cluster_metadata".into(),
            partitions: vec![VoteRequestPartition {
                pre_vote: true,
                ..VoteRequestPartition::default()
            }],
        }],
        ..VoteRequest::default()
    };
    let err = m.encode(&mut BytesMut::new(), 1).unwrap_err();
    assert_eq!(err.path, "VoteRequest.topics[0].partitions[0].pre_vote");
    assert_eq!(err.kind, EncodeErrorKind::FieldNotInVersion { version: 1 });
    assert!(m.encode(&mut BytesMut::new(), 2).is_ok());

    // An ignorable field is dropped silently instead.
    let m = VoteRequest {
        voter_id: NodeId(7),
        ..VoteRequest::default()
    };
    let b = samsa_bytes(&m, 0);
    assert_eq!(
        VoteRequest::decode_exact(b, 0).unwrap().voter_id,
        NodeId(-1)
    );

    // AlterPartitionReassignments v0 cannot say that replication factor changes are refused.
    let m = AlterPartitionReassignmentsRequest {
        allow_replication_factor_change: false,
        ..AlterPartitionReassignmentsRequest::default()
    };
    let err = m.encode(&mut BytesMut::new(), 0).unwrap_err();
    assert_eq!(
        err.path,
        "AlterPartitionReassignmentsRequest.allow_replication_factor_change"
    );

    // AlterPartition v2 carries a plain ISR, v3 one with broker epochs.
    let m = AlterPartitionRequest {
        topics: vec![AlterPartitionRequestTopic {
            topic_id: Uuid([1; 16]),
            partitions: vec![AlterPartitionRequestPartition {
                new_isr: vec![NodeId(1), NodeId(2)],
                ..AlterPartitionRequestPartition::default()
            }],
        }],
        ..AlterPartitionRequest::default()
    };
    assert!(m.encode(&mut BytesMut::new(), 2).is_ok());
    let err = m.encode(&mut BytesMut::new(), 3).unwrap_err();
    assert_eq!(
        err.path,
        "AlterPartitionRequest.topics[0].partitions[0].new_isr"
    );

    // Kafka 4 dropped OffsetForLeaderEpoch v0-1 and AlterPartition v0-1.
    let err = OffsetForLeaderEpochRequest::default()
        .encode(&mut BytesMut::new(), 1)
        .unwrap_err();
    assert_eq!(
        err.kind,
        EncodeErrorKind::UnsupportedVersion {
            api_key: 23,
            version: 1
        }
    );
    let err = AlterPartitionRequest::decode_exact(Bytes::new(), 1).unwrap_err();
    assert_eq!(
        err.kind,
        DecodeErrorKind::UnsupportedVersion {
            api_key: 56,
            version: 1
        }
    );
}

#[test]
fn protocol_replication_null_only_where_allowed() {
    // DescribeQuorum's error messages are nullable only from v2, where they exist.
    let m = DescribeQuorumResponse {
        error_message: None,
        ..DescribeQuorumResponse::default()
    };
    assert!(m.encode(&mut BytesMut::new(), 2).is_ok());
    // v1 lacks the (ignorable) field, so the null is dropped.
    assert!(m.encode(&mut BytesMut::new(), 1).is_ok());
    // A null in a non-nullable records field is refused.
    let m = FetchSnapshotResponse {
        topics: vec![FetchSnapshotResponseTopic {
            name: "t".into(),
            partitions: vec![FetchSnapshotResponsePartition {
                unaligned_records: None,
                ..FetchSnapshotResponsePartition::default()
            }],
        }],
        ..FetchSnapshotResponse::default()
    };
    let err = m.encode(&mut BytesMut::new(), 0).unwrap_err();
    assert_eq!(err.kind, EncodeErrorKind::NullNotAllowed);
    assert_eq!(
        err.path,
        "FetchSnapshotResponse.topics[0].partitions[0].unaligned_records"
    );
    // The cluster id of BeginQuorumEpoch v0 is a classic nullable string.
    let m = BeginQuorumEpochRequest::default();
    assert_eq!(&samsa_bytes(&m, 0)[..], &[0xff, 0xff, 0, 0, 0, 0]);
}
