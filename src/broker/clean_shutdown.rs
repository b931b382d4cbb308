//! The broker's clean-shutdown marker: Kafka's `.kafka_cleanshutdown` at the top of the log
//! directory, holding the broker epoch the process ran under (`{"version":0,"broker_epoch":N}`).
//!
//! Why: KIP-966 elects a leader from the ELR only among replicas that did not lose data since
//! they left the ISR. A broker proves a clean stop by registering with the epoch of the
//! session it stopped (`PreviousBrokerEpoch`); the controller takes a broker whose value does
//! not match out of every ELR, since after a crash its unsynced records may be gone.
//!
//! Under sync-before-ack a crash loses nothing a replica acknowledged: its fetch offsets and
//! its high watermark only ever counted synced records. Such a broker's logs are as good after
//! a power loss as after a clean stop, so it keeps the marker while it runs, for each epoch it
//! registers under ([`RunningMarker`]), and stays eligible from the ELR after a crash. Once a
//! log that acknowledges from the page cache (a topic's `flush.messages`/`flush.ms`) opens,
//! the marker goes, before that log can acknowledge anything, and is not written again until
//! a clean stop. A start whose recovery cut any log registers as unclean whatever the marker
//! says, since recovery cannot tell a rotten synced batch from a torn unsynced one. Rot below
//! the recovery point, which only the scrubber finds later, is outside the claim.
//!
//! Invariants:
//! - at a clean stop, the marker is written last, after every log closed and synced, with
//!   [`Disk::write_file_atomic`]: a crash before it completes leaves no marker (unclean);
//! - a start takes the marker and removes it durably before it registers, so a crash of this
//!   run is never mistaken for the clean stop of the previous one;
//! - a marker that cannot be parsed counts as no marker (unclean), with a warning naming the
//!   file: the cautious reading costs election eligibility, never data.

use crate::rt::disk::Disk;

/// The marker's name at the top of the log directory (Kafka's).
pub const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";
/// The marker's format version (Kafka's `CleanShutdownFileHandler` writes 0).
pub const CLEAN_SHUTDOWN_MARKER_VERSION: i64 = 0;
/// The largest marker read: the real one is about 40 bytes.
pub const CLEAN_SHUTDOWN_MARKER_BYTES_MAX: u64 = 4096;

/// Why the marker could not be taken or written.
#[derive(Debug)]
pub struct CleanShutdownError {
    pub op: &'static str,
    pub source: std::io::Error,
}

impl std::fmt::Display for CleanShutdownError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot {} the clean-shutdown marker {CLEAN_SHUTDOWN_MARKER}: {}",
            self.op, self.source
        )
    }
}

impl std::error::Error for CleanShutdownError {}

/// The marker's text for `broker_epoch`.
pub fn encode(broker_epoch: i64) -> String {
    format!("{{\"version\":{CLEAN_SHUTDOWN_MARKER_VERSION},\"broker_epoch\":{broker_epoch}}}")
}

/// The broker epoch a marker's text holds, or why it holds none.
pub fn decode(text: &str) -> Result<i64, String> {
    let body = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or("not a JSON object")?;
    let mut version = None;
    let mut epoch = None;
    for pair in body.split(',') {
        let (key, value) = pair.split_once(':').ok_or("a field without ':'")?;
        let value: i64 = value
            .trim()
            .parse()
            .map_err(|_| format!("{} is not an integer", value.trim()))?;
        match key.trim().trim_matches('"') {
            "version" => version = Some(value),
            "broker_epoch" => epoch = Some(value),
            _ => {}
        }
    }
    match (version, epoch) {
        (Some(CLEAN_SHUTDOWN_MARKER_VERSION), Some(epoch)) if epoch >= 0 => Ok(epoch),
        (Some(CLEAN_SHUTDOWN_MARKER_VERSION), Some(epoch)) => {
            Err(format!("broker_epoch {epoch} is negative"))
        }
        (Some(v), _) => Err(format!(
            "version {v} is not {CLEAN_SHUTDOWN_MARKER_VERSION}"
        )),
        (None, _) => Err("no version".into()),
    }
}

/// Takes the marker: the epoch of the clean stop before this start, or -1 (Kafka's "no
/// previous epoch") when there is none or it cannot be read. The marker is gone, durably,
/// when this returns Ok.
pub async fn take(disk: &Disk) -> Result<i64, CleanShutdownError> {
    let err = |op| move |source| CleanShutdownError { op, source };
    if !disk
        .exists(CLEAN_SHUTDOWN_MARKER)
        .await
        .map_err(err("look for"))?
    {
        return Ok(-1);
    }
    let epoch = match disk
        .open(CLEAN_SHUTDOWN_MARKER, crate::rt::disk::OpenMode::Existing)
        .await
    {
        Ok(file) => match file.len().await {
            Ok(len) if len <= CLEAN_SHUTDOWN_MARKER_BYTES_MAX => {
                let bytes = file.read_at(0, len as usize).await.map_err(err("read"))?;
                decode(&String::from_utf8_lossy(&bytes))
            }
            Ok(len) => Err(format!(
                "{len} bytes, above {CLEAN_SHUTDOWN_MARKER_BYTES_MAX}"
            )),
            Err(e) => return Err(err("read")(e)),
        },
        Err(e) => return Err(err("open")(e)),
    };
    let epoch = epoch.unwrap_or_else(|reason| {
        tracing::warn!(
            file = CLEAN_SHUTDOWN_MARKER,
            %reason,
            "the clean-shutdown marker is unreadable; registering as after an unclean shutdown"
        );
        -1
    });
    remove(disk).await?;
    Ok(epoch)
}

