//! Checkers that judge a history, together with the final state of the log as
//! read offline after the run, against the guarantees of a Kafka partition.
//!
//! Each guarantee is checked by its own function, independent of the others,
//! and named after the anomaly Jepsen's Kafka test reports when it breaks:
//! lost-write, inconsistent-offsets, nonmonotonic-send, nonmonotonic-poll,
//! poll-skip, duplicate, phantom-read, plus unreported-corruption for runs
//! that corrupt synced data, and retention-overreach ([`check_retention`]) for
//! runs with retention by size. Four more judge what Jepsen leaves implicit
//! and a single-node log makes checkable: serving-above-watermark and
//! watermark (the high watermark each fetch answer reported), offset-gap
//! (dense offsets, for a topic neither compacted nor transactional) and
//! corrupt-read (corrupt batches served where recovery or the broker's own
//! corruption report should have stopped them). The consumer-group kinds
//! (split-assignment, generation-regress, zombie-commit, lost-commit,
//! commit-regress, unseen) are judged by [`crate::groups`], which shares
//! this module's [`Report`] and [`CheckOptions`].
//!
//! Invariants the checkers rely on, all guaranteed by [`History`]: values are
//! unique per append invocation, a process is sequential, and every outcome is
//! of its operation's kind, and events (node events included) are in time
//! order. The checkers trust nothing else: offsets, high watermarks, recovery
//! points and values in outcomes, node events and the final log are data to
//! judge, never to unwrap.
//!
//! Every checker runs in time linear in the history plus the final log
//! (map lookups, no pairwise comparisons), because CI checks thousands of
//! seeds with 10^4 to 10^5 events each. The exceptions are poll-skip, which
//! scans the offsets a read skipped: free on valid runs, where reads skip
//! nothing, and bounded by one report per read on broken ones; and the
//! watermark's real-time order, which sorts the reads once (n log n).
//!
//! Output is deterministic: maps are only used for lookups, and anomalies
//! are found by walking the history and the final log in order (ties in the
//! watermark's sort broken by op id), so two runs of one seed produce
//! identical reports.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::history::{
    EventKind, History, NodeEvent, Offset, Op, OpId, Operation, Outcome, ProcessId, Value,
};
use crate::model::LogModel;

/// How many anomaly details a report keeps per kind; the rest are only
/// counted, so a badly broken run cannot make a report enormous.
pub const ANOMALY_DETAILS_MAX: usize = 20;

/// How many details per kind [`Report::summary`] prints.
pub const SUMMARY_DETAILS_MAX: usize = 5;

/// How many offsets a detail lists before eliding the rest.
const DETAIL_OFFSETS_MAX: usize = 8;

/// A kind of violated guarantee, named as Jepsen names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AnomalyKind {
    /// A record known to be committed (acknowledged, or observed by a read)
    /// is missing from the final log.
    LostWrite,
    /// One offset holds two different values, or one value sits at two
    /// different offsets, across acknowledgements, reads and the final log.
    InconsistentOffsets,
    /// An append a process invoked after an acknowledged one landed at a lower
    /// offset, or one append's records are not contiguous.
    NonmonotonicSend,
    /// A read returned offsets that go backwards: not strictly increasing
    /// within the read, or below the offset it asked to read from (which, for
    /// a process continuing where its previous read ended, means its position
    /// went backwards).
    NonmonotonicPoll,
    /// A read skipped over an offset whose record was committed before the
    /// read was invoked: it began above the offset it asked for, or jumped
    /// between two consecutive records it returned.
    PollSkip,
    /// A value appears more than once in the final log or in one read.
    Duplicate,
    /// A read or the final log served a value that no append wrote, or whose
    /// append definitely failed.
    PhantomRead,
    /// Synced data was corrupted and committed records went missing, yet
    /// neither recovery nor the offline read reported corruption.
    UnreportedCorruption,
    /// Retention deleted more than the configured limit allows: after the log
    /// start offset moved, fewer than `retention.bytes` were kept below the
    /// high watermark.
    RetentionOverreach,
    /// A successful read returned a record at an offset at or above the high
    /// watermark the same answer reported: uncommitted data was served.
    ServingAboveWatermark,
    /// Offsets are not dense where they must be (a topic neither compacted
    /// nor transactional): a read's records, or the final log's, leave a hole.
    OffsetGap,
    /// The high watermark went backwards in real time (a read invoked after
    /// another completed reported a lower one), or the final log ends below
    /// the highest watermark ever reported.
    Watermark,
    /// A batch that failed its CRC check was served where the broker should
    /// have known better: at or above the recovery point of the last open
    /// (recovery verified it), or at or above where the broker itself had
    /// reported corruption.
    CorruptRead,
    /// Two members reported owning the same partition in the same generation
    /// of a group ([`crate::groups`]).
    SplitAssignment,
    /// A member joined a group at a generation below one another join had
    /// already completed with.
    GenerationRegress,
    /// An offset commit of a generation older than one a join had already
    /// completed with was acknowledged: the coordinator failed to fence it.
    ZombieCommit,
    /// An offset fetch returned a committed offset that could not be the
    /// latest: an acknowledged commit's effect was lost, or the offset was
    /// never (successfully) committed.
    LostCommit,
    /// A member that kept a partition saw its committed offset go backwards.
    CommitRegress,
    /// A record below the final high watermark of a partition a stable group
    /// consumed was never delivered to any of its members.
    Unseen,
    /// The node served the partition (an append acknowledged, a read answered) for a
    /// request invoked after the metadata image it had applied stopped naming it the
    /// leader, with no image naming it again before the answer: a fenced broker went on
    /// serving (the image checker's broker side).
    ServedWhileNotLeader,
}

impl AnomalyKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [AnomalyKind; 20] = [
        AnomalyKind::LostWrite,
        AnomalyKind::InconsistentOffsets,
        AnomalyKind::NonmonotonicSend,
        AnomalyKind::NonmonotonicPoll,
        AnomalyKind::PollSkip,
        AnomalyKind::Duplicate,
        AnomalyKind::PhantomRead,
        AnomalyKind::UnreportedCorruption,
        AnomalyKind::RetentionOverreach,
        AnomalyKind::ServingAboveWatermark,
        AnomalyKind::OffsetGap,
        AnomalyKind::Watermark,
        AnomalyKind::CorruptRead,
        AnomalyKind::SplitAssignment,
        AnomalyKind::GenerationRegress,
        AnomalyKind::ZombieCommit,
        AnomalyKind::LostCommit,
        AnomalyKind::CommitRegress,
        AnomalyKind::Unseen,
        AnomalyKind::ServedWhileNotLeader,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AnomalyKind::LostWrite => "lost-write",
            AnomalyKind::InconsistentOffsets => "inconsistent-offsets",
            AnomalyKind::NonmonotonicSend => "nonmonotonic-send",
            AnomalyKind::NonmonotonicPoll => "nonmonotonic-poll",
            AnomalyKind::PollSkip => "poll-skip",
            AnomalyKind::Duplicate => "duplicate",
            AnomalyKind::PhantomRead => "phantom-read",
            AnomalyKind::UnreportedCorruption => "unreported-corruption",
            AnomalyKind::RetentionOverreach => "retention-overreach",
            AnomalyKind::ServingAboveWatermark => "serving-above-watermark",
            AnomalyKind::OffsetGap => "offset-gap",
            AnomalyKind::Watermark => "watermark",
            AnomalyKind::CorruptRead => "corrupt-read",
            AnomalyKind::SplitAssignment => "split-assignment",
            AnomalyKind::GenerationRegress => "generation-regress",
            AnomalyKind::ZombieCommit => "zombie-commit",
            AnomalyKind::LostCommit => "lost-commit",
            AnomalyKind::CommitRegress => "commit-regress",
            AnomalyKind::Unseen => "unseen",
            AnomalyKind::ServedWhileNotLeader => "served-while-not-leader",
        }
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One violation, with a sentence explaining it in terms of op ids (which are
/// line numbers in [`History::render`]), offsets and values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    pub detail: String,
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.detail)
    }
}

/// What an offline read of the log found after the final crash and recovery.
#[derive(Clone, Debug, Default)]
pub struct FinalLog {
    pub log_start_offset: Offset,
    /// Every record from start to end, in order.
    pub records: Vec<(Offset, Value)>,
    /// Offset of the first batch that recovery or the offline read found
    /// corrupt (bad CRC/length) and refused to serve, if any: anything found
    /// corruption there, which is what excuses losses.
    pub corruption_detected_at: Option<Offset>,
    /// The recovery point of the offline open: recovery trusted every batch
    /// below it without reading it, and verified every batch from it on.
    pub recovery_point: Offset,
    /// The first batch the broker's read path served whose CRC then failed
    /// the offline reader's own check, if any.
    pub corrupt_served_at: Option<Offset>,
    /// Where the broker itself (recovery at the offline open) reported
    /// corruption, if it did.
    pub corruption_reported_at: Option<Offset>,
}

impl FinalLog {
    /// One past the last record's offset, or the start offset if the log is
    /// empty.
    pub fn log_end_offset(&self) -> Offset {
        self.records
            .last()
            .map_or(self.log_start_offset, |&(offset, _)| {
                offset.saturating_add(1)
            })
    }
}

impl From<&LogModel> for FinalLog {
    /// The final log a correct broker would leave behind: the model's records,
    /// with no corruption detected, reported or served, and a recovery point
    /// at the log start (recovery verified everything).
    fn from(model: &LogModel) -> FinalLog {
        FinalLog {
            log_start_offset: model.log_start_offset(),
            records: model.records().collect(),
            corruption_detected_at: None,
            recovery_point: model.log_start_offset(),
            corrupt_served_at: None,
            corruption_reported_at: None,
        }
    }
}

/// What the run did that changes which outcomes are acceptable.
#[derive(Clone, Debug, Default)]
pub struct CheckOptions {
    /// The run injected corruption into *synced* data (beyond what one node
    /// can survive). Then acknowledged writes at or after
    /// `corruption_detected_at` may be missing; but if this is true and the
    /// final log is missing acknowledged writes while corruption_detected_at is
    /// None, report UnreportedCorruption.
    pub synced_corruption_injected: bool,
    /// The run deleted records by retention: a committed record below the
    /// final log start offset was deleted, not lost. Whether retention deleted
    /// no more than it was allowed to is [`check_retention`]'s question.
    pub retention: bool,
    /// The topic may legitimately have holes in its offsets (compaction,
    /// transaction markers), so offset-gap is not checked. False by default:
    /// a plain topic's offsets are dense.
    pub offsets_may_have_gaps: bool,
    /// Acknowledged data may legitimately be lost at a restart (page-cache
    /// mode with power loss), so the high watermark may move back across a
    /// [`NodeEvent::Opened`] and the final log may end below it. False by
    /// default: under sync-before-ack the single node's high watermark is
    /// durable and never moves back, even across restarts.
    pub watermark_may_regress: bool,
    /// Acknowledged group state (generations, assignments and committed
    /// offsets in `__consumer_offsets`) may legitimately be lost at a restart,
    /// for the same reason as `watermark_may_regress`; then
    /// [`crate::check_groups`] judges only unseen. False by default.
    pub group_state_may_regress: bool,
    /// The run ended with every group stable and a healing phase without
    /// faults long enough for the members to consume everything, so
    /// [`crate::check_groups`] judges unseen (liveness). False by default.
    pub groups_stable_at_end: bool,
    /// The topic is compacted under this rule (keys and tombstones as functions of a
    /// value, `delete.retention.ms`, the node's clock): a record missing from the final log
    /// is superseded, not lost, when the rule excuses it ([`crate::compaction`]). `None` by
    /// default.
    pub compaction: Option<crate::compaction::Compaction>,
    /// Which acknowledgements and reads prove a record committed: every one (acks=all, clean
    /// elections: the default), or fewer, where Kafka allows losing records on a failover.
    pub durability: Durability,
}

/// How far an acknowledgement or a read proves a record durable, by the producer's `acks` and
/// the topic's `unclean.leader.election.enable`. Where a proof is weaker than the default,
/// records it covered that the final log lacks are *allowed* losses: counted in
/// [`Report::losses_allowed`] (and the reads that saw them in
/// [`Report::reads_contradicted`]), never hidden, never anomalies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// acks=all with clean elections: an acknowledged record, and a record any read
    /// returned (reads stop at the high watermark), is committed and must survive.
    #[default]
    Committed,
    /// acks=1: an acknowledgement is the leader's alone, taken before any follower has the
    /// record; Kafka loses it when the leader fails before a follower fetched it. An
    /// acknowledged append the final log lacks is judged as one of unknown outcome. Reads
    /// still prove commitment: they stop at the high watermark, which the ISR holds.
    LeaderAcknowledged,
    /// `unclean.leader.election.enable=true`: a replica outside the ISR may be elected and
    /// the records it lacks, committed ones too, are gone. Besides acknowledgements as for
    /// `LeaderAcknowledged`, a read whose records the final log contradicts (a record missing,
    /// or another at its offset) proves nothing and is left out of every check, and the high
    /// watermark may move back.
    UncleanElections,
}

/// The verdict on one run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Up to [`ANOMALY_DETAILS_MAX`] anomalies per kind, in the order found.
    pub anomalies: Vec<Anomaly>,
    /// How many anomalies of each kind were found, including those whose
    /// details were not kept. Kinds never found are absent.
    pub anomaly_counts: BTreeMap<AnomalyKind, usize>,
    pub ops_ok: usize,
    pub ops_failed: usize,
    /// Operations that ended Unknown or never completed.
    pub ops_unknown: usize,
    pub records_in_final_log: usize,
    /// Committed records missing at or after the offset where corruption of
    /// synced data was detected: expected losses, so not anomalies.
    pub losses_excused: usize,
    /// Acknowledged or read records missing from the final log where
    /// [`CheckOptions::durability`] allows their loss (acks=1, unclean elections).
    pub losses_allowed: usize,
    /// Successful reads the final log contradicts, left out under
    /// [`Durability::UncleanElections`].
    pub reads_contradicted: usize,
}

impl Report {
    pub fn is_valid(&self) -> bool {
        self.anomalies.is_empty() && self.anomaly_counts.values().all(|&count| count == 0)
    }

    pub fn has(&self, kind: AnomalyKind) -> bool {
        self.count(kind) > 0 || self.anomalies.iter().any(|a| a.kind == kind)
    }

    /// How many anomalies of `kind` were found, kept or not.
    pub fn count(&self, kind: AnomalyKind) -> usize {
        self.anomaly_counts.get(&kind).copied().unwrap_or(0)
    }

    /// Multi-line: the verdict, operation counts, then for every anomaly kind
    /// its count and the first few details.
    pub fn summary(&self) -> String {
        self.to_string()
    }

