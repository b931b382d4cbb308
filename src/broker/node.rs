//! One `samsa broker` node with `process.roles=broker,controller` (the embedded default): a
//! metadata quorum of which this node is the only voter (or one voter of those
//! `controller.quorum.voters` names, every one a combined node), the controller above it, and the
//! broker, which registers with that controller, heartbeats, and makes its topics, configs
//! and partition leadership what the committed metadata image says
//! ([`MetadataPublisher`]). A cluster of several nodes (step 10) runs the same parts.
//!
//! Start, in order: open the broker's data (topics, dynamic configs, producer-id block);
//! start the quorum on the controller listener and the controller above it; wait until the
//! controller is active (a voter of several: until the quorum has a leader and this node's
//! controller applied everything committed); on a metadata log that holds nothing yet, migrate what the data
//! directory holds (the previous release's single-node format: `controller::migration`);
//! apply the committed image once; attach the controller channel (from then on every change
//! goes through the controller); start the lifecycle (BrokerRegistration, BrokerHeartbeat
//! over the controller listener) and the publisher's task; wait until this incarnation of the
//! broker is registered and unfenced in the committed image, and the publisher applied that
//! image (at most `UNFENCE_WAIT_MS_MAX`). A restart after a crash registers at once: the
//! controller knows the incarnation of the broker beside it (`colocated_broker`).
//!
//! Stop: a controlled shutdown through the heartbeat (at most `CONTROLLED_SHUTDOWN_WAIT_MS_MAX`),
//! so that the next start registers at once; then the lifecycle, the publisher, the
//! controller and the quorum stop, and every log closes cleanly.
//!
//! Invariants: nothing changes the topics between the attach and the stop except the
//! publisher; the migration writes only onto a metadata log without topics, configs or
//! producer ids, and a start whose migration fails stops before anything is deleted.

use std::sync::Arc;

use crate::broker::clean_shutdown;
use crate::broker::config::BrokerConfig;
use crate::broker::controller_channel::ControllerChannel;
use crate::broker::lifecycle::{BrokerState, LifecycleConfig};
use crate::broker::lifecycle_driver::{self, LifecycleHandle};
use crate::broker::metadata_publisher::{MetadataPublisher, PublishObserver};
use crate::broker::{Broker, BrokerError};
use crate::controller::core::{ControllerConfig, Reply, Request};
use crate::controller::driver::{ControllerDriverError, ControllerHandle};
use crate::controller::migration::{LegacyDirectory, LegacyTopic};
use crate::controller::policy::BrokerConfigPolicy;
use crate::controller::records::{METADATA_VERSION_FEATURE, METADATA_VERSION_LEVEL};
use crate::protocol::broker_registration::{
    BrokerRegistrationFeature, BrokerRegistrationListener, BrokerRegistrationRequest,
};
use crate::protocol::types::NodeId;
use crate::protocol::wire::Uuid;
use crate::raft::core::RaftConfig;
use crate::raft::driver::{self as raft_driver, NodeConfig, RaftHandle, SnapshotConfig};
use crate::raft::store::METADATA_LOG_SEGMENT_BYTES_DEFAULT;
use crate::rt::clock::Clock;
use crate::rt::disk::Disk;
use crate::rt::latch::Latch;
use crate::rt::net::TcpListener;
use crate::rt::task::{self, JoinHandle};
use crate::rt::time::Duration;

/// The longest a start waits for its own controller to become active.
pub const ACTIVE_WAIT_MS_MAX: u64 = 30_000;
/// The longest a start waits to be registered and unfenced before it serves anyway (the
/// partitions then answer NOT_LEADER_OR_FOLLOWER until it is). A restart after a crash waits
/// for the old incarnation's session to expire (`broker.session.timeout.ms`) first.
pub const UNFENCE_WAIT_MS_MAX: u64 = 60_000;
/// The longest a stop waits for the controller to grant the controlled shutdown.
pub const CONTROLLED_SHUTDOWN_WAIT_MS_MAX: u64 = 5_000;
/// How often the lifecycle retries a failed registration or heartbeat.
pub const LIFECYCLE_RETRY_BACKOFF_MS: u64 = 100;

const _: () = assert!(CONTROLLED_SHUTDOWN_WAIT_MS_MAX < UNFENCE_WAIT_MS_MAX);

