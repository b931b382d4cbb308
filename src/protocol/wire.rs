//! The primitive types of Kafka's message schema language and how each one is laid out on the
//! wire: the building blocks from which [`crate::message!`] derives whole messages.
//!
//! This module owns the [`Reader`] over a received frame, the [`WireType`] trait that every
//! schema type implements (the primitives here under [`kt`], and every struct the macro
//! generates), the compact forms of flexible versions, and the typed [`DecodeError`] /
//! [`EncodeError`].
//!
//! Invariants:
//! - Decoding never panics and never indexes peer-controlled bytes directly: every read goes
//!   through [`Reader`], which checks what remains first.
//! - Every length or count read from the wire is checked against the bytes that remain before
//!   anything is allocated for it. An array of `n` elements is accepted only if `n` times the
//!   smallest encoding of one element fits in what remains, so a decode allocates at most a
//!   small constant times the size of its input.
//! - `bytes`, `records` and unknown tagged fields are never copied: they come back as `Bytes`
//!   slices of the frame (unknown tagged fields are skipped, as the protocol requires).
//! - For every value, `encoded_len` equals the number of bytes `encode` writes.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use super::record_batch::{
    read_unsigned_varint, read_varint, read_varlong, unsigned_varint_len, varint_len, varlong_len,
    write_unsigned_varint, write_varint, write_varlong, BatchError,
};

/// The longest string any Kafka version accepts, compact or not: the classic form has an
/// int16 length, and Kafka holds compact strings to the same limit.
pub const STRING_LEN_MAX: usize = i16::MAX as usize;

/// The longest `bytes`/`records` value or array: the classic forms carry an int32 length.
pub const BYTES_LEN_MAX: usize = i32::MAX as usize;

/// The smallest encoding of one tagged field: a one-byte tag and a one-byte size.
const TAGGED_FIELD_LEN_MIN: usize = 2;

/// A Kafka UUID (topic ids, among others): 16 bytes, all zero meaning "none".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// The all-zero id, which Kafka uses for "no topic id".
    pub const ZERO: Uuid = Uuid([0; 16]);

    /// A random version-4 UUID from `bits` (the caller draws them through `rt::rand`), never
    /// one whose text starts with `-`.
    pub fn v4_from(bits: [u64; 2]) -> Uuid {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&bits[0].to_be_bytes());
        bytes[8..].copy_from_slice(&bits[1].to_be_bytes());
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        // Kafka never hands out an id whose text starts with '-' (it would read like a
        // command-line flag). The first character is the top 6 bits of byte 0 and '-' is
        // digit 62; clearing the top bit makes it 'e' without drawing again.
        if bytes[0] >> 2 == 62 {
            bytes[0] &= 0x7f;
        }
        Uuid(bytes)
    }

    /// Kafka's text form of an id: 22 characters of URL-safe base64 without padding.
    pub fn to_base64(self) -> String {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::with_capacity(UUID_BASE64_LEN);
        let mut acc: u32 = 0;
        let mut bits = 0;
        for byte in self.0 {
            acc = (acc << 8) | u32::from(byte);
            bits += 8;
            while bits >= 6 {
                bits -= 6;
                out.push(char::from(ALPHABET[((acc >> bits) & 63) as usize]));
            }
        }
        if bits > 0 {
            out.push(char::from(ALPHABET[((acc << (6 - bits)) & 63) as usize]));
        }
        assert_eq!(out.len(), UUID_BASE64_LEN);
        out
    }

    /// Parses Kafka's text form (see [`Uuid::to_base64`]); `None` unless it is 22 base64url
    /// characters.
    pub fn from_base64(text: &str) -> Option<Uuid> {
        if text.len() != UUID_BASE64_LEN {
            return None;
        }
        let mut out = [0u8; 16];
        let mut acc: u32 = 0;
        let mut bits = 0;
        let mut at = 0;
        for c in text.bytes() {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'-' => 62,
                b'_' => 63,
                _ => return None,
            };
            acc = (acc << 6) | u32::from(v);
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                *out.get_mut(at)? = (acc >> bits) as u8;
                at += 1;
            }
        }
        // The last character carries 4 bits of padding, ignored as Kafka's `Uuid.fromString`
        // ignores them (ids such as the widely copied `MkU3OEVBNTcwNTJENDM2Qk` set them).
        Some(Uuid(out))
    }
}

/// Characters in the base64 text form of a [`Uuid`].
pub const UUID_BASE64_LEN: usize = 22;

/// What went wrong while decoding, independent of where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The input ends before the value does.
    Truncated { needed: usize, remaining: usize },
    /// A length is negative and not the -1 that means null.
    NegativeLength(i32),
    /// An array or tagged-field count could not possibly fit in the bytes that remain.
    CountTooLarge { count: u64, remaining: usize },
    /// A string is longer than [`STRING_LEN_MAX`].
    StringTooLong { len: usize },
    /// A null where the schema does not allow one in this version.
    NullNotAllowed,
    /// A string is not UTF-8.
    InvalidUtf8,
    /// A varint is longer than its maximum length or overflows its type.
    InvalidVarint,
    /// A boolean byte other than 0 or 1.
    InvalidBool(u8),
    /// Bytes remain after the value: after a whole message, or inside a known tagged field.
    TrailingBytes(usize),
    /// The message does not exist in this version (`api_key` is -1 for headers).
    UnsupportedVersion { api_key: i16, version: i16 },
}

