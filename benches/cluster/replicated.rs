//! The replicated produce benchmark (issue 16), the `SAMSA_BENCH_BROKERS=3` mode of
//! `benches/rdkafka_bench.rs`. One run, on this machine:
//!
//! 1. One `samsa broker` with the embedded defaults (a quorum of one): a topic of six
//!    partitions with replication factor 1 (`samsa topics create`), then `samsa perf produce`
//!    of `SAMSA_BENCH_SMALL_RECORDS` (default 2,000,000) records of 100 bytes with the Rust
//!    producer's defaults (acks=all, idempotent, linger 5 ms), and the broker's CPU around it.
//! 2. Three `samsa broker` processes, combined nodes formatted with one cluster id as in the
//!    README's three-node cluster (client listeners on 127.0.0.1:39291-39293, the quorum on
//!    39294-39296, `offsets.topic.replication.factor=1`), each with the default flush policy
//!    (sync before acknowledging). Once Metadata names all three brokers, `samsa topics create`
//!    makes a topic of six partitions, replication factor 3, `min.insync.replicas=2`; the
//!    controller places replicas round robin, so the leaders are spread two per broker (the
//!    run prints them and warns loudly if not). Then, against that topic:
//!    - the same `samsa perf produce`, with each broker's CPU (utime + stime from
//!      /proc/<pid>/stat) read before and after it;
//!    - the bytes stored per record: the `.log` files of each partition's leader replica,
//!      divided by the records in the topic (the sum of its high watermarks), read right
//!      after that run (segments are not preallocated, so a file's length is what it holds);
//!    - produce latency at 10,000 records/s with linger.ms=0 and acks=all, through
//!      `samsa perf produce --throughput 10000 --linger-ms 0` (idempotent) and through
//!      librdkafka (idempotence off; Nagle's algorithm on, librdkafka's default, then off),
//!      `SAMSA_BENCH_LATENCY_RECORDS` (default 50,000) records each.
//! 3. With every broker stopped: the bandwidth of 1 MiB writes each followed by fdatasync on
//!    the data directory's file system with three concurrent writers (separate files, total
//!    MB/s; one writer for reference), and from it the goal
//!    `min(700,000, 0.8 x bandwidth / 3 / bytes stored per record)` records/s: every record
//!    is written by three replicas to this one disk.
//!
//! A summary table of every figure goes to stdout at the end, then one JSON line.
//!
//! ```text
//! SAMSA_BENCH_BROKERS=3 cargo bench --bench rdkafka_bench
//! # a smoke test, about 40 s after the build:
//! SAMSA_BENCH_BROKERS=3 SAMSA_BENCH_SMALL_RECORDS=200000 cargo bench --bench rdkafka_bench
//! ```
//!
//! Invariants: every wait is bounded by a named limit; the data lives in a temporary directory
//! removed at the end (each node's stderr is `node-<id>.log` there, its tail printed when the
//! run fails); the brokers are stopped with SIGTERM at the end and when the run fails (a
//! panic), and SIGKILLed only if one has not exited `SHUTDOWN_WAIT_S` after it.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, Producer};

use crate::broker_process::BrokerProcess;
use crate::real::{cpu_seconds, disk_bandwidth, env_or, percentile, produce, producer_with};

const NODES: i32 = 3;
const PARTITIONS: i32 = 6;
const REPLICATION_FACTOR: &str = "3";
const MIN_INSYNC_REPLICAS: &str = "2";
const RECORD_SIZE: usize = 100;
/// The fixed rate of the latency phases, records/s, with linger.ms=0.
const LATENCY_RATE: u64 = 10_000;
const TOPIC_RF1: &str = "bench-rf1";
const TOPIC_RF3: &str = "bench-rf3";
/// Node `id` listens for clients on `CLIENT_PORT_BASE + id` and for its quorum on
/// `CONTROLLER_PORT_BASE + id`.
const CLIENT_PORT_BASE: u16 = 39290;
const CONTROLLER_PORT_BASE: u16 = 39293;
/// Writers of the raw bandwidth figure: one per replica of a record.
const DISK_WRITERS: usize = 3;
/// The goal's share of the disk's bandwidth, and its cap in records/s.
const GOAL_DISK_SHARE: f64 = 0.8;
const GOAL_RECORDS_PER_S_MAX: f64 = 700_000.0;

