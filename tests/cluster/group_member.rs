//! One confluent-kafka group member (tests/interop/groups_member_confluent_kafka.py, a real
//! client on its own librdkafka) run as a process beside a [`ProcessCluster`], and the check
//! of what it consumed against a producer's acknowledgements: shared by the failover tests of
//! `replication_processes`.
//!
//! The member subscribes to one topic, commits each poll's records synchronously before its
//! next poll, and reports on stdout (one JSON object a line, see tests/interop/groups_common.py)
//! its rebalance callbacks, every record in the order it was consumed, and each commit's
//! outcome. A reader thread stamps each line with the time it arrived.
//!
//! What [`check_consumption`] holds the member to, per partition (Kafka's at-least-once
//! consumption of a group):
//! - between two assignments, the offsets it consumes are consecutive (offsets of a partition
//!   written by an idempotent producer without transactions are dense): nothing skipped,
//!   nothing twice, nothing out of order;
//! - after an assignment it starts at or after the last offset it committed successfully (a
//!   commit is not lost) and no later than one past what it had consumed (nothing skipped);
//!   what it consumes again then is counted as re-read, the one duplication Kafka's group
//!   protocol allows;
//! - every record consumed is the record the producer was told is at that offset, and every
//!   acknowledged record is consumed.
//!
//! Invariants: every wait is bounded by a named limit; the member's process is killed and
//! reaped when the handle is dropped.
#![cfg(not(feature = "sim"))]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::interop_scripts::{python_or_skip, script_command};

/// The member's `session.timeout.ms` and `heartbeat.interval.ms` (librdkafka's defaults are
/// 45 s and 3 s; shorter, so that a coordinator's failover that outlasts it shows a rebalance
/// the check must accept).
const MEMBER_SESSION_TIMEOUT_MS: u64 = 10_000;
const MEMBER_HEARTBEAT_INTERVAL_MS: u64 = 1_000;
/// The bound on the member's first assignment.
const ASSIGNED_WAIT_MS_MAX: u64 = 60_000;
/// The bound on the member reaching the end of every partition after the producer stopped.
const CAUGHT_UP_WAIT_MS_MAX: u64 = 120_000;
/// The bound on the member's exit after "stop".
const EXIT_WAIT_MS_MAX: u64 = 30_000;
const POLL_MS: u64 = 50;

/// One line of the member's stdout, as it arrived.
#[derive(Clone, Debug)]
pub struct Event {
    pub at: Instant,
    pub json: serde_json::Value,
}

impl Event {
    pub fn ev(&self) -> &str {
        self.json["ev"].as_str().unwrap_or("")
    }
}

pub struct GroupMember {
    child: Child,
    stdin: Option<ChildStdin>,
    events: Arc<Mutex<Vec<Event>>>,
}

