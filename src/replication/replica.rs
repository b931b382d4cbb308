//! The replica core: one partition's replication state on one broker, as Kafka's
//! `Partition` keeps it, as an IO-free state machine (the house template: inputs with
//! `now_ms`, outputs taken with [`Replica::ready`]). The broker's [`crate::broker::partition`]
//! owns one per partition and carries its outputs to the log, the wire and the controller.
//!
//! What it owns: the role (leader, follower or neither) and the partition state the committed
//! metadata gave it (leader epoch, partition epoch, ISR, ELR), the high watermark, and on a
//! leader each follower's fetch offset, last caught-up time and broker epoch, plus the ISR
//! change it has asked the controller for.
//!
//! Rules (Kafka's, with the KIPs that made them):
//! - The high watermark on a leader is the minimum, over the *maximal* ISR (KIP-497: the
//!   committed ISR plus a member being added while its AlterPartition is in flight; a removal
//!   counts only once committed), of each member's acknowledgeable end: the leader's own
//!   ([`Replica::leader_end_advanced`]: its synced log end under sync-before-ack) and each
//!   follower's fetch offset (a follower syncs before it fetches, so its fetch offset is its
//!   synced end). It advances only while the committed ISR has at least `min.insync.replicas`
//!   members (KIP-966's strict rule). It never moves back.
//! - A follower is caught up when its fetch offset reaches the leader's log end, or the log end
//!   the leader had at its previous fetch (Kafka's `lastCaughtUpTimeMs`). An ISR member that
//!   has not been caught up for `replica.lag.time.max.ms` is proposed for removal; a replica
//!   outside the ISR whose fetch offset reaches the high watermark and the start of this
//!   leader epoch, and whose broker is unfenced, not shutting down and fetching at its
//!   registered broker epoch (KIP-841, KIP-903), is proposed for addition. One proposal is in
//!   flight at a time, as in Kafka, and it stays in flight (counted in the maximal ISR, sent
//!   again) until the committed metadata settles it or the controller says it did nothing:
//!   an error answer alone does not tell that the change was not written (a deposed
//!   controller's record may still commit).
//! - A follower's high watermark is the leader's, capped at its own log end.
//!
//! Invariants (release assertions): the high watermark never passes the leader's
//! acknowledgeable end nor moves back in a leader epoch; the committed ISR of a leader
//! contains the leader; a proposal is made against the partition epoch it was decided at.

use std::collections::{BTreeMap, BTreeSet};

/// A replica id of "no leader" in the metadata.
pub const NO_LEADER: i32 = -1;
/// A fetch offset not yet known (the follower has not fetched in this leader epoch).
pub const UNKNOWN_OFFSET: i64 = -1;
/// An ISR change the controller has not answered in this long is asked again (Kafka resends
/// after a failed or timed-out AlterPartition).
pub const ALTER_PARTITION_RETRY_MS: u64 = 2_000;
/// An ISR change whose answer left its outcome unknown (the request failed on the way, the
/// controller was deposed before its record committed) is asked again after this long.
pub const ALTER_PARTITION_BACKOFF_MS: u64 = 100;
const _: () = assert!(ALTER_PARTITION_BACKOFF_MS < ALTER_PARTITION_RETRY_MS);
/// The most replicas a partition may have (the controller's placement limit).
pub const REPLICAS_MAX: usize = 16;

/// What the committed metadata image says of one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionState {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub elr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
}

/// What the committed metadata image says of one broker, for ISR expansion (KIP-841).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BrokerState {
    /// The broker's registered epoch.
    pub epoch: i64,
    /// Registered, unfenced and not in controlled shutdown.
    pub eligible: bool,
}

/// Settings of one partition's replication, from the topic and broker configs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// This broker's id.
    pub node_id: i32,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: u64,
    /// `min.insync.replicas` of the topic.
    pub min_insync_replicas: usize,
}

