//! librdkafka's AdminClient (the `rdkafka` crate) against the real `samsa broker` binary:
//! DescribeConfigs of a topic and of the broker, AlterConfigs of a topic (refused for a bad
//! value, applied to produce, kept across a restart) and CreatePartitions; a topic set to
//! `compression.type=zstd` storing librdkafka's uncompressed batches zstd-compressed; and
//! librdkafka's own DescribeTopics and DescribeCluster with authorized operations, which the
//! `rdkafka` crate 0.39 does not wrap, so they are called through its C bindings
//! (`rdkafka::bindings`, the same librdkafka 2.12.1).
#![cfg(not(feature = "sim"))]

#[path = "support/broker_process.rs"]
mod broker_process;
#[path = "support/rdkafka_support.rs"]
mod rdkafka_support;
#[path = "support/segment_files.rs"]
mod segment_files;

use broker_process::BrokerProcess;
use rdkafka::admin::{AdminClient, AlterConfig, ConfigSource, NewPartitions, ResourceSpecifier};
use rdkafka::bindings as rd;
use rdkafka::client::DefaultClientContext;
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

/// One librdkafka admin call through the C API on a queue of its own: `start` issues it with
/// options asking for authorized operations, `read` gets the result event (of `event_type`)
/// once it arrives. Fails the test on a request-level error or after `CLIENT_TIMEOUT_MS`.
fn admin_call<T>(
    admin: &AdminClient<DefaultClientContext>,
    op: rd::rd_kafka_admin_op_t,
    event_type: i32,
    start: impl FnOnce(
        *mut rd::rd_kafka_t,
        *const rd::rd_kafka_AdminOptions_t,
        *mut rd::rd_kafka_queue_t,
    ),
    read: impl FnOnce(*mut rd::rd_kafka_event_t) -> T,
) -> T {
    let rk = admin.inner().native_ptr();
    // SAFETY: `rk` is the live client `admin` owns; the options, queue and event are created
    // and destroyed here, and `read` only looks at the event before it is destroyed.
    unsafe {
        let options = rd::rd_kafka_AdminOptions_new(rk, op);
        assert!(!options.is_null(), "AdminOptions for {op:?}");
        let error = rd::rd_kafka_AdminOptions_set_include_authorized_operations(options, 1);
        assert!(error.is_null(), "include_authorized_operations for {op:?}");
        let queue = rd::rd_kafka_queue_new(rk);
        start(rk, options, queue);
        let event = rd::rd_kafka_queue_poll(queue, CLIENT_TIMEOUT_MS as i32);
        assert!(
            !event.is_null(),
            "no answer to {op:?} in {CLIENT_TIMEOUT_MS} ms"
        );
        assert_eq!(rd::rd_kafka_event_type(event), event_type, "{op:?}");
        let err = rd::rd_kafka_event_error(event);
        assert_eq!(
            err,
            rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
            "{op:?}: {:?}",
            std::ffi::CStr::from_ptr(rd::rd_kafka_event_error_string(event))
        );
        let out = read(event);
        rd::rd_kafka_event_destroy(event);
        rd::rd_kafka_queue_destroy(queue);
        rd::rd_kafka_AdminOptions_destroy(options);
        out
    }
}

/// An array of `count` authorized operations as librdkafka hands it out, as their codes.
///
/// # Safety
/// `ops` must point at `count` operations (or be anything when `count` is 0).
unsafe fn operation_codes(ops: *const rd::rd_kafka_AclOperation_t, count: usize) -> Vec<u32> {
    if count == 0 || ops.is_null() {
        return Vec::new();
    }
    // Read as plain integers: a code librdkafka's enum lacked must not be an invalid enum.
    std::slice::from_raw_parts(ops.cast::<u32>(), count).to_vec()
}

/// librdkafka's DescribeTopics of `topics` with authorized operations: per topic its name,
/// whether it carried an error, and its operations' codes, sorted.
fn describe_topics(
    admin: &AdminClient<DefaultClientContext>,
    topics: &[&str],
) -> Vec<(String, bool, Vec<u32>)> {
    let names: Vec<std::ffi::CString> = topics
        .iter()
        .map(|t| std::ffi::CString::new(*t).expect("a topic name without NUL"))
        .collect();
    let mut pointers: Vec<*const std::ffi::c_char> = names.iter().map(|n| n.as_ptr()).collect();
    admin_call(
        admin,
        rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBETOPICS,
        rd::RD_KAFKA_EVENT_DESCRIBETOPICS_RESULT,
        // SAFETY: the names outlive the call; librdkafka copies the collection.
        |rk, options, queue| unsafe {
            let collection =
                rd::rd_kafka_TopicCollection_of_topic_names(pointers.as_mut_ptr(), pointers.len());
            rd::rd_kafka_DescribeTopics(rk, collection, options, queue);
            rd::rd_kafka_TopicCollection_destroy(collection);
        },
        // SAFETY: the result and its descriptions live as long as the event.
        |event| unsafe {
            let result = rd::rd_kafka_event_DescribeTopics_result(event);
            let mut count = 0usize;
            let descriptions = rd::rd_kafka_DescribeTopics_result_topics(result, &mut count);
            (0..count)
                .map(|i| {
                    let d = *descriptions.add(i);
                    let name = std::ffi::CStr::from_ptr(rd::rd_kafka_TopicDescription_name(d))
                        .to_string_lossy()
                        .into_owned();
                    let failed = !rd::rd_kafka_TopicDescription_error(d).is_null();
                    let mut n = 0usize;
                    let ops = rd::rd_kafka_TopicDescription_authorized_operations(d, &mut n);
                    let mut codes = operation_codes(ops, n);
                    codes.sort_unstable();
                    (name, failed, codes)
                })
                .collect()
        },
    )
}

