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
//! - `broker_processes`: three `samsa broker` processes (combined nodes): a six-partition
//!   topic spread, produced and read back with librdkafka; SIGKILL of the active controller
//!   and of a broker, each followed by service again.
//! - `replication_processes`: three `samsa broker` processes and a topic of replication
//!   factor 3 with `min.insync.replicas=2`: an idempotent acks=all librdkafka producer goes on
//!   while a follower is killed with SIGKILL and restarted on its directory; it rejoins every
//!   ISR (the time is printed) and every acknowledged record is read back once, in order.
//!   The failover tests take every partition's leader away (SIGKILL, as the active
//!   controller too; SIGSTOP past the session timeout) under that producer and a confluent-kafka
//!   group member whose coordinator is on the same node.
//! - `group_member` (no tests): that member's process and the check of what it consumed.
//! - `process_cluster` (no tests): starting, killing and restarting those broker processes,
//!   shared by the two modules above.
//! - `controller_process`: three `samsa controller` processes: election, failover after a
//!   SIGKILL, clean SIGTERM, topic creation again after the active controller's SIGKILL, a
//!   bad setting refused.

#[path = "../support/controller_requests.rs"]
mod controller_requests;
#[path = "../support/interop_scripts.rs"]
mod interop_scripts;
#[path = "../support/rdkafka_support.rs"]
mod rdkafka_support;

mod broker_cluster;
mod broker_processes;
mod controller_process;
mod controller_quorum;
mod group_member;
mod metadata_quorum_cli;
mod process_cluster;
mod raft_quorum;
mod replication;
mod replication_processes;
