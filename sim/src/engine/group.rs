//! The consumer group: members' heartbeats, each session parked in the
//! coordinator's purgatory until its next heartbeat or its timeout. The
//! coordinator is the first broker up: when that changes (it crashes, or
//! broker 0 comes back), the sessions there are cancelled and each member
//! rejoins at the new one with its next heartbeat.

use super::{micros, park, Engine, Event};
use crate::ops::DelayedHeartbeat;
use crate::stats::Check;
use purgatory::Outcome;
use std::sync::Arc;
use std::time::Instant;

impl Engine {
    pub(super) fn heartbeat(&mut self, member: u32) {
        let m = member as usize;
        if self.members[m].silent {
            return;
        }
        if self.stopping {
            if let Some(session) = self.members[m].session.take() {
                session.force_complete();
            }
            return;
        }
        self.members[m].last_heartbeat = self.now;
        let extended = match &self.members[m].session {
            Some(session) => session.reset_timeout(self.cfg.session_timeout),
            None => false,
        };
        if extended {
            self.stats.heartbeats += 1;
        } else if let Some(coordinator) = self.coordinator() {
            let op = DelayedHeartbeat {
                member,
                session_timeout: self.cfg.session_timeout,
                clock: Arc::clone(&self.clock),
                replies: self.replies_tx.clone(),
            };
            let session = park(
                &mut self.stats,
                &self.brokers[coordinator as usize].sessions,
                op,
                &[member],
                ("member", member.into()),
            );
            if session.is_some() {
                self.members[m].session = session;
                self.members[m].joins += 1;
            }
        }
        let at = self.now + micros(self.cfg.heartbeat_interval);
        self.schedule(at, Event::Heartbeat { member });
    }

    /// The group coordinator: the first broker up, if any is.
    pub(super) fn coordinator(&self) -> Option<u32> {
        (0..self.cfg.brokers).find(|&b| self.brokers[b as usize].alive)
    }

    /// The coordinator was `before` until a broker crashed or restarted:
    /// if that moved it, the sessions there are cancelled (answered at
    /// once, as a dead broker's parked requests are), and each member
    /// rejoins at the new coordinator with its next heartbeat.
    pub(super) fn coordinator_moved_from(&mut self, before: Option<u32>) {
        let Some(old) = before.filter(|&b| Some(b) != self.coordinator()) else {
            return;
        };
        for m in 0..self.members.len() {
            if self.members[m].session.take().is_some() {
                self.members[m].moving = true;
                self.brokers[old as usize]
                    .sessions
                    .cancel_for_key(&(m as u32));
            }
        }
    }

    pub(super) fn session_reply(&mut self, member: u32, outcome: Outcome, at: Instant) {
        let at = self.at_micros(at);
        let m = &mut self.members[member as usize];
        m.ends += 1;
        // In real time the answer can trail a re-join: keep a live session.
        if m.session.as_ref().is_some_and(|s| s.is_completed()) {
            m.session = None;
        }
        let last = m.last_heartbeat;
        match outcome {
            Outcome::Expired => {
                self.stats.sessions_expired += 1;
                if at < last + micros(self.cfg.session_timeout) {
                    self.stats.violation(
                        Check::EarlyExpiry,
                        format!(
                            "member {member}'s session expired {} µs after its last heartbeat",
                            at - last
                        ),
                    );
                }
            }
            Outcome::Completed => self.stats.sessions_left += 1,
            Outcome::Cancelled if m.moving => {
                m.moving = false;
                self.stats.sessions_moved += 1;
            }
            Outcome::Cancelled | Outcome::Shutdown => {
                self.stats.violation(
                    Check::ExactlyOnce,
                    format!("member {member}'s session ended by {outcome}"),
                );
            }
        }
    }
}
