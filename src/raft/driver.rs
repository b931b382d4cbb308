//! The driver of one KRaft replica on `rt`: it owns the core ([`Raft`]) and its store
//! ([`RaftStore`]), serves the quorum's RPCs on the controller listener, sends the core's
//! requests to its peers, and carries out each [`Ready`] in order: persist the election
//! state, apply the log operations, answer and send, start a sync, publish the high
//! watermark. It decides nothing.
//!
//! Shape:
//! - one driver task: the only owner of the core, fed by one bounded input queue (requests
//!   and answers from the network, proposals, sync reports, the time);
//! - one task per accepted connection: reads a request, hands it to the driver with a reply
//!   slot, writes the answer, then reads the next (one request at a time per connection, as
//!   Kafka's network layer mutes a connection until its answer is out);
//! - two lanes per peer, each a task with one connection: fetches on one, everything else on
//!   the other, so that a vote never waits behind a fetch the leader holds (long poll);
//! - one sync at a time on a task of its own; a sync asked for meanwhile starts when it ends;
//! - snapshots: the state machine hands the driver its state at a committed offset
//!   ([`RaftHandle::create_snapshot`], when [`Status::snapshot_due`] says so); the driver
//!   writes the file, tells the core, and, once the log outgrew `metadata.max.retention.bytes`,
//!   moves the log start to the latest snapshot's end. A follower below the leader's start
//!   fetches the snapshot chunk by chunk (FetchSnapshot), and the driver installs it: the
//!   file made whole and durable, then the log restarted at its end. The state machine
//!   learns it from [`Status::log_start_offset`] passing what it applied
//!   ([`DriverError::BelowLogStart`]) and loads [`RaftHandle::latest_snapshot`].
//!
//! Invariants:
//! - the election state is durable before any message of the same `Ready` leaves, and log
//!   operations are applied in the core's order before any answer that reads the log;
//! - an answer goes only on the connection its request came in on: Vote, BeginQuorumEpoch and
//!   EndQuorumEpoch are answered within the step that takes them, a fetch by the request id
//!   the driver gave it (correlation ids restart with every connection); a held fetch
//!   superseded by a newer one from the same replica loses its reply slot, which closes that
//!   connection, and one held by a leadership that ended is answered NOT_LEADER_OR_FOLLOWER;
//! - a peer bounds nothing it sends: requests are at most `INBOUND_REQUEST_BYTES_MAX`, every
//!   read, write and wait for an answer has a timeout, idle connections close;
//! - every queue has a named bound and every exchange a timeout; an exchange that fails drops
//!   its connection, and the core's own request timeout sends again.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use crate::log::LogError;
use crate::protocol::api_versions::{ApiVersion, ApiVersionsResponse};
use crate::protocol::describe_quorum as dq;
use crate::protocol::error::ErrorCode;
use crate::protocol::frame::{self, SIZE_PREFIX_BYTES};
use crate::protocol::header::{RequestHeader, ResponseHeader};
use crate::protocol::types::{LeaderEpoch, NodeId, Offset};
use crate::protocol::wire::{Reader, Uuid};
use crate::protocol::{request_header_version, response_header_version};
use crate::rt::clock::Clock;
use crate::rt::disk::{Disk, File};
use crate::rt::net::{TcpListener, TcpStream};
use crate::rt::task::{self, JoinHandle};
use crate::rt::time::{self, Duration, Instant};
use crate::rt::watch::Watched;

use super::core::{
    LogOp, ProposeError, QuorumDescription, Raft, RaftBugs, RaftConfig, RaftEvent, SnapshotError,
    FETCH_MAX_BYTES_MAX,
};
use super::election::{ElectionError, ReplicaKey, VOTERS_MAX};
use super::message::{Batch, Envelope, Message, QuorumError, RaftRecord, SnapshotId};
use super::snapshot::{self, SnapshotContents};
use super::store::{Opened, RaftStore, StoreError};
use super::wire::{self, METADATA_PARTITION, METADATA_TOPIC};

/// Inputs waiting for the driver task.
pub const INPUT_QUEUE_MAX: usize = 4096;
/// Requests waiting in one lane to one peer; more are dropped (the core sends again).
pub const LANE_QUEUE_MAX: usize = 64;
/// Connections the controller listener serves at once; more are closed on accept.
pub const CONNECTIONS_MAX: usize = 1024;
/// The largest request the controller listener reads: the quorum's requests are small (a
/// fetch request is under 200 bytes), so a larger one is not from a peer.
pub const INBOUND_REQUEST_BYTES_MAX: usize = 64 << 10;
/// A connection with no request for this long is closed (Kafka's `connections.max.idle.ms`
/// default).
pub const CONNECTION_IDLE_MS_MAX: u64 = 600_000;
/// The largest frame the quorum reads: a fetch answer of the most bytes a fetch may carry,
/// with room for its headers.
pub const FRAME_BYTES_MAX: usize = FETCH_MAX_BYTES_MAX + (64 << 10);
/// Pending answers to requests of one kind from one peer; one beyond it drops the oldest.
pub const PENDING_PER_PEER_MAX: usize = 16;
/// The longest the driver sleeps without looking at the core's deadline again.
pub const TICK_INTERVAL_MAX_MS: u64 = 1_000;
/// The client id this node's requests carry.
pub const CLIENT_ID: &str = "raft-client";
/// How often the driver checks the log's size against `metadata.max.retention.bytes`
/// besides right after each snapshot.
pub const RETENTION_CHECK_INTERVAL_MS: u64 = 30_000;
/// Times [`RaftHandle::latest_snapshot`] looks again when the snapshot it was told of was
/// replaced by a newer one while it read.
pub const SNAPSHOT_READ_ATTEMPTS_MAX: usize = 8;

const _: () = assert!(LANE_QUEUE_MAX <= INPUT_QUEUE_MAX);
const _: () = assert!(FRAME_BYTES_MAX > FETCH_MAX_BYTES_MAX);
const _: () = assert!(VOTERS_MAX * 2 <= CONNECTIONS_MAX);

/// Why the replica stopped.
#[derive(Debug)]
pub enum DriverError {
    Store(StoreError),
    Election(ElectionError),
    Config(String),
    /// The driver task is gone (stopped or failed).
    Stopped,
    /// A read below the log start: what lies below is in the latest snapshot.
    BelowLogStart {
        log_start_offset: i64,
    },
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriverError::Store(e) => write!(f, "{e}"),
            DriverError::Election(e) => write!(f, "{e}"),
            DriverError::Config(e) => write!(f, "{e}"),
            DriverError::Stopped => write!(f, "the metadata quorum replica has stopped"),
            DriverError::BelowLogStart { log_start_offset } => write!(
                f,
                "the metadata log starts at {log_start_offset}; what lies below is in its \
                 latest snapshot"
            ),
        }
    }
}

impl std::error::Error for DriverError {}

impl From<StoreError> for DriverError {
    fn from(e: StoreError) -> Self {
        DriverError::Store(e)
    }
}

