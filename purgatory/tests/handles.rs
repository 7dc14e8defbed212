//! Handles used as an embedding broker uses them: polled by hand or by an
//! executor on many threads while every path answers them, and completed
//! from elsewhere through completers.

mod common;

use common::KINDS;
use crossbeam_channel::unbounded;
use purgatory::{Completer, DelayedOperation, Driver, Outcome, Purgatory, TimerKind};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// Completes when its flag is up; counts its answers.
struct Op {
    ready: Arc<AtomicBool>,
    timeout: Duration,
    answers: Arc<AtomicU8>,
}

impl DelayedOperation for Op {
    fn timeout(&self) -> Duration {
        self.timeout
    }
    fn try_complete(&mut self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
    fn on_complete(&mut self, _: Outcome) {
        self.answers.fetch_add(1, Ordering::SeqCst);
    }
}

struct Noop;
impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// How the answerer ends an operation.
#[derive(Clone, Copy, Debug)]
enum Path {
    Condition,
    Expiry,
    Force,
    Cancel,
}

impl Path {
    const ALL: [Path; 4] = [Path::Condition, Path::Expiry, Path::Force, Path::Cancel];

    fn outcome(self) -> Outcome {
        match self {
            Path::Condition | Path::Force => Outcome::Completed,
            Path::Expiry => Outcome::Expired,
            Path::Cancel => Outcome::Cancelled,
        }
    }
}

type P = Purgatory<u64, Op>;

struct Parked {
    path: Path,
    key: u64,
    ready: Arc<AtomicBool>,
    completer: Completer<u64, Op>,
}

fn busy_poll_on_every_path(kind: TimerKind) {
    const SUBMITTERS: u64 = 3;
    const EACH: u64 = 1_000;
    let purgatory = Arc::new(
        Purgatory::builder("polled")
            .timer(kind)
            .driver(Driver::Thread {
                expiration_threads: 1,
            })
            .build()
            .unwrap(),
    );
    let (to_answerer, parked) = unbounded::<Parked>();
    let answerer = {
        let p: Arc<P> = Arc::clone(&purgatory);
        std::thread::spawn(move || {
            for op in parked {
                match op.path {
                    Path::Condition => {
                        op.ready.store(true, Ordering::SeqCst);
                        p.check_and_complete(&op.key);
                    }
                    Path::Force => {
                        op.completer.force_complete();
                    }
                    Path::Cancel => {
                        p.cancel_for_key(&op.key);
                    }
                    Path::Expiry => {}
                }
            }
        })
    };
    let (parked_last, all_parked_last) = unbounded::<()>();
    let total_answers = Arc::new(AtomicUsize::new(0));
    let submitters: Vec<_> = (0..SUBMITTERS)
        .map(|t| {
            let (p, to_answerer) = (Arc::clone(&purgatory), to_answerer.clone());
            let parked_last = parked_last.clone();
            let total = Arc::clone(&total_answers);
            std::thread::spawn(move || {
                let waker = Waker::from(Arc::new(Noop));
                let mut cx = Context::from_waker(&waker);
                let mut polls = 0u64;
                let mut poll_to_end = |h: &mut purgatory::Delayed<u64, Op>, polls: &mut u64| loop {
                    *polls += 1;
                    if let Poll::Ready(done) = Pin::new(&mut *h).poll(&mut cx) {
                        return done;
                    }
                };
                for i in 0..EACH {
                    let path = Path::ALL[(i % 4) as usize];
                    let key = t * EACH + i;
                    let ready = Arc::new(AtomicBool::new(false));
                    let count = Arc::new(AtomicU8::new(0));
                    let timeout = match path {
                        Path::Expiry => Duration::from_millis(1),
                        _ => Duration::from_secs(60),
                    };
                    let op = Op {
                        ready: Arc::clone(&ready),
                        timeout,
                        answers: Arc::clone(&count),
                    };
                    let mut h = p.try_complete_else_watch(op, &[key]).unwrap();
                    to_answerer
                        .send(Parked {
                            path,
                            key,
                            ready,
                            completer: h.completer(),
                        })
                        .unwrap();
                    let done = poll_to_end(&mut h, &mut polls);
                    assert_eq!(done.outcome, path.outcome(), "{path:?}");
                    assert_eq!(count.load(Ordering::SeqCst), 1);
                    total.fetch_add(1, Ordering::SeqCst);
                }
                // One more each, left pending until the shutdown answers it.
                let count = Arc::new(AtomicU8::new(0));
                let op = Op {
                    ready: Arc::new(AtomicBool::new(false)),
                    timeout: Duration::from_secs(60),
                    answers: Arc::clone(&count),
                };
                let mut h = p.try_complete_else_watch(op, &[u64::MAX - t]).unwrap();
                parked_last.send(()).unwrap();
                let done = poll_to_end(&mut h, &mut polls);
                assert_eq!(done.outcome, Outcome::Shutdown);
                assert_eq!(count.load(Ordering::SeqCst), 1);
                total.fetch_add(1, Ordering::SeqCst);
                polls
            })
        })
        .collect();
    drop(to_answerer);
    // A submitter that panicked never reports; its join below says why.
    for _ in 0..SUBMITTERS {
        if all_parked_last
            .recv_timeout(Duration::from_secs(60))
            .is_err()
        {
            break;
        }
    }
    purgatory.shutdown();
    for s in submitters {
        // A panicking poll fails the test here.
        let polls = s.join().expect("a submitter panicked");
        assert!(polls >= EACH);
    }
    answerer.join().unwrap();
    assert_eq!(
        total_answers.load(Ordering::SeqCst) as u64,
        SUBMITTERS * (EACH + 1)
    );
    assert_eq!((purgatory.watched(), purgatory.delayed()), (0, 0));
}

#[test]
fn busy_polled_handles_see_every_answer_once_and_never_panic_wheel() {
    busy_poll_on_every_path(KINDS[0]);
}

#[test]
fn busy_polled_handles_see_every_answer_once_and_never_panic_delay_queue() {
    busy_poll_on_every_path(KINDS[1]);
}

#[test]
fn a_completer_races_the_blocked_waiter_and_the_expiry() {
    for kind in KINDS {
        let p: P = Purgatory::builder("raced")
            .timer(kind)
            .driver(Driver::Thread {
                expiration_threads: 1,
            })
            .build()
            .unwrap();
        for i in 0..500u64 {
            let answers = Arc::new(AtomicU8::new(0));
            let op = Op {
                ready: Arc::new(AtomicBool::new(false)),
                timeout: Duration::from_millis(i % 3),
                answers: Arc::clone(&answers),
            };
            let h = p.try_complete_else_watch(op, &[i]).unwrap();
            let completers: Vec<_> = (0..2).map(|_| h.completer()).collect();
            let racers: Vec<_> = completers
                .into_iter()
                .map(|c| std::thread::spawn(move || c.force_complete()))
                .collect();
            let done = h.wait();
            let said: Vec<bool> = racers.into_iter().map(|r| r.join().unwrap()).collect();
            // At most one force is the outcome, and it says so.
            let yes = said.iter().filter(|&&s| s).count();
            assert!(yes <= 1, "{said:?}");
            assert_eq!(yes == 1, done.outcome == Outcome::Completed);
            assert!(matches!(
                done.outcome,
                Outcome::Completed | Outcome::Expired
            ));
            assert_eq!(answers.load(Ordering::SeqCst), 1);
        }
        assert_eq!((p.watched(), p.delayed()), (0, 0));
    }
}

#[test]
fn a_completer_resets_the_timeout_and_is_send_sync_and_cheap_to_clone() {
    fn send_sync<T: Send + Sync + Clone>(_: &T) {}
    let clock = purgatory::ManualClock::new();
    let p: P = Purgatory::builder("sessions")
        .manual(clock.clone())
        .build()
        .unwrap();
    let answers = Arc::new(AtomicU8::new(0));
    let op = Op {
        ready: Arc::new(AtomicBool::new(false)),
        timeout: Duration::from_millis(100),
        answers: Arc::clone(&answers),
    };
    let h = p.try_complete_else_watch(op, &[1]).unwrap();
    let heartbeat = h.completer();
    send_sync(&heartbeat);
    for _ in 0..10 {
        clock.advance(Duration::from_millis(90));
        assert_eq!(p.advance_clock(), 0);
        assert!(heartbeat.clone().reset_timeout(Duration::from_millis(100)));
    }
    assert!(!h.is_completed());
    clock.advance(Duration::from_millis(100));
    assert_eq!(p.advance_clock(), 1);
    assert!(heartbeat.is_completed());
    assert!(!heartbeat.reset_timeout(Duration::from_millis(100)));
    assert!(!heartbeat.force_complete());
    assert_eq!(h.wait().outcome, Outcome::Expired);
    assert_eq!(answers.load(Ordering::SeqCst), 1);
}

/// An operation whose condition never holds and whose own check makes
/// another outcome arrive for it: the clock has passed its deadline and the
/// check expires the purgatory's due operations, or it forces itself
/// through a completer.
struct OtherOutcomeDuringItsCheck {
    purgatory: Arc<OnceLock<Weak<Purgatory<u64, OtherOutcomeDuringItsCheck>>>>,
    itself: Arc<OnceLock<Completer<u64, OtherOutcomeDuringItsCheck>>>,
    via: Path,
}

impl DelayedOperation for OtherOutcomeDuringItsCheck {
    fn timeout(&self) -> Duration {
        Duration::from_millis(10)
    }
    fn try_complete(&mut self) -> bool {
        match self.via {
            Path::Expiry => {
                if let Some(p) = self.purgatory.get().and_then(Weak::upgrade) {
                    assert_eq!(p.advance_clock(), 0, "left to the running check");
                }
            }
            _ => {
                if let Some(c) = self.itself.get() {
                    assert!(c.force_complete(), "left to the running check");
                }
            }
        }
        false
    }
    fn on_complete(&mut self, _: Outcome) {}
}

#[test]
fn check_and_complete_counts_only_what_its_condition_completed() {
    for (via, want) in [
        (Path::Expiry, Outcome::Expired),
        (Path::Force, Outcome::Completed),
    ] {
        let clock = purgatory::ManualClock::new();
        let p = Arc::new(
            Purgatory::builder("counted")
                .manual(clock.clone())
                .build()
                .unwrap(),
        );
        let (purgatory, itself) = (Arc::new(OnceLock::new()), Arc::new(OnceLock::new()));
        let op = OtherOutcomeDuringItsCheck {
            purgatory: Arc::clone(&purgatory),
            itself: Arc::clone(&itself),
            via,
        };
        let h = p.try_complete_else_watch(op, &[1]).unwrap();
        purgatory.set(Arc::downgrade(&p)).unwrap();
        itself.set(h.completer()).unwrap();
        clock.advance(Duration::from_millis(20));
        // This call finishes the operation, but for the other outcome.
        assert_eq!(p.check_and_complete(&1), 0, "{via:?}");
        assert_eq!(h.wait().outcome, want);
        assert_eq!((p.watched(), p.delayed()), (0, 0));
    }
    // One whose condition holds is counted.
    let p: P = Purgatory::builder("counted")
        .manual(purgatory::ManualClock::new())
        .build()
        .unwrap();
    let ready = Arc::new(AtomicBool::new(false));
    let op = Op {
        ready: Arc::clone(&ready),
        timeout: Duration::from_secs(1),
        answers: Arc::new(AtomicU8::new(0)),
    };
    let h = p.try_complete_else_watch(op, &[1]).unwrap();
    ready.store(true, Ordering::SeqCst);
    assert_eq!(p.check_and_complete(&1), 1);
    assert_eq!(h.wait().outcome, Outcome::Completed);
}
