//! One TCP connection to one broker: framing, correlation ids, timeouts and the version
//! negotiation that opens every connection (ApiVersions, with KIP-511's fallback).
//!
//! Invariants:
//! - At most one request is in flight: `send` writes a request and reads its response before
//!   it returns, so a response always answers the request just written, and its correlation
//!   id is checked all the same.
//! - A request that fails after its first byte may have been written (IO error, timeout,
//!   oversized or undecodable response) leaves the connection broken: it is never reused, so a
//!   late reply can never be taken for the answer to a later request (design rule 6).
//! - No response is read past `response_bytes_max`: the size prefix is checked before the
//!   buffer is allocated.
//! - `version_for` only ever answers a version both the client's codec (capped where the
//!   client lacks a feature the version needs) and the broker support.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::error::{api_name, ClientError};
use crate::protocol::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use crate::protocol::error::ErrorCode;
use crate::protocol::header::{RequestHeader, ResponseHeader};
use crate::protocol::message::Message;
use crate::protocol::wire::Reader;
use crate::protocol::{api_info, request_header_version, response_header_version};
use crate::rt::net::TcpStream;

/// Bytes of the size prefix in front of every response.
const SIZE_PREFIX_BYTES: usize = 4;
/// The smallest response: a header holding only its correlation id.
const RESPONSE_BYTES_MIN: usize = 4;

/// The newest version the client will use of an API, below what the codec describes where the
/// client lacks what newer versions need: Produce v13 and Fetch v13+ name topics by id only.
fn client_version_max(api_key: i16) -> Option<i16> {
    let codec_max = api_info(api_key)?.versions.1;
    Some(match api_key {
        0 | 1 => codec_max.min(12),
        _ => codec_max,
    })
}

/// The limits of one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Largest response accepted, size prefix excluded; a larger one breaks the connection.
    pub response_bytes_max: usize,
    /// How long one request may wait for its response (the broker's own waits, a Fetch's
    /// `max_wait_ms` or a Produce's `timeout_ms`, are added on top by the caller).
    pub request_timeout_ms: u64,
    /// How long opening the TCP connection may take.
    pub connect_timeout_ms: u64,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            response_bytes_max: 104_857_600,
            request_timeout_ms: 30_000,
            connect_timeout_ms: 10_000,
        }
    }
}

/// An open connection to a broker whose API versions are known.
#[derive(Debug)]
pub struct Connection {
    addr: String,
    client_id: String,
    limits: ConnectionLimits,
    /// `None` once the connection is broken.
    stream: Option<TcpStream>,
    next_correlation_id: i32,
    /// The broker's advertised range per API key.
    broker_versions: BTreeMap<i16, (i16, i16)>,
}

impl Connection {
    /// Connects to `addr` (`host:port`) and negotiates API versions.
    pub async fn connect(
        addr: &str,
        client_id: &str,
        limits: ConnectionLimits,
    ) -> Result<Connection, ClientError> {
        let connect_timeout = Duration::from_millis(limits.connect_timeout_ms);
        let stream = match crate::rt::time::timeout(connect_timeout, TcpStream::connect(addr)).await
        {
            Ok(Ok(stream)) => stream,
            Ok(Err(source)) => {
                return Err(ClientError::Connect {
                    addr: addr.to_owned(),
                    source,
                })
            }
            Err(elapsed) => {
                return Err(ClientError::Connect {
                    addr: addr.to_owned(),
                    source: std::io::Error::new(std::io::ErrorKind::TimedOut, elapsed),
                })
            }
        };
        // Requests are small and latency matters more than packet count.
        let _ = stream.set_nodelay(true);
        let mut conn = Connection {
            addr: addr.to_owned(),
            client_id: client_id.to_owned(),
            limits,
            stream: Some(stream),
            next_correlation_id: 0,
            broker_versions: BTreeMap::new(),
        };
        conn.negotiate().await?;
        Ok(conn)
    }

