use super::*;
use crate::controller::records::CONFIG_RESOURCE_TOPIC;
use crate::protocol::broker_registration::{BrokerRegistrationFeature, BrokerRegistrationListener};
use crate::protocol::types::{NodeId, Offset};

/// Accepts the few keys the tests use, with numeric values where Kafka's are numeric.
#[derive(Debug)]
struct TestPolicy;

impl ConfigPolicy for TestPolicy {
    fn check(
        &self,
        _resource: &ConfigResource,
        overrides: &BTreeMap<String, String>,
    ) -> Result<(), String> {
        for (k, v) in overrides {
            match k.as_str() {
                "retention.ms" | "log.retention.ms" | "min.insync.replicas" => {
                    v.parse::<i64>()
                        .map_err(|_| format!("'{k}' must be a number, not '{v}'"))?;
                }
                "cleanup.policy" => {
                    for item in v.split(',') {
                        if item != "delete" && item != "compact" {
                            return Err(format!("'{item}' is not a cleanup policy"));
                        }
                    }
                }
                UNCLEAN_LEADER_ELECTION_CONFIG if v == "true" || v == "false" => {}
                _ => return Err(format!("unknown config '{k}'")),
            }
        }
        Ok(())
    }
}

const CLUSTER: &str = "cluster-one";

fn controller() -> Controller {
    Controller::new(ControllerConfig::new(1, CLUSTER, 7), Arc::new(TestPolicy))
}

/// An active controller of epoch 1 on an empty log (offset 0 holds the leader's record),
/// with the bootstrap committed.
fn active(now_ms: u64) -> Controller {
    let mut c = controller();
    c.replay_committed(0, 0, 1, &[]).unwrap();
    c.become_active(now_ms, 1, 1);
    commit_all(&mut c);
    c
}

/// Commits every proposal written so far, in order, and returns the replies released.
fn commit_all(c: &mut Controller) -> Vec<(RequestId, Reply)> {
    let ready = c.ready();
    let mut replies = ready.replies;
    for p in ready.proposals {
        c.replay_committed(p.base_offset, p.last_offset(), p.epoch, &p.records)
            .unwrap();
        replies.extend(c.ready().replies);
    }
    replies
}

fn registration(broker_id: i32, incarnation: u8) -> BrokerRegistrationRequest {
    BrokerRegistrationRequest {
        broker_id: NodeId(broker_id),
        cluster_id: CLUSTER.into(),
        incarnation_id: Uuid([incarnation; 16]),
        listeners: vec![BrokerRegistrationListener {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9092 + broker_id as u16,
            security_protocol: 0,
        }],
        features: vec![BrokerRegistrationFeature {
            name: METADATA_VERSION_FEATURE.into(),
            min_supported_version: 1,
            max_supported_version: METADATA_VERSION_LEVEL,
        }],
        log_dirs: vec![Uuid([0x40 + broker_id as u8; 16])],
        ..BrokerRegistrationRequest::default()
    }
}

fn heartbeat(broker_id: i32, epoch: i64, offset: i64) -> BrokerHeartbeatRequest {
    BrokerHeartbeatRequest {
        broker_id: NodeId(broker_id),
        broker_epoch: epoch,
        current_metadata_offset: Offset(offset),
        ..BrokerHeartbeatRequest::default()
    }
}

/// One request, committed, and its reply.
fn call(c: &mut Controller, now_ms: u64, request: Request) -> Reply {
    c.handle(now_ms, 99, request);
    let mut replies = commit_all(c);
    assert_eq!(replies.len(), 1, "{replies:?}");
    let (id, reply) = replies.remove(0);
    assert_eq!(id, 99);
    reply
}

/// The committed image's fenced brokers, by id.
fn fenced_brokers(c: &Controller) -> Vec<i32> {
    c.committed()
        .brokers
        .values()
        .filter(|b| b.fenced)
        .map(|b| b.id)
        .collect()
}

/// Registers and unfences `broker_id`; its epoch.
fn join(c: &mut Controller, now_ms: u64, broker_id: i32) -> i64 {
    let Reply::RegisterBroker(Ok(epoch)) = call(
        c,
        now_ms,
        Request::RegisterBroker(registration(broker_id, 1)),
    ) else {
        panic!("registration refused");
    };
    let offset = c.applied_offset();
    let Reply::Heartbeat(Ok(state)) = call(
        c,
        now_ms,
        Request::Heartbeat(heartbeat(broker_id, epoch, offset)),
    ) else {
        panic!("heartbeat refused");
    };
    assert!(!state.is_fenced);
    epoch
}

fn create(
    c: &mut Controller,
    name: &str,
    partitions: i32,
    factor: i16,
) -> Result<CreatedTopic, ControllerError> {
    let topic = NewTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: factor,
        assignments: vec![],
        configs: vec![],
    };
    let Reply::CreateTopics(mut results) = call(
        c,
        0,
        Request::CreateTopics {
            topics: vec![topic],
            validate_only: false,
        },
    ) else {
        panic!("not a CreateTopics reply");
    };
    results.remove(0).1
}

#[test]
fn controller_a_new_cluster_starts_with_its_metadata_version() {
    let mut c = controller();
    c.replay_committed(0, 0, 1, &[]).unwrap();
    c.become_active(0, 1, 1);
    let ready = c.ready();
    assert_eq!(ready.proposals.len(), 1);
    assert_eq!(ready.proposals[0].base_offset, 1);
    assert_eq!(
        ready.proposals[0].records,
        vec![MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: METADATA_VERSION_FEATURE.into(),
            feature_level: METADATA_VERSION_LEVEL,
        })]
    );
    let p = &ready.proposals[0];
    c.replay_committed(p.base_offset, p.last_offset(), p.epoch, &p.records)
        .unwrap();
    assert_eq!(
        c.committed().metadata_version(),
        Some(METADATA_VERSION_LEVEL)
    );
    // A controller that becomes active on a log that has it writes nothing.
    c.become_inactive();
    c.replay_committed(2, 2, 2, &[]).unwrap();
    c.become_active(0, 2, 3);
    assert!(c.ready().proposals.is_empty());
}

#[test]
fn controller_a_broker_epoch_is_the_offset_of_its_registration() {
    let mut c = active(0);
    c.handle(0, 1, Request::RegisterBroker(registration(3, 1)));
    let ready = c.ready();
    assert!(ready.replies.is_empty(), "the reply waits for the commit");
    let p = &ready.proposals[0];
    let MetadataRecord::RegisterBroker(r) = &p.records[0] else {
        panic!("{:?}", p.records);
    };
    assert_eq!(r.broker_epoch, p.base_offset, "epoch = the record's offset");
    assert!(r.fenced, "a broker registers fenced");
    c.replay_committed(p.base_offset, p.last_offset(), p.epoch, &p.records)
        .unwrap();
    let replies = c.ready().replies;
    assert_eq!(replies, vec![(1, Reply::RegisterBroker(Ok(p.base_offset)))]);
    assert!(c.committed().brokers[&3].fenced);
}

#[test]
fn controller_a_broker_is_unfenced_once_caught_up_and_fenced_when_silent() {
    let mut c = active(0);
    let Reply::RegisterBroker(Ok(epoch)) =
        call(&mut c, 0, Request::RegisterBroker(registration(2, 1)))
    else {
        panic!()
    };
    // Behind its own registration: stays fenced, not caught up.
    let reply = call(
        &mut c,
        100,
        Request::Heartbeat(heartbeat(2, epoch, epoch - 1)),
    );
    assert_eq!(
        reply,
        Reply::Heartbeat(Ok(HeartbeatReply {
            is_caught_up: false,
            is_fenced: true,
            should_shut_down: false
        }))
    );
    // Caught up but asking to stay fenced (still loading its logs).
    let mut wants = heartbeat(2, epoch, epoch);
    wants.want_fence = true;
    let Reply::Heartbeat(Ok(state)) = call(&mut c, 200, Request::Heartbeat(wants)) else {
        panic!()
    };
    assert!(state.is_caught_up && state.is_fenced);
    let Reply::Heartbeat(Ok(state)) =
        call(&mut c, 300, Request::Heartbeat(heartbeat(2, epoch, epoch)))
    else {
        panic!()
    };
    assert!(!state.is_fenced);
    assert!(!c.committed().brokers[&2].fenced);
    // A topic led by it.
    let created = create(&mut c, "t", 2, 1).unwrap();
    assert_eq!(created.num_partitions, 2);
    let p = c.committed().partition("t", 0).unwrap().clone();
    assert_eq!((p.leader, p.isr.clone(), p.leader_epoch), (2, vec![2], 0));
    // Silent past the session timeout: fenced at the first tick after it, leaderless.
    let timeout_ms = c.config.session_timeout_ms;
    assert_eq!(c.next_deadline_ms(), Some(300 + timeout_ms));
    c.tick(300 + timeout_ms - 1);
    assert!(c.ready().proposals.is_empty(), "not before the deadline");
    c.tick(300 + timeout_ms);
    commit_all(&mut c);
    let broker = &c.committed().brokers[&2];
    assert!(broker.fenced);
    for index in 0..2 {
        let p = c.committed().partition("t", index).unwrap();
        assert_eq!(p.leader, NO_LEADER, "a fenced broker leads nothing");
        // KIP-966: the last ISR member leaves the ISR for the ELR, which keeps its claim.
        assert!(p.isr.is_empty(), "{:?}", p.isr);
        assert_eq!(p.elr, vec![2]);
        assert_eq!(p.leader_epoch, 1);
    }
    assert_eq!(c.next_deadline_ms(), None, "no unfenced broker left");
    // It comes back: unfenced, and leads its partitions again in a new leader epoch.
    let offset = c.applied_offset();
    let Reply::Heartbeat(Ok(state)) = call(
        &mut c,
        20_000,
        Request::Heartbeat(heartbeat(2, epoch, offset)),
    ) else {
        panic!()
    };
    assert!(!state.is_fenced);
    for index in 0..2 {
        let p = c.committed().partition("t", index).unwrap();
        assert_eq!((p.leader, p.leader_epoch), (2, 2));
    }
}

