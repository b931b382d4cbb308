//! `samsa produce`: the console producer. Each line of stdin (without its `\n` or `\r\n`) is
//! one record; with `--key-separator SEP` the text before the first SEP is the key.
//!
//! Lines are batched for throughput without delaying interactive input: a blocking reader
//! collects lines into a chunk while more input is already buffered, and hands the chunk over
//! as soon as the next read could block (or the chunk is full). Each chunk becomes one batch
//! per partition. Records are sent through [`crate::client::send_batch`]; switching to the
//! batching Producer changes only [`Sender`].
//!
//! Partitioning without `--partition`: a keyed record goes where the Java client sends it
//! (murmur2 of the key, positive, modulo the partition count); unkeyed records of one chunk
//! stick to one partition, the next chunk to the next (round robin from a random start).
//!
//! Failures: a line that cannot become a record (no separator, longer than
//! [`LINE_BYTES_MAX`]) and every record of a failed batch are reported on stderr by line
//! number; the tool exits non-zero if any record failed, and gives up on the rest of its
//! input after [`FAILED_BATCHES_IN_A_ROW_MAX`] failed batches in a row. Bounded memory: at most
//! [`CHUNK_QUEUE_MAX`] chunks of at most [`CHUNK_BYTES_MAX`] (plus one line) wait at a time.

use std::io::{BufRead, Read};
use std::process::ExitCode;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::common::{self, Args, CliError};
use crate::client::partitioner::partition_for_key;
use crate::client::{send_batch, Client, ProducerRecord};
use crate::protocol::error::ErrorCode;
use crate::protocol::record_batch::Compression;
use crate::rt::clock::Clock;

pub const USAGE: &str = "usage: samsa produce --topic T [options] < lines

Reads stdin; each line is one record.

  -t, --topic T                 topic to produce to (required; never auto-created)
  -p, --partition P             partition (default: by key hash, else round robin)
  -K, --key-separator SEP       the text before the first SEP of each line is the key
  -H, --header k=v              a header on every record (repeatable)
      --acks 0|1|all            acknowledgement to wait for (default all)
  -z, --compression CODEC       none, gzip, snappy, lz4 or zstd (default none)
      --timeout-ms MS           how long the broker may wait for acks=all (default 30000)
  -b, --bootstrap-server HOST:PORT[,HOST:PORT]   (default 127.0.0.1:9092)";

/// The longest line taken as a record; a longer one is reported and skipped.
pub const LINE_BYTES_MAX: usize = 1024 * 1024;
/// A chunk is handed over once it holds this many bytes of lines ...
pub const CHUNK_BYTES_MAX: usize = 256 * 1024;
/// ... or this many lines.
pub const CHUNK_LINES_MAX: usize = 8192;
/// The stdin read buffer.
pub const STDIN_BUFFER_BYTES: usize = 64 * 1024;
/// Chunks read ahead of the sender.
pub const CHUNK_QUEUE_MAX: usize = 4;
/// Batches failing in a row (each after the client's own retries) before the tool gives up
/// on the rest of its input: the broker is gone or refuses everything.
pub const FAILED_BATCHES_IN_A_ROW_MAX: u32 = 5;
/// How long the broker may wait for acks=all, unless `--timeout-ms` says otherwise.
pub const PRODUCE_TIMEOUT_MS_DEFAULT: i32 = 30_000;

/// The parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub bootstrap: Vec<String>,
    pub topic: String,
    pub partition: Option<i32>,
    pub key_separator: Option<Vec<u8>>,
    pub headers: Vec<(String, Bytes)>,
    pub acks: i16,
    pub compression: Compression,
    pub timeout_ms: i32,
}

pub fn parse_compression(value: &str) -> Result<Compression, CliError> {
    Ok(match value {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => {
            return Err(CliError::Usage(format!(
                "--compression: '{other}' is not one of none, gzip, snappy, lz4, zstd"
            )))
        }
    })
}

pub fn parse_acks(value: &str) -> Result<i16, CliError> {
    match value {
        "0" => Ok(0),
        "1" => Ok(1),
        "all" | "-1" => Ok(-1),
        other => Err(CliError::Usage(format!(
            "--acks: '{other}' is not one of 0, 1, all"
        ))),
    }
}

