//! DeleteRecords (key 21, KIP-107): moves partitions' log start offsets forward. Offset -1
//! means the high watermark; an offset above the high watermark gets OFFSET_OUT_OF_RANGE; one
//! below the current start changes nothing. Each partition answers with its new low watermark
//! (log start offset) once the log start checkpoint is durable, so the answer is final before
//! the response is sent (`timeout_ms` is never reached on a single node).

use std::sync::Arc;

use crate::broker::handlers::partition_error_code;
use crate::broker::Broker;
use crate::protocol::delete_records::{
    DeleteRecordsPartitionResult, DeleteRecordsRequest, DeleteRecordsResponse,
    DeleteRecordsTopicResult,
};
use crate::protocol::error::ErrorCode;
use crate::protocol::types::Offset;

/// Kafka's `DeleteRecordsRequest.HIGH_WATERMARK`: delete everything below the high watermark.
pub const HIGH_WATERMARK: i64 = -1;

pub async fn handle(
    broker: &Arc<Broker>,
    _version: i16,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let resolved = broker.topics.get(&topic.name).await;
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for wanted in topic.partitions {
            let mut result = DeleteRecordsPartitionResult {
                partition_index: wanted.partition_index,
                low_watermark: Offset::NONE,
                error_code: 0,
            };
            let partition = resolved
                .as_ref()
                .and_then(|t| t.partition(wanted.partition_index));
            match partition {
                None => result.error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
                Some(partition) => {
                    let offset = match wanted.offset.0 {
                        HIGH_WATERMARK => partition.high_watermark(),
                        offset => offset,
                    };
                    match partition.delete_records(offset).await {
                        Ok(low_watermark) => result.low_watermark = Offset(low_watermark),
                        Err(e) => {
                            tracing::debug!(error = %e, offset, "delete records refused");
                            result.error_code = partition_error_code(&e).code();
                        }
                    }
                }
            }
            partitions.push(result);
        }
        topics.push(DeleteRecordsTopicResult {
            name: topic.name,
            partitions,
        });
    }
    DeleteRecordsResponse {
        topics,
        ..Default::default()
    }
}
