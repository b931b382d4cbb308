//! Produce (key 0): validate each partition's batches, append them in request order, and
//! answer once the flush policy allows (acks 1 and -1; a single node is its whole ISR, so the
//! two wait for the same thing) or not at all (acks 0).
//!
//! [`start`] runs inline on the connection, so appends keep the order of the connection's
//! requests; the wait for durability is deferred, so pipelined requests share one sync.
//! Produce v0-2 never reaches here: Kafka 4 removed them, and the connection closes (the
//! frame parser refuses them), though ApiVersions advertises v0 (design §4).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::broker::handlers::{encode_response, partition_error_code, Reply};
use crate::broker::partition::Partition;
use crate::broker::Broker;
use crate::log::PendingAppend;
use crate::protocol::error::ErrorCode;
use crate::protocol::produce::{
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use crate::protocol::record_batch;
use crate::protocol::wire::Uuid;
use crate::rt::time;

/// The outcome of the inline half for one partition.
enum Started {
    Appended(Arc<Partition>, PendingAppend),
    Failed(ErrorCode, Option<String>),
}

struct TopicStarted {
    name: String,
    topic_id: Uuid,
    partitions: Vec<(i32, Started)>,
}

/// Validates and appends every partition of the request; returns the deferred answer.
pub async fn start(
    broker: &Arc<Broker>,
    correlation_id: i32,
    version: i16,
    request: ProduceRequest,
) -> Reply {
    let acks = request.acks;
    let acks_valid = matches!(acks, -1..=1);
    let mut started = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let resolved = if version >= 13 {
            broker.topics.get_by_id(topic.topic_id).await
        } else {
            broker.topics.get(&topic.name).await
        };
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let outcome = if !acks_valid {
                Started::Failed(
                    ErrorCode::INVALID_REQUIRED_ACKS,
                    Some(format!("acks {acks} is not one of -1, 0, 1")),
                )
            } else if let Some(transactional_id) = &request.transactional_id {
                Started::Failed(
                    ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    Some(format!(
                        "transactions are not supported yet (transactional id '{transactional_id}')"
                    )),
                )
            } else {
                let partition = resolved.as_ref().and_then(|t| {
                    usize::try_from(data.index)
                        .ok()
                        .and_then(|i| t.partitions.get(i).cloned())
                });
                match partition {
                    None => Started::Failed(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, None),
                    Some(partition) => append(broker, partition, data.records).await,
                }
            };
            partitions.push((data.index, outcome));
        }
        started.push(TopicStarted {
            name: topic.name,
            topic_id: topic.topic_id,
            partitions,
        });
    }
    let timeout_ms = u64::try_from(request.timeout_ms).unwrap_or(0);
    let finish = async move {
        let response = finish(started, timeout_ms).await;
        encode_response(correlation_id, ProduceRequest::API_KEY, version, &response)
    };
    if acks == 0 {
        // No answer, but the appends must still complete so the high watermark moves.
        Reply::Silent(Some(Box::pin(finish)))
    } else {
        Reply::Later(Box::pin(finish))
    }
}

async fn append(
    broker: &Arc<Broker>,
    partition: Arc<Partition>,
    records: Option<Bytes>,
) -> Started {
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return Started::Failed(
            ErrorCode::CORRUPT_MESSAGE,
            Some("the partition's record set is empty or null".to_string()),
        );
    };
    let max_message_bytes = partition.config().max_message_bytes;
    for item in record_batch::batches(records.clone()) {
        match item {
            Ok((header, _)) if header.total_len() > max_message_bytes => {
                return Started::Failed(
                    ErrorCode::MESSAGE_TOO_LARGE,
                    Some(format!(
                        "a batch of {} bytes exceeds max.message.bytes {max_message_bytes}",
                        header.total_len()
                    )),
                )
            }
            Ok(_) => {}
            Err(e) => {
                return Started::Failed(ErrorCode::CORRUPT_MESSAGE, Some(e.to_string()));
            }
        }
    }
    let _ = broker;
    match partition.append(records).await {
        Ok(pending) => Started::Appended(partition, pending),
        Err(e) => {
            let code = partition_error_code(&e);
            tracing::debug!(error = %e, %code, "produce refused");
            Started::Failed(code, Some(e.to_string()))
        }
    }
}

async fn finish(started: Vec<TopicStarted>, timeout_ms: u64) -> ProduceResponse {
    let mut responses = Vec::with_capacity(started.len());
    for topic in started {
        let mut partition_responses = Vec::with_capacity(topic.partitions.len());
        for (index, outcome) in topic.partitions {
            let response = match outcome {
                Started::Failed(code, message) => PartitionProduceResponse {
                    index,
                    error_code: code.code(),
                    base_offset: -1,
                    error_message: message,
                    ..Default::default()
                },
                Started::Appended(partition, pending) => {
                    let waited = if timeout_ms == 0 {
                        Ok(partition.acknowledge(pending).await)
                    } else {
                        time::timeout(
                            Duration::from_millis(timeout_ms),
                            partition.acknowledge(pending),
                        )
                        .await
                    };
                    match waited {
                        Ok(Ok(info)) => PartitionProduceResponse {
                            index,
                            error_code: 0,
                            base_offset: info.base_offset,
                            log_append_time_ms: -1,
                            log_start_offset: partition.log_start_offset().await,
                            ..Default::default()
                        },
                        Ok(Err(e)) => PartitionProduceResponse {
                            index,
                            error_code: partition_error_code(&e).code(),
                            base_offset: -1,
                            error_message: Some(e.to_string()),
                            ..Default::default()
                        },
                        Err(_) => PartitionProduceResponse {
                            index,
                            error_code: ErrorCode::REQUEST_TIMED_OUT.code(),
                            base_offset: -1,
                            error_message: Some(format!(
                                "not acknowledged within the request's timeout of {timeout_ms} ms"
                            )),
                            ..Default::default()
                        },
                    }
                }
            };
            partition_responses.push(response);
        }
        responses.push(TopicProduceResponse {
            name: topic.name,
            topic_id: topic.topic_id,
            partition_responses,
        });
    }
    ProduceResponse {
        responses,
        ..Default::default()
    }
}