/// A running node.
pub struct Node {
    pub broker: Arc<Broker>,
    pub raft: RaftHandle,
    pub controller: ControllerHandle,
    pub lifecycle: LifecycleHandle,
    /// Where the controller listener is bound.
    pub controller_address: String,
    /// This start's incarnation, as its BrokerRegistration names it (new at every start).
    pub incarnation_id: crate::protocol::wire::Uuid,
    /// The quorum's and the controller's tasks, watched with the log directory.
    parts: Parts,
    lifecycle_task: JoinHandle<()>,
    publisher_task: JoinHandle<()>,
    /// Keeps the clean-shutdown marker at the current epoch under sync-before-ack.
    marker_task: JoinHandle<()>,
    /// The replica fetchers, the ISR change sender and their housekeeping.
    replication: crate::replication::fetcher::Replication,
    stop: Arc<Latch>,
}

/// What a node reports as it runs, for the simulation's checkers; nothing by default.
#[derive(Clone, Default)]
pub struct NodeObservers {
    /// Called with every image the broker applies, once it is in force.
    pub image: Option<PublishObserver>,
    /// The metadata quorum replica's events (epochs, leadership, truncations).
    pub raft: Option<crate::raft::driver::EventSink>,
}

impl Node {
    /// Starts the node on its log directory `disk` (the metadata log goes to
    /// `metadata_disk`, the same directory unless `metadata.log.dir` names another), with
    /// the controller listener bound already.
    pub async fn start(
        config: BrokerConfig,
        disk: Disk,
        metadata_disk: Disk,
        clock: Clock,
        controller_listener: TcpListener,
    ) -> Result<Node, BrokerError> {
        Node::start_observed(
            config,
            disk,
            metadata_disk,
            clock,
            controller_listener,
            NodeObservers::default(),
        )
        .await
    }

