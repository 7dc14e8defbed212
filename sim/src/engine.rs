//! The discrete-event engine: brokers with their purgatories, producers,
//! consumers, follower replication, group members and faults, driven in
//! simulated time (a manual clock, deterministic per seed) or in real time
//! (the system clock and the purgatories' own timer threads).

use crate::cluster::{Change, Partition};
use crate::config::{ClockChoice, Config, Fault, TimerChoice};
use crate::ops::{
    DelayedFetch, DelayedHeartbeat, DelayedProduce, FetchPart, PartStatus, ProducePart, Reply,
};
use crate::rng::{LogNormal, Rng};
use crate::stats::{Check, Kind, Stats};
use crossbeam_channel::{Receiver, Sender};
use purgatory::{Clock, Delayed, Driver, ManualClock, Outcome, Purgatory, SystemClock, TimerKind};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Produce retries after an error, at most.
const MAX_RETRIES: u32 = 5;
/// How often leaders look for lagging followers (µs).
const ISR_CHECK_EVERY: u64 = 1_000_000;

/// Something that happens at a point in time.
enum Event {
    ProduceArrival,
    ProduceAtBroker {
        req: u64,
    },
    ProduceAnswer {
        req: u64,
        statuses: Vec<(u32, PartStatus)>,
    },
    RetryProduce {
        batches: Vec<(u32, u64)>,
        acks_all: bool,
        attempt: u32,
    },
    ConsumerSend {
        consumer: u32,
    },
    FetchAtBroker {
        req: u64,
    },
    FetchAnswer {
        req: u64,
        parts: Vec<(u32, u64, u64, PartStatus)>,
        outcome: Outcome,
    },
    FollowerSend {
        follower: u32,
    },
    FollowerFetchAtLeader {
        req: u64,
    },
    FollowerData {
        req: u64,
        parts: Vec<(u32, u64, u64, PartStatus)>,
    },
    FollowerApply {
        req: u64,
        parts: Vec<(u32, u64, u64, PartStatus)>,
    },
    IsrCheck,
    Heartbeat {
        member: u32,
    },
    Fault(Fault),
    EndOfArrivals,
}

