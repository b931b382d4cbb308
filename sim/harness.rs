//! One simulated run per seed: the broker on a simulated disk, workload clients on another
//! node, a nemesis in the supervisor (crashes with every disk mode, IO errors, clock jumps,
//! graceful restarts, clogged and slow links), then an offline read of the partition's log
//! from the disk and the spec's checkers.
//!
//! Everything that varies comes from the seed (madsim's generator, and generators seeded from
//! it), so a seed replays exactly: `MADSIM_TEST_SEED=<seed> MADSIM_TEST_NUM=1 cargo test
//! --features sim --test sim <test>`.

use crate::faults::{FaultPlanOptions, PointInjector};
use crate::groups::{self, GroupOptions};
use crate::node::{self, NeedsRestart, Stopped, NODE_PORT, PARTITION_DIR};
use crate::retention;
use crate::workload::{self, Workload};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use samsa::broker::config::{
    BrokerBugs, BrokerConfig, CleanupPolicy, Endpoint, KraftSettings, TopicConfig,
};
use samsa::log::{FlushPolicy, Log, LogConfig};
use samsa::rt::clock::Clock;
use samsa::rt::disk::{CrashMode, CrashReport, Disk, MemDisk};
use samsa::rt::fault::FaultPoint;
use samsa::rt::time::{self, Duration, Instant};
use samsa_spec::{
    check, CheckOptions, FinalLog, History, NodeEvent, Op, OpId, Outcome, ProcessId, Report,
};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Process id used for the node's and the nemesis's notes in the history.
pub const NODE_PROCESS: ProcessId = 0;
pub const NEMESIS_PROCESS: ProcessId = 1_000;

/// Simulated seconds after which a run counts as stuck.
pub const SIMULATED_SECONDS_MAX: u64 = 120;

/// What one run does.
#[derive(Clone, Debug)]
pub struct Options {
    pub flush: FlushPolicy,
    /// Crash modes the nemesis draws from for kills during the run and for the final crash.
    pub crash_modes: Vec<CrashMode>,
    /// Overrides the final crash (e.g. corruption of synced data).
    pub final_crash: Option<CrashMode>,
    pub io_errors: bool,
    pub clock_jumps: bool,
    /// Clogged links (requests stall, clients time out and reconnect) and latency spikes
    /// between the clients and the node.
    pub network_faults: bool,
    /// Graceful shutdowns (clean close, then restart) among the faults.
    pub graceful_restarts: bool,
    pub clients: u32,
    pub safety_ms: u64,
    pub heal_ms: u64,
    pub think_ms_max: u64,
    pub segment_bytes: u64,
    /// `log.retention.bytes` of the node (-1: no retention); retention by time stays off
    /// (the nemesis jumps the node's clock, which would make time retention legitimately
    /// delete anything).
    pub retention_bytes: i64,
    /// A deliberate bug for the retention checker's test: retention deletes one segment
    /// more than `retention_bytes` allows.
    pub retention_deletes_one_segment_too_many: bool,
    /// The broker loses its heartbeats to its controller for a while (see
    /// [`node::HeartbeatBlackout`]); the node then runs with a short broker session.
    pub heartbeat_blackout: Option<node::HeartbeatBlackout>,
    /// The workload produces as idempotent producers, retrying unknown outcomes.
    pub idempotent: bool,
    /// The broker checks idempotent producers' batches; off only to show the duplicate
    /// checker catches a broker without them.
    pub producer_state_checks: bool,
    /// Faults timed on events: the named fault points of `rt::fault` (see `faults`).
    pub fault_points: bool,
    /// The per-seed draw enables fault points; off, only `fault_points_always` fire (a
    /// planted bug's test that aims at one window and wants no other crash).
    pub drawn_fault_points: bool,
    /// The nemesis's faults on a timer (kills, IO errors, clock jumps, graceful restarts,
    /// clogged and slow links); off, only fault points fire.
    pub timed_faults: bool,
    /// Fault points enabled at the highest rate in every seed (a planted bug's window).
    pub fault_points_always: Vec<FaultPoint>,
    /// Deliberate bugs planted in the broker (planted-bug tests only).
    pub bugs: BrokerBugs,
    /// `log.scrubber.bytes.per.second` of the node (0: off).
    pub scrubber_bytes_per_second: u64,
    /// After some kills, one byte of a closed segment wholly below the checkpointed
    /// recovery point is flipped while the node is down (bit rot at rest that recovery does
    /// not look at): the scrubber's to find, the clients' CRC check's to refuse.
    pub corrupt_at_rest: bool,
    /// After the final crash, one byte of synced log data is flipped where this says.
    pub final_rot: Option<RotTarget>,
    /// Fetched records of at least this many bytes take the zero-copy path (file regions);
    /// smaller ones are copied. Low by default so that both paths run (fetches here are at
    /// most `workload::READ_BYTES_MAX`).
    pub zero_copy_bytes_min: usize,
    /// A consumer group consuming a topic of its own alongside (see `groups`); its checkers
    /// run over the history after the partition's.
    pub groups: Option<GroupOptions>,
    /// The simulated disk's sync latency range, in microseconds.
    pub disk_sync_us: (u64, u64),
    /// The workload's topic is compacted (`log.cleanup.policy=compact`) and its records are
    /// keyed by `workload::compaction_key`: the log cleaner rewrites it during the run and
    /// the checkers apply the spec's compaction rule.
    pub compaction: bool,
    /// With `compaction`: every record goes to one of the few hot keys, so whole batches
    /// (a producer's last among them) are soon cleaned away.
    pub compaction_hot_keys_only: bool,
    /// With `compaction`: one value in `workload::TOMBSTONE_ONE_IN` is written as a
    /// tombstone; the cleaner removes it once its delete horizon
    /// ([`DELETE_RETENTION_MS`]) has passed.
    pub tombstones: bool,
    /// Process 1 runs on a node of its own. Once, early in the run, the node's answers to
    /// it are cut (one way, [`STALL_MS`]) while the node is killed, every producer snapshot
    /// of the partition is damaged, and the node restarts: a retry of the batch the
    /// process is waiting on then reaches a node that rebuilt its producer state from the
    /// log alone (the case for keeping a producer's last batch when compaction empties it).
    pub stalled_producer: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            flush: FlushPolicy::SyncBeforeAck,
            crash_modes: vec![
                CrashMode::Process,
                CrashMode::PowerLossDropUnsynced,
                CrashMode::PowerLossRandomPrefix,
            ],
            final_crash: None,
            io_errors: true,
            clock_jumps: true,
            network_faults: true,
            graceful_restarts: true,
            clients: 4,
            safety_ms: 6_000,
            heal_ms: 2_000,
            think_ms_max: 6,
            segment_bytes: 8 * 1024,
            retention_bytes: 24 * 1024,
            retention_deletes_one_segment_too_many: false,
            heartbeat_blackout: None,
            idempotent: false,
            producer_state_checks: true,
            fault_points: true,
            drawn_fault_points: true,
            timed_faults: true,
            fault_points_always: Vec::new(),
            bugs: BrokerBugs::default(),
            zero_copy_bytes_min: 512,
            scrubber_bytes_per_second: 64 * 1024,
            corrupt_at_rest: false,
            final_rot: None,
            groups: None,
            disk_sync_us: (200, 2_000),
            compaction: false,
            compaction_hot_keys_only: false,
            tombstones: false,
            stalled_producer: false,
        }
    }
}