#[test]
fn controller_fences_one_stale_broker_per_tick() {
    let mut c = active(0);
    join(&mut c, 0, 1);
    join(&mut c, 0, 2);
    c.tick(60_000);
    commit_all(&mut c);
    let fenced = fenced_brokers(&c);
    assert_eq!(fenced.len(), 1, "{fenced:?}");
    c.tick(60_000);
    commit_all(&mut c);
    assert!(c.committed().brokers.values().all(|b| b.fenced));
}

#[test]
fn controller_refuses_stale_epochs_and_duplicate_incarnations() {
    let mut c = active(0);
    let epoch = join(&mut c, 0, 1);
    let reply = call(&mut c, 10, Request::Heartbeat(heartbeat(1, epoch - 1, 0)));
    assert_eq!(
        reply,
        Reply::Heartbeat(Err(ControllerError::StaleBrokerEpoch {
            broker_id: 1,
            epoch: epoch - 1,
            current: epoch
        }))
    );
    let reply = call(&mut c, 10, Request::Heartbeat(heartbeat(5, 0, 0)));
    assert_eq!(
        reply,
        Reply::Heartbeat(Err(ControllerError::BrokerIdNotRegistered { broker_id: 5 }))
    );
    // Another incarnation while the session lives is a duplicate.
    let reply = call(&mut c, 10, Request::RegisterBroker(registration(1, 2)));
    assert_eq!(
        reply,
        Reply::RegisterBroker(Err(ControllerError::DuplicateBrokerRegistration {
            broker_id: 1
        }))
    );
    // The same incarnation re-registers: a new epoch, fenced until caught up again.
    let Reply::RegisterBroker(Ok(again)) =
        call(&mut c, 10, Request::RegisterBroker(registration(1, 1)))
    else {
        panic!()
    };
    assert!(again > epoch);
    assert!(c.committed().brokers[&1].fenced);
    // Once its session expired, a new incarnation may take the id.
    let Reply::RegisterBroker(Ok(_)) =
        call(&mut c, 60_000, Request::RegisterBroker(registration(1, 3)))
    else {
        panic!()
    };
    assert_eq!(c.committed().brokers[&1].incarnation_id, Uuid([3; 16]));
    // Wrong cluster, or no metadata.version the cluster runs.
    let mut foreign = registration(4, 1);
    foreign.cluster_id = "other".into();
    assert!(matches!(
        call(&mut c, 0, Request::RegisterBroker(foreign)),
        Reply::RegisterBroker(Err(ControllerError::InconsistentClusterId { .. }))
    ));
    let mut old = registration(4, 1);
    old.features[0].max_supported_version = METADATA_VERSION_LEVEL - 1;
    assert!(matches!(
        call(&mut c, 0, Request::RegisterBroker(old)),
        Reply::RegisterBroker(Err(ControllerError::UnsupportedFeature { .. }))
    ));
}

#[test]
fn controller_controlled_shutdown_moves_leadership_before_allowing_it() {
    let mut c = active(0);
    let e1 = join(&mut c, 0, 1);
    join(&mut c, 0, 2);
    create(&mut c, "a", 4, 1).unwrap();
    let led_by_1 = |c: &Controller| {
        c.committed()
            .topic("a")
            .unwrap()
            .partitions
            .values()
            .filter(|p| p.leader == 1)
            .count()
    };
    assert!(led_by_1(&c) > 0);
    let mut bye = heartbeat(1, e1, c.applied_offset());
    bye.want_shut_down = true;
    let Reply::Heartbeat(Ok(state)) = call(&mut c, 100, Request::Heartbeat(bye.clone())) else {
        panic!()
    };
    // Its partitions have it as their only replica: they go leaderless, and then it may go.
    assert!(c.committed().brokers[&1].in_controlled_shutdown);
    assert_eq!(led_by_1(&c), 0);
    assert!(state.should_shut_down);
    // Kafka's SHUTDOWN_NOW: fenced as its shutdown completes, so that its next incarnation
    // registers at once, its old session still fresh.
    assert!(state.is_fenced);
    assert!(c.committed().brokers[&1].fenced);
    let Reply::RegisterBroker(Ok(again)) =
        call(&mut c, 200, Request::RegisterBroker(registration(1, 2)))
    else {
        panic!("the next incarnation is refused while the old session is fresh")
    };
    assert!(again > e1);
    // A fenced broker may always shut down at once.
    let Reply::RegisterBroker(Ok(e3)) =
        call(&mut c, 0, Request::RegisterBroker(registration(3, 1)))
    else {
        panic!()
    };
    let mut bye = heartbeat(3, e3, 0);
    bye.want_shut_down = true;
    let Reply::Heartbeat(Ok(state)) = call(&mut c, 100, Request::Heartbeat(bye)) else {
        panic!()
    };
    assert!(state.should_shut_down && state.is_fenced);
}

#[test]
fn controller_creates_topics_as_kafka_validates_them() {
    let mut c = active(0);
    // No broker yet: nothing can hold a replica.
    assert!(matches!(
        create(&mut c, "early", 1, 1),
        Err(ControllerError::InvalidReplicationFactor { .. })
    ));
    join(&mut c, 0, 1);
    let t = create(&mut c, "orders", -1, -1).unwrap();
    assert_eq!((t.num_partitions, t.replication_factor), (1, 1));
    assert_eq!(c.committed().topic("orders").unwrap().id, t.id);
    assert!(matches!(
        create(&mut c, "orders", 1, 1),
        Err(ControllerError::TopicAlreadyExists { .. })
    ));
    assert!(create(&mut c, "orders_", 1, 1).is_ok());
    assert!(
        matches!(
            create(&mut c, "orders.", 1, 1),
            Err(ControllerError::InvalidTopic { .. })
        ),
        "collides with orders_"
    );
    assert!(matches!(
        create(&mut c, "bad name", 1, 1),
        Err(ControllerError::InvalidTopic { .. })
    ));
    assert!(matches!(
        create(&mut c, METADATA_TOPIC_NAME, 1, 1),
        Err(ControllerError::InvalidTopic { .. })
    ));
    assert!(matches!(
        create(&mut c, "zero", 0, 1),
        Err(ControllerError::InvalidPartitions { .. })
    ));
    // A factor needs as many usable brokers, and is at most REPLICATION_FACTOR_MAX.
    let Err(ControllerError::InvalidReplicationFactor { reason, .. }) = create(&mut c, "rf3", 1, 3)
    else {
        panic!("three replicas on one broker")
    };
    assert!(reason.contains("cannot be reached"), "{reason}");
    let Err(ControllerError::InvalidReplicationFactor { reason, .. }) =
        create(&mut c, "rf8", 1, REPLICATION_FACTOR_MAX + 1)
    else {
        panic!("a factor above the most replicas a partition may have")
    };
    assert!(reason.contains("more than the 7"), "{reason}");
    // Configs go through the policy, and into the image with the topic.
    let topic = |name: &str, configs: Vec<(&str, Option<&str>)>| NewTopic {
        name: name.into(),
        num_partitions: 1,
        replication_factor: 1,
        assignments: vec![],
        configs: configs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect(),
    };
    let Reply::CreateTopics(results) = call(
        &mut c,
        0,
        Request::CreateTopics {
            topics: vec![
                topic("kept", vec![("retention.ms", Some("1000"))]),
                topic("badcfg", vec![("retention.ms", Some("soon"))]),
                topic("nullcfg", vec![("retention.ms", None)]),
                topic("kept", vec![]),
            ],
            validate_only: false,
        },
    ) else {
        panic!()
    };
    assert!(results[0].1.is_ok());
    assert!(
        matches!(&results[1].1, Err(ControllerError::InvalidConfig { reason, .. }) if reason.contains("soon"))
    );
    assert!(matches!(
        results[2].1,
        Err(ControllerError::InvalidConfig { .. })
    ));
    assert!(matches!(
        results[3].1,
        Err(ControllerError::InvalidRequest { .. })
    ));
    assert_eq!(
        c.committed().configs_of(&ConfigResource::topic("kept")),
        BTreeMap::from([("retention.ms".to_string(), "1000".to_string())])
    );
    assert!(c.committed().topic("badcfg").is_none());
    // validate_only writes nothing.
    let before = c.applied_offset();
    let Reply::CreateTopics(results) = call(
        &mut c,
        0,
        Request::CreateTopics {
            topics: vec![topic("dry", vec![])],
            validate_only: true,
        },
    ) else {
        panic!()
    };
    assert!(results[0].1.is_ok());
    assert_eq!(c.applied_offset(), before);
    assert!(c.committed().topic("dry").is_none());
}

#[test]
fn controller_places_explicit_assignments_and_checks_them() {
    let mut c = active(0);
    join(&mut c, 0, 1);
    join(&mut c, 0, 2);
    let assigned = |assignments: Vec<(i32, Vec<i32>)>| NewTopic {
        name: "x".into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments,
        configs: vec![],
    };
    let try_create = |c: &mut Controller, t: NewTopic| {
        let Reply::CreateTopics(mut r) = call(
            c,
            0,
            Request::CreateTopics {
                topics: vec![t],
                validate_only: false,
            },
        ) else {
            panic!()
        };
        r.remove(0).1
    };
    assert!(matches!(
        try_create(&mut c, assigned(vec![(0, vec![1]), (2, vec![2])])),
        Err(ControllerError::InvalidReplicaAssignment { .. })
    ));
    assert!(matches!(
        try_create(&mut c, assigned(vec![(0, vec![9])])),
        Err(ControllerError::InvalidReplicaAssignment { .. })
    ));
    assert!(matches!(
        try_create(&mut c, assigned(vec![(0, (1..=8).collect())])),
        Err(ControllerError::InvalidReplicationFactor { .. })
    ));
    let mut both = assigned(vec![(0, vec![1])]);
    both.num_partitions = 1;
    assert!(matches!(
        try_create(&mut c, both),
        Err(ControllerError::InvalidRequest { .. })
    ));
    try_create(&mut c, assigned(vec![(1, vec![1]), (0, vec![2])])).unwrap();
    let topic = c.committed().topic("x").unwrap().clone();
    assert_eq!(topic.partitions[&0].replicas, vec![2]);
    assert_eq!(topic.partitions[&1].replicas, vec![1]);
    assert_eq!(topic.partitions[&1].directories, vec![Uuid([0x41; 16])]);
    // Placement spreads partitions over the unfenced brokers.
    create(&mut c, "spread", 4, 1).unwrap();
    let leaders: BTreeSet<i32> = c
        .committed()
        .topic("spread")
        .unwrap()
        .partitions
        .values()
        .map(|p| p.leader)
        .collect();
    assert_eq!(leaders, BTreeSet::from([1, 2]));
}

