//! The high watermark checkpoint: Kafka's `replication-offset-checkpoint`, kept per partition
//! log (in the log's directory, beside Samsa's per-log `recovery-point-offset-checkpoint`)
//! rather than one file per log directory, so that a partition's files stay in its directory.
//!
//! Format (text, as Kafka's offset checkpoints): the version line `0`, then the high
//! watermark on one line. Written atomically (a temporary file, fsync, rename, directory
//! fsync) by the broker's checkpoint task every `replica.high.watermark.checkpoint.interval.ms`
//! and when it stops.
//!
//! Why a checkpoint: a replica that restarts must not take its log end for its high
//! watermark. On a follower the tail of its log may be above what the ISR holds; a leader
//! elected before it catches up would then report, and serve, records that are not
//! acknowledged. A missing or unusable file means 0 (nothing known acknowledged): the leader
//! learns the real value from its ISR, a follower from its leader.
//!
//! Invariant: a value read back is capped at the log end by the caller (the checkpoint may
//! predate a truncation).

use crate::rt::disk::{join, Disk};

pub const HIGH_WATERMARK_CHECKPOINT_FILE: &str = "replication-offset-checkpoint";

pub fn encode(high_watermark: i64) -> String {
    format!("0\n{high_watermark}\n")
}

/// Parses a checkpoint; `Err` says why it cannot be used.
pub fn decode(bytes: &[u8]) -> Result<i64, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    let mut lines = text.lines();
    match lines.next() {
        Some("0") => {}
        Some(other) => return Err(format!("unknown version {other:?}")),
        None => return Err("empty".to_string()),
    }
    let line = lines.next().ok_or("no high watermark line")?;
    let value: i64 = line
        .trim()
        .parse()
        .map_err(|_| format!("high watermark {line:?} is not a number"))?;
    if value < 0 {
        return Err(format!("negative high watermark {value}"));
    }
    if lines.next().is_some_and(|l| !l.trim().is_empty()) {
        return Err("more than one high watermark line".to_string());
    }
    Ok(value)
}

/// Reads the checkpoint of the log in `dir`: `None` when missing or unusable (with a warning
/// naming the file and why).
pub async fn read(disk: &Disk, dir: &str) -> Option<i64> {
    let path = join(dir, HIGH_WATERMARK_CHECKPOINT_FILE);
    if !disk.exists(&path).await.unwrap_or(false) {
        return None;
    }
    match disk.read_file(&path).await {
        Ok(bytes) => match decode(&bytes) {
            Ok(value) => Some(value),
            Err(why) => {
                tracing::warn!(path = %path, why, "ignoring an unusable high watermark checkpoint");
                None
            }
        },
        Err(e) => {
            tracing::warn!(path = %path, error = %e, "cannot read the high watermark checkpoint");
            None
        }
    }
}

/// Writes the checkpoint of the log in `dir` durably and atomically.
pub async fn write(disk: &Disk, dir: &str, high_watermark: i64) -> std::io::Result<()> {
    assert!(high_watermark >= 0, "a negative high watermark");
    let path = join(dir, HIGH_WATERMARK_CHECKPOINT_FILE);
    disk.write_file_atomic(&path, encode(high_watermark).as_bytes())
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_reads_back_what_was_written() {
        assert_eq!(decode(encode(0).as_bytes()), Ok(0));
        assert_eq!(decode(encode(1234).as_bytes()), Ok(1234));
    }

    #[test]
    fn a_bad_checkpoint_says_why() {
        assert!(decode(b"").unwrap_err().contains("empty"));
        assert!(decode(b"1\n5\n").unwrap_err().contains("version"));
        assert!(decode(b"0\nfive\n").unwrap_err().contains("not a number"));
        assert!(decode(b"0\n-3\n").unwrap_err().contains("negative"));
        assert!(decode(b"0\n").unwrap_err().contains("no high watermark"));
        assert!(decode(b"0\n5\n6\n").unwrap_err().contains("more than one"));
    }
}
