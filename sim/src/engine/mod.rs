//! The discrete-event engine: brokers with their purgatories, producers,
//! consumers, follower replication, group members and faults, driven in
//! simulated time (a manual clock, deterministic per seed) or in real time
//! (the system clock and the purgatories' own timer threads).
//!
//! This file holds the engine's state and its loop: it takes the next event
//! (or purgatory answer) and hands it to the part of the cluster it belongs
//! to, each in a file of its own: `produce.rs`, `fetch.rs` (consumers),
//! `replication.rs` (followers and the high watermark), `group.rs` and
//! `faults.rs`; `event.rs` defines the events.

use crate::cluster::Partition;
use crate::config::{ClockChoice, Config, Fault, TimerChoice};
use crate::ops::{DelayedFetch, DelayedHeartbeat, DelayedProduce, Reply};
use crate::rng::{LogNormal, Rng};
use crate::stats::{Check, Kind, Stats};
use crossbeam_channel::{Receiver, Sender};
use purgatory::{
    Clock, Delayed, DelayedOperation, Driver, ManualClock, Outcome, Purgatory, SystemClock,
    TimerKind,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod event;
mod faults;
mod fetch;
mod group;
mod produce;
mod replication;

use event::{Context, Event, Scheduled};

/// Produce retries after an error, at most.
const MAX_RETRIES: u32 = 5;
use crate::limits::MAX_IN_FLIGHT;

/// How often leaders look for lagging followers (µs).
const ISR_CHECK_EVERY: u64 = 1_000_000;

struct Broker {
    alive: bool,
    produce: Purgatory<u32, DelayedProduce>,
    fetch: Purgatory<u32, DelayedFetch>,
    /// The members' sessions, while this broker is the group coordinator
    /// (the first broker up).
    sessions: Purgatory<u32, DelayedHeartbeat>,
    /// When this broker's outbound link is free again (µs).
    link_free_at: u64,
}

struct Consumer {
    /// In ascending order (see `Engine::new`), so that a partition's index
    /// is a binary search away: a consumer of 100,000 partitions looked
    /// each one up by a linear scan, twice per fetch, and a simulated
    /// second took minutes.
    partitions: Vec<u32>,
    offsets: Vec<u64>,
    in_flight: Vec<bool>,
}

impl Consumer {
    /// Where partition `p` is in this consumer's vectors.
    fn index_of(&self, p: u32) -> Option<usize> {
        self.partitions.binary_search(&p).ok()
    }
}

struct Member {
    session: Option<Delayed<u32, DelayedHeartbeat>>,
    last_heartbeat: u64,
    silent: bool,
    /// Its session was cancelled because the coordinator moved: it
    /// rejoins at the new one with its next heartbeat.
    moving: bool,
    joins: u32,
    ends: u32,
}

/// Called about ten times a second of wall time with (the run's time so
/// far, its duration of arrivals, the counts so far).
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
    /// When the next produce arrival is due (µs), whenever it is handled.
    next_arrival: f64,
    replies_tx: Sender<Reply>,
    replies: Receiver<Reply>,
    brokers: Vec<Broker>,
    partitions: Vec<Partition>,
    /// Per broker, the partitions it leads, in ascending order: what a
    /// produce picks from. Leadership moves only when a broker crashes or
    /// restarts, or at a preferred leader election, each of which rebuilds
    /// it; finding them by a walk over every partition at each produce
    /// made a run of 100,000 partitions take half a minute a simulated
    /// second.
    led_by: Vec<Vec<u32>>,
    /// Per broker, the partitions it is a replica of, in ascending order
    /// (replica sets never change): what its follower fetches go over.
    replica_of: Vec<Vec<u32>>,
    consumers: Vec<Consumer>,
    /// Per broker, per partition: a follower fetch is in flight.
    follower_in_flight: Vec<Vec<bool>>,
    /// Per broker: applying fetched data is slowed until then (µs), by this much.
    slow_until: Vec<(u64, u64)>,
    members: Vec<Member>,
    /// What each request in flight is about, by id; removed once its
    /// client has handled the answer.
    contexts: HashMap<u64, Context>,
    /// Client requests (produce and consumer fetch) not yet answered at the client.
    outstanding: u64,
    stopping: bool,
    /// The simulated run stopped at its drain limit: what the shutdown
    /// answers was cut off by the run, not lost by the purgatory.
    drain_cut: bool,
    /// Set from outside to end arrivals early (a real-time run beside a
    /// server that is stopping).
    stop_early: Option<Arc<std::sync::atomic::AtomicBool>>,
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
                Partition::new(p, replicas, n, cfg.min_insync)
            })
            .collect();
        let consumers = (0..cfg.consumers)
            .map(|c| {
                // Fewer consumers than partitions: each owns a share. More:
                // each reads one partition, shared as independent consumer
                // groups would share it, so that every consumer fetches.
                let owned: Vec<u32> = if cfg.consumers <= cfg.partitions {
                    (0..cfg.partitions)
                        .filter(|p| p % cfg.consumers == c)
                        .collect()
                } else {
                    vec![c % cfg.partitions]
                };
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
                moving: false,
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
            next_arrival: 0.0,
            replies_tx,
            replies,
            brokers,
            led_by: led_by(&partitions, n),
            replica_of: replica_of(&partitions, n),
            partitions,
            consumers,
            members,
            contexts: HashMap::new(),
            outstanding: 0,
            stopping: false,
            drain_cut: false,
            stats: Stats::default(),
            stop_early: None,
            cfg,
        })
    }

    /// Ends arrivals as soon as `flag` is set, as if the configured duration
    /// had passed (real-time runs only); what is in flight still drains.
    pub fn stop_on(mut self, flag: Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.stop_early = Some(flag);
        self
    }

    /// Runs to the end: arrivals for the configured duration, then every
    /// in-flight request is drained. `progress` is called about ten times
    /// a second of wall time.
    pub fn run(mut self, progress: Option<Progress<'_>>) -> Stats {
        self.schedule_start();
        match self.cfg.clock {
            ClockChoice::Sim => self.run_simulated(progress),
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
                Fault::Crash { at, .. }
                | Fault::Restart { at, .. }
                | Fault::StopHeartbeats { at, .. } => micros(*at),
            };
            self.schedule(at, Event::Fault(fault));
        }
        self.schedule(micros(self.cfg.duration), Event::EndOfArrivals);
    }

    /// The simulated loop: jump to the next event or purgatory deadline.
    fn run_simulated(&mut self, mut progress: Option<Progress<'_>>) {
        let give_up = self.drain_limit();
        let mut last_progress = Instant::now();
        for step in 0u64.. {
            // Reading the wall clock every step would cost more than a step.
            if let Some(report) = progress.as_mut().filter(|_| step % 1024 == 0) {
                if last_progress.elapsed() >= Duration::from_millis(100) {
                    last_progress = Instant::now();
                    report(
                        Duration::from_micros(self.now),
                        self.cfg.duration,
                        &self.stats,
                    );
                }
            }
            let next_event = self.queue.peek().map(|s| s.0.at);
            let next_expiry = self.next_expiration();
            let Some(t) = [next_event, next_expiry].into_iter().flatten().min() else {
                break;
            };
            if t > give_up {
                let (_, pending) = self.sizes();
                self.stats.limits.push(format!(
                    "drain stopped at its limit, {} s: {pending} operations pending, \
                     {} events due",
                    give_up / 1_000_000,
                    self.queue.len()
                ));
                self.drain_cut = true;
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
            while let Some(event) = self.pop_due() {
                self.handle(event);
                self.drain_replies();
            }
            self.sample_sizes();
        }
    }

    /// When a simulated run stops draining (µs): past the end of arrivals,
    /// twice the longest any request can take (a produce retried after
    /// each of its timeouts, a fetch's wait, a session) and two minutes
    /// more. Only a request the purgatory never answers can reach it, so
    /// it ends a run that would otherwise never end.
    fn drain_limit(&self) -> u64 {
        let cfg = &self.cfg;
        let tries = MAX_RETRIES + 1;
        let produce = (cfg.produce_timeout + cfg.retry_backoff + cfg.latency * 2) * tries;
        let longest = [
            produce,
            cfg.fetch_max_wait + cfg.retry_backoff + cfg.latency * 2,
            cfg.replica_fetch_wait + cfg.latency * 2,
            cfg.session_timeout,
            cfg.replica_lag_max,
        ]
        .into_iter()
        .max()
        .unwrap_or_default();
        micros(cfg.duration + longest * 2 + Duration::from_secs(120))
    }

    /// The real-time loop: sleep until the next event or the next answer.
    fn run_real(&mut self, mut progress: Option<Progress<'_>>) {
        let mut last_progress = Instant::now();
        let duration = self.cfg.duration;
        loop {
            self.now = micros(self.clock.now().saturating_duration_since(self.start));
            let asked = self
                .stop_early
                .as_ref()
                .is_some_and(|f| f.load(std::sync::atomic::Ordering::Acquire));
            if asked && !self.stopping {
                self.queue
                    .retain(|s| !matches!(s.0.event, Event::EndOfArrivals | Event::Fault(_)));
                self.end_of_arrivals();
            }
            self.drain_replies();
            if let Some(event) = self.pop_due() {
                self.handle(event);
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
        if (watched != 0 || delayed != 0) && !self.drain_cut {
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

    /// The next event due by now, taken off the queue.
    fn pop_due(&mut self) -> Option<Event> {
        if self.queue.peek()?.0.at > self.now {
            return None;
        }
        self.queue.pop().map(|Reverse(s)| s.event)
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

    /// Records the purgatory's answer to request `req` (`what` names its
    /// kind) and returns when it came (µs). An answer by the shutdown
    /// means the request was still pending at the end.
    fn answer_came(&mut self, what: &str, req: u64, outcome: Outcome, at: Instant) -> u64 {
        self.stats.answered(req);
        if outcome == Outcome::Shutdown && self.drain_cut {
            self.stats.cut_off += 1;
        } else if outcome == Outcome::Shutdown {
            self.stats.violation(
                Check::EmptyAtEnd,
                format!("{what} {req} was still pending at the end"),
            );
        }
        self.at_micros(at)
    }

    /// An expiry that came `at` must not come before `due`, the request's
    /// arrival plus its wait (`wait` names the setting).
    fn check_expiry(
        &mut self,
        what: &str,
        req: u64,
        outcome: Outcome,
        at: u64,
        due: u64,
        wait: &str,
    ) {
        if outcome == Outcome::Expired && at < due {
            self.stats.violation(
                Check::EarlyExpiry,
                format!("{what} {req} expired {} µs before {wait}", due - at),
            );
        }
    }

    /// Time for `bytes` to leave `broker`'s link, queued behind what is already on it.
    fn transfer(&mut self, broker: u32, bytes: u64) -> u64 {
        let link = &mut self.brokers[broker as usize].link_free_at;
        let begin = (*link).max(self.now);
        // The float-to-integer cast saturates; the sum must not wrap either.
        let done = begin.saturating_add((bytes as f64 * 1e6 / self.cfg.bandwidth) as u64);
        *link = done;
        done - self.now
    }

    /// Opens a tracked request, records what it is about, and schedules its
    /// arrival at the broker one network latency from now. Client requests
    /// (not followers') count as outstanding until the client has the answer.
    fn send(&mut self, kind: Kind, context: Context, arrive: impl FnOnce(u64) -> Event) {
        let req = self.stats.open(kind, self.now);
        self.contexts.insert(req, context);
        if kind != Kind::FollowerFetch {
            self.outstanding += 1;
            if self.outstanding > MAX_IN_FLIGHT && !self.stopping {
                self.stats.limits.push(format!(
                    "arrivals stopped at {:.1} s: over {MAX_IN_FLIGHT} client requests \
                     in flight",
                    self.now as f64 / 1e6
                ));
                self.end_of_arrivals();
            }
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
}

/// Parks `op` under `keys`. A running purgatory refuses nothing with keys:
/// a refusal would leave the request unanswered, so it is recorded as a
/// violation, naming the request as `what id`.
fn park<O: DelayedOperation>(
    stats: &mut Stats,
    purgatory: &Purgatory<u32, O>,
    op: O,
    keys: &[u32],
    (what, id): (&str, u64),
) -> Option<Delayed<u32, O>> {
    match purgatory.try_complete_else_watch(op, keys) {
        Ok(handle) => Some(handle),
        Err(_) => {
            stats.violation(
                Check::ExactlyOnce,
                format!("{what} {id} refused by a running purgatory"),
            );
            None
        }
    }
}

/// Per broker of `brokers`, the partitions it leads, in ascending order.
fn led_by(partitions: &[Partition], brokers: u32) -> Vec<Vec<u32>> {
    let mut led = vec![Vec::new(); brokers as usize];
    for p in partitions {
        if let Some(leader) = p.leader {
            led[leader as usize].push(p.id);
        }
    }
    led
}

/// Per broker of `brokers`, the partitions it is a replica of, in
/// ascending order.
fn replica_of(partitions: &[Partition], brokers: u32) -> Vec<Vec<u32>> {
    let mut of = vec![Vec::new(); brokers as usize];
    for p in partitions {
        for &r in &p.replicas {
            of[r as usize].push(p.id);
        }
    }
    of
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
