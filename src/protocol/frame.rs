//! Request framing: the 4-byte size prefix in front of every request on the wire, and the
//! request header at the start of every frame.
//!
//! Invariants:
//! - A size outside `[REQUEST_BYTES_MIN, max]` is refused from the 4 prefix bytes alone, so
//!   an oversized or negative frame is never read or buffered (Kafka's
//!   `socket.request.max.bytes`).
//! - The API key, API version and correlation id sit at fixed positions in every header
//!   version, so [`peek`] reads them even from a request the codec cannot otherwise parse:
//!   the broker can then answer (KIP-511) or at least log with the correlation id.
//! - Parsing stops after the header: the body stays an undecoded zero-copy slice for the
//!   handler of its API.

use super::api_versions::ApiVersionsRequest;
use super::header::RequestHeader;
use super::wire::{DecodeError, Reader};
use super::{api_info, request_header_version};
use bytes::Bytes;
use std::fmt;

/// Bytes of the big-endian int32 size in front of every request and response.
pub const SIZE_PREFIX_BYTES: usize = 4;
/// The fixed part every request header starts with: api key, api version, correlation id.
pub const REQUEST_BYTES_MIN: usize = 8;
/// Kafka's default for `socket.request.max.bytes` (100 MiB).
pub const SOCKET_REQUEST_BYTES_MAX_DEFAULT: usize = 104_857_600;

