//! The replication driver on `rt`: the replica fetchers (Kafka's `ReplicaFetcherThread`, one
//! task per leader this broker follows), the ISR change sender (Kafka's
//! `AlterPartitionManager`), and the housekeeping tick (ISR expiry, the high watermark
//! checkpoint). The decisions are the partition cores' ([`super::replica`]) and
//! [`super::follower`]'s; this module only moves bytes and answers.
//!
//! A fetcher for leader L loops: it takes the partitions this broker follows under L, sends L
//! one Fetch (the newest version both know, with KIP-903's ReplicaState: this broker's id and
//! epoch; per partition the fetch offset = its log end, its last fetched epoch and the leader
//! epoch it knows), and for each partition of the answer truncates at the leader's
//! DivergingEpoch, or appends the records with the leader's offsets and epochs (synced before
//! the next fetch under sync-before-ack, so that the next fetch offset acknowledges only synced
//! records), and takes the leader's high watermark. It stops when it follows nothing under L;
//! the manager starts fetchers for new leaders as the metadata publisher changes roles.
//!
//! Limits: every fetch waits at most `replica.fetch.wait.max.ms` at the leader plus
//! `replica.socket.timeout.ms` on the wire; a failed exchange drops the connection and backs
//! off `replica.fetch.backoff.ms`; one fetch asks at most `replica.fetch.response.max.bytes`
//! and `replica.fetch.max.bytes` per partition; AlterPartition requests carry at most
//! [`ISR_CHANGES_PER_REQUEST_MAX`] partitions.
//!
//! Invariants: a follower appends only batches that start at its log end (the log refuses
//! others); it truncates only on the leader's DivergingEpoch or below the leader's log start,
//! never by its high watermark alone.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::broker::controller_channel::ControllerChannel;
use crate::broker::partition::Partition;
use crate::broker::Broker;
use crate::client::connection::{Connection, ConnectionLimits};
use crate::log::leader_epoch::EpochEnd;
use crate::protocol::alter_partition::{
    AlterPartitionBrokerState, AlterPartitionRequest, AlterPartitionRequestPartition,
    AlterPartitionRequestTopic,
};
use crate::protocol::error::ErrorCode;
use crate::protocol::fetch::{
    FetchPartition, FetchRequest, FetchResponse, FetchTopic, ReplicaState,
};
use crate::protocol::types::{LeaderEpoch, NodeId, Offset};
use crate::protocol::wire::Uuid;
use crate::replication::replica::{AlterPartitionRefusal, PartitionState};
use crate::rt::latch::Latch;
use crate::rt::task::{self, JoinHandle};
use crate::rt::time;

/// The oldest Fetch a follower sends: v15 carries KIP-903's ReplicaState (topic ids from v13,
/// DivergingEpoch from v12).
pub const FOLLOWER_FETCH_VERSION_MIN: i16 = 15;
/// How often the manager looks for leaders to fetch from and ticks the partitions' cores.
pub const MANAGER_TICK_MS: u64 = 100;
/// The most partitions one AlterPartition request carries; the rest go in the next.
pub const ISR_CHANGES_PER_REQUEST_MAX: usize = 1_000;
/// The longest the ISR change sender sleeps without being woken (it also retries then).
pub const ISR_SENDER_IDLE_MS: u64 = 500;
/// The most leaders one broker fetches from at once (one task each).
pub const FETCHERS_MAX: usize = 1_024;

/// This broker's epoch as its registration gave it, when registered.
pub type BrokerEpoch = Arc<dyn Fn() -> Option<i64> + Send + Sync>;

/// The running replication tasks of one broker.
pub struct Replication {
    stop: Arc<Latch>,
    manager: JoinHandle<()>,
    sender: JoinHandle<()>,
}

impl Replication {
    /// Stops every task (fetchers included) and writes the high watermark checkpoints.
    pub async fn stop(self, broker: &Broker) {
        self.stop.set();
        let _ = self.manager.await;
        let _ = self.sender.await;
        for partition in broker.topics.partitions().await {
            partition.checkpoint_high_watermark(&broker.disk).await;
        }
    }
}

