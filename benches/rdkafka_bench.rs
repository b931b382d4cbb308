//! The broker under librdkafka load, with the machine's own limits measured in the same run.
//!
//! One run starts the release `samsa` binary (the bench profile builds it) on a fresh data
//! directory with its default settings (sync before acknowledgement) and reports:
//! - produce throughput of 100-byte and 1 KiB records, acks=all, librdkafka's default
//!   batching (linger.ms 5, batch.size 1 MB), idempotence off (librdkafka's default);
//! - consume throughput of the 100-byte records from the start of the log;
//! - produce latency (p50/p99/p99.9/max) at a fixed 10,000 records/s with linger.ms=0,
//!   measured from `send` to the delivery report;
//! - the broker's CPU seconds (utime + stime from /proc/<pid>/stat) per million records
//!   produced and per million consumed;
//! - the broker's anonymous RSS (RssAnon in /proc/<pid>/status) once ~1 GB is stored;
//! - for reference: the raw bandwidth of 1 MiB writes each followed by fdatasync on the data
//!   directory's file system, and loopback TCP bandwidth between two threads.
//!
//! It is a plain `harness = false` binary, not part of `cargo test`. Sizes are fixed (or set
//! with SAMSA_BENCH_* variables, see `Sizes`) so a run takes a few minutes at most; every
//! wait has a bound. Run:
//!
//! ```text
//! cargo bench --bench rdkafka_bench
//! ```
//!
//! The figures go to stdout as a table and, last, as one JSON line.
//!
//! `SAMSA_BENCH_BROKERS=3` runs the replicated benchmark instead (benches/cluster/replicated.rs):
//! `samsa perf produce` on one broker (RF 1) and on three formatted combined nodes (RF 3,
//! `min.insync.replicas` 2), the fixed-rate latency through `samsa perf` and librdkafka
//! against the replicated topic, the brokers' CPU, the bytes stored per record and the
//! bandwidth of three concurrent synced writers, with the goal derived from the last two.
// A measurement harness outside the system under test: it times itself with the OS clock and
// uses threads and files directly, which `src` must not.
#![allow(clippy::disallowed_methods)]

#[cfg(feature = "sim")]
fn main() {}

#[cfg(not(feature = "sim"))]
fn main() {
    real::main();
}

#[cfg(not(feature = "sim"))]
#[path = "../tests/support/broker_process.rs"]
mod broker_process;

#[cfg(not(feature = "sim"))]
#[path = "cluster/replicated.rs"]
mod replicated;

#[cfg(not(feature = "sim"))]
mod real {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::path::Path;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::error::{KafkaError, RDKafkaErrorCode};
    use rdkafka::message::Message;
    use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
    use rdkafka::{ClientContext, Offset, TopicPartitionList};

    use super::broker_process::BrokerProcess;

    /// The longest any phase may wait for deliveries or records before the run fails.
    const PHASE_TIMEOUT_S: u64 = 180;
    /// Bytes each writer writes (in 1 MiB writes, each synced) for the raw disk figure.
    const DISK_BYTES: usize = 256 << 20;
    /// Bytes sent over loopback for the TCP figure.
    const LOOPBACK_BYTES: usize = 2 << 30;

    /// How much each phase moves; the defaults store ~1.3 GB.
    struct Sizes {
        small_records: u64,
        large_records: u64,
        latency_records: u64,
        partitions: i32,
    }

