//! Fetch (key 1): whole record batches from each requested partition, bounded by the high
//! watermark, per-partition and total byte limits (at least one batch, KIP-74), waiting up to
//! `max_wait_ms` until `min_bytes` are available (Kafka's fetch purgatory).
//!
//! Waiting fetches sleep on the broker's `data_arrived` notification, which every high
//! watermark advance fires; each wake-up re-reads the partitions.
//!
//! Fetch sessions (KIP-227, `broker::fetch_session`): the session is looked up and updated
//! before any partition is read; an incremental fetch reads every partition of its session
//! and answers only those with something new; a full fetch at epoch 0 makes a session from
//! its answer.
//!
//! A topic whose `compression.type` is `zstd` answers fetches below v10, which predate zstd
//! (KIP-110), with UNSUPPORTED_COMPRESSION_TYPE for its partitions, as Kafka does: such a
//! topic may hold zstd batches whatever its producers sent.
//!
//! Zero copy (design §4). A partition's records of at least [`ZERO_COPY_BYTES_MIN`] bytes are
//! not read: they stay regions of the segment file, and [`encode_parts`] encodes the response
//! around them as a list of [`ResponsePart`]s, which the connection writes with the records
//! going from file to socket by `sendfile` (`rt::net`). Invariant: the parts, concatenated
//! with the regions' bytes, are byte for byte the plain encoding of the same response.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::broker::cluster_view;
use crate::broker::config::BrokerCompressionType;
use crate::broker::fetch_session::{topic_key, Answered, FetchContext, INVALID_SESSION_ID};
use crate::broker::handlers::{encode_response, partition_error_code, ResponsePart};
use crate::broker::partition::{PartitionError, ReadBound, SendRecords};
use crate::broker::Broker;
use crate::log::{FileRegion, LogError};
use crate::protocol::error::ErrorCode;
use crate::protocol::fetch::{
    EpochEndOffset, FetchRequest, FetchResponse, FetchableTopicResponse, LeaderIdAndEpoch,
    NodeEndpoint, PartitionData,
};
use crate::protocol::types::{LeaderEpoch, NodeId, Offset};
use crate::protocol::wire::{put, EncodeError, EncodeErrorKind, BYTES_LEN_MAX};
use crate::rt::time;

/// The longest a fetch waits for data, whatever the client asks: a bound on how long a
/// connection's later responses can queue behind a fetch.
pub const FETCH_WAIT_MS_MAX: u64 = 60_000;

/// The first Fetch version whose partitions carry a leader hint (KIP-951's `current_leader`).
pub const LEADER_HINT_VERSION_MIN: i16 = 12;
/// The first Fetch version whose answer carries the endpoints of the leaders it names
/// (KIP-951); a hint in an older answer would not encode, and the connection would close.
pub const NODE_ENDPOINTS_VERSION_MIN: i16 = 16;

/// The first Fetch version that may carry zstd-compressed batches (KIP-110).
pub const ZSTD_FETCH_VERSION_MIN: i16 = 10;

/// A partition's records smaller than this are copied into the response instead of sent from
/// the file. Measured with `cargo bench --bench send_file` (loopback, page cache, 2 vCPUs):
/// a copied response is ~20-45% faster at 1-16 KiB, the two are level at 32 KiB, and
/// `sendfile` wins from 64 KiB on (3-4x at 256 KiB and above, where a copy also pays for a
/// fresh large allocation per response).
pub const ZERO_COPY_BYTES_MIN: usize = 32 * 1024;

/// Records of one partition left in segment files, and where they go in the response.
#[derive(Clone, Debug)]
pub struct RegionRecords {
    /// Index of the topic in `FetchResponse::responses`.
    pub topic: usize,
    /// Index of the partition in that topic's `partitions`.
    pub partition: usize,
    /// The records, in log order.
    pub regions: Vec<FileRegion>,
    /// The sum of the regions' lengths.
    pub total_len: usize,
}

