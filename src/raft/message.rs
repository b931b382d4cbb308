//! What KRaft replicas say to each other, as the core sees it: Kafka's Vote,
//! BeginQuorumEpoch, EndQuorumEpoch and Fetch on `__cluster_metadata`, each reduced to the one
//! partition of the metadata log, and the records of that log. The driver turns these into
//! the wire's requests and responses (`protocol::{vote, begin_quorum_epoch,
//! end_quorum_epoch, fetch}`) and the records into record batches (data in ordinary batches,
//! the rest as Kafka's control records); error kinds become Kafka error codes only there.

use bytes::Bytes;

use crate::log::leader_epoch::EpochEnd;

use super::election::{ReplicaKey, VoteRequest};

/// A record of the metadata log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RaftRecord {
    /// Kafka's LeaderChangeMessage (control record type 2): a new leader's first record in
    /// its epoch; committing it commits everything before it.
    LeaderChange { leader_id: i32, voters: Vec<i32> },
    /// KIP-853's KRaftVersionRecord (control record type 5).
    KRaftVersion { version: i16 },
    /// KIP-853's VotersRecord (control record type 6): the voter set, with directory ids.
    Voters { voters: Vec<ReplicaKey> },
    /// A record of the state machine above the log (the controller's metadata records; a
    /// test state machine's operations).
    Data(Bytes),
    /// Kafka's SnapshotHeaderRecord (control record type 3): a snapshot's first record.
    SnapshotHeader { last_contained_log_timestamp: i64 },
    /// Kafka's SnapshotFooterRecord (control record type 4): a snapshot's last record.
    SnapshotFooter,
}

impl RaftRecord {
    pub fn is_control(&self) -> bool {
        !matches!(self, RaftRecord::Data(_))
    }

    /// A digest of the record at `offset` for comparing logs (FNV-1a over a data record's
    /// value; a control record by its kind, content and offset).
    pub fn digest(&self, offset: i64) -> u64 {
        let bytes: Vec<u8> = match self {
            RaftRecord::Data(value) => value.to_vec(),
            other => format!("{other:?}@{offset}").into_bytes(),
        };
        let mut digest = 0xcbf2_9ce4_8422_2325u64;
        for b in bytes {
            digest ^= u64::from(b);
            digest = digest.wrapping_mul(0x0100_0000_01b3);
        }
        digest
    }

    /// Bytes the record takes in a batch, for fetch sizing.
    pub fn size_bytes(&self) -> usize {
        // A record's header (length, attributes, deltas, key and header counts) is about 8
        // bytes; control records are small and fixed.
        match self {
            RaftRecord::Data(value) => 8 + value.len(),
            RaftRecord::LeaderChange { voters, .. } => 16 + 4 * voters.len(),
            RaftRecord::KRaftVersion { .. } => 12,
            RaftRecord::Voters { voters } => 16 + 24 * voters.len(),
            RaftRecord::SnapshotHeader { .. } => 20,
            RaftRecord::SnapshotFooter => 12,
        }
    }
}

/// Overhead of a batch's header (Kafka's v2 record batch header is 61 bytes).
pub const BATCH_OVERHEAD_BYTES: usize = 61;

/// A batch of the metadata log: records of one epoch at consecutive offsets. Control
/// records are never mixed with data records in one batch, as in Kafka.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub base_offset: i64,
    pub epoch: i32,
    pub records: Vec<RaftRecord>,
}

impl Batch {
    /// The offset after the batch's last record.
    pub fn next_offset(&self) -> i64 {
        self.base_offset + self.records.len() as i64
    }

    pub fn is_control(&self) -> bool {
        self.records.first().is_some_and(RaftRecord::is_control)
    }

    pub fn size_bytes(&self) -> usize {
        BATCH_OVERHEAD_BYTES
            + self
                .records
                .iter()
                .map(RaftRecord::size_bytes)
                .sum::<usize>()
    }
}

/// Why a replica refused a request (mapped to Kafka's error codes by the driver).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuorumError {
    /// FENCED_LEADER_EPOCH: the request's epoch is below the replica's.
    FencedLeaderEpoch,
    /// UNKNOWN_LEADER_EPOCH: the request's epoch is above the replica's.
    UnknownLeaderEpoch,
    /// NOT_LEADER_OR_FOLLOWER: a fetch reached a replica that does not lead.
    NotLeader,
    /// INCONSISTENT_VOTER_SET: the request names a voter the replica does not know.
    InconsistentVoterSet,
    /// SNAPSHOT_NOT_FOUND: the snapshot a FetchSnapshot names is not the leader's latest.
    SnapshotNotFound,
    /// POSITION_OUT_OF_RANGE: a FetchSnapshot position outside the snapshot.
    PositionOutOfRange,
}

