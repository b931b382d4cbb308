//! Partition replication on three combined nodes in one process, real TCP and real files:
//! a topic of replication factor 3 with `min.insync.replicas` 2 keeps every acks=all record on
//! all three replicas, byte for byte, with the leader's offsets and epochs; a follower that
//! stops leaves the ISR and produce goes on with two; started again on its directory, it
//! catches up and rejoins the ISR; and the leader's high watermark never passes what its ISR
//! holds.
#![cfg(not(feature = "sim"))]

use std::time::Duration;

use bytes::Bytes;
use samsa::client::{build_batch, ProducerRecord};
use samsa::protocol::record_batch::Compression;

use crate::broker_cluster::{client, restart_node, start_cluster, stop_cluster, ClusterNode};

const TOPIC: &str = "replicated";
const PARTITIONS: i32 = 3;
const WAIT_MS_MAX: u64 = 20_000;

async fn produce(nodes: &[ClusterNode], from: usize, count: usize) {
    let mut producer = client(&nodes[0].address);
    for p in 0..PARTITIONS {
        for i in from..from + count {
            let record = ProducerRecord {
                key: None,
                value: Some(Bytes::from(format!("{p}-{i}"))),
                headers: Vec::new(),
                timestamp: 1_000,
            };
            let batch = build_batch(&[record], Compression::None).expect("a batch");
            let ack = producer
                .produce(TOPIC, p, batch, -1, 10_000)
                .await
                .unwrap_or_else(|e| panic!("acks=all produce {p}-{i}: {e}"));
            assert_eq!(ack.base_offset, i as i64, "partition {p}");
        }
    }
}

/// Each node's (log end, high watermark, stored bytes) of partition `p`.
async fn replicas_of(nodes: &[ClusterNode], p: i32) -> Vec<(i32, i64, i64, Bytes)> {
    let mut out = Vec::new();
    for n in nodes {
        let partition = n
            .node
            .broker
            .topics
            .get_partition(TOPIC, p)
            .await
            .expect("every node has the partition");
        let end = partition.log_end_offset();
        let read = partition
            .log()
            .read(0, 1 << 20, end)
            .await
            .expect("read the replica's log");
        out.push((n.id, end, partition.high_watermark(), read.records));
    }
    out
}

