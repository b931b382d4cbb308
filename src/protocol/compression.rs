//! The four compression codecs of Kafka's record batches: gzip, snappy, lz4 and zstd, with
//! decompression bounded so that a compression bomb is refused.
//!
//! [`decompress`] decodes a batch's records region (everything after the 61-byte header of a
//! compressed batch) and [`compress`] encodes one, as Kafka's clients do; a [`Compressor`]
//! encodes at one of the levels of KIP-390 (`compression.{gzip,lz4,zstd}.level`, checked by
//! [`level_allowed`]), which is how a broker recompresses for a topic's `compression.type`:
//!
//! - gzip: one or more concatenated gzip members (RFC 1952), via `flate2` on its pure-Rust
//!   `miniz_oxide` backend. CRC-32 and length trailers are checked; bytes after the last member
//!   are an error.
//! - snappy: Kafka's Java client writes snappy-java's "xerial" framing: the 8-byte magic
//!   [`XERIAL_MAGIC`], two big-endian i32 versions, then chunks, each a big-endian u32 length and
//!   a raw snappy block. librdkafka writes one raw snappy block with no framing at all. Input
//!   that starts with the magic is read as xerial framing (as snappy-java and librdkafka both
//!   decide), anything else as raw snappy. Chunk headers are parsed here and each block is
//!   decoded by `snap::raw`. A block's declared length is only believed once it fits in what is
//!   left of the output limit, and `snap` then checks the block really decodes to that length.
//!   Concatenated xerial streams (a magic header where a chunk length is expected) are read as
//!   snappy-java reads them. [`compress`] writes xerial framing with 32 KiB chunks, which both
//!   kinds of client read.
//! - lz4: the LZ4 frame format (LZ4F) that KIP-57 settled on, via `lz4_flex::frame`. Before
//!   handing the input to the decoder, the frame structure is walked here (no allocation): the
//!   input must be one or more complete standard frames, each ending with its end mark, and each
//!   frame is then decoded by a decoder of its own. That walk exists because `lz4_flex`'s decoder
//!   treats an input that stops where a block header is expected as a clean end, so a frame cut
//!   at a block boundary would otherwise decode to a silently shorter output, and because it
//!   stops after the first frame, silently ignoring whatever follows. Legacy frames (magic `0x184C2102`) and skippable frames are refused
//!   by the walk, as Kafka's own reader refuses them. The header checksum is checked by
//!   `lz4_flex` the way the LZ4 frame spec defines it (xxHash32 of the frame descriptor without
//!   the magic): Kafka clients before KIP-57 (message format v0) hashed the magic too, and their
//!   frames are refused with a header checksum error. Magic v2 batches never carry such frames:
//!   Kafka writes the broken checksum only for magic v0, and Kafka's own reader refuses it for
//!   v1 and later. Block and content checksums are checked when a frame has them.
//! - zstd: the `zstd` crate (libzstd), streaming, concatenated frames allowed. The decoder's
//!   window, which it allocates from what a frame's header declares, is capped at
//!   `2^clamp(ceil(log2(max_output)), ZSTD_WINDOW_LOG_FLOOR, ZSTD_WINDOW_LOG_MAX)` bytes: enough
//!   for any frame a client writes at level 19 or below with an unknown size, and never more
//!   than about twice the output limit otherwise. A frame declaring a larger window is refused.
//!
//! Invariants:
//! - [`decompress`] never returns more than `max_output` bytes and never grows its output buffer
//!   past `max_output` bytes: output is produced in chunks of at most [`DECODE_CHUNK_LEN`], and the
//!   first chunk that would cross the limit is refused with [`CompressionError::OutputTooLarge`]
//!   before it is appended. Besides the output, a decoder holds at most its own working state:
//!   flate2's 32 KiB window, one lz4 block (4 MiB at most, twice that plus 64 KiB for linked
//!   blocks), zstd's capped window.
//! - Decoding never panics on any input; malformed or truncated input is
//!   [`CompressionError::Corrupt`].

use std::fmt;
use std::io::{self, Read, Write};

use bytes::Bytes;

use super::record_batch::Compression;

/// How much decoded output is taken from a streaming decoder at a time.
pub const DECODE_CHUNK_LEN: usize = 64 * 1024;

/// The first bytes of a snappy-java ("xerial") framed stream.
pub const XERIAL_MAGIC: [u8; 8] = *b"\x82SNAPPY\0";

/// The xerial header: the magic, then the version and the compatible version as big-endian
/// i32s.
pub const XERIAL_HEADER_LEN: usize = 16;

