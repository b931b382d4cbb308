//! `samsa perf commit`: OffsetCommit latency at a fixed rate, over one client connection to
//! the group's coordinator.
//!
//! It creates the topic if needed (`--partitions`, default 6), finds the coordinator of
//! `--group` (the first FindCoordinator creates `__consumer_offsets`; until it is ready the
//! answer is COORDINATOR_NOT_AVAILABLE, retried a bounded number of times), then sends
//! group-less commits (generation -1, empty member id, as admin tools commit) of one partition
//! each, round robin over the topic's partitions at an increasing offset, at `--throughput`
//! commits per second for `--duration-s` seconds after `--warmup-s` seconds that are not
//! counted.
//!
//! Pacing is closed loop on a schedule: commit `i` is due `i / throughput` seconds after the
//! start, is sent when due (at once if the previous answer came late) and its answer is
//! awaited before the next is sent: one commit in flight, as a consumer's synchronous commit.
//! Two latencies are kept per commit: service (request written to answer read) and scheduled
//! (due time to answer read, which also counts the wait of a commit held back by a slow
//! predecessor, so the closed loop cannot hide a stall). The scheduled figure includes the
//! timer's own lateness (tokio's timer has a 1 ms granularity), the service figure does not.
//!
//! Invariants: every commit's per-partition error code is checked (a non-zero one fails the
//! run); latencies go into fixed-size [`Histogram`]s; all time is read through
//! `crate::rt::time`.

use std::time::Duration;

use crate::client::connection::Connection;
use crate::client::{Client, ClientConfig};
use crate::protocol::error::ErrorCode;
use crate::protocol::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    OffsetCommitResponse,
};
use crate::protocol::types::{LeaderEpoch, Offset};
use crate::rt::time::{now, Instant};

use super::perf::Histogram;

pub const USAGE: &str = "usage: samsa perf commit --topic T [options]

  --bootstrap-server HOST:PORT[,HOST:PORT...]
                                 brokers to start from (default 127.0.0.1:9092)
  --group G                      group to commit for (default samsa-perf-commit)
  --partitions P                 create the topic with P partitions if needed (default 6)
  --throughput R                 commits per second (default 1000)
  --duration-s S                 seconds of counted commits (default 20)
  --warmup-s S                   seconds of commits before counting starts (default 1)
  --json                         print the summary as one JSON object";

/// FindCoordinator attempts while `__consumer_offsets` is being created, one per
/// `COORDINATOR_RETRY_MS` (30 s in all).
const COORDINATOR_ATTEMPTS_MAX: u32 = 300;
const COORDINATOR_RETRY_MS: u64 = 100;

/// The parsed command line of `samsa perf commit`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Options {
    /// Comma-separated on the command line, as Kafka's tools take it.
    bootstrap: Vec<String>,
    topic: String,
    group: String,
    partitions: i32,
    throughput: u64,
    duration_s: u64,
    warmup_s: u64,
    json: bool,
}

