//! Differential tests of the classic consumer group messages (OffsetCommit, OffsetFetch,
//! JoinGroup, Heartbeat, LeaveGroup, SyncGroup, DescribeGroups, ListGroups, DeleteGroups,
//! OffsetDelete) against `kafka-protocol` 0.18, an independent implementation used here only
//! as an oracle, compared on bytes, as `codec_differential.rs` does for the first messages.
//!
//! For every message and every version of it:
//! - Samsa encodes a proptest value; `kafka-protocol` must decode all of it and re-encode the
//!   same bytes, with the same computed size; Samsa decodes those bytes back to the value.
//! - In flexible versions, an unknown tagged field spliced into the top-level tagged section
//!   is kept by `kafka-protocol` and skipped by Samsa.
//! - `kafka-protocol`'s default message decodes in Samsa and re-encodes to the same bytes, and
//!   Samsa's default encodes to those bytes too (both implement the same schema defaults).
//!
//! Every test name starts with "protocol_".

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages as kp;
use kafka_protocol::protocol::{Decodable, Encodable};
use samsa::protocol::delete_groups::*;
use samsa::protocol::describe_groups::*;
use samsa::protocol::heartbeat::*;
use samsa::protocol::join_group::*;
use samsa::protocol::leave_group::*;
use samsa::protocol::list_groups::*;
use samsa::protocol::offset_commit::*;
use samsa::protocol::offset_delete::*;
use samsa::protocol::offset_fetch::*;
use samsa::protocol::sync_group::*;
use samsa::protocol::wire::{DecodeErrorKind, EncodeErrorKind, Uuid};
use samsa::protocol::{api_info, request_header_version, response_header_version};

#[path = "../support/strategies_groups.rs"]
mod strategies;
use strategies::Msg;

#[path = "../support/differential_support.rs"]
mod differential_support;
use differential_support::{differential_cases, kafka_default_roundtrip, samsa_bytes};

/// Proptest cases per message version.
const CASES: u32 = 256;

/// `kafka-protocol`'s default of `T` at version `v`, decoded and re-encoded by Samsa; and
/// Samsa's default of `M`, which must encode to the same bytes.
fn defaults<M: Msg, T: Encodable + Default>(v: i16) {
    let (m, theirs) = kafka_default_roundtrip::<M, T>(v);
    assert_eq!(m, M::default(), "{} v{v}: decoded default", M::NAME);
    assert_eq!(samsa_bytes(&M::default(), v), theirs, "{} v{v}", M::NAME);
}

/// Every check above, at every version of `M`, `CASES` proptest cases each.
fn check<M: Msg, T: Encodable + Decodable + Default>() {
    let (lo, hi) = M::VERSIONS;
    for v in lo..=hi {
        defaults::<M, T>(v);
        // None of these messages has known top-level tagged fields, so the tagged section of
        // a flexible version is always the single byte 0.
        differential_cases::<M, T>(v, CASES, |_| true);
    }
}

macro_rules! differential_tests {
    ($($test:ident: $ours:ty => $theirs:ty;)*) => {
        $(
            #[test]
            fn $test() {
                check::<$ours, $theirs>();
            }
        )*
    };
}