/// The version and compatible version [`compress`] writes in the xerial header, as snappy-java
/// does.
pub const XERIAL_VERSION: i32 = 1;

/// How much uncompressed input [`compress`] puts in one xerial chunk: snappy-java's default
/// block size.
pub const XERIAL_CHUNK_LEN: usize = 32 * 1024;

/// The smallest zstd window log the decoder accepts whatever the output limit: 8 MiB, the window
/// of compression levels up to 19 when the content size is not known in advance.
pub const ZSTD_WINDOW_LOG_FLOOR: u32 = 23;

/// The largest zstd window log the decoder ever accepts: 128 MiB, libzstd's default limit.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// `compression.gzip.level` (KIP-390) runs from 1 (fastest) to 9 (smallest), or is -1 for
/// zlib's default (6): Kafka's bounds for gzip, `java.util.zip.Deflater`'s.
pub const GZIP_LEVEL_MIN: i32 = 1;
pub const GZIP_LEVEL_MAX: i32 = 9;
/// Kafka's default `compression.gzip.level`: `Deflater.DEFAULT_COMPRESSION`.
pub const GZIP_LEVEL_DEFAULT: i32 = -1;

/// `compression.lz4.level` runs from 1 to 17 (Kafka's bounds, lz4-java's `LZ4Constants`).
pub const LZ4_LEVEL_MIN: i32 = 1;
pub const LZ4_LEVEL_MAX: i32 = 17;
/// Kafka's default `compression.lz4.level`, at which Kafka uses LZ4's fast compressor.
pub const LZ4_LEVEL_DEFAULT: i32 = 9;

/// `compression.zstd.level` runs from libzstd's `ZSTD_minCLevel()` to `ZSTD_MAX_CLEVEL`
/// (Kafka's bounds for zstd).
pub const ZSTD_LEVEL_MIN: i32 = -131_072;
pub const ZSTD_LEVEL_MAX: i32 = 22;
/// Kafka's default `compression.zstd.level`, libzstd's `ZSTD_CLEVEL_DEFAULT`.
pub const ZSTD_LEVEL_DEFAULT: i32 = 3;

/// The LZ4 frame magic number (little-endian on the wire).
const LZ4F_MAGIC: u32 = 0x184D_2204;
/// The bits of an LZ4 frame's FLG byte.
const LZ4F_FLG_BLOCK_CHECKSUM: u8 = 0x10;
const LZ4F_FLG_CONTENT_SIZE: u8 = 0x08;
const LZ4F_FLG_CONTENT_CHECKSUM: u8 = 0x04;
const LZ4F_FLG_DICT_ID: u8 = 0x01;
/// Magic, FLG, BD and the header checksum.
const LZ4F_HEADER_MIN: usize = 7;
/// The high bit of a block size marks an uncompressed block.
const LZ4F_BLOCK_UNCOMPRESSED: u32 = 0x8000_0000;

/// What can go wrong compressing or decompressing, naming the codec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompressionError {
    /// The decompressed output would be larger than `limit` bytes. Nothing beyond the limit was
    /// decoded or allocated.
    OutputTooLarge { codec: Compression, limit: usize },
    /// The compressed input is malformed, truncated, or fails a checksum.
    Corrupt { codec: Compression, reason: String },
    /// The encoder failed. The encoders write to memory, so this is not expected to happen.
    CompressFailed { codec: Compression, reason: String },
}

impl fmt::Display for CompressionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompressionError::OutputTooLarge { codec, limit } => write!(
                f,
                "{codec} data decompresses to more than the limit of {limit} bytes"
            ),
            CompressionError::Corrupt { codec, reason } => {
                write!(f, "corrupt {codec} data: {reason}")
            }
            CompressionError::CompressFailed { codec, reason } => {
                write!(f, "{codec} compression failed: {reason}")
            }
        }
    }
}

impl std::error::Error for CompressionError {}

fn corrupt(codec: Compression, reason: impl fmt::Display) -> CompressionError {
    CompressionError::Corrupt {
        codec,
        reason: reason.to_string(),
    }
}

/// Decompresses `input` compressed with `codec`, refusing any output larger than `max_output`
/// bytes with [`CompressionError::OutputTooLarge`]. `Compression::None` returns a copy of the
/// input under the same limit.
pub fn decompress(
    codec: Compression,
    input: &[u8],
    max_output: usize,
) -> Result<Bytes, CompressionError> {
    let mut out = BoundedOutput::new(codec, max_output);
    decompress_into(codec, input, &mut out)?;
    Ok(Bytes::from(out.buf))
}

