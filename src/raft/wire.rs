//! The core's messages as Kafka's requests and responses: Vote (52), BeginQuorumEpoch (53),
//! EndQuorumEpoch (54), Fetch (1) and FetchSnapshot (59) on the one partition of `__cluster_metadata` (topic id
//! `AAAAAAAAAAAAAAAAAAAAAQ`, Kafka's fixed id for it), and the mapping of
//! [`QuorumError`] to Kafka's error codes. Every version this side writes is the newest the
//! codec has of each KRaft API (Fetch v17: replica state with directory ids, diverging epoch,
//! current leader); requests from peers are read at whatever version they came in.
//!
//! Invariants: decoding never panics on a peer's bytes; a request that does not name the
//! metadata partition, or names a replica id that is not a node id, is refused as a
//! [`WireError`] naming the field, and its sender gets INVALID_REQUEST or
//! UNKNOWN_TOPIC_OR_PARTITION rather than an answer about some other partition.

use bytes::Bytes;

use crate::log::leader_epoch::EpochEnd;
use crate::protocol::begin_quorum_epoch as bqe;
use crate::protocol::end_quorum_epoch as eqe;
use crate::protocol::error::ErrorCode;
use crate::protocol::fetch;
use crate::protocol::fetch_snapshot as fs;
use crate::protocol::types::{LeaderEpoch, NodeId, Offset};
use crate::protocol::vote;
use crate::protocol::wire::{DecodeError, EncodeError, Uuid};

use super::election::{LogPosition, ReplicaKey, VoteRequest};
use super::message::{
    FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, Message, QuorumError,
    SnapshotId,
};
use super::records::{self, RecordsError};

/// The metadata log's topic.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// Kafka's fixed topic id of `__cluster_metadata` (`Uuid.METADATA_TOPIC_ID`).
pub const METADATA_TOPIC_ID: Uuid = Uuid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
pub const METADATA_PARTITION: i32 = 0;

pub const VOTE_VERSION: i16 = 2;
pub const BEGIN_QUORUM_EPOCH_VERSION: i16 = 1;
pub const END_QUORUM_EPOCH_VERSION: i16 = 1;
pub const FETCH_VERSION: i16 = 17;
/// Fetch versions a KRaft fetch may come in: v12 brought the diverging epoch and the
/// current leader that KRaft replication needs.
pub const FETCH_VERSION_MIN: i16 = 12;
pub const FETCH_SNAPSHOT_VERSION: i16 = 1;

/// Why a request or response is not one the quorum can take.
#[derive(Debug, Clone, PartialEq)]
pub enum WireError {
    Decode(DecodeError),
    Encode(String),
    Records(RecordsError),
    /// The message does not name exactly the metadata partition.
    NotMetadataPartition {
        api: &'static str,
    },
    /// A field holds a value the quorum cannot take.
    Invalid {
        api: &'static str,
        reason: String,
    },
    /// The request names another cluster.
    InconsistentClusterId {
        api: &'static str,
        theirs: String,
        ours: String,
    },
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Decode(e) => write!(f, "{e}"),
            WireError::Encode(e) => write!(f, "encoding: {e}"),
            WireError::Records(e) => write!(f, "{e}"),
            WireError::NotMetadataPartition { api } => write!(
                f,
                "a {api} message that does not name exactly {METADATA_TOPIC} partition \
                 {METADATA_PARTITION}"
            ),
            WireError::Invalid { api, reason } => write!(f, "a {api} message: {reason}"),
            WireError::InconsistentClusterId { api, theirs, ours } => write!(
                f,
                "a {api} request of cluster {theirs}; this quorum is cluster {ours}"
            ),
        }
    }
}

impl std::error::Error for WireError {}

impl From<DecodeError> for WireError {
    fn from(e: DecodeError) -> Self {
        WireError::Decode(e)
    }
}

impl From<EncodeError> for WireError {
    fn from(e: EncodeError) -> Self {
        WireError::Encode(e.to_string())
    }
}

impl WireError {
    /// The code a sender of a bad request gets.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            WireError::NotMetadataPartition { .. } => ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            WireError::InconsistentClusterId { .. } => ErrorCode::INCONSISTENT_CLUSTER_ID,
            _ => ErrorCode::INVALID_REQUEST,
        }
    }

    /// Whether the request's bytes decoded, so that its sender can be answered with
    /// [`error_code`](WireError::error_code) (an undecodable request closes the connection).
    pub fn answerable(&self) -> bool {
        !matches!(self, WireError::Decode(_))
    }
}

pub fn error_code(error: Option<QuorumError>) -> i16 {
    match error {
        None => ErrorCode::NONE.0,
        Some(QuorumError::FencedLeaderEpoch) => ErrorCode::FENCED_LEADER_EPOCH.0,
        Some(QuorumError::UnknownLeaderEpoch) => ErrorCode::UNKNOWN_LEADER_EPOCH.0,
        Some(QuorumError::NotLeader) => ErrorCode::NOT_LEADER_OR_FOLLOWER.0,
        Some(QuorumError::InconsistentVoterSet) => ErrorCode::INCONSISTENT_VOTER_SET.0,
        Some(QuorumError::SnapshotNotFound) => ErrorCode::SNAPSHOT_NOT_FOUND.0,
        Some(QuorumError::PositionOutOfRange) => ErrorCode::POSITION_OUT_OF_RANGE.0,
    }
}

