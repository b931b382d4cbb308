//! DeleteTopics (key 20): deleting topics by name or (v6+) by id. This module owns the request
//! and response descriptions.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks for topics to be deleted.
    pub struct DeleteTopicsRequest {
        api_key: 20,
        versions: (1-6),
        flexible: (4+),
        fields {
            /// The topics to delete, by name or id (v6+).
            topics: kt::Array<DeleteTopicState>, versions(6+);
            /// The names of the topics to delete (v1-5).
            topic_names: kt::Array<kt::String>, versions(0-5), flags(ignorable);
            /// How long to wait for the deletion, in milliseconds.
            timeout_ms: kt::Int32, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic to delete.
    pub struct DeleteTopicState {
        versions: (1-6),
        flexible: (4+),
        fields {
            /// The topic name, or null when given by id.
            name: kt::NullableString = None, versions(6+), nullable(6+);
            /// The topic id, or zero when given by name.
            topic_id: kt::Uuid, versions(6+);
        }
        tagged {}
    }
}

message! {
    /// The outcome of each deletion.
    pub struct DeleteTopicsResponse {
        api_key: 20,
        versions: (1-6),
        flexible: (4+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(1+), flags(ignorable);
            /// Each topic's result.
            responses: kt::Array<DeletableTopicResult>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic's deletion result.
    pub struct DeletableTopicResult {
        versions: (1-6),
        flexible: (4+),
        fields {
            /// The topic name; null (v6+) for a topic given by an unknown id.
            name: kt::NullableString, versions(0+), nullable(6+);
            /// The topic id.
            topic_id: kt::Uuid, versions(6+), flags(ignorable);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The error message, or null.
            error_message: kt::NullableString = None, versions(5+), nullable(5+),
                flags(ignorable);
        }
        tagged {}
    }
}
