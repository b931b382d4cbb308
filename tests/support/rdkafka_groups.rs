//! Consumer-group members for the librdkafka group tests (the `rdkafka` crate): the group
//! consumer's configuration, and members that run as separate OS processes so that one can
//! be killed with SIGKILL (no LeaveGroup, no final commit), each reporting what it was
//! assigned and what it read to a file the test reads.
//!
//! Include it with `#[path = "support/rdkafka_groups.rs"] mod rdkafka_groups;` next to
//! `rdkafka_support`, and declare the member entry point once in the test binary:
//!
//! ```ignore
//! #[test]
//! #[ignore = "a group member process, started by the group tests"]
//! fn group_member_process() { rdkafka_groups::member_main(); }
//! ```
//!
//! A member is the test binary itself, re-executed with `--exact group_member_process
//! --ignored` and the `MEMBER_*_ENV` variables; without them the member test returns at
//! once, so `cargo test -- --ignored` stays harmless.
//!
//! Invariants:
//! - A member writes one report line per event with a single `write` on an `O_APPEND` file,
//!   and stores a record's offset (for the next auto-commit) only after its line is written:
//!   whatever the group committed, the report holds, even after a SIGKILL.
//! - A member never outlives its test: it stops when the stop file appears, when its parent
//!   process is gone, or after `MEMBER_POLLS_MAX` polls; `Drop` of a [`MemberProcess`] kills
//!   and reaps it.
//! - Every wait is bounded by a named limit.
#![allow(dead_code)]

use crate::rdkafka_support::{
    client_config, Acked, CLIENT_TIMEOUT_MS, IDLE_POLLS_MAX, POLLS_MAX, POLL_MS,
};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// The broker settings of every group test: Kafka's 3 s initial rebalance delay would make
/// each fresh group wait that long before its first generation.
pub const GROUP_BROKER_OVERRIDES: &[(&str, &str)] = &[("group.initial.rebalance.delay.ms", "100")];
/// Kafka's minimum session timeout (`group.min.session.timeout.ms`), as issue 11 asks.
pub const SESSION_TIMEOUT_MS: u64 = 6_000;
pub const HEARTBEAT_INTERVAL_MS: u64 = 1_000;
/// How often a member's stored offsets are committed.
pub const AUTO_COMMIT_INTERVAL_MS: u64 = 200;

/// The name of the `#[ignore]` test that runs a member (see the module docs).
pub const MEMBER_TEST_NAME: &str = "group_member_process";
pub const MEMBER_BOOTSTRAP_ENV: &str = "SAMSA_GROUP_MEMBER_BOOTSTRAP";
pub const MEMBER_GROUP_ENV: &str = "SAMSA_GROUP_MEMBER_GROUP";
pub const MEMBER_TOPIC_ENV: &str = "SAMSA_GROUP_MEMBER_TOPIC";
pub const MEMBER_REPORT_ENV: &str = "SAMSA_GROUP_MEMBER_REPORT";
pub const MEMBER_STOP_ENV: &str = "SAMSA_GROUP_MEMBER_STOP";
/// Polls of one member before it stops on its own (at least 200 s when idle): a bound for a
/// member whose test died without killing it.
pub const MEMBER_POLLS_MAX: u32 = 2_000;
/// Polls of a stopping member's exit (30 s in all: a clean close leaves the group).
pub const MEMBER_EXIT_POLLS_MAX: u32 = 300;
/// Polls of the reports while waiting for a group state (60 s in all: a member's session
/// timeout, a heartbeat and a rebalance fit many times).
pub const GROUP_WAIT_POLLS_MAX: u32 = 600;
pub const GROUP_WAIT_POLL_MS: u64 = 100;

