use proptest::prelude::*;

use super::*;
use crate::controller::records::*;

fn id(n: u8) -> Uuid {
    Uuid([n; 16])
}

fn topic(name: &str, n: u8) -> MetadataRecord {
    MetadataRecord::Topic(TopicRecord {
        name: name.into(),
        topic_id: id(n),
    })
}

fn partition(topic: u8, index: i32, replicas: Vec<i32>) -> MetadataRecord {
    MetadataRecord::Partition(PartitionRecord {
        partition_id: index,
        topic_id: id(topic),
        isr: replicas.clone(),
        leader: replicas[0],
        leader_epoch: 0,
        partition_epoch: 0,
        replicas,
        ..PartitionRecord::default()
    })
}

fn register(broker: i32, epoch: i64) -> MetadataRecord {
    MetadataRecord::RegisterBroker(RegisterBrokerRecord {
        broker_id: broker,
        incarnation_id: id(100 + broker as u8),
        broker_epoch: epoch,
        end_points: vec![BrokerEndpoint {
            name: "PLAINTEXT".into(),
            host: "localhost".into(),
            port: 9092 + broker as u16,
            security_protocol: 0,
        }],
        fenced: true,
        ..RegisterBrokerRecord::default()
    })
}

fn replay_all(records: &[MetadataRecord]) -> Result<MetadataImage, ImageError> {
    let mut image = MetadataImage::empty();
    for (offset, record) in records.iter().enumerate() {
        image.replay(offset as i64, 1, record)?;
    }
    Ok(image)
}

#[test]
fn topics_partitions_configs_and_removal() {
    let image = replay_all(&[
        topic("a", 1),
        partition(1, 0, vec![1]),
        partition(1, 1, vec![2, 1]),
        MetadataRecord::Config(ConfigRecord {
            resource_type: CONFIG_RESOURCE_TOPIC,
            resource_name: "a".into(),
            name: "retention.ms".into(),
            value: Some("5".into()),
        }),
    ])
    .expect("applies");
    assert_eq!(image.offset, 3);
    let a = image.topic("a").expect("a");
    assert_eq!(a.partitions.len(), 2);
    assert_eq!(image.partition("a", 1).map(|p| p.leader), Some(2));
    assert_eq!(
        image
            .configs_of(&ConfigResource::topic("a"))
            .get("retention.ms"),
        Some(&"5".to_string())
    );
    image.check().expect("consistent");

    let mut next = image.clone();
    next.replay(
        4,
        1,
        &MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id: id(1) }),
    )
    .expect("removes");
    assert!(next.topic("a").is_none());
    assert!(next.configs.is_empty(), "the topic's configs go with it");
    // The old image is untouched: images are swapped whole.
    assert!(image.topic("a").is_some());
}

#[test]
fn partition_changes_move_epochs_as_kafka_does() {
    let mut image = replay_all(&[topic("a", 1), partition(1, 0, vec![1, 2, 3])]).expect("applies");
    let change = |isr: Option<Vec<i32>>, leader: i32| {
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 0,
            topic_id: id(1),
            isr,
            leader,
            ..PartitionChangeRecord::default()
        })
    };
    image
        .replay(2, 1, &change(Some(vec![1, 2]), LEADER_UNCHANGED))
        .expect("isr");
    let p = image.partition("a", 0).expect("p").clone();
    assert_eq!(
        (p.isr.clone(), p.leader, p.leader_epoch, p.partition_epoch),
        (vec![1, 2], 1, 0, 1)
    );
    image.replay(3, 1, &change(None, 2)).expect("leader");
    let p = image.partition("a", 0).expect("p").clone();
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 2));
    // A leader outside the ISR does not apply, and the image is left as it was.
    let before = image.clone();
    let error = image
        .replay(4, 1, &change(None, 3))
        .expect_err("3 is not in the ISR");
    assert!(error.reason.contains("not in the ISR"), "{error}");
    assert_eq!(image, before);
}

#[test]
fn records_that_disagree_with_the_image_are_named() {
    let cases: Vec<(Vec<MetadataRecord>, &str)> = vec![
        (vec![partition(1, 0, vec![1])], "no topic has id"),
        (vec![topic("a", 1), topic("a", 2)], "exists already"),
        (vec![topic("a", 1), topic("b", 1)], "is taken already"),
        (vec![topic("a", 1), partition(1, 1, vec![1])], "which has 0"),
        (vec![topic("a", 1), partition(1, 0, vec![1, 1])], "twice"),
        (
            vec![
                topic("a", 1),
                partition(1, 0, vec![1, 2]),
                MetadataRecord::PartitionChange(PartitionChangeRecord {
                    partition_id: 0,
                    topic_id: id(1),
                    eligible_leader_replicas: Some(vec![2]),
                    ..PartitionChangeRecord::default()
                }),
            ],
            "twice in the ISR [1, 2] and ELR [2]",
        ),
        (
            vec![MetadataRecord::RemoveTopic(RemoveTopicRecord {
                topic_id: id(9),
            })],
            "no topic has id",
        ),
        (
            vec![
                register(1, 5),
                MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
                    broker_id: 1,
                    broker_epoch: 4,
                    fenced: FENCED_CHANGE_UNFENCE,
                    ..BrokerRegistrationChangeRecord::default()
                }),
            ],
            "has epoch 5",
        ),
        (
            vec![
                MetadataRecord::ProducerIds(ProducerIdsRecord {
                    broker_id: 1,
                    broker_epoch: 1,
                    next_producer_id: 2000,
                }),
                MetadataRecord::ProducerIds(ProducerIdsRecord {
                    broker_id: 1,
                    broker_epoch: 1,
                    next_producer_id: 1000,
                }),
            ],
            "is not past 2000",
        ),
    ];
    for (records, why) in cases {
        let error = replay_all(&records).expect_err(why);
        assert!(error.to_string().contains(why), "{why}: {error}");
    }
    // A record at or below the image's offset is a replay twice.
    let mut image = replay_all(&[topic("a", 1)]).expect("applies");
    let error = image
        .replay(0, 1, &MetadataRecord::NoOp(NoOpRecord {}))
        .expect_err("twice");
    assert!(error.to_string().contains("not past"), "{error}");
}