impl GroupMember {
    /// Starts the member in `group` on `topic`, or `None` (with a notice) when the Python
    /// client is not installed and `SAMSA_REQUIRE_CLIENTS` is not 1. Its stderr goes to
    /// `dir`/member-`group`.log.
    #[allow(clippy::disallowed_methods)] // the member's log in the test's own directory
    pub fn start(
        test: &str,
        dir: &Path,
        bootstrap: &str,
        topic: &str,
        group: &str,
    ) -> Option<GroupMember> {
        let python = python_or_skip(test, "import confluent_kafka")?;
        let config = serde_json::json!({
            "bootstrap": bootstrap,
            "topic": topic,
            "group": group,
            "name": format!("{group}-member"),
            "assignor": "range",
            "session_timeout_ms": MEMBER_SESSION_TIMEOUT_MS,
            "heartbeat_interval_ms": MEMBER_HEARTBEAT_INTERVAL_MS,
        });
        let log = std::fs::File::create(dir.join(format!("member-{group}.log")))
            .expect("the member's log");
        let mut child = script_command(&python, "groups_member_confluent_kafka.py")
            .env("SAMSA_GROUP_MEMBER", config.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start groups_member_confluent_kafka.py");
        let stdout = child.stdout.take().expect("the member's stdout");
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let json = serde_json::from_str(&line).unwrap_or_else(
                    |e| serde_json::json!({"ev": "unparsed", "line": line, "error": e.to_string()}),
                );
                let event = Event {
                    at: samsa::rt::time::now(),
                    json,
                };
                sink.lock().expect("the member's events").push(event);
            }
        });
        let stdin = child.stdin.take();
        Some(GroupMember {
            child,
            stdin,
            events,
        })
    }

    /// Every line so far.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().expect("the member's events").clone()
    }

    /// Waits until the member owns `partitions` partitions.
    pub async fn wait_assigned(&mut self, partitions: usize) {
        let since = samsa::rt::time::now();
        loop {
            let owned = self
                .events()
                .iter()
                .rev()
                .find(|e| e.ev() == "owned")
                .map(|e| e.json["parts"].as_array().map_or(0, Vec::len));
            if owned == Some(partitions) {
                return;
            }
            self.assert_running("waiting for its assignment");
            assert!(
                since.elapsed() < Duration::from_millis(ASSIGNED_WAIT_MS_MAX),
                "the group member owns {owned:?} partitions, not {partitions}, after \
                 {ASSIGNED_WAIT_MS_MAX} ms"
            );
            samsa::rt::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    /// Waits until the member has consumed every offset below `ends[p]` in each partition.
    pub async fn wait_caught_up(&mut self, ends: &BTreeMap<i32, i64>) {
        let since = samsa::rt::time::now();
        loop {
            let next = next_offsets(&self.events());
            let behind: BTreeMap<i32, (i64, i64)> = ends
                .iter()
                .filter(|(p, end)| next.get(p).copied().unwrap_or(0) < **end)
                .map(|(p, end)| (*p, (next.get(p).copied().unwrap_or(0), *end)))
                .collect();
            if behind.is_empty() {
                return;
            }
            self.assert_running("catching up");
            assert!(
                since.elapsed() < Duration::from_millis(CAUGHT_UP_WAIT_MS_MAX),
                "the group member has not consumed to the end after {CAUGHT_UP_WAIT_MS_MAX} \
                 ms: (next offset, end) by partition {behind:?}"
            );
            samsa::rt::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    fn assert_running(&mut self, doing: &str) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "the group member exited with {status} while {doing}; its last lines: {:?}",
                self.events().iter().rev().take(5).collect::<Vec<_>>()
            );
        }
    }

    /// Tells the member to close its consumer and waits for its exit, which must be clean.
    pub async fn stop(mut self) -> Vec<Event> {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"stop\n");
        }
        let since = samsa::rt::time::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(status.success(), "the group member exited with {status}");
                break;
            }
            assert!(
                since.elapsed() < Duration::from_millis(EXIT_WAIT_MS_MAX),
                "the group member did not exit within {EXIT_WAIT_MS_MAX} ms of \"stop\""
            );
            samsa::rt::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
        // The reader thread sees the end of stdout right after the exit.
        samsa::rt::time::sleep(Duration::from_millis(POLL_MS)).await;
        self.events()
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One past the highest offset consumed in each partition.
fn next_offsets(events: &[Event]) -> BTreeMap<i32, i64> {
    let mut next = BTreeMap::new();
    for (p, o, _) in events.iter().flat_map(records_of) {
        let n = next.entry(p).or_insert(0);
        *n = (*n).max(o + 1);
    }
    next
}

/// The (partition, offset, value) of a "records" line.
fn records_of(event: &Event) -> Vec<(i32, i64, String)> {
    if event.ev() != "records" {
        return Vec::new();
    }
    let recs = event.json["recs"].as_array().cloned().unwrap_or_default();
    recs.iter()
        .map(|r| {
            let p = r[0].as_i64().and_then(|p| i32::try_from(p).ok());
            let o = r[1].as_i64();
            let v = r[2].as_str().map(str::to_string);
            match (p, o, v) {
                (Some(p), Some(o), Some(v)) => (p, o, v),
                _ => panic!("a record the member reported: {r}"),
            }
        })
        .collect()
}

