//! Checks the checkers against histories generated from the reference model.
//!
//! A history produced by running concurrent processes against `LogModel` is
//! correct by construction, so every check of it must pass; each way of
//! breaking its final log or its reads must then be caught under the right
//! name. This
//! guards against false positives, which would make the simulation useless,
//! as much as against missed anomalies.

use samsa_spec::{
    check, AnomalyKind, CheckOptions, FinalLog, History, LogModel, Offset, Op, OpId, Outcome,
    ProcessId, Value,
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
/// random, and failed ones never do.
fn generate(seed: u64) -> Run {
    let mut rng = Rng(seed);
    let mut history = History::new();
    let mut model = LogModel::new();
    let mut acked = Vec::new();
    let mut outstanding: Vec<Option<OpId>> = vec![None; PROCESSES as usize];
    let mut next_seq = vec![0u32; PROCESSES as usize];
    let mut time_ns = 0u64;
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
                    samsa_spec::EventKind::Invoke(Op::Append { values }) => {
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
                    samsa_spec::EventKind::Invoke(Op::Read { from }) => {
                        let max = 1 + rng.below(READ_RECORDS_MAX) as usize;
                        match model.read(*from, max) {
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
    }
    // Operations still outstanding never complete; their appends may have landed.
    for id in outstanding.into_iter().flatten() {
        if let samsa_spec::EventKind::Invoke(Op::Append { values }) = &history.events()[id].kind {
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
    for seed in 0..SEEDS {
        let run = generate(seed);
        let report = check(
            &run.history,
            &FinalLog::from(&run.model),
            &CheckOptions::default(),
        );
        assert!(report.is_valid(), "seed {seed}:\n{}", report.summary());
        assert!(report.ops_ok > 0, "seed {seed} exercised nothing");
    }
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

/// A copy of `history` with each read's records passed through `edit`, which
/// gets the read's op id and records.
fn edit_reads(
    history: &History,
    mut edit: impl FnMut(OpId, &[(Offset, Value)]) -> Vec<(Offset, Value)>,
) -> History {
    let mut copy = History::new();
    for event in history.events() {
        match &event.kind {
            samsa_spec::EventKind::Invoke(op) => {
                copy.invoke(event.time_ns, event.process, op.clone());
            }
            samsa_spec::EventKind::Complete { op, outcome } => {
                let outcome = match outcome {
                    Outcome::Read {
                        records,
                        high_watermark,
                    } => Outcome::Read {
                        records: edit(*op, records),
                        high_watermark: *high_watermark,
                    },
                    other => other.clone(),
                };
                copy.complete(event.time_ns, *op, outcome);
            }
            samsa_spec::EventKind::Note(text) => copy.note(event.time_ns, event.process, text),
            samsa_spec::EventKind::Node(node) => {
                copy.node(event.time_ns, event.process, node.clone())
            }
        }
    }
    copy
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
        caught += 1;
    }
    assert!(caught > SEEDS / 4, "only {caught} seeds had a read to cut");
}