/// A group consumer as an application would configure one: subscribe, start from the
/// earliest offset when the group has none committed, commit automatically — but only the
/// offsets the application stored after processing a record (at-least-once), with CRC checks.
pub fn group_consumer_config(bootstrap: &str, group: &str) -> ClientConfig {
    let mut c = client_config(bootstrap);
    c.set("group.id", group)
        .set("session.timeout.ms", SESSION_TIMEOUT_MS.to_string())
        .set("heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS.to_string())
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "true")
        .set(
            "auto.commit.interval.ms",
            AUTO_COMMIT_INTERVAL_MS.to_string(),
        )
        .set("enable.auto.offset.store", "false")
        .set("check.crcs", "true");
    c
}

/// The index a record of [`crate::rdkafka_support::record`] carries in its `seq` header.
pub fn seq_header(m: &impl Message) -> Option<usize> {
    let headers = m.headers()?;
    let seq = headers.iter().find(|h| h.key == "seq")?;
    let bytes: [u8; 8] = seq.value?.try_into().ok()?;
    usize::try_from(u64::from_be_bytes(bytes)).ok()
}

/// The committed offset of each partition `0..partitions` of `topic` for `group`, asked by
/// `client` (which need not be a member): `None` where the group has committed nothing.
pub fn committed(
    client: &BaseConsumer,
    topic: &str,
    partitions: i32,
) -> BTreeMap<i32, Option<i64>> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let answer = client
        .committed_offsets(tpl, Duration::from_millis(CLIENT_TIMEOUT_MS))
        .unwrap_or_else(|e| panic!("OffsetFetch for {topic}: {e}"));
    answer
        .elements_for_topic(topic)
        .iter()
        .map(|el| {
            let offset = match el.offset() {
                Offset::Offset(o) => Some(o),
                _ => None,
            };
            (el.partition(), offset)
        })
        .collect()
}

fn partitions_text(tpl: &TopicPartitionList, topic: &str) -> String {
    let ps: BTreeSet<i32> = tpl
        .elements_for_topic(topic)
        .iter()
        .map(|e| e.partition())
        .collect();
    ps.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

/// A member's report file: one line per event, each written whole.
struct ReportFile {
    file: Mutex<File>,
    topic: String,
}

impl ReportFile {
    fn line(&self, text: &str) {
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        // One write per line on an O_APPEND file: a SIGKILL leaves whole lines only.
        f.write_all(format!("{text}\n").as_bytes())
            .expect("write the member's report");
    }
}

/// The member's consumer context: reports each assignment and revocation once librdkafka
/// has applied it.
struct ReportingContext {
    report: ReportFile,
}

impl ClientContext for ReportingContext {}

impl ConsumerContext for ReportingContext {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let topic = &self.report.topic;
        match rebalance {
            Rebalance::Assign(tpl) => self
                .report
                .line(&format!("assigned {}", partitions_text(tpl, topic))),
            Rebalance::Revoke(tpl) => self
                .report
                .line(&format!("revoked {}", partitions_text(tpl, topic))),
            Rebalance::Error(e) => self.report.line(&format!("error rebalance: {e}")),
        }
    }
}

/// The body of the member test: joins the group named by the environment, reads and reports
/// records until told to stop, then closes the consumer (which leaves the group). Returns at
/// once when the environment names no member.
pub fn member_main() {
    let var = |name: &str| std::env::var(name).ok();
    let (Some(bootstrap), Some(group), Some(topic), Some(report), Some(stop)) = (
        var(MEMBER_BOOTSTRAP_ENV),
        var(MEMBER_GROUP_ENV),
        var(MEMBER_TOPIC_ENV),
        var(MEMBER_REPORT_ENV),
        var(MEMBER_STOP_ENV),
    ) else {
        return;
    };
    #[allow(clippy::disallowed_methods)] // a test's report file
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&report)
        .expect("open the member's report");
    let context = ReportingContext {
        report: ReportFile {
            file: Mutex::new(file),
            topic: topic.clone(),
        },
    };
    let consumer: BaseConsumer<ReportingContext> = group_consumer_config(&bootstrap, &group)
        .create_with_context(context)
        .expect("create the group consumer");
    consumer.subscribe(&[&topic]).expect("subscribe");
    let report = &consumer.context().report;
    report.line(&format!("started pid {}", std::process::id()));
    let parent = std::os::unix::process::parent_id();
    let stop = Path::new(&stop);
    for _ in 0..MEMBER_POLLS_MAX {
        if stop.exists() || std::os::unix::process::parent_id() != parent {
            break;
        }
        match consumer.poll(Duration::from_millis(POLL_MS)) {
            None => {}
            Some(Err(e)) => report.line(&format!("error consumer: {e}")),
            Some(Ok(m)) => {
                let r = GroupRead::of(&m);
                report.line(&format!("record {} {} {}", r.partition, r.offset, r.index));
                // Only now may the next auto-commit cover this record.
                if let Err(e) = consumer.store_offset_from_message(&m) {
                    report.line(&format!("error store offset: {e}"));
                }
            }
        }
    }
    report.line("closing");
    drop(consumer);
}

