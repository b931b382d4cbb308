//! Checks the checkers against histories generated from the reference model.
//!
//! A history produced by running concurrent processes against `LogModel` is
//! correct by construction, so every check of it must pass; each way of
//! breaking its final log or its reads must then be caught under the right
//! name. This
//! guards against false positives, which would make the simulation useless,
//! as much as against missed anomalies.

use std::collections::{BTreeMap, BTreeSet};

use samsa_spec::{
    check, check_groups, AnomalyKind, CheckOptions, CommitResult, Event, EventKind, FinalLog,
    FinalPartition, Generation, GroupError, GroupEvent, GroupModel, History, LogModel, NodeEvent,
    Offset, Op, OpId, Outcome, ProcessId, Report, TopicPartition, Value,
};

const SEEDS: u64 = 300;
const STEPS: usize = 400;
const PROCESSES: u32 = 5;
const BATCH_RECORDS_MAX: u64 = 4;
const READ_RECORDS_MAX: u64 = 10;

/// SplitMix64: tiny, deterministic, and good enough to drive a generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

struct Run {
    history: History,
    model: LogModel,
    /// Values whose append was acknowledged, with their offsets.
    acked: Vec<(Offset, Value)>,
}

/// Runs concurrent processes against the model. Appends and reads take effect
/// at completion, which lies within the operation's interval, so the history
/// is linearizable by construction; unknown appends take effect or not at
/// random, and failed ones never do. A read reports the model's end as its
/// high watermark, since everything the model holds is committed and the
/// model only grows.
///
/// Now and then the node restarts: an open with a random recovery point,
/// which loses nothing (the model is durable). A read from below the current
/// recovery point is sometimes refused as corrupt at an offset below it too,
/// which is the one place a corrupt read is acceptable: recovery trusted
/// that batch unread.
fn generate(seed: u64) -> Run {
    let mut rng = Rng(seed);
    let mut history = History::new();
    let mut model = LogModel::new();
    let mut acked = Vec::new();
    let mut outstanding: Vec<Option<OpId>> = vec![None; PROCESSES as usize];
    let mut next_seq = vec![0u32; PROCESSES as usize];
    let mut time_ns = 0u64;
    let mut recovery_point: Option<Offset> = None;
    for _ in 0..STEPS {
        time_ns += 1 + rng.below(1000);
        let slot = rng.below(u64::from(PROCESSES)) as usize;
        let process = slot as ProcessId;
        match outstanding[slot].take() {
            None => {
                let op = if rng.chance(60) {
                    let len = 1 + rng.below(BATCH_RECORDS_MAX) as u32;
                    let values = (0..len)
                        .map(|i| Value::new(slot as u32, next_seq[slot] + i))
                        .collect();
                    next_seq[slot] += len;
                    Op::Append { values }
                } else {
                    let end = model.log_end_offset() as u64;
                    Op::Read {
                        from: rng.below(end + 1) as Offset,
                    }
                };
                outstanding[slot] = Some(history.invoke(time_ns, process, op));
            }
            Some(id) => {
                let outcome = match &history.events()[id].kind {
                    EventKind::Invoke(Op::Append { values }) => {
                        let values = values.clone();
                        match rng.below(10) {
                            0 => Outcome::Failed {
                                reason: "not leader".into(),
                            },
                            1 => {
                                model.append(&values);
                                Outcome::Unknown {
                                    reason: "timeout after write".into(),
                                }
                            }
                            2 => Outcome::Unknown {
                                reason: "timeout before write".into(),
                            },
                            _ => {
                                let base_offset = model.append(&values);
                                acked.extend(
                                    values
                                        .iter()
                                        .enumerate()
                                        .map(|(i, &v)| (base_offset + i as Offset, v)),
                                );
                                Outcome::Appended { base_offset }
                            }
                        }
                    }
                    EventKind::Invoke(Op::Read { from }) => {
                        let from = *from;
                        let max = 1 + rng.below(READ_RECORDS_MAX) as usize;
                        let trusted_unread = recovery_point.filter(|&point| from < point);
                        match model.read(from, max) {
                            Ok(_) if trusted_unread.is_some() && rng.chance(20) => {
                                let point = trusted_unread.unwrap_or(from);
                                Outcome::CorruptRead {
                                    offset: from + rng.below((point - from) as u64) as Offset,
                                    reason: "crc32c mismatch".into(),
                                }
                            }
                            // Everything the model holds is committed, so its
                            // end is the high watermark when the read takes effect.
                            Ok(records) => Outcome::Read {
                                records,
                                high_watermark: model.log_end_offset(),
                            },
                            Err(error) => Outcome::Failed {
                                reason: error.to_string(),
                            },
                        }
                    }
                    other => panic!("outstanding op is not an invocation: {other:?}"),
                };
                history.complete(time_ns, id, outcome);
            }
        }
        if rng.chance(1) {
            history.note(time_ns, 0, "nemesis: nothing happened");
        }
        if rng.chance(2) {
            let end = model.log_end_offset();
            let point = rng.below(end as u64 + 1) as Offset;
            recovery_point = Some(point);
            history.node(
                time_ns,
                0,
                NodeEvent::Opened {
                    recovery_point: point,
                    log_end_offset: end,
                },
            );
        }
    }
    // Operations still outstanding never complete; their appends may have landed.
    for id in outstanding.into_iter().flatten() {
        if let EventKind::Invoke(Op::Append { values }) = &history.events()[id].kind {
            if rng.chance(50) {
                model.append(values);
            }
        }
    }
    Run {
        history,
        model,
        acked,
    }
}

#[test]
fn model_histories_are_valid() {
    let (mut opens, mut corrupt_reads) = (0u64, 0u64);
    for seed in 0..SEEDS {
        let run = generate(seed);
        let report = check(
            &run.history,
            &FinalLog::from(&run.model),
            &CheckOptions::default(),
        );
        assert!(report.is_valid(), "seed {seed}:\n{}", report.summary());
        assert!(report.ops_ok > 0, "seed {seed} exercised nothing");
        let lenient = CheckOptions {
            offsets_may_have_gaps: true,
            watermark_may_regress: true,
            ..CheckOptions::default()
        };
        let report = check(&run.history, &FinalLog::from(&run.model), &lenient);
        assert!(report.is_valid(), "seed {seed}:\n{}", report.summary());
        for event in run.history.events() {
            match &event.kind {
                EventKind::Node(NodeEvent::Opened { .. }) => opens += 1,
                EventKind::Complete {
                    outcome: Outcome::CorruptRead { .. },
                    ..
                } => corrupt_reads += 1,
                _ => {}
            }
        }
    }
    // The valid runs must exercise what the new checkers judge.
    assert!(opens > SEEDS, "only {opens} opens in {SEEDS} seeds");
    assert!(
        corrupt_reads > SEEDS / 4,
        "only {corrupt_reads} corrupt reads in {SEEDS} seeds"
    );
}

#[test]
fn generation_and_checking_are_deterministic() {
    for seed in 0..10 {
        let (a, b) = (generate_group(seed), generate_group(seed));
        assert_eq!(a.history.render(), b.history.render());
        assert_eq!(
            check_group_run(&a.history, &a.finals).summary(),
            check_group_run(&b.history, &b.finals).summary()
        );
        let (a, b) = (generate(seed), generate(seed));
        assert_eq!(a.history.render(), b.history.render());
        let mut log = FinalLog::from(&a.model);
        log.records.truncate(log.records.len() / 2);
        let options = CheckOptions::default();
        assert_eq!(
            check(&a.history, &log, &options).summary(),
            check(&b.history, &log, &options).summary()
        );
    }
}

