//! Workload clients: sequential processes that produce batches of uniquely numbered records
//! to the broker's one partition (acks=all) and fetch it back, through Samsa's Rust client
//! (`samsa::client`), recording every operation's invocation and completion in the history.
//!
//! By default the client does not retry a produce (`retries_max` 0): each history operation
//! is one attempt, so its outcome is exactly what the broker did, and no retry can duplicate
//! it.
//!
//! With `idempotent`, each process is an idempotent producer: it asks for a producer id with
//! InitProducerId (through the client's low-level connection API) and stamps each batch with
//! its id, epoch and sequence. A batch whose outcome is unknown (a lost response, a timeout, a
//! broker restart) is sent again with the same sequence, up to `IDEMPOTENT_ATTEMPTS_MAX` times
//! within one history operation; the broker must answer a retry of a batch it already has
//! with the original offset and not append it again, which the spec's duplicate checker
//! verifies. After an operation that did not end acknowledged the process starts over with a
//! new producer id (its sequence state is uncertain), as a Kafka producer resets after an
//! unresolved batch; the old batch is never sent again.

use crate::harness::Recorder;
use crate::node::TOPIC;
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::Rng;
use samsa::client::{Client, ClientConfig, FetchOptions};
use samsa::protocol::error::ErrorCode;
use samsa::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use samsa::protocol::record_batch::{self, BatchBuilder, BatchError};
use samsa::protocol::types::{ProducerEpoch, ProducerId};
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
/// Attempts of one idempotent produce (the first and its retries with the same sequence).
pub const IDEMPOTENT_ATTEMPTS_MAX: u32 = 8;
/// Pause between two attempts of an idempotent produce.
pub const IDEMPOTENT_RETRY_BACKOFF_MS: u64 = 50;

/// An idempotent producer's identity and next sequence in the workload's one partition.
#[derive(Clone, Copy, Debug)]
struct ProducerIdentity {
    producer_id: i64,
    epoch: i16,
    next_sequence: i32,
}

pub struct Workload {
    pub process: u32,
    /// The brokers to bootstrap from, comma-separated.
    pub bootstrap: String,
    /// The partition of [`TOPIC`] this process writes and reads (0 on the single node).
    pub partition: i32,
    pub recorder: Recorder,
    pub stop: Arc<AtomicBool>,
    pub rng: SmallRng,
    pub clock: Clock,
    pub think_ms_max: u64,
    /// Produce as an idempotent producer, retrying unknown outcomes (see the module docs).
    pub idempotent: bool,
    /// How records are keyed, and which are tombstones.
    pub keying: Keying,
    /// The produce requests' `acks` (-1: all; 1: the leader's; not with `idempotent`).
    pub acks: i16,
}

/// How the workload keys its records and which of them are tombstones (a null value; the
/// value's identity then rides in the record header [`VALUE_HEADER`]), as functions of the
/// value, so that the spec's compaction rule knows both from the value alone.
#[derive(Clone, Copy, Debug)]
pub struct Keying {
    /// `None`: keyed by the writing process (an uncompacted topic).
    pub key_of: Option<samsa_spec::KeyOf>,
    pub is_tombstone: samsa_spec::TombstoneOf,
}

impl Keying {
    pub const BY_PROCESS: Keying = Keying {
        key_of: None,
        is_tombstone: no_tombstones,
    };
}

/// The header that carries a tombstone's value.
pub const VALUE_HEADER: &str = "samsa-sim-value";

pub fn no_tombstones(_: Value) -> bool {
    false
}

/// One value in [`TOMBSTONE_ONE_IN`] is written as a tombstone in the suites with them.
pub const TOMBSTONE_ONE_IN: u64 = 8;

pub fn tombstone_one_in_eight(value: Value) -> bool {
    (mix(value) >> 40) % TOMBSTONE_ONE_IN == 0
}

/// Keys of the compaction suite: half the records go to a few hot keys (much for the cleaner
/// to remove), half to many cold ones (so that the latest value of a key often lies in a
/// closed segment the cleaner rewrites).
pub const COMPACTION_HOT_KEYS: u64 = 8;
pub const COMPACTION_COLD_KEYS: u64 = 1024;