    /// [`Node::start`] with observers of what the node does (the simulation's histories).
    pub async fn start_observed(
        config: BrokerConfig,
        disk: Disk,
        metadata_disk: Disk,
        clock: Clock,
        controller_listener: TcpListener,
        observers: NodeObservers,
    ) -> Result<Node, BrokerError> {
        let NodeObservers {
            image: observer,
            raft: raft_events,
        } = observers;
        if !config.kraft.controller_role {
            return Err(BrokerError::Config(
                "process.roles must include controller for now".into(),
            ));
        }
        let node_id = config.node_id;
        let controller_address = controller_listener
            .local_addr()
            .map_err(|e| BrokerError::Config(format!("the controller listener: {e}")))?
            .to_string();
        // Several voters: each a combined node at its `controller.quorum.voters` address (this
        // one's listener bound there). Otherwise a quorum of one at the bound listener.
        let voters: std::collections::BTreeMap<i32, String> =
            if config.kraft.quorum_voters.len() > 1 {
                config.kraft.quorum_voters.clone()
            } else {
                [(node_id, controller_address.clone())].into()
            };
        let quorum_of_one = voters.len() == 1;
        let metadata_log_existed = metadata_disk
            .exists(crate::raft::store::METADATA_PARTITION_DIR)
            .await
            .map_err(|e| BrokerError::Metadata(format!("looking for the metadata log: {e}")))?;
        let broker = Broker::open(config.clone(), disk, clock.clone()).await?;
        broker.topics.take_leadership_from_metadata().await;
        let cluster_id = broker.cluster_id.clone();
        let raft_config = RaftConfig::DEFAULT;
        let node_config = NodeConfig {
            node_id,
            voters: voters.clone(),
            metadata_log_dir: String::new(),
            segment_bytes: METADATA_LOG_SEGMENT_BYTES_DEFAULT,
            raft: raft_config,
            cluster_id: Some(cluster_id.clone()),
            bugs: config.bugs.raft,
            snapshots: SnapshotConfig::DEFAULT,
        };
        let (apis, forwarded) = crate::controller::driver::listener_apis();
        let raft = raft_driver::start_with(
            node_config,
            metadata_disk,
            clock.clone(),
            controller_listener,
            raft_events,
            Some(apis),
        )
        .await
        .map_err(|e| BrokerError::Metadata(format!("the metadata quorum: {e}")))?;
        // Taken (and removed) before the first registration: a crash of this run must not
        // pass for the clean stop of the last one.
        let marker_epoch = clean_shutdown::take(&broker.disk)
            .await
            .map_err(|e| BrokerError::Meta(e.to_string()))?;
        // A log whose recovery cut records may have lost synced ones (a rotten batch looks
        // like a torn one): whatever the marker says, this start is unclean.
        let mut cut = None;
        for partition in broker.topics.partitions().await {
            if let Some(t) = &partition.recovery.truncated {
                cut = Some(format!(
                    "{}-{} at offset {}",
                    partition.topic, partition.index, t.offset
                ));
                break;
            }
        }
        let previous_broker_epoch = match cut {
            Some(at) if marker_epoch >= 0 => {
                tracing::warn!(%at, "recovery truncated a log: registering as after an unclean shutdown");
                -1
            }
            _ => marker_epoch,
        };
        let registration = BrokerRegistrationRequest {
            previous_broker_epoch,
            ..registration(&broker.config, &cluster_id)
        };
        let mut controller_config =
            ControllerConfig::new(node_id, &cluster_id, crate::rt::rand::random_u64());
        controller_config.colocated_broker = Some((node_id, registration.incarnation_id));
        controller_config.session_timeout_ms = config.kraft.broker_session_timeout_ms;
        controller_config.num_partitions = config.num_partitions;
        controller_config.default_replication_factor = config.default_replication_factor;
        controller_config.min_insync_replicas = config.min_insync_replicas;
        controller_config.delete_topic_enable = config.delete_topic_enable;
        controller_config.bugs = config.bugs.controller;
        controller_config.unclean_leader_election_enable = config.unclean_leader_election_enable;
        controller_config.auto_leader_rebalance_enable = config.auto_leader_rebalance_enable;
        controller_config.leader_imbalance_check_interval_ms =
            config.leader_imbalance_check_interval_ms;
        controller_config.leader_imbalance_per_broker_percentage =
            config.leader_imbalance_per_broker_percentage;
        controller_config.proposal_bytes_max =
            crate::cli::controller::proposal_bytes_max(&raft_config);
        let policy = Arc::new(BrokerConfigPolicy {
            broker: Arc::new(config.clone()),
        });
        let controller = crate::controller::driver::start(
            raft.handle.clone(),
            controller_config,
            policy,
            Some(forwarded),
        );
        // Every wait of the start gives up as soon as a part stops (an IO error of the
        // metadata log ends the quorum's task): the caller restarts, as after any failure.
        let mut parts = Parts {
            raft_task: raft.task,
            controller_task: controller.task,
            broker: broker.clone(),
        };
        let image = if quorum_of_one {
            let active = parts
                .unless_stopped(
                    "waiting for the controller",
                    controller
                        .handle
                        .wait_for(Duration::from_millis(ACTIVE_WAIT_MS_MAX), |p| {
                            p.active_epoch.is_some()
                        }),
                )
                .await?
                .map_err(|_| {
                    BrokerError::Metadata(format!(
                        "the controller did not become active within {ACTIVE_WAIT_MS_MAX} ms"
                    ))
                })?;
            active.image.clone()
        } else {
            // A voter of several: wait until the quorum has a leader and this node's
            // controller applied everything committed, so that the first image published
            // is not an old one (whose missing topics would be deleted here).
            parts
                .unless_stopped(
                    "catching up with the metadata log",
                    caught_up(&raft.handle, &controller.handle),
                )
                .await??
        };
        if image.topics.is_empty() && image.configs.is_empty() && image.next_producer_id == 0 {
            if quorum_of_one {
                parts
                    .unless_stopped("migrating", migrate(&broker, &controller.handle))
                    .await??;
            } else if !metadata_log_existed && !broker.topics.list().await.is_empty() {
                // The previous release's single-node directory: its topics are not in the
                // cluster's log, and applying the image would delete them.
                return Err(BrokerError::Metadata(format!(
                    "the data directory holds topics of a single-node broker but this node \
                     joins a quorum of {} voters: start it alone first (as a quorum of one it \
                     migrates them into its metadata log), or give it an empty directory",
                    voters.len()
                )));
            }
        }
        let publisher = MetadataPublisher::new(broker.clone(), observer);
        let published = controller.handle.published();
        publisher
            .publish(&published.image, published.applied_offset)
            .await
            .map_err(|e| BrokerError::Metadata(format!("applying the metadata image: {e}")))?;
        let incarnation_id = registration.incarnation_id;
        let (lifecycle, lifecycle_task) = lifecycle_driver::start(
            LifecycleConfig {
                registration,
                heartbeat_interval_ms: config.kraft.broker_heartbeat_interval_ms,
                retry_backoff_ms: LIFECYCLE_RETRY_BACKOFF_MS,
            },
            voters.values().cloned().collect(),
        );
        let channel = ControllerChannel::new(
            controller.handle.clone(),
            publisher.applied(),
            lifecycle.clone(),
            node_id,
            crate::broker::forwarding::Forwarder::new(node_id, raft.handle.clone(), voters.clone()),
            !quorum_of_one,
        );
        broker.topics.attach_controller(channel.clone());
        broker.producer_ids.attach_controller(channel.clone()).await;
        let epoch_of = lifecycle.clone();
        let replication = crate::replication::fetcher::start(
            broker.clone(),
            channel,
            Arc::new(move || epoch_of.status().epoch),
        );
        let stop = Arc::new(Latch::new());
        let applied = publisher.applied();
        let publisher_task = task::spawn(run_publisher(
            publisher,
            controller.handle.clone(),
            lifecycle.clone(),
            stop.clone(),
        ));
        let marker_task = task::spawn(keep_running_marker(
            broker.clone(),
            lifecycle.clone(),
            stop.clone(),
        ));
        let unfenced = parts
            .unless_stopped(
                "waiting to be unfenced",
                controller
                    .handle
                    .wait_for(Duration::from_millis(UNFENCE_WAIT_MS_MAX), |p| {
                        p.image.brokers.get(&node_id).is_some_and(|b| {
                            b.incarnation_id == incarnation_id
                                && !b.fenced
                                && !b.in_controlled_shutdown
                        })
                    }),
            )
            .await;
        let unfenced = match unfenced {
            Ok(unfenced) => unfenced,
            Err(e) => {
                stop.set();
                replication.stop(&broker).await;
                lifecycle.stop().await;
                return Err(e);
            }
        };
        if let Ok(published) = &unfenced {
            // Serve once the partitions lead: the publisher has applied that image too.
            let offset = published.applied_offset;
            let _ = applied
                .wait_for(Duration::from_millis(UNFENCE_WAIT_MS_MAX), |a| *a >= offset)
                .await;
        }
        if unfenced.is_err() {
            tracing::warn!(
                node_id,
                state = ?lifecycle.status().state,
                "not unfenced within {UNFENCE_WAIT_MS_MAX} ms; serving anyway (partitions refuse until it is)"
            );
        }
        tracing::info!(node_id, controller = %controller_address, voters = voters.len(), "node started");
        Ok(Node {
            broker,
            raft: raft.handle,
            controller: controller.handle,
            lifecycle,
            controller_address,
            incarnation_id,
            parts,
            lifecycle_task,
            publisher_task,
            marker_task,
            replication,
            stop,
        })
    }