differential_tests! {
    protocol_offset_commit_request_matches_kafka_protocol:
        OffsetCommitRequest => kp::OffsetCommitRequest;
    protocol_offset_commit_response_matches_kafka_protocol:
        OffsetCommitResponse => kp::OffsetCommitResponse;
    protocol_offset_fetch_request_matches_kafka_protocol:
        OffsetFetchRequest => kp::OffsetFetchRequest;
    protocol_offset_fetch_response_matches_kafka_protocol:
        OffsetFetchResponse => kp::OffsetFetchResponse;
    protocol_join_group_request_matches_kafka_protocol:
        JoinGroupRequest => kp::JoinGroupRequest;
    protocol_join_group_response_matches_kafka_protocol:
        JoinGroupResponse => kp::JoinGroupResponse;
    protocol_heartbeat_request_matches_kafka_protocol:
        HeartbeatRequest => kp::HeartbeatRequest;
    protocol_heartbeat_response_matches_kafka_protocol:
        HeartbeatResponse => kp::HeartbeatResponse;
    protocol_leave_group_request_matches_kafka_protocol:
        LeaveGroupRequest => kp::LeaveGroupRequest;
    protocol_leave_group_response_matches_kafka_protocol:
        LeaveGroupResponse => kp::LeaveGroupResponse;
    protocol_sync_group_request_matches_kafka_protocol:
        SyncGroupRequest => kp::SyncGroupRequest;
    protocol_sync_group_response_matches_kafka_protocol:
        SyncGroupResponse => kp::SyncGroupResponse;
    protocol_describe_groups_request_matches_kafka_protocol:
        DescribeGroupsRequest => kp::DescribeGroupsRequest;
    protocol_describe_groups_response_matches_kafka_protocol:
        DescribeGroupsResponse => kp::DescribeGroupsResponse;
    protocol_list_groups_request_matches_kafka_protocol:
        ListGroupsRequest => kp::ListGroupsRequest;
    protocol_list_groups_response_matches_kafka_protocol:
        ListGroupsResponse => kp::ListGroupsResponse;
    protocol_delete_groups_request_matches_kafka_protocol:
        DeleteGroupsRequest => kp::DeleteGroupsRequest;
    protocol_delete_groups_response_matches_kafka_protocol:
        DeleteGroupsResponse => kp::DeleteGroupsResponse;
    protocol_offset_delete_request_matches_kafka_protocol:
        OffsetDeleteRequest => kp::OffsetDeleteRequest;
    protocol_offset_delete_response_matches_kafka_protocol:
        OffsetDeleteResponse => kp::OffsetDeleteResponse;
}