/// One follower as the leader sees it (Kafka's `ReplicaState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerState {
    /// Its last fetch offset in this leader epoch (its synced log end), or [`UNKNOWN_OFFSET`].
    pub log_end_offset: i64,
    /// When it last was caught up (see the module doc).
    pub last_caught_up_ms: u64,
    /// When it last fetched, and the leader's log end then.
    pub last_fetch_ms: u64,
    pub last_fetch_leader_log_end: i64,
    /// The broker epoch it fetched with (-1 when it sent none).
    pub broker_epoch: i64,
}

/// An ISR change for the controller (AlterPartition, API 56).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsrProposal {
    pub leader_epoch: i32,
    /// The partition epoch the change was decided against.
    pub partition_epoch: i32,
    /// The proposed ISR, with each member's broker epoch as the leader saw it (-1: unknown).
    pub new_isr: Vec<(i32, i64)>,
}

/// A proposal sent and not yet settled: unanswered, or answered in a way that leaves its
/// outcome unknown. Its members count in the maximal ISR until the committed metadata shows
/// what the controller did, or the controller said it did nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
struct InFlight {
    proposal: IsrProposal,
    /// When it is sent again if still not settled.
    resend_at_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not a replica, or a replica of a partition without a leader.
    None,
    Follower {
        leader: i32,
    },
    Leader,
}

/// Why the leader refused a follower's fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchRefusal {
    /// This broker does not lead the partition.
    NotLeader,
    /// The follower is not one of the partition's replicas.
    NotReplica,
    /// The follower's leader epoch is older than this leader's.
    FencedLeaderEpoch,
    /// The follower's leader epoch is newer: this broker has not seen the change yet.
    UnknownLeaderEpoch,
}

/// The outputs a step left for the driver.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ready {
    /// The high watermark moved (to this value) since the last `ready`.
    pub high_watermark: Option<i64>,
    /// An ISR change to send to the controller.
    pub alter_partition: Option<IsrProposal>,
}

/// One partition's replication state on this broker.
#[derive(Clone, Debug)]
pub struct Replica {
    config: ReplicaConfig,
    role: Role,
    /// The committed partition state (None before the first image).
    state: Option<PartitionState>,
    high_watermark: i64,
    /// The leader's own acknowledgeable end (its synced log end under sync-before-ack) and
    /// log end, as last told.
    leader_acknowledgeable_end: i64,
    leader_log_end: i64,
    /// Where this leader epoch began in the log.
    leader_epoch_start_offset: i64,
    followers: BTreeMap<i32, FollowerState>,
    brokers: BTreeMap<i32, BrokerState>,
    in_flight: Option<InFlight>,
    /// A proposal decided and not yet taken by the driver.
    to_send: Option<IsrProposal>,
    /// Set when the high watermark moved since the last `ready`.
    high_watermark_moved: bool,
    bugs: ReplicaBugs,
}

/// Deliberate bugs, each off outside the simulation's checker tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaBugs {
    /// The high watermark follows the fastest ISR member instead of the slowest.
    pub high_watermark_past_slowest: bool,
    /// The high watermark advances whatever the ISR's size.
    pub ignore_min_insync_replicas: bool,
    /// A follower fetches again before its appended batches are synced, so its fetch offset
    /// acknowledges what a power loss can take.
    pub follower_acks_before_sync: bool,
    /// A follower truncates its log to its own high watermark whenever it starts following a
    /// leader epoch (Kafka before KIP-101), instead of only where the leader's DivergingEpoch
    /// says it diverges: records above a stale high watermark that the leader had committed
    /// are gone from it, and lost if it is elected before it fetches them again.
    pub follower_truncates_by_high_watermark: bool,
    /// A leader counts an ISR shrink it proposed as soon as it proposes it, before the
    /// controller commits it (KIP-497 counts a removal only once committed): a leader cut
    /// off from a follower and from the controller keeps acknowledging without that
    /// follower, which the controller, having deposed the leader, may then elect.
    pub shrink_counts_before_commit: bool,
}

