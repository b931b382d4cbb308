//! Request dispatch: one file per API, each with `handle(broker, version, request)` returning
//! the response. This module decodes the body, calls the handler and encodes the response
//! with its header; errors become Kafka error codes here and nowhere earlier.
//!
//! Invariant: requests of one connection are started in the order they arrived, and every
//! state change a request makes (an append, a topic creation) happens before the next request
//! of that connection is started. Only waiting (for a sync, for data to fetch) is deferred, so
//! pipelined requests keep Kafka's per-connection ordering while their syncs are shared.

pub mod alter_configs;
pub mod api_versions;
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
pub mod metadata;
pub mod produce;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::broker::Broker;
use crate::log::FileRegion;
use crate::protocol::frame::Request;
use crate::protocol::header::ResponseHeader;
use crate::protocol::message::Message;
use crate::protocol::wire::{DecodeError, EncodeError, Reader};
use crate::protocol::{api_info, response_header_version};

/// A response still being worked out (waiting for a sync or for data).
pub type Deferred = Pin<Box<dyn Future<Output = Result<Bytes, EncodeError>> + Send>>;

/// One piece of an encoded response: bytes in memory, or a region of a segment file that the
/// connection sends without copying it (design §4). The pieces of a response, concatenated in
/// order, are exactly its encoding.
#[derive(Clone, Debug)]
pub enum ResponsePart {
    Bytes(Bytes),
    Region(FileRegion),
}

