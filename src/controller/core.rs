//! The controller core: Kafka's `QuorumController` decisions as an IO-free state machine.
//! It takes requests (broker registrations and heartbeats, topic and config changes, producer
//! id blocks, partition leaders' ISR changes), committed metadata batches and the time, and
//! gives back the records to write and the replies to send; a driver on `rt` carries them to
//! the metadata log and the wire.
//!
//! Shape (the house template: inputs with `now_ms`, outputs collected in [`Ready`]):
//! - [`Controller::replay_committed`] applies every committed batch, on every controller, to
//!   the committed image;
//! - [`Controller::become_active`] makes this controller the one that writes, once its raft
//!   replica leads and it has applied everything before its epoch's first offset: the
//!   working image starts as the committed one, and every broker gets a fresh session;
//!   new partitions go only to brokers heard from since (a registration, a heartbeat, or the
//!   broker of this controller's own process) while they are enough for the replication
//!   factor, since a fresh session keeps a broker that died with the previous controller
//!   unfenced for a whole `broker.session.timeout.ms`;
//! - [`Controller::handle`] decides a request against the working image (committed plus this
//!   controller's own uncommitted writes), appends its records to the working image as a
//!   [`Proposal`] at the next offsets, and defers the reply until those offsets commit. A
//!   request that writes nothing is answered once every earlier write has committed, as
//!   Kafka's controller completes its read-after-write events, so no reply ever reveals
//!   state that could still be lost;
//! - [`Controller::tick`] fences one broker whose session expired (Kafka fences one per pass,
//!   so a controller that was paused does not fence the whole cluster at once);
//! - [`Controller::become_inactive`] drops the working image and answers every waiting reply
//!   NOT_CONTROLLER.
//!
//! Invariants (release assertions):
//! - the working image is the committed image plus the pending proposals, in order: every
//!   committed batch of the active controller is the proposal at the front, record for
//!   record;
//! - proposals take consecutive offsets from the next offset handed over at activation, and
//!   a broker's epoch is the offset of its RegisterBrokerRecord (Kafka's rule), known before
//!   the record is written;
//! - a reply is released only once the committed offset reaches the working offset it was
//!   decided at;
//! - every queue (pending proposals, deferred replies) has a named bound; a request past it
//!   is refused at once, not queued.
//!
//! Partitions (Kafka's `ReplicationControlManager` and `PartitionChangeBuilder`):
//! - a leader is elected only from the ISR, the first usable replica in replica order, or,
//!   when the ISR is empty, from the ELR (KIP-966), whose member then becomes the whole ISR;
//!   a broker fenced or shutting down leaves every ISR it is in, the last member too (it
//!   joins the ELR, so the ISR may be empty); a broker that registers without naming the
//!   epoch of a clean stop leaves every ELR; once both are empty, the last leader (kept as
//!   the last known ELR when the ISR emptied) leads alone, RECOVERING, when it is back
//!   (KIP-966's balanced recovery);
//! - the ISR changes otherwise only by AlterPartition from the partition's leader at its
//!   current leader and partition epochs, to a set of eligible replicas that holds the leader
//!   (KIP-497, KIP-841, KIP-903);
//! - the ELR (KIP-966) is empty while the ISR has at least the topic's `min.insync.replicas`;
//!   below it, the members an ISR change removes join the ELR and those it adds leave it, and a
//!   change of `min.insync.replicas` clears the ELRs it concerns (as Kafka does).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use crate::broker::topics::{validate_name, PARTITIONS_PER_TOPIC_MAX};
use crate::protocol::allocate_producer_ids::AllocateProducerIdsRequest;
use crate::protocol::alter_partition::{AlterPartitionRequest, AlterPartitionRequestPartition};
use crate::protocol::broker_heartbeat::BrokerHeartbeatRequest;
use crate::protocol::broker_registration::BrokerRegistrationRequest;
use crate::protocol::wire::Uuid;

use super::image::{ConfigResource, MetadataImage, PartitionRegistration};
use super::records::{
    BrokerEndpoint, BrokerFeature, BrokerRegistrationChangeRecord, ConfigRecord,
    FeatureLevelRecord, MetadataRecord, PartitionChangeRecord, PartitionRecord, ProducerIdsRecord,
    RegisterBrokerRecord, RemoveTopicRecord, TopicRecord, CONFIG_RESOURCE_TOPIC,
    DIRECTORY_MIGRATING, DIRECTORY_UNASSIGNED, FENCED_CHANGE_FENCE, FENCED_CHANGE_NONE,
    FENCED_CHANGE_UNFENCE, LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING, LEADER_UNCHANGED,
    METADATA_VERSION_FEATURE, METADATA_VERSION_LEVEL, NO_LEADER,
};

/// Ids in one producer-id block (Kafka's `ProducerIdManager` block size).
pub const PRODUCER_ID_BLOCK_SIZE: i32 = 1000;
/// Proposals written but not yet committed; a request that would write more is refused.
pub const PENDING_PROPOSALS_MAX: usize = 1024;
/// Replies waiting for their offset to commit.
pub const DEFERRED_REPLIES_MAX: usize = 4096;
/// Records one proposal may hold: a CreateTopics of many partitions is one atomic batch, so
/// one request's records must fit in one batch of the metadata log. A part of a request that
/// would overflow it is refused (POLICY_VIOLATION, as Kafka refuses an excessively large
/// number of partitions per request).
pub const PROPOSAL_RECORDS_MAX: usize = crate::raft::core::PROPOSE_RECORDS_MAX;
/// Topics one CreateTopics, DeleteTopics or CreatePartitions may name.
pub const TOPICS_PER_REQUEST_MAX: usize = 1000;
/// The most replicas one partition may have. Kafka bounds the factor only by the number of
/// brokers; a bound keeps each partition's records, its ISR changes and its leader's
/// per-follower state small, and 7 is above every factor used in practice (3 is the norm, 5
/// for the most critical topics: with `min.insync.replicas` 3 it survives two failures).
pub const REPLICATION_FACTOR_MAX: i16 = 7;
/// The config naming the ISR size below which a partition's acks=all writes are refused and
/// its ELR is kept (KIP-966).
pub const MIN_INSYNC_REPLICAS_CONFIG: &str = "min.insync.replicas";
/// The metadata topic's name, which no client may create.
pub const METADATA_TOPIC_NAME: &str = "__cluster_metadata";

/// [`ControllerConfig::proposal_bytes_max`] by default: the quorum's default fetch size less
/// room for the batch's framing and each record's header.
pub const PROPOSAL_BYTES_DEFAULT: usize = (1 << 20) - (128 << 10);
/// How often the active controller looks for leaderless partitions whose topic allows an
/// unclean election (the config may have changed since they lost their leader).
pub const UNCLEAN_ELECTION_CHECK_MS: u64 = 1_000;
/// The topic config that allows an unclean election.
pub const UNCLEAN_LEADER_ELECTION_CONFIG: &str = "unclean.leader.election.enable";

const _: () = assert!(PENDING_PROPOSALS_MAX <= DEFERRED_REPLIES_MAX);
const _: () = assert!(PARTITIONS_PER_TOPIC_MAX as usize * 2 <= PROPOSAL_RECORDS_MAX);

/// The controller's settings.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// This controller's node id.
    pub node_id: i32,
    /// The cluster id a registering broker must present.
    pub cluster_id: String,
    /// `broker.session.timeout.ms`: a broker without a heartbeat this long is fenced.
    pub session_timeout_ms: u64,
    /// `num.partitions`, for a CreateTopics that asks for -1.
    pub num_partitions: i32,
    /// `default.replication.factor`, for a CreateTopics that asks for -1.
    pub default_replication_factor: i16,
    /// `min.insync.replicas` of the controller's static config: a topic's min ISR when
    /// neither the topic nor the cluster-wide broker default (both in the image) sets it.
    pub min_insync_replicas: i32,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    /// `unclean.leader.election.enable` of the controller's static config: whether a
    /// partition without any ISR or ELR member left may elect any live replica (losing what
    /// it lacks), when neither the topic nor the cluster-wide broker default sets it.
    pub unclean_leader_election_enable: bool,
    /// `auto.leader.rebalance.enable`: leaders move back to their preferred replicas.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds`, in ms: how often the imbalance is checked.
    pub leader_imbalance_check_interval_ms: u64,
    /// `leader.imbalance.per.broker.percentage`: the share of a broker's preferred
    /// partitions led elsewhere above which they move back.
    pub leader_imbalance_per_broker_percentage: u32,
    /// Seeds the topic ids this controller draws (from `rt`'s randomness in the driver).
    pub seed: u64,
    /// The most bytes of encoded records one proposal may hold: what one batch of the
    /// metadata log may carry (the quorum's fetch size, less room for the batch's framing).
    pub proposal_bytes_max: usize,
    /// The broker running in this controller's own process (a combined node), as (id,
    /// incarnation id): its registration is accepted even while an older incarnation's
    /// session has not expired, since that incarnation ran in a process that is gone (a
    /// restarted combined node would otherwise wait out `broker.session.timeout.ms`).
    pub colocated_broker: Option<(i32, Uuid)>,
    /// Deliberate bugs for the simulation's checker tests; all off in every real config.
    pub bugs: ControllerBugs,
}

/// Bugs the simulation plants to show its image checker fires.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControllerBugs {
    /// A standby applies each PartitionChangeRecord twice (a loader that replays a batch it
    /// already applied): the leader and partition epochs move twice.
    pub apply_partition_changes_twice: bool,
    /// An election takes the first live replica of the assignment, in the ISR or not (and
    /// puts it in the ISR): a replica that lacks acknowledged records may lead (lost-write).
    pub elect_outside_isr: bool,
}

impl ControllerConfig {
    /// Kafka's defaults, but for the broker session's (Samsa's, see
    /// [`crate::broker::config::BROKER_SESSION_TIMEOUT_MS_DEFAULT`]); the cluster id and node
    /// id are the caller's.
    pub fn new(node_id: i32, cluster_id: &str, seed: u64) -> ControllerConfig {
        ControllerConfig {
            node_id,
            cluster_id: cluster_id.to_string(),
            session_timeout_ms: crate::broker::config::BROKER_SESSION_TIMEOUT_MS_DEFAULT,
            num_partitions: 1,
            default_replication_factor: 1,
            min_insync_replicas: 1,
            delete_topic_enable: true,
            unclean_leader_election_enable: false,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_ms: 300_000,
            leader_imbalance_per_broker_percentage: 10,
            seed,
            proposal_bytes_max: PROPOSAL_BYTES_DEFAULT,
            colocated_broker: None,
            bugs: ControllerBugs::default(),
        }
    }
}

/// Checks a resource's whole set of config overrides, as the broker would resolve them
/// (topic configs over broker defaults, broker configs by their types). The controller
/// decides; the rules live with the configs themselves.
pub trait ConfigPolicy: std::fmt::Debug + Send + Sync {
    fn check(
        &self,
        resource: &ConfigResource,
        overrides: &BTreeMap<String, String>,
    ) -> Result<(), String>;
}

/// Why a request was refused. Each maps to one Kafka error code at the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControllerError {
    /// This controller is not the active one (or stopped being it before the reply).
    NotController,
    BrokerIdNotRegistered {
        broker_id: i32,
    },
    StaleBrokerEpoch {
        broker_id: i32,
        epoch: i64,
        current: i64,
    },
    /// Another incarnation of this id holds a live session.
    DuplicateBrokerRegistration {
        broker_id: i32,
    },
    InconsistentClusterId {
        ours: String,
        theirs: String,
    },
    /// The broker cannot run at the cluster's metadata.version.
    UnsupportedFeature {
        broker_id: i32,
        reason: String,
    },
    InvalidRequest {
        reason: String,
    },
    InvalidTopic {
        name: String,
        reason: String,
    },
    TopicAlreadyExists {
        name: String,
    },
    UnknownTopic {
        name: String,
    },
    UnknownTopicId {
        id: Uuid,
    },
    /// AlterPartition names a partition its topic does not have.
    UnknownPartition {
        topic: String,
        partition: i32,
    },
    /// AlterPartition from a broker that does not lead the partition.
    NotLeader {
        broker_id: i32,
        partition: String,
        leader: i32,
    },
    /// AlterPartition at a leader or partition epoch newer than this controller knows: the
    /// leader learned it from a newer controller, so this one is no longer active.
    StaleController {
        partition: String,
        reason: String,
    },
    /// AlterPartition at a leader epoch older than the partition's.
    FencedLeaderEpoch {
        partition: String,
        epoch: i32,
        current: i32,
    },
    /// AlterPartition at a partition epoch older than the partition's: it changes an ISR
    /// that is no longer the current one.
    InvalidUpdateVersion {
        partition: String,
        epoch: i32,
        current: i32,
    },
    /// A member of a requested ISR may not be in it: not registered, fenced, shutting down,
    /// or named at another broker epoch than its registration's (KIP-841, KIP-903).
    IneligibleReplica {
        partition: String,
        broker_id: i32,
        reason: String,
    },
    InvalidPartitions {
        name: String,
        reason: String,
    },
    InvalidReplicationFactor {
        name: String,
        reason: String,
    },
    InvalidReplicaAssignment {
        name: String,
        reason: String,
    },
    InvalidConfig {
        resource: ConfigResource,
        reason: String,
    },
    TopicDeletionDisabled {
        name: String,
    },
    ProducerIdsExhausted,
    /// The request's records would not fit in one batch of the metadata log.
    TooLarge {
        name: String,
        records: usize,
        bytes: usize,
    },
    /// A queue of the controller is full; the client retries.
    Overloaded {
        what: &'static str,
        limit: usize,
    },
    /// ElectLeaders: the partition already has the leader the election would choose.
    ElectionNotNeeded {
        partition: String,
    },
    /// ElectLeaders (preferred): the preferred replica cannot lead now.
    PreferredLeaderNotAvailable {
        partition: String,
        reason: String,
    },
    /// ElectLeaders (unclean): no live replica to elect.
    EligibleLeadersNotAvailable {
        partition: String,
    },
}