/// The core's error for a code; `Err` for a code the quorum protocol does not answer with
/// (the caller treats the exchange as failed, which the core's request timeout covers).
pub fn quorum_error(code: i16) -> Result<Option<QuorumError>, ErrorCode> {
    match ErrorCode(code) {
        ErrorCode::NONE => Ok(None),
        ErrorCode::FENCED_LEADER_EPOCH => Ok(Some(QuorumError::FencedLeaderEpoch)),
        ErrorCode::UNKNOWN_LEADER_EPOCH => Ok(Some(QuorumError::UnknownLeaderEpoch)),
        ErrorCode::NOT_LEADER_OR_FOLLOWER => Ok(Some(QuorumError::NotLeader)),
        ErrorCode::INCONSISTENT_VOTER_SET => Ok(Some(QuorumError::InconsistentVoterSet)),
        ErrorCode::SNAPSHOT_NOT_FOUND => Ok(Some(QuorumError::SnapshotNotFound)),
        ErrorCode::POSITION_OUT_OF_RANGE => Ok(Some(QuorumError::PositionOutOfRange)),
        other => Err(other),
    }
}

fn leader_id(id: Option<i32>) -> NodeId {
    NodeId(id.unwrap_or(-1))
}

fn known_leader(id: NodeId) -> Option<i32> {
    (id.0 >= 0).then_some(id.0)
}

fn node_id(api: &'static str, field: &str, id: NodeId) -> Result<i32, WireError> {
    if id.0 < 0 {
        return Err(WireError::Invalid {
            api,
            reason: format!("{field} {} is not a node id", id.0),
        });
    }
    Ok(id.0)
}

/// An epoch a request may carry: not negative, and not the largest, so that the next epoch
/// exists.
fn epoch(api: &'static str, field: &str, epoch: i32) -> Result<i32, WireError> {
    if !(0..i32::MAX).contains(&epoch) {
        return Err(WireError::Invalid {
            api,
            reason: format!("{field} {epoch} is not an epoch"),
        });
    }
    Ok(epoch)
}

fn directory(id: Uuid) -> Option<[u8; 16]> {
    (id != Uuid::ZERO).then_some(id.0)
}

fn only<'a, T>(api: &'static str, items: &'a [T]) -> Result<&'a T, WireError> {
    match items {
        [one] => Ok(one),
        _ => Err(WireError::NotMetadataPartition { api }),
    }
}

/// The one partition a quorum request may name is `__cluster_metadata-0`.
fn metadata_partition(api: &'static str, topic: &str, partition: i32) -> Result<(), WireError> {
    if topic != METADATA_TOPIC || partition != METADATA_PARTITION {
        return Err(WireError::NotMetadataPartition { api });
    }
    Ok(())
}

/// An outgoing request: its API key, version and body.
#[derive(Clone, Debug, PartialEq)]
pub struct WireRequest {
    pub api_key: i16,
    pub version: i16,
    pub body: Bytes,
}

fn encode<M: crate::protocol::message::Message>(
    api_key: i16,
    version: i16,
    message: &M,
) -> Result<WireRequest, WireError> {
    let mut out = bytes::BytesMut::with_capacity(message.encoded_len(version));
    message.encode(&mut out, version)?;
    Ok(WireRequest {
        api_key,
        version,
        body: out.freeze(),
    })
}

