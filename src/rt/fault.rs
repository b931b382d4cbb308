//! Fault points (FoundationDB's "buggify", TigerBeetle's fault atlas): named places in the
//! disk, the log and the broker where a simulation may crash the node, inject an IO error or
//! delay the operation at the very moment that matters (between a write and its sync, during
//! a segment roll, right after an answer went out while unsynced data exists), instead of on a
//! timer that is blind to what the node is doing.
//!
//! Owns: the list of points ([`FaultPoint::ALL`], each with a stable name for reports), the
//! actions a point can take ([`Fault`]), and the hook a simulation installs ([`FaultInjector`]).
//!
//! Invariants:
//! - Production never has an injector. [`crate::rt::disk::Disk::fault`] is the only caller of
//!   [`FaultInjector::at`]; a real disk has no injector, so every point is a ready `Ok(())`
//!   there and costs one branch.
//! - A point never changes what the code does when nothing fires: it is a call placed between
//!   two steps, not a step of its own.
//! - [`Fault::Halt`] means the injector has already crashed the node (its disk with a crash
//!   mode, its tasks killed) before returning; the caller never runs another instruction of
//!   the node's code after it (the future stays pending until the simulator drops it).
//! - [`Fault::IoError`] is returned only at points that stand for a disk operation
//!   ([`FaultPoint::allows_io_error`]); its message starts with "injected", as every injected
//!   fault's does.

use std::fmt;
use std::io;

/// A named place where a simulation may inject a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultPoint {
    /// A file write returned; its bytes are in the page cache, not yet synced.
    DiskWritten,
    /// An `fdatasync` is about to start.
    DiskSyncBefore,
    /// An `fdatasync` made the data durable; the caller does not know yet.
    DiskSyncAfter,
    /// A directory sync made names durable; the caller does not know yet.
    DiskSyncDirAfter,
    /// An atomic replace wrote and synced its `.tmp` file and is about to rename it.
    DiskReplaceBeforeRename,
    /// A segment roll created the new segment's files; the directory is not synced yet.
    LogRoll,
    /// Recovery is between two segments of its scan.
    RecoveryScan,
    /// Recovery found a bad batch and is about to truncate there.
    RecoveryTruncate,
    /// Retention checkpointed the new log start offset and is about to remove segments.
    RetentionDelete,
    /// A producer-state snapshot is about to be written.
    SnapshotWrite,
    /// A recovery point is about to be checkpointed.
    CheckpointWrite,
    /// A Fetch answer was sent while some partition had unsynced data.
    FetchAnsweredUnsynced,
    /// A Produce answer was sent while some partition had unsynced data.
    ProduceAnsweredUnsynced,
    /// An OffsetCommit answer was sent while some partition (`__consumer_offsets` among
    /// them) had unsynced data.
    OffsetCommitAnsweredUnsynced,
    /// The log cleaner made a cleaned segment's `.swap` name durable and is about to remove
    /// the segments it replaces.
    CleanerSwap,
}

impl FaultPoint {
    /// Every point, in report order.
    pub const ALL: [FaultPoint; 15] = [
        FaultPoint::DiskWritten,
        FaultPoint::DiskSyncBefore,
        FaultPoint::DiskSyncAfter,
        FaultPoint::DiskSyncDirAfter,
        FaultPoint::DiskReplaceBeforeRename,
        FaultPoint::LogRoll,
        FaultPoint::RecoveryScan,
        FaultPoint::RecoveryTruncate,
        FaultPoint::RetentionDelete,
        FaultPoint::SnapshotWrite,
        FaultPoint::CheckpointWrite,
        FaultPoint::FetchAnsweredUnsynced,
        FaultPoint::ProduceAnsweredUnsynced,
        FaultPoint::OffsetCommitAnsweredUnsynced,
        FaultPoint::CleanerSwap,
    ];

