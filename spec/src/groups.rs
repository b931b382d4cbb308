//! Checkers of consumer groups, judged over what the members themselves
//! reported (see [`crate::history`]): the joins with the assignment each one
//! returned, revocations, polls, offset commits and offset fetches.
//!
//! [`check_groups`] runs them all into the same [`Report`] as
//! [`crate::check`]; each is its own function, named after the anomaly it
//! reports:
//!
//! - split-assignment: at most one member owns a partition in one
//!   generation of a group. Named after Jepsen's split-brain (two parties
//!   each holding what only one may hold), scoped to one assignment;
//!   "duplicate" already names a record served twice.
//! - generation-regress: a group's generations only increase, in real time.
//! - zombie-commit: a commit from a generation older than one a join has
//!   already completed with is refused (Kafka's fencing of zombies).
//! - lost-commit: an offset fetch returns what could be the latest commit:
//!   an acknowledged commit survives broker crashes and power loss until a
//!   later commit supersedes it, and an offset nobody (successfully)
//!   committed is never returned.
//! - commit-regress: a member that keeps a partition never sees its
//!   committed offset go backwards.
//! - unseen (Jepsen's name for acknowledged records no poll ever saw): with
//!   the group stable at the end and no faults while it healed, every record
//!   below each partition's final high watermark reached some member of the
//!   group (liveness).
//!
//! The rules assume Kafka's classic group protocol: one generation id per
//! group; the coordinator persists a generation's assignment before any
//! SyncGroup of it is answered, so whatever a member saw is durable; and
//! commits are checked against the member id and generation (KIP-848's
//! per-member epochs would need rules of their own). Timing is as for the
//! partition checkers: an operation takes effect somewhere within its
//! interval and equal timestamps are not ordered; an operation of unknown
//! outcome may take effect at any time after its invocation, even after its
//! completion was recorded (a timed-out request may still reach the
//! coordinator), so it is never known to be superseded. A failed commit
//! definitely did not take effect.
//!
//! An admin's OffsetDelete is a commit of "no offset" to these rules. Gaps:
//! DeleteGroups (which also resets the generation, so a run that deletes a
//! group must use a new group id afterwards) and offsets expiring after
//! `offsets.retention.minutes` are not modeled; a fetch answering no offset
//! after an acknowledged commit is lost-commit.
//!
//! Every checker is linear in the history up to sorting and map lookups,
//! and deterministic: maps are only used for lookups and anomalies are found
//! walking the history in order.

use std::collections::{BTreeMap, BTreeSet};

use crate::checker::{list_offsets, real_time_regressions};
use crate::history::{
    CommitResult, EventKind, Generation, GroupEvent, History, Offset, Op, OpId, Operation, Outcome,
    ProcessId, TopicPartition, Value,
};
use crate::{AnomalyKind, CheckOptions, FinalLog, Report};

/// What the run ended with for one partition a group consumed, for unseen.
#[derive(Clone, Debug, Default)]
pub struct FinalPartition {
    /// The partition's log as read offline after the run.
    pub log: FinalLog,
    /// The partition's high watermark when the healing phase ended: every
    /// record of `log` below it had to reach every group consuming the topic.
    pub high_watermark: Offset,
}

/// Judges the consumer groups of `history`: split-assignment,
/// generation-regress, zombie-commit, lost-commit and commit-regress, unless
/// `CheckOptions::group_state_may_regress`; and unseen against `finals` when
/// `CheckOptions::groups_stable_at_end`. Anomalies go into `report` (which
/// [`crate::check`] may already hold the partition checkers' verdict in);
/// its operation counts are left alone.
///
/// For unseen, each group named by a join is judged on the partitions of
/// `finals` whose topic its joins were ever assigned a partition of, or on
/// all of them if no join of it ever completed (a stable group has members).
pub fn check_groups(
    history: &History,
    finals: &BTreeMap<TopicPartition, FinalPartition>,
    options: &CheckOptions,
    report: &mut Report,
) {
    let operations = history.operations();
    let ix = GroupIndex::build(&operations);
    if !options.group_state_may_regress {
        check_split_assignments(&ix, report);
        check_generation_regress(&ix, report);
        check_zombie_commits(&ix, report);
        check_lost_commits(&ix, report);
        check_commit_regress(history, &ix, report);
    }
    if options.groups_stable_at_end {
        check_unseen(&ix, finals, report);
    }
}

/// One join that completed ok: the member's own report of what it owns.
struct Joined<'h> {
    op: OpId,
    process: ProcessId,
    invoke_ns: u64,
    complete_ns: u64,
    group: &'h str,
    member_id: &'h str,
    generation: Generation,
    partitions: &'h [TopicPartition],
}

/// Whether one partition of an offset commit took effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    Acknowledged { complete_ns: u64 },
    Unknown,
    Failed,
}

impl Effect {
    /// The effect on `partition` of a commit that ended with `outcome`
    /// (None: never completed) at `complete_ns`.
    fn of(
        outcome: Option<&Outcome>,
        complete_ns: Option<u64>,
        partition: &TopicPartition,
    ) -> Effect {
        match outcome {
            Some(Outcome::Failed { .. }) => Effect::Failed,
            Some(Outcome::Committed { results }) | Some(Outcome::Deleted { results }) => {
                match results.iter().find(|(tp, _)| tp == partition) {
                    Some((_, CommitResult::Acknowledged)) => Effect::Acknowledged {
                        // A commit with an outcome completed; the fallback is never used.
                        complete_ns: complete_ns.unwrap_or(u64::MAX),
                    },
                    Some((_, CommitResult::Failed { .. })) => Effect::Failed,
                    Some((_, CommitResult::Unknown { .. })) | None => Effect::Unknown,
                }
            }
            _ => Effect::Unknown,
        }
    }

    /// Until when the commit may be the latest one: never known to be
    /// superseded for an unknown one, its completion for an acknowledged one
    /// (later commits are judged from there).
    fn known_done_ns(self) -> Option<u64> {
        match self {
            Effect::Acknowledged { complete_ns } => Some(complete_ns),
            Effect::Unknown | Effect::Failed => None,
        }
    }
}

/// One partition of one offset commit or delete, whatever its outcome.
struct Commit<'h> {
    op: OpId,
    process: ProcessId,
    group: &'h str,
    /// The member and generation of a commit; None for a delete.
    by: Option<(&'h str, Generation)>,
    partition: &'h TopicPartition,
    /// The offset committed; None for a delete.
    offset: Option<Offset>,
    invoke_ns: u64,
    effect: Effect,
}

impl Commit<'_> {
    /// "offset-commit op #7 by member "m" (process 1) in generation 2".
    fn describe(&self) -> String {
        match self.by {
            Some((member_id, generation)) => format!(
                "offset-commit op #{} by member {member_id:?} (process {}) in generation \
                 {generation}",
                self.op, self.process
            ),
            None => format!("offset-delete op #{} (process {})", self.op, self.process),
        }
    }
}

