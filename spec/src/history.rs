//! The history of one run: every operation a workload invoked against a
//! partition, how each one completed, and notes from the system under test or
//! the nemesis.
//!
//! This module owns the vocabulary shared by workloads and checkers (values,
//! offsets, operations, outcomes) and the invariants of a well-formed history,
//! which it asserts as events are recorded rather than leaving them for the
//! checkers to rediscover:
//!
//! - Time never goes backwards: every event is at or after the previous one.
//! - A process is sequential, like a Jepsen process: it has at most one
//!   invocation outstanding, and only the invoking process completes it.
//! - An operation completes at most once, with an outcome of its own kind
//!   (an append is never completed with read results, nor a read with offsets).
//! - Every value is written by at most one append invocation, and appends are
//!   never empty, so a value observed anywhere names exactly one write.
//!
//! - An offset commit names each partition once, and its answer reports only
//!   partitions it committed, each once; an offset fetch and an offset
//!   delete likewise.
//!
//! Node events ([`NodeEvent`]: the log was opened, the broker found
//! corruption) are facts the system under test reported about itself; the
//! history records them in order with everything else but asserts nothing
//! about their content, which is the checkers' to judge.
//!
//! Consumer groups are recorded from their members' side, as the members
//! saw them (the [`crate::groups`] checkers judge them): a member's
//! JoinGroup and SyncGroup are one operation ([`Op::Join`]) whose ok outcome
//! is the assignment the member will own in the generation it joined
//! ([`Outcome::Joined`]); giving the assignment up (a rebalance starting under
//! the eager protocol, being fenced, crashing, leaving) is a
//! [`GroupEvent::Revoked`] the member reports; its fetches are
//! [`Op::Poll`], one partition each; and [`Op::OffsetCommit`] and
//! [`Op::OffsetFetch`] are operations like any other, a commit's answer
//! being per partition ([`CommitResult`]) as Kafka's is. Each member is one
//! sequential process. An admin's [`Op::OffsetDelete`] is answered per
//! partition like a commit.
//!
//! A violated invariant is a bug in the harness, not in the system under test,
//! so it panics instead of being reported as an anomaly.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A Jepsen process: one logical, sequential client.
pub type ProcessId = u64;

/// A position in a partition log, as Kafka numbers them.
pub type Offset = i64;

/// The id of an operation: the index of its invocation in [`History::events`],
/// which is also the 0-based line number of the invocation in
/// [`History::render`], so anomaly reports can point at a line.
pub type OpId = usize;

/// A consumer group's id.
pub type GroupId = String;

/// A member id the group coordinator handed out at JoinGroup.
pub type MemberId = String;

/// A classic group's generation id (Kafka's int32 `generation_id`; -1 for a
/// commit from outside any generation).
pub type Generation = i32;

/// One partition of a topic, as group members name it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    /// Kafka's own rendering, `topic-partition`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Identity of one record written by a workload; unique per written record.
///
/// Workloads encode it as `(process << 32 | seq)` but the spec treats it as
/// opaque except for the [`Value::process`] and [`Value::seq`] helpers, which
/// exist only to make reports readable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Value(pub u64);

impl Value {
    /// The value a workload process writes as its `seq`-th record.
    pub fn new(process: u32, seq: u32) -> Value {
        Value((u64::from(process) << 32) | u64::from(seq))
    }

    /// The process that wrote this value, by the workload's encoding.
    pub fn process(self) -> u32 {
        // The shift leaves only the upper 32 bits, so the cast cannot lose data.
        (self.0 >> 32) as u32
    }

    /// The writer's sequence number, by the workload's encoding.
    pub fn seq(self) -> u32 {
        // Truncation to the lower 32 bits is exactly the decoding we want.
        self.0 as u32
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{}#{}", self.process(), self.seq())
    }
}

/// What a process asked the partition to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Produce these values, in order, as one batch.
    Append { values: Vec<Value> },
    /// Fetch records starting at offset `from`.
    Read { from: Offset },
    /// A group member's JoinGroup and SyncGroup, from its first JoinGroup
    /// request to the SyncGroup answer; ok is [`Outcome::Joined`].
    Join { group: GroupId },
    /// A group member's fetch of one partition from offset `from`, sent while
    /// it held `member_id` in `generation`; ok is [`Outcome::Read`] (a batch
    /// the member's CRC check refused is recorded as Failed). Only the group
    /// checkers judge polls: [`crate::check`] judges [`Op::Read`] alone.
    Poll {
        group: GroupId,
        member_id: MemberId,
        generation: Generation,
        partition: TopicPartition,
        from: Offset,
    },
    /// OffsetCommit of these offsets (each the next offset to consume) by
    /// `member_id` in `generation`; ok is [`Outcome::Committed`].
    OffsetCommit {
        group: GroupId,
        member_id: MemberId,
        generation: Generation,
        offsets: Vec<(TopicPartition, Offset)>,
    },
    /// OffsetFetch of the committed offsets of these partitions; ok is
    /// [`Outcome::Fetched`].
    OffsetFetch {
        group: GroupId,
        partitions: Vec<TopicPartition>,
    },
    /// OffsetDelete (an admin's) of the committed offsets of these
    /// partitions; ok is [`Outcome::Deleted`]. To the checkers a deletion is
    /// a commit of "no offset".
    OffsetDelete {
        group: GroupId,
        partitions: Vec<TopicPartition>,
    },
}

