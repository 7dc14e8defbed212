//! What a run counts and checks: every request answered exactly once,
//! outcomes and latencies per request type, purgatory sizes, and the
//! invariants whose violation fails the run.

use hdrhistogram::Histogram;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The invariants every run checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Check {
    /// Every request (and every session) is answered exactly once.
    ExactlyOnce,
    /// No `acks=all` produce is acknowledged before the HW covers it, nor
    /// while fewer than `min.insync.replicas` replicas hold it.
    AckedBelowHw,
    /// No fetch is answered before `max.wait` with fewer than `min.bytes`
    /// (unless an error ends it), and no consumer reads above the HW.
    EarlyFetch,
    /// No expiration fires before its deadline.
    EarlyExpiry,
    /// The purgatories are empty once the run has drained.
    EmptyAtEnd,
}

impl Check {
    /// Every check, in report order.
    pub const ALL: [Check; 5] = [
        Check::ExactlyOnce,
        Check::AckedBelowHw,
        Check::EarlyFetch,
        Check::EarlyExpiry,
        Check::EmptyAtEnd,
    ];

    /// What the check asserts, for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Check::ExactlyOnce => "every request and session answered exactly once",
            Check::AckedBelowHw => "no acks=all produce acknowledged below the HW or min.insync",
            Check::EarlyFetch => "no fetch answered early below min.bytes, none read above the HW",
            Check::EarlyExpiry => "no expiration before its deadline",
            Check::EmptyAtEnd => "purgatories empty (watched and delayed 0) once drained",
        }
    }

    /// Its key in the JSON report.
    pub fn key(self) -> &'static str {
        match self {
            Check::ExactlyOnce => "exactly_once",
            Check::AckedBelowHw => "acked_below_hw",
            Check::EarlyFetch => "early_fetch",
            Check::EarlyExpiry => "early_expiry",
            Check::EmptyAtEnd => "empty_at_end",
        }
    }
}

/// The kinds of requests the harness tracks one by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A producer's request.
    Produce,
    /// A consumer's fetch.
    Fetch,
    /// A follower's fetch (replication).
    FollowerFetch,
}

/// Outcomes and latencies of one request type.
pub struct TypeStats {
    /// Requests sent (retries are new requests).
    pub sent: u64,
    /// Answered successfully: acknowledged, or `min.bytes` reached.
    pub completed: u64,
    /// Answered at their timeout (a fetch then returns what there is).
    pub expired: u64,
    /// Answered with an error (not leader, not enough replicas, unavailable).
    pub errored: u64,
    /// Send-to-answer latency at the client, in µs.
    pub latency: Histogram<u64>,
}

impl Default for TypeStats {
    fn default() -> Self {
        TypeStats {
            sent: 0,
            completed: 0,
            expired: 0,
            errored: 0,
            // Three significant digits up to an hour: enough for any timeout.
            latency: Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .expect("static bounds are valid"),
        }
    }
}

impl TypeStats {
    /// Records one latency, clamped into the histogram's range.
    pub fn record_latency(&mut self, micros: u64) {
        let _ = self.latency.record(micros.clamp(1, 3_600_000_000));
    }

    /// A latency percentile in milliseconds (0 when nothing was recorded).
    pub fn percentile_ms(&self, q: f64) -> f64 {
        match self.latency.is_empty() {
            true => 0.0,
            false => self.latency.value_at_quantile(q) as f64 / 1000.0,
        }
    }

    /// The largest latency in milliseconds.
    pub fn max_ms(&self) -> f64 {
        match self.latency.is_empty() {
            true => 0.0,
            false => self.latency.max() as f64 / 1000.0,
        }
    }
}

/// A request whose client has not handled its answer yet.
pub struct Request {
    /// When it was sent (µs).
    pub sent_at: u64,
    /// Whether the broker side has answered it (a second answer goes to
    /// [`Stats::answered_twice`]).
    pub answered: bool,
}

/// Everything a run counted.
#[derive(Default)]
pub struct Stats {
    /// Requests opened so far (the next one's id).
    pub opened: u64,
    /// Requests whose clients have not handled their answers yet, by id. A
    /// request leaves once its client has ([`finish`](Self::finish)), so
    /// this holds what is in flight, not every request of the run: a long
    /// run's memory stays flat.
    pub open: HashMap<u64, Request>,
    /// Requests answered more than once (empty unless the purgatory is wrong).
    pub answered_twice: BTreeSet<u64>,
    /// Producers' requests.
    pub produce: TypeStats,
    /// Consumers' fetches.
    pub fetch: TypeStats,
    /// Followers' fetches.
    pub follower_fetch: TypeStats,
    /// Errored requests by request type and Kafka error name; a request
    /// whose partitions failed in different ways counts under each.
    pub errors: BTreeMap<(&'static str, &'static str), u64>,
    /// New produce requests (retries not included): over the time of
    /// arrivals, the achieved produce rate, beside the configured one.
    pub produce_arrivals: u64,
    /// When arrivals ended (µs of the run's time).
    pub arrivals_ended_us: u64,
    /// The limits of the run that were hit (too many requests in flight, a
    /// drain past every timeout), described; the run's checks still hold
    /// for what it did.
    pub limits: Vec<String>,
    /// Requests still pending when the run stopped at its drain limit,
    /// answered by the purgatories' shutdown.
    pub cut_off: u64,
    /// Produce requests retried after an error.
    pub retries: u64,
    /// `acks=1` produces (answered without the purgatory).
    pub acks_one: u64,
    /// Heartbeats that pushed a session back.
    pub heartbeats: u64,
    /// Sessions that expired.
    pub sessions_expired: u64,
    /// Members that left cleanly.
    pub sessions_left: u64,
    /// Sessions ended because the coordinator moved (its broker crashed,
    /// or the first broker came back): the members rejoin at the new one.
    pub sessions_moved: u64,
    /// ISR shrinks and expands.
    pub isr_shrinks: u64,
    /// ISR expands.
    pub isr_expands: u64,
    /// Leader changes.
    pub leader_changes: u64,
    /// Operations answered through `cancel_for_key`.
    pub cancelled: u64,
    /// Peak of the summed `watched()` over every purgatory.
    pub max_watched: usize,
    /// Peak of the summed `delayed()`.
    pub max_delayed: usize,
    /// Summed `watched()` after the run drained.
    pub watched_at_end: usize,
    /// Summed `delayed()` after the run drained.
    pub delayed_at_end: usize,
    /// Invariant violations, in all.
    pub violations: u64,
    /// Violations per check.
    pub violations_by_check: [u64; 5],
    /// The first violations, described.
    pub violation_samples: Vec<String>,
    /// Simulated (or real) time the run took, µs.
    pub elapsed_us: u64,
}