fn grow(name: &str, count: i32) -> NewPartitions {
    NewPartitions {
        name: name.into(),
        count,
        assignments: None,
    }
}

#[test]
fn controller_deletes_and_grows_topics() {
    let mut c = active(0);
    join(&mut c, 0, 1);
    let t = create(&mut c, "t", 1, 1).unwrap();
    let Reply::CreatePartitions(r) = call(
        &mut c,
        0,
        Request::CreatePartitions {
            topics: vec![grow("t", 3), grow("missing", 3), grow("t", 5)],
            validate_only: false,
        },
    ) else {
        panic!()
    };
    assert!(r[0].1.is_ok());
    assert!(matches!(r[1].1, Err(ControllerError::UnknownTopic { .. })));
    assert!(matches!(
        r[2].1,
        Err(ControllerError::InvalidRequest { .. })
    ));
    assert_eq!(c.committed().topic("t").unwrap().partitions.len(), 3);
    let Reply::CreatePartitions(r) = call(
        &mut c,
        0,
        Request::CreatePartitions {
            topics: vec![grow("t", 2)],
            validate_only: false,
        },
    ) else {
        panic!()
    };
    assert!(
        matches!(&r[0].1, Err(ControllerError::InvalidPartitions { reason, .. }) if reason.contains("higher"))
    );
    let Reply::DeleteTopics(r) = call(
        &mut c,
        0,
        Request::DeleteTopics(vec![
            TopicRef::Id(t.id),
            TopicRef::Name("nope".into()),
            TopicRef::Id(Uuid([9; 16])),
        ]),
    ) else {
        panic!()
    };
    assert_eq!(r[0].1, Ok(("t".to_string(), t.id)));
    assert!(matches!(r[1].1, Err(ControllerError::UnknownTopic { .. })));
    assert!(matches!(
        r[2].1,
        Err(ControllerError::UnknownTopicId { .. })
    ));
    assert!(c.committed().topic("t").is_none());
    // With deletion disabled.
    c.config.delete_topic_enable = false;
    create(&mut c, "kept", 1, 1).unwrap();
    let Reply::DeleteTopics(r) = call(
        &mut c,
        0,
        Request::DeleteTopics(vec![TopicRef::Name("kept".into())]),
    ) else {
        panic!()
    };
    assert!(matches!(
        r[0].1,
        Err(ControllerError::TopicDeletionDisabled { .. })
    ));
}

#[test]
fn controller_alters_configs_incrementally_and_whole() {
    let mut c = active(0);
    join(&mut c, 0, 1);
    create(&mut c, "t", 1, 1).unwrap();
    let topic = ConfigResource::topic("t");
    let alter = |c: &mut Controller, resource: &ConfigResource, ops: Vec<ConfigOp>| {
        let Reply::AlterConfigs(mut r) = call(
            c,
            0,
            Request::AlterConfigs {
                changes: vec![(resource.clone(), ops)],
                validate_only: false,
            },
        ) else {
            panic!()
        };
        r.remove(0).1
    };
    alter(
        &mut c,
        &topic,
        vec![ConfigOp::Set("retention.ms".into(), "5".into())],
    )
    .unwrap();
    alter(
        &mut c,
        &topic,
        vec![ConfigOp::Append {
            key: "cleanup.policy".into(),
            items: vec!["compact".into()],
            default: "delete".into(),
        }],
    )
    .unwrap();
    assert_eq!(
        c.committed().configs_of(&topic),
        BTreeMap::from([
            ("cleanup.policy".to_string(), "delete,compact".to_string()),
            ("retention.ms".to_string(), "5".to_string()),
        ])
    );
    alter(
        &mut c,
        &topic,
        vec![ConfigOp::Subtract {
            key: "cleanup.policy".into(),
            items: vec!["delete".into()],
            default: "delete".into(),
        }],
    )
    .unwrap();
    assert_eq!(
        c.committed().configs_of(&topic)["cleanup.policy"],
        "compact"
    );
    // A bad value changes nothing.
    let before = c.committed().configs_of(&topic);
    let err = alter(
        &mut c,
        &topic,
        vec![ConfigOp::Set("retention.ms".into(), "x".into())],
    )
    .unwrap_err();
    assert!(matches!(err, ControllerError::InvalidConfig { .. }));
    assert_eq!(c.committed().configs_of(&topic), before);
    // AlterConfigs: the given keys, and nothing else.
    alter(
        &mut c,
        &topic,
        vec![
            ConfigOp::Set("retention.ms".into(), "7".into()),
            ConfigOp::DeleteOthers,
        ],
    )
    .unwrap();
    assert_eq!(
        c.committed().configs_of(&topic),
        BTreeMap::from([("retention.ms".to_string(), "7".to_string())])
    );
    alter(
        &mut c,
        &topic,
        vec![ConfigOp::Delete("retention.ms".into())],
    )
    .unwrap();
    assert!(c.committed().configs_of(&topic).is_empty());
    // Broker resources: the cluster default and one broker.
    alter(
        &mut c,
        &ConfigResource::broker(None),
        vec![ConfigOp::Set("log.retention.ms".into(), "9".into())],
    )
    .unwrap();
    assert_eq!(
        c.committed().configs_of(&ConfigResource::broker(None))["log.retention.ms"],
        "9"
    );
    assert!(matches!(
        alter(&mut c, &ConfigResource::topic("nope"), vec![]),
        Err(ControllerError::UnknownTopic { .. })
    ));
    let bogus = ConfigResource {
        resource_type: CONFIG_RESOURCE_TOPIC + 7,
        name: "x".into(),
    };
    assert!(matches!(
        alter(&mut c, &bogus, vec![]),
        Err(ControllerError::InvalidRequest { .. })
    ));
}

#[test]
fn controller_producer_id_blocks_never_overlap() {
    let mut c = active(0);
    let epoch = join(&mut c, 0, 1);
    let ask = |epoch| {
        Request::AllocateProducerIds(AllocateProducerIdsRequest {
            broker_id: NodeId(1),
            broker_epoch: epoch,
        })
    };
    let mut blocks = Vec::new();
    for _ in 0..3 {
        let Reply::AllocateProducerIds(Ok(block)) = call(&mut c, 0, ask(epoch)) else {
            panic!()
        };
        blocks.push(block);
    }
    assert_eq!(blocks, vec![(0, 1000), (1000, 1000), (2000, 1000)]);
    assert_eq!(c.committed().next_producer_id, 3000);
    assert!(matches!(
        call(&mut c, 0, ask(epoch + 1)),
        Reply::AllocateProducerIds(Err(ControllerError::StaleBrokerEpoch { .. }))
    ));
}

#[test]
fn controller_replies_wait_for_the_commit_and_leadership_loss_refuses_them() {
    let mut c = active(0);
    join(&mut c, 0, 1);
    // A write, uncommitted; then a read-only request (a heartbeat that changes nothing).
    c.handle(
        0,
        1,
        Request::CreateTopics {
            topics: vec![NewTopic {
                name: "t".into(),
                num_partitions: 1,
                replication_factor: 1,
                assignments: vec![],
                configs: vec![],
            }],
            validate_only: false,
        },
    );
    let epoch = c.working().brokers[&1].epoch;
    c.handle(0, 2, Request::Heartbeat(heartbeat(1, epoch, 0)));
    let ready = c.ready();
    assert_eq!(ready.proposals.len(), 1);
    assert!(ready.replies.is_empty(), "{:?}", ready.replies);
    // Leadership lost before the commit: both are NOT_CONTROLLER.
    c.become_inactive();
    let replies = c.ready().replies;
    assert_eq!(replies.len(), 2);
    assert!(
        matches!(&replies[0].1, Reply::CreateTopics(r) if r[0].1 == Err(ControllerError::NotController))
    );
    assert_eq!(
        replies[1].1,
        Reply::Heartbeat(Err(ControllerError::NotController))
    );
    // The batch may still commit: a standby applies it as any other.
    let p = &ready.proposals[0];
    c.replay_committed(p.base_offset, p.last_offset(), p.epoch, &p.records)
        .unwrap();
    assert!(c.committed().topic("t").is_some());
    // An inactive controller refuses at once.
    c.handle(
        0,
        3,
        Request::DeleteTopics(vec![TopicRef::Name("t".into())]),
    );
    let replies = c.ready().replies;
    assert!(
        matches!(&replies[0].1, Reply::DeleteTopics(r) if r[0].1 == Err(ControllerError::NotController))
    );
}

#[test]
fn controller_a_standby_replaying_the_log_has_the_active_image() {
    let mut c = active(0);
    let mut log: Vec<Proposal> = Vec::new();
    let drive = |c: &mut Controller, log: &mut Vec<Proposal>, now_ms, request| {
        c.handle(now_ms, 0, request);
        let ready = c.ready();
        for p in ready.proposals {
            c.replay_committed(p.base_offset, p.last_offset(), p.epoch, &p.records)
                .unwrap();
            log.push(p);
        }
    };
    drive(
        &mut c,
        &mut log,
        0,
        Request::RegisterBroker(registration(1, 1)),
    );
    let epoch = c.working().brokers[&1].epoch;
    let offset = c.applied_offset();
    drive(
        &mut c,
        &mut log,
        0,
        Request::Heartbeat(heartbeat(1, epoch, offset)),
    );
    for n in 0..5 {
        drive(
            &mut c,
            &mut log,
            0,
            Request::CreateTopics {
                topics: vec![NewTopic {
                    name: format!("t{n}"),
                    num_partitions: n + 1,
                    replication_factor: 1,
                    assignments: vec![],
                    configs: vec![],
                }],
                validate_only: false,
            },
        );
    }
    c.tick(100_000);
    for p in c.ready().proposals {
        c.replay_committed(p.base_offset, p.last_offset(), p.epoch, &p.records)
            .unwrap();
        log.push(p);
    }
    let mut standby = controller();
    standby.replay_committed(0, 0, 1, &[]).unwrap();
    // The bootstrap batch was committed before `log` began.
    let bootstrap = MetadataRecord::FeatureLevel(FeatureLevelRecord {
        name: METADATA_VERSION_FEATURE.into(),
        feature_level: METADATA_VERSION_LEVEL,
    });
    standby.replay_committed(1, 1, 1, &[bootstrap]).unwrap();
    for p in &log {
        standby
            .replay_committed(p.base_offset, p.last_offset(), p.epoch, &p.records)
            .unwrap();
    }
    assert_eq!(standby.committed(), c.committed());
    // Topic ids come from the seed: the same seed decides the same ids.
    let mut again = active(0);
    let mut log2 = Vec::new();
    drive(
        &mut again,
        &mut log2,
        0,
        Request::RegisterBroker(registration(1, 1)),
    );
    let offset = again.applied_offset();
    drive(
        &mut again,
        &mut log2,
        0,
        Request::Heartbeat(heartbeat(1, epoch, offset)),
    );
    drive(
        &mut again,
        &mut log2,
        0,
        Request::CreateTopics {
            topics: vec![NewTopic {
                name: "t0".into(),
                num_partitions: 1,
                replication_factor: 1,
                assignments: vec![],
                configs: vec![],
            }],
            validate_only: false,
        },
    );
    assert_eq!(
        again.committed().topic("t0").unwrap().id,
        c.committed().topic("t0").unwrap().id
    );
}