/// The key a value is written under in the compaction suite: a fixed mix of the value, so
/// the spec's compaction rule knows every record's key from its value alone.
pub fn compaction_key(value: Value) -> u64 {
    let mixed = mix(value) >> 32;
    if mixed % 2 == 0 {
        (mixed >> 1) % COMPACTION_HOT_KEYS
    } else {
        COMPACTION_HOT_KEYS + (mixed >> 1) % COMPACTION_COLD_KEYS
    }
}

/// Only the hot keys: every record is soon superseded, so whole batches, a producer's last
/// among them, are cleaned away.
pub fn compaction_hot_key(value: Value) -> u64 {
    (mix(value) >> 32) % COMPACTION_HOT_KEYS
}

fn mix(value: Value) -> u64 {
    (value.0 ^ (value.0 >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl Workload {
    pub async fn run(mut self) {
        assert!(
            !self.idempotent || self.acks == -1,
            "an idempotent producer needs acks=all"
        );
        let mut client = new_client(&self.bootstrap, &format!("sim-{}", self.process));
        let mut seq: u32 = 0;
        let mut position: i64 = 0;
        let mut producer: Option<ProducerIdentity> = None;
        while !self.stop.load(Ordering::Acquire) {
            let think = self.rng.gen_range(0..=self.think_ms_max);
            time::sleep(Duration::from_millis(think)).await;
            if self.rng.gen_bool(0.6) {
                if self.idempotent {
                    self.produce_idempotent(&mut client, &mut seq, &mut producer)
                        .await;
                } else {
                    self.produce(&mut client, &mut seq).await;
                }
            } else {
                let from = if self.rng.gen_bool(0.2) { 0 } else { position };
                self.fetch(&mut client, from, &mut position).await;
            }
        }
    }

    /// The next 1..=RECORDS_PER_APPEND_MAX values of this process (from `*seq`, which moves
    /// past them), keyed as `keying` says, in one batch from `builder`.
    fn next_batch(&mut self, seq: &mut u32, builder: BatchBuilder) -> (Vec<Value>, Bytes) {
        build_batch(
            self.process,
            seq,
            &mut self.rng,
            &self.clock,
            builder,
            self.keying,
        )
    }

    async fn produce(&mut self, client: &mut Client, seq: &mut u32) {
        let (values, batch) = self.next_batch(seq, BatchBuilder::new(0));
        let op = self
            .recorder
            .invoke(u64::from(self.process), Op::Append { values });
        let outcome = match client
            .produce(
                TOPIC,
                self.partition,
                batch,
                self.acks,
                REQUEST_TIMEOUT_MS as i32,
            )
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

    /// One idempotent produce: the same batch (same sequence) until it is acknowledged,
    /// refused for certain, or `IDEMPOTENT_ATTEMPTS_MAX` attempts have been made.
    async fn produce_idempotent(
        &mut self,
        client: &mut Client,
        seq: &mut u32,
        producer: &mut Option<ProducerIdentity>,
    ) {
        let identity = match *producer {
            Some(identity) => identity,
            None => match init_producer_id(client, self.partition).await {
                Ok(identity) => identity,
                Err(e) => {
                    self.recorder.note(
                        u64::from(self.process),
                        format!("InitProducerId failed: {e}"),
                    );
                    return;
                }
            },
        };
        let (values, batch) = self.next_batch(
            seq,
            BatchBuilder::new(0).producer(
                identity.producer_id,
                identity.epoch,
                identity.next_sequence,
            ),
        );
        let count = values.len();
        let op = self
            .recorder
            .invoke(u64::from(self.process), Op::Append { values });
        let mut maybe_written = false;
        let mut last_error = String::new();
        let mut acknowledged = None;
        for attempt in 1..=IDEMPOTENT_ATTEMPTS_MAX {
            if attempt > 1 {
                time::sleep(Duration::from_millis(IDEMPOTENT_RETRY_BACKOFF_MS)).await;
            }
            match client
                .produce(
                    TOPIC,
                    self.partition,
                    batch.clone(),
                    -1,
                    REQUEST_TIMEOUT_MS as i32,
                )
                .await
            {
                Ok(ack) => {
                    if maybe_written {
                        // The case the duplicate checker is about: an earlier attempt may
                        // have landed, and this one must have been answered from it.
                        self.recorder.note(
                            u64::from(self.process),
                            format!(
                                "idempotent retry acknowledged at {} on attempt {attempt}",
                                ack.base_offset
                            ),
                        );
                    }
                    acknowledged = Some(ack.base_offset);
                    break;
                }
                Err(e) => {
                    let unknown = e.is_unknown_outcome() || e.maybe_delivered();
                    maybe_written |= unknown;
                    last_error = format!("attempt {attempt}: {e}");
                    // A definite refusal (a sequence or epoch error, a bad request) is not
                    // retried; anything that may succeed later is, with the same sequence.
                    if !unknown && !e.is_retriable() {
                        break;
                    }
                }
            }
        }
        let outcome = match acknowledged {
            Some(base_offset) => {
                *producer = Some(ProducerIdentity {
                    next_sequence: identity.next_sequence + count as i32,
                    ..identity
                });
                Outcome::Appended { base_offset }
            }
            None => {
                // The sequence state is uncertain: the next produce starts a new producer.
                *producer = None;
                if maybe_written {
                    Outcome::Unknown { reason: last_error }
                } else {
                    Outcome::Failed { reason: last_error }
                }
            }
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
        let fetched = client.fetch(TOPIC, self.partition, from, options).await;
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
                        Outcome::Read {
                            records,
                            high_watermark: fetched.high_watermark,
                        }
                    }
                    Err(Undecodable::Corrupt { offset, reason }) => {
                        Outcome::CorruptRead { offset, reason }
                    }
                    Err(Undecodable::Malformed(reason)) => Outcome::Failed { reason },
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

/// A workload client of the brokers at `bootstrap` (comma-separated): the simulation's
/// timeouts, no retries (each history operation is one attempt), topics auto-created.
pub fn new_client(bootstrap: &str, client_id: &str) -> Client {
    Client::new(ClientConfig {
        bootstrap: bootstrap.split(',').map(str::to_string).collect(),
        client_id: client_id.to_string(),
        request_timeout_ms: REQUEST_TIMEOUT_MS,
        connect_timeout_ms: CONNECT_TIMEOUT_MS,
        retries_max: 0,
        retry_backoff_ms: 10,
        allow_auto_topic_creation: true,
        ..ClientConfig::default()
    })
}

/// The next 1..=RECORDS_PER_APPEND_MAX values of `process` (from `*seq`, which moves past
/// them), keyed as `keying` says, in one batch from `builder`.
pub fn build_batch(
    process: u32,
    seq: &mut u32,
    rng: &mut SmallRng,
    clock: &Clock,
    mut builder: BatchBuilder,
    keying: Keying,
) -> (Vec<Value>, Bytes) {
    let count = rng.gen_range(1..=RECORDS_PER_APPEND_MAX);
    let values: Vec<Value> = (0..count).map(|i| Value::new(process, *seq + i)).collect();
    *seq += count;
    let now_ms = clock.now_ms();
    for v in &values {
        let key = match keying.key_of {
            Some(key_of) => key_of(*v).to_be_bytes().to_vec(),
            None => process.to_be_bytes().to_vec(),
        };
        let value = v.0.to_be_bytes();
        if (keying.is_tombstone)(*v) {
            builder.push(now_ms, Some(&key), None, &[(VALUE_HEADER, Some(&value))]);
        } else {
            builder.push(now_ms, Some(&key), Some(&value), &[]);
        }
    }
    (values, builder.build().freeze())
}

/// Asks the partition's leader for a new idempotent producer id (epoch 0, sequence 0).
async fn init_producer_id(client: &mut Client, partition: i32) -> Result<ProducerIdentity, String> {
    let leader = client
        .leader(TOPIC, partition)
        .await
        .map_err(|e| e.to_string())?;
    let connection = client
        .broker_connection(leader)
        .await
        .map_err(|e| e.to_string())?;
    let version = connection
        .version_for(InitProducerIdRequest::API_KEY)
        .map_err(|e| e.to_string())?;
    let request = InitProducerIdRequest {
        transactional_id: None,
        transaction_timeout_ms: 60_000,
        producer_id: ProducerId::NONE,
        producer_epoch: ProducerEpoch::NONE,
    };
    let response: InitProducerIdResponse = connection
        .send(InitProducerIdRequest::API_KEY, version, &request)
        .await
        .map_err(|e| e.to_string())?;
    if response.error_code != 0 {
        return Err(format!(
            "InitProducerId answered {}",
            ErrorCode(response.error_code)
        ));
    }
    Ok(ProducerIdentity {
        producer_id: response.producer_id.0,
        epoch: response.producer_epoch.0,
        next_sequence: 0,
    })
}

/// Why served bytes could not be read as the workload's records.
#[derive(Debug)]
pub enum Undecodable {
    /// A whole batch failed its length, magic or CRC-32C check: the reader's own
    /// verification of what was served (Java's `check.crcs=true`), at the batch's offset.
    Corrupt { offset: i64, reason: String },
    /// Bytes that verify but are not the workload's records.
    Malformed(String),
}

/// Decodes the workload's records (value = the 8-byte `Value`) at offsets >= `from`, checking
/// every whole batch's CRC first as a client with `check.crcs` does: the simulation's only
/// CRC check on the read path, so that corrupt data served is reported, not silently refused
/// by the broker. A partial batch at the end (a fetch cut at its byte limit) ends the records.
pub fn decode_records(records: bytes::Bytes, from: i64) -> Result<Vec<(i64, Value)>, Undecodable> {
    match decode_prefix(records, from) {
        (records, None) => Ok(records),
        (_, Some(why)) => Err(why),
    }
}

/// [`decode_records`] that keeps the records of the batches before the first bad one (the
/// offline reader's view: everything up to the damage).
pub fn decode_prefix(records: bytes::Bytes, from: i64) -> (Vec<(i64, Value)>, Option<Undecodable>) {
    let mut out = Vec::new();
    let why = decode_into(records, from, &mut out).err();
    (out, why)
}

fn decode_into(
    records: bytes::Bytes,
    from: i64,
    out: &mut Vec<(i64, Value)>,
) -> Result<(), Undecodable> {
    let mut position = from;
    for item in record_batch::batches(records) {
        let (header, batch) = match item {
            Ok(item) => item,
            Err(BatchError::Truncated { .. }) => break,
            Err(e) => {
                return Err(Undecodable::Corrupt {
                    offset: position,
                    reason: format!("bad batch in read: {e}"),
                })
            }
        };
        if let Err(e) = record_batch::verify(&batch) {
            return Err(Undecodable::Corrupt {
                offset: header.base_offset,
                reason: format!(
                    "batch at offset {} fails verification: {e}",
                    header.base_offset
                ),
            });
        }
        position = header.next_offset();
        let malformed = |e: String| Undecodable::Malformed(e);
        for record in record_batch::records(&batch).map_err(|e| malformed(e.to_string()))? {
            let record = record.map_err(|e| malformed(e.to_string()))?;
            if record.offset < from {
                continue;
            }
            // A tombstone carries its value in a header.
            let value = record
                .value
                .or_else(|| {
                    record
                        .headers
                        .into_iter()
                        .find(|h| h.key == VALUE_HEADER)
                        .and_then(|h| h.value)
                })
                .filter(|v| v.len() == 8)
                .ok_or_else(|| {
                    Undecodable::Malformed(format!(
                        "record at {} has no 8-byte value",
                        record.offset
                    ))
                })?;
            let mut b = [0u8; 8];
            b.copy_from_slice(&value);
            out.push((record.offset, Value(u64::from_be_bytes(b))));
        }
    }
    Ok(())
}
