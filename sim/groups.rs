//! The consumer-group workload of the group suites (`Options::groups`): a producer fills a
//! topic of [`GROUP_PARTITIONS`] partitions while [`GroupOptions::members`] members of one
//! classic group consume it, each a task driving `samsa::client::connection` by hand:
//! FindCoordinator, JoinGroup (with the MEMBER_ID_REQUIRED rejoin), SyncGroup (the leader
//! computes a range assignment), a Heartbeat every [`HEARTBEAT_INTERVAL_MS`], OffsetFetch of
//! its partitions after each join (and after each reconnect to the coordinator), Fetch of them
//! from there, OffsetCommit of what it consumed every [`COMMIT_INTERVAL_MS`] and before giving
//! an assignment up, and LeaveGroup sometimes. Every call is recorded in the spec's history:
//! Join (Joined with generation, member id and assignment), Poll (what was delivered),
//! OffsetCommit/OffsetFetch, and a Revoked event whenever the member gives its assignment up
//! (a rebalance under the eager protocol, being fenced, leaving, crashing).
//!
//! The members' own nemesis (the harness's kills the broker with every survivable disk crash
//! mode, power loss included, and restarts it, injects IO errors, clogs links and jumps the
//! broker's clock): a member crashes (its task is aborted without a LeaveGroup, its
//! connections dropped, its in-flight request left without an outcome) and comes back with a
//! fresh member id; a member pauses past its session timeout and resumes as a zombie, first
//! polling and committing with its old generation (the coordinator must answer
//! UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION) and then rejoining; and after a rebalance a member
//! sometimes sends its previous generation's commit late (as a `commitAsync` queued before the
//! rebalance would), which the coordinator must refuse.
//!
//! Then a quiet phase: no faults, the producer stops, the group stabilises and drains every
//! partition. The harness reads each partition offline after the final crash and runs
//! `check_groups` with `groups_stable_at_end` (split-assignment, generation-regress,
//! zombie-commit, lost-commit, commit-regress, and unseen: every record below the final high
//! watermark delivered to the group).

use crate::harness::Recorder;
use crate::workload::{self, new_client, Undecodable, CONNECT_TIMEOUT_MS, REQUEST_TIMEOUT_MS};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use samsa::broker::config::GroupSettings;
use samsa::client::connection::{Connection, ConnectionLimits};
use samsa::client::{Client, FetchOptions};
use samsa::coordinator::shard::GroupConfig;
use samsa::protocol::error::ErrorCode;
use samsa::protocol::find_coordinator::{FindCoordinatorRequest, FindCoordinatorResponse};
use samsa::protocol::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use samsa::protocol::join_group::{JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse};
use samsa::protocol::leave_group::{LeaveGroupRequest, LeaveGroupResponse, MemberIdentity};
use samsa::protocol::message::Message;
use samsa::protocol::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    OffsetCommitResponse,
};
use samsa::protocol::offset_fetch::{
    OffsetFetchRequest, OffsetFetchRequestTopic, OffsetFetchResponse,
};
use samsa::protocol::record_batch::BatchBuilder;
use samsa::protocol::sync_group::{
    SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse,
};
use samsa::protocol::types::{LeaderEpoch, Offset};
use samsa::rt::clock::Clock;
use samsa::rt::time::{self, Duration, Instant};
use samsa_spec::{CommitResult, Generation, GroupEvent, Op, Outcome, ProcessId, TopicPartition};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The group the members form and the topic they consume.
pub const GROUP: &str = "sim-group";
pub const GROUP_TOPIC: &str = "groups";
pub const GROUP_PARTITIONS: i32 = 4;
/// The members' session and rebalance timeouts, and how often they heartbeat.
pub const SESSION_TIMEOUT_MS: i32 = 500;
pub const REBALANCE_TIMEOUT_MS: i32 = 700;
pub const HEARTBEAT_INTERVAL_MS: u64 = 100;
/// The coordinator's `group.initial.rebalance.delay.ms` and session bounds here.
pub const INITIAL_REBALANCE_DELAY_MS: i32 = 30;
pub const MIN_SESSION_TIMEOUT_MS: i32 = 100;
pub const MAX_SESSION_TIMEOUT_MS: i32 = 10_000;
/// How often a member commits what it consumed.
pub const COMMIT_INTERVAL_MS: u64 = 80;
/// Pause between a member's steps (one poll each).
pub const POLL_PAUSE_MS_MAX: u64 = 10;
/// Backoff after a coordinator error or a lost connection.
pub const RETRY_BACKOFF_MS: u64 = 40;
/// JoinGroup rounds within one Join op (the MEMBER_ID_REQUIRED rejoin, a changed member id).
pub const JOIN_ROUNDS_MAX: u32 = 3;
/// Bytes asked for per poll.
pub const POLL_BYTES_MAX: i32 = 2048;
/// Per member step (about one per 5 ms): chances of a pause past the session timeout and
/// of a LeaveGroup.
pub const PAUSE_PER_MILLION: u32 = 2_000;
pub const LEAVE_PER_MILLION: u32 = 1_000;
/// Chance that a rebalance is followed by the previous generation's commit, sent late.
pub const STALE_COMMIT_PROBABILITY: f64 = 1.0;
/// Chance that an incarnation of a member crashes, and when (after its start).
pub const CRASH_PROBABILITY: f64 = 0.5;
pub const CRASH_AFTER_MS_MIN: u64 = 300;
pub const CRASH_AFTER_MS_MAX: u64 = 3_000;
/// A crashed member stays down this long at most before its restart.
pub const RESTART_MS_MAX: u64 = 300;
/// After the stop, a member drains its partitions to their high watermark for at most this
/// long (liveness is judged on what it delivered by then).
pub const DRAIN_MS_MAX: u64 = 3_000;
/// The producer's pause between batches.
pub const PRODUCE_PAUSE_MS_MAX: u64 = 15;
/// History processes: the producer's, and the first member slot's (one per slot after it).
pub const PRODUCER_PROCESS: u32 = 500;
pub const MEMBER_PROCESS_BASE: u32 = 600;
/// Member slots at most; incarnation i of slot s is process `base + s + i * this`.
pub const MEMBER_SLOTS_MAX: u32 = 100;

