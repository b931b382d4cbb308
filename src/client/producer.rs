//! The high-level [`Producer`] (batching, linger, a bounded buffer, compression, partitioners,
//! idempotence, pipelined requests with ordered retries) and the low-level helpers it is built
//! on: building one record batch ([`build_batch`]) and sending one ([`send_batch`]).
//!
//! How the producer works, as Kafka's Java client does:
//! - [`Producer::send`] picks a partition (explicit, murmur2 of the key, or sticky for keyless
//!   records; see `partitioner`), waits for room in the buffer (`buffer_memory` bytes, at most
//!   `max_block_ms`: back-pressure), and appends the record to its partition's open batch,
//!   encoding it at once. It returns a [`Delivery`] future; [`Producer::send_with_callback`]
//!   calls a closure instead.
//! - An open batch is sealed when the next record would take it past `batch_size` bytes, when
//!   it has waited `linger_ms`, or on [`Producer::flush`] / [`Producer::close`].
//! - One sender task (spawned with `crate::rt::task`) takes sealed batches, one per partition
//!   per request, groups them by leader and writes Produce requests on one pipelined
//!   connection per broker (`pipeline`), keeping at most `max_in_flight_requests_per_connection`
//!   requests outstanding per connection (so also per partition).
//! - Each request's response is awaited by a task of its own, which completes every record of
//!   each successful batch with its offset (base offset + index) and hands failed batches back.
//!
//! Idempotence (`enable_idempotence`, on by default as in the Java client; needs acks=all):
//! [`Producer::new`] asks for a producer id and epoch (InitProducerId). A batch gets its
//! producer id, epoch and base sequence when it is first sent, and is resent byte for byte on
//! a retry, so the broker recognises a duplicate. Per-partition sequences are consecutive in
//! send order. When a batch fails retriably, nothing more of that partition is sent until its
//! in-flight batches are back (later ones fail with OUT_OF_ORDER_SEQUENCE_NUMBER, which is then
//! expected and retried); the failed batches are requeued in sequence order and resent. A
//! batch that fails for good after being sent leaves the partition's sequence unknown: the
//! producer then asks for a new producer id (sequences restart at 0) before assigning more.
//! A broker that does not support InitProducerId makes `Producer::new` fail with an error
//! naming the API; there is no silent fallback to a non-idempotent producer, because that
//! would quietly turn retries into possible duplicates. Set `enable_idempotence: false` to
//! produce to such a broker.
//!
//! Without idempotence a batch is retried only after errors that prove it was not written
//! (refused before the append, or never sent). After an error that leaves it unknown (a lost
//! connection, a timeout, REQUEST_TIMED_OUT) its records complete with
//! [`ProducerError::UnknownOutcome`]: the producer never duplicates a record silently.
//!
//! Invariants:
//! - `buffer_used` is the sum of the sizes of every batch not yet completed; `send` waits
//!   while it would pass `buffer_memory` (a record alone in an empty buffer always fits).
//! - Every record completes exactly once: its callback is taken out of its batch when called.
//! - Per partition, batches are sent in the order they were sealed, retried ones first, in
//!   sequence order; at most `max_in_flight_requests_per_connection` are in flight.
//! - Callbacks run outside every lock.
//! - [`build_batch`] never lets [`BatchBuilder`] panic: it refuses an empty record list, a
//!   batch whose records could exceed [`BATCH_BYTES_MAX`], and timestamps too far apart for a
//!   delta, with a [`ClientError::InvalidBatch`] naming the problem.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use rand::rngs::SmallRng;
use tokio::sync::{oneshot, Mutex as AsyncMutex, Notify};

use super::cluster::{Client, ClientConfig, ProduceAck};
use super::connection::ConnectionLimits;
use super::error::{code_is_retriable, produce_code_is_definite, ClientError};
use super::partitioner::{partition_for_key, StickyPartitioner};
use super::pipeline::Pipeline;
use crate::protocol::error::ErrorCode;
use crate::protocol::produce::{
    PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
};
use crate::protocol::record_batch::{
    varint_len, varlong_len, BatchBuilder, Compression, BATCH_HEADER_LEN, BATCH_LEN_MAX,
    VARINT_LEN_MAX, VARLONG_LEN_MAX,
};
use crate::rt::task::JoinHandle;
use crate::rt::time::Instant;

/// The largest batch (before compression) the client builds: a quarter of the format's hard
/// ceiling, so that no codec's worst-case expansion can reach the ceiling.
pub const BATCH_BYTES_MAX: usize = BATCH_LEN_MAX / 4;

/// One record to produce.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
    /// CreateTime, in milliseconds since the epoch.
    pub timestamp: i64,
}

/// An upper bound on the bytes `record` takes in a batch: every varint at its longest.
fn record_bytes_bound(record: &ProducerRecord) -> usize {
    let len = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len);
    let headers: usize = record
        .headers
        .iter()
        .map(|(k, v)| 2 * VARINT_LEN_MAX + k.len() + len(v))
        .sum();
    // length, attributes, timestamp delta, offset delta, key and value lengths, header count.
    VARINT_LEN_MAX
        + 1
        + VARLONG_LEN_MAX
        + 3 * VARINT_LEN_MAX
        + VARINT_LEN_MAX
        + len(&record.key)
        + len(&record.value)
        + headers
}

/// A v2 batch of `records` (offsets from 0; the broker assigns the real ones), compressed
/// with `compression`.
pub fn build_batch(
    records: &[ProducerRecord],
    compression: Compression,
) -> Result<Bytes, ClientError> {
    let Some(first) = records.first() else {
        return Err(ClientError::InvalidBatch {
            reason: "a batch needs at least one record".into(),
        });
    };
    let mut bound = BATCH_HEADER_LEN;
    for (index, record) in records.iter().enumerate() {
        bound = bound.saturating_add(record_bytes_bound(record));
        if record.timestamp.checked_sub(first.timestamp).is_none() {
            return Err(ClientError::InvalidBatch {
                reason: format!(
                    "record {index}'s timestamp {} is too far from the first record's {}",
                    record.timestamp, first.timestamp
                ),
            });
        }
    }
    if bound > BATCH_BYTES_MAX {
        return Err(ClientError::InvalidBatch {
            reason: format!(
                "{} records may take {bound} bytes, above BATCH_BYTES_MAX {BATCH_BYTES_MAX}",
                records.len()
            ),
        });
    }
    let mut builder = BatchBuilder::new(0).compression(compression);
    for record in records {
        push_record(&mut builder, record);
    }
    Ok(builder.build().freeze())
}

/// Appends `record` to the batch `builder` is building.
fn push_record(builder: &mut BatchBuilder, record: &ProducerRecord) {
    // Collecting no headers does not allocate, so a record without headers costs nothing here.
    let headers: Vec<(&str, Option<&[u8]>)> = record
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_deref()))
        .collect();
    builder.push(
        record.timestamp,
        record.key.as_deref(),
        record.value.as_deref(),
        &headers,
    );
}

/// Builds a batch of `records` and produces it to `topic`-`partition`.
pub async fn send_batch(
    client: &mut Client,
    topic: &str,
    partition: i32,
    records: &[ProducerRecord],
    compression: Compression,
    acks: i16,
    timeout_ms: i32,
) -> Result<ProduceAck, ClientError> {
    let batch = build_batch(records, compression)?;
    client
        .produce(topic, partition, batch, acks, timeout_ms)
        .await
}

// ---------------------------------------------------------------------------------------------
// The high-level producer.
// ---------------------------------------------------------------------------------------------

