//! Golden tests: every record type against bytes written out by hand from Kafka's schemas
//! (field order, types, tagged fields) and `MetadataRecordSerde`'s frame, not from the
//! encoder; then decoded back. The comments name each field as the schema does.

use super::*;

/// Bytes from hex, ignoring spaces; `"…"` pieces are UTF-8 text.
fn golden(parts: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        if let Some(text) = part.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
            out.extend_from_slice(text.as_bytes());
            continue;
        }
        let hex: String = part.chars().filter(|c| !c.is_whitespace()).collect();
        assert!(hex.len() % 2 == 0, "odd hex: {part}");
        for i in (0..hex.len()).step_by(2) {
            out.push(u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"));
        }
    }
    out
}

fn uuid(last: u8) -> Uuid {
    let mut b = [0u8; 16];
    for (i, x) in b.iter_mut().enumerate() {
        *x = 0x10 + i as u8;
    }
    b[15] = last;
    Uuid(b)
}

const UUID_A: &str = "101112131415161718191a1b1c1d1e01";
const UUID_B: &str = "101112131415161718191a1b1c1d1e02";
const UUID_C: &str = "101112131415161718191a1b1c1d1e03";

fn check(record: MetadataRecord, expected: Vec<u8>) {
    let encoded = record.encode();
    assert_eq!(
        encoded.as_ref(),
        &expected[..],
        "{:?}\n got {:02x?}\nwant {:02x?}",
        record.record_type(),
        encoded.as_ref(),
        expected
    );
    let back = MetadataRecord::decode(Bytes::from(expected)).expect("decodes");
    assert_eq!(back, record);
}

#[test]
fn no_op_and_transaction_markers() {
    // frame 1, type 20, version 0, no tagged fields.
    check(
        MetadataRecord::NoOp(NoOpRecord {}),
        golden(&["01 14 00", "00"]),
    );
    // type 23; tag 0 (Name): size 18, compact string of 17 bytes.
    check(
        MetadataRecord::BeginTransaction(BeginTransactionRecord {
            name: Some("Bootstrap records".into()),
        }),
        golden(&["01 17 00", "01 00 12 12", "\"Bootstrap records\""]),
    );
    check(
        MetadataRecord::EndTransaction(EndTransactionRecord {}),
        golden(&["01 18 00", "00"]),
    );
    check(
        MetadataRecord::AbortTransaction(AbortTransactionRecord { reason: None }),
        golden(&["01 19 00", "00"]),
    );
}

#[test]
fn feature_level_record() {
    check(
        MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: METADATA_VERSION_FEATURE.into(),
            feature_level: METADATA_VERSION_LEVEL,
        }),
        golden(&[
            "01 0c 00",
            // Name: compact string, 16 bytes.
            "11",
            "\"metadata.version\"",
            // FeatureLevel 21.
            "00 15",
            "00",
        ]),
    );
}

#[test]
fn topic_and_remove_topic_records() {
    check(
        MetadataRecord::Topic(TopicRecord {
            name: "foo".into(),
            topic_id: uuid(1),
        }),
        golden(&["01 02 00", "04", "\"foo\"", UUID_A, "00"]),
    );
    check(
        MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id: uuid(1) }),
        golden(&["01 09 00", UUID_A, "00"]),
    );
}

#[test]
fn partition_record_v1() {
    let record = PartitionRecord {
        partition_id: 0,
        topic_id: uuid(1),
        replicas: vec![1, 2],
        isr: vec![1],
        removing_replicas: vec![],
        adding_replicas: vec![],
        leader: 1,
        leader_epoch: 0,
        partition_epoch: 0,
        directories: vec![uuid(2), uuid(3)],
        leader_recovery_state: 0,
        eligible_leader_replicas: None,
        last_known_elr: None,
    };
    let body = [
        // PartitionId 0, TopicId.
        "00 00 00 00",
        UUID_A,
        // Replicas [1, 2], Isr [1], RemovingReplicas [], AddingReplicas [].
        "03 00000001 00000002",
        "02 00000001",
        "01",
        "01",
        // Leader 1, LeaderEpoch 0, PartitionEpoch 0.
        "00000001 00000000 00000000",
        // Directories (v1+).
        "03",
        UUID_B,
        UUID_C,
    ];
    let mut expected = golden(&["01 03 01"]);
    expected.extend(golden(&body));
    expected.extend(golden(&["00"]));
    check(MetadataRecord::Partition(record.clone()), expected);

    // LeaderRecoveryState RECOVERING is tag 0, written only when not 0.
    let recovering = PartitionRecord {
        leader_recovery_state: 1,
        ..record
    };
    let mut expected = golden(&["01 03 01"]);
    expected.extend(golden(&body));
    expected.extend(golden(&["01 00 01 01"]));
    check(MetadataRecord::Partition(recovering), expected);
}

