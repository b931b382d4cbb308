//! kcat (Debian's 1.7.1, linking librdkafka 2.0.2: an older client than the `rdkafka` crate's)
//! against the real `samsa broker` binary.
//!
//! | test | what it checks |
//! | --- | --- |
//! | `kcat_round_trip_{uncompressed,gzip,snappy,lz4,zstd}` | keyed records with headers produced with `-P -K: -H .. -z codec -X acks=all` into an auto-created topic, read back with `-C -e -o beginning -f ..`; stored codecs; `-Q` offsets by timestamp |
//! | `kcat_lists_metadata` | `-L`: the broker at its listener's address, a topic's partitions and leaders |
//! | `kcat_group_consumes_every_record` | `-G group topic -e` (balanced consumer) reads every record of a three-partition topic once |
//! | `kcat_group_resumes_where_the_previous_run_committed` | a `-G` run stopped by `-c` commits as it closes; the next `-G` run of the group resumes exactly there |
//!
//! The group tests use `session.timeout.ms=6000`, `heartbeat.interval.ms=1000` and a broker
//! with `group.initial.rebalance.delay.ms=100`.
//!
//! Skipped with a notice when kcat is not installed, unless `SAMSA_REQUIRE_CLIENTS=1`.
//! The broker binary cannot run in a simulation build, so these tests exist only without the
//! `sim` feature.
#![cfg(not(feature = "sim"))]

#[path = "support/broker_process.rs"]
mod broker_process;
#[path = "support/kcat.rs"]
mod kcat;
#[path = "support/segment_files.rs"]
mod segment_files;

use broker_process::BrokerProcess;
use kcat::{args, kcat_or_skip, run_kcat};
use segment_files::{codec_id, stored_batch_codecs};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Records per codec.
const RECORDS: usize = 10_000;
/// Partitions of every auto-created topic (the broker's num.partitions).
const PARTITIONS: usize = 3;
/// Every this many records, the value is empty, which `-Z` sends as null.
const NULL_VALUE_EVERY: usize = 997;

#[allow(clippy::disallowed_methods)] // bounds for the timestamps kcat's producer assigns
fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970");
    i64::try_from(since.as_millis()).expect("milliseconds fit in i64")
}

fn key(i: usize) -> String {
    format!("k{}", i % 97)
}

/// The value of record `i`, or `None` for a null value. Values carry their sequence number
/// and never contain the separators `:` (key), `|` (output format) or a newline.
fn value(codec: &str, i: usize) -> Option<String> {
    if i % NULL_VALUE_EVERY == NULL_VALUE_EVERY - 1 {
        return None;
    }
    let filler: String = (0..i % 53)
        .map(|j| char::from(b'a' + ((i * 7 + j) % 26) as u8))
        .collect();
    Some(format!("{codec}-v{i:05}-{filler}"))
}

/// The sequence number in a value written by [`value`].
fn seq_of(value: &str) -> Option<usize> {
    value
        .split('-')
        .nth(1)
        .and_then(|v| v.strip_prefix('v'))
        .and_then(|v| v.parse().ok())
}

fn start_broker() -> BrokerProcess {
    BrokerProcess::start_with(&[
        ("auto.create.topics.enable", "true"),
        ("num.partitions", "3"),
    ])
}

/// One line of `-f '%p|%o|%k|%S|%s|%T|%h\n'`.
#[derive(Debug)]
struct Line {
    partition: usize,
    offset: i64,
    key: String,
    value_len: i64,
    value: String,
    timestamp_ms: i64,
    headers: String,
}

const FORMAT: &str = "%p|%o|%k|%S|%s|%T|%h\\n";

fn parse_lines(stdout: &str) -> Vec<Line> {
    stdout
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.splitn(7, '|').collect();
            assert_eq!(f.len(), 7, "unexpected kcat output line: {l:?}");
            let num = |s: &str| -> i64 {
                s.parse()
                    .unwrap_or_else(|e| panic!("bad number {s:?} in {l:?}: {e}"))
            };
            Line {
                partition: usize::try_from(num(f[0])).expect("partition >= 0"),
                offset: num(f[1]),
                key: f[2].to_string(),
                value_len: num(f[3]),
                value: f[4].to_string(),
                timestamp_ms: num(f[5]),
                headers: f[6].to_string(),
            }
        })
        .collect()
}