/// A fetch's answer: the response, whose partitions in `regions` have empty records standing
/// for the file regions that [`encode_parts`] puts in their place.
#[derive(Clone, Debug, Default)]
pub struct Fetched {
    pub response: FetchResponse,
    pub regions: Vec<RegionRecords>,
}

pub async fn handle(broker: &Arc<Broker>, version: i16, request: FetchRequest) -> Fetched {
    let context = begin(broker, version, &request);
    handle_in(broker, version, request, context).await
}

/// The session part of a fetch: looks the session up and updates it. The dispatcher calls
/// this before the next request of the connection starts, so the session changes of
/// pipelined fetches happen in request order.
pub fn begin(broker: &Arc<Broker>, version: i16, request: &FetchRequest) -> FetchContext {
    let sessions = &broker.fetch_sessions;
    sessions.context(request, version, sessions.now_ms())
}

/// Reads and answers a fetch whose session part [`begin`] already did.
pub async fn handle_in(
    broker: &Arc<Broker>,
    version: i16,
    request: FetchRequest,
    context: FetchContext,
) -> Fetched {
    let sessions = &broker.fetch_sessions;
    match context {
        FetchContext::Error(code) => Fetched {
            response: FetchResponse {
                error_code: code.code(),
                session_id: INVALID_SESSION_ID,
                ..Default::default()
            },
            regions: Vec::new(),
        },
        FetchContext::Sessionless => wait_and_read(broker, version, &request).await,
        FetchContext::Full { privileged } => {
            let mut fetched = wait_and_read(broker, version, &request).await;
            let answered = answered(version, &fetched);
            fetched.response.session_id =
                sessions.create(&request, version, privileged, &answered, sessions.now_ms());
            fetched
        }
        FetchContext::Incremental { id, topics } => {
            let whole = FetchRequest {
                topics,
                forgotten_topics_data: Vec::new(),
                ..request
            };
            let fetched = wait_and_read(broker, version, &whole).await;
            let keep = sessions.must_respond(id, &answered(version, &fetched));
            let mut fetched = retain_partitions(fetched, &keep);
            fetched.response.session_id = id;
            fetched
        }
    }
}

/// What an answer says of each partition, in encoding order, for the session cache.
fn answered(version: i16, fetched: &Fetched) -> Vec<Answered> {
    let in_files: BTreeSet<(usize, usize)> = fetched
        .regions
        .iter()
        .map(|r| (r.topic, r.partition))
        .collect();
    let mut out = Vec::new();
    for (t, topic) in fetched.response.responses.iter().enumerate() {
        let key = topic_key(version >= 13, &topic.topic, topic.topic_id);
        for (p, data) in topic.partitions.iter().enumerate() {
            out.push(Answered {
                key: key.clone(),
                partition: data.partition_index,
                error_code: data.error_code,
                has_records: in_files.contains(&(t, p))
                    || data.records.as_ref().is_some_and(|r| !r.is_empty()),
                high_watermark: data.high_watermark.0,
                last_stable_offset: data.last_stable_offset.0,
                log_start_offset: data.log_start_offset.0,
            });
        }
    }
    out
}

/// Keeps the partitions whose flag (one per partition, in encoding order) is set, dropping
/// topics left empty, and renumbers the file regions to the partitions' new places.
fn retain_partitions(fetched: Fetched, keep: &[bool]) -> Fetched {
    let Fetched {
        mut response,
        regions,
    } = fetched;
    let mut flags = keep.iter().copied();
    let mut moved: BTreeMap<(usize, usize), (usize, usize)> = BTreeMap::new();
    let mut responses = Vec::with_capacity(response.responses.len());
    for (t, mut topic) in std::mem::take(&mut response.responses)
        .into_iter()
        .enumerate()
    {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for (p, data) in std::mem::take(&mut topic.partitions)
            .into_iter()
            .enumerate()
        {
            if flags.next().unwrap_or(true) {
                moved.insert((t, p), (responses.len(), partitions.len()));
                partitions.push(data);
            }
        }
        if !partitions.is_empty() {
            topic.partitions = partitions;
            responses.push(topic);
        }
    }
    response.responses = responses;
    // A partition with records always stays (it has records), so every region moves.
    let regions = regions
        .into_iter()
        .filter_map(|mut r| {
            let (topic, partition) = *moved.get(&(r.topic, r.partition))?;
            r.topic = topic;
            r.partition = partition;
            Some(r)
        })
        .collect();
    Fetched { response, regions }
}

