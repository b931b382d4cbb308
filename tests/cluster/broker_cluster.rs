//! Three combined nodes (`process.roles=broker,controller`, three voters) in one process, on
//! real TCP and real files: every broker registers with the one active controller; a topic
//! created through a broker whose controller is a standby is spread over the three brokers;
//! each partition is served by its leader only (the others answer NOT_LEADER_OR_FOLLOWER);
//! admin changes sent to any broker reach the controller and are applied everywhere;
//! FindCoordinator names the leader of the group's `__consumer_offsets` partition; a Produce
//! or Fetch sent to a broker that does not lead the partition carries KIP-951's hint (the
//! leader, its epoch, its endpoint); `samsa metadata-quorum --bootstrap-server` works through
//! every broker; a coordinator whose broker stops leading the group's `__consumer_offsets`
//! partition (fenced) answers NOT_COORDINATOR at once, and serves again once it leads again.
//!
//! Real sockets and files exist only without the `sim` feature.
#![cfg(not(feature = "sim"))]

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use samsa::broker::config::BrokerConfig;
use samsa::broker::node::Node;
use samsa::broker::server::Serving;
use samsa::client::admin::{AlterConfigOp, ConfigResource};
use samsa::client::connection::{Connection, ConnectionLimits};
use samsa::client::{build_batch, Client, ClientConfig, FetchOptions, ProducerRecord};
use samsa::protocol::fetch::{FetchPartition, FetchRequest, FetchResponse, FetchTopic};
use samsa::protocol::produce::{
    PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
};
use samsa::protocol::record_batch::Compression;
use samsa::protocol::types::Offset;
use samsa::rt::clock::Clock;
use samsa::rt::disk::Disk;
use samsa::rt::net::TcpListener;

const NODES: i32 = 3;
const PARTITIONS: i32 = 6;
const RECORDS_PER_PARTITION: usize = 5;

pub struct ClusterNode {
    pub id: i32,
    pub address: String,
    pub node: Node,
    pub serving: Serving,
    /// What the node was started with, to start it again on the same directory.
    pub config: BrokerConfig,
}

/// Starts a node of [`start_cluster`] again on its directory, with its config and addresses.
pub async fn restart_node(
    id: i32,
    dir: &tempfile::TempDir,
    config: BrokerConfig,
    address: &str,
    controller_address: &str,
) -> ClusterNode {
    let controller = TcpListener::bind(controller_address).await.unwrap();
    let client = TcpListener::bind(address).await.unwrap();
    let disk = Disk::real(dir.path()).unwrap();
    let node = Node::start(config.clone(), disk.clone(), disk, Clock::new(), controller)
        .await
        .expect("the node starts again");
    let serving = Serving::start(&node.broker, client);
    ClusterNode {
        id,
        address: address.to_string(),
        node,
        serving,
        config,
    }
}

