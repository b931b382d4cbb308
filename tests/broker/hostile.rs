//! Hostile peers against the real `samsa broker` binary over TCP: frames whose counts or
//! sizes lie, unknown APIs and versions, random bytes, frames cut off, and many connections
//! opened and dropped. After each, the broker must still be running and must still answer a
//! normal ApiVersions then Metadata exchange on a new connection.
//!
//! What a malformed frame must get, as Kafka does it: the connection closed (after a log line),
//! never a hang, a panic or an abort. The one exception is ApiVersions at a version the broker
//! does not know, which KIP-511 answers with a v0 body and UNSUPPORTED_VERSION.
//!
//! The broker binary cannot run in a simulation build, so these tests exist only without the
//! `sim` feature.
#![cfg(not(feature = "sim"))]

#[path = "../support/broker_process.rs"]
mod broker_process;
#[path = "../support/kafka_wire.rs"]
mod kafka_wire;

use broker_process::BrokerProcess;
use bytes::BytesMut;
use kafka_wire::*;
use samsa::protocol::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use samsa::protocol::metadata::{MetadataRequest, MetadataRequestTopic};
use std::net::{Shutdown, TcpStream};

/// Connections a hostile burst keeps open at once.
const OPEN_AT_ONCE: usize = 300;
/// Connections opened and dropped one after another.
const OPEN_AND_DROP: usize = 300;
/// Connections that each send one random blob.
const RANDOM_BLOBS: usize = 40;
/// The largest random blob.
const RANDOM_BLOB_BYTES_MAX: usize = 4096;

/// Sends `bytes` on a new connection, half-closes it (so a broker waiting for the rest of a
/// frame sees the end), and returns what came back.
fn send_hostile(broker: &BrokerProcess, bytes: &[u8]) -> Reply {
    let mut s = connect(broker.addr());
    if !write_all(&mut s, bytes) {
        return Reply::Closed;
    }
    let _ = s.shutdown(Shutdown::Write);
    read_reply(&mut s)
}

/// Fails unless the broker closed the connection without answering, then checks health.
fn expect_closed(broker: &mut BrokerProcess, case: &str, bytes: &[u8]) {
    let reply = send_hostile(broker, bytes);
    assert!(
        matches!(reply, Reply::Closed),
        "{case}: expected the connection closed, got {reply:?} (request bytes {:02x?})",
        &bytes[..bytes.len().min(64)]
    );
    still_healthy(broker, case);
}

fn still_healthy(broker: &mut BrokerProcess, case: &str) {
    broker.assert_alive(case);
    healthy_exchange(broker.addr());
    broker.assert_alive(case);
}

/// A Metadata request at `version` with a hand-written body.
fn metadata_frame(version: i16, body: &[u8]) -> Vec<u8> {
    let hv = samsa::protocol::request_header_version(MetadataRequest::API_KEY, version)
        .expect("Metadata is described");
    with_size(&request_frame(
        MetadataRequest::API_KEY,
        version,
        77,
        hv,
        body,
    ))
}

#[test]
fn a_metadata_request_claiming_2_pow_30_topics_is_refused() {
    let mut broker = BrokerProcess::start();
    still_healthy(&mut broker, "start");
    // v1: int32 array length 2^30 and nothing behind it.
    expect_closed(
        &mut broker,
        "Metadata v1 with 2^30 topics",
        &metadata_frame(1, &[0x40, 0, 0, 0]),
    );
    // v4: the same, with allow_auto_topic_creation after where the topics would be.
    expect_closed(
        &mut broker,
        "Metadata v4 with 2^30 topics",
        &metadata_frame(4, &[0x40, 0, 0, 0, 1]),
    );
    // v12 (flexible): compact array length 2^30 + 1 as an unsigned varint.
    expect_closed(
        &mut broker,
        "Metadata v12 with 2^30 topics",
        &metadata_frame(12, &[0x81, 0x80, 0x80, 0x80, 0x04, 0, 0, 0]),
    );
    // i32::MAX topics, each a 2-byte empty name in v1: still far beyond the frame.
    expect_closed(
        &mut broker,
        "Metadata v1 with i32::MAX topics",
        &metadata_frame(1, &[0x7f, 0xff, 0xff, 0xff, 0, 0]),
    );
}