/// The producer's settings, under the Java client's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerConfig {
    /// Bootstrap servers, timeouts and retry backoff of the connections.
    pub client: ClientConfig,
    /// 0, 1 or -1 (all).
    pub acks: i16,
    /// How long a batch may wait for more records before it is sent.
    pub linger_ms: u64,
    /// The size (encoded, before compression) at which a batch is sent without waiting.
    pub batch_size: usize,
    /// Bytes of records the producer may hold (open, queued and in-flight batches).
    pub buffer_memory: usize,
    /// How long `send` may wait for room in the buffer (or for metadata).
    pub max_block_ms: u64,
    pub compression: Compression,
    pub enable_idempotence: bool,
    /// Requests awaiting a response per broker connection.
    pub max_in_flight_requests_per_connection: usize,
    /// How long a record may take from `send` to its result, retries included: the bound on
    /// every retry loop of the producer.
    pub delivery_timeout_ms: u64,
    /// The largest Produce request (and so the largest record).
    pub max_request_size: usize,
    /// How long the broker may wait for acks=all (the request's `timeout_ms`).
    pub ack_timeout_ms: i32,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            client: ClientConfig::default(),
            acks: -1,
            linger_ms: 5,
            batch_size: 16_384,
            buffer_memory: 33_554_432,
            max_block_ms: 60_000,
            compression: Compression::None,
            enable_idempotence: true,
            max_in_flight_requests_per_connection: 5,
            delivery_timeout_ms: 120_000,
            max_request_size: 1_048_576,
            ack_timeout_ms: 30_000,
        }
    }
}

/// Where a record was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordMetadata {
    pub partition: i32,
    /// The record's offset; -1 when unknown (acks=0, or a duplicate the broker no longer
    /// remembers the offset of).
    pub offset: i64,
    /// The broker's append time under LogAppendTime, else -1.
    pub log_append_time: i64,
}

/// Why a record was not (or may not have been) written.
#[derive(Clone, Debug)]
pub enum ProducerError {
    /// The batch was refused or could not be sent: the records are not in the log.
    Failed {
        topic: String,
        partition: i32,
        source: Arc<ClientError>,
    },
    /// The records may or may not be in the log (see the module docs).
    UnknownOutcome {
        topic: String,
        partition: i32,
        source: Arc<ClientError>,
    },
    /// `delivery_timeout_ms` passed before the batch could be sent (or resent).
    DeliveryTimeout {
        topic: String,
        partition: i32,
        timeout_ms: u64,
        /// True if an earlier attempt was sent and may have been written.
        maybe_written: bool,
    },
    /// The buffer stayed full for `max_block_ms`.
    BufferExhausted {
        buffer_memory: usize,
        max_block_ms: u64,
    },
    RecordTooLarge {
        bytes: usize,
        max: usize,
    },
    /// The topic's metadata could not be obtained, or names no such partition.
    Metadata {
        topic: String,
        source: Arc<ClientError>,
    },
    InvalidConfig {
        reason: String,
    },
    /// An idempotent producer could not get a producer id (InitProducerId); the error names
    /// an unsupporting broker as such.
    InitProducerId {
        source: Arc<ClientError>,
    },
    /// The producer was closed (or its sender task stopped) before the record completed.
    Closed,
}

impl fmt::Display for ProducerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProducerError::Failed {
                topic,
                partition,
                source,
            } => write!(f, "produce to {topic}-{partition} failed: {source}"),
            ProducerError::UnknownOutcome {
                topic,
                partition,
                source,
            } => write!(
                f,
                "produce to {topic}-{partition}: outcome unknown (the records may or may not be in the log): {source}"
            ),
            ProducerError::DeliveryTimeout {
                topic,
                partition,
                timeout_ms,
                maybe_written,
            } => write!(
                f,
                "produce to {topic}-{partition}: not delivered within delivery_timeout_ms {timeout_ms}{}",
                if *maybe_written {
                    " (an earlier attempt may have been written)"
                } else {
                    ""
                }
            ),
            ProducerError::BufferExhausted {
                buffer_memory,
                max_block_ms,
            } => write!(
                f,
                "the producer's buffer (buffer_memory {buffer_memory} bytes) stayed full for max_block_ms {max_block_ms}"
            ),
            ProducerError::RecordTooLarge { bytes, max } => write!(
                f,
                "a record of {bytes} bytes exceeds max_request_size {max}"
            ),
            ProducerError::Metadata { topic, source } => {
                write!(f, "no usable metadata for topic {topic}: {source}")
            }
            ProducerError::InvalidConfig { reason } => write!(f, "invalid producer config: {reason}"),
            ProducerError::InitProducerId { source } => write!(
                f,
                "the idempotent producer cannot get a producer id: {source} (set enable_idempotence=false for a broker without InitProducerId)"
            ),
            ProducerError::Closed => write!(f, "the producer was closed before the record completed"),
        }
    }
}

impl std::error::Error for ProducerError {}

impl ProducerError {
    /// True if the record may be in the log although it failed.
    pub fn is_unknown_outcome(&self) -> bool {
        matches!(
            self,
            ProducerError::UnknownOutcome { .. }
                | ProducerError::DeliveryTimeout {
                    maybe_written: true,
                    ..
                }
        )
    }
}

/// A record's result.
pub type DeliveryResult = Result<RecordMetadata, ProducerError>;

/// Called once with a record's result, on the producer's tasks: it must not block.
pub type Callback = Box<dyn FnOnce(DeliveryResult) + Send>;

/// The result of one [`Producer::send`], once the broker answered.
#[derive(Debug)]
pub struct Delivery(oneshot::Receiver<DeliveryResult>);

impl Future for Delivery {
    type Output = DeliveryResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<DeliveryResult> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(ProducerError::Closed)))
    }
}

/// A topic-partition.
type Tp = (String, i32);

/// A batch from its first record to its result.
struct Batch {
    /// Until the batch is first sent: the records, encoded.
    builder: Option<BatchBuilder>,
    /// From its first send: the bytes every attempt sends.
    bytes: Option<Bytes>,
    callbacks: Vec<Option<Callback>>,
    base_timestamp: i64,
    /// Encoded size so far, header included: what the batch holds of `buffer_memory`.
    size: usize,
    created: Instant,
    /// -1 until an idempotent producer sends it.
    base_sequence: i32,
    /// The identity generation the sequence belongs to.
    identity_generation: u64,
    attempts: u32,
    /// True once an attempt may have been written.
    maybe_written: bool,
}

impl Batch {
    fn new(compression: Compression, now: Instant, timestamp: i64) -> Batch {
        Batch {
            builder: Some(BatchBuilder::new(0).compression(compression)),
            bytes: None,
            callbacks: Vec::new(),
            base_timestamp: timestamp,
            size: BATCH_HEADER_LEN,
            created: now,
            base_sequence: -1,
            identity_generation: 0,
            attempts: 0,
            maybe_written: false,
        }
    }

    fn records(&self) -> usize {
        self.callbacks.len()
    }
}

/// One partition's batches.
#[derive(Default)]
struct PartitionQueue {
    open: Option<Batch>,
    /// Sealed batches in send order; retried ones go back in front, by sequence.
    ready: VecDeque<Batch>,
    in_flight: usize,
    /// A batch failed retriably: send nothing until every in-flight batch is back.
    draining: bool,
    /// Not before this instant (retry backoff, or a failed connection).
    backoff_until: Option<Instant>,
    /// The identity generation `next_sequence` belongs to.
    sequence_generation: u64,
    next_sequence: i32,
    /// Batches with a sequence of this generation fail without retry: an earlier one failed
    /// for good, so theirs can never be accepted in order.
    poisoned_generation: Option<u64>,
}

/// What the sender does with a failed batch.
enum Verdict {
    Retry,
    Fail(ProducerError),
    /// DUPLICATE_SEQUENCE_NUMBER: the broker has the batch already.
    Duplicate,
}

/// The producer's state, behind one lock held only for bookkeeping (never across an await).
struct State {
    config: Arc<ProducerConfig>,
    partitions: BTreeMap<Tp, PartitionQueue>,
    partition_counts: BTreeMap<String, i32>,
    sticky: StickyPartitioner,
    buffer_used: usize,
    /// Records sent and not yet completed.
    outstanding: usize,
    flush_requested: bool,
    closing: bool,
    /// The idempotent producer's id and epoch.
    identity: Option<(i64, i16)>,
    identity_generation: u64,
    reinit_requested: bool,
    /// Topics whose metadata must be refreshed before their next send.
    stale_topics: BTreeSet<String>,
    /// Brokers whose connection must be dropped (a response timed out on it).
    broken_brokers: BTreeSet<i32>,
}

