//! Partition replication on three `samsa broker` processes (combined nodes, as
//! `broker_processes` runs them): a topic of six partitions, replication factor 3 and
//! `min.insync.replicas=2`, placed by explicit replica assignments (sent to the active
//! controller's listener) so that one broker that is not the active controller follows every
//! partition and leads none. An idempotent acks=all librdkafka producer writes keyed records
//! without pause while that follower is killed with SIGKILL: its partitions' ISRs shrink to
//! the two others (`samsa topics describe` through each live broker; its kafka-topics.sh
//! reports list every partition under-replicated and at min ISR, none under min ISR or
//! unavailable) and acks=all goes on with two. Restarted on its data directory, the follower catches up and rejoins every ISR
//! (the time it took is printed); the producer goes on with three. Then an assigned consumer
//! reads every partition from offset 0 to its high watermark: every acknowledged record is
//! there exactly once, at the offset its delivery report gave, and each partition holds its
//! acknowledged records in the order they were acknowledged; a record whose delivery failed
//! may be missing (never lost: it was never acknowledged) but never appears twice, and each
//! key's sequence numbers only grow along its partition.
//!
//! The failover tests place every partition with one broker as its preferred leader and
//! take that broker away under the same producer and a confluent-kafka group member whose
//! coordinator is on that broker too (`group_member`): SIGKILL of a broker that is not the
//! active controller, SIGKILL of the active controller itself, and SIGSTOP past
//! `broker.session.timeout.ms`. The controller (a new one in the second case) fences it and
//! elects ISR members; the producer resumes in every partition and the member commits again
//! (the times from the fault, the longest gap between acknowledgements and the
//! acknowledgements per second around the fault are printed); restarted or resumed with
//! SIGCONT, the broker rejoins every ISR as a follower, and `samsa leader-election
//! --election-type preferred --all-topic-partitions` gives it its leaderships back (the tool's
//! report is checked, as is its failure on an unknown partition). The same read-back checks
//! follow, and the member's consumption is checked against the acknowledgements.
//! The rolling-restart test stops each broker in turn with SIGTERM under the producer and
//! restarts it: no delivery may fail, and a preferred election puts the leaders back.
//!
//! Invariants: every wait is bounded by a named limit; nothing here asserts on the time a
//! sleep took (the sleeps only pace the producer and the polls).
#![cfg(not(feature = "sim"))]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use samsa::client::connection::{Connection, ConnectionLimits};
use samsa::protocol::create_topics::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
    CreateTopicsResponse,
};
use samsa::protocol::types::NodeId;

use crate::group_member::{check_consumption, GroupMember};
use crate::process_cluster::{
    active_controller, client, leaders, samsa, sleep_poll, ProcessCluster, POLLS_MAX,
    REQUEST_TIMEOUT_MS,
};
use crate::rdkafka_support as rk;

const NODES: i32 = 3;
const TOPIC: &str = "replicated";
const PARTITIONS: i32 = 6;
const MIN_INSYNC_REPLICAS: &str = "2";
/// Distinct keys; librdkafka's partitioner spreads them over every partition.
const KEYS: usize = 64;
/// The producer's pace: `BURST` records every `BURST_MS` (about 1,000 records a second).
const BURST: usize = 5;
const BURST_MS: u64 = 5;
/// Records acknowledged in each partition in each phase: before the SIGKILL, while the
/// follower is down (after the ISRs shrank), and after it rejoined.
const ACKS_PER_PARTITION_PER_PHASE: usize = 300;
/// How long the acknowledgements of one phase may take (the first waits for the ISRs to
/// shrink, which takes `broker.session.timeout.ms`, 9 s).
const ACKS_WAIT_MS_MAX: u64 = 90_000;
/// The bound on the ISRs shrinking to two after the SIGKILL (the controller fences the
/// broker once its 9 s session expires; `replica.lag.time.max.ms` is 30 s).
const ISR_SHRINK_WAIT_MS_MAX: u64 = 60_000;
/// The bound on the restarted follower rejoining every ISR.
const REJOIN_WAIT_MS_MAX: u64 = 60_000;
/// The bound on the topic's first ISRs of three.
const TOPIC_READY_WAIT_MS_MAX: u64 = 60_000;
/// One poll of a bounded wait above.
const WAIT_POLL_MS: u64 = 50;
/// librdkafka's bound on one record's delivery (retries included): far above the stall
/// while the ISRs still hold the killed follower.
const MESSAGE_TIMEOUT_MS: &str = "120000";
/// The bound on the final flush.
const FLUSH_TIMEOUT_MS: u64 = 120_000;
/// The high watermarks' lookup before reading back.
const WATERMARKS_TIMEOUT_MS: u64 = 15_000;
/// Bytes of filler after a value's key, sequence number and index.
const FILLER_BYTES: usize = 64;

/// Record `index`'s key: one of `KEYS`, in turn.
fn key_of(index: usize) -> String {
    format!("key-{:02}", index % KEYS)
}

/// Record `index`'s value: its key, its sequence number among its key's records, its index,
/// and filler that depends on the index.
fn value_of(index: usize) -> String {
    let filler: String = (0..FILLER_BYTES)
        .map(|i| char::from(b'a' + ((index * 7 + i) % 26) as u8))
        .collect();
    format!(
        "{} seq {:08} index {index:08} {filler}",
        key_of(index),
        index / KEYS
    )
}

/// (key, sequence number, index) from a value [`value_of`] wrote.
fn parse_value(value: &[u8]) -> Option<(String, usize, usize)> {
    let text = std::str::from_utf8(value).ok()?;
    let mut words = text.split(' ');
    let key = words.next()?.to_string();
    (words.next()? == "seq").then_some(())?;
    let seq = words.next()?.parse().ok()?;
    (words.next()? == "index").then_some(())?;
    let index = words.next()?.parse().ok()?;
    Some((key, seq, index))
}

/// What the producer's delivery reports and error callbacks said, in the order they came.
#[derive(Default)]
struct Deliveries {
    /// (record index, partition, offset) of each acknowledged record, in acknowledgement
    /// order.
    acked: Vec<(usize, i32, i64)>,
    /// (record index, error) of each record whose delivery failed.
    failed: Vec<(usize, String)>,
    /// The client's error callbacks (a broker that is down, for one).
    errors: Vec<String>,
    /// When each acknowledgement of `acked` arrived.
    acked_at: Vec<Instant>,
}

