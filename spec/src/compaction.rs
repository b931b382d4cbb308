//! The compaction rule: what a compacted partition may have removed.
//!
//! A compacted log keeps, for every key, at least the latest record of that key; the cleaner
//! may remove a record only once a record of the same key stands at a higher offset, and a
//! tombstone (a record with a null value) only once, besides, its delete horizon has passed
//! (`delete.retention.ms` after the cleaner first passed it, KIP-534). It never moves,
//! renumbers or invents a record. So, judged against the history:
//! - a record missing from the final log is superseded, not lost, when the final log holds a
//!   record of the same key at a higher offset, or when a tombstone of its key at a higher
//!   offset may itself be gone past its horizon ([`Compacted::excuses`]);
//! - a tombstone missing from the final log with no later record of its key is gone past its
//!   horizon only if `delete.retention.ms` of the node's clock can have passed between its
//!   append and the end of the run (counting every forward jump of that clock); otherwise it
//!   is a lost-write;
//! - every record the final log holds is still at the offset it was acknowledged or read at,
//!   in order, and was written: inconsistent-offsets and phantom-read judge that as for any
//!   log, except that a value seen at two offsets is a duplicate (appended twice, the
//!   earlier copy since cleaned away), since the cleaner never moves a record;
//! - offsets may have gaps, so offset-gap is not checked.
//!
//! Replaying the final log therefore gives, for every key, the value a replay of every
//! acknowledged write gives (or a later, possibly-written one; a key whose last write was a
//! tombstone may be absent), which is the guarantee a compacted topic offers its readers.

use crate::history::{Offset, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The key a value was written under: the workload's own, deterministic mapping.
pub type KeyOf = fn(Value) -> u64;
/// Whether a value was written as a tombstone (a null value; the workload carries the
/// value's identity elsewhere in the record): the workload's own mapping.
pub type TombstoneOf = fn(Value) -> bool;

/// What the checker must know of a compacted topic's run.
#[derive(Clone, Debug)]
pub struct Compaction {
    pub key_of: KeyOf,
    pub is_tombstone: TombstoneOf,
    /// The topic's `delete.retention.ms`.
    pub delete_retention_ms: u64,
    /// When (ns of the history's time) the node's clock jumped forward, and by how many ms:
    /// a horizon on that clock comes closer by as much.
    pub clock_forward_jumps: Vec<(u64, u64)>,
    /// When the node last ran (the final crash), ns of the history's time.
    pub end_ns: u64,
}

impl Compaction {
    /// Whether the delete horizon of a tombstone whose append was invoked at `invoke_ns` may
    /// have passed by the end of the run: the horizon lies `delete.retention.ms` after a
    /// cleaner pass, which came after the append, on the node's clock.
    pub fn horizon_may_pass(&self, invoke_ns: u64) -> bool {
        let elapsed_ms = self.end_ns.saturating_sub(invoke_ns) / 1_000_000;
        let jumped_ms: u64 = self
            .clock_forward_jumps
            .iter()
            .filter(|&&(at_ns, _)| at_ns >= invoke_ns)
            .map(|&(_, ms)| ms)
            .sum();
        elapsed_ms.saturating_add(jumped_ms) >= self.delete_retention_ms
    }
}

/// A tombstone that may have been written: its value, the lowest offset it can be at (its
/// acknowledged or read offset when known, else above everything acknowledged before its
/// append was invoked) and when its append was invoked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tombstone {
    pub value: Value,
    pub offset_min: Offset,
    pub invoke_ns: u64,
}

/// The index the rule is judged by: each key's highest offset in the final log, and the
/// tombstones that may be gone past their horizon.
#[derive(Clone, Debug, Default)]
pub struct Compacted {
    rule: Option<Compaction>,
    latest: BTreeMap<u64, Offset>,
    /// Per key, the highest `offset_min` of a tombstone whose horizon may have passed.
    removable_above: BTreeMap<u64, Offset>,
    /// Tombstones whose horizon may have passed.
    removable: BTreeSet<Value>,
}

impl Compacted {
    /// The index of the final log's `records` (offset, value) under `rule`; only records for
    /// which `trusted` holds count (the final log below a detected corruption).
    pub fn build(
        records: &[(Offset, Value)],
        rule: Compaction,
        trusted: impl Fn(Offset) -> bool,
        tombstones: impl IntoIterator<Item = Tombstone>,
    ) -> Compacted {
        let mut latest: BTreeMap<u64, Offset> = BTreeMap::new();
        for &(offset, value) in records {
            if trusted(offset) {
                let at = latest.entry((rule.key_of)(value)).or_insert(offset);
                *at = (*at).max(offset);
            }
        }
        let mut removable_above: BTreeMap<u64, Offset> = BTreeMap::new();
        let mut removable = BTreeSet::new();
        for t in tombstones {
            if !rule.horizon_may_pass(t.invoke_ns) {
                continue;
            }
            removable.insert(t.value);
            let at = removable_above
                .entry((rule.key_of)(t.value))
                .or_insert(t.offset_min);
            *at = (*at).max(t.offset_min);
        }
        Compacted {
            rule: Some(rule),
            latest,
            removable_above,
            removable,
        }
    }

