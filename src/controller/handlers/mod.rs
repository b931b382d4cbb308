//! The controller's APIs on the controller listener, one file per API as the broker's
//! handlers are: each turns its request into the core's [`Request`] and the core's [`Reply`]
//! into its response. [`ControllerError`]s become Kafka error codes here and nowhere else.
//!
//! Choice (KIP-590): a broker that receives an admin request which changes metadata sends
//! the same request, unchanged, to the active controller's listener (the "controller APIs
//! directly" option), not wrapped in an Envelope (API 58): without authentication there is no
//! principal to carry, so the envelope would add a layer and nothing else.
//!
//! Invariants: a request that does not decode closes its connection (as Kafka's network layer
//! does); every reply is encoded in the version its request came in; a reply of the wrong kind
//! for its API is a bug and stops the controller.

pub mod allocate_producer_ids;
pub mod alter_configs;
pub mod alter_partition;
pub mod broker_heartbeat;
pub mod broker_registration;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_topics;
pub mod elect_leaders;
pub mod incremental_alter_configs;

use bytes::{Bytes, BytesMut};

use crate::protocol::allocate_producer_ids::AllocateProducerIdsRequest;
use crate::protocol::alter_configs::AlterConfigsRequest;
use crate::protocol::alter_partition::AlterPartitionRequest;
use crate::protocol::broker_heartbeat::BrokerHeartbeatRequest;
use crate::protocol::broker_registration::BrokerRegistrationRequest;
use crate::protocol::create_partitions::CreatePartitionsRequest;
use crate::protocol::create_topics::CreateTopicsRequest;
use crate::protocol::delete_topics::DeleteTopicsRequest;
use crate::protocol::elect_leaders::ElectLeadersRequest;
use crate::protocol::error::ErrorCode;
use crate::protocol::incremental_alter_configs::IncrementalAlterConfigsRequest;

use super::core::{ControllerError, Reply, Request};

/// The APIs the controller serves and their versions: (key, lowest, highest).
pub const APIS: [(i16, i16, i16); 10] = [
    (
        19,
        CreateTopicsRequest::VERSIONS.0,
        CreateTopicsRequest::VERSIONS.1,
    ),
    (
        20,
        DeleteTopicsRequest::VERSIONS.0,
        DeleteTopicsRequest::VERSIONS.1,
    ),
    (
        33,
        AlterConfigsRequest::VERSIONS.0,
        AlterConfigsRequest::VERSIONS.1,
    ),
    (
        37,
        CreatePartitionsRequest::VERSIONS.0,
        CreatePartitionsRequest::VERSIONS.1,
    ),
    (
        43,
        ElectLeadersRequest::VERSIONS.0,
        ElectLeadersRequest::VERSIONS.1,
    ),
    (
        44,
        IncrementalAlterConfigsRequest::VERSIONS.0,
        IncrementalAlterConfigsRequest::VERSIONS.1,
    ),
    (
        56,
        AlterPartitionRequest::VERSIONS.0,
        AlterPartitionRequest::VERSIONS.1,
    ),
    (
        62,
        BrokerRegistrationRequest::VERSIONS.0,
        BrokerRegistrationRequest::VERSIONS.1,
    ),
    (
        63,
        BrokerHeartbeatRequest::VERSIONS.0,
        BrokerHeartbeatRequest::VERSIONS.1,
    ),
    (
        67,
        AllocateProducerIdsRequest::VERSIONS.0,
        AllocateProducerIdsRequest::VERSIONS.1,
    ),
];

/// A request decoded for the core, or refused before it (answered at once).
#[derive(Debug)]
pub enum Decoded {
    Request(Request),
    Answer(Bytes),
}

/// Why a request could not be served: its connection is closed.
#[derive(Debug)]
pub struct HandlerError(pub String);

impl std::fmt::Display for HandlerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HandlerError {}

impl From<crate::protocol::wire::DecodeError> for HandlerError {
    fn from(e: crate::protocol::wire::DecodeError) -> Self {
        HandlerError(format!("a request that does not decode: {e}"))
    }
}

/// Decodes a request of `api_key` in `version`.
pub fn decode(api_key: i16, version: i16, body: Bytes) -> Result<Decoded, HandlerError> {
    match api_key {
        19 => create_topics::decode(version, body),
        20 => delete_topics::decode(version, body),
        33 => alter_configs::decode(version, body),
        37 => create_partitions::decode(version, body),
        43 => elect_leaders::decode(version, body),
        44 => incremental_alter_configs::decode(version, body),
        56 => alter_partition::decode(version, body),
        62 => broker_registration::decode(version, body),
        63 => broker_heartbeat::decode(version, body),
        67 => allocate_producer_ids::decode(version, body),
        other => Err(HandlerError(format!(
            "API {other} is not served by the controller"
        ))),
    }
}