/// The broker's answer for one partition of an OffsetCommit, in the same
/// three-valued sense as [`Outcome`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommitResult {
    /// Error code NONE: the offset is committed.
    Acknowledged,
    /// Definitely not committed (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
    /// REBALANCE_IN_PROGRESS, OFFSET_METADATA_TOO_LARGE, ...).
    Failed { reason: String },
    /// May or may not be committed (REQUEST_TIMED_OUT, NOT_COORDINATOR after
    /// the write began, ...).
    Unknown { reason: String },
}

/// How an operation ended, in Jepsen's three-valued sense: ok, fail, or info.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Append acknowledged: values were assigned offsets base_offset.. base_offset+len-1.
    Appended { base_offset: Offset },
    /// Read returned these records (offset, value), in the order returned,
    /// and the high watermark the same fetch answer reported.
    Read {
        records: Vec<(Offset, Value)>,
        high_watermark: Offset,
    },
    /// The read was served a batch whose CRC-32C check failed in the reader,
    /// which refused the answer (as Java's `check.crcs=true` does). `offset`
    /// is the first offset the refused batch claims, or the read's position
    /// when the batch header is unreadable. It is a failed operation that
    /// observed no records.
    CorruptRead { offset: Offset, reason: String },
    /// The member joined `generation` as `member_id` and owns `partitions`
    /// in it (the SyncGroup answer's assignment).
    Joined {
        member_id: MemberId,
        generation: Generation,
        partitions: Vec<TopicPartition>,
    },
    /// The OffsetCommit was answered, partition by partition. A partition of
    /// the commit that the answer does not name counts as Unknown.
    Committed {
        results: Vec<(TopicPartition, CommitResult)>,
    },
    /// The OffsetDelete was answered, partition by partition, as a commit is
    /// (Kafka refuses to delete the offsets of a topic the group subscribes
    /// to: GROUP_SUBSCRIBED_TO_TOPIC).
    Deleted {
        results: Vec<(TopicPartition, CommitResult)>,
    },
    /// The OffsetFetch answered these committed offsets; None is Kafka's -1,
    /// no committed offset. A requested partition the answer does not name
    /// (a per-partition error) observed nothing.
    Fetched {
        offsets: Vec<(TopicPartition, Option<Offset>)>,
    },
    /// Definitely did not take effect.
    Failed { reason: String },
    /// May or may not have taken effect (timeout, connection lost, IO error after a write).
    Unknown { reason: String },
}

/// What one event in the history records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A process started an operation.
    Invoke(Op),
    /// The operation invoked at event `op` ended with `outcome`.
    Complete { op: OpId, outcome: Outcome },
    /// Something the system under test or the nemesis reported (crash, restart,
    /// detected corruption...), kept for the report.
    Note(String),
    /// A fact about the node's log that the checkers judge reads against.
    Node(NodeEvent),
    /// What a group member reported about its membership.
    Group(GroupEvent),
}

/// What a group member reported about its membership, outside its
/// operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupEvent {
    /// The member gave up everything it owned as `member_id` in `generation`
    /// of `group`: a rebalance began (eager protocol), it was fenced, it
    /// crashed or left. Until its next [`Outcome::Joined`] it owns nothing.
    Revoked {
        group: GroupId,
        member_id: MemberId,
        generation: Generation,
    },
}

impl fmt::Display for GroupEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupEvent::Revoked {
                group,
                member_id,
                generation,
            } => write!(
                f,
                "revoked group={group:?} member={member_id:?} generation={generation}"
            ),
        }
    }
}

/// What the node reported about its partition log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeEvent {
    /// The partition's log was opened (node start): recovery trusted every
    /// batch below `recovery_point` without reading it and verified (length,
    /// CRC) every batch from there to `log_end_offset`.
    Opened {
        recovery_point: Offset,
        log_end_offset: Offset,
    },
    /// The broker itself found a corrupt batch at `offset` (recovery
    /// truncation or the background scrubber) and from now on refuses reads
    /// at and beyond it until the next open.
    CorruptionFound { offset: Offset },
    /// The node's broker applied the metadata image at `offset`, which names it the leader
    /// of the workload's partition (`leads`, while it is registered and not fenced) or not.
    /// From here until the next such event the node may serve the partition only if `leads`.
    ImageApplied { offset: i64, leads: bool },
    /// A broker applied a metadata image that starts leader epoch `epoch` of the partition
    /// (a replicated partition's leader changed). A new leader's high watermark may start
    /// below its predecessor's (KIP-207), so the watermark checker compares reads only within
    /// one leader epoch: between two of these events.
    LeaderEpoch { epoch: i32 },
}

