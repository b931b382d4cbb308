//! The election state of one KRaft replica (Kafka's `QuorumState` and its `EpochState`s):
//! the epoch it is in, whom it voted for in that epoch, whom it knows as that epoch's
//! leader, and its role. IO-free; every change that must survive a crash is returned as
//! [`Persist`], and the driver writes it ([`super::quorum_state`]) before it sends anything
//! that depends on it (a granted vote, a candidacy).
//!
//! Roles (KIP-595, pre-vote from KIP-996):
//! - Unattached: no leader known in the epoch; may have voted.
//! - Prospective: the fetch or election timeout ran out; it asks for pre-votes for epoch + 1
//!   without leaving its epoch, so a replica cut off from the quorum does not disturb it.
//! - Candidate: a majority granted pre-votes; it moved to epoch + 1, voted for itself and
//!   asks for votes.
//! - Leader: a majority of the voters granted it their vote in its epoch.
//! - Follower: it knows the epoch's leader (BeginQuorumEpoch, or a Fetch answer).
//! - Resigned: a leader giving up its epoch (shutdown, EndQuorumEpoch) or one that restarted.
//!
//! Invariants (asserted on every transition):
//! - the epoch never decreases;
//! - within an epoch the replica votes at most once, and for one candidate (election safety:
//!   with one vote per voter per epoch, at most one candidate gets a majority);
//! - within an epoch the replica knows at most one leader, and it is a leader only with a
//!   majority of granted votes of that epoch;
//! - a vote is granted only to a candidate whose log is at least as up to date as the local
//!   one (last epoch, then end offset), so a leader holds every committed entry.

use std::collections::BTreeSet;

/// The most voters a quorum may have (KRaft quorums are 1, 3 or 5 in practice; a bound keeps
/// every set here small).
pub const VOTERS_MAX: usize = 64;

/// A replica: its node id and, since KIP-853, the id of its metadata log directory (a disk
/// replaced under the same node id is another replica).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReplicaKey {
    pub id: i32,
    pub directory_id: Option<[u8; 16]>,
}

impl ReplicaKey {
    /// A replica known by its node id alone (a static voter set names no directories).
    pub const fn node(id: i32) -> ReplicaKey {
        ReplicaKey {
            id,
            directory_id: None,
        }
    }
}

/// Where a log ends, compared as Raft compares logs: by last epoch, then end offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogPosition {
    pub last_epoch: i32,
    pub end_offset: i64,
}

/// What must be durable before the replica acts: Kafka's `ElectionState`, the content of
/// the `quorum-state` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElectionState {
    pub epoch: i32,
    pub leader_id: Option<i32>,
    pub voted: Option<ReplicaKey>,
}

impl ElectionState {
    /// The state of a replica that never took part in an election.
    pub const INITIAL: ElectionState = ElectionState {
        epoch: 0,
        leader_id: None,
        voted: None,
    };
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Unattached,
    Prospective { granted: BTreeSet<i32> },
    Candidate { granted: BTreeSet<i32> },
    Leader,
    Follower { leader_id: i32 },
    Resigned,
}

/// A change the driver must make durable before it goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Persist(pub ElectionState);

/// Why an election step was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ElectionError {
    /// The request's epoch is below the local one (Kafka's FENCED_LEADER_EPOCH).
    FencedEpoch { epoch: i32, local_epoch: i32 },
    /// The request came from, or names, a replica that is not a voter.
    NotVoter { id: i32 },
    /// Two leaders claimed for one epoch: a peer broke election safety.
    ConflictingLeader {
        epoch: i32,
        known: i32,
        claimed: i32,
    },
    /// The voter set is empty, too large, or leaves the local replica out where it must vote.
    BadVoters { reason: String },
}

impl std::fmt::Display for ElectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ElectionError::FencedEpoch { epoch, local_epoch } => {
                write!(f, "epoch {epoch} is below the local epoch {local_epoch}")
            }
            ElectionError::NotVoter { id } => write!(f, "replica {id} is not a voter"),
            ElectionError::ConflictingLeader {
                epoch,
                known,
                claimed,
            } => write!(
                f,
                "replica {claimed} claims to lead epoch {epoch}, which replica {known} leads"
            ),
            ElectionError::BadVoters { reason } => write!(f, "bad voter set: {reason}"),
        }
    }
}

impl std::error::Error for ElectionError {}

/// A Vote request as the core sees it (Kafka's VoteRequest, one partition).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VoteRequest {
    pub candidate: ReplicaKey,
    /// The epoch the candidate is in, or for a pre-vote the epoch it would move to.
    pub candidate_epoch: i32,
    pub candidate_log: LogPosition,
    pub pre_vote: bool,
}

