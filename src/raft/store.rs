//! The metadata log on disk: the project's partition log ([`crate::log::Log`], its recovery,
//! its crash model, its leader-epoch cache) in `metadata.log.dir/__cluster_metadata-0`, with
//! the `quorum-state` file beside the partition directory as in Kafka.
//!
//! The core decides every offset and epoch, so every append keeps them
//! ([`AppendMode::Replica`], on the leader too: the leader's batches come out of the core
//! already stamped). Appends are written without waiting for a sync; the driver syncs when
//! the core asks ([`RaftStore::sync`]) and reports how far, which is how a voter acknowledges
//! only synced records under the default policy.
//!
//! Snapshots of the state machine live beside the segments ([`super::snapshot`]). The log
//! starts past 0 only at the end of a snapshot it holds: retention moves the start to the
//! latest snapshot's end ([`RaftStore::delete_before`], once the log outgrew
//! `metadata.max.retention.bytes`), and a follower that installs a fetched snapshot restarts
//! its log there ([`RaftStore::restart_at`]). At open, a snapshot reaching past the log end
//! (a crash between installing a snapshot and restarting the log, or a power loss that took
//! unsynced records a snapshot already covers) restarts the log at that snapshot's end.
//!
//! Invariants: what [`RaftStore::open`] reports is durable (recovery syncs what it scanned,
//! and a clean shutdown flushed the rest); an append continues the log end exactly (the log
//! refuses anything else); a truncation never runs during a sync (the log's sync lock), so a
//! reported synced offset never covers records written after a cut.

use std::sync::Arc;

use bytes::Bytes;

use crate::log::leader_epoch::LeaderEpochCache;
use crate::log::{AppendMode, FlushPolicy, Log, LogConfig, LogError};
use crate::rt::clock::Clock;
use crate::rt::disk::{join, Disk};

use super::election::{ElectionState, ReplicaKey};
use super::log_view::LogView;
use super::message::Batch;
use super::message::SnapshotId;
use super::quorum_state::{self, QuorumStateError};
use super::records::{self, RecordsError};
use super::snapshot::{self, SnapshotContents, SnapshotFileError};

/// The partition directory of the metadata log inside `metadata.log.dir`.
pub const METADATA_PARTITION_DIR: &str = "__cluster_metadata-0";
/// Kafka's default `metadata.log.segment.bytes` (1 GiB).
pub const METADATA_LOG_SEGMENT_BYTES_DEFAULT: u64 = 1 << 30;
/// Kafka's floor for `metadata.log.segment.bytes` (8 MiB), below which it refuses to start;
/// tests may go lower through [`RaftStore::open`] directly.
pub const METADATA_LOG_SEGMENT_BYTES_MIN: u64 = 8 << 20;

