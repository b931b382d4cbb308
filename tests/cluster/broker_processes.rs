//! Three `samsa broker` processes on loopback, each a combined node (broker and one voter of
//! the metadata quorum) with its own ports and directory, formatted with one cluster id, as
//! the README's three-node cluster runs them:
//! - a topic of six partitions created through librdkafka's admin client is spread over the
//!   three brokers; librdkafka produces to it with acks=all and reads every record back in
//!   order per partition, from each partition's leader; then tests/interop/cluster_clients.py
//!   runs kafka-python (produce, read back in order) and a group of three confluent-kafka
//!   members (two partitions each, every record read once, commits at the end) on it;
//! - the active controller's process killed with SIGKILL, a new one is elected and topic
//!   creation works again through the surviving brokers (the time until a new topic accepts a
//!   produce on every partition is printed: the closing-note figure);
//! - a broker killed with SIGKILL: once its session expired its partitions are reported
//!   LEADER_NOT_AVAILABLE and the others keep serving; restarted, everything is served again
//!   and every acknowledged record is still there.
#![cfg(not(feature = "sim"))]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use samsa::client::connection::{Connection, ConnectionLimits};
use samsa::client::{build_batch, Client, ClientConfig, ProducerRecord};
use samsa::protocol::describe_quorum::{
    DescribeQuorumRequest, DescribeQuorumRequestPartition, DescribeQuorumRequestTopic,
    DescribeQuorumResponse,
};
use samsa::protocol::record_batch::Compression;

use crate::controller_process::{free_port, sigterm};
use crate::interop_scripts::{interop_dir, python_or_skip};
use crate::metadata_quorum_cli::{replication_rows, status_fields};
use crate::rdkafka_support as rk;

const NODES: i32 = 3;
const PARTITIONS: i32 = 6;
const RECORDS: usize = 600;
/// Polls while waiting for the cluster, one per `POLL_MS` (60 s in all).
const POLLS_MAX: u32 = 600;
const POLL_MS: u64 = 100;
/// Polls of cluster_clients.py before it is killed (300 s in all; it takes seconds).
const SCRIPT_POLLS_MAX: u32 = 3_000;
/// A request's bound while nodes come and go.
const REQUEST_TIMEOUT_MS: u64 = 2_000;

struct Ports {
    client: u16,
    controller: u16,
}

fn samsa() -> Command {
    Command::new(env!("CARGO_BIN_EXE_samsa"))
}

fn data_dir(dir: &Path, id: i32) -> String {
    dir.join(format!("node-{id}")).display().to_string()
}

// The child's stderr goes to a file of the test's own directory, outside the system under
// test.
#[allow(clippy::disallowed_methods)]
fn spawn(dir: &Path, id: i32, voters: &str, ports: &Ports) -> Child {
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("broker-{id}.log")))
        .expect("a log file");
    samsa()
        .args([
            "broker",
            "--override",
            &format!("node.id={id}"),
            "--override",
            &format!("controller.quorum.voters={voters}"),
            "--override",
            &format!(
                "listeners=PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}",
                ports.client, ports.controller
            ),
            "--override",
            &format!("log.dirs={}", data_dir(dir, id)),
            "--override",
            "offsets.topic.replication.factor=1",
        ])
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start samsa broker")
}