impl std::fmt::Display for ControllerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use ControllerError as E;
        match self {
            E::NotController => write!(f, "this controller is not the active controller"),
            E::BrokerIdNotRegistered { broker_id } => {
                write!(f, "broker {broker_id} is not registered")
            }
            E::StaleBrokerEpoch {
                broker_id,
                epoch,
                current,
            } => write!(
                f,
                "broker {broker_id}: epoch {epoch} is stale, the registered epoch is {current}"
            ),
            E::DuplicateBrokerRegistration { broker_id } => write!(
                f,
                "another incarnation of broker {broker_id} is registered and its session has not expired"
            ),
            E::InconsistentClusterId { ours, theirs } => write!(
                f,
                "the broker's cluster id {theirs} is not this cluster's {ours}"
            ),
            E::UnsupportedFeature { broker_id, reason } => {
                write!(f, "broker {broker_id}: {reason}")
            }
            E::InvalidRequest { reason } => write!(f, "{reason}"),
            E::InvalidTopic { name, reason } => write!(f, "topic '{name}': {reason}"),
            E::TopicAlreadyExists { name } => write!(f, "topic '{name}' already exists"),
            E::UnknownTopic { name } => write!(f, "topic '{name}' does not exist"),
            E::UnknownTopicId { id } => write!(f, "no topic has id {}", id.to_base64()),
            E::UnknownPartition { topic, partition } => {
                write!(f, "topic '{topic}' has no partition {partition}")
            }
            E::NotLeader {
                broker_id,
                partition,
                leader,
            } => write!(
                f,
                "{partition}: broker {broker_id} is not its leader (the leader is {leader})"
            ),
            E::StaleController { partition, reason } => write!(
                f,
                "{partition}: {reason}, newer than this controller's: it is no longer the active controller"
            ),
            E::FencedLeaderEpoch {
                partition,
                epoch,
                current,
            } => write!(
                f,
                "{partition}: leader epoch {epoch} is older than the current {current}"
            ),
            E::InvalidUpdateVersion {
                partition,
                epoch,
                current,
            } => write!(
                f,
                "{partition}: partition epoch {epoch} is older than the current {current}"
            ),
            E::IneligibleReplica {
                partition,
                broker_id,
                reason,
            } => write!(
                f,
                "{partition}: broker {broker_id} may not join the ISR: {reason}"
            ),
            E::InvalidPartitions { name, reason }
            | E::InvalidReplicationFactor { name, reason }
            | E::InvalidReplicaAssignment { name, reason } => write!(f, "topic '{name}': {reason}"),
            E::InvalidConfig { resource, reason } => {
                write!(f, "{}: {reason}", describe_resource(resource))
            }
            E::TopicDeletionDisabled { name } => write!(
                f,
                "topic '{name}' cannot be deleted: delete.topic.enable is false"
            ),
            E::ProducerIdsExhausted => write!(f, "the producer id space is exhausted"),
            E::TooLarge {
                name,
                records,
                bytes,
            } => write!(
                f,
                "{name}: excessively large request: with it the request would write {records} records of {bytes} bytes, more than one metadata batch holds ({PROPOSAL_RECORDS_MAX} records)"
            ),
            E::Overloaded { what, limit } => {
                write!(f, "the controller has {limit} {what} waiting already")
            }
            E::ElectionNotNeeded { partition } => {
                write!(f, "{partition}: the leader the election would choose leads already")
            }
            E::PreferredLeaderNotAvailable { partition, reason } => {
                write!(f, "{partition}: the preferred replica cannot lead: {reason}")
            }
            E::EligibleLeadersNotAvailable { partition } => {
                write!(f, "{partition}: no live replica can lead")
            }
        }
    }
}

impl std::error::Error for ControllerError {}

fn describe_resource(resource: &ConfigResource) -> String {
    match (resource.resource_type, resource.name.as_str()) {
        (super::records::CONFIG_RESOURCE_TOPIC, name) => format!("topic '{name}'"),
        (_, "") => "the cluster-wide broker default".to_string(),
        (_, name) => format!("broker {name}"),
    }
}

/// A topic to create: CreateTopics' CreatableTopic with its defaults still open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    /// -1: `num.partitions` (must be -1 with explicit assignments).
    pub num_partitions: i32,
    /// -1: `default.replication.factor` (must be -1 with explicit assignments).
    pub replication_factor: i16,
    /// Explicit replicas per partition index.
    pub assignments: Vec<(i32, Vec<i32>)>,
    /// Config overrides (a `None` value is refused, as Kafka refuses it).
    pub configs: Vec<(String, Option<String>)>,
}

/// A topic named by DeleteTopics: by name (v0-5 and v6 with a null id) or by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopicRef {
    Name(String),
    Id(Uuid),
}

/// One change to one config of a resource (IncrementalAlterConfigs' operations; AlterConfigs
/// is a Set of every given key plus a Delete of every other).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigOp {
    Set(String, String),
    Delete(String),
    /// Adds items to a list config, starting from the override or else `default`.
    Append {
        key: String,
        items: Vec<String>,
        default: String,
    },
    /// Removes items from a list config, starting from the override or else `default`.
    Subtract {
        key: String,
        items: Vec<String>,
        default: String,
    },
    /// Removes every override not named by a Set of the same request (AlterConfigs).
    DeleteOthers,
    /// An operation the wire handler already found invalid (a null value, an unknown
    /// operation): the resource is refused with this error and nothing of it changes.
    Refuse(ControllerError),
}

/// CreatePartitions for one topic: its new total count and, optionally, the replicas of each
/// new partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewPartitions {
    pub name: String,
    pub count: i32,
    pub assignments: Option<Vec<Vec<i32>>>,
}

/// A deleted topic's name and id.
pub type DeletedTopic = Result<(String, Uuid), ControllerError>;

/// A request to the controller.
#[derive(Clone, Debug)]
pub enum Request {
    RegisterBroker(BrokerRegistrationRequest),
    Heartbeat(BrokerHeartbeatRequest),
    CreateTopics {
        topics: Vec<NewTopic>,
        validate_only: bool,
    },
    DeleteTopics(Vec<TopicRef>),
    CreatePartitions {
        topics: Vec<NewPartitions>,
        validate_only: bool,
    },
    AlterConfigs {
        changes: Vec<(ConfigResource, Vec<ConfigOp>)>,
        validate_only: bool,
    },
    AllocateProducerIds(AllocateProducerIdsRequest),
    /// A partition leader's ISR changes (AlterPartition). The ISR of each partition is
    /// `new_isr_with_epochs` (v3) or, when that is empty, `new_isr` (v2, every broker epoch
    /// -1: not checked).
    AlterPartition(AlterPartitionRequest),
    /// ElectLeaders: the partitions named (None: every partition) get the leader the
    /// election type chooses.
    ElectLeaders {
        election: ElectionType,
        partitions: Option<Vec<(String, Vec<i32>)>>,
    },
    /// The records of a data directory of the previous release
    /// ([`super::migration::LegacyDirectory::records`]), written as one batch onto a log
    /// that holds no topics, configs or producer ids yet.
    Migrate(Vec<MetadataRecord>),
}

/// What a heartbeat learns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeartbeatReply {
    pub is_caught_up: bool,
    pub is_fenced: bool,
    pub should_shut_down: bool,
}

/// A created topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreatedTopic {
    pub id: Uuid,
    pub num_partitions: i32,
    pub replication_factor: i16,
}

/// A partition's state after an AlterPartition: what the leader takes as committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlteredPartition {
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub leader_recovery_state: i8,
    pub partition_epoch: i32,
}

impl AlteredPartition {
    fn of(p: &PartitionRegistration) -> AlteredPartition {
        AlteredPartition {
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            isr: p.isr.clone(),
            leader_recovery_state: p.leader_recovery_state,
            partition_epoch: p.partition_epoch,
        }
    }
}

/// AlterPartition's outcome: per topic id, per partition index, in the request's order.
pub type AlterPartitionResults = Vec<(Uuid, Vec<(i32, Result<AlteredPartition, ControllerError>)>)>;

/// The answer to a request, in the request's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    RegisterBroker(Result<i64, ControllerError>),
    Heartbeat(Result<HeartbeatReply, ControllerError>),
    CreateTopics(Vec<(String, Result<CreatedTopic, ControllerError>)>),
    DeleteTopics(Vec<(TopicRef, DeletedTopic)>),
    CreatePartitions(Vec<(String, Result<(), ControllerError>)>),
    AlterConfigs(Vec<(ConfigResource, Result<(), ControllerError>)>),
    /// The first id of the block and its length.
    AllocateProducerIds(Result<(i64, i32), ControllerError>),
    /// Refused whole (a stale requester, NOT_CONTROLLER), or each partition's outcome.
    AlterPartition(Result<AlterPartitionResults, ControllerError>),
    /// Per topic, each partition's outcome.
    ElectLeaders(ElectLeadersResults),
    Migrate(Result<(), ControllerError>),
}

/// ElectLeaders' outcome: per topic name, per partition index.
pub type ElectLeadersResults = Vec<(String, Vec<(i32, Result<(), ControllerError>)>)>;

/// ElectLeaders' election type (KIP-460).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectionType {
    /// The first replica of the assignment, if it is in the ISR and live.
    Preferred,
    /// A leader from the ISR or ELR if any is live, else any live replica (records it lacks
    /// are lost), for partitions without a leader.
    Unclean,
}

impl Reply {
    /// The same request refused whole with `error` (NOT_CONTROLLER, overload).
    fn refused(request: &Request, error: ControllerError) -> Reply {
        match request {
            Request::RegisterBroker(_) => Reply::RegisterBroker(Err(error)),
            Request::Heartbeat(_) => Reply::Heartbeat(Err(error)),
            Request::CreateTopics { topics, .. } => Reply::CreateTopics(
                topics
                    .iter()
                    .map(|t| (t.name.clone(), Err(error.clone())))
                    .collect(),
            ),
            Request::DeleteTopics(topics) => Reply::DeleteTopics(
                topics
                    .iter()
                    .map(|t| (t.clone(), Err(error.clone())))
                    .collect(),
            ),
            Request::CreatePartitions { topics, .. } => Reply::CreatePartitions(
                topics
                    .iter()
                    .map(|t| (t.name.clone(), Err(error.clone())))
                    .collect(),
            ),
            Request::AlterConfigs { changes, .. } => Reply::AlterConfigs(
                changes
                    .iter()
                    .map(|c| (c.0.clone(), Err(error.clone())))
                    .collect(),
            ),
            Request::AllocateProducerIds(_) => Reply::AllocateProducerIds(Err(error)),
            Request::AlterPartition(_) => Reply::AlterPartition(Err(error)),
            Request::ElectLeaders { partitions, .. } => Reply::ElectLeaders(
                partitions
                    .iter()
                    .flatten()
                    .map(|(topic, indexes)| {
                        let results = indexes.iter().map(|i| (*i, Err(error.clone())));
                        (topic.clone(), results.collect())
                    })
                    .collect(),
            ),
            Request::Migrate(_) => Reply::Migrate(Err(error)),
        }
    }

    /// Turns every result into `error` (a leadership lost before the reply was released).
    fn into_refused(self, error: ControllerError) -> Reply {
        match self {
            Reply::RegisterBroker(_) => Reply::RegisterBroker(Err(error)),
            Reply::Heartbeat(_) => Reply::Heartbeat(Err(error)),
            Reply::CreateTopics(v) => {
                Reply::CreateTopics(v.into_iter().map(|t| (t.0, Err(error.clone()))).collect())
            }
            Reply::DeleteTopics(v) => {
                Reply::DeleteTopics(v.into_iter().map(|t| (t.0, Err(error.clone()))).collect())
            }
            Reply::CreatePartitions(v) => {
                Reply::CreatePartitions(v.into_iter().map(|t| (t.0, Err(error.clone()))).collect())
            }
            Reply::AlterConfigs(v) => {
                Reply::AlterConfigs(v.into_iter().map(|t| (t.0, Err(error.clone()))).collect())
            }
            Reply::AllocateProducerIds(_) => Reply::AllocateProducerIds(Err(error)),
            Reply::AlterPartition(_) => Reply::AlterPartition(Err(error)),
            Reply::ElectLeaders(v) => Reply::ElectLeaders(
                v.into_iter()
                    .map(|(topic, partitions)| {
                        let refused = partitions.into_iter().map(|(i, _)| (i, Err(error.clone())));
                        (topic, refused.collect())
                    })
                    .collect(),
            ),
            Reply::Migrate(_) => Reply::Migrate(Err(error)),
        }
    }
}

