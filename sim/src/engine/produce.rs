//! Producers: requests that arrive, the leader's append, `acks=all`
//! produces parked until the in-sync replicas have the data, and answers
//! back at the producer (retries included).

use super::{add_to_group, micros, park, Context, Engine, Event, MAX_RETRIES};
use crate::ops::DelayedProduce;
use crate::ops::PartStatus;
use crate::ops::ProducePart;
use crate::stats::Check;
use crate::stats::Kind;
use purgatory::Outcome;
use std::sync::Arc;
use std::time::Instant;

/// The largest batch drawn: the log-normal's far tail is cut there.
const MAX_BATCH: f64 = crate::limits::MAX_BATCH_BYTES as f64;

impl Engine {
    pub(super) fn produce_arrival(&mut self) {
        if self.stopping {
            return;
        }
        self.stats.produce_arrivals += 1;
        // The next arrival is due a gap after this one was due, not after it
        // was handled: a real-time run that wakes late catches up instead
        // of falling behind its rate.
        // Kept in fractions of a µs: rounding each gap would bias the rate.
        self.next_arrival += self.rng.exponential(1e6 / self.cfg.produce_rate);
        self.schedule(self.next_arrival as u64, Event::ProduceArrival);
        // A producer sends one request per broker, for partitions it leads.
        let leaders: Vec<u32> = (0..self.cfg.brokers)
            .filter(|&b| self.brokers[b as usize].alive && !self.led_by[b as usize].is_empty())
            .collect();
        if leaders.is_empty() {
            return;
        }
        let broker = leaders[self.rng.below(leaders.len() as u64) as usize];
        let mut led = self.led_by[broker as usize].clone();
        let k = 1 + self
            .rng
            .below(u64::from(self.cfg.partitions_per_produce).min(led.len() as u64))
            as usize;
        for i in 0..k {
            let j = i + self.rng.below((led.len() - i) as u64) as usize;
            led.swap(i, j);
        }
        let batches = led[..k]
            .iter()
            .map(|&p| {
                (
                    p,
                    self.batch_bytes.sample(&mut self.rng).clamp(1.0, MAX_BATCH) as u64,
                )
            })
            .collect();
        let acks_all = self.rng.chance(self.cfg.acks_all_fraction);
        self.send_produce(batches, acks_all, 0);
    }

    pub(super) fn send_produce(&mut self, batches: Vec<(u32, u64)>, acks_all: bool, attempt: u32) {
        // Retries go to whoever leads each partition now, one request per leader.
        let mut by_leader: Vec<(u32, Vec<(u32, u64)>)> = Vec::new();
        for (p, bytes) in batches {
            let leader = self.partitions[p as usize].leader.unwrap_or(0);
            add_to_group(&mut by_leader, leader, (p, bytes));
        }
        for (broker, batches) in by_leader {
            if attempt > 0 {
                self.stats.retries += 1;
            }
            let context = Context::Produce {
                broker,
                acks_all,
                batches,
                attempt,
                early: Vec::new(),
                arrived_at: 0,
            };
            self.send(Kind::Produce, context, |req| Event::ProduceAtBroker { req });
        }
    }

    pub(super) fn produce_at_broker(&mut self, req: u64) {
        let Some(Context::Produce {
            broker,
            acks_all,
            batches,
            ..
        }) = self.contexts.get(&req)
        else {
            return;
        };
        let (broker, acks_all, batches) = (*broker, *acks_all, batches.clone());
        let b = broker as usize;
        let mut early = Vec::new();
        let mut waiting = Vec::new();
        for (p, bytes) in batches {
            let alive = self.brokers[b].alive;
            let part = &mut self.partitions[p as usize];
            if !alive || part.leader != Some(broker) {
                early.push((p, PartStatus::NotLeader));
            } else if acks_all && (part.isr.len() as u32) < self.cfg.min_insync {
                early.push((p, PartStatus::NotEnoughReplicas));
            } else {
                let (required, change) = part.append(bytes);
                if acks_all {
                    waiting.push(ProducePart {
                        partition: p,
                        view: Arc::clone(&part.view),
                        required,
                        epoch: part.epoch,
                    });
                } else {
                    early.push((p, PartStatus::Ok));
                }
                // Followers long-polling this partition have data now.
                self.brokers[b].fetch.check_and_complete(&p);
                self.hw_change(p, change);
            }
        }
        if let Some(Context::Produce {
            early: e,
            arrived_at,
            ..
        }) = self.contexts.get_mut(&req)
        {
            *e = early.clone();
            *arrived_at = self.now;
        }
        if waiting.is_empty() {
            if !acks_all {
                self.stats.acks_one += 1;
            }
            self.stats.answered(req);
            let at = self.now + self.latency();
            self.schedule(
                at,
                Event::ProduceAnswer {
                    req,
                    statuses: early,
                },
            );
            return;
        }
        let keys: Vec<u32> = waiting.iter().map(|w| w.partition).collect();
        let op = DelayedProduce {
            req,
            parts: waiting,
            min_insync: self.cfg.min_insync,
            timeout: self.cfg.produce_timeout,
            clock: Arc::clone(&self.clock),
            replies: self.replies_tx.clone(),
        };
        // Answered through its callback: the handle is not needed.
        park(
            &mut self.stats,
            &self.brokers[b].produce,
            op,
            &keys,
            ("produce", req),
        );
    }

