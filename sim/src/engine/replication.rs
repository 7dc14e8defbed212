//! Followers: fetches from each leader, the data they apply, the high
//! watermark that follows, and the leaders' in-sync replica checks.

use super::{add_to_group, micros, Context, Engine, Event, ISR_CHECK_EVERY};
use crate::cluster::Change;
use crate::ops::PartStatus;
use crate::stats::Kind;
use purgatory::Outcome;

impl Engine {
    pub(super) fn follower_send(&mut self, follower: u32) {
        let f = follower as usize;
        if !self.brokers[f].alive || (self.stopping && self.outstanding == 0) {
            return;
        }
        let mut groups: Vec<(u32, Vec<(u32, u64)>)> = Vec::new();
        for &p in &self.replica_of[f] {
            let part = &self.partitions[p as usize];
            let Some(leader) = part.leader else { continue };
            if leader == follower || self.follower_in_flight[f][p as usize] {
                continue;
            }
            add_to_group(&mut groups, leader, (p, part.leo[f]));
        }
        for (leader, parts) in groups {
            for &(p, _) in &parts {
                self.follower_in_flight[f][p as usize] = true;
            }
            let context = Context::Follower {
                follower,
                leader,
                parts,
                arrived_at: 0,
            };
            self.send(Kind::FollowerFetch, context, |req| {
                Event::FollowerFetchAtLeader { req }
            });
        }
    }

    pub(super) fn follower_fetch_at_leader(&mut self, req: u64) {
        let Some(Context::Follower {
            follower,
            leader,
            parts,
            ..
        }) = self.contexts.get(&req)
        else {
            return;
        };
        let (follower, leader, parts) = (*follower, *leader, parts.clone());
        if !self.brokers[follower as usize].alive {
            // Sent just before its broker died: it must not put the dead
            // broker back in the ISR. Answered with an error, like any
            // request the leader refuses.
            let refused = parts
                .iter()
                .map(|&(p, o)| (p, o, 0, PartStatus::NotLeader))
                .collect();
            let at = self.clock.now();
            self.fetch_reply(req, Outcome::Cancelled, refused, at);
            return;
        }
        if self.brokers[leader as usize].alive {
            for &(p, offset) in &parts {
                let part = &mut self.partitions[p as usize];
                if part.leader == Some(leader) {
                    // A fetch sent before its broker crashed and restarted
                    // may name an offset its log was cut below since.
                    let offset = offset.min(part.leo[follower as usize]);
                    let change = part.follower_fetched(follower, offset, self.now);
                    if change.isr_changed {
                        self.stats.isr_expands += 1;
                    }
                    self.hw_change(p, change);
                }
            }
        }
        self.park_fetch(req, leader, parts, true);
    }

    pub(super) fn follower_data(&mut self, req: u64, parts: Vec<(u32, u64, u64, PartStatus)>) {
        let Some(&Context::Follower { follower, .. }) = self.contexts.get(&req) else {
            return;
        };
        // The follower has the answer; what it does with it is not timed.
        let Some(request) = self.stats.finish(req) else {
            return;
        };
        self.stats
            .follower_fetch
            .record_latency(self.now - request.sent_at);
        let f = follower as usize;
        let (slow_until, delay) = self.slow_until[f];
        if self.now < slow_until {
            let at = self.now + delay;
            self.schedule(at, Event::FollowerApply { req, parts });
        } else {
            self.follower_apply(req, parts);
        }
    }

    pub(super) fn follower_apply(&mut self, req: u64, parts: Vec<(u32, u64, u64, PartStatus)>) {
        let Some(Context::Follower { follower, .. }) = self.contexts.remove(&req) else {
            return;
        };
        let f = follower as usize;
        let mut errors = Vec::new();
        for (p, offset, bytes, status) in parts {
            self.follower_in_flight[f][p as usize] = false;
            let part = &mut self.partitions[p as usize];
            if status != PartStatus::Ok {
                errors.push(status.error_name());
            }
            if status == PartStatus::Ok && part.leader != Some(follower) && part.leo[f] == offset {
                part.leo[f] += bytes;
            }
        }
        let errored = !errors.is_empty();
        if errored {
            self.stats.follower_fetch.errored += 1;
            self.stats.errored("follower fetch", errors);
        } else {
            self.stats.follower_fetch.completed += 1;
        }
        if !self.brokers[f].alive {
            return;
        }
        let at = if errored {
            self.now + micros(self.cfg.retry_backoff)
        } else {
            self.now
        };
        self.schedule(at, Event::FollowerSend { follower });
    }

    /// After a partition's HW or ISR moved, parked produces and consumer
    /// fetches on its leader may complete: Kafka's `checkAndComplete`.
    pub(super) fn hw_change(&mut self, p: u32, change: Change) {
        if !change.hw_moved && !change.isr_changed {
            return;
        }
        let Some(leader) = self.partitions[p as usize].leader else {
            return;
        };
        let broker = &self.brokers[leader as usize];
        broker.produce.check_and_complete(&p);
        if change.hw_moved {
            broker.fetch.check_and_complete(&p);
        }
    }

    pub(super) fn isr_check(&mut self) {
        let lag_max = micros(self.cfg.replica_lag_max);
        for p in 0..self.partitions.len() {
            if self.partitions[p].leader.is_none() {
                continue;
            }
            let change = self.partitions[p].shrink_isr(self.now, lag_max);
            if change.isr_changed {
                self.stats.isr_shrinks += 1;
            }
            self.hw_change(p as u32, change);
        }
        self.elect_preferred_leaders();
        if !(self.stopping && self.outstanding == 0) {
            self.schedule(self.now + ISR_CHECK_EVERY, Event::IsrCheck);
        }
    }
}
