//! The metadata log's records on disk and on the wire: a [`Batch`] of the core is one Kafka
//! v2 record batch, stamped with its epoch as the partition leader epoch, at its own base
//! offset. Data records are ordinary records (no key; the value is the state machine's
//! record). The other records are Kafka's control records, in a batch with the control bit
//! set, each keyed by a `ControlRecordType` (version 0, then the type) and valued by its
//! message, all flexible version 0 as Kafka writes them:
//!
//! | type | record | value fields |
//! |---|---|---|
//! | 2 | LeaderChangeMessage | Version, LeaderId, Voters [VoterId], GrantingVoters [VoterId] |
//! | 3 | SnapshotHeaderRecord (snapshot files only) | Version, LastContainedLogTimestamp |
//! | 4 | SnapshotFooterRecord (snapshot files only) | Version |
//! | 5 | KRaftVersionRecord (KIP-853) | Version, KRaftVersion |
//! | 6 | VotersRecord (KIP-853) | Version, Voters [VoterId, VoterDirectoryId, Endpoints [Name, Host, Port], KRaftVersionFeature {Min, Max}] |
//!
//! Invariants: decoding never panics on bytes a peer or a file supplied; a batch decodes to
//! exactly the records its header counts, at consecutive offsets (the metadata log is never
//! compacted, so it has no gaps); control and data records are never mixed in one batch.

use bytes::{Bytes, BytesMut};

use crate::message;
use crate::protocol::record_batch::{self, BatchBuilder, BatchError, BatchHeader, Compression};
use crate::protocol::types::NodeId;
use crate::protocol::wire::{kt, DecodeError, Uuid};

use super::election::ReplicaKey;
use super::message::{Batch, RaftRecord};

/// Kafka's control record types this log writes.
pub const LEADER_CHANGE_TYPE: i16 = 2;
pub const SNAPSHOT_HEADER_TYPE: i16 = 3;
pub const SNAPSHOT_FOOTER_TYPE: i16 = 4;
pub const KRAFT_VERSION_TYPE: i16 = 5;
pub const KRAFT_VOTERS_TYPE: i16 = 6;

