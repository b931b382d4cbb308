//! Robustness of the produce/consume milestone's message decoders against hostile input, as
//! codec_fuzz.rs does for the first messages: proptest over arbitrary byte strings and mutated
//! valid encodings, decoding every message below at every version.
//!
//! Every decode must return (an error is fine) without panicking, and must not allocate more
//! than `64 * input_len + 64 KiB` at its peak, measured by a counting global allocator. The
//! counts are per thread, so tests running in parallel do not disturb each other.

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use samsa::protocol::wire::DecodeError;
use samsa::protocol::{
    alter_configs as ac, create_partitions as cp, create_topics as ct, delete_records as dr,
    delete_topics as dt, describe_cluster as dc, describe_configs as dcf, describe_log_dirs as dld,
    fetch as f, find_coordinator as fc, incremental_alter_configs as iac, init_producer_id as ipi,
    list_offsets as lo, produce as p,
};

#[path = "../support/strategies_produce_consume.rs"]
mod strategies;
use strategies::{encoded, Msg};

use super::fuzz_support::{
    decode_everything, dense_minimal_elements_stay_within_bound, mutate, mutation, DecoderEntry,
};

fn decoder<M: Msg>(buf: Bytes, v: i16) -> Result<(), DecodeError> {
    M::dec_exact(buf, v).map(drop)
}

/// Every message covered here: its name, versions, and decoder.
fn decoders() -> Vec<DecoderEntry> {
    fn entry<M: Msg>() -> DecoderEntry {
        (M::NAME, M::VERSIONS, decoder::<M>)
    }
    vec![
        entry::<p::ProduceRequest>(),
        entry::<p::ProduceResponse>(),
        entry::<f::FetchRequest>(),
        entry::<f::FetchResponse>(),
        entry::<lo::ListOffsetsRequest>(),
        entry::<lo::ListOffsetsResponse>(),
        entry::<fc::FindCoordinatorRequest>(),
        entry::<fc::FindCoordinatorResponse>(),
        entry::<ct::CreateTopicsRequest>(),
        entry::<ct::CreateTopicsResponse>(),
        entry::<dt::DeleteTopicsRequest>(),
        entry::<dt::DeleteTopicsResponse>(),
        entry::<dr::DeleteRecordsRequest>(),
        entry::<dr::DeleteRecordsResponse>(),
        entry::<ipi::InitProducerIdRequest>(),
        entry::<ipi::InitProducerIdResponse>(),
        entry::<dcf::DescribeConfigsRequest>(),
        entry::<dcf::DescribeConfigsResponse>(),
        entry::<ac::AlterConfigsRequest>(),
        entry::<ac::AlterConfigsResponse>(),
        entry::<iac::IncrementalAlterConfigsRequest>(),
        entry::<iac::IncrementalAlterConfigsResponse>(),
        entry::<dld::DescribeLogDirsRequest>(),
        entry::<dld::DescribeLogDirsResponse>(),
        entry::<cp::CreatePartitionsRequest>(),
        entry::<cp::CreatePartitionsResponse>(),
        entry::<dc::DescribeClusterRequest>(),
        entry::<dc::DescribeClusterResponse>(),
    ]
}

fn any_valid_encoding() -> impl Strategy<Value = (i16, Bytes)> {
    prop_oneof![
        encoded::<p::ProduceRequest>(),
        encoded::<p::ProduceResponse>(),
        encoded::<f::FetchRequest>(),
        encoded::<f::FetchResponse>(),
        encoded::<lo::ListOffsetsRequest>(),
        encoded::<lo::ListOffsetsResponse>(),
        encoded::<fc::FindCoordinatorRequest>(),
        encoded::<fc::FindCoordinatorResponse>(),
        encoded::<ct::CreateTopicsRequest>(),
        encoded::<ct::CreateTopicsResponse>(),
        encoded::<dt::DeleteTopicsRequest>(),
        encoded::<dt::DeleteTopicsResponse>(),
        encoded::<dr::DeleteRecordsRequest>(),
        encoded::<dr::DeleteRecordsResponse>(),
        encoded::<ipi::InitProducerIdRequest>(),
        encoded::<ipi::InitProducerIdResponse>(),
        encoded::<dcf::DescribeConfigsRequest>(),
        encoded::<dcf::DescribeConfigsResponse>(),
        encoded::<ac::AlterConfigsRequest>(),
        encoded::<ac::AlterConfigsResponse>(),
        encoded::<iac::IncrementalAlterConfigsRequest>(),
        encoded::<iac::IncrementalAlterConfigsResponse>(),
        encoded::<dld::DescribeLogDirsRequest>(),
        encoded::<dld::DescribeLogDirsResponse>(),
        encoded::<cp::CreatePartitionsRequest>(),
        encoded::<cp::CreatePartitionsResponse>(),
        encoded::<dc::DescribeClusterRequest>(),
        encoded::<dc::DescribeClusterResponse>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn protocol_pc_decoders_survive_arbitrary_bytes(input in vec(any::<u8>(), 0..512)) {
        decode_everything(&decoders(), &Bytes::from(input))?;
    }

    #[test]
    fn protocol_pc_decoders_survive_mutated_encodings(
        (_v, valid) in any_valid_encoding(),
        mutations in vec(mutation(), 1..4),
    ) {
        decode_everything(&decoders(), &mutate(&valid, &mutations))?;
    }
}

/// Inputs large enough that the `64 * input_len` term of the bound dominates, built to make
/// decoders allocate as much as the plausibility checks let them: an array count claiming one
/// element per `m` bytes of what follows, for every small `m`, placed at each of the first
/// offsets, followed by filler that decodes as minimal elements (zeros in classic versions,
/// ones in compact ones) or fails after the array was allocated.
#[test]
fn protocol_pc_decoders_dense_minimal_elements_stay_within_bound() {
    dense_minimal_elements_stay_within_bound(
        &decoders(),
        12,
        &[1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 18, 20, 24, 26, 32],
    );
}