#[test]
fn controller_refuses_a_request_larger_than_one_metadata_batch() {
    let mut c = active(0);
    join(&mut c, 0, 1);
    // One topic of the most partitions fits; two in one request do not, and the second is
    // refused alone (the first is created).
    let topic = |name: &str| NewTopic {
        name: name.into(),
        num_partitions: PARTITIONS_PER_TOPIC_MAX,
        replication_factor: 1,
        assignments: vec![],
        configs: vec![],
    };
    let Reply::CreateTopics(results) = call(
        &mut c,
        0,
        Request::CreateTopics {
            topics: vec![topic("big"), topic("bigger")],
            validate_only: false,
        },
    ) else {
        panic!("not a CreateTopics reply");
    };
    assert!(results[0].1.is_ok(), "{:?}", results[0]);
    assert!(
        matches!(&results[1].1, Err(ControllerError::TooLarge { name, .. }) if name == "topic 'bigger'"),
        "{:?}",
        results[1]
    );
    assert_eq!(
        c.committed().topic("big").map(|t| t.partitions.len()),
        Some(10_000)
    );
    assert!(c.committed().topic("bigger").is_none());
    // The byte bound too: a controller whose batches are small refuses by size.
    let mut small = Controller::new(
        ControllerConfig {
            proposal_bytes_max: 4 << 10,
            ..ControllerConfig::new(1, CLUSTER, 7)
        },
        Arc::new(TestPolicy),
    );
    small.replay_committed(0, 0, 1, &[]).unwrap();
    small.become_active(0, 1, 1);
    commit_all(&mut small);
    join(&mut small, 0, 1);
    assert!(matches!(
        create(&mut small, "wide", 1000, 1),
        Err(ControllerError::TooLarge { .. })
    ));
    assert!(create(&mut small, "narrow", 10, 1).is_ok());
}

#[test]
fn controller_migrates_a_legacy_directory_once_and_ids_continue_above_it() {
    use crate::controller::migration::{LegacyDirectory, LegacyTopic};
    let legacy = LegacyDirectory {
        topics: vec![LegacyTopic {
            name: "orders".into(),
            id: Uuid([9; 16]),
            partitions: 3,
            overrides: [("retention.ms".to_string(), "1000".to_string())].into(),
        }],
        cluster_default_configs: [("log.retention.ms".to_string(), "5000".to_string())].into(),
        node_configs: BTreeMap::new(),
        producer_id_block_end: Some(4000),
    };
    let records = legacy.records(1).expect("a valid directory");
    let mut c = active(0);
    assert_eq!(
        call(&mut c, 0, Request::Migrate(records.clone())),
        Reply::Migrate(Ok(()))
    );
    let orders = c.committed().topic("orders").expect("migrated").clone();
    assert_eq!(orders.id, Uuid([9; 16]));
    assert_eq!(orders.partitions.len(), 3);
    assert!(orders
        .partitions
        .values()
        .all(|p| p.leader == 1 && p.isr == [1]));
    assert_eq!(
        c.committed()
            .configs_of(&ConfigResource::topic("orders"))
            .get("retention.ms")
            .map(String::as_str),
        Some("1000")
    );
    // Once only.
    assert!(matches!(
        call(&mut c, 0, Request::Migrate(records)),
        Reply::Migrate(Err(ControllerError::InvalidRequest { .. }))
    ));
    // The node registers and its first block starts at the old end.
    let epoch = join(&mut c, 0, 1);
    let Reply::AllocateProducerIds(Ok((start, _))) = call(
        &mut c,
        0,
        Request::AllocateProducerIds(AllocateProducerIdsRequest {
            broker_id: NodeId(1),
            broker_epoch: epoch,
        }),
    ) else {
        panic!("no block");
    };
    assert_eq!(start, 4000);
    // A directory whose records do not apply is refused whole.
    let mut broken = LegacyDirectory {
        topics: vec![
            LegacyTopic {
                name: "a".into(),
                id: Uuid([7; 16]),
                partitions: 1,
                overrides: BTreeMap::new(),
            },
            LegacyTopic {
                name: "b".into(),
                id: Uuid([7; 16]),
                partitions: 1,
                overrides: BTreeMap::new(),
            },
        ],
        ..LegacyDirectory::default()
    };
    assert!(broken.records(1).is_err(), "two topics with one id");
    broken.topics.truncate(1);
    broken.topics[0].partitions = 0;
    assert!(broken.records(1).is_err(), "a topic without partitions");
}

#[test]
fn controller_bounds_uncommitted_writes() {
    let mut c = active(0);
    let epoch = join(&mut c, 0, 1);
    let ask = Request::AllocateProducerIds(AllocateProducerIdsRequest {
        broker_id: NodeId(1),
        broker_epoch: epoch,
    });
    for id in 0..PENDING_PROPOSALS_MAX as u64 {
        c.handle(0, id, ask.clone());
    }
    let ready = c.ready();
    assert_eq!(ready.proposals.len(), PENDING_PROPOSALS_MAX);
    assert!(ready.replies.is_empty());
    c.handle(0, 7777, ask);
    let replies = c.ready().replies;
    assert_eq!(
        replies,
        vec![(
            7777,
            Reply::AllocateProducerIds(Err(ControllerError::Overloaded {
                what: "uncommitted writes",
                limit: PENDING_PROPOSALS_MAX
            }))
        )]
    );
}

#[test]
#[should_panic(expected = "not the one proposed")]
fn controller_asserts_its_own_batches_commit_unchanged() {
    let mut c = active(0);
    c.handle(0, 1, Request::RegisterBroker(registration(1, 1)));
    let p = c.ready().proposals.remove(0);
    let mut other = p.records.clone();
    if let MetadataRecord::RegisterBroker(r) = &mut other[0] {
        r.broker_id = 2;
    }
    let _ = c.replay_committed(p.base_offset, p.last_offset(), p.epoch, &other);
}

#[test]
fn the_broker_of_the_controllers_own_process_re_registers_at_once() {
    // A combined node restarted after a crash: its new broker incarnation is the one the
    // controller was told runs beside it, so the old incarnation's live session (fresh from
    // the activation) does not hold it back; another incarnation still waits.
    let mut c = Controller::new(
        ControllerConfig {
            colocated_broker: Some((1, Uuid([2; 16]))),
            ..ControllerConfig::new(1, CLUSTER, 7)
        },
        Arc::new(TestPolicy),
    );
    c.replay_committed(0, 0, 1, &[]).unwrap();
    c.become_active(0, 1, 1);
    commit_all(&mut c);
    join(&mut c, 0, 1);
    assert!(matches!(
        call(&mut c, 10, Request::RegisterBroker(registration(1, 3))),
        Reply::RegisterBroker(Err(ControllerError::DuplicateBrokerRegistration { .. }))
    ));
    let Reply::RegisterBroker(Ok(epoch)) =
        call(&mut c, 10, Request::RegisterBroker(registration(1, 2)))
    else {
        panic!("the colocated incarnation was refused");
    };
    let broker = &c.committed().brokers[&1];
    assert_eq!(broker.incarnation_id, Uuid([2; 16]));
    assert_eq!(broker.epoch, epoch);
    assert!(broker.fenced, "registered fenced until caught up");
}

#[test]
fn controller_after_a_failover_places_only_on_brokers_it_heard_from() {
    let mut c = active(0);
    let epochs: Vec<i64> = (1..=3).map(|id| join(&mut c, 0, id)).collect();
    let leaders = |c: &Controller, name: &str| -> BTreeSet<i32> {
        c.committed()
            .topic(name)
            .unwrap()
            .partitions
            .values()
            .map(|p| p.leader)
            .collect()
    };
    let beat = |c: &mut Controller, id: i32, epoch: i64| {
        let offset = c.applied_offset();
        let reply = call(c, 1_000, Request::Heartbeat(heartbeat(id, epoch, offset)));
        assert!(matches!(reply, Reply::Heartbeat(Ok(_))), "{reply:?}");
    };
    create(&mut c, "before", 6, 1).unwrap();
    assert_eq!(leaders(&c, "before"), BTreeSet::from([1, 2, 3]));
    // Another epoch: broker 1 died with the previous controller, still unfenced (its fresh
    // session has not expired), and only broker 2 has heartbeated since.
    c.become_inactive();
    let next = c.applied_offset() + 1;
    c.become_active(1_000, 2, next);
    // Heard from none yet: too few for the factor, so every unfenced broker counts.
    create(&mut c, "unheard", 6, 1).unwrap();
    assert_eq!(leaders(&c, "unheard"), BTreeSet::from([1, 2, 3]));
    beat(&mut c, 2, epochs[1]);
    create(&mut c, "after", 6, 1).unwrap();
    assert_eq!(leaders(&c, "after"), BTreeSet::from([2]));
    beat(&mut c, 3, epochs[2]);
    create(&mut c, "later", 6, 1).unwrap();
    assert_eq!(leaders(&c, "later"), BTreeSet::from([2, 3]));
}