impl ResponsePart {
    pub fn len(&self) -> usize {
        match self {
            ResponsePart::Bytes(bytes) => bytes.len(),
            ResponsePart::Region(region) => region.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A response still being worked out, encoded as parts (Fetch, whose records stay in files).
pub type DeferredParts =
    Pin<Box<dyn Future<Output = Result<Vec<ResponsePart>, EncodeError>> + Send>>;

/// What the connection does after starting a request.
pub enum Reply {
    /// The encoded response (header and body, without the size prefix).
    Now(Bytes),
    /// The response once the future completes.
    Later(Deferred),
    /// The response, in parts, once the future completes.
    LaterParts(DeferredParts),
    /// Nothing is sent back (a produce with acks=0), but work may remain.
    Silent(Option<Deferred>),
    /// The request cannot be answered; the connection is closed, as Kafka does.
    Close(String),
}

/// The APIs this broker handles, with the versions it advertises in ApiVersions.
pub fn supported_apis() -> Vec<(i16, i16, i16)> {
    use crate::protocol::*;
    let handled: [(i16, Option<i16>); 16] = [
        // Produce is advertised from v0 though v0-2 are refused: librdkafka decides whether
        // the broker is usable from Produce's minimum version (KAFKA-18659).
        (produce::ProduceRequest::API_KEY, Some(0)),
        (fetch::FetchRequest::API_KEY, None),
        (list_offsets::ListOffsetsRequest::API_KEY, None),
        (metadata::MetadataRequest::API_KEY, None),
        (find_coordinator::FindCoordinatorRequest::API_KEY, None),
        (api_versions::ApiVersionsRequest::API_KEY, None),
        (create_topics::CreateTopicsRequest::API_KEY, None),
        (delete_topics::DeleteTopicsRequest::API_KEY, None),
        (delete_records::DeleteRecordsRequest::API_KEY, None),
        // @admin
        (describe_configs::DescribeConfigsRequest::API_KEY, None),
        (alter_configs::AlterConfigsRequest::API_KEY, None),
        (
            incremental_alter_configs::IncrementalAlterConfigsRequest::API_KEY,
            None,
        ),
        (create_partitions::CreatePartitionsRequest::API_KEY, None),
        (describe_cluster::DescribeClusterRequest::API_KEY, None),
        (describe_log_dirs::DescribeLogDirsRequest::API_KEY, None),
        (init_producer_id::InitProducerIdRequest::API_KEY, None),
    ];
    let mut out: Vec<(i16, i16, i16)> = handled
        .iter()
        .filter_map(|(key, min_override)| {
            let info = api_info(*key)?;
            Some((
                *key,
                min_override.unwrap_or(info.versions.0),
                info.versions.1,
            ))
        })
        .collect();
    out.sort_unstable();
    out
}

/// Encodes a response with the header its API and version call for.
pub fn encode_response<M: Message>(
    correlation_id: i32,
    api_key: i16,
    version: i16,
    response: &M,
) -> Result<Bytes, EncodeError> {
    let header_version = response_header_version(api_key, version).unwrap_or(0);
    let header = ResponseHeader { correlation_id };
    let mut out =
        BytesMut::with_capacity(header.encoded_len(header_version) + response.encoded_len(version));
    header.encode(&mut out, header_version)?;
    response.encode(&mut out, version)?;
    Ok(out.freeze())
}

/// Decodes a request body. Bytes after the body are ignored, as Kafka ignores them:
/// librdkafka 2.12 sends three stray bytes after a Metadata v13 body, and refusing them would
/// cut off a client that works with Kafka.
fn decode<M: Message>(request: &Request) -> Result<M, DecodeError> {
    let mut reader = Reader::new(request.body.clone());
    let message = M::decode(&mut reader, request.api_version())?;
    if reader.remaining() > 0 {
        tracing::debug!(
            api_key = request.api_key(),
            api_version = request.api_version(),
            trailing = reader.remaining(),
            "ignoring bytes after a request body"
        );
    }
    Ok(message)
}

fn malformed(request: &Request, e: DecodeError) -> Reply {
    Reply::Close(format!(
        "malformed {} v{} request (correlation id {}): {e}",
        api_info(request.api_key()).map_or("unknown", |a| a.name),
        request.api_version(),
        request.header.correlation_id
    ))
}

fn now<M: Message>(request: &Request, response: &M) -> Reply {
    now_at(request, request.api_version(), response)
}

/// The response encoded at `version`, or a close if it cannot be encoded.
fn now_at<M: Message>(request: &Request, version: i16, response: &M) -> Reply {
    match encode_response(
        request.header.correlation_id,
        request.api_key(),
        version,
        response,
    ) {
        Ok(bytes) => Reply::Now(bytes),
        Err(e) => Reply::Close(format!(
            "could not encode the response to correlation id {}: {e}",
            request.header.correlation_id
        )),
    }
}

/// Starts one request. Returns once its state changes are made (see the module invariant).
pub async fn dispatch(broker: &Arc<Broker>, request: Request) -> Reply {
    use crate::protocol::*;
    let version = request.api_version();
    let correlation_id = request.header.correlation_id;
    match request.api_key() {
        api_versions::ApiVersionsRequest::API_KEY => {
            let response = self::api_versions::handle(broker, version);
            // A version newer than ours gets UNSUPPORTED_VERSION in v0 format (KIP-511).
            let reply_version = if response.error_code != 0 { 0 } else { version };
            now_at(&request, reply_version, &response)
        }
        metadata::MetadataRequest::API_KEY => match decode(&request) {
            Ok(req) => now(&request, &self::metadata::handle(broker, version, req).await),
            Err(e) => malformed(&request, e),
        },
        produce::ProduceRequest::API_KEY => match decode(&request) {
            Ok(req) => self::produce::start(broker, correlation_id, version, req).await,
            Err(e) => malformed(&request, e),
        },
        fetch::FetchRequest::API_KEY => match decode(&request) {
            Ok(req) => {
                let broker = broker.clone();
                let context = self::fetch::begin(&broker, version, &req);
                Reply::LaterParts(Box::pin(async move {
                    let fetched = self::fetch::handle_in(&broker, version, req, context).await;
                    self::fetch::encode_parts(correlation_id, version, fetched)
                }))
            }
            Err(e) => malformed(&request, e),
        },
        list_offsets::ListOffsetsRequest::API_KEY => match decode(&request) {
            Ok(req) => now(&request, &self::list_offsets::handle(broker, version, req).await),
            Err(e) => malformed(&request, e),
        },
        find_coordinator::FindCoordinatorRequest::API_KEY => match decode(&request) {
            Ok(req) => now(&request, &self::find_coordinator::handle(broker, version, req)),
            Err(e) => malformed(&request, e),
        },
        create_topics::CreateTopicsRequest::API_KEY => match decode(&request) {
            Ok(req) => now(&request, &self::create_topics::handle(broker, version, req).await),
            Err(e) => malformed(&request, e),
        },
        delete_topics::DeleteTopicsRequest::API_KEY => match decode(&request) {
            Ok(req) => now(&request, &self::delete_topics::handle(broker, version, req).await),
            Err(e) => malformed(&request, e),
        },
        delete_records::DeleteRecordsRequest::API_KEY => match decode(&request) {
            Ok(req) => now(&request, &self::delete_records::handle(broker, version, req).await),
            Err(e) => malformed(&request, e),
        },
        // @admin
        describe_configs::DescribeConfigsRequest::API_KEY => match decode(&request) {
            Ok(req) => now(&request, &self::describe_configs::handle(broker, version, req).await),
            Err(e) => malformed(&request, e),
        },
        alter_configs::AlterConfigsRequest::API_KEY => match decode(&request) {
            Ok(req) => now(&request, &self::alter_configs::handle(broker, version, req).await),
            Err(e) => malformed(&request, e),
        },
        incremental_alter_configs::IncrementalAlterConfigsRequest::API_KEY => {
            match decode(&request) {
                Ok(req) => now(
                    &request,
                    &self::incremental_alter_configs::handle(broker, version, req).await,
                ),
                Err(e) => malformed(&request, e),
            }
        }
        create_partitions::CreatePartitionsRequest::API_KEY => match decode(&request) {
            Ok(req) => now(
                &request,
                &self::create_partitions::handle(broker, version, req).await,
            ),
            Err(e) => malformed(&request, e),
        },
        describe_cluster::DescribeClusterRequest::API_KEY => match decode(&request) {
            Ok(req) => now(&request, &self::describe_cluster::handle(broker, version, req)),
            Err(e) => malformed(&request, e),
        },
        describe_log_dirs::DescribeLogDirsRequest::API_KEY => match decode(&request) {
            Ok(req) => now(
                &request,
                &self::describe_log_dirs::handle(broker, version, req).await,
            ),
            Err(e) => malformed(&request, e),
        },
        init_producer_id::InitProducerIdRequest::API_KEY => match decode(&request) {
            Ok(req) => now(
                &request,
                &self::init_producer_id::handle(broker, version, req).await,
            ),
            Err(e) => malformed(&request, e),
        },
        other => Reply::Close(format!(
            "API key {other} ({}) is not handled by this broker yet (correlation id {correlation_id})",
            api_info(other).map_or("unknown", |a| a.name)
        )),
    }
}

/// The Kafka error code for a partition's typed error.
pub fn partition_error_code(
    error: &crate::broker::partition::PartitionError,
) -> crate::protocol::error::ErrorCode {
    use crate::broker::partition::PartitionError;
    use crate::log::LogError;
    use crate::protocol::error::ErrorCode;
    match error {
        PartitionError::Deleted { .. } => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        // Data at rest failed the scrubber's check: a storage error, as Kafka answers for a
        // log it cannot read, though the log itself stays online.
        PartitionError::CorruptAtRest { .. } => ErrorCode::KAFKA_STORAGE_ERROR,
        PartitionError::Log { source, .. } => match source {
            LogError::InvalidBatch(_) => ErrorCode::CORRUPT_MESSAGE,
            LogError::RecordsTooLarge { .. } => ErrorCode::RECORD_LIST_TOO_LARGE,
            LogError::OffsetOutOfRange { .. } => ErrorCode::OFFSET_OUT_OF_RANGE,
            LogError::Truncated { .. } => ErrorCode::NOT_LEADER_OR_FOLLOWER,
            LogError::Io { .. } | LogError::Offline { .. } | LogError::Corrupt { .. } => {
                ErrorCode::KAFKA_STORAGE_ERROR
            }
            LogError::Config(_) => ErrorCode::UNKNOWN_SERVER_ERROR,
            LogError::Producer(e) => producer_error_code(e),
        },
    }
}

/// The Kafka error code for a refused idempotent append (Kafka's ProducerAppendInfo errors).
pub fn producer_error_code(
    error: &crate::log::producer_state::ProducerStateError,
) -> crate::protocol::error::ErrorCode {
    use crate::log::producer_state::ProducerStateError;
    use crate::protocol::error::ErrorCode;
    match error {
        ProducerStateError::InvalidProducerEpoch { .. } => ErrorCode::INVALID_PRODUCER_EPOCH,
        ProducerStateError::NewEpochNotAtZero { .. }
        | ProducerStateError::OutOfOrderSequence { .. } => ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
        // Transactions are not supported yet: an authorization failure is fatal to clients,
        // so they stop instead of retrying.
        ProducerStateError::Transactional { .. } => {
            ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        }
    }
}

/// The Kafka error code for a topic operation's typed error.
pub fn topic_error_code(
    error: &crate::broker::topics::TopicError,
) -> crate::protocol::error::ErrorCode {
    use crate::broker::topics::TopicError;
    use crate::protocol::error::ErrorCode;
    match error {
        TopicError::InvalidName { .. } | TopicError::Collides { .. } => {
            ErrorCode::INVALID_TOPIC_EXCEPTION
        }
        TopicError::AlreadyExists { .. } => ErrorCode::TOPIC_ALREADY_EXISTS,
        TopicError::UnknownTopic { .. } => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        TopicError::InvalidPartitions { .. } | TopicError::PartitionsNotIncreased { .. } => {
            ErrorCode::INVALID_PARTITIONS
        }
        TopicError::InvalidReplicationFactor { .. } => ErrorCode::INVALID_REPLICATION_FACTOR,
        TopicError::InvalidConfig { .. } => ErrorCode::INVALID_CONFIG,
        TopicError::DeletionDisabled { .. } => ErrorCode::TOPIC_DELETION_DISABLED,
        TopicError::CorruptTopicFile { .. } | TopicError::Io { .. } | TopicError::Log { .. } => {
            ErrorCode::KAFKA_STORAGE_ERROR
        }
    }
}