impl Deliveries {
    fn acked_per_partition(&self) -> BTreeMap<i32, usize> {
        let mut out: BTreeMap<i32, usize> = (0..PARTITIONS).map(|p| (p, 0)).collect();
        for (_, p, _) in &self.acked {
            *out.entry(*p).or_default() += 1;
        }
        out
    }
}

struct Recorder(Arc<Mutex<Deliveries>>);

impl ClientContext for Recorder {
    /// With `SAMSA_TEST_RDKAFKA_DEBUG` (librdkafka's `debug` contexts, e.g. `metadata`),
    /// librdkafka's own log lines on stderr, stamped with the wall clock in milliseconds to
    /// line them up with the brokers' logs; otherwise none (they come from librdkafka's
    /// threads, which the test harness does not capture).
    // The wall clock is the point: it lines librdkafka's lines up with the brokers' logs.
    #[allow(clippy::disallowed_methods)]
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        if std::env::var_os("SAMSA_TEST_RDKAFKA_DEBUG").is_none() {
            return;
        }
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        eprintln!("librdkafka {at} {level:?} {fac}: {log_message}");
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.0
            .lock()
            .expect("the deliveries")
            .errors
            .push(format!("{error}: {reason}"));
    }
}

impl ProducerContext for Recorder {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, index: usize) {
        let mut d = self.0.lock().expect("the deliveries");
        match result {
            Ok(m) => {
                d.acked.push((index, m.partition(), m.offset()));
                d.acked_at.push(samsa::rt::time::now());
            }
            Err((e, _)) => d.failed.push((index, e.to_string())),
        }
    }
}

type IdempotentProducer = ThreadedProducer<Recorder>;

fn idempotent_producer(bootstrap: &str, deliveries: &Arc<Mutex<Deliveries>>) -> IdempotentProducer {
    let mut config = rk::client_config(bootstrap);
    if let Ok(contexts) = std::env::var("SAMSA_TEST_RDKAFKA_DEBUG") {
        config.set("debug", contexts);
    }
    config
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("message.timeout.ms", MESSAGE_TIMEOUT_MS)
        .create_with_context(Recorder(Arc::clone(deliveries)))
        .expect("create the idempotent producer")
}

/// Sends records 0, 1, 2, ... at the producer's pace until `stop`; how many it sent.
async fn produce_until(producer: Arc<IdempotentProducer>, stop: Arc<AtomicBool>) -> usize {
    let mut index = 0;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..BURST {
            let (key, value) = (key_of(index), value_of(index));
            loop {
                let record = BaseRecord::with_opaque_to(TOPIC, index)
                    .key(&key)
                    .payload(&value)
                    .timestamp(rk::now_ms());
                match producer.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _))
                        if !stop.load(Ordering::Relaxed) =>
                    {
                        samsa::rt::time::sleep(Duration::from_millis(BURST_MS)).await;
                    }
                    Err((e, _)) => panic!("enqueue record {index}: {e}"),
                }
            }
            index += 1;
        }
        samsa::rt::time::sleep(Duration::from_millis(BURST_MS)).await;
    }
    index
}

/// An idempotent producer sending records 0, 1, 2, ... from a task until `stop` is set: its
/// delivery reports, the producer, the stop flag and the task.
fn start_producer(
    bootstrap: &str,
) -> (
    Arc<Mutex<Deliveries>>,
    Arc<IdempotentProducer>,
    Arc<AtomicBool>,
    samsa::rt::task::JoinHandle<usize>,
) {
    let deliveries = Arc::new(Mutex::new(Deliveries::default()));
    let producer = Arc::new(idempotent_producer(bootstrap, &deliveries));
    let stop = Arc::new(AtomicBool::new(false));
    let producing = samsa::rt::task::spawn(produce_until(Arc::clone(&producer), Arc::clone(&stop)));
    (deliveries, producer, stop, producing)
}

/// Panics if librdkafka's idempotent producer hit a fatal error (it stops producing then).
fn assert_no_fatal_error(producer: &IdempotentProducer) {
    if let Some((code, reason)) = producer.client().fatal_error() {
        panic!("the idempotent producer's fatal error: {code:?}: {reason}");
    }
}

/// Waits until every partition has `ACKS_PER_PARTITION_PER_PHASE` more acknowledged
/// records than `from` says; the counts then.
async fn wait_acks(
    producer: &IdempotentProducer,
    deliveries: &Mutex<Deliveries>,
    from: &BTreeMap<i32, usize>,
    phase: &str,
) -> BTreeMap<i32, usize> {
    let started = samsa::rt::time::now();
    loop {
        assert_no_fatal_error(producer);
        let now = deliveries
            .lock()
            .expect("the deliveries")
            .acked_per_partition();
        if now
            .iter()
            .all(|(p, n)| *n >= from.get(p).copied().unwrap_or(0) + ACKS_PER_PARTITION_PER_PHASE)
        {
            return now;
        }
        let waited_ms = started.elapsed().as_millis();
        if waited_ms >= u128::from(ACKS_WAIT_MS_MAX) {
            let d = deliveries.lock().expect("the deliveries");
            panic!(
                "{phase}: not {ACKS_PER_PARTITION_PER_PHASE} more acknowledged records in \
                 every partition after {waited_ms} ms: from {from:?} to {now:?}; {} failed \
                 deliveries (first: {:?}); the client's last errors: {:?}",
                d.failed.len(),
                d.failed.first(),
                &d.errors[d.errors.len().saturating_sub(5)..]
            );
        }
        samsa::rt::time::sleep(Duration::from_millis(WAIT_POLL_MS)).await;
    }
}

/// One partition's line of `samsa topics describe`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PartitionRow {
    partition: i32,
    /// None: `Leader: none`.
    leader: Option<i32>,
    replicas: Vec<i32>,
    isr: BTreeSet<i32>,
}

/// `samsa topics describe TOPIC <options> -b <node id's client listener>`'s standard output,
/// or the tool's failure (its status and output).
fn describe_output(cluster: &ProcessCluster, id: i32, options: &[&str]) -> Result<String, String> {
    describe_topic(cluster, id, TOPIC, options)
}