/// Why a request frame cannot be handled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The size prefix is negative or smaller than any request.
    InvalidSize { size: i32 },
    /// The size prefix exceeds the configured maximum; the frame must not be read.
    TooLarge { size: usize, max: usize },
    /// Fewer bytes than the fixed part of every request header.
    Truncated { len: usize },
    /// The API key is not one the codec knows.
    UnknownApiKey { api_key: i16, correlation_id: i32 },
    /// The API is known, but not at this version.
    UnsupportedVersion {
        api_key: i16,
        api_version: i16,
        correlation_id: i32,
    },
    /// The header did not decode.
    Header {
        correlation_id: i32,
        source: DecodeError,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::InvalidSize { size } => write!(
                f,
                "request size {size} is below the {REQUEST_BYTES_MIN} bytes of any request"
            ),
            FrameError::TooLarge { size, max } => write!(
                f,
                "request size {size} exceeds socket.request.max.bytes {max}"
            ),
            FrameError::Truncated { len } => write!(
                f,
                "request of {len} bytes is shorter than the {REQUEST_BYTES_MIN}-byte header start"
            ),
            FrameError::UnknownApiKey {
                api_key,
                correlation_id,
            } => write!(f, "unknown API key {api_key} (correlation id {correlation_id})"),
            FrameError::UnsupportedVersion {
                api_key,
                api_version,
                correlation_id,
            } => write!(
                f,
                "API key {api_key} is not supported at version {api_version} (correlation id {correlation_id})"
            ),
            FrameError::Header {
                correlation_id,
                source,
            } => write!(f, "bad request header (correlation id {correlation_id}): {source}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// The frame size announced by a 4-byte prefix, refused before anything else is read if it
/// is negative, too small for a request, or larger than `max`.
pub fn request_size(prefix: [u8; SIZE_PREFIX_BYTES], max: usize) -> Result<usize, FrameError> {
    let size = i32::from_be_bytes(prefix);
    let Ok(len) = usize::try_from(size) else {
        return Err(FrameError::InvalidSize { size });
    };
    if len < REQUEST_BYTES_MIN {
        return Err(FrameError::InvalidSize { size });
    }
    if len > max {
        return Err(FrameError::TooLarge { size: len, max });
    }
    Ok(len)
}

/// The API key, API version and correlation id at the start of a request frame.
pub fn peek(frame: &[u8]) -> Result<(i16, i16, i32), FrameError> {
    match frame {
        [k0, k1, v0, v1, c0, c1, c2, c3, ..] => Ok((
            i16::from_be_bytes([*k0, *k1]),
            i16::from_be_bytes([*v0, *v1]),
            i32::from_be_bytes([*c0, *c1, *c2, *c3]),
        )),
        _ => Err(FrameError::Truncated { len: frame.len() }),
    }
}

/// A request whose header is parsed and whose body is not.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub header: RequestHeader,
    pub header_version: i16,
    /// The body, a slice of the frame, for the API's handler to decode at
    /// `header.request_api_version`.
    pub body: Bytes,
}

impl Request {
    pub fn api_key(&self) -> i16 {
        self.header.request_api_key
    }

    pub fn api_version(&self) -> i16 {
        self.header.request_api_version
    }
}

/// Parses a request frame (without its size prefix) as far as its header.
///
/// An ApiVersions request newer than the codec knows is still parsed, with the flexible
/// header (v2): KIP-511 has the broker answer it with a v0 body listing what it supports, so
/// the client can fall back.
pub fn parse_request(frame: Bytes) -> Result<Request, FrameError> {
    let (api_key, api_version, correlation_id) = peek(&frame)?;
    let Some(info) = api_info(api_key) else {
        return Err(FrameError::UnknownApiKey {
            api_key,
            correlation_id,
        });
    };
    let known = (info.versions.0..=info.versions.1).contains(&api_version);
    let header_version = match request_header_version(api_key, api_version) {
        Some(v) if known => v,
        _ if api_key == ApiVersionsRequest::API_KEY && api_version > info.versions.1 => 2,
        _ => {
            return Err(FrameError::UnsupportedVersion {
                api_key,
                api_version,
                correlation_id,
            })
        }
    };
    let mut reader = Reader::new(frame);
    let header = RequestHeader::decode(&mut reader, header_version).map_err(|source| {
        FrameError::Header {
            correlation_id,
            source,
        }
    })?;
    let body = reader
        .bytes(reader.remaining())
        .map_err(|source| FrameError::Header {
            correlation_id,
            source,
        })?;
    Ok(Request {
        header,
        header_version,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::metadata::MetadataRequest;
    use bytes::BytesMut;

    fn frame(header: &RequestHeader, header_version: i16, body: &[u8]) -> Bytes {
        let mut out = BytesMut::new();
        header
            .encode(&mut out, header_version)
            .expect("header encodes");
        out.extend_from_slice(body);
        out.freeze()
    }

    #[test]
    fn protocol_frame_sizes_are_refused_from_the_prefix_alone() {
        let max = 1 << 20;
        assert_eq!(request_size(100i32.to_be_bytes(), max), Ok(100));
        // The 2 GiB prefix from the issue, a negative one and a tiny one.
        assert_eq!(
            request_size(i32::MAX.to_be_bytes(), max),
            Err(FrameError::TooLarge {
                size: i32::MAX as usize,
                max
            })
        );
        assert_eq!(
            request_size((-5i32).to_be_bytes(), max),
            Err(FrameError::InvalidSize { size: -5 })
        );
        assert_eq!(
            request_size(3i32.to_be_bytes(), max),
            Err(FrameError::InvalidSize { size: 3 })
        );
        let shown = request_size(i32::MAX.to_be_bytes(), max)
            .unwrap_err()
            .to_string();
        assert!(shown.contains("socket.request.max.bytes"), "{shown}");
    }

    #[test]
    fn protocol_frame_parses_the_header_and_leaves_the_body() {
        let header = RequestHeader {
            request_api_key: MetadataRequest::API_KEY,
            request_api_version: 12,
            correlation_id: 7,
            client_id: Some("rdkafka".into()),
        };
        let request = parse_request(frame(&header, 2, b"\x01\x02")).expect("parses");
        assert_eq!(request.header, header);
        assert_eq!(request.header_version, 2);
        assert_eq!(&request.body[..], b"\x01\x02");
        let old = RequestHeader {
            request_api_version: 1,
            ..header.clone()
        };
        assert_eq!(
            parse_request(frame(&old, 1, b""))
                .expect("parses")
                .header_version,
            1
        );
    }

    #[test]
    fn protocol_frame_errors_name_the_request() {
        let unknown = RequestHeader {
            request_api_key: 999,
            request_api_version: 0,
            correlation_id: 42,
            client_id: None,
        };
        assert_eq!(
            parse_request(frame(&unknown, 1, b"")),
            Err(FrameError::UnknownApiKey {
                api_key: 999,
                correlation_id: 42
            })
        );
        // Produce v2: Kafka 4 no longer speaks it (the broker logs and closes).
        let produce_v2 = RequestHeader {
            request_api_key: 0,
            request_api_version: 2,
            ..unknown.clone()
        };
        assert_eq!(
            parse_request(frame(&produce_v2, 1, b"")),
            Err(FrameError::UnsupportedVersion {
                api_key: 0,
                api_version: 2,
                correlation_id: 42
            })
        );
        assert_eq!(
            parse_request(Bytes::from_static(b"\x00\x03\x00")),
            Err(FrameError::Truncated { len: 3 })
        );
        // A header whose client id claims more bytes than the frame has.
        let bad = Bytes::from_static(b"\x00\x03\x00\x01\x00\x00\x00\x09\x00\x50ab");
        match parse_request(bad) {
            Err(FrameError::Header { correlation_id, .. }) => assert_eq!(correlation_id, 9),
            other => panic!("expected a header error, got {other:?}"),
        }
    }

    #[test]
    fn protocol_frame_parses_an_api_versions_request_newer_than_known() {
        let future = RequestHeader {
            request_api_key: ApiVersionsRequest::API_KEY,
            request_api_version: 99,
            correlation_id: 1,
            client_id: Some("future-client".into()),
        };
        let request = parse_request(frame(&future, 2, b"\x00")).expect("KIP-511 fallback");
        assert_eq!(request.api_version(), 99);
        assert_eq!(request.header.client_id.as_deref(), Some("future-client"));
    }

    proptest::proptest! {
        #[test]
        fn protocol_frame_parse_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = parse_request(Bytes::from(bytes));
        }
    }
}
