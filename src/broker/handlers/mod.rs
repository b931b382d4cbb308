//! Request dispatch: one file per API, each with `handle(broker, version, request)` returning
//! the response. This module decodes the body, calls the handler and encodes the response
//! with its header; errors become Kafka error codes here and nowhere earlier.
//!
//! [`HANDLERS`] is the one registry of handled APIs: each is registered once, with the
//! versions it handles and the function that starts a request. ApiVersions advertises
//! exactly that table, and [`dispatch`] starts requests from it, so the two cannot disagree.
//!
//! Invariants:
//! - Requests of one connection are started in the order they arrived, and every state
//!   change a request makes (an append, a topic creation) happens before the next request of
//!   that connection is started. Only waiting (for a sync, for data to fetch) is deferred, so
//!   pipelined requests keep Kafka's per-connection ordering while their syncs are shared.
//! - A request reaches its handler only at a version its entry handles (ApiVersions aside,
//!   which answers any newer version, KIP-511); every other request closes the connection
//!   with a message that says why. An entry's versions lie within the codec's (checked when
//!   the table is built).

pub mod alter_configs;
pub mod api_versions;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_quorum;
pub mod elect_leaders;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sync_group;

use std::future::{ready, Future};
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

/// Starts one request whose API and version its entry handles; the future returns once the
/// request's state changes are made (see the module invariants).
pub type Start = for<'a> fn(&'a Arc<Broker>, &'a Peer, Request) -> Started<'a>;

/// The connection a request came on, as handlers may need it.
#[derive(Clone, Debug)]
pub struct Peer {
    /// The peer's IP as Kafka reports client hosts: `/` and the address.
    pub host: String,
}

/// The future a [`Start`] returns.
pub type Started<'a> = Pin<Box<dyn Future<Output = Reply> + Send + 'a>>;

/// One handled API: its key, the versions this broker handles and how a request starts.
#[derive(Clone, Copy)]
pub struct Handler {
    pub api_key: i16,
    /// The versions handled, inclusive: the codec's, or a narrower range.
    pub versions: (i16, i16),
    /// The lowest version ApiVersions advertises: `versions.0`, except where a client needs
    /// to see a lower one (Produce).
    pub advertised_min: i16,
    pub start: Start,
}

impl Handler {
    /// `M`'s API with every version the codec describes.
    const fn of<M: Message>(start: Start) -> Handler {
        Handler::of_versions::<M>(M::VERSIONS, start)
    }

    /// `M`'s API with only `versions`, which must lie within the codec's (a compile-time
    /// check, since the table is a static).
    const fn of_versions<M: Message>(versions: (i16, i16), start: Start) -> Handler {
        assert!(
            M::VERSIONS.0 <= versions.0 && versions.0 <= versions.1 && versions.1 <= M::VERSIONS.1,
            "a handler's versions must lie within the codec's"
        );
        Handler {
            api_key: M::API_KEY,
            versions,
            advertised_min: versions.0,
            start,
        }
    }

    /// Advertises versions from `min` though fewer are handled.
    const fn advertised_from(mut self, min: i16) -> Handler {
        assert!(min <= self.versions.0);
        self.advertised_min = min;
        self
    }

    /// Whether this entry handles `version`.
    pub fn handles(&self, version: i16) -> bool {
        (self.versions.0..=self.versions.1).contains(&version)
    }
}

/// An entry whose handler returns its response directly, awaited by [`answer`].
macro_rules! answered {
    ($request:ty, $handle:expr) => {
        Handler::of::<$request>(|broker, _peer, request| Box::pin(answer(broker, request, $handle)))
    };
}

/// An entry whose start takes the broker, the correlation id, the version and the request.
macro_rules! group_entry {
    ($request:ty, $start:expr) => {
        Handler::of::<$request>(|broker, _peer, request| {
            Box::pin(decoded(request, move |correlation_id, version, req| {
                $start(broker, correlation_id, version, req)
            }))
        })
    };
}