/// Parses the arguments after `commit`.
pub(super) fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        bootstrap: vec!["127.0.0.1:9092".into()],
        topic: String::new(),
        group: "samsa-perf-commit".into(),
        partitions: 6,
        throughput: 1_000,
        duration_s: 20,
        warmup_s: 1,
        json: false,
    };
    let json = super::perf::parse_flags(args, |flag, value| {
        let bad = |what: &str| format!("{flag}: '{value}' is not a valid {what}");
        match flag {
            "--bootstrap-server" => {
                options.bootstrap =
                    super::common::bootstrap_list(value).map_err(|e| e.to_string())?
            }
            "--topic" => options.topic = value.to_owned(),
            "--group" => options.group = value.to_owned(),
            "--partitions" => options.partitions = value.parse().map_err(|_| bad("count"))?,
            "--throughput" => options.throughput = value.parse().map_err(|_| bad("rate"))?,
            "--duration-s" => options.duration_s = value.parse().map_err(|_| bad("duration"))?,
            "--warmup-s" => options.warmup_s = value.parse().map_err(|_| bad("duration"))?,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    options.json = json;
    let counts_positive =
        options.partitions >= 1 && options.throughput > 0 && options.duration_s > 0;
    match (options.topic.is_empty(), counts_positive) {
        (true, _) => Err("--topic is required".into()),
        (false, false) => {
            Err("--partitions, --throughput and --duration-s must be at least 1".into())
        }
        (false, true) => Ok(options),
    }
}

/// Runs the benchmark and returns its summary (text or JSON).
pub(super) async fn run(options: Options) -> Result<String, String> {
    let mut client = Client::new(ClientConfig {
        bootstrap: options.bootstrap.clone(),
        client_id: "samsa-perf-commit".into(),
        ..ClientConfig::default()
    });
    let topic = options.topic.as_str();
    let results = client
        .create_topics(&[(topic, options.partitions, -1, &[])])
        .await
        .map_err(|e| format!("creating topic {topic}: {e}"))?;
    for (name, result) in results {
        if let Err(e) = result {
            if e.code() != Some(ErrorCode::TOPIC_ALREADY_EXISTS) {
                return Err(format!("creating topic {name}: {e}"));
            }
        }
    }
    let meta = client
        .metadata(&[topic])
        .await
        .map_err(|e| format!("metadata of {topic}: {e}"))?;
    let partitions = meta
        .get(topic)
        .map(|t| t.partitions.len())
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("topic {topic} has no partitions"))?;
    let conn = coordinator(&mut client, &options.group).await?;
    let rate = options.throughput;
    let warmup = options.warmup_s.saturating_mul(rate);
    let counted = options.duration_s.saturating_mul(rate);
    let version = conn
        .version_for(OffsetCommitRequest::API_KEY)
        .map_err(|e| e.to_string())?;
    let service = Histogram::default();
    let scheduled = Histogram::default();
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let mut late = 0u64;
    let start = now();
    let mut counted_from = start;
    for i in 0..warmup + counted {
        if i == warmup {
            counted_from = now();
        }
        let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
        let at = now();
        if due > at {
            crate::rt::time::sleep(due - at).await;
        }
        let request = commit_request(&options.group, topic, partitions, i);
        let sent = now();
        let response: OffsetCommitResponse = conn
            .send(OffsetCommitRequest::API_KEY, version, &request)
            .await
            .map_err(|e| format!("OffsetCommit {i}: {e}"))?;
        let answered = now();
        if let Some(code) = response
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .find(|c| *c != 0)
        {
            return Err(format!("OffsetCommit {i}: {}", ErrorCode(code)));
        }
        if i >= warmup {
            service.record(micros(answered, sent));
            scheduled.record(micros(answered, due));
            if sent.duration_since(due) > interval {
                late += 1;
            }
        }
    }
    let elapsed = now().duration_since(counted_from).as_secs_f64().max(1e-9);
    Ok(summary(&options, &service, &scheduled, late, elapsed))
}

fn micros(later: Instant, earlier: Instant) -> u64 {
    u64::try_from(later.duration_since(earlier).as_micros()).unwrap_or(u64::MAX)
}

fn commit_request(group: &str, topic: &str, partitions: usize, i: u64) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group.to_owned(),
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        topics: vec![OffsetCommitRequestTopic {
            name: topic.to_owned(),
            partitions: vec![OffsetCommitRequestPartition {
                partition_index: i32::try_from(i % partitions as u64).unwrap_or(0),
                committed_offset: Offset(i64::try_from(i).unwrap_or(i64::MAX)),
                committed_leader_epoch: LeaderEpoch(-1),
                committed_metadata: Some(String::new()),
            }],
        }],
        ..Default::default()
    }
}

