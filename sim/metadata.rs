//! The controller above the metadata quorum under madsim (issue 14): every voter of the
//! quorum suite (`quorum.rs`) also runs the controller (`samsa::controller::driver`) over its
//! replica, and admin clients on the clients' node speak the controller APIs over simulated
//! TCP to any voter (a standby answers NOT_CONTROLLER and the client tries another): each
//! client is a broker of its own that registers, heartbeats (and now and then falls silent
//! past the session timeout, so that it is fenced and its partitions change leader), creates,
//! grows and deletes topics, changes their configs and asks for producer-id blocks.
//!
//! The image checker (here, next to the quorum's checkers):
//! - every image a controller published at applied offset `o` equals a replay of the
//!   committed log up to `o` (the reference: the best voter's log below the final high
//!   watermark, applied record by record into an empty image);
//! - after healing every running controller applied the whole committed log;
//! - acknowledged producer-id blocks never overlap; an acknowledged topic creation is a
//!   TopicRecord of that name and id in the committed log; an acknowledged registration's
//!   epoch is the offset of that broker's RegisterBrokerRecord there.
//!
//! Snapshots are off in these suites (the register's chain checks do not read the
//! controller's snapshots); they are tested on real files in `tests/cluster`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::Rng;
use samsa::broker::config::BrokerConfig;
use samsa::client::connection::{Connection, ConnectionLimits};
use samsa::controller::core::{ControllerBugs, ControllerConfig};
use samsa::controller::driver::{self as controller_driver, ControllerHandle};
use samsa::controller::image::MetadataImage;
use samsa::controller::policy::BrokerConfigPolicy;
use samsa::controller::records::MetadataRecord;
use samsa::protocol::allocate_producer_ids::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse,
};
use samsa::protocol::broker_heartbeat::BrokerHeartbeatResponse;
use samsa::protocol::broker_registration::BrokerRegistrationResponse;
use samsa::protocol::create_partitions::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopic,
};
use samsa::protocol::create_topics::{CreatableTopic, CreateTopicsRequest, CreateTopicsResponse};
use samsa::protocol::delete_topics::{DeleteTopicState, DeleteTopicsRequest, DeleteTopicsResponse};
use samsa::protocol::incremental_alter_configs::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use samsa::protocol::types::NodeId;
use samsa::protocol::wire::Uuid;
use samsa::raft::driver::{ForwardedRequest, RaftHandle};
use samsa::raft::message::RaftRecord;
use samsa::rt::time::{self, Duration};
use tokio::sync::mpsc;

use crate::controller_requests::{caught_up_heartbeat, registration};

/// Images one seed keeps for the checker, at most (one per controller per applied batch).
pub const IMAGE_SAMPLES_MAX: usize = 50_000;
/// The session timeout of the simulated brokers (Kafka's default is 9 s; shorter so that
/// fencing happens within a run).
pub const SESSION_TIMEOUT_MS: u64 = 2_000;
/// How long an admin client waits for one answer.
const REQUEST_TIMEOUT_MS: u64 = 2_000;
/// Topic names the clients draw from, so that creations collide with deletions.
const TOPIC_NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
const NOT_CONTROLLER: i16 = 41;

#[derive(Clone, Copy, Debug)]
pub struct MetadataOptions {
    pub admin_clients: usize,
    pub bugs: ControllerBugs,
}

/// Published images: (node, applied offset) -> one per incarnation that applied it.
type Samples = BTreeMap<(i32, i64), Vec<Arc<MetadataImage>>>;
/// Published images by applied offset: (node, image).
type ByOffset = BTreeMap<i64, Vec<(i32, Arc<MetadataImage>)>>;