impl Replica {
    /// A replica that is neither leader nor follower yet, with the high watermark a
    /// checkpoint (or recovery) gave it.
    pub fn new(config: ReplicaConfig, high_watermark: i64, bugs: ReplicaBugs) -> Replica {
        assert!(high_watermark >= 0, "a negative high watermark");
        assert!(
            config.min_insync_replicas >= 1,
            "min.insync.replicas below 1"
        );
        Replica {
            config,
            role: Role::None,
            state: None,
            high_watermark,
            leader_acknowledgeable_end: high_watermark,
            leader_log_end: high_watermark,
            leader_epoch_start_offset: 0,
            followers: BTreeMap::new(),
            brokers: BTreeMap::new(),
            in_flight: None,
            to_send: None,
            high_watermark_moved: false,
            bugs,
        }
    }

    pub fn role(&self) -> &Role {
        &self.role
    }

    pub fn is_leader(&self) -> bool {
        self.role == Role::Leader
    }

    pub fn state(&self) -> Option<&PartitionState> {
        self.state.as_ref()
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    pub fn leader_epoch(&self) -> i32 {
        self.state.as_ref().map_or(0, |s| s.leader_epoch)
    }

    pub fn config(&self) -> &ReplicaConfig {
        &self.config
    }

    /// Where this leader's epoch began (its log end when it was elected); None unless it
    /// leads. Until the high watermark reaches it, the high watermark may lag what the
    /// previous leader exposed (KIP-207).
    pub fn leader_epoch_start_offset(&self) -> Option<i64> {
        self.is_leader().then_some(self.leader_epoch_start_offset)
    }

    /// Changes `min.insync.replicas` (a topic config change); the high watermark re-checks.
    pub fn set_min_insync_replicas(&mut self, min: usize) {
        assert!(min >= 1, "min.insync.replicas below 1");
        self.config.min_insync_replicas = min;
        self.maybe_advance_high_watermark();
    }

    /// Stops leading and following (this broker is fenced, or the partition is going).
    pub fn resign(&mut self) {
        self.role = Role::None;
        self.followers.clear();
        self.in_flight = None;
        self.to_send = None;
    }

    /// The committed ISR's size (0 when not a leader).
    pub fn isr_len(&self) -> usize {
        match (&self.role, &self.state) {
            (Role::Leader, Some(s)) => s.isr.len(),
            _ => 0,
        }
    }

    /// Whether a produce with acks=all may be appended now (KIP-966: the committed ISR has
    /// at least `min.insync.replicas` members).
    pub fn enough_replicas(&self) -> bool {
        self.isr_len() >= self.config.min_insync_replicas || self.bugs.ignore_min_insync_replicas
    }

    pub fn follower(&self, id: i32) -> Option<&FollowerState> {
        self.followers.get(&id)
    }

    /// The ISR the high watermark is computed over (KIP-497's maximal ISR).
    pub fn maximal_isr(&self) -> Vec<i32> {
        let Some(state) = &self.state else {
            return Vec::new();
        };
        let mut isr: BTreeSet<i32> = state.isr.iter().copied().collect();
        if let Some(in_flight) = &self.in_flight {
            isr.extend(in_flight.proposal.new_isr.iter().map(|(id, _)| *id));
        }
        // A proposal decided and not yet taken by the driver counts as well: the same step
        // puts it in flight.
        if let Some(to_send) = &self.to_send {
            isr.extend(to_send.new_isr.iter().map(|(id, _)| *id));
        }
        isr.into_iter().collect()
    }

    /// Applies what the committed metadata says of the partition and of the brokers, with
    /// this broker's log end then: becomes leader or follower, or keeps its role and takes
    /// the new ISR. `log_end` and `acknowledgeable_end` are this broker's log's.
    pub fn apply_state(
        &mut self,
        now_ms: u64,
        state: PartitionState,
        brokers: BTreeMap<i32, BrokerState>,
        (log_end, acknowledgeable_end): (i64, i64),
    ) {
        assert!(state.replicas.len() <= REPLICAS_MAX, "too many replicas");
        assert!(
            acknowledgeable_end <= log_end,
            "acknowledgeable end past the log end"
        );
        self.brokers = brokers;
        let me = self.config.node_id;
        let leads = state.leader == me && state.replicas.contains(&me);
        let new_epoch = self
            .state
            .as_ref()
            .is_none_or(|s| s.leader_epoch != state.leader_epoch);
        if leads {
            assert!(
                state.isr.contains(&me),
                "a leader outside its own ISR {:?}",
                state.isr
            );
            if self.role != Role::Leader || new_epoch {
                self.become_leader(now_ms, &state, log_end, acknowledgeable_end);
            } else {
                // The same epoch: an ISR change committed (ours or the controller's). A
                // proposal that this state answers is done.
                let answered = self
                    .in_flight
                    .as_ref()
                    .is_some_and(|f| state.partition_epoch > f.proposal.partition_epoch);
                if answered {
                    self.in_flight = None;
                }
                for id in &state.replicas {
                    if *id != me {
                        self.followers
                            .entry(*id)
                            .or_insert_with(|| fresh_follower(0));
                    }
                }
                self.followers.retain(|id, _| state.replicas.contains(id));
            }
            self.state = Some(state);
            self.leader_end_advanced(log_end, acknowledgeable_end);
        } else {
            self.followers.clear();
            self.in_flight = None;
            self.to_send = None;
            self.role = if state.leader != NO_LEADER && state.replicas.contains(&me) {
                Role::Follower {
                    leader: state.leader,
                }
            } else {
                Role::None
            };
            self.state = Some(state);
        }
    }

    fn become_leader(
        &mut self,
        now_ms: u64,
        state: &PartitionState,
        log_end: i64,
        acknowledgeable_end: i64,
    ) {
        let me = self.config.node_id;
        self.role = Role::Leader;
        self.in_flight = None;
        self.to_send = None;
        self.leader_epoch_start_offset = log_end;
        self.leader_log_end = log_end;
        self.leader_acknowledgeable_end = acknowledgeable_end;
        // Kafka resets the remote replicas: ISR members count as caught up now, so that a
        // new leader does not shrink its ISR before they had a chance to fetch.
        self.followers = state
            .replicas
            .iter()
            .filter(|id| **id != me)
            .map(|id| {
                let caught_up = if state.isr.contains(id) { now_ms } else { 0 };
                (*id, fresh_follower(caught_up))
            })
            .collect();
        // A high watermark from before (a checkpoint, or this broker's time as follower)
        // stays: it is below everything the ISR holds.
        self.high_watermark = self.high_watermark.min(log_end);
    }

    /// The leader's log end and acknowledgeable end moved (an append, a sync).
    pub fn leader_end_advanced(&mut self, log_end: i64, acknowledgeable_end: i64) {
        assert!(
            acknowledgeable_end <= log_end,
            "acknowledgeable end past the log end"
        );
        self.leader_log_end = log_end;
        self.leader_acknowledgeable_end = acknowledgeable_end;
        if self.role == Role::Leader {
            self.maybe_advance_high_watermark();
        }
    }

    /// Whether a follower's fetch in `current_leader_epoch` (-1: not sent) is one this leader
    /// serves (without recording anything).
    pub fn check_fetch(
        &self,
        replica_id: i32,
        current_leader_epoch: i32,
    ) -> Result<(), FetchRefusal> {
        self.check_leader_epoch(current_leader_epoch)?;
        if !self.followers.contains_key(&replica_id) {
            return Err(FetchRefusal::NotReplica);
        }
        Ok(())
    }

    /// Whether this replica leads in `current_leader_epoch` (-1: not sent): KIP-320's check of
    /// every request that names the leader epoch it expects (a follower's or consumer's fetch,
    /// ListOffsets, OffsetForLeaderEpoch).
    pub fn check_leader_epoch(&self, current_leader_epoch: i32) -> Result<(), FetchRefusal> {
        if self.role != Role::Leader {
            return Err(FetchRefusal::NotLeader);
        }
        let epoch = self.leader_epoch();
        if current_leader_epoch >= 0 && current_leader_epoch < epoch {
            return Err(FetchRefusal::FencedLeaderEpoch);
        }
        if current_leader_epoch > epoch {
            return Err(FetchRefusal::UnknownLeaderEpoch);
        }
        Ok(())
    }

    /// A follower's fetch at `fetch_offset` (its synced log end), in leader epoch
    /// `current_leader_epoch` (-1: not sent), from broker epoch `broker_epoch` (-1: not sent).
    /// Updates its state, and may advance the high watermark and propose its addition to the
    /// ISR.
    pub fn follower_fetch(
        &mut self,
        now_ms: u64,
        replica_id: i32,
        broker_epoch: i64,
        current_leader_epoch: i32,
        fetch_offset: i64,
    ) -> Result<(), FetchRefusal> {
        self.check_fetch(replica_id, current_leader_epoch)?;
        let leader_log_end = self.leader_log_end;
        let Some(follower) = self.followers.get_mut(&replica_id) else {
            return Err(FetchRefusal::NotReplica);
        };
        // A fetch offset past the leader's log end is answered OFFSET_OUT_OF_RANGE by the
        // read; it says nothing of what the follower holds.
        let fetch_offset = fetch_offset.min(leader_log_end);
        if fetch_offset >= leader_log_end {
            follower.last_caught_up_ms = now_ms;
        } else if fetch_offset >= follower.last_fetch_leader_log_end {
            follower.last_caught_up_ms = follower.last_caught_up_ms.max(follower.last_fetch_ms);
        }
        follower.log_end_offset = fetch_offset;
        follower.last_fetch_ms = now_ms;
        follower.last_fetch_leader_log_end = leader_log_end;
        follower.broker_epoch = broker_epoch;
        self.maybe_expand_isr(replica_id);
        self.maybe_advance_high_watermark();
        Ok(())
    }

    fn maybe_expand_isr(&mut self, replica_id: i32) {
        if self.in_flight.is_some() || self.to_send.is_some() {
            return;
        }
        let Some(state) = &self.state else { return };
        if state.isr.contains(&replica_id) {
            return;
        }
        let Some(follower) = self.followers.get(&replica_id) else {
            return;
        };
        let caught_up = follower.log_end_offset >= self.high_watermark
            && follower.log_end_offset >= self.leader_epoch_start_offset;
        // KIP-841/903: only an unfenced broker not shutting down, fetching at the epoch it
        // is registered with.
        let eligible = self.brokers.get(&replica_id).is_some_and(|b| {
            b.eligible && (follower.broker_epoch == -1 || follower.broker_epoch == b.epoch)
        });
        if !caught_up || !eligible {
            return;
        }
        let mut isr = state.isr.clone();
        isr.push(replica_id);
        self.propose(isr);
    }

    /// The time passed: proposes removing ISR members that lag, resends an unanswered
    /// proposal.
    pub fn tick(&mut self, now_ms: u64) {
        if self.role != Role::Leader {
            return;
        }
        if let Some(in_flight) = &self.in_flight {
            if now_ms >= in_flight.resend_at_ms {
                self.to_send = Some(in_flight.proposal.clone());
                self.in_flight = None;
            }
            return;
        }
        if self.to_send.is_some() {
            return;
        }
        let Some(state) = &self.state else { return };
        let lag_max = self.config.replica_lag_time_max_ms;
        let me = self.config.node_id;
        let lagging: Vec<i32> = state
            .isr
            .iter()
            .copied()
            .filter(|id| *id != me)
            .filter(|id| {
                self.followers.get(id).is_none_or(|f| {
                    // A member that fetched below the high watermark in this leader epoch
                    // lost acknowledged records (it truncated at rot its scrubber found): it
                    // must not stay electable, whatever its lag.
                    let lost = f.log_end_offset != UNKNOWN_OFFSET
                        && f.log_end_offset < self.high_watermark;
                    lost || now_ms.saturating_sub(f.last_caught_up_ms) > lag_max
                })
            })
            .collect();
        if lagging.is_empty() {
            return;
        }
        let isr: Vec<i32> = state
            .isr
            .iter()
            .copied()
            .filter(|id| !lagging.contains(id))
            .collect();
        self.propose(isr);
    }

    fn propose(&mut self, isr: Vec<i32>) {
        let state = self.state.as_ref().expect("a leader has a state");
        assert!(
            isr.contains(&self.config.node_id),
            "a leader proposing an ISR without itself"
        );
        let new_isr = isr
            .iter()
            .map(|id| {
                let epoch = if *id == self.config.node_id {
                    -1
                } else {
                    self.followers.get(id).map_or(-1, |f| f.broker_epoch)
                };
                (*id, epoch)
            })
            .collect();
        let proposal = IsrProposal {
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            new_isr,
        };
        self.to_send = Some(proposal);
    }

    /// Takes the outputs: a moved high watermark, a proposal to send (which is then in flight
    /// from `now_ms`).
    pub fn ready(&mut self, now_ms: u64) -> Ready {
        let alter_partition = self.to_send.take();
        if let Some(proposal) = &alter_partition {
            self.in_flight = Some(InFlight {
                proposal: proposal.clone(),
                resend_at_ms: now_ms.saturating_add(ALTER_PARTITION_RETRY_MS),
            });
            // A member being added counts at once (KIP-497).
            self.maybe_advance_high_watermark();
        }
        let high_watermark =
            std::mem::take(&mut self.high_watermark_moved).then_some(self.high_watermark);
        Ready {
            high_watermark,
            alter_partition,
        }
    }

    /// The controller answered a proposal: with the partition's new committed state, or an
    /// error. Kafka's `Partition.handleAlterPartitionError`: only an explicit "not done"
    /// (OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA) drops the proposal at once. Any other
    /// error may come after the controller wrote the change (a controller deposed before its
    /// record committed answers NOT_CONTROLLER, yet a later leader of the metadata quorum may
    /// commit that record): the proposal stays counted in the maximal ISR, and is sent again,
    /// until the committed metadata shows the outcome (see [`Replica::apply_state`]).
    pub fn alter_partition_answered(
        &mut self,
        now_ms: u64,
        answer: Result<PartitionState, AlterPartitionRefusal>,
    ) {
        let Some(mut in_flight) = self.in_flight.take() else {
            return;
        };
        match answer {
            Ok(state) => {
                let current = self.state.as_ref().map_or(-1, |s| s.partition_epoch);
                if self.role == Role::Leader
                    && state.leader_epoch == in_flight.proposal.leader_epoch
                    && state.partition_epoch > current
                {
                    let brokers = std::mem::take(&mut self.brokers);
                    let ends = (self.leader_log_end, self.leader_acknowledgeable_end);
                    self.apply_state(now_ms, state, brokers, ends);
                }
            }
            Err(refusal) => match refusal.outcome() {
                RefusalOutcome::NotApplied => {}
                RefusalOutcome::Stale => {
                    // The image that made it stale is on its way; ask again only if it
                    // does not come.
                    in_flight.resend_at_ms = now_ms.saturating_add(ALTER_PARTITION_RETRY_MS);
                    self.in_flight = Some(in_flight);
                }
                RefusalOutcome::Unknown => {
                    in_flight.resend_at_ms = now_ms.saturating_add(ALTER_PARTITION_BACKOFF_MS);
                    self.in_flight = Some(in_flight);
                }
            },
        }
        self.maybe_advance_high_watermark();
    }

    /// The follower's high watermark from a fetch answer, capped at its log end.
    pub fn follower_high_watermark(&mut self, leader_high_watermark: i64, log_end: i64) {
        if self.role == Role::Leader {
            return;
        }
        let to = leader_high_watermark.min(log_end);
        if to > self.high_watermark {
            self.high_watermark = to;
            self.high_watermark_moved = true;
        }
    }

    /// The log was truncated to `log_end` (a follower's divergence): the high watermark is
    /// capped at it.
    pub fn truncated(&mut self, log_end: i64) {
        if self.high_watermark > log_end {
            self.high_watermark = log_end;
            self.high_watermark_moved = true;
        }
        self.leader_log_end = self.leader_log_end.min(log_end);
        self.leader_acknowledgeable_end = self.leader_acknowledgeable_end.min(log_end);
    }

    fn maybe_advance_high_watermark(&mut self) {
        if self.role != Role::Leader {
            return;
        }
        let Some(state) = &self.state else { return };
        if state.isr.len() < self.config.min_insync_replicas
            && !self.bugs.ignore_min_insync_replicas
        {
            return;
        }
        let me = self.config.node_id;
        let members = match &self.in_flight {
            Some(f) if self.bugs.shrink_counts_before_commit => {
                f.proposal.new_isr.iter().map(|(id, _)| *id).collect()
            }
            _ => self.maximal_isr(),
        };
        let ends = members.into_iter().map(|id| {
            if id == me {
                self.leader_acknowledgeable_end
            } else {
                self.followers
                    .get(&id)
                    .map_or(UNKNOWN_OFFSET, |f| f.log_end_offset)
            }
        });
        let candidate = if self.bugs.high_watermark_past_slowest {
            ends.max()
        } else {
            ends.min()
        };
        let Some(candidate) = candidate else { return };
        if candidate > self.high_watermark {
            assert!(
                candidate <= self.leader_acknowledgeable_end
                    || self.bugs.high_watermark_past_slowest,
                "high watermark {candidate} past the leader's acknowledgeable end {}",
                self.leader_acknowledgeable_end
            );
            let candidate = candidate.min(self.leader_acknowledgeable_end);
            if candidate > self.high_watermark {
                self.high_watermark = candidate;
                self.high_watermark_moved = true;
            }
        }
    }
}

/// Why the controller refused an ISR change (its error code, kept as a name for logs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterPartitionRefusal {
    pub code: i16,
    pub message: String,
}

