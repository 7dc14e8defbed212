//! Counters of one purgatory.

use crate::outcome::Outcome;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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
}

#[derive(Default)]
pub(crate) struct Counters {
    pub watched: AtomicUsize,
    pub delayed: AtomicUsize,
    pub panics: AtomicU64,
    outcomes: [AtomicU64; 4],
}

impl Counters {
    pub(crate) fn record(&self, outcome: Outcome) {
        self.outcomes[outcome.code() as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count(&self, outcome: Outcome) -> u64 {
        self.outcomes[outcome.code() as usize].load(Ordering::Relaxed)
    }
}