#[test]
fn size_prefixes_out_of_range_are_refused() {
    let mut broker = BrokerProcess::start();
    let tail = [0u8; 64];
    for (case, size) in [
        ("2 GiB size prefix", i32::MAX),
        ("1 GiB size prefix", 1 << 30),
        ("negative size prefix -1", -1),
        ("negative size prefix i32::MIN", i32::MIN),
        ("zero size prefix", 0),
        ("size prefix below a header", 3),
    ] {
        let mut bytes = size.to_be_bytes().to_vec();
        bytes.extend_from_slice(&tail);
        expect_closed(&mut broker, case, &bytes);
    }
}

#[test]
fn negative_lengths_inside_a_request_are_refused() {
    let mut broker = BrokerProcess::start();
    // Header v1 with a client id of length -2 (only -1, null, is allowed).
    let mut frame = Vec::new();
    frame.extend_from_slice(&3i16.to_be_bytes());
    frame.extend_from_slice(&1i16.to_be_bytes());
    frame.extend_from_slice(&5i32.to_be_bytes());
    frame.extend_from_slice(&(-2i16).to_be_bytes());
    frame.extend_from_slice(&[0, 0, 0, 0]);
    expect_closed(&mut broker, "client id of length -2", &with_size(&frame));
    // Metadata v1: a topic array of length -2.
    expect_closed(
        &mut broker,
        "Metadata v1 topic array of length -2",
        &metadata_frame(1, &(-2i32).to_be_bytes()),
    );
    // Metadata v1: one topic whose name has length -3.
    expect_closed(
        &mut broker,
        "Metadata v1 topic name of length -3",
        &metadata_frame(1, &[0, 0, 0, 1, 0xff, 0xfd]),
    );
    // Metadata v4: one topic whose name has length i16::MIN.
    expect_closed(
        &mut broker,
        "Metadata v4 topic name of length i16::MIN",
        &metadata_frame(4, &[0, 0, 0, 1, 0x80, 0x00, 1]),
    );
    // Metadata v12 (flexible): a compact array length of 2^32 - 1 (the varint's maximum).
    expect_closed(
        &mut broker,
        "Metadata v12 compact array length 2^32 - 1",
        &metadata_frame(12, &[0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0]),
    );
    // A varint that never ends.
    expect_closed(
        &mut broker,
        "Metadata v12 unterminated varint",
        &metadata_frame(12, &[0xff; 12]),
    );
}

#[test]
fn unknown_api_keys_are_refused() {
    let mut broker = BrokerProcess::start();
    for (case, key) in [
        ("API key 9999", 9999i16),
        ("API key -1", -1),
        ("API key i16::MAX", i16::MAX),
    ] {
        expect_closed(
            &mut broker,
            case,
            &with_size(&request_frame(key, 0, 1, 1, &[])),
        );
    }
}

