//! Robustness of the replication and KRaft message decoders against hostile input, in the
//! manner of `codec_fuzz.rs`: proptest over arbitrary byte strings and mutated valid
//! encodings, decoding every replication message at every version.
//!
//! Every decode must return (an error is fine) without panicking, and must not allocate more
//! than `64 * input_len + 64 KiB` at its peak, measured by a counting global allocator (per
//! thread, so tests running in parallel do not disturb each other).
//!
//! Every test name starts with "protocol_".

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
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

#[path = "support/strategies_replication.rs"]
mod strategies;
use strategies::{encoded, Msg};

/// The allocation a decode of `input_len` bytes may reach.
fn allocation_max(input_len: usize) -> usize {
    64 * input_len + 64 * 1024
}

struct Counting;

thread_local! {
    // Const-initialised and without destructors, so touching them never allocates.
    static CURRENT: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    let _ = CURRENT.try_with(|c| {
        let now = c.get() + delta;
        c.set(now);
        let _ = PEAK.try_with(|p| {
            if now > p.get() {
                p.set(now)
            }
        });
    });
}

// SAFETY: every call is forwarded to `System` unchanged; the counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        note(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            // Counted as if old and new existed at once, the worst case of a moving realloc.
            note(new_size as isize);
            note(-(layout.size() as isize));
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result and the peak bytes allocated meanwhile on this thread.
fn peak_allocated<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = CURRENT.with(|c| c.get());
    PEAK.with(|p| p.set(base));
    let out = f();
    let peak = PEAK.with(|p| p.get());
    (out, (peak - base).max(0) as usize)
}

type Decoder = fn(Bytes, i16) -> Result<(), DecodeError>;

fn decoder<M: Msg>(buf: Bytes, v: i16) -> Result<(), DecodeError> {
    M::dec_exact(buf, v).map(drop)
}

/// Every replication message: its name, versions, and decoder.
fn decoders() -> Vec<(&'static str, (i16, i16), Decoder)> {
    fn entry<M: Msg>() -> (&'static str, (i16, i16), Decoder) {
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
    ]
}

/// Decodes `input` as every message at every version (plus one version beyond each end),
/// checking the allocation bound each time.
fn decode_everything(input: &Bytes) -> Result<(), TestCaseError> {
    for (name, (lo, hi), decode) in decoders() {
        for v in lo - 1..=hi + 1 {
            let (result, peak) = peak_allocated(|| decode(input.clone(), v));
            prop_assert!(
                peak <= allocation_max(input.len()),
                "{name} v{v}: {peak} bytes allocated for {} input bytes",
                input.len()
            );
            if v < lo || v > hi {
                let is_unsupported = matches!(
                    result,
                    Err(DecodeError {
                        kind: DecodeErrorKind::UnsupportedVersion { .. },
                        ..
                    })
                );
                prop_assert!(is_unsupported, "{name} v{v}");
            }
        }
    }
    Ok(())
}

/// One way to damage a valid encoding.
#[derive(Clone, Debug)]
enum Mutation {
    /// Overwrite the byte at (index modulo length).
    Set(usize, u8),
    /// Insert bytes at (index modulo length + 1).
    Insert(usize, Vec<u8>),
    /// Cut the encoding to (index modulo length + 1) bytes.
    Truncate(usize),
    /// Overwrite four bytes with a large count or length.
    BigLength(usize, u32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        1 => (any::<usize>(), vec(any::<u8>(), 1..8)).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        2 => (any::<usize>(), prop_oneof![Just(0x7fff_ffffu32), Just(0x4000_0000), Just(0xffff_fffe), any::<u32>()])
            .prop_map(|(i, n)| Mutation::BigLength(i, n)),
    ]
}

fn mutate(valid: &Bytes, mutations: &[Mutation]) -> Bytes {
    let mut b = valid.to_vec();
    for m in mutations {
        let len = b.len();
        match m {
            Mutation::Set(i, byte) if len > 0 => b[i % len] = *byte,
            Mutation::Insert(i, bytes) => {
                let at = i % (len + 1);
                b.splice(at..at, bytes.iter().copied());
            }
            Mutation::Truncate(i) => b.truncate(i % (len + 1)),
            Mutation::BigLength(i, n) if len >= 4 => {
                let at = i % (len - 3);
                b[at..at + 4].copy_from_slice(&n.to_be_bytes());
            }
            _ => {}
        }
    }
    Bytes::from(b)
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
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn protocol_replication_decoders_survive_arbitrary_bytes(input in vec(any::<u8>(), 0..512)) {
        decode_everything(&Bytes::from(input))?;
    }

    #[test]
    fn protocol_replication_decoders_survive_mutated_encodings(
        (_v, valid) in any_valid_encoding(),
        mutations in vec(mutation(), 1..4),
    ) {
        decode_everything(&mutate(&valid, &mutations))?;
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
    const INPUT_LEN: usize = 64 * 1024;
    let mut worst = (0usize, String::new());
    for filler in [0u8, 1] {
        for at in 0..8usize {
            for per in [1usize, 2, 3, 4, 5, 6, 8, 12, 16, 20, 24, 32] {
                let count = (INPUT_LEN / per) as u32;
                let mut classic = vec![filler; INPUT_LEN];
                classic[at..at + 4].copy_from_slice(&count.to_be_bytes());
                let mut compact = BytesMut::from(&vec![filler; at][..]);
                samsa::protocol::record_batch::write_unsigned_varint(&mut compact, count + 1);
                compact.resize(INPUT_LEN, filler);
                for input in [Bytes::from(classic), compact.freeze()] {
                    for (name, (lo, hi), decode) in decoders() {
                        for v in lo..=hi {
                            let (_, peak) = peak_allocated(|| decode(input.clone(), v));
                            assert!(
                                peak <= allocation_max(input.len()),
                                "{name} v{v}: {peak} bytes allocated for {} input bytes",
                                input.len()
                            );
                            if peak > worst.0 {
                                worst = (peak, format!("{name} v{v} at {at} per {per}"));
                            }
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "worst: {} bytes ({:.1} x input) by {}",
        worst.0,
        worst.0 as f64 / INPUT_LEN as f64,
        worst.1
    );
}
