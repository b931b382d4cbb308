//! `samsa metadata-quorum describe` against the controller listeners of a real three-voter
//! quorum in this process (`--bootstrap-server` through brokers is checked in
//! `broker_cluster`).
#![cfg(not(feature = "sim"))]

use std::time::Duration;

use crate::controller_process::free_port;
use crate::raft_quorum::{TEST_RAFT, WAIT};

const QUORUM_POLL_MS: u64 = 20;

/// `describe --status` output as (name, value) pairs, checked to be Kafka's fields in
/// Kafka's order, each value starting in column 24 as kafka-metadata-quorum.sh prints it.
pub fn status_fields(text: &str) -> Vec<(&str, &str)> {
    let fields: Vec<(&str, &str)> = text
        .lines()
        .map(|l| {
            let (name, value) = l
                .split_once(':')
                .unwrap_or_else(|| panic!("not `Name: value`: {l:?}"));
            assert_eq!(l.find(value.trim_start()), Some(24), "value column: {l:?}");
            (name, value.trim())
        })
        .collect();
    let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "ClusterId",
            "LeaderId",
            "LeaderEpoch",
            "HighWatermark",
            "MaxFollowerLag",
            "MaxFollowerLagTimeMs",
            "CurrentVoters",
            "CurrentObservers"
        ],
        "{text}"
    );
    fields
}

/// `describe --replication` output as rows of trimmed cells (Kafka's table ends each row
/// with a tab), its header row checked to be Kafka's columns.
pub fn replication_rows(table: &str) -> Vec<Vec<&str>> {
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.trim_end().split('\t').map(str::trim).collect())
        .collect();
    assert_eq!(
        rows.first().map(Vec::as_slice),
        Some(
            &[
                "NodeId",
                "DirectoryId",
                "LogEndOffset",
                "Lag",
                "LastFetchTimestamp",
                "LastCaughtUpTimestamp",
                "Status"
            ][..]
        ),
        "{table}"
    );
    rows
}

/// `samsa metadata-quorum describe` against the controller listeners of a real three-voter
/// quorum in this process: an unreachable address and a follower are passed over for the
/// leader, and every `--status` field is what the leader knows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_metadata_quorum_describes_a_running_quorum() {
    use samsa::cli::metadata_quorum::{execute, parse_args};
    use samsa::raft::driver::{self, NodeConfig, SnapshotConfig};
    use std::collections::BTreeMap;

    let mut listeners = Vec::new();
    let mut voters = BTreeMap::new();
    for id in 1..=3 {
        let listener = samsa::rt::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap();
        voters.insert(id, listener.local_addr().unwrap().to_string());
        listeners.push((id, listener));
    }
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = BTreeMap::new();
    for ((id, listener), dir) in listeners.into_iter().zip(&dirs) {
        let config = NodeConfig {
            node_id: id,
            voters: voters.clone(),
            metadata_log_dir: "metadata".into(),
            segment_bytes: 1 << 20,
            raft: TEST_RAFT,
            cluster_id: Some("quorum-cli-test".into()),
            bugs: Default::default(),
            snapshots: SnapshotConfig::DEFAULT,
        };
        let disk = samsa::rt::disk::Disk::real(dir.path()).unwrap();
        let node = driver::start(config, disk, samsa::rt::clock::Clock::new(), listener)
            .await
            .unwrap();
        nodes.insert(id, node);
    }

    // Wait for a leader with every voter caught up to its log end (the leader writes a
    // LeaderChange record first, then the records proposed here).
    let deadline = samsa::rt::time::now() + WAIT;
    let mut proposed = false;
    let (leader, epoch, end) = loop {
        assert!(samsa::rt::time::now() < deadline, "no settled quorum");
        let leading = nodes.iter().find(|(_, n)| n.handle.status().is_leader);
        if let Some((id, node)) = leading {
            if !proposed {
                let records = vec![
                    bytes::Bytes::from_static(b"a"),
                    bytes::Bytes::from_static(b"b"),
                ];
                proposed = matches!(node.handle.propose(records).await, Ok(Ok(_)));
            }
            if let Ok(Some(q)) = node.handle.describe().await {
                let end = q
                    .voters
                    .iter()
                    .find(|v| v.id == *id)
                    .and_then(|v| v.end_offset);
                let settled = proposed
                    && q.high_watermark > 0
                    && Some(q.high_watermark) == end
                    && q.voters.iter().all(|v| v.end_offset == end);
                if settled {
                    break (*id, q.epoch, q.high_watermark);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(QUORUM_POLL_MS)).await;
    };
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let closed = free_port();
    let bootstrap = format!(
        "127.0.0.1:{closed},{},{}",
        voters[&follower], voters[&leader]
    );

    let args = |view: &[&str]| -> Vec<String> {
        ["--bootstrap-controller", bootstrap.as_str(), "describe"]
            .iter()
            .chain(view)
            .map(|s| s.to_string())
            .collect()
    };
    let parsed = parse_args(&args(&["--status"])).unwrap();
    let text = execute(&parsed).await.unwrap();
    let fields = status_fields(&text);
    let field = |name: &str| fields.iter().find(|(n, _)| *n == name).unwrap().1;
    // The controller listener does not serve DescribeCluster, so the id is not known.
    assert_eq!(field("ClusterId"), "-", "{text}");
    assert_eq!(field("LeaderId"), leader.to_string(), "{text}");
    assert_eq!(field("LeaderEpoch"), epoch.to_string(), "{text}");
    assert_eq!(field("HighWatermark"), end.to_string(), "{text}");
    assert_eq!(field("MaxFollowerLag"), "0", "{text}");
    // Every voter is at the leader's end: the first voter is the "most lagging" one (Kafka's
    // rule), and the time is how long before the leader it last caught up (0 if it leads).
    let lag_time_ms: i64 = field("MaxFollowerLagTimeMs").parse().unwrap();
    if leader == 1 {
        assert_eq!(lag_time_ms, 0, "{text}");
    } else {
        assert!(
            (0..=WAIT.as_millis() as i64).contains(&lag_time_ms),
            "{text}"
        );
    }
    assert_eq!(
        field("CurrentVoters"),
        r#"[{"id": 1}, {"id": 2}, {"id": 3}]"#,
        "{text}"
    );
    assert_eq!(field("CurrentObservers"), "[]", "{text}");

    let parsed = parse_args(&args(&["--replication"])).unwrap();
    let table = execute(&parsed).await.unwrap();
    let rows = replication_rows(&table);
    assert_eq!(rows.len(), 4, "{table}");
    assert_eq!(rows[1][0], leader.to_string(), "{table}");
    let statuses: Vec<&str> = rows[1..].iter().map(|r| r[6]).collect();
    assert_eq!(statuses, ["Leader", "Follower", "Follower"], "{table}");
    for row in &rows[1..] {
        assert_eq!(row[3], "0", "caught up: {table}");
        assert!(row[4].parse::<i64>().unwrap() > 0, "a fetch time: {table}");
    }

    // Only unreachable addresses: an error naming the problem.
    let parsed = parse_args(&[
        "--bootstrap-controller".to_string(),
        format!("127.0.0.1:{closed}"),
        "describe".into(),
        "--status".into(),
    ])
    .unwrap();
    let err = execute(&parsed).await.unwrap_err().to_string();
    assert!(err.contains("no node answered"), "{err}");

    for (_, node) in nodes {
        node.handle.shutdown().await;
        let _ = node.task.await;
    }
}
