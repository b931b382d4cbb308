//! `samsa perf produce|consume`: load generators over the Rust client, in the spirit of
//! Kafka's `kafka-producer-perf-test` and `kafka-consumer-perf-test`.
//!
//! - `produce` sends `--num-records` records of `--record-size` bytes (no key: the sticky
//!   partitioner fills whole batches) through a [`Producer`], at most `--throughput` records
//!   per second (-1: as fast as the producer takes them), and measures each record's latency
//!   from `send` to its acknowledgement.
//! - `consume` reads every partition of the topic from the start of its log until
//!   `--num-records` records (or, if fewer exist, everything below the high watermarks seen
//!   at the start) were read, decoding every record.
//!
//! - `commit` (in `perf_commit`) measures OffsetCommit latency at a fixed rate.
//! - `clean` (in `perf_clean`) measures the log cleaner against a raw read, on real files.
//!
//! A progress line goes to stderr every second; the final summary goes to stdout, as text or
//! (`--json`) as one JSON object. All time is read through `crate::rt::time`.
//!
//! Invariant: latencies are counted in a fixed-size histogram ([`Histogram`]: 1 µs buckets up
//! to 100 ms, 1 ms buckets up to 100 s, one overflow bucket), so memory does not grow with
//! `--num-records`; percentiles are exact to the bucket width.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rand::Rng;

use crate::client::{Client, ClientConfig, FetchOptions, Producer, ProducerConfig, ProducerRecord};
use crate::protocol::record_batch::Compression;
use crate::rt::clock::Clock;
use crate::rt::time::{now, Instant};

const USAGE: &str = "usage: samsa perf produce --topic T --num-records N --record-size B [options]
       samsa perf consume --topic T --num-records N [options]
       samsa perf commit --topic T [options] (see `samsa perf commit --help`)
       samsa perf clean --dir D [options] (see `samsa perf clean --help`)

common options:
  --bootstrap-server HOST:PORT[,HOST:PORT...]
                                 brokers to start from (default 127.0.0.1:9092)
  --json                         print the summary as one JSON object
produce options:
  --throughput R                 records per second, -1 for unlimited (default -1)
  --acks A                       all (or -1), 0 or 1 (default all)
  --linger-ms MS                 (default 5)
  --batch-size BYTES             (default 16384)
  --buffer-memory BYTES          (default 33554432)
  --compression CODEC            none, gzip, snappy, lz4 or zstd (default none)
  --partitions P                 create the topic with P partitions if it does not exist
  --idempotence on|off           (default on with acks -1, else off)
consume options:
  --fetch-max-bytes BYTES        bytes per Fetch (default 52428800)
  --group G                      consume as a member of group G (range assignor, from the
                                 committed offsets or the log start, auto-commit every 1 s):
                                 until --num-records, or 10 s without a record; the rate is
                                 timed from the first record, the join reported apart";

/// Microsecond buckets below this many microseconds.
const FINE_US_MAX: u64 = 100_000;
/// Millisecond buckets below this many milliseconds.
const COARSE_MS_MAX: u64 = 100_000;

