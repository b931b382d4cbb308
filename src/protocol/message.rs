//! The declarative description of Kafka messages: [`crate::message!`] takes one description of
//! a struct (its versions, flexible versions and fields) and derives the Rust struct, its
//! `Default`, and its encoder, encoded size and decoder. Each message is described once, from
//! the facts of Kafka's published message schemas; no message has hand-written codec code.
//!
//! Syntax (one struct per invocation; nested structs are described the same way, without an
//! `api_key`, and must repeat the parent's `versions` and `flexible`):
//!
//! ```ignore
//! message! {
//!     /// Doc comment of the struct.
//!     pub struct MetadataRequestTopic {
//!         versions: (0-13),            // `a-b`, `a+` (open-ended), or `a` alone
//!         flexible: (9+),              // or `(none)`
//!         fields {
//!             /// Doc comment of the field.
//!             topic_id: kt::Uuid, versions(10+), flags(ignorable);
//!             name: kt::NullableString, versions(0+), nullable(10+);
//!         }
//!         tagged {
//!             // tag => name: type [= default], versions(..) [, nullable(..)] [, flags(..)];
//!         }
//!     }
//! }
//! ```
//!
//! A field is `name: type [= default], versions(..) [, nullable(..)] [, flags(..)];` where the
//! type is one of [`crate::protocol::wire::kt`] or a struct described with this macro, the
//! default is a Rust expression of the field's value type (Kafka's default for the type when
//! omitted), and the flags are `ignorable` (a non-default value may be dropped silently when
//! the version lacks the field) and `non_compact` (the field keeps the classic encoding even in
//! flexible versions, as `RequestHeader.client_id` does).
//!
//! Invariants of the derived code:
//! - Fields absent from a version are neither written nor read, and decode to their default.
//! - A non-ignorable field holding a non-default value in a version that lacks it is an
//!   `EncodeError::FieldNotInVersion`, never silently dropped.
//! - Tagged fields are written only in flexible versions, in ascending tag order (checked at
//!   compile time), and only when they differ from their default. Unknown tags are skipped.
//! - `encoded_len(v)` equals the bytes `encode(.., v)` writes.

/// `true` when `version` lies in the inclusive range `(min, max)`.
pub const fn in_range(version: i16, range: (i16, i16)) -> bool {
    version >= range.0 && version <= range.1
}