/// The id the driver gave a request, to route its reply.
pub type RequestId = u64;

/// Records to append to the metadata log as one batch, at `base_offset` in `epoch`: the
/// driver appends them only if the log's next offset is still `base_offset` in that epoch,
/// and otherwise gives up the leadership of the controller ([`Controller::become_inactive`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub epoch: i32,
    pub base_offset: i64,
    pub records: Vec<MetadataRecord>,
}

impl Proposal {
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.records.len() as i64 - 1
    }
}

/// What the driver must do.
#[derive(Debug, Default)]
pub struct Ready {
    pub proposals: Vec<Proposal>,
    pub replies: Vec<(RequestId, Reply)>,
}

/// A request's records so far, with their encoded size.
#[derive(Default)]
struct BoundedRecords {
    records: Vec<MetadataRecord>,
    bytes: usize,
}

/// The state of the active controller.
#[derive(Debug)]
struct Active {
    epoch: i32,
    /// The committed image plus `pending`.
    working: MetadataImage,
    /// The offset the next proposal starts at.
    next_offset: i64,
    /// Written, not committed, oldest first.
    pending: VecDeque<Proposal>,
    /// Replies waiting until the committed offset reaches theirs.
    deferred: VecDeque<(i64, RequestId, Reply)>,
    /// Broker id -> the last heartbeat or registration, in ms.
    sessions: BTreeMap<i32, u64>,
    /// Brokers that registered or heartbeated with this controller since it became active.
    /// Every broker starts with a fresh session at activation, so a broker that died with the
    /// previous controller (a combined node killed whole) looks alive until its session
    /// expires; placement prefers the brokers heard from, so a topic created right after a
    /// failover is not put on a dead broker.
    heard_from: BTreeSet<i32>,
    /// Where the next topic's replicas start among the usable brokers.
    placement_cursor: usize,
    /// When the next leader check runs: the leaderless partitions an unclean election may
    /// serve, and, every `leader.imbalance.check.interval.seconds`, the preferred leaders.
    next_unclean_check_ms: u64,
    next_rebalance_ms: u64,
}

/// The controller.
#[derive(Debug)]
pub struct Controller {
    config: ControllerConfig,
    policy: Arc<dyn ConfigPolicy>,
    committed: MetadataImage,
    /// The last committed offset applied (metadata or control batch), -1 for none.
    applied_offset: i64,
    active: Option<Active>,
    /// Replies released for the driver.
    replies: Vec<(RequestId, Reply)>,
    proposals: Vec<Proposal>,
    rng: u64,
}

impl Controller {
    pub fn new(config: ControllerConfig, policy: Arc<dyn ConfigPolicy>) -> Controller {
        let rng = config.seed | 1;
        Controller {
            config,
            policy,
            committed: MetadataImage::empty(),
            applied_offset: -1,
            active: None,
            replies: Vec::new(),
            proposals: Vec::new(),
            rng,
        }
    }

    /// A standby controller that starts from a snapshot's image.
    pub fn load_snapshot(&mut self, image: MetadataImage, end_offset: i64) {
        assert!(self.active.is_none(), "only a standby loads a snapshot");
        assert!(end_offset > self.applied_offset);
        assert!(image.offset < end_offset);
        self.committed = image;
        self.applied_offset = end_offset - 1;
    }

    pub fn is_active(&self) -> bool {
        self.active.is_some()
    }

    /// The committed image.
    pub fn committed(&self) -> &MetadataImage {
        &self.committed
    }

    /// The last committed offset applied.
    pub fn applied_offset(&self) -> i64 {
        self.applied_offset
    }

    /// The image requests are decided against: the working image while active.
    pub fn working(&self) -> &MetadataImage {
        self.active.as_ref().map_or(&self.committed, |a| &a.working)
    }

    /// Counts broker `broker_id`'s session as if its last heartbeat came `silent_ms` before
    /// `now_ms`, when that is earlier than the activation (which starts every session afresh,
    /// as Kafka's does). The driver calls it right after [`Controller::become_active`] for the
    /// node whose silence made this controller's replica stand for election (its fetch
    /// timeout): on a combined node the quorum's lost leader is the broker of the same id,
    /// and it has been silent that long already. A live broker so fenced early heartbeats
    /// and is unfenced again; a dead one stops leading `silent_ms` sooner. A broker this
    /// controller does not know, a fenced one, or this controller's own is left alone.
    pub fn backdate_session(&mut self, broker_id: i32, silent_ms: u64, now_ms: u64) {
        let colocated = self.config.colocated_broker.map(|(id, _)| id);
        let active = self
            .active
            .as_mut()
            .expect("backdating a session while not active");
        let known = active
            .working
            .brokers
            .get(&broker_id)
            .is_some_and(|b| !b.fenced);
        if !known || colocated == Some(broker_id) {
            return;
        }
        let last_ms = now_ms.saturating_sub(silent_ms);
        let session = active.sessions.entry(broker_id).or_insert(last_ms);
        *session = (*session).min(last_ms);
        assert!(*session <= now_ms, "a session counted from the future");
        tracing::info!(
            broker_id,
            silent_ms,
            "controller: counting a broker's session from the quorum leader's silence"
        );
    }

    /// Takes what the driver must do.
    pub fn ready(&mut self) -> Ready {
        Ready {
            proposals: std::mem::take(&mut self.proposals),
            replies: std::mem::take(&mut self.replies),
        }
    }