    /// Waits until a part of the node stops on its own (its log directory failed, the
    /// quorum or the controller stopped); what stopped.
    pub async fn failed(&mut self) -> String {
        match self
            .parts
            .unless_stopped("running", std::future::pending::<()>())
            .await
        {
            Err(e) => e.to_string(),
            Ok(()) => unreachable!("a pending future completed"),
        }
    }

    /// Stops the node: a controlled shutdown, then every part, then the logs close cleanly.
    pub async fn shutdown(self) -> Result<(), BrokerError> {
        self.lifecycle.begin_controlled_shutdown().await;
        let done = self
            .lifecycle
            .wait_for(
                Duration::from_millis(CONTROLLED_SHUTDOWN_WAIT_MS_MAX),
                |s| matches!(s.state, BrokerState::ShutDown | BrokerState::Failed(_)),
            )
            .await;
        if done.is_err() {
            tracing::warn!("the controlled shutdown was not granted within {CONTROLLED_SHUTDOWN_WAIT_MS_MAX} ms");
        }
        self.replication.stop(&self.broker).await;
        self.lifecycle.stop().await;
        let _ = self.lifecycle_task.await;
        self.stop.set();
        let _ = self.publisher_task.await;
        let _ = self.marker_task.await;
        self.controller.shutdown().await;
        let _ = self.parts.controller_task.await;
        self.raft.shutdown().await;
        let _ = self.parts.raft_task.await;
        let epoch = self.lifecycle.status().epoch;
        self.broker.close().await?;
        // Last, once every log is closed and synced: the next start proves this clean stop
        // by registering with this epoch (KIP-966), and stays eligible from the ELR.
        if let Some(epoch) = epoch {
            clean_shutdown::write(&self.broker.disk, epoch)
                .await
                .map_err(|e| BrokerError::Meta(e.to_string()))?;
        }
        Ok(())
    }
}