/// One record as a group member read it: where, and the index of its `seq` header (-1 if it
/// had none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GroupRead {
    pub partition: i32,
    pub offset: i64,
    pub index: i64,
}

impl GroupRead {
    pub fn of(m: &impl Message) -> Self {
        GroupRead {
            partition: m.partition(),
            offset: m.offset(),
            index: seq_header(m).map_or(-1, |s| s as i64),
        }
    }
}

/// What one member's report says so far.
#[derive(Debug, Default, Clone)]
pub struct MemberReport {
    /// Every assignment in order; the last is the current one unless a revocation followed.
    pub assignments: Vec<BTreeSet<i32>>,
    /// The partitions the member holds now (empty after a revocation).
    pub current: BTreeSet<i32>,
    /// Each record read, in reading order.
    pub records: Vec<GroupRead>,
    pub errors: Vec<String>,
    pub closing: bool,
}

fn parse_partitions(s: &str) -> BTreeSet<i32> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| p.parse().unwrap_or_else(|e| panic!("partition {p:?}: {e}")))
        .collect()
}

/// Parses a report; a last line without its newline (being written) is left for later.
pub fn read_report(path: &Path) -> MemberReport {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut r = MemberReport::default();
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    for line in complete.lines() {
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        match kind {
            "assigned" => {
                r.current = parse_partitions(rest);
                r.assignments.push(r.current.clone());
            }
            "revoked" => r.current.clear(),
            "record" => {
                let f: Vec<i64> = rest
                    .split(' ')
                    .map(|n| n.parse().unwrap_or_else(|e| panic!("{line:?}: {e}")))
                    .collect();
                assert_eq!(f.len(), 3, "report line {line:?}");
                r.records.push(GroupRead {
                    partition: i32::try_from(f[0]).expect("partition fits i32"),
                    offset: f[1],
                    index: f[2],
                });
            }
            "error" => r.errors.push(rest.to_string()),
            "closing" => r.closing = true,
            "started" => {}
            other => panic!("unknown report line kind {other:?} in {line:?}"),
        }
    }
    r
}

/// One member process.
pub struct MemberProcess {
    pub name: String,
    child: Option<Child>,
    report: PathBuf,
    stop: PathBuf,
    log: PathBuf,
}

impl MemberProcess {
    /// Starts member `name` of `group` on `topic`: this test binary, re-executed to run only
    /// the member test, with its output in `dir/<name>.log`.
    pub fn spawn(dir: &Path, name: &str, bootstrap: &str, group: &str, topic: &str) -> Self {
        let report = dir.join(format!("{name}.report"));
        let stop = dir.join(format!("{name}.stop"));
        let log = dir.join(format!("{name}.log"));
        #[allow(clippy::disallowed_methods)] // a test's scratch file
        let out = File::create(&log).expect("create the member's log");
        let err = out.try_clone().expect("clone the member's log handle");
        let exe = std::env::current_exe().expect("the test binary's path");
        let child = Command::new(exe)
            .args([MEMBER_TEST_NAME, "--exact", "--ignored", "--nocapture"])
            .env(MEMBER_BOOTSTRAP_ENV, bootstrap)
            .env(MEMBER_GROUP_ENV, group)
            .env(MEMBER_TOPIC_ENV, topic)
            .env(MEMBER_REPORT_ENV, &report)
            .env(MEMBER_STOP_ENV, &stop)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn member {name}: {e}"));
        MemberProcess {
            name: name.to_string(),
            child: Some(child),
            report,
            stop,
            log,
        }
    }

