//! A metadata quorum of three replicas on real sockets and real files: a leader is elected,
//! what it commits reaches every replica with the same bytes, a new leader takes over when
//! the leader stops, the stopped replica catches up when it comes back (its log reopened
//! from disk), a replica that was down while the others snapshotted and moved their log
//! start catches up by fetching the leader's snapshot, and DescribeQuorum answers over the
//! wire.
//!
//! Real sockets and files exist only without the `sim` feature.
#![cfg(not(feature = "sim"))]

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use samsa::client::connection::{Connection, ConnectionLimits};
use samsa::protocol::describe_quorum::{
    DescribeQuorumRequest, DescribeQuorumRequestPartition, DescribeQuorumRequestTopic,
    DescribeQuorumResponse,
};
use samsa::protocol::types::{LeaderEpoch, NodeId};
use samsa::protocol::vote::{VoteRequest, VoteRequestPartition, VoteRequestTopic, VoteResponse};
use samsa::raft::core::RaftConfig;
use samsa::raft::driver::{self, DriverError, NodeConfig, RaftNode, SnapshotConfig};
use samsa::raft::message::RaftRecord;
use samsa::rt::clock::Clock;
use samsa::rt::disk::Disk;
use samsa::rt::net::TcpListener;

/// Fast timeouts: the test waits on elections.
pub const TEST_RAFT: RaftConfig = RaftConfig {
    election_timeout_ms: 300,
    fetch_timeout_ms: 600,
    election_backoff_max_ms: 200,
    request_timeout_ms: 500,
    fetch_max_wait_ms: 100,
    fetch_max_bytes: 1 << 20,
    retry_backoff_ms: 20,
};
pub const WAIT: Duration = Duration::from_secs(20);

struct Quorum {
    dirs: BTreeMap<i32, tempfile::TempDir>,
    voters: BTreeMap<i32, String>,
    listeners: BTreeMap<i32, Option<TcpListener>>,
    nodes: BTreeMap<i32, RaftNode>,
    snapshots: SnapshotConfig,
    segment_bytes: u64,
}

impl Quorum {
    async fn new(size: i32) -> Quorum {
        Quorum::with_snapshots(size, SnapshotConfig::DEFAULT, 1 << 20).await
    }

    async fn with_snapshots(size: i32, snapshots: SnapshotConfig, segment_bytes: u64) -> Quorum {
        let mut voters = BTreeMap::new();
        let mut listeners = BTreeMap::new();
        let mut dirs = BTreeMap::new();
        for id in 1..=size {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            voters.insert(id, listener.local_addr().expect("addr").to_string());
            listeners.insert(id, Some(listener));
            dirs.insert(id, tempfile::tempdir().expect("a directory"));
        }
        let mut quorum = Quorum {
            dirs,
            voters,
            listeners,
            nodes: BTreeMap::new(),
            snapshots,
            segment_bytes,
        };
        for id in 1..=size {
            quorum.start(id).await;
        }
        quorum
    }

    async fn start(&mut self, id: i32) {
        let listener = match self.listeners.get_mut(&id).and_then(Option::take) {
            Some(listener) => listener,
            None => rebind(&self.voters[&id]).await,
        };
        let config = self.config(id);
        let disk = Disk::real(self.dirs[&id].path()).expect("disk");
        let node = driver::start(config, disk, Clock::new(), listener)
            .await
            .expect("the replica starts");
        self.nodes.insert(id, node);
    }

    fn config(&self, id: i32) -> NodeConfig {
        NodeConfig {
            node_id: id,
            voters: self.voters.clone(),
            metadata_log_dir: "metadata".into(),
            segment_bytes: self.segment_bytes,
            raft: TEST_RAFT,
            cluster_id: Some("test-cluster".into()),
            bugs: Default::default(),
            snapshots: self.snapshots,
        }
    }

    async fn stop(&mut self, id: i32) {
        let node = self.nodes.remove(&id).expect("running");
        node.handle.shutdown().await;
        node.task.await.expect("joins").expect("stops cleanly");
    }

