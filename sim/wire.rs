//! The harness's own tiny request protocol between workload clients and the log node:
//! length-prefixed frames, enough to drive appends and reads over simulated TCP. (The Kafka
//! protocol replaces it when the broker exists.)
//!
//! Request:  `u32 len | u8 kind | body`; kind 0 Append: body = record batches;
//!           kind 1 Read: body = `i64 offset | u32 max_bytes`.
//! Response: `u32 len | u8 status | body`; status 0 with Append: `i64 base | i64 last`;
//!           with Read: `i64 next_offset | records`; other statuses carry a UTF-8 reason.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Frames larger than this are refused: the workload never sends anything close.
pub const FRAME_BYTES_MAX: usize = 8 << 20;

pub const KIND_APPEND: u8 = 0;
pub const KIND_READ: u8 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok = 0,
    /// The request was refused before it could take effect.
    Invalid = 1,
    /// An IO error or an offline log: an append may or may not have taken effect.
    Unavailable = 2,
    OffsetOutOfRange = 3,
    /// The log refused to serve data that failed its checks.
    Corrupt = 4,
}

impl Status {
    pub fn from_u8(b: u8) -> Option<Status> {
        Some(match b {
            0 => Status::Ok,
            1 => Status::Invalid,
            2 => Status::Unavailable,
            3 => Status::OffsetOutOfRange,
            4 => Status::Corrupt,
            _ => return None,
        })
    }
}

pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    tag: u8,
    body: &[u8],
) -> std::io::Result<()> {
    let mut frame = BytesMut::with_capacity(5 + body.len());
    frame.put_u32(1 + body.len() as u32);
    frame.put_u8(tag);
    frame.put_slice(body);
    w.write_all(&frame).await?;
    // madsim's TCP only sends on flush.
    w.flush().await
}

pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<(u8, Bytes)> {
    let len = r.read_u32().await? as usize;
    if len == 0 || len > FRAME_BYTES_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame length {len} outside [1, {FRAME_BYTES_MAX}]"),
        ));
    }
    let mut buf = BytesMut::zeroed(len);
    r.read_exact(&mut buf).await?;
    let mut buf = buf.freeze();
    let tag = buf.get_u8();
    Ok((tag, buf))
}
