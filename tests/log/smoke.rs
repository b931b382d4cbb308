//! Smoke test of the partition log on real files: append, read back, reopen cleanly and after
//! a simulated unclean stop, roll segments, truncate.
#![cfg(not(feature = "sim"))]

use samsa::log::{FlushPolicy, Log, LogConfig};
use samsa::protocol::record_batch::{self, BatchBuilder};
use samsa::rt::clock::Clock;
use samsa::rt::disk::Disk;

fn batch(n: usize, tag: u8) -> bytes::Bytes {
    let mut b = BatchBuilder::new(0);
    for i in 0..n {
        b.push(1_000 + i as i64, Some(&[tag]), Some(&[tag; 100]), &[]);
    }
    b.build().freeze()
}

fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 512,
        verify_crc_on_read: true,
        ..LogConfig::default()
    }
}

#[tokio::test]
async fn append_read_roll_reopen_truncate() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::real(dir.path()).unwrap();
    let (log, report) = Log::open(disk.clone(), "t-0", small(), Clock::new())
        .await
        .unwrap();
    assert_eq!(report.log_end_offset, 0);
    for i in 0..50u8 {
        let info = log.append(batch(3, i)).await.unwrap();
        assert_eq!(info.base_offset, i64::from(i) * 3);
        assert_eq!(log.durable_end_offset(), info.last_offset + 1);
    }
    assert!(
        log.segment_count().await > 3,
        "segments should roll at 4 KiB"
    );
    // Read everything back one batch at a time.
    let mut offset = 0;
    let mut tags = Vec::new();
    while offset < log.log_end_offset() {
        let r = log.read(offset, 1, i64::MAX).await.unwrap();
        for item in record_batch::batches(r.records.clone()) {
            let (h, b) = item.unwrap();
            assert_eq!(h.base_offset, offset);
            let recs: Vec<_> = record_batch::records(&b)
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            tags.push(recs[0].key.clone().unwrap()[0]);
        }
        offset = r.next_offset;
    }
    assert_eq!(tags, (0..50u8).collect::<Vec<_>>());
    // Reads bounded by a high watermark never return a batch that ends above it.
    let r = log.read(0, usize::MAX, 10).await.unwrap();
    assert_eq!(r.next_offset, 9);
    log.close().await.unwrap();
    drop(log);

    let (log, report) = Log::open(disk.clone(), "t-0", small(), Clock::new())
        .await
        .unwrap();
    assert!(report.clean_shutdown);
    assert_eq!(report.segments_scanned, 0);
    assert_eq!(report.log_end_offset, 150);
    // Truncate into the middle of a batch: the whole batch goes.
    assert_eq!(log.truncate_to(100).await.unwrap(), 99);
    assert_eq!(log.log_end_offset(), 99);
    let info = log.append(batch(2, 99)).await.unwrap();
    assert_eq!(info.base_offset, 99);
    drop(log); // unclean: no marker

    let (log, report) = Log::open(disk, "t-0", small(), Clock::new()).await.unwrap();
    assert!(!report.clean_shutdown);
    assert!(report.truncated.is_none(), "{report:?}");
    assert_eq!(report.log_end_offset, 101);
    assert_eq!(log.offset_for_timestamp(1_002).await.unwrap(), Some(0));
}

#[tokio::test]
async fn page_cache_mode_acknowledges_before_sync() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::real(dir.path()).unwrap();
    let config = LogConfig {
        flush: FlushPolicy::PageCache {
            flush_messages: 10,
            flush_ms: 1_000_000,
        },
        ..small()
    };
    let (log, _) = Log::open(disk, "p-0", config, Clock::new()).await.unwrap();
    log.append(batch(3, 1)).await.unwrap();
    assert_eq!(log.log_end_offset(), 3);
    assert_eq!(
        log.durable_end_offset(),
        0,
        "page-cache mode must not sync per append"
    );
    log.append(batch(8, 2)).await.unwrap();
    assert_eq!(
        log.durable_end_offset(),
        11,
        "flush.messages reached: synced"
    );
}

/// A vectored write on a real file stores the parts concatenated, at the position given,
/// across more parts than one `pwritev` takes and with empty parts among them.
#[tokio::test]
async fn vectored_write_stores_the_parts_concatenated() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::real(dir.path()).unwrap();
    let file = disk
        .open("v", samsa::rt::disk::OpenMode::Truncate)
        .await
        .unwrap();
    file.write_at(0, &[9u8; 5]).await.unwrap();
    let owned: Vec<Vec<u8>> = (0..300usize)
        .map(|i| vec![(i % 251) as u8; (i * 7) % 23])
        .collect();
    let parts: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
    file.write_vectored_at(5, &parts).await.unwrap();
    let mut expected = vec![9u8; 5];
    expected.extend(parts.concat());
    assert_eq!(disk.read_file("v").await.unwrap().to_vec(), expected);
}

/// Several batches in one append each get their base offset on the way to the file, and the
/// rest of their bytes is stored as given.
#[tokio::test]
async fn multi_batch_append_assigns_each_base_offset() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::real(dir.path()).unwrap();
    let (log, _) = Log::open(disk.clone(), "t-0", LogConfig::default(), Clock::new())
        .await
        .unwrap();
    let mut records = Vec::new();
    for tag in 0..40u8 {
        records.extend_from_slice(&batch(3, tag));
    }
    let records = bytes::Bytes::from(records);
    let info = log.append(records.clone()).await.unwrap();
    assert_eq!((info.base_offset, info.last_offset), (0, 119));
    let stored = disk
        .read_file("t-0/00000000000000000000.log")
        .await
        .unwrap();
    assert_eq!(stored.len(), records.len());
    let mut position = 0;
    for (i, item) in record_batch::batches(stored.clone()).enumerate() {
        let (header, _) = item.unwrap();
        assert_eq!(header.base_offset, i as i64 * 3);
        let end = position + header.total_len();
        // Only the base offset (bytes 0..8) differs from what was appended.
        assert_eq!(stored[position + 8..end], records[position + 8..end]);
        position = end;
    }
    assert_eq!(position, stored.len());
}
