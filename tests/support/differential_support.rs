//! Shared helpers of the `codec_differential*` tests, which compare Samsa's codec with
//! `kafka-protocol` on bytes only.
//!
//! Include it with `#[path = "support/differential_support.rs"] mod differential_support;`
//! next to a `mod strategies;` (one of the strategy files of tests/support/): the helpers are
//! generic over that module's `Msg` trait.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use samsa::protocol::record_batch::write_unsigned_varint;

use super::strategies::Msg;

/// Samsa's encoding of `m` at version `v`.
pub fn samsa_bytes<M: Msg>(m: &M, v: i16) -> Bytes {
    let mut out = BytesMut::new();
    m.enc(&mut out, v).expect("valid value encodes");
    out.freeze()
}

/// Decodes with `kafka-protocol`, requiring every byte consumed, and re-encodes.
pub fn kafka_roundtrip<T: Encodable + Decodable>(bytes: &Bytes, v: i16) -> (Bytes, usize) {
    let mut buf = bytes.clone();
    let k = T::decode(&mut buf, v).expect("kafka-protocol decodes Samsa's bytes");
    assert_eq!(buf.len(), 0, "kafka-protocol left bytes undecoded");
    let mut out = BytesMut::new();
    k.encode(&mut out, v).expect("kafka-protocol re-encodes");
    (
        out.freeze(),
        k.compute_size(v).expect("kafka-protocol sizes"),
    )
}

/// One value at one version, both ways. `top_tagged_empty` says whether the value's top-level
/// tagged section is empty; then an unknown tagged field is spliced in as well.
pub fn differential<M: Msg, T: Encodable + Decodable>(
    v: i16,
    m: &M,
    top_tagged_empty: bool,
) -> Result<(), TestCaseError> {
    let ours = samsa_bytes(m, v);
    prop_assert_eq!(ours.len(), m.len(v), "encoded_len disagrees with encode");

    let (theirs, their_size) = kafka_roundtrip::<T>(&ours, v);
    prop_assert_eq!(
        &ours[..],
        &theirs[..],
        "{} v{}: kafka-protocol re-encoding differs",
        M::NAME,
        v
    );
    prop_assert_eq!(their_size, ours.len());

    // kafka-protocol's bytes (identical, but decoded as theirs) come back to the same value.
    let back = M::dec_exact(theirs.clone(), v).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, m);
    prop_assert_eq!(&samsa_bytes(&back, v)[..], &ours[..]);

    // An unknown tagged field: the top-level tagged section is the last thing in a struct, and
    // when it is empty it is the single byte 0.
    if v >= M::FLEXIBLE_VERSIONS_FROM && top_tagged_empty {
        prop_assert_eq!(ours.last(), Some(&0u8));
        let mut spliced = BytesMut::from(&ours[..ours.len() - 1]);
        write_unsigned_varint(&mut spliced, 1);
        write_unsigned_varint(&mut spliced, 1000);
        write_unsigned_varint(&mut spliced, 3);
        spliced.extend_from_slice(b"xyz");
        let spliced = spliced.freeze();
        let (theirs, _) = kafka_roundtrip::<T>(&spliced, v);
        prop_assert_eq!(
            &theirs[..],
            &spliced[..],
            "kafka-protocol keeps unknown tags"
        );
        let skipped = M::dec_exact(spliced, v).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&skipped, m);
    }
    Ok(())
}

/// Runs [`differential`] on `cases` values of `M`'s strategy at version `v`, without
/// persisting failures; `top_tagged_empty` tells, per value, whether its top-level tagged
/// section is empty. Panics naming the message and version on the first failure.
pub fn differential_cases<M: Msg, T: Encodable + Decodable>(
    v: i16,
    cases: u32,
    top_tagged_empty: impl Fn(&M) -> bool,
) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    if let Err(e) = runner.run(&M::strategy(v), |m| {
        differential::<M, T>(v, &m, top_tagged_empty(&m))
    }) {
        panic!("{} v{v}: {e}", M::NAME);
    }
}

/// `kafka-protocol`'s default of `T` encoded at version `v`.
pub fn kafka_default_bytes<T: Encodable + Default>(v: i16) -> Bytes {
    let mut theirs = BytesMut::new();
    T::default().encode(&mut theirs, v).unwrap();
    theirs.freeze()
}

/// `kafka-protocol`'s default of `T` at version `v`, decoded by Samsa as `M`, which must
/// re-encode the same bytes. Returns the decoded value and those bytes.
pub fn kafka_default_roundtrip<M: Msg, T: Encodable + Default>(v: i16) -> (M, Bytes) {
    let theirs = kafka_default_bytes::<T>(v);
    let m = M::dec_exact(theirs.clone(), v).unwrap_or_else(|e| panic!("{} v{v}: {e}", M::NAME));
    assert_eq!(samsa_bytes(&m, v), theirs, "{} v{v}", M::NAME);
    (m, theirs)
}
