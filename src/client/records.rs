//! Reading fetched record bytes: owned [`ConsumedRecord`]s from the batches a Fetch returned.
//!
//! Invariants:
//! - Records below the offset the caller fetched from are skipped (a fetch returns whole
//!   batches, so the first batch may start before it), and so are control batches
//!   (transaction markers), which hold no user records.
//! - A batch cut short at the end of the bytes is the broker's `max_bytes` limit at work, not
//!   corruption: iteration ends there without an error.
//! - Every whole batch's CRC-32C is checked (Kafka's `check.crcs`), and decompression is
//!   bounded by `decompressed_batch_bytes_max`.

use bytes::Bytes;

use super::error::ClientError;
use crate::protocol::record_batch::{self, BatchError, BatchIter, RecordIter};

/// One record as a consumer sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumedRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// The offset after the last whole batch in fetched `bytes`, or `position` if there is none
/// past it: where a consumer at `position` goes on after consuming them (a partial batch at
/// the end, the broker's size limit at work, is fetched again).
pub fn next_position(bytes: &Bytes, position: i64) -> i64 {
    let mut next = position;
    for batch in record_batch::batches(bytes.clone()) {
        match batch {
            Ok((header, _)) => next = next.max(header.last_offset().saturating_add(1)),
            Err(_) => break,
        }
    }
    next
}

/// Iterates the records of fetched bytes; see the module docs. Yields at most one `Err`,
/// after which it stops.
#[derive(Debug)]
pub struct ConsumedRecords {
    topic: String,
    partition: i32,
    from_offset: i64,
    decompressed_batch_bytes_max: usize,
    batches: BatchIter,
    current: Option<RecordIter>,
    current_base_offset: i64,
    done: bool,
}

impl ConsumedRecords {
    /// Records of `records` (the bytes of one partition of a Fetch response) at or above
    /// `from_offset`.
    pub fn new(
        topic: &str,
        partition: i32,
        records: Bytes,
        from_offset: i64,
        decompressed_batch_bytes_max: usize,
    ) -> ConsumedRecords {
        ConsumedRecords {
            topic: topic.to_owned(),
            partition,
            from_offset,
            decompressed_batch_bytes_max,
            batches: record_batch::batches(records),
            current: None,
            current_base_offset: from_offset,
            done: false,
        }
    }

    fn fail(
        &mut self,
        offset: i64,
        source: BatchError,
    ) -> Option<Result<ConsumedRecord, ClientError>> {
        self.done = true;
        Some(Err(ClientError::Batch {
            topic: self.topic.clone(),
            partition: self.partition,
            offset,
            source,
        }))
    }
}

impl Iterator for ConsumedRecords {
    type Item = Result<ConsumedRecord, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            if let Some(records) = self.current.as_mut() {
                match records.next() {
                    Some(Ok(record)) if record.offset < self.from_offset => continue,
                    Some(Ok(record)) => {
                        return Some(Ok(ConsumedRecord {
                            offset: record.offset,
                            timestamp: record.timestamp,
                            key: record.key,
                            value: record.value,
                            headers: record
                                .headers
                                .into_iter()
                                .map(|h| (h.key, h.value))
                                .collect(),
                        }))
                    }
                    Some(Err(err)) => {
                        let offset = self.current_base_offset;
                        return self.fail(offset, err);
                    }
                    None => self.current = None,
                }
            }
            match self.batches.next() {
                None | Some(Err(BatchError::Truncated { .. })) => self.done = true,
                Some(Err(err)) => {
                    let offset = self.current_base_offset;
                    return self.fail(offset, err);
                }
                Some(Ok((header, batch))) => {
                    self.current_base_offset = header.base_offset;
                    if header.is_control() || header.last_offset() < self.from_offset {
                        continue;
                    }
                    if let Err(err) = record_batch::verify(&batch) {
                        return self.fail(header.base_offset, err);
                    }
                    match record_batch::records_with_limit(
                        &batch,
                        self.decompressed_batch_bytes_max,
                    ) {
                        Ok(records) => self.current = Some(records),
                        Err(err) => return self.fail(header.base_offset, err),
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::record_batch::{BatchBuilder, Compression, DECOMPRESSED_BATCH_BYTES_MAX};
    use bytes::BytesMut;

    fn batch(base: i64, values: &[&str], codec: Compression) -> BytesMut {
        let mut b = BatchBuilder::new(base).compression(codec);
        for (i, v) in values.iter().enumerate() {
            let ts = 1000 + i64::try_from(i).unwrap_or(0);
            b.push(ts, Some(b"k"), Some(v.as_bytes()), &[("h", None)]);
        }
        b.build()
    }

    fn collect(bytes: Bytes, from: i64) -> Vec<Result<ConsumedRecord, ClientError>> {
        ConsumedRecords::new("t", 0, bytes, from, DECOMPRESSED_BATCH_BYTES_MAX).collect()
    }

    #[test]
    fn client_records_skip_below_the_fetch_offset_and_stop_at_a_partial_batch() {
        let mut all = batch(10, &["a", "b", "c"], Compression::None);
        all.extend_from_slice(&batch(13, &["d", "e"], Compression::Lz4));
        let partial = batch(15, &["f"], Compression::None);
        all.extend_from_slice(&partial[..partial.len() - 3]);
        let got = collect(all.freeze(), 11);
        let offsets: Vec<i64> = got
            .iter()
            .map(|r| r.as_ref().map(|r| r.offset).unwrap_or(-1))
            .collect();
        assert_eq!(offsets, vec![11, 12, 13, 14]);
        let last = got.last().and_then(|r| r.as_ref().ok()).cloned();
        let last = last.unwrap_or_else(|| panic!("no records"));
        assert_eq!(last.value.as_deref(), Some(&b"e"[..]));
        assert_eq!(last.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(last.headers, vec![("h".to_owned(), None)]);
        assert_eq!(last.timestamp, 1001);
    }

    #[test]
    fn client_records_refuse_a_corrupt_batch_naming_its_offset() {
        let mut b = batch(40, &["x"], Compression::None);
        let n = b.len();
        b[n - 1] ^= 0xff;
        let got = collect(b.freeze(), 0);
        assert_eq!(got.len(), 1);
        let err = got.into_iter().next().and_then(Result::err);
        let shown = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(shown.contains("t-0 at offset 40"), "{shown}");
        assert!(shown.contains("CRC"), "{shown}");
    }
}
