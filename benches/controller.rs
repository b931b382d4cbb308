//! Topic creations per second at the controller, on a quorum of one and of three voters on
//! real TCP (loopback) and real files with fsync, through the wire: admin clients send
//! CreateTopics (one topic of one partition per request) to the active controller's listener
//! and wait for the answer, which leaves once the topic's records are committed.
//!
//! Each voter is a KRaft replica with the controller above it, in this process, with its own
//! directory under `target/bench-tmp`. One broker is registered (and heartbeats) so that
//! partitions have somewhere to go. For each client count it prints creations per second and
//! the latency's median and 99th percentile.
//!
//! Then the same through a broker: a `samsa broker` node (`broker::node`: a quorum of one,
//! its controller, the broker registered with it) serving CreateTopics on its PLAINTEXT
//! listener, where each creation also waits for the broker to apply it (the partition's
//! directory and log created and synced).
//!
//! Run: `cargo bench --bench controller` (`SAMSA_BENCH_SECONDS` sets each run's length,
//! default 5).

#[cfg(feature = "sim")]
fn main() {}

#[cfg(not(feature = "sim"))]
fn main() {
    real::main();
}

#[cfg(not(feature = "sim"))]
#[path = "support/mod.rs"]
mod support;

#[cfg(not(feature = "sim"))]
#[path = "../tests/support/controller_requests.rs"]
mod controller_requests;

#[cfg(not(feature = "sim"))]
mod real {
    use super::controller_requests::{caught_up_heartbeat, registration};
    use super::support::{bench_dir, bench_seconds, percentile, remove};
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use samsa::broker::config::BrokerConfig;
    use samsa::broker::node::Node;
    use samsa::broker::server::Serving;
    use samsa::client::connection::{Connection, ConnectionLimits};
    use samsa::controller::core::ControllerConfig;
    use samsa::controller::driver::{self as controller_driver, ControllerNode};
    use samsa::controller::policy::BrokerConfigPolicy;
    use samsa::protocol::broker_heartbeat::BrokerHeartbeatResponse;
    use samsa::protocol::broker_registration::BrokerRegistrationResponse;
    use samsa::protocol::create_topics::{
        CreatableTopic, CreateTopicsRequest, CreateTopicsResponse,
    };
    use samsa::protocol::wire::Uuid;
    use samsa::raft::core::RaftConfig;
    use samsa::raft::driver::{self, NodeConfig, RaftNode};
    use samsa::rt::clock::Clock;
    use samsa::rt::disk::Disk;
    use samsa::rt::net::TcpListener;
    use samsa::rt::{task, time};

    const CLIENTS: [usize; 3] = [1, 8, 64];
    const CLUSTER: &str = "bench";
    const BROKER: i32 = 100;
    /// Heartbeats, 20 ms apart, to wait for the bench's broker to be unfenced.
    const UNFENCE_ATTEMPTS_MAX: usize = 500;

    struct Voter {
        raft: RaftNode,
        controller: ControllerNode,
        addr: String,
    }

    async fn start_quorum(root: &Path, size: i32) -> BTreeMap<i32, Voter> {
        let mut listeners = BTreeMap::new();
        let mut voters = BTreeMap::new();
        for id in 1..=size {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            voters.insert(id, listener.local_addr().expect("addr").to_string());
            listeners.insert(id, listener);
        }
        let mut nodes = BTreeMap::new();
        for (id, listener) in listeners {
            let config = NodeConfig {
                node_id: id,
                voters: voters.clone(),
                metadata_log_dir: "metadata".into(),
                segment_bytes: 1 << 30,
                raft: RaftConfig::DEFAULT,
                cluster_id: Some(CLUSTER.into()),
                bugs: Default::default(),
                snapshots: Default::default(),
            };
            let disk = Disk::real(root.join(format!("voter-{id}"))).expect("bench directory");
            let (apis, forwarded) = controller_driver::listener_apis();
            let raft = driver::start_with(config, disk, Clock::new(), listener, None, Some(apis))
                .await
                .expect("a replica");
            let controller = controller_driver::start(
                raft.handle.clone(),
                ControllerConfig::new(id, CLUSTER, id as u64),
                Arc::new(BrokerConfigPolicy {
                    broker: Arc::new(BrokerConfig::default()),
                }),
                Some(forwarded),
            );
            nodes.insert(
                id,
                Voter {
                    raft,
                    controller,
                    addr: voters[&id].clone(),
                },
            );
        }
        nodes
    }