/// One batch taken for a request.
struct Sent {
    tp: Tp,
    batch: Batch,
}

/// Completions to run outside the lock.
type Completions = Vec<(Callback, DeliveryResult)>;

fn sequence_after(sequence: i32, records: usize) -> i32 {
    // Kafka's sequences wrap from i32::MAX to 0.
    let next = i64::from(sequence) + records as i64;
    (next % (i64::from(i32::MAX) + 1)) as i32
}

/// The encoded length of a record in a batch whose first record has `base_timestamp`, at
/// index `offset_delta`: exactly what `BatchBuilder::push` writes.
fn encoded_record_len(record: &ProducerRecord, timestamp_delta: i64, offset_delta: usize) -> usize {
    let len = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len);
    let len_field = |b: &Option<Bytes>| {
        b.as_ref().map_or(1, |b| {
            varint_len(i32::try_from(b.len()).unwrap_or(i32::MAX))
        })
    };
    let mut body = 1
        + varlong_len(timestamp_delta)
        + varint_len(i32::try_from(offset_delta).unwrap_or(i32::MAX))
        + len_field(&record.key)
        + len(&record.key)
        + len_field(&record.value)
        + len(&record.value)
        + varint_len(i32::try_from(record.headers.len()).unwrap_or(i32::MAX));
    for (key, value) in &record.headers {
        body += varint_len(i32::try_from(key.len()).unwrap_or(i32::MAX))
            + key.len()
            + len_field(value)
            + len(value);
    }
    varint_len(i32::try_from(body).unwrap_or(i32::MAX)) + body
}

impl State {
    /// A new state; `rng` (from `crate::rt::rand`, drawn by the caller so that the state
    /// stays IO-free) drives the sticky partitioner.
    fn new(config: Arc<ProducerConfig>, identity: Option<(i64, i16)>, rng: SmallRng) -> State {
        let sticky = StickyPartitioner::new(config.batch_size, rng);
        State {
            config,
            partitions: BTreeMap::new(),
            partition_counts: BTreeMap::new(),
            sticky,
            buffer_used: 0,
            outstanding: 0,
            flush_requested: false,
            closing: false,
            identity,
            identity_generation: 1,
            reinit_requested: false,
            stale_topics: BTreeSet::new(),
            broken_brokers: BTreeSet::new(),
        }
    }

    /// The partition for `record`, given the topic's partition count.
    fn choose_partition(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        record: &ProducerRecord,
        count: i32,
        size: usize,
    ) -> i32 {
        match (partition, &record.key) {
            (Some(p), _) => p,
            (None, Some(key)) => partition_for_key(key, count),
            (None, None) => self.sticky.partition(topic, count, size),
        }
    }

    /// Appends `record` to `tp`'s open batch, sealing that batch first if the record would
    /// take it past `batch_size`. Returns true if the sender should look again (a new open
    /// batch, whose linger deadline it does not know yet, or a sealed one).
    fn append(
        &mut self,
        tp: Tp,
        record: &ProducerRecord,
        callback: Callback,
        now: Instant,
    ) -> bool {
        let batch_size = self.config.batch_size;
        let compression = self.config.compression;
        let queue = self.partitions.entry(tp).or_default();
        let mut wake = false;
        let fits = |open: &Batch| {
            let Some(delta) = record.timestamp.checked_sub(open.base_timestamp) else {
                return false;
            };
            let len = encoded_record_len(record, delta, open.records());
            open.records() < i32::MAX as usize && open.size + len <= batch_size
        };
        if queue.open.as_ref().is_some_and(|open| !fits(open)) {
            if let Some(full) = queue.open.take() {
                queue.ready.push_back(full);
                wake = true;
            }
        }
        let open = match &mut queue.open {
            Some(open) => open,
            slot @ None => {
                wake = true;
                slot.insert(Batch::new(compression, now, record.timestamp))
            }
        };
        let delta = record.timestamp.saturating_sub(open.base_timestamp);
        let len = encoded_record_len(record, delta, open.records());
        if let Some(builder) = &mut open.builder {
            push_record(builder, record);
        }
        open.size += len;
        open.callbacks.push(Some(callback));
        self.buffer_used += len
            + if open.records() == 1 {
                BATCH_HEADER_LEN
            } else {
                0
            };
        self.outstanding += 1;
        if open.size >= batch_size {
            if let Some(full) = queue.open.take() {
                queue.ready.push_back(full);
            }
            wake = true;
        }
        wake
    }

    /// Seals the open batches that lingered long enough (all of them on flush or close), and
    /// fails the queued batches past `delivery_timeout_ms`. Returns the completions and the
    /// next instant something becomes due.
    fn seal_due(&mut self, now: Instant, completions: &mut Completions) -> Option<Instant> {
        let linger = Duration::from_millis(self.config.linger_ms);
        let delivery_timeout = Duration::from_millis(self.config.delivery_timeout_ms);
        let seal_all = self.flush_requested || self.closing;
        self.flush_requested = false;
        let mut next: Option<Instant> = None;
        let mut earliest = |at: Instant| next = Some(next.map_or(at, |n: Instant| n.min(at)));
        let mut expired: Vec<(Tp, Batch)> = Vec::new();
        for (tp, queue) in &mut self.partitions {
            if let Some(open) = &queue.open {
                let due = open.created + linger;
                if seal_all || due <= now {
                    if let Some(open) = queue.open.take() {
                        queue.ready.push_back(open);
                    }
                } else {
                    earliest(due);
                }
            }
            // Only batches never sent, or not in flight now, can expire here: an in-flight
            // batch waits for its response (bounded by the request timeout).
            while queue
                .ready
                .front()
                .is_some_and(|b| b.created + delivery_timeout <= now)
            {
                if let Some(batch) = queue.ready.pop_front() {
                    expired.push((tp.clone(), batch));
                }
            }
            if let Some(at) = queue.backoff_until {
                if at > now && !queue.ready.is_empty() {
                    earliest(at);
                }
            }
        }
        for (tp, batch) in expired {
            let error = ProducerError::DeliveryTimeout {
                topic: tp.0.clone(),
                partition: tp.1,
                timeout_ms: self.config.delivery_timeout_ms,
                maybe_written: batch.maybe_written,
            };
            self.fail_sequenced(&tp, &batch);
            self.complete(batch, Err(error), completions);
        }
        next
    }

    /// The partitions with a batch that may be sent now.
    fn sendable(&mut self, now: Instant) -> Vec<Tp> {
        let max_in_flight = self.config.max_in_flight_requests_per_connection;
        let reinit = self.reinit_requested;
        self.partitions
            .iter_mut()
            .filter_map(|(tp, queue)| {
                if queue.draining && queue.in_flight == 0 {
                    queue.draining = false;
                }
                let front = queue.ready.front()?;
                let ok = !queue.draining
                    && queue.in_flight < max_in_flight
                    && queue.backoff_until.is_none_or(|at| at <= now)
                    // While a new producer id is awaited, only batches that already have their
                    // sequence (retries) go out.
                    && !(reinit && front.base_sequence < 0 && front.bytes.is_none());
                ok.then(|| tp.clone())
            })
            .collect()
    }

    /// Takes the next batch of `tp` for a request whose other batches hold `request_bytes`,
    /// building its bytes (with its producer id and sequence) on its first send.
    fn take_batch(&mut self, tp: &Tp, request_bytes: usize) -> Option<Batch> {
        let max_request_size = self.config.max_request_size;
        let identity = self.identity;
        let identity_generation = self.identity_generation;
        let queue = self.partitions.get_mut(tp)?;
        let front = queue.ready.front()?;
        if request_bytes > 0 && request_bytes + front.size > max_request_size {
            return None;
        }
        let mut batch = queue.ready.pop_front()?;
        if batch.bytes.is_none() {
            let builder = batch.builder.take()?;
            let builder = match identity {
                Some((producer_id, producer_epoch)) => {
                    if queue.sequence_generation != identity_generation {
                        queue.sequence_generation = identity_generation;
                        queue.next_sequence = 0;
                    }
                    batch.base_sequence = queue.next_sequence;
                    batch.identity_generation = identity_generation;
                    queue.next_sequence = sequence_after(queue.next_sequence, batch.records());
                    builder.producer(producer_id, producer_epoch, batch.base_sequence)
                }
                None => builder,
            };
            batch.bytes = Some(builder.build().freeze());
        }
        batch.attempts += 1;
        queue.in_flight += 1;
        Some(batch)
    }