/// One partition an offset fetch answered.
struct Fetch<'h> {
    op: OpId,
    group: &'h str,
    partition: &'h TopicPartition,
    invoke_ns: u64,
    complete_ns: u64,
    offset: Option<Offset>,
}

/// Lookups shared by the group checkers, built in one pass.
struct GroupIndex<'h> {
    /// Every group a join named, completed or not.
    groups: BTreeSet<&'h str>,
    /// Joins that completed ok, in invocation order.
    joins: Vec<Joined<'h>>,
    /// Every partition of every offset commit and delete, in invocation order.
    commits: Vec<Commit<'h>>,
    /// Every answered partition of every ok offset fetch, in invocation order.
    fetches: Vec<Fetch<'h>>,
    /// The values ok polls delivered, per group and partition.
    delivered: BTreeMap<(&'h str, &'h TopicPartition), BTreeSet<Value>>,
}

impl<'h> GroupIndex<'h> {
    fn build(operations: &'h [Operation]) -> GroupIndex<'h> {
        let mut ix = GroupIndex {
            groups: BTreeSet::new(),
            joins: Vec::new(),
            commits: Vec::new(),
            fetches: Vec::new(),
            delivered: BTreeMap::new(),
        };
        for operation in operations {
            match (&operation.op, &operation.outcome) {
                (Op::Join { group }, outcome) => {
                    ix.groups.insert(group);
                    if let (
                        Some(Outcome::Joined {
                            member_id,
                            generation,
                            partitions,
                        }),
                        Some(complete_ns),
                    ) = (outcome, operation.complete_ns)
                    {
                        ix.joins.push(Joined {
                            op: operation.id,
                            process: operation.process,
                            invoke_ns: operation.invoke_ns,
                            complete_ns,
                            group,
                            member_id,
                            generation: *generation,
                            partitions,
                        });
                    }
                }
                (
                    Op::OffsetCommit {
                        group,
                        member_id,
                        generation,
                        offsets,
                    },
                    outcome,
                ) => {
                    for (partition, offset) in offsets {
                        ix.commits.push(Commit {
                            op: operation.id,
                            process: operation.process,
                            group,
                            by: Some((member_id, *generation)),
                            partition,
                            offset: Some(*offset),
                            invoke_ns: operation.invoke_ns,
                            effect: Effect::of(outcome.as_ref(), operation.complete_ns, partition),
                        });
                    }
                }
                (Op::OffsetDelete { group, partitions }, outcome) => {
                    for partition in partitions {
                        ix.commits.push(Commit {
                            op: operation.id,
                            process: operation.process,
                            group,
                            by: None,
                            partition,
                            offset: None,
                            invoke_ns: operation.invoke_ns,
                            effect: Effect::of(outcome.as_ref(), operation.complete_ns, partition),
                        });
                    }
                }
                (Op::OffsetFetch { group, .. }, Some(Outcome::Fetched { offsets })) => {
                    for (partition, offset) in offsets {
                        ix.fetches.push(Fetch {
                            op: operation.id,
                            group,
                            partition,
                            invoke_ns: operation.invoke_ns,
                            // A fetch with an outcome completed; the fallback is never used.
                            complete_ns: operation.complete_ns.unwrap_or(u64::MAX),
                            offset: *offset,
                        });
                    }
                }
                (
                    Op::Poll {
                        group, partition, ..
                    },
                    Some(Outcome::Read { records, .. }),
                ) => {
                    ix.delivered
                        .entry((group, partition))
                        .or_default()
                        .extend(records.iter().map(|&(_, value)| value));
                }
                _ => {}
            }
        }
        ix
    }

    /// The ok joins of each group, in invocation order.
    fn joins_by_group(&self) -> BTreeMap<&'h str, Vec<&Joined<'h>>> {
        let mut by_group: BTreeMap<&str, Vec<&Joined<'h>>> = BTreeMap::new();
        for join in &self.joins {
            by_group.entry(join.group).or_default().push(join);
        }
        by_group
    }
}

/// split-assignment: in one generation of a group, each partition has at
/// most one owner. Two ok joins of the same generation whose assignments
/// share a partition, reported by different members (another member id or
/// another process), are an anomaly, reported once per group, generation
/// and partition. A member reporting its own assignment twice is not.
fn check_split_assignments(ix: &GroupIndex<'_>, report: &mut Report) {
    let mut owner: BTreeMap<(&str, Generation, &TopicPartition), &Joined<'_>> = BTreeMap::new();
    let mut reported: BTreeSet<(&str, Generation, &TopicPartition)> = BTreeSet::new();
    for join in &ix.joins {
        for tp in join.partitions {
            let key = (join.group, join.generation, tp);
            let first = *owner.entry(key).or_insert(join);
            if (first.process, first.member_id) == (join.process, join.member_id)
                || !reported.insert(key)
            {
                continue;
            }
            report.record(AnomalyKind::SplitAssignment, || {
                format!(
                    "group {:?} generation {}: partition {tp} is owned by member {:?} (process \
                     {}, join op #{}) and by member {:?} (process {}, join op #{}); a partition \
                     has at most one owner in a generation",
                    join.group,
                    join.generation,
                    first.member_id,
                    first.process,
                    first.op,
                    join.member_id,
                    join.process,
                    join.op
                )
            });
        }
    }
}

/// generation-regress: a group's generation only increases, so a join
/// invoked after another join of the same group completed (strictly later)
/// must return a generation at least as high. Equal generations are fine
/// (the members of one generation); joins overlapping in time are not
/// compared, since a SyncGroup answer may be delayed on its way. Each join
/// is reported at most once, against the highest generation completed before
/// it was invoked.
fn check_generation_regress(ix: &GroupIndex<'_>, report: &mut Report) {
    for joins in ix.joins_by_group().values() {
        let regressions = real_time_regressions(
            joins,
            |join| (join.invoke_ns, join.complete_ns),
            |join| join.generation,
        );
        for (join, earlier) in regressions {
            report.record(AnomalyKind::GenerationRegress, || {
                format!(
                    "group {:?}: member {:?} (process {}) joined generation {} at join op #{}, \
                     invoked at {} ns, but member {:?} (process {}) had already joined generation \
                     {} at join op #{}, completed at {} ns; a group's generations only increase",
                    join.group,
                    join.member_id,
                    join.process,
                    join.generation,
                    join.op,
                    join.invoke_ns,
                    earlier.member_id,
                    earlier.process,
                    earlier.generation,
                    earlier.op,
                    earlier.complete_ns
                )
            });
        }
    }
}

/// zombie-commit: once a join of generation g has completed, the group is
/// at g or later, and the coordinator refuses a commit of an older
/// generation (ILLEGAL_GENERATION); so an offset commit acknowledged for
/// some partition, invoked strictly after a join of its group with a higher
/// generation completed, is an anomaly. Commits of generation -1 (from
/// outside any generation, which Kafka accepts for an empty group) are not
/// judged. Each commit is reported at most once.
fn check_zombie_commits(ix: &GroupIndex<'_>, report: &mut Report) {
    // Per group: the joins by completion, each with the highest generation
    // (earliest on ties) completed up to it.
    let mut highest: BTreeMap<&str, Vec<(u64, &Joined<'_>)>> = BTreeMap::new();
    for (group, mut joins) in ix.joins_by_group() {
        joins.sort_by_key(|join| join.complete_ns);
        let mut best: Option<&Joined<'_>> = None;
        let entries = joins
            .into_iter()
            .map(|join| {
                if best.is_none_or(|b| join.generation > b.generation) {
                    best = Some(join);
                }
                (join.complete_ns, best.unwrap_or(join))
            })
            .collect();
        highest.insert(group, entries);
    }
    let mut reported: BTreeSet<OpId> = BTreeSet::new();
    for commit in &ix.commits {
        let Some((_, generation)) = commit.by else {
            continue;
        };
        if generation < 0
            || !matches!(commit.effect, Effect::Acknowledged { .. })
            || reported.contains(&commit.op)
        {
            continue;
        }
        let Some(joins) = highest.get(commit.group) else {
            continue;
        };
        let before = joins.partition_point(|&(complete_ns, _)| complete_ns < commit.invoke_ns);
        let Some(&(_, newer)) = before.checked_sub(1).and_then(|at| joins.get(at)) else {
            continue;
        };
        if newer.generation <= generation {
            continue;
        }
        reported.insert(commit.op);
        report.record(AnomalyKind::ZombieCommit, || {
            format!(
                "{} of group {:?} was acknowledged for {} at {}, but member {:?} (process {}) \
                 had joined generation {} at join op #{}, completed at {} ns, before the commit \
                 was invoked at {} ns; the coordinator must refuse commits of older generations",
                commit.describe(),
                commit.group,
                commit.partition,
                show_committed(commit.offset),
                newer.member_id,
                newer.process,
                newer.generation,
                newer.op,
                newer.complete_ns,
                commit.invoke_ns
            )
        });
    }
}

/// The committed offset of one partition of one group, as a register: its
/// commits and the fetches that read it.
#[derive(Default)]
struct Register<'a, 'h> {
    /// In invocation order.
    commits: Vec<&'a Commit<'h>>,
    /// In invocation order.
    fetches: Vec<&'a Fetch<'h>>,
}

/// lost-commit: an offset fetch of a partition, invoked at t and completed
/// at t', must return what could be the latest commit of it by then.
///
/// A commit c is definitely superseded at t if an acknowledged commit c' of
/// the same group and partition was invoked after c was acknowledged and
/// itself completed before t: c' took effect after c and before the fetch.
/// A commit of unknown outcome is never definitely superseded, and a failed
/// one never took effect. An offset delete is a commit of no offset. The
/// fetch may then return the offset of any commit that did not fail, was
/// invoked by t' (equal times count, being unordered), and was not
/// definitely superseded at t; or no offset, if no acknowledged commit
/// completed before t (the partition starts with none).
/// Anything else is an anomaly: an acknowledged commit's effect was lost (a
/// broker crash, a power loss, a coordinator moving) or the fetch returned
/// an offset never committed. Each answered partition of each fetch is
/// judged once; partitions the answer left out observed nothing.
///
/// Per register: the time each acknowledged commit is superseded is the
/// earliest completion among the acknowledged commits invoked after it
/// completed (a suffix minimum over invocation order); per offset, a prefix
/// maximum of those times over invocation order answers each fetch with a
/// binary search.
fn check_lost_commits(ix: &GroupIndex<'_>, report: &mut Report) {
    let mut registers: BTreeMap<(&str, &TopicPartition), Register<'_, '_>> = BTreeMap::new();
    for commit in &ix.commits {
        let register = registers
            .entry((commit.group, commit.partition))
            .or_default();
        register.commits.push(commit);
    }
    for fetch in &ix.fetches {
        let register = registers.entry((fetch.group, fetch.partition)).or_default();
        register.fetches.push(fetch);
    }
    for register in registers.values() {
        let acknowledged: Vec<(u64, u64)> = register
            .commits
            .iter()
            .filter_map(|c| c.effect.known_done_ns().map(|done| (c.invoke_ns, done)))
            .collect();
        // earliest_done[i]: the earliest completion among acknowledged[i..].
        let mut earliest_done = vec![u64::MAX; acknowledged.len() + 1];
        for (i, &(_, done)) in acknowledged.iter().enumerate().rev() {
            earliest_done[i] = earliest_done[i + 1].min(done);
        }
        let superseded_at = |effect: Effect| match effect.known_done_ns() {
            Some(done) => {
                earliest_done[acknowledged.partition_point(|&(invoke, _)| invoke <= done)]
            }
            None => u64::MAX,
        };
        // Per offset: (invocation, latest supersession among commits of it invoked so far).
        let mut by_offset: BTreeMap<Option<Offset>, Vec<(u64, u64)>> = BTreeMap::new();
        for commit in &register.commits {
            if commit.effect == Effect::Failed {
                continue;
            }
            let list = by_offset.entry(commit.offset).or_default();
            let latest = list.last().map_or(0, |&(_, latest)| latest);
            list.push((commit.invoke_ns, latest.max(superseded_at(commit.effect))));
        }
        // The initial "no offset" is superseded by the first acknowledgement.
        let none_superseded_at = earliest_done[0];
        for fetch in &register.fetches {
            let initially = fetch.offset.is_none() && none_superseded_at >= fetch.invoke_ns;
            let allowed = initially
                || by_offset.get(&fetch.offset).is_some_and(|list| {
                    let invoked = list.partition_point(|&(invoke, _)| invoke <= fetch.complete_ns);
                    invoked
                        .checked_sub(1)
                        .is_some_and(|last| list[last].1 >= fetch.invoke_ns)
                });
            if !allowed {
                report.record(AnomalyKind::LostCommit, || {
                    explain_lost_commit(register, fetch)
                });
            }
        }
    }
}

/// Why a fetch's answer could not be the latest commit, for lost-commit.
fn explain_lost_commit(register: &Register<'_, '_>, fetch: &Fetch<'_>) -> String {
    let latest = register
        .commits
        .iter()
        .filter_map(|c| match c.effect {
            Effect::Acknowledged { complete_ns } if complete_ns < fetch.invoke_ns => {
                Some((complete_ns, *c))
            }
            _ => None,
        })
        .max_by_key(|&(complete_ns, c)| (complete_ns, c.op));
    let latest_text = match latest {
        Some((complete_ns, c)) => format!(
            "the latest acknowledged commit before the fetch was {}, of {}, completed at \
             {complete_ns} ns",
            c.describe(),
            show_committed(c.offset)
        ),
        None => "no commit had been acknowledged before the fetch".to_string(),
    };
    let head = format!(
        "offset-fetch op #{} of group {:?}, invoked at {} ns, returned {} for {}",
        fetch.op,
        fetch.group,
        fetch.invoke_ns,
        show_committed(fetch.offset),
        fetch.partition
    );
    let proposals: Vec<&Commit<'_>> = register
        .commits
        .iter()
        .copied()
        .filter(|c| c.offset == fetch.offset)
        .collect();
    if fetch.offset.is_none() && proposals.is_empty() {
        // The partition's initial state, long superseded.
        return format!("{head}, but {latest_text}");
    }
    let ops = |commits: &[&Commit<'_>]| {
        let ids: Vec<String> = commits.iter().map(|c| format!("#{}", c.op)).collect();
        ids.join(", ")
    };
    let live: Vec<&Commit<'_>> = proposals
        .iter()
        .copied()
        .filter(|c| c.effect != Effect::Failed)
        .collect();
    let why = if proposals.is_empty() {
        "which no commit proposed".to_string()
    } else if live.is_empty() {
        format!(
            "which only failed commits proposed (op {})",
            ops(&proposals)
        )
    } else if live.iter().all(|c| c.invoke_ns > fetch.complete_ns) {
        format!(
            "which was first committed by op #{}, invoked at {} ns, after the fetch completed at \
             {} ns",
            live[0].op, live[0].invoke_ns, fetch.complete_ns
        )
    } else {
        format!(
            "but every commit of that offset (op {}) had been superseded before the fetch",
            ops(&live)
        )
    };
    format!("{head}, {why}; {latest_text}")
}

/// "offset 5", or "no offset" for Kafka's -1.
fn show_committed(offset: Option<Offset>) -> String {
    match offset {
        Some(offset) => format!("offset {offset}"),
        None => "no offset".to_string(),
    }
}

/// A committed offset a member saw: its own acknowledged commit, or a fetch.
struct Seen {
    offset: Option<Offset>,
    invoke_ns: u64,
    op: OpId,
    by_fetch: bool,
}

/// One member's ownership of one partition, from the join that gave it.
struct Span<'h> {
    member_id: &'h str,
    /// The join that began the span, and its generation.
    since: (OpId, Generation),
    /// The generation of the member's latest join, which kept the partition.
    generation: Generation,
    /// What the member saw, as a stack whose offsets fall strictly from
    /// bottom to top: a newer sighting removes the older ones it is at
    /// least as high as, which can no longer be the latest higher one.
    seen: Vec<Seen>,
    /// Per offset the member itself committed in the span (failed commits
    /// aside): the latest time until which that commit could still take
    /// effect after another sighting was invoked (its acknowledgement, or
    /// forever for an unknown outcome).
    own: BTreeMap<Option<Offset>, u64>,
}

/// commit-regress: a member that keeps a partition never sees its committed
/// offset go backwards.
///
/// A member (one process) owns a partition of a group from an ok join whose
/// assignment holds it, across its following ok joins that keep it (same
/// member id), until a [`GroupEvent::Revoked`] of the group or a join without
/// it. Within that span it sees committed offsets: its own acknowledged
/// commits and its offset fetches (no offset counting lowest). An offset
/// fetch that returns less than an earlier sighting is an anomaly, unless
/// the member itself committed the lower offset in the span by a commit that
/// could have taken effect after that sighting was invoked: one acknowledged
/// no earlier than the sighting's invocation (a deliberate rewind), or one of
/// unknown outcome (delayed). Nobody else may commit the partition while the
/// member owns it, so another member's commit is no excuse: an accepted
/// zombie commit shows up here. The sighting judged against is the latest one
/// above the fetched offset, the one the excuse is hardest for.
///
/// A member only believes it owns its partitions: once the group may have
/// moved past its generation without it (a join of a higher generation was
/// invoked by the time the fetch completed), it may be a zombie whose
/// partition has a new owner committing it, so such a fetch is neither
/// judged nor kept as a sighting. What is judged is the member's stable
/// windows, from its join's completion to the next rebalance, compared across
/// the generations it kept the partition in. One anomaly per offending fetch
/// and partition; one pass over the events, with a binary search per fetch.
fn check_commit_regress(history: &History, ix: &GroupIndex<'_>, report: &mut Report) {
    // Per group: joins by invocation, with the highest generation invoked so far.
    let mut newest: BTreeMap<&str, Vec<(u64, Generation)>> = BTreeMap::new();
    for join in &ix.joins {
        let list = newest.entry(join.group).or_default();
        let highest = list
            .last()
            .map_or(join.generation, |&(_, g)| g.max(join.generation));
        list.push((join.invoke_ns, highest));
    }
    let newest_by = |group: &str, time_ns: u64| {
        let list = newest.get(group)?;
        let invoked = list.partition_point(|&(invoke_ns, _)| invoke_ns <= time_ns);
        invoked.checked_sub(1).map(|last| list[last].1)
    };
    let events = history.events();
    let mut spans: BTreeMap<(ProcessId, &str), BTreeMap<&TopicPartition, Span<'_>>> =
        BTreeMap::new();
    for event in events {
        let (op, outcome) = match &event.kind {
            EventKind::Group(GroupEvent::Revoked { group, .. }) => {
                spans.remove(&(event.process, group.as_str()));
                continue;
            }
            EventKind::Complete { op, outcome } => (*op, outcome),
            _ => continue,
        };
        let Some(EventKind::Invoke(invoked)) = events.get(op).map(|e| &e.kind) else {
            continue;
        };
        let invoke_ns = events[op].time_ns;
        match (invoked, outcome) {
            (
                Op::Join { group },
                Outcome::Joined {
                    member_id,
                    generation,
                    partitions,
                },
            ) => {
                let owned = spans.entry((event.process, group)).or_default();
                owned.retain(|tp, span| span.member_id == member_id && partitions.contains(tp));
                for tp in partitions {
                    let span = owned.entry(tp).or_insert_with(|| Span {
                        member_id,
                        since: (op, *generation),
                        generation: *generation,
                        seen: Vec::new(),
                        own: BTreeMap::new(),
                    });
                    span.generation = *generation;
                }
            }
            (Op::OffsetCommit { group, offsets, .. }, outcome) => {
                let Some(owned) = spans.get_mut(&(event.process, group.as_str())) else {
                    continue;
                };
                for (tp, offset) in offsets {
                    let Some(span) = owned.get_mut(tp) else {
                        continue;
                    };
                    let effect = Effect::of(Some(outcome), Some(event.time_ns), tp);
                    let until = match effect {
                        Effect::Failed => continue,
                        Effect::Unknown => u64::MAX,
                        Effect::Acknowledged { complete_ns } => complete_ns,
                    };
                    let entry = span.own.entry(Some(*offset)).or_insert(until);
                    *entry = (*entry).max(until);
                    if effect != Effect::Unknown {
                        push_seen(span, Some(*offset), invoke_ns, op, false);
                    }
                }
            }
            (Op::OffsetFetch { group, .. }, Outcome::Fetched { offsets }) => {
                let Some(owned) = spans.get_mut(&(event.process, group.as_str())) else {
                    continue;
                };
                let newest = newest_by(group, event.time_ns);
                for (tp, offset) in offsets {
                    let Some(span) = owned.get_mut(tp) else {
                        continue;
                    };
                    if newest.is_some_and(|newest| newest > span.generation) {
                        continue;
                    }
                    let fetch = Sighting {
                        process: event.process,
                        group,
                        tp,
                        op,
                        offset: *offset,
                    };
                    judge_fetch(span, &fetch, report);
                    push_seen(span, *offset, invoke_ns, op, true);
                }
            }
            _ => {}
        }
    }
}

/// One partition of an offset fetch inside a span, for commit-regress.
struct Sighting<'a> {
    process: ProcessId,
    group: &'a str,
    tp: &'a TopicPartition,
    op: OpId,
    offset: Option<Offset>,
}