/// A snapshot of the state machine: it holds the state after every record below
/// `end_offset`, the last of which was written in `epoch` (Kafka's `OffsetAndEpoch` of a
/// snapshot, its file name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SnapshotId {
    pub end_offset: i64,
    pub epoch: i32,
}

/// Kafka's FetchRequest for the metadata partition, from a follower or an observer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchRequest {
    /// Names the request so that its answer is told from a stale one (each side's driver
    /// numbers the fetches it sends and takes; the wire's correlation id is per connection).
    pub request_id: u64,
    pub replica: ReplicaKey,
    /// The epoch the fetcher is in (the request's CurrentLeaderEpoch).
    pub epoch: i32,
    pub fetch_offset: i64,
    pub last_fetched_epoch: i32,
}

/// Kafka's FetchResponse for the metadata partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchResponse {
    /// The request this answers.
    pub request_id: u64,
    pub error: Option<QuorumError>,
    /// The responder's epoch and the leader it knows (CurrentLeader).
    pub epoch: i32,
    pub leader_id: Option<i32>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// Set when the fetch's last fetched epoch and offset are not in the leader's log: the
    /// fetcher truncates to this epoch's end (KIP-595's DivergingEpoch).
    pub diverging: Option<EpochEnd>,
    /// Where the driver reads the records from, and at most how many bytes of batches; the
    /// driver fills `batches` and clears this before the answer leaves.
    pub read: Option<LogRead>,
    pub batches: Vec<Batch>,
    /// Set when the fetch offset lies below the leader's log start: the fetcher fetches
    /// this snapshot instead (Fetch v12+'s SnapshotId).
    pub snapshot_id: Option<SnapshotId>,
}

/// Kafka's FetchSnapshotRequest (API 59) for the metadata partition: a chunk of the
/// leader's snapshot from `position` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchSnapshotRequest {
    /// As a fetch's: names the request so that a stale answer is told apart.
    pub request_id: u64,
    pub replica: ReplicaKey,
    pub epoch: i32,
    pub snapshot_id: SnapshotId,
    pub position: i64,
    /// The largest chunk the fetcher takes (Kafka's MaxBytes).
    pub max_bytes: usize,
}

/// Kafka's FetchSnapshotResponse for the metadata partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchSnapshotResponse {
    pub request_id: u64,
    pub error: Option<QuorumError>,
    pub epoch: i32,
    pub leader_id: Option<i32>,
    pub snapshot_id: SnapshotId,
    /// The snapshot's size in bytes and where this chunk starts in it.
    pub size: i64,
    pub position: i64,
    /// Where the driver reads the chunk from; it fills `size` and `bytes` and clears this
    /// before the answer leaves.
    pub read: Option<SnapshotRead>,
    pub bytes: Bytes,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotRead {
    pub snapshot_id: SnapshotId,
    pub position: i64,
    pub max_bytes: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogRead {
    pub from_offset: i64,
    pub max_bytes: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Vote(VoteRequest),
    VoteResponse {
        error: Option<QuorumError>,
        epoch: i32,
        leader_id: Option<i32>,
        granted: bool,
        pre_vote: bool,
    },
    BeginQuorumEpoch {
        epoch: i32,
        leader_id: i32,
    },
    BeginQuorumEpochResponse {
        error: Option<QuorumError>,
        epoch: i32,
        leader_id: Option<i32>,
    },
    /// A leader resigning: the voters it names, best log first, stand for election in that
    /// order (KIP-595's PreferredSuccessors).
    EndQuorumEpoch {
        epoch: i32,
        leader_id: i32,
        preferred_successors: Vec<i32>,
    },
    EndQuorumEpochResponse {
        error: Option<QuorumError>,
        epoch: i32,
        leader_id: Option<i32>,
    },
    Fetch(FetchRequest),
    FetchResponse(FetchResponse),
    FetchSnapshot(FetchSnapshotRequest),
    FetchSnapshotResponse(FetchSnapshotResponse),
}

impl Message {
    /// Kafka's API key of the request this message is, or answers.
    pub fn api_key(&self) -> i16 {
        match self {
            Message::Vote(_) | Message::VoteResponse { .. } => 52,
            Message::BeginQuorumEpoch { .. } | Message::BeginQuorumEpochResponse { .. } => 53,
            Message::EndQuorumEpoch { .. } | Message::EndQuorumEpochResponse { .. } => 54,
            Message::Fetch(_) | Message::FetchResponse(_) => 1,
            Message::FetchSnapshot(_) | Message::FetchSnapshotResponse(_) => 59,
        }
    }
}

/// A message and its ends (node ids).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    pub from: i32,
    pub to: i32,
    pub message: Message,
}