/// A decoding failure and the field it happened in, e.g. `MetadataRequest.topics[3].name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub path: String,
    pub kind: DecodeErrorKind,
}

impl DecodeError {
    pub fn new(kind: DecodeErrorKind) -> Self {
        DecodeError {
            path: String::new(),
            kind,
        }
    }

    /// Prefixes the path with a field or message name. Built only on the error path, so the
    /// happy path pays nothing for it.
    pub fn at(mut self, name: &str) -> Self {
        self.path = prefix_path(name, &self.path);
        self
    }

    /// Prefixes the path with an array index.
    pub fn at_index(mut self, index: usize) -> Self {
        self.path = format!("[{index}]{}", dot_path(&self.path));
        self
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot decode {}: ", self.path)?;
        match &self.kind {
            DecodeErrorKind::Truncated { needed, remaining } => {
                write!(f, "truncated: {needed} bytes needed, {remaining} remaining")
            }
            DecodeErrorKind::NegativeLength(len) => write!(f, "negative length {len}"),
            DecodeErrorKind::CountTooLarge { count, remaining } => write!(
                f,
                "count {count} cannot fit in the {remaining} bytes remaining"
            ),
            DecodeErrorKind::StringTooLong { len } => write!(
                f,
                "string of {len} bytes exceeds the maximum of {STRING_LEN_MAX}"
            ),
            DecodeErrorKind::NullNotAllowed => f.write_str("null is not allowed in this version"),
            DecodeErrorKind::InvalidUtf8 => f.write_str("string is not valid UTF-8"),
            DecodeErrorKind::InvalidVarint => f.write_str("invalid varint"),
            DecodeErrorKind::InvalidBool(b) => write!(f, "invalid boolean byte {b}"),
            DecodeErrorKind::TrailingBytes(n) => write!(f, "{n} trailing bytes"),
            DecodeErrorKind::UnsupportedVersion { api_key, version } => {
                write!(f, "version {version} of api key {api_key} is not supported")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// What went wrong while encoding, independent of where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EncodeErrorKind {
    /// A string longer than [`STRING_LEN_MAX`].
    StringTooLong { len: usize },
    /// A `bytes`/`records` value or an array longer than [`BYTES_LEN_MAX`].
    TooLong { len: usize },
    /// A null where the schema does not allow one in this version.
    NullNotAllowed,
    /// A non-default value in a field that this version lacks and that is not ignorable:
    /// sending the message would silently drop information the caller asked for.
    FieldNotInVersion { version: i16 },
    /// The message does not exist in this version (`api_key` is -1 for headers).
    UnsupportedVersion { api_key: i16, version: i16 },
}

/// An encoding failure and the field it happened in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodeError {
    pub path: String,
    pub kind: EncodeErrorKind,
}

impl EncodeError {
    pub fn new(kind: EncodeErrorKind) -> Self {
        EncodeError {
            path: String::new(),
            kind,
        }
    }

    pub fn at(mut self, name: &str) -> Self {
        self.path = prefix_path(name, &self.path);
        self
    }

    pub fn at_index(mut self, index: usize) -> Self {
        self.path = format!("[{index}]{}", dot_path(&self.path));
        self
    }
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot encode {}: ", self.path)?;
        match &self.kind {
            EncodeErrorKind::StringTooLong { len } => write!(
                f,
                "string of {len} bytes exceeds the maximum of {STRING_LEN_MAX}"
            ),
            EncodeErrorKind::TooLong { len } => {
                write!(f, "length {len} exceeds the maximum of {BYTES_LEN_MAX}")
            }
            EncodeErrorKind::NullNotAllowed => f.write_str("null is not allowed in this version"),
            EncodeErrorKind::FieldNotInVersion { version } => write!(
                f,
                "field has a non-default value but does not exist in version {version}"
            ),
            EncodeErrorKind::UnsupportedVersion { api_key, version } => {
                write!(f, "version {version} of api key {api_key} is not supported")
            }
        }
    }
}

impl std::error::Error for EncodeError {}

fn prefix_path(name: &str, path: &str) -> String {
    format!("{name}{}", dot_path(path))
}

/// How `path` continues after a prefix: indexes attach directly, field names after a dot.
fn dot_path(path: &str) -> String {
    if path.is_empty() || path.starts_with('[') {
        path.to_owned()
    } else {
        format!(".{path}")
    }
}

fn truncated(needed: usize, remaining: usize) -> DecodeError {
    DecodeError::new(DecodeErrorKind::Truncated { needed, remaining })
}

/// A cursor over one received frame. Slices it returns share the frame's buffer.
#[derive(Clone, Debug)]
pub struct Reader {
    buf: Bytes,
    pos: usize,
}

impl Reader {
    pub fn new(buf: Bytes) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Fails with `TrailingBytes` unless everything was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::new(DecodeErrorKind::TrailingBytes(n))),
        }
    }

    /// The next `n` bytes as a zero-copy slice.
    pub fn bytes(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        let remaining = self.remaining();
        if n > remaining {
            return Err(truncated(n, remaining));
        }
        let slice = self.buf.slice(self.pos..self.pos + n);
        self.pos += n;
        Ok(slice)
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        let remaining = self.remaining();
        if n > remaining {
            return Err(truncated(n, remaining));
        }
        self.pos += n;
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let remaining = self.remaining();
        let end = self.pos.saturating_add(N);
        let arr = self
            .buf
            .get(self.pos..end)
            .and_then(|s| <[u8; N]>::try_from(s).ok())
            .ok_or_else(|| truncated(N, remaining))?;
        self.pos = end;
        Ok(arr)
    }

    pub fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    pub fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub fn f64(&mut self) -> Result<f64, DecodeError> {
        Ok(f64::from_be_bytes(self.array()?))
    }

    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.array::<1>()? {
            [0] => Ok(false),
            [1] => Ok(true),
            [b] => Err(DecodeError::new(DecodeErrorKind::InvalidBool(b))),
        }
    }

    pub fn uuid(&mut self) -> Result<Uuid, DecodeError> {
        Ok(Uuid(self.array()?))
    }

    fn leb<T>(
        &mut self,
        read: fn(&[u8], &mut usize) -> Result<T, BatchError>,
    ) -> Result<T, DecodeError> {
        let remaining = self.remaining();
        read(&self.buf, &mut self.pos).map_err(|e| match e {
            BatchError::Truncated { .. } => truncated(remaining + 1, remaining),
            _ => DecodeError::new(DecodeErrorKind::InvalidVarint),
        })
    }

    /// A zigzag varint (the schema type `varint`).
    pub fn varint(&mut self) -> Result<i32, DecodeError> {
        self.leb(read_varint)
    }

    /// A zigzag varlong (the schema type `varlong`).
    pub fn varlong(&mut self) -> Result<i64, DecodeError> {
        self.leb(read_varlong)
    }

    /// An unsigned varint: compact lengths, tagged-field tags, sizes and counts.
    pub fn unsigned_varint(&mut self) -> Result<u32, DecodeError> {
        self.leb(read_unsigned_varint)
    }

    /// Reads a classic (int16) or compact string length. `None` means null.
    fn string_len(&mut self, compact: bool) -> Result<Option<usize>, DecodeError> {
        let len = if compact {
            match self.unsigned_varint()? {
                0 => return Ok(None),
                n => (n - 1) as usize,
            }
        } else {
            match self.i16()? {
                -1 => return Ok(None),
                n if n < 0 => {
                    return Err(DecodeError::new(DecodeErrorKind::NegativeLength(
                        i32::from(n),
                    )))
                }
                n => n as usize,
            }
        };
        if len > STRING_LEN_MAX {
            return Err(DecodeError::new(DecodeErrorKind::StringTooLong { len }));
        }
        Ok(Some(len))
    }

    /// Reads a classic (int32) or compact length of bytes or an array. `None` means null.
    fn bytes_len(&mut self, compact: bool) -> Result<Option<usize>, DecodeError> {
        if compact {
            match self.unsigned_varint()? {
                0 => Ok(None),
                n => Ok(Some((n - 1) as usize)),
            }
        } else {
            match self.i32()? {
                -1 => Ok(None),
                n if n < 0 => Err(DecodeError::new(DecodeErrorKind::NegativeLength(n))),
                n => Ok(Some(n as usize)),
            }
        }
    }

    /// A nullable string; the UTF-8 check happens before anything is copied.
    pub fn nullable_string(&mut self, compact: bool) -> Result<Option<String>, DecodeError> {
        let Some(len) = self.string_len(compact)? else {
            return Ok(None);
        };
        let raw = self.bytes(len)?;
        let s = std::str::from_utf8(&raw)
            .map_err(|_| DecodeError::new(DecodeErrorKind::InvalidUtf8))?;
        Ok(Some(s.to_owned()))
    }

    pub fn nullable_bytes(&mut self, compact: bool) -> Result<Option<Bytes>, DecodeError> {
        match self.bytes_len(compact)? {
            None => Ok(None),
            Some(len) => self.bytes(len).map(Some),
        }
    }

    /// An array count, checked for plausibility: `count * element_len_min` must fit in what
    /// remains. `None` means null.
    pub fn array_len(
        &mut self,
        compact: bool,
        element_len_min: usize,
    ) -> Result<Option<usize>, DecodeError> {
        let Some(count) = self.bytes_len(compact)? else {
            return Ok(None);
        };
        let remaining = self.remaining();
        let needed = count.checked_mul(element_len_min.max(1));
        if needed.is_none_or(|n| n > remaining) {
            return Err(DecodeError::new(DecodeErrorKind::CountTooLarge {
                count: count as u64,
                remaining,
            }));
        }
        Ok(Some(count))
    }

    /// The header of a tagged-field section: the number of fields, checked for plausibility.
    pub fn tagged_count(&mut self) -> Result<usize, DecodeError> {
        let count = self.unsigned_varint()? as usize;
        let remaining = self.remaining();
        if count.saturating_mul(TAGGED_FIELD_LEN_MIN) > remaining {
            return Err(DecodeError::new(DecodeErrorKind::CountTooLarge {
                count: count as u64,
                remaining,
            }));
        }
        Ok(count)
    }

    /// One tagged field's tag and data, the data as a sub-reader over a slice of the frame.
    pub fn tagged_field(&mut self) -> Result<(u32, Reader), DecodeError> {
        let tag = self.unsigned_varint()?;
        let size = self.unsigned_varint()? as usize;
        let data = self.bytes(size)?;
        Ok((tag, Reader::new(data)))
    }
}

