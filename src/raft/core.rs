//! The KRaft replica as one IO-free state machine (Kafka's `KafkaRaftClient` with its
//! `LeaderState`, `FollowerState` and the election states of [`super::election`]), in the
//! house shape: inputs are [`Raft::step`] (a message from a peer), [`Raft::tick`] (the time),
//! [`Raft::propose`] (records for the leader to append) and [`Raft::synced`] (the driver
//! synced the log); [`Raft::ready`] hands over what to do, in this order: persist the
//! election state, apply the log operations, send the messages, then sync the log and
//! report it. Nothing here blocks, reads a clock or touches a disk.
//!
//! Replication is pull-based (KIP-595). A follower fetches from the leader with its log end
//! and the epoch of its last batch; the leader checks that pair against its leader-epoch
//! cache and, where the follower's log diverges, answers with the epoch and end offset to
//! truncate to instead of records. A fetch also acknowledges everything below its offset, and
//! the leader's high watermark is the largest offset a majority of voters acknowledged,
//! counting its own log only as far as it is synced: under the default policy a voter
//! acknowledges only synced records (a follower fetches again only once it synced what it
//! appended), so a committed record survives every voter losing power at once.
//!
//! A new leader first appends a LeaderChange record in its epoch (with the voter set and the
//! KRaft version ahead of it in an empty log, KIP-853) and moves the high watermark only
//! past its epoch's start offset: an entry of an earlier epoch is committed only together
//! with one of the leader's own (Raft's commit rule for earlier terms).
//!
//! Invariants (asserted on every change, in release builds too):
//! - the high watermark never decreases while the replica runs and never passes the log end;
//! - a follower never truncates below its high watermark;
//! - a leader's high watermark is acknowledged by a majority and lies past its epoch start;
//! - the election invariants of [`super::election`].

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::log::leader_epoch::{EpochEnd, UNDEFINED_EPOCH};

use super::election::{
    Election, ElectionBugs, ElectionError, ElectionState, ReplicaKey, Role, VoteRequest, VOTERS_MAX,
};
use super::log_view::LogView;
use super::message::{
    Batch, Envelope, FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse,
    LogRead, Message, QuorumError, RaftRecord, SnapshotId, SnapshotRead, BATCH_OVERHEAD_BYTES,
};

/// Observers a leader keeps fetch state for; one beyond that is served but not tracked.
pub const OBSERVERS_MAX: usize = 256;
/// An observer silent this long may be forgotten to make room for another (Kafka's
/// `OBSERVER_SESSION_TIMEOUT_MS`, 5 minutes).
pub const OBSERVER_SESSION_TIMEOUT_MS: u64 = 300_000;
/// Records one proposal may carry (one batch).
pub const PROPOSE_RECORDS_MAX: usize = 20_000;
/// Bytes of batches one fetch answer may ask the driver to read.
pub const FETCH_MAX_BYTES_MAX: usize = 8 << 20;
/// The KRaft version (KIP-853) this core writes.
pub const KRAFT_VERSION: i16 = 1;
/// The largest snapshot a follower fetches (a leader's answer naming a larger size is
/// refused): Kafka's metadata image stays far below it.
pub const SNAPSHOT_BYTES_MAX: i64 = 1 << 34;

/// Kafka's quorum settings (`controller.quorum.*`), in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaftConfig {
    /// `controller.quorum.election.timeout.ms` (default 1000): how long a replica without a
    /// leader waits before standing, randomized up to twice this.
    pub election_timeout_ms: u64,
    /// `controller.quorum.fetch.timeout.ms` (default 2000): how long a follower goes without
    /// a successful fetch before it stands; a leader resigns when a majority has not fetched
    /// in 1.5 times this (check quorum).
    pub fetch_timeout_ms: u64,
    /// `controller.quorum.election.backoff.max.ms` (default 1000): the most a replica waits
    /// after a lost election before the next.
    pub election_backoff_max_ms: u64,
    /// `controller.quorum.request.timeout.ms` (default 2000): an unanswered request is
    /// resent after this.
    pub request_timeout_ms: u64,
    /// How long a leader holds a fetch that has nothing new to return (Kafka's 500 ms).
    pub fetch_max_wait_ms: u64,
    /// Bytes of batches one fetch answer carries at most.
    pub fetch_max_bytes: usize,
    /// `controller.quorum.retry.backoff.ms` (default 20): the wait before a fetch that was
    /// refused is sent again.
    pub retry_backoff_ms: u64,
}

impl RaftConfig {
    pub const DEFAULT: RaftConfig = RaftConfig {
        election_timeout_ms: 1000,
        fetch_timeout_ms: 2000,
        election_backoff_max_ms: 1000,
        request_timeout_ms: 2000,
        fetch_max_wait_ms: 500,
        fetch_max_bytes: 1 << 20,
        retry_backoff_ms: 20,
    };

    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            (
                "controller.quorum.election.timeout.ms",
                self.election_timeout_ms,
            ),
            ("controller.quorum.fetch.timeout.ms", self.fetch_timeout_ms),
            (
                "controller.quorum.request.timeout.ms",
                self.request_timeout_ms,
            ),
            ("fetch max wait", self.fetch_max_wait_ms),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(format!("{name} must be positive"));
            }
        }
        if self.fetch_max_wait_ms >= self.fetch_timeout_ms {
            return Err(format!(
                "the fetch max wait ({} ms) must be below controller.quorum.fetch.timeout.ms ({} ms)",
                self.fetch_max_wait_ms, self.fetch_timeout_ms
            ));
        }
        if self.fetch_max_wait_ms >= self.request_timeout_ms {
            // A held fetch would time out at its sender and be replaced, restarting the hold,
            // so an idle follower would never hear an answer.
            return Err(format!(
                "the fetch max wait ({} ms) must be below controller.quorum.request.timeout.ms ({} ms)",
                self.fetch_max_wait_ms, self.request_timeout_ms
            ));
        }
        if self.retry_backoff_ms >= self.request_timeout_ms {
            return Err(format!(
                "controller.quorum.retry.backoff.ms ({} ms) must be below controller.quorum.request.timeout.ms ({} ms)",
                self.retry_backoff_ms, self.request_timeout_ms
            ));
        }
        if self.fetch_max_bytes == 0 || self.fetch_max_bytes > FETCH_MAX_BYTES_MAX {
            return Err(format!(
                "fetch max bytes {} is outside 1..={FETCH_MAX_BYTES_MAX}",
                self.fetch_max_bytes
            ));
        }
        Ok(())
    }
}

/// Deliberate bugs for the checkers' tests; all off in every real config.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaftBugs {
    /// Grant a second candidate's vote in an epoch already voted in.
    pub vote_twice: bool,
    /// Acknowledge what is appended but not synced: the leader counts its log end, a
    /// follower fetches again before it synced.
    pub ack_unsynced: bool,
    /// Move the high watermark on a majority of replicas alone, even to an offset of an
    /// earlier epoch (no own-epoch commit rule).
    pub commit_previous_epoch: bool,
    /// On a diverging answer, truncate one record below the high watermark.
    pub truncate_below_committed: bool,
    /// Name a snapshot one record short of the state it holds: a replica that loads it
    /// applies that record twice.
    pub snapshot_short_of_its_state: bool,
}

/// A change to the log, applied by the driver in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogOp {
    /// Append the batch keeping its offsets and epoch.
    Append(Batch),
    /// Cut the log to end at this offset.
    Truncate(i64),
    /// Write a chunk of a snapshot fetched from the leader at `position` of its partial
    /// file (position 0 starts the file afresh).
    SnapshotChunk {
        id: SnapshotId,
        position: i64,
        bytes: Bytes,
    },
    /// Every chunk of the fetched snapshot is written: check it whole (it decodes, its
    /// voter set is this quorum's), make it durable under its name, and report with
    /// [`Raft::snapshot_finished`] before anything else reaches the core. Until then the
    /// replica fetches nothing.
    FinishSnapshot(SnapshotId),
    /// The finished snapshot replaces the log: empty the log and restart it at the
    /// snapshot's end (Kafka's `truncateFullyAndStartAt`).
    InstallSnapshot(SnapshotId),
}

/// What the replica did, for the simulation's history and the operator's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaftEvent {
    /// The replica moved to this epoch.
    Epoch { epoch: i32 },
    /// The replica became leader of this epoch.
    Leader { epoch: i32 },
    /// The replica truncated its log to `to` while its high watermark was
    /// `high_watermark`.
    Truncated { to: i64, high_watermark: i64 },
    /// The replica installed a snapshot fetched from the leader; the state machine loads
    /// it and goes on from its end.
    SnapshotLoaded { id: SnapshotId },
}

/// What the driver must do, in field order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ready {
    /// Write the `quorum-state` file (and sync it) before anything else.
    pub persist: Option<ElectionState>,
    pub log_ops: Vec<LogOp>,
    pub messages: Vec<Envelope>,
    /// Sync the log up to its end, then call [`Raft::synced`] with the offset synced to and
    /// this generation (the log's truncation count when the sync was asked for; a later
    /// request's generation supersedes an earlier one).
    pub sync: Option<u64>,
    /// The high watermark moved here: records below it are committed and may be applied.
    pub high_watermark: Option<i64>,
    pub events: Vec<RaftEvent>,
}

impl Ready {
    pub fn is_empty(&self) -> bool {
        self.persist.is_none()
            && self.log_ops.is_empty()
            && self.messages.is_empty()
            && self.sync.is_none()
            && self.high_watermark.is_none()
            && self.events.is_empty()
    }
}

/// Why a proposal was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProposeError {
    /// Only the leader appends; this is the leader the replica knows, if any.
    NotLeader { leader_id: Option<i32> },
    /// An empty proposal or one over [`PROPOSE_RECORDS_MAX`] records.
    BadSize { records: usize },
    /// A batch larger than a fetch answer may carry (`fetch_max_bytes`).
    TooLarge { bytes: usize, max: usize },
    /// [`Raft::propose_at`]: the log's next offset or the epoch is no longer the one the
    /// proposer decided against (its state machine must step down and catch up).
    Moved {
        expected_epoch: i32,
        expected_base_offset: i64,
        epoch: i32,
        log_end_offset: i64,
    },
}

impl std::fmt::Display for ProposeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProposeError::NotLeader { leader_id } => match leader_id {
                Some(id) => write!(f, "not the leader; replica {id} leads"),
                None => write!(f, "not the leader; no leader is known"),
            },
            ProposeError::BadSize { records } => write!(
                f,
                "a proposal of {records} records (1 to {PROPOSE_RECORDS_MAX})"
            ),
            ProposeError::TooLarge { bytes, max } => write!(
                f,
                "a proposal of about {bytes} bytes; a batch of the metadata log holds at most {max}"
            ),
            ProposeError::Moved {
                expected_epoch,
                expected_base_offset,
                epoch,
                log_end_offset,
            } => write!(
                f,
                "a proposal for offset {expected_base_offset} in epoch {expected_epoch}, but the log ends at {log_end_offset} in epoch {epoch}"
            ),
        }
    }
}

impl std::error::Error for ProposeError {}

/// Why the state machine's snapshot was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotError {
    /// A snapshot may hold only committed records, and not those below the log start.
    OutOfRange {
        end_offset: i64,
        log_start_offset: i64,
        high_watermark: i64,
    },
    /// The replica already holds a snapshot ending there or later.
    NotNewer { end_offset: i64, latest: SnapshotId },
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotError::OutOfRange {
                end_offset,
                log_start_offset,
                high_watermark,
            } => write!(
                f,
                "a snapshot ending at {end_offset}: it must lie between the log start \
                 {log_start_offset} and the high watermark {high_watermark}"
            ),
            SnapshotError::NotNewer { end_offset, latest } => write!(
                f,
                "a snapshot ending at {end_offset}: the latest one already ends at {}",
                latest.end_offset
            ),
        }
    }
}