    /// Counts an anomaly and keeps its detail while under the cap. The detail
    /// is built lazily so that a run with 10^5 lost writes formats only a few.
    /// Public for checks a harness makes itself (a node's own view of its disk).
    pub fn record(&mut self, kind: AnomalyKind, detail: impl FnOnce() -> String) {
        let count = self.anomaly_counts.entry(kind).or_insert(0);
        *count += 1;
        if *count <= ANOMALY_DETAILS_MAX {
            self.anomalies.push(Anomaly {
                kind,
                detail: detail(),
            });
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", if self.is_valid() { "valid" } else { "INVALID" })?;
        writeln!(
            f,
            "operations: {} ok, {} failed, {} unknown; {} records in final log; \
             {} losses excused by detected corruption; {} losses and {} contradicted reads \
             allowed by the durability asked for",
            self.ops_ok,
            self.ops_failed,
            self.ops_unknown,
            self.records_in_final_log,
            self.losses_excused,
            self.losses_allowed,
            self.reads_contradicted
        )?;
        for kind in AnomalyKind::ALL {
            let count = self.count(kind);
            writeln!(f, "{kind}: {count}")?;
            let mut shown = 0;
            for anomaly in self
                .anomalies
                .iter()
                .filter(|a| a.kind == kind)
                .take(SUMMARY_DETAILS_MAX)
            {
                writeln!(f, "  - {}", anomaly.detail)?;
                shown += 1;
            }
            if count > shown {
                writeln!(f, "  ... and {} more", count - shown)?;
            }
        }
        Ok(())
    }
}

/// Judges `history` and `final_log` against every guarantee.
pub fn check(history: &History, final_log: &FinalLog, options: &CheckOptions) -> Report {
    let operations = history.operations();
    let mut report = Report {
        records_in_final_log: final_log.records.len(),
        ..Report::default()
    };
    count_outcomes(&operations, &mut report);
    let index = Index::build(&operations, final_log, options);
    report.losses_allowed = index.losses_allowed;
    report.reads_contradicted = index.reads_contradicted;
    check_lost_writes(&index, &mut report);
    check_inconsistent_offsets(&index, &mut report);
    check_duplicates(&index, &mut report);
    check_phantom_reads(&index, &mut report);
    check_nonmonotonic_sends(&index, &mut report);
    check_nonmonotonic_polls(&index, &mut report);
    check_poll_skips(&index, &mut report);
    check_serving_above_watermark(&index, &mut report);
    if !options.offsets_may_have_gaps {
        check_offset_gaps(&index, &mut report);
    }
    check_watermark(history, &index, options, &mut report);
    check_corrupt_reads(history, final_log, &mut report);
    check_served_while_not_leader(history, &mut report);
    report
}

/// [`AnomalyKind::ServedWhileNotLeader`]: an append acknowledged or a read answered with
/// records whose invocation came after an [`NodeEvent::ImageApplied`] saying the node does
/// not lead, with no image saying it leads between the invocation and the answer. (An
/// answer to a request invoked while the node still led may legitimately complete after the
/// image changed: the broker had accepted it before.)
fn check_served_while_not_leader(history: &History, report: &mut Report) {
    // The event id of the image that took the leadership away, while it is away.
    let mut not_leading_since: Option<(usize, i64)> = None;
    // Each outstanding append or read: whether the node was not leading at its invocation
    // (and since which image), cleared once an image gives the leadership back.
    let mut invoked: BTreeMap<OpId, Option<(usize, i64)>> = BTreeMap::new();
    for (id, event) in history.events().iter().enumerate() {
        match &event.kind {
            EventKind::Node(NodeEvent::ImageApplied { offset, leads }) => {
                if *leads {
                    not_leading_since = None;
                    for away in invoked.values_mut() {
                        *away = None;
                    }
                } else if not_leading_since.is_none() {
                    not_leading_since = Some((id, *offset));
                }
            }
            EventKind::Invoke(Op::Append { .. }) | EventKind::Invoke(Op::Read { .. }) => {
                invoked.insert(id, not_leading_since);
            }
            EventKind::Complete { op, outcome } => {
                let Some(away) = invoked.remove(op) else {
                    continue;
                };
                let Some((image_event, image_offset)) = away else {
                    continue;
                };
                let served = match outcome {
                    Outcome::Appended { base_offset } => Some(format!("appended at {base_offset}")),
                    Outcome::Read { records, .. } if !records.is_empty() => {
                        Some(format!("read {} records", records.len()))
                    }
                    _ => None,
                };
                if let Some(served) = served {
                    report.record(AnomalyKind::ServedWhileNotLeader, || {
                        format!(
                            "op #{op} was {served}, but it was invoked after the node applied the \
                             metadata image at offset {image_offset} (event #{image_event}), which \
                             does not name it the partition's leader, and no image named it again \
                             before the answer"
                        )
                    });
                }
            }
            _ => {}
        }
    }
}

fn count_outcomes(operations: &[Operation], report: &mut Report) {
    for operation in operations {
        match &operation.outcome {
            Some(Outcome::Appended { .. })
            | Some(Outcome::Read { .. })
            | Some(Outcome::Joined { .. })
            | Some(Outcome::Committed { .. })
            | Some(Outcome::Fetched { .. })
            | Some(Outcome::Deleted { .. }) => report.ops_ok += 1,
            Some(Outcome::Failed { .. }) | Some(Outcome::CorruptRead { .. }) => {
                report.ops_failed += 1
            }
            Some(Outcome::Unknown { .. }) | None => report.ops_unknown += 1,
        }
    }
}

/// The append invocation that carried a value.
struct Write<'h> {
    op: OpId,
    /// The reason, if the append definitely failed.
    failed: Option<&'h str>,
}

/// One append invocation, whatever its outcome.
struct Append<'h> {
    op: OpId,
    process: ProcessId,
    values: &'h [Value],
    /// The base offset, if the append was acknowledged.
    acked_base: Option<Offset>,
    /// When the append completed, if it did.
    complete_ns: Option<u64>,
}

/// The records returned by one successful read.
struct Observed<'h> {
    op: OpId,
    process: ProcessId,
    /// The offset the read asked to start at.
    from: Offset,
    invoke_ns: u64,
    /// When the read completed: it did, being successful.
    complete_ns: u64,
    records: &'h [(Offset, Value)],
    /// The high watermark the same fetch answer reported.
    high_watermark: Offset,
}

/// Where a claim that an offset holds a value came from, for details.
#[derive(Clone, Copy)]
enum Source {
    Ack(OpId),
    Read(OpId),
    FinalLog,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Ack(op) => write!(f, "the acknowledgement of op #{op}"),
            Source::Read(op) => write!(f, "read op #{op}"),
            Source::FinalLog => write!(f, "the final log"),
        }
    }
}

/// Lookups shared by the checkers, built once per check in one pass.
struct Index<'h> {
    writes: BTreeMap<Value, Write<'h>>,
    /// Every append invocation, in invocation order.
    appends: Vec<Append<'h>>,
    /// Every successful read, in invocation order.
    reads: Vec<Observed<'h>>,
    final_log: &'h FinalLog,
    /// Each value's offsets in the final log, in log order.
    final_offsets: BTreeMap<Value, Vec<Offset>>,
    /// Losses at or after this offset are expected, because synced data was
    /// corrupted there and recovery detected it.
    excused_from: Option<Offset>,
    /// Synced data was corrupted but nothing detected it, so any loss is the
    /// corruption going unreported.
    corruption_unreported: bool,
    /// Records below this offset may have been deleted by retention.
    retained_from: Option<Offset>,
    /// Each key's highest offset in the final log and the tombstones that may be gone past
    /// their horizon, on a compacted topic.
    compacted: crate::compaction::Compacted,
    /// Records whose proof of commitment [`CheckOptions::durability`] discounted because the
    /// final log lacks them, and reads left out for contradicting it.
    losses_allowed: usize,
    reads_contradicted: usize,
}

impl<'h> Index<'h> {
    fn build(
        operations: &'h [Operation],
        final_log: &'h FinalLog,
        options: &CheckOptions,
    ) -> Index<'h> {
        let mut writes = BTreeMap::new();
        let mut appends = Vec::new();
        let mut reads = Vec::new();
        for operation in operations {
            match (&operation.op, &operation.outcome) {
                (Op::Append { values }, outcome) => {
                    let failed = match outcome {
                        Some(Outcome::Failed { reason }) => Some(reason.as_str()),
                        _ => None,
                    };
                    for &value in values {
                        // History forbids reusing a value, so the first writer is the only one.
                        writes.entry(value).or_insert(Write {
                            op: operation.id,
                            failed,
                        });
                    }
                    let acked_base = match outcome {
                        Some(Outcome::Appended { base_offset }) => Some(*base_offset),
                        _ => None,
                    };
                    appends.push(Append {
                        op: operation.id,
                        process: operation.process,
                        values,
                        acked_base,
                        complete_ns: operation.complete_ns,
                    });
                }
                (
                    Op::Read { from },
                    Some(Outcome::Read {
                        records,
                        high_watermark,
                    }),
                ) => reads.push(Observed {
                    op: operation.id,
                    process: operation.process,
                    from: *from,
                    invoke_ns: operation.invoke_ns,
                    // A read with an outcome completed; the fallback is never used.
                    complete_ns: operation.complete_ns.unwrap_or(u64::MAX),
                    records,
                    high_watermark: *high_watermark,
                }),
                // A corrupt read observed nothing, like a failed one.
                (Op::Read { .. }, _) => {}
                // Group operations name partitions of their own; crate::groups judges them.
                (
                    Op::Join { .. }
                    | Op::Poll { .. }
                    | Op::OffsetCommit { .. }
                    | Op::OffsetFetch { .. }
                    | Op::OffsetDelete { .. },
                    _,
                ) => {}
            }
        }
        let mut final_offsets: BTreeMap<Value, Vec<Offset>> = BTreeMap::new();
        for &(offset, value) in &final_log.records {
            final_offsets.entry(value).or_default().push(offset);
        }
        let (excused_from, corruption_unreported) = if options.synced_corruption_injected {
            (
                final_log.corruption_detected_at,
                final_log.corruption_detected_at.is_none(),
            )
        } else {
            (None, false)
        };
        let (losses_allowed, reads_contradicted) =
            discount_unproven(&mut appends, &mut reads, &final_offsets, final_log, options);
        let compacted = match &options.compaction {
            Some(rule) => crate::compaction::Compacted::build(
                &final_log.records,
                rule.clone(),
                |offset| excused_from.is_none_or(|from| offset < from),
                tombstones(operations, &reads, rule.is_tombstone),
            ),
            None => crate::compaction::Compacted::default(),
        };
        Index {
            writes,
            appends,
            reads,
            final_log,
            final_offsets,
            excused_from,
            corruption_unreported,
            retained_from: options.retention.then_some(final_log.log_start_offset),
            compacted,
            losses_allowed,
            reads_contradicted,
        }
    }

    /// Whether a record at `offset` is below the final log start offset of a
    /// run with retention, so its absence is a deletion, not a loss.
    fn deleted_by_retention(&self, offset: Offset) -> bool {
        self.retained_from.is_some_and(|start| offset < start)
    }

    /// Every acknowledged record as (offset, value, appending op), in
    /// invocation order.
    fn acked_records(&self) -> impl Iterator<Item = (Offset, Value, OpId)> + '_ {
        self.appends.iter().flat_map(|append| {
            let base = append.acked_base;
            append
                .values
                .iter()
                .enumerate()
                .filter_map(move |(i, &value)| {
                    base.map(|base| (offset_at(base, i), value, append.op))
                })
        })
    }

    /// Every record returned by a successful read, with the reading op.
    fn read_records(&self) -> impl Iterator<Item = (Offset, Value, OpId)> + '_ {
        self.reads.iter().flat_map(|read| {
            read.records
                .iter()
                .map(move |&(offset, value)| (offset, value, read.op))
        })
    }

    /// True if some append that did not definitely fail wrote `value`.
    fn possibly_written(&self, value: Value) -> bool {
        matches!(self.writes.get(&value), Some(Write { failed: None, .. }))
    }

    /// Whether the final log's content at `offset` can be compared with what
    /// the run observed. Past a detected corruption of synced data recovery
    /// truncated the log, so its content there says nothing about the run.
    fn final_log_trusted_at(&self, offset: Offset) -> bool {
        self.excused_from.is_none_or(|from| offset < from)
    }

    fn final_range(&self) -> String {
        format!(
            "[{}, {})",
            self.final_log.log_start_offset,
            self.final_log.log_end_offset()
        )
    }

    /// Reports a committed record missing from the final log, unless detected
    /// corruption of synced data excuses it.
    fn report_loss(&self, report: &mut Report, offset: Offset, detail: impl FnOnce() -> String) {
        if self.excused_from.is_some_and(|from| offset >= from) {
            report.losses_excused += 1;
        } else if self.corruption_unreported {
            report.record(AnomalyKind::UnreportedCorruption, || {
                format!(
                    "{}, and no corruption was reported although synced data was corrupted",
                    detail()
                )
            });
        } else {
            report.record(AnomalyKind::LostWrite, detail);
        }
    }
}