/// `samsa topics describe TOPIC -b <node id's client listener>`'s partition lines, or the
/// tool's failure (a node not serving yet).
fn describe_through(cluster: &ProcessCluster, id: i32) -> Result<Vec<PartitionRow>, String> {
    let stdout = describe_output(cluster, id, &[])?;
    let ids = |list: &str| -> Vec<i32> {
        list.split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap_or_else(|_| panic!("a node id: {stdout}")))
            .collect()
    };
    let mut rows = Vec::new();
    for line in stdout.lines().filter(|l| l.starts_with('\t')) {
        let fields: BTreeMap<&str, &str> = line
            .split('\t')
            .filter_map(|f| f.split_once(": "))
            .collect();
        let field = |name: &str| {
            *fields
                .get(name)
                .unwrap_or_else(|| panic!("no {name} in {line:?}"))
        };
        rows.push(PartitionRow {
            partition: field("Partition").parse().expect("a partition"),
            leader: match field("Leader") {
                "none" => None,
                id => Some(id.parse().expect("a leader id")),
            },
            replicas: ids(field("Replicas")),
            isr: ids(field("Isr")).into_iter().collect(),
        });
    }
    Ok(rows)
}

/// The partitions `samsa topics describe TOPIC <report>` through node `id` lists (its report
/// options print partition lines only, as kafka-topics.sh's).
fn reported_through(cluster: &ProcessCluster, id: i32, report: &str) -> Vec<i32> {
    let stdout = describe_output(cluster, id, &[report])
        .unwrap_or_else(|e| panic!("samsa topics describe {report}: {e}"));
    assert!(
        stdout.lines().all(|l| l.starts_with('\t')),
        "{report} prints no topic line: {stdout}"
    );
    stdout
        .lines()
        .filter_map(|l| {
            l.split('\t')
                .find_map(|f| f.strip_prefix("Partition: "))
                .map(|p| p.parse().expect("a partition"))
        })
        .collect()
}

/// What `through` (each node's own `samsa topics describe`) shows, in node order.
fn describe_all(
    cluster: &ProcessCluster,
    through: &[i32],
) -> Vec<(i32, Result<Vec<PartitionRow>, String>)> {
    through
        .iter()
        .map(|id| (*id, describe_through(cluster, *id)))
        .collect()
}

/// Whether every answer of `views` gives every partition the placed replicas and leader and
/// the ISR `isr`.
fn views_show(
    views: &[(i32, Result<Vec<PartitionRow>, String>)],
    placement: &[Vec<i32>],
    isr: &BTreeSet<i32>,
) -> bool {
    views.iter().all(|(_, rows)| {
        rows.as_ref().is_ok_and(|rows| {
            rows.len() == placement.len()
                && rows.iter().all(|r| {
                    let placed = &placement[r.partition as usize];
                    &r.replicas == placed && r.leader == Some(placed[0]) && &r.isr == isr
                })
        })
    })
}

/// Waits until `samsa topics describe` through each of `through` gives every partition its
/// placed replicas and leader and the ISR `isr`; the milliseconds since `since` at which the
/// first of them did and at which all did.
async fn wait_isr(
    cluster: &ProcessCluster,
    through: &[i32],
    placement: &[Vec<i32>],
    isr: &BTreeSet<i32>,
    since: std::time::Instant,
    wait_ms_max: u64,
    what: &str,
) -> (u128, u128) {
    let mut first_ms = None;
    loop {
        let views = describe_all(cluster, through);
        let elapsed_ms = since.elapsed().as_millis();
        if first_ms.is_none()
            && views
                .iter()
                .any(|view| views_show(std::slice::from_ref(view), placement, isr))
        {
            first_ms = Some(elapsed_ms);
        }
        if views_show(&views, placement, isr) {
            return (first_ms.unwrap_or(elapsed_ms), elapsed_ms);
        }
        assert!(
            elapsed_ms < u128::from(wait_ms_max),
            "{what}: the ISRs are not {isr:?} (placement {placement:?}) after {elapsed_ms} ms; \
             samsa topics describe through each node: {views:#?}"
        );
        samsa::rt::time::sleep(Duration::from_millis(WAIT_POLL_MS)).await;
    }
}

/// Creates the topic with `placement` (partition i's replicas, leader first) and
/// `min.insync.replicas`, and waits until every node shows every broker in every ISR;
/// every broker's id.
async fn create_placed_topic(cluster: &ProcessCluster, placement: &[Vec<i32>]) -> BTreeSet<i32> {
    create_topic_through_controllers(cluster, placement).await;
    let all = cluster.ids();
    let everyone: BTreeSet<i32> = all.iter().copied().collect();
    wait_isr(
        cluster,
        &all,
        placement,
        &everyone,
        samsa::rt::time::now(),
        TOPIC_READY_WAIT_MS_MAX,
        "the new topic",
    )
    .await;
    everyone
}

