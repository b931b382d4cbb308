//! KRaft, Kafka's pull-based Raft for the metadata log (KIP-595 and the KIPs after it). The
//! core is IO-free, as everything of Samsa's that decides: it takes requests, answers and
//! the time, and says what to persist, send and arm; a thin driver on `rt` carries that out.
//! Its log is the project's partition log ([`crate::log`]: leader appends stamped with the
//! epoch, follower appends that keep the leader's offsets, the leader-epoch cache,
//! truncation to a diverging point, restart at a snapshot).
//!
//! Built so far: the election state ([`election`]: epochs, votes with pre-vote, leaders, and
//! the vote-granting rule) and its durable form ([`quorum_state`], Kafka's `quorum-state`
//! file). Replication (Fetch on `__cluster_metadata`, the high watermark), BeginQuorumEpoch,
//! EndQuorumEpoch, snapshots and the driver are to come (issue 13).

pub mod election;
pub mod quorum_state;
