//! LeaveGroup (key 13): members leave a classic group, triggering a rebalance.
//!
//! This module owns the request and response descriptions, v0-5. Up to v2 a request names one
//! member; from v3 it carries a batch of members (KIP-345), each by member id or by static
//! instance id, with one result per member in the response.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Removes one member (v0-2) or several (v3+) from a group.
    pub struct LeaveGroupRequest {
        api_key: 13,
        versions: (0-5),
        flexible: (4+),
        fields {
            /// The group id.
            group_id: kt::String, versions(0+);
            /// The member id to remove.
            member_id: kt::String, versions(0-2);
            /// The members to remove.
            members: kt::Array<MemberIdentity>, versions(3+);
        }
        tagged {}
    }
}

message! {
    /// One leaving member.
    pub struct MemberIdentity {
        versions: (0-5),
        flexible: (4+),
        fields {
            /// The member id to remove.
            member_id: kt::String, versions(3+);
            /// The static instance id to remove, or null.
            group_instance_id: kt::NullableString = None, versions(3+), nullable(3+);
            /// Why the member leaves, or null.
            reason: kt::NullableString = None, versions(5+), nullable(5+), flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// The outcome of a leave, overall and (v3+) per member.
    pub struct LeaveGroupResponse {
        api_key: 13,
        versions: (0-5),
        flexible: (4+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(1+), flags(ignorable);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The result for each leaving member.
            members: kt::Array<MemberResponse>, versions(3+);
        }
        tagged {}
    }
}

message! {
    /// One leaving member's result.
    pub struct MemberResponse {
        versions: (0-5),
        flexible: (4+),
        fields {
            /// The member id.
            member_id: kt::String, versions(3+);
            /// The static instance id, or null.
            group_instance_id: kt::NullableString, versions(3+), nullable(3+);
            /// The error code, or 0.
            error_code: kt::Int16, versions(3+);
        }
        tagged {}
    }
}
