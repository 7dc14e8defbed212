//! Many threads race submissions, checks, forced completions, key
//! cancellations, timeouts and a final shutdown; counting proves that every
//! operation was answered exactly once and that nothing is left behind.

mod common;

use common::KINDS;
use purgatory::{Delayed, DelayedOperation, Driver, Outcome, Purgatory, TimerKind};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

const SUBMITTERS: u64 = 3;
const OPS_PER_SUBMITTER: u64 = 20_000;
const KEYS: u64 = 8;

struct Counted {
    id: usize,
    /// Completes once `progress` reaches this.
    target: u64,
    progress: Arc<AtomicU64>,
    timeout: Duration,
    answers: Arc<Vec<AtomicU8>>,
}

impl DelayedOperation for Counted {
    fn timeout(&self) -> Duration {
        self.timeout
    }
    fn try_complete(&mut self) -> bool {
        self.progress.load(Ordering::SeqCst) >= self.target
    }
    fn on_complete(&mut self, _: Outcome) {
        self.answers[self.id].fetch_add(1, Ordering::SeqCst);
    }
}

/// xorshift, so each thread's choices are reproducible.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn race(kind: TimerKind) {
    let total = (SUBMITTERS * OPS_PER_SUBMITTER) as usize;
    let answers: Arc<Vec<AtomicU8>> = Arc::new((0..total).map(|_| AtomicU8::new(0)).collect());
    let progress = Arc::new(AtomicU64::new(0));
    let p: Arc<Purgatory<u64, Counted>> = Arc::new(
        Purgatory::builder("stress")
            .timer(kind)
            .driver(Driver::Thread {
                expiration_threads: 2,
            })
            .shards(4)
            .build()
            .unwrap(),
    );
    let submitted = Arc::new(AtomicU64::new(0));

    let submitters: Vec<_> = (0..SUBMITTERS)
        .map(|t| {
            let (p, answers, progress) =
                (Arc::clone(&p), Arc::clone(&answers), Arc::clone(&progress));
            std::thread::spawn(move || {
                let mut rng = 0x1234_5678 + t;
                let mut held: Vec<Delayed<u64, Counted>> = Vec::new();
                for n in 0..OPS_PER_SUBMITTER {
                    let id = (t * OPS_PER_SUBMITTER + n) as usize;
                    let key_count = 1 + next(&mut rng) % 3;
                    // One in eight is stubborn: its condition never holds and
                    // its keys are never cancelled, so only a forced
                    // completion or the shutdown can answer it.
                    let stubborn = next(&mut rng).is_multiple_of(8);
                    // Every thousandth waits forever under a key this thread
                    // then cancels itself, so cancellations race with the
                    // rest however fast the other threads run.
                    let doomed = !stubborn && n % 1000 == 999;
                    let keys: Vec<u64> = (0..key_count)
                        .map(|_| match stubborn {
                            true => KEYS + next(&mut rng) % KEYS,
                            false => next(&mut rng) % KEYS,
                        })
                        .collect();
                    let op = Counted {
                        id,
                        target: match stubborn || doomed {
                            true => u64::MAX,
                            false => progress.load(Ordering::SeqCst) + next(&mut rng) % 40,
                        },
                        progress: Arc::clone(&progress),
                        timeout: match (stubborn || doomed, next(&mut rng) % 4) {
                            (true, _) | (_, 3) => Duration::from_secs(3600),
                            (_, 0) => Duration::ZERO,
                            (_, 1) => Duration::from_millis(next(&mut rng) % 5),
                            _ => Duration::from_millis(next(&mut rng) % 50),
                        },
                        answers: Arc::clone(&answers),
                    };
                    let h = p
                        .try_complete_else_watch(op, &keys)
                        .expect("submitted before shutdown");
                    if doomed {
                        p.cancel_for_key(&keys[0]);
                    }
                    if next(&mut rng).is_multiple_of(8) {
                        held.push(h);
                    }
                    if next(&mut rng).is_multiple_of(16) {
                        if let Some(h) = held.pop() {
                            h.force_complete();
                        }
                    }
                }
                held
            })
        })
        .collect();

    let checkers: Vec<_> = (0..2)
        .map(|t| {
            let (p, progress, submitted) = (
                Arc::clone(&p),
                Arc::clone(&progress),
                Arc::clone(&submitted),
            );
            std::thread::spawn(move || {
                let mut rng = 0xDEAD_BEEF + t;
                while submitted.load(Ordering::SeqCst) < SUBMITTERS {
                    progress.fetch_add(1, Ordering::SeqCst);
                    // Checks reach the stubborn keys too; cancels do not.
                    let key = next(&mut rng) % (2 * KEYS);
                    if key < KEYS && next(&mut rng).is_multiple_of(64) {
                        p.cancel_for_key(&key);
                    } else {
                        p.check_and_complete(&key);
                    }
                }
            })
        })
        .collect();

    let mut held = Vec::new();
    for s in submitters {
        held.extend(s.join().unwrap());
        submitted.fetch_add(1, Ordering::SeqCst);
    }
    for c in checkers {
        c.join().unwrap();
    }
    p.shutdown();

    let m = p.metrics();
    let counts: Vec<u8> = answers.iter().map(|a| a.load(Ordering::SeqCst)).collect();
    let unanswered = counts.iter().filter(|&&c| c == 0).count();
    let twice = counts.iter().filter(|&&c| c > 1).count();
    assert_eq!((unanswered, twice), (0, 0), "{kind:?}: {m:?}");
    assert_eq!(
        m.completed + m.expired + m.cancelled + m.shutdown,
        total as u64
    );
    assert_eq!((p.watched(), p.delayed()), (0, 0));
    if kind == TimerKind::Wheel {
        assert_eq!(
            (m.held_watch_entries, m.held_timer_entries, p.watched_keys()),
            (0, 0, 0)
        );
    }
    // Every outcome occurred, so every path was raced.
    assert!(
        m.completed > 0 && m.expired > 0 && m.cancelled > 0 && m.shutdown > 0,
        "{m:?}"
    );
    // Handles agree with what the operations were told.
    for h in held {
        let outcome = h.outcome().expect("answered");
        assert_eq!(h.wait().outcome, outcome);
    }
}

#[test]
fn every_operation_is_answered_exactly_once_on_the_wheel() {
    race(KINDS[0]);
}

#[test]
fn every_operation_is_answered_exactly_once_on_the_baseline() {
    race(KINDS[1]);
}