/// What the controllers and admin clients recorded.
#[derive(Default)]
pub struct MetadataShared {
    /// (node, applied offset) -> the images published there (one per incarnation that
    /// applied it).
    samples: Mutex<Samples>,
    sample_count: Mutex<usize>,
    controllers: Mutex<BTreeMap<i32, ControllerHandle>>,
    /// Acknowledged producer-id blocks: (first id, length).
    blocks: Mutex<Vec<(i64, i32)>>,
    /// Acknowledged creations: (name, id).
    created: Mutex<Vec<(String, Uuid)>>,
    /// Acknowledged registrations: (broker, epoch).
    registered: Mutex<Vec<(i32, i64)>>,
    pub requests: Mutex<(u64, u64)>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Starts the controller of voter `id` over its replica, and a task that records every image
/// it publishes.
pub fn start_controller(
    id: i32,
    raft: RaftHandle,
    forwarded: mpsc::Receiver<ForwardedRequest>,
    options: MetadataOptions,
    shared: Arc<MetadataShared>,
) {
    let config = ControllerConfig {
        session_timeout_ms: SESSION_TIMEOUT_MS,
        bugs: options.bugs,
        ..ControllerConfig::new(id, "sim", samsa::rt::rand::random_u64())
    };
    let policy = Arc::new(BrokerConfigPolicy {
        broker: Arc::new(BrokerConfig::default()),
    });
    let node = controller_driver::start(raft, config, policy, Some(forwarded));
    let handle = node.handle.clone();
    lock(&shared.controllers).insert(id, handle.clone());
    samsa::rt::task::spawn(async move {
        let mut last = -1;
        loop {
            let published = match handle
                .wait_for(Duration::from_secs(1), |p| p.applied_offset != last)
                .await
            {
                Ok(p) => p,
                Err(_) => continue,
            };
            last = published.applied_offset;
            let mut count = lock(&shared.sample_count);
            if *count < IMAGE_SAMPLES_MAX {
                *count += 1;
                lock(&shared.samples)
                    .entry((id, published.applied_offset))
                    .or_default()
                    .push(published.image);
            }
        }
    });
    samsa::rt::task::spawn(async move {
        match node.task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("controller {id} stopped: {e}"),
            Err(_) => {}
        }
    });
}

/// The controller of voter `id` is gone with its node.
pub fn forget_controller(shared: &MetadataShared, id: i32) {
    lock(&shared.controllers).remove(&id);
}

/// One admin client: a broker of id `broker_id` that registers, heartbeats and sends admin
/// requests to the voters at `voters` until `stop`.
pub async fn admin_client(
    shared: Arc<MetadataShared>,
    broker_id: i32,
    voters: Vec<(IpAddr, u16)>,
    mut rng: SmallRng,
    stop: Arc<AtomicBool>,
) {
    let incarnation = Uuid([broker_id as u8; 16]);
    let mut epoch: Option<i64> = None;
    let mut conn: Option<Connection> = None;
    let mut target = *voters.choose(&mut rng).expect("voters");
    let limits = ConnectionLimits {
        request_timeout_ms: REQUEST_TIMEOUT_MS,
        connect_timeout_ms: REQUEST_TIMEOUT_MS,
        ..ConnectionLimits::default()
    };
    while !stop.load(Ordering::Acquire) {
        // Mostly busy; now and then silent past the session timeout.
        let pause_ms = if rng.gen_bool(0.01) {
            SESSION_TIMEOUT_MS * 2
        } else {
            rng.gen_range(20..300)
        };
        time::sleep(Duration::from_millis(pause_ms)).await;
        if conn.is_none() {
            let addr = format!("{}:{}", target.0, target.1);
            match Connection::connect(&addr, &format!("admin-{broker_id}"), limits.clone()).await {
                Ok(c) => conn = Some(c),
                Err(_) => {
                    target = *voters.choose(&mut rng).expect("voters");
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let outcome = match epoch {
            None => register(c, broker_id, incarnation).await.map(|r| {
                if let Some(e) = r {
                    lock(&shared.registered).push((broker_id, e));
                    epoch = Some(e);
                }
                r.is_some()
            }),
            Some(e) => match rng.gen_range(0..100) {
                0..=39 => heartbeat(c, broker_id, e).await.map(|stale| {
                    if stale {
                        epoch = None;
                    }
                    !stale
                }),
                40..=54 => create(c, &mut rng).await.map(|created| {
                    if let Some(t) = created {
                        lock(&shared.created).push(t);
                        true
                    } else {
                        false
                    }
                }),
                55..=64 => delete(c, &mut rng).await,
                65..=74 => alter(c, &mut rng).await,
                75..=79 => grow(c, &mut rng).await,
                _ => allocate(c, broker_id, e).await.map(|block| match block {
                    Ok(b) => {
                        lock(&shared.blocks).push(b);
                        true
                    }
                    Err(stale) => {
                        if stale {
                            epoch = None;
                        }
                        false
                    }
                }),
            },
        };
        let mut counts = lock(&shared.requests);
        counts.0 += 1;
        match outcome {
            Ok(true) => counts.1 += 1,
            Ok(false) => {}
            Err(Moved) => {
                conn = None;
                target = *voters.choose(&mut rng).expect("voters");
            }
        }
    }
}

/// The request went nowhere (a broken connection, NOT_CONTROLLER): try another voter.
struct Moved;

async fn send<Req, Resp>(c: &mut Connection, api_key: i16, request: &Req) -> Result<Resp, Moved>
where
    Req: samsa::protocol::message::Message,
    Resp: samsa::protocol::message::Message,
{
    let version = c.version_for(api_key).map_err(|_| Moved)?;
    c.send(api_key, version, request).await.map_err(|_| Moved)
}

fn moved_if_not_controller(code: i16) -> Result<(), Moved> {
    if code == NOT_CONTROLLER {
        Err(Moved)
    } else {
        Ok(())
    }
}

async fn register(
    c: &mut Connection,
    broker_id: i32,
    incarnation: Uuid,
) -> Result<Option<i64>, Moved> {
    let request = registration(
        broker_id,
        "sim",
        incarnation,
        &format!("broker-{broker_id}"),
    );
    let response: BrokerRegistrationResponse = send(c, 62, &request).await?;
    moved_if_not_controller(response.error_code)?;
    Ok((response.error_code == 0).then_some(response.broker_epoch))
}

/// Whether the epoch is stale (register again).
async fn heartbeat(c: &mut Connection, broker_id: i32, epoch: i64) -> Result<bool, Moved> {
    let request = caught_up_heartbeat(broker_id, epoch);
    let response: BrokerHeartbeatResponse = send(c, 63, &request).await?;
    moved_if_not_controller(response.error_code)?;
    Ok(is_stale(response.error_code))
}

/// STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED: the broker must register again.
fn is_stale(code: i16) -> bool {
    code == 77 || code == 105
}

async fn create(c: &mut Connection, rng: &mut SmallRng) -> Result<Option<(String, Uuid)>, Moved> {
    let name = *TOPIC_NAMES.choose(rng).expect("names");
    let request = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.into(),
            num_partitions: rng.gen_range(1..4),
            replication_factor: 1,
            ..Default::default()
        }],
        timeout_ms: 5_000,
        validate_only: false,
    };
    let response: CreateTopicsResponse = send(c, 19, &request).await?;
    let topic = response.topics.first().ok_or(Moved)?;
    moved_if_not_controller(topic.error_code)?;
    Ok((topic.error_code == 0).then(|| (name.to_string(), topic.topic_id)))
}