/// The answer to a Vote request, and what to persist before sending it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VoteDecision {
    pub granted: bool,
    pub persist: Option<Persist>,
}

/// Deliberate bugs for the simulation's checker tests; all off in every real config.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ElectionBugs {
    /// Grant a second candidate's vote in an epoch already voted in.
    pub vote_twice: bool,
}

#[derive(Clone, Debug)]
pub struct Election {
    local: ReplicaKey,
    voters: BTreeSet<i32>,
    state: ElectionState,
    role: Role,
    bugs: ElectionBugs,
}

impl Election {
    /// The election state of `local` among `voters` (node ids), from its persisted state.
    /// A replica that led its epoch before a restart comes back Resigned (it may not lead
    /// again in that epoch: its term's in-memory state is gone); one that had voted for
    /// itself comes back a Candidate of that epoch with only its own vote.
    pub fn new(
        local: ReplicaKey,
        voters: BTreeSet<i32>,
        persisted: ElectionState,
    ) -> Result<Election, ElectionError> {
        if voters.is_empty() || voters.len() > VOTERS_MAX {
            return Err(ElectionError::BadVoters {
                reason: format!("{} voters (1 to {VOTERS_MAX})", voters.len()),
            });
        }
        if persisted.epoch < 0 {
            return Err(ElectionError::BadVoters {
                reason: format!("a persisted epoch of {}", persisted.epoch),
            });
        }
        let role = match (persisted.leader_id, persisted.voted) {
            (Some(leader), _) if leader == local.id => Role::Resigned,
            (Some(leader_id), _) => Role::Follower { leader_id },
            (None, Some(voted)) if voted == local && voters.contains(&local.id) => {
                Role::Candidate {
                    granted: BTreeSet::from([local.id]),
                }
            }
            _ => Role::Unattached,
        };
        let election = Election {
            local,
            voters,
            state: persisted,
            role,
            bugs: ElectionBugs::default(),
        };
        election.check();
        Ok(election)
    }

    /// Plants a bug (simulation only).
    pub fn with_bugs(mut self, bugs: ElectionBugs) -> Election {
        self.bugs = bugs;
        self
    }

    pub fn epoch(&self) -> i32 {
        self.state.epoch
    }

    pub fn state(&self) -> ElectionState {
        self.state
    }

    pub fn role(&self) -> &Role {
        &self.role
    }

    pub fn leader_id(&self) -> Option<i32> {
        self.state.leader_id
    }

    pub fn is_voter(&self) -> bool {
        self.voters.contains(&self.local.id)
    }

    /// The votes that make a majority of the voters.
    pub fn majority(&self) -> usize {
        self.voters.len() / 2 + 1
    }

    /// Moves to a higher epoch with no leader known and no vote cast (a request or answer
    /// named a later epoch).
    pub fn become_unattached(&mut self, epoch: i32) -> Persist {
        assert!(epoch > self.state.epoch, "unattached at an epoch not above");
        self.state = ElectionState {
            epoch,
            leader_id: None,
            voted: None,
        };
        self.role = Role::Unattached;
        self.check();
        Persist(self.state)
    }

    /// The fetch or election timeout ran out: ask for pre-votes for the next epoch
    /// (KIP-996). A lone voter needs no one else's.
    pub fn become_prospective(&mut self) {
        assert!(self.is_voter(), "an observer never stands for election");
        assert!(
            self.role != Role::Leader,
            "a leader does not stand for election"
        );
        self.role = Role::Prospective {
            granted: BTreeSet::from([self.local.id]),
        };
        self.check();
    }

    /// The pre-vote request a prospective replica sends for `local_log`.
    pub fn pre_vote_request(&self, local_log: LogPosition) -> VoteRequest {
        VoteRequest {
            candidate: self.local,
            candidate_epoch: self.state.epoch + 1,
            candidate_log: local_log,
            pre_vote: true,
        }
    }

    /// The vote request a candidate sends for `local_log`.
    pub fn vote_request(&self, local_log: LogPosition) -> VoteRequest {
        assert!(
            matches!(self.role, Role::Candidate { .. }),
            "only a candidate asks"
        );
        VoteRequest {
            candidate: self.local,
            candidate_epoch: self.state.epoch,
            candidate_log: local_log,
            pre_vote: false,
        }
    }

