//! Consumers: fetches sent to each leader, parked until `min.bytes` are
//! available or `fetch.max.wait.ms` passes, and their answers.

use super::{add_to_group, micros, park, Context, Engine, Event};
use crate::ops::DelayedFetch;
use crate::ops::FetchPart;
use crate::ops::PartStatus;
use crate::stats::Check;
use crate::stats::Kind;
use purgatory::Outcome;
use std::sync::Arc;
use std::time::Instant;

impl Engine {
    pub(super) fn consumer_send(&mut self, consumer: u32) {
        if self.stopping {
            return;
        }
        let c = consumer as usize;
        let mut groups: Vec<(u32, Vec<(u32, u64)>)> = Vec::new();
        let mut leaderless = false;
        for (i, &p) in self.consumers[c].partitions.iter().enumerate() {
            if self.consumers[c].in_flight[i] {
                continue;
            }
            let Some(leader) = self.partitions[p as usize].leader else {
                leaderless = true;
                continue;
            };
            add_to_group(&mut groups, leader, (p, self.consumers[c].offsets[i]));
        }
        for (broker, parts) in groups {
            for &(p, _) in &parts {
                if let Some(i) = self.consumers[c].index_of(p) {
                    self.consumers[c].in_flight[i] = true;
                }
            }
            let context = Context::Fetch {
                consumer,
                broker,
                parts,
                arrived_at: 0,
            };
            self.send(Kind::Fetch, context, |req| Event::FetchAtBroker { req });
        }
        if leaderless {
            let at = self.now + micros(self.cfg.retry_backoff);
            self.schedule(at, Event::ConsumerSend { consumer });
        }
    }

    pub(super) fn fetch_at_broker(&mut self, req: u64) {
        let Some(Context::Fetch { broker, parts, .. }) = self.contexts.get(&req) else {
            return;
        };
        let (broker, parts) = (*broker, parts.clone());
        self.park_fetch(req, broker, parts, false);
    }

    /// Parks a consumer's or follower's fetch at `broker`, or answers it at
    /// once when no partition is led there.
    pub(super) fn park_fetch(
        &mut self,
        req: u64,
        broker: u32,
        parts: Vec<(u32, u64)>,
        follower: bool,
    ) {
        if let Some(Context::Fetch { arrived_at, .. } | Context::Follower { arrived_at, .. }) =
            self.contexts.get_mut(&req)
        {
            *arrived_at = self.now;
        }
        let b = broker as usize;
        let alive = self.brokers[b].alive;
        let (mut valid, mut refused) = (Vec::new(), Vec::new());
        for (p, offset) in parts {
            let part = &self.partitions[p as usize];
            if alive && part.leader == Some(broker) {
                valid.push(FetchPart {
                    partition: p,
                    view: Arc::clone(&part.view),
                    offset,
                    epoch: part.epoch,
                });
            } else {
                refused.push((p, offset, 0, PartStatus::NotLeader));
            }
        }
        if !refused.is_empty() || valid.is_empty() {
            // Answer the whole request with the error; the client re-sends
            // every partition to whoever leads it now.
            let mut all = refused;
            all.extend(
                valid
                    .iter()
                    .map(|v| (v.partition, v.offset, 0, PartStatus::NotLeader)),
            );
            let at = self.clock.now();
            self.fetch_reply(req, Outcome::Cancelled, all, at);
            return;
        }
        let keys: Vec<u32> = valid.iter().map(|v| v.partition).collect();
        let op = DelayedFetch {
            req,
            follower,
            parts: valid,
            min_bytes: if follower {
                1
            } else {
                self.cfg.fetch_min_bytes
            },
            max_bytes: self.cfg.fetch_max_bytes,
            max_wait: if follower {
                self.cfg.replica_fetch_wait
            } else {
                self.cfg.fetch_max_wait
            },
            clock: Arc::clone(&self.clock),
            replies: self.replies_tx.clone(),
        };
        // Answered through its callback: the handle is not needed.
        park(
            &mut self.stats,
            &self.brokers[b].fetch,
            op,
            &keys,
            ("fetch", req),
        );
    }

