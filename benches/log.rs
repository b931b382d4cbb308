//! Partition-log throughput on the real disk, next to the raw disk's synced bandwidth.
//!
//! Three workloads run in one process on the same directory (under the crate's `target/`):
//! - `log_append`: 8 concurrent appenders on a tokio multi-thread runtime, each awaiting its
//!   append before the next, 16 KiB batches of 16 records of 1 KiB, default [`LogConfig`]
//!   (`SyncBeforeAck` with group commit). One log is reused so samples see a steady state.
//! - `log_read`: the whole of a fixed-size log read from offset 0, 1 MiB per read, default
//!   config (no CRC check on read outside simulation). The data is in the page cache.
//! - `baseline_fdatasync`: the same number of bytes appended to one plain file in 1 MiB writes,
//!   each followed by `fdatasync`: what a synced log could hope for on this disk.
//!
//! After the criterion groups it prints a summary from its own timing (medians of a fixed
//! number of interleaved runs), plus the baseline at the write sizes group commit produces
//! (one batch per sync, one batch per appender per sync) to show the cost per sync.
//!
//! Run: `CARGO_TARGET_DIR=/tmp/target-bench cargo bench --bench log`.

#[cfg(feature = "sim")]
fn main() {}

#[cfg(not(feature = "sim"))]
fn main() {
    real::main();
}

#[cfg(not(feature = "sim"))]
mod real {
    use bytes::Bytes;
    use criterion::{Criterion, SamplingMode, Throughput};
    use samsa::log::{Log, LogConfig};
    use samsa::protocol::record_batch::BatchBuilder;
    use samsa::rt::clock::Clock;
    use samsa::rt::disk::Disk;
    use samsa::rt::{task, time};
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::time::Duration;

    const RECORD_BYTES: usize = 1024;
    const RECORDS_PER_BATCH: usize = 16;
    const APPENDERS: usize = 8;
    /// Batches each appender writes per run: 8 x 128 x ~16.6 KiB ~= 16.6 MiB per run.
    const BATCHES_PER_APPENDER: usize = 128;
    /// Append runs that fill the read log (~33 MiB).
    const READ_LOG_RUNS: usize = 2;
    const READ_MAX_BYTES: usize = 1 << 20;
    const BASELINE_WRITE_BYTES: usize = 1 << 20;
    /// Interleaved rounds of every workload for the printed summary (medians taken).
    const SUMMARY_RUNS: usize = 7;

    /// One batch of 16 records with 1 KiB values, built once.
    fn batch() -> Bytes {
        let mut b = BatchBuilder::new(0);
        let value: Vec<u8> = (0..RECORD_BYTES).map(|i| (i * 31 % 251) as u8).collect();
        for i in 0..RECORDS_PER_BATCH {
            b.push(1_700_000_000_000 + i as i64, None, Some(&value), &[]);
        }
        b.build().freeze()
    }

    /// Bytes one append run writes.
    fn run_bytes(batch: &Bytes) -> u64 {
        (batch.len() * APPENDERS * BATCHES_PER_APPENDER) as u64
    }

