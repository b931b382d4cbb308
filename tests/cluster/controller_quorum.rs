//! Three controllers (a KRaft replica with the controller above it, in one process, each with
//! its own directory and controller listener) on real sockets and files: the controller APIs
//! over the wire (broker registration and heartbeats, topics, partitions, configs, producer-id
//! blocks), with every controller's image following the log; failover to a new active
//! controller that continues from the log (producer ids never repeat); a controller that was
//! down while the others snapshotted catches up from the snapshot to the same image.
#![cfg(not(feature = "sim"))]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use samsa::broker::config::BrokerConfig;
use samsa::client::connection::{Connection, ConnectionLimits};
use samsa::controller::core::ControllerConfig;
use samsa::controller::driver::{self as controller_driver, ControllerNode, Published};
use samsa::controller::policy::BrokerConfigPolicy;
use samsa::protocol::allocate_producer_ids::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse,
};
use samsa::protocol::broker_heartbeat::BrokerHeartbeatResponse;
use samsa::protocol::broker_registration::{BrokerRegistrationRequest, BrokerRegistrationResponse};
use samsa::protocol::create_partitions::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopic,
};
use samsa::protocol::create_topics::{CreatableTopic, CreateTopicsRequest, CreateTopicsResponse};
use samsa::protocol::delete_topics::{DeleteTopicState, DeleteTopicsRequest, DeleteTopicsResponse};
use samsa::protocol::incremental_alter_configs::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use samsa::protocol::types::NodeId;
use samsa::protocol::wire::Uuid;
use samsa::raft::driver::{self, NodeConfig, RaftNode, SnapshotConfig};
use samsa::rt::clock::Clock;
use samsa::rt::disk::Disk;
use samsa::rt::net::TcpListener;

use super::raft_quorum::{TEST_RAFT, WAIT};
use crate::controller_requests::caught_up_heartbeat;

const CLUSTER: &str = "controller-test";

// Kafka's error codes, as a client sees them.
const NOT_CONTROLLER: i16 = 41;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const INVALID_CONFIG: i16 = 40;
const INCONSISTENT_CLUSTER_ID: i16 = 104;

struct Node {
    raft: RaftNode,
    controller: ControllerNode,
}

struct Quorum {
    dirs: BTreeMap<i32, tempfile::TempDir>,
    voters: BTreeMap<i32, String>,
    listeners: BTreeMap<i32, Option<TcpListener>>,
    nodes: BTreeMap<i32, Node>,
    snapshots: SnapshotConfig,
    /// `broker.session.timeout.ms` of every controller.
    session_timeout_ms: u64,
}

impl Quorum {
    async fn new(snapshots: SnapshotConfig) -> Quorum {
        Quorum::with_sessions(snapshots, 9_000).await
    }

    async fn with_sessions(snapshots: SnapshotConfig, session_timeout_ms: u64) -> Quorum {
        let mut quorum = Quorum {
            dirs: BTreeMap::new(),
            voters: BTreeMap::new(),
            listeners: BTreeMap::new(),
            nodes: BTreeMap::new(),
            snapshots,
            session_timeout_ms,
        };
        for id in 1..=3 {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr").to_string();
            quorum.voters.insert(id, addr);
            quorum.listeners.insert(id, Some(listener));
            quorum
                .dirs
                .insert(id, tempfile::tempdir().expect("a directory"));
        }
        for id in 1..=3 {
            quorum.start(id).await;
        }
        quorum
    }