    pub(super) fn fetch_reply(
        &mut self,
        req: u64,
        outcome: Outcome,
        parts: Vec<(u32, u64, u64, PartStatus)>,
        at: Instant,
    ) {
        let at = self.answer_came("fetch", req, outcome, at);
        let (broker, arrived_at, follower, max_wait, min_bytes) = match self.contexts.get(&req) {
            Some(Context::Fetch {
                broker, arrived_at, ..
            }) => (
                *broker,
                *arrived_at,
                None,
                self.cfg.fetch_max_wait,
                self.cfg.fetch_min_bytes,
            ),
            Some(Context::Follower {
                leader,
                arrived_at,
                follower,
                ..
            }) => (
                *leader,
                *arrived_at,
                Some(*follower),
                self.cfg.replica_fetch_wait,
                1,
            ),
            _ => return,
        };
        let bytes: u64 = parts.iter().map(|p| p.2).sum();
        let errored = parts.iter().any(|p| p.3 != PartStatus::Ok);
        if outcome == Outcome::Completed && !errored && bytes < min_bytes {
            self.stats.violation(
                Check::EarlyFetch,
                format!("fetch {req} answered early with {bytes} < min.bytes {min_bytes}"),
            );
        }
        let due = arrived_at + micros(max_wait);
        self.check_expiry("fetch", req, outcome, at, due, "max.wait");
        for &(p, offset, n, status) in &parts {
            let part = &mut self.partitions[p as usize];
            if status != PartStatus::Ok || n == 0 {
                continue;
            }
            match follower {
                // A consumer never sees data above the high watermark.
                None if offset + n > part.hw => {
                    let hw = part.hw;
                    self.stats.violation(
                        Check::EarlyFetch,
                        format!("fetch {req} read up to {} above HW {hw}", offset + n),
                    );
                }
                Some(f) if part.leader == Some(broker) => {
                    part.served_leo[f as usize] = part.leo[broker as usize]
                }
                _ => {}
            }
        }
        let delay = self.latency() + self.transfer(broker, bytes);
        let at = self.now.max(at) + delay;
        match follower {
            None => self.schedule(
                at,
                Event::FetchAnswer {
                    req,
                    parts,
                    outcome,
                },
            ),
            Some(_) => self.schedule(at, Event::FollowerData { req, parts }),
        }
    }

    pub(super) fn fetch_answer(
        &mut self,
        req: u64,
        parts: Vec<(u32, u64, u64, PartStatus)>,
        outcome: Outcome,
    ) {
        // A second answer was counted when the broker gave it.
        let Some(request) = self.stats.finish(req) else {
            return;
        };
        self.outstanding -= 1;
        let fetch = &mut self.stats.fetch;
        fetch.record_latency(self.now - request.sent_at);
        let errored = parts.iter().any(|p| p.3 != PartStatus::Ok);
        match (errored, outcome) {
            (true, _) => {
                fetch.errored += 1;
                let errors = parts.iter().filter(|p| p.3 != PartStatus::Ok);
                self.stats
                    .errored("fetch", errors.map(|p| p.3.error_name()));
            }
            (false, Outcome::Expired) => fetch.expired += 1,
            (false, _) => fetch.completed += 1,
        }
        let Some(Context::Fetch { consumer, .. }) = self.contexts.remove(&req) else {
            return;
        };
        let c = consumer as usize;
        for (p, offset, bytes, _) in parts {
            if let Some(i) = self.consumers[c].index_of(p) {
                self.consumers[c].in_flight[i] = false;
                if self.consumers[c].offsets[i] == offset {
                    self.consumers[c].offsets[i] += bytes;
                }
            }
        }
        let at = if errored {
            self.now + micros(self.cfg.retry_backoff)
        } else {
            self.now
        };
        self.schedule(at, Event::ConsumerSend { consumer });
    }
}
