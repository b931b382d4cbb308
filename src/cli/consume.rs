//! `samsa consume`: the console consumer. It reads one partition or all of them, from the end
//! (the default, as Kafka's console consumer), the beginning, an offset or a timestamp, and
//! prints each record with a kcat-like format string (see [`super::format`]).
//!
//! Without `--group` it never joins a consumer group and never commits offsets: positions
//! live in this process only, so tailing a topic changes nothing for anyone else. With
//! `--group G` it is a member of group G (`super::consume_group`): it reads the partitions
//! the group gives it, from the group's committed offsets, and commits what it printed.
//!
//! Invariants:
//! - One Fetch per partition leader carries every partition that leader leads, so a quiet
//!   partition does not delay the others; the broker holds it up to [`FETCH_MAX_WAIT_MS`].
//! - Memory is bounded by the fetch limits: [`FETCH_MAX_BYTES`] per response,
//!   [`FETCH_PARTITION_MAX_BYTES`] per partition, [`RESPONSE_BYTES_MAX`] for anything the
//!   broker sends (KIP-74 lets one oversized first batch through), and one response's
//!   formatted output at a time.
//! - A partition's position only moves forward, past whole batches the broker returned.
//! - Network failures and retriable errors are retried [`FAILURES_MAX`] times in a row (with
//!   fresh metadata and connections), then the tool fails. A position that fell below the log
//!   start (retention) continues from the log start, with a warning.
//! - It stops after `--max-messages`, after `--timeout-ms` without a record, once every
//!   partition is read to its high watermark with `--exit-at-end`, or at SIGINT, always with
//!   exit status 0; what was printed is flushed.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use super::common::{self, Args, CliError};
use super::format::{Format, FORMAT_DEFAULT};
use crate::client::group::assignor::Assignor;
use crate::client::{Client, ClientConfig, ClientError, ConsumedRecords};
use crate::protocol::error::ErrorCode;
use crate::protocol::fetch::{FetchPartition, FetchRequest, FetchResponse, FetchTopic};
use crate::protocol::types::{NodeId, Offset};

pub const USAGE: &str = "usage: samsa consume --topic T [options]

Prints records to stdout. Without --group it never joins a group or commits offsets.

  -t, --topic T                 topic to read (required)
  -g, --group G                 consume as a member of group G: the partitions the group
                                assigns, from its committed offsets (else the end, or the
                                log start with --from-beginning); commits what was printed
                                every 5 s and on exit
      --assignor NAME           with --group: range (default), roundrobin or
                                cooperative-sticky
  -p, --partition P             only this partition (default: all)
      --from-beginning          start at the log start
  -o, --offset N                start at offset N (N < 0: N records before the end)
      --timestamp MS            start at the first record with a timestamp >= MS
                                (default start: the end, only new records)
  -n, --max-messages N          stop after N records
  -e, --exit-at-end             stop once every partition is read to its end
      --timeout-ms MS           stop after MS milliseconds without a record
  -f, --format STR              output format (default '%s\\n'):
                                %t topic, %p partition, %o offset, %k key, %s value,
                                %K key size, %S value size, %T timestamp, %h headers,
                                %% percent; escapes \\n \\t \\r \\0 \\\\
  -b, --bootstrap-server HOST:PORT[,HOST:PORT]   (default 127.0.0.1:9092)

Without --max-messages it tails until interrupted (SIGINT, exit status 0).";

/// How long the broker may hold a Fetch waiting for data.
pub const FETCH_MAX_WAIT_MS: i32 = 500;
/// The most record bytes one Fetch asks for.
pub const FETCH_MAX_BYTES: i32 = 8 * 1024 * 1024;
/// The most record bytes one Fetch asks for per partition.
pub const FETCH_PARTITION_MAX_BYTES: i32 = 1024 * 1024;
/// The largest response accepted at all.
pub const RESPONSE_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Consecutive failed fetch rounds before giving up.
pub const FAILURES_MAX: u32 = 10;
/// The wait after a failed round.
pub const RETRY_BACKOFF_MS: u64 = 200;

/// Where to start reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Only records produced from now on.
    End,
    Beginning,
    /// An offset; negative counts back from the end.
    Offset(i64),
    Timestamp(i64),
}

/// The parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub bootstrap: Vec<String>,
    pub topic: String,
    pub partition: Option<i32>,
    pub start: Start,
    pub max_messages: Option<u64>,
    pub timeout_ms: Option<u64>,
    /// Stop once every partition is read up to its high watermark (kcat's `-e`).
    pub exit_at_end: bool,
    pub format: Format,
    /// `--group`: consume as a member of this group.
    pub group: Option<String>,
    pub assignor: Assignor,
}

