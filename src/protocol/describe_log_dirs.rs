//! DescribeLogDirs (key 35): the log directories of a broker and the partitions in them. This
//! module owns the request and response descriptions.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks for the log directories holding some partitions.
    pub struct DescribeLogDirsRequest {
        api_key: 35,
        versions: (1-4),
        flexible: (2+),
        fields {
            /// The topics to describe, or null for all.
            topics: kt::NullableArray<DescribableLogDirTopic>, versions(0+), nullable(0+);
        }
        tagged {}
    }
}

message! {
    /// One topic to describe.
    pub struct DescribableLogDirTopic {
        versions: (1-4),
        flexible: (2+),
        fields {
            /// The topic name.
            topic: kt::String, versions(0+);
            /// The partition indexes.
            partitions: kt::Array<kt::Int32>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The log directories.
    pub struct DescribeLogDirsResponse {
        api_key: 35,
        versions: (1-4),
        flexible: (2+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// The top-level error code.
            error_code: kt::Int16, versions(3+), flags(ignorable);
            /// Each log directory.
            results: kt::Array<DescribeLogDirsResult>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One log directory.
    pub struct DescribeLogDirsResult {
        versions: (1-4),
        flexible: (2+),
        fields {
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The absolute path of the directory.
            log_dir: kt::String, versions(0+);
            /// Each topic in the directory.
            topics: kt::Array<DescribeLogDirsTopic>, versions(0+);
            /// The directory's volume size in bytes, or -1.
            total_bytes: kt::Int64 = -1, versions(4+), flags(ignorable);
            /// The directory's usable bytes, or -1.
            usable_bytes: kt::Int64 = -1, versions(4+), flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// One topic in a log directory.
    pub struct DescribeLogDirsTopic {
        versions: (1-4),
        flexible: (2+),
        fields {
            /// The topic name.
            name: kt::String, versions(0+);
            /// Each partition.
            partitions: kt::Array<DescribeLogDirsPartition>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One partition in a log directory.
    pub struct DescribeLogDirsPartition {
        versions: (1-4),
        flexible: (2+),
        fields {
            /// The partition index.
            partition_index: kt::Int32, versions(0+);
            /// The size of the partition's log, in bytes.
            partition_size: kt::Int64, versions(0+);
            /// How far the replica lags the high watermark (or the current replica, for a
            /// future one).
            offset_lag: kt::Int64, versions(0+);
            /// Whether this is a future replica (being moved here).
            is_future_key: kt::Bool, versions(0+);
        }
        tagged {}
    }
}
