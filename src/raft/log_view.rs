//! The Raft core's picture of its own log: where it starts and ends, how much of it is
//! synced, and the epoch of each stretch (the same leader-epoch cache the partition log
//! keeps, [`crate::log::leader_epoch::LeaderEpochCache`]). The core changes the picture when
//! it asks the driver for an append or a truncation, and the driver tells it what it synced;
//! the records themselves stay on disk, where the driver reads them for fetch answers and
//! for the state machine.
//!
//! Invariants (asserted on every change):
//! - `start_offset <= synced_offset <= end_offset`;
//! - appends continue the log end, with an epoch at or above the latest one;
//! - a truncation cuts the synced end with the log end and forgets the epochs above it;
//! - a log that starts past offset 0 starts at the end of a snapshot it knows (the latest
//!   snapshot ends at or past the start), whose epoch stands for the epoch of the record
//!   before the start;
//! - the start moves only forward, and only to a snapshot's end at or below the synced end.

use crate::log::leader_epoch::{EpochEnd, LeaderEpochCache};

use super::election::LogPosition;
use super::message::SnapshotId;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogView {
    start_offset: i64,
    end_offset: i64,
    synced_offset: i64,
    epochs: LeaderEpochCache,
    /// The latest snapshot of the state machine this replica holds.
    snapshot: Option<SnapshotId>,
    /// The epoch of the record before the start (the snapshot's that ends there).
    start_epoch: Option<i32>,
    /// Counts truncations: a sync report names the generation its sync started in, and one
    /// from before a truncation is ignored (it may cover offsets since rewritten).
    generation: u64,
}

impl LogView {
    /// An empty log starting at offset 0.
    pub fn empty() -> LogView {
        LogView {
            start_offset: 0,
            end_offset: 0,
            synced_offset: 0,
            epochs: LeaderEpochCache::default(),
            snapshot: None,
            start_epoch: None,
            generation: 0,
        }
    }

