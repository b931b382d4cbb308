//! Kafka's metadata records: what the controller writes to the metadata log and every node
//! applies to its metadata image. Each record type is described once from Kafka's published
//! schemas (`metadata/src/main/resources/common/metadata/*.json`), under Kafka's names and
//! field layouts, with the project's declarative codec ([`crate::message!`]).
//!
//! In the log a metadata record is the value of a data record (no key) in an ordinary record
//! batch, framed as Kafka's `MetadataRecordSerde` frames it:
//!
//! | bytes | field |
//! |---|---|
//! | unsigned varint | frame version, always 1 (0 was KRaft's preview in 2.8 and is refused) |
//! | unsigned varint | the record type (the schema's `apiKey`, [`MetadataRecordType`]) |
//! | unsigned varint | the record's version |
//! | the rest | the record at that version (every version is flexible: compact strings and arrays, tagged fields) |
//!
//! Versions written are those of metadata.version 3.9-IV0 ([`METADATA_VERSION_LEVEL`]):
//! RegisterBrokerRecord v3, PartitionRecord v1, PartitionChangeRecord v1, and
//! BrokerRegistrationChangeRecord v0, v1 or v2 as Kafka picks them (v1 only to enter controlled
//! shutdown, v2 only to change log directories). A PartitionRecord or PartitionChangeRecord
//! that carries an ELR or last known ELR (KIP-966) is written at v2, the first version that
//! has them: the field must not be dropped, or the committed record would differ from the
//! one the controller applied. Every version a schema defines is read.
//!
//! Invariants: decoding never panics and never allocates beyond what the bytes justify (the
//! codec's rule); a frame must be consumed exactly ("garbage after" otherwise, as Kafka); an
//! encoded record always decodes to itself.

use bytes::{Bytes, BytesMut};

use crate::message;
use crate::protocol::record_batch::{unsigned_varint_len, write_unsigned_varint};
use crate::protocol::wire::{kt, DecodeError, Reader, Uuid};

/// The metadata.version feature level Samsa's controller finalizes: 3.9-IV0. It decides the
/// record versions written (module docs).
pub const METADATA_VERSION_LEVEL: i16 = 21;
/// The feature name of the metadata version.
pub const METADATA_VERSION_FEATURE: &str = "metadata.version";
/// The lowest metadata.version level that is read (3.3-IV0, Kafka's bootstrap minimum).
pub const METADATA_VERSION_LEVEL_MIN: i16 = 4;
/// The frame version of every record (Kafka's `DEFAULT_FRAME_VERSION`).
pub const FRAME_VERSION: u32 = 1;

/// Kafka's `ConfigResource.Type` values a ConfigRecord names.
pub const CONFIG_RESOURCE_TOPIC: i8 = 2;
pub const CONFIG_RESOURCE_BROKER: i8 = 4;

/// BrokerRegistrationChangeRecord's `Fenced`: -1 unfences, 1 fences, 0 leaves it.
pub const FENCED_CHANGE_UNFENCE: i8 = -1;
pub const FENCED_CHANGE_NONE: i8 = 0;
pub const FENCED_CHANGE_FENCE: i8 = 1;

/// PartitionChangeRecord's `Leader`: -2 leaves it, -1 means no leader.
pub const LEADER_UNCHANGED: i32 = -2;
pub const NO_LEADER: i32 = -1;

/// A partition's `LeaderRecoveryState`: RECOVERED, or RECOVERING after an unclean election
/// until its leader says it recovered (KIP-704).
pub const LEADER_RECOVERY_RECOVERED: i8 = 0;
pub const LEADER_RECOVERY_RECOVERING: i8 = 1;

/// Kafka's reserved directory ids (`DirectoryId`): a replica whose directory is not known.
pub const DIRECTORY_MIGRATING: Uuid = Uuid([0; 16]);
pub const DIRECTORY_UNASSIGNED: Uuid = Uuid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);

