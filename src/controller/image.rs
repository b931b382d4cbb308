//! The metadata image: the cluster's metadata as the committed metadata log says it is at one
//! offset, Kafka's `MetadataImage`. Brokers with their registrations, topics with their
//! partitions (replicas, leader, epochs, ISR and ELR), configs, finalized features and the
//! next producer-id block.
//!
//! An image is never changed in place once published: [`MetadataImage::replay`] on a clone
//! (Kafka's `MetadataDelta`, here the clone itself: topics are shared behind `Arc`s, so a
//! clone copies only the maps) and the new image is swapped in whole, so a reader holding an
//! `Arc<MetadataImage>` sees one consistent state. [`MetadataImage::to_records`] writes the
//! image as the records of a snapshot, in Kafka's order (features first, then brokers, topics,
//! configs, producer ids); replaying them into an empty image gives the same image.
//!
//! Invariants (checked by [`MetadataImage::check`], a release assertion after every replay in
//! the loaders): topic names and ids map one to one; every partition of a topic is numbered
//! 0..n; a partition's ISR, ELR and leader are among its replicas, its leader (if any) is in
//! its ISR; replicas are distinct, and so are the members of its ISR and of its ELR, and no
//! replica is in both (KIP-966: the ELR holds replicas that left the ISR); the next producer
//! id only grows.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::protocol::wire::Uuid;

use super::records::{
    BrokerEndpoint, BrokerFeature, BrokerRegistrationChangeRecord, ConfigRecord,
    FeatureLevelRecord, MetadataRecord, PartitionChangeRecord, PartitionRecord, ProducerIdsRecord,
    RegisterBrokerRecord, TopicRecord, CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC,
    FENCED_CHANGE_FENCE, FENCED_CHANGE_NONE, FENCED_CHANGE_UNFENCE, LEADER_UNCHANGED,
    METADATA_VERSION_FEATURE, NO_LEADER,
};

/// A registered broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub id: i32,
    /// The broker epoch the controller gave this incarnation.
    pub epoch: i64,
    pub incarnation_id: Uuid,
    pub listeners: Vec<Listener>,
    /// Feature ranges the broker supports: name -> (min, max).
    pub features: BTreeMap<String, (i16, i16)>,
    pub rack: Option<String>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
    pub log_dirs: Vec<Uuid>,
}

/// A broker listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub security_protocol: i16,
}

impl BrokerRegistration {
    /// The listener named `name`.
    pub fn listener(&self, name: &str) -> Option<&Listener> {
        self.listeners.iter().find(|l| l.name == name)
    }

    /// A broker that may lead partitions: not fenced, not shutting down.
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

/// One partition as the controller placed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRegistration {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub removing_replicas: Vec<i32>,
    pub adding_replicas: Vec<i32>,
    /// The leader, or -1.
    pub leader: i32,
    pub leader_recovery_state: i8,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub directories: Vec<Uuid>,
    pub elr: Vec<i32>,
    pub last_known_elr: Vec<i32>,
}

impl PartitionRegistration {
    pub fn has_leader(&self) -> bool {
        self.leader != NO_LEADER
    }
}

/// A topic and its partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub id: Uuid,
    pub partitions: BTreeMap<i32, PartitionRegistration>,
}

/// What configs belong to: a topic, a broker (by id), or the cluster-wide broker default
/// (a broker resource named "").
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConfigResource {
    pub resource_type: i8,
    pub name: String,
}

impl ConfigResource {
    pub fn topic(name: &str) -> ConfigResource {
        ConfigResource {
            resource_type: CONFIG_RESOURCE_TOPIC,
            name: name.to_string(),
        }
    }

    pub fn broker(id: Option<i32>) -> ConfigResource {
        ConfigResource {
            resource_type: CONFIG_RESOURCE_BROKER,
            name: id.map(|id| id.to_string()).unwrap_or_default(),
        }
    }
}