#[test]
fn truncated_final_log_loses_writes_unless_corruption_excuses_it() {
    for seed in 0..SEEDS {
        let run = generate(seed);
        let Some(&(cut, _)) = run.acked.get(run.acked.len() / 2) else {
            continue;
        };
        let mut log = FinalLog::from(&run.model);
        log.records.retain(|&(offset, _)| offset < cut);

        let report = check(&run.history, &log, &CheckOptions::default());
        assert!(report.has(AnomalyKind::LostWrite), "seed {seed}");
        assert!(
            !report.has(AnomalyKind::UnreportedCorruption),
            "seed {seed}"
        );
        // A watermark reported above the cut is gone with it.
        if highest_watermark(&run.history) > cut {
            assert!(report.has(AnomalyKind::Watermark), "seed {seed}");
        }

        let synced = CheckOptions {
            synced_corruption_injected: true,
            ..CheckOptions::default()
        };
        let report = check(&run.history, &log, &synced);
        assert!(report.has(AnomalyKind::UnreportedCorruption), "seed {seed}");
        assert!(!report.has(AnomalyKind::LostWrite), "seed {seed}");

        log.corruption_detected_at = Some(cut);
        let report = check(&run.history, &log, &synced);
        assert!(report.is_valid(), "seed {seed}:\n{}", report.summary());
        assert!(report.losses_excused > 0, "seed {seed}");
    }
}

#[test]
fn corrupted_final_logs_are_caught_under_the_right_name() {
    for seed in 0..SEEDS {
        let run = generate(seed);
        let Some(&(offset, value)) = run.acked.last() else {
            continue;
        };
        let log = FinalLog::from(&run.model);
        let position = log
            .records
            .iter()
            .position(|&(o, _)| o == offset)
            .expect("acknowledged record is in the model");

        let mut duplicated = log.clone();
        let end = duplicated.log_end_offset();
        duplicated.records.push((end, value));
        let report = check(&run.history, &duplicated, &CheckOptions::default());
        assert!(report.has(AnomalyKind::Duplicate), "seed {seed}");

        let mut garbage = log.clone();
        garbage.records[position].1 = Value(u64::MAX);
        let report = check(&run.history, &garbage, &CheckOptions::default());
        assert!(report.has(AnomalyKind::PhantomRead), "seed {seed}");
        assert!(report.has(AnomalyKind::LostWrite), "seed {seed}");
        assert!(report.has(AnomalyKind::InconsistentOffsets), "seed {seed}");

        let mut shifted = log.clone();
        shifted.records[position].0 = shifted.log_end_offset();
        let report = check(&run.history, &shifted, &CheckOptions::default());
        assert!(report.has(AnomalyKind::InconsistentOffsets), "seed {seed}");
        assert!(!report.has(AnomalyKind::LostWrite), "seed {seed}");
    }
}

/// A copy of `history` with each event passed through `edit`, which gets the
/// event's index and the event and returns the events to record in its place
/// (none to drop it, several to insert some before it). Completions name
/// their invocation by its index in `history`; the copy renumbers them.
fn rebuild(history: &History, mut edit: impl FnMut(OpId, &Event) -> Vec<Event>) -> History {
    let mut copy = History::new();
    let mut renumbered: BTreeMap<OpId, OpId> = BTreeMap::new();
    for (id, original) in history.events().iter().enumerate() {
        for event in edit(id, original) {
            match event.kind {
                EventKind::Invoke(op) => {
                    renumbered.insert(id, copy.invoke(event.time_ns, event.process, op));
                }
                EventKind::Complete { op, outcome } => {
                    copy.complete(event.time_ns, renumbered[&op], outcome);
                }
                EventKind::Note(text) => copy.note(event.time_ns, event.process, text),
                EventKind::Node(node) => copy.node(event.time_ns, event.process, node),
                EventKind::Group(group) => copy.group(event.time_ns, event.process, group),
            }
        }
    }
    copy
}

/// A copy of `history` with each completion's outcome passed through `edit`,
/// which gets the op id and the outcome.
fn edit_outcomes(history: &History, mut edit: impl FnMut(OpId, &Outcome) -> Outcome) -> History {
    rebuild(history, |_, event| {
        let mut event = event.clone();
        if let EventKind::Complete { op, outcome } = &mut event.kind {
            *outcome = edit(*op, outcome);
        }
        vec![event]
    })
}

/// A copy of `history` with each read's records passed through `edit`, which
/// gets the read's op id and records.
fn edit_reads(
    history: &History,
    mut edit: impl FnMut(OpId, &[(Offset, Value)]) -> Vec<(Offset, Value)>,
) -> History {
    edit_outcomes(history, |op, outcome| match outcome {
        Outcome::Read {
            records,
            high_watermark,
        } => Outcome::Read {
            records: edit(op, records),
            high_watermark: *high_watermark,
        },
        other => other.clone(),
    })
}

#[test]
fn reads_going_backwards_are_nonmonotonic_polls() {
    let mut caught = 0;
    for seed in 0..SEEDS {
        let run = generate(seed);
        let log = FinalLog::from(&run.model);
        let Some(target) = run
            .history
            .operations()
            .into_iter()
            .find_map(|o| match o.outcome {
                Some(Outcome::Read { records, .. }) if records.len() >= 2 => Some(o.id),
                _ => None,
            })
        else {
            continue;
        };
        let history = edit_reads(&run.history, |op, records| {
            let mut records = records.to_vec();
            if op == target {
                records.reverse();
            }
            records
        });
        let report = check(&history, &log, &CheckOptions::default());
        assert!(report.has(AnomalyKind::NonmonotonicPoll), "seed {seed}");
        assert!(!report.has(AnomalyKind::PollSkip), "seed {seed}");
        caught += 1;
    }
    assert!(
        caught > SEEDS / 2,
        "only {caught} seeds had a read to reverse"
    );
}

#[test]
fn reads_skipping_acknowledged_records_are_poll_skips() {
    let mut caught = 0;
    for seed in 0..SEEDS {
        let run = generate(seed);
        let log = FinalLog::from(&run.model);
        let operations = run.history.operations();
        // When each acknowledged offset's acknowledgement completed.
        let mut acked_ns = std::collections::BTreeMap::new();
        for o in &operations {
            if let (Op::Append { values }, Some(Outcome::Appended { base_offset }), Some(t)) =
                (&o.op, &o.outcome, o.complete_ns)
            {
                for i in 0..values.len() {
                    acked_ns.insert(base_offset + i as Offset, t);
                }
            }
        }
        // A read whose second record was acknowledged before the read began.
        let target = operations.iter().find_map(|o| match &o.outcome {
            Some(Outcome::Read { records, .. })
                if records.len() >= 3
                    && acked_ns
                        .get(&records[1].0)
                        .is_some_and(|&t| t < o.invoke_ns) =>
            {
                Some(o.id)
            }
            _ => None,
        });
        let Some(target) = target else {
            continue;
        };
        let history = edit_reads(&run.history, |op, records| {
            let mut records = records.to_vec();
            if op == target {
                records.remove(1);
            }
            records
        });
        let report = check(&history, &log, &CheckOptions::default());
        assert!(report.has(AnomalyKind::PollSkip), "seed {seed}");
        assert!(!report.has(AnomalyKind::NonmonotonicPoll), "seed {seed}");
        assert_eq!(report.count(AnomalyKind::PollSkip), 1, "seed {seed}");
        // The hole is also a hole, unless the topic may have them.
        assert_eq!(report.count(AnomalyKind::OffsetGap), 1, "seed {seed}");
        let report = check(&history, &log, &gaps_allowed());
        assert!(report.has(AnomalyKind::PollSkip), "seed {seed}");
        assert!(!report.has(AnomalyKind::OffsetGap), "seed {seed}");
        caught += 1;
    }
    assert!(caught > SEEDS / 4, "only {caught} seeds had a read to cut");
}

