//! Samsa: a Kafka-compatible streaming platform, tested by deterministic simulation.
//!
//! Module map and dependency direction are described in ARCHITECTURE.md. In short: [`rt`] is
//! the only door to time, tasks, network, disk and randomness; [`protocol`] holds IO-free wire
//! formats; [`log`] is the durable partition log built on `rt`'s disk.

pub mod broker;
pub mod cli;
pub mod client;
pub mod controller;
pub mod coordinator;
pub mod log;
pub mod protocol;
pub mod raft;
pub mod replication;
pub mod rt;
