//! Kafka's ACL operations and resource types, with their wire codes, and the "authorized
//! operations" bit fields that Metadata (v8+), DescribeCluster and DescribeGroups (v3+) carry
//! when a client asks for them (KIP-430).
//!
//! This module owns the codes and, per resource type, the operations the resource supports
//! (Kafka's `AclEntry.supportedOperations`). A broker without an authorizer, which Samsa is
//! until the security step, authorizes every supported operation: Kafka's
//! `AuthHelper.authorizedOperations` returns exactly that set when no authorizer is
//! configured, as a 32-bit field with bit `code` set for each operation (`Utils.to32BitField`).
//! A response field left at [`NOT_REQUESTED`] tells the client it did not ask.
//!
//! Invariant: every code is below 32, so each operation has its bit in an `i32`.

/// The value of an authorized-operations field the client did not ask for (Kafka's
/// `Integer.MIN_VALUE` default in the schemas).
pub const NOT_REQUESTED: i32 = i32::MIN;

/// Kafka's `AclOperation`, with its code (`AclOperation.code()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AclOperation {
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
    CreateTokens = 13,
    DescribeTokens = 14,
    TwoPhaseCommit = 15,
}

impl AclOperation {
    /// The operation's wire code.
    pub fn code(self) -> i8 {
        self as i8
    }
}

/// Kafka's `ResourceType`, with its code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceType {
    Topic = 2,
    Group = 3,
    Cluster = 4,
    TransactionalId = 5,
    DelegationToken = 6,
    User = 7,
}

impl ResourceType {
    /// The resource type's wire code.
    pub fn code(self) -> i8 {
        self as i8
    }

    /// The operations Kafka defines on this type of resource (`AclEntry.supportedOperations`
    /// of Kafka 4: topics READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS,
    /// ALTER_CONFIGS; groups READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS; the
    /// cluster CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE,
    /// ALTER, DESCRIBE; transactional ids DESCRIBE, WRITE; delegation tokens DESCRIBE; users
    /// CREATE_TOKENS, DESCRIBE_TOKENS).
    pub fn supported_operations(self) -> &'static [AclOperation] {
        use AclOperation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
        }
    }
}

/// `operations` as Kafka's 32-bit field: bit `code` set for each (`Utils.to32BitField`).
pub fn to_32bit_field(operations: &[AclOperation]) -> i32 {
    operations
        .iter()
        .fold(0i32, |field, op| field | (1i32 << op.code()))
}

/// What a client may do with a resource of `resource_type` on a broker without an
/// authorizer: every operation the type supports, as the bit field responses carry.
pub fn authorized_operations(resource_type: ResourceType) -> i32 {
    to_32bit_field(resource_type.supported_operations())
}

/// The authorized-operations field of a response: [`authorized_operations`] when the client
/// asked for it (`include`), else [`NOT_REQUESTED`].
pub fn authorized_operations_if(include: bool, resource_type: ResourceType) -> i32 {
    if include {
        authorized_operations(resource_type)
    } else {
        NOT_REQUESTED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_acl_fields_have_kafkas_bits() {
        // Kafka's MetadataResponse for a topic without an authorizer: bits 3-8, 10 and 11.
        assert_eq!(authorized_operations(ResourceType::Topic), 0b1101_1111_1000);
        // DescribeCluster without an authorizer: bits 5, 7-12 (not WRITE, bit 4).
        assert_eq!(
            authorized_operations(ResourceType::Cluster),
            0b1_1111_1010_0000
        );
        assert_eq!(authorized_operations(ResourceType::Group), 0b1101_0100_1000);
        assert_eq!(to_32bit_field(&[]), 0);
        assert_eq!(
            authorized_operations_if(false, ResourceType::Topic),
            NOT_REQUESTED
        );
        for t in [
            ResourceType::Topic,
            ResourceType::Group,
            ResourceType::Cluster,
            ResourceType::TransactionalId,
            ResourceType::DelegationToken,
            ResourceType::User,
        ] {
            assert!(t
                .supported_operations()
                .iter()
                .all(|op| (0..32).contains(&op.code())));
        }
    }
}