    pub fn report(&self) -> MemberReport {
        read_report(&self.report)
    }

    /// The member's own output (libtest's and anything it printed), for failure messages.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL: the member dies without leaving the group or committing.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Asks the member to close its consumer (leaving the group) and waits for it to exit;
    /// panics with its log if it fails or does not exit in time.
    pub fn stop(&mut self) {
        #[allow(clippy::disallowed_methods)] // a test's scratch file
        std::fs::write(&self.stop, b"stop").expect("write the stop file");
        let Some(child) = self.child.as_mut() else {
            return;
        };
        for _ in 0..MEMBER_EXIT_POLLS_MAX {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                assert!(
                    status.success(),
                    "member {} exited with {status}; its log:\n{}",
                    self.name,
                    self.log_text()
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(GROUP_WAIT_POLL_MS));
        }
        self.kill9();
        panic!(
            "member {} did not exit within {} ms of its stop file; its log:\n{}",
            self.name,
            u64::from(MEMBER_EXIT_POLLS_MAX) * GROUP_WAIT_POLL_MS,
            self.log_text()
        );
    }
}

impl Drop for MemberProcess {
    fn drop(&mut self) {
        if std::thread::panicking() && self.child.is_some() {
            eprintln!(
                "----- member {} log:\n{}\n----- member {} report:\n{}",
                self.name,
                self.log_text(),
                self.name,
                std::fs::read_to_string(&self.report).unwrap_or_default()
            );
        }
        self.kill9();
    }
}

/// Polls `check` until it returns `Ok`, every `GROUP_WAIT_POLL_MS`; panics with `what` and
/// the last reason after `GROUP_WAIT_POLLS_MAX` polls.
pub fn wait_for<T>(what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let mut last = String::new();
    for _ in 0..GROUP_WAIT_POLLS_MAX {
        match check() {
            Ok(v) => return v,
            Err(why) => last = why,
        }
        std::thread::sleep(Duration::from_millis(GROUP_WAIT_POLL_MS));
    }
    panic!(
        "{what}: not reached after {} ms; last state: {last}",
        u64::from(GROUP_WAIT_POLLS_MAX) * GROUP_WAIT_POLL_MS
    );
}

/// `Ok` with each member's current partitions once they are pairwise disjoint, none is
/// empty, and together they are exactly `0..partitions`: the group is stable over them.
pub fn stable_assignment(
    reports: &[(String, MemberReport)],
    partitions: i32,
) -> Result<BTreeMap<String, BTreeSet<i32>>, String> {
    let mut owner: BTreeMap<i32, &str> = BTreeMap::new();
    for (name, r) in reports {
        if r.current.is_empty() {
            return Err(format!("member {name} holds no partition"));
        }
        for &p in &r.current {
            if let Some(other) = owner.insert(p, name) {
                return Err(format!("partition {p} is held by {other} and {name}"));
            }
        }
    }
    let all: BTreeSet<i32> = (0..partitions).collect();
    let held: BTreeSet<i32> = owner.keys().copied().collect();
    if held != all {
        return Err(format!("held partitions {held:?}, expected {all:?}"));
    }
    Ok(reports
        .iter()
        .map(|(n, r)| (n.clone(), r.current.clone()))
        .collect())
}

/// Who read each `(partition, offset)`, with the index each reader saw, over `reports`.
pub fn reads_by_position(
    reports: &[(String, MemberReport)],
) -> BTreeMap<(i32, i64), Vec<(String, i64)>> {
    let mut reads: BTreeMap<(i32, i64), Vec<(String, i64)>> = BTreeMap::new();
    for (name, r) in reports {
        for g in &r.records {
            reads
                .entry((g.partition, g.offset))
                .or_default()
                .push((name.clone(), g.index));
        }
    }
    reads
}

