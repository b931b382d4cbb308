//! The move of a single-node data directory of the previous release onto the metadata log:
//! what that directory says (its topics with their ids, partition counts and config
//! overrides, its dynamic broker configs, the end of its last producer-id block) written as
//! the metadata records that say the same, so that the first start on the metadata log keeps
//! everything (Kafka moved ZooKeeper clusters onto KRaft the same way, KIP-866: the state
//! read from the old store, written as records, the partitions' directories marked
//! MIGRATING).
//!
//! Invariants: a topic keeps its id and partition count, and every partition its one replica
//! (this node) as leader and only in-sync replica, at leader and partition epoch 0 (the old
//! format had no leader epochs above 0); every override becomes a ConfigRecord of the same
//! key and value; the next producer id is at or above the old block's end, so no id is ever
//! handed out twice; the records, replayed into an empty image, give an image that passes
//! its checks (see [`LegacyDirectory::records`]).

use std::collections::BTreeMap;

use crate::protocol::wire::Uuid;

use super::image::{ConfigResource, MetadataImage};
use super::records::{
    ConfigRecord, MetadataRecord, PartitionRecord, ProducerIdsRecord, TopicRecord,
    CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC, DIRECTORY_MIGRATING,
};

/// One topic of the old directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyTopic {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    pub overrides: BTreeMap<String, String>,
}

/// What a data directory of the previous release holds, besides the partitions' logs (which
/// stay where they are).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LegacyDirectory {
    pub topics: Vec<LegacyTopic>,
    /// Dynamic broker configs for every broker (`AlterConfigs` on the empty broker name).
    pub cluster_default_configs: BTreeMap<String, String>,
    /// Dynamic broker configs of this node.
    pub node_configs: BTreeMap<String, String>,
    /// The end of the last producer-id block reserved (`producer-id-block`), if any.
    pub producer_id_block_end: Option<i64>,
}

/// Why a directory cannot be migrated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationError(pub String);

impl std::fmt::Display for MigrationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "migrating the data directory: {}", self.0)
    }
}

impl std::error::Error for MigrationError {}

impl LegacyDirectory {
    /// The metadata records that say what the directory says, for node `node_id`; checked by
    /// replaying them into an empty image (a duplicate name or id, a partition count out of
    /// range, a producer-id end below 0 are refused, naming the part).
    pub fn records(&self, node_id: i32) -> Result<Vec<MetadataRecord>, MigrationError> {
        let mut records = Vec::new();
        let mut topics: Vec<&LegacyTopic> = self.topics.iter().collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        for topic in topics {
            if topic.partitions < 1 {
                return Err(MigrationError(format!(
                    "topic '{}' has {} partitions",
                    topic.name, topic.partitions
                )));
            }
            records.push(MetadataRecord::Topic(TopicRecord {
                name: topic.name.clone(),
                topic_id: topic.id,
            }));
            for index in 0..topic.partitions {
                records.push(MetadataRecord::Partition(PartitionRecord {
                    partition_id: index,
                    topic_id: topic.id,
                    replicas: vec![node_id],
                    isr: vec![node_id],
                    directories: vec![DIRECTORY_MIGRATING],
                    leader: node_id,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    ..PartitionRecord::default()
                }));
            }
            records.extend(config_records(
                &ConfigResource::topic(&topic.name),
                &topic.overrides,
            ));
        }
        let cluster_default = ConfigResource::broker(None);
        records.extend(config_records(
            &cluster_default,
            &self.cluster_default_configs,
        ));
        let node = ConfigResource::broker(Some(node_id));
        records.extend(config_records(&node, &self.node_configs));
        if let Some(end) = self.producer_id_block_end {
            if end < 0 {
                return Err(MigrationError(format!(
                    "the producer-id block ends at {end}"
                )));
            }
            records.push(MetadataRecord::ProducerIds(ProducerIdsRecord {
                broker_id: node_id,
                broker_epoch: -1,
                next_producer_id: end,
            }));
        }
        let mut image = MetadataImage::empty();
        for (offset, record) in records.iter().enumerate() {
            image
                .replay(offset as i64, 0, record)
                .map_err(|e| MigrationError(e.reason))?;
        }
        image.check().map_err(MigrationError)?;
        Ok(records)
    }
}

fn config_records<'a>(
    resource: &'a ConfigResource,
    configs: &'a BTreeMap<String, String>,
) -> impl Iterator<Item = MetadataRecord> + 'a {
    assert!(
        resource.resource_type == CONFIG_RESOURCE_TOPIC
            || resource.resource_type == CONFIG_RESOURCE_BROKER
    );
    configs.iter().map(move |(name, value)| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: resource.resource_type,
            resource_name: resource.name.clone(),
            name: name.clone(),
            value: Some(value.clone()),
        })
    })
}
