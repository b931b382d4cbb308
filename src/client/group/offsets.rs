//! Committed offsets over a connection to a group's coordinator: OffsetFetch (one group, in
//! the request shape of the negotiated version: a group field before v8, a batch of groups
//! from v8) and OffsetCommit. The group consumer and `samsa groups` use them.

use std::collections::BTreeMap;

use super::super::connection::Connection;
use super::super::error::ClientError;
use crate::protocol::error::ErrorCode;
use crate::protocol::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    OffsetCommitResponse,
};
use crate::protocol::offset_fetch::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
    OffsetFetchResponse,
};
use crate::protocol::types::{LeaderEpoch, Offset};

/// A topic-partition.
pub type TopicPartition = (String, i32);

/// From this version OffsetFetch asks about a batch of groups (KIP-709).
pub const OFFSET_FETCH_BATCH_VERSION_MIN: i16 = 8;

/// `Ok` for error code 0, else the [`ClientError::Group`] of `api` for `group`.
pub(super) fn group_error(group: &str, api: &'static str, code: i16) -> Result<(), ClientError> {
    if code == 0 {
        return Ok(());
    }
    Err(ClientError::Group {
        group: group.to_owned(),
        api,
        code: ErrorCode(code),
    })
}

/// Partitions grouped by topic, in order.
fn by_topic(partitions: &[TopicPartition]) -> BTreeMap<&str, Vec<i32>> {
    let mut out: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        out.entry(topic.as_str()).or_default().push(*partition);
    }
    out
}

/// The committed offsets of `group` for `partitions` (all partitions with an offset, if
/// `None`): `None` for a partition without one. A group-level error is an `Err`; a
/// partition-level one too (the first).
pub async fn offset_fetch(
    conn: &mut Connection,
    group: &str,
    partitions: Option<&[TopicPartition]>,
) -> Result<BTreeMap<TopicPartition, Option<i64>>, ClientError> {
    let version = conn.version_for(OffsetFetchRequest::API_KEY)?;
    let request = if version >= OFFSET_FETCH_BATCH_VERSION_MIN {
        OffsetFetchRequest {
            groups: vec![OffsetFetchRequestGroup {
                group_id: group.to_owned(),
                topics: partitions.map(|list| {
                    by_topic(list)
                        .into_iter()
                        .map(|(name, partition_indexes)| OffsetFetchRequestTopics {
                            name: name.to_owned(),
                            partition_indexes,
                        })
                        .collect()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }
    } else {
        OffsetFetchRequest {
            group_id: group.to_owned(),
            topics: partitions.map(|list| {
                by_topic(list)
                    .into_iter()
                    .map(|(name, partition_indexes)| OffsetFetchRequestTopic {
                        name: name.to_owned(),
                        partition_indexes,
                    })
                    .collect()
            }),
            ..Default::default()
        }
    };
    let response: OffsetFetchResponse = conn
        .send(OffsetFetchRequest::API_KEY, version, &request)
        .await?;
    let offset = |committed: Offset| (committed.0 >= 0).then_some(committed.0);
    let mut out = BTreeMap::new();
    if version >= OFFSET_FETCH_BATCH_VERSION_MIN {
        let Some(answer) = response.groups.iter().find(|g| g.group_id == group) else {
            return Err(ClientError::Group {
                group: group.to_owned(),
                api: "OffsetFetch",
                code: ErrorCode::UNKNOWN_SERVER_ERROR,
            });
        };
        group_error(group, "OffsetFetch", answer.error_code)?;
        for topic in &answer.topics {
            for p in &topic.partitions {
                group_error(group, "OffsetFetch", p.error_code)?;
                out.insert(
                    (topic.name.clone(), p.partition_index),
                    offset(p.committed_offset),
                );
            }
        }
    } else {
        group_error(group, "OffsetFetch", response.error_code)?;
        for topic in &response.topics {
            for p in &topic.partitions {
                group_error(group, "OffsetFetch", p.error_code)?;
                out.insert(
                    (topic.name.clone(), p.partition_index),
                    offset(p.committed_offset),
                );
            }
        }
    }
    Ok(out)
}

/// Who commits: a member's generation and id, or `(-1, "")` for a commit from outside the
/// group (admin tools; refused while the group has members).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committer<'a> {
    pub generation_id: i32,
    pub member_id: &'a str,
    pub group_instance_id: Option<&'a str>,
}

impl Committer<'_> {
    pub const OUTSIDE: Committer<'static> = Committer {
        generation_id: -1,
        member_id: "",
        group_instance_id: None,
    };
}

/// Commits `offsets` for `group`; the error code of each partition's commit (NONE when it
/// took).
pub async fn offset_commit(
    conn: &mut Connection,
    group: &str,
    committer: Committer<'_>,
    offsets: &BTreeMap<TopicPartition, i64>,
) -> Result<BTreeMap<TopicPartition, ErrorCode>, ClientError> {
    let version = conn.version_for(OffsetCommitRequest::API_KEY)?;
    let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for ((topic, partition), &offset) in offsets {
        topics
            .entry(topic.as_str())
            .or_default()
            .push(OffsetCommitRequestPartition {
                partition_index: *partition,
                committed_offset: Offset(offset),
                committed_leader_epoch: LeaderEpoch(-1),
                committed_metadata: Some(String::new()),
            });
    }
    let request = OffsetCommitRequest {
        group_id: group.to_owned(),
        generation_id_or_member_epoch: committer.generation_id,
        member_id: committer.member_id.to_owned(),
        group_instance_id: committer.group_instance_id.map(str::to_owned),
        topics: topics
            .into_iter()
            .map(|(name, partitions)| OffsetCommitRequestTopic {
                name: name.to_owned(),
                partitions,
            })
            .collect(),
        ..Default::default()
    };
    let response: OffsetCommitResponse = conn
        .send(OffsetCommitRequest::API_KEY, version, &request)
        .await?;
    let mut out = BTreeMap::new();
    for topic in &response.topics {
        for p in &topic.partitions {
            out.insert(
                (topic.name.clone(), p.partition_index),
                ErrorCode(p.error_code),
            );
        }
    }
    Ok(out)
}