impl std::error::Error for SnapshotError {}

/// One replica as the leader sees it, for DescribeQuorum (times on the core's clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaDescription {
    pub id: i32,
    /// Its log end as of its last fetch (the leader's own log end for the leader).
    pub end_offset: Option<i64>,
    pub last_fetch_ms: Option<u64>,
    pub last_caught_up_ms: Option<u64>,
}

/// What a leader knows of its quorum (Kafka's DescribeQuorum answer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumDescription {
    pub leader_id: i32,
    pub epoch: i32,
    pub high_watermark: i64,
    pub voters: Vec<ReplicaDescription>,
    pub observers: Vec<ReplicaDescription>,
}

/// The leader's view of one replica that fetches from it.
#[derive(Clone, Copy, Debug)]
struct ReplicaState {
    /// The offset of its last valid fetch in this epoch: everything below is acknowledged.
    end_offset: Option<i64>,
    last_fetch_ms: Option<u64>,
    /// When it last fetched from at or past the leader's log end (Kafka's
    /// lastCaughtUpTimestamp).
    last_caught_up_ms: Option<u64>,
    /// The high watermark last sent to it, so that a fetch is held only when nothing new,
    /// records or watermark, can be told.
    last_sent_high_watermark: i64,
}

#[derive(Clone, Debug)]
struct LeaderState {
    epoch_start_offset: i64,
    since_ms: u64,
    replicas: BTreeMap<i32, ReplicaState>,
    /// Fetches held until new records or a new high watermark, or their deadline.
    parked: BTreeMap<i32, (FetchRequest, u64)>,
    /// Voters that have not fetched in this epoch, and when BeginQuorumEpoch last went out.
    begin_sent_ms: BTreeMap<i32, u64>,
    /// The leader this voter lost before it won this epoch, and how long it had not heard
    /// from it when it won ([`Raft::predecessor_silence`]).
    predecessor_silence: Option<(i32, u64)>,
}

#[derive(Clone, Copy, Debug, Default)]
struct FetchState {
    /// The node the outstanding fetch went to, when, and its request id: only that
    /// request's answer is taken (a late answer to an earlier fetch describes a log that
    /// may since have been truncated).
    in_flight: Option<(i32, u64, u64)>,
    next_request_id: u64,
    /// When the follower stands (or, for an observer, looks for the leader elsewhere).
    deadline_ms: u64,
    /// The voter an observer without a leader asks next.
    bootstrap_next: usize,
    /// An observer's leader stopped answering: ask the voters in turn instead.
    leader_lost: bool,
    /// The leader resigned (EndQuorumEpoch): its followers grant pre-votes at once.
    leader_resigned: bool,
    /// A refused fetch is sent again no sooner than this.
    retry_at_ms: u64,
    /// When the leader was last heard from directly (a fetch answer, BeginQuorumEpoch):
    /// only that refuses a pre-vote, not a peer's word that it leads.
    last_heard_ms: Option<u64>,
    /// A snapshot being fetched from the leader instead of the log (this replica's log
    /// ended below the leader's start).
    snapshot: Option<SnapshotFetch>,
    /// A fetched snapshot the driver is checking ([`LogOp::FinishSnapshot`]).
    finishing: Option<SnapshotId>,
}

#[derive(Clone, Copy, Debug)]
struct SnapshotFetch {
    id: SnapshotId,
    /// Bytes received so far, and the size the leader gave.
    position: i64,
    size: Option<i64>,
}

/// How a fetch's offset and epoch stand against the leader's log (Kafka's
/// `ValidOffsetAndEpoch`).
enum FetchValidity {
    Valid,
    Diverging(EpochEnd),
    /// Below the log start: fetch the latest snapshot.
    Snapshot(SnapshotId),
}

#[derive(Clone, Debug)]
pub struct Raft {
    config: RaftConfig,
    local: ReplicaKey,
    voters: BTreeSet<i32>,
    election: Election,
    log: LogView,
    high_watermark: i64,
    leader: Option<LeaderState>,
    fetch: FetchState,
    /// When an unattached, prospective, candidate or resigned voter next stands.
    election_deadline_ms: u64,
    /// The time of the last input, from which a leader's next check-quorum tick is due.
    last_input_ms: u64,
    rng: u64,
    ready: Ready,
    bugs: RaftBugs,
    /// Fetches held by a leadership that just ended, to be answered NOT_LEADER_OR_FOLLOWER.
    stepped_down: Vec<FetchRequest>,
    /// The leader this voter followed until its fetch timeout expired, with the epoch it led
    /// and when it was last heard from: kept while this voter stands, dropped once it
    /// follows anyone.
    lost_leader: Option<LostLeader>,
}

/// The leader a follower stopped hearing from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LostLeader {
    id: i32,
    epoch: i32,
    last_heard_ms: u64,
}

impl Raft {
    /// A replica of `voters` (a voter if `local` is among them, else an observer) resuming
    /// from its persisted election state and its log as opened. `seed` drives the
    /// randomized timeouts; the driver takes it from `rt`.
    pub fn new(
        config: RaftConfig,
        local: ReplicaKey,
        voters: BTreeSet<i32>,
        persisted: ElectionState,
        log: LogView,
        now_ms: u64,
        seed: u64,
    ) -> Result<Raft, ElectionError> {
        config
            .validate()
            .map_err(|reason| ElectionError::BadVoters { reason })?;
        let election = Election::new(local, voters.clone(), persisted)?;
        let mut raft = Raft {
            config,
            local,
            voters,
            election,
            high_watermark: log.start_offset(),
            log,
            leader: None,
            fetch: FetchState::default(),
            election_deadline_ms: now_ms,
            last_input_ms: now_ms,
            // xorshift needs a state other than 0.
            rng: seed | 1,
            ready: Ready::default(),
            bugs: RaftBugs::default(),
            stepped_down: Vec::new(),
            lost_leader: None,
        };
        raft.fetch.deadline_ms = now_ms + config.fetch_timeout_ms;
        // Request ids start at random, so that an answer meant for this replica's previous
        // run is not taken for one to this run's fetch.
        raft.fetch.next_request_id = raft.random_below(1 << 40) << 20;
        raft.reset_election_deadline(now_ms);
        if raft.log.last_epoch() > raft.epoch() {
            // The quorum-state file is behind the log (Kafka's QuorumState.initialize): enter
            // the log's epoch, so that no vote or leadership of an epoch already in the log
            // is given again.
            let persisted = raft.election.become_unattached(raft.log.last_epoch());
            raft.persist(persisted.0);
        }
        if raft.voters.len() == 1 && raft.election.is_voter() {
            // A quorum of one has no one to wait for.
            raft.election_deadline_ms = now_ms;
        }
        raft.check();
        Ok(raft)
    }

    /// Plants bugs (simulation only).
    pub fn with_bugs(mut self, bugs: RaftBugs) -> Raft {
        self.bugs = bugs;
        self.election = self.election.clone().with_bugs(ElectionBugs {
            vote_twice: bugs.vote_twice,
        });
        self
    }

    pub fn local_id(&self) -> i32 {
        self.local.id
    }

    pub fn epoch(&self) -> i32 {
        self.election.epoch()
    }

    pub fn role(&self) -> &Role {
        self.election.role()
    }

    /// While this voter leads an epoch it won after its leader went silent (its fetch
    /// timeout expired): that leader's id and how long this voter had not heard from it when
    /// it took over. The controller counts that node's broker session from then, not from
    /// its own activation: the silence that started this election is the broker's too when
    /// the node is a combined one (the node id is the broker id). `None` after a resignation
    /// (the leader was heard from), a first election, or for a follower.
    pub fn predecessor_silence(&self) -> Option<(i32, u64)> {
        self.leader.as_ref().and_then(|l| l.predecessor_silence)
    }

    pub fn is_leader(&self) -> bool {
        self.leader.is_some()
    }

    pub fn leader_id(&self) -> Option<i32> {
        match self.election.role() {
            Role::Leader => Some(self.local.id),
            Role::Follower { leader_id } => Some(*leader_id),
            _ => None,
        }
    }

