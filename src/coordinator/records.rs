//! The records of `__consumer_offsets` in Kafka's own layout, and the partition that holds a
//! group's records. IO-free: bytes in, values out.
//!
//! A record's key and value each start with an int16 version followed by the schema's fields
//! in that version (Kafka's `CoordinatorRecordSerde`, `MessageUtil.toVersionPrefixedBytes`).
//! The key's version says what the record is: 0 and 1 are an [`CoordinatorKey::OffsetCommit`]
//! (`OffsetCommitKey.json`, the same fields in both), 2 a [`CoordinatorKey::GroupMetadata`]
//! (`GroupMetadataKey.json`). The value's version selects the fields of
//! `OffsetCommitValue.json` or `GroupMetadataValue.json` (0-4, flexible from 4). A tombstone,
//! which deletes an offset or a group, is a key whose value is null: callers hold values as
//! `Option<..>`, and the value decoders only ever see bytes.
//!
//! The schemas are described once, below, with [`crate::message!`] from Kafka's published
//! JSON schemas (group-coordinator module), so the codec is the protocol's own: no second
//! codec lives here. The public types are what the coordinator works with; they convert to
//! and from the schema structs.
//!
//! Invariants:
//! - Decoding never panics and allocates at most a constant times the input: every count is
//!   checked against the bytes that remain ([`crate::protocol::wire::Reader`]), and a record
//!   with bytes after its last field is refused.
//! - Encoding writes the versions Kafka 4 writes (see [`OffsetCommitValue::version`] and
//!   [`GROUP_METADATA_VALUE_VERSION`]), so a Kafka broker could read our `__consumer_offsets`
//!   and we can read a Kafka broker's, every version Kafka ever wrote.
//! - An encoding error (a string over 32767 bytes) is returned, never a panic: a member id is
//!   a client id plus a suffix, so a peer can push one over the limit.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use crate::protocol::message::{in_range, Message};
use crate::protocol::wire::{DecodeError, EncodeError, Reader};

/// The key version Kafka writes for an offset commit (`OffsetCommitKey`; 0 is read too, as
/// Kafka 0.8.2 wrote it).
pub const OFFSET_COMMIT_KEY_VERSION: i16 = 1;

/// The key version of a group's metadata (`GroupMetadataKey`, whose only version is 2).
pub const GROUP_METADATA_KEY_VERSION: i16 = 2;

/// The `GroupMetadataValue` version Kafka 4 writes: `GROUP_METADATA_VALUE_VERSION = 3` in
/// Kafka 4's `GroupCoordinatorRecordHelpers` (the last non-flexible version; Kafka 3 chose it
/// by `MetadataVersion`, and 3 is its choice for every version Kafka 4 still supports).
pub const GROUP_METADATA_VALUE_VERSION: i16 = 3;

/// The partition of `__consumer_offsets` whose leader coordinates `group_id`: Kafka's
/// `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`, with Java's
/// `String.hashCode` over UTF-16 code units (`h = 31 * h + c`, wrapping) and `Utils.abs`
/// mapping `i32::MIN` to 0.
///
/// `partitions` is the validated `offsets.topic.num.partitions` (at least 1); anything else
/// is a bug in the caller.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    assert!(
        partitions > 0,
        "offsets.topic.num.partitions must be positive, got {partitions}"
    );
    let hash = java_string_hash(group_id);
    // Kafka's Utils.abs: i32::MIN has no positive counterpart and maps to 0.
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions
}

/// Java's `String.hashCode`: over UTF-16 code units, so a character outside the BMP counts
/// as its two surrogates.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Why a record could not be decoded or encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordsError {
    /// The key's version (the record type) is not one of this layout's: Kafka 4 also writes
    /// consumer-group (KIP-848), share-group and streams-group records with higher types,
    /// which a loader of classic groups skips.
    UnknownKeyVersion(i16),
    /// A value's version is not one of its schema's.
    UnknownValueVersion { record: &'static str, version: i16 },
    /// The bytes do not hold a record of the schema: truncated, a bad length or count, a
    /// string that is not UTF-8, trailing bytes; the error names the field.
    Decode(DecodeError),
    /// A value cannot be written in the schema (a string longer than 32767 bytes).
    Encode(EncodeError),
}

impl fmt::Display for RecordsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordsError::UnknownKeyVersion(version) => write!(
                f,
                "unknown __consumer_offsets key version {version} (expected 0 or 1 for an \
                 offset commit, 2 for group metadata)"
            ),
            RecordsError::UnknownValueVersion { record, version } => {
                write!(f, "unknown {record} version {version}")
            }
            RecordsError::Decode(e) => write!(f, "__consumer_offsets record: {e}"),
            RecordsError::Encode(e) => write!(f, "__consumer_offsets record: {e}"),
        }
    }
}

impl std::error::Error for RecordsError {}

impl From<DecodeError> for RecordsError {
    fn from(e: DecodeError) -> Self {
        RecordsError::Decode(e)
    }
}