/// Starts the manager (fetchers, ticks, checkpoints) and the ISR change sender.
pub fn start(broker: Arc<Broker>, channel: ControllerChannel, epoch: BrokerEpoch) -> Replication {
    let stop = Arc::new(Latch::new());
    let manager = task::spawn(manage(broker.clone(), epoch.clone(), stop.clone()));
    let sender = task::spawn(send_isr_changes(broker, channel, epoch, stop.clone()));
    Replication {
        stop,
        manager,
        sender,
    }
}

async fn manage(broker: Arc<Broker>, epoch: BrokerEpoch, stop: Arc<Latch>) {
    // Each fetcher with the flag it sets when it ends.
    let mut fetchers: BTreeMap<i32, (JoinHandle<()>, Arc<AtomicBool>)> = BTreeMap::new();
    let settings = broker.config.replication;
    let mut last_checkpoint_ms = broker.monotonic_ms();
    loop {
        let partitions = broker.topics.partitions().await;
        let now_ms = broker.monotonic_ms();
        let mut leaders: Vec<i32> = Vec::new();
        for partition in &partitions {
            partition.tick(now_ms);
            if let Some(leader) = partition.following() {
                if !leaders.contains(&leader) {
                    leaders.push(leader);
                }
            }
        }
        fetchers.retain(|_, (_, done)| !done.load(Ordering::Acquire));
        for leader in leaders {
            if fetchers.contains_key(&leader) || fetchers.len() >= FETCHERS_MAX {
                continue;
            }
            let done = Arc::new(AtomicBool::new(false));
            let fetcher = fetch_from(broker.clone(), leader, epoch.clone(), stop.clone());
            let flag = done.clone();
            let handle = task::spawn(async move {
                fetcher.await;
                flag.store(true, Ordering::Release);
            });
            fetchers.insert(leader, (handle, done));
        }
        if now_ms.saturating_sub(last_checkpoint_ms)
            >= settings.replica_high_watermark_checkpoint_interval_ms
        {
            last_checkpoint_ms = now_ms;
            for partition in &partitions {
                partition.checkpoint_high_watermark(&broker.disk).await;
            }
        }
        if stopped_within(&stop, Duration::from_millis(MANAGER_TICK_MS)).await {
            break;
        }
    }
    for (_, (handle, _)) in fetchers {
        let _ = handle.await;
    }
}

/// Waits `duration` or until `stop` is set; whether it was.
async fn stopped_within(stop: &Latch, duration: Duration) -> bool {
    let _ = time::timeout(duration, stop.wait()).await;
    stop.is_set()
}

/// The leader's address for this broker's listener name, from the applied image.
fn leader_address(broker: &Broker, leader: i32) -> Option<String> {
    let image = broker.image()?;
    let registration = image.brokers.get(&leader)?;
    let listener = registration
        .listener(crate::broker::cluster_view::listener_name(broker))
        .or_else(|| registration.listeners.first())?;
    Some(format!("{}:{}", listener.host, listener.port))
}

/// The partitions this broker follows under `leader`, by (topic id, index).
async fn followed(broker: &Broker, leader: i32) -> BTreeMap<(Uuid, i32), Arc<Partition>> {
    broker
        .topics
        .partitions()
        .await
        .into_iter()
        .filter(|p| p.following() == Some(leader))
        .map(|p| ((p.topic_id, p.index), p))
        .collect()
}

