//! What a follower does with one partition of the leader's fetch answer: IO-free decisions,
//! carried out by the replica fetcher ([`super::fetcher`]) on the partition's log.
//!
//! Truncation is by leader epoch only (KIP-101, KIP-279; Fetch v12+ carries the leader's
//! DivergingEpoch), never by the high watermark alone: a follower's log agrees with the
//! leader's exactly up to where the leader says the follower's last epoch ends, so cutting at
//! its own high watermark could keep a divergent tail (the high watermark is not durable
//! on every member) or drop acknowledged records that it would then have to fetch again.
//!
//! Invariant: the offset returned by [`truncation_offset`] is never above the follower's log
//! end nor above where the leader says the diverging epoch ends.

use crate::log::leader_epoch::{EpochEnd, UNDEFINED_EPOCH};

/// Where a follower truncates on the leader's DivergingEpoch (`leader`: the epoch and the
/// offset where it ends on the leader), given where its own log says that epoch ends
/// (`local`, from `Log::end_offset_for_epoch(leader.epoch)`) and its log end.
///
/// Kafka's `getOffsetTruncationState`: when the follower has the leader's epoch it cuts at the
/// lower of the two ends; when it only has an older one, at the lower of the leader's end and
/// where its own next epoch starts, and the next fetch (with its new last epoch) finds out
/// whether the leader agrees below that. An epoch unknown here cuts at the leader's end.
pub fn truncation_offset(leader: EpochEnd, local: EpochEnd, log_end: i64) -> i64 {
    assert!(
        leader.epoch != UNDEFINED_EPOCH,
        "a diverging epoch without an epoch"
    );
    let local_end = if local.epoch == UNDEFINED_EPOCH {
        log_end
    } else {
        local.end_offset
    };
    let to = leader.end_offset.min(local_end).min(log_end).max(0);
    assert!(to <= log_end, "a truncation past the log end");
    to
}

/// Whether a leader must answer a follower's fetch at `fetch_offset`, whose last fetched
/// batch was written in `last_fetched_epoch`, with a DivergingEpoch instead of records
/// (Kafka's `Partition.fetchRecords`): `leader` is where the leader's own log says that
/// epoch ends (`Log::end_offset_for_epoch`).
pub fn diverging_epoch(
    last_fetched_epoch: i32,
    fetch_offset: i64,
    leader: EpochEnd,
) -> Option<EpochEnd> {
    if last_fetched_epoch < 0 || leader.epoch == UNDEFINED_EPOCH {
        return None;
    }
    (leader.epoch < last_fetched_epoch || leader.end_offset < fetch_offset).then_some(leader)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(epoch: i32, end_offset: i64) -> EpochEnd {
        EpochEnd { epoch, end_offset }
    }

    #[test]
    fn a_follower_with_the_leaders_epoch_cuts_at_the_lower_end() {
        assert_eq!(truncation_offset(end(3, 40), end(3, 55), 55), 40);
        assert_eq!(truncation_offset(end(3, 60), end(3, 50), 70), 50);
    }

    #[test]
    fn a_follower_with_only_an_older_epoch_cuts_where_its_next_epoch_starts() {
        // The follower has epochs 1 (0..20) and 4 (20..35); the leader says epoch 2 ends at 30.
        // Asked for epoch 2, the follower's cache answers epoch 1, ending at 20.
        assert_eq!(truncation_offset(end(2, 30), end(1, 20), 35), 20);
    }

    #[test]
    fn truncation_never_passes_the_log_end() {
        assert_eq!(truncation_offset(end(5, 100), EpochEnd::UNDEFINED, 42), 42);
        assert_eq!(truncation_offset(end(5, 100), end(5, 90), 42), 42);
    }

    #[test]
    fn the_leader_answers_divergence_only_when_the_epochs_disagree() {
        // The follower fetched up to 50 in epoch 3, which the leader also ends at 50 or later.
        assert_eq!(diverging_epoch(3, 50, end(3, 50)), None);
        assert_eq!(diverging_epoch(3, 50, end(3, 80)), None);
        // The leader's epoch 3 ends at 45: the follower holds 5 offsets the leader lacks.
        assert_eq!(diverging_epoch(3, 50, end(3, 45)), Some(end(3, 45)));
        // The leader never had epoch 3: it answers its floor epoch.
        assert_eq!(diverging_epoch(3, 50, end(2, 60)), Some(end(2, 60)));
        // No epoch sent, or the leader knows nothing: no check.
        assert_eq!(diverging_epoch(-1, 50, end(2, 10)), None);
        assert_eq!(diverging_epoch(3, 50, EpochEnd::UNDEFINED), None);
    }
}
