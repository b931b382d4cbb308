//! The Rust client's [`GroupConsumer`] against a broker process: members share a topic's
//! partitions, every record is consumed once, and a member that replaces one that left
//! starts at the committed offsets.
#![cfg(not(feature = "sim"))]

#[path = "../support/broker_process.rs"]
mod broker_process;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use broker_process::BrokerProcess;
use bytes::Bytes;
use samsa::client::group::assignor::Assignor;
use samsa::client::group::consumer::{GroupConsumer, GroupConsumerConfig, OffsetReset};
use samsa::client::group::member::MemberConfig;
use samsa::client::{build_batch, Client, ClientConfig, FetchOptions, ProducerRecord};
use samsa::protocol::record_batch::Compression;

const TOPIC: &str = "shared";
const PARTITIONS: i32 = 4;
const RECORDS_PER_PARTITION: usize = 25;
/// How long the test waits for the group to reach a state: `WAIT_POLLS_MAX` checks
/// `WAIT_POLL_MS` apart (30 s).
const WAIT_POLLS_MAX: u32 = 600;
const WAIT_POLL_MS: u64 = 50;
/// After a member leaves, the others must take over well within its session timeout
/// (6 s): 3 s.
const LEFT_POLLS_MAX: u32 = 60;

fn config(broker: &BrokerProcess, assignor: Assignor) -> GroupConsumerConfig {
    GroupConsumerConfig {
        client: ClientConfig {
            bootstrap: vec![broker.bootstrap()],
            client_id: "group-consumer-test".into(),
            ..ClientConfig::default()
        },
        member: MemberConfig {
            group_id: "rust-group".into(),
            session_timeout_ms: 6_000,
            heartbeat_interval_ms: 200,
            rebalance_timeout_ms: 10_000,
            assignors: vec![assignor],
            ..MemberConfig::default()
        },
        enable_auto_commit: true,
        auto_commit_interval_ms: 200,
        auto_offset_reset: OffsetReset::Earliest,
        fetch: FetchOptions {
            max_wait_ms: 100,
            ..FetchOptions::default()
        },
    }
}

async fn fill(broker: &BrokerProcess) {
    let mut client = Client::new(ClientConfig {
        bootstrap: vec![broker.bootstrap()],
        ..ClientConfig::default()
    });
    let created = client
        .create_topics(&[(TOPIC, PARTITIONS, 1, &[])])
        .await
        .expect("create topics");
    assert!(created.iter().all(|(_, r)| r.is_ok()), "{created:?}");
    for partition in 0..PARTITIONS {
        for i in 0..RECORDS_PER_PARTITION {
            let value = format!("{partition}-{i}");
            let record = ProducerRecord {
                key: None,
                value: Some(Bytes::from(value)),
                headers: Vec::new(),
                timestamp: 1_000,
            };
            let batch = build_batch(&[record], Compression::None).expect("a batch");
            client
                .produce(TOPIC, partition, batch, -1, 5_000)
                .await
                .expect("produce");
        }
    }
}

type Seen = BTreeMap<(i32, i64), String>;

/// What the members report, shared with the test.
#[derive(Default)]
struct Shared {
    seen: Seen,
    /// Each running member's latest assignment, while it is stable.
    owned: BTreeMap<&'static str, Vec<(String, i32)>>,
    stop: BTreeSet<&'static str>,
}

type SharedRef = Arc<Mutex<Shared>>;

fn lock(shared: &SharedRef) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().expect("shared state")
}

/// Runs `consumer` in its own task (a JoinGroup waits for every member to rejoin, so each
/// member polls on its own) until the test stops it; it commits and hands the consumer back.
fn spawn_member(
    name: &'static str,
    mut consumer: GroupConsumer,
    shared: SharedRef,
) -> samsa::rt::task::JoinHandle<GroupConsumer> {
    samsa::rt::task::spawn(async move {
        while !lock(&shared).stop.contains(name) {
            let records = consumer.poll().await.expect("poll");
            let mut state = lock(&shared);
            for r in records {
                let value = String::from_utf8_lossy(r.record.value.as_deref().unwrap_or_default());
                let previous = state
                    .seen
                    .insert((r.partition, r.record.offset), value.into_owned());
                assert!(
                    previous.is_none(),
                    "{name}: {}-{} consumed twice",
                    r.partition,
                    r.record.offset
                );
            }
            let owned = if consumer.is_stable() {
                consumer.assignment()
            } else {
                Vec::new()
            };
            state.owned.insert(name, owned);
        }
        consumer.commit().await.expect("commit");
        consumer
    })
}

/// Waits until `done` holds of the shared state (at most `polls` checks, `WAIT_POLL_MS`
/// apart).
async fn wait_for(shared: &SharedRef, what: &str, polls: u32, done: impl Fn(&Shared) -> bool) {
    for _ in 0..polls {
        if done(&lock(shared)) {
            return;
        }
        samsa::rt::time::sleep(std::time::Duration::from_millis(WAIT_POLL_MS)).await;
    }
    let state = lock(shared);
    panic!(
        "{what}: not within the wait; owned {:?}, {} records seen",
        state.owned,
        state.seen.len()
    );
}