impl fmt::Display for NodeEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeEvent::Opened {
                recovery_point,
                log_end_offset,
            } => write!(
                f,
                "opened recovery_point={recovery_point} log_end_offset={log_end_offset}"
            ),
            NodeEvent::CorruptionFound { offset } => write!(f, "corruption-found offset={offset}"),
            NodeEvent::ImageApplied { offset, leads } => {
                write!(f, "image-applied offset={offset} leads={leads}")
            }
            NodeEvent::LeaderEpoch { epoch } => write!(f, "leader-epoch epoch={epoch}"),
        }
    }
}

/// One timestamped entry of a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub time_ns: u64,
    pub process: ProcessId,
    pub kind: EventKind,
}

/// An invocation paired with its completion, as checkers consume them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    pub id: OpId,
    pub process: ProcessId,
    pub invoke_ns: u64,
    /// None if the operation never completed, which checkers treat as Unknown.
    pub complete_ns: Option<u64>,
    pub op: Op,
    /// None if the operation never completed, which checkers treat as Unknown.
    pub outcome: Option<Outcome>,
}

/// An append-only record of one run.
///
/// Only `events` is observable; the other fields are indexes derived from it,
/// kept so the invariants can be asserted in constant time per event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    events: Vec<Event>,
    /// The open invocation of each process that has one.
    outstanding: BTreeMap<ProcessId, OpId>,
    /// Every value carried by any append invocation so far.
    written: BTreeSet<Value>,
}

impl History {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an invocation; returns the id later passed to complete. Panics
    /// (assert) if time goes backwards relative to the last event, if the
    /// process already has an invocation outstanding, if an append is empty,
    /// if an append carries a value that was already written, or if an offset
    /// commit, fetch or delete is empty or names a partition twice.
    pub fn invoke(&mut self, time_ns: u64, process: ProcessId, op: Op) -> OpId {
        self.assert_time_moves_forward(time_ns);
        if let Some(open) = self.outstanding.get(&process) {
            panic!(
                "process {process} invoked {op:?} while op #{open} is still outstanding; \
                 a process must be sequential"
            );
        }
        if let Op::Append { values } = &op {
            assert!(
                !values.is_empty(),
                "process {process} invoked an empty append; a batch holds at least one record"
            );
            for value in values {
                // Checkers identify a write by its value, so a reused value would
                // make every later judgement about it ambiguous.
                assert!(
                    self.written.insert(*value),
                    "value {value} was written twice; values must be unique per written record"
                );
            }
        }
        match &op {
            Op::OffsetCommit { offsets, .. } => {
                assert_partitions_once(process, "offset commit", offsets.iter().map(|(tp, _)| tp))
            }
            Op::OffsetFetch { partitions, .. } => {
                assert_partitions_once(process, "offset fetch", partitions.iter())
            }
            Op::OffsetDelete { partitions, .. } => {
                assert_partitions_once(process, "offset delete", partitions.iter())
            }
            _ => {}
        }
        let id = self.events.len();
        self.events.push(Event {
            time_ns,
            process,
            kind: EventKind::Invoke(op),
        });
        self.outstanding.insert(process, id);
        id
    }

    /// Asserts the op exists, is an invocation, was not completed yet, and
    /// belongs to the same process: the completion is recorded under the
    /// invoking process. Also asserts time moves forward and that the outcome
    /// is of the operation's kind.
    pub fn complete(&mut self, time_ns: u64, op: OpId, outcome: Outcome) {
        self.assert_time_moves_forward(time_ns);
        let invocation = match self.events.get(op) {
            Some(event) => event,
            None => panic!(
                "completed op #{op}, but the history has only {} events",
                self.events.len()
            ),
        };
        let invoked = match &invocation.kind {
            EventKind::Invoke(invoked) => invoked,
            other => panic!("completed op #{op}, but event #{op} is not an invocation: {other:?}"),
        };
        let process = invocation.process;
        assert_eq!(
            self.outstanding.get(&process),
            Some(&op),
            "completed op #{op} of process {process}, but it is not that process's outstanding \
             invocation (was it completed already?)"
        );
        assert!(
            outcome_fits(invoked, &outcome),
            "op #{op} ({invoked:?}) completed with an outcome of the wrong kind: {outcome:?}"
        );
        match (invoked, &outcome) {
            (Op::OffsetCommit { offsets, .. }, Outcome::Committed { results }) => {
                assert_answers_requested(
                    op,
                    offsets.iter().map(|(tp, _)| tp),
                    results.iter().map(|(tp, _)| tp),
                )
            }
            (Op::OffsetFetch { partitions, .. }, Outcome::Fetched { offsets }) => {
                assert_answers_requested(op, partitions.iter(), offsets.iter().map(|(tp, _)| tp))
            }
            (Op::OffsetDelete { partitions, .. }, Outcome::Deleted { results }) => {
                assert_answers_requested(op, partitions.iter(), results.iter().map(|(tp, _)| tp))
            }
            _ => {}
        }
        self.outstanding.remove(&process);
        self.events.push(Event {
            time_ns,
            process,
            kind: EventKind::Complete { op, outcome },
        });
    }

