//! Workload clients: sequential processes that append batches of uniquely numbered records and
//! read the log back, recording every operation's invocation and completion in the history.
//!
//! Each request has its own timeout, and any error or timeout drops the connection, so a
//! late reply can never be taken for the answer to a later request.

use crate::harness::Recorder;
use crate::wire::{self, Status};
use bytes::{Buf, BufMut, BytesMut};
use rand::rngs::SmallRng;
use rand::Rng;
use samsa::protocol::record_batch::{self, BatchBuilder};
use samsa::rt::clock::Clock;
use samsa::rt::net::TcpStream;
use samsa::rt::time::{self, Duration};
use samsa_spec::{Op, Outcome, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Bound on one request's round trip; after it the outcome is unknown.
pub const REQUEST_TIMEOUT_MS: u64 = 1_000;
pub const CONNECT_TIMEOUT_MS: u64 = 500;
/// Reconnect backoff bounds.
pub const BACKOFF_MS_MIN: u64 = 10;
pub const BACKOFF_MS_MAX: u64 = 500;
/// Records in one appended batch.
pub const RECORDS_PER_APPEND_MAX: u32 = 4;
/// Bytes asked for per read.
pub const READ_BYTES_MAX: u32 = 4096;

type Conn = (
    tokio::io::ReadHalf<TcpStream>,
    tokio::io::WriteHalf<TcpStream>,
);

pub struct Client {
    pub process: u32,
    pub server: SocketAddr,
    pub recorder: Recorder,
    pub stop: Arc<AtomicBool>,
    pub rng: SmallRng,
    pub clock: Clock,
    pub think_ms_max: u64,
}

impl Client {
    pub async fn run(mut self) {
        let mut conn: Option<Conn> = None;
        let mut seq: u32 = 0;
        let mut position: i64 = 0;
        let mut backoff_ms = BACKOFF_MS_MIN;
        while !self.stop.load(Ordering::Acquire) {
            let think = self.rng.gen_range(0..=self.think_ms_max);
            time::sleep(Duration::from_millis(think)).await;
            let Some(c) = conn.as_mut() else {
                match time::timeout(
                    Duration::from_millis(CONNECT_TIMEOUT_MS),
                    TcpStream::connect(self.server),
                )
                .await
                {
                    Ok(Ok(stream)) => {
                        conn = Some(tokio::io::split(stream));
                        backoff_ms = BACKOFF_MS_MIN;
                    }
                    _ => {
                        time::sleep(Duration::from_millis(backoff_ms)).await;
                        backoff_ms = (backoff_ms * 2).min(BACKOFF_MS_MAX);
                    }
                }
                continue;
            };
            let ok = if self.rng.gen_bool(0.6) {
                self.append(c, &mut seq).await
            } else {
                let from = if self.rng.gen_bool(0.2) { 0 } else { position };
                self.read(c, from, &mut position).await
            };
            if !ok {
                conn = None;
            }
        }
    }

    /// One round trip with a timeout; `None` on any transport failure.
    async fn call(c: &mut Conn, kind: u8, body: &[u8]) -> Option<(Status, bytes::Bytes)> {
        let round_trip = async {
            wire::write_frame(&mut c.1, kind, body).await?;
            wire::read_frame(&mut c.0).await
        };
        match time::timeout(Duration::from_millis(REQUEST_TIMEOUT_MS), round_trip).await {
            Ok(Ok((status, body))) => Status::from_u8(status).map(|s| (s, body)),
            _ => None,
        }
    }

    async fn append(&mut self, c: &mut Conn, seq: &mut u32) -> bool {
        let count = self.rng.gen_range(1..=RECORDS_PER_APPEND_MAX);
        let values: Vec<Value> = (0..count)
            .map(|i| Value::new(self.process, *seq + i))
            .collect();
        *seq += count;
        let mut builder = BatchBuilder::new(0);
        let now_ms = self.clock.now_ms();
        for v in &values {
            builder.push(
                now_ms,
                Some(&self.process.to_be_bytes()),
                Some(&v.0.to_be_bytes()),
                &[],
            );
        }
        let batch = builder.build();
        let op = self
            .recorder
            .invoke(u64::from(self.process), Op::Append { values });
        let (outcome, keep) = match Self::call(c, wire::KIND_APPEND, &batch).await {
            Some((Status::Ok, mut body)) if body.len() == 16 => {
                let base_offset = body.get_i64();
                (Outcome::Appended { base_offset }, true)
            }
            Some((Status::Invalid, body)) => (
                Outcome::Failed {
                    reason: String::from_utf8_lossy(&body).into_owned(),
                },
                true,
            ),
            Some((status, body)) => (
                Outcome::Unknown {
                    reason: format!("{status:?}: {}", String::from_utf8_lossy(&body)),
                },
                true,
            ),
            None => (
                Outcome::Unknown {
                    reason: "timeout or connection lost".into(),
                },
                false,
            ),
        };
        self.recorder.complete(op, outcome);
        keep
    }

    async fn read(&mut self, c: &mut Conn, from: i64, position: &mut i64) -> bool {
        let op = self
            .recorder
            .invoke(u64::from(self.process), Op::Read { from });
        let mut body = BytesMut::with_capacity(12);
        body.put_i64(from);
        body.put_u32(self.rng.gen_range(1..=READ_BYTES_MAX));
        let (outcome, keep) = match Self::call(c, wire::KIND_READ, &body).await {
            Some((Status::Ok, mut reply)) if reply.len() >= 8 => {
                let next = reply.get_i64();
                match decode_records(reply, from) {
                    Ok(records) => {
                        *position = next;
                        (Outcome::Read { records }, true)
                    }
                    Err(reason) => (Outcome::Failed { reason }, true),
                }
            }
            Some((Status::OffsetOutOfRange, body)) => {
                *position = 0;
                (
                    Outcome::Failed {
                        reason: String::from_utf8_lossy(&body).into_owned(),
                    },
                    true,
                )
            }
            Some((status, body)) => (
                Outcome::Failed {
                    reason: format!("{status:?}: {}", String::from_utf8_lossy(&body)),
                },
                true,
            ),
            None => (
                Outcome::Failed {
                    reason: "timeout or connection lost".into(),
                },
                false,
            ),
        };
        self.recorder.complete(op, outcome);
        keep
    }
}

/// Decodes the workload's records (value = the 8-byte `Value`) at offsets >= `from`.
pub fn decode_records(records: bytes::Bytes, from: i64) -> Result<Vec<(i64, Value)>, String> {
    let mut out = Vec::new();
    for item in record_batch::batches(records) {
        let (_, batch) = item.map_err(|e| format!("bad batch in read: {e}"))?;
        for record in record_batch::records(&batch).map_err(|e| e.to_string())? {
            let record = record.map_err(|e| e.to_string())?;
            if record.offset < from {
                continue;
            }
            let value = record
                .value
                .filter(|v| v.len() == 8)
                .ok_or_else(|| format!("record at {} has no 8-byte value", record.offset))?;
            let mut b = [0u8; 8];
            b.copy_from_slice(&value);
            out.push((record.offset, Value(u64::from_be_bytes(b))));
        }
    }
    Ok(out)
}