/// The history shared by every process of a run, stamped with simulated time.
#[derive(Clone)]
pub struct Recorder {
    history: Arc<Mutex<History>>,
    start: Instant,
    /// Fetch answers' (read op, log start offset, high watermark), for the retention check.
    starts: Arc<Mutex<Vec<(OpId, i64, i64)>>>,
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            history: Arc::new(Mutex::new(History::new())),
            start: time::now(),
            starts: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Notes the log start offset and high watermark a fetch (read op `op`) answered with.
    pub fn observe_start(&self, op: OpId, log_start_offset: i64, high_watermark: i64) {
        self.starts.lock().unwrap_or_else(|p| p.into_inner()).push((
            op,
            log_start_offset,
            high_watermark,
        ));
    }

    pub fn now_ns(&self) -> u64 {
        u64::try_from(time::now().duration_since(self.start).as_nanos()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn invoke(&self, process: ProcessId, op: Op) -> OpId {
        let now = self.now_ns();
        self.lock().invoke(now, process, op)
    }

    pub fn complete(&self, op: OpId, outcome: Outcome) {
        let now = self.now_ns();
        self.lock().complete(now, op, outcome);
    }

    pub fn note(&self, process: ProcessId, text: impl Into<String>) {
        let now = self.now_ns();
        self.lock().note(now, process, text);
    }

    /// Records what a group member reported about its membership.
    pub fn group(&self, process: ProcessId, event: samsa_spec::GroupEvent) {
        let now = self.now_ns();
        self.lock().group(now, process, event);
    }

    /// Records what the node reported about its log (opened, corruption found).
    pub fn node(&self, process: ProcessId, event: NodeEvent) {
        let now = self.now_ns();
        self.lock().node(now, process, event);
    }

    pub fn take(&self) -> History {
        std::mem::take(&mut *self.lock())
    }
}

/// Everything a run produced, for the checkers and for the determinism tests.
#[derive(Debug)]
pub struct SeedOutcome {
    pub seed: u64,
    pub history: History,
    pub nemesis: Vec<String>,
    pub crashes: Vec<CrashReport>,
    pub disk_digest: u64,
    pub final_log: FinalLog,
    pub report: Report,
    /// Successful appends during the healing phase (liveness).
    pub healed_appends: usize,
    /// How often each fault point fired.
    pub fault_points_fired: BTreeMap<FaultPoint, u32>,
    /// The log cleaner's first dirty offset of `__consumer_offsets-0` at the end (0: never
    /// cleaned, or no groups).
    pub offsets_first_dirty: i64,
}

/// `broker.session.timeout.ms` of a run with a heartbeat blackout.
pub const BLACKOUT_SESSION_TIMEOUT_MS: u64 = 1_000;
const NODE_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const CLIENT_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const STALLED_PRODUCER_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3));

/// `log.cleaner.delete.retention.ms` of the simulated node: a tombstone written in the first
/// part of a run may go before its end.
pub const DELETE_RETENTION_MS: u64 = 2_000;
/// How long the node's answers to the stalled producer are cut (`Options::stalled_producer`),
/// and when, into that window, the node is killed and restarted: the producer's retries
/// (a `workload::REQUEST_TIMEOUT_MS` each) must outlast it within
/// `workload::IDEMPOTENT_ATTEMPTS_MAX` attempts.
pub const STALL_MS: u64 = 2_800;
pub const STALL_KILL_AFTER_MS: u64 = 2_200;
pub const STALL_RESTART_AFTER_MS: u64 = 200;
const _: () = assert!(STALL_KILL_AFTER_MS + STALL_RESTART_AFTER_MS < STALL_MS);
const _: () = assert!(
    STALL_MS
        < (crate::workload::IDEMPOTENT_ATTEMPTS_MAX as u64 - 2)
            * crate::workload::REQUEST_TIMEOUT_MS
);

/// `log.cleaner.backoff.ms` of the simulated node.
pub const CLEANER_BACKOFF_MS: u64 = 150;
/// `log.cleaner.min.cleanable.ratio` of the simulated node.
pub const CLEANER_MIN_CLEANABLE_RATIO: f64 = 0.2;

