//! The executable specification of a Samsa partition log, of the
//! consumer groups that read it, and of a Raft quorum.
//!
//! This crate states what a correct partition and group coordinator do,
//! independently of how the broker implements them, so that the
//! deterministic simulation harness and the property tests judge the broker
//! against something they did not derive from it. It depends on nothing,
//! least of all the broker crate.
//!
//! - [`history`] records what a workload did and saw, in Jepsen's terms:
//!   sequential processes invoking operations that complete ok, fail, or
//!   with an unknown outcome, and what the node reported about its log
//!   (opened with a recovery point, found corruption); and consumer groups
//!   as their members saw them (joins with their assignment, revocations,
//!   polls, offset commits, fetches and deletes).
//! - [`model`] holds the reference models: the partition log (dense
//!   offsets, ordered records) and a classic group at its coordinator
//!   (generations, assignments, fenced commits).
//! - [`checker`] judges a history plus the log as read offline after the run,
//!   and reports anomalies under Jepsen's names (lost-write,
//!   inconsistent-offsets, nonmonotonic-send, nonmonotonic-poll, poll-skip,
//!   duplicate, phantom-read, unreported-corruption, retention-overreach,
//!   serving-above-watermark, offset-gap, watermark, corrupt-read).
//! - [`compaction`] states what a compacted partition may have removed (a
//!   record only once a later record of its key stands), which the checker
//!   applies with [`CheckOptions::compaction`].
//! - [`groups`] judges the consumer groups of a history into the same
//!   report (split-assignment, generation-regress, zombie-commit,
//!   lost-commit, commit-regress, unseen).
//! - [`quorum`] judges a Raft quorum from what its nodes reported and their
//!   logs after the run (election-safety, epoch-regress, committed-diverge,
//!   truncated-committed, lost-committed, no-leader, not-converged).
//! - [`register`] judges a replicated register's client operations against
//!   the committed log's order: linearizability in linear time (duplicate-op,
//!   lost-op, failed-applied, wrong-result, realtime-order, stale-read).
//!
//! Everything is deterministic: the same run yields the same history
//! rendering and the same report, byte for byte, so a failing seed can be
//! replayed and compared.

pub mod checker;
pub mod compaction;
pub mod groups;
pub mod history;
pub mod model;
pub mod quorum;
pub mod register;

pub use checker::{
    check, check_retention, Anomaly, AnomalyKind, CheckOptions, Durability, FinalLog, Report,
    StartObservation, ANOMALY_DETAILS_MAX,
};
pub use compaction::{Compacted, Compaction, KeyOf, Tombstone, TombstoneOf};
pub use groups::{check_groups, FinalPartition};
pub use history::{
    CommitResult, Event, EventKind, Generation, GroupEvent, GroupId, History, MemberId, NodeEvent,
    Offset, Op, OpId, Operation, Outcome, ProcessId, TopicPartition, Value,
};
pub use model::{GroupError, GroupModel, LogModel, ModelError};
