//! Incremental fetch sessions (KIP-227): the broker remembers the partitions a fetcher asked
//! for, so later requests name only what changed and responses carry only partitions with
//! something new.
//!
//! A request's `session_id` and `session_epoch` choose what happens:
//! - epoch -1 (FINAL), any id: the named session (if any) is closed and the request is a
//!   plain full fetch, answered with session id 0 (sessionless);
//! - epoch 0 (INITIAL): the named session (if any) is closed and a new one is made from the
//!   request's partitions if the cache has room; the full answer carries its id (or 0);
//! - epoch N > 0 with an id: an incremental fetch of that session. An unknown id answers
//!   FETCH_SESSION_ID_NOT_FOUND, an epoch other than the session's next one
//!   INVALID_FETCH_SESSION_EPOCH; otherwise the request's partitions are added or updated,
//!   the forgotten ones removed, and the answer holds only the partitions with records, an
//!   error, or a changed high watermark, last stable offset or log start offset.
//!
//! The cache holds at most `max.incremental.fetch.session.cache.slots` sessions. When full,
//! a new session takes a slot by Kafka's rule: the least recently used session goes if it
//! was unused for [`FETCH_SESSION_EVICTION_MS`]. Otherwise the cheapest session (in
//! [`EvictableKey`] order) that the newcomer may displace goes, if the newcomer is worth at
//! least as much. A consumer's newcomer may displace only sessions older than the eviction
//! time; a follower's (privileged) newcomer may also displace any unprivileged session.
//! Otherwise no session is made and the fetcher keeps sending full requests.
//!
//! Invariants: the lookup indexes (`last_used`, `evictable_*`) hold exactly the sessions in
//! `sessions`, under the keys recorded in each session; a session's epoch is the epoch its
//! next incremental request must carry. The state lock is never held across an await.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use crate::protocol::error::ErrorCode;
use crate::protocol::fetch::{FetchPartition, FetchRequest, FetchTopic};
use crate::protocol::wire::Uuid;
use crate::rt::time::{self, Instant};

/// How long a session must have been unused before any newcomer may evict it, and how old a
/// session must be before a consumer's session may displace it (Kafka's
/// `MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`).
pub const FETCH_SESSION_EVICTION_MS: u64 = 120_000;
/// The epoch of a request that makes a new session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a request that closes its session (or uses none).
pub const FINAL_EPOCH: i32 = -1;
/// The session id meaning "no session".
pub const INVALID_SESSION_ID: i32 = 0;

/// The epoch after `epoch`, wrapping to 1 as Kafka does.
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        FINAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// How a session names its topics: by id from Fetch v13 on, by name before.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TopicKey {
    Name(String),
    Id(Uuid),
}

/// One partition of a session: the fetcher's last request for it and what it was last told.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedPartition {
    pub topic: String,
    pub topic_id: Uuid,
    pub request: FetchPartition,
    /// The high watermark last sent; -1 for a partition not yet answered.
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

/// Orders sessions by how much it costs to lose them: unprivileged before privileged, then
/// fewer partitions first, then by id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct EvictableKey {
    pub privileged: bool,
    pub size: usize,
    pub id: i32,
}

#[derive(Debug)]
struct Session {
    id: i32,
    privileged: bool,
    uses_topic_ids: bool,
    partitions: BTreeMap<(TopicKey, i32), CachedPartition>,
    creation_ms: u64,
    last_used_ms: u64,
    /// The epoch the next incremental request must carry.
    epoch: i32,
    /// The size recorded in the evictable indexes at the last touch.
    cached_size: Option<usize>,
}