/// An active controller (as [`active`]) whose own process also runs broker 2.
fn active_beside_broker_2() -> Controller {
    let mut config = ControllerConfig::new(1, CLUSTER, 7);
    config.colocated_broker = Some((2, Uuid([1; 16])));
    let mut c = Controller::new(config, Arc::new(TestPolicy));
    c.replay_committed(0, 0, 1, &[]).unwrap();
    c.become_active(0, 1, 1);
    commit_all(&mut c);
    c
}

#[test]
fn controller_counts_the_broker_of_its_own_process_as_heard_from() {
    let mut c = active_beside_broker_2();
    for id in 1..=3 {
        join(&mut c, 0, id);
    }
    c.become_inactive();
    let next = c.applied_offset() + 1;
    c.become_active(1_000, 2, next);
    create(&mut c, "after", 6, 1).unwrap();
    let leaders: BTreeSet<i32> = c
        .committed()
        .topic("after")
        .unwrap()
        .partitions
        .values()
        .map(|p| p.leader)
        .collect();
    assert_eq!(leaders, BTreeSet::from([2]));
}

/// A controller that took over from a silent quorum leader (the node of broker 1) counts
/// that broker's session from the silence, not from its own activation: broker 1 is fenced
/// `session - silence` after the activation, the others a whole session after it.
#[test]
fn controller_counts_the_silent_predecessors_session_from_its_silence() {
    let mut c = active(0);
    for id in 1..=3 {
        join(&mut c, 0, id);
    }
    c.become_inactive();
    let next = c.applied_offset() + 1;
    let now = 10_000;
    c.become_active(now, 2, next);
    let timeout_ms = c.config.session_timeout_ms;
    assert_eq!(c.next_deadline_ms(), Some(now + timeout_ms));
    let silent_ms = 2_500;
    c.backdate_session(1, silent_ms, now);
    // Never later than the activation's fresh session, and only for a known broker.
    c.backdate_session(3, 0, now);
    c.backdate_session(9, silent_ms, now);
    assert_eq!(c.next_deadline_ms(), Some(now - silent_ms + timeout_ms));
    c.tick(now - silent_ms + timeout_ms - 1);
    assert!(c.ready().proposals.is_empty(), "not before the deadline");
    c.tick(now - silent_ms + timeout_ms);
    commit_all(&mut c);
    assert_eq!(fenced_brokers(&c), vec![1]);
    assert_eq!(c.next_deadline_ms(), Some(now + timeout_ms));
}

/// The broker of the controller's own process is never backdated: it is alive.
#[test]
fn controller_never_backdates_its_own_broker() {
    let mut c = active_beside_broker_2();
    join(&mut c, 0, 2);
    c.backdate_session(2, 60_000, 100_000);
    assert_eq!(
        c.next_deadline_ms(),
        Some(c.config.session_timeout_ms),
        "its session still runs from its heartbeat"
    );
}

// Replication: placement of several replicas, AlterPartition, the ELR.

use crate::protocol::alter_partition::{AlterPartitionBrokerState, AlterPartitionRequestTopic};
use crate::protocol::types::LeaderEpoch;

/// Brokers 1-3 unfenced and a topic `t` of one partition with 3 replicas, its
/// `min.insync.replicas` overridden when given; the controller, each broker's epoch and the
/// topic id.
fn replicated(min_isr: Option<&str>) -> (Controller, BTreeMap<i32, i64>, Uuid) {
    let mut c = active(0);
    let epochs: BTreeMap<i32, i64> = (1..=3).map(|id| (id, join(&mut c, 0, id))).collect();
    let topic = NewTopic {
        name: "t".into(),
        num_partitions: 1,
        replication_factor: 3,
        assignments: vec![],
        configs: min_isr
            .map(|v| vec![(MIN_INSYNC_REPLICAS_CONFIG.to_string(), Some(v.to_string()))])
            .unwrap_or_default(),
    };
    let Reply::CreateTopics(mut results) = call(
        &mut c,
        0,
        Request::CreateTopics {
            topics: vec![topic],
            validate_only: false,
        },
    ) else {
        panic!()
    };
    let created = results.remove(0).1.expect("created");
    (c, epochs, created.id)
}

fn partition_of(c: &Controller, topic_id: Uuid) -> PartitionRegistration {
    c.committed().topic_by_id(topic_id).unwrap().partitions[&0].clone()
}

/// An AlterPartition from `broker` (id, epoch) for partition 0 of `topic_id` at its committed
/// leader and partition epochs, asking for `isr` (id, broker epoch).
fn isr_request(
    c: &Controller,
    broker: (i32, i64),
    topic_id: Uuid,
    isr: &[(i32, i64)],
) -> AlterPartitionRequest {
    let p = partition_of(c, topic_id);
    AlterPartitionRequest {
        broker_id: NodeId(broker.0),
        broker_epoch: broker.1,
        topics: vec![AlterPartitionRequestTopic {
            topic_id,
            partitions: vec![AlterPartitionRequestPartition {
                partition_index: 0,
                leader_epoch: LeaderEpoch(p.leader_epoch),
                new_isr_with_epochs: isr
                    .iter()
                    .map(|&(id, epoch)| AlterPartitionBrokerState {
                        broker_id: NodeId(id),
                        broker_epoch: epoch,
                    })
                    .collect(),
                partition_epoch: p.partition_epoch,
                ..Default::default()
            }],
        }],
    }
}

/// The outcome of the request's one partition (the whole request must be accepted).
/// [`altered`] for [`isr_request`]'s request.
fn alter_isr(
    c: &mut Controller,
    broker: (i32, i64),
    topic_id: Uuid,
    isr: &[(i32, i64)],
) -> Result<AlteredPartition, ControllerError> {
    let request = isr_request(c, broker, topic_id, isr);
    altered(c, request)
}

fn altered(
    c: &mut Controller,
    request: AlterPartitionRequest,
) -> Result<AlteredPartition, ControllerError> {
    let Reply::AlterPartition(Ok(mut topics)) = call(c, 0, Request::AlterPartition(request)) else {
        panic!("the request was refused whole")
    };
    assert_eq!(topics.len(), 1);
    let (_, mut partitions) = topics.remove(0);
    assert_eq!(partitions.len(), 1);
    partitions.remove(0).1
}

/// The ISR members with their registered epochs.
fn with_epochs(epochs: &BTreeMap<i32, i64>, ids: &[i32]) -> Vec<(i32, i64)> {
    ids.iter().map(|id| (*id, epochs[id])).collect()
}

fn fence(c: &mut Controller, broker_id: i32, epoch: i64) {
    let mut hb = heartbeat(broker_id, epoch, c.applied_offset());
    hb.want_fence = true;
    let Reply::Heartbeat(Ok(state)) = call(c, 0, Request::Heartbeat(hb)) else {
        panic!()
    };
    assert!(state.is_fenced);
}

#[test]
fn controller_places_three_replicas_on_three_brokers_all_in_sync() {
    let mut c = active(0);
    for id in 1..=3 {
        join(&mut c, 0, id);
    }
    let created = create(&mut c, "r", 3, 3).unwrap();
    assert_eq!(created.replication_factor, 3);
    let topic = c.committed().topic("r").unwrap().clone();
    let mut leaders = BTreeSet::new();
    for p in topic.partitions.values() {
        let distinct: BTreeSet<i32> = p.replicas.iter().copied().collect();
        assert_eq!(distinct, BTreeSet::from([1, 2, 3]), "{p:?}");
        assert_eq!(p.isr, p.replicas, "every usable replica is in sync");
        assert_eq!(p.leader, p.replicas[0], "the first usable replica leads");
        assert!(p.elr.is_empty());
        leaders.insert(p.leader);
    }
    assert_eq!(leaders.len(), 3, "leadership spreads round robin");
    // An explicit assignment naming a fenced broker: it is a replica, not in sync.
    let Reply::RegisterBroker(Ok(_)) = call(&mut c, 0, Request::RegisterBroker(registration(4, 1)))
    else {
        panic!()
    };
    let Reply::CreateTopics(mut results) = call(
        &mut c,
        0,
        Request::CreateTopics {
            topics: vec![NewTopic {
                name: "x".into(),
                num_partitions: -1,
                replication_factor: -1,
                assignments: vec![(0, vec![4, 2, 1])],
                configs: vec![],
            }],
            validate_only: false,
        },
    ) else {
        panic!()
    };
    results.remove(0).1.unwrap();
    let p = c.committed().partition("x", 0).unwrap();
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader),
        (vec![4, 2, 1], vec![2, 1], 2)
    );
}

#[test]
fn controller_alter_partition_shrink_bumps_the_partition_epoch() {
    let (mut c, epochs, id) = replicated(None);
    let before = partition_of(&c, id);
    let leader = before.leader;
    let kept: Vec<i32> = before.isr[..2].to_vec();
    assert!(kept.contains(&leader));
    let request = isr_request(
        &c,
        (leader, epochs[&leader]),
        id,
        &with_epochs(&epochs, &kept),
    );
    let state = altered(&mut c, request).unwrap();
    let after = partition_of(&c, id);
    assert_eq!(after.isr, kept);
    assert_eq!(after.partition_epoch, before.partition_epoch + 1);
    assert_eq!(after.leader_epoch, before.leader_epoch, "the leader stays");
    assert_eq!(
        state,
        AlteredPartition {
            leader,
            leader_epoch: before.leader_epoch,
            isr: kept.clone(),
            leader_recovery_state: LEADER_RECOVERY_RECOVERED,
            partition_epoch: before.partition_epoch + 1,
        }
    );
    // The same ISR again (in another order) writes nothing and answers the current state.
    let offset = c.applied_offset();
    let mut same = kept.clone();
    same.reverse();
    let request = isr_request(
        &c,
        (leader, epochs[&leader]),
        id,
        &with_epochs(&epochs, &same),
    );
    assert_eq!(altered(&mut c, request), Ok(state));
    assert_eq!(c.applied_offset(), offset, "nothing written");
    c.committed().check().unwrap();
}

