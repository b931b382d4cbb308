//! How the broker reaches the controller (Kafka's `NodeToControllerChannelManager`): the
//! admin changes a client asks of any broker (CreateTopics, DeleteTopics, CreatePartitions,
//! the config APIs, and the broker's own auto-creations) and the producer-id blocks of
//! InitProducerId become the controller's requests; an answer is returned only once this
//! broker's metadata publisher has applied the image the controller had committed when it
//! answered, so that a client which creates a topic and then produces to it finds it here.
//!
//! On a combined node (`process.roles=broker,controller`) whose controller is the active one
//! (always, in a quorum of one) the channel hands requests to it in process; otherwise it
//! sends the controller's APIs directly to the quorum's leader over its controller listener
//! ([`super::forwarding`]), then waits until this broker applied the metadata log up to the
//! leader's high watermark after the answer.
//!
//! Invariants: every wait is bounded (`ACTIVE_WAIT_MS_MAX`, `APPLIED_WAIT_MS_MAX`); a
//! refusal keeps the controller's typed error, which becomes a Kafka error code only at the
//! wire (`broker::handlers::topic_error_code`).
//!
//! A partition leader's ISR changes (AlterPartition) take the same way to the active
//! controller, without the wait for this broker's image: the leader takes the new state from
//! the answer itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::broker::forwarding::{answer, Answer, Forwarder};
use crate::broker::lifecycle_driver::LifecycleHandle;
use crate::broker::topics::NewTopic;
use crate::controller::core::{
    ConfigOp, ControllerError, ElectionType, NewPartitions, Reply, Request, TopicRef,
};
use crate::controller::driver::ControllerHandle;
use crate::controller::handlers::elect_leaders::{
    response as elect_leaders_response, wire_election_type,
};
use crate::controller::image::ConfigResource;
use crate::protocol::allocate_producer_ids::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse,
};
use crate::protocol::alter_partition::{
    AlterPartitionBrokerState, AlterPartitionRequest, AlterPartitionResponse,
};
use crate::protocol::create_partitions::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopic,
};
use crate::protocol::create_topics::{
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest, CreateTopicsResponse,
};
use crate::protocol::delete_topics::{DeleteTopicState, DeleteTopicsRequest, DeleteTopicsResponse};
use crate::protocol::describe_quorum::{DescribeQuorumRequest, DescribeQuorumResponse};
use crate::protocol::elect_leaders::{
    ElectLeadersRequest, ElectLeadersResponse, ElectLeadersTopicPartitions,
};
use crate::protocol::error::ErrorCode;
use crate::protocol::incremental_alter_configs::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use crate::protocol::types::NodeId;
use crate::protocol::wire::Uuid;
use crate::rt::time::Duration;
use crate::rt::watch::Watched;

/// The longest a request waits for the node's controller to become active (a quorum of one
/// elects itself at once; this covers a start with a slow disk).
pub const ACTIVE_WAIT_MS_MAX: u64 = 10_000;
/// The longest an answered request waits for this broker to apply what was committed.
pub const APPLIED_WAIT_MS_MAX: u64 = 10_000;

/// The timeout a forwarded admin request carries (Kafka's CreateTopics default).
const FORWARDED_TIMEOUT_MS: i32 = 30_000;
const CREATE_TOPICS: i16 = 19;
const DELETE_TOPICS: i16 = 20;
const CREATE_PARTITIONS: i16 = 37;
const ELECT_LEADERS: i16 = 43;
const INCREMENTAL_ALTER_CONFIGS: i16 = 44;
const DESCRIBE_QUORUM: i16 = 55;
const ALTER_PARTITION: i16 = 56;
const ALLOCATE_PRODUCER_IDS: i16 = 67;
/// IncrementalAlterConfigs' operations.
const CONFIG_OP_SET: i8 = 0;
const CONFIG_OP_DELETE: i8 = 1;

/// An answer without the one result asked for.
fn empty_answer<T>(api: &str) -> Answer<T> {
    Answer::Failed(ChannelError::Remote {
        code: ErrorCode::UNKNOWN_SERVER_ERROR,
        message: Some(format!("the controller's {api} answer holds no result")),
    })
}