struct Scheduled {
    at: u64,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// What a tracked request was about, to act on its answer.
enum Context {
    Produce {
        broker: u32,
        acks_all: bool,
        batches: Vec<(u32, u64)>,
        attempt: u32,
        /// Partitions answered at arrival (refused, or `acks=1`).
        early: Vec<(u32, PartStatus)>,
        arrived_at: u64,
    },
    Fetch {
        consumer: u32,
        broker: u32,
        parts: Vec<(u32, u64)>,
        arrived_at: u64,
    },
    Follower {
        follower: u32,
        leader: u32,
        parts: Vec<(u32, u64)>,
        arrived_at: u64,
    },
}

struct Broker {
    alive: bool,
    produce: Purgatory<u32, DelayedProduce>,
    fetch: Purgatory<u32, DelayedFetch>,
    /// Only broker 0, the group coordinator, has members.
    sessions: Purgatory<u32, DelayedHeartbeat>,
    /// When this broker's outbound link is free again (µs).
    link_free_at: u64,
}

struct Consumer {
    partitions: Vec<u32>,
    offsets: Vec<u64>,
    in_flight: Vec<bool>,
}

struct Member {
    session: Option<Delayed<u32, DelayedHeartbeat>>,
    last_heartbeat: u64,
    silent: bool,
    joins: u32,
    ends: u32,
}

/// Called now and then in real-time runs with (elapsed, duration, stats).
pub type Progress<'a> = &'a mut dyn FnMut(Duration, Duration, &Stats);

/// A run of the cluster.
pub struct Engine {
    cfg: Config,
    rng: Rng,
    batch_bytes: LogNormal,
    clock: Arc<dyn Clock>,
    manual: Option<ManualClock>,
    start: Instant,
    now: u64,
    queue: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    replies_tx: Sender<Reply>,
    replies: Receiver<Reply>,
    brokers: Vec<Broker>,
    partitions: Vec<Partition>,
    consumers: Vec<Consumer>,
    /// Per broker, per partition: a follower fetch is in flight.
    follower_in_flight: Vec<Vec<bool>>,
    /// Per broker: applying fetched data is slowed until then (µs), by this much.
    slow_until: Vec<(u64, u64)>,
    members: Vec<Member>,
    contexts: Vec<Context>,
    /// Client requests (produce and consumer fetch) not yet answered at the client.
    outstanding: u64,
    stopping: bool,
    stats: Stats,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Engine {
    /// Builds the cluster of `cfg` (which must have passed `validate`).
    ///
    /// # Errors
    /// A purgatory that could not start (its threads, in real time).
    pub fn new(cfg: Config) -> Result<Engine, String> {
        let (clock, manual): (Arc<dyn Clock>, Option<ManualClock>) = match cfg.clock {
            ClockChoice::Sim => {
                let manual = ManualClock::new();
                (Arc::new(manual.clone()), Some(manual))
            }
            ClockChoice::Real => (Arc::new(SystemClock), None),
        };
        let start = clock.now();
        let timer = match cfg.timer {
            TimerChoice::Wheel => TimerKind::Wheel,
            TimerChoice::DelayQueue => TimerKind::DelayQueue {
                purge_interval: 1000,
            },
        };
        let driver = match cfg.clock {
            ClockChoice::Sim => Driver::Manual,
            ClockChoice::Real => Driver::Thread {
                expiration_threads: 1,
            },
        };
        fn build<O: purgatory::DelayedOperation>(
            name: String,
            timer: TimerKind,
            driver: Driver,
            clock: &Arc<dyn Clock>,
        ) -> Result<Purgatory<u32, O>, String> {
            Purgatory::builder(name)
                .timer(timer)
                .driver(driver)
                .clock(ClockRef(Arc::clone(clock)))
                .build()
                .map_err(|e| e.to_string())
        }
        let mut brokers = Vec::new();
        for b in 0..cfg.brokers {
            brokers.push(Broker {
                alive: true,
                produce: build(format!("Produce-{b}"), timer, driver, &clock)?,
                fetch: build(format!("Fetch-{b}"), timer, driver, &clock)?,
                sessions: build(format!("Heartbeat-{b}"), timer, driver, &clock)?,
                link_free_at: 0,
            });
        }
        let n = cfg.brokers;
        let partitions: Vec<Partition> = (0..cfg.partitions)
            .map(|p| {
                let replicas = (0..cfg.replication_factor).map(|i| (p + i) % n).collect();
                Partition::new(p, replicas, n)
            })
            .collect();
        let consumers = (0..cfg.consumers)
            .map(|c| {
                let owned: Vec<u32> = (0..cfg.partitions)
                    .filter(|p| p % cfg.consumers == c)
                    .collect();
                Consumer {
                    offsets: vec![0; owned.len()],
                    in_flight: vec![false; owned.len()],
                    partitions: owned,
                }
            })
            .collect();
        let members = (0..cfg.members)
            .map(|_| Member {
                session: None,
                last_heartbeat: 0,
                silent: false,
                joins: 0,
                ends: 0,
            })
            .collect();
        let (replies_tx, replies) = crossbeam_channel::unbounded();
        Ok(Engine {
            rng: Rng::new(cfg.seed),
            batch_bytes: LogNormal::from_percentiles(cfg.batch_bytes_p50, cfg.batch_bytes_p75),
            follower_in_flight: vec![vec![false; cfg.partitions as usize]; n as usize],
            slow_until: vec![(0, 0); n as usize],
            clock,
            manual,
            start,
            now: 0,
            queue: BinaryHeap::new(),
            seq: 0,
            replies_tx,
            replies,
            brokers,
            partitions,
            consumers,
            members,
            contexts: Vec::new(),
            outstanding: 0,
            stopping: false,
            stats: Stats::default(),
            cfg,
        })
    }

    /// Runs to the end: arrivals for the configured duration, then every
    /// in-flight request is drained. `progress` is called in real time.
    pub fn run(mut self, progress: Option<Progress<'_>>) -> Stats {
        self.schedule_start();
        match self.cfg.clock {
            ClockChoice::Sim => self.run_simulated(),
            ClockChoice::Real => self.run_real(progress),
        }
        self.finish()
    }

    fn schedule_start(&mut self) {
        if self.cfg.produce_rate > 0.0 {
            self.schedule(0, Event::ProduceArrival);
        }
        for c in 0..self.cfg.consumers {
            self.schedule(0, Event::ConsumerSend { consumer: c });
        }
        for f in 0..self.cfg.brokers {
            self.schedule(0, Event::FollowerSend { follower: f });
        }
        for m in 0..self.cfg.members {
            let at = self.rng.below(micros(self.cfg.heartbeat_interval).max(1));
            self.schedule(at, Event::Heartbeat { member: m });
        }
        self.schedule(ISR_CHECK_EVERY, Event::IsrCheck);
        for fault in self.cfg.faults.clone() {
            let at = match &fault {
                Fault::SlowFollower { from, .. } => micros(*from),
                Fault::Crash { at, .. } | Fault::StopHeartbeats { at, .. } => micros(*at),
            };
            self.schedule(at, Event::Fault(fault));
        }
        self.schedule(micros(self.cfg.duration), Event::EndOfArrivals);
    }

    /// The simulated loop: jump to the next event or purgatory deadline.
    fn run_simulated(&mut self) {
        // Nothing in a sane run takes this long to drain after arrivals stop.
        let give_up = micros(self.cfg.duration)
            + 2 * micros(self.cfg.produce_timeout.max(self.cfg.session_timeout))
            + 120_000_000;
        loop {
            let next_event = self.queue.peek().map(|s| s.0.at);
            let next_expiry = self.next_expiration();
            let Some(t) = [next_event, next_expiry].into_iter().flatten().min() else {
                break;
            };
            if t > give_up {
                self.stats.violation(
                    Check::ExactlyOnce,
                    format!("the run did not drain by {} s", give_up / 1_000_000),
                );
                break;
            }
            self.set_now(t.max(self.now));
            for b in 0..self.brokers.len() {
                let broker = &self.brokers[b];
                broker.produce.advance_clock();
                broker.fetch.advance_clock();
                broker.sessions.advance_clock();
            }
            self.drain_replies();
            while self.queue.peek().is_some_and(|s| s.0.at <= self.now) {
                let Some(Reverse(next)) = self.queue.pop() else {
                    break;
                };
                self.handle(next.event);
                self.drain_replies();
            }
            self.sample_sizes();
        }
    }

    /// The real-time loop: sleep until the next event or the next answer.
    fn run_real(&mut self, mut progress: Option<Progress<'_>>) {
        let mut last_progress = Instant::now();
        let duration = self.cfg.duration;
        loop {
            self.now = micros(self.clock.now().saturating_duration_since(self.start));
            self.drain_replies();
            if self.queue.peek().is_some_and(|s| s.0.at <= self.now) {
                let Some(Reverse(next)) = self.queue.pop() else {
                    break;
                };
                self.handle(next.event);
                self.drain_replies();
                self.sample_sizes();
                continue;
            }
            if let Some(report) = progress.as_mut() {
                if last_progress.elapsed() >= Duration::from_millis(100) {
                    last_progress = Instant::now();
                    report(Duration::from_micros(self.now), duration, &self.stats);
                }
            }
            let pending: usize = self
                .brokers
                .iter()
                .map(|b| b.produce.delayed() + b.fetch.delayed() + b.sessions.delayed())
                .sum();
            if self.queue.is_empty() && pending == 0 {
                break;
            }
            let wait = self
                .queue
                .peek()
                .map_or(Duration::from_millis(20), |s| {
                    Duration::from_micros(s.0.at.saturating_sub(self.now))
                })
                .min(Duration::from_millis(20));
            if let Ok(reply) = self.replies.recv_timeout(wait) {
                self.now = micros(self.clock.now().saturating_duration_since(self.start));
                self.on_reply(reply);
            }
        }
    }

    fn finish(mut self) -> Stats {
        self.stats.elapsed_us = self.now;
        let (watched, delayed) = self.sizes();
        self.stats.watched_at_end = watched;
        self.stats.delayed_at_end = delayed;
        if watched != 0 || delayed != 0 {
            let what =
                format!("purgatories not empty at the end: watched {watched}, delayed {delayed}");
            self.stats.violation(Check::EmptyAtEnd, what);
        }
        for broker in &self.brokers {
            broker.produce.shutdown();
            broker.fetch.shutdown();
            broker.sessions.shutdown();
        }
        // Anything answered by the shutdown was left pending: already counted above.
        while let Ok(reply) = self.replies.try_recv() {
            self.on_reply(reply);
        }
        let mut unbalanced = Vec::new();
        for (m, member) in self.members.iter().enumerate() {
            if member.joins != member.ends {
                let what = format!(
                    "member {m} joined {} times but its session ended {} times",
                    member.joins, member.ends
                );
                unbalanced.push(what);
            }
        }
        for what in unbalanced {
            self.stats.violation(Check::ExactlyOnce, what);
        }
        let (lost, duplicated) = (self.stats.lost(), self.stats.duplicated());
        if lost > 0 {
            self.stats.violation(
                Check::ExactlyOnce,
                format!("{lost} requests never answered"),
            );
        }
        if duplicated > 0 {
            self.stats.violation(
                Check::ExactlyOnce,
                format!("{duplicated} requests answered more than once"),
            );
        }
        self.stats
    }

    fn set_now(&mut self, t: u64) {
        self.now = t;
        if let Some(manual) = &self.manual {
            manual.advance_to(self.start + Duration::from_micros(t));
        }
    }

    fn schedule(&mut self, at: u64, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            event,
        }));
    }

    /// The next deadline of a pending operation. A purgatory with nothing
    /// pending is skipped: the DelayQueue baseline still holds completed
    /// entries, and waking for those would only stretch the run.
    fn next_expiration(&self) -> Option<u64> {
        fn next<O: purgatory::DelayedOperation>(p: &Purgatory<u32, O>) -> Option<Instant> {
            (p.delayed() > 0).then(|| p.next_expiration()).flatten()
        }
        self.brokers
            .iter()
            .flat_map(|b| [next(&b.produce), next(&b.fetch), next(&b.sessions)])
            .flatten()
            .map(|at| micros(at.saturating_duration_since(self.start)))
            .min()
    }

    fn sizes(&self) -> (usize, usize) {
        self.brokers.iter().fold((0, 0), |(w, d), b| {
            (
                w + b.produce.watched() + b.fetch.watched() + b.sessions.watched(),
                d + b.produce.delayed() + b.fetch.delayed() + b.sessions.delayed(),
            )
        })
    }

    fn sample_sizes(&mut self) {
        let (w, d) = self.sizes();
        self.stats.max_watched = self.stats.max_watched.max(w);
        self.stats.max_delayed = self.stats.max_delayed.max(d);
    }

    fn drain_replies(&mut self) {
        while let Ok(reply) = self.replies.try_recv() {
            self.on_reply(reply);
        }
    }

    fn at_micros(&self, at: Instant) -> u64 {
        micros(at.saturating_duration_since(self.start))
    }

    /// Time for `bytes` to leave `broker`'s link, queued behind what is already on it.
    fn transfer(&mut self, broker: u32, bytes: u64) -> u64 {
        let link = &mut self.brokers[broker as usize].link_free_at;
        let begin = (*link).max(self.now);
        let done = begin + (bytes as f64 * 1e6 / self.cfg.bandwidth) as u64;
        *link = done;
        done - self.now
    }

    /// Opens a tracked request, records what it is about, and schedules its
    /// arrival at the broker one network latency from now. Client requests
    /// (not followers') count as outstanding until the client has the answer.
    fn send(&mut self, kind: Kind, context: Context, arrive: impl FnOnce(u64) -> Event) {
        let req = self.stats.open(kind, self.now);
        self.contexts.push(context);
        if kind != Kind::FollowerFetch {
            self.outstanding += 1;
        }
        let at = self.now + self.latency();
        self.schedule(at, arrive(req));
    }

    fn latency(&self) -> u64 {
        micros(self.cfg.latency)
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::ProduceArrival => self.produce_arrival(),
            Event::ProduceAtBroker { req } => self.produce_at_broker(req),
            Event::ProduceAnswer { req, statuses } => self.produce_answer(req, statuses),
            Event::RetryProduce {
                batches,
                acks_all,
                attempt,
            } => self.send_produce(batches, acks_all, attempt),
            Event::ConsumerSend { consumer } => self.consumer_send(consumer),
            Event::FetchAtBroker { req } => self.fetch_at_broker(req),
            Event::FetchAnswer {
                req,
                parts,
                outcome,
            } => self.fetch_answer(req, parts, outcome),
            Event::FollowerSend { follower } => self.follower_send(follower),
            Event::FollowerFetchAtLeader { req } => self.follower_fetch_at_leader(req),
            Event::FollowerData { req, parts } => self.follower_data(req, parts),
            Event::FollowerApply { req, parts } => self.follower_apply(req, parts),
            Event::IsrCheck => self.isr_check(),
            Event::Heartbeat { member } => self.heartbeat(member),
            Event::Fault(fault) => self.fault(fault),
            Event::EndOfArrivals => self.end_of_arrivals(),
        }
    }

    fn on_reply(&mut self, reply: Reply) {
        match reply {
            Reply::Produce {
                req,
                outcome,
                parts,
                at,
            } => self.produce_reply(req, outcome, parts, at),
            Reply::Fetch {
                req,
                outcome,
                parts,
                at,
            } => self.fetch_reply(req, outcome, parts, at),
            Reply::Session {
                member,
                outcome,
                at,
            } => self.session_reply(member, outcome, at),
        }
    }

    // ---- producers -------------------------------------------------------

    fn produce_arrival(&mut self) {
        if self.stopping {
            return;
        }
        let gap = self.rng.exponential(1e6 / self.cfg.produce_rate) as u64;
        self.schedule(self.now + gap.max(1), Event::ProduceArrival);
        // A producer sends one request per broker, for partitions it leads.
        let leaders: Vec<u32> = (0..self.cfg.brokers)
            .filter(|&b| {
                self.brokers[b as usize].alive
                    && self.partitions.iter().any(|p| p.leader == Some(b))
            })
            .collect();
        if leaders.is_empty() {
            return;
        }
        let broker = leaders[self.rng.below(leaders.len() as u64) as usize];
        let mut led: Vec<u32> = self
            .partitions
            .iter()
            .filter(|p| p.leader == Some(broker))
            .map(|p| p.id)
            .collect();
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
            .map(|&p| (p, self.batch_bytes.sample(&mut self.rng).max(1.0) as u64))
            .collect();
        let acks_all = self.rng.chance(self.cfg.acks_all_fraction);
        self.send_produce(batches, acks_all, 0);
    }

    fn send_produce(&mut self, batches: Vec<(u32, u64)>, acks_all: bool, attempt: u32) {
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

    fn produce_at_broker(&mut self, req: u64) {
        let Context::Produce {
            broker,
            acks_all,
            batches,
            ..
        } = &self.contexts[req as usize]
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
        if let Context::Produce {
            early: e,
            arrived_at,
            ..
        } = &mut self.contexts[req as usize]
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
        if self.brokers[b]
            .produce
            .try_complete_else_watch(op, &keys)
            .is_err()
        {
            self.stats.violation(
                Check::ExactlyOnce,
                format!("produce {req} refused by a running purgatory"),
            );
        }
    }

    fn produce_reply(
        &mut self,
        req: u64,
        outcome: Outcome,
        parts: Vec<(u32, u64, PartStatus)>,
        at: Instant,
    ) {
        let at = self.at_micros(at);
        self.stats.answered(req);
        if outcome == Outcome::Shutdown {
            self.stats.violation(
                Check::EmptyAtEnd,
                format!("produce {req} was still pending at the end"),
            );
        }
        let Context::Produce {
            early, arrived_at, ..
        } = &self.contexts[req as usize]
        else {
            return;
        };
        let (mut statuses, arrived_at) = (early.clone(), *arrived_at);
        if outcome == Outcome::Expired && at < arrived_at + micros(self.cfg.produce_timeout) {
            self.stats.violation(
                Check::EarlyExpiry,
                format!(
                    "produce {req} expired {} µs before its timeout",
                    arrived_at + micros(self.cfg.produce_timeout) - at
                ),
            );
        }
        for (p, required, status) in parts {
            if status == PartStatus::Ok && self.partitions[p as usize].hw < required {
                let hw = self.partitions[p as usize].hw;
                self.stats.violation(Check::AckedBelowHw, format!("produce {req} acknowledged at HW {hw} < offset {required} on partition {p}"));
            }
            statuses.push((p, status));
        }
        let latency = self.latency();
        self.schedule(
            self.now.max(at) + latency,
            Event::ProduceAnswer { req, statuses },
        );
    }

    fn produce_answer(&mut self, req: u64, statuses: Vec<(u32, PartStatus)>) {
        self.outstanding -= 1;
        let sent_at = self.stats.requests[req as usize].sent_at;
        let produce = &mut self.stats.produce;
        produce.record_latency(self.now - sent_at);
        if statuses.iter().all(|s| s.1 == PartStatus::Ok) {
            produce.completed += 1;
        } else if statuses.iter().any(|s| s.1 == PartStatus::TimedOut) {
            produce.expired += 1;
        } else {
            produce.errored += 1;
        }
        let Context::Produce {
            batches,
            acks_all,
            attempt,
            ..
        } = &self.contexts[req as usize]
        else {
            return;
        };
        let retriable = |p: u32| {
            statuses.iter().any(|&(q, s)| {
                q == p && matches!(s, PartStatus::NotLeader | PartStatus::NotEnoughReplicas)
            })
        };
        let retry: Vec<(u32, u64)> = batches
            .iter()
            .copied()
            .filter(|&(p, _)| retriable(p))
            .collect();
        if !retry.is_empty() && *attempt < MAX_RETRIES {
            let (acks_all, attempt) = (*acks_all, *attempt + 1);
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

    // ---- consumers -------------------------------------------------------

    fn consumer_send(&mut self, consumer: u32) {
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
                let i = self.consumers[c]
                    .partitions
                    .iter()
                    .position(|&x| x == p)
                    .unwrap_or(0);
                self.consumers[c].in_flight[i] = true;
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

    fn fetch_at_broker(&mut self, req: u64) {
        let Context::Fetch { broker, parts, .. } = &self.contexts[req as usize] else {
            return;
        };
        let (broker, parts) = (*broker, parts.clone());
        self.park_fetch(req, broker, parts, false);
    }

    /// Parks a consumer's or follower's fetch at `broker`, or answers it at
    /// once when no partition is led there.
    fn park_fetch(&mut self, req: u64, broker: u32, parts: Vec<(u32, u64)>, follower: bool) {
        match &mut self.contexts[req as usize] {
            Context::Fetch { arrived_at, .. } | Context::Follower { arrived_at, .. } => {
                *arrived_at = self.now
            }
            Context::Produce { .. } => {}
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
        if self.brokers[b]
            .fetch
            .try_complete_else_watch(op, &keys)
            .is_err()
        {
            self.stats.violation(
                Check::ExactlyOnce,
                format!("fetch {req} refused by a running purgatory"),
            );
        }
    }

    fn fetch_reply(
        &mut self,
        req: u64,
        outcome: Outcome,
        parts: Vec<(u32, u64, u64, PartStatus)>,
        at: Instant,
    ) {
        let at = self.at_micros(at);
        self.stats.answered(req);
        if outcome == Outcome::Shutdown {
            self.stats.violation(
                Check::EmptyAtEnd,
                format!("fetch {req} was still pending at the end"),
            );
        }
        let (broker, arrived_at, follower, max_wait, min_bytes) = match &self.contexts[req as usize]
        {
            Context::Fetch {
                broker, arrived_at, ..
            } => (
                *broker,
                *arrived_at,
                None,
                self.cfg.fetch_max_wait,
                self.cfg.fetch_min_bytes,
            ),
            Context::Follower {
                leader,
                arrived_at,
                follower,
                ..
            } => (
                *leader,
                *arrived_at,
                Some(*follower),
                self.cfg.replica_fetch_wait,
                1,
            ),
            Context::Produce { .. } => return,
        };
        let bytes: u64 = parts.iter().map(|p| p.2).sum();
        let errored = parts.iter().any(|p| p.3 != PartStatus::Ok);
        if outcome == Outcome::Completed && !errored && bytes < min_bytes {
            self.stats.violation(
                Check::EarlyFetch,
                format!("fetch {req} answered early with {bytes} < min.bytes {min_bytes}"),
            );
        }
        if outcome == Outcome::Expired && at < arrived_at + micros(max_wait) {
            self.stats.violation(
                Check::EarlyExpiry,
                format!(
                    "fetch {req} expired {} µs before max.wait",
                    arrived_at + micros(max_wait) - at
                ),
            );
        }
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

    fn fetch_answer(
        &mut self,
        req: u64,
        parts: Vec<(u32, u64, u64, PartStatus)>,
        outcome: Outcome,
    ) {
        self.outstanding -= 1;
        let sent_at = self.stats.requests[req as usize].sent_at;
        let fetch = &mut self.stats.fetch;
        fetch.record_latency(self.now - sent_at);
        let errored = parts.iter().any(|p| p.3 != PartStatus::Ok);
        match (errored, outcome) {
            (true, _) => fetch.errored += 1,
            (false, Outcome::Expired) => fetch.expired += 1,
            (false, _) => fetch.completed += 1,
        }
        let Context::Fetch { consumer, .. } = self.contexts[req as usize] else {
            return;
        };
        let c = consumer as usize;
        for (p, offset, bytes, _) in parts {
            if let Some(i) = self.consumers[c].partitions.iter().position(|&x| x == p) {
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

    // ---- followers -------------------------------------------------------

    fn follower_send(&mut self, follower: u32) {
        let f = follower as usize;
        if !self.brokers[f].alive || (self.stopping && self.outstanding == 0) {
            return;
        }
        let mut groups: Vec<(u32, Vec<(u32, u64)>)> = Vec::new();
        for part in &self.partitions {
            let p = part.id as usize;
            let Some(leader) = part.leader else { continue };
            if leader == follower
                || !part.replicas.contains(&follower)
                || self.follower_in_flight[f][p]
            {
                continue;
            }
            add_to_group(&mut groups, leader, (part.id, part.leo[f]));
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

    fn follower_fetch_at_leader(&mut self, req: u64) {
        let Context::Follower {
            follower,
            leader,
            parts,
            ..
        } = &self.contexts[req as usize]
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

    fn follower_data(&mut self, req: u64, parts: Vec<(u32, u64, u64, PartStatus)>) {
        let Context::Follower { follower, .. } = self.contexts[req as usize] else {
            return;
        };
        let sent_at = self.stats.requests[req as usize].sent_at;
        self.stats.follower_fetch.record_latency(self.now - sent_at);
        let f = follower as usize;
        let (slow_until, delay) = self.slow_until[f];
        if self.now < slow_until {
            let at = self.now + delay;
            self.schedule(at, Event::FollowerApply { req, parts });
        } else {
            self.follower_apply(req, parts);
        }
    }

    fn follower_apply(&mut self, req: u64, parts: Vec<(u32, u64, u64, PartStatus)>) {
        let Context::Follower { follower, .. } = self.contexts[req as usize] else {
            return;
        };
        let f = follower as usize;
        let mut errored = false;
        for (p, offset, bytes, status) in parts {
            self.follower_in_flight[f][p as usize] = false;
            let part = &mut self.partitions[p as usize];
            errored |= status != PartStatus::Ok;
            if status == PartStatus::Ok && part.leader != Some(follower) && part.leo[f] == offset {
                part.leo[f] += bytes;
            }
        }
        let follower_stats = &mut self.stats.follower_fetch;
        if errored {
            follower_stats.errored += 1;
        } else {
            follower_stats.completed += 1;
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
    fn hw_change(&mut self, p: u32, change: Change) {
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

    fn isr_check(&mut self) {
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
        if !(self.stopping && self.outstanding == 0) {
            self.schedule(self.now + ISR_CHECK_EVERY, Event::IsrCheck);
        }
    }

    // ---- the consumer group ----------------------------------------------

    fn heartbeat(&mut self, member: u32) {
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
        } else {
            let op = DelayedHeartbeat {
                member,
                session_timeout: self.cfg.session_timeout,
                clock: Arc::clone(&self.clock),
                replies: self.replies_tx.clone(),
            };
            match self.brokers[0]
                .sessions
                .try_complete_else_watch(op, &[member])
            {
                Ok(session) => {
                    self.members[m].session = Some(session);
                    self.members[m].joins += 1;
                }
                Err(_) => self.stats.violation(
                    Check::ExactlyOnce,
                    format!("member {member} refused by a running purgatory"),
                ),
            }
        }
        let at = self.now + micros(self.cfg.heartbeat_interval);
        self.schedule(at, Event::Heartbeat { member });
    }

    fn session_reply(&mut self, member: u32, outcome: Outcome, at: Instant) {
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
            Outcome::Cancelled | Outcome::Shutdown => {
                self.stats.violation(
                    Check::ExactlyOnce,
                    format!("member {member}'s session ended by {outcome}"),
                );
            }
        }
    }

    // ---- faults and the end ----------------------------------------------

    fn fault(&mut self, fault: Fault) {
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
    }

    fn end_of_arrivals(&mut self) {
        self.stopping = true;
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

/// Adds `item` to the group of partitions led by `leader`: clients send one
/// request per leader, as Kafka's do. Groups keep first-seen order, so the
/// requests go out in the same order on every run.
fn add_to_group<T>(groups: &mut Vec<(u32, Vec<T>)>, leader: u32, item: T) {
    match groups.iter_mut().find(|(l, _)| *l == leader) {
        Some((_, group)) => group.push(item),
        None => groups.push((leader, vec![item])),
    }
}

/// Lets every purgatory share the engine's clock.
struct ClockRef(Arc<dyn Clock>);

impl Clock for ClockRef {
    fn now(&self) -> Instant {
        self.0.now()
    }
}
