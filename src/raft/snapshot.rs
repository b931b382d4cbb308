//! Snapshots of the state machine above the metadata log, as Kafka keeps them: one file per
//! snapshot in the partition directory (`__cluster_metadata-0/`), named by its id,
//! `<end offset, 20 digits>-<epoch, 10 digits>.checkpoint`, holding record batches:
//!
//! | batch | records |
//! |---|---|
//! | the first | control records: SnapshotHeaderRecord (type 3: version 0, LastContainedLogTimestamp), KRaftVersionRecord (type 5: the kraft.version, 1) and VotersRecord (type 6: the voter set) |
//! | then | the state machine's records, as data records (no key), at most [`SNAPSHOT_BATCH_RECORDS_MAX`] a batch |
//! | the last | one control record, SnapshotFooterRecord (type 4): version 0 |
//!
//! Offsets in a snapshot count from 0; every batch carries the snapshot's epoch as its
//! partition leader epoch; nothing is compressed. The first batch is Kafka's
//! (`RecordsSnapshotWriter` at kraft.version 1): once the log start has moved past offset 0
//! the voter set is no longer in the log, so every snapshot carries it (KIP-853). A snapshot
//! of kraft.version 0 (a header alone) or with KRaftVersion but no Voters is read too, as
//! Kafka writes them; so is Kafka's bootstrap snapshot
//! (`00000000000000000000-0000000000.checkpoint`: the first batch and the footer, no data).
//!
//! A snapshot is written to `<name>.checkpoint.part` and synced, then renamed and the
//! directory synced (Kafka's `freeze`): a file with the final name is whole and durable, and
//! a `.part` left by a crash is removed at the next open. A snapshot fetched from the leader
//! is assembled the same way, chunk by chunk, and checked whole before it is renamed.
//!
//! Invariants: a `.checkpoint` file decodes to a header, data, then a footer, every batch
//! CRC-checked and in the snapshot's epoch, with no byte after the footer; reading never
//! panics on a file's bytes.

use bytes::{Bytes, BytesMut};

use crate::rt::disk::{join, Disk, File, OpenMode};

use super::core::KRAFT_VERSION;
use super::election::ReplicaKey;
use super::message::{Batch, RaftRecord, SnapshotId};
use super::records::{self, RecordsError};

/// The suffix of a whole snapshot.
pub const SNAPSHOT_SUFFIX: &str = ".checkpoint";
/// The suffix of a snapshot being written or fetched.
pub const PARTIAL_SUFFIX: &str = ".checkpoint.part";
/// Records in one data batch of a snapshot.
pub const SNAPSHOT_BATCH_RECORDS_MAX: usize = 1024;
/// Bytes of records in one data batch of a snapshot (a batch may exceed it by one record).
pub const SNAPSHOT_BATCH_BYTES_MAX: usize = 256 << 10;

#[derive(Debug)]
pub enum SnapshotFileError {
    Io {
        op: &'static str,
        path: String,
        source: std::io::Error,
    },
    /// The file's bytes are not a snapshot.
    Corrupt { path: String, reason: String },
    /// The snapshot's voter set is not this replica's `controller.quorum.voters`.
    VotersDiffer { path: String, reason: String },
}

impl std::fmt::Display for SnapshotFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotFileError::Io { op, path, source } => write!(f, "{op} {path}: {source}"),
            SnapshotFileError::Corrupt { path, reason } => {
                write!(f, "the snapshot {path} is not whole: {reason}")
            }
            SnapshotFileError::VotersDiffer { path, reason } => {
                write!(f, "the snapshot {path} belongs to another quorum: {reason}")
            }
        }
    }
}

impl std::error::Error for SnapshotFileError {}

fn io(op: &'static str, path: &str) -> impl FnOnce(std::io::Error) -> SnapshotFileError {
    let path = path.to_string();
    move |source| SnapshotFileError::Io { op, path, source }
}

/// The file name of snapshot `id`.
pub fn file_name(id: SnapshotId) -> String {
    format!("{:020}-{:010}{SNAPSHOT_SUFFIX}", id.end_offset, id.epoch)
}