/// `true` when the tags are strictly ascending; the macro asserts it at compile time so that
/// tagged fields are always written in the order the protocol requires.
pub const fn tags_ascending(tags: &[u32]) -> bool {
    let mut i = 1;
    while i < tags.len() {
        if tags[i - 1] >= tags[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// What every struct described with [`crate::message!`] offers, for code that handles
/// messages generically (dispatch by API key, tests over every message).
pub trait Message: Sized + Clone + std::fmt::Debug + PartialEq + Default {
    /// The struct's name, which starts the path of its errors.
    const NAME: &'static str;
    /// The API key of a request or response; -1 for headers and nested structs.
    const API_KEY: i16;
    /// The versions of this message, inclusive.
    const VERSIONS: (i16, i16);
    /// The first flexible version; `i16::MAX` if none.
    const FLEXIBLE_VERSIONS_FROM: i16;

    fn encode(
        &self,
        out: &mut bytes::BytesMut,
        version: i16,
    ) -> Result<(), crate::protocol::wire::EncodeError>;

    fn encoded_len(&self, version: i16) -> usize;

    fn decode(
        r: &mut crate::protocol::wire::Reader,
        version: i16,
    ) -> Result<Self, crate::protocol::wire::DecodeError>;

    fn decode_exact(
        buf: bytes::Bytes,
        version: i16,
    ) -> Result<Self, crate::protocol::wire::DecodeError>;
}

/// Version ranges as written in Kafka's schemas: `(3+)`, `(8-10)`, `(13)`, `(none)`.
#[doc(hidden)]
#[macro_export]
macro_rules! __samsa_versions {
    (none) => {
        (i16::MAX, -1i16)
    };
    ($min:literal +) => {
        ($min, i16::MAX)
    };
    ($min:literal - $max:literal) => {
        ($min, $max)
    };
    ($only:literal) => {
        ($only, $only)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __samsa_default {
    ($t:ty) => {
        <$t as $crate::protocol::wire::WireType>::default_value()
    };
    ($t:ty, $d:expr) => {
        $d
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __samsa_nullable {
    ($version:ident) => {
        false
    };
    ($version:ident, $range:tt) => {
        $crate::protocol::message::in_range($version, $crate::__samsa_versions! $range)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __samsa_has_flag {
    ($want:ident;) => {
        false
    };
    (ignorable; ignorable $($rest:ident)*) => {
        true
    };
    (non_compact; non_compact $($rest:ident)*) => {
        true
    };
    ($want:ident; $other:ident $($rest:ident)*) => {
        $crate::__samsa_has_flag!($want; $($rest)*)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __samsa_check_flag {
    (ignorable) => {};
    (non_compact) => {};
    ($other:ident) => {
        compile_error!(concat!(
            "unknown field flag `",
            stringify!($other),
            "`: expected ignorable or non_compact"
        ));
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __samsa_api_key {
    () => {
        -1i16
    };
    ($key:literal) => {
        $key
    };
}

/// Describes one message or nested struct; see the module documentation for the syntax.
#[macro_export]
macro_rules! message {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(api_key: $api_key:literal,)?
            versions: $versions:tt,
            flexible: $flexible:tt,
            fields {
                $(
                    $(#[$fmeta:meta])*
                    $field:ident : $fty:ty $(= $fdefault:expr)?, versions $fver:tt
                        $(, nullable $fnull:tt)? $(, flags($($fflag:ident),*))?;
                )*
            }
            tagged {
                $(
                    $(#[$tmeta:meta])*
                    $tag:literal => $tfield:ident : $tty:ty $(= $tdefault:expr)?, versions $tver:tt
                        $(, nullable $tnull:tt)? $(, flags($($tflag:ident),*))?;
                )*
            }
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq)]
        pub struct $name {
            $(
                $(#[$fmeta])*
                pub $field: <$fty as $crate::protocol::wire::WireType>::Value,
            )*
            $(
                $(#[$tmeta])*
                pub $tfield: <$tty as $crate::protocol::wire::WireType>::Value,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name {
                    $( $field: $crate::__samsa_default!($fty $(, $fdefault)?), )*
                    $( $tfield: $crate::__samsa_default!($tty $(, $tdefault)?), )*
                }
            }
        }

        // Tagged fields must be written in ascending tag order.
        const _: () = assert!($crate::protocol::message::tags_ascending(&[$($tag),*]));

        #[allow(dead_code)]
        impl $name {
            $(pub const API_KEY: i16 = $api_key;)?
            /// The versions of this message, inclusive.
            pub const VERSIONS: (i16, i16) = $crate::__samsa_versions! $versions;
            /// The first flexible version (compact forms, tagged fields); `i16::MAX` if none.
            pub const FLEXIBLE_VERSIONS_FROM: i16 = $crate::__samsa_versions! $flexible .0;
            /// The tags of the known tagged fields, ascending.
            pub const TAGS: &'static [u32] = &[$($tag),*];

            fn unsupported(version: i16) -> $crate::protocol::wire::DecodeErrorKind {
                $crate::protocol::wire::DecodeErrorKind::UnsupportedVersion {
                    api_key: $crate::__samsa_api_key!($($api_key)?),
                    version,
                }
            }

            /// Encodes the message (without any header) in `version`.
            pub fn encode(
                &self,
                out: &mut ::bytes::BytesMut,
                version: i16,
            ) -> Result<(), $crate::protocol::wire::EncodeError> {
                #[allow(unused_imports)]
                use $crate::protocol::wire::{EncodeError, EncodeErrorKind};
                if !$crate::protocol::message::in_range(version, Self::VERSIONS) {
                    return Err(EncodeError::new(EncodeErrorKind::UnsupportedVersion {
                        api_key: $crate::__samsa_api_key!($($api_key)?),
                        version,
                    })
                    .at(stringify!($name)));
                }
                self.encode_fields(out, version)
                    .map_err(|e| e.at(stringify!($name)))
            }

            /// Decodes the message (without any header) in `version`. Bytes after it are left
            /// in `r`; see [`Self::decode_exact`].
            pub fn decode(
                r: &mut $crate::protocol::wire::Reader,
                version: i16,
            ) -> Result<Self, $crate::protocol::wire::DecodeError> {
                use $crate::protocol::wire::DecodeError;
                if !$crate::protocol::message::in_range(version, Self::VERSIONS) {
                    return Err(DecodeError::new(Self::unsupported(version)).at(stringify!($name)));
                }
                Self::decode_fields(r, version).map_err(|e| e.at(stringify!($name)))
            }

            /// Decodes a buffer that must hold exactly this message.
            pub fn decode_exact(
                buf: ::bytes::Bytes,
                version: i16,
            ) -> Result<Self, $crate::protocol::wire::DecodeError> {
                let mut r = $crate::protocol::wire::Reader::new(buf);
                let value = Self::decode(&mut r, version)?;
                r.finish().map_err(|e| e.at(stringify!($name)))?;
                Ok(value)
            }

            /// The exact number of bytes [`Self::encode`] writes in `version`.
            pub fn encoded_len(&self, version: i16) -> usize {
                // A message without fields (NoOpRecord) uses none of these.
                #[allow(unused_imports)]
                use $crate::protocol::message::in_range;
                #[allow(unused_imports)]
                use $crate::protocol::wire::{Ctx, WireType};
                let flexible = version >= Self::FLEXIBLE_VERSIONS_FROM;
                let mut len = 0usize;
                $(
                    if in_range(version, $crate::__samsa_versions! $fver) {
                        let ctx = Ctx {
                            version,
                            compact: flexible
                                && !$crate::__samsa_has_flag!(non_compact; $($($fflag)*)?),
                            nullable: $crate::__samsa_nullable!(version $(, $fnull)?),
                        };
                        len += <$fty as WireType>::encoded_len(&self.$field, ctx);
                    }
                )*
                if flexible {
                    #[allow(unused_mut)]
                    let mut count = 0u32;
                    $(
                        if in_range(version, $crate::__samsa_versions! $tver)
                            && self.$tfield != $crate::__samsa_default!($tty $(, $tdefault)?)
                        {
                            let ctx = Ctx {
                                version,
                                compact: !$crate::__samsa_has_flag!(non_compact; $($($tflag)*)?),
                                nullable: $crate::__samsa_nullable!(version $(, $tnull)?),
                            };
                            count += 1;
                            len += $crate::protocol::wire::tagged_len::<$tty>($tag, &self.$tfield, ctx);
                        }
                    )*
                    len += $crate::protocol::wire::tagged_count_len(count);
                }
                len
            }

            /// The fewest bytes any value of this struct occupies in `version`: what bounds
            /// the element count of an array of it.
            pub fn encoded_len_min(version: i16) -> usize {
                // A message without fields (NoOpRecord) uses none of these.
                #[allow(unused_imports)]
                use $crate::protocol::message::in_range;
                #[allow(unused_imports)]
                use $crate::protocol::wire::{Ctx, WireType};
                let flexible = version >= Self::FLEXIBLE_VERSIONS_FROM;
                #[allow(unused_mut)]
                let mut len = usize::from(flexible);
                $(
                    if in_range(version, $crate::__samsa_versions! $fver) {
                        let ctx = Ctx {
                            version,
                            compact: flexible
                                && !$crate::__samsa_has_flag!(non_compact; $($($fflag)*)?),
                            nullable: $crate::__samsa_nullable!(version $(, $fnull)?),
                        };
                        len += <$fty as WireType>::len_min(ctx);
                    }
                )*
                len.max(1)
            }

            /// Encodes the fields without the version check or the message name in errors:
            /// the body shared by [`Self::encode`] and arrays of this struct.
            pub fn encode_fields(
                &self,
                out: &mut ::bytes::BytesMut,
                version: i16,
            ) -> Result<(), $crate::protocol::wire::EncodeError> {
                // A message without fields (NoOpRecord) uses none of these.
                #[allow(unused_imports)]
                use $crate::protocol::message::in_range;
                #[allow(unused_imports)]
                use $crate::protocol::wire::{Ctx, EncodeError, EncodeErrorKind, WireType};
                let flexible = version >= Self::FLEXIBLE_VERSIONS_FROM;
                $(
                    $($( $crate::__samsa_check_flag!($fflag); )*)?
                    if in_range(version, $crate::__samsa_versions! $fver) {
                        let ctx = Ctx {
                            version,
                            compact: flexible
                                && !$crate::__samsa_has_flag!(non_compact; $($($fflag)*)?),
                            nullable: $crate::__samsa_nullable!(version $(, $fnull)?),
                        };
                        <$fty as WireType>::encode(&self.$field, out, ctx)
                            .map_err(|e| e.at(stringify!($field)))?;
                    } else if !$crate::__samsa_has_flag!(ignorable; $($($fflag)*)?)
                        && self.$field != $crate::__samsa_default!($fty $(, $fdefault)?)
                    {
                        return Err(EncodeError::new(EncodeErrorKind::FieldNotInVersion { version })
                            .at(stringify!($field)));
                    }
                )*
                #[allow(unused_mut)]
                let mut count = 0u32;
                $(
                    $($( $crate::__samsa_check_flag!($tflag); )*)?
                    let present = flexible && in_range(version, $crate::__samsa_versions! $tver);
                    let is_default = self.$tfield == $crate::__samsa_default!($tty $(, $tdefault)?);
                    if present && !is_default {
                        count += 1;
                    } else if !present
                        && !is_default
                        && !$crate::__samsa_has_flag!(ignorable; $($($tflag)*)?)
                    {
                        return Err(EncodeError::new(EncodeErrorKind::FieldNotInVersion { version })
                            .at(stringify!($tfield)));
                    }
                )*
                if flexible {
                    $crate::protocol::wire::write_tagged_count(out, count);
                    $(
                        if in_range(version, $crate::__samsa_versions! $tver)
                            && self.$tfield != $crate::__samsa_default!($tty $(, $tdefault)?)
                        {
                            let ctx = Ctx {
                                version,
                                compact: !$crate::__samsa_has_flag!(non_compact; $($($tflag)*)?),
                                nullable: $crate::__samsa_nullable!(version $(, $tnull)?),
                            };
                            $crate::protocol::wire::encode_tagged::<$tty>($tag, &self.$tfield, out, ctx)
                                .map_err(|e| e.at(stringify!($tfield)))?;
                        }
                    )*
                }
                Ok(())
            }

            /// Decodes the fields without the version check or the message name in errors.
            pub fn decode_fields(
                r: &mut $crate::protocol::wire::Reader,
                version: i16,
            ) -> Result<Self, $crate::protocol::wire::DecodeError> {
                // A message without fields (NoOpRecord) uses none of these.
                #[allow(unused_imports)]
                use $crate::protocol::message::in_range;
                #[allow(unused_imports)]
                use $crate::protocol::wire::{Ctx, WireType};
                let flexible = version >= Self::FLEXIBLE_VERSIONS_FROM;
                $(
                    let $field = if in_range(version, $crate::__samsa_versions! $fver) {
                        let ctx = Ctx {
                            version,
                            compact: flexible
                                && !$crate::__samsa_has_flag!(non_compact; $($($fflag)*)?),
                            nullable: $crate::__samsa_nullable!(version $(, $fnull)?),
                        };
                        <$fty as WireType>::decode(r, ctx).map_err(|e| e.at(stringify!($field)))?
                    } else {
                        $crate::__samsa_default!($fty $(, $fdefault)?)
                    };
                )*
                $( let mut $tfield = $crate::__samsa_default!($tty $(, $tdefault)?); )*
                if flexible {
                    let count = r.tagged_count().map_err(|e| e.at("_tagged_fields"))?;
                    for _ in 0..count {
                        let (tag, data) = r.tagged_field().map_err(|e| e.at("_tagged_fields"))?;
                        $(
                            if tag == $tag && in_range(version, $crate::__samsa_versions! $tver) {
                                let ctx = Ctx {
                                    version,
                                    compact: !$crate::__samsa_has_flag!(non_compact; $($($tflag)*)?),
                                    nullable: $crate::__samsa_nullable!(version $(, $tnull)?),
                                };
                                $tfield = $crate::protocol::wire::decode_tagged::<$tty>(data, ctx)
                                    .map_err(|e| e.at(stringify!($tfield)))?;
                                continue;
                            }
                        )*
                        // An unknown tag (or one this version does not define): the protocol
                        // requires skipping it, and its data was already consumed.
                        let _skipped = (tag, data);
                    }
                }
                Ok($name {
                    $( $field, )*
                    $( $tfield, )*
                })
            }
        }

        impl $crate::protocol::message::Message for $name {
            const NAME: &'static str = stringify!($name);
            const API_KEY: i16 = $crate::__samsa_api_key!($($api_key)?);
            const VERSIONS: (i16, i16) = $name::VERSIONS;
            const FLEXIBLE_VERSIONS_FROM: i16 = $name::FLEXIBLE_VERSIONS_FROM;
            fn encode(
                &self,
                out: &mut ::bytes::BytesMut,
                version: i16,
            ) -> Result<(), $crate::protocol::wire::EncodeError> {
                $name::encode(self, out, version)
            }
            fn encoded_len(&self, version: i16) -> usize {
                $name::encoded_len(self, version)
            }
            fn decode(
                r: &mut $crate::protocol::wire::Reader,
                version: i16,
            ) -> Result<Self, $crate::protocol::wire::DecodeError> {
                $name::decode(r, version)
            }
            fn decode_exact(
                buf: ::bytes::Bytes,
                version: i16,
            ) -> Result<Self, $crate::protocol::wire::DecodeError> {
                $name::decode_exact(buf, version)
            }
        }

        impl $crate::protocol::wire::WireType for $name {
            type Value = $name;
            fn default_value() -> $name {
                $name::default()
            }
            fn len_min(ctx: $crate::protocol::wire::Ctx) -> usize {
                $name::encoded_len_min(ctx.version)
            }
            fn encode(
                value: &$name,
                out: &mut ::bytes::BytesMut,
                ctx: $crate::protocol::wire::Ctx,
            ) -> Result<(), $crate::protocol::wire::EncodeError> {
                value.encode_fields(out, ctx.version)
            }
            fn encoded_len(value: &$name, ctx: $crate::protocol::wire::Ctx) -> usize {
                value.encoded_len(ctx.version)
            }
            fn decode(
                r: &mut $crate::protocol::wire::Reader,
                ctx: $crate::protocol::wire::Ctx,
            ) -> Result<$name, $crate::protocol::wire::DecodeError> {
                $name::decode_fields(r, ctx.version)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::wire::{kt, DecodeErrorKind, EncodeErrorKind, Reader, Uuid};
    use bytes::{Bytes, BytesMut};
    use proptest::prelude::*;

    crate::message! {
        /// Every schema type, in a message flexible from v1, with fields coming and going.
        pub struct Everything {
            api_key: 9999,
            versions: (0-2),
            flexible: (1+),
            fields {
                a_bool: kt::Bool, versions(0+);
                an_int8: kt::Int8, versions(0+);
                an_int16: kt::Int16 = -7, versions(0+);
                an_int32: kt::Int32, versions(0+);
                an_int64: kt::Int64, versions(0+);
                a_uint16: kt::Uint16, versions(0+);
                a_uint32: kt::Uint32, versions(0+);
                a_varint: kt::Varint, versions(0+);
                a_varlong: kt::Varlong, versions(0+);
                a_uuid: kt::Uuid, versions(0+);
                a_float64: kt::Float64, versions(0+);
                a_string: kt::String, versions(0+);
                a_nullable_string: kt::NullableString, versions(0+), nullable(0+);
                a_classic_string: kt::NullableString, versions(0+), nullable(0+),
                    flags(non_compact);
                some_bytes: kt::Bytes, versions(0+);
                nullable_bytes: kt::NullableBytes, versions(0+), nullable(0+);
                records: kt::Records, versions(0+), nullable(0+);
                ints: kt::Array<kt::Int32>, versions(0+);
                nullable_structs: kt::NullableArray<Inner>, versions(0+), nullable(0+);
                only_v2: kt::Int32, versions(2+);
                ignorable_v2: kt::Int32, versions(2+), flags(ignorable);
            }
            tagged {
                0 => tagged_string: kt::NullableString = None, versions(1+), nullable(1+);
                5 => tagged_structs: kt::Array<Inner>, versions(2+), flags(ignorable);
            }
        }
    }

    crate::message! {
        /// A nested struct with its own tagged field.
        pub struct Inner {
            versions: (0-2),
            flexible: (1+),
            fields {
                x: kt::Int64, versions(0+);
            }
            tagged {
                1 => y: kt::Int32, versions(1+), flags(ignorable);
            }
        }
    }

    fn inner(v: i16) -> impl Strategy<Value = Inner> {
        (any::<i64>(), any::<i32>()).prop_map(move |(x, y)| Inner {
            x,
            y: if v >= 1 { y } else { 0 },
        })
    }

    fn everything(v: i16) -> impl Strategy<Value = Everything> {
        let bytes = || proptest::collection::vec(any::<u8>(), 0..6).prop_map(Bytes::from);
        (
            (
                any::<bool>(),
                any::<i8>(),
                any::<i16>(),
                any::<i32>(),
                any::<i64>(),
                any::<u16>(),
                any::<u32>(),
                any::<i32>(),
                any::<i64>(),
                any::<[u8; 16]>(),
                // Finite values only, so that equality after a roundtrip is meaningful.
                -1e300f64..1e300,
            ),
            (
                "\\PC{0,5}",
                proptest::option::of("[a-z]{0,5}"),
                proptest::option::of("[a-z]{0,5}"),
                bytes(),
                proptest::option::of(bytes()),
                proptest::option::of(bytes()),
                proptest::collection::vec(any::<i32>(), 0..4),
                proptest::option::of(proptest::collection::vec(inner(v), 0..3)),
                any::<i32>(),
                proptest::option::of("[a-z]{0,5}"),
                proptest::collection::vec(inner(v), 0..3),
            ),
        )
            .prop_map(move |(p, q)| Everything {
                a_bool: p.0,
                an_int8: p.1,
                an_int16: p.2,
                an_int32: p.3,
                an_int64: p.4,
                a_uint16: p.5,
                a_uint32: p.6,
                a_varint: p.7,
                a_varlong: p.8,
                a_uuid: Uuid(p.9),
                a_float64: p.10,
                a_string: q.0,
                a_nullable_string: q.1,
                a_classic_string: q.2,
                some_bytes: q.3,
                nullable_bytes: q.4,
                records: q.5,
                ints: q.6,
                nullable_structs: q.7,
                only_v2: if v >= 2 { q.8 } else { 0 },
                ignorable_v2: q.8,
                tagged_string: if v >= 1 { q.9 } else { None },
                tagged_structs: q.10,
            })
    }

    proptest! {
        #[test]
        fn everything_roundtrips(
            (v, m) in (0i16..=2).prop_flat_map(|v| (Just(v), everything(v)))
        ) {
            let mut out = BytesMut::new();
            m.encode(&mut out, v).unwrap();
            prop_assert_eq!(out.len(), m.encoded_len(v));
            let back = Everything::decode_exact(out.freeze(), v).unwrap();
            // Ignorable fields absent from the version come back as their defaults.
            let mut expected = m.clone();
            if v < 2 {
                expected.ignorable_v2 = 0;
                expected.tagged_structs = Vec::new();
            }
            if v < 1 {
                for s in expected.nullable_structs.iter_mut().flatten() {
                    s.y = 0;
                }
            }
            prop_assert_eq!(back, expected);
        }
    }

    #[test]
    fn everything_defaults_and_errors() {
        assert_eq!(Everything::default().an_int16, -7);
        assert_eq!(Everything::API_KEY, 9999);
        assert_eq!(Everything::FLEXIBLE_VERSIONS_FROM, 1);
        assert_eq!(Everything::TAGS, &[0, 5]);
        let m = Everything {
            only_v2: 1,
            ..Everything::default()
        };
        let e = m.encode(&mut BytesMut::new(), 1).unwrap_err();
        assert_eq!(e.path, "Everything.only_v2");
        assert_eq!(e.kind, EncodeErrorKind::FieldNotInVersion { version: 1 });
        let m = Everything {
            tagged_string: Some("x".into()),
            ..Everything::default()
        };
        let e = m.encode(&mut BytesMut::new(), 0).unwrap_err();
        assert_eq!(e.path, "Everything.tagged_string");
        let e = Everything::decode(&mut Reader::new(Bytes::new()), 3).unwrap_err();
        assert_eq!(
            e.kind,
            DecodeErrorKind::UnsupportedVersion {
                api_key: 9999,
                version: 3
            }
        );
        // The classic string keeps its int16 length in a flexible version.
        let m = Everything {
            a_classic_string: Some("ab".into()),
            ..Everything::default()
        };
        let mut out = BytesMut::new();
        m.encode(&mut out, 1).unwrap();
        assert!(out.windows(4).any(|w| w == [0, 2, b'a', b'b']));
    }

    #[test]
    fn version_ranges() {
        assert_eq!(crate::__samsa_versions!(3+), (3, i16::MAX));
        assert_eq!(crate::__samsa_versions!(8 - 10), (8, 10));
        assert_eq!(crate::__samsa_versions!(13), (13, 13));
        assert!(!in_range(0, crate::__samsa_versions!(none)));
        assert!(tags_ascending(&[0, 1, 5]));
        assert!(!tags_ascending(&[0, 0]));
    }
}
