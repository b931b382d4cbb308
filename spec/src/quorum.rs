//! What a Raft quorum guarantees, judged over what each node reported while it ran and its
//! log as read after the run. Nothing here knows how the quorum is built: a node is an id,
//! an entry is the epoch it was written in and a digest of its content.
//!
//! The properties (Raft's, in KRaft's words):
//! - election-safety: at most one node leads an epoch;
//! - epoch-regress: a node's epoch never decreases, also across its restarts;
//! - committed-diverge: an offset, once committed anywhere, holds the same entry wherever it
//!   is reported committed, then and later (log matching and leader completeness: nothing
//!   committed is lost or changed);
//! - truncated-committed: a node never truncates below its own high watermark;
//! - lost-committed: after the run every node that converged holds every committed entry;
//! - not-converged / no-leader: after healing, every node has the same log up to one high
//!   watermark, and one node leads (liveness; asked for only when the run healed).

use std::collections::BTreeMap;
use std::fmt;

/// An entry of the replicated log, as the checker compares them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    pub epoch: i32,
    pub digest: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuorumEvent {
    /// The node entered this epoch.
    Epoch { node: i32, epoch: i32 },
    /// The node became leader of this epoch.
    Leader { node: i32, epoch: i32 },
    /// The node's high watermark passed `offset`, which holds `entry` in its log.
    Committed {
        node: i32,
        offset: i64,
        entry: Entry,
    },
    /// The node truncated its log to end at `to` while its high watermark was
    /// `high_watermark`.
    Truncated {
        node: i32,
        to: i64,
        high_watermark: i64,
    },
    /// The node restarted; with `power_loss`, whatever it had not synced was gone.
    Restarted { node: i32, power_loss: bool },
}

/// The history of a run, in the order things happened.
#[derive(Clone, Debug, Default)]
pub struct QuorumHistory {
    pub events: Vec<QuorumEvent>,
}

impl QuorumHistory {
    pub fn push(&mut self, event: QuorumEvent) {
        self.events.push(event);
    }
}

/// Each node's log as read after the run, and its high watermark then.
#[derive(Clone, Debug, Default)]
pub struct QuorumEnd {
    pub logs: BTreeMap<i32, Vec<Entry>>,
    pub high_watermarks: BTreeMap<i32, i64>,
    /// The nodes that considered themselves leader at the end, with their epochs.
    pub leaders: Vec<(i32, i32)>,
    /// Whether the run ended with a healing phase after which convergence is owed.
    pub healed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuorumAnomaly {
    ElectionSafety {
        epoch: i32,
        leaders: Vec<i32>,
    },
    EpochRegress {
        node: i32,
        from: i32,
        to: i32,
    },
    CommittedDiverge {
        offset: i64,
        first: Entry,
        node: i32,
        other: Entry,
    },
    TruncatedCommitted {
        node: i32,
        to: i64,
        high_watermark: i64,
    },
    LostCommitted {
        node: i32,
        offset: i64,
        entry: Entry,
        found: Option<Entry>,
    },
    NoLeader {
        leaders: Vec<(i32, i32)>,
    },
    NotConverged {
        node: i32,
        reason: String,
    },
}

impl QuorumAnomaly {
    /// The anomaly's name, as reports list it.
    pub fn name(&self) -> &'static str {
        match self {
            QuorumAnomaly::ElectionSafety { .. } => "election-safety",
            QuorumAnomaly::EpochRegress { .. } => "epoch-regress",
            QuorumAnomaly::CommittedDiverge { .. } => "committed-diverge",
            QuorumAnomaly::TruncatedCommitted { .. } => "truncated-committed",
            QuorumAnomaly::LostCommitted { .. } => "lost-committed",
            QuorumAnomaly::NoLeader { .. } => "no-leader",
            QuorumAnomaly::NotConverged { .. } => "not-converged",
        }
    }
}