/// One replica's settings.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub node_id: i32,
    /// `controller.quorum.voters`: each voter's id and `host:port`.
    pub voters: BTreeMap<i32, String>,
    /// `metadata.log.dir`.
    pub metadata_log_dir: String,
    /// `metadata.log.segment.bytes`.
    pub segment_bytes: u64,
    pub raft: RaftConfig,
    /// The cluster id requests carry, if known.
    pub cluster_id: Option<String>,
    /// Deliberate bugs for the simulation's checker tests; all off in every real config.
    pub bugs: RaftBugs,
    pub snapshots: SnapshotConfig,
}

/// When snapshots are due and how much log is kept behind them, under Kafka's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotConfig {
    /// `metadata.log.max.record.bytes.between.snapshots` (default 20 MiB): a snapshot is due
    /// once this many bytes were appended since the latest.
    pub max_bytes_between_snapshots: u64,
    /// `metadata.log.max.snapshot.interval.ms` (default 1 hour; 0 turns it off): a snapshot
    /// is due this long after the latest if anything was committed since.
    pub max_snapshot_interval_ms: u64,
    /// `metadata.max.retention.bytes` (default 100 MiB; -1 keeps everything): once the log
    /// is larger, its start moves to the latest snapshot's end.
    pub retention_bytes: i64,
}

impl SnapshotConfig {
    pub const DEFAULT: SnapshotConfig = SnapshotConfig {
        max_bytes_between_snapshots: 20 << 20,
        max_snapshot_interval_ms: 3_600_000,
        retention_bytes: 100 << 20,
    };
}

impl Default for SnapshotConfig {
    fn default() -> Self {
        SnapshotConfig::DEFAULT
    }
}

/// Receives the replica's events as they happen (the simulation's history).
pub type EventSink = Arc<dyn Fn(RaftEvent) + Send + Sync>;

/// What the replica reports of itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub epoch: i32,
    pub leader_id: Option<i32>,
    pub is_leader: bool,
    pub high_watermark: i64,
    pub log_end_offset: i64,
    pub log_start_offset: i64,
    /// The latest snapshot this replica holds.
    pub snapshot: Option<SnapshotId>,
    /// Whether the state machine should hand over a snapshot (see [`SnapshotConfig`]).
    pub snapshot_due: bool,
    /// While leading: the previous leader this replica stopped hearing from, and for how
    /// long it had been silent when this replica took over (`Raft::predecessor_silence`).
    pub predecessor_silence: Option<(i32, u64)>,
}

/// An answer to a request, for its connection to write.
struct Reply {
    message: Message,
    records: Option<Bytes>,
}

enum Input {
    Request {
        from: i32,
        message: Message,
        reply: oneshot::Sender<Reply>,
    },
    Response {
        from: i32,
        message: Message,
        /// A fetch answer's batches as the leader's bytes, in the answer's order.
        raw: Vec<Bytes>,
    },
    Propose {
        records: Vec<Bytes>,
        /// [`Raft::propose_at`]'s epoch and base offset, if the proposer decided against them.
        at: Option<(i32, i64)>,
        reply: oneshot::Sender<Result<i64, ProposeError>>,
    },
    Synced {
        offset: i64,
        generation: u64,
    },
    Failed(StoreError),
    Describe {
        reply: oneshot::Sender<Described>,
    },
    CreateSnapshot {
        end_offset: i64,
        records: Vec<Bytes>,
        reply: oneshot::Sender<Result<SnapshotId, SnapshotError>>,
    },
    Resign,
    Shutdown,
}

/// A leader's description of its quorum with the two clocks read together, to turn the
/// core's monotonic times into the wall-clock times DescribeQuorum reports.
struct Described {
    quorum: Option<QuorumDescription>,
    now_ms: u64,
    wall_ms: i64,
}

/// A handle on a running replica: propose, read what is committed, watch its status.
#[derive(Clone)]
pub struct RaftHandle {
    inputs: mpsc::Sender<Input>,
    status: Arc<Watched<Status>>,
    store: RaftStore,
    local_addr: String,
}

impl RaftHandle {
    /// Appends `records` as one batch if this replica leads; the batch's base offset.
    /// Committed once the high watermark passes it (see [`RaftHandle::wait_for`]).
    pub async fn propose(
        &self,
        records: Vec<Bytes>,
    ) -> Result<Result<i64, ProposeError>, DriverError> {
        self.propose_inner(records, None).await
    }

    /// [`RaftHandle::propose`] only if this replica still leads `epoch` and the log's next
    /// offset is `base_offset` ([`ProposeError::Moved`] if not).
    pub async fn propose_at(
        &self,
        epoch: i32,
        base_offset: i64,
        records: Vec<Bytes>,
    ) -> Result<Result<i64, ProposeError>, DriverError> {
        self.propose_inner(records, Some((epoch, base_offset)))
            .await
    }

    async fn propose_inner(
        &self,
        records: Vec<Bytes>,
        at: Option<(i32, i64)>,
    ) -> Result<Result<i64, ProposeError>, DriverError> {
        let (reply, answer) = oneshot::channel();
        self.inputs
            .send(Input::Propose { records, at, reply })
            .await
            .map_err(|_| DriverError::Stopped)?;
        answer.await.map_err(|_| DriverError::Stopped)
    }

    pub fn status(&self) -> Status {
        self.status.get()
    }

