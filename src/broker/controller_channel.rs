//! How the broker reaches the controller (Kafka's `NodeToControllerChannelManager`): the
//! admin changes a client asks of any broker (CreateTopics, DeleteTopics, CreatePartitions,
//! the config APIs, and the broker's own auto-creations) and the producer-id blocks of
//! InitProducerId become the controller's requests; an answer is returned only once this
//! broker's metadata publisher has applied the image the controller had committed when it
//! answered, so that a client which creates a topic and then produces to it finds it here.
//!
//! On a combined node (`process.roles=broker,controller`, the default and, until step 10,
//! the only one) the channel hands requests to the node's own controller, in process; this is
//! the "controller APIs directly" forwarding documented in `controller::handlers` without the
//! network hop.
//!
//! Invariants: every wait is bounded (`ACTIVE_WAIT_MS_MAX`, `APPLIED_WAIT_MS_MAX`); a
//! refusal keeps the controller's typed error, which becomes a Kafka error code only at the
//! wire (`broker::handlers::topic_error_code`).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::broker::lifecycle_driver::LifecycleHandle;
use crate::broker::topics::NewTopic;
use crate::controller::core::{ConfigOp, ControllerError, NewPartitions, Reply, Request, TopicRef};
use crate::controller::driver::ControllerHandle;
use crate::controller::image::ConfigResource;
use crate::protocol::allocate_producer_ids::AllocateProducerIdsRequest;
use crate::protocol::error::ErrorCode;
use crate::protocol::types::NodeId;
use crate::protocol::wire::Uuid;
use crate::rt::time::Duration;
use crate::rt::watch::Watched;

/// The longest a request waits for the node's controller to become active (a quorum of one
/// elects itself at once; this covers a start with a slow disk).
pub const ACTIVE_WAIT_MS_MAX: u64 = 10_000;
/// The longest an answered request waits for this broker to apply what was committed.
pub const APPLIED_WAIT_MS_MAX: u64 = 10_000;

/// Why a change did not happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelError {
    /// The controller refused it.
    Refused(ControllerError),
    /// The controller stopped.
    Stopped,
    /// Committed, but this broker had not applied it after `waited_ms`.
    NotApplied { offset: i64, waited_ms: u64 },
    /// The broker is not registered yet (no broker epoch to present).
    NotRegistered,
}

impl std::fmt::Display for ChannelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChannelError::Refused(e) => write!(f, "{e}"),
            ChannelError::Stopped => write!(f, "the controller stopped"),
            ChannelError::NotApplied { offset, waited_ms } => write!(
                f,
                "committed at metadata offset {offset}, not yet applied by this broker after {waited_ms} ms"
            ),
            ChannelError::NotRegistered => {
                write!(f, "this broker is not registered with the controller yet")
            }
        }
    }
}

impl std::error::Error for ChannelError {}

impl ChannelError {
    /// Kafka's error code for it.
    pub fn code(&self) -> ErrorCode {
        match self {
            ChannelError::Refused(e) => crate::controller::handlers::error_code(e),
            ChannelError::Stopped => ErrorCode::NOT_CONTROLLER,
            ChannelError::NotApplied { .. } => ErrorCode::REQUEST_TIMED_OUT,
            ChannelError::NotRegistered => ErrorCode::COORDINATOR_NOT_AVAILABLE,
        }
    }
}

/// The way to the controller; cheap to clone.
#[derive(Clone)]
pub struct ControllerChannel {
    controller: ControllerHandle,
    /// The metadata offset this broker's publisher has applied.
    applied: Arc<Watched<i64>>,
    lifecycle: LifecycleHandle,
    node_id: i32,
}

impl std::fmt::Debug for ControllerChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerChannel")
            .field("node_id", &self.node_id)
            .field("applied", &self.applied.get())
            .finish()
    }
}

impl ControllerChannel {
    pub fn new(
        controller: ControllerHandle,
        applied: Arc<Watched<i64>>,
        lifecycle: LifecycleHandle,
        node_id: i32,
    ) -> ControllerChannel {
        ControllerChannel {
            controller,
            applied,
            lifecycle,
            node_id,
        }
    }

    /// Sends `request`, then waits until this broker applied what the controller had
    /// committed when it answered (the controller publishes before it answers).
    async fn call(&self, request: Request) -> Result<Reply, ChannelError> {
        // A controller that is not active answers NOT_CONTROLLER at once; give a starting
        // quorum of one the moment it needs to elect itself.
        let _ = self
            .controller
            .wait_for(Duration::from_millis(ACTIVE_WAIT_MS_MAX), |p| {
                p.active_epoch.is_some()
            })
            .await;
        let reply = self
            .controller
            .submit(request)
            .await
            .map_err(|_| ChannelError::Stopped)?;
        let committed = self.controller.published().applied_offset;
        self.applied
            .wait_for(Duration::from_millis(APPLIED_WAIT_MS_MAX), |applied| {
                *applied >= committed
            })
            .await
            .map_err(|_| ChannelError::NotApplied {
                offset: committed,
                waited_ms: APPLIED_WAIT_MS_MAX,
            })?;
        Ok(reply)
    }

