//! The replica core without a runtime: the high watermark over the (maximal) ISR, the
//! min.insync.replicas rule, ISR shrink and expand proposals, and role changes.

use std::collections::BTreeMap;

use super::replica::*;

const LAG_MS: u64 = 30_000;

fn config(node_id: i32, min_isr: usize) -> ReplicaConfig {
    ReplicaConfig {
        node_id,
        replica_lag_time_max_ms: LAG_MS,
        min_insync_replicas: min_isr,
    }
}

fn state(leader: i32, epoch: i32, partition_epoch: i32, isr: &[i32]) -> PartitionState {
    PartitionState {
        replicas: vec![1, 2, 3],
        isr: isr.to_vec(),
        elr: Vec::new(),
        leader,
        leader_epoch: epoch,
        partition_epoch,
    }
}

fn brokers() -> BTreeMap<i32, BrokerState> {
    (1..=3)
        .map(|id| {
            (
                id,
                BrokerState {
                    epoch: 100 + i64::from(id),
                    eligible: true,
                },
            )
        })
        .collect()
}

/// Broker 1 leading {1,2,3}, epoch 5, with a log of 10 records all synced.
fn leader(min_isr: usize) -> Replica {
    let mut r = Replica::new(config(1, min_isr), 0, ReplicaBugs::default());
    r.apply_state(0, state(1, 5, 7, &[1, 2, 3]), brokers(), (10, 10));
    r
}

#[test]
fn the_high_watermark_is_the_slowest_isr_members_end() {
    let mut r = leader(2);
    assert!(r.is_leader());
    // Followers have not fetched in this epoch: nothing advances.
    assert_eq!(r.ready(0).high_watermark, None);
    r.follower_fetch(1, 2, 102, 5, 10).unwrap();
    assert_eq!(r.high_watermark(), 0, "follower 3 is unknown yet");
    r.follower_fetch(1, 3, 103, 5, 4).unwrap();
    assert_eq!(r.high_watermark(), 4);
    assert_eq!(r.ready(1).high_watermark, Some(4));
    r.follower_fetch(2, 3, 103, 5, 10).unwrap();
    assert_eq!(r.high_watermark(), 10);
    // The leader's own synced end bounds it too.
    r.leader_end_advanced(20, 12);
    r.follower_fetch(3, 2, 102, 5, 20).unwrap();
    r.follower_fetch(3, 3, 103, 5, 20).unwrap();
    assert_eq!(r.high_watermark(), 12);
}

#[test]
fn the_high_watermark_stops_below_min_insync_replicas() {
    let mut r = Replica::new(config(1, 2), 0, ReplicaBugs::default());
    r.apply_state(0, state(1, 5, 7, &[1]), brokers(), (10, 10));
    assert!(!r.enough_replicas());
    r.follower_fetch(1, 2, 102, 5, 10).unwrap();
    r.follower_fetch(1, 3, 103, 5, 10).unwrap();
    // Follower 2 reached the high watermark: it is proposed for the ISR, and counts at once
    // (KIP-497), but the committed ISR {1} is still below 2.
    let ready = r.ready(1);
    assert_eq!(
        ready.alter_partition.map(|p| p.new_isr),
        Some(vec![(1, -1), (2, 102)])
    );
    assert_eq!(r.high_watermark(), 0);
    // The controller commits {1,2}: now it may advance.
    r.alter_partition_answered(2, Ok(state(1, 5, 8, &[1, 2])));
    assert!(r.enough_replicas());
    assert_eq!(r.high_watermark(), 10);
}

#[test]
fn the_planted_min_isr_bug_advances_with_a_lone_leader() {
    let bugs = ReplicaBugs {
        ignore_min_insync_replicas: true,
        ..ReplicaBugs::default()
    };
    let mut r = Replica::new(config(1, 2), 0, bugs);
    r.apply_state(0, state(1, 5, 7, &[1]), brokers(), (10, 10));
    assert_eq!(r.high_watermark(), 10);
}

