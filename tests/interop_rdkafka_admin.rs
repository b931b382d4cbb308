//! librdkafka's AdminClient (the `rdkafka` crate) against the real `samsa broker` binary:
//! DescribeConfigs of a topic and of the broker, AlterConfigs of a topic (refused for a bad
//! value, applied to produce, kept across a restart) and CreatePartitions. DescribeCluster is
//! not exposed by the `rdkafka` crate, so `tests/broker_admin.rs` covers it by hand.
#![cfg(not(feature = "sim"))]

#[path = "support/broker_process.rs"]
mod broker_process;
#[path = "support/rdkafka_support.rs"]
mod rdkafka_support;

use broker_process::BrokerProcess;
use rdkafka::admin::{AlterConfig, ConfigSource, NewPartitions, ResourceSpecifier};
use rdkafka::error::KafkaError;
use rdkafka::producer::FutureRecord;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka_support::*;
use std::time::Duration;

/// How long one produce may wait for its delivery report.
const DELIVERY_TIMEOUT_MS: u64 = 30_000;

async fn produce_one(bootstrap: &str, topic: &str, bytes: usize) -> Result<(), RDKafkaErrorCode> {
    let producer = producer(bootstrap, "none");
    let payload = vec![b'p'; bytes];
    let record = FutureRecord::to(topic)
        .key("k")
        .payload(&payload)
        .partition(0);
    match producer
        .send(record, Duration::from_millis(DELIVERY_TIMEOUT_MS))
        .await
    {
        Ok(_) => Ok(()),
        Err((KafkaError::MessageProduction(code), _)) => Err(code),
        Err((other, _)) => panic!("produce to {topic}: {other}"),
    }
}

#[tokio::test]
async fn admin_client_describes_alters_and_grows() {
    let mut broker = BrokerProcess::start_with(&[("log.retention.hours", "48")]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "admin-cfg", 1).await;
    let admin = admin(&bootstrap);
    let opts = admin_options();

    let described = admin
        .describe_configs(
            &[
                ResourceSpecifier::Topic("admin-cfg"),
                ResourceSpecifier::Broker(1),
            ],
            &opts,
        )
        .await
        .expect("DescribeConfigs request");
    let topic = described[0].as_ref().expect("topic described");
    let retention = topic.get("retention.ms").expect("retention.ms described");
    assert_eq!(retention.value.as_deref(), Some("172800000"));
    assert_eq!(retention.source, ConfigSource::StaticBroker);
    let max = topic.get("max.message.bytes").expect("max.message.bytes");
    assert_eq!(max.source, ConfigSource::Default);
    assert!(max.is_default);
    let node = described[1].as_ref().expect("broker described");
    let partitions = node.get("num.partitions").expect("num.partitions");
    assert!(partitions.is_read_only);
    assert_eq!(partitions.value.as_deref(), Some("1"));
    let hours = node
        .get("log.retention.hours")
        .expect("log.retention.hours");
    assert_eq!(
        (hours.value.as_deref(), &hours.source),
        (Some("48"), &ConfigSource::StaticBroker)
    );

    // A bad value is refused. The `rdkafka` crate reports every AlterConfigs resource as
    // Ok (it does not read the per-resource error), so the refusal shows as nothing changed.
    admin
        .alter_configs(
            &[AlterConfig::new(ResourceSpecifier::Topic("admin-cfg"))
                .set("max.message.bytes", "-3")],
            &opts,
        )
        .await
        .expect("AlterConfigs request");
    let described = admin
        .describe_configs(&[ResourceSpecifier::Topic("admin-cfg")], &opts)
        .await
        .expect("DescribeConfigs request");
    let topic = described[0].as_ref().expect("topic described");
    let max = topic.get("max.message.bytes").expect("max.message.bytes");
    assert_eq!(
        (max.value.as_deref(), &max.source),
        (Some("1048588"), &ConfigSource::Default),
        "the refused value was not applied; broker stderr:\n{}",
        broker.stderr_tail()
    );
    // A good one applies to the running partition.
    assert_eq!(produce_one(&bootstrap, "admin-cfg", 5000).await, Ok(()));
    let altered = admin
        .alter_configs(
            &[AlterConfig::new(ResourceSpecifier::Topic("admin-cfg"))
                .set("max.message.bytes", "1000")
                .set("retention.ms", "3600000")],
            &opts,
        )
        .await
        .expect("AlterConfigs request");
    assert!(altered[0].is_ok(), "{altered:?}");
    assert_eq!(
        produce_one(&bootstrap, "admin-cfg", 5000).await,
        Err(RDKafkaErrorCode::MessageSizeTooLarge)
    );

    // Partitions grow, never shrink.
    let grown = admin
        .create_partitions(&[NewPartitions::new("admin-cfg", 3)], &opts)
        .await
        .expect("CreatePartitions request");
    assert_eq!(grown, vec![Ok("admin-cfg".to_string())]);
    let shrunk = admin
        .create_partitions(&[NewPartitions::new("admin-cfg", 2)], &opts)
        .await
        .expect("CreatePartitions request");
    assert_eq!(
        shrunk,
        vec![Err((
            "admin-cfg".to_string(),
            RDKafkaErrorCode::InvalidPartitions
        ))]
    );
    let reader = consumer(&bootstrap, "throwaway-admin-cfg");
    assert_eq!(partition_count(&reader, "admin-cfg"), 3);
    drop(reader);
    drop(admin);

    broker.stop();
    broker.restart();
    let restarted = rdkafka_support::admin(&bootstrap);
    let described = restarted
        .describe_configs(&[ResourceSpecifier::Topic("admin-cfg")], &opts)
        .await
        .expect("DescribeConfigs request");
    let topic = described[0].as_ref().expect("topic described");
    let retention = topic.get("retention.ms").expect("retention.ms");
    assert_eq!(
        (retention.value.as_deref(), &retention.source),
        (Some("3600000"), &ConfigSource::DynamicTopic)
    );
    let reader = consumer(&bootstrap, "throwaway-admin-cfg-2");
    assert_eq!(partition_count(&reader, "admin-cfg"), 3);
}
