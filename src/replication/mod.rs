//! Partition replication (design §8): Kafka's ISR protocol, not Raft. The leader of a
//! partition appends its clients' batches, followers fetch them with Kafka's Fetch and append
//! them with the leader's offsets and epochs, and the leader's high watermark is the minimum
//! over the ISR of what each member holds durably; ISR changes go through the controller
//! (AlterPartition).
//!
//! - [`replica`]: the IO-free core of one partition's replication state (role, ISR, followers'
//!   fetch offsets, the high watermark, ISR proposals), driven by the broker's partition;
//! - [`follower`]: the IO-free decisions a follower makes on a fetch answer (truncate by the
//!   leader's DivergingEpoch, append, or start over at the leader's log start);
//! - [`fetcher`]: the replica fetcher tasks, one per leader this broker follows, on `rt`;
//! - [`checkpoint`]: the `replication-offset-checkpoint` file of high watermarks.

pub mod checkpoint;
pub mod fetcher;
pub mod follower;
pub mod replica;

#[cfg(test)]
mod replica_tests;