    /// Records a note; notes do not affect checking but appear in the
    /// rendering, so a failing seed's report explains what the nemesis did.
    pub fn note(&mut self, time_ns: u64, process: ProcessId, text: impl Into<String>) {
        self.assert_time_moves_forward(time_ns);
        self.events.push(Event {
            time_ns,
            process,
            kind: EventKind::Note(text.into()),
        });
    }

    /// Records what the node reported about its log (opened, corruption
    /// found); the corrupt-read and watermark checkers judge reads by the
    /// latest of these before them, so they must be recorded when they
    /// happen, in order with the operations.
    pub fn node(&mut self, time_ns: u64, process: ProcessId, event: NodeEvent) {
        self.assert_time_moves_forward(time_ns);
        self.events.push(Event {
            time_ns,
            process,
            kind: EventKind::Node(event),
        });
    }

    /// Records what a group member reported about its membership (it gave up
    /// its assignment); the group checkers end the member's ownership there,
    /// so it must be recorded when it happens, in order with the member's
    /// operations, under the member's process.
    pub fn group(&mut self, time_ns: u64, process: ProcessId, event: GroupEvent) {
        self.assert_time_moves_forward(time_ns);
        self.events.push(Event {
            time_ns,
            process,
            kind: EventKind::Group(event),
        });
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Pairs each invocation with its completion (None if never completed:
    /// treated as Unknown by checkers), in invocation order.
    pub fn operations(&self) -> Vec<Operation> {
        let mut operations: Vec<Operation> = Vec::new();
        let mut position_of: BTreeMap<OpId, usize> = BTreeMap::new();
        for (id, event) in self.events.iter().enumerate() {
            match &event.kind {
                EventKind::Invoke(op) => {
                    position_of.insert(id, operations.len());
                    operations.push(Operation {
                        id,
                        process: event.process,
                        invoke_ns: event.time_ns,
                        complete_ns: None,
                        op: op.clone(),
                        outcome: None,
                    });
                }
                EventKind::Complete { op, outcome } => {
                    // `complete` guarantees the invocation exists; a miss could only
                    // come from a hand-assembled history, which we then skip.
                    if let Some(operation) =
                        position_of.get(op).and_then(|&at| operations.get_mut(at))
                    {
                        operation.complete_ns = Some(event.time_ns);
                        operation.outcome = Some(outcome.clone());
                    }
                }
                EventKind::Note(_) | EventKind::Node(_) | EventKind::Group(_) => {}
            }
        }
        operations
    }

    /// A stable, line-per-event text rendering (e.g. "12345 p3 invoke append
    /// [p3#7, p3#8]"), used to compare two runs byte for byte.
    ///
    /// Completions name no op id because a process has one invocation
    /// outstanding, so a completion always ends that process's latest
    /// invocation. Free text is quoted with Rust escapes so that a newline in
    /// a reason cannot break the one-line-per-event shape.
    pub fn render(&self) -> String {
        self.to_string()
    }

    fn assert_time_moves_forward(&self, time_ns: u64) {
        if let Some(last) = self.events.last() {
            assert!(
                time_ns >= last.time_ns,
                "time went backwards: event at {time_ns} ns after one at {} ns",
                last.time_ns
            );
        }
    }
}

/// Whether `outcome` is one that `op` can end with: each operation has its own
/// ok outcome, and any can fail or end unknown.
fn outcome_fits(op: &Op, outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Failed { .. } | Outcome::Unknown { .. } => true,
        Outcome::Appended { .. } => matches!(op, Op::Append { .. }),
        Outcome::Read { .. } => matches!(op, Op::Read { .. } | Op::Poll { .. }),
        Outcome::CorruptRead { .. } => matches!(op, Op::Read { .. }),
        Outcome::Joined { .. } => matches!(op, Op::Join { .. }),
        Outcome::Committed { .. } => matches!(op, Op::OffsetCommit { .. }),
        Outcome::Fetched { .. } => matches!(op, Op::OffsetFetch { .. }),
        Outcome::Deleted { .. } => matches!(op, Op::OffsetDelete { .. }),
    }
}

/// Asserts that a group request is not empty and names no partition twice.
fn assert_partitions_once<'a>(
    process: ProcessId,
    what: &str,
    partitions: impl Iterator<Item = &'a TopicPartition>,
) {
    let mut seen = BTreeSet::new();
    for tp in partitions {
        assert!(
            seen.insert(tp),
            "process {process} invoked an {what} naming {tp} twice"
        );
    }
    assert!(
        !seen.is_empty(),
        "process {process} invoked an empty {what}; it names at least one partition"
    );
}

