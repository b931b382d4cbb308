//! The scrubber's step: verifying data at rest that no other path checks.
//!
//! Production reads are zero-copy and do not check CRCs, and recovery scans only from the
//! recovery point on, so a batch damaged on disk below the recovery point would be served
//! until a client's CRC check refused it. [`Log::scrub_step`] reads such batches back a
//! little at a time and checks each one as recovery does: its header parses (length, magic),
//! its CRC-32C matches, and its base offset continues the previous batch (the base offset lies
//! outside the CRC, so continuity is its only check); a segment's batches must end where the
//! log continues.
//!
//! What is scrubbed: closed segments (never the active one) wholly below the checkpointed
//! recovery point and not wholly below the log start offset. Their bytes never change (appends
//! go to the active segment; only a truncation, which bumps `State::truncations`, can cut below
//! the recovery point), so a step reads them without the state lock: it takes the lock to pick
//! the segment and clone its file handle, and again only if it found something. A segment that
//! retention deletes meanwhile stays readable through that handle; a finding in it is dropped,
//! because its batches are no longer served.
//!
//! Reads go through `File::read_at_in_background`: data at rest is mostly cold, and a read
//! that waits for the disk must not hold up a worker that serves connections.
//!
//! Invariants:
//! - a step reads about `budget_bytes` (more only when a single batch is larger than the
//!   budget, and a batch is at most `record_batch::BATCH_LEN_MAX`), always starting at a batch
//!   boundary it verified itself or at the start of a segment;
//! - a finding is reported only if, after the read, its segment is still in the log and still
//!   scrubbable and no truncation happened since the segment was picked.

use super::segment::{check_batch_place, Segment};
use super::{Log, LogError, State};
use crate::protocol::record_batch::{self, BatchError, BatchHeader, BATCH_HEADER_LEN};
use crate::rt::disk::File;

/// Where the next scrub step starts. Opaque: start with [`ScrubCursor::START`] and pass each
/// step's [`ScrubStep::cursor`] to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScrubCursor {
    /// The next step scrubs the first scrubbable segment whose base offset is at or above this.
    segment_base: i64,
    /// The byte position to resume at, if that segment's base is exactly `segment_base`.
    position: u64,
    /// The base offset the batch at `position` must have.
    next_offset: i64,
    /// `State::truncations` when the position was taken; after a truncation the segment is
    /// scrubbed again from its start, since `position` may no longer be a batch boundary.
    truncations: u64,
}

impl ScrubCursor {
    /// The start of the log.
    pub const START: ScrubCursor = ScrubCursor {
        segment_base: i64::MIN,
        position: 0,
        next_offset: 0,
        truncations: 0,
    };

    /// The base offset at or above which the next step looks for a segment.
    pub fn segment_base(&self) -> i64 {
        self.segment_base
    }

    /// The byte position the next step resumes at in that segment.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The start of the first segment after the one based at `base`. (A segment based exactly
    /// at `base + 1`, after a one-offset segment, resumes at position 0 expecting its base.)
    fn after(base: i64, truncations: u64) -> ScrubCursor {
        let next = base.saturating_add(1);
        ScrubCursor {
            segment_base: next,
            position: 0,
            next_offset: next,
            truncations,
        }
    }
}

impl Default for ScrubCursor {
    fn default() -> Self {
        ScrubCursor::START
    }
}

/// A batch at rest that failed its check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScrubCorruption {
    /// The segment's `.log` file.
    pub segment: String,
    pub segment_base: i64,
    /// Byte position of the batch in the file (the end of the last good batch if the log
    /// does not continue there).
    pub position: u64,
    /// The first offset of the failed batch: the end offset of the last good batch before it,
    /// which is also all that is known when the header is unreadable.
    pub offset: i64,
    pub reason: String,
}

/// What one [`Log::scrub_step`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScrubStep {
    /// Where the next step starts.
    pub cursor: ScrubCursor,
    /// Bytes read from disk; 0 means there was nothing to scrub.
    pub bytes_read: u64,
    pub batches_verified: u64,
    /// The step started over at the first scrubbable segment: the previous pass is complete.
    pub wrapped: bool,
    pub corrupt: Option<ScrubCorruption>,
}

