//! The zero-copy fetch path (design §4): a Fetch response encoded as parts, with records left
//! in segment files and sent by `sendfile`, must be byte for byte the plain encoding.
//!
//! - `parts_concatenate_to_the_plain_encoding_at_every_version`: `fetch::encode_parts` against
//!   `encode_response` with the records in memory, v4..=v18, with regions in real and
//!   simulated files, several regions in one partition, empty ones, and marker-like bytes
//!   (0x00/0xFF) everywhere a value can hold them.
//! - `a_large_fetch_over_tcp_matches_log_read`: several MiB across segments fetched over real
//!   TCP (so through `sendfile`) equal what `Log::read` returns, at several versions, and the
//!   handler really answered with file regions.

#![cfg(not(feature = "sim"))]

#[path = "../support/test_broker.rs"]
mod test_broker;

use bytes::{Bytes, BytesMut};
use samsa::broker::handlers::fetch::{self, Fetched, RegionRecords};
use samsa::broker::handlers::{encode_response, ResponsePart};
use samsa::log::FileRegion;
use samsa::protocol::fetch::{
    AbortedTransaction, EpochEndOffset, FetchPartition, FetchRequest, FetchResponse, FetchTopic,
    FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData, SnapshotId,
};
use samsa::protocol::header::ResponseHeader;
use samsa::protocol::record_batch::BatchBuilder;
use samsa::protocol::response_header_version;
use samsa::protocol::types::{LeaderEpoch, NodeId, Offset, ProducerId};
use samsa::protocol::wire::Uuid;
use samsa::rt::disk::{Disk, MemDisk, OpenMode};
use test_broker::TestBroker;

/// Bytes that look like the 0x00/0xFF markers and like length prefixes.
fn content(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| match i % 7 {
            0 => 0x00,
            1 => 0xFF,
            _ => (i as u8).wrapping_mul(31).wrapping_add(seed),
        })
        .collect::<Vec<u8>>()
        .into()
}

/// A partition's data with every field the version has set to a non-default value.
fn partition(version: i16, index: i32) -> PartitionData {
    let mut data = PartitionData {
        partition_index: index,
        error_code: 0,
        high_watermark: Offset(0x00FF_00FF),
        last_stable_offset: Offset(0xFF00),
        log_start_offset: Offset(0xFF),
        aborted_transactions: Some(vec![AbortedTransaction {
            producer_id: ProducerId(0xFF),
            first_offset: Offset(0),
        }]),
        records: Some(Bytes::new()),
        ..Default::default()
    };
    if version >= 11 {
        data.preferred_read_replica = NodeId(0xFF);
    }
    if version >= 12 {
        data.diverging_epoch = EpochEndOffset {
            epoch: LeaderEpoch(0xFF),
            end_offset: Offset(0),
        };
        data.current_leader = LeaderIdAndEpoch {
            leader_id: NodeId(0),
            leader_epoch: LeaderEpoch(0xFF),
        };
        data.snapshot_id = SnapshotId {
            end_offset: Offset(0xFF),
            epoch: LeaderEpoch(0),
        };
    }
    data
}

fn topic(
    version: i16,
    name: &str,
    id: u8,
    partitions: Vec<PartitionData>,
) -> FetchableTopicResponse {
    let mut topic = FetchableTopicResponse {
        partitions,
        ..Default::default()
    };
    if version >= 13 {
        topic.topic_id = Uuid([
            id, 0xFF, 0x00, 0xFF, 0, 0, 0, 0, 0xFF, 0, 0, 0, 0, 0, 0, 0x01,
        ]);
    } else {
        topic.topic = name.to_string();
    }
    topic
}

/// Reads a region back, the way a copying send would.
async fn region_bytes(region: &FileRegion) -> Bytes {
    region.read().await.expect("region reads back")
}

