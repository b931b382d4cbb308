//! Linearizability of a replicated register whose operations are ordered by a log.
//!
//! Clients invoke writes, reads and compare-and-sets; each completes ok with a result,
//! fails (definitely not applied), or has an unknown outcome. The committed log, read after
//! the run, gives the order in which the state machine applied the operations it holds. The
//! history is linearizable exactly when there is one total order of the operations, consistent
//! with real time (an operation that completed before another was invoked comes first), in
//! which every ok result is what the sequential register returns. For operations in the log,
//! the log is that order; an ok read answered without the log must fit between the log
//! positions real time allows. So the check is linear, not the general NP-hard search:
//!
//! - duplicate-op: an operation applied twice;
//! - lost-op: an ok write or compare-and-set missing from the log;
//! - failed-applied: a failed operation in the log;
//! - wrong-result: an ok result other than the log-order replay's;
//! - realtime-order: two logged operations in the log against their real-time order;
//! - stale-read: an ok read, off the log, of a value the register held at no position its
//!   real time allows.

use std::collections::BTreeMap;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterOp {
    Write(u64),
    Read,
    Cas { from: u64, to: u64 },
}

impl RegisterOp {
    /// The operation as a log record of the test state machine: `<id> w <v>`, `<id> r`,
    /// `<id> c <from> <to>`.
    pub fn encode(self, id: u64) -> Vec<u8> {
        match self {
            RegisterOp::Write(v) => format!("{id} w {v}"),
            RegisterOp::Read => format!("{id} r"),
            RegisterOp::Cas { from, to } => format!("{id} c {from} {to}"),
        }
        .into_bytes()
    }