impl Stats {
    /// Registers a new request; returns its id.
    pub fn open(&mut self, kind: Kind, now: u64) -> u64 {
        let id = self.opened;
        self.opened += 1;
        let request = Request {
            sent_at: now,
            answered: false,
        };
        self.open.insert(id, request);
        self.of(kind).sent += 1;
        id
    }

    /// The stats of one request type.
    pub fn of(&mut self, kind: Kind) -> &mut TypeStats {
        match kind {
            Kind::Produce => &mut self.produce,
            Kind::Fetch => &mut self.fetch,
            Kind::FollowerFetch => &mut self.follower_fetch,
        }
    }

    /// Notes that the broker answered request `req`. A request already
    /// finished was answered before its client handled the first answer,
    /// so an answer to it is a second one too.
    pub fn answered(&mut self, req: u64) {
        let first = match self.open.get_mut(&req) {
            Some(r) => !std::mem::replace(&mut r.answered, true),
            None => false,
        };
        if !first {
            self.answered_twice.insert(req);
            self.violation(Check::ExactlyOnce, format!("request {req} answered twice"));
        }
    }

    /// Forgets request `req` once its client has handled its answer, and
    /// returns its record; `None` if that already happened (a second answer
    /// reaching the client, counted by [`answered`](Self::answered)).
    pub fn finish(&mut self, req: u64) -> Option<Request> {
        self.open.remove(&req)
    }

    /// Counts an errored request of type `kind` under each distinct error
    /// among `errors` (Kafka error names).
    pub fn errored(&mut self, kind: &'static str, errors: impl IntoIterator<Item = &'static str>) {
        let mut seen: Vec<&'static str> = errors.into_iter().collect();
        seen.sort_unstable();
        seen.dedup();
        for error in seen {
            *self.errors.entry((kind, error)).or_default() += 1;
        }
    }

    /// Records an invariant violation.
    pub fn violation(&mut self, check: Check, what: String) {
        self.violations += 1;
        self.violations_by_check[check as usize] += 1;
        if self.violation_samples.len() < 10 {
            self.violation_samples.push(what);
        }
    }

    /// Requests never answered: only open ones can be.
    pub fn lost(&self) -> u64 {
        self.open.values().filter(|r| !r.answered).count() as u64
    }

    /// Requests answered more than once.
    pub fn duplicated(&self) -> u64 {
        self.answered_twice.len() as u64
    }

    /// Produce arrivals per second of the run's time of arrivals.
    pub fn achieved_produce_rate(&self) -> f64 {
        match self.arrivals_ended_us {
            0 => 0.0,
            us => self.produce_arrivals as f64 / (us as f64 / 1e6),
        }
    }

    /// Requests answered exactly once: every other one.
    pub fn answered_once(&self) -> u64 {
        self.opened - self.lost() - self.duplicated()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_forgotten_once_its_client_has_the_answer() {
        let mut stats = Stats::default();
        let a = stats.open(Kind::Produce, 10);
        let b = stats.open(Kind::Fetch, 20);
        stats.answered(a);
        assert_eq!(stats.finish(a).map(|r| r.sent_at), Some(10));
        assert_eq!(stats.open.len(), 1, "only b is still in flight");
        assert_eq!((stats.lost(), stats.duplicated()), (1, 0));
        stats.answered(b);
        assert_eq!((stats.lost(), stats.answered_once()), (0, 2));
        assert!(stats.finish(b).is_some());
        assert!(stats.open.is_empty());
    }

    #[test]
    fn a_second_answer_counts_before_and_after_the_client_has_the_first() {
        let mut stats = Stats::default();
        let a = stats.open(Kind::Produce, 0);
        let b = stats.open(Kind::Produce, 0);
        stats.answered(a);
        stats.answered(a);
        stats.answered(b);
        assert!(stats.finish(b).is_some());
        stats.answered(b);
        assert!(
            stats.finish(b).is_none(),
            "b's record went with its first answer"
        );
        assert_eq!((stats.duplicated(), stats.answered_once()), (2, 0));
        assert_eq!(stats.violations_by_check[Check::ExactlyOnce as usize], 2);
    }
}