#[test]
fn a_lagging_isr_member_is_proposed_for_removal_and_still_counts_until_committed() {
    let mut r = leader(2);
    r.follower_fetch(1, 2, 102, 5, 10).unwrap();
    r.follower_fetch(1, 3, 103, 5, 10).unwrap();
    r.leader_end_advanced(30, 30);
    // Follower 2 keeps up, follower 3 stops fetching.
    r.follower_fetch(LAG_MS, 2, 102, 5, 30).unwrap();
    r.tick(LAG_MS);
    assert_eq!(
        r.ready(LAG_MS).alter_partition,
        None,
        "3 lags exactly the limit"
    );
    r.follower_fetch(LAG_MS + 2, 2, 102, 5, 30).unwrap();
    r.tick(LAG_MS + 2);
    let proposal = r.ready(LAG_MS + 2).alter_partition.expect("a shrink");
    assert_eq!(proposal.new_isr, vec![(1, -1), (2, 102)]);
    assert_eq!(proposal.partition_epoch, 7);
    // Until the controller commits, 3 still holds the high watermark back.
    assert_eq!(r.high_watermark(), 10);
    r.alter_partition_answered(LAG_MS + 3, Ok(state(1, 5, 8, &[1, 2])));
    assert_eq!(r.high_watermark(), 30);
}

#[test]
fn an_isr_member_fetching_below_the_high_watermark_is_removed_at_once() {
    let mut r = leader(2);
    r.follower_fetch(1, 2, 102, 5, 10).unwrap();
    r.follower_fetch(1, 3, 103, 5, 10).unwrap();
    assert_eq!(r.high_watermark(), 10);
    r.tick(2);
    assert_eq!(r.ready(2).alter_partition, None, "everyone caught up");
    // Follower 3 truncated at a corrupt batch its scrubber found and fetches from there:
    // it lost acknowledged records, and must not stay electable however recent its fetch.
    r.follower_fetch(3, 3, 103, 5, 4).unwrap();
    r.tick(4);
    let proposal = r.ready(4).alter_partition.expect("a shrink");
    assert_eq!(proposal.new_isr, vec![(1, -1), (2, 102)]);
    assert_eq!(
        r.high_watermark(),
        10,
        "the high watermark never moves back"
    );
}

#[test]
fn a_new_leaders_epoch_starts_at_its_log_end_and_its_high_watermark_catches_up_to_it() {
    let mut r = leader(2);
    // Elected with 10 records, its high watermark (none checkpointed) lags the epoch's start:
    // ListOffsets answers a consumer OFFSET_NOT_AVAILABLE until it has caught up (KIP-207).
    assert_eq!(r.leader_epoch_start_offset(), Some(10));
    assert_eq!(r.high_watermark(), 0);
    r.follower_fetch(1, 2, 102, 5, 10).unwrap();
    r.follower_fetch(1, 3, 103, 5, 10).unwrap();
    assert_eq!(r.high_watermark(), 10);
    r.resign();
    assert_eq!(r.leader_epoch_start_offset(), None, "only a leader has one");
}

#[test]
fn the_planted_fastest_member_bug_passes_the_slowest() {
    let bugs = ReplicaBugs {
        high_watermark_past_slowest: true,
        ..ReplicaBugs::default()
    };
    let mut r = Replica::new(config(1, 2), 0, bugs);
    r.apply_state(0, state(1, 5, 7, &[1, 2, 3]), brokers(), (10, 10));
    r.follower_fetch(1, 2, 102, 5, 10).unwrap();
    assert_eq!(
        r.high_watermark(),
        10,
        "3 has not fetched, yet the bug advances"
    );
}

#[test]
fn expansion_needs_an_eligible_broker_at_its_registered_epoch() {
    let mut b = brokers();
    b.insert(
        3,
        BrokerState {
            epoch: 103,
            eligible: false,
        },
    );
    let mut r = Replica::new(config(1, 1), 0, ReplicaBugs::default());
    r.apply_state(0, state(1, 5, 7, &[1, 2]), b, (10, 10));
    r.follower_fetch(1, 2, 102, 5, 10).unwrap();
    r.follower_fetch(1, 3, 103, 5, 10).unwrap();
    assert_eq!(r.ready(1).alter_partition, None, "3 is fenced");
    r.apply_state(2, state(1, 5, 7, &[1, 2]), brokers(), (10, 10));
    r.follower_fetch(3, 3, 99, 5, 10).unwrap();
    assert_eq!(
        r.ready(3).alter_partition,
        None,
        "3 fetches at a stale broker epoch"
    );
    r.follower_fetch(4, 3, 103, 5, 10).unwrap();
    assert_eq!(
        r.ready(4).alter_partition.map(|p| p.new_isr),
        Some(vec![(1, -1), (2, 102), (3, 103)])
    );
}