/// The node's configuration: small segments and frequent checkpoints so that a short run
/// rolls segments and exercises recovery from checkpoints.
fn broker_config(options: &Options) -> BrokerConfig {
    let config = BrokerConfig {
        log_segment_bytes: options.segment_bytes,
        log_index_interval_bytes: 512,
        log_roll_ms: 2_000,
        log_flush: options.flush,
        log_flush_offset_checkpoint_interval_ms: 500,
        log_retention_bytes: options.retention_bytes,
        log_retention_ms: -1,
        log_retention_check_interval_ms: 200,
        producer_state_checks: options.producer_state_checks,
        bugs: options.bugs,
        fetch_zero_copy_bytes_min: options.zero_copy_bytes_min,
        log_scrubber_bytes_per_second: options.scrubber_bytes_per_second,
        // The cleaner wakes often and cleans at a low dirty ratio, so a ten-second run sees
        // many passes (on `__consumer_offsets` with groups, on the topic with compaction).
        log_cleaner_backoff_ms: CLEANER_BACKOFF_MS,
        log_cleaner_min_cleanable_ratio: CLEANER_MIN_CLEANABLE_RATIO,
        log_cleaner_delete_retention_ms: DELETE_RETENTION_MS as i64,
        log_cleanup_policy: if options.compaction {
            CleanupPolicy::Compact
        } else {
            CleanupPolicy::Delete
        },
        advertised_listeners: vec![Endpoint {
            name: "PLAINTEXT".to_string(),
            host: NODE_IP.to_string(),
            port: NODE_PORT,
        }],
        kraft: match options.heartbeat_blackout {
            // A blackout must outlast the session for the fencing to happen.
            Some(_) => KraftSettings {
                broker_session_timeout_ms: BLACKOUT_SESSION_TIMEOUT_MS,
                broker_heartbeat_interval_ms: BLACKOUT_SESSION_TIMEOUT_MS / 4,
                ..KraftSettings::default()
            },
            None => KraftSettings::default(),
        },
        ..BrokerConfig::default()
    };
    match options.groups {
        // The group topic is auto-created with `num.partitions` (the workload's one-partition
        // topic then has more, which it never uses).
        Some(_) => BrokerConfig {
            groups: groups::broker_settings(),
            num_partitions: groups::GROUP_PARTITIONS,
            ..config
        },
        None => config,
    }
}

/// How the workload keys its records under `options`.
fn keying(options: &Options) -> workload::Keying {
    if !options.compaction {
        return workload::Keying::BY_PROCESS;
    }
    let key_of: samsa_spec::KeyOf = if options.compaction_hot_keys_only {
        workload::compaction_hot_key
    } else {
        workload::compaction_key
    };
    let is_tombstone: samsa_spec::TombstoneOf = if options.tombstones {
        workload::tombstone_one_in_eight
    } else {
        workload::no_tombstones
    };
    workload::Keying {
        key_of: Some(key_of),
        is_tombstone,
    }
}

/// The settings the broker opens the workload's partition log with, for the offline read.
pub fn partition_log_config(broker: &BrokerConfig) -> LogConfig {
    // The broker's own read path: no CRC check on read; the offline reader verifies what it
    // is served, as the workload's clients do.
    TopicConfig::broker_defaults(broker).to_log_config(broker)
}

/// Runs one seed in a fresh simulation.
///
/// Each seed runs on a thread of its own, so that no per-thread state left by an earlier
/// simulation can change the next: std's `HashMap` draws its hasher keys once per thread
/// (madsim makes that draw deterministic only for the thread's first one) and madsim keeps a
/// node's sockets in a `HashMap`. (Process-wide state is out of reach of this: tokio's
/// per-thread generator is seeded from a global counter, which is why `rt::latch` replaces
/// `tokio::sync::watch`.)
#[allow(clippy::disallowed_methods)] // a fresh OS thread per simulation, outside any simulation
/// Runs the simulation `simulate` makes on a madsim runtime seeded with `seed`, on a thread
/// of its own (`{name}-{seed}`), and returns what it returned; a panic in it is re-raised.
/// A run lasts seconds of simulated time; one that goes on past `time_limit_s` is stuck
/// (madsim panics with the seed in the message).
pub fn on_seed_thread<T, F>(
    name: &str,
    seed: u64,
    time_limit_s: u64,
    simulate: impl FnOnce() -> F + Send + 'static,
) -> T
where
    T: Send + 'static,
    F: std::future::Future<Output = T> + 'static,
{
    let outcome = std::thread::Builder::new()
        .name(format!("{name}-{seed}"))
        .spawn(move || {
            let mut runtime =
                madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
            runtime.set_time_limit(std::time::Duration::from_secs(time_limit_s));
            runtime.block_on(simulate())
        })
        .map(|thread| thread.join());
    match outcome {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(e) => panic!("seed {seed}: cannot start its simulation thread: {e}"),
    }
}

pub fn run_seed(seed: u64, options: &Options) -> SeedOutcome {
    if std::env::var_os("SAMSA_LOG").is_some() {
        samsa::cli::init_tool_logging();
    }
    let options = options.clone();
    on_seed_thread("sim-seed", seed, SIMULATED_SECONDS_MAX, move || {
        simulate(seed, options)
    })
}

