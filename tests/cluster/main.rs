//! The cluster's integration tests on real TCP and real files, in one test binary (link time
//! grows with every one). Run one area with `cargo test --test cluster -- <module>::`.
//!
//! - `raft_quorum`: three KRaft replicas in one process, each with its own directory and
//!   controller listener: election, replication, failover, restart, DescribeQuorum.
//! - `controller_quorum`: three controllers above three replicas in one process: the
//!   controller APIs over the wire, images on every node, failover, catching up from a
//!   snapshot.
//! - `metadata_quorum_cli`: `samsa metadata-quorum describe` against three replicas'
//!   controller listeners, every `--status` field and the `--replication` table.
//! - `controller_process`: three `samsa controller` processes: election, failover after a
//!   SIGKILL, clean SIGTERM, topic creation again after the active controller's SIGKILL, a
//!   bad setting refused.

#[path = "../support/controller_requests.rs"]
mod controller_requests;

mod broker_cluster;
mod controller_process;
mod controller_quorum;
mod metadata_quorum_cli;
mod raft_quorum;
