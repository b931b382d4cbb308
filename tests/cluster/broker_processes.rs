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
use std::process::Stdio;

use bytes::Bytes;
use samsa::client::{build_batch, ProducerRecord};
use samsa::protocol::record_batch::Compression;

use crate::interop_scripts::{python_or_skip, script_command};
use crate::metadata_quorum_cli::{replication_rows, status_fields};
use crate::process_cluster::{
    active_controller, bootstrap_of, client, leaders, produce_everywhere, quorum_state, samsa,
    sleep_poll, Ports, ProcessCluster, POLLS_MAX, POLL_MS, REQUEST_TIMEOUT_MS,
};
use crate::rdkafka_support as rk;

const NODES: i32 = 3;
const PARTITIONS: i32 = 6;
const RECORDS: usize = 600;
/// Polls of cluster_clients.py before it is killed (300 s in all; it takes seconds).
const SCRIPT_POLLS_MAX: u32 = 3_000;

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
    let mut child = script_command(python, "cluster_clients.py")
        .env("SAMSA_BOOTSTRAP", bootstrap)
        .env("SAMSA_CLUSTER_BROKERS", ids)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_broker_processes_spread_serve_and_fail_over() {
    let mut cluster = ProcessCluster::start(NODES);
    let all = cluster.ids();
    let bootstrap = cluster.bootstrap(&all);
    let cluster_id = cluster.cluster_id.clone();

    // Every broker registered and named by Metadata.
    cluster.wait_registered().await;

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
        run_cluster_clients(&python, cluster.dir(), &bootstrap, &all).await;
    }

    check_metadata_quorum_cli(&cluster.ports, &all, &cluster_id).await;

    // SIGKILL of the active controller: the survivors elect another and create topics again.
    let mut active = None;
    for _ in 0..POLLS_MAX {
        active = active_controller(&cluster.ports, &all).await;
        if active.is_some() {
            break;
        }
        sleep_poll().await;
    }
    let active = active.expect("an active controller");
    cluster.sigkill(active);
    let killed_at = samsa::rt::time::now();
    let survivors: Vec<i32> = all.iter().copied().filter(|id| *id != active).collect();
    let survivors_bootstrap = cluster.bootstrap(&survivors);
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
    let next = active_controller(&cluster.ports, &survivors).await;
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
    cluster.restart(active);
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
    let controller = active_controller(&cluster.ports, &all)
        .await
        .expect("a controller");
    let victim = *all
        .iter()
        .find(|id| **id != controller)
        .expect("a broker that is not the controller");
    cluster.sigkill(victim);
    let others: Vec<i32> = all.iter().copied().filter(|id| *id != victim).collect();
    let others_bootstrap = cluster.bootstrap(&others);
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
    cluster.restart(victim);
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

    cluster.stop();
}