/// Page-cache sweep seed 1974: the active controller, cut off from the quorum, wrote the
/// leader's expansion {1,2} + 3 but could not commit it and answered NOT_CONTROLLER; the
/// leader dropped 3 from its maximal ISR and acknowledged records 3 lacked; the next quorum
/// leader committed the record, and 3, in the ISR without them, was elected.
#[test]
fn an_expansion_whose_outcome_is_unknown_stays_counted_until_the_image_settles_it() {
    let mut r = Replica::new(config(1, 2), 0, ReplicaBugs::default());
    r.apply_state(0, state(1, 5, 7, &[1, 2]), brokers(), (10, 10));
    r.follower_fetch(1, 2, 102, 5, 10).unwrap();
    assert_eq!(r.high_watermark(), 10);
    r.leader_end_advanced(20, 20);
    r.follower_fetch(2, 3, 103, 5, 10).unwrap();
    let expansion = r
        .ready(2)
        .alter_partition
        .expect("3 reached the high watermark");
    assert_eq!(r.maximal_isr(), vec![1, 2, 3]);
    r.alter_partition_answered(
        3,
        Err(AlterPartitionRefusal {
            code: 41,
            message: "NOT_CONTROLLER".to_string(),
        }),
    );
    assert_eq!(r.maximal_isr(), vec![1, 2, 3], "it may still commit");
    r.follower_fetch(4, 2, 102, 5, 20).unwrap();
    assert_eq!(r.high_watermark(), 10, "3 has only 10");
    r.tick(3 + ALTER_PARTITION_BACKOFF_MS);
    assert_eq!(
        r.ready(3 + ALTER_PARTITION_BACKOFF_MS).alter_partition,
        Some(expansion),
        "sent again after the backoff"
    );
    // The next controller committed the first request: the image settles it.
    r.apply_state(200, state(1, 5, 8, &[1, 2, 3]), brokers(), (20, 20));
    r.follower_fetch(201, 3, 103, 5, 20).unwrap();
    assert_eq!(r.high_watermark(), 20);
    assert_eq!(
        r.ready(201).alter_partition,
        None,
        "settled, nothing to resend"
    );
}

#[test]
fn an_expansion_the_controller_did_not_attempt_is_dropped_at_once() {
    let mut r = Replica::new(config(1, 2), 0, ReplicaBugs::default());
    r.apply_state(0, state(1, 5, 7, &[1, 2]), brokers(), (10, 10));
    r.follower_fetch(1, 2, 102, 5, 10).unwrap();
    r.leader_end_advanced(20, 20);
    r.follower_fetch(2, 3, 103, 5, 10).unwrap();
    assert!(r.ready(2).alter_partition.is_some());
    r.alter_partition_answered(
        3,
        Err(AlterPartitionRefusal {
            code: 107,
            message: "INELIGIBLE_REPLICA".to_string(),
        }),
    );
    assert_eq!(r.maximal_isr(), vec![1, 2]);
    r.follower_fetch(4, 2, 102, 5, 20).unwrap();
    assert_eq!(r.high_watermark(), 20);
}

#[test]
fn expansion_waits_for_the_start_of_the_leader_epoch() {
    // The leader became leader at log end 10 with high watermark 4 (from its checkpoint).
    let mut r = Replica::new(config(1, 1), 4, ReplicaBugs::default());
    r.apply_state(0, state(1, 5, 7, &[1, 2]), brokers(), (10, 10));
    r.follower_fetch(1, 2, 102, 5, 10).unwrap();
    r.follower_fetch(1, 3, 103, 5, 6).unwrap();
    assert_eq!(
        r.ready(1).alter_partition,
        None,
        "3 is past the high watermark, not the epoch start"
    );
    r.follower_fetch(2, 3, 103, 5, 10).unwrap();
    assert!(r.ready(2).alter_partition.is_some());
}