/// Reads the partitions of `request`, waiting up to its `max_wait_ms` for `min_bytes`.
async fn wait_and_read(broker: &Arc<Broker>, version: i16, request: &FetchRequest) -> Fetched {
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let max_wait = Duration::from_millis(
        u64::try_from(request.max_wait_ms)
            .unwrap_or(0)
            .min(FETCH_WAIT_MS_MAX),
    );
    let deadline = time::now() + max_wait;
    let replica = replica_of(version, request);
    loop {
        // Register for the wake-up before reading, so an append between the read and the
        // wait is not missed.
        let notified = broker.data_arrived.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (response, bytes, errors) = read_all(broker, version, request, replica).await;
        let now = time::now();
        if bytes >= min_bytes || errors || now >= deadline {
            return response;
        }
        let _ = time::timeout(deadline - now, notified).await;
    }
}

/// The fetching follower's id and broker epoch (KIP-903's ReplicaState from v15, the old
/// `replica_id` before), or `None` for a consumer.
fn replica_of(version: i16, request: &FetchRequest) -> Option<(i32, i64)> {
    let (id, epoch) = if version >= 15 {
        (
            request.replica_state.replica_id.0,
            request.replica_state.replica_epoch,
        )
    } else {
        (request.replica_id.0, -1)
    };
    (id >= 0).then_some((id, epoch))
}