#[test]
fn brokers_register_fence_and_unfence() {
    let mut image = replay_all(&[register(1, 0)]).expect("registers");
    assert!(image.brokers[&1].fenced);
    let change = |fenced, shutdown| {
        MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
            broker_id: 1,
            broker_epoch: 0,
            fenced,
            in_controlled_shutdown: shutdown,
            log_dirs: vec![],
        })
    };
    image
        .replay(1, 1, &change(FENCED_CHANGE_UNFENCE, 0))
        .expect("unfence");
    assert!(image.brokers[&1].is_active());
    image
        .replay(2, 1, &change(FENCED_CHANGE_NONE, 1))
        .expect("shutdown");
    assert!(!image.brokers[&1].is_active());
    // A restart registers a new incarnation with a new epoch.
    image.replay(3, 1, &register(1, 3)).expect("re-registers");
    assert_eq!(image.brokers[&1].epoch, 3);
    assert!(image.brokers[&1].fenced);
    image
        .replay(
            4,
            1,
            &MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
                broker_id: 1,
                broker_epoch: 3,
            }),
        )
        .expect("unregisters");
    assert!(image.brokers.is_empty());
}

/// Random valid histories: a small model decides what is valid to write next.
fn history() -> impl Strategy<Value = Vec<MetadataRecord>> {
    proptest::collection::vec((0u8..7, 0u8..6, 1i32..4, any::<u16>()), 1..60).prop_map(|ops| {
        let mut image = MetadataImage::empty();
        let mut records = Vec::new();
        let mut next_id = 1u8;
        for (kind, target, n, value) in ops {
            let name = format!("t{target}");
            let record = match kind {
                0 if image.topic(&name).is_none() => {
                    let r = topic(&name, next_id);
                    next_id += 1;
                    r
                }
                1 => match image.topic(&name) {
                    // Now and then an ISR shrunk to the leader, the others in the ELR (a
                    // snapshot writes them at PartitionRecord v2).
                    Some(t) => {
                        let mut r =
                            partition(t.id.0[0], t.partitions.len() as i32, (1..=n).collect());
                        if let MetadataRecord::Partition(p) = &mut r {
                            if value % 2 == 0 && n > 1 {
                                p.isr = vec![1];
                                p.eligible_leader_replicas = Some((2..=n).collect());
                            }
                        }
                        r
                    }
                    None => continue,
                },
                2 => match image.topic(&name) {
                    Some(t) => MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id: t.id }),
                    None => continue,
                },
                3 => MetadataRecord::Config(ConfigRecord {
                    resource_type: if n == 1 {
                        CONFIG_RESOURCE_BROKER
                    } else {
                        CONFIG_RESOURCE_TOPIC
                    },
                    resource_name: if n == 1 { String::new() } else { name },
                    name: format!("k{}", value % 3),
                    value: (value % 4 != 0).then(|| value.to_string()),
                }),
                4 => register(n, i64::from(value)),
                5 => MetadataRecord::ProducerIds(ProducerIdsRecord {
                    broker_id: 1,
                    broker_epoch: 0,
                    next_producer_id: image.next_producer_id + 1000,
                }),
                _ => MetadataRecord::FeatureLevel(FeatureLevelRecord {
                    name: if n == 1 {
                        METADATA_VERSION_FEATURE.into()
                    } else {
                        format!("f{n}")
                    },
                    feature_level: (value % 3) as i16,
                }),
            };
            let offset = records.len() as i64;
            image
                .replay(offset, 1, &record)
                .expect("the model writes only valid records");
            records.push(record);
        }
        records
    })
}

proptest! {
    #[test]
    fn a_snapshot_of_an_image_replays_to_the_same_image(records in history()) {
        let image = replay_all(&records).expect("applies");
        image.check().expect("consistent");
        // Through the wire format too: each record framed and read back.
        let snapshot: Vec<MetadataRecord> = image
            .to_records()
            .iter()
            .map(|r| MetadataRecord::decode(r.encode()).expect("decodes"))
            .collect();
        if let Some(MetadataRecord::FeatureLevel(first)) = snapshot.first() {
            if image.features.contains_key(METADATA_VERSION_FEATURE) {
                prop_assert_eq!(first.name.as_str(), METADATA_VERSION_FEATURE);
            }
        }
        let mut loaded = replay_all(&snapshot).expect("a snapshot applies");
        loaded.offset = image.offset;
        loaded.epoch = image.epoch;
        prop_assert_eq!(loaded, image);
    }
}