/// The request `message` (a request kind) sent by `from` to `to`.
pub fn encode_request(
    cluster_id: Option<&str>,
    from: ReplicaKey,
    to: i32,
    message: &Message,
    fetch_max_wait_ms: u64,
) -> Result<WireRequest, WireError> {
    let cluster_id = cluster_id.map(str::to_owned);
    match message {
        Message::Vote(request) => encode(
            52,
            VOTE_VERSION,
            &vote::VoteRequest {
                cluster_id,
                voter_id: NodeId(to),
                topics: vec![vote::VoteRequestTopic {
                    topic_name: METADATA_TOPIC.into(),
                    partitions: vec![vote::VoteRequestPartition {
                        partition_index: METADATA_PARTITION,
                        replica_epoch: LeaderEpoch(request.candidate_epoch),
                        replica_id: NodeId(request.candidate.id),
                        replica_directory_id: Uuid(
                            request.candidate.directory_id.unwrap_or([0; 16]),
                        ),
                        voter_directory_id: Uuid::ZERO,
                        last_offset_epoch: LeaderEpoch(request.candidate_log.last_epoch),
                        last_offset: Offset(request.candidate_log.end_offset),
                        pre_vote: request.pre_vote,
                    }],
                }],
            },
        ),
        Message::BeginQuorumEpoch { epoch, leader_id } => encode(
            53,
            BEGIN_QUORUM_EPOCH_VERSION,
            &bqe::BeginQuorumEpochRequest {
                cluster_id,
                voter_id: NodeId(to),
                topics: vec![bqe::BeginQuorumEpochRequestTopic {
                    topic_name: METADATA_TOPIC.into(),
                    partitions: vec![bqe::BeginQuorumEpochRequestPartition {
                        partition_index: METADATA_PARTITION,
                        voter_directory_id: Uuid::ZERO,
                        leader_id: NodeId(*leader_id),
                        leader_epoch: LeaderEpoch(*epoch),
                    }],
                }],
                leader_endpoints: Vec::new(),
            },
        ),
        Message::EndQuorumEpoch {
            epoch,
            leader_id,
            preferred_successors,
        } => encode(
            54,
            END_QUORUM_EPOCH_VERSION,
            &eqe::EndQuorumEpochRequest {
                cluster_id,
                topics: vec![eqe::EndQuorumEpochRequestTopic {
                    topic_name: METADATA_TOPIC.into(),
                    partitions: vec![eqe::EndQuorumEpochRequestPartition {
                        partition_index: METADATA_PARTITION,
                        leader_id: NodeId(*leader_id),
                        leader_epoch: LeaderEpoch(*epoch),
                        preferred_successors: preferred_successors
                            .iter()
                            .map(|id| NodeId(*id))
                            .collect(),
                        preferred_candidates: preferred_successors
                            .iter()
                            .map(|id| eqe::EndQuorumEpochReplicaInfo {
                                candidate_id: NodeId(*id),
                                candidate_directory_id: Uuid::ZERO,
                            })
                            .collect(),
                    }],
                }],
                leader_endpoints: Vec::new(),
            },
        ),
        Message::Fetch(request) => encode(
            1,
            FETCH_VERSION,
            &fetch::FetchRequest {
                // v15+ carries the replica in ReplicaState; the top-level id is gone.
                replica_id: NodeId(-1),
                max_wait_ms: i32::try_from(fetch_max_wait_ms).unwrap_or(i32::MAX),
                min_bytes: 0,
                max_bytes: i32::MAX,
                topics: vec![fetch::FetchTopic {
                    topic: METADATA_TOPIC.into(),
                    topic_id: METADATA_TOPIC_ID,
                    partitions: vec![fetch::FetchPartition {
                        partition: METADATA_PARTITION,
                        current_leader_epoch: LeaderEpoch(request.epoch),
                        fetch_offset: Offset(request.fetch_offset),
                        last_fetched_epoch: LeaderEpoch(request.last_fetched_epoch),
                        log_start_offset: Offset(-1),
                        partition_max_bytes: i32::MAX,
                        replica_directory_id: Uuid(from.directory_id.unwrap_or([0; 16])),
                        ..Default::default()
                    }],
                }],
                cluster_id,
                replica_state: fetch::ReplicaState {
                    replica_id: NodeId(from.id),
                    replica_epoch: -1,
                },
                ..Default::default()
            },
        ),
        Message::FetchSnapshot(request) => encode(
            59,
            FETCH_SNAPSHOT_VERSION,
            &fs::FetchSnapshotRequest {
                replica_id: NodeId(from.id),
                max_bytes: i32::try_from(request.max_bytes).unwrap_or(i32::MAX),
                topics: vec![fs::FetchSnapshotRequestTopic {
                    name: METADATA_TOPIC.into(),
                    partitions: vec![fs::FetchSnapshotRequestPartition {
                        partition: METADATA_PARTITION,
                        current_leader_epoch: LeaderEpoch(request.epoch),
                        snapshot_id: fs::SnapshotId {
                            end_offset: Offset(request.snapshot_id.end_offset),
                            epoch: LeaderEpoch(request.snapshot_id.epoch),
                        },
                        position: request.position,
                        replica_directory_id: Uuid(from.directory_id.unwrap_or([0; 16])),
                    }],
                }],
                cluster_id,
            },
        ),
        other => Err(WireError::Invalid {
            api: "raft",
            reason: format!("{other:?} is not a request"),
        }),
    }
}