    async fn leader(&self) -> i32 {
        let deadline = samsa::rt::time::now() + WAIT;
        loop {
            let leaders: Vec<i32> = self
                .nodes
                .iter()
                .filter(|(_, n)| n.handle.status().is_leader)
                .map(|(id, _)| *id)
                .collect();
            if let [one] = leaders[..] {
                return one;
            }
            assert!(
                samsa::rt::time::now() < deadline,
                "no single leader: {leaders:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Proposes `count` single-record batches at the leader and waits until every running
    /// replica's high watermark passes the last.
    async fn commit(&self, prefix: &str, count: usize) -> i64 {
        let mut last = -1;
        let mut done = 0;
        while done < count {
            let leader = self.leader().await;
            let value = Bytes::from(format!("{prefix}-{done}"));
            match self.nodes[&leader].handle.propose(vec![value]).await {
                Ok(Ok(offset)) => {
                    last = offset;
                    done += 1;
                }
                // Leadership moved between the look and the proposal.
                Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
                Err(e) => panic!("the leader stopped: {e}"),
            }
        }
        for (id, node) in &self.nodes {
            node.handle
                .wait_for(WAIT, |s| s.high_watermark > last)
                .await
                .unwrap_or_else(|s| panic!("node {id} did not commit offset {last}: {s:?}"));
        }
        last
    }

    /// The data records committed on `id`, in order.
    async fn committed(&self, id: i32) -> Vec<Bytes> {
        self.committed_from(id, 0).await
    }

    /// The data records committed on `id` from `offset` on, in order.
    async fn committed_from(&self, id: i32, offset: i64) -> Vec<Bytes> {
        let handle = &self.nodes[&id].handle;
        let mut offset = offset;
        let mut out = Vec::new();
        loop {
            let batches = handle.read_committed(offset, 1 << 16).await.expect("reads");
            if batches.is_empty() {
                return out;
            }
            for batch in batches {
                for (i, record) in batch.records.iter().enumerate() {
                    if batch.base_offset + i as i64 >= offset {
                        if let RaftRecord::Data(value) = record {
                            out.push(value.clone());
                        }
                    }
                }
                offset = batch.next_offset();
            }
        }
    }
}

fn segment_bytes(dir: &std::path::Path) -> Vec<u8> {
    let dir = dir.join("metadata").join("__cluster_metadata-0");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("the metadata log directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    names.sort();
    names
        .iter()
        .flat_map(|p| std::fs::read(p).expect("a segment"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_elect_replicate_fail_over_and_catch_up() {
    let mut quorum = Quorum::new(3).await;
    let first_leader = quorum.leader().await;
    quorum.commit("a", 50).await;
    let expected: Vec<Bytes> = (0..50).map(|i| Bytes::from(format!("a-{i}"))).collect();
    for id in 1..=3 {
        assert_eq!(quorum.committed(id).await, expected, "node {id}");
    }

    // The leader stops; the other two elect a new one and go on committing.
    quorum.stop(first_leader).await;
    let second_leader = quorum.leader().await;
    assert_ne!(second_leader, first_leader);
    let epoch = quorum.nodes[&second_leader].handle.status().epoch;
    assert!(epoch >= 2, "a new epoch: {epoch}");
    quorum.commit("b", 30).await;

    // The old leader comes back from its directory and catches up.
    quorum.start(first_leader).await;
    let last = quorum.commit("c", 5).await;
    quorum.nodes[&first_leader]
        .handle
        .wait_for(WAIT, |s| s.high_watermark > last)
        .await
        .expect("the restarted replica catches up");
    let mut expected = expected;
    expected.extend((0..30).map(|i| Bytes::from(format!("b-{i}"))));
    expected.extend((0..5).map(|i| Bytes::from(format!("c-{i}"))));
    for id in 1..=3 {
        assert_eq!(quorum.committed(id).await, expected, "node {id}");
    }

    // Every replica holds the same bytes up to the shortest log end (followers append the
    // leader's batches as they are).
    let ids: Vec<i32> = quorum.nodes.keys().copied().collect();
    for id in ids {
        quorum.stop(id).await;
    }
    let logs: Vec<Vec<u8>> = (1..=3)
        .map(|id| segment_bytes(quorum.dirs[&id].path()))
        .collect();
    let shortest = logs.iter().map(Vec::len).min().expect("three logs");
    assert!(shortest > 0);
    for log in &logs[1..] {
        assert!(
            log[..shortest] == logs[0][..shortest],
            "replicas hold different bytes"
        );
    }
}

fn snapshot_files(dir: &std::path::Path) -> Vec<String> {
    let dir = dir.join("metadata").join("__cluster_metadata-0");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("the metadata log directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".checkpoint"))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_behind_the_log_start_catches_up_from_the_leaders_snapshot() {
    // Small segments, a snapshot due after 4 KiB, and a log kept to 1 byte past the latest
    // snapshot: every snapshot moves the log start.
    let snapshots = SnapshotConfig {
        max_bytes_between_snapshots: 4 << 10,
        max_snapshot_interval_ms: 0,
        retention_bytes: 1,
    };
    let mut quorum = Quorum::with_snapshots(3, snapshots, 8 << 10).await;
    let leader = quorum.leader().await;
    let absent = (1..=3).find(|id| *id != leader).expect("a follower");
    quorum.commit("a", 20).await;
    quorum.stop(absent).await;
    let last = quorum.commit("b", 200).await;

    // The state machine (here: the list of values) snapshots on the running replicas.
    let mut expected: Vec<Bytes> = (0..20).map(|i| Bytes::from(format!("a-{i}"))).collect();
    expected.extend((0..200).map(|i| Bytes::from(format!("b-{i}"))));
    let end = last + 1;
    for (id, node) in &quorum.nodes {
        let status = node.handle.status();
        assert!(status.snapshot_due, "node {id}: 4 KiB appended: {status:?}");
        let id_made = node
            .handle
            .create_snapshot(end, expected.clone())
            .await
            .expect("the driver runs")
            .unwrap_or_else(|e| panic!("node {id}: the snapshot is refused: {e}"));
        assert_eq!(id_made.end_offset, end);
        let status = node.handle.status();
        assert_eq!(status.snapshot, Some(id_made), "node {id}");
        assert_eq!(
            status.log_start_offset, end,
            "node {id}: retention moved the start"
        );
        assert!(!status.snapshot_due, "node {id}: {status:?}");
        assert!(matches!(
            node.handle.read_committed(0, 1 << 16).await,
            Err(DriverError::BelowLogStart { log_start_offset }) if log_start_offset == end
        ));
        let refused = node.handle.create_snapshot(end, Vec::new()).await;
        assert!(
            matches!(refused, Ok(Err(_))),
            "node {id}: a second snapshot at the same offset: {refused:?}"
        );
    }
    let name = format!(
        "{end:020}-{:010}.checkpoint",
        quorum.nodes[&leader].handle.status().epoch
    );
    assert_eq!(
        snapshot_files(quorum.dirs[&leader].path()),
        vec![name.clone()]
    );

    // The absent replica's log ends below every log start: it fetches the snapshot.
    quorum.start(absent).await;
    let more = quorum.commit("c", 5).await;
    expected.extend((0..5).map(|i| Bytes::from(format!("c-{i}"))));
    let handle = quorum.nodes[&absent].handle.clone();
    handle
        .wait_for(WAIT, |s| s.high_watermark > more)
        .await
        .expect("the absent replica catches up");
    let status = handle.status();
    assert_eq!(status.log_start_offset, end, "{status:?}");
    assert_eq!(snapshot_files(quorum.dirs[&absent].path()), vec![name]);
    let (id, contents) = handle
        .latest_snapshot()
        .await
        .expect("reads")
        .expect("a snapshot");
    assert_eq!(id.end_offset, end);
    // The log start passed the VotersRecord at offset 0: the snapshot carries the set.
    let voters: Option<Vec<i32>> = contents
        .voters
        .as_ref()
        .map(|v| v.iter().map(|k| k.id).collect());
    assert_eq!(
        voters,
        Some(vec![1, 2, 3]),
        "the fetched snapshot's voter set"
    );
    let mut state = contents.records;
    state.extend(quorum.committed_from(absent, end).await);
    assert_eq!(
        state, expected,
        "snapshot plus log gives the leader's state"
    );

    // It reopens from its own directory with the snapshot as its start.
    quorum.stop(absent).await;
    quorum.start(absent).await;
    let handle = quorum.nodes[&absent].handle.clone();
    handle
        .wait_for(WAIT, |s| s.high_watermark > more)
        .await
        .expect("the restarted replica catches up");
    assert_eq!(handle.status().log_start_offset, end);
    assert_eq!(quorum.committed_from(absent, end).await, expected[220..]);

    // A replica configured with another voter set refuses the directory, naming both sets.
    quorum.stop(absent).await;
    let mut voters = quorum.voters.clone();
    voters.insert(4, "127.0.0.1:1".into());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let config = NodeConfig {
        voters,
        ..quorum.config(absent)
    };
    let disk = Disk::real(quorum.dirs[&absent].path()).expect("disk");
    let refused = driver::start(config, disk, Clock::new(), listener).await;
    let Err(error) = refused else {
        panic!("a replica started on a snapshot of another voter set");
    };
    let error = error.to_string();
    assert!(
        error.contains("another quorum")
            && error.contains("[1, 2, 3]")
            && error.contains("[1, 2, 3, 4]"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_quorum_answers_on_the_controller_listener() {
    let quorum = Quorum::new(3).await;
    let leader = quorum.leader().await;
    let last = quorum.commit("x", 3).await;
    let request = DescribeQuorumRequest {
        topics: vec![DescribeQuorumRequestTopic {
            topic_name: "__cluster_metadata".into(),
            partitions: vec![DescribeQuorumRequestPartition { partition_index: 0 }],
        }],
    };
    let addr = quorum.voters[&leader].clone();
    let mut conn = Connection::connect(&addr, "test", ConnectionLimits::default())
        .await
        .expect("connects and negotiates versions");
    let version = conn.version_for(55).expect("DescribeQuorum is served");
    assert_eq!(version, 2);
    // The leader learns a follower's log end from its next fetch, so the follower that got
    // the last record with the high watermark past it is known to have it a fetch later.
    let deadline = samsa::rt::time::now() + WAIT;
    let response = loop {
        let response: DescribeQuorumResponse =
            conn.send(55, version, &request).await.expect("answers");
        let partition = &response.topics[0].partitions[0];
        let caught_up = partition
            .current_voters
            .iter()
            .all(|v| v.log_end_offset.0 > last);
        if caught_up || samsa::rt::time::now() >= deadline {
            break response;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    assert_eq!(partition.leader_id.0, leader);
    assert!(partition.high_watermark.0 > last);
    let voters: Vec<i32> = partition
        .current_voters
        .iter()
        .map(|v| v.replica_id.0)
        .collect();
    assert_eq!(voters, vec![1, 2, 3]);
    for voter in &partition.current_voters {
        assert!(voter.log_end_offset.0 > last, "{voter:?}");
        assert!(voter.last_fetch_timestamp > 0, "{voter:?}");
    }

    // A follower refuses: only the leader knows its followers.
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let mut conn = Connection::connect(
        &quorum.voters[&follower],
        "test",
        ConnectionLimits::default(),
    )
    .await
    .expect("connects");
    let response: DescribeQuorumResponse = conn.send(55, 2, &request).await.expect("answers");
    assert_eq!(
        response.topics[0].partitions[0].error_code, 6,
        "NOT_LEADER_OR_FOLLOWER"
    );

    // A quorum request for another partition is answered with an error, not obeyed.
    let vote = VoteRequest {
        cluster_id: Some("test-cluster".into()),
        voter_id: NodeId(follower),
        topics: vec![VoteRequestTopic {
            topic_name: "orders".into(),
            partitions: vec![VoteRequestPartition {
                replica_epoch: LeaderEpoch(1_000),
                replica_id: NodeId(leader),
                ..VoteRequestPartition::default()
            }],
        }],
    };
    let answer: VoteResponse = conn.send(52, 2, &vote).await.expect("answers");
    assert_eq!(answer.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    // Another cluster's vote is refused too.
    let mut other = vote.clone();
    other.cluster_id = Some("another-cluster".into());
    other.topics[0].topic_name = "__cluster_metadata".into();
    let answer: VoteResponse = conn.send(52, 2, &other).await.expect("answers");
    assert_eq!(answer.error_code, 104, "INCONSISTENT_CLUSTER_ID");
    let epoch = quorum.nodes[&follower].handle.status().epoch;
    assert!(
        epoch < 1_000,
        "neither request moved the follower's epoch: {epoch}"
    );
}

/// Binds a voter's address again after its replica stopped; another test's ephemeral bind
/// may hold the port for a moment, so a few attempts (bounded).
pub async fn rebind(address: &str) -> TcpListener {
    const ATTEMPTS_MAX: u32 = 50;
    for _ in 1..ATTEMPTS_MAX {
        if let Ok(listener) = TcpListener::bind(address).await {
            return listener;
        }
        samsa::rt::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    TcpListener::bind(address).await.expect("rebind")
}