async fn delete(c: &mut Connection, rng: &mut SmallRng) -> Result<bool, Moved> {
    let name = *TOPIC_NAMES.choose(rng).expect("names");
    let request = DeleteTopicsRequest {
        topics: vec![DeleteTopicState {
            name: Some(name.into()),
            topic_id: Uuid::ZERO,
        }],
        topic_names: vec![name.into()],
        timeout_ms: 5_000,
    };
    let response: DeleteTopicsResponse = send(c, 20, &request).await?;
    let result = response.responses.first().ok_or(Moved)?;
    moved_if_not_controller(result.error_code)?;
    Ok(result.error_code == 0)
}

async fn alter(c: &mut Connection, rng: &mut SmallRng) -> Result<bool, Moved> {
    let name = *TOPIC_NAMES.choose(rng).expect("names");
    let (op, key, value) = match rng.gen_range(0..3) {
        0 => (0, "retention.ms", rng.gen_range(1_000..100_000).to_string()),
        1 => (1, "retention.ms", String::new()),
        _ => (2, "cleanup.policy", "compact".to_string()),
    };
    let request = IncrementalAlterConfigsRequest {
        resources: vec![AlterConfigsResource {
            resource_type: 2,
            resource_name: name.into(),
            configs: vec![AlterableConfig {
                name: key.into(),
                config_operation: op,
                value: (op != 1).then_some(value),
            }],
        }],
        validate_only: false,
    };
    let response: IncrementalAlterConfigsResponse = send(c, 44, &request).await?;
    let result = response.responses.first().ok_or(Moved)?;
    moved_if_not_controller(result.error_code)?;
    Ok(result.error_code == 0)
}

async fn grow(c: &mut Connection, rng: &mut SmallRng) -> Result<bool, Moved> {
    let name = *TOPIC_NAMES.choose(rng).expect("names");
    let request = CreatePartitionsRequest {
        topics: vec![CreatePartitionsTopic {
            name: name.into(),
            count: rng.gen_range(2..6),
            assignments: None,
        }],
        timeout_ms: 5_000,
        validate_only: false,
    };
    let response: CreatePartitionsResponse = send(c, 37, &request).await?;
    let result = response.results.first().ok_or(Moved)?;
    moved_if_not_controller(result.error_code)?;
    Ok(result.error_code == 0)
}

/// A block, or whether the refusal says the epoch is stale.
async fn allocate(
    c: &mut Connection,
    broker_id: i32,
    epoch: i64,
) -> Result<Result<(i64, i32), bool>, Moved> {
    let request = AllocateProducerIdsRequest {
        broker_id: NodeId(broker_id),
        broker_epoch: epoch,
    };
    let response: AllocateProducerIdsResponse = send(c, 67, &request).await?;
    moved_if_not_controller(response.error_code)?;
    Ok(match response.error_code {
        0 => Ok((response.producer_id_start, response.producer_id_len)),
        code => Err(is_stale(code)),
    })
}

