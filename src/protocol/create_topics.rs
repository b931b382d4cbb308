//! CreateTopics (key 19): creating topics with partition counts, replica assignments and
//! configs. This module owns the request and response descriptions.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks for topics to be created.
    pub struct CreateTopicsRequest {
        api_key: 19,
        versions: (2-7),
        flexible: (5+),
        fields {
            /// The topics to create.
            topics: kt::Array<CreatableTopic>, versions(0+);
            /// How long to wait for the creation, in milliseconds.
            timeout_ms: kt::Int32 = 60000, versions(0+);
            /// Only validate the request, creating nothing.
            validate_only: kt::Bool, versions(1+);
        }
        tagged {}
    }
}

message! {
    /// One topic to create.
    pub struct CreatableTopic {
        versions: (2-7),
        flexible: (5+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// The number of partitions, or -1 for the broker default (or the assignments).
            num_partitions: kt::Int32, versions(0+);
            /// The replication factor, or -1 for the broker default (or the assignments).
            replication_factor: kt::Int16, versions(0+);
            /// Explicit replica assignments, per partition.
            assignments: kt::Array<CreatableReplicaAssignment>, versions(0+);
            /// Topic configs.
            configs: kt::Array<CreatableTopicConfig>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The replicas of one partition of a topic to create.
    pub struct CreatableReplicaAssignment {
        versions: (2-7),
        flexible: (5+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The brokers to place replicas on.
            broker_ids: kt::Array<kt::NodeId>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One config of a topic to create.
    pub struct CreatableTopicConfig {
        versions: (2-7),
        flexible: (5+),
        fields {
            /// The config name.
            name: kt::String, versions(0+);
            /// The config value, or null.
            value: kt::NullableString, versions(0+), nullable(0+);
        }
        tagged {}
    }
}

message! {
    /// The outcome of each topic creation.
    pub struct CreateTopicsResponse {
        api_key: 19,
        versions: (2-7),
        flexible: (5+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(2+), flags(ignorable);
            /// Each topic's result.
            topics: kt::Array<CreatableTopicResult>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic's creation result.
    pub struct CreatableTopicResult {
        versions: (2-7),
        flexible: (5+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// The topic id.
            topic_id: kt::Uuid, versions(7+), flags(ignorable);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The error message, or null.
            error_message: kt::NullableString, versions(1+), nullable(0+), flags(ignorable);
            /// The number of partitions, or -1.
            num_partitions: kt::Int32 = -1, versions(5+), flags(ignorable);
            /// The replication factor, or -1.
            replication_factor: kt::Int16 = -1, versions(5+), flags(ignorable);
            /// The topic's configs, or null.
            configs: kt::NullableArray<CreatableTopicConfigs>, versions(5+), nullable(5+),
                flags(ignorable);
        }
        tagged {
            /// Why the configs could not be returned, or 0.
            0 => topic_config_error_code: kt::Int16, versions(5+), flags(ignorable);
        }
    }
}

message! {
    /// One config of a created topic.
    pub struct CreatableTopicConfigs {
        versions: (2-7),
        flexible: (5+),
        fields {
            /// The config name.
            name: kt::String, versions(5+);
            /// The config value, or null.
            value: kt::NullableString, versions(5+), nullable(5+);
            /// Whether the config is read-only.
            read_only: kt::Bool, versions(5+);
            /// Where the config comes from.
            config_source: kt::Int8 = -1, versions(5+), flags(ignorable);
            /// Whether the config is sensitive.
            is_sensitive: kt::Bool, versions(5+);
        }
        tagged {}
    }
}