/// Asserts that an answer names only partitions its request named, each once.
fn assert_answers_requested<'a>(
    op: OpId,
    requested: impl Iterator<Item = &'a TopicPartition>,
    answered: impl Iterator<Item = &'a TopicPartition>,
) {
    let mut open: BTreeSet<&TopicPartition> = requested.collect();
    for tp in answered {
        assert!(
            open.remove(tp),
            "op #{op} was answered for {tp}, which it did not ask about or was answered for twice"
        );
    }
}

impl fmt::Display for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for event in &self.events {
            write!(f, "{} p{} ", event.time_ns, event.process)?;
            match &event.kind {
                EventKind::Invoke(Op::Append { values }) => {
                    write!(f, "invoke append [")?;
                    write_separated(f, values.iter())?;
                    writeln!(f, "]")?;
                }
                EventKind::Invoke(Op::Read { from }) => writeln!(f, "invoke read from={from}")?,
                EventKind::Invoke(Op::Join { group }) => {
                    writeln!(f, "invoke join group={group:?}")?
                }
                EventKind::Invoke(Op::Poll {
                    group,
                    member_id,
                    generation,
                    partition,
                    from,
                }) => writeln!(
                    f,
                    "invoke poll group={group:?} member={member_id:?} generation={generation} \
                     {partition} from={from}"
                )?,
                EventKind::Invoke(Op::OffsetCommit {
                    group,
                    member_id,
                    generation,
                    offsets,
                }) => {
                    write!(
                        f,
                        "invoke offset-commit group={group:?} member={member_id:?} \
                         generation={generation} ["
                    )?;
                    write_separated(
                        f,
                        offsets.iter().map(|(tp, offset)| format!("{tp}:{offset}")),
                    )?;
                    writeln!(f, "]")?;
                }
                EventKind::Invoke(Op::OffsetFetch { group, partitions }) => {
                    write!(f, "invoke offset-fetch group={group:?} [")?;
                    write_separated(f, partitions.iter())?;
                    writeln!(f, "]")?;
                }
                EventKind::Invoke(Op::OffsetDelete { group, partitions }) => {
                    write!(f, "invoke offset-delete group={group:?} [")?;
                    write_separated(f, partitions.iter())?;
                    writeln!(f, "]")?;
                }
                EventKind::Complete { outcome, .. } => match outcome {
                    Outcome::Appended { base_offset } => {
                        writeln!(f, "ok appended base_offset={base_offset}")?
                    }
                    Outcome::Read {
                        records,
                        high_watermark,
                    } => {
                        write!(f, "ok read hw={high_watermark} [")?;
                        write_separated(
                            f,
                            records
                                .iter()
                                .map(|(offset, value)| format!("{offset}:{value}")),
                        )?;
                        writeln!(f, "]")?;
                    }
                    Outcome::CorruptRead { offset, reason } => {
                        writeln!(f, "fail corrupt-read offset={offset} {reason:?}")?
                    }
                    Outcome::Joined {
                        member_id,
                        generation,
                        partitions,
                    } => {
                        write!(
                            f,
                            "ok joined member={member_id:?} generation={generation} ["
                        )?;
                        write_separated(f, partitions.iter())?;
                        writeln!(f, "]")?;
                    }
                    Outcome::Committed { results } => write_results(f, "committed", results)?,
                    Outcome::Deleted { results } => write_results(f, "deleted", results)?,
                    Outcome::Fetched { offsets } => {
                        write!(f, "ok fetched [")?;
                        write_separated(
                            f,
                            offsets.iter().map(|(tp, offset)| match offset {
                                Some(offset) => format!("{tp}:{offset}"),
                                None => format!("{tp}:none"),
                            }),
                        )?;
                        writeln!(f, "]")?;
                    }
                    Outcome::Failed { reason } => writeln!(f, "fail {reason:?}")?,
                    Outcome::Unknown { reason } => writeln!(f, "info {reason:?}")?,
                },
                EventKind::Note(text) => writeln!(f, "note {text:?}")?,
                EventKind::Node(node) => writeln!(f, "node {node}")?,
                EventKind::Group(group) => writeln!(f, "group {group}")?,
            }
        }
        Ok(())
    }
}

/// A per-partition answer: "ok <what> [t-0 ok, t-1 fail "reason"]".
fn write_results(
    f: &mut fmt::Formatter<'_>,
    what: &str,
    results: &[(TopicPartition, CommitResult)],
) -> fmt::Result {
    write!(f, "ok {what} [")?;
    write_separated(
        f,
        results.iter().map(|(tp, result)| match result {
            CommitResult::Acknowledged => format!("{tp} ok"),
            CommitResult::Failed { reason } => format!("{tp} fail {reason:?}"),
            CommitResult::Unknown { reason } => format!("{tp} info {reason:?}"),
        }),
    )?;
    writeln!(f, "]")
}