#[tokio::test]
async fn parts_concatenate_to_the_plain_encoding_at_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let real = Disk::real(dir.path()).unwrap();
    let mem = Disk::mem(MemDisk::new(7));
    let real_file = real.open("segment.log", OpenMode::Create).await.unwrap();
    let mem_file = mem.open("segment.log", OpenMode::Create).await.unwrap();
    let real_bytes = content(300_000, 1);
    let mem_bytes = content(70_000, 2);
    real_file.write_at(0, &real_bytes).await.unwrap();
    mem_file.write_at(0, &mem_bytes).await.unwrap();
    let region = |file: &samsa::rt::disk::File, position: u64, len: usize| FileRegion {
        file: file.clone(),
        position,
        len,
    };

    for version in 4..=18i16 {
        // Topic 0: [inline records, region in a real file, error with empty records,
        // two regions (real + simulated file)]. Topic 1: [empty region list, region of a
        // simulated file, region of 200 KB (a multi-byte varint length)].
        let t0 = vec![
            partition(version, 0),
            partition(version, 1),
            PartitionData {
                error_code: 1,
                ..partition(version, 2)
            },
            partition(version, 3),
        ];
        let t1 = vec![
            partition(version, 0),
            partition(version, 1),
            partition(version, 2),
        ];
        let mut response = FetchResponse {
            throttle_time_ms: 0xFF,
            error_code: 0,
            session_id: 0,
            responses: vec![
                topic(version, "topic-\u{0}\u{7f}", 0x00, t0),
                topic(version, "other", 0xFF, t1),
            ],
            ..Default::default()
        };
        if version >= 16 {
            response.node_endpoints = vec![NodeEndpoint {
                node_id: NodeId(0xFF),
                host: "h\u{0}st".to_string(),
                port: 0xFF00,
                rack: Some("r".to_string()),
            }];
        }
        response.responses[0].partitions[0].records = Some(content(33, 3));
        let regions = vec![
            RegionRecords {
                topic: 0,
                partition: 1,
                regions: vec![region(&real_file, 1000, 100_000)],
                total_len: 100_000,
            },
            // Out of encoding order on purpose: encode_parts must not rely on it.
            RegionRecords {
                topic: 1,
                partition: 2,
                regions: vec![region(&real_file, 50_000, 200_000)],
                total_len: 200_000,
            },
            RegionRecords {
                topic: 0,
                partition: 3,
                regions: vec![region(&real_file, 0, 20_000), region(&mem_file, 5, 60_000)],
                total_len: 80_000,
            },
            RegionRecords {
                topic: 1,
                partition: 0,
                regions: Vec::new(),
                total_len: 0,
            },
            RegionRecords {
                topic: 1,
                partition: 1,
                regions: vec![region(&mem_file, 0, 17)],
                total_len: 17,
            },
        ];

        // The plain encoding, with every region's bytes in memory.
        let mut plain = response.clone();
        for r in &regions {
            let mut records = BytesMut::new();
            for region in &r.regions {
                records.extend_from_slice(&region_bytes(region).await);
            }
            plain.responses[r.topic].partitions[r.partition].records = Some(records.freeze());
        }
        let expected = encode_response(77, FetchRequest::API_KEY, version, &plain).unwrap();

        let fetched = Fetched {
            response,
            regions: regions.clone(),
        };
        let parts = fetch::encode_parts(77, version, fetched).unwrap();
        let region_parts = parts
            .iter()
            .filter(|p| matches!(p, ResponsePart::Region(_)))
            .count();
        assert_eq!(
            region_parts, 5,
            "v{version}: every region stays a file region"
        );
        let mut joined = BytesMut::new();
        for part in &parts {
            match part {
                ResponsePart::Bytes(bytes) => joined.extend_from_slice(bytes),
                ResponsePart::Region(region) => {
                    joined.extend_from_slice(&region_bytes(region).await)
                }
            }
        }
        assert_eq!(
            parts.iter().map(ResponsePart::len).sum::<usize>(),
            expected.len(),
            "v{version}: the parts' lengths add up to the response size"
        );
        assert!(
            joined.as_ref() == expected.as_ref(),
            "v{version}: parts differ from the plain encoding (first difference at {:?})",
            joined.iter().zip(expected.iter()).position(|(a, b)| a != b)
        );
        // And the parts decode to the plain response.
        let header_version = response_header_version(FetchRequest::API_KEY, version).unwrap();
        let header_len = ResponseHeader { correlation_id: 77 }.encoded_len(header_version);
        let body = joined.freeze().slice(header_len..);
        let decoded = FetchResponse::decode_exact(body, version).expect("parts decode");
        for (t, topic) in plain.responses.iter().enumerate() {
            for (p, data) in topic.partitions.iter().enumerate() {
                assert!(
                    decoded.responses[t].partitions[p].records == data.records,
                    "v{version}: records of topic {t} partition {p} decode as given"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_fetch_over_tcp_matches_log_read() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut conn = broker.connect().await;
    let created = test_broker::create(
        &mut conn,
        test_broker::topic("big", 1, &[("segment.bytes", "1048576")]),
    )
    .await;
    assert_eq!(created, 0);
    // About 6 MiB in 64 KiB batches of distinct records, over six or more segments.
    let batches = 96;
    for b in 0..batches {
        let mut builder = BatchBuilder::new(0);
        for r in 0..64u32 {
            let value = format!("{b:04}-{r:02}-").into_bytes();
            let mut value = value.repeat(1000 / value.len());
            value.resize(1000, b'.');
            builder.push(1_700_000_000_000, Some(b"k"), Some(&value), &[]);
        }
        let (code, _) = test_broker::produce(&mut conn, "big", 0, builder.build().freeze()).await;
        assert_eq!(code, 0, "batch {b} appended");
    }
    let partition = broker
        .broker
        .topics
        .get("big")
        .await
        .expect("topic exists")
        .partitions[0]
        .clone();
    let log = partition.log().clone();
    assert!(log.segment_count().await >= 6, "the data spans segments");
    let end = partition.high_watermark();
    assert_eq!(end, batches * 64);

    // What Log::read returns, fetch by fetch, for a 4 MiB limit.
    let max_bytes = 4 << 20;
    let mut expected = Vec::new();
    let mut offset = 0;
    while offset < end {
        let read = log.read(offset, max_bytes, end).await.unwrap();
        assert!(read.next_offset > offset);
        expected.push(read.records);
        offset = read.next_offset;
    }
    assert!(expected.len() >= 6, "one read per segment at least");
    let total: usize = expected.iter().map(Bytes::len).sum();
    assert!(total > 5 << 20, "{total} bytes is several MiB");

    // The handler answers with file regions for these reads (the path under test).
    let request = |offset: i64| FetchRequest {
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: max_bytes as i32,
        topics: vec![FetchTopic {
            topic: "big".to_string(),
            topic_id: partition.topic_id,
            partitions: vec![FetchPartition {
                partition: 0,
                fetch_offset: Offset(offset),
                partition_max_bytes: max_bytes as i32,
                ..Default::default()
            }],
        }],
        ..Default::default()
    };
    let fetched = fetch::handle(&broker.broker, 12, request(0)).await;
    assert_eq!(fetched.regions.len(), 1, "a large read stays a file region");
    assert_eq!(fetched.regions[0].total_len, expected[0].len());

    for version in [4i16, 11, 12, 16, 18] {
        let mut offset = 0;
        for (i, want) in expected.iter().enumerate() {
            let response: FetchResponse = conn.call(version, &request(offset)).await;
            let p = &response.responses[0].partitions[0];
            assert_eq!(p.error_code, 0, "v{version} fetch {i}");
            let got = p.records.clone().unwrap_or_default();
            assert!(
                got == want,
                "v{version} fetch {i} at offset {offset}: {} bytes where Log::read gave {}",
                got.len(),
                want.len()
            );
            let last = samsa::protocol::record_batch::batches(got)
                .last()
                .expect("a fetch returns at least one batch")
                .expect("batches parse");
            offset = last.0.next_offset();
        }
        assert_eq!(offset, end, "v{version}: the fetches covered the log");
    }
    broker.stop().await;
}

/// `ResponseWriter::send_file_region` sends exactly the region, from a real file (`sendfile`)
/// and from a simulated one (the copying fallback), and refuses a region the file no longer
/// holds instead of sending anything in its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_file_region_sends_the_region_and_refuses_a_truncated_file() {
    use tokio::io::AsyncReadExt;

    let dir = tempfile::tempdir().unwrap();
    let real = Disk::real(dir.path()).unwrap();
    let mem = Disk::mem(MemDisk::new(3));
    let data = content(3 << 20, 9);
    let mut files = Vec::new();
    for disk in [&real, &mem] {
        let whole = disk.open("whole.log", OpenMode::Create).await.unwrap();
        whole.write_at(0, &data).await.unwrap();
        let cut = disk.open("cut.log", OpenMode::Create).await.unwrap();
        cut.write_at(0, &data).await.unwrap();
        files.push((whole, cut));
    }
    let listener = samsa::rt::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let reader = samsa::rt::task::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        socket.read_to_end(&mut got).await.unwrap();
        got
    });
    let stream = samsa::rt::net::TcpStream::connect(addr).await.unwrap();
    let (_read, mut writer) = samsa::rt::net::split(stream);
    let mut expected = Vec::new();
    for (whole, cut) in &files {
        writer.write_all(b"head").await.unwrap();
        writer
            .send_file_region(whole, 12_345, (2 << 20) + 7)
            .await
            .unwrap();
        expected.extend_from_slice(b"head");
        expected.extend_from_slice(&data[12_345..12_345 + (2 << 20) + 7]);
        // A file cut below a queued region: the send fails, having sent only what the file
        // still holds. (The cut happens before the send: `sendfile` hands page-cache pages to
        // the socket, so a cut after it returns could still change bytes not yet
        // transmitted; the log never cuts below the high watermark, which bounds regions.)
        cut.set_len(1 << 20).await.unwrap();
        let err = writer
            .send_file_region(cut, (1 << 20) - 10, 100)
            .await
            .expect_err("a region past the end of the file is refused");
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof, "{err}");
        expected.extend_from_slice(&data[(1 << 20) - 10..1 << 20]);
    }
    writer.shutdown().await.unwrap();
    drop(writer);
    let got = reader.await.unwrap();
    assert_eq!(got.len(), expected.len());
    assert!(
        got == expected,
        "the socket carried exactly the regions (first difference at {:?} of {})",
        got.iter().zip(expected.iter()).position(|(a, b)| a != b),
        got.len()
    );
}
