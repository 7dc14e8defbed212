//! Faults (slow followers, silent members, broker crashes and restarts),
//! the leader elections they lead to, and the end of arrivals.

use super::{micros, Engine, Event};
use crate::cluster::Change;
use crate::config::Fault;

impl Engine {
    pub(super) fn fault(&mut self, fault: Fault) {
        match fault {
            Fault::SlowFollower {
                broker,
                until,
                delay,
                ..
            } => {
                self.slow_until[broker as usize] = (micros(until), micros(delay));
            }
            Fault::StopHeartbeats { fraction, .. } => {
                for m in 0..self.members.len() {
                    if self.rng.chance(fraction) {
                        self.members[m].silent = true;
                    }
                }
            }
            Fault::Crash { broker, .. } => self.crash(broker),
            Fault::Restart { broker, .. } => self.restart(broker),
        }
    }

    fn crash(&mut self, dead: u32) {
        let coordinator = self.coordinator();
        self.brokers[dead as usize].alive = false;
        self.coordinator_moved_from(coordinator);
        let alive: Vec<bool> = self.brokers.iter().map(|b| b.alive).collect();
        for p in 0..self.partitions.len() {
            let (moved, change) = self.partitions[p].remove_broker(dead, &alive, self.now);
            if change.isr_changed {
                self.stats.isr_shrinks += 1;
            }
            if moved {
                self.led_away(p as u32, dead);
            }
            self.hw_change(p as u32, change);
        }
        self.led_by = super::led_by(&self.partitions, self.cfg.brokers);
    }

    /// Leadership of `p` moved away from `old`: everything parked there for
    /// it is answered now, as NOT_LEADER, so clients move on at once.
    fn led_away(&mut self, p: u32, old: u32) {
        self.stats.leader_changes += 1;
        let broker = &self.brokers[old as usize];
        let cancelled = broker.produce.cancel_for_key(&p) + broker.fetch.cancel_for_key(&p);
        self.stats.cancelled += cancelled as u64;
    }

    /// `back` is up again: it leads the partitions nobody led for which it
    /// holds every committed record, and follows the others, fetching from
    /// their leaders until it is back in sync.
    fn restart(&mut self, back: u32) {
        if self.brokers[back as usize].alive {
            return;
        }
        let coordinator = self.coordinator();
        self.brokers[back as usize].alive = true;
        self.coordinator_moved_from(coordinator);
        for i in 0..self.replica_of[back as usize].len() {
            let p = self.replica_of[back as usize][i];
            if self.partitions[p as usize].rejoin(back, self.now) {
                self.stats.leader_changes += 1;
            }
        }
        self.led_by = super::led_by(&self.partitions, self.cfg.brokers);
        self.schedule(self.now, Event::FollowerSend { follower: back });
    }

    /// Kafka's automatic leader rebalance, with no imbalance allowed: each
    /// partition whose preferred replica is up and in sync is led by it.
    pub(super) fn elect_preferred_leaders(&mut self) {
        let alive: Vec<bool> = self.brokers.iter().map(|b| b.alive).collect();
        let mut moved = false;
        for p in 0..self.partitions.len() {
            let Some((old, hw_moved)) = self.partitions[p].elect_preferred(&alive, self.now) else {
                continue;
            };
            moved = true;
            self.led_away(p as u32, old);
            let change = Change {
                hw_moved,
                isr_changed: false,
            };
            self.hw_change(p as u32, change);
            // The old leader follows it now.
            self.schedule(self.now, Event::FollowerSend { follower: old });
        }
        if moved {
            self.led_by = super::led_by(&self.partitions, self.cfg.brokers);
        }
    }

    /// Ends arrivals: at the configured duration, when asked from outside,
    /// or at the in-flight limit (the first of these counts).
    pub(super) fn end_of_arrivals(&mut self) {
        if self.stopping {
            return;
        }
        self.stopping = true;
        self.stats.arrivals_ended_us = self.now;
        // Heartbeats after this would do nothing: members leave now, and
        // silent ones are past heartbeating.
        self.queue
            .retain(|s| !matches!(s.0.event, Event::Heartbeat { .. }));
        // Members still heartbeating leave the group.
        for m in 0..self.members.len() {
            if !self.members[m].silent {
                if let Some(session) = self.members[m].session.take() {
                    session.force_complete();
                }
            }
        }
    }
}