/// Creates the topic with `placement` through the controller listeners: a broker's
/// CreateTopics takes explicit assignments that name only itself, the controller's takes any.
async fn create_topic_through_controllers(cluster: &ProcessCluster, placement: &[Vec<i32>]) {
    let request = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: TOPIC.into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: placement
                .iter()
                .enumerate()
                .map(|(p, replicas)| CreatableReplicaAssignment {
                    partition_index: p as i32,
                    broker_ids: replicas.iter().map(|id| NodeId(*id)).collect(),
                })
                .collect(),
            configs: vec![CreatableTopicConfig {
                name: "min.insync.replicas".into(),
                value: Some(MIN_INSYNC_REPLICAS.into()),
            }],
        }],
        timeout_ms: REQUEST_TIMEOUT_MS as i32,
        validate_only: false,
    };
    let limits = ConnectionLimits {
        request_timeout_ms: REQUEST_TIMEOUT_MS,
        connect_timeout_ms: REQUEST_TIMEOUT_MS,
        ..ConnectionLimits::default()
    };
    let mut answers = Vec::new();
    for _ in 0..POLLS_MAX {
        for (id, ports) in &cluster.ports {
            let address = format!("127.0.0.1:{}", ports.controller);
            let Ok(mut conn) = Connection::connect(&address, "test", limits.clone()).await else {
                continue;
            };
            let Ok(version) = conn.version_for(19) else {
                continue;
            };
            let Ok(response) = conn
                .send::<_, CreateTopicsResponse>(19, version, &request)
                .await
            else {
                continue;
            };
            let topic = &response.topics[0];
            match topic.error_code {
                // NONE; TOPIC_ALREADY_EXISTS after an earlier attempt whose answer was lost
                // (the placement is checked afterwards).
                0 | 36 => return,
                // NOT_CONTROLLER: a standby.
                41 => {}
                code => answers.push(format!("node {id}: error {code} {:?}", topic.error_message)),
            }
        }
        sleep_poll().await;
    }
    panic!("no controller created {TOPIC} with {placement:?}: {answers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_follower_rejoins_the_isr_and_no_acknowledged_record_is_lost() {
    let mut cluster = ProcessCluster::start(NODES);
    let all = cluster.ids();
    let bootstrap = cluster.bootstrap(&all);
    cluster.wait_registered().await;

    // Default placement gives every broker a leadership (1, 2, 3, 1, 2, 3), so the topic is
    // placed by hand: the follower to kill is a broker that is not the active controller, and
    // the two others lead three partitions each.
    let controller = wait_active_controller(&cluster).await;
    let follower = *all
        .iter()
        .rev()
        .find(|id| **id != controller)
        .expect("a broker that is not the controller");
    let leaders: Vec<i32> = all.iter().copied().filter(|id| *id != follower).collect();
    let placement: Vec<Vec<i32>> = (0..PARTITIONS as usize)
        .map(|p| {
            let (leader, other) = (leaders[p % 2], leaders[(p + 1) % 2]);
            if (p / 2) % 2 == 0 {
                vec![leader, other, follower]
            } else {
                vec![leader, follower, other]
            }
        })
        .collect();
    let everyone = create_placed_topic(&cluster, &placement).await;
    let two: BTreeSet<i32> = leaders.iter().copied().collect();

    // The producer runs from here to the end.
    let (deliveries, producer, stop, producing) = start_producer(&bootstrap);
    let before = wait_acks(
        &producer,
        &deliveries,
        &BTreeMap::new(),
        "before the SIGKILL",
    )
    .await;

    // SIGKILL of the follower, which must still not be the active controller.
    let now_active = active_controller(&cluster.ports, &all).await;
    assert!(
        now_active.is_some_and(|c| c != follower),
        "the follower to kill, node {follower}, is not the active controller: {now_active:?}"
    );
    cluster.sigkill(follower);
    let killed_at = samsa::rt::time::now();
    let (_, shrunk_ms) = wait_isr(
        &cluster,
        &leaders,
        &placement,
        &two,
        killed_at,
        ISR_SHRINK_WAIT_MS_MAX,
        "after the SIGKILL",
    )
    .await;
    let at_shrink = deliveries
        .lock()
        .expect("the deliveries")
        .acked_per_partition();
    // acks=all goes on with two replicas in each ISR (min.insync.replicas=2).
    let while_down = wait_acks(&producer, &deliveries, &at_shrink, "while node is down").await;
    assert!(
        views_show(&describe_all(&cluster, &leaders), &placement, &two),
        "the ISRs stayed {two:?} while node {follower} was down"
    );
    // kafka-topics.sh's reports: every partition under-replicated and at min ISR, none under
    // it or unavailable.
    let every: Vec<i32> = (0..PARTITIONS).collect();
    let reports = [
        ("--under-replicated-partitions", every.clone()),
        ("--at-min-isr-partitions", every.clone()),
        ("--under-min-isr-partitions", Vec::new()),
        ("--unavailable-partitions", Vec::new()),
    ];
    for (report, want) in &reports {
        assert_eq!(
            &reported_through(&cluster, leaders[0], report),
            want,
            "{report} while node {follower} was down"
        );
    }

    // Restarted on its directory, it catches up and rejoins every ISR.
    cluster.restart(follower);
    let restarted_at = samsa::rt::time::now();
    let (rejoined_ms, all_agree_ms) = wait_isr(
        &cluster,
        &all,
        &placement,
        &everyone,
        restarted_at,
        REJOIN_WAIT_MS_MAX,
        "after the restart",
    )
    .await;
    eprintln!(
        "replication_processes: node {follower} (follower of all {PARTITIONS} partitions) \
         SIGKILLed; every ISR shrank to {two:?} within {shrunk_ms} ms; restarted, it rejoined \
         every ISR after {rejoined_ms} ms (every broker's Metadata agreeing after \
         {all_agree_ms} ms) while the producer went on"
    );
    let at_rejoin = deliveries
        .lock()
        .expect("the deliveries")
        .acked_per_partition();
    let after = wait_acks(&producer, &deliveries, &at_rejoin, "after the rejoin").await;
    assert_eq!(
        reported_through(&cluster, leaders[0], "--under-replicated-partitions"),
        Vec::<i32>::new(),
        "nothing under-replicated once node {follower} rejoined"
    );

    let (sent, deliveries, failed_present, _) = finish_and_read_back(
        producer,
        &deliveries,
        producing,
        &stop,
        &bootstrap,
        "replication-processes",
    )
    .await;
    eprintln!(
        "replication_processes: {sent} records sent, {} acknowledged ({before:?} per partition \
         before the SIGKILL, {while_down:?} by the end of the downtime, {after:?} after the \
         rejoin), {} failed deliveries ({failed_present} of them stored), all read back",
        deliveries.acked.len(),
        deliveries.failed.len(),
    );
    cluster.stop();
}

/// The active controller, once the quorum has one.
async fn wait_active_controller(cluster: &ProcessCluster) -> i32 {
    let all = cluster.ids();
    for _ in 0..POLLS_MAX {
        if let Some(controller) = active_controller(&cluster.ports, &all).await {
            return controller;
        }
        sleep_poll().await;
    }
    panic!("no active controller after {POLLS_MAX} polls");
}