pub fn parse_args(args: &[String]) -> Result<Parsed, CliError> {
    let mut bootstrap = common::bootstrap_list(common::BOOTSTRAP_DEFAULT)?;
    let mut topic = None;
    let mut partition = None;
    let mut key_separator = None;
    let mut headers = Vec::new();
    let mut acks = -1;
    let mut compression = Compression::None;
    let mut timeout_ms = PRODUCE_TIMEOUT_MS_DEFAULT;
    let mut scan = Args::new(args);
    while let Some((name, inline)) = scan.next_flag()? {
        match name {
            n if common::is_bootstrap_flag(n) => {
                bootstrap = common::bootstrap_list(scan.value(name, inline)?)?;
            }
            "--topic" | "-t" => topic = Some(scan.value(name, inline)?.to_owned()),
            "--partition" | "-p" => partition = Some(scan.partition(name, inline)?),
            "--key-separator" | "-K" => {
                let sep = scan.value(name, inline)?;
                if sep.is_empty() {
                    return Err(CliError::Usage(format!("{name} must not be empty")));
                }
                key_separator = Some(sep.as_bytes().to_vec());
            }
            "--header" | "-H" => {
                let (k, v) = common::key_value(name, scan.value(name, inline)?)?;
                headers.push((k.to_owned(), Bytes::copy_from_slice(v.as_bytes())));
            }
            "--acks" => acks = parse_acks(scan.value(name, inline)?)?,
            "--compression" | "-z" => compression = parse_compression(scan.value(name, inline)?)?,
            "--timeout-ms" => timeout_ms = scan.number(name, inline)?,
            other => return Err(CliError::Usage(format!("unknown option '{other}'"))),
        }
    }
    let topic = common::required_topic(topic)?;
    Ok(Parsed {
        bootstrap,
        topic,
        partition,
        key_separator,
        headers,
        acks,
        compression,
        timeout_ms,
    })
}

pub fn main(args: &[String]) -> ExitCode {
    common::tool_main("produce", USAGE, args, parse_args, run)
}

/// One line of input, numbered from 1.
#[derive(Debug)]
enum Input {
    Line { number: u64, bytes: Vec<u8> },
    TooLong { number: u64 },
}

/// Reads stdin into chunks; see the module docs. Runs on a blocking thread and ends at EOF,
/// on a read error (sent as the last item), or when the receiver is gone.
fn read_stdin(tx: mpsc::Sender<Result<Vec<Input>, std::io::Error>>) {
    // Our own buffer, not the locked stdin's, because its fill level is what tells whether
    // more input is already there.
    let mut reader = std::io::BufReader::with_capacity(STDIN_BUFFER_BYTES, std::io::stdin());
    let mut chunk: Vec<Input> = Vec::new();
    let mut chunk_bytes = 0usize;
    let mut number = 0u64;
    loop {
        let mut line = Vec::new();
        // One more byte than the limit tells a line at the limit from a longer one.
        let limit = (LINE_BYTES_MAX + 2) as u64;
        let read = match (&mut reader).take(limit).read_until(b'\n', &mut line) {
            Ok(n) => n,
            Err(e) => {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        };
        if read == 0 {
            break;
        }
        number += 1;
        let ended = line.last() == Some(&b'\n');
        if ended {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        if line.len() > LINE_BYTES_MAX {
            // Skip the rest of the line.
            if !ended {
                let mut rest = Vec::new();
                loop {
                    rest.clear();
                    match (&mut reader).take(64 * 1024).read_until(b'\n', &mut rest) {
                        Ok(0) => break,
                        Ok(_) if rest.last() == Some(&b'\n') => break,
                        Ok(_) => continue,
                        Err(e) => {
                            let _ = tx.blocking_send(Err(e));
                            return;
                        }
                    }
                }
            }
            chunk.push(Input::TooLong { number });
        } else {
            chunk_bytes += line.len();
            chunk.push(Input::Line {
                number,
                bytes: line,
            });
        }
        let more_buffered = !reader.buffer().is_empty();
        if chunk_bytes >= CHUNK_BYTES_MAX || chunk.len() >= CHUNK_LINES_MAX || !more_buffered {
            chunk_bytes = 0;
            if tx.blocking_send(Ok(std::mem::take(&mut chunk))).is_err() {
                return;
            }
        }
    }
    if !chunk.is_empty() {
        let _ = tx.blocking_send(Ok(chunk));
    }
}

/// Turns a line into a record, or says why it cannot be one.
fn record_of(
    line: Vec<u8>,
    separator: Option<&[u8]>,
    headers: &[(String, Bytes)],
    timestamp: i64,
) -> Result<ProducerRecord, String> {
    let (key, value) = match separator {
        None => (None, Bytes::from(line)),
        Some(sep) => {
            let at = line
                .windows(sep.len())
                .position(|w| w == sep)
                .ok_or_else(|| {
                    format!(
                        "no key separator '{}' in the line",
                        String::from_utf8_lossy(sep)
                    )
                })?;
            let mut line = Bytes::from(line);
            let value = line.split_off(at + sep.len());
            line.truncate(at);
            (Some(line), value)
        }
    };
    Ok(ProducerRecord {
        key,
        value: Some(value),
        headers: headers
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect(),
        timestamp,
    })
}

/// Sends one partition's records; the only place that knows how records reach the broker.
struct Sender<'a> {
    client: &'a mut Client,
    topic: &'a str,
    compression: Compression,
    acks: i16,
    timeout_ms: i32,
}

impl Sender<'_> {
    async fn send(
        &mut self,
        partition: i32,
        records: &[ProducerRecord],
    ) -> Result<(), crate::client::ClientError> {
        send_batch(
            self.client,
            self.topic,
            partition,
            records,
            self.compression,
            self.acks,
            self.timeout_ms,
        )
        .await
        .map(|_| ())
    }
}