/// How often the marker task looks for a new broker epoch when nothing wakes it.
const RUNNING_MARKER_POLL_MS: u64 = 1_000;

/// Under sync-before-ack, writes the clean-shutdown marker for every epoch the broker
/// registers under, so that a crash does not cost it its place in the ELRs (see
/// `clean_shutdown`); stops at `stop`, or for good once a page-cache log opened.
async fn keep_running_marker(broker: Arc<Broker>, lifecycle: LifecycleHandle, stop: Arc<Latch>) {
    if broker.config.log_flush != crate::log::FlushPolicy::SyncBeforeAck {
        return;
    }
    let mut claimed: Option<i64> = None;
    loop {
        let status = tokio::select! {
            biased;
            _ = stop.wait() => return,
            status = lifecycle.wait_for(
                Duration::from_millis(RUNNING_MARKER_POLL_MS),
                |s| s.epoch.is_some() && s.epoch != claimed,
            ) => status,
        };
        let Ok(crate::broker::lifecycle_driver::LifecycleStatus {
            epoch: Some(epoch), ..
        }) = status
        else {
            continue;
        };
        match broker
            .health
            .running_marker
            .claim(&broker.disk, epoch)
            .await
        {
            Ok(true) => claimed = Some(epoch),
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot keep the clean-shutdown marker; a crash will count as unclean");
                crate::rt::time::sleep(Duration::from_millis(RUNNING_MARKER_POLL_MS)).await;
            }
        }
    }
}

/// The longest a voter of several waits to catch up with the metadata log at its start.
pub const CATCH_UP_WAIT_MS_MAX: u64 = 60_000;
/// How often the catch-up looks again.
const CATCH_UP_POLL_MS: u64 = 50;

/// Waits until the quorum has a leader and `controller` applied everything below the high
/// watermark this replica knows (at least one record: a new leader's first); the image then.
async fn caught_up(
    raft: &RaftHandle,
    controller: &ControllerHandle,
) -> Result<Arc<crate::controller::image::MetadataImage>, BrokerError> {
    let mut waited_ms = 0;
    loop {
        let status = raft.status();
        let published = controller.published();
        if status.leader_id.is_some()
            && status.high_watermark > 0
            && published.applied_offset >= status.high_watermark - 1
        {
            return Ok(published.image);
        }
        if waited_ms >= CATCH_UP_WAIT_MS_MAX {
            return Err(BrokerError::Metadata(format!(
                "not caught up with the metadata log within {CATCH_UP_WAIT_MS_MAX} ms \
                 (leader {:?}, high watermark {}, applied {}; every voter must be running and \
                 its meta.properties carry the same cluster.id: `samsa storage format`)",
                status.leader_id, status.high_watermark, published.applied_offset
            )));
        }
        crate::rt::time::sleep(Duration::from_millis(CATCH_UP_POLL_MS)).await;
        waited_ms += CATCH_UP_POLL_MS;
    }
}

/// The tasks a start watches while it waits.
struct Parts {
    raft_task: JoinHandle<Result<(), raft_driver::DriverError>>,
    controller_task: JoinHandle<Result<(), ControllerDriverError>>,
    broker: Arc<Broker>,
}

impl Parts {
    /// `wait`'s outcome, or an error naming `what` if the quorum, the controller or the
    /// log directory stops first.
    async fn unless_stopped<T>(
        &mut self,
        what: &str,
        wait: impl std::future::Future<Output = T>,
    ) -> Result<T, BrokerError> {
        tokio::select! {
            biased;
            _ = self.broker.health.failed() => Err(BrokerError::Metadata(format!(
                "{what}: the log directory failed"
            ))),
            result = &mut self.raft_task => Err(BrokerError::Metadata(format!(
                "{what}: the metadata quorum stopped: {}",
                stopped(result)
            ))),
            result = &mut self.controller_task => Err(BrokerError::Metadata(format!(
                "{what}: the controller stopped: {}",
                stopped(result)
            ))),
            value = wait => Ok(value),
        }
    }
}

/// How a part's task ended.
fn stopped<E: std::fmt::Display>(
    result: Result<Result<(), E>, crate::rt::task::JoinError>,
) -> String {
    match result {
        Ok(Ok(())) => "it stopped".to_string(),
        Ok(Err(e)) => e.to_string(),
        Err(e) => format!("its task failed: {e}"),
    }
}

