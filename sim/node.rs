//! The simulated node: the real broker (`samsa::broker`) on the harness-owned simulated disk,
//! serving the Kafka protocol on simulated TCP. It stops on ctrl-c with a clean close, and
//! reports that it needs a restart when its log directory fails (as a Kafka broker halts).

use crate::harness::Recorder;
use samsa::broker::config::BrokerConfig;
use samsa::broker::server::Serving;
use samsa::broker::Broker;
use samsa::rt::clock::Clock;
use samsa::rt::disk::{Disk, MemDisk};
use samsa::rt::net::TcpListener;
use samsa_spec::NodeEvent;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub const NODE_PORT: u16 = 9092;
/// The one topic the workload uses, with one partition, auto-created on first use.
pub const TOPIC: &str = "sim";
/// Its partition's directory on the node's disk.
pub const PARTITION_DIR: &str = "sim-0";

/// Shared between the node and the supervisor: set when the node needs a restart.
pub type NeedsRestart = Arc<AtomicBool>;
/// Set by the node once it has shut down cleanly after a shutdown signal.
pub type Stopped = Arc<AtomicBool>;

pub async fn serve(
    disk: MemDisk,
    config: BrokerConfig,
    clock: Clock,
    recorder: Recorder,
    needs_restart: NeedsRestart,
    stopped: Stopped,
    retention_deletes_one_segment_too_many: bool,
) {
    let broker = match Broker::open(config, Disk::mem(disk), clock).await {
        Ok(broker) => {
            broker
                .retention_deletes_one_segment_too_many
                .store(retention_deletes_one_segment_too_many, Ordering::Release);
            broker
        }
        Err(e) => {
            recorder.note(0, format!("node: open failed: {e}"));
            needs_restart.store(true, Ordering::Release);
            return;
        }
    };
    for partition in broker.topics.partitions().await {
        let report = &partition.recovery;
        let mut note = format!(
            "node: recovered {}-{} log end {} (clean {}, recovery point {}, scanned {}, rebuilt {})",
            partition.topic,
            partition.index,
            report.log_end_offset,
            report.clean_shutdown,
            report.recovery_point,
            report.segments_scanned,
            report.indexes_rebuilt
        );
        if let Some(t) = &report.truncated {
            note.push_str(&format!(
                ", truncated at offset {} ({} bytes at {}:{}): {}",
                t.offset, t.bytes_removed, t.segment, t.position, t.reason
            ));
        }
        recorder.note(0, note);
        if partition.topic == TOPIC && partition.index == 0 {
            recorder.node(
                0,
                NodeEvent::Opened {
                    recovery_point: report.recovery_point,
                    log_end_offset: report.log_end_offset,
                },
            );
        }
    }
    let listener = match TcpListener::bind(("0.0.0.0", NODE_PORT)).await {
        Ok(l) => l,
        Err(e) => {
            recorder.note(0, format!("node: bind failed: {e}"));
            needs_restart.store(true, Ordering::Release);
            return;
        }
    };
    let serving = Serving::start(&broker, listener);
    tokio::select! {
        biased;
        _ = broker.health.failed() => {
            // A Kafka broker halts when its log directory fails; the supervisor restarts it.
            recorder.note(0, "node: log directory failed; halting");
            needs_restart.store(true, Ordering::Release);
        }
        _ = samsa::rt::signal::ctrl_c() => {
            // Graceful shutdown: stop serving, then sync, checkpoint and leave the
            // clean-shutdown marker in every log.
            serving.stop().await;
            let end = match broker.topics.get_partition(TOPIC, 0).await {
                Some(p) => p.log_end_offset(),
                None => 0,
            };
            match broker.close().await {
                Ok(()) => recorder.note(0, format!("node: closed the log cleanly at {end}")),
                Err(e) => recorder.note(0, format!("node: clean close failed: {e}")),
            }
            stopped.store(true, Ordering::Release);
        }
    }
}