/// The image.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataImage {
    /// The offset of the last record applied (-1: none), and its leader epoch.
    pub offset: i64,
    pub epoch: i32,
    /// Finalized features: name -> level.
    pub features: BTreeMap<String, i16>,
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    pub topics: BTreeMap<Uuid, Arc<TopicImage>>,
    pub topic_ids: BTreeMap<String, Uuid>,
    pub configs: BTreeMap<ConfigResource, BTreeMap<String, String>>,
    /// The first producer id of the next block to hand out.
    pub next_producer_id: i64,
}

/// Why a record does not apply to an image: the log and the image disagree, which only a
/// bug or a damaged log can cause. The loader stops on it, naming the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageError {
    pub offset: i64,
    pub reason: String,
}

impl std::fmt::Display for ImageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the metadata record at offset {} does not apply: {}",
            self.offset, self.reason
        )
    }
}

impl std::error::Error for ImageError {}

impl MetadataImage {
    /// The image of an empty log.
    pub fn empty() -> MetadataImage {
        MetadataImage {
            offset: -1,
            epoch: 0,
            ..MetadataImage::default()
        }
    }

    /// The image a snapshot's records describe: the state after every record below
    /// `end_offset`, written up to leader epoch `epoch`. Its records carry no offsets of their
    /// own (a broker's epoch is a field of its RegisterBrokerRecord), so they are replayed in
    /// order and the image then takes the snapshot's position.
    pub fn from_snapshot(
        end_offset: i64,
        epoch: i32,
        records: &[MetadataRecord],
    ) -> Result<MetadataImage, ImageError> {
        let mut image = MetadataImage::empty();
        for (i, record) in records.iter().enumerate() {
            image
                .replay(i as i64, epoch, record)
                .map_err(|e| ImageError {
                    offset: end_offset - 1,
                    reason: format!("record {i} of the snapshot: {}", e.reason),
                })?;
        }
        image.offset = end_offset - 1;
        image.epoch = epoch;
        image.check().map_err(|reason| ImageError {
            offset: end_offset - 1,
            reason: format!("the snapshot's image is inconsistent: {reason}"),
        })?;
        Ok(image)
    }