    /// 8 appenders, each appending its batches one at a time; returns the elapsed time.
    async fn append_run(log: &Arc<Log>, batch: &Bytes) -> Duration {
        let start = time::now();
        let handles: Vec<_> = (0..APPENDERS)
            .map(|_| {
                let log = Arc::clone(log);
                let batch = batch.clone();
                task::spawn(async move {
                    for _ in 0..BATCHES_PER_APPENDER {
                        log.append(batch.clone()).await.expect("append");
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.await.expect("appender task");
        }
        let elapsed = start.elapsed();
        assert_eq!(
            log.durable_end_offset(),
            log.log_end_offset(),
            "every acknowledged append is durable"
        );
        elapsed
    }

    /// Reads the whole log from offset 0, `READ_MAX_BYTES` per read; returns the elapsed time.
    async fn read_run(log: &Log, expected_bytes: u64) -> Duration {
        let start = time::now();
        let end = log.log_end_offset();
        let mut offset = 0;
        let mut bytes = 0u64;
        while offset < end {
            let r = log
                .read(offset, READ_MAX_BYTES, i64::MAX)
                .await
                .expect("read");
            bytes += r.records.len() as u64;
            offset = r.next_offset;
        }
        let elapsed = start.elapsed();
        assert_eq!(bytes, expected_bytes, "read back every byte written");
        elapsed
    }

    /// Appends `total` bytes to `path` in writes of `write_bytes`, each followed by
    /// `fdatasync`; returns the elapsed time.
    // This is the measurement baseline, outside the system under test: plain std::fs on the
    // same disk, deliberately not through samsa::rt::disk, so nothing of ours is in the way.
    #[allow(clippy::disallowed_methods)]
    fn baseline_fdatasync(path: &Path, total: u64, write_bytes: usize) -> Duration {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open baseline file");
        let chunk = vec![0x5au8; write_bytes];
        let start = time::now();
        let mut left = total;
        while left > 0 {
            let n = left.min(write_bytes as u64) as usize;
            file.write_all(&chunk[..n]).expect("baseline write");
            file.sync_data().expect("baseline fdatasync");
            left -= n as u64;
        }
        start.elapsed()
    }

    fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
        bytes as f64 / elapsed.as_secs_f64() / 1e6
    }

    /// Throughputs (MB/s) of repeated runs of one workload.
    #[derive(Default)]
    struct Samples(Vec<f64>);

    impl Samples {
        fn add(&mut self, bytes: u64, elapsed: Duration) {
            self.0.push(mb_per_s(bytes, elapsed));
        }

        fn sorted(&self) -> Vec<f64> {
            let mut xs = self.0.clone();
            xs.sort_by(f64::total_cmp);
            xs
        }

        fn median(&self) -> f64 {
            let xs = self.sorted();
            xs[xs.len() / 2]
        }

        fn range(&self) -> String {
            let xs = self.sorted();
            format!("{:.1}..{:.1}", xs[0], xs[xs.len() - 1])
        }
    }

    pub fn main() {
        let parent = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-tmp"));
        let name = format!("log-{}", std::process::id());
        let root = parent.join(&name);
        println!("bench directory: {}", root.display());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let disk = Disk::real(&root).expect("bench directory");
        let batch = batch();
        let bytes = run_bytes(&batch);
        println!(
            "batch: {} records x {RECORD_BYTES} B = {} B on the wire; run: {APPENDERS} appenders x \
             {BATCHES_PER_APPENDER} batches = {bytes} B",
            RECORDS_PER_BATCH,
            batch.len()
        );

        let open = |dir: &str| {
            rt.block_on(Log::open(
                disk.clone(),
                dir,
                LogConfig::default(),
                Clock::new(),
            ))
            .expect("open log")
            .0
        };
        let append_log = open("append");
        let read_log = open("read");
        for _ in 0..READ_LOG_RUNS {
            rt.block_on(append_run(&read_log, &batch));
        }
        let read_bytes = bytes * READ_LOG_RUNS as u64;
        let baseline_path = root.join("baseline.dat");

        let mut c = Criterion::default()
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(4))
            .configure_from_args();
        bench_group(&mut c, "log_append", bytes, |iters| {
            (0..iters)
                .map(|_| rt.block_on(append_run(&append_log, &batch)))
                .sum()
        });
        bench_group(&mut c, "log_read", read_bytes, |iters| {
            (0..iters)
                .map(|_| rt.block_on(read_run(&read_log, read_bytes)))
                .sum()
        });
        bench_group(&mut c, "baseline_fdatasync", bytes, |iters| {
            (0..iters)
                .map(|_| baseline_fdatasync(&baseline_path, bytes, BASELINE_WRITE_BYTES))
                .sum()
        });
        c.final_summary();

        // Own timing. The workloads are interleaved round by round so that each sees the same
        // disk and machine conditions (both drift on a shared host); medians are reported.
        let small_sync = batch.len();
        let group_sync = batch.len() * APPENDERS;
        let mut append = Samples::default();
        let mut baseline = Samples::default();
        let mut read = Samples::default();
        let mut baseline_small = Samples::default();
        let mut baseline_group = Samples::default();
        for _ in 0..SUMMARY_RUNS {
            append.add(bytes, rt.block_on(append_run(&append_log, &batch)));
            baseline.add(
                bytes,
                baseline_fdatasync(&baseline_path, bytes, BASELINE_WRITE_BYTES),
            );
            read.add(read_bytes, rt.block_on(read_run(&read_log, read_bytes)));
            baseline_small.add(bytes, baseline_fdatasync(&baseline_path, bytes, small_sync));
            baseline_group.add(bytes, baseline_fdatasync(&baseline_path, bytes, group_sync));
        }
        println!(
            "summary (median of {SUMMARY_RUNS} interleaved runs, MB = 10^6 B): \
             append MB/s = {:.1}, baseline fdatasync MB/s = {:.1}, ratio = {:.2}",
            append.median(),
            baseline.median(),
            append.median() / baseline.median()
        );
        println!("summary: read MB/s = {:.1}", read.median());
        println!(
            "summary: ranges (min..max MB/s): append {}, baseline {}, read {}",
            append.range(),
            baseline.range(),
            read.range()
        );
        // The baseline at the write sizes group commit produces: one batch per sync (no
        // grouping) and every appender's batch in one sync (full grouping).
        for (write_bytes, samples) in [(small_sync, baseline_small), (group_sync, baseline_group)] {
            let mbs = samples.median();
            println!(
                "summary: baseline fdatasync with {write_bytes} B writes: MB/s = {mbs:.1} \
                 (range {}; {:.2} ms per write+sync)",
                samples.range(),
                write_bytes as f64 / (mbs * 1e6) * 1e3
            );
        }

        drop(append_log);
        drop(read_log);
        let cleanup = Disk::real(&parent).expect("bench parent directory");
        rt.block_on(cleanup.remove(&name))
            .expect("remove bench directory");
    }

    fn bench_group(
        c: &mut Criterion,
        name: &str,
        bytes: u64,
        mut run: impl FnMut(u64) -> Duration,
    ) {
        let mut group = c.benchmark_group(name);
        group.sampling_mode(SamplingMode::Flat);
        group.throughput(Throughput::Bytes(bytes));
        group.bench_function("run", |b| b.iter_custom(&mut run));
        group.finish();
    }
}
