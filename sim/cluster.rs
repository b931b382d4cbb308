//! The sharded cluster under madsim (issues 14, 15 and 16): three (or
//! `ClusterOptions::nodes`) combined nodes (`process.roles=broker,controller`, the real
//! `samsa::broker::node`), each one voter of the
//! metadata quorum and one broker, each on its own simulated disk and address. The workload's
//! topic (`sim`, `PARTITIONS` partitions, auto-created through whichever broker a client
//! reaches first) is spread over the three brokers, one replica per partition. One producing
//! and reading process per partition (Samsa's Rust client, routed to each partition's leader
//! by Metadata), an admin process that creates and deletes topics through every broker in
//! turn (creating, deleting and changing the configs of topics), and a consumer group
//! (`groups`' workload: three members that crash and pause past their sessions, and its
//! producer, on a topic of its own; FindCoordinator goes to each broker in turn and the
//! coordinator is the leader of the one `__consumer_offsets` partition, which unloads and
//! reloads the groups as fencing takes its leadership away and gives it back) run while the
//! nemesis:
//! - kills a node (process crash or power loss of its disk) and restarts it;
//! - cuts a node off from the other two (it stays reachable from the clients): its controller
//!   loses the quorum, its broker is fenced once its session expires;
//! - mutes a broker's heartbeats while it still replicates the metadata log, so that it learns
//!   it is fenced from its own applied image (where a broker that keeps serving is caught);
//! - clogs the clients' link to a node;
//! - stops a node gracefully (SIGTERM: a controlled shutdown, logs closed cleanly) and
//!   restarts it;
//! - raises every link's latency (up to 50 ms) for a while;
//! - makes a node's disk fail some of its operations for a while (a node whose log directory
//!   fails halts and is restarted, as a supervisor would);
//! - jumps a node's wall clock by up to ±10 minutes;
//! - pauses a node (a long GC, a stopped VM) and resumes it;
//! - cuts a node's links to every other node in one direction only;
//! - with five or more nodes (`ClusterOptions::nodes`), kills two nodes at once, so that a
//!   partition may lose two of its three replicas together (in page-cache mode at most one
//!   of them loses power).
//!
//! The checkers, per partition (each partition is one history of its own): the data checkers
//! of `samsa_spec::check` against an offline read of the partition's directory on its one
//! replica's disk, with that node's opens and applied images (ImageApplied: whether it leads
//! the partition) in the partition's history, so served-while-not-leader judges the node the
//! data lives on. Under sync-before-ack nothing acknowledged may be lost, whatever the crash.
//! The admin checker: a topic whose creation was acknowledged by any broker exists in the
//! final image unless a deletion of it was attempted; a topic whose deletion was acknowledged
//! does not (names are never reused); an acknowledged config change (one per topic) is in
//! the final image unless a deletion was attempted. The group checkers (`check_groups`:
//! split-assignment, generation-regress, zombie-commit, lost-commit, commit-regress, and
//! unseen after the healing phase) over the group's history, against its topic's partitions
//! read offline from their replicas' disks. The quorum checker (`samsa_spec::quorum`:
//! election-safety, epoch-regress, committed-diverge, truncated-committed, lost-committed,
//! no-leader, not-converged) over the metadata quorum: each replica's epochs, leaderships
//! and truncations, every committed entry each node read, and each replica's log after
//! healing. The registration checker: no two starts
//! of a node (two live brokers of one id) use one incarnation id. Liveness: after healing every partition accepts an
//! append, and every broker answered admin requests.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use samsa::broker::config::{BrokerBugs, BrokerConfig, Endpoint, GroupSettings, KraftSettings};
use samsa::broker::metadata_publisher::PublishObserver;
use samsa::broker::node::{Node, NodeObservers};
use samsa::broker::server::Serving;
use samsa::client::connection::{Connection, ConnectionLimits};
use samsa::controller::handlers::elect_leaders::ELECTION_TYPE_PREFERRED;
use samsa::controller::image::MetadataImage;
use samsa::log::FlushPolicy;
use samsa::protocol::create_topics::{CreatableTopic, CreateTopicsRequest, CreateTopicsResponse};
use samsa::protocol::delete_topics::{DeleteTopicState, DeleteTopicsRequest, DeleteTopicsResponse};
use samsa::protocol::elect_leaders::{ElectLeadersRequest, ElectLeadersResponse};
use samsa::protocol::incremental_alter_configs::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use samsa::protocol::wire::Uuid;
use samsa::raft::driver::{DriverError, EventSink, RaftHandle};
use samsa::rt::clock::Clock;
use samsa::rt::disk::{CrashMode, Disk, MemDisk};
use samsa::rt::net::TcpListener;
use samsa::rt::time::{self, Duration, Instant};
use samsa_spec::quorum::{self, Entry, QuorumEnd, QuorumEvent, QuorumHistory};
use samsa_spec::{AnomalyKind, CheckOptions, NodeEvent, Outcome, Report};

use crate::groups::{self, GroupOptions};
use crate::harness::{corrupt_log_in, partition_log_config, read_offline, Recorder, RotTarget};
use crate::node::TOPIC;
use crate::workload::{Keying, Workload};

/// Nodes of the cluster by default, each a voter and a broker.
pub const NODES: i32 = 3;
/// The most nodes a run may have (their addresses are 10.0.1.1 up to this).
pub const NODES_MAX: i32 = 7;
const _: () = assert!(NODES <= NODES_MAX);
/// Partitions of the workload's topic (`num.partitions`): two per broker when spread.
pub const PARTITIONS: i32 = 6;
const CLIENT_PORT: u16 = 9092;
const CONTROLLER_PORT: u16 = 9093;
/// The session after which a silent broker is fenced: short, so that the nemesis' windows
/// fence brokers within a run.
const SESSION_TIMEOUT_MS: u64 = 1_500;
const HEARTBEAT_INTERVAL_MS: u64 = 300;
/// Bytes one read of a node's committed metadata log asks for.
const COMMITTED_READ_BYTES: usize = 64 << 10;
/// How long the end waits for the metadata quorum's replicas to agree, and how often it looks.
const QUORUM_SETTLE_MS: u64 = 3_000;
const QUORUM_SETTLE_POLL_MS: u64 = 20;
/// The least time between two restarts of a halted node.
const RESTART_BACKOFF_MS: u64 = 200;
/// How often a node's mute switch is looked at.
const MUTE_POLL_MS: u64 = 20;
/// The admin process's request timeout: a forwarded request may wait for a new controller.
const ADMIN_TIMEOUT_MS: u64 = 3_000;
/// Topics the admin process creates per run, at most (each name once).
const ADMIN_TOPICS_MAX: u32 = 200;
/// The process id of the admin process (the workload's are 1..=PARTITIONS).
const ADMIN_PROCESS: u32 = 100;

fn node_ip(id: i32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 1, id as u8))
}
const CLIENT_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 2, 1));

fn client_address(id: i32) -> String {
    SocketAddr::new(node_ip(id), CLIENT_PORT).to_string()
}

/// What one run does.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Nodes, each a voter and a broker (at most `NODES_MAX`). With five or more, the
    /// nemesis also kills two nodes at once (a majority of the voters stays).
    pub nodes: i32,
    pub safety_ms: u64,
    pub heal_ms: u64,
    pub think_ms_max: u64,
    /// The crash modes a node's kill draws from.
    pub crash_modes: Vec<CrashMode>,
    /// Kills, cuts, mutes and clogs at random moments during the safety phase.
    pub nemesis: bool,
    /// Mute one broker's heartbeats from `after_ms` for `for_ms` (the fencing window the
    /// planted bug needs), besides the nemesis.
    pub mute: Option<(u64, u64)>,
    /// From `after_ms`, a planted sequence that leaves leaders alone in their ISRs and then
    /// fails them (the window a leader acknowledging below `min.insync.replicas` needs, five
    /// nodes or more): two nodes cut off from the others for `LONE_LEADER_CUT_MS`, so that
    /// their partitions' ISRs shrink to a lone leader; then, as they come back, a third node
    /// killed, restarted `LONE_LEADER_KILL_MS` later, so that the ELR elects one of the two.
    pub lone_leader: Option<u64>,
    /// The nemesis also rots one replica's synced log data (a minority: one follower of a
    /// workload partition at a time): a closed segment below its recovery point while it
    /// runs (its scrubber must find it), or a batch above its recovery point while it is
    /// down (its recovery must find it). The follower truncates there and fetches the
    /// records again from the leader, so nothing acknowledged is lost.
    pub minority_corruption: bool,
    pub bugs: BrokerBugs,
    /// Sync before ack (the default), or a page-cache mode for the checker's broken option.
    pub flush: FlushPolicy,
    /// A consumer group (`groups`'s workload: members that crash and pause, a producer)
    /// consuming its own topic, spread like the others, with its coordinator on the leader of
    /// the one `__consumer_offsets` partition; judged by `check_groups`.
    pub groups: Option<GroupOptions>,
    /// Partition replication (issue 16): the workload's topic gets this many replicas per
    /// partition, with this `min.insync.replicas`; `None`: one replica each.
    pub replication: Option<ReplicationOptions>,
    /// The crash modes of the final crash of every node at once (`None`: `crash_modes`). A
    /// page-cache suite promises nothing when every node loses power together.
    pub final_crash_modes: Option<Vec<CrashMode>>,
    /// The workload producers' `acks`: -1 (all, the default) or 1 (the leader's alone, whose
    /// loss at a failover Kafka allows: the checkers count it as allowed, see
    /// `samsa_spec::Durability`).
    pub acks: i16,
    /// `unclean.leader.election.enable` on every broker (the controller's default): a
    /// partition whose ISR and ELR are gone elects any live replica, and loses what that
    /// replica lacks, which the checkers count as allowed.
    pub unclean_leader_election: bool,
    /// `auto.leader.rebalance.enable` with this `leader.imbalance.check.interval.ms`: the
    /// controller moves leaders back to their preferred replicas while the nemesis runs.
    pub auto_leader_rebalance_ms: Option<u64>,
    /// A client asks for preferred-leader elections of every partition (ElectLeaders, through
    /// each node in turn) every `ELECTOR_PAUSE_MS` while the nemesis runs.
    pub preferred_elections: bool,
}

