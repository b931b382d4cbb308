//! Workload clients: sequential processes that produce batches of uniquely numbered records
//! to the broker's one partition (acks=all) and fetch it back, through Samsa's Rust client
//! (`samsa::client`), recording every operation's invocation and completion in the history.
//!
//! The client does not retry a produce (`retries_max` 0): each history operation is one
//! attempt, so its outcome is exactly what the broker did, and no retry can duplicate it.

use crate::harness::Recorder;
use crate::node::TOPIC;
use rand::rngs::SmallRng;
use rand::Rng;
use samsa::client::{Client, ClientConfig, FetchOptions};
use samsa::protocol::error::ErrorCode;
use samsa::protocol::record_batch::{self, BatchBuilder, BatchError};
use samsa::rt::clock::Clock;
use samsa::rt::time::{self, Duration};
use samsa_spec::{Op, Outcome, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Bound on one request's round trip; after it the outcome is unknown.
pub const REQUEST_TIMEOUT_MS: u64 = 1_000;
pub const CONNECT_TIMEOUT_MS: u64 = 500;
/// Records in one produced batch.
pub const RECORDS_PER_APPEND_MAX: u32 = 4;
/// Bytes asked for per fetch.
pub const READ_BYTES_MAX: i32 = 4096;
/// The longest a fetch waits for data (Kafka's `fetch.max.wait.ms`).
pub const FETCH_WAIT_MS_MAX: i32 = 50;

pub struct Workload {
    pub process: u32,
    pub bootstrap: String,
    pub recorder: Recorder,
    pub stop: Arc<AtomicBool>,
    pub rng: SmallRng,
    pub clock: Clock,
    pub think_ms_max: u64,
}

impl Workload {
    pub async fn run(mut self) {
        let mut client = Client::new(ClientConfig {
            bootstrap: vec![self.bootstrap.clone()],
            client_id: format!("sim-{}", self.process),
            request_timeout_ms: REQUEST_TIMEOUT_MS,
            connect_timeout_ms: CONNECT_TIMEOUT_MS,
            retries_max: 0,
            retry_backoff_ms: 10,
            allow_auto_topic_creation: true,
            ..ClientConfig::default()
        });
        let mut seq: u32 = 0;
        let mut position: i64 = 0;
        while !self.stop.load(Ordering::Acquire) {
            let think = self.rng.gen_range(0..=self.think_ms_max);
            time::sleep(Duration::from_millis(think)).await;
            if self.rng.gen_bool(0.6) {
                self.produce(&mut client, &mut seq).await;
            } else {
                let from = if self.rng.gen_bool(0.2) { 0 } else { position };
                self.fetch(&mut client, from, &mut position).await;
            }
        }
    }

    async fn produce(&mut self, client: &mut Client, seq: &mut u32) {
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
        let batch = builder.build().freeze();
        let op = self
            .recorder
            .invoke(u64::from(self.process), Op::Append { values });
        let outcome = match client
            .produce(TOPIC, 0, batch, -1, REQUEST_TIMEOUT_MS as i32)
            .await
        {
            Ok(ack) => Outcome::Appended {
                base_offset: ack.base_offset,
            },
            Err(e) if e.is_unknown_outcome() || e.maybe_delivered() => Outcome::Unknown {
                reason: e.to_string(),
            },
            Err(e) => Outcome::Failed {
                reason: e.to_string(),
            },
        };
        self.recorder.complete(op, outcome);
    }

    async fn fetch(&mut self, client: &mut Client, from: i64, position: &mut i64) {
        let op = self
            .recorder
            .invoke(u64::from(self.process), Op::Read { from });
        let options = FetchOptions {
            max_wait_ms: self.rng.gen_range(0..=FETCH_WAIT_MS_MAX),
            min_bytes: 1,
            max_bytes: self.rng.gen_range(1..=READ_BYTES_MAX),
            partition_max_bytes: self.rng.gen_range(1..=READ_BYTES_MAX),
            isolation_level: 0,
        };
        let fetched = client.fetch(TOPIC, 0, from, options).await;
        if let Ok(f) = &fetched {
            self.recorder
                .observe_start(op, f.log_start_offset, f.high_watermark);
        }
        let outcome = match fetched {
            Ok(fetched) if fetched.error == ErrorCode::NONE => {
                match decode_records(fetched.records, from) {
                    Ok(records) => {
                        if let Some((last, _)) = records.last() {
                            *position = last + 1;
                        }
                        Outcome::Read { records }
                    }
                    Err(reason) => Outcome::Failed { reason },
                }
            }
            Ok(fetched) => {
                if fetched.error == ErrorCode::OFFSET_OUT_OF_RANGE {
                    // auto.offset.reset=earliest: retention may have moved the start.
                    *position = fetched.log_start_offset.max(0);
                }
                Outcome::Failed {
                    reason: format!("fetch from {from}: {}", fetched.error),
                }
            }
            Err(e) => Outcome::Failed {
                reason: e.to_string(),
            },
        };
        self.recorder.complete(op, outcome);
    }
}

/// Decodes the workload's records (value = the 8-byte `Value`) at offsets >= `from`. A
/// partial batch at the end (a fetch cut at its byte limit) ends the records.
pub fn decode_records(records: bytes::Bytes, from: i64) -> Result<Vec<(i64, Value)>, String> {
    let mut out = Vec::new();
    for item in record_batch::batches(records) {
        let (_, batch) = match item {
            Ok(item) => item,
            Err(BatchError::Truncated { .. }) => break,
            Err(e) => return Err(format!("bad batch in read: {e}")),
        };
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