    pub fn metadata_version(&self) -> Option<i16> {
        self.features.get(METADATA_VERSION_FEATURE).copied()
    }

    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topic_ids.get(name).and_then(|id| self.topics.get(id))
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<&Arc<TopicImage>> {
        self.topics.get(&id)
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionRegistration> {
        self.topic(topic)?.partitions.get(&partition)
    }

    /// The configs set on `resource` (empty when none).
    pub fn configs_of(&self, resource: &ConfigResource) -> BTreeMap<String, String> {
        self.configs.get(resource).cloned().unwrap_or_default()
    }

    /// Applies the record at `offset`, written in leader epoch `epoch`.
    pub fn replay(
        &mut self,
        offset: i64,
        epoch: i32,
        record: &MetadataRecord,
    ) -> Result<(), ImageError> {
        let fail = |reason: String| ImageError { offset, reason };
        if offset <= self.offset {
            return Err(fail(format!(
                "it is not past the image's offset {}",
                self.offset
            )));
        }
        match record {
            MetadataRecord::RegisterBroker(r) => self.register_broker(r),
            MetadataRecord::UnregisterBroker(r) => {
                let broker = self
                    .brokers
                    .get(&r.broker_id)
                    .ok_or_else(|| fail(format!("broker {} is not registered", r.broker_id)))?;
                if broker.epoch != r.broker_epoch {
                    return Err(fail(format!(
                        "broker {} has epoch {}, the record names {}",
                        r.broker_id, broker.epoch, r.broker_epoch
                    )));
                }
                self.brokers.remove(&r.broker_id);
            }
            MetadataRecord::Topic(r) => self.add_topic(r).map_err(fail)?,
            MetadataRecord::Partition(r) => self.set_partition(r).map_err(fail)?,
            MetadataRecord::Config(r) => self.set_config(r),
            MetadataRecord::PartitionChange(r) => self.change_partition(r).map_err(fail)?,
            MetadataRecord::FenceBroker(r) => {
                self.change_broker(r.id, r.epoch, FENCED_CHANGE_FENCE, 0)
                    .map_err(fail)?;
            }
            MetadataRecord::UnfenceBroker(r) => {
                self.change_broker(r.id, r.epoch, FENCED_CHANGE_UNFENCE, 0)
                    .map_err(fail)?;
            }
            MetadataRecord::BrokerRegistrationChange(r) => {
                self.change_registration(r).map_err(fail)?
            }
            MetadataRecord::RemoveTopic(r) => {
                let topic = self
                    .topics
                    .remove(&r.topic_id)
                    .ok_or_else(|| fail(format!("no topic has id {}", r.topic_id.to_base64())))?;
                self.topic_ids.remove(&topic.name);
                self.configs.remove(&ConfigResource::topic(&topic.name));
            }
            MetadataRecord::FeatureLevel(r) => {
                if r.feature_level == 0 {
                    self.features.remove(&r.name);
                } else {
                    self.features.insert(r.name.clone(), r.feature_level);
                }
            }
            MetadataRecord::ProducerIds(r) => {
                if r.next_producer_id <= self.next_producer_id && self.next_producer_id > 0 {
                    return Err(fail(format!(
                        "the next producer id {} is not past {}",
                        r.next_producer_id, self.next_producer_id
                    )));
                }
                if r.next_producer_id < 0 {
                    return Err(fail(format!(
                        "a negative next producer id {}",
                        r.next_producer_id
                    )));
                }
                self.next_producer_id = r.next_producer_id;
            }
            // Transactions are resolved by the loader, which applies a transaction's records
            // only once it ends.
            MetadataRecord::NoOp(_)
            | MetadataRecord::BeginTransaction(_)
            | MetadataRecord::EndTransaction(_)
            | MetadataRecord::AbortTransaction(_) => {}
        }
        self.offset = offset;
        self.epoch = epoch;
        Ok(())
    }

    fn register_broker(&mut self, r: &RegisterBrokerRecord) {
        let registration = BrokerRegistration {
            id: r.broker_id,
            epoch: r.broker_epoch,
            incarnation_id: r.incarnation_id,
            listeners: r
                .end_points
                .iter()
                .map(|e| Listener {
                    name: e.name.clone(),
                    host: e.host.clone(),
                    port: e.port,
                    security_protocol: e.security_protocol,
                })
                .collect(),
            features: r
                .features
                .iter()
                .map(|f| {
                    (
                        f.name.clone(),
                        (f.min_supported_version, f.max_supported_version),
                    )
                })
                .collect(),
            rack: r.rack.clone(),
            fenced: r.fenced,
            in_controlled_shutdown: r.in_controlled_shutdown,
            log_dirs: r.log_dirs.clone(),
        };
        // A new registration of the same id replaces the old one (a restarted broker).
        self.brokers.insert(r.broker_id, registration);
    }

    fn change_broker(
        &mut self,
        id: i32,
        epoch: i64,
        fenced: i8,
        in_controlled_shutdown: i8,
    ) -> Result<(), String> {
        let broker = self
            .brokers
            .get_mut(&id)
            .ok_or_else(|| format!("broker {id} is not registered"))?;
        if broker.epoch != epoch {
            return Err(format!(
                "broker {id} has epoch {}, the record names {epoch}",
                broker.epoch
            ));
        }
        match fenced {
            FENCED_CHANGE_FENCE => broker.fenced = true,
            FENCED_CHANGE_UNFENCE => broker.fenced = false,
            FENCED_CHANGE_NONE => {}
            other => return Err(format!("a Fenced change of {other}")),
        }
        match in_controlled_shutdown {
            0 => {}
            1 => broker.in_controlled_shutdown = true,
            other => return Err(format!("an InControlledShutdown change of {other}")),
        }
        Ok(())
    }

    fn change_registration(&mut self, r: &BrokerRegistrationChangeRecord) -> Result<(), String> {
        self.change_broker(
            r.broker_id,
            r.broker_epoch,
            r.fenced,
            r.in_controlled_shutdown,
        )?;
        if !r.log_dirs.is_empty() {
            if let Some(broker) = self.brokers.get_mut(&r.broker_id) {
                broker.log_dirs = r.log_dirs.clone();
            }
        }
        Ok(())
    }

    fn add_topic(&mut self, r: &TopicRecord) -> Result<(), String> {
        if let Some(id) = self.topic_ids.get(&r.name) {
            return Err(format!(
                "topic {} exists already (id {})",
                r.name,
                id.to_base64()
            ));
        }
        if r.topic_id == Uuid::ZERO {
            return Err(format!("topic {} has the zero id", r.name));
        }
        if self.topics.contains_key(&r.topic_id) {
            return Err(format!(
                "topic id {} is taken already",
                r.topic_id.to_base64()
            ));
        }
        self.topic_ids.insert(r.name.clone(), r.topic_id);
        self.topics.insert(
            r.topic_id,
            Arc::new(TopicImage {
                name: r.name.clone(),
                id: r.topic_id,
                partitions: BTreeMap::new(),
            }),
        );
        Ok(())
    }

    fn topic_mut(&mut self, id: Uuid) -> Result<&mut TopicImage, String> {
        self.topics
            .get_mut(&id)
            .map(Arc::make_mut)
            .ok_or_else(|| format!("no topic has id {}", id.to_base64()))
    }

    fn set_partition(&mut self, r: &PartitionRecord) -> Result<(), String> {
        let partition = PartitionRegistration {
            replicas: r.replicas.clone(),
            isr: r.isr.clone(),
            removing_replicas: r.removing_replicas.clone(),
            adding_replicas: r.adding_replicas.clone(),
            leader: r.leader,
            leader_recovery_state: r.leader_recovery_state,
            leader_epoch: r.leader_epoch,
            partition_epoch: r.partition_epoch,
            directories: r.directories.clone(),
            elr: r.eligible_leader_replicas.clone().unwrap_or_default(),
            last_known_elr: r.last_known_elr.clone().unwrap_or_default(),
        };
        check_partition(&partition).map_err(|e| format!("partition {}: {e}", r.partition_id))?;
        let topic = self.topic_mut(r.topic_id)?;
        let next = topic.partitions.len() as i32;
        if r.partition_id < 0 || r.partition_id > next {
            return Err(format!(
                "partition {} of topic {}, which has {next}",
                r.partition_id, topic.name
            ));
        }
        topic.partitions.insert(r.partition_id, partition);
        Ok(())
    }

    fn change_partition(&mut self, r: &PartitionChangeRecord) -> Result<(), String> {
        let topic = self.topic_mut(r.topic_id)?;
        let name = topic.name.clone();
        let partition = topic
            .partitions
            .get_mut(&r.partition_id)
            .ok_or_else(|| format!("topic {name} has no partition {}", r.partition_id))?;
        let mut next = partition.clone();
        if let Some(isr) = &r.isr {
            next.isr = isr.clone();
        }
        if let Some(replicas) = &r.replicas {
            next.replicas = replicas.clone();
        }
        if let Some(removing) = &r.removing_replicas {
            next.removing_replicas = removing.clone();
        }
        if let Some(adding) = &r.adding_replicas {
            next.adding_replicas = adding.clone();
        }
        if r.leader_recovery_state != -1 {
            next.leader_recovery_state = r.leader_recovery_state;
        }
        if let Some(elr) = &r.eligible_leader_replicas {
            next.elr = elr.clone();
        }
        if let Some(last) = &r.last_known_elr {
            next.last_known_elr = last.clone();
        }
        if let Some(dirs) = &r.directories {
            next.directories = dirs.clone();
        }
        // Kafka's PartitionRegistration.merge: a leader change starts a new leader epoch;
        // every change is a new partition epoch.
        if r.leader != LEADER_UNCHANGED {
            next.leader = r.leader;
            next.leader_epoch += 1;
        }
        next.partition_epoch += 1;
        check_partition(&next).map_err(|e| format!("{name}-{}: {e}", r.partition_id))?;
        *partition = next;
        Ok(())
    }

    fn set_config(&mut self, r: &ConfigRecord) {
        let resource = ConfigResource {
            resource_type: r.resource_type,
            name: r.resource_name.clone(),
        };
        match &r.value {
            Some(value) => {
                self.configs
                    .entry(resource)
                    .or_default()
                    .insert(r.name.clone(), value.clone());
            }
            None => {
                if let Some(configs) = self.configs.get_mut(&resource) {
                    configs.remove(&r.name);
                    if configs.is_empty() {
                        self.configs.remove(&resource);
                    }
                }
            }
        }
    }

    /// The image as the records of a snapshot, in Kafka's order.
    pub fn to_records(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        // metadata.version first, as every log and snapshot begins.
        let mut features: Vec<(&String, &i16)> = self.features.iter().collect();
        features.sort_by_key(|(name, _)| name.as_str() != METADATA_VERSION_FEATURE);
        for (name, level) in features {
            out.push(MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name: name.clone(),
                feature_level: *level,
            }));
        }
        for broker in self.brokers.values() {
            out.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                broker_id: broker.id,
                is_migrating_zk_broker: false,
                incarnation_id: broker.incarnation_id,
                broker_epoch: broker.epoch,
                end_points: broker
                    .listeners
                    .iter()
                    .map(|l| BrokerEndpoint {
                        name: l.name.clone(),
                        host: l.host.clone(),
                        port: l.port,
                        security_protocol: l.security_protocol,
                    })
                    .collect(),
                features: broker
                    .features
                    .iter()
                    .map(|(name, (min, max))| BrokerFeature {
                        name: name.clone(),
                        min_supported_version: *min,
                        max_supported_version: *max,
                    })
                    .collect(),
                rack: broker.rack.clone(),
                fenced: broker.fenced,
                in_controlled_shutdown: broker.in_controlled_shutdown,
                log_dirs: broker.log_dirs.clone(),
            }));
        }
        // Topics by name, so that snapshots of equal images are equal bytes.
        for id in self.topic_ids.values() {
            let topic = &self.topics[id];
            out.push(MetadataRecord::Topic(TopicRecord {
                name: topic.name.clone(),
                topic_id: topic.id,
            }));
            for (index, p) in &topic.partitions {
                out.push(MetadataRecord::Partition(partition_record(
                    topic.id, *index, p,
                )));
            }
        }
        for (resource, configs) in &self.configs {
            for (name, value) in configs {
                out.push(MetadataRecord::Config(ConfigRecord {
                    resource_type: resource.resource_type,
                    resource_name: resource.name.clone(),
                    name: name.clone(),
                    value: Some(value.clone()),
                }));
            }
        }
        if self.next_producer_id > 0 {
            out.push(MetadataRecord::ProducerIds(ProducerIdsRecord {
                broker_id: -1,
                broker_epoch: -1,
                next_producer_id: self.next_producer_id,
            }));
        }
        out
    }

    /// The invariants of the module docs; `Err` names the first broken one.
    pub fn check(&self) -> Result<(), String> {
        if self.topics.len() != self.topic_ids.len() {
            return Err(format!(
                "{} topics by id but {} by name",
                self.topics.len(),
                self.topic_ids.len()
            ));
        }
        for (name, id) in &self.topic_ids {
            let topic = self
                .topics
                .get(id)
                .ok_or_else(|| format!("topic {name} names a missing id"))?;
            if &topic.name != name || topic.id != *id {
                return Err(format!("topic {name} is filed as {}", topic.name));
            }
            for (expected, (index, p)) in topic.partitions.iter().enumerate() {
                if *index != expected as i32 {
                    return Err(format!("topic {name} skips partition {expected}"));
                }
                check_partition(p).map_err(|e| format!("{name}-{index}: {e}"))?;
            }
        }
        Ok(())
    }
}