    /// Whether the topic is compacted at all.
    pub fn is_on(&self) -> bool {
        self.rule.is_some()
    }

    /// Whether the cleaner may have removed `value` (at `offset`): a record of its key stands
    /// above it, or it is a tombstone past its horizon, or a tombstone of its key above it
    /// may be gone past its own.
    pub fn excuses(&self, offset: Offset, value: Value) -> bool {
        let Some(rule) = &self.rule else {
            return false;
        };
        let key = (rule.key_of)(value);
        let superseded = self.latest.get(&key).is_some_and(|&at| at > offset);
        let own_horizon = (rule.is_tombstone)(value) && self.removable.contains(&value);
        let shadowed = self
            .removable_above
            .get(&key)
            .is_some_and(|&at| at > offset);
        superseded || own_horizon || shadowed
    }

    /// Keys the final log holds.
    pub fn keys(&self) -> usize {
        self.latest.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_of(value: Value) -> u64 {
        value.0 % 3
    }

    /// Values above 100 are tombstones.
    fn is_tombstone(value: Value) -> bool {
        value.0 > 100
    }

    fn rule(end_ns: u64, clock_forward_jumps: Vec<(u64, u64)>) -> Compaction {
        Compaction {
            key_of,
            is_tombstone,
            delete_retention_ms: 1_000,
            clock_forward_jumps,
            end_ns,
        }
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn only_a_later_record_of_the_same_key_supersedes() {
        let records = [(4, Value(1)), (9, Value(2)), (12, Value(4))];
        let latest = Compacted::build(&records, rule(0, vec![]), |_| true, []);
        assert_eq!(latest.keys(), 2);
        // Key 1 stands at 12: its record at 3 may be gone, at 12 not.
        assert!(latest.excuses(3, Value(7)));
        assert!(!latest.excuses(12, Value(4)));
        // Key 2 stands at 9 only.
        assert!(!latest.excuses(10, Value(5)));
        // Key 0 is not in the log at all.
        assert!(!latest.excuses(0, Value(3)));
        // Untrusted records supersede nothing; without a rule nothing is excused.
        let trusted = Compacted::build(&records, rule(0, vec![]), |o| o < 5, []);
        assert_eq!(trusted.keys(), 1);
        assert!(trusted.excuses(3, Value(7)));
        assert!(
            !trusted.excuses(5, Value(7)),
            "the record at 12 is not trusted"
        );
        assert!(!Compacted::default().excuses(0, Value(1)));
    }

    #[test]
    fn a_tombstone_goes_only_past_its_horizon_and_takes_its_key_with_it() {
        // Tombstone 102 (key 0) at offset 20, appended 1.5 s before the end; tombstone 105
        // (key 0 too) known only to be above offset 30, appended 0.5 s before the end.
        let tombstones = [
            Tombstone {
                value: Value(102),
                offset_min: 20,
                invoke_ns: 500 * MS,
            },
            Tombstone {
                value: Value(105),
                offset_min: 30,
                invoke_ns: 1_500 * MS,
            },
        ];
        let ix = Compacted::build(&[], rule(2_000 * MS, vec![]), |_| true, tombstones);
        // The older tombstone may be gone, and with it every record of key 0 below it.
        assert!(ix.excuses(20, Value(102)));
        assert!(ix.excuses(7, Value(3)));
        // Not records of key 0 above it, nor the young tombstone, nor other keys.
        assert!(!ix.excuses(25, Value(3)));
        assert!(!ix.excuses(31, Value(105)));
        assert!(!ix.excuses(7, Value(4)));
        // A forward jump of the node's clock after the young one's append brings its
        // horizon within reach; a jump before it does not.
        let jumped = Compacted::build(
            &[],
            rule(2_000 * MS, vec![(1_600 * MS, 600)]),
            |_| true,
            tombstones,
        );
        assert!(jumped.excuses(31, Value(105)));
        assert!(jumped.excuses(25, Value(3)));
        let early = Compacted::build(
            &[],
            rule(2_000 * MS, vec![(1_400 * MS, 600)]),
            |_| true,
            tombstones,
        );
        assert!(!early.excuses(31, Value(105)));
    }
}
