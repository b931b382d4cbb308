//! Group administration over [`Client`], as Kafka's `Admin` does it: ListGroups on every
//! broker, and DescribeGroups, OffsetFetch, OffsetCommit from outside the group, OffsetDelete
//! and DeleteGroups on the group's coordinator. `samsa groups` is built on these.
//!
//! A coordinator that is loading or moving (COORDINATOR_LOAD_IN_PROGRESS,
//! COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) is looked up again, at most `retries_max`
//! times `retry_backoff_ms` apart.

use std::collections::BTreeMap;
use std::time::Duration;

use super::super::cluster::Client;
use super::super::connection::Connection;
use super::super::error::ClientError;
use super::offsets::{self, group_error, Committer, TopicPartition};
use crate::protocol::delete_groups::{DeleteGroupsRequest, DeleteGroupsResponse};
use crate::protocol::describe_groups::{
    DescribeGroupsRequest, DescribeGroupsResponse, DescribedGroup,
};
use crate::protocol::error::ErrorCode;
use crate::protocol::list_groups::{ListGroupsRequest, ListGroupsResponse, ListedGroup};
use crate::protocol::message::Message;
use crate::protocol::offset_delete::{
    OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    OffsetDeleteResponse,
};

fn is_coordinator_error(e: &ClientError) -> bool {
    matches!(
        e.code(),
        Some(
            ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
                | ErrorCode::COORDINATOR_NOT_AVAILABLE
                | ErrorCode::NOT_COORDINATOR
        )
    )
}

impl Client {
    /// The connection to `group`'s coordinator.
    async fn group_coordinator(&mut self, group: &str) -> Result<&mut Connection, ClientError> {
        let found = self.find_coordinator(group).await?;
        if !self.brokers().contains_key(&found.node_id) {
            self.refresh(&[]).await?;
        }
        self.broker_connection(found.node_id).await
    }

