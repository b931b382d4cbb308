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
//! - snapshot-diverge: a state machine's snapshot ending at `end_offset` holds the state
//!   after exactly the committed entries below it: its chain (a running digest of the
//!   entries it applied, [`chain_step`]) is the chain of the committed log up to there;
//! - not-converged / no-leader: after healing, every node has the same log up to one high
//!   watermark, and one node leads (liveness; asked for only when the run healed). A log
//!   that starts past 0 must have a snapshot reaching its start: what was cut from it is
//!   there.

use std::collections::BTreeMap;
use std::fmt;

/// The chain of an empty log.
pub const CHAIN_START: u64 = 0x5a5a_5a5a_5a5a_5a5a;

/// The chain after `entry` (splitmix64 over the chain, the epoch and the digest): equal
/// chains mean, with overwhelming odds, the same entries applied in the same order.
pub fn chain_step(chain: u64, entry: Entry) -> u64 {
    let mix = |mut x: u64| {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    };
    mix(chain ^ mix(entry.digest ^ (u64::from(entry.epoch as u32) << 17)))
}

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
    /// The node's state machine made or loaded a snapshot of its state after every entry
    /// below `end_offset`, whose chain is `chain`.
    Snapshot {
        node: i32,
        end_offset: i64,
        chain: u64,
    },
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
    /// Each node's log from its log start on.
    pub logs: BTreeMap<i32, Vec<Entry>>,
    /// Where each node's log starts (0 when absent).
    pub log_starts: BTreeMap<i32, i64>,
    /// Each node's latest snapshot then: its end offset and chain.
    pub snapshots: BTreeMap<i32, (i64, u64)>,
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
    SnapshotDiverge {
        node: i32,
        end_offset: i64,
        chain: u64,
        /// The committed log's chain there; None when an entry below it was never reported
        /// committed.
        expected: Option<u64>,
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
            QuorumAnomaly::SnapshotDiverge { .. } => "snapshot-diverge",
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
            QuorumAnomaly::SnapshotDiverge {
                node,
                end_offset,
                chain,
                expected: Some(expected),
            } => write!(
                f,
                "node {node}'s snapshot ending at {end_offset} has chain {chain:#x}, the \
                 committed log's is {expected:#x}"
            ),
            QuorumAnomaly::SnapshotDiverge {
                node,
                end_offset,
                expected: None,
                ..
            } => write!(
                f,
                "node {node}'s snapshot ends at {end_offset}, past entries nobody reported \
                 committed"
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
    let mut snapshots: Vec<(i32, i64, u64)> = Vec::new();
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
            QuorumEvent::Snapshot {
                node,
                end_offset,
                chain,
            } => snapshots.push((node, end_offset, chain)),
        }
    }
    snapshots.extend(
        end.snapshots
            .iter()
            .map(|(node, (end_offset, chain))| (*node, *end_offset, *chain)),
    );
    check_snapshots(&snapshots, &committed, &mut anomalies);
    if end.healed {
        check_converged(end, &committed, &mut anomalies);
    } else {
        // Without healing, a node's log must still not contradict what was committed where
        // it reaches.
        for (node, log) in &end.logs {
            let start = end.log_starts.get(node).copied().unwrap_or(0);
            for (offset, entry) in &committed {
                if let Some(found) = entry_at(log, start, *offset) {
                    let hw = end.high_watermarks.get(node).copied().unwrap_or(0);
                    if found != *entry && *offset < hw {
                        anomalies.push(QuorumAnomaly::LostCommitted {
                            node: *node,
                            offset: *offset,
                            entry: *entry,
                            found: Some(found),
                        });
                    }
                }
            }
        }
    }
    anomalies
}

/// The entry at `offset` of a log that starts at `start`.
fn entry_at(log: &[Entry], start: i64, offset: i64) -> Option<Entry> {
    let index = usize::try_from(offset.checked_sub(start)?).ok()?;
    log.get(index).copied()
}