/// What the broker registers with: its advertised listeners and the metadata.versions it
/// runs.
fn registration(config: &BrokerConfig, cluster_id: &str) -> BrokerRegistrationRequest {
    BrokerRegistrationRequest {
        broker_id: NodeId(config.node_id),
        cluster_id: cluster_id.to_string(),
        incarnation_id: Uuid::v4_from([
            crate::rt::rand::random_u64(),
            crate::rt::rand::random_u64(),
        ]),
        listeners: config
            .advertised_listeners
            .iter()
            .map(|l| BrokerRegistrationListener {
                name: l.name.clone(),
                host: l.host.clone(),
                port: l.port,
                security_protocol: 0,
            })
            .collect(),
        features: vec![BrokerRegistrationFeature {
            name: METADATA_VERSION_FEATURE.into(),
            min_supported_version: 1,
            max_supported_version: METADATA_VERSION_LEVEL,
        }],
        ..Default::default()
    }
}

/// What the broker opened from its data directory, as the migration reads it: its topics
/// (ids, partition counts, overrides), its dynamic broker configs and the producer-id block's
/// end (read before a controller is attached).
pub async fn legacy_directory(broker: &Broker) -> LegacyDirectory {
    let layers = broker.dynamic.layers().await;
    let block_end = broker.producer_ids.block_end().await;
    LegacyDirectory {
        topics: broker
            .topics
            .list()
            .await
            .iter()
            .map(|t| LegacyTopic {
                name: t.name.clone(),
                id: t.id,
                partitions: t.partitions.len() as i32,
                overrides: t.overrides.clone(),
            })
            .collect(),
        cluster_default_configs: layers.cluster_default,
        node_configs: layers.node,
        producer_id_block_end: (block_end > 0).then_some(block_end),
    }
}

/// Writes what the data directory holds into a metadata log that holds nothing yet: topics
/// with their ids, partition counts and overrides, the dynamic broker configs, and the end of
/// the producer-id block (so that ids handed out from the metadata log start above every id
/// handed out before). Nothing to migrate (a new directory): nothing written.
async fn migrate(broker: &Broker, controller: &ControllerHandle) -> Result<(), BrokerError> {
    let directory = legacy_directory(broker).await;
    let block_end = directory.producer_id_block_end.unwrap_or(0);
    if directory == LegacyDirectory::default() {
        return Ok(());
    }
    let node_id = broker.config.node_id;
    let records = directory
        .records(node_id)
        .map_err(|e| BrokerError::Metadata(e.to_string()))?;
    let count = records.len();
    match controller.submit(Request::Migrate(records)).await {
        Ok(Reply::Migrate(Ok(()))) => {
            tracing::info!(
                topics = directory.topics.len(),
                records = count,
                producer_id_block_end = block_end,
                "migrated the data directory into the metadata log"
            );
            Ok(())
        }
        Ok(Reply::Migrate(Err(e))) => Err(BrokerError::Metadata(format!(
            "migrating the data directory into the metadata log: {e}"
        ))),
        Ok(other) => panic!("a Migrate answered with {other:?}"),
        Err(e) => Err(BrokerError::Metadata(format!(
            "migrating the data directory: the controller stopped: {e:?}"
        ))),
    }
}

/// The publisher's task: applies each image the controller publishes and tells the lifecycle
/// how far it got, until `stop`.
async fn run_publisher(
    publisher: MetadataPublisher,
    controller: ControllerHandle,
    lifecycle: LifecycleHandle,
    stop: Arc<Latch>,
) {
    /// How long the publisher waits for a new image before it looks at `stop` again.
    const IDLE_WAIT_MS: u64 = 1_000;
    loop {
        let applied = publisher.applied().get();
        lifecycle.metadata_applied(applied);
        let next = tokio::select! {
            biased;
            _ = stop.wait() => return,
            next = controller.wait_for(Duration::from_millis(IDLE_WAIT_MS), |p| {
                p.applied_offset > applied
            }) => next,
        };
        let Ok(published) = next else {
            continue;
        };
        if let Err(e) = publisher
            .publish(&published.image, published.applied_offset)
            .await
        {
            tracing::error!(error = %e, offset = published.applied_offset, "applying a metadata image failed; retrying");
            tokio::select! {
                biased;
                _ = stop.wait() => return,
                _ = crate::rt::time::sleep(Duration::from_millis(IDLE_WAIT_MS)) => {}
            }
        }
    }
}