pub fn parse_args(args: &[String]) -> Result<Parsed, CliError> {
    let mut bootstrap = common::bootstrap_list(common::BOOTSTRAP_DEFAULT)?;
    let mut topic = None;
    let mut partition = None;
    let mut starts: Vec<(&str, Start)> = Vec::new();
    let mut max_messages = None;
    let mut timeout_ms = None;
    let mut exit_at_end = false;
    let mut format = None;
    let mut group = None;
    let mut assignor = None;
    let mut scan = Args::new(args);
    while let Some((name, inline)) = scan.next_flag()? {
        match name {
            n if common::is_bootstrap_flag(n) => {
                bootstrap = common::bootstrap_list(scan.value(name, inline)?)?;
            }
            "--topic" | "-t" => topic = Some(scan.value(name, inline)?.to_owned()),
            "--group" | "-g" => {
                let id = scan.value(name, inline)?;
                if id.is_empty() {
                    return Err(CliError::Usage(format!("{name}: the group id is empty")));
                }
                group = Some(id.to_owned());
            }
            "--assignor" => {
                let text = scan.value(name, inline)?;
                let known: Vec<&str> = Assignor::ALL.iter().map(|a| a.name()).collect();
                assignor = Some(Assignor::from_name(text).ok_or_else(|| {
                    CliError::Usage(format!(
                        "{name}: unknown assignor '{text}' (known: {})",
                        known.join(", ")
                    ))
                })?);
            }
            "--partition" | "-p" => partition = Some(scan.partition(name, inline)?),
            "--from-beginning" => {
                Args::switch(name, inline)?;
                starts.push((name, Start::Beginning));
            }
            "--offset" | "-o" => starts.push((name, Start::Offset(scan.number(name, inline)?))),
            "--timestamp" => starts.push((name, Start::Timestamp(scan.number(name, inline)?))),
            "--max-messages" | "-n" => max_messages = Some(scan.number(name, inline)?),
            "--timeout-ms" => timeout_ms = Some(scan.number(name, inline)?),
            "--exit-at-end" | "-e" => {
                Args::switch(name, inline)?;
                exit_at_end = true;
            }
            "--format" | "-f" => {
                let text = scan.value(name, inline)?;
                format =
                    Some(Format::parse(text).map_err(|e| CliError::Usage(format!("{name}: {e}")))?);
            }
            other => return Err(CliError::Usage(format!("unknown option '{other}'"))),
        }
    }
    let topic = common::required_topic(topic)?;
    let start = match starts.as_slice() {
        [] => Start::End,
        [(_, start)] => *start,
        [(a, _), (b, _), ..] => {
            return Err(CliError::Usage(format!(
                "{a} and {b} both say where to start; give one"
            )))
        }
    };
    let format = match format {
        Some(format) => format,
        None => Format::parse(FORMAT_DEFAULT)
            .map_err(|e| CliError::Failed(format!("the default format: {e}")))?,
    };
    if group.is_some() {
        // The group decides the partitions and the committed offsets where they start.
        let refused = [
            ("--partition", partition.is_some()),
            ("--exit-at-end", exit_at_end),
            (
                "--offset/--timestamp",
                matches!(start, Start::Offset(_) | Start::Timestamp(_)),
            ),
        ];
        if let Some((flag, _)) = refused.iter().find(|(_, given)| *given) {
            return Err(CliError::Usage(format!(
                "{flag} cannot be used with --group (the group assigns partitions and their committed offsets say where to start)"
            )));
        }
    } else if assignor.is_some() {
        return Err(CliError::Usage("--assignor needs --group".into()));
    }
    Ok(Parsed {
        bootstrap,
        topic,
        partition,
        start,
        max_messages,
        timeout_ms,
        exit_at_end,
        format,
        group,
        assignor: assignor.unwrap_or(Assignor::Range),
    })
}

pub fn main(args: &[String]) -> ExitCode {
    common::tool_main("consume", USAGE, args, parse_args, |parsed| async move {
        if parsed.group.is_some() {
            // It handles SIGINT itself: a member commits and leaves before it exits.
            return super::consume_group::run(parsed).await;
        }
        tokio::select! {
            biased;
            _ = crate::rt::signal::ctrl_c() => {
                tracing::debug!("SIGINT: stopping");
                Ok(())
            }
            result = run(parsed) => result,
        }
    })
}