    /// When this replica became leader of its epoch, if it leads.
    pub fn leader_since_ms(&self) -> Option<u64> {
        self.leader.as_ref().map(|l| l.since_ms)
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    pub fn log(&self) -> &LogView {
        &self.log
    }

    pub fn voters(&self) -> &BTreeSet<i32> {
        &self.voters
    }

    /// The quorum as this replica sees it, if it leads (only the leader tracks its
    /// replicas' fetches, as in Kafka, where DescribeQuorum goes to the leader).
    pub fn describe(&self, now_ms: u64) -> Option<QuorumDescription> {
        let leader = self.leader.as_ref()?;
        let describe = |id: i32| {
            if id == self.local.id {
                return ReplicaDescription {
                    id,
                    end_offset: Some(self.log.end_offset()),
                    last_fetch_ms: Some(now_ms),
                    last_caught_up_ms: Some(now_ms),
                };
            }
            let state = leader.replicas.get(&id);
            ReplicaDescription {
                id,
                end_offset: state.and_then(|r| r.end_offset),
                last_fetch_ms: state.and_then(|r| r.last_fetch_ms),
                last_caught_up_ms: state.and_then(|r| r.last_caught_up_ms),
            }
        };
        Some(QuorumDescription {
            leader_id: self.local.id,
            epoch: self.epoch(),
            high_watermark: self.high_watermark,
            voters: self.voters.iter().map(|id| describe(*id)).collect(),
            observers: leader
                .replicas
                .keys()
                .filter(|id| !self.voters.contains(id))
                .map(|id| describe(*id))
                .collect(),
        })
    }

    /// What to do now; the driver does it in field order.
    pub fn ready(&mut self) -> Ready {
        std::mem::take(&mut self.ready)
    }

    /// The earliest time at which [`Raft::tick`] has something to do.
    pub fn next_deadline_ms(&self) -> u64 {
        let mut next = u64::MAX;
        if let Some(leader) = &self.leader {
            for (_, deadline) in leader.parked.values() {
                next = next.min(*deadline);
            }
            for sent in leader.begin_sent_ms.values() {
                next = next.min(sent + self.config.request_timeout_ms);
            }
            if self.voters.len() > 1 {
                // Check quorum at a quarter of the fetch timeout's granularity.
                next = next.min(self.last_input_ms + (self.config.fetch_timeout_ms / 4).max(1));
            }
            return next;
        }
        if let Some((_, sent_ms, _)) = self.fetch.in_flight {
            next = next.min(sent_ms + self.config.request_timeout_ms);
        } else if self.fetch.retry_at_ms > self.last_input_ms {
            next = next.min(self.fetch.retry_at_ms);
        }
        match self.election.role() {
            Role::Follower { .. } => next.min(self.fetch.deadline_ms),
            _ if !self.election.is_voter() => next.min(self.fetch.deadline_ms),
            _ => next.min(self.election_deadline_ms),
        }
    }

    fn check_quorum_ms(&self) -> u64 {
        self.config.fetch_timeout_ms + self.config.fetch_timeout_ms / 2
    }

    /// The time moved on: run whatever timer ran out.
    pub fn tick(&mut self, now_ms: u64) {
        self.last_input_ms = self.last_input_ms.max(now_ms);
        if self.leader.is_some() {
            self.tick_leader(now_ms);
        } else {
            self.tick_other(now_ms);
        }
        self.answer_stepped_down();
        self.maybe_fetch(now_ms);
        self.check();
    }

    fn tick_leader(&mut self, now_ms: u64) {
        let due: Vec<FetchRequest> = match &self.leader {
            Some(leader) => leader
                .parked
                .values()
                .filter(|(_, deadline)| *deadline <= now_ms)
                .map(|(request, _)| *request)
                .collect(),
            None => Vec::new(),
        };
        for request in due {
            if let Some(leader) = &mut self.leader {
                leader.parked.remove(&request.replica.id);
            }
            self.answer_fetch(request, None);
        }
        let epoch = self.epoch();
        let request_timeout_ms = self.config.request_timeout_ms;
        let mut begin = Vec::new();
        if let Some(leader) = &mut self.leader {
            for (voter, sent) in leader.begin_sent_ms.iter_mut() {
                if *sent + request_timeout_ms <= now_ms {
                    *sent = now_ms;
                    begin.push(*voter);
                }
            }
        }
        for voter in begin {
            self.send(
                voter,
                Message::BeginQuorumEpoch {
                    epoch,
                    leader_id: self.local.id,
                },
            );
        }
        if self.voters.len() > 1 && !self.has_quorum(now_ms) {
            tracing::warn!(
                node = self.local.id,
                epoch,
                "raft: a majority of voters has not fetched within the check-quorum window; resigning"
            );
            self.resign(now_ms);
        }
    }

    /// Whether a majority of voters (the leader counting itself) fetched within the
    /// check-quorum window, or the leader is younger than that window.
    fn has_quorum(&self, now_ms: u64) -> bool {
        let Some(leader) = &self.leader else {
            return false;
        };
        let window = self.check_quorum_ms();
        if now_ms < leader.since_ms + window {
            return true;
        }
        let recent = self
            .voters
            .iter()
            .filter(|v| **v != self.local.id)
            .filter(|v| {
                leader
                    .replicas
                    .get(v)
                    .and_then(|r| r.last_fetch_ms)
                    .is_some_and(|at| at + window > now_ms)
            })
            .count();
        recent + 1 >= self.election.majority()
    }

    fn tick_other(&mut self, now_ms: u64) {
        if let Some((_, sent_ms, _)) = self.fetch.in_flight {
            if sent_ms + self.config.request_timeout_ms <= now_ms {
                self.fetch.in_flight = None;
            }
        }
        if !self.election.is_voter() {
            if now_ms >= self.fetch.deadline_ms {
                // An observer that lost its leader asks the voters in turn.
                self.fetch.leader_lost = true;
                self.fetch.bootstrap_next += 1;
                self.fetch.deadline_ms = now_ms + self.config.fetch_timeout_ms;
                self.fetch.in_flight = None;
            }
            return;
        }
        match self.election.role().clone() {
            Role::Follower { .. } => {
                if now_ms >= self.fetch.deadline_ms {
                    self.lost_leader = match (self.leader_id(), self.fetch.last_heard_ms) {
                        (Some(id), Some(last_heard_ms)) => Some(LostLeader {
                            id,
                            epoch: self.epoch(),
                            last_heard_ms,
                        }),
                        _ => None,
                    };
                    self.start_pre_vote(now_ms);
                }
            }
            Role::Leader => {}
            Role::Candidate { .. } => {
                if now_ms >= self.election_deadline_ms {
                    // Lost or split: back off, then try again with pre-votes.
                    self.start_pre_vote(now_ms);
                    let backoff = self.random_below(self.config.election_backoff_max_ms + 1);
                    self.election_deadline_ms += backoff;
                }
            }
            Role::Unattached | Role::Prospective { .. } | Role::Resigned => {
                if now_ms >= self.election_deadline_ms {
                    self.start_pre_vote(now_ms);
                }
            }
        }
    }

    fn random_below(&mut self, bound: u64) -> u64 {
        // xorshift64*: deterministic and enough for timer jitter.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let value = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        if bound == 0 {
            0
        } else {
            value % bound
        }
    }

    fn reset_election_deadline(&mut self, now_ms: u64) {
        let jitter = self.random_below(self.config.election_timeout_ms);
        self.election_deadline_ms = now_ms + self.config.election_timeout_ms + jitter;
    }

    fn persist(&mut self, state: ElectionState) {
        self.ready.persist = Some(state);
    }

    fn send(&mut self, to: i32, message: Message) {
        self.ready.messages.push(Envelope {
            from: self.local.id,
            to,
            message,
        });
    }

    fn other_voters(&self) -> Vec<i32> {
        self.voters
            .iter()
            .copied()
            .filter(|v| *v != self.local.id)
            .collect()
    }

    fn note_epoch(&mut self, before: i32) {
        if self.epoch() != before {
            self.ready.events.push(RaftEvent::Epoch {
                epoch: self.epoch(),
            });
        }
    }

    /// Leadership ends (a later epoch, an election): every held fetch is answered
    /// NOT_LEADER_OR_FOLLOWER at once, as Kafka does, so no fetcher waits for an answer that
    /// would never come.
    fn step_down(&mut self) {
        let Some(leader) = self.leader.take() else {
            return;
        };
        // Answered once the input is taken, so that the answers carry the new epoch.
        self.stepped_down
            .extend(leader.parked.into_values().map(|(request, _)| request));
    }

    fn answer_stepped_down(&mut self) {
        for request in std::mem::take(&mut self.stepped_down) {
            self.answer_not_leader(request.replica.id, request.request_id, None);
        }
    }

    fn start_pre_vote(&mut self, now_ms: u64) {
        self.step_down();
        self.fetch.in_flight = None;
        self.election.become_prospective();
        self.reset_election_deadline(now_ms);
        if self.election.has_pre_vote_majority() {
            self.start_election(now_ms);
            return;
        }
        self.ask_for_votes(true);
    }

    /// Sends the (pre-)vote request to every other voter. A candidate claims only its
    /// synced log: a vote won on records a power loss then takes would let it lead without
    /// an entry a majority committed.
    fn ask_for_votes(&mut self, pre_vote: bool) {
        let position = self.log.synced_position();
        let request = if pre_vote {
            self.election.pre_vote_request(position)
        } else {
            self.election.vote_request(position)
        };
        for voter in self.other_voters() {
            self.send(voter, Message::Vote(request));
        }
    }

    fn start_election(&mut self, now_ms: u64) {
        let before = self.epoch();
        let persisted = self.election.become_candidate();
        self.persist(persisted.0);
        self.note_epoch(before);
        self.reset_election_deadline(now_ms);
        if let Role::Candidate { granted } = self.election.role() {
            if granted.len() >= self.election.majority() {
                self.become_leader(now_ms);
                return;
            }
        }
        self.ask_for_votes(false);
    }

    fn become_leader(&mut self, now_ms: u64) {
        let persisted = self.election.become_leader();
        self.persist(persisted.0);
        let epoch = self.epoch();
        let predecessor_silence = self.lost_leader.take().map(|lost| {
            assert!(lost.epoch < epoch, "a lost leader of this very epoch");
            assert_ne!(lost.id, self.local.id, "a voter lost itself as leader");
            (lost.id, now_ms.saturating_sub(lost.last_heard_ms))
        });
        let epoch_start_offset = self.log.end_offset();
        let mut records = Vec::new();
        if epoch_start_offset == 0 {
            // The voter set is in the log from its start (KIP-853), even while static.
            records.push(RaftRecord::KRaftVersion {
                version: KRAFT_VERSION,
            });
            records.push(RaftRecord::Voters {
                voters: self
                    .voters
                    .iter()
                    .map(|id| ReplicaKey {
                        id: *id,
                        directory_id: None,
                    })
                    .collect(),
            });
        }
        records.push(RaftRecord::LeaderChange {
            leader_id: self.local.id,
            voters: self.voters.iter().copied().collect(),
        });
        let begin_sent_ms = self
            .other_voters()
            .into_iter()
            .map(|v| (v, now_ms))
            .collect();
        self.leader = Some(LeaderState {
            epoch_start_offset,
            since_ms: now_ms,
            replicas: BTreeMap::new(),
            parked: BTreeMap::new(),
            begin_sent_ms,
            predecessor_silence,
        });
        self.fetch.in_flight = None;
        self.append_own(records);
        self.ready.events.push(RaftEvent::Leader { epoch });
        for voter in self.other_voters() {
            self.send(
                voter,
                Message::BeginQuorumEpoch {
                    epoch,
                    leader_id: self.local.id,
                },
            );
        }
        self.maybe_advance_high_watermark();
    }

    fn append_own(&mut self, records: Vec<RaftRecord>) -> i64 {
        let batch = Batch {
            base_offset: self.log.end_offset(),
            epoch: self.epoch(),
            records,
        };
        self.log
            .append(batch.base_offset, batch.next_offset(), batch.epoch);
        let base_offset = batch.base_offset;
        self.ready.log_ops.push(LogOp::Append(batch));
        self.ready.sync = Some(self.log.generation());
        base_offset
    }

    /// The leader appends `records` as one batch of its epoch; returns its base offset. The
    /// records are committed once the high watermark passes them.
    /// It takes the time as every input does; no timer depends on a proposal yet.
    pub fn propose(&mut self, _now_ms: u64, records: Vec<Bytes>) -> Result<i64, ProposeError> {
        if self.leader.is_none() {
            return Err(ProposeError::NotLeader {
                leader_id: self.leader_id(),
            });
        }
        if records.is_empty() || records.len() > PROPOSE_RECORDS_MAX {
            return Err(ProposeError::BadSize {
                records: records.len(),
            });
        }
        // A fetch answer carries at least one whole batch: one larger than a fetch may carry
        // would stall every follower on it for good.
        let bytes = BATCH_OVERHEAD_BYTES
            + records
                .iter()
                .map(|r| RaftRecord::Data(r.clone()).size_bytes())
                .sum::<usize>();
        if bytes > self.config.fetch_max_bytes {
            return Err(ProposeError::TooLarge {
                bytes,
                max: self.config.fetch_max_bytes,
            });
        }
        let base_offset = self.append_own(records.into_iter().map(RaftRecord::Data).collect());
        self.release_parked();
        self.maybe_advance_high_watermark();
        self.check();
        Ok(base_offset)
    }

    /// [`Raft::propose`], only if this replica still leads `epoch` and its log's next offset is
    /// `base_offset`: a state machine that decided what to write against the log up to
    /// `base_offset` (Kafka's controller, which knows a broker's epoch before its record is
    /// written) never has its batch land elsewhere.
    pub fn propose_at(
        &mut self,
        now_ms: u64,
        epoch: i32,
        base_offset: i64,
        records: Vec<Bytes>,
    ) -> Result<i64, ProposeError> {
        if self.leader.is_none() {
            return Err(ProposeError::NotLeader {
                leader_id: self.leader_id(),
            });
        }
        let log_end_offset = self.log.end_offset();
        if self.epoch() != epoch || log_end_offset != base_offset {
            return Err(ProposeError::Moved {
                expected_epoch: epoch,
                expected_base_offset: base_offset,
                epoch: self.epoch(),
                log_end_offset,
            });
        }
        let offset = self.propose(now_ms, records)?;
        assert_eq!(
            offset, base_offset,
            "a proposal landed where it was not meant to"
        );
        Ok(offset)
    }

    /// The driver synced the log up to `offset`, by a sync asked for in `generation`.
    pub fn synced(&mut self, now_ms: u64, offset: i64, generation: u64) {
        self.log.synced(offset, generation);
        if self.leader.is_some() {
            self.maybe_advance_high_watermark();
        }
        self.maybe_fetch(now_ms);
        self.check();
    }