/// Encodes the core's reply to a request of `api_key` in `version`.
pub fn encode(api_key: i16, version: i16, reply: Reply) -> Result<Bytes, HandlerError> {
    match (api_key, reply) {
        (19, Reply::CreateTopics(r)) => create_topics::encode(version, r),
        (20, Reply::DeleteTopics(r)) => delete_topics::encode(version, r),
        (33, Reply::AlterConfigs(r)) => alter_configs::encode(version, r),
        (37, Reply::CreatePartitions(r)) => create_partitions::encode(version, r),
        (43, Reply::ElectLeaders(r)) => elect_leaders::encode(version, r),
        (44, Reply::AlterConfigs(r)) => incremental_alter_configs::encode(version, r),
        (56, Reply::AlterPartition(r)) => alter_partition::encode(version, r),
        (62, Reply::RegisterBroker(r)) => broker_registration::encode(version, r),
        (63, Reply::Heartbeat(r)) => broker_heartbeat::encode(version, r),
        (67, Reply::AllocateProducerIds(r)) => allocate_producer_ids::encode(version, r),
        (api_key, reply) => panic!("a reply of the wrong kind for API {api_key}: {reply:?}"),
    }
}

/// Kafka's error code for a refusal.
pub fn error_code(error: &ControllerError) -> ErrorCode {
    use ControllerError as E;
    match error {
        E::NotController => ErrorCode::NOT_CONTROLLER,
        E::BrokerIdNotRegistered { .. } => ErrorCode::BROKER_ID_NOT_REGISTERED,
        E::StaleBrokerEpoch { .. } => ErrorCode::STALE_BROKER_EPOCH,
        E::DuplicateBrokerRegistration { .. } => ErrorCode::DUPLICATE_BROKER_REGISTRATION,
        E::InconsistentClusterId { .. } => ErrorCode::INCONSISTENT_CLUSTER_ID,
        E::UnsupportedFeature { .. } => ErrorCode::UNSUPPORTED_VERSION,
        E::InvalidRequest { .. } => ErrorCode::INVALID_REQUEST,
        E::InvalidTopic { .. } => ErrorCode::INVALID_TOPIC_EXCEPTION,
        E::TopicAlreadyExists { .. } => ErrorCode::TOPIC_ALREADY_EXISTS,
        E::UnknownTopic { .. } => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        E::UnknownTopicId { .. } => ErrorCode::UNKNOWN_TOPIC_ID,
        E::UnknownPartition { .. } => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        E::NotLeader { .. } => ErrorCode::NOT_LEADER_OR_FOLLOWER,
        // Retriable: the leader looks for the active controller and asks again.
        E::StaleController { .. } => ErrorCode::NOT_CONTROLLER,
        E::FencedLeaderEpoch { .. } => ErrorCode::FENCED_LEADER_EPOCH,
        E::InvalidUpdateVersion { .. } => ErrorCode::INVALID_UPDATE_VERSION,
        E::IneligibleReplica { .. } => ErrorCode::INELIGIBLE_REPLICA,
        E::InvalidPartitions { .. } => ErrorCode::INVALID_PARTITIONS,
        E::InvalidReplicationFactor { .. } => ErrorCode::INVALID_REPLICATION_FACTOR,
        E::InvalidReplicaAssignment { .. } => ErrorCode::INVALID_REPLICA_ASSIGNMENT,
        E::InvalidConfig { .. } => ErrorCode::INVALID_CONFIG,
        E::TopicDeletionDisabled { .. } => ErrorCode::TOPIC_DELETION_DISABLED,
        // Kafka's controller answers an exhausted id space this way too.
        E::ProducerIdsExhausted => ErrorCode::UNKNOWN_SERVER_ERROR,
        E::TooLarge { .. } => ErrorCode::POLICY_VIOLATION,
        // Retriable: the client backs off and sends again.
        E::Overloaded { .. } => ErrorCode::THROTTLING_QUOTA_EXCEEDED,
        E::ElectionNotNeeded { .. } => ErrorCode::ELECTION_NOT_NEEDED,
        E::PreferredLeaderNotAvailable { .. } => ErrorCode::PREFERRED_LEADER_NOT_AVAILABLE,
        E::EligibleLeadersNotAvailable { .. } => ErrorCode::ELIGIBLE_LEADERS_NOT_AVAILABLE,
    }
}

/// The code and message of a per-item outcome (0 and none for success).
pub fn outcome<T>(result: &Result<T, ControllerError>) -> (i16, Option<String>) {
    match result {
        Ok(_) => (0, None),
        Err(e) => (error_code(e).code(), Some(e.to_string())),
    }
}

/// Encodes a response message in `version`.
pub fn encode_message<M: crate::protocol::message::Message>(
    message: &M,
    version: i16,
) -> Result<Bytes, HandlerError> {
    let mut out = BytesMut::new();
    message
        .encode(&mut out, version)
        .map_err(|e| HandlerError(format!("encoding an answer: {e}")))?;
    Ok(out.freeze())
}

#[cfg(test)]
#[path = "handlers_tests.rs"]
mod tests;