/// A lock-free latency histogram; see the module docs.
pub struct Histogram {
    fine: Vec<AtomicU64>,
    coarse: Vec<AtomicU64>,
    overflow: AtomicU64,
    count: AtomicU64,
    sum_us: AtomicU64,
    max_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            fine: (0..FINE_US_MAX).map(|_| AtomicU64::new(0)).collect(),
            coarse: (0..COARSE_MS_MAX).map(|_| AtomicU64::new(0)).collect(),
            overflow: AtomicU64::new(0),
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
            max_us: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub fn record(&self, us: u64) {
        let bucket = if us < FINE_US_MAX {
            self.fine.get(us as usize)
        } else {
            self.coarse.get((us / 1000) as usize)
        };
        bucket
            .unwrap_or(&self.overflow)
            .fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub fn mean_us(&self) -> f64 {
        let count = self.count();
        if count == 0 {
            0.0
        } else {
            self.sum_us.load(Ordering::Relaxed) as f64 / count as f64
        }
    }

    pub fn max_us(&self) -> u64 {
        self.max_us.load(Ordering::Relaxed)
    }

    /// The smallest bucket value at or below which `quantile` of the samples lie (the upper
    /// edge of the bucket, so a percentile is never understated).
    pub fn percentile_us(&self, quantile: f64) -> u64 {
        let count = self.count();
        if count == 0 {
            return 0;
        }
        let rank = ((quantile * count as f64).ceil() as u64).clamp(1, count);
        let mut seen = 0u64;
        for (us, bucket) in self.fine.iter().enumerate() {
            seen += bucket.load(Ordering::Relaxed);
            if seen >= rank {
                return us as u64;
            }
        }
        for (ms, bucket) in self.coarse.iter().enumerate() {
            seen += bucket.load(Ordering::Relaxed);
            if seen >= rank {
                return ((ms as u64 + 1) * 1000).min(self.max_us());
            }
        }
        self.max_us()
    }
}

/// Parsed options shared by both commands, plus the raw rest.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    /// Comma-separated on the command line, as Kafka's tools take it.
    bootstrap: Vec<String>,
    topic: String,
    num_records: u64,
    record_size: usize,
    throughput: i64,
    acks: i16,
    linger_ms: u64,
    batch_size: usize,
    buffer_memory: usize,
    compression: Compression,
    partitions: Option<i32>,
    idempotence: Option<bool>,
    fetch_max_bytes: i32,
    /// `consume --group`: consume as a member of this group.
    group: Option<String>,
    json: bool,
}

fn parse_compression(name: &str) -> Result<Compression, String> {
    Ok(match name {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => return Err(format!("unknown compression '{other}'")),
    })
}

/// Walks the `--flag value` pairs of `args`, handing each to `apply` (which answers false for a
/// flag it does not know), and returns whether the bare `--json` was among them.
pub(super) fn parse_flags(
    args: &[String],
    mut apply: impl FnMut(&str, &str) -> Result<bool, String>,
) -> Result<bool, String> {
    let mut json = false;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        if flag == "--json" {
            json = true;
            continue;
        }
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        if !apply(flag, value)? {
            return Err(format!("unknown option '{flag}'"));
        }
    }
    Ok(json)
}