/// `Err` naming how many acknowledged records nobody has read yet (and the first of them).
pub fn all_read(
    acked: &[Acked],
    reads: &BTreeMap<(i32, i64), Vec<(String, i64)>>,
) -> Result<(), String> {
    let unread: Vec<&Acked> = acked
        .iter()
        .filter(|a| !reads.contains_key(&(a.partition, a.offset)))
        .collect();
    match unread.first() {
        None => Ok(()),
        Some(a) => Err(format!(
            "{} of {} records unread, the first at partition {} offset {}",
            unread.len(),
            acked.len(),
            a.partition,
            a.offset
        )),
    }
}

/// Checks that each of `acked` was read exactly once, with its own index, and by a member
/// `may_read` allows for its partition.
pub fn assert_read_once(
    what: &str,
    acked: &[Acked],
    reads: &BTreeMap<(i32, i64), Vec<(String, i64)>>,
    may_read: impl Fn(&str, i32) -> bool,
) {
    for a in acked {
        let at = format!(
            "{what}: record {} at partition {} offset {}",
            a.sent.index, a.partition, a.offset
        );
        let Some(readers) = reads.get(&(a.partition, a.offset)) else {
            panic!("{at} was never read");
        };
        assert_eq!(
            readers.len(),
            1,
            "{at} was read more than once: {readers:?}"
        );
        let (reader, index) = &readers[0];
        assert_eq!(*index, a.sent.index as i64, "{at}: read with another index");
        assert!(
            may_read(reader, a.partition),
            "{at} was read by {reader}, which did not own the partition"
        );
    }
}

/// Polls a subscribed consumer until it has read `want` records, storing each one's offset
/// (for the next commit) once it is recorded. Panics on a consumer error, or when nothing
/// arrives for `IDLE_POLLS_MAX` polls.
pub fn poll_records<C: ConsumerContext>(consumer: &BaseConsumer<C>, want: usize) -> Vec<GroupRead> {
    let mut out = Vec::with_capacity(want);
    let mut idle = 0;
    for _ in 0..POLLS_MAX {
        if out.len() >= want {
            return out;
        }
        match consumer.poll(Duration::from_millis(POLL_MS)) {
            None => {
                idle += 1;
                if idle >= IDLE_POLLS_MAX {
                    break;
                }
            }
            Some(Err(e)) => panic!("group consumer error after {} records: {e}", out.len()),
            Some(Ok(m)) => {
                idle = 0;
                out.push(GroupRead::of(&m));
                consumer
                    .store_offset_from_message(&m)
                    .unwrap_or_else(|e| panic!("store the offset of a record read: {e}"));
            }
        }
    }
    panic!(
        "the group consumer stalled after {} of {want} records",
        out.len()
    );
}

/// [`poll_records`] for a `StreamConsumer`: awaits records until `want` were read; a wait
/// longer than `IDLE_POLLS_MAX` polls' worth counts as a stall.
pub async fn stream_records(consumer: &StreamConsumer, want: usize) -> Vec<GroupRead> {
    let idle = Duration::from_millis(POLL_MS * u64::from(IDLE_POLLS_MAX));
    let mut out = Vec::with_capacity(want);
    while out.len() < want {
        let m = match tokio::time::timeout(idle, consumer.recv()).await {
            Err(_) => panic!(
                "the stream consumer stalled after {} of {want} records",
                out.len()
            ),
            Ok(Err(e)) => panic!("stream consumer error after {} records: {e}", out.len()),
            Ok(Ok(m)) => m,
        };
        out.push(GroupRead::of(&m));
        consumer
            .store_offset_from_message(&m)
            .unwrap_or_else(|e| panic!("store the offset of a record read: {e}"));
    }
    out
}