fn write_input(dir: &Path, codec: &str, records: usize) -> std::path::PathBuf {
    let mut input = String::new();
    for i in 0..records {
        input.push_str(&key(i));
        input.push(':');
        input.push_str(value(codec, i).as_deref().unwrap_or(""));
        input.push('\n');
    }
    let path = dir.join(format!("input-{codec}.txt"));
    #[allow(clippy::disallowed_methods)] // a test's scratch file
    std::fs::write(&path, input).expect("write kcat's input");
    path
}

fn round_trip(codec: &str) {
    let test = format!("interop_kcat round trip {codec}");
    let Some(kcat) = kcat_or_skip(&test) else {
        return;
    };
    let broker = start_broker();
    let bootstrap = broker.bootstrap();
    let topic = format!("kcat-{codec}");
    let work = broker.dir().to_path_buf();
    let input = write_input(&work, codec, RECORDS);

    let before_ms = now_ms();
    let tag = format!("tag={codec}");
    let produce = args(
        &bootstrap,
        &[
            "-P",
            "-t",
            &topic,
            "-K:",
            "-Z",
            "-H",
            &tag,
            "-H",
            "source=kcat",
            "-z",
            codec,
            "-X",
            "acks=all",
            "-X",
            "linger.ms=10",
        ],
    );
    let run = run_kcat(&kcat, &work, &produce, Some(&input));
    run.assert_success();
    assert!(
        !run.stderr.contains("ERROR") && !run.stderr.contains("failed"),
        "kcat reported errors while producing:\n{}",
        run.stderr
    );
    let after_ms = now_ms();

    let consume = args(
        &bootstrap,
        &[
            "-C",
            "-t",
            &topic,
            "-e",
            "-o",
            "beginning",
            "-Z",
            "-X",
            "check.crcs=true",
            "-f",
            FORMAT,
        ],
    );
    let run = run_kcat(&kcat, &work, &consume, None);
    run.assert_success();
    let lines = parse_lines(&run.stdout_text());
    assert_eq!(
        lines.len(),
        RECORDS,
        "{topic}: kcat read {} records of {RECORDS}; stderr:\n{}",
        lines.len(),
        run.stderr
    );

    let expected_headers = format!("tag={codec},source=kcat");
    let mut seen = BTreeSet::new();
    let mut partition_of_key: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_partition: BTreeMap<usize, Vec<&Line>> = BTreeMap::new();
    for l in &lines {
        assert!(
            l.partition < PARTITIONS,
            "{topic}: partition {}",
            l.partition
        );
        if l.value_len < 0 {
            assert_eq!(
                l.value, "NULL",
                "{topic}: null value printed as {:?}",
                l.value
            );
        } else {
            let s = seq_of(&l.value)
                .unwrap_or_else(|| panic!("{topic}: unexpected value {:?}", l.value));
            assert_eq!(
                Some(l.value.as_str()),
                value(codec, s).as_deref(),
                "{topic}: value of record {s}"
            );
            assert_eq!(l.value_len as usize, l.value.len());
            assert_eq!(l.key, key(s), "{topic}: key of record {s}");
            assert!(seen.insert(s), "{topic}: record {s} read twice");
        }
        assert_eq!(
            l.headers, expected_headers,
            "{topic}: headers at offset {}",
            l.offset
        );
        assert!(
            (before_ms..=after_ms).contains(&l.timestamp_ms),
            "{topic}: timestamp {} outside the produce call [{before_ms}, {after_ms}]",
            l.timestamp_ms
        );
        let p = *partition_of_key.entry(l.key.clone()).or_insert(l.partition);
        assert_eq!(
            p, l.partition,
            "{topic}: key {} is in partitions {p} and {}",
            l.key, l.partition
        );
        by_partition.entry(l.partition).or_default().push(l);
    }
    let nulls = lines.iter().filter(|l| l.value_len < 0).count();
    assert_eq!(nulls, RECORDS / NULL_VALUE_EVERY, "{topic}: null values");
    assert_eq!(seen.len() + nulls, RECORDS);
    assert_eq!(
        by_partition.len(),
        PARTITIONS,
        "{topic}: the keys should spread over every partition"
    );
    for (p, ls) in &by_partition {
        let mut last_seq = None;
        for (i, l) in ls.iter().enumerate() {
            assert_eq!(
                l.offset, i as i64,
                "{topic} partition {p}: offsets not dense from 0"
            );
            if l.value_len >= 0 {
                let s = l.value.split('-').nth(1).map(str::to_string);
                if let (Some(prev), Some(s)) = (last_seq.clone(), s.clone()) {
                    assert!(
                        s > prev,
                        "{topic} partition {p}: {s} after {prev} (production order broken)"
                    );
                }
                last_seq = s;
            }
        }
    }

    let codecs = stored_batch_codecs(broker.data_dir(), &topic);
    assert!(!codecs.is_empty(), "{topic}: no stored batch found");
    // librdkafka sends a batch uncompressed when compressing it would not make it smaller
    // (a batch of one or two records under a burst), so a few plain batches are allowed;
    // what the broker must never do is re-encode: every other batch keeps the client's codec.
    assert!(
        codecs.iter().any(|&c| c == codec_id(codec)),
        "{topic}: no stored batch uses codec {}",
        codec_id(codec)
    );
    assert!(
        codecs.iter().all(|&c| c == codec_id(codec) || c == 0),
        "{topic}: stored batch codecs {:?}, expected {} (or none)",
        codecs.iter().collect::<BTreeSet<_>>(),
        codec_id(codec)
    );

    // -Q: the offset of partition 0's first record at or after a timestamp in the middle.
    let p0 = by_partition.get(&0).expect("partition 0 has records");
    let target = p0[p0.len() / 2].timestamp_ms;
    let want = p0
        .iter()
        .find(|l| l.timestamp_ms >= target)
        .map(|l| l.offset)
        .expect("a record at or after the target");
    let query = format!("{topic}:0:{target}");
    let run = run_kcat(&kcat, &work, &args(&bootstrap, &["-Q", "-t", &query]), None);
    run.assert_success();
    let expected_line = format!("{topic} [0] offset {want}");
    assert!(
        run.stdout_text().lines().any(|l| l.trim() == expected_line),
        "kcat -Q {query}: expected {expected_line:?}, got:\n{}\nstderr:\n{}",
        run.stdout_text(),
        run.stderr
    );
}