impl MetadataImage {
    /// [`MetadataImage::check`] limited to what `records` touched (the topics they name), in
    /// time proportional to them rather than to the image: the controller runs it after
    /// every write.
    pub fn check_touched(&self, records: &[MetadataRecord]) -> Result<(), String> {
        if self.topics.len() != self.topic_ids.len() {
            return Err(format!(
                "{} topics by id but {} by name",
                self.topics.len(),
                self.topic_ids.len()
            ));
        }
        for record in records {
            let id = match record {
                MetadataRecord::Topic(r) => {
                    if self.topic_ids.get(&r.name) != Some(&r.topic_id) {
                        return Err(format!("topic {} is not filed under its id", r.name));
                    }
                    r.topic_id
                }
                MetadataRecord::Partition(r) => r.topic_id,
                MetadataRecord::PartitionChange(r) => r.topic_id,
                MetadataRecord::RemoveTopic(r) => {
                    if self.topics.contains_key(&r.topic_id) {
                        return Err(format!(
                            "removed topic {} is still there",
                            r.topic_id.to_base64()
                        ));
                    }
                    continue;
                }
                _ => continue,
            };
            let topic = self.topics.get(&id).ok_or_else(|| {
                format!("a record names topic {}, which is missing", id.to_base64())
            })?;
            if self.topic_ids.get(&topic.name) != Some(&id) {
                return Err(format!("topic {} is filed under another id", topic.name));
            }
            for (expected, (index, p)) in topic.partitions.iter().enumerate() {
                if *index != expected as i32 {
                    return Err(format!("topic {} skips partition {expected}", topic.name));
                }
                check_partition(p).map_err(|e| format!("{}-{index}: {e}", topic.name))?;
            }
        }
        Ok(())
    }
}