/// What the group workload does in one run.
#[derive(Clone, Debug)]
pub struct GroupOptions {
    pub members: u32,
    /// Members crash and pause past their session timeout during the safety phase.
    pub member_faults: bool,
    /// A commit leaves out partitions whose position has not moved since their offset was
    /// last fetched or acknowledged (librdkafka's auto-commit does the same), so every
    /// commit sent changes the stored offset and a lost one shows in the next OffsetFetch.
    /// Off by default: a zombie's unchanged commit is what the stale-generation checks see.
    pub skip_unchanged_commits: bool,
}

impl Default for GroupOptions {
    fn default() -> Self {
        GroupOptions {
            members: 3,
            member_faults: true,
            skip_unchanged_commits: false,
        }
    }
}

/// The broker's group settings for the simulation: a short initial rebalance delay and
/// session bounds that admit the members' simulated timeouts; one `__consumer_offsets`
/// partition (the disk is simulated: fewer logs, faster runs).
/// `offsets.topic.segment.bytes` of the simulated node.
pub const OFFSETS_SEGMENT_BYTES: i64 = 16 * 1024;

pub fn broker_settings() -> GroupSettings {
    GroupSettings {
        coordinator: GroupConfig {
            min_session_timeout_ms: MIN_SESSION_TIMEOUT_MS,
            max_session_timeout_ms: MAX_SESSION_TIMEOUT_MS,
            initial_rebalance_delay_ms: INITIAL_REBALANCE_DELAY_MS,
            ..GroupConfig::default()
        },
        offsets_topic_num_partitions: 1,
        // Small segments, so that `__consumer_offsets` rolls within a run and the log cleaner
        // (see `harness::broker_config`) compacts it while the group works.
        offsets_topic_segment_bytes: OFFSETS_SEGMENT_BYTES,
        ..GroupSettings::default()
    }
}

/// The flags the harness drives the group workload with.
#[derive(Clone)]
pub struct Phase {
    /// Set when the healing phase begins: no more member faults, the producer stops.
    pub quiet: Arc<AtomicBool>,
    /// Set at the end: members drain and stop.
    pub stop: Arc<AtomicBool>,
}

/// Runs the producer and the members until the stop, then answers each partition's high
/// watermark (for unseen; the producer stopped at the quiet phase, so it no longer moves).
pub async fn run(
    bootstrap: String,
    recorder: Recorder,
    mut rng: SmallRng,
    clock: Clock,
    options: GroupOptions,
    phase: Phase,
) -> BTreeMap<i32, i64> {
    let mut tasks = Vec::new();
    {
        let producer = produce(
            bootstrap.clone(),
            SmallRng::seed_from_u64(rng.gen()),
            clock,
            phase.clone(),
            recorder.clone(),
        );
        tasks.push(samsa::rt::task::spawn(producer));
    }
    for slot in 0..options.members {
        let slot_run = member_slot(
            MEMBER_PROCESS_BASE + slot,
            bootstrap.clone(),
            recorder.clone(),
            SmallRng::seed_from_u64(rng.gen()),
            options.clone(),
            phase.clone(),
        );
        tasks.push(samsa::rt::task::spawn(slot_run));
    }
    for task in tasks {
        let _ = task.await;
    }
    let mut client = new_client(&bootstrap, "sim-group-final");
    let mut watermarks = BTreeMap::new();
    for partition in 0..GROUP_PARTITIONS {
        for _ in 0..JOIN_ROUNDS_MAX {
            if let Ok(f) = client
                .fetch(GROUP_TOPIC, partition, 0, fetch_options(1))
                .await
            {
                if f.error == ErrorCode::NONE {
                    watermarks.insert(partition, f.high_watermark);
                    break;
                }
            }
            time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
        }
    }
    watermarks
}