/// Reports a fetch below an earlier sighting of its span that the member's
/// own commits do not explain.
fn judge_fetch(span: &Span<'_>, fetch: &Sighting<'_>, report: &mut Report) {
    let above = span.seen.partition_point(|seen| seen.offset > fetch.offset);
    let Some(earlier) = above.checked_sub(1).map(|at| &span.seen[at]) else {
        return;
    };
    let excused = span
        .own
        .get(&fetch.offset)
        .is_some_and(|&until| until >= earlier.invoke_ns);
    if excused {
        return;
    }
    report.record(AnomalyKind::CommitRegress, || {
        let source = if earlier.by_fetch {
            "offset-fetch"
        } else {
            "its acknowledged offset-commit"
        };
        format!(
            "member {:?} (process {}) of group {:?}, owning {} since generation {} (join op #{}) \
             and in generation {}, fetched {} for it at offset-fetch op #{}, below the offset {} \
             it had seen at {source} op #{}; none of its own commits could have put it back",
            span.member_id,
            fetch.process,
            fetch.group,
            fetch.tp,
            span.since.1,
            span.since.0,
            span.generation,
            show_committed(fetch.offset),
            fetch.op,
            earlier.offset.unwrap_or(-1),
            earlier.op
        )
    });
}

/// Adds a sighting to a span's stack, dropping the ones it dominates.
fn push_seen(
    span: &mut Span<'_>,
    offset: Option<Offset>,
    invoke_ns: u64,
    op: OpId,
    by_fetch: bool,
) {
    while span.seen.last().is_some_and(|top| top.offset <= offset) {
        span.seen.pop();
    }
    span.seen.push(Seen {
        offset,
        invoke_ns,
        op,
        by_fetch,
    });
}