/// The segment a step reads, copied out of the state so the read holds no lock.
struct Target {
    file: File,
    base: i64,
    size: u64,
    /// The segment's next offset: where its last batch must end.
    end_offset: i64,
    position: u64,
    expected: i64,
    /// The segment was rewritten by the cleaner: its offsets may have gaps.
    gaps: bool,
    truncations: u64,
}

/// What a walk over one read found.
struct Walk {
    position: u64,
    expected: i64,
    bytes_read: u64,
    batches: u64,
    /// The position and reason of the first failure, if any.
    failure: Option<(u64, String)>,
}

/// The segments a step may read: closed, wholly below the recovery point, not wholly below
/// the log start offset.
fn scrubbable(state: &State) -> impl Iterator<Item = &Segment> {
    let active_base = state.active().base_offset;
    state.segments.values().filter(move |s| {
        s.base_offset != active_base
            && s.next_offset <= state.recovery_point
            && s.next_offset > state.log_start_offset
    })
}

/// Chooses where a step reads: the cursor's segment (or the next scrubbable one), wrapping
/// to the first when the cursor is past the last. `None` when nothing is scrubbable.
fn pick(state: &State, cursor: ScrubCursor) -> Option<(Target, bool)> {
    let same_generation = cursor.truncations == state.truncations;
    let target = |s: &Segment, (position, expected): (u64, i64)| Target {
        file: s.log.clone(),
        base: s.base_offset,
        size: s.size,
        end_offset: s.next_offset,
        position,
        expected,
        gaps: s.gaps,
        truncations: state.truncations,
    };
    let onward = scrubbable(state)
        .filter(|s| s.base_offset >= cursor.segment_base)
        .find_map(|s| {
            let start = if s.base_offset == cursor.segment_base && same_generation {
                (cursor.position, cursor.next_offset)
            } else {
                (0, s.base_offset)
            };
            (start.0 < s.size).then(|| target(s, start))
        });
    if let Some(found) = onward {
        return Some((found, false));
    }
    scrubbable(state)
        .find(|s| s.size > 0)
        .map(|s| (target(s, (0, s.base_offset)), true))
}

/// Verifies whole batches of `target` from its position, reading about `budget_bytes`.
async fn walk(target: &Target, budget_bytes: u64) -> Result<Walk, LogError> {
    let io = |e| LogError::io("scrub read", target.file.path(), e);
    let remaining = target.size - target.position;
    let want = budget_bytes.max(BATCH_HEADER_LEN as u64).min(remaining);
    // `want` is at most a segment's size, which fits the 32-bit index positions.
    let want_len = usize::try_from(want).unwrap_or(usize::MAX);
    let chunk = target
        .file
        .read_at_in_background(target.position, want_len)
        .await
        .map_err(io)?;
    let chunk_short = chunk.len() < want_len;
    let mut walk = Walk {
        position: target.position,
        expected: target.expected,
        bytes_read: chunk.len() as u64,
        batches: 0,
        failure: None,
    };
    let mut at = 0usize;
    while walk.position < target.size {
        let rest = chunk.slice(at.min(chunk.len())..);
        let header = match BatchHeader::parse(&rest) {
            Ok(header) => header,
            Err(BatchError::Truncated { .. }) if rest.len() < BATCH_HEADER_LEN => {
                if walk.position + rest.len() as u64 >= target.size || chunk_short {
                    walk.failure = Some((
                        walk.position,
                        format!(
                            "a batch header is cut off: {} bytes where {BATCH_HEADER_LEN} are needed",
                            rest.len()
                        ),
                    ));
                }
                // Otherwise the header continues past this read: the next step reads it.
                break;
            }
            Err(e) => {
                walk.failure = Some((walk.position, e.to_string()));
                break;
            }
        };
        if let Err(why) = check_batch_place(
            &header,
            walk.position,
            target.size,
            walk.expected,
            target.gaps,
        ) {
            walk.failure = Some((walk.position, why));
            break;
        }
        let total = header.total_len();
        let batch = if rest.len() >= total {
            rest.slice(..total)
        } else if at == 0 {
            // One batch larger than the budget: read it whole (parse bounds it by
            // BATCH_LEN_MAX), so that every step makes progress.
            let batch = target
                .file
                .read_at_in_background(walk.position, total)
                .await
                .map_err(io)?;
            walk.bytes_read += batch.len() as u64;
            if batch.len() < total {
                walk.failure = Some((
                    walk.position,
                    format!("short read: {} of a {total}-byte batch", batch.len()),
                ));
                break;
            }
            batch
        } else {
            break; // The rest of this batch is the next step's.
        };
        if let Err(e) = record_batch::verify(&batch) {
            walk.failure = Some((walk.position, e.to_string()));
            break;
        }
        at += total;
        walk.position += total as u64;
        walk.expected = header.next_offset();
        walk.batches += 1;
    }
    if walk.failure.is_none() && walk.position >= target.size && walk.expected != target.end_offset
    {
        walk.failure = Some((
            walk.position,
            format!(
                "the segment's batches end at offset {} where the log continues at {}",
                walk.expected, target.end_offset
            ),
        ));
    }
    Ok(walk)
}

