//! TCP: tokio's sockets in production, madsim's simulated ones under `sim`, plus the one place
//! that sends file bytes to a socket ([`ResponseWriter::send_file_region`]).
//!
//! Both stream types implement tokio's `AsyncRead`/`AsyncWrite`. Rules that keep code correct
//! on both: madsim only sends on `flush()`, so always flush after writing a frame; it has no
//! `into_split` (use [`split`], which picks the right split per build); its writes never
//! block, so bound your own queues; a clogged link delivers late, so every request needs its
//! own timeout.
//!
//! Zero-copy sends (design §4). In production on Linux, a region of a real file goes from the
//! page cache to the socket with `sendfile(2)`: no copy through user space. The socket is
//! non-blocking, so a full send buffer returns `EAGAIN` and the task waits on tokio's write
//! readiness instead of blocking a worker thread. A simulated (`MemDisk`) file has no file
//! descriptor and madsim has no sockets, so both fall back to reading the region in bounded
//! chunks and writing them: the same bytes reach the peer either way.
//!
//! `sendfile` hands page-cache pages to the socket, so bytes not yet transmitted when it
//! returns can still change if the file is cut or overwritten meanwhile (observed on Linux: a
//! truncation below a sent region zeroed bytes the peer had not read yet). Callers must send
//! only regions nobody will cut or overwrite; the log's are append-only bytes below the high
//! watermark (see `Log::read_regions`). A removed file keeps its inode while a handle is open;
//! that a removal right after the send leaves in-flight bytes intact is expected (the kernel
//! drops whole pages without zeroing them) but not tested.
//!
//! Invariant: a region is either sent whole or the call fails. If the file turns out shorter
//! than the region (it was truncated while queued), the send fails with `UnexpectedEof`
//! rather than pad the response; the caller must then close the connection, because the
//! response's size prefix has already gone out.

use std::io;

use tokio::io::AsyncWriteExt;

use crate::rt::disk::File;

#[cfg(feature = "sim")]
pub use madsim::net::{TcpListener, TcpStream};
#[cfg(not(feature = "sim"))]
pub use tokio::net::{TcpListener, TcpStream};

/// Bytes read from a file and written per step of the copying fallback: bounds the buffer a
/// send of a large region holds at once.
pub const COPY_CHUNK_BYTES_MAX: usize = 1 << 20;

/// Bytes asked of one `sendfile(2)` call. Linux moves at most 0x7fff_f000 bytes per call
/// anyway; a smaller request keeps one call from holding a worker long on a cold page cache.
pub const SENDFILE_CHUNK_BYTES_MAX: usize = 8 << 20;

/// The reading half of a connection.
#[cfg(not(feature = "sim"))]
pub type ReadHalf = tokio::net::tcp::OwnedReadHalf;
/// The reading half of a connection.
#[cfg(feature = "sim")]
pub type ReadHalf = tokio::io::ReadHalf<TcpStream>;

#[cfg(not(feature = "sim"))]
type WriteHalf = tokio::net::tcp::OwnedWriteHalf;
#[cfg(feature = "sim")]
type WriteHalf = tokio::io::WriteHalf<TcpStream>;

/// Splits a connection into its reading half and a [`ResponseWriter`]. In production this is
/// tokio's `into_split`, which keeps the socket reachable for `sendfile`; madsim's stream has
/// no such split, so simulation uses `tokio::io::split`.
pub fn split(stream: TcpStream) -> (ReadHalf, ResponseWriter) {
    #[cfg(not(feature = "sim"))]
    let (reader, writer) = stream.into_split();
    #[cfg(feature = "sim")]
    let (reader, writer) = tokio::io::split(stream);
    (reader, ResponseWriter { writer })
}

/// The writing half of a connection: bytes from memory and regions of files.
#[derive(Debug)]
pub struct ResponseWriter {
    writer: WriteHalf,
}

impl ResponseWriter {
    /// Writes all of `data`.
    pub async fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.writer.write_all(data).await
    }

    /// Sends `len` bytes of `file` from `position`: zero-copy where the build and the file
    /// allow it, copied otherwise (see the module docs). Fails with `UnexpectedEof`, having
    /// sent part of the region, if the file ends before the region does.
    pub async fn send_file_region(
        &mut self,
        file: &File,
        position: u64,
        len: usize,
    ) -> io::Result<()> {
        #[cfg(all(target_os = "linux", not(feature = "sim")))]
        if let Some(fd) = file.raw_fd() {
            // Anything the writer wrote before must reach the socket first. An
            // `OwnedWriteHalf` does not buffer, so this only matters for a future writer
            // that does; it keeps the order of the response's parts explicit.
            self.writer.flush().await?;
            return sendfile_all(self.writer.as_ref(), fd, file.path(), position, len).await;
        }
        self.copy_file_region(file, position, len).await
    }

    /// The copying fallback: bounded chunks read with `pread` and written.
    async fn copy_file_region(&mut self, file: &File, position: u64, len: usize) -> io::Result<()> {
        let mut done = 0usize;
        while done < len {
            let want = (len - done).min(COPY_CHUNK_BYTES_MAX);
            let at = position + done as u64;
            let bytes = file.read_at(at, want).await?;
            if bytes.is_empty() {
                return Err(truncated(file.path(), at, len - done));
            }
            self.writer.write_all(&bytes).await?;
            done += bytes.len();
        }
        Ok(())
    }

    /// Flushes what was written (madsim sends only on flush).
    pub async fn flush(&mut self) -> io::Result<()> {
        self.writer.flush().await
    }

    /// Closes the writing direction.
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.writer.shutdown().await
    }
}

fn truncated(path: &str, at: u64, missing: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!(
            "{path} ends at position {at}, {missing} bytes short of the region being sent \
             (truncated while queued)"
        ),
    )
}

/// `sendfile(2)` of `[position, position + len)` from `fd` to the socket, looping over
/// partial sends and waiting on write readiness when the socket buffer is full.
#[cfg(all(target_os = "linux", not(feature = "sim")))]
async fn sendfile_all(
    stream: &TcpStream,
    fd: std::os::unix::io::RawFd,
    path: &str,
    position: u64,
    len: usize,
) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    use tokio::io::Interest;

    let mut offset = libc::off_t::try_from(position).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{path}: position {position} does not fit in off_t"),
        )
    })?;
    let socket = stream.as_raw_fd();
    let mut remaining = len;
    while remaining > 0 {
        stream.writable().await?;
        let want = remaining.min(SENDFILE_CHUNK_BYTES_MAX);
        let sent = stream.try_io(Interest::WRITABLE, || {
            // SAFETY: both descriptors are open for the whole call: `fd` belongs to a `File`
            // the caller borrows, `socket` to the borrowed stream. `offset` is a valid
            // `off_t` the kernel advances by the bytes sent; the file's own position is
            // untouched, so concurrent `pread`/`pwrite` on the file are unaffected.
            let n = unsafe { libc::sendfile(socket, fd, &mut offset, want) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n.unsigned_abs())
            }
        });
        match sent {
            Ok(0) => {
                // End of file before the region's end: the file was truncated below it.
                return Err(truncated(path, offset.unsigned_abs(), remaining));
            }
            Ok(n) => remaining -= n.min(remaining),
            // `try_io` cleared the readiness, so `writable()` waits for buffer space.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io::Error::new(e.kind(), format!("sendfile {path}: {e}"))),
        }
    }
    Ok(())
}