/// The id a whole snapshot's file name gives; `None` for any other name.
pub fn parse_name(name: &str) -> Option<SnapshotId> {
    let stem = name.strip_suffix(SNAPSHOT_SUFFIX)?;
    let (offset, epoch) = stem.split_once('-')?;
    if offset.len() != 20 || epoch.len() != 10 {
        return None;
    }
    if !offset
        .bytes()
        .chain(epoch.bytes())
        .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some(SnapshotId {
        end_offset: offset.parse().ok()?,
        epoch: epoch.parse().ok()?,
    })
}

/// The whole snapshots in `dir`, oldest first.
pub async fn list(disk: &Disk, dir: &str) -> Result<Vec<SnapshotId>, SnapshotFileError> {
    let names = disk.list(dir).await.map_err(io("list", dir))?;
    let mut ids: Vec<SnapshotId> = names.iter().filter_map(|n| parse_name(n)).collect();
    ids.sort();
    Ok(ids)
}

/// Removes the partial snapshots a crash left in `dir` (only when the replica opens: while
/// it runs, a `.part` file is a fetch in progress).
pub async fn remove_partial(disk: &Disk, dir: &str) -> Result<(), SnapshotFileError> {
    let names = disk.list(dir).await.map_err(io("list", dir))?;
    for name in names.iter().filter(|n| n.ends_with(PARTIAL_SUFFIX)) {
        let path = join(dir, name);
        disk.remove(&path).await.map_err(io("remove", &path))?;
    }
    Ok(())
}

/// Removes the snapshots `ids` (older ones, once the log start has passed them).
pub async fn remove(disk: &Disk, dir: &str, ids: &[SnapshotId]) -> Result<(), SnapshotFileError> {
    for id in ids {
        let path = join(dir, &file_name(*id));
        match disk.remove(&path).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("remove", &path)(e)),
        }
    }
    if !ids.is_empty() {
        disk.sync_dir(dir)
            .await
            .map_err(io("sync directory", dir))?;
    }
    Ok(())
}

/// What a snapshot holds besides its header and footer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotContents {
    /// The KRaftVersionRecord's kraft.version (0 when the snapshot has none).
    pub kraft_version: i16,
    /// The VotersRecord's voter set, when the snapshot has one.
    pub voters: Option<Vec<ReplicaKey>>,
    /// The state machine's records.
    pub records: Vec<Bytes>,
}

impl SnapshotContents {
    /// Why the voter set this snapshot carries is not `configured`
    /// (`controller.quorum.voters`); `None` when it is, or when the snapshot names none.
    pub fn voters_differ(&self, configured: &std::collections::BTreeSet<i32>) -> Option<String> {
        let voters = self.voters.as_ref()?;
        let held: std::collections::BTreeSet<i32> = voters.iter().map(|v| v.id).collect();
        (held != *configured || held.len() != voters.len()).then(|| {
            format!(
                "its voter set is {:?} but controller.quorum.voters names {:?}",
                voters.iter().map(|v| v.id).collect::<Vec<_>>(),
                configured.iter().collect::<Vec<_>>()
            )
        })
    }
}

/// The bytes of snapshot `id` holding `records`, and the voter set `voters`.
pub fn encode(
    id: SnapshotId,
    voters: &[ReplicaKey],
    records: &[Bytes],
    last_contained_log_timestamp: i64,
    timestamp_ms: i64,
) -> Bytes {
    let mut out = BytesMut::new();
    let mut offset = 0i64;
    let mut push = |records: Vec<RaftRecord>, out: &mut BytesMut| {
        let batch = Batch {
            base_offset: offset,
            epoch: id.epoch,
            records,
        };
        offset = batch.next_offset();
        out.extend_from_slice(&records::encode_batch(&batch, timestamp_ms));
    };
    push(
        vec![
            RaftRecord::SnapshotHeader {
                last_contained_log_timestamp,
            },
            RaftRecord::KRaftVersion {
                version: KRAFT_VERSION,
            },
            RaftRecord::Voters {
                voters: voters.to_vec(),
            },
        ],
        &mut out,
    );
    let mut batch: Vec<RaftRecord> = Vec::new();
    let mut batch_bytes = 0usize;
    for record in records {
        batch_bytes += record.len();
        batch.push(RaftRecord::Data(record.clone()));
        if batch.len() >= SNAPSHOT_BATCH_RECORDS_MAX || batch_bytes >= SNAPSHOT_BATCH_BYTES_MAX {
            push(std::mem::take(&mut batch), &mut out);
            batch_bytes = 0;
        }
    }
    if !batch.is_empty() {
        push(batch, &mut out);
    }
    push(vec![RaftRecord::SnapshotFooter], &mut out);
    out.freeze()
}