pub async fn run(parsed: Parsed) -> Result<(), CliError> {
    let mut client = Client::new(ClientConfig {
        response_bytes_max: RESPONSE_BYTES_MAX,
        ..common::client_config(&parsed.bootstrap)
    });
    let topic = parsed.topic.as_str();
    let described = client
        .describe_topics(&[topic])
        .await
        .map_err(CliError::client(format!("looking up topic '{topic}'")))?;
    let all: Vec<i32> = match described.iter().find(|t| t.name == topic) {
        Some(t) if t.error == ErrorCode::NONE => t.partitions.iter().map(|p| p.partition).collect(),
        Some(t) if t.error != ErrorCode::UNKNOWN_TOPIC_OR_PARTITION => {
            return Err(CliError::Failed(format!("topic '{topic}': {}", t.error)))
        }
        _ => return Err(CliError::Failed(format!("topic '{topic}' does not exist"))),
    };
    let partitions = match parsed.partition {
        Some(p) if all.contains(&p) => vec![p],
        Some(p) => {
            return Err(CliError::Failed(format!(
                "topic '{topic}' has no partition {p} (it has {})",
                all.len()
            )))
        }
        None => all,
    };
    let mut positions = BTreeMap::new();
    for &p in &partitions {
        positions.insert(p, start_offset(&mut client, topic, p, parsed.start).await?);
    }
    tracing::debug!(?positions, "starting positions");
    Consumer {
        client,
        topic,
        format: &parsed.format,
        positions,
        printed: 0,
        max_messages: parsed.max_messages,
        exit_at_end: parsed.exit_at_end,
        at_end: BTreeMap::new(),
    }
    .run(parsed.timeout_ms)
    .await
}

/// The first offset to read from `topic`-`partition`.
async fn start_offset(
    client: &mut Client,
    topic: &str,
    partition: i32,
    start: Start,
) -> Result<i64, CliError> {
    match start {
        Start::End => list_offset(client, topic, partition, -1).await,
        Start::Beginning => list_offset(client, topic, partition, -2).await,
        Start::Timestamp(ts) => match list_offset(client, topic, partition, ts).await? {
            // No record at or after the timestamp: start at the end, as Kafka does.
            -1 => list_offset(client, topic, partition, -1).await,
            offset => Ok(offset),
        },
        Start::Offset(n) => {
            let earliest = list_offset(client, topic, partition, -2).await?;
            let end = list_offset(client, topic, partition, -1).await?;
            if n < 0 {
                return Ok(end.saturating_add(n).max(earliest));
            }
            if n < earliest || n > end {
                return Err(CliError::Failed(format!(
                    "offset {n} is out of range for {topic}-{partition} (log start {earliest}, end {end})"
                )));
            }
            Ok(n)
        }
    }
}

/// ListOffsets for one partition: -1 the end, -2 the log start, else a timestamp.
async fn list_offset(
    client: &mut Client,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> Result<i64, CliError> {
    client
        .list_offsets(topic, partition, timestamp)
        .await
        .map(|(offset, _)| offset)
        .map_err(CliError::client(format!(
            "looking up offsets of {topic}-{partition}"
        )))
}

/// The fetch loop's state.
struct Consumer<'a> {
    client: Client,
    topic: &'a str,
    format: &'a Format,
    /// The next offset to read, per partition.
    positions: BTreeMap<i32, i64>,
    printed: u64,
    max_messages: Option<u64>,
    exit_at_end: bool,
    /// Per partition, whether the last fetch left its position at the high watermark.
    at_end: BTreeMap<i32, bool>,
}

/// What one round of fetches achieved.
enum Round {
    /// Some records may have come; go on.
    Progress { records: u64 },
    /// Stop: `--max-messages` reached.
    Done,
}

