//! DeleteRecords (key 21): moving partitions' log start offsets forward. This module owns the
//! request and response descriptions.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks for records before some offsets to be deleted.
    pub struct DeleteRecordsRequest {
        api_key: 21,
        versions: (0-2),
        flexible: (2+),
        fields {
            /// Each topic.
            topics: kt::Array<DeleteRecordsTopic>, versions(0+);
            /// How long to wait for the deletion, in milliseconds.
            timeout_ms: kt::Int32, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic of a delete-records request.
    pub struct DeleteRecordsTopic {
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// Each partition.
            partitions: kt::Array<DeleteRecordsPartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a delete-records request.
    pub struct DeleteRecordsPartition {
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// Records before this offset are deleted; -1 means the high watermark.
            offset: kt::Offset, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The new low watermarks.
    pub struct DeleteRecordsResponse {
        api_key: 21,
        versions: (0-2),
        flexible: (2+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// Each topic.
            topics: kt::Array<DeleteRecordsTopicResult>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic of a delete-records response.
    pub struct DeleteRecordsTopicResult {
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// Each partition.
            partitions: kt::Array<DeleteRecordsPartitionResult>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition of a delete-records response.
    pub struct DeleteRecordsPartitionResult {
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The partition's new low watermark.
            low_watermark: kt::Offset, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
        }
        tagged {}
    }
}