#[test]
fn controller_alter_partition_at_a_stale_partition_epoch_is_invalid_update_version() {
    let (mut c, epochs, id) = replicated(None);
    let p = partition_of(&c, id);
    let leader = p.leader;
    let stale = isr_request(
        &c,
        (leader, epochs[&leader]),
        id,
        &with_epochs(&epochs, &p.isr[..2]),
    );
    // Another change first: the stale request's partition epoch is then behind.
    let request = isr_request(
        &c,
        (leader, epochs[&leader]),
        id,
        &with_epochs(&epochs, &[leader]),
    );
    altered(&mut c, request).unwrap();
    let offset = c.applied_offset();
    let err = altered(&mut c, stale).unwrap_err();
    assert!(
        matches!(
            err,
            ControllerError::InvalidUpdateVersion {
                epoch: 0,
                current: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        super::super::handlers::error_code(&err),
        crate::protocol::error::ErrorCode::INVALID_UPDATE_VERSION
    );
    assert_eq!(c.applied_offset(), offset, "nothing written");
    assert_eq!(partition_of(&c, id).isr, vec![leader]);
}

#[test]
fn controller_alter_partition_checks_the_leader_and_its_epoch() {
    let (mut c, epochs, id) = replicated(None);
    let first = partition_of(&c, id).leader;
    // The leader is fenced: the next in replica order leads, in leader epoch 1.
    fence(&mut c, first, epochs[&first]);
    let p = partition_of(&c, id);
    let leader = p.leader;
    assert_ne!(leader, first);
    assert_eq!(p.leader_epoch, 1);
    let follower = *p.isr.iter().find(|r| **r != leader).unwrap();
    let isr = with_epochs(&epochs, &[leader]);
    // At leader epoch 0: fenced.
    let mut old = isr_request(&c, (leader, epochs[&leader]), id, &isr);
    old.topics[0].partitions[0].leader_epoch = LeaderEpoch(0);
    let err = altered(&mut c, old).unwrap_err();
    assert!(
        matches!(
            err,
            ControllerError::FencedLeaderEpoch {
                epoch: 0,
                current: 1,
                ..
            }
        ),
        "{err:?}"
    );
    // At leader epoch 2, which no controller wrote yet as far as this one knows.
    let mut newer = isr_request(&c, (leader, epochs[&leader]), id, &isr);
    newer.topics[0].partitions[0].leader_epoch = LeaderEpoch(2);
    let err = altered(&mut c, newer).unwrap_err();
    assert!(
        matches!(err, ControllerError::StaleController { .. }),
        "{err:?}"
    );
    // From a follower.
    let request = isr_request(
        &c,
        (follower, epochs[&follower]),
        id,
        &with_epochs(&epochs, &[follower]),
    );
    let err = altered(&mut c, request).unwrap_err();
    assert!(matches!(err, ControllerError::NotLeader { .. }), "{err:?}");
    assert_eq!(partition_of(&c, id), p, "nothing changed");
    // The leader at its epoch.
    alter_isr(&mut c, (leader, epochs[&leader]), id, &isr).unwrap();
    assert_eq!(partition_of(&c, id).isr, vec![leader]);
}

#[test]
fn controller_alter_partition_refuses_a_fenced_member() {
    let (mut c, epochs, id) = replicated(None);
    let p = partition_of(&c, id);
    let leader = p.leader;
    let out = p.isr[2];
    let request = isr_request(
        &c,
        (leader, epochs[&leader]),
        id,
        &with_epochs(&epochs, &p.isr[..2]),
    );
    altered(&mut c, request).unwrap();
    fence(&mut c, out, epochs[&out]);
    let all = with_epochs(&epochs, &p.isr);
    let err = alter_isr(&mut c, (leader, epochs[&leader]), id, &all).unwrap_err();
    assert!(
        matches!(err, ControllerError::IneligibleReplica { broker_id, .. } if broker_id == out),
        "{err:?}"
    );
    // Unfenced, it may join.
    let offset = c.applied_offset();
    let Reply::Heartbeat(Ok(state)) = call(
        &mut c,
        0,
        Request::Heartbeat(heartbeat(out, epochs[&out], offset)),
    ) else {
        panic!()
    };
    assert!(!state.is_fenced);
    let state = alter_isr(&mut c, (leader, epochs[&leader]), id, &all).unwrap();
    assert_eq!(state.isr, p.isr);
}

#[test]
fn controller_alter_partition_refuses_a_member_at_a_stale_broker_epoch() {
    let (mut c, epochs, id) = replicated(None);
    let p = partition_of(&c, id);
    let leader = p.leader;
    let out = p.isr[2];
    let request = isr_request(
        &c,
        (leader, epochs[&leader]),
        id,
        &with_epochs(&epochs, &p.isr[..2]),
    );
    altered(&mut c, request).unwrap();
    let mut all = with_epochs(&epochs, &p.isr);
    all[2].1 -= 1;
    let err = alter_isr(&mut c, (leader, epochs[&leader]), id, &all).unwrap_err();
    assert!(
        matches!(err, ControllerError::IneligibleReplica { broker_id, .. } if broker_id == out),
        "{err:?}"
    );
    assert_eq!(
        super::super::handlers::error_code(&err),
        crate::protocol::error::ErrorCode::INELIGIBLE_REPLICA
    );
    // -1 is not checked (v2's ISR has no epochs).
    all[2].1 = -1;
    let state = alter_isr(&mut c, (leader, epochs[&leader]), id, &all).unwrap();
    assert_eq!(state.isr, p.isr);
}

#[test]
fn controller_alter_partition_from_a_stale_broker_epoch_is_refused_whole() {
    let (mut c, epochs, id) = replicated(None);
    let p = partition_of(&c, id);
    let leader = p.leader;
    let offset = c.applied_offset();
    let isr = with_epochs(&epochs, &[leader]);
    for requester in [(leader, epochs[&leader] - 1), (9, 0)] {
        let request = isr_request(&c, requester, id, &isr);
        let reply = call(&mut c, 0, Request::AlterPartition(request));
        let Reply::AlterPartition(Err(err)) = reply else {
            panic!("{reply:?}")
        };
        assert!(
            matches!(err, ControllerError::StaleBrokerEpoch { .. }),
            "{err:?}"
        );
    }
    assert_eq!(c.applied_offset(), offset, "nothing written");
    assert_eq!(partition_of(&c, id), p);
}

#[test]
fn controller_alter_partition_refuses_impossible_isrs() {
    let (mut c, epochs, id) = replicated(None);
    let p = partition_of(&c, id);
    let leader = p.leader;
    let follower = p.isr[1];
    let me = (leader, epochs[&leader]);
    let invalid = |c: &mut Controller, request: AlterPartitionRequest| {
        let err = altered(c, request).unwrap_err();
        assert!(
            matches!(err, ControllerError::InvalidRequest { .. }),
            "{err:?}"
        );
    };
    // Empty, without the leader, a member twice, a broker that is not a replica.
    for isr in [
        vec![],
        with_epochs(&epochs, &[follower]),
        vec![(leader, -1), (leader, -1)],
        vec![(leader, -1), (7, -1)],
    ] {
        let request = isr_request(&c, me, id, &isr);
        invalid(&mut c, request);
    }
    let mut recovering = isr_request(&c, me, id, &with_epochs(&epochs, &[leader]));
    recovering.topics[0].partitions[0].leader_recovery_state = LEADER_RECOVERY_RECOVERING;
    invalid(&mut c, recovering);
    let mut unknown = isr_request(&c, me, id, &with_epochs(&epochs, &[leader]));
    unknown.topics[0].partitions[0].leader_recovery_state = 5;
    invalid(&mut c, unknown);
    // The same partition twice: the second is refused, the first decided.
    let mut twice = isr_request(&c, me, id, &with_epochs(&epochs, &[leader]));
    let again = twice.topics[0].partitions[0].clone();
    twice.topics[0].partitions.push(again);
    let Reply::AlterPartition(Ok(topics)) = call(&mut c, 0, Request::AlterPartition(twice)) else {
        panic!()
    };
    assert!(topics[0].1[0].1.is_ok());
    assert!(matches!(
        topics[0].1[1].1,
        Err(ControllerError::InvalidRequest { .. })
    ));
    // Unknown topic and partition; v2's ISR without epochs.
    let mut elsewhere = isr_request(&c, me, id, &[]);
    elsewhere.topics[0].partitions[0].new_isr = vec![NodeId(leader), NodeId(follower)];
    elsewhere.topics[0].partitions[0].partition_index = 1;
    assert!(matches!(
        altered(&mut c, elsewhere.clone()),
        Err(ControllerError::UnknownPartition { .. })
    ));
    elsewhere.topics[0].topic_id = Uuid([9; 16]);
    assert!(matches!(
        altered(&mut c, elsewhere.clone()),
        Err(ControllerError::UnknownTopicId { .. })
    ));
    elsewhere.topics[0].topic_id = id;
    elsewhere.topics[0].partitions[0].partition_index = 0;
    let state = altered(&mut c, elsewhere).unwrap();
    assert_eq!(state.isr, vec![leader, follower]);
    c.committed().check().unwrap();
}

#[test]
fn controller_shrink_below_min_insync_replicas_keeps_the_removed_in_the_elr() {
    let (mut c, epochs, id) = replicated(Some("2"));
    let p = partition_of(&c, id);
    let (leader, a, b) = (p.isr[0], p.isr[1], p.isr[2]);
    let me = (leader, epochs[&leader]);
    // Down to min.insync.replicas: no ELR.
    alter_isr(&mut c, me, id, &with_epochs(&epochs, &[leader, a])).unwrap();
    assert!(partition_of(&c, id).elr.is_empty());
    // Below it: the member removed joins the ELR.
    alter_isr(&mut c, me, id, &with_epochs(&epochs, &[leader])).unwrap();
    let p = partition_of(&c, id);
    assert_eq!((p.isr.clone(), p.elr.clone()), (vec![leader], vec![a]));
    c.committed().check().unwrap();
    // Back at min.insync.replicas: the ELR is empty again.
    alter_isr(&mut c, me, id, &with_epochs(&epochs, &[leader, b])).unwrap();
    let p = partition_of(&c, id);
    assert_eq!((p.isr.clone(), p.elr.clone()), (vec![leader, b], vec![]));
}

#[test]
fn controller_elr_follows_the_cluster_default_and_rejoining_members_leave_it() {
    let (mut c, epochs, id) = replicated(None);
    // min.insync.replicas 3 from the cluster-wide broker default.
    let Reply::AlterConfigs(results) = call(
        &mut c,
        0,
        Request::AlterConfigs {
            changes: vec![(
                ConfigResource::broker(None),
                vec![ConfigOp::Set(MIN_INSYNC_REPLICAS_CONFIG.into(), "3".into())],
            )],
            validate_only: false,
        },
    ) else {
        panic!()
    };
    results[0].1.clone().unwrap();
    let p = partition_of(&c, id);
    let (leader, a, b) = (p.isr[0], p.isr[1], p.isr[2]);
    let me = (leader, epochs[&leader]);
    alter_isr(&mut c, me, id, &with_epochs(&epochs, &[leader])).unwrap();
    assert_eq!(partition_of(&c, id).elr, vec![a, b]);
    // a rejoins: it leaves the ELR; the ISR is still below 3.
    alter_isr(&mut c, me, id, &with_epochs(&epochs, &[leader, a])).unwrap();
    let p = partition_of(&c, id);
    assert_eq!((p.isr.clone(), p.elr.clone()), (vec![leader, a], vec![b]));
    // Lowering min.insync.replicas clears the ELR it was kept for.
    let epoch = p.partition_epoch;
    let Reply::AlterConfigs(results) = call(
        &mut c,
        0,
        Request::AlterConfigs {
            changes: vec![(
                ConfigResource::topic("t"),
                vec![ConfigOp::Set(MIN_INSYNC_REPLICAS_CONFIG.into(), "2".into())],
            )],
            validate_only: false,
        },
    ) else {
        panic!()
    };
    results[0].1.clone().unwrap();
    let p = partition_of(&c, id);
    assert!(p.elr.is_empty());
    assert_eq!(p.partition_epoch, epoch + 1);
    c.committed().check().unwrap();
}

#[test]
fn controller_elr_default_min_insync_replicas_comes_from_its_config() {
    let mut config = ControllerConfig::new(1, CLUSTER, 7);
    config.min_insync_replicas = 2;
    let mut c = Controller::new(config, Arc::new(TestPolicy));
    c.replay_committed(0, 0, 1, &[]).unwrap();
    c.become_active(0, 1, 1);
    commit_all(&mut c);
    let epochs: BTreeMap<i32, i64> = (1..=2).map(|id| (id, join(&mut c, 0, id))).collect();
    let id = create(&mut c, "t", 1, 2).unwrap().id;
    let p = partition_of(&c, id);
    let (leader, other) = (p.isr[0], p.isr[1]);
    alter_isr(
        &mut c,
        (leader, epochs[&leader]),
        id,
        &with_epochs(&epochs, &[leader]),
    )
    .unwrap();
    assert_eq!(partition_of(&c, id).elr, vec![other]);
}

#[test]
fn controller_fencing_an_isr_member_at_min_insync_replicas_moves_it_to_the_elr() {
    let (mut c, epochs, id, leader, a, _) = shrunk_to_two();
    assert!(partition_of(&c, id).elr.is_empty());
    fence(&mut c, a, epochs[&a]);
    let p = partition_of(&c, id);
    assert_eq!(
        (p.isr.clone(), p.elr.clone(), p.leader),
        (vec![leader], vec![a], leader)
    );
    // The leader too: the ISR empties, both are in the ELR, and nobody leads.
    fence(&mut c, leader, epochs[&leader]);
    let p = partition_of(&c, id);
    let mut both = vec![leader, a];
    both.sort_by_key(|r| p.replicas.iter().position(|x| x == r));
    assert_eq!(
        (p.isr.clone(), p.elr.clone(), p.leader),
        (vec![], both, NO_LEADER)
    );
    c.committed().check().unwrap();
}

/// Partition 0 of a fresh RF 3 topic with `min.insync.replicas` 2 whose leader shrank its
/// ISR to (leader, a): the controller, the epochs, the topic, the leader, a, and the third.
fn shrunk_to_two() -> (Controller, BTreeMap<i32, i64>, Uuid, i32, i32, i32) {
    let (mut c, epochs, id) = replicated(Some("2"));
    let p = partition_of(&c, id);
    let (leader, a, b) = (p.isr[0], p.isr[1], p.isr[2]);
    alter_isr(
        &mut c,
        (leader, epochs[&leader]),
        id,
        &with_epochs(&epochs, &[leader, a]),
    )
    .unwrap();
    (c, epochs, id, leader, a, b)
}

/// Partition 0 of a fresh RF 3 topic with `min.insync.replicas` 2 taken down to an empty
/// ISR: the ISR shrunk to (leader, a), then a and the leader fenced. Returns the controller,
/// the epochs, the topic, the old leader, a, and the third replica.
fn emptied_isr() -> (Controller, BTreeMap<i32, i64>, Uuid, i32, i32, i32) {
    let (mut c, epochs, id, leader, a, b) = shrunk_to_two();
    fence(&mut c, a, epochs[&a]);
    fence(&mut c, leader, epochs[&leader]);
    let p = partition_of(&c, id);
    assert!(p.isr.is_empty() && p.leader == NO_LEADER, "{p:?}");
    (c, epochs, id, leader, a, b)
}

/// Registers `broker_id` anew (incarnation 2) naming `previous` as the epoch it stopped
/// under, and unfences it; its new epoch.
fn rejoin(c: &mut Controller, broker_id: i32, previous: i64) -> i64 {
    let mut r = registration(broker_id, 2);
    r.previous_broker_epoch = previous;
    let Reply::RegisterBroker(Ok(epoch)) = call(c, 0, Request::RegisterBroker(r)) else {
        panic!("registration refused");
    };
    let offset = c.applied_offset();
    let Reply::Heartbeat(Ok(state)) = call(
        c,
        0,
        Request::Heartbeat(heartbeat(broker_id, epoch, offset)),
    ) else {
        panic!("heartbeat refused");
    };
    assert!(!state.is_fenced);
    epoch
}

#[test]
fn controller_elects_from_the_elr_when_the_isr_is_empty() {
    let (mut c, epochs, id, leader, a, b) = emptied_isr();
    let before = partition_of(&c, id);
    // The third replica, out of the ISR while it was at min.insync.replicas, is not eligible:
    // unfenced, it is still no leader.
    fence(&mut c, b, epochs[&b]);
    rejoin(&mut c, b, epochs[&b]);
    assert_eq!(
        partition_of(&c, id).leader,
        NO_LEADER,
        "a replica outside ISR and ELR"
    );
    // a stopped cleanly: it comes back naming its epoch, and the ELR elects it.
    rejoin(&mut c, a, epochs[&a]);
    let p = partition_of(&c, id);
    assert_eq!(
        (p.leader, p.isr.clone(), p.elr.clone()),
        (a, vec![a], vec![leader])
    );
    assert_eq!(p.leader_epoch, before.leader_epoch + 1);
    assert!(p.partition_epoch > before.partition_epoch);
    c.committed().check().unwrap();
}

#[test]
fn controller_takes_a_replica_back_from_an_unclean_shutdown_out_of_the_elr() {
    let (mut c, epochs, id, leader, a, _) = emptied_isr();
    // The ISR emptied when the leader was fenced: it is the last known leader.
    assert_eq!(partition_of(&c, id).last_known_elr, vec![leader]);
    // The old leader crashed: it registers without a clean epoch and leaves the ELR; while
    // a stays in the ELR, the old leader is not elected, unfenced or not.
    rejoin(&mut c, leader, -1);
    let p = partition_of(&c, id);
    assert_eq!((p.leader, p.elr.clone()), (NO_LEADER, vec![a]));
    assert_eq!(p.last_known_elr, vec![leader]);
    // A wrong epoch is no clean stop either: a leaves the ELR too. Nobody is known to hold
    // everything committed, and the last leader, back, leads alone, RECOVERING (KIP-966's
    // balanced recovery).
    rejoin(&mut c, a, epochs[&a] + 1);
    let p = partition_of(&c, id);
    assert_eq!(
        (p.leader, p.isr.clone(), p.elr.clone()),
        (leader, vec![leader], vec![])
    );
    assert_eq!(p.leader_recovery_state, LEADER_RECOVERY_RECOVERING);
    assert!(p.last_known_elr.is_empty());
    c.committed().check().unwrap();
}

#[test]
fn controller_does_not_elect_a_last_known_leader_that_is_not_back() {
    let (mut c, epochs, id, leader, a, _) = emptied_isr();
    // a crashed and is back; the old leader is still fenced: nobody leads.
    rejoin(&mut c, a, -1);
    let p = partition_of(&c, id);
    assert_eq!((p.leader, p.elr.clone()), (NO_LEADER, vec![leader]));
    // The old leader, back cleanly, is elected from the ELR: no recovery needed.
    rejoin(&mut c, leader, epochs[&leader]);
    let p = partition_of(&c, id);
    assert_eq!((p.leader, p.isr.clone()), (leader, vec![leader]));
    assert_eq!(p.leader_recovery_state, LEADER_RECOVERY_RECOVERED);
    c.committed().check().unwrap();
}

#[test]
fn controller_writes_an_elr_in_records_that_carry_it() {
    let (mut c, epochs, id) = replicated(Some("3"));
    let leader = partition_of(&c, id).leader;
    c.handle(
        0,
        5,
        Request::AlterPartition(isr_request(
            &c,
            (leader, epochs[&leader]),
            id,
            &with_epochs(&epochs, &[leader]),
        )),
    );
    let ready = c.ready();
    let MetadataRecord::PartitionChange(change) = &ready.proposals[0].records[0] else {
        panic!("{:?}", ready.proposals)
    };
    assert!(change
        .eligible_leader_replicas
        .as_ref()
        .is_some_and(|e| e.len() == 2));
    // The committed bytes carry it: the record the log gives back is the one proposed.
    let record = &ready.proposals[0].records[0];
    assert_eq!(record.version(), 2);
    assert_eq!(&MetadataRecord::decode(record.encode()).unwrap(), record);
}

// Elections: ElectLeaders (preferred, unclean), unclean.leader.election.enable and
// auto.leader.rebalance.enable.

fn elect(
    c: &mut Controller,
    now_ms: u64,
    election: ElectionType,
    partitions: Option<Vec<(&str, Vec<i32>)>>,
) -> ElectLeadersResults {
    let partitions = partitions.map(|list| {
        list.into_iter()
            .map(|(topic, indexes)| (topic.to_string(), indexes))
            .collect()
    });
    let Reply::ElectLeaders(results) = call(
        c,
        now_ms,
        Request::ElectLeaders {
            election,
            partitions,
        },
    ) else {
        panic!("not an ElectLeaders reply")
    };
    results
}

/// The one outcome of an election of `t-0`.
fn elected(results: ElectLeadersResults) -> Result<(), ControllerError> {
    assert_eq!(results.len(), 1, "{results:?}");
    let (topic, mut partitions) = results.into_iter().next().unwrap();
    assert_eq!(topic, "t");
    assert_eq!(partitions.len(), 1, "{partitions:?}");
    partitions.remove(0).1
}

/// The outcome of an election of `t-0` alone.
fn elect_t0(c: &mut Controller, election: ElectionType) -> Result<(), ControllerError> {
    elected(elect(c, 0, election, Some(vec![("t", vec![0])])))
}

/// Unfences a fenced broker with a caught-up heartbeat at `now_ms`.
fn unfence(c: &mut Controller, now_ms: u64, broker_id: i32, epoch: i64) {
    let offset = c.applied_offset();
    let Reply::Heartbeat(Ok(state)) = call(
        c,
        now_ms,
        Request::Heartbeat(heartbeat(broker_id, epoch, offset)),
    ) else {
        panic!()
    };
    assert!(!state.is_fenced);
}

/// `t-0` with its preferred replica back in the ISR but not leading: it was fenced (leadership
/// moved), came back, and the new leader added it to the ISR again.
fn preferred_elsewhere() -> (Controller, BTreeMap<i32, i64>, Uuid, i32) {
    let (mut c, epochs, id) = replicated(None);
    let preferred = partition_of(&c, id).replicas[0];
    assert_eq!(partition_of(&c, id).leader, preferred);
    fence(&mut c, preferred, epochs[&preferred]);
    unfence(&mut c, 0, preferred, epochs[&preferred]);
    let p = partition_of(&c, id);
    assert_ne!(p.leader, preferred);
    assert!(!p.isr.contains(&preferred));
    let mut isr = p.isr.clone();
    isr.push(preferred);
    let leader = (p.leader, epochs[&p.leader]);
    alter_isr(&mut c, leader, id, &with_epochs(&epochs, &isr)).expect("added back");
    (c, epochs, id, preferred)
}

#[test]
fn controller_elects_the_preferred_replica_when_asked_and_only_then() {
    let (mut c, epochs, id) = replicated(None);
    let preferred = partition_of(&c, id).replicas[0];
    // It leads: nothing to do; an unknown partition or topic is named as such.
    let results = elect(
        &mut c,
        0,
        ElectionType::Preferred,
        Some(vec![("t", vec![0, 7]), ("nope", vec![0])]),
    );
    assert!(matches!(
        results[0].1[0].1,
        Err(ControllerError::ElectionNotNeeded { .. })
    ));
    assert!(matches!(
        results[0].1[1].1,
        Err(ControllerError::UnknownPartition { .. })
    ));
    assert!(matches!(
        results[1].1[0].1,
        Err(ControllerError::UnknownTopic { .. })
    ));
    // Fenced, it is out of the ISR: it cannot lead.
    fence(&mut c, preferred, epochs[&preferred]);
    assert!(matches!(
        elect_t0(&mut c, ElectionType::Preferred),
        Err(ControllerError::PreferredLeaderNotAvailable { .. })
    ));

    let (mut c, _, id, preferred) = preferred_elsewhere();
    let before = partition_of(&c, id);
    // Every partition: this one is elected, and is the only one answered.
    let results = elect(&mut c, 0, ElectionType::Preferred, None);
    assert_eq!(elected(results), Ok(()));
    let after = partition_of(&c, id);
    assert_eq!(after.leader, preferred);
    assert_eq!(after.leader_epoch, before.leader_epoch + 1);
    assert!(same_members(&after.isr, &before.isr), "the ISR stays");
    // Once done, an election of every partition answers nothing.
    assert!(elect(&mut c, 0, ElectionType::Preferred, None).is_empty());
}

/// `t-0` (min.insync.replicas 2, `configs` added) whose third replica left the ISR while it
/// was fenced and came back; then the first two were fenced: the ISR is empty, the ELR holds
/// the two fenced ones, and only the third, outside both, is live. Its id.
fn only_an_out_of_sync_replica_live(configs: &[(&str, &str)]) -> (Controller, Uuid, i32) {
    let mut c = active(0);
    let epochs: BTreeMap<i32, i64> = (1..=3).map(|id| (id, join(&mut c, 0, id))).collect();
    let mut topic_configs = vec![(
        MIN_INSYNC_REPLICAS_CONFIG.to_string(),
        Some("2".to_string()),
    )];
    topic_configs.extend(
        configs
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string()))),
    );
    let Reply::CreateTopics(mut results) = call(
        &mut c,
        0,
        Request::CreateTopics {
            topics: vec![NewTopic {
                name: "t".into(),
                num_partitions: -1,
                replication_factor: -1,
                assignments: vec![(0, vec![1, 2, 3])],
                configs: topic_configs,
            }],
            validate_only: false,
        },
    ) else {
        panic!()
    };
    let id = results.remove(0).1.expect("created").id;
    fence(&mut c, 3, epochs[&3]);
    unfence(&mut c, 0, 3, epochs[&3]);
    fence(&mut c, 1, epochs[&1]);
    (c, id, 3)
}