/// Stops the producer, waits for every delivery report, and reads every partition back from
/// offset 0 to its high watermark with an assigned consumer of `group`, checking what was
/// read against the reports ([`check_read_back`]): how many records were sent, the reports,
/// and how many records whose delivery failed were stored nonetheless.
async fn finish_and_read_back(
    producer: Arc<IdempotentProducer>,
    deliveries: &Mutex<Deliveries>,
    producing: samsa::rt::task::JoinHandle<usize>,
    stop: &AtomicBool,
    bootstrap: &str,
    group: &str,
) -> (usize, Deliveries, usize, BTreeMap<i32, (i64, i64)>) {
    stop.store(true, Ordering::Relaxed);
    let sent = producing.await.expect("the producing task");
    producer
        .flush(Duration::from_millis(FLUSH_TIMEOUT_MS))
        .expect("every delivery reported");
    assert_no_fatal_error(&producer);
    drop(producer);
    let deliveries = std::mem::take(&mut *deliveries.lock().expect("the deliveries"));
    assert_eq!(
        deliveries.acked.len() + deliveries.failed.len(),
        sent,
        "a delivery report for every record sent"
    );

    // Everything back, from each partition's start to its high watermark.
    let consumer = rk::consumer(bootstrap, group);
    let mut ranges = BTreeMap::new();
    for p in 0..PARTITIONS {
        let (low, high) = consumer
            .fetch_watermarks(TOPIC, p, Duration::from_millis(WATERMARKS_TIMEOUT_MS))
            .unwrap_or_else(|e| panic!("partition {p}'s watermarks: {e}"));
        assert_eq!(low, 0, "partition {p} starts at 0");
        ranges.insert(p, (0, high));
    }
    let read = rk::consume_ranges(&consumer, TOPIC, &ranges);
    let failed_present = check_read_back(&deliveries, sent, &ranges, &read);
    (sent, deliveries, failed_present, ranges)
}

/// Checks what was read against the delivery reports (see the module's comment); how many
/// records whose delivery failed were read nonetheless.
fn check_read_back(
    deliveries: &Deliveries,
    sent: usize,
    ranges: &BTreeMap<i32, (i64, i64)>,
    read: &BTreeMap<i32, Vec<rk::Consumed>>,
) -> usize {
    // Every offset from 0 to the high watermark, once; each a record of this run, once.
    let mut stored: BTreeMap<usize, (i32, i64)> = BTreeMap::new();
    for (p, records) in read {
        let (_, high) = ranges[p];
        let offsets: Vec<i64> = records.iter().map(|c| c.offset).collect();
        assert!(
            offsets.iter().copied().eq(0..high),
            "partition {p}: offsets read are not exactly 0..{high} ({} read)",
            offsets.len()
        );
        let mut last_seq: BTreeMap<String, (usize, i64)> = BTreeMap::new();
        for c in records {
            let at = format!("partition {p} offset {}", c.offset);
            let value = c
                .payload
                .as_deref()
                .unwrap_or_else(|| panic!("{at}: no value"));
            let (key, seq, index) = parse_value(value)
                .unwrap_or_else(|| panic!("{at}: a value of this run: {value:?}"));
            assert!(index < sent, "{at}: record {index} was never sent");
            assert_eq!(
                value,
                value_of(index).as_bytes(),
                "{at}: record {index}'s value"
            );
            assert_eq!(
                c.key.as_deref(),
                Some(key_of(index).as_bytes()),
                "{at}: key"
            );
            assert_eq!(
                (key.as_str(), seq),
                (key_of(index).as_str(), index / KEYS),
                "{at}"
            );
            if let Some(first) = stored.insert(index, (*p, c.offset)) {
                panic!("record {index} is stored twice: at {first:?} and at {at}");
            }
            if let Some((previous, offset)) = last_seq.insert(key.clone(), (seq, c.offset)) {
                assert!(
                    seq > previous,
                    "{at}: {key} sequence {seq} after sequence {previous} at offset {offset}"
                );
            }
        }
    }
    // Every acknowledged record exactly where its report said; in each partition, in the
    // order of the acknowledgements.
    let mut last_acked: BTreeMap<i32, (usize, i64)> = BTreeMap::new();
    for &(index, p, offset) in &deliveries.acked {
        assert_eq!(
            stored.get(&index),
            Some(&(p, offset)),
            "record {index}, acknowledged at partition {p} offset {offset}"
        );
        if let Some(&(previous, previous_offset)) = last_acked.get(&p) {
            assert!(
                offset > previous_offset,
                "partition {p}: record {index} acknowledged at offset {offset} after record \
                 {previous} at offset {previous_offset}"
            );
        }
        last_acked.insert(p, (index, offset));
    }
    // Everything stored was acknowledged or failed (then it is not counted as lost).
    let acked: BTreeSet<usize> = deliveries.acked.iter().map(|a| a.0).collect();
    let failed: BTreeSet<usize> = deliveries.failed.iter().map(|f| f.0).collect();
    assert_eq!(
        acked.len(),
        deliveries.acked.len(),
        "a record acknowledged twice"
    );
    for index in stored.keys() {
        assert!(
            acked.contains(index) || failed.contains(index),
            "record {index} is stored but had no delivery report"
        );
    }
    stored.keys().filter(|i| failed.contains(i)).count()
}

/// The bound on the producer's first acknowledgement in every partition after its leader's
/// SIGKILL (the controller fences the broker once its `broker.session.timeout.ms`, 9 s,
/// expired, and elects an ISR member).
const FAILOVER_WAIT_MS_MAX: u64 = 60_000;

/// Waits until `samsa topics describe` through each of `through` gives every partition the
/// ISR `isr` and a leader in it; the leaders then (by partition).
async fn wait_whole_isr(
    cluster: &ProcessCluster,
    through: &[i32],
    isr: &BTreeSet<i32>,
    wait_ms_max: u64,
    what: &str,
) -> BTreeMap<i32, i32> {
    let since = samsa::rt::time::now();
    loop {
        let views = describe_all(cluster, through);
        let whole = views.iter().all(|(_, rows)| {
            rows.as_ref().is_ok_and(|rows| {
                rows.len() == PARTITIONS as usize
                    && rows
                        .iter()
                        .all(|r| &r.isr == isr && r.leader.is_some_and(|l| isr.contains(&l)))
            })
        });
        if whole {
            if let Some((_, Ok(rows))) = views.first() {
                return rows
                    .iter()
                    .map(|r| (r.partition, r.leader.expect("a leader")))
                    .collect();
            }
        }
        let elapsed_ms = since.elapsed().as_millis();
        assert!(
            elapsed_ms < u128::from(wait_ms_max),
            "{what}: not every ISR is {isr:?} after {elapsed_ms} ms; samsa topics describe \
             through each node: {views:#?}"
        );
        samsa::rt::time::sleep(Duration::from_millis(WAIT_POLL_MS)).await;
    }
}