/// Every snapshot's chain against the committed log's, computed once in offset order.
fn check_snapshots(
    snapshots: &[(i32, i64, u64)],
    committed: &BTreeMap<i64, Entry>,
    anomalies: &mut Vec<QuorumAnomaly>,
) {
    // The committed log's chain at each offset up to where it has no hole.
    let mut chains: Vec<u64> = vec![CHAIN_START];
    for (expected_offset, (offset, entry)) in (0i64..).zip(committed) {
        if *offset != expected_offset {
            break;
        }
        let last = chains[chains.len() - 1];
        chains.push(chain_step(last, *entry));
    }
    let mut reported: BTreeMap<(i32, i64), u64> = BTreeMap::new();
    for &(node, end_offset, chain) in snapshots {
        if reported.insert((node, end_offset), chain) == Some(chain) {
            continue;
        }
        let expected = usize::try_from(end_offset)
            .ok()
            .and_then(|i| chains.get(i))
            .copied();
        if expected != Some(chain) {
            anomalies.push(QuorumAnomaly::SnapshotDiverge {
                node,
                end_offset,
                chain,
                expected,
            });
        }
    }
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
    let start_of = |node: &i32| end.log_starts.get(node).copied().unwrap_or(0);
    let reference = end
        .leaders
        .first()
        .map(|(leader, _)| *leader)
        .filter(|leader| end.logs.contains_key(leader))
        .or_else(|| end.logs.keys().next().copied());
    for (node, log) in &end.logs {
        let start = start_of(node);
        let log_end = start + log.len() as i64;
        if start > 0 && end.snapshots.get(node).is_none_or(|(e, _)| *e < start) {
            anomalies.push(QuorumAnomaly::NotConverged {
                node: *node,
                reason: format!("its log starts at {start} with no snapshot reaching there"),
            });
        }
        // What lies below the log start is in the snapshot, judged by its chain.
        for (offset, entry) in committed.range(start..) {
            let found = entry_at(log, start, *offset);
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
            let reference_start = start_of(&reference);
            let reference_log = &end.logs[&reference];
            let reference_end = reference_start + reference_log.len() as i64;
            let from = start.max(reference_start);
            let differs = (from..log_end.min(reference_end))
                .find(|o| entry_at(log, start, *o) != entry_at(reference_log, reference_start, *o));
            if log_end != reference_end || differs.is_some() {
                anomalies.push(QuorumAnomaly::NotConverged {
                    node: *node,
                    reason: format!(
                        "its log is {start}..{log_end}, the leader's {reference_start}..\
                         {reference_end}, and they differ from offset {}",
                        differs.unwrap_or(log_end.min(reference_end))
                    ),
                });
            }
        }
        let hw = end.high_watermarks.get(node).copied().unwrap_or(0);
        if hw != log_end {
            anomalies.push(QuorumAnomaly::NotConverged {
                node: *node,
                reason: format!("its high watermark {hw} is not its log end {log_end}"),
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
            ..QuorumEnd::default()
        }
    }

    fn chain_of(entries: &[Entry]) -> u64 {
        entries.iter().fold(CHAIN_START, |c, e| chain_step(c, *e))
    }

    #[test]
    fn snapshots_are_judged_by_their_chain_and_cut_logs_by_their_snapshot() {
        let entries = [e(1, 7), e(1, 8), e(2, 9)];
        let mut h = QuorumHistory::default();
        for (offset, entry) in entries.iter().enumerate() {
            h.push(committed(1, offset as i64, *entry));
        }
        h.push(QuorumEvent::Snapshot {
            node: 1,
            end_offset: 2,
            chain: chain_of(&entries[..2]),
        });
        // Node 2 loaded node 1's snapshot and holds only the entry after it.
        let mut end = healed(&[(1, entries.to_vec()), (2, entries[2..].to_vec())], 1);
        end.log_starts.insert(2, 2);
        end.high_watermarks.insert(2, 3);
        end.snapshots.insert(2, (2, chain_of(&entries[..2])));
        assert_eq!(check(&h, &end), vec![]);

        // A snapshot one entry short of its name, or with entries out of order, diverges.
        let mut short = h.clone();
        short.push(QuorumEvent::Snapshot {
            node: 3,
            end_offset: 3,
            chain: chain_of(&entries[..2]),
        });
        let swapped = chain_of(&[entries[1], entries[0]]);
        short.push(QuorumEvent::Snapshot {
            node: 3,
            end_offset: 2,
            chain: swapped,
        });
        short.push(QuorumEvent::Snapshot {
            node: 3,
            end_offset: 9,
            chain: 1,
        });
        let found: Vec<(i64, Option<u64>)> = check(&short, &end)
            .iter()
            .filter_map(|a| match a {
                QuorumAnomaly::SnapshotDiverge {
                    end_offset,
                    expected,
                    ..
                } => Some((*end_offset, *expected)),
                _ => None,
            })
            .collect();
        assert_eq!(
            found,
            vec![
                (3, Some(chain_of(&entries))),
                (2, Some(chain_of(&entries[..2]))),
                (9, None)
            ]
        );

        // A cut log without a snapshot reaching its start lost what was cut.
        let mut bare = end.clone();
        bare.snapshots.remove(&2);
        let names: Vec<&str> = check(&h, &bare).iter().map(|a| a.name()).collect();
        assert_eq!(names, vec!["not-converged"]);
        // A cut log that lacks a committed entry past its start is still caught.
        let mut lacking = end.clone();
        lacking.logs.insert(2, Vec::new());
        lacking.log_starts.insert(2, 2);
        lacking.high_watermarks.insert(2, 2);
        let names: Vec<&str> = check(&h, &lacking).iter().map(|a| a.name()).collect();
        assert_eq!(names, vec!["lost-committed", "not-converged"]);
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