async fn fetch_from(broker: Arc<Broker>, leader: i32, epoch: BrokerEpoch, stop: Arc<Latch>) {
    let settings = broker.config.replication;
    let backoff = Duration::from_millis(settings.replica_fetch_backoff_ms);
    let node_id = broker.config.node_id;
    let mut connection: Option<Connection> = None;
    // The planted follower_truncates_by_high_watermark: the (partition, leader epoch) pairs
    // already truncated to the high watermark.
    let mut truncated_by_high_watermark: BTreeMap<(Uuid, i32), i32> = BTreeMap::new();
    tracing::debug!(node_id, leader, "replica fetcher started");
    while !stop.is_set() {
        let partitions = followed(&broker, leader).await;
        if partitions.is_empty() {
            break;
        }
        if broker
            .config
            .bugs
            .replica
            .follower_truncates_by_high_watermark
        {
            for (key, partition) in &partitions {
                let epoch = partition.leader_epoch();
                if truncated_by_high_watermark.insert(*key, epoch) != Some(epoch) {
                    let to = partition.high_watermark().min(partition.log_end_offset());
                    tracing::info!(topic = %partition.topic, partition = partition.index, epoch, to, log_end = partition.log_end_offset(), "planted: a new follower truncates to its high watermark");
                    let _ = partition.truncate_as_follower(to).await;
                }
            }
        }
        if connection.as_ref().is_none_or(|c| c.is_broken()) {
            connection = None;
            let Some(address) = leader_address(&broker, leader) else {
                if stopped_within(&stop, backoff).await {
                    break;
                }
                continue;
            };
            let limits = ConnectionLimits {
                connect_timeout_ms: settings.replica_socket_timeout_ms,
                request_timeout_ms: settings.replica_socket_timeout_ms,
                ..ConnectionLimits::default()
            };
            let client_id = format!("replica-fetcher-{node_id}-{leader}");
            match Connection::connect(&address, &client_id, limits).await {
                Ok(c) => connection = Some(c),
                Err(e) => {
                    tracing::debug!(node_id, leader, %address, error = %e, "replica fetcher cannot connect");
                    if stopped_within(&stop, backoff).await {
                        break;
                    }
                    continue;
                }
            }
        }
        let Some(conn) = connection.as_mut() else {
            continue;
        };
        let outcome = fetch_once(&broker, conn, &partitions, epoch()).await;
        match outcome {
            Ok(progress) => {
                if !progress && stopped_within(&stop, backoff).await {
                    break;
                }
            }
            Err(why) => {
                tracing::debug!(node_id, leader, why, "replica fetch failed");
                connection = None;
                if stopped_within(&stop, backoff).await {
                    break;
                }
            }
        }
    }
    tracing::debug!(node_id, leader, "replica fetcher stopped");
}