    /// Releases `batch` and completes its records with `result` (offsets from its base).
    fn complete(
        &mut self,
        mut batch: Batch,
        result: Result<(i32, i64, i64), ProducerError>,
        completions: &mut Completions,
    ) {
        self.buffer_used = self.buffer_used.saturating_sub(batch.size);
        self.outstanding = self.outstanding.saturating_sub(batch.records());
        for (index, callback) in batch.callbacks.iter_mut().enumerate() {
            let Some(callback) = callback.take() else {
                continue;
            };
            let outcome = match &result {
                Ok((partition, base_offset, log_append_time)) => Ok(RecordMetadata {
                    partition: *partition,
                    offset: if *base_offset < 0 {
                        -1
                    } else {
                        base_offset.saturating_add(index as i64)
                    },
                    log_append_time: *log_append_time,
                }),
                Err(e) => Err(e.clone()),
            };
            completions.push((callback, outcome));
        }
    }

    /// A sequenced batch of `tp` failed for good: its successors of the same identity can
    /// never be accepted in order, and the partition's next sequence is unknown, so the
    /// producer asks for a new producer id.
    fn fail_sequenced(&mut self, tp: &Tp, batch: &Batch) {
        if batch.base_sequence < 0 {
            return;
        }
        if let Some(queue) = self.partitions.get_mut(tp) {
            queue.poisoned_generation = Some(batch.identity_generation);
        }
        if batch.identity_generation == self.identity_generation {
            self.reinit_requested = true;
        }
    }

    /// Decides what happens to a batch whose attempt failed with `err`.
    fn verdict(&mut self, tp: &Tp, batch: &Batch, err: &ClientError, now: Instant) -> Verdict {
        let idempotent = self.identity.is_some() && batch.base_sequence >= 0;
        let code = err.code();
        if idempotent && code == Some(ErrorCode::DUPLICATE_SEQUENCE_NUMBER) {
            return Verdict::Duplicate;
        }
        let queue = self.partitions.get(tp);
        let draining = queue.is_some_and(|q| q.draining);
        let poisoned = queue
            .and_then(|q| q.poisoned_generation)
            .is_some_and(|g| idempotent && g == batch.identity_generation);
        let maybe_written = batch.maybe_written
            || err.maybe_delivered()
            || code.is_some_and(|c| !produce_code_is_definite(c, self.config.acks));
        // OUT_OF_ORDER_SEQUENCE_NUMBER right after an earlier batch of the partition failed is
        // the expected consequence of that failure, not a problem of this batch.
        let retriable = err.is_retriable()
            || (idempotent && draining && code == Some(ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER));
        let allowed = if idempotent { true } else { !maybe_written };
        let in_time = batch.created + Duration::from_millis(self.config.delivery_timeout_ms) > now;
        if retriable && allowed && in_time && !poisoned {
            return Verdict::Retry;
        }
        let source = Arc::new(clone_error(err));
        let (topic, partition) = (tp.0.clone(), tp.1);
        if !in_time && retriable && allowed {
            return Verdict::Fail(ProducerError::DeliveryTimeout {
                topic,
                partition,
                timeout_ms: self.config.delivery_timeout_ms,
                maybe_written,
            });
        }
        Verdict::Fail(if maybe_written {
            ProducerError::UnknownOutcome {
                topic,
                partition,
                source,
            }
        } else {
            ProducerError::Failed {
                topic,
                partition,
                source,
            }
        })
    }

    /// Applies one batch's outcome: `Ok((base_offset, log_append_time))` or the error.
    fn on_result(
        &mut self,
        tp: Tp,
        mut batch: Batch,
        result: Result<(i64, i64), ClientError>,
        now: Instant,
        completions: &mut Completions,
    ) {
        if let Some(queue) = self.partitions.get_mut(&tp) {
            queue.in_flight = queue.in_flight.saturating_sub(1);
        }
        let err = match result {
            Ok((base_offset, log_append_time)) => {
                self.complete(batch, Ok((tp.1, base_offset, log_append_time)), completions);
                return;
            }
            Err(err) => err,
        };
        match self.verdict(&tp, &batch, &err, now) {
            Verdict::Duplicate => {
                self.complete(batch, Ok((tp.1, -1, -1)), completions);
            }
            Verdict::Retry => {
                batch.maybe_written |= err.maybe_delivered();
                if err
                    .code()
                    .is_none_or(|c| c != ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER)
                {
                    self.stale_topics.insert(tp.0.clone());
                }
                let backoff = Duration::from_millis(self.config.client.retry_backoff_ms);
                let queue = self.partitions.entry(tp).or_default();
                queue.draining = true;
                queue.backoff_until = Some(now + backoff);
                // Retries go before every batch never sent, in sequence order.
                let at = queue
                    .ready
                    .iter()
                    .position(|b| {
                        b.bytes.is_none()
                            || (batch.base_sequence >= 0
                                && b.identity_generation == batch.identity_generation
                                && b.base_sequence > batch.base_sequence)
                    })
                    .unwrap_or(queue.ready.len());
                queue.ready.insert(at, batch);
            }
            Verdict::Fail(error) => {
                self.fail_sequenced(&tp, &batch);
                self.complete(batch, Err(error), completions);
            }
        }
    }

    /// True when nothing is left to send or await.
    fn is_idle(&self) -> bool {
        self.outstanding == 0
    }
}

/// A copy of `err` for the records of a batch: `io::Error` is not `Clone`, so network errors
/// keep their kind and text.
fn clone_error(err: &ClientError) -> ClientError {
    let io = |e: &std::io::Error| std::io::Error::new(e.kind(), e.to_string());
    match err {
        ClientError::Connect { addr, source } => ClientError::Connect {
            addr: addr.clone(),
            source: io(source),
        },
        ClientError::Network {
            addr,
            api,
            sent,
            source,
        } => ClientError::Network {
            addr: addr.clone(),
            api,
            sent: *sent,
            source: io(source),
        },
        ClientError::Kafka {
            code,
            message,
            topic,
            partition,
        } => ClientError::Kafka {
            code: *code,
            message: message.clone(),
            topic: topic.clone(),
            partition: *partition,
        },
        ClientError::ConnectionClosed { addr, api } => ClientError::ConnectionClosed {
            addr: addr.clone(),
            api,
        },
        ClientError::ConnectionBroken { addr } => {
            ClientError::ConnectionBroken { addr: addr.clone() }
        }
        ClientError::Timeout {
            addr,
            api,
            timeout_ms,
        } => ClientError::Timeout {
            addr: addr.clone(),
            api,
            timeout_ms: *timeout_ms,
        },
        other => ClientError::InvalidArgument {
            reason: other.to_string(),
        },
    }
}

/// What the producer handle and its tasks share.
struct Shared {
    config: Arc<ProducerConfig>,
    state: Mutex<State>,
    /// Wakes the sender: a new or sealed batch, a response, a flush, close.
    wake: Notify,
    /// Buffer space was released, or records completed (for `send` and `flush`).
    progress: Notify,
    client: AsyncMutex<Client>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn run_completions(&self, completions: Completions) {
        let any = !completions.is_empty();
        for (callback, result) in completions {
            callback(result);
        }
        if any {
            self.progress.notify_waiters();
        }
    }
}

/// An asynchronous, batching, optionally idempotent producer; see the module docs.
pub struct Producer {
    shared: Arc<Shared>,
    sender: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("config", &self.shared.config)
            .finish()
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        // The sender finishes what was sent, then stops.
        self.shared.lock().closing = true;
        self.shared.wake.notify_one();
    }
}