impl Log {
    /// One step of the background scrubber: verifies whole batches (length, magic, CRC-32C,
    /// offsets continuing from batch to batch) of the closed segments wholly below the
    /// checkpointed recovery point, from `cursor` on, reading about `budget_bytes`, and
    /// returns the cursor for the next step (which wraps to the first segment after the last)
    /// and the first failed batch, if any. After a finding the cursor moves on to the next
    /// segment. The state lock is held only to pick the segment and, after a finding, to check
    /// that the segment is still the log's; never across the reads (see the module docs).
    ///
    /// Errors: the log is offline, or a read failed (the log is not taken offline for that,
    /// as a failed read on the serving path does not take it offline either).
    pub async fn scrub_step(
        &self,
        cursor: ScrubCursor,
        budget_bytes: u64,
    ) -> Result<ScrubStep, LogError> {
        let picked = {
            let state = self.state.lock().await;
            state.online()?;
            pick(&state, cursor)
        };
        let Some((target, wrapped)) = picked else {
            return Ok(ScrubStep {
                cursor: ScrubCursor::START,
                bytes_read: 0,
                batches_verified: 0,
                wrapped: false,
                corrupt: None,
            });
        };
        let walk = walk(&target, budget_bytes).await?;
        let mut step = ScrubStep {
            cursor: ScrubCursor {
                segment_base: target.base,
                position: walk.position,
                next_offset: walk.expected,
                truncations: target.truncations,
            },
            bytes_read: walk.bytes_read,
            batches_verified: walk.batches,
            wrapped,
            corrupt: None,
        };
        if walk.position >= target.size {
            step.cursor = ScrubCursor::after(target.base, target.truncations);
        }
        if let Some((position, reason)) = walk.failure {
            step.cursor = ScrubCursor::after(target.base, target.truncations);
            let state = self.state.lock().await;
            let still_served = state.truncations == target.truncations
                && scrubbable(&state).any(|s| s.base_offset == target.base);
            if still_served {
                step.corrupt = Some(ScrubCorruption {
                    segment: target.file.path().to_string(),
                    segment_base: target.base,
                    position,
                    offset: walk.expected,
                    reason,
                });
            }
        }
        Ok(step)
    }
}

// Unit tests on real files; the sim build runs the simulation instead.
#[cfg(all(test, not(feature = "sim")))]
mod tests {
    use super::*;
    use crate::log::{FlushPolicy, LogConfig};
    use crate::protocol::record_batch::BatchBuilder;
    use crate::rt::clock::Clock;
    use crate::rt::disk::{Disk, OpenMode};
    use std::sync::Arc;

    const DIR: &str = "scrub-0";
    const RECORDS_PER_BATCH: i64 = 3;
    const SEGMENT_BYTES: u64 = 1024;
    /// Steps any test takes at most: far more than a pass over its log needs.
    const STEPS_MAX: usize = 1000;

    fn config() -> LogConfig {
        LogConfig {
            segment_bytes: SEGMENT_BYTES,
            index_interval_bytes: 128,
            ..LogConfig::default()
        }
    }

    /// Batches of one size, so segment `k` holds batches `k*n..(k+1)*n` at positions `j*len`.
    fn batch(i: i64) -> bytes::Bytes {
        let mut builder = BatchBuilder::new(0);
        for r in 0..RECORDS_PER_BATCH {
            let offset = i * RECORDS_PER_BATCH + r;
            builder.push(1_000 + offset, None, Some(&[offset as u8; 60]), &[]);
        }
        builder.build().freeze()
    }

    fn batch_len() -> u64 {
        batch(0).len() as u64
    }

    fn batches_per_segment() -> i64 {
        (SEGMENT_BYTES / batch_len()) as i64
    }