    /// The next time [`Controller::tick`] has something to do, if any.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        let active = self.active.as_ref()?;
        let sessions = active
            .working
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .filter_map(|b| active.sessions.get(&b.id))
            .map(|last| last + self.config.session_timeout_ms);
        let sessions: Vec<u64> = sessions.collect();
        // Without a live broker nothing can lead, let alone move.
        let rebalance = (self.config.auto_leader_rebalance_enable && !sessions.is_empty())
            .then_some(active.next_rebalance_ms);
        let unclean = self
            .unclean_election_configured()
            .then_some(active.next_unclean_check_ms);
        sessions.into_iter().chain(rebalance).chain(unclean).min()
    }

    /// Applies one committed batch: `records` at `base_offset..`, or a control batch (no
    /// metadata records) ending at `last_offset`. A transaction's records arrive here only
    /// once it ended (the loader resolves them).
    pub fn replay_committed(
        &mut self,
        base_offset: i64,
        last_offset: i64,
        epoch: i32,
        records: &[MetadataRecord],
    ) -> Result<(), super::image::ImageError> {
        assert!(base_offset > self.applied_offset, "a batch applied twice");
        assert!(last_offset >= base_offset);
        assert!(records.len() as i64 <= last_offset - base_offset + 1);
        for (i, record) in records.iter().enumerate() {
            self.committed
                .replay(base_offset + i as i64, epoch, record)?;
            if self.config.bugs.apply_partition_changes_twice
                && self.active.is_none()
                && matches!(record, MetadataRecord::PartitionChange(_))
            {
                // The planted bug: the same record again, its offset check sidestepped.
                self.committed.offset -= 1;
                self.committed
                    .replay(base_offset + i as i64, epoch, record)?;
            }
        }
        self.applied_offset = last_offset;
        if let Some(active) = &mut self.active {
            if !records.is_empty() {
                let front = active
                    .pending
                    .pop_front()
                    .expect("a metadata batch committed while active is this controller's own");
                assert_eq!(front.base_offset, base_offset, "a foreign batch committed");
                assert_eq!(front.epoch, epoch, "a batch of another epoch committed");
                assert!(
                    front.records == records,
                    "the committed batch at {base_offset} is not the one proposed"
                );
            }
            if active.pending.is_empty() {
                // The working image is the committed one once nothing is pending: in release
                // the parts that are cheap to compare (a whole comparison walks every topic,
                // on every commit), in debug builds all of it.
                assert_eq!(self.committed.offset, active.working.offset);
                assert_eq!(self.committed.topics.len(), active.working.topics.len());
                assert_eq!(self.committed.brokers, active.working.brokers);
                assert_eq!(
                    self.committed.next_producer_id,
                    active.working.next_producer_id
                );
                debug_assert_eq!(
                    self.committed, active.working,
                    "the working image is the committed one once nothing is pending"
                );
            }
            while let Some((offset, _, _)) = active.deferred.front() {
                if *offset > self.applied_offset {
                    break;
                }
                let (_, id, reply) = active.deferred.pop_front().expect("front exists");
                self.replies.push((id, reply));
            }
        }
        Ok(())
    }

    /// Becomes the active controller of `epoch`, whose next log offset is `next_offset`: the
    /// driver calls this once its replica leads `epoch` and every offset below `next_offset`
    /// is committed and applied here.
    pub fn become_active(&mut self, now_ms: u64, epoch: i32, next_offset: i64) {
        assert!(self.active.is_none(), "already active");
        assert_eq!(
            self.applied_offset + 1,
            next_offset,
            "activated before applying the log up to the epoch's start"
        );
        let sessions = self
            .committed
            .brokers
            .keys()
            .map(|&id| (id, now_ms))
            .collect();
        // The broker of this controller's own process is alive: it is heard from already.
        let heard_from = self
            .config
            .colocated_broker
            .filter(|(id, incarnation)| {
                self.committed
                    .brokers
                    .get(id)
                    .is_some_and(|b| b.incarnation_id == *incarnation)
            })
            .map(|(id, _)| id)
            .into_iter()
            .collect();
        self.active = Some(Active {
            epoch,
            working: self.committed.clone(),
            next_offset,
            pending: VecDeque::new(),
            deferred: VecDeque::new(),
            sessions,
            heard_from,
            placement_cursor: 0,
            next_unclean_check_ms: now_ms.saturating_add(UNCLEAN_ELECTION_CHECK_MS),
            next_rebalance_ms: now_ms
                .saturating_add(self.config.leader_imbalance_check_interval_ms),
        });
        // A new cluster's log begins with its metadata.version (Kafka's bootstrap records).
        if self.committed.metadata_version().is_none() {
            self.write(vec![MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name: METADATA_VERSION_FEATURE.to_string(),
                feature_level: METADATA_VERSION_LEVEL,
            })]);
        }
    }

    /// Stops being the active controller: what was written may still commit (it is then
    /// applied as any batch), but every waiting reply is NOT_CONTROLLER.
    pub fn become_inactive(&mut self) {
        let Some(active) = self.active.take() else {
            return;
        };
        for (_, id, reply) in active.deferred {
            self.replies
                .push((id, reply.into_refused(ControllerError::NotController)));
        }
        // Own batches still in flight arrive through `replay_committed` as anyone's.
    }

    /// Decides a request.
    pub fn handle(&mut self, now_ms: u64, id: RequestId, request: Request) {
        let Some(active) = &self.active else {
            self.replies
                .push((id, Reply::refused(&request, ControllerError::NotController)));
            return;
        };
        if active.pending.len() >= PENDING_PROPOSALS_MAX {
            let error = ControllerError::Overloaded {
                what: "uncommitted writes",
                limit: PENDING_PROPOSALS_MAX,
            };
            self.replies.push((id, Reply::refused(&request, error)));
            return;
        }
        if active.deferred.len() >= DEFERRED_REPLIES_MAX {
            let error = ControllerError::Overloaded {
                what: "replies",
                limit: DEFERRED_REPLIES_MAX,
            };
            self.replies.push((id, Reply::refused(&request, error)));
            return;
        }
        let reply = match request {
            Request::RegisterBroker(r) => Reply::RegisterBroker(self.register_broker(now_ms, &r)),
            Request::Heartbeat(r) => Reply::Heartbeat(self.heartbeat(now_ms, &r)),
            Request::CreateTopics {
                topics,
                validate_only,
            } => Reply::CreateTopics(self.create_topics(&topics, validate_only)),
            Request::DeleteTopics(topics) => Reply::DeleteTopics(self.delete_topics(&topics)),
            Request::CreatePartitions {
                topics,
                validate_only,
            } => Reply::CreatePartitions(self.create_partitions(&topics, validate_only)),
            Request::AlterConfigs {
                changes,
                validate_only,
            } => Reply::AlterConfigs(self.alter_configs(&changes, validate_only)),
            Request::AllocateProducerIds(r) => {
                Reply::AllocateProducerIds(self.allocate_producer_ids(&r))
            }
            Request::AlterPartition(r) => Reply::AlterPartition(self.alter_partition(&r)),
            Request::ElectLeaders {
                election,
                partitions,
            } => Reply::ElectLeaders(self.elect_leaders(election, partitions)),
            Request::Migrate(records) => Reply::Migrate(self.migrate(records)),
        };
        let active = self.active.as_mut().expect("still active");
        let offset = active.next_offset - 1;
        if offset <= self.applied_offset {
            self.replies.push((id, reply));
        } else {
            active.deferred.push_back((offset, id, reply));
        }
    }

    /// Fences the broker whose session expired longest ago, if any.
    pub fn tick(&mut self, now_ms: u64) {
        let Some(active) = &self.active else {
            return;
        };
        let timeout_ms = self.config.session_timeout_ms;
        let stale = active
            .working
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .filter_map(|b| active.sessions.get(&b.id).map(|last| (*last, b.id)))
            .filter(|(last, _)| last + timeout_ms <= now_ms)
            .min();
        if let Some((_, broker_id)) = stale {
            tracing::info!(broker_id, "fencing a broker whose session expired");
            let records = self.fence_records(broker_id);
            self.write(records);
        }
        let unclean_due = now_ms >= self.active().next_unclean_check_ms;
        if unclean_due && self.unclean_election_configured() {
            let active = self.active.as_mut().expect("active");
            active.next_unclean_check_ms = now_ms.saturating_add(UNCLEAN_ELECTION_CHECK_MS);
            let records = self.unclean_elections();
            if !records.is_empty() {
                self.write(records);
            }
        }
        let active = self.active.as_mut().expect("active");
        if self.config.auto_leader_rebalance_enable && now_ms >= active.next_rebalance_ms {
            active.next_rebalance_ms =
                now_ms.saturating_add(self.config.leader_imbalance_check_interval_ms);
            let records = self.rebalance_records();
            if !records.is_empty() {
                tracing::info!(
                    partitions = records.len(),
                    "moving leaders back to their preferred replicas"
                );
                self.write(records);
            }
        }
    }

    /// Appends records to the working image as the next proposal.
    fn write(&mut self, records: Vec<MetadataRecord>) {
        assert!(!records.is_empty());
        assert!(records.len() <= PROPOSAL_RECORDS_MAX);
        let active = self
            .active
            .as_mut()
            .expect("only the active controller writes");
        let proposal = Proposal {
            epoch: active.epoch,
            base_offset: active.next_offset,
            records,
        };
        for (i, record) in proposal.records.iter().enumerate() {
            let offset = proposal.base_offset + i as i64;
            if let Err(e) = active.working.replay(offset, active.epoch, record) {
                panic!("the controller wrote a record its own image refuses: {e}");
            }
        }
        if let Err(e) = active.working.check_touched(&proposal.records) {
            panic!("the controller's working image is broken: {e}");
        }
        active.next_offset = proposal.last_offset() + 1;
        active.pending.push_back(proposal.clone());
        self.proposals.push(proposal);
    }

    fn active(&self) -> &Active {
        self.active.as_ref().expect("active")
    }

    /// Adds `more` to a request's records if the whole still fits in one proposal; refuses
    /// the part named `name` if not.
    fn add_bounded(
        &self,
        batch: &mut BoundedRecords,
        name: &str,
        more: Vec<MetadataRecord>,
    ) -> Result<(), ControllerError> {
        let more_bytes: usize = more.iter().map(MetadataRecord::encoded_len).sum();
        let records = batch.records.len() + more.len();
        let bytes = batch.bytes + more_bytes;
        if records > PROPOSAL_RECORDS_MAX || bytes > self.config.proposal_bytes_max {
            return Err(ControllerError::TooLarge {
                name: name.to_string(),
                records,
                bytes,
            });
        }
        batch.records.extend(more);
        batch.bytes = bytes;
        Ok(())
    }

    fn broker_epoch_check(&self, broker_id: i32, epoch: i64) -> Result<(), ControllerError> {
        let broker = self
            .active()
            .working
            .brokers
            .get(&broker_id)
            .ok_or(ControllerError::BrokerIdNotRegistered { broker_id })?;
        if broker.epoch != epoch {
            return Err(ControllerError::StaleBrokerEpoch {
                broker_id,
                epoch,
                current: broker.epoch,
            });
        }
        Ok(())
    }

    // Brokers.

    fn register_broker(
        &mut self,
        now_ms: u64,
        r: &BrokerRegistrationRequest,
    ) -> Result<i64, ControllerError> {
        let broker_id = r.broker_id.0;
        if broker_id < 0 {
            return Err(ControllerError::InvalidRequest {
                reason: format!("broker id {broker_id} is negative"),
            });
        }
        if r.cluster_id != self.config.cluster_id {
            return Err(ControllerError::InconsistentClusterId {
                ours: self.config.cluster_id.clone(),
                theirs: r.cluster_id.clone(),
            });
        }
        let active = self.active();
        let level = active
            .working
            .metadata_version()
            .unwrap_or(METADATA_VERSION_LEVEL);
        match r
            .features
            .iter()
            .find(|f| f.name == METADATA_VERSION_FEATURE)
        {
            Some(f) if f.min_supported_version <= level && level <= f.max_supported_version => {}
            Some(f) => {
                return Err(ControllerError::UnsupportedFeature {
                    broker_id,
                    reason: format!(
                        "it supports metadata.version {}-{}, the cluster runs at {level}",
                        f.min_supported_version, f.max_supported_version
                    ),
                })
            }
            None => {
                return Err(ControllerError::UnsupportedFeature {
                    broker_id,
                    reason: "it names no metadata.version range".into(),
                })
            }
        }
        if let Some(existing) = active.working.brokers.get(&broker_id) {
            let last = active.sessions.get(&broker_id).copied().unwrap_or(0);
            let alive = last + self.config.session_timeout_ms > now_ms;
            let colocated = self.config.colocated_broker == Some((broker_id, r.incarnation_id));
            if existing.incarnation_id != r.incarnation_id
                && !existing.fenced
                && alive
                && !colocated
            {
                return Err(ControllerError::DuplicateBrokerRegistration { broker_id });
            }
        }
        let epoch = active.next_offset;
        let record = RegisterBrokerRecord {
            broker_id,
            is_migrating_zk_broker: false,
            incarnation_id: r.incarnation_id,
            broker_epoch: epoch,
            end_points: r
                .listeners
                .iter()
                .map(|l| BrokerEndpoint {
                    name: l.name.clone(),
                    host: l.host.clone(),
                    port: l.port,
                    security_protocol: l.security_protocol,
                })
                .collect(),
            features: r
                .features
                .iter()
                .map(|f| BrokerFeature {
                    name: f.name.clone(),
                    min_supported_version: f.min_supported_version,
                    max_supported_version: f.max_supported_version,
                })
                .collect(),
            rack: r.rack.clone(),
            fenced: true,
            in_controlled_shutdown: false,
            log_dirs: r.log_dirs.clone(),
        };
        let mut records = Vec::new();
        let existing = active.working.brokers.get(&broker_id).cloned();
        // A re-registration while the old incarnation still leads partitions fences it first,
        // so nothing is led by an epoch that no longer exists.
        if existing.as_ref().is_some_and(|b| !b.fenced) {
            records = self.fence_records(broker_id);
        }
        // KIP-966: a broker that does not name its last epoch as the one it stopped cleanly
        // under crashed, and may have lost what it held unsynced: it leaves every ELR (and
        // any ISR) for the last known ELR, so that it is never elected on its word alone.
        if let Some(b) = existing
            .as_ref()
            .filter(|b| b.epoch != r.previous_broker_epoch)
        {
            tracing::info!(
                broker_id,
                last_epoch = b.epoch,
                previous_broker_epoch = r.previous_broker_epoch,
                "a broker registers after an unclean shutdown: it leaves every ELR"
            );
            let unclean = self.scratch_records(&records, |c| {
                c.partition_changes_removing(broker_id, Some(broker_id))
            });
            records.extend(unclean);
        }
        let epoch = epoch + records.len() as i64;
        records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_epoch: epoch,
            ..record
        }));
        self.write(records);
        let active = self.active.as_mut().expect("active");
        active.sessions.insert(broker_id, now_ms);
        active.heard_from.insert(broker_id);
        Ok(epoch)
    }

    fn heartbeat(
        &mut self,
        now_ms: u64,
        r: &BrokerHeartbeatRequest,
    ) -> Result<HeartbeatReply, ControllerError> {
        let broker_id = r.broker_id.0;
        self.broker_epoch_check(broker_id, r.broker_epoch)?;
        let active = self.active.as_mut().expect("active");
        active.sessions.insert(broker_id, now_ms);
        active.heard_from.insert(broker_id);
        let broker = active.working.brokers[&broker_id].clone();
        let is_caught_up = r.current_metadata_offset.0 >= broker.epoch;
        if broker.fenced {
            if r.want_shut_down {
                return Ok(HeartbeatReply {
                    is_caught_up,
                    is_fenced: true,
                    should_shut_down: true,
                });
            }
            if is_caught_up && !r.want_fence {
                let records = self.unfence_records(broker_id);
                self.write(records);
            }
        } else if r.want_fence {
            let records = self.fence_records(broker_id);
            self.write(records);
        } else if r.want_shut_down && !broker.in_controlled_shutdown {
            let records = self.controlled_shutdown_records(broker_id);
            self.write(records);
        }
        let working = &self.active().working;
        let broker = &working.brokers[&broker_id];
        let leads_nothing = !working
            .topics
            .values()
            .any(|t| t.partitions.values().any(|p| p.leader == broker_id));
        if r.want_shut_down && broker.in_controlled_shutdown && leads_nothing && !broker.fenced {
            // Kafka's SHUTDOWN_NOW: a broker whose controlled shutdown is complete is fenced,
            // so that its next incarnation may register at once instead of waiting for this
            // one's session to expire (a rolling restart).
            let records = self.fence_records(broker_id);
            self.write(records);
            return Ok(HeartbeatReply {
                is_caught_up,
                is_fenced: true,
                should_shut_down: true,
            });
        }
        Ok(HeartbeatReply {
            is_caught_up,
            is_fenced: broker.fenced,
            should_shut_down: broker.in_controlled_shutdown && leads_nothing,
        })
    }

    /// Whether a broker may lead and be in an ISR now.
    fn usable(&self, broker_id: i32) -> bool {
        self.active()
            .working
            .brokers
            .get(&broker_id)
            .is_some_and(|b| b.is_active())
    }

    /// A topic's `min.insync.replicas`, as Kafka's controller resolves it: the topic's
    /// override, else the cluster-wide broker default, else the controller's static config.
    /// A value that does not parse as a count of at least 1 (the config policy refuses such
    /// values, but a log written elsewhere may hold one) is passed over for the next source.
    fn min_insync_replicas(&self, topic: &str) -> usize {
        let configs = &self.active().working.configs;
        let of = |resource: ConfigResource| {
            configs
                .get(&resource)
                .and_then(|c| c.get(MIN_INSYNC_REPLICAS_CONFIG))
                .and_then(|v| v.trim().parse::<i32>().ok())
                .filter(|n| *n >= 1)
        };
        let min = of(ConfigResource::topic(topic))
            .or_else(|| of(ConfigResource::broker(None)))
            .unwrap_or(self.config.min_insync_replicas);
        usize::try_from(min).unwrap_or(1).max(1)
    }

    /// A topic's `unclean.leader.election.enable`, resolved as `min.insync.replicas` is
    /// ([`Controller::min_insync_replicas`]); a value that is not a boolean is passed over.
    fn unclean_leader_election(&self, topic: &str) -> bool {
        let configs = &self.active().working.configs;
        let of = |resource: ConfigResource| {
            configs
                .get(&resource)
                .and_then(|c| c.get(UNCLEAN_LEADER_ELECTION_CONFIG))
                .and_then(|v| flag(v))
        };
        of(ConfigResource::topic(topic))
            .or_else(|| of(ConfigResource::broker(None)))
            .unwrap_or(self.config.unclean_leader_election_enable)
    }

    /// Whether any topic may elect uncleanly: the static default, or an override in the
    /// working image that sets it (so that a cluster that never allows it never looks).
    fn unclean_election_configured(&self) -> bool {
        self.config.unclean_leader_election_enable
            || self.active().working.configs.values().any(|c| {
                c.get(UNCLEAN_LEADER_ELECTION_CONFIG)
                    .is_some_and(|v| flag(v) == Some(true))
            })
    }

    /// The election rules of a topic's partitions.
    fn election_rules(&self, topic: &str) -> ElectionRules {
        ElectionRules {
            min_isr: self.min_insync_replicas(topic),
            unclean_election: self.unclean_leader_election(topic),
        }
    }

    /// The change of one partition once `isr` is its ISR, electing a leader if its leader is
    /// no longer valid, as Kafka's `PartitionChangeBuilder` does with the ELR enabled: the
    /// ELR follows the ISR first ([`elr_after`], leaving out `unclean`, a replica that
    /// restarted after an unclean shutdown); then the current leader stays if it is still in
    /// the ISR and usable; else the first usable replica, in replica order, of the ISR; else,
    /// only when the ISR is empty, the first usable one of the ELR, which becomes the whole
    /// ISR and leaves the ELR (KIP-966: an ELR member holds everything committed); else the
    /// last known leader when the ELR is empty too (balanced recovery); else, only when the
    /// rules allow an unclean election, the first usable replica, RECOVERING, which loses
    /// whatever it lacks; else none.
    fn partition_change(
        &self,
        topic_id: Uuid,
        index: i32,
        p: &PartitionRegistration,
        mut isr: Vec<i32>,
        rules: ElectionRules,
        unclean: Option<i32>,
    ) -> Option<PartitionChangeRecord> {
        let min_isr = rules.min_isr;
        let mut elr = elr_after(p, &isr, min_isr, unclean);
        let first_usable = |set: &[i32]| {
            p.replicas
                .iter()
                .copied()
                .find(|r| set.contains(r) && self.usable(*r))
        };
        let mut recovery = None;
        let leader = if isr.contains(&p.leader) && self.usable(p.leader) {
            p.leader
        } else if let Some(leader) = self
            .config
            .bugs
            .elect_outside_isr
            .then(|| first_usable(&p.replicas))
            .flatten()
        {
            if !isr.contains(&leader) {
                isr.push(leader);
                elr.retain(|r| *r != leader);
            }
            leader
        } else if let Some(leader) = first_usable(&isr) {
            leader
        } else if isr.is_empty() {
            if let Some(leader) = first_usable(&elr) {
                isr = vec![leader];
                elr.retain(|r| *r != leader);
                leader
            } else if let Some(leader) = elr
                .is_empty()
                .then(|| first_usable(&p.last_known_elr))
                .flatten()
            {
                // KIP-966's balanced recovery: nobody is left who is known to hold every
                // committed record, so the last leader, whose log is the likeliest to be the
                // longest, leads alone, RECOVERING (KIP-704), and the ELR starts over.
                isr = vec![leader];
                recovery = Some(LEADER_RECOVERY_RECOVERING);
                leader
            } else if let Some(leader) = rules
                .unclean_election
                .then(|| first_usable(&p.replicas))
                .flatten()
            {
                // unclean.leader.election.enable: any live replica, whatever it lacks.
                tracing::warn!(?topic_id, index, leader, "unclean leader election: a replica outside the ISR and ELR leads (records it lacks are lost)");
                isr = vec![leader];
                elr.clear();
                recovery = Some(LEADER_RECOVERY_RECOVERING);
                leader
            } else {
                NO_LEADER
            }
        } else {
            NO_LEADER
        };
        // The last known ELR holds the last leader (KIP-966's last known leader), set when
        // the ISR first empties and cleared once the partition has a leader again.
        let last_known_elr = if leader != NO_LEADER {
            Vec::new()
        } else if isr.is_empty() && !p.isr.is_empty() && p.leader != NO_LEADER {
            vec![p.leader]
        } else {
            p.last_known_elr.clone()
        };
        assert!(
            leader == NO_LEADER || isr.contains(&leader),
            "a leader outside the ISR"
        );
        assert!(
            !elr.iter().any(|r| isr.contains(r)),
            "a replica in both the ISR and the ELR"
        );
        assert!(
            unclean.is_none_or(|u| !elr.contains(&u)),
            "an uncleanly stopped replica kept in the ELR"
        );
        if leader != p.leader {
            tracing::debug!(
                ?topic_id,
                index,
                from = p.leader,
                leader,
                ?isr,
                ?elr,
                ?last_known_elr,
                ?unclean,
                "partition leader change"
            );
        }
        if recovery.is_some() {
            tracing::warn!(?topic_id, index, leader, "no replica is known to hold every committed record: the last leader leads alone, RECOVERING (records may be lost)");
        }
        assert!(last_known_elr.len() <= 1, "more than one last known leader");
        change_record(
            topic_id,
            index,
            p,
            leader,
            isr,
            (elr, last_known_elr),
            recovery,
        )
    }

    /// Every partition change that taking `broker_id` out of service needs: it leaves each
    /// ISR it is in (the last member too: the ISR may be empty, KIP-966, since the member
    /// then joins the ELR and keeps its claim to leadership), and leadership moves or goes.
    /// A member leaving an ISR that falls below `min.insync.replicas` joins the ELR.
    fn partition_changes_without(&self, broker_id: i32) -> Vec<MetadataRecord> {
        self.partition_changes_removing(broker_id, None)
    }

    /// The changes of every partition whose ISR or ELR holds `broker_id` once it leaves the
    /// ISR, and, when `unclean`, the ELR too (it restarted after an unclean shutdown and may
    /// have lost records it held).
    fn partition_changes_removing(
        &self,
        broker_id: i32,
        unclean: Option<i32>,
    ) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for topic in self.active().working.topics.values() {
            let mut rules = None;
            for (index, p) in &topic.partitions {
                let in_elr = unclean.is_some() && p.elr.contains(&broker_id);
                if !p.isr.contains(&broker_id) && p.leader != broker_id && !in_elr {
                    continue;
                }
                let rules = *rules.get_or_insert_with(|| self.election_rules(&topic.name));
                let isr: Vec<i32> = p.isr.iter().copied().filter(|r| *r != broker_id).collect();
                if let Some(change) =
                    self.partition_change(topic.id, *index, p, isr, rules, unclean)
                {
                    out.push(MetadataRecord::PartitionChange(change));
                }
            }
        }
        out
    }

    fn fence_records(&mut self, broker_id: i32) -> Vec<MetadataRecord> {
        let epoch = self.active().working.brokers[&broker_id].epoch;
        // The registration change first: the partition changes then see the broker unusable.
        let fence = BrokerRegistrationChangeRecord {
            broker_id,
            broker_epoch: epoch,
            fenced: FENCED_CHANGE_FENCE,
            ..BrokerRegistrationChangeRecord::default()
        };
        self.with_broker_change(fence, |c| c.partition_changes_without(broker_id))
    }

    fn controlled_shutdown_records(&mut self, broker_id: i32) -> Vec<MetadataRecord> {
        let epoch = self.active().working.brokers[&broker_id].epoch;
        let change = BrokerRegistrationChangeRecord {
            broker_id,
            broker_epoch: epoch,
            fenced: FENCED_CHANGE_NONE,
            in_controlled_shutdown: 1,
            ..BrokerRegistrationChangeRecord::default()
        };
        self.with_broker_change(change, |c| c.partition_changes_without(broker_id))
    }

    fn unfence_records(&mut self, broker_id: i32) -> Vec<MetadataRecord> {
        let epoch = self.active().working.brokers[&broker_id].epoch;
        let unfence = BrokerRegistrationChangeRecord {
            broker_id,
            broker_epoch: epoch,
            fenced: FENCED_CHANGE_UNFENCE,
            ..BrokerRegistrationChangeRecord::default()
        };
        // Partitions without a leader whose ISR has this broker, or whose ISR is empty and
        // whose ELR has it, or whose ISR and ELR are empty and whose last leader it was, get
        // it as their leader.
        self.with_broker_change(unfence, |c| {
            let mut out = Vec::new();
            for topic in c.active().working.topics.values() {
                let mut rules = None;
                for (index, p) in &topic.partitions {
                    if p.has_leader() || !p.replicas.contains(&broker_id) {
                        continue;
                    }
                    let rules = *rules.get_or_insert_with(|| c.election_rules(&topic.name));
                    let eligible = p.isr.contains(&broker_id)
                        || (p.isr.is_empty() && p.elr.contains(&broker_id))
                        || (p.isr.is_empty()
                            && p.elr.is_empty()
                            && p.last_known_elr.contains(&broker_id))
                        || rules.unclean_election;
                    if !eligible {
                        continue;
                    }
                    let isr = p.isr.clone();
                    if let Some(change) = c.partition_change(topic.id, *index, p, isr, rules, None)
                    {
                        out.push(MetadataRecord::PartitionChange(change));
                    }
                }
            }
            out
        })
    }

    /// The broker change followed by the partition changes `then` decides with the broker
    /// change already in effect (decided on a scratch copy of the working image).
    fn with_broker_change(
        &mut self,
        change: BrokerRegistrationChangeRecord,
        then: impl FnOnce(&Controller) -> Vec<MetadataRecord>,
    ) -> Vec<MetadataRecord> {
        let record = MetadataRecord::BrokerRegistrationChange(change);
        let mut records = vec![record];
        let more = self.scratch_records(&records, then);
        records.extend(more);
        records
    }

    /// What `then` decides with `records` (not yet written) already in effect: they are
    /// replayed onto the working image, at the offsets they will take, and the image is put
    /// back after.
    fn scratch_records(
        &mut self,
        records: &[MetadataRecord],
        then: impl FnOnce(&Controller) -> Vec<MetadataRecord>,
    ) -> Vec<MetadataRecord> {
        let active = self.active.as_mut().expect("active");
        let saved = active.working.clone();
        let epoch = active.epoch;
        for (i, record) in records.iter().enumerate() {
            let offset = active.next_offset + i as i64;
            if let Err(e) = active.working.replay(offset, epoch, record) {
                panic!("a change the working image refuses: {e}");
            }
        }
        let out = then(self);
        self.active.as_mut().expect("active").working = saved;
        out
    }

    // Elections.

    /// ElectLeaders (KIP-460), as Kafka's `ReplicationControlManager.electLeaders`: each
    /// partition named (every partition when `partitions` is None, and then only those
    /// where an election was attempted are answered) gets the leader `election` chooses,
    /// with a new leader epoch; all the changes go out as one batch.
    fn elect_leaders(
        &mut self,
        election: ElectionType,
        partitions: Option<Vec<(String, Vec<i32>)>>,
    ) -> ElectLeadersResults {
        let every = partitions.is_none();
        let wanted: Vec<(String, Vec<i32>)> = match partitions {
            Some(wanted) => wanted,
            None => {
                let mut all: Vec<(String, Vec<i32>)> = self
                    .active()
                    .working
                    .topics
                    .values()
                    .map(|t| (t.name.clone(), t.partitions.keys().copied().collect()))
                    .collect();
                all.sort();
                all
            }
        };
        let mut batch = BoundedRecords::default();
        let mut seen = BTreeSet::new();
        let mut results: ElectLeadersResults = Vec::with_capacity(wanted.len());
        for (topic, indexes) in wanted {
            let mut outcomes = Vec::with_capacity(indexes.len());
            for index in indexes {
                if !seen.insert((topic.clone(), index)) {
                    continue;
                }
                let outcome = self.elect_one(election, &topic, index).and_then(|change| {
                    self.add_bounded(
                        &mut batch,
                        &format!("{topic}-{index}"),
                        vec![MetadataRecord::PartitionChange(change)],
                    )
                });
                if every && matches!(outcome, Err(ControllerError::ElectionNotNeeded { .. })) {
                    continue;
                }
                outcomes.push((index, outcome));
            }
            if !outcomes.is_empty() || !every {
                results.push((topic, outcomes));
            }
        }
        if !batch.records.is_empty() {
            tracing::info!(
                ?election,
                partitions = batch.records.len(),
                "leader election"
            );
            self.write(batch.records);
        }
        results
    }

    /// One partition's election: the change to write.
    fn elect_one(
        &self,
        election: ElectionType,
        topic: &str,
        index: i32,
    ) -> Result<PartitionChangeRecord, ControllerError> {
        let working = &self.active().working;
        let t = working
            .topic(topic)
            .ok_or_else(|| ControllerError::UnknownTopic {
                name: topic.to_string(),
            })?;
        let p = t
            .partitions
            .get(&index)
            .ok_or_else(|| ControllerError::UnknownPartition {
                topic: topic.to_string(),
                partition: index,
            })?;
        let partition = format!("{topic}-{index}");
        match election {
            ElectionType::Preferred => {
                let preferred = *p.replicas.first().expect("a partition has replicas");
                if p.leader == preferred {
                    return Err(ControllerError::ElectionNotNeeded { partition });
                }
                let reason = if !p.isr.contains(&preferred) {
                    Some(format!("broker {preferred} is not in the ISR {:?}", p.isr))
                } else if !self.usable(preferred) {
                    Some(format!("broker {preferred} is fenced or shutting down"))
                } else {
                    None
                };
                if let Some(reason) = reason {
                    return Err(ControllerError::PreferredLeaderNotAvailable { partition, reason });
                }
                let elrs = (p.elr.clone(), p.last_known_elr.clone());
                Ok(
                    change_record(t.id, index, p, preferred, p.isr.clone(), elrs, None)
                        .expect("a new leader is a change"),
                )
            }
            ElectionType::Unclean => {
                if p.has_leader() {
                    return Err(ControllerError::ElectionNotNeeded { partition });
                }
                let rules = ElectionRules {
                    unclean_election: true,
                    ..self.election_rules(topic)
                };
                match self.partition_change(t.id, index, p, p.isr.clone(), rules, None) {
                    Some(change)
                        if change.leader != LEADER_UNCHANGED && change.leader != NO_LEADER =>
                    {
                        Ok(change)
                    }
                    _ => Err(ControllerError::EligibleLeadersNotAvailable { partition }),
                }
            }
        }
    }

    /// Leaderless partitions whose topic allows an unclean election and that have a live
    /// replica: their elections, at most one batch's worth.
    fn unclean_elections(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for topic in self.active().working.topics.values() {
            let mut rules = None;
            for (index, p) in &topic.partitions {
                if p.has_leader() || out.len() >= PROPOSAL_RECORDS_MAX {
                    continue;
                }
                let rules = *rules.get_or_insert_with(|| self.election_rules(&topic.name));
                if !rules.unclean_election {
                    break;
                }
                if let Some(change) =
                    self.partition_change(topic.id, *index, p, p.isr.clone(), rules, None)
                {
                    out.push(MetadataRecord::PartitionChange(change));
                }
            }
        }
        out
    }

    /// `auto.leader.rebalance.enable`: for each broker whose share of preferred partitions
    /// led elsewhere is above `leader.imbalance.per.broker.percentage` (Kafka's ZooKeeper
    /// controller's rule), those of them whose preferred replica is in the ISR and live get
    /// it back as leader; at most one batch's worth.
    fn rebalance_records(&self) -> Vec<MetadataRecord> {
        let working = &self.active().working;
        // Per preferred broker: its partitions, and those led elsewhere.
        let mut preferred: BTreeMap<i32, (usize, Vec<(Uuid, i32)>)> = BTreeMap::new();
        for topic in working.topics.values() {
            for (index, p) in &topic.partitions {
                let Some(&first) = p.replicas.first() else {
                    continue;
                };
                let entry = preferred.entry(first).or_default();
                entry.0 += 1;
                if p.leader != first {
                    entry.1.push((topic.id, *index));
                }
            }
        }
        let percentage = u64::from(self.config.leader_imbalance_per_broker_percentage);
        let mut out = Vec::new();
        for (broker, (total, elsewhere)) in preferred {
            let imbalance_pct = elsewhere.len() as u64 * 100 / total.max(1) as u64;
            if imbalance_pct <= percentage || !self.usable(broker) {
                continue;
            }
            for (topic_id, index) in elsewhere {
                if out.len() >= PROPOSAL_RECORDS_MAX {
                    return out;
                }
                let Some(topic) = working.topic_by_id(topic_id) else {
                    continue;
                };
                if let Ok(change) = self.elect_one(ElectionType::Preferred, &topic.name, index) {
                    out.push(MetadataRecord::PartitionChange(change));
                }
            }
        }
        out
    }

    // Topics.

    fn next_topic_id(&mut self, taken: &BTreeSet<Uuid>) -> Uuid {
        loop {
            let mut bytes = [0u8; 16];
            for chunk in bytes.chunks_mut(8) {
                // xorshift64*: deterministic from the seed, which the driver draws from rt.
                self.rng ^= self.rng >> 12;
                self.rng ^= self.rng << 25;
                self.rng ^= self.rng >> 27;
                let v = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
                chunk.copy_from_slice(&v.to_le_bytes());
            }
            let id = Uuid(bytes);
            // Kafka's Uuid.randomUuid: never the zero or metadata-topic id, and never one
            // whose base64 starts with '-' (a command line would read it as an option).
            let reserved = id == Uuid::ZERO || id == DIRECTORY_UNASSIGNED;
            if reserved || id.to_base64().starts_with('-') {
                continue;
            }
            if taken.contains(&id) || self.working().topics.contains_key(&id) {
                continue;
            }
            return id;
        }
    }

    /// The usable brokers, by id.
    fn usable_brokers(&self) -> Vec<i32> {
        self.active()
            .working
            .brokers
            .values()
            .filter(|b| b.is_active())
            .map(|b| b.id)
            .collect()
    }

    /// A partition's directory of each replica, as Kafka's `ClusterControlManager.defaultDir`:
    /// the broker's only log directory, MIGRATING if it registered none, UNASSIGNED if many.
    fn directories(&self, replicas: &[i32]) -> Vec<Uuid> {
        replicas
            .iter()
            .map(|r| match self.active().working.brokers.get(r) {
                Some(b) if b.log_dirs.len() == 1 => b.log_dirs[0],
                Some(b) if b.log_dirs.is_empty() => DIRECTORY_MIGRATING,
                _ => DIRECTORY_UNASSIGNED,
            })
            .collect()
    }

    fn new_partition(&self, topic_id: Uuid, index: i32, replicas: Vec<i32>) -> PartitionRecord {
        let isr: Vec<i32> = replicas
            .iter()
            .copied()
            .filter(|r| self.usable(*r))
            .collect();
        let leader = replicas
            .iter()
            .copied()
            .find(|r| isr.contains(r))
            .unwrap_or(NO_LEADER);
        PartitionRecord {
            partition_id: index,
            topic_id,
            directories: self.directories(&replicas),
            replicas,
            isr,
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
            ..PartitionRecord::default()
        }
    }

    /// Checks explicit replicas of one partition.
    fn check_assignment(
        &self,
        name: &str,
        index: i32,
        replicas: &[i32],
    ) -> Result<(), ControllerError> {
        let invalid = |reason: String| ControllerError::InvalidReplicaAssignment {
            name: name.to_string(),
            reason,
        };
        if replicas.is_empty() {
            return Err(invalid(format!("partition {index} has no replicas")));
        }
        let distinct: BTreeSet<i32> = replicas.iter().copied().collect();
        if distinct.len() != replicas.len() {
            return Err(invalid(format!(
                "partition {index} names a replica twice: {replicas:?}"
            )));
        }
        if replicas.len() > REPLICATION_FACTOR_MAX as usize {
            return Err(ControllerError::InvalidReplicationFactor {
                name: name.to_string(),
                reason: format!(
                    "partition {index} has {} replicas, more than the {REPLICATION_FACTOR_MAX} a partition may have",
                    replicas.len()
                ),
            });
        }
        for r in replicas {
            if !self.active().working.brokers.contains_key(r) {
                return Err(invalid(format!(
                    "partition {index} names broker {r}, which is not registered"
                )));
            }
        }
        if !replicas.iter().any(|r| self.usable(*r)) {
            return Err(invalid(format!(
                "all brokers of partition {index} ({replicas:?}) are fenced or shutting down"
            )));
        }
        Ok(())
    }

    /// Replicas of `count` new partitions starting at `first`, `factor` each, spread over the
    /// usable brokers round robin from the placement cursor: over those this controller has
    /// heard from since it became active when they are enough for `factor`, else over all.
    fn place(
        &mut self,
        name: &str,
        first: i32,
        count: i32,
        factor: i16,
    ) -> Result<Vec<Vec<i32>>, ControllerError> {
        let usable = self.usable_brokers();
        let heard: Vec<i32> = usable
            .iter()
            .copied()
            .filter(|id| self.active().heard_from.contains(id))
            .collect();
        let brokers = if usize::try_from(factor).is_ok_and(|f| heard.len() >= f) {
            heard
        } else {
            usable
        };
        if factor < 1 || factor as usize > brokers.len() {
            return Err(ControllerError::InvalidReplicationFactor {
                name: name.to_string(),
                reason: format!(
                    "replication factor {factor} cannot be reached: {} broker(s) are registered and unfenced",
                    brokers.len()
                ),
            });
        }
        let active = self.active.as_mut().expect("active");
        let start = active.placement_cursor;
        active.placement_cursor = active.placement_cursor.wrapping_add(1);
        Ok((first..first + count)
            .map(|index| {
                (0..factor as usize)
                    .map(|j| brokers[(start + index as usize + j) % brokers.len()])
                    .collect()
            })
            .collect())
    }

    fn create_topics(
        &mut self,
        topics: &[NewTopic],
        validate_only: bool,
    ) -> Vec<(String, Result<CreatedTopic, ControllerError>)> {
        if topics.len() > TOPICS_PER_REQUEST_MAX {
            let error = ControllerError::InvalidRequest {
                reason: format!(
                    "{} topics in one request, more than {TOPICS_PER_REQUEST_MAX}",
                    topics.len()
                ),
            };
            return topics
                .iter()
                .map(|t| (t.name.clone(), Err(error.clone())))
                .collect();
        }
        let mut names_seen = BTreeSet::new();
        let mut taken_ids = BTreeSet::new();
        let mut records = BoundedRecords::default();
        let mut results = Vec::new();
        for topic in topics {
            if !names_seen.insert(topic.name.clone()) {
                results.push((
                    topic.name.clone(),
                    Err(ControllerError::InvalidRequest {
                        reason: format!("topic '{}' appears twice in the request", topic.name),
                    }),
                ));
                continue;
            }
            let result =
                self.create_topic(topic, &mut taken_ids)
                    .and_then(|(created, topic_records)| {
                        let name = format!("topic '{}'", topic.name);
                        self.add_bounded(&mut records, &name, topic_records)?;
                        Ok(created)
                    });
            results.push((topic.name.clone(), result));
        }
        // The request's topics are created in one batch, so a create that collides with
        // another topic of the same request is caught against what went before it.
        if !validate_only && !records.records.is_empty() {
            self.write(records.records);
        }
        results
    }

    fn create_topic(
        &mut self,
        topic: &NewTopic,
        taken_ids: &mut BTreeSet<Uuid>,
    ) -> Result<(CreatedTopic, Vec<MetadataRecord>), ControllerError> {
        let name = &topic.name;
        validate_name(name).map_err(|e| ControllerError::InvalidTopic {
            name: name.clone(),
            reason: e.to_string(),
        })?;
        if name == METADATA_TOPIC_NAME {
            return Err(ControllerError::InvalidTopic {
                name: name.clone(),
                reason: "it is the metadata log's name".into(),
            });
        }
        let working = &self.active().working;
        if working.topic_ids.contains_key(name) {
            return Err(ControllerError::TopicAlreadyExists { name: name.clone() });
        }
        let key = name.replace('.', "_");
        if let Some(existing) = working
            .topic_ids
            .keys()
            .find(|n| n.replace('.', "_") == key)
        {
            return Err(ControllerError::InvalidTopic {
                name: name.clone(),
                reason: format!(
                    "it collides with existing topic '{existing}' ('.' and '_' are the same in metric names)"
                ),
            });
        }
        let mut overrides = BTreeMap::new();
        for (key, value) in &topic.configs {
            let Some(value) = value else {
                return Err(ControllerError::InvalidConfig {
                    resource: ConfigResource::topic(name),
                    reason: format!("a null value for '{key}'"),
                });
            };
            if overrides.insert(key.clone(), value.clone()).is_some() {
                return Err(ControllerError::InvalidRequest {
                    reason: format!("topic '{name}': config '{key}' is given twice"),
                });
            }
        }
        let resource = ConfigResource::topic(name);
        self.policy.check(&resource, &overrides).map_err(|reason| {
            ControllerError::InvalidConfig {
                resource: resource.clone(),
                reason,
            }
        })?;
        let replicas: Vec<Vec<i32>> = if topic.assignments.is_empty() {
            let partitions = if topic.num_partitions == -1 {
                self.config.num_partitions
            } else {
                topic.num_partitions
            };
            if !(1..=PARTITIONS_PER_TOPIC_MAX).contains(&partitions) {
                return Err(ControllerError::InvalidPartitions {
                    name: name.clone(),
                    reason: format!(
                        "{partitions} partitions is outside [1, {PARTITIONS_PER_TOPIC_MAX}]"
                    ),
                });
            }
            let factor = if topic.replication_factor == -1 {
                self.config.default_replication_factor
            } else {
                topic.replication_factor
            };
            if factor > REPLICATION_FACTOR_MAX {
                return Err(ControllerError::InvalidReplicationFactor {
                    name: name.clone(),
                    reason: format!(
                        "replication factor {factor} is more than the {REPLICATION_FACTOR_MAX} replicas a partition may have"
                    ),
                });
            }
            self.place(name, 0, partitions, factor)?
        } else {
            if topic.num_partitions != -1 || topic.replication_factor != -1 {
                return Err(ControllerError::InvalidRequest {
                    reason: format!(
                        "topic '{name}': both assignments and a partition count or replication factor"
                    ),
                });
            }
            if topic.assignments.len() > PARTITIONS_PER_TOPIC_MAX as usize {
                return Err(ControllerError::InvalidPartitions {
                    name: name.clone(),
                    reason: format!(
                        "{} partitions is more than {PARTITIONS_PER_TOPIC_MAX}",
                        topic.assignments.len()
                    ),
                });
            }
            let mut sorted = topic.assignments.clone();
            sorted.sort_by_key(|a| a.0);
            let mut out = Vec::new();
            for (expected, (index, replicas)) in sorted.into_iter().enumerate() {
                if index != expected as i32 {
                    return Err(ControllerError::InvalidReplicaAssignment {
                        name: name.clone(),
                        reason: format!(
                            "partitions must be numbered 0 to {} without gaps",
                            topic.assignments.len() - 1
                        ),
                    });
                }
                self.check_assignment(name, index, &replicas)?;
                if replicas.len() != out.first().map_or(replicas.len(), |f: &Vec<i32>| f.len()) {
                    return Err(ControllerError::InvalidReplicaAssignment {
                        name: name.clone(),
                        reason: "partitions have different numbers of replicas".into(),
                    });
                }
                out.push(replicas);
            }
            out
        };
        let id = self.next_topic_id(taken_ids);
        taken_ids.insert(id);
        let mut records = vec![MetadataRecord::Topic(TopicRecord {
            name: name.clone(),
            topic_id: id,
        })];
        for (key, value) in &overrides {
            records.push(MetadataRecord::Config(ConfigRecord {
                resource_type: resource.resource_type,
                resource_name: name.clone(),
                name: key.clone(),
                value: Some(value.clone()),
            }));
        }
        let created = CreatedTopic {
            id,
            num_partitions: replicas.len() as i32,
            replication_factor: replicas[0].len() as i16,
        };
        for (index, replicas) in replicas.into_iter().enumerate() {
            records.push(MetadataRecord::Partition(self.new_partition(
                id,
                index as i32,
                replicas,
            )));
        }
        Ok((created, records))
    }

    fn delete_topics(&mut self, topics: &[TopicRef]) -> Vec<(TopicRef, DeletedTopic)> {
        let mut records = Vec::new();
        let mut results = Vec::new();
        let mut removed = BTreeSet::new();
        for topic in topics.iter().take(TOPICS_PER_REQUEST_MAX) {
            let working = &self.active().working;
            let found = match topic {
                TopicRef::Name(name) => working
                    .topic(name)
                    .map(|t| (t.name.clone(), t.id))
                    .ok_or(ControllerError::UnknownTopic { name: name.clone() }),
                TopicRef::Id(id) => working
                    .topic_by_id(*id)
                    .map(|t| (t.name.clone(), t.id))
                    .ok_or(ControllerError::UnknownTopicId { id: *id }),
            };
            let result = found.and_then(|(name, id)| {
                if !self.config.delete_topic_enable {
                    return Err(ControllerError::TopicDeletionDisabled { name });
                }
                if removed.insert(id) {
                    records.push(MetadataRecord::RemoveTopic(RemoveTopicRecord {
                        topic_id: id,
                    }));
                }
                Ok((name, id))
            });
            results.push((topic.clone(), result));
        }
        for topic in topics.iter().skip(TOPICS_PER_REQUEST_MAX) {
            results.push((
                topic.clone(),
                Err(ControllerError::InvalidRequest {
                    reason: format!("more than {TOPICS_PER_REQUEST_MAX} topics in one request"),
                }),
            ));
        }
        if !records.is_empty() {
            self.write(records);
        }
        results
    }

    fn create_partitions(
        &mut self,
        topics: &[NewPartitions],
        validate_only: bool,
    ) -> Vec<(String, Result<(), ControllerError>)> {
        let mut records = BoundedRecords::default();
        let mut results = Vec::new();
        let mut seen = BTreeSet::new();
        for NewPartitions {
            name,
            count,
            assignments,
        } in topics
        {
            let result = if seen.insert(name.clone()) && topics.len() <= TOPICS_PER_REQUEST_MAX {
                self.create_partitions_of(name, *count, assignments.as_deref())
            } else {
                Err(ControllerError::InvalidRequest {
                    reason: format!(
                        "topic '{name}' appears twice, or the request names more than {TOPICS_PER_REQUEST_MAX} topics"
                    ),
                })
            };
            let result = result.and_then(|topic_records| {
                self.add_bounded(&mut records, &format!("topic '{name}'"), topic_records)
            });
            results.push((name.clone(), result));
        }
        if !validate_only && !records.records.is_empty() {
            self.write(records.records);
        }
        results
    }

    fn create_partitions_of(
        &mut self,
        name: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let topic =
            self.active()
                .working
                .topic(name)
                .cloned()
                .ok_or(ControllerError::UnknownTopic {
                    name: name.to_string(),
                })?;
        let current = topic.partitions.len() as i32;
        let invalid = |reason: String| ControllerError::InvalidPartitions {
            name: name.to_string(),
            reason,
        };
        if count <= current {
            return Err(invalid(if count == current {
                format!("the topic already has {current} partitions")
            } else {
                format!(
                    "the topic currently has {current} partitions, which is higher than the requested {count}"
                )
            }));
        }
        if count > PARTITIONS_PER_TOPIC_MAX {
            return Err(invalid(format!(
                "{count} partitions is more than {PARTITIONS_PER_TOPIC_MAX}"
            )));
        }
        let factor = topic.partitions.get(&0).map_or(1, |p| p.replicas.len()) as i16;
        let replicas = match assignments {
            None => self.place(name, current, count - current, factor)?,
            Some(assignments) => {
                if assignments.len() as i32 != count - current {
                    return Err(ControllerError::InvalidReplicaAssignment {
                        name: name.to_string(),
                        reason: format!(
                            "{} assignments for {} new partitions",
                            assignments.len(),
                            count - current
                        ),
                    });
                }
                for (i, replicas) in assignments.iter().enumerate() {
                    self.check_assignment(name, current + i as i32, replicas)?;
                    if replicas.len() as i16 != factor {
                        return Err(ControllerError::InvalidReplicaAssignment {
                            name: name.to_string(),
                            reason: format!(
                                "partition {} has {} replicas, the topic's factor is {factor}",
                                current + i as i32,
                                replicas.len()
                            ),
                        });
                    }
                }
                assignments.to_vec()
            }
        };
        Ok(replicas
            .into_iter()
            .enumerate()
            .map(|(i, replicas)| {
                MetadataRecord::Partition(self.new_partition(
                    topic.id,
                    current + i as i32,
                    replicas,
                ))
            })
            .collect())
    }

    fn alter_configs(
        &mut self,
        changes: &[(ConfigResource, Vec<ConfigOp>)],
        validate_only: bool,
    ) -> Vec<(ConfigResource, Result<(), ControllerError>)> {
        let mut records = BoundedRecords::default();
        let mut results = Vec::new();
        let mut seen = BTreeSet::new();
        // Partitions whose ELR an earlier resource of the request clears already.
        let mut cleared = BTreeSet::new();
        for (resource, ops) in changes {
            let result = if seen.insert(resource.clone()) {
                self.alter_configs_of(resource, ops)
            } else {
                Err(ControllerError::InvalidRequest {
                    reason: format!("{} appears twice", describe_resource(resource)),
                })
            };
            let result = result.and_then(|mut resource_records| {
                resource_records.retain(|r| match r {
                    MetadataRecord::PartitionChange(c) => {
                        !cleared.contains(&(c.topic_id, c.partition_id))
                    }
                    _ => true,
                });
                let clears: Vec<(Uuid, i32)> = resource_records
                    .iter()
                    .filter_map(|r| match r {
                        MetadataRecord::PartitionChange(c) => Some((c.topic_id, c.partition_id)),
                        _ => None,
                    })
                    .collect();
                self.add_bounded(&mut records, &describe_resource(resource), resource_records)?;
                cleared.extend(clears);
                Ok(())
            });
            results.push((resource.clone(), result));
        }
        if !validate_only && !records.records.is_empty() {
            self.write(records.records);
        }
        results
    }

    fn alter_configs_of(
        &self,
        resource: &ConfigResource,
        ops: &[ConfigOp],
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let working = &self.active().working;
        match resource.resource_type {
            super::records::CONFIG_RESOURCE_TOPIC => {
                if working.topic(&resource.name).is_none() {
                    return Err(ControllerError::UnknownTopic {
                        name: resource.name.clone(),
                    });
                }
            }
            super::records::CONFIG_RESOURCE_BROKER => {
                if !resource.name.is_empty() && resource.name.parse::<i32>().is_err() {
                    return Err(ControllerError::InvalidRequest {
                        reason: format!("broker resource '{}' is not a broker id", resource.name),
                    });
                }
            }
            other => {
                return Err(ControllerError::InvalidRequest {
                    reason: format!("config resource type {other} is not supported"),
                })
            }
        }
        if let Some(refusal) = ops.iter().find_map(|op| match op {
            ConfigOp::Refuse(e) => Some(e.clone()),
            _ => None,
        }) {
            return Err(refusal);
        }
        let before = working.configs_of(resource);
        let mut after = before.clone();
        let kept: BTreeSet<&str> = ops
            .iter()
            .filter_map(|op| match op {
                ConfigOp::Set(k, _) => Some(k.as_str()),
                _ => None,
            })
            .collect();
        for op in ops {
            match op {
                ConfigOp::Set(k, v) => {
                    after.insert(k.clone(), v.clone());
                }
                ConfigOp::Delete(k) => {
                    after.remove(k);
                }
                ConfigOp::DeleteOthers => after.retain(|k, _| kept.contains(k.as_str())),
                ConfigOp::Refuse(_) => unreachable!("a refused resource returned above"),
                ConfigOp::Append {
                    key,
                    items,
                    default,
                } => {
                    let mut list = list_items(after.get(key).unwrap_or(default));
                    for item in items {
                        if !list.contains(item) {
                            list.push(item.clone());
                        }
                    }
                    after.insert(key.clone(), list.join(","));
                }
                ConfigOp::Subtract {
                    key,
                    items,
                    default,
                } => {
                    let mut list = list_items(after.get(key).unwrap_or(default));
                    list.retain(|i| !items.contains(i));
                    after.insert(key.clone(), list.join(","));
                }
            }
        }
        self.policy
            .check(resource, &after)
            .map_err(|reason| ControllerError::InvalidConfig {
                resource: resource.clone(),
                reason,
            })?;
        let record = |name: &String, value: Option<String>| {
            MetadataRecord::Config(ConfigRecord {
                resource_type: resource.resource_type,
                resource_name: resource.name.clone(),
                name: name.clone(),
                value,
            })
        };
        let mut records = Vec::new();
        for (k, v) in &after {
            if before.get(k) != Some(v) {
                records.push(record(k, Some(v.clone())));
            }
        }
        for k in before.keys() {
            if !after.contains_key(k) {
                records.push(record(k, None));
            }
        }
        if before.get(MIN_INSYNC_REPLICAS_CONFIG) != after.get(MIN_INSYNC_REPLICAS_CONFIG) {
            records.extend(self.elr_clears(resource));
        }
        Ok(records)
    }

    /// The ELRs a change of `min.insync.replicas` on `resource` clears, as Kafka's
    /// `getPartitionElrUpdatesForConfigChanges` does: an ELR was kept for the old value, and
    /// the next ISR change builds it again for the new one. A topic's change concerns its
    /// partitions; the cluster-wide broker default's, the partitions of every topic without
    /// an override of its own; a single broker's config is not a topic's min ISR.
    fn elr_clears(&self, resource: &ConfigResource) -> Vec<MetadataRecord> {
        let working = &self.active().working;
        let topics: Vec<&Arc<super::image::TopicImage>> = match resource.resource_type {
            CONFIG_RESOURCE_TOPIC => working.topic(&resource.name).into_iter().collect(),
            _ if resource.name.is_empty() => working
                .topics
                .values()
                .filter(|t| {
                    !working
                        .configs
                        .get(&ConfigResource::topic(&t.name))
                        .is_some_and(|c| c.contains_key(MIN_INSYNC_REPLICAS_CONFIG))
                })
                .collect(),
            _ => Vec::new(),
        };
        let mut out = Vec::new();
        for topic in topics {
            for (index, p) in &topic.partitions {
                if p.elr.is_empty() && p.last_known_elr.is_empty() {
                    continue;
                }
                out.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                    partition_id: *index,
                    topic_id: topic.id,
                    eligible_leader_replicas: Some(Vec::new()),
                    last_known_elr: Some(Vec::new()),
                    ..PartitionChangeRecord::default()
                }));
            }
        }
        out
    }

    fn allocate_producer_ids(
        &mut self,
        r: &AllocateProducerIdsRequest,
    ) -> Result<(i64, i32), ControllerError> {
        self.broker_epoch_check(r.broker_id.0, r.broker_epoch)?;
        let start = self.active().working.next_producer_id;
        let next = start
            .checked_add(i64::from(PRODUCER_ID_BLOCK_SIZE))
            .filter(|n| *n < i64::MAX - i64::from(PRODUCER_ID_BLOCK_SIZE))
            .ok_or(ControllerError::ProducerIdsExhausted)?;
        self.write(vec![MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: r.broker_id.0,
            broker_epoch: r.broker_epoch,
            next_producer_id: next,
        })]);
        Ok((start, PRODUCER_ID_BLOCK_SIZE))
    }

    // Partitions.

    /// AlterPartition (Kafka's `ReplicationControlManager.alterPartition`): the requester must
    /// be registered at the epoch it names, or the whole request is refused; then each
    /// partition is decided on its own ([`Controller::alter_one`]), the accepted changes are
    /// written as one batch, and each accepted partition is answered with its state after it
    /// (a change to the ISR it already has writes nothing and answers that state).
    fn alter_partition(
        &mut self,
        r: &AlterPartitionRequest,
    ) -> Result<AlterPartitionResults, ControllerError> {
        let broker_id = r.broker_id.0;
        // Kafka answers an unregistered requester as a stale one: its registration is gone.
        self.broker_epoch_check(broker_id, r.broker_epoch)
            .map_err(|e| match e {
                ControllerError::BrokerIdNotRegistered { broker_id } => {
                    ControllerError::StaleBrokerEpoch {
                        broker_id,
                        epoch: r.broker_epoch,
                        current: -1,
                    }
                }
                e => e,
            })?;
        let mut batch = BoundedRecords::default();
        // Each partition is decided against the working image before this request's records:
        // a partition named twice would be decided twice against the same state.
        let mut seen = BTreeSet::new();
        let mut decided = Vec::with_capacity(r.topics.len());
        for topic in &r.topics {
            let mut partitions = Vec::with_capacity(topic.partitions.len());
            for wanted in &topic.partitions {
                let index = wanted.partition_index;
                let outcome = if seen.insert((topic.topic_id, index)) {
                    self.alter_one(broker_id, topic.topic_id, wanted).and_then(
                        |change| match change {
                            Some(change) => self.add_bounded(
                                &mut batch,
                                &format!("partition {index}"),
                                vec![MetadataRecord::PartitionChange(change)],
                            ),
                            None => Ok(()),
                        },
                    )
                } else {
                    Err(ControllerError::InvalidRequest {
                        reason: format!(
                            "partition {index} of topic {} appears twice in the request",
                            topic.topic_id.to_base64()
                        ),
                    })
                };
                partitions.push((index, outcome));
            }
            decided.push((topic.topic_id, partitions));
        }
        if !batch.records.is_empty() {
            self.write(batch.records);
        }
        let working = &self.active().working;
        Ok(decided
            .into_iter()
            .map(|(topic_id, partitions)| {
                let partitions = partitions
                    .into_iter()
                    .map(|(index, outcome)| {
                        let state = outcome.map(|()| {
                            let p = working
                                .topic_by_id(topic_id)
                                .and_then(|t| t.partitions.get(&index))
                                .expect("a partition just accepted is in the working image");
                            AlteredPartition::of(p)
                        });
                        (index, state)
                    })
                    .collect();
                (topic_id, partitions)
            })
            .collect())
    }

    /// One partition of an AlterPartition, checked in Kafka's order
    /// (`validateAlterPartitionData`), with NOT_LEADER_OR_FOLLOWER for a requester that does
    /// not lead it; the change to write, if any.
    fn alter_one(
        &self,
        broker_id: i32,
        topic_id: Uuid,
        wanted: &AlterPartitionRequestPartition,
    ) -> Result<Option<PartitionChangeRecord>, ControllerError> {
        let working = &self.active().working;
        let topic = working
            .topic_by_id(topic_id)
            .ok_or(ControllerError::UnknownTopicId { id: topic_id })?;
        let index = wanted.partition_index;
        let p = topic
            .partitions
            .get(&index)
            .ok_or_else(|| ControllerError::UnknownPartition {
                topic: topic.name.clone(),
                partition: index,
            })?;
        let partition = format!("{}-{index}", topic.name);
        let leader_epoch = wanted.leader_epoch.0;
        // Epochs come only from committed metadata, which the active controller has all of:
        // a newer one means another controller wrote it, and the leader should look for it.
        if leader_epoch > p.leader_epoch || wanted.partition_epoch > p.partition_epoch {
            return Err(ControllerError::StaleController {
                partition,
                reason: format!(
                    "the request's leader epoch {leader_epoch} or partition epoch {} is newer than {} or {}",
                    wanted.partition_epoch, p.leader_epoch, p.partition_epoch
                ),
            });
        }
        if broker_id != p.leader {
            return Err(ControllerError::NotLeader {
                broker_id,
                partition,
                leader: p.leader,
            });
        }
        if leader_epoch < p.leader_epoch {
            return Err(ControllerError::FencedLeaderEpoch {
                partition,
                epoch: leader_epoch,
                current: p.leader_epoch,
            });
        }
        if wanted.partition_epoch < p.partition_epoch {
            return Err(ControllerError::InvalidUpdateVersion {
                partition,
                epoch: wanted.partition_epoch,
                current: p.partition_epoch,
            });
        }
        let invalid = |reason: String| ControllerError::InvalidRequest {
            reason: format!("{partition}: {reason}"),
        };
        let members: Vec<(i32, i64)> = if wanted.new_isr_with_epochs.is_empty() {
            wanted.new_isr.iter().map(|id| (id.0, -1)).collect()
        } else {
            let with_epochs = &wanted.new_isr_with_epochs;
            if !wanted.new_isr.is_empty()
                && !wanted
                    .new_isr
                    .iter()
                    .map(|id| id.0)
                    .eq(with_epochs.iter().map(|m| m.broker_id.0))
            {
                return Err(invalid(
                    "the new ISR and the new ISR with epochs name different brokers".into(),
                ));
            }
            with_epochs
                .iter()
                .map(|m| (m.broker_id.0, m.broker_epoch))
                .collect()
        };
        let isr: Vec<i32> = members.iter().map(|m| m.0).collect();
        if isr.is_empty() {
            return Err(invalid("the new ISR is empty".into()));
        }
        let distinct: BTreeSet<i32> = isr.iter().copied().collect();
        if distinct.len() != isr.len() {
            return Err(invalid(format!("the new ISR {isr:?} names a broker twice")));
        }
        if let Some(stranger) = isr.iter().find(|r| !p.replicas.contains(r)) {
            return Err(invalid(format!(
                "the new ISR {isr:?} names broker {stranger}, which is not a replica ({:?})",
                p.replicas
            )));
        }
        if !isr.contains(&p.leader) {
            return Err(invalid(format!(
                "the new ISR {isr:?} lacks the leader {}",
                p.leader
            )));
        }
        // KIP-704: a leader elected uncleanly is RECOVERING, alone in its ISR, until it says
        // it recovered; a recovered partition never goes back.
        let recovery = wanted.leader_recovery_state;
        match recovery {
            LEADER_RECOVERY_RECOVERED => {}
            LEADER_RECOVERY_RECOVERING if isr.len() > 1 => {
                return Err(invalid(format!(
                    "a RECOVERING leader with other members in its ISR {isr:?}"
                )))
            }
            LEADER_RECOVERY_RECOVERING if p.leader_recovery_state == LEADER_RECOVERY_RECOVERED => {
                return Err(invalid("RECOVERED cannot go back to RECOVERING".into()))
            }
            LEADER_RECOVERY_RECOVERING => {}
            other => return Err(invalid(format!("leader recovery state {other}"))),
        }
        // Every member, as Kafka checks them: those already in the ISR pass in every state
        // the controller leaves (fencing and controlled shutdown take a broker out of each ISR
        // but a last one, which then has no leader to ask), so what this refuses is a member
        // being added that cannot serve, or whose epoch the leader saw is not its current
        // registration's (a restarted broker must catch up again, KIP-903).
        for &(member, epoch) in &members {
            let reason = match working.brokers.get(&member) {
                None => Some("it is not registered".to_string()),
                Some(b) if b.in_controlled_shutdown => Some("it is shutting down".into()),
                Some(b) if b.fenced => Some("it is fenced".into()),
                Some(b) if epoch != -1 && epoch != b.epoch => Some(format!(
                    "the leader saw broker epoch {epoch}, its registration's is {}",
                    b.epoch
                )),
                Some(_) => None,
            };
            if let Some(reason) = reason {
                return Err(ControllerError::IneligibleReplica {
                    partition,
                    broker_id: member,
                    reason,
                });
            }
        }
        let min_isr = self.min_insync_replicas(&topic.name);
        // The leader stays: the last known leader, if any, is forgotten.
        let elrs = (elr_after(p, &isr, min_isr, None), Vec::new());
        let change = change_record(topic_id, index, p, p.leader, isr, elrs, Some(recovery));
        // The leader is in the new ISR and usable (checked above): AlterPartition never moves
        // leadership (Kafka's NEW_LEADER_ELECTED comes only from reassignments).
        assert!(
            change.as_ref().is_none_or(|c| c.leader == LEADER_UNCHANGED),
            "an AlterPartition changed {partition}'s leader"
        );
        Ok(change)
    }
}