/// The bound on the nodes listening, registering and the topic's first full ISRs.
const READY_WAIT_S: u64 = 60;
const POLL_MS: u64 = 100;
/// The bound on one `samsa` tool run (`perf produce` included).
const TOOL_TIMEOUT_S: u64 = 900;
/// librdkafka's bound on one Metadata or ListOffsets request.
const REQUEST_TIMEOUT_MS: u64 = 5_000;
/// How long a broker may take to exit after SIGTERM before it is SIGKILLed.
const SHUTDOWN_WAIT_S: u64 = 30;
/// Lines of each node's stderr printed when the run fails.
const LOG_TAIL_LINES: usize = 40;

/// One table row: what, the figure, its unit, a note.
struct Row {
    name: String,
    value: f64,
    unit: &'static str,
    note: String,
}

fn row(rows: &mut Vec<Row>, name: impl Into<String>, value: f64, unit: &'static str, note: &str) {
    rows.push(Row {
        name: name.into(),
        value,
        unit,
        note: note.to_owned(),
    });
}

/// What `samsa perf produce --json` printed.
struct PerfSummary {
    records: f64,
    records_per_s: f64,
    mb_per_s: f64,
    avg_ms: f64,
    p50_ms: f64,
    p99_ms: f64,
    p99_9_ms: f64,
    max_ms: f64,
}

/// The number after `"key":` in `json` (perf's summary is one flat object but for its
/// `latency_ms`, whose keys appear nowhere else).
fn json_number(json: &str, key: &str) -> f64 {
    let pattern = format!("\"{key}\":");
    let at = json
        .find(&pattern)
        .unwrap_or_else(|| panic!("no {key} in samsa perf's summary: {json}"))
        + pattern.len();
    let rest = &json[at..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end]
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{key} in samsa perf's summary: {e}: {json}"))
}

/// Runs the `samsa` binary with `args`, bounded by `TOOL_TIMEOUT_S`; panics (with its
/// stderr) unless it succeeds. Returns its stdout.
fn samsa(args: &[&str]) -> String {
    // Anonymous files, not pipes: nothing can block on a full pipe while the child is polled.
    let mut stdout = tempfile::tempfile().expect("a file for the tool's stdout");
    let mut stderr = tempfile::tempfile().expect("a file for the tool's stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_samsa"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout.try_clone().expect("clone a file handle"))
        .stderr(stderr.try_clone().expect("clone a file handle"))
        .spawn()
        .expect("start the samsa binary");
    let deadline = Instant::now() + Duration::from_secs(TOOL_TIMEOUT_S);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the samsa tool") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(POLL_MS));
    };
    let read = |file: &mut std::fs::File| {
        let mut text = String::new();
        let _ = file.seek(SeekFrom::Start(0));
        let _ = file.read_to_string(&mut text);
        text
    };
    let (out, err) = (read(&mut stdout), read(&mut stderr));
    match status {
        Some(status) if status.success() => out,
        Some(status) => panic!("samsa {args:?} failed ({status}):\n{out}{err}"),
        None => panic!("samsa {args:?} did not finish within {TOOL_TIMEOUT_S} s:\n{out}{err}"),
    }
}

/// `samsa perf produce` of `records` 100-byte records to `topic`, plus `extra` options.
fn perf_produce(bootstrap: &str, topic: &str, records: u64, extra: &[&str]) -> PerfSummary {
    let n = records.to_string();
    let size = RECORD_SIZE.to_string();
    let mut args = vec![
        "perf",
        "produce",
        "--topic",
        topic,
        "--num-records",
        &n,
        "--record-size",
        &size,
        "--bootstrap-server",
        bootstrap,
        "--json",
    ];
    args.extend_from_slice(extra);
    let json = samsa(&args);
    eprintln!("samsa perf produce {extra:?}: {}", json.trim());
    assert_eq!(json_number(&json, "errors"), 0.0, "samsa perf: {json}");
    PerfSummary {
        records: json_number(&json, "records"),
        records_per_s: json_number(&json, "records_per_s"),
        mb_per_s: json_number(&json, "mb_per_s"),
        avg_ms: json_number(&json, "avg"),
        p50_ms: json_number(&json, "p50"),
        p99_ms: json_number(&json, "p99"),
        p99_9_ms: json_number(&json, "p99_9"),
        max_ms: json_number(&json, "max"),
    }
}