message! {
    /// The key of a control record.
    pub struct ControlRecordType {
        versions: (0-0),
        flexible: (none),
        fields {
            version: kt::Int16, versions(0+);
            record_type: kt::Int16, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One voter named by a LeaderChangeMessage.
    pub struct LeaderChangeVoter {
        versions: (0-0),
        flexible: (0+),
        fields {
            voter_id: kt::NodeId, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// Kafka's LeaderChangeMessage: the first record of a leader's epoch.
    pub struct LeaderChangeMessage {
        versions: (0-0),
        flexible: (0+),
        fields {
            version: kt::Int16, versions(0+);
            leader_id: kt::NodeId, versions(0+);
            voters: kt::Array<LeaderChangeVoter>, versions(0+);
            granting_voters: kt::Array<LeaderChangeVoter>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// Kafka's SnapshotHeaderRecord: the first record of a snapshot.
    pub struct SnapshotHeaderRecord {
        versions: (0-0),
        flexible: (0+),
        fields {
            version: kt::Int16, versions(0+);
            last_contained_log_timestamp: kt::Int64, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// Kafka's SnapshotFooterRecord: the last record of a snapshot.
    pub struct SnapshotFooterRecord {
        versions: (0-0),
        flexible: (0+),
        fields {
            version: kt::Int16, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// KIP-853's KRaftVersionRecord.
    pub struct KRaftVersionRecord {
        versions: (0-0),
        flexible: (0+),
        fields {
            version: kt::Int16, versions(0+);
            kraft_version: kt::Int16, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// A listener of a voter.
    pub struct VoterEndpoint {
        versions: (0-0),
        flexible: (0+),
        fields {
            name: kt::String, versions(0+);
            host: kt::String, versions(0+);
            port: kt::Uint16, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The KRaft versions a voter supports.
    pub struct KRaftVersionFeature {
        versions: (0-0),
        flexible: (0+),
        fields {
            min_supported_version: kt::Int16, versions(0+);
            max_supported_version: kt::Int16, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One voter of a VotersRecord.
    pub struct VotersRecordVoter {
        versions: (0-0),
        flexible: (0+),
        fields {
            voter_id: kt::NodeId, versions(0+);
            voter_directory_id: kt::Uuid, versions(0+);
            endpoints: kt::Array<VoterEndpoint>, versions(0+);
            kraft_version_feature: KRaftVersionFeature, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// KIP-853's VotersRecord: the voter set.
    pub struct VotersRecord {
        versions: (0-0),
        flexible: (0+),
        fields {
            version: kt::Int16, versions(0+);
            voters: kt::Array<VotersRecordVoter>, versions(0+);
        }
        tagged {}
    }
}

/// Why bytes are not a batch of the metadata log.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordsError {
    Batch(BatchError),
    /// A control record's key or value does not decode.
    Control {
        offset: i64,
        source: DecodeError,
    },
    /// A control record of a type this log does not write.
    UnknownControlType {
        offset: i64,
        record_type: i16,
    },
    /// A control record without a key or a value, or a data record without a value.
    Missing {
        offset: i64,
        what: &'static str,
    },
    /// A batch whose records do not sit at consecutive offsets from its base offset.
    Gap {
        base_offset: i64,
        offset: i64,
        expected: i64,
    },
    /// A batch with no records.
    Empty {
        base_offset: i64,
    },
    /// A compressed batch (see [`decode_batch`]).
    Compressed {
        base_offset: i64,
    },
}

impl std::fmt::Display for RecordsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordsError::Batch(e) => write!(f, "a metadata log batch: {e}"),
            RecordsError::Control { offset, source } => {
                write!(f, "the control record at offset {offset}: {source}")
            }
            RecordsError::UnknownControlType {
                offset,
                record_type,
            } => write!(
                f,
                "the control record at offset {offset} has type {record_type}, not one the \
                 metadata log writes (2 to 6)"
            ),
            RecordsError::Missing { offset, what } => {
                write!(f, "the record at offset {offset} has no {what}")
            }
            RecordsError::Gap {
                base_offset,
                offset,
                expected,
            } => write!(
                f,
                "the batch at {base_offset} holds offset {offset} where {expected} was due"
            ),
            RecordsError::Empty { base_offset } => {
                write!(f, "the batch at {base_offset} holds no records")
            }
            RecordsError::Compressed { base_offset } => write!(
                f,
                "the batch at {base_offset} is compressed; the metadata log is not"
            ),
        }
    }
}

impl std::error::Error for RecordsError {}

fn encode_message(out: &mut BytesMut, encode: impl FnOnce(&mut BytesMut) -> Result<(), String>) {
    // Every message here is built from the core's own values (ids, small arrays), which
    // always encode; a failure is a bug in this module.
    if let Err(e) = encode(out) {
        panic!("encoding a metadata control record: {e}");
    }
}

fn control_value(record: &RaftRecord) -> (i16, BytesMut) {
    let mut out = BytesMut::new();
    let record_type = match record {
        RaftRecord::LeaderChange { leader_id, voters } => {
            let voters: Vec<LeaderChangeVoter> = voters
                .iter()
                .map(|id| LeaderChangeVoter {
                    voter_id: NodeId(*id),
                })
                .collect();
            let message = LeaderChangeMessage {
                version: 0,
                leader_id: NodeId(*leader_id),
                // Kafka names the voters that granted the vote; the core does not keep them
                // past the election, and the field is informational.
                granting_voters: Vec::new(),
                voters,
            };
            encode_message(&mut out, |o| {
                message.encode(o, 0).map_err(|e| e.to_string())
            });
            LEADER_CHANGE_TYPE
        }
        RaftRecord::KRaftVersion { version } => {
            let message = KRaftVersionRecord {
                version: 0,
                kraft_version: *version,
            };
            encode_message(&mut out, |o| {
                message.encode(o, 0).map_err(|e| e.to_string())
            });
            KRAFT_VERSION_TYPE
        }
        RaftRecord::Voters { voters } => {
            let message = VotersRecord {
                version: 0,
                voters: voters
                    .iter()
                    .map(|v| VotersRecordVoter {
                        voter_id: NodeId(v.id),
                        voter_directory_id: Uuid(v.directory_id.unwrap_or([0; 16])),
                        endpoints: Vec::new(),
                        kraft_version_feature: KRaftVersionFeature {
                            min_supported_version: 0,
                            max_supported_version: super::core::KRAFT_VERSION,
                        },
                    })
                    .collect(),
            };
            encode_message(&mut out, |o| {
                message.encode(o, 0).map_err(|e| e.to_string())
            });
            KRAFT_VOTERS_TYPE
        }
        RaftRecord::SnapshotHeader {
            last_contained_log_timestamp,
        } => {
            let message = SnapshotHeaderRecord {
                version: 0,
                last_contained_log_timestamp: *last_contained_log_timestamp,
            };
            encode_message(&mut out, |o| {
                message.encode(o, 0).map_err(|e| e.to_string())
            });
            SNAPSHOT_HEADER_TYPE
        }
        RaftRecord::SnapshotFooter => {
            let message = SnapshotFooterRecord { version: 0 };
            encode_message(&mut out, |o| {
                message.encode(o, 0).map_err(|e| e.to_string())
            });
            SNAPSHOT_FOOTER_TYPE
        }
        RaftRecord::Data(_) => unreachable!("a data record is not a control record"),
    };
    (record_type, out)
}

/// The record batch of `batch`, timestamped `timestamp_ms`.
pub fn encode_batch(batch: &Batch, timestamp_ms: i64) -> Bytes {
    assert!(!batch.records.is_empty(), "an empty batch");
    let control = batch.is_control();
    let mut builder = BatchBuilder::new(batch.base_offset)
        .partition_leader_epoch(batch.epoch)
        .control(control);
    for record in &batch.records {
        assert_eq!(
            record.is_control(),
            control,
            "a batch mixes control and data"
        );
        match record {
            RaftRecord::Data(value) => builder.push(timestamp_ms, None, Some(value), &[]),
            other => {
                let (record_type, value) = control_value(other);
                let mut key = BytesMut::new();
                let key_message = ControlRecordType {
                    version: 0,
                    record_type,
                };
                encode_message(&mut key, |o| {
                    key_message.encode(o, 0).map_err(|e| e.to_string())
                });
                builder.push(timestamp_ms, Some(&key), Some(&value), &[]);
            }
        }
    }
    builder.build().freeze()
}

/// The record batches of `batches`, back to back.
pub fn encode_batches(batches: &[Batch], timestamp_ms: i64) -> Bytes {
    let mut out = BytesMut::new();
    for batch in batches {
        out.extend_from_slice(&encode_batch(batch, timestamp_ms));
    }
    out.freeze()
}

fn decode_control(offset: i64, key: Bytes, value: Bytes) -> Result<RaftRecord, RecordsError> {
    let control = |source| RecordsError::Control { offset, source };
    let key = ControlRecordType::decode(&mut crate::protocol::wire::Reader::new(key), 0)
        .map_err(control)?;
    match key.record_type {
        LEADER_CHANGE_TYPE => {
            let message = LeaderChangeMessage::decode_exact(value, 0).map_err(control)?;
            Ok(RaftRecord::LeaderChange {
                leader_id: message.leader_id.0,
                voters: message.voters.iter().map(|v| v.voter_id.0).collect(),
            })
        }
        KRAFT_VERSION_TYPE => {
            let message = KRaftVersionRecord::decode_exact(value, 0).map_err(control)?;
            Ok(RaftRecord::KRaftVersion {
                version: message.kraft_version,
            })
        }
        KRAFT_VOTERS_TYPE => {
            let message = VotersRecord::decode_exact(value, 0).map_err(control)?;
            Ok(RaftRecord::Voters {
                voters: message
                    .voters
                    .iter()
                    .map(|v| ReplicaKey {
                        id: v.voter_id.0,
                        directory_id: (v.voter_directory_id != Uuid::ZERO)
                            .then_some(v.voter_directory_id.0),
                    })
                    .collect(),
            })
        }
        SNAPSHOT_HEADER_TYPE => {
            let message = SnapshotHeaderRecord::decode_exact(value, 0).map_err(control)?;
            Ok(RaftRecord::SnapshotHeader {
                last_contained_log_timestamp: message.last_contained_log_timestamp,
            })
        }
        SNAPSHOT_FOOTER_TYPE => {
            SnapshotFooterRecord::decode_exact(value, 0).map_err(control)?;
            Ok(RaftRecord::SnapshotFooter)
        }
        record_type => Err(RecordsError::UnknownControlType {
            offset,
            record_type,
        }),
    }
}

/// One record batch (whole, its CRC already checked by whoever read it) as a [`Batch`].
/// Compressed batches are refused: the metadata log is written uncompressed (as Kafka's
/// KRaft writes it), and a peer's compressed batch could expand far past what a fetch
/// answer may carry.
pub fn decode_batch(bytes: &Bytes) -> Result<Batch, RecordsError> {
    let header = BatchHeader::parse(bytes).map_err(RecordsError::Batch)?;
    if header.compression().map_err(RecordsError::Batch)? != Compression::None {
        return Err(RecordsError::Compressed {
            base_offset: header.base_offset,
        });
    }
    let mut records = Vec::new();
    let mut expected = header.base_offset;
    for record in record_batch::records(bytes).map_err(RecordsError::Batch)? {
        let record = record.map_err(RecordsError::Batch)?;
        if record.offset != expected {
            return Err(RecordsError::Gap {
                base_offset: header.base_offset,
                offset: record.offset,
                expected,
            });
        }
        expected += 1;
        let offset = record.offset;
        let Some(value) = record.value else {
            return Err(RecordsError::Missing {
                offset,
                what: "value",
            });
        };
        records.push(if header.is_control() {
            let Some(key) = record.key else {
                return Err(RecordsError::Missing {
                    offset,
                    what: "key",
                });
            };
            decode_control(offset, key, value)?
        } else {
            RaftRecord::Data(value)
        });
    }
    if records.is_empty() {
        return Err(RecordsError::Empty {
            base_offset: header.base_offset,
        });
    }
    if expected != header.next_offset() {
        return Err(RecordsError::Gap {
            base_offset: header.base_offset,
            offset: header.next_offset(),
            expected,
        });
    }
    Ok(Batch {
        base_offset: header.base_offset,
        epoch: header.partition_leader_epoch,
        records,
    })
}

/// Whole record batches back to back (a log read, a fetch answer's records) as batches, each
/// with its CRC checked. A partial batch at the end (a fetch answer cut at its byte limit) is
/// dropped, as Kafka's readers drop it.
pub fn decode_batches(bytes: Bytes) -> Result<Vec<Batch>, RecordsError> {
    Ok(decode_batches_with_bytes(bytes)?
        .into_iter()
        .map(|(batch, _)| batch)
        .collect())
}

/// [`decode_batches`], each batch with its own bytes (a follower appends the leader's).
pub fn decode_batches_with_bytes(bytes: Bytes) -> Result<Vec<(Batch, Bytes)>, RecordsError> {
    let mut out = Vec::new();
    for item in record_batch::batches(bytes) {
        let (_, batch) = match item {
            Ok(found) => found,
            Err(BatchError::Truncated { .. }) => break,
            Err(e) => return Err(RecordsError::Batch(e)),
        };
        record_batch::verify(&batch).map_err(RecordsError::Batch)?;
        out.push((decode_batch(&batch)?, batch));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Batch> {
        vec![
            Batch {
                base_offset: 0,
                epoch: 1,
                records: vec![
                    RaftRecord::KRaftVersion { version: 1 },
                    RaftRecord::Voters {
                        voters: vec![
                            ReplicaKey::node(1),
                            ReplicaKey {
                                id: 2,
                                directory_id: Some([7; 16]),
                            },
                        ],
                    },
                    RaftRecord::LeaderChange {
                        leader_id: 2,
                        voters: vec![1, 2, 3],
                    },
                ],
            },
            Batch {
                base_offset: 3,
                epoch: 1,
                records: vec![
                    RaftRecord::Data(Bytes::from_static(b"a")),
                    RaftRecord::Data(Bytes::from_static(b"")),
                ],
            },
        ]
    }

    #[test]
    fn batches_round_trip_through_kafka_record_batches() {
        let batches = sample();
        let bytes = encode_batches(&batches, 1234);
        assert_eq!(decode_batches(bytes.clone()).expect("decodes"), batches);
        let first = record_batch::batches(bytes)
            .next()
            .expect("a batch")
            .expect("whole");
        assert!(
            first.0.is_control(),
            "control records carry the control bit"
        );
        assert_eq!(first.0.partition_leader_epoch, 1);
    }

    #[test]
    fn a_cut_tail_is_dropped_and_a_corrupt_batch_is_refused() {
        let batches = sample();
        let bytes = encode_batches(&batches, 0);
        let first_len = encode_batch(&batches[0], 0).len();
        let cut = bytes.slice(..bytes.len() - 3);
        assert_eq!(decode_batches(cut).expect("decodes"), batches[..1].to_vec());
        let mut corrupt = BytesMut::from(&bytes[..]);
        corrupt[first_len - 1] ^= 0xff;
        assert!(matches!(
            decode_batches(corrupt.freeze()),
            Err(RecordsError::Batch(_))
        ));
    }

    #[test]
    fn a_compressed_batch_is_refused() {
        let mut builder = BatchBuilder::new(0).compression(Compression::Lz4);
        builder.push(0, None, Some(&[0u8; 4096]), &[]);
        let bytes = builder.build().freeze();
        assert_eq!(
            decode_batches(bytes),
            Err(RecordsError::Compressed { base_offset: 0 })
        );
    }

    #[test]
    fn an_unknown_control_type_is_named() {
        let mut key = BytesMut::new();
        ControlRecordType {
            version: 0,
            record_type: 9,
        }
        .encode(&mut key, 0)
        .expect("encodes");
        let mut builder = BatchBuilder::new(5).control(true);
        builder.push(0, Some(&key), Some(b"x"), &[]);
        let bytes = builder.build().freeze();
        assert_eq!(
            decode_batch(&bytes),
            Err(RecordsError::UnknownControlType {
                offset: 5,
                record_type: 9
            })
        );
    }
}