/// The handled APIs, each registered once. A new API needs its entry here and nothing
/// elsewhere in this module: `answered!(Request, handle)` when the handler returns its
/// response (a synchronous one wrapped in `ready`), else a [`Handler::of`] (every version the
/// codec has) or [`Handler::of_versions`] (fewer) with a start of its own.
pub static HANDLERS: &[Handler] = {
    use crate::protocol::*;
    &[
        // Produce is advertised from v0 though v0-2 are refused (the codec does not know
        // them, so the frame parser closes the connection): librdkafka decides whether the
        // broker is usable from Produce's minimum version (KAFKA-18659).
        Handler::of::<produce::ProduceRequest>(|broker, _peer, request| {
            Box::pin(decoded(request, move |correlation_id, version, req| {
                self::produce::start(broker, correlation_id, version, req)
            }))
        })
        .advertised_from(0),
        Handler::of::<fetch::FetchRequest>(|broker, _peer, request| {
            Box::pin(decoded(request, move |correlation_id, version, req| {
                let broker = broker.clone();
                let context = self::fetch::begin(&broker, version, &req);
                ready(Reply::LaterParts(Box::pin(async move {
                    let fetched = self::fetch::handle_in(&broker, version, req, context).await;
                    self::fetch::encode_parts(correlation_id, version, fetched)
                })))
            }))
        }),
        answered!(list_offsets::ListOffsetsRequest, self::list_offsets::handle),
        answered!(
            offset_for_leader_epoch::OffsetForLeaderEpochRequest,
            self::offset_for_leader_epoch::handle
        ),
        answered!(metadata::MetadataRequest, self::metadata::handle),
        answered!(
            find_coordinator::FindCoordinatorRequest,
            self::find_coordinator::handle
        ),
        Handler::of::<api_versions::ApiVersionsRequest>(|broker, _peer, request| {
            let response = self::api_versions::handle(broker, request.api_version());
            // A version newer than ours gets UNSUPPORTED_VERSION in v0 format (KIP-511).
            let reply_version = if response.error_code != 0 {
                0
            } else {
                request.api_version()
            };
            Box::pin(ready(now_at(&request, reply_version, &response)))
        }),
        answered!(
            create_topics::CreateTopicsRequest,
            self::create_topics::handle
        ),
        answered!(
            delete_topics::DeleteTopicsRequest,
            self::delete_topics::handle
        ),
        answered!(
            delete_records::DeleteRecordsRequest,
            self::delete_records::handle
        ),
        answered!(
            init_producer_id::InitProducerIdRequest,
            self::init_producer_id::handle
        ),
        // @admin
        answered!(
            describe_configs::DescribeConfigsRequest,
            self::describe_configs::handle
        ),
        answered!(
            alter_configs::AlterConfigsRequest,
            self::alter_configs::handle
        ),
        answered!(
            describe_log_dirs::DescribeLogDirsRequest,
            self::describe_log_dirs::handle
        ),
        answered!(
            create_partitions::CreatePartitionsRequest,
            self::create_partitions::handle
        ),
        answered!(
            incremental_alter_configs::IncrementalAlterConfigsRequest,
            self::incremental_alter_configs::handle
        ),
        answered!(describe_cluster::DescribeClusterRequest, |b, v, req| ready(
            self::describe_cluster::handle(b, v, req)
        )),
        answered!(
            describe_quorum::DescribeQuorumRequest,
            self::describe_quorum::handle
        ),
        answered!(
            elect_leaders::ElectLeadersRequest,
            self::elect_leaders::handle
        ),
        // @groups: each starts its step on the group's shard and answers when the shard does.
        Handler::of::<join_group::JoinGroupRequest>(|broker, peer, request| {
            let caller = Caller {
                client_id: request.header.client_id.clone().unwrap_or_default(),
                client_host: peer.host.clone(),
            };
            Box::pin(decoded(
                request,
                move |correlation_id, version, req| async move {
                    self::join_group::start(broker, &caller, correlation_id, version, req).await
                },
            ))
        }),
        group_entry!(sync_group::SyncGroupRequest, self::sync_group::start),
        group_entry!(heartbeat::HeartbeatRequest, self::heartbeat::start),
        group_entry!(leave_group::LeaveGroupRequest, self::leave_group::start),
        group_entry!(
            offset_commit::OffsetCommitRequest,
            self::offset_commit::start
        ),
        group_entry!(offset_fetch::OffsetFetchRequest, self::offset_fetch::start),
        group_entry!(
            describe_groups::DescribeGroupsRequest,
            self::describe_groups::start
        ),
        group_entry!(list_groups::ListGroupsRequest, self::list_groups::start),
        group_entry!(
            delete_groups::DeleteGroupsRequest,
            self::delete_groups::start
        ),
        group_entry!(
            offset_delete::OffsetDeleteRequest,
            self::offset_delete::start
        ),
    ]
};

/// The entry for `api_key`, if this broker handles the API at all.
pub fn handler(api_key: i16) -> Option<&'static Handler> {
    HANDLERS.iter().find(|h| h.api_key == api_key)
}

/// The APIs this broker handles as ApiVersions advertises them: (key, min, max), by key.
pub fn supported_apis() -> Vec<(i16, i16, i16)> {
    let mut out: Vec<(i16, i16, i16)> = HANDLERS
        .iter()
        .map(|h| (h.api_key, h.advertised_min, h.versions.1))
        .collect();
    out.sort_unstable();
    out
}