    async fn open(disk: &Disk, config: LogConfig) -> Arc<Log> {
        Log::open(disk.clone(), DIR, config, Clock::new())
            .await
            .expect("open")
            .0
    }

    /// A log of `batches` batches, closed and reopened so that the recovery point is its end.
    async fn written(batches: i64) -> (tempfile::TempDir, Disk, Arc<Log>) {
        let tmp = tempfile::tempdir().expect("temp dir");
        let disk = Disk::real(tmp.path()).expect("disk");
        let log = open(&disk, config()).await;
        for i in 0..batches {
            log.append(batch(i)).await.expect("append");
        }
        log.close().await.expect("close");
        let log = open(&disk, config()).await;
        (tmp, disk, log)
    }

    /// Flips one byte of a segment's file behind the log's back, durably.
    async fn flip(disk: &Disk, segment_base: i64, position: u64) {
        let path = Segment::path(DIR, segment_base, ".log");
        let file = disk.open(&path, OpenMode::Existing).await.expect("open");
        let byte = file.read_at(position, 1).await.expect("read");
        file.write_at(position, &[byte[0] ^ 0x5a])
            .await
            .expect("write");
        file.sync().await.expect("sync");
    }

    /// Steps until a finding, or until a pass is complete; returns the finding and the batches
    /// verified before it, and checks each step's budget and that it stays below `below_base`.
    async fn scrub_pass(
        log: &Log,
        budget_bytes: u64,
        below_base: i64,
    ) -> (Option<ScrubCorruption>, u64) {
        let mut cursor = ScrubCursor::START;
        let mut batches = 0;
        for _ in 0..STEPS_MAX {
            let step = log.scrub_step(cursor, budget_bytes).await.expect("step");
            if step.wrapped || step.bytes_read == 0 {
                return (None, batches);
            }
            // At most the budget, or the budget's read and then the one batch that is larger.
            let most = if budget_bytes >= batch_len() {
                budget_bytes
            } else {
                budget_bytes.max(BATCH_HEADER_LEN as u64) + batch_len()
            };
            assert!(
                step.bytes_read <= most,
                "step read {} bytes on a budget of {budget_bytes}",
                step.bytes_read
            );
            batches += step.batches_verified;
            if step.corrupt.is_some() {
                return (step.corrupt, batches);
            }
            assert!(step.cursor.segment_base() <= below_base);
            cursor = step.cursor;
        }
        panic!("no pass completed in {STEPS_MAX} steps");
    }

    #[tokio::test]
    async fn a_flipped_byte_is_found_at_its_segment_position_and_offset() {
        let n = batches_per_segment();
        let (_tmp, disk, log) = written(8 * n + 1).await;
        assert!(log.segment_count().await >= 8);
        let base = 2 * n * RECORDS_PER_BATCH;
        // A byte in the records of segment 2's second batch: its CRC fails.
        flip(&disk, base, 2 * batch_len() - 5).await;
        // Reading through the segment boundary-by-boundary: the budget is not a multiple of
        // the batch size, so steps end mid-batch too.
        let (found, batches) = scrub_pass(&log, batch_len() + 17, i64::MAX).await;
        let found = found.expect("the scrubber finds the flipped byte");
        assert_eq!(found.segment_base, base);
        assert!(found.segment.ends_with(&format!("{base:020}.log")));
        assert_eq!(found.position, batch_len());
        assert_eq!(found.offset, base + RECORDS_PER_BATCH);
        assert!(found.reason.contains("CRC"), "{}", found.reason);
        assert_eq!(batches, 2 * n as u64 + 1);
    }

    #[tokio::test]
    async fn an_unreadable_header_is_found_at_the_end_of_the_last_good_batch() {
        let n = batches_per_segment();
        let (_tmp, disk, log) = written(4 * n + 1).await;
        let base = n * RECORDS_PER_BATCH;
        // The magic byte (position 16 of a batch) of segment 1's third batch.
        flip(&disk, base, 2 * batch_len() + 16).await;
        let (found, _) = scrub_pass(&log, 4096, i64::MAX).await;
        let found = found.expect("found");
        assert_eq!(
            (found.segment_base, found.position, found.offset),
            (base, 2 * batch_len(), base + 2 * RECORDS_PER_BATCH)
        );
        assert!(found.reason.contains("magic"), "{}", found.reason);
    }