/// A partition's record, whole.
pub fn partition_record(topic_id: Uuid, index: i32, p: &PartitionRegistration) -> PartitionRecord {
    PartitionRecord {
        partition_id: index,
        topic_id,
        replicas: p.replicas.clone(),
        isr: p.isr.clone(),
        removing_replicas: p.removing_replicas.clone(),
        adding_replicas: p.adding_replicas.clone(),
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        directories: p.directories.clone(),
        leader_recovery_state: p.leader_recovery_state,
        eligible_leader_replicas: (!p.elr.is_empty()).then(|| p.elr.clone()),
        last_known_elr: (!p.last_known_elr.is_empty()).then(|| p.last_known_elr.clone()),
    }
}

fn check_partition(p: &PartitionRegistration) -> Result<(), String> {
    if p.replicas.is_empty() {
        return Err("no replicas".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for r in &p.replicas {
        if !seen.insert(*r) {
            return Err(format!("replica {r} twice in {:?}", p.replicas));
        }
    }
    for r in p.isr.iter().chain(&p.elr) {
        if !seen.contains(r) {
            return Err(format!(
                "in-sync or eligible replica {r} is not a replica ({:?})",
                p.replicas
            ));
        }
    }
    // Each replica at most once across the ISR and the ELR: twice in one, or in both.
    let mut members = std::collections::BTreeSet::new();
    for r in p.isr.iter().chain(&p.elr) {
        if !members.insert(*r) {
            return Err(format!(
                "replica {r} twice in the ISR {:?} and ELR {:?}",
                p.isr, p.elr
            ));
        }
    }
    if p.leader != NO_LEADER && !p.isr.contains(&p.leader) {
        return Err(format!("leader {} is not in the ISR {:?}", p.leader, p.isr));
    }
    if !p.directories.is_empty() && p.directories.len() != p.replicas.len() {
        return Err(format!(
            "{} directories for {} replicas",
            p.directories.len(),
            p.replicas.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "image_tests.rs"]
mod tests;
