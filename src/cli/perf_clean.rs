//! `samsa perf clean`: the log cleaner's throughput on real files, next to a raw sequential
//! read of the same segments in the same run.
//!
//! It writes a compacted log of `--bytes` of `--record-bytes` records over `--keys` keys
//! (drawn uniformly, values half random and half text, so that lz4 has something to do) in
//! batches of `RECORDS_PER_BATCH`, compressed with `--compression`, into `--dir`, twice
//! with the same seed (one copy for a cold-cache pass, one for a warm one). Then, on the
//! closed segments (everything but the active one):
//! - raw read, cold: the files' pages are dropped from the page cache (`File::drop_cache`),
//!   then every segment is read in `READ_CHUNK_BYTES` reads; warm: the same again;
//! - clean, cold: the first copy's pages dropped, one cleaner pass (ratio 0, the whole log
//!   cleanable); warm: the second copy read once to warm it, then one pass.
//!
//! Throughput is bytes of input (the closed segments the pass cleaned) per second of wall
//! time. All time is read through `crate::rt::time`; the disk goes through `crate::rt::disk`.

use std::time::Duration;

use crate::log::cleaner::{CleanOutcome, CleanerPolicy};
use crate::log::{FlushPolicy, Log, LogConfig};
use crate::protocol::record_batch::{BatchBuilder, Compression};
use crate::rt::clock::Clock;
use crate::rt::disk::{Disk, File, OpenMode};
use crate::rt::latch::Latch;
use crate::rt::time::now;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

pub const USAGE: &str = "usage: samsa perf clean --dir D [options]

  --dir D                 an empty (or new) directory for the logs (two copies of --bytes)
  --bytes N               bytes of records to write (default 268435456)
  --record-bytes N        bytes of each record's value (default 1024)
  --keys N                distinct keys (default 10000)
  --compression C         none or lz4 (default none)
  --segment-bytes N       segment.bytes of the log (default 67108864)
  --json                  print the summary as one JSON object";

/// Records per produced batch.
const RECORDS_PER_BATCH: usize = 16;
/// Bytes of one read of the raw-read measurement.
const READ_CHUNK_BYTES: usize = 1 << 20;
/// The largest `--bytes` accepted: two copies must fit on the disk.
const BYTES_MAX: u64 = 64 << 30;
/// The largest `--record-bytes` accepted: a batch stays well under a segment.
const RECORD_BYTES_MAX: usize = 1 << 20;
const _: () = assert!(RECORD_BYTES_MAX * RECORDS_PER_BATCH <= 64 << 20);

/// The parsed command line of `samsa perf clean`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Options {
    dir: String,
    bytes: u64,
    record_bytes: usize,
    keys: u64,
    compression: Compression,
    segment_bytes: u64,
    json: bool,
}