    /// Waits until `ready` holds for the status, at most `timeout`; the last status if not.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        ready: impl Fn(&Status) -> bool,
    ) -> Result<Status, Status> {
        self.status.wait_for(timeout, ready).await
    }

    /// Committed batches from `offset` on (about `max_bytes`, at least one if any).
    pub async fn read_committed(
        &self,
        offset: i64,
        max_bytes: usize,
    ) -> Result<Vec<Batch>, DriverError> {
        let status = self.status.get();
        if offset < status.log_start_offset {
            return Err(DriverError::BelowLogStart {
                log_start_offset: status.log_start_offset,
            });
        }
        if offset >= status.high_watermark {
            return Ok(Vec::new());
        }
        self.read_store(offset, max_bytes, status.high_watermark)
            .await
    }

    /// Writes a snapshot of the state machine: `records` hold its state after every record
    /// below `end_offset`, which must be committed. The log start may then move up to it.
    pub async fn create_snapshot(
        &self,
        end_offset: i64,
        records: Vec<Bytes>,
    ) -> Result<Result<SnapshotId, SnapshotError>, DriverError> {
        let (reply, answer) = oneshot::channel();
        self.inputs
            .send(Input::CreateSnapshot {
                end_offset,
                records,
                reply,
            })
            .await
            .map_err(|_| DriverError::Stopped)?;
        answer.await.map_err(|_| DriverError::Stopped)
    }

    /// The latest snapshot and what it holds (the voter set, the state machine's records),
    /// if there is one.
    pub async fn latest_snapshot(
        &self,
    ) -> Result<Option<(SnapshotId, SnapshotContents)>, DriverError> {
        for _ in 0..SNAPSHOT_READ_ATTEMPTS_MAX {
            let Some(id) = self.status.get().snapshot else {
                return Ok(None);
            };
            match self.store.read_snapshot(id).await {
                Ok(contents) => return Ok(Some((id, contents))),
                Err(StoreError::Snapshot(snapshot::SnapshotFileError::Io { source, .. }))
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    // Replaced by a newer one meanwhile: read that.
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(DriverError::Config(format!(
            "snapshots replaced faster than {SNAPSHOT_READ_ATTEMPTS_MAX} reads"
        )))
    }

    /// Batches of the whole log from `offset` on, committed or not (for tools and checkers).
    pub async fn read_log(&self, offset: i64, max_bytes: usize) -> Result<Vec<Batch>, DriverError> {
        let end = self.store.log().log_end_offset();
        if offset >= end {
            return Ok(Vec::new());
        }
        self.read_store(offset, max_bytes, end).await
    }

    /// The store's read up to `end`, where a log start that moved past `offset` meanwhile
    /// (retention, an installed snapshot) is [`DriverError::BelowLogStart`].
    async fn read_store(
        &self,
        offset: i64,
        max_bytes: usize,
        end: i64,
    ) -> Result<Vec<Batch>, DriverError> {
        match self.store.read(offset, max_bytes, end).await {
            Err(StoreError::Log(LogError::OffsetOutOfRange {
                log_start_offset, ..
            })) if offset < log_start_offset => {
                Err(DriverError::BelowLogStart { log_start_offset })
            }
            other => Ok(other?),
        }
    }

    /// The quorum as the leader sees it; `None` on a replica that does not lead.
    pub async fn describe(&self) -> Result<Option<QuorumDescription>, DriverError> {
        let (reply, answer) = oneshot::channel();
        self.inputs
            .send(Input::Describe { reply })
            .await
            .map_err(|_| DriverError::Stopped)?;
        Ok(answer.await.map_err(|_| DriverError::Stopped)?.quorum)
    }

    /// Resigns the leadership gracefully (EndQuorumEpoch), if this replica leads.
    pub async fn resign(&self) -> Result<(), DriverError> {
        self.inputs
            .send(Input::Resign)
            .await
            .map_err(|_| DriverError::Stopped)
    }

    /// Stops the replica; its task ends after closing the log.
    pub async fn shutdown(&self) {
        let _ = self.inputs.send(Input::Shutdown).await;
    }

    /// The controller listener's address.
    pub fn local_addr(&self) -> &str {
        &self.local_addr
    }
}

/// A started replica: its handle and its task (which ends with the replica's result).
pub struct RaftNode {
    pub handle: RaftHandle,
    pub task: JoinHandle<Result<(), DriverError>>,
}

/// Parses `controller.quorum.voters` (`id@host:port,...`), Kafka's static voter set.
pub fn parse_voters(text: &str) -> Result<BTreeMap<i32, String>, String> {
    let mut voters = BTreeMap::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((id, addr)) = entry.split_once('@') else {
            return Err(format!(
                "controller.quorum.voters: `{entry}` is not of the form id@host:port"
            ));
        };
        let id: i32 = id
            .parse()
            .ok()
            .filter(|id| *id >= 0)
            .ok_or_else(|| format!("controller.quorum.voters: `{id}` is not a node id"))?;
        let port_ok = addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok {
            return Err(format!(
                "controller.quorum.voters: `{addr}` is not host:port"
            ));
        }
        if voters.insert(id, addr.to_string()).is_some() {
            return Err(format!(
                "controller.quorum.voters: voter {id} is named twice"
            ));
        }
    }
    if voters.is_empty() {
        return Err("controller.quorum.voters names no voter".into());
    }
    if voters.len() > VOTERS_MAX {
        return Err(format!(
            "controller.quorum.voters names {} voters (at most {VOTERS_MAX})",
            voters.len()
        ));
    }
    Ok(voters)
}

/// The voter set the metadata log holds (its latest snapshot's, else the VotersRecord that
/// opens the log) must be `controller.quorum.voters`: voters that disagree on the set can
/// each count a different majority. A log or snapshot without one (kraft.version 0) passes.
async fn check_voter_set(opened: &Opened, config: &NodeConfig) -> Result<(), DriverError> {
    let configured: BTreeSet<i32> = config.voters.keys().copied().collect();
    let differ = |reason: Option<String>, what: String| match reason {
        Some(reason) => Err(DriverError::Config(format!(
            "{what} belongs to another quorum: {reason}; controller.quorum.voters may not \
             change under an existing metadata log"
        ))),
        None => Ok(()),
    };
    if let Some(latest) = opened.snapshots.last().copied() {
        let contents = opened.store.read_snapshot(latest).await?;
        let path = crate::rt::disk::join(opened.store.log_dir(), &snapshot::file_name(latest));
        return differ(
            contents.voters_differ(&configured),
            format!("the snapshot {path}"),
        );
    }
    if opened.log.start_offset() > 0 || opened.log.end_offset() == 0 {
        return Ok(());
    }
    let first = opened.store.read(0, 1, opened.log.end_offset()).await?;
    let voters = first
        .first()
        .into_iter()
        .flat_map(|batch| batch.records.iter())
        .find_map(|record| match record {
            RaftRecord::Voters { voters } => Some(voters.clone()),
            _ => None,
        });
    let contents = SnapshotContents {
        kraft_version: 1,
        voters,
        records: Vec::new(),
    };
    differ(
        contents.voters_differ(&configured),
        format!("the metadata log in {}", opened.store.log_dir()),
    )
}

/// Opens the metadata log under `config.metadata_log_dir` and starts the replica, serving
/// the quorum's RPCs on `listener`.
pub async fn start(
    config: NodeConfig,
    disk: Disk,
    clock: Clock,
    listener: TcpListener,
) -> Result<RaftNode, DriverError> {
    start_with_events(config, disk, clock, listener, None).await
}

/// [`start`], telling `events` what the replica does.
pub async fn start_with_events(
    config: NodeConfig,
    disk: Disk,
    clock: Clock,
    listener: TcpListener,
    events: Option<EventSink>,
) -> Result<RaftNode, DriverError> {
    start_with(config, disk, clock, listener, events, None).await
}

/// A request on the controller listener for an API the quorum itself does not serve (a
/// broker's registration, an admin request): the state machine above the log decodes it and
/// gives back the response body.
pub struct ForwardedRequest {
    pub api_key: i16,
    pub version: i16,
    pub client_id: Option<String>,
    pub body: Bytes,
    pub reply: oneshot::Sender<Bytes>,
}

/// The APIs the state machine serves on the controller listener, and where their requests go.
#[derive(Clone, Debug)]
pub struct StateMachineApis {
    /// (API key, lowest version, highest version), advertised in ApiVersions too.
    pub apis: Vec<(i16, i16, i16)>,
    pub requests: mpsc::Sender<ForwardedRequest>,
    /// The largest request of these APIs the listener reads (a CreateTopics of many topics is
    /// larger than any of the quorum's own requests).
    pub request_bytes_max: usize,
    /// How long such a request may wait for its answer.
    pub reply_timeout_ms: u64,
}

