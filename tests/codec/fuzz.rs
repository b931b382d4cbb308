//! Robustness of the message decoders against hostile input: proptest over arbitrary byte
//! strings and mutated valid encodings, decoding every covered message at every version.
//!
//! Every decode must return (an error is fine) without panicking, and must not allocate more
//! than `64 * input_len + 64 KiB` at its peak, measured by a counting global allocator. The
//! counts are per thread, so tests running in parallel do not disturb each other.
//!
//! Every test name contains "protocol" so that `cargo test ... --lib protocol` (whose filter
//! applies to every target) still runs them all.

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use samsa::protocol::api_versions::*;
use samsa::protocol::header::*;
use samsa::protocol::metadata::*;
use samsa::protocol::wire::{DecodeError, DecodeErrorKind, Reader};

#[path = "../support/codec_strategies.rs"]
mod strategies;
use strategies::{encoded, Msg};

use super::fuzz_support::{
    allocation_max, decode_everything, dense_minimal_elements_stay_within_bound, mutate, mutation,
    peak_allocated, DecoderEntry,
};

fn decoder<M: Msg>(buf: Bytes, v: i16) -> Result<(), DecodeError> {
    M::dec_exact(buf, v).map(drop)
}

/// Every covered message: its name, versions, and decoder.
fn decoders() -> Vec<DecoderEntry> {
    fn entry<M: Msg>() -> DecoderEntry {
        (M::NAME, M::VERSIONS, decoder::<M>)
    }
    vec![
        entry::<RequestHeader>(),
        entry::<ResponseHeader>(),
        entry::<ApiVersionsRequest>(),
        entry::<ApiVersionsResponse>(),
        entry::<MetadataRequest>(),
        entry::<MetadataResponse>(),
    ]
}