/// A request from a peer: who sent it and what it says. `correlation_id` becomes a fetch's
/// request id, which its answer carries back.
pub fn decode_request(
    api_key: i16,
    version: i16,
    body: Bytes,
    correlation_id: i32,
    cluster_id: Option<&str>,
) -> Result<(i32, Message), WireError> {
    let check_cluster = |api: &'static str, theirs: &Option<String>| match (theirs, cluster_id) {
        (Some(theirs), Some(ours)) if theirs != ours => Err(WireError::InconsistentClusterId {
            api,
            theirs: theirs.clone(),
            ours: ours.to_string(),
        }),
        _ => Ok(()),
    };
    match api_key {
        52 => {
            let api = "Vote";
            let request = vote::VoteRequest::decode_exact(body, version)?;
            check_cluster(api, &request.cluster_id)?;
            let topic = only(api, &request.topics)?;
            let p = only(api, &topic.partitions)?;
            metadata_partition(api, &topic.topic_name, p.partition_index)?;
            let from = node_id(api, "ReplicaId", p.replica_id)?;
            epoch(api, "ReplicaEpoch", p.replica_epoch.0)?;
            if p.last_offset.0 < 0 || p.last_offset_epoch.0 < -1 {
                return Err(WireError::Invalid {
                    api,
                    reason: format!(
                        "LastOffset {} and LastOffsetEpoch {} describe no log",
                        p.last_offset.0, p.last_offset_epoch.0
                    ),
                });
            }
            Ok((
                from,
                Message::Vote(VoteRequest {
                    candidate: ReplicaKey {
                        id: from,
                        directory_id: directory(p.replica_directory_id),
                    },
                    candidate_epoch: p.replica_epoch.0,
                    candidate_log: LogPosition {
                        last_epoch: p.last_offset_epoch.0,
                        end_offset: p.last_offset.0,
                    },
                    pre_vote: p.pre_vote,
                }),
            ))
        }
        53 => {
            let api = "BeginQuorumEpoch";
            let request = bqe::BeginQuorumEpochRequest::decode_exact(body, version)?;
            check_cluster(api, &request.cluster_id)?;
            let topic = only(api, &request.topics)?;
            let p = only(api, &topic.partitions)?;
            metadata_partition(api, &topic.topic_name, p.partition_index)?;
            let from = node_id(api, "LeaderId", p.leader_id)?;
            epoch(api, "LeaderEpoch", p.leader_epoch.0)?;
            Ok((
                from,
                Message::BeginQuorumEpoch {
                    epoch: p.leader_epoch.0,
                    leader_id: from,
                },
            ))
        }
        54 => {
            let api = "EndQuorumEpoch";
            let request = eqe::EndQuorumEpochRequest::decode_exact(body, version)?;
            check_cluster(api, &request.cluster_id)?;
            let topic = only(api, &request.topics)?;
            let p = only(api, &topic.partitions)?;
            metadata_partition(api, &topic.topic_name, p.partition_index)?;
            let from = node_id(api, "LeaderId", p.leader_id)?;
            epoch(api, "LeaderEpoch", p.leader_epoch.0)?;
            let preferred_successors = if version >= 1 {
                p.preferred_candidates
                    .iter()
                    .map(|c| c.candidate_id.0)
                    .collect()
            } else {
                p.preferred_successors.iter().map(|id| id.0).collect()
            };
            Ok((
                from,
                Message::EndQuorumEpoch {
                    epoch: p.leader_epoch.0,
                    leader_id: from,
                    preferred_successors,
                },
            ))
        }
        1 => {
            let api = "Fetch";
            if version < FETCH_VERSION_MIN {
                return Err(WireError::Invalid {
                    api,
                    reason: format!(
                        "version {version}: fetching the metadata log needs v{FETCH_VERSION_MIN}+"
                    ),
                });
            }
            let request = fetch::FetchRequest::decode_exact(body, version)?;
            check_cluster(api, &request.cluster_id)?;
            let topic = only(api, &request.topics)?;
            let p = only(api, &topic.partitions)?;
            let named = if version >= 13 {
                topic.topic_id == METADATA_TOPIC_ID
            } else {
                topic.topic == METADATA_TOPIC
            };
            if !named || p.partition != METADATA_PARTITION {
                return Err(WireError::NotMetadataPartition { api });
            }
            let replica_id = if version >= 15 {
                request.replica_state.replica_id
            } else {
                request.replica_id
            };
            let from = node_id(api, "ReplicaId", replica_id)?;
            epoch(api, "CurrentLeaderEpoch", p.current_leader_epoch.0)?;
            let request_id = u64::from(u32::from_be_bytes(correlation_id.to_be_bytes()));
            Ok((
                from,
                Message::Fetch(FetchRequest {
                    request_id,
                    replica: ReplicaKey {
                        id: from,
                        directory_id: directory(p.replica_directory_id),
                    },
                    epoch: p.current_leader_epoch.0,
                    fetch_offset: p.fetch_offset.0,
                    last_fetched_epoch: p.last_fetched_epoch.0,
                }),
            ))
        }
        59 => {
            let api = "FetchSnapshot";
            let request = fs::FetchSnapshotRequest::decode_exact(body, version)?;
            check_cluster(api, &request.cluster_id)?;
            let topic = only(api, &request.topics)?;
            let p = only(api, &topic.partitions)?;
            metadata_partition(api, &topic.name, p.partition)?;
            let from = node_id(api, "ReplicaId", request.replica_id)?;
            epoch(api, "CurrentLeaderEpoch", p.current_leader_epoch.0)?;
            if p.snapshot_id.end_offset.0 < 0 || p.snapshot_id.epoch.0 < 0 {
                return Err(WireError::Invalid {
                    api,
                    reason: format!(
                        "SnapshotId ({}, {}) names no snapshot",
                        p.snapshot_id.end_offset.0, p.snapshot_id.epoch.0
                    ),
                });
            }
            let max_bytes = usize::try_from(request.max_bytes)
                .ok()
                .filter(|m| *m > 0)
                .ok_or_else(|| WireError::Invalid {
                    api,
                    reason: format!("MaxBytes {} takes no bytes", request.max_bytes),
                })?;
            let request_id = u64::from(u32::from_be_bytes(correlation_id.to_be_bytes()));
            Ok((
                from,
                Message::FetchSnapshot(FetchSnapshotRequest {
                    request_id,
                    replica: ReplicaKey {
                        id: from,
                        directory_id: directory(p.replica_directory_id),
                    },
                    epoch: p.current_leader_epoch.0,
                    snapshot_id: SnapshotId {
                        end_offset: p.snapshot_id.end_offset.0,
                        epoch: p.snapshot_id.epoch.0,
                    },
                    position: p.position,
                    max_bytes,
                }),
            ))
        }
        other => Err(WireError::Invalid {
            api: "raft",
            reason: format!("API key {other} is not one of the quorum's"),
        }),
    }
}