async fn simulate(seed: u64, options: Options) -> SeedOutcome {
    let handle = madsim::runtime::Handle::current();
    let mut rng = SmallRng::seed_from_u64(samsa::rt::rand::random_u64());
    let disk = MemDisk::new(rng.gen());
    disk.set_latency(50, options.disk_sync_us.0, options.disk_sync_us.1);
    let clock = Clock::new();
    let recorder = Recorder::new();
    let needs_restart: NeedsRestart = Arc::new(AtomicBool::new(false));
    let stopped: Stopped = Arc::new(AtomicBool::new(false));
    let config = broker_config(&options);
    let injector = Arc::new(PointInjector::new(
        rng.gen(),
        FaultPlanOptions {
            crash_modes: options.crash_modes.clone(),
            io_errors: options.io_errors,
            always: options.fault_points_always.clone(),
            drawn: options.drawn_fault_points,
        },
        recorder.clone(),
    ));
    if options.fault_points {
        disk.set_fault_injector(Some(injector.clone()));
    }

    let retention_bug = options.retention_deletes_one_segment_too_many;
    let blackout = options.heartbeat_blackout;
    let node = {
        let (disk, clock, recorder, needs_restart, stopped, config) = (
            disk.clone(),
            clock.clone(),
            recorder.clone(),
            Arc::clone(&needs_restart),
            Arc::clone(&stopped),
            config.clone(),
        );
        handle
            .create_node()
            .name("broker")
            .ip(NODE_IP)
            .init(move || {
                node::serve(
                    disk.clone(),
                    config.clone(),
                    clock.clone(),
                    recorder.clone(),
                    Arc::clone(&needs_restart),
                    Arc::clone(&stopped),
                    node::NodePlanted {
                        retention_deletes_one_segment_too_many: retention_bug,
                        heartbeat_blackout: blackout,
                    },
                )
            })
            .build()
    };
    injector.attach(disk.clone(), node.id());
    let clients = handle.create_node().name("clients").ip(CLIENT_IP).build();
    let stalled = options.stalled_producer.then(|| {
        handle
            .create_node()
            .name("stalled-producer")
            .ip(STALLED_PRODUCER_IP)
            .build()
    });
    let client_nodes: Vec<madsim::task::NodeId> = std::iter::once(clients.id())
        .chain(stalled.as_ref().map(|n| n.id()))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let mut joins = Vec::new();
    for process in 1..=options.clients {
        let client = Workload {
            process,
            bootstrap: SocketAddr::new(NODE_IP, NODE_PORT).to_string(),
            partition: 0,
            recorder: recorder.clone(),
            stop: Arc::clone(&stop),
            rng: SmallRng::seed_from_u64(rng.gen()),
            clock: clock.clone(),
            think_ms_max: options.think_ms_max,
            idempotent: options.idempotent,
            keying: keying(&options),
            acks: -1,
        };
        match &stalled {
            Some(node) if process == 1 => joins.push(node.spawn(client.run())),
            _ => joins.push(clients.spawn(client.run())),
        }
    }
    let phase = groups::Phase {
        quiet: Arc::new(AtomicBool::new(false)),
        stop: Arc::clone(&stop),
    };
    let group_run = options.groups.clone().map(|group_options| {
        clients.spawn(groups::run(
            SocketAddr::new(NODE_IP, NODE_PORT).to_string(),
            recorder.clone(),
            SmallRng::seed_from_u64(rng.gen()),
            clock.clone(),
            group_options,
            phase.clone(),
        ))
    });

    // The nemesis: faults at random moments during the safety phase.
    let mut nemesis = Vec::new();
    let mut crashes = Vec::new();
    let start = time::now();
    let mut next_fault = start + Duration::from_millis(rng.gen_range(50..500));
    let mut restart_at: Option<Instant> = None;
    let mut io_errors_until: Option<Instant> = None;
    let mut stopping_until: Option<Instant> = None;
    let mut unclog_at: Option<Instant> = None;
    let mut slow_until: Option<Instant> = None;
    let net = madsim::net::NetSim::current();
    let default_latency = madsim::net::Config::default().send_latency;
    let safety_end = start + Duration::from_millis(options.safety_ms);
    let event = |recorder: &Recorder, nemesis: &mut Vec<String>, text: String| {
        let stamp = time::now().duration_since(start).as_millis();
        recorder.note(NEMESIS_PROCESS, text.clone());
        nemesis.push(format!("{stamp} {text}"));
    };
    let mut corrupted_at_rest = false;
    // The stalled producer's window (`Options::stalled_producer`): cut, kill, restart, heal.
    let mut stall = stalled.as_ref().map(|node| Stall {
        node: node.id(),
        cut_at: start + Duration::from_millis(rng.gen_range(300..1_500)),
        step: StallStep::Cut,
    });
    let mut clock_forward_jumps: Vec<(u64, u64)> = Vec::new();
    injector.arm(true);
    while time::now() < safety_end {
        time::sleep(Duration::from_millis(5)).await;
        let now = time::now();
        // A fault point that crashed the node: restart it like after any kill.
        let (halted, reports, lines) = injector.take_events();
        crashes.extend(reports);
        let stamp = now.duration_since(start).as_millis();
        nemesis.extend(lines.into_iter().map(|line| format!("{stamp} {line}")));
        if halted {
            stopping_until = None;
            stopped.store(false, Ordering::Release);
            needs_restart.store(false, Ordering::Release);
            restart_at = Some(now + Duration::from_millis(rng.gen_range(0..400)));
            continue;
        }
        if restart_at.is_some_and(|at| now >= at) {
            restart_at = None;
            needs_restart.store(false, Ordering::Release);
            handle.restart(node.id());
            event(&recorder, &mut nemesis, "restart node".into());
        }
        if unclog_at.is_some_and(|at| now >= at) {
            unclog_at = None;
            net.unclog_link(clients.id(), node.id());
            net.unclog_link(node.id(), clients.id());
            event(&recorder, &mut nemesis, "unclog".into());
        }
        if let Some(stall) = stall.as_mut() {
            let elapsed_ms = now
                .checked_duration_since(stall.cut_at)
                .map(|d| d.as_millis() as u64);
            match (stall.step, elapsed_ms) {
                (StallStep::Cut, Some(_)) => {
                    net.clog_link(node.id(), stall.node);
                    stall.step = StallStep::Kill;
                    event(
                        &recorder,
                        &mut nemesis,
                        format!("cut node -> stalled producer for {STALL_MS} ms"),
                    );
                }
                // The kill waits for the node to be up (a fault point may have crashed it).
                (StallStep::Kill, Some(ms))
                    if ms >= STALL_KILL_AFTER_MS
                        && restart_at.is_none()
                        && stopping_until.is_none() =>
                {
                    handle.kill(node.id());
                    crashes.push(disk.crash(CrashMode::Process, &mut rng));
                    let damaged = damage_producer_snapshots(&disk, &mut rng);
                    restart_at = Some(now + Duration::from_millis(STALL_RESTART_AFTER_MS));
                    stall.step = StallStep::Heal;
                    event(
                        &recorder,
                        &mut nemesis,
                        format!("kill node (process): damaged producer snapshots {damaged:?}"),
                    );
                }
                (StallStep::Heal, Some(ms)) if ms >= STALL_MS => {
                    net.unclog_link(node.id(), stall.node);
                    stall.step = StallStep::Done;
                    event(
                        &recorder,
                        &mut nemesis,
                        "heal node -> stalled producer".into(),
                    );
                }
                _ => {}
            }
        }
        if slow_until.is_some_and(|until| now >= until) {
            slow_until = None;
            net.update_config(|c| c.send_latency = default_latency.clone());
            event(&recorder, &mut nemesis, "latency back to normal".into());
        }
        if io_errors_until.is_some_and(|until| now >= until) {
            io_errors_until = None;
            disk.set_io_error_rate(0);
            event(&recorder, &mut nemesis, "io errors off".into());
        }
        if let Some(deadline) = stopping_until {
            let clean = stopped.load(Ordering::Acquire);
            if clean || now >= deadline {
                // Kill whatever is left of the node (connection tasks); the disk keeps
                // everything, as after any process exit.
                stopping_until = None;
                handle.kill(node.id());
                stopped.store(false, Ordering::Release);
                restart_at = Some(now + Duration::from_millis(rng.gen_range(0..200)));
                let text = if clean {
                    "node stopped cleanly"
                } else {
                    "clean shutdown timed out: killed"
                };
                event(&recorder, &mut nemesis, text.into());
            }
            continue;
        }
        if restart_at.is_none() && needs_restart.load(Ordering::Acquire) {
            // The node lost its log to an IO error: it exits, as a broker process would.
            handle.kill(node.id());
            crashes.push(disk.crash(CrashMode::Process, &mut rng));
            restart_at = Some(now + Duration::from_millis(rng.gen_range(1..100)));
            event(
                &recorder,
                &mut nemesis,
                "node exited after an IO error".into(),
            );
            continue;
        }
        if now < next_fault || restart_at.is_some() {
            continue;
        }
        if !options.timed_faults {
            continue;
        }
        next_fault = now + Duration::from_millis(rng.gen_range(100..1_200));
        match rng.gen_range(0..12) {
            0..=5 => {
                let mode = options.crash_modes[rng.gen_range(0..options.crash_modes.len())];
                handle.kill(node.id());
                let report = disk.crash(mode, &mut rng);
                event(
                    &recorder,
                    &mut nemesis,
                    format!(
                        "kill node ({}): kept {}/{} unsynced writes, dropped {} bytes{}",
                        mode.name(),
                        report.kept_writes,
                        report.unsynced_writes,
                        report.dropped_bytes,
                        if report.torn { ", torn" } else { "" }
                    ),
                );
                crashes.push(report);
                if options.corrupt_at_rest && rng.gen_bool(0.5) {
                    if let Some((file, at)) =
                        corrupt_log(&disk, &mut rng, RotTarget::BelowRecoveryPoint)
                    {
                        corrupted_at_rest = true;
                        event(
                            &recorder,
                            &mut nemesis,
                            format!("bit rot at rest: {file} byte {at} (below the recovery point)"),
                        );
                    }
                }
                restart_at = Some(now + Duration::from_millis(rng.gen_range(0..400)));
            }
            6..=7 if options.io_errors => {
                let per_million = rng.gen_range(5_000..50_000);
                disk.set_io_error_rate(per_million);
                io_errors_until = Some(now + Duration::from_millis(rng.gen_range(20..300)));
                event(
                    &recorder,
                    &mut nemesis,
                    format!("io errors on ({per_million} per million)"),
                );
            }
            9 if options.graceful_restarts => {
                handle.send_ctrl_c(node.id());
                stopping_until = Some(now + Duration::from_millis(1_000));
                event(
                    &recorder,
                    &mut nemesis,
                    "graceful shutdown requested".into(),
                );
            }
            8 if options.clock_jumps => {
                let delta_ms = rng.gen_range(-600_000..600_000);
                clock.jump(delta_ms);
                if delta_ms > 0 {
                    clock_forward_jumps.push((recorder.now_ns(), delta_ms.unsigned_abs()));
                }
                event(&recorder, &mut nemesis, format!("clock jump {delta_ms} ms"));
            }
            10 if options.network_faults => {
                let clog_ms = rng.gen_range(50..1_500);
                net.clog_link(clients.id(), node.id());
                net.clog_link(node.id(), clients.id());
                unclog_at = Some(now + Duration::from_millis(clog_ms));
                event(
                    &recorder,
                    &mut nemesis,
                    format!("clog clients <-> node for {clog_ms} ms"),
                );
            }
            11 if options.network_faults => {
                let latency_ms_max = rng.gen_range(5..200);
                net.update_config(|c| {
                    c.send_latency = std::time::Duration::from_millis(1)
                        ..std::time::Duration::from_millis(latency_ms_max)
                });
                slow_until = Some(now + Duration::from_millis(rng.gen_range(100..1_000)));
                event(
                    &recorder,
                    &mut nemesis,
                    format!("latency up to {latency_ms_max} ms"),
                );
            }
            _ => {}
        }
    }

    // Healing: no more faults; the node must come back and serve.
    injector.arm(false);
    phase.quiet.store(true, Ordering::Release);
    let (halted, reports, lines) = injector.take_events();
    crashes.extend(reports);
    nemesis.extend(lines);
    if halted {
        restart_at = Some(time::now());
    }
    disk.set_io_error_rate(0);
    for &client_node in &client_nodes {
        net.unclog_link(client_node, node.id());
        net.unclog_link(node.id(), client_node);
    }
    net.update_config(|c| c.send_latency = default_latency.clone());
    if stopping_until.is_some() {
        handle.kill(node.id());
        stopped.store(false, Ordering::Release);
        restart_at = Some(time::now());
    }
    if restart_at.is_some() || needs_restart.load(Ordering::Acquire) {
        if restart_at.is_none() {
            handle.kill(node.id());
            crashes.push(disk.crash(CrashMode::Process, &mut rng));
        }
        needs_restart.store(false, Ordering::Release);
        handle.restart(node.id());
    }
    event(&recorder, &mut nemesis, "heal".into());
    let heal_start_ns = recorder.now_ns();
    // The supervisor goes on: a node that halts while healing (its start failed on an IO
    // error injected before the heal) is restarted, as during the safety phase.
    let heal_end = time::now() + Duration::from_millis(options.heal_ms);
    while time::now() < heal_end {
        time::sleep(Duration::from_millis(5)).await;
        if needs_restart.swap(false, Ordering::AcqRel) {
            handle.kill(node.id());
            crashes.push(disk.crash(CrashMode::Process, &mut rng));
            handle.restart(node.id());
            event(
                &recorder,
                &mut nemesis,
                "restart node (it halted while healing)".into(),
            );
        }
    }
    stop.store(true, Ordering::Release);
    for join in joins {
        let _ = join.await;
    }
    let group_watermarks = match group_run {
        Some(run) => run.await.ok(),
        None => None,
    };

    // The final crash, then read the disk offline as a fresh process would, with no faults.
    disk.set_fault_injector(None);
    injector.detach();
    let final_mode = options
        .final_crash
        .unwrap_or_else(|| options.crash_modes[rng.gen_range(0..options.crash_modes.len())]);
    handle.kill(node.id());
    let end_ns = recorder.now_ns();
    let final_report = disk.crash(final_mode, &mut rng);
    event(
        &recorder,
        &mut nemesis,
        format!(
            "final crash ({}){}",
            final_mode.name(),
            match &final_report.corrupted {
                Some((file, at)) => format!(": corrupted {file} at byte {at}"),
                None => String::new(),
            }
        ),
    );
    let mut corrupted = final_report.corrupted.is_some() || corrupted_at_rest;
    if let Some(target) = options.final_rot {
        if let Some((file, at)) = corrupt_log(&disk, &mut rng, target) {
            corrupted = true;
            event(
                &recorder,
                &mut nemesis,
                format!("final bit rot ({target:?}): {file} byte {at}"),
            );
        }
    }
    crashes.push(final_report);
    let final_log = read_offline(
        &disk,
        PARTITION_DIR,
        &partition_log_config(&config),
        &clock,
        &recorder,
        corrupted,
    )
    .await;
    let mut group_finals = BTreeMap::new();
    if let Some(watermarks) = &group_watermarks {
        for partition in 0..groups::GROUP_PARTITIONS {
            let dir = format!("{}-{partition}", groups::GROUP_TOPIC);
            let log = read_offline(
                &disk,
                &dir,
                &partition_log_config(&config),
                &clock,
                &recorder,
                corrupted,
            )
            .await;
            // A partition whose high watermark the end could not learn is judged on none
            // of its records: unseen then has nothing to say about it.
            let high_watermark = watermarks.get(&partition).copied().unwrap_or(0);
            group_finals.insert(
                samsa_spec::TopicPartition::new(groups::GROUP_TOPIC, partition),
                samsa_spec::FinalPartition {
                    log,
                    high_watermark,
                },
            );
        }
    }
    let starts = std::mem::take(&mut *recorder.starts.lock().unwrap_or_else(|p| p.into_inner()));
    let history = recorder.take();
    let healed_appends = history
        .operations()
        .iter()
        .filter(|op| {
            op.invoke_ns >= heal_start_ns && matches!(op.outcome, Some(Outcome::Appended { .. }))
        })
        .count();
    let mut report = check(
        &history,
        &final_log,
        &CheckOptions {
            synced_corruption_injected: corrupted,
            retention: options.retention_bytes >= 0,
            offsets_may_have_gaps: options.compaction,
            // Page-cache mode acknowledges before the sync: a power loss may take what the
            // high watermark covered.
            watermark_may_regress: matches!(options.flush, FlushPolicy::PageCache { .. })
                && options.crash_modes.iter().any(|m| m.loses_power()),
            // No consumer groups yet: check_groups is not run.
            group_state_may_regress: false,
            groups_stable_at_end: false,
            compaction: keying(&options)
                .key_of
                .map(|key_of| samsa_spec::Compaction {
                    key_of,
                    is_tombstone: keying(&options).is_tombstone,
                    delete_retention_ms: DELETE_RETENTION_MS,
                    clock_forward_jumps: clock_forward_jumps.clone(),
                    end_ns,
                }),
            // The single node's producers use acks=all.
            durability: samsa_spec::Durability::Committed,
        },
    );
    if options.groups.is_some() {
        samsa_spec::check_groups(
            &history,
            &group_finals,
            &CheckOptions {
                synced_corruption_injected: corrupted,
                retention: false,
                offsets_may_have_gaps: false,
                watermark_may_regress: false,
                group_state_may_regress: false,
                // The quiet phase let the group stabilise and drain every partition.
                groups_stable_at_end: group_watermarks.is_some(),
                compaction: None,
                durability: samsa_spec::Durability::Committed,
            },
            &mut report,
        );
    }
    // The node checks its log right after each open (`node::check_dense_at_open`): a log
    // end past the records on disk is a hole the next append would leave.
    for event in history.events() {
        if let samsa_spec::EventKind::Note(text) = &event.kind {
            if let Some(detail) = text.strip_prefix(node::OFFSET_GAP_AT_OPEN) {
                report.record(samsa_spec::AnomalyKind::OffsetGap, || {
                    format!("at open: {detail}")
                });
            }
        }
    }
    if options.retention_bytes >= 0 && !corrupted {
        retention::check(
            &history,
            &starts,
            &final_log,
            options.retention_bytes.unsigned_abs(),
            &mut report,
        );
    }
    SeedOutcome {
        seed,
        history,
        nemesis,
        crashes,
        disk_digest: disk.digest(),
        final_log,
        report,
        healed_appends,
        fault_points_fired: injector.fired(),
        offsets_first_dirty: disk
            .file_image(&format!(
                "__consumer_offsets-0/{}",
                samsa::log::cleaner::CLEANER_CHECKPOINT_FILE
            ))
            .and_then(|bytes| samsa::log::cleaner::CleanerCheckpoint::decode(&bytes).ok())
            .map_or(0, |c| c.first_dirty_offset),
    }
}