impl From<EncodeError> for RecordsError {
    fn from(e: EncodeError) -> Self {
        RecordsError::Encode(e)
    }
}

/// Kafka's schemas, field for field, as `message!` descriptions. Field names are Kafka's in
/// snake case; `versions`, `nullable`, defaults and `ignorable` are the JSON's.
mod schema {
    use crate::message;
    use crate::protocol::wire::kt;

    message! {
        /// `OffsetCommitKey.json`: the key of a committed offset.
        pub struct OffsetCommitKey {
            versions: (0-1),
            flexible: (none),
            fields {
                group: kt::String, versions(0-1);
                topic: kt::String, versions(0-1);
                partition: kt::Int32, versions(0-1);
            }
            tagged {}
        }
    }

    message! {
        /// `GroupMetadataKey.json`: the key of a group's metadata.
        pub struct GroupMetadataKey {
            versions: (2),
            flexible: (none),
            fields {
                group: kt::String, versions(2);
            }
            tagged {}
        }
    }

    message! {
        /// `OffsetCommitValue.json`: a committed offset.
        pub struct OffsetCommitValue {
            versions: (0-4),
            flexible: (4+),
            fields {
                offset: kt::Int64, versions(0+);
                leader_epoch: kt::Int32 = -1, versions(3+), flags(ignorable);
                metadata: kt::String, versions(0+);
                commit_timestamp: kt::Int64, versions(0+);
                expire_timestamp: kt::Int64 = -1, versions(1), flags(ignorable);
            }
            tagged {}
        }
    }

    message! {
        /// `GroupMetadataValue.json`: a classic group's state after a rebalance.
        pub struct GroupMetadataValue {
            versions: (0-4),
            flexible: (4+),
            fields {
                protocol_type: kt::String, versions(0+);
                generation: kt::Int32, versions(0+);
                protocol: kt::NullableString, versions(0+), nullable(0+);
                leader: kt::NullableString, versions(0+), nullable(0+);
                current_state_timestamp: kt::Int64 = -1, versions(2+), flags(ignorable);
                members: kt::Array<MemberMetadata>, versions(0+);
            }
            tagged {}
        }
    }

    message! {
        /// `GroupMetadataValue.json`'s `MemberMetadata`: one member of the group.
        pub struct MemberMetadata {
            versions: (0-4),
            flexible: (4+),
            fields {
                member_id: kt::String, versions(0+);
                group_instance_id: kt::NullableString = None, versions(3+), nullable(3+),
                    flags(ignorable);
                client_id: kt::String, versions(0+);
                client_host: kt::String, versions(0+);
                rebalance_timeout: kt::Int32 = -1, versions(1+), flags(ignorable);
                session_timeout: kt::Int32, versions(0+);
                subscription: kt::Bytes, versions(0+);
                assignment: kt::Bytes, versions(0+);
            }
            tagged {}
        }
    }
}

/// Writes `message` in `version`, after the version: a version-prefixed key or value.
fn encode_prefixed<M: Message>(message: &M, version: i16) -> Result<Bytes, RecordsError> {
    let mut out = BytesMut::with_capacity(2 + message.encoded_len(version));
    out.put_i16(version);
    message.encode(&mut out, version)?;
    Ok(out.freeze())
}

/// Reads the version prefix of a key or value; the rest stays in the reader.
fn read_version(bytes: &[u8], record: &'static str) -> Result<(i16, Reader), RecordsError> {
    let mut r = Reader::new(Bytes::copy_from_slice(bytes));
    let version = r.i16().map_err(|e| e.at("version").at(record))?;
    Ok((version, r))
}

/// Decodes the rest of `r` as an `M` in `version`; nothing may follow it.
fn decode_rest<M: Message>(mut r: Reader, version: i16) -> Result<M, RecordsError> {
    let value = M::decode(&mut r, version)?;
    r.finish().map_err(|e| e.at(M::NAME))?;
    Ok(value)
}

/// Decodes a version-prefixed value of any of its schema's versions. A version outside them
/// is refused before the schema sees it, so that the error says which record it was.
fn decode_value<M: Message>(bytes: &[u8]) -> Result<M, RecordsError> {
    let (version, r) = read_version(bytes, M::NAME)?;
    if !in_range(version, M::VERSIONS) {
        return Err(RecordsError::UnknownValueVersion {
            record: M::NAME,
            version,
        });
    }
    decode_rest(r, version)
}

/// The key of a `__consumer_offsets` record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoordinatorKey {
    /// A committed offset of `group` for one partition; its value is an
    /// [`OffsetCommitValue`].
    OffsetCommit {
        group: String,
        topic: String,
        partition: i32,
    },
    /// A group's metadata; its value is a [`GroupMetadataValue`].
    GroupMetadata { group: String },
}

impl CoordinatorKey {
    /// The group the record belongs to (what [`partition_for`] places).
    pub fn group(&self) -> &str {
        match self {
            CoordinatorKey::OffsetCommit { group, .. }
            | CoordinatorKey::GroupMetadata { group } => group,
        }
    }