    /// Asks the broker for its versions with the newest ApiVersions the client knows. A
    /// broker that does not know that version answers UNSUPPORTED_VERSION with a v0 body
    /// listing what it supports (KIP-511); that list is used as is.
    async fn negotiate(&mut self) -> Result<(), ClientError> {
        let api_key = ApiVersionsRequest::API_KEY;
        let version = ApiVersionsRequest::VERSIONS.1;
        let request = ApiVersionsRequest {
            client_software_name: "samsa".into(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
        };
        let timeout_ms = self.limits.request_timeout_ms;
        let body = self
            .exchange(api_key, version, &request, timeout_ms, true)
            .await?
            .unwrap_or_default();
        // The error code leads the body in every version, so it can be read before knowing
        // which version the body is in.
        let code = match body.get(..2) {
            Some([a, b]) => ErrorCode(i16::from_be_bytes([*a, *b])),
            _ => ErrorCode::NONE,
        };
        let body_version = if code == ErrorCode::UNSUPPORTED_VERSION {
            0
        } else {
            version
        };
        let response = self.decode_body::<ApiVersionsResponse>(api_key, body_version, body)?;
        if response.error_code != 0 && response.error_code != ErrorCode::UNSUPPORTED_VERSION.0 {
            return Err(ClientError::ApiVersions {
                addr: self.addr.clone(),
                code: ErrorCode(response.error_code),
            });
        }
        self.broker_versions = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        if response.api_keys.is_empty() {
            return Err(ClientError::ApiVersions {
                addr: self.addr.clone(),
                code: ErrorCode(response.error_code),
            });
        }
        Ok(())
    }

    /// The broker's address as given to `connect`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// True once a request failed in a way that leaves the stream unusable.
    pub fn is_broken(&self) -> bool {
        self.stream.is_none()
    }

    /// Takes the stream out, leaving this connection broken but still able to answer
    /// [`Self::version_for`]: for a pipelined connection (the producer's) that reuses the
    /// negotiation and then frames its own requests.
    pub fn take_stream(&mut self) -> Option<TcpStream> {
        self.stream.take()
    }

    /// The client id sent in request headers.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The broker's advertised range of `api_key`, if it advertised one.
    pub fn broker_versions(&self, api_key: i16) -> Option<(i16, i16)> {
        self.broker_versions.get(&api_key).copied()
    }

    /// The version to use for `api_key`: the newest both sides speak.
    pub fn version_for(&self, api_key: i16) -> Result<i16, ClientError> {
        let unsupported = |broker_range| ClientError::UnsupportedApi {
            addr: self.addr.clone(),
            api: api_name(api_key),
            broker_range,
        };
        let (Some(info), Some(ours_max)) = (api_info(api_key), client_version_max(api_key)) else {
            return Err(unsupported(None));
        };
        let Some(&(broker_min, broker_max)) = self.broker_versions.get(&api_key) else {
            return Err(unsupported(None));
        };
        let version = ours_max.min(broker_max);
        if version < info.versions.0.max(broker_min) {
            return Err(unsupported(Some((broker_min, broker_max))));
        }
        Ok(version)
    }

    /// Sends `req` as `api_key` v`version` and waits for its response, within the connection's
    /// request timeout.
    pub async fn send<Req: Message, Resp: Message>(
        &mut self,
        api_key: i16,
        version: i16,
        req: &Req,
    ) -> Result<Resp, ClientError> {
        let timeout_ms = self.limits.request_timeout_ms;
        self.send_with_timeout(api_key, version, req, timeout_ms)
            .await
    }

    /// [`Self::send`] with an explicit timeout, for requests the broker may hold (Fetch's
    /// `max_wait_ms`, Produce's `timeout_ms`).
    pub async fn send_with_timeout<Req: Message, Resp: Message>(
        &mut self,
        api_key: i16,
        version: i16,
        req: &Req,
        timeout_ms: u64,
    ) -> Result<Resp, ClientError> {
        let body = self
            .exchange(api_key, version, req, timeout_ms, true)
            .await?
            .unwrap_or_default();
        self.decode_body(api_key, version, body)
    }

    /// Sends a request the broker does not answer (Produce with acks=0).
    pub async fn send_no_response<Req: Message>(
        &mut self,
        api_key: i16,
        version: i16,
        req: &Req,
    ) -> Result<(), ClientError> {
        let timeout_ms = self.limits.request_timeout_ms;
        self.exchange(api_key, version, req, timeout_ms, false)
            .await
            .map(|_| ())
    }

    fn decode_body<Resp: Message>(
        &mut self,
        api_key: i16,
        version: i16,
        body: Bytes,
    ) -> Result<Resp, ClientError> {
        Resp::decode_exact(body, version).map_err(|source| {
            // What else the stream holds is unknown once a response was misread.
            self.stream = None;
            ClientError::Decode {
                addr: self.addr.clone(),
                api: api_name(api_key),
                version,
                source,
            }
        })
    }

    /// Writes one framed request and, if `expect_response`, reads the body of its response
    /// (header checked and stripped).
    async fn exchange<Req: Message>(
        &mut self,
        api_key: i16,
        version: i16,
        req: &Req,
        timeout_ms: u64,
        expect_response: bool,
    ) -> Result<Option<Bytes>, ClientError> {
        let api = api_name(api_key);
        let addr = self.addr.clone();
        if api_key != Req::API_KEY {
            return Err(ClientError::InvalidArgument {
                reason: format!("a {} body cannot be sent as {api}", Req::NAME),
            });
        }
        let (frame, correlation_id, response_hv) = frame_request(
            &addr,
            api_key,
            version,
            &mut self.next_correlation_id,
            &self.client_id,
            req,
        )?;

        // The stream is taken out while the request is in flight: if this future fails, times
        // out or is dropped, the connection stays broken.
        let Some(mut stream) = self.stream.take() else {
            return Err(ClientError::ConnectionBroken { addr });
        };
        let response_bytes_max = self.limits.response_bytes_max;
        let io = async {
            let network = |source| ClientError::Network {
                addr: addr.clone(),
                api,
                sent: true,
                source,
            };
            stream.write_all(&frame).await.map_err(network)?;
            // madsim's stream only sends what is flushed.
            stream.flush().await.map_err(network)?;
            if !expect_response {
                return Ok(None);
            }
            let read_error = |source: std::io::Error| {
                if source.kind() == std::io::ErrorKind::UnexpectedEof {
                    ClientError::ConnectionClosed {
                        addr: addr.clone(),
                        api,
                    }
                } else {
                    network(source)
                }
            };
            let mut prefix = [0u8; SIZE_PREFIX_BYTES];
            stream.read_exact(&mut prefix).await.map_err(read_error)?;
            let size = i32::from_be_bytes(prefix);
            let len = match usize::try_from(size) {
                Ok(len) if len >= RESPONSE_BYTES_MIN => len,
                _ => {
                    return Err(ClientError::InvalidResponseSize {
                        addr: addr.clone(),
                        api,
                        size,
                    })
                }
            };
            if len > response_bytes_max {
                return Err(ClientError::ResponseTooLarge {
                    addr: addr.clone(),
                    api,
                    size: len,
                    max: response_bytes_max,
                });
            }
            let mut buf = BytesMut::zeroed(len);
            stream.read_exact(&mut buf).await.map_err(read_error)?;
            Ok(Some(buf.freeze()))
        };
        let timeout = Duration::from_millis(timeout_ms);
        let response = match crate::rt::time::timeout(timeout, io).await {
            Ok(Ok(response)) => response,
            Ok(Err(err)) => return Err(err),
            Err(_) => {
                return Err(ClientError::Timeout {
                    addr: self.addr.clone(),
                    api,
                    timeout_ms,
                })
            }
        };
        let Some(response) = response else {
            self.stream = Some(stream);
            return Ok(None);
        };
        let mut reader = Reader::new(response);
        let header = ResponseHeader::decode(&mut reader, response_hv).map_err(|source| {
            ClientError::Decode {
                addr: self.addr.clone(),
                api,
                version,
                source,
            }
        })?;
        if header.correlation_id != correlation_id {
            return Err(ClientError::CorrelationMismatch {
                addr: self.addr.clone(),
                api,
                expected: correlation_id,
                found: header.correlation_id,
            });
        }
        let body = reader
            .bytes(reader.remaining())
            .map_err(|source| ClientError::Decode {
                addr: self.addr.clone(),
                api,
                version,
                source,
            })?;
        self.stream = Some(stream);
        Ok(Some(body))
    }
}

/// Frames `req` as `api_key` v`version` for the wire (size prefix, request header, body),
/// taking the next correlation id from `next_correlation_id`. Returns the frame, its
/// correlation id and the header version of its response. An API or version without header
/// versions is UnsupportedApi, and no correlation id is taken for it.
pub(super) fn frame_request<Req: Message>(
    addr: &str,
    api_key: i16,
    version: i16,
    next_correlation_id: &mut i32,
    client_id: &str,
    req: &Req,
) -> Result<(BytesMut, i32, i16), ClientError> {
    let api = api_name(api_key);
    let (Some(request_hv), Some(response_hv)) = (
        request_header_version(api_key, version),
        response_header_version(api_key, version),
    ) else {
        return Err(ClientError::UnsupportedApi {
            addr: addr.to_owned(),
            api,
            broker_range: None,
        });
    };
    let correlation_id = *next_correlation_id;
    *next_correlation_id = next_correlation_id.wrapping_add(1);
    let header = RequestHeader {
        request_api_key: api_key,
        request_api_version: version,
        correlation_id,
        client_id: Some(client_id.to_owned()),
    };
    let encode_error = |source| ClientError::Encode {
        api,
        version,
        source,
    };
    let mut frame = BytesMut::with_capacity(
        SIZE_PREFIX_BYTES + header.encoded_len(request_hv) + req.encoded_len(version),
    );
    frame.put_i32(0);
    header
        .encode(&mut frame, request_hv)
        .map_err(encode_error)?;
    req.encode(&mut frame, version).map_err(encode_error)?;
    let size = i32::try_from(frame.len() - SIZE_PREFIX_BYTES).map_err(|_| {
        ClientError::InvalidArgument {
            reason: format!("{api} request of {} bytes is too large", frame.len()),
        }
    })?;
    frame[..SIZE_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
    Ok((frame, correlation_id, response_hv))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_connection_caps_versions_that_need_topic_ids() {
        assert_eq!(client_version_max(0), Some(12));
        assert_eq!(client_version_max(1), Some(12));
        assert_eq!(
            client_version_max(3),
            api_info(3).map(|info| info.versions.1)
        );
        assert_eq!(client_version_max(9999), None);
    }

    #[test]
    fn client_connection_version_for_takes_the_newest_common_version() {
        let conn = Connection {
            addr: "b:9092".into(),
            client_id: "c".into(),
            limits: ConnectionLimits::default(),
            stream: None,
            next_correlation_id: 0,
            broker_versions: [(0, (0, 11)), (1, (4, 17)), (2, (11, 12)), (3, (0, 99))]
                .into_iter()
                .collect(),
        };
        assert_eq!(conn.version_for(0).ok(), Some(11));
        assert_eq!(conn.version_for(1).ok(), Some(12));
        assert_eq!(conn.version_for(3).ok(), api_info(3).map(|i| i.versions.1));
        // ListOffsets: the broker starts above the codec's newest version.
        let err = conn.version_for(2).unwrap_err();
        assert!(err.to_string().contains("v11-v12"), "{err}");
        assert!(matches!(
            conn.version_for(19),
            Err(ClientError::UnsupportedApi {
                broker_range: None,
                ..
            })
        ));
    }
}
