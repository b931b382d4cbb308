//! The simulated node: opens the partition log from its (harness-owned) disk and serves the
//! wire protocol. If the log goes offline after an IO error the node reports that it must be
//! restarted, as a real broker process would exit.

use crate::harness::Recorder;
use crate::wire::{self, Status};
use bytes::{Buf, BufMut, BytesMut};
use samsa::log::{FlushPolicy, Log, LogConfig, LogError};
use samsa::rt::clock::Clock;
use samsa::rt::disk::{Disk, MemDisk};
use samsa::rt::net::TcpListener;
use samsa::rt::{task, time};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub const NODE_PORT: u16 = 9092;
pub const LOG_DIR: &str = "topic-0";

/// Shared between the node and the supervisor: set when the node needs a restart.
pub type NeedsRestart = Arc<AtomicBool>;
/// Set by the node once it has shut down cleanly after a shutdown signal.
pub type Stopped = Arc<AtomicBool>;

pub async fn serve(
    disk: MemDisk,
    config: LogConfig,
    clock: Clock,
    recorder: Recorder,
    needs_restart: NeedsRestart,
    stopped: Stopped,
) {
    let opened = Log::open(Disk::mem(disk), LOG_DIR, config.clone(), clock).await;
    let log = match opened {
        Ok((log, report)) => {
            let mut note = format!(
                "node: recovered log end {} (clean {}, recovery point {}, scanned {}, rebuilt {})",
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
            log
        }
        Err(e) => {
            recorder.note(0, format!("node: open failed: {e}"));
            needs_restart.store(true, Ordering::Release);
            return;
        }
    };
    if let FlushPolicy::PageCache { flush_ms, .. } = config.flush {
        let log = Arc::clone(&log);
        let needs_restart = Arc::clone(&needs_restart);
        task::spawn(async move {
            loop {
                time::sleep(time::Duration::from_millis(flush_ms.div_ceil(2).max(1))).await;
                if log.flush_if_due().await.is_err() {
                    needs_restart.store(true, Ordering::Release);
                }
            }
        });
    }
    let listener = match TcpListener::bind(("0.0.0.0", NODE_PORT)).await {
        Ok(l) => l,
        Err(e) => {
            recorder.note(0, format!("node: bind failed: {e}"));
            needs_restart.store(true, Ordering::Release);
            return;
        }
    };
    let shutdown = samsa::rt::signal::ctrl_c();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            biased;
            _ = &mut shutdown => {
                // Graceful shutdown: sync, checkpoint and leave the clean-shutdown marker.
                match log.close().await {
                    Ok(()) => recorder.note(0, format!("node: closed the log cleanly at {}", log.log_end_offset())),
                    Err(e) => recorder.note(0, format!("node: clean close failed: {e}")),
                }
                stopped.store(true, Ordering::Release);
                return;
            }
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _peer)) = accepted else {
            continue;
        };
        let log = Arc::clone(&log);
        let needs_restart = Arc::clone(&needs_restart);
        let config = config.clone();
        task::spawn(async move {
            let (mut reader, mut writer) = tokio::io::split(stream);
            while let Ok((kind, body)) = wire::read_frame(&mut reader).await {
                let (status, reply) = handle(&log, &config, kind, body).await;
                if status == Status::Unavailable {
                    needs_restart.store(true, Ordering::Release);
                }
                if wire::write_frame(&mut writer, status as u8, &reply)
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
    }
}

async fn handle(
    log: &Log,
    config: &LogConfig,
    kind: u8,
    mut body: bytes::Bytes,
) -> (Status, Vec<u8>) {
    let error = |e: LogError| {
        let status = match e {
            LogError::InvalidBatch(_) | LogError::RecordsTooLarge { .. } | LogError::Config(_) => {
                Status::Invalid
            }
            LogError::OffsetOutOfRange { .. } => Status::OffsetOutOfRange,
            LogError::Corrupt { .. } => Status::Corrupt,
            LogError::Io { .. } | LogError::Offline { .. } | LogError::Truncated { .. } => {
                Status::Unavailable
            }
        };
        (status, e.to_string().into_bytes())
    };
    match kind {
        wire::KIND_APPEND => match log.append(body).await {
            Ok(info) => {
                let mut out = BytesMut::with_capacity(16);
                out.put_i64(info.base_offset);
                out.put_i64(info.last_offset);
                (Status::Ok, out.to_vec())
            }
            Err(e) => error(e),
        },
        wire::KIND_READ if body.len() == 12 => {
            let offset = body.get_i64();
            let max_bytes = body.get_u32() as usize;
            // Serve only what the flush policy has committed: synced data by default, the
            // page cache in Kafka's page-cache mode.
            let high_watermark = match config.flush {
                FlushPolicy::SyncBeforeAck => log.durable_end_offset(),
                FlushPolicy::PageCache { .. } => log.log_end_offset(),
            };
            match log.read(offset, max_bytes, high_watermark).await {
                Ok(r) => {
                    let mut out = BytesMut::with_capacity(8 + r.records.len());
                    out.put_i64(r.next_offset);
                    out.put_slice(&r.records);
                    (Status::Ok, out.to_vec())
                }
                Err(e) => error(e),
            }
        }
        _ => (Status::Invalid, b"unknown request".to_vec()),
    }
}