#[test]
fn kcat_round_trip_uncompressed() {
    round_trip("none");
}

#[test]
fn kcat_round_trip_gzip() {
    round_trip("gzip");
}

#[test]
fn kcat_round_trip_snappy() {
    round_trip("snappy");
}

#[test]
fn kcat_round_trip_lz4() {
    round_trip("lz4");
}

#[test]
fn kcat_round_trip_zstd() {
    round_trip("zstd");
}

/// `kcat -L`: the broker lists itself at its listener's address, and an auto-created topic
/// with its partitions, each led by that broker.
#[test]
fn kcat_lists_metadata() {
    let Some(kcat) = kcat_or_skip("interop_kcat metadata") else {
        return;
    };
    let broker = start_broker();
    let bootstrap = broker.bootstrap();
    let work = broker.dir().to_path_buf();
    let input = work.join("one.txt");
    #[allow(clippy::disallowed_methods)] // a test's scratch file
    std::fs::write(&input, "k:v\n").expect("write input");
    run_kcat(
        &kcat,
        &work,
        &args(&bootstrap, &["-P", "-t", "listed", "-K:", "-X", "acks=all"]),
        Some(&input),
    )
    .assert_success();

    let run = run_kcat(&kcat, &work, &args(&bootstrap, &["-L"]), None);
    run.assert_success();
    let text = run.stdout_text();
    let broker_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("broker ") && l.contains(" at "))
        .unwrap_or_else(|| panic!("no broker line in kcat -L:\n{text}"));
    assert!(
        broker_line.contains(&format!("at {bootstrap}")),
        "the broker should advertise its listener {bootstrap}: {broker_line:?}"
    );
    let id: i32 = broker_line
        .trim_start()
        .trim_start_matches("broker ")
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("broker id in {broker_line:?}"));
    assert!(
        text.contains("topic \"listed\" with 3 partitions:"),
        "kcat -L:\n{text}"
    );
    for p in 0..3 {
        let want = format!("partition {p}, leader {id}, replicas: {id}, isrs: {id}");
        assert!(
            text.lines().any(|l| l.trim() == want),
            "expected {want:?} in kcat -L:\n{text}"
        );
    }
}

