//! The broker's metadata publisher (Kafka's `BrokerMetadataPublisher`): it makes this node's
//! log manager ([`Topics`]), its dynamic broker configs and its partitions' leadership what
//! the committed metadata image says, one whole image at a time, and then publishes the
//! image's offset as applied (which the controller channel waits for and the lifecycle
//! reports in its heartbeats).
//!
//! What it does per image, in this order: local topics the image does not hold under their
//! id are deleted (a topic deleted and created again has another id); topics of the image
//! that this node lacks are created with the image's id and partition count; topics that
//! have fewer partitions here are grown; overrides that differ are replaced; the broker
//! resource's configs (the cluster default `""` and this node's id) become the dynamic
//! layers; each partition's replication core takes the image's state of it (leader,
//! follower, or neither when this node is not registered or fenced), and the replica
//! fetchers follow (see [`crate::replication::fetcher`]).
//!
//! Invariants: an image is applied whole before its offset is published as applied, and
//! offsets published only grow; a step that fails (a disk error, a config the local rules
//! refuse) is reported and retried with the next image, never half-published.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::broker::dynamic_config::Layers;
use crate::broker::topics::NewTopic;
use crate::broker::Broker;
use crate::controller::image::{ConfigResource, MetadataImage};
use crate::coordinator::driver::OFFSETS_TOPIC;
use crate::replication::replica::{BrokerState, PartitionState};
use crate::rt::watch::Watched;

/// Told of each image once it is applied whole, with the offset it was published at (the
/// simulation records what the image said of this node's leadership).
pub type PublishObserver = Arc<dyn Fn(i64, &MetadataImage) + Send + Sync>;

/// Applies images to one broker.
pub struct MetadataPublisher {
    broker: Arc<Broker>,
    /// The offset of the last image applied whole (-1 before the first).
    applied: Arc<Watched<i64>>,
    observer: Option<PublishObserver>,
    /// The last image applied whole: a topic whose entry is the same `Arc` there and whose
    /// overrides are equal was applied already and is skipped (images share unchanged
    /// topics), so that a publish costs what changed, not every topic's lookups.
    last: std::sync::Mutex<Option<Arc<MetadataImage>>>,
    /// Set once the coordinator was told to load `__consumer_offsets`.
    coordinator_loading: std::sync::atomic::AtomicBool,
}