/// [`start_with_events`], serving `apis` for the state machine on the controller listener.
pub async fn start_with(
    config: NodeConfig,
    disk: Disk,
    clock: Clock,
    listener: TcpListener,
    events: Option<EventSink>,
    apis: Option<StateMachineApis>,
) -> Result<RaftNode, DriverError> {
    config.raft.validate().map_err(DriverError::Config)?;
    let local_addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .map_err(|e| DriverError::Config(format!("the controller listener: {e}")))?;
    let opened = RaftStore::open(
        disk,
        &config.metadata_log_dir,
        config.segment_bytes,
        clock.clone(),
    )
    .await?;
    check_voter_set(&opened, &config).await?;
    let origin = time::now();
    let raft = Raft::new(
        config.raft,
        ReplicaKey::node(config.node_id),
        config.voters.keys().copied().collect(),
        opened.election,
        opened.log,
        0,
        crate::rt::rand::random_u64(),
    )
    .map_err(DriverError::Election)?
    .with_bugs(config.bugs);
    let (inputs, queue) = mpsc::channel(INPUT_QUEUE_MAX);
    let status = Arc::new(Watched::new(Status::default()));
    let handle = RaftHandle {
        inputs: inputs.clone(),
        status: status.clone(),
        store: opened.store.clone(),
        local_addr,
    };
    let mut lanes = BTreeMap::new();
    for (id, addr) in &config.voters {
        if *id == config.node_id {
            continue;
        }
        let lane = |fetches: bool| {
            let (tx, rx) = mpsc::channel(LANE_QUEUE_MAX);
            task::spawn(run_lane(
                LaneConfig {
                    local: ReplicaKey::node(config.node_id),
                    peer: *id,
                    addr: addr.clone(),
                    cluster_id: config.cluster_id.clone(),
                    timeout: Duration::from_millis(
                        config.raft.request_timeout_ms + config.raft.fetch_max_wait_ms,
                    ),
                    fetch_max_wait_ms: config.raft.fetch_max_wait_ms,
                    fetches,
                },
                rx,
                inputs.clone(),
            ));
            tx
        };
        lanes.insert(
            *id,
            Lanes {
                fetch: lane(true),
                other: lane(false),
            },
        );
    }
    let accept = task::spawn(serve(
        listener,
        inputs.clone(),
        ServeConfig {
            cluster_id: config.cluster_id.clone(),
            request_timeout: Duration::from_millis(config.raft.request_timeout_ms),
            reply_timeout: Duration::from_millis(
                config.raft.request_timeout_ms + config.raft.fetch_max_wait_ms,
            ),
            apis,
        },
    ));
    let driver = Driver {
        raft,
        store: opened.store,
        clock,
        origin,
        status,
        lanes,
        pending_fetches: BTreeMap::new(),
        pending_other: BTreeMap::new(),
        raw: BTreeMap::new(),
        next_inbound_id: 0,
        sync_running: false,
        sync_wanted: None,
        inputs,
        events,
        snapshots: config.snapshots,
        fetching: None,
        appended_bytes: 0,
        last_snapshot_ms: 0,
        next_retention_check_ms: RETENTION_CHECK_INTERVAL_MS,
    };
    let task = task::spawn(async move {
        let result = driver.run(queue).await;
        accept.abort();
        if let Err(e) = &result {
            tracing::error!(error = %e, "raft: the replica stopped");
        }
        result
    });
    Ok(RaftNode { handle, task })
}

struct Lanes {
    fetch: mpsc::Sender<Message>,
    other: mpsc::Sender<Message>,
}

struct Driver {
    raft: Raft,
    store: RaftStore,
    clock: Clock,
    origin: Instant,
    status: Arc<Watched<Status>>,
    lanes: BTreeMap<i32, Lanes>,
    /// Held or just-taken fetches by (replica, request id): their connections wait here.
    pending_fetches: BTreeMap<(i32, u64), oneshot::Sender<Reply>>,
    /// Other requests by (peer, API key), oldest first.
    pending_other: BTreeMap<(i32, i16), VecDeque<oneshot::Sender<Reply>>>,
    /// The leader's bytes of the batches the last fetch answer brought, by base offset.
    raw: BTreeMap<i64, (Batch, Bytes)>,
    /// The last id given to a fetch taken from a peer.
    next_inbound_id: u64,
    sync_running: bool,
    /// The generation of a sync asked for while one ran.
    sync_wanted: Option<u64>,
    inputs: mpsc::Sender<Input>,
    events: Option<EventSink>,
    snapshots: SnapshotConfig,
    /// The partial file of the snapshot being fetched from the leader.
    fetching: Option<(SnapshotId, File)>,
    /// Bytes appended since the latest snapshot (this run's count).
    appended_bytes: u64,
    /// When the latest snapshot was made or installed (0: this run's start).
    last_snapshot_ms: u64,
    next_retention_check_ms: u64,
}

impl Driver {
    fn now_ms(&self) -> u64 {
        time::millis_since(self.origin)
    }

    async fn run(mut self, mut queue: mpsc::Receiver<Input>) -> Result<(), DriverError> {
        loop {
            self.process().await?;
            let now_ms = self.now_ms();
            if now_ms >= self.next_retention_check_ms {
                self.next_retention_check_ms = now_ms + RETENTION_CHECK_INTERVAL_MS;
                self.enforce_retention().await?;
            }
            let deadline_ms = self
                .raft
                .next_deadline_ms()
                .min(self.next_retention_check_ms);
            if deadline_ms <= now_ms {
                self.raft.tick(now_ms);
                continue;
            }
            let wait_ms = (deadline_ms - now_ms).min(TICK_INTERVAL_MAX_MS);
            tokio::select! {
                biased;
                input = queue.recv() => {
                    let Some(input) = input else { break };
                    if let Input::CreateSnapshot { end_offset, records, reply } = input {
                        let created = self.create_snapshot(end_offset, records).await?;
                        let _ = reply.send(created);
                    } else if !self.take(input)? {
                        break;
                    }
                }
                _ = time::sleep(Duration::from_millis(wait_ms)) => {
                    let now_ms = self.now_ms();
                    self.raft.tick(now_ms);
                }
            }
        }
        self.store.close().await?;
        Ok(())
    }