/// What the member did, as [`check_consumption`] found it.
#[derive(Debug, Default)]
pub struct Consumption {
    /// Records consumed, re-reads included.
    pub consumed: usize,
    /// Records consumed a second time after a rebalance.
    pub reread: usize,
    /// Assignments after the first.
    pub reassignments: usize,
    /// Successful and failed commits.
    pub commits: usize,
    pub failed_commits: usize,
}

/// Checks the member's `events` against `acked` ((value, partition, offset) of every
/// acknowledged record): see the module's comment. `sent_value(v)` says whether `v` is a value
/// the producer sent (a record whose delivery failed may be stored and consumed).
pub fn check_consumption(
    events: &[Event],
    acked: &BTreeMap<(i32, i64), String>,
    sent_value: impl Fn(&str) -> bool,
) -> Consumption {
    let mut summary = Consumption::default();
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    let mut consumed_to: BTreeMap<i32, i64> = BTreeMap::new();
    let mut committed: BTreeMap<i32, i64> = BTreeMap::new();
    let mut fresh: BTreeSet<i32> = BTreeSet::new();
    let mut seen: BTreeMap<(i32, i64), String> = BTreeMap::new();
    let mut assignments: usize = 0;
    for event in events {
        match event.ev() {
            "assign" => {
                assignments += 1;
                for p in event.json["parts"].as_array().into_iter().flatten() {
                    let p = p.as_i64().and_then(|p| i32::try_from(p).ok());
                    fresh.insert(p.expect("a partition number"));
                }
            }
            "committed" => {
                summary.commits += 1;
                let offsets = event.json["offsets"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                for (p, o) in offsets {
                    let p: i32 = p.parse().expect("a partition number");
                    let o = o.as_i64().expect("an offset");
                    let c = committed.entry(p).or_insert(0);
                    assert!(
                        o >= *c,
                        "partition {p}: commit of {o} after a commit of {c}"
                    );
                    *c = o;
                }
            }
            "commit_failed" => summary.failed_commits += 1,
            "records" => {
                for (p, o, v) in records_of(event) {
                    summary.consumed += 1;
                    let at = format!("partition {p} offset {o}");
                    if fresh.remove(&p) {
                        let done = consumed_to.get(&p).copied().unwrap_or(0);
                        let floor = committed.get(&p).copied().unwrap_or(0);
                        assert!(
                            o <= done,
                            "{at}: the member skipped to it after an assignment, having \
                             consumed up to {done}"
                        );
                        assert!(
                            o >= floor,
                            "{at}: consumed after an assignment below the committed offset \
                             {floor} (a lost commit)"
                        );
                    } else if let Some(expected) = next.get(&p) {
                        assert_eq!(o, *expected, "{at}: not the next offset consumed");
                    } else {
                        panic!("{at}: consumed before any assignment of the partition");
                    }
                    next.insert(p, o + 1);
                    let done = consumed_to.entry(p).or_insert(0);
                    if o < *done {
                        summary.reread += 1;
                    }
                    *done = (*done).max(o + 1);
                    assert!(sent_value(&v), "{at}: a value never sent: {v:?}");
                    if let Some(first) = seen.insert((p, o), v.clone()) {
                        assert_eq!(first, v, "{at}: read twice with different values");
                    }
                    if let Some(expected) = acked.get(&(p, o)) {
                        assert_eq!(&v, expected, "{at}: not the record acknowledged there");
                    }
                }
            }
            "unparsed" => panic!("a line of the member's: {}", event.json),
            _ => {}
        }
    }
    summary.reassignments = assignments.saturating_sub(1);
    let missing: Vec<&(i32, i64)> = acked.keys().filter(|k| !seen.contains_key(k)).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged records never consumed, the first {:?}",
        missing.len(),
        missing.first()
    );
    summary
}