impl ClusterOptions {
    /// What an acknowledgement and a read prove under these options.
    pub fn durability(&self) -> samsa_spec::Durability {
        if self.unclean_leader_election {
            samsa_spec::Durability::UncleanElections
        } else if self.acks == 1 {
            samsa_spec::Durability::LeaderAcknowledged
        } else {
            samsa_spec::Durability::Committed
        }
    }
}

/// The replicated suites' settings.
#[derive(Clone, Copy, Debug)]
pub struct ReplicationOptions {
    pub factor: i16,
    pub min_insync_replicas: i32,
}

/// `replica.lag.time.max.ms` in the simulation: short enough that a follower cut off leaves
/// the ISR within a safety phase, longer than the fetch wait and a few slow links.
const REPLICA_LAG_TIME_MAX_MS: u64 = 2_000;
/// `replica.fetch.wait.max.ms` and `replica.fetch.backoff.ms` in the simulation.
const REPLICA_FETCH_WAIT_MAX_MS: u64 = 200;
const REPLICA_FETCH_BACKOFF_MS: u64 = 100;

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            nodes: NODES,
            safety_ms: 8_000,
            heal_ms: 6_000,
            think_ms_max: 40,
            crash_modes: vec![CrashMode::Process, CrashMode::PowerLossDropUnsynced],
            nemesis: true,
            mute: None,
            lone_leader: None,
            minority_corruption: false,
            bugs: BrokerBugs::default(),
            flush: FlushPolicy::SyncBeforeAck,
            groups: Some(GroupOptions::default()),
            replication: None,
            final_crash_modes: None,
            acks: -1,
            unclean_leader_election: false,
            auto_leader_rebalance_ms: None,
            preferred_elections: false,
        }
    }
}

/// What the consumer group got done in a run (so that a suite shows its checkers judged
/// something).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupWork {
    pub joins: usize,
    pub records_delivered: usize,
    pub commits_acknowledged: usize,
}

impl GroupWork {
    fn of(history: &samsa_spec::History) -> GroupWork {
        let mut work = GroupWork::default();
        for op in history.operations() {
            match &op.outcome {
                Some(Outcome::Joined { .. }) => work.joins += 1,
                Some(Outcome::Read { records, .. }) => work.records_delivered += records.len(),
                Some(Outcome::Committed { results }) => {
                    work.commits_acknowledged += usize::from(
                        results
                            .iter()
                            .any(|(_, r)| *r == samsa_spec::CommitResult::Acknowledged),
                    )
                }
                _ => {}
            }
        }
        work
    }

    fn add(&mut self, other: GroupWork) {
        self.joins += other.joins;
        self.records_delivered += other.records_delivered;
        self.commits_acknowledged += other.commits_acknowledged;
    }
}

/// What a run produced.
pub struct ClusterOutcome {
    /// Each partition's report (a partition that never existed has none).
    pub reports: BTreeMap<i32, Report>,
    /// The consumer group's report (`check_groups`), when the run had one.
    pub group: Option<Report>,
    /// What the group did: joins, records delivered to members, commits acknowledged.
    pub group_work: GroupWork,
    /// Metadata quorum leaderships won over the run (the quorum checker's Leader events).
    pub elections: usize,
    /// Problems outside the data checkers (admin, liveness).
    pub problems: Vec<String>,
    pub nemesis: Vec<String>,
    /// Admin requests each broker answered with success.
    pub admin_ok_by_node: BTreeMap<i32, u64>,
    pub ops: usize,
    /// Partitions a preferred election through ElectLeaders gave a new leader (the
    /// `preferred_elections` option).
    pub preferred_elected: u64,
    /// Leaderships of workload partitions the nodes applied with the leader RECOVERING
    /// (KIP-704): unclean elections, and KIP-966's recovery by the last known leader when
    /// the ELR is empty; either may lose committed records.
    pub recovering_elections: usize,
}

impl ClusterOutcome {
    /// Records lost where the suite's durability allows it (acks=1, unclean elections), and
    /// the reads the final logs contradict, over every partition.
    pub fn allowed_losses(&self) -> (usize, usize) {
        self.reports.values().fold((0, 0), |(l, r), report| {
            (l + report.losses_allowed, r + report.reads_contradicted)
        })
    }

    pub fn has(&self, kind: AnomalyKind) -> bool {
        self.reports
            .values()
            .chain(&self.group)
            .any(|r| r.has(kind))
    }

    pub fn is_valid(&self) -> bool {
        self.problems.is_empty()
            && self
                .reports
                .values()
                .chain(&self.group)
                .all(Report::is_valid)
    }

    pub fn summary(&self) -> String {
        let mut out: Vec<String> = self
            .reports
            .iter()
            .filter(|(_, r)| !r.is_valid())
            .map(|(p, r)| format!("partition {p}: {}", r.summary()))
            .collect();
        if let Some(group) = self.group.as_ref().filter(|r| !r.is_valid()) {
            out.push(format!("group: {}", group.summary()));
        }
        out.extend(self.problems.iter().cloned());
        out.join("\n")
    }
}

/// The node's config: a combined node, one of `NODES` voters.
fn node_config(id: i32, options: &ClusterOptions) -> BrokerConfig {
    let voters: BTreeMap<i32, String> = (1..=options.nodes)
        .map(|v| (v, SocketAddr::new(node_ip(v), CONTROLLER_PORT).to_string()))
        .collect();
    let (factor, min_insync_replicas) = options
        .replication
        .map_or((1, 1), |r| (r.factor, r.min_insync_replicas));
    BrokerConfig {
        node_id: id,
        default_replication_factor: factor,
        min_insync_replicas,
        replication: samsa::broker::config::ReplicationSettings {
            replica_lag_time_max_ms: REPLICA_LAG_TIME_MAX_MS,
            replica_fetch_wait_max_ms: REPLICA_FETCH_WAIT_MAX_MS,
            replica_fetch_backoff_ms: REPLICA_FETCH_BACKOFF_MS,
            replica_socket_timeout_ms: 2_000,
            replica_high_watermark_checkpoint_interval_ms: 500,
            ..Default::default()
        },
        // Small segments under minority corruption, so that closed segments lie below the
        // recovery point for the rot to reach (the workload writes ~15 KB a partition).
        log_segment_bytes: if options.minority_corruption {
            4 * 1024
        } else {
            16 * 1024
        },
        log_index_interval_bytes: 512,
        // ... and a recovery point checkpointed often, so that segments fall below it.
        log_flush_offset_checkpoint_interval_ms: if options.minority_corruption {
            500
        } else {
            BrokerConfig::default().log_flush_offset_checkpoint_interval_ms
        },
        log_flush: options.flush,
        num_partitions: PARTITIONS,
        unclean_leader_election_enable: options.unclean_leader_election,
        auto_leader_rebalance_enable: options.auto_leader_rebalance_ms.is_some(),
        leader_imbalance_check_interval_ms: options
            .auto_leader_rebalance_ms
            .unwrap_or(BrokerConfig::default().leader_imbalance_check_interval_ms),
        bugs: options.bugs,
        // `__consumer_offsets` replicated as the workload's topic is (created once that many
        // brokers are alive).
        groups: GroupSettings {
            offsets_topic_replication_factor: factor,
            ..groups::broker_settings()
        },
        advertised_listeners: vec![Endpoint {
            name: "PLAINTEXT".to_string(),
            host: node_ip(id).to_string(),
            port: CLIENT_PORT,
        }],
        kraft: KraftSettings {
            controller_listener: Some(Endpoint {
                name: "CONTROLLER".to_string(),
                host: node_ip(id).to_string(),
                port: CONTROLLER_PORT,
            }),
            quorum_voters: voters,
            broker_session_timeout_ms: SESSION_TIMEOUT_MS,
            broker_heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
            ..KraftSettings::default()
        },
        ..BrokerConfig::default()
    }
}

/// What the nodes share with the harness.
#[derive(Clone)]
struct Shared {
    /// Each partition's history.
    recorders: Arc<Vec<Recorder>>,
    /// The consumer group's history (all its partitions: the group checkers judge them
    /// together).
    group_recorder: Recorder,
    /// Harness notes (the nemesis, the nodes' failures).
    notes: Recorder,
    /// The newest image any node applied, for the final checks.
    image: Arc<Mutex<Option<Arc<MetadataImage>>>>,
    /// Per node: its broker's heartbeats are muted.
    muted: Arc<BTreeMap<i32, AtomicBool>>,
    /// Per node: it halted and needs a restart.
    needs_restart: Arc<BTreeMap<i32, AtomicBool>>,
    /// Per node: its latest graceful stop (SIGTERM) has finished, cleanly or not.
    stopped: Arc<BTreeMap<i32, AtomicBool>>,
    /// Every start's (node id, incarnation id), in start order.
    incarnations: Arc<Mutex<Vec<(i32, Uuid)>>>,
    /// The metadata quorum's history: each replica's epochs, leaderships and truncations,
    /// and the committed entries each node's reader saw (from offset 0 at every start).
    quorum: Arc<Mutex<QuorumHistory>>,
    /// Each node's replica of its latest start, for the quorum's end state.
    raft_handles: Arc<Mutex<BTreeMap<i32, RaftHandle>>>,
    /// (partition, leader epoch) of every leadership a node applied whose new leader epoch
    /// came with the leader RECOVERING (KIP-704): an unclean election, or KIP-966's recovery
    /// by the last known leader.
    recovering_elections: Arc<Mutex<BTreeSet<(i32, i32)>>>,
}