/// A remote TOPIC_ALREADY_EXISTS as the controller's own refusal (callers tell a topic
/// created concurrently apart).
fn already_exists(e: ChannelError, name: &str) -> ChannelError {
    match e {
        ChannelError::Remote { code, .. } if code == ErrorCode::TOPIC_ALREADY_EXISTS => {
            ChannelError::Refused(ControllerError::TopicAlreadyExists {
                name: name.to_string(),
            })
        }
        e => e,
    }
}

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
    /// The active controller (another node's) refused it with `code`.
    Remote {
        code: ErrorCode,
        message: Option<String>,
    },
    /// No active controller answered within the forwarder's tries.
    Unreachable { attempts: u32, last: String },
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
            ChannelError::Remote { code, message } => match message {
                Some(message) => write!(f, "the active controller answered {code}: {message}"),
                None => write!(f, "the active controller answered {code}"),
            },
            ChannelError::Unreachable { attempts, last } => write!(
                f,
                "no active controller answered in {attempts} tries (last: {last})"
            ),
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
            ChannelError::Remote { code, .. } => *code,
            ChannelError::Unreachable { .. } => ErrorCode::NOT_CONTROLLER,
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
    /// The way to the quorum leader's controller listener: for the controller APIs when
    /// `forwards` (several voters), and for DescribeQuorum always.
    forwarder: Arc<Forwarder>,
    /// Whether requests go to another node's controller when this one is not active
    /// (false in a quorum of one: its controller becomes active at once).
    forwards: bool,
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
        forwarder: Forwarder,
        forwards: bool,
    ) -> ControllerChannel {
        ControllerChannel {
            controller,
            applied,
            lifecycle,
            node_id,
            forwarder: Arc::new(forwarder),
            forwards,
        }
    }

    /// DescribeQuorum for a client of this broker (`samsa metadata-quorum
    /// --bootstrap-server`): Kafka's brokers forward it to the active controller, and so
    /// does this one, to the quorum leader's controller listener; the answer is the
    /// leader's. A controller that no longer leads (NOT_LEADER_OR_FOLLOWER) is passed over
    /// for the new leader, within the forwarder's tries.
    pub async fn describe_quorum(
        &self,
        request: &DescribeQuorumRequest,
    ) -> Result<DescribeQuorumResponse, ChannelError> {
        self.forwarder
            .forward_only(DESCRIBE_QUORUM, request, |r: DescribeQuorumResponse| {
                let moved = r
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .any(|p| p.error_code == ErrorCode::NOT_LEADER_OR_FOLLOWER.0);
                if moved {
                    Answer::NotController
                } else {
                    Answer::Done(r)
                }
            })
            .await
    }

    /// The forwarder, when this node's controller is not the active one (a quorum of one
    /// has none: its controller becomes active at once).
    async fn remote(&self) -> Option<&Forwarder> {
        if !self.forwards {
            return None;
        }
        let forwarder = self.forwarder.as_ref();
        // Active here: in process. Another node leads the quorum: forward at once. This node
        // just won an election: wait for its controller to catch up and become active.
        let mut waited_ms = 0;
        loop {
            if self.controller.published().active_epoch.is_some() {
                return None;
            }
            if forwarder.leader_elsewhere() || waited_ms >= ACTIVE_WAIT_MS_MAX {
                return Some(forwarder);
            }
            crate::rt::time::sleep(Duration::from_millis(
                super::forwarding::FORWARD_RETRY_BACKOFF_MS,
            ))
            .await;
            waited_ms += super::forwarding::FORWARD_RETRY_BACKOFF_MS;
        }
    }

    /// After a forwarded request: waits until this broker applied everything below the
    /// active controller's high watermark (`None`: it did not say; nothing to wait for).
    async fn applied_through(&self, high_watermark: Option<i64>) -> Result<(), ChannelError> {
        let Some(high_watermark) = high_watermark else {
            return Ok(());
        };
        let last = high_watermark - 1;
        self.applied
            .wait_for(Duration::from_millis(APPLIED_WAIT_MS_MAX), |applied| {
                *applied >= last
            })
            .await
            .map(|_| ())
            .map_err(|_| ChannelError::NotApplied {
                offset: last,
                waited_ms: APPLIED_WAIT_MS_MAX,
            })
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
        if let Some(forwarder) = self.remote().await {
            let request = CreateTopicsRequest {
                topics: vec![CreatableTopic {
                    name: new.name.clone(),
                    num_partitions: new.partitions.unwrap_or(-1),
                    replication_factor: new.replication_factor.unwrap_or(-1),
                    assignments: Vec::new(),
                    configs: new
                        .overrides
                        .iter()
                        .map(|(k, v)| CreatableTopicConfig {
                            name: k.clone(),
                            value: Some(v.clone()),
                        })
                        .collect(),
                }],
                timeout_ms: FORWARDED_TIMEOUT_MS,
                validate_only: false,
            };
            let (id, hw) = forwarder
                .forward(CREATE_TOPICS, &request, |r: CreateTopicsResponse| {
                    match r.topics.into_iter().next() {
                        Some(t) => answer(t.error_code, t.error_message, || t.topic_id),
                        None => empty_answer("CreateTopics"),
                    }
                })
                .await
                .map_err(|e| already_exists(e, &new.name))?;
            self.applied_through(hw).await?;
            return Ok(id);
        }
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
        if let Some(forwarder) = self.remote().await {
            let request = DeleteTopicsRequest {
                topics: vec![DeleteTopicState {
                    name: Some(name.to_string()),
                    topic_id: Uuid::ZERO,
                }],
                topic_names: vec![name.to_string()],
                timeout_ms: FORWARDED_TIMEOUT_MS,
            };
            let ((), hw) = forwarder
                .forward(DELETE_TOPICS, &request, |r: DeleteTopicsResponse| {
                    match r.responses.into_iter().next() {
                        Some(t) => answer(t.error_code, t.error_message, || ()),
                        None => empty_answer("DeleteTopics"),
                    }
                })
                .await?;
            return self.applied_through(hw).await;
        }
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
        if let Some(forwarder) = self.remote().await {
            let request = CreatePartitionsRequest {
                topics: vec![CreatePartitionsTopic {
                    name: name.to_string(),
                    count,
                    assignments: None,
                }],
                timeout_ms: FORWARDED_TIMEOUT_MS,
                validate_only,
            };
            let ((), hw) = forwarder
                .forward(
                    CREATE_PARTITIONS,
                    &request,
                    |r: CreatePartitionsResponse| match r.results.into_iter().next() {
                        Some(t) => answer(t.error_code, t.error_message, || ()),
                        None => empty_answer("CreatePartitions"),
                    },
                )
                .await?;
            return self.applied_through(hw).await;
        }
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
        if let Some(forwarder) = self.remote().await {
            let request = IncrementalAlterConfigsRequest {
                resources: vec![AlterConfigsResource {
                    resource_type: resource.resource_type,
                    resource_name: resource.name.clone(),
                    configs: ops
                        .iter()
                        .map(|op| match op {
                            ConfigOp::Set(k, v) => AlterableConfig {
                                name: k.clone(),
                                config_operation: CONFIG_OP_SET,
                                value: Some(v.clone()),
                            },
                            ConfigOp::Delete(k) => AlterableConfig {
                                name: k.clone(),
                                config_operation: CONFIG_OP_DELETE,
                                value: None,
                            },
                            other => unreachable!("a replacement is sets and deletes: {other:?}"),
                        })
                        .collect(),
                }],
                validate_only,
            };
            let ((), hw) = forwarder
                .forward(
                    INCREMENTAL_ALTER_CONFIGS,
                    &request,
                    |r: IncrementalAlterConfigsResponse| match r.responses.into_iter().next() {
                        Some(t) => answer(t.error_code, t.error_message, || ()),
                        None => empty_answer("IncrementalAlterConfigs"),
                    },
                )
                .await?;
            return self.applied_through(hw).await;
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

    /// ElectLeaders (KIP-460) for the partitions named (None: every partition): the answer,
    /// as the active controller gave it (forwarded, its response itself; in process, its
    /// reply encoded the same way); once this returns, this broker has applied the elections.
    /// A forwarded request goes at the newest version both speak, so that the election type is
    /// carried (v1+).
    pub async fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<ElectLeadersResponse, ChannelError> {
        if let Some(forwarder) = self.remote().await {
            let request = ElectLeadersRequest {
                election_type: wire_election_type(election),
                topic_partitions: partitions.map(|topics| {
                    topics
                        .into_iter()
                        .map(|(topic, partitions)| ElectLeadersTopicPartitions {
                            topic,
                            partitions,
                        })
                        .collect()
                }),
                timeout_ms: FORWARDED_TIMEOUT_MS,
            };
            let (response, hw) = forwarder
                .forward(ELECT_LEADERS, &request, |r: ElectLeadersResponse| {
                    answer(r.error_code, None, || r)
                })
                .await?;
            self.applied_through(hw).await?;
            return Ok(response);
        }
        let request = Request::ElectLeaders {
            election,
            partitions,
        };
        match self.call(request).await? {
            Reply::ElectLeaders(results) => Ok(elect_leaders_response(results)),
            other => panic!("an ElectLeaders answered with {other:?}"),
        }
    }

    /// A block of producer ids for this broker: (first id, length).
    pub async fn allocate_producer_ids(&self) -> Result<(i64, i32), ChannelError> {
        let Some(broker_epoch) = self.lifecycle.status().epoch else {
            return Err(ChannelError::NotRegistered);
        };
        let wire = AllocateProducerIdsRequest {
            broker_id: NodeId(self.node_id),
            broker_epoch,
        };
        if let Some(forwarder) = self.remote().await {
            // A block needs no image: nothing to wait for after it.
            let block = forwarder
                .forward_only(
                    ALLOCATE_PRODUCER_IDS,
                    &wire,
                    |r: AllocateProducerIdsResponse| {
                        answer(r.error_code, None, || {
                            (r.producer_id_start, r.producer_id_len)
                        })
                    },
                )
                .await?;
            return Ok(block);
        }
        let request = Request::AllocateProducerIds(wire);
        match self.call(request).await? {
            Reply::AllocateProducerIds(result) => result.map_err(ChannelError::Refused),
            other => panic!("an AllocateProducerIds answered with {other:?}"),
        }
    }

    /// AlterPartition for partitions this broker leads: `request` names this broker and its
    /// broker epoch. It goes to the active controller as the other requests do (in process
    /// when this node's controller is active, else over the quorum leader's controller
    /// listener, NOT_CONTROLLER retried at the next leader within the forwarder's tries and
    /// timeouts). The answer is the controller's: per partition, its state after the change
    /// or its error code; a refusal of the whole request (STALE_BROKER_EPOCH) is an error.
    /// Nothing waits for this broker's image: the leader takes the new ISR and partition
    /// epoch from the answer, and the image brings the same state later.
    ///
    /// Each partition's ISR goes as v3 gives it (`new_isr_with_epochs`, a member named only
    /// in `new_isr` at broker epoch -1, which is not checked): the controllers serve v2-3, so
    /// v3 is the version the exchange settles on, and v3 has no `new_isr` to encode.
    pub async fn alter_partition(
        &self,
        mut request: AlterPartitionRequest,
    ) -> Result<AlterPartitionResponse, ChannelError> {
        for p in request
            .topics
            .iter_mut()
            .flat_map(|t| t.partitions.iter_mut())
        {
            let bare = std::mem::take(&mut p.new_isr);
            if p.new_isr_with_epochs.is_empty() {
                p.new_isr_with_epochs = bare
                    .into_iter()
                    .map(|broker_id| AlterPartitionBrokerState {
                        broker_id,
                        broker_epoch: -1,
                    })
                    .collect();
            }
        }
        if let Some(forwarder) = self.remote().await {
            return forwarder
                .forward_only(ALTER_PARTITION, &request, |r: AlterPartitionResponse| {
                    answer(r.error_code, None, || r)
                })
                .await;
        }
        // A controller that is not active answers NOT_CONTROLLER at once; give a starting
        // quorum of one the moment it needs to elect itself (as `call` does).
        let _ = self
            .controller
            .wait_for(Duration::from_millis(ACTIVE_WAIT_MS_MAX), |p| {
                p.active_epoch.is_some()
            })
            .await;
        let reply = self
            .controller
            .submit(Request::AlterPartition(request))
            .await
            .map_err(|_| ChannelError::Stopped)?;
        match reply {
            Reply::AlterPartition(Ok(results)) => Ok(
                crate::controller::handlers::alter_partition::response(Ok(results)),
            ),
            Reply::AlterPartition(Err(e)) => Err(ChannelError::Refused(e)),
            other => panic!("an AlterPartition answered with {other:?}"),
        }
    }
}
