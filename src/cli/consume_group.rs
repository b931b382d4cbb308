//! `samsa consume --group G`: the console consumer as a member of a consumer group
//! ([`GroupConsumer`]): it prints the records of the partitions the group assigns it,
//! starting at the group's committed offsets (else at the end, or at the log start with
//! `--from-beginning`, Kafka's `auto.offset.reset`), and commits what it printed.
//!
//! Invariants:
//! - What is committed is what was printed: positions are committed every
//!   [`AUTO_COMMIT_INTERVAL_MS`], when the group takes partitions away, and on exit; after
//!   `--max-messages`, the position of each partition is set back to just past its last
//!   printed record before the final commit, so a later member starts at the first record
//!   this one did not print.
//! - SIGINT, `--max-messages` and `--timeout-ms` end it cleanly: a final commit, then
//!   LeaveGroup, then exit status 0.
//! - Network failures and retriable errors are retried [`super::consume::FAILURES_MAX`]
//!   times in a row, then the tool fails.

use std::collections::BTreeMap;
use std::time::Duration;

use super::common::{self, CliError};
use super::consume::{
    Parsed, Start, FAILURES_MAX, FETCH_MAX_BYTES, FETCH_MAX_WAIT_MS, FETCH_PARTITION_MAX_BYTES,
    RESPONSE_BYTES_MAX, RETRY_BACKOFF_MS,
};
use crate::client::group::consumer::{GroupConsumer, GroupConsumerConfig, OffsetReset};
use crate::client::group::member::MemberConfig;
use crate::client::{ClientConfig, FetchOptions};

/// How often printed positions are committed.
pub const AUTO_COMMIT_INTERVAL_MS: i64 = 5_000;
/// The member's session timeout and heartbeat interval (Kafka's consumer defaults).
pub const SESSION_TIMEOUT_MS: i32 = 45_000;
pub const HEARTBEAT_INTERVAL_MS: i64 = 3_000;
/// How long a rebalance may take before the coordinator drops a member that has not
/// rejoined (the console consumer prints as it goes, so it rejoins quickly).
pub const REBALANCE_TIMEOUT_MS: i32 = 60_000;

pub async fn run(parsed: Parsed) -> Result<(), CliError> {
    let Some(group) = parsed.group.clone() else {
        return Err(CliError::Failed("consume_group::run needs --group".into()));
    };
    let config = GroupConsumerConfig {
        client: ClientConfig {
            response_bytes_max: RESPONSE_BYTES_MAX,
            ..common::client_config(&parsed.bootstrap)
        },
        member: MemberConfig {
            group_id: group.clone(),
            session_timeout_ms: SESSION_TIMEOUT_MS,
            rebalance_timeout_ms: REBALANCE_TIMEOUT_MS,
            heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
            assignors: vec![parsed.assignor],
            ..MemberConfig::default()
        },
        enable_auto_commit: true,
        auto_commit_interval_ms: AUTO_COMMIT_INTERVAL_MS,
        auto_offset_reset: if parsed.start == Start::Beginning {
            OffsetReset::Earliest
        } else {
            OffsetReset::Latest
        },
        fetch: FetchOptions {
            max_wait_ms: FETCH_MAX_WAIT_MS,
            max_bytes: FETCH_MAX_BYTES,
            partition_max_bytes: FETCH_PARTITION_MAX_BYTES,
            ..FetchOptions::default()
        },
    };
    let topic = parsed.topic.as_str();
    let mut consumer = GroupConsumer::new(config, &[topic])
        .map_err(CliError::client(format!("joining group '{group}'")))?;
    let result = consume(&mut consumer, &parsed).await;
    let closed = consumer
        .close()
        .await
        .map_err(CliError::client(format!("leaving group '{group}'")));
    result.and(closed)
}

/// Polls and prints until SIGINT, `--max-messages` or `--timeout-ms`.
async fn consume(consumer: &mut GroupConsumer, parsed: &Parsed) -> Result<(), CliError> {
    let mut printed = 0u64;
    let mut failures = 0u32;
    let mut quiet_since = crate::rt::time::now();
    let done = |printed: u64| parsed.max_messages.is_some_and(|max| printed >= max);
    if done(printed) {
        return Ok(());
    }
    loop {
        let polled = tokio::select! {
            biased;
            _ = crate::rt::signal::ctrl_c() => {
                tracing::debug!("SIGINT: committing and leaving the group");
                return Ok(());
            }
            polled = consumer.poll() => polled,
        };
        let records = match polled {
            Ok(records) => {
                failures = 0;
                records
            }
            Err(e) if e.is_retriable() => {
                failures += 1;
                if failures > FAILURES_MAX {
                    return Err(CliError::Failed(format!(
                        "giving up after {FAILURES_MAX} failed polls in a row: {e}"
                    )));
                }
                tracing::warn!("poll failed, retrying: {e}");
                crate::rt::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
                continue;
            }
            Err(e) => return Err(CliError::client("consuming")(e)),
        };
        let mut out = Vec::new();
        let mut stopped_at = None;
        for (i, r) in records.iter().enumerate() {
            parsed
                .format
                .write(&mut out, &r.topic, r.partition, &r.record);
            printed += 1;
            if done(printed) {
                stopped_at = Some(i);
                break;
            }
        }
        if !out.is_empty() {
            quiet_since = crate::rt::time::now();
            common::write_stdout(&out)?;
        }
        if let Some(i) = stopped_at {
            // The poll moved each partition's position past all it returned: set each one
            // back to its first record that was not printed.
            let mut first_unprinted: BTreeMap<(&str, i32), i64> = BTreeMap::new();
            for r in &records[i + 1..] {
                first_unprinted
                    .entry((r.topic.as_str(), r.partition))
                    .or_insert(r.record.offset);
            }
            for ((topic, partition), offset) in first_unprinted {
                consumer.seek(topic, partition, offset);
            }
            return Ok(());
        }
        if let Some(timeout_ms) = parsed.timeout_ms {
            let quiet = crate::rt::time::now().saturating_duration_since(quiet_since);
            if quiet >= Duration::from_millis(timeout_ms) {
                tracing::info!(printed, "no record within {timeout_ms} ms; stopping");
                return Ok(());
            }
        }
    }
}