    #[tokio::test]
    async fn an_intact_log_scrubs_clean_and_wraps_around() {
        let n = batches_per_segment();
        let (_tmp, _disk, log) = written(5 * n + 2).await;
        let segments = log.segment_count().await as u64;
        let closed_batches = (segments - 1) * n as u64;
        let active_base = 5 * n * RECORDS_PER_BATCH;
        for budget in [1, batch_len() / 2, 3 * batch_len(), 1 << 20] {
            let (found, batches) = scrub_pass(&log, budget, active_base).await;
            assert_eq!(found, None);
            assert_eq!(batches, closed_batches, "budget {budget}");
        }
        // After the wrap the next pass starts at the first segment again.
        let mut cursor = ScrubCursor::START;
        let mut wrapped = None;
        for _ in 0..STEPS_MAX {
            let step = log.scrub_step(cursor, 1 << 20).await.expect("step");
            if step.wrapped {
                wrapped = Some(step);
                break;
            }
            cursor = step.cursor;
        }
        let wrapped = wrapped.expect("wraps");
        assert_eq!(wrapped.bytes_read, n as u64 * batch_len());
        assert_eq!(wrapped.cursor.segment_base(), 1);
    }

    #[tokio::test]
    async fn segments_of_one_offset_each_scrub_clean() {
        // One 700-byte record per batch and per 1 KiB segment: segment k is based at k, and
        // the cursor after segment k names base k + 1 exactly.
        let tmp = tempfile::tempdir().expect("temp dir");
        let disk = Disk::real(tmp.path()).expect("disk");
        let log = open(&disk, config()).await;
        for i in 0..6 {
            let mut builder = BatchBuilder::new(0);
            builder.push(1_000 + i, None, Some(&[i as u8; 700]), &[]);
            log.append(builder.build().freeze()).await.expect("append");
        }
        log.close().await.expect("close");
        let log = open(&disk, config()).await;
        assert_eq!(log.segment_count().await, 6);
        let (found, batches) = scrub_pass(&log, 1 << 20, 5).await;
        assert_eq!(found, None);
        assert_eq!(batches, 5);
    }

    #[tokio::test]
    async fn the_budget_bounds_each_step() {
        let n = batches_per_segment();
        let (_tmp, _disk, log) = written(3 * n + 1).await;
        let budget = 2 * batch_len() + 10;
        let step = log
            .scrub_step(ScrubCursor::START, budget)
            .await
            .expect("step");
        assert_eq!(step.bytes_read, budget);
        assert_eq!(step.batches_verified, 2);
        assert_eq!(step.cursor.position(), 2 * batch_len());
        // A budget smaller than one batch still verifies one whole batch per step.
        let step = log
            .scrub_step(step.cursor, batch_len() / 3)
            .await
            .expect("step");
        assert_eq!(step.batches_verified, 1);
        assert!(step.bytes_read <= batch_len() / 3 + batch_len());
    }

    #[tokio::test]
    async fn the_active_segment_and_data_above_the_recovery_point_are_not_scrubbed() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let disk = Disk::real(tmp.path()).expect("disk");
        // Page-cache mode with no flush due: nothing is checkpointed until `flush_to`.
        let config = LogConfig {
            flush: FlushPolicy::PageCache {
                flush_messages: u64::MAX,
                flush_ms: u64::MAX,
            },
            ..config()
        };
        let log = open(&disk, config).await;
        let n = batches_per_segment();
        for i in 0..3 * n {
            log.append(batch(i)).await.expect("append");
        }
        let step = log
            .scrub_step(ScrubCursor::START, 1 << 20)
            .await
            .expect("step");
        assert_eq!(
            step.bytes_read, 0,
            "nothing is below the recovery point yet"
        );
        // Checkpoint the end of segment 2 (still active here): segments 0 and 1 are closed
        // and below the recovery point, and segment 2 is once the next append closes it.
        log.flush_to(log.log_end_offset()).await.expect("flush");
        for i in 3 * n..5 * n + 1 {
            log.append(batch(i)).await.expect("append");
        }
        // Segments 3 and 4 are closed but above the recovery point (unsynced); 5 is active.
        for base in [3, 4, 5] {
            flip(&disk, base * n * RECORDS_PER_BATCH, 20).await;
        }
        let (found, batches) = scrub_pass(&log, 1 << 20, 3 * n * RECORDS_PER_BATCH).await;
        assert_eq!(found, None);
        assert_eq!(batches, 3 * n as u64);
    }
}