    /// The key as Kafka writes it: version 1 for an offset commit, 2 for group metadata.
    pub fn encode(&self) -> Result<Bytes, RecordsError> {
        match self {
            CoordinatorKey::OffsetCommit { .. } => self.encode_in(OFFSET_COMMIT_KEY_VERSION),
            CoordinatorKey::GroupMetadata { .. } => self.encode_in(GROUP_METADATA_KEY_VERSION),
        }
    }

    /// The key in `version`, which must be one of its record type's.
    fn encode_in(&self, version: i16) -> Result<Bytes, RecordsError> {
        match self {
            CoordinatorKey::OffsetCommit {
                group,
                topic,
                partition,
            } => {
                let key = schema::OffsetCommitKey {
                    group: group.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                };
                encode_prefixed(&key, version)
            }
            CoordinatorKey::GroupMetadata { group } => {
                let key = schema::GroupMetadataKey {
                    group: group.clone(),
                };
                encode_prefixed(&key, version)
            }
        }
    }

    /// Decodes a key of any version Kafka wrote. An unknown version (record type) is
    /// [`RecordsError::UnknownKeyVersion`], which a loader may skip.
    pub fn decode(bytes: &[u8]) -> Result<CoordinatorKey, RecordsError> {
        let (version, r) = read_version(bytes, "CoordinatorKey")?;
        match version {
            0 | 1 => {
                let key: schema::OffsetCommitKey = decode_rest(r, version)?;
                Ok(CoordinatorKey::OffsetCommit {
                    group: key.group,
                    topic: key.topic,
                    partition: key.partition,
                })
            }
            GROUP_METADATA_KEY_VERSION => {
                let key: schema::GroupMetadataKey = decode_rest(r, version)?;
                Ok(CoordinatorKey::GroupMetadata { group: key.group })
            }
            other => Err(RecordsError::UnknownKeyVersion(other)),
        }
    }
}

/// A committed offset: the value of an [`CoordinatorKey::OffsetCommit`] record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommitValue {
    pub offset: i64,
    /// The leader epoch of the last consumed record, -1 if unknown. Version 1 (written when
    /// an expire timestamp is set) cannot hold it: it decodes as -1, as in Kafka.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// When the offset expires, as OffsetCommit v1-v4's retention time set it; `None`
    /// otherwise. Kafka's sentinel -1 is `None` when decoded.
    pub expire_timestamp_ms: Option<i64>,
}

impl OffsetCommitValue {
    /// The version [`Self::encode`] writes, as Kafka 4's
    /// `GroupCoordinatorRecordHelpers.offsetCommitValueVersion` chooses it: 1 when an expire
    /// timestamp is set (the only version with that field), else 3 ("the highest supported
    /// non-flexible version").
    pub fn version(&self) -> i16 {
        if self.expire_timestamp_ms.is_some() {
            1
        } else {
            3
        }
    }

    /// The value, version-prefixed, in [`Self::version`].
    pub fn encode(&self) -> Result<Bytes, RecordsError> {
        self.encode_in(self.version())
    }

    fn encode_in(&self, version: i16) -> Result<Bytes, RecordsError> {
        let value = schema::OffsetCommitValue {
            offset: self.offset,
            leader_epoch: self.leader_epoch,
            metadata: self.metadata.clone(),
            commit_timestamp: self.commit_timestamp_ms,
            expire_timestamp: self.expire_timestamp_ms.unwrap_or(-1),
        };
        encode_prefixed(&value, version)
    }

    /// Decodes a value of any version 0-4.
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordsError> {
        let value: schema::OffsetCommitValue = decode_value(bytes)?;
        Ok(OffsetCommitValue {
            offset: value.offset,
            leader_epoch: value.leader_epoch,
            metadata: value.metadata,
            commit_timestamp_ms: value.commit_timestamp,
            expire_timestamp_ms: (value.expire_timestamp != -1).then_some(value.expire_timestamp),
        })
    }
}

/// A classic group's state: the value of a [`CoordinatorKey::GroupMetadata`] record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMetadataValue {
    /// The protocol type ("consumer", "connect", ...); empty for a group that has none.
    pub protocol_type: String,
    pub generation: i32,
    /// The chosen protocol (assignor), `None` for an empty group.
    pub protocol: Option<String>,
    /// The leader's member id, `None` for an empty group.
    pub leader: Option<String>,
    /// When the group entered its current state; -1 if unknown (versions 0-1).
    pub current_state_timestamp_ms: i64,
    pub members: Vec<MemberMetadata>,
}

/// One member of a group, as [`GroupMetadataValue`] holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberMetadata {
    pub member_id: String,
    /// The static member's instance id (KIP-345); `None` for dynamic members and in versions
    /// before 3.
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// -1 when version 0 wrote none: Kafka's coordinator then uses the session timeout.
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The member's metadata for the chosen protocol (opaque to the coordinator).
    pub subscription: Bytes,
    /// The member's assignment from the leader's SyncGroup (opaque to the coordinator).
    pub assignment: Bytes,
}