    pub(super) fn produce_reply(
        &mut self,
        req: u64,
        outcome: Outcome,
        parts: Vec<(u32, u64, PartStatus)>,
        at: Instant,
    ) {
        let at = self.answer_came("produce", req, outcome, at);
        let Some(Context::Produce {
            early, arrived_at, ..
        }) = self.contexts.get(&req)
        else {
            return;
        };
        let (mut statuses, arrived_at) = (early.clone(), *arrived_at);
        let due = arrived_at + micros(self.cfg.produce_timeout);
        self.check_expiry("produce", req, outcome, at, due, "its timeout");
        for (p, required, status) in parts {
            let part = &self.partitions[p as usize];
            if status == PartStatus::Ok && part.hw < required {
                let hw = part.hw;
                self.stats.violation(Check::AckedBelowHw, format!("produce {req} acknowledged at HW {hw} < offset {required} on partition {p}"));
            }
            // Counted on the replicas' logs, not on the ISR the operation
            // read. A leader change since cut no log below the new
            // leader's end, which is at or above the high watermark.
            let holding = part.leo.iter().filter(|&&leo| leo >= required).count();
            let min_insync = self.cfg.min_insync as usize;
            if status == PartStatus::Ok && holding < min_insync {
                self.stats.violation(Check::AckedBelowHw, format!("produce {req} acknowledged on partition {p} with {holding} replicas holding offset {required}, min.insync {min_insync}"));
            }
            statuses.push((p, status));
        }
        let latency = self.latency();
        self.schedule(
            self.now.max(at) + latency,
            Event::ProduceAnswer { req, statuses },
        );
    }

    pub(super) fn produce_answer(&mut self, req: u64, statuses: Vec<(u32, PartStatus)>) {
        // A second answer was counted when the broker gave it.
        let Some(request) = self.stats.finish(req) else {
            return;
        };
        self.outstanding -= 1;
        let produce = &mut self.stats.produce;
        produce.record_latency(self.now - request.sent_at);
        if statuses.iter().all(|s| s.1 == PartStatus::Ok) {
            produce.completed += 1;
        } else if statuses.iter().any(|s| s.1 == PartStatus::TimedOut) {
            produce.expired += 1;
        } else {
            produce.errored += 1;
            let errors = statuses.iter().filter(|s| s.1 != PartStatus::Ok);
            self.stats
                .errored("produce", errors.map(|s| s.1.error_name()));
        }
        let Some(Context::Produce {
            batches,
            acks_all,
            attempt,
            ..
        }) = self.contexts.remove(&req)
        else {
            return;
        };
        let retriable = |p: u32| {
            statuses.iter().any(|&(q, s)| {
                q == p
                    && matches!(
                        s,
                        PartStatus::NotLeader
                            | PartStatus::NotEnoughReplicas
                            | PartStatus::NotEnoughReplicasAfterAppend
                    )
            })
        };
        let retry: Vec<(u32, u64)> = batches.into_iter().filter(|&(p, _)| retriable(p)).collect();
        if !retry.is_empty() && attempt < MAX_RETRIES {
            let attempt = attempt + 1;
            let at = self.now + micros(self.cfg.retry_backoff);
            self.schedule(
                at,
                Event::RetryProduce {
                    batches: retry,
                    acks_all,
                    attempt,
                },
            );
        }
    }
}