#[test]
fn controller_elects_uncleanly_only_when_asked_or_allowed() {
    let (mut c, id, outsider) = only_an_out_of_sync_replica_live(&[]);
    let epoch_2 = c.committed().brokers[&2].epoch;
    fence(&mut c, 2, epoch_2);
    let p = partition_of(&c, id);
    assert_eq!(p.leader, NO_LEADER, "unclean election is off by default");
    assert!(p.isr.is_empty());
    assert_eq!(p.elr, vec![1, 2]);
    // A preferred election cannot help; an unclean one elects the live outsider, alone and
    // RECOVERING (KIP-704), and the ELR, whose members may hold more, is cleared.
    assert!(matches!(
        elect_t0(&mut c, ElectionType::Preferred),
        Err(ControllerError::PreferredLeaderNotAvailable { .. })
    ));
    assert_eq!(elect_t0(&mut c, ElectionType::Unclean), Ok(()));
    let p = partition_of(&c, id);
    assert_eq!((p.leader, p.isr.clone()), (outsider, vec![outsider]));
    assert!(p.elr.is_empty());
    assert_eq!(p.leader_recovery_state, LEADER_RECOVERY_RECOVERING);
    // With a leader, an unclean election is not needed.
    assert!(matches!(
        elect_t0(&mut c, ElectionType::Unclean),
        Err(ControllerError::ElectionNotNeeded { .. })
    ));

    // Nobody live at all: no eligible leader.
    let (mut c, _, outsider) = only_an_out_of_sync_replica_live(&[]);
    let epoch_2 = c.committed().brokers[&2].epoch;
    fence(&mut c, 2, epoch_2);
    let epoch_3 = c.committed().brokers[&outsider].epoch;
    fence(&mut c, outsider, epoch_3);
    assert!(matches!(
        elect_t0(&mut c, ElectionType::Unclean),
        Err(ControllerError::EligibleLeadersNotAvailable { .. })
    ));

    // The topic allows it: the fencing of the last ISR member elects the outsider at once.
    let (mut c, id, outsider) =
        only_an_out_of_sync_replica_live(&[(UNCLEAN_LEADER_ELECTION_CONFIG, "true")]);
    let epoch_2 = c.committed().brokers[&2].epoch;
    fence(&mut c, 2, epoch_2);
    let p = partition_of(&c, id);
    assert_eq!(p.leader, outsider);
    assert_eq!(p.leader_recovery_state, LEADER_RECOVERY_RECOVERING);
}