    async fn start(&mut self, id: i32) {
        let listener = match self.listeners.get_mut(&id).and_then(Option::take) {
            Some(listener) => listener,
            None => crate::raft_quorum::rebind(&self.voters[&id]).await,
        };
        let config = NodeConfig {
            node_id: id,
            voters: self.voters.clone(),
            metadata_log_dir: "metadata".into(),
            segment_bytes: 8 << 10,
            raft: TEST_RAFT,
            cluster_id: Some(CLUSTER.into()),
            bugs: Default::default(),
            snapshots: self.snapshots,
        };
        let disk = Disk::real(self.dirs[&id].path()).expect("disk");
        let (apis, forwarded) = controller_driver::listener_apis();
        let raft = driver::start_with(config, disk, Clock::new(), listener, None, Some(apis))
            .await
            .expect("the replica starts");
        let policy = Arc::new(BrokerConfigPolicy {
            broker: Arc::new(BrokerConfig::default()),
        });
        let controller = controller_driver::start(
            raft.handle.clone(),
            ControllerConfig {
                session_timeout_ms: self.session_timeout_ms,
                ..ControllerConfig::new(id, CLUSTER, 7 + id as u64)
            },
            policy,
            Some(forwarded),
        );
        self.nodes.insert(id, Node { raft, controller });
    }

    async fn stop(&mut self, id: i32) {
        let node = self.nodes.remove(&id).expect("running");
        node.controller.handle.shutdown().await;
        node.controller
            .task
            .await
            .expect("joins")
            .expect("the controller stops cleanly");
        node.raft.handle.shutdown().await;
        node.raft
            .task
            .await
            .expect("joins")
            .expect("the replica stops cleanly");
    }