/// Encoding helpers matching [`Reader`]'s. Lengths are checked by the callers in [`kt`].
pub mod put {
    use super::*;

    pub fn string_len(out: &mut BytesMut, len: Option<usize>, compact: bool) {
        match (len, compact) {
            (None, true) => write_unsigned_varint(out, 0),
            (None, false) => out.put_i16(-1),
            (Some(n), true) => write_unsigned_varint(out, n as u32 + 1),
            (Some(n), false) => out.put_i16(n as i16),
        }
    }

    pub fn bytes_len(out: &mut BytesMut, len: Option<usize>, compact: bool) {
        match (len, compact) {
            (None, true) => write_unsigned_varint(out, 0),
            (None, false) => out.put_i32(-1),
            (Some(n), true) => write_unsigned_varint(out, n as u32 + 1),
            (Some(n), false) => out.put_i32(n as i32),
        }
    }

    pub fn string_len_len(len: Option<usize>, compact: bool) -> usize {
        match (len, compact) {
            (None, true) => 1,
            (Some(n), true) => unsigned_varint_len(n as u32 + 1),
            (_, false) => 2,
        }
    }

    pub fn bytes_len_len(len: Option<usize>, compact: bool) -> usize {
        match (len, compact) {
            (None, true) => 1,
            (Some(n), true) => unsigned_varint_len(n as u32 + 1),
            (_, false) => 4,
        }
    }
}