    /// Gives up leadership (a graceful shutdown): the voters hear EndQuorumEpoch with the
    /// best-placed of them first, and the replica grants no vote in its epoch any more.
    pub fn resign(&mut self, now_ms: u64) {
        let Some(leader) = self.leader.take() else {
            return;
        };
        self.election.resign();
        let mut successors: Vec<(i64, i32)> = self
            .other_voters()
            .into_iter()
            .map(|v| {
                let end = leader
                    .replicas
                    .get(&v)
                    .and_then(|r| r.end_offset)
                    .unwrap_or(-1);
                (end, v)
            })
            .collect();
        // Best log first; ties by the lower id, so the order is deterministic.
        successors.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let preferred_successors: Vec<i32> = successors.into_iter().map(|(_, v)| v).collect();
        let epoch = self.epoch();
        for voter in self.other_voters() {
            self.send(
                voter,
                Message::EndQuorumEpoch {
                    epoch,
                    leader_id: self.local.id,
                    preferred_successors: preferred_successors.clone(),
                },
            );
        }
        for (request, _) in leader.parked.into_values() {
            self.answer_not_leader(request.replica.id, request.request_id, None);
        }
        self.reset_election_deadline(now_ms);
        self.check();
    }

    /// A message from a peer.
    pub fn step(&mut self, now_ms: u64, envelope: Envelope) {
        self.last_input_ms = self.last_input_ms.max(now_ms);
        let from = envelope.from;
        match envelope.message {
            Message::Vote(request) => self.on_vote(now_ms, from, request),
            Message::VoteResponse {
                error,
                epoch,
                leader_id,
                granted,
                pre_vote,
            } => self.on_vote_response(now_ms, from, error, epoch, leader_id, granted, pre_vote),
            Message::BeginQuorumEpoch { epoch, leader_id } => {
                self.on_begin_quorum_epoch(now_ms, from, epoch, leader_id)
            }
            Message::BeginQuorumEpochResponse {
                epoch, leader_id, ..
            } => {
                if epoch > self.epoch() {
                    self.on_higher_epoch(now_ms, epoch, leader_id);
                } else if epoch == self.epoch() {
                    if let Some(leader) = &mut self.leader {
                        leader.begin_sent_ms.remove(&from);
                    }
                }
            }
            Message::EndQuorumEpoch {
                epoch,
                leader_id,
                preferred_successors,
            } => self.on_end_quorum_epoch(now_ms, from, epoch, leader_id, preferred_successors),
            Message::EndQuorumEpochResponse {
                epoch, leader_id, ..
            } => {
                if epoch > self.epoch() {
                    self.on_higher_epoch(now_ms, epoch, leader_id);
                }
            }
            Message::Fetch(request) => self.on_fetch(now_ms, from, request),
            Message::FetchResponse(response) => self.on_fetch_response(now_ms, from, response),
            Message::FetchSnapshot(request) => self.on_fetch_snapshot(now_ms, from, request),
            Message::FetchSnapshotResponse(response) => {
                self.on_fetch_snapshot_response(now_ms, from, response)
            }
        }
        self.answer_stepped_down();
        self.maybe_fetch(now_ms);
        self.check();
    }

    /// A peer named a later epoch: enter it, following its leader if one is named.
    fn on_higher_epoch(&mut self, now_ms: u64, epoch: i32, leader_id: Option<i32>) {
        assert!(epoch > self.epoch(), "not a higher epoch");
        match leader_id {
            Some(leader) if leader != self.local.id && self.voters.contains(&leader) => {
                self.follow(now_ms, epoch, leader);
            }
            _ => {
                let before = self.epoch();
                self.step_down();
                self.fetch.in_flight = None;
                let persisted = self.election.become_unattached(epoch);
                self.persist(persisted.0);
                self.note_epoch(before);
                self.reset_election_deadline(now_ms);
            }
        }
    }

    fn follow(&mut self, now_ms: u64, epoch: i32, leader: i32) -> bool {
        let before = self.epoch();
        match self.election.become_follower(epoch, leader) {
            Ok(persisted) => {
                if let Some(persisted) = persisted {
                    self.persist(persisted.0);
                    self.step_down();
                    self.lost_leader = None;
                    self.fetch.in_flight = None;
                    self.fetch.leader_resigned = false;
                    self.fetch.last_heard_ms = None;
                    // Its snapshot may not be the new leader's: ask the new one.
                    self.fetch.snapshot = None;
                    self.fetch.deadline_ms = now_ms + self.config.fetch_timeout_ms;
                }
                self.note_epoch(before);
                true
            }
            Err(error) => {
                tracing::warn!(node = self.local.id, %error, "raft: refused a leader");
                false
            }
        }
    }

    fn on_vote(&mut self, now_ms: u64, from: i32, request: VoteRequest) {
        let before = self.epoch();
        let was_leader = self.leader.is_some();
        let heard_recently = matches!(self.election.role(), Role::Follower { .. })
            && self
                .fetch
                .last_heard_ms
                .is_some_and(|at| now_ms < at + self.config.fetch_timeout_ms)
            && !self.fetch.leader_resigned;
        let local_log = self.log.position();
        let answer = match self.election.vote(request, local_log, heard_recently) {
            Ok(decision) => {
                if let Some(persisted) = decision.persist {
                    self.persist(persisted.0);
                }
                if self.epoch() != before {
                    self.step_down();
                    self.fetch.in_flight = None;
                    if was_leader {
                        tracing::info!(
                            node = self.local.id,
                            "raft: a later epoch ends this leader's"
                        );
                    }
                }
                if decision.granted && !request.pre_vote {
                    // A replica that just voted gives the candidate time to win.
                    self.reset_election_deadline(now_ms);
                }
                // A pre-vote refusal names a leader only if the responder hears it now (or
                // is it): a peer's stale word would send the prospective back to a dead
                // leader in a loop of timeouts and re-follows.
                let leader_id = if !request.pre_vote || self.leader.is_some() || heard_recently {
                    self.leader_id()
                } else {
                    None
                };
                Message::VoteResponse {
                    error: None,
                    epoch: self.epoch(),
                    leader_id,
                    granted: decision.granted,
                    pre_vote: request.pre_vote,
                }
            }
            Err(ElectionError::FencedEpoch { .. }) => Message::VoteResponse {
                error: Some(QuorumError::FencedLeaderEpoch),
                epoch: self.epoch(),
                leader_id: self.leader_id(),
                granted: false,
                pre_vote: request.pre_vote,
            },
            Err(_) => Message::VoteResponse {
                error: Some(QuorumError::InconsistentVoterSet),
                epoch: self.epoch(),
                leader_id: self.leader_id(),
                granted: false,
                pre_vote: request.pre_vote,
            },
        };
        self.note_epoch(before);
        self.send(from, answer);
    }

    #[allow(clippy::too_many_arguments)]
    fn on_vote_response(
        &mut self,
        now_ms: u64,
        from: i32,
        error: Option<QuorumError>,
        epoch: i32,
        leader_id: Option<i32>,
        granted: bool,
        pre_vote: bool,
    ) {
        if epoch > self.epoch() {
            self.on_higher_epoch(now_ms, epoch, leader_id);
            return;
        }
        if epoch < self.epoch() || error.is_some() {
            return;
        }
        match self.election.role().clone() {
            Role::Prospective { .. } if pre_vote => {
                if let Some(leader) = leader_id.filter(|l| *l != self.local.id) {
                    // A voter still hears a leader of this epoch: follow it (KIP-996).
                    if !granted {
                        self.follow(now_ms, epoch, leader);
                        return;
                    }
                }
                if granted && self.election.vote_granted(from, epoch + 1, true) {
                    self.start_election(now_ms);
                }
            }
            Role::Candidate { .. }
                if !pre_vote && granted && self.election.vote_granted(from, epoch, false) =>
            {
                self.become_leader(now_ms);
            }
            _ => {}
        }
    }

    fn on_begin_quorum_epoch(&mut self, now_ms: u64, from: i32, epoch: i32, leader_id: i32) {
        let error = if epoch < self.epoch() {
            Some(QuorumError::FencedLeaderEpoch)
        } else if leader_id != from || !self.follow(now_ms, epoch, leader_id) {
            Some(QuorumError::InconsistentVoterSet)
        } else {
            self.fetch.deadline_ms = now_ms + self.config.fetch_timeout_ms;
            self.fetch.last_heard_ms = Some(now_ms);
            self.lost_leader = None;
            None
        };
        let answer = Message::BeginQuorumEpochResponse {
            error,
            epoch: self.epoch(),
            leader_id: self.leader_id(),
        };
        self.send(from, answer);
    }

    fn on_end_quorum_epoch(
        &mut self,
        now_ms: u64,
        from: i32,
        epoch: i32,
        leader_id: i32,
        preferred_successors: Vec<i32>,
    ) {
        if epoch > self.epoch() {
            self.on_higher_epoch(now_ms, epoch, None);
        }
        let error = if epoch < self.epoch() {
            Some(QuorumError::FencedLeaderEpoch)
        } else {
            let ours = self.election.leader_id() == Some(leader_id) || self.leader_id().is_none();
            if ours && self.election.is_voter() && self.leader.is_none() {
                // The first successor stands at once, the next after a short wait, and so on
                // (Kafka's strict exponential backoff by position), so the best log usually
                // wins without a split vote.
                let position = preferred_successors
                    .iter()
                    .position(|v| *v == self.local.id)
                    .unwrap_or(preferred_successors.len());
                let step_ms = (self.config.election_backoff_max_ms / 8).max(1);
                let wait_ms = (step_ms << position.min(3)).min(self.config.election_backoff_max_ms);
                let wait_ms = if position == 0 { 0 } else { wait_ms };
                self.fetch.leader_resigned = true;
                self.fetch.deadline_ms = self.fetch.deadline_ms.min(now_ms + wait_ms);
                self.election_deadline_ms = self.election_deadline_ms.min(now_ms + wait_ms);
            }
            None
        };
        let answer = Message::EndQuorumEpochResponse {
            error,
            epoch: self.epoch(),
            leader_id: self.leader_id(),
        };
        self.send(from, answer);
    }

    fn answer_not_leader(&mut self, to: i32, request_id: u64, error: Option<QuorumError>) {
        let answer = Message::FetchResponse(FetchResponse {
            request_id,
            error: Some(error.unwrap_or(QuorumError::NotLeader)),
            epoch: self.epoch(),
            leader_id: self.leader_id(),
            high_watermark: self.high_watermark,
            log_start_offset: self.log.start_offset(),
            diverging: None,
            read: None,
            batches: Vec::new(),
            snapshot_id: None,
        });
        self.send(to, answer);
    }

    /// Kafka's `validateOffsetAndEpoch`: whether the fetcher's log matches this one up to
    /// its fetch offset, or else where it must truncate to, or whether it must fetch the
    /// latest snapshot because what it lacks is below the log start.
    fn validate_fetch(&self, request: &FetchRequest) -> FetchValidity {
        let start = self.log.start_offset();
        let snapshot = || match self.log.snapshot() {
            Some(id) => FetchValidity::Snapshot(id),
            // A log that starts at 0 has everything: start the fetcher over from there.
            None => FetchValidity::Diverging(EpochEnd {
                epoch: 0,
                end_offset: 0,
            }),
        };
        if request.fetch_offset < start {
            return snapshot();
        }
        if request.fetch_offset == start
            && self.log.epoch_before(start) == Some(request.last_fetched_epoch)
        {
            return FetchValidity::Valid;
        }
        if request.fetch_offset == 0 && request.last_fetched_epoch == 0 {
            return FetchValidity::Valid;
        }
        let end = self.log.end_offset_for_epoch(request.last_fetched_epoch);
        if end.epoch == UNDEFINED_EPOCH {
            // An epoch this log cannot place at all: start over from the log start, or from
            // the snapshot that stands for what lies below it.
            if start > 0 {
                return snapshot();
            }
            return FetchValidity::Diverging(EpochEnd {
                epoch: 0,
                end_offset: 0,
            });
        }
        if end.epoch != request.last_fetched_epoch || end.end_offset < request.fetch_offset {
            if end.end_offset < start {
                return snapshot();
            }
            return FetchValidity::Diverging(end);
        }
        FetchValidity::Valid
    }