    /// Records a granted (pre-)vote from `voter`; returns whether a majority has now
    /// granted. Grants of another epoch or for another role are stale and ignored.
    pub fn vote_granted(&mut self, voter: i32, epoch: i32, pre_vote: bool) -> bool {
        if !self.voters.contains(&voter) {
            return false;
        }
        let majority = self.majority();
        match &mut self.role {
            Role::Prospective { granted } if pre_vote && epoch == self.state.epoch + 1 => {
                granted.insert(voter);
                granted.len() >= majority
            }
            Role::Candidate { granted } if !pre_vote && epoch == self.state.epoch => {
                granted.insert(voter);
                granted.len() >= majority
            }
            _ => false,
        }
    }

    /// Whether the prospective replica has a majority of pre-votes.
    pub fn has_pre_vote_majority(&self) -> bool {
        matches!(&self.role, Role::Prospective { granted } if granted.len() >= self.majority())
    }

    /// Moves to the next epoch as a candidate voting for itself (after a majority of
    /// pre-votes, or straight from a timeout for a lone voter).
    pub fn become_candidate(&mut self) -> Persist {
        assert!(self.is_voter(), "an observer never stands for election");
        self.state = ElectionState {
            epoch: self.state.epoch + 1,
            leader_id: None,
            voted: Some(self.local),
        };
        self.role = Role::Candidate {
            granted: BTreeSet::from([self.local.id]),
        };
        self.check();
        Persist(self.state)
    }

    /// A candidate with a majority of votes leads its epoch.
    pub fn become_leader(&mut self) -> Persist {
        let Role::Candidate { granted } = &self.role else {
            panic!("only a candidate becomes leader");
        };
        assert!(
            granted.len() >= self.majority(),
            "a leader without a majority"
        );
        self.state.leader_id = Some(self.local.id);
        self.role = Role::Leader;
        self.check();
        Persist(self.state)
    }

    /// `leader` leads `epoch` (BeginQuorumEpoch, or a Fetch answer naming it). A later epoch
    /// is entered; in the current one a different leader than the known one is refused.
    pub fn become_follower(
        &mut self,
        epoch: i32,
        leader: i32,
    ) -> Result<Option<Persist>, ElectionError> {
        if epoch < self.state.epoch {
            return Err(ElectionError::FencedEpoch {
                epoch,
                local_epoch: self.state.epoch,
            });
        }
        if !self.voters.contains(&leader) {
            return Err(ElectionError::NotVoter { id: leader });
        }
        if leader == self.local.id {
            // Only its own election makes a replica leader; a peer naming it is broken.
            return Err(ElectionError::ConflictingLeader {
                epoch,
                known: self.state.leader_id.unwrap_or(-1),
                claimed: leader,
            });
        }
        if epoch == self.state.epoch {
            if let Some(known) = self.state.leader_id {
                if known != leader {
                    return Err(ElectionError::ConflictingLeader {
                        epoch,
                        known,
                        claimed: leader,
                    });
                }
                if self.role == (Role::Follower { leader_id: leader }) {
                    return Ok(None);
                }
            }
        }
        let voted = if epoch == self.state.epoch {
            self.state.voted
        } else {
            None
        };
        self.state = ElectionState {
            epoch,
            leader_id: Some(leader),
            voted,
        };
        self.role = Role::Follower { leader_id: leader };
        self.check();
        Ok(Some(Persist(self.state)))
    }

    /// The leader gives up its epoch (EndQuorumEpoch on shutdown); it stays in the epoch
    /// and grants no votes in it, until a later epoch begins.
    pub fn resign(&mut self) {
        assert_eq!(self.role, Role::Leader, "only a leader resigns");
        self.role = Role::Resigned;
        self.check();
    }

    /// Whether `candidate_log` is at least as up to date as `local_log`.
    pub fn log_is_up_to_date(candidate_log: LogPosition, local_log: LogPosition) -> bool {
        candidate_log >= local_log
    }