fn decompress_into(
    codec: Compression,
    input: &[u8],
    out: &mut BoundedOutput,
) -> Result<(), CompressionError> {
    if codec != Compression::None && input.is_empty() {
        // No codec's stream is empty, not even one of zero bytes of output.
        return Err(corrupt(codec, "empty input"));
    }
    match codec {
        Compression::None => out.extend(input),
        Compression::Gzip => read_all(flate2::read::MultiGzDecoder::new(input), out),
        Compression::Snappy => {
            if input.starts_with(&XERIAL_MAGIC) {
                xerial_decompress(input, out)
            } else {
                snappy_block(input, out)
            }
        }
        Compression::Lz4 => {
            // lz4_flex's decoder stops after one frame, so each frame gets its own.
            let mut rest = input;
            while !rest.is_empty() {
                let len = lz4_frame_len(rest).map_err(|reason| corrupt(codec, reason))?;
                let (frame, after) = rest.split_at(len);
                read_all(lz4_flex::frame::FrameDecoder::new(frame), out)?;
                rest = after;
            }
            Ok(())
        }
        Compression::Zstd => {
            let mut decoder =
                zstd::stream::read::Decoder::with_buffer(input).map_err(|e| corrupt(codec, e))?;
            decoder
                .window_log_max(zstd_window_log(out.limit))
                .map_err(|e| corrupt(codec, e))?;
            read_all(decoder, out)
        }
    }
}

/// The zstd window log allowed for an output limit; see the module docs.
fn zstd_window_log(max_output: usize) -> u32 {
    let ceil_log2 = usize::BITS - max_output.saturating_sub(1).leading_zeros();
    ceil_log2.clamp(ZSTD_WINDOW_LOG_FLOOR, ZSTD_WINDOW_LOG_MAX)
}

/// Compresses `input` with `codec` at Kafka's default level ([`Compressor::new`]).
pub fn compress(codec: Compression, input: &[u8]) -> Result<Vec<u8>, CompressionError> {
    Compressor::new(codec).compress(input)
}

/// A codec and the level to compress at (Kafka's `Compression` of KIP-390): what a topic
/// whose `compression.type` names a codec recompresses produced batches to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compressor {
    pub codec: Compression,
    /// The codec's level; see [`level_allowed`]. Snappy and no compression have none (0).
    pub level: i32,
}

impl Compressor {
    /// `codec` at Kafka's default level for it.
    pub fn new(codec: Compression) -> Compressor {
        let level = match codec {
            Compression::Gzip => GZIP_LEVEL_DEFAULT,
            Compression::Lz4 => LZ4_LEVEL_DEFAULT,
            Compression::Zstd => ZSTD_LEVEL_DEFAULT,
            Compression::None | Compression::Snappy => 0,
        };
        Compressor { codec, level }
    }

    /// `codec` at `level`, which should be one [`level_allowed`] accepts: gzip falls back to
    /// zlib's default outside 1-9, libzstd clamps zstd's.
    pub fn with_level(codec: Compression, level: i32) -> Compressor {
        Compressor { codec, level }
    }

    /// Compresses `input` in the form Kafka's Java client writes: gzip at the level,
    /// xerial-framed snappy, an LZ4 frame with independent 64 KiB blocks and no checksums
    /// beyond the header's, one zstd frame at the level that declares its content size (so
    /// its window is no larger than the input, whatever the level). `Compression::None`
    /// returns a copy.
    ///
    /// LZ4 has one compressor here, LZ4's fast one (`lz4_flex` has no high-compression
    /// mode): it is the one Kafka uses at its default level 9, while Kafka's other levels use
    /// lz4-java's high-compression mode. Every level therefore writes the same frame.
    pub fn compress(&self, input: &[u8]) -> Result<Vec<u8>, CompressionError> {
        let codec = self.codec;
        let failed = |e: io::Error| CompressionError::CompressFailed {
            codec,
            reason: e.to_string(),
        };
        match codec {
            Compression::None => Ok(input.to_vec()),
            Compression::Gzip => gzip(input, self.level).map_err(failed),
            Compression::Snappy => xerial_compress(input).map_err(failed),
            Compression::Lz4 => lz4_frame(input).map_err(failed),
            Compression::Zstd => zstd::bulk::compress(input, self.level).map_err(failed),
        }
    }
}