message! {
    /// A listener of a registered broker.
    pub struct BrokerEndpoint {
        versions: (0-3),
        flexible: (0+),
        fields {
            /// The listener name.
            name: kt::String, versions(0+);
            /// The hostname.
            host: kt::String, versions(0+);
            /// The port.
            port: kt::Uint16, versions(0+);
            /// The security protocol (0 PLAINTEXT).
            security_protocol: kt::Int16, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// A feature range a registered broker supports.
    pub struct BrokerFeature {
        versions: (0-3),
        flexible: (0+),
        fields {
            /// The feature name.
            name: kt::String, versions(0+);
            /// The lowest supported level.
            min_supported_version: kt::Int16, versions(0+);
            /// The highest supported level.
            max_supported_version: kt::Int16, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// RegisterBrokerRecord (type 0): a broker's registration, written when it registers.
    pub struct RegisterBrokerRecord {
        versions: (0-3),
        flexible: (0+),
        fields {
            /// The broker id.
            broker_id: kt::Int32, versions(0+);
            /// True if the broker is a ZooKeeper broker in migration (never, here).
            is_migrating_zk_broker: kt::Bool, versions(2+);
            /// The incarnation id of the broker process.
            incarnation_id: kt::Uuid, versions(0+);
            /// The broker epoch assigned by the controller.
            broker_epoch: kt::Int64, versions(0+);
            /// The broker's listeners.
            end_points: kt::Array<BrokerEndpoint>, versions(0+);
            /// The features the broker supports.
            features: kt::Array<BrokerFeature>, versions(0+);
            /// The broker's rack, or null.
            rack: kt::NullableString, versions(0+), nullable(0+);
            /// True if the broker is fenced.
            fenced: kt::Bool = true, versions(0+);
            /// True if the broker is in controlled shutdown.
            in_controlled_shutdown: kt::Bool, versions(1+);
        }
        tagged {
            /// The broker's log directories.
            0 => log_dirs: kt::Array<kt::Uuid>, versions(3+);
        }
    }
}

message! {
    /// UnregisterBrokerRecord (type 1).
    pub struct UnregisterBrokerRecord {
        versions: (0-0),
        flexible: (0+),
        fields {
            broker_id: kt::Int32, versions(0+);
            broker_epoch: kt::Int64, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// TopicRecord (type 2): a topic's name and id.
    pub struct TopicRecord {
        versions: (0-0),
        flexible: (0+),
        fields {
            name: kt::String, versions(0+);
            topic_id: kt::Uuid, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// PartitionRecord (type 3): a partition of a topic, whole.
    pub struct PartitionRecord {
        versions: (0-2),
        flexible: (0+),
        fields {
            partition_id: kt::Int32 = -1, versions(0+);
            topic_id: kt::Uuid, versions(0+);
            /// The replicas, preferred leader first.
            replicas: kt::Array<kt::Int32>, versions(0+);
            /// The in-sync replicas.
            isr: kt::Array<kt::Int32>, versions(0+);
            /// Replicas being removed by a reassignment.
            removing_replicas: kt::Array<kt::Int32>, versions(0+);
            /// Replicas being added by a reassignment.
            adding_replicas: kt::Array<kt::Int32>, versions(0+);
            /// The leader, or -1.
            leader: kt::Int32 = -1, versions(0+);
            leader_epoch: kt::Int32 = -1, versions(0+);
            partition_epoch: kt::Int32 = -1, versions(0+);
            /// The log directory of each replica, in replica order (KIP-858).
            directories: kt::Array<kt::Uuid>, versions(1+);
        }
        tagged {
            /// 0 RECOVERED, 1 RECOVERING.
            0 => leader_recovery_state: kt::Int8 = 0, versions(0+);
            /// KIP-966's eligible leader replicas.
            1 => eligible_leader_replicas: kt::NullableArray<kt::Int32> = None, versions(2+), nullable(2+);
            /// KIP-966's last known ELR.
            2 => last_known_elr: kt::NullableArray<kt::Int32> = None, versions(2+), nullable(2+);
        }
    }
}

message! {
    /// ConfigRecord (type 4): a config of a resource set (or removed, with a null value).
    pub struct ConfigRecord {
        versions: (0-0),
        flexible: (0+),
        fields {
            /// [`CONFIG_RESOURCE_TOPIC`] or [`CONFIG_RESOURCE_BROKER`].
            resource_type: kt::Int8, versions(0+);
            /// The topic, the broker id, or "" for the cluster-wide broker default.
            resource_name: kt::String, versions(0+);
            name: kt::String, versions(0+);
            /// The value; null removes the config.
            value: kt::NullableString, versions(0+), nullable(0+);
        }
        tagged {}
    }
}

message! {
    /// PartitionChangeRecord (type 5): what changed in a partition; a field at its default
    /// did not change.
    pub struct PartitionChangeRecord {
        versions: (0-2),
        flexible: (0+),
        fields {
            partition_id: kt::Int32 = -1, versions(0+);
            topic_id: kt::Uuid, versions(0+);
        }
        tagged {
            0 => isr: kt::NullableArray<kt::Int32> = None, versions(0+), nullable(0+);
            /// [`LEADER_UNCHANGED`], [`NO_LEADER`] or the new leader.
            1 => leader: kt::Int32 = LEADER_UNCHANGED, versions(0+);
            2 => replicas: kt::NullableArray<kt::Int32> = None, versions(0+), nullable(0+);
            3 => removing_replicas: kt::NullableArray<kt::Int32> = None, versions(0+), nullable(0+);
            4 => adding_replicas: kt::NullableArray<kt::Int32> = None, versions(0+), nullable(0+);
            /// -1 unchanged, 0 RECOVERED, 1 RECOVERING.
            5 => leader_recovery_state: kt::Int8 = -1, versions(0+);
            6 => eligible_leader_replicas: kt::NullableArray<kt::Int32> = None, versions(2+), nullable(2+);
            7 => last_known_elr: kt::NullableArray<kt::Int32> = None, versions(2+), nullable(2+);
            8 => directories: kt::NullableArray<kt::Uuid> = None, versions(1+), nullable(1+);
        }
    }
}

message! {
    /// FenceBrokerRecord (type 7), written before metadata.version 3.3-IV2.
    pub struct FenceBrokerRecord {
        versions: (0-0),
        flexible: (0+),
        fields {
            id: kt::Int32, versions(0+);
            epoch: kt::Int64, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// UnfenceBrokerRecord (type 8), written before metadata.version 3.3-IV2.
    pub struct UnfenceBrokerRecord {
        versions: (0-0),
        flexible: (0+),
        fields {
            id: kt::Int32, versions(0+);
            epoch: kt::Int64, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// RemoveTopicRecord (type 9): the topic, its partitions and its configs go.
    pub struct RemoveTopicRecord {
        versions: (0-0),
        flexible: (0+),
        fields {
            topic_id: kt::Uuid, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// FeatureLevelRecord (type 12): a finalized feature level (0 removes the feature).
    pub struct FeatureLevelRecord {
        versions: (0-0),
        flexible: (0+),
        fields {
            name: kt::String, versions(0+);
            feature_level: kt::Int16, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// ProducerIdsRecord (type 15): a block of producer ids was handed out; the next block
    /// starts at `next_producer_id`.
    pub struct ProducerIdsRecord {
        versions: (0-0),
        flexible: (0+),
        fields {
            broker_id: kt::Int32, versions(0+);
            broker_epoch: kt::Int64 = -1, versions(0+);
            next_producer_id: kt::Int64, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// BrokerRegistrationChangeRecord (type 17): a registered broker was fenced, unfenced or
    /// entered controlled shutdown.
    pub struct BrokerRegistrationChangeRecord {
        versions: (0-2),
        flexible: (0+),
        fields {
            broker_id: kt::Int32, versions(0+);
            broker_epoch: kt::Int64, versions(0+);
        }
        tagged {
            /// [`FENCED_CHANGE_UNFENCE`], [`FENCED_CHANGE_NONE`] or [`FENCED_CHANGE_FENCE`].
            0 => fenced: kt::Int8 = 0, versions(0+);
            /// 1: the broker entered controlled shutdown; 0: no change.
            1 => in_controlled_shutdown: kt::Int8 = 0, versions(1+);
            2 => log_dirs: kt::Array<kt::Uuid>, versions(2+);
        }
    }
}

message! {
    /// NoOpRecord (type 20): moves the log on (the controller writes one when idle).
    pub struct NoOpRecord {
        versions: (0-0),
        flexible: (0+),
        fields {}
        tagged {}
    }
}

message! {
    /// BeginTransactionRecord (type 23): the records up to EndTransactionRecord apply together.
    pub struct BeginTransactionRecord {
        versions: (0-0),
        flexible: (0+),
        fields {}
        tagged {
            0 => name: kt::NullableString = None, versions(0+), nullable(0+);
        }
    }
}

message! {
    /// EndTransactionRecord (type 24).
    pub struct EndTransactionRecord {
        versions: (0-0),
        flexible: (0+),
        fields {}
        tagged {}
    }
}

message! {
    /// AbortTransactionRecord (type 25): the records since BeginTransactionRecord do not apply.
    pub struct AbortTransactionRecord {
        versions: (0-0),
        flexible: (0+),
        fields {}
        tagged {
            0 => reason: kt::NullableString = None, versions(0+), nullable(0+);
        }
    }
}

/// The record types (Kafka's `MetadataRecordType` ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(i16)]
pub enum MetadataRecordType {
    RegisterBroker = 0,
    UnregisterBroker = 1,
    Topic = 2,
    Partition = 3,
    Config = 4,
    PartitionChange = 5,
    FenceBroker = 7,
    UnfenceBroker = 8,
    RemoveTopic = 9,
    FeatureLevel = 12,
    ProducerIds = 15,
    BrokerRegistrationChange = 17,
    NoOp = 20,
    BeginTransaction = 23,
    EndTransaction = 24,
    AbortTransaction = 25,
}

/// One metadata record.
#[derive(Clone, Debug, PartialEq)]
pub enum MetadataRecord {
    RegisterBroker(RegisterBrokerRecord),
    UnregisterBroker(UnregisterBrokerRecord),
    Topic(TopicRecord),
    Partition(PartitionRecord),
    Config(ConfigRecord),
    PartitionChange(PartitionChangeRecord),
    FenceBroker(FenceBrokerRecord),
    UnfenceBroker(UnfenceBrokerRecord),
    RemoveTopic(RemoveTopicRecord),
    FeatureLevel(FeatureLevelRecord),
    ProducerIds(ProducerIdsRecord),
    BrokerRegistrationChange(BrokerRegistrationChangeRecord),
    NoOp(NoOpRecord),
    BeginTransaction(BeginTransactionRecord),
    EndTransaction(EndTransactionRecord),
    AbortTransaction(AbortTransactionRecord),
}

/// Why bytes are not a metadata record.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordError {
    /// A frame version other than 1.
    FrameVersion(u32),
    /// A record type this node does not know (Kafka's ACL, quota, SCRAM and delegation-token
    /// records among them: Samsa does not keep those yet).
    UnknownType(u32),
    /// A version the record's schema does not define.
    UnknownVersion { record_type: u32, version: u32 },
    /// The frame or the record does not decode.
    Decode(DecodeError),
    /// Bytes after the record.
    Garbage {
        record_type: MetadataRecordType,
        bytes: usize,
    },
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::FrameVersion(v) => write!(
                f,
                "a metadata record of frame version {v} (only frame version {FRAME_VERSION} is \
                 read; 0 was KRaft's preview release)"
            ),
            RecordError::UnknownType(t) => write!(f, "a metadata record of unknown type {t}"),
            RecordError::UnknownVersion {
                record_type,
                version,
            } => write!(
                f,
                "a metadata record of type {record_type} at version {version}, which its \
                 schema does not define"
            ),
            RecordError::Decode(e) => write!(f, "a metadata record that does not decode: {e}"),
            RecordError::Garbage { record_type, bytes } => write!(
                f,
                "{bytes} byte(s) of garbage after a {record_type:?} record"
            ),
        }
    }
}

impl std::error::Error for RecordError {}

impl MetadataRecordType {
    pub fn from_id(id: u32) -> Option<MetadataRecordType> {
        use MetadataRecordType as T;
        Some(match id {
            0 => T::RegisterBroker,
            1 => T::UnregisterBroker,
            2 => T::Topic,
            3 => T::Partition,
            4 => T::Config,
            5 => T::PartitionChange,
            7 => T::FenceBroker,
            8 => T::UnfenceBroker,
            9 => T::RemoveTopic,
            12 => T::FeatureLevel,
            15 => T::ProducerIds,
            17 => T::BrokerRegistrationChange,
            20 => T::NoOp,
            23 => T::BeginTransaction,
            24 => T::EndTransaction,
            25 => T::AbortTransaction,
            _ => return None,
        })
    }

    /// The highest version of the record's schema.
    pub fn version_max(self) -> i16 {
        use MetadataRecordType as T;
        match self {
            T::RegisterBroker => 3,
            T::Partition | T::PartitionChange | T::BrokerRegistrationChange => 2,
            _ => 0,
        }
    }
}

/// Calls `$body` with the record inside `$record` bound to `$inner`, whatever its type.
macro_rules! each_record {
    ($record:expr, $inner:ident => $body:expr) => {
        match $record {
            MetadataRecord::RegisterBroker($inner) => $body,
            MetadataRecord::UnregisterBroker($inner) => $body,
            MetadataRecord::Topic($inner) => $body,
            MetadataRecord::Partition($inner) => $body,
            MetadataRecord::Config($inner) => $body,
            MetadataRecord::PartitionChange($inner) => $body,
            MetadataRecord::FenceBroker($inner) => $body,
            MetadataRecord::UnfenceBroker($inner) => $body,
            MetadataRecord::RemoveTopic($inner) => $body,
            MetadataRecord::FeatureLevel($inner) => $body,
            MetadataRecord::ProducerIds($inner) => $body,
            MetadataRecord::BrokerRegistrationChange($inner) => $body,
            MetadataRecord::NoOp($inner) => $body,
            MetadataRecord::BeginTransaction($inner) => $body,
            MetadataRecord::EndTransaction($inner) => $body,
            MetadataRecord::AbortTransaction($inner) => $body,
        }
    };
}

impl MetadataRecord {
    pub fn record_type(&self) -> MetadataRecordType {
        use MetadataRecordType as T;
        match self {
            MetadataRecord::RegisterBroker(_) => T::RegisterBroker,
            MetadataRecord::UnregisterBroker(_) => T::UnregisterBroker,
            MetadataRecord::Topic(_) => T::Topic,
            MetadataRecord::Partition(_) => T::Partition,
            MetadataRecord::Config(_) => T::Config,
            MetadataRecord::PartitionChange(_) => T::PartitionChange,
            MetadataRecord::FenceBroker(_) => T::FenceBroker,
            MetadataRecord::UnfenceBroker(_) => T::UnfenceBroker,
            MetadataRecord::RemoveTopic(_) => T::RemoveTopic,
            MetadataRecord::FeatureLevel(_) => T::FeatureLevel,
            MetadataRecord::ProducerIds(_) => T::ProducerIds,
            MetadataRecord::BrokerRegistrationChange(_) => T::BrokerRegistrationChange,
            MetadataRecord::NoOp(_) => T::NoOp,
            MetadataRecord::BeginTransaction(_) => T::BeginTransaction,
            MetadataRecord::EndTransaction(_) => T::EndTransaction,
            MetadataRecord::AbortTransaction(_) => T::AbortTransaction,
        }
    }

    /// The version this record is written at (metadata.version 3.9-IV0's choice).
    pub fn version(&self) -> i16 {
        match self {
            MetadataRecord::RegisterBroker(_) => 3,
            MetadataRecord::Partition(r)
                if r.eligible_leader_replicas.is_some() || r.last_known_elr.is_some() =>
            {
                2
            }
            MetadataRecord::PartitionChange(r)
                if r.eligible_leader_replicas.is_some() || r.last_known_elr.is_some() =>
            {
                2
            }
            MetadataRecord::Partition(_) | MetadataRecord::PartitionChange(_) => 1,
            MetadataRecord::BrokerRegistrationChange(r) if !r.log_dirs.is_empty() => 2,
            MetadataRecord::BrokerRegistrationChange(r) if r.in_controlled_shutdown != 0 => 1,
            _ => 0,
        }
    }

    /// The exact length of [`MetadataRecord::encode`]'s bytes, without encoding.
    pub fn encoded_len(&self) -> usize {
        let version = self.version();
        unsigned_varint_len(FRAME_VERSION)
            + unsigned_varint_len(self.record_type() as u32)
            + unsigned_varint_len(version as u32)
            + each_record!(self, r => r.encoded_len(version))
    }

    /// The record framed for the log (module docs).
    pub fn encode(&self) -> Bytes {
        let version = self.version();
        let record_type = self.record_type() as u32;
        let len = self.encoded_len();
        let mut out = BytesMut::with_capacity(len);
        write_unsigned_varint(&mut out, FRAME_VERSION);
        write_unsigned_varint(&mut out, record_type);
        write_unsigned_varint(&mut out, version as u32);
        let encoded = each_record!(self, r => r.encode(&mut out, version));
        // Every record here is built by the controller from its own validated values (ids,
        // bounded strings and arrays), which always encode at their version.
        if let Err(e) = encoded {
            panic!("encoding a {:?} record: {e}", self.record_type());
        }
        assert_eq!(out.len(), len, "encoded_len is exact");
        out.freeze()
    }

    /// A framed record, as read from the log.
    pub fn decode(bytes: Bytes) -> Result<MetadataRecord, RecordError> {
        let mut r = Reader::new(bytes);
        let frame = r.unsigned_varint().map_err(RecordError::Decode)?;
        if frame != FRAME_VERSION {
            return Err(RecordError::FrameVersion(frame));
        }
        let type_id = r.unsigned_varint().map_err(RecordError::Decode)?;
        let record_type =
            MetadataRecordType::from_id(type_id).ok_or(RecordError::UnknownType(type_id))?;
        let version = r.unsigned_varint().map_err(RecordError::Decode)?;
        let version = i16::try_from(version)
            .ok()
            .filter(|v| *v <= record_type.version_max())
            .ok_or(RecordError::UnknownVersion {
                record_type: type_id,
                version,
            })?;
        use MetadataRecordType as T;
        let record = match record_type {
            T::RegisterBroker => {
                MetadataRecord::RegisterBroker(RegisterBrokerRecord::decode(&mut r, version)?)
            }
            T::UnregisterBroker => {
                MetadataRecord::UnregisterBroker(UnregisterBrokerRecord::decode(&mut r, version)?)
            }
            T::Topic => MetadataRecord::Topic(TopicRecord::decode(&mut r, version)?),
            T::Partition => MetadataRecord::Partition(PartitionRecord::decode(&mut r, version)?),
            T::Config => MetadataRecord::Config(ConfigRecord::decode(&mut r, version)?),
            T::PartitionChange => {
                MetadataRecord::PartitionChange(PartitionChangeRecord::decode(&mut r, version)?)
            }
            T::FenceBroker => {
                MetadataRecord::FenceBroker(FenceBrokerRecord::decode(&mut r, version)?)
            }
            T::UnfenceBroker => {
                MetadataRecord::UnfenceBroker(UnfenceBrokerRecord::decode(&mut r, version)?)
            }
            T::RemoveTopic => {
                MetadataRecord::RemoveTopic(RemoveTopicRecord::decode(&mut r, version)?)
            }
            T::FeatureLevel => {
                MetadataRecord::FeatureLevel(FeatureLevelRecord::decode(&mut r, version)?)
            }
            T::ProducerIds => {
                MetadataRecord::ProducerIds(ProducerIdsRecord::decode(&mut r, version)?)
            }
            T::BrokerRegistrationChange => MetadataRecord::BrokerRegistrationChange(
                BrokerRegistrationChangeRecord::decode(&mut r, version)?,
            ),
            T::NoOp => MetadataRecord::NoOp(NoOpRecord::decode(&mut r, version)?),
            T::BeginTransaction => {
                MetadataRecord::BeginTransaction(BeginTransactionRecord::decode(&mut r, version)?)
            }
            T::EndTransaction => {
                MetadataRecord::EndTransaction(EndTransactionRecord::decode(&mut r, version)?)
            }
            T::AbortTransaction => {
                MetadataRecord::AbortTransaction(AbortTransactionRecord::decode(&mut r, version)?)
            }
        };
        if r.remaining() > 0 {
            return Err(RecordError::Garbage {
                record_type,
                bytes: r.remaining(),
            });
        }
        Ok(record)
    }
}

impl From<DecodeError> for RecordError {
    fn from(e: DecodeError) -> Self {
        RecordError::Decode(e)
    }
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
