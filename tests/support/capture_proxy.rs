//! A recording TCP proxy between Kafka clients and a broker: it forwards bytes both ways
//! unchanged and keeps a copy of every request frame a client sends, in order, for fixture
//! files (tests/fixtures/clients).
//!
//! Include it with `#[path = "support/capture_proxy.rs"] mod capture_proxy;`.
//!
//! Clients follow the addresses in Metadata responses, so the broker must advertise the
//! proxy's address (`advertised.listeners`), or only the bootstrap connection is seen. The
//! proxy therefore binds first ([`CaptureProxy::bind`]) and learns the broker's address
//! afterwards ([`CaptureProxy::forward_to`]).
//!
//! Invariants:
//! - Bytes are forwarded exactly as read; frames are parsed from the client's stream only to
//!   record them, and a size prefix above `FRAME_BYTES_MAX` stops recording for that
//!   connection (the bytes are still forwarded).
//! - At most `CAPTURED_FRAMES_MAX` frames are kept.
//! - Each connection's two pump threads end when either side closes; the accept thread ends
//!   when the proxy is dropped.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The largest request frame recorded (Kafka's default socket.request.max.bytes).
pub const FRAME_BYTES_MAX: usize = 104_857_600;
/// Frames kept in all.
pub const CAPTURED_FRAMES_MAX: usize = 10_000;

/// One request frame as a client sent it, without its size prefix.
#[derive(Clone, Debug)]
pub struct CapturedFrame {
    /// The proxy's number for the client connection, from 0 in accept order.
    pub connection: usize,
    pub bytes: Vec<u8>,
}

pub struct CaptureProxy {
    listener: Option<TcpListener>,
    addr: SocketAddr,
    frames: Arc<Mutex<Vec<CapturedFrame>>>,
    stopping: Arc<AtomicBool>,
}

#[allow(clippy::disallowed_methods)] // test-side proxy threads, not broker code
fn spawn(f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(f);
}

impl CaptureProxy {
    /// Binds a loopback port; nothing is accepted until [`forward_to`](Self::forward_to).
    pub fn bind() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        CaptureProxy {
            listener: Some(listener),
            addr,
            frames: Arc::new(Mutex::new(Vec::new())),
            stopping: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Starts accepting clients and forwarding each to `upstream`.
    pub fn forward_to(&mut self, upstream: SocketAddr) {
        let listener = self.listener.take().expect("forward_to is called once");
        let frames = Arc::clone(&self.frames);
        let stopping = Arc::clone(&self.stopping);
        let connections = Arc::new(AtomicUsize::new(0));
        spawn(move || {
            for client in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let n = connections.fetch_add(1, Ordering::SeqCst);
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                let frames = Arc::clone(&frames);
                spawn(move || pump_requests(n, client, server, &frames));
                spawn(move || pump_plain(s2, c2));
            }
        });
    }

    /// Every frame recorded so far, in the order the proxy read them.
    pub fn frames(&self) -> Vec<CapturedFrame> {
        self.frames.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// Forgets the frames recorded so far.
    pub fn clear(&self) {
        if let Ok(mut f) = self.frames.lock() {
            f.clear();
        }
    }
}

impl Drop for CaptureProxy {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn read_exact_or_end(s: &mut TcpStream, buf: &mut [u8]) -> bool {
    s.read_exact(buf).is_ok()
}

/// Client to broker: frame by frame, recording each.
fn pump_requests(
    connection: usize,
    mut client: TcpStream,
    mut server: TcpStream,
    frames: &Mutex<Vec<CapturedFrame>>,
) {
    loop {
        let mut prefix = [0u8; 4];
        if !read_exact_or_end(&mut client, &mut prefix) {
            break;
        }
        let size = i32::from_be_bytes(prefix);
        let Some(len) = usize::try_from(size).ok().filter(|&l| l <= FRAME_BYTES_MAX) else {
            // Not a frame the proxy will buffer: pass the rest through unrecorded.
            if server.write_all(&prefix).is_ok() {
                let _ = std::io::copy(&mut client, &mut server);
            }
            break;
        };
        let mut frame = vec![0u8; len];
        if !read_exact_or_end(&mut client, &mut frame) {
            let _ = server.write_all(&prefix);
            break;
        }
        if let Ok(mut f) = frames.lock() {
            if f.len() < CAPTURED_FRAMES_MAX {
                f.push(CapturedFrame {
                    connection,
                    bytes: frame.clone(),
                });
            }
        }
        if server.write_all(&prefix).is_err() || server.write_all(&frame).is_err() {
            break;
        }
    }
    let _ = server.shutdown(Shutdown::Write);
}

/// Broker to client: bytes as they come.
fn pump_plain(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Both);
}
