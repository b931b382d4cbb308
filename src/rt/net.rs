//! TCP: tokio's sockets in production, madsim's simulated ones under `sim`.
//!
//! Both implement tokio's `AsyncRead`/`AsyncWrite`. Rules that keep code correct on both:
//! madsim only sends on `flush()`, so always flush after writing a frame; it has no
//! `into_split` (use `tokio::io::split`); its writes never block, so bound your own queues; a
//! clogged link delivers late, so every request needs its own timeout.

#[cfg(feature = "sim")]
pub use madsim::net::{TcpListener, TcpStream};
#[cfg(not(feature = "sim"))]
pub use tokio::net::{TcpListener, TcpStream};