/// One fetch from the leader and what it brings. `Ok(false)`: every partition answered an
/// error (the caller backs off); `Err`: the exchange failed.
async fn fetch_once(
    broker: &Broker,
    conn: &mut Connection,
    partitions: &BTreeMap<(Uuid, i32), Arc<Partition>>,
    broker_epoch: Option<i64>,
) -> Result<bool, String> {
    let settings = broker.config.replication;
    let node_id = broker.config.node_id;
    // The newest Fetch both brokers speak (the Rust client's own cap is for consumers, who
    // name topics; followers use topic ids and KIP-903's ReplicaState).
    let (_, broker_max) = conn
        .broker_versions(FetchRequest::API_KEY)
        .ok_or("the leader does not advertise Fetch")?;
    let version = broker_max.min(FetchRequest::VERSIONS.1);
    if version < FOLLOWER_FETCH_VERSION_MIN {
        return Err(format!(
            "the leader speaks Fetch up to v{version}; followers need v{FOLLOWER_FETCH_VERSION_MIN}+"
        ));
    }
    let mut topics: BTreeMap<Uuid, Vec<FetchPartition>> = BTreeMap::new();
    for ((topic_id, index), partition) in partitions {
        // A batch the scrubber found corrupt is dropped with everything after it and
        // fetched again: this fetch starts at the new log end.
        partition
            .truncate_corrupt_tail()
            .await
            .map_err(|e| format!("truncating a corrupt tail: {e}"))?;
        let last_fetched_epoch = partition.log().latest_epoch().await.unwrap_or(-1);
        topics.entry(*topic_id).or_default().push(FetchPartition {
            partition: *index,
            current_leader_epoch: LeaderEpoch(partition.leader_epoch()),
            fetch_offset: Offset(partition.log_end_offset()),
            last_fetched_epoch: LeaderEpoch(last_fetched_epoch),
            log_start_offset: Offset(partition.log_start_offset().await),
            partition_max_bytes: settings.replica_fetch_max_bytes,
            ..Default::default()
        });
    }
    let request = FetchRequest {
        // v15 moved the id into the ReplicaState; the old field must stay at its default.
        replica_id: NodeId(if version < 15 { node_id } else { -1 }),
        replica_state: ReplicaState {
            replica_id: NodeId(node_id),
            replica_epoch: broker_epoch.unwrap_or(-1),
        },
        max_wait_ms: i32::try_from(settings.replica_fetch_wait_max_ms).unwrap_or(i32::MAX),
        min_bytes: 1,
        max_bytes: settings.replica_fetch_response_max_bytes,
        session_id: 0,
        session_epoch: -1,
        topics: topics
            .into_iter()
            .map(|(topic_id, partitions)| FetchTopic {
                topic_id,
                partitions,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let timeout_ms = settings.replica_fetch_wait_max_ms + settings.replica_socket_timeout_ms;
    let response: FetchResponse = conn
        .send_with_timeout(FetchRequest::API_KEY, version, &request, timeout_ms)
        .await
        .map_err(|e| e.to_string())?;
    if response.error_code != 0 {
        return Err(format!(
            "the leader refused the fetch: {}",
            ErrorCode(response.error_code)
        ));
    }
    let mut progress = false;
    for topic in response.responses {
        for data in topic.partitions {
            let Some(partition) = partitions.get(&(topic.topic_id, data.partition_index)) else {
                continue;
            };
            match apply(partition, data).await {
                Ok(()) => progress = true,
                Err(why) => {
                    tracing::debug!(topic = %partition.topic, partition = partition.index, why, "replica fetch of a partition failed")
                }
            }
        }
    }
    Ok(progress)
}

/// Carries out one partition's part of a fetch answer.
async fn apply(
    partition: &Partition,
    data: crate::protocol::fetch::PartitionData,
) -> Result<(), String> {
    let code = ErrorCode(data.error_code);
    if code == ErrorCode::OFFSET_OUT_OF_RANGE {
        let leader_start = data.log_start_offset.0;
        if partition.log_end_offset() < leader_start {
            // Behind the leader's retention: start over at its log start (Kafka's
            // truncateFullyAndStartAt).
            partition
                .restart_follower_at(leader_start)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(());
        }
        return Err(format!(
            "offset out of range at the leader (its log start {leader_start})"
        ));
    }
    if code != ErrorCode::NONE {
        return Err(format!("the leader answered {code}"));
    }
    if data.diverging_epoch.epoch.0 >= 0 {
        let leader = EpochEnd {
            epoch: data.diverging_epoch.epoch.0,
            end_offset: data.diverging_epoch.end_offset.0,
        };
        let local = partition.log().end_offset_for_epoch(leader.epoch).await;
        let log_end = partition.log_end_offset();
        let to = super::follower::truncation_offset(leader, local, log_end);
        tracing::info!(
            topic = %partition.topic,
            partition = partition.index,
            diverging_epoch = leader.epoch,
            leader_end = leader.end_offset,
            log_end,
            to,
            "follower truncates where its log diverges from the leader's"
        );
        partition
            .truncate_as_follower(to)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(());
    }
    if let Some(records) = data.records.filter(|r| !r.is_empty()) {
        partition
            .append_as_follower(records)
            .await
            .map_err(|e| e.to_string())?;
    }
    partition.follower_high_watermark(data.high_watermark.0);
    Ok(())
}

/// Sends the partitions' ISR changes to the controller and gives each its answer.
async fn send_isr_changes(
    broker: Arc<Broker>,
    channel: ControllerChannel,
    epoch: BrokerEpoch,
    stop: Arc<Latch>,
) {
    let isr_changes = broker.topics.isr_changes();
    let node_id = broker.config.node_id;
    while !stop.is_set() {
        let woken = isr_changes.notified();
        let _ = time::timeout(Duration::from_millis(ISR_SENDER_IDLE_MS), woken).await;
        if stop.is_set() {
            break;
        }
        let mut pending: Vec<(Arc<Partition>, crate::replication::replica::IsrProposal)> =
            Vec::new();
        for partition in broker.topics.partitions().await {
            if pending.len() >= ISR_CHANGES_PER_REQUEST_MAX {
                isr_changes.notify_one();
                break;
            }
            if let Some(proposal) = partition.take_isr_proposal() {
                pending.push((partition, proposal));
            }
        }
        if pending.is_empty() {
            continue;
        }
        let Some(broker_epoch) = epoch() else {
            // Not registered: the proposals are dropped; the cores propose again.
            for (partition, _) in &pending {
                partition.isr_proposal_answered(
                    broker.monotonic_ms(),
                    Err(AlterPartitionRefusal {
                        code: ErrorCode::STALE_BROKER_EPOCH.0,
                        message: "this broker is not registered".to_string(),
                    }),
                );
            }
            continue;
        };
        let mut topics: BTreeMap<Uuid, Vec<AlterPartitionRequestPartition>> = BTreeMap::new();
        for (partition, proposal) in &pending {
            topics
                .entry(partition.topic_id)
                .or_default()
                .push(AlterPartitionRequestPartition {
                    partition_index: partition.index,
                    leader_epoch: LeaderEpoch(proposal.leader_epoch),
                    // v3 (KIP-903) names each member with its broker epoch instead.
                    new_isr: Vec::new(),
                    new_isr_with_epochs: proposal
                        .new_isr
                        .iter()
                        .map(|(id, epoch)| AlterPartitionBrokerState {
                            broker_id: NodeId(*id),
                            broker_epoch: *epoch,
                        })
                        .collect(),
                    leader_recovery_state: 0,
                    partition_epoch: proposal.partition_epoch,
                });
        }
        let request = AlterPartitionRequest {
            broker_id: NodeId(node_id),
            broker_epoch,
            topics: topics
                .into_iter()
                .map(|(topic_id, partitions)| AlterPartitionRequestTopic {
                    topic_id,
                    partitions,
                })
                .collect(),
        };
        let answer = channel.alter_partition(request).await;
        let now_ms = broker.monotonic_ms();
        match answer {
            Ok(response) => {
                let mut answers = BTreeMap::new();
                for topic in response.topics {
                    for p in topic.partitions {
                        answers.insert((topic.topic_id, p.partition_index), p);
                    }
                }
                for (partition, _) in pending {
                    let result = match answers.remove(&(partition.topic_id, partition.index)) {
                        Some(p) if p.error_code == 0 => {
                            let Some(current) = partition.replica_state() else {
                                continue;
                            };
                            Ok(PartitionState {
                                isr: p.isr.iter().map(|id| id.0).collect(),
                                leader: p.leader_id.0,
                                leader_epoch: p.leader_epoch.0,
                                partition_epoch: p.partition_epoch,
                                ..current
                            })
                        }
                        Some(p) => Err(AlterPartitionRefusal {
                            code: p.error_code,
                            message: ErrorCode(p.error_code).to_string(),
                        }),
                        None => Err(AlterPartitionRefusal {
                            code: ErrorCode::UNKNOWN_SERVER_ERROR.0,
                            message: "the controller's answer left the partition out".to_string(),
                        }),
                    };
                    if let Err(refusal) = &result {
                        tracing::info!(topic = %partition.topic, partition = partition.index, error = %refusal.message, "the controller refused an ISR change");
                    }
                    partition.isr_proposal_answered(now_ms, result);
                }
            }
            Err(e) => {
                tracing::info!(error = %e, "AlterPartition failed; the ISR changes are proposed again");
                for (partition, _) in pending {
                    partition.isr_proposal_answered(
                        now_ms,
                        Err(AlterPartitionRefusal {
                            code: ErrorCode::REQUEST_TIMED_OUT.0,
                            message: e.to_string(),
                        }),
                    );
                }
            }
        }
    }
}