/// Decodes the body as an `M` and starts `start` with the request's correlation id and
/// version, or closes the connection on a malformed body.
async fn decoded<M, F>(request: Request, start: impl FnOnce(i32, i16, M) -> F) -> Reply
where
    M: Message,
    F: Future<Output = Reply>,
{
    match decode::<M>(&request) {
        Ok(req) => start(request.header.correlation_id, request.api_version(), req).await,
        Err(e) => malformed(&request, e),
    }
}

/// The start of a request whose handler returns the response: decodes the body, awaits
/// `handle` and encodes its response, or closes the connection on a malformed body.
async fn answer<'a, M, R, F>(
    broker: &'a Arc<Broker>,
    request: Request,
    handle: impl FnOnce(&'a Arc<Broker>, i16, M) -> F,
) -> Reply
where
    M: Message,
    R: Message,
    F: Future<Output = R>,
{
    match decode::<M>(&request) {
        Ok(req) => now(&request, &handle(broker, request.api_version(), req).await),
        Err(e) => malformed(&request, e),
    }
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

/// Starts one request from its [`HANDLERS`] entry. Returns once its state changes are made
/// (see the module invariants).
pub async fn dispatch(broker: &Arc<Broker>, peer: &Peer, request: Request) -> Reply {
    match route(HANDLERS, request.api_key(), request.api_version()) {
        Ok(entry) => (entry.start)(broker, peer, request).await,
        Err(why) => Reply::Close(format!(
            "{why} (correlation id {})",
            request.header.correlation_id
        )),
    }
}

/// The entry of `table` that starts a request of `api_key` at `version`, or why there is
/// none.
fn route(table: &[Handler], api_key: i16, version: i16) -> Result<&Handler, String> {
    let name = api_info(api_key).map_or("unknown", |a| a.name);
    let Some(entry) = table.iter().find(|h| h.api_key == api_key) else {
        return Err(format!(
            "API key {api_key} ({name}) is not handled by this broker yet"
        ));
    };
    // KIP-511: a newer ApiVersions than ours is answered (in v0) so the client falls back.
    let newer_api_versions = api_key == crate::protocol::api_versions::ApiVersionsRequest::API_KEY
        && version > entry.versions.1;
    if entry.handles(version) || newer_api_versions {
        Ok(entry)
    } else {
        Err(format!(
            "{name} (API key {api_key}) v{version} is not handled by this broker, which handles \
             v{}-{}",
            entry.versions.0, entry.versions.1
        ))
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
        PartitionError::NotLeader { .. } => ErrorCode::NOT_LEADER_OR_FOLLOWER,
        PartitionError::ReplicaFetch { refusal, .. } => {
            use crate::replication::replica::FetchRefusal;
            match refusal {
                FetchRefusal::NotLeader | FetchRefusal::NotReplica => {
                    ErrorCode::NOT_LEADER_OR_FOLLOWER
                }
                FetchRefusal::FencedLeaderEpoch => ErrorCode::FENCED_LEADER_EPOCH,
                FetchRefusal::UnknownLeaderEpoch => ErrorCode::UNKNOWN_LEADER_EPOCH,
            }
        }
        PartitionError::NotEnoughReplicas { .. } => ErrorCode::NOT_ENOUGH_REPLICAS,
        PartitionError::NotEnoughReplicasAfterAppend { .. } => {
            ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND
        }
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
            // A replica's append out of place is the replication code's bug, not the
            // client's: Kafka answers its OffsetsOutOfOrder the same way.
            LogError::Config(_)
            | LogError::Aborted
            | LogError::UnexpectedAppendOffset { .. }
            | LogError::EpochOutOfOrder { .. } => ErrorCode::UNKNOWN_SERVER_ERROR,
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
        TopicError::Controller(e) => e.code(),
    }
}

/// Who sent a request, for the group coordinator (DescribeGroups reports it, and a member id
/// the coordinator hands out starts with the client id, as Kafka's do).
#[derive(Clone, Debug)]
pub struct Caller {
    pub client_id: String,
    /// The peer's address as Kafka reports it: `/` and the IP.
    pub client_host: String,
}

impl Caller {
    /// A fresh member id: the client id, `-`, and a random UUID (Kafka's form).
    pub fn new_member_id(&self) -> String {
        let bits = [crate::rt::rand::random_u64(), crate::rt::rand::random_u64()];
        let uuid = crate::protocol::wire::Uuid::v4_from(bits).0;
        let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}-{}",
            self.client_id,
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    }
}

