//! Admin operations of [`Client`] beyond creating and deleting topics: describing topics (with
//! their ids), adding partitions (CreatePartitions), reading configs (DescribeConfigs),
//! changing them (IncrementalAlterConfigs, and the older whole-set AlterConfigs), and
//! describing the cluster (DescribeCluster, with a Metadata fallback).
//!
//! Invariants:
//! - A request about a broker's own configs goes to that broker (Kafka answers a broker
//!   resource only on the broker it names); everything else goes to any broker, which Kafka
//!   forwards to the controller. Requests are retried only on network-level failures, with
//!   the client's `retries_max` and `retry_backoff_ms`.
//! - Every resource asked about gets exactly one result, in the order asked: a resource the
//!   answer does not mention is reported as an error rather than silently dropped.
//! - A topic whose partitions or configs changed is forgotten by the metadata cache, so the
//!   next request about it sees the change.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::cluster::{needs_one, topic_results, Client, PartitionMetadata};
use super::error::ClientError;
use crate::protocol::alter_configs::{
    AlterConfigsRequest, AlterConfigsResource as WholeResource, AlterConfigsResponse,
    AlterableConfig as WholeConfig,
};
use crate::protocol::create_partitions::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopic,
};
use crate::protocol::describe_cluster::{DescribeClusterRequest, DescribeClusterResponse};
use crate::protocol::describe_configs::{
    DescribeConfigsRequest, DescribeConfigsResource, DescribeConfigsResponse,
};
use crate::protocol::elect_leaders::{
    ElectLeadersRequest, ElectLeadersResponse, ElectLeadersTopicPartitions,
};
use crate::protocol::error::ErrorCode;
use crate::protocol::incremental_alter_configs::{
    AlterConfigsResource as IncrementalResource, AlterableConfig as IncrementalConfig,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use crate::protocol::metadata::{MetadataRequest, MetadataResponse};
use crate::protocol::wire::Uuid;

/// Kafka's resource type of a topic.
pub const RESOURCE_TYPE_TOPIC: i8 = 2;
/// Kafka's resource type of a broker.
pub const RESOURCE_TYPE_BROKER: i8 = 4;

/// Something that has configs.
/// ElectLeaders' outcomes: (topic, partition, result).
pub type ElectLeadersOutcomes = Vec<(String, i32, Result<(), ClientError>)>;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConfigResource {
    Topic(String),
    /// One broker by node id, or (`None`) the cluster-wide default for every broker.
    Broker(Option<i32>),
}

impl ConfigResource {
    pub fn resource_type(&self) -> i8 {
        match self {
            ConfigResource::Topic(_) => RESOURCE_TYPE_TOPIC,
            ConfigResource::Broker(_) => RESOURCE_TYPE_BROKER,
        }
    }

    /// The name on the wire: the topic name, the node id, or "" for the broker default.
    pub fn resource_name(&self) -> String {
        match self {
            ConfigResource::Topic(name) => name.clone(),
            ConfigResource::Broker(Some(id)) => id.to_string(),
            ConfigResource::Broker(None) => String::new(),
        }
    }

    /// Where a request about this resource must go.
    fn target(&self) -> Target {
        match self {
            ConfigResource::Broker(Some(id)) => Target::Node(*id),
            _ => Target::Any,
        }
    }

    fn matches(&self, resource_type: i8, resource_name: &str) -> bool {
        self.resource_type() == resource_type && self.resource_name() == resource_name
    }
}

impl fmt::Display for ConfigResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigResource::Topic(name) => write!(f, "topic {name}"),
            ConfigResource::Broker(Some(id)) => write!(f, "broker {id}"),
            ConfigResource::Broker(None) => write!(f, "the default broker config"),
        }
    }
}

/// Where a config value comes from (Kafka's `ConfigSource`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConfigSource(pub i8);