impl Controller {
    /// Writes a migrated directory's records, once: only onto a log with no topics, configs
    /// or producer ids, and only if they apply (checked on a copy of the working image first,
    /// since a record the working image refuses would stop the controller).
    fn migrate(&mut self, records: Vec<MetadataRecord>) -> Result<(), ControllerError> {
        let active = self.active();
        let working = &active.working;
        if !working.topics.is_empty() || !working.configs.is_empty() || working.next_producer_id > 0
        {
            return Err(ControllerError::InvalidRequest {
                reason: "the metadata log already holds topics, configs or producer ids; a data directory is migrated only onto an empty one".into(),
            });
        }
        if records.is_empty() {
            return Ok(());
        }
        let mut batch = BoundedRecords::default();
        self.add_bounded(&mut batch, "the migrated data directory", records)?;
        let mut copy = working.clone();
        for (i, record) in batch.records.iter().enumerate() {
            copy.replay(active.next_offset + i as i64, active.epoch, record)
                .map_err(|e| ControllerError::InvalidRequest {
                    reason: format!("the migrated data directory does not apply: {}", e.reason),
                })?;
        }
        copy.check()
            .map_err(|reason| ControllerError::InvalidRequest { reason })?;
        self.write(batch.records);
        Ok(())
    }
}

