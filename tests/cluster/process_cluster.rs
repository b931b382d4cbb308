//! `samsa broker` processes on loopback, each a combined node (broker and one voter of the
//! metadata quorum) with its own ports and directory, formatted with one cluster id, as the
//! README's three-node cluster runs them; shared by `broker_processes` and
//! `replication_processes`.
//!
//! Invariants:
//! - every process a [`ProcessCluster`] started is killed (SIGKILL) and reaped when it is
//!   dropped, so a failed test leaves no broker behind; a failing test's drop prints the
//!   tail of every node's log;
//! - every wait is bounded by a named limit.
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
use crate::rdkafka_support as rk;

/// Polls while waiting for the cluster, one per `POLL_MS` (60 s in all).
pub const POLLS_MAX: u32 = 600;
pub const POLL_MS: u64 = 100;
/// A request's bound while nodes come and go.
pub const REQUEST_TIMEOUT_MS: u64 = 2_000;
/// How long a node may take to exit after SIGTERM (its controlled shutdown waits for the
/// controller to move its leaderships, then it closes its logs).
pub const SIGTERM_WAIT_MS_MAX: u64 = 60_000;
/// Lines of each node's log printed when a test fails.
const LOG_TAIL_LINES: usize = 60;

pub struct Ports {
    pub client: u16,
    pub controller: u16,
}

pub fn samsa() -> Command {
    Command::new(env!("CARGO_BIN_EXE_samsa"))
}

/// Broker processes of one cluster, in a temporary directory of their own.
pub struct ProcessCluster {
    pub cluster_id: String,
    pub ports: BTreeMap<i32, Ports>,
    voters: String,
    /// `--override`s of this cluster's own, after the shared ones (a later one wins).
    overrides: Vec<String>,
    children: BTreeMap<i32, Child>,
    /// Nodes stopped with SIGSTOP and not yet continued.
    paused: BTreeSet<i32>,
    dir: tempfile::TempDir,
}

impl ProcessCluster {
    /// Formats `nodes` data directories with one new cluster id and starts a broker process
    /// on each (node ids 1..=nodes).
    pub fn start(nodes: i32) -> ProcessCluster {
        ProcessCluster::start_with(nodes, &[])
    }

    /// [`ProcessCluster::start`] with `overrides` (`key=value`) on every node's command line
    /// after the shared ones.
    pub fn start_with(nodes: i32, overrides: &[&str]) -> ProcessCluster {
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
        let ports: BTreeMap<i32, Ports> = (1..=nodes)
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
        for id in 1..=nodes {
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
        let mut cluster = ProcessCluster {
            cluster_id,
            ports,
            voters,
            overrides: overrides.iter().map(|o| o.to_string()).collect(),
            children: BTreeMap::new(),
            paused: BTreeSet::new(),
            dir,
        };
        for id in 1..=nodes {
            cluster.restart(id);
        }
        cluster
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Every node's id.
    pub fn ids(&self) -> Vec<i32> {
        self.ports.keys().copied().collect()
    }

    /// The client listeners of `ids`, comma-separated.
    pub fn bootstrap(&self, ids: &[i32]) -> String {
        bootstrap_of(&self.ports, ids)
    }

    /// Starts node `id` (again) on its data directory, with the settings it started with.
    pub fn restart(&mut self, id: i32) {
        assert!(
            !self.children.contains_key(&id),
            "node {id} is already running"
        );
        let child = spawn(
            self.dir.path(),
            id,
            &self.voters,
            &self.ports[&id],
            &self.overrides,
        );
        self.children.insert(id, child);
    }

    /// Kills node `id`'s process with SIGKILL and reaps it.
    pub fn sigkill(&mut self, id: i32) {
        let mut child = self.children.remove(&id).expect("a running node");
        child.kill().expect("SIGKILL");
        let _ = child.wait();
    }

    /// SIGSTOP to node `id`: the process stays, its sockets stay open, nothing it does moves
    /// until [`ProcessCluster::sigcont`].
    pub fn sigstop(&mut self, id: i32) {
        self.signal(id, libc::SIGSTOP);
        self.paused.insert(id);
    }

    /// SIGCONT to node `id`, which [`ProcessCluster::sigstop`] paused.
    pub fn sigcont(&mut self, id: i32) {
        assert!(self.paused.remove(&id), "node {id} is not paused");
        self.signal(id, libc::SIGCONT);
    }

    fn signal(&self, id: i32, signal: libc::c_int) {
        let child = self.children.get(&id).expect("a running node");
        let pid = libc::pid_t::try_from(child.id()).expect("a pid");
        // SAFETY: kill(2) on the pid of our own unreaped child: the pid cannot have been
        // reused by another process while the child is not waited for.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "signal {signal} to node {id}");
    }

    /// SIGTERM to node `id` (a graceful stop: controlled shutdown, logs closed), then waits
    /// for its exit, at most `SIGTERM_WAIT_MS_MAX`; its exit status.
    pub async fn sigterm(&mut self, id: i32) -> std::process::ExitStatus {
        self.signal(id, libc::SIGTERM);
        let mut child = self.children.remove(&id).expect("a running node");
        for _ in 0..SIGTERM_WAIT_MS_MAX / POLL_MS {
            if let Ok(Some(status)) = child.try_wait() {
                return status;
            }
            sleep_poll().await;
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("node {id} did not exit within {SIGTERM_WAIT_MS_MAX} ms of SIGTERM");
    }

    /// What node `id` has written to its stderr so far (every start of it).
    pub fn log_of(&self, id: i32) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("broker-{id}.log")))
            .unwrap_or_default()
    }