/// Applies [`CheckOptions::durability`]: under a weaker durability than the default, an
/// acknowledged append the final log does not hold whole (nor retention explain) becomes one
/// of unknown outcome, and under unclean elections a read the final log contradicts is
/// dropped. The number of records so discounted (acknowledged, or only read), and of reads.
/// `final_offsets` is [`Index::final_offsets`].
fn discount_unproven(
    appends: &mut [Append<'_>],
    reads: &mut Vec<Observed<'_>>,
    final_offsets: &BTreeMap<Value, Vec<Offset>>,
    final_log: &FinalLog,
    options: &CheckOptions,
) -> (usize, usize) {
    if options.durability == Durability::Committed {
        return (0, 0);
    }
    let present = |value: &Value| final_offsets.contains_key(value);
    let at = |offset: Offset, value: &Value| {
        final_offsets
            .get(value)
            .is_some_and(|offsets| offsets.contains(&offset))
    };
    let deleted = |offset: Offset| options.retention && offset < final_log.log_start_offset;
    let mut discounted: BTreeSet<Value> = BTreeSet::new();
    for append in appends.iter_mut() {
        let Some(base) = append.acked_base else {
            continue;
        };
        let borne_out = append
            .values
            .iter()
            .enumerate()
            .all(|(i, v)| present(v) || deleted(offset_at(base, i)));
        if !borne_out {
            append.acked_base = None;
            discounted.extend(append.values.iter().filter(|v| !present(v)));
        }
    }
    let mut contradicted = 0;
    if options.durability == Durability::UncleanElections {
        reads.retain(|read| {
            let holds = read
                .records
                .iter()
                .all(|(offset, value)| at(*offset, value) || deleted(*offset));
            if !holds {
                contradicted += 1;
                discounted.extend(read.records.iter().map(|&(_, v)| v).filter(|v| !present(v)));
            }
            holds
        });
    }
    (discounted.len(), contradicted)
}

/// lost-write: every committed record must survive into the final log.
///
/// A record is committed if its append was acknowledged, or if a successful
/// read observed it: reads are bounded by the high watermark, so whatever they
/// return is committed. Losses are judged by value, not by offset: a committed
/// value present at some other offset was not lost, it was misplaced, which is
/// inconsistent-offsets. Each missing value is reported once, at the offset its
/// acknowledgement promised or else the offset it was first read at; that
/// offset is what the corruption excuse compares against. The log start
/// offset excuses a record below it only when the run had retention
/// (`CheckOptions::retention`).
fn check_lost_writes(ix: &Index<'_>, report: &mut Report) {
    let mut judged: BTreeSet<Value> = BTreeSet::new();
    for (offset, value, op) in ix.acked_records() {
        judged.insert(value);
        if ix.final_offsets.contains_key(&value)
            || ix.deleted_by_retention(offset)
            || ix.compacted.excuses(offset, value)
        {
            continue;
        }
        ix.report_loss(report, offset, || {
            format!(
                "{value}, acknowledged at offset {offset} by op #{op}, is missing from the final \
                 log, which holds offsets {}",
                ix.final_range()
            )
        });
    }
    for (offset, value, op) in ix.read_records() {
        // A value never (successfully) written cannot be lost; phantom-read owns it.
        if !ix.possibly_written(value)
            || !judged.insert(value)
            || ix.final_offsets.contains_key(&value)
            || ix.deleted_by_retention(offset)
            || ix.compacted.excuses(offset, value)
        {
            continue;
        }
        ix.report_loss(report, offset, || {
            format!(
                "{value}, observed at offset {offset} by read op #{op}, is missing from the final \
                 log, which holds offsets {}",
                ix.final_range()
            )
        });
    }
}

/// inconsistent-offsets: acknowledgements, reads and the final log must agree
/// on which value each offset holds, and on which offset each value is at.
///
/// The final log's records at or after a detected corruption of synced data
/// are left out of the comparison, since recovery truncated there. The excuse
/// covers only the final log: the harness is expected to corrupt synced data
/// only before the final crash, because a truncation in mid-run would let later
/// appends legitimately reuse offsets, which this rule would report.
///
/// A value the final log holds at several offsets is a duplicate, not an
/// inconsistency, so a claim about such a value is consistent if it names any
/// of them; that keeps a retried append that landed twice a duplicate only. On a
/// compacted topic a value claimed at two offsets is reported as a duplicate too.
fn check_inconsistent_offsets(ix: &Index<'_>, report: &mut Report) {
    let run_claims: Vec<(Offset, Value, Source)> = ix
        .acked_records()
        .map(|(offset, value, op)| (offset, value, Source::Ack(op)))
        .chain(
            ix.read_records()
                .map(|(offset, value, op)| (offset, value, Source::Read(op))),
        )
        .collect();
    let final_claims = ix
        .final_log
        .records
        .iter()
        .filter(|&&(offset, _)| ix.final_log_trusted_at(offset))
        .map(|&(offset, value)| (offset, value, Source::FinalLog));

    // One offset, two values.
    let mut holder: BTreeMap<Offset, (Value, Source)> = BTreeMap::new();
    let mut conflicted_offsets: BTreeSet<Offset> = BTreeSet::new();
    for (offset, value, source) in run_claims.iter().copied().chain(final_claims.clone()) {
        match holder.entry(offset) {
            Entry::Vacant(entry) => {
                entry.insert((value, source));
            }
            Entry::Occupied(entry) => {
                let (first_value, first_source) = *entry.get();
                if first_value != value && conflicted_offsets.insert(offset) {
                    report.record(AnomalyKind::InconsistentOffsets, || {
                        format!(
                            "offset {offset} holds {first_value} according to {first_source} \
                             but {value} according to {source}"
                        )
                    });
                }
            }
        }
    }

    // One value, two offsets. The cleaner never moves a record, so on a compacted topic
    // that is a value appended twice whose earlier copy was since cleaned away (a retry the
    // broker no longer recognised): a duplicate.
    let two_offsets = if ix.compacted.is_on() {
        AnomalyKind::Duplicate
    } else {
        AnomalyKind::InconsistentOffsets
    };
    let mut trusted_final: BTreeMap<Value, Vec<Offset>> = BTreeMap::new();
    for (offset, value, _) in final_claims {
        trusted_final.entry(value).or_default().push(offset);
    }
    let mut first_claim: BTreeMap<Value, (Offset, Source)> = BTreeMap::new();
    let mut conflicted_values: BTreeSet<Value> = BTreeSet::new();
    for &(offset, value, source) in &run_claims {
        if conflicted_values.contains(&value) {
            continue;
        }
        if let Some(final_offsets) = trusted_final.get(&value) {
            if !final_offsets.contains(&offset) {
                conflicted_values.insert(value);
                report.record(two_offsets, || {
                    format!(
                        "{value} is at offset {offset} according to {source} but at {} in the \
                         final log",
                        list_offsets(final_offsets)
                    )
                });
            }
            continue;
        }
        match first_claim.entry(value) {
            Entry::Vacant(entry) => {
                entry.insert((offset, source));
            }
            Entry::Occupied(entry) => {
                let (first_offset, first_source) = *entry.get();
                if first_offset != offset {
                    conflicted_values.insert(value);
                    report.record(two_offsets, || {
                        format!(
                            "{value} is at offset {first_offset} according to {first_source} \
                             but at offset {offset} according to {source}"
                        )
                    });
                }
            }
        }
    }
}

/// duplicate: a value appears more than once in the final log, or in one read
/// result. Each duplicated value is reported once, since one duplicate in the
/// log shows up again in every read that covers it.
fn check_duplicates(ix: &Index<'_>, report: &mut Report) {
    let mut reported: BTreeSet<Value> = BTreeSet::new();
    for &(_, value) in &ix.final_log.records {
        let offsets = match ix.final_offsets.get(&value) {
            Some(offsets) => offsets,
            None => continue,
        };
        if offsets.len() > 1 && reported.insert(value) {
            report.record(AnomalyKind::Duplicate, || {
                format!(
                    "{value} appears {} times in the final log, at {}",
                    offsets.len(),
                    list_offsets(offsets)
                )
            });
        }
    }
    for read in &ix.reads {
        let mut seen: BTreeMap<Value, Offset> = BTreeMap::new();
        for &(offset, value) in read.records {
            match seen.entry(value) {
                Entry::Vacant(entry) => {
                    entry.insert(offset);
                }
                Entry::Occupied(entry) => {
                    if reported.insert(value) {
                        let first = *entry.get();
                        report.record(AnomalyKind::Duplicate, || {
                            format!(
                                "read op #{} returned {value} twice, at offsets {first} and {offset}",
                                read.op
                            )
                        });
                    }
                }
            }
        }
    }
}

/// phantom-read: every value served, by a read or by the final log, must come
/// from an append that may have taken effect. A value no append wrote is
/// garbage served as data; a value whose append definitely failed means the
/// failure was reported wrongly. The harness must therefore record as Unknown,
/// never as Failed, any error after which the write may have happened.
fn check_phantom_reads(ix: &Index<'_>, report: &mut Report) {
    let mut reported: BTreeSet<Value> = BTreeSet::new();
    let served = ix
        .read_records()
        .map(|(offset, value, op)| (offset, value, Source::Read(op)))
        .chain(
            ix.final_log
                .records
                .iter()
                .map(|&(offset, value)| (offset, value, Source::FinalLog)),
        );
    for (offset, value, source) in served {
        match ix.writes.get(&value) {
            Some(Write { failed: None, .. }) => {}
            Some(Write {
                op,
                failed: Some(reason),
            }) => {
                if reported.insert(value) {
                    report.record(AnomalyKind::PhantomRead, || {
                        format!(
                            "{source} served {value} at offset {offset}, but op #{op}, which \
                             wrote it, definitely failed ({reason:?})"
                        )
                    });
                }
            }
            None => {
                if reported.insert(value) {
                    report.record(AnomalyKind::PhantomRead, || {
                        format!("{source} served {value} at offset {offset}, which no append wrote")
                    });
                }
            }
        }
    }
}

/// nonmonotonic-send: a process is sequential, so each of its appends must
/// land after all records of its previous one, and one append's records must
/// sit at consecutive offsets.
///
/// Checked twice per process, in invocation order: on the offsets its
/// acknowledged appends were given, and on where its appends (acknowledged or
/// not) ended up in the final log, skipping appends that are absent. A value
/// the final log holds more than once counts at its first offset. Each pair of
/// appends is reported at most once even if both views show the inversion.
fn check_nonmonotonic_sends(ix: &Index<'_>, report: &mut Report) {
    let mut by_process: BTreeMap<ProcessId, Vec<&Append<'_>>> = BTreeMap::new();
    for append in &ix.appends {
        by_process.entry(append.process).or_default().push(append);
    }
    let mut reported_pairs: BTreeSet<(OpId, OpId)> = BTreeSet::new();
    for (process, appends) in &by_process {
        // The offsets acknowledgements gave.
        let mut previous: Option<(OpId, Offset)> = None;
        for append in appends {
            let base = match append.acked_base {
                Some(base) => base,
                None => continue,
            };
            let last = offset_at(base, append.values.len().saturating_sub(1));
            if let Some((previous_op, previous_last)) = previous {
                if base <= previous_last && reported_pairs.insert((previous_op, append.op)) {
                    report.record(AnomalyKind::NonmonotonicSend, || {
                        format!(
                            "process {process}: op #{previous_op} was acknowledged up to offset \
                             {previous_last}, yet op #{}, invoked later, was acknowledged at \
                             base offset {base}",
                            append.op
                        )
                    });
                }
            }
            previous = Some((append.op, last));
        }

        // Where the records ended up.
        let mut previous: Option<(OpId, Offset)> = None;
        for append in appends {
            let placed: Vec<(usize, Value, Offset)> = append
                .values
                .iter()
                .enumerate()
                .filter_map(|(i, &value)| {
                    let offset = *ix.final_offsets.get(&value)?.first()?;
                    Some((i, value, offset))
                })
                .collect();
            let (first_offset, last_offset) = match (
                placed.iter().map(|p| p.2).min(),
                placed.iter().map(|p| p.2).max(),
            ) {
                (Some(first), Some(last)) => (first, last),
                _ => continue,
            };
            let scattered = placed.windows(2).find(|pair| {
                let (i, _, a) = pair[0];
                let (j, _, b) = pair[1];
                b.checked_sub(a) != Offset::try_from(j - i).ok()
            });
            if let Some(pair) = scattered {
                let ((i, a, a_offset), (j, b, b_offset)) = (pair[0], pair[1]);
                report.record(AnomalyKind::NonmonotonicSend, || {
                    format!(
                        "process {process}: op #{} sent {a} and {b} {} apart, but the final log \
                         holds them at offsets {a_offset} and {b_offset}",
                        append.op,
                        j - i
                    )
                });
            }
            if let Some((previous_op, previous_last)) = previous {
                if first_offset <= previous_last && reported_pairs.insert((previous_op, append.op))
                {
                    report.record(AnomalyKind::NonmonotonicSend, || {
                        format!(
                            "process {process}: op #{previous_op} reaches offset {previous_last} \
                             in the final log, yet op #{}, invoked later, starts at offset \
                             {first_offset}",
                            append.op
                        )
                    });
                }
            }
            // Only an acknowledged append orders the ones after it: an append whose outcome
            // is unknown may still be in flight (a request stalled in the network after its
            // client gave up) and land after appends the process invoked later, which a
            // producer without idempotence cannot prevent.
            if append.acked_base.is_some() {
                previous = Some((append.op, last_offset));
            }
        }
    }
}

/// nonmonotonic-poll: a consumer's position must never go backwards.
///
/// Judged per successful read, on the offsets it returned relative to the
/// offset it asked for and to each other: none may lie below `from`, and they
/// must strictly increase. A process's reads are not compared with each other
/// directly, because the workload picks each read's `from` itself: a `from`
/// below where its previous read ended is a deliberate seek (re-reading from
/// 0, or resetting after OFFSET_OUT_OF_RANGE), not an anomaly. A read that
/// continues where the process's previous read ended (its `from` is past that
/// read's last offset) yet returns an offset at or below that last offset is
/// exactly a record below `from`, so the first rule catches it; its detail
/// then names the previous read, since that is the position going backwards.
///
/// Kafka returns whole batches, so a fetch from the middle of a batch
/// legitimately carries records below `from`; the harness must drop those
/// before recording the read, as Kafka consumers do. Each read is reported
/// at most once.
fn check_nonmonotonic_polls(ix: &Index<'_>, report: &mut Report) {
    // Each process's latest successful non-empty read and the last offset it
    // returned: where the process would continue from.
    let mut position: BTreeMap<ProcessId, (OpId, Offset)> = BTreeMap::new();
    for read in &ix.reads {
        let previous = position.get(&read.process).copied();
        let below_from = read.records.iter().find(|&&(offset, _)| offset < read.from);
        if let Some(&(offset, value)) = below_from {
            report.record(AnomalyKind::NonmonotonicPoll, || {
                let went_back = previous.filter(|&(_, previous_last)| {
                    read.from > previous_last && offset <= previous_last
                });
                let context = match went_back {
                    Some((previous_op, previous_last)) => format!(
                        "; process {} continued after read op #{previous_op}, which had already \
                         reached offset {previous_last}, so its position went backwards",
                        read.process
                    ),
                    None => String::new(),
                };
                format!(
                    "read op #{} from offset {} returned {value} at offset {offset}, below the \
                     offset it read from{context}",
                    read.op, read.from
                )
            });
        } else if let Some(pair) = read.records.windows(2).find(|pair| pair[1].0 <= pair[0].0) {
            let ((a_offset, a), (b_offset, b)) = (pair[0], pair[1]);
            report.record(AnomalyKind::NonmonotonicPoll, || {
                format!(
                    "read op #{} returned {a} at offset {a_offset} and then {b} at offset \
                     {b_offset}; offsets within a read must strictly increase",
                    read.op
                )
            });
        }
        if let Some(&(last, _)) = read.records.last() {
            position.insert(read.process, (read.op, last));
        }
    }
}

/// poll-skip: a read must not skip a record that was committed before the
/// read was invoked.
///
/// Assumes the partition's offsets are contiguous: no compaction, no
/// transactions (hence no control records or aborted batches), none of which
/// this log has yet. Retention only removes a prefix: a read below the log
/// start offset fails rather than returning later records, so it makes no gap. A read's records must then sit
/// at consecutive offsets starting at `from`. Two kinds of gap are judged: a
/// read whose first record is above `from` (offsets `from` up to it were
/// skipped), and two consecutive records of a read more than one offset apart.
/// Empty reads are not judged, nor reads whose offsets do not strictly
/// increase, which are nonmonotonic-poll.
///
/// A skipped offset is reported only on evidence, so that a gap the system
/// could legitimately produce is never blamed: the final log (where trusted,
/// see inconsistent-offsets) holds a record there, and that same value was
/// committed at that same offset, by an acknowledgement or a successful read
/// that completed strictly before the read was invoked. Since a committed
/// record stays below the high watermark, such a read had to return it.
/// Equal timestamps are not ordered, so they count as not before. Each read
/// is reported at most once, at the first skipped offset with evidence.
fn check_poll_skips(ix: &Index<'_>, report: &mut Report) {
    let mut final_at: BTreeMap<Offset, Value> = BTreeMap::new();
    for &(offset, value) in &ix.final_log.records {
        if ix.final_log_trusted_at(offset) {
            // A second record at one offset is someone else's anomaly; the first stands.
            final_at.entry(offset).or_insert(value);
        }
    }
    // For each offset, the earliest time its final-log record was known to be
    // committed there, by what, and the value.
    let mut committed: BTreeMap<Offset, (u64, Source, Value)> = BTreeMap::new();
    let mut claim = |offset: Offset, value: Value, time_ns: u64, source: Source| {
        if final_at.get(&offset) != Some(&value) {
            return;
        }
        match committed.entry(offset) {
            Entry::Vacant(entry) => {
                entry.insert((time_ns, source, value));
            }
            Entry::Occupied(mut entry) => {
                if time_ns < entry.get().0 {
                    entry.insert((time_ns, source, value));
                }
            }
        }
    };
    for append in &ix.appends {
        if let (Some(base), Some(time_ns)) = (append.acked_base, append.complete_ns) {
            for (i, &value) in append.values.iter().enumerate() {
                claim(offset_at(base, i), value, time_ns, Source::Ack(append.op));
            }
        }
    }
    for read in &ix.reads {
        for &(offset, value) in read.records {
            claim(offset, value, read.complete_ns, Source::Read(read.op));
        }
    }

    for read in &ix.reads {
        let first = match read.records.first() {
            Some(&(first, _)) => first,
            None => continue,
        };
        if read.records.windows(2).any(|pair| pair[1].0 <= pair[0].0) {
            continue;
        }
        // Half-open ranges of skipped offsets, with what the read returned
        // around them; each range is non-empty, so BTreeMap::range accepts it.
        let start_gap = (first > read.from).then_some((read.from, first, None));
        let inner_gaps = read.records.windows(2).filter_map(|pair| {
            let ((a, _), (b, _)) = (pair[0], pair[1]);
            let after_a = a.saturating_add(1);
            (b > after_a).then_some((after_a, b, Some(a)))
        });
        let skipped = start_gap
            .into_iter()
            .chain(inner_gaps)
            .find_map(|(lo, hi, before)| {
                committed
                    .range(lo..hi)
                    .find(|(_, &(time_ns, _, _))| time_ns < read.invoke_ns)
                    .map(|(&offset, &(_, source, value))| (offset, value, source, before, hi))
            });
        if let Some((offset, value, source, before, after)) = skipped {
            report.record(AnomalyKind::PollSkip, || {
                let shape = match before {
                    Some(before) => format!("returned offset {before} and then offset {after}"),
                    None => format!("started at offset {after}"),
                };
                format!(
                    "read op #{} from offset {} {shape}, skipping offset {offset}, which holds \
                     {value} in the final log and was committed there according to {source} \
                     before the read was invoked",
                    read.op, read.from
                )
            });
        }
    }
}

/// serving-above-watermark: a fetch answer serves only committed records, so
/// every record a successful read returned must lie below the high watermark
/// that same answer reported. Each read is reported at most once, at its
/// first record at or above the watermark.
fn check_serving_above_watermark(ix: &Index<'_>, report: &mut Report) {
    for read in &ix.reads {
        let above = read
            .records
            .iter()
            .find(|&&(offset, _)| offset >= read.high_watermark);
        if let Some(&(offset, value)) = above {
            report.record(AnomalyKind::ServingAboveWatermark, || {
                format!(
                    "read op #{} returned {value} at offset {offset}, but the same answer \
                     reported high watermark {}; only offsets below it are committed and may be \
                     served",
                    read.op, read.high_watermark
                )
            });
        }
    }
}

/// offset-gap: on a topic neither compacted nor transactional every offset
/// from the log start to the end holds a record, so a read's records sit at
/// consecutive offsets starting at its `from`, and so do the final log's from
/// its start offset. Checked only without `CheckOptions::offsets_may_have_gaps`.
///
/// Unlike poll-skip, which blames a gap only on evidence that a committed
/// record was skipped, this judges the shape alone: a hole is an anomaly
/// whatever was or was not written there. One anomaly per hole. Empty reads
/// show no shape and are not judged; nor are reads with a record below their
/// `from` or offsets that do not strictly increase, which are
/// nonmonotonic-poll. In the final log, holes from a detected corruption of
/// synced data on are not judged, since recovery truncated there (see
/// inconsistent-offsets).
fn check_offset_gaps(ix: &Index<'_>, report: &mut Report) {
    for read in &ix.reads {
        let first = match read.records.first() {
            Some(&(first, _)) => first,
            None => continue,
        };
        if first < read.from || read.records.windows(2).any(|pair| pair[1].0 <= pair[0].0) {
            continue;
        }
        if first > read.from {
            report.record(AnomalyKind::OffsetGap, || {
                format!(
                    "read op #{} from offset {} started at offset {first}: offsets [{}, {first}) \
                     are missing",
                    read.op, read.from, read.from
                )
            });
        }
        for pair in read.records.windows(2) {
            let (a, b) = (pair[0].0, pair[1].0);
            let after_a = a.saturating_add(1);
            if b > after_a {
                report.record(AnomalyKind::OffsetGap, || {
                    format!(
                        "read op #{} returned offset {a} and then offset {b}: offsets \
                         [{after_a}, {b}) are missing",
                        read.op
                    )
                });
            }
        }
    }

    let log = ix.final_log;
    let start = log.log_start_offset;
    if let Some(&(first, _)) = log.records.first() {
        if first != start && ix.final_log_trusted_at(start.min(first)) {
            report.record(AnomalyKind::OffsetGap, || {
                if first > start {
                    format!(
                        "the final log starts at offset {start} but its first record is at \
                         offset {first}: offsets [{start}, {first}) are missing"
                    )
                } else {
                    format!(
                        "the final log starts at offset {start} but its first record is at \
                         offset {first}, below its start"
                    )
                }
            });
        }
    }
    for pair in log.records.windows(2) {
        let (a, b) = (pair[0].0, pair[1].0);
        let after_a = a.saturating_add(1);
        if b == after_a || !ix.final_log_trusted_at(after_a.min(b)) {
            continue;
        }
        report.record(AnomalyKind::OffsetGap, || {
            if b > after_a {
                format!(
                    "the final log holds offset {a} and then offset {b}: offsets [{after_a}, {b}) \
                     are missing"
                )
            } else {
                format!(
                    "the final log holds offset {a} and then offset {b}; its offsets must rise \
                     by one from record to record"
                )
            }
        });
    }
}

/// watermark: the high watermark is the boundary of what is committed, and
/// on one node that syncs before acknowledging, commitment is durable; so
/// the watermark never moves back, in real time and across restarts, and the
/// final log keeps everything below the highest watermark ever reported.
///
/// Real-time order: a successful read invoked after another one completed
/// (strictly later, since equal timestamps are not ordered) must report a
/// high watermark at least as high. Reads overlapping in time are not
/// compared, since either may have been served first. Each read is reported
/// at most once, against the highest watermark completed before it, found by
/// walking reads in invocation order over their completions sorted by time.
///
/// With `CheckOptions::watermark_may_regress` (acknowledged data may be lost
/// at a restart) only reads within one open of the log are compared: a pair
/// is skipped when a [`NodeEvent::Opened`] lies between the first read's
/// invocation and the second's completion; and durability is not judged.
///
/// Durability: the final log must end at or above the highest watermark any
/// read reported, unless synced data was corrupted and the corruption was
/// detected at or below the final log's end. Such a shortfall is not counted
/// in `losses_excused`, which counts the records that lost-write excused.
fn check_watermark(history: &History, ix: &Index<'_>, options: &CheckOptions, report: &mut Report) {
    if options.durability == Durability::UncleanElections {
        // A replica elected from outside the ISR may hold less than the high watermark its
        // predecessor reported: the high watermark moves back with it.
        return;
    }
    // Reads are grouped by the open of the log they lie within; without
    // regression every read is in one group.
    // Reads are also grouped by leader epoch: a new leader's high watermark may start below
    // its predecessor's (KIP-207). Without either kind of boundary every read is in one group.
    let mut groups: BTreeMap<usize, Vec<&Observed<'_>>> = BTreeMap::new();
    let bounds = boundaries_around(history, options.watermark_may_regress);
    for read in &ix.reads {
        if let Some(&(at_invoke, Some(at_complete))) = bounds.get(&read.op) {
            if at_invoke == at_complete {
                groups.entry(at_invoke).or_default().push(read);
            }
        }
    }
    for reads in groups.values() {
        // `reads` is in invocation order, as `Index::reads` is.
        let regressions = real_time_regressions(
            reads,
            |read| (read.invoke_ns, read.complete_ns),
            |read| read.high_watermark,
        );
        for (read, earlier) in regressions {
            report.record(AnomalyKind::Watermark, || {
                let scope = if options.watermark_may_regress {
                    " within one open of the log"
                } else {
                    ""
                };
                format!(
                    "read op #{} reported high watermark {}, below the high watermark {} \
                     that read op #{} reported when it completed at {} ns, before read op \
                     #{} was invoked at {} ns; the high watermark must never move \
                     back{scope}",
                    read.op,
                    read.high_watermark,
                    earlier.high_watermark,
                    earlier.op,
                    earlier.complete_ns,
                    read.op,
                    read.invoke_ns
                )
            });
        }
    }

    if options.watermark_may_regress {
        return;
    }
    check_opens_keep_watermark(history, report);
    let highest =
        ix.reads
            .iter()
            .fold(None, |highest: Option<&Observed<'_>>, read| match highest {
                Some(h) if h.high_watermark >= read.high_watermark => Some(h),
                _ => Some(read),
            });
    let Some(highest) = highest else {
        return;
    };
    let end = ix.final_log.log_end_offset();
    if end >= highest.high_watermark {
        return;
    }
    let excused = options.synced_corruption_injected
        && ix
            .final_log
            .corruption_detected_at
            .is_some_and(|detected| detected <= end);
    if excused {
        return;
    }
    report.record(AnomalyKind::Watermark, || {
        format!(
            "read op #{} reported high watermark {}, but the final log ends at offset {end}: \
             offsets [{end}, {}) were committed and are gone",
            highest.op, highest.high_watermark, highest.high_watermark
        )
    });
}

