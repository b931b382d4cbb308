//! The executable specification of a single Samsa partition log.
//!
//! This crate states what a correct partition does, independently of how the
//! broker implements it, so that the deterministic simulation harness and the
//! property tests judge the broker against something they did not derive from
//! it. It depends on nothing, least of all the broker crate.
//!
//! - [`history`] records what a workload did and saw, in Jepsen's terms:
//!   sequential processes invoking operations that complete ok, fail, or
//!   with an unknown outcome, and what the node reported about its log
//!   (opened with a recovery point, found corruption).
//! - [`model`] is the reference partition log: dense offsets, ordered records.
//! - [`checker`] judges a history plus the log as read offline after the run,
//!   and reports anomalies under Jepsen's names (lost-write,
//!   inconsistent-offsets, nonmonotonic-send, nonmonotonic-poll, poll-skip,
//!   duplicate, phantom-read, unreported-corruption, retention-overreach,
//!   serving-above-watermark, offset-gap, watermark, corrupt-read).
//!
//! Everything is deterministic: the same run yields the same history
//! rendering and the same report, byte for byte, so a failing seed can be
//! replayed and compared.

pub mod checker;
pub mod history;
pub mod model;

pub use checker::{
    check, check_retention, Anomaly, AnomalyKind, CheckOptions, FinalLog, Report, StartObservation,
    ANOMALY_DETAILS_MAX,
};
pub use history::{
    CommitResult, Event, EventKind, Generation, GroupEvent, GroupId, History, MemberId, NodeEvent,
    Offset, Op, OpId, Operation, Outcome, ProcessId, TopicPartition, Value,
};
pub use model::{LogModel, ModelError};