    /// Creates a topic; its id.
    pub async fn create_topic(&self, new: &NewTopic) -> Result<Uuid, ChannelError> {
        let request = Request::CreateTopics {
            topics: vec![crate::controller::core::NewTopic {
                name: new.name.clone(),
                num_partitions: new.partitions.unwrap_or(-1),
                replication_factor: new.replication_factor.unwrap_or(-1),
                assignments: Vec::new(),
                configs: new
                    .overrides
                    .iter()
                    .map(|(k, v)| (k.clone(), Some(v.clone())))
                    .collect(),
            }],
            validate_only: false,
        };
        match self.call(request).await? {
            Reply::CreateTopics(mut results) if results.len() == 1 => {
                let (_, result) = results.remove(0);
                result
                    .map(|created| created.id)
                    .map_err(ChannelError::Refused)
            }
            other => panic!("a CreateTopics answered with {other:?}"),
        }
    }

    /// Deletes a topic by name.
    pub async fn delete_topic(&self, name: &str) -> Result<(), ChannelError> {
        let request = Request::DeleteTopics(vec![TopicRef::Name(name.to_string())]);
        match self.call(request).await? {
            Reply::DeleteTopics(mut results) if results.len() == 1 => {
                let (_, result) = results.remove(0);
                result.map(|_| ()).map_err(ChannelError::Refused)
            }
            other => panic!("a DeleteTopics answered with {other:?}"),
        }
    }

    /// Grows a topic to `count` partitions.
    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), ChannelError> {
        let request = Request::CreatePartitions {
            topics: vec![NewPartitions {
                name: name.to_string(),
                count,
                assignments: None,
            }],
            validate_only,
        };
        match self.call(request).await? {
            Reply::CreatePartitions(mut results) if results.len() == 1 => {
                let (_, result) = results.remove(0);
                result.map_err(ChannelError::Refused)
            }
            other => panic!("a CreatePartitions answered with {other:?}"),
        }
    }

    /// Replaces a topic's overrides `old` with `new`.
    pub async fn replace_topic_configs(
        &self,
        name: &str,
        old: &BTreeMap<String, String>,
        new: &BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), ChannelError> {
        self.replace_configs(ConfigResource::topic(name), old, new, validate_only)
            .await
    }

    /// Replaces a broker resource's dynamic configs (`node`: this broker's own; else the
    /// cluster-wide default).
    pub async fn replace_broker_configs(
        &self,
        node: bool,
        old: &BTreeMap<String, String>,
        new: &BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), ChannelError> {
        let resource = ConfigResource::broker(node.then_some(self.node_id));
        self.replace_configs(resource, old, new, validate_only)
            .await
    }

    async fn replace_configs(
        &self,
        resource: ConfigResource,
        old: &BTreeMap<String, String>,
        new: &BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), ChannelError> {
        let mut ops: Vec<ConfigOp> = old
            .keys()
            .filter(|k| !new.contains_key(*k))
            .map(|k| ConfigOp::Delete(k.clone()))
            .collect();
        ops.extend(
            new.iter()
                .filter(|(k, v)| old.get(*k) != Some(*v))
                .map(|(k, v)| ConfigOp::Set(k.clone(), v.clone())),
        );
        if ops.is_empty() && !validate_only {
            return Ok(());
        }
        let request = Request::AlterConfigs {
            changes: vec![(resource, ops)],
            validate_only,
        };
        match self.call(request).await? {
            Reply::AlterConfigs(mut results) if results.len() == 1 => {
                let (_, result) = results.remove(0);
                result.map_err(ChannelError::Refused)
            }
            other => panic!("an AlterConfigs answered with {other:?}"),
        }
    }

    /// A block of producer ids for this broker: (first id, length).
    pub async fn allocate_producer_ids(&self) -> Result<(i64, i32), ChannelError> {
        let Some(broker_epoch) = self.lifecycle.status().epoch else {
            return Err(ChannelError::NotRegistered);
        };
        let request = Request::AllocateProducerIds(AllocateProducerIdsRequest {
            broker_id: NodeId(self.node_id),
            broker_epoch,
        });
        match self.call(request).await? {
            Reply::AllocateProducerIds(result) => result.map_err(ChannelError::Refused),
            other => panic!("an AllocateProducerIds answered with {other:?}"),
        }
    }
}