    /// Kafka's `handleVoteRequest`: answers a (pre-)vote request, given where the local log
    /// ends and whether the local replica heard from a leader within its fetch timeout.
    ///
    /// A vote of a later epoch moves this replica to that epoch first (a pre-vote never
    /// does). A vote is granted to a candidate whose log is at least as up to date, by a
    /// replica of that epoch that knows no leader and has not voted for anyone else; the
    /// vote is persisted before the answer goes out. A pre-vote is granted on the log rule
    /// alone, except by a follower that still hears from its leader (KIP-996).
    pub fn vote(
        &mut self,
        request: VoteRequest,
        local_log: LogPosition,
        heard_from_leader_recently: bool,
    ) -> Result<VoteDecision, ElectionError> {
        if !self.voters.contains(&request.candidate.id) {
            return Err(ElectionError::NotVoter {
                id: request.candidate.id,
            });
        }
        if request.candidate_epoch < self.state.epoch {
            return Err(ElectionError::FencedEpoch {
                epoch: request.candidate_epoch,
                local_epoch: self.state.epoch,
            });
        }
        let up_to_date = Election::log_is_up_to_date(request.candidate_log, local_log);
        if request.pre_vote {
            let granted = match &self.role {
                Role::Follower { .. } => up_to_date && !heard_from_leader_recently,
                Role::Leader => false,
                _ => up_to_date,
            };
            return Ok(VoteDecision {
                granted,
                persist: None,
            });
        }
        let mut persist = None;
        if request.candidate_epoch > self.state.epoch {
            persist = Some(self.become_unattached(request.candidate_epoch));
        }
        let granted = match (&self.role, self.state.voted) {
            (Role::Unattached, Some(voted)) => {
                voted == request.candidate || (self.bugs.vote_twice && up_to_date)
            }
            (Role::Unattached, None) => up_to_date,
            // A candidate voted for itself; a leader, follower or resigned leader knows
            // (or was) the epoch's leader.
            _ => false,
        };
        if granted && self.state.voted != Some(request.candidate) {
            self.state.voted = Some(request.candidate);
            persist = Some(Persist(self.state));
        }
        self.check();
        Ok(VoteDecision { granted, persist })
    }

