//! Regenerates the client request fixtures in tests/fixtures/clients: runs kcat and librdkafka
//! (the `rdkafka` crate) against a real broker through a recording proxy and writes the first
//! request frame of each (API, version) each client sent, as
//! `<client>-<nn>-<api>-v<version>.hex`. tests/codec/client_fixtures.rs decodes them.
//!
//! Not part of the normal run (it rewrites files in the source tree):
//! `cargo test --test codec -- capture_client_fixtures:: --ignored`, then review and commit the diff.
//! kcat is required when it runs.
#![cfg(not(feature = "sim"))]

#[path = "../support/broker_process.rs"]
mod broker_process;
#[path = "../support/capture_proxy.rs"]
mod capture_proxy;
#[path = "../support/kcat.rs"]
mod kcat;
#[path = "../support/rdkafka_support.rs"]
mod rdkafka_support;
#[path = "../support/request_codec.rs"]
mod request_codec;

use broker_process::BrokerProcess;
use capture_proxy::{CaptureProxy, CapturedFrame};
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::producer::FutureProducer;
use rdkafka::{Offset, TopicPartitionList};
use rdkafka_support::*;
use request_codec::{api_name, check_frame};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bytes per line of a fixture file's hex.
const HEX_LINE_BYTES: usize = 32;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clients")
}

/// A broker that advertises the proxy, and the proxy forwarding to it.
fn broker_behind_proxy() -> (BrokerProcess, CaptureProxy) {
    let mut proxy = CaptureProxy::bind();
    let advertised = format!("PLAINTEXT://127.0.0.1:{}", proxy.port());
    let broker = BrokerProcess::start_with(&[
        ("advertised.listeners", advertised.as_str()),
        ("auto.create.topics.enable", "true"),
        ("num.partitions", "3"),
    ]);
    proxy.forward_to(broker.addr());
    (broker, proxy)
}

/// Replaces `client`'s fixtures with the first frame of each (API, version) in `frames`, plus
/// the first frame of each (API, version) with a different outcome of the codec check (bytes
/// after the body, or a failure): regression fixtures for the codec, named like the others.
fn write_fixtures(client: &str, describe: &str, frames: &[(String, CapturedFrame)]) {
    let dir = fixtures_dir();
    #[allow(clippy::disallowed_methods)] // the fixture directory in the source tree
    std::fs::create_dir_all(&dir).expect("create the fixture directory");
    for e in std::fs::read_dir(&dir).expect("list fixtures").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("{client}-")) && name.ends_with(".hex") {
            #[allow(clippy::disallowed_methods)] // the fixture directory in the source tree
            std::fs::remove_file(e.path()).expect("remove an old fixture");
        }
    }
    let mut seen = BTreeSet::new();
    let mut n = 0;
    for (flow, f) in frames {
        let [k0, k1, v0, v1, c0, c1, c2, c3, ..] = f.bytes[..] else {
            continue;
        };
        let key = i16::from_be_bytes([k0, k1]);
        let version = i16::from_be_bytes([v0, v1]);
        let correlation_id = i32::from_be_bytes([c0, c1, c2, c3]);
        let check = check_frame(&bytes::Bytes::from(f.bytes.clone()));
        if !seen.insert((key, version, check.clone())) {
            continue;
        }
        match &check {
            Ok(0) => {}
            Ok(n) => {
                eprintln!("{client}: {flow}: frame {key} v{version} has {n} bytes after its body")
            }
            Err(e) => {
                eprintln!("{client}: {flow}: frame {key} v{version} fails the codec check: {e}")
            }
        }
        let Some(api) = api_name(key) else {
            eprintln!("{client}: API key {key} v{version} is not described by samsa::protocol; no fixture");
            continue;
        };
        let mut text = format!(
            "# {describe}: {api} v{version} (API key {key}), correlation id {correlation_id}, connection {}\n\
             # captured from: {flow}\n\
             # codec check when captured: {}\n\
             # the request frame without its size prefix; regenerate with\n\
             # cargo test --test codec -- capture_client_fixtures:: --ignored\n",
            f.connection,
            match &check {
                Ok(0) => "ok".to_string(),
                Ok(n) => format!("ok, with {n} bytes after the body"),
                Err(e) => format!("FAILED: {e}"),
            }
        );
        for chunk in f.bytes.chunks(HEX_LINE_BYTES) {
            for b in chunk {
                text.push_str(&format!("{b:02x}"));
            }
            text.push('\n');
        }
        let path = dir.join(format!("{client}-{n:02}-{api}-v{version}.hex"));
        #[allow(clippy::disallowed_methods)] // the fixture directory in the source tree
        std::fs::write(&path, text).expect("write a fixture");
        eprintln!("wrote {}", path.display());
        n += 1;
    }
}

fn take(proxy: &CaptureProxy, flow: &str, out: &mut Vec<(String, CapturedFrame)>) {
    out.extend(proxy.frames().into_iter().map(|f| (flow.to_string(), f)));
    proxy.clear();
}

