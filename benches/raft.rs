//! Committed entries per second of a three-voter metadata quorum on real TCP (loopback) and
//! real files with fsync (the default policy: every voter syncs before it acknowledges).
//!
//! Three replicas run in this process, each with its own directory under `target/bench-tmp`
//! and its own controller listener; proposers at the leader each propose one entry of
//! `VALUE_BYTES`, wait until the leader's high watermark passes it, and propose the next.
//! For each proposer count it prints entries committed per second and the commit latency's
//! median and 99th percentile.
//!
//! Run: `cargo bench --bench raft` (`SAMSA_BENCH_SECONDS` sets each run's length, default 5).

#[cfg(feature = "sim")]
fn main() {}

#[cfg(not(feature = "sim"))]
fn main() {
    real::main();
}

#[cfg(not(feature = "sim"))]
#[path = "support/mod.rs"]
mod support;

#[cfg(not(feature = "sim"))]
mod real {
    use super::support::{bench_dir, bench_seconds, percentile, remove};
    use std::collections::BTreeMap;
    use std::time::Duration;

    use bytes::Bytes;
    use samsa::raft::core::RaftConfig;
    use samsa::raft::driver::{self, NodeConfig, RaftHandle, RaftNode};
    use samsa::rt::clock::Clock;
    use samsa::rt::disk::Disk;
    use samsa::rt::net::TcpListener;
    use samsa::rt::{task, time};

    const VOTERS: i32 = 3;
    const VALUE_BYTES: usize = 100;
    const PROPOSERS: [usize; 4] = [1, 8, 64, 256];

    async fn start_quorum(root: &std::path::Path) -> BTreeMap<i32, RaftNode> {
        let mut listeners = BTreeMap::new();
        let mut voters = BTreeMap::new();
        for id in 1..=VOTERS {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            voters.insert(id, listener.local_addr().expect("addr").to_string());
            listeners.insert(id, listener);
        }
        let mut nodes = BTreeMap::new();
        for (id, listener) in listeners {
            let dir = root.join(format!("voter-{id}"));
            let config = NodeConfig {
                node_id: id,
                voters: voters.clone(),
                metadata_log_dir: "metadata".into(),
                segment_bytes: 1 << 30,
                raft: RaftConfig::DEFAULT,
                cluster_id: Some("bench".into()),
                bugs: Default::default(),
                snapshots: Default::default(),
            };
            let disk = Disk::real(&dir).expect("bench directory");
            let node = driver::start(config, disk, Clock::new(), listener)
                .await
                .expect("a replica");
            nodes.insert(id, node);
        }
        nodes
    }

    async fn leader(nodes: &BTreeMap<i32, RaftNode>) -> RaftHandle {
        loop {
            if let Some(node) = nodes.values().find(|n| n.handle.status().is_leader) {
                let handle = node.handle.clone();
                // Leading is not enough: the leader's first record must be committed.
                if handle
                    .wait_for(Duration::from_secs(10), |s| s.high_watermark > 0)
                    .await
                    .is_ok()
                {
                    return handle;
                }
            }
            time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// One proposer: propose, wait for the commit, again, until `until`; the latencies (µs).
    async fn propose_loop(handle: RaftHandle, until: time::Instant) -> Vec<u64> {
        let value = Bytes::from(vec![7u8; VALUE_BYTES]);
        let mut latencies = Vec::new();
        while time::now() < until {
            let began = time::now();
            let offset = match handle.propose(vec![value.clone()]).await {
                Ok(Ok(offset)) => offset,
                other => panic!("a proposal failed: {other:?}"),
            };
            if handle
                .wait_for(Duration::from_secs(10), |s| s.high_watermark > offset)
                .await
                .is_err()
            {
                panic!("offset {offset} was not committed within 10 s");
            }
            latencies.push(began.elapsed().as_micros() as u64);
        }
        latencies
    }

    pub fn main() {
        let seconds = bench_seconds();
        let parent = bench_dir();
        let root = parent.join(format!("raft-{}", std::process::id()));
        println!("bench directory: {}", root.display());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        rt.block_on(async {
            let nodes = start_quorum(&root).await;
            let handle = leader(&nodes).await;
            println!(
                "three voters on loopback TCP, sync before acknowledging; entries of {VALUE_BYTES} B, one per proposal; {seconds} s per run"
            );
            for proposers in PROPOSERS {
                let until = time::now() + Duration::from_secs(seconds);
                let began = time::now();
                let runs: Vec<_> = (0..proposers)
                    .map(|_| task::spawn(propose_loop(handle.clone(), until)))
                    .collect();
                let mut latencies = Vec::new();
                for run in runs {
                    latencies.extend(run.await.expect("a proposer"));
                }
                let elapsed = began.elapsed().as_secs_f64();
                latencies.sort_unstable();
                println!(
                    "raft_commit proposers={proposers:>3}: {:>8.0} entries/s, latency p50 {:>6} us, p99 {:>6} us ({} entries)",
                    latencies.len() as f64 / elapsed,
                    percentile(&latencies, 0.5),
                    percentile(&latencies, 0.99),
                    latencies.len()
                );
            }
            for node in nodes.into_values() {
                node.handle.shutdown().await;
                let _ = node.task.await;
            }
        });
        remove(&root);
    }
}