/// How a value is encoded at one point of one message version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ctx {
    pub version: i16,
    /// Compact forms (flexible version and the field does not opt out).
    pub compact: bool,
    /// Null is allowed here.
    pub nullable: bool,
}

/// A type of the schema language: how its values are encoded, sized and decoded. Generated
/// structs implement it too, which is how arrays of structs work.
pub trait WireType {
    /// The Rust type of the value.
    type Value: Clone + fmt::Debug + PartialEq;

    /// Kafka's default for a field of this type when the schema names none.
    fn default_value() -> Self::Value;

    /// The fewest bytes any value of this type occupies (at least 1): the divisor that bounds
    /// how many elements an array can claim.
    fn len_min(ctx: Ctx) -> usize;

    fn encode(value: &Self::Value, out: &mut BytesMut, ctx: Ctx) -> Result<(), EncodeError>;

    fn encoded_len(value: &Self::Value, ctx: Ctx) -> usize;

    fn decode(r: &mut Reader, ctx: Ctx) -> Result<Self::Value, DecodeError>;
}

/// Writes a tagged field: tag, size, data.
pub fn encode_tagged<T: WireType>(
    tag: u32,
    value: &T::Value,
    out: &mut BytesMut,
    ctx: Ctx,
) -> Result<(), EncodeError> {
    let len = T::encoded_len(value, ctx);
    // The size is an unsigned varint; refuse rather than truncate it.
    if len > BYTES_LEN_MAX {
        return Err(EncodeError::new(EncodeErrorKind::TooLong { len }));
    }
    write_unsigned_varint(out, tag);
    write_unsigned_varint(out, len as u32);
    T::encode(value, out, ctx)
}

pub fn tagged_len<T: WireType>(tag: u32, value: &T::Value, ctx: Ctx) -> usize {
    let len = T::encoded_len(value, ctx);
    unsigned_varint_len(tag) + unsigned_varint_len(len as u32) + len
}

/// Decodes a known tagged field from its own slice, which it must consume exactly.
pub fn decode_tagged<T: WireType>(mut data: Reader, ctx: Ctx) -> Result<T::Value, DecodeError> {
    let value = T::decode(&mut data, ctx)?;
    data.finish()?;
    Ok(value)
}

pub fn write_tagged_count(out: &mut BytesMut, count: u32) {
    write_unsigned_varint(out, count);
}

pub fn tagged_count_len(count: u32) -> usize {
    unsigned_varint_len(count)
}

/// The types of Kafka's schema language, named as in the JSON schemas. Each is a marker type
/// whose [`WireType::Value`] is the Rust type fields of that type have.
pub mod kt {
    use super::*;