fn encode_body<M: crate::protocol::message::Message>(
    version: i16,
    message: &M,
) -> Result<Bytes, WireError> {
    let mut out = bytes::BytesMut::with_capacity(message.encoded_len(version));
    message.encode(&mut out, version)?;
    Ok(out.freeze())
}

/// The body of the answer `message` (a response kind) at `version`, the request's; a fetch
/// answer carries `records` (whole batches read from the log).
pub fn encode_response(
    message: &Message,
    version: i16,
    records: Option<Bytes>,
) -> Result<Bytes, WireError> {
    match message {
        Message::VoteResponse {
            error,
            epoch,
            leader_id: leader,
            granted,
            ..
        } => encode_body(
            version,
            &vote::VoteResponse {
                error_code: 0,
                topics: vec![vote::VoteResponseTopic {
                    topic_name: METADATA_TOPIC.into(),
                    partitions: vec![vote::VoteResponsePartition {
                        partition_index: METADATA_PARTITION,
                        error_code: error_code(*error),
                        leader_id: leader_id(*leader),
                        leader_epoch: LeaderEpoch(*epoch),
                        vote_granted: *granted,
                    }],
                }],
                ..Default::default()
            },
        ),
        Message::BeginQuorumEpochResponse {
            error,
            epoch,
            leader_id: leader,
        } => encode_body(
            version,
            &bqe::BeginQuorumEpochResponse {
                error_code: 0,
                topics: vec![bqe::BeginQuorumEpochResponseTopic {
                    topic_name: METADATA_TOPIC.into(),
                    partitions: vec![bqe::BeginQuorumEpochResponsePartition {
                        partition_index: METADATA_PARTITION,
                        error_code: error_code(*error),
                        leader_id: leader_id(*leader),
                        leader_epoch: LeaderEpoch(*epoch),
                    }],
                }],
                ..Default::default()
            },
        ),
        Message::EndQuorumEpochResponse {
            error,
            epoch,
            leader_id: leader,
        } => encode_body(
            version,
            &eqe::EndQuorumEpochResponse {
                error_code: 0,
                topics: vec![eqe::EndQuorumEpochResponseTopic {
                    topic_name: METADATA_TOPIC.into(),
                    partitions: vec![eqe::EndQuorumEpochResponsePartition {
                        partition_index: METADATA_PARTITION,
                        error_code: error_code(*error),
                        leader_id: leader_id(*leader),
                        leader_epoch: LeaderEpoch(*epoch),
                    }],
                }],
                ..Default::default()
            },
        ),
        Message::FetchResponse(response) => {
            let diverging = response.diverging.map_or_else(
                || fetch::EpochEndOffset {
                    epoch: LeaderEpoch(-1),
                    end_offset: Offset(-1),
                },
                |d| fetch::EpochEndOffset {
                    epoch: LeaderEpoch(d.epoch),
                    end_offset: Offset(d.end_offset),
                },
            );
            encode_body(
                version,
                &fetch::FetchResponse {
                    responses: vec![fetch::FetchableTopicResponse {
                        topic: METADATA_TOPIC.into(),
                        topic_id: METADATA_TOPIC_ID,
                        partitions: vec![fetch::PartitionData {
                            partition_index: METADATA_PARTITION,
                            error_code: error_code(response.error),
                            high_watermark: Offset(response.high_watermark),
                            last_stable_offset: Offset(response.high_watermark),
                            log_start_offset: Offset(response.log_start_offset),
                            records: Some(records.unwrap_or_default()),
                            diverging_epoch: diverging,
                            current_leader: fetch::LeaderIdAndEpoch {
                                leader_id: leader_id(response.leader_id),
                                leader_epoch: LeaderEpoch(response.epoch),
                            },
                            snapshot_id: response.snapshot_id.map_or_else(
                                fetch::SnapshotId::default,
                                |id| fetch::SnapshotId {
                                    end_offset: Offset(id.end_offset),
                                    epoch: LeaderEpoch(id.epoch),
                                },
                            ),
                            ..Default::default()
                        }],
                    }],
                    ..Default::default()
                },
            )
        }
        Message::FetchSnapshotResponse(response) => encode_body(
            version,
            &fs::FetchSnapshotResponse {
                error_code: 0,
                topics: vec![fs::FetchSnapshotResponseTopic {
                    name: METADATA_TOPIC.into(),
                    partitions: vec![fs::FetchSnapshotResponsePartition {
                        index: METADATA_PARTITION,
                        error_code: error_code(response.error),
                        snapshot_id: fs::SnapshotId {
                            end_offset: Offset(response.snapshot_id.end_offset),
                            epoch: LeaderEpoch(response.snapshot_id.epoch),
                        },
                        size: response.size,
                        position: response.position,
                        unaligned_records: Some(response.bytes.clone()),
                        current_leader: fs::FetchSnapshotLeaderIdAndEpoch {
                            leader_id: leader_id(response.leader_id),
                            leader_epoch: LeaderEpoch(response.epoch),
                        },
                    }],
                }],
                ..Default::default()
            },
        ),
        other => Err(WireError::Invalid {
            api: "raft",
            reason: format!("{other:?} is not a response"),
        }),
    }
}