/// Admin requests sent, those that succeeded, and images compared (for the suite's summary).
pub fn counts(shared: &MetadataShared) -> (u64, u64, usize) {
    let (sent, ok) = *lock(&shared.requests);
    (sent, ok, *lock(&shared.sample_count))
}

/// The image checker over the committed log `log` (offset, epoch, record; from offset 0)
/// below `committed`.
pub async fn check(
    shared: &MetadataShared,
    log: &[(i64, i32, RaftRecord)],
    committed: i64,
    wait: Duration,
) -> Vec<String> {
    let mut anomalies = Vec::new();
    if log.first().is_some_and(|(at, _, _)| *at != 0) {
        anomalies.push("image-check: the reference log does not start at 0".to_string());
        return anomalies;
    }
    // Convergence: every running controller applies the whole committed log.
    let controllers: Vec<(i32, ControllerHandle)> = lock(&shared.controllers)
        .iter()
        .map(|(id, h)| (*id, h.clone()))
        .collect();
    for (id, handle) in &controllers {
        if let Err(p) = handle
            .wait_for(wait, |p| p.applied_offset >= committed - 1)
            .await
        {
            anomalies.push(format!(
                "not-converged: controller {id} applied up to {} of {committed} committed offsets",
                p.applied_offset
            ));
        }
    }
    // Every published image against the replay.
    let samples = std::mem::take(&mut *lock(&shared.samples));
    let mut by_offset: ByOffset = BTreeMap::new();
    for ((node, offset), images) in samples {
        for image in images {
            by_offset.entry(offset).or_default().push((node, image));
        }
    }
    let mut reference = MetadataImage::empty();
    let mut topic_records: BTreeMap<(String, Uuid), i64> = BTreeMap::new();
    let mut registrations: BTreeMap<(i32, i64), ()> = BTreeMap::new();
    let compare = |offset: i64,
                   reference: &MetadataImage,
                   anomalies: &mut Vec<String>,
                   by_offset: &ByOffset| {
        for (node, image) in by_offset.get(&offset).into_iter().flatten() {
            if **image != *reference {
                anomalies.push(format!(
                    "image-differs: controller {node}'s image at applied offset {offset} is not the replay of the committed log"
                ));
            }
        }
    };
    compare(-1, &reference, &mut anomalies, &by_offset);
    for (offset, epoch, record) in log.iter().filter(|(at, _, _)| *at < committed) {
        if let RaftRecord::Data(bytes) = record {
            let record = match MetadataRecord::decode(bytes.clone()) {
                Ok(r) => r,
                Err(e) => {
                    anomalies.push(format!("image-check: offset {offset} does not decode: {e}"));
                    return anomalies;
                }
            };
            match &record {
                MetadataRecord::Topic(t) => {
                    topic_records.insert((t.name.clone(), t.topic_id), *offset);
                }
                MetadataRecord::RegisterBroker(r) => {
                    registrations.insert((r.broker_id, r.broker_epoch), ());
                }
                _ => {}
            }
            if let Err(e) = reference.replay(*offset, *epoch, &record) {
                anomalies.push(format!(
                    "image-check: the committed log does not replay: {e}"
                ));
                return anomalies;
            }
        }
        compare(*offset, &reference, &mut anomalies, &by_offset);
    }
    if let Some((offset, _)) = by_offset.range(committed..).next() {
        anomalies.push(format!(
            "image-ahead: a controller published an image at offset {offset}, past the committed {committed}"
        ));
    }
    // What the clients were told.
    let mut blocks = lock(&shared.blocks).clone();
    blocks.sort_unstable();
    for pair in blocks.windows(2) {
        if pair[1].0 < pair[0].0 + i64::from(pair[0].1) {
            anomalies.push(format!(
                "producer-ids-overlap: blocks {:?} and {:?} were both handed out",
                pair[0], pair[1]
            ));
        }
    }
    for (name, id) in lock(&shared.created).iter() {
        if !topic_records.contains_key(&(name.clone(), *id)) {
            anomalies.push(format!(
                "lost-topic: the creation of '{name}' ({}) was acknowledged but is not in the committed log",
                id.to_base64()
            ));
        }
    }
    for (broker, epoch) in lock(&shared.registered).iter() {
        if !registrations.contains_key(&(*broker, *epoch)) {
            anomalies.push(format!(
                "lost-registration: broker {broker} was given epoch {epoch}, which no committed RegisterBrokerRecord holds"
            ));
        }
    }
    anomalies
}
