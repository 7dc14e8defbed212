//! Faults (slow followers, silent members, broker crashes) and the end
//! of arrivals.

use super::{micros, Engine, Event};
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
        }
    }

    fn crash(&mut self, dead: u32) {
        self.brokers[dead as usize].alive = false;
        let alive: Vec<bool> = self.brokers.iter().map(|b| b.alive).collect();
        for p in 0..self.partitions.len() {
            let (moved, change) = self.partitions[p].remove_broker(dead, &alive, self.now);
            if change.isr_changed {
                self.stats.isr_shrinks += 1;
            }
            if moved {
                self.stats.leader_changes += 1;
                // Everything parked on the dead leader for this partition is
                // answered now, as NOT_LEADER, so clients move on at once.
                let key = p as u32;
                let broker = &self.brokers[dead as usize];
                let cancelled =
                    broker.produce.cancel_for_key(&key) + broker.fetch.cancel_for_key(&key);
                self.stats.cancelled += cancelled as u64;
            }
            self.hw_change(p as u32, change);
        }
        self.led_by = super::led_by(&self.partitions, self.cfg.brokers);
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
