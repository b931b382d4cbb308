//! The accept loop and connections: read size-prefixed request frames, start each request in
//! arrival order (see `handlers`), and write the responses back in the same order.
//!
//! Every resource a peer can make the broker hold is bounded by a named setting: open
//! connections (`max.connections`), requests read ahead of their responses
//! (`queued.max.requests`), the size of one request (`socket.request.max.bytes`, refused from
//! its size prefix before any of it is read), and time without a request
//! (`connections.max.idle.ms`). A frame's buffer grows only as its bytes arrive, so a peer
//! that announces a large frame and sends nothing costs one read chunk, not the frame.
//!
//! A peer that sends something the broker cannot answer (a malformed frame, an unknown API,
//! an unsupported version) gets its connection closed with one log line naming its address,
//! as Kafka does; nothing it sends can stop the broker or reach a log unvalidated.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use crate::broker::handlers::{self, Reply, ResponsePart};
use crate::broker::Broker;
use crate::protocol::frame::{self, SIZE_PREFIX_BYTES};
use crate::protocol::wire::EncodeError;
use crate::rt::fault::FaultPoint;
use crate::rt::latch::Latch;
use crate::rt::net::{self, ResponseWriter, TcpListener, TcpStream};
use crate::rt::task::{self, JoinHandle};
use crate::rt::time;

/// Bytes a frame's buffer grows by per read.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// How long shutdown waits for open connections to finish their in-flight requests.
pub const SHUTDOWN_DRAIN_MS_MAX: u64 = 5_000;

/// A response on its way back, in request order.
enum Outgoing {
    Ready(Bytes),
    Pending(JoinHandle<Result<Bytes, EncodeError>>),
    /// A response in parts, some of them file regions sent without a copy (Fetch).
    PendingParts(JoinHandle<Result<Vec<ResponsePart>, EncodeError>>),
}

/// A broker serving a listener, with its background work (the flusher), until [`Serving::stop`].
pub struct Serving {
    stop: Arc<Latch>,
    serving: JoinHandle<()>,
    background: JoinHandle<()>,
}

impl Serving {
    /// Starts accepting on `listener` and the broker's background work.
    pub fn start(broker: &Arc<Broker>, listener: TcpListener) -> Serving {
        let stop = Arc::new(Latch::new());
        let serving = task::spawn(serve(Arc::clone(broker), listener, stop.clone()));
        let background = task::spawn(Arc::clone(broker).run_background(stop.clone()));
        Serving {
            stop,
            serving,
            background,
        }
    }

    /// Stops accepting, lets open connections finish (bounded by [`SHUTDOWN_DRAIN_MS_MAX`])
    /// and stops the background work. The logs stay open: closing them is the caller's.
    pub async fn stop(self) {
        self.stop.set();
        let _ = self.serving.await;
        let _ = self.background.await;
    }
}

/// Accepts connections until `shutdown` is set, then waits (bounded) for the open ones.
pub async fn serve(broker: Arc<Broker>, listener: TcpListener, shutdown: Arc<Latch>) {
    let active = Arc::new(AtomicUsize::new(0));
    let max_connections = broker.config.max_connections;
    loop {
        tokio::select! {
            biased;
            _ = shutdown.wait() => break,
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting a connection failed");
                        // Out of file descriptors and the like: back off instead of spinning.
                        time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                if active.load(Ordering::Acquire) >= max_connections {
                    tracing::warn!(%peer, max_connections, "closing a new connection: max.connections reached");
                    drop(stream);
                    continue;
                }
                active.fetch_add(1, Ordering::AcqRel);
                let broker = broker.clone();
                let active = active.clone();
                let shutdown = shutdown.clone();
                task::spawn(async move {
                    connection(broker, stream, peer, shutdown).await;
                    active.fetch_sub(1, Ordering::AcqRel);
                });
            }
        }
    }
    let deadline = time::now() + Duration::from_millis(SHUTDOWN_DRAIN_MS_MAX);
    while active.load(Ordering::Acquire) > 0 && time::now() < deadline {
        time::sleep(Duration::from_millis(10)).await;
    }
}

/// Serves one connection until the peer closes it, misbehaves, idles out or shutdown.
pub async fn connection(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    shutdown: Arc<Latch>,
) {
    let _ = stream.set_nodelay(true);
    let (mut reader, writer) = net::split(stream);
    let queued_max = broker.config.queued_max_requests.max(1);
    let (outgoing, queue) = mpsc::channel(queued_max);
    let write_task = task::spawn(write_loop(Arc::clone(&broker), writer, queue, peer));
    let idle = Duration::from_millis(broker.config.connections_max_idle_ms);
    let request_max = broker.config.socket_request_max_bytes;
    let caller = handlers::Peer {
        host: format!("/{}", peer.ip()),
    };
    loop {
        let frame = tokio::select! {
            biased;
            _ = shutdown.wait() => break,
            frame = time::timeout(idle, read_frame(&mut reader, request_max)) => frame,
        };
        let frame = match frame {
            Err(_) => {
                tracing::debug!(%peer, "closing an idle connection (connections.max.idle.ms)");
                break;
            }
            Ok(Ok(Some(frame))) => frame,
            Ok(Ok(None)) => break,
            Ok(Err(why)) => {
                tracing::warn!(%peer, "closing connection: {why}");
                break;
            }
        };
        let request = match frame::parse_request(frame) {
            Ok(request) => request,
            Err(e) => {
                tracing::warn!(%peer, "closing connection: {e}");
                break;
            }
        };
        let api_key = request.header.request_api_key;
        let next = match handlers::dispatch(&broker, &caller, request).await {
            Reply::Now(bytes) => Outgoing::Ready(bytes),
            Reply::Later(work) => Outgoing::Pending(task::spawn(work)),
            Reply::LaterParts(work) => Outgoing::PendingParts(task::spawn(work)),
            Reply::Silent(work) => {
                if let Some(work) = work {
                    // Nobody waits for the answer; the task still completes the append.
                    drop(task::spawn(work));
                }
                continue;
            }
            Reply::Close(why) => {
                tracing::warn!(%peer, "closing connection: {why}");
                break;
            }
        };
        if outgoing.send((api_key, next)).await.is_err() {
            // The writer stopped (the peer went away); nothing more can be answered.
            break;
        }
    }
    drop(outgoing);
    let _ = write_task.await;
}