/// Where the stalled producer's window is (`Options::stalled_producer`).
struct Stall {
    node: madsim::task::NodeId,
    cut_at: Instant,
    step: StallStep,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum StallStep {
    Cut,
    Kill,
    Heal,
    Done,
}

/// Flips one byte of every durable producer snapshot of the workload's partition (each is
/// CRC-checked, so the open removes it and rebuilds the producer state from the log);
/// returns the files.
fn damage_producer_snapshots(disk: &MemDisk, rng: &mut SmallRng) -> Vec<String> {
    let prefix = format!("{PARTITION_DIR}/");
    let mut damaged = Vec::new();
    for file in disk.durable_file_names() {
        let is_snapshot = file
            .strip_prefix(&prefix)
            .is_some_and(|name| samsa::log::producer_snapshot::parse_snapshot_name(name).is_some());
        let len = disk.synced_len(&file).unwrap_or(0);
        if !is_snapshot || len == 0 {
            continue;
        }
        let at = rng.gen_range(0..len);
        let mask: u8 = rng.gen_range(1..=255);
        if disk.corrupt_synced_byte(&file, at, mask) {
            damaged.push(file);
        }
    }
    damaged
}

/// Bytes at the end of a segment that recovery reads even when it trusts the segment (the
/// tail walk from the last index entry): bit rot there is found at open, not by the scrubber.
const TAIL_WALK_BYTES: u64 = 4 * 512;

/// Where aimed corruption of synced data goes, relative to the checkpointed recovery point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RotTarget {
    /// A closed segment wholly below it, away from the segment's tail: recovery trusts it
    /// without reading it, so only the scrubber or a client's CRC check can find the damage.
    BelowRecoveryPoint,
    /// A batch at or above it: recovery must verify it and truncate there.
    AboveRecoveryPoint,
}

