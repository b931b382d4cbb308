//! Kafka's error codes, as they appear on the wire.
//!
//! Modules keep typed errors of their own; a handler converts them to an [`ErrorCode`] only
//! when it writes a response (see design §4). The names are Kafka's, so a code read in a
//! packet capture or a client log can be looked up here and in Kafka's protocol guide.

/// An error code of the Kafka protocol (the `error_code` fields of responses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ErrorCode(pub i16);

impl ErrorCode {
    pub const UNKNOWN_SERVER_ERROR: ErrorCode = ErrorCode(-1);
    pub const NONE: ErrorCode = ErrorCode(0);
    pub const OFFSET_OUT_OF_RANGE: ErrorCode = ErrorCode(1);
    pub const CORRUPT_MESSAGE: ErrorCode = ErrorCode(2);
    pub const UNKNOWN_TOPIC_OR_PARTITION: ErrorCode = ErrorCode(3);
    pub const INVALID_FETCH_SIZE: ErrorCode = ErrorCode(4);
    pub const LEADER_NOT_AVAILABLE: ErrorCode = ErrorCode(5);
    pub const NOT_LEADER_OR_FOLLOWER: ErrorCode = ErrorCode(6);
    pub const REQUEST_TIMED_OUT: ErrorCode = ErrorCode(7);
    pub const BROKER_NOT_AVAILABLE: ErrorCode = ErrorCode(8);
    pub const REPLICA_NOT_AVAILABLE: ErrorCode = ErrorCode(9);
    pub const MESSAGE_TOO_LARGE: ErrorCode = ErrorCode(10);
    pub const STALE_CONTROLLER_EPOCH: ErrorCode = ErrorCode(11);
    pub const OFFSET_METADATA_TOO_LARGE: ErrorCode = ErrorCode(12);
    pub const NETWORK_EXCEPTION: ErrorCode = ErrorCode(13);
    pub const COORDINATOR_LOAD_IN_PROGRESS: ErrorCode = ErrorCode(14);
    pub const COORDINATOR_NOT_AVAILABLE: ErrorCode = ErrorCode(15);
    pub const NOT_COORDINATOR: ErrorCode = ErrorCode(16);
    pub const INVALID_TOPIC_EXCEPTION: ErrorCode = ErrorCode(17);
    pub const RECORD_LIST_TOO_LARGE: ErrorCode = ErrorCode(18);
    pub const NOT_ENOUGH_REPLICAS: ErrorCode = ErrorCode(19);
    pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode = ErrorCode(20);
    pub const INVALID_REQUIRED_ACKS: ErrorCode = ErrorCode(21);
    pub const ILLEGAL_GENERATION: ErrorCode = ErrorCode(22);
    pub const INCONSISTENT_GROUP_PROTOCOL: ErrorCode = ErrorCode(23);
    pub const INVALID_GROUP_ID: ErrorCode = ErrorCode(24);
    pub const UNKNOWN_MEMBER_ID: ErrorCode = ErrorCode(25);
    pub const INVALID_SESSION_TIMEOUT: ErrorCode = ErrorCode(26);
    pub const REBALANCE_IN_PROGRESS: ErrorCode = ErrorCode(27);
    pub const INVALID_COMMIT_OFFSET_SIZE: ErrorCode = ErrorCode(28);
    pub const TOPIC_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(29);
    pub const GROUP_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(30);
    pub const CLUSTER_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(31);
    pub const INVALID_TIMESTAMP: ErrorCode = ErrorCode(32);
    pub const UNSUPPORTED_SASL_MECHANISM: ErrorCode = ErrorCode(33);
    pub const ILLEGAL_SASL_STATE: ErrorCode = ErrorCode(34);
    pub const UNSUPPORTED_VERSION: ErrorCode = ErrorCode(35);
    pub const TOPIC_ALREADY_EXISTS: ErrorCode = ErrorCode(36);
    pub const INVALID_PARTITIONS: ErrorCode = ErrorCode(37);
    pub const INVALID_REPLICATION_FACTOR: ErrorCode = ErrorCode(38);
    pub const INVALID_REPLICA_ASSIGNMENT: ErrorCode = ErrorCode(39);
    pub const INVALID_CONFIG: ErrorCode = ErrorCode(40);
    pub const NOT_CONTROLLER: ErrorCode = ErrorCode(41);
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(42);
    pub const UNSUPPORTED_FOR_MESSAGE_FORMAT: ErrorCode = ErrorCode(43);
    pub const POLICY_VIOLATION: ErrorCode = ErrorCode(44);
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: ErrorCode = ErrorCode(45);
    pub const DUPLICATE_SEQUENCE_NUMBER: ErrorCode = ErrorCode(46);
    pub const INVALID_PRODUCER_EPOCH: ErrorCode = ErrorCode(47);
    pub const INVALID_TXN_STATE: ErrorCode = ErrorCode(48);
    pub const INVALID_PRODUCER_ID_MAPPING: ErrorCode = ErrorCode(49);
    pub const INVALID_TRANSACTION_TIMEOUT: ErrorCode = ErrorCode(50);
    pub const CONCURRENT_TRANSACTIONS: ErrorCode = ErrorCode(51);
    pub const TRANSACTION_COORDINATOR_FENCED: ErrorCode = ErrorCode(52);
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(53);
    pub const SECURITY_DISABLED: ErrorCode = ErrorCode(54);
    pub const OPERATION_NOT_ATTEMPTED: ErrorCode = ErrorCode(55);
    pub const KAFKA_STORAGE_ERROR: ErrorCode = ErrorCode(56);
    pub const LOG_DIR_NOT_FOUND: ErrorCode = ErrorCode(57);
    pub const SASL_AUTHENTICATION_FAILED: ErrorCode = ErrorCode(58);
    pub const UNKNOWN_PRODUCER_ID: ErrorCode = ErrorCode(59);
    pub const REASSIGNMENT_IN_PROGRESS: ErrorCode = ErrorCode(60);
    pub const DELEGATION_TOKEN_AUTH_DISABLED: ErrorCode = ErrorCode(61);
    pub const DELEGATION_TOKEN_NOT_FOUND: ErrorCode = ErrorCode(62);
    pub const DELEGATION_TOKEN_OWNER_MISMATCH: ErrorCode = ErrorCode(63);
    pub const DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: ErrorCode = ErrorCode(64);
    pub const DELEGATION_TOKEN_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(65);
    pub const DELEGATION_TOKEN_EXPIRED: ErrorCode = ErrorCode(66);
    pub const INVALID_PRINCIPAL_TYPE: ErrorCode = ErrorCode(67);
    pub const NON_EMPTY_GROUP: ErrorCode = ErrorCode(68);
    pub const GROUP_ID_NOT_FOUND: ErrorCode = ErrorCode(69);
    pub const FETCH_SESSION_ID_NOT_FOUND: ErrorCode = ErrorCode(70);
    pub const INVALID_FETCH_SESSION_EPOCH: ErrorCode = ErrorCode(71);
    pub const LISTENER_NOT_FOUND: ErrorCode = ErrorCode(72);
    pub const TOPIC_DELETION_DISABLED: ErrorCode = ErrorCode(73);
    pub const FENCED_LEADER_EPOCH: ErrorCode = ErrorCode(74);
    pub const UNKNOWN_LEADER_EPOCH: ErrorCode = ErrorCode(75);
    pub const UNSUPPORTED_COMPRESSION_TYPE: ErrorCode = ErrorCode(76);
    pub const STALE_BROKER_EPOCH: ErrorCode = ErrorCode(77);
    pub const OFFSET_NOT_AVAILABLE: ErrorCode = ErrorCode(78);
    pub const MEMBER_ID_REQUIRED: ErrorCode = ErrorCode(79);
    pub const PREFERRED_LEADER_NOT_AVAILABLE: ErrorCode = ErrorCode(80);
    pub const GROUP_MAX_SIZE_REACHED: ErrorCode = ErrorCode(81);
    pub const FENCED_INSTANCE_ID: ErrorCode = ErrorCode(82);
    pub const ELIGIBLE_LEADERS_NOT_AVAILABLE: ErrorCode = ErrorCode(83);
    pub const ELECTION_NOT_NEEDED: ErrorCode = ErrorCode(84);
    pub const NO_REASSIGNMENT_IN_PROGRESS: ErrorCode = ErrorCode(85);
    pub const GROUP_SUBSCRIBED_TO_TOPIC: ErrorCode = ErrorCode(86);
    pub const INVALID_RECORD: ErrorCode = ErrorCode(87);
    pub const UNSTABLE_OFFSET_COMMIT: ErrorCode = ErrorCode(88);
    pub const THROTTLING_QUOTA_EXCEEDED: ErrorCode = ErrorCode(89);
    pub const PRODUCER_FENCED: ErrorCode = ErrorCode(90);
    pub const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode(91);
    pub const DUPLICATE_RESOURCE: ErrorCode = ErrorCode(92);
    pub const UNACCEPTABLE_CREDENTIAL: ErrorCode = ErrorCode(93);
    pub const INCONSISTENT_VOTER_SET: ErrorCode = ErrorCode(94);
    pub const INVALID_UPDATE_VERSION: ErrorCode = ErrorCode(95);
    pub const FEATURE_UPDATE_FAILED: ErrorCode = ErrorCode(96);
    pub const PRINCIPAL_DESERIALIZATION_FAILURE: ErrorCode = ErrorCode(97);
    pub const SNAPSHOT_NOT_FOUND: ErrorCode = ErrorCode(98);
    pub const POSITION_OUT_OF_RANGE: ErrorCode = ErrorCode(99);
    pub const UNKNOWN_TOPIC_ID: ErrorCode = ErrorCode(100);
    pub const DUPLICATE_BROKER_REGISTRATION: ErrorCode = ErrorCode(101);
    pub const BROKER_ID_NOT_REGISTERED: ErrorCode = ErrorCode(102);
    pub const INCONSISTENT_TOPIC_ID: ErrorCode = ErrorCode(103);
    pub const INCONSISTENT_CLUSTER_ID: ErrorCode = ErrorCode(104);
    pub const TRANSACTIONAL_ID_NOT_FOUND: ErrorCode = ErrorCode(105);
    pub const FETCH_SESSION_TOPIC_ID_ERROR: ErrorCode = ErrorCode(106);
    pub const INELIGIBLE_REPLICA: ErrorCode = ErrorCode(107);
    pub const NEW_LEADER_ELECTED: ErrorCode = ErrorCode(108);
    pub const OFFSET_MOVED_TO_TIERED_STORAGE: ErrorCode = ErrorCode(109);
    pub const FENCED_MEMBER_EPOCH: ErrorCode = ErrorCode(110);
    pub const UNRELEASED_INSTANCE_ID: ErrorCode = ErrorCode(111);
    pub const UNSUPPORTED_ASSIGNOR: ErrorCode = ErrorCode(112);
    pub const STALE_MEMBER_EPOCH: ErrorCode = ErrorCode(113);
    pub const MISMATCHED_ENDPOINT_TYPE: ErrorCode = ErrorCode(114);
    pub const UNSUPPORTED_ENDPOINT_TYPE: ErrorCode = ErrorCode(115);
    pub const UNKNOWN_CONTROLLER_ID: ErrorCode = ErrorCode(116);
    pub const UNKNOWN_SUBSCRIPTION_ID: ErrorCode = ErrorCode(117);
    pub const TELEMETRY_TOO_LARGE: ErrorCode = ErrorCode(118);
    pub const INVALID_REGISTRATION: ErrorCode = ErrorCode(119);
    pub const TRANSACTION_ABORTABLE: ErrorCode = ErrorCode(120);