impl MetadataPublisher {
    pub fn new(broker: Arc<Broker>, observer: Option<PublishObserver>) -> MetadataPublisher {
        MetadataPublisher {
            broker,
            applied: Arc::new(Watched::new(-1)),
            observer,
            last: std::sync::Mutex::new(None),
            coordinator_loading: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The applied offset, to wait on.
    pub fn applied(&self) -> Arc<Watched<i64>> {
        self.applied.clone()
    }

    /// Makes the node what `image` says; publishes `applied_offset` (the metadata log's
    /// offset the image reflects: at or past the image's last record) once all of it is in
    /// force.
    pub async fn publish(
        &self,
        image: &Arc<MetadataImage>,
        applied_offset: i64,
    ) -> Result<(), String> {
        assert!(
            applied_offset >= image.offset,
            "an image ahead of the offset it is published at"
        );
        let broker = &self.broker;
        let node_id = broker.config.node_id;
        let topics = &broker.topics;
        let last = self
            .last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        // Deletions first: a topic deleted and created again under the same name has
        // another id, and its old partitions go before the new ones come.
        for local in topics.list().await {
            if image.topic_ids.get(&local.name) != Some(&local.id) {
                topics
                    .apply_delete(&local.name)
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        for topic in image.topics.values() {
            if let Some(last) = &last {
                let unchanged = last
                    .topics
                    .get(&topic.id)
                    .is_some_and(|before| Arc::ptr_eq(before, topic))
                    && last.configs.get(&ConfigResource::topic(&topic.name))
                        == image.configs.get(&ConfigResource::topic(&topic.name));
                if unchanged {
                    continue;
                }
            }
            let count = i32::try_from(topic.partitions.len())
                .map_err(|_| format!("topic '{}' has too many partitions", topic.name))?;
            let overrides = image.configs_of(&ConfigResource::topic(&topic.name));
            match topics.get(&topic.name).await {
                None => {
                    let new = NewTopic {
                        id: Some(topic.id),
                        name: topic.name.clone(),
                        partitions: Some(count),
                        replication_factor: Some(1),
                        overrides,
                    };
                    topics.apply_create(new).await.map_err(|e| e.to_string())?;
                }
                Some(local) => {
                    if (local.partitions.len() as i32) < count {
                        topics
                            .apply_create_partitions(&topic.name, count, false)
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                    if local.overrides != overrides {
                        topics
                            .apply_alter_overrides(&topic.name, |_| overrides.clone(), false)
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                }
            }
        }
        let layers = Layers {
            cluster_default: image.configs_of(&ConfigResource::broker(None)),
            node: image.configs_of(&ConfigResource::broker(Some(node_id))),
        };
        broker
            .dynamic
            .apply_layers(topics, layers)
            .await
            .map_err(|e| e.to_string())?;
        let registered = image
            .brokers
            .get(&node_id)
            .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown);
        let (mut leading, mut changed) = (0usize, 0usize);
        let partitions = topics.partitions().await;
        // `__consumer_offsets` partitions this broker leads again: their groups are loaded
        // anew from the log, as a Kafka coordinator loads them on its election.
        let mut regained: Vec<Arc<crate::broker::partition::Partition>> = Vec::new();
        // `__consumer_offsets` partitions this broker stops leading: their groups unload.
        let mut lost: Vec<i32> = Vec::new();
        let brokers: BTreeMap<i32, BrokerState> = image
            .brokers
            .values()
            .map(|b| {
                (
                    b.id,
                    BrokerState {
                        epoch: b.epoch,
                        eligible: b.is_active(),
                    },
                )
            })
            .collect();
        let now_ms = broker.monotonic_ms();
        for partition in &partitions {
            let registration = image.partition(&partition.topic, partition.index);
            let leads = registered && registration.is_some_and(|p| p.leader == node_id);
            // The planted bug keeps what was once given.
            let keep = broker.config.bugs.serve_after_fenced && partition.is_leading() && !leads;
            let leads = leads || keep;
            changed += usize::from(partition.is_leading() != leads);
            leading += usize::from(leads);
            // Leading still (or again), but at a new leader epoch: another leader may have
            // led it in between, unseen by this broker (cut off from the quorum, it applies
            // the newer image at once), and written groups this broker's shard never saw.
            // Kafka's coordinator reloads on every election; so does this one.
            let epoch_moved = leads
                && partition.is_leading()
                && registration.is_some_and(|p| p.leader_epoch != partition.leader_epoch());
            if partition.topic == OFFSETS_TOPIC {
                if leads && (!partition.is_leading() || epoch_moved) {
                    regained.push(partition.clone());
                }
                if partition.is_leading() && (!leads || epoch_moved) {
                    lost.push(partition.index);
                }
            }
            if !keep {
                // A fenced or unregistered broker neither leads nor follows.
                let state = registration.filter(|_| registered).map(|p| PartitionState {
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    elr: p.elr.clone(),
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                });
                partition.apply_metadata(now_ms, state, brokers.clone());
            }
        }
        if changed > 0 {
            tracing::info!(
                leading,
                partitions = partitions.len(),
                changed,
                registered,
                offset = applied_offset,
                "partition leadership from the metadata image"
            );
        }
        assert!(
            applied_offset >= self.applied.get(),
            "metadata images applied out of order"
        );
        *self
            .last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(image.clone());
        broker.set_image(image.clone());
        for index in lost {
            broker.coordinator.resign(index).await;
        }
        // `__consumer_offsets` created through another broker: this broker's coordinator
        // loads its partitions here too (once; a load already done returns at once), in the
        // background, as at a start. Only once this broker is registered and unfenced: before
        // that it leads none of them, every read of the load fails and the shards would stay
        // unloaded (NOT_COORDINATOR) after a restart.
        if registered
            && image.topic(OFFSETS_TOPIC).is_some()
            && !self
                .coordinator_loading
                .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            let owner = broker.clone();
            crate::rt::task::spawn(async move {
                // A load already made (at the start, perhaps while this broker led nothing)
                // is made again for the partitions it leads now.
                if !owner.coordinator.load(&owner.topics).await {
                    for partition in regained {
                        owner.coordinator.reload(partition).await;
                    }
                }
            });
        } else if !regained.is_empty() {
            let owner = broker.clone();
            crate::rt::task::spawn(async move {
                for partition in regained {
                    owner.coordinator.reload(partition).await;
                }
            });
        }
        self.applied.set(applied_offset);
        if let Some(observer) = &self.observer {
            observer(applied_offset, image);
        }
        Ok(())
    }
}