#[test]
fn partition_record_v0_and_v2_are_read() {
    // v0 has no Directories.
    let v0 = golden(&[
        "01 03 00",
        "00 00 00 05",
        UUID_A,
        "02 00000003",
        "02 00000003",
        "01 01",
        "00000003 00000002 00000004",
        "00",
    ]);
    let MetadataRecord::Partition(r) = MetadataRecord::decode(Bytes::from(v0)).expect("v0") else {
        panic!("a partition record");
    };
    assert_eq!(
        (r.partition_id, r.leader, r.leader_epoch, r.partition_epoch),
        (5, 3, 2, 4)
    );
    assert!(r.directories.is_empty());
    // v2 carries ELR (tag 1) and LastKnownElr (tag 2).
    let v2 = golden(&[
        "01 03 02",
        "00 00 00 00",
        UUID_A,
        "02 00000001",
        "02 00000001",
        "01 01",
        "00000001 00000000 00000000",
        "01",
        "02",
        "01 05 02 00000002",
        "02 01 01",
    ]);
    let MetadataRecord::Partition(r) = MetadataRecord::decode(Bytes::from(v2)).expect("v2") else {
        panic!("a partition record");
    };
    assert_eq!(r.eligible_leader_replicas, Some(vec![2]));
    assert_eq!(r.last_known_elr, Some(vec![]));
}

#[test]
fn config_record() {
    check(
        MetadataRecord::Config(ConfigRecord {
            resource_type: CONFIG_RESOURCE_TOPIC,
            resource_name: "foo".into(),
            name: "retention.ms".into(),
            value: Some("1000".into()),
        }),
        golden(&[
            "01 04 00",
            "02",
            "04",
            "\"foo\"",
            "0d",
            "\"retention.ms\"",
            "05",
            "\"1000\"",
            "00",
        ]),
    );
    // A null value removes the config; "" names the cluster-wide broker default.
    check(
        MetadataRecord::Config(ConfigRecord {
            resource_type: CONFIG_RESOURCE_BROKER,
            resource_name: String::new(),
            name: "log.retention.ms".into(),
            value: None,
        }),
        golden(&[
            "01 04 00",
            "04",
            "01",
            "11",
            "\"log.retention.ms\"",
            "00",
            "00",
        ]),
    );
}

#[test]
fn partition_change_record_v1() {
    // Only Isr (tag 0) and Leader (tag 1) differ from their defaults.
    check(
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 3,
            topic_id: uuid(1),
            isr: Some(vec![1, 2]),
            leader: 2,
            ..PartitionChangeRecord::default()
        }),
        golden(&[
            "01 05 01",
            "00000003",
            UUID_A,
            "02",
            "00 09 03 00000001 00000002",
            "01 04 00000002",
        ]),
    );
    // Nothing changed but the leader went away (-1), and Directories (tag 8) moved.
    check(
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 0,
            topic_id: uuid(1),
            leader: NO_LEADER,
            directories: Some(vec![uuid(2)]),
            ..PartitionChangeRecord::default()
        }),
        golden(&[
            "01 05 01",
            "00000000",
            UUID_A,
            "02",
            "01 04 ffffffff",
            "08 11 02",
            UUID_B,
        ]),
    );
}

#[test]
fn partition_change_record_v2_when_it_carries_an_elr() {
    // KIP-966's fields exist from v2: a record that sets them is written at v2 (an empty
    // list is a value too: it clears the ELR), one that does not stays at v1.
    check(
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 3,
            topic_id: uuid(1),
            isr: Some(vec![1]),
            eligible_leader_replicas: Some(vec![2]),
            last_known_elr: Some(vec![]),
            ..PartitionChangeRecord::default()
        }),
        golden(&[
            "01 05 02",
            "00000003",
            UUID_A,
            "03",
            "00 05 02 00000001",
            "06 05 02 00000002",
            "07 01 01",
        ]),
    );
    let without = MetadataRecord::PartitionChange(PartitionChangeRecord {
        isr: Some(vec![1]),
        ..PartitionChangeRecord::default()
    });
    assert_eq!(without.version(), 1);
    // A snapshot's PartitionRecord with an ELR likewise.
    let partition = MetadataRecord::Partition(PartitionRecord {
        topic_id: uuid(1),
        replicas: vec![1, 2],
        isr: vec![1],
        leader: 1,
        eligible_leader_replicas: Some(vec![2]),
        ..PartitionRecord::default()
    });
    assert_eq!(partition.version(), 2);
    assert_eq!(
        MetadataRecord::decode(partition.encode()).unwrap(),
        partition
    );
}