/// `samsa leader-election ARGS -b <node id's client listener>`: its status and stdout.
fn leader_election(cluster: &ProcessCluster, id: i32, args: &[&str]) -> (bool, String) {
    let out = samsa()
        .arg("leader-election")
        .args(args)
        .args(["-b", &cluster.bootstrap(&[id])])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run samsa leader-election");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.success(), format!("{stdout}{stderr}"))
}

/// `samsa leader-election --election-type preferred --all-topic-partitions` through node
/// `id`, which must succeed; then waits until every node shows the placed leaders and the ISR
/// `everyone`. The tool's output.
async fn elect_preferred_leaders(
    cluster: &ProcessCluster,
    id: i32,
    placement: &[Vec<i32>],
    everyone: &BTreeSet<i32>,
) -> String {
    let (ok, out) = leader_election(
        cluster,
        id,
        &["--election-type", "preferred", "--all-topic-partitions"],
    );
    assert!(ok, "samsa leader-election: {out}");
    wait_isr(
        cluster,
        &cluster.ids(),
        placement,
        everyone,
        samsa::rt::time::now(),
        REJOIN_WAIT_MS_MAX,
        "after the preferred election",
    )
    .await;
    out
}

/// The leader of every partition is SIGKILLed (one broker, the active controller or not as
/// `kill_controller` says, is every partition's preferred leader) under an idempotent
/// acks=all librdkafka producer:
/// the controller fences it and elects ISR members, the producer goes on (the time from the
/// SIGKILL to an acknowledgement in every partition is printed), the killed broker comes
/// back as a follower and rejoins every ISR, and `samsa leader-election --election-type
/// preferred --all-topic-partitions` gives it its leaderships back. Every acknowledged record
/// is then read back exactly once, in acknowledgement order per partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_fails_over_and_a_preferred_election_gives_its_partitions_back() {
    leader_failover(false, Fault::Kill).await;
}

/// The same when the killed leader is also the active controller: the quorum elects another
/// controller, which fences the killed broker once its session expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_that_is_also_the_active_controller_fails_over_too() {
    leader_failover(true, Fault::Kill).await;
}

/// The same with SIGSTOP instead of SIGKILL, for longer than `broker.session.timeout.ms`:
/// the paused leader is fenced and the cluster goes on without it; resumed with SIGCONT, the
/// same process (its connections open, its view of its leaderships stale) learns that it was
/// replaced, truncates where it must and rejoins every ISR as a follower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_is_fenced_and_rejoins_as_a_follower_when_it_resumes() {
    leader_failover(false, Fault::Pause).await;
}

/// How the failover tests take the leader away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// SIGKILL, later a restart on its directory.
    Kill,
    /// SIGSTOP past `broker.session.timeout.ms`, later SIGCONT: the same process resumes with
    /// its open connections and its stale view of its leaderships.
    Pause,
}

/// `__consumer_offsets`' partitions (`offsets.topic.num.partitions`' default).
const OFFSETS_PARTITIONS: i32 = 50;
/// The failover clusters' `__consumer_offsets` is replicated like the topic, so that the
/// group's coordinator fails over with its partition.
const FAILOVER_OVERRIDES: &[&str] = &["offsets.topic.replication.factor=3"];
/// Group names tried for one whose coordinator is the node to take away.
const GROUP_NAMES_MAX: usize = 1_000;

/// A group whose coordinator is node `id` (the leader of the `__consumer_offsets` partition
/// the group's name hashes to), once `__consumer_offsets` exists with every replica in every
/// ISR; FindCoordinator through every node confirms it.
async fn group_coordinated_by(cluster: &ProcessCluster, id: i32, prefix: &str) -> String {
    let all = cluster.ids();
    let bootstrap = cluster.bootstrap(&all);
    for _ in 0..POLLS_MAX {
        // The first FindCoordinator creates `__consumer_offsets`.
        let mut c = client(&bootstrap);
        let _ = c.find_coordinator(prefix).await;
        let offsets_ready =
            describe_topic(cluster, id, "__consumer_offsets", &[]).is_ok_and(|out| {
                out.lines().filter(|l| l.contains("Isr: ")).count() == OFFSETS_PARTITIONS as usize
            }) && describe_topic(
                cluster,
                id,
                "__consumer_offsets",
                &["--under-replicated-partitions"],
            )
            .is_ok_and(|out| out.trim().is_empty());
        let leaders = leaders(&bootstrap, "__consumer_offsets", OFFSETS_PARTITIONS).await;
        if offsets_ready && leaders.values().all(Option::is_some) {
            let name = (0..GROUP_NAMES_MAX)
                .map(|i| format!("{prefix}-{i}"))
                .find(|name| {
                    let p = samsa::coordinator::records::partition_for(name, OFFSETS_PARTITIONS);
                    leaders.get(&p) == Some(&Some(id))
                })
                .unwrap_or_else(|| panic!("node {id} leads no __consumer_offsets partition"));
            let mut confirmed = true;
            for through in &all {
                let mut c = client(&cluster.bootstrap(&[*through]));
                let found = c.find_coordinator(&name).await.map(|a| a.node_id);
                confirmed &= found.as_ref().is_ok_and(|n| *n == id);
            }
            if confirmed {
                return name;
            }
        }
        sleep_poll().await;
    }
    panic!("no group coordinated by node {id} after {POLLS_MAX} polls");
}