#[test]
fn unsupported_api_versions_are_refused_but_api_versions_falls_back() {
    let mut broker = BrokerProcess::start();
    let mut body = BytesMut::new();
    MetadataRequest::default()
        .encode(&mut body, 1)
        .expect("encodes");
    expect_closed(
        &mut broker,
        "Metadata v99",
        &with_size(&request_frame(3, 99, 1, 2, &body)),
    );
    expect_closed(
        &mut broker,
        "Metadata v-1",
        &with_size(&request_frame(3, -1, 1, 1, &body)),
    );
    // Produce v2: Kafka 4 no longer speaks v0-2 and closes the connection (design notes §4).
    let produce_v2_body = [0, 1, 0, 0, 0x75, 0x30, 0, 0, 0, 0];
    expect_closed(
        &mut broker,
        "Produce v2",
        &with_size(&request_frame(0, 2, 1, 1, &produce_v2_body)),
    );

    // KIP-511: ApiVersions at a version from the future gets a v0 body with
    // UNSUPPORTED_VERSION (35) and the supported ranges, on a connection that stays usable.
    let mut s = connect(broker.addr());
    let future = request_frame(
        ApiVersionsRequest::API_KEY,
        99,
        41,
        2,
        &[
            0x0b, b's', b'a', b'm', b's', b'a', b'-', b't', b'e', b's', b't', 0x02, b'1', 0,
        ],
    );
    assert!(write_all(&mut s, &with_size(&future)));
    let frame = match read_reply(&mut s) {
        Reply::Frame(f) => f,
        other => panic!("ApiVersions v99: expected a response, got {other:?}"),
    };
    let (cid, body) = split_response(frame, ApiVersionsRequest::API_KEY, 0);
    assert_eq!(cid, 41);
    let fallback = ApiVersionsResponse::decode_exact(body.clone(), 0)
        .unwrap_or_else(|e| panic!("ApiVersions v99 answer is not a v0 body: {e}; {body:02x?}"));
    assert_eq!(fallback.error_code, 35, "UNSUPPORTED_VERSION");
    let own = fallback
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiVersionsRequest::API_KEY)
        .expect("the fallback lists ApiVersions' own range");
    assert!(own.max_version >= 3, "ApiVersions range {own:?}");
    let again: ApiVersionsResponse = call(&mut s, &ApiVersionsRequest::default(), 0, 42);
    assert_eq!(again.error_code, 0, "ApiVersions v0 after the fallback");
    still_healthy(&mut broker, "ApiVersions v99");
}

/// xorshift64*, seeded: the same blobs every run.
struct Blobs(u64);