fn gaps_allowed() -> CheckOptions {
    CheckOptions {
        offsets_may_have_gaps: true,
        ..CheckOptions::default()
    }
}

fn highest_watermark(history: &History) -> Offset {
    history
        .operations()
        .iter()
        .filter_map(|o| match &o.outcome {
            Some(Outcome::Read { high_watermark, .. }) => Some(*high_watermark),
            _ => None,
        })
        .max()
        .unwrap_or(Offset::MIN)
}

/// The last successful read that some other successful read, completed
/// before it was invoked, reported a positive high watermark to: the op and
/// that watermark. Quadratic, which is fine at this size.
fn read_after_a_watermark(history: &History) -> Option<(OpId, Offset)> {
    let operations = history.operations();
    let reads: Vec<(OpId, u64, u64, Offset)> = operations
        .iter()
        .filter_map(|o| match (&o.outcome, o.complete_ns) {
            (Some(Outcome::Read { high_watermark, .. }), Some(t)) => {
                Some((o.id, o.invoke_ns, t, *high_watermark))
            }
            _ => None,
        })
        .collect();
    reads.iter().rev().find_map(|&(id, invoke_ns, _, _)| {
        let before = reads
            .iter()
            .filter(|&&(_, _, complete_ns, _)| complete_ns < invoke_ns)
            .map(|&(_, _, _, hw)| hw)
            .max()?;
        (before > 0).then_some((id, before))
    })
}

#[test]
fn watermarks_moving_back_are_caught_unless_a_restart_may_lose_them() {
    let mut caught = 0;
    for seed in 0..SEEDS {
        let run = generate(seed);
        let log = FinalLog::from(&run.model);
        let Some((target, before)) = read_after_a_watermark(&run.history) else {
            continue;
        };
        let lowered = |op: OpId, outcome: &Outcome| match outcome {
            Outcome::Read { records, .. } if op == target => Outcome::Read {
                records: records.clone(),
                high_watermark: before - 1,
            },
            other => other.clone(),
        };
        let history = edit_outcomes(&run.history, lowered);
        let report = check(&history, &log, &CheckOptions::default());
        assert!(report.has(AnomalyKind::Watermark), "seed {seed}");

        // A restart just before the read: still an anomaly by default, since
        // the watermark is durable; allowed where a restart may lose data.
        let restart_before = |id: OpId, event: &Event| {
            let mut events = Vec::new();
            if id == target {
                events.push(Event {
                    time_ns: event.time_ns,
                    process: 0,
                    kind: EventKind::Node(NodeEvent::Opened {
                        recovery_point: 0,
                        log_end_offset: before - 1,
                    }),
                });
            }
            let mut event = event.clone();
            if let EventKind::Complete { op, outcome } = &mut event.kind {
                *outcome = lowered(*op, outcome);
            }
            events.push(event);
            events
        };
        let history = rebuild(&run.history, restart_before);
        let report = check(&history, &log, &CheckOptions::default());
        assert!(report.has(AnomalyKind::Watermark), "seed {seed}");
        let regress = CheckOptions {
            watermark_may_regress: true,
            ..CheckOptions::default()
        };
        let report = check(&history, &log, &regress);
        assert!(!report.has(AnomalyKind::Watermark), "seed {seed}");
        caught += 1;
    }
    assert!(
        caught > SEEDS / 2,
        "only {caught} seeds had a read to lower"
    );
}

#[test]
fn records_served_at_the_watermark_are_caught() {
    let mut caught = 0;
    for seed in 0..SEEDS {
        let run = generate(seed);
        let log = FinalLog::from(&run.model);
        let target = run
            .history
            .operations()
            .into_iter()
            .find_map(|o| match o.outcome {
                Some(Outcome::Read { records, .. }) => {
                    records.last().map(|&(last, _)| (o.id, last))
                }
                _ => None,
            });
        let Some((target, last)) = target else {
            continue;
        };
        let history = edit_outcomes(&run.history, |op, outcome| match outcome {
            Outcome::Read { records, .. } if op == target => Outcome::Read {
                records: records.clone(),
                high_watermark: last,
            },
            other => other.clone(),
        });
        let report = check(&history, &log, &CheckOptions::default());
        assert_eq!(
            report.count(AnomalyKind::ServingAboveWatermark),
            1,
            "seed {seed}"
        );
        caught += 1;
    }
    assert!(
        caught > SEEDS / 2,
        "only {caught} seeds had a non-empty read"
    );
}

#[test]
fn holes_in_the_final_log_are_offset_gaps() {
    for seed in 0..SEEDS {
        let run = generate(seed);
        let log = FinalLog::from(&run.model);
        if log.records.len() < 3 {
            continue;
        }
        for position in [0, log.records.len() / 2] {
            let mut holed = log.clone();
            holed.records.remove(position);
            let report = check(&run.history, &holed, &CheckOptions::default());
            assert_eq!(report.count(AnomalyKind::OffsetGap), 1, "seed {seed}");
            let report = check(&run.history, &holed, &gaps_allowed());
            assert!(!report.has(AnomalyKind::OffsetGap), "seed {seed}");
        }
    }
}

/// The first corrupt read of the history that no open interrupted (none lies
/// between its invocation and its completion), with the recovery point of
/// the last open before it.
fn first_corrupt_read(history: &History) -> Option<(OpId, Offset)> {
    let mut recovery_point = 0;
    let mut opens = 0;
    let mut opens_at_invoke: BTreeMap<OpId, usize> = BTreeMap::new();
    history
        .events()
        .iter()
        .enumerate()
        .find_map(|(id, event)| match &event.kind {
            EventKind::Node(NodeEvent::Opened {
                recovery_point: point,
                ..
            }) => {
                recovery_point = *point;
                opens += 1;
                None
            }
            EventKind::Invoke(_) => {
                opens_at_invoke.insert(id, opens);
                None
            }
            EventKind::Complete {
                op,
                outcome: Outcome::CorruptRead { .. },
            } if opens_at_invoke.get(op) == Some(&opens) => Some((*op, recovery_point)),
            _ => None,
        })
}