impl ConfigSource {
    pub const UNKNOWN: ConfigSource = ConfigSource(0);
    /// A topic's own override.
    pub const DYNAMIC_TOPIC_CONFIG: ConfigSource = ConfigSource(1);
    pub const DYNAMIC_BROKER_CONFIG: ConfigSource = ConfigSource(2);
    pub const DYNAMIC_DEFAULT_BROKER_CONFIG: ConfigSource = ConfigSource(3);
    /// The broker's properties file (or `--override`).
    pub const STATIC_BROKER_CONFIG: ConfigSource = ConfigSource(4);
    /// The built-in default.
    pub const DEFAULT_CONFIG: ConfigSource = ConfigSource(5);
    pub const DYNAMIC_BROKER_LOGGER_CONFIG: ConfigSource = ConfigSource(6);

    /// Kafka's name of the source, if this is a known one.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "UNKNOWN",
            1 => "DYNAMIC_TOPIC_CONFIG",
            2 => "DYNAMIC_BROKER_CONFIG",
            3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            4 => "STATIC_BROKER_CONFIG",
            5 => "DEFAULT_CONFIG",
            6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
            7 => "CLIENT_METRICS_CONFIG",
            8 => "GROUP_CONFIG",
            _ => return None,
        })
    }
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "SOURCE_{}", self.0),
        }
    }
}

/// A value a config also has under another name or at another level, by precedence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigSynonym {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
}

/// One config of a resource as DescribeConfigs reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    /// `None` for a sensitive config or one without a value.
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub is_sensitive: bool,
    pub synonyms: Vec<ConfigSynonym>,
    /// Kafka's config type id (1 boolean, 2 string, 3 int, ...); 0 when not reported (v<3).
    pub config_type: i8,
    pub documentation: Option<String>,
}

impl ConfigEntry {
    /// True for a value set on the resource itself (a topic override, a dynamic broker
    /// config), as opposed to one inherited from a default.
    pub fn is_override(&self) -> bool {
        matches!(
            self.source,
            ConfigSource::DYNAMIC_TOPIC_CONFIG
                | ConfigSource::DYNAMIC_BROKER_CONFIG
                | ConfigSource::DYNAMIC_DEFAULT_BROKER_CONFIG
                | ConfigSource::DYNAMIC_BROKER_LOGGER_CONFIG
        )
    }
}

/// What DescribeConfigs should include.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DescribeConfigsOptions {
    /// Only these config names; `None` for all.
    pub keys: Option<Vec<String>>,
    pub include_synonyms: bool,
    pub include_documentation: bool,
}

/// One change of IncrementalAlterConfigs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterConfigOp {
    Set {
        name: String,
        value: String,
    },
    /// Back to the inherited value.
    Delete {
        name: String,
    },
    /// Adds to a list config.
    Append {
        name: String,
        value: String,
    },
    /// Removes from a list config.
    Subtract {
        name: String,
        value: String,
    },
}

impl AlterConfigOp {
    fn to_wire(&self) -> IncrementalConfig {
        let (name, operation, value) = match self {
            AlterConfigOp::Set { name, value } => (name, 0, Some(value.clone())),
            AlterConfigOp::Delete { name } => (name, 1, None),
            AlterConfigOp::Append { name, value } => (name, 2, Some(value.clone())),
            AlterConfigOp::Subtract { name, value } => (name, 3, Some(value.clone())),
        };
        IncrementalConfig {
            name: name.clone(),
            config_operation: operation,
            value,
        }
    }
}

/// The broker refused an operation on one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigResourceError {
    pub resource: ConfigResource,
    pub code: ErrorCode,
    pub message: Option<String>,
}