    /// The operation id and operation of a record [`RegisterOp::encode`] wrote; `None` for
    /// any other bytes.
    pub fn decode(bytes: &[u8]) -> Option<(u64, RegisterOp)> {
        let text = std::str::from_utf8(bytes).ok()?;
        let words: Vec<&str> = text.split(' ').collect();
        let id = words.first()?.parse().ok()?;
        let number = |i: usize| words.get(i).and_then(|w| w.parse::<u64>().ok());
        let op = match *words.get(1)? {
            "w" => RegisterOp::Write(number(2)?),
            "r" => RegisterOp::Read,
            "c" => RegisterOp::Cas {
                from: number(2)?,
                to: number(3)?,
            },
            _ => return None,
        };
        Some((id, op))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterResult {
    Written,
    Read(Option<u64>),
    Cas(bool),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok(RegisterResult),
    Failed,
    Unknown,
}

/// One client operation as the client saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientOp {
    pub id: u64,
    pub op: RegisterOp,
    pub invoked_ms: u64,
    /// When the client learned the outcome; `None` for an unknown one.
    pub completed_ms: Option<u64>,
    pub outcome: Outcome,
}

/// The sequential register: the value and the result of applying `op`.
pub fn apply(value: Option<u64>, op: RegisterOp) -> (Option<u64>, RegisterResult) {
    match op {
        RegisterOp::Write(v) => (Some(v), RegisterResult::Written),
        RegisterOp::Read => (value, RegisterResult::Read(value)),
        RegisterOp::Cas { from, to } => {
            if value == Some(from) {
                (Some(to), RegisterResult::Cas(true))
            } else {
                (value, RegisterResult::Cas(false))
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterAnomaly {
    pub name: &'static str,
    pub op: u64,
    pub detail: String,
}

impl fmt::Display for RegisterAnomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: operation {}: {}", self.name, self.op, self.detail)
    }
}

/// Judges `ops` against `log`, the ids of the applied operations in log order.
pub fn check(ops: &[ClientOp], log: &[u64]) -> Vec<RegisterAnomaly> {
    let mut anomalies = Vec::new();
    let by_id: BTreeMap<u64, &ClientOp> = ops.iter().map(|o| (o.id, o)).collect();
    let mut position: BTreeMap<u64, usize> = BTreeMap::new();
    // values[p] is the register after the first p logged operations.
    let mut values = vec![None];
    let mut value = None;
    for (p, id) in log.iter().enumerate() {
        if position.contains_key(id) {
            anomalies.push(RegisterAnomaly {
                name: "duplicate-op",
                op: *id,
                detail: format!("applied again at log position {p}"),
            });
            // Judged once, where it was first applied.
            values.push(value);
            continue;
        }
        position.insert(*id, p);
        let Some(op) = by_id.get(id) else {
            values.push(value);
            continue;
        };
        let (next, result) = apply(value, op.op);
        value = next;
        values.push(value);
        match op.outcome {
            Outcome::Failed => anomalies.push(RegisterAnomaly {
                name: "failed-applied",
                op: *id,
                detail: format!("reported failed, applied at log position {p}"),
            }),
            Outcome::Ok(seen) if seen != result => anomalies.push(RegisterAnomaly {
                name: "wrong-result",
                op: *id,
                detail: format!("returned {seen:?}; in log order it returns {result:?}"),
            }),
            _ => {}
        }
    }
    // Real time against the log, in one pass: no operation may be logged after one that was
    // invoked after it completed (the latest invocation logged so far is the one to beat).
    let logged: Vec<&ClientOp> = log
        .iter()
        .enumerate()
        .filter(|(p, id)| position.get(id) == Some(p))
        .filter_map(|(_, id)| by_id.get(id).copied())
        .collect();
    let mut latest_invoked_before: Option<&ClientOp> = None;
    for op in &logged {
        if let (Some(earlier), Some(completed)) = (latest_invoked_before, op.completed_ms) {
            if earlier.invoked_ms > completed {
                anomalies.push(RegisterAnomaly {
                    name: "realtime-order",
                    op: op.id,
                    detail: format!(
                        "completed at {completed} ms but logged after operation {}, invoked at {} ms",
                        earlier.id, earlier.invoked_ms
                    ),
                });
            }
        }
        if latest_invoked_before.is_none_or(|e| op.invoked_ms > e.invoked_ms) {
            latest_invoked_before = Some(op);
        }
    }
    for op in ops {
        let logged = position.contains_key(&op.id);
        match (op.outcome, op.op, logged) {
            (Outcome::Ok(_), RegisterOp::Write(_) | RegisterOp::Cas { .. }, false) => {
                anomalies.push(RegisterAnomaly {
                    name: "lost-op",
                    op: op.id,
                    detail: "acknowledged, not in the committed log".to_string(),
                });
            }
            (Outcome::Ok(RegisterResult::Read(seen)), RegisterOp::Read, false) => {
                if let Some(anomaly) = unlogged_read(op, seen, log, &by_id, &values) {
                    anomalies.push(anomaly);
                }
            }
            _ => {}
        }
    }
    anomalies
}

/// An ok read answered off the log must have seen the value after some log prefix that
/// real time allows: at least every logged operation that completed before it was invoked,
/// and none invoked after it completed.
fn unlogged_read(
    read: &ClientOp,
    seen: Option<u64>,
    log: &[u64],
    by_id: &BTreeMap<u64, &ClientOp>,
    values: &[Option<u64>],
) -> Option<RegisterAnomaly> {
    let completed = read.completed_ms?;
    let mut lowest = 0;
    let mut highest = log.len();
    for (p, id) in log.iter().enumerate() {
        let Some(op) = by_id.get(id) else { continue };
        if op.completed_ms.is_some_and(|c| c < read.invoked_ms) {
            lowest = lowest.max(p + 1);
        }
        if op.invoked_ms > completed {
            highest = highest.min(p);
        }
    }
    if lowest <= highest && values[lowest..=highest].contains(&seen) {
        return None;
    }
    Some(RegisterAnomaly {
        name: "stale-read",
        op: read.id,
        detail: format!(
            "read {seen:?}, which the register held after none of log prefixes {lowest}..={highest}"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(id: u64, op: RegisterOp, at: (u64, u64), outcome: Outcome) -> ClientOp {
        ClientOp {
            id,
            op,
            invoked_ms: at.0,
            completed_ms: Some(at.1),
            outcome,
        }
    }

    const W: Outcome = Outcome::Ok(RegisterResult::Written);

    #[test]
    fn a_log_ordered_history_passes_and_each_rule_fires() {
        let ops = vec![
            op(1, RegisterOp::Write(5), (0, 10), W),
            op(
                2,
                RegisterOp::Cas { from: 5, to: 6 },
                (11, 20),
                Outcome::Ok(RegisterResult::Cas(true)),
            ),
            op(
                3,
                RegisterOp::Read,
                (21, 30),
                Outcome::Ok(RegisterResult::Read(Some(6))),
            ),
            // An off-log read concurrent with op 2 may see 5 or 6.
            op(
                4,
                RegisterOp::Read,
                (15, 16),
                Outcome::Ok(RegisterResult::Read(Some(5))),
            ),
        ];
        assert_eq!(check(&ops, &[1, 2, 3]), vec![]);

        let names = |ops: &[ClientOp], log: &[u64]| -> Vec<&'static str> {
            check(ops, log).iter().map(|a| a.name).collect()
        };
        // Reordered against real time: 2 before 1, and 2's result is then wrong.
        assert_eq!(
            names(&ops, &[2, 1, 3]),
            vec!["wrong-result", "wrong-result", "realtime-order"]
        );
        assert_eq!(names(&ops, &[1, 2, 3, 2]), vec!["duplicate-op"]);
        assert_eq!(names(&ops, &[1, 3]), vec!["wrong-result", "lost-op"]);
        let mut stale = ops.clone();
        stale[3] = op(
            4,
            RegisterOp::Read,
            (25, 26),
            Outcome::Ok(RegisterResult::Read(Some(5))),
        );
        assert_eq!(names(&stale, &[1, 2, 3]), vec!["stale-read"]);
        let mut failed = ops.clone();
        failed.push(op(5, RegisterOp::Write(9), (40, 41), Outcome::Failed));
        assert_eq!(names(&failed, &[1, 2, 3, 5]), vec!["failed-applied"]);
        // Unknown outcomes may or may not be applied.
        let mut unknown = ops;
        unknown.push(ClientOp {
            id: 6,
            op: RegisterOp::Write(1),
            invoked_ms: 40,
            completed_ms: None,
            outcome: Outcome::Unknown,
        });
        assert_eq!(check(&unknown, &[1, 2, 3, 6]), vec![]);
        assert_eq!(check(&unknown, &[1, 2, 3]), vec![]);
    }
}
