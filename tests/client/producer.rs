//! The Rust client's [`Producer`] against the real broker over TCP: batching with linger,
//! murmur2 key placement as the Java client computes it, sticky placement of keyless records,
//! compression, per-record offsets read back with the client's own fetch, back-pressure from a
//! small buffer, and (once the broker answers InitProducerId) the idempotent mode.

#![cfg(not(feature = "sim"))]

use std::collections::BTreeMap;

use bytes::Bytes;
use samsa::client::partitioner::partition_for_key;
use samsa::client::{
    Client, ClientConfig, FetchOptions, Producer, ProducerConfig, ProducerError, ProducerRecord,
};
use samsa::protocol::record_batch::Compression;

#[path = "../support/test_broker.rs"]
mod test_broker;

use test_broker::TestBroker;

fn config(broker: &TestBroker, idempotent: bool) -> ProducerConfig {
    ProducerConfig {
        client: ClientConfig {
            bootstrap: vec![broker.addr.to_string()],
            ..ClientConfig::default()
        },
        enable_idempotence: idempotent,
        linger_ms: 20,
        batch_size: 4_096,
        ..ProducerConfig::default()
    }
}

fn record(key: Option<String>, value: String) -> ProducerRecord {
    ProducerRecord {
        key: key.map(Bytes::from),
        value: Some(Bytes::from(value)),
        headers: vec![("h".into(), Some(Bytes::from_static(b"1")))],
        timestamp: 1_700_000_000_000,
    }
}

async fn create_topic(client: &mut Client, name: &str, partitions: i32) {
    let results = client
        .create_topics(&[(name, partitions, 1, &[])])
        .await
        .unwrap();
    assert!(results.iter().all(|(_, r)| r.is_ok()), "{results:?}");
}

/// Every record of `topic`-`partition` from offset 0 to the high watermark: (offset, key, value).
async fn read_all(
    client: &mut Client,
    topic: &str,
    partition: i32,
) -> Vec<(i64, Option<Bytes>, Option<Bytes>)> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let fetched = client
            .fetch(topic, partition, offset, FetchOptions::default())
            .await
            .unwrap();
        for r in client.records(topic, partition, &fetched, offset) {
            let r = r.unwrap();
            offset = r.offset + 1;
            out.push((r.offset, r.key, r.value));
        }
        if offset >= fetched.high_watermark {
            return out;
        }
    }
}

/// Produces keyed and keyless records with `producer` to a 3-partition topic and checks
/// every acknowledged offset against what the log holds.
async fn round_trip(broker: &TestBroker, producer: Producer, topic: &str) {
    let mut client = Client::new(config(broker, false).client);
    create_topic(&mut client, topic, 3).await;
    let mut deliveries = Vec::new();
    for i in 0..600 {
        let key = (i % 2 == 0).then(|| format!("key-{}", i % 17));
        let rec = record(key.clone(), format!("value-{i}"));
        deliveries.push((
            key,
            format!("value-{i}"),
            producer.send(topic, None, rec).await.unwrap(),
        ));
    }
    // An explicit partition wins over the key.
    let pinned = producer
        .send(
            topic,
            Some(2),
            record(Some("key-0".into()), "pinned".into()),
        )
        .await
        .unwrap();
    let mut acked: BTreeMap<(i32, i64), (Option<String>, String)> = BTreeMap::new();
    for (key, value, delivery) in deliveries {
        let meta = delivery.await.unwrap();
        if let Some(k) = &key {
            assert_eq!(meta.partition, partition_for_key(k.as_bytes(), 3), "{k}");
        }
        assert!(acked
            .insert((meta.partition, meta.offset), (key, value))
            .is_none());
    }
    let pinned = pinned.await.unwrap();
    assert_eq!(pinned.partition, 2);
    acked.insert((2, pinned.offset), (Some("key-0".into()), "pinned".into()));
    producer.close().await;

    let mut total = 0;
    for partition in 0..3 {
        let log = read_all(&mut client, topic, partition).await;
        // Dense offsets from 0, each holding what was acknowledged there.
        for (i, (offset, key, value)) in log.iter().enumerate() {
            assert_eq!(*offset, i as i64);
            let (want_key, want_value) = &acked[&(partition, *offset)];
            assert_eq!(key.as_deref(), want_key.as_deref().map(str::as_bytes));
            assert_eq!(value.as_deref(), Some(want_value.as_bytes()));
        }
        total += log.len();
    }
    assert_eq!(total, 601);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_producer_round_trips_without_idempotence() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    for (i, codec) in [Compression::None, Compression::Lz4, Compression::Zstd]
        .into_iter()
        .enumerate()
    {
        let producer = Producer::new(ProducerConfig {
            compression: codec,
            ..config(&broker, false)
        })
        .await
        .unwrap();
        assert_eq!(producer.producer_identity(), None);
        round_trip(&broker, producer, &format!("plain-{i}")).await;
    }
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_producer_applies_back_pressure_and_refuses_oversized_records() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let producer = Producer::new(ProducerConfig {
        buffer_memory: 8_192,
        batch_size: 2_048,
        max_request_size: 65_536,
        linger_ms: 0,
        ..config(&broker, false)
    })
    .await
    .unwrap();
    let mut client = Client::new(config(&broker, false).client);
    create_topic(&mut client, "small", 1).await;
    // 200 records of 1 KiB through an 8 KiB buffer: send waits for room, and all arrive.
    let mut deliveries = Vec::new();
    for i in 0..200 {
        let rec = record(None, format!("{i:01024}"));
        deliveries.push(producer.send("small", None, rec).await.unwrap());
    }
    let mut offsets = Vec::new();
    for d in deliveries {
        offsets.push(d.await.unwrap().offset);
    }
    assert_eq!(offsets, (0..200).collect::<Vec<i64>>());
    let err = producer
        .send("small", None, record(None, "x".repeat(70_000)))
        .await
        .unwrap_err();
    assert!(matches!(err, ProducerError::RecordTooLarge { .. }), "{err}");
    let err = producer
        .send("small", Some(5), record(None, "x".into()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("small"), "{err}");
    producer.close().await;
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_producer_round_trips_with_idempotence() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let producer = Producer::new(config(&broker, true)).await.unwrap();
    let identity = producer.producer_identity();
    assert!(
        identity.is_some_and(|(id, epoch)| id >= 0 && epoch >= 0),
        "{identity:?}"
    );
    round_trip(&broker, producer, "idempotent").await;
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_producer_refuses_idempotence_without_acks_all() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let err = Producer::new(ProducerConfig {
        acks: 1,
        ..config(&broker, true)
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains("acks"), "{err}");
    broker.stop().await;
}