impl Consumer<'_> {
    fn done(&self) -> bool {
        self.max_messages.is_some_and(|max| self.printed >= max)
    }

    async fn run(mut self, timeout_ms: Option<u64>) -> Result<(), CliError> {
        let mut failures = 0u32;
        let mut quiet_since = crate::rt::time::now();
        if self.done() {
            return Ok(());
        }
        loop {
            match self.round().await {
                Ok(Round::Done) => return Ok(()),
                Ok(Round::Progress { records }) => {
                    failures = 0;
                    if records > 0 {
                        quiet_since = crate::rt::time::now();
                    }
                }
                Err(RoundError::Fatal(e)) => return Err(e),
                Err(RoundError::Retriable(e)) => {
                    failures += 1;
                    if failures > FAILURES_MAX {
                        return Err(CliError::Failed(format!(
                            "giving up after {FAILURES_MAX} failed fetches in a row: {e}"
                        )));
                    }
                    tracing::warn!("fetch failed, retrying: {e}");
                    self.client.reset();
                    crate::rt::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
                }
            }
            if let Some(timeout_ms) = timeout_ms {
                let quiet = crate::rt::time::now().saturating_duration_since(quiet_since);
                if quiet >= Duration::from_millis(timeout_ms) {
                    tracing::info!(
                        printed = self.printed,
                        "no record within {timeout_ms} ms; stopping"
                    );
                    return Ok(());
                }
            }
        }
    }

    /// One Fetch to each leader of the partitions being read.
    async fn round(&mut self) -> Result<Round, RoundError> {
        let topic = self.topic;
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for &partition in self.positions.keys() {
            let leader = self
                .client
                .leader(topic, partition)
                .await
                .map_err(RoundError::from_client)?;
            by_leader.entry(leader).or_default().push(partition);
        }
        let mut records = 0;
        for (leader, partitions) in by_leader {
            let response = self.fetch(leader, &partitions).await?;
            for part in response
                .responses
                .into_iter()
                .filter(|t| t.topic == topic)
                .flat_map(|t| t.partitions.into_iter())
            {
                let p = part.partition_index;
                let Some(&position) = self.positions.get(&p) else {
                    continue;
                };
                match ErrorCode(part.error_code) {
                    ErrorCode::NONE => {}
                    ErrorCode::OFFSET_OUT_OF_RANGE => {
                        let to = if position < part.log_start_offset.0 {
                            part.log_start_offset.0
                        } else {
                            part.high_watermark.0
                        };
                        tracing::warn!(
                            "offset {position} is out of range for {topic}-{p} (log start {}, high watermark {}); continuing at {to}",
                            part.log_start_offset.0,
                            part.high_watermark.0
                        );
                        self.positions.insert(p, to);
                        continue;
                    }
                    code if crate::client::error::code_is_retriable(code) => {
                        self.client.forget_topic(topic);
                        return Err(RoundError::Retriable(format!("{topic}-{p}: {code}")));
                    }
                    code => {
                        return Err(RoundError::Fatal(CliError::Failed(format!(
                            "fetching {topic}-{p} at offset {position}: {code}"
                        ))))
                    }
                }
                let bytes = part.records.unwrap_or_default();
                let (count, next, stop) = self.print(p, position, bytes)?;
                records += count;
                if stop {
                    return Ok(Round::Done);
                }
                let next = next.max(position);
                self.positions.insert(p, next);
                self.at_end.insert(p, next >= part.high_watermark.0);
            }
        }
        if self.exit_at_end
            && self
                .positions
                .keys()
                .all(|p| self.at_end.get(p).copied().unwrap_or(false))
        {
            return Ok(Round::Done);
        }
        Ok(Round::Progress { records })
    }

    async fn fetch(
        &mut self,
        leader: i32,
        partitions: &[i32],
    ) -> Result<FetchResponse, RoundError> {
        let request_timeout_ms = self.client.config().request_timeout_ms;
        let request = FetchRequest {
            replica_id: NodeId::NONE,
            max_wait_ms: FETCH_MAX_WAIT_MS,
            min_bytes: 1,
            max_bytes: FETCH_MAX_BYTES,
            isolation_level: 0,
            session_id: 0,
            session_epoch: -1,
            topics: vec![FetchTopic {
                topic: self.topic.to_owned(),
                partitions: partitions
                    .iter()
                    .map(|&partition| FetchPartition {
                        partition,
                        fetch_offset: Offset(self.positions.get(&partition).copied().unwrap_or(0)),
                        partition_max_bytes: FETCH_PARTITION_MAX_BYTES,
                        ..FetchPartition::default()
                    })
                    .collect(),
                ..FetchTopic::default()
            }],
            ..FetchRequest::default()
        };
        let conn = self
            .client
            .broker_connection(leader)
            .await
            .map_err(RoundError::from_client)?;
        let api_key = FetchRequest::API_KEY;
        let version = conn.version_for(api_key).map_err(RoundError::from_client)?;
        let wait_ms = u64::try_from(FETCH_MAX_WAIT_MS).unwrap_or(0);
        let response: FetchResponse = conn
            .send_with_timeout(api_key, version, &request, request_timeout_ms + wait_ms)
            .await
            .map_err(RoundError::from_client)?;
        if response.error_code != 0 {
            let code = ErrorCode(response.error_code);
            let message = format!("Fetch from broker {leader}: {code}");
            return Err(if crate::client::error::code_is_retriable(code) {
                RoundError::Retriable(message)
            } else {
                RoundError::Fatal(CliError::Failed(message))
            });
        }
        Ok(response)
    }

    /// Prints the records of one partition's fetched bytes at or above `position`. Returns
    /// how many were printed, the offset after the last whole batch, and whether
    /// `--max-messages` was reached.
    fn print(
        &mut self,
        partition: i32,
        position: i64,
        bytes: bytes::Bytes,
    ) -> Result<(u64, i64, bool), RoundError> {
        let topic = self.topic;
        let next = crate::client::records::next_position(&bytes, position);
        let decompressed_max = self.client.config().decompressed_batch_bytes_max;
        let mut out = Vec::new();
        let mut count = 0;
        let mut stop = false;
        for record in ConsumedRecords::new(topic, partition, bytes, position, decompressed_max) {
            let record = record.map_err(|e| {
                RoundError::Fatal(CliError::Failed(format!("reading fetched records: {e}")))
            })?;
            self.format.write(&mut out, topic, partition, &record);
            count += 1;
            self.printed += 1;
            if self.done() {
                stop = true;
                break;
            }
        }
        if !out.is_empty() {
            common::write_stdout(&out).map_err(RoundError::Fatal)?;
        }
        Ok((count, next, stop))
    }
}