fn parse_options(args: &[String], produce: bool) -> Result<Options, String> {
    let mut options = Options {
        bootstrap: vec!["127.0.0.1:9092".into()],
        topic: String::new(),
        num_records: 0,
        record_size: 0,
        throughput: -1,
        acks: -1,
        linger_ms: 5,
        batch_size: 16_384,
        buffer_memory: 33_554_432,
        compression: Compression::None,
        partitions: None,
        idempotence: None,
        fetch_max_bytes: 52_428_800,
        group: None,
        json: false,
    };
    let json = parse_flags(args, |flag, value| {
        let number = |what: &str| format!("{flag}: '{value}' is not a valid {what}");
        match (flag, produce) {
            ("--bootstrap-server", _) => {
                options.bootstrap =
                    super::common::bootstrap_list(value).map_err(|e| e.to_string())?
            }
            ("--topic", _) => options.topic = value.to_owned(),
            ("--num-records", _) => {
                options.num_records = value.parse().map_err(|_| number("count"))?
            }
            ("--record-size", true) => {
                options.record_size = value.parse().map_err(|_| number("size"))?
            }
            ("--throughput", true) => {
                options.throughput = value.parse().map_err(|_| number("rate"))?
            }
            ("--acks", true) => {
                options.acks = super::produce::parse_acks(value).map_err(|e| e.to_string())?
            }
            ("--linger-ms", true) => {
                options.linger_ms = value.parse().map_err(|_| number("duration"))?
            }
            ("--batch-size", true) => {
                options.batch_size = value.parse().map_err(|_| number("size"))?
            }
            ("--buffer-memory", true) => {
                options.buffer_memory = value.parse().map_err(|_| number("size"))?
            }
            ("--compression", true) => options.compression = parse_compression(value)?,
            ("--partitions", true) => {
                options.partitions = Some(value.parse().map_err(|_| number("count"))?)
            }
            ("--idempotence", true) => {
                options.idempotence = Some(match value {
                    "on" | "true" => true,
                    "off" | "false" => false,
                    _ => return Err(number("on|off")),
                })
            }
            ("--fetch-max-bytes", false) => {
                options.fetch_max_bytes = value.parse().map_err(|_| number("size"))?
            }
            ("--group", false) if !value.is_empty() => options.group = Some(value.to_owned()),
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    options.json = json;
    if options.topic.is_empty() {
        return Err("--topic is required".into());
    }
    if options.num_records == 0 {
        return Err("--num-records must be at least 1".into());
    }
    if produce && options.record_size == 0 {
        return Err("--record-size must be at least 1".into());
    }
    if options.throughput == 0 || options.throughput < -1 {
        return Err("--throughput must be positive or -1".into());
    }
    Ok(options)
}

/// What `samsa perf` was asked to run.
enum Mode {
    Produce(Options),
    Consume(Options),
    Commit(super::perf_commit::Options),
    Clean(super::perf_clean::Options),
}

/// `samsa perf ARGS`.
pub fn main(args: &[String]) -> ExitCode {
    let command = args.first().map(String::as_str);
    let (usage, produce) = match command {
        Some("produce") => (USAGE, true),
        Some("consume") => (USAGE, false),
        Some("commit") => (super::perf_commit::USAGE, false),
        Some("clean") => (super::perf_clean::USAGE, false),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("samsa perf: expected 'produce', 'consume', 'commit' or 'clean'\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let rest = args.get(1..).unwrap_or_default();
    if super::common::is_help(rest) {
        println!("{usage}");
        return ExitCode::SUCCESS;
    }
    let mode = if command == Some("commit") {
        super::perf_commit::parse_options(rest).map(Mode::Commit)
    } else if command == Some("clean") {
        super::perf_clean::parse_options(rest).map(Mode::Clean)
    } else {
        parse_options(rest, produce).map(|o| {
            if produce {
                Mode::Produce(o)
            } else {
                Mode::Consume(o)
            }
        })
    };
    let mode = match mode {
        Ok(mode) => mode,
        Err(e) => {
            eprintln!("samsa perf: {e}\n{usage}");
            return ExitCode::from(2);
        }
    };
    super::init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("samsa perf: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match mode {
        Mode::Produce(options) => runtime.block_on(run_produce(options)),
        Mode::Consume(options) if options.group.is_some() => {
            runtime.block_on(run_consume_group(options))
        }
        Mode::Consume(options) => runtime.block_on(run_consume(options)),
        Mode::Commit(options) => runtime.block_on(super::perf_commit::run(options)),
        Mode::Clean(options) => runtime.block_on(super::perf_clean::run(options)),
    };
    match result {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("samsa perf: {e}");
            ExitCode::FAILURE
        }
    }
}

fn client_config(options: &Options) -> ClientConfig {
    ClientConfig {
        bootstrap: options.bootstrap.clone(),
        client_id: "samsa-perf".into(),
        ..ClientConfig::default()
    }
}

/// Counters the progress reporter reads.
#[derive(Default)]
struct Progress {
    records: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
}

/// Prints a progress line every second until `done` is set.
async fn report_progress(
    progress: Arc<Progress>,
    histogram: Option<Arc<Histogram>>,
    done: Arc<AtomicBool>,
) {
    let mut last_records = 0u64;
    let mut last_bytes = 0u64;
    let mut last = now();
    while !done.load(Ordering::Relaxed) {
        crate::rt::time::sleep(Duration::from_secs(1)).await;
        if done.load(Ordering::Relaxed) {
            return;
        }
        let at = now();
        let secs = at.duration_since(last).as_secs_f64().max(1e-9);
        let records = progress.records.load(Ordering::Relaxed);
        let bytes = progress.bytes.load(Ordering::Relaxed);
        let latency = histogram
            .as_ref()
            .map(|h| format!(", {:.2} ms avg latency so far", h.mean_us() / 1000.0))
            .unwrap_or_default();
        eprintln!(
            "{records} records, {:.1} records/sec ({:.2} MB/sec){latency}, {} errors",
            (records - last_records) as f64 / secs,
            (bytes - last_bytes) as f64 / secs / 1_048_576.0,
            progress.errors.load(Ordering::Relaxed),
        );
        last_records = records;
        last_bytes = bytes;
        last = at;
    }
}

async fn run_produce(options: Options) -> Result<String, String> {
    let mut client = Client::new(client_config(&options));
    if let Some(partitions) = options.partitions {
        let results = client
            .create_topics(&[(options.topic.as_str(), partitions, -1, &[])])
            .await
            .map_err(|e| format!("creating topic {}: {e}", options.topic))?;
        for (name, result) in results {
            if let Err(e) = result {
                let exists = e
                    .code()
                    .is_some_and(|c| c == crate::protocol::error::ErrorCode::TOPIC_ALREADY_EXISTS);
                if !exists {
                    return Err(format!("creating topic {name}: {e}"));
                }
            }
        }
    }
    let config = ProducerConfig {
        client: client_config(&options),
        acks: options.acks,
        linger_ms: options.linger_ms,
        batch_size: options.batch_size,
        buffer_memory: options.buffer_memory,
        compression: options.compression,
        enable_idempotence: options.idempotence.unwrap_or(options.acks == -1),
        max_request_size: options.batch_size.max(1_048_576),
        ..ProducerConfig::default()
    };
    let producer = Producer::new(config).await.map_err(|e| e.to_string())?;
    let mut rng = crate::rt::rand::small_rng();
    let payload: Bytes = (0..options.record_size)
        .map(|_| rng.gen_range(b'A'..=b'Z'))
        .collect::<Vec<u8>>()
        .into();
    let clock = Clock::new();
    let histogram = Arc::new(Histogram::default());
    let progress = Arc::new(Progress::default());
    let done = Arc::new(AtomicBool::new(false));
    let reporter = crate::rt::task::spawn(report_progress(
        progress.clone(),
        Some(histogram.clone()),
        done.clone(),
    ));
    let first_error: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let start = now();
    let record_bytes = options.record_size as u64;
    for sent in 0..options.num_records {
        if options.throughput > 0 {
            // Sleep when ahead of the schedule `sent / throughput` seconds after the start.
            let due = start + Duration::from_secs_f64(sent as f64 / options.throughput as f64);
            let at = now();
            if due > at {
                crate::rt::time::sleep(due - at).await;
            }
        }
        let record = ProducerRecord {
            key: None,
            value: Some(payload.clone()),
            headers: Vec::new(),
            timestamp: clock.now_ms(),
        };
        let sent_at: Instant = now();
        let (histogram, progress, first_error) =
            (histogram.clone(), progress.clone(), first_error.clone());
        let callback = Box::new(move |result: crate::client::DeliveryResult| {
            let us = u64::try_from(now().duration_since(sent_at).as_micros()).unwrap_or(u64::MAX);
            match result {
                Ok(_) => {
                    histogram.record(us);
                    progress.records.fetch_add(1, Ordering::Relaxed);
                    progress.bytes.fetch_add(record_bytes, Ordering::Relaxed);
                }
                Err(e) => {
                    progress.errors.fetch_add(1, Ordering::Relaxed);
                    let mut slot = first_error
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if slot.is_none() {
                        *slot = Some(e.to_string());
                    }
                }
            }
        });
        producer
            .send_with_callback(&options.topic, None, record, callback)
            .await
            .map_err(|e| format!("record {sent}: {e}"))?;
    }
    producer.close().await;
    let elapsed = now().duration_since(start).as_secs_f64().max(1e-9);
    done.store(true, Ordering::Relaxed);
    reporter.abort();
    let acked = histogram.count();
    let errors = progress.errors.load(Ordering::Relaxed);
    let ms = |us: u64| us as f64 / 1000.0;
    let rate = acked as f64 / elapsed;
    let mb = rate * options.record_size as f64 / 1_048_576.0;
    let (p50, p99, p999) = (
        ms(histogram.percentile_us(0.50)),
        ms(histogram.percentile_us(0.99)),
        ms(histogram.percentile_us(0.999)),
    );
    let (avg, max) = (histogram.mean_us() / 1000.0, ms(histogram.max_us()));
    if let Some(e) = first_error
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .as_ref()
    {
        eprintln!("samsa perf: {errors} records failed; the first: {e}");
    }
    let summary = if options.json {
        format!(
            "{{\"command\":\"produce\",\"topic\":{},\"records\":{acked},\"errors\":{errors},\"record_size\":{},\"elapsed_s\":{elapsed:.3},\"records_per_s\":{rate:.1},\"mb_per_s\":{mb:.3},\"latency_ms\":{{\"avg\":{avg:.3},\"p50\":{p50:.3},\"p99\":{p99:.3},\"p99_9\":{p999:.3},\"max\":{max:.3}}}}}",
            json_string(&options.topic),
            options.record_size
        )
    } else {
        format!(
            "{acked} records sent, {rate:.1} records/sec ({mb:.2} MB/sec), {avg:.2} ms avg latency, {max:.2} ms max latency, {p50:.2} ms 50th, {p99:.2} ms 99th, {p999:.2} ms 99.9th, {errors} errors."
        )
    };
    if errors > 0 {
        return Err(format!("{summary}\n{errors} records failed"));
    }
    Ok(summary)
}

async fn run_consume(options: Options) -> Result<String, String> {
    let mut client = Client::new(ClientConfig {
        allow_auto_topic_creation: false,
        ..client_config(&options)
    });
    let meta = client
        .metadata(&[options.topic.as_str()])
        .await
        .map_err(|e| format!("metadata of {}: {e}", options.topic))?;
    let partitions: Vec<i32> = meta
        .get(&options.topic)
        .filter(|t| t.error == crate::protocol::error::ErrorCode::NONE)
        .map(|t| t.partitions.keys().copied().collect())
        .ok_or_else(|| format!("topic {} does not exist", options.topic))?;
    // Where each partition starts and ends now: the run stops at these ends if the topic
    // holds fewer than --num-records records.
    let mut cursors: Vec<(i32, i64, i64)> = Vec::new();
    for &p in &partitions {
        let (start, _) = client
            .list_offsets(&options.topic, p, -2)
            .await
            .map_err(|e| e.to_string())?;
        let (end, _) = client
            .list_offsets(&options.topic, p, -1)
            .await
            .map_err(|e| e.to_string())?;
        cursors.push((p, start, end));
    }
    let fetch = FetchOptions {
        max_wait_ms: 100,
        min_bytes: 1,
        max_bytes: options.fetch_max_bytes,
        partition_max_bytes: options.fetch_max_bytes,
        isolation_level: 0,
    };
    let progress = Arc::new(Progress::default());
    let done = Arc::new(AtomicBool::new(false));
    let reporter = crate::rt::task::spawn(report_progress(progress.clone(), None, done.clone()));
    let start = now();
    let mut records = 0u64;
    let mut bytes = 0u64;
    let mut fetches = 0u64;
    while records < options.num_records && cursors.iter().any(|(_, at, end)| at < end) {
        for (p, at, end) in cursors.iter_mut() {
            if *at >= *end || records >= options.num_records {
                continue;
            }
            let fetched = client
                .fetch(&options.topic, *p, *at, fetch)
                .await
                .map_err(|e| format!("fetch {}-{p} at {at}: {e}", options.topic))?;
            fetches += 1;
            if fetched.error != crate::protocol::error::ErrorCode::NONE {
                return Err(format!(
                    "fetch {}-{p} at {at}: {}",
                    options.topic, fetched.error
                ));
            }
            for record in client.records(&options.topic, *p, &fetched, *at) {
                let record = record.map_err(|e| e.to_string())?;
                *at = record.offset + 1;
                records += 1;
                let len = record.value.as_ref().map_or(0, Bytes::len)
                    + record.key.as_ref().map_or(0, Bytes::len);
                bytes += len as u64;
                if records >= options.num_records {
                    break;
                }
            }
            progress.records.store(records, Ordering::Relaxed);
            progress.bytes.store(bytes, Ordering::Relaxed);
        }
    }
    let elapsed = now().duration_since(start).as_secs_f64().max(1e-9);
    done.store(true, Ordering::Relaxed);
    reporter.abort();
    let rate = records as f64 / elapsed;
    let mb = bytes as f64 / elapsed / 1_048_576.0;
    Ok(if options.json {
        format!(
            "{{\"command\":\"consume\",\"topic\":{},\"records\":{records},\"bytes\":{bytes},\"fetches\":{fetches},\"elapsed_s\":{elapsed:.3},\"records_per_s\":{rate:.1},\"mb_per_s\":{mb:.3}}}",
            json_string(&options.topic)
        )
    } else {
        format!(
            "{records} records consumed ({:.2} MB) in {elapsed:.2} s: {rate:.1} records/sec ({mb:.2} MB/sec), {fetches} fetches.",
            bytes as f64 / 1_048_576.0
        )
    })
}

/// A group member stops after this long without a record (its partitions may hold fewer than
/// `--num-records`).
pub const GROUP_IDLE_STOP_MS: u64 = 10_000;

async fn run_consume_group(options: Options) -> Result<String, String> {
    use crate::client::group::assignor::Assignor;
    use crate::client::group::consumer::{GroupConsumer, GroupConsumerConfig, OffsetReset};
    use crate::client::group::member::MemberConfig;

    let group = options.group.clone().unwrap_or_default();
    let config = GroupConsumerConfig {
        client: ClientConfig {
            allow_auto_topic_creation: false,
            ..client_config(&options)
        },
        member: MemberConfig {
            group_id: group.clone(),
            session_timeout_ms: 10_000,
            heartbeat_interval_ms: 1_000,
            rebalance_timeout_ms: 30_000,
            assignors: vec![Assignor::Range],
            ..MemberConfig::default()
        },
        enable_auto_commit: true,
        auto_commit_interval_ms: 1_000,
        auto_offset_reset: OffsetReset::Earliest,
        fetch: FetchOptions {
            max_wait_ms: 100,
            min_bytes: 1,
            max_bytes: options.fetch_max_bytes,
            partition_max_bytes: options.fetch_max_bytes,
            isolation_level: 0,
        },
    };
    let mut consumer =
        GroupConsumer::new(config, &[options.topic.as_str()]).map_err(|e| e.to_string())?;
    let progress = Arc::new(Progress::default());
    let done = Arc::new(AtomicBool::new(false));
    let reporter = crate::rt::task::spawn(report_progress(progress.clone(), None, done.clone()));
    let start = now();
    let mut first: Option<Instant> = None;
    let mut last = start;
    // Wall-clock times of the first and last record, for adding up several member
    // processes (their monotonic clocks are not comparable).
    let wall = Clock::new();
    let (mut first_wall_ms, mut last_wall_ms) = (0i64, 0i64);
    let (mut records, mut bytes, mut polls) = (0u64, 0u64, 0u64);
    while records < options.num_records {
        let polled = consumer.poll().await.map_err(|e| format!("poll: {e}"))?;
        polls += 1;
        if polled.is_empty() {
            if now().duration_since(last) >= Duration::from_millis(GROUP_IDLE_STOP_MS) {
                break;
            }
            continue;
        }
        last = now();
        last_wall_ms = wall.now_ms();
        if first.is_none() {
            first = Some(last);
            first_wall_ms = last_wall_ms;
        }
        for r in &polled {
            records += 1;
            bytes += (r.record.value.as_ref().map_or(0, Bytes::len)
                + r.record.key.as_ref().map_or(0, Bytes::len)) as u64;
        }
        progress.records.store(records, Ordering::Relaxed);
        progress.bytes.store(bytes, Ordering::Relaxed);
    }
    let partitions = consumer.assignment().len();
    consumer.close().await.map_err(|e| format!("close: {e}"))?;
    done.store(true, Ordering::Relaxed);
    reporter.abort();
    let first = first.unwrap_or(last);
    let join_s = first.duration_since(start).as_secs_f64();
    let elapsed = last.duration_since(first).as_secs_f64().max(1e-9);
    let rate = records as f64 / elapsed;
    let mb = bytes as f64 / elapsed / 1_048_576.0;
    Ok(if options.json {
        format!(
            "{{\"command\":\"consume\",\"topic\":{},\"group\":{},\"partitions\":{partitions},\"records\":{records},\"bytes\":{bytes},\"polls\":{polls},\"join_s\":{join_s:.3},\"elapsed_s\":{elapsed:.3},\"records_per_s\":{rate:.1},\"mb_per_s\":{mb:.3},\"first_record_wall_ms\":{first_wall_ms},\"last_record_wall_ms\":{last_wall_ms}}}",
            json_string(&options.topic),
            json_string(&group)
        )
    } else {
        format!(
            "{records} records consumed ({:.2} MB) as a member of {group} ({partitions} partitions) in {elapsed:.2} s after joining in {join_s:.2} s: {rate:.1} records/sec ({mb:.2} MB/sec), {polls} polls.",
            bytes as f64 / 1_048_576.0
        )
    })
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A command line split on white space.
    pub(in crate::cli) fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn cli_perf_histogram_percentiles_are_bucket_exact() {
        let h = Histogram::default();
        for us in 1..=1000 {
            h.record(us);
        }
        h.record(250_000);
        assert_eq!(h.count(), 1001);
        assert_eq!(h.percentile_us(0.5), 501);
        assert_eq!(h.percentile_us(0.99), 991);
        assert_eq!(h.percentile_us(1.0), 250_000);
        assert_eq!(h.max_us(), 250_000);
        // Beyond the coarse buckets: the overflow bucket, reported as the max.
        h.record(u64::MAX / 4);
        assert_eq!(h.percentile_us(1.0), u64::MAX / 4);
    }

    #[test]
    fn cli_perf_parses_options_and_refuses_bad_ones() {
        let o = parse_options(
            &args("--topic t --num-records 10 --record-size 100 --throughput 10000 --acks all --compression lz4 --partitions 3 --json"),
            true,
        );
        let o = o.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (
                o.num_records,
                o.record_size,
                o.throughput,
                o.acks,
                o.compression,
                o.partitions,
                o.json
            ),
            (10, 100, 10_000, -1, Compression::Lz4, Some(3), true)
        );
        assert!(parse_options(&args("--topic t --num-records 10"), true)
            .unwrap_err()
            .contains("--record-size"));
        assert!(
            parse_options(&args("--topic t --num-records 10 --record-size 5"), false)
                .unwrap_err()
                .contains("--record-size")
        );
        assert!(
            parse_options(&args("--topic t --num-records x --record-size 5"), true)
                .unwrap_err()
                .contains("'x'")
        );
        assert_eq!(json_string("a\"b\\\n"), "\"a\\\"b\\\\\\u000a\"");
        // Several bootstrap servers, as Kafka's tools take them; a bad one is named.
        let o = parse_options(
            &args("--bootstrap-server h1:9092,h2:9093 --topic t --num-records 1 --record-size 1"),
            true,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(o.bootstrap, ["h1:9092", "h2:9093"]);
        assert!(parse_options(
            &args("--bootstrap-server h1 --topic t --num-records 1 --record-size 1"),
            true
        )
        .unwrap_err()
        .contains("'h1'"));
    }
}
