//! Reference models: what a correct broker's state is after a sequence of
//! operations.
//!
//! [`LogModel`] is one partition log after appends and truncations.
//! Invariants: offsets are dense (the record at offset `o` is the
//! `o - log_start_offset`-th element), records keep the order in which they
//! were appended, and `log_start_offset <= log_end_offset` at all times. There
//! is no retention yet, so the log start offset stays where the model began.
//!
//! [`GroupModel`] is one classic consumer group at its coordinator: the
//! current generation, its members and their assignment, and the committed
//! offsets. Invariants: generations only increase, one generation's
//! assignment gives each partition to at most one member, an offset commit
//! is accepted only from a member of the current generation (or, with
//! generation -1 and no member id, while the group has no members), as
//! Kafka's coordinator fences zombies, and offsets are deleted only while
//! the group has no members.
//!
//! The models are deliberately the simplest things that could be right; the
//! property tests and the simulation compare the real system against them.

use std::collections::BTreeMap;
use std::error::Error;
use std::fmt;

use crate::history::{Generation, MemberId, Offset, TopicPartition, Value};

/// Why the model refused an operation; mirrors Kafka's OFFSET_OUT_OF_RANGE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelError {
    /// `offset` lies outside `[log_start_offset, log_end_offset]`.
    OffsetOutOfRange {
        offset: Offset,
        log_start_offset: Offset,
        log_end_offset: Offset,
    },
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::OffsetOutOfRange {
                offset,
                log_start_offset,
                log_end_offset,
            } => write!(
                f,
                "offset {offset} is out of range: the log holds [{log_start_offset}, {log_end_offset})"
            ),
        }
    }
}

impl Error for ModelError {}

/// A partition log with dense offsets and ordered records.
#[derive(Clone, Debug, Default)]
pub struct LogModel {
    log_start_offset: Offset,
    /// `values[i]` is the record at offset `log_start_offset + i`.
    values: Vec<Value>,
}

impl LogModel {
    /// An empty log whose start offset is 0.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn log_start_offset(&self) -> Offset {
        self.log_start_offset
    }

    /// The offset the next appended record will receive.
    pub fn log_end_offset(&self) -> Offset {
        self.offset_of(self.values.len())
    }

    /// The number of records in the log.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Appends values, returns the base offset (the previous log end offset).
    /// Panics on an empty slice: a batch holds at least one record, and an
    /// empty append would have no base offset to report.
    pub fn append(&mut self, values: &[Value]) -> Offset {
        assert!(!values.is_empty(), "appended an empty batch");
        let base_offset = self.log_end_offset();
        self.values.extend_from_slice(values);
        base_offset
    }

    /// Records from `from` (inclusive) up to at most `max_records`;
    /// `Err(ModelError::OffsetOutOfRange{..})` if from < start or from > end.
    /// `from == end` returns an empty vector, as a fetch at the log end does.
    pub fn read(
        &self,
        from: Offset,
        max_records: usize,
    ) -> Result<Vec<(Offset, Value)>, ModelError> {
        let first = self.index_of(from)?;
        Ok(self.values[first..]
            .iter()
            .take(max_records)
            .enumerate()
            .map(|(i, &value)| (self.offset_of(first + i), value))
            .collect())
    }

    /// Removes every record at offset >= `to`; `to` must be in [start, end]
    /// else Err, leaving the log unchanged.
    pub fn truncate_to(&mut self, to: Offset) -> Result<(), ModelError> {
        let keep = self.index_of(to)?;
        self.values.truncate(keep);
        Ok(())
    }

    /// The record at `offset`, if the log holds one there.
    pub fn get(&self, offset: Offset) -> Option<Value> {
        let index = usize::try_from(offset.checked_sub(self.log_start_offset)?).ok()?;
        self.values.get(index).copied()
    }

    /// Every record from start to end, in offset order.
    pub fn records(&self) -> impl Iterator<Item = (Offset, Value)> + '_ {
        self.values
            .iter()
            .enumerate()
            .map(|(i, &value)| (self.offset_of(i), value))
    }

    /// The index into `values` of `offset`, which must lie in [start, end];
    /// the end itself is valid because it is where reads and truncations may
    /// legitimately point.
    fn index_of(&self, offset: Offset) -> Result<usize, ModelError> {
        let out_of_range = || ModelError::OffsetOutOfRange {
            offset,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset(),
        };
        let index = offset
            .checked_sub(self.log_start_offset)
            .and_then(|delta| usize::try_from(delta).ok())
            .ok_or_else(out_of_range)?;
        if index > self.values.len() {
            return Err(out_of_range());
        }
        Ok(index)
    }

    fn offset_of(&self, index: usize) -> Offset {
        // A log never holds anywhere near i64::MAX records, so the conversion
        // cannot fail in practice; saturating keeps it total all the same.
        let index = Offset::try_from(index).unwrap_or(Offset::MAX);
        self.log_start_offset.saturating_add(index)
    }
}