impl Producer {
    /// Checks `config`, asks for a producer id when idempotence is on (failing if the cluster
    /// cannot give one, see the module docs), and starts the sender task.
    pub async fn new(config: ProducerConfig) -> Result<Producer, ProducerError> {
        if config.enable_idempotence && config.acks != -1 {
            return Err(ProducerError::InvalidConfig {
                reason: format!(
                    "enable_idempotence needs acks=-1 (all), not acks={}; turn idempotence off to use other acks",
                    config.acks
                ),
            });
        }
        if !matches!(config.acks, -1..=1) {
            return Err(ProducerError::InvalidConfig {
                reason: format!("acks must be -1, 0 or 1, not {}", config.acks),
            });
        }
        if config.max_request_size > BATCH_BYTES_MAX || config.batch_size > config.max_request_size
        {
            return Err(ProducerError::InvalidConfig {
                reason: format!(
                    "need batch_size {} <= max_request_size {} <= {BATCH_BYTES_MAX}",
                    config.batch_size, config.max_request_size
                ),
            });
        }
        if config.max_in_flight_requests_per_connection == 0 {
            return Err(ProducerError::InvalidConfig {
                reason: "max_in_flight_requests_per_connection must be at least 1".into(),
            });
        }
        let mut client = Client::new(config.client.clone());
        let identity = if config.enable_idempotence {
            let id = client.init_producer_id(None, i32::MAX).await.map_err(|e| {
                ProducerError::InitProducerId {
                    source: Arc::new(e),
                }
            })?;
            Some(id)
        } else {
            None
        };
        let config = Arc::new(config);
        let shared = Arc::new(Shared {
            config: config.clone(),
            state: Mutex::new(State::new(config, identity, crate::rt::rand::small_rng())),
            wake: Notify::new(),
            progress: Notify::new(),
            client: AsyncMutex::new(client),
        });
        let sender = crate::rt::task::spawn(run_sender(shared.clone()));
        Ok(Producer {
            shared,
            sender: Some(sender),
        })
    }

    pub fn config(&self) -> &ProducerConfig {
        &self.shared.config
    }

    /// The idempotent producer's id and epoch, if idempotence is on.
    pub fn producer_identity(&self) -> Option<(i64, i16)> {
        self.shared.lock().identity
    }

    /// Queues `record` for `topic` (to `partition`, or the partitioner's choice) and returns
    /// its future result. Waits while the buffer is full, up to `max_block_ms`.
    pub async fn send(
        &self,
        topic: &str,
        partition: Option<i32>,
        record: ProducerRecord,
    ) -> Result<Delivery, ProducerError> {
        let (tx, rx) = oneshot::channel();
        self.send_with_callback(
            topic,
            partition,
            record,
            Box::new(move |result| {
                let _ = tx.send(result);
            }),
        )
        .await?;
        Ok(Delivery(rx))
    }

    /// [`Self::send`] with a callback, called once with the record's result. On `Err` the
    /// record was not queued and the callback is not called.
    pub async fn send_with_callback(
        &self,
        topic: &str,
        partition: Option<i32>,
        record: ProducerRecord,
        callback: Callback,
    ) -> Result<(), ProducerError> {
        let config = &self.shared.config;
        let size = encoded_record_len(&record, 0, 0) + BATCH_HEADER_LEN;
        if size > config.max_request_size {
            return Err(ProducerError::RecordTooLarge {
                bytes: size,
                max: config.max_request_size,
            });
        }
        let count = self.partition_count(topic).await?;
        if let Some(p) = partition {
            if !(0..count).contains(&p) {
                return Err(ProducerError::Metadata {
                    topic: topic.to_owned(),
                    source: Arc::new(ClientError::Kafka {
                        code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                        message: Some(format!("the topic has {count} partitions")),
                        topic: topic.to_owned(),
                        partition: p,
                    }),
                });
            }
        }
        let deadline = crate::rt::time::now() + Duration::from_millis(config.max_block_ms);
        let mut callback = Some(callback);
        loop {
            let progress = self.shared.progress.notified();
            tokio::pin!(progress);
            progress.as_mut().enable();
            {
                let mut state = self.shared.lock();
                if state.closing {
                    return Err(ProducerError::Closed);
                }
                if state.buffer_used == 0 || state.buffer_used + size <= config.buffer_memory {
                    let p = state.choose_partition(topic, partition, &record, count, size);
                    let Some(callback) = callback.take() else {
                        return Err(ProducerError::Closed);
                    };
                    let wake = state.append(
                        (topic.to_owned(), p),
                        &record,
                        callback,
                        crate::rt::time::now(),
                    );
                    drop(state);
                    if wake {
                        self.shared.wake.notify_one();
                    }
                    return Ok(());
                }
            }
            let now = crate::rt::time::now();
            if now >= deadline
                || crate::rt::time::timeout(deadline - now, progress)
                    .await
                    .is_err()
            {
                return Err(ProducerError::BufferExhausted {
                    buffer_memory: config.buffer_memory,
                    max_block_ms: config.max_block_ms,
                });
            }
        }
    }

    /// The partition count of `topic`, from the cache or the cluster.
    async fn partition_count(&self, topic: &str) -> Result<i32, ProducerError> {
        if let Some(&count) = self.shared.lock().partition_counts.get(topic) {
            return Ok(count);
        }
        let metadata_error = |source| ProducerError::Metadata {
            topic: topic.to_owned(),
            source: Arc::new(source),
        };
        let mut client = self.shared.client.lock().await;
        let mut attempts = 0u32;
        let meta = loop {
            attempts += 1;
            let meta = client
                .metadata(&[topic])
                .await
                .map_err(metadata_error)?
                .remove(topic);
            match meta {
                Some(m) if m.error == ErrorCode::NONE && !m.partitions.is_empty() => break m,
                // A topic just auto-created may answer LEADER_NOT_AVAILABLE at first.
                Some(m)
                    if code_is_retriable(m.error)
                        && attempts <= self.shared.config.client.retries_max =>
                {
                    drop(m);
                    crate::rt::time::sleep(Duration::from_millis(
                        self.shared.config.client.retry_backoff_ms,
                    ))
                    .await;
                }
                other => {
                    let code = other.map_or(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, |m| m.error);
                    return Err(metadata_error(ClientError::Kafka {
                        code,
                        message: None,
                        topic: topic.to_owned(),
                        partition: -1,
                    }));
                }
            }
        };
        let count = i32::try_from(meta.partitions.len()).unwrap_or(i32::MAX);
        self.shared
            .lock()
            .partition_counts
            .insert(topic.to_owned(), count);
        Ok(count)
    }

    /// Sends every queued record now (ignoring `linger_ms`) and waits until every record sent
    /// so far (and any sent meanwhile) has its result.
    pub async fn flush(&self) {
        loop {
            let progress = self.shared.progress.notified();
            tokio::pin!(progress);
            progress.as_mut().enable();
            {
                let mut state = self.shared.lock();
                if state.is_idle() {
                    return;
                }
                state.flush_requested = true;
            }
            self.shared.wake.notify_one();
            progress.await;
        }
    }

    /// Flushes, then stops the sender task. Records sent after close fail with
    /// [`ProducerError::Closed`].
    pub async fn close(mut self) {
        self.flush().await;
        self.shared.lock().closing = true;
        self.shared.wake.notify_one();
        if let Some(sender) = self.sender.take() {
            let _ = sender.await;
        }
    }
}

/// A Produce request on its way: the batches it carries.
struct InFlight {
    node: i32,
    version: i16,
    batches: Vec<Sent>,
}

