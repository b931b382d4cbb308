//! The compaction rule: what a compacted partition may have removed.
//!
//! A compacted log keeps, for every key, at least the latest record of that key; the cleaner
//! may remove a record only once a record of the same key stands at a higher offset, and it
//! never moves, renumbers or invents a record. So, judged against the history:
//! - a record missing from the final log is superseded, not lost, exactly when the final log
//!   holds a record of the same key at a higher offset ([`LatestByKey::supersedes`]); any
//!   other missing acknowledged record is a lost-write (the latest value of its key, or a
//!   record above it, went);
//! - every record the final log holds is still at the offset it was acknowledged or read at,
//!   in order, and was written: inconsistent-offsets and phantom-read judge that as for any
//!   log;
//! - offsets may have gaps, so offset-gap is not checked.
//!
//! Replaying the final log therefore gives, for every key, the value a replay of every
//! acknowledged write gives (or a later, possibly-written one), which is the guarantee a
//! compacted topic offers its readers. Tombstones (a null value) are not part of the
//! simulation's workload; their horizon is checked by the log's own tests.

use crate::history::{Offset, Value};
use std::collections::BTreeMap;

/// The key a value was written under: the workload's own, deterministic mapping.
pub type KeyOf = fn(Value) -> u64;

/// The highest offset at which the final log holds each key.
#[derive(Clone, Debug, Default)]
pub struct LatestByKey {
    latest: BTreeMap<u64, Offset>,
    key_of: Option<KeyOf>,
}

impl LatestByKey {
    /// The index of `records` (offset, value) under `key_of`; only records for which
    /// `trusted` holds count (the final log below a detected corruption).
    pub fn build(
        records: &[(Offset, Value)],
        key_of: KeyOf,
        trusted: impl Fn(Offset) -> bool,
    ) -> LatestByKey {
        let mut latest: BTreeMap<u64, Offset> = BTreeMap::new();
        for &(offset, value) in records {
            if trusted(offset) {
                let at = latest.entry(key_of(value)).or_insert(offset);
                *at = (*at).max(offset);
            }
        }
        LatestByKey {
            latest,
            key_of: Some(key_of),
        }
    }

    /// Whether a record of `value`'s key stands at an offset above `offset`: then the
    /// cleaner may have removed `value` (at `offset`).
    pub fn supersedes(&self, offset: Offset, value: Value) -> bool {
        let Some(key_of) = self.key_of else {
            return false;
        };
        self.latest
            .get(&key_of(value))
            .is_some_and(|&latest| latest > offset)
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

    #[test]
    fn only_a_later_record_of_the_same_key_supersedes() {
        let records = [(4, Value(1)), (9, Value(2)), (12, Value(4))];
        let latest = LatestByKey::build(&records, key_of, |_| true);
        assert_eq!(latest.keys(), 2);
        // Key 1 stands at 12: its record at 3 may be gone, at 12 not.
        assert!(latest.supersedes(3, Value(7)));
        assert!(!latest.supersedes(12, Value(4)));
        // Key 2 stands at 9 only.
        assert!(!latest.supersedes(10, Value(5)));
        // Key 0 is not in the log at all.
        assert!(!latest.supersedes(0, Value(3)));
        // Untrusted records supersede nothing; without a key function nothing does.
        let trusted = LatestByKey::build(&records, key_of, |o| o < 5);
        assert_eq!(trusted.keys(), 1);
        assert!(trusted.supersedes(3, Value(7)));
        assert!(
            !trusted.supersedes(5, Value(7)),
            "the record at 12 is not trusted"
        );
        assert!(!LatestByKey::default().supersedes(0, Value(1)));
    }
}
