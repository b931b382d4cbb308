//! The broker: configuration, topics and their partitions, the accept loop and connections,
//! one handler file per API, and the purgatory where fetches wait for data.
//!
//! Invariants: a handler never touches the network or the disk directly (it goes through a
//! partition's log and `rt`); a handler never needs to know which node leads a partition,
//! it asks the partition, which on a single node is always its own leader.

// @broker-modules (one line per module; helpers add theirs below their marker)
// @config
pub mod config;
pub mod meta;
// @core
