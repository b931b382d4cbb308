//! Metadata (key 3): brokers, the cluster id, and each topic's partitions with their leader.
//!
//! A topic asked for by name that does not exist is created when both the broker
//! (`auto.create.topics.enable`) and the request (`allow_auto_topic_creation`, v4+) allow it.
//! Brokers and each partition's leader, replicas and ISR come from the metadata image this
//! broker applied last (`broker::cluster_view`); a partition whose leader is fenced or gone,
//! or that this node leads in the image but does not serve yet, is LEADER_NOT_AVAILABLE.
//!
//! Authorized operations (v8+, KIP-430): when the request asks, every topic answered by name
//! (existing or not) and, at v8-10, the cluster carry every operation their resource supports,
//! as Kafka answers without an authorizer (`protocol::acl`); a topic id that is not known
//! keeps the "not requested" value, as in Kafka, which answers those apart.

use std::sync::Arc;

use crate::broker::cluster_view;
use crate::broker::handlers::topic_error_code;
use crate::broker::topics::{NewTopic, Topic, TopicError};
use crate::broker::Broker;
use crate::protocol::acl::{self, ResourceType};
use crate::protocol::error::ErrorCode;
use crate::protocol::metadata::{
    MetadataRequest, MetadataResponse, MetadataResponseBroker, MetadataResponsePartition,
    MetadataResponseTopic,
};
use crate::protocol::types::{LeaderEpoch, NodeId};
use crate::protocol::wire::Uuid;

pub async fn handle(
    broker: &Arc<Broker>,
    version: i16,
    request: MetadataRequest,
) -> MetadataResponse {
    let node_id = broker.config.node_id;
    let mut topics = match request.topics {
        // v0 asks for every topic with an empty list; v1+ with null.
        None => all_topics(broker, version).await,
        Some(list) if list.is_empty() && version == 0 => all_topics(broker, version).await,
        Some(list) => {
            let auto_create = broker.config.auto_create_topics_enable
                && (version < 4 || request.allow_auto_topic_creation);
            let mut out = Vec::with_capacity(list.len());
            for wanted in list {
                out.push(match wanted.name {
                    Some(name) => topic_by_name(broker, version, name, auto_create).await,
                    None => topic_by_id(broker, version, wanted.topic_id).await,
                });
            }
            out
        }
    };
    if request.include_topic_authorized_operations {
        let unknown_id = ErrorCode::UNKNOWN_TOPIC_ID.code();
        for topic in topics.iter_mut().filter(|t| t.error_code != unknown_id) {
            topic.topic_authorized_operations = acl::authorized_operations(ResourceType::Topic);
        }
    }
    MetadataResponse {
        brokers: cluster_view::live_brokers(broker)
            .into_iter()
            .map(|b| MetadataResponseBroker {
                node_id: NodeId(b.id),
                host: b.host,
                port: i32::from(b.port),
                rack: b.rack,
            })
            .collect(),
        cluster_id: Some(broker.cluster_id.clone()),
        controller_id: NodeId(node_id),
        topics,
        // A request below v8 or above v10 has no such flag: it decodes as false.
        cluster_authorized_operations: acl::authorized_operations_if(
            request.include_cluster_authorized_operations,
            ResourceType::Cluster,
        ),
        ..Default::default()
    }
}

async fn all_topics(broker: &Arc<Broker>, version: i16) -> Vec<MetadataResponseTopic> {
    broker
        .topics
        .list()
        .await
        .iter()
        .map(|t| describe(broker, version, t))
        .collect()
}

