//! The client's typed error, [`ClientError`], and the two questions every retry loop asks of
//! it: may the request be retried, and may it have reached the broker.
//!
//! Invariant: every variant names where it happened (broker address, API, topic-partition) in
//! its `Display`, so a failed simulation run explains itself from the history alone.

use std::fmt;
use std::io;

use crate::protocol::error::ErrorCode;
use crate::protocol::record_batch::BatchError;
use crate::protocol::wire::{DecodeError, EncodeError};

/// Kafka's name of an API (`Produce`, `Fetch`, ...), for messages; `UnknownApi` for a key the
/// codec does not describe.
pub fn api_name(api_key: i16) -> &'static str {
    crate::protocol::api_info(api_key).map_or("UnknownApi", |info| {
        info.name.strip_suffix("Request").unwrap_or(info.name)
    })
}

/// Everything the client can fail with.
#[derive(Debug)]
pub enum ClientError {
    /// The TCP connection to a broker could not be opened (or not within the timeout).
    Connect { addr: String, source: io::Error },
    /// Reading or writing the socket failed. `sent` is true once any byte of the request may
    /// have been written: the broker may then have processed it.
    Network {
        addr: String,
        api: &'static str,
        sent: bool,
        source: io::Error,
    },
    /// The broker closed the connection before the whole response arrived.
    ConnectionClosed { addr: String, api: &'static str },
    /// The connection broke on an earlier request and cannot be reused.
    ConnectionBroken { addr: String },
    /// No response within the request's timeout; the connection is dropped.
    Timeout {
        addr: String,
        api: &'static str,
        timeout_ms: u64,
    },
    /// The response's size prefix is above `response_bytes_max`; it was not read.
    ResponseTooLarge {
        addr: String,
        api: &'static str,
        size: usize,
        max: usize,
    },
    /// The response's size prefix is negative or smaller than a response header.
    InvalidResponseSize {
        addr: String,
        api: &'static str,
        size: i32,
    },
    /// The response answers another request than the one in flight.
    CorrelationMismatch {
        addr: String,
        api: &'static str,
        expected: i32,
        found: i32,
    },
    /// The request could not be encoded (a value out of range for the version).
    Encode {
        api: &'static str,
        version: i16,
        source: EncodeError,
    },
    /// The response did not decode.
    Decode {
        addr: String,
        api: &'static str,
        version: i16,
        source: DecodeError,
    },
    /// ApiVersions itself failed.
    ApiVersions { addr: String, code: ErrorCode },
    /// No version of this API is spoken by both the client and the broker.
    UnsupportedApi {
        addr: String,
        api: &'static str,
        broker_range: Option<(i16, i16)>,
    },
    /// The broker answered with an error for a topic-partition (partition -1: topic-level).
    Kafka {
        code: ErrorCode,
        message: Option<String>,
        topic: String,
        partition: i32,
    },
    /// The response does not mention the topic-partition the request was about.
    MissingPartition {
        addr: String,
        api: &'static str,
        topic: String,
        partition: i32,
    },
    /// Metadata names a leader whose node id is not among the brokers it lists.
    UnknownBroker { node_id: i32 },
    /// None of the bootstrap or known broker addresses accepted a connection.
    NoBrokerReachable {
        addrs: Vec<String>,
        last: Option<Box<ClientError>>,
    },
    /// A produce request may or may not have been appended: an attempt reached the broker
    /// and its answer was lost or ambiguous, and no later attempt settled it. A checker must
    /// treat the write as possibly present.
    UnknownOutcome {
        topic: String,
        partition: i32,
        attempts: u32,
        last: Box<ClientError>,
    },
    /// Fetched record bytes are malformed.
    Batch {
        topic: String,
        partition: i32,
        offset: i64,
        source: BatchError,
    },
    /// A batch cannot be built from these records.
    InvalidBatch { reason: String },
    /// The caller passed something the client cannot send (an empty topic list, ...).
    InvalidArgument { reason: String },
    /// A group API answered with an error for a group.
    Group {
        group: String,
        api: &'static str,
        code: ErrorCode,
    },
}

impl ClientError {
    /// True if retrying (after refreshing metadata and reconnecting) may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Connect { .. }
            | ClientError::Network { .. }
            | ClientError::ConnectionClosed { .. }
            | ClientError::ConnectionBroken { .. }
            | ClientError::Timeout { .. }
            | ClientError::CorrelationMismatch { .. }
            | ClientError::UnknownBroker { .. }
            | ClientError::NoBrokerReachable { .. } => true,
            ClientError::Kafka { code, .. } | ClientError::Group { code, .. } => {
                code_is_retriable(*code)
            }
            _ => false,
        }
    }

    /// True if the request may have been processed by the broker although no definite answer
    /// came back: it was (perhaps partly) written and the response was lost, late, or garbled.
    pub fn maybe_delivered(&self) -> bool {
        match self {
            ClientError::Network { sent, .. } => *sent,
            ClientError::ConnectionClosed { .. }
            | ClientError::Timeout { .. }
            | ClientError::ResponseTooLarge { .. }
            | ClientError::InvalidResponseSize { .. }
            | ClientError::CorrelationMismatch { .. }
            | ClientError::Decode { .. }
            | ClientError::UnknownOutcome { .. } => true,
            _ => false,
        }
    }

    /// The Kafka error code, if the broker answered with one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Kafka { code, .. } | ClientError::Group { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True if this is [`ClientError::UnknownOutcome`].
    pub fn is_unknown_outcome(&self) -> bool {
        matches!(self, ClientError::UnknownOutcome { .. })
    }
}