/// What the bytes of snapshot `id`, read from `path`, hold.
pub fn decode(
    id: SnapshotId,
    path: &str,
    bytes: Bytes,
) -> Result<SnapshotContents, SnapshotFileError> {
    let corrupt = |reason: String| SnapshotFileError::Corrupt {
        path: path.to_string(),
        reason,
    };
    let len = bytes.len();
    let batches = records::decode_batches_with_bytes(bytes)
        .map_err(|e: RecordsError| corrupt(e.to_string()))?;
    let whole: usize = batches.iter().map(|(_, raw)| raw.len()).sum();
    if whole != len {
        return Err(corrupt(format!(
            "{} bytes after the last whole batch",
            len - whole
        )));
    }
    let mut contents = SnapshotContents {
        kraft_version: 0,
        voters: None,
        records: Vec::new(),
    };
    let mut next_offset = 0i64;
    let last = batches.len().saturating_sub(1);
    for (i, (batch, _)) in batches.into_iter().enumerate() {
        if batch.epoch != id.epoch {
            return Err(corrupt(format!(
                "the batch at {} is of epoch {}, the snapshot's is {}",
                batch.base_offset, batch.epoch, id.epoch
            )));
        }
        if batch.base_offset != next_offset {
            return Err(corrupt(format!(
                "the batch at {} where {next_offset} was due",
                batch.base_offset
            )));
        }
        next_offset = batch.next_offset();
        let footer = matches!(batch.records[..], [RaftRecord::SnapshotFooter]);
        match (i == 0, i == last) {
            (true, true) => return Err(corrupt("it has no footer".into())),
            (true, false) => read_first_batch(batch.records, &mut contents).map_err(corrupt)?,
            (false, true) if !footer => {
                return Err(corrupt("it does not end with a footer".into()))
            }
            (false, true) => {}
            (false, false) => {
                for record in batch.records {
                    match record {
                        RaftRecord::Data(value) => contents.records.push(value),
                        other => {
                            return Err(corrupt(format!(
                                "a control record {other:?} among the data"
                            )))
                        }
                    }
                }
            }
        }
    }
    if next_offset == 0 {
        return Err(corrupt("it is empty".into()));
    }
    Ok(contents)
}

/// The first batch: a header, then (kraft.version 1 and later) KRaftVersion, then
/// optionally Voters, in that order and nothing else.
fn read_first_batch(
    records: Vec<RaftRecord>,
    contents: &mut SnapshotContents,
) -> Result<(), String> {
    let mut records = records.into_iter();
    if !matches!(records.next(), Some(RaftRecord::SnapshotHeader { .. })) {
        return Err("it does not open with a header".into());
    }
    match records.next() {
        None => return Ok(()),
        Some(RaftRecord::KRaftVersion { version }) if version >= 0 => {
            contents.kraft_version = version;
        }
        Some(other) => return Err(format!("{other:?} follows its header")),
    }
    match records.next() {
        None => return Ok(()),
        Some(RaftRecord::Voters { voters }) if contents.kraft_version > 0 => {
            if voters.is_empty() {
                return Err("its voter set is empty".into());
            }
            contents.voters = Some(voters);
        }
        Some(other) => return Err(format!("{other:?} follows its KRaftVersion record")),
    }
    match records.next() {
        None => Ok(()),
        Some(other) => Err(format!("{other:?} follows its Voters record")),
    }
}

/// Writes snapshot `id` durably into `dir` (see the module docs); returns its size.
pub async fn write(
    disk: &Disk,
    dir: &str,
    id: SnapshotId,
    bytes: &[u8],
) -> Result<u64, SnapshotFileError> {
    let name = file_name(id);
    let partial = join(dir, &format!("{name}.part"));
    let file = disk
        .open(&partial, OpenMode::Truncate)
        .await
        .map_err(io("create", &partial))?;
    file.write_at(0, bytes)
        .await
        .map_err(io("write", &partial))?;
    freeze(disk, dir, id, file, None).await?;
    Ok(bytes.len() as u64)
}

/// Opens the partial file of a snapshot being fetched, empty.
pub async fn begin_fetch(
    disk: &Disk,
    dir: &str,
    id: SnapshotId,
) -> Result<File, SnapshotFileError> {
    let partial = join(dir, &format!("{}.part", file_name(id)));
    disk.open(&partial, OpenMode::Truncate)
        .await
        .map_err(io("create", &partial))
}

