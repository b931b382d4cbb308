//! Robustness of the classic consumer group decoders against hostile input, as
//! `codec_fuzz.rs` checks the first messages: proptest over arbitrary byte strings and mutated
//! valid encodings, decoding every group message at every version.
//!
//! Every decode must return (an error is fine) without panicking, and must not allocate more
//! than `64 * input_len + 64 KiB` at its peak, measured by a counting global allocator. The
//! counts are per thread, so tests running in parallel do not disturb each other.
//!
//! Every test name starts with "protocol_".

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use samsa::protocol::delete_groups::*;
use samsa::protocol::describe_groups::*;
use samsa::protocol::heartbeat::*;
use samsa::protocol::join_group::*;
use samsa::protocol::leave_group::*;
use samsa::protocol::list_groups::*;
use samsa::protocol::offset_commit::*;
use samsa::protocol::offset_delete::*;
use samsa::protocol::offset_fetch::*;
use samsa::protocol::sync_group::*;
use samsa::protocol::wire::{DecodeError, DecodeErrorKind, Reader};

#[path = "../support/strategies_groups.rs"]
mod strategies;
use strategies::{encoded, Msg};

use super::fuzz_support::{
    allocation_max, decode_everything, dense_minimal_elements_stay_within_bound, mutate, mutation,
    peak_allocated, DecoderEntry,
};

fn decoder<M: Msg>(buf: Bytes, v: i16) -> Result<(), DecodeError> {
    M::dec_exact(buf, v).map(drop)
}

/// Every group message: its name, versions, and decoder.
fn decoders() -> Vec<DecoderEntry> {
    fn entry<M: Msg>() -> DecoderEntry {
        (M::NAME, M::VERSIONS, decoder::<M>)
    }
    vec![
        entry::<OffsetCommitRequest>(),
        entry::<OffsetCommitResponse>(),
        entry::<OffsetFetchRequest>(),
        entry::<OffsetFetchResponse>(),
        entry::<JoinGroupRequest>(),
        entry::<JoinGroupResponse>(),
        entry::<HeartbeatRequest>(),
        entry::<HeartbeatResponse>(),
        entry::<LeaveGroupRequest>(),
        entry::<LeaveGroupResponse>(),
        entry::<SyncGroupRequest>(),
        entry::<SyncGroupResponse>(),
        entry::<DescribeGroupsRequest>(),
        entry::<DescribeGroupsResponse>(),
        entry::<ListGroupsRequest>(),
        entry::<ListGroupsResponse>(),
        entry::<DeleteGroupsRequest>(),
        entry::<DeleteGroupsResponse>(),
        entry::<OffsetDeleteRequest>(),
        entry::<OffsetDeleteResponse>(),
    ]
}

fn any_valid_encoding() -> impl Strategy<Value = (i16, Bytes)> {
    prop_oneof![
        encoded::<OffsetCommitRequest>(),
        encoded::<OffsetCommitResponse>(),
        encoded::<OffsetFetchRequest>(),
        encoded::<OffsetFetchResponse>(),
        encoded::<JoinGroupRequest>(),
        encoded::<JoinGroupResponse>(),
        encoded::<HeartbeatRequest>(),
        encoded::<HeartbeatResponse>(),
        encoded::<LeaveGroupRequest>(),
        encoded::<LeaveGroupResponse>(),
        encoded::<SyncGroupRequest>(),
        encoded::<SyncGroupResponse>(),
        encoded::<DescribeGroupsRequest>(),
        encoded::<DescribeGroupsResponse>(),
        encoded::<ListGroupsRequest>(),
        encoded::<ListGroupsResponse>(),
        encoded::<DeleteGroupsRequest>(),
        encoded::<DeleteGroupsResponse>(),
        encoded::<OffsetDeleteRequest>(),
        encoded::<OffsetDeleteResponse>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn protocol_group_decoders_survive_arbitrary_bytes(input in vec(any::<u8>(), 0..512)) {
        decode_everything(&decoders(), &Bytes::from(input))?;
    }

    #[test]
    fn protocol_group_decoders_survive_mutated_encodings(
        (_v, valid) in any_valid_encoding(),
        mutations in vec(mutation(), 1..4),
    ) {
        decode_everything(&decoders(), &mutate(&valid, &mutations))?;
    }
}

/// A 5-byte DescribeGroupsRequest claiming 2^30 group ids (classic and compact counts): a
/// typed error naming the field, with no large allocation.
#[test]
fn protocol_refuses_describe_groups_request_claiming_2_pow_30_groups() {
    let classic = Bytes::from_static(&[0x40, 0x00, 0x00, 0x00, 0x00]);
    // Compact arrays store count + 1 as an unsigned varint: 2^30 + 1.
    let compact = Bytes::from_static(&[0x81, 0x80, 0x80, 0x80, 0x04]);
    for v in 0..=6 {
        let input = if v >= DescribeGroupsRequest::FLEXIBLE_VERSIONS_FROM {
            compact.clone()
        } else {
            classic.clone()
        };
        let (result, peak) =
            peak_allocated(|| DescribeGroupsRequest::decode(&mut Reader::new(input.clone()), v));
        let err = result.unwrap_err();
        assert_eq!(err.path, "DescribeGroupsRequest.groups", "v{v}");
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
}

#[test]
fn protocol_group_errors_name_the_field_path() {
    // JoinGroupRequest v0: group "g", session timeout, member "", protocol type "c", then one
    // protocol whose metadata claims more bytes than remain.
    let mut b = BytesMut::new();
    b.extend_from_slice(&[0, 1, b'g', 0, 0, 0, 9, 0, 0, 0, 1, b'c']);
    b.extend_from_slice(&[0, 0, 0, 1]); // one protocol
    b.extend_from_slice(&[0, 1, b'r', 0, 0, 0, 9, 1, 2]); // name "r", 9 bytes claimed, 2 given
    let err = JoinGroupRequest::decode_exact(b.freeze(), 0).unwrap_err();
    assert_eq!(err.path, "JoinGroupRequest.protocols[0].metadata");
    assert!(matches!(err.kind, DecodeErrorKind::Truncated { .. }));

    // LeaveGroupResponse v3: a member whose instance id is invalid UTF-8.
    let body = Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0xc3, 0, 0]);
    let err = LeaveGroupResponse::decode_exact(body, 3).unwrap_err();
    assert_eq!(err.path, "LeaveGroupResponse.members[0].group_instance_id");

    // OffsetFetchRequest v1 refuses a null topic list; v2 accepts it.
    let body = Bytes::from_static(&[0, 0, 0xff, 0xff, 0xff, 0xff]);
    let err = OffsetFetchRequest::decode_exact(body.clone(), 1).unwrap_err();
    assert_eq!(err.path, "OffsetFetchRequest.topics");
    assert_eq!(err.kind, DecodeErrorKind::NullNotAllowed);
    assert_eq!(
        OffsetFetchRequest::decode_exact(body, 2).unwrap().topics,
        None
    );
}

/// Inputs large enough that the `64 * input_len` term of the bound dominates, built to make
/// decoders allocate as much as the plausibility checks let them: an array count claiming one
/// element per `m` bytes of what follows, for every small `m`, placed at each of the first
/// offsets, followed by filler that decodes as minimal elements (zeros in classic versions,
/// ones in compact ones) or fails after the array was allocated.
#[test]
fn protocol_group_decoders_dense_minimal_elements_stay_within_bound() {
    dense_minimal_elements_stay_within_bound(
        &decoders(),
        8,
        &[1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 18, 20, 24, 26, 32],
    );
}
