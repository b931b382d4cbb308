//! IO-free wire formats: Kafka's record batch (magic v2) and the declarative message codec.
//!
//! [`wire`] holds the primitive types and the reader, [`message`] the `message!` macro that
//! derives a codec from each message's description, and the remaining modules describe the
//! messages themselves. This module also owns the choice of header version for an API version.

pub mod acl;
pub mod api_versions;
pub mod compression;
pub mod error;
pub mod frame;
pub mod header;
pub mod message;
pub mod metadata;
pub mod record_batch;
pub mod types;
pub mod wire;
// Message modules, one file per API, grouped by milestone (keep each group's lines together):
// @produce-consume-modules
pub mod alter_configs;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_log_dirs;
pub mod fetch;
pub mod find_coordinator;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod list_offsets;
pub mod produce;
// @group-modules
pub mod consumer_protocol;
pub mod delete_groups;
pub mod describe_groups;
pub mod heartbeat;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod sync_group;
// @replication-modules
pub mod allocate_producer_ids;
pub mod alter_partition;
pub mod alter_partition_reassignments;
pub mod begin_quorum_epoch;
pub mod broker_heartbeat;
pub mod broker_registration;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod elect_leaders;
pub mod end_quorum_epoch;
pub mod fetch_snapshot;
pub mod list_partition_reassignments;
pub mod offset_for_leader_epoch;
pub mod vote;

use api_versions::ApiVersionsRequest;
use message::Message;
use metadata::MetadataRequest;

/// What the codec knows of one API: its key, the versions of its request and the first
/// flexible version (`i16::MAX` if none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiInfo {
    pub api_key: i16,
    pub name: &'static str,
    pub versions: (i16, i16),
    pub flexible_from: i16,
}

/// The facts of an API, taken from its request's description.
pub const fn api<M: Message>() -> ApiInfo {
    ApiInfo {
        api_key: M::API_KEY,
        name: M::NAME,
        versions: M::VERSIONS,
        flexible_from: M::FLEXIBLE_VERSIONS_FROM,
    }
}

/// Every API whose messages are described, one line each.
pub const APIS: &[ApiInfo] = &[
    api::<MetadataRequest>(),
    api::<ApiVersionsRequest>(),
    // @produce-consume-apis
    api::<produce::ProduceRequest>(),
    api::<fetch::FetchRequest>(),
    api::<list_offsets::ListOffsetsRequest>(),
    api::<find_coordinator::FindCoordinatorRequest>(),
    api::<create_topics::CreateTopicsRequest>(),
    api::<delete_topics::DeleteTopicsRequest>(),
    api::<delete_records::DeleteRecordsRequest>(),
    api::<init_producer_id::InitProducerIdRequest>(),
    api::<describe_configs::DescribeConfigsRequest>(),
    api::<alter_configs::AlterConfigsRequest>(),
    api::<describe_log_dirs::DescribeLogDirsRequest>(),
    api::<create_partitions::CreatePartitionsRequest>(),
    api::<incremental_alter_configs::IncrementalAlterConfigsRequest>(),
    api::<describe_cluster::DescribeClusterRequest>(),
    // @group-apis
    api::<offset_commit::OffsetCommitRequest>(),
    api::<offset_fetch::OffsetFetchRequest>(),
    api::<join_group::JoinGroupRequest>(),
    api::<heartbeat::HeartbeatRequest>(),
    api::<leave_group::LeaveGroupRequest>(),
    api::<sync_group::SyncGroupRequest>(),
    api::<describe_groups::DescribeGroupsRequest>(),
    api::<list_groups::ListGroupsRequest>(),
    api::<delete_groups::DeleteGroupsRequest>(),
    api::<offset_delete::OffsetDeleteRequest>(),
    // @replication-apis
    api::<offset_for_leader_epoch::OffsetForLeaderEpochRequest>(),
    api::<elect_leaders::ElectLeadersRequest>(),
    api::<alter_partition_reassignments::AlterPartitionReassignmentsRequest>(),
    api::<list_partition_reassignments::ListPartitionReassignmentsRequest>(),
    api::<vote::VoteRequest>(),
    api::<begin_quorum_epoch::BeginQuorumEpochRequest>(),
    api::<end_quorum_epoch::EndQuorumEpochRequest>(),
    api::<describe_quorum::DescribeQuorumRequest>(),
    api::<alter_partition::AlterPartitionRequest>(),
    api::<fetch_snapshot::FetchSnapshotRequest>(),
    api::<broker_registration::BrokerRegistrationRequest>(),
    api::<broker_heartbeat::BrokerHeartbeatRequest>(),
    api::<describe_topic_partitions::DescribeTopicPartitionsRequest>(),
    api::<allocate_producer_ids::AllocateProducerIdsRequest>(),
];

/// The API keys whose messages are described so far.
pub fn api_keys_covered() -> impl Iterator<Item = i16> {
    APIS.iter().map(|a| a.api_key)
}

/// The described API with this key, if any.
pub fn api_info(api_key: i16) -> Option<&'static ApiInfo> {
    APIS.iter().find(|a| a.api_key == api_key)
}

/// The request header version a request of `api_key` at `api_version` carries: 2 in the API's
/// flexible versions, 1 otherwise. `None` for an API not covered yet, for which guessing could
/// misread the client id.
pub fn request_header_version(api_key: i16, api_version: i16) -> Option<i16> {
    let from = api_info(api_key)?.flexible_from;
    Some(if api_version >= from { 2 } else { 1 })
}

/// The response header version of a response of `api_key` at `api_version`: 1 in flexible
/// versions, 0 otherwise, and always 0 for ApiVersions, whose response a client must be able
/// to read before it knows which versions the broker speaks (KIP-511).
pub fn response_header_version(api_key: i16, api_version: i16) -> Option<i16> {
    let from = api_info(api_key)?.flexible_from;
    if api_key == ApiVersionsRequest::API_KEY {
        return Some(0);
    }
    Some(if api_version >= from { 1 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_api_table_has_one_entry_per_key() {
        let mut keys: Vec<i16> = api_keys_covered().collect();
        let n = keys.len();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), n, "an API key is listed twice");
    }
}