    async fn active(nodes: &BTreeMap<i32, Voter>) -> String {
        loop {
            if let Some(v) = nodes
                .values()
                .find(|v| v.controller.handle.published().active_epoch.is_some())
            {
                return v.addr.clone();
            }
            time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn connect(addr: &str) -> Connection {
        Connection::connect(addr, "bench", ConnectionLimits::default())
            .await
            .expect("connects")
    }

    /// Registers the broker and keeps it unfenced until the returned task is aborted.
    async fn keep_broker(addr: String) -> task::JoinHandle<()> {
        let mut conn = connect(&addr).await;
        let registration = registration(BROKER, CLUSTER, Uuid([1; 16]), "127.0.0.1");
        let registered: BrokerRegistrationResponse =
            conn.send(62, 0, &registration).await.expect("registers");
        assert_eq!(registered.error_code, 0, "registration refused");
        let epoch = registered.broker_epoch;
        // A registered broker is fenced until a caught-up heartbeat unfences it, and
        // placement counts only unfenced brokers: wait for that before any CreateTopics.
        let mut unfenced = false;
        for _ in 0..UNFENCE_ATTEMPTS_MAX {
            let answer: BrokerHeartbeatResponse = conn
                .send(63, 0, &caught_up_heartbeat(BROKER, epoch))
                .await
                .expect("a heartbeat answer");
            assert_eq!(answer.error_code, 0, "heartbeat refused: {answer:?}");
            if !answer.is_fenced {
                unfenced = true;
                break;
            }
            time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            unfenced,
            "the broker stayed fenced after {UNFENCE_ATTEMPTS_MAX} heartbeats"
        );
        task::spawn(async move {
            loop {
                let heartbeat = caught_up_heartbeat(BROKER, epoch);
                let answer: Result<BrokerHeartbeatResponse, _> = conn.send(63, 0, &heartbeat).await;
                if let Err(e) = answer {
                    panic!("a heartbeat failed: {e}");
                }
                time::sleep(Duration::from_millis(500)).await;
            }
        })
    }

    async fn create_loop(
        addr: String,
        until: time::Instant,
        names: Arc<AtomicU64>,
        prefix: String,
    ) -> Vec<u64> {
        let mut conn = connect(&addr).await;
        let version = conn.version_for(19).expect("CreateTopics");
        let mut latencies = Vec::new();
        while time::now() < until {
            let n = names.fetch_add(1, Ordering::Relaxed);
            let request = CreateTopicsRequest {
                topics: vec![CreatableTopic {
                    name: format!("{prefix}-{n}"),
                    num_partitions: 1,
                    replication_factor: 1,
                    ..Default::default()
                }],
                timeout_ms: 30_000,
                validate_only: false,
            };
            let began = time::now();
            let answer: CreateTopicsResponse =
                conn.send(19, version, &request).await.expect("answers");
            assert_eq!(answer.topics[0].error_code, 0, "{answer:?}");
            latencies.push(began.elapsed().as_micros() as u64);
        }
        latencies
    }

    pub fn main() {
        let seconds = bench_seconds();
        let parent = bench_dir();
        println!("bench directory: {}", parent.display());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        for size in [1, 3] {
            println!(
                "{size} voter(s) on loopback TCP, sync before acknowledging; CreateTopics of one 1-partition topic per request; a fresh quorum per run; {seconds} s per run"
            );
            for clients in CLIENTS {
                let root = parent.join(format!(
                    "controller-{}-{size}-{clients}",
                    std::process::id()
                ));
                rt.block_on(run(&root, size, clients, seconds));
                remove(&root);
            }
        }
        println!(
            "a broker node (quorum of one) on loopback TCP; CreateTopics of one 1-partition topic per request to its client listener; {seconds} s per run"
        );
        for clients in CLIENTS {
            let root = parent.join(format!("controller-node-{}-{clients}", std::process::id()));
            rt.block_on(run_node(&root, clients, seconds));
            remove(&root);
        }
    }

    /// `clients` create loops against `addr` for `seconds`; prints creations per second and
    /// the latency's median and 99th percentile under `label`.
    async fn measure(label: &str, addr: &str, clients: usize, seconds: u64) {
        let names = Arc::new(AtomicU64::new(0));
        let until = time::now() + Duration::from_secs(seconds);
        let began = time::now();
        let runs: Vec<_> = (0..clients)
            .map(|c| {
                task::spawn(create_loop(
                    addr.to_string(),
                    until,
                    names.clone(),
                    format!("t{c}"),
                ))
            })
            .collect();
        let mut latencies = Vec::new();
        for run in runs {
            latencies.extend(run.await.expect("a client"));
        }
        let elapsed = began.elapsed().as_secs_f64();
        latencies.sort_unstable();
        println!(
            "topic_creations {label} clients={clients:>2}: {:>7.0} topics/s, latency p50 {:>6} us, p99 {:>6} us ({} topics)",
            latencies.len() as f64 / elapsed,
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            latencies.len()
        );
    }

    /// CreateTopics through a broker node's client listener.
    async fn run_node(root: &Path, clients: usize, seconds: u64) {
        let pairs = vec![
            (
                "listeners".to_string(),
                "PLAINTEXT://127.0.0.1:0".to_string(),
            ),
            ("log.dirs".to_string(), root.display().to_string()),
        ];
        let mut config = BrokerConfig::load(None, &pairs).expect("a bench config");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        for endpoint in config.advertised_listeners.iter_mut() {
            endpoint.port = addr.port();
        }
        let controller_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let disk = Disk::real(root).expect("bench directory");
        let node = Node::start(
            config,
            disk.clone(),
            disk,
            Clock::new(),
            controller_listener,
        )
        .await
        .expect("a node");
        let serving = Serving::start(&node.broker, listener);
        measure("broker-node", &addr.to_string(), clients, seconds).await;
        serving.stop().await;
        node.shutdown().await.expect("a clean stop");
    }

    async fn run(root: &Path, size: i32, clients: usize, seconds: u64) {
        let nodes = start_quorum(root, size).await;
        let addr = active(&nodes).await;
        let keeper = keep_broker(addr.clone()).await;
        measure(&format!("voters={size}"), &addr, clients, seconds).await;
        keeper.abort();
        for node in nodes.into_values() {
            node.controller.handle.shutdown().await;
            let _ = node.controller.task.await;
            node.raft.handle.shutdown().await;
            let _ = node.raft.task.await;
        }
    }
}
