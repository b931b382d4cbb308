//! Strong types for the Kafka concepts that the wire carries as bare integers: offsets, leader
//! epochs, producer ids and epochs, node ids, and topic ids.
//!
//! This module owns the newtypes and Kafka's sentinel values for them. The codec's wire types
//! for them live in [`super::wire::kt`] and encode each exactly as its underlying integer.
//!
//! Invariants:
//! - Each type is a transparent wrapper: any value of the underlying integer is a valid value
//!   (a peer may send any), so construction never fails and never checks.
//! - No arithmetic operators: code that computes with an offset or epoch says so with `.0`,
//!   which keeps mixing an offset with a count or an epoch with an id a visible decision.

use std::fmt;

use super::wire;

/// A topic's id: a Kafka UUID, all zero meaning "no id".
pub type TopicId = wire::Uuid;

macro_rules! strong_int {
    ($(#[$m:meta])* $name:ident($inner:ty)) => {
        $(#[$m])*
        #[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub $inner);

        impl $name {
            /// The underlying integer, as the wire carries it.
            pub const fn get(self) -> $inner {
                self.0
            }
        }

        impl From<$inner> for $name {
            fn from(value: $inner) -> Self {
                $name(value)
            }
        }

        impl From<$name> for $inner {
            fn from(value: $name) -> Self {
                value.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

strong_int!(
    /// The position of a record in a partition's log (Kafka's int64 offsets).
    Offset(i64)
);

impl Offset {
    /// "No offset" or "unknown": Kafka's -1 (e.g. ListOffsets' unknown offset, a fetch
    /// response's unknown last stable offset, an offset commit that clears a position).
    pub const NONE: Offset = Offset(-1);
}

strong_int!(
    /// The epoch of a partition's leadership (KIP-101), or of a KRaft quorum's leader.
    LeaderEpoch(i32)
);

impl LeaderEpoch {
    /// "No epoch" or "unknown": Kafka's -1 (`RecordBatch.NO_PARTITION_LEADER_EPOCH`).
    pub const NONE: LeaderEpoch = LeaderEpoch(-1);
}

strong_int!(
    /// The id of an idempotent or transactional producer (KIP-98).
    ProducerId(i64)
);

impl ProducerId {
    /// "No producer id": Kafka's -1 (`RecordBatch.NO_PRODUCER_ID`).
    pub const NONE: ProducerId = ProducerId(-1);
}

strong_int!(
    /// The epoch of a producer id, bumped to fence older instances of a producer.
    ProducerEpoch(i16)
);

impl ProducerEpoch {
    /// "No producer epoch": Kafka's -1 (`RecordBatch.NO_PRODUCER_EPOCH`).
    pub const NONE: ProducerEpoch = ProducerEpoch(-1);
}

strong_int!(
    /// The id of a broker or controller node (`node.id`); replica ids are node ids.
    NodeId(i32)
);

impl NodeId {
    /// "No node": Kafka's -1, e.g. an unknown leader, or a consumer's replica id.
    pub const NONE: NodeId = NodeId(-1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinels_are_kafkas_minus_one() {
        assert_eq!(Offset::NONE.get(), -1);
        assert_eq!(LeaderEpoch::NONE.get(), -1);
        assert_eq!(ProducerId::NONE.get(), -1);
        assert_eq!(ProducerEpoch::NONE.get(), -1);
        assert_eq!(NodeId::NONE.get(), -1);
    }

    #[test]
    fn conversions_round_trip_and_display_shows_the_integer() {
        assert_eq!(i64::from(Offset::from(42)), 42);
        assert_eq!(i32::from(NodeId::from(-7)), -7);
        assert_eq!(Offset(17).to_string(), "17");
        assert_eq!(LeaderEpoch(-1).to_string(), "-1");
        assert!(Offset(3) < Offset(4));
    }

    /// The strong wire types must be byte-for-byte their integers, arrays included, in both
    /// the classic and the compact forms.
    #[test]
    fn wire_types_encode_as_their_integers() {
        use bytes::BytesMut;
        use wire::{kt, Ctx, Reader, WireType};

        for compact in [false, true] {
            let ctx = Ctx {
                version: 0,
                compact,
                nullable: false,
            };
            let ids = vec![NodeId(1), NodeId::NONE, NodeId(i32::MAX)];
            let mut strong = BytesMut::new();
            kt::Array::<kt::NodeId>::encode(&ids, &mut strong, ctx).unwrap();
            let mut plain = BytesMut::new();
            kt::Array::<kt::Int32>::encode(&vec![1, -1, i32::MAX], &mut plain, ctx).unwrap();
            assert_eq!(strong, plain);
            assert_eq!(
                kt::Array::<kt::NodeId>::encoded_len(&ids, ctx),
                strong.len()
            );
            let back = kt::Array::<kt::NodeId>::decode(&mut Reader::new(strong.freeze()), ctx);
            assert_eq!(back.unwrap(), ids);
        }

        let ctx = Ctx {
            version: 0,
            compact: false,
            nullable: false,
        };
        let mut out = BytesMut::new();
        kt::Offset::encode(&Offset(0x0102_0304_0506_0708), &mut out, ctx).unwrap();
        kt::LeaderEpoch::encode(&LeaderEpoch(-1), &mut out, ctx).unwrap();
        kt::ProducerId::encode(&ProducerId(7), &mut out, ctx).unwrap();
        kt::ProducerEpoch::encode(&ProducerEpoch(3), &mut out, ctx).unwrap();
        assert_eq!(
            &out[..],
            &[1, 2, 3, 4, 5, 6, 7, 8, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 7, 0, 3][..]
        );
        assert_eq!(kt::Offset::default_value(), Offset(0));
    }
}