/// Flips one byte inside the records of one batch (covered only by the CRC) of the
/// partition's log where `target` says, if there is such a batch; returns the file and byte.
///
/// Below the recovery point, the choice rests on what a power loss would keep (the synced
/// checkpoint and the synced names): a later crash may take an unsynced name or checkpoint,
/// and a segment that then holds the recovery point is scanned, which would find the damage
/// and truncate there.
fn corrupt_log(disk: &MemDisk, rng: &mut SmallRng, target: RotTarget) -> Option<(String, u64)> {
    corrupt_log_in(disk, rng, target, PARTITION_DIR)
}

/// [`corrupt_log`] in the partition directory `dir`.
pub fn corrupt_log_in(
    disk: &MemDisk,
    rng: &mut SmallRng,
    target: RotTarget,
    dir: &str,
) -> Option<(String, u64)> {
    let checkpoint_path = format!("{dir}/recovery-point-offset-checkpoint");
    let checkpoint = match target {
        RotTarget::BelowRecoveryPoint => disk.durable_file_image(&checkpoint_path)?,
        RotTarget::AboveRecoveryPoint => disk.file_image(&checkpoint_path)?,
    };
    let recovery_point: i64 = String::from_utf8_lossy(&checkpoint)
        .lines()
        .nth(1)?
        .trim()
        .parse()
        .ok()?;
    let names = match target {
        RotTarget::BelowRecoveryPoint => disk.durable_file_names(),
        RotTarget::AboveRecoveryPoint => disk.file_names(),
    };
    let logs = node::segment_logs_in(names, dir);
    // (file, start, end) of each batch's records that the target allows.
    let mut payloads: Vec<(String, u64, u64)> = Vec::new();
    for (i, (_, file)) in logs.iter().enumerate() {
        let next_base = logs.get(i + 1).map(|(b, _)| *b);
        let whole_segment_below = next_base.is_some_and(|b| b <= recovery_point);
        if target == RotTarget::BelowRecoveryPoint && !whole_segment_below {
            continue;
        }
        let image = bytes::Bytes::from(disk.file_image(file)?);
        // Recovery walks a trusted segment's tail (from its last index entries): leave it.
        let tail_from = (image.len() as u64).saturating_sub(TAIL_WALK_BYTES);
        let synced = disk.synced_len(file).unwrap_or(0);
        let mut position = 0u64;
        for (header, batch) in samsa::protocol::record_batch::batches(image).map_while(Result::ok) {
            let len = batch.len() as u64;
            let records_at = position + samsa::protocol::record_batch::BATCH_HEADER_LEN as u64;
            let allowed = match target {
                RotTarget::BelowRecoveryPoint => position + len <= tail_from,
                RotTarget::AboveRecoveryPoint => header.base_offset >= recovery_point,
            };
            if allowed && records_at < position + len && position + len <= synced {
                payloads.push((file.clone(), records_at, position + len));
            }
            position += len;
        }
    }
    if payloads.is_empty() {
        return None;
    }
    let (file, from, to) = payloads[rng.gen_range(0..payloads.len())].clone();
    let at = rng.gen_range(from..to);
    let mask: u8 = rng.gen_range(1..=255);
    disk.corrupt_synced_byte(&file, at, mask)
        .then_some((file, at))
}

