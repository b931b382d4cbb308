//! A pipelined connection to one broker: many requests written before their responses come
//! back, answered in order. The producer uses it to keep up to
//! `max_in_flight_requests_per_connection` Produce requests outstanding, so that one
//! connection's appends share the broker's syncs (group commit) instead of waiting a sync each.
//!
//! Invariants:
//! - Kafka answers the requests of one connection in the order they were sent, so a queue of
//!   pending requests (correlation id, response header version, reply slot) matches each
//!   response to the oldest pending request; the correlation id is checked anyway, and a
//!   mismatch breaks the connection.
//! - A request is queued as pending *before* its bytes are written, so the reader can never
//!   see a response whose request it does not know.
//! - Once anything fails (write, read, oversized or malformed response, a caller's timeout),
//!   the connection is broken for good: every pending request is answered with an error that
//!   says its request may have been delivered, and no later request is accepted (design rule
//!   6: a late reply is never taken for the answer to a later request).
//! - No response is read past `response_bytes_max`: the size prefix is checked first.
//! - The number of pending requests is bounded by the caller (the producer's in-flight limit);
//!   [`Pipeline::send`] refuses more than `pending_max`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;

use super::connection::{frame_request, Connection, ConnectionLimits};
use super::error::{api_name, ClientError};
use crate::protocol::header::ResponseHeader;
use crate::protocol::message::Message;
use crate::protocol::wire::Reader;
use crate::rt::net::{split, ReadHalf, ResponseWriter};
use crate::rt::task::JoinHandle;

/// Bytes of the size prefix in front of every frame.
const SIZE_PREFIX_BYTES: usize = 4;
/// The smallest response: a header holding only its correlation id.
const RESPONSE_BYTES_MIN: usize = 4;

/// The body of one response (header stripped), or why there is none.
pub type Reply = Result<Bytes, ClientError>;

struct Pending {
    correlation_id: i32,
    api_key: i16,
    response_header_version: i16,
    reply: oneshot::Sender<Reply>,
}

#[derive(Default)]
struct Queue {
    pending: VecDeque<Pending>,
    broken: bool,
}

impl Queue {
    /// Breaks the connection and answers every pending request with `error(api)`.
    fn fail_all(&mut self, error: impl Fn(&'static str) -> ClientError) {
        self.broken = true;
        for pending in self.pending.drain(..) {
            let _ = pending.reply.send(Err(error(api_name(pending.api_key))));
        }
    }
}

/// One pipelined connection; see the module docs.
pub struct Pipeline {
    addr: String,
    /// The negotiated connection, kept (without its stream) to answer `version_for`.
    negotiated: Connection,
    writer: ResponseWriter,
    next_correlation_id: i32,
    pending_max: usize,
    queue: Arc<Mutex<Queue>>,
    reader: JoinHandle<()>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // The reader owns the read half; stopping it closes the socket.
        self.reader.abort();
    }
}

