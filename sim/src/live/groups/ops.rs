//! The group coordinator's delayed operations, as Kafka's DelayedJoin and
//! DelayedHeartbeat, and a SyncGroup that waits for the leader's
//! assignment. Their callbacks lock the group; the coordinator never holds
//! that lock while it calls into a purgatory.

use super::group::GroupState;
use super::GroupCoordinator;
use crate::live::checks::Checks;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use purgatory::{Completer, DelayedOperation, Outcome};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// What a member's JoinGroup is answered with when its round ends.
#[derive(Debug, Clone, Default)]
pub struct JoinResult {
    pub error: i16,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// For the leader only: every member with its `group.instance.id`
    /// (static members) and its metadata for the chosen protocol.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

/// Pushes back, or ends, one member's session.
pub type SessionCompleter = Completer<Arc<str>, DelayedHeartbeat>;

/// A rebalance round of one group: complete when every known member has
/// rejoined, or at the rebalance timeout (the first round of an empty
/// group waits `group.initial.rebalance.delay.ms` instead, for the others
/// to arrive).
pub struct DelayedJoin {
    pub coordinator: Weak<GroupCoordinator>,
    pub group: Arc<str>,
    pub initial: bool,
    pub timeout: Duration,
    pub checks: Arc<Checks>,
    pub answered: bool,
}

impl DelayedOperation for DelayedJoin {
    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn try_complete(&mut self) -> bool {
        let Some(c) = self.coordinator.upgrade() else {
            return true;
        };
        let group = c.group(&self.group);
        let g = group.lock();
        // The initial delay runs out whatever happens; a round with nobody
        // left in it ends at once.
        g.members.is_empty() || (!self.initial && g.all_joined())
    }

    fn on_complete(&mut self, outcome: Outcome) {
        self.checks.answered(self.answered);
        self.answered = true;
        if let Some(c) = self.coordinator.upgrade() {
            c.complete_join(&self.group, outcome);
        }
    }
}

/// A follower's SyncGroup, waiting for the leader's assignment.
pub struct DelayedSync {
    pub coordinator: Weak<GroupCoordinator>,
    pub group: Arc<str>,
    pub member: String,
    /// Its `group.instance.id`: a newer member id holding it fences this
    /// one.
    pub instance: Option<String>,
    pub generation: i32,
    pub timeout: Duration,
    pub checks: Arc<Checks>,
    /// (error code, assignment), once answered.
    pub result: Option<(i16, Bytes)>,
}

impl DelayedOperation for DelayedSync {
    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn try_complete(&mut self) -> bool {
        let Some(c) = self.coordinator.upgrade() else {
            return true;
        };
        let group = c.group(&self.group);
        let g = group.lock();
        if g.consumer.is_some() {
            // The group turned consumer-protocol: its members rejoin.
            self.result = Some((ResponseError::RebalanceInProgress.code(), Bytes::new()));
            return true;
        }
        if g.fenced(&self.member, self.instance.as_deref()) {
            self.result = Some((ResponseError::FencedInstanceId.code(), Bytes::new()));
            return true;
        }
        let Some(member) = g.members.get(&self.member) else {
            self.result = Some((ResponseError::UnknownMemberId.code(), Bytes::new()));
            return true;
        };
        if g.generation != self.generation {
            self.result = Some((ResponseError::RebalanceInProgress.code(), Bytes::new()));
            return true;
        }
        match g.state {
            GroupState::Stable => {
                self.result = Some((0, member.assignment.clone()));
                true
            }
            GroupState::CompletingRebalance => false,
            GroupState::PreparingRebalance | GroupState::Empty => {
                self.result = Some((ResponseError::RebalanceInProgress.code(), Bytes::new()));
                true
            }
        }
    }

    fn on_complete(&mut self, outcome: Outcome) {
        self.checks.answered(false);
        if self.result.is_none() {
            let error = match outcome {
                // The leader did not send the assignment in time.
                Outcome::Completed | Outcome::Expired => ResponseError::RebalanceInProgress,
                Outcome::Cancelled | Outcome::Shutdown => ResponseError::NotCoordinator,
            };
            self.result = Some((error.code(), Bytes::new()));
        }
    }
}

/// What a member's timer in the sessions purgatory times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberTimer {
    /// Its session.
    Session,
    /// A consumer-protocol member's rebalance timeout while it gives up
    /// the partitions of this member epoch.
    Revocation { epoch: i32 },
    /// A classic member's rebalance timeout in a consumer-protocol group,
    /// while it must rejoin or send its SyncGroup: the member's `deadline`
    /// it is for.
    Rejoin { deadline: u64 },
}

/// One member's session: it expires `session.timeout.ms` after the last
/// heartbeat, each heartbeat pushing it back in O(1) (the purgatory's
/// `reset_timeout`). Its end, by expiry or because the member left,
/// removes the member and starts a rebalance. The same operation times a
/// member's rebalance timeout in a consumer-protocol group ([`MemberTimer`]):
/// ended by hand when the member does what it must (gives its partitions
/// up, rejoins, syncs), it fences the member if it expires first.
pub struct DelayedHeartbeat {
    pub coordinator: Weak<GroupCoordinator>,
    pub group: Arc<str>,
    pub member: String,
    pub timeout: Duration,
    pub checks: Arc<Checks>,
    pub answered: bool,
    /// What it times.
    pub timer: MemberTimer,
    /// The consumer-protocol member's incarnation this timer is for (0 for
    /// a classic member, whose ids are never used twice).
    pub incarnation: u64,
}

impl DelayedOperation for DelayedHeartbeat {
    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn try_complete(&mut self) -> bool {
        false
    }

    fn on_complete(&mut self, outcome: Outcome) {
        self.checks.answered(self.answered);
        self.answered = true;
        if outcome == Outcome::Shutdown {
            return;
        }
        if let Some(c) = self.coordinator.upgrade() {
            let expired = outcome == Outcome::Expired;
            let (group, member, incarnation) = (&self.group, &self.member, self.incarnation);
            match self.timer {
                MemberTimer::Session => c.member_gone(group, member, incarnation, expired),
                timer if expired => c.rebalance_late(group, member, incarnation, timer),
                // Done in time (or the member is gone).
                MemberTimer::Revocation { .. } | MemberTimer::Rejoin { .. } => {}
            }
        }
    }
}