/// Recovers the log from the crashed disk and reads every record, noting where (if anywhere)
/// corruption was detected.
pub async fn read_offline(
    disk: &MemDisk,
    dir: &str,
    config: &LogConfig,
    clock: &Clock,
    recorder: &Recorder,
    corruption_injected: bool,
) -> FinalLog {
    let mut final_log = FinalLog::default();
    let (log, report) =
        match Log::open(Disk::mem(disk.clone()), dir, config.clone(), clock.clone()).await {
            Ok(opened) => opened,
            Err(e) => {
                recorder.note(NODE_PROCESS, format!("offline open failed: {e}"));
                final_log.corruption_detected_at = Some(0);
                return final_log;
            }
        };
    if let Some(t) = &report.truncated {
        recorder.note(
            NODE_PROCESS,
            format!(
                "offline recovery truncated at offset {}: {}",
                t.offset, t.reason
            ),
        );
        final_log.corruption_detected_at = Some(t.offset);
        final_log.corruption_reported_at = Some(t.offset);
    }
    final_log.recovery_point = report.recovery_point;
    final_log.log_start_offset = log.log_start_offset().await;
    drop(log);
    // The records are read from the segment files recovery left, not through the log's read
    // path: the checkers judge what is on the disk (a hole in the offsets, a corrupt batch
    // recovery kept), which the log's own reads would refuse to serve.
    let mut offset = final_log.log_start_offset;
    for (_, path) in node::segment_logs_in(disk.file_names(), dir) {
        let image = bytes::Bytes::from(disk.file_image(&path).unwrap_or_default());
        let (mut records, mut bad) = workload::decode_prefix(image, final_log.log_start_offset);
        if corruption_injected {
            // A flipped byte in a base offset (outside the CRC) passes the CRC check; a reader
            // that follows the offsets, as the log's own reads do, sees the batch jump.
            let mut next = offset;
            let jump = records.iter().position(|&(o, _)| {
                let jumped = o != next && next > final_log.log_start_offset;
                next = o + 1;
                jumped
            });
            if let Some(at) = jump {
                let claimed = records[at].0;
                let continues_at = if at == 0 {
                    offset
                } else {
                    records[at - 1].0 + 1
                };
                records.truncate(at);
                bad = Some(workload::Undecodable::Corrupt {
                    offset: continues_at,
                    reason: format!(
                        "a batch claims offset {claimed} where the log continues at {continues_at}"
                    ),
                });
            }
        }
        if let Some(&(last, _)) = records.last() {
            offset = last + 1;
        }
        final_log.records.extend(records);
        match bad {
            None => {}
            Some(workload::Undecodable::Corrupt { offset: at, reason }) => {
                // Recovery kept a batch that fails the reader's check.
                recorder.note(
                    NODE_PROCESS,
                    format!("offline read: {path} holds a corrupt batch at {at}: {reason}"),
                );
                final_log.corrupt_served_at = Some(at);
                let at = final_log.corruption_detected_at.map_or(at, |c| c.min(at));
                final_log.corruption_detected_at = Some(at);
                break;
            }
            Some(workload::Undecodable::Malformed(reason)) => {
                recorder.note(
                    NODE_PROCESS,
                    format!("offline read: {path} undecodable after {offset}: {reason}"),
                );
                final_log.corruption_detected_at.get_or_insert(offset);
                break;
            }
        }
    }
    final_log
}