fn any_valid_encoding() -> impl Strategy<Value = (i16, Bytes)> {
    prop_oneof![
        encoded::<RequestHeader>(),
        encoded::<ResponseHeader>(),
        encoded::<ApiVersionsRequest>(),
        encoded::<ApiVersionsResponse>(),
        encoded::<MetadataRequest>(),
        encoded::<MetadataResponse>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn protocol_decoders_survive_arbitrary_bytes(input in vec(any::<u8>(), 0..512)) {
        decode_everything(&decoders(), &Bytes::from(input))?;
    }

    #[test]
    fn protocol_decoders_survive_mutated_encodings(
        (_v, valid) in any_valid_encoding(),
        mutations in vec(mutation(), 1..4),
    ) {
        decode_everything(&decoders(), &mutate(&valid, &mutations))?;
    }
}

/// The case that made `kafka-protocol` unusable as the runtime codec: a 4-byte body claiming
/// 2^30 topics. It must be a typed error naming the field, with no large allocation.
#[test]
fn protocol_refuses_metadata_request_claiming_2_pow_30_topics() {
    let classic = Bytes::from_static(&[0x40, 0x00, 0x00, 0x00]);
    // Compact arrays store count + 1 as an unsigned varint: 2^30 + 1.
    let compact = Bytes::from_static(&[0x81, 0x80, 0x80, 0x80, 0x04]);
    for v in 0..=13 {
        let input = if v >= MetadataRequest::FLEXIBLE_VERSIONS_FROM {
            compact.clone()
        } else {
            classic.clone()
        };
        let (result, peak) =
            peak_allocated(|| MetadataRequest::decode(&mut Reader::new(input.clone()), v));
        let err = result.unwrap_err();
        assert_eq!(err.path, "MetadataRequest.topics", "v{v}");
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
fn protocol_errors_name_the_field_path() {
    // MetadataResponse v1: no brokers, controller id, then one topic whose second partition's
    // replica list claims more entries than remain (the partition count itself is plausible:
    // a v1 partition takes at least 18 bytes, and 36 remain).
    let mut b = BytesMut::new();
    b.extend_from_slice(&[0, 0, 0, 0]); // brokers: empty
    b.extend_from_slice(&[0, 0, 0, 1]); // controller id
    b.extend_from_slice(&[0, 0, 0, 1]); // one topic
    b.extend_from_slice(&[0, 0, 0, 1, b't', 0]); // error code, name "t", not internal
    b.extend_from_slice(&[0, 0, 0, 2]); // two partitions
    b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // partition 0
    b.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9]); // partition 1: 9 replicas
    b.extend_from_slice(&[0, 0, 0, 0]); // room for 1 replica; enough for 2 partitions of 18 bytes
    let err = MetadataResponse::decode_exact(b.freeze(), 1).unwrap_err();
    assert_eq!(
        err.path,
        "MetadataResponse.topics[0].partitions[1].replica_nodes"
    );
    assert!(matches!(
        err.kind,
        DecodeErrorKind::CountTooLarge { count: 9, .. }
    ));

    // Invalid UTF-8 in a topic name, a bad boolean, a negative length, trailing bytes.
    let err = MetadataRequest::decode_exact(Bytes::from_static(&[0, 0, 0, 1, 0, 2, 0xc3, 0x28]), 1)
        .unwrap_err();
    assert_eq!(err.path, "MetadataRequest.topics[0].name");
    assert_eq!(err.kind, DecodeErrorKind::InvalidUtf8);
    let err = MetadataRequest::decode_exact(Bytes::from_static(&[0, 0, 0, 0, 2]), 4).unwrap_err();
    assert_eq!(err.path, "MetadataRequest.allow_auto_topic_creation");
    assert_eq!(err.kind, DecodeErrorKind::InvalidBool(2));
    let err = MetadataRequest::decode_exact(Bytes::from_static(&[0xff, 0xff, 0xff, 0xfe]), 1)
        .unwrap_err();
    assert_eq!(err.kind, DecodeErrorKind::NegativeLength(-2));
    let err =
        MetadataRequest::decode_exact(Bytes::from_static(&[0, 0, 0, 0, 1, 7]), 4).unwrap_err();
    assert_eq!(err.kind, DecodeErrorKind::TrailingBytes(1));
    let err = MetadataRequest::decode_exact(Bytes::from_static(&[0, 0, 0]), 4).unwrap_err();
    assert!(matches!(
        err.kind,
        DecodeErrorKind::Truncated {
            needed: 4,
            remaining: 3
        }
    ));
}

#[test]
fn protocol_tagged_fields_known_and_unknown() {
    // ApiVersionsResponse v3: empty body, then tagged fields: unknown tag 9 (skipped), tag 3
    // (zk_migration_ready = true).
    let body = Bytes::from_static(&[0, 0, 1, 0, 0, 0, 0, 2, 9, 2, 0xaa, 0xbb, 3, 1, 1]);
    let m = ApiVersionsResponse::decode_exact(body, 3).unwrap();
    assert!(m.zk_migration_ready);
    // A known tagged field whose size says more than its value uses is refused.
    let body = Bytes::from_static(&[0, 0, 1, 0, 0, 0, 0, 1, 3, 2, 1, 0]);
    let err = ApiVersionsResponse::decode_exact(body, 3).unwrap_err();
    assert_eq!(err.path, "ApiVersionsResponse.zk_migration_ready");
    assert_eq!(err.kind, DecodeErrorKind::TrailingBytes(1));
    // A tagged-field count that cannot fit.
    let body = Bytes::from_static(&[0, 0, 1, 0, 0, 0, 0, 0x7f]);
    let err = ApiVersionsResponse::decode_exact(body, 3).unwrap_err();
    assert_eq!(err.path, "ApiVersionsResponse._tagged_fields");
}

/// Inputs large enough that the `64 * input_len` term of the bound dominates, built to make
/// decoders allocate as much as the plausibility checks let them: an array count claiming one
/// element per `m` bytes of what follows, for every small `m`, placed at each of the first
/// offsets, followed by filler that decodes as minimal elements (zeros in classic versions,
/// ones in compact ones) or fails after the array was allocated.
#[test]
fn protocol_decoders_dense_minimal_elements_stay_within_bound() {
    dense_minimal_elements_stay_within_bound(
        &decoders(),
        8,
        &[1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 18, 20, 24, 26, 32],
    );
}