/// Makes a written or fetched partial snapshot whole: checks that it decodes (and, given
/// `voters`, that its voter set is that one), syncs it, renames it to its final name and
/// syncs the directory. A snapshot that fails a check is removed.
pub async fn freeze(
    disk: &Disk,
    dir: &str,
    id: SnapshotId,
    file: File,
    voters: Option<&std::collections::BTreeSet<i32>>,
) -> Result<(), SnapshotFileError> {
    let partial = file.path().to_string();
    let len = file.len().await.map_err(io("size", &partial))?;
    let len = usize::try_from(len).map_err(|_| SnapshotFileError::Corrupt {
        path: partial.clone(),
        reason: format!("{len} bytes"),
    })?;
    let bytes = file.read_at(0, len).await.map_err(io("read", &partial))?;
    let checked = decode(id, &partial, bytes).and_then(|contents| {
        match voters.and_then(|voters| contents.voters_differ(voters)) {
            Some(reason) => Err(SnapshotFileError::VotersDiffer {
                path: partial.clone(),
                reason,
            }),
            None => Ok(()),
        }
    });
    if let Err(e) = checked {
        // Nothing of it is kept: a fetch starts over.
        drop(file);
        let _ = disk.remove(&partial).await;
        return Err(e);
    }
    file.sync().await.map_err(io("sync", &partial))?;
    drop(file);
    let path = join(dir, &file_name(id));
    disk.rename(&partial, &path)
        .await
        .map_err(io("rename", &partial))?;
    disk.sync_dir(dir).await.map_err(io("sync directory", dir))
}

/// What snapshot `id` holds.
pub async fn read(
    disk: &Disk,
    dir: &str,
    id: SnapshotId,
) -> Result<SnapshotContents, SnapshotFileError> {
    let path = join(dir, &file_name(id));
    let bytes = disk.read_file(&path).await.map_err(io("read", &path))?;
    decode(id, &path, bytes)
}

