//! The group coordinator: an IO-free core (`group.rs`, `shard.rs`, `records.rs`; no `rt`, no
//! `async`) and its driver (`driver.rs`), which alone reaches the log and the clock.
//!
//! Invariants: the core files never import `crate::rt` and contain no `async`
//! (`tests/determinism_rules.rs` checks it); the coordinator's state lives in
//! `__consumer_offsets`, in Kafka's own record layout ([`records`]).

pub mod driver;
pub mod group;
pub mod records;
pub mod shard;