impl GroupMetadataValue {
    /// The value, version-prefixed, in [`GROUP_METADATA_VALUE_VERSION`].
    pub fn encode(&self) -> Result<Bytes, RecordsError> {
        self.encode_in(GROUP_METADATA_VALUE_VERSION)
    }

    fn encode_in(&self, version: i16) -> Result<Bytes, RecordsError> {
        let value = schema::GroupMetadataValue {
            protocol_type: self.protocol_type.clone(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: self.current_state_timestamp_ms,
            members: self
                .members
                .iter()
                .map(|m| schema::MemberMetadata {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout: m.rebalance_timeout_ms,
                    session_timeout: m.session_timeout_ms,
                    subscription: m.subscription.clone(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        };
        encode_prefixed(&value, version)
    }

    /// Decodes a value of any version 0-4.
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordsError> {
        let value: schema::GroupMetadataValue = decode_value(bytes)?;
        Ok(GroupMetadataValue {
            protocol_type: value.protocol_type,
            generation: value.generation,
            protocol: value.protocol,
            leader: value.leader,
            current_state_timestamp_ms: value.current_state_timestamp,
            members: value
                .members
                .into_iter()
                .map(|m| MemberMetadata {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    rebalance_timeout_ms: m.rebalance_timeout,
                    session_timeout_ms: m.session_timeout,
                    subscription: m.subscription,
                    assignment: m.assignment,
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::wire::DecodeErrorKind;
    use proptest::prelude::*;

    /// Concatenates the annotated pieces of a golden record.
    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    fn be_i32(v: i32) -> [u8; 4] {
        v.to_be_bytes()
    }

    fn be_i64(v: i64) -> [u8; 8] {
        v.to_be_bytes()
    }

    // --- partition_for ---------------------------------------------------------------------

    #[test]
    fn java_string_hash_matches_java() {
        // Values of Java's String.hashCode.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        // The classic string whose hash is Integer.MIN_VALUE.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // Non-ASCII in the BMP is one code unit: 'é' is U+00E9.
        assert_eq!(java_string_hash("é"), 0xE9);
        // Outside the BMP Java hashes the surrogate pair: U+1F600 is D83D DE00, so
        // 31 * 0xD83D + 0xDE00.
        assert_eq!(java_string_hash("\u{1F600}"), 31 * 0xD83D + 0xDE00);
        assert_eq!(java_string_hash("\u{1F600}"), 1_772_899);
        // Wrapping arithmetic, as Java's int: "my-group" hashes negative.
        assert_eq!(java_string_hash("my-group"), -1_906_497_762);
    }

    #[test]
    fn partition_for_is_kafkas_choice() {
        assert_eq!(partition_for("", 50), 0);
        assert_eq!(partition_for("a", 50), 97 % 50);
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        // Utils.abs(i32::MIN) is 0, not a negative partition.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("polygenelubricants", 7), 0);
        // A negative hash is folded by abs before the modulo.
        assert_eq!(partition_for("my-group", 50), 1_906_497_762 % 50);
        assert_eq!(partition_for("my-group", 50), 12);
        assert_eq!(partition_for("\u{1F600}", 50), 1_772_899 % 50);
        assert_eq!(partition_for("anything", 1), 0);
    }

    #[test]
    #[should_panic(expected = "offsets.topic.num.partitions must be positive")]
    fn partition_for_refuses_no_partitions() {
        partition_for("g", 0);
    }

    proptest! {
        #[test]
        fn partition_for_is_in_range(group in ".{0,40}", partitions in 1i32..=1000) {
            let p = partition_for(&group, partitions);
            prop_assert!((0..partitions).contains(&p));
        }
    }

    // --- keys -------------------------------------------------------------------------------

    fn offset_key() -> CoordinatorKey {
        CoordinatorKey::OffsetCommit {
            group: "g1".into(),
            topic: "t".into(),
            partition: 3,
        }
    }

    /// OffsetCommitKey after its version prefix: group "g1", topic "t", partition 3.
    fn offset_key_body() -> Vec<u8> {
        cat(&[
            &[0, 2],
            b"g1", // group: int16 length + bytes
            &[0, 1],
            b"t",       // topic
            &be_i32(3), // partition
        ])
    }

    #[test]
    fn golden_offset_commit_key_v1() {
        let golden = cat(&[&[0, 1], &offset_key_body()]);
        assert_eq!(offset_key().encode().unwrap(), golden);
        assert_eq!(CoordinatorKey::decode(&golden).unwrap(), offset_key());
    }

    #[test]
    fn golden_offset_commit_key_v0() {
        // Version 0 has the same fields; it is read, and written only on request.
        let golden = cat(&[&[0, 0], &offset_key_body()]);
        assert_eq!(offset_key().encode_in(0).unwrap(), golden);
        assert_eq!(CoordinatorKey::decode(&golden).unwrap(), offset_key());
    }

    #[test]
    fn golden_group_metadata_key_v2() {
        let key = CoordinatorKey::GroupMetadata { group: "g1".into() };
        let golden = cat(&[&[0, 2], &[0, 2], b"g1"]);
        assert_eq!(key.encode().unwrap(), golden);
        assert_eq!(CoordinatorKey::decode(&golden).unwrap(), key);
        assert_eq!(key.group(), "g1");
        assert_eq!(offset_key().group(), "g1");
    }

    #[test]
    fn key_versions_beyond_the_classic_ones_are_unknown() {
        // Kafka 4 writes KIP-848 consumer-group records with key versions (types) 3 and up.
        for version in [3i16, 4, 11, -1, i16::MAX] {
            let mut bytes = version.to_be_bytes().to_vec();
            bytes.extend_from_slice(&[0, 1, b'g']);
            assert_eq!(
                CoordinatorKey::decode(&bytes),
                Err(RecordsError::UnknownKeyVersion(version))
            );
        }
        assert!(RecordsError::UnknownKeyVersion(3)
            .to_string()
            .contains("unknown __consumer_offsets key version 3"));
    }

    #[test]
    fn key_errors_name_the_problem() {
        let err = CoordinatorKey::decode(&[0]).unwrap_err();
        assert!(matches!(
            &err,
            RecordsError::Decode(DecodeError { kind: DecodeErrorKind::Truncated { .. }, path })
                if path == "CoordinatorKey.version"
        ));
        assert!(err.to_string().contains("CoordinatorKey.version"), "{err}");

        // The topic's length says 5 bytes, one remains.
        let err = CoordinatorKey::decode(&[0, 1, 0, 1, b'g', 0, 5, b't']).unwrap_err();
        assert!(err.to_string().contains("OffsetCommitKey.topic"), "{err}");
        assert!(err.to_string().contains("truncated"), "{err}");

        // A group that is not UTF-8.
        let err = CoordinatorKey::decode(&[0, 2, 0, 1, 0xff]).unwrap_err();
        assert!(matches!(
            &err,
            RecordsError::Decode(DecodeError {
                kind: DecodeErrorKind::InvalidUtf8,
                ..
            })
        ));
        assert!(err.to_string().contains("GroupMetadataKey.group"), "{err}");

        // A trailing byte after the key's last field.
        let mut bytes = offset_key().encode().unwrap().to_vec();
        bytes.push(0);
        let err = CoordinatorKey::decode(&bytes).unwrap_err();
        assert!(matches!(
            err,
            RecordsError::Decode(DecodeError {
                kind: DecodeErrorKind::TrailingBytes(1),
                ..
            })
        ));
    }

    // --- OffsetCommitValue ---------------------------------------------------------------

    fn offset_value() -> OffsetCommitValue {
        OffsetCommitValue {
            offset: 42,
            leader_epoch: 7,
            metadata: "m".into(),
            commit_timestamp_ms: 1000,
            expire_timestamp_ms: None,
        }
    }

    #[test]
    fn golden_offset_commit_value_v3_is_the_default() {
        let value = offset_value();
        assert_eq!(value.version(), 3);
        let golden = cat(&[
            &[0, 3],     // version
            &be_i64(42), // offset
            &be_i32(7),  // leaderEpoch (3+)
            &[0, 1],
            b"m",          // metadata
            &be_i64(1000), // commitTimestamp
        ]);
        assert_eq!(value.encode().unwrap(), golden);
        assert_eq!(OffsetCommitValue::decode(&golden).unwrap(), value);
    }

    #[test]
    fn golden_offset_commit_value_v1_when_an_expire_timestamp_is_set() {
        let value = OffsetCommitValue {
            expire_timestamp_ms: Some(2000),
            ..offset_value()
        };
        assert_eq!(value.version(), 1);
        let golden = cat(&[
            &[0, 1],     // version
            &be_i64(42), // offset; no leaderEpoch before v3
            &[0, 1],
            b"m",          // metadata
            &be_i64(1000), // commitTimestamp
            &be_i64(2000), // expireTimestamp (v1 only)
        ]);
        assert_eq!(value.encode().unwrap(), golden);
        // v1 has no leader epoch: it comes back as -1, as Kafka reads it.
        let expected = OffsetCommitValue {
            leader_epoch: -1,
            ..value
        };
        assert_eq!(OffsetCommitValue::decode(&golden).unwrap(), expected);
    }

    #[test]
    fn golden_offset_commit_value_v0_and_v2() {
        let value = OffsetCommitValue {
            leader_epoch: -1,
            ..offset_value()
        };
        for version in [0u8, 2] {
            let golden = cat(&[
                &[0, version],
                &be_i64(42), // offset
                &[0, 1],
                b"m",          // metadata
                &be_i64(1000), // commitTimestamp
            ]);
            assert_eq!(value.encode_in(i16::from(version)).unwrap(), golden);
            assert_eq!(OffsetCommitValue::decode(&golden).unwrap(), value);
        }
        // An expire timestamp of -1 in v1 is Kafka's "none".
        let golden = cat(&[
            &[0, 1],
            &be_i64(42),
            &[0, 1],
            b"m",
            &be_i64(1000),
            &be_i64(-1),
        ]);
        assert_eq!(OffsetCommitValue::decode(&golden).unwrap(), value);
    }

    #[test]
    fn golden_offset_commit_value_v4_flexible() {
        let value = offset_value();
        let golden = cat(&[
            &[0, 4],     // version
            &be_i64(42), // offset
            &be_i32(7),  // leaderEpoch
            &[2],        // metadata: compact length + 1
            b"m",
            &be_i64(1000), // commitTimestamp
            &[0],          // no tagged fields
        ]);
        assert_eq!(value.encode_in(4).unwrap(), golden);
        assert_eq!(OffsetCommitValue::decode(&golden).unwrap(), value);

        // A tagged field this schema does not know (a later Kafka's) is skipped.
        let tagged = cat(&[
            &golden[..golden.len() - 1],
            &[1],    // one tagged field
            &[0, 3], // tag 0, 3 bytes
            &[9, 9, 9],
        ]);
        assert_eq!(OffsetCommitValue::decode(&tagged).unwrap(), value);
    }

    #[test]
    fn offset_commit_value_errors_name_the_problem() {
        for version in [5i16, -1, 100] {
            let mut bytes = version.to_be_bytes().to_vec();
            bytes.extend_from_slice(&[0; 30]);
            assert_eq!(
                OffsetCommitValue::decode(&bytes),
                Err(RecordsError::UnknownValueVersion {
                    record: "OffsetCommitValue",
                    version
                })
            );
        }
        assert_eq!(
            RecordsError::UnknownValueVersion {
                record: "OffsetCommitValue",
                version: 5
            }
            .to_string(),
            "unknown OffsetCommitValue version 5"
        );
        let golden = offset_value().encode().unwrap();
        let err = OffsetCommitValue::decode(&golden[..golden.len() - 1]).unwrap_err();
        assert!(
            err.to_string()
                .contains("OffsetCommitValue.commit_timestamp"),
            "{err}"
        );
        let err = OffsetCommitValue::decode(&[]).unwrap_err();
        assert!(
            err.to_string().contains("OffsetCommitValue.version"),
            "{err}"
        );
    }

    #[test]
    fn an_over_long_string_is_an_encode_error() {
        let value = OffsetCommitValue {
            metadata: "x".repeat(usize::from(i16::MAX as u16) + 1),
            ..offset_value()
        };
        assert!(matches!(value.encode(), Err(RecordsError::Encode(_))));
        let key = CoordinatorKey::GroupMetadata {
            group: "g".repeat(40_000),
        };
        let err = key.encode().unwrap_err();
        assert!(err.to_string().contains("GroupMetadataKey.group"), "{err}");
    }

    // --- GroupMetadataValue --------------------------------------------------------------

    fn member() -> MemberMetadata {
        MemberMetadata {
            member_id: "m1".into(),
            group_instance_id: Some("i".into()),
            client_id: "c".into(),
            client_host: "/h".into(),
            rebalance_timeout_ms: 300_000,
            session_timeout_ms: 45_000,
            subscription: Bytes::from_static(&[1, 2]),
            assignment: Bytes::from_static(&[3]),
        }
    }

    fn group_value() -> GroupMetadataValue {
        GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            current_state_timestamp_ms: 1000,
            members: vec![member()],
        }
    }

    /// The group's fields before `currentStateTimestamp`, in a non-flexible version.
    fn group_head() -> Vec<u8> {
        cat(&[
            &[0, 8],
            b"consumer", // protocolType
            &be_i32(5),  // generation
            &[0, 5],
            b"range", // protocol (nullable)
            &[0, 2],
            b"m1", // leader (nullable)
        ])
    }

    /// `member()` in a non-flexible version: with groupInstanceId from v3, rebalanceTimeout
    /// from v1.
    fn member_bytes(version: i16) -> Vec<u8> {
        let instance: &[u8] = if version >= 3 { &[0, 1, b'i'] } else { &[] };
        let rebalance: &[u8] = if version >= 1 {
            &[0, 4, 0x93, 0xe0]
        } else {
            &[]
        };
        cat(&[
            &[0, 2],
            b"m1",    // memberId
            instance, // groupInstanceId (3+, nullable)
            &[0, 1],
            b"c", // clientId
            &[0, 2],
            b"/h",               // clientHost
            rebalance,           // rebalanceTimeout (1+): 300000
            &be_i32(45_000),     // sessionTimeout
            &[0, 0, 0, 2, 1, 2], // subscription: int32 length + bytes
            &[0, 0, 0, 1, 3],    // assignment
        ])
    }

    /// What `value` reads back as after being written in `version`: the fields the version
    /// lacks take their schema defaults.
    fn as_read_in(value: &GroupMetadataValue, version: i16) -> GroupMetadataValue {
        let mut value = value.clone();
        if version < 2 {
            value.current_state_timestamp_ms = -1;
        }
        for m in &mut value.members {
            if version < 1 {
                m.rebalance_timeout_ms = -1;
            }
            if version < 3 {
                m.group_instance_id = None;
            }
        }
        value
    }

    #[test]
    fn golden_group_metadata_value_v3_is_the_default() {
        let golden = cat(&[
            &[0, 3], // version
            &group_head(),
            &be_i64(1000), // currentStateTimestamp (2+)
            &be_i32(1),    // members: int32 count
            &member_bytes(3),
        ]);
        assert_eq!(group_value().encode().unwrap(), golden);
        assert_eq!(GroupMetadataValue::decode(&golden).unwrap(), group_value());
    }

    #[test]
    fn golden_group_metadata_value_v0_to_v2() {
        for version in 0i16..=2 {
            let timestamp: &[u8] = if version >= 2 { &be_i64(1000) } else { &[] };
            let golden = cat(&[
                &version.to_be_bytes(),
                &group_head(),
                timestamp,
                &be_i32(1),
                &member_bytes(version),
            ]);
            assert_eq!(
                group_value().encode_in(version).unwrap(),
                golden,
                "v{version}"
            );
            assert_eq!(
                GroupMetadataValue::decode(&golden).unwrap(),
                as_read_in(&group_value(), version),
                "v{version}"
            );
        }
    }

    #[test]
    fn golden_group_metadata_value_v4_flexible() {
        let golden = cat(&[
            &[0, 4], // version
            &[9],
            b"consumer", // protocolType: compact length + 1
            &be_i32(5),  // generation
            &[6],
            b"range", // protocol
            &[3],
            b"m1",         // leader
            &be_i64(1000), // currentStateTimestamp
            &[2],          // members: compact count + 1
            &[3],
            b"m1", // memberId
            &[2],
            b"i", // groupInstanceId
            &[2],
            b"c", // clientId
            &[3],
            b"/h",            // clientHost
            &be_i32(300_000), // rebalanceTimeout
            &be_i32(45_000),  // sessionTimeout
            &[3, 1, 2],       // subscription: compact length + 1
            &[2, 3],          // assignment
            &[0],             // the member's tagged fields
            &[0],             // the group's tagged fields
        ]);
        assert_eq!(group_value().encode_in(4).unwrap(), golden);
        assert_eq!(GroupMetadataValue::decode(&golden).unwrap(), group_value());
    }

    #[test]
    fn golden_empty_group_as_kafka_writes_it() {
        // GroupCoordinatorRecordHelpers.newEmptyGroupMetadataRecord: no protocol type, no
        // protocol or leader, generation 0, no members.
        let value = GroupMetadataValue {
            protocol_type: String::new(),
            generation: 0,
            protocol: None,
            leader: None,
            current_state_timestamp_ms: 1000,
            members: Vec::new(),
        };
        let golden = cat(&[
            &[0, 3],
            &[0, 0],       // protocolType ""
            &be_i32(0),    // generation
            &[0xff, 0xff], // protocol: null
            &[0xff, 0xff], // leader: null
            &be_i64(1000),
            &be_i32(0), // no members
        ]);
        assert_eq!(value.encode().unwrap(), golden);
        assert_eq!(GroupMetadataValue::decode(&golden).unwrap(), value);
    }

    #[test]
    fn group_metadata_value_errors_name_the_problem() {
        // A member count no bytes could hold is refused before anything is allocated.
        let bytes = cat(&[&[0, 3], &group_head(), &be_i64(1000), &be_i32(i32::MAX)]);
        let err = GroupMetadataValue::decode(&bytes).unwrap_err();
        assert!(matches!(
            &err,
            RecordsError::Decode(DecodeError {
                kind: DecodeErrorKind::CountTooLarge { .. },
                ..
            })
        ));
        assert!(
            err.to_string().contains("GroupMetadataValue.members"),
            "{err}"
        );

        // A null protocol type, which the schema does not allow.
        let bytes = cat(&[&[0, 3], &[0xff, 0xff]]);
        let err = GroupMetadataValue::decode(&bytes).unwrap_err();
        assert!(matches!(
            &err,
            RecordsError::Decode(DecodeError {
                kind: DecodeErrorKind::NullNotAllowed,
                ..
            })
        ));

        // A member field truncated: the path names it.
        let golden = group_value().encode().unwrap();
        let err = GroupMetadataValue::decode(&golden[..golden.len() - 1]).unwrap_err();
        assert!(
            err.to_string()
                .contains("GroupMetadataValue.members[0].assignment"),
            "{err}"
        );

        assert_eq!(
            GroupMetadataValue::decode(&[0, 5]),
            Err(RecordsError::UnknownValueVersion {
                record: "GroupMetadataValue",
                version: 5
            })
        );
    }

    // --- properties -----------------------------------------------------------------------

    fn arb_string() -> impl Strategy<Value = String> {
        ".{0,12}"
    }

    fn arb_bytes() -> impl Strategy<Value = Bytes> {
        proptest::collection::vec(any::<u8>(), 0..16).prop_map(Bytes::from)
    }

    fn arb_key() -> impl Strategy<Value = CoordinatorKey> {
        prop_oneof![
            (arb_string(), arb_string(), any::<i32>()).prop_map(|(group, topic, partition)| {
                CoordinatorKey::OffsetCommit {
                    group,
                    topic,
                    partition,
                }
            }),
            arb_string().prop_map(|group| CoordinatorKey::GroupMetadata { group }),
        ]
    }

    fn arb_offset_value() -> impl Strategy<Value = OffsetCommitValue> {
        (
            any::<i64>(),
            any::<i32>(),
            arb_string(),
            any::<i64>(),
            proptest::option::of(any::<i64>().prop_filter("-1 is Kafka's none", |t| *t != -1)),
        )
            .prop_map(
                |(offset, leader_epoch, metadata, commit_timestamp_ms, expire_timestamp_ms)| {
                    OffsetCommitValue {
                        offset,
                        // Version 1, written when an expire timestamp is set, has no epoch.
                        leader_epoch: if expire_timestamp_ms.is_some() {
                            -1
                        } else {
                            leader_epoch
                        },
                        metadata,
                        commit_timestamp_ms,
                        expire_timestamp_ms,
                    }
                },
            )
    }

    fn arb_member() -> impl Strategy<Value = MemberMetadata> {
        (
            (arb_string(), proptest::option::of(arb_string())),
            (arb_string(), arb_string()),
            (any::<i32>(), any::<i32>()),
            (arb_bytes(), arb_bytes()),
        )
            .prop_map(
                |(
                    (member_id, group_instance_id),
                    (client_id, client_host),
                    (rebalance_timeout_ms, session_timeout_ms),
                    (subscription, assignment),
                )| MemberMetadata {
                    member_id,
                    group_instance_id,
                    client_id,
                    client_host,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    subscription,
                    assignment,
                },
            )
    }

    fn arb_group_value() -> impl Strategy<Value = GroupMetadataValue> {
        (
            arb_string(),
            any::<i32>(),
            proptest::option::of(arb_string()),
            proptest::option::of(arb_string()),
            any::<i64>(),
            proptest::collection::vec(arb_member(), 0..4),
        )
            .prop_map(
                |(protocol_type, generation, protocol, leader, ts, members)| GroupMetadataValue {
                    protocol_type,
                    generation,
                    protocol,
                    leader,
                    current_state_timestamp_ms: ts,
                    members,
                },
            )
    }

    proptest! {
        #[test]
        fn keys_round_trip(key in arb_key()) {
            let bytes = key.encode().unwrap();
            prop_assert_eq!(CoordinatorKey::decode(&bytes).unwrap(), key);
        }

        #[test]
        fn offset_values_round_trip(value in arb_offset_value()) {
            let bytes = value.encode().unwrap();
            prop_assert_eq!(i16::from_be_bytes([bytes[0], bytes[1]]), value.version());
            prop_assert_eq!(OffsetCommitValue::decode(&bytes).unwrap(), value.clone());
            // The flexible version holds every field but the expire timestamp.
            if value.expire_timestamp_ms.is_none() {
                let v4 = value.encode_in(4).unwrap();
                prop_assert_eq!(OffsetCommitValue::decode(&v4).unwrap(), value);
            }
        }

        #[test]
        fn group_values_round_trip_in_every_version(value in arb_group_value()) {
            let bytes = value.encode().unwrap();
            prop_assert_eq!(GroupMetadataValue::decode(&bytes).unwrap(), value.clone());
            for version in 0i16..=4 {
                let bytes = value.encode_in(version).unwrap();
                let expected = as_read_in(&value, version);
                prop_assert_eq!(GroupMetadataValue::decode(&bytes).unwrap(), expected);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = CoordinatorKey::decode(&bytes);
            let _ = OffsetCommitValue::decode(&bytes);
            let _ = GroupMetadataValue::decode(&bytes);
        }

        #[test]
        fn damaged_records_never_panic(
            value in arb_group_value(),
            version in 0i16..=4,
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            cut in any::<prop::sample::Index>(),
        ) {
            // Valid records with one byte changed and cut short reach deeper than random
            // bytes do.
            let mut bytes = value.encode_in(version).unwrap().to_vec();
            let i = at.index(bytes.len());
            bytes[i] = byte;
            let bytes = &bytes[..cut.index(bytes.len() + 1)];
            let _ = GroupMetadataValue::decode(bytes);
            let _ = OffsetCommitValue::decode(bytes);
            let _ = CoordinatorKey::decode(bytes);
        }
    }
}