/// The real-time order of a value that must never move back (a high
/// watermark, a group's generation): walks `items`, which must be in
/// invocation order, and returns each item whose value is below the highest
/// value among the items that completed strictly before it was invoked,
/// paired with the earliest-completed item holding that highest value, so
/// that a report names the first evidence. Items overlapping in time are not
/// compared, since either may have taken effect first. `times` gives an
/// item's invocation and completion; n log n, for one sort.
pub(crate) fn real_time_regressions<'a, T, V: Ord>(
    items: &[&'a T],
    times: impl Fn(&T) -> (u64, u64),
    value: impl Fn(&T) -> V,
) -> Vec<(&'a T, &'a T)> {
    let mut completions: Vec<&'a T> = items.to_vec();
    // Stable: ties in completion keep invocation order.
    completions.sort_by_key(|item| times(item).1);
    let mut completed = completions.into_iter().peekable();
    let mut highest: Option<&'a T> = None;
    let mut regressions = Vec::new();
    for &item in items {
        let invoke_ns = times(item).0;
        while let Some(done) = completed.next_if(|done| times(done).1 < invoke_ns) {
            if highest.is_none_or(|h| value(done) > value(h)) {
                highest = Some(done);
            }
        }
        if let Some(earlier) = highest.filter(|h| value(item) < value(h)) {
            regressions.push((item, earlier));
        }
    }
    regressions
}

/// watermark, at each open: the log a restarted node opens must still hold
/// everything below the highest high watermark that a read completed before
/// the open had reported (`log_end_offset >= high watermark`). Walks the events
/// in order, so it is linear. Group polls, of other partitions, are not reads.
fn check_opens_keep_watermark(history: &History, report: &mut Report) {
    let mut highest: Option<(OpId, Offset)> = None;
    let events = history.events();
    for event in events {
        match &event.kind {
            EventKind::Complete {
                op,
                outcome: Outcome::Read { high_watermark, .. },
            } if highest.is_none_or(|(_, h)| *high_watermark > h)
                && matches!(
                    events.get(*op).map(|invocation| &invocation.kind),
                    Some(EventKind::Invoke(Op::Read { .. }))
                ) =>
            {
                highest = Some((*op, *high_watermark));
            }
            EventKind::Node(NodeEvent::Opened { log_end_offset, .. }) => {
                if let Some((op, high_watermark)) = highest.filter(|&(_, h)| *log_end_offset < h) {
                    report.record(AnomalyKind::Watermark, || {
                        format!(
                            "the log opened at {} ns ends at offset {log_end_offset}, below the \
                             high watermark {high_watermark} that read op #{op} reported before \
                             it: offsets [{log_end_offset}, {high_watermark}) were committed and \
                             are gone",
                            event.time_ns
                        )
                    });
                }
            }
            _ => {}
        }
    }
}

/// For each read op, how many boundaries of the watermark's groups the history holds before
/// its invocation and, if it completed, before its completion: every
/// [`NodeEvent::LeaderEpoch`], and every [`NodeEvent::Opened`] when `opens` is set.
fn boundaries_around(
    history: &History,
    opens_count: bool,
) -> BTreeMap<OpId, (usize, Option<usize>)> {
    let mut opens = 0;
    let mut around: BTreeMap<OpId, (usize, Option<usize>)> = BTreeMap::new();
    for (id, event) in history.events().iter().enumerate() {
        match &event.kind {
            EventKind::Invoke(Op::Read { .. }) => {
                around.insert(id, (opens, None));
            }
            EventKind::Complete { op, .. } => {
                if let Some(entry) = around.get_mut(op) {
                    entry.1 = Some(opens);
                }
            }
            EventKind::Node(NodeEvent::Opened { .. }) if opens_count => opens += 1,
            EventKind::Node(NodeEvent::LeaderEpoch { .. }) => opens += 1,
            _ => {}
        }
    }
    around
}

/// corrupt-read: a reader refused a batch whose CRC failed; that is
/// acceptable only where the broker could not have known.
///
/// Recovery at an open verifies every batch from its recovery point on, so a
/// corrupt batch served at or above the recovery point of the last open
/// before the read completed is an anomaly; below it, recovery trusted the
/// batch unread, and finding it is the background scrubber's job, so a
/// reader with `check.crcs` refusing it is the system working. And once the
/// broker has reported corruption at some offset (a
/// [`NodeEvent::CorruptionFound`] after that open and before the read was
/// invoked), it must refuse reads there and beyond until the next open, so a
/// corrupt batch served at or beyond it is an anomaly too. Without any open
/// recorded the recovery point counts as 0: every corrupt read is reported.
/// Each corrupt read is reported at most once.
///
/// The final log is judged the same way: a batch the broker's read path
/// served at the offline open whose CRC failed the offline reader's check is
/// an anomaly at or above that open's recovery point, unless the broker
/// itself reported corruption at or below it.
///
/// Node events are judged by event order, the order the harness recorded
/// them in with the operations. One linear pass over the history.
fn check_corrupt_reads(history: &History, final_log: &FinalLog, report: &mut Report) {
    // The last open: its event id and recovery point.
    let mut last_open: Option<(usize, Offset)> = None;
    let mut opens = 0usize;
    // The lowest corruption the broker reported since the last open (or since
    // the start of the run), with its event id.
    let mut found: Option<(Offset, usize)> = None;
    // For each outstanding read: the opens before its invocation, and the
    // lowest corruption reported by then.
    let mut invoked: BTreeMap<OpId, (usize, Option<(Offset, usize)>)> = BTreeMap::new();
    for (id, event) in history.events().iter().enumerate() {
        match &event.kind {
            EventKind::Node(NodeEvent::Opened { recovery_point, .. }) => {
                last_open = Some((id, *recovery_point));
                opens += 1;
                found = None;
            }
            EventKind::Node(NodeEvent::CorruptionFound { offset })
                if found.is_none_or(|(lowest, _)| *offset < lowest) =>
            {
                found = Some((*offset, id));
            }
            EventKind::Invoke(Op::Read { .. }) => {
                invoked.insert(id, (opens, found));
            }
            EventKind::Complete { op, outcome } => {
                let at_invoke = invoked.remove(op);
                let Outcome::CorruptRead { offset, reason } = outcome else {
                    continue;
                };
                let offset = *offset;
                // Corruption reported before an open that came after the
                // invocation was forgotten by that open, as the broker forgets it.
                let reported = at_invoke
                    .filter(|&(opens_then, _)| opens_then == opens)
                    .and_then(|(_, found)| found);
                let recovery_point = last_open.map_or(0, |(_, point)| point);
                if offset >= recovery_point {
                    report.record(AnomalyKind::CorruptRead, || {
                        let open = match last_open {
                            Some((open, _)) => format!("the open at event #{open}"),
                            None => "no recorded open (so 0)".to_string(),
                        };
                        format!(
                            "read op #{op} was served a corrupt batch at offset {offset} \
                             ({reason:?}), at or above recovery point {recovery_point} of {open}; \
                             recovery should have verified that batch and refused it"
                        )
                    });
                } else if let Some((lowest, found_at)) =
                    reported.filter(|&(lowest, _)| offset >= lowest)
                {
                    report.record(AnomalyKind::CorruptRead, || {
                        format!(
                            "read op #{op} was served a corrupt batch at offset {offset} \
                             ({reason:?}), although the broker had reported corruption at offset \
                             {lowest} (event #{found_at}) before the read was invoked and should \
                             refuse reads at and beyond it"
                        )
                    });
                }
            }
            _ => {}
        }
    }

    if let Some(served) = final_log.corrupt_served_at {
        let reported = final_log
            .corruption_reported_at
            .is_some_and(|reported| reported <= served);
        if served >= final_log.recovery_point && !reported {
            report.record(AnomalyKind::CorruptRead, || {
                let reported = match final_log.corruption_reported_at {
                    Some(at) => format!("only at offset {at}"),
                    None => "nowhere".to_string(),
                };
                format!(
                    "the final log's read path served a corrupt batch at offset {served}, at or \
                     above the offline open's recovery point {}, and recovery reported \
                     corruption {reported}; recovery should have verified that batch and \
                     refused it",
                    final_log.recovery_point
                )
            });
        }
    }
}

/// One observation of the log start offset next to a high watermark: a fetch
/// answer, or the final log (start and end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartObservation {
    /// When the observation was made (its request completed).
    pub time_ns: u64,
    pub log_start_offset: Offset,
    /// A high watermark at least as high as the one retention saw when it
    /// moved the start to `log_start_offset` (the harness picks one observed
    /// later, or the final log end).
    pub high_watermark: Offset,
}