    /// The one active controller.
    async fn active(&self) -> i32 {
        let deadline = samsa::rt::time::now() + WAIT;
        loop {
            let active: Vec<i32> = self
                .nodes
                .iter()
                .filter(|(_, n)| n.controller.handle.published().active_epoch.is_some())
                .map(|(id, _)| *id)
                .collect();
            if let [one] = active[..] {
                return one;
            }
            assert!(
                samsa::rt::time::now() < deadline,
                "no single active controller: {active:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn connect(&self, id: i32) -> Connection {
        Connection::connect(&self.voters[&id], "test", ConnectionLimits::default())
            .await
            .expect("connects and negotiates versions")
    }

    /// Waits until every running controller applied `offset` and returns what each published.
    async fn applied_everywhere(&self, offset: i64) -> BTreeMap<i32, Published> {
        let mut out = BTreeMap::new();
        for (id, node) in &self.nodes {
            let published = node
                .controller
                .handle
                .wait_for(WAIT, |p| p.applied_offset >= offset)
                .await
                .unwrap_or_else(|p| {
                    panic!("controller {id} applied only up to {}", p.applied_offset)
                });
            out.insert(*id, published);
        }
        out
    }
}

fn registration(broker_id: i32, cluster_id: &str) -> BrokerRegistrationRequest {
    crate::controller_requests::registration(
        broker_id,
        cluster_id,
        Uuid([broker_id as u8; 16]),
        "127.0.0.1",
    )
}

fn topic(name: &str, partitions: i32, replication_factor: i16) -> CreatableTopic {
    CreatableTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor,
        ..Default::default()
    }
}

async fn create_topics(conn: &mut Connection, topics: Vec<CreatableTopic>) -> CreateTopicsResponse {
    let version = conn.version_for(19).expect("CreateTopics is served");
    let request = CreateTopicsRequest {
        topics,
        timeout_ms: 10_000,
        validate_only: false,
    };
    conn.send(19, version, &request).await.expect("answers")
}

/// Registers `broker_id` at the active controller and heartbeats until it is unfenced;
/// returns its epoch.
async fn register_unfenced(quorum: &Quorum, broker_id: i32) -> i64 {
    let mut conn = quorum.connect(quorum.active().await).await;
    let response: BrokerRegistrationResponse = conn
        .send(
            62,
            conn.version_for(62).expect("served"),
            &registration(broker_id, CLUSTER),
        )
        .await
        .expect("answers");
    assert_eq!(response.error_code, 0, "registered");
    let epoch = response.broker_epoch;
    assert!(
        epoch > 0,
        "the epoch is the offset of the broker's record: {epoch}"
    );
    let deadline = samsa::rt::time::now() + WAIT;
    loop {
        let heartbeat = caught_up_heartbeat(broker_id, epoch);
        let response: BrokerHeartbeatResponse = conn
            .send(63, conn.version_for(63).expect("served"), &heartbeat)
            .await
            .expect("answers");
        assert_eq!(response.error_code, 0);
        if !response.is_fenced {
            assert!(response.is_caught_up);
            return epoch;
        }
        assert!(samsa::rt::time::now() < deadline, "never unfenced");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn allocate(conn: &mut Connection, broker_id: i32, epoch: i64) -> (i64, i32) {
    let response: AllocateProducerIdsResponse = conn
        .send(
            67,
            0,
            &AllocateProducerIdsRequest {
                broker_id: NodeId(broker_id),
                broker_epoch: epoch,
            },
        )
        .await
        .expect("answers");
    assert_eq!(response.error_code, 0, "a block is allocated");
    (response.producer_id_start, response.producer_id_len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_apis_over_the_wire_and_every_image_follows() {
    let quorum = Quorum::new(SnapshotConfig::DEFAULT).await;
    let active = quorum.active().await;
    let standby = (1..=3).find(|id| *id != active).expect("a standby");

    // Every controller listener advertises the controller's APIs; only the active one
    // decides.
    let mut conn = quorum.connect(standby).await;
    let refused = create_topics(&mut conn, vec![topic("t", 1, 1)]).await;
    assert_eq!(refused.topics[0].error_code, NOT_CONTROLLER);

    let mut conn = quorum.connect(active).await;
    let wrong: BrokerRegistrationResponse = conn
        .send(
            62,
            conn.version_for(62).expect("served"),
            &registration(101, "another"),
        )
        .await
        .expect("answers");
    assert_eq!(wrong.error_code, INCONSISTENT_CLUSTER_ID);
    let epoch = register_unfenced(&quorum, 101).await;

    let created = create_topics(
        &mut conn,
        vec![
            topic("orders", 3, 1),
            topic("wide", 1, 2),
            topic("orders", 1, 1),
        ],
    )
    .await;
    let codes: Vec<i16> = created.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes[0], 0, "{created:?}");
    assert_eq!(
        codes[1], INVALID_REPLICATION_FACTOR,
        "until replication exists"
    );
    assert_ne!(codes[2], 0, "the same name twice in a request");
    let orders_id = created.topics[0].topic_id;
    assert_ne!(orders_id, Uuid::ZERO);
    assert_eq!(created.topics[0].num_partitions, 3);
    let again = create_topics(&mut conn, vec![topic("orders", 3, 1)]).await;
    assert_eq!(again.topics[0].error_code, TOPIC_ALREADY_EXISTS);

    // Configs: a valid change, an invalid value, an append to a list config.
    let alter = |configs: Vec<(i8, &str, &str)>| IncrementalAlterConfigsRequest {
        resources: vec![AlterConfigsResource {
            resource_type: 2,
            resource_name: "orders".into(),
            configs: configs
                .into_iter()
                .map(|(op, k, v)| AlterableConfig {
                    name: k.into(),
                    config_operation: op,
                    value: Some(v.into()),
                })
                .collect(),
        }],
        validate_only: false,
    };
    let version = conn.version_for(44).expect("served");
    let ok: IncrementalAlterConfigsResponse = conn
        .send(
            44,
            version,
            &alter(vec![
                (0, "retention.ms", "1000"),
                (2, "cleanup.policy", "compact"),
            ]),
        )
        .await
        .expect("answers");
    assert_eq!(ok.responses[0].error_code, 0, "{ok:?}");
    let bad: IncrementalAlterConfigsResponse = conn
        .send(44, version, &alter(vec![(0, "retention.ms", "soon")]))
        .await
        .expect("answers");
    assert_eq!(bad.responses[0].error_code, INVALID_CONFIG, "{bad:?}");

    let grown: CreatePartitionsResponse = conn
        .send(
            37,
            conn.version_for(37).expect("served"),
            &CreatePartitionsRequest {
                topics: vec![CreatePartitionsTopic {
                    name: "orders".into(),
                    count: 5,
                    assignments: None,
                }],
                timeout_ms: 10_000,
                validate_only: false,
            },
        )
        .await
        .expect("answers");
    assert_eq!(grown.results[0].error_code, 0, "{grown:?}");

    let first = allocate(&mut conn, 101, epoch).await;
    let second = allocate(&mut conn, 101, epoch).await;
    assert!(
        second.0 >= first.0 + i64::from(first.1),
        "blocks do not overlap: {first:?} then {second:?}"
    );

    // Every controller's image, at the same offset, is the same image.
    let end = quorum.nodes[&active].raft.handle.status().high_watermark - 1;
    let images = quorum.applied_everywhere(end).await;
    for published in images.values() {
        let image = &published.image;
        let orders = image.topic("orders").expect("created everywhere");
        assert_eq!(orders.id, orders_id);
        assert_eq!(orders.partitions.len(), 5);
        assert!(orders.partitions.values().all(|p| p.leader == 101));
        let configs = image.configs_of(&samsa::controller::image::ConfigResource::topic("orders"));
        assert_eq!(
            configs.get("retention.ms").map(String::as_str),
            Some("1000")
        );
        assert_eq!(
            configs.get("cleanup.policy").map(String::as_str),
            Some("delete,compact")
        );
        assert!(image.topic("wide").is_none());
        assert!(!image.brokers[&101].fenced);
    }
    let at_end: Vec<_> = images
        .values()
        .filter(|p| p.applied_offset == end)
        .collect();
    for pair in at_end.windows(2) {
        assert_eq!(pair[0].image, pair[1].image, "the same log, the same image");
    }

    // DeleteTopics v6 names the topic by id.
    let version = conn.version_for(20).expect("served");
    assert_eq!(version, 6);
    let deleted: DeleteTopicsResponse = conn
        .send(
            20,
            version,
            &DeleteTopicsRequest {
                topics: vec![DeleteTopicState {
                    name: None,
                    topic_id: orders_id,
                }],
                timeout_ms: 10_000,
                ..Default::default()
            },
        )
        .await
        .expect("answers");
    assert_eq!(deleted.responses.len(), 1);
    assert_eq!(deleted.responses[0].error_code, 0, "{deleted:?}");
    assert_eq!(deleted.responses[0].name.as_deref(), Some("orders"));
    let end = quorum.nodes[&active].raft.handle.status().high_watermark - 1;
    for published in quorum.applied_everywhere(end).await.values() {
        assert!(published.image.topic("orders").is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_controller_continues_and_a_returning_one_catches_up_from_a_snapshot() {
    // Snapshots due after 2 KiB, and a log kept to 1 byte past the latest: every snapshot
    // moves the log start, so a controller that was away must load one.
    let snapshots = SnapshotConfig {
        max_bytes_between_snapshots: 2 << 10,
        max_snapshot_interval_ms: 0,
        retention_bytes: 1,
    };
    let mut quorum = Quorum::new(snapshots).await;
    let epoch = register_unfenced(&quorum, 7).await;
    let first_active = quorum.active().await;
    let mut conn = quorum.connect(first_active).await;
    let created = create_topics(&mut conn, vec![topic("before", 2, 1)]).await;
    assert_eq!(created.topics[0].error_code, 0);
    let before = allocate(&mut conn, 7, epoch).await;
    drop(conn);

    // The active controller stops; another takes over with everything it wrote.
    quorum.stop(first_active).await;
    let second_active = quorum.active().await;
    assert_ne!(second_active, first_active);
    let mut conn = quorum.connect(second_active).await;
    // The broker's session continues with the new controller (a fresh session each).
    let after = allocate(&mut conn, 7, epoch).await;
    assert!(
        after.0 >= before.0 + i64::from(before.1),
        "ids never repeat across controllers: {before:?} then {after:?}"
    );
    // Enough topics for snapshots to be due and the log start to move.
    for i in 0..40 {
        let name = format!("t{i}");
        let created = create_topics(&mut conn, vec![topic(&name, 4, 1)]).await;
        assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    }
    let status = quorum.nodes[&second_active].raft.handle.status();
    assert!(
        status.snapshot.is_some(),
        "a snapshot was written: {status:?}"
    );
    assert!(
        status.log_start_offset > 0,
        "the log start moved past the returning controller's records: {status:?}"
    );

    // The stopped controller returns and reaches the same image.
    quorum.start(first_active).await;
    let end = quorum.nodes[&second_active]
        .raft
        .handle
        .status()
        .high_watermark
        - 1;
    let images = quorum.applied_everywhere(end).await;
    let returned = &images[&first_active];
    let returned_status = quorum.nodes[&first_active].raft.handle.status();
    assert!(
        returned_status.log_start_offset > 0,
        "the returning replica installed the leader's snapshot: {returned_status:?}"
    );
    assert!(returned.image.topic("before").is_some());
    assert_eq!(
        returned.image.topic("t39").map(|t| t.partitions.len()),
        Some(4)
    );
    let reference = &images[&second_active];
    if returned.applied_offset == reference.applied_offset {
        assert_eq!(returned.image, reference.image);
    }
}

/// A broker's lifecycle (`broker::lifecycle`) against the quorum: it registers and is
/// unfenced, keeps its session through a failover of the active controller (sessions short
/// enough that a broker whose heartbeats stopped would be fenced meanwhile), and a controlled
/// shutdown moves its leaderships away before the controller lets it stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_keeps_its_session_across_a_failover_and_shuts_down_in_a_controlled_way() {
    use samsa::broker::lifecycle::{BrokerState, LifecycleConfig};
    use samsa::broker::lifecycle_driver;
    // Sessions short enough to expire within the test.
    let mut quorum = Quorum::with_sessions(SnapshotConfig::DEFAULT, 1_500).await;
    let controllers: Vec<String> = quorum.voters.values().cloned().collect();
    let (lifecycle, task) = lifecycle_driver::start(
        LifecycleConfig {
            registration: registration(7, CLUSTER),
            heartbeat_interval_ms: 200,
            retry_backoff_ms: 50,
        },
        controllers,
    );
    lifecycle.metadata_applied(i64::MAX / 2);
    let running = lifecycle
        .wait_for(WAIT, |s| s.state == BrokerState::Running)
        .await
        .expect("registered and unfenced");
    let epoch = running.epoch.expect("an epoch");

    let active = quorum.active().await;
    let mut conn = quorum.connect(active).await;
    let created = create_topics(&mut conn, vec![topic("led", 2, 1)]).await;
    assert_eq!(created.topics[0].error_code, 0);
    drop(conn);

    // A broker that stops heartbeating after it was unfenced: the control.
    register_unfenced(&quorum, 8).await;

    quorum.stop(active).await;
    let next = quorum.active().await;
    // Three session timeouts later the broker is still unfenced at the new controller, and
    // the silent one is fenced.
    tokio::time::sleep(Duration::from_millis(3 * 1_500)).await;
    let image = quorum.nodes[&next].controller.handle.published().image;
    assert!(
        !image.brokers[&7].fenced,
        "heartbeats reached the new controller"
    );
    assert!(
        image.brokers[&8].fenced,
        "a silent broker is fenced meanwhile"
    );
    assert_eq!(lifecycle.status().state, BrokerState::Running);
    assert_eq!(
        lifecycle.status().epoch,
        Some(epoch),
        "the same registration"
    );

    lifecycle.begin_controlled_shutdown().await;
    lifecycle
        .wait_for(WAIT, |s| s.state == BrokerState::ShutDown)
        .await
        .expect("the controller lets it stop");
    let end = quorum.nodes[&next].raft.handle.status().high_watermark - 1;
    let image = &quorum.applied_everywhere(end).await[&next].image;
    let led = image.topic("led").expect("the topic");
    assert!(
        led.partitions.values().all(|p| p.leader != 7),
        "no partition is led by the stopped broker: {led:?}"
    );
    lifecycle.stop().await;
    task.await.expect("the lifecycle stops");
}