/// What a refused ISR change says of the controller's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalOutcome {
    /// The controller did not write the change.
    NotApplied,
    /// The proposal was made against an older state (epoch, topic): the image will show
    /// the newer one, and whether the change is in it.
    Stale,
    /// Nothing is known: the change may be written, and even commit later.
    Unknown,
}

impl AlterPartitionRefusal {
    pub fn outcome(&self) -> RefusalOutcome {
        use crate::protocol::error::ErrorCode;
        let code = ErrorCode(self.code);
        if code == ErrorCode::OPERATION_NOT_ATTEMPTED || code == ErrorCode::INELIGIBLE_REPLICA {
            RefusalOutcome::NotApplied
        } else if code == ErrorCode::INVALID_UPDATE_VERSION
            || code == ErrorCode::FENCED_LEADER_EPOCH
            || code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
            || code == ErrorCode::UNKNOWN_TOPIC_ID
            || code == ErrorCode::INVALID_REQUEST
        {
            RefusalOutcome::Stale
        } else {
            RefusalOutcome::Unknown
        }
    }
}

fn fresh_follower(last_caught_up_ms: u64) -> FollowerState {
    FollowerState {
        log_end_offset: UNKNOWN_OFFSET,
        last_caught_up_ms,
        last_fetch_ms: 0,
        last_fetch_leader_log_end: UNKNOWN_OFFSET,
        broker_epoch: -1,
    }
}