#[test]
fn corrupt_reads_the_broker_should_have_refused_are_caught() {
    let mut caught = 0;
    for seed in 0..SEEDS {
        let run = generate(seed);
        let log = FinalLog::from(&run.model);
        let Some((target, recovery_point)) = first_corrupt_read(&run.history) else {
            continue;
        };
        // At the recovery point: recovery verified that batch.
        let history = edit_outcomes(&run.history, |op, outcome| match outcome {
            Outcome::CorruptRead { reason, .. } if op == target => Outcome::CorruptRead {
                offset: recovery_point,
                reason: reason.clone(),
            },
            other => other.clone(),
        });
        let report = check(&history, &log, &CheckOptions::default());
        assert_eq!(report.count(AnomalyKind::CorruptRead), 1, "seed {seed}");

        // Below it, but the broker had reported corruption there first.
        let offset = match &run.history.events().iter().find_map(|e| match &e.kind {
            EventKind::Complete { op, outcome } if *op == target => Some(outcome.clone()),
            _ => None,
        }) {
            Some(Outcome::CorruptRead { offset, .. }) => *offset,
            other => panic!("seed {seed}: op #{target} is not a corrupt read: {other:?}"),
        };
        let reported_first = |id: OpId, event: &Event| {
            let mut events = Vec::new();
            if id == target {
                events.push(Event {
                    time_ns: event.time_ns,
                    process: 0,
                    kind: EventKind::Node(NodeEvent::CorruptionFound { offset }),
                });
            }
            events.push(event.clone());
            events
        };
        let history = rebuild(&run.history, reported_first);
        let report = check(&history, &log, &CheckOptions::default());
        assert!(
            report.has(AnomalyKind::CorruptRead),
            "seed {seed}: op #{target} offset {offset}\n{}",
            report.summary()
        );
        caught += 1;
    }
    assert!(caught > SEEDS / 4, "only {caught} seeds had a corrupt read");
}

#[test]
fn a_final_log_serving_a_corrupt_batch_recovery_verified_is_caught() {
    for seed in 0..SEEDS {
        let run = generate(seed);
        let mut log = FinalLog::from(&run.model);
        let end = log.log_end_offset();
        if end < 2 {
            continue;
        }
        log.recovery_point = end / 2;
        log.corrupt_served_at = Some(end / 2 - 1);
        let report = check(&run.history, &log, &CheckOptions::default());
        assert!(report.is_valid(), "seed {seed}:\n{}", report.summary());
        log.corrupt_served_at = Some(end / 2);
        let report = check(&run.history, &log, &CheckOptions::default());
        assert_kinds_only(&report, AnomalyKind::CorruptRead, seed);
        log.corruption_reported_at = Some(end / 2);
        let report = check(&run.history, &log, &CheckOptions::default());
        assert!(report.is_valid(), "seed {seed}:\n{}", report.summary());
    }
}

fn assert_kinds_only(report: &Report, kind: AnomalyKind, seed: u64) {
    for other in AnomalyKind::ALL {
        assert_eq!(
            report.has(other),
            other == kind,
            "seed {seed}: {other}\n{}",
            report.summary()
        );
    }
}

// Consumer groups: histories generated from a reference group coordinator
// (`GroupModel`) with members that follow the classic protocol, checked by
// `check_groups`, then broken one way per checker.

const GROUP_SEEDS: u64 = 200;
const GROUP_STEPS: usize = 800;
const MEMBERS: usize = 3;
const GROUP_PARTITIONS: i32 = 3;
const GROUP: &str = "g";
/// The process of the admin that deletes offsets now and then.
const ADMIN: ProcessId = 99;
/// How many steps the healing phase may take to consume everything.
const HEALING_STEPS_MAX: usize = 20_000;

/// What one offset commit commits.
type Offsets = Vec<(TopicPartition, Offset)>;

fn group_tp(partition: i32) -> TopicPartition {
    TopicPartition::new("t", partition)
}

/// An operation a member has outstanding.
enum Pending {
    Join,
    Poll {
        tp: TopicPartition,
        from: Offset,
    },
    Commit {
        member_id: String,
        generation: Generation,
        offsets: Offsets,
    },
    Fetch {
        tps: Vec<TopicPartition>,
    },
}

/// What a member in the group does next.
enum Work {
    /// Fetch one partition from this position.
    Poll((TopicPartition, Offset)),
    /// Commit these positions.
    Commit(Offsets),
    /// Fetch the committed offsets of these partitions.
    Fetch(Vec<TopicPartition>),
}

/// A group member as it sees itself.
#[derive(Default)]
struct Member {
    /// Bumped whenever it must come back with a new member id.
    incarnation: u32,
    member_id: Option<String>,
    /// The generation and partitions it believes it owns.
    owned: Option<(Generation, Vec<TopicPartition>)>,
    /// Where it consumes each owned partition from, once it knows.
    positions: BTreeMap<TopicPartition, Offset>,
    pending: Option<(OpId, Pending)>,
    /// For a pending join: what the generation formed with it gave it.
    formed: Option<(String, Generation, Vec<TopicPartition>)>,
}

struct GroupRun {
    history: History,
    finals: BTreeMap<TopicPartition, FinalPartition>,
}

/// Members against a correct coordinator, with a log per partition that a
/// producer outside the history appends to. Operations take
/// effect at their completion (within their interval), except commits of
/// unknown outcome, which may land at once, later (still fenced by the
/// coordinator then) or never. A rebalance begins when a member joins or
/// leaves; the next generation forms once every current member has
/// rejoined, or without the stragglers, which become zombies until they
/// notice. A member noticing a rebalance gives up everything (eager) or
/// keeps it while it rejoins (as the cooperative protocol keeps partitions
/// that stay). The run ends with a healing phase without faults, in which
/// the group settles and consumes every partition to its end.
struct GroupSim {
    rng: Rng,
    history: History,
    time_ns: u64,
    group: GroupModel,
    logs: Vec<LogModel>,
    members: Vec<Member>,
    /// The members of the current generation, as the coordinator sees them.
    current: BTreeSet<usize>,
    /// The members whose join waits for the next generation.
    waiting: BTreeSet<usize>,
    rebalancing: bool,
    /// Commits of unknown outcome still on their way to the coordinator.
    in_flight: Vec<(String, Generation, Offsets)>,
    /// How many records the producer appended, which numbers the next one.
    appended: u32,
    healing: bool,
}

impl GroupSim {
    fn new(seed: u64) -> GroupSim {
        GroupSim {
            rng: Rng(seed),
            history: History::new(),
            time_ns: 0,
            group: GroupModel::new((0..GROUP_PARTITIONS).map(group_tp).collect()),
            logs: (0..GROUP_PARTITIONS).map(|_| LogModel::new()).collect(),
            members: (0..MEMBERS).map(|_| Member::default()).collect(),
            current: BTreeSet::new(),
            waiting: BTreeSet::new(),
            rebalancing: false,
            in_flight: Vec::new(),
            appended: 0,
            healing: false,
        }
    }

    fn process(i: usize) -> ProcessId {
        i as ProcessId + 1
    }

    fn log(&self, tp: &TopicPartition) -> &LogModel {
        &self.logs[tp.partition as usize]
    }

    /// A roll of the dice for a fault: never while healing.
    fn fault(&mut self, percent: u64) -> bool {
        !self.healing && self.rng.chance(percent)
    }

    fn step(&mut self) {
        self.time_ns += 1 + self.rng.below(100);
        if !self.healing {
            if self.rng.chance(15) {
                let p = self.rng.below(GROUP_PARTITIONS as u64) as usize;
                let len = 1 + self.rng.below(3) as u32;
                let values: Vec<Value> = (0..len)
                    .map(|k| Value::new(900, self.appended + k))
                    .collect();
                self.appended += len;
                self.logs[p].append(&values);
            }
            if self.rng.chance(1) {
                self.delete_offsets();
            }
            if self.rng.chance(4) && !self.in_flight.is_empty() {
                let k = self.rng.below(self.in_flight.len() as u64) as usize;
                let (member_id, generation, offsets) = self.in_flight.remove(k);
                // Fenced like any commit: a late one of an old generation is refused.
                let _ = self.group.commit(&member_id, generation, &offsets);
            }
        } else {
            self.in_flight.clear();
        }
        self.maybe_form();
        let i = self.rng.below(MEMBERS as u64) as usize;
        if self.members[i].pending.is_some() {
            self.complete(i);
        } else {
            self.act(i);
        }
    }