fn fetch_options(max_bytes: i32) -> FetchOptions {
    FetchOptions {
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes,
        partition_max_bytes: max_bytes,
        isolation_level: 0,
    }
}

/// Produces the workload's records (values unique to this process) round-robin over the
/// topic's partitions until the quiet phase; the topic is auto-created with the broker's
/// `num.partitions`. Nothing of it goes into the history but failures: unseen judges the
/// logs as read offline, whatever the acknowledgements said.
async fn produce(
    bootstrap: String,
    mut rng: SmallRng,
    clock: Clock,
    phase: Phase,
    recorder: Recorder,
) {
    let mut client = new_client(&bootstrap, "sim-group-producer");
    let mut seq = 0u32;
    let mut partition = 0;
    while !phase.quiet.load(Ordering::Acquire) {
        time::sleep(Duration::from_millis(
            rng.gen_range(1..=PRODUCE_PAUSE_MS_MAX),
        ))
        .await;
        let (_, batch) = workload::build_batch(
            PRODUCER_PROCESS,
            &mut seq,
            &mut rng,
            &clock,
            BatchBuilder::new(0),
            workload::Keying::BY_PROCESS,
        );
        if let Err(e) = client
            .produce(GROUP_TOPIC, partition, batch, -1, REQUEST_TIMEOUT_MS as i32)
            .await
        {
            recorder.note(u64::from(PRODUCER_PROCESS), format!("produce failed: {e}"));
        }
        partition = (partition + 1) % GROUP_PARTITIONS;
    }
}

/// What a member slot's supervisor knows of its current incarnation, to report the
/// revocation when it crashes it.
type Owned = Arc<Mutex<Option<(String, Generation)>>>;

