//! JoinGroup (key 11): a member joins (or rejoins) a classic group, starting or joining a
//! rebalance.
//!
//! This module owns the request and response descriptions, v0-9. Semantics the codec does
//! not enforce but the coordinator must: an empty member id asks the coordinator to assign
//! one (from v4 it answers MEMBER_ID_REQUIRED with the id, and the member joins again with
//! it); only the leader's response lists the members and their subscriptions.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// Joins a group with the protocols the member supports.
    pub struct JoinGroupRequest {
        api_key: 11,
        versions: (0-9),
        flexible: (6+),
        fields {
            /// The group id.
            group_id: kt::String, versions(0+);
            /// How long without a heartbeat before the coordinator considers the member dead,
            /// in milliseconds.
            session_timeout_ms: kt::Int32, versions(0+);
            /// How long the coordinator waits for each member to rejoin during a rebalance, in
            /// milliseconds.
            rebalance_timeout_ms: kt::Int32 = -1, versions(1+), flags(ignorable);
            /// The member id assigned by the coordinator, or empty on a first join.
            member_id: kt::String, versions(0+);
            /// The static member's instance id, or null.
            group_instance_id: kt::NullableString = None, versions(5+), nullable(5+);
            /// The class of protocols the group implements (`consumer` for consumers).
            protocol_type: kt::String, versions(0+);
            /// The protocols the member supports, in order of preference.
            protocols: kt::Array<JoinGroupRequestProtocol>, versions(0+);
            /// Why the member (re)joins, or null.
            reason: kt::NullableString = None, versions(8+), nullable(8+), flags(ignorable);
        }
        tagged {}
    }
}

message! {
    /// One protocol a joining member supports.
    pub struct JoinGroupRequestProtocol {
        versions: (0-9),
        flexible: (6+),
        fields {
            /// The protocol name (for consumers, the assignor).
            name: kt::String, versions(0+);
            /// The protocol metadata (for consumers, the subscription).
            metadata: kt::Bytes, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// The outcome of a join: the generation, the chosen protocol, and (for the leader) the
    /// members.
    pub struct JoinGroupResponse {
        api_key: 11,
        versions: (0-9),
        flexible: (6+),
        fields {
            /// How long the request was throttled by a quota, in milliseconds.
            throttle_time_ms: kt::Int32, versions(2+), flags(ignorable);
            /// The error code, or 0.
            error_code: kt::Int16, versions(0+);
            /// The generation of the group.
            generation_id: kt::Int32 = -1, versions(0+);
            /// The group's protocol type, or null.
            protocol_type: kt::NullableString = None, versions(7+), nullable(7+),
                flags(ignorable);
            /// The protocol the coordinator chose; null (v7+) when none was.
            protocol_name: kt::NullableString, versions(0+), nullable(7+);
            /// The leader's member id.
            leader: kt::String, versions(0+);
            /// Whether the leader must skip running the assignment (KIP-814).
            skip_assignment: kt::Bool, versions(9+);
            /// The member id of the member that joined.
            member_id: kt::String, versions(0+);
            /// The members of the group; sent to the leader only.
            members: kt::Array<JoinGroupResponseMember>, versions(0+);
        }
        tagged {}
    }
}

message! {
    /// One member of the group, as the leader sees it.
    pub struct JoinGroupResponseMember {
        versions: (0-9),
        flexible: (6+),
        fields {
            /// The member id.
            member_id: kt::String, versions(0+);
            /// The static member's instance id, or null.
            group_instance_id: kt::NullableString = None, versions(5+), nullable(5+),
                flags(ignorable);
            /// The member's metadata for the chosen protocol.
            metadata: kt::Bytes, versions(0+);
        }
        tagged {}
    }
}
