//! DescribeGroups (key 15): the state, protocol and members of classic groups.
//!
//! This module owns the request and response descriptions, v0-6. Semantics the codec does not
//! enforce but the coordinator must: each group gets its own entry and error code, and
//! `authorized_operations` stays at its default (`i32::MIN`) unless the request asked for it.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Asks for a description of some groups.
    pub struct DescribeGroupsRequest {
        api_key: 15,
        versions: (0-6),
        flexible: (5+),
        fields {
            /// The ids of the groups to describe.
            groups: kt::Array<kt::String>, versions(0+);
            /// Whether to include each group's authorized operations.
            include_authorized_operations: kt::Bool, versions(3+);
        }
        tagged {}
    }
}

message! {
    /// Each requested group's description.
    pub struct DescribeGroupsResponse {
        api_key: 15,
        versions: (0-6),
        flexible: (5+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(1+), flags(ignorable);
            /// Each described group.
            groups: kt::Array<DescribedGroup>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One described group.
    pub struct DescribedGroup {
        versions: (0-6),
        flexible: (5+),
        fields {
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The error message, or null.
            error_message: kt::NullableString = None, versions(6+), nullable(6+);
            /// The group id.
            group_id: kt::String, versions(0+);
            /// The group state, or empty.
            group_state: kt::String, versions(0+);
            /// The group's protocol type, or empty.
            protocol_type: kt::String, versions(0+);
            /// The group's chosen protocol, or empty.
            protocol_data: kt::String, versions(0+);
            /// The members of the group.
            members: kt::Array<DescribedGroupMember>, versions(0+);
            /// The operations the caller may perform on the group, as a bit field.
            authorized_operations: kt::Int32 = i32::MIN, versions(3+);
        }
        tagged {}
    }
}

message! {
    /// One member of a described group.
    pub struct DescribedGroupMember {
        versions: (0-6),
        flexible: (5+),
        fields {
            /// The member id.
            member_id: kt::String, versions(0+);
            /// The static member's instance id, or null.
            group_instance_id: kt::NullableString = None, versions(4+), nullable(4+),
                flags(ignorable);
            /// The client id of the member's latest join.
            client_id: kt::String, versions(0+);
            /// The client's host.
            client_host: kt::String, versions(0+);
            /// The member's metadata for the group's current protocol.
            member_metadata: kt::Bytes, versions(0+);
            /// The member's current assignment.
            member_assignment: kt::Bytes, versions(0+);
        }
        tagged {}
    }
}