/// The error codes after which the same request may succeed once metadata is refreshed or
/// the cluster recovers (Kafka's `RetriableException` subclasses that matter here).
pub fn code_is_retriable(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
            | ErrorCode::LEADER_NOT_AVAILABLE
            | ErrorCode::NOT_LEADER_OR_FOLLOWER
            | ErrorCode::REQUEST_TIMED_OUT
            | ErrorCode::BROKER_NOT_AVAILABLE
            | ErrorCode::REPLICA_NOT_AVAILABLE
            | ErrorCode::NETWORK_EXCEPTION
            | ErrorCode::NOT_ENOUGH_REPLICAS
            | ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND
            | ErrorCode::KAFKA_STORAGE_ERROR
            | ErrorCode::NOT_CONTROLLER
            | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
            | ErrorCode::COORDINATOR_NOT_AVAILABLE
            | ErrorCode::NOT_COORDINATOR
    ) || matches!(
        code.0,
        74 // FENCED_LEADER_EPOCH
            | 75 // UNKNOWN_LEADER_EPOCH
            | 78 // OFFSET_NOT_AVAILABLE
            | 83 // ELIGIBLE_LEADERS_NOT_AVAILABLE
    )
}

/// True if a produce answered with `code` was certainly not appended: the broker refuses
/// these before it writes anything. Every other code (REQUEST_TIMED_OUT,
/// NOT_ENOUGH_REPLICAS_AFTER_APPEND, KAFKA_STORAGE_ERROR, UNKNOWN_SERVER_ERROR, and
/// NOT_LEADER_OR_FOLLOWER with acks=all, which a leader that lost leadership while waiting for
/// its followers also answers) leaves the outcome unknown.
pub fn produce_code_is_definite(code: ErrorCode, acks: i16) -> bool {
    match code {
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        | ErrorCode::LEADER_NOT_AVAILABLE
        | ErrorCode::CORRUPT_MESSAGE
        | ErrorCode::MESSAGE_TOO_LARGE
        | ErrorCode::RECORD_LIST_TOO_LARGE
        | ErrorCode::NOT_ENOUGH_REPLICAS
        | ErrorCode::INVALID_REQUIRED_ACKS
        | ErrorCode::TOPIC_AUTHORIZATION_FAILED
        | ErrorCode::CLUSTER_AUTHORIZATION_FAILED
        | ErrorCode::INVALID_TIMESTAMP
        | ErrorCode::INVALID_TOPIC_EXCEPTION
        | ErrorCode::UNSUPPORTED_FOR_MESSAGE_FORMAT
        | ErrorCode::UNSUPPORTED_VERSION
        | ErrorCode::INVALID_PRODUCER_EPOCH
        | ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER => true,
        ErrorCode::NOT_LEADER_OR_FOLLOWER => acks != -1,
        // INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE: validation before the append.
        ErrorCode(87) | ErrorCode(76) => true,
        _ => false,
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Connect { addr, source } => {
                write!(f, "cannot connect to broker {addr}: {source}")
            }
            ClientError::Network {
                addr,
                api,
                sent,
                source,
            } => write!(
                f,
                "{api} request to broker {addr} failed {}: {source}",
                if *sent {
                    "after it was (perhaps partly) sent"
                } else {
                    "before it was sent"
                }
            ),
            ClientError::ConnectionClosed { addr, api } => write!(
                f,
                "broker {addr} closed the connection before answering {api}"
            ),
            ClientError::ConnectionBroken { addr } => write!(
                f,
                "the connection to broker {addr} broke on an earlier request"
            ),
            ClientError::Timeout {
                addr,
                api,
                timeout_ms,
            } => write!(
                f,
                "{api} request to broker {addr} got no response within {timeout_ms} ms"
            ),
            ClientError::ResponseTooLarge {
                addr,
                api,
                size,
                max,
            } => write!(
                f,
                "{api} response of {size} bytes from broker {addr} exceeds response_bytes_max {max}"
            ),
            ClientError::InvalidResponseSize { addr, api, size } => write!(
                f,
                "{api} response from broker {addr} announces an invalid size {size}"
            ),
            ClientError::CorrelationMismatch {
                addr,
                api,
                expected,
                found,
            } => write!(
                f,
                "{api} response from broker {addr} has correlation id {found}, expected {expected}"
            ),
            ClientError::Encode {
                api,
                version,
                source,
            } => write!(f, "cannot encode {api} v{version} request: {source}"),
            ClientError::Decode {
                addr,
                api,
                version,
                source,
            } => write!(
                f,
                "cannot decode {api} v{version} response from broker {addr}: {source}"
            ),
            ClientError::ApiVersions { addr, code } => {
                write!(f, "ApiVersions to broker {addr} failed with {code}")
            }
            ClientError::UnsupportedApi {
                addr,
                api,
                broker_range,
            } => match broker_range {
                Some((min, max)) => write!(
                    f,
                    "broker {addr} supports {api} v{min}-v{max}, none of which this client speaks"
                ),
                None => write!(f, "broker {addr} does not support {api}"),
            },
            ClientError::Kafka {
                code,
                message,
                topic,
                partition,
            } => {
                if *partition < 0 {
                    write!(f, "topic {topic}: {code}")?;
                } else {
                    write!(f, "{topic}-{partition}: {code}")?;
                }
                match message {
                    Some(message) => write!(f, ": {message}"),
                    None => Ok(()),
                }
            }
            ClientError::MissingPartition {
                addr,
                api,
                topic,
                partition,
            } => write!(
                f,
                "{api} response from broker {addr} does not mention {topic}-{partition}"
            ),
            ClientError::UnknownBroker { node_id } => write!(
                f,
                "metadata names broker {node_id}, which it does not list among the brokers"
            ),
            ClientError::NoBrokerReachable { addrs, last } => {
                write!(f, "no broker reachable among [{}]", addrs.join(", "))?;
                match last {
                    Some(last) => write!(f, ": {last}"),
                    None => Ok(()),
                }
            }
            ClientError::UnknownOutcome {
                topic,
                partition,
                attempts,
                last,
            } => write!(
                f,
                "produce to {topic}-{partition}: outcome unknown after {attempts} attempts (the write may or may not be in the log): {last}"
            ),
            ClientError::Batch {
                topic,
                partition,
                offset,
                source,
            } => write!(
                f,
                "records fetched from {topic}-{partition} at offset {offset}: {source}"
            ),
            ClientError::InvalidBatch { reason } => write!(f, "cannot build batch: {reason}"),
            ClientError::InvalidArgument { reason } => write!(f, "invalid argument: {reason}"),
            ClientError::Group { group, api, code } => {
                write!(f, "{api} for group '{group}': {code}")
            }
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Connect { source, .. } | ClientError::Network { source, .. } => {
                Some(source)
            }
            ClientError::Encode { source, .. } => Some(source),
            ClientError::Decode { source, .. } => Some(source),
            ClientError::Batch { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_error_display_names_where() {
        let e = ClientError::Kafka {
            code: ErrorCode::NOT_LEADER_OR_FOLLOWER,
            message: Some("moved".into()),
            topic: "t".into(),
            partition: 3,
        };
        assert_eq!(e.to_string(), "t-3: NOT_LEADER_OR_FOLLOWER (6): moved");
        assert!(e.is_retriable());
        assert!(!e.maybe_delivered());
        let e = ClientError::Timeout {
            addr: "b:9092".into(),
            api: "Produce",
            timeout_ms: 5,
        };
        assert!(e.to_string().contains("b:9092") && e.to_string().contains("Produce"));
        assert!(e.is_retriable() && e.maybe_delivered());
        let e = ClientError::ResponseTooLarge {
            addr: "b:1".into(),
            api: "Fetch",
            size: 10,
            max: 5,
        };
        assert!(!e.is_retriable());
        assert!(e.to_string().contains("response_bytes_max 5"));
    }

    #[test]
    fn client_error_produce_codes_split_definite_from_ambiguous() {
        assert!(produce_code_is_definite(ErrorCode::MESSAGE_TOO_LARGE, -1));
        assert!(produce_code_is_definite(
            ErrorCode::NOT_LEADER_OR_FOLLOWER,
            1
        ));
        assert!(!produce_code_is_definite(
            ErrorCode::NOT_LEADER_OR_FOLLOWER,
            -1
        ));
        assert!(!produce_code_is_definite(ErrorCode::REQUEST_TIMED_OUT, 1));
        assert!(!produce_code_is_definite(
            ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            -1
        ));
        assert!(code_is_retriable(ErrorCode(74)));
        assert!(!code_is_retriable(ErrorCode::MESSAGE_TOO_LARGE));
        assert_eq!(api_name(0), "Produce");
    }
}