/// Whether `level` is one Kafka accepts for `codec` (`CompressionType.levelValidator`):
/// gzip 1-9 or -1, lz4 1-17, zstd -131072 to 22. Snappy and no compression have no level
/// config, so nothing is allowed for them.
pub fn level_allowed(codec: Compression, level: i32) -> bool {
    match codec {
        Compression::Gzip => {
            (GZIP_LEVEL_MIN..=GZIP_LEVEL_MAX).contains(&level) || level == GZIP_LEVEL_DEFAULT
        }
        Compression::Lz4 => (LZ4_LEVEL_MIN..=LZ4_LEVEL_MAX).contains(&level),
        Compression::Zstd => (ZSTD_LEVEL_MIN..=ZSTD_LEVEL_MAX).contains(&level),
        Compression::None | Compression::Snappy => false,
    }
}

/// gzip at `level` (1-9; anything else is zlib's default, 6, as `Deflater` reads -1).
fn gzip(input: &[u8], level: i32) -> io::Result<Vec<u8>> {
    let level = match u32::try_from(level) {
        Ok(level) if (1..=9).contains(&level) => flate2::Compression::new(level),
        _ => flate2::Compression::default(),
    };
    let mut encoder =
        flate2::write::GzEncoder::new(Vec::with_capacity(input.len() / 2 + 64), level);
    encoder.write_all(input)?;
    encoder.finish()
}

/// Snappy in snappy-java's xerial framing, [`XERIAL_CHUNK_LEN`] of input per chunk.
fn xerial_compress(input: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + input.len() / 2 + 64);
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
    out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for chunk in input.chunks(XERIAL_CHUNK_LEN) {
        let block = encoder.compress_vec(chunk).map_err(io::Error::from)?;
        let len = u32::try_from(block.len())
            .map_err(|_| io::Error::other("a snappy block is longer than 4 GiB"))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&block);
    }
    Ok(out)
}

/// One LZ4 frame of independent 64 KiB blocks, as Kafka's `Lz4BlockOutputStream` writes.
fn lz4_frame(input: &[u8]) -> io::Result<Vec<u8>> {
    let info = lz4_flex::frame::FrameInfo::new()
        .block_size(lz4_flex::frame::BlockSize::Max64KB)
        .block_mode(lz4_flex::frame::BlockMode::Independent);
    let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(
        info,
        Vec::with_capacity(input.len() / 2 + 64),
    );
    encoder.write_all(input)?;
    encoder.finish().map_err(io::Error::from)
}

/// An output buffer that refuses to grow past `limit` bytes, in length or capacity.
#[derive(Debug)]
struct BoundedOutput {
    codec: Compression,
    limit: usize,
    buf: Vec<u8>,
}

impl BoundedOutput {
    fn new(codec: Compression, limit: usize) -> BoundedOutput {
        BoundedOutput {
            codec,
            limit,
            buf: Vec::new(),
        }
    }

    /// Makes room for `additional` more bytes, or refuses if they would cross the limit. The
    /// capacity grows geometrically but never past the limit.
    fn reserve(&mut self, additional: usize) -> Result<(), CompressionError> {
        let needed = self
            .buf
            .len()
            .checked_add(additional)
            .filter(|&needed| needed <= self.limit)
            .ok_or(CompressionError::OutputTooLarge {
                codec: self.codec,
                limit: self.limit,
            })?;
        if needed > self.buf.capacity() {
            let target = needed.max(
                self.buf
                    .capacity()
                    .saturating_mul(2)
                    .max(DECODE_CHUNK_LEN)
                    .min(self.limit),
            );
            self.buf.reserve_exact(target - self.buf.len());
        }
        Ok(())
    }

    fn extend(&mut self, data: &[u8]) -> Result<(), CompressionError> {
        self.reserve(data.len())?;
        self.buf.extend_from_slice(data);
        Ok(())
    }
}

/// Drains a streaming decoder into `out` a chunk at a time.
fn read_all<R: Read>(mut reader: R, out: &mut BoundedOutput) -> Result<(), CompressionError> {
    // One byte more than the limit is enough to tell that the limit is crossed.
    let mut chunk = vec![0u8; DECODE_CHUNK_LEN.min(out.limit.saturating_add(1))];
    loop {
        match reader.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => out.extend(chunk.get(..n).unwrap_or(&[]))?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(corrupt(out.codec, e)),
        }
    }
}

/// Decodes one raw snappy block onto the end of `out`, believing its declared length only once
/// it fits under the limit.
fn snappy_block(block: &[u8], out: &mut BoundedOutput) -> Result<(), CompressionError> {
    let codec = Compression::Snappy;
    let len = snap::raw::decompress_len(block).map_err(|e| corrupt(codec, e))?;
    out.reserve(len)?;
    let start = out.buf.len();
    out.buf.resize(start + len, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out.buf[start..])
        .map_err(|e| corrupt(codec, e))?;
    if written != len {
        return Err(corrupt(
            codec,
            format!("block declares {len} bytes but decodes to {written}"),
        ));
    }
    Ok(())
}