    macro_rules! fixed {
        ($(#[$m:meta])* $name:ident, $value:ty, $len:expr, $default:expr, $put:ident, $get:ident) => {
            $(#[$m])*
            pub struct $name;

            impl WireType for $name {
                type Value = $value;
                fn default_value() -> $value {
                    $default
                }
                fn len_min(_: Ctx) -> usize {
                    $len
                }
                fn encode(value: &$value, out: &mut BytesMut, _: Ctx) -> Result<(), EncodeError> {
                    out.$put(*value);
                    Ok(())
                }
                fn encoded_len(_: &$value, _: Ctx) -> usize {
                    $len
                }
                fn decode(r: &mut Reader, _: Ctx) -> Result<$value, DecodeError> {
                    r.$get()
                }
            }
        };
    }

    fixed!(Int8, i8, 1, 0, put_i8, i8);
    fixed!(Int16, i16, 2, 0, put_i16, i16);
    fixed!(Int32, i32, 4, 0, put_i32, i32);
    fixed!(Int64, i64, 8, 0, put_i64, i64);
    fixed!(Uint16, u16, 2, 0, put_u16, u16);
    fixed!(Uint32, u32, 4, 0, put_u32, u32);
    fixed!(Float64, f64, 8, 0.0, put_f64, f64);

    /// Wire types for the strong types of [`crate::protocol::types`]: each is laid out exactly
    /// as its underlying integer, and defaults to zero as that integer does.
    macro_rules! strong {
        ($(#[$m:meta])* $name:ident, $inner:ident) => {
            $(#[$m])*
            pub struct $name;

            impl WireType for $name {
                type Value = crate::protocol::types::$name;
                fn default_value() -> Self::Value {
                    crate::protocol::types::$name(<$inner as WireType>::default_value())
                }
                fn len_min(ctx: Ctx) -> usize {
                    $inner::len_min(ctx)
                }
                fn encode(value: &Self::Value, out: &mut BytesMut, ctx: Ctx) -> Result<(), EncodeError> {
                    $inner::encode(&value.0, out, ctx)
                }
                fn encoded_len(value: &Self::Value, ctx: Ctx) -> usize {
                    $inner::encoded_len(&value.0, ctx)
                }
                fn decode(r: &mut Reader, ctx: Ctx) -> Result<Self::Value, DecodeError> {
                    $inner::decode(r, ctx).map(crate::protocol::types::$name)
                }
            }
        };
    }

    strong!(
        /// `int64` holding an offset.
        Offset, Int64
    );
    strong!(
        /// `int32` holding a leader epoch.
        LeaderEpoch, Int32
    );
    strong!(
        /// `int64` holding a producer id.
        ProducerId, Int64
    );
    strong!(
        /// `int16` holding a producer epoch.
        ProducerEpoch, Int16
    );
    strong!(
        /// `int32` holding a node (broker, controller, replica) id.
        NodeId, Int32
    );

    pub struct Bool;

    impl WireType for Bool {
        type Value = bool;
        fn default_value() -> bool {
            false
        }
        fn len_min(_: Ctx) -> usize {
            1
        }
        fn encode(value: &bool, out: &mut BytesMut, _: Ctx) -> Result<(), EncodeError> {
            out.put_u8(u8::from(*value));
            Ok(())
        }
        fn encoded_len(_: &bool, _: Ctx) -> usize {
            1
        }
        fn decode(r: &mut Reader, _: Ctx) -> Result<bool, DecodeError> {
            r.bool()
        }
    }

    pub struct Uuid;

    impl WireType for Uuid {
        type Value = super::Uuid;
        fn default_value() -> super::Uuid {
            super::Uuid::ZERO
        }
        fn len_min(_: Ctx) -> usize {
            16
        }
        fn encode(value: &super::Uuid, out: &mut BytesMut, _: Ctx) -> Result<(), EncodeError> {
            out.put_slice(&value.0);
            Ok(())
        }
        fn encoded_len(_: &super::Uuid, _: Ctx) -> usize {
            16
        }
        fn decode(r: &mut Reader, _: Ctx) -> Result<super::Uuid, DecodeError> {
            r.uuid()
        }
    }

    pub struct Varint;

    impl WireType for Varint {
        type Value = i32;
        fn default_value() -> i32 {
            0
        }
        fn len_min(_: Ctx) -> usize {
            1
        }
        fn encode(value: &i32, out: &mut BytesMut, _: Ctx) -> Result<(), EncodeError> {
            write_varint(out, *value);
            Ok(())
        }
        fn encoded_len(value: &i32, _: Ctx) -> usize {
            varint_len(*value)
        }
        fn decode(r: &mut Reader, _: Ctx) -> Result<i32, DecodeError> {
            r.varint()
        }
    }

    pub struct Varlong;

    impl WireType for Varlong {
        type Value = i64;
        fn default_value() -> i64 {
            0
        }
        fn len_min(_: Ctx) -> usize {
            1
        }
        fn encode(value: &i64, out: &mut BytesMut, _: Ctx) -> Result<(), EncodeError> {
            write_varlong(out, *value);
            Ok(())
        }
        fn encoded_len(value: &i64, _: Ctx) -> usize {
            varlong_len(*value)
        }
        fn decode(r: &mut Reader, _: Ctx) -> Result<i64, DecodeError> {
            r.varlong()
        }
    }

    fn check_string(len: usize) -> Result<(), EncodeError> {
        if len > STRING_LEN_MAX {
            return Err(EncodeError::new(EncodeErrorKind::StringTooLong { len }));
        }
        Ok(())
    }

    fn check_bytes(len: usize) -> Result<(), EncodeError> {
        // The compact form stores len + 1 in a u32, which the classic limit keeps in range.
        if len > BYTES_LEN_MAX {
            return Err(EncodeError::new(EncodeErrorKind::TooLong { len }));
        }
        Ok(())
    }

    fn null_not_allowed() -> DecodeError {
        DecodeError::new(DecodeErrorKind::NullNotAllowed)
    }

    /// `string` in a field with no nullable versions.
    pub struct String;

    impl WireType for String {
        type Value = std::string::String;
        fn default_value() -> std::string::String {
            std::string::String::new()
        }
        fn len_min(ctx: Ctx) -> usize {
            put::string_len_len(None, ctx.compact)
        }
        fn encode(
            value: &std::string::String,
            out: &mut BytesMut,
            ctx: Ctx,
        ) -> Result<(), EncodeError> {
            check_string(value.len())?;
            put::string_len(out, Some(value.len()), ctx.compact);
            out.put_slice(value.as_bytes());
            Ok(())
        }
        fn encoded_len(value: &std::string::String, ctx: Ctx) -> usize {
            put::string_len_len(Some(value.len()), ctx.compact) + value.len()
        }
        fn decode(r: &mut Reader, ctx: Ctx) -> Result<std::string::String, DecodeError> {
            r.nullable_string(ctx.compact)?.ok_or_else(null_not_allowed)
        }
    }

    /// `string` in a field with nullable versions; null is refused outside them.
    pub struct NullableString;

    impl WireType for NullableString {
        type Value = Option<std::string::String>;
        fn default_value() -> Self::Value {
            Some(std::string::String::new())
        }
        fn len_min(ctx: Ctx) -> usize {
            put::string_len_len(None, ctx.compact)
        }
        fn encode(value: &Self::Value, out: &mut BytesMut, ctx: Ctx) -> Result<(), EncodeError> {
            match value {
                Some(s) => String::encode(s, out, ctx),
                None if ctx.nullable => {
                    put::string_len(out, None, ctx.compact);
                    Ok(())
                }
                None => Err(EncodeError::new(EncodeErrorKind::NullNotAllowed)),
            }
        }
        fn encoded_len(value: &Self::Value, ctx: Ctx) -> usize {
            match value {
                Some(s) => String::encoded_len(s, ctx),
                None => put::string_len_len(None, ctx.compact),
            }
        }
        fn decode(r: &mut Reader, ctx: Ctx) -> Result<Self::Value, DecodeError> {
            match r.nullable_string(ctx.compact)? {
                None if !ctx.nullable => Err(null_not_allowed()),
                s => Ok(s),
            }
        }
    }

    /// `bytes` in a field with no nullable versions: a zero-copy slice of the frame.
    pub struct Bytes;

    impl WireType for Bytes {
        type Value = bytes::Bytes;
        fn default_value() -> bytes::Bytes {
            bytes::Bytes::new()
        }
        fn len_min(ctx: Ctx) -> usize {
            put::bytes_len_len(None, ctx.compact)
        }
        fn encode(value: &bytes::Bytes, out: &mut BytesMut, ctx: Ctx) -> Result<(), EncodeError> {
            check_bytes(value.len())?;
            put::bytes_len(out, Some(value.len()), ctx.compact);
            out.put_slice(value);
            Ok(())
        }
        fn encoded_len(value: &bytes::Bytes, ctx: Ctx) -> usize {
            put::bytes_len_len(Some(value.len()), ctx.compact) + value.len()
        }
        fn decode(r: &mut Reader, ctx: Ctx) -> Result<bytes::Bytes, DecodeError> {
            r.nullable_bytes(ctx.compact)?.ok_or_else(null_not_allowed)
        }
    }

    /// `bytes` in a field with nullable versions.
    pub struct NullableBytes;

    impl WireType for NullableBytes {
        type Value = Option<bytes::Bytes>;
        fn default_value() -> Self::Value {
            Some(bytes::Bytes::new())
        }
        fn len_min(ctx: Ctx) -> usize {
            put::bytes_len_len(None, ctx.compact)
        }
        fn encode(value: &Self::Value, out: &mut BytesMut, ctx: Ctx) -> Result<(), EncodeError> {
            match value {
                Some(b) => Bytes::encode(b, out, ctx),
                None if ctx.nullable => {
                    put::bytes_len(out, None, ctx.compact);
                    Ok(())
                }
                None => Err(EncodeError::new(EncodeErrorKind::NullNotAllowed)),
            }
        }
        fn encoded_len(value: &Self::Value, ctx: Ctx) -> usize {
            match value {
                Some(b) => Bytes::encoded_len(b, ctx),
                None => put::bytes_len_len(None, ctx.compact),
            }
        }
        fn decode(r: &mut Reader, ctx: Ctx) -> Result<Self::Value, DecodeError> {
            match r.nullable_bytes(ctx.compact)? {
                None if !ctx.nullable => Err(null_not_allowed()),
                b => Ok(b),
            }
        }
    }

    /// `records`: record batches carried as opaque nullable bytes, left undecoded here (the
    /// record batch module reads them). Kafka's default for it is null.
    pub struct Records;

    impl WireType for Records {
        type Value = Option<bytes::Bytes>;
        fn default_value() -> Self::Value {
            None
        }
        fn len_min(ctx: Ctx) -> usize {
            NullableBytes::len_min(ctx)
        }
        fn encode(value: &Self::Value, out: &mut BytesMut, ctx: Ctx) -> Result<(), EncodeError> {
            NullableBytes::encode(value, out, ctx)
        }
        fn encoded_len(value: &Self::Value, ctx: Ctx) -> usize {
            NullableBytes::encoded_len(value, ctx)
        }
        fn decode(r: &mut Reader, ctx: Ctx) -> Result<Self::Value, DecodeError> {
            NullableBytes::decode(r, ctx)
        }
    }

    /// `[]T` in a field with no nullable versions.
    pub struct Array<T>(std::marker::PhantomData<T>);

    /// Elements inherit the array's context, minus nullability (which is the array's own).
    fn element_ctx(ctx: Ctx) -> Ctx {
        Ctx {
            nullable: false,
            ..ctx
        }
    }

    fn encode_elements<T: WireType>(
        items: &[T::Value],
        out: &mut BytesMut,
        ctx: Ctx,
    ) -> Result<(), EncodeError> {
        check_bytes(items.len())?;
        put::bytes_len(out, Some(items.len()), ctx.compact);
        let ectx = element_ctx(ctx);
        for (i, item) in items.iter().enumerate() {
            T::encode(item, out, ectx).map_err(|e| e.at_index(i))?;
        }
        Ok(())
    }

    fn elements_len<T: WireType>(items: &[T::Value], ctx: Ctx) -> usize {
        let ectx = element_ctx(ctx);
        put::bytes_len_len(Some(items.len()), ctx.compact)
            + items
                .iter()
                .map(|item| T::encoded_len(item, ectx))
                .sum::<usize>()
    }

    fn decode_elements<T: WireType>(
        r: &mut Reader,
        ctx: Ctx,
    ) -> Result<Option<Vec<T::Value>>, DecodeError> {
        let ectx = element_ctx(ctx);
        let Some(count) = r.array_len(ctx.compact, T::len_min(ectx))? else {
            return Ok(None);
        };
        // `array_len` bounded count by the bytes remaining, so this allocation is justified
        // by input already received.
        let mut items = Vec::with_capacity(count);
        for i in 0..count {
            items.push(T::decode(r, ectx).map_err(|e| e.at_index(i))?);
        }
        Ok(Some(items))
    }

    impl<T: WireType> WireType for Array<T> {
        type Value = Vec<T::Value>;
        fn default_value() -> Self::Value {
            Vec::new()
        }
        fn len_min(ctx: Ctx) -> usize {
            put::bytes_len_len(None, ctx.compact)
        }
        fn encode(value: &Self::Value, out: &mut BytesMut, ctx: Ctx) -> Result<(), EncodeError> {
            encode_elements::<T>(value, out, ctx)
        }
        fn encoded_len(value: &Self::Value, ctx: Ctx) -> usize {
            elements_len::<T>(value, ctx)
        }
        fn decode(r: &mut Reader, ctx: Ctx) -> Result<Self::Value, DecodeError> {
            decode_elements::<T>(r, ctx)?.ok_or_else(null_not_allowed)
        }
    }

    /// `[]T` in a field with nullable versions.
    pub struct NullableArray<T>(std::marker::PhantomData<T>);

    impl<T: WireType> WireType for NullableArray<T> {
        type Value = Option<Vec<T::Value>>;
        fn default_value() -> Self::Value {
            Some(Vec::new())
        }
        fn len_min(ctx: Ctx) -> usize {
            put::bytes_len_len(None, ctx.compact)
        }
        fn encode(value: &Self::Value, out: &mut BytesMut, ctx: Ctx) -> Result<(), EncodeError> {
            match value {
                Some(items) => encode_elements::<T>(items, out, ctx),
                None if ctx.nullable => {
                    put::bytes_len(out, None, ctx.compact);
                    Ok(())
                }
                None => Err(EncodeError::new(EncodeErrorKind::NullNotAllowed)),
            }
        }
        fn encoded_len(value: &Self::Value, ctx: Ctx) -> usize {
            match value {
                Some(items) => elements_len::<T>(items, ctx),
                None => put::bytes_len_len(None, ctx.compact),
            }
        }
        fn decode(r: &mut Reader, ctx: Ctx) -> Result<Self::Value, DecodeError> {
            match decode_elements::<T>(r, ctx)? {
                None if !ctx.nullable => Err(null_not_allowed()),
                items => Ok(items),
            }
        }
    }

    /// A struct field with nullable versions (e.g. DescribeTopicPartitions' `Cursor`): an int8
    /// marker, -1 for null or 1 followed by the struct. As Kafka's own reader does, any
    /// negative marker reads as null and any other as present. Kafka's default for it is null.
    pub struct NullableStruct<T>(std::marker::PhantomData<T>);

    impl<T: WireType> WireType for NullableStruct<T> {
        type Value = Option<T::Value>;
        fn default_value() -> Self::Value {
            None
        }
        fn len_min(_: Ctx) -> usize {
            1
        }
        fn encode(value: &Self::Value, out: &mut BytesMut, ctx: Ctx) -> Result<(), EncodeError> {
            match value {
                Some(v) => {
                    out.put_i8(1);
                    T::encode(v, out, ctx)
                }
                None if ctx.nullable => {
                    out.put_i8(-1);
                    Ok(())
                }
                None => Err(EncodeError::new(EncodeErrorKind::NullNotAllowed)),
            }
        }
        fn encoded_len(value: &Self::Value, ctx: Ctx) -> usize {
            1 + value.as_ref().map_or(0, |v| T::encoded_len(v, ctx))
        }
        fn decode(r: &mut Reader, ctx: Ctx) -> Result<Self::Value, DecodeError> {
            if r.i8()? >= 0 {
                T::decode(r, ctx).map(Some)
            } else if ctx.nullable {
                Ok(None)
            } else {
                Err(null_not_allowed())
            }
        }
    }
}

#[cfg(test)]
mod uuid_tests {
    use super::*;

    #[test]
    fn uuid_base64_round_trips_and_rejects_garbage() {
        for bits in [[0, 0], [u64::MAX, u64::MAX], [0x0123_4567_89ab_cdef, 42]] {
            let id = Uuid::v4_from(bits);
            let text = id.to_base64();
            assert_eq!(Uuid::from_base64(&text), Some(id), "{text}");
        }
        assert_eq!(Uuid::ZERO.to_base64(), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(
            Uuid::from_base64("AAAAAAAAAAAAAAAAAAAAAA"),
            Some(Uuid::ZERO)
        );
        assert_eq!(
            Uuid::from_base64("AAAAAAAAAAAAAAAAAAAAAB"),
            Some(Uuid::ZERO),
            "padding bits are ignored, as Kafka does"
        );
        assert_eq!(Uuid::from_base64("AAAAAAAAAAAAAAAAAAAAA"), None, "short");
        assert_eq!(
            Uuid::from_base64("AAAAAAAAAAAAAAAAAAAA+A"),
            None,
            "not url-safe"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(bytes: &'static [u8]) -> Reader {
        Reader::new(Bytes::from_static(bytes))
    }

    fn ctx(compact: bool, nullable: bool) -> Ctx {
        Ctx {
            version: 0,
            compact,
            nullable,
        }
    }

    #[test]
    fn bytes_are_zero_copy_slices() {
        let frame = Bytes::from_static(&[0, 0, 0, 3, 7, 8, 9]);
        let mut r = Reader::new(frame.clone());
        let b = kt::Bytes::decode(&mut r, ctx(false, false)).unwrap();
        assert_eq!(&b[..], &[7, 8, 9]);
        assert_eq!(b.as_ptr(), frame[4..].as_ptr());
        assert_eq!(r.position(), 7);
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn strings_classic_and_compact() {
        let s = kt::String::decode(&mut reader(&[0, 2, b'h', b'i']), ctx(false, false));
        assert_eq!(s.unwrap(), "hi");
        let s = kt::String::decode(&mut reader(&[3, b'h', b'i']), ctx(true, false));
        assert_eq!(s.unwrap(), "hi");
        let n = kt::NullableString::decode(&mut reader(&[0]), ctx(true, true));
        assert_eq!(n.unwrap(), None);
        let n = kt::NullableString::decode(&mut reader(&[0xff, 0xff]), ctx(false, false));
        assert_eq!(n.unwrap_err().kind, DecodeErrorKind::NullNotAllowed);
        let e = kt::String::decode(&mut reader(&[0xff, 0xfe]), ctx(false, false)).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::NegativeLength(-2));
        // Compact length 0x8000 (+1): longer than any string may be, refused before reading.
        let e = kt::String::decode(&mut reader(&[0x81, 0x80, 0x02]), ctx(true, false));
        assert_eq!(
            e.unwrap_err().kind,
            DecodeErrorKind::StringTooLong { len: 0x8000 }
        );
        let e = kt::String::decode(&mut reader(&[0, 1, 0xff]), ctx(false, false)).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::InvalidUtf8);
        let e = kt::String::decode(&mut reader(&[0, 5, b'a']), ctx(false, false)).unwrap_err();
        assert_eq!(
            e.kind,
            DecodeErrorKind::Truncated {
                needed: 5,
                remaining: 1
            }
        );
    }

    #[test]
    fn string_too_long_to_encode() {
        let long = "x".repeat(STRING_LEN_MAX + 1);
        let e = kt::String::encode(&long, &mut BytesMut::new(), ctx(true, false)).unwrap_err();
        assert_eq!(e.kind, EncodeErrorKind::StringTooLong { len: long.len() });
    }

    #[test]
    fn array_counts_are_checked_before_allocating() {
        // 2^30 int32 elements claimed, 4 bytes present.
        let e = kt::Array::<kt::Int32>::decode(
            &mut reader(&[0x40, 0, 0, 0, 1, 2, 3, 4]),
            ctx(false, false),
        )
        .unwrap_err();
        assert_eq!(
            e.kind,
            DecodeErrorKind::CountTooLarge {
                count: 1 << 30,
                remaining: 4
            }
        );
        let v = kt::Array::<kt::Int32>::decode(&mut reader(&[2, 0, 0, 0, 9]), ctx(true, false));
        assert_eq!(v.unwrap(), vec![9]);
        let e = kt::Array::<kt::Int32>::decode(&mut reader(&[0]), ctx(true, false)).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::NullNotAllowed);
    }

    #[test]
    fn varints_and_bools() {
        assert_eq!(reader(&[0x01]).varint().unwrap(), -1);
        assert_eq!(
            reader(&[0xff, 0xff, 0xff, 0xff, 0x0f])
                .unsigned_varint()
                .unwrap(),
            u32::MAX
        );
        let e = reader(&[0xff, 0xff, 0xff, 0xff, 0x1f])
            .unsigned_varint()
            .unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::InvalidVarint);
        assert!(matches!(
            reader(&[0x80]).varint().unwrap_err().kind,
            DecodeErrorKind::Truncated { .. }
        ));
        assert_eq!(
            reader(&[2]).bool().unwrap_err().kind,
            DecodeErrorKind::InvalidBool(2)
        );
    }

    #[test]
    fn paths_compose() {
        let e = DecodeError::new(DecodeErrorKind::InvalidUtf8)
            .at("name")
            .at_index(3)
            .at("topics")
            .at("MetadataRequest");
        assert_eq!(e.path, "MetadataRequest.topics[3].name");
        let e = DecodeError::new(DecodeErrorKind::InvalidBool(7))
            .at_index(1)
            .at("replica_nodes");
        assert_eq!(e.path, "replica_nodes[1]");
    }
}