    fn on_fetch(&mut self, now_ms: u64, from: i32, request: FetchRequest) {
        if let Some(leader) = &mut self.leader {
            // A replica fetches one at a time: a new fetch supersedes the one held for it,
            // whose sender has given up on it.
            leader.parked.remove(&from);
        }
        if request.replica.id != from {
            self.answer_not_leader(
                from,
                request.request_id,
                Some(QuorumError::InconsistentVoterSet),
            );
            return;
        }
        if self.leader.is_none() {
            let error = if request.epoch < self.epoch() {
                QuorumError::FencedLeaderEpoch
            } else {
                QuorumError::NotLeader
            };
            self.answer_not_leader(from, request.request_id, Some(error));
            return;
        }
        if request.epoch < self.epoch() {
            self.answer_not_leader(
                from,
                request.request_id,
                Some(QuorumError::FencedLeaderEpoch),
            );
            return;
        }
        if request.epoch > self.epoch() {
            self.answer_not_leader(
                from,
                request.request_id,
                Some(QuorumError::UnknownLeaderEpoch),
            );
            return;
        }
        if request.fetch_offset < 0 {
            self.answer_not_leader(
                from,
                request.request_id,
                Some(QuorumError::InconsistentVoterSet),
            );
            return;
        }
        match self.validate_fetch(&request) {
            FetchValidity::Valid => {}
            FetchValidity::Diverging(diverging) => {
                self.touch_replica(from, now_ms, None);
                self.answer_fetch(request, Some(diverging));
                return;
            }
            FetchValidity::Snapshot(id) => {
                self.touch_replica(from, now_ms, None);
                self.answer_fetch_with_snapshot(request, id);
                return;
            }
        }
        self.touch_replica(from, now_ms, Some(request.fetch_offset));
        self.maybe_advance_high_watermark();
        let last_sent = self
            .leader
            .as_ref()
            .and_then(|l| l.replicas.get(&from))
            .map_or(-1, |r| r.last_sent_high_watermark);
        if request.fetch_offset < self.log.end_offset() || last_sent < self.high_watermark {
            self.answer_fetch(request, None);
        } else if let Some(leader) = &mut self.leader {
            // Nothing new to tell: hold the fetch (long poll).
            leader
                .parked
                .insert(from, (request, now_ms + self.config.fetch_max_wait_ms));
        }
    }

    fn touch_replica(&mut self, id: i32, now_ms: u64, end_offset: Option<i64>) {
        let voter = self.voters.contains(&id);
        let log_end_offset = self.log.end_offset();
        let Some(leader) = &mut self.leader else {
            return;
        };
        let observers = leader
            .replicas
            .keys()
            .filter(|k| !self.voters.contains(k))
            .count();
        if !voter && !leader.replicas.contains_key(&id) && observers >= OBSERVERS_MAX {
            // Make room by forgetting observers silent for Kafka's observer session timeout.
            let voters = &self.voters;
            leader.replicas.retain(|k, r| {
                voters.contains(k)
                    || r.last_fetch_ms
                        .is_some_and(|at| now_ms < at + OBSERVER_SESSION_TIMEOUT_MS)
            });
            let observers = leader
                .replicas
                .keys()
                .filter(|k| !voters.contains(k))
                .count();
            if observers >= OBSERVERS_MAX {
                return;
            }
        }
        let replica = leader.replicas.entry(id).or_insert(ReplicaState {
            end_offset: None,
            last_fetch_ms: None,
            last_caught_up_ms: None,
            last_sent_high_watermark: -1,
        });
        replica.last_fetch_ms = Some(now_ms);
        if let Some(end) = end_offset {
            replica.end_offset = Some(end);
            if end >= log_end_offset {
                replica.last_caught_up_ms = Some(now_ms);
            }
        }
        leader.begin_sent_ms.remove(&id);
    }

    fn answer_fetch(&mut self, request: FetchRequest, diverging: Option<EpochEnd>) {
        let high_watermark = self.high_watermark;
        if let Some(leader) = &mut self.leader {
            if let Some(replica) = leader.replicas.get_mut(&request.replica.id) {
                replica.last_sent_high_watermark = high_watermark;
            }
        }
        let read = (diverging.is_none() && request.fetch_offset < self.log.end_offset()).then_some(
            LogRead {
                from_offset: request.fetch_offset,
                max_bytes: self.config.fetch_max_bytes,
            },
        );
        let answer = Message::FetchResponse(FetchResponse {
            request_id: request.request_id,
            error: None,
            epoch: self.epoch(),
            leader_id: Some(self.local.id),
            high_watermark,
            log_start_offset: self.log.start_offset(),
            diverging,
            read,
            batches: Vec::new(),
            snapshot_id: None,
        });
        self.send(request.replica.id, answer);
    }

    fn answer_fetch_with_snapshot(&mut self, request: FetchRequest, id: SnapshotId) {
        let answer = Message::FetchResponse(FetchResponse {
            request_id: request.request_id,
            error: None,
            epoch: self.epoch(),
            leader_id: Some(self.local.id),
            high_watermark: self.high_watermark,
            log_start_offset: self.log.start_offset(),
            diverging: None,
            read: None,
            batches: Vec::new(),
            snapshot_id: Some(id),
        });
        self.send(request.replica.id, answer);
    }

    /// New records or a new high watermark: answer every held fetch.
    fn release_parked(&mut self) {
        let parked = match &mut self.leader {
            Some(leader) => std::mem::take(&mut leader.parked),
            None => return,
        };
        for (request, _) in parked.into_values() {
            self.answer_fetch(request, None);
        }
    }

    /// Kafka's `LeaderState.maybeUpdateHighWatermark`: the largest offset a majority of
    /// voters acknowledged, if it lies past the epoch's start.
    fn maybe_advance_high_watermark(&mut self) {
        let Some(leader) = &self.leader else {
            return;
        };
        let own = if self.bugs.ack_unsynced {
            self.log.end_offset()
        } else {
            self.log.synced_offset()
        };
        let mut acknowledged: Vec<i64> = self
            .voters
            .iter()
            .map(|v| {
                if *v == self.local.id {
                    own
                } else {
                    leader
                        .replicas
                        .get(v)
                        .and_then(|r| r.end_offset)
                        .unwrap_or(-1)
                }
            })
            .collect();
        acknowledged.sort_unstable_by(|a, b| b.cmp(a));
        let majority = self.election.majority();
        assert!(
            majority <= acknowledged.len(),
            "a majority beyond the voters"
        );
        let candidate = acknowledged[majority - 1];
        let own_epoch = candidate > leader.epoch_start_offset || self.bugs.commit_previous_epoch;
        if own_epoch && candidate > self.high_watermark {
            assert!(
                candidate <= self.log.end_offset(),
                "a high watermark past the log end"
            );
            self.high_watermark = candidate;
            self.ready.high_watermark = Some(candidate);
            self.release_parked();
        }
    }

    /// The fetch loop of a follower or observer: one fetch at a time, to the leader (or, for
    /// an observer that knows none, to a voter in turn), and under the default policy only
    /// once everything appended is synced, so that its offset acknowledges synced records.
    fn maybe_fetch(&mut self, now_ms: u64) {
        if self.leader.is_some()
            || self.fetch.in_flight.is_some()
            || self.fetch.finishing.is_some()
            || now_ms < self.fetch.retry_at_ms
        {
            return;
        }
        if !self.bugs.ack_unsynced && self.log.synced_offset() < self.log.end_offset() {
            return;
        }
        let target = match self.election.role() {
            Role::Follower { leader_id } if !self.fetch.leader_lost => *leader_id,
            _ if !self.election.is_voter() => {
                let voters: Vec<i32> = self.voters.iter().copied().collect();
                voters[self.fetch.bootstrap_next % voters.len()]
            }
            _ => return,
        };
        self.fetch.next_request_id += 1;
        let request_id = self.fetch.next_request_id;
        self.fetch.in_flight = Some((target, now_ms, request_id));
        if let Some(state) = self.fetch.snapshot {
            let request = FetchSnapshotRequest {
                request_id,
                replica: self.local,
                epoch: self.epoch(),
                snapshot_id: state.id,
                position: state.position,
                max_bytes: self.config.fetch_max_bytes,
            };
            self.send(target, Message::FetchSnapshot(request));
            return;
        }
        let request = FetchRequest {
            request_id,
            replica: self.local,
            epoch: self.epoch(),
            fetch_offset: self.log.end_offset(),
            last_fetched_epoch: self.log.last_epoch(),
        };
        self.send(target, Message::Fetch(request));
    }

    /// What every answer to a fetch or a snapshot fetch goes through: it must answer the
    /// outstanding request; a later epoch is entered; an error backs off (and may name the
    /// leader); a good answer from the leader resets the fetch timeout. True when the
    /// answer's content is to be taken.
    fn take_fetch_answer(
        &mut self,
        now_ms: u64,
        from: i32,
        request_id: u64,
        epoch: i32,
        leader_id: Option<i32>,
        error: Option<QuorumError>,
    ) -> bool {
        if self.fetch.in_flight.map(|(to, _, id)| (to, id)) != Some((from, request_id)) {
            // Not the answer to the outstanding fetch: a late one, or a duplicate.
            return false;
        }
        self.fetch.in_flight = None;
        if epoch > self.epoch() {
            let leader = leader_id.or(error.is_none().then_some(from));
            self.on_higher_epoch(now_ms, epoch, leader);
        }
        if epoch < self.epoch() || self.leader.is_some() {
            return false;
        }
        if let Some(error) = error {
            self.fetch.retry_at_ms = now_ms + self.config.retry_backoff_ms;
            if let Some(leader) = leader_id.filter(|l| *l != self.local.id) {
                let looking = self.leader_id().is_none() || self.fetch.leader_lost;
                if looking && error == QuorumError::NotLeader && self.follow(now_ms, epoch, leader)
                {
                    // Told where the leader is: ask it next.
                    self.fetch.leader_lost = false;
                }
            }
            return false;
        }
        if self.leader_id() != Some(from) && !self.follow(now_ms, epoch, from) {
            return false;
        }
        self.fetch.deadline_ms = now_ms + self.config.fetch_timeout_ms;
        self.fetch.last_heard_ms = Some(now_ms);
        self.lost_leader = None;
        self.fetch.leader_lost = false;
        true
    }