#[test]
#[ignore = "rewrites tests/fixtures/clients; run with --ignored and commit the result"]
fn capture_kcat_fixtures() {
    let kcat_path = kcat::find_kcat().expect("kcat is required to capture its fixtures");
    let (broker, proxy) = broker_behind_proxy();
    let bootstrap = proxy.addr().to_string();
    let work = broker.dir().to_path_buf();
    let mut frames = Vec::new();

    // A failed run still sent its requests, which is what is recorded.
    let run = |args: &[&str], input: Option<&Path>| {
        let r = kcat::run_kcat(&kcat_path, &work, &kcat::args(&bootstrap, args), input);
        if !r.status.success() {
            eprintln!(
                "kcat {} failed ({}): {}",
                args.join(" "),
                r.status,
                r.stderr
            );
        }
    };
    run(&["-L"], None);
    take(&proxy, "kcat -L", &mut frames);

    let input = work.join("input.txt");
    let lines: String = (0..20).map(|i| format!("key-{i}:value {i}\n")).collect();
    #[allow(clippy::disallowed_methods)] // a test's scratch file
    std::fs::write(&input, lines).expect("write input");
    let produce = [
        "-P", "-t", "fixture", "-K:", "-H", "h=v", "-z", "gzip", "-X", "acks=all",
    ];
    run(&produce, Some(&input));
    take(
        &proxy,
        "kcat -P -t fixture -K: -H h=v -z gzip -X acks=all",
        &mut frames,
    );

    run(&["-C", "-t", "fixture", "-e", "-o", "beginning"], None);
    take(&proxy, "kcat -C -t fixture -e -o beginning", &mut frames);

    run(&["-Q", "-t", "fixture:0:1"], None);
    take(&proxy, "kcat -Q -t fixture:0:1", &mut frames);

    let version = kcat::run_kcat(&kcat_path, &work, &["-V".to_string()], None);
    let describe = version
        .stdout_text()
        .lines()
        .chain(version.stderr.lines())
        .find(|l| l.contains("Version"))
        .map(|l| format!("kcat {}", l.trim()))
        .unwrap_or_else(|| "kcat".to_string());
    write_fixtures("kcat", &describe, &frames);
}

#[tokio::test]
#[ignore = "rewrites tests/fixtures/clients; run with --ignored and commit the result"]
async fn capture_rdkafka_fixtures() {
    let (_broker, proxy) = broker_behind_proxy();
    let bootstrap = proxy.addr().to_string();
    let mut frames = Vec::new();
    let timeout = Duration::from_millis(CLIENT_TIMEOUT_MS);

    let admin = admin(&bootstrap);
    let opts = admin_options();
    let _ = admin
        .create_topics(
            &[NewTopic::new("fixture", 3, TopicReplication::Fixed(1))],
            &opts,
        )
        .await;
    let _ = admin
        .create_topics(
            &[NewTopic::new("doomed", 1, TopicReplication::Fixed(1))],
            &opts,
        )
        .await;
    let _ = admin.delete_topics(&["doomed"], &opts).await;
    drop(admin);
    take(
        &proxy,
        "rdkafka AdminClient create_topics, delete_topics",
        &mut frames,
    );

    let producer = producer(&bootstrap, "zstd");
    let base_ts = now_ms() - 60_000;
    let records: Vec<Sent> = (0..20).map(|i| record("fixture", i, base_ts)).collect();
    let _ = produce_all(&producer, "fixture", &records).await;
    drop(producer);
    take(
        &proxy,
        "rdkafka FutureProducer acks=all compression.type=zstd",
        &mut frames,
    );

    let consumer = consumer(&bootstrap, "throwaway-fixture");
    let mut tpl = TopicPartitionList::new();
    for p in 0..3 {
        tpl.add_partition_offset("fixture", p, Offset::Beginning)
            .expect("add partition");
    }
    consumer.assign(&tpl).expect("assign");
    for _ in 0..30 {
        let _ = consumer.poll(Duration::from_millis(POLL_MS));
    }
    let mut by_time = TopicPartitionList::new();
    by_time
        .add_partition_offset("fixture", 0, Offset::Offset(base_ts + 5))
        .expect("add partition");
    let _ = consumer.offsets_for_times(by_time, timeout);
    let _ = consumer.fetch_metadata(None, timeout);
    let _ = consumer.fetch_metadata(Some("fixture"), timeout);
    drop(consumer);
    take(
        &proxy,
        "rdkafka BaseConsumer assign from the beginning, poll, offsets_for_times, metadata (all topics, one topic)",
        &mut frames,
    );

    // The idempotent producer's InitProducerId (the broker may refuse it; the request is
    // what is recorded).
    let idempotent: FutureProducer = client_config(&bootstrap)
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "5000")
        .create()
        .expect("create the idempotent producer");
    let one = [record("fixture-idempotent", 0, base_ts)];
    let _ = tokio::time::timeout(
        Duration::from_millis(CLIENT_TIMEOUT_MS),
        produce_all_lenient(&idempotent, "fixture", &one),
    )
    .await;
    drop(idempotent);
    take(
        &proxy,
        "rdkafka FutureProducer enable.idempotence=true",
        &mut frames,
    );

    let (_, version) = rdkafka::util::get_rdkafka_version();
    write_fixtures(
        "rdkafka",
        &format!("rdkafka crate 0.39 (librdkafka {version})"),
        &frames,
    );
}

/// Sends and waits for the delivery reports, ignoring failures.
async fn produce_all_lenient(producer: &FutureProducer, topic: &str, records: &[Sent]) {
    for r in records {
        let rec = rdkafka::producer::FutureRecord::<[u8], [u8]>::to(topic)
            .key(&r.key[..])
            .payload(r.payload.as_deref().unwrap_or(&[]));
        let _ = producer
            .send(rec, Duration::from_millis(CLIENT_TIMEOUT_MS))
            .await;
    }
}
