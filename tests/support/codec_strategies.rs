//! Proptest strategies for every message the codec covers, shared by the codec tests through
//! `#[path]` (a subdirectory of tests/, so cargo does not build it as a test of its own).
//!
//! Each strategy takes a version and sets only the fields present in that version (others keep
//! their defaults), using null only where the version allows it, so every value it makes is
//! valid in that version. Collections stay small to keep cases fast.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use samsa::protocol::api_versions::*;
use samsa::protocol::header::*;
use samsa::protocol::message::Message;
use samsa::protocol::metadata::*;
use samsa::protocol::types::{LeaderEpoch, NodeId};
use samsa::protocol::wire::{DecodeError, EncodeError, Uuid};

/// A message type the codec tests drive generically: Samsa's [`Message`] plus a strategy.
pub trait Msg: Message + 'static {
    fn strategy(version: i16) -> BoxedStrategy<Self>;
    fn enc(&self, out: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        Message::encode(self, out, version)
    }
    fn len(&self, version: i16) -> usize {
        Message::encoded_len(self, version)
    }
    fn dec_exact(buf: Bytes, version: i16) -> Result<Self, DecodeError> {
        Message::decode_exact(buf, version)
    }
}

macro_rules! msg {
    ($t:ident, $strategy:ident) => {
        impl Msg for $t {
            fn strategy(version: i16) -> BoxedStrategy<Self> {
                $strategy(version)
            }
        }
    };
}

msg!(RequestHeader, request_header);
msg!(ResponseHeader, response_header);
msg!(ApiVersionsRequest, api_versions_request);
msg!(ApiVersionsResponse, api_versions_response);
msg!(MetadataRequest, metadata_request);
msg!(MetadataResponse, metadata_response);

/// A value that exists only when `present`; otherwise the field's default.
pub fn when<T: Clone + std::fmt::Debug + 'static>(
    present: bool,
    s: impl Strategy<Value = T> + 'static,
    default: T,
) -> BoxedStrategy<T> {
    if present {
        s.boxed()
    } else {
        Just(default).boxed()
    }
}

/// Strings with multi-byte characters too, so lengths are counted in bytes.
pub fn string() -> BoxedStrategy<String> {
    prop_oneof![3 => "[a-z0-9._-]{0,10}", 1 => "\\PC{0,4}"].boxed()
}

/// A string that may be null only where `null_allowed`.
pub fn nullable_string(null_allowed: bool) -> BoxedStrategy<Option<String>> {
    if null_allowed {
        option::of(string()).boxed()
    } else {
        string().prop_map(Some).boxed()
    }
}

/// Any UUID.
pub fn uuid() -> BoxedStrategy<Uuid> {
    any::<[u8; 16]>().prop_map(Uuid).boxed()
}

pub fn request_header(v: i16) -> BoxedStrategy<RequestHeader> {
    (
        any::<i16>(),
        any::<i16>(),
        any::<i32>(),
        when(v >= 1, option::of(string()), Some(String::new())),
    )
        .prop_map(|(k, av, c, id)| RequestHeader {
            request_api_key: k,
            request_api_version: av,
            correlation_id: c,
            client_id: id,
        })
        .boxed()
}

pub fn response_header(_v: i16) -> BoxedStrategy<ResponseHeader> {
    any::<i32>()
        .prop_map(|c| ResponseHeader { correlation_id: c })
        .boxed()
}

pub fn api_versions_request(v: i16) -> BoxedStrategy<ApiVersionsRequest> {
    (
        when(v >= 3, string(), String::new()),
        when(v >= 3, string(), String::new()),
    )
        .prop_map(|(n, ver)| ApiVersionsRequest {
            client_software_name: n,
            client_software_version: ver,
        })
        .boxed()
}

pub fn api_versions_response(v: i16) -> BoxedStrategy<ApiVersionsResponse> {
    let key = (any::<i16>(), any::<i16>(), any::<i16>()).prop_map(|(k, lo, hi)| ApiVersion {
        api_key: k,
        min_version: lo,
        max_version: hi,
    });
    let supported =
        (string(), any::<i16>(), any::<i16>()).prop_map(|(name, lo, hi)| SupportedFeatureKey {
            name,
            min_version: lo,
            max_version: hi,
        });
    let finalized =
        (string(), any::<i16>(), any::<i16>()).prop_map(|(name, hi, lo)| FinalizedFeatureKey {
            name,
            max_version_level: hi,
            min_version_level: lo,
        });
    (
        any::<i16>(),
        vec(key, 0..4),
        when(v >= 1, any::<i32>(), 0),
        when(v >= 3, vec(supported, 0..3), Vec::new()),
        when(v >= 3, prop_oneof![Just(-1i64), any::<i64>()], -1),
        when(v >= 3, vec(finalized, 0..3), Vec::new()),
        when(v >= 3, any::<bool>(), false),
    )
        .prop_map(|(e, keys, t, sf, epoch, ff, zk)| ApiVersionsResponse {
            error_code: e,
            api_keys: keys,
            throttle_time_ms: t,
            supported_features: sf,
            finalized_features_epoch: epoch,
            finalized_features: ff,
            zk_migration_ready: zk,
        })
        .boxed()
}