impl fmt::Display for ConfigResourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.resource, self.code)?;
        match &self.message {
            Some(message) => write!(f, ": {message}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for ConfigResourceError {}

/// One topic as Metadata describes it, with what the metadata cache does not keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicDescription {
    pub name: String,
    /// NONE, or why the topic could not be described (UNKNOWN_TOPIC_OR_PARTITION, ...).
    pub error: ErrorCode,
    /// [`Uuid::ZERO`] when the broker does not report ids (Metadata before v10).
    pub topic_id: Uuid,
    pub is_internal: bool,
    pub partitions: Vec<PartitionMetadata>,
}

/// One broker of the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerDescription {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// The cluster as DescribeCluster (or Metadata) describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterDescription {
    pub cluster_id: Option<String>,
    /// -1 if unknown.
    pub controller_id: i32,
    pub brokers: Vec<BrokerDescription>,
}

/// Where a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Any,
    Node(i32),
}

/// One result per resource, in request order.
pub type ConfigResults<T> = Vec<(ConfigResource, Result<T, ConfigResourceError>)>;

/// One resource's answer in a response.
struct WireResult<T> {
    resource_type: i8,
    resource_name: String,
    error_code: i16,
    error_message: Option<String>,
    payload: T,
}

/// The per-resource answers of an AlterConfigs or IncrementalAlterConfigs response: the two
/// have answers with the same fields but of distinct types, hence a macro.
macro_rules! alter_answers {
    ($response:expr) => {
        $response
            .responses
            .into_iter()
            .map(|r| WireResult {
                resource_type: r.resource_type,
                resource_name: r.resource_name,
                error_code: r.error_code,
                error_message: r.error_message,
                payload: (),
            })
            .collect()
    };
}

type WireResults<T> = Vec<WireResult<T>>;

/// Pairs `resources` with the answers about them; a resource the answers leave out gets an
/// UNKNOWN_SERVER_ERROR naming the omission.
fn match_results<T>(resources: &[ConfigResource], answers: WireResults<T>) -> ConfigResults<T> {
    let mut answers: Vec<Option<WireResult<T>>> = answers.into_iter().map(Some).collect();
    resources
        .iter()
        .map(|resource| {
            let found = answers.iter_mut().find(|a| {
                a.as_ref()
                    .is_some_and(|a| resource.matches(a.resource_type, &a.resource_name))
            });
            let result = match found.and_then(Option::take) {
                Some(a) if a.error_code == 0 => Ok(a.payload),
                Some(a) => Err(ConfigResourceError {
                    resource: resource.clone(),
                    code: ErrorCode(a.error_code),
                    message: a.error_message,
                }),
                None => Err(ConfigResourceError {
                    resource: resource.clone(),
                    code: ErrorCode::UNKNOWN_SERVER_ERROR,
                    message: Some("the broker's answer does not mention this resource".into()),
                }),
            };
            (resource.clone(), result)
        })
        .collect()
}

/// The indexes of `resources` grouped by where their request goes, in a stable order.
fn by_target(resources: &[ConfigResource]) -> BTreeMap<Target, Vec<usize>> {
    let mut groups: BTreeMap<Target, Vec<usize>> = BTreeMap::new();
    for (index, resource) in resources.iter().enumerate() {
        groups.entry(resource.target()).or_default().push(index);
    }
    groups
}

impl Client {
    /// Describes `topics` (every topic if empty) through Metadata, without creating any: a
    /// missing topic comes back with UNKNOWN_TOPIC_OR_PARTITION in its `error`. Sorted by
    /// name; partitions by index. Also refreshes the metadata cache.
    pub async fn describe_topics(
        &mut self,
        topics: &[&str],
    ) -> Result<Vec<TopicDescription>, ClientError> {
        let response = self.metadata_response(topics, false).await?;
        let mut described: Vec<TopicDescription> = response
            .topics
            .iter()
            .filter_map(|t| {
                let name = t.name.clone()?;
                let mut partitions: Vec<PartitionMetadata> = t
                    .partitions
                    .iter()
                    .map(PartitionMetadata::from_wire)
                    .collect();
                partitions.sort_by_key(|p| p.partition);
                Some(TopicDescription {
                    name,
                    error: ErrorCode(t.error_code),
                    topic_id: t.topic_id,
                    is_internal: t.is_internal,
                    partitions,
                })
            })
            .collect();
        described.sort_by(|a, b| a.name.cmp(&b.name));
        self.apply_metadata(response);
        Ok(described)
    }