/// retention-overreach: retention by size keeps at least `retention_bytes`
/// below the high watermark, so wherever the log start offset was observed
/// above `first_offset` (the start before anything was deleted), the bytes of
/// the records in `[log_start_offset, high_watermark)` must be at least
/// `retention_bytes`. `bytes_at_most(lo, hi)` is an upper bound, given by the
/// harness that knows the record format, on the bytes of the records in
/// `[lo, hi)`: a bound rather than an exact figure, so an unknown record never
/// makes a valid run fail. Each observation is reported at most once.
pub fn check_retention(
    observations: &[StartObservation],
    first_offset: Offset,
    retention_bytes: u64,
    mut bytes_at_most: impl FnMut(Offset, Offset) -> u64,
    report: &mut Report,
) {
    for observation in observations {
        let StartObservation {
            time_ns,
            log_start_offset,
            high_watermark,
        } = *observation;
        if log_start_offset <= first_offset {
            continue;
        }
        let kept = bytes_at_most(log_start_offset, high_watermark);
        if kept < retention_bytes {
            report.record(AnomalyKind::RetentionOverreach, || {
                format!(
                    "at {time_ns} ns the log start offset was {log_start_offset}, leaving at most \
                     {kept} bytes below high watermark {high_watermark}, fewer than \
                     retention.bytes {retention_bytes}"
                )
            });
        }
    }
}

/// The offset of the `index`-th record of a batch based at `base`. Saturates
/// rather than overflowing, because `base` comes from the system under test.
/// The tombstones (by `is_tombstone`) of every append that may have taken effect, with the
/// lowest offset each can be at: its acknowledged offset, else the lowest it was read at,
/// else one above every offset acknowledged before its append was invoked (an append
/// invoked after another completed lands above it).
fn tombstones(
    operations: &[Operation],
    reads: &[Observed<'_>],
    is_tombstone: crate::compaction::TombstoneOf,
) -> Vec<crate::compaction::Tombstone> {
    let mut read_at: BTreeMap<Value, Offset> = BTreeMap::new();
    for read in reads {
        for &(offset, value) in read.records {
            if is_tombstone(value) {
                let at = read_at.entry(value).or_insert(offset);
                *at = (*at).min(offset);
            }
        }
    }
    // (completion, highest offset acknowledged by then), in completion order.
    let mut acked: Vec<(u64, Offset)> = operations
        .iter()
        .filter_map(|operation| match (&operation.op, &operation.outcome) {
            (Op::Append { values }, Some(Outcome::Appended { base_offset })) => Some((
                operation.complete_ns.unwrap_or(u64::MAX),
                offset_at(*base_offset, values.len().saturating_sub(1)),
            )),
            _ => None,
        })
        .collect();
    acked.sort_unstable();
    let mut highest = Offset::MIN;
    for entry in &mut acked {
        highest = highest.max(entry.1);
        entry.1 = highest;
    }
    let floor = |invoke_ns: u64| -> Offset {
        let before = acked.partition_point(|&(complete_ns, _)| complete_ns < invoke_ns);
        match before.checked_sub(1).and_then(|i| acked.get(i)) {
            Some(&(_, highest)) => highest.saturating_add(1),
            None => 0,
        }
    };
    let mut out = Vec::new();
    for operation in operations {
        let Op::Append { values } = &operation.op else {
            continue;
        };
        let acked_base = match &operation.outcome {
            Some(Outcome::Failed { .. }) => continue,
            Some(Outcome::Appended { base_offset }) => Some(*base_offset),
            _ => None,
        };
        for (i, &value) in values.iter().enumerate() {
            if !is_tombstone(value) {
                continue;
            }
            let offset_min = match (acked_base, read_at.get(&value)) {
                (Some(base), _) => offset_at(base, i),
                (None, Some(&at)) => at,
                (None, None) => floor(operation.invoke_ns),
            };
            out.push(crate::compaction::Tombstone {
                value,
                offset_min,
                invoke_ns: operation.invoke_ns,
            });
        }
    }
    out
}

fn offset_at(base: Offset, index: usize) -> Offset {
    base.saturating_add(Offset::try_from(index).unwrap_or(Offset::MAX))
}

pub(crate) fn list_offsets(offsets: &[Offset]) -> String {
    let mut text = String::from("offsets [");
    for (i, offset) in offsets.iter().take(DETAIL_OFFSETS_MAX).enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        text.push_str(&offset.to_string());
    }
    if offsets.len() > DETAIL_OFFSETS_MAX {
        text.push_str(", ...");
    }
    text.push(']');
    text
}

/// Asserts the report holds exactly the listed kinds (the crate's tests).
#[cfg(test)]
pub(crate) fn assert_kinds(report: &Report, kinds: &[AnomalyKind]) {
    for kind in AnomalyKind::ALL {
        assert_eq!(
            report.has(kind),
            kinds.contains(&kind),
            "{kind} expected: {}\n{}",
            kinds.contains(&kind),
            report.summary()
        );
    }
}