/// Whether two lists of distinct ids hold the same ids, in any order.
fn same_members(a: &[i32], b: &[i32]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

/// The ELR of `p` once `isr` replaces its ISR, as Kafka's `PartitionChangeBuilder` keeps it
/// (KIP-966): empty while the ISR has at least `min_isr` members, since an election can take
/// the ISR; below it, the members of the current ISR or ELR that are not in the new ISR (so a
/// member leaving the ISR joins it and one joining the ISR leaves it), less `unclean` (a
/// replica that restarted after an unclean shutdown). In replica order, so that equal
/// decisions write equal records.
fn elr_after(
    p: &PartitionRegistration,
    isr: &[i32],
    min_isr: usize,
    unclean: Option<i32>,
) -> Vec<i32> {
    if isr.len() >= min_isr {
        return Vec::new();
    }
    p.replicas
        .iter()
        .copied()
        .filter(|r| (p.isr.contains(r) || p.elr.contains(r)) && !isr.contains(r))
        .filter(|r| Some(*r) != unclean)
        .collect()
}

/// The record that gives `p` the leader `leader` (a new leader epoch if it differs), the ISR
/// `isr`, the ELR and last known ELR `elrs` ([`elr_after`]) and, when `recovery` is some, that
/// leader recovery state; none when nothing changes. An ISR of the same members in another
/// order is no change.
fn change_record(
    topic_id: Uuid,
    index: i32,
    p: &PartitionRegistration,
    leader: i32,
    isr: Vec<i32>,
    elrs: (Vec<i32>, Vec<i32>),
    recovery: Option<i8>,
) -> Option<PartitionChangeRecord> {
    let (elr, last_known_elr) = elrs;
    let isr_changed = !same_members(&isr, &p.isr);
    let leader_changed = leader != p.leader;
    let elr_changed = !same_members(&elr, &p.elr);
    let last_known_changed = !same_members(&last_known_elr, &p.last_known_elr);
    let recovery = recovery.filter(|r| *r != p.leader_recovery_state);
    if !isr_changed && !leader_changed && !elr_changed && !last_known_changed && recovery.is_none()
    {
        return None;
    }
    Some(PartitionChangeRecord {
        partition_id: index,
        topic_id,
        isr: isr_changed.then_some(isr),
        leader: if leader_changed {
            leader
        } else {
            LEADER_UNCHANGED
        },
        leader_recovery_state: recovery.unwrap_or(-1),
        eligible_leader_replicas: elr_changed.then_some(elr),
        last_known_elr: last_known_changed.then_some(last_known_elr),
        ..PartitionChangeRecord::default()
    })
}

/// What a topic's elections may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ElectionRules {
    /// `min.insync.replicas`.
    min_isr: usize,
    /// `unclean.leader.election.enable`.
    unclean_election: bool,
}

/// A boolean config's value (either case, blanks around, as the broker reads its own);
/// None for anything else.
fn flag(value: &str) -> Option<bool> {
    crate::broker::config::parse_bool(value.trim())
}

/// A list config's items (comma separated, blanks dropped).
fn list_items(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