    /// One input into the core; false to stop.
    fn take(&mut self, input: Input) -> Result<bool, DriverError> {
        let now_ms = self.now_ms();
        match input {
            Input::Request {
                from,
                mut message,
                reply,
            } => {
                let fetch_id = match &mut message {
                    Message::Fetch(request) => Some(&mut request.request_id),
                    Message::FetchSnapshot(request) => Some(&mut request.request_id),
                    _ => None,
                };
                match fetch_id {
                    Some(request_id) => {
                        // Correlation ids restart with every connection: the driver names
                        // each fetch it takes itself, so an answer finds its own slot.
                        self.next_inbound_id += 1;
                        *request_id = self.next_inbound_id;
                        let request_id = *request_id;
                        // A newer fetch from the same replica supersedes any it still holds.
                        let stale: Vec<(i32, u64)> = self
                            .pending_fetches
                            .range((from, 0)..=(from, u64::MAX))
                            .map(|(k, _)| *k)
                            .collect();
                        for key in stale {
                            self.pending_fetches.remove(&key);
                        }
                        self.pending_fetches.insert((from, request_id), reply);
                    }
                    None => {
                        let queue = self
                            .pending_other
                            .entry((from, message.api_key()))
                            .or_default();
                        if queue.len() >= PENDING_PER_PEER_MAX {
                            queue.pop_front();
                        }
                        queue.push_back(reply);
                    }
                }
                self.step(now_ms, from, message);
            }
            Input::Response { from, message, raw } => {
                if let Message::FetchResponse(response) = &message {
                    // Keep the leader's bytes of each batch, so that the append writes them.
                    self.raw.clear();
                    for (batch, bytes) in response.batches.iter().zip(raw) {
                        self.raw.insert(batch.base_offset, (batch.clone(), bytes));
                    }
                }
                self.step(now_ms, from, message);
            }
            Input::Propose { records, at, reply } => {
                let outcome = match at {
                    None => self.raft.propose(now_ms, records),
                    Some((epoch, base_offset)) => {
                        self.raft.propose_at(now_ms, epoch, base_offset, records)
                    }
                };
                let _ = reply.send(outcome);
            }
            Input::Synced { offset, generation } => {
                self.sync_running = false;
                self.raft.synced(now_ms, offset, generation);
                if let Some(generation) = self.sync_wanted.take() {
                    self.start_sync(generation);
                }
            }
            Input::Failed(error) => return Err(DriverError::Store(error)),
            Input::Describe { reply } => {
                let _ = reply.send(Described {
                    quorum: self.raft.describe(now_ms),
                    now_ms,
                    wall_ms: self.clock.now_ms(),
                });
            }
            Input::CreateSnapshot { .. } => {
                unreachable!("the run loop takes snapshots itself")
            }
            Input::Resign => self.raft.resign(now_ms),
            Input::Shutdown => return Ok(false),
        }
        Ok(true)
    }

    fn step(&mut self, now_ms: u64, from: i32, message: Message) {
        let to = self.raft.local_id();
        self.raft.step(now_ms, Envelope { from, to, message });
    }

    fn start_sync(&mut self, generation: u64) {
        if self.sync_running {
            self.sync_wanted = Some(generation);
            return;
        }
        self.sync_running = true;
        let store = self.store.clone();
        let inputs = self.inputs.clone();
        task::spawn(async move {
            let input = match store.sync().await {
                Ok(offset) => Input::Synced { offset, generation },
                Err(e) => Input::Failed(e),
            };
            let _ = inputs.send(input).await;
        });
    }

    /// Carries out what the core asked for, until it asks for nothing.
    async fn process(&mut self) -> Result<(), DriverError> {
        loop {
            let ready = self.raft.ready();
            if ready.is_empty() {
                break;
            }
            if let Some(state) = &ready.persist {
                self.store.persist(state).await?;
            }
            for op in ready.log_ops {
                match op {
                    LogOp::Append(batch) => {
                        let raw = self
                            .raw
                            .remove(&batch.base_offset)
                            .filter(|(b, _)| *b == batch)
                            .map(|(_, bytes)| bytes);
                        self.appended_bytes += batch.size_bytes() as u64;
                        self.store.append(&batch, raw, self.clock.now_ms()).await?;
                    }
                    LogOp::Truncate(to) => self.store.truncate(to).await?,
                    LogOp::SnapshotChunk {
                        id,
                        position,
                        bytes,
                    } => self.write_snapshot_chunk(id, position, bytes).await?,
                    LogOp::FinishSnapshot(id) => {
                        let sound = self.finish_snapshot(id).await?;
                        self.raft.snapshot_finished(self.now_ms(), id, sound);
                    }
                    LogOp::InstallSnapshot(id) => self.install_snapshot(id).await?,
                }
            }
            for envelope in ready.messages {
                self.deliver(envelope).await?;
            }
            if let Some(generation) = ready.sync {
                self.start_sync(generation);
            }
            for event in &ready.events {
                if let Some(sink) = &self.events {
                    sink(*event);
                }
                match event {
                    RaftEvent::Leader { epoch } => {
                        tracing::info!(node = self.raft.local_id(), epoch, "raft: leading");
                    }
                    RaftEvent::Truncated { to, high_watermark } => {
                        tracing::info!(
                            node = self.raft.local_id(),
                            to,
                            high_watermark,
                            "raft: truncated the metadata log"
                        );
                    }
                    RaftEvent::SnapshotLoaded { id } => {
                        tracing::info!(
                            node = self.raft.local_id(),
                            end_offset = id.end_offset,
                            epoch = id.epoch,
                            "raft: installed a snapshot fetched from the leader"
                        );
                    }
                    RaftEvent::Epoch { .. } => {}
                }
            }
        }
        // Answers that the step did not produce will not come: their connections close.
        self.pending_other.clear();
        if !self.raft.is_leader() {
            // Only a leader holds fetches (the core answered those of an ended leadership).
            self.pending_fetches.clear();
        }
        self.publish_status();
        Ok(())
    }

    fn publish_status(&self) {
        let log = self.raft.log();
        let snapshot_end = log.snapshot().map_or(0, |s| s.end_offset);
        let committed_since = self.raft.high_watermark() > snapshot_end;
        let interval_ms = self.snapshots.max_snapshot_interval_ms;
        let snapshot_due = committed_since
            && (self.appended_bytes >= self.snapshots.max_bytes_between_snapshots
                || (interval_ms > 0 && self.now_ms() >= self.last_snapshot_ms + interval_ms));
        self.status.set(Status {
            epoch: self.raft.epoch(),
            leader_id: self.raft.leader_id(),
            is_leader: self.raft.is_leader(),
            high_watermark: self.raft.high_watermark(),
            log_end_offset: log.end_offset(),
            log_start_offset: log.start_offset(),
            snapshot: log.snapshot(),
            snapshot_due,
            predecessor_silence: self.raft.predecessor_silence(),
        });
    }

    /// Writes the state machine's snapshot (the core names it and checks its range), then
    /// lets retention move the log start.
    async fn create_snapshot(
        &mut self,
        end_offset: i64,
        records: Vec<Bytes>,
    ) -> Result<Result<SnapshotId, SnapshotError>, DriverError> {
        let id = match self.raft.snapshot_id_for(end_offset) {
            Ok(id) => id,
            Err(e) => return Ok(Err(e)),
        };
        let voters: Vec<ReplicaKey> = self
            .raft
            .voters()
            .iter()
            .map(|id| ReplicaKey::node(*id))
            .collect();
        self.store
            .write_snapshot(id, &voters, &records, self.clock.now_ms())
            .await?;
        self.raft.snapshot_created(id);
        self.appended_bytes = 0;
        self.last_snapshot_ms = self.now_ms();
        self.enforce_retention().await?;
        self.publish_status();
        Ok(Ok(id))
    }