fn create_topic(bootstrap: &str, topic: &str, replication_factor: &str, configs: &[&str]) {
    let partitions = PARTITIONS.to_string();
    let mut args = vec![
        "topics",
        "create",
        topic,
        "--partitions",
        &partitions,
        "--replication-factor",
        replication_factor,
        "-b",
        bootstrap,
    ];
    for config in configs {
        args.extend_from_slice(&["--config", config]);
    }
    samsa(&args);
}

/// Polls `probe` every `POLL_MS` until it answers, for at most `READY_WAIT_S`; panics with
/// `what` and the last answer's reason otherwise.
fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + Duration::from_secs(READY_WAIT_S);
    loop {
        match probe() {
            Ok(value) => return value,
            Err(reason) if Instant::now() >= deadline => {
                panic!("{what}: not within {READY_WAIT_S} s ({reason})")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(POLL_MS)),
        }
    }
}

/// A librdkafka client for Metadata and watermarks.
fn metadata_client(bootstrap: &str) -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .create()
        .expect("create the metadata client")
}

/// Each partition's leader, once every partition of `topic` has one and an ISR of `isr`.
fn leaders_once_in_sync(
    client: &BaseProducer,
    topic: &str,
    isr: usize,
) -> Result<Vec<i32>, String> {
    let timeout = Duration::from_millis(REQUEST_TIMEOUT_MS);
    let metadata = client
        .client()
        .fetch_metadata(Some(topic), timeout)
        .map_err(|e| e.to_string())?;
    let t = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .ok_or("not in Metadata")?;
    if let Some(e) = t.error() {
        return Err(format!("{e:?}"));
    }
    let mut leaders = BTreeMap::new();
    for p in t.partitions() {
        if p.leader() < 0 || p.isr().len() < isr {
            return Err(format!(
                "partition {}: leader {}, ISR {:?}",
                p.id(),
                p.leader(),
                p.isr()
            ));
        }
        leaders.insert(p.id(), p.leader());
    }
    if leaders.len() != PARTITIONS as usize {
        return Err(format!("{} partitions", leaders.len()));
    }
    Ok(leaders.into_values().collect())
}

/// The records in `topic`: the sum over its partitions of high watermark minus log start.
fn records_in(client: &BaseProducer, topic: &str) -> u64 {
    (0..PARTITIONS)
        .map(|p| {
            let (low, high) = client
                .client()
                .fetch_watermarks(topic, p, Duration::from_millis(REQUEST_TIMEOUT_MS))
                .unwrap_or_else(|e| panic!("the watermarks of {topic}-{p}: {e}"));
            u64::try_from(high - low).expect("a high watermark at or above the log start")
        })
        .sum()
}