/// Decodes a xerial-framed stream: a header, then length-prefixed raw snappy chunks.
fn xerial_decompress(input: &[u8], out: &mut BoundedOutput) -> Result<(), CompressionError> {
    let codec = Compression::Snappy;
    let mut rest = input;
    loop {
        // A header starts the stream, and another may follow any chunk when streams were
        // concatenated (snappy-java reads those too).
        if rest.starts_with(&XERIAL_MAGIC) {
            rest = rest.get(XERIAL_HEADER_LEN..).ok_or_else(|| {
                corrupt(
                    codec,
                    format!("xerial header truncated: {XERIAL_HEADER_LEN} bytes needed"),
                )
            })?;
            continue;
        }
        if rest.is_empty() {
            return Ok(());
        }
        let (len, after) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| corrupt(codec, "xerial chunk length truncated"))?;
        let len = u32::from_be_bytes(*len) as usize;
        let chunk = after.get(..len).ok_or_else(|| {
            corrupt(
                codec,
                format!(
                    "xerial chunk of {len} bytes truncated: {} bytes left",
                    after.len()
                ),
            )
        })?;
        snappy_block(chunk, out)?;
        rest = &after[len..];
    }
}

/// Walks the structure of the LZ4 frame at the start of `input` without decoding it and returns
/// its length: it must be a standard frame, complete up to its end mark (and content checksum).
/// Header fields other than the sizes, and all checksums, are left to the decoder.
fn lz4_frame_len(input: &[u8]) -> Result<usize, String> {
    let mut pos = 0usize;
    let u32_at = |pos: usize, what: &str| -> Result<u32, String> {
        input
            .get(pos..pos.saturating_add(4))
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_le_bytes)
            .ok_or_else(|| format!("{what} truncated at byte {pos}"))
    };
    {
        let magic = u32_at(pos, "frame magic")?;
        if magic != LZ4F_MAGIC {
            return Err(format!(
                "not a standard LZ4 frame at byte {pos}: magic {magic:#010x} \
                 (legacy and skippable frames are not accepted)"
            ));
        }
        let flg = *input
            .get(pos + 4)
            .ok_or_else(|| format!("frame descriptor truncated at byte {pos}"))?;
        let mut header_len = LZ4F_HEADER_MIN;
        if flg & LZ4F_FLG_CONTENT_SIZE != 0 {
            header_len += 8;
        }
        if flg & LZ4F_FLG_DICT_ID != 0 {
            header_len += 4;
        }
        pos = pos
            .checked_add(header_len)
            .filter(|&end| end <= input.len())
            .ok_or_else(|| format!("frame descriptor truncated at byte {pos}"))?;
        let block_checksum = if flg & LZ4F_FLG_BLOCK_CHECKSUM != 0 {
            4
        } else {
            0
        };
        loop {
            let block = u32_at(pos, "block size (or end mark)")?;
            pos += 4;
            if block == 0 {
                break;
            }
            let size = (block & !LZ4F_BLOCK_UNCOMPRESSED) as usize;
            pos = pos
                .checked_add(size)
                .and_then(|p| p.checked_add(block_checksum))
                .filter(|&end| end <= input.len())
                .ok_or_else(|| format!("block of {size} bytes truncated at byte {pos}"))?;
        }
        if flg & LZ4F_FLG_CONTENT_CHECKSUM != 0 {
            u32_at(pos, "content checksum")?;
            pos += 4;
        }
    }
    Ok(pos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CODECS: [Compression; 4] = [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    const MIB: usize = 1024 * 1024;

    fn sample_data(len: usize) -> Vec<u8> {
        // Compressible but not trivially so: a repeating text with a counter mixed in.
        (0..len)
            .map(|i| b"the quick brown fox "[i % 20] ^ ((i / 4096) as u8 & 0x3))
            .collect()
    }

    #[test]
    fn protocol_compression_round_trips_every_codec() {
        for codec in CODECS.into_iter().chain([Compression::None]) {
            for len in [
                0,
                1,
                100,
                XERIAL_CHUNK_LEN,
                3 * XERIAL_CHUNK_LEN + 7,
                300_000,
            ] {
                let data = sample_data(len);
                let packed = compress(codec, &data).unwrap();
                let unpacked = decompress(codec, &packed, len).unwrap();
                assert_eq!(&unpacked[..], &data[..], "{codec} with {len} bytes");
                if len > 0 {
                    assert_eq!(
                        decompress(codec, &packed, len - 1),
                        Err(CompressionError::OutputTooLarge {
                            codec,
                            limit: len - 1
                        }),
                        "{codec}: one byte under the limit"
                    );
                }
            }
        }
    }

    #[test]
    fn protocol_compression_levels_round_trip_at_kafkas_bounds() {
        let data = sample_data(200_000);
        for (codec, levels) in [
            (
                Compression::Gzip,
                vec![GZIP_LEVEL_DEFAULT, GZIP_LEVEL_MIN, 5, GZIP_LEVEL_MAX],
            ),
            (
                Compression::Lz4,
                vec![LZ4_LEVEL_MIN, LZ4_LEVEL_DEFAULT, LZ4_LEVEL_MAX],
            ),
            (
                Compression::Zstd,
                vec![
                    ZSTD_LEVEL_MIN,
                    -1,
                    1,
                    ZSTD_LEVEL_DEFAULT,
                    19,
                    ZSTD_LEVEL_MAX,
                ],
            ),
        ] {
            for level in levels {
                assert!(level_allowed(codec, level), "{codec} level {level}");
                let packed = Compressor::with_level(codec, level)
                    .compress(&data)
                    .unwrap();
                // Even zstd's ultra levels declare a window no larger than the input, so the
                // decoder's cap for a small limit accepts them.
                let unpacked = decompress(codec, &packed, data.len()).unwrap();
                assert_eq!(&unpacked[..], &data[..], "{codec} at level {level}");
            }
        }
        // Levels matter where the codec has them: gzip 1 against 9 on compressible data.
        let fast = Compressor::with_level(Compression::Gzip, 1)
            .compress(&data)
            .unwrap();
        let small = Compressor::with_level(Compression::Gzip, 9)
            .compress(&data)
            .unwrap();
        assert!(
            small.len() < fast.len(),
            "{} vs {}",
            small.len(),
            fast.len()
        );
        assert_eq!(
            compress(Compression::Zstd, &data).unwrap(),
            Compressor::with_level(Compression::Zstd, ZSTD_LEVEL_DEFAULT)
                .compress(&data)
                .unwrap()
        );
        for (codec, refused) in [
            (Compression::Gzip, vec![0, -2, 10, i32::MIN]),
            (Compression::Lz4, vec![0, -1, 18]),
            (Compression::Zstd, vec![ZSTD_LEVEL_MIN - 1, 23, i32::MAX]),
            (Compression::Snappy, vec![0, 1]),
            (Compression::None, vec![0]),
        ] {
            for level in refused {
                assert!(!level_allowed(codec, level), "{codec} level {level}");
            }
        }
    }

    #[test]
    fn protocol_compression_snappy_reads_raw_blocks_as_librdkafka_writes_them() {
        let data = sample_data(100_000);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert!(!raw.starts_with(&XERIAL_MAGIC));
        let out = decompress(Compression::Snappy, &raw, MIB).unwrap();
        assert_eq!(&out[..], &data[..]);
        // The declared length is checked against the limit before anything is allocated.
        assert_eq!(
            decompress(Compression::Snappy, &raw, 99_999),
            Err(CompressionError::OutputTooLarge {
                codec: Compression::Snappy,
                limit: 99_999
            })
        );
        // A block that claims more than it decodes to is corrupt.
        let mut lying = vec![0xff, 0xff, 0x03]; // varint length 65535
        lying.extend_from_slice(&raw[3..]);
        assert!(matches!(
            decompress(Compression::Snappy, &lying, MIB),
            Err(CompressionError::Corrupt { .. })
        ));
    }

    #[test]
    fn protocol_compression_snappy_decodes_a_hand_made_xerial_frame() {
        // Header: magic, version 1, compatible version 1; then two chunks, each a big-endian
        // length and a raw snappy block, the second written with a literal by hand.
        let first = snap::raw::Encoder::new()
            .compress_vec(b"hello, hello, hello, ")
            .unwrap();
        // Raw snappy: varint length 5, then a literal tag ((5 - 1) << 2) and the bytes.
        let second = [5u8, 4 << 2, b'w', b'o', b'r', b'l', b'd'];
        let mut framed = Vec::new();
        framed.extend_from_slice(b"\x82SNAPPY\x00");
        framed.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        framed.extend_from_slice(&(first.len() as u32).to_be_bytes());
        framed.extend_from_slice(&first);
        framed.extend_from_slice(&(second.len() as u32).to_be_bytes());
        framed.extend_from_slice(&second);
        let out = decompress(Compression::Snappy, &framed, 100).unwrap();
        assert_eq!(&out[..], b"hello, hello, hello, world");

        // Each chunk counts against the limit: the second chunk crosses it.
        assert_eq!(
            decompress(Compression::Snappy, &framed, 25),
            Err(CompressionError::OutputTooLarge {
                codec: Compression::Snappy,
                limit: 25
            })
        );

        // A second stream concatenated onto the first, as snappy-java allows.
        let mut twice = framed.clone();
        twice.extend_from_slice(&framed);
        let out = decompress(Compression::Snappy, &twice, 100).unwrap();
        assert_eq!(
            &out[..],
            b"hello, hello, hello, worldhello, hello, hello, world"
        );

        // Only the header: an empty stream.
        let out = decompress(Compression::Snappy, &framed[..XERIAL_HEADER_LEN], 100).unwrap();
        assert!(out.is_empty());

        // Every cut inside a chunk or the header is an error.
        for cut in 9..framed.len() {
            if cut == XERIAL_HEADER_LEN || cut == XERIAL_HEADER_LEN + 4 + first.len() {
                continue; // chunk boundaries: a shorter but well-formed stream
            }
            assert!(
                decompress(Compression::Snappy, &framed[..cut], 100).is_err(),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn protocol_compression_refuses_bombs_without_large_allocations() {
        let zeros = vec![0u8; 100 * MIB];
        for codec in CODECS {
            let bomb = compress(codec, &zeros).unwrap();
            assert!(bomb.len() < 6 * MIB, "{codec} bomb is {} bytes", bomb.len());
            let mut out = BoundedOutput::new(codec, MIB);
            let result = decompress_into(codec, &bomb, &mut out);
            assert_eq!(
                result,
                Err(CompressionError::OutputTooLarge { codec, limit: MIB })
            );
            assert!(
                out.buf.capacity() <= MIB,
                "{codec}: output grew to {} bytes",
                out.buf.capacity()
            );
            let shown = CompressionError::OutputTooLarge { codec, limit: MIB }.to_string();
            assert!(shown.contains(&codec.to_string()), "{shown}");
            assert!(shown.contains("1048576"), "{shown}");
        }
    }

    #[test]
    fn protocol_compression_truncated_payloads_are_errors() {
        let data = sample_data(200_000);
        for codec in CODECS {
            let packed = compress(codec, &data).unwrap();
            for cut in [
                0,
                1,
                4,
                7,
                10,
                packed.len() / 2,
                packed.len() - 4,
                packed.len() - 1,
            ] {
                let result = decompress(codec, &packed[..cut], MIB);
                assert!(
                    matches!(result, Err(CompressionError::Corrupt { .. })),
                    "{codec} cut to {cut} of {} bytes gave {:?}",
                    packed.len(),
                    result.map(|b| b.len())
                );
            }
            let mut trailing = packed.clone();
            trailing.extend_from_slice(b"garbage!");
            assert!(
                decompress(codec, &trailing, MIB).is_err(),
                "{codec} with trailing garbage"
            );
        }
    }

    #[test]
    fn protocol_compression_lz4_frames_as_kip57_defines_them() {
        let data = sample_data(1000);
        let frame = compress(Compression::Lz4, &data).unwrap();
        // Magic, FLG (version 01, independent blocks), BD (64 KiB), header checksum.
        assert_eq!(&frame[..4], &LZ4F_MAGIC.to_le_bytes());
        assert_eq!(frame[4], 0x60);
        assert_eq!(frame[5], 0x40);

        // The header checksum is xxHash32 of FLG and BD, second byte, as the spec says.
        assert_eq!(twox_xxh32(&frame[4..6]), frame[6]);
        // A header checksum computed the pre-KIP-57 way (over the magic too) is refused.
        let mut broken = frame.clone();
        let mut hasher = twox_xxh32(&broken[..6]);
        if hasher == broken[6] {
            hasher ^= 1;
        }
        broken[6] = hasher;
        assert!(matches!(
            decompress(Compression::Lz4, &broken, MIB),
            Err(CompressionError::Corrupt { .. })
        ));

        // Concatenated frames decode one after the other.
        let mut two = frame.clone();
        two.extend_from_slice(&frame);
        let out = decompress(Compression::Lz4, &two, MIB).unwrap();
        assert_eq!(out.len(), 2 * data.len());

        // Legacy and skippable frames are refused.
        let legacy = [0x02, 0x21, 0x4c, 0x18, 0, 0, 0, 0];
        assert!(decompress(Compression::Lz4, &legacy, MIB).is_err());
        let skippable = [0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0];
        assert!(decompress(Compression::Lz4, &skippable, MIB).is_err());

        // A frame whose end mark is missing is truncated, not a shorter output.
        assert!(decompress(Compression::Lz4, &frame[..frame.len() - 4], MIB).is_err());
    }

    /// An LZ4 frame header checksum byte: the second byte of xxHash32 (seed 0) over `bytes`.
    fn twox_xxh32(bytes: &[u8]) -> u8 {
        // A small xxHash32 for the test, so the test needs no hashing crate of its own.
        const P1: u32 = 2_654_435_761;
        const P2: u32 = 2_246_822_519;
        const P3: u32 = 3_266_489_917;
        const P4: u32 = 668_265_263;
        const P5: u32 = 374_761_393;
        assert!(bytes.len() < 16);
        let mut h = P5.wrapping_add(bytes.len() as u32);
        let mut rest = bytes;
        while let Some((word, tail)) = rest.split_first_chunk::<4>() {
            h = h.wrapping_add(u32::from_le_bytes(*word).wrapping_mul(P3));
            h = h.rotate_left(17).wrapping_mul(P4);
            rest = tail;
        }
        for &b in rest {
            h = h.wrapping_add(u32::from(b).wrapping_mul(P5));
            h = h.rotate_left(11).wrapping_mul(P1);
        }
        h ^= h >> 15;
        h = h.wrapping_mul(P2);
        h ^= h >> 13;
        h = h.wrapping_mul(P3);
        h ^= h >> 16;
        (h >> 8) as u8
    }

    #[test]
    fn protocol_compression_zstd_window_is_capped() {
        assert_eq!(zstd_window_log(0), ZSTD_WINDOW_LOG_FLOOR);
        assert_eq!(zstd_window_log(MIB), ZSTD_WINDOW_LOG_FLOOR);
        assert_eq!(zstd_window_log(64 * MIB), 26);
        assert_eq!(zstd_window_log(64 * MIB + 1), 27);
        assert_eq!(zstd_window_log(usize::MAX), ZSTD_WINDOW_LOG_MAX);
        // A frame compressed with a 2^27 window (long distance matching) is refused under a
        // small limit instead of making the decoder allocate 128 MiB.
        let data = sample_data(1000);
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        encoder.window_log(27).unwrap();
        encoder.write_all(&data).unwrap();
        let frame = encoder.finish().unwrap();
        let result = decompress(Compression::Zstd, &frame, MIB);
        assert!(
            matches!(result, Err(CompressionError::Corrupt { .. })),
            "{result:?}"
        );
        assert_eq!(
            &decompress(Compression::Zstd, &frame, 128 * MIB).unwrap()[..],
            &data[..]
        );
    }

    #[test]
    fn protocol_compression_none_is_a_bounded_copy() {
        assert_eq!(
            &decompress(Compression::None, b"abc", 3).unwrap()[..],
            b"abc"
        );
        assert_eq!(
            decompress(Compression::None, b"abc", 2),
            Err(CompressionError::OutputTooLarge {
                codec: Compression::None,
                limit: 2
            })
        );
    }

    fn arb_codec() -> impl Strategy<Value = Compression> {
        prop::sample::select(CODECS.to_vec())
    }

    proptest! {
        #[test]
        fn protocol_compression_random_bytes_never_panic(
            codec in arb_codec(),
            data in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let _ = decompress(codec, &data, 64 * 1024);
        }

        #[test]
        fn protocol_compression_random_bytes_behind_a_valid_prefix_never_panic(
            codec in arb_codec(),
            cut in any::<prop::sample::Index>(),
            data in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            // A valid stream's opening (magic, headers) gets random bytes past the first checks.
            let packed = compress(codec, &sample_data(2000)).unwrap();
            let mut input = packed[..cut.index(packed.len())].to_vec();
            input.extend_from_slice(&data);
            let _ = decompress(codec, &input, 64 * 1024);
        }

        #[test]
        fn protocol_compression_mutated_streams_never_panic(
            codec in arb_codec(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        ) {
            let mut packed = compress(codec, &sample_data(5000)).unwrap();
            for (at, byte) in edits {
                let at = at.index(packed.len());
                packed[at] = byte;
            }
            if let Ok(out) = decompress(codec, &packed, 64 * 1024) {
                prop_assert!(out.len() <= 64 * 1024);
            }
        }

        #[test]
        fn protocol_compression_round_trips_arbitrary_data(
            codec in arb_codec(),
            data in proptest::collection::vec(any::<u8>(), 0..4000),
        ) {
            let packed = compress(codec, &data).unwrap();
            let out = decompress(codec, &packed, data.len()).unwrap();
            prop_assert_eq!(&out[..], &data[..]);
        }
    }
}