/// Records of each `kcat -G` test.
const GROUP_RECORDS: usize = 3_000;
/// Records the first `kcat -G` run of the resume test reads (`-c`) before it exits.
const GROUP_FIRST_RUN_RECORDS: usize = 1_000;
/// The value tag of the group tests' records (they are produced uncompressed).
const GROUP_TAG: &str = "group";

/// A broker for the group tests: auto-created topics of `PARTITIONS` partitions, and a short
/// initial rebalance delay (Kafka's 3 s would hold every fresh group that long).
fn start_group_broker() -> BrokerProcess {
    BrokerProcess::start_with(&[
        ("auto.create.topics.enable", "true"),
        ("num.partitions", "3"),
        ("group.initial.rebalance.delay.ms", "100"),
    ])
}

/// What a kcat group test runs against.
struct GroupTest {
    kcat: PathBuf,
    broker: BrokerProcess,
    bootstrap: String,
    work: PathBuf,
}

/// Starts a group broker and produces `GROUP_RECORDS` keyed records into `topic`
/// (auto-created) with `kcat -P`; `None` when kcat is missing (the test is skipped).
fn group_test(test: &str, topic: &str) -> Option<GroupTest> {
    let kcat = kcat_or_skip(test)?;
    let broker = start_group_broker();
    let bootstrap = broker.bootstrap();
    let work = broker.dir().to_path_buf();
    let input = write_input(&work, GROUP_TAG, GROUP_RECORDS);
    let produce = args(
        &bootstrap,
        &[
            "-P",
            "-t",
            topic,
            "-K:",
            "-Z",
            "-X",
            "acks=all",
            "-X",
            "linger.ms=10",
        ],
    );
    run_kcat(&kcat, &work, &produce, Some(&input)).assert_success();
    Some(GroupTest {
        kcat,
        broker,
        bootstrap,
        work,
    })
}

/// `kcat -G group topic` (the balanced consumer, which commits what it consumed) with
/// issue 11's session settings and `extra` options. A group without committed offsets starts
/// at the beginning through `auto.offset.reset`: kcat's own `-o` would override the committed
/// offsets on every assignment.
fn group_consume(
    kcat: &Path,
    work: &Path,
    bootstrap: &str,
    group: &str,
    topic: &str,
    extra: &[&str],
) -> Vec<Line> {
    let mut a = args(
        bootstrap,
        &[
            "-G",
            group,
            "-X",
            "auto.offset.reset=earliest",
            "-X",
            "session.timeout.ms=6000",
            "-X",
            "heartbeat.interval.ms=1000",
            "-X",
            "check.crcs=true",
            "-Z",
            "-f",
            FORMAT,
        ],
    );
    a.extend(extra.iter().map(|s| s.to_string()));
    a.push(topic.to_string());
    let run = run_kcat(kcat, work, &a, None);
    run.assert_success();
    assert!(
        !run.stderr.contains("ERROR"),
        "kcat -G reported errors:\n{}",
        run.stderr
    );
    parse_lines(&run.stdout_text())
}