    /// An admin's OffsetDelete of every partition, answered at once; Kafka
    /// refuses it unless the group is empty.
    fn delete_offsets(&mut self) {
        let partitions: Vec<TopicPartition> = (0..GROUP_PARTITIONS).map(group_tp).collect();
        let op = Op::OffsetDelete {
            group: GROUP.into(),
            partitions: partitions.clone(),
        };
        let id = self.history.invoke(self.time_ns, ADMIN, op);
        self.time_ns += 1;
        let outcome = if self.rng.chance(10) {
            if self.rng.chance(50) {
                let _ = self.group.delete(&partitions);
            }
            unknown("timeout")
        } else {
            let result = match self.group.delete(&partitions) {
                Ok(()) => CommitResult::Acknowledged,
                Err(error) => CommitResult::Failed {
                    reason: error.to_string(),
                },
            };
            Outcome::Deleted {
                results: partitions
                    .into_iter()
                    .map(|tp| (tp, result.clone()))
                    .collect(),
            }
        };
        self.history.complete(self.time_ns, id, outcome);
    }

    fn maybe_form(&mut self) {
        if !self.rebalancing || self.waiting.is_empty() {
            return;
        }
        let all_in = self.current.is_subset(&self.waiting);
        if !(all_in && self.rng.chance(50) || self.fault(3)) {
            return;
        }
        let mut ids = Vec::new();
        for &i in &self.waiting {
            let member = &mut self.members[i];
            let incarnation = member.incarnation;
            ids.push(
                member
                    .member_id
                    .get_or_insert_with(|| format!("m{i}.{incarnation}"))
                    .clone(),
            );
        }
        let generation = self.group.rebalance(&ids);
        for (&i, id) in self.waiting.iter().zip(&ids) {
            let partitions = self.group.assignment(id).unwrap_or(&[]).to_vec();
            self.members[i].formed = Some((id.clone(), generation, partitions));
        }
        self.current = std::mem::take(&mut self.waiting);
        self.rebalancing = false;
    }

    fn invoke(&mut self, i: usize, op: Op, pending: Pending) {
        let id = self.history.invoke(self.time_ns, Self::process(i), op);
        self.members[i].pending = Some((id, pending));
    }

    fn join(&mut self, i: usize) {
        self.invoke(
            i,
            Op::Join {
                group: GROUP.into(),
            },
            Pending::Join,
        );
        self.waiting.insert(i);
        self.rebalancing = true;
    }

    /// The member gives up what it owns; with `new_id` it must come back as
    /// a new member (it left, or the coordinator forgot it).
    fn revoke(&mut self, i: usize, new_id: bool) {
        let member = &mut self.members[i];
        if let (Some((generation, _)), Some(member_id)) = (member.owned.take(), &member.member_id) {
            self.history.group(
                self.time_ns,
                Self::process(i),
                GroupEvent::Revoked {
                    group: GROUP.into(),
                    member_id: member_id.clone(),
                    generation,
                },
            );
        }
        member.positions.clear();
        if new_id {
            member.member_id = None;
            member.incarnation += 1;
        }
    }

    fn act(&mut self, i: usize) {
        let Some((generation, tps)) = self.members[i].owned.clone() else {
            self.join(i);
            return;
        };
        if !self.current.contains(&i) {
            // A zombie: it notices sooner or later that it was left out.
            if self.healing || self.rng.chance(30) {
                self.revoke(i, true);
            } else {
                self.work(i, generation, &tps);
            }
            return;
        }
        if self.rebalancing && !self.waiting.contains(&i) && (self.healing || self.rng.chance(40)) {
            if self.rng.chance(60) {
                self.revoke(i, false);
            }
            self.join(i);
            return;
        }
        if self.fault(2) {
            // Leaves the group; the others rebalance without it.
            self.revoke(i, true);
            self.current.remove(&i);
            self.rebalancing = true;
            return;
        }
        self.work(i, generation, &tps);
    }

    fn work(&mut self, i: usize, generation: Generation, tps: &[TopicPartition]) {
        let member = &self.members[i];
        let member_id = member.member_id.clone().unwrap_or_default();
        let unplaced: Vec<TopicPartition> = tps
            .iter()
            .filter(|tp| !member.positions.contains_key(*tp))
            .cloned()
            .collect();
        let positions: Offsets = member
            .positions
            .iter()
            .map(|(tp, &offset)| (tp.clone(), offset))
            .collect();
        let behind = positions
            .iter()
            .find(|(tp, offset)| *offset < self.log(tp).log_end_offset())
            .cloned();
        let uncommitted = positions
            .iter()
            .any(|(tp, offset)| self.group.fetch(tp) != Some(*offset));
        let work = if self.healing {
            if !unplaced.is_empty() {
                Work::Fetch(unplaced)
            } else if let Some(pick) = behind {
                Work::Poll(pick)
            } else if uncommitted {
                Work::Commit(positions)
            } else {
                return;
            }
        } else if !unplaced.is_empty() && self.rng.chance(50) {
            Work::Fetch(unplaced)
        } else {
            match self.rng.below(100) {
                0..=44 if !positions.is_empty() => {
                    let pick = self.rng.below(positions.len() as u64) as usize;
                    Work::Poll(positions[pick].clone())
                }
                45..=69 if !positions.is_empty() => Work::Commit(positions),
                70..=89 if !tps.is_empty() => Work::Fetch(tps.to_vec()),
                _ => return,
            }
        };
        match work {
            Work::Poll((tp, from)) => {
                let op = Op::Poll {
                    group: GROUP.into(),
                    member_id,
                    generation,
                    partition: tp.clone(),
                    from,
                };
                self.invoke(i, op, Pending::Poll { tp, from });
            }
            Work::Commit(offsets) => {
                let op = Op::OffsetCommit {
                    group: GROUP.into(),
                    member_id: member_id.clone(),
                    generation,
                    offsets: offsets.clone(),
                };
                let pending = Pending::Commit {
                    member_id,
                    generation,
                    offsets,
                };
                self.invoke(i, op, pending);
            }
            Work::Fetch(tps) => {
                let op = Op::OffsetFetch {
                    group: GROUP.into(),
                    partitions: tps.clone(),
                };
                self.invoke(i, op, Pending::Fetch { tps });
            }
        }
    }