/// The details a report kept for `kind` (the crate's tests).
#[cfg(test)]
pub(crate) fn details(report: &Report, kind: AnomalyKind) -> Vec<&str> {
    report
        .anomalies
        .iter()
        .filter(|a| a.kind == kind)
        .map(|a| a.detail.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(process: u32, seq: u32) -> Value {
        Value::new(process, seq)
    }

    /// Builds histories tersely, advancing time by one per event.
    #[derive(Default)]
    struct Builder {
        history: History,
        time_ns: u64,
        /// The high watermark `read_ok` reports: never below one it reported
        /// before, the end of an acknowledged append, or what the read returns,
        /// as a correct single node's would be.
        high_watermark: Offset,
    }

    impl Builder {
        fn tick(&mut self) -> u64 {
            self.time_ns += 1;
            self.time_ns
        }

        fn append(&mut self, process: ProcessId, values: &[Value], outcome: Outcome) -> OpId {
            let t = self.tick();
            let op = self.history.invoke(
                t,
                process,
                Op::Append {
                    values: values.to_vec(),
                },
            );
            let t = self.tick();
            self.history.complete(t, op, outcome);
            op
        }

        fn append_ok(&mut self, process: ProcessId, values: &[Value], base_offset: Offset) {
            self.append(process, values, Outcome::Appended { base_offset });
            self.high_watermark = self
                .high_watermark
                .max(offset_at(base_offset, values.len()));
        }

        fn append_unknown(&mut self, process: ProcessId, values: &[Value]) {
            self.append(
                process,
                values,
                Outcome::Unknown {
                    reason: "timeout".into(),
                },
            );
        }

        fn append_failed(&mut self, process: ProcessId, values: &[Value]) {
            self.append(
                process,
                values,
                Outcome::Failed {
                    reason: "not leader".into(),
                },
            );
        }

        fn read_failed(&mut self, process: ProcessId, from: Offset) {
            let t = self.tick();
            let op = self.history.invoke(t, process, Op::Read { from });
            let t = self.tick();
            self.history.complete(
                t,
                op,
                Outcome::Failed {
                    reason: "OFFSET_OUT_OF_RANGE".into(),
                },
            );
        }

        fn read_ok(&mut self, process: ProcessId, from: Offset, records: &[(Offset, Value)]) {
            let above = records
                .iter()
                .map(|&(offset, _)| offset.saturating_add(1))
                .max()
                .unwrap_or(Offset::MIN);
            self.high_watermark = self.high_watermark.max(above);
            let high_watermark = self.high_watermark;
            self.read_with_hw(process, from, records, high_watermark);
        }

        fn node(&mut self, event: NodeEvent) {
            let t = self.tick();
            self.history.node(t, 0, event);
        }

        fn opened(&mut self, recovery_point: Offset, log_end_offset: Offset) {
            self.node(NodeEvent::Opened {
                recovery_point,
                log_end_offset,
            });
        }

        /// A read from `from` refused as corrupt at `offset`.
        fn read_corrupt(&mut self, process: ProcessId, from: Offset, offset: Offset) -> OpId {
            let t = self.tick();
            let op = self.history.invoke(t, process, Op::Read { from });
            let t = self.tick();
            self.history.complete(
                t,
                op,
                Outcome::CorruptRead {
                    offset,
                    reason: "crc32c mismatch".into(),
                },
            );
            op
        }

        /// A successful read reporting exactly `high_watermark`.
        fn read_with_hw(
            &mut self,
            process: ProcessId,
            from: Offset,
            records: &[(Offset, Value)],
            high_watermark: Offset,
        ) -> OpId {
            let t = self.tick();
            let op = self.history.invoke(t, process, Op::Read { from });
            let t = self.tick();
            self.history.complete(
                t,
                op,
                Outcome::Read {
                    records: records.to_vec(),
                    high_watermark,
                },
            );
            op
        }
    }

    /// A final log holding `values` at dense offsets from `start`.
    fn final_log(start: Offset, values: &[Value]) -> FinalLog {
        FinalLog {
            log_start_offset: start,
            records: values
                .iter()
                .enumerate()
                .map(|(i, &value)| (offset_at(start, i), value))
                .collect(),
            recovery_point: start,
            ..FinalLog::default()
        }
    }

    fn check_plain(b: &Builder, log: &FinalLog) -> Report {
        check(&b.history, log, &CheckOptions::default())
    }

    fn synced_corruption() -> CheckOptions {
        CheckOptions {
            synced_corruption_injected: true,
            ..CheckOptions::default()
        }
    }

    fn gaps_allowed() -> CheckOptions {
        CheckOptions {
            offsets_may_have_gaps: true,
            ..CheckOptions::default()
        }
    }

    /// Four records from process 1, acknowledged at offsets 0..=3.
    fn four_acked() -> (Builder, Vec<Value>) {
        let mut b = Builder::default();
        let values: Vec<Value> = (0..4).map(|seq| v(1, seq)).collect();
        b.append_ok(1, &values[0..3], 0);
        b.append_ok(1, &values[3..4], 3);
        (b, values)
    }

    /// Process 1's values are keyed by seq % 2; process 9's values are tombstones (of key
    /// seq % 2 too). Time in these histories is one ns per event, so `delete.retention.ms`
    /// passes only with a forward clock jump.
    fn compaction_rule(clock_forward_jumps: Vec<(u64, u64)>) -> CheckOptions {
        fn key_of(value: Value) -> u64 {
            value.0 % 2
        }
        fn is_tombstone(value: Value) -> bool {
            value.0 >> 32 == 9
        }
        CheckOptions {
            offsets_may_have_gaps: true,
            compaction: Some(crate::compaction::Compaction {
                key_of,
                is_tombstone,
                delete_retention_ms: 1_000,
                clock_forward_jumps,
                end_ns: 1_000,
            }),
            ..CheckOptions::default()
        }
    }

    #[test]
    fn compaction_excuses_superseded_records_and_old_tombstones_only() {
        let mut b = Builder::default();
        let (a0, a1, a2) = (v(1, 0), v(1, 1), v(1, 2));
        let t1 = v(9, 1);
        b.append_ok(1, &[a0, a1], 0);
        b.append_ok(9, &[t1], 2);
        b.append_ok(1, &[a2], 3);
        // a0 superseded by a2 (key 0); a1 shadowed by the tombstone t1 (key 1), which itself
        // went past its horizon (the node's clock jumped after its append).
        let log = FinalLog {
            records: vec![(3, a2)],
            ..FinalLog::default()
        };
        let report = check(&b.history, &log, &compaction_rule(vec![(4, 2_000)]));
        assert!(report.is_valid(), "{report}");
        // Without the jump the tombstone's horizon cannot have passed: it, and the record
        // it shadows, are lost.
        let report = check(&b.history, &log, &compaction_rule(vec![]));
        assert_kinds(&report, &[AnomalyKind::LostWrite]);
        assert_eq!(report.count(AnomalyKind::LostWrite), 2);
        // A jump before the tombstone's append does not help it.
        let report = check(&b.history, &log, &compaction_rule(vec![(1, 2_000)]));
        assert!(report.has(AnomalyKind::LostWrite));
        // The latest record of a key may never go (and with it, what it superseded).
        let log = FinalLog {
            records: vec![(2, t1)],
            ..FinalLog::default()
        };
        let report = check(&b.history, &log, &compaction_rule(vec![(4, 2_000)]));
        assert_kinds(&report, &[AnomalyKind::LostWrite]);
        assert_eq!(report.count(AnomalyKind::LostWrite), 2, "{report}");
    }

    #[test]
    fn compaction_judges_a_tombstone_of_unknown_outcome_by_what_was_acknowledged_before() {
        let mut b = Builder::default();
        let (a0, a1) = (v(1, 1), v(1, 3));
        b.append_ok(1, &[a0], 0);
        b.append_unknown(9, &[v(9, 1)]);
        b.append_ok(1, &[a1], 2);
        // The tombstone of key 1 came after a0 was acknowledged, so it may shadow a0; not a1,
        // acknowledged after the tombstone's append was invoked.
        let log = FinalLog::default();
        let report = check(&b.history, &log, &compaction_rule(vec![(4, 2_000)]));
        assert_kinds(&report, &[AnomalyKind::LostWrite]);
        assert_eq!(report.count(AnomalyKind::LostWrite), 1, "{report}");
        assert!(report.anomalies[0].detail.contains("offset 2"), "{report}");
    }

    #[test]
    fn compaction_reports_a_value_at_two_offsets_as_a_duplicate() {
        let mut b = Builder::default();
        let (a0, a1) = (v(1, 0), v(1, 2));
        // a0's append lands at 0 (read there), its answer is lost; a1 supersedes it and the
        // cleaner removes it; the retry is appended again at 2 and acknowledged there.
        let t = b.tick();
        let op = b.history.invoke(t, 1, Op::Append { values: vec![a0] });
        b.read_ok(2, 0, &[(0, a0)]);
        b.append_ok(3, &[a1], 1);
        let t = b.tick();
        b.history
            .complete(t, op, Outcome::Appended { base_offset: 2 });
        let log = FinalLog {
            records: vec![(1, a1), (2, a0)],
            ..FinalLog::default()
        };
        let report = check(&b.history, &log, &compaction_rule(vec![]));
        assert_kinds(&report, &[AnomalyKind::Duplicate]);
        let plain = check(&b.history, &log, &gaps_allowed());
        assert!(plain.has(AnomalyKind::InconsistentOffsets), "{plain}");
    }

    #[test]
    fn anomaly_names_are_jepsen_names() {
        let names: Vec<&str> = AnomalyKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(
            names,
            [
                "lost-write",
                "inconsistent-offsets",
                "nonmonotonic-send",
                "nonmonotonic-poll",
                "poll-skip",
                "duplicate",
                "phantom-read",
                "unreported-corruption",
                "retention-overreach",
                "serving-above-watermark",
                "offset-gap",
                "watermark",
                "corrupt-read",
                "split-assignment",
                "generation-regress",
                "zombie-commit",
                "lost-commit",
                "commit-regress",
                "unseen",
                "served-while-not-leader"
            ]
        );
    }

    #[test]
    fn empty_history_and_log_is_valid() {
        let report = check(
            &History::new(),
            &FinalLog::default(),
            &CheckOptions::default(),
        );
        assert!(report.is_valid());
        assert_eq!(report.ops_ok + report.ops_failed + report.ops_unknown, 0);
    }

    #[test]
    fn valid_history_is_valid_and_counted() {
        let (mut b, values) = four_acked();
        b.append_failed(2, &[v(2, 0)]);
        b.append_unknown(2, &[v(2, 1)]);
        b.read_ok(3, 1, &[(1, values[1]), (2, values[2]), (3, values[3])]);
        let t = b.tick();
        b.history.invoke(t, 4, Op::Read { from: 0 });
        let report = check_plain(&b, &final_log(0, &values));
        assert!(report.is_valid(), "{}", report.summary());
        assert_eq!(report.ops_ok, 3);
        assert_eq!(report.ops_failed, 1);
        assert_eq!(report.ops_unknown, 2);
        assert_eq!(report.records_in_final_log, 4);
        assert!(report.summary().starts_with("valid\n"));
    }

    #[test]
    fn acknowledged_append_missing_is_a_lost_write() {
        let (b, values) = four_acked();
        let report = check_plain(&b, &final_log(0, &values[0..3]));
        assert_kinds(&report, &[AnomalyKind::LostWrite]);
        assert_eq!(report.count(AnomalyKind::LostWrite), 1);
        assert!(report.anomalies[0].detail.contains("offset 3"));
        assert!(report.summary().contains("lost-write: 1\n"));
    }

    #[test]
    fn loss_at_or_after_detected_synced_corruption_is_excused() {
        let (b, values) = four_acked();
        let mut log = final_log(0, &values[0..3]);
        log.corruption_detected_at = Some(2);
        let report = check(&b.history, &log, &synced_corruption());
        assert!(report.is_valid(), "{}", report.summary());
        assert_eq!(report.losses_excused, 1);
    }

    #[test]
    fn loss_before_detected_synced_corruption_is_still_a_lost_write() {
        let (b, values) = four_acked();
        let mut log = final_log(0, &values[0..1]);
        log.corruption_detected_at = Some(2);
        let report = check(&b.history, &log, &synced_corruption());
        assert_kinds(&report, &[AnomalyKind::LostWrite]);
        assert_eq!(report.count(AnomalyKind::LostWrite), 1);
        assert_eq!(report.losses_excused, 2);
    }

    #[test]
    fn detected_corruption_excuses_nothing_unless_synced_data_was_corrupted() {
        let (b, values) = four_acked();
        let mut log = final_log(0, &values[0..3]);
        log.corruption_detected_at = Some(2);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::LostWrite]);
    }

    #[test]
    fn undetected_loss_after_synced_corruption_is_unreported_corruption() {
        let (b, values) = four_acked();
        let report = check(
            &b.history,
            &final_log(0, &values[0..3]),
            &synced_corruption(),
        );
        assert_kinds(&report, &[AnomalyKind::UnreportedCorruption]);
        assert_eq!(report.count(AnomalyKind::UnreportedCorruption), 1);
    }

    #[test]
    fn synced_corruption_without_loss_is_valid() {
        let (b, values) = four_acked();
        let report = check(&b.history, &final_log(0, &values), &synced_corruption());
        assert!(report.is_valid(), "{}", report.summary());
    }

    #[test]
    fn record_observed_by_a_read_then_missing_is_a_lost_write() {
        let mut b = Builder::default();
        b.append_unknown(1, &[v(1, 0)]);
        b.read_ok(2, 0, &[(0, v(1, 0))]);
        let report = check_plain(&b, &final_log(0, &[]));
        // The read's high watermark of 1 is gone from the final log too.
        assert_kinds(&report, &[AnomalyKind::LostWrite, AnomalyKind::Watermark]);
        assert!(report.anomalies[0].detail.contains("read op"));
    }

    fn durability(durability: Durability) -> CheckOptions {
        CheckOptions {
            durability,
            ..CheckOptions::default()
        }
    }

    /// A leader acknowledged op #1 at offset 1 (acks=1) and failed before a follower had it;
    /// the new leader took offset 1 for process 2's next append.
    fn leader_acknowledged_then_replaced() -> (Builder, FinalLog) {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0)], 0);
        b.read_ok(3, 0, &[(0, v(1, 0))]);
        b.append_ok(1, &[v(1, 1), v(1, 2)], 1);
        b.append_ok(2, &[v(2, 0)], 1);
        (b, final_log(0, &[v(1, 0), v(2, 0)]))
    }

    #[test]
    fn a_leader_acknowledged_record_lost_on_failover_is_allowed_and_counted_under_acks_one() {
        let (b, log) = leader_acknowledged_then_replaced();
        // The same history judged as acks=all: the loss is one, and the offsets disagree.
        let strict = check(&b.history, &log, &CheckOptions::default());
        assert!(strict.has(AnomalyKind::LostWrite), "{strict}");
        assert!(strict.has(AnomalyKind::InconsistentOffsets), "{strict}");
        let report = check(
            &b.history,
            &log,
            &durability(Durability::LeaderAcknowledged),
        );
        assert!(report.is_valid(), "{report}");
        assert_eq!(report.losses_allowed, 2, "{report}");
        assert_eq!(report.reads_contradicted, 0);
    }

    #[test]
    fn a_read_record_still_proves_commitment_under_acks_one() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0)], 0);
        b.read_ok(2, 0, &[(0, v(1, 0))]);
        let report = check(
            &b.history,
            &final_log(0, &[]),
            &durability(Durability::LeaderAcknowledged),
        );
        assert!(report.has(AnomalyKind::LostWrite), "{report}");
        assert_eq!(
            report.losses_allowed, 1,
            "the acknowledgement is discounted"
        );
    }

    #[test]
    fn unclean_elections_allow_losing_read_records_and_count_the_reads() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0)], 0);
        b.append_ok(1, &[v(1, 1)], 1);
        b.read_ok(2, 0, &[(0, v(1, 0)), (1, v(1, 1))]);
        // A replica that had only offset 0 was elected; process 3 then wrote at offset 1.
        b.append_ok(3, &[v(3, 0)], 1);
        let log = final_log(0, &[v(1, 0), v(3, 0)]);
        let acks_one = check(
            &b.history,
            &log,
            &durability(Durability::LeaderAcknowledged),
        );
        assert!(acks_one.has(AnomalyKind::LostWrite), "{acks_one}");
        let report = check(&b.history, &log, &durability(Durability::UncleanElections));
        assert!(report.is_valid(), "{report}");
        assert_eq!(
            (report.losses_allowed, report.reads_contradicted),
            (1, 1),
            "{report}"
        );
    }

    #[test]
    fn unclean_elections_still_catch_a_phantom_and_a_duplicate() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0)], 0);
        b.append_failed(1, &[v(1, 1)]);
        let log = final_log(0, &[v(1, 0), v(1, 1), v(1, 0)]);
        let report = check(&b.history, &log, &durability(Durability::UncleanElections));
        assert!(report.has(AnomalyKind::PhantomRead), "{report}");
        assert!(report.has(AnomalyKind::Duplicate), "{report}");
    }

    #[test]
    fn unknown_appends_may_or_may_not_survive() {
        let mut b = Builder::default();
        b.append_unknown(1, &[v(1, 0)]);
        b.append_unknown(1, &[v(1, 1)]);
        b.append_ok(2, &[v(2, 0)], 1);
        let report = check_plain(&b, &final_log(0, &[v(1, 0), v(2, 0)]));
        assert!(report.is_valid(), "{}", report.summary());
    }

    #[test]
    fn below_log_start_offset_is_lost_too() {
        let (b, values) = four_acked();
        let report = check_plain(&b, &final_log(2, &values[2..4]));
        assert_kinds(&report, &[AnomalyKind::LostWrite]);
        assert_eq!(report.count(AnomalyKind::LostWrite), 2);
    }

    #[test]
    fn below_log_start_offset_is_deleted_with_retention() {
        let (b, values) = four_acked();
        let options = CheckOptions {
            retention: true,
            ..CheckOptions::default()
        };
        let report = check(&b.history, &final_log(2, &values[2..4]), &options);
        assert!(report.is_valid(), "{report}");
        // Retention excuses nothing at or above the start.
        let report = check(&b.history, &final_log(2, &values[2..3]), &options);
        assert_kinds(&report, &[AnomalyKind::LostWrite]);
    }

    #[test]
    fn retention_overreach_needs_fewer_bytes_than_the_limit() {
        let observe = |start, hw| StartObservation {
            time_ns: 1,
            log_start_offset: start,
            high_watermark: hw,
        };
        // 10 bytes per record, 100 bytes to keep.
        let observations = [
            observe(0, 3),
            observe(5, 15),
            observe(8, 17),
            observe(9, 30),
        ];
        let mut report = Report::default();
        check_retention(
            &observations,
            0,
            100,
            |lo, hi| (hi - lo) as u64 * 10,
            &mut report,
        );
        assert_kinds(&report, &[AnomalyKind::RetentionOverreach]);
        assert_eq!(report.count(AnomalyKind::RetentionOverreach), 1);
        assert!(report.anomalies[0]
            .detail
            .contains("log start offset was 8"));
    }

    #[test]
    fn acknowledged_offset_holding_another_value_is_inconsistent_and_lost() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0)], 0);
        b.append_unknown(2, &[v(2, 0)]);
        let report = check_plain(&b, &final_log(0, &[v(2, 0)]));
        assert_kinds(
            &report,
            &[AnomalyKind::LostWrite, AnomalyKind::InconsistentOffsets],
        );
    }

    #[test]
    fn acknowledged_value_at_another_offset_is_inconsistent_not_lost() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0)], 3);
        let report = check_plain(&b, &final_log(0, &[v(1, 0)]));
        assert_kinds(&report, &[AnomalyKind::InconsistentOffsets]);
        assert_eq!(report.count(AnomalyKind::InconsistentOffsets), 1);
    }

    #[test]
    fn two_reads_disagreeing_on_an_offset_are_inconsistent() {
        let mut b = Builder::default();
        b.append_unknown(1, &[v(1, 0)]);
        b.append_unknown(2, &[v(2, 0)]);
        b.read_ok(3, 0, &[(0, v(1, 0))]);
        b.read_ok(3, 0, &[(0, v(2, 0))]);
        // Both values are lost too, being absent from the final log.
        let report = check_plain(&b, &final_log(0, &[]));
        assert!(report.has(AnomalyKind::InconsistentOffsets));
        assert_eq!(report.count(AnomalyKind::InconsistentOffsets), 1);
    }

    #[test]
    fn one_value_at_two_offsets_in_reads_is_inconsistent() {
        let mut b = Builder::default();
        b.append_unknown(1, &[v(1, 0)]);
        b.read_ok(3, 0, &[(0, v(1, 0))]);
        b.read_ok(3, 0, &[(1, v(1, 0))]);
        let report = check_plain(&b, &final_log(0, &[]));
        assert!(report.has(AnomalyKind::InconsistentOffsets));
    }

    #[test]
    fn final_log_past_detected_corruption_is_not_compared() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0), v(1, 1)], 0);
        b.append_unknown(2, &[v(2, 0)]);
        // Offset 1 holds a different value, but only past the detected corruption.
        let mut log = final_log(0, &[v(1, 0), v(2, 0)]);
        log.corruption_detected_at = Some(1);
        let report = check(&b.history, &log, &synced_corruption());
        assert!(report.is_valid(), "{}", report.summary());
        assert_eq!(report.losses_excused, 1);
        // Without the excuse the same log is inconsistent and loses v(1, 1).
        let report = check_plain(&b, &log);
        assert_kinds(
            &report,
            &[AnomalyKind::LostWrite, AnomalyKind::InconsistentOffsets],
        );
    }

    #[test]
    fn value_twice_in_the_final_log_is_a_duplicate() {
        let mut b = Builder::default();
        b.append_unknown(1, &[v(1, 0)]);
        let report = check_plain(&b, &final_log(0, &[v(1, 0), v(1, 0)]));
        assert_kinds(&report, &[AnomalyKind::Duplicate]);
        assert_eq!(report.count(AnomalyKind::Duplicate), 1);
    }

    #[test]
    fn retried_append_landing_twice_is_only_a_duplicate() {
        // The first attempt landed at 0 but its response was lost; the retry
        // landed at 1 and was acknowledged there. A read saw the first copy.
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0)], 1);
        b.read_ok(2, 0, &[(0, v(1, 0))]);
        let report = check_plain(&b, &final_log(0, &[v(1, 0), v(1, 0)]));
        assert_kinds(&report, &[AnomalyKind::Duplicate]);
    }

    #[test]
    fn value_twice_in_one_read_is_a_duplicate() {
        let mut b = Builder::default();
        b.append_unknown(1, &[v(1, 0)]);
        b.read_ok(2, 0, &[(0, v(1, 0)), (1, v(1, 0))]);
        let report = check_plain(&b, &final_log(0, &[v(1, 0)]));
        assert!(report.has(AnomalyKind::Duplicate));
        assert!(report
            .anomalies
            .iter()
            .any(|a| a.kind == AnomalyKind::Duplicate && a.detail.contains("read op")));
    }

    #[test]
    fn same_value_in_two_reads_is_not_a_duplicate() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0)], 0);
        b.read_ok(2, 0, &[(0, v(1, 0))]);
        b.read_ok(2, 0, &[(0, v(1, 0))]);
        let report = check_plain(&b, &final_log(0, &[v(1, 0)]));
        assert!(report.is_valid(), "{}", report.summary());
    }

    #[test]
    fn read_of_a_value_never_written_is_a_phantom() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0)], 0);
        b.read_ok(2, 0, &[(0, v(1, 0)), (1, Value(0xdead_beef))]);
        let report = check_plain(&b, &final_log(0, &[v(1, 0)]));
        // Serving the garbage at offset 1 claimed a high watermark of 2,
        // which the final log does not reach.
        assert_kinds(&report, &[AnomalyKind::PhantomRead, AnomalyKind::Watermark]);
    }

    #[test]
    fn garbage_in_the_final_log_is_a_phantom() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0)], 0);
        let report = check_plain(&b, &final_log(0, &[v(1, 0), Value(42)]));
        assert_kinds(&report, &[AnomalyKind::PhantomRead]);
        assert!(report.anomalies[0].detail.contains("no append wrote"));
    }

    #[test]
    fn value_of_a_failed_append_served_is_a_phantom() {
        let mut b = Builder::default();
        b.append_failed(1, &[v(1, 0)]);
        b.read_ok(2, 0, &[(0, v(1, 0))]);
        let report = check_plain(&b, &final_log(0, &[v(1, 0)]));
        assert_kinds(&report, &[AnomalyKind::PhantomRead]);
        assert_eq!(report.count(AnomalyKind::PhantomRead), 1);
        assert!(report.anomalies[0].detail.contains("definitely failed"));
    }

    #[test]
    fn failed_append_absent_is_valid() {
        let mut b = Builder::default();
        b.append_failed(1, &[v(1, 0)]);
        b.append_ok(1, &[v(1, 1)], 0);
        let report = check_plain(&b, &final_log(0, &[v(1, 1)]));
        assert!(report.is_valid(), "{}", report.summary());
    }

    #[test]
    fn later_acknowledged_append_at_a_lower_offset_is_nonmonotonic() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0)], 5);
        b.append_ok(1, &[v(1, 1)], 3);
        let mut values = vec![v(9, 0); 6];
        values[5] = v(1, 0);
        values[3] = v(1, 1);
        // Filler written one record at a time by another process, whose fate is unknown.
        let fillers: Vec<Value> = (0..4).map(|seq| v(9, seq)).collect();
        for filler in &fillers {
            b.append_unknown(9, &[*filler]);
        }
        values[0] = fillers[0];
        values[1] = fillers[1];
        values[2] = fillers[2];
        values[4] = fillers[3];
        let report = check_plain(&b, &final_log(0, &values));
        assert_kinds(&report, &[AnomalyKind::NonmonotonicSend]);
        // The acknowledgements and the final log show the same inversion once.
        assert_eq!(report.count(AnomalyKind::NonmonotonicSend), 1);
    }

    #[test]
    fn overlapping_acknowledged_appends_are_nonmonotonic() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0), v(1, 1)], 0);
        b.append_ok(1, &[v(1, 2)], 1);
        let report = check_plain(&b, &final_log(0, &[v(1, 0), v(1, 1)]));
        assert!(report.has(AnomalyKind::NonmonotonicSend));
    }

    #[test]
    fn an_append_of_unknown_outcome_may_land_after_a_later_one() {
        let mut b = Builder::default();
        b.append_unknown(1, &[v(1, 0)]);
        b.append_unknown(1, &[v(1, 1)]);
        let report = check_plain(&b, &final_log(0, &[v(1, 1), v(1, 0)]));
        assert_kinds(&report, &[]);
    }

    #[test]
    fn an_acknowledged_append_overtaken_in_the_final_log_is_nonmonotonic() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0)], 1);
        b.append_unknown(1, &[v(1, 1)]);
        let report = check_plain(&b, &final_log(0, &[v(1, 1), v(1, 0)]));
        assert!(report.has(AnomalyKind::NonmonotonicSend));
    }

    #[test]
    fn one_append_scattered_in_the_final_log_is_nonmonotonic() {
        let mut b = Builder::default();
        b.append_unknown(1, &[v(1, 0), v(1, 1)]);
        b.append_unknown(2, &[v(2, 0)]);
        let report = check_plain(&b, &final_log(0, &[v(1, 0), v(2, 0), v(1, 1)]));
        assert_kinds(&report, &[AnomalyKind::NonmonotonicSend]);
        assert!(report.anomalies[0].detail.contains("1 apart"));
    }

    #[test]
    fn interleaved_processes_are_monotonic() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0)], 0);
        b.append_ok(2, &[v(2, 0), v(2, 1)], 1);
        b.append_unknown(1, &[v(1, 1)]);
        b.append_ok(1, &[v(1, 2)], 3);
        b.append_ok(2, &[v(2, 2)], 4);
        let log = final_log(0, &[v(1, 0), v(2, 0), v(2, 1), v(1, 2), v(2, 2)]);
        let report = check_plain(&b, &log);
        assert!(report.is_valid(), "{}", report.summary());
    }

    /// Three records from process 1, acknowledged at offsets 0..=2, and the
    /// final log holding them.
    fn three_acked() -> (Builder, Vec<Value>, FinalLog) {
        let mut b = Builder::default();
        let values: Vec<Value> = (0..3).map(|seq| v(1, seq)).collect();
        b.append_ok(1, &values, 0);
        let log = final_log(0, &values);
        (b, values, log)
    }

    #[test]
    fn offsets_going_backwards_within_a_read_are_nonmonotonic_poll() {
        let (mut b, x, log) = three_acked();
        b.read_ok(2, 0, &[(1, x[1]), (0, x[0])]);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::NonmonotonicPoll]);
        assert_eq!(report.count(AnomalyKind::NonmonotonicPoll), 1);
        assert!(report.anomalies[0].detail.contains("strictly increase"));
        assert!(report.summary().contains("nonmonotonic-poll: 1\n"));
    }

    #[test]
    fn a_repeated_offset_within_a_read_is_nonmonotonic_poll() {
        let (mut b, x, log) = three_acked();
        b.read_ok(2, 0, &[(0, x[0]), (1, x[1]), (1, x[1]), (2, x[2])]);
        let report = check_plain(&b, &log);
        assert!(report.has(AnomalyKind::NonmonotonicPoll));
        assert!(!report.has(AnomalyKind::PollSkip));
    }

    #[test]
    fn a_record_below_from_is_nonmonotonic_poll() {
        let (mut b, x, log) = three_acked();
        b.read_ok(2, 2, &[(1, x[1]), (2, x[2])]);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::NonmonotonicPoll]);
        assert!(report.anomalies[0]
            .detail
            .contains("below the offset it read from"));
        assert!(!report.anomalies[0].detail.contains("went backwards"));
    }

    #[test]
    fn a_continuing_read_going_back_is_nonmonotonic_poll() {
        let (mut b, x, log) = three_acked();
        b.read_ok(2, 0, &[(0, x[0]), (1, x[1])]);
        b.read_ok(2, 2, &[(1, x[1]), (2, x[2])]);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::NonmonotonicPoll]);
        assert_eq!(report.count(AnomalyKind::NonmonotonicPoll), 1);
        assert!(report.anomalies[0].detail.contains("went backwards"));
    }

    #[test]
    fn deliberate_seeks_are_not_anomalies() {
        let (mut b, x, log) = three_acked();
        // Read everything, then re-read from 0, as the workload sometimes does.
        b.read_ok(2, 0, &[(0, x[0]), (1, x[1]), (2, x[2])]);
        b.read_ok(2, 0, &[(0, x[0])]);
        // Continue past the end, get OFFSET_OUT_OF_RANGE, reset to 0.
        b.read_ok(2, 1, &[(1, x[1]), (2, x[2])]);
        b.read_failed(2, 7);
        b.read_ok(2, 0, &[(0, x[0]), (1, x[1])]);
        // Seek back into the middle of what was read.
        b.read_ok(2, 1, &[(1, x[1])]);
        // An empty read at the end, and one that continues exactly.
        b.read_ok(2, 3, &[]);
        b.read_ok(3, 0, &[(0, x[0])]);
        b.read_ok(3, 1, &[(1, x[1]), (2, x[2])]);
        let report = check_plain(&b, &log);
        assert!(report.is_valid(), "{}", report.summary());
    }

    #[test]
    fn a_gap_inside_a_read_over_an_acknowledged_record_is_poll_skip() {
        let (mut b, x, log) = three_acked();
        b.read_ok(2, 0, &[(0, x[0]), (2, x[2])]);
        let report = check(&b.history, &log, &gaps_allowed());
        assert_kinds(&report, &[AnomalyKind::PollSkip]);
        // With dense offsets required, the hole itself is an offset-gap too.
        assert_kinds(
            &check_plain(&b, &log),
            &[AnomalyKind::PollSkip, AnomalyKind::OffsetGap],
        );
        assert_eq!(report.count(AnomalyKind::PollSkip), 1);
        let detail = &report.anomalies[0].detail;
        assert!(detail.contains("skipping offset 1"), "{detail}");
        assert!(detail.contains("acknowledgement of op #0"), "{detail}");
        assert!(report.summary().contains("poll-skip: 1\n"));
    }

    #[test]
    fn a_read_starting_above_from_over_a_committed_record_is_poll_skip() {
        let (mut b, x, log) = three_acked();
        b.read_ok(2, 0, &[(1, x[1]), (2, x[2])]);
        let report = check(&b.history, &log, &gaps_allowed());
        assert_kinds(&report, &[AnomalyKind::PollSkip]);
        // With dense offsets required, the hole itself is an offset-gap too.
        assert_kinds(
            &check_plain(&b, &log),
            &[AnomalyKind::PollSkip, AnomalyKind::OffsetGap],
        );
        let detail = &report.anomalies[0].detail;
        assert!(detail.contains("started at offset 1"), "{detail}");
        assert!(detail.contains("skipping offset 0"), "{detail}");
    }

    #[test]
    fn a_record_committed_by_an_earlier_read_cannot_be_skipped() {
        let mut b = Builder::default();
        let x = [v(1, 0), v(1, 1)];
        b.append_unknown(1, &x);
        b.read_ok(3, 0, &[(0, x[0]), (1, x[1])]);
        b.read_ok(2, 0, &[(1, x[1])]);
        let report = check(&b.history, &final_log(0, &x), &gaps_allowed());
        assert_kinds(&report, &[AnomalyKind::PollSkip]);
        // With dense offsets required, the hole itself is an offset-gap too.
        assert_kinds(
            &check_plain(&b, &final_log(0, &x)),
            &[AnomalyKind::PollSkip, AnomalyKind::OffsetGap],
        );
        assert!(report.anomalies[0].detail.contains("read op #2"));
    }

    #[test]
    fn skipping_a_record_not_yet_known_committed_is_not_poll_skip() {
        // The first read was invoked before the acknowledgement of offset 0;
        // the later read skips offset 2, which was never acknowledged nor
        // read. Neither has evidence against it.
        let mut b = Builder::default();
        let x = [v(1, 0), v(1, 1), v(2, 0), v(3, 0)];
        let t = b.tick();
        let append = b.history.invoke(t, 1, Op::Append { values: vec![x[0]] });
        let t = b.tick();
        let read = b.history.invoke(t, 5, Op::Read { from: 0 });
        let t = b.tick();
        b.history
            .complete(t, append, Outcome::Appended { base_offset: 0 });
        let t = b.tick();
        b.history.complete(
            t,
            read,
            Outcome::Read {
                records: vec![(1, x[1])],
                high_watermark: 2,
            },
        );
        b.append_unknown(1, &[x[1]]);
        b.append_unknown(2, &[x[2]]);
        b.append_ok(3, &[x[3]], 3);
        b.read_ok(6, 0, &[(0, x[0]), (1, x[1]), (3, x[3])]);
        // Both reads have holes, which offset-gap judges by shape alone.
        let report = check(&b.history, &final_log(0, &x), &gaps_allowed());
        assert!(report.is_valid(), "{}", report.summary());
        let report = check_plain(&b, &final_log(0, &x));
        assert_kinds(&report, &[AnomalyKind::OffsetGap]);
        assert_eq!(report.count(AnomalyKind::OffsetGap), 2);
    }

    #[test]
    fn a_skip_is_reported_once_per_read() {
        let mut b = Builder::default();
        let x: Vec<Value> = (0..5).map(|seq| v(1, seq)).collect();
        b.append_ok(1, &x, 0);
        b.read_ok(2, 0, &[(1, x[1]), (3, x[3])]);
        let report = check(&b.history, &final_log(0, &x), &gaps_allowed());
        assert_kinds(&report, &[AnomalyKind::PollSkip]);
        // With dense offsets required, the hole itself is an offset-gap too.
        assert_kinds(
            &check_plain(&b, &final_log(0, &x)),
            &[AnomalyKind::PollSkip, AnomalyKind::OffsetGap],
        );
        assert_eq!(report.count(AnomalyKind::PollSkip), 1);
    }

    #[test]
    fn details_are_capped_but_all_anomalies_counted() {
        let mut b = Builder::default();
        let lost = ANOMALY_DETAILS_MAX + 7;
        for seq in 0..lost {
            let seq = u32::try_from(seq).unwrap_or(u32::MAX);
            b.append_ok(1, &[v(1, seq)], Offset::from(seq));
        }
        let report = check_plain(&b, &FinalLog::default());
        assert_eq!(report.count(AnomalyKind::LostWrite), lost);
        assert_eq!(report.anomalies.len(), ANOMALY_DETAILS_MAX);
        let summary = report.summary();
        assert!(summary.starts_with("INVALID\n"));
        assert!(summary.contains(&format!("lost-write: {lost}\n")));
        assert!(summary.contains(&format!("... and {} more", lost - SUMMARY_DETAILS_MAX)));
        assert!(summary.contains("duplicate: 0\n"));
    }

    #[test]
    fn hostile_offsets_do_not_panic() {
        let mut b = Builder::default();
        b.append_ok(1, &[v(1, 0), v(1, 1)], Offset::MAX);
        b.read_ok(2, Offset::MIN, &[(Offset::MIN, v(1, 0))]);
        b.read_ok(
            3,
            Offset::MIN,
            &[(Offset::MAX - 1, v(1, 0)), (Offset::MAX, v(1, 1))],
        );
        b.read_ok(
            3,
            Offset::MAX,
            &[(Offset::MAX, v(1, 1)), (Offset::MIN, v(1, 0))],
        );
        b.read_ok(
            4,
            Offset::MIN,
            &[(Offset::MIN, v(1, 0)), (Offset::MAX, v(1, 1))],
        );
        let log = FinalLog {
            log_start_offset: Offset::MAX,
            records: vec![(Offset::MAX, v(1, 0))],
            ..FinalLog::default()
        };
        let report = check_plain(&b, &log);
        assert!(!report.is_valid());
    }

    #[test]
    fn final_log_from_model_matches() {
        let mut model = LogModel::new();
        let mut b = Builder::default();
        let base = model.append(&[v(1, 0), v(1, 1)]);
        b.append_ok(1, &[v(1, 0), v(1, 1)], base);
        let log = FinalLog::from(&model);
        assert_eq!(log.log_end_offset(), 2);
        assert!(check_plain(&b, &log).is_valid());
    }

    /// Records 0..n from process 1, acknowledged one batch, and the final log
    /// holding them.
    fn n_acked(n: u32) -> (Builder, Vec<Value>, FinalLog) {
        let mut b = Builder::default();
        let values: Vec<Value> = (0..n).map(|seq| v(1, seq)).collect();
        b.append_ok(1, &values, 0);
        let log = final_log(0, &values);
        (b, values, log)
    }

    #[test]
    fn reads_below_their_watermark_and_empty_reads_are_valid() {
        let (mut b, x, log) = n_acked(3);
        b.read_with_hw(2, 0, &[(0, x[0]), (1, x[1])], 3);
        b.read_with_hw(2, 3, &[], 3);
        b.read_with_hw(3, 1, &[(1, x[1]), (2, x[2])], 3);
        let report = check_plain(&b, &log);
        assert!(report.is_valid(), "{}", report.summary());
    }

    #[test]
    fn a_record_at_the_watermark_is_serving_above_it() {
        let (mut b, x, log) = n_acked(3);
        let read = b.read_with_hw(2, 1, &[(1, x[1]), (2, x[2])], 2);
        // A later read's higher watermark keeps the watermark rule quiet.
        b.read_with_hw(2, 0, &[], 3);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::ServingAboveWatermark]);
        assert_eq!(report.count(AnomalyKind::ServingAboveWatermark), 1);
        let detail = details(&report, AnomalyKind::ServingAboveWatermark)[0];
        assert!(detail.contains(&format!("read op #{read}")), "{detail}");
        assert!(detail.contains("at offset 2"), "{detail}");
        assert!(detail.contains("high watermark 2"), "{detail}");
    }

    #[test]
    fn holes_in_a_read_are_offset_gaps_one_per_hole() {
        let (mut b, x, log) = n_acked(6);
        let read = b.read_with_hw(2, 0, &[(1, x[1]), (2, x[2]), (5, x[5])], 6);
        let report = check(&b.history, &log, &gaps_allowed());
        // Poll-skip sees the skipped acknowledged records even with gaps allowed.
        assert_kinds(&report, &[AnomalyKind::PollSkip]);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::PollSkip, AnomalyKind::OffsetGap]);
        assert_eq!(report.count(AnomalyKind::OffsetGap), 2);
        let gaps = details(&report, AnomalyKind::OffsetGap);
        assert!(gaps[0].contains(&format!(
            "read op #{read} from offset 0 started at offset 1"
        )));
        assert!(
            gaps[0].contains("offsets [0, 1) are missing"),
            "{}",
            gaps[0]
        );
        assert!(
            gaps[1].contains("offsets [3, 5) are missing"),
            "{}",
            gaps[1]
        );
    }

    #[test]
    fn a_hole_over_records_never_committed_is_still_an_offset_gap() {
        // Nothing was committed at offset 1, so poll-skip has no evidence;
        // on a topic with dense offsets the shape alone is wrong.
        let mut b = Builder::default();
        let x = [v(1, 0), v(2, 0), v(3, 0)];
        b.append_unknown(1, &[x[0]]);
        b.append_unknown(2, &[x[1]]);
        b.append_unknown(3, &[x[2]]);
        b.read_with_hw(4, 0, &[(0, x[0]), (2, x[2])], 3);
        let log = final_log(0, &x);
        assert_kinds(&check_plain(&b, &log), &[AnomalyKind::OffsetGap]);
        assert!(check(&b.history, &log, &gaps_allowed()).is_valid());
    }

    #[test]
    fn a_read_going_backwards_is_not_also_an_offset_gap() {
        let (mut b, x, log) = n_acked(3);
        b.read_with_hw(2, 0, &[(2, x[2]), (0, x[0])], 3);
        let report = check_plain(&b, &log);
        assert!(report.has(AnomalyKind::NonmonotonicPoll));
        assert!(!report.has(AnomalyKind::OffsetGap), "{}", report.summary());
    }

    #[test]
    fn holes_in_the_final_log_are_offset_gaps() {
        let (b, x, _) = n_acked(1);
        let mut b = b;
        let y: Vec<Value> = (0..4).map(|seq| v(2, seq)).collect();
        for value in &y {
            b.append_unknown(2, &[*value]);
        }
        // A hole at the start: the log claims to start at 0, its first record is at 1.
        let at_start = FinalLog {
            log_start_offset: 0,
            records: vec![(1, y[0]), (2, y[1])],
            ..FinalLog::default()
        };
        let report = check_plain(&b, &at_start);
        assert!(report.has(AnomalyKind::OffsetGap));
        assert_eq!(report.count(AnomalyKind::OffsetGap), 1);
        let detail = details(&report, AnomalyKind::OffsetGap)[0];
        assert!(detail.contains("offsets [0, 1) are missing"), "{detail}");
        assert!(detail.contains("final log"), "{detail}");

        // A hole in the middle.
        let in_middle = FinalLog {
            log_start_offset: 0,
            records: vec![(0, x[0]), (1, y[0]), (4, y[1]), (5, y[2]), (7, y[3])],
            ..FinalLog::default()
        };
        let report = check_plain(&b, &in_middle);
        assert_kinds(&report, &[AnomalyKind::OffsetGap]);
        let gaps = details(&report, AnomalyKind::OffsetGap);
        assert_eq!(gaps.len(), 2);
        assert!(
            gaps[0].contains("offsets [2, 4) are missing"),
            "{}",
            gaps[0]
        );
        assert!(
            gaps[1].contains("offsets [6, 7) are missing"),
            "{}",
            gaps[1]
        );

        // A compacted or transactional topic may have both.
        assert!(check(&b.history, &in_middle, &gaps_allowed()).is_valid());
        assert!(!check(&b.history, &at_start, &gaps_allowed()).has(AnomalyKind::OffsetGap));
    }

    #[test]
    fn final_log_holes_past_detected_synced_corruption_are_not_offset_gaps() {
        let mut b = Builder::default();
        let x: Vec<Value> = (0..3).map(|seq| v(1, seq)).collect();
        b.append_unknown(1, &x);
        let mut log = FinalLog {
            log_start_offset: 0,
            records: vec![(0, x[0]), (2, x[2])],
            corruption_detected_at: Some(1),
            ..FinalLog::default()
        };
        assert!(!check(&b.history, &log, &synced_corruption()).has(AnomalyKind::OffsetGap));
        log.corruption_detected_at = None;
        assert!(check(&b.history, &log, &synced_corruption()).has(AnomalyKind::OffsetGap));
    }

    #[test]
    fn a_watermark_falling_between_sequential_reads_is_reported() {
        let (mut b, x, log) = n_acked(3);
        let first = b.read_with_hw(2, 0, &[(0, x[0])], 3);
        let second = b.read_with_hw(3, 0, &[(0, x[0])], 2);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::Watermark]);
        assert_eq!(report.count(AnomalyKind::Watermark), 1);
        let detail = details(&report, AnomalyKind::Watermark)[0];
        assert!(detail.contains(&format!("read op #{second} reported high watermark 2")));
        assert!(detail.contains(&format!("high watermark 3 that read op #{first}")));
    }

    #[test]
    fn a_new_leader_epoch_may_start_with_a_lower_watermark_but_not_fall_within_one() {
        let (mut b, x, log) = n_acked(3);
        b.read_with_hw(2, 0, &[(0, x[0])], 3);
        // A new leader whose high watermark has not caught up yet (KIP-207).
        b.node(NodeEvent::LeaderEpoch { epoch: 1 });
        b.read_with_hw(3, 0, &[(0, x[0])], 2);
        assert!(check_plain(&b, &log).is_valid(), "across leader epochs");
        // Within the new epoch it must not fall again.
        b.read_with_hw(3, 0, &[(0, x[0])], 3);
        let lower = b.read_with_hw(3, 0, &[(0, x[0])], 2);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::Watermark]);
        let detail = details(&report, AnomalyKind::Watermark)[0];
        assert!(detail.contains(&format!("read op #{lower} reported high watermark 2")));
    }

    #[test]
    fn overlapping_reads_may_report_watermarks_in_either_order() {
        let (mut b, x, log) = n_acked(3);
        // Read a is invoked, then read b; b completes with the higher
        // watermark before a completes with the lower: either may have been
        // served first.
        let t = b.tick();
        let a = b.history.invoke(t, 2, Op::Read { from: 0 });
        let t = b.tick();
        let c = b.history.invoke(t, 3, Op::Read { from: 0 });
        let t = b.tick();
        b.history.complete(
            t,
            c,
            Outcome::Read {
                records: vec![(0, x[0])],
                high_watermark: 3,
            },
        );
        let t = b.tick();
        b.history.complete(
            t,
            a,
            Outcome::Read {
                records: vec![(0, x[0])],
                high_watermark: 1,
            },
        );
        let report = check_plain(&b, &log);
        assert!(report.is_valid(), "{}", report.summary());
        // Equal timestamps are not ordered either: the second read is
        // invoked at the very nanosecond the first completes.
        let (mut b, _, log) = n_acked(3);
        let t = b.tick();
        let a = b.history.invoke(t, 2, Op::Read { from: 0 });
        let t = b.tick();
        b.history.complete(
            t,
            a,
            Outcome::Read {
                records: vec![],
                high_watermark: 3,
            },
        );
        let c = b.history.invoke(t, 3, Op::Read { from: 0 });
        let t = b.tick();
        b.history.complete(
            t,
            c,
            Outcome::Read {
                records: vec![],
                high_watermark: 2,
            },
        );
        let report = check_plain(&b, &log);
        assert!(report.is_valid(), "{}", report.summary());
    }

    #[test]
    fn a_watermark_falling_across_a_restart_is_reported_unless_it_may_regress() {
        let (mut b, x, log) = n_acked(3);
        b.read_with_hw(2, 0, &[(0, x[0])], 3);
        b.opened(0, 2);
        b.read_with_hw(2, 0, &[(0, x[0])], 2);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::Watermark]);
        let regress = CheckOptions {
            watermark_may_regress: true,
            ..CheckOptions::default()
        };
        let report = check(&b.history, &log, &regress);
        assert!(report.is_valid(), "{}", report.summary());
        // Within one open it still may not move back.
        b.read_with_hw(2, 0, &[(0, x[0])], 1);
        let report = check(&b.history, &log, &regress);
        assert_kinds(&report, &[AnomalyKind::Watermark]);
        let detail = details(&report, AnomalyKind::Watermark)[0];
        assert!(detail.contains("within one open"), "{detail}");
        assert!(detail.contains("high watermark 1, below the high watermark 2"));
    }

    #[test]
    fn an_open_below_an_earlier_watermark_is_reported_even_without_a_later_read() {
        let (mut b, x, log) = n_acked(3);
        b.read_with_hw(2, 0, &[(0, x[0])], 3);
        b.opened(0, 3);
        let report = check_plain(&b, &log);
        assert!(report.is_valid(), "{}", report.summary());
        b.opened(0, 2);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::Watermark]);
        let detail = details(&report, AnomalyKind::Watermark)[0];
        assert!(detail.contains("ends at offset 2"), "{detail}");
        let regress = CheckOptions {
            watermark_may_regress: true,
            ..CheckOptions::default()
        };
        assert!(check(&b.history, &log, &regress).is_valid());
    }

    #[test]
    fn a_read_spanning_a_restart_is_not_compared_when_the_watermark_may_regress() {
        let (mut b, x, log) = n_acked(3);
        b.read_with_hw(2, 0, &[(0, x[0])], 3);
        let t = b.tick();
        let spanning = b.history.invoke(t, 2, Op::Read { from: 0 });
        b.opened(0, 1);
        let t = b.tick();
        b.history.complete(
            t,
            spanning,
            Outcome::Read {
                records: vec![(0, x[0])],
                high_watermark: 1,
            },
        );
        let regress = CheckOptions {
            watermark_may_regress: true,
            ..CheckOptions::default()
        };
        assert!(check(&b.history, &log, &regress).is_valid());
        assert!(check_plain(&b, &log).has(AnomalyKind::Watermark));
    }

    #[test]
    fn a_final_log_ending_below_the_watermark_is_reported() {
        let mut b = Builder::default();
        let x: Vec<Value> = (0..3).map(|seq| v(1, seq)).collect();
        b.append_unknown(1, &x);
        // Nothing read or acknowledged is lost: only the watermark shows
        // that offset 2 was committed.
        let read = b.read_with_hw(2, 0, &[(0, x[0])], 3);
        let log = final_log(0, &x[..2]);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::Watermark]);
        let detail = details(&report, AnomalyKind::Watermark)[0];
        assert!(detail.contains(&format!("read op #{read} reported high watermark 3")));
        assert!(detail.contains("offsets [2, 3)"), "{detail}");

        // Detected corruption of synced data at or below the end excuses it.
        let mut corrupted = log.clone();
        corrupted.corruption_detected_at = Some(2);
        assert!(check(&b.history, &corrupted, &synced_corruption()).is_valid());
        // Detected above the end, it does not.
        corrupted.corruption_detected_at = Some(3);
        assert!(check(&b.history, &corrupted, &synced_corruption()).has(AnomalyKind::Watermark));
        // Without the injection the detection excuses nothing.
        corrupted.corruption_detected_at = Some(2);
        assert!(check_plain(&b, &corrupted).has(AnomalyKind::Watermark));
        // Page-cache mode with power loss may lose it.
        let regress = CheckOptions {
            watermark_may_regress: true,
            ..CheckOptions::default()
        };
        assert!(check(&b.history, &log, &regress).is_valid());
    }

    #[test]
    fn serving_after_an_image_took_the_leadership_away_is_reported() {
        let mut b = Builder::default();
        let x: Vec<Value> = (0..4).map(|seq| v(1, seq)).collect();
        b.node(NodeEvent::ImageApplied {
            offset: 3,
            leads: true,
        });
        b.append_ok(1, &x[0..1], 0);
        b.node(NodeEvent::ImageApplied {
            offset: 9,
            leads: false,
        });
        // Refused while fenced: as it should be.
        b.append_failed(1, &x[1..2]);
        // Served while fenced: the anomaly.
        b.append_ok(1, &x[2..3], 1);
        b.read_ok(2, 0, &[(0, x[0]), (1, x[2])]);
        b.node(NodeEvent::ImageApplied {
            offset: 12,
            leads: true,
        });
        b.append_ok(1, &x[3..4], 2);
        let log = final_log(0, &[x[0], x[2], x[3]]);
        let report = check_plain(&b, &log);
        assert_eq!(
            report.count(AnomalyKind::ServedWhileNotLeader),
            2,
            "{}",
            report.summary()
        );
        let found = details(&report, AnomalyKind::ServedWhileNotLeader);
        assert!(found[0].contains("appended at 1"), "{}", found[0]);
        assert!(
            found[0].contains("metadata image at offset 9"),
            "{}",
            found[0]
        );
        assert!(found[1].contains("read 2 records"), "{}", found[1]);
    }

    #[test]
    fn an_answer_to_a_request_invoked_while_leading_may_come_after_the_image() {
        let mut b = Builder::default();
        let x: Vec<Value> = (0..2).map(|seq| v(1, seq)).collect();
        let t = b.tick();
        let op = b.history.invoke(t, 1, Op::Append { values: vec![x[0]] });
        b.node(NodeEvent::ImageApplied {
            offset: 9,
            leads: false,
        });
        let t = b.tick();
        b.history
            .complete(t, op, Outcome::Appended { base_offset: 0 });
        // Invoked while not leading, but the leadership came back before the answer.
        let t = b.tick();
        let op = b.history.invoke(t, 1, Op::Append { values: vec![x[1]] });
        b.node(NodeEvent::ImageApplied {
            offset: 10,
            leads: true,
        });
        let t = b.tick();
        b.history
            .complete(t, op, Outcome::Appended { base_offset: 1 });
        let log = final_log(0, &x);
        let report = check_plain(&b, &log);
        assert!(report.is_valid(), "{}", report.summary());
    }

    #[test]
    fn a_corrupt_read_below_the_recovery_point_is_acceptable() {
        let (mut b, _, log) = n_acked(4);
        b.opened(2, 4);
        b.read_corrupt(2, 0, 1);
        let report = check_plain(&b, &log);
        assert!(report.is_valid(), "{}", report.summary());
        assert_eq!(report.ops_failed, 1);
        assert_eq!(report.ops_ok, 1);
    }

    #[test]
    fn a_corrupt_read_at_or_above_the_recovery_point_is_reported() {
        let (mut b, _, log) = n_acked(4);
        b.opened(2, 4);
        let at = b.read_corrupt(2, 0, 2);
        let above = b.read_corrupt(2, 3, 3);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::CorruptRead]);
        assert_eq!(report.count(AnomalyKind::CorruptRead), 2);
        let reads = details(&report, AnomalyKind::CorruptRead);
        assert!(reads[0].contains(&format!(
            "read op #{at} was served a corrupt batch at offset 2"
        )));
        assert!(reads[0].contains("recovery point 2 of the open at event #2"));
        assert!(reads[1].contains(&format!("read op #{above}")));
    }

    #[test]
    fn without_a_recorded_open_every_corrupt_read_is_reported() {
        let (mut b, _, log) = n_acked(2);
        b.read_corrupt(2, 0, 0);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::CorruptRead]);
        assert!(details(&report, AnomalyKind::CorruptRead)[0].contains("no recorded open"));
    }

    #[test]
    fn a_corrupt_read_at_or_beyond_reported_corruption_is_reported() {
        let (mut b, _, log) = n_acked(6);
        b.opened(5, 6);
        b.node(NodeEvent::CorruptionFound { offset: 3 });
        b.node(NodeEvent::CorruptionFound { offset: 2 });
        // Below the lowest reported corruption: the scrubber's business.
        b.read_corrupt(2, 0, 1);
        let at = b.read_corrupt(2, 2, 2);
        let beyond = b.read_corrupt(2, 3, 4);
        let report = check_plain(&b, &log);
        assert_kinds(&report, &[AnomalyKind::CorruptRead]);
        let reads = details(&report, AnomalyKind::CorruptRead);
        assert_eq!(reads.len(), 2);
        assert!(reads[0].contains(&format!("read op #{at}")), "{}", reads[0]);
        assert!(reads[0].contains("reported corruption at offset 2 (event #4)"));
        assert!(
            reads[1].contains(&format!("read op #{beyond}")),
            "{}",
            reads[1]
        );
    }

    #[test]
    fn reported_corruption_counts_only_until_the_next_open_and_after_invocation() {
        let (mut b, _, log) = n_acked(6);
        b.opened(5, 6);
        // Reported while the read was in flight: the read may have been
        // served before the report.
        let t = b.tick();
        let read = b.history.invoke(t, 2, Op::Read { from: 0 });
        b.node(NodeEvent::CorruptionFound { offset: 1 });
        let t = b.tick();
        b.history.complete(
            t,
            read,
            Outcome::CorruptRead {
                offset: 2,
                reason: "crc".into(),
            },
        );
        // Forgotten by the next open, as the broker forgets it.
        b.opened(5, 6);
        b.read_corrupt(2, 0, 2);
        let report = check_plain(&b, &log);
        assert!(report.is_valid(), "{}", report.summary());
    }

    #[test]
    fn a_corrupt_batch_served_in_the_final_log_is_judged_by_the_offline_open() {
        let (b, _, log) = n_acked(4);
        let mut served = log.clone();
        served.recovery_point = 2;
        served.corrupt_served_at = Some(1);
        assert!(check_plain(&b, &served).is_valid());
        served.corrupt_served_at = Some(2);
        let report = check_plain(&b, &served);
        assert_kinds(&report, &[AnomalyKind::CorruptRead]);
        let detail = details(&report, AnomalyKind::CorruptRead)[0];
        assert!(detail.contains("offset 2"), "{detail}");
        assert!(detail.contains("recovery point 2"), "{detail}");
        // Recovery reporting corruption at or below it is the broker knowing.
        served.corruption_reported_at = Some(2);
        assert!(check_plain(&b, &served).is_valid());
        served.corruption_reported_at = Some(3);
        assert!(check_plain(&b, &served).has(AnomalyKind::CorruptRead));
    }
}