/// Parses the arguments after `clean`.
pub(super) fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        dir: String::new(),
        bytes: 256 << 20,
        record_bytes: 1024,
        keys: 10_000,
        compression: Compression::None,
        segment_bytes: 64 << 20,
        json: false,
    };
    let json = super::perf::parse_flags(args, |flag, value| {
        let bad = |what: &str| format!("{flag}: '{value}' is not a valid {what}");
        match flag {
            "--dir" => options.dir = value.to_owned(),
            "--bytes" => options.bytes = value.parse().map_err(|_| bad("size"))?,
            "--record-bytes" => options.record_bytes = value.parse().map_err(|_| bad("size"))?,
            "--keys" => options.keys = value.parse().map_err(|_| bad("count"))?,
            "--segment-bytes" => options.segment_bytes = value.parse().map_err(|_| bad("size"))?,
            "--compression" => {
                options.compression = match value {
                    "none" => Compression::None,
                    "lz4" => Compression::Lz4,
                    _ => return Err(bad("codec (none or lz4)")),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    options.json = json;
    if options.dir.is_empty() {
        return Err("--dir is required".into());
    }
    if !(1..=BYTES_MAX).contains(&options.bytes) {
        return Err(format!("--bytes must be in [1, {BYTES_MAX}]"));
    }
    if !(1..=RECORD_BYTES_MAX).contains(&options.record_bytes) {
        return Err(format!("--record-bytes must be in [1, {RECORD_BYTES_MAX}]"));
    }
    if options.keys == 0 {
        return Err("--keys must be at least 1".into());
    }
    let batch_bytes = (options.record_bytes * RECORDS_PER_BATCH) as u64;
    if options.segment_bytes < 2 * batch_bytes
        || options.segment_bytes > crate::log::SEGMENT_BYTES_MAX
    {
        return Err(format!(
            "--segment-bytes must be in [{}, {}] (two batches of {RECORDS_PER_BATCH} records)",
            2 * batch_bytes,
            crate::log::SEGMENT_BYTES_MAX
        ));
    }
    Ok(options)
}

fn log_config(options: &Options) -> LogConfig {
    LogConfig {
        segment_bytes: options.segment_bytes,
        // Written once and closed (synced) before anything is measured.
        flush: FlushPolicy::PageCache {
            flush_messages: u64::MAX,
            flush_ms: u64::MAX,
        },
        ..LogConfig::default()
    }
}

/// Writes the log `dir` from `seed`; returns its closed segments' files and their bytes.
async fn write_log(disk: &Disk, dir: &str, options: &Options, seed: u64) -> Result<(), String> {
    let (log, _) = Log::open(disk.clone(), dir, log_config(options), Clock::new())
        .await
        .map_err(|e| format!("opening {dir}: {e}"))?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let timestamp = Clock::new().now_ms();
    let mut value = vec![0u8; options.record_bytes];
    let mut written = 0u64;
    while written < options.bytes {
        let mut batch = BatchBuilder::new(0).compression(options.compression);
        for _ in 0..RECORDS_PER_BATCH {
            let key = format!("key-{:08}", rng.gen_range(0..options.keys));
            // Half random bytes, half text: compressible about two to one.
            let half = value.len() / 2;
            rng.fill(&mut value[..half]);
            for (i, b) in value[half..].iter_mut().enumerate() {
                *b = b"the quick brown fox jumps over the lazy dog "[i % 44];
            }
            batch.push(timestamp, Some(key.as_bytes()), Some(&value), &[]);
        }
        written += (RECORDS_PER_BATCH * options.record_bytes) as u64;
        log.append(batch.build().freeze())
            .await
            .map_err(|e| format!("writing {dir}: {e}"))?;
    }
    log.close().await.map_err(|e| format!("closing {dir}: {e}"))
}

/// The closed segments' `.log` files of `dir` (all but the last) and their total size.
async fn closed_segments(disk: &Disk, dir: &str) -> Result<(Vec<File>, u64), String> {
    let mut names: Vec<String> = disk
        .list(dir)
        .await
        .map_err(|e| format!("listing {dir}: {e}"))?
        .into_iter()
        .filter(|n| crate::log::segment::parse_log_name(n).is_some())
        .collect();
    names.sort();
    names.pop();
    let mut files = Vec::new();
    let mut bytes = 0;
    for name in names {
        let path = crate::rt::disk::join(dir, &name);
        let file = disk
            .open(&path, OpenMode::Existing)
            .await
            .map_err(|e| format!("opening {path}: {e}"))?;
        bytes += file.len().await.map_err(|e| format!("{path}: {e}"))?;
        files.push(file);
    }
    Ok((files, bytes))
}

fn drop_caches(files: &[File]) -> Result<(), String> {
    for file in files {
        file.drop_cache()
            .map_err(|e| format!("dropping the page cache of {}: {e}", file.path()))?;
    }
    Ok(())
}

/// Reads every file whole, in order, in `READ_CHUNK_BYTES` reads; returns the time taken.
async fn read_all(files: &[File]) -> Result<Duration, String> {
    let began = now();
    for file in files {
        let len = file.len().await.map_err(|e| e.to_string())?;
        let mut at = 0;
        while at < len {
            let want = (len - at).min(READ_CHUNK_BYTES as u64) as usize;
            let bytes = file
                .read_at(at, want)
                .await
                .map_err(|e| format!("reading {}: {e}", file.path()))?;
            if bytes.is_empty() {
                break;
            }
            at += bytes.len() as u64;
        }
    }
    Ok(began.elapsed())
}

/// One cleaner pass over the log `dir`; returns its outcome and the time taken.
async fn clean(
    disk: &Disk,
    dir: &str,
    options: &Options,
) -> Result<(CleanOutcome, Duration), String> {
    let (log, _) = Log::open(disk.clone(), dir, log_config(options), Clock::new())
        .await
        .map_err(|e| format!("opening {dir}: {e}"))?;
    let policy = CleanerPolicy {
        min_cleanable_dirty_ratio: 0.0,
        ..CleanerPolicy::DEFAULT
    };
    let began = now();
    let outcome = log
        .clean(
            &policy,
            log.log_end_offset(),
            Clock::new().now_ms(),
            &Latch::new(),
        )
        .await
        .map_err(|e| format!("cleaning {dir}: {e}"))?;
    let took = began.elapsed();
    log.close()
        .await
        .map_err(|e| format!("closing {dir}: {e}"))?;
    Ok((outcome, took))
}

fn mb_per_s(bytes: u64, took: Duration) -> f64 {
    bytes as f64 / 1e6 / took.as_secs_f64().max(1e-9)
}

/// Runs the benchmark and returns its summary (text or JSON).
pub(super) async fn run(options: Options) -> Result<String, String> {
    let disk = Disk::real(&options.dir).map_err(|e| format!("{}: {e}", options.dir))?;
    if !disk.list("").await.map_err(|e| e.to_string())?.is_empty() {
        return Err(format!("{} is not empty", options.dir));
    }
    let (cold_dir, warm_dir) = ("clean-cold-0", "clean-warm-0");
    write_log(&disk, cold_dir, &options, 7).await?;
    write_log(&disk, warm_dir, &options, 7).await?;
    let (cold_files, input_bytes) = closed_segments(&disk, cold_dir).await?;
    let (warm_files, _) = closed_segments(&disk, warm_dir).await?;

    drop_caches(&cold_files)?;
    let read_cold = read_all(&cold_files).await?;
    let read_warm = read_all(&cold_files).await?;

    drop_caches(&cold_files)?;
    drop(cold_files);
    let (cold, clean_cold) = clean(&disk, cold_dir, &options).await?;
    read_all(&warm_files).await?;
    drop(warm_files);
    let (warm, clean_warm) = clean(&disk, warm_dir, &options).await?;

    let read_cold_mb = mb_per_s(input_bytes, read_cold);
    let read_warm_mb = mb_per_s(input_bytes, read_warm);
    let clean_cold_mb = mb_per_s(input_bytes, clean_cold);
    let clean_warm_mb = mb_per_s(input_bytes, clean_warm);
    let codec = match options.compression {
        Compression::Lz4 => "lz4",
        _ => "none",
    };
    if options.json {
        return Ok(format!(
            "{{\"compression\":\"{codec}\",\"input_bytes\":{input_bytes},\"keys\":{},\
             \"record_bytes\":{},\"read_cold_mb_s\":{read_cold_mb:.1},\"read_warm_mb_s\":{read_warm_mb:.1},\
             \"clean_cold_mb_s\":{clean_cold_mb:.1},\"clean_warm_mb_s\":{clean_warm_mb:.1},\
             \"output_bytes\":{},\"records_removed\":{}}}",
            options.keys, options.record_bytes, cold.bytes_written, cold.records_removed
        ));
    }
    Ok(format!(
        "{input_bytes} bytes of closed segments ({codec}, {} keys, {}-byte records)\n\
         raw read  cold {read_cold_mb:.1} MB/s  warm {read_warm_mb:.1} MB/s\n\
         clean     cold {clean_cold_mb:.1} MB/s  warm {clean_warm_mb:.1} MB/s  ({:.2}x and {:.2}x the cold read)\n\
         cleaned to {} bytes, {} records removed (cold pass; warm pass: {} bytes)",
        options.keys,
        options.record_bytes,
        clean_cold_mb / read_cold_mb.max(1e-9),
        clean_warm_mb / read_cold_mb.max(1e-9),
        cold.bytes_written,
        cold.records_removed,
        warm.bytes_written,
    ))
}