/// `LeaderRecoveryState` RECOVERING: the leader was elected uncleanly (KIP-704).
const LEADER_RECOVERING: i8 = 1;

/// The leader epoch of each workload partition each node applied last (replicated suites),
/// kept across the node's restarts.
type AppliedEpochs = Arc<BTreeMap<i32, Vec<std::sync::atomic::AtomicI32>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One node, as `samsa broker` runs it, until it is killed or halts.
async fn member(
    id: i32,
    disk: MemDisk,
    config: BrokerConfig,
    clock: Clock,
    (shared, epochs): (Shared, AppliedEpochs),
) {
    if let Some(flag) = shared.stopped.get(&id) {
        flag.store(false, Ordering::Release);
    }
    let halt = |why: String| {
        shared.notes.note(0, format!("node {id}: {why}"));
        if let Some(flag) = shared.needs_restart.get(&id) {
            flag.store(true, Ordering::Release);
        }
    };
    let controller_listener =
        match TcpListener::bind(SocketAddr::new(node_ip(id), CONTROLLER_PORT)).await {
            Ok(l) => l,
            Err(e) => return halt(format!("binding the controller listener failed: {e}")),
        };
    let observer: PublishObserver = {
        let shared = shared.clone();
        let epochs = epochs.clone();
        // Per partition: 0 nothing recorded by this process yet, 1 not leading, 2 leading.
        let last: Arc<Vec<AtomicU8>> =
            Arc::new((0..PARTITIONS).map(|_| AtomicU8::new(0)).collect());
        Arc::new(move |offset, image: &MetadataImage| {
            {
                let mut newest = lock(&shared.image);
                if newest.as_ref().is_none_or(|n| n.offset < image.offset) {
                    *newest = Some(Arc::new(image.clone()));
                }
            }
            let registered = image
                .brokers
                .get(&id)
                .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown);
            for p in 0..PARTITIONS {
                let Some(partition) = image.partition(TOPIC, p) else {
                    continue;
                };
                // A replicated partition: each node's first image of a new leader epoch is a
                // boundary of the watermark checker's groups (a new leader's high watermark may
                // start lower, KIP-207).
                if partition.replicas.len() > 1 {
                    let seen = &epochs[&id][p as usize];
                    if seen.fetch_max(partition.leader_epoch, Ordering::AcqRel)
                        < partition.leader_epoch
                    {
                        if partition.leader_recovery_state == LEADER_RECOVERING {
                            lock(&shared.recovering_elections).insert((p, partition.leader_epoch));
                        }
                        shared.recorders[p as usize].node(
                            0,
                            NodeEvent::LeaderEpoch {
                                epoch: partition.leader_epoch,
                            },
                        );
                    }
                    continue;
                }
                // Only the node the partition's one replica lives on speaks in its history.
                if partition.replicas != [id] {
                    continue;
                }
                let leads = registered && partition.leader == id;
                let state = if leads { 2 } else { 1 };
                if last[p as usize].swap(state, Ordering::AcqRel) != state {
                    shared.recorders[p as usize].node(0, NodeEvent::ImageApplied { offset, leads });
                }
            }
        })
    };
    // The log start stays at 0 here (snapshots are due only after 20 MiB), so no snapshot
    // is loaded; the end check reports a log that starts later.
    let raft_events: EventSink = {
        let shared = shared.clone();
        Arc::new(move |event| {
            if let Some(event) = crate::quorum::quorum_event(id, event) {
                lock(&shared.quorum).push(event);
            }
        })
    };
    let mut node = match Node::start_observed(
        config,
        Disk::mem(disk.clone()),
        Disk::mem(disk.clone()),
        clock,
        controller_listener,
        NodeObservers {
            image: Some(observer),
            raft: Some(raft_events),
        },
    )
    .await
    {
        Ok(node) => node,
        Err(e) => return halt(format!("open failed: {e}")),
    };
    lock(&shared.incarnations).push((id, node.incarnation_id));
    lock(&shared.raft_handles).insert(id, node.raft.clone());
    samsa::rt::task::spawn(report_committed(id, node.raft.clone(), shared.clone()));
    let broker = node.broker.clone();
    let image = broker.image();
    for partition in broker.topics.partitions().await {
        let replica_here = image
            .as_ref()
            .and_then(|i| i.partition(&partition.topic, partition.index))
            .is_some_and(|p| p.replicas == [id]);
        if partition.topic != TOPIC || !replica_here {
            continue;
        }
        let Some(recorder) = shared.recorders.get(partition.index as usize) else {
            continue;
        };
        let report = &partition.recovery;
        recorder.note(
            0,
            format!(
                "node {id}: recovered {}-{} log end {} (recovery point {})",
                partition.topic, partition.index, report.log_end_offset, report.recovery_point
            ),
        );
        recorder.node(
            0,
            NodeEvent::Opened {
                recovery_point: report.recovery_point,
                log_end_offset: report.log_end_offset,
            },
        );
    }
    let listener = match TcpListener::bind(SocketAddr::new(node_ip(id), CLIENT_PORT)).await {
        Ok(l) => l,
        Err(e) => return halt(format!("bind failed: {e}")),
    };
    let serving = Serving::start(&broker, listener);
    {
        let (lifecycle, shared) = (node.lifecycle.clone(), shared.clone());
        samsa::rt::task::spawn(async move {
            let mut muted = false;
            loop {
                time::sleep(Duration::from_millis(MUTE_POLL_MS)).await;
                let now = shared
                    .muted
                    .get(&id)
                    .is_some_and(|m| m.load(Ordering::Acquire));
                if now != muted {
                    muted = now;
                    lifecycle.set_muted(muted);
                }
            }
        });
    }
    tokio::select! {
        biased;
        why = node.failed() => halt(format!("{why}; halting")),
        _ = samsa::rt::signal::ctrl_c() => {
            // Graceful shutdown, as `samsa broker` on SIGTERM: stop serving, a controlled
            // shutdown (the controller takes this broker's leaderships away first), then
            // close every log cleanly. The supervisor restarts the node later.
            serving.stop().await;
            drop(broker);
            match node.shutdown().await {
                Ok(()) => shared.notes.note(0, format!("node {id}: stopped cleanly")),
                Err(e) => shared.notes.note(0, format!("node {id}: clean stop failed: {e}")),
            }
            if let Some(flag) = shared.stopped.get(&id) {
                flag.store(true, Ordering::Release);
            }
        }
    }
}

/// Reports every committed entry of node `id`'s metadata log, from offset 0 on, as the
/// quorum checker's Committed events, until the replica stops. The checker compares what
/// every node saw committed at each offset (committed-diverge).
async fn report_committed(id: i32, handle: RaftHandle, shared: Shared) {
    let mut applied = 0i64;
    loop {
        let _ = handle
            .wait_for(Duration::from_millis(200), |s| s.high_watermark > applied)
            .await;
        let batches = match handle.read_committed(applied, COMMITTED_READ_BYTES).await {
            Ok(batches) => batches,
            Err(DriverError::BelowLogStart { log_start_offset }) => {
                shared.notes.note(
                    0,
                    format!(
                        "node {id}: the metadata log starts at {log_start_offset}, past {applied}"
                    ),
                );
                return;
            }
            // The replica stopped (its node was killed or halted).
            Err(_) => return,
        };
        for batch in batches {
            for (i, record) in batch.records.iter().enumerate() {
                let offset = batch.base_offset + i as i64;
                if offset < applied {
                    continue;
                }
                assert_eq!(
                    offset, applied,
                    "node {id}: the committed metadata log has a hole"
                );
                let entry = Entry {
                    epoch: batch.epoch,
                    digest: record.digest(offset),
                };
                lock(&shared.quorum).push(QuorumEvent::Committed {
                    node: id,
                    offset,
                    entry,
                });
                applied = offset + 1;
            }
        }
    }
}

