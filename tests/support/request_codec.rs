//! Decoding and re-encoding any request frame with Samsa's codec (`samsa::protocol`), for
//! the client fixture tests: `frame::parse_request`, then the API's request decoder,
//! then encode again and compare with the original bytes.
//!
//! Include it with `#[path = "support/request_codec.rs"] mod request_codec;`.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use samsa::protocol::message::Message;
use samsa::protocol::wire::Reader;
use samsa::protocol::{self, frame};

/// Decodes `body` as `M` at `version`, re-encodes it, and returns the new bytes and the
/// number of bytes left after the decoded message (which Kafka's broker ignores, and some
/// clients send).
fn reencode<M: Message>(body: &Bytes, version: i16) -> Result<(Bytes, usize), String> {
    let mut r = Reader::new(body.clone());
    let m = M::decode(&mut r, version).map_err(|e| format!("decode: {e}"))?;
    let trailing = r.remaining();
    let mut out = BytesMut::new();
    m.encode(&mut out, version)
        .map_err(|e| format!("re-encode: {e}"))?;
    if out.len() != m.encoded_len(version) {
        return Err(format!(
            "encoded_len {} but encode wrote {} bytes",
            m.encoded_len(version),
            out.len()
        ));
    }
    Ok((out.freeze(), trailing))
}

macro_rules! reencode_by_key {
    ($key:expr, $body:expr, $version:expr; $($ty:ty),* $(,)?) => {
        match $key {
            $( k if k == <$ty as Message>::API_KEY => reencode::<$ty>($body, $version), )*
            other => Err(format!("no request type is listed here for API key {other}")),
        }
    };
}

pub fn reencode_request(
    api_key: i16,
    body: &Bytes,
    version: i16,
) -> Result<(Bytes, usize), String> {
    use protocol::*;
    reencode_by_key!(api_key, body, version;
        api_versions::ApiVersionsRequest,
        metadata::MetadataRequest,
        produce::ProduceRequest,
        fetch::FetchRequest,
        list_offsets::ListOffsetsRequest,
        find_coordinator::FindCoordinatorRequest,
        create_topics::CreateTopicsRequest,
        delete_topics::DeleteTopicsRequest,
        delete_records::DeleteRecordsRequest,
        init_producer_id::InitProducerIdRequest,
        describe_configs::DescribeConfigsRequest,
        alter_configs::AlterConfigsRequest,
        describe_log_dirs::DescribeLogDirsRequest,
        create_partitions::CreatePartitionsRequest,
        incremental_alter_configs::IncrementalAlterConfigsRequest,
        describe_cluster::DescribeClusterRequest,
        offset_commit::OffsetCommitRequest,
        offset_fetch::OffsetFetchRequest,
        join_group::JoinGroupRequest,
        heartbeat::HeartbeatRequest,
        leave_group::LeaveGroupRequest,
        sync_group::SyncGroupRequest,
        describe_groups::DescribeGroupsRequest,
        list_groups::ListGroupsRequest,
        delete_groups::DeleteGroupsRequest,
        offset_delete::OffsetDeleteRequest,
        offset_for_leader_epoch::OffsetForLeaderEpochRequest,
        elect_leaders::ElectLeadersRequest,
        describe_topic_partitions::DescribeTopicPartitionsRequest,
    )
}

/// The API's name as the codec describes it, without the `Request` suffix.
pub fn api_name(api_key: i16) -> Option<&'static str> {
    protocol::api_info(api_key).map(|a| a.name.trim_end_matches("Request"))
}

/// Parses `frame` (a request without its size prefix), decodes its body and re-encodes
/// header and body. `Ok(trailing)` if every step succeeds and the re-encoding is identical to
/// the frame without its last `trailing` bytes, which the decoder left unread.
pub fn check_frame(frame_bytes: &Bytes) -> Result<usize, String> {
    let request =
        frame::parse_request(frame_bytes.clone()).map_err(|e| format!("parse_request: {e}"))?;
    let mut again = BytesMut::new();
    request
        .header
        .encode(&mut again, request.header_version)
        .map_err(|e| format!("header re-encode: {e}"))?;
    let (body, trailing) =
        reencode_request(request.api_key(), &request.body, request.api_version())?;
    again.extend_from_slice(&body);
    let expected = &frame_bytes[..frame_bytes.len() - trailing];
    if again[..] != expected[..] {
        let at = again
            .iter()
            .zip(expected.iter())
            .position(|(a, b)| a != b)
            .unwrap_or(again.len().min(expected.len()));
        return Err(format!(
            "re-encoded {} bytes differ from the captured {} at byte {at}",
            again.len(),
            expected.len()
        ));
    }
    Ok(trailing)
}