impl Pipeline {
    /// Connects to `addr`, negotiates API versions, and starts the response reader.
    /// `pending_max` bounds the requests awaiting a response.
    pub async fn connect(
        addr: &str,
        client_id: &str,
        limits: ConnectionLimits,
        pending_max: usize,
    ) -> Result<Pipeline, ClientError> {
        let response_bytes_max = limits.response_bytes_max;
        let mut negotiated = Connection::connect(addr, client_id, limits).await?;
        let stream = negotiated
            .take_stream()
            .ok_or_else(|| ClientError::ConnectionBroken {
                addr: addr.to_owned(),
            })?;
        let (read_half, writer) = split(stream);
        let queue = Arc::new(Mutex::new(Queue::default()));
        let reader = crate::rt::task::spawn(read_loop(
            addr.to_owned(),
            read_half,
            queue.clone(),
            response_bytes_max,
        ));
        Ok(Pipeline {
            addr: addr.to_owned(),
            negotiated,
            writer,
            next_correlation_id: 0,
            pending_max: pending_max.max(1),
            queue,
            reader,
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The version to use for `api_key` with this broker (see [`Connection::version_for`]).
    pub fn version_for(&self, api_key: i16) -> Result<i16, ClientError> {
        self.negotiated.version_for(api_key)
    }

    /// True once the connection failed; it accepts no more requests.
    pub fn is_broken(&self) -> bool {
        self.lock().broken
    }

    /// Requests awaiting their response.
    pub fn pending(&self) -> usize {
        self.lock().pending.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Breaks the connection, answering every pending request with a "maybe delivered" error:
    /// for a caller whose wait for a reply timed out.
    pub fn break_connection(&self) {
        let addr = self.addr.clone();
        // Written requests may have been acted on: their outcome is unknown.
        self.lock().fail_all(|api| ClientError::ConnectionClosed {
            addr: addr.clone(),
            api,
        });
        self.reader.abort();
    }

    /// Writes `req` as `api_key` v`version` and returns where its response body will arrive
    /// (`None` when `expect_response` is false: a Produce with acks=0, which Kafka never
    /// answers). An `Err` here means the request was not accepted. A failed write is reported
    /// through the reply slot (and to every other pending request), with `sent: true`.
    pub async fn send<Req: Message>(
        &mut self,
        api_key: i16,
        version: i16,
        req: &Req,
        expect_response: bool,
    ) -> Result<Option<oneshot::Receiver<Reply>>, ClientError> {
        let (frame, correlation_id, response_hv) = frame_request(
            &self.addr,
            api_key,
            version,
            &mut self.next_correlation_id,
            self.negotiated.client_id(),
            req,
        )?;

        let (tx, rx) = oneshot::channel();
        {
            let mut queue = self.lock();
            if queue.broken {
                return Err(ClientError::ConnectionBroken {
                    addr: self.addr.clone(),
                });
            }
            if queue.pending.len() >= self.pending_max {
                return Err(ClientError::InvalidArgument {
                    reason: format!(
                        "{} requests already await a response from broker {} (pending_max)",
                        queue.pending.len(),
                        self.addr
                    ),
                });
            }
            if expect_response {
                queue.pending.push_back(Pending {
                    correlation_id,
                    api_key,
                    response_header_version: response_hv,
                    reply: tx,
                });
            }
        }
        let written = async {
            self.writer.write_all(&frame).await?;
            // madsim's stream only sends what is flushed.
            self.writer.flush().await
        }
        .await;
        if let Err(source) = written {
            let addr = self.addr.clone();
            let kind = source.kind();
            let text = source.to_string();
            self.lock().fail_all(|api| ClientError::Network {
                addr: addr.clone(),
                api,
                sent: true,
                source: std::io::Error::new(kind, text.clone()),
            });
            self.reader.abort();
            if !expect_response {
                return Err(ClientError::ConnectionBroken {
                    addr: self.addr.clone(),
                });
            }
        }
        Ok(expect_response.then_some(rx))
    }
}

/// Reads responses until the connection fails, handing each to the oldest pending request.
async fn read_loop(
    addr: String,
    mut reader: ReadHalf,
    queue: Arc<Mutex<Queue>>,
    response_bytes_max: usize,
) {
    let lock = || queue.lock().unwrap_or_else(PoisonError::into_inner);
    let failure = loop {
        let mut prefix = [0u8; SIZE_PREFIX_BYTES];
        if let Err(e) = reader.read_exact(&mut prefix).await {
            break e;
        }
        let size = i32::from_be_bytes(prefix);
        let len = match usize::try_from(size) {
            Ok(len) if (RESPONSE_BYTES_MIN..=response_bytes_max).contains(&len) => len,
            _ => {
                break std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "response size {size} outside {RESPONSE_BYTES_MIN}..={response_bytes_max}"
                    ),
                )
            }
        };
        let mut buf = BytesMut::zeroed(len);
        if let Err(e) = reader.read_exact(&mut buf).await {
            break e;
        }
        let mut guard = lock();
        let Some(pending) = guard.pending.pop_front() else {
            break std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "a response arrived with no request pending",
            );
        };
        let mut body = Reader::new(buf.freeze());
        let header = match ResponseHeader::decode(&mut body, pending.response_header_version) {
            Ok(header) => header,
            Err(e) => {
                guard.pending.push_front(pending);
                break std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string());
            }
        };
        if header.correlation_id != pending.correlation_id {
            let err = std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "correlation id {} where {} was expected",
                    header.correlation_id, pending.correlation_id
                ),
            );
            guard.pending.push_front(pending);
            break err;
        }
        let rest = body.remaining();
        let reply = body.bytes(rest).map_err(|source| ClientError::Decode {
            addr: addr.clone(),
            api: api_name(pending.api_key),
            version: -1,
            source,
        });
        // The requester may have given up waiting; its reply is then dropped.
        let _ = pending.reply.send(reply);
    };
    let closed = failure.kind() == std::io::ErrorKind::UnexpectedEof;
    let text = failure.to_string();
    let kind = failure.kind();
    lock().fail_all(|api| {
        if closed {
            ClientError::ConnectionClosed {
                addr: addr.clone(),
                api,
            }
        } else {
            ClientError::Network {
                addr: addr.clone(),
                api,
                sent: true,
                source: std::io::Error::new(kind, text.clone()),
            }
        }
    });
}
