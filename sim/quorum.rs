//! The metadata quorum under madsim: N voters, each a simulated node with its own IP, its
//! own `MemDisk` and wall clock that survive its restarts, running the real KRaft replica
//! (`samsa::raft::driver`: the core, its log on the partition log, Kafka's RPCs on simulated
//! TCP). A test state machine, a register, runs on every voter over the committed log;
//! clients on a node of their own propose register operations to whichever voter they
//! believe leads and learn each outcome from that voter's state machine.
//!
//! The nemesis draws from a weighted table of fault kinds aimed at a node, a link or the
//! whole cluster: kill (process crash or power loss, each disk crash mode but corruption of
//! synced data, which Raft does not survive on any voter that counted toward a commit),
//! pause, partitions (random halves, one node isolated, the leader isolated, one one-way
//! link, a bridge), latency spikes and wall-clock jumps; every voter losing power at once
//! within a budget per seed. Then a healing phase: every link restored, every node up; the
//! quorum must converge and elect a leader.
//!
//! Snapshots are small and frequent: the register's state machine hands the driver its state
//! (the value and the chain of the entries it applied) whenever a snapshot is due, the log
//! start follows the latest snapshot past a few KiB of log, and a voter that was down or cut
//! off for a second or more comes back below every log start and catches up by FetchSnapshot.
//!
//! Judged by `samsa_spec::quorum` (election safety, epochs, committed prefix, truncation,
//! convergence, snapshots by their chains) over the nodes' reported events and their logs
//! and latest snapshots read at the end, and by
//! `samsa_spec::register` (linearizability) over the clients' operations and the committed
//! log.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use samsa::raft::core::{RaftBugs, RaftConfig, RaftEvent};
use samsa::raft::driver::{self, DriverError, EventSink, NodeConfig, RaftHandle, SnapshotConfig};
use samsa::raft::message::{RaftRecord, SnapshotId};
use samsa::raft::snapshot::SnapshotContents;
use samsa::rt::clock::Clock;
use samsa::rt::disk::{CrashMode, Disk, MemDisk};
use samsa::rt::net::TcpListener;
use samsa::rt::time::{self, Duration, Instant};
use samsa_spec::quorum::{
    self, chain_step, Entry, QuorumEnd, QuorumEvent, QuorumHistory, CHAIN_START,
};
use samsa_spec::register::{self, ClientOp, Outcome, RegisterOp, RegisterResult};

use crate::metadata::{self, MetadataOptions, MetadataShared};

/// The controller listener's port on every voter.
pub const QUORUM_PORT: u16 = 9093;
/// How long a client waits for its proposal's outcome before calling it unknown.
pub const CLIENT_WAIT_MS: u64 = 3_000;
/// A run that goes on far longer than its phases is stuck (madsim panics with the seed).
pub const SIMULATED_SECONDS_MAX: u64 = 300;
/// Bytes one state-machine read asks for.
const APPLY_READ_BYTES: usize = 64 << 10;

/// A replica's event as the quorum checker's, for node `id`; None for a snapshot loaded
/// (the harness's state machine reports those with their chains).
pub fn quorum_event(id: i32, event: RaftEvent) -> Option<QuorumEvent> {
    match event {
        RaftEvent::Epoch { epoch } => Some(QuorumEvent::Epoch { node: id, epoch }),
        RaftEvent::Leader { epoch } => Some(QuorumEvent::Leader { node: id, epoch }),
        RaftEvent::Truncated { to, high_watermark } => Some(QuorumEvent::Truncated {
            node: id,
            to,
            high_watermark,
        }),
        RaftEvent::SnapshotLoaded { .. } => None,
    }
}

fn voter_ip(id: i32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 2, u8::try_from(id).unwrap_or(u8::MAX)))
}

const CLIENTS_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 3, 1));

#[derive(Clone, Copy, Debug)]
pub struct QuorumOptions {
    pub voters: i32,
    pub clients: usize,
    pub faults_ms: u64,
    pub heal_ms: u64,
    /// The gap between two faults, drawn from this range.
    pub fault_gap_ms: (u64, u64),
    /// Times every voter loses power at once, at most, per seed.
    pub cluster_power_losses_max: u32,
    pub raft: RaftConfig,
    pub bugs: RaftBugs,
    /// Disk sync latency range (microseconds).
    pub disk_sync_us: (u64, u64),
    /// When the state machines snapshot and how much log is kept behind a snapshot.
    pub snapshots: SnapshotConfig,
    pub segment_bytes: u64,
    /// The controller above every voter and admin clients (then the register's clients and
    /// snapshots are off): `metadata.rs`.
    pub metadata: Option<MetadataOptions>,
}

/// Snapshots every 16 KiB of log, a log start that follows them past 8 KiB: a few dozen
/// per seed, and a voter away for a second falls below every log start.
pub const SIM_SNAPSHOTS: SnapshotConfig = SnapshotConfig {
    max_bytes_between_snapshots: 16 << 10,
    max_snapshot_interval_ms: 0,
    retention_bytes: 8 << 10,
};

impl QuorumOptions {
    pub fn new(voters: i32) -> QuorumOptions {
        QuorumOptions {
            voters,
            clients: 3,
            faults_ms: 20_000,
            heal_ms: 20_000,
            fault_gap_ms: (200, 1_500),
            cluster_power_losses_max: 2,
            raft: RaftConfig::DEFAULT,
            bugs: RaftBugs::default(),
            disk_sync_us: (200, 3_000),
            snapshots: SIM_SNAPSHOTS,
            segment_bytes: 16 << 10,
            metadata: None,
        }
    }
}

