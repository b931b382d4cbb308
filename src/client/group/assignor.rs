//! Partition assignors of the consumer protocol, run by a group's leader after JoinGroup:
//! Kafka's `range`, `roundrobin` and `cooperative-sticky`, as pure functions of the members'
//! subscriptions and the topics' partition counts.
//!
//! Invariants (checked by [`check_assignment`] after every run, in release too):
//! - every partition is assigned to at most one member, and only to a member subscribed to
//!   its topic;
//! - `range` and `roundrobin` assign every partition of every subscribed topic;
//!   `cooperative-sticky` assigns every partition except those it withholds because they move
//!   from a member that still owns them (KIP-429: the owner revokes first, and the partition
//!   is assigned in the rebalance that follows).
//!
//! Members are ordered as Kafka orders them (`MemberInfo.compareTo`): static members first,
//! by `group.instance.id`, then dynamic ones by member id. Racks are not used.

use std::collections::{BTreeMap, BTreeSet};

/// Partitions by topic, each topic's partitions sorted.
pub type TopicPartitions = BTreeMap<String, Vec<i32>>;

/// What the leader knows of one member from its JoinGroup metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberSubscription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub topics: BTreeSet<String>,
    /// The partitions the member says it owns (subscription v1+), for sticky assignors.
    pub owned: TopicPartitions,
    /// The generation those partitions belong to (subscription v2+), or -1.
    pub generation_id: i32,
}

/// How members give partitions up in a rebalance (Kafka's `RebalanceProtocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RebalanceProtocol {
    /// Every member revokes everything before it rejoins.
    Eager,
    /// A member keeps what it still owns and revokes only what moves (KIP-429).
    Cooperative,
}

/// The assignors this client offers, under the names Kafka's clients use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Assignor {
    Range,
    RoundRobin,
    CooperativeSticky,
}

/// Member id -> its partitions.
pub type Assignment = BTreeMap<String, TopicPartitions>;

impl Assignor {
    pub const ALL: [Assignor; 3] = [
        Assignor::Range,
        Assignor::RoundRobin,
        Assignor::CooperativeSticky,
    ];

    /// The protocol name in JoinGroup (`partition.assignment.strategy`).
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Range => "range",
            Assignor::RoundRobin => "roundrobin",
            Assignor::CooperativeSticky => "cooperative-sticky",
        }
    }

    pub fn from_name(name: &str) -> Option<Assignor> {
        Assignor::ALL.into_iter().find(|a| a.name() == name)
    }

    pub fn rebalance_protocol(self) -> RebalanceProtocol {
        match self {
            Assignor::Range | Assignor::RoundRobin => RebalanceProtocol::Eager,
            Assignor::CooperativeSticky => RebalanceProtocol::Cooperative,
        }
    }

    /// Assigns the partitions of `partition_counts` (topic -> partition count; topics no
    /// member subscribes to are ignored, subscribed topics missing here get nothing) to
    /// `members`. Every member appears in the result, possibly with nothing.
    pub fn assign(
        self,
        partition_counts: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> Assignment {
        let mut sorted: Vec<&MemberSubscription> = members.iter().collect();
        sorted.sort_by(|a, b| member_order(a, b));
        let assignment = match self {
            Assignor::Range => range(partition_counts, &sorted),
            Assignor::RoundRobin => round_robin(partition_counts, &sorted),
            Assignor::CooperativeSticky => cooperative_sticky(partition_counts, &sorted),
        };
        check_assignment(self, partition_counts, members, &assignment);
        assignment
    }
}