#[test]
fn fetches_from_other_epochs_and_non_replicas_are_refused() {
    let mut r = leader(2);
    assert_eq!(
        r.follower_fetch(1, 2, 102, 4, 10),
        Err(FetchRefusal::FencedLeaderEpoch)
    );
    assert_eq!(
        r.follower_fetch(1, 2, 102, 6, 10),
        Err(FetchRefusal::UnknownLeaderEpoch)
    );
    assert_eq!(
        r.follower_fetch(1, 9, 109, 5, 10),
        Err(FetchRefusal::NotReplica)
    );
    let mut f = Replica::new(config(2, 2), 0, ReplicaBugs::default());
    f.apply_state(0, state(1, 5, 7, &[1, 2, 3]), brokers(), (10, 10));
    assert_eq!(f.role(), &Role::Follower { leader: 1 });
    assert_eq!(
        f.follower_fetch(1, 3, 103, 5, 10),
        Err(FetchRefusal::NotLeader)
    );
}

#[test]
fn an_unanswered_proposal_is_sent_again() {
    let mut r = leader(2);
    r.follower_fetch(1, 2, 102, 5, 10).unwrap();
    r.tick(LAG_MS + 1);
    let first = r
        .ready(LAG_MS + 1)
        .alter_partition
        .expect("3 never fetched: a shrink");
    r.tick(LAG_MS + 2);
    assert_eq!(r.ready(LAG_MS + 2).alter_partition, None, "in flight");
    r.tick(LAG_MS + 1 + ALTER_PARTITION_RETRY_MS);
    assert_eq!(
        r.ready(LAG_MS + 1 + ALTER_PARTITION_RETRY_MS)
            .alter_partition,
        Some(first)
    );
}

#[test]
fn a_stale_proposal_waits_for_the_image_that_decides() {
    let mut r = leader(2);
    r.follower_fetch(1, 2, 102, 5, 10).unwrap();
    r.tick(LAG_MS + 1);
    assert!(r.ready(LAG_MS + 1).alter_partition.is_some());
    r.alter_partition_answered(
        LAG_MS + 2,
        Err(AlterPartitionRefusal {
            code: 95,
            message: "INVALID_UPDATE_VERSION".to_string(),
        }),
    );
    assert_eq!(r.maximal_isr(), vec![1, 2, 3]);
    // The image brings the controller's own change (3 fenced): the leader takes it.
    r.apply_state(LAG_MS + 3, state(1, 5, 8, &[1, 2]), brokers(), (10, 10));
    assert_eq!(r.maximal_isr(), vec![1, 2]);
    assert_eq!(r.high_watermark(), 10);
}

#[test]
fn a_follower_takes_the_leaders_high_watermark_capped_at_its_log_end() {
    let mut f = Replica::new(config(2, 2), 0, ReplicaBugs::default());
    f.apply_state(0, state(1, 5, 7, &[1, 2, 3]), brokers(), (0, 0));
    f.follower_high_watermark(50, 30);
    assert_eq!(f.high_watermark(), 30);
    f.follower_high_watermark(20, 40);
    assert_eq!(f.high_watermark(), 30, "never back");
    f.truncated(25);
    assert_eq!(f.high_watermark(), 25);
}

#[test]
fn a_new_leader_keeps_its_high_watermark_and_counts_isr_members_as_caught_up() {
    let mut r = Replica::new(config(2, 2), 0, ReplicaBugs::default());
    r.apply_state(0, state(1, 5, 7, &[1, 2, 3]), brokers(), (10, 10));
    r.follower_high_watermark(8, 10);
    r.apply_state(1_000, state(2, 6, 8, &[2, 3]), brokers(), (10, 10));
    assert!(r.is_leader());
    assert_eq!(r.high_watermark(), 8);
    assert_eq!(r.follower(3).map(|f| f.last_caught_up_ms), Some(1_000));
    assert_eq!(r.follower(1).map(|f| f.last_caught_up_ms), Some(0));
    r.tick(1_000 + LAG_MS);
    assert_eq!(r.ready(1_000 + LAG_MS).alter_partition, None);
}
