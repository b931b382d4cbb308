//! A minimal blocking Kafka client over `std::net` built on Samsa's own codec
//! (`samsa::protocol`), for tests that need exact control of the bytes on the wire: framing
//! requests, reading responses, and the "is the broker still healthy" exchange of
//! ApiVersions then Metadata.
//!
//! Include it with `#[path = "support/kafka_wire.rs"] mod kafka_wire;`.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use samsa::protocol::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use samsa::protocol::header::{RequestHeader, ResponseHeader};
use samsa::protocol::message::Message;
use samsa::protocol::metadata::{MetadataRequest, MetadataResponse};
use samsa::protocol::wire::Reader;
use samsa::protocol::{request_header_version, response_header_version};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a test waits for a response (or for the broker to close) before it counts as no
/// answer.
pub const READ_TIMEOUT_MS: u64 = 10_000;
/// The largest response a test accepts; a bigger size prefix is a broken response.
pub const RESPONSE_BYTES_MAX: usize = 64 << 20;
/// The Metadata version the healthy exchange asks for (capped by what the broker offers).
pub const METADATA_VERSION_MAX: i16 = 12;

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, Duration::from_millis(READ_TIMEOUT_MS))
        .unwrap_or_else(|e| panic!("connect to the broker at {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_millis(READ_TIMEOUT_MS)))
        .expect("set read timeout");
    s.set_write_timeout(Some(Duration::from_millis(READ_TIMEOUT_MS)))
        .expect("set write timeout");
    s.set_nodelay(true).expect("set TCP_NODELAY");
    s
}

/// A request frame without its size prefix: header (in the version the API's version calls
/// for) followed by `body`.
pub fn request_frame(
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    header_version: i16,
    body: &[u8],
) -> Vec<u8> {
    let header = RequestHeader {
        request_api_key: api_key,
        request_api_version: api_version,
        correlation_id,
        client_id: Some("samsa-test".into()),
    };
    let mut out = BytesMut::new();
    header
        .encode(&mut out, header_version)
        .expect("request header encodes");
    out.extend_from_slice(body);
    out.to_vec()
}

/// The frame with its 4-byte big-endian size prefix.
pub fn with_size(frame: &[u8]) -> Vec<u8> {
    let size = i32::try_from(frame.len()).expect("test frames are small");
    let mut v = size.to_be_bytes().to_vec();
    v.extend_from_slice(frame);
    v
}

/// A message's request frame, size prefix included.
pub fn encode_request<M: Message>(msg: &M, version: i16, correlation_id: i32) -> Vec<u8> {
    let hv = request_header_version(M::API_KEY, version).expect("the API is described");
    let mut body = BytesMut::new();
    msg.encode(&mut body, version).expect("request encodes");
    with_size(&request_frame(
        M::API_KEY,
        version,
        correlation_id,
        hv,
        &body,
    ))
}

/// What came back after a request.
#[derive(Debug)]
pub enum Reply {
    /// A whole response frame (without its size prefix).
    Frame(Bytes),
    /// The broker closed the connection (EOF or reset) before a whole response arrived.
    Closed,
    /// Nothing within `READ_TIMEOUT_MS`, and the connection is still open.
    Silent,
}

fn read_full(s: &mut TcpStream, buf: &mut [u8]) -> Result<(), Reply> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => return Err(Reply::Closed),
            Ok(n) => got += n,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return Err(Reply::Silent)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err(Reply::Closed),
        }
    }
    Ok(())
}

/// Reads one response frame, or tells how the broker did not send one.
pub fn read_reply(s: &mut TcpStream) -> Reply {
    let mut prefix = [0u8; 4];
    if let Err(r) = read_full(s, &mut prefix) {
        return r;
    }
    let size = i32::from_be_bytes(prefix);
    let len = usize::try_from(size).unwrap_or(usize::MAX);
    assert!(
        len <= RESPONSE_BYTES_MAX,
        "response size prefix {size} is negative or above {RESPONSE_BYTES_MAX}"
    );
    let mut frame = vec![0u8; len];
    if let Err(r) = read_full(s, &mut frame) {
        return r;
    }
    Reply::Frame(Bytes::from(frame))
}

/// Writes all of `bytes`; `false` if the broker had already closed the connection.
pub fn write_all(s: &mut TcpStream, bytes: &[u8]) -> bool {
    s.write_all(bytes).and_then(|()| s.flush()).is_ok()
}

/// Splits a response frame into its correlation id and body.
pub fn split_response(frame: Bytes, api_key: i16, api_version: i16) -> (i32, Bytes) {
    let hv = response_header_version(api_key, api_version).expect("the API is described");
    let mut r = Reader::new(frame);
    let header = ResponseHeader::decode(&mut r, hv).expect("response header decodes");
    let body = r.bytes(r.remaining()).expect("body");
    (header.correlation_id, body)
}

/// Sends `msg` and decodes its response with Samsa's codec, checking the correlation id.
pub fn call<Req: Message, Resp: Message>(
    s: &mut TcpStream,
    msg: &Req,
    version: i16,
    correlation_id: i32,
) -> Resp {
    assert!(
        write_all(s, &encode_request(msg, version, correlation_id)),
        "{}: the broker closed the connection while the request was written",
        Req::NAME
    );
    let frame = match read_reply(s) {
        Reply::Frame(f) => f,
        other => panic!("{} v{version}: no response ({other:?})", Req::NAME),
    };
    let (cid, body) = split_response(frame, Req::API_KEY, version);
    assert_eq!(cid, correlation_id, "{}: correlation id", Req::NAME);
    Resp::decode_exact(body.clone(), version).unwrap_or_else(|e| {
        panic!(
            "{} v{version} does not decode: {e}; body {:02x?}",
            Resp::NAME,
            &body[..]
        )
    })
}

/// A fresh connection's ApiVersions (v3) then Metadata (all topics) exchange, checked for
/// sense: no error, Metadata and ApiVersions offered, the broker listed at `addr`'s port.
/// Returns the Metadata response.
pub fn healthy_exchange(addr: SocketAddr) -> MetadataResponse {
    let mut s = connect(addr);
    let req = ApiVersionsRequest {
        client_software_name: "samsa-test".into(),
        client_software_version: "1".into(),
    };
    let versions: ApiVersionsResponse = call(&mut s, &req, 3, 1);
    assert_eq!(versions.error_code, 0, "ApiVersions error code");
    let range = |key: i16| {
        versions
            .api_keys
            .iter()
            .find(|k| k.api_key == key)
            .map(|k| (k.min_version, k.max_version))
    };
    assert!(range(18).is_some(), "ApiVersions does not list itself");
    let (md_min, md_max) = range(3).expect("ApiVersions lists Metadata");
    let v = md_max.min(METADATA_VERSION_MAX);
    assert!(v >= md_min, "no common Metadata version");
    let md_req = MetadataRequest {
        topics: None,
        allow_auto_topic_creation: false,
        ..MetadataRequest::default()
    };
    let md: MetadataResponse = call(&mut s, &md_req, v, 2);
    assert!(
        md.brokers.iter().any(|b| i32::from(addr.port()) == b.port),
        "Metadata does not list the broker at port {}: {:?}",
        addr.port(),
        md.brokers
    );
    md
}
