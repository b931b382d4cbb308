//! The simulated node: the real node (`samsa::broker::node`: a metadata quorum of one, its
//! controller and the broker) on the harness-owned simulated disk, serving the Kafka protocol
//! on simulated TCP. It stops on ctrl-c with a clean close, and
//! reports that it needs a restart when its log directory fails (as a Kafka broker halts).

use crate::harness::Recorder;
use samsa::broker::config::BrokerConfig;
use samsa::broker::metadata_publisher::PublishObserver;
use samsa::broker::node::{Node, NodeObservers};
use samsa::broker::server::Serving;
use samsa::controller::image::MetadataImage;
use samsa::log::cleaner::{CleanerCheckpoint, CLEANER_CHECKPOINT_FILE};
use samsa::log::segment::continues;
use samsa::rt::clock::Clock;
use samsa::rt::disk::{Disk, MemDisk};
use samsa::rt::net::TcpListener;
use samsa_spec::NodeEvent;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

pub const NODE_PORT: u16 = 9092;
/// The node's controller listener (its metadata quorum of one).
pub const CONTROLLER_PORT: u16 = 9093;
/// The one topic the workload uses, with one partition, auto-created on first use.
pub const TOPIC: &str = "sim";
/// Its partition's directory on the node's disk.
pub const PARTITION_DIR: &str = "sim-0";
/// How often the node looks for the scrubber's findings.
pub const CORRUPTION_POLL_MS: u64 = 2;
/// How the node's check at open reports a hole (the harness turns it into offset-gap).
pub const OFFSET_GAP_AT_OPEN: &str = "offset-gap at open: ";

/// A fault: the node's broker loses every heartbeat to its controller `after_ms` after
/// the node started, for `for_ms` (a broker cut off from the quorum but not from its clients,
/// which a one-node simulation cannot make with the network); it is fenced once its session
/// expires and must stop serving until it is back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeartbeatBlackout {
    pub after_ms: u64,
    pub for_ms: u64,
}

/// What a run plants in the node: a deliberate bug, a fault only the node can make.
#[derive(Clone, Copy, Debug, Default)]
pub struct NodePlanted {
    /// Retention deletes one segment more than the topic config allows.
    pub retention_deletes_one_segment_too_many: bool,
    pub heartbeat_blackout: Option<HeartbeatBlackout>,
}

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
    planted: NodePlanted,
) {
    let NodePlanted {
        retention_deletes_one_segment_too_many,
        heartbeat_blackout,
    } = planted;
    // The node as `samsa broker` runs it: a metadata quorum of one on the same disk, its
    // controller, and the broker registered with it (`broker::node`).
    let host = config
        .advertised_listeners
        .first()
        .map_or_else(|| "0.0.0.0".to_string(), |l| l.host.clone());
    let controller_listener = match TcpListener::bind((host.as_str(), CONTROLLER_PORT)).await {
        Ok(l) => l,
        Err(e) => {
            recorder.note(
                0,
                format!("node: binding the controller listener failed: {e}"),
            );
            needs_restart.store(true, Ordering::Release);
            return;
        }
    };
    let node_id = config.node_id;
    let observer: PublishObserver = {
        let recorder = recorder.clone();
        // 0: nothing recorded yet in this process; 1: not leading; 2: leading.
        let last = Arc::new(AtomicU8::new(0));
        Arc::new(move |offset, image: &MetadataImage| {
            let registered = image
                .brokers
                .get(&node_id)
                .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown);
            let leads = registered
                && image
                    .partition(TOPIC, 0)
                    .is_some_and(|p| p.leader == node_id);
            let state = if leads { 2 } else { 1 };
            if last.swap(state, Ordering::AcqRel) != state {
                recorder.node(0, NodeEvent::ImageApplied { offset, leads });
            }
        })
    };
    // The metadata log shares the disk (crashes, power loss and IO errors reach it) but not
    // the fault points, which are timed on the partition logs' events (the quorum suites
    // aim theirs at the metadata log).
    let mut node = match Node::start_observed(
        config,
        Disk::mem(disk.clone()),
        Disk::mem(disk.without_fault_points()),
        clock,
        controller_listener,
        NodeObservers {
            image: Some(observer),
            raft: None,
        },
    )
    .await
    {
        Ok(node) => node,
        Err(e) => {
            recorder.note(0, format!("node: open failed: {e}"));
            needs_restart.store(true, Ordering::Release);
            return;
        }
    };
    let broker = node.broker.clone();
    broker
        .retention_deletes_one_segment_too_many
        .store(retention_deletes_one_segment_too_many, Ordering::Release);
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
            check_dense_at_open(&disk, report.log_end_offset, &recorder);
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
    if let Some(blackout) = heartbeat_blackout {
        let (lifecycle, recorder) = (node.lifecycle.clone(), recorder.clone());
        samsa::rt::task::spawn(async move {
            samsa::rt::time::sleep(samsa::rt::time::Duration::from_millis(blackout.after_ms)).await;
            recorder.note(0, "node: cut off from its controller (heartbeats lost)");
            lifecycle.set_muted(true);
            samsa::rt::time::sleep(samsa::rt::time::Duration::from_millis(blackout.for_ms)).await;
            recorder.note(0, "node: reconnected to its controller");
            lifecycle.set_muted(false);
        });
    }
    // The scrubber's findings, as the history's node events, when they happen (within a
    // poll interval: late only makes the corrupt-read check more lenient).
    {
        let (broker, recorder) = (Arc::clone(&broker), recorder.clone());
        samsa::rt::task::spawn(async move {
            let mut reported: Option<i64> = None;
            loop {
                samsa::rt::time::sleep(samsa::rt::time::Duration::from_millis(CORRUPTION_POLL_MS))
                    .await;
                if let Some(p) = broker.topics.get_partition(TOPIC, 0).await {
                    let found = p.corrupt_from();
                    if found.is_some() && found != reported {
                        reported = found;
                        if let Some(offset) = found {
                            recorder.node(0, NodeEvent::CorruptionFound { offset });
                        }
                    }
                }
            }
        });
    }
    tokio::select! {
        biased;
        why = node.failed() => {
            // A Kafka broker halts when its log directory fails; the supervisor restarts it.
            recorder.note(0, format!("node: {why}; halting"));
            needs_restart.store(true, Ordering::Release);
        }
        _ = samsa::rt::signal::ctrl_c() => {
            // Graceful shutdown: stop serving, then a controlled shutdown, then sync,
            // checkpoint and leave the clean-shutdown marker in every log.
            serving.stop().await;
            let end = match broker.topics.get_partition(TOPIC, 0).await {
                Some(p) => p.log_end_offset(),
                None => 0,
            };
            drop(broker);
            match node.shutdown().await {
                Ok(()) => recorder.note(0, format!("node: closed the log cleanly at {end}")),
                Err(e) => recorder.note(0, format!("node: clean close failed: {e}")),
            }
            stopped.store(true, Ordering::Release);
        }
    }
}