#[test]
fn protocol_group_apis_versions_and_header_versions_match_kafka_protocol() {
    use kafka_protocol::messages::ApiKey;
    fn check_api<
        Req: Msg,
        Res: Msg,
        KReq: kafka_protocol::protocol::Message,
        KRes: kafka_protocol::protocol::Message,
    >(
        key: ApiKey,
    ) {
        let info = api_info(key as i16).unwrap_or_else(|| panic!("{key:?} not in APIS"));
        assert_eq!(info.api_key, Req::API_KEY);
        assert_eq!(Res::API_KEY, Req::API_KEY);
        assert_eq!(info.versions, Req::VERSIONS);
        assert_eq!(
            Req::VERSIONS,
            (KReq::VERSIONS.min, KReq::VERSIONS.max),
            "{key:?} request"
        );
        assert_eq!(
            Res::VERSIONS,
            (KRes::VERSIONS.min, KRes::VERSIONS.max),
            "{key:?} response"
        );
        for v in Req::VERSIONS.0..=Req::VERSIONS.1 {
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
    check_api::<
        OffsetCommitRequest,
        OffsetCommitResponse,
        kp::OffsetCommitRequest,
        kp::OffsetCommitResponse,
    >(ApiKey::OffsetCommit);
    check_api::<
        OffsetFetchRequest,
        OffsetFetchResponse,
        kp::OffsetFetchRequest,
        kp::OffsetFetchResponse,
    >(ApiKey::OffsetFetch);
    check_api::<JoinGroupRequest, JoinGroupResponse, kp::JoinGroupRequest, kp::JoinGroupResponse>(
        ApiKey::JoinGroup,
    );
    check_api::<HeartbeatRequest, HeartbeatResponse, kp::HeartbeatRequest, kp::HeartbeatResponse>(
        ApiKey::Heartbeat,
    );
    check_api::<LeaveGroupRequest, LeaveGroupResponse, kp::LeaveGroupRequest, kp::LeaveGroupResponse>(
        ApiKey::LeaveGroup,
    );
    check_api::<SyncGroupRequest, SyncGroupResponse, kp::SyncGroupRequest, kp::SyncGroupResponse>(
        ApiKey::SyncGroup,
    );
    check_api::<
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        kp::DescribeGroupsRequest,
        kp::DescribeGroupsResponse,
    >(ApiKey::DescribeGroups);
    check_api::<ListGroupsRequest, ListGroupsResponse, kp::ListGroupsRequest, kp::ListGroupsResponse>(
        ApiKey::ListGroups,
    );
    check_api::<
        DeleteGroupsRequest,
        DeleteGroupsResponse,
        kp::DeleteGroupsRequest,
        kp::DeleteGroupsResponse,
    >(ApiKey::DeleteGroups);
    check_api::<
        OffsetDeleteRequest,
        OffsetDeleteResponse,
        kp::OffsetDeleteRequest,
        kp::OffsetDeleteResponse,
    >(ApiKey::OffsetDelete);
}

#[test]
fn protocol_fixture_heartbeat_request_v3_and_v4() {
    let m = HeartbeatRequest {
        group_id: "g".into(),
        generation_id: 7,
        member_id: "m".into(),
        group_instance_id: None,
    };
    #[rustfmt::skip]
    let v3: &[u8] = &[
        0x00, 0x01, b'g',       // group id: int16 length
        0x00, 0x00, 0x00, 0x07, // generation
        0x00, 0x01, b'm',       // member id
        0xff, 0xff,             // null instance id
    ];
    assert_eq!(&samsa_bytes(&m, 3)[..], v3);
    #[rustfmt::skip]
    let v4: &[u8] = &[
        0x02, b'g',             // compact string
        0x00, 0x00, 0x00, 0x07,
        0x02, b'm',
        0x00,                   // compact null
        0x00,                   // no tagged fields
    ];
    assert_eq!(&samsa_bytes(&m, 4)[..], v4);
    assert_eq!(
        HeartbeatRequest::decode_exact(Bytes::from_static(v4), 4).unwrap(),
        m
    );
    // v0-2 have no instance id: a static member cannot be expressed there.
    let static_member = HeartbeatRequest {
        group_instance_id: Some("i".into()),
        ..m.clone()
    };
    let err = static_member.encode(&mut BytesMut::new(), 2).unwrap_err();
    assert_eq!(err.path, "HeartbeatRequest.group_instance_id");
    assert_eq!(err.kind, EncodeErrorKind::FieldNotInVersion { version: 2 });
}

#[test]
fn protocol_fixture_offset_fetch_null_topics_only_where_allowed() {
    // v1 refuses a null topic list, v2-7 take it to mean all topics, v8+ carries groups.
    let all = OffsetFetchRequest {
        group_id: "g".into(),
        topics: None,
        ..OffsetFetchRequest::default()
    };
    let err = all.encode(&mut BytesMut::new(), 1).unwrap_err();
    assert_eq!(err.kind, EncodeErrorKind::NullNotAllowed);
    assert_eq!(err.path, "OffsetFetchRequest.topics");
    assert_eq!(
        &samsa_bytes(&all, 2)[..],
        &[0, 1, b'g', 0xff, 0xff, 0xff, 0xff]
    );
    let err = OffsetFetchRequest::decode_exact(
        Bytes::from_static(&[0, 1, b'g', 0xff, 0xff, 0xff, 0xff]),
        1,
    )
    .unwrap_err();
    assert_eq!(err.kind, DecodeErrorKind::NullNotAllowed);
    let err = all.encode(&mut BytesMut::new(), 8).unwrap_err();
    assert_eq!(err.kind, EncodeErrorKind::FieldNotInVersion { version: 8 });
}

#[test]
fn protocol_fixture_offset_commit_response_v10_names_topics_by_id() {
    let m = OffsetCommitResponse {
        throttle_time_ms: 0,
        topics: vec![OffsetCommitResponseTopic {
            name: "t".into(),
            topic_id: Uuid([9; 16]),
            partitions: vec![OffsetCommitResponsePartition {
                partition_index: 1,
                error_code: 0,
            }],
        }],
    };
    let v10 = samsa_bytes(&m, 10);
    // throttle (4) + array (1) + uuid (16) + array (1) + partition (4 + 2 + 1) + tags (1) * 2
    assert_eq!(v10.len(), 4 + 1 + 16 + 1 + 7 + 1 + 1);
    assert!(!v10.windows(2).any(|w| w == [2, b't']));
    // The (ignorable) name is dropped in v10 and the id in v9.
    let back = OffsetCommitResponse::decode_exact(v10, 10).unwrap();
    assert_eq!(back.topics[0].name, "");
    assert_eq!(back.topics[0].topic_id, Uuid([9; 16]));
    let back = OffsetCommitResponse::decode_exact(samsa_bytes(&m, 9), 9).unwrap();
    assert_eq!(back.topics[0].name, "t");
    assert_eq!(back.topics[0].topic_id, Uuid::ZERO);
}
