//! Fetch (key 1): whole record batches from each requested partition, bounded by the high
//! watermark, per-partition and total byte limits (at least one batch, KIP-74), waiting up to
//! `max_wait_ms` until `min_bytes` are available (Kafka's fetch purgatory).
//!
//! Waiting fetches sleep on the broker's `data_arrived` notification, which every high
//! watermark advance fires; each wake-up re-reads the partitions. Fetch sessions (KIP-227)
//! are not kept yet: every answer has session id 0, which tells a client the broker made no
//! session, so it keeps sending full fetches (a valid Kafka answer when the cache is full).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::broker::handlers::partition_error_code;
use crate::broker::partition::{PartitionError, ReadBound};
use crate::broker::Broker;
use crate::log::LogError;
use crate::protocol::error::ErrorCode;
use crate::protocol::fetch::{FetchRequest, FetchResponse, FetchableTopicResponse, PartitionData};
use crate::protocol::types::Offset;
use crate::rt::time;

/// The longest a fetch waits for data, whatever the client asks: a bound on how long a
/// connection's later responses can queue behind a fetch.
pub const FETCH_WAIT_MS_MAX: u64 = 60_000;

pub async fn handle(broker: &Arc<Broker>, version: i16, request: FetchRequest) -> FetchResponse {
    if request.session_id != 0 {
        return FetchResponse {
            error_code: ErrorCode::FETCH_SESSION_ID_NOT_FOUND.code(),
            ..Default::default()
        };
    }
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let max_wait = Duration::from_millis(
        u64::try_from(request.max_wait_ms)
            .unwrap_or(0)
            .min(FETCH_WAIT_MS_MAX),
    );
    let deadline = time::now() + max_wait;
    loop {
        // Register for the wake-up before reading, so an append between the read and the
        // wait is not missed.
        let notified = broker.data_arrived.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (response, bytes, errors) = read_all(broker, version, &request).await;
        let now = time::now();
        if bytes >= min_bytes || errors || now >= deadline {
            return response;
        }
        let _ = time::timeout(deadline - now, notified).await;
    }
}

/// One pass over the requested partitions: the response, the record bytes in it and whether
/// any partition had an error (which answers the fetch at once, as Kafka does).
async fn read_all(
    broker: &Arc<Broker>,
    version: i16,
    request: &FetchRequest,
) -> (FetchResponse, usize, bool) {
    let mut budget = usize::try_from(request.max_bytes).unwrap_or(0);
    let mut total = 0usize;
    let mut errors = false;
    let mut responses = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let resolved = if version >= 13 {
            broker.topics.get_by_id(topic.topic_id).await
        } else {
            broker.topics.get(&topic.topic).await
        };
        let unknown = if version >= 13 {
            ErrorCode::UNKNOWN_TOPIC_ID
        } else {
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        };
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for wanted in &topic.partitions {
            let partition = resolved.as_ref().and_then(|t| {
                usize::try_from(wanted.partition)
                    .ok()
                    .and_then(|i| t.partitions.get(i).cloned())
            });
            let Some(partition) = partition else {
                errors = true;
                partitions.push(PartitionData {
                    partition_index: wanted.partition,
                    error_code: unknown.code(),
                    high_watermark: Offset::NONE,
                    records: Some(Bytes::new()),
                    ..Default::default()
                });
                continue;
            };
            let high_watermark = partition.high_watermark();
            let limit = usize::try_from(wanted.partition_max_bytes)
                .unwrap_or(0)
                .min(budget);
            // KIP-74: the first partition with data returns at least one batch even over
            // the limits; after that, an exhausted budget returns nothing.
            let result = if limit == 0 && total > 0 {
                Ok(None)
            } else {
                partition
                    .read(wanted.fetch_offset.0, limit, ReadBound::HighWatermark)
                    .await
                    .map(Some)
            };
            let data = match result {
                Ok(read) => {
                    let records = read.map(|r| r.records).unwrap_or_default();
                    total += records.len();
                    budget = budget.saturating_sub(records.len());
                    PartitionData {
                        partition_index: wanted.partition,
                        error_code: 0,
                        high_watermark: Offset(high_watermark),
                        last_stable_offset: Offset(high_watermark),
                        log_start_offset: Offset(partition.log_start_offset().await),
                        records: Some(records),
                        ..Default::default()
                    }
                }
                Err(e) => {
                    errors = true;
                    if !matches!(
                        e,
                        PartitionError::Log {
                            source: LogError::OffsetOutOfRange { .. },
                            ..
                        }
                    ) {
                        tracing::warn!(error = %e, "fetch failed");
                    }
                    PartitionData {
                        partition_index: wanted.partition,
                        error_code: partition_error_code(&e).code(),
                        high_watermark: Offset(high_watermark),
                        last_stable_offset: Offset(high_watermark),
                        log_start_offset: Offset(partition.log_start_offset().await),
                        records: Some(Bytes::new()),
                        ..Default::default()
                    }
                }
            };
            partitions.push(data);
        }
        responses.push(FetchableTopicResponse {
            topic: topic.topic.clone(),
            topic_id: topic.topic_id,
            partitions,
        });
    }
    let response = FetchResponse {
        error_code: 0,
        session_id: 0,
        responses,
        ..Default::default()
    };
    (response, total, errors)
}