/// The sender task: seals due batches, connects, writes requests, and sleeps until something
/// is due or changes.
async fn run_sender(shared: Arc<Shared>) {
    let mut pipes: BTreeMap<i32, Pipeline> = BTreeMap::new();
    loop {
        let now = crate::rt::time::now();
        let mut completions = Completions::new();
        let (next_due, sendable, stale, broken, reinit, done) = {
            let mut state = shared.lock();
            let next_due = state.seal_due(now, &mut completions);
            let sendable = state.sendable(now);
            let stale: Vec<String> = std::mem::take(&mut state.stale_topics)
                .into_iter()
                .collect();
            let broken = std::mem::take(&mut state.broken_brokers);
            let done = state.closing && state.is_idle();
            (
                next_due,
                sendable,
                stale,
                broken,
                state.reinit_requested,
                done,
            )
        };
        shared.run_completions(completions);
        if done {
            return;
        }
        for node in broken {
            pipes.remove(&node);
        }
        if reinit {
            reinit_identity(&shared).await;
        }
        if !stale.is_empty() {
            let names: Vec<&str> = stale.iter().map(String::as_str).collect();
            // A failure here shows again as a missing leader below.
            let mut client = shared.client.lock().await;
            if client.refresh(&names).await.is_ok() {
                // A topic may have gained partitions (CreatePartitions).
                let counts: Vec<(String, i32)> = names
                    .iter()
                    .filter_map(|name| {
                        let meta = client.cached_topic(name)?;
                        let count = i32::try_from(meta.partitions.len()).ok()?;
                        (count > 0).then(|| ((*name).to_owned(), count))
                    })
                    .collect();
                drop(client);
                let mut state = shared.lock();
                for (name, count) in counts {
                    state.partition_counts.insert(name, count);
                }
            }
        }
        // Leaders of the sendable partitions, grouped by broker.
        let mut by_node: BTreeMap<i32, Vec<Tp>> = BTreeMap::new();
        let mut no_leader: Vec<Tp> = Vec::new();
        let mut addrs: BTreeMap<i32, String> = BTreeMap::new();
        {
            let mut client = shared.client.lock().await;
            for tp in sendable {
                match client.leader(&tp.0, tp.1).await {
                    Ok(node) => {
                        if let Some(addr) = client.brokers().get(&node) {
                            addrs.insert(node, addr.clone());
                            by_node.entry(node).or_default().push(tp);
                        } else {
                            no_leader.push(tp);
                        }
                    }
                    Err(_) => no_leader.push(tp),
                }
            }
        }
        let backoff = Duration::from_millis(shared.config.client.retry_backoff_ms);
        if !no_leader.is_empty() {
            let mut state = shared.lock();
            for tp in no_leader {
                state.stale_topics.insert(tp.0.clone());
                if let Some(queue) = state.partitions.get_mut(&tp) {
                    queue.backoff_until = Some(now + backoff);
                }
            }
        }
        let mut sent_any = false;
        for (node, tps) in by_node {
            sent_any |= send_to_node(&shared, &mut pipes, node, &addrs, &tps, now).await;
        }
        if sent_any {
            // More may be sendable at once (a partition with several ready batches).
            crate::rt::task::yield_now().await;
            continue;
        }
        let notified = shared.wake.notified();
        match next_due {
            Some(at) if at > now => {
                let _ = crate::rt::time::timeout(at - now, notified).await;
            }
            Some(_) => crate::rt::task::yield_now().await,
            None => {
                // Bounded sleep: a backoff that ended without a wake-up is noticed here.
                let _ =
                    crate::rt::time::timeout(backoff.max(Duration::from_millis(1)), notified).await;
            }
        }
    }
}

/// Asks for a new producer id after a sequenced batch failed for good (see the module docs).
/// On failure the request is repeated on the sender's next round.
async fn reinit_identity(shared: &Arc<Shared>) {
    let result = shared
        .client
        .lock()
        .await
        .init_producer_id(None, i32::MAX)
        .await;
    match result {
        Ok(identity) => {
            let mut state = shared.lock();
            state.identity = Some(identity);
            state.identity_generation += 1;
            state.reinit_requested = false;
        }
        Err(err) => {
            tracing::warn!("producer: cannot get a new producer id: {err}");
            crate::rt::time::sleep(Duration::from_millis(shared.config.client.retry_backoff_ms))
                .await;
        }
    }
}

/// Writes as many requests to `node` as its connection and partitions allow. Returns true if
/// anything was written.
async fn send_to_node(
    shared: &Arc<Shared>,
    pipes: &mut BTreeMap<i32, Pipeline>,
    node: i32,
    addrs: &BTreeMap<i32, String>,
    tps: &[Tp],
    now: Instant,
) -> bool {
    let config = &shared.config;
    let max_in_flight = config.max_in_flight_requests_per_connection;
    if pipes.get(&node).is_some_and(Pipeline::is_broken) {
        pipes.remove(&node);
    }
    let pipe = match pipes.entry(node) {
        std::collections::btree_map::Entry::Occupied(entry) => entry.into_mut(),
        std::collections::btree_map::Entry::Vacant(entry) => {
            let Some(addr) = addrs.get(&node) else {
                return false;
            };
            let limits = ConnectionLimits {
                response_bytes_max: config.client.response_bytes_max,
                request_timeout_ms: config.client.request_timeout_ms,
                connect_timeout_ms: config.client.connect_timeout_ms,
            };
            match Pipeline::connect(addr, &config.client.client_id, limits, max_in_flight).await {
                Ok(pipe) => entry.insert(pipe),
                Err(err) => {
                    tracing::debug!("producer: cannot connect to broker {node} at {addr}: {err}");
                    let backoff = Duration::from_millis(config.client.retry_backoff_ms);
                    let mut state = shared.lock();
                    for tp in tps {
                        state.stale_topics.insert(tp.0.clone());
                        if let Some(queue) = state.partitions.get_mut(tp) {
                            queue.backoff_until = Some(now + backoff);
                        }
                    }
                    return false;
                }
            }
        }
    };
    let version = match pipe.version_for(ProduceRequest::API_KEY) {
        Ok(v) => v,
        Err(err) => {
            tracing::warn!("producer: broker {node}: {err}");
            return false;
        }
    };
    let mut sent_any = false;
    while pipe.pending() < max_in_flight && !pipe.is_broken() {
        let batches: Vec<Sent> = {
            let mut state = shared.lock();
            let mut batches = Vec::new();
            let mut bytes = 0usize;
            let sendable: BTreeSet<Tp> = state.sendable(now).into_iter().collect();
            for tp in tps {
                if !sendable.contains(tp) {
                    continue;
                }
                if let Some(batch) = state.take_batch(tp, bytes) {
                    bytes += batch.bytes.as_ref().map_or(0, Bytes::len);
                    batches.push(Sent {
                        tp: tp.clone(),
                        batch,
                    });
                }
            }
            batches
        };
        if batches.is_empty() {
            break;
        }
        sent_any = true;
        let request = produce_request(config, &batches);
        let expect_response = config.acks != 0;
        let flight = InFlight {
            node,
            version,
            batches,
        };
        match pipe
            .send(ProduceRequest::API_KEY, version, &request, expect_response)
            .await
        {
            Ok(Some(reply)) => {
                crate::rt::task::spawn(await_response(shared.clone(), flight, reply));
            }
            Ok(None) => {
                let results = flight
                    .batches
                    .into_iter()
                    .map(|s| (s, Ok((-1, -1))))
                    .collect();
                apply_results(shared, results);
            }
            Err(err) => {
                let results = flight
                    .batches
                    .into_iter()
                    .map(|s| (s, Err(clone_error(&err))))
                    .collect();
                apply_results(shared, results);
                break;
            }
        }
    }
    sent_any
}

fn produce_request(config: &ProducerConfig, batches: &[Sent]) -> ProduceRequest {
    let mut topic_data: Vec<TopicProduceData> = Vec::new();
    for sent in batches {
        let data = PartitionProduceData {
            index: sent.tp.1,
            records: sent.batch.bytes.clone(),
        };
        match topic_data.iter_mut().find(|t| t.name == sent.tp.0) {
            Some(topic) => topic.partition_data.push(data),
            None => topic_data.push(TopicProduceData {
                name: sent.tp.0.clone(),
                partition_data: vec![data],
                ..TopicProduceData::default()
            }),
        }
    }
    ProduceRequest {
        transactional_id: None,
        acks: config.acks,
        timeout_ms: config.ack_timeout_ms,
        topic_data,
    }
}