/// Adds `lines` to `read` (position to sequence number, `None` for a null value), checking
/// each value and that no position is read twice.
fn add_group_lines(topic: &str, read: &mut BTreeMap<(usize, i64), Option<usize>>, lines: &[Line]) {
    for l in lines {
        let seq = if l.value_len < 0 {
            None
        } else {
            let s = seq_of(&l.value)
                .unwrap_or_else(|| panic!("{topic}: unexpected value {:?}", l.value));
            assert_eq!(
                Some(l.value.as_str()),
                value(GROUP_TAG, s).as_deref(),
                "{topic}: value of record {s}"
            );
            assert_eq!(l.key, key(s), "{topic}: key of record {s}");
            Some(s)
        };
        let at = (l.partition, l.offset);
        assert!(
            read.insert(at, seq).is_none(),
            "{topic}: partition {} offset {} read twice",
            l.partition,
            l.offset
        );
    }
}

/// Every record of `produce_group_records` was read once: each partition densely from 0,
/// over all `PARTITIONS`, every sequence number once.
fn assert_every_group_record(topic: &str, read: &BTreeMap<(usize, i64), Option<usize>>) {
    assert_eq!(read.len(), GROUP_RECORDS, "{topic}: records read");
    let mut next: BTreeMap<usize, i64> = BTreeMap::new();
    for &(p, o) in read.keys() {
        let n = next.entry(p).or_insert(0);
        assert_eq!(o, *n, "{topic} partition {p}: offsets not dense from 0");
        *n += 1;
    }
    assert_eq!(next.len(), PARTITIONS, "{topic}: partitions read");
    let seqs: BTreeSet<usize> = read.values().flatten().copied().collect();
    let nulls = read.values().filter(|s| s.is_none()).count();
    assert_eq!(
        nulls,
        GROUP_RECORDS / NULL_VALUE_EVERY,
        "{topic}: null values"
    );
    assert_eq!(
        seqs.len() + nulls,
        GROUP_RECORDS,
        "{topic}: distinct records"
    );
}

/// `kcat -G group topic -e`: the group's only member is assigned every partition of a
/// three-partition topic and reads every record once, then exits at the end.
#[test]
fn kcat_group_consumes_every_record() {
    let topic = "kcat-group";
    let Some(GroupTest {
        kcat,
        broker: _broker,
        bootstrap,
        work,
    }) = group_test("interop_kcat group consume", topic)
    else {
        return;
    };
    let lines = group_consume(&kcat, &work, &bootstrap, "kcat-group-all", topic, &["-e"]);
    let mut read = BTreeMap::new();
    add_group_lines(topic, &mut read, &lines);
    assert_every_group_record(topic, &read);
}

/// A first `kcat -G` run reads part of a topic and exits (`-c`), committing what it consumed
/// as it closes; a second run of the same group resumes exactly there: between them, every
/// record once.
#[test]
fn kcat_group_resumes_where_the_previous_run_committed() {
    let topic = "kcat-group-resume";
    let group = "kcat-group-resume";
    let Some(GroupTest {
        kcat,
        broker: _broker,
        bootstrap,
        work,
    }) = group_test("interop_kcat group resume", topic)
    else {
        return;
    };
    let count = GROUP_FIRST_RUN_RECORDS.to_string();
    let first = group_consume(&kcat, &work, &bootstrap, group, topic, &["-c", &count]);
    assert_eq!(
        first.len(),
        GROUP_FIRST_RUN_RECORDS,
        "{topic}: the first run's records"
    );
    let mut read = BTreeMap::new();
    add_group_lines(topic, &mut read, &first);
    let mut resume_at: BTreeMap<usize, i64> = BTreeMap::new();
    for l in &first {
        let n = resume_at.entry(l.partition).or_insert(0);
        *n = (*n).max(l.offset + 1);
    }

    let second = group_consume(&kcat, &work, &bootstrap, group, topic, &["-e"]);
    let mut started_at: BTreeMap<usize, i64> = BTreeMap::new();
    for l in &second {
        started_at.entry(l.partition).or_insert(l.offset);
    }
    for (p, o) in &started_at {
        assert_eq!(
            *o,
            resume_at.get(p).copied().unwrap_or(0),
            "{topic} partition {p}: the second run started at offset {o}, the first read up to {:?}",
            resume_at.get(p)
        );
    }
    add_group_lines(topic, &mut read, &second);
    assert_every_group_record(topic, &read);
}