/// Waits until every replica of every partition holds `records` records, with equal bytes
/// and that high watermark.
async fn wait_in_sync(nodes: &[ClusterNode], records: i64) {
    let mut waited_ms = 0;
    loop {
        let mut done = true;
        let mut seen = Vec::new();
        for p in 0..PARTITIONS {
            let replicas = replicas_of(nodes, p).await;
            let first = &replicas[0].3;
            done &= replicas
                .iter()
                .all(|(_, end, hw, bytes)| *end == records && *hw == records && bytes == first);
            seen.push(
                replicas
                    .iter()
                    .map(|(id, end, hw, _)| (*id, *end, *hw))
                    .collect::<Vec<_>>(),
            );
        }
        if done {
            return;
        }
        assert!(
            waited_ms < WAIT_MS_MAX,
            "replicas not in sync at {records} within {WAIT_MS_MAX} ms: (node, log end, high watermark) per partition {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited_ms += 50;
    }
}

/// Waits until the applied image of node `on` gives every partition the ISR `isr`.
async fn wait_isr(on: &ClusterNode, isr: &[i32]) {
    let mut waited_ms = 0;
    loop {
        let image = on.node.controller.published().image;
        let isrs: Vec<Vec<i32>> = (0..PARTITIONS)
            .map(|p| {
                let mut isr = image
                    .partition(TOPIC, p)
                    .map(|r| r.isr.clone())
                    .unwrap_or_default();
                isr.sort();
                isr
            })
            .collect();
        if isrs.iter().all(|i| i == isr) {
            return;
        }
        assert!(
            waited_ms < WAIT_MS_MAX,
            "the ISRs are {isrs:?}, not {isr:?}, after {WAIT_MS_MAX} ms"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited_ms += 50;
    }
}

/// OffsetForLeaderEpoch (KIP-320) on partition 0: its leader answers where epoch 0 ends (the
/// log end, the latest epoch), fences an older current epoch and refuses a newer one; a
/// follower answers NOT_LEADER_OR_FOLLOWER.
async fn offset_for_leader_epoch_answers(nodes: &[ClusterNode], log_end: i64) {
    use samsa::client::connection::{Connection, ConnectionLimits};
    use samsa::protocol::offset_for_leader_epoch::{
        OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, OffsetForLeaderPartition,
        OffsetForLeaderTopic,
    };
    use samsa::protocol::types::{LeaderEpoch, NodeId};
    let leader = nodes[0]
        .node
        .controller
        .published()
        .image
        .partition(TOPIC, 0)
        .map(|p| p.leader)
        .expect("partition 0 has a leader");
    let ask = |current: i32| OffsetForLeaderEpochRequest {
        replica_id: NodeId(-1),
        topics: vec![OffsetForLeaderTopic {
            topic: TOPIC.to_string(),
            partitions: vec![OffsetForLeaderPartition {
                partition: 0,
                current_leader_epoch: LeaderEpoch(current),
                leader_epoch: LeaderEpoch(0),
            }],
        }],
    };
    for n in nodes {
        let mut conn = Connection::connect(&n.address, "epoch-test", ConnectionLimits::default())
            .await
            .expect("connect");
        let answer = |r: OffsetForLeaderEpochResponse| {
            let p = &r.topics[0].partitions[0];
            (p.error_code, p.leader_epoch.0, p.end_offset.0)
        };
        let r: OffsetForLeaderEpochResponse = conn.send(23, 4, &ask(0)).await.expect("answer");
        if n.id == leader {
            assert_eq!(answer(r), (0, 0, log_end), "the leader, node {}", n.id);
            let r: OffsetForLeaderEpochResponse = conn.send(23, 4, &ask(7)).await.expect("answer");
            assert_eq!(
                answer(r).0,
                75,
                "UNKNOWN_LEADER_EPOCH for a newer current epoch"
            );
        } else {
            assert_eq!(
                answer(r).0,
                6,
                "NOT_LEADER_OR_FOLLOWER from follower {}",
                n.id
            );
        }
    }
}

/// ListOffsets (latest) on partition 0: its leader answers the high watermark `log_end`,
/// fences an older current epoch and refuses a newer one (KIP-320); a follower answers
/// NOT_LEADER_OR_FOLLOWER, except to the debugging replica id -2.
async fn list_offsets_answers(nodes: &[ClusterNode], log_end: i64) {
    use samsa::client::connection::{Connection, ConnectionLimits};
    use samsa::protocol::list_offsets::{
        ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic,
    };
    use samsa::protocol::types::{LeaderEpoch, NodeId};
    let state = nodes[0]
        .node
        .controller
        .published()
        .image
        .partition(TOPIC, 0)
        .map(|p| (p.leader, p.leader_epoch))
        .expect("partition 0 has a leader");
    let (leader, epoch) = state;
    let ask = |replica_id: i32, current: i32| ListOffsetsRequest {
        replica_id: NodeId(replica_id),
        topics: vec![ListOffsetsTopic {
            name: TOPIC.to_string(),
            partitions: vec![ListOffsetsPartition {
                partition_index: 0,
                current_leader_epoch: LeaderEpoch(current),
                timestamp: -1,
            }],
        }],
        ..Default::default()
    };
    for n in nodes {
        let mut conn = Connection::connect(&n.address, "offsets-test", ConnectionLimits::default())
            .await
            .expect("connect");
        let mut answer = async |replica_id: i32, current: i32| {
            let r: ListOffsetsResponse = conn
                .send(2, 7, &ask(replica_id, current))
                .await
                .expect("answer");
            let p = &r.topics[0].partitions[0];
            (p.error_code, p.offset.0)
        };
        if n.id == leader {
            assert_eq!(
                answer(-1, epoch).await,
                (0, log_end),
                "the leader, node {}",
                n.id
            );
            assert_eq!(answer(-1, -1).await, (0, log_end), "no current epoch given");
            if epoch > 0 {
                assert_eq!(answer(-1, epoch - 1).await.0, 74, "FENCED_LEADER_EPOCH");
            }
            assert_eq!(answer(-1, epoch + 1).await.0, 75, "UNKNOWN_LEADER_EPOCH");
        } else {
            assert_eq!(
                answer(-1, epoch).await.0,
                6,
                "NOT_LEADER_OR_FOLLOWER from follower {}",
                n.id
            );
            assert_eq!(
                answer(-2, -1).await,
                (0, log_end),
                "the debugging replica id is answered by follower {}",
                n.id
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_hold_every_acknowledged_record_and_a_follower_rejoins() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = start_cluster(&dirs).await;
    let mut admin = client(&nodes[0].address);
    let created = admin
        .create_topics(&[(TOPIC, PARTITIONS, 3, &[("min.insync.replicas", "2")])])
        .await
        .expect("create topics");
    assert!(created.iter().all(|(_, r)| r.is_ok()), "{created:?}");
    wait_isr(&nodes[0], &[1, 2, 3]).await;

    produce(&nodes, 0, 10).await;
    wait_in_sync(&nodes, 10).await;
    // Every replica's leader-epoch cache agrees with the leader's: the followers kept the
    // leader's epochs.
    for p in 0..PARTITIONS {
        let mut caches = Vec::new();
        for n in &nodes {
            let partition = n.node.broker.topics.get_partition(TOPIC, p).await.unwrap();
            caches.push(partition.log().epoch_entries().await);
        }
        assert!(
            caches.iter().all(|c| c == &caches[0] && !c.is_empty()),
            "partition {p}: {caches:?}"
        );
    }

    offset_for_leader_epoch_answers(&nodes, 10).await;
    list_offsets_answers(&nodes, 10).await;

    // Stop a node that leads none of the partitions if there is one, else node 3: it leaves
    // every ISR (a controlled shutdown), and acks=all goes on with two replicas.
    let image = nodes[0].node.controller.published().image;
    let leaders: Vec<i32> = (0..PARTITIONS)
        .map(|p| image.partition(TOPIC, p).map(|r| r.leader).unwrap_or(-1))
        .collect();
    let stopped_id = (1..=3).rev().find(|id| !leaders.contains(id)).unwrap_or(3);
    let index = nodes.iter().position(|n| n.id == stopped_id).unwrap();
    let stopped = nodes.remove(index);
    let (config, address, controller_address) = (
        stopped.config.clone(),
        stopped.address.clone(),
        stopped.node.controller_address.clone(),
    );
    stopped.serving.stop().await;
    stopped.node.shutdown().await.expect("a clean close");
    let mut rest: Vec<i32> = nodes.iter().map(|n| n.id).collect();
    rest.sort();
    wait_isr(&nodes[0], &rest).await;
    produce(&nodes, 10, 10).await;
    wait_in_sync(&nodes, 20).await;

    // Started again, it fetches what it missed and rejoins every ISR.
    let again = restart_node(
        stopped_id,
        &dirs[(stopped_id - 1) as usize],
        config,
        &address,
        &controller_address,
    )
    .await;
    nodes.push(again);
    nodes.sort_by_key(|n| n.id);
    wait_isr(&nodes[0], &[1, 2, 3]).await;
    wait_in_sync(&nodes, 20).await;
    produce(&nodes, 20, 5).await;
    wait_in_sync(&nodes, 25).await;
    stop_cluster(nodes).await;
}