impl Blobs {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn blob(&mut self) -> Vec<u8> {
        let len = 1 + (self.next() as usize) % RANDOM_BLOB_BYTES_MAX;
        (0..len).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn random_bytes_do_not_hurt_the_broker() {
    let mut broker = BrokerProcess::start();
    let mut rng = Blobs(0x5A35_A5A5_1234_5678);
    for i in 0..RANDOM_BLOBS {
        let blob = rng.blob();
        let bytes = if i % 2 == 0 {
            // Raw noise: the first 4 bytes are a random size prefix.
            blob
        } else {
            // A size prefix that matches, around a random header and body: the broker reads
            // the whole frame and must refuse what is inside.
            with_size(&blob)
        };
        let reply = send_hostile(&broker, &bytes);
        // A random frame could in principle be a valid request; what matters is no hang.
        assert!(
            !matches!(reply, Reply::Silent),
            "random blob #{i}: the broker neither answered nor closed after the client's end of stream (first bytes {:02x?})",
            &bytes[..bytes.len().min(32)]
        );
        still_healthy(&mut broker, &format!("random blob #{i}"));
    }
}

#[test]
fn frames_cut_off_midway_are_dropped() {
    let mut broker = BrokerProcess::start();
    let whole = encode_request(
        &MetadataRequest {
            topics: Some(vec![MetadataRequestTopic {
                name: Some("cut".into()),
                ..MetadataRequestTopic::default()
            }]),
            ..MetadataRequest::default()
        },
        12,
        9,
    );
    // Cut inside the size prefix, inside the header, inside the body.
    for cut in [2, 6, whole.len() / 2, whole.len() - 1] {
        let mut s = connect(broker.addr());
        assert!(write_all(&mut s, &whole[..cut]));
        drop(s);
        still_healthy(
            &mut broker,
            &format!("frame cut after {cut} of {} bytes", whole.len()),
        );
    }
    // Cut, then half-close and wait: the broker must close its side too.
    let reply = send_hostile(&broker, &whole[..whole.len() / 2]);
    assert!(
        matches!(reply, Reply::Closed),
        "half a frame then end of stream: expected the connection closed, got {reply:?}"
    );
    // A whole request followed by half of another: the first is answered.
    let mut s = connect(broker.addr());
    let mut both = whole.clone();
    both.extend_from_slice(&whole[..whole.len() / 2]);
    assert!(write_all(&mut s, &both));
    assert!(
        matches!(read_reply(&mut s), Reply::Frame(_)),
        "the whole request before the cut one should be answered"
    );
    drop(s);
    still_healthy(&mut broker, "whole request then a cut one");
}

#[test]
fn many_connections_opened_and_dropped() {
    let mut broker = BrokerProcess::start();
    let mut open: Vec<TcpStream> = Vec::with_capacity(OPEN_AT_ONCE);
    for i in 0..OPEN_AT_ONCE {
        let mut s = connect(broker.addr());
        // Some send the start of a size prefix and stop there.
        if i % 3 == 0 {
            assert!(write_all(&mut s, &[0, 0]));
        }
        open.push(s);
    }
    // The broker still serves a new connection while these are open.
    still_healthy(&mut broker, "connections held open");
    drop(open);
    for _ in 0..OPEN_AND_DROP {
        drop(connect(broker.addr()));
    }
    still_healthy(&mut broker, "connections opened and dropped");
}

/// Produces `batch` to partition 0 of `topic` (Produce v9, acks=all) and returns the
/// partition's error code and base offset.
fn produce_raw(s: &mut TcpStream, topic: &str, batch: bytes::Bytes, cid: i32) -> (i16, i64) {
    use samsa::protocol::produce::{
        PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
    };
    let req = ProduceRequest {
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: topic.into(),
            partition_data: vec![PartitionProduceData {
                index: 0,
                records: Some(batch),
            }],
            ..TopicProduceData::default()
        }],
        ..ProduceRequest::default()
    };
    let resp: ProduceResponse = call(s, &req, 9, cid);
    let p = resp
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .expect("one partition in the Produce response");
    (p.error_code, p.base_offset.0)
}

/// A record batch whose CRC does not match its bytes is refused with CORRUPT_MESSAGE and
/// takes no offsets: the next valid batch lands at offset 0.
#[test]
fn a_batch_with_a_bad_crc_is_refused_and_not_stored() {
    use samsa::protocol::record_batch::BatchBuilder;
    let mut broker = BrokerProcess::start_with(&[("auto.create.topics.enable", "true")]);
    let mut s = connect(broker.addr());
    // Auto-create the topic through Metadata.
    let md_req = MetadataRequest {
        topics: Some(vec![MetadataRequestTopic {
            name: Some("crc".into()),
            ..MetadataRequestTopic::default()
        }]),
        allow_auto_topic_creation: true,
        ..MetadataRequest::default()
    };
    let md: samsa::protocol::metadata::MetadataResponse = call(&mut s, &md_req, 12, 1);
    assert_eq!(md.topics.first().map(|t| t.error_code), Some(0), "{md:?}");

    let mut b = BatchBuilder::new(0);
    for i in 0..3u8 {
        b.push(1_000 + i64::from(i), Some(&[i]), Some(&[i; 40]), &[]);
    }
    let good = b.build().freeze();
    let mut bad = good.to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0x01; // inside the last record, covered by the CRC
    let (error_code, _) = produce_raw(&mut s, "crc", bytes::Bytes::from(bad), 2);
    assert_eq!(
        error_code, 2,
        "CORRUPT_MESSAGE for a batch whose CRC does not match"
    );
    let (error_code, base_offset) = produce_raw(&mut s, "crc", good, 3);
    assert_eq!(
        (error_code, base_offset),
        (0, 0),
        "the valid batch after the refused one"
    );
    still_healthy(&mut broker, "a batch with a bad CRC");
}