    /// `metadata.max.retention.bytes`: once the log is larger, its start moves to the latest
    /// snapshot's end (segments wholly below it go), and older snapshots with it.
    async fn enforce_retention(&mut self) -> Result<(), DriverError> {
        let log = self.raft.log();
        let Some(latest) = log.snapshot() else {
            return Ok(());
        };
        let start = log.start_offset();
        if self.snapshots.retention_bytes < 0
            || latest.end_offset <= start
            || latest.end_offset > log.synced_offset()
            || latest.end_offset > self.raft.high_watermark()
        {
            return Ok(());
        }
        let size = self.store.size_bytes().await;
        if size <= self.snapshots.retention_bytes.unsigned_abs() {
            return Ok(());
        }
        self.store
            .delete_before(latest.end_offset, self.raft.high_watermark())
            .await?;
        self.raft.log_start_advanced(latest.end_offset);
        self.remove_snapshots_below(latest.end_offset).await?;
        tracing::info!(
            node = self.raft.local_id(),
            log_start_offset = latest.end_offset,
            log_bytes = size,
            "raft: the metadata log outgrew metadata.max.retention.bytes; its start moved to the latest snapshot"
        );
        self.publish_status();
        Ok(())
    }

    async fn remove_snapshots_below(&self, offset: i64) -> Result<(), DriverError> {
        let dir = self.store.log_dir().to_string();
        let below: Vec<SnapshotId> = snapshot::list(self.store.disk(), &dir)
            .await
            .map_err(StoreError::from)?
            .into_iter()
            .filter(|s| s.end_offset < offset)
            .collect();
        self.store.remove_snapshots(&below).await?;
        Ok(())
    }

    async fn write_snapshot_chunk(
        &mut self,
        id: SnapshotId,
        position: i64,
        bytes: Bytes,
    ) -> Result<(), DriverError> {
        if position == 0 || self.fetching.as_ref().is_none_or(|(at, _)| *at != id) {
            // The core starts every snapshot at position 0; a chunk elsewhere for another
            // snapshot cannot come.
            assert_eq!(position, 0, "a snapshot chunk without its start");
            if let Some((old, file)) = self.fetching.take().filter(|(old, _)| *old != id) {
                // An abandoned fetch (the leader replaced its snapshot, or leadership moved):
                // its partial file would otherwise stay until the replica reopens.
                let path = file.path().to_string();
                drop(file);
                if let Err(source) = self.store.disk().remove(&path).await {
                    tracing::warn!(
                        node = self.raft.local_id(),
                        end_offset = old.end_offset,
                        path,
                        error = %source,
                        "raft: could not remove an abandoned partial snapshot"
                    );
                }
            }
            let file = snapshot::begin_fetch(self.store.disk(), self.store.log_dir(), id)
                .await
                .map_err(StoreError::from)?;
            self.fetching = Some((id, file));
        }
        let Some((_, file)) = &self.fetching else {
            unreachable!("a fetched snapshot's file was just opened");
        };
        let at = u64::try_from(position).unwrap_or(0);
        file.write_at(at, &bytes)
            .await
            .map_err(|source| StoreError::Io {
                op: "write",
                path: file.path().to_string(),
                source,
            })?;
        Ok(())
    }

    /// Every chunk of a fetched snapshot is written: it is checked (it decodes whole, its
    /// voter set is `controller.quorum.voters`) and made durable under its name. False when
    /// a check failed: the partial file is gone and the core fetches it again (a leader
    /// serves only whole snapshots, so this is damage in transit or on the leader's disk,
    /// or a leader of another quorum); the log is untouched. An IO error stops the replica.
    async fn finish_snapshot(&mut self, id: SnapshotId) -> Result<bool, DriverError> {
        let Some((at, file)) = self.fetching.take() else {
            panic!("a snapshot finished without being fetched");
        };
        assert_eq!(at, id, "the finished snapshot is the one fetched");
        let voters = self.raft.voters().clone();
        match snapshot::freeze(
            self.store.disk(),
            self.store.log_dir(),
            id,
            file,
            Some(&voters),
        )
        .await
        {
            Ok(()) => Ok(true),
            Err(
                e @ (snapshot::SnapshotFileError::Corrupt { .. }
                | snapshot::SnapshotFileError::VotersDiffer { .. }),
            ) => {
                tracing::error!(
                    node = self.raft.local_id(),
                    end_offset = id.end_offset,
                    epoch = id.epoch,
                    error = %e,
                    "raft: refused a snapshot fetched from the leader"
                );
                Ok(false)
            }
            Err(e) => Err(StoreError::from(e).into()),
        }
    }

    /// A sound fetched snapshot replaces the log: the log restarts at its end, and older
    /// snapshots go.
    async fn install_snapshot(&mut self, id: SnapshotId) -> Result<(), DriverError> {
        self.store.restart_at(id.end_offset).await?;
        self.remove_snapshots_below(id.end_offset).await?;
        self.appended_bytes = 0;
        self.last_snapshot_ms = self.now_ms();
        Ok(())
    }

    async fn deliver(&mut self, envelope: Envelope) -> Result<(), DriverError> {
        let to = envelope.to;
        match envelope.message {
            Message::FetchResponse(mut response) => {
                let records = match response.read.take() {
                    Some(read) => Some(
                        self.store
                            .read_raw(read.from_offset, read.max_bytes)
                            .await?,
                    ),
                    None => None,
                };
                if let Some(reply) = self.pending_fetches.remove(&(to, response.request_id)) {
                    let _ = reply.send(Reply {
                        message: Message::FetchResponse(response),
                        records,
                    });
                }
            }
            Message::FetchSnapshotResponse(mut response) => {
                if let Some(read) = response.read.take() {
                    let chunk = snapshot::read_chunk(
                        self.store.disk(),
                        self.store.log_dir(),
                        read.snapshot_id,
                        u64::try_from(read.position).unwrap_or(u64::MAX),
                        read.max_bytes,
                    )
                    .await
                    .map_err(StoreError::from)?;
                    match chunk {
                        None => response.error = Some(QuorumError::SnapshotNotFound),
                        Some((size, bytes)) if bytes.is_empty() => {
                            response.error = Some(QuorumError::PositionOutOfRange);
                            response.size = i64::try_from(size).unwrap_or(i64::MAX);
                        }
                        Some((size, bytes)) => {
                            response.size = i64::try_from(size).unwrap_or(i64::MAX);
                            response.bytes = bytes;
                        }
                    }
                }
                if let Some(reply) = self.pending_fetches.remove(&(to, response.request_id)) {
                    let _ = reply.send(Reply {
                        message: Message::FetchSnapshotResponse(response),
                        records: None,
                    });
                }
            }
            message @ (Message::VoteResponse { .. }
            | Message::BeginQuorumEpochResponse { .. }
            | Message::EndQuorumEpochResponse { .. }) => {
                let reply = self
                    .pending_other
                    .get_mut(&(to, message.api_key()))
                    .and_then(VecDeque::pop_front);
                if let Some(reply) = reply {
                    let _ = reply.send(Reply {
                        message,
                        records: None,
                    });
                }
            }
            request => {
                let Some(lanes) = self.lanes.get(&to) else {
                    // Observers are not sent requests; a peer outside the voter set is a
                    // core bug the election invariants rule out.
                    return Ok(());
                };
                let lane = if matches!(request, Message::Fetch(_) | Message::FetchSnapshot(_)) {
                    &lanes.fetch
                } else {
                    &lanes.other
                };
                // A full lane drops the request; the core's request timeout sends it again.
                let _ = lane.try_send(request);
            }
        }
        Ok(())
    }
}