    /// Runs `op` until it succeeds or fails for good: after a coordinator error or a lost
    /// connection the coordinator is looked up again, at most `retries_max` times.
    async fn retrying<T>(
        &mut self,
        mut op: impl AsyncFnMut(&mut Client) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            match op(self).await {
                Err(e)
                    if (is_coordinator_error(&e) || e.is_retriable())
                        && attempts <= self.config().retries_max =>
                {
                    self.reset();
                    let backoff = self.config().retry_backoff_ms;
                    crate::rt::time::sleep(Duration::from_millis(backoff)).await;
                }
                other => return other,
            }
        }
    }

    /// Sends `request` to `group`'s coordinator (see [`Client::retrying`]); `check` turns
    /// an error in the answer into an `Err`.
    async fn on_coordinator<Req: Message, Resp: Message>(
        &mut self,
        group: &str,
        request: &Req,
        check: impl Fn(&Resp) -> Result<(), ClientError>,
    ) -> Result<Resp, ClientError> {
        self.retrying(async |client: &mut Client| {
            let conn = client.group_coordinator(group).await?;
            let version = conn.version_for(Req::API_KEY)?;
            let response: Resp = conn.send(Req::API_KEY, version, request).await?;
            check(&response)?;
            Ok(response)
        })
        .await
    }

    /// Every group of every broker (ListGroups), sorted by id.
    pub async fn list_groups(&mut self) -> Result<Vec<ListedGroup>, ClientError> {
        self.refresh(&[]).await?;
        let nodes: Vec<i32> = self.brokers().keys().copied().collect();
        let mut out = Vec::new();
        for node in nodes {
            let conn = self.broker_connection(node).await?;
            let version = conn.version_for(ListGroupsRequest::API_KEY)?;
            let response: ListGroupsResponse = conn
                .send(
                    ListGroupsRequest::API_KEY,
                    version,
                    &ListGroupsRequest::default(),
                )
                .await?;
            if response.error_code != 0 {
                return Err(ClientError::Kafka {
                    code: ErrorCode(response.error_code),
                    message: Some(format!("ListGroups on broker {node}")),
                    topic: String::new(),
                    partition: -1,
                });
            }
            out.extend(response.groups);
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out.dedup_by(|a, b| a.group_id == b.group_id);
        Ok(out)
    }

    /// DescribeGroups of one group. A group the coordinator does not know is described as
    /// Dead with no members, as Kafka does.
    pub async fn describe_group(&mut self, group: &str) -> Result<DescribedGroup, ClientError> {
        let request = DescribeGroupsRequest {
            groups: vec![group.to_owned()],
            ..Default::default()
        };
        let response: DescribeGroupsResponse = self
            .on_coordinator(group, &request, |r: &DescribeGroupsResponse| {
                let code = r.groups.first().map_or(0, |g| g.error_code);
                group_error(group, "DescribeGroups", code)
            })
            .await?;
        response
            .groups
            .into_iter()
            .find(|g| g.group_id == group)
            .ok_or_else(|| ClientError::Group {
                group: group.to_owned(),
                api: "DescribeGroups",
                code: ErrorCode::UNKNOWN_SERVER_ERROR,
            })
    }

    /// Every committed offset of `group`.
    pub async fn group_offsets(
        &mut self,
        group: &str,
    ) -> Result<BTreeMap<TopicPartition, Option<i64>>, ClientError> {
        self.retrying(async |client: &mut Client| {
            let conn = client.group_coordinator(group).await?;
            offsets::offset_fetch(conn, group, None).await
        })
        .await
    }

    /// Commits `offsets` for `group` from outside it (generation -1: the coordinator refuses
    /// it while the group has members); the error code per partition.
    pub async fn alter_group_offsets(
        &mut self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<BTreeMap<TopicPartition, ErrorCode>, ClientError> {
        let conn = self.group_coordinator(group).await?;
        offsets::offset_commit(conn, group, Committer::OUTSIDE, offsets).await
    }

    /// OffsetDelete of `partitions`: the error code per partition (GROUP_SUBSCRIBED_TO_TOPIC
    /// for a topic the group still consumes).
    pub async fn delete_group_offsets(
        &mut self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, ErrorCode>, ClientError> {
        let mut topics: BTreeMap<&str, Vec<OffsetDeleteRequestPartition>> = BTreeMap::new();
        for (topic, partition) in partitions {
            topics
                .entry(topic.as_str())
                .or_default()
                .push(OffsetDeleteRequestPartition {
                    partition_index: *partition,
                });
        }
        let request = OffsetDeleteRequest {
            group_id: group.to_owned(),
            topics: topics
                .into_iter()
                .map(|(name, partitions)| OffsetDeleteRequestTopic {
                    name: name.to_owned(),
                    partitions,
                })
                .collect(),
        };
        let response: OffsetDeleteResponse = self
            .on_coordinator(group, &request, |r: &OffsetDeleteResponse| {
                group_error(group, "OffsetDelete", r.error_code)
            })
            .await?;
        let mut out = BTreeMap::new();
        for topic in response.topics {
            for p in topic.partitions {
                out.insert(
                    (topic.name.clone(), p.partition_index),
                    ErrorCode(p.error_code),
                );
            }
        }
        Ok(out)
    }

    /// DeleteGroups of one group (NON_EMPTY_GROUP while it has members,
    /// GROUP_ID_NOT_FOUND for a group that does not exist).
    pub async fn delete_group(&mut self, group: &str) -> Result<(), ClientError> {
        let request = DeleteGroupsRequest {
            groups_names: vec![group.to_owned()],
        };
        self.on_coordinator(group, &request, |r: &DeleteGroupsResponse| {
            let code = r
                .results
                .iter()
                .find(|g| g.group_id == group)
                .map_or(ErrorCode::UNKNOWN_SERVER_ERROR.code(), |g| g.error_code);
            group_error(group, "DeleteGroups", code)
        })
        .await
        .map(|_| ())
    }
}