    pub(crate) fn env_or(name: &str, default: u64) -> u64 {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    impl Sizes {
        fn from_env() -> Sizes {
            Sizes {
                small_records: env_or("SAMSA_BENCH_SMALL_RECORDS", 3_000_000),
                large_records: env_or("SAMSA_BENCH_LARGE_RECORDS", 1_000_000),
                latency_records: env_or("SAMSA_BENCH_LATENCY_RECORDS", 50_000),
                partitions: env_or("SAMSA_BENCH_PARTITIONS", 4) as i32,
            }
        }
    }

    /// Counts deliveries; with latency on, records send-to-report time per record (the
    /// opaque carries the send time in nanoseconds since `base`).
    pub(crate) struct Counting {
        base: Instant,
        delivered: AtomicU64,
        failed: AtomicU64,
        first_error: Mutex<Option<String>>,
        latencies_ns: Mutex<Vec<u64>>,
        keep_latency: bool,
    }

    impl Counting {
        /// The send-to-report latencies recorded so far, sorted.
        pub(crate) fn sorted_latencies_ns(&self) -> Vec<u64> {
            let mut latencies = self
                .latencies_ns
                .lock()
                .map(|l| l.clone())
                .unwrap_or_default();
            latencies.sort_unstable();
            latencies
        }

        fn new(keep_latency: bool) -> Counting {
            Counting {
                base: Instant::now(),
                delivered: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                first_error: Mutex::new(None),
                latencies_ns: Mutex::new(Vec::new()),
                keep_latency,
            }
        }
    }

    impl ClientContext for Counting {}

    impl ProducerContext for Counting {
        type DeliveryOpaque = usize;

        fn delivery(&self, result: &DeliveryResult<'_>, sent_ns: usize) {
            match result {
                Ok(_) => {
                    self.delivered.fetch_add(1, Ordering::Relaxed);
                    if self.keep_latency {
                        let now_ns = self.base.elapsed().as_nanos() as u64;
                        if let Ok(mut l) = self.latencies_ns.lock() {
                            l.push(now_ns.saturating_sub(sent_ns as u64));
                        }
                    }
                }
                Err((e, _)) => {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut slot) = self.first_error.lock() {
                        slot.get_or_insert_with(|| e.to_string());
                    }
                }
            }
        }
    }

    fn producer(bootstrap: &str, linger_ms: &str, keep_latency: bool) -> BaseProducer<Counting> {
        producer_with(bootstrap, linger_ms, keep_latency, false)
    }

    /// `nagle_disable`: librdkafka leaves Nagle's algorithm on by default
    /// (`socket.nagle.disable=false`), unlike the Java client, which sets TCP_NODELAY; the
    /// latency phase runs both ways so the client's own delay can be told from the broker's.
    pub(crate) fn producer_with(
        bootstrap: &str,
        linger_ms: &str,
        keep_latency: bool,
        nagle_disable: bool,
    ) -> BaseProducer<Counting> {
        ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("broker.address.family", "v4")
            .set("acks", "all")
            .set("enable.idempotence", "false")
            .set("linger.ms", linger_ms)
            .set("message.timeout.ms", "120000")
            .set(
                "socket.nagle.disable",
                if nagle_disable { "true" } else { "false" },
            )
            .create_with_context(Counting::new(keep_latency))
            .expect("create the producer")
    }

