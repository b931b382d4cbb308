//! Robustness of the replication and KRaft message decoders against hostile input, in the
//! manner of `codec_fuzz.rs`: proptest over arbitrary byte strings and mutated valid
//! encodings, decoding every replication message at every version.
//!
//! Every decode must return (an error is fine) without panicking, and must not allocate more
//! than `64 * input_len + 64 KiB` at its peak, measured by a counting global allocator (per
//! thread, so tests running in parallel do not disturb each other).
//!
//! Every test name starts with "protocol_".

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use samsa::protocol::allocate_producer_ids::*;
use samsa::protocol::alter_partition::*;
use samsa::protocol::alter_partition_reassignments::*;
use samsa::protocol::begin_quorum_epoch::*;
use samsa::protocol::broker_heartbeat::*;
use samsa::protocol::broker_registration::*;
use samsa::protocol::describe_quorum::*;
use samsa::protocol::describe_topic_partitions::*;
use samsa::protocol::elect_leaders::*;
use samsa::protocol::end_quorum_epoch::*;
use samsa::protocol::fetch_snapshot::*;
use samsa::protocol::list_partition_reassignments::*;
use samsa::protocol::offset_for_leader_epoch::*;
use samsa::protocol::vote::*;
use samsa::protocol::wire::{DecodeError, DecodeErrorKind};

#[path = "../support/strategies_replication.rs"]
mod strategies;
use strategies::{encoded, Msg};

use super::fuzz_support::{
    allocation_max, decode_everything, dense_minimal_elements_stay_within_bound, mutate, mutation,
    peak_allocated, DecoderEntry,
};

fn decoder<M: Msg>(buf: Bytes, v: i16) -> Result<(), DecodeError> {
    M::dec_exact(buf, v).map(drop)
}

/// Every replication message: its name, versions, and decoder.
fn decoders() -> Vec<DecoderEntry> {
    fn entry<M: Msg>() -> DecoderEntry {
        (M::NAME, M::VERSIONS, decoder::<M>)
    }
    vec![
        entry::<OffsetForLeaderEpochRequest>(),
        entry::<OffsetForLeaderEpochResponse>(),
        entry::<ElectLeadersRequest>(),
        entry::<ElectLeadersResponse>(),
        entry::<AlterPartitionReassignmentsRequest>(),
        entry::<AlterPartitionReassignmentsResponse>(),
        entry::<ListPartitionReassignmentsRequest>(),
        entry::<ListPartitionReassignmentsResponse>(),
        entry::<VoteRequest>(),
        entry::<VoteResponse>(),
        entry::<BeginQuorumEpochRequest>(),
        entry::<BeginQuorumEpochResponse>(),
        entry::<EndQuorumEpochRequest>(),
        entry::<EndQuorumEpochResponse>(),
        entry::<DescribeQuorumRequest>(),
        entry::<DescribeQuorumResponse>(),
        entry::<AlterPartitionRequest>(),
        entry::<AlterPartitionResponse>(),
        entry::<FetchSnapshotRequest>(),
        entry::<FetchSnapshotResponse>(),
        entry::<BrokerRegistrationRequest>(),
        entry::<BrokerRegistrationResponse>(),
        entry::<BrokerHeartbeatRequest>(),
        entry::<BrokerHeartbeatResponse>(),
        entry::<DescribeTopicPartitionsRequest>(),
        entry::<DescribeTopicPartitionsResponse>(),
        entry::<AllocateProducerIdsRequest>(),
        entry::<AllocateProducerIdsResponse>(),
    ]
}

