//! Checks the checkers against histories generated from the reference model.
//!
//! A history produced by running concurrent processes against `LogModel` is
//! correct by construction, so every check of it must pass; each way of
//! breaking its final log or its reads must then be caught under the right
//! name. This
//! guards against false positives, which would make the simulation useless,
//! as much as against missed anomalies.

use std::collections::BTreeMap;

use samsa_spec::{
    check, AnomalyKind, CheckOptions, Event, EventKind, FinalLog, History, LogModel, NodeEvent,
    Offset, Op, OpId, Outcome, ProcessId, Value,
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

fn assert_kinds_only(report: &samsa_spec::Report, kind: AnomalyKind, seed: u64) {
    for other in AnomalyKind::ALL {
        assert_eq!(
            report.has(other),
            other == kind,
            "seed {seed}: {other}\n{}",
            report.summary()
        );
    }
}