    fn on_fetch_response(&mut self, now_ms: u64, from: i32, response: FetchResponse) {
        if !self.take_fetch_answer(
            now_ms,
            from,
            response.request_id,
            response.epoch,
            response.leader_id,
            response.error,
        ) {
            return;
        }
        if let Some(id) = response.snapshot_id {
            if !self.snapshot_replaces_log(id) || id.epoch > response.epoch {
                // A leader sends its snapshot to a fetcher whose log ends below its start or
                // diverges below it; this one would take committed records away.
                tracing::warn!(
                    node = self.local.id,
                    snapshot_end_offset = id.end_offset,
                    snapshot_epoch = id.epoch,
                    log_end_offset = self.log.end_offset(),
                    high_watermark = self.high_watermark,
                    "raft: refused a snapshot that would not replace this log"
                );
                self.fetch.retry_at_ms = now_ms + self.config.retry_backoff_ms;
                return;
            }
            self.fetch.snapshot = Some(SnapshotFetch {
                id,
                position: 0,
                size: None,
            });
            return;
        }
        if let Some(diverging) = response.diverging {
            if !self.truncate_diverging(diverging) {
                self.fetch.retry_at_ms = now_ms + self.config.retry_backoff_ms;
            }
            return;
        }
        for batch in response.batches {
            if batch.next_offset() <= self.log.end_offset() {
                continue;
            }
            if batch.base_offset != self.log.end_offset()
                || batch.epoch < self.log.last_epoch()
                || batch.epoch > response.epoch
                || batch.records.is_empty()
            {
                tracing::warn!(
                    node = self.local.id,
                    base_offset = batch.base_offset,
                    epoch = batch.epoch,
                    log_end_offset = self.log.end_offset(),
                    "raft: a fetched batch does not continue the log; the rest of the answer is dropped"
                );
                break;
            }
            self.log
                .append(batch.base_offset, batch.next_offset(), batch.epoch);
            self.ready.log_ops.push(LogOp::Append(batch));
            self.ready.sync = Some(self.log.generation());
        }
        let high_watermark = response.high_watermark.min(self.log.end_offset());
        if high_watermark > self.high_watermark {
            self.high_watermark = high_watermark;
            self.ready.high_watermark = Some(high_watermark);
        }
    }

    /// A follower fetches a chunk of the latest snapshot (Kafka's
    /// `handleFetchSnapshotRequest`): only the leader answers, in its own epoch, and only for
    /// its latest snapshot; the driver reads the chunk.
    fn on_fetch_snapshot(&mut self, now_ms: u64, from: i32, request: FetchSnapshotRequest) {
        let error = if request.replica.id != from {
            Some(QuorumError::InconsistentVoterSet)
        } else if request.epoch < self.epoch() {
            Some(QuorumError::FencedLeaderEpoch)
        } else if self.leader.is_none() {
            Some(QuorumError::NotLeader)
        } else if request.epoch > self.epoch() {
            Some(QuorumError::UnknownLeaderEpoch)
        } else if self.log.snapshot() != Some(request.snapshot_id) {
            Some(QuorumError::SnapshotNotFound)
        } else if request.position < 0 {
            Some(QuorumError::PositionOutOfRange)
        } else {
            None
        };
        let read = error.is_none().then_some(SnapshotRead {
            snapshot_id: request.snapshot_id,
            position: request.position,
            max_bytes: self.config.fetch_max_bytes.min(request.max_bytes),
        });
        if read.is_some() {
            // A follower fetching a snapshot is alive and following (check quorum counts it).
            self.touch_replica(from, now_ms, None);
        }
        let answer = Message::FetchSnapshotResponse(FetchSnapshotResponse {
            request_id: request.request_id,
            error,
            epoch: self.epoch(),
            leader_id: self.leader_id(),
            snapshot_id: request.snapshot_id,
            // The driver fills in the size and the bytes when it reads the chunk.
            size: -1,
            position: if read.is_some() { request.position } else { -1 },
            read,
            bytes: Bytes::new(),
        });
        self.send(from, answer);
    }

    fn on_fetch_snapshot_response(
        &mut self,
        now_ms: u64,
        from: i32,
        response: FetchSnapshotResponse,
    ) {
        if response.error.is_some()
            && self.fetch.in_flight.map(|(to, _, id)| (to, id)) == Some((from, response.request_id))
        {
            // The leader no longer has it (a newer snapshot replaced it) or it is no longer
            // the leader: start over with a fetch, which names what to fetch now.
            self.fetch.snapshot = None;
        }
        if !self.take_fetch_answer(
            now_ms,
            from,
            response.request_id,
            response.epoch,
            response.leader_id,
            response.error,
        ) {
            return;
        }
        let Some(mut state) = self.fetch.snapshot else {
            return;
        };
        let len = response.bytes.len() as i64;
        let fits = response.snapshot_id == state.id
            && response.position == state.position
            && response.size > 0
            && response.size <= SNAPSHOT_BYTES_MAX
            && state.size.is_none_or(|size| size == response.size)
            && len > 0
            && response.position + len <= response.size;
        if !fits {
            tracing::warn!(
                node = self.local.id,
                position = response.position,
                size = response.size,
                bytes = len,
                expected_position = state.position,
                "raft: a snapshot chunk that does not continue the snapshot; starting it over"
            );
            self.fetch.snapshot = None;
            self.fetch.retry_at_ms = now_ms + self.config.retry_backoff_ms;
            return;
        }
        self.ready.log_ops.push(LogOp::SnapshotChunk {
            id: state.id,
            position: state.position,
            bytes: response.bytes,
        });
        state.position += len;
        state.size = Some(response.size);
        if state.position < response.size {
            self.fetch.snapshot = Some(state);
            return;
        }
        self.fetch.snapshot = None;
        self.fetch.finishing = Some(state.id);
        self.ready.log_ops.push(LogOp::FinishSnapshot(state.id));
    }

    /// The driver checked the snapshot [`LogOp::FinishSnapshot`] named: `sound` when it
    /// decoded whole with this quorum's voter set and is now durable under its name. A sound
    /// snapshot is installed; anything else is fetched again after the retry backoff (the
    /// log is untouched).
    pub fn snapshot_finished(&mut self, now_ms: u64, id: SnapshotId, sound: bool) {
        assert_eq!(
            self.fetch.finishing,
            Some(id),
            "a snapshot finished that was not being finished"
        );
        self.fetch.finishing = None;
        if sound && self.leader.is_none() && self.snapshot_replaces_log(id) {
            self.install_snapshot(id);
        } else {
            tracing::warn!(
                node = self.local.id,
                end_offset = id.end_offset,
                epoch = id.epoch,
                sound,
                "raft: a fetched snapshot was not installed; fetching again"
            );
            self.fetch.retry_at_ms = now_ms + self.config.retry_backoff_ms;
        }
        self.maybe_fetch(now_ms);
        self.check();
    }

    /// Whether a snapshot the leader names replaces this log (Kafka's
    /// `truncateToLatestSnapshot`): it must not end below the high watermark, and it must reach
    /// past the log end or be of a later epoch than the log's last (the log's tail then
    /// diverges from the leader's below its start, a tail a fetch cannot repair).
    fn snapshot_replaces_log(&self, id: SnapshotId) -> bool {
        let past_end = id.end_offset > self.log.end_offset();
        let later_epoch = id.epoch > self.log.last_epoch();
        id.end_offset >= self.high_watermark && id.end_offset > 0 && (past_end || later_epoch)
    }

    fn install_snapshot(&mut self, id: SnapshotId) {
        assert!(
            self.snapshot_replaces_log(id),
            "a fetched snapshot that does not replace the log"
        );
        self.ready.log_ops.push(LogOp::InstallSnapshot(id));
        self.log.install_snapshot(id);
        // The snapshot holds only committed records (the leader made it from below its
        // high watermark), so everything below its end is committed.
        self.high_watermark = id.end_offset;
        self.ready.high_watermark = Some(id.end_offset);
        self.ready.events.push(RaftEvent::SnapshotLoaded { id });
    }

    /// The id a snapshot of the state after every record below `end_offset` gets: the
    /// records must be committed and at or above the log start, and the snapshot newer
    /// than the latest.
    pub fn snapshot_id_for(&self, end_offset: i64) -> Result<SnapshotId, SnapshotError> {
        let out_of_range = SnapshotError::OutOfRange {
            end_offset,
            log_start_offset: self.log.start_offset(),
            high_watermark: self.high_watermark,
        };
        if end_offset < self.log.start_offset() || end_offset > self.high_watermark {
            return Err(out_of_range);
        }
        if let Some(latest) = self.log.snapshot() {
            if end_offset <= latest.end_offset {
                return Err(SnapshotError::NotNewer { end_offset, latest });
            }
        }
        let floor = self
            .log
            .snapshot()
            .map_or(self.log.start_offset(), |s| s.end_offset)
            .max(self.log.start_offset());
        let end_offset = if self.bugs.snapshot_short_of_its_state && end_offset - 1 > floor {
            end_offset - 1
        } else {
            end_offset
        };
        let epoch = self.log.epoch_before(end_offset).ok_or(out_of_range)?;
        Ok(SnapshotId { end_offset, epoch })
    }

    /// The driver wrote snapshot `id` durably (after [`Raft::snapshot_id_for`]): the leader
    /// serves it to fetchers below the log start from now on.
    pub fn snapshot_created(&mut self, id: SnapshotId) {
        assert!(
            id.end_offset <= self.high_watermark,
            "a snapshot of uncommitted records"
        );
        self.log.snapshot_created(id);
        self.check();
    }

    /// The driver moved the log start to the latest snapshot's end (retention deleted what
    /// lay below it, after making it durable).
    pub fn log_start_advanced(&mut self, offset: i64) {
        assert!(
            offset <= self.high_watermark,
            "a log start past the high watermark"
        );
        self.log.advance_start(offset);
        self.check();
    }

    /// Kafka's `truncateToEndOffset`: cut the log where it stops matching the leader's.
    /// False when the cut is refused.
    fn truncate_diverging(&mut self, diverging: EpochEnd) -> bool {
        let local = self.log.end_offset_for_epoch(diverging.epoch);
        let mut to = if local.epoch == diverging.epoch {
            local.end_offset.min(diverging.end_offset)
        } else if local.epoch == UNDEFINED_EPOCH {
            diverging.end_offset.min(self.log.end_offset())
        } else {
            local.end_offset
        };
        to = to.clamp(self.log.start_offset(), self.log.end_offset());
        if self.bugs.truncate_below_committed && self.high_watermark > self.log.start_offset() {
            to = to.min(self.high_watermark - 1);
        } else if to < self.high_watermark && self.bugs == RaftBugs::default() {
            // A leader's answer is a peer's word: one that would cut committed records is
            // refused (and the fetch retried), never obeyed. With a planted bug the high
            // watermark itself may be wrong, and the simulation's checker must judge.
            tracing::warn!(
                node = self.local.id,
                to,
                high_watermark = self.high_watermark,
                "raft: refused a diverging epoch that would truncate below the high watermark"
            );
            return false;
        }
        self.ready.events.push(RaftEvent::Truncated {
            to,
            high_watermark: self.high_watermark,
        });
        if to < self.log.end_offset() {
            self.log.truncate_to(to);
            self.ready.log_ops.push(LogOp::Truncate(to));
            if self.log.synced_offset() < self.log.end_offset() {
                // A sync asked for before the cut no longer counts; what is left unsynced
                // needs one of this generation before the next fetch acknowledges it.
                self.ready.sync = Some(self.log.generation());
            }
        }
        true
    }