impl fmt::Display for QuorumAnomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.name())?;
        match self {
            QuorumAnomaly::ElectionSafety { epoch, leaders } => {
                write!(f, "epoch {epoch} was led by nodes {leaders:?}")
            }
            QuorumAnomaly::EpochRegress { node, from, to } => {
                write!(f, "node {node} went from epoch {from} back to {to}")
            }
            QuorumAnomaly::CommittedDiverge {
                offset,
                first,
                node,
                other,
            } => write!(
                f,
                "offset {offset} was committed as {first:?}, node {node} reports {other:?}"
            ),
            QuorumAnomaly::TruncatedCommitted {
                node,
                to,
                high_watermark,
            } => write!(
                f,
                "node {node} truncated to {to} below its high watermark {high_watermark}"
            ),
            QuorumAnomaly::LostCommitted {
                node,
                offset,
                entry,
                found,
            } => write!(
                f,
                "node {node} lacks committed offset {offset} ({entry:?}); it holds {found:?}"
            ),
            QuorumAnomaly::NoLeader { leaders } => {
                write!(f, "after healing the leaders are {leaders:?}, not one")
            }
            QuorumAnomaly::NotConverged { node, reason } => {
                write!(f, "node {node} did not converge: {reason}")
            }
        }
    }
}

/// Judges a run. Anomalies come in the order of the history, then the end state's.
pub fn check(history: &QuorumHistory, end: &QuorumEnd) -> Vec<QuorumAnomaly> {
    let mut anomalies = Vec::new();
    let mut leaders: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    let mut epochs: BTreeMap<i32, i32> = BTreeMap::new();
    let mut committed: BTreeMap<i64, Entry> = BTreeMap::new();
    for event in &history.events {
        match *event {
            QuorumEvent::Epoch { node, epoch } | QuorumEvent::Leader { node, epoch } => {
                if let Some(&known) = epochs.get(&node) {
                    if epoch < known {
                        anomalies.push(QuorumAnomaly::EpochRegress {
                            node,
                            from: known,
                            to: epoch,
                        });
                    }
                }
                let at = epochs.entry(node).or_insert(epoch);
                *at = (*at).max(epoch);
                if let QuorumEvent::Leader { .. } = event {
                    let of_epoch = leaders.entry(epoch).or_default();
                    if !of_epoch.contains(&node) {
                        of_epoch.push(node);
                        if of_epoch.len() == 2 {
                            anomalies.push(QuorumAnomaly::ElectionSafety {
                                epoch,
                                leaders: of_epoch.clone(),
                            });
                        }
                    }
                }
            }
            QuorumEvent::Committed {
                node,
                offset,
                entry,
            } => match committed.get(&offset) {
                Some(first) if *first != entry => {
                    anomalies.push(QuorumAnomaly::CommittedDiverge {
                        offset,
                        first: *first,
                        node,
                        other: entry,
                    });
                }
                Some(_) => {}
                None => {
                    committed.insert(offset, entry);
                }
            },
            QuorumEvent::Truncated {
                node,
                to,
                high_watermark,
            } => {
                if to < high_watermark {
                    anomalies.push(QuorumAnomaly::TruncatedCommitted {
                        node,
                        to,
                        high_watermark,
                    });
                }
            }
            QuorumEvent::Restarted { .. } => {}
        }
    }
    if end.healed {
        check_converged(end, &committed, &mut anomalies);
    } else {
        // Without healing, a node's log must still not contradict what was committed where
        // it reaches.
        for (node, log) in &end.logs {
            for (offset, entry) in &committed {
                let found = usize::try_from(*offset).ok().and_then(|i| log.get(i));
                if let Some(found) = found {
                    let hw = end.high_watermarks.get(node).copied().unwrap_or(0);
                    if found != entry && *offset < hw {
                        anomalies.push(QuorumAnomaly::LostCommitted {
                            node: *node,
                            offset: *offset,
                            entry: *entry,
                            found: Some(*found),
                        });
                    }
                }
            }
        }
    }
    anomalies
}

