//! Building a record batch from records, and sending it in one call.
//!
//! Invariant: [`build_batch`] never lets [`BatchBuilder`] panic: it refuses an empty record
//! list, a batch whose records could exceed [`BATCH_BYTES_MAX`], and timestamps too far apart
//! for a delta, with a [`ClientError::InvalidBatch`] naming the problem.

use bytes::Bytes;

use super::cluster::{Client, ProduceAck};
use super::error::ClientError;
use crate::protocol::record_batch::{
    BatchBuilder, Compression, BATCH_HEADER_LEN, BATCH_LEN_MAX, VARINT_LEN_MAX, VARLONG_LEN_MAX,
};

/// The largest batch (before compression) the client builds: a quarter of the format's hard
/// ceiling, so that no codec's worst-case expansion can reach the ceiling.
pub const BATCH_BYTES_MAX: usize = BATCH_LEN_MAX / 4;

/// One record to produce.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
    /// CreateTime, in milliseconds since the epoch.
    pub timestamp: i64,
}

/// An upper bound on the bytes `record` takes in a batch: every varint at its longest.
fn record_bytes_bound(record: &ProducerRecord) -> usize {
    let len = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len);
    let headers: usize = record
        .headers
        .iter()
        .map(|(k, v)| 2 * VARINT_LEN_MAX + k.len() + len(v))
        .sum();
    // length, attributes, timestamp delta, offset delta, key and value lengths, header count.
    VARINT_LEN_MAX
        + 1
        + VARLONG_LEN_MAX
        + 3 * VARINT_LEN_MAX
        + VARINT_LEN_MAX
        + len(&record.key)
        + len(&record.value)
        + headers
}

/// A v2 batch of `records` (offsets from 0; the broker assigns the real ones), compressed
/// with `compression`.
pub fn build_batch(
    records: &[ProducerRecord],
    compression: Compression,
) -> Result<Bytes, ClientError> {
    let Some(first) = records.first() else {
        return Err(ClientError::InvalidBatch {
            reason: "a batch needs at least one record".into(),
        });
    };
    let mut bound = BATCH_HEADER_LEN;
    for (index, record) in records.iter().enumerate() {
        bound = bound.saturating_add(record_bytes_bound(record));
        if record.timestamp.checked_sub(first.timestamp).is_none() {
            return Err(ClientError::InvalidBatch {
                reason: format!(
                    "record {index}'s timestamp {} is too far from the first record's {}",
                    record.timestamp, first.timestamp
                ),
            });
        }
    }
    if bound > BATCH_BYTES_MAX {
        return Err(ClientError::InvalidBatch {
            reason: format!(
                "{} records may take {bound} bytes, above BATCH_BYTES_MAX {BATCH_BYTES_MAX}",
                records.len()
            ),
        });
    }
    let mut builder = BatchBuilder::new(0).compression(compression);
    for record in records {
        let headers: Vec<(&str, Option<&[u8]>)> = record
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        builder.push(
            record.timestamp,
            record.key.as_deref(),
            record.value.as_deref(),
            &headers,
        );
    }
    Ok(builder.build().freeze())
}

/// Builds a batch of `records` and produces it to `topic`-`partition`.
pub async fn send_batch(
    client: &mut Client,
    topic: &str,
    partition: i32,
    records: &[ProducerRecord],
    compression: Compression,
    acks: i16,
    timeout_ms: i32,
) -> Result<ProduceAck, ClientError> {
    let batch = build_batch(records, compression)?;
    client
        .produce(topic, partition, batch, acks, timeout_ms)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::records::ConsumedRecords;
    use crate::protocol::record_batch::{validate, DECOMPRESSED_BATCH_BYTES_MAX};

    fn record(value: &str, timestamp: i64) -> ProducerRecord {
        ProducerRecord {
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            headers: vec![("h".into(), Some(Bytes::from_static(b"v")))],
            timestamp,
        }
    }

    #[test]
    fn client_producer_batches_roundtrip_through_the_consumer_path() {
        for codec in [Compression::None, Compression::Gzip, Compression::Zstd] {
            let records = vec![record("a", 5), record("b", 3)];
            let batch = build_batch(&records, codec).unwrap_or_default();
            let header = validate(&batch).map_err(|e| e.to_string());
            assert_eq!(header.map(|h| h.records_count), Ok(2), "{codec}");
            let back: Vec<_> = ConsumedRecords::new("t", 0, batch, 0, DECOMPRESSED_BATCH_BYTES_MAX)
                .filter_map(Result::ok)
                .collect();
            assert_eq!(back.len(), 2);
            assert_eq!(back[1].value.as_deref(), Some(&b"b"[..]));
            assert_eq!(back[1].timestamp, 3);
            assert_eq!(
                back[0].headers,
                vec![("h".to_owned(), Some(Bytes::from_static(b"v")))]
            );
        }
    }

    #[test]
    fn client_producer_refuses_what_the_builder_would_panic_on() {
        let err = build_batch(&[], Compression::None).unwrap_err();
        assert!(err.to_string().contains("at least one record"));
        let far = [record("a", i64::MIN), record("b", i64::MAX)];
        let err = build_batch(&far, Compression::None).unwrap_err();
        assert!(err.to_string().contains("record 1"), "{err}");
        let huge = ProducerRecord {
            value: Some(Bytes::from(vec![0u8; BATCH_BYTES_MAX])),
            ..ProducerRecord::default()
        };
        let err = build_batch(&[huge], Compression::None).unwrap_err();
        assert!(err.to_string().contains("BATCH_BYTES_MAX"), "{err}");
    }
}