#[test]
fn producer_ids_record() {
    check(
        MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: 1,
            broker_epoch: 5,
            next_producer_id: 2000,
        }),
        golden(&[
            "01 0f 00",
            "00000001",
            "0000000000000005",
            "00000000000007d0",
            "00",
        ]),
    );
}

#[test]
fn broker_records() {
    check(
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: 1,
            is_migrating_zk_broker: false,
            incarnation_id: uuid(1),
            broker_epoch: 7,
            end_points: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "localhost".into(),
                port: 9092,
                security_protocol: 0,
            }],
            features: vec![BrokerFeature {
                name: METADATA_VERSION_FEATURE.into(),
                min_supported_version: 1,
                max_supported_version: 21,
            }],
            rack: None,
            fenced: true,
            in_controlled_shutdown: false,
            log_dirs: vec![uuid(2)],
        }),
        golden(&[
            "01 00 03",
            // BrokerId, IsMigratingZkBroker (v2+), IncarnationId, BrokerEpoch.
            "00000001",
            "00",
            UUID_A,
            "0000000000000007",
            // EndPoints: one, {Name, Host, Port, SecurityProtocol}, its own tagged fields.
            "02",
            "0a",
            "\"PLAINTEXT\"",
            "0a",
            "\"localhost\"",
            "2384 0000 00",
            // Features: one.
            "02",
            "11",
            "\"metadata.version\"",
            "0001 0015 00",
            // Rack null, Fenced true, InControlledShutdown false (v1+).
            "00 01 00",
            // Tagged: LogDirs (tag 0), 17 bytes.
            "01 00 11 02",
            UUID_B,
        ]),
    );
    check(
        MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
            broker_id: 2,
            broker_epoch: 3,
        }),
        golden(&["01 01 00", "00000002", "0000000000000003", "00"]),
    );
    check(
        MetadataRecord::FenceBroker(FenceBrokerRecord { id: 2, epoch: 3 }),
        golden(&["01 07 00", "00000002", "0000000000000003", "00"]),
    );
    check(
        MetadataRecord::UnfenceBroker(UnfenceBrokerRecord { id: 2, epoch: 3 }),
        golden(&["01 08 00", "00000002", "0000000000000003", "00"]),
    );
    // Fence: v0 with Fenced (tag 0) = 1; unfence: -1.
    let change = |fenced, in_controlled_shutdown| BrokerRegistrationChangeRecord {
        broker_id: 1,
        broker_epoch: 10,
        fenced,
        in_controlled_shutdown,
        log_dirs: vec![],
    };
    check(
        MetadataRecord::BrokerRegistrationChange(change(FENCED_CHANGE_FENCE, 0)),
        golden(&["01 11 00", "00000001", "000000000000000a", "01 00 01 01"]),
    );
    check(
        MetadataRecord::BrokerRegistrationChange(change(FENCED_CHANGE_UNFENCE, 0)),
        golden(&["01 11 00", "00000001", "000000000000000a", "01 00 01 ff"]),
    );
    // Entering controlled shutdown is v1: InControlledShutdown (tag 1) = 1.
    check(
        MetadataRecord::BrokerRegistrationChange(change(FENCED_CHANGE_NONE, 1)),
        golden(&["01 11 01", "00000001", "000000000000000a", "01 01 01 01"]),
    );
}

#[test]
fn bad_frames_are_named() {
    let cases: [(Vec<u8>, &str); 5] = [
        (golden(&["00 14 00 00"]), "frame version 0"),
        (golden(&["01 0a 00 00"]), "unknown type 10"),
        (golden(&["01 03 03 00"]), "at version 3"),
        (
            golden(&["01 14 00 00 ff"]),
            "1 byte(s) of garbage after a NoOp record",
        ),
        (golden(&["01 02 00 7f"]), "does not decode"),
    ];
    for (bytes, why) in cases {
        let error = MetadataRecord::decode(Bytes::from(bytes)).expect_err(why);
        assert!(error.to_string().contains(why), "{why}: {error}");
    }
    // A count claiming 2^28 replicas in a 10-byte record allocates nothing and fails.
    let huge = golden(&["01 03 00", "00000000", UUID_A, "ffffff7f"]);
    assert!(MetadataRecord::decode(Bytes::from(huge)).is_err());
}
