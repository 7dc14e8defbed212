//! Counters of one purgatory.

use crate::outcome::Outcome;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

/// A snapshot of a purgatory's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgatoryMetrics {
    /// The purgatory's name (Kafka tags its metrics with it: "Produce", "Fetch"...).
    pub name: String,
    /// Watch entries of pending operations (an operation under three keys
    /// counts three): Kafka's `PurgatorySize`.
    pub watched: usize,
    /// Pending operations: Kafka's `NumDelayedOperations`.
    pub delayed: usize,
    /// Operations completed because their condition held (or by `force_complete`).
    pub completed: u64,
    /// Operations that expired.
    pub expired: u64,
    /// Operations cancelled through their key.
    pub cancelled: u64,
    /// Operations answered by shutdown.
    pub shutdown: u64,
    /// Panics caught in operations' code.
    pub panics: u64,
    /// Entries held in watch lists, completed ones included: equal to
    /// `watched` for the wheel, larger for the DelayQueue baseline until it purges.
    pub held_watch_entries: usize,
    /// Entries held by the timer, completed ones included.
    pub held_timer_entries: usize,
    /// Cells of answered operations kept for reuse (at most
    /// [`PurgatoryBuilder::spare_cells`](crate::PurgatoryBuilder::spare_cells)); they hold no user data.
    pub spare_cells: usize,
}

/// The live counters, striped: each thread adds to its own cache line, so
/// a submitter and a completer on different threads never write one line
/// between them (that line would cross between cores on every request). A
/// read sums the stripes; it is exact whenever no operation is being
/// submitted or answered at that moment, and otherwise off by at most
/// those in flight.
pub(crate) struct Counters {
    stripes: Box<[CachePadded<Stripe>]>,
}

#[derive(Default)]
struct Stripe {
    // Signed: an operation submitted on one thread and answered on another
    // adds on one stripe and subtracts on the other.
    watched: AtomicI64,
    delayed: AtomicI64,
    outcomes: [AtomicI64; 4],
    panics: AtomicI64,
}

/// Numbers threads as they first touch a counter, to pick their stripe.
static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD_NUMBER: usize = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn new() -> Self {
        let cpus = std::thread::available_parallelism().map_or(4, usize::from);
        let stripes = (2 * cpus).next_power_of_two().clamp(4, 64);
        Counters {
            stripes: (0..stripes).map(|_| CachePadded::default()).collect(),
        }
    }

    fn mine(&self) -> &Stripe {
        // A thread being torn down has no thread-locals left; any stripe is
        // correct, only slower.
        let n = THREAD_NUMBER.try_with(|n| *n).unwrap_or(0);
        &self.stripes[n & (self.stripes.len() - 1)]
    }

    fn add(&self, field: impl Fn(&Stripe) -> &AtomicI64, delta: i64) {
        field(self.mine()).fetch_add(delta, Ordering::Relaxed);
    }

    /// The sum over stripes; never below zero (a read racing a submission
    /// and its completion can see the subtraction first).
    fn total(&self, field: impl Fn(&Stripe) -> &AtomicI64) -> u64 {
        let sum: i64 = self
            .stripes
            .iter()
            .map(|s| field(s).load(Ordering::Relaxed))
            .sum();
        u64::try_from(sum).unwrap_or(0)
    }

    pub(crate) fn watched_add(&self, n: usize) {
        self.add(|s| &s.watched, n as i64);
    }

    pub(crate) fn watched_sub(&self, n: usize) {
        self.add(|s| &s.watched, -(n as i64));
    }

    pub(crate) fn delayed_add(&self) {
        self.add(|s| &s.delayed, 1);
    }

    pub(crate) fn delayed_sub(&self) {
        self.add(|s| &s.delayed, -1);
    }

    pub(crate) fn record(&self, outcome: Outcome) {
        self.add(|s| &s.outcomes[outcome.code() as usize], 1);
    }

    pub(crate) fn panicked(&self) {
        self.add(|s| &s.panics, 1);
    }

    pub(crate) fn watched(&self) -> usize {
        self.total(|s| &s.watched) as usize
    }

    pub(crate) fn delayed(&self) -> usize {
        self.total(|s| &s.delayed) as usize
    }

    pub(crate) fn count(&self, outcome: Outcome) -> u64 {
        self.total(|s| &s.outcomes[outcome.code() as usize])
    }

    pub(crate) fn panics(&self) -> u64 {
        self.total(|s| &s.panics)
    }
}