/// `samsa topics describe TOPIC OPTIONS` through node `id`: its stdout, or its failure.
fn describe_topic(
    cluster: &ProcessCluster,
    id: i32,
    topic: &str,
    options: &[&str],
) -> Result<String, String> {
    let out = samsa()
        .args(["topics", "describe", topic])
        .args(options)
        .args(["-b", &cluster.bootstrap(&[id])])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run samsa topics describe");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{}: {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The produce rate around a failover from the acknowledgements' times: acknowledgements
/// per `RATE_WINDOW_MS` window from `RATE_BEFORE_MS` before `at` on, and the longest time
/// without any acknowledgement after `at`.
const RATE_WINDOW_MS: u128 = 1_000;
const RATE_BEFORE_MS: u128 = 3_000;

fn throughput_around(acked_at: &[Instant], at: Instant, until: Instant) -> (Vec<usize>, u128) {
    let from = at
        .checked_sub(Duration::from_millis(RATE_BEFORE_MS as u64))
        .unwrap_or(at);
    let windows = (until.saturating_duration_since(from).as_millis() / RATE_WINDOW_MS) as usize + 1;
    let mut counts = vec![0; windows];
    let mut last = at;
    let mut gap_ms = 0;
    let mut times: Vec<Instant> = acked_at.iter().copied().filter(|t| *t >= from).collect();
    times.sort();
    for t in times {
        let w = (t.saturating_duration_since(from).as_millis() / RATE_WINDOW_MS) as usize;
        if let Some(c) = counts.get_mut(w) {
            *c += 1;
        }
        if t > at {
            gap_ms = gap_ms.max(t.saturating_duration_since(last).as_millis());
            last = t;
        }
    }
    (counts, gap_ms)
}

async fn leader_failover(kill_controller: bool, fault: Fault) {
    let test = format!("replication_processes::leader_failover({kill_controller}, {fault:?})");
    let mut cluster = ProcessCluster::start_with(NODES, FAILOVER_OVERRIDES);
    let all = cluster.ids();
    let bootstrap = cluster.bootstrap(&all);
    cluster.wait_registered().await;
    let controller = wait_active_controller(&cluster).await;
    let victim = if kill_controller {
        controller
    } else {
        *all.iter()
            .rev()
            .find(|id| **id != controller)
            .expect("a broker that is not the controller")
    };
    let others: Vec<i32> = all.iter().copied().filter(|id| *id != victim).collect();
    let placement: Vec<Vec<i32>> = (0..PARTITIONS as usize)
        .map(|p| {
            let (a, b) = (others[p % 2], others[(p + 1) % 2]);
            vec![victim, a, b]
        })
        .collect();
    let everyone = create_placed_topic(&cluster, &placement).await;
    let two: BTreeSet<i32> = others.iter().copied().collect();

    // A confluent-kafka group member whose coordinator is the node to take away.
    let group = group_coordinated_by(&cluster, victim, "failover").await;
    let mut member = GroupMember::start(&test, cluster.dir(), &bootstrap, TOPIC, &group);
    if let Some(member) = member.as_mut() {
        member.wait_assigned(PARTITIONS as usize).await;
    }

    let (deliveries, producer, stop, producing) = start_producer(&bootstrap);
    let before = wait_acks(&producer, &deliveries, &BTreeMap::new(), "before the fault").await;

    let now_active = active_controller(&cluster.ports, &all).await;
    assert_eq!(
        now_active == Some(victim),
        kill_controller,
        "the leader to take away, node {victim}, is the active controller or not as asked: \
         {now_active:?}"
    );
    let at_fault = deliveries
        .lock()
        .expect("the deliveries")
        .acked_per_partition();
    match fault {
        Fault::Kill => cluster.sigkill(victim),
        Fault::Pause => cluster.sigstop(victim),
    }
    let faulted_at = samsa::rt::time::now();
    // The first acknowledgement in each partition after the fault (those in flight at the
    // fault may still be acknowledged by the dying leader's last answers: one more than
    // at the fault is not enough, so the wait is for a new batch's worth).
    let mut resumed_ms: BTreeMap<i32, u128> = BTreeMap::new();
    while resumed_ms.len() < PARTITIONS as usize {
        assert_no_fatal_error(&producer);
        let now = deliveries
            .lock()
            .expect("the deliveries")
            .acked_per_partition();
        for (p, n) in &now {
            if *n >= at_fault[p] + BURST * 4 {
                resumed_ms
                    .entry(*p)
                    .or_insert_with(|| faulted_at.elapsed().as_millis());
            }
        }
        assert!(
            faulted_at.elapsed().as_millis() < u128::from(FAILOVER_WAIT_MS_MAX),
            "the producer did not resume in every partition within {FAILOVER_WAIT_MS_MAX} ms \
             of its leader's {fault:?}: {resumed_ms:?}"
        );
        samsa::rt::time::sleep(Duration::from_millis(WAIT_POLL_MS)).await;
    }
    let leaders_after = wait_whole_isr(
        &cluster,
        &others,
        &two,
        ISR_SHRINK_WAIT_MS_MAX,
        "after the fault",
    )
    .await;
    assert!(
        leaders_after.values().all(|l| *l != victim),
        "the node taken away leads nothing: {leaders_after:?}"
    );
    let at_failover = deliveries
        .lock()
        .expect("the deliveries")
        .acked_per_partition();
    let while_down = wait_acks(
        &producer,
        &deliveries,
        &at_failover,
        "while the leader is away",
    )
    .await;
    let rates_until = samsa::rt::time::now();

    // Back (on its directory, or resumed): a follower that rejoins every ISR, leading nothing
    // yet.
    match fault {
        Fault::Kill => cluster.restart(victim),
        Fault::Pause => cluster.sigcont(victim),
    }
    let rejoined = wait_whole_isr(
        &cluster,
        &all,
        &everyone,
        REJOIN_WAIT_MS_MAX,
        "after the node came back",
    )
    .await;
    assert!(
        rejoined.values().all(|l| *l != victim),
        "the node comes back as a follower: {rejoined:?}"
    );
    // Preferred elections give it back its leaderships.
    // (`__consumer_offsets`' partitions the node led move back too.)
    let out = elect_preferred_leaders(&cluster, others[0], &placement, &everyone).await;
    let elected: BTreeSet<&str> = out
        .lines()
        .find_map(|l| {
            l.strip_prefix("Successfully completed leader election (PREFERRED) for partitions ")
        })
        .map(|list| list.split(", ").collect())
        .unwrap_or_default();
    for p in 0..PARTITIONS {
        assert!(elected.contains(format!("{TOPIC}-{p}").as_str()), "{out}");
    }
    let (ok, out) = leader_election(
        &cluster,
        others[1],
        &[
            "--election-type",
            "PREFERRED",
            "--topic",
            TOPIC,
            "--partition",
            "0",
        ],
    );
    assert!(ok, "samsa leader-election: {out}");
    assert!(
        out.contains(&format!(
            "Valid replica already elected for partitions {TOPIC}-0"
        )),
        "{out}"
    );
    let (ok, out) = leader_election(
        &cluster,
        others[1],
        &[
            "--election-type",
            "unclean",
            "--topic",
            TOPIC,
            "--partition",
            "99",
        ],
    );
    assert!(!ok, "an unknown partition fails the tool: {out}");
    assert!(out.contains("1 replica(s) could not be elected"), "{out}");
    let at_election = deliveries
        .lock()
        .expect("the deliveries")
        .acked_per_partition();
    let after = wait_acks(&producer, &deliveries, &at_election, "after the election").await;
    let role = if kill_controller {
        "and the active controller"
    } else {
        "not the controller"
    };
    let (rates, gap_ms) = throughput_around(
        &deliveries.lock().expect("the deliveries").acked_at,
        faulted_at,
        rates_until,
    );
    eprintln!(
        "replication_processes: node {victim} (leader of all {PARTITIONS} partitions and of \
         group {group}'s coordinator partition, {role}) {fault:?}; the producer's \
         acknowledgements resumed per partition after {resumed_ms:?} ms (broker.session.\
         timeout.ms {}); no acknowledgement for {gap_ms} ms; acknowledgements per \
         {RATE_WINDOW_MS} ms from {RATE_BEFORE_MS} ms before the fault: {rates:?}; back, it \
         rejoined every ISR as a follower and a preferred election made it leader again",
        std::env::var("SAMSA_TEST_BROKER_OVERRIDES").unwrap_or_else(|_| "the default".to_string())
    );

    let (sent, deliveries, failed_present, ranges) = finish_and_read_back(
        producer,
        &deliveries,
        producing,
        &stop,
        &bootstrap,
        &format!("replication-processes-failover-{kill_controller}-{fault:?}"),
    )
    .await;
    eprintln!(
        "replication_processes: {sent} records sent, {} acknowledged ({before:?} before the \
         fault, {while_down:?} by the end of the downtime, {after:?} after the election), \
         {} failed deliveries ({failed_present} of them stored), all read back",
        deliveries.acked.len(),
        deliveries.failed.len(),
    );
    if let Some(mut member) = member {
        let ends: BTreeMap<i32, i64> = ranges.iter().map(|(p, (_, high))| (*p, *high)).collect();
        member.wait_caught_up(&ends).await;
        let events = member.stop().await;
        let acked: BTreeMap<(i32, i64), String> = deliveries
            .acked
            .iter()
            .map(|(index, p, offset)| ((*p, *offset), value_of(*index)))
            .collect();
        let consumption = check_consumption(&events, &acked, |v| {
            parse_value(v.as_bytes())
                .is_some_and(|(_, _, index)| index < sent && value_of(index) == v)
        });
        let after_fault = |ev: &str| {
            events
                .iter()
                .find(|e| e.at > faulted_at && e.ev() == ev)
                .map(|e| e.at.duration_since(faulted_at).as_millis())
        };
        eprintln!(
            "replication_processes: group {group} (confluent-kafka, its coordinator on node \
             {victim}): first records after the fault at {:?} ms, first successful commit \
             after it at {:?} ms; {consumption:?}",
            after_fault("records"),
            after_fault("committed"),
        );
        assert!(
            after_fault("committed").is_some(),
            "the group committed again after its coordinator's {fault:?}"
        );
    }
    cluster.stop();
}

/// A rolling restart under load: each broker in turn gets SIGTERM (a controlled shutdown that
/// moves its leaderships first), exits 0, restarts on its directory and rejoins every ISR
/// before the next one goes, while the idempotent acks=all producer runs throughout. No
/// delivery fails, and a preferred election at the end puts every leader back on its
/// preferred replica. Everything acknowledged is read back as in the tests above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_under_load_fails_no_produce() {
    let mut cluster = ProcessCluster::start(NODES);
    let all = cluster.ids();
    let bootstrap = cluster.bootstrap(&all);
    cluster.wait_registered().await;
    wait_active_controller(&cluster).await;
    let n = all.len();
    let placement: Vec<Vec<i32>> = (0..PARTITIONS as usize)
        .map(|p| (0..n).map(|i| all[(p + i) % n]).collect())
        .collect();
    let everyone = create_placed_topic(&cluster, &placement).await;
    let (deliveries, producer, stop, producing) = start_producer(&bootstrap);
    let before = wait_acks(
        &producer,
        &deliveries,
        &BTreeMap::new(),
        "before the restarts",
    )
    .await;
    let mut restarts_ms = Vec::new();
    for id in &all {
        let started = samsa::rt::time::now();
        let status = cluster.sigterm(*id).await;
        assert!(
            status.success(),
            "node {id} exits 0 after SIGTERM: {status}"
        );
        let stopped_ms = started.elapsed().as_millis();
        cluster.restart(*id);
        wait_whole_isr(
            &cluster,
            &all,
            &everyone,
            REJOIN_WAIT_MS_MAX,
            "after a restart",
        )
        .await;
        restarts_ms.push((*id, stopped_ms, started.elapsed().as_millis()));
        let now = deliveries
            .lock()
            .expect("the deliveries")
            .acked_per_partition();
        wait_acks(&producer, &deliveries, &now, "after a restart").await;
    }
    elect_preferred_leaders(&cluster, all[0], &placement, &everyone).await;
    let failed = deliveries.lock().expect("the deliveries").failed.len();
    assert_eq!(failed, 0, "no delivery failed during the rolling restart");
    let (sent, deliveries, _, _) = finish_and_read_back(
        producer,
        &deliveries,
        producing,
        &stop,
        &bootstrap,
        "replication-processes-rolling",
    )
    .await;
    assert!(
        deliveries.failed.is_empty(),
        "no delivery failed: {:?}",
        deliveries.failed.first()
    );
    eprintln!(
        "replication_processes: rolling restart of nodes {all:?} under load: (node, ms to exit \
         after SIGTERM, ms until it was back in every ISR) {restarts_ms:?}; {sent} records sent, \
         all acknowledged ({before:?} before the first stop), none failed, all read back"
    );
    cluster.stop();
}
