//! What a broker tells clients about the cluster, read from the metadata image it applied
//! last (Kafka's `KRaftMetadataCache`): the brokers a client may reach, each at its listener
//! of the name this broker's clients use, and each partition's leader, replicas and ISR.
//!
//! Invariants: a broker is named only while it is registered, not fenced and not shutting
//! down; a partition's leader is named only when that broker is named too (else the
//! partition is LEADER_NOT_AVAILABLE, as Kafka answers for an offline leader); a broker
//! without an image yet (before its first publish, or with no controller) names itself only.

use crate::broker::Broker;
use crate::controller::image::MetadataImage;

/// A broker as clients reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerEndpoint {
    pub id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

/// A partition's leadership as clients are told it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionView {
    /// -1 when no reachable broker leads it.
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Replicas on brokers that are not reachable.
    pub offline: Vec<i32>,
}

/// The listener name this broker's clients use (its first advertised listener's).
pub(crate) fn listener_name(broker: &Broker) -> &str {
    broker
        .config
        .advertised_listeners
        .first()
        .map(|l| l.name.as_str())
        .unwrap_or("PLAINTEXT")
}

/// This broker as its own clients reach it.
fn own_endpoint(broker: &Broker) -> Option<BrokerEndpoint> {
    broker
        .config
        .advertised_listeners
        .first()
        .map(|l| BrokerEndpoint {
            id: broker.config.node_id,
            host: l.host.clone(),
            port: l.port,
            rack: None,
        })
}

/// `id`'s endpoint in `image`, if it is reachable.
fn endpoint_in(image: &MetadataImage, name: &str, id: i32) -> Option<BrokerEndpoint> {
    let registration = image.brokers.get(&id)?;
    if !registration.is_active() {
        return None;
    }
    let listener = registration
        .listener(name)
        .or_else(|| registration.listeners.first())?;
    Some(BrokerEndpoint {
        id,
        host: listener.host.clone(),
        port: listener.port,
        rack: registration.rack.clone(),
    })
}

/// Every reachable broker, by id.
pub fn live_brokers(broker: &Broker) -> Vec<BrokerEndpoint> {
    let Some(image) = broker.image() else {
        return own_endpoint(broker).into_iter().collect();
    };
    let name = listener_name(broker);
    image
        .brokers
        .keys()
        .filter_map(|id| endpoint_in(&image, name, *id))
        .collect()
}

/// Broker `id`'s endpoint, if it is reachable.
pub fn endpoint(broker: &Broker, id: i32) -> Option<BrokerEndpoint> {
    match broker.image() {
        Some(image) => endpoint_in(&image, listener_name(broker), id),
        None if id == broker.config.node_id => own_endpoint(broker),
        None => None,
    }
}

/// `topic`-`partition` as clients are told it; None when the image does not hold it (and
/// there is an image).
pub fn partition(broker: &Broker, topic: &str, index: i32) -> Option<PartitionView> {
    let node_id = broker.config.node_id;
    let Some(image) = broker.image() else {
        return Some(PartitionView {
            leader: node_id,
            leader_epoch: 0,
            replicas: vec![node_id],
            isr: vec![node_id],
            offline: Vec::new(),
        });
    };
    let registration = image.partition(topic, index)?;
    let reachable = |id: i32| image.brokers.get(&id).is_some_and(|b| b.is_active());
    let leader = if registration.has_leader() && reachable(registration.leader) {
        registration.leader
    } else {
        -1
    };
    Some(PartitionView {
        leader,
        leader_epoch: registration.leader_epoch,
        replicas: registration.replicas.clone(),
        isr: registration.isr.clone(),
        offline: registration
            .replicas
            .iter()
            .copied()
            .filter(|id| !reachable(*id))
            .collect(),
    })
}

/// KIP-951's hint for a request that reached a broker that does not lead `topic`-`index`:
/// the leader the image names, its epoch and its endpoint (Produce v10+ and Fetch v12+
/// carry the leader, Produce v10+ and Fetch v16+ the endpoints), so that a client moves to
/// it at once instead of after a metadata refresh. None when the image names no reachable
/// leader, or names this broker itself (nothing better to tell).
pub fn leader_hint(broker: &Broker, topic: &str, index: i32) -> Option<(i32, i32, BrokerEndpoint)> {
    let view = partition(broker, topic, index)?;
    if view.leader < 0 || view.leader == broker.config.node_id {
        return None;
    }
    let endpoint = endpoint(broker, view.leader)?;
    Some((view.leader, view.leader_epoch, endpoint))
}
