//! ListOffsets (key 2): the offset for a time: earliest (-2), latest (-1), the record with
//! the largest timestamp (-3), the earliest local offset (-4, KIP-1005; everything is local
//! here), or the first record whose timestamp is at or after a given time.
//!
//! Answers are bounded by the high watermark, as Kafka's are for consumers: an offset above it
//! could name a record that is later lost.
//!
//! As Kafka's `Partition.fetchOffsetForTimestamp`, only the leader answers (except the
//! debugging replica id -2): NOT_LEADER_OR_FOLLOWER elsewhere, FENCED_LEADER_EPOCH and
//! UNKNOWN_LEADER_EPOCH for a `current_leader_epoch` (v4+) older or newer than this leader's
//! (KIP-320), and OFFSET_NOT_AVAILABLE to a consumer asking for the latest offset or a
//! timestamp while a new leader's high watermark is below the start of its epoch: it may still
//! lag what the previous leader exposed (KIP-207).

use std::ops::ControlFlow;
use std::sync::Arc;

use crate::broker::handlers::partition_error_code;
use crate::broker::partition::{Partition, PartitionError, ReadBound};
use crate::broker::Broker;
use crate::protocol::error::ErrorCode;
use crate::protocol::list_offsets::{
    ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use crate::protocol::record_batch;
use crate::protocol::types::{LeaderEpoch, Offset};

pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const LATEST_TIMESTAMP: i64 = -1;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
/// `replica_id` of a consumer's request.
pub const CONSUMER_REPLICA_ID: i32 = -1;
/// `replica_id` of a debugging tool's request: answered by any replica.
pub const DEBUGGING_REPLICA_ID: i32 = -2;
/// Bytes read per step while scanning for a timestamp.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

pub async fn handle(
    broker: &Arc<Broker>,
    version: i16,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let resolved = broker.topics.get(&topic.name).await;
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for wanted in topic.partitions {
            let partition = resolved
                .as_ref()
                .and_then(|t| t.partition(wanted.partition_index));
            let mut response = ListOffsetsPartitionResponse {
                partition_index: wanted.partition_index,
                ..Default::default()
            };
            match partition {
                None => response.error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
                Some(partition) => {
                    if version >= 4 {
                        response.leader_epoch = LeaderEpoch(partition.leader_epoch());
                    }
                    let current = if version >= 4 {
                        wanted.current_leader_epoch.0
                    } else {
                        -1
                    };
                    if let Some(code) =
                        refusal(&partition, request.replica_id.0, current, wanted.timestamp)
                    {
                        response.error_code = code.code();
                        partitions.push(response);
                        continue;
                    }
                    match lookup(&partition, wanted.timestamp).await {
                        Ok(Some((offset, timestamp))) => {
                            response.offset = Offset(offset);
                            response.timestamp = timestamp;
                        }
                        Ok(None) => {}
                        Err(e) => response.error_code = partition_error_code(&e).code(),
                    }
                }
            }
            partitions.push(response);
        }
        topics.push(ListOffsetsTopicResponse {
            name: topic.name,
            partitions,
        });
    }
    ListOffsetsResponse {
        topics,
        ..Default::default()
    }
}

/// Why this replica does not answer a lookup of `timestamp` for `replica_id`, if it does not
/// (see the module's comment).
pub fn refusal(
    partition: &Partition,
    replica_id: i32,
    current_leader_epoch: i32,
    timestamp: i64,
) -> Option<ErrorCode> {
    if replica_id == DEBUGGING_REPLICA_ID {
        return None;
    }
    if let Err(e) = partition.check_leader_epoch(current_leader_epoch) {
        return Some(partition_error_code(&e));
    }
    let lagging = partition
        .leader_epoch_start_offset()
        .is_some_and(|start| start > partition.high_watermark());
    let asks_latest = timestamp == LATEST_TIMESTAMP || timestamp >= 0;
    (replica_id == CONSUMER_REPLICA_ID && asks_latest && lagging)
        .then_some(ErrorCode::OFFSET_NOT_AVAILABLE)
}

/// The (offset, timestamp) for `timestamp`, or `None` when no record qualifies.
async fn lookup(
    partition: &Partition,
    timestamp: i64,
) -> Result<Option<(i64, i64)>, PartitionError> {
    match timestamp {
        EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => {
            Ok(Some((partition.log_start_offset().await, -1)))
        }
        LATEST_TIMESTAMP => Ok(Some((partition.high_watermark(), -1))),
        MAX_TIMESTAMP => max_timestamp(partition).await,
        t if t >= 0 => match partition.offset_for_timestamp(t).await? {
            None => Ok(None),
            Some(batch_offset) => first_record_at_or_after(partition, batch_offset, t).await,
        },
        // Other negative values are not defined by Kafka; answer "no such offset".
        _ => Ok(None),
    }
}

/// The first record at or after `from` with a timestamp >= `timestamp` (the log found the
/// batch; this finds the record inside it, as Kafka does).
async fn first_record_at_or_after(
    partition: &Partition,
    from: i64,
    timestamp: i64,
) -> Result<Option<(i64, i64)>, PartitionError> {
    let mut found = None;
    scan_records(partition, from, |offset, record_timestamp| {
        if record_timestamp >= timestamp {
            found = Some((offset, record_timestamp));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    })
    .await?;
    Ok(found)
}

/// The record with the largest timestamp (the first of them, if several share it). This
/// scans the partition; Kafka keeps the answer per segment, which the log does not yet.
async fn max_timestamp(partition: &Partition) -> Result<Option<(i64, i64)>, PartitionError> {
    let mut best: Option<(i64, i64)> = None;
    let from = partition.log_start_offset().await;
    scan_records(partition, from, |offset, timestamp| {
        if best.is_none_or(|(_, t)| timestamp > t) {
            best = Some((offset, timestamp));
        }
        ControlFlow::Continue(())
    })
    .await?;
    Ok(best)
}

/// Calls `visit(offset, timestamp)` for each record from `from` up to the high watermark, once
/// each and in offset order, until it breaks. Reads step by [`SCAN_CHUNK_BYTES`]; a read's
/// first batch may start below where it was asked to, and those records are skipped.
async fn scan_records(
    partition: &Partition,
    from: i64,
    mut visit: impl FnMut(i64, i64) -> ControlFlow<()>,
) -> Result<(), PartitionError> {
    let mut offset = from;
    while offset < partition.high_watermark() {
        let read = partition
            .read(offset, SCAN_CHUNK_BYTES, ReadBound::HighWatermark)
            .await?;
        if read.records.is_empty() {
            break;
        }
        for (_, batch) in record_batch::batches(read.records.clone()).flatten() {
            let Ok(records) = record_batch::records(&batch) else {
                continue;
            };
            for record in records.flatten() {
                if record.offset >= offset && visit(record.offset, record.timestamp).is_break() {
                    return Ok(());
                }
            }
        }
        offset = read.next_offset;
    }
    Ok(())
}