/// Bytes of the `.log` segment files in a partition directory.
fn log_bytes(partition_dir: &Path) -> u64 {
    let entries = std::fs::read_dir(partition_dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", partition_dir.display()));
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}

/// Three `samsa broker` processes of one cluster; see the module docs for their settings.
struct Cluster {
    dir: PathBuf,
    /// Node id and its process, while it runs.
    nodes: Vec<(i32, Child)>,
}

fn client_port(id: i32) -> u16 {
    CLIENT_PORT_BASE + id as u16
}

fn controller_port(id: i32) -> u16 {
    CONTROLLER_PORT_BASE + id as u16
}

impl Cluster {
    /// Formats a data directory per node in `dir` with one new cluster id and starts the
    /// nodes; waits until each accepts connections.
    fn start(dir: &Path) -> Cluster {
        let ids = 1..=NODES;
        for port in ids
            .clone()
            .flat_map(|id| [client_port(id), controller_port(id)])
        {
            if let Err(e) = TcpListener::bind(("127.0.0.1", port)) {
                panic!("port {port} is taken ({e}): the cluster benchmark needs 39291-39296");
            }
        }
        let cluster_id = samsa(&["storage", "random-uuid"]).trim().to_owned();
        let voters = ids
            .clone()
            .map(|id| format!("{id}@127.0.0.1:{}", controller_port(id)))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = Cluster {
            dir: dir.to_path_buf(),
            nodes: Vec::new(),
        };
        for id in ids.clone() {
            let log_dirs = format!("log.dirs={}", cluster.data_dir(id).display());
            samsa(&[
                "storage",
                "format",
                "--cluster-id",
                &cluster_id,
                "--override",
                &format!("node.id={id}"),
                "--override",
                &log_dirs,
            ]);
        }
        for id in ids.clone() {
            let stderr = std::fs::File::create(cluster.log_path(id)).expect("a node's log file");
            let child = Command::new(env!("CARGO_BIN_EXE_samsa"))
                .arg("broker")
                .args(["--override", &format!("node.id={id}")])
                .args(["--override", &format!("controller.quorum.voters={voters}")])
                .args([
                    "--override",
                    &format!(
                        "listeners=PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}",
                        client_port(id),
                        controller_port(id)
                    ),
                ])
                .args([
                    "--override",
                    &format!("log.dirs={}", cluster.data_dir(id).display()),
                ])
                .args(["--override", "offsets.topic.replication.factor=1"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(stderr)
                .spawn()
                .expect("start samsa broker");
            cluster.nodes.push((id, child));
        }
        for id in ids {
            let addr = SocketAddr::from(([127, 0, 0, 1], client_port(id)));
            wait_for(&format!("node {id} listening on {addr}"), || {
                cluster.assert_alive("its start");
                TcpStream::connect_timeout(&addr, Duration::from_millis(POLL_MS))
                    .map(drop)
                    .map_err(|e| e.to_string())
            });
        }
        cluster
    }

    fn data_dir(&self, id: i32) -> PathBuf {
        self.dir.join(format!("node-{id}"))
    }

    fn log_path(&self, id: i32) -> PathBuf {
        self.dir.join(format!("node-{id}.log"))
    }

    fn bootstrap(&self) -> String {
        (1..=NODES)
            .map(|id| format!("127.0.0.1:{}", client_port(id)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Each running node's id and pid.
    fn pids(&self) -> Vec<(i32, u32)> {
        self.nodes.iter().map(|(id, c)| (*id, c.id())).collect()
    }

    /// Panics unless every node still runs (`during`: what the run was doing).
    fn assert_alive(&mut self, during: &str) {
        for (id, child) in &mut self.nodes {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("node {id} exited ({status}) during {during}");
            }
        }
    }

    /// SIGTERM to every node, then waits up to `SHUTDOWN_WAIT_S` for all to exit; SIGKILLs
    /// (and names) any still running then. Returns the nodes that had to be killed.
    fn stop(&mut self) -> Vec<i32> {
        for (_, child) in &self.nodes {
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                // SAFETY: kill(2) on the pid of our own unreaped child: the pid cannot have
                // been reused while the child is not waited for.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(SHUTDOWN_WAIT_S);
        while Instant::now() < deadline
            && self
                .nodes
                .iter_mut()
                .any(|(_, c)| matches!(c.try_wait(), Ok(None)))
        {
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
        let mut killed = Vec::new();
        for (id, mut child) in std::mem::take(&mut self.nodes) {
            if matches!(child.try_wait(), Ok(None)) {
                eprintln!("node {id} did not exit within {SHUTDOWN_WAIT_S} s of SIGTERM: SIGKILL");
                let _ = child.kill();
                killed.push(id);
            }
            let _ = child.wait();
        }
        killed
    }

    fn print_log_tails(&self) {
        for id in 1..=NODES {
            let log = std::fs::read_to_string(self.log_path(id)).unwrap_or_default();
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

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.print_log_tails();
        }
        self.stop();
    }
}

/// The one-node phase: returns perf's summary and the broker's CPU seconds during it.
fn one_node(records: u64) -> (PerfSummary, f64) {
    eprintln!("== one node: {TOPIC_RF1}, {PARTITIONS} partitions, RF 1, {records} records");
    let mut broker = BrokerProcess::start();
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let bootstrap = broker.bootstrap();
        let pid = broker.pid().expect("the broker runs");
        create_topic(&bootstrap, TOPIC_RF1, "1", &[]);
        let client = metadata_client(&bootstrap);
        wait_for("the RF 1 topic's leaders", || {
            leaders_once_in_sync(&client, TOPIC_RF1, 1)
        });
        let cpu0 = cpu_seconds(pid);
        let perf = perf_produce(&bootstrap, TOPIC_RF1, records, &[]);
        (perf, cpu_seconds(pid) - cpu0)
    }));
    // SIGTERM whether the phase passed or failed.
    if result.is_ok() {
        broker.assert_alive("the one-node phase");
    }
    broker.stop();
    result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

pub fn main() {
    let records = env_or("SAMSA_BENCH_SMALL_RECORDS", 2_000_000);
    let latency_records = env_or("SAMSA_BENCH_LATENCY_RECORDS", 50_000);
    let work = tempfile::Builder::new()
        .prefix("samsa-bench-cluster-")
        .tempdir()
        .expect("create a temporary directory");
    let mut rows: Vec<Row> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();

    let (single, single_cpu) = one_node(records);

    eprintln!(
        "== three nodes: {TOPIC_RF3}, {PARTITIONS} partitions, RF {REPLICATION_FACTOR}, \
         min.insync.replicas {MIN_INSYNC_REPLICAS}, {records} records"
    );
    let mut cluster = Cluster::start(work.path());
    let bootstrap = cluster.bootstrap();
    let client = metadata_client(&bootstrap);
    wait_for("Metadata naming all three brokers", || {
        let metadata = client
            .client()
            .fetch_metadata(None, Duration::from_millis(REQUEST_TIMEOUT_MS))
            .map_err(|e| e.to_string())?;
        let brokers = metadata.brokers().len();
        if brokers == NODES as usize {
            Ok(())
        } else {
            Err(format!("{brokers} brokers"))
        }
    });
    create_topic(
        &bootstrap,
        TOPIC_RF3,
        REPLICATION_FACTOR,
        &[&format!("min.insync.replicas={MIN_INSYNC_REPLICAS}")],
    );
    let leaders = wait_for("the RF 3 topic's leaders and full ISRs", || {
        leaders_once_in_sync(&client, TOPIC_RF3, NODES as usize)
    });
    print!(
        "{}",
        samsa(&["topics", "describe", TOPIC_RF3, "-b", &bootstrap])
    );
    let per_broker = (1..=NODES)
        .map(|id| leaders.iter().filter(|l| **l == id).count())
        .collect::<Vec<_>>();
    if per_broker
        .iter()
        .any(|n| *n != (PARTITIONS / NODES) as usize)
    {
        warnings.push(format!(
            "the leaders of {TOPIC_RF3} are NOT spread: {leaders:?} (per broker {per_broker:?})"
        ));
    }

    // Throughput, with each broker's CPU around it.
    let pids = cluster.pids();
    let cpu0: Vec<f64> = pids.iter().map(|(_, pid)| cpu_seconds(*pid)).collect();
    let replicated = perf_produce(&bootstrap, TOPIC_RF3, records, &[]);
    let cpu: Vec<f64> = pids
        .iter()
        .zip(&cpu0)
        .map(|((_, pid), before)| cpu_seconds(*pid) - before)
        .collect();
    cluster.assert_alive("the throughput run");

    // Bytes stored per record, from each partition's leader replica, before the latency
    // phases add records in small batches.
    let leaders_after =
        leaders_once_in_sync(&client, TOPIC_RF3, NODES as usize).unwrap_or_else(|e| {
            warnings.push(format!("after the throughput run, {TOPIC_RF3}: {e}"));
            leaders.clone()
        });
    let stored: u64 = leaders_after
        .iter()
        .enumerate()
        .map(|(p, leader)| log_bytes(&cluster.data_dir(*leader).join(format!("{TOPIC_RF3}-{p}"))))
        .sum();
    let stored_records = records_in(&client, TOPIC_RF3);
    for id in 1..=NODES {
        let bytes: u64 = (0..PARTITIONS)
            .map(|p| log_bytes(&cluster.data_dir(id).join(format!("{TOPIC_RF3}-{p}"))))
            .sum();
        eprintln!("node {id}: {bytes} bytes of {TOPIC_RF3} .log files");
    }
    let bytes_per_record = stored as f64 / stored_records.max(1) as f64;

    // Latency at a fixed rate, linger 0, acks=all.
    let rate = LATENCY_RATE.to_string();
    let perf_latency = perf_produce(
        &bootstrap,
        TOPIC_RF3,
        latency_records,
        &["--throughput", &rate, "--linger-ms", "0"],
    );
    let mut rdkafka_latency = Vec::new();
    for nagle_disable in [false, true] {
        let p = producer_with(&bootstrap, "0", true, nagle_disable);
        produce(
            &p,
            TOPIC_RF3,
            latency_records,
            RECORD_SIZE,
            Some(LATENCY_RATE),
        );
        rdkafka_latency.push(p.context().sorted_latencies_ns());
    }
    cluster.assert_alive("the latency runs");
    // Before the brokers go, so librdkafka does not log their refused connections.
    drop(client);
    let killed = cluster.stop();
    if !killed.is_empty() {
        warnings.push(format!("nodes {killed:?} needed SIGKILL after SIGTERM"));
    }

    // The disk, with the brokers stopped so they do not compete with it.
    eprintln!(
        "== raw write + fdatasync bandwidth in {}",
        work.path().display()
    );
    let disk3 = disk_bandwidth(work.path(), DISK_WRITERS);
    let disk1 = disk_bandwidth(work.path(), 1);
    let derived = GOAL_DISK_SHARE * disk3 * 1e6 / f64::from(NODES) / bytes_per_record;
    let goal = derived.min(GOAL_RECORDS_PER_S_MAX);

    let n = replicated.records;
    row(
        &mut rows,
        "produce 100 B, 1 node, RF 1 (samsa perf)",
        single.records_per_s,
        "records/s",
        &format!("{:.1} MB/s, avg {:.2} ms", single.mb_per_s, single.avg_ms),
    );
    row(
        &mut rows,
        "produce 100 B, 3 nodes, RF 3, min.insync 2 (samsa perf)",
        replicated.records_per_s,
        "records/s",
        &format!(
            "{:.1} MB/s, avg {:.2} ms",
            replicated.mb_per_s, replicated.avg_ms
        ),
    );
    row(
        &mut rows,
        "raw 1 MiB write+fdatasync, 3 writers, total",
        disk3,
        "MB/s",
        "",
    );
    row(
        &mut rows,
        "raw 1 MiB write+fdatasync, 1 writer",
        disk1,
        "MB/s",
        "reference",
    );
    row(
        &mut rows,
        "bytes stored per record (RF 3, one replica)",
        bytes_per_record,
        "B",
        &format!("{stored} B of .log / {stored_records} records"),
    );
    row(
        &mut rows,
        "0.8 x 3-writer bandwidth / 3 / bytes per record",
        derived,
        "records/s",
        "",
    );
    row(
        &mut rows,
        "goal = min(700,000, that)",
        goal,
        "records/s",
        "",
    );
    row(
        &mut rows,
        "RF 3 produce / goal",
        replicated.records_per_s / goal,
        "x",
        "",
    );
    let latency_note = format!("{latency_records} records, RF 3");
    for (name, value) in [
        ("p50", perf_latency.p50_ms),
        ("p99", perf_latency.p99_ms),
        ("p99.9", perf_latency.p99_9_ms),
        ("max", perf_latency.max_ms),
    ] {
        row(
            &mut rows,
            format!("latency {name} at 10k/s, linger 0 (samsa perf)"),
            value,
            "ms",
            &latency_note,
        );
    }
    for (lat, label) in rdkafka_latency.iter().zip(["", ", nagle off"]) {
        for (name, q) in [("p50", 0.50), ("p99", 0.99), ("p99.9", 0.999), ("max", 1.0)] {
            row(
                &mut rows,
                format!("latency {name} at 10k/s, linger 0 (librdkafka{label})"),
                percentile(lat, q),
                "ms",
                &latency_note,
            );
        }
    }
    row(
        &mut rows,
        "broker CPU per M records, 3 nodes together",
        cpu.iter().sum::<f64>() / n * 1e6,
        "s",
        "the RF 3 throughput run",
    );
    for ((id, _), secs) in pids.iter().zip(&cpu) {
        row(
            &mut rows,
            format!("broker CPU per M records, node {id}"),
            secs / n * 1e6,
            "s",
            &format!("leads {} partitions", per_broker[(*id - 1) as usize]),
        );
    }
    row(
        &mut rows,
        "broker CPU per M records, 1 node (RF 1)",
        single_cpu / single.records * 1e6,
        "s",
        "",
    );

    println!();
    println!(
        "== replicated produce, one run: {records} records of {RECORD_SIZE} B, {PARTITIONS} \
         partitions, acks=all, sync before ack; leaders {leaders:?}"
    );
    println!("{:<58} {:>14} {:<10} note", "measurement", "figure", "unit");
    for r in &rows {
        println!("{:<58} {:>14.2} {:<10} {}", r.name, r.value, r.unit, r.note);
    }
    for w in &warnings {
        println!("WARNING: {w}");
    }
    let json: Vec<String> = rows
        .iter()
        .map(|r| format!("\"{} ({})\":{:.3}", r.name, r.unit, r.value))
        .collect();
    println!("{{{}}}", json.join(","));
}