    fn complete(&mut self, i: usize) {
        let Some((op, pending)) = self.members[i].pending.take() else {
            return;
        };
        let roll = if self.healing { 0 } else { self.rng.below(100) };
        let outcome = match pending {
            Pending::Join => {
                let Some((member_id, generation, partitions)) = self.members[i].formed.take()
                else {
                    // Not formed yet: the join goes on waiting.
                    self.members[i].pending = Some((op, Pending::Join));
                    return;
                };
                if roll < 85 {
                    let member = &mut self.members[i];
                    member.positions.retain(|tp, _| partitions.contains(tp));
                    member.owned = Some((generation, partitions.clone()));
                    member.member_id = Some(member_id.clone());
                    Outcome::Joined {
                        member_id,
                        generation,
                        partitions,
                    }
                } else {
                    // Its SyncGroup failed: it owns nothing, and rejoins.
                    self.revoke(i, false);
                    if roll < 95 {
                        failed("REBALANCE_IN_PROGRESS")
                    } else {
                        unknown("timeout")
                    }
                }
            }
            Pending::Poll { tp, from } => {
                if roll < 85 {
                    let max = 1 + self.rng.below(4) as usize;
                    let log = self.log(&tp);
                    let records = log.read(from, max).expect("positions stay within the log");
                    let high_watermark = log.log_end_offset();
                    if let Some(&(last, _)) = records.last() {
                        self.members[i].positions.insert(tp, last + 1);
                    }
                    Outcome::Read {
                        records,
                        high_watermark,
                    }
                } else if roll < 95 {
                    failed("NOT_LEADER_OR_FOLLOWER")
                } else {
                    unknown("timeout")
                }
            }
            Pending::Commit {
                member_id,
                generation,
                offsets,
            } => self.complete_commit(i, roll, &member_id, generation, &offsets),
            Pending::Fetch { tps } => {
                if roll < 85 {
                    let offsets: Vec<(TopicPartition, Option<Offset>)> = tps
                        .iter()
                        .map(|tp| (tp.clone(), self.group.fetch(tp)))
                        .collect();
                    let member = &mut self.members[i];
                    for (tp, committed) in &offsets {
                        let owned = member
                            .owned
                            .as_ref()
                            .is_some_and(|(_, owned)| owned.contains(tp));
                        if owned {
                            member
                                .positions
                                .entry(tp.clone())
                                .or_insert(committed.unwrap_or(0));
                        }
                    }
                    Outcome::Fetched { offsets }
                } else if roll < 95 {
                    failed("COORDINATOR_LOAD_IN_PROGRESS")
                } else {
                    unknown("timeout")
                }
            }
        };
        self.history.complete(self.time_ns, op, outcome);
    }

    fn complete_commit(
        &mut self,
        i: usize,
        roll: u64,
        member_id: &str,
        generation: Generation,
        offsets: &[(TopicPartition, Offset)],
    ) -> Outcome {
        if roll < 70 {
            return match self.group.commit(member_id, generation, offsets) {
                Ok(()) => Outcome::Committed {
                    results: offsets
                        .iter()
                        .map(|(tp, _)| (tp.clone(), CommitResult::Acknowledged))
                        .collect(),
                },
                Err(error) => {
                    // Fenced: it learns it is out of the generation.
                    self.revoke(i, error == GroupError::UnknownMemberId);
                    failed(&error.to_string())
                }
            };
        }
        if roll < 85 {
            let mut results = Vec::new();
            for (tp, offset) in offsets {
                let one = [(tp.clone(), *offset)];
                let result = match self.rng.below(10) {
                    0..=5 => match self.group.commit(member_id, generation, &one) {
                        Ok(()) => CommitResult::Acknowledged,
                        Err(error) => CommitResult::Failed {
                            reason: error.to_string(),
                        },
                    },
                    6 | 7 => {
                        self.commit_maybe(member_id, generation, &one);
                        CommitResult::Unknown {
                            reason: "REQUEST_TIMED_OUT".into(),
                        }
                    }
                    _ => CommitResult::Failed {
                        reason: "OFFSET_METADATA_TOO_LARGE".into(),
                    },
                };
                // Some answers leave a partition out: unknown to the checkers.
                if !self.rng.chance(10) {
                    results.push((tp.clone(), result));
                }
            }
            return Outcome::Committed { results };
        }
        if roll < 95 {
            self.commit_maybe(member_id, generation, offsets);
            return unknown("timeout");
        }
        failed("COORDINATOR_NOT_AVAILABLE")
    }

    /// A commit of unknown outcome: lands now, later, or never.
    fn commit_maybe(
        &mut self,
        member_id: &str,
        generation: Generation,
        offsets: &[(TopicPartition, Offset)],
    ) {
        match self.rng.below(3) {
            0 => {
                let _ = self.group.commit(member_id, generation, offsets);
            }
            1 => self
                .in_flight
                .push((member_id.to_string(), generation, offsets.to_vec())),
            _ => {}
        }
    }

    /// Whether the group has settled: one generation every member holds,
    /// nothing outstanding, every partition consumed to its end and committed.
    fn settled(&self) -> bool {
        !self.rebalancing
            && self.members.iter().enumerate().all(|(i, m)| {
                m.pending.is_none()
                    && self.current.contains(&i)
                    && m.owned
                        .as_ref()
                        .is_some_and(|(generation, _)| *generation == self.group.generation())
            })
            && (0..GROUP_PARTITIONS).map(group_tp).all(|tp| {
                let end = self.log(&tp).log_end_offset();
                self.group.fetch(&tp).unwrap_or(0) == end
                    && self
                        .members
                        .iter()
                        .any(|m| m.positions.get(&tp) == Some(&end))
            })
    }
}

fn failed(reason: &str) -> Outcome {
    Outcome::Failed {
        reason: reason.into(),
    }
}

fn unknown(reason: &str) -> Outcome {
    Outcome::Unknown {
        reason: reason.into(),
    }
}

fn generate_group(seed: u64) -> GroupRun {
    let mut sim = GroupSim::new(seed);
    for _ in 0..GROUP_STEPS {
        sim.step();
    }
    sim.healing = true;
    let mut steps = 0;
    while !sim.settled() {
        assert!(
            steps < HEALING_STEPS_MAX,
            "seed {seed}: the group did not settle while healing"
        );
        sim.step();
        steps += 1;
    }
    let finals = (0..GROUP_PARTITIONS)
        .map(|p| {
            let tp = group_tp(p);
            let log = FinalLog::from(sim.log(&tp));
            let high_watermark = log.log_end_offset();
            (
                tp,
                FinalPartition {
                    log,
                    high_watermark,
                },
            )
        })
        .collect();
    GroupRun {
        history: sim.history,
        finals,
    }
}

fn settled_groups() -> CheckOptions {
    CheckOptions {
        groups_stable_at_end: true,
        ..CheckOptions::default()
    }
}

fn check_group_run(history: &History, finals: &BTreeMap<TopicPartition, FinalPartition>) -> Report {
    let mut report = Report::default();
    check_groups(history, finals, &settled_groups(), &mut report);
    report
}

#[test]
fn group_model_histories_are_valid() {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for seed in 0..GROUP_SEEDS {
        let run = generate_group(seed);
        let report = check_group_run(&run.history, &run.finals);
        assert!(report.is_valid(), "seed {seed}:\n{}", report.summary());
        // The partition checkers leave group operations alone.
        let report = check(&run.history, &FinalLog::default(), &CheckOptions::default());
        assert!(report.is_valid(), "seed {seed}:\n{}", report.summary());
        let operations = run.history.operations();
        let mut generations = BTreeSet::new();
        for o in &operations {
            let kind = match (&o.op, &o.outcome) {
                (Op::Join { .. }, Some(Outcome::Joined { generation, .. })) => {
                    generations.insert(*generation);
                    "joins"
                }
                (Op::OffsetCommit { .. }, Some(Outcome::Committed { results })) => {
                    if results
                        .iter()
                        .any(|(_, r)| matches!(r, CommitResult::Unknown { .. }))
                    {
                        "partly unknown commits"
                    } else {
                        "answered commits"
                    }
                }
                (Op::OffsetCommit { .. }, Some(Outcome::Failed { reason }))
                    if reason == "ILLEGAL_GENERATION" || reason == "UNKNOWN_MEMBER_ID" =>
                {
                    "fenced commits"
                }
                (Op::OffsetCommit { .. }, Some(Outcome::Unknown { .. })) => "unknown commits",
                (Op::OffsetFetch { .. }, Some(Outcome::Fetched { .. })) => "fetches",
                (Op::OffsetDelete { .. }, Some(Outcome::Deleted { results })) => {
                    if results
                        .iter()
                        .all(|(_, r)| *r == CommitResult::Acknowledged)
                    {
                        "deletes"
                    } else {
                        "refused deletes"
                    }
                }
                (Op::Poll { .. }, Some(Outcome::Read { .. })) => "polls",
                _ => continue,
            };
            *counts.entry(kind).or_default() += 1;
        }
        *counts.entry("generations").or_default() += generations.len() as u64;
        *counts.entry("revocations").or_default() += run
            .history
            .events()
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Group(_)))
            .count() as u64;
    }
    // The valid runs must exercise what the checkers judge.
    for (kind, at_least) in [
        ("joins", 5),
        ("generations", 3),
        ("answered commits", 5),
        ("partly unknown commits", 1),
        ("fenced commits", 1),
        ("unknown commits", 1),
        ("fetches", 5),
        ("polls", 10),
        ("refused deletes", 2),
        ("revocations", 2),
    ] {
        let count = counts.get(kind).copied().unwrap_or(0);
        assert!(
            count >= at_least * GROUP_SEEDS,
            "only {count} {kind} in {GROUP_SEEDS} seeds: {counts:?}"
        );
    }
}