/// The answer to a request of `api_key` v`version` that failed with `code` as a whole.
pub fn error_response(api_key: i16, version: i16, code: ErrorCode) -> Result<Bytes, WireError> {
    match api_key {
        52 => encode_body(
            version,
            &vote::VoteResponse {
                error_code: code.0,
                ..Default::default()
            },
        ),
        53 => encode_body(
            version,
            &bqe::BeginQuorumEpochResponse {
                error_code: code.0,
                ..Default::default()
            },
        ),
        54 => encode_body(
            version,
            &eqe::EndQuorumEpochResponse {
                error_code: code.0,
                ..Default::default()
            },
        ),
        1 => encode_body(
            version,
            &fetch::FetchResponse {
                error_code: code.0,
                ..Default::default()
            },
        ),
        59 => encode_body(
            version,
            &fs::FetchSnapshotResponse {
                error_code: code.0,
                ..Default::default()
            },
        ),
        other => Err(WireError::Invalid {
            api: "raft",
            reason: format!("API key {other} is not one of the quorum's"),
        }),
    }
}

/// The error, epoch and leader of a BeginQuorumEpoch or EndQuorumEpoch answer (the two
/// have the same shape in different generated types).
macro_rules! epoch_answer {
    ($api:literal, $response:expr) => {{
        let api = $api;
        let response = $response;
        if response.error_code != 0 {
            return Err(WireError::Invalid {
                api,
                reason: format!("error code {}", response.error_code),
            });
        }
        let topic = only(api, &response.topics)?;
        let p = only(api, &topic.partitions)?;
        let error = quorum_error(p.error_code).map_err(|code| WireError::Invalid {
            api,
            reason: format!("error code {}", code.0),
        })?;
        (error, p.leader_epoch.0, known_leader(p.leader_id))
    }};
}