/// One pass over the requested partitions: the answer, the record bytes in it and whether
/// any partition had an error or a divergence (which answers the fetch at once, as Kafka
/// does).
///
/// A follower's fetch (`replica`) reads up to the log end, not the high watermark, and first
/// tells the partition's replication core where the follower is (which may advance the high
/// watermark); a follower whose log diverges gets the leader's DivergingEpoch and no records.
async fn read_all(
    broker: &Arc<Broker>,
    version: i16,
    request: &FetchRequest,
    replica: Option<(i32, i64)>,
) -> (Fetched, usize, bool) {
    let mut regions = Vec::new();
    let mut budget = usize::try_from(request.max_bytes).unwrap_or(0);
    let mut total = 0usize;
    let mut errors = false;
    let mut responses = Vec::with_capacity(request.topics.len());
    // KIP-951: the leaders named in NOT_LEADER_OR_FOLLOWER answers, with their endpoints.
    let mut node_endpoints: BTreeMap<i32, NodeEndpoint> = BTreeMap::new();
    for topic in &request.topics {
        let resolved = broker
            .topics
            .find(version >= 13, &topic.topic, topic.topic_id)
            .await;
        let unknown = if version >= 13 {
            ErrorCode::UNKNOWN_TOPIC_ID
        } else {
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        };
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for wanted in &topic.partitions {
            let partition = resolved
                .as_ref()
                .and_then(|t| t.partition(wanted.partition));
            let refused = match &partition {
                None => Some(unknown),
                Some(p)
                    if version < ZSTD_FETCH_VERSION_MIN
                        && p.config().compression_type == BrokerCompressionType::Zstd =>
                {
                    Some(ErrorCode::UNSUPPORTED_COMPRESSION_TYPE)
                }
                Some(_) => None,
            };
            let (Some(partition), None) = (partition, refused) else {
                errors = true;
                partitions.push(PartitionData {
                    partition_index: wanted.partition,
                    error_code: refused.unwrap_or(unknown).code(),
                    high_watermark: Offset::NONE,
                    records: Some(Bytes::new()),
                    ..Default::default()
                });
                continue;
            };
            let mut diverging = None;
            let mut bound = ReadBound::HighWatermarkOf(partition.high_watermark());
            let mut refused = Ok(());
            if let Some((replica_id, broker_epoch)) = replica {
                bound = ReadBound::LogEnd;
                match partition
                    .follower_fetch(
                        broker.monotonic_ms(),
                        (replica_id, broker_epoch),
                        wanted.current_leader_epoch.0,
                        wanted.fetch_offset.0,
                        wanted.last_fetched_epoch.0,
                    )
                    .await
                {
                    Ok(found) => diverging = found,
                    Err(e) => refused = Err(e),
                }
            }
            // Read after the follower's fetch was counted: the high watermark it may have
            // moved goes back in this answer.
            let high_watermark = partition.high_watermark();
            let limit = usize::try_from(wanted.partition_max_bytes)
                .unwrap_or(0)
                .min(budget);
            // KIP-74: the first partition with data returns at least one batch even over
            // the limits; after that, an exhausted budget returns nothing.
            let result = if let Err(e) = refused {
                Err(e)
            } else if diverging.is_some() || (limit == 0 && total > 0) {
                Ok(None)
            } else {
                partition
                    .read_for_send(
                        wanted.fetch_offset.0,
                        limit,
                        bound,
                        broker.config.fetch_zero_copy_bytes_min,
                    )
                    .await
                    .map(Some)
            };
            let mut data = PartitionData {
                partition_index: wanted.partition,
                error_code: 0,
                high_watermark: Offset(high_watermark),
                last_stable_offset: Offset(high_watermark),
                log_start_offset: Offset(partition.log_start_offset().await),
                records: Some(Bytes::new()),
                ..Default::default()
            };
            if let Some(diverging) = diverging {
                errors = true;
                data.diverging_epoch = EpochEndOffset {
                    epoch: LeaderEpoch(diverging.epoch),
                    end_offset: Offset(diverging.end_offset),
                };
            }
            match result {
                Ok(read) => {
                    let read = read.unwrap_or(SendRecords::Bytes(Bytes::new()));
                    total += read.len();
                    budget = budget.saturating_sub(read.len());
                    let records = match read {
                        SendRecords::Bytes(bytes) => bytes,
                        SendRecords::Regions {
                            regions: in_files,
                            total_len,
                        } => {
                            regions.push(RegionRecords {
                                topic: responses.len(),
                                partition: partitions.len(),
                                regions: in_files,
                                total_len,
                            });
                            Bytes::new()
                        }
                    };
                    data.records = Some(records);
                }
                Err(e) => {
                    errors = true;
                    if !matches!(
                        e,
                        PartitionError::Log {
                            source: LogError::OffsetOutOfRange { .. },
                            ..
                        }
                    ) {
                        tracing::warn!(error = %e, "fetch failed");
                    }
                    let code = partition_error_code(&e);
                    data.error_code = code.code();
                    if code == ErrorCode::NOT_LEADER_OR_FOLLOWER
                        && version >= LEADER_HINT_VERSION_MIN
                    {
                        if let Some((leader, epoch, at)) =
                            cluster_view::leader_hint(broker, &partition.topic, partition.index)
                        {
                            data.current_leader = LeaderIdAndEpoch {
                                leader_id: NodeId(leader),
                                leader_epoch: LeaderEpoch(epoch),
                            };
                            node_endpoints.insert(
                                leader,
                                NodeEndpoint {
                                    node_id: NodeId(leader),
                                    host: at.host,
                                    port: i32::from(at.port),
                                    rack: at.rack,
                                },
                            );
                        }
                    }
                }
            }
            partitions.push(data);
        }
        responses.push(FetchableTopicResponse {
            topic: topic.topic.clone(),
            topic_id: topic.topic_id,
            partitions,
        });
    }
    // KIP-951's endpoints exist from v16 on; the leader hint itself from v12.
    if version < NODE_ENDPOINTS_VERSION_MIN {
        node_endpoints.clear();
    }
    let response = FetchResponse {
        error_code: 0,
        session_id: 0,
        responses,
        node_endpoints: node_endpoints.into_values().collect(),
        ..Default::default()
    };
    (Fetched { response, regions }, total, errors)
}