    /// Grows each `(topic, total partition count)`; one result per topic in the answer.
    /// New partitions are placed by the broker. `validate_only` checks without changing.
    pub async fn create_partitions(
        &mut self,
        topics: &[(&str, i32)],
        validate_only: bool,
    ) -> Result<Vec<(String, Result<(), ClientError>)>, ClientError> {
        needs_one(topics, "create_partitions needs at least one topic")?;
        let request = CreatePartitionsRequest {
            topics: topics
                .iter()
                .map(|(name, count)| CreatePartitionsTopic {
                    name: (*name).to_owned(),
                    count: *count,
                    assignments: None,
                })
                .collect(),
            timeout_ms: self.admin_timeout_ms(),
            validate_only,
        };
        let response: CreatePartitionsResponse = self
            .admin_versioned(CreatePartitionsRequest::API_KEY, |_| request.clone())
            .await?;
        for (name, _) in topics {
            self.forget_topic(name);
        }
        Ok(topic_results(
            response
                .results
                .into_iter()
                .map(|r| (r.name, r.error_code, r.error_message)),
        ))
    }

    /// ElectLeaders (KIP-460): `election_type` 0 (preferred) or 1 (unclean) for the
    /// partitions named, or every partition (`None`, where the answer lists only those an
    /// election was attempted for). Each partition's outcome, as `(topic, partition,
    /// result)`; ELECTION_NOT_NEEDED is an error result like the others (the tools print it
    /// apart). A broker older than v1 knows only preferred elections: an unclean one is then
    /// refused here.
    pub async fn elect_leaders(
        &mut self,
        election_type: i8,
        partitions: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<ElectLeadersOutcomes, ClientError> {
        let timeout_ms = self.admin_timeout_ms();
        let topic_partitions = partitions.map(|topics| {
            topics
                .into_iter()
                .map(|(topic, partitions)| ElectLeadersTopicPartitions { topic, partitions })
                .collect::<Vec<_>>()
        });
        let response: ElectLeadersResponse = self
            .admin_versioned(ElectLeadersRequest::API_KEY, |_| ElectLeadersRequest {
                election_type,
                topic_partitions: topic_partitions.clone(),
                timeout_ms,
            })
            .await?;
        if response.error_code != 0 {
            return Err(ClientError::Kafka {
                code: ErrorCode(response.error_code),
                message: None,
                topic: "(elections)".into(),
                partition: -1,
            });
        }
        let mut out = Vec::new();
        for topic in response.replica_election_results {
            for p in topic.partition_result {
                let result = if p.error_code == 0 {
                    Ok(())
                } else {
                    Err(ClientError::Kafka {
                        code: ErrorCode(p.error_code),
                        message: p.error_message,
                        topic: topic.topic.clone(),
                        partition: p.partition_id,
                    })
                };
                out.push((topic.topic.clone(), p.partition_id, result));
            }
        }
        Ok(out)
    }

    /// Every config of each resource, with sources and synonyms.
    pub async fn describe_configs(
        &mut self,
        resources: &[ConfigResource],
    ) -> Result<ConfigResults<Vec<ConfigEntry>>, ClientError> {
        let options = DescribeConfigsOptions {
            include_synonyms: true,
            ..DescribeConfigsOptions::default()
        };
        self.describe_configs_with(resources, &options).await
    }

    /// DescribeConfigs with explicit options; one result per resource, in order.
    pub async fn describe_configs_with(
        &mut self,
        resources: &[ConfigResource],
        options: &DescribeConfigsOptions,
    ) -> Result<ConfigResults<Vec<ConfigEntry>>, ClientError> {
        needs_one(resources, "describe_configs needs at least one resource")?;
        let mut answers: WireResults<Vec<ConfigEntry>> = Vec::new();
        for (target, indexes) in by_target(resources) {
            let request = DescribeConfigsRequest {
                resources: indexes
                    .iter()
                    .filter_map(|&i| resources.get(i))
                    .map(|r| DescribeConfigsResource {
                        resource_type: r.resource_type(),
                        resource_name: r.resource_name(),
                        configuration_keys: options.keys.clone(),
                    })
                    .collect(),
                include_synonyms: options.include_synonyms,
                include_documentation: options.include_documentation,
            };
            let response: DescribeConfigsResponse = self
                .request_to(target, DescribeConfigsRequest::API_KEY, |_| request.clone())
                .await?;
            answers.extend(response.results.into_iter().map(|r| {
                let entries = r
                    .configs
                    .into_iter()
                    .map(|c| ConfigEntry {
                        name: c.name,
                        value: c.value,
                        source: ConfigSource(c.config_source),
                        read_only: c.read_only,
                        is_sensitive: c.is_sensitive,
                        synonyms: c
                            .synonyms
                            .into_iter()
                            .map(|s| ConfigSynonym {
                                name: s.name,
                                value: s.value,
                                source: ConfigSource(s.source),
                            })
                            .collect(),
                        config_type: c.config_type,
                        documentation: c.documentation,
                    })
                    .collect();
                WireResult {
                    resource_type: r.resource_type,
                    resource_name: r.resource_name,
                    error_code: r.error_code,
                    error_message: r.error_message,
                    payload: entries,
                }
            }));
        }
        Ok(match_results(resources, answers))
    }

    /// Applies `changes` to each resource's configs, leaving configs not named alone. One
    /// result per resource, in order.
    pub async fn incremental_alter_configs(
        &mut self,
        changes: &[(ConfigResource, Vec<AlterConfigOp>)],
        validate_only: bool,
    ) -> Result<ConfigResults<()>, ClientError> {
        let resources: Vec<ConfigResource> = changes.iter().map(|(r, _)| r.clone()).collect();
        needs_one(
            &resources,
            "incremental_alter_configs needs at least one resource",
        )?;
        self.alter_by_target(
            &resources,
            IncrementalAlterConfigsRequest::API_KEY,
            |indexes| IncrementalAlterConfigsRequest {
                resources: indexes
                    .iter()
                    .filter_map(|&i| changes.get(i))
                    .map(|(r, ops)| IncrementalResource {
                        resource_type: r.resource_type(),
                        resource_name: r.resource_name(),
                        configs: ops.iter().map(AlterConfigOp::to_wire).collect(),
                    })
                    .collect(),
                validate_only,
            },
            |response: IncrementalAlterConfigsResponse| alter_answers!(response),
        )
        .await
    }

    /// Replaces each resource's whole set of overrides with `configs` (the older AlterConfigs:
    /// an override not listed goes back to its default). One result per resource, in order.
    pub async fn alter_configs(
        &mut self,
        configs: &[(ConfigResource, Vec<(String, String)>)],
        validate_only: bool,
    ) -> Result<ConfigResults<()>, ClientError> {
        let resources: Vec<ConfigResource> = configs.iter().map(|(r, _)| r.clone()).collect();
        needs_one(&resources, "alter_configs needs at least one resource")?;
        self.alter_by_target(
            &resources,
            AlterConfigsRequest::API_KEY,
            |indexes| AlterConfigsRequest {
                resources: indexes
                    .iter()
                    .filter_map(|&i| configs.get(i))
                    .map(|(r, entries)| WholeResource {
                        resource_type: r.resource_type(),
                        resource_name: r.resource_name(),
                        configs: entries
                            .iter()
                            .map(|(name, value)| WholeConfig {
                                name: name.clone(),
                                value: Some(value.clone()),
                            })
                            .collect(),
                    })
                    .collect(),
                validate_only,
            },
            |response: AlterConfigsResponse| alter_answers!(response),
        )
        .await
    }

    /// Sends one alter request per target, built by `build` from the indexes of the
    /// `resources` it covers; forgets the cached metadata of altered topics and pairs each
    /// resource with its answer (from `answers_of`), in order.
    async fn alter_by_target<Req, Resp>(
        &mut self,
        resources: &[ConfigResource],
        api_key: i16,
        build: impl Fn(&[usize]) -> Req,
        answers_of: impl Fn(Resp) -> WireResults<()>,
    ) -> Result<ConfigResults<()>, ClientError>
    where
        Req: crate::protocol::message::Message + Clone,
        Resp: crate::protocol::message::Message,
    {
        let mut answers: WireResults<()> = Vec::new();
        for (target, indexes) in by_target(resources) {
            let request = build(&indexes);
            let response: Resp = self
                .request_to(target, api_key, |_| request.clone())
                .await?;
            answers.extend(answers_of(response));
        }
        self.forget_topics_of(resources);
        Ok(match_results(resources, answers))
    }

    /// The cluster id, controller and brokers: DescribeCluster, or Metadata from a broker that
    /// does not speak DescribeCluster.
    pub async fn describe_cluster(&mut self) -> Result<ClusterDescription, ClientError> {
        let request = DescribeClusterRequest {
            endpoint_type: 1,
            ..DescribeClusterRequest::default()
        };
        let answer: Result<DescribeClusterResponse, ClientError> = self
            .send_any(DescribeClusterRequest::API_KEY, |_| request.clone())
            .await;
        match answer {
            Ok(response) if response.error_code == 0 => Ok(ClusterDescription {
                cluster_id: Some(response.cluster_id),
                controller_id: response.controller_id.0,
                brokers: response
                    .brokers
                    .into_iter()
                    .map(|b| BrokerDescription {
                        node_id: b.broker_id.0,
                        host: b.host,
                        port: b.port,
                        rack: b.rack,
                    })
                    .collect(),
            }),
            Ok(response) => Err(ClientError::Kafka {
                code: ErrorCode(response.error_code),
                message: response.error_message,
                topic: "(cluster)".into(),
                partition: -1,
            }),
            Err(ClientError::UnsupportedApi { .. }) => {
                let make = |_| MetadataRequest {
                    // No topics: an empty list (null would mean all of them; v0, which has no
                    // null, reads an empty list as all topics, which is only slower).
                    topics: Some(Vec::new()),
                    allow_auto_topic_creation: false,
                    ..MetadataRequest::default()
                };
                let response: MetadataResponse =
                    self.send_any(MetadataRequest::API_KEY, make).await?;
                let description = ClusterDescription {
                    cluster_id: response.cluster_id.clone(),
                    controller_id: response.controller_id.0,
                    brokers: response
                        .brokers
                        .iter()
                        .map(|b| BrokerDescription {
                            node_id: b.node_id.0,
                            host: b.host.clone(),
                            port: b.port,
                            rack: b.rack.clone(),
                        })
                        .collect(),
                };
                self.apply_metadata(response);
                Ok(description)
            }
            Err(err) => Err(err),
        }
    }

    fn forget_topics_of(&mut self, resources: &[ConfigResource]) {
        for resource in resources {
            if let ConfigResource::Topic(name) = resource {
                self.forget_topic(name);
            }
        }
    }

    /// Sends to any broker, or to one node (learning its address from Metadata first if
    /// needed), retrying network-level failures.
    async fn request_to<Req, Resp>(
        &mut self,
        target: Target,
        api_key: i16,
        make: impl Fn(i16) -> Req,
    ) -> Result<Resp, ClientError>
    where
        Req: crate::protocol::message::Message,
        Resp: crate::protocol::message::Message,
    {
        let node_id = match target {
            Target::Any => return self.admin_versioned(api_key, make).await,
            Target::Node(id) => id,
        };
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let result = async {
                if !self.brokers().contains_key(&node_id) {
                    self.describe_cluster().await?;
                }
                let conn = self.broker_connection(node_id).await?;
                let version = conn.version_for(api_key)?;
                conn.send::<Req, Resp>(api_key, version, &make(version))
                    .await
            }
            .await;
            match result {
                Ok(resp) => return Ok(resp),
                Err(err) if err.is_retriable() && attempts <= self.config().retries_max => {
                    crate::rt::time::sleep(Duration::from_millis(self.config().retry_backoff_ms))
                        .await;
                }
                Err(err) => return Err(err),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_resources_name_themselves_on_the_wire_and_in_messages() {
        let topic = ConfigResource::Topic("t".into());
        assert_eq!(
            (topic.resource_type(), topic.resource_name()),
            (2, "t".into())
        );
        let broker = ConfigResource::Broker(Some(3));
        assert_eq!(
            (broker.resource_type(), broker.resource_name()),
            (4, "3".into())
        );
        assert_eq!(ConfigResource::Broker(None).resource_name(), "");
        assert_eq!(broker.target(), Target::Node(3));
        assert_eq!(topic.target(), Target::Any);
        assert_eq!(ConfigResource::Broker(None).target(), Target::Any);
        let err = ConfigResourceError {
            resource: broker,
            code: ErrorCode::INVALID_CONFIG,
            message: Some("no such key".into()),
        };
        assert_eq!(
            err.to_string(),
            "broker 3: INVALID_CONFIG (40): no such key"
        );
        assert_eq!(ConfigSource(1).to_string(), "DYNAMIC_TOPIC_CONFIG");
        assert_eq!(ConfigSource(42).to_string(), "SOURCE_42");
    }

    #[test]
    fn admin_results_follow_the_request_order_and_report_omissions() {
        let resources = vec![
            ConfigResource::Topic("a".into()),
            ConfigResource::Broker(Some(1)),
            ConfigResource::Topic("missing".into()),
        ];
        let answer =
            |resource_type, name: &str, error_code, message: Option<&str>, payload| WireResult {
                resource_type,
                resource_name: name.to_owned(),
                error_code,
                error_message: message.map(str::to_owned),
                payload,
            };
        let answers = vec![
            answer(4, "1", 0, None, 7),
            answer(2, "a", 40, Some("bad"), 0),
        ];
        let results = match_results(&resources, answers);
        assert_eq!(results.len(), 3);
        let codes: Vec<Option<ErrorCode>> = results
            .iter()
            .map(|(_, r)| r.as_ref().err().map(|e| e.code))
            .collect();
        assert_eq!(
            codes,
            vec![
                Some(ErrorCode::INVALID_CONFIG),
                None,
                Some(ErrorCode::UNKNOWN_SERVER_ERROR)
            ]
        );
        assert_eq!(results.get(1).map(|(_, r)| r.clone()), Some(Ok(7)));
        let groups = by_target(&resources);
        assert_eq!(groups.get(&Target::Any), Some(&vec![0, 2]));
        assert_eq!(groups.get(&Target::Node(1)), Some(&vec![1]));
    }

    #[test]
    fn admin_incremental_ops_map_to_kafka_operation_codes() {
        let ops = [
            AlterConfigOp::Set {
                name: "a".into(),
                value: "1".into(),
            },
            AlterConfigOp::Delete { name: "b".into() },
            AlterConfigOp::Append {
                name: "c".into(),
                value: "x".into(),
            },
            AlterConfigOp::Subtract {
                name: "d".into(),
                value: "y".into(),
            },
        ];
        let wire: Vec<(String, i8, Option<String>)> = ops
            .iter()
            .map(|op| {
                let w = op.to_wire();
                (w.name, w.config_operation, w.value)
            })
            .collect();
        assert_eq!(
            wire,
            vec![
                ("a".into(), 0, Some("1".into())),
                ("b".into(), 1, None),
                ("c".into(), 2, Some("x".into())),
                ("d".into(), 3, Some("y".into())),
            ]
        );
    }
}