/// Reads one frame: `Ok(None)` at a clean end of stream between frames.
async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    request_max: usize,
) -> Result<Option<Bytes>, String> {
    let mut prefix = [0u8; SIZE_PREFIX_BYTES];
    let mut have = 0;
    while have < SIZE_PREFIX_BYTES {
        match reader.read(&mut prefix[have..]).await {
            Ok(0) if have == 0 => return Ok(None),
            Ok(0) => return Err("the peer closed the connection inside a size prefix".into()),
            Ok(n) => have += n,
            Err(e) => return Err(format!("reading: {e}")),
        }
    }
    let size = frame::request_size(prefix, request_max).map_err(|e| e.to_string())?;
    let mut buf = BytesMut::with_capacity(size.min(READ_CHUNK_BYTES));
    while buf.len() < size {
        let want = (size - buf.len()).min(READ_CHUNK_BYTES);
        buf.reserve(want);
        let n = (&mut *reader)
            .take(want as u64)
            .read_buf(&mut buf)
            .await
            .map_err(|e| format!("reading a {size}-byte request: {e}"))?;
        if n == 0 {
            return Err(format!(
                "the peer closed the connection {} bytes into a {size}-byte request",
                buf.len()
            ));
        }
    }
    assert_eq!(
        buf.len(),
        size,
        "a frame is read to exactly its announced size"
    );
    Ok(Some(buf.freeze()))
}

async fn write_loop(
    broker: Arc<Broker>,
    mut writer: ResponseWriter,
    mut queue: mpsc::Receiver<(i16, Outgoing)>,
    peer: SocketAddr,
) {
    while let Some((api_key, next)) = queue.recv().await {
        let parts = match next {
            Outgoing::Ready(bytes) => vec![ResponsePart::Bytes(bytes)],
            Outgoing::Pending(handle) => match handle.await {
                Ok(Ok(bytes)) => vec![ResponsePart::Bytes(bytes)],
                Ok(Err(e)) => return encode_failed(peer, &e),
                Err(e) => return handler_failed(peer, &e),
            },
            Outgoing::PendingParts(handle) => match handle.await {
                Ok(Ok(parts)) => parts,
                Ok(Err(e)) => return encode_failed(peer, &e),
                Err(e) => return handler_failed(peer, &e),
            },
        };
        let total: usize = parts.iter().map(ResponsePart::len).sum();
        let Ok(size) = u32::try_from(total) else {
            tracing::error!(%peer, len = total, "closing connection: response larger than 4 GiB");
            return;
        };
        let written = async {
            write_parts(&mut writer, size, parts).await?;
            if queue.is_empty() {
                writer.flush().await?;
            }
            Ok::<(), std::io::Error>(())
        }
        .await;
        if let Err(e) = written {
            // A region whose file was truncated while queued also ends here: the size prefix
            // is out, so closing is the only honest answer (the client retries the fetch).
            tracing::debug!(%peer, error = %e, "writing a response failed; closing");
            return;
        }
        answered(&broker, api_key).await;
    }
    let _ = writer.flush().await;
    let _ = writer.shutdown().await;
}

/// Writes one response: its size prefix, then each part in order. The prefix travels with the
/// first part when that is in memory (the usual case), saving a write.
async fn write_parts(
    writer: &mut ResponseWriter,
    size: u32,
    parts: Vec<ResponsePart>,
) -> std::io::Result<()> {
    let mut parts = parts.into_iter().peekable();
    let mut first = Vec::with_capacity(SIZE_PREFIX_BYTES);
    first.extend_from_slice(&size.to_be_bytes());
    if let Some(ResponsePart::Bytes(bytes)) = parts.peek() {
        if bytes.len() <= READ_CHUNK_BYTES {
            first.extend_from_slice(bytes);
            parts.next();
        }
    }
    writer.write_all(&first).await?;
    for part in parts {
        match part {
            ResponsePart::Bytes(bytes) => writer.write_all(&bytes).await?,
            ResponsePart::Region(region) => {
                writer
                    .send_file_region(&region.file, region.position, region.len)
                    .await?
            }
        }
    }
    Ok(())
}

/// The fault points right after a Produce, Fetch or OffsetCommit answer went out while unsynced data
/// exists: the moment a crash tells whether anything was promised that a power loss takes.
/// Nothing to gather in production, where the disk has no injector.
async fn answered(broker: &Broker, api_key: i16) {
    let point = match api_key {
        0 => FaultPoint::ProduceAnsweredUnsynced,
        1 => FaultPoint::FetchAnsweredUnsynced,
        8 => FaultPoint::OffsetCommitAnsweredUnsynced,
        _ => return,
    };
    if broker.disk.has_fault_injector() && broker.has_unsynced_data().await {
        // No such point allows an IO error; a halt does not return.
        let _ = broker.disk.fault(point).await;
    }
}

fn encode_failed(peer: SocketAddr, e: &EncodeError) {
    tracing::error!(%peer, "closing connection: encoding a response failed: {e}");
}

fn handler_failed(peer: SocketAddr, e: &task::JoinError) {
    tracing::error!(%peer, "closing connection: a request handler failed: {e}");
}