/// Encodes a fetch's answer with its response header as parts: the encoded bytes around each
/// partition's records, and the file regions holding those records (see the module docs).
///
/// How the records' places are found: the response is encoded twice, with every region's
/// records replaced by one byte, 0x00 in the first encoding and 0xFF in the second. Nothing
/// else differs, so the two encodings have the same length and differ in exactly one byte per
/// region, in encoding order. Each such byte is cut out together with the length prefix the
/// one-byte value had, and the prefix for the region's real length is written instead (the
/// classic int32, or the compact unsigned varint of length + 1 in flexible versions). This
/// costs two encodings of a response without its records (small), and cannot be fooled by any
/// value in the response, unlike a searched-for marker.
pub fn encode_parts(
    correlation_id: i32,
    version: i16,
    fetched: Fetched,
) -> Result<Vec<ResponsePart>, EncodeError> {
    let Fetched {
        mut response,
        mut regions,
    } = fetched;
    let api_key = FetchRequest::API_KEY;
    if regions.is_empty() {
        let bytes = encode_response(correlation_id, api_key, version, &response)?;
        return Ok(vec![ResponsePart::Bytes(bytes)]);
    }
    // Encoding order: topics in order, each topic's partitions in order.
    regions.sort_by_key(|r| (r.topic, r.partition));
    let mut encode_with_marker = |marker: &'static [u8]| {
        for r in &regions {
            let data = response
                .responses
                .get_mut(r.topic)
                .and_then(|t| t.partitions.get_mut(r.partition));
            let data = data.expect("a region names a partition of the response it came with");
            data.records = Some(Bytes::from_static(marker));
        }
        encode_response(correlation_id, api_key, version, &response)
    };
    let low = encode_with_marker(&[0x00])?;
    let high = encode_with_marker(&[0xFF])?;
    assert_eq!(
        low.len(),
        high.len(),
        "encodings differing in one byte value have one length"
    );
    let marks: Vec<usize> = low
        .iter()
        .zip(high.iter())
        .enumerate()
        .filter_map(|(i, (a, b))| (a != b).then_some(i))
        .collect();
    assert_eq!(
        marks.len(),
        regions.len(),
        "the two encodings differ in exactly one byte per region"
    );
    let compact = version >= FetchResponse::FLEXIBLE_VERSIONS_FROM;
    let marker_prefix_len = put::bytes_len_len(Some(1), compact);
    let mut parts = Vec::with_capacity(2 * regions.len() + 1);
    let mut from = 0;
    for (mark, r) in marks.into_iter().zip(regions) {
        if r.total_len > BYTES_LEN_MAX {
            return Err(EncodeError::new(EncodeErrorKind::TooLong {
                len: r.total_len,
            }));
        }
        let prefix_at = mark
            .checked_sub(marker_prefix_len)
            .filter(|at| *at >= from)
            .expect("a marker byte follows its own length prefix");
        let mut head = BytesMut::with_capacity(prefix_at - from + 5);
        head.extend_from_slice(&low[from..prefix_at]);
        put::bytes_len(&mut head, Some(r.total_len), compact);
        parts.push(ResponsePart::Bytes(head.freeze()));
        parts.extend(r.regions.into_iter().map(ResponsePart::Region));
        from = mark + 1;
    }
    parts.push(ResponsePart::Bytes(low.slice(from..)));
    Ok(parts)
}