/// `first-last` or `n` for messages about lines.
fn line_span(numbers: &[u64]) -> String {
    match (numbers.first(), numbers.last()) {
        (Some(a), Some(b)) if a != b => format!("lines {a}-{b}"),
        (Some(a), _) => format!("line {a}"),
        _ => "no lines".into(),
    }
}

pub async fn run(parsed: Parsed) -> Result<(), CliError> {
    let mut client = common::client(&parsed.bootstrap);
    let topic = parsed.topic.as_str();
    let described = client
        .describe_topics(&[topic])
        .await
        .map_err(CliError::client(format!("looking up topic '{topic}'")))?;
    let partitions = match described.iter().find(|t| t.name == topic) {
        Some(t) if t.error == ErrorCode::NONE => {
            i32::try_from(t.partitions.len()).unwrap_or(i32::MAX)
        }
        Some(t) if t.error != ErrorCode::UNKNOWN_TOPIC_OR_PARTITION => {
            return Err(CliError::Failed(format!("topic '{topic}': {}", t.error)))
        }
        _ => return Err(CliError::Failed(format!("topic '{topic}' does not exist"))),
    };
    if partitions < 1 {
        return Err(CliError::Failed(format!(
            "topic '{topic}' has no partitions"
        )));
    }
    if let Some(p) = parsed.partition {
        if p >= partitions {
            return Err(CliError::Failed(format!(
                "topic '{topic}' has no partition {p} (it has {partitions})"
            )));
        }
    }
    let (tx, mut rx) = mpsc::channel(CHUNK_QUEUE_MAX);
    // The reader blocks on stdin; it ends at EOF, and the runtime does not wait for it if
    // the tool stops first (common::run shuts down in the background).
    let _reader = crate::rt::task::spawn_blocking(move || read_stdin(tx));
    let clock = Clock::new();
    let mut sticky = (crate::rt::rand::random_u64() % partitions as u64) as i32;
    let mut sender = Sender {
        client: &mut client,
        topic,
        compression: parsed.compression,
        acks: parsed.acks,
        timeout_ms: parsed.timeout_ms,
    };
    let mut total = 0u64;
    let mut failed = 0u64;
    let mut failed_in_a_row = 0u32;
    while let Some(chunk) = rx.recv().await {
        let chunk = chunk.map_err(|e| CliError::Failed(format!("reading stdin: {e}")))?;
        let timestamp = clock.now_ms();
        // Per partition: the records and their line numbers, in input order.
        let mut batches: std::collections::BTreeMap<i32, (Vec<ProducerRecord>, Vec<u64>)> =
            std::collections::BTreeMap::new();
        for input in chunk {
            total += 1;
            let (number, bytes) = match input {
                Input::Line { number, bytes } => (number, bytes),
                Input::TooLong { number } => {
                    failed += 1;
                    eprintln!(
                        "samsa produce: line {number} is longer than {LINE_BYTES_MAX} bytes; not sent"
                    );
                    continue;
                }
            };
            let record = match record_of(
                bytes,
                parsed.key_separator.as_deref(),
                &parsed.headers,
                timestamp,
            ) {
                Ok(record) => record,
                Err(reason) => {
                    failed += 1;
                    eprintln!("samsa produce: line {number}: {reason}; not sent");
                    continue;
                }
            };
            let partition = match (parsed.partition, record.key.as_deref()) {
                (Some(p), _) => p,
                (None, Some(key)) => partition_for_key(key, partitions),
                (None, None) => sticky,
            };
            let entry = batches.entry(partition).or_default();
            entry.0.push(record);
            entry.1.push(number);
        }
        sticky = (sticky + 1) % partitions;
        for (partition, (records, numbers)) in batches {
            match sender.send(partition, &records).await {
                Ok(()) => failed_in_a_row = 0,
                Err(e) => {
                    failed += records.len() as u64;
                    failed_in_a_row += 1;
                    eprintln!(
                        "samsa produce: {} ({} records) to {topic}-{partition} failed: {e}",
                        line_span(&numbers),
                        records.len()
                    );
                    if failed_in_a_row >= FAILED_BATCHES_IN_A_ROW_MAX {
                        return Err(CliError::Failed(format!(
                            "giving up after {failed_in_a_row} failed batches in a row; {failed} of the {total} records read were not produced, and the rest of stdin was not read"
                        )));
                    }
                }
            }
        }
    }
    tracing::debug!(total, failed, "produce finished");
    if failed > 0 {
        return Err(CliError::Failed(format!(
            "{failed} of {total} records were not produced"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Parsed, String> {
        common::parse_strs(parse_args, args)
    }

    #[test]
    fn cli_produce_parses_options() {
        let p = parse(&[
            "--topic",
            "t",
            "-p",
            "2",
            "-K",
            ":",
            "-H",
            "a=1",
            "--header=b=",
            "--acks",
            "1",
            "-z",
            "zstd",
        ])
        .unwrap();
        assert_eq!(p.topic, "t");
        assert_eq!(p.partition, Some(2));
        assert_eq!(p.key_separator.as_deref(), Some(&b":"[..]));
        assert_eq!(
            p.headers,
            vec![
                ("a".to_owned(), Bytes::from_static(b"1")),
                ("b".to_owned(), Bytes::new())
            ]
        );
        assert_eq!((p.acks, p.compression), (1, Compression::Zstd));
        let p = parse(&["-t", "t"]).unwrap();
        assert_eq!(
            (p.acks, p.compression, p.partition),
            (-1, Compression::None, None)
        );
        assert_eq!(p.timeout_ms, PRODUCE_TIMEOUT_MS_DEFAULT);
        assert_eq!(parse(&["-t", "t", "--acks", "all"]).unwrap().acks, -1);
    }

    #[test]
    fn cli_produce_refuses_bad_options_naming_them() {
        let err = |args: &[&str]| parse(args).unwrap_err();
        assert_eq!(err(&[]), "--topic is required");
        assert_eq!(
            err(&["-t", "t", "--acks", "2"]),
            "--acks: '2' is not one of 0, 1, all"
        );
        assert_eq!(
            err(&["-t", "t", "-z", "brotli"]),
            "--compression: 'brotli' is not one of none, gzip, snappy, lz4, zstd"
        );
        assert_eq!(
            err(&["-t", "t", "--partition", "-1"]),
            "--partition: -1 is negative"
        );
        assert_eq!(err(&["-t", "t", "--nope"]), "unknown option '--nope'");
        assert_eq!(err(&["-t", "t", "extra"]), "unexpected argument 'extra'");
        assert_eq!(err(&["-t", "t", "-K", ""]), "-K must not be empty");
    }

    #[test]
    fn cli_produce_splits_keys_at_the_first_separator() {
        let headers = vec![("h".to_owned(), Bytes::from_static(b"v"))];
        let r = record_of(b"k::v::w".to_vec(), Some(b"::"), &headers, 7).unwrap();
        assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(r.value.as_deref(), Some(&b"v::w"[..]));
        assert_eq!(
            r.headers,
            vec![("h".to_owned(), Some(Bytes::from_static(b"v")))]
        );
        assert_eq!(r.timestamp, 7);
        let r = record_of(b":v".to_vec(), Some(b":"), &[], 0).unwrap();
        assert_eq!(
            (r.key.as_deref(), r.value.as_deref()),
            (Some(&b""[..]), Some(&b"v"[..]))
        );
        let r = record_of(b"plain".to_vec(), None, &[], 0).unwrap();
        assert_eq!((r.key, r.value.as_deref()), (None, Some(&b"plain"[..])));
        let err = record_of(b"nokey".to_vec(), Some(b":"), &[], 0).unwrap_err();
        assert_eq!(err, "no key separator ':' in the line");
    }

    #[test]
    fn cli_produce_line_spans() {
        assert_eq!(line_span(&[3, 4, 9]), "lines 3-9");
        assert_eq!(line_span(&[5]), "line 5");
    }
}