/// Removes the marker, durably, if there is one.
pub async fn remove(disk: &Disk) -> Result<(), CleanShutdownError> {
    let err = |op| move |source| CleanShutdownError { op, source };
    if disk
        .exists(CLEAN_SHUTDOWN_MARKER)
        .await
        .map_err(err("look for"))?
    {
        disk.remove(CLEAN_SHUTDOWN_MARKER)
            .await
            .map_err(err("remove"))?;
        disk.sync_dir("")
            .await
            .map_err(err("sync the directory of"))?;
    }
    Ok(())
}

/// Whether the marker may stand while the process runs: only while every log of the
/// directory syncs before it acknowledges. Both steps hold one lock, so a claim never lands
/// after a page-cache log opened.
#[derive(Debug, Default)]
pub struct RunningMarker {
    state: tokio::sync::Mutex<RunningState>,
}

#[derive(Debug, Default)]
struct RunningState {
    /// A log that acknowledges from the page cache opened in this process, or a log lost
    /// acknowledged records ([`RunningMarker::withdraw`]).
    withdrawn: bool,
    /// This process wrote the marker while running.
    claimed: bool,
}

impl RunningMarker {
    /// Called before a log that acknowledges from the page cache opens: the marker this
    /// process wrote goes, and none is written while it runs. (A marker of the previous run
    /// is left for the start to take.)
    pub async fn page_cache_log_opens(&self, disk: &Disk) -> Result<(), CleanShutdownError> {
        self.withdraw(disk).await
    }

    /// The marker this process wrote goes, and none is written while it runs: a log of the
    /// directory may not hold what this broker acknowledged (it acknowledges from the page
    /// cache, or a leader's scrubber found acknowledged records corrupt), so that the next
    /// start registers as after an unclean shutdown and leaves every ELR.
    pub async fn withdraw(&self, disk: &Disk) -> Result<(), CleanShutdownError> {
        let mut state = self.state.lock().await;
        if state.claimed {
            remove(disk).await?;
            state.claimed = false;
        }
        state.withdrawn = true;
        Ok(())
    }

    /// Writes the marker for `broker_epoch` unless a page-cache log opened; whether it did.
    pub async fn claim(&self, disk: &Disk, broker_epoch: i64) -> Result<bool, CleanShutdownError> {
        let mut state = self.state.lock().await;
        if state.withdrawn {
            return Ok(false);
        }
        write(disk, broker_epoch).await?;
        state.claimed = true;
        Ok(true)
    }
}

/// Writes the marker for a clean stop under `broker_epoch`.
pub async fn write(disk: &Disk, broker_epoch: i64) -> Result<(), CleanShutdownError> {
    disk.write_file_atomic(CLEAN_SHUTDOWN_MARKER, encode(broker_epoch).as_bytes())
        .await
        .map_err(|source| CleanShutdownError {
            op: "write",
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rt::disk::MemDisk;

    use crate::rt::block_on;

    #[test]
    fn a_withdrawn_running_marker_is_removed_and_never_claimed_again() {
        block_on(async {
            let disk = Disk::mem(MemDisk::new(1));
            let marker = RunningMarker::default();
            assert!(marker.claim(&disk, 7).await.unwrap());
            assert!(disk.read_file(CLEAN_SHUTDOWN_MARKER).await.is_ok());
            // A leader's scrubber found acknowledged records corrupt: the next start must
            // register as after an unclean shutdown.
            marker.withdraw(&disk).await.unwrap();
            assert!(disk.read_file(CLEAN_SHUTDOWN_MARKER).await.is_err());
            assert!(!marker.claim(&disk, 8).await.unwrap());
            assert!(disk.read_file(CLEAN_SHUTDOWN_MARKER).await.is_err());
            assert_eq!(take(&disk).await.unwrap(), -1);
        });
    }

    #[test]
    fn clean_shutdown_marker_round_trips_and_refuses_what_it_cannot_trust() {
        assert_eq!(decode(&encode(1234)), Ok(1234));
        assert_eq!(decode(" {\"broker_epoch\": 7, \"version\": 0}\n"), Ok(7));
        assert!(decode("").is_err());
        assert!(decode("{\"version\":1,\"broker_epoch\":7}").is_err());
        assert!(decode("{\"version\":0}").is_err());
        assert!(decode("{\"version\":0,\"broker_epoch\":-3}").is_err());
        assert!(decode("{\"version\":0,\"broker_epoch\":x}").is_err());
    }
}