struct LaneConfig {
    local: ReplicaKey,
    peer: i32,
    addr: String,
    cluster_id: Option<String>,
    /// How long one exchange may take (the request timeout plus a held fetch's wait).
    timeout: Duration,
    fetch_max_wait_ms: u64,
    fetches: bool,
}

/// One connection to one peer for one kind of request.
struct PeerConnection {
    stream: TcpStream,
    next_correlation_id: i32,
}

async fn run_lane(
    config: LaneConfig,
    mut queue: mpsc::Receiver<Message>,
    inputs: mpsc::Sender<Input>,
) {
    let mut connection: Option<PeerConnection> = None;
    while let Some(message) = queue.recv().await {
        let request = match wire::encode_request(
            config.cluster_id.as_deref(),
            config.local,
            config.peer,
            &message,
            config.fetch_max_wait_ms,
        ) {
            Ok(request) => request,
            Err(e) => {
                tracing::error!(peer = config.peer, error = %e, "raft: a request did not encode");
                continue;
            }
        };
        let exchange = async {
            if connection.is_none() {
                let stream = TcpStream::connect(&config.addr)
                    .await
                    .map_err(|e| format!("connect to {}: {e}", config.addr))?;
                let _ = stream.set_nodelay(true);
                connection = Some(PeerConnection {
                    stream,
                    next_correlation_id: 0,
                });
            }
            let Some(conn) = connection.as_mut() else {
                return Err("no connection".to_string());
            };
            exchange(conn, &request).await
        };
        match time::timeout(config.timeout, exchange).await {
            Ok(Ok(body)) => match wire::decode_response(&message, request.version, body) {
                Ok((answer, raw)) => {
                    let input = Input::Response {
                        from: config.peer,
                        message: answer,
                        raw,
                    };
                    if inputs.send(input).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(peer = config.peer, error = %e, "raft: an answer did not decode");
                    connection = None;
                }
            },
            Ok(Err(e)) => {
                tracing::debug!(peer = config.peer, fetches = config.fetches, error = %e, "raft: exchange failed");
                connection = None;
            }
            Err(elapsed) => {
                tracing::debug!(peer = config.peer, fetches = config.fetches, %elapsed, "raft: exchange timed out");
                connection = None;
            }
        }
    }
}

/// Writes one request and reads its answer's body (header checked and stripped).
async fn exchange(conn: &mut PeerConnection, request: &wire::WireRequest) -> Result<Bytes, String> {
    let correlation_id = conn.next_correlation_id;
    conn.next_correlation_id = conn.next_correlation_id.wrapping_add(1);
    let header = RequestHeader {
        request_api_key: request.api_key,
        request_api_version: request.version,
        correlation_id,
        client_id: Some(CLIENT_ID.to_string()),
    };
    let header_version = request_header_version(request.api_key, request.version)
        .ok_or_else(|| format!("API {} v{} has no header", request.api_key, request.version))?;
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    header
        .encode(&mut frame, header_version)
        .map_err(|e| e.to_string())?;
    frame.extend_from_slice(&request.body);
    let size = i32::try_from(frame.len() - SIZE_PREFIX_BYTES).map_err(|_| "a huge request")?;
    frame[..SIZE_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
    conn.stream
        .write_all(&frame)
        .await
        .map_err(|e| format!("write: {e}"))?;
    conn.stream
        .flush()
        .await
        .map_err(|e| format!("flush: {e}"))?;
    let mut prefix = [0u8; SIZE_PREFIX_BYTES];
    conn.stream
        .read_exact(&mut prefix)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let size = usize::try_from(i32::from_be_bytes(prefix))
        .ok()
        .filter(|size| (4..=FRAME_BYTES_MAX).contains(size))
        .ok_or_else(|| format!("an answer of {} bytes", i32::from_be_bytes(prefix)))?;
    let mut body = vec![0u8; size];
    conn.stream
        .read_exact(&mut body)
        .await
        .map_err(|e| format!("read a {size}-byte answer: {e}"))?;
    let mut reader = Reader::new(Bytes::from(body));
    let response_hv = response_header_version(request.api_key, request.version).unwrap_or(0);
    let header = ResponseHeader::decode(&mut reader, response_hv).map_err(|e| e.to_string())?;
    if header.correlation_id != correlation_id {
        return Err(format!(
            "an answer with correlation id {} to request {correlation_id}",
            header.correlation_id
        ));
    }
    reader.bytes(reader.remaining()).map_err(|e| e.to_string())
}

/// What the controller listener's connections need to know.
#[derive(Clone)]
struct ServeConfig {
    cluster_id: Option<String>,
    /// How long a request's bytes, or an answer's write, may take.
    request_timeout: Duration,
    /// How long a request may wait for the replica's answer (a held fetch included).
    reply_timeout: Duration,
    apis: Option<StateMachineApis>,
}

impl ServeConfig {
    /// Every API the listener serves: the quorum's and the state machine's.
    fn served(&self) -> impl Iterator<Item = (i16, i16, i16)> + '_ {
        SERVED
            .iter()
            .copied()
            .chain(self.apis.iter().flat_map(|a| a.apis.iter().copied()))
    }

    fn request_bytes_max(&self) -> usize {
        self.apis.as_ref().map_or(INBOUND_REQUEST_BYTES_MAX, |a| {
            a.request_bytes_max.max(INBOUND_REQUEST_BYTES_MAX)
        })
    }
}

/// Accepts connections on the controller listener.
async fn serve(listener: TcpListener, inputs: mpsc::Sender<Input>, config: ServeConfig) {
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "raft: accept failed");
                time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if open.load(std::sync::atomic::Ordering::Acquire) >= CONNECTIONS_MAX {
            tracing::warn!(%peer, "raft: too many connections; closing a new one");
            continue;
        }
        let _ = stream.set_nodelay(true);
        open.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let open = open.clone();
        let inputs = inputs.clone();
        let config = config.clone();
        task::spawn(async move {
            if let Err(e) = serve_connection(stream, inputs, config).await {
                tracing::debug!(%peer, error = %e, "raft: connection closed");
            }
            open.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        });
    }
}

/// The APIs and versions the controller listener serves.
const SERVED: [(i16, i16, i16); 7] = [
    (1, wire::FETCH_VERSION_MIN, wire::FETCH_VERSION),
    (18, 0, 4),
    (52, 0, wire::VOTE_VERSION),
    (53, 0, wire::BEGIN_QUORUM_EPOCH_VERSION),
    (54, 0, wire::END_QUORUM_EPOCH_VERSION),
    (55, 0, 2),
    (59, 0, wire::FETCH_SNAPSHOT_VERSION),
];