/// Slow syncs and up to eight power losses of every voter per seed: the setting in which a
/// voter that acknowledged unsynced records would lose committed ones.
pub fn slow_disks_and_power_losses(options: QuorumOptions) -> QuorumOptions {
    QuorumOptions {
        disk_sync_us: (5_000, 40_000),
        cluster_power_losses_max: 8,
        ..options
    }
}

/// Where a state machine applied a record: node, incarnation, offset.
type AppliedAt = (i32, u64, i64);

/// What the nodes and clients recorded, shared across the simulated nodes.
#[derive(Default)]
struct Shared {
    history: Mutex<QuorumHistory>,
    ops: Mutex<Vec<ClientOp>>,
    /// Each running voter's handle and incarnation (its restart count).
    handles: Mutex<BTreeMap<i32, (u64, RaftHandle)>>,
    /// What each voter's state machine applied: (node, incarnation, offset) to the
    /// operation id there and its result.
    applied: Mutex<BTreeMap<AppliedAt, (u64, RegisterResult)>>,
    next_op: AtomicU64,
    /// Snapshots fetched from a leader and installed.
    installs: AtomicU64,
    metadata: Arc<MetadataShared>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Shared {
    fn push(&self, event: QuorumEvent) {
        lock(&self.history).push(event);
    }
}

/// One seed's findings and figures.
pub struct QuorumOutcome {
    pub anomalies: Vec<String>,
    pub nemesis: Vec<String>,
    pub elections: usize,
    pub ops: usize,
    pub ops_ok: usize,
    pub committed: i64,
    pub simulated_ms: u64,
    /// Snapshots the state machines made or loaded, and those fetched from a leader.
    pub snapshots: usize,
    pub installs: u64,
    /// Controller suites: admin requests sent, succeeded, and images checked.
    pub admin: (u64, u64, usize),
}

impl QuorumOutcome {
    /// Everything a run decided, for comparing two runs of one seed.
    pub fn fingerprint(&self) -> String {
        format!(
            "{:?} {:?} {} {} {} {} {} {} {} {:?}",
            self.anomalies,
            self.nemesis,
            self.elections,
            self.ops,
            self.ops_ok,
            self.committed,
            self.simulated_ms,
            self.snapshots,
            self.installs,
            self.admin
        )
    }
}

fn voters_text(voters: i32) -> BTreeMap<i32, String> {
    (1..=voters)
        .map(|id| (id, format!("{}:{QUORUM_PORT}", voter_ip(id))))
        .collect()
}

/// A voter's life until it is killed: the replica, and the register over its committed log.
async fn voter(
    id: i32,
    disk: MemDisk,
    clock: Clock,
    options: QuorumOptions,
    shared: Arc<Shared>,
    incarnation: u64,
) {
    let listener = match TcpListener::bind(("0.0.0.0", QUORUM_PORT)).await {
        Ok(listener) => listener,
        Err(e) => panic!("voter {id}: bind: {e}"),
    };
    let config = NodeConfig {
        node_id: id,
        voters: voters_text(options.voters),
        metadata_log_dir: "metadata".into(),
        segment_bytes: options.segment_bytes,
        raft: options.raft,
        cluster_id: Some("sim".into()),
        bugs: options.bugs,
        snapshots: options.snapshots,
    };
    let sink: EventSink = {
        let shared = shared.clone();
        Arc::new(move |event| match quorum_event(id, event) {
            Some(event) => shared.push(event),
            // The state machine reports the snapshot it loads, with its chain.
            None => {
                shared.installs.fetch_add(1, Ordering::AcqRel);
            }
        })
    };
    let (apis, forwarded) = match options.metadata {
        Some(_) => {
            let (apis, forwarded) = samsa::controller::driver::listener_apis();
            (Some(apis), Some(forwarded))
        }
        None => (None, None),
    };
    let node = match driver::start_with(config, Disk::mem(disk), clock, listener, Some(sink), apis)
        .await
    {
        Ok(node) => node,
        Err(e) => panic!("voter {id}: the replica did not start: {e}"),
    };
    let handle = node.handle.clone();
    if let (Some(md), Some(forwarded)) = (options.metadata, forwarded) {
        metadata::start_controller(id, handle.clone(), forwarded, md, shared.metadata.clone());
    }
    lock(&shared.handles).insert(id, (incarnation, handle.clone()));
    // The state machine: apply the committed log in order, from the latest snapshot where
    // the log starts past what it applied.
    let mut applied = 0i64;
    let mut value: Option<u64> = None;
    let mut chain = CHAIN_START;
    loop {
        let _ = handle
            .wait_for(Duration::from_millis(200), |s| {
                s.high_watermark > applied || s.log_start_offset > applied
            })
            .await;
        let batches = match handle.read_committed(applied, APPLY_READ_BYTES).await {
            Ok(batches) => batches,
            Err(DriverError::BelowLogStart { .. }) => {
                let (snapshot, contents) = match handle.latest_snapshot().await {
                    Ok(Some(latest)) => latest,
                    Ok(None) => panic!("voter {id}: a log start past {applied} with no snapshot"),
                    Err(e) => panic!("voter {id}: reading the latest snapshot: {e}"),
                };
                assert_voter_set(id, snapshot, &contents, options.voters);
                let records = contents.records;
                let Some((loaded, loaded_chain)) = records.first().and_then(|r| decode_state(r))
                else {
                    panic!("voter {id}: snapshot {snapshot:?} holds no register state");
                };
                value = loaded;
                chain = loaded_chain;
                applied = snapshot.end_offset;
                shared.push(QuorumEvent::Snapshot {
                    node: id,
                    end_offset: applied,
                    chain,
                });
                continue;
            }
            Err(e) => panic!("voter {id}: reading the committed log: {e}"),
        };
        for batch in batches {
            for (i, record) in batch.records.iter().enumerate() {
                let offset = batch.base_offset + i as i64;
                if offset < applied {
                    continue;
                }
                assert_eq!(offset, applied, "voter {id}: the committed log has a hole");
                let entry = Entry {
                    epoch: batch.epoch,
                    digest: record.digest(offset),
                };
                shared.push(QuorumEvent::Committed {
                    node: id,
                    offset,
                    entry,
                });
                chain = chain_step(chain, entry);
                if let RaftRecord::Data(bytes) = record {
                    if let Some((op_id, op)) = RegisterOp::decode(bytes) {
                        let (next, result) = register::apply(value, op);
                        value = next;
                        lock(&shared.applied).insert((id, incarnation, offset), (op_id, result));
                    }
                }
                applied = offset + 1;
            }
        }
        if handle.status().snapshot_due {
            match handle
                .create_snapshot(applied, vec![encode_state(value, chain)])
                .await
            {
                Ok(Ok(made)) => shared.push(QuorumEvent::Snapshot {
                    node: id,
                    end_offset: made.end_offset,
                    chain,
                }),
                // Not newer than the latest, or not committed here yet: later.
                Ok(Err(_)) => {}
                Err(e) => panic!("voter {id}: the driver stopped: {e}"),
            }
        }
    }
}

/// The register's snapshot: the value (a flag and 8 bytes) and the chain (8 bytes).
fn encode_state(value: Option<u64>, chain: u64) -> Bytes {
    let mut out = Vec::with_capacity(17);
    out.push(u8::from(value.is_some()));
    out.extend_from_slice(&value.unwrap_or(0).to_be_bytes());
    out.extend_from_slice(&chain.to_be_bytes());
    Bytes::from(out)
}

fn decode_state(bytes: &[u8]) -> Option<(Option<u64>, u64)> {
    let (flag, rest) = bytes.split_first()?;
    let value = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
    let chain = u64::from_be_bytes(rest.get(8..16)?.try_into().ok()?);
    if rest.len() != 16 || *flag > 1 {
        return None;
    }
    Some(((*flag == 1).then_some(value), chain))
}

/// A client: proposes register operations to the voter it believes leads.
async fn client(shared: Arc<Shared>, mut rng: SmallRng, start: Instant, stop: Arc<AtomicBool>) {
    let now_ms = || time::now().saturating_duration_since(start).as_millis() as u64;
    while !stop.load(Ordering::Acquire) {
        time::sleep(Duration::from_millis(rng.gen_range(1..40))).await;
        let target = {
            let handles = lock(&shared.handles);
            let leader = handles
                .iter()
                .filter(|(_, (_, h))| h.status().is_leader)
                .map(|(id, (inc, h))| (*id, *inc, h.clone()))
                .next_back();
            leader.or_else(|| {
                let all: Vec<_> = handles
                    .iter()
                    .map(|(id, (inc, h))| (*id, *inc, h.clone()))
                    .collect();
                all.choose(&mut rng).cloned()
            })
        };
        let Some((node, incarnation, handle)) = target else {
            continue;
        };
        let op = match rng.gen_range(0..3) {
            0 => RegisterOp::Read,
            1 => RegisterOp::Write(rng.gen_range(0..5)),
            _ => RegisterOp::Cas {
                from: rng.gen_range(0..5),
                to: rng.gen_range(0..5),
            },
        };
        let id = shared.next_op.fetch_add(1, Ordering::AcqRel);
        let index = {
            let mut ops = lock(&shared.ops);
            ops.push(ClientOp {
                id,
                op,
                invoked_ms: now_ms(),
                completed_ms: None,
                outcome: Outcome::Unknown,
            });
            ops.len() - 1
        };
        let offset = match handle.propose(vec![Bytes::from(op.encode(id))]).await {
            Ok(Ok(offset)) => offset,
            Ok(Err(_)) => {
                // Refused (not the leader): certainly not in the log.
                let mut ops = lock(&shared.ops);
                ops[index].outcome = Outcome::Failed;
                ops[index].completed_ms = Some(now_ms());
                continue;
            }
            // The voter died with the proposal: unknown.
            Err(_) => continue,
        };
        let deadline = time::now() + Duration::from_millis(CLIENT_WAIT_MS);
        while time::now() < deadline {
            let found = lock(&shared.applied)
                .get(&(node, incarnation, offset))
                .copied();
            if let Some((op_id, result)) = found {
                if op_id == id {
                    let mut ops = lock(&shared.ops);
                    ops[index].outcome = Outcome::Ok(result);
                    ops[index].completed_ms = Some(now_ms());
                }
                // Another operation at its offset: this one was cut away; unknown.
                break;
            }
            let restarted = lock(&shared.handles)
                .get(&node)
                .is_none_or(|(inc, _)| *inc != incarnation);
            if restarted {
                break;
            }
            time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    KillProcess,
    KillPowerLoss,
    Pause,
    Halves,
    IsolateOne,
    IsolateLeader,
    OneWay,
    Bridge,
    LatencySpike,
    ClockJump,
    ClusterPowerLoss,
}

/// The nemesis's table: each fault kind and its weight.
const FAULTS: [(Fault, u32); 11] = [
    (Fault::KillProcess, 8),
    (Fault::KillPowerLoss, 8),
    (Fault::Pause, 6),
    (Fault::Halves, 6),
    (Fault::IsolateOne, 6),
    (Fault::IsolateLeader, 10),
    (Fault::OneWay, 4),
    (Fault::Bridge, 4),
    (Fault::LatencySpike, 3),
    (Fault::ClockJump, 3),
    (Fault::ClusterPowerLoss, 2),
];

fn draw(rng: &mut SmallRng) -> Fault {
    let total: u32 = FAULTS.iter().map(|(_, w)| w).sum();
    let mut at = rng.gen_range(0..total);
    for (fault, weight) in FAULTS {
        if at < weight {
            return fault;
        }
        at -= weight;
    }
    FAULTS[0].0
}

/// Runs one seed in a fresh runtime.
pub fn run_quorum_seed(seed: u64, options: QuorumOptions) -> QuorumOutcome {
    crate::harness::on_seed_thread("quorum-seed", seed, SIMULATED_SECONDS_MAX, move || {
        simulate(options)
    })
}

struct Voter {
    node: madsim::runtime::NodeHandle,
    disk: MemDisk,
    clock: Clock,
    down_until: Option<Instant>,
    paused_until: Option<Instant>,
}

async fn simulate(options: QuorumOptions) -> QuorumOutcome {
    let handle = madsim::runtime::Handle::current();
    let net = madsim::net::NetSim::current();
    let mut rng = SmallRng::seed_from_u64(samsa::rt::rand::random_u64());
    let shared = Arc::new(Shared::default());
    let start = time::now();
    let incarnations: Arc<Mutex<BTreeMap<i32, u64>>> = Arc::default();
    let mut voters: BTreeMap<i32, Voter> = BTreeMap::new();
    for id in 1..=options.voters {
        let disk = MemDisk::new(rng.gen());
        disk.set_latency(50, options.disk_sync_us.0, options.disk_sync_us.1);
        let clock = Clock::new();
        let node = {
            let (disk, clock, shared, incarnations) = (
                disk.clone(),
                clock.clone(),
                shared.clone(),
                incarnations.clone(),
            );
            handle
                .create_node()
                .name(format!("voter-{id}"))
                .ip(voter_ip(id))
                .init(move || {
                    let incarnation = {
                        let mut all = lock(&incarnations);
                        let next = all.entry(id).or_insert(0);
                        *next += 1;
                        *next
                    };
                    voter(
                        id,
                        disk.clone(),
                        clock.clone(),
                        options,
                        shared.clone(),
                        incarnation,
                    )
                })
                .build()
        };
        voters.insert(
            id,
            Voter {
                node,
                disk,
                clock,
                down_until: None,
                paused_until: None,
            },
        );
    }
    let clients = handle.create_node().name("clients").ip(CLIENTS_IP).build();
    let stop = Arc::new(AtomicBool::new(false));
    if let Some(md) = options.metadata {
        let addrs: Vec<(IpAddr, u16)> = (1..=options.voters)
            .map(|id| (voter_ip(id), QUORUM_PORT))
            .collect();
        for i in 0..md.admin_clients {
            clients.spawn(metadata::admin_client(
                shared.metadata.clone(),
                100 + i as i32,
                addrs.clone(),
                SmallRng::seed_from_u64(rng.gen()),
                stop.clone(),
            ));
        }
    }
    for _ in 0..options.clients {
        clients.spawn(client(
            shared.clone(),
            SmallRng::seed_from_u64(rng.gen()),
            start,
            stop.clone(),
        ));
    }

    let ids: Vec<i32> = voters.keys().copied().collect();
    let node_ids: BTreeMap<i32, madsim::task::NodeId> =
        voters.iter().map(|(id, v)| (*id, v.node.id())).collect();
    let cut = |a: i32, b: i32, clogged: &mut BTreeSet<(i32, i32)>| {
        if a != b && clogged.insert((a, b)) {
            net.clog_link(node_ids[&a], node_ids[&b]);
        }
    };
    // Both directions of every link between the two groups.
    let split = |left: &[i32], right: &[i32], clogged: &mut BTreeSet<(i32, i32)>| {
        for a in left {
            for b in right {
                cut(*a, *b, clogged);
                cut(*b, *a, clogged);
            }
        }
    };
    let mut nemesis = Vec::new();
    let mut note = |text: String| {
        let stamp = time::now().saturating_duration_since(start).as_millis();
        nemesis.push(format!("{stamp} {text}"));
    };
    let mut clogged: BTreeSet<(i32, i32)> = BTreeSet::new();
    let mut heal_links_at: Option<Instant> = None;
    let mut latency_until: Option<Instant> = None;
    let default_latency = madsim::net::Config::default().send_latency;
    let mut cluster_power_losses = 0;
    let faults_end = start + Duration::from_millis(options.faults_ms);
    let mut next_fault = start + Duration::from_millis(rng.gen_range(500..1_500));
    let mut seen = 0usize;
    let leader_now = |shared: &Shared| {
        lock(&shared.handles)
            .iter()
            .filter(|(_, (_, h))| h.status().is_leader)
            .map(|(id, _)| *id)
            .next_back()
    };
    let kill = |voters: &mut BTreeMap<i32, Voter>,
                shared: &Shared,
                rng: &mut SmallRng,
                id: i32,
                mode: CrashMode,
                down_ms: u64| {
        let voter = voters.get_mut(&id).expect("a voter");
        if voter.down_until.is_some() {
            return false;
        }
        if voter.paused_until.take().is_some() {
            handle.resume(voter.node.id());
        }
        handle.kill(voter.node.id());
        lock(&shared.handles).remove(&id);
        metadata::forget_controller(&shared.metadata, id);
        voter.disk.crash(mode, rng);
        voter.down_until = Some(time::now() + Duration::from_millis(down_ms));
        shared.push(QuorumEvent::Restarted {
            node: id,
            power_loss: mode != CrashMode::Process,
        });
        true
    };
    let lose_power = |voters: &mut BTreeMap<i32, Voter>, rng: &mut SmallRng, mode: CrashMode| {
        for id in &ids {
            let down_ms = rng.gen_range(100..1_000);
            kill(voters, &shared, rng, *id, mode, down_ms);
        }
    };
    while time::now() < faults_end {
        time::sleep(Duration::from_millis(5)).await;
        let now = time::now();
        for (id, voter) in voters.iter_mut() {
            if voter.down_until.is_some_and(|at| now >= at) {
                voter.down_until = None;
                handle.restart(voter.node.id());
                note(format!("restart {id}"));
            }
            if voter.paused_until.is_some_and(|at| now >= at) {
                voter.paused_until = None;
                handle.resume(voter.node.id());
                note(format!("resume {id}"));
            }
        }
        if heal_links_at.is_some_and(|at| now >= at) {
            heal_links_at = None;
            for (a, b) in std::mem::take(&mut clogged) {
                net.unclog_link(node_ids[&a], node_ids[&b]);
            }
            note("heal links".into());
        }
        if latency_until.is_some_and(|at| now >= at) {
            latency_until = None;
            net.update_config(|c| c.send_latency = default_latency.clone());
            note("latency back to normal".into());
        }
        // Event-timed faults: a leader isolated right after it won, power gone from every
        // voter the moment something commits (what a quorum acknowledged must be synced).
        let (became_leader, committed) = {
            let history = lock(&shared.history);
            let fresh = &history.events[seen.min(history.events.len())..];
            seen = history.events.len();
            (
                fresh.iter().rev().find_map(|e| match e {
                    QuorumEvent::Leader { node, .. } => Some(*node),
                    _ => None,
                }),
                fresh
                    .iter()
                    .any(|e| matches!(e, QuorumEvent::Committed { .. })),
            )
        };
        if let Some(leader) = became_leader.filter(|_| rng.gen_bool(0.3)) {
            let lasting = rng.gen_range(300..3_000);
            split(&[leader], &ids, &mut clogged);
            heal_links_at = Some(now + Duration::from_millis(lasting));
            note(format!("isolate new leader {leader} for {lasting} ms"));
        }
        if committed
            && cluster_power_losses < options.cluster_power_losses_max
            && rng.gen_bool(0.002)
        {
            cluster_power_losses += 1;
            lose_power(&mut voters, &mut rng, CrashMode::PowerLossDropUnsynced);
            note("every voter loses power as a record commits".into());
        }
        if now < next_fault {
            continue;
        }
        next_fault = now
            + Duration::from_millis(rng.gen_range(options.fault_gap_ms.0..options.fault_gap_ms.1));
        let target = *ids.choose(&mut rng).expect("a voter");
        let lasting = rng.gen_range(300..3_000);
        match draw(&mut rng) {
            Fault::KillProcess => {
                if kill(
                    &mut voters,
                    &shared,
                    &mut rng,
                    target,
                    CrashMode::Process,
                    lasting,
                ) {
                    note(format!("kill {target} (process) for {lasting} ms"));
                }
            }
            Fault::KillPowerLoss => {
                let mode = *[
                    CrashMode::PowerLossDropUnsynced,
                    CrashMode::PowerLossRandomPrefix,
                ]
                .choose(&mut rng)
                .expect("a mode");
                if kill(&mut voters, &shared, &mut rng, target, mode, lasting) {
                    note(format!("kill {target} ({mode:?}) for {lasting} ms"));
                }
            }
            Fault::ClusterPowerLoss if cluster_power_losses < options.cluster_power_losses_max => {
                cluster_power_losses += 1;
                lose_power(&mut voters, &mut rng, CrashMode::PowerLossRandomPrefix);
                note("every voter loses power".into());
            }
            Fault::ClusterPowerLoss => {}
            Fault::Pause => {
                let voter = voters.get_mut(&target).expect("a voter");
                if voter.down_until.is_none() && voter.paused_until.is_none() {
                    handle.pause(voter.node.id());
                    voter.paused_until = Some(now + Duration::from_millis(lasting));
                    note(format!("pause {target} for {lasting} ms"));
                }
            }
            fault @ (Fault::IsolateOne | Fault::IsolateLeader) => {
                let isolated = match fault {
                    Fault::IsolateLeader => leader_now(&shared).unwrap_or(target),
                    _ => target,
                };
                split(&[isolated], &ids, &mut clogged);
                heal_links_at = Some(now + Duration::from_millis(lasting));
                note(format!("isolate {isolated} ({fault:?}) for {lasting} ms"));
            }
            Fault::Halves => {
                let mut shuffled = ids.clone();
                shuffled.shuffle(&mut rng);
                let (left, right) = shuffled.split_at(shuffled.len() / 2);
                split(left, right, &mut clogged);
                heal_links_at = Some(now + Duration::from_millis(lasting));
                note(format!("halves {left:?} | {right:?} for {lasting} ms"));
            }
            Fault::OneWay => {
                let other = *ids.choose(&mut rng).expect("a voter");
                cut(target, other, &mut clogged);
                heal_links_at = Some(now + Duration::from_millis(lasting));
                note(format!("one-way {target} -> {other} cut for {lasting} ms"));
            }
            Fault::Bridge => {
                // `target` talks to everyone; the rest split in two halves that do not.
                let mut rest: Vec<i32> = ids.iter().copied().filter(|id| *id != target).collect();
                rest.shuffle(&mut rng);
                let (left, right) = rest.split_at(rest.len() / 2);
                split(left, right, &mut clogged);
                heal_links_at = Some(now + Duration::from_millis(lasting));
                note(format!(
                    "bridge {target} between {left:?} and {right:?} for {lasting} ms"
                ));
            }
            Fault::LatencySpike => {
                let ms = rng.gen_range(20..200);
                net.update_config(|c| {
                    c.send_latency = Duration::from_millis(ms)..Duration::from_millis(ms * 2)
                });
                latency_until = Some(now + Duration::from_millis(lasting));
                note(format!("latency {ms}-{} ms for {lasting} ms", ms * 2));
            }
            Fault::ClockJump => {
                let delta = rng.gen_range(-60_000..60_000);
                voters[&target].clock.jump(delta);
                note(format!("clock of {target} jumps {delta} ms"));
            }
        }
    }

    // Healing: every link back, every voter up; the clients go on for a while, then stop.
    for (a, b) in std::mem::take(&mut clogged) {
        net.unclog_link(node_ids[&a], node_ids[&b]);
    }
    net.update_config(|c| c.send_latency = default_latency.clone());
    for (id, voter) in voters.iter_mut() {
        if voter.down_until.take().is_some() {
            handle.restart(voter.node.id());
        }
        if voter.paused_until.take().is_some() {
            handle.resume(voter.node.id());
        }
        let _ = id;
    }
    note("heal".into());
    time::sleep(Duration::from_millis(options.heal_ms / 2)).await;
    stop.store(true, Ordering::Release);
    time::sleep(Duration::from_millis(options.heal_ms / 2)).await;

    let outcome = judge(&shared, &options, nemesis, start).await;
    // madsim drops a task's future only when it polls it after a kill; a task still alive
    // when the run ends would keep its memory (and the voter's disk) through the reference
    // cycles of its channels' wakers, seed after seed.
    lock(&shared.handles).clear();
    for voter in voters.values() {
        handle.kill(voter.node.id());
    }
    handle.kill(clients.id());
    time::sleep(Duration::from_millis(10)).await;
    outcome
}

/// Every snapshot carries the quorum's voter set (voters 1..=count), so that it stays
/// known once the log start has passed the VotersRecord at offset 0 (KIP-853).
fn assert_voter_set(id: i32, snapshot: SnapshotId, contents: &SnapshotContents, count: i32) {
    let held: Option<Vec<i32>> = contents
        .voters
        .as_ref()
        .map(|voters| voters.iter().map(|v| v.id).collect());
    let expected: Vec<i32> = (1..=count).collect();
    assert_eq!(
        held,
        Some(expected),
        "voter {id}: snapshot {snapshot:?} does not carry the voter set"
    );
}

async fn judge(
    shared: &Shared,
    options: &QuorumOptions,
    nemesis: Vec<String>,
    start: Instant,
) -> QuorumOutcome {
    let handles: Vec<(i32, RaftHandle)> = lock(&shared.handles)
        .iter()
        .map(|(id, (_, h))| (*id, h.clone()))
        .collect();
    let mut end = QuorumEnd {
        healed: true,
        ..QuorumEnd::default()
    };
    let mut best: Option<(bool, i64, i32)> = None;
    let mut logs: BTreeMap<i32, Vec<(i64, i32, RaftRecord)>> = BTreeMap::new();
    for (id, handle) in &handles {
        let status = handle.status();
        let mut records = Vec::new();
        let mut start = status.log_start_offset;
        let mut offset = start;
        loop {
            let batches = match handle.read_log(offset, 1 << 20).await {
                Ok(batches) => batches,
                // Retention moved the start meanwhile: read again from there.
                Err(DriverError::BelowLogStart { log_start_offset }) => {
                    records.clear();
                    start = log_start_offset;
                    offset = start;
                    continue;
                }
                Err(e) => panic!("voter {id}: reading its log at the end: {e}"),
            };
            if batches.is_empty() {
                break;
            }
            for batch in batches {
                for (i, record) in batch.records.iter().enumerate() {
                    let at = batch.base_offset + i as i64;
                    if at >= offset {
                        records.push((at, batch.epoch, record.clone()));
                    }
                }
                offset = batch.next_offset();
            }
        }
        end.logs.insert(
            *id,
            records
                .iter()
                .map(|(at, epoch, record)| Entry {
                    epoch: *epoch,
                    digest: record.digest(*at),
                })
                .collect(),
        );
        end.log_starts.insert(*id, start);
        match handle.latest_snapshot().await {
            Ok(Some((snapshot, contents))) => {
                assert_voter_set(*id, snapshot, &contents, options.voters);
                let Some((_, chain)) = contents.records.first().and_then(|r| decode_state(r))
                else {
                    panic!("voter {id}: snapshot {snapshot:?} holds no register state");
                };
                end.snapshots.insert(*id, (snapshot.end_offset, chain));
            }
            Ok(None) => {}
            Err(e) => panic!("voter {id}: reading its latest snapshot at the end: {e}"),
        }
        end.high_watermarks.insert(*id, status.high_watermark);
        if status.is_leader {
            end.leaders.push((*id, status.epoch));
        }
        let key = (status.is_leader, status.high_watermark, *id);
        if best.is_none_or(|b| key > b) {
            best = Some(key);
        }
        logs.insert(*id, records);
    }
    let mut anomalies: Vec<String> = Vec::new();
    if handles.len() != options.voters as usize {
        anomalies.push(format!(
            "not-converged: {} of {} voters running after healing",
            handles.len(),
            options.voters
        ));
    }
    let history = lock(&shared.history).clone();
    anomalies.extend(
        quorum::check(&history, &end)
            .iter()
            .map(ToString::to_string),
    );
    let committed = best.map_or(0, |(_, hw, _)| hw);
    // The committed operations in log order: what the state machines applied (below the
    // log starts too: each offset below a snapshot was applied by the voter that made the
    // first snapshot past it), then what the best log holds below its high watermark.
    let mut by_offset: BTreeMap<i64, u64> = BTreeMap::new();
    for ((_, _, offset), (op_id, _)) in lock(&shared.applied).iter() {
        if *offset < committed {
            by_offset.entry(*offset).or_insert(*op_id);
        }
    }
    if let Some(records) = best.and_then(|(_, _, id)| logs.get(&id)) {
        for (at, _, record) in records.iter().filter(|(at, _, _)| *at < committed) {
            if let RaftRecord::Data(bytes) = record {
                if let Some((op_id, _)) = RegisterOp::decode(bytes) {
                    by_offset.entry(*at).or_insert(op_id);
                }
            }
        }
    }
    if options.metadata.is_some() {
        let best_log = best
            .and_then(|(_, _, id)| logs.get(&id))
            .cloned()
            .unwrap_or_default();
        anomalies.extend(
            metadata::check(
                &shared.metadata,
                &best_log,
                committed,
                Duration::from_millis(options.heal_ms.max(1_000)),
            )
            .await,
        );
    }
    let committed_ops: Vec<u64> = by_offset.into_values().collect();
    let ops = lock(&shared.ops).clone();
    anomalies.extend(
        register::check(&ops, &committed_ops)
            .iter()
            .map(ToString::to_string),
    );
    let elections = history
        .events
        .iter()
        .filter(|e| matches!(e, QuorumEvent::Leader { .. }))
        .count();
    QuorumOutcome {
        anomalies,
        nemesis,
        elections,
        ops: ops.len(),
        ops_ok: ops
            .iter()
            .filter(|o| matches!(o.outcome, Outcome::Ok(_)))
            .count(),
        committed,
        simulated_ms: time::now().saturating_duration_since(start).as_millis() as u64,
        snapshots: history
            .events
            .iter()
            .filter(|e| matches!(e, QuorumEvent::Snapshot { .. }))
            .count(),
        installs: shared.installs.load(Ordering::Acquire),
        admin: metadata::counts(&shared.metadata),
    }
}

/// The seeds a quorum suite runs: from `MADSIM_TEST_SEED` (default 1), `SAMSA_QUORUM_SEEDS`
/// of them (default `default_count`; the multi-node suites run fewer seeds than the
/// single-node ones, whose count `MADSIM_TEST_NUM` sets).
pub fn quorum_seeds(default_count: u64) -> std::ops::Range<u64> {
    let env = |key: &str| std::env::var(key).ok().and_then(|v| v.parse::<u64>().ok());
    let base = env("MADSIM_TEST_SEED").unwrap_or(1);
    let count = env("SAMSA_QUORUM_SEEDS").unwrap_or(default_count);
    base..base + count
}

/// Runs a suite and panics with the first failing seed's anomalies, nemesis and replay
/// command.
pub fn run_quorum_suite(test_name: &str, options: QuorumOptions, default_count: u64) {
    let range = quorum_seeds(default_count);
    #[allow(clippy::disallowed_methods)]
    let began = std::time::Instant::now();
    let (mut elections, mut ops, mut ops_ok, mut simulated_ms) = (0usize, 0usize, 0usize, 0u64);
    let (mut snapshots, mut installs) = (0usize, 0u64);
    let mut admin = (0u64, 0u64, 0usize);
    for seed in range.clone() {
        let outcome = run_quorum_seed(seed, options);
        if !outcome.anomalies.is_empty() {
            panic!(
                "{test_name}: seed {seed} failed:\n  {}\nnemesis:\n  {}\nreplay: MADSIM_TEST_SEED={seed} SAMSA_QUORUM_SEEDS=1 cargo test --release --features sim --test sim {test_name} -- --exact",
                outcome.anomalies.join("\n  "),
                outcome.nemesis.join("\n  ")
            );
        }
        assert!(
            outcome.committed > 0,
            "{test_name}: seed {seed}: nothing was committed"
        );
        elections += outcome.elections;
        ops += outcome.ops;
        ops_ok += outcome.ops_ok;
        simulated_ms += outcome.simulated_ms;
        snapshots += outcome.snapshots;
        installs += outcome.installs;
        admin.0 += outcome.admin.0;
        admin.1 += outcome.admin.1;
        admin.2 += outcome.admin.2;
        if options.metadata.is_some() {
            assert!(
                outcome.admin.1 > 0 && outcome.admin.2 > 0,
                "{test_name}: seed {seed}: no admin request succeeded or no image was checked: {:?}",
                outcome.admin
            );
        }
    }
    if options.metadata.is_some() {
        eprintln!(
            "{test_name}: {} admin requests ({} ok), {} published images checked against the replay",
            admin.0, admin.1, admin.2
        );
    }
    // The suites are to exercise snapshots, not merely allow them (the controller suites
    // turn them off: see `metadata.rs`).
    if options.metadata.is_none() {
        assert!(
            snapshots > 0,
            "{test_name}: no state machine made a snapshot"
        );
        assert!(
            options.voters == 1 || installs > 0,
            "{test_name}: no voter caught up by fetching a snapshot"
        );
    }
    let wall = began.elapsed().as_secs_f64();
    let seeds = range.end - range.start;
    eprintln!(
        "{test_name}: {seeds} seeds ({}..{}) passed: {elections} elections ({:.1} per simulated minute), {ops} operations ({ops_ok} ok), {snapshots} snapshots made or loaded, {installs} fetched, {:.0} simulated s in {wall:.1} s ({:.0} simulated s per s)",
        range.start,
        range.end,
        elections as f64 * 60_000.0 / simulated_ms.max(1) as f64,
        simulated_ms as f64 / 1000.0,
        simulated_ms as f64 / 1000.0 / wall.max(1e-9),
    );
}

/// Runs seeds of a planted bug and returns those on which a checker fired.
pub fn caught(options: QuorumOptions, seeds: std::ops::Range<u64>) -> Vec<(u64, Vec<String>)> {
    seeds
        .filter_map(|seed| {
            let outcome = run_quorum_seed(seed, options);
            (!outcome.anomalies.is_empty()).then_some((seed, outcome.anomalies))
        })
        .collect()
}

/// Milliseconds from isolating the leader of a quiet three-voter quorum until another voter
/// leads, on seed `seed` (for the closing note's failover figures; no other fault).
pub fn measure_failover(seed: u64, raft: RaftConfig) -> Option<u64> {
    let outcome = std::thread::Builder::new()
        .name(format!("failover-seed-{seed}"))
        .spawn(move || {
            let mut runtime =
                madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
            runtime.set_time_limit(std::time::Duration::from_secs(SIMULATED_SECONDS_MAX));
            runtime.block_on(failover(raft))
        })
        .map(|thread| thread.join());
    match outcome {
        Ok(Ok(ms)) => ms,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(e) => panic!("seed {seed}: cannot start its simulation thread: {e}"),
    }
}

async fn failover(raft: RaftConfig) -> Option<u64> {
    let handle = madsim::runtime::Handle::current();
    let net = madsim::net::NetSim::current();
    let shared = Arc::new(Shared::default());
    let options = QuorumOptions {
        raft,
        ..QuorumOptions::new(3)
    };
    let mut nodes = BTreeMap::new();
    for id in 1..=options.voters {
        let disk = MemDisk::new(u64::try_from(id).unwrap_or(0));
        let shared = shared.clone();
        let node = handle
            .create_node()
            .name(format!("voter-{id}"))
            .ip(voter_ip(id))
            .init(move || voter(id, disk.clone(), Clock::new(), options, shared.clone(), 1))
            .build();
        nodes.insert(id, node);
    }
    // Let a leader settle, then isolate it.
    time::sleep(Duration::from_secs(10)).await;
    let leader = lock(&shared.handles)
        .iter()
        .find(|(_, (_, h))| h.status().is_leader)
        .map(|(id, _)| *id)?;
    let seen = lock(&shared.history).events.len();
    for (id, node) in &nodes {
        if *id != leader {
            net.clog_link(nodes[&leader].id(), node.id());
            net.clog_link(node.id(), nodes[&leader].id());
        }
    }
    let isolated_at = time::now();
    let mut result = None;
    while isolated_at.elapsed() < Duration::from_secs(60) {
        time::sleep(Duration::from_millis(1)).await;
        let history = lock(&shared.history);
        let elected = history.events[seen..]
            .iter()
            .any(|e| matches!(e, QuorumEvent::Leader { node, .. } if *node != leader));
        if elected {
            result = Some(isolated_at.elapsed().as_millis() as u64);
            break;
        }
    }
    lock(&shared.handles).clear();
    for node in nodes.values() {
        handle.kill(node.id());
    }
    time::sleep(Duration::from_millis(10)).await;
    result
}