/// A chunk of snapshot `id` from `position`, at most `max_bytes`, and the snapshot's size;
/// `None` when the snapshot is gone. The chunk is empty at or past the end.
pub async fn read_chunk(
    disk: &Disk,
    dir: &str,
    id: SnapshotId,
    position: u64,
    max_bytes: usize,
) -> Result<Option<(u64, Bytes)>, SnapshotFileError> {
    let path = join(dir, &file_name(id));
    let file = match disk.open(&path, OpenMode::Existing).await {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("open", &path)(e)),
    };
    let size = file.len().await.map_err(io("size", &path))?;
    if position >= size {
        return Ok(Some((size, Bytes::new())));
    }
    let bytes = file
        .read_at(position, max_bytes)
        .await
        .map_err(io("read", &path))?;
    Ok(Some((size, bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> SnapshotId {
        SnapshotId {
            end_offset: 1234,
            epoch: 7,
        }
    }

    #[test]
    fn names_are_kafkas() {
        assert_eq!(
            file_name(id()),
            "00000000000000001234-0000000007.checkpoint"
        );
        assert_eq!(parse_name(&file_name(id())), Some(id()));
        for other in [
            "00000000000000001234-0000000007.checkpoint.part",
            "leader-epoch-checkpoint",
            "0000000000000001234-0000000007.checkpoint",
            "0000000000000000123x-0000000007.checkpoint",
        ] {
            assert_eq!(parse_name(other), None, "{other}");
        }
    }

    fn voters() -> Vec<ReplicaKey> {
        vec![
            ReplicaKey::node(1),
            ReplicaKey::node(2),
            ReplicaKey::node(3),
        ]
    }

    #[test]
    fn a_snapshot_round_trips_and_its_damage_is_named() {
        let records: Vec<Bytes> = (0..2500u32)
            .map(|i| Bytes::from(i.to_le_bytes().to_vec()))
            .collect();
        let bytes = encode(id(), &voters(), &records, 99, 100);
        let contents = decode(id(), "s", bytes.clone()).expect("decodes");
        assert_eq!(contents.records, records);
        assert_eq!(contents.kraft_version, KRAFT_VERSION);
        assert_eq!(contents.voters, Some(voters()));
        let empty = encode(id(), &voters(), &[], 99, 100);
        let contents = decode(id(), "s", empty).expect("decodes");
        assert!(contents.records.is_empty());
        assert_eq!(contents.voters, Some(voters()));
        let cut = bytes.slice(..bytes.len() - 3);
        let error = decode(id(), "s", cut).expect_err("cut");
        assert!(
            error.to_string().contains("after the last whole batch"),
            "{error}"
        );
        let other_epoch = SnapshotId { epoch: 8, ..id() };
        let error = decode(other_epoch, "s", bytes.clone()).expect_err("epoch");
        assert!(error.to_string().contains("epoch 7"), "{error}");
        let mut flipped = bytes.to_vec();
        let at = flipped.len() / 2;
        flipped[at] ^= 0x40;
        assert!(decode(id(), "s", Bytes::from(flipped)).is_err());
    }

    /// A snapshot whose first batch holds `first`, then one data record, then the footer.
    fn with_first_batch(first: Vec<RaftRecord>) -> Bytes {
        let mut out = BytesMut::new();
        let mut offset = 0;
        for records in [
            first,
            vec![RaftRecord::Data(Bytes::from_static(b"x"))],
            vec![RaftRecord::SnapshotFooter],
        ] {
            let batch = Batch {
                base_offset: offset,
                epoch: id().epoch,
                records,
            };
            offset = batch.next_offset();
            out.extend_from_slice(&records::encode_batch(&batch, 0));
        }
        out.freeze()
    }

    #[test]
    fn the_first_batch_is_read_as_kafka_writes_it_at_each_kraft_version() {
        let header = RaftRecord::SnapshotHeader {
            last_contained_log_timestamp: 5,
        };
        let kraft = |version| RaftRecord::KRaftVersion { version };
        let voters_record = RaftRecord::Voters { voters: voters() };
        // kraft.version 0: a header alone.
        let v0 = decode(id(), "s", with_first_batch(vec![header.clone()])).expect("v0");
        assert_eq!((v0.kraft_version, v0.voters), (0, None));
        // kraft.version 1 without a voter set (Kafka writes none when it has none).
        let v1 = decode(id(), "s", with_first_batch(vec![header.clone(), kraft(1)]))
            .expect("v1 without voters");
        assert_eq!((v1.kraft_version, v1.voters), (1, None));
        for (first, why) in [
            (
                vec![kraft(1), header.clone()],
                "does not open with a header",
            ),
            (
                vec![header.clone(), voters_record.clone()],
                "follows its header",
            ),
            (
                vec![header.clone(), kraft(0), voters_record.clone()],
                "follows its KRaftVersion",
            ),
            (
                vec![
                    header.clone(),
                    kraft(1),
                    voters_record.clone(),
                    voters_record.clone(),
                ],
                "follows its Voters",
            ),
            (
                vec![
                    header.clone(),
                    kraft(1),
                    RaftRecord::Voters { voters: vec![] },
                ],
                "voter set is empty",
            ),
        ] {
            let error = decode(id(), "s", with_first_batch(first)).expect_err(why);
            assert!(error.to_string().contains(why), "{why}: {error}");
        }
    }

    #[test]
    fn kafkas_bootstrap_snapshot_is_read() {
        // `kafka-storage format --standalone` writes 0-0.checkpoint: the first batch with
        // the voter set, then the footer; no data.
        let bootstrap = SnapshotId {
            end_offset: 0,
            epoch: 0,
        };
        let bytes = encode(bootstrap, &voters(), &[], -1, 0);
        let contents = decode(bootstrap, "s", bytes).expect("bootstrap");
        assert!(contents.records.is_empty());
        assert_eq!(contents.voters, Some(voters()));
    }

    #[test]
    fn a_voter_set_other_than_the_configured_one_is_named() {
        let contents = SnapshotContents {
            kraft_version: 1,
            voters: Some(voters()),
            records: Vec::new(),
        };
        let same: std::collections::BTreeSet<i32> = [1, 2, 3].into();
        assert_eq!(contents.voters_differ(&same), None);
        let other: std::collections::BTreeSet<i32> = [1, 2, 4].into();
        let reason = contents.voters_differ(&other).expect("differs");
        assert!(
            reason.contains("[1, 2, 3]") && reason.contains("[1, 2, 4]"),
            "{reason}"
        );
        let none = SnapshotContents {
            voters: None,
            ..contents
        };
        assert_eq!(none.voters_differ(&other), None);
    }
}