    /// The picture of a log as it was opened: all of it is durable, since recovery dropped
    /// whatever a crash left unsynced and the driver syncs the log at open (a process kill
    /// leaves written but unsynced data in the page cache, which a later power loss takes).
    ///
    /// `snapshots` are the snapshots on disk; the latest is served to fetchers below the
    /// start, and the one that ends at the start gives the epoch before it.
    pub fn opened(
        start_offset: i64,
        end_offset: i64,
        epochs: LeaderEpochCache,
        snapshots: &[SnapshotId],
    ) -> LogView {
        let view = LogView {
            start_offset,
            end_offset,
            synced_offset: end_offset,
            epochs,
            snapshot: snapshots.iter().max().copied(),
            start_epoch: snapshots
                .iter()
                .find(|s| s.end_offset == start_offset)
                .map(|s| s.epoch),
            generation: 0,
        };
        view.check();
        view
    }

    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    /// Kafka's LogEndOffset: the offset the next batch gets.
    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }

    /// The end of what the driver reported synced.
    pub fn synced_offset(&self) -> i64 {
        self.synced_offset
    }

    /// The epoch of the log's last batch; 0 for an empty log (Kafka's convention, so a
    /// follower with nothing fetches with last fetched epoch 0).
    pub fn last_epoch(&self) -> i32 {
        self.epochs.latest_epoch().or(self.start_epoch).unwrap_or(0)
    }

    /// The latest snapshot this replica holds.
    pub fn snapshot(&self) -> Option<SnapshotId> {
        self.snapshot
    }

    /// The epoch of the record just before `offset`, where the log or a snapshot knows it.
    pub fn epoch_before(&self, offset: i64) -> Option<i32> {
        if offset == self.start_offset {
            return self.start_epoch.or((offset == 0).then_some(0));
        }
        self.epochs.epoch_for_offset(offset - 1)
    }

    /// The generation a sync started now belongs to.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Where the synced part of the log ends, as elections compare logs: what a candidate
    /// may claim, since it survives a power loss.
    pub fn synced_position(&self) -> LogPosition {
        let last_epoch = self.epoch_before(self.synced_offset).unwrap_or(0);
        LogPosition {
            last_epoch,
            end_offset: self.synced_offset,
        }
    }

    /// Where the log ends, as elections compare logs.
    pub fn position(&self) -> LogPosition {
        LogPosition {
            last_epoch: self.last_epoch(),
            end_offset: self.end_offset,
        }
    }

    /// Where `epoch` ends in this log (Kafka's `endOffsetForEpoch`). Below the log start only
    /// the snapshot's epoch is known (the epoch cache's first entry was moved up to the
    /// start): an older epoch cannot be placed, and any epoch from the snapshot's up to the
    /// cache's first ends at the start (Kafka's `KafkaMetadataLog.endOffsetForEpoch` answers
    /// with the snapshot's id there). The cache alone would claim that an epoch older than
    /// its first ends at the start, which a fetcher holding other records of that epoch
    /// below the start would take for agreement.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> EpochEnd {
        if let Some(start_epoch) = self.start_epoch.filter(|_| self.start_offset > 0) {
            if epoch < start_epoch {
                return EpochEnd::UNDEFINED;
            }
            let first = self.epochs.entries().first().map(|e| e.epoch);
            if first.is_none_or(|first| epoch < first) {
                return EpochEnd {
                    epoch: start_epoch,
                    end_offset: self.start_offset,
                };
            }
        }
        self.epochs.end_offset_for(epoch, self.end_offset)
    }

    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.epochs.epoch_for_offset(offset)
    }

    /// A batch of `epoch` holding offsets `base_offset..next_offset` was appended.
    pub fn append(&mut self, base_offset: i64, next_offset: i64, epoch: i32) {
        assert_eq!(base_offset, self.end_offset, "an append not at the log end");
        assert!(next_offset > base_offset, "an empty batch");
        assert!(epoch >= self.last_epoch(), "an append of an older epoch");
        assert!(epoch >= 0, "an append without an epoch");
        self.epochs.assign(epoch, base_offset);
        self.end_offset = next_offset;
        self.check();
    }

    /// The state machine wrote a snapshot of everything below `id.end_offset`, which lies in
    /// the log (or at its start). A follower's committed records need not be synced yet: the
    /// snapshot file is durable on its own, and the log start moves to it only once synced.
    pub fn snapshot_created(&mut self, id: SnapshotId) {
        assert!(
            id.end_offset >= self.start_offset,
            "a snapshot below the log start"
        );
        assert!(
            id.end_offset <= self.end_offset,
            "a snapshot past the log end"
        );
        if self.snapshot.is_none_or(|s| id > s) {
            self.snapshot = Some(id);
        }
        self.check();
    }

    /// The log was emptied and restarted at the end of snapshot `id`, fetched from the
    /// leader (Kafka's `truncateFullyAndStartAt`); all of it is durable.
    pub fn install_snapshot(&mut self, id: SnapshotId) {
        assert!(
            id.end_offset >= self.start_offset,
            "a snapshot below the log start"
        );
        self.start_offset = id.end_offset;
        self.end_offset = id.end_offset;
        self.synced_offset = id.end_offset;
        self.epochs.clear();
        self.snapshot = Some(id);
        self.start_epoch = Some(id.epoch);
        self.generation += 1;
        self.check();
    }

    /// The log's start moved to `offset`, the end of the latest snapshot (retention deleted
    /// what lies below it).
    pub fn advance_start(&mut self, offset: i64) {
        let snapshot = self.snapshot.expect("a log start moved without a snapshot");
        assert_eq!(
            offset, snapshot.end_offset,
            "a log start moved past a snapshot's end"
        );
        assert!(offset >= self.start_offset, "a log start moved back");
        assert!(
            offset <= self.synced_offset,
            "a log start past the synced log"
        );
        self.start_offset = offset;
        self.start_epoch = Some(snapshot.epoch);
        self.epochs.truncate_from_start(offset);
        if self.start_offset == self.end_offset {
            self.epochs.clear();
        }
        self.check();
    }

    /// The driver synced the log up to `offset`, with a sync started in `generation`.
    pub fn synced(&mut self, offset: i64, generation: u64) {
        if generation != self.generation {
            // Started before a truncation: the offsets it names may have been rewritten
            // since, unsynced.
            return;
        }
        let offset = offset.min(self.end_offset);
        if offset > self.synced_offset {
            self.synced_offset = offset;
        }
        self.check();
    }

    /// The log is cut to end at `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        assert!(
            offset >= self.start_offset,
            "a truncation below the log start"
        );
        if offset >= self.end_offset {
            return;
        }
        self.end_offset = offset;
        self.synced_offset = self.synced_offset.min(offset);
        self.generation += 1;
        self.epochs.truncate_from_end(offset);
        if self.start_offset == self.end_offset {
            self.epochs.clear();
        }
        self.check();
    }

    fn check(&self) {
        assert!(self.start_offset >= 0, "a negative log start");
        assert!(
            self.start_offset <= self.synced_offset,
            "synced below the start"
        );
        assert!(self.synced_offset <= self.end_offset, "synced past the end");
        if let Some(first) = self.epochs.entries().first() {
            assert!(
                first.start_offset < self.end_offset,
                "an epoch past the end"
            );
        }
        if self.start_offset > 0 {
            assert!(
                self.start_epoch.is_some(),
                "a log start past 0 with no snapshot ending there"
            );
            assert!(
                self.snapshot
                    .is_some_and(|s| s.end_offset >= self.start_offset),
                "a log start past the latest snapshot"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_truncations_and_syncs_keep_the_picture_consistent() {
        let mut view = LogView::empty();
        assert_eq!(view.last_epoch(), 0);
        view.append(0, 3, 1);
        view.append(3, 5, 1);
        view.append(5, 9, 3);
        assert_eq!(view.end_offset_for_epoch(1).end_offset, 5);
        assert_eq!(view.end_offset_for_epoch(2).epoch, 1);
        assert_eq!(view.end_offset_for_epoch(3).end_offset, 9);
        let before = view.generation();
        view.synced(7, before);
        assert_eq!(view.synced_position().last_epoch, 3);
        view.truncate_to(4);
        assert_eq!((view.end_offset(), view.synced_offset()), (4, 4));
        assert_eq!(view.last_epoch(), 1);
        view.append(4, 9, 4);
        view.synced(9, before);
        assert_eq!(
            view.synced_offset(),
            4,
            "a sync started before the truncation"
        );
        assert_eq!(view.synced_position().end_offset, 4);
        view.synced(9, view.generation());
        assert_eq!(view.synced_offset(), 9);
        view.truncate_to(0);
        assert_eq!(view.last_epoch(), 0);
    }

    #[test]
    fn below_the_log_start_only_the_snapshots_epoch_is_known() {
        // Epoch 2 held 0..4, epoch 3 holds 4..10; the log start moves to a snapshot at 6.
        let mut view = LogView::empty();
        view.append(0, 4, 2);
        view.append(4, 10, 3);
        view.synced(10, view.generation());
        view.snapshot_created(SnapshotId {
            end_offset: 6,
            epoch: 3,
        });
        view.advance_start(6);
        // Epoch 2 ended at 4, below the start: it cannot be placed (not "ends at 6", which a
        // fetcher holding epoch-2 records up to 6 would take for agreement).
        assert_eq!(view.end_offset_for_epoch(2), EpochEnd::UNDEFINED);
        assert_eq!(view.end_offset_for_epoch(3).end_offset, 10);
        // A fetched snapshot at 20 of epoch 5 leaves an empty log starting there.
        view.install_snapshot(SnapshotId {
            end_offset: 20,
            epoch: 5,
        });
        assert_eq!(view.end_offset_for_epoch(3), EpochEnd::UNDEFINED);
        let at_start = EpochEnd {
            epoch: 5,
            end_offset: 20,
        };
        assert_eq!(view.end_offset_for_epoch(5), at_start);
        assert_eq!(view.end_offset_for_epoch(6), at_start);
        view.append(20, 25, 7);
        assert_eq!(view.end_offset_for_epoch(6), at_start);
        assert_eq!(view.end_offset_for_epoch(7).end_offset, 25);
    }

    #[test]
    #[should_panic(expected = "an append not at the log end")]
    fn an_append_must_continue_the_log() {
        let mut view = LogView::empty();
        view.append(1, 2, 1);
    }
}