#[derive(Debug)]
pub enum StoreError {
    Log(LogError),
    QuorumState(QuorumStateError),
    /// The log holds bytes that are not metadata batches (a directory of another kind).
    Records {
        dir: String,
        source: RecordsError,
    },
    Io {
        op: &'static str,
        path: String,
        source: std::io::Error,
    },
    Snapshot(SnapshotFileError),
    /// The log starts past 0 but no snapshot ends where it starts: what lies below the
    /// start is nowhere (a snapshot file was removed by hand).
    NoSnapshotAtStart {
        dir: String,
        log_start_offset: i64,
    },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Log(e) => write!(f, "the metadata log: {e}"),
            StoreError::QuorumState(e) => write!(f, "{e}"),
            StoreError::Records { dir, source } => write!(f, "the metadata log in {dir}: {source}"),
            StoreError::Io { op, path, source } => write!(f, "{op} {path}: {source}"),
            StoreError::Snapshot(e) => write!(f, "{e}"),
            StoreError::NoSnapshotAtStart {
                dir,
                log_start_offset,
            } => write!(
                f,
                "the metadata log in {dir} starts at offset {log_start_offset}, but no snapshot \
                 ends there (no file {log_start_offset:020}-<epoch>.checkpoint)"
            ),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<LogError> for StoreError {
    fn from(e: LogError) -> Self {
        StoreError::Log(e)
    }
}

impl From<SnapshotFileError> for StoreError {
    fn from(e: SnapshotFileError) -> Self {
        StoreError::Snapshot(e)
    }
}

impl From<QuorumStateError> for StoreError {
    fn from(e: QuorumStateError) -> Self {
        StoreError::QuorumState(e)
    }
}

/// The metadata log and the election state of one replica.
#[derive(Clone)]
pub struct RaftStore {
    disk: Disk,
    /// `metadata.log.dir`, which holds `quorum-state`.
    dir: String,
    log: Arc<Log>,
}

/// What a replica resumes from, besides its log: the snapshots it holds, oldest first.
pub type Snapshots = Vec<SnapshotId>;

/// What a replica resumes from.
pub struct Opened {
    pub store: RaftStore,
    pub election: ElectionState,
    pub log: LogView,
    pub snapshots: Snapshots,
}

impl RaftStore {
    /// Opens (recovering) or creates the metadata log under `dir`.
    pub async fn open(
        disk: Disk,
        dir: &str,
        segment_bytes: u64,
        clock: Clock,
    ) -> Result<Opened, StoreError> {
        disk.create_dir_all(dir)
            .await
            .map_err(|source| StoreError::Io {
                op: "create",
                path: dir.to_string(),
                source,
            })?;
        let election = quorum_state::load(&disk, dir).await?;
        let config = LogConfig {
            segment_bytes,
            // Syncs are the core's to ask for (see the module docs); no append waits for one.
            flush: FlushPolicy::PageCache {
                flush_messages: u64::MAX,
                flush_ms: u64::MAX,
            },
            // Metadata batches have no producer ids; the checks would find nothing.
            producer_state_checks: false,
            ..LogConfig::default()
        };
        let log_dir = join(dir, METADATA_PARTITION_DIR);
        let (log, _report) = Log::open(disk.clone(), &log_dir, config, clock).await?;
        snapshot::remove_partial(&disk, &log_dir).await?;
        let mut snapshots = snapshot::list(&disk, &log_dir).await?;
        if let Some(latest) = snapshots.last().copied() {
            if latest.end_offset > log.log_end_offset() {
                tracing::info!(
                    dir = %log_dir,
                    snapshot_end_offset = latest.end_offset,
                    log_end_offset = log.log_end_offset(),
                    "raft: the latest snapshot reaches past the log end; restarting the log there"
                );
                log.truncate_fully_and_start_at(latest.end_offset).await?;
            }
        }
        let start = log.log_start_offset().await;
        if start > 0 && !snapshots.iter().any(|s| s.end_offset == start) {
            return Err(StoreError::NoSnapshotAtStart {
                dir: log_dir,
                log_start_offset: start,
            });
        }
        // Snapshots below the start serve no one.
        let below: Vec<SnapshotId> = snapshots
            .iter()
            .copied()
            .filter(|s| s.end_offset < start)
            .collect();
        snapshot::remove(&disk, &log_dir, &below).await?;
        snapshots.retain(|s| s.end_offset >= start);
        let epochs =
            LeaderEpochCache::from_entries(log.epoch_entries().await).map_err(|reason| {
                StoreError::Log(LogError::Config(format!(
                    "the leader-epoch cache of {log_dir}: {reason}"
                )))
            })?;
        let view = LogView::opened(start, log.log_end_offset(), epochs, &snapshots);
        Ok(Opened {
            store: RaftStore {
                disk,
                dir: dir.to_string(),
                log,
            },
            election,
            log: view,
            snapshots,
        })
    }

    /// The partition directory, which holds the snapshots.
    pub fn log_dir(&self) -> &str {
        self.log.dir()
    }

    pub fn disk(&self) -> &Disk {
        &self.disk
    }

    /// Writes snapshot `id` of `records`, with the voter set `voters`, durably; returns its
    /// size in bytes.
    pub async fn write_snapshot(
        &self,
        id: SnapshotId,
        voters: &[ReplicaKey],
        records: &[Bytes],
        timestamp_ms: i64,
    ) -> Result<u64, StoreError> {
        let last_contained = self.last_timestamp_before(id.end_offset).await;
        let bytes = snapshot::encode(id, voters, records, last_contained, timestamp_ms);
        Ok(snapshot::write(&self.disk, self.log.dir(), id, &bytes).await?)
    }