/// unseen: with the group stable at the end and a healing phase without
/// faults, every record of a partition the group consumed, from the final
/// log's start up to the partition's final high watermark, was delivered by
/// some ok poll of some member of the group (any generation). Records are
/// matched by value, since a record's offset is the partition checkers'
/// business. One anomaly per group and partition, counting what is missing.
fn check_unseen(
    ix: &GroupIndex<'_>,
    finals: &BTreeMap<TopicPartition, FinalPartition>,
    report: &mut Report,
) {
    for &group in &ix.groups {
        let topics: BTreeSet<&str> = ix
            .joins
            .iter()
            .filter(|join| join.group == group)
            .flat_map(|join| join.partitions.iter().map(|tp| tp.topic.as_str()))
            .collect();
        for (tp, end) in finals {
            if !topics.is_empty() && !topics.contains(tp.topic.as_str()) {
                continue;
            }
            let delivered = ix.delivered.get(&(group, tp));
            let missing: Vec<(Offset, Value)> = end
                .log
                .records
                .iter()
                .copied()
                .filter(|&(offset, value)| {
                    offset >= end.log.log_start_offset
                        && offset < end.high_watermark
                        && !delivered.is_some_and(|values| values.contains(&value))
                })
                .collect();
            let Some(&(first_offset, first)) = missing.first() else {
                continue;
            };
            report.record(AnomalyKind::Unseen, || {
                let offsets: Vec<Offset> = missing.iter().map(|&(offset, _)| offset).collect();
                format!(
                    "group {group:?} never delivered {} of the records of {tp} below its final \
                     high watermark {} to any member, the first {first} at offset \
                     {first_offset}; missing {}",
                    missing.len(),
                    end.high_watermark,
                    list_offsets(&offsets)
                )
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::{assert_kinds, details};
    use crate::history::NodeEvent;
    use crate::{check, ANOMALY_DETAILS_MAX};

    const G: &str = "g";

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition::new("t", partition)
    }

    fn member(process: ProcessId) -> String {
        format!("m{process}")
    }

    /// Builds group histories tersely, one nanosecond per event.
    #[derive(Default)]
    struct Builder {
        history: History,
    }

    impl Builder {
        /// A history in which process 1 joined generation 1 as member "m1",
        /// owning these partitions of topic "t".
        fn joined(partitions: &[i32]) -> Builder {
            let mut b = Builder::default();
            b.join(1, 1, partitions);
            b
        }

        /// The time of the next event.
        fn tick(&self) -> u64 {
            self.history.events().last().map_or(1, |e| e.time_ns + 1)
        }

        fn invoke(&mut self, process: ProcessId, op: Op) -> OpId {
            let t = self.tick();
            self.history.invoke(t, process, op)
        }

        fn complete(&mut self, op: OpId, outcome: Outcome) {
            let t = self.tick();
            self.history.complete(t, op, outcome);
        }

        fn invoke_join(&mut self, process: ProcessId) -> OpId {
            self.invoke(process, Op::Join { group: G.into() })
        }

        fn complete_join(&mut self, op: OpId, generation: Generation, partitions: &[i32]) {
            let process = self.history.events()[op].process;
            self.complete(
                op,
                Outcome::Joined {
                    member_id: member(process),
                    generation,
                    partitions: partitions.iter().map(|&p| tp(p)).collect(),
                },
            );
        }

        /// Process `process` joins as member "m<process>".
        fn join(&mut self, process: ProcessId, generation: Generation, partitions: &[i32]) -> OpId {
            let op = self.invoke_join(process);
            self.complete_join(op, generation, partitions);
            op
        }

        fn invoke_commit(
            &mut self,
            process: ProcessId,
            generation: Generation,
            partition: i32,
            offset: Offset,
        ) -> OpId {
            self.invoke(
                process,
                Op::OffsetCommit {
                    group: G.into(),
                    member_id: member(process),
                    generation,
                    offsets: vec![(tp(partition), offset)],
                },
            )
        }

        fn commit(
            &mut self,
            process: ProcessId,
            generation: Generation,
            partition: i32,
            offset: Offset,
            result: CommitResult,
        ) -> OpId {
            let op = self.invoke_commit(process, generation, partition, offset);
            self.complete(
                op,
                Outcome::Committed {
                    results: vec![(tp(partition), result)],
                },
            );
            op
        }

        fn commit_ok(
            &mut self,
            process: ProcessId,
            generation: Generation,
            partition: i32,
            offset: Offset,
        ) -> OpId {
            self.commit(
                process,
                generation,
                partition,
                offset,
                CommitResult::Acknowledged,
            )
        }

        fn commit_unknown(&mut self, process: ProcessId, generation: Generation, offset: Offset) {
            let op = self.invoke_commit(process, generation, 0, offset);
            self.complete(
                op,
                Outcome::Unknown {
                    reason: "timeout".into(),
                },
            );
        }

        /// An admin's offset delete of t-0.
        fn delete(&mut self, process: ProcessId, result: CommitResult) {
            let op = self.invoke(
                process,
                Op::OffsetDelete {
                    group: G.into(),
                    partitions: vec![tp(0)],
                },
            );
            self.complete(
                op,
                Outcome::Deleted {
                    results: vec![(tp(0), result)],
                },
            );
        }

        fn invoke_fetch(&mut self, process: ProcessId) -> OpId {
            self.invoke(
                process,
                Op::OffsetFetch {
                    group: G.into(),
                    partitions: vec![tp(0)],
                },
            )
        }

        fn complete_fetch(&mut self, op: OpId, offset: Option<Offset>) {
            self.complete(
                op,
                Outcome::Fetched {
                    offsets: vec![(tp(0), offset)],
                },
            );
        }

        /// Process `process` fetches the committed offset of t-0.
        fn fetch(&mut self, process: ProcessId, offset: Option<Offset>) -> OpId {
            let op = self.invoke_fetch(process);
            self.complete_fetch(op, offset);
            op
        }

        fn poll(
            &mut self,
            process: ProcessId,
            generation: Generation,
            partition: i32,
            records: &[(Offset, Value)],
        ) {
            let op = self.invoke(
                process,
                Op::Poll {
                    group: G.into(),
                    member_id: member(process),
                    generation,
                    partition: tp(partition),
                    from: records.first().map_or(0, |&(offset, _)| offset),
                },
            );
            self.complete(
                op,
                Outcome::Read {
                    records: records.to_vec(),
                    high_watermark: records.last().map_or(0, |&(offset, _)| offset + 1),
                },
            );
        }

        fn revoke(&mut self, process: ProcessId, generation: Generation) {
            let t = self.tick();
            self.history.group(
                t,
                process,
                GroupEvent::Revoked {
                    group: G.into(),
                    member_id: member(process),
                    generation,
                },
            );
        }

        fn check(&self) -> Report {
            self.check_with(&BTreeMap::new(), &CheckOptions::default())
        }

        fn assert_valid(&self) {
            let report = self.check();
            assert!(report.is_valid(), "{}", report.summary());
        }

        fn check_with(
            &self,
            finals: &BTreeMap<TopicPartition, FinalPartition>,
            options: &CheckOptions,
        ) -> Report {
            let mut report = Report::default();
            check_groups(&self.history, finals, options, &mut report);
            report
        }
    }

    fn values(process: u32, n: u32) -> Vec<(Offset, Value)> {
        (0..n)
            .map(|seq| (Offset::from(seq), Value::new(process, seq)))
            .collect()
    }

    fn finals(
        records: &[(TopicPartition, Vec<(Offset, Value)>)],
    ) -> BTreeMap<TopicPartition, FinalPartition> {
        records
            .iter()
            .map(|(tp, records)| {
                let log = FinalLog {
                    records: records.clone(),
                    ..FinalLog::default()
                };
                let high_watermark = log.log_end_offset();
                (
                    tp.clone(),
                    FinalPartition {
                        log,
                        high_watermark,
                    },
                )
            })
            .collect()
    }

    fn stable() -> CheckOptions {
        CheckOptions {
            groups_stable_at_end: true,
            ..CheckOptions::default()
        }
    }

    /// Two members through two generations: m1 owns both partitions, then
    /// m2 joins and takes t-1; commits, fetches and polls all agree.
    fn two_generations() -> Builder {
        let mut b = Builder::joined(&[0, 1]);
        b.fetch(1, None);
        b.poll(1, 1, 0, &values(100, 3));
        b.poll(1, 1, 1, &values(101, 2)[..1]);
        b.commit_ok(1, 1, 0, 3);
        b.commit_ok(1, 1, 1, 1);
        b.revoke(1, 1);
        let j1 = b.invoke_join(1);
        let j2 = b.invoke_join(2);
        b.complete_join(j2, 2, &[1]);
        b.complete_join(j1, 2, &[0]);
        b.fetch(1, Some(3));
        b.poll(2, 2, 1, &values(101, 2)[1..]);
        b.commit_ok(2, 2, 1, 2);
        b.commit_ok(1, 2, 0, 3);
        b.fetch(1, Some(3));
        b
    }

    #[test]
    fn a_correct_group_history_is_valid() {
        let b = two_generations();
        let end = finals(&[(tp(0), values(100, 3)), (tp(1), values(101, 2))]);
        let report = b.check_with(&end, &stable());
        assert!(report.is_valid(), "{}", report.summary());
        // The partition checkers leave group operations alone, but count them.
        let report = check(&b.history, &FinalLog::default(), &CheckOptions::default());
        assert!(report.is_valid(), "{}", report.summary());
        assert_eq!(report.ops_ok, b.history.operations().len());
    }

    #[test]
    fn two_owners_of_a_partition_in_one_generation_are_a_split_assignment() {
        let mut b = Builder::joined(&[0, 1]);
        b.join(1, 1, &[0, 1]);
        b.join(2, 1, &[1]);
        b.join(3, 1, &[1]);
        // Another generation may give the partition to someone else.
        b.join(3, 2, &[0]);
        let report = b.check();
        assert_kinds(&report, &[AnomalyKind::SplitAssignment]);
        assert_eq!(report.count(AnomalyKind::SplitAssignment), 1);
        assert_eq!(
            details(&report, AnomalyKind::SplitAssignment),
            ["group \"g\" generation 1: partition t-1 is owned by member \"m1\" (process 1, join \
              op #0) and by member \"m2\" (process 2, join op #4); a partition has at most one \
              owner in a generation"]
        );
    }

    #[test]
    fn a_join_after_a_higher_generation_completed_is_a_generation_regress() {
        let mut b = Builder::default();
        b.join(1, 2, &[0]);
        b.join(2, 2, &[1]);
        let late = b.invoke_join(3);
        b.join(1, 3, &[0]);
        // Invoked before generation 3 was seen: its answer may have been delayed.
        b.complete_join(late, 2, &[2]);
        b.assert_valid();
        b.join(2, 1, &[1]);
        let report = b.check();
        assert_kinds(&report, &[AnomalyKind::GenerationRegress]);
        let detail = details(&report, AnomalyKind::GenerationRegress)[0];
        assert!(
            detail.starts_with(
                "group \"g\": member \"m2\" (process 2) joined generation 1 at join op #8"
            ),
            "{detail}"
        );
        assert!(
            detail.contains(
                "member \"m1\" (process 1) had already joined generation 3 at join op #5"
            ),
            "{detail}"
        );
    }

    #[test]
    fn a_commit_acknowledged_for_a_fenced_generation_is_a_zombie_commit() {
        let mut b = Builder::joined(&[0]);
        // Invoked before generation 2 formed: the coordinator may have taken it first.
        let early = b.invoke_commit(1, 1, 0, 4);
        b.join(2, 2, &[0]);
        b.complete(
            early,
            Outcome::Committed {
                results: vec![(tp(0), CommitResult::Acknowledged)],
            },
        );
        b.commit(
            1,
            1,
            0,
            5,
            CommitResult::Failed {
                reason: "ILLEGAL_GENERATION".into(),
            },
        );
        b.commit_ok(3, -1, 0, 4);
        b.assert_valid();
        b.commit_ok(1, 1, 0, 4);
        let report = b.check();
        assert_kinds(&report, &[AnomalyKind::ZombieCommit]);
        assert_eq!(
            details(&report, AnomalyKind::ZombieCommit),
            [
                "offset-commit op #10 by member \"m1\" (process 1) in generation 1 of group \"g\" \
              was acknowledged for t-0 at offset 4, but member \"m2\" (process 2) had joined \
              generation 2 at join op #3, completed at 5 ns, before the commit was invoked at 11 \
              ns; the coordinator must refuse commits of older generations"
            ]
        );
    }

    #[test]
    fn a_fetch_forgetting_an_acknowledged_commit_is_a_lost_commit() {
        let mut b = Builder::default();
        b.fetch(2, None);
        b.commit_ok(1, 1, 0, 5);
        b.fetch(2, Some(5));
        // A broker restart excuses nothing: acknowledged commits are durable.
        let t = b.tick();
        b.history.node(
            t,
            0,
            NodeEvent::Opened {
                recovery_point: 0,
                log_end_offset: 0,
            },
        );
        b.fetch(2, None);
        let report = b.check();
        assert_kinds(&report, &[AnomalyKind::LostCommit]);
        assert_eq!(
            details(&report, AnomalyKind::LostCommit),
            [
                "offset-fetch op #7 of group \"g\", invoked at 8 ns, returned no offset for t-0, \
              but the latest acknowledged commit before the fetch was offset-commit op #2 by \
              member \"m1\" (process 1) in generation 1, of offset 5, completed at 4 ns"
            ]
        );
        let lenient = CheckOptions {
            group_state_may_regress: true,
            ..CheckOptions::default()
        };
        assert!(b.check_with(&BTreeMap::new(), &lenient).is_valid());
    }

    #[test]
    fn a_fetch_of_a_superseded_commit_is_a_lost_commit() {
        let mut b = Builder::default();
        b.commit_ok(1, 1, 0, 5);
        b.commit_ok(1, 1, 0, 7);
        b.fetch(2, Some(7));
        b.fetch(2, Some(5));
        let report = b.check();
        assert_kinds(&report, &[AnomalyKind::LostCommit]);
        let detail = details(&report, AnomalyKind::LostCommit)[0];
        assert!(
            detail.contains(
                "returned offset 5 for t-0, but every commit of that offset (op #0) had been \
                 superseded before the fetch; the latest acknowledged commit before the fetch was \
                 offset-commit op #2"
            ),
            "{detail}"
        );
    }

    #[test]
    fn a_fetch_may_return_any_commit_that_could_be_the_latest() {
        let mut b = Builder::default();
        // Unknown: it may still land, even after later acknowledged commits.
        b.commit_unknown(1, 1, 9);
        b.commit_ok(1, 1, 0, 5);
        // A partition the answer leaves out counts as unknown.
        let silent = b.invoke_commit(1, 1, 0, 11);
        b.complete(silent, Outcome::Committed { results: vec![] });
        b.fetch(2, Some(9));
        b.fetch(2, Some(11));
        b.fetch(2, Some(5));
        // Concurrent with a commit of 7: before or after it.
        let during = b.invoke_fetch(2);
        let seven = b.invoke_commit(1, 1, 0, 7);
        let other = b.invoke_fetch(3);
        b.complete(
            seven,
            Outcome::Committed {
                results: vec![(tp(0), CommitResult::Acknowledged)],
            },
        );
        b.complete_fetch(during, Some(5));
        b.complete_fetch(other, Some(7));
        b.assert_valid();
    }

    #[test]
    fn a_fetch_of_an_offset_never_committed_is_a_lost_commit() {
        let mut b = Builder::default();
        b.commit(
            1,
            1,
            0,
            8,
            CommitResult::Failed {
                reason: "ILLEGAL_GENERATION".into(),
            },
        );
        b.fetch(2, Some(42));
        b.fetch(2, Some(8));
        let early = b.fetch(2, Some(3));
        b.commit_ok(1, 1, 0, 3);
        let report = b.check();
        assert_kinds(&report, &[AnomalyKind::LostCommit]);
        let found = details(&report, AnomalyKind::LostCommit);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].contains("returned offset 42 for t-0, which no commit proposed; no commit had been acknowledged before the fetch"), "{}", found[0]);
        assert!(
            found[1].contains("which only failed commits proposed (op #0)"),
            "{}",
            found[1]
        );
        assert!(
            found[2].starts_with(&format!("offset-fetch op #{early}")),
            "{}",
            found[2]
        );
        assert!(found[2].contains("which was first committed by op #8, invoked at 9 ns, after the fetch completed at 8 ns"), "{}", found[2]);
    }

    #[test]
    fn an_offset_delete_is_a_commit_of_no_offset() {
        let mut b = Builder::default();
        b.commit_ok(1, 1, 0, 5);
        b.delete(
            9,
            CommitResult::Failed {
                reason: "GROUP_SUBSCRIBED_TO_TOPIC".into(),
            },
        );
        b.fetch(2, Some(5));
        b.delete(
            9,
            CommitResult::Unknown {
                reason: "timeout".into(),
            },
        );
        b.fetch(2, None);
        b.fetch(2, Some(5));
        b.delete(9, CommitResult::Acknowledged);
        b.fetch(2, None);
        b.assert_valid();
        b.fetch(2, Some(5));
        let report = b.check();
        assert_kinds(&report, &[AnomalyKind::LostCommit]);
        let detail = details(&report, AnomalyKind::LostCommit)[0];
        assert!(
            detail.ends_with(
                "the latest acknowledged commit before the fetch was offset-delete op #12 \
                 (process 9), of no offset, completed at 14 ns"
            ),
            "{detail}"
        );
    }

    #[test]
    fn an_owner_seeing_its_offset_deleted_is_a_commit_regress() {
        let mut b = Builder::joined(&[0]);
        b.commit_ok(1, 1, 0, 5);
        // Kafka refuses to delete the offsets of a topic the group subscribes to.
        b.delete(9, CommitResult::Acknowledged);
        b.fetch(1, None);
        let report = b.check();
        assert_kinds(&report, &[AnomalyKind::CommitRegress]);
    }

    #[test]
    fn an_owner_seeing_its_committed_offset_go_back_is_a_commit_regress() {
        let mut b = Builder::joined(&[0]);
        b.commit_ok(1, 1, 0, 10);
        b.fetch(1, Some(10));
        // A commit of someone else's lands while m1 owns the partition: the
        // latest commit, so not lost, but m1's offset went back.
        b.commit_ok(2, 1, 0, 5);
        b.fetch(1, Some(5));
        let report = b.check();
        assert_kinds(&report, &[AnomalyKind::CommitRegress]);
        assert_eq!(
            details(&report, AnomalyKind::CommitRegress),
            [
                "member \"m1\" (process 1) of group \"g\", owning t-0 since generation 1 (join op \
              #0) and in generation 1, fetched offset 5 for it at offset-fetch op #8, below the \
              offset 10 it had seen at offset-fetch op #4; none of its own commits could have put \
              it back"
            ]
        );
    }

    #[test]
    fn a_member_the_group_may_have_moved_past_is_not_judged() {
        let mut b = Builder::joined(&[0]);
        b.fetch(1, None);
        b.commit_ok(1, 1, 0, 10);
        // m2 joins generation 2 and takes t-0; m1 has not noticed yet.
        let newer = b.invoke_join(2);
        b.fetch(1, Some(10));
        b.complete_join(newer, 2, &[0]);
        // m2's own (delayed) commits may lower the offset under the zombie.
        b.commit_ok(2, 2, 0, 7);
        b.fetch(1, Some(7));
        b.assert_valid();
    }

    #[test]
    fn commit_regress_spans_generations_the_member_keeps_the_partition_in() {
        let mut b = Builder::joined(&[0, 1]);
        b.commit_ok(1, 1, 0, 10);
        b.join(1, 2, &[0]);
        b.commit_ok(2, 2, 0, 5);
        b.fetch(1, None);
        let report = b.check();
        assert_kinds(
            &report,
            &[AnomalyKind::CommitRegress, AnomalyKind::LostCommit],
        );
        let detail = details(&report, AnomalyKind::CommitRegress)[0];
        assert!(
            detail.contains(
                "owning t-0 since generation 1 (join op #0) and in generation 2, fetched no \
                 offset for it at offset-fetch op #8, below the offset 10 it had seen at its \
                 acknowledged offset-commit op #2"
            ),
            "{detail}"
        );
    }

    #[test]
    fn own_commits_and_ended_ownership_excuse_a_lower_offset() {
        let mut b = Builder::joined(&[0]);
        // An unknown commit may land late, a later one may rewind on purpose.
        b.commit_unknown(1, 1, 4);
        b.commit_ok(1, 1, 0, 10);
        b.fetch(1, Some(4));
        b.commit_ok(1, 1, 0, 12);
        b.commit_ok(1, 1, 0, 6);
        b.fetch(1, Some(6));
        // Revoked: a new span starts from nothing.
        b.revoke(1, 1);
        b.commit_ok(2, 2, 0, 3);
        b.join(1, 3, &[0]);
        b.fetch(1, Some(3));
        // A join without the partition ends the span too.
        b.join(1, 4, &[1]);
        b.commit_ok(2, 4, 0, 2);
        b.fetch(1, Some(2));
        b.assert_valid();
    }

    #[test]
    fn records_no_member_received_are_unseen_in_a_stable_group() {
        let mut b = Builder::joined(&[0, 1]);
        b.poll(1, 1, 0, &values(100, 3));
        b.poll(1, 1, 1, &values(101, 4)[..2]);
        let mut end = finals(&[
            (tp(0), values(100, 3)),
            (tp(1), values(101, 4)),
            (TopicPartition::new("other", 0), values(102, 2)),
        ]);
        let report = b.check_with(&end, &stable());
        assert_kinds(&report, &[AnomalyKind::Unseen]);
        assert_eq!(
            details(&report, AnomalyKind::Unseen),
            ["group \"g\" never delivered 2 of the records of t-1 below its final high watermark \
              4 to any member, the first p101#2 at offset 2; missing offsets [2, 3]"]
        );
        // Only up to the high watermark, and only when the run says the group settled.
        end.get_mut(&tp(1)).expect("t-1").high_watermark = 2;
        assert!(b.check_with(&end, &stable()).is_valid());
        end.get_mut(&tp(1)).expect("t-1").high_watermark = 4;
        assert!(b.check_with(&end, &CheckOptions::default()).is_valid());
    }

    #[test]
    fn a_group_that_never_joined_has_seen_nothing() {
        let mut b = Builder::default();
        let op = b.invoke_join(1);
        b.complete(
            op,
            Outcome::Failed {
                reason: "COORDINATOR_NOT_AVAILABLE".into(),
            },
        );
        let end = finals(&[
            (tp(0), values(100, 1)),
            (TopicPartition::new("other", 0), vec![]),
        ]);
        let report = b.check_with(&end, &stable());
        assert_kinds(&report, &[AnomalyKind::Unseen]);
        assert_eq!(report.count(AnomalyKind::Unseen), 1);
    }

    #[test]
    fn group_details_are_capped_but_all_anomalies_counted() {
        let mut b = Builder::default();
        b.commit_ok(1, 1, 0, 5);
        let n = ANOMALY_DETAILS_MAX + 5;
        for _ in 0..n {
            b.fetch(2, None);
        }
        let report = b.check();
        assert_eq!(report.count(AnomalyKind::LostCommit), n);
        assert_eq!(
            details(&report, AnomalyKind::LostCommit).len(),
            ANOMALY_DETAILS_MAX
        );
    }
}