async fn serve_connection(
    mut stream: TcpStream,
    inputs: mpsc::Sender<Input>,
    config: ServeConfig,
) -> Result<(), String> {
    let idle = Duration::from_millis(CONNECTION_IDLE_MS_MAX);
    loop {
        let mut prefix = [0u8; SIZE_PREFIX_BYTES];
        match time::timeout(idle, stream.read_exact(&mut prefix)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(Err(e)) => return Err(format!("read: {e}")),
            Err(_) => return Err(format!("idle for {CONNECTION_IDLE_MS_MAX} ms")),
        }
        let size =
            frame::request_size(prefix, config.request_bytes_max()).map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; size];
        time::timeout(config.request_timeout, stream.read_exact(&mut buf))
            .await
            .map_err(|e| format!("a {size}-byte request: {e}"))?
            .map_err(|e| format!("read a {size}-byte request: {e}"))?;
        let request = frame::parse_request(Bytes::from(buf)).map_err(|e| e.to_string())?;
        let api_key = request.api_key();
        let version = request.api_version();
        let correlation_id = request.header.correlation_id;
        let served = config
            .served()
            .any(|(key, min, max)| key == api_key && (min..=max).contains(&version));
        let forwarded = config
            .apis
            .as_ref()
            .filter(|a| a.apis.iter().any(|(key, _, _)| *key == api_key));
        let body = if api_key == 18 {
            let response = ApiVersionsResponse {
                error_code: if served {
                    0
                } else {
                    ErrorCode::UNSUPPORTED_VERSION.0
                },
                api_keys: config
                    .served()
                    .map(|(key, min, max)| ApiVersion {
                        api_key: key,
                        min_version: min,
                        max_version: max,
                    })
                    .collect(),
                ..Default::default()
            };
            let version = if served { version } else { 0 };
            let mut out = BytesMut::new();
            response
                .encode(&mut out, version)
                .map_err(|e| e.to_string())?;
            (version, out.freeze())
        } else if !served {
            return Err(format!(
                "API {api_key} v{version} is not served on the controller listener"
            ));
        } else if let Some(apis) = forwarded {
            let (reply, answer) = oneshot::channel();
            apis.requests
                .send(ForwardedRequest {
                    api_key,
                    version,
                    client_id: request.header.client_id.clone(),
                    body: request.body.clone(),
                    reply,
                })
                .await
                .map_err(|_| "the state machine stopped".to_string())?;
            let body = time::timeout(Duration::from_millis(apis.reply_timeout_ms), answer)
                .await
                .map_err(|e| format!("no answer: {e}"))?
                .map_err(|_| "the state machine dropped the request".to_string())?;
            (version, body)
        } else if api_key == 55 {
            let (reply, answer) = oneshot::channel();
            inputs
                .send(Input::Describe { reply })
                .await
                .map_err(|_| "the replica stopped".to_string())?;
            let described = answer
                .await
                .map_err(|_| "the replica stopped".to_string())?;
            (version, describe_quorum_body(described, version)?)
        } else {
            match wire::decode_request(
                api_key,
                version,
                request.body.clone(),
                correlation_id,
                config.cluster_id.as_deref(),
            ) {
                Ok((from, message)) => {
                    let (reply, answer) = oneshot::channel();
                    inputs
                        .send(Input::Request {
                            from,
                            message,
                            reply,
                        })
                        .await
                        .map_err(|_| "the replica stopped".to_string())?;
                    let reply = time::timeout(config.reply_timeout, answer)
                        .await
                        .map_err(|e| format!("no answer: {e}"))?
                        .map_err(|_| {
                            "no answer (the request was superseded or dropped)".to_string()
                        })?;
                    let body = wire::encode_response(&reply.message, version, reply.records)
                        .map_err(|e| e.to_string())?;
                    (version, body)
                }
                Err(e) if e.answerable() => {
                    tracing::warn!(error = %e, "raft: refused a request");
                    let body = wire::error_response(api_key, version, e.error_code())
                        .map_err(|e| e.to_string())?;
                    (version, body)
                }
                Err(e) => return Err(e.to_string()),
            }
        };
        let (version, body) = body;
        let header_version = response_header_version(api_key, version).unwrap_or(0);
        let header = ResponseHeader { correlation_id };
        let mut out = BytesMut::new();
        out.put_i32(0);
        header
            .encode(&mut out, header_version)
            .map_err(|e| e.to_string())?;
        out.extend_from_slice(&body);
        let size = i32::try_from(out.len() - SIZE_PREFIX_BYTES).map_err(|_| "a huge answer")?;
        out[..SIZE_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
        let write = async {
            stream.write_all(&out).await?;
            stream.flush().await
        };
        time::timeout(config.request_timeout, write)
            .await
            .map_err(|e| format!("writing an answer: {e}"))?
            .map_err(|e| format!("write: {e}"))?;
    }
}

fn describe_quorum_body(described: Described, version: i16) -> Result<Bytes, String> {
    let wall = |at: Option<u64>| match at {
        Some(at) => {
            let ago = i64::try_from(described.now_ms.saturating_sub(at)).unwrap_or(i64::MAX);
            described.wall_ms.saturating_sub(ago)
        }
        None => -1,
    };
    let partition = match &described.quorum {
        Some(q) => {
            let replica = |r: &super::core::ReplicaDescription| dq::DescribeQuorumReplicaState {
                replica_id: NodeId(r.id),
                replica_directory_id: Uuid::ZERO,
                log_end_offset: Offset(r.end_offset.unwrap_or(-1)),
                last_fetch_timestamp: wall(r.last_fetch_ms),
                last_caught_up_timestamp: wall(r.last_caught_up_ms),
            };
            dq::DescribeQuorumResponsePartition {
                partition_index: METADATA_PARTITION,
                error_code: 0,
                leader_id: NodeId(q.leader_id),
                leader_epoch: LeaderEpoch(q.epoch),
                high_watermark: Offset(q.high_watermark),
                current_voters: q.voters.iter().map(replica).collect(),
                observers: q.observers.iter().map(replica).collect(),
                ..Default::default()
            }
        }
        None => dq::DescribeQuorumResponsePartition {
            partition_index: METADATA_PARTITION,
            error_code: ErrorCode::NOT_LEADER_OR_FOLLOWER.0,
            error_message: Some("this replica does not lead the metadata quorum".into()),
            leader_id: NodeId(-1),
            leader_epoch: LeaderEpoch(-1),
            high_watermark: Offset(-1),
            ..Default::default()
        },
    };
    let response = dq::DescribeQuorumResponse {
        topics: vec![dq::DescribeQuorumResponseTopic {
            topic_name: METADATA_TOPIC.into(),
            partitions: vec![partition],
        }],
        ..Default::default()
    };
    let mut out = BytesMut::new();
    response
        .encode(&mut out, version)
        .map_err(|e| e.to_string())?;
    Ok(out.freeze())
}
