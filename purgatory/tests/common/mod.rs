//! A test operation that records what happened to it.
#![allow(dead_code)]

use parking_lot::Mutex;
use purgatory::{DelayedOperation, ManualClock, Outcome, Purgatory, TimerKind};
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Both timers, so every behaviour is checked on the wheel and the baseline.
pub const KINDS: [TimerKind; 2] = [
    TimerKind::Wheel,
    TimerKind::DelayQueue { purge_interval: 3 },
];

/// A purgatory on `kind`'s timer, driven by a manual clock, and a journal
/// for its probes.
pub fn manual<K>(kind: TimerKind) -> (Purgatory<K, Probe>, ManualClock, Arc<Journal>)
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
{
    let clock = ManualClock::new();
    let purgatory = Purgatory::builder("test")
        .timer(kind)
        .manual(clock.clone())
        .build()
        .unwrap();
    (purgatory, clock, Arc::new(Journal::default()))
}

/// What every probe reports to.
#[derive(Default)]
pub struct Journal {
    /// (op id, outcome) in the order `on_complete` ran.
    pub completions: Mutex<Vec<(u64, Outcome)>>,
    pub expirations: AtomicUsize,
}

impl Journal {
    pub fn outcomes(&self) -> Vec<(u64, Outcome)> {
        self.completions.lock().clone()
    }
}

/// Completes when its flag is up.
pub struct Probe {
    pub id: u64,
    pub ready: Arc<AtomicBool>,
    pub timeout: Duration,
    pub journal: Arc<Journal>,
    pub panic_in_check: bool,
    pub panic_in_complete: bool,
    pub panic_in_timeout: bool,
    /// Panics when dropped (unless already unwinding).
    pub panic_in_drop: bool,
    /// Set by `on_expiration`, to check it runs before `on_complete`.
    pub expiration_seen: bool,
}

impl Probe {
    pub fn new(
        id: u64,
        ready: &Arc<AtomicBool>,
        timeout: Duration,
        journal: &Arc<Journal>,
    ) -> Self {
        Probe {
            id,
            ready: Arc::clone(ready),
            timeout,
            journal: Arc::clone(journal),
            panic_in_check: false,
            panic_in_complete: false,
            panic_in_timeout: false,
            panic_in_drop: false,
            expiration_seen: false,
        }
    }
}

impl DelayedOperation for Probe {
    fn timeout(&self) -> Duration {
        if self.panic_in_timeout {
            panic!("timeout of op {} failed", self.id);
        }
        self.timeout
    }
    fn try_complete(&mut self) -> bool {
        if self.panic_in_check {
            panic!("check of op {} failed", self.id);
        }
        self.ready.load(Ordering::SeqCst)
    }
    fn on_complete(&mut self, outcome: Outcome) {
        assert_eq!(self.expiration_seen, outcome == Outcome::Expired);
        self.journal.completions.lock().push((self.id, outcome));
        if self.panic_in_complete {
            panic!("completion of op {} failed", self.id);
        }
    }
    fn on_expiration(&mut self) {
        self.expiration_seen = true;
        self.journal.expirations.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if self.panic_in_drop && !std::thread::panicking() {
            panic!("drop of op {} failed", self.id);
        }
    }
}
