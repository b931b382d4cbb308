//! The consumer protocol: what consumer group members put in JoinGroup's protocol metadata
//! (a [`ConsumerProtocolSubscription`]) and what the leader hands each member through
//! SyncGroup (a [`ConsumerProtocolAssignment`]). The broker treats both as opaque bytes; the
//! coordinator reads subscriptions only to learn which topics a group consumes (offset
//! expiry, OffsetDelete).
//!
//! This module owns both descriptions (Kafka's `ConsumerProtocolSubscription.json` and
//! `ConsumerProtocolAssignment.json`, v0-3, never flexible) and their framing: an `int16`
//! version, then the struct. As in Kafka, a newer version than this codec knows is read as
//! the newest one it knows, ignoring what follows (new versions only append fields).

use bytes::{BufMut, Bytes, BytesMut};

use crate::message;
use crate::protocol::wire::{kt, DecodeError, DecodeErrorKind, EncodeError, Reader};

/// The newest version of both structs this codec knows (v3: KIP-881's rack id).
pub const CONSUMER_PROTOCOL_VERSION_MAX: i16 = 3;

message! {
    /// A member's subscription, the metadata of each protocol (assignor) it offers.
    pub struct ConsumerProtocolSubscription {
        versions: (0-3),
        flexible: (none),
        fields {
            /// The topics the member subscribes to.
            topics: kt::Array<kt::String>, versions(0+);
            /// The assignor's own data, or null.
            user_data: kt::NullableBytes = None, versions(0+), nullable(0+);
            /// The partitions the member owns (cooperative rebalancing, KIP-429).
            owned_partitions: kt::Array<ConsumerProtocolTopicPartition>, versions(1+),
                flags(ignorable);
            /// The generation the owned partitions belong to, or -1 (KIP-792).
            generation_id: kt::Int32 = -1, versions(2+), flags(ignorable);
            /// The member's rack, or null (KIP-881).
            rack_id: kt::NullableString = None, versions(3+), nullable(3+), flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// The partitions of one topic.
    pub struct ConsumerProtocolTopicPartition {
        versions: (0-3),
        flexible: (none),
        fields {
            /// The topic name.
            topic: kt::String, versions(0+);
            /// The partition indexes.
            partitions: kt::Array<kt::Int32>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// A member's share of the group's partitions.
    pub struct ConsumerProtocolAssignment {
        versions: (0-3),
        flexible: (none),
        fields {
            /// The partitions assigned to the member.
            assigned_partitions: kt::Array<ConsumerProtocolTopicPartition>, versions(0+);
            /// The assignor's own data, or null.
            user_data: kt::NullableBytes = None, versions(0+), nullable(0+);
        }
        tagged {}
    }
}

/// Encodes `value` as `version` behind its version prefix.
fn framed(
    version: i16,
    encoded_len: usize,
    encode: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<Bytes, EncodeError> {
    let mut out = BytesMut::with_capacity(2 + encoded_len);
    out.put_i16(version);
    encode(&mut out)?;
    Ok(out.freeze())
}

/// Reads the version prefix: a negative one is refused; a newer one is read as the newest
/// this codec knows.
fn version_of(r: &mut Reader) -> Result<i16, DecodeError> {
    let version = r.i16()?;
    if version < 0 {
        let kind = DecodeErrorKind::UnsupportedVersion {
            api_key: -1,
            version,
        };
        return Err(DecodeError::new(kind).at("version"));
    }
    Ok(version.min(CONSUMER_PROTOCOL_VERSION_MAX))
}

impl ConsumerProtocolSubscription {
    /// The subscription as JoinGroup metadata, in `version` (0-3).
    pub fn to_bytes(&self, version: i16) -> Result<Bytes, EncodeError> {
        framed(version, self.encoded_len(version), |out| {
            self.encode(out, version)
        })
    }

    /// A member's JoinGroup metadata read back; bytes after the known fields are ignored.
    pub fn from_bytes(bytes: Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let version = version_of(&mut r)?;
        Self::decode(&mut r, version)
    }
}

impl ConsumerProtocolAssignment {
    /// The assignment as SyncGroup bytes, in `version` (0-3).
    pub fn to_bytes(&self, version: i16) -> Result<Bytes, EncodeError> {
        framed(version, self.encoded_len(version), |out| {
            self.encode(out, version)
        })
    }

    /// An assignment read back; empty bytes are the empty assignment (what the coordinator
    /// answers a member the leader left out), bytes after the known fields are ignored.
    pub fn from_bytes(bytes: Bytes) -> Result<Self, DecodeError> {
        if bytes.is_empty() {
            return Ok(Self::default());
        }
        let mut r = Reader::new(bytes);
        let version = version_of(&mut r)?;
        Self::decode(&mut r, version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(topic: &str, partitions: &[i32]) -> ConsumerProtocolTopicPartition {
        ConsumerProtocolTopicPartition {
            topic: topic.into(),
            partitions: partitions.to_vec(),
        }
    }

    #[test]
    fn subscriptions_round_trip_in_every_version_and_drop_what_a_version_lacks() {
        let full = ConsumerProtocolSubscription {
            topics: vec!["a".into(), "b".into()],
            user_data: Some(Bytes::from_static(b"u")),
            owned_partitions: vec![tp("a", &[0, 2])],
            generation_id: 7,
            rack_id: Some("r1".into()),
        };
        for version in 0..=CONSUMER_PROTOCOL_VERSION_MAX {
            let back =
                ConsumerProtocolSubscription::from_bytes(full.to_bytes(version).unwrap()).unwrap();
            assert_eq!(back.topics, full.topics);
            assert_eq!(back.user_data, full.user_data);
            let owned = if version >= 1 {
                full.owned_partitions.clone()
            } else {
                vec![]
            };
            assert_eq!(back.owned_partitions, owned, "v{version}");
            assert_eq!(back.generation_id, if version >= 2 { 7 } else { -1 });
            assert_eq!(back.rack_id, (version >= 3).then(|| "r1".to_string()));
        }
    }

    /// Kafka's layout, byte by byte: v0 is the version, the topic array, the user data.
    #[test]
    fn a_v0_subscription_is_kafkas_layout() {
        let bytes = ConsumerProtocolSubscription {
            topics: vec!["t".into()],
            ..Default::default()
        }
        .to_bytes(0)
        .unwrap();
        assert_eq!(
            &bytes[..],
            &[0, 0, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff]
        );
    }

    #[test]
    fn a_newer_version_is_read_as_the_newest_known_and_its_extra_bytes_ignored() {
        let mut bytes = BytesMut::new();
        bytes.put_i16(9);
        ConsumerProtocolSubscription {
            topics: vec!["t".into()],
            generation_id: 3,
            ..Default::default()
        }
        .encode(&mut bytes, CONSUMER_PROTOCOL_VERSION_MAX)
        .unwrap();
        bytes.put_slice(b"a field from the future");
        let back = ConsumerProtocolSubscription::from_bytes(bytes.freeze()).unwrap();
        assert_eq!(back.topics, vec!["t".to_string()]);
        assert_eq!(back.generation_id, 3);
    }

    #[test]
    fn garbage_and_negative_versions_are_refused() {
        for bad in [&[0xff, 0xff][..], &[0][..], &[0, 0, 0x7f, 0, 0, 0][..]] {
            assert!(
                ConsumerProtocolSubscription::from_bytes(Bytes::copy_from_slice(bad)).is_err(),
                "{bad:?}"
            );
        }
        assert!(ConsumerProtocolAssignment::from_bytes(Bytes::from_static(&[0, 0, 0])).is_err());
    }

    #[test]
    fn assignments_round_trip_and_empty_bytes_are_the_empty_assignment() {
        let assignment = ConsumerProtocolAssignment {
            assigned_partitions: vec![tp("a", &[1]), tp("b", &[0, 3])],
            user_data: None,
        };
        for version in 0..=CONSUMER_PROTOCOL_VERSION_MAX {
            let bytes = assignment.to_bytes(version).unwrap();
            assert_eq!(
                ConsumerProtocolAssignment::from_bytes(bytes).unwrap(),
                assignment
            );
        }
        assert_eq!(
            ConsumerProtocolAssignment::from_bytes(Bytes::new()).unwrap(),
            ConsumerProtocolAssignment::default()
        );
    }
}