async fn topic_by_name(
    broker: &Arc<Broker>,
    version: i16,
    name: String,
    auto_create: bool,
) -> MetadataResponseTopic {
    if let Some(topic) = broker.topics.get(&name).await {
        return describe(broker, version, &topic);
    }
    let error = |code: ErrorCode, name: String| MetadataResponseTopic {
        error_code: code.code(),
        name: Some(name),
        ..Default::default()
    };
    if !auto_create {
        return error(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, name);
    }
    // Internal topics are never auto-created as ordinary ones: `__consumer_offsets` is made
    // by the group coordinator with its own settings, the others do not exist yet.
    if crate::broker::topics::INTERNAL_TOPICS.contains(&name.as_str()) {
        if name == crate::coordinator::driver::OFFSETS_TOPIC
            && broker
                .coordinator
                .ensure_started(
                    &broker.topics,
                    crate::broker::cluster_view::live_brokers(broker).len(),
                )
                .await
                .is_ok()
        {
            if let Some(topic) = broker.topics.get(&name).await {
                return describe(broker, version, &topic);
            }
        }
        return error(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, name);
    }
    let new = NewTopic {
        id: None,
        name: name.clone(),
        partitions: None,
        replication_factor: None,
        overrides: Default::default(),
    };
    match broker.topics.create(new).await {
        Ok(topic) => describe(broker, version, &topic),
        // Another request created it first.
        Err(TopicError::AlreadyExists { .. }) => match broker.topics.get(&name).await {
            Some(topic) => describe(broker, version, &topic),
            None => error(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, name),
        },
        Err(e @ (TopicError::InvalidName { .. } | TopicError::Collides { .. })) => {
            tracing::debug!(error = %e, "metadata request did not auto-create a topic");
            error(ErrorCode::INVALID_TOPIC_EXCEPTION, name)
        }
        // The controller refused it (a replication factor above the live brokers, a
        // policy): its error, as Kafka answers a failed auto-creation.
        Err(e @ TopicError::Controller(_)) => {
            tracing::warn!(error = %e, "auto-creating a topic failed");
            error(topic_error_code(&e), name)
        }
        Err(e) => {
            tracing::warn!(error = %e, "auto-creating a topic failed");
            error(ErrorCode::UNKNOWN_SERVER_ERROR, name)
        }
    }
}

async fn topic_by_id(broker: &Arc<Broker>, version: i16, id: Uuid) -> MetadataResponseTopic {
    match broker.topics.get_by_id(id).await {
        Some(topic) => describe(broker, version, &topic),
        None => MetadataResponseTopic {
            error_code: ErrorCode::UNKNOWN_TOPIC_ID.code(),
            topic_id: id,
            ..Default::default()
        },
    }
}

fn describe(broker: &Arc<Broker>, _version: i16, topic: &Topic) -> MetadataResponseTopic {
    let node_id = broker.config.node_id;
    MetadataResponseTopic {
        error_code: 0,
        name: Some(topic.name.clone()),
        topic_id: topic.id,
        is_internal: topic.internal,
        partitions: topic
            .partitions
            .iter()
            .map(|p| {
                let mut view = cluster_view::partition(broker, &topic.name, p.index).unwrap_or(
                    cluster_view::PartitionView {
                        leader: -1,
                        leader_epoch: p.leader_epoch(),
                        replicas: Vec::new(),
                        isr: Vec::new(),
                        offline: Vec::new(),
                    },
                );
                // Named its leader but not serving (fenced, shutting down, not yet applied):
                // no leader to name, clients retry after a refresh.
                if view.leader == node_id && !p.is_leading() {
                    view.leader = -1;
                }
                MetadataResponsePartition {
                    error_code: if view.leader >= 0 {
                        0
                    } else {
                        ErrorCode::LEADER_NOT_AVAILABLE.code()
                    },
                    partition_index: p.index,
                    leader_id: NodeId(view.leader),
                    // The image's epoch: clients fence their fetches with it (KIP-320).
                    leader_epoch: LeaderEpoch(view.leader_epoch),
                    replica_nodes: view.replicas.into_iter().map(NodeId).collect(),
                    isr_nodes: view.isr.into_iter().map(NodeId).collect(),
                    offline_replicas: view.offline.into_iter().map(NodeId).collect(),
                }
            })
            .collect(),
        ..Default::default()
    }
}