/// One member slot: incarnations of a member, each crashed (aborted, no LeaveGroup) at a
/// random moment or ended by a LeaveGroup, then restarted with a fresh member id.
async fn member_slot(
    process: u32,
    bootstrap: String,
    recorder: Recorder,
    mut rng: SmallRng,
    options: GroupOptions,
    phase: Phase,
) {
    let mut incarnation = 0u32;
    let slot = process;
    while !phase.stop.load(Ordering::Acquire) {
        incarnation += 1;
        // Each incarnation is a process of its own: a crashed one may leave its last
        // operation without an outcome, and a process is sequential.
        let process = slot + MEMBER_SLOTS_MAX * incarnation;
        let owned: Owned = Arc::new(Mutex::new(None));
        let member = Member {
            process,
            recorder: recorder.clone(),
            rng: SmallRng::seed_from_u64(rng.gen()),
            options: options.clone(),
            phase: phase.clone(),
            client: new_client(&bootstrap, &format!("sim-member-{process}-{incarnation}")),
            bootstrap: bootstrap.clone(),
            bootstrap_turn: 0,
            coordinator: None,
            member_id: String::new(),
            joined: None,
            positions: BTreeMap::new(),
            committed: BTreeMap::new(),
            high_watermarks: BTreeMap::new(),
            previous: None,
            owned: Arc::clone(&owned),
            refetch: false,
        };
        let mut task = samsa::rt::task::spawn(member.run());
        let crash = options.member_faults && rng.gen_bool(CRASH_PROBABILITY);
        let crash_at = time::now()
            + Duration::from_millis(rng.gen_range(CRASH_AFTER_MS_MIN..CRASH_AFTER_MS_MAX));
        loop {
            tokio::select! {
                biased;
                _ = &mut task => break,
                _ = time::sleep(Duration::from_millis(HEARTBEAT_INTERVAL_MS)) => {}
            }
            if crash && time::now() >= crash_at && !phase.quiet.load(Ordering::Acquire) {
                task.abort();
                let _ = (&mut task).await;
                recorder.note(u64::from(process), "member crashed");
                if let Some((member_id, generation)) = lock(&owned).take() {
                    revoke(&recorder, process, member_id, generation);
                }
                time::sleep(Duration::from_millis(rng.gen_range(0..=RESTART_MS_MAX))).await;
                break;
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn revoke(recorder: &Recorder, process: u32, member_id: String, generation: Generation) {
    recorder.group(
        ProcessId::from(process),
        GroupEvent::Revoked {
            group: GROUP.to_string(),
            member_id,
            generation,
        },
    );
}

fn tp(partition: i32) -> TopicPartition {
    TopicPartition::new(GROUP_TOPIC, partition)
}

/// The generation a member joined and the partitions it owns in it.
#[derive(Clone, Debug)]
struct Joined {
    generation: Generation,
    partitions: Vec<i32>,
}

/// How a group call went, as the member acts on it.
enum Call<T> {
    Ok(T),
    /// The member's generation or id is no longer valid: give the assignment up and rejoin
    /// (with a fresh member id when `forget_id`).
    Rejoin {
        forget_id: bool,
    },
    /// A coordinator error or a lost connection: back off, reconnect, try again.
    Retry,
}

struct Member {
    process: u32,
    recorder: Recorder,
    rng: SmallRng,
    options: GroupOptions,
    phase: Phase,
    /// For fetches (the partition's leader) and the topic's metadata.
    client: Client,
    /// The brokers' addresses, comma-separated; FindCoordinator goes to each in turn.
    bootstrap: String,
    /// How many FindCoordinator connections this member opened (picks the next address).
    bootstrap_turn: usize,
    /// The group coordinator's connection, once found.
    coordinator: Option<Connection>,
    member_id: String,
    joined: Option<Joined>,
    /// The next offset to consume of each owned partition.
    positions: BTreeMap<i32, i64>,
    /// The offset of each owned partition as last fetched or acknowledged in this
    /// generation (for `GroupOptions::skip_unchanged_commits`).
    committed: BTreeMap<i32, i64>,
    /// The high watermark each owned partition's latest poll answered.
    high_watermarks: BTreeMap<i32, i64>,
    /// The generation and positions before the latest rebalance, for the late commit.
    previous: Option<(Generation, BTreeMap<i32, i64>)>,
    owned: Owned,
    /// A new coordinator connection was made while joined: fetch the offsets again.
    refetch: bool,
}

impl Member {
    fn pid(&self) -> ProcessId {
        ProcessId::from(self.process)
    }

    async fn run(mut self) {
        let mut next_heartbeat = time::now();
        let mut next_commit = time::now();
        let mut turn = 0usize;
        let mut drain_until: Option<Instant> = None;
        loop {
            let stopping = self.phase.stop.load(Ordering::Acquire);
            if stopping {
                let until = *drain_until
                    .get_or_insert_with(|| time::now() + Duration::from_millis(DRAIN_MS_MAX));
                if time::now() >= until {
                    return;
                }
            }
            time::sleep(Duration::from_millis(
                self.rng.gen_range(1..=POLL_PAUSE_MS_MAX),
            ))
            .await;
            let Some(joined) = self.joined.clone() else {
                if !self.join().await {
                    time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
                }
                continue;
            };
            if std::mem::take(&mut self.refetch) {
                self.fetch_offsets(&joined).await;
                continue;
            }
            if self.options.member_faults && !self.phase.quiet.load(Ordering::Acquire) {
                let roll = self.rng.gen_range(0..1_000_000);
                if roll < PAUSE_PER_MILLION {
                    self.pause_as_zombie(&joined).await;
                    continue;
                }
                if roll < PAUSE_PER_MILLION + LEAVE_PER_MILLION {
                    self.commit(&joined).await;
                    self.leave(&joined).await;
                    return;
                }
            }
            let now = time::now();
            if now >= next_heartbeat {
                next_heartbeat = now + Duration::from_millis(HEARTBEAT_INTERVAL_MS);
                if !self.heartbeat(&joined).await {
                    continue;
                }
            }
            if now >= next_commit {
                next_commit = now + Duration::from_millis(COMMIT_INTERVAL_MS);
                self.commit(&joined).await;
                continue;
            }
            if joined.partitions.is_empty() {
                if stopping {
                    return;
                }
                continue;
            }
            let partition = joined.partitions[turn % joined.partitions.len()];
            turn += 1;
            let caught_up = self.poll(&joined, partition).await;
            if stopping && caught_up {
                // Drained: every partition answered nothing above its high watermark.
                let all = joined
                    .partitions
                    .iter()
                    .all(|p| self.positions.get(p).copied().unwrap_or(0) >= self.seen_hw(*p));
                if all {
                    self.commit(&joined).await;
                    return;
                }
            }
        }
    }

    /// The high watermark the member last saw for `partition` (none yet: not drained).
    fn seen_hw(&self, partition: i32) -> i64 {
        self.high_watermarks
            .get(&partition)
            .copied()
            .unwrap_or(i64::MAX)
    }

    /// The member is paused (a long GC, a stalled host) past its session timeout, then
    /// resumes as a zombie: it polls and commits with its old generation before its
    /// heartbeat tells it to rejoin.
    async fn pause_as_zombie(&mut self, joined: &Joined) {
        let pause_ms = self.rng.gen_range(
            u64::from(SESSION_TIMEOUT_MS.unsigned_abs()) * 3 / 2
                ..=u64::from(SESSION_TIMEOUT_MS.unsigned_abs()) * 3,
        );
        self.recorder
            .note(self.pid(), format!("member pauses {pause_ms} ms"));
        time::sleep(Duration::from_millis(pause_ms)).await;
        if let Some(&partition) = joined.partitions.first() {
            self.poll(joined, partition).await;
        }
        self.commit(joined).await;
        self.heartbeat(joined).await;
    }

    /// The coordinator's connection: FindCoordinator through the bootstrap, then a
    /// connection to the node it names. An OffsetFetch follows every new connection (in the
    /// member's next step: it is one sequential process), as the member re-validates its
    /// positions after a coordinator failover.
    async fn coordinator(&mut self) -> Option<&mut Connection> {
        if self.coordinator.as_ref().is_some_and(|c| !c.is_broken()) {
            return self.coordinator.as_mut();
        }
        self.coordinator = None;
        let limits = ConnectionLimits {
            request_timeout_ms: REQUEST_TIMEOUT_MS,
            connect_timeout_ms: CONNECT_TIMEOUT_MS,
            ..ConnectionLimits::default()
        };
        let client_id = format!("sim-member-{}", self.process);
        let addresses: Vec<&str> = self.bootstrap.split(',').collect();
        let address = addresses[self.bootstrap_turn % addresses.len()];
        self.bootstrap_turn = self.bootstrap_turn.wrapping_add(1);
        let mut bootstrap = Connection::connect(address, &client_id, limits.clone())
            .await
            .ok()?;
        let request = FindCoordinatorRequest {
            key: GROUP.to_string(),
            key_type: 0,
            ..Default::default()
        };
        let found: FindCoordinatorResponse = send(&mut bootstrap, &request, 3, None).await.ok()?;
        if found.error_code != 0 {
            return None;
        }
        let addr = format!("{}:{}", found.host, found.port);
        let connection = Connection::connect(&addr, &client_id, limits).await.ok()?;
        self.coordinator = Some(connection);
        self.refetch = self.joined.is_some();
        self.coordinator.as_mut()
    }

    /// Sends one group request to the coordinator; `Err` when there is none or the
    /// connection failed (it is then dropped).
    async fn call<Req: Message, Resp: Message>(
        &mut self,
        request: &Req,
        version: i16,
        extra_ms: Option<u64>,
    ) -> Result<Resp, String> {
        let Some(connection) = self.coordinator().await else {
            return Err("no coordinator".to_string());
        };
        let result = send(connection, request, version, extra_ms).await;
        if result.is_err() {
            self.coordinator = None;
        }
        result
    }

    /// One Join op: JoinGroup (again with the id MEMBER_ID_REQUIRED hands out), the range
    /// assignment when leader, SyncGroup. True when the member joined.
    async fn join(&mut self) -> bool {
        let op = self.recorder.invoke(
            self.pid(),
            Op::Join {
                group: GROUP.to_string(),
            },
        );
        let outcome = self.join_rounds().await;
        let joined = matches!(outcome, Outcome::Joined { .. });
        if let Outcome::Joined {
            member_id,
            generation,
            ..
        } = &outcome
        {
            *lock(&self.owned) = Some((member_id.clone(), *generation));
        }
        self.recorder.complete(op, outcome);
        if let Some(joined) = self.joined.clone() {
            self.fetch_offsets(&joined).await;
            self.late_commit(&joined).await;
        }
        joined
    }

    async fn join_rounds(&mut self) -> Outcome {
        let mut last = String::new();
        for _ in 0..JOIN_ROUNDS_MAX {
            let request = JoinGroupRequest {
                group_id: GROUP.to_string(),
                session_timeout_ms: SESSION_TIMEOUT_MS,
                rebalance_timeout_ms: REBALANCE_TIMEOUT_MS,
                member_id: self.member_id.clone(),
                protocol_type: "consumer".to_string(),
                protocols: vec![JoinGroupRequestProtocol {
                    name: "range".to_string(),
                    metadata: subscription(),
                }],
                ..Default::default()
            };
            let wait = Some(u64::from(REBALANCE_TIMEOUT_MS.unsigned_abs()));
            let response: JoinGroupResponse = match self.call(&request, 5, wait).await {
                Ok(r) => r,
                Err(e) => return Outcome::Unknown { reason: e },
            };
            let code = ErrorCode(response.error_code);
            if code == ErrorCode::MEMBER_ID_REQUIRED {
                self.member_id = response.member_id;
                continue;
            }
            if code == ErrorCode::UNKNOWN_MEMBER_ID {
                self.member_id.clear();
                last = format!("JoinGroup: {code}");
                continue;
            }
            if code != ErrorCode::NONE {
                if is_coordinator_error(code) {
                    self.coordinator = None;
                }
                return Outcome::Failed {
                    reason: format!("JoinGroup: {code}"),
                };
            }
            self.member_id = response.member_id.clone();
            let assignments = if response.leader == response.member_id {
                range_assignment(&response)
            } else {
                Vec::new()
            };
            let sync = SyncGroupRequest {
                group_id: GROUP.to_string(),
                generation_id: response.generation_id,
                member_id: self.member_id.clone(),
                assignments,
                ..Default::default()
            };
            let wait = Some(u64::from(SESSION_TIMEOUT_MS.unsigned_abs()));
            let synced: SyncGroupResponse = match self.call(&sync, 3, wait).await {
                Ok(r) => r,
                Err(e) => return Outcome::Unknown { reason: e },
            };
            let code = ErrorCode(synced.error_code);
            if code != ErrorCode::NONE {
                if code == ErrorCode::UNKNOWN_MEMBER_ID {
                    self.member_id.clear();
                }
                return Outcome::Failed {
                    reason: format!("SyncGroup: {code}"),
                };
            }
            let partitions = decode_assignment(&synced.assignment);
            self.positions.clear();
            self.committed.clear();
            self.high_watermarks.clear();
            self.joined = Some(Joined {
                generation: response.generation_id,
                partitions: partitions.clone(),
            });
            return Outcome::Joined {
                member_id: self.member_id.clone(),
                generation: response.generation_id,
                partitions: partitions.into_iter().map(tp).collect(),
            };
        }
        Outcome::Failed {
            reason: format!("no join in {JOIN_ROUNDS_MAX} rounds: {last}"),
        }
    }

    /// After a rebalance, sometimes the previous generation's commit arrives late; a correct
    /// coordinator refuses it (ILLEGAL_GENERATION). The member carries on either way.
    async fn late_commit(&mut self, joined: &Joined) {
        let Some((generation, positions)) = self.previous.take() else {
            return;
        };
        if generation >= joined.generation
            || positions.is_empty()
            || !self.rng.gen_bool(STALE_COMMIT_PROBABILITY)
        {
            return;
        }
        let _ = self
            .commit_offsets(generation, positions.into_iter().collect())
            .await;
    }

    /// Gives the assignment up (eager protocol), remembering what a late commit would carry.
    fn give_up(&mut self, forget_id: bool) {
        if let Some(joined) = self.joined.take() {
            revoke(
                &self.recorder,
                self.process,
                self.member_id.clone(),
                joined.generation,
            );
            self.previous = Some((joined.generation, std::mem::take(&mut self.positions)));
        }
        *lock(&self.owned) = None;
        if forget_id {
            self.member_id.clear();
        }
    }

    /// Acts on a call's verdict; true when it was Ok.
    fn settle<T>(&mut self, call: Call<T>) -> Option<T> {
        match call {
            Call::Ok(t) => Some(t),
            Call::Rejoin { forget_id } => {
                self.give_up(forget_id);
                None
            }
            Call::Retry => None,
        }
    }

    /// A Heartbeat; false when the member must rejoin or retry.
    async fn heartbeat(&mut self, joined: &Joined) -> bool {
        let request = HeartbeatRequest {
            group_id: GROUP.to_string(),
            generation_id: joined.generation,
            member_id: self.member_id.clone(),
            ..Default::default()
        };
        let call = match self.call::<_, HeartbeatResponse>(&request, 3, None).await {
            Ok(r) => {
                let code = ErrorCode(r.error_code);
                if code == ErrorCode::REBALANCE_IN_PROGRESS {
                    // Eager protocol: commit what was consumed, then revoke everything.
                    self.commit(joined).await;
                }
                if is_coordinator_error(code) {
                    self.coordinator = None;
                }
                verdict(code, ())
            }
            Err(_) => Call::Retry,
        };
        self.settle(call).is_some()
    }

    /// Commits the positions of every owned partition in the joined generation.
    async fn commit(&mut self, joined: &Joined) {
        let offsets: Vec<(i32, i64)> = joined
            .partitions
            .iter()
            .filter_map(|p| self.positions.get(p).map(|&o| (*p, o)))
            .filter(|(p, o)| {
                !self.options.skip_unchanged_commits || self.committed.get(p) != Some(o)
            })
            .collect();
        if offsets.is_empty() {
            return;
        }
        let call = self
            .commit_offsets(joined.generation, offsets.clone())
            .await;
        // A refusal of the current generation's commit means the member must rejoin; one
        // of a late commit of an older generation is what the coordinator must answer.
        if self
            .joined
            .as_ref()
            .is_some_and(|j| j.generation == joined.generation)
        {
            if matches!(call, Call::Ok(())) {
                self.committed.extend(offsets);
            }
            self.settle(call);
        }
    }

    async fn commit_offsets(
        &mut self,
        generation: Generation,
        offsets: Vec<(i32, i64)>,
    ) -> Call<()> {
        let op = self.recorder.invoke(
            self.pid(),
            Op::OffsetCommit {
                group: GROUP.to_string(),
                member_id: self.member_id.clone(),
                generation,
                offsets: offsets.iter().map(|&(p, o)| (tp(p), o)).collect(),
            },
        );
        let request = OffsetCommitRequest {
            group_id: GROUP.to_string(),
            generation_id_or_member_epoch: generation,
            member_id: self.member_id.clone(),
            topics: vec![OffsetCommitRequestTopic {
                name: GROUP_TOPIC.to_string(),
                partitions: offsets
                    .iter()
                    .map(|&(p, o)| OffsetCommitRequestPartition {
                        partition_index: p,
                        committed_offset: Offset(o),
                        committed_leader_epoch: LeaderEpoch(-1),
                        committed_metadata: None,
                    })
                    .collect(),
            }],
            ..Default::default()
        };
        match self
            .call::<_, OffsetCommitResponse>(&request, 7, None)
            .await
        {
            Ok(response) => {
                let mut results = Vec::new();
                let mut worst = ErrorCode::NONE;
                for topic in &response.topics {
                    for p in &topic.partitions {
                        let code = ErrorCode(p.error_code);
                        if code != ErrorCode::NONE {
                            worst = code;
                        }
                        results.push((tp(p.partition_index), commit_result(code)));
                    }
                }
                self.recorder.complete(op, Outcome::Committed { results });
                verdict(worst, ())
            }
            Err(reason) => {
                self.recorder.complete(op, Outcome::Unknown { reason });
                Call::Retry
            }
        }
    }

    /// OffsetFetch of the owned partitions: their positions start there (or at 0, the
    /// earliest, without a committed offset).
    async fn fetch_offsets(&mut self, joined: &Joined) {
        if joined.partitions.is_empty() {
            return;
        }
        let op = self.recorder.invoke(
            self.pid(),
            Op::OffsetFetch {
                group: GROUP.to_string(),
                partitions: joined.partitions.iter().map(|&p| tp(p)).collect(),
            },
        );
        let request = OffsetFetchRequest {
            group_id: GROUP.to_string(),
            topics: Some(vec![OffsetFetchRequestTopic {
                name: GROUP_TOPIC.to_string(),
                partition_indexes: joined.partitions.clone(),
            }]),
            ..Default::default()
        };
        let result: Result<OffsetFetchResponse, String> = self.call(&request, 7, None).await;
        match result {
            Ok(response) if response.error_code == 0 => {
                let mut offsets = Vec::new();
                for topic in &response.topics {
                    for p in &topic.partitions {
                        if p.error_code != 0 {
                            continue;
                        }
                        let committed = (p.committed_offset.0 >= 0).then_some(p.committed_offset.0);
                        self.positions
                            .insert(p.partition_index, committed.unwrap_or(0));
                        match committed {
                            Some(offset) => self.committed.insert(p.partition_index, offset),
                            None => self.committed.remove(&p.partition_index),
                        };
                        offsets.push((tp(p.partition_index), committed));
                    }
                }
                self.recorder.complete(op, Outcome::Fetched { offsets });
            }
            Ok(response) => self.recorder.complete(
                op,
                Outcome::Failed {
                    reason: format!("OffsetFetch: {}", ErrorCode(response.error_code)),
                },
            ),
            Err(reason) => self.recorder.complete(op, Outcome::Failed { reason }),
        }
    }

    /// One Poll of `partition` from its position; true when the answer reached the high
    /// watermark (nothing more to consume for now).
    async fn poll(&mut self, joined: &Joined, partition: i32) -> bool {
        let Some(&from) = self.positions.get(&partition) else {
            // No position yet (the OffsetFetch failed): fetch the offsets again.
            self.fetch_offsets(joined).await;
            return false;
        };
        let op = self.recorder.invoke(
            self.pid(),
            Op::Poll {
                group: GROUP.to_string(),
                member_id: self.member_id.clone(),
                generation: joined.generation,
                partition: tp(partition),
                from,
            },
        );
        let fetched = self
            .client
            .fetch(GROUP_TOPIC, partition, from, fetch_options(POLL_BYTES_MAX))
            .await;
        let (outcome, caught_up) = match fetched {
            Ok(f) if f.error == ErrorCode::NONE => {
                match workload::decode_records(f.records, from) {
                    Ok(records) => {
                        let next = records.last().map_or(from, |&(o, _)| o + 1);
                        self.positions.insert(partition, next);
                        self.high_watermarks.insert(partition, f.high_watermark);
                        (
                            Outcome::Read {
                                records,
                                high_watermark: f.high_watermark,
                            },
                            next >= f.high_watermark,
                        )
                    }
                    Err(Undecodable::Corrupt { reason, .. } | Undecodable::Malformed(reason)) => {
                        (Outcome::Failed { reason }, false)
                    }
                }
            }
            Ok(f) => {
                if f.error == ErrorCode::OFFSET_OUT_OF_RANGE {
                    // auto.offset.reset=earliest.
                    self.positions.insert(partition, f.log_start_offset.max(0));
                }
                (
                    Outcome::Failed {
                        reason: format!("fetch from {from}: {}", f.error),
                    },
                    false,
                )
            }
            Err(e) => (
                Outcome::Failed {
                    reason: e.to_string(),
                },
                false,
            ),
        };
        self.recorder.complete(op, outcome);
        caught_up
    }

    /// LeaveGroup: the member gives its assignment up and its incarnation ends.
    async fn leave(&mut self, joined: &Joined) {
        let request = LeaveGroupRequest {
            group_id: GROUP.to_string(),
            members: vec![MemberIdentity {
                member_id: self.member_id.clone(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let left = self.call::<_, LeaveGroupResponse>(&request, 3, None).await;
        self.recorder.note(
            self.pid(),
            match left {
                Ok(r) => format!(
                    "left generation {}: {}",
                    joined.generation,
                    ErrorCode(r.error_code)
                ),
                Err(e) => format!("leave of generation {} failed: {e}", joined.generation),
            },
        );
        self.give_up(true);
    }
}

/// Sends one request on `connection` at `version`, waiting `extra_ms` beyond the request
/// timeout when the broker may hold it (JoinGroup, SyncGroup).
async fn send<Req: Message, Resp: Message>(
    connection: &mut Connection,
    request: &Req,
    version: i16,
    extra_ms: Option<u64>,
) -> Result<Resp, String> {
    let timeout_ms = REQUEST_TIMEOUT_MS + extra_ms.unwrap_or(0);
    connection
        .send_with_timeout(Req::API_KEY, version, request, timeout_ms)
        .await
        .map_err(|e| e.to_string())
}

fn is_coordinator_error(code: ErrorCode) -> bool {
    [
        ErrorCode::NOT_COORDINATOR,
        ErrorCode::COORDINATOR_NOT_AVAILABLE,
        ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
    ]
    .contains(&code)
}

/// What a member does after a group call answered `code`.
fn verdict<T>(code: ErrorCode, ok: T) -> Call<T> {
    if code == ErrorCode::NONE {
        Call::Ok(ok)
    } else if code == ErrorCode::UNKNOWN_MEMBER_ID {
        Call::Rejoin { forget_id: true }
    } else if code == ErrorCode::ILLEGAL_GENERATION || code == ErrorCode::REBALANCE_IN_PROGRESS {
        Call::Rejoin { forget_id: false }
    } else {
        Call::Retry
    }
}

/// One partition's answer to an OffsetCommit: the member and generation checks and the
/// request's own mistakes are definite refusals; anything else (a timed-out write, the
/// coordinator failing or moving) may have been written.
fn commit_result(code: ErrorCode) -> CommitResult {
    const REFUSED: [ErrorCode; 6] = [
        ErrorCode::ILLEGAL_GENERATION,
        ErrorCode::UNKNOWN_MEMBER_ID,
        ErrorCode::REBALANCE_IN_PROGRESS,
        ErrorCode::FENCED_INSTANCE_ID,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode::OFFSET_METADATA_TOO_LARGE,
    ];
    if code == ErrorCode::NONE {
        CommitResult::Acknowledged
    } else if REFUSED.contains(&code) {
        CommitResult::Failed {
            reason: code.to_string(),
        }
    } else {
        CommitResult::Unknown {
            reason: code.to_string(),
        }
    }
}

/// The consumer protocol's subscription (version 0) to the one topic.
fn subscription() -> bytes::Bytes {
    let mut out = vec![0, 0];
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&(GROUP_TOPIC.len() as i16).to_be_bytes());
    out.extend_from_slice(GROUP_TOPIC.as_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    bytes::Bytes::from(out)
}

/// The leader's range assignment: members sorted by id, each a contiguous range of the
/// partitions, the first ones one more when they do not divide evenly. The assignment bytes
/// are the partition numbers, 4 bytes each (the simulation's own format).
fn range_assignment(response: &JoinGroupResponse) -> Vec<SyncGroupRequestAssignment> {
    let mut ids: Vec<&str> = response
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let count = i32::try_from(ids.len()).unwrap_or(i32::MAX).max(1);
    let (per, extra) = (GROUP_PARTITIONS / count, GROUP_PARTITIONS % count);
    let mut next = 0;
    ids.into_iter()
        .zip(0..)
        .map(|(id, i)| {
            let n = per + i32::from(i < extra);
            let bytes: Vec<u8> = (next..next + n).flat_map(i32::to_be_bytes).collect();
            next += n;
            SyncGroupRequestAssignment {
                member_id: id.to_string(),
                assignment: bytes::Bytes::from(bytes),
            }
        })
        .collect()
}

fn decode_assignment(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .filter_map(|c| <[u8; 4]>::try_from(c).ok().map(i32::from_be_bytes))
        .filter(|p| (0..GROUP_PARTITIONS).contains(p))
        .collect()
}