    /// The point's stable name, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            FaultPoint::DiskWritten => "disk.written",
            FaultPoint::DiskSyncBefore => "disk.sync.before",
            FaultPoint::DiskSyncAfter => "disk.sync.after",
            FaultPoint::DiskSyncDirAfter => "disk.sync_dir.after",
            FaultPoint::DiskReplaceBeforeRename => "disk.replace.before_rename",
            FaultPoint::LogRoll => "log.roll",
            FaultPoint::RecoveryScan => "log.recovery.scan",
            FaultPoint::RecoveryTruncate => "log.recovery.truncate",
            FaultPoint::RetentionDelete => "log.retention.delete",
            FaultPoint::SnapshotWrite => "log.snapshot.write",
            FaultPoint::CheckpointWrite => "log.checkpoint.write",
            FaultPoint::FetchAnsweredUnsynced => "broker.fetch.answered_unsynced",
            FaultPoint::ProduceAnsweredUnsynced => "broker.produce.answered_unsynced",
            FaultPoint::OffsetCommitAnsweredUnsynced => "broker.offset_commit.answered_unsynced",
            FaultPoint::CleanerSwap => "log.cleaner.swap",
        }
    }

    /// Whether the point stands for a disk operation that can fail with an IO error. The
    /// others (an answer sent, a step of recovery) only crash or delay.
    pub fn allows_io_error(self) -> bool {
        matches!(
            self,
            FaultPoint::DiskWritten
                | FaultPoint::DiskSyncBefore
                | FaultPoint::DiskReplaceBeforeRename
                | FaultPoint::LogRoll
                | FaultPoint::RetentionDelete
                | FaultPoint::CleanerSwap
                | FaultPoint::SnapshotWrite
                | FaultPoint::CheckpointWrite
        )
    }
}

impl fmt::Display for FaultPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What an injector decided at a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The node was crashed (disk and tasks) by the injector: stop here for good.
    Halt,
    /// Fail the operation with an injected IO error.
    IoError,
    /// Go on after this many milliseconds of (simulated) time.
    DelayMs(u64),
    /// Wait this many milliseconds (the node runs on: an answer just sent reaches its
    /// client), then have the injector crash the node ([`FaultInjector::halt`]) and stop.
    HaltAfterMs(u64),
}

/// The longest delay a point may impose: longer would only look like a hung node.
pub const FAULT_DELAY_MS_MAX: u64 = 1_000;

/// The hook a simulation installs on a node's disk. Called from the node's own tasks, with no
/// lock of the disk held.
pub trait FaultInjector: Send + Sync + fmt::Debug {
    /// Decides what happens at `point` now; `None` to go on.
    fn at(&self, point: FaultPoint) -> Option<Fault>;

    /// Crashes the node now, after a [`Fault::HaltAfterMs`] decided at `point`; `false` if
    /// the injector no longer wants to (the run stopped injecting meanwhile), and the caller
    /// goes on.
    fn halt(&self, point: FaultPoint) -> bool;
}

/// The IO error an injected fault returns.
pub(crate) fn injected_error(point: FaultPoint) -> io::Error {
    io::Error::other(format!("injected IO error at fault point {point}"))
}

/// Carries out a decision: `Ok(())` to go on (after any delay), the injected error, or never
/// for a halt.
pub(crate) async fn carry_out(injector: &dyn FaultInjector, point: FaultPoint) -> io::Result<()> {
    match injector.at(point) {
        None => Ok(()),
        Some(Fault::DelayMs(ms)) => {
            assert!(
                ms <= FAULT_DELAY_MS_MAX,
                "fault delay {ms} ms above the limit"
            );
            crate::rt::time::sleep(crate::rt::time::Duration::from_millis(ms)).await;
            Ok(())
        }
        Some(Fault::IoError) => {
            assert!(
                point.allows_io_error(),
                "an IO error injected at {point}, which is no disk operation"
            );
            Err(injected_error(point))
        }
        Some(Fault::HaltAfterMs(ms)) => {
            assert!(
                ms <= FAULT_DELAY_MS_MAX,
                "fault delay {ms} ms above the limit"
            );
            crate::rt::time::sleep(crate::rt::time::Duration::from_millis(ms)).await;
            if !injector.halt(point) {
                return Ok(());
            }
            std::future::pending::<()>().await;
            unreachable!("a halted node's task is never polled again")
        }
        Some(Fault::Halt) => {
            // The injector crashed the node; the simulator drops this task at its next poll.
            std::future::pending::<()>().await;
            unreachable!("a halted node's task is never polled again")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_all_is_complete() {
        let names: std::collections::BTreeSet<&str> =
            FaultPoint::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names.len(), FaultPoint::ALL.len());
        let points: std::collections::BTreeSet<FaultPoint> =
            FaultPoint::ALL.iter().copied().collect();
        assert_eq!(points.len(), FaultPoint::ALL.len());
    }

    #[test]
    fn injected_errors_are_labelled() {
        let e = injected_error(FaultPoint::DiskSyncBefore);
        assert!(e.to_string().starts_with("injected"), "{e}");
        assert!(e.to_string().contains("disk.sync.before"), "{e}");
    }
}