/// The answer to `request` (as sent) from its body. A fetch answer's records come back
/// decoded into `batches`, and each batch's own bytes as the second value (in the same
/// order) so that a follower appends the leader's bytes.
pub fn decode_response(
    request: &Message,
    version: i16,
    body: Bytes,
) -> Result<(Message, Vec<Bytes>), WireError> {
    let bad_code = |api: &'static str, code: ErrorCode| WireError::Invalid {
        api,
        reason: format!("error code {} ({code:?})", code.0),
    };
    match request {
        Message::Vote(sent) => {
            let api = "Vote";
            let response = vote::VoteResponse::decode_exact(body, version)?;
            if response.error_code != 0 {
                return Err(bad_code(api, ErrorCode(response.error_code)));
            }
            let topic = only(api, &response.topics)?;
            let p = only(api, &topic.partitions)?;
            let error = quorum_error(p.error_code).map_err(|c| bad_code(api, c))?;
            Ok((
                Message::VoteResponse {
                    error,
                    epoch: p.leader_epoch.0,
                    leader_id: known_leader(p.leader_id),
                    granted: p.vote_granted,
                    pre_vote: sent.pre_vote,
                },
                Vec::new(),
            ))
        }
        Message::BeginQuorumEpoch { .. } => {
            let (error, epoch, leader_id) = epoch_answer!(
                "BeginQuorumEpoch",
                bqe::BeginQuorumEpochResponse::decode_exact(body, version)?
            );
            Ok((
                Message::BeginQuorumEpochResponse {
                    error,
                    epoch,
                    leader_id,
                },
                Vec::new(),
            ))
        }
        Message::EndQuorumEpoch { .. } => {
            let (error, epoch, leader_id) = epoch_answer!(
                "EndQuorumEpoch",
                eqe::EndQuorumEpochResponse::decode_exact(body, version)?
            );
            Ok((
                Message::EndQuorumEpochResponse {
                    error,
                    epoch,
                    leader_id,
                },
                Vec::new(),
            ))
        }
        Message::Fetch(sent) => {
            let api = "Fetch";
            let response = fetch::FetchResponse::decode_exact(body, version)?;
            if response.error_code != 0 {
                return Err(bad_code(api, ErrorCode(response.error_code)));
            }
            let topic = only(api, &response.responses)?;
            let p = only(api, &topic.partitions)?;
            let error = quorum_error(p.error_code).map_err(|c| bad_code(api, c))?;
            let raw = p.records.clone().unwrap_or_default();
            let (batches, raws): (Vec<_>, Vec<_>) = if error.is_none() {
                records::decode_batches_with_bytes(raw)
                    .map_err(WireError::Records)?
                    .into_iter()
                    .unzip()
            } else {
                (Vec::new(), Vec::new())
            };
            let diverging = (p.diverging_epoch.epoch.0 >= 0 || p.diverging_epoch.end_offset.0 >= 0)
                .then_some(EpochEnd {
                    epoch: p.diverging_epoch.epoch.0,
                    end_offset: p.diverging_epoch.end_offset.0,
                });
            Ok((
                Message::FetchResponse(FetchResponse {
                    request_id: sent.request_id,
                    error,
                    epoch: p.current_leader.leader_epoch.0,
                    leader_id: known_leader(p.current_leader.leader_id),
                    high_watermark: p.high_watermark.0,
                    log_start_offset: p.log_start_offset.0,
                    diverging,
                    read: None,
                    batches,
                    snapshot_id: (p.snapshot_id.end_offset.0 >= 0 && p.snapshot_id.epoch.0 >= 0)
                        .then_some(SnapshotId {
                            end_offset: p.snapshot_id.end_offset.0,
                            epoch: p.snapshot_id.epoch.0,
                        }),
                }),
                raws,
            ))
        }
        Message::FetchSnapshot(sent) => {
            let api = "FetchSnapshot";
            let response = fs::FetchSnapshotResponse::decode_exact(body, version)?;
            if response.error_code != 0 {
                return Err(bad_code(api, ErrorCode(response.error_code)));
            }
            let topic = only(api, &response.topics)?;
            let p = only(api, &topic.partitions)?;
            let error = quorum_error(p.error_code).map_err(|c| bad_code(api, c))?;
            Ok((
                Message::FetchSnapshotResponse(FetchSnapshotResponse {
                    request_id: sent.request_id,
                    error,
                    epoch: p.current_leader.leader_epoch.0,
                    leader_id: known_leader(p.current_leader.leader_id),
                    snapshot_id: SnapshotId {
                        end_offset: p.snapshot_id.end_offset.0,
                        epoch: p.snapshot_id.epoch.0,
                    },
                    size: p.size,
                    position: p.position,
                    read: None,
                    bytes: p.unaligned_records.clone().unwrap_or_default(),
                }),
                Vec::new(),
            ))
        }
        other => Err(WireError::Invalid {
            api: "raft",
            reason: format!("{other:?} is not a request"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::message::{Batch, RaftRecord};

    fn round_trip_request(message: Message) -> Message {
        let from = ReplicaKey::node(3);
        let wire = encode_request(Some("cluster"), from, 1, &message, 500).expect("encodes");
        let (sender, decoded) =
            decode_request(wire.api_key, wire.version, wire.body, 77, Some("cluster"))
                .expect("decodes");
        assert_eq!(sender, 3);
        decoded
    }

    #[test]
    fn requests_survive_the_wire() {
        let vote = Message::Vote(VoteRequest {
            candidate: ReplicaKey::node(3),
            candidate_epoch: 5,
            candidate_log: LogPosition {
                last_epoch: 4,
                end_offset: 10,
            },
            pre_vote: true,
        });
        assert_eq!(round_trip_request(vote.clone()), vote);
        let begin = Message::BeginQuorumEpoch {
            epoch: 5,
            leader_id: 3,
        };
        assert_eq!(round_trip_request(begin.clone()), begin);
        let end = Message::EndQuorumEpoch {
            epoch: 5,
            leader_id: 3,
            preferred_successors: vec![2, 1],
        };
        assert_eq!(round_trip_request(end.clone()), end);
        let fetch = Message::Fetch(FetchRequest {
            request_id: 123,
            replica: ReplicaKey::node(3),
            epoch: 5,
            fetch_offset: 9,
            last_fetched_epoch: 4,
        });
        let Message::Fetch(decoded) = round_trip_request(fetch) else {
            panic!("a fetch");
        };
        assert_eq!(decoded.request_id, 77, "a fetch takes the correlation id");
        assert_eq!(
            (
                decoded.epoch,
                decoded.fetch_offset,
                decoded.last_fetched_epoch
            ),
            (5, 9, 4)
        );
    }

    #[test]
    fn a_fetch_answer_carries_records_divergence_and_the_leader() {
        let request = Message::Fetch(FetchRequest {
            request_id: 9,
            replica: ReplicaKey::node(2),
            epoch: 3,
            fetch_offset: 0,
            last_fetched_epoch: -1,
        });
        let batch = Batch {
            base_offset: 0,
            epoch: 3,
            records: vec![RaftRecord::Data(Bytes::from_static(b"x"))],
        };
        let raw = records::encode_batch(&batch, 5);
        let answer = Message::FetchResponse(FetchResponse {
            request_id: 77,
            error: None,
            epoch: 3,
            leader_id: Some(1),
            high_watermark: 1,
            log_start_offset: 0,
            diverging: Some(EpochEnd {
                epoch: 2,
                end_offset: 0,
            }),
            read: None,
            batches: Vec::new(),
            snapshot_id: None,
        });
        let body = encode_response(&answer, FETCH_VERSION, Some(raw.clone())).expect("encodes");
        let (decoded, bytes) = decode_response(&request, FETCH_VERSION, body).expect("decodes");
        assert_eq!(bytes, vec![raw]);
        let Message::FetchResponse(decoded) = decoded else {
            panic!("a fetch answer");
        };
        assert_eq!(decoded.request_id, 9, "the requester's own id comes back");
        assert_eq!(decoded.batches, vec![batch]);
        assert_eq!(decoded.leader_id, Some(1));
        assert_eq!(decoded.diverging.map(|d| d.epoch), Some(2));
    }

    #[test]
    fn a_snapshot_fetch_and_its_chunk_survive_the_wire() {
        let id = SnapshotId {
            end_offset: 120,
            epoch: 4,
        };
        let request = Message::FetchSnapshot(FetchSnapshotRequest {
            request_id: 5,
            replica: ReplicaKey::node(3),
            epoch: 4,
            snapshot_id: id,
            position: 4096,
            max_bytes: 8192,
        });
        let Message::FetchSnapshot(decoded) = round_trip_request(request.clone()) else {
            panic!("a snapshot fetch");
        };
        assert_eq!(
            decoded.request_id, 77,
            "a snapshot fetch takes the correlation id"
        );
        assert_eq!(
            (
                decoded.epoch,
                decoded.snapshot_id,
                decoded.position,
                decoded.max_bytes
            ),
            (4, id, 4096, 8192)
        );
        let answer = Message::FetchSnapshotResponse(FetchSnapshotResponse {
            request_id: 77,
            error: None,
            epoch: 4,
            leader_id: Some(1),
            snapshot_id: id,
            size: 5000,
            position: 4096,
            read: None,
            bytes: Bytes::from_static(b"chunk"),
        });
        let body = encode_response(&answer, FETCH_SNAPSHOT_VERSION, None).expect("encodes");
        let (decoded, _) =
            decode_response(&request, FETCH_SNAPSHOT_VERSION, body).expect("decodes");
        let Message::FetchSnapshotResponse(decoded) = decoded else {
            panic!("a snapshot answer");
        };
        assert_eq!(decoded.request_id, 5, "the requester's own id comes back");
        assert_eq!(
            (decoded.size, decoded.position, decoded.bytes.as_ref()),
            (5000, 4096, &b"chunk"[..])
        );
        assert_eq!((decoded.snapshot_id, decoded.leader_id), (id, Some(1)));
    }

    #[test]
    fn a_request_for_another_partition_is_refused_by_name() {
        let mut request = vote::VoteRequest::default();
        request.topics.push(vote::VoteRequestTopic {
            topic_name: "orders".into(),
            partitions: vec![vote::VoteRequestPartition::default()],
        });
        let mut body = bytes::BytesMut::new();
        request.encode(&mut body, 2).expect("encodes");
        let error = decode_request(52, 2, body.freeze(), 1, None).expect_err("refused");
        assert_eq!(error.error_code(), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
        assert!(error.to_string().contains(METADATA_TOPIC), "{error}");
        assert!(error.answerable());
    }

    #[test]
    fn another_clusters_request_and_impossible_epochs_are_refused() {
        let vote = |epoch: i32| {
            Message::Vote(VoteRequest {
                candidate: ReplicaKey::node(3),
                candidate_epoch: epoch,
                candidate_log: LogPosition {
                    last_epoch: 1,
                    end_offset: 4,
                },
                pre_vote: false,
            })
        };
        let wire =
            encode_request(Some("other"), ReplicaKey::node(3), 1, &vote(2), 500).expect("encodes");
        let error = decode_request(52, wire.version, wire.body, 1, Some("ours"))
            .expect_err("another cluster");
        assert_eq!(error.error_code(), ErrorCode::INCONSISTENT_CLUSTER_ID);
        let wire =
            encode_request(None, ReplicaKey::node(3), 1, &vote(i32::MAX), 500).expect("encodes");
        let error =
            decode_request(52, wire.version, wire.body, 1, None).expect_err("no next epoch");
        assert_eq!(error.error_code(), ErrorCode::INVALID_REQUEST);
        let body = error_response(52, VOTE_VERSION, error.error_code()).expect("encodes");
        let answer = vote::VoteResponse::decode_exact(body, VOTE_VERSION).expect("decodes");
        assert_eq!(answer.error_code, ErrorCode::INVALID_REQUEST.0);
        let garbage = decode_request(52, 2, Bytes::from_static(&[0xff; 3]), 1, None)
            .expect_err("undecodable");
        assert!(
            !garbage.answerable(),
            "an undecodable request closes the connection"
        );
    }
}