/// A failed round: retried, or the end.
enum RoundError {
    Retriable(String),
    Fatal(CliError),
}

impl RoundError {
    fn from_client(e: ClientError) -> RoundError {
        if e.is_retriable() {
            RoundError::Retriable(e.to_string())
        } else {
            RoundError::Fatal(CliError::client("fetching")(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Parsed, String> {
        common::parse_strs(parse_args, args)
    }

    #[test]
    fn cli_consume_parses_options() {
        let p = parse(&[
            "-t",
            "t",
            "--partition=1",
            "--offset",
            "-3",
            "-n",
            "10",
            "-f",
            "%o:%s\\n",
            "--timeout-ms",
            "500",
            "-e",
        ])
        .unwrap();
        assert!(p.exit_at_end);
        assert_eq!(p.topic, "t");
        assert_eq!(p.partition, Some(1));
        assert_eq!(p.start, Start::Offset(-3));
        assert_eq!(p.max_messages, Some(10));
        assert_eq!(p.timeout_ms, Some(500));
        assert_eq!(p.format, Format::parse("%o:%s\\n").unwrap());
        let p = parse(&["--topic", "t"]).unwrap();
        assert_eq!(
            (p.start, p.partition, p.max_messages),
            (Start::End, None, None)
        );
        assert_eq!(p.format, Format::parse("%s\\n").unwrap());
        assert_eq!(
            parse(&["-t", "t", "--from-beginning"]).unwrap().start,
            Start::Beginning
        );
        assert_eq!(
            parse(&["-t", "t", "--timestamp", "1700000000000"])
                .unwrap()
                .start,
            Start::Timestamp(1_700_000_000_000)
        );
    }

    #[test]
    fn cli_consume_refuses_bad_options_naming_them() {
        let err = |args: &[&str]| parse(args).unwrap_err();
        assert_eq!(err(&["--from-beginning"]), "--topic is required");
        assert_eq!(
            err(&["-t", "t", "--from-beginning", "--offset", "3"]),
            "--from-beginning and --offset both say where to start; give one"
        );
        assert_eq!(
            err(&["-t", "t", "-f", "%x"]),
            "-f: unknown directive '%x' at position 0 (known: %t %p %o %k %s %K %S %T %h %%)"
        );
        assert_eq!(
            err(&["-t", "t", "--max-messages", "-1"]),
            "--max-messages: '-1' is not a valid number"
        );
        assert_eq!(
            err(&["-t", "t", "--group", "g", "-p", "1"]),
            "--partition cannot be used with --group (the group assigns partitions and their committed offsets say where to start)"
        );
        assert_eq!(
            err(&["-t", "t", "--assignor", "range"]),
            "--assignor needs --group"
        );
        assert_eq!(
            err(&["-t", "t", "-g", "g", "--assignor", "sticky"]),
            "--assignor: unknown assignor 'sticky' (known: range, roundrobin, cooperative-sticky)"
        );
        let p = parse(&[
            "-t",
            "t",
            "-g",
            "g",
            "--from-beginning",
            "--assignor=roundrobin",
        ])
        .unwrap();
        assert_eq!(
            (p.group.as_deref(), p.start, p.assignor),
            (Some("g"), Start::Beginning, Assignor::RoundRobin)
        );
        assert_eq!(err(&["-t", "t", "--offset"]), "--offset needs a value");
    }
}
