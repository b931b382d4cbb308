//! BrokerRegistration (key 62): a broker registers with the KRaft controller on startup,
//! and receives its broker epoch.
//!
//! This module owns the request and response descriptions. All versions are flexible.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// A broker's registration.
    pub struct BrokerRegistrationRequest {
        api_key: 62,
        versions: (0-4),
        flexible: (0+),
        fields {
            /// The broker id.
            broker_id: kt::NodeId, versions(0+);
            /// The cluster id of the broker process.
            cluster_id: kt::String, versions(0+);
            /// The incarnation id of the broker process.
            incarnation_id: kt::Uuid, versions(0+);
            /// The broker's listeners.
            listeners: kt::Array<BrokerRegistrationListener>, versions(0+);
            /// The features the broker supports.
            features: kt::Array<BrokerRegistrationFeature>, versions(0+);
            /// The rack, or null.
            rack: kt::NullableString, versions(0+), nullable(0+);
            /// Set by a ZooKeeper broker being migrated to KRaft.
            is_migrating_zk_broker: kt::Bool, versions(1+);
            /// The broker's log directories.
            log_dirs: kt::Array<kt::Uuid>, versions(2+), flags(ignorable);
            /// The epoch before a clean shutdown, or -1.
            previous_broker_epoch: kt::Int64 = -1, versions(3+), flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// One listener of a registering broker.
    pub struct BrokerRegistrationListener {
        versions: (0-4),
        flexible: (0+),
        fields {
            /// The listener name.
            name: kt::String, versions(0+);
            /// The host name.
            host: kt::String, versions(0+);
            /// The port.
            port: kt::Uint16, versions(0+);
            /// The security protocol.
            security_protocol: kt::Int16, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One feature a registering broker supports.
    pub struct BrokerRegistrationFeature {
        versions: (0-4),
        flexible: (0+),
        fields {
            /// The feature name.
            name: kt::String, versions(0+);
            /// The lowest supported version.
            min_supported_version: kt::Int16, versions(0+);
            /// The highest supported version.
            max_supported_version: kt::Int16, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The controller's answer to a registration.
    pub struct BrokerRegistrationResponse {
        api_key: 62,
        versions: (0-4),
        flexible: (0+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The broker's assigned epoch, or -1 on error.
            broker_epoch: kt::Int64 = -1, versions(0+);
        }
        tagged {}
    }
}