/// A response computed by `work`, encoded for the request once it is ready.
pub fn later<M, F>(correlation_id: i32, api_key: i16, version: i16, work: F) -> Reply
where
    M: Message + Send + 'static,
    F: Future<Output = M> + Send + 'static,
{
    Reply::Later(Box::pin(async move {
        let response = work.await;
        encode_response(correlation_id, api_key, version, &response)
    }))
}

/// The coordinator's answer to one request, or the error response `fail` builds when the
/// group's shard could not be reached or dropped the request (it was unloaded).
pub async fn await_answer<M>(
    receiver: Result<
        tokio::sync::oneshot::Receiver<crate::coordinator::shard::Answer>,
        crate::coordinator::driver::Unreachable,
    >,
    fail: impl Fn(crate::protocol::error::ErrorCode) -> M,
    extract: impl Fn(crate::coordinator::shard::Answer) -> Option<M>,
) -> M {
    use crate::protocol::error::ErrorCode;
    match receiver {
        Err(unreachable) => fail(unreachable.code()),
        Ok(rx) => match rx.await {
            Ok(answer) => extract(answer).unwrap_or_else(|| fail(ErrorCode::UNKNOWN_SERVER_ERROR)),
            Err(_) => fail(ErrorCode::NOT_COORDINATOR),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::api_versions::ApiVersionsRequest;
    use crate::protocol::metadata::MetadataRequest;
    use crate::protocol::produce::ProduceRequest;

    #[test]
    fn each_api_is_registered_once_within_the_codecs_versions() {
        let mut keys: Vec<i16> = HANDLERS.iter().map(|h| h.api_key).collect();
        keys.sort_unstable();
        let before = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), before, "an API is registered twice");
        for entry in HANDLERS {
            let info = api_info(entry.api_key).expect("a handled API is described by the codec");
            assert!(
                info.versions.0 <= entry.versions.0 && entry.versions.1 <= info.versions.1,
                "{}: handled {:?} outside the codec's {:?}",
                info.name,
                entry.versions,
                info.versions
            );
        }
    }

    #[test]
    fn api_versions_advertises_the_table() {
        let advertised = supported_apis();
        assert_eq!(advertised.len(), HANDLERS.len());
        for entry in HANDLERS {
            assert!(advertised.contains(&(entry.api_key, entry.advertised_min, entry.versions.1)));
        }
        assert!(
            advertised.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted by key"
        );
        // Produce from v0 (KAFKA-18659), though v0-2 are not handled.
        let produce = handler(ProduceRequest::API_KEY).expect("Produce is handled");
        assert_eq!(produce.advertised_min, 0);
        assert_eq!(produce.versions.0, 3);
        assert!(!produce.handles(2));
    }

    /// A table with one API handled at fewer versions than the codec has.
    static NARROW: &[Handler] = &[
        Handler::of_versions::<MetadataRequest>((1, 5), |_, _, _| {
            Box::pin(ready(Reply::Close("started".into())))
        }),
        Handler::of_versions::<ApiVersionsRequest>((0, 3), |_, _, _| {
            Box::pin(ready(Reply::Close("started".into())))
        }),
    ];

    #[test]
    fn requests_outside_the_table_are_refused_with_a_reason() {
        assert!(route(NARROW, MetadataRequest::API_KEY, 1).is_ok());
        assert!(route(NARROW, MetadataRequest::API_KEY, 5).is_ok());
        for version in [0, 6, 13, -1] {
            let why = route(NARROW, MetadataRequest::API_KEY, version)
                .err()
                .expect("refused");
            assert_eq!(
                why,
                format!(
                    "MetadataRequest (API key 3) v{version} is not handled by this broker, which \
                     handles v1-5"
                )
            );
        }
        let why = route(NARROW, 9999, 0).err().expect("refused");
        assert_eq!(
            why,
            "API key 9999 (unknown) is not handled by this broker yet"
        );
        let why = route(NARROW, ProduceRequest::API_KEY, 9)
            .err()
            .expect("refused");
        assert_eq!(
            why,
            "API key 0 (ProduceRequest) is not handled by this broker yet"
        );
    }

    #[test]
    fn a_newer_api_versions_still_reaches_its_handler() {
        // KIP-511: answered in v0 with UNSUPPORTED_VERSION, so the client can fall back.
        assert!(route(NARROW, ApiVersionsRequest::API_KEY, 4).is_ok());
        assert!(route(NARROW, ApiVersionsRequest::API_KEY, 99).is_ok());
        assert!(route(NARROW, ApiVersionsRequest::API_KEY, -1).is_err());
        assert!(route(HANDLERS, ApiVersionsRequest::API_KEY, i16::MAX).is_ok());
    }
}