fn check_converged(
    end: &QuorumEnd,
    committed: &BTreeMap<i64, Entry>,
    anomalies: &mut Vec<QuorumAnomaly>,
) {
    if end.leaders.len() != 1 {
        anomalies.push(QuorumAnomaly::NoLeader {
            leaders: end.leaders.clone(),
        });
    }
    let reference = end
        .leaders
        .first()
        .and_then(|(leader, _)| end.logs.get(leader))
        .or_else(|| end.logs.values().next());
    for (node, log) in &end.logs {
        for (offset, entry) in committed {
            let found = usize::try_from(*offset)
                .ok()
                .and_then(|i| log.get(i))
                .copied();
            if found != Some(*entry) {
                anomalies.push(QuorumAnomaly::LostCommitted {
                    node: *node,
                    offset: *offset,
                    entry: *entry,
                    found,
                });
                // One report per node is enough to find the seed's story.
                break;
            }
        }
        if let Some(reference) = reference {
            if log != reference {
                anomalies.push(QuorumAnomaly::NotConverged {
                    node: *node,
                    reason: format!(
                        "its log has {} entries, the leader's {}, and they differ from offset {}",
                        log.len(),
                        reference.len(),
                        log.iter()
                            .zip(reference.iter())
                            .position(|(a, b)| a != b)
                            .unwrap_or(log.len().min(reference.len()))
                    ),
                });
            }
        }
        let hw = end.high_watermarks.get(node).copied().unwrap_or(0);
        if usize::try_from(hw).ok() != Some(log.len()) {
            anomalies.push(QuorumAnomaly::NotConverged {
                node: *node,
                reason: format!("its high watermark {hw} is not its log end {}", log.len()),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(epoch: i32, digest: u64) -> Entry {
        Entry { epoch, digest }
    }

    fn committed(node: i32, offset: i64, entry: Entry) -> QuorumEvent {
        QuorumEvent::Committed {
            node,
            offset,
            entry,
        }
    }

    fn healed(logs: &[(i32, Vec<Entry>)], leader: i32) -> QuorumEnd {
        QuorumEnd {
            logs: logs.iter().cloned().collect(),
            high_watermarks: logs.iter().map(|(n, l)| (*n, l.len() as i64)).collect(),
            leaders: vec![(leader, 1)],
            healed: true,
        }
    }

    #[test]
    fn a_clean_run_has_no_anomalies() {
        let mut h = QuorumHistory::default();
        h.push(QuorumEvent::Epoch { node: 1, epoch: 1 });
        h.push(QuorumEvent::Leader { node: 1, epoch: 1 });
        h.push(committed(1, 0, e(1, 7)));
        h.push(committed(2, 0, e(1, 7)));
        let end = healed(&[(1, vec![e(1, 7)]), (2, vec![e(1, 7)])], 1);
        assert_eq!(check(&h, &end), vec![]);
    }

    #[test]
    fn each_property_fires_on_its_violation() {
        let mut h = QuorumHistory::default();
        h.push(QuorumEvent::Leader { node: 1, epoch: 2 });
        h.push(QuorumEvent::Leader { node: 2, epoch: 2 });
        h.push(QuorumEvent::Epoch { node: 1, epoch: 1 });
        h.push(committed(1, 0, e(1, 7)));
        h.push(committed(2, 0, e(2, 8)));
        h.push(QuorumEvent::Truncated {
            node: 3,
            to: 4,
            high_watermark: 5,
        });
        let end = healed(&[(1, vec![e(2, 8)]), (2, vec![e(2, 8), e(2, 9)])], 2);
        let names: Vec<&str> = check(&h, &end).iter().map(|a| a.name()).collect();
        assert_eq!(
            names,
            vec![
                "election-safety",
                "epoch-regress",
                "committed-diverge",
                "truncated-committed",
                "lost-committed",
                "not-converged",
                "lost-committed",
            ]
        );
        let mut two = end.clone();
        two.leaders.push((1, 3));
        assert!(check(&QuorumHistory::default(), &two)
            .iter()
            .any(|a| a.name() == "no-leader"));
    }
}
