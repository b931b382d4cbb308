//! The request decoder against arbitrary bytes: `cargo fuzz run --fuzz-dir tests/fuzz
//! request_decoder` (from the repository root).
//!
//! An input is `api_key: i16 BE`, `api_version: i16 BE`, then a body. The body is decoded as
//! that API's request and as its response at that version, and as the request and response
//! headers of that API version. Errors are fine; the property is that no decode panics or
//! aborts (an out-of-memory abort included). A decoded message is encoded again, which must not
//! panic either.
#![no_main]

use std::sync::Once;

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use samsa::protocol::header::{RequestHeader, ResponseHeader};
use samsa::protocol::message::Message;
use samsa::protocol::wire::Reader;
use samsa::protocol::*;

/// Decodes `body` as an `M` in `version`, then encodes what it decoded. Errors are ignored.
fn decode<M: Message>(body: &Bytes, version: i16) {
    let mut r = Reader::new(body.clone());
    if let Ok(m) = M::decode(&mut r, version) {
        let mut out = BytesMut::with_capacity(m.encoded_len(version));
        let _ = m.encode(&mut out, version);
    }
    let _ = M::decode_exact(body.clone(), version);
}

/// One arm per API: `api_key => request, response`. Returns false for an unknown key.
macro_rules! dispatch {
    ($api_key:expr, $body:expr, $version:expr; $($req:ty, $resp:ty;)*) => {
        match $api_key {
            $(k if k == <$req as Message>::API_KEY => {
                decode::<$req>($body, $version);
                decode::<$resp>($body, $version);
                true
            })*
            _ => false,
        }
    };
}

/// Decodes `body` as the request and the response of `api_key`; false if the key is unknown.
fn decode_api(api_key: i16, api_version: i16, body: &Bytes) -> bool {
    dispatch!(api_key, body, api_version;
        metadata::MetadataRequest, metadata::MetadataResponse;
        api_versions::ApiVersionsRequest, api_versions::ApiVersionsResponse;
        // Produce and consume.
        produce::ProduceRequest, produce::ProduceResponse;
        fetch::FetchRequest, fetch::FetchResponse;
        list_offsets::ListOffsetsRequest, list_offsets::ListOffsetsResponse;
        find_coordinator::FindCoordinatorRequest, find_coordinator::FindCoordinatorResponse;
        create_topics::CreateTopicsRequest, create_topics::CreateTopicsResponse;
        delete_topics::DeleteTopicsRequest, delete_topics::DeleteTopicsResponse;
        delete_records::DeleteRecordsRequest, delete_records::DeleteRecordsResponse;
        init_producer_id::InitProducerIdRequest, init_producer_id::InitProducerIdResponse;
        describe_configs::DescribeConfigsRequest, describe_configs::DescribeConfigsResponse;
        alter_configs::AlterConfigsRequest, alter_configs::AlterConfigsResponse;
        describe_log_dirs::DescribeLogDirsRequest, describe_log_dirs::DescribeLogDirsResponse;
        create_partitions::CreatePartitionsRequest, create_partitions::CreatePartitionsResponse;
        incremental_alter_configs::IncrementalAlterConfigsRequest,
            incremental_alter_configs::IncrementalAlterConfigsResponse;
        describe_cluster::DescribeClusterRequest, describe_cluster::DescribeClusterResponse;
        // Groups.
        offset_commit::OffsetCommitRequest, offset_commit::OffsetCommitResponse;
        offset_fetch::OffsetFetchRequest, offset_fetch::OffsetFetchResponse;
        join_group::JoinGroupRequest, join_group::JoinGroupResponse;
        heartbeat::HeartbeatRequest, heartbeat::HeartbeatResponse;
        leave_group::LeaveGroupRequest, leave_group::LeaveGroupResponse;
        sync_group::SyncGroupRequest, sync_group::SyncGroupResponse;
        describe_groups::DescribeGroupsRequest, describe_groups::DescribeGroupsResponse;
        list_groups::ListGroupsRequest, list_groups::ListGroupsResponse;
        delete_groups::DeleteGroupsRequest, delete_groups::DeleteGroupsResponse;
        offset_delete::OffsetDeleteRequest, offset_delete::OffsetDeleteResponse;
        // Replication.
        offset_for_leader_epoch::OffsetForLeaderEpochRequest,
            offset_for_leader_epoch::OffsetForLeaderEpochResponse;
        elect_leaders::ElectLeadersRequest, elect_leaders::ElectLeadersResponse;
        alter_partition_reassignments::AlterPartitionReassignmentsRequest,
            alter_partition_reassignments::AlterPartitionReassignmentsResponse;
        list_partition_reassignments::ListPartitionReassignmentsRequest,
            list_partition_reassignments::ListPartitionReassignmentsResponse;
        vote::VoteRequest, vote::VoteResponse;
        begin_quorum_epoch::BeginQuorumEpochRequest, begin_quorum_epoch::BeginQuorumEpochResponse;
        end_quorum_epoch::EndQuorumEpochRequest, end_quorum_epoch::EndQuorumEpochResponse;
        describe_quorum::DescribeQuorumRequest, describe_quorum::DescribeQuorumResponse;
        alter_partition::AlterPartitionRequest, alter_partition::AlterPartitionResponse;
        fetch_snapshot::FetchSnapshotRequest, fetch_snapshot::FetchSnapshotResponse;
        broker_registration::BrokerRegistrationRequest,
            broker_registration::BrokerRegistrationResponse;
        broker_heartbeat::BrokerHeartbeatRequest, broker_heartbeat::BrokerHeartbeatResponse;
        describe_topic_partitions::DescribeTopicPartitionsRequest,
            describe_topic_partitions::DescribeTopicPartitionsResponse;
    )
}

static EVERY_API_DISPATCHED: Once = Once::new();

fuzz_target!(|data: &[u8]| {
    // A new API added to the codec's table but not above fails the first run, loudly.
    EVERY_API_DISPATCHED.call_once(|| {
        for api in APIS {
            assert!(
                decode_api(api.api_key, api.versions.0, &Bytes::new()),
                "API {} ({}) is missing from the fuzz target's dispatch",
                api.api_key,
                api.name
            );
        }
    });

    let Some((head, body)) = data.split_first_chunk::<4>() else {
        return;
    };
    let api_key = i16::from_be_bytes([head[0], head[1]]);
    let api_version = i16::from_be_bytes([head[2], head[3]]);
    let body = Bytes::copy_from_slice(body);

    decode_api(api_key, api_version, &body);
    if let Some(v) = request_header_version(api_key, api_version) {
        decode::<RequestHeader>(&body, v);
    }
    if let Some(v) = response_header_version(api_key, api_version) {
        decode::<ResponseHeader>(&body, v);
    }
});