/// The connection to `group`'s coordinator, once FindCoordinator names one.
async fn coordinator<'a>(
    client: &'a mut Client,
    group: &str,
) -> Result<&'a mut Connection, String> {
    let mut last = String::new();
    for _ in 0..COORDINATOR_ATTEMPTS_MAX {
        match client.find_coordinator(group).await {
            Ok(found) => {
                return client
                    .broker_connection(found.node_id)
                    .await
                    .map_err(|e| e.to_string())
            }
            Err(e) if e.is_retriable() => last = e.to_string(),
            Err(e) => return Err(e.to_string()),
        }
        crate::rt::time::sleep(Duration::from_millis(COORDINATOR_RETRY_MS)).await;
    }
    Err(format!(
        "no coordinator for group {group} after {COORDINATOR_ATTEMPTS_MAX} attempts: {last}"
    ))
}

fn summary(
    options: &Options,
    service: &Histogram,
    scheduled: &Histogram,
    late: u64,
    elapsed: f64,
) -> String {
    let ms = |us: u64| us as f64 / 1000.0;
    let figures = |h: &Histogram| {
        (
            h.mean_us() / 1000.0,
            ms(h.percentile_us(0.50)),
            ms(h.percentile_us(0.99)),
            ms(h.percentile_us(0.999)),
            ms(h.max_us()),
        )
    };
    let n = service.count();
    let rate = n as f64 / elapsed;
    let (s, d) = (figures(service), figures(scheduled));
    if options.json {
        let obj = |f: (f64, f64, f64, f64, f64)| {
            format!(
                "{{\"avg\":{:.3},\"p50\":{:.3},\"p99\":{:.3},\"p99_9\":{:.3},\"max\":{:.3}}}",
                f.0, f.1, f.2, f.3, f.4
            )
        };
        format!(
            "{{\"command\":\"commit\",\"commits\":{n},\"target_per_s\":{},\"commits_per_s\":{rate:.1},\"late\":{late},\"service_latency_ms\":{},\"scheduled_latency_ms\":{}}}",
            options.throughput,
            obj(s),
            obj(d)
        )
    } else {
        format!(
            "{n} commits, {rate:.1} commits/sec (target {}), {late} sent late; service latency: {:.3} ms avg, {:.3} ms 50th, {:.3} ms 99th, {:.3} ms 99.9th, {:.3} ms max; scheduled latency: {:.3} ms avg, {:.3} ms 50th, {:.3} ms 99th, {:.3} ms 99.9th, {:.3} ms max.",
            options.throughput, s.0, s.1, s.2, s.3, s.4, d.0, d.1, d.2, d.3, d.4
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::perf::tests::args;
    use super::*;

    #[test]
    fn cli_perf_commit_parses_options_and_refuses_bad_ones() {
        let o = parse_options(&args(
            "--topic t --group g --partitions 3 --throughput 500 --duration-s 5 --warmup-s 0 --json",
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (
                o.group.as_str(),
                o.partitions,
                o.throughput,
                o.duration_s,
                o.warmup_s,
                o.json
            ),
            ("g", 3, 500, 5, 0, true)
        );
        let defaults = parse_options(&args("--topic t")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (
                defaults.partitions,
                defaults.throughput,
                defaults.duration_s
            ),
            (6, 1000, 20)
        );
        assert!(parse_options(&args("--group g"))
            .unwrap_err()
            .contains("--topic"));
        assert!(parse_options(&args("--topic t --throughput 0"))
            .unwrap_err()
            .contains("at least 1"));
        assert!(parse_options(&args("--topic t --record-size 5"))
            .unwrap_err()
            .contains("unknown option"));
    }

    #[test]
    fn cli_perf_commit_requests_round_robin_over_partitions_as_group_less_commits() {
        let r = commit_request("g", "t", 6, 13);
        assert_eq!(
            (r.generation_id_or_member_epoch, r.member_id.as_str()),
            (-1, "")
        );
        let p = &r.topics[0].partitions[0];
        assert_eq!((p.partition_index, p.committed_offset), (1, Offset(13)));
    }
}