/// Kafka's `MemberInfo.compareTo`.
fn member_order(a: &MemberSubscription, b: &MemberSubscription) -> std::cmp::Ordering {
    match (&a.group_instance_id, &b.group_instance_id) {
        (Some(x), Some(y)) => x.cmp(y).then_with(|| a.member_id.cmp(&b.member_id)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

fn empty_assignment(members: &[&MemberSubscription]) -> Assignment {
    members
        .iter()
        .map(|m| (m.member_id.clone(), TopicPartitions::new()))
        .collect()
}

fn give(assignment: &mut Assignment, member: &str, topic: &str, partition: i32) {
    let partitions = assignment
        .entry(member.to_string())
        .or_default()
        .entry(topic.to_string())
        .or_default();
    partitions.push(partition);
    partitions.sort_unstable();
}

/// Every (topic, partition) some member subscribes to, sorted.
fn subscribed_partitions(
    partition_counts: &BTreeMap<String, i32>,
    members: &[&MemberSubscription],
) -> Vec<(String, i32)> {
    let topics: BTreeSet<&String> = members.iter().flat_map(|m| m.topics.iter()).collect();
    let mut out = Vec::new();
    for topic in topics {
        let count = partition_counts.get(topic).copied().unwrap_or(0).max(0);
        out.extend((0..count).map(|p| (topic.clone(), p)));
    }
    out
}

/// Kafka's RangeAssignor: per topic, its subscribers in order take consecutive ranges, the
/// first `count % subscribers` of them one partition more.
fn range(partition_counts: &BTreeMap<String, i32>, members: &[&MemberSubscription]) -> Assignment {
    let mut assignment = empty_assignment(members);
    let topics: BTreeSet<&String> = members.iter().flat_map(|m| m.topics.iter()).collect();
    for topic in topics {
        let count = partition_counts.get(topic).copied().unwrap_or(0).max(0);
        let subscribers: Vec<&&MemberSubscription> = members
            .iter()
            .filter(|m| m.topics.contains(topic))
            .collect();
        let n = i32::try_from(subscribers.len()).unwrap_or(i32::MAX);
        if n == 0 {
            continue;
        }
        let (per, extra) = (count / n, count % n);
        for (i, member) in (0i32..).zip(subscribers) {
            let start = per * i + i.min(extra);
            let len = per + i32::from(i < extra);
            for partition in start..start + len {
                give(&mut assignment, &member.member_id, topic, partition);
            }
        }
    }
    assignment
}

/// Kafka's RoundRobinAssignor: every subscribed partition in (topic, partition) order goes
/// to the next member, in circular order, that subscribes to its topic.
fn round_robin(
    partition_counts: &BTreeMap<String, i32>,
    members: &[&MemberSubscription],
) -> Assignment {
    let mut assignment = empty_assignment(members);
    if members.is_empty() {
        return assignment;
    }
    let mut next = 0usize;
    for (topic, partition) in subscribed_partitions(partition_counts, members) {
        // Some member subscribes to the topic (the partition came from a subscription), so
        // at most one full turn finds it.
        for _ in 0..members.len() {
            let member = members[next % members.len()];
            next += 1;
            if member.topics.contains(&topic) {
                give(&mut assignment, &member.member_id, &topic, partition);
                break;
            }
        }
    }
    assignment
}

/// The previous owner of each partition that may keep it: the claimant of the highest
/// generation, when only one member claims it at that generation, the partition exists and
/// the claimant still subscribes to its topic. Claims of a generation older than the newest
/// any member reports are ignored (their owner missed a rebalance; Kafka drops them too).
fn valid_owners(
    partition_counts: &BTreeMap<String, i32>,
    members: &[&MemberSubscription],
) -> BTreeMap<(String, i32), String> {
    let newest = members.iter().map(|m| m.generation_id).max().unwrap_or(-1);
    let mut claims: BTreeMap<(String, i32), Vec<&str>> = BTreeMap::new();
    for member in members {
        if member.generation_id < newest {
            continue;
        }
        for (topic, partitions) in &member.owned {
            let count = partition_counts.get(topic).copied().unwrap_or(0);
            if !member.topics.contains(topic) {
                continue;
            }
            for &partition in partitions {
                if (0..count).contains(&partition) {
                    claims
                        .entry((topic.clone(), partition))
                        .or_default()
                        .push(&member.member_id);
                }
            }
        }
    }
    claims
        .into_iter()
        .filter_map(|(tp, claimants)| match claimants.as_slice() {
            [one] => Some((tp, one.to_string())),
            _ => None,
        })
        .collect()
}

/// Kafka's CooperativeStickyAssignor: a balanced assignment that keeps as many partitions
/// with their owners as balance allows, then withholds every partition that would move
/// from a member still owning it.
fn cooperative_sticky(
    partition_counts: &BTreeMap<String, i32>,
    members: &[&MemberSubscription],
) -> Assignment {
    let owners = valid_owners(partition_counts, members);
    let all = subscribed_partitions(partition_counts, members);
    let equal = members.windows(2).all(|w| w[0].topics == w[1].topics);
    let mut assignment = if equal {
        constrained_assign(&all, &owners, members)
    } else {
        general_assign(&all, &owners, members)
    };
    // KIP-429: a partition moving away from its owner is assigned to nobody this round.
    for (member, topics) in assignment.iter_mut() {
        for (topic, partitions) in topics.iter_mut() {
            partitions.retain(|&p| {
                owners
                    .get(&(topic.clone(), p))
                    .is_none_or(|owner| owner == member)
            });
        }
        topics.retain(|_, partitions| !partitions.is_empty());
    }
    assignment
}

/// Kafka's `constrainedAssign`, for members with equal subscriptions: each keeps up to its
/// quota of what it owns (`floor(n / c)`, one more for the first `n % c` that own enough),
/// then the rest fill the members below the lower quota, then up to the upper one.
fn constrained_assign(
    all: &[(String, i32)],
    owners: &BTreeMap<(String, i32), String>,
    members: &[&MemberSubscription],
) -> Assignment {
    let mut assignment = empty_assignment(members);
    if members.is_empty() {
        return assignment;
    }
    let (n, c) = (all.len(), members.len());
    let (min_quota, max_quota) = (n / c, n.div_ceil(c));
    let over_min_max = n % c;
    let mut over_min = 0usize;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut kept: BTreeSet<(String, i32)> = BTreeSet::new();
    for member in members {
        let owned: Vec<&(String, i32)> = all
            .iter()
            .filter(|tp| owners.get(*tp) == Some(&member.member_id))
            .collect();
        let mut quota = owned.len().min(min_quota);
        if owned.len() > min_quota && over_min < over_min_max {
            quota = max_quota;
            over_min += 1;
        }
        for (topic, partition) in owned.into_iter().take(quota) {
            give(&mut assignment, &member.member_id, topic, *partition);
            kept.insert((topic.clone(), *partition));
        }
        counts.insert(&member.member_id, quota);
    }
    let mut unassigned = all.iter().filter(|tp| !kept.contains(*tp));
    // Fill every member to the lower quota, then give the upper quota to as many as allowed.
    for member in members {
        while counts[member.member_id.as_str()] < min_quota {
            let Some((topic, partition)) = unassigned.next() else {
                break;
            };
            give(&mut assignment, &member.member_id, topic, *partition);
            *counts.entry(&member.member_id).or_default() += 1;
        }
    }
    for member in members {
        if over_min >= over_min_max {
            break;
        }
        if counts[member.member_id.as_str()] == min_quota {
            let Some((topic, partition)) = unassigned.next() else {
                break;
            };
            give(&mut assignment, &member.member_id, topic, *partition);
            *counts.entry(&member.member_id).or_default() += 1;
            over_min += 1;
        }
    }
    assert!(
        unassigned.next().is_none(),
        "the quotas leave no partition unassigned"
    );
    assignment
}

/// For members with different subscriptions: owners keep what they own, every other
/// partition goes to its least loaded subscriber, then partitions move from a subscriber
/// holding two or more than another subscriber of their topic, until none does. Simpler than
/// Kafka's `generalAssign` (it does not minimise movement as well), with the same guarantees
/// of validity.
fn general_assign(
    all: &[(String, i32)],
    owners: &BTreeMap<(String, i32), String>,
    members: &[&MemberSubscription],
) -> Assignment {
    let mut holder: BTreeMap<(String, i32), &str> = BTreeMap::new();
    let mut counts: BTreeMap<&str, usize> =
        members.iter().map(|m| (m.member_id.as_str(), 0)).collect();
    for tp in all {
        if let Some(owner) = owners.get(tp) {
            holder.insert(tp.clone(), owner.as_str());
            *counts.entry(owner.as_str()).or_default() += 1;
        }
    }
    let least_loaded = |counts: &BTreeMap<&str, usize>, topic: &str| -> Option<&str> {
        members
            .iter()
            .filter(|m| m.topics.contains(topic))
            .min_by_key(|m| counts[m.member_id.as_str()])
            .map(|m| m.member_id.as_str())
    };
    for tp in all {
        if holder.contains_key(tp) {
            continue;
        }
        if let Some(member) = least_loaded(&counts, &tp.0) {
            holder.insert(tp.clone(), member);
            *counts.entry(member).or_default() += 1;
        }
    }
    // Each move lowers the sum of squared counts, so this ends; the bound is a backstop.
    let moves_max = all.len().saturating_mul(members.len()).max(1);
    for _ in 0..moves_max {
        let mut moved = false;
        for tp in all {
            let Some(&from) = holder.get(tp) else {
                continue;
            };
            let Some(to) = least_loaded(&counts, &tp.0) else {
                continue;
            };
            if counts[from] >= counts[to] + 2 {
                holder.insert(tp.clone(), to);
                *counts.entry(from).or_default() -= 1;
                *counts.entry(to).or_default() += 1;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    let mut assignment = empty_assignment(members);
    for ((topic, partition), member) in holder {
        give(&mut assignment, member, &topic, partition);
    }
    assignment
}

/// The invariants of the module doc, asserted.
fn check_assignment(
    assignor: Assignor,
    partition_counts: &BTreeMap<String, i32>,
    members: &[MemberSubscription],
    assignment: &Assignment,
) {
    let by_id: BTreeMap<&str, &MemberSubscription> =
        members.iter().map(|m| (m.member_id.as_str(), m)).collect();
    let mut seen: BTreeSet<(&str, i32)> = BTreeSet::new();
    for (member, topics) in assignment {
        let subscription = by_id.get(member.as_str());
        assert!(
            subscription.is_some(),
            "{assignor:?}: {member} is not a member"
        );
        for (topic, partitions) in topics {
            assert!(
                subscription.is_some_and(|s| s.topics.contains(topic)),
                "{assignor:?}: {member} got {topic} without subscribing to it"
            );
            let count = partition_counts.get(topic).copied().unwrap_or(0);
            for &partition in partitions {
                assert!(
                    (0..count).contains(&partition),
                    "{assignor:?}: {topic}-{partition} does not exist"
                );
                assert!(
                    seen.insert((topic.as_str(), partition)),
                    "{assignor:?}: {topic}-{partition} assigned twice"
                );
            }
        }
    }
    if assignor.rebalance_protocol() == RebalanceProtocol::Eager {
        let refs: Vec<&MemberSubscription> = members.iter().collect();
        let all = subscribed_partitions(partition_counts, &refs);
        assert_eq!(
            seen.len(),
            all.len(),
            "{assignor:?}: a partition left unassigned"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn member(id: &str, topics: &[&str]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.into(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        }
    }

    fn owning(
        mut m: MemberSubscription,
        generation: i32,
        owned: &[(&str, &[i32])],
    ) -> MemberSubscription {
        m.generation_id = generation;
        m.owned = owned
            .iter()
            .map(|(t, p)| (t.to_string(), p.to_vec()))
            .collect();
        m
    }

    fn counts(topics: &[(&str, i32)]) -> BTreeMap<String, i32> {
        topics.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    fn of(assignment: &Assignment, member: &str) -> Vec<(String, i32)> {
        assignment[member]
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            .collect()
    }

    fn tps(list: &[(&str, i32)]) -> Vec<(String, i32)> {
        list.iter().map(|(t, p)| (t.to_string(), *p)).collect()
    }

    /// Kafka's RangeAssignor javadoc example: t0 and t1 of 3 partitions, C0 and C1.
    #[test]
    fn range_gives_consecutive_ranges_per_topic_the_first_members_one_more() {
        let members = [member("C1", &["t0", "t1"]), member("C0", &["t0", "t1"])];
        let a = Assignor::Range.assign(&counts(&[("t0", 3), ("t1", 3)]), &members);
        assert_eq!(
            of(&a, "C0"),
            tps(&[("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)])
        );
        assert_eq!(of(&a, "C1"), tps(&[("t0", 2), ("t1", 2)]));
    }

    /// Kafka's RoundRobinAssignor javadoc example with different subscriptions: C0 takes t0,
    /// C1 t0 and t1, C2 t0, t1 and t2 (1, 2 and 3 partitions).
    #[test]
    fn round_robin_skips_members_not_subscribed_to_a_topic() {
        let members = [
            member("C0", &["t0"]),
            member("C1", &["t0", "t1"]),
            member("C2", &["t0", "t1", "t2"]),
        ];
        let a = Assignor::RoundRobin.assign(&counts(&[("t0", 1), ("t1", 2), ("t2", 3)]), &members);
        assert_eq!(of(&a, "C0"), tps(&[("t0", 0)]));
        assert_eq!(of(&a, "C1"), tps(&[("t1", 0)]));
        assert_eq!(
            of(&a, "C2"),
            tps(&[("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)])
        );
    }

    #[test]
    fn static_members_come_first_in_instance_id_order() {
        let mut a = member("a", &["t"]);
        let mut z = member("z", &["t"]);
        z.group_instance_id = Some("i1".into());
        a.group_instance_id = None;
        let assignment = Assignor::Range.assign(&counts(&[("t", 3)]), &[a, z]);
        assert_eq!(of(&assignment, "z"), tps(&[("t", 0), ("t", 1)]));
        assert_eq!(of(&assignment, "a"), tps(&[("t", 2)]));
    }

    #[test]
    fn cooperative_sticky_keeps_owned_partitions_and_withholds_the_ones_that_move() {
        // A and B owned 3 partitions each; C joins: one of each moves to C, withheld now.
        let t = &["t"][..];
        let members = [
            owning(member("A", t), 4, &[("t", &[0, 1, 2])]),
            owning(member("B", t), 4, &[("t", &[3, 4, 5])]),
            member("C", t),
        ];
        let a = Assignor::CooperativeSticky.assign(&counts(&[("t", 6)]), &members);
        assert_eq!(of(&a, "A"), tps(&[("t", 0), ("t", 1)]));
        assert_eq!(of(&a, "B"), tps(&[("t", 3), ("t", 4)]));
        assert!(
            of(&a, "C").is_empty(),
            "what C gets is still owned: withheld"
        );
        // The follow-up rebalance, once A and B revoked t-2 and t-5: C gets them.
        let members = [
            owning(member("A", t), 5, &[("t", &[0, 1])]),
            owning(member("B", t), 5, &[("t", &[3, 4])]),
            owning(member("C", t), 5, &[]),
        ];
        let a = Assignor::CooperativeSticky.assign(&counts(&[("t", 6)]), &members);
        assert_eq!(of(&a, "A"), tps(&[("t", 0), ("t", 1)]));
        assert_eq!(of(&a, "B"), tps(&[("t", 3), ("t", 4)]));
        assert_eq!(of(&a, "C"), tps(&[("t", 2), ("t", 5)]));
    }

    #[test]
    fn cooperative_sticky_ignores_claims_of_an_older_generation_and_double_claims() {
        let t = &["t"][..];
        let members = [
            owning(member("A", t), 3, &[("t", &[0, 1])]),
            owning(member("B", t), 5, &[("t", &[2])]),
            owning(member("C", t), 5, &[("t", &[2, 3])]),
        ];
        let owners = {
            let refs: Vec<&MemberSubscription> = members.iter().collect();
            valid_owners(&counts(&[("t", 4)]), &refs)
        };
        assert_eq!(
            owners.len(),
            1,
            "A's claims are old, t-2 is claimed twice: {owners:?}"
        );
        assert_eq!(owners[&("t".to_string(), 3)], "C");
    }

    fn arbitrary_group() -> impl Strategy<Value = (BTreeMap<String, i32>, Vec<MemberSubscription>)>
    {
        let topics = prop::collection::btree_map("[a-c]", 0..8i32, 1..4);
        (topics, 1..6usize)
            .prop_flat_map(|(topics, n)| {
                let names: Vec<String> = topics.keys().cloned().collect();
                let member = (
                    prop::sample::subsequence(names.clone(), 0..=names.len()),
                    prop::collection::vec((prop::sample::select(names.clone()), 0..8i32), 0..6),
                    0..3i32,
                    any::<bool>(),
                );
                (Just(topics), prop::collection::vec(member, n..=n))
            })
            .prop_map(|(topics, raw)| {
                let members = raw
                    .into_iter()
                    .enumerate()
                    .map(|(i, (subscribed, owned, generation, is_static))| {
                        let mut m = member(&format!("m{i}"), &[]);
                        m.topics = subscribed.into_iter().collect();
                        for (topic, partition) in owned {
                            m.owned.entry(topic).or_default().push(partition);
                        }
                        m.generation_id = generation;
                        m.group_instance_id = is_static.then(|| format!("i{}", 9 - i));
                        m
                    })
                    .collect();
                (topics, members)
            })
    }

    proptest! {
        /// `check_assignment` runs inside `assign`: any input must satisfy it. Eager
        /// assignors are balanced per topic; cooperative-sticky keeps every valid owner's
        /// partition it assigns with that owner.
        #[test]
        fn every_assignor_is_valid_on_any_group((topics, members) in arbitrary_group()) {
            for assignor in Assignor::ALL {
                let a = assignor.assign(&topics, &members);
                prop_assert_eq!(a.len(), members.len());
            }
            let equal = members.windows(2).all(|w| w[0].topics == w[1].topics);
            if equal {
                let a = Assignor::RoundRobin.assign(&topics, &members);
                let sizes: Vec<usize> = a.values().map(|t| t.values().map(Vec::len).sum()).collect();
                let (lo, hi) = (sizes.iter().min().copied().unwrap_or(0), sizes.iter().max().copied().unwrap_or(0));
                prop_assert!(hi - lo <= 1, "round robin unbalanced: {:?}", sizes);
            }
        }
    }
}