/// Waits for one request's response and applies it to each of its batches.
async fn await_response(
    shared: Arc<Shared>,
    flight: InFlight,
    reply: oneshot::Receiver<crate::client::pipeline::Reply>,
) {
    let config = &shared.config;
    let wait_ms = config
        .client
        .request_timeout_ms
        .saturating_add(u64::try_from(config.ack_timeout_ms).unwrap_or(0));
    let addr = format!("node {}", flight.node);
    let outcome: Result<ProduceResponse, ClientError> =
        match crate::rt::time::timeout(Duration::from_millis(wait_ms), reply).await {
            Ok(Ok(Ok(body))) => {
                ProduceResponse::decode_exact(body, flight.version).map_err(|source| {
                    ClientError::Decode {
                        addr: addr.clone(),
                        api: "Produce",
                        version: flight.version,
                        source,
                    }
                })
            }
            Ok(Ok(Err(err))) => Err(err),
            // The connection was dropped with the request written: it may have been appended.
            Ok(Err(_)) => Err(ClientError::ConnectionClosed {
                addr: addr.clone(),
                api: "Produce",
            }),
            Err(_) => {
                shared.lock().broken_brokers.insert(flight.node);
                shared.wake.notify_one();
                Err(ClientError::Timeout {
                    addr: addr.clone(),
                    api: "Produce",
                    timeout_ms: wait_ms,
                })
            }
        };
    let results = flight
        .batches
        .into_iter()
        .map(|sent| {
            let result = match &outcome {
                Err(err) => Err(clone_error(err)),
                Ok(response) => {
                    let p = response
                        .responses
                        .iter()
                        .filter(|t| t.name == sent.tp.0)
                        .flat_map(|t| t.partition_responses.iter())
                        .find(|p| p.index == sent.tp.1);
                    match p {
                        None => Err(ClientError::MissingPartition {
                            addr: addr.clone(),
                            api: "Produce",
                            topic: sent.tp.0.clone(),
                            partition: sent.tp.1,
                        }),
                        Some(p) if p.error_code != 0 => Err(ClientError::Kafka {
                            code: ErrorCode(p.error_code),
                            message: p.error_message.clone(),
                            topic: sent.tp.0.clone(),
                            partition: sent.tp.1,
                        }),
                        Some(p) => Ok((p.base_offset.0, p.log_append_time_ms)),
                    }
                }
            };
            (sent, result)
        })
        .collect();
    apply_results(&shared, results);
}

/// One batch's outcome: `(base_offset, log_append_time)` or the error of its attempt.
type BatchOutcome = Result<(i64, i64), ClientError>;

fn apply_results(shared: &Arc<Shared>, results: Vec<(Sent, BatchOutcome)>) {
    let now = crate::rt::time::now();
    let mut completions = Completions::new();
    {
        let mut state = shared.lock();
        for (sent, result) in results {
            state.on_result(sent.tp, sent.batch, result, now, &mut completions);
        }
    }
    shared.wake.notify_one();
    shared.run_completions(completions);
}

// These tests use tokio time and randomness outside a simulated node; the sim build runs
// the simulation instead.
#[cfg(all(test, not(feature = "sim")))]
mod tests {
    use super::*;
    use crate::client::records::ConsumedRecords;
    use crate::protocol::record_batch::{validate, BatchHeader, DECOMPRESSED_BATCH_BYTES_MAX};

    fn record(value: &str, timestamp: i64) -> ProducerRecord {
        ProducerRecord {
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            headers: vec![("h".into(), Some(Bytes::from_static(b"v")))],
            timestamp,
        }
    }

    fn state(batch_size: usize, linger_ms: u64, identity: Option<(i64, i16)>) -> State {
        let config = ProducerConfig {
            batch_size,
            linger_ms,
            enable_idempotence: identity.is_some(),
            ..ProducerConfig::default()
        };
        State::new(Arc::new(config), identity, crate::rt::rand::small_rng())
    }

    fn value(n: usize) -> ProducerRecord {
        ProducerRecord {
            key: None,
            value: Some(Bytes::from(vec![b'x'; n])),
            headers: Vec::new(),
            timestamp: 1_000,
        }
    }

    /// A callback that stores its result in `out`.
    fn recorder(out: &Arc<Mutex<Vec<DeliveryResult>>>) -> Callback {
        let out = out.clone();
        Box::new(move |r| out.lock().unwrap_or_else(PoisonError::into_inner).push(r))
    }

    fn run(completions: Completions) {
        for (callback, result) in completions {
            callback(result);
        }
    }

    fn tp() -> Tp {
        ("t".to_owned(), 0)
    }

