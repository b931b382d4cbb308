//! DescribeLogDirs (key 35): the one log directory, with the size in bytes of each asked-for
//! partition's log (all when `topics` is null), offset lag 0 (the single replica is the
//! leader) and no future replicas; v4 adds the file system's total and usable bytes, from
//! `statvfs` through `rt::disk` (fixed figures on a simulated disk). Topics or partitions
//! that do not exist are left out, as Kafka leaves them out.

use std::sync::Arc;

use crate::broker::Broker;
use crate::protocol::describe_log_dirs::{
    DescribeLogDirsPartition, DescribeLogDirsRequest, DescribeLogDirsResponse,
    DescribeLogDirsResult, DescribeLogDirsTopic,
};
use crate::protocol::error::ErrorCode;

pub async fn handle(
    broker: &Arc<Broker>,
    version: i16,
    request: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    let wanted: Option<Vec<(String, Vec<i32>)>> = request.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.topic, t.partitions))
            .collect()
    });
    let mut topics = Vec::new();
    for topic in broker.topics.list().await {
        let indexes: Vec<i32> = match &wanted {
            None => (0..topic.partitions.len() as i32).collect(),
            Some(wanted) => wanted
                .iter()
                .filter(|(name, _)| *name == topic.name)
                .flat_map(|(_, partitions)| partitions.iter().copied())
                .collect(),
        };
        let mut partitions = Vec::new();
        for index in indexes {
            let Some(partition) = topic.partition(index) else {
                continue;
            };
            partitions.push(DescribeLogDirsPartition {
                partition_index: index,
                partition_size: i64::try_from(partition.log().size_bytes().await)
                    .unwrap_or(i64::MAX),
                offset_lag: 0,
                is_future_key: false,
            });
        }
        if !partitions.is_empty() {
            topics.push(DescribeLogDirsTopic {
                name: topic.name.clone(),
                partitions,
            });
        }
    }
    let disk = broker.topics.disk();
    let (total_bytes, usable_bytes) = if version >= 4 {
        match disk.space().await {
            Ok(space) => (
                i64::try_from(space.total_bytes).unwrap_or(i64::MAX),
                i64::try_from(space.usable_bytes).unwrap_or(i64::MAX),
            ),
            Err(e) => {
                tracing::warn!(error = %e, "statvfs of the log directory failed");
                (-1, -1)
            }
        }
    } else {
        (-1, -1)
    };
    let error_code = if broker.health.has_failed() {
        ErrorCode::KAFKA_STORAGE_ERROR.code()
    } else {
        0
    };
    DescribeLogDirsResponse {
        throttle_time_ms: 0,
        error_code: 0,
        results: vec![DescribeLogDirsResult {
            error_code,
            log_dir: disk
                .root_path()
                .unwrap_or_else(|| broker.config.log_dir().to_string()),
            topics,
            total_bytes,
            usable_bytes,
        }],
    }
}
