//! Producer ids for InitProducerId: handed out from blocks reserved durably, so an id is
//! never given twice, across restarts and crashes included.
//!
//! Kafka's controller hands brokers blocks of [`BLOCK_SIZE`] ids (AllocateProducerIds); a
//! single Samsa node plays both parts with one file in its data directory,
//! [`PRODUCER_ID_BLOCK_FILE`]. It holds the end of the last block reserved: every id below it
//! may have been handed out. Reserving a block writes the new end atomically and durably
//! (write, fsync, rename, fsync of the directory, through `rt::disk`) *before* any id of the
//! block is given; a restart starts a fresh block at the stored end, so the unused rest of the
//! previous block is skipped, never reused.
//!
//! On a node with a metadata quorum (the default) the blocks come from the controller instead
//! (AllocateProducerIds, recorded as ProducerIdsRecords in the metadata log) once one is
//! attached ([`ProducerIds::attach_controller`]); the file is then only read, at the first
//! start, by the migration, which carries its end into the metadata log.
//!
//! File format (18 bytes, big-endian): magic `SPID` (4), version u16 = 1, block end i64,
//! then the CRC-32C (u32) of the preceding 14 bytes. A missing file means
//! no id was ever reserved (a new data directory). A damaged one stops the broker: without it
//! nothing says which ids were already used.

use tokio::sync::Mutex;

use crate::broker::controller_channel::{ChannelError, ControllerChannel};
use crate::rt::disk::Disk;

/// The producer id block file in the data directory.
pub const PRODUCER_ID_BLOCK_FILE: &str = "producer-id-block";
/// Ids reserved per durable write (Kafka's block size).
pub const BLOCK_SIZE: i64 = 1000;

const MAGIC: &[u8; 4] = b"SPID";
const VERSION: u16 = 1;
const FILE_LEN: usize = 4 + 2 + 8 + 4;

/// Why no producer id could be given, or the block file could not be read.
#[derive(Debug)]
pub enum ProducerIdError {
    Io {
        op: &'static str,
        path: String,
        source: std::io::Error,
    },
    Corrupt {
        path: String,
        reason: String,
    },
    /// Every id up to `i64::MAX` has been used.
    Exhausted,
    /// The controller gave no block.
    Controller(ChannelError),
}

impl std::fmt::Display for ProducerIdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProducerIdError::Io { op, path, source } => write!(f, "{op} {path}: {source}"),
            ProducerIdError::Corrupt { path, reason } => write!(
                f,
                "{path} is damaged ({reason}); it records which producer ids were handed out, \
                 so the broker cannot start without it being repaired"
            ),
            ProducerIdError::Exhausted => write!(f, "producer ids are exhausted"),
            ProducerIdError::Controller(e) => write!(f, "no producer id block: {e}"),
        }
    }
}

impl std::error::Error for ProducerIdError {}

pub fn encode_block_end(block_end: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(FILE_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&block_end.to_be_bytes());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

pub fn decode_block_end(bytes: &[u8]) -> Result<i64, String> {
    if bytes.len() != FILE_LEN {
        return Err(format!("{} bytes, expected {FILE_LEN}", bytes.len()));
    }
    let (body, crc) = bytes.split_at(FILE_LEN - 4);
    let stored = u32::from_be_bytes(crc.try_into().map_err(|_| "short CRC")?);
    let actual = crc32c::crc32c(body);
    if stored != actual {
        return Err(format!(
            "CRC mismatch: stored {stored:#010x}, computed {actual:#010x}"
        ));
    }
    if &body[..4] != MAGIC {
        return Err("bad magic".to_string());
    }
    let version = u16::from_be_bytes([body[4], body[5]]);
    if version != VERSION {
        return Err(format!("unknown version {version}"));
    }
    let mut end = [0u8; 8];
    end.copy_from_slice(&body[6..14]);
    let end = i64::from_be_bytes(end);
    if end < 0 {
        return Err(format!("negative block end {end}"));
    }
    Ok(end)
}

#[derive(Debug)]
struct Block {
    next: i64,
    end: i64,
}

/// Hands out producer ids; share it (all methods take `&self`).
#[derive(Debug)]
pub struct ProducerIds {
    disk: Disk,
    path: String,
    block: Mutex<Block>,
    /// Where blocks come from once the node runs a controller.
    controller: std::sync::OnceLock<ControllerChannel>,
}

impl ProducerIds {
    /// Reads the block file of the data directory `disk` is rooted at.
    pub async fn open(disk: Disk) -> Result<ProducerIds, ProducerIdError> {
        let path = PRODUCER_ID_BLOCK_FILE.to_string();
        let io = |op| {
            let path = path.clone();
            move |source| ProducerIdError::Io { op, path, source }
        };
        let end = if disk.exists(&path).await.map_err(io("stat"))? {
            let bytes = disk.read_file(&path).await.map_err(io("read"))?;
            decode_block_end(&bytes).map_err(|reason| ProducerIdError::Corrupt {
                path: path.clone(),
                reason,
            })?
        } else {
            0
        };
        Ok(ProducerIds {
            disk,
            path,
            // Nothing of the stored block is known to be unused: start a new one.
            block: Mutex::new(Block { next: end, end }),
            controller: std::sync::OnceLock::new(),
        })
    }

    /// The end of the last block reserved: the file's (0 without one) until a controller is
    /// attached, which is when the migration reads it.
    pub async fn block_end(&self) -> i64 {
        self.block.lock().await.end
    }

    /// From now on, blocks come from the controller; the file's block is dropped unused
    /// (its end went into the metadata log with the migration, so no id repeats).
    pub async fn attach_controller(&self, channel: ControllerChannel) {
        let mut block = self.block.lock().await;
        block.next = block.end;
        assert!(
            self.controller.set(channel).is_ok(),
            "a controller attached twice"
        );
    }

    /// A producer id never handed out before.
    pub async fn allocate(&self) -> Result<i64, ProducerIdError> {
        let mut block = self.block.lock().await;
        if block.next >= block.end {
            if let Some(channel) = self.controller.get() {
                let (start, len) = channel
                    .allocate_producer_ids()
                    .await
                    .map_err(ProducerIdError::Controller)?;
                assert!(len > 0, "an empty producer id block");
                assert!(start >= 0, "a negative producer id block");
                block.next = start;
                block.end = start + i64::from(len);
            } else {
                self.reserve_in_file(&mut block).await?;
            }
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }

    /// The next block of the file: its new end written durably before any id of it is given.
    async fn reserve_in_file(&self, block: &mut Block) -> Result<(), ProducerIdError> {
        let new_end = block
            .end
            .checked_add(BLOCK_SIZE)
            .ok_or(ProducerIdError::Exhausted)?;
        self.disk
            .write_file_atomic(&self.path, &encode_block_end(new_end))
            .await
            .map_err(|source| ProducerIdError::Io {
                op: "write",
                path: self.path.clone(),
                source,
            })?;
        tracing::debug!(
            start = block.end,
            end = new_end,
            "reserved a producer id block"
        );
        block.next = block.end;
        block.end = new_end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_end_round_trips_and_damage_is_refused() {
        let bytes = encode_block_end(123_000);
        assert_eq!(decode_block_end(&bytes), Ok(123_000));
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1;
            assert!(decode_block_end(&damaged).is_err(), "flip at {at}");
        }
        assert!(decode_block_end(&bytes[..10]).is_err());
    }
}