/// Why the group model refused an offset commit, as Kafka's coordinator
/// answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupError {
    /// UNKNOWN_MEMBER_ID: the member id is not in the current generation.
    UnknownMemberId,
    /// ILLEGAL_GENERATION: the member is, but the generation is not current.
    IllegalGeneration,
    /// GROUP_SUBSCRIBED_TO_TOPIC: an offset delete while the group has
    /// members (all of which consume every partition here).
    GroupSubscribedToTopic,
}

impl fmt::Display for GroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GroupError::UnknownMemberId => "UNKNOWN_MEMBER_ID",
            GroupError::IllegalGeneration => "ILLEGAL_GENERATION",
            GroupError::GroupSubscribedToTopic => "GROUP_SUBSCRIBED_TO_TOPIC",
        })
    }
}

impl Error for GroupError {}

/// One classic consumer group at its coordinator.
#[derive(Clone, Debug)]
pub struct GroupModel {
    /// The partitions the group consumes, in assignment order.
    partitions: Vec<TopicPartition>,
    /// 0 before the first generation, as Kafka's empty group.
    generation: Generation,
    /// The members of the current generation and what each owns.
    members: BTreeMap<MemberId, Vec<TopicPartition>>,
    committed: BTreeMap<TopicPartition, Offset>,
}

impl GroupModel {
    /// A group with no generation yet, consuming `partitions`.
    pub fn new(partitions: Vec<TopicPartition>) -> GroupModel {
        GroupModel {
            partitions,
            generation: 0,
            members: BTreeMap::new(),
            committed: BTreeMap::new(),
        }
    }

    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// Forms the next generation with `members` (all of them: whoever is not
    /// named is out) and assigns the partitions round-robin over them in id
    /// order; returns the new generation. With no members the group is empty.
    pub fn rebalance(&mut self, members: &[MemberId]) -> Generation {
        self.generation += 1;
        let mut ids: Vec<&MemberId> = members.iter().collect();
        ids.sort();
        ids.dedup();
        self.members = ids.iter().map(|&id| (id.clone(), Vec::new())).collect();
        for (i, tp) in self.partitions.iter().enumerate() {
            if let Some(owned) = ids
                .get(i % ids.len().max(1))
                .and_then(|&id| self.members.get_mut(id))
            {
                owned.push(tp.clone());
            }
        }
        self.generation
    }

    /// What `member_id` owns in the current generation, if it is a member.
    pub fn assignment(&self, member_id: &str) -> Option<&[TopicPartition]> {
        self.members.get(member_id).map(Vec::as_slice)
    }

    /// An OffsetCommit: all of `offsets` or nothing, checked as Kafka's
    /// coordinator checks it.
    pub fn commit(
        &mut self,
        member_id: &str,
        generation: Generation,
        offsets: &[(TopicPartition, Offset)],
    ) -> Result<(), GroupError> {
        let simple = generation < 0 && member_id.is_empty() && self.members.is_empty();
        if !simple {
            if !self.members.contains_key(member_id) {
                return Err(GroupError::UnknownMemberId);
            }
            if generation != self.generation {
                return Err(GroupError::IllegalGeneration);
            }
        }
        for (tp, offset) in offsets {
            self.committed.insert(tp.clone(), *offset);
        }
        Ok(())
    }

    /// An OffsetDelete: refused while the group has members, which consume
    /// every partition of the model.
    pub fn delete(&mut self, partitions: &[TopicPartition]) -> Result<(), GroupError> {
        if !self.members.is_empty() {
            return Err(GroupError::GroupSubscribedToTopic);
        }
        for tp in partitions {
            self.committed.remove(tp);
        }
        Ok(())
    }