/// `samsa metadata-quorum --bootstrap-server <bootstrap> describe <view>`'s output.
fn metadata_quorum(bootstrap: &str, view: &str) -> String {
    let out = samsa()
        .args([
            "metadata-quorum",
            "--bootstrap-server",
            bootstrap,
            "describe",
            view,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run samsa metadata-quorum");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "samsa metadata-quorum describe {view} exited with {}: {text}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// `samsa metadata-quorum describe --status` and `--replication` through the brokers'
/// client listeners, every field checked against DescribeQuorum asked before and after (the
/// high watermark may move between them) and against the cluster's id and voters.
async fn check_metadata_quorum_cli(ports: &BTreeMap<i32, Ports>, all: &[i32], cluster_id: &str) {
    let before = quorum_state(ports, all).await.expect("a quorum leader");
    // Through one broker that does not lead the quorum (it forwards), and through all three.
    let follower = *all
        .iter()
        .find(|id| **id != before.leader_id)
        .expect("a follower");
    let status = metadata_quorum(&bootstrap_of(ports, &[follower]), "--status");
    let replication = metadata_quorum(&bootstrap_of(ports, all), "--replication");
    let after = quorum_state(ports, all).await.expect("a quorum leader");
    assert_eq!(before.leader_id, after.leader_id, "the leader changed");
    assert_eq!(before.leader_epoch, after.leader_epoch, "the epoch changed");
    let hw_range = before.high_watermark..=after.high_watermark;

    let fields = status_fields(&status);
    let field = |name: &str| fields.iter().find(|(n, _)| *n == name).expect(name).1;
    let number = |name: &str| -> i64 {
        field(name)
            .parse()
            .unwrap_or_else(|_| panic!("{name} is not a number: {status}"))
    };
    assert_eq!(field("ClusterId"), cluster_id, "{status}");
    assert_eq!(number("LeaderId"), i64::from(before.leader_id), "{status}");
    assert_eq!(
        number("LeaderEpoch"),
        i64::from(before.leader_epoch),
        "{status}"
    );
    assert!(
        hw_range.contains(&number("HighWatermark")),
        "{hw_range:?}: {status}"
    );
    let max_lag = number("MaxFollowerLag");
    assert!((0..=after.high_watermark).contains(&max_lag), "{status}");
    assert!(number("MaxFollowerLagTimeMs") >= 0, "{status}");
    let voters = all
        .iter()
        .map(|id| format!(r#"{{"id": {id}}}"#))
        .collect::<Vec<_>>()
        .join(", ");
    assert_eq!(field("CurrentVoters"), format!("[{voters}]"), "{status}");
    assert_eq!(field("CurrentObservers"), "[]", "{status}");

    let rows = replication_rows(&replication);
    assert_eq!(rows.len(), 1 + all.len(), "{replication}");
    let now_ms = rk::now_ms();
    let mut ids = BTreeSet::new();
    for row in &rows[1..] {
        assert_eq!(row.len(), 7, "{replication}");
        let id: i32 = row[0].parse().expect("a node id");
        ids.insert(id);
        let role = if id == before.leader_id {
            "Leader"
        } else {
            "Follower"
        };
        assert_eq!(row[6], role, "node {id}: {replication}");
        assert!(!row[1].is_empty(), "a directory id: {replication}");
        let end: i64 = row[2].parse().expect("LogEndOffset");
        let lag: i64 = row[3].parse().expect("Lag");
        assert!(end <= after.high_watermark + 1 && end >= 0, "{replication}");
        assert!(lag >= 0 && lag <= after.high_watermark, "{replication}");
        for (column, at) in [
            ("LastFetchTimestamp", row[4]),
            ("LastCaughtUpTimestamp", row[5]),
        ] {
            let at: i64 = at
                .parse()
                .unwrap_or_else(|_| panic!("{column}: {replication}"));
            assert!(
                (now_ms - 60_000..=now_ms).contains(&at),
                "{column} {at} is not within the last minute of {now_ms}: {replication}"
            );
        }
    }
    assert_eq!(ids, all.iter().copied().collect(), "{replication}");
    assert_eq!(
        rows[1][0],
        before.leader_id.to_string(),
        "the leader's row first: {replication}"
    );
}

/// Runs tests/interop/cluster_clients.py (kafka-python; a group of three confluent-kafka
/// members) against the cluster and panics with its output unless it passed.
#[allow(clippy::disallowed_methods)] // the script's output file in the test's own directory
async fn run_cluster_clients(python: &Path, dir: &Path, bootstrap: &str, brokers: &[i32]) {
    let out_path = dir.join("cluster_clients.out");
    let out = std::fs::File::create(&out_path).expect("the script's output file");
    let err = out.try_clone().expect("clone the output file");
    let ids = brokers
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut child = Command::new(python)
        .arg("cluster_clients.py")
        .current_dir(interop_dir())
        // `cargo test` puts the rdkafka crate's bundled librdkafka on LD_LIBRARY_PATH; the
        // clients must use their own.
        .env_remove("LD_LIBRARY_PATH")
        .env("SAMSA_BOOTSTRAP", bootstrap)
        .env("SAMSA_CLUSTER_BROKERS", ids)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .expect("start cluster_clients.py");
    let output = || std::fs::read_to_string(&out_path).unwrap_or_default();
    for _ in 0..SCRIPT_POLLS_MAX {
        if let Ok(Some(status)) = child.try_wait() {
            println!("----- cluster_clients.py ({status}):\n{}", output());
            assert!(
                status.success(),
                "cluster_clients.py exited with {status}; its output:\n{}",
                output()
            );
            return;
        }
        sleep_poll().await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!(
        "cluster_clients.py still running after {} ms; killed. Its output:\n{}",
        u64::from(SCRIPT_POLLS_MAX) * POLL_MS,
        output()
    );
}

fn client(bootstrap: &str) -> Client {
    Client::new(ClientConfig {
        bootstrap: bootstrap.split(',').map(str::to_string).collect(),
        client_id: "broker-processes-test".into(),
        request_timeout_ms: REQUEST_TIMEOUT_MS,
        connect_timeout_ms: REQUEST_TIMEOUT_MS,
        retries_max: 0,
        ..ClientConfig::default()
    })
}

fn bootstrap_of(ports: &BTreeMap<i32, Ports>, ids: &[i32]) -> String {
    ids.iter()
        .map(|id| format!("127.0.0.1:{}", ports[id].client))
        .collect::<Vec<_>>()
        .join(",")
}

/// The quorum's leader, asked of a broker's client listener (which forwards DescribeQuorum).
async fn active_controller(ports: &BTreeMap<i32, Ports>, ids: &[i32]) -> Option<i32> {
    quorum_state(ports, ids).await.map(|q| q.leader_id)
}

/// What DescribeQuorum says of the metadata quorum.
struct QuorumState {
    leader_id: i32,
    leader_epoch: i32,
    high_watermark: i64,
}

/// The quorum's leader, epoch and high watermark, asked of the first of `ids` whose client
/// listener answers (brokers forward DescribeQuorum to the quorum's leader).
async fn quorum_state(ports: &BTreeMap<i32, Ports>, ids: &[i32]) -> Option<QuorumState> {
    for id in ids {
        let limits = ConnectionLimits {
            request_timeout_ms: REQUEST_TIMEOUT_MS,
            connect_timeout_ms: REQUEST_TIMEOUT_MS,
            ..ConnectionLimits::default()
        };
        let address = format!("127.0.0.1:{}", ports[id].client);
        let Ok(mut conn) = Connection::connect(&address, "test", limits).await else {
            continue;
        };
        let request = DescribeQuorumRequest {
            topics: vec![DescribeQuorumRequestTopic {
                topic_name: "__cluster_metadata".into(),
                partitions: vec![DescribeQuorumRequestPartition { partition_index: 0 }],
            }],
        };
        let Ok(response) = conn
            .send::<_, DescribeQuorumResponse>(55, 1, &request)
            .await
        else {
            continue;
        };
        let state = response
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .filter(|p| p.error_code == 0 && p.leader_id.0 >= 0)
            .map(|p| QuorumState {
                leader_id: p.leader_id.0,
                leader_epoch: p.leader_epoch.0,
                high_watermark: p.high_watermark.0,
            });
        if state.is_some() {
            return state;
        }
    }
    None
}

/// Each partition's leader as `bootstrap`'s brokers report it (None: LEADER_NOT_AVAILABLE
/// or not known).
async fn leaders(bootstrap: &str, topic: &str, partitions: i32) -> BTreeMap<i32, Option<i32>> {
    let mut c = client(bootstrap);
    let _ = c.refresh(&[topic]).await;
    let mut out = BTreeMap::new();
    for p in 0..partitions {
        out.insert(p, c.leader(topic, p).await.ok());
    }
    out
}

/// One record to each partition of `topic` through `bootstrap`; whether all were acked.
async fn produce_everywhere(bootstrap: &str, topic: &str, partitions: i32) -> bool {
    let mut c = client(bootstrap);
    for p in 0..partitions {
        let record = ProducerRecord {
            key: None,
            value: Some(Bytes::from(format!("{topic}-{p}"))),
            headers: Vec::new(),
            timestamp: rk::now_ms(),
        };
        let Ok(batch) = build_batch(&[record], Compression::None) else {
            return false;
        };
        if c.produce(topic, p, batch, -1, REQUEST_TIMEOUT_MS as i32)
            .await
            .is_err()
        {
            return false;
        }
    }
    true
}

async fn sleep_poll() {
    tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_broker_processes_spread_serve_and_fail_over() {
    let dir = tempfile::tempdir().expect("a directory");
    let cluster_id = {
        let out = samsa()
            .args(["storage", "random-uuid"])
            .output()
            .expect("random-uuid");
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_string()
    };
    let ports: BTreeMap<i32, Ports> = (1..=NODES)
        .map(|id| {
            (
                id,
                Ports {
                    client: free_port(),
                    controller: free_port(),
                },
            )
        })
        .collect();
    let voters = ports
        .iter()
        .map(|(id, p)| format!("{id}@127.0.0.1:{}", p.controller))
        .collect::<Vec<_>>()
        .join(",");
    for id in 1..=NODES {
        let status = samsa()
            .args([
                "storage",
                "format",
                "--cluster-id",
                &cluster_id,
                "--override",
                &format!("node.id={id}"),
                "--override",
                &format!("log.dirs={}", data_dir(dir.path(), id)),
            ])
            .stdout(Stdio::null())
            .status()
            .expect("format");
        assert!(status.success(), "samsa storage format for node {id}");
    }
    let mut children: BTreeMap<i32, Child> = (1..=NODES)
        .map(|id| (id, spawn(dir.path(), id, &voters, &ports[&id])))
        .collect();
    let all: Vec<i32> = (1..=NODES).collect();
    let bootstrap = bootstrap_of(&ports, &all);

    // Every broker registered and named by Metadata.
    let mut named = BTreeSet::new();
    for _ in 0..POLLS_MAX {
        let mut c = client(&bootstrap);
        if c.refresh(&[]).await.is_ok() {
            named = c.brokers().keys().copied().collect();
            if named.len() == NODES as usize {
                break;
            }
        }
        sleep_poll().await;
    }
    assert_eq!(
        named,
        all.iter().copied().collect(),
        "the brokers Metadata names"
    );

    // librdkafka: create, produce with acks=all, read everything back in order.
    rk::create_topic(&bootstrap, "six", PARTITIONS).await;
    let spread = leaders(&bootstrap, "six", PARTITIONS).await;
    let leading: BTreeSet<i32> = spread.values().flatten().copied().collect();
    assert_eq!(leading, all.iter().copied().collect(), "spread: {spread:?}");
    let producer = rk::producer(&bootstrap, "none");
    let base_ms = rk::now_ms();
    let records: Vec<rk::Sent> = (0..RECORDS)
        .map(|i| rk::record("six", i, base_ms))
        .collect();
    let acked = rk::produce_all(&producer, "six", &records).await;
    let ranges = rk::acked_ranges(&acked);
    assert_eq!(
        ranges.len(),
        PARTITIONS as usize,
        "every partition written: {ranges:?}"
    );
    let consumer = rk::consumer(&bootstrap, "broker-processes");
    let read = rk::consume_ranges(&consumer, "six", &ranges);
    rk::assert_matches("six", &acked, &read, false);
    drop(consumer);

    // kafka-python, and a group of three confluent-kafka members, on the same cluster.
    if let Some(python) = python_or_skip(
        "broker_processes (cluster_clients.py)",
        "import confluent_kafka, kafka",
    ) {
        run_cluster_clients(&python, dir.path(), &bootstrap, &all).await;
    }

    check_metadata_quorum_cli(&ports, &all, &cluster_id).await;

    // SIGKILL of the active controller: the survivors elect another and create topics again.
    let mut active = None;
    for _ in 0..POLLS_MAX {
        active = active_controller(&ports, &all).await;
        if active.is_some() {
            break;
        }
        sleep_poll().await;
    }
    let active = active.expect("an active controller");
    let mut killed = children.remove(&active).expect("its process");
    killed.kill().expect("SIGKILL");
    let killed_at = samsa::rt::time::now();
    let _ = killed.wait();
    let survivors: Vec<i32> = all.iter().copied().filter(|id| *id != active).collect();
    let survivors_bootstrap = bootstrap_of(&ports, &survivors);
    let mut first_created_ms = None;
    let mut serving_ms = None;
    for attempt in 0..POLLS_MAX {
        let name = format!("after-{attempt}");
        let mut admin = client(&survivors_bootstrap);
        let created = admin.create_topics(&[(&name, 3, 1, &[])]).await;
        if created.is_ok_and(|r| r.iter().all(|(_, r)| r.is_ok())) {
            first_created_ms.get_or_insert(killed_at.elapsed().as_millis());
            if produce_everywhere(&survivors_bootstrap, &name, 3).await {
                serving_ms = Some(killed_at.elapsed().as_millis());
                break;
            }
        }
        sleep_poll().await;
    }
    let serving_ms = serving_ms.expect("a topic created after the SIGKILL accepted produces");
    let next = active_controller(&ports, &survivors).await;
    assert!(
        next.is_some_and(|n| n != active),
        "a new controller: {next:?}"
    );
    eprintln!(
        "SIGKILL of the active controller (node {active}): next topic created after {} ms, \
         every partition of a new topic accepting a produce after {serving_ms} ms (defaults)",
        first_created_ms.unwrap_or_default()
    );

    // The killed node comes back; then a broker that is not the controller is killed.
    children.insert(active, spawn(dir.path(), active, &voters, &ports[&active]));
    for _ in 0..POLLS_MAX {
        if leaders(&bootstrap, "six", PARTITIONS)
            .await
            .values()
            .all(Option::is_some)
            && produce_everywhere(&bootstrap, "six", PARTITIONS).await
        {
            break;
        }
        sleep_poll().await;
    }
    let controller = active_controller(&ports, &all).await.expect("a controller");
    let victim = *all
        .iter()
        .find(|id| **id != controller)
        .expect("a broker that is not the controller");
    let mut killed = children.remove(&victim).expect("its process");
    killed.kill().expect("SIGKILL");
    let _ = killed.wait();
    let others: Vec<i32> = all.iter().copied().filter(|id| *id != victim).collect();
    let others_bootstrap = bootstrap_of(&ports, &others);
    let victims_partitions: Vec<i32> = spread
        .iter()
        .filter(|(_, leader)| **leader == Some(victim))
        .map(|(p, _)| *p)
        .collect();
    let mut unavailable = false;
    for _ in 0..POLLS_MAX {
        let now = leaders(&others_bootstrap, "six", PARTITIONS).await;
        unavailable = victims_partitions.iter().all(|p| now[p].is_none());
        if unavailable {
            break;
        }
        sleep_poll().await;
    }
    assert!(
        unavailable,
        "node {victim}'s partitions {victims_partitions:?} reported unavailable"
    );
    // The other partitions keep serving.
    let mut c = client(&others_bootstrap);
    for p in (0..PARTITIONS).filter(|p| !victims_partitions.contains(p)) {
        let record = ProducerRecord {
            key: None,
            value: Some(Bytes::from_static(b"while a broker is down")),
            headers: Vec::new(),
            timestamp: rk::now_ms(),
        };
        let batch = build_batch(&[record], Compression::None).expect("a batch");
        c.produce("six", p, batch, -1, REQUEST_TIMEOUT_MS as i32)
            .await
            .unwrap_or_else(|e| panic!("partition {p} on a live broker: {e}"));
    }

    // Restarted, it serves its partitions again, with every record acknowledged before.
    children.insert(victim, spawn(dir.path(), victim, &voters, &ports[&victim]));
    let mut back = false;
    for _ in 0..POLLS_MAX {
        if produce_everywhere(&bootstrap, "six", PARTITIONS).await {
            back = true;
            break;
        }
        sleep_poll().await;
    }
    assert!(
        back,
        "every partition accepts a produce after node {victim} restarted"
    );
    let consumer = rk::consumer(&bootstrap, "broker-processes-after");
    let read = rk::consume_ranges(&consumer, "six", &ranges);
    rk::assert_matches("six", &acked, &read, false);

    for child in children.values() {
        sigterm(child);
    }
    for (_, mut child) in children {
        let _ = child.wait();
    }
}