/// Right after an open, reads the partition's segment files as recovery left them and checks
/// that their batches continue one another and end at the log end recovery reported: a log
/// end above the records on disk is a hole that the next append would leave (offset-gap).
/// Segments the log cleaner rewrote (base below the cleaner checkpoint's `gaps_below`) may
/// skip offsets, never go back.
fn check_dense_at_open(disk: &MemDisk, log_end_offset: i64, recorder: &Recorder) {
    let gaps_below = disk
        .file_image(&format!("{PARTITION_DIR}/{CLEANER_CHECKPOINT_FILE}"))
        .and_then(|bytes| CleanerCheckpoint::decode(&bytes).ok())
        .map_or(0, |c| c.gaps_below);
    let mut end: Option<i64> = None;
    let mut previous_gaps = false;
    for (base, name) in segment_logs(disk.file_names()) {
        let gaps = base < gaps_below;
        let image = bytes::Bytes::from(disk.file_image(&name).unwrap_or_default());
        for item in samsa::protocol::record_batch::batches(image) {
            let Ok((header, _)) = item else { break };
            if let Some(e) = end {
                if !continues(gaps || previous_gaps, header.base_offset, e) {
                    recorder.note(
                        0,
                        format!("{OFFSET_GAP_AT_OPEN}{name}: a batch at {} follows offsets ending at {e}", header.base_offset),
                    );
                }
            }
            end = Some(header.next_offset());
            previous_gaps = gaps;
        }
    }
    if let Some(e) = end {
        if e != log_end_offset {
            recorder.note(
                0,
                format!("{OFFSET_GAP_AT_OPEN}the records on disk end at {e}, the log end is {log_end_offset}"),
            );
        }
    }
}

/// The partition's segment `.log` files among a disk's file paths, with their base offsets,
/// in log order.
pub fn segment_logs(paths: Vec<String>) -> Vec<(i64, String)> {
    segment_logs_in(paths, PARTITION_DIR)
}

/// The segment `.log` files of the partition directory `dir`, with their base offsets, in
/// log order.
pub fn segment_logs_in(paths: Vec<String>, dir: &str) -> Vec<(i64, String)> {
    let prefix = format!("{dir}/");
    let mut logs: Vec<(i64, String)> = paths
        .into_iter()
        .filter_map(|path| {
            let base = path
                .strip_prefix(&prefix)?
                .strip_suffix(".log")?
                .parse()
                .ok()?;
            Some((base, path))
        })
        .collect();
    logs.sort();
    logs
}