    fn check(&self) {
        assert!(
            self.stepped_down.is_empty(),
            "a held fetch of an ended leadership left unanswered"
        );
        assert!(
            self.high_watermark <= self.log.end_offset() || self.bugs != RaftBugs::default(),
            "the high watermark past the log end"
        );
        assert!(
            self.high_watermark >= self.log.start_offset(),
            "the high watermark below the log start"
        );
        assert!(self.voters.len() <= VOTERS_MAX, "too many voters");
        match (&self.leader, self.election.role()) {
            (Some(leader), Role::Leader) => {
                assert!(
                    leader.epoch_start_offset < self.log.end_offset(),
                    "a leader without its leader-change record"
                );
                assert!(
                    leader.parked.len() <= VOTERS_MAX + OBSERVERS_MAX,
                    "held fetches beyond the replicas"
                );
            }
            (None, Role::Leader) => panic!("a leader role without leader state"),
            (Some(_), _) => panic!("leader state without the leader role"),
            (None, _) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::leader_epoch::LeaderEpochCache;

    fn replica(log: LogView, persisted: ElectionState) -> Raft {
        Raft::new(
            RaftConfig::DEFAULT,
            ReplicaKey::node(1),
            BTreeSet::from([1, 2, 3]),
            persisted,
            log,
            0,
            7,
        )
        .expect("a replica")
    }

    /// Node 1 of three, elected leader by votes from 2 and 3, its first record committed by
    /// node 2's fetch.
    fn leader_of_three() -> (Raft, u64) {
        let mut raft = replica(LogView::empty(), ElectionState::INITIAL);
        let mut now = raft.next_deadline_ms();
        raft.tick(now);
        win_votes(&mut raft, now, &[2, 3]);
        assert!(raft.is_leader());
        now += 1;
        let ready = raft.ready();
        let end = raft.log().end_offset();
        raft.synced(now, end, ready.sync.expect("a sync"));
        raft.ready();
        (raft, now)
    }

    /// Grants the pre-votes and then the votes node 1 asks of `voters` (every voter it asks
    /// must be among them); the other requests go unanswered.
    fn win_votes(raft: &mut Raft, now: u64, voters: &[i32]) {
        for pre_vote in [true, false] {
            let requests: Vec<Envelope> = raft
                .ready()
                .messages
                .into_iter()
                .filter(|m| matches!(m.message, Message::Vote(_)) && voters.contains(&m.to))
                .collect();
            assert_eq!(requests.len(), voters.len(), "votes asked of {voters:?}");
            for request in requests {
                let Message::Vote(vote) = request.message else {
                    unreachable!()
                };
                // A pre-vote's voter answers in its own epoch; a vote moves it to the
                // candidate's.
                let epoch = if pre_vote {
                    raft.epoch()
                } else {
                    vote.candidate_epoch
                };
                raft.step(
                    now,
                    Envelope {
                        from: request.to,
                        to: 1,
                        message: Message::VoteResponse {
                            error: None,
                            epoch,
                            leader_id: None,
                            granted: true,
                            pre_vote,
                        },
                    },
                );
            }
        }
    }

    fn fetch(raft: &mut Raft, now_ms: u64, request_id: u64) -> Vec<Message> {
        let request = FetchRequest {
            request_id,
            replica: ReplicaKey::node(2),
            epoch: raft.epoch(),
            fetch_offset: raft.log().end_offset(),
            last_fetched_epoch: raft.log().last_epoch(),
        };
        raft.step(
            now_ms,
            Envelope {
                from: 2,
                to: 1,
                message: Message::Fetch(request),
            },
        );
        raft.ready()
            .messages
            .into_iter()
            .map(|m| m.message)
            .collect()
    }

    #[test]
    fn held_fetches_are_answered_when_leadership_ends() {
        let (mut raft, now) = leader_of_three();
        let first = fetch(&mut raft, now, 1);
        assert!(
            matches!(&first[..], [Message::FetchResponse(r)] if r.request_id == 1),
            "the first fetch is answered at once: {first:?}"
        );
        assert!(fetch(&mut raft, now, 2).is_empty(), "nothing new: held");
        assert!(
            fetch(&mut raft, now, 3).is_empty(),
            "a newer fetch supersedes it"
        );
        let epoch = raft.epoch();
        raft.step(
            now,
            Envelope {
                from: 3,
                to: 1,
                message: Message::BeginQuorumEpoch {
                    epoch: epoch + 1,
                    leader_id: 3,
                },
            },
        );
        let answers: Vec<(u64, Option<QuorumError>, i32)> = raft
            .ready()
            .messages
            .into_iter()
            .filter_map(|m| match m.message {
                Message::FetchResponse(r) => Some((r.request_id, r.error, r.epoch)),
                _ => None,
            })
            .collect();
        assert_eq!(
            answers,
            vec![(3, Some(QuorumError::NotLeader), epoch + 1)],
            "only the newest held fetch, answered in the new epoch"
        );
    }

    /// Node 1 follows node 3, hears from it at `heard`, then nothing: at its fetch timeout it
    /// stands, wins with node 2's votes, and reports how long node 3 had been silent; a
    /// later leader change it hears of clears it.
    #[test]
    fn a_leader_elected_after_its_leader_went_silent_reports_the_silence() {
        let mut raft = replica(LogView::empty(), ElectionState::INITIAL);
        let heard = 10;
        raft.step(
            heard,
            Envelope {
                from: 3,
                to: 1,
                message: Message::BeginQuorumEpoch {
                    epoch: 1,
                    leader_id: 3,
                },
            },
        );
        raft.ready();
        assert_eq!(raft.leader_id(), Some(3));
        assert_eq!(raft.predecessor_silence(), None, "a follower");
        let now = heard + RaftConfig::DEFAULT.fetch_timeout_ms;
        raft.tick(now);
        win_votes(&mut raft, now, &[2]);
        assert!(raft.is_leader());
        assert_eq!(
            raft.predecessor_silence(),
            Some((3, now - heard)),
            "node 3, silent since it was last heard"
        );
        let epoch = raft.epoch();
        raft.step(
            now + 1,
            Envelope {
                from: 2,
                to: 1,
                message: Message::BeginQuorumEpoch {
                    epoch: epoch + 1,
                    leader_id: 2,
                },
            },
        );
        assert_eq!(raft.predecessor_silence(), None, "no longer leading");
    }

    #[test]
    fn a_proposal_larger_than_a_fetch_may_carry_is_refused() {
        let (mut raft, now) = leader_of_three();
        let big = Bytes::from(vec![0u8; RaftConfig::DEFAULT.fetch_max_bytes]);
        assert!(matches!(
            raft.propose(now, vec![big]),
            Err(ProposeError::TooLarge { .. })
        ));
        assert!(raft
            .propose(now, vec![Bytes::from_static(b"small")])
            .is_ok());
    }

    #[test]
    fn a_proposal_at_a_moved_offset_or_epoch_is_refused() {
        let (mut raft, now) = leader_of_three();
        let epoch = raft.epoch();
        let end = raft.log().end_offset();
        let record = || vec![Bytes::from_static(b"r")];
        assert_eq!(
            raft.propose_at(now, epoch, end + 1, record()),
            Err(ProposeError::Moved {
                expected_epoch: epoch,
                expected_base_offset: end + 1,
                epoch,
                log_end_offset: end,
            })
        );
        assert!(matches!(
            raft.propose_at(now, epoch - 1, end, record()),
            Err(ProposeError::Moved { .. })
        ));
        assert_eq!(raft.log().end_offset(), end, "nothing refused was appended");
        assert_eq!(raft.propose_at(now, epoch, end, record()), Ok(end));
        assert_eq!(raft.propose_at(now, epoch, end + 1, record()), Ok(end + 1));
    }

    #[test]
    fn a_candidate_claims_only_its_synced_log() {
        let mut log = LogView::empty();
        log.append(0, 5, 1);
        log.synced(5, log.generation());
        log.append(5, 9, 1);
        let mut raft = replica(log, ElectionState::INITIAL);
        raft.tick(raft.next_deadline_ms());
        let ready = raft.ready();
        let claims: Vec<i64> = ready
            .messages
            .iter()
            .filter_map(|m| match &m.message {
                Message::Vote(request) => Some(request.candidate_log.end_offset),
                _ => None,
            })
            .collect();
        assert_eq!(
            claims,
            vec![5, 5],
            "pre-votes to both peers, for the synced end"
        );
    }

    #[test]
    fn a_quorum_state_behind_the_log_is_moved_to_the_logs_epoch() {
        let epochs = LeaderEpochCache::from_entries(vec![
            crate::log::leader_epoch::EpochEntry {
                epoch: 1,
                start_offset: 0,
            },
            crate::log::leader_epoch::EpochEntry {
                epoch: 3,
                start_offset: 4,
            },
        ])
        .expect("epochs");
        let mut raft = replica(LogView::opened(0, 8, epochs, &[]), ElectionState::INITIAL);
        assert_eq!(raft.epoch(), 3);
        assert_eq!(raft.ready().persist.map(|p| p.epoch), Some(3));
    }

    /// The leader of three with records committed by node 2, a snapshot of all of them, and
    /// the log start moved to it.
    fn leader_with_a_snapshot() -> (Raft, u64, SnapshotId) {
        let (mut raft, mut now) = leader_of_three();
        raft.propose(
            now,
            vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")],
        )
        .expect("a proposal");
        now += 1;
        let ready = raft.ready();
        let end = raft.log().end_offset();
        raft.synced(now, end, ready.sync.expect("a sync"));
        raft.ready();
        fetch(&mut raft, now, 1);
        assert_eq!(raft.high_watermark(), end, "committed by node 2's fetch");
        assert!(
            matches!(
                raft.snapshot_id_for(end + 1),
                Err(SnapshotError::OutOfRange { .. })
            ),
            "no snapshot past the high watermark"
        );
        let id = raft.snapshot_id_for(end).expect("a snapshot id");
        assert_eq!(id.epoch, raft.epoch());
        raft.snapshot_created(id);
        assert!(matches!(
            raft.snapshot_id_for(end),
            Err(SnapshotError::NotNewer { .. })
        ));
        raft.log_start_advanced(end);
        assert_eq!(raft.log().start_offset(), end);
        (raft, now, id)
    }

    fn step_from(raft: &mut Raft, now_ms: u64, from: i32, message: Message) -> Vec<Message> {
        raft.step(
            now_ms,
            Envelope {
                from,
                to: raft.local_id(),
                message,
            },
        );
        raft.ready()
            .messages
            .into_iter()
            .map(|m| m.message)
            .collect()
    }

    #[test]
    fn a_fetch_below_the_log_start_is_sent_to_the_snapshot_and_served_from_it() {
        let (mut raft, now, id) = leader_with_a_snapshot();
        let epoch = raft.epoch();
        let fresh = FetchRequest {
            request_id: 9,
            replica: ReplicaKey::node(3),
            epoch,
            fetch_offset: 0,
            last_fetched_epoch: 0,
        };
        let answers = step_from(&mut raft, now, 3, Message::Fetch(fresh));
        assert!(
            matches!(&answers[..], [Message::FetchResponse(r)]
                if r.snapshot_id == Some(id) && r.batches.is_empty() && r.read.is_none()
                    && r.log_start_offset == id.end_offset),
            "a fetcher with nothing is told the snapshot: {answers:?}"
        );
        let ask = |snapshot_id, position| {
            Message::FetchSnapshot(FetchSnapshotRequest {
                request_id: 10,
                replica: ReplicaKey::node(3),
                epoch,
                snapshot_id,
                position,
                max_bytes: 4096,
            })
        };
        let answers = step_from(&mut raft, now, 3, ask(id, 0));
        assert!(
            matches!(&answers[..], [Message::FetchSnapshotResponse(r)]
            if r.error.is_none() && r.read == Some(SnapshotRead {
                snapshot_id: id,
                position: 0,
                max_bytes: 4096,
            })),
            "the leader has the driver read a chunk of at most what was asked: {answers:?}"
        );
        let other = SnapshotId {
            end_offset: id.end_offset - 1,
            epoch: id.epoch,
        };
        let answers = step_from(&mut raft, now, 3, ask(other, 0));
        assert!(
            matches!(&answers[..], [Message::FetchSnapshotResponse(r)]
                if r.error == Some(QuorumError::SnapshotNotFound) && r.read.is_none()),
            "only the latest snapshot is served: {answers:?}"
        );
        let answers = step_from(&mut raft, now, 3, ask(id, -1));
        assert!(
            matches!(&answers[..], [Message::FetchSnapshotResponse(r)]
                if r.error == Some(QuorumError::PositionOutOfRange)),
            "{answers:?}"
        );
        // A fetcher at the log start with the snapshot's epoch goes on from the log.
        let at_start = FetchRequest {
            request_id: 11,
            replica: ReplicaKey::node(3),
            epoch,
            fetch_offset: id.end_offset,
            last_fetched_epoch: id.epoch,
        };
        let answers = step_from(&mut raft, now, 3, Message::Fetch(at_start));
        assert!(
            answers.iter().all(|m| !matches!(m,
                Message::FetchResponse(r) if r.snapshot_id.is_some() || r.diverging.is_some())),
            "{answers:?}"
        );
    }

    /// Node 1 following node 2 in epoch 1, its first fetch outstanding.
    fn follower_of_two() -> (Raft, u64, u64) {
        let mut raft = replica(LogView::empty(), ElectionState::INITIAL);
        let now = 5;
        let sent = step_from(
            &mut raft,
            now,
            2,
            Message::BeginQuorumEpoch {
                epoch: 1,
                leader_id: 2,
            },
        );
        let request_id = sent
            .iter()
            .find_map(|m| match m {
                Message::Fetch(r) => Some(r.request_id),
                _ => None,
            })
            .expect("a fetch of the new leader");
        (raft, now, request_id)
    }

    fn told_of_snapshot(request_id: u64, id: SnapshotId) -> Message {
        Message::FetchResponse(FetchResponse {
            request_id,
            error: None,
            epoch: 1,
            leader_id: Some(2),
            high_watermark: id.end_offset,
            log_start_offset: id.end_offset,
            diverging: None,
            read: None,
            batches: Vec::new(),
            snapshot_id: Some(id),
        })
    }

    fn chunk(request_id: u64, id: SnapshotId, position: i64, size: i64, bytes: &[u8]) -> Message {
        Message::FetchSnapshotResponse(FetchSnapshotResponse {
            request_id,
            error: None,
            epoch: 1,
            leader_id: Some(2),
            snapshot_id: id,
            size,
            position,
            read: None,
            bytes: Bytes::copy_from_slice(bytes),
        })
    }

    fn snapshot_fetch(sent: &[Message]) -> &FetchSnapshotRequest {
        sent.iter()
            .find_map(|m| match m {
                Message::FetchSnapshot(r) => Some(r),
                _ => None,
            })
            .unwrap_or_else(|| panic!("a snapshot fetch: {sent:?}"))
    }

    /// The fetch a follower sends once its backoff after a refused answer ran out.
    fn fetch_after_backoff(raft: &mut Raft, now_ms: u64) -> u64 {
        raft.tick(now_ms);
        let sent: Vec<Message> = raft
            .ready()
            .messages
            .into_iter()
            .map(|m| m.message)
            .collect();
        sent.iter()
            .find_map(|m| match m {
                Message::Fetch(r) => Some(r.request_id),
                _ => None,
            })
            .unwrap_or_else(|| panic!("a fetch after the backoff: {sent:?}"))
    }

    #[test]
    fn a_follower_fetches_the_snapshot_in_chunks_and_restarts_its_log_at_its_end() {
        let (mut raft, now, first) = follower_of_two();
        let id = SnapshotId {
            end_offset: 10,
            epoch: 1,
        };
        let sent = step_from(&mut raft, now, 2, told_of_snapshot(first, id));
        let ask = *snapshot_fetch(&sent);
        assert_eq!((ask.snapshot_id, ask.position), (id, 0));
        raft.step(
            now,
            Envelope {
                from: 2,
                to: 1,
                message: chunk(ask.request_id, id, 0, 10, b"012345"),
            },
        );
        let ready = raft.ready();
        assert!(
            matches!(&ready.log_ops[..], [LogOp::SnapshotChunk { position: 0, bytes, .. }]
                if bytes.as_ref() == b"012345"),
            "{:?}",
            ready.log_ops
        );
        let sent: Vec<Message> = ready.messages.into_iter().map(|m| m.message).collect();
        let ask = *snapshot_fetch(&sent);
        assert_eq!(ask.position, 6, "the next chunk is asked for");
        // A chunk that does not continue the file is refused and the snapshot started over.
        raft.step(
            now,
            Envelope {
                from: 2,
                to: 1,
                message: chunk(ask.request_id, id, 4, 10, b"4567"),
            },
        );
        let ready = raft.ready();
        assert!(ready.log_ops.is_empty(), "{:?}", ready.log_ops);
        let retry_ms = now + RaftConfig::DEFAULT.retry_backoff_ms;
        let request_id = fetch_after_backoff(&mut raft, retry_ms);
        let sent = step_from(&mut raft, retry_ms, 2, told_of_snapshot(request_id, id));
        let ask = *snapshot_fetch(&sent);
        raft.step(
            retry_ms,
            Envelope {
                from: 2,
                to: 1,
                message: chunk(ask.request_id, id, 0, 10, b"0123456789"),
            },
        );
        let ready = raft.ready();
        assert!(
            matches!(&ready.log_ops[..], [LogOp::SnapshotChunk { .. }, LogOp::FinishSnapshot(i)]
                if *i == id),
            "a whole snapshot is checked before anything else: {:?}",
            ready.log_ops
        );
        assert!(ready.messages.is_empty(), "{:?}", ready.messages);
        assert_eq!(
            raft.log().end_offset(),
            0,
            "the log is untouched until it is sound"
        );
        // The driver found it damaged: nothing is installed, and it is fetched again.
        raft.snapshot_finished(retry_ms, id, false);
        let ready = raft.ready();
        assert!(ready.log_ops.is_empty(), "{:?}", ready.log_ops);
        assert!(ready.events.is_empty(), "{:?}", ready.events);
        assert_eq!(raft.log().start_offset(), 0);
        let retry_ms = retry_ms + RaftConfig::DEFAULT.retry_backoff_ms;
        let request_id = fetch_after_backoff(&mut raft, retry_ms);
        let sent = step_from(&mut raft, retry_ms, 2, told_of_snapshot(request_id, id));
        let ask = *snapshot_fetch(&sent);
        assert_eq!((ask.snapshot_id, ask.position), (id, 0), "fetched anew");
        raft.step(
            retry_ms,
            Envelope {
                from: 2,
                to: 1,
                message: chunk(ask.request_id, id, 0, 10, b"0123456789"),
            },
        );
        let ready = raft.ready();
        assert!(
            matches!(&ready.log_ops[..], [LogOp::SnapshotChunk { .. }, LogOp::FinishSnapshot(i)]
                if *i == id),
            "{:?}",
            ready.log_ops
        );
        raft.snapshot_finished(retry_ms, id, true);
        let ready = raft.ready();
        assert!(
            matches!(&ready.log_ops[..], [LogOp::InstallSnapshot(i)] if *i == id),
            "a sound snapshot is installed: {:?}",
            ready.log_ops
        );
        assert_eq!(ready.events, vec![RaftEvent::SnapshotLoaded { id }]);
        assert_eq!(ready.high_watermark, Some(10));
        assert_eq!(raft.log().start_offset(), 10);
        assert_eq!(raft.log().end_offset(), 10);
        let next = ready.messages.iter().find_map(|m| match &m.message {
            Message::Fetch(r) => Some((r.fetch_offset, r.last_fetched_epoch)),
            _ => None,
        });
        assert_eq!(
            next,
            Some((10, 1)),
            "the log goes on from the snapshot's end"
        );
    }

    #[test]
    fn a_snapshot_of_a_later_epoch_replaces_a_longer_diverging_log() {
        // Node 1 led epoch 3 and appended 0..10 that never committed; node 2 leads epoch 4
        // with a snapshot at 8 and its log start there.
        let mut log = LogView::empty();
        log.append(0, 10, 3);
        log.synced(10, log.generation());
        let mut raft = replica(log, ElectionState::INITIAL);
        let now = 5;
        let sent = step_from(
            &mut raft,
            now,
            2,
            Message::BeginQuorumEpoch {
                epoch: 4,
                leader_id: 2,
            },
        );
        let Some(Message::Fetch(first)) = sent.iter().find(|m| matches!(m, Message::Fetch(_)))
        else {
            panic!("a fetch of the new leader: {sent:?}");
        };
        let answer = |request_id, id: SnapshotId| {
            let Message::FetchResponse(mut r) = told_of_snapshot(request_id, id) else {
                unreachable!("told_of_snapshot builds a fetch answer")
            };
            r.epoch = 4;
            Message::FetchResponse(r)
        };
        let same_epoch = SnapshotId {
            end_offset: 8,
            epoch: 3,
        };
        let sent = step_from(&mut raft, now, 2, answer(first.request_id, same_epoch));
        assert!(
            sent.iter().all(|m| !matches!(m, Message::FetchSnapshot(_))),
            "a snapshot of the log's own epoch below its end would take records away: {sent:?}"
        );
        let retry_ms = now + RaftConfig::DEFAULT.retry_backoff_ms;
        let request_id = fetch_after_backoff(&mut raft, retry_ms);
        let later = SnapshotId {
            end_offset: 8,
            epoch: 4,
        };
        let sent = step_from(&mut raft, retry_ms, 2, answer(request_id, later));
        assert_eq!(
            snapshot_fetch(&sent).snapshot_id,
            later,
            "the diverging tail past the snapshot cannot be repaired by fetching: {sent:?}"
        );
    }

    #[test]
    fn a_snapshot_that_would_take_records_away_or_is_gone_is_not_fetched() {
        let (mut raft, now, first) = follower_of_two();
        let behind = SnapshotId {
            end_offset: 0,
            epoch: 0,
        };
        let sent = step_from(&mut raft, now, 2, told_of_snapshot(first, behind));
        assert!(
            sent.iter().all(|m| !matches!(m, Message::FetchSnapshot(_))),
            "a snapshot not past this log's end is refused: {sent:?}"
        );
        let retry_ms = now + RaftConfig::DEFAULT.retry_backoff_ms;
        let request_id = fetch_after_backoff(&mut raft, retry_ms);
        let id = SnapshotId {
            end_offset: 10,
            epoch: 1,
        };
        let sent = step_from(&mut raft, retry_ms, 2, told_of_snapshot(request_id, id));
        let ask = *snapshot_fetch(&sent);
        let Message::FetchSnapshotResponse(mut gone) = chunk(ask.request_id, id, -1, -1, b"")
        else {
            unreachable!("chunk builds a snapshot answer")
        };
        gone.error = Some(QuorumError::SnapshotNotFound);
        let gone = Message::FetchSnapshotResponse(gone);
        let later_ms = retry_ms + RaftConfig::DEFAULT.retry_backoff_ms;
        step_from(&mut raft, retry_ms, 2, gone);
        raft.tick(later_ms);
        let sent: Vec<Message> = raft
            .ready()
            .messages
            .into_iter()
            .map(|m| m.message)
            .collect();
        assert!(
            sent.iter()
                .any(|m| matches!(m, Message::Fetch(r) if r.fetch_offset == 0)),
            "a snapshot the leader no longer has sends the follower back to Fetch: {sent:?}"
        );
    }

    #[test]
    fn settings_that_would_stall_an_idle_follower_are_refused() {
        let config = RaftConfig {
            fetch_max_wait_ms: 500,
            request_timeout_ms: 400,
            ..RaftConfig::DEFAULT
        };
        let error = config.validate().expect_err("refused");
        assert!(
            error.contains("controller.quorum.request.timeout.ms"),
            "{error}"
        );
        assert!(RaftConfig::DEFAULT.validate().is_ok());
    }
}
