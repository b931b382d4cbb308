//! DescribeCluster (key 60): the cluster id, controller and brokers (the admin client's view).
//! This module owns the request and response descriptions.

use crate::message;
use crate::protocol::types::NodeId;
use crate::protocol::wire::kt;

message! {
    /// Asks for the cluster's description.
    pub struct DescribeClusterRequest {
        api_key: 60,
        versions: (0-2),
        flexible: (0+),
        fields {
            /// Whether to include the cluster's authorized operations.
            include_cluster_authorized_operations: kt::Bool, versions(0+);
            /// The endpoints wanted: 1 brokers, 2 controllers.
            endpoint_type: kt::Int8 = 1, versions(1+);
            /// Whether to include fenced brokers.
            include_fenced_brokers: kt::Bool, versions(2+);
        }
        tagged {}
    }
}

message! {
    /// The cluster's description.
    pub struct DescribeClusterResponse {
        api_key: 60,
        versions: (0-2),
        flexible: (0+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(0+);
            /// The top-level error code.
            error_code: kt::Int16, versions(0+);
            /// The top-level error message, or null.
            error_message: kt::NullableString = None, versions(0+), nullable(0+);
            /// The endpoints returned: 1 brokers, 2 controllers.
            endpoint_type: kt::Int8 = 1, versions(1+);
            /// The cluster id.
            cluster_id: kt::String, versions(0+);
            /// The controller's broker id, or -1.
            controller_id: kt::NodeId = NodeId(-1), versions(0+);
            /// Each broker.
            brokers: kt::Array<DescribeClusterBroker>, versions(0+);
            /// The cluster's authorized operations, as a bit field.
            cluster_authorized_operations: kt::Int32 = i32::MIN, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One broker of the cluster.
    pub struct DescribeClusterBroker {
        versions: (0-2),
        flexible: (0+),
        fields {
            /// The broker id.
            broker_id: kt::NodeId, versions(0+);
            /// The host name.
            host: kt::String, versions(0+);
            /// The port.
            port: kt::Int32, versions(0+);
            /// The rack, or null.
            rack: kt::NullableString = None, versions(0+), nullable(0+);
            /// Whether the broker is fenced.
            is_fenced: kt::Bool, versions(2+);
        }
        tagged {}
    }
}