/// The metadata quorum's end state, read from each node's running replica after healing;
/// a node whose replica is not running is a problem (not-converged). Brokers go on
/// heartbeating after the workloads stop, and a heartbeat may still write (an unfence), so
/// the state is read once the replicas agree (one leader, every log end the same and
/// committed), or after `QUORUM_SETTLE_MS`: a follower learns the high watermark on its
/// next fetch, up to a held fetch's wait after the entry committed.
async fn quorum_end(shared: &Shared, problems: &mut Vec<String>) -> QuorumEnd {
    let handles: Vec<(i32, RaftHandle)> = lock(&shared.raft_handles)
        .iter()
        .map(|(id, h)| (*id, h.clone()))
        .collect();
    let settle_end = time::now() + Duration::from_millis(QUORUM_SETTLE_MS);
    while time::now() < settle_end {
        let statuses: Vec<_> = handles.iter().map(|(_, h)| h.status()).collect();
        let leaders = statuses.iter().filter(|s| s.is_leader).count();
        let settled = leaders == 1
            && statuses.iter().all(|s| {
                s.high_watermark == s.log_end_offset
                    && s.log_end_offset == statuses[0].log_end_offset
            });
        if settled {
            break;
        }
        time::sleep(Duration::from_millis(QUORUM_SETTLE_POLL_MS)).await;
    }
    let mut end = QuorumEnd {
        healed: true,
        ..QuorumEnd::default()
    };
    for (id, handle) in handles {
        let status = handle.status();
        let mut entries = Vec::new();
        let start = status.log_start_offset;
        let mut offset = start;
        let read = loop {
            let batches = match handle.read_log(offset, 1 << 20).await {
                Ok(batches) => batches,
                Err(e) => break Err(e),
            };
            if batches.is_empty() {
                break Ok(());
            }
            for batch in batches {
                for (i, record) in batch.records.iter().enumerate() {
                    let at = batch.base_offset + i as i64;
                    if at >= offset {
                        entries.push(Entry {
                            epoch: batch.epoch,
                            digest: record.digest(at),
                        });
                    }
                }
                offset = batch.next_offset();
            }
        };
        if let Err(e) = read {
            problems.push(format!(
                "quorum: not-converged: node {id}'s replica is not running after healing ({e})"
            ));
            continue;
        }
        end.logs.insert(id, entries);
        end.log_starts.insert(id, start);
        end.high_watermarks.insert(id, status.high_watermark);
        if status.is_leader {
            end.leaders.push((id, status.epoch));
        }
    }
    end
}

/// One run of `seed`.
pub fn run_cluster_seed(seed: u64, options: &ClusterOptions) -> ClusterOutcome {
    if std::env::var_os("SAMSA_LOG").is_some() {
        samsa::cli::init_tool_logging();
    }
    let options = options.clone();
    crate::harness::on_seed_thread(
        "sim-cluster-seed",
        seed,
        crate::harness::SIMULATED_SECONDS_MAX,
        move || simulate(options),
    )
}

/// What the admin process saw.
#[derive(Default)]
struct AdminLog {
    created: Vec<String>,
    /// Names a deletion was sent for (whatever its outcome).
    delete_attempted: Vec<String>,
    deleted: Vec<String>,
    /// Topics a config change was sent for (once each), and the acknowledged ones with the
    /// `retention.ms` they set.
    alter_attempted: Vec<String>,
    altered: Vec<(String, String)>,
    ok_by_node: BTreeMap<i32, u64>,
}

/// Creates topics, deletes some of those it created and changes the config of others,
/// through every broker in turn, each request on a fresh connection to that broker alone.
async fn admin(log: Arc<Mutex<AdminLog>>, nodes: i32, mut rng: SmallRng, stop: Arc<AtomicBool>) {
    let mut next = 0u32;
    let mut turn = 0i32;
    while !stop.load(Ordering::Acquire) && next < ADMIN_TOPICS_MAX {
        time::sleep(Duration::from_millis(rng.gen_range(50..250))).await;
        let Some((id, mut conn)) = connect_in_turn(&mut turn, nodes, "sim-admin").await else {
            continue;
        };
        let created_count = lock(&log).created.len();
        let action = if created_count == 0 {
            0
        } else {
            rng.gen_range(0..10)
        };
        if action >= 8 {
            // A config change: `retention.ms` set to a value of its own, once per topic.
            let name = {
                let log = lock(&log);
                log.created[rng.gen_range(0..log.created.len())].clone()
            };
            {
                let mut log = lock(&log);
                if log.alter_attempted.contains(&name) || log.delete_attempted.contains(&name) {
                    continue;
                }
                log.alter_attempted.push(name.clone());
            }
            let value = rng.gen_range(3_600_000..7_200_000u64).to_string();
            let request = IncrementalAlterConfigsRequest {
                resources: vec![AlterConfigsResource {
                    resource_type: 2,
                    resource_name: name.clone(),
                    configs: vec![AlterableConfig {
                        name: "retention.ms".into(),
                        config_operation: 0,
                        value: Some(value.clone()),
                    }],
                }],
                validate_only: false,
            };
            let answer: Option<IncrementalAlterConfigsResponse> =
                send(&mut conn, 44, &request).await;
            if answer.is_some_and(|r| r.responses.first().is_some_and(|t| t.error_code == 0)) {
                let mut log = lock(&log);
                log.altered.push((name, value));
                *log.ok_by_node.entry(id).or_insert(0) += 1;
            }
        } else if action >= 5 {
            let name = {
                let log = lock(&log);
                log.created[rng.gen_range(0..log.created.len())].clone()
            };
            if lock(&log).delete_attempted.contains(&name) {
                continue;
            }
            lock(&log).delete_attempted.push(name.clone());
            let request = DeleteTopicsRequest {
                topics: vec![DeleteTopicState {
                    name: Some(name.clone()),
                    topic_id: Uuid::ZERO,
                }],
                topic_names: vec![name.clone()],
                timeout_ms: ADMIN_TIMEOUT_MS as i32,
            };
            let answer: Option<DeleteTopicsResponse> = send(&mut conn, 20, &request).await;
            if answer.is_some_and(|r| r.responses.first().is_some_and(|t| t.error_code == 0)) {
                let mut log = lock(&log);
                log.deleted.push(name);
                *log.ok_by_node.entry(id).or_insert(0) += 1;
            }
        } else {
            let name = format!("adm-{next}");
            next += 1;
            let request = CreateTopicsRequest {
                topics: vec![CreatableTopic {
                    name: name.clone(),
                    num_partitions: rng.gen_range(1..=3),
                    replication_factor: 1,
                    ..Default::default()
                }],
                timeout_ms: ADMIN_TIMEOUT_MS as i32,
                validate_only: false,
            };
            let answer: Option<CreateTopicsResponse> = send(&mut conn, 19, &request).await;
            if answer.is_some_and(|r| r.topics.first().is_some_and(|t| t.error_code == 0)) {
                let mut log = lock(&log);
                log.created.push(name);
                *log.ok_by_node.entry(id).or_insert(0) += 1;
            }
        }
    }
}

/// The pause between two preferred elections of the `preferred_elections` option.
const ELECTOR_PAUSE_MS: std::ops::Range<u64> = 300..1_500;

/// Asks for a preferred-leader election of every partition (ElectLeaders with a null list)
/// through each node in turn until `stop`; adds to `elected` each partition answered with
/// success (ELECTION_NOT_NEEDED and PREFERRED_LEADER_NOT_AVAILABLE are not counted).
async fn elector(nodes: i32, mut rng: SmallRng, stop: Arc<AtomicBool>, elected: Arc<AtomicU64>) {
    let mut turn = 0i32;
    while !stop.load(Ordering::Acquire) {
        time::sleep(Duration::from_millis(rng.gen_range(ELECTOR_PAUSE_MS))).await;
        let Some((_, mut conn)) = connect_in_turn(&mut turn, nodes, "sim-elector").await else {
            continue;
        };
        let request = ElectLeadersRequest {
            election_type: ELECTION_TYPE_PREFERRED,
            topic_partitions: None,
            timeout_ms: ADMIN_TIMEOUT_MS as i32,
        };
        let answer: Option<ElectLeadersResponse> = send(&mut conn, 43, &request).await;
        let ok = answer
            .iter()
            .flat_map(|r| &r.replica_election_results)
            .flat_map(|t| &t.partition_result)
            .filter(|p| p.error_code == 0)
            .count();
        elected.fetch_add(ok as u64, Ordering::Relaxed);
    }
}

/// A fresh connection, as `client_id`, to the node whose turn it is (each in turn; `turn`
/// moves on either way), with the admin clients' limits; None when it cannot be reached.
async fn connect_in_turn(turn: &mut i32, nodes: i32, client_id: &str) -> Option<(i32, Connection)> {
    let id = *turn % nodes + 1;
    *turn += 1;
    let limits = ConnectionLimits {
        request_timeout_ms: ADMIN_TIMEOUT_MS,
        connect_timeout_ms: ADMIN_TIMEOUT_MS,
        ..ConnectionLimits::default()
    };
    let conn = Connection::connect(&client_address(id), client_id, limits)
        .await
        .ok()?;
    Some((id, conn))
}

/// `request` at the version the connection negotiated; None when it went unanswered.
async fn send<Req, Resp>(conn: &mut Connection, api_key: i16, request: &Req) -> Option<Resp>
where
    Req: samsa::protocol::message::Message,
    Resp: samsa::protocol::message::Message,
{
    let version = conn.version_for(api_key).ok()?;
    conn.send(api_key, version, request).await.ok()
}