fn any_valid_encoding() -> impl Strategy<Value = (i16, Bytes)> {
    prop_oneof![
        encoded::<OffsetForLeaderEpochRequest>(),
        encoded::<OffsetForLeaderEpochResponse>(),
        encoded::<ElectLeadersRequest>(),
        encoded::<ElectLeadersResponse>(),
        encoded::<AlterPartitionReassignmentsRequest>(),
        encoded::<AlterPartitionReassignmentsResponse>(),
        encoded::<ListPartitionReassignmentsRequest>(),
        encoded::<ListPartitionReassignmentsResponse>(),
        encoded::<VoteRequest>(),
        encoded::<VoteResponse>(),
        encoded::<BeginQuorumEpochRequest>(),
        encoded::<BeginQuorumEpochResponse>(),
        encoded::<EndQuorumEpochRequest>(),
        encoded::<EndQuorumEpochResponse>(),
        encoded::<DescribeQuorumRequest>(),
        encoded::<DescribeQuorumResponse>(),
        encoded::<AlterPartitionRequest>(),
        encoded::<AlterPartitionResponse>(),
        encoded::<FetchSnapshotRequest>(),
        encoded::<FetchSnapshotResponse>(),
        encoded::<BrokerRegistrationRequest>(),
        encoded::<BrokerRegistrationResponse>(),
        encoded::<BrokerHeartbeatRequest>(),
        encoded::<BrokerHeartbeatResponse>(),
        encoded::<DescribeTopicPartitionsRequest>(),
        encoded::<DescribeTopicPartitionsResponse>(),
        encoded::<AllocateProducerIdsRequest>(),
        encoded::<AllocateProducerIdsResponse>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn protocol_replication_decoders_survive_arbitrary_bytes(input in vec(any::<u8>(), 0..512)) {
        decode_everything(&decoders(), &Bytes::from(input))?;
    }

    #[test]
    fn protocol_replication_decoders_survive_mutated_encodings(
        (_v, valid) in any_valid_encoding(),
        mutations in vec(mutation(), 1..4),
    ) {
        decode_everything(&decoders(), &mutate(&valid, &mutations))?;
    }
}

/// Claims of 2^30 elements in the first array of a few messages, classic and compact: a typed
/// error naming the field, with no large allocation.
#[test]
fn protocol_replication_refuses_huge_counts() {
    let classic = Bytes::from_static(&[0x40, 0x00, 0x00, 0x00]);
    let compact = Bytes::from_static(&[0x81, 0x80, 0x80, 0x80, 0x04]);
    for v in 2..=4 {
        let input = if v >= 4 {
            compact.clone()
        } else {
            classic.clone()
        };
        // v3+ starts with the replica id; put the claim right after it.
        let input = if v >= 3 {
            let mut b = BytesMut::from(&[0, 0, 0, 1][..]);
            b.extend_from_slice(&input);
            b.freeze()
        } else {
            input
        };
        let (result, peak) =
            peak_allocated(|| OffsetForLeaderEpochRequest::decode_exact(input.clone(), v));
        let err = result.unwrap_err();
        assert_eq!(err.path, "OffsetForLeaderEpochRequest.topics", "v{v}");
        assert!(
            matches!(
                err.kind,
                DecodeErrorKind::CountTooLarge {
                    count: 0x4000_0000,
                    ..
                }
            ),
            "v{v}: {err}"
        );
        assert!(peak <= allocation_max(input.len()), "v{v}: {peak} bytes");
    }
    // DescribeQuorumRequest (flexible from v0): compact count 2^30 of topics.
    let (result, peak) = peak_allocated(|| DescribeQuorumRequest::decode_exact(compact.clone(), 0));
    let err = result.unwrap_err();
    assert_eq!(err.path, "DescribeQuorumRequest.topics");
    assert!(peak <= allocation_max(compact.len()));
    // BrokerHeartbeat v1: a tagged offline-log-dirs field claiming 2^30 uuids in 6 bytes.
    let mut b = BytesMut::from(&[0u8; 4 + 8 + 8 + 1 + 1][..]);
    b.extend_from_slice(&[0x01, 0x00, 0x05, 0x81, 0x80, 0x80, 0x80, 0x04]);
    let err = BrokerHeartbeatRequest::decode_exact(b.freeze(), 1).unwrap_err();
    assert_eq!(err.path, "BrokerHeartbeatRequest.offline_log_dirs");
    assert!(
        matches!(err.kind, DecodeErrorKind::CountTooLarge { .. }),
        "{err}"
    );
}

/// Inputs large enough that the `64 * input_len` term of the bound dominates, built to make
/// decoders allocate as much as the plausibility checks let them (as in `codec_fuzz.rs`): an
/// array count claiming one element per `per` bytes of what follows, at each of the first
/// offsets, followed by filler that decodes as minimal elements or fails after the array was
/// allocated.
#[test]
fn protocol_replication_dense_minimal_elements_stay_within_bound() {
    dense_minimal_elements_stay_within_bound(
        &decoders(),
        8,
        &[1, 2, 3, 4, 5, 6, 8, 12, 16, 20, 24, 32],
    );
}