    /// The timestamp of the batch holding the record before `offset` (Kafka's
    /// LastContainedLogTimestamp), or -1 where the log no longer holds it.
    async fn last_timestamp_before(&self, offset: i64) -> i64 {
        if offset <= 0 {
            return -1;
        }
        let Ok(read) = self.log.read(offset - 1, 1, offset).await else {
            return -1;
        };
        crate::protocol::record_batch::BatchHeader::parse(&read.records)
            .map_or(-1, |header| header.max_timestamp)
    }

    /// What snapshot `id` holds: the voter set and the state machine's records.
    pub async fn read_snapshot(&self, id: SnapshotId) -> Result<SnapshotContents, StoreError> {
        Ok(snapshot::read(&self.disk, self.log.dir(), id).await?)
    }

    /// Moves the log start to `offset`, the end of the latest snapshot, deleting the
    /// segments wholly below it; the bytes below it are synced first. Returns the start.
    pub async fn delete_before(&self, offset: i64, high_watermark: i64) -> Result<i64, StoreError> {
        Ok(self.log.delete_records(offset, high_watermark).await?)
    }

    /// Empties the log and restarts it at `offset` (a fetched snapshot's end).
    pub async fn restart_at(&self, offset: i64) -> Result<(), StoreError> {
        Ok(self.log.truncate_fully_and_start_at(offset).await?)
    }

    /// Removes the snapshots `ids`.
    pub async fn remove_snapshots(&self, ids: &[SnapshotId]) -> Result<(), StoreError> {
        Ok(snapshot::remove(&self.disk, self.log.dir(), ids).await?)
    }

    /// The log's size in bytes (what `metadata.max.retention.bytes` bounds).
    pub async fn size_bytes(&self) -> u64 {
        self.log.size_bytes().await
    }

    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// Writes the election state durably (before the replica acts on it).
    pub async fn persist(&self, state: &ElectionState) -> Result<(), StoreError> {
        Ok(quorum_state::write(&self.disk, &self.dir, state).await?)
    }

    /// Appends one batch as the core built it; `raw` is the leader's bytes of it when a
    /// fetch brought them (so that replicas hold the same bytes), else it is encoded here.
    pub async fn append(
        &self,
        batch: &Batch,
        raw: Option<Bytes>,
        timestamp_ms: i64,
    ) -> Result<(), StoreError> {
        let bytes = raw.unwrap_or_else(|| records::encode_batch(batch, timestamp_ms));
        let pending = self.log.append_in_mode(bytes, AppendMode::Replica).await?;
        assert_eq!(
            pending.info.base_offset, batch.base_offset,
            "a metadata append lands at its own offset"
        );
        assert_eq!(
            pending.info.last_offset + 1,
            batch.next_offset(),
            "a metadata append ends where its batch does"
        );
        Ok(())
    }

    /// Cuts the log to end at `offset`.
    pub async fn truncate(&self, offset: i64) -> Result<(), StoreError> {
        self.log.truncate_to(offset).await?;
        Ok(())
    }

    /// Syncs everything written so far; returns the synced end.
    pub async fn sync(&self) -> Result<i64, StoreError> {
        match self.log.flush_to(self.log.log_end_offset()).await {
            // A truncation between reading the end and taking the sync lock: what is left
            // was synced all the same, and the core's generation check sorts out the rest.
            Ok(()) | Err(LogError::Truncated { .. }) => Ok(self.log.durable_end_offset()),
            Err(e) => Err(e.into()),
        }
    }

    /// Whole batches from `offset` on, about `max_bytes` of them (at least one), as stored.
    pub async fn read_raw(&self, offset: i64, max_bytes: usize) -> Result<Bytes, StoreError> {
        let read = self
            .log
            .read(offset, max_bytes, self.log.log_end_offset())
            .await?;
        Ok(read.records)
    }

    /// Batches from `offset` on, ending at or below `max_offset` (a high watermark).
    pub async fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
    ) -> Result<Vec<Batch>, StoreError> {
        let read = self.log.read(offset, max_bytes, max_offset).await?;
        records::decode_batches(read.records).map_err(|source| StoreError::Records {
            dir: self.log.dir().to_string(),
            source,
        })
    }

    pub async fn close(&self) -> Result<(), StoreError> {
        Ok(self.log.close().await?)
    }
}