#[test]
fn controller_allowing_unclean_election_later_elects_the_leaderless_at_the_next_check() {
    let (mut c, id, outsider) = only_an_out_of_sync_replica_live(&[]);
    let epoch_2 = c.committed().brokers[&2].epoch;
    fence(&mut c, 2, epoch_2);
    assert_eq!(partition_of(&c, id).leader, NO_LEADER);
    let Reply::AlterConfigs(results) = call(
        &mut c,
        0,
        Request::AlterConfigs {
            changes: vec![(
                ConfigResource::topic("t"),
                vec![ConfigOp::Set(
                    UNCLEAN_LEADER_ELECTION_CONFIG.to_string(),
                    "true".to_string(),
                )],
            )],
            validate_only: false,
        },
    ) else {
        panic!()
    };
    assert!(results.iter().all(|(_, r)| r.is_ok()), "{results:?}");
    // The outsider keeps its session alive; the check runs at its interval.
    let epoch_3 = c.committed().brokers[&outsider].epoch;
    let offset = c.applied_offset();
    call(
        &mut c,
        UNCLEAN_ELECTION_CHECK_MS,
        Request::Heartbeat(heartbeat(outsider, epoch_3, offset)),
    );
    c.tick(UNCLEAN_ELECTION_CHECK_MS);
    commit_all(&mut c);
    assert_eq!(partition_of(&c, id).leader, outsider);
}

#[test]
fn controller_auto_rebalance_moves_leaders_back_to_their_preferred_replicas() {
    for enabled in [true, false] {
        let (mut c, epochs, id, preferred) = preferred_elsewhere();
        c.config.auto_leader_rebalance_enable = enabled;
        // Every broker heard from just before the check, so that none is fenced by it.
        let interval_ms = c.config.leader_imbalance_check_interval_ms;
        for (broker, epoch) in &epochs {
            let offset = c.applied_offset();
            call(
                &mut c,
                interval_ms,
                Request::Heartbeat(heartbeat(*broker, *epoch, offset)),
            );
        }
        c.tick(interval_ms - 1);
        commit_all(&mut c);
        assert_ne!(
            partition_of(&c, id).leader,
            preferred,
            "not before the interval"
        );
        c.tick(interval_ms);
        commit_all(&mut c);
        let leader = partition_of(&c, id).leader;
        assert_eq!(leader == preferred, enabled, "enabled: {enabled}");
    }
}
