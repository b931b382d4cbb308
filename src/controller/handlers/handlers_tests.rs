//! The controller handlers' decoding and encoding, request by request, without a controller.

use bytes::{Bytes, BytesMut};

use super::*;
use crate::controller::core::{ConfigOp, TopicRef};
use crate::controller::image::ConfigResource;
use crate::protocol::create_topics::CreateTopicsResponse;
use crate::protocol::delete_topics::{DeleteTopicState, DeleteTopicsResponse};
use crate::protocol::incremental_alter_configs::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsResponse,
};
use crate::protocol::message::Message;
use crate::protocol::wire::Uuid;

fn body<M: Message>(message: &M, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    message.encode(&mut out, version).expect("encodes");
    out.freeze()
}

#[test]
fn handlers_map_every_refusal_to_kafkas_code() {
    use ControllerError as E;
    let resource = ConfigResource::topic("t");
    let cases = [
        (E::NotController, ErrorCode::NOT_CONTROLLER),
        (
            E::BrokerIdNotRegistered { broker_id: 1 },
            ErrorCode::BROKER_ID_NOT_REGISTERED,
        ),
        (
            E::StaleBrokerEpoch {
                broker_id: 1,
                epoch: 1,
                current: 2,
            },
            ErrorCode::STALE_BROKER_EPOCH,
        ),
        (
            E::DuplicateBrokerRegistration { broker_id: 1 },
            ErrorCode::DUPLICATE_BROKER_REGISTRATION,
        ),
        (
            E::InconsistentClusterId {
                ours: "a".into(),
                theirs: "b".into(),
            },
            ErrorCode::INCONSISTENT_CLUSTER_ID,
        ),
        (
            E::TopicAlreadyExists { name: "t".into() },
            ErrorCode::TOPIC_ALREADY_EXISTS,
        ),
        (
            E::UnknownTopic { name: "t".into() },
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (
            E::UnknownTopicId { id: Uuid([3; 16]) },
            ErrorCode::UNKNOWN_TOPIC_ID,
        ),
        (
            E::InvalidReplicationFactor {
                name: "t".into(),
                reason: String::new(),
            },
            ErrorCode::INVALID_REPLICATION_FACTOR,
        ),
        (
            E::InvalidConfig {
                resource,
                reason: String::new(),
            },
            ErrorCode::INVALID_CONFIG,
        ),
        (
            E::TopicDeletionDisabled { name: "t".into() },
            ErrorCode::TOPIC_DELETION_DISABLED,
        ),
        (
            E::TooLarge {
                name: "t".into(),
                records: 1,
                bytes: 1,
            },
            ErrorCode::POLICY_VIOLATION,
        ),
        (
            E::Overloaded {
                what: "replies",
                limit: 1,
            },
            ErrorCode::THROTTLING_QUOTA_EXCEEDED,
        ),
        (
            E::UnknownPartition {
                topic: "t".into(),
                partition: 1,
            },
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (
            E::NotLeader {
                broker_id: 1,
                partition: "t-0".into(),
                leader: 2,
            },
            ErrorCode::NOT_LEADER_OR_FOLLOWER,
        ),
        (
            E::StaleController {
                partition: "t-0".into(),
                reason: String::new(),
            },
            ErrorCode::NOT_CONTROLLER,
        ),
        (
            E::FencedLeaderEpoch {
                partition: "t-0".into(),
                epoch: 1,
                current: 2,
            },
            ErrorCode::FENCED_LEADER_EPOCH,
        ),
        (
            E::InvalidUpdateVersion {
                partition: "t-0".into(),
                epoch: 1,
                current: 2,
            },
            ErrorCode::INVALID_UPDATE_VERSION,
        ),
        (
            E::IneligibleReplica {
                partition: "t-0".into(),
                broker_id: 3,
                reason: String::new(),
            },
            ErrorCode::INELIGIBLE_REPLICA,
        ),
    ];
    for (error, code) in cases {
        assert_eq!(error_code(&error), code, "{error:?}");
    }
}

#[test]
fn handlers_refuse_bad_config_operations_per_resource() {
    let config = |name: &str, op: i8, value: Option<&str>| AlterableConfig {
        name: name.into(),
        config_operation: op,
        value: value.map(str::to_string),
    };
    let request = IncrementalAlterConfigsRequest {
        resources: vec![
            AlterConfigsResource {
                resource_type: 2,
                resource_name: "ok".into(),
                configs: vec![
                    config("retention.ms", 0, Some("5")),
                    config("cleanup.policy", 2, Some("compact")),
                    config("segment.ms", 1, None),
                ],
            },
            AlterConfigsResource {
                resource_type: 2,
                resource_name: "null".into(),
                configs: vec![config("retention.ms", 0, None)],
            },
            AlterConfigsResource {
                resource_type: 2,
                resource_name: "twice".into(),
                configs: vec![config("a", 0, Some("1")), config("a", 0, Some("2"))],
            },
            AlterConfigsResource {
                resource_type: 2,
                resource_name: "not-a-list".into(),
                configs: vec![config("retention.ms", 2, Some("1"))],
            },
            AlterConfigsResource {
                resource_type: 2,
                resource_name: "unknown-op".into(),
                configs: vec![config("retention.ms", 9, Some("1"))],
            },
        ],
        validate_only: false,
    };
    let Decoded::Request(Request::AlterConfigs { changes, .. }) =
        decode(44, 1, body(&request, 1)).expect("decodes")
    else {
        panic!("not an AlterConfigs request");
    };
    assert_eq!(
        changes[0].1,
        vec![
            ConfigOp::Set("retention.ms".into(), "5".into()),
            ConfigOp::Append {
                key: "cleanup.policy".into(),
                items: vec!["compact".into()],
                default: "delete".into(),
            },
            ConfigOp::Delete("segment.ms".into()),
        ]
    );
    let refusal = |i: usize| match &changes[i].1[..] {
        [.., ConfigOp::Refuse(e)] => error_code(e),
        other => panic!("resource {i}: {other:?}"),
    };
    assert_eq!(refusal(1), ErrorCode::INVALID_REQUEST, "a null value");
    assert_eq!(refusal(2), ErrorCode::INVALID_REQUEST, "a key twice");
    assert_eq!(
        refusal(3),
        ErrorCode::INVALID_CONFIG,
        "APPEND on a non-list"
    );
    assert_eq!(
        refusal(4),
        ErrorCode::INVALID_REQUEST,
        "an unknown operation"
    );
    // The answer names each resource in its order.
    let reply = changes
        .iter()
        .map(|(r, _)| (r.clone(), Err(ControllerError::NotController)))
        .collect();
    let answer = IncrementalAlterConfigsResponse::decode_exact(
        encode(44, 1, Reply::AlterConfigs(reply)).expect("encodes"),
        1,
    )
    .expect("decodes");
    let names: Vec<&str> = answer
        .responses
        .iter()
        .map(|r| r.resource_name.as_str())
        .collect();
    assert_eq!(names, ["ok", "null", "twice", "not-a-list", "unknown-op"]);
    assert!(answer
        .responses
        .iter()
        .all(|r| r.error_code == ErrorCode::NOT_CONTROLLER.0));
}

#[test]
fn handlers_name_deleted_topics_as_asked() {
    let request = DeleteTopicsRequest {
        topics: vec![
            DeleteTopicState {
                name: Some("by-name".into()),
                topic_id: Uuid::ZERO,
            },
            DeleteTopicState {
                name: None,
                topic_id: Uuid([5; 16]),
            },
        ],
        timeout_ms: 1,
        ..Default::default()
    };
    let Decoded::Request(Request::DeleteTopics(topics)) =
        decode(20, 6, body(&request, 6)).expect("decodes")
    else {
        panic!("not a DeleteTopics request");
    };
    assert_eq!(
        topics,
        vec![
            TopicRef::Name("by-name".into()),
            TopicRef::Id(Uuid([5; 16]))
        ]
    );
    let reply = vec![
        (
            topics[0].clone(),
            Ok(("by-name".to_string(), Uuid([4; 16]))),
        ),
        (
            topics[1].clone(),
            Err(ControllerError::UnknownTopicId { id: Uuid([5; 16]) }),
        ),
    ];
    let answer =
        DeleteTopicsResponse::decode_exact(encode(20, 6, Reply::DeleteTopics(reply)).unwrap(), 6)
            .unwrap();
    assert_eq!(answer.responses[0].name.as_deref(), Some("by-name"));
    assert_eq!(answer.responses[0].topic_id, Uuid([4; 16]));
    assert_eq!(answer.responses[1].name, None);
    assert_eq!(
        answer.responses[1].error_code,
        ErrorCode::UNKNOWN_TOPIC_ID.0
    );
}

#[test]
fn handlers_answer_created_topics_with_their_id_and_shape() {
    let reply = vec![
        (
            "a".to_string(),
            Ok(crate::controller::core::CreatedTopic {
                id: Uuid([8; 16]),
                num_partitions: 3,
                replication_factor: 1,
            }),
        ),
        (
            "b".to_string(),
            Err(ControllerError::TopicAlreadyExists { name: "b".into() }),
        ),
    ];
    let answer =
        CreateTopicsResponse::decode_exact(encode(19, 7, Reply::CreateTopics(reply)).unwrap(), 7)
            .unwrap();
    assert_eq!(answer.topics[0].topic_id, Uuid([8; 16]));
    assert_eq!(answer.topics[0].num_partitions, 3);
    assert_eq!(
        answer.topics[1].error_code,
        ErrorCode::TOPIC_ALREADY_EXISTS.0
    );
    assert!(answer.topics[1]
        .error_message
        .as_deref()
        .is_some_and(|m| m.contains("already exists")));
    assert!(
        decode(19, 7, Bytes::from_static(b"\x00")).is_err(),
        "a body that does not decode closes the connection"
    );
}

#[test]
fn handlers_serve_alter_partition_and_answer_each_partitions_state() {
    use crate::controller::core::AlteredPartition;
    use crate::protocol::alter_partition::{
        AlterPartitionBrokerState, AlterPartitionRequestPartition, AlterPartitionRequestTopic,
        AlterPartitionResponse,
    };
    use crate::protocol::types::{LeaderEpoch, NodeId};
    assert!(APIS.contains(&(56, 2, 3)), "{APIS:?}");
    let v3 = AlterPartitionRequestPartition {
        partition_index: 4,
        leader_epoch: LeaderEpoch(6),
        new_isr_with_epochs: vec![
            AlterPartitionBrokerState {
                broker_id: NodeId(1),
                broker_epoch: 10,
            },
            AlterPartitionBrokerState {
                broker_id: NodeId(2),
                broker_epoch: -1,
            },
        ],
        leader_recovery_state: 0,
        partition_epoch: 8,
        ..Default::default()
    };
    let v2 = AlterPartitionRequestPartition {
        new_isr: vec![NodeId(1), NodeId(2)],
        new_isr_with_epochs: vec![],
        ..v3.clone()
    };
    let request = |partition: AlterPartitionRequestPartition| AlterPartitionRequest {
        broker_id: NodeId(1),
        broker_epoch: 10,
        topics: vec![AlterPartitionRequestTopic {
            topic_id: Uuid([7; 16]),
            partitions: vec![partition],
        }],
    };
    // v2 carries the ISR without epochs, v3 with them only.
    for (version, partition, with_epochs) in [(2, v2, 0), (3, v3, 2)] {
        let Decoded::Request(Request::AlterPartition(decoded)) =
            decode(56, version, body(&request(partition), version)).expect("decodes")
        else {
            panic!("not an AlterPartition request");
        };
        let p = &decoded.topics[0].partitions[0];
        assert_eq!((decoded.broker_id, decoded.broker_epoch), (NodeId(1), 10));
        assert_eq!(decoded.topics[0].topic_id, Uuid([7; 16]));
        assert_eq!(
            (p.partition_index, p.leader_epoch, p.partition_epoch),
            (4, LeaderEpoch(6), 8)
        );
        assert_eq!(p.new_isr_with_epochs.len(), with_epochs, "v{version}");
        assert_eq!(p.new_isr.is_empty(), with_epochs > 0, "v{version}");
    }
    let reply = vec![(
        Uuid([7; 16]),
        vec![
            (
                4,
                Ok(AlteredPartition {
                    leader: 1,
                    leader_epoch: 6,
                    isr: vec![1, 2],
                    leader_recovery_state: 0,
                    partition_epoch: 9,
                }),
            ),
            (
                5,
                Err(ControllerError::InvalidUpdateVersion {
                    partition: "t-5".into(),
                    epoch: 1,
                    current: 2,
                }),
            ),
        ],
    )];
    for version in [2, 3] {
        let answer = AlterPartitionResponse::decode_exact(
            encode(56, version, Reply::AlterPartition(Ok(reply.clone()))).unwrap(),
            version,
        )
        .unwrap();
        assert_eq!(answer.error_code, 0);
        assert_eq!(answer.topics[0].topic_id, Uuid([7; 16]));
        let [ok, refused] = &answer.topics[0].partitions[..] else {
            panic!("{answer:?}")
        };
        assert_eq!((ok.partition_index, ok.error_code), (4, 0));
        assert_eq!((ok.leader_id, ok.leader_epoch), (NodeId(1), LeaderEpoch(6)));
        assert_eq!(ok.isr, vec![NodeId(1), NodeId(2)]);
        assert_eq!(ok.partition_epoch, 9);
        assert_eq!(refused.partition_index, 5);
        assert_eq!(refused.error_code, ErrorCode::INVALID_UPDATE_VERSION.0);
    }
    // A refusal of the whole request is the top-level code, with no topics.
    let stale = Reply::AlterPartition(Err(ControllerError::StaleBrokerEpoch {
        broker_id: 1,
        epoch: 9,
        current: 10,
    }));
    let answer = AlterPartitionResponse::decode_exact(encode(56, 3, stale).unwrap(), 3).unwrap();
    assert_eq!(answer.error_code, ErrorCode::STALE_BROKER_EPOCH.0);
    assert!(answer.topics.is_empty());
}