    fn check(&self) {
        assert!(self.state.epoch >= 0, "a negative epoch");
        match &self.role {
            Role::Leader => {
                assert_eq!(
                    self.state.leader_id,
                    Some(self.local.id),
                    "leads unrecorded"
                );
                assert_eq!(
                    self.state.voted,
                    Some(self.local),
                    "a leader voted for itself"
                );
            }
            Role::Candidate { granted } => {
                assert_eq!(self.state.voted, Some(self.local), "a candidate's own vote");
                assert!(self.state.leader_id.is_none(), "a candidate with a leader");
                assert!(granted.is_subset(&self.voters), "grants from non-voters");
            }
            Role::Prospective { granted } => {
                assert!(granted.is_subset(&self.voters), "pre-votes from non-voters");
            }
            Role::Follower { leader_id } => {
                assert_eq!(self.state.leader_id, Some(*leader_id), "follows unrecorded");
                assert_ne!(*leader_id, self.local.id, "follows itself");
            }
            Role::Unattached => {
                assert!(self.state.leader_id.is_none(), "unattached with a leader");
            }
            Role::Resigned => {
                assert_eq!(
                    self.state.leader_id,
                    Some(self.local.id),
                    "resigned unrecorded"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: i32) -> ReplicaKey {
        ReplicaKey::node(id)
    }

    fn at(last_epoch: i32, end_offset: i64) -> LogPosition {
        LogPosition {
            last_epoch,
            end_offset,
        }
    }

    fn voter(id: i32) -> Election {
        Election::new(key(id), BTreeSet::from([1, 2, 3]), ElectionState::INITIAL)
            .expect("an election")
    }

    fn vote(candidate: i32, epoch: i32, log: LogPosition) -> VoteRequest {
        VoteRequest {
            candidate: key(candidate),
            candidate_epoch: epoch,
            candidate_log: log,
            pre_vote: false,
        }
    }

    #[test]
    fn one_vote_per_epoch_and_only_for_an_up_to_date_log() {
        let mut e = voter(1);
        let local = at(3, 100);
        // A stale log is refused, but the epoch is entered.
        let d = e.vote(vote(2, 5, at(3, 99)), local, false).expect("answer");
        assert!(!d.granted);
        assert_eq!(d.persist.map(|p| p.0.epoch), Some(5));
        // An up-to-date one is granted and persisted.
        let d = e
            .vote(vote(2, 5, at(3, 100)), local, false)
            .expect("answer");
        assert!(d.granted);
        assert_eq!(d.persist.and_then(|p| p.0.voted), Some(key(2)));
        // The same candidate again: granted, nothing new to persist.
        let d = e.vote(vote(2, 5, at(4, 1)), local, false).expect("answer");
        assert_eq!((d.granted, d.persist), (true, None));
        // Another candidate of the same epoch: refused, however good its log.
        let d = e
            .vote(vote(3, 5, at(9, 999)), local, false)
            .expect("answer");
        assert!(!d.granted, "a second vote in epoch 5");
        // A later epoch frees the vote.
        let d = e.vote(vote(3, 6, at(4, 0)), local, false).expect("answer");
        assert!(d.granted);
        assert_eq!(e.state().voted, Some(key(3)));
        // An earlier epoch is fenced; a non-voter is refused.
        assert!(matches!(
            e.vote(vote(2, 5, at(9, 9)), local, false),
            Err(ElectionError::FencedEpoch {
                epoch: 5,
                local_epoch: 6
            })
        ));
        assert!(matches!(
            e.vote(vote(7, 9, at(9, 9)), local, false),
            Err(ElectionError::NotVoter { id: 7 })
        ));
    }

    #[test]
    fn the_planted_bug_grants_two_votes_in_one_epoch() {
        let mut e = voter(1).with_bugs(ElectionBugs { vote_twice: true });
        let local = at(0, 0);
        assert!(
            e.vote(vote(2, 1, local), local, false)
                .expect("answer")
                .granted
        );
        assert!(
            e.vote(vote(3, 1, local), local, false)
                .expect("answer")
                .granted
        );
    }

    #[test]
    fn pre_votes_change_nothing_and_a_follower_that_hears_its_leader_refuses_them() {
        let mut e = voter(1);
        let local = at(2, 50);
        let mut pre = vote(2, 4, at(2, 50));
        pre.pre_vote = true;
        let d = e.vote(pre, local, false).expect("answer");
        assert_eq!((d.granted, d.persist), (true, None));
        assert_eq!(
            e.state(),
            ElectionState::INITIAL,
            "a pre-vote moves no epoch"
        );
        e.become_follower(3, 3).expect("follow");
        assert!(!e.vote(pre, local, true).expect("answer").granted);
        assert!(e.vote(pre, local, false).expect("answer").granted);
        pre.candidate_log = at(1, 900);
        assert!(
            !e.vote(pre, local, false).expect("answer").granted,
            "a stale log"
        );
    }

    #[test]
    fn a_candidate_leads_with_a_majority_and_one_leader_per_epoch_is_known() {
        let mut e = voter(1);
        e.become_prospective();
        assert!(!e.has_pre_vote_majority());
        assert!(e.vote_granted(2, 1, true), "2 of 3 pre-votes");
        let persisted = e.become_candidate();
        assert_eq!(persisted.0.epoch, 1);
        assert_eq!(persisted.0.voted, Some(key(1)));
        assert!(
            !e.vote_granted(2, 0, false),
            "a grant of another epoch is stale"
        );
        assert!(!e.vote_granted(9, 1, false), "not a voter");
        assert!(e.vote_granted(3, 1, false));
        let led = e.become_leader();
        assert_eq!(led.0.leader_id, Some(1));
        // Replica 2 claiming epoch 1 too is a broken peer.
        assert!(matches!(
            e.become_follower(1, 2),
            Err(ElectionError::ConflictingLeader {
                epoch: 1,
                known: 1,
                claimed: 2
            })
        ));
        // A later epoch's leader is followed.
        assert!(e.become_follower(2, 2).expect("follow").is_some());
        assert_eq!(e.role(), &Role::Follower { leader_id: 2 });
        assert_eq!(e.become_follower(2, 2).expect("again"), None);
        assert!(matches!(
            e.become_follower(1, 3),
            Err(ElectionError::FencedEpoch { .. })
        ));
    }

    #[test]
    fn a_restart_resumes_from_the_persisted_state() {
        let voters = BTreeSet::from([1, 2, 3]);
        let led = ElectionState {
            epoch: 4,
            leader_id: Some(1),
            voted: Some(key(1)),
        };
        let e = Election::new(key(1), voters.clone(), led).expect("election");
        assert_eq!(e.role(), &Role::Resigned, "a leader that restarted");
        let candidate = ElectionState {
            epoch: 4,
            leader_id: None,
            voted: Some(key(1)),
        };
        let mut e = Election::new(key(1), voters.clone(), candidate).expect("election");
        assert!(matches!(e.role(), Role::Candidate { .. }));
        let local = at(0, 0);
        assert!(
            !e.vote(vote(2, 4, local), local, false)
                .expect("answer")
                .granted,
            "it voted for itself in epoch 4"
        );
        let voted_other = ElectionState {
            epoch: 4,
            leader_id: None,
            voted: Some(key(3)),
        };
        let mut e = Election::new(key(1), voters.clone(), voted_other).expect("election");
        assert!(
            !e.vote(vote(2, 4, local), local, false)
                .expect("answer")
                .granted
        );
        assert!(Election::new(key(1), BTreeSet::new(), ElectionState::INITIAL).is_err());
    }
}