fn write_separated<T: fmt::Display>(
    f: &mut fmt::Formatter<'_>,
    items: impl Iterator<Item = T>,
) -> fmt::Result {
    for (i, item) in items.enumerate() {
        if i > 0 {
            write!(f, ", ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(process: u32, seq: u32) -> Value {
        Value::new(process, seq)
    }

    #[test]
    fn value_encoding_round_trips() {
        let value = v(3, 7);
        assert_eq!(value.0, (3u64 << 32) | 7);
        assert_eq!(value.process(), 3);
        assert_eq!(value.seq(), 7);
        assert_eq!(value.to_string(), "p3#7");
        let extreme = v(u32::MAX, u32::MAX);
        assert_eq!(extreme.process(), u32::MAX);
        assert_eq!(extreme.seq(), u32::MAX);
    }

    #[test]
    fn operations_pair_invocations_with_completions() {
        let mut h = History::new();
        let a = h.invoke(
            10,
            1,
            Op::Append {
                values: vec![v(1, 0)],
            },
        );
        let r = h.invoke(11, 2, Op::Read { from: 0 });
        h.note(12, 0, "crash");
        h.complete(13, a, Outcome::Appended { base_offset: 0 });
        let never = h.invoke(
            14,
            1,
            Op::Append {
                values: vec![v(1, 1)],
            },
        );
        let ops = h.operations();
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[0].id, a);
        assert_eq!(ops[0].complete_ns, Some(13));
        assert_eq!(ops[0].outcome, Some(Outcome::Appended { base_offset: 0 }));
        assert_eq!(ops[1].id, r);
        assert_eq!(ops[1].process, 2);
        assert_eq!(ops[1].outcome, None);
        assert_eq!(ops[2].id, never);
        assert_eq!(ops[2].invoke_ns, 14);
        assert_eq!(h.events().len(), 5);
    }

    #[test]
    fn render_is_one_line_per_event() {
        let mut h = History::new();
        let a = h.invoke(
            12345,
            3,
            Op::Append {
                values: vec![v(3, 7), v(3, 8)],
            },
        );
        let r = h.invoke(12346, 4, Op::Read { from: 5 });
        h.complete(12400, a, Outcome::Appended { base_offset: 5 });
        h.complete(
            12401,
            r,
            Outcome::Read {
                records: vec![(5, v(3, 7)), (6, v(3, 8))],
                high_watermark: 7,
            },
        );
        let f = h.invoke(
            12402,
            3,
            Op::Append {
                values: vec![v(3, 9)],
            },
        );
        h.complete(
            12403,
            f,
            Outcome::Failed {
                reason: "not leader".into(),
            },
        );
        let u = h.invoke(
            12404,
            3,
            Op::Append {
                values: vec![v(3, 10)],
            },
        );
        h.complete(
            12405,
            u,
            Outcome::Unknown {
                reason: "timeout".into(),
            },
        );
        h.note(12406, 0, "crash\nnode 1");
        h.node(
            12407,
            0,
            NodeEvent::Opened {
                recovery_point: 5,
                log_end_offset: 7,
            },
        );
        let c = h.invoke(12408, 4, Op::Read { from: 5 });
        h.complete(
            12409,
            c,
            Outcome::CorruptRead {
                offset: 5,
                reason: "crc mismatch".into(),
            },
        );
        h.node(12410, 0, NodeEvent::CorruptionFound { offset: 5 });
        let expected = "\
12345 p3 invoke append [p3#7, p3#8]
12346 p4 invoke read from=5
12400 p3 ok appended base_offset=5
12401 p4 ok read hw=7 [5:p3#7, 6:p3#8]
12402 p3 invoke append [p3#9]
12403 p3 fail \"not leader\"
12404 p3 invoke append [p3#10]
12405 p3 info \"timeout\"
12406 p0 note \"crash\\nnode 1\"
12407 p0 node opened recovery_point=5 log_end_offset=7
12408 p4 invoke read from=5
12409 p4 fail corrupt-read offset=5 \"crc mismatch\"
12410 p0 node corruption-found offset=5
";
        assert_eq!(h.render(), expected);
        assert_eq!(h.render().lines().count(), h.events().len());
    }

    #[test]
    #[should_panic(expected = "time went backwards")]
    fn time_going_backwards_panics() {
        let mut h = History::new();
        h.note(10, 0, "a");
        h.invoke(9, 1, Op::Read { from: 0 });
    }

    #[test]
    #[should_panic(expected = "still outstanding")]
    fn second_outstanding_invocation_panics() {
        let mut h = History::new();
        h.invoke(1, 1, Op::Read { from: 0 });
        h.invoke(2, 1, Op::Read { from: 0 });
    }

    #[test]
    #[should_panic(expected = "not that process's outstanding invocation")]
    fn completing_twice_panics() {
        let mut h = History::new();
        let r = h.invoke(1, 1, Op::Read { from: 0 });
        h.complete(
            2,
            r,
            Outcome::Read {
                records: vec![],
                high_watermark: 0,
            },
        );
        h.complete(
            3,
            r,
            Outcome::Read {
                records: vec![],
                high_watermark: 0,
            },
        );
    }

    #[test]
    #[should_panic(expected = "only 0 events")]
    fn completing_a_missing_op_panics() {
        let mut h = History::new();
        h.complete(
            1,
            0,
            Outcome::Read {
                records: vec![],
                high_watermark: 0,
            },
        );
    }

    #[test]
    #[should_panic(expected = "is not an invocation")]
    fn completing_a_note_panics() {
        let mut h = History::new();
        h.note(1, 1, "hello");
        h.complete(
            2,
            0,
            Outcome::Read {
                records: vec![],
                high_watermark: 0,
            },
        );
    }

    #[test]
    #[should_panic(expected = "wrong kind")]
    fn completing_with_the_wrong_kind_panics() {
        let mut h = History::new();
        let r = h.invoke(1, 1, Op::Read { from: 0 });
        h.complete(2, r, Outcome::Appended { base_offset: 0 });
    }

    #[test]
    #[should_panic(expected = "wrong kind")]
    fn completing_an_append_as_a_corrupt_read_panics() {
        let mut h = History::new();
        let a = h.invoke(
            1,
            1,
            Op::Append {
                values: vec![v(1, 0)],
            },
        );
        h.complete(
            2,
            a,
            Outcome::CorruptRead {
                offset: 0,
                reason: "crc".into(),
            },
        );
    }

    #[test]
    fn node_events_are_kept_in_order_but_are_not_operations() {
        let mut h = History::new();
        h.node(
            1,
            0,
            NodeEvent::Opened {
                recovery_point: 0,
                log_end_offset: 0,
            },
        );
        let r = h.invoke(2, 1, Op::Read { from: 0 });
        h.node(3, 0, NodeEvent::CorruptionFound { offset: 4 });
        h.complete(
            4,
            r,
            Outcome::Read {
                records: vec![],
                high_watermark: 0,
            },
        );
        let ops = h.operations();
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].id, r);
        assert_eq!(ops[0].complete_ns, Some(4));
        assert_eq!(
            h.events()[2].kind,
            EventKind::Node(NodeEvent::CorruptionFound { offset: 4 })
        );
    }

    #[test]
    #[should_panic(expected = "time went backwards")]
    fn a_node_event_going_back_in_time_panics() {
        let mut h = History::new();
        h.note(10, 0, "a");
        h.node(9, 0, NodeEvent::CorruptionFound { offset: 0 });
    }

    #[test]
    #[should_panic(expected = "written twice")]
    fn reusing_a_value_panics() {
        let mut h = History::new();
        let a = h.invoke(
            1,
            1,
            Op::Append {
                values: vec![v(1, 0)],
            },
        );
        h.complete(
            2,
            a,
            Outcome::Unknown {
                reason: "timeout".into(),
            },
        );
        h.invoke(
            3,
            1,
            Op::Append {
                values: vec![v(1, 0)],
            },
        );
    }

    #[test]
    #[should_panic(expected = "empty append")]
    fn empty_append_panics() {
        let mut h = History::new();
        h.invoke(1, 1, Op::Append { values: vec![] });
    }

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition::new("t", partition)
    }

    fn fetch(partitions: Vec<TopicPartition>) -> Op {
        Op::OffsetFetch {
            group: "g".into(),
            partitions,
        }
    }

    fn poll(from: Offset) -> Op {
        Op::Poll {
            group: "g".into(),
            member_id: "m-1".into(),
            generation: 3,
            partition: tp(0),
            from,
        }
    }

    fn commit(offsets: Vec<(TopicPartition, Offset)>) -> Op {
        Op::OffsetCommit {
            group: "g".into(),
            member_id: "m-1".into(),
            generation: 3,
            offsets,
        }
    }

    #[test]
    fn group_events_render_one_line_each() {
        let mut h = History::new();
        let j = h.invoke(1, 1, Op::Join { group: "g".into() });
        h.complete(
            2,
            j,
            Outcome::Joined {
                member_id: "m-1".into(),
                generation: 3,
                partitions: vec![tp(0), tp(1)],
            },
        );
        let p = h.invoke(3, 1, poll(5));
        h.complete(
            4,
            p,
            Outcome::Read {
                records: vec![(5, v(9, 0))],
                high_watermark: 6,
            },
        );
        let c = h.invoke(5, 1, commit(vec![(tp(0), 6), (tp(1), 0), (tp(2), 1)]));
        h.complete(
            6,
            c,
            Outcome::Committed {
                results: vec![
                    (tp(0), CommitResult::Acknowledged),
                    (
                        tp(1),
                        CommitResult::Failed {
                            reason: "ILLEGAL_GENERATION".into(),
                        },
                    ),
                    (
                        tp(2),
                        CommitResult::Unknown {
                            reason: "REQUEST_TIMED_OUT".into(),
                        },
                    ),
                ],
            },
        );
        let f = h.invoke(7, 2, fetch(vec![tp(0), tp(1)]));
        h.complete(
            8,
            f,
            Outcome::Fetched {
                offsets: vec![(tp(0), Some(6)), (tp(1), None)],
            },
        );
        let d = h.invoke(
            9,
            3,
            Op::OffsetDelete {
                group: "g".into(),
                partitions: vec![tp(1)],
            },
        );
        h.complete(
            9,
            d,
            Outcome::Deleted {
                results: vec![(
                    tp(1),
                    CommitResult::Failed {
                        reason: "GROUP_SUBSCRIBED_TO_TOPIC".into(),
                    },
                )],
            },
        );
        h.group(
            9,
            1,
            GroupEvent::Revoked {
                group: "g".into(),
                member_id: "m-1".into(),
                generation: 3,
            },
        );
        let expected = "\
1 p1 invoke join group=\"g\"
2 p1 ok joined member=\"m-1\" generation=3 [t-0, t-1]
3 p1 invoke poll group=\"g\" member=\"m-1\" generation=3 t-0 from=5
4 p1 ok read hw=6 [5:p9#0]
5 p1 invoke offset-commit group=\"g\" member=\"m-1\" generation=3 [t-0:6, t-1:0, t-2:1]
6 p1 ok committed [t-0 ok, t-1 fail \"ILLEGAL_GENERATION\", t-2 info \"REQUEST_TIMED_OUT\"]
7 p2 invoke offset-fetch group=\"g\" [t-0, t-1]
8 p2 ok fetched [t-0:6, t-1:none]
9 p3 invoke offset-delete group=\"g\" [t-1]
9 p3 ok deleted [t-1 fail \"GROUP_SUBSCRIBED_TO_TOPIC\"]
9 p1 group revoked group=\"g\" member=\"m-1\" generation=3
";
        assert_eq!(h.render(), expected);
        assert_eq!(h.operations().len(), 5);
    }

    #[test]
    #[should_panic(expected = "naming t-0 twice")]
    fn a_commit_naming_a_partition_twice_panics() {
        let mut h = History::new();
        h.invoke(1, 1, commit(vec![(tp(0), 1), (tp(0), 2)]));
    }

    #[test]
    #[should_panic(expected = "empty offset fetch")]
    fn an_empty_offset_fetch_panics() {
        let mut h = History::new();
        h.invoke(1, 1, fetch(vec![]));
    }

    #[test]
    #[should_panic(expected = "which it did not ask about or was answered for twice")]
    fn an_answer_for_a_partition_not_committed_panics() {
        let mut h = History::new();
        let c = h.invoke(1, 1, commit(vec![(tp(0), 1)]));
        h.complete(
            2,
            c,
            Outcome::Committed {
                results: vec![(tp(1), CommitResult::Acknowledged)],
            },
        );
    }

    #[test]
    #[should_panic(expected = "which it did not ask about or was answered for twice")]
    fn a_fetch_answering_a_partition_twice_panics() {
        let mut h = History::new();
        let f = h.invoke(1, 1, fetch(vec![tp(0)]));
        h.complete(
            2,
            f,
            Outcome::Fetched {
                offsets: vec![(tp(0), Some(1)), (tp(0), Some(1))],
            },
        );
    }

    #[test]
    #[should_panic(expected = "wrong kind")]
    fn a_poll_completed_as_a_corrupt_read_panics() {
        let mut h = History::new();
        let p = h.invoke(1, 1, poll(0));
        h.complete(
            2,
            p,
            Outcome::CorruptRead {
                offset: 0,
                reason: "crc".into(),
            },
        );
    }

    #[test]
    #[should_panic(expected = "wrong kind")]
    fn a_join_completed_with_fetched_offsets_panics() {
        let mut h = History::new();
        let j = h.invoke(1, 1, Op::Join { group: "g".into() });
        h.complete(2, j, Outcome::Fetched { offsets: vec![] });
    }

    #[test]
    fn identical_runs_compare_equal() {
        let build = || {
            let mut h = History::new();
            let a = h.invoke(
                1,
                1,
                Op::Append {
                    values: vec![v(1, 0)],
                },
            );
            h.complete(2, a, Outcome::Appended { base_offset: 0 });
            h
        };
        assert_eq!(build(), build());
        assert_eq!(build().render(), build().render());
    }
}
