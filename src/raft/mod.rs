//! KRaft, Kafka's pull-based Raft for the metadata log (KIP-595 and the KIPs after it). The
//! core is IO-free, as everything of Samsa's that decides: it takes requests, answers and
//! the time, and says what to persist, send and arm; a thin driver on `rt` carries that out.
//! Its log is the project's partition log ([`crate::log`]: leader appends stamped with the
//! epoch, follower appends that keep the leader's offsets, the leader-epoch cache,
//! truncation to a diverging point, restart at a snapshot).
//!
//! - [`election`]: epochs, votes with pre-vote, leaders, and the vote-granting rule;
//! - [`quorum_state`]: the election state's durable form, Kafka's `quorum-state` file;
//! - [`log_view`]: the core's picture of its log (ends, synced end, epochs);
//! - [`message`]: Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch as the core sees them,
//!   and the metadata log's records;
//! - [`core`]: the replica ([`core::Raft`]): elections, pull replication with divergence
//!   and truncation, the high watermark on a majority of synced logs with the own-epoch
//!   rule, check quorum, graceful resignation.
//!
//! - [`records`]: a core batch as a Kafka record batch, with Kafka's control records;
//! - [`store`]: the metadata log (`__cluster_metadata-0`) on the partition log, and
//!   `quorum-state`;
//! - [`wire`]: the core's messages as Kafka's requests and responses;
//! - [`driver`]: the replica on `rt`: the controller listener, the lanes to the peers, the
//!   syncs, and [`driver::RaftHandle`] for the state machine above;
//! - [`settings`]: a controller's settings under Kafka's names (`samsa controller`);
//! - [`snapshot`]: snapshot files of the state machine (`<offset>-<epoch>.checkpoint`), which
//!   followers below the leader's log start fetch with FetchSnapshot, and which let
//!   retention (`metadata.max.retention.bytes`) move the log start.

pub mod core;
pub mod driver;
pub mod election;
pub mod log_view;
pub mod message;
pub mod quorum_state;
pub mod records;
pub mod settings;
pub mod snapshot;
pub mod store;
pub mod wire;

#[cfg(test)]
mod cluster_tests;