    /// The code as written on the wire.
    pub const fn code(self) -> i16 {
        self.0
    }

    /// True for `NONE`.
    pub const fn is_ok(self) -> bool {
        self.0 == 0
    }

    /// Kafka's name for the code, or `None` for a code this table does not know.
    pub fn name(self) -> Option<&'static str> {
        NAMES
            .binary_search_by_key(&self.0, |(code, _)| *code)
            .ok()
            .map(|i| NAMES[i].1)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "error code {}", self.0),
        }
    }
}

/// Every known code with its name, sorted by code.
const NAMES: &[(i16, &str)] = &[
    (-1, "UNKNOWN_SERVER_ERROR"),
    (0, "NONE"),
    (1, "OFFSET_OUT_OF_RANGE"),
    (2, "CORRUPT_MESSAGE"),
    (3, "UNKNOWN_TOPIC_OR_PARTITION"),
    (4, "INVALID_FETCH_SIZE"),
    (5, "LEADER_NOT_AVAILABLE"),
    (6, "NOT_LEADER_OR_FOLLOWER"),
    (7, "REQUEST_TIMED_OUT"),
    (8, "BROKER_NOT_AVAILABLE"),
    (9, "REPLICA_NOT_AVAILABLE"),
    (10, "MESSAGE_TOO_LARGE"),
    (11, "STALE_CONTROLLER_EPOCH"),
    (12, "OFFSET_METADATA_TOO_LARGE"),
    (13, "NETWORK_EXCEPTION"),
    (14, "COORDINATOR_LOAD_IN_PROGRESS"),
    (15, "COORDINATOR_NOT_AVAILABLE"),
    (16, "NOT_COORDINATOR"),
    (17, "INVALID_TOPIC_EXCEPTION"),
    (18, "RECORD_LIST_TOO_LARGE"),
    (19, "NOT_ENOUGH_REPLICAS"),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND"),
    (21, "INVALID_REQUIRED_ACKS"),
    (22, "ILLEGAL_GENERATION"),
    (23, "INCONSISTENT_GROUP_PROTOCOL"),
    (24, "INVALID_GROUP_ID"),
    (25, "UNKNOWN_MEMBER_ID"),
    (26, "INVALID_SESSION_TIMEOUT"),
    (27, "REBALANCE_IN_PROGRESS"),
    (28, "INVALID_COMMIT_OFFSET_SIZE"),
    (29, "TOPIC_AUTHORIZATION_FAILED"),
    (30, "GROUP_AUTHORIZATION_FAILED"),
    (31, "CLUSTER_AUTHORIZATION_FAILED"),
    (32, "INVALID_TIMESTAMP"),
    (33, "UNSUPPORTED_SASL_MECHANISM"),
    (34, "ILLEGAL_SASL_STATE"),
    (35, "UNSUPPORTED_VERSION"),
    (36, "TOPIC_ALREADY_EXISTS"),
    (37, "INVALID_PARTITIONS"),
    (38, "INVALID_REPLICATION_FACTOR"),
    (39, "INVALID_REPLICA_ASSIGNMENT"),
    (40, "INVALID_CONFIG"),
    (41, "NOT_CONTROLLER"),
    (42, "INVALID_REQUEST"),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT"),
    (44, "POLICY_VIOLATION"),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
    (46, "DUPLICATE_SEQUENCE_NUMBER"),
    (47, "INVALID_PRODUCER_EPOCH"),
    (48, "INVALID_TXN_STATE"),
    (49, "INVALID_PRODUCER_ID_MAPPING"),
    (50, "INVALID_TRANSACTION_TIMEOUT"),
    (51, "CONCURRENT_TRANSACTIONS"),
    (52, "TRANSACTION_COORDINATOR_FENCED"),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    (54, "SECURITY_DISABLED"),
    (55, "OPERATION_NOT_ATTEMPTED"),
    (56, "KAFKA_STORAGE_ERROR"),
    (57, "LOG_DIR_NOT_FOUND"),
    (58, "SASL_AUTHENTICATION_FAILED"),
    (59, "UNKNOWN_PRODUCER_ID"),
    (60, "REASSIGNMENT_IN_PROGRESS"),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED"),
    (62, "DELEGATION_TOKEN_NOT_FOUND"),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH"),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED"),
    (66, "DELEGATION_TOKEN_EXPIRED"),
    (67, "INVALID_PRINCIPAL_TYPE"),
    (68, "NON_EMPTY_GROUP"),
    (69, "GROUP_ID_NOT_FOUND"),
    (70, "FETCH_SESSION_ID_NOT_FOUND"),
    (71, "INVALID_FETCH_SESSION_EPOCH"),
    (72, "LISTENER_NOT_FOUND"),
    (73, "TOPIC_DELETION_DISABLED"),
    (74, "FENCED_LEADER_EPOCH"),
    (75, "UNKNOWN_LEADER_EPOCH"),
    (76, "UNSUPPORTED_COMPRESSION_TYPE"),
    (77, "STALE_BROKER_EPOCH"),
    (78, "OFFSET_NOT_AVAILABLE"),
    (79, "MEMBER_ID_REQUIRED"),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE"),
    (81, "GROUP_MAX_SIZE_REACHED"),
    (82, "FENCED_INSTANCE_ID"),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE"),
    (84, "ELECTION_NOT_NEEDED"),
    (85, "NO_REASSIGNMENT_IN_PROGRESS"),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC"),
    (87, "INVALID_RECORD"),
    (88, "UNSTABLE_OFFSET_COMMIT"),
    (89, "THROTTLING_QUOTA_EXCEEDED"),
    (90, "PRODUCER_FENCED"),
    (91, "RESOURCE_NOT_FOUND"),
    (92, "DUPLICATE_RESOURCE"),
    (93, "UNACCEPTABLE_CREDENTIAL"),
    (94, "INCONSISTENT_VOTER_SET"),
    (95, "INVALID_UPDATE_VERSION"),
    (96, "FEATURE_UPDATE_FAILED"),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE"),
    (98, "SNAPSHOT_NOT_FOUND"),
    (99, "POSITION_OUT_OF_RANGE"),
    (100, "UNKNOWN_TOPIC_ID"),
    (101, "DUPLICATE_BROKER_REGISTRATION"),
    (102, "BROKER_ID_NOT_REGISTERED"),
    (103, "INCONSISTENT_TOPIC_ID"),
    (104, "INCONSISTENT_CLUSTER_ID"),
    (105, "TRANSACTIONAL_ID_NOT_FOUND"),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR"),
    (107, "INELIGIBLE_REPLICA"),
    (108, "NEW_LEADER_ELECTED"),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE"),
    (110, "FENCED_MEMBER_EPOCH"),
    (111, "UNRELEASED_INSTANCE_ID"),
    (112, "UNSUPPORTED_ASSIGNOR"),
    (113, "STALE_MEMBER_EPOCH"),
    (114, "MISMATCHED_ENDPOINT_TYPE"),
    (115, "UNSUPPORTED_ENDPOINT_TYPE"),
    (116, "UNKNOWN_CONTROLLER_ID"),
    (117, "UNKNOWN_SUBSCRIPTION_ID"),
    (118, "TELEMETRY_TOO_LARGE"),
    (119, "INVALID_REGISTRATION"),
    (120, "TRANSACTION_ABORTABLE"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sorted_and_match_their_constants() {
        for pair in NAMES.windows(2) {
            assert!(pair[0].0 < pair[1].0, "NAMES must stay sorted by code");
        }
        assert_eq!(
            ErrorCode::UNSUPPORTED_VERSION.name(),
            Some("UNSUPPORTED_VERSION")
        );
        assert_eq!(
            ErrorCode::UNKNOWN_SERVER_ERROR.name(),
            Some("UNKNOWN_SERVER_ERROR")
        );
        assert_eq!(ErrorCode(35).code(), 35);
        assert_eq!(ErrorCode(30_000).name(), None);
        assert_eq!(
            ErrorCode::CORRUPT_MESSAGE.to_string(),
            "CORRUPT_MESSAGE (2)"
        );
    }
}