/// The seeds a suite runs: `MADSIM_TEST_SEED` (default 1) and `MADSIM_TEST_NUM` (default
/// `default_count`).
pub fn seeds(default_count: u64) -> std::ops::Range<u64> {
    let env = |key: &str| std::env::var(key).ok().and_then(|v| v.parse::<u64>().ok());
    let base = env("MADSIM_TEST_SEED").unwrap_or(1);
    let count = env("MADSIM_TEST_NUM").unwrap_or(default_count);
    base..base + count
}

/// Runs a suite's seeds and panics with the anomalies and the replay command of the first
/// seed that fails a check. Returns how often each fault point fired over all the seeds.
pub fn run_suite(
    test_name: &str,
    options: &Options,
    default_count: u64,
) -> BTreeMap<FaultPoint, u64> {
    let range = seeds(default_count);
    // Real elapsed time of the whole suite, for the report: outside any simulation.
    #[allow(clippy::disallowed_methods)]
    let began = std::time::Instant::now();
    let (mut ops, mut crashes, mut clean_closes, mut clean_opens) =
        (0usize, 0usize, 0usize, 0usize);
    let verbose = std::env::var_os("SAMSA_SIM_VERBOSE").is_some();
    let mut fired: BTreeMap<FaultPoint, u64> = BTreeMap::new();
    let (mut rot, mut scrubbed, mut corrupt_reads) = (0usize, 0usize, 0usize);
    for seed in range.clone() {
        if verbose {
            eprintln!("{test_name}: seed {seed}");
        }
        let outcome = run_seed(seed, options);
        for (point, count) in &outcome.fault_points_fired {
            *fired.entry(*point).or_insert(0) += u64::from(*count);
        }
        ops += outcome.report.ops_ok + outcome.report.ops_failed + outcome.report.ops_unknown;
        crashes += outcome.crashes.len();
        for event in outcome.history.events() {
            match &event.kind {
                samsa_spec::EventKind::Note(text) => {
                    clean_closes += usize::from(text.starts_with("node: closed the log cleanly"));
                    clean_opens += usize::from(text.contains("(clean true"));
                    rot += usize::from(text.starts_with("bit rot at rest"));
                }
                samsa_spec::EventKind::Node(NodeEvent::CorruptionFound { .. }) => scrubbed += 1,
                samsa_spec::EventKind::Complete {
                    outcome: Outcome::CorruptRead { .. },
                    ..
                } => corrupt_reads += 1,
                _ => {}
            }
        }
        let mut problems = Vec::new();
        if !outcome.report.is_valid() {
            problems.push(outcome.report.summary());
        }
        if outcome.healed_appends == 0 {
            problems.push("liveness: no append succeeded during the healing phase".to_string());
        }
        if !problems.is_empty() {
            let dump = dump_history(test_name, &outcome);
            let fired: Vec<String> = outcome
                .fault_points_fired
                .iter()
                .map(|(p, n)| format!("{p} {n}"))
                .collect();
            panic!(
                "{test_name}: seed {seed} failed:\n{}\nfault points fired: {}\nnemesis:\n  {}\nhistory written to {dump}\nreplay: MADSIM_TEST_SEED={seed} MADSIM_TEST_NUM=1 cargo test --features sim --test sim {test_name} -- --exact",
                problems.join("\n"),
                fired.join(", "),
                outcome.nemesis.join("\n  ")
            );
        }
    }
    eprintln!(
        "{test_name}: {} seeds ({}..{}) passed: {ops} operations, {crashes} crashes, {clean_closes} clean shutdowns, {clean_opens} clean-marker recoveries, {:.1} s",
        range.end - range.start,
        range.start,
        range.end,
        began.elapsed().as_secs_f64()
    );
    if rot + scrubbed + corrupt_reads > 0 {
        eprintln!(
            "{test_name}: {rot} bit rots at rest, {scrubbed} found by the scrubber, {corrupt_reads} corrupt batches served and refused by the readers' CRC checks"
        );
    }
    let table: Vec<String> = FaultPoint::ALL
        .iter()
        .map(|p| format!("{} {}", p.name(), fired.get(p).copied().unwrap_or(0)))
        .collect();
    eprintln!("{test_name}: fault points fired: {}", table.join(", "));
    fired
}

/// Writes a failing seed's history next to the build output for inspection.
#[allow(clippy::disallowed_methods)] // the harness's report, written after the simulation ended
pub fn dump_history(test_name: &str, outcome: &SeedOutcome) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("sim-failures");
    let path = dir.join(format!("{test_name}-{}.history", outcome.seed));
    let text = format!(
        "{}\n--- nemesis\n{}\n--- final log: {} records, corruption detected at {:?}\n",
        outcome.history.render(),
        outcome.nemesis.join("\n"),
        outcome.final_log.records.len(),
        outcome.final_log.corruption_detected_at
    );
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text)) {
        Ok(()) => path.display().to_string(),
        Err(e) => format!("(could not write {}: {e})", path.display()),
    }
}