    /// Waits until Metadata through any node names every node as a broker.
    pub async fn wait_registered(&self) {
        let all = self.ids();
        let bootstrap = self.bootstrap(&all);
        let mut named = BTreeSet::new();
        for _ in 0..POLLS_MAX {
            let mut c = client(&bootstrap);
            if c.refresh(&[]).await.is_ok() {
                named = c.brokers().keys().copied().collect();
                if named.len() == all.len() {
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
    }

    /// SIGTERM to every running node, then waits for each to exit.
    pub fn stop(mut self) {
        for id in std::mem::take(&mut self.paused) {
            self.signal(id, libc::SIGCONT);
        }
        for child in self.children.values() {
            sigterm(child);
        }
        for (_, mut child) in std::mem::take(&mut self.children) {
            let _ = child.wait();
        }
    }
}

impl Drop for ProcessCluster {
    fn drop(&mut self) {
        for child in self.children.values_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            for id in self.ports.keys() {
                let log = self.log_of(*id);
                let lines: Vec<&str> = log.lines().collect();
                let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
                eprintln!(
                    "----- the last {} lines of node {id}'s log:\n{}",
                    tail.len(),
                    tail.join("\n")
                );
            }
        }
    }
}

/// `--override key=value` for each item of `SAMSA_TEST_BROKER_OVERRIDES` (comma-separated
/// `key=value`): a developer's knob to rerun the process tests with other settings, e.g. the
/// failover tests with Kafka's `broker.session.timeout.ms=9000`. Unset in CI.
fn extra_overrides() -> Vec<String> {
    let Ok(list) = std::env::var("SAMSA_TEST_BROKER_OVERRIDES") else {
        return Vec::new();
    };
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .flat_map(|item| ["--override".to_string(), item.to_string()])
        .collect()
}

fn data_dir(dir: &Path, id: i32) -> String {
    dir.join(format!("node-{id}")).display().to_string()
}

// The child's stderr goes to a file of the test's own directory, outside the system under
// test.
#[allow(clippy::disallowed_methods)]
fn spawn(dir: &Path, id: i32, voters: &str, ports: &Ports, overrides: &[String]) -> Child {
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
        .args(
            overrides
                .iter()
                .flat_map(|o| ["--override".to_string(), o.clone()]),
        )
        .args(extra_overrides())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start samsa broker")
}

pub fn client(bootstrap: &str) -> Client {
    Client::new(ClientConfig {
        bootstrap: bootstrap.split(',').map(str::to_string).collect(),
        client_id: "broker-processes-test".into(),
        request_timeout_ms: REQUEST_TIMEOUT_MS,
        connect_timeout_ms: REQUEST_TIMEOUT_MS,
        retries_max: 0,
        ..ClientConfig::default()
    })
}

pub fn bootstrap_of(ports: &BTreeMap<i32, Ports>, ids: &[i32]) -> String {
    ids.iter()
        .map(|id| format!("127.0.0.1:{}", ports[id].client))
        .collect::<Vec<_>>()
        .join(",")
}

/// The quorum's leader, asked of a broker's client listener (which forwards DescribeQuorum).
pub async fn active_controller(ports: &BTreeMap<i32, Ports>, ids: &[i32]) -> Option<i32> {
    quorum_state(ports, ids).await.map(|q| q.leader_id)
}

/// What DescribeQuorum says of the metadata quorum.
pub struct QuorumState {
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub high_watermark: i64,
}

/// The quorum's leader, epoch and high watermark, asked of the first of `ids` whose client
/// listener answers (brokers forward DescribeQuorum to the quorum's leader).
pub async fn quorum_state(ports: &BTreeMap<i32, Ports>, ids: &[i32]) -> Option<QuorumState> {
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
pub async fn leaders(bootstrap: &str, topic: &str, partitions: i32) -> BTreeMap<i32, Option<i32>> {
    let mut c = client(bootstrap);
    let _ = c.refresh(&[topic]).await;
    let mut out = BTreeMap::new();
    for p in 0..partitions {
        out.insert(p, c.leader(topic, p).await.ok());
    }
    out
}

/// One record to each partition of `topic` through `bootstrap`; whether all were acked.
pub async fn produce_everywhere(bootstrap: &str, topic: &str, partitions: i32) -> bool {
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

pub async fn sleep_poll() {
    tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
}