fn split_two_and_two(state: &Shared, a: &str, b: &str) -> bool {
    let (Some(x), Some(y)) = (state.owned.get(a), state.owned.get(b)) else {
        return false;
    };
    let all: BTreeSet<_> = x.iter().chain(y).collect();
    x.len() == 2 && y.len() == 2 && all.len() == 4
}

async fn share_and_take_over(assignor: Assignor) {
    let broker = BrokerProcess::start_with(&[("group.initial.rebalance.delay.ms", "0")]);
    fill(&broker).await;
    let shared = SharedRef::default();
    let total = usize::try_from(PARTITIONS).unwrap() * RECORDS_PER_PARTITION;
    let new_member = || GroupConsumer::new(config(&broker, assignor), &[TOPIC]).expect("member");
    let a = spawn_member("a", new_member(), shared.clone());
    let b = spawn_member("b", new_member(), shared.clone());
    wait_for(
        &shared,
        "a and b share the partitions and read every record",
        WAIT_POLLS_MAX,
        |s| split_two_and_two(s, "a", "b") && s.seen.len() == total,
    )
    .await;
    for ((partition, offset), value) in &lock(&shared).seen {
        assert_eq!(value, &format!("{partition}-{offset}"));
    }
    lock(&shared).stop.insert("a");
    let a = a.await.expect("member a");
    a.close().await.expect("a leaves");
    lock(&shared).owned.remove("a");
    // b takes a's partitions at once: a left the group (had it not, b would wait out a's
    // session); c joins and starts at the commits: nothing is read again.
    wait_for(&shared, "b takes every partition", LEFT_POLLS_MAX, |s| {
        s.owned.get("b").is_some_and(|o| o.len() == 4)
    })
    .await;
    let c = spawn_member("c", new_member(), shared.clone());
    wait_for(
        &shared,
        "b and c share the partitions",
        WAIT_POLLS_MAX,
        |s| split_two_and_two(s, "b", "c"),
    )
    .await;
    assert_eq!(
        lock(&shared).seen.len(),
        total,
        "nothing new, nothing twice"
    );
    lock(&shared).stop.extend(["b", "c"]);
    for member in [b, c] {
        member.await.expect("member").close().await.expect("leaves");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_share_the_partitions_with_range_and_resume_from_commits() {
    share_and_take_over(Assignor::Range).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_share_the_partitions_with_cooperative_sticky_and_resume_from_commits() {
    share_and_take_over(Assignor::CooperativeSticky).await;
}

/// The members of `group` as its coordinator describes them, and the group's state.
async fn described(broker: &BrokerProcess, group: &str) -> (String, Vec<String>) {
    let mut admin = Client::new(ClientConfig {
        bootstrap: vec![broker.bootstrap()],
        ..ClientConfig::default()
    });
    let described = admin.describe_group(group).await.expect("describe");
    let members = described.members.into_iter().map(|m| m.member_id).collect();
    (described.group_state, members)
}

/// Polls until the consumer is stable with every partition.
async fn poll_until_it_owns_everything(consumer: &mut GroupConsumer) {
    for _ in 0..WAIT_POLLS_MAX {
        consumer.poll().await.expect("poll");
        if consumer.is_stable() && consumer.assignment().len() == 4 {
            return;
        }
    }
    panic!("the consumer did not get the topic's partitions");
}

/// The background task heartbeats for a member that processes records for longer than its
/// session timeout, so it keeps its partitions; a member that does not poll for
/// `max_poll_interval_ms` is taken for stuck: it leaves the group and its next poll joins
/// again as a new member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_member_keeps_its_partitions_and_a_stuck_one_leaves() {
    const SESSION_TIMEOUT_MS: i32 = 1_500;
    const MAX_POLL_INTERVAL_MS: i64 = 5_000;
    const GROUP: &str = "slow-group";
    let broker = BrokerProcess::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("group.min.session.timeout.ms", "1000"),
    ]);
    fill(&broker).await;
    let mut config = config(&broker, Assignor::Range);
    config.member.group_id = GROUP.into();
    config.member.session_timeout_ms = SESSION_TIMEOUT_MS;
    config.member.max_poll_interval_ms = MAX_POLL_INTERVAL_MS;
    let mut consumer = GroupConsumer::new(config, &[TOPIC]).expect("member");
    poll_until_it_owns_everything(&mut consumer).await;
    let first_id = consumer.member_id();

    // Busy for more than twice the session timeout, well within the poll interval.
    tokio::time::sleep(std::time::Duration::from_millis(3_500)).await;
    assert_eq!(
        described(&broker, GROUP).await,
        ("Stable".to_string(), vec![first_id.clone()]),
        "the member outlived its session timeout without polling"
    );
    consumer.poll().await.expect("poll");
    assert!(consumer.is_stable());
    assert_eq!(consumer.member_id(), first_id);
    assert_eq!(consumer.assignment().len(), 4);

    // Stuck for longer than the poll interval: the member leaves at once (a dynamic member
    // sends LeaveGroup), so the group is empty before its session would have run out.
    tokio::time::sleep(std::time::Duration::from_millis(6_500)).await;
    assert_eq!(
        described(&broker, GROUP).await,
        ("Empty".to_string(), Vec::new()),
        "the stuck member left the group"
    );
    poll_until_it_owns_everything(&mut consumer).await;
    assert_ne!(
        consumer.member_id(),
        first_id,
        "it joined again as a new member"
    );
    consumer.close().await.expect("close");
}