    #[test]
    fn client_producer_encoded_record_len_is_what_the_builder_writes() {
        let records = [
            value(0),
            value(100),
            value(300),
            ProducerRecord {
                key: Some(Bytes::from_static(b"key")),
                value: None,
                headers: vec![
                    ("h".into(), Some(Bytes::from_static(b"v"))),
                    ("n".into(), None),
                ],
                timestamp: 1_000_000,
            },
        ];
        let mut builder = BatchBuilder::new(0);
        let mut expected = BATCH_HEADER_LEN;
        for (i, r) in records.iter().enumerate() {
            expected += encoded_record_len(r, r.timestamp - records[0].timestamp, i);
            let headers: Vec<(&str, Option<&[u8]>)> = r
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_deref()))
                .collect();
            builder.push(r.timestamp, r.key.as_deref(), r.value.as_deref(), &headers);
        }
        assert_eq!(builder.build().len(), expected);
    }

    #[test]
    fn client_producer_seals_a_batch_before_it_passes_batch_size() {
        let mut state = state(BATCH_HEADER_LEN + 3 * 110, 1_000, None);
        let out = Arc::new(Mutex::new(Vec::new()));
        let now = crate::rt::time::now();
        // The first record opens a batch: the sender must learn its linger deadline.
        assert!(state.append(tp(), &value(100), recorder(&out), now));
        assert!(!state.append(tp(), &value(100), recorder(&out), now));
        assert!(!state.append(tp(), &value(100), recorder(&out), now));
        let queue = &state.partitions[&tp()];
        assert!(queue.ready.is_empty());
        assert_eq!(queue.open.as_ref().map(Batch::records), Some(3));
        // The fourth does not fit: the full batch is sealed and a new one opened.
        assert!(state.append(tp(), &value(100), recorder(&out), now));
        let queue = &state.partitions[&tp()];
        assert_eq!(queue.ready.len(), 1);
        assert_eq!(queue.ready[0].records(), 3);
        assert_eq!(queue.open.as_ref().map(Batch::records), Some(1));
        assert_eq!(state.outstanding, 4);
        let sizes: usize = queue
            .ready
            .iter()
            .chain(queue.open.iter())
            .map(|b| b.size)
            .sum();
        assert_eq!(state.buffer_used, sizes);
    }

    #[test]
    fn client_producer_seals_after_linger_or_on_flush() {
        let mut state = state(16_384, 50, None);
        let out = Arc::new(Mutex::new(Vec::new()));
        let start = crate::rt::time::now();
        state.append(tp(), &value(10), recorder(&out), start);
        let mut completions = Completions::new();
        let due = state.seal_due(start, &mut completions);
        assert_eq!(due, Some(start + Duration::from_millis(50)));
        assert!(state.sendable(start).is_empty());
        let later = start + Duration::from_millis(50);
        assert_eq!(state.seal_due(later, &mut completions), None);
        assert_eq!(state.sendable(later), vec![tp()]);
        // A flush seals at once, whatever the linger.
        state.append(("u".into(), 1), &value(10), recorder(&out), later);
        state.flush_requested = true;
        state.seal_due(later, &mut completions);
        assert_eq!(state.sendable(later), vec![tp(), ("u".into(), 1)]);
        assert!(completions.is_empty());
    }

    #[test]
    fn client_producer_assigns_consecutive_sequences_and_completes_offsets() {
        let mut state = state(BATCH_HEADER_LEN + 2 * 30, 0, Some((77, 3)));
        let out = Arc::new(Mutex::new(Vec::new()));
        let now = crate::rt::time::now();
        for _ in 0..5 {
            state.append(tp(), &value(20), recorder(&out), now);
        }
        let mut completions = Completions::new();
        state.seal_due(now, &mut completions);
        let mut sent = Vec::new();
        while let Some(batch) = state.take_batch(&tp(), 0) {
            let header = BatchHeader::parse(batch.bytes.as_deref().unwrap_or_default());
            let header = header.map_err(|e| e.to_string());
            let ids = header.map(|h| {
                (
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    h.records_count,
                )
            });
            sent.push(ids);
            state_take_check(&batch);
        }
        assert_eq!(
            sent,
            vec![Ok((77, 3, 0, 2)), Ok((77, 3, 2, 2)), Ok((77, 3, 4, 1))]
        );
        assert_eq!(sequence_after(i32::MAX, 1), 0);
        assert_eq!(sequence_after(i32::MAX - 1, 3), 1);
    }

    fn state_take_check(batch: &Batch) {
        assert!(batch.builder.is_none());
        assert_eq!(batch.attempts, 1);
    }

    #[test]
    fn client_producer_idempotent_retries_keep_sequence_order() {
        let mut state = state(BATCH_HEADER_LEN + 30, 0, Some((5, 0)));
        let out = Arc::new(Mutex::new(Vec::new()));
        let now = crate::rt::time::now();
        for _ in 0..4 {
            state.append(tp(), &value(20), recorder(&out), now);
        }
        let mut completions = Completions::new();
        state.seal_due(now, &mut completions);
        // Three in flight (sequences 0, 1, 2); the fourth waits.
        let b0 = state.take_batch(&tp(), 0);
        let b1 = state.take_batch(&tp(), 0);
        let b2 = state.take_batch(&tp(), 0);
        let (Some(b0), Some(b1), Some(b2)) = (b0, b1, b2) else {
            panic!("three batches were sealed");
        };
        let bytes0 = b0.bytes.clone();
        let not_leader = ClientError::Kafka {
            code: ErrorCode::NOT_LEADER_OR_FOLLOWER,
            message: None,
            topic: "t".into(),
            partition: 0,
        };
        let out_of_order = |_| ClientError::Kafka {
            code: ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
            message: None,
            topic: "t".into(),
            partition: 0,
        };
        state.on_result(tp(), b0, Err(not_leader), now, &mut completions);
        // Nothing more goes out while two are still in flight.
        assert!(state.sendable(now + Duration::from_secs(1)).is_empty());
        state.on_result(tp(), b1, Err(out_of_order(1)), now, &mut completions);
        state.on_result(tp(), b2, Err(out_of_order(2)), now, &mut completions);
        assert!(completions.is_empty(), "nothing failed for good");
        assert!(state.stale_topics.contains("t"));
        // After the backoff the partition resumes with sequence 0, the same bytes as before.
        let later = now + Duration::from_secs(1);
        assert_eq!(state.sendable(later), vec![tp()]);
        let order: Vec<i32> = state.partitions[&tp()]
            .ready
            .iter()
            .map(|b| b.base_sequence)
            .collect();
        assert_eq!(order, vec![0, 1, 2, -1]);
        let again = state.take_batch(&tp(), 0);
        assert_eq!(again.as_ref().and_then(|b| b.bytes.clone()), bytes0);
        assert_eq!(again.as_ref().map(|b| b.attempts), Some(2));
        if let Some(again) = again {
            state.on_result(tp(), again, Ok((40, -1)), later, &mut completions);
        }
        run(completions);
        let results = out.lock().unwrap_or_else(PoisonError::into_inner).clone();
        assert_eq!(results.len(), 1);
        assert!(matches!(
            results[0],
            Ok(RecordMetadata {
                partition: 0,
                offset: 40,
                ..
            })
        ));
    }

    #[test]
    fn client_producer_without_idempotence_reports_unknown_outcomes_and_retries_definite_failures()
    {
        let mut state = state(BATCH_HEADER_LEN + 60, 0, None);
        let out = Arc::new(Mutex::new(Vec::new()));
        let now = crate::rt::time::now();
        for _ in 0..4 {
            state.append(tp(), &value(20), recorder(&out), now);
        }
        let mut completions = Completions::new();
        state.seal_due(now, &mut completions);
        let (Some(b0), Some(b1)) = (state.take_batch(&tp(), 0), state.take_batch(&tp(), 0)) else {
            panic!("two batches were sealed");
        };
        assert_eq!(b0.base_sequence, -1);
        // A timeout: the batch may be in the log, so it is not resent.
        let timeout = ClientError::Timeout {
            addr: "b".into(),
            api: "Produce",
            timeout_ms: 10,
        };
        state.on_result(tp(), b0, Err(timeout), now, &mut completions);
        // NOT_LEADER_OR_FOLLOWER with acks=all may follow an append: unknown as well, while
        // UNKNOWN_TOPIC_OR_PARTITION is refused before any append and is retried.
        let unknown_topic = ClientError::Kafka {
            code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            message: None,
            topic: "t".into(),
            partition: 0,
        };
        state.on_result(tp(), b1, Err(unknown_topic), now, &mut completions);
        assert_eq!(state.partitions[&tp()].ready.len(), 1);
        run(completions);
        let results = out.lock().unwrap_or_else(PoisonError::into_inner).clone();
        assert_eq!(results.len(), 2);
        assert!(results
            .iter()
            .all(|r| r.as_ref().is_err_and(ProducerError::is_unknown_outcome)));
        assert_eq!(state.outstanding, 2);
    }

    #[test]
    fn client_producer_fails_queued_batches_past_the_delivery_timeout() {
        let mut state = state(16_384, 0, None);
        let out = Arc::new(Mutex::new(Vec::new()));
        let now = crate::rt::time::now();
        state.append(tp(), &value(20), recorder(&out), now);
        let mut completions = Completions::new();
        let later = now + Duration::from_millis(ProducerConfig::default().delivery_timeout_ms);
        state.seal_due(later, &mut completions);
        run(completions);
        let results = out.lock().unwrap_or_else(PoisonError::into_inner).clone();
        assert!(matches!(
            results.as_slice(),
            [Err(ProducerError::DeliveryTimeout {
                maybe_written: false,
                ..
            })]
        ));
        assert_eq!((state.buffer_used, state.outstanding), (0, 0));
    }

    #[test]
    fn client_producer_batches_roundtrip_through_the_consumer_path() {
        for codec in [Compression::None, Compression::Gzip, Compression::Zstd] {
            let records = vec![record("a", 5), record("b", 3)];
            let batch = build_batch(&records, codec).unwrap_or_default();
            let header = validate(&batch).map_err(|e| e.to_string());
            assert_eq!(header.map(|h| h.records_count), Ok(2), "{codec}");
            let back: Vec<_> = ConsumedRecords::new("t", 0, batch, 0, DECOMPRESSED_BATCH_BYTES_MAX)
                .filter_map(Result::ok)
                .collect();
            assert_eq!(back.len(), 2);
            assert_eq!(back[1].value.as_deref(), Some(&b"b"[..]));
            assert_eq!(back[1].timestamp, 3);
            assert_eq!(
                back[0].headers,
                vec![("h".to_owned(), Some(Bytes::from_static(b"v")))]
            );
        }
    }

    #[test]
    fn client_producer_refuses_what_the_builder_would_panic_on() {
        let err = build_batch(&[], Compression::None).unwrap_err();
        assert!(err.to_string().contains("at least one record"));
        let far = [record("a", i64::MIN), record("b", i64::MAX)];
        let err = build_batch(&far, Compression::None).unwrap_err();
        assert!(err.to_string().contains("record 1"), "{err}");
        let huge = ProducerRecord {
            value: Some(Bytes::from(vec![0u8; BATCH_BYTES_MAX])),
            ..ProducerRecord::default()
        };
        let err = build_batch(&[huge], Compression::None).unwrap_err();
        assert!(err.to_string().contains("BATCH_BYTES_MAX"), "{err}");
    }
}