    /// The broker's user + system CPU time so far, in seconds.
    pub(crate) fn cpu_seconds(pid: u32) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Fields after the command name (which may hold spaces) start at ") ".
        let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // SAFETY: sysconf has no memory effects.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        (ticks(11) + ticks(12)) as f64 / hz
    }

    fn rss_anon_kib(pid: u32) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
        use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
        use rdkafka::client::DefaultClientContext;
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("broker.address.family", "v4")
            .create()
            .expect("create the admin client");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let results = runtime
            .block_on(admin.create_topics(
                &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
            ))
            .expect("CreateTopics");
        assert_eq!(results, vec![Ok(topic.to_string())], "create {topic}");
    }

    /// Sends `count` records of `size` bytes as fast as librdkafka takes them (or at `rate`
    /// records/s) and waits for every delivery report. Returns the elapsed seconds.
    pub(crate) fn produce(
        p: &BaseProducer<Counting>,
        topic: &str,
        count: u64,
        size: usize,
        rate: Option<u64>,
    ) -> f64 {
        let payload: Vec<u8> = (0..size).map(|i| b'A' + (i % 26) as u8).collect();
        let start = Instant::now();
        for i in 0..count {
            if let Some(rate) = rate {
                let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
                let now = Instant::now();
                if due > now {
                    // Poll while waiting so reports are handled (and timed) promptly.
                    p.poll(due - now);
                    let left = due.saturating_duration_since(Instant::now());
                    if !left.is_zero() {
                        std::thread::sleep(left);
                    }
                }
            }
            let sent_ns = p.context().base.elapsed().as_nanos() as usize;
            let mut record =
                BaseRecord::<(), [u8], usize>::with_opaque_to(topic, sent_ns).payload(&payload[..]);
            loop {
                match p.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        record = back;
                        p.poll(Duration::from_millis(1));
                    }
                    Err((e, _)) => panic!("send record {i}: {e}"),
                }
            }
            if i % 1024 == 0 {
                p.poll(Duration::ZERO);
            }
        }
        p.flush(Duration::from_secs(PHASE_TIMEOUT_S))
            .expect("flush");
        let elapsed = start.elapsed().as_secs_f64();
        let ctx = p.context();
        let failed = ctx.failed.load(Ordering::Relaxed);
        assert_eq!(
            failed,
            0,
            "{failed} deliveries failed; first: {:?}",
            ctx.first_error
                .lock()
                .map(|e| e.clone())
                .unwrap_or_default()
        );
        assert_eq!(ctx.delivered.load(Ordering::Relaxed), count);
        elapsed
    }

    /// Reads `count` records of `topic` (all partitions) from the start of the log.
    fn consume(bootstrap: &str, topic: &str, partitions: i32, count: u64) -> f64 {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("broker.address.family", "v4")
            .set("group.id", "samsa-bench")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            // Larger fetches than the 1 MiB per partition default: fewer round trips per
            // record, so the figure says more about the broker than about the fetch loop.
            .set("max.partition.fetch.bytes", "8388608")
            .set("queued.min.messages", "1000000")
            .create()
            .expect("create the consumer");
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .expect("add partition");
        }
        consumer.assign(&tpl).expect("assign");
        let start = Instant::now();
        let deadline = start + Duration::from_secs(PHASE_TIMEOUT_S);
        let mut seen = 0u64;
        let mut bytes = 0u64;
        while seen < count {
            assert!(
                Instant::now() < deadline,
                "consumed only {seen} of {count} records"
            );
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    seen += 1;
                    bytes += m.payload().map_or(0, <[u8]>::len) as u64;
                }
                Some(Err(e)) => panic!("consume: {e}"),
                None => {}
            }
        }
        assert!(bytes > 0);
        start.elapsed().as_secs_f64()
    }

    /// `writers` threads at once, each writing `DISK_BYTES` to a file of its own in `dir` in
    /// 1 MiB writes, each followed by fdatasync: total MB/s, timed from the moment every
    /// writer has its file open to the end of the last one's last sync.
    pub(crate) fn disk_bandwidth(dir: &Path, writers: usize) -> f64 {
        use std::os::unix::io::AsRawFd;
        let paths: Vec<_> = (0..writers)
            .map(|w| dir.join(format!("raw-bandwidth-{w}.bin")))
            .collect();
        let chunk = vec![0x5au8; 1 << 20];
        let start_line = std::sync::Barrier::new(writers + 1);
        let (written, secs) = std::thread::scope(|scope| {
            let handles: Vec<_> = paths
                .iter()
                .map(|path| {
                    let (chunk, start_line) = (&chunk, &start_line);
                    scope.spawn(move || {
                        let mut file =
                            std::fs::File::create(path).expect("create a raw-bandwidth file");
                        start_line.wait();
                        let mut written = 0;
                        while written < DISK_BYTES {
                            file.write_all(chunk).expect("write");
                            // SAFETY: the descriptor is open for the call.
                            let rc = unsafe { libc::fdatasync(file.as_raw_fd()) };
                            assert_eq!(rc, 0, "fdatasync: {}", std::io::Error::last_os_error());
                            written += chunk.len();
                        }
                        written
                    })
                })
                .collect();
            start_line.wait();
            let start = Instant::now();
            let written: usize = handles
                .into_iter()
                .map(|h| h.join().expect("a raw-bandwidth writer"))
                .sum();
            (written, start.elapsed().as_secs_f64())
        });
        for path in &paths {
            let _ = std::fs::remove_file(path);
        }
        written as f64 / secs / 1e6
    }

    /// Loopback TCP between two threads, 1 MiB writes: MB/s.
    fn loopback_bandwidth() -> f64 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let reader = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut buf = vec![0u8; 1 << 20];
            let mut total = 0usize;
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => return total,
                    Ok(n) => total += n,
                }
            }
        });
        let mut s = TcpStream::connect(addr).expect("connect");
        let chunk = vec![0xa5u8; 1 << 20];
        let start = Instant::now();
        let mut sent = 0;
        while sent < LOOPBACK_BYTES {
            s.write_all(&chunk).expect("write");
            sent += chunk.len();
        }
        drop(s);
        let received = reader.join().expect("reader thread");
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(received, sent);
        sent as f64 / secs / 1e6
    }

    pub(crate) fn percentile(sorted: &[u64], q: f64) -> f64 {
        if sorted.is_empty() {
            return 0.0;
        }
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1] as f64 / 1e6
    }

    pub fn main() {
        match env_or("SAMSA_BENCH_BROKERS", 1) {
            1 => {}
            3 => return super::replicated::main(),
            n => panic!("SAMSA_BENCH_BROKERS={n}: the bench runs one broker or three"),
        }
        let sizes = Sizes::from_env();
        let mut broker = BrokerProcess::start();
        let bootstrap = broker.bootstrap();
        let pid = broker.pid().expect("the broker runs");
        let data_dir = broker.data_dir().to_path_buf();
        let mut json: Vec<String> = Vec::new();
        let mut row = |name: &str, value: f64, unit: &str, goal: &str| {
            println!("{name:<46} {value:>14.2} {unit:<12} {goal}");
            json.push(format!("\"{name} ({unit})\":{value:.3}"));
        };
        println!("{:<46} {:>14} {:<12} goal", "measurement", "figure", "unit");

        // Produce, 100-byte records.
        create_topic(&bootstrap, "bench-100", sizes.partitions);
        let p = producer(&bootstrap, "5", false);
        let cpu0 = cpu_seconds(pid);
        let secs = produce(&p, "bench-100", sizes.small_records, 100, None);
        let cpu_small = cpu_seconds(pid) - cpu0;
        drop(p);
        let n = sizes.small_records as f64;
        row(
            "produce 100 B, acks=all",
            n / secs,
            "records/s",
            ">= 2,500,000",
        );
        row(
            "produce 100 B, acks=all",
            n * 100.0 / secs / 1e6,
            "MB/s",
            "",
        );
        row(
            "broker CPU per M produced (100 B)",
            cpu_small / n * 1e6,
            "s",
            "<= 0.2",
        );

        // Produce, 1 KiB records.
        create_topic(&bootstrap, "bench-1k", sizes.partitions);
        let p = producer(&bootstrap, "5", false);
        let cpu0 = cpu_seconds(pid);
        let secs = produce(&p, "bench-1k", sizes.large_records, 1024, None);
        let cpu_large = cpu_seconds(pid) - cpu0;
        drop(p);
        let n = sizes.large_records as f64;
        row("produce 1 KiB, acks=all", n / secs, "records/s", "");
        row(
            "produce 1 KiB, acks=all",
            n * 1024.0 / secs / 1e6,
            "MB/s",
            "",
        );
        row(
            "broker CPU per M produced (1 KiB)",
            cpu_large / n * 1e6,
            "s",
            "",
        );

        // Consume the 100-byte records from the start.
        let cpu0 = cpu_seconds(pid);
        let secs = consume(
            &bootstrap,
            "bench-100",
            sizes.partitions,
            sizes.small_records,
        );
        let cpu_consume = cpu_seconds(pid) - cpu0;
        let n = sizes.small_records as f64;
        row(
            "consume 100 B from the start",
            n / secs,
            "records/s",
            ">= 4,000,000",
        );
        row(
            "broker CPU per M consumed (100 B)",
            cpu_consume / n * 1e6,
            "s",
            "<= 0.05",
        );
        row(
            "broker RssAnon with data stored",
            rss_anon_kib(pid) as f64 / 1024.0,
            "MiB",
            "< 200",
        );
        let stored: u64 = walk_size(&data_dir);
        row("data stored", stored as f64 / 1e9, "GB", "~1");

        // Latency at a fixed 10,000 records/s, linger.ms=0, one partition: with librdkafka's
        // defaults, then with Nagle's algorithm off (as the Java client and `samsa perf` run).
        create_topic(&bootstrap, "bench-latency", 1);
        for (nagle_disable, label) in [(false, ""), (true, ", nagle off")] {
            let p = producer_with(&bootstrap, "0", true, nagle_disable);
            produce(
                &p,
                "bench-latency",
                sizes.latency_records,
                100,
                Some(10_000),
            );
            let lat = p.context().sorted_latencies_ns();
            drop(p);
            for (name, q, goal) in [
                ("p50", 0.50, ""),
                ("p99", 0.99, "<= 2"),
                ("p99.9", 0.999, ""),
                ("max", 1.0, ""),
            ] {
                row(
                    &format!("latency {name} at 10k records/s, linger 0{label}"),
                    percentile(&lat, q),
                    "ms",
                    goal,
                );
            }
        }

        // The same broker through the Rust client: `samsa perf` (its JSON summary).
        let perf = |args: &[&str]| -> String {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_samsa"))
                .arg("perf")
                .args(args)
                .args(["--bootstrap-server", &bootstrap, "--json"])
                .output()
                .expect("run samsa perf");
            assert!(
                out.status.success(),
                "samsa perf {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        let n = sizes.small_records.to_string();
        println!(
            "samsa perf produce: {}",
            perf(&[
                "produce",
                "--topic",
                "bench-perf",
                "--partitions",
                "4",
                "--num-records",
                &n,
                "--record-size",
                "100",
                "--idempotence",
                "off",
                "--batch-size",
                "262144",
            ])
        );
        println!(
            "samsa perf consume: {}",
            perf(&["consume", "--topic", "bench-100", "--num-records", &n])
        );
        let latency_n = sizes.latency_records.to_string();
        println!(
            "samsa perf produce at 10k records/s, linger 0 (idempotent): {}",
            perf(&[
                "produce",
                "--topic",
                "bench-perf-latency",
                "--partitions",
                "1",
                "--num-records",
                &latency_n,
                "--record-size",
                "100",
                "--throughput",
                "10000",
                "--linger-ms",
                "0",
            ])
        );

        broker.assert_alive("the benchmark");
        broker.stop();

        // References, measured with the broker stopped so they do not compete with it.
        row(
            "raw 1 MiB write + fdatasync (data dir)",
            disk_bandwidth(&data_dir, 1),
            "MB/s",
            "reference",
        );
        row(
            "loopback TCP, 1 MiB writes",
            loopback_bandwidth(),
            "MB/s",
            "reference",
        );
        println!("{{{}}}", json.join(","));
    }

    fn walk_size(dir: &Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .filter_map(Result::ok)
            .map(|e| match e.metadata() {
                Ok(m) if m.is_dir() => walk_size(&e.path()),
                Ok(m) => m.len(),
                Err(_) => 0,
            })
            .sum()
    }
}