/// An ok join: (op, process, invoke, complete, member id, generation, partitions).
type JoinRow = (
    OpId,
    ProcessId,
    u64,
    u64,
    String,
    Generation,
    Vec<TopicPartition>,
);

fn ok_joins(history: &History) -> Vec<JoinRow> {
    history
        .operations()
        .into_iter()
        .filter_map(|o| match (o.outcome, o.complete_ns) {
            (
                Some(Outcome::Joined {
                    member_id,
                    generation,
                    partitions,
                }),
                Some(complete_ns),
            ) => Some((
                o.id,
                o.process,
                o.invoke_ns,
                complete_ns,
                member_id,
                generation,
                partitions,
            )),
            _ => None,
        })
        .collect()
}

/// Breaks each seed's group run one way and asserts that `kind` is
/// reported for every broken history: `mutate` returns them (none if the
/// run has nothing to break that way). More than `GROUP_SEEDS / share` seeds
/// must have had something to break.
fn each_group_run_broken<Broken: IntoIterator<Item = History>>(
    kind: AnomalyKind,
    share: u64,
    mut mutate: impl FnMut(&GroupRun) -> Broken,
) {
    let mut broken_seeds = 0;
    for seed in 0..GROUP_SEEDS {
        let run = generate_group(seed);
        let broken: Vec<History> = mutate(&run).into_iter().collect();
        for history in &broken {
            let report = check_group_run(history, &run.finals);
            assert!(
                report.has(kind),
                "seed {seed}: {kind} expected\n{}",
                report.summary()
            );
        }
        broken_seeds += u64::from(!broken.is_empty());
    }
    assert!(
        broken_seeds > GROUP_SEEDS / share,
        "only {broken_seeds} of {GROUP_SEEDS} seeds had something to break into {kind}"
    );
}

/// A copy of `history` whose join `target` reports what `edit` makes of its
/// generation and partitions.
fn edit_join(
    history: &History,
    target: OpId,
    edit: impl Fn(Generation, &[TopicPartition]) -> (Generation, Vec<TopicPartition>),
) -> History {
    edit_outcomes(history, |op, outcome| match outcome {
        Outcome::Joined {
            member_id,
            generation,
            partitions,
        } if op == target => {
            let (generation, partitions) = edit(*generation, partitions);
            Outcome::Joined {
                member_id: member_id.clone(),
                generation,
                partitions,
            }
        }
        other => other.clone(),
    })
}

/// A copy of `history` whose fetches answer for `tp` what `edit` makes of
/// the op and the offset they answered.
fn edit_fetched(
    history: &History,
    tp: &TopicPartition,
    edit: impl Fn(OpId, Option<Offset>) -> Option<Offset>,
) -> History {
    edit_outcomes(history, |op, outcome| match outcome {
        Outcome::Fetched { offsets } => Outcome::Fetched {
            offsets: offsets
                .iter()
                .map(|(t, offset)| {
                    let offset = if t == tp { edit(op, *offset) } else { *offset };
                    (t.clone(), offset)
                })
                .collect(),
        },
        other => other.clone(),
    })
}

#[test]
fn a_partition_given_to_a_second_owner_is_a_split_assignment() {
    each_group_run_broken(AnomalyKind::SplitAssignment, 2, |run| {
        let joins = ok_joins(&run.history);
        // Two members of one generation; the second also gets the first's partition.
        let target = joins.iter().find_map(|a| {
            let stolen = a.6.first()?;
            joins
                .iter()
                .find(|b| b.5 == a.5 && (b.1, &b.4) != (a.1, &a.4) && !b.6.contains(stolen))
                .map(|b| (b.0, stolen.clone()))
        });
        target.map(|(target, stolen)| {
            edit_join(&run.history, target, |generation, partitions| {
                let mut partitions = partitions.to_vec();
                partitions.push(stolen.clone());
                (generation, partitions)
            })
        })
    });
}

#[test]
fn a_join_below_a_completed_generation_is_a_generation_regress() {
    each_group_run_broken(AnomalyKind::GenerationRegress, 2, |run| {
        let joins = ok_joins(&run.history);
        // The last join invoked after another completed with a positive generation.
        let target = joins.iter().rev().find_map(|later| {
            let before = joins
                .iter()
                .filter(|earlier| earlier.3 < later.2)
                .map(|earlier| earlier.5)
                .max()?;
            (before > 0).then_some((later.0, before - 1))
        });
        target.map(|(target, lowered)| {
            edit_join(&run.history, target, |_, partitions| {
                (lowered, partitions.to_vec())
            })
        })
    });
}

#[test]
fn a_fenced_commit_acknowledged_is_a_zombie_commit() {
    each_group_run_broken(AnomalyKind::ZombieCommit, 2, |run| {
        let joins = ok_joins(&run.history);
        let target = run
            .history
            .operations()
            .into_iter()
            .find_map(|o| match (&o.op, &o.outcome) {
                (
                    Op::OffsetCommit {
                        generation,
                        offsets,
                        ..
                    },
                    Some(Outcome::Failed { .. }),
                ) if joins.iter().any(|j| j.3 < o.invoke_ns && j.5 > *generation) => {
                    Some((o.id, offsets.clone()))
                }
                _ => None,
            });
        let Some((target, offsets)) = target else {
            return vec![];
        };
        let acknowledged = Outcome::Committed {
            results: offsets
                .iter()
                .map(|(tp, _)| (tp.clone(), CommitResult::Acknowledged))
                .collect(),
        };
        vec![edit_outcomes(&run.history, |op, outcome| {
            if op == target {
                acknowledged.clone()
            } else {
                outcome.clone()
            }
        })]
    });
}

