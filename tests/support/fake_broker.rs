//! The plumbing of the client tests' scripted fake brokers (`client_fake_broker`,
//! `client_admin_fake_broker`, `client_producer_fake`): a loopback listener whose connections
//! are each served by a task, reading one framed request at a time with Samsa's own
//! `parse_request`, and writing a framed response under a correlation id the test chooses.
//! Also the answers every fake gives alike: ApiVersions from a table of ranges, and Metadata
//! naming the fake as the only node.
//!
//! Test scaffolding on real tokio, outside the simulation's determinism rules: its tasks die
//! with the test's runtime. A malformed frame from the client panics the serving task, which
//! the test sees as a closed connection.

#![allow(dead_code)]

use std::future::Future;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use samsa::protocol::api_versions::{ApiVersion, ApiVersionsResponse};
use samsa::protocol::error::ErrorCode;
use samsa::protocol::frame::parse_request;
use samsa::protocol::header::ResponseHeader;
use samsa::protocol::message::Message;
use samsa::protocol::metadata::{
    MetadataRequest, MetadataResponse, MetadataResponseBroker, MetadataResponsePartition,
    MetadataResponseTopic,
};
use samsa::protocol::response_header_version;
use samsa::protocol::types::NodeId;

/// The bytes of a response's size prefix.
const SIZE_PREFIX_BYTES: usize = 4;

/// One request as the fake read it.
#[derive(Clone, Debug)]
pub struct Request {
    pub api_key: i16,
    pub version: i16,
    pub header_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    pub body: Bytes,
}

/// A listener on an ephemeral loopback port, and the port.
pub async fn bind() -> (TcpListener, i32) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let port = listener.local_addr().expect("local addr").port();
    (listener, i32::from(port))
}

/// Serves each connection `listener` accepts, numbered from 0, with `serve(stream, number)`
/// on a task of its own.
pub fn accept_all<F, Fut>(listener: TcpListener, mut serve: F)
where
    F: FnMut(TcpStream, usize) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move {
        let mut number = 0usize;
        while let Ok((stream, _)) = listener.accept().await {
            #[allow(clippy::disallowed_methods)]
            tokio::spawn(serve(stream, number));
            number += 1;
        }
    });
}

/// The next request on `stream`, or `None` once the client has gone.
pub async fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut prefix = [0u8; SIZE_PREFIX_BYTES];
    stream.read_exact(&mut prefix).await.ok()?;
    let len = usize::try_from(i32::from_be_bytes(prefix)).expect("non-negative size");
    let mut frame = vec![0u8; len];
    stream.read_exact(&mut frame).await.ok()?;
    let request = parse_request(Bytes::from(frame)).expect("the client sends valid frames");
    Some(Request {
        api_key: request.api_key(),
        version: request.api_version(),
        header_version: request.header_version,
        correlation_id: request.header.correlation_id,
        client_id: request.header.client_id.clone(),
        body: request.body.clone(),
    })
}

/// Writes `body` (already encoded) as the response to `api_key` v`version` under
/// `correlation_id`. False when the client has gone.
pub async fn write_response(
    stream: &mut TcpStream,
    api_key: i16,
    version: i16,
    correlation_id: i32,
    body: &[u8],
) -> bool {
    let header_version = response_header_version(api_key, version).expect("known API");
    let mut out = BytesMut::new();
    out.put_i32(0);
    ResponseHeader { correlation_id }
        .encode(&mut out, header_version)
        .expect("header encodes");
    out.extend_from_slice(body);
    let size = i32::try_from(out.len() - SIZE_PREFIX_BYTES).expect("response fits");
    out[..SIZE_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
    stream.write_all(&out).await.is_ok()
}

pub fn encode<M: Message>(message: &M, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    message.encode(&mut out, version).expect("response encodes");
    out.freeze()
}

/// An ApiVersions answer advertising `(api key, min version, max version)` each.
pub fn api_versions(ranges: &[(i16, i16, i16)], error: ErrorCode, version: i16) -> Bytes {
    encode(
        &ApiVersionsResponse {
            error_code: error.0,
            api_keys: ranges
                .iter()
                .map(|&(api_key, min_version, max_version)| ApiVersion {
                    api_key,
                    min_version,
                    max_version,
                })
                .collect(),
            ..ApiVersionsResponse::default()
        },
        version,
    )
}

/// The Metadata answer (to encode in `version`) of a fake that is node `node` at `port`, the
/// controller, with `topic(name)` as each requested topic (all topics: none).
pub fn metadata(
    body: Bytes,
    version: i16,
    port: i32,
    node: i32,
    topic: impl Fn(Option<String>) -> MetadataResponseTopic,
) -> MetadataResponse {
    let request = MetadataRequest::decode_exact(body, version).expect("metadata request decodes");
    MetadataResponse {
        brokers: vec![MetadataResponseBroker {
            node_id: NodeId(node),
            host: "127.0.0.1".into(),
            port,
            rack: None,
        }],
        controller_id: NodeId(node),
        topics: request
            .topics
            .unwrap_or_default()
            .into_iter()
            .map(|t| topic(t.name))
            .collect(),
        ..MetadataResponse::default()
    }
}

/// Partition 0 led by `node`, the only replica.
pub fn led_partition(node: i32) -> MetadataResponsePartition {
    MetadataResponsePartition {
        partition_index: 0,
        leader_id: NodeId(node),
        replica_nodes: vec![NodeId(node)],
        isr_nodes: vec![NodeId(node)],
        ..MetadataResponsePartition::default()
    }
}

/// Metadata naming the fake as node 1, leader of partition 0 of every requested topic.
pub fn metadata_one_partition(body: Bytes, version: i16, port: i32) -> Bytes {
    let response = metadata(body, version, port, 1, |name| MetadataResponseTopic {
        name,
        partitions: vec![led_partition(1)],
        ..MetadataResponseTopic::default()
    });
    encode(&response, version)
}
