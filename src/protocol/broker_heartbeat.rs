//! BrokerHeartbeat (key 63): a registered broker's periodic heartbeat to the KRaft
//! controller, which answers with the broker's fencing and shutdown state.
//!
//! This module owns the request and response descriptions. All versions are flexible; the
//! offline log directories (v1+) are a tagged field.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// A broker's heartbeat.
    pub struct BrokerHeartbeatRequest {
        api_key: 63,
        versions: (0-1),
        flexible: (0+),
        fields {
            /// The broker id.
            broker_id: kt::NodeId, versions(0+);
            /// The broker epoch.
            broker_epoch: kt::Int64 = -1, versions(0+);
            /// The highest metadata offset the broker has reached.
            current_metadata_offset: kt::Offset, versions(0+);
            /// Whether the broker wants to be fenced.
            want_fence: kt::Bool, versions(0+);
            /// Whether the broker wants to shut down.
            want_shut_down: kt::Bool, versions(0+);
        }
        tagged {
            /// The broker's offline log directories.
            0 => offline_log_dirs: kt::Array<kt::Uuid>, versions(1+);
        }
    }
}

message! {
    /// The controller's answer to a heartbeat.
    pub struct BrokerHeartbeatResponse {
        api_key: 63,
        versions: (0-1),
        flexible: (0+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// Whether the broker has caught up with the metadata log.
            is_caught_up: kt::Bool, versions(0+);
            /// Whether the broker is fenced.
            is_fenced: kt::Bool = true, versions(0+);
            /// Whether the broker should shut down.
            should_shut_down: kt::Bool, versions(0+);
        }
        tagged {}
    }
}