/// librdkafka's DescribeCluster with authorized operations: the cluster id and the codes of
/// the operations, sorted.
fn describe_cluster(admin: &AdminClient<DefaultClientContext>) -> (String, Vec<u32>) {
    admin_call(
        admin,
        rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECLUSTER,
        rd::RD_KAFKA_EVENT_DESCRIBECLUSTER_RESULT,
        // SAFETY: a plain call on live handles.
        |rk, options, queue| unsafe { rd::rd_kafka_DescribeCluster(rk, options, queue) },
        // SAFETY: the result lives as long as the event.
        |event| unsafe {
            let result = rd::rd_kafka_event_DescribeCluster_result(event);
            let id = rd::rd_kafka_DescribeCluster_result_cluster_id(result);
            let id = if id.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(id).to_string_lossy().into_owned()
            };
            let mut n = 0usize;
            let ops = rd::rd_kafka_DescribeCluster_result_authorized_operations(result, &mut n);
            let mut codes = operation_codes(ops, n);
            codes.sort_unstable();
            (id, codes)
        },
    )
}

#[tokio::test]
async fn admin_client_sets_zstd_and_sees_authorized_operations() {
    let broker = BrokerProcess::start();
    let bootstrap = broker.bootstrap();
    let topic = "zstd-stored";
    create_topic(&bootstrap, topic, 1).await;
    let admin = admin(&bootstrap);
    let opts = admin_options();
    let altered = admin
        .alter_configs(
            &[AlterConfig::new(ResourceSpecifier::Topic(topic)).set("compression.type", "zstd")],
            &opts,
        )
        .await
        .expect("AlterConfigs request");
    assert!(altered[0].is_ok(), "{altered:?}");
    let described = admin
        .describe_configs(&[ResourceSpecifier::Topic(topic)], &opts)
        .await
        .expect("DescribeConfigs request");
    let config = described[0].as_ref().expect("topic described");
    let compression = config.get("compression.type").expect("compression.type");
    assert_eq!(
        (compression.value.as_deref(), &compression.source),
        (Some("zstd"), &ConfigSource::DynamicTopic)
    );

    // librdkafka produces uncompressed; the broker stores every batch zstd-compressed.
    let base_ts = now_ms() - 60_000;
    let records: Vec<Sent> = (0..2_000).map(|i| record("zstd", i, base_ts)).collect();
    let acked = produce_all(&producer(&bootstrap, "none"), topic, &records).await;
    let codecs = segment_files::stored_batch_codecs(broker.data_dir(), topic);
    assert!(!codecs.is_empty(), "no batch stored for {topic}");
    assert!(
        codecs.iter().all(|&c| c == segment_files::codec_id("zstd")),
        "every stored batch is zstd: {codecs:?}"
    );
    // Read back through librdkafka (CRC checks on): every record intact.
    let consumer = consumer(&bootstrap, "throwaway-zstd-stored");
    let read = consume_ranges(&consumer, topic, &acked_ranges(&acked));
    assert_matches(topic, &acked, &read, false);

    // Authorized operations, as Kafka answers without an authorizer: a topic's READ (3),
    // WRITE, CREATE, DELETE, ALTER, DESCRIBE (8), DESCRIBE_CONFIGS, ALTER_CONFIGS (11).
    let topics = describe_topics(&admin, &[topic]);
    assert_eq!(
        topics,
        vec![(topic.to_string(), false, vec![3, 4, 5, 6, 7, 8, 10, 11])]
    );
    // The cluster's CREATE (5), ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
    // ALTER_CONFIGS, IDEMPOTENT_WRITE (12).
    let (cluster_id, operations) = describe_cluster(&admin);
    assert!(!cluster_id.is_empty());
    assert_eq!(operations, vec![5, 7, 8, 9, 10, 11, 12]);
}