impl Session {
    fn evictable_key(&self) -> EvictableKey {
        EvictableKey {
            privileged: self.privileged,
            size: self.cached_size.unwrap_or(0),
            id: self.id,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    sessions: BTreeMap<i32, Session>,
    last_used: BTreeSet<(u64, i32)>,
    evictable_by_all: BTreeSet<EvictableKey>,
    evictable_by_privileged: BTreeSet<EvictableKey>,
    evictions: u64,
}

impl State {
    fn remove(&mut self, id: i32) -> Option<Session> {
        let session = self.sessions.remove(&id)?;
        self.last_used.remove(&(session.last_used_ms, id));
        let key = session.evictable_key();
        self.evictable_by_all.remove(&key);
        self.evictable_by_privileged.remove(&key);
        Some(session)
    }

    /// Records a use of session `id` at `now_ms` and refreshes its place in the indexes.
    fn touch(&mut self, id: i32, now_ms: u64, eviction_ms: u64) {
        let Some(session) = self.sessions.get_mut(&id) else {
            return;
        };
        self.last_used.remove(&(session.last_used_ms, id));
        session.last_used_ms = now_ms;
        self.last_used.insert((now_ms, id));
        if session.cached_size.is_some() {
            let old = session.evictable_key();
            self.evictable_by_all.remove(&old);
            self.evictable_by_privileged.remove(&old);
        }
        session.cached_size = Some(session.partitions.len());
        let key = session.evictable_key();
        let old_enough = now_ms.saturating_sub(session.creation_ms) > eviction_ms;
        if !session.privileged || old_enough {
            self.evictable_by_privileged.insert(key);
        }
        if old_enough {
            self.evictable_by_all.insert(key);
        }
    }

    /// Kafka's `tryEvict`: frees one slot for a newcomer with `key`, if the rule allows.
    fn try_evict(&mut self, key: EvictableKey, now_ms: u64, eviction_ms: u64) -> bool {
        let Some(&(last_used_ms, oldest)) = self.last_used.first() else {
            return false;
        };
        if now_ms.saturating_sub(last_used_ms) > eviction_ms {
            tracing::debug!(session = oldest, "evicting a stale fetch session");
            self.remove(oldest);
            self.evictions += 1;
            return true;
        }
        let candidates = if key.privileged {
            &self.evictable_by_privileged
        } else {
            &self.evictable_by_all
        };
        let Some(&first) = candidates.first() else {
            return false;
        };
        if key < first {
            return false;
        }
        tracing::debug!(
            session = first.id,
            "evicting a fetch session for a larger one"
        );
        self.remove(first.id);
        self.evictions += 1;
        true
    }
}

/// What a fetch request asks of the session cache, decided before any partition is read.
#[derive(Clone, Debug, PartialEq)]
pub enum FetchContext {
    /// Refused: the response carries only this top-level error and session id 0.
    Error(ErrorCode),
    /// A full fetch without a session (epoch -1, or a version without sessions).
    Sessionless,
    /// A full fetch that makes a session when answered ([`FetchSessionCache::create`]).
    Full { privileged: bool },
    /// An incremental fetch of session `id`: `topics` are all its partitions, to be read.
    Incremental { id: i32, topics: Vec<FetchTopic> },
}

/// The broker's fetch sessions.
#[derive(Debug)]
pub struct FetchSessionCache {
    slots_max: usize,
    eviction_ms: u64,
    origin: Instant,
    state: Mutex<State>,
}

impl FetchSessionCache {
    /// A cache of at most `slots_max` sessions (`max.incremental.fetch.session.cache.slots`).
    pub fn new(slots_max: usize, eviction_ms: u64) -> FetchSessionCache {
        FetchSessionCache {
            slots_max,
            eviction_ms,
            origin: time::now(),
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Every update below leaves the state consistent before anything that can panic.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Milliseconds of the monotonic clock since the cache was made.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(time::now().duration_since(self.origin).as_millis()).unwrap_or(u64::MAX)
    }

    /// Sessions in the cache.
    pub fn len(&self) -> usize {
        self.state().sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sessions evicted so far.
    pub fn evictions(&self) -> u64 {
        self.state().evictions
    }

    /// Decides what a fetch request does with sessions (see the module docs). For an
    /// incremental fetch the session is updated (partitions added, updated and forgotten,
    /// epoch advanced) here, before any partition is read.
    pub fn context(&self, request: &FetchRequest, version: i16, now_ms: u64) -> FetchContext {
        let uses_topic_ids = version >= 13;
        let privileged = request.replica_id.0 >= 0 || request.replica_state.replica_id.0 >= 0;
        let session_id = request.session_id;
        let epoch = request.session_epoch;
        if version < 7 {
            return FetchContext::Sessionless;
        }
        let mut state = self.state();
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if session_id != INVALID_SESSION_ID && state.remove(session_id).is_some() {
                tracing::debug!(session = session_id, "closed a fetch session");
            }
            return if epoch == FINAL_EPOCH {
                FetchContext::Sessionless
            } else {
                FetchContext::Full { privileged }
            };
        }
        if epoch < FINAL_EPOCH {
            return FetchContext::Error(ErrorCode::INVALID_FETCH_SESSION_EPOCH);
        }
        let Some(session) = state.sessions.get_mut(&session_id) else {
            return FetchContext::Error(ErrorCode::FETCH_SESSION_ID_NOT_FOUND);
        };
        if session.epoch != epoch {
            tracing::debug!(
                session = session_id,
                expected = session.epoch,
                got = epoch,
                "fetch session epoch mismatch"
            );
            return FetchContext::Error(ErrorCode::INVALID_FETCH_SESSION_EPOCH);
        }
        if session.uses_topic_ids != uses_topic_ids {
            return FetchContext::Error(ErrorCode::FETCH_SESSION_TOPIC_ID_ERROR);
        }
        for topic in &request.topics {
            let key = topic_key(uses_topic_ids, &topic.topic, topic.topic_id);
            for partition in &topic.partitions {
                session
                    .partitions
                    .entry((key.clone(), partition.partition))
                    .and_modify(|cached| cached.request = partition.clone())
                    .or_insert_with(|| CachedPartition {
                        topic: topic.topic.clone(),
                        topic_id: topic.topic_id,
                        request: partition.clone(),
                        high_watermark: -1,
                        last_stable_offset: -1,
                        log_start_offset: -1,
                    });
            }
        }
        for forgotten in &request.forgotten_topics_data {
            let key = topic_key(uses_topic_ids, &forgotten.topic, forgotten.topic_id);
            for partition in &forgotten.partitions {
                session.partitions.remove(&(key.clone(), *partition));
            }
        }
        if session.partitions.is_empty() {
            // Kafka closes a session that has nothing left and answers sessionless.
            state.remove(session_id);
            return FetchContext::Sessionless;
        }
        session.epoch = next_epoch(session.epoch);
        let topics = session_topics(session);
        state.touch(session_id, now_ms, self.eviction_ms);
        FetchContext::Incremental {
            id: session_id,
            topics,
        }
    }

    /// Makes a session from a full fetch's request and the answer it got, if there is room
    /// (or a session may be evicted). Returns its id, or 0 when none was made.
    pub fn create(
        &self,
        request: &FetchRequest,
        version: i16,
        privileged: bool,
        answered: &[Answered],
        now_ms: u64,
    ) -> i32 {
        let uses_topic_ids = version >= 13;
        let mut partitions = BTreeMap::new();
        for topic in &request.topics {
            let key = topic_key(uses_topic_ids, &topic.topic, topic.topic_id);
            for partition in &topic.partitions {
                let seen = answered
                    .iter()
                    .find(|a| a.key == key && a.partition == partition.partition);
                partitions.insert(
                    (key.clone(), partition.partition),
                    CachedPartition {
                        topic: topic.topic.clone(),
                        topic_id: topic.topic_id,
                        request: partition.clone(),
                        high_watermark: seen.map_or(-1, |a| a.high_watermark),
                        last_stable_offset: seen.map_or(-1, |a| a.last_stable_offset),
                        log_start_offset: seen.map_or(-1, |a| a.log_start_offset),
                    },
                );
            }
        }
        let mut state = self.state();
        let key = EvictableKey {
            privileged,
            size: partitions.len(),
            id: 0,
        };
        let has_room = state.sessions.len() < self.slots_max
            || (self.slots_max > 0 && state.try_evict(key, now_ms, self.eviction_ms));
        if !has_room {
            tracing::debug!(
                privileged,
                size = key.size,
                "no fetch session created: cache full"
            );
            return INVALID_SESSION_ID;
        }
        let id = loop {
            // Positive and unused, as Kafka's session ids.
            let candidate = (crate::rt::rand::random_u64() % (i32::MAX as u64)) as i32 + 1;
            if !state.sessions.contains_key(&candidate) {
                break candidate;
            }
        };
        state.sessions.insert(
            id,
            Session {
                id,
                privileged,
                uses_topic_ids,
                partitions,
                creation_ms: now_ms,
                last_used_ms: now_ms,
                epoch: next_epoch(INITIAL_EPOCH),
                cached_size: None,
            },
        );
        state.last_used.insert((now_ms, id));
        state.touch(id, now_ms, self.eviction_ms);
        id
    }

    /// Records what an incremental answer of session `id` says of each partition and tells
    /// which partitions must be in it: those with records or an error, and those whose high
    /// watermark, last stable offset or log start offset changed since last sent. Returns one
    /// flag per entry of `answered`.
    pub fn must_respond(&self, id: i32, answered: &[Answered]) -> Vec<bool> {
        let mut state = self.state();
        let Some(session) = state.sessions.get_mut(&id) else {
            // Closed or evicted meanwhile: send everything; the next request learns of it.
            return vec![true; answered.len()];
        };
        answered
            .iter()
            .map(|a| {
                let Some(cached) = session.partitions.get_mut(&(a.key.clone(), a.partition)) else {
                    return true;
                };
                let changed = cached.high_watermark != a.high_watermark
                    || cached.last_stable_offset != a.last_stable_offset
                    || cached.log_start_offset != a.log_start_offset;
                cached.high_watermark = a.high_watermark;
                cached.last_stable_offset = a.last_stable_offset;
                cached.log_start_offset = a.log_start_offset;
                changed || a.has_records || a.error_code != 0
            })
            .collect()
    }
}

/// What an answer said about one partition, for the session's records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answered {
    pub key: TopicKey,
    pub partition: i32,
    pub error_code: i16,
    pub has_records: bool,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

/// The key a session files a topic under.
pub fn topic_key(uses_topic_ids: bool, name: &str, id: Uuid) -> TopicKey {
    if uses_topic_ids {
        TopicKey::Id(id)
    } else {
        TopicKey::Name(name.to_string())
    }
}

/// A session's partitions as the topics of a fetch request, grouped by topic.
fn session_topics(session: &Session) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut last: Option<&TopicKey> = None;
    for ((key, _), cached) in &session.partitions {
        if last != Some(key) {
            topics.push(FetchTopic {
                topic: cached.topic.clone(),
                topic_id: cached.topic_id,
                partitions: Vec::new(),
            });
            last = Some(key);
        }
        if let Some(topic) = topics.last_mut() {
            topic.partitions.push(cached.request.clone());
        }
    }
    topics
}

// These tests use tokio time and randomness outside a simulated node; the sim build runs
// the simulation instead.
#[cfg(all(test, not(feature = "sim")))]
mod tests {
    use super::*;
    use crate::protocol::fetch::ForgottenTopic;
    use crate::protocol::types::Offset;

    fn request(session_id: i32, epoch: i32, partitions: &[(&str, i32, i64)]) -> FetchRequest {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for (topic, partition, offset) in partitions {
            let part = FetchPartition {
                partition: *partition,
                fetch_offset: Offset(*offset),
                partition_max_bytes: 1 << 20,
                ..Default::default()
            };
            match topics.iter_mut().find(|t| t.topic == *topic) {
                Some(t) => t.partitions.push(part),
                None => topics.push(FetchTopic {
                    topic: topic.to_string(),
                    partitions: vec![part],
                    ..Default::default()
                }),
            }
        }
        FetchRequest {
            session_id,
            session_epoch: epoch,
            topics,
            ..Default::default()
        }
    }

    fn answered(topic: &str, partition: i32, high_watermark: i64) -> Answered {
        Answered {
            key: TopicKey::Name(topic.to_string()),
            partition,
            error_code: 0,
            has_records: false,
            high_watermark,
            last_stable_offset: high_watermark,
            log_start_offset: 0,
        }
    }

    #[test]
    fn a_session_lives_through_incremental_epochs() {
        let cache = FetchSessionCache::new(10, FETCH_SESSION_EVICTION_MS);
        let full = request(0, INITIAL_EPOCH, &[("a", 0, 0), ("a", 1, 0)]);
        assert_eq!(
            cache.context(&full, 12, 0),
            FetchContext::Full { privileged: false }
        );
        let id = cache.create(
            &full,
            12,
            false,
            &[answered("a", 0, 5), answered("a", 1, 7)],
            0,
        );
        assert!(id > 0);
        // Epoch 1 adds b-0 and names no change to a.
        let inc = request(id, 1, &[("b", 0, 3)]);
        let FetchContext::Incremental { id: got, topics } = cache.context(&inc, 12, 1) else {
            panic!("expected an incremental context");
        };
        assert_eq!(got, id);
        let names: Vec<(String, usize)> = topics
            .iter()
            .map(|t| (t.topic.clone(), t.partitions.len()))
            .collect();
        assert_eq!(names, vec![("a".to_string(), 2), ("b".to_string(), 1)]);
        // Unchanged a-0, changed a-1, new b-0.
        let flags = cache.must_respond(
            id,
            &[
                answered("a", 0, 5),
                answered("a", 1, 8),
                answered("b", 0, 3),
            ],
        );
        assert_eq!(flags, vec![false, true, true]);
        // The same epoch again is refused; the next one works; forgetting everything closes.
        assert_eq!(
            cache.context(&inc, 12, 2),
            FetchContext::Error(ErrorCode::INVALID_FETCH_SESSION_EPOCH)
        );
        let mut forget = request(id, 2, &[]);
        forget.forgotten_topics_data = vec![
            ForgottenTopic {
                topic: "a".into(),
                partitions: vec![0, 1],
                ..Default::default()
            },
            ForgottenTopic {
                topic: "b".into(),
                partitions: vec![0],
                ..Default::default()
            },
        ];
        assert_eq!(cache.context(&forget, 12, 3), FetchContext::Sessionless);
        assert!(cache.is_empty());
        assert_eq!(
            cache.context(&request(id, 3, &[]), 12, 4),
            FetchContext::Error(ErrorCode::FETCH_SESSION_ID_NOT_FOUND)
        );
    }

    #[test]
    fn final_epoch_closes_and_versions_before_7_have_no_sessions() {
        let cache = FetchSessionCache::new(10, FETCH_SESSION_EVICTION_MS);
        let full = request(0, INITIAL_EPOCH, &[("a", 0, 0)]);
        let id = cache.create(&full, 12, false, &[], 0);
        assert_eq!(cache.len(), 1);
        assert_eq!(
            cache.context(&request(id, FINAL_EPOCH, &[("a", 0, 0)]), 12, 1),
            FetchContext::Sessionless
        );
        assert!(cache.is_empty());
        assert_eq!(
            cache.context(&request(5, 3, &[]), 6, 1),
            FetchContext::Sessionless
        );
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(FINAL_EPOCH), FINAL_EPOCH);
    }

    #[test]
    fn eviction_follows_kafkas_rule() {
        let eviction_ms = 1_000;
        let cache = FetchSessionCache::new(2, eviction_ms);
        let small = request(0, INITIAL_EPOCH, &[("a", 0, 0)]);
        let big = request(0, INITIAL_EPOCH, &[("a", 0, 0), ("a", 1, 0), ("a", 2, 0)]);
        let first = cache.create(&small, 12, false, &[], 0);
        let second = cache.create(&small, 12, false, &[], 10);
        assert!(first > 0 && second > 0);
        // Full, and both sessions young and recently used: a consumer's session gets none,
        // however large.
        assert_eq!(cache.create(&big, 12, false, &[], 20), INVALID_SESSION_ID);
        // Once both are older than the eviction time (and touched since), a larger session
        // displaces the smallest; a smaller one displaces nothing.
        let touch = |id: i32, epoch: i32, now: u64| {
            assert!(matches!(
                cache.context(&request(id, epoch, &[]), 12, now),
                FetchContext::Incremental { .. }
            ));
        };
        touch(first, 1, 1_500);
        touch(second, 1, 1_600);
        let none = request(0, INITIAL_EPOCH, &[]);
        assert_eq!(
            cache.create(&none, 12, false, &[], 1_700),
            INVALID_SESSION_ID
        );
        let third = cache.create(&big, 12, false, &[], 1_700);
        assert!(third > 0);
        assert_eq!(cache.evictions(), 1);
        assert_eq!(cache.len(), 2);
        // A session unused for longer than the eviction time goes first, for anyone.
        let fourth = cache.create(&none, 12, false, &[], 3_000);
        assert!(fourth > 0);
        assert_eq!(cache.evictions(), 2);
        // A cache of zero slots never makes a session.
        let empty = FetchSessionCache::new(0, eviction_ms);
        assert_eq!(empty.create(&small, 12, false, &[], 0), INVALID_SESSION_ID);
    }
}