/// Starts `NODES` combined nodes in `dirs`, each with its own listeners, as one quorum.
pub async fn start_cluster(dirs: &[tempfile::TempDir]) -> Vec<ClusterNode> {
    let mut clients = Vec::new();
    let mut controllers = Vec::new();
    for _ in 0..NODES {
        clients.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
        controllers.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
    }
    let voters: Vec<String> = controllers
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{}@{}", i + 1, l.local_addr().unwrap()))
        .collect();
    let voters = voters.join(",");
    // The directories are formatted with one cluster id, as `samsa storage format` does.
    let cluster_id = samsa::broker::meta::random_uuid();
    for (i, dir) in dirs.iter().enumerate() {
        let mut meta = samsa::broker::meta::MetaProperties::generate(i as i32 + 1);
        meta.cluster_id = cluster_id.clone();
        Disk::real(dir.path())
            .unwrap()
            .write_file_atomic("meta.properties", meta.encode().as_bytes())
            .await
            .unwrap();
    }
    let mut starts = Vec::new();
    for (i, (client, controller)) in clients.into_iter().zip(controllers).enumerate() {
        let id = i as i32 + 1;
        let address = client.local_addr().unwrap().to_string();
        let pairs: Vec<(String, String)> = [
            ("node.id", id.to_string()),
            ("listeners", format!("PLAINTEXT://{address}")),
            ("controller.quorum.voters", voters.clone()),
            ("offsets.topic.replication.factor", "1".to_string()),
            ("offsets.topic.num.partitions", "6".to_string()),
            ("broker.session.timeout.ms", "3000".to_string()),
            ("broker.heartbeat.interval.ms", "300".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let config = BrokerConfig::load(None, &pairs).expect("a valid config");
        let disk = Disk::real(dirs[i].path()).unwrap();
        starts.push(async move {
            let node = Node::start(config.clone(), disk.clone(), disk, Clock::new(), controller)
                .await
                .expect("the node starts");
            let serving = Serving::start(&node.broker, client);
            ClusterNode {
                id,
                address,
                node,
                serving,
                config,
            }
        });
    }
    let mut starts = starts.into_iter();
    let (a, b, c) = (starts.next(), starts.next(), starts.next());
    let (a, b, c) = tokio::join!(a.expect("node 1"), b.expect("node 2"), c.expect("node 3"));
    vec![a, b, c]
}

pub async fn stop_cluster(nodes: Vec<ClusterNode>) {
    for n in nodes {
        n.serving.stop().await;
        n.node.shutdown().await.expect("a clean close");
    }
}

pub fn client(address: &str) -> Client {
    Client::new(ClientConfig {
        bootstrap: vec![address.to_string()],
        client_id: "broker-cluster-test".into(),
        ..ClientConfig::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_combined_nodes_spread_serve_and_forward() {
    let dirs: Vec<tempfile::TempDir> = (0..NODES).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes = start_cluster(&dirs).await;
    let active: Vec<i32> = nodes
        .iter()
        .filter(|n| n.node.controller.published().active_epoch.is_some())
        .map(|n| n.id)
        .collect();
    assert_eq!(active.len(), 1, "one active controller: {active:?}");
    // A broker whose controller is a standby forwards the creation.
    let standby = nodes.iter().find(|n| n.id != active[0]).expect("a standby");
    let mut admin = client(&standby.address);
    let created = admin
        .create_topics(&[("spread", PARTITIONS, 1, &[])])
        .await
        .expect("create topics");
    assert!(created.iter().all(|(_, r)| r.is_ok()), "{created:?}");

    // Every broker names the three brokers and the same leaders, spread over all three.
    let mut leaders_seen: Option<BTreeMap<i32, i32>> = None;
    for n in &nodes {
        let mut c = client(&n.address);
        c.refresh(&["spread"]).await.expect("metadata");
        assert_eq!(
            c.brokers().keys().copied().collect::<Vec<_>>(),
            vec![1, 2, 3],
            "node {} names every broker",
            n.id
        );
        let mut leaders = BTreeMap::new();
        for p in 0..PARTITIONS {
            leaders.insert(p, c.leader("spread", p).await.expect("a leader"));
        }
        if let Some(seen) = &leaders_seen {
            assert_eq!(seen, &leaders, "node {} agrees on the leaders", n.id);
        }
        leaders_seen = Some(leaders);
    }
    let leaders = leaders_seen.expect("leaders");
    let leading: BTreeSet<i32> = leaders.values().copied().collect();
    assert_eq!(leading, BTreeSet::from([1, 2, 3]), "spread: {leaders:?}");

    // Produce and read back every partition through a client routed by the metadata.
    let mut producer = client(&nodes[0].address);
    for p in 0..PARTITIONS {
        for i in 0..RECORDS_PER_PARTITION {
            let record = ProducerRecord {
                key: None,
                value: Some(Bytes::from(format!("{p}-{i}"))),
                headers: Vec::new(),
                timestamp: 1_000,
            };
            let batch = build_batch(&[record], Compression::None).expect("a batch");
            let ack = producer
                .produce("spread", p, batch, -1, 5_000)
                .await
                .expect("produce");
            assert_eq!(ack.base_offset, i as i64);
        }
    }
    for p in 0..PARTITIONS {
        let fetched = producer
            .fetch("spread", p, 0, FetchOptions::default())
            .await
            .expect("fetch");
        let values: Vec<String> = producer
            .records("spread", p, &fetched, 0)
            .map(|r| {
                let r = r.expect("a record");
                String::from_utf8(r.value.expect("a value").to_vec()).unwrap()
            })
            .collect();
        let expected: Vec<String> = (0..RECORDS_PER_PARTITION)
            .map(|i| format!("{p}-{i}"))
            .collect();
        assert_eq!(values, expected, "partition {p}");
        // Only its leader serves it: on the others the partition has no data and refuses.
        for n in nodes.iter().filter(|n| n.id != leaders[&p]) {
            let partition = n
                .node
                .broker
                .topics
                .get_partition("spread", p)
                .await
                .expect("the partition's directory exists on every node");
            assert!(!partition.is_leading(), "node {} does not lead {p}", n.id);
            assert_eq!(partition.log_end_offset(), 0);
        }
    }

    // KIP-951: a broker that does not lead a partition answers NOT_LEADER_OR_FOLLOWER with
    // the leader, its epoch and its endpoint, in Produce (v12) and Fetch (v16).
    let topic_id = nodes[0]
        .node
        .broker
        .topics
        .get("spread")
        .await
        .expect("the topic")
        .id;
    for p in 0..PARTITIONS {
        let leader = leaders[&p];
        let other = nodes.iter().find(|n| n.id != leader).expect("another node");
        let leader_port: i32 = nodes
            .iter()
            .find(|n| n.id == leader)
            .and_then(|n| n.address.rsplit(':').next()?.parse().ok())
            .expect("the leader's port");
        let mut conn = Connection::connect(&other.address, "kip-951", ConnectionLimits::default())
            .await
            .expect("connect");
        let record = ProducerRecord {
            key: None,
            value: Some(Bytes::from_static(b"misrouted")),
            headers: Vec::new(),
            timestamp: 1_000,
        };
        let produce = ProduceRequest {
            transactional_id: None,
            acks: -1,
            timeout_ms: 5_000,
            topic_data: vec![TopicProduceData {
                name: "spread".into(),
                partition_data: vec![PartitionProduceData {
                    index: p,
                    records: Some(build_batch(&[record], Compression::None).expect("a batch")),
                }],
                ..Default::default()
            }],
        };
        let answer: ProduceResponse = conn.send(0, 12, &produce).await.expect("produce v12");
        let partition = &answer.responses[0].partition_responses[0];
        assert_eq!(
            partition.error_code, 6,
            "NOT_LEADER_OR_FOLLOWER from node {}",
            other.id
        );
        assert_eq!(
            partition.current_leader.leader_id.0, leader,
            "partition {p}"
        );
        let endpoint = answer.node_endpoints.iter().find(|e| e.node_id.0 == leader);
        assert_eq!(endpoint.map(|e| e.port), Some(leader_port), "{answer:?}");

        let fetch = FetchRequest {
            max_wait_ms: 0,
            min_bytes: 1,
            topics: vec![FetchTopic {
                topic_id,
                partitions: vec![FetchPartition {
                    partition: p,
                    fetch_offset: Offset(0),
                    partition_max_bytes: 1 << 20,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let answer: FetchResponse = conn.send(1, 16, &fetch).await.expect("fetch v16");
        let partition = &answer.responses[0].partitions[0];
        assert_eq!(
            partition.error_code, 6,
            "NOT_LEADER_OR_FOLLOWER from node {}",
            other.id
        );
        assert_eq!(
            partition.current_leader.leader_id.0, leader,
            "partition {p}"
        );
        let endpoint = answer.node_endpoints.iter().find(|e| e.node_id.0 == leader);
        assert_eq!(endpoint.map(|e| e.port), Some(leader_port), "{answer:?}");
    }

    // `samsa metadata-quorum --bootstrap-server`: every broker forwards DescribeQuorum to
    // the active controller and answers what it knows: the same leader, the three voters.
    for n in &nodes {
        let args: Vec<String> = ["--bootstrap-server", &n.address, "describe", "--status"]
            .iter()
            .map(|a| a.to_string())
            .collect();
        let parsed = samsa::cli::metadata_quorum::parse_args(&args).expect("arguments");
        let text = samsa::cli::metadata_quorum::execute(&parsed)
            .await
            .expect("describe --status through a broker");
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .map(|v| v.trim().to_string())
                .unwrap_or_else(|| panic!("no {name} in {text}"))
        };
        assert_eq!(
            field("LeaderId"),
            active[0].to_string(),
            "through node {}",
            n.id
        );
        assert_eq!(field("ClusterId"), n.node.broker.cluster_id, "{text}");
        let voters = field("CurrentVoters");
        for id in 1..=NODES {
            assert!(voters.contains(&format!("\"id\": {id}")), "{voters}");
        }
        assert!(field("HighWatermark").parse::<i64>().expect("a number") > 0);
    }

    // Config changes and deletion through another standby reach every node.
    let other = nodes
        .iter()
        .rev()
        .find(|n| n.id != active[0])
        .expect("a standby");
    let mut admin = client(&other.address);
    let altered = admin
        .incremental_alter_configs(
            &[(
                ConfigResource::Topic("spread".into()),
                vec![AlterConfigOp::Set {
                    name: "retention.ms".into(),
                    value: "123456".into(),
                }],
            )],
            false,
        )
        .await
        .expect("alter configs");
    assert!(altered.iter().all(|(_, r)| r.is_ok()), "{altered:?}");
    for n in &nodes {
        let topic = n.node.broker.topics.get("spread").await.expect("the topic");
        assert_eq!(
            topic.overrides.get("retention.ms").map(String::as_str),
            Some("123456"),
            "node {}",
            n.id
        );
    }

    // The coordinator of a group is its offsets partition's leader.
    let mut c = client(&nodes[2].address);
    let coordinator = c.find_coordinator("a-group").await.expect("a coordinator");
    let index = samsa::coordinator::records::partition_for("a-group", 6);
    // The node asked applied the creation of `__consumer_offsets` before it answered.
    let offsets_leader = nodes[2]
        .node
        .broker
        .image()
        .and_then(|i| i.partition("__consumer_offsets", index).map(|p| p.leader))
        .expect("__consumer_offsets is in the image");
    assert_eq!(coordinator.node_id, offsets_leader);

    let deleted = admin.delete_topics(&["spread"]).await.expect("delete");
    assert!(deleted.iter().all(|(_, r)| r.is_ok()), "{deleted:?}");
    for n in &nodes {
        // The forwarding broker applied it before answering; the others soon after.
        for _ in 0..100 {
            if n.node.broker.topics.get("spread").await.is_none() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(
            n.node.broker.topics.get("spread").await.is_none(),
            "node {}",
            n.id
        );
    }
    stop_cluster(nodes).await;
}

/// DescribeGroups of `group` sent to `address`: the group's error code.
async fn describe_group_code(address: &str, group: &str) -> i16 {
    use samsa::protocol::describe_groups::{DescribeGroupsRequest, DescribeGroupsResponse};
    let mut conn = Connection::connect(address, "broker-cluster-test", ConnectionLimits::default())
        .await
        .expect("connects");
    let request = DescribeGroupsRequest {
        groups: vec![group.to_string()],
        include_authorized_operations: false,
    };
    let response: DescribeGroupsResponse = conn.send(15, 0, &request).await.expect("answers");
    response.groups.first().expect("one group").error_code
}

/// A coordinator whose broker stops leading the group's `__consumer_offsets` partition (here:
/// fenced, its heartbeats cut off) unloads the group at once: a request there gets
/// NOT_COORDINATOR rather than an answer from groups it no longer owns. Unfenced again, it
/// leads and loads the partition again and serves the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_that_stops_leading_answers_not_coordinator() {
    const NOT_COORDINATOR: i16 = 16;
    const POLLS_MAX: usize = 200;
    let poll = || tokio::time::sleep(std::time::Duration::from_millis(50));
    let dirs: Vec<tempfile::TempDir> = (0..NODES).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes = start_cluster(&dirs).await;
    let group = "resigning-group";
    let mut coordinator = None;
    for _ in 0..POLLS_MAX {
        if let Ok(found) = client(&nodes[0].address).find_coordinator(group).await {
            coordinator = Some(found);
            break;
        }
        poll().await;
    }
    let coordinator = coordinator.expect("a coordinator");
    let owner = nodes
        .iter()
        .find(|n| n.id == coordinator.node_id)
        .expect("the coordinator is a node");
    // DescribeGroups until `done(code)` or POLLS_MAX polls; the last code.
    let describe_until = |done: fn(i16) -> bool| async move {
        let mut code = -1;
        for _ in 0..POLLS_MAX {
            code = describe_group_code(&owner.address, group).await;
            if done(code) {
                break;
            }
            poll().await;
        }
        code
    };
    // Served while it leads (the group is unknown: Dead, no error).
    let code = describe_until(|c| c == 0).await;
    assert_eq!(code, 0, "the coordinator serves the group");

    owner.node.lifecycle.set_muted(true);
    let code = describe_until(|c| c != 0).await;
    assert_eq!(
        code, NOT_COORDINATOR,
        "a fenced coordinator answers NOT_COORDINATOR"
    );

    owner.node.lifecycle.set_muted(false);
    let code = describe_until(|c| c == 0).await;
    assert_eq!(code, 0, "unfenced, it serves the group again");
    stop_cluster(nodes).await;
}