pub fn metadata_request(v: i16) -> BoxedStrategy<MetadataRequest> {
    let topic = (when(v >= 10, uuid(), Uuid::ZERO), nullable_string(v >= 10))
        .prop_map(|(id, name)| MetadataRequestTopic { topic_id: id, name });
    let topics = vec(topic, 0..4);
    let topics = if v >= 1 {
        option::of(topics).boxed()
    } else {
        topics.prop_map(Some).boxed()
    };
    (
        topics,
        when(v >= 4, any::<bool>(), true),
        when((8..=10).contains(&v), any::<bool>(), false),
        when(v >= 8, any::<bool>(), false),
    )
        .prop_map(|(topics, auto, cluster, topic_ops)| MetadataRequest {
            topics,
            allow_auto_topic_creation: auto,
            include_cluster_authorized_operations: cluster,
            include_topic_authorized_operations: topic_ops,
        })
        .boxed()
}

pub fn metadata_response(v: i16) -> BoxedStrategy<MetadataResponse> {
    let broker = (
        any::<i32>(),
        string(),
        any::<i32>(),
        when(v >= 1, option::of(string()), None),
    )
        .prop_map(|(id, host, port, rack)| MetadataResponseBroker {
            node_id: NodeId(id),
            host,
            port,
            rack,
        });
    let partition = (
        any::<i16>(),
        any::<i32>(),
        any::<i32>(),
        when(v >= 7, any::<i32>(), -1),
        vec(any::<i32>(), 0..4),
        vec(any::<i32>(), 0..4),
        when(v >= 5, vec(any::<i32>(), 0..3), Vec::new()),
    )
        .prop_map(|(e, index, leader, epoch, replicas, isr, offline)| {
            MetadataResponsePartition {
                error_code: e,
                partition_index: index,
                leader_id: NodeId(leader),
                leader_epoch: LeaderEpoch(epoch),
                replica_nodes: replicas.into_iter().map(NodeId).collect(),
                isr_nodes: isr.into_iter().map(NodeId).collect(),
                offline_replicas: offline.into_iter().map(NodeId).collect(),
            }
        });
    let topic = (
        any::<i16>(),
        nullable_string(v >= 12),
        when(v >= 10, uuid(), Uuid::ZERO),
        when(v >= 1, any::<bool>(), false),
        vec(partition, 0..3),
        when(v >= 8, any::<i32>(), i32::MIN),
    )
        .prop_map(
            |(e, name, id, internal, partitions, ops)| MetadataResponseTopic {
                error_code: e,
                name,
                topic_id: id,
                is_internal: internal,
                partitions,
                topic_authorized_operations: ops,
            },
        );
    (
        when(v >= 3, any::<i32>(), 0),
        vec(broker, 0..3),
        when(v >= 2, option::of(string()), None),
        when(v >= 1, any::<i32>(), -1),
        vec(topic, 0..3),
        when((8..=10).contains(&v), any::<i32>(), i32::MIN),
        when(v >= 13, any::<i16>(), 0),
    )
        .prop_map(
            |(throttle, brokers, cluster, controller, topics, ops, e)| MetadataResponse {
                throttle_time_ms: throttle,
                brokers,
                cluster_id: cluster,
                controller_id: NodeId(controller),
                topics,
                cluster_authorized_operations: ops,
                error_code: e,
            },
        )
        .boxed()
}

/// A version of `M` together with a value valid in it.
pub fn versioned<M: Msg>() -> BoxedStrategy<(i16, M)> {
    (M::VERSIONS.0..=M::VERSIONS.1)
        .prop_flat_map(|v| (Just(v), M::strategy(v)))
        .boxed()
}

/// The encoding of a valid value of `M` at some version.
pub fn encoded<M: Msg>() -> BoxedStrategy<(i16, Bytes)> {
    versioned::<M>()
        .prop_map(|(v, m)| {
            let mut out = BytesMut::new();
            m.enc(&mut out, v).expect("strategy values are valid");
            (v, out.freeze())
        })
        .boxed()
}