async fn simulate(options: ClusterOptions) -> ClusterOutcome {
    // `RUST_LOG` shows the nodes' logs (one seed at a time, for a replay).
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
    assert!(options.nodes >= 1, "a cluster needs a node");
    assert!(options.nodes <= NODES_MAX, "at most {NODES_MAX} nodes");
    let node_ids = 1..=options.nodes;
    let handle = madsim::runtime::Handle::current();
    let mut rng = SmallRng::seed_from_u64(samsa::rt::rand::random_u64());
    let recorders: Vec<Recorder> = (0..PARTITIONS).map(|_| Recorder::new()).collect();
    let shared = Shared {
        recorders: Arc::new(recorders),
        group_recorder: Recorder::new(),
        notes: Recorder::new(),
        image: Arc::new(Mutex::new(None)),
        muted: Arc::new(
            node_ids
                .clone()
                .map(|id| (id, AtomicBool::new(false)))
                .collect(),
        ),
        needs_restart: Arc::new(
            node_ids
                .clone()
                .map(|id| (id, AtomicBool::new(false)))
                .collect(),
        ),
        stopped: Arc::new(
            node_ids
                .clone()
                .map(|id| (id, AtomicBool::new(false)))
                .collect(),
        ),
        incarnations: Arc::new(Mutex::new(Vec::new())),
        quorum: Arc::new(Mutex::new(QuorumHistory::default())),
        raft_handles: Arc::new(Mutex::new(BTreeMap::new())),
        recovering_elections: Arc::new(Mutex::new(BTreeSet::new())),
    };
    let epochs: AppliedEpochs = Arc::new(
        node_ids
            .clone()
            .map(|id| {
                let partitions = (0..PARTITIONS)
                    .map(|_| std::sync::atomic::AtomicI32::new(-1))
                    .collect();
                (id, partitions)
            })
            .collect(),
    );
    // Every node's directory formatted with one cluster id, as `samsa storage format` does.
    let cluster_id = samsa::broker::meta::random_uuid();
    let mut disks = BTreeMap::new();
    let mut nodes = BTreeMap::new();
    let mut clocks: BTreeMap<i32, Clock> = BTreeMap::new();
    for id in node_ids.clone() {
        let disk = MemDisk::new(rng.gen());
        disk.set_latency(50, 100, 2_000);
        let mut meta = samsa::broker::meta::MetaProperties::generate(id);
        meta.cluster_id = cluster_id.clone();
        Disk::mem(disk.clone())
            .write_file_atomic(
                samsa::broker::meta::META_PROPERTIES_FILE,
                meta.encode().as_bytes(),
            )
            .await
            .expect("formatting a simulated disk");
        let config = node_config(id, &options);
        // The node's wall clock, kept here so that its jumps survive restarts.
        let clock = Clock::new();
        let node = {
            let (disk, shared, clock) = (disk.clone(), shared.clone(), clock.clone());
            let epochs = epochs.clone();
            handle
                .create_node()
                .name(format!("node-{id}"))
                .ip(node_ip(id))
                .init(move || {
                    member(
                        id,
                        disk.clone(),
                        config.clone(),
                        clock.clone(),
                        (shared.clone(), epochs.clone()),
                    )
                })
                .build()
        };
        clocks.insert(id, clock);
        disks.insert(id, disk);
        nodes.insert(id, node);
    }
    let clients = handle.create_node().name("clients").ip(CLIENT_IP).build();
    let bootstrap: Vec<String> = node_ids.clone().map(client_address).collect();
    let bootstrap = bootstrap.join(",");
    let stop = Arc::new(AtomicBool::new(false));
    let mut joins = Vec::new();
    for p in 0..PARTITIONS {
        let workload = Workload {
            process: p as u32 + 1,
            bootstrap: bootstrap.clone(),
            partition: p,
            recorder: shared.recorders[p as usize].clone(),
            stop: Arc::clone(&stop),
            rng: SmallRng::seed_from_u64(rng.gen()),
            clock: Clock::new(),
            think_ms_max: options.think_ms_max,
            idempotent: false,
            keying: Keying::BY_PROCESS,
            acks: options.acks,
        };
        joins.push(clients.spawn(workload.run()));
    }
    let group_phase = groups::Phase {
        quiet: Arc::new(AtomicBool::new(false)),
        stop: Arc::clone(&stop),
    };
    let group_run = options.groups.clone().map(|group_options| {
        clients.spawn(groups::run(
            bootstrap.clone(),
            shared.group_recorder.clone(),
            SmallRng::seed_from_u64(rng.gen()),
            Clock::new(),
            group_options,
            group_phase.clone(),
        ))
    });
    let admin_log = Arc::new(Mutex::new(AdminLog::default()));
    let admin_stop = Arc::new(AtomicBool::new(false));
    let admin_join = clients.spawn(admin(
        Arc::clone(&admin_log),
        options.nodes,
        SmallRng::seed_from_u64(rng.gen()),
        Arc::clone(&admin_stop),
    ));
    let elected = Arc::new(AtomicU64::new(0));
    let elector_join = options.preferred_elections.then(|| {
        clients.spawn(elector(
            options.nodes,
            SmallRng::seed_from_u64(rng.gen()),
            Arc::clone(&admin_stop),
            Arc::clone(&elected),
        ))
    });

    // The nemesis.
    let net = madsim::net::NetSim::current();
    let start = time::now();
    let mut nemesis: Vec<String> = Vec::new();
    let event = |nemesis: &mut Vec<String>, notes: &Recorder, text: String| {
        let stamp = time::now().duration_since(start).as_millis();
        notes.note(u64::from(ADMIN_PROCESS) + 1, text.clone());
        for r in shared.recorders.iter() {
            r.note(1_000, text.clone());
        }
        shared.group_recorder.note(1_000, text.clone());
        nemesis.push(format!("{stamp} {text}"));
    };
    // A node that halted (its log directory failed) is restarted, as a supervisor would.
    // ... no sooner than `RESTART_BACKOFF_MS` after its last such restart (a node whose disk
    // keeps failing would otherwise be restarted every tick).
    let mut restarted_at: BTreeMap<i32, Instant> = BTreeMap::new();
    let mut restart_halted = |nemesis: &mut Vec<String>| {
        let now = time::now();
        for (id, flag) in shared.needs_restart.iter() {
            let due = restarted_at
                .get(id)
                .is_none_or(|at| now >= *at + Duration::from_millis(RESTART_BACKOFF_MS));
            if due && flag.swap(false, Ordering::AcqRel) {
                handle.kill(nodes[id].id());
                handle.restart(nodes[id].id());
                restarted_at.insert(*id, now);
                event(nemesis, &shared.notes, format!("restart halted node {id}"));
            }
        }
    };
    let safety_end = start + Duration::from_millis(options.safety_ms);
    let mut next_fault = start + Duration::from_millis(rng.gen_range(500..1_500));
    // At most one fault at a time, undone at its end.
    let mut undo: Option<(Instant, Fault)> = None;
    let mut planted_mute = options.mute.map(|(after_ms, for_ms)| {
        (
            start + Duration::from_millis(after_ms),
            start + Duration::from_millis(after_ms + for_ms),
            false,
        )
    });
    let mute_target = 1 + rng.gen_range(0..options.nodes);
    // The planted lone-leader sequence: (when, step), steps 0 (cut two), 1 (bring them back,
    // kill a third), 2 (restart it).
    let mut lone_leader = options
        .lone_leader
        .map(|after_ms| (start + Duration::from_millis(after_ms), 0u8));
    // Aimed at one workload partition: its two followers cut off, then its leader killed.
    let mut lone_cut = ([0, 0], 0);
    while time::now() < safety_end {
        time::sleep(Duration::from_millis(10)).await;
        let now = time::now();
        restart_halted(&mut nemesis);
        if let Some((at, step)) = lone_leader.as_mut() {
            if now >= *at {
                let cut = |clog: bool, [a, b]: [i32; 2]| {
                    for target in [a, b] {
                        for other in node_ids.clone().filter(|o| *o != a && *o != b) {
                            for (from, to) in [(target, other), (other, target)] {
                                if clog {
                                    net.clog_link(nodes[&from].id(), nodes[&to].id());
                                } else {
                                    net.unclog_link(nodes[&from].id(), nodes[&to].id());
                                }
                            }
                        }
                    }
                };
                if *step == 0 {
                    let partition = rng.gen_range(0..PARTITIONS);
                    let aim = lock(&shared.image)
                        .as_ref()
                        .and_then(|i| i.partition(TOPIC, partition).cloned())
                        .filter(|p| p.replicas.len() == 3 && p.leader >= 0);
                    let Some(p) = aim else {
                        *at = now + Duration::from_millis(200);
                        continue;
                    };
                    let followers: Vec<i32> = p
                        .replicas
                        .iter()
                        .copied()
                        .filter(|r| *r != p.leader)
                        .collect();
                    lone_cut = ([followers[0], followers[1]], p.leader);
                }
                let ([a, b], killed) = lone_cut;
                let text = match *step {
                    0 => {
                        cut(true, [a, b]);
                        *at = now + Duration::from_millis(LONE_LEADER_CUT_MS);
                        format!("cut nodes {a} and {b} off (planted)")
                    }
                    1 => {
                        cut(false, [a, b]);
                        handle.kill(nodes[&killed].id());
                        *at = now + Duration::from_millis(LONE_LEADER_KILL_MS);
                        format!("reconnect nodes {a} and {b}, kill node {killed} (planted)")
                    }
                    _ => {
                        handle.restart(nodes[&killed].id());
                        lone_leader = None;
                        format!("restart node {killed} (planted)")
                    }
                };
                if let Some((_, step)) = lone_leader.as_mut() {
                    *step += 1;
                }
                event(&mut nemesis, &shared.notes, text);
            }
        }
        if let Some((from, until, on)) = planted_mute.as_mut() {
            if !*on && now >= *from {
                *on = true;
                shared.muted[&mute_target].store(true, Ordering::Release);
                event(
                    &mut nemesis,
                    &shared.notes,
                    format!("mute node {mute_target}'s heartbeats (planted)"),
                );
            }
            if *on && now >= *until {
                shared.muted[&mute_target].store(false, Ordering::Release);
                planted_mute = None;
                event(
                    &mut nemesis,
                    &shared.notes,
                    format!("unmute node {mute_target} (planted)"),
                );
            }
        }
        if let Some((at, fault)) = &undo {
            // A node stopped gracefully is restarted once its stop finished (as a supervisor
            // restarts a process once it exited), or after GRACEFUL_STOP_WAIT_MS_MAX.
            let stopping = match fault {
                Fault::Stopped(id) => {
                    !shared.stopped[id].load(Ordering::Acquire)
                        && now < *at + Duration::from_millis(GRACEFUL_STOP_WAIT_MS_MAX)
                }
                _ => false,
            };
            if now >= *at && !stopping {
                let text = heal(fault, &handle, &net, &nodes, &disks, &clients, &shared);
                event(&mut nemesis, &shared.notes, text);
                undo = None;
                next_fault = now + Duration::from_millis(rng.gen_range(200..1_000));
            }
            continue;
        }
        if !options.nemesis || now < next_fault {
            continue;
        }
        let target = 1 + rng.gen_range(0..options.nodes);
        if rng.gen_bool(0.15) {
            // A wall-clock jump of one node (NTP step, VM pause): instant, nothing to undo.
            let delta_ms = rng.gen_range(-600_000..600_000);
            clocks[&target].jump(delta_ms);
            event(
                &mut nemesis,
                &shared.notes,
                format!("clock jump of node {target}: {delta_ms} ms"),
            );
            next_fault = now + Duration::from_millis(rng.gen_range(200..1_000));
            continue;
        }
        // Rot takes a replica's acknowledged records (and a start whose recovery cut a log
        // registers as unclean, leaving every ELR of the broker): a minority only while no
        // other replica is missing any, so only while every ISR is whole.
        if options.minority_corruption
            && rng.gen_bool(MINORITY_CORRUPTION_PROBABILITY)
            && isrs_whole(&shared)
        {
            let image = lock(&shared.image).clone();
            let followed: Vec<i32> = image
                .map(|image| {
                    (0..PARTITIONS)
                        .filter(|p| {
                            image.partition(TOPIC, *p).is_some_and(|r| {
                                r.leader >= 0 && r.leader != target && r.replicas.contains(&target)
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            if !followed.is_empty() {
                let partition = followed[rng.gen_range(0..followed.len())];
                let dir = format!("{TOPIC}-{partition}");
                let down = rng.gen_bool(0.5);
                if down {
                    handle.kill(nodes[&target].id());
                    disks[&target].crash(CrashMode::Process, &mut rng);
                }
                let rot = if down {
                    RotTarget::AboveRecoveryPoint
                } else {
                    RotTarget::BelowRecoveryPoint
                };
                let at = corrupt_log_in(&disks[&target], &mut rng, rot, &dir);
                let fault = Fault::Rotted {
                    target,
                    partition,
                    down,
                    at,
                };
                event(&mut nemesis, &shared.notes, format!("{fault:?}"));
                undo = Some((
                    now + Duration::from_millis(rng.gen_range(300..2_500)),
                    fault,
                ));
                continue;
            }
        }
        // Two nodes at once only where a majority of the voters stays.
        let kinds = if options.nodes >= 5 { 10 } else { 9 };
        let fault = match rng.gen_range(0..kinds) {
            0 => {
                let mode = options.crash_modes[rng.gen_range(0..options.crash_modes.len())];
                let mode = bounded_power_loss(mode, &options, &shared);
                handle.kill(nodes[&target].id());
                disks[&target].crash(mode, &mut rng);
                Fault::Killed(target, mode)
            }
            1 => {
                for other in node_ids.clone().filter(|o| *o != target) {
                    net.clog_link(nodes[&target].id(), nodes[&other].id());
                    net.clog_link(nodes[&other].id(), nodes[&target].id());
                }
                Fault::Isolated(target)
            }
            7 => {
                // A process pause (a long GC, a stopped VM): the node neither runs nor
                // answers, and resumes believing what it believed.
                handle.pause(nodes[&target].id());
                Fault::Paused(target)
            }
            8 => {
                // A one-way partition: the node's packets to the other nodes are lost (it
                // still hears them), or the other way round.
                let outbound = rng.gen_bool(0.5);
                for other in node_ids.clone().filter(|o| *o != target) {
                    let (from, to) = if outbound {
                        (target, other)
                    } else {
                        (other, target)
                    };
                    net.clog_link(nodes[&from].id(), nodes[&to].id());
                }
                Fault::OneWay { target, outbound }
            }
            9 => {
                // Two nodes killed at once (the N-1 of a partition's three replicas); in
                // page-cache mode at most one of them loses power, as the suite's bound
                // allows.
                let other = 1 + (target + rng.gen_range(0..options.nodes - 1)) % options.nodes;
                assert_ne!(other, target);
                let mode = options.crash_modes[rng.gen_range(0..options.crash_modes.len())];
                let mode = bounded_power_loss(mode, &options, &shared);
                let other_mode = match options.flush {
                    FlushPolicy::SyncBeforeAck => {
                        options.crash_modes[rng.gen_range(0..options.crash_modes.len())]
                    }
                    FlushPolicy::PageCache { .. } => CrashMode::Process,
                };
                handle.kill(nodes[&target].id());
                disks[&target].crash(mode, &mut rng);
                handle.kill(nodes[&other].id());
                disks[&other].crash(other_mode, &mut rng);
                Fault::KilledTwo([(target, mode), (other, other_mode)])
            }
            2 => {
                shared.muted[&target].store(true, Ordering::Release);
                Fault::Muted(target)
            }
            3 => {
                net.clog_link(clients.id(), nodes[&target].id());
                net.clog_link(nodes[&target].id(), clients.id());
                Fault::ClientsCut(target)
            }
            5 => {
                // A graceful stop (SIGTERM); the node restarts when the fault ends.
                handle.send_ctrl_c(nodes[&target].id());
                Fault::Stopped(target)
            }
            6 => {
                // Latency spikes on every link.
                let max_ms = rng.gen_range(5..50);
                net.update_config(|c| {
                    c.send_latency = std::time::Duration::from_millis(1)
                        ..std::time::Duration::from_millis(max_ms)
                });
                Fault::Slow(max_ms)
            }
            _ => {
                // The node's disk fails some operations (reads, writes, syncs, of the
                // partitions' logs and the metadata log alike); a log directory that fails
                // halts the node, and the supervisor restarts it.
                let per_million = rng.gen_range(5_000..50_000);
                disks[&target].set_io_error_rate(per_million);
                Fault::IoErrors(target, per_million)
            }
        };
        event(&mut nemesis, &shared.notes, format!("{fault:?}"));
        undo = Some((
            now + Duration::from_millis(rng.gen_range(300..2_500)),
            fault,
        ));
    }
    // A planted lone-leader sequence cut short by the end of the safety phase is undone.
    if let Some((_, step)) = lone_leader.take() {
        let ([a, b], killed) = lone_cut;
        if step >= 1 {
            for target in [a, b] {
                for other in node_ids.clone() {
                    net.unclog_link(nodes[&target].id(), nodes[&other].id());
                    net.unclog_link(nodes[&other].id(), nodes[&target].id());
                }
            }
        }
        if step >= 2 {
            handle.restart(nodes[&killed].id());
        }
        event(
            &mut nemesis,
            &shared.notes,
            format!("end the planted sequence at step {step}"),
        );
    }
    if let Some((_, fault)) = undo.take() {
        let text = heal(&fault, &handle, &net, &nodes, &disks, &clients, &shared);
        event(&mut nemesis, &shared.notes, text);
    }
    for flag in shared.muted.values() {
        flag.store(false, Ordering::Release);
    }
    event(&mut nemesis, &shared.notes, "heal".to_string());
    // No more member faults; the group's producer stops, so its high watermarks settle.
    group_phase.quiet.store(true, Ordering::Release);
    let heal_ns: Vec<u64> = shared.recorders.iter().map(Recorder::now_ns).collect();
    let heal_end = time::now() + Duration::from_millis(options.heal_ms);
    while time::now() < heal_end {
        time::sleep(Duration::from_millis(10)).await;
        restart_halted(&mut nemesis);
    }
    stop.store(true, Ordering::Release);
    admin_stop.store(true, Ordering::Release);
    for join in joins {
        let _ = join.await;
    }
    let _ = admin_join.await;
    if let Some(join) = elector_join {
        let _ = join.await;
    }
    let group_watermarks = match group_run {
        Some(run) => run.await.ok(),
        None => None,
    };

    // The metadata quorum after healing: its history and each replica's log, judged by the
    // quorum checker (election-safety, epoch-regress, committed-diverge,
    // truncated-committed, lost-committed, no-leader, not-converged).
    let mut problems = Vec::new();
    let end = quorum_end(&shared, &mut problems).await;
    let quorum_history = lock(&shared.quorum).clone();
    problems.extend(
        quorum::check(&quorum_history, &end)
            .iter()
            .map(|a| format!("quorum: {a}")),
    );
    let elections = quorum_history
        .events
        .iter()
        .filter(|e| matches!(e, QuorumEvent::Leader { .. }))
        .count();
    // The final crash of every node, then each partition read offline from its replica's
    // disk, as a fresh process would.
    let final_image = lock(&shared.image).clone();
    let mut reports = BTreeMap::new();
    let clock = Clock::new();
    for id in node_ids.clone() {
        handle.kill(nodes[&id].id());
        let modes = options
            .final_crash_modes
            .as_ref()
            .unwrap_or(&options.crash_modes);
        let mode = modes[rng.gen_range(0..modes.len())];
        disks[&id].crash(mode, &mut rng);
        event(
            &mut nemesis,
            &shared.notes,
            format!("final crash of node {id} ({})", mode.name()),
        );
    }
    let mut ops = 0;
    for p in 0..PARTITIONS {
        let recorder = &shared.recorders[p as usize];
        let history = recorder.take();
        let registration = final_image.as_ref().and_then(|i| i.partition(TOPIC, p));
        let replica = registration.and_then(|r| r.replicas.first().copied());
        let Some(replica) = replica else {
            if history
                .operations()
                .iter()
                .any(|o| matches!(o.outcome, Some(Outcome::Appended { .. })))
            {
                problems.push(format!(
                    "partition {p}: appends acknowledged, but no image holds the partition"
                ));
            }
            continue;
        };
        // Replicated: every member of the final ISR, its leader first, must hold every
        // acknowledged write, and the members must agree record for record where they
        // overlap; one replica: that replica.
        let members: Vec<i32> = match registration.filter(|r| r.replicas.len() > 1) {
            Some(r) => {
                let mut members = r.isr.clone();
                members.sort_by_key(|m| (*m != r.leader, *m));
                members
            }
            None => vec![replica],
        };
        let mut logs = Vec::new();
        for member in &members {
            let config = partition_log_config(&node_config(*member, &options));
            let log = read_offline(
                &disks[member],
                &format!("{TOPIC}-{p}"),
                &config,
                &clock,
                recorder,
                false,
            )
            .await;
            logs.push((*member, log));
        }
        let Some((_, final_log)) = logs.first() else {
            problems.push(format!("partition {p}: the final image's ISR is empty"));
            continue;
        };
        // Losses are allowed in a partition only where they can happen: under acks=1
        // anywhere, under unclean elections only in a partition that had a RECOVERING
        // leader (an unclean election, or the last leader's recovery, which the
        // observer cannot tell apart).
        let unclean_here = lock(&shared.recovering_elections)
            .iter()
            .any(|(q, _)| *q == p);
        let durability = match options.durability() {
            samsa_spec::Durability::UncleanElections if !unclean_here => {
                samsa_spec::Durability::Committed
            }
            d => d,
        };
        let check_options = CheckOptions {
            durability,
            ..CheckOptions::default()
        };
        let report = samsa_spec::check(&history, final_log, &check_options);
        for (member, log) in logs.iter().skip(1) {
            let other = samsa_spec::check(&history, log, &check_options);
            if !other.is_valid() {
                problems.push(format!(
                    "partition {p}, ISR member {member}: {}",
                    other.summary()
                ));
            }
            if let Some(why) = replicas_disagree(final_log, log) {
                problems.push(format!(
                    "inconsistent-offsets: partition {p}, ISR members {} and {member}: {why}",
                    members[0]
                ));
            }
        }
        ops += report.ops_ok + report.ops_failed + report.ops_unknown;
        let healed = history.operations().iter().any(|o| {
            o.invoke_ns >= heal_ns[p as usize]
                && matches!(o.outcome, Some(Outcome::Appended { .. }))
        });
        if !healed {
            if std::env::var_os("SAMSA_SIM_VERBOSE").is_some() {
                let rendered = history.render();
                let lines: Vec<&str> = rendered.lines().collect();
                eprintln!(
                    "partition {p}'s history, last 40 events:\n{}",
                    lines[lines.len().saturating_sub(40)..].join("\n")
                );
            }
            let last_failure = history
                .operations()
                .iter()
                .rev()
                .find_map(|o| match &o.outcome {
                    Some(Outcome::Failed { reason }) => Some(reason.clone()),
                    _ => None,
                });
            problems.push(format!(
                "liveness: partition {p} (on node {replica}) accepted no append after healing; \
                 final state {:?}, last failure {last_failure:?}",
                registration.map(|r| (r.leader, r.leader_epoch, &r.isr, &r.elr))
            ));
        }
        reports.insert(p, report);
    }
    // The consumer group: its topic's partitions read offline from their replicas' disks.
    let mut group_work = GroupWork::default();
    let group = if options.groups.is_some() {
        let mut finals = BTreeMap::new();
        for (partition, high_watermark) in group_watermarks.iter().flatten() {
            let replica = final_image
                .as_ref()
                .and_then(|i| i.partition(groups::GROUP_TOPIC, *partition))
                // Replicated: its leader, else an ISR member (each holds what was committed).
                .and_then(|r| {
                    Some(r.leader)
                        .filter(|l| *l >= 0)
                        .or_else(|| r.isr.first().copied())
                        .or_else(|| r.replicas.first().copied())
                });
            let Some(replica) = replica else {
                problems.push(format!(
                    "group: {}-{partition} has a high watermark but no image holds it",
                    groups::GROUP_TOPIC
                ));
                continue;
            };
            let config = partition_log_config(&node_config(replica, &options));
            let log = read_offline(
                &disks[&replica],
                &format!("{}-{partition}", groups::GROUP_TOPIC),
                &config,
                &clock,
                &shared.group_recorder,
                false,
            )
            .await;
            finals.insert(
                samsa_spec::TopicPartition::new(groups::GROUP_TOPIC, *partition),
                samsa_spec::FinalPartition {
                    log,
                    high_watermark: *high_watermark,
                },
            );
        }
        let history = shared.group_recorder.take();
        // `SAMSA_SIM_GROUP_HISTORY=1` prints the group's whole history (one seed at a time).
        if std::env::var_os("SAMSA_SIM_GROUP_HISTORY").is_some() {
            eprintln!("{history}");
        }
        group_work = GroupWork::of(&history);
        let mut report = Report::default();
        samsa_spec::check_groups(
            &history,
            &finals,
            &CheckOptions {
                // The healing phase let the group stabilise and drain every partition.
                groups_stable_at_end: group_watermarks.is_some(),
                ..CheckOptions::default()
            },
            &mut report,
        );
        ops += history.operations().len();
        Some(report)
    } else {
        None
    };
    // No two starts (live brokers) with one id and incarnation.
    {
        let started = lock(&shared.incarnations);
        let mut seen = std::collections::BTreeSet::new();
        for (id, incarnation) in started.iter() {
            if !seen.insert((*id, incarnation.0)) {
                problems.push(format!(
                    "registration: two starts of node {id} with incarnation {incarnation:?}"
                ));
            }
        }
    }
    let admin_log = std::mem::take(&mut *lock(&admin_log));
    match &final_image {
        Some(image) => {
            for name in &admin_log.created {
                if !admin_log.delete_attempted.contains(name) && image.topic(name).is_none() {
                    problems.push(format!(
                        "admin: the creation of {name} was acknowledged, the final image lacks it"
                    ));
                }
            }
            for (name, value) in &admin_log.altered {
                if admin_log.delete_attempted.contains(name) {
                    continue;
                }
                let resource = samsa::controller::image::ConfigResource::topic(name);
                let held = image.configs_of(&resource).get("retention.ms").cloned();
                if held.as_ref() != Some(value) {
                    problems.push(format!("admin: retention.ms={value} on {name} was acknowledged, the final image holds {held:?}"));
                }
            }
            for name in &admin_log.deleted {
                if image.topic(name).is_some() {
                    problems.push(format!(
                        "admin: the deletion of {name} was acknowledged, the final image holds it"
                    ));
                }
            }
        }
        None => problems.push("no node applied any image".to_string()),
    }
    let recovering_elections = lock(&shared.recovering_elections).len();
    ClusterOutcome {
        reports,
        group,
        group_work,
        elections,
        problems,
        nemesis,
        admin_ok_by_node: admin_log.ok_by_node,
        ops,
        preferred_elected: elected.load(Ordering::Relaxed),
        recovering_elections,
    }
}

/// Where two replicas' final logs hold different records at one offset (below the shorter
/// one's end), if they do.
fn replicas_disagree(a: &samsa_spec::FinalLog, b: &samsa_spec::FinalLog) -> Option<String> {
    let b_at: BTreeMap<_, _> = b.records.iter().copied().collect();
    let end = a.log_end_offset().min(b.log_end_offset());
    for (offset, value) in a.records.iter().filter(|(o, _)| *o < end) {
        match b_at.get(offset) {
            Some(other) if other == value => {}
            Some(other) => {
                return Some(format!(
                    "offset {offset} holds {value:?} on one, {other:?} on the other"
                ))
            }
            None if *offset >= b.log_start_offset => {
                return Some(format!(
                    "offset {offset} holds {value:?} on one, nothing on the other"
                ))
            }
            None => {}
        }
    }
    None
}

/// `mode`, or a process crash where a power loss would exceed the page-cache suite's bound
/// (at most `min.insync.replicas` - 1 = one ISR member losing power at once): a node that
/// lost power holds its partitions' records again only once it is back in their ISRs, so
/// another power loss waits until every workload partition's ISR is whole.
fn bounded_power_loss(mode: CrashMode, options: &ClusterOptions, shared: &Shared) -> CrashMode {
    if !mode.loses_power() || matches!(options.flush, FlushPolicy::SyncBeforeAck) {
        return mode;
    }
    if isrs_whole(shared) {
        mode
    } else {
        CrashMode::Process
    }
}

/// Whether every workload partition's ISR holds all its replicas in the latest image: no
/// replica is then missing records, so one more that loses some (power loss in page-cache
/// mode, rot) is the only one of its partitions.
fn isrs_whole(shared: &Shared) -> bool {
    let image = lock(&shared.image).clone();
    image.is_some_and(|image| {
        (0..PARTITIONS).all(|p| {
            image
                .partition(TOPIC, p)
                .is_some_and(|p| p.isr.len() == p.replicas.len())
        })
    })
}

#[derive(Debug)]
enum Fault {
    Killed(i32, CrashMode),
    KilledTwo([(i32, CrashMode); 2]),
    Paused(i32),
    /// The node's links to every other node cut in one direction: its own packets
    /// (`outbound`) or theirs to it.
    OneWay {
        target: i32,
        outbound: bool,
    },
    Isolated(i32),
    Muted(i32),
    ClientsCut(i32),
    /// IO errors on a node's disk, at this many per million operations.
    IoErrors(i32, u32),
    /// The node was asked to stop gracefully (SIGTERM).
    Stopped(i32),
    /// Every link's latency drawn up to this many milliseconds.
    Slow(u64),
    /// One byte of a follower's synced log flipped (the file and byte, if a batch was
    /// there to rot), while it ran or (`down`) while it was down.
    Rotted {
        target: i32,
        partition: i32,
        down: bool,
        at: Option<(String, u64)>,
    },
}

fn heal(
    fault: &Fault,
    handle: &madsim::runtime::Handle,
    net: &madsim::net::NetSim,
    nodes: &BTreeMap<i32, madsim::runtime::NodeHandle>,
    disks: &BTreeMap<i32, MemDisk>,
    clients: &madsim::runtime::NodeHandle,
    shared: &Shared,
) -> String {
    match *fault {
        Fault::Killed(id, mode) => {
            shared.needs_restart[&id].store(false, Ordering::Release);
            handle.restart(nodes[&id].id());
            format!("restart node {id} (after {})", mode.name())
        }
        Fault::KilledTwo(killed) => {
            for (id, _) in killed {
                shared.needs_restart[&id].store(false, Ordering::Release);
                handle.restart(nodes[&id].id());
            }
            let [(a, a_mode), (b, b_mode)] = killed;
            format!(
                "restart nodes {a} (after {}) and {b} (after {})",
                a_mode.name(),
                b_mode.name()
            )
        }
        Fault::Paused(id) => {
            handle.resume(nodes[&id].id());
            format!("resume node {id}")
        }
        Fault::Isolated(id) => {
            for other in nodes.keys().copied().filter(|o| *o != id) {
                net.unclog_link(nodes[&id].id(), nodes[&other].id());
                net.unclog_link(nodes[&other].id(), nodes[&id].id());
            }
            format!("reconnect node {id}")
        }
        Fault::OneWay { target, outbound } => {
            for other in nodes.keys().copied().filter(|o| *o != target) {
                net.unclog_link(nodes[&target].id(), nodes[&other].id());
                net.unclog_link(nodes[&other].id(), nodes[&target].id());
            }
            let cut = if outbound { "from" } else { "to" };
            format!("the links {cut} node {target} back")
        }
        Fault::Muted(id) => {
            shared.muted[&id].store(false, Ordering::Release);
            format!("unmute node {id}")
        }
        Fault::ClientsCut(id) => {
            net.unclog_link(clients.id(), nodes[&id].id());
            net.unclog_link(nodes[&id].id(), clients.id());
            format!("reconnect the clients to node {id}")
        }
        Fault::Stopped(id) => {
            // Whatever is left of it (a controlled shutdown still waiting) goes with the
            // restart; its disk keeps everything, as after any process exit.
            shared.needs_restart[&id].store(false, Ordering::Release);
            handle.kill(nodes[&id].id());
            handle.restart(nodes[&id].id());
            format!("restart node {id} after its graceful stop")
        }
        Fault::Rotted {
            target, down: true, ..
        } => {
            shared.needs_restart[&target].store(false, Ordering::Release);
            handle.restart(nodes[&target].id());
            format!("restart node {target} (its log rotted while it was down)")
        }
        Fault::Rotted {
            target,
            partition,
            ref at,
            ..
        } => {
            format!("node {target}'s rot in partition {partition} ({at:?}) stays for its scrubber")
        }
        Fault::Slow(max_ms) => {
            net.update_config(|c| c.send_latency = madsim::net::Config::default().send_latency);
            format!("latency (up to {max_ms} ms) back to normal")
        }
        Fault::IoErrors(id, per_million) => {
            disks[&id].set_io_error_rate(0);
            format!("io errors ({per_million} per million) off on node {id}")
        }
    }
}

/// Seeds per cluster suite when `MADSIM_TEST_NUM` is not set.
pub const CLUSTER_SEEDS_DEFAULT: u64 = 200;

/// Runs a cluster suite's seeds; panics with the first failing seed's problems and replay
/// command. Every broker must have answered admin requests over the suite.
/// Seeds of the replicated suites in CI (`MADSIM_TEST_NUM` sets more).
pub const REPLICATED_SEEDS_DEFAULT: u64 = 100;

/// How long the planted lone-leader sequence cuts its two nodes off: above the suites'
/// `replica.lag.time.max.ms` and broker session timeout, so the ISRs shrink.
const LONE_LEADER_CUT_MS: u64 = 4_000;
/// How long its third node stays down.
const LONE_LEADER_KILL_MS: u64 = 2_000;
/// How often a fault is minority corruption when the suite asks for it.
const MINORITY_CORRUPTION_PROBABILITY: f64 = 0.3;

/// The longest the nemesis waits for a node's graceful stop to finish before it restarts
/// the node anyway: above the broker's controlled-shutdown wait, so that a stop the
/// controller answers completes (and leaves its clean-shutdown marker).
const GRACEFUL_STOP_WAIT_MS_MAX: u64 = 2 * samsa::broker::node::CONTROLLED_SHUTDOWN_WAIT_MS_MAX;

/// Seeds a suite's summary lists by name at most.
const SEEDS_LISTED_MAX: usize = 20;

/// What a suite's seeds did beyond passing, for the suites that must show they exercised
/// something.
#[derive(Clone, Debug, Default)]
pub struct SuiteSummary {
    /// Records lost and reads contradicted where the durability allows it, over every seed.
    pub losses_allowed: usize,
    pub reads_contradicted: usize,
    pub seeds_with_allowed_losses: Vec<u64>,
    /// Partitions preferred elections moved, over every seed.
    pub preferred_elected: u64,
    /// RECOVERING leaderships of workload partitions, over every seed.
    pub recovering_elections: usize,
}

pub fn run_cluster_suite(
    test_name: &str,
    options: &ClusterOptions,
    default_count: u64,
) -> SuiteSummary {
    let range = crate::harness::seeds(default_count);
    #[allow(clippy::disallowed_methods)] // real elapsed time of the suite, for the report
    let began = std::time::Instant::now();
    let mut admin_ok: BTreeMap<i32, u64> = BTreeMap::new();
    let mut ops = 0;
    let mut group_work = GroupWork::default();
    let mut elections = 0;
    let mut summary = SuiteSummary::default();
    for seed in range.clone() {
        let outcome = run_cluster_seed(seed, options);
        let (lost, contradicted) = outcome.allowed_losses();
        summary.losses_allowed += lost;
        summary.reads_contradicted += contradicted;
        if lost + contradicted > 0 {
            summary.seeds_with_allowed_losses.push(seed);
        }
        summary.preferred_elected += outcome.preferred_elected;
        summary.recovering_elections += outcome.recovering_elections;
        if std::env::var_os("SAMSA_SIM_VERBOSE").is_some() {
            eprintln!(
                "{test_name}: seed {seed}\n  {}",
                outcome.nemesis.join("\n  ")
            );
            for (p, r) in &outcome.reports {
                eprintln!(
                    "  partition {p}: {} ok, {} failed, {} unknown",
                    r.ops_ok, r.ops_failed, r.ops_unknown
                );
            }
            eprintln!("  group: {:?}", outcome.group_work);
            eprintln!(
                "  RECOVERING leaderships {}, allowed losses (records, reads) {:?}, preferred \
                 elections {}",
                outcome.recovering_elections,
                outcome.allowed_losses(),
                outcome.preferred_elected
            );
        }
        ops += outcome.ops;
        group_work.add(outcome.group_work);
        elections += outcome.elections;
        for (id, n) in &outcome.admin_ok_by_node {
            *admin_ok.entry(*id).or_insert(0) += n;
        }
        assert!(
            outcome.is_valid(),
            "{test_name}: seed {seed} failed:\n{}\nnemesis:\n  {}\nreplay: MADSIM_TEST_SEED={seed} MADSIM_TEST_NUM=1 cargo test --features sim --test sim {test_name} -- --exact",
            outcome.summary(),
            outcome.nemesis.join("\n  ")
        );
    }
    if options.groups.is_some() {
        assert!(
            group_work.joins > 0
                && group_work.records_delivered > 0
                && group_work.commits_acknowledged > 0,
            "{test_name}: the consumer group got nothing done over the suite: {group_work:?}"
        );
    }
    for id in 1..=options.nodes {
        assert!(
            admin_ok.get(&id).copied().unwrap_or(0) > 0,
            "{test_name}: node {id} never answered an admin request with success: {admin_ok:?}"
        );
    }
    eprintln!(
        "{test_name}: {} seeds ({}..{}) passed: {ops} operations, admin successes by node {admin_ok:?}, group {group_work:?}, {elections} quorum leaderships, {:.1} s",
        range.end - range.start,
        range.start,
        range.end,
        began.elapsed().as_secs_f64()
    );
    if options.durability() != samsa_spec::Durability::Committed {
        eprintln!(
            "{test_name}: durability {:?} ({} RECOVERING leaderships): {} records lost and {} \
             reads contradicted by the final logs, as Kafka allows there, in {} seeds, the \
             first {:?}",
            options.durability(),
            summary.recovering_elections,
            summary.losses_allowed,
            summary.reads_contradicted,
            summary.seeds_with_allowed_losses.len(),
            &summary.seeds_with_allowed_losses[..summary
                .seeds_with_allowed_losses
                .len()
                .min(SEEDS_LISTED_MAX)]
        );
    }
    if options.preferred_elections {
        eprintln!(
            "{test_name}: preferred elections moved {} partition leaderships",
            summary.preferred_elected
        );
    }
    summary
}