/// The first ok fetch answering a partition whose commit had been
/// acknowledged before the fetch was invoked, and which no offset delete
/// that may have taken effect was invoked before: the fetch op and partition.
fn fetch_after_an_acknowledged_commit(history: &History) -> Option<(OpId, TopicPartition)> {
    let operations = history.operations();
    let first_delete = operations
        .iter()
        .filter(|o| match (&o.op, &o.outcome) {
            (Op::OffsetDelete { .. }, Some(Outcome::Deleted { results })) => results
                .iter()
                .any(|(_, r)| !matches!(r, CommitResult::Failed { .. })),
            (Op::OffsetDelete { .. }, Some(Outcome::Failed { .. })) => false,
            (Op::OffsetDelete { .. }, _) => true,
            _ => false,
        })
        .map(|o| o.invoke_ns)
        .min()
        .unwrap_or(u64::MAX);
    let mut acknowledged: BTreeMap<TopicPartition, u64> = BTreeMap::new();
    for o in &operations {
        if let (Op::OffsetCommit { offsets, .. }, Some(Outcome::Committed { results }), Some(t)) =
            (&o.op, &o.outcome, o.complete_ns)
        {
            for (tp, result) in results {
                if *result == CommitResult::Acknowledged && offsets.iter().any(|(c, _)| c == tp) {
                    let first = acknowledged.entry(tp.clone()).or_insert(t);
                    *first = (*first).min(t);
                }
            }
        }
    }
    operations.iter().find_map(|o| match &o.outcome {
        Some(Outcome::Fetched { offsets }) => offsets.iter().find_map(|(tp, offset)| {
            (offset.is_some()
                && o.complete_ns.is_some_and(|t| t < first_delete)
                && acknowledged.get(tp).is_some_and(|&t| t < o.invoke_ns))
            .then(|| (o.id, tp.clone()))
        }),
        _ => None,
    })
}

#[test]
fn a_fetch_losing_or_inventing_a_commit_is_a_lost_commit() {
    each_group_run_broken(AnomalyKind::LostCommit, 2, |run| {
        let Some((target, tp)) = fetch_after_an_acknowledged_commit(&run.history) else {
            return vec![];
        };
        [|_: Offset| None, |v: Offset| Some(v + 1_000_000)]
            .into_iter()
            .map(|replace| {
                edit_fetched(&run.history, &tp, |op, offset| match offset {
                    Some(v) if op == target => replace(v),
                    other => other,
                })
            })
            .collect()
    });
}

/// Ok fetches of one partition: (op, invocation, offset answered).
type Sightings = Vec<(OpId, u64, Offset)>;

/// Two ok fetches of one partition by one member, F1 then F2, within one
/// ownership of it (from the join that gave it, across joins that kept it,
/// until a revocation or a join without it) and before any newer generation
/// was joined, answering offsets a < b, where the member made no commit of a
/// in that ownership that could land after F1 was invoked: (F1, F2, the
/// partition).
fn fetches_to_swap(history: &History) -> Option<(OpId, OpId, TopicPartition)> {
    let joins = ok_joins(history);
    let operations = history.operations();
    let by_id: BTreeMap<OpId, &samsa_spec::Operation> =
        operations.iter().map(|o| (o.id, o)).collect();
    // Per process: its member id and generation, and per partition it owns
    // the join that began the ownership.
    let mut owner: BTreeMap<ProcessId, (String, Generation, BTreeMap<TopicPartition, OpId>)> =
        BTreeMap::new();
    // Per (ownership, partition): the ok fetches so far.
    let mut fetched: BTreeMap<(OpId, TopicPartition), Sightings> = BTreeMap::new();
    // Per (ownership, partition, offset): the latest time an own commit of it may land.
    let mut own: BTreeMap<(OpId, TopicPartition, Offset), u64> = BTreeMap::new();
    for event in history.events() {
        let (op, outcome) = match &event.kind {
            EventKind::Group(GroupEvent::Revoked { .. }) => {
                owner.remove(&event.process);
                continue;
            }
            EventKind::Complete { op, outcome } => (*op, outcome),
            _ => continue,
        };
        let o = by_id[&op];
        if let Outcome::Joined {
            member_id,
            generation,
            partitions,
        } = outcome
        {
            let kept = owner
                .remove(&event.process)
                .filter(|(id, _, _)| id == member_id)
                .map(|(_, _, spans)| spans)
                .unwrap_or_default();
            let spans = partitions
                .iter()
                .map(|tp| (tp.clone(), kept.get(tp).copied().unwrap_or(op)))
                .collect();
            owner.insert(event.process, (member_id.clone(), *generation, spans));
            continue;
        }
        let Some((_, generation, spans)) = owner.get(&event.process) else {
            continue;
        };
        match (&o.op, outcome) {
            (Op::OffsetCommit { offsets, .. }, outcome) => {
                for (tp, offset) in offsets {
                    let Some(&span) = spans.get(tp) else { continue };
                    let until = match outcome {
                        Outcome::Committed { results } => {
                            match results.iter().find(|(t, _)| t == tp) {
                                Some((_, CommitResult::Acknowledged)) => event.time_ns,
                                Some((_, CommitResult::Failed { .. })) => continue,
                                _ => u64::MAX,
                            }
                        }
                        Outcome::Failed { .. } => continue,
                        _ => u64::MAX,
                    };
                    let entry = own.entry((span, tp.clone(), *offset)).or_insert(until);
                    *entry = (*entry).max(until);
                }
            }
            (Op::OffsetFetch { .. }, Outcome::Fetched { offsets }) => {
                let newest = joins
                    .iter()
                    .filter(|j| j.2 <= event.time_ns)
                    .map(|j| j.5)
                    .max();
                if newest.is_some_and(|newest| newest > *generation) {
                    continue;
                }
                for (tp, offset) in offsets {
                    let (Some(b), Some(&span)) = (*offset, spans.get(tp)) else {
                        continue;
                    };
                    let earlier = fetched.entry((span, tp.clone())).or_default();
                    let swap = earlier.iter().find(|&&(_, invoke, a)| {
                        a < b
                            && own
                                .get(&(span, tp.clone(), a))
                                .is_none_or(|&until| until < invoke)
                    });
                    if let Some(&(first, _, _)) = swap {
                        return Some((first, op, tp.clone()));
                    }
                    earlier.push((op, o.invoke_ns, b));
                }
            }
            _ => {}
        }
    }
    None
}

#[test]
fn fetch_results_swapped_within_an_ownership_are_a_commit_regress() {
    each_group_run_broken(AnomalyKind::CommitRegress, 4, |run| {
        let Some((first, second, tp)) = fetches_to_swap(&run.history) else {
            return vec![];
        };
        let answered = |target: OpId| {
            run.history.events().iter().find_map(|e| match &e.kind {
                EventKind::Complete {
                    op,
                    outcome: Outcome::Fetched { offsets },
                } if *op == target => offsets.iter().find(|(t, _)| *t == tp).map(|(_, v)| *v),
                _ => None,
            })
        };
        let (a, b) = (answered(first).flatten(), answered(second).flatten());
        vec![edit_fetched(&run.history, &tp, |op, offset| {
            if op == first {
                b
            } else if op == second {
                a
            } else {
                offset
            }
        })]
    });
}

#[test]
fn a_record_no_member_polled_is_unseen_in_a_settled_group() {
    for seed in 0..GROUP_SEEDS / 4 {
        let run = generate_group(seed);
        let mut finals = run.finals.clone();
        let last = finals.get_mut(&group_tp(0)).expect("partition 0");
        let end = last.log.log_end_offset();
        last.log.records.push((end, Value::new(999, 0)));
        last.high_watermark = end + 1;
        let report = check_group_run(&run.history, &finals);
        assert_eq!(report.count(AnomalyKind::Unseen), 1, "seed {seed}");
        let mut unsettled = Report::default();
        check_groups(
            &run.history,
            &finals,
            &CheckOptions::default(),
            &mut unsettled,
        );
        assert!(
            unsettled.is_valid(),
            "seed {seed}:\n{}",
            unsettled.summary()
        );
    }
}
