//! The retention check of a run (spec's `check_retention`, retention-overreach): every log
//! start offset a fetch answered with, and the final log's, must leave at least
//! `retention.bytes` of records below a high watermark retention had seen.
//!
//! What this file adds to the spec's rule is the knowledge of the workload's record format:
//! an upper bound on the bytes of the records in an offset range. Each append is one batch of
//! its values, built as the workload builds it, so a record of a `k`-record batch accounts for
//! `batch_bytes(k) / k` (rounded up). A record whose batch is not known from the history (an
//! append of unknown outcome, never read, since deleted) counts as a batch of its own, the
//! largest share a record can have.
//!
//! The high watermark paired with an observed start is the one answered by the first fetch
//! invoked after the observing fetch completed (or the final log end): the broker read the
//! start after the high watermark it answered with, so retention may have moved the start on
//! a higher one; any later answer's is at least that high (the high watermark never moves
//! back under sync before ack, restarts included).

use samsa::protocol::record_batch::BatchBuilder;
use samsa_spec::{
    check_retention, FinalLog, History, Op, OpId, Outcome, Report, StartObservation, Value,
};
use std::collections::BTreeMap;

/// Bytes of one produced batch of `k` records, built as the workload builds them.
fn batch_bytes(k: usize) -> u64 {
    let mut builder = BatchBuilder::new(0);
    for i in 0..k {
        builder.push(
            0,
            Some(&1u32.to_be_bytes()),
            Some(&(i as u64).to_be_bytes()),
            &[],
        );
    }
    builder.build().len() as u64
}

/// Judges the run's observed log start offsets (`starts`: read op, start, high watermark)
/// and the final log against `retention_bytes`, adding anomalies to `report`.
pub fn check(
    history: &History,
    starts: &[(OpId, i64, i64)],
    final_log: &FinalLog,
    retention_bytes: u64,
    report: &mut Report,
) {
    let operations = history.operations();
    // Each value's batch size (records in its append), and each offset's where known.
    let mut batch_of: BTreeMap<Value, usize> = BTreeMap::new();
    let mut at_offset: BTreeMap<i64, usize> = BTreeMap::new();
    let mut times: BTreeMap<OpId, (u64, u64)> = BTreeMap::new();
    for operation in &operations {
        if let Op::Append { values } = &operation.op {
            for value in values {
                batch_of.insert(*value, values.len());
            }
            if let Some(Outcome::Appended { base_offset }) = &operation.outcome {
                for i in 0..values.len() {
                    at_offset.insert(base_offset.saturating_add(i as i64), values.len());
                }
            }
        }
        if let (Op::Read { .. }, Some(complete_ns)) = (&operation.op, operation.complete_ns) {
            times.insert(operation.id, (operation.invoke_ns, complete_ns));
        }
    }
    let observed = operations.iter().filter_map(|o| match &o.outcome {
        Some(Outcome::Read { records, .. }) => Some(records.as_slice()),
        _ => None,
    });
    for records in observed.chain(std::iter::once(final_log.records.as_slice())) {
        for (offset, value) in records {
            if let Some(&k) = batch_of.get(value) {
                at_offset.entry(*offset).or_insert(k);
            }
        }
    }
    let share: Vec<u64> = (0..=4)
        .map(|k| batch_bytes(k.max(1)).div_ceil(k.max(1) as u64))
        .collect();
    let unknown_share = batch_bytes(1);
    let bytes_at_most = |lo: i64, hi: i64| -> u64 {
        (lo..hi)
            .map(|offset| match at_offset.get(&offset) {
                Some(&k) => share.get(k).copied().unwrap_or(unknown_share),
                None => unknown_share,
            })
            .sum()
    };
    // Observations in invocation order, each with the high watermark of the first fetch
    // invoked after it completed.
    let mut timed: Vec<(u64, u64, i64, i64)> = starts
        .iter()
        .filter_map(|&(op, start, hw)| times.get(&op).map(|&(inv, comp)| (inv, comp, start, hw)))
        .collect();
    timed.sort_unstable();
    let final_end = final_log.log_end_offset();
    let mut observations: Vec<StartObservation> = timed
        .iter()
        .map(|&(_, complete_ns, start, hw)| {
            let next = timed.partition_point(|(invoke_ns, ..)| *invoke_ns <= complete_ns);
            let later = timed
                .get(next)
                .map_or(final_end, |&(.., later_hw)| later_hw);
            StartObservation {
                time_ns: complete_ns,
                log_start_offset: start,
                high_watermark: later.max(hw),
            }
        })
        .collect();
    observations.push(StartObservation {
        time_ns: u64::MAX,
        log_start_offset: final_log.log_start_offset,
        high_watermark: final_end,
    });
    check_retention(&observations, 0, retention_bytes, bytes_at_most, report);
}
