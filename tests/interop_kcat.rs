//! kcat (Debian's 1.7.1, linking librdkafka 2.0.2: an older client than the `rdkafka` crate's)
//! against the real `samsa broker` binary: for every compression codec, keyed records with
//! headers produced with `-P -K: -H .. -z codec -X acks=all` into an auto-created topic, read
//! back with `-C -e -o beginning -f ..`, plus `-L` metadata and `-Q` offsets by timestamp.
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
use std::path::Path;

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

fn write_input(dir: &Path, codec: &str) -> std::path::PathBuf {
    let mut input = String::new();
    for i in 0..RECORDS {
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
    let input = write_input(&work, codec);

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
            let s: usize = l
                .value
                .split('-')
                .nth(1)
                .and_then(|v| v.strip_prefix('v'))
                .and_then(|v| v.parse().ok())
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