    /// The committed offset of `tp`, None if there is none (Kafka's -1).
    pub fn fetch(&self, tp: &TopicPartition) -> Option<Offset> {
        self.committed.get(tp).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(seq: u32) -> Value {
        Value::new(1, seq)
    }

    #[test]
    fn new_log_is_empty_at_zero() {
        let log = LogModel::new();
        assert_eq!(log.log_start_offset(), 0);
        assert_eq!(log.log_end_offset(), 0);
        assert!(log.is_empty());
        assert_eq!(log.read(0, 10), Ok(vec![]));
        assert_eq!(log.get(0), None);
    }

    #[test]
    fn append_assigns_dense_offsets() {
        let mut log = LogModel::new();
        assert_eq!(log.append(&[v(0), v(1)]), 0);
        assert_eq!(log.append(&[v(2)]), 2);
        assert_eq!(log.log_end_offset(), 3);
        assert_eq!(log.len(), 3);
        assert_eq!(log.get(2), Some(v(2)));
        assert_eq!(log.get(3), None);
        assert_eq!(log.get(-1), None);
        assert_eq!(
            log.records().collect::<Vec<_>>(),
            vec![(0, v(0)), (1, v(1)), (2, v(2))]
        );
    }

    #[test]
    #[should_panic(expected = "empty batch")]
    fn empty_append_panics() {
        LogModel::new().append(&[]);
    }

    #[test]
    fn read_respects_bounds_and_limit() {
        let mut log = LogModel::new();
        log.append(&[v(0), v(1), v(2), v(3)]);
        assert_eq!(log.read(1, 2), Ok(vec![(1, v(1)), (2, v(2))]));
        assert_eq!(log.read(3, 100), Ok(vec![(3, v(3))]));
        assert_eq!(log.read(4, 100), Ok(vec![]));
        assert_eq!(log.read(0, 0), Ok(vec![]));
    }

    #[test]
    fn read_out_of_range_is_an_error() {
        let mut log = LogModel::new();
        log.append(&[v(0), v(1)]);
        let expected = |offset| ModelError::OffsetOutOfRange {
            offset,
            log_start_offset: 0,
            log_end_offset: 2,
        };
        assert_eq!(log.read(3, 1), Err(expected(3)));
        assert_eq!(log.read(-1, 1), Err(expected(-1)));
        assert_eq!(log.read(Offset::MIN, 1), Err(expected(Offset::MIN)));
        assert_eq!(log.read(Offset::MAX, 1), Err(expected(Offset::MAX)));
        assert_eq!(
            expected(3).to_string(),
            "offset 3 is out of range: the log holds [0, 2)"
        );
    }

    #[test]
    fn truncate_removes_the_suffix() {
        let mut log = LogModel::new();
        log.append(&[v(0), v(1), v(2)]);
        assert_eq!(log.truncate_to(3), Ok(()));
        assert_eq!(log.log_end_offset(), 3);
        assert_eq!(log.truncate_to(1), Ok(()));
        assert_eq!(log.log_end_offset(), 1);
        assert_eq!(log.get(1), None);
        // Offsets are reused after truncation, as after Kafka's leader epoch truncation.
        assert_eq!(log.append(&[v(9)]), 1);
        assert_eq!(log.get(1), Some(v(9)));
        assert_eq!(log.truncate_to(0), Ok(()));
        assert!(log.is_empty());
    }

    #[test]
    fn truncate_out_of_range_is_an_error_and_changes_nothing() {
        let mut log = LogModel::new();
        log.append(&[v(0), v(1)]);
        assert!(matches!(
            log.truncate_to(3),
            Err(ModelError::OffsetOutOfRange { offset: 3, .. })
        ));
        assert!(matches!(
            log.truncate_to(-1),
            Err(ModelError::OffsetOutOfRange { offset: -1, .. })
        ));
        assert_eq!(log.log_end_offset(), 2);
    }

    fn tps(n: i32) -> Vec<TopicPartition> {
        (0..n).map(|p| TopicPartition::new("t", p)).collect()
    }

    #[test]
    fn a_rebalance_assigns_each_partition_to_one_member() {
        let mut group = GroupModel::new(tps(3));
        assert_eq!(group.generation(), 0);
        assert_eq!(group.rebalance(&["b".into(), "a".into()]), 1);
        assert_eq!(
            group.assignment("a"),
            Some(&[TopicPartition::new("t", 0), TopicPartition::new("t", 2)][..])
        );
        assert_eq!(
            group.assignment("b"),
            Some(&[TopicPartition::new("t", 1)][..])
        );
        assert_eq!(group.assignment("c"), None);
        assert_eq!(group.rebalance(&[]), 2);
        assert_eq!(group.assignment("a"), None);
    }

    #[test]
    fn commits_are_fenced_by_member_and_generation() {
        let mut group = GroupModel::new(tps(1));
        let t0 = TopicPartition::new("t", 0);
        assert_eq!(group.fetch(&t0), None);
        // An empty group takes commits from outside any generation.
        assert_eq!(group.commit("", -1, &[(t0.clone(), 3)]), Ok(()));
        group.rebalance(&["a".into()]);
        assert_eq!(
            group.commit("", -1, &[(t0.clone(), 4)]),
            Err(GroupError::UnknownMemberId)
        );
        assert_eq!(group.commit("a", 1, &[(t0.clone(), 5)]), Ok(()));
        group.rebalance(&["a".into()]);
        assert_eq!(
            group.commit("a", 1, &[(t0.clone(), 6)]),
            Err(GroupError::IllegalGeneration)
        );
        assert_eq!(
            group.commit("z", 2, &[(t0.clone(), 6)]),
            Err(GroupError::UnknownMemberId)
        );
        assert_eq!(group.fetch(&t0), Some(5));
        assert_eq!(
            GroupError::IllegalGeneration.to_string(),
            "ILLEGAL_GENERATION"
        );
        assert_eq!(
            group.delete(std::slice::from_ref(&t0)),
            Err(GroupError::GroupSubscribedToTopic)
        );
        group.rebalance(&[]);
        assert_eq!(group.delete(std::slice::from_ref(&t0)), Ok(()));
        assert_eq!(group.fetch(&t0), None);
    }
}
