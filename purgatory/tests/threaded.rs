//! The purgatory's threads, on the real clock. Each test
//! checks an order of events, never a speed: bounds are generous.

mod common;

use common::{Journal, Probe, KINDS};
use purgatory::{DelayedOperation, Driver, Outcome, Purgatory, ThreadRole, TimerKind};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(20);

fn threaded<O: DelayedOperation>(kind: TimerKind, workers: usize) -> Purgatory<u32, O> {
    Purgatory::builder("threaded")
        .timer(kind)
        .driver(Driver::Thread {
            expiration_threads: workers,
        })
        .build()
        .unwrap()
}

/// Polls `done` until it holds or `PATIENCE` runs out; returns the last answer.
fn eventually(done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while !done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    done()
}

#[test]
fn the_timer_thread_expires_operations_no_earlier_than_their_timeout() {
    for kind in KINDS {
        let p = threaded(kind, 1);
        let journal = Arc::new(Journal::default());
        let start = Instant::now();
        let h = p
            .try_complete_else_watch(
                Probe::new(
                    1,
                    &Arc::new(AtomicBool::new(false)),
                    Duration::from_millis(50),
                    &journal,
                ),
                &[1],
            )
            .unwrap();
        let done = h.wait_timeout(PATIENCE).expect("expired in time");
        assert_eq!(done.outcome, Outcome::Expired);
        assert!(start.elapsed() >= Duration::from_millis(50));
        assert_eq!((p.watched(), p.delayed()), (0, 0));
    }
}

#[test]
fn an_earlier_deadline_wakes_the_sleeping_timer_thread() {
    for kind in KINDS {
        let p = threaded(kind, 1);
        let journal = Arc::new(Journal::default());
        let never = Arc::new(AtomicBool::new(false));
        // The timer thread now sleeps for an hour...
        let long = p
            .try_complete_else_watch(
                Probe::new(1, &never, Duration::from_secs(3600), &journal),
                &[1],
            )
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        // ...and must wake for this one.
        let short = p
            .try_complete_else_watch(
                Probe::new(2, &never, Duration::from_millis(10), &journal),
                &[1],
            )
            .unwrap();
        assert_eq!(
            short.wait_timeout(PATIENCE).expect("woken early").outcome,
            Outcome::Expired
        );
        assert!(!long.is_completed());
        p.shutdown();
        assert_eq!(long.wait().outcome, Outcome::Shutdown);
    }
}

/// Logs when its expiry callback begins and ends, napping in between.
struct Napping {
    id: u32,
    timeout: Duration,
    nap: Duration,
    log: NapLog,
}

/// Each callback's id, as it begins (`false`) and ends (`true`).
type NapLog = Arc<std::sync::Mutex<Vec<(u32, bool)>>>;

impl Napping {
    fn new(log: &NapLog, id: u32, timeout: Duration, nap: Duration) -> Self {
        Napping {
            id,
            timeout,
            nap,
            log: Arc::clone(log),
        }
    }
}

impl DelayedOperation for Napping {
    fn timeout(&self) -> Duration {
        self.timeout
    }
    fn try_complete(&mut self) -> bool {
        false
    }
    fn on_complete(&mut self, _: Outcome) {
        self.log.lock().unwrap().push((self.id, false));
        std::thread::sleep(self.nap);
        self.log.lock().unwrap().push((self.id, true));
    }
}

#[test]
fn a_blocking_expiration_callback_holds_up_other_expiries_only_briefly() {
    // The thread that took the slow one's batch blocks in it; another takes
    // the clock (with one expiration thread, at its next look: within a
    // hundred ticks).
    for workers in [1, 2] {
        for kind in KINDS {
            let p = threaded(kind, workers);
            let log = NapLog::default();
            let slow = Napping::new(&log, 1, Duration::from_millis(5), Duration::from_secs(3));
            let quick = Napping::new(&log, 2, Duration::from_millis(100), Duration::ZERO);
            let slow_done = || log.lock().unwrap().contains(&(1, true));
            p.try_complete_else_watch(slow, &[1]).unwrap();
            let h = p.try_complete_else_watch(quick, &[2]).unwrap();
            assert_eq!(
                h.wait_timeout(PATIENCE).expect("expired").outcome,
                Outcome::Expired
            );
            assert!(
                !slow_done(),
                "the quick one waited for the slow callback ({workers} workers)"
            );
            p.shutdown();
            assert!(slow_done(), "shutdown waits for it");
        }
    }
}

#[test]
fn a_deadline_that_arrives_while_a_callback_blocks_is_kept_by_the_other_thread() {
    // Nothing else is pending when the blocking callback begins, so the
    // other thread waits without a timeout; the new submission must wake it.
    for kind in KINDS {
        let p = threaded(kind, 1);
        let log = NapLog::default();
        let napping = |id, timeout_ms, nap_ms| {
            Napping::new(
                &log,
                id,
                Duration::from_millis(timeout_ms),
                Duration::from_millis(nap_ms),
            )
        };
        p.try_complete_else_watch(napping(1, 5, 2_000), &[1])
            .unwrap();
        assert!(eventually(|| log.lock().unwrap().contains(&(1, false))));
        let h = p.try_complete_else_watch(napping(2, 20, 0), &[2]).unwrap();
        assert_eq!(
            h.wait_timeout(PATIENCE).expect("expired").outcome,
            Outcome::Expired
        );
        assert!(
            !log.lock().unwrap().contains(&(1, true)),
            "the second waited for the first one's callback: {:?}",
            log.lock().unwrap()
        );
        p.shutdown();
    }
}

#[test]
fn a_batch_that_outlasts_its_tick_is_answered_whole_and_once_while_the_clock_goes_on() {
    for kind in KINDS {
        let p = threaded(kind, 1);
        let log = NapLog::default();
        let napping =
            |id, timeout_ms, nap| Napping::new(&log, id, Duration::from_millis(timeout_ms), nap);
        // One batch of 400 callbacks of 250 µs: 100 ms of work, due at once.
        let batch: Vec<_> = (0..400)
            .map(|id| {
                p.try_complete_else_watch(napping(id, 30, Duration::from_micros(250)), &[id])
                    .unwrap()
            })
            .collect();
        // Due while that batch runs.
        let later = p
            .try_complete_else_watch(napping(1_000, 45, Duration::ZERO), &[1_000])
            .unwrap();
        for h in batch {
            assert_eq!(h.wait().outcome, Outcome::Expired);
        }
        assert_eq!(later.wait().outcome, Outcome::Expired);
        let log = log.lock().unwrap();
        let mut ended: Vec<u32> = log.iter().filter(|e| e.1).map(|e| e.0).collect();
        ended.sort_unstable();
        let mut expected: Vec<u32> = (0..400).collect();
        expected.push(1_000);
        assert_eq!(ended, expected, "each answered once");
        let at = |entry| log.iter().position(|e| *e == entry).unwrap();
        let last_of_batch = (0..400).map(|id| at((id, true))).max().unwrap();
        assert!(
            at((1_000, true)) < last_of_batch,
            "the later deadline waited for the whole batch"
        );
    }
}

#[test]
fn panicking_callbacks_and_drops_do_not_kill_the_timer_or_its_workers() {
    for kind in KINDS {
        let p = threaded(kind, 1);
        let journal = Arc::new(Journal::default());
        let never = Arc::new(AtomicBool::new(false));
        for id in 0..8 {
            let mut op = Probe::new(id, &never, Duration::from_millis(1), &journal);
            if id < 5 {
                op.panic_in_complete = true;
                p.try_complete_else_watch(op, &[1]).unwrap();
            } else {
                // Handle dropped: the worker that expires it drops it.
                op.panic_in_drop = true;
                drop(p.try_complete_else_watch(op, &[1]).unwrap());
            }
        }
        // The one worker is still there to expire a later operation.
        let after = p
            .try_complete_else_watch(
                Probe::new(9, &never, Duration::from_millis(30), &journal),
                &[1],
            )
            .unwrap();
        let done = after.wait_timeout(PATIENCE).expect("still expiring");
        assert_eq!(done.outcome, Outcome::Expired);
        // The panicking eight were answered too (their callbacks recorded it).
        assert!(eventually(|| journal.outcomes().len() == 9));
        // Drops are logged, not counted.
        assert_eq!(p.metrics().panics, 5);
    }
}

/// Submits an operation that never completes by itself, with a timeout of
/// `ms`, and waits for its answer.
fn expiry_of_one(p: &Purgatory<u32, Probe>, ms: u64) -> Option<Outcome> {
    let journal = Arc::new(Journal::default());
    let never = Arc::new(AtomicBool::new(false));
    let op = Probe::new(1, &never, Duration::from_millis(ms), &journal);
    let h = p.try_complete_else_watch(op, &[1]).unwrap();
    h.wait_timeout(PATIENCE).ok().map(|done| done.outcome)
}

#[test]
fn the_start_hook_runs_once_on_each_thread_under_its_name() {
    for kind in KINDS {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorded = Arc::clone(&seen);
        let p: Purgatory<u32, Probe> = Purgatory::builder("hooked")
            .timer(kind)
            .driver(Driver::Thread {
                expiration_threads: 3,
            })
            .on_thread_start(move |role| {
                // A slow hook: `build` still returns only once it is done.
                std::thread::sleep(Duration::from_millis(20));
                let name = std::thread::current().name().map(str::to_owned);
                recorded.lock().unwrap().push((role, name));
            })
            .build()
            .unwrap();
        assert_eq!(seen.lock().unwrap().len(), 4, "every hook ran by `build`");
        assert_eq!(expiry_of_one(&p, 1), Some(Outcome::Expired));
        drop(p);
        let mut seen = std::mem::take(&mut *seen.lock().unwrap());
        seen.sort_by_key(|(role, _)| format!("{role:?}"));
        let expected = [
            (ThreadRole::Expiration(0), "hooked-expiration-0"),
            (ThreadRole::Expiration(1), "hooked-expiration-1"),
            (ThreadRole::Expiration(2), "hooked-expiration-2"),
            (ThreadRole::Timer, "hooked-timer"),
        ];
        let seen: Vec<_> = seen
            .iter()
            .map(|(role, name)| (*role, name.as_deref().unwrap()))
            .collect();
        assert_eq!(seen, expected);
    }
}

#[test]
fn a_panicking_start_hook_leaves_the_threads_working() {
    for kind in KINDS {
        let p: Purgatory<u32, Probe> = Purgatory::builder("hook-panics")
            .timer(kind)
            .on_thread_start(|role| panic!("no priority for {role:?}"))
            .build()
            .unwrap();
        assert_eq!(
            expiry_of_one(&p, 5),
            Some(Outcome::Expired),
            "still expiring"
        );
        // Not an operation's panic: not counted.
        assert_eq!(p.metrics().panics, 0);
    }
}

struct ThreadWaker(std::thread::Thread);
impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// The smallest executor: polls on this thread, parks between wake-ups.
fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

#[test]
fn a_handle_can_be_awaited() {
    let p = Arc::new(threaded::<Probe>(TimerKind::Wheel, 1));
    let journal = Arc::new(Journal::default());
    let ready = Arc::new(AtomicBool::new(false));
    let h = p
        .try_complete_else_watch(
            Probe::new(1, &ready, Duration::from_secs(60), &journal),
            &[7],
        )
        .unwrap();
    let (p2, ready2) = (Arc::clone(&p), Arc::clone(&ready));
    let completer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        ready2.store(true, Ordering::SeqCst);
        p2.check_and_complete(&7)
    });
    let done = block_on(h);
    assert_eq!(done.outcome, Outcome::Completed);
    assert_eq!(done.operation.id, 1);
    assert_eq!(completer.join().unwrap(), 1);
    // And an expiring one.
    let h = p
        .try_complete_else_watch(
            Probe::new(
                2,
                &Arc::new(AtomicBool::new(false)),
                Duration::from_millis(10),
                &journal,
            ),
            &[7],
        )
        .unwrap();
    assert_eq!(block_on(h).outcome, Outcome::Expired);
    // And one forced from another thread through a completer.
    let h = p
        .try_complete_else_watch(
            Probe::new(
                3,
                &Arc::new(AtomicBool::new(false)),
                Duration::from_secs(60),
                &journal,
            ),
            &[7],
        )
        .unwrap();
    let completer = h.completer();
    let remote = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        completer.force_complete()
    });
    assert_eq!(block_on(h).outcome, Outcome::Completed);
    assert!(remote.join().unwrap());
}

#[test]
fn dropping_the_purgatory_answers_what_is_pending() {
    let journal = Arc::new(Journal::default());
    let never = Arc::new(AtomicBool::new(false));
    let h = {
        let p = threaded(TimerKind::Wheel, 1);
        p.try_complete_else_watch(
            Probe::new(1, &never, Duration::from_secs(60), &journal),
            &[1],
        )
        .unwrap()
    };
    assert_eq!(h.wait().outcome, Outcome::Shutdown);
}

/// Holds a reference to its own purgatory. On expiry it may shut the
/// purgatory down from its callback, which runs on one of the purgatory's
/// own workers (as a broker might on a fatal timeout). It says when its
/// drop, which lets go of the reference (and may so shut the purgatory
/// down), has returned.
struct HoldsPurgatory {
    purgatory: Option<Arc<Purgatory<u32, HoldsPurgatory>>>,
    timeout: Duration,
    shut_down_on_expiry: bool,
    let_go: Arc<AtomicBool>,
}

impl HoldsPurgatory {
    fn new(purgatory: &Arc<Purgatory<u32, HoldsPurgatory>>, timeout_ms: u64) -> Self {
        HoldsPurgatory {
            purgatory: Some(Arc::clone(purgatory)),
            timeout: Duration::from_millis(timeout_ms),
            shut_down_on_expiry: false,
            let_go: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl DelayedOperation for HoldsPurgatory {
    fn timeout(&self) -> Duration {
        self.timeout
    }
    fn try_complete(&mut self) -> bool {
        false
    }
    fn on_complete(&mut self, outcome: Outcome) {
        if outcome == Outcome::Expired && self.shut_down_on_expiry {
            if let Some(p) = &self.purgatory {
                p.shutdown();
            }
        }
    }
}

impl Drop for HoldsPurgatory {
    fn drop(&mut self) {
        drop(self.purgatory.take());
        self.let_go.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_callback_on_a_purgatory_thread_may_shut_the_purgatory_down() {
    for kind in KINDS {
        let p = Arc::new(threaded::<HoldsPurgatory>(kind, 2));
        let waiting = p
            .try_complete_else_watch(HoldsPurgatory::new(&p, 60_000), &[1])
            .unwrap();
        let mut fatal = HoldsPurgatory::new(&p, 5);
        fatal.shut_down_on_expiry = true;
        let fatal = p.try_complete_else_watch(fatal, &[1]).unwrap();
        let done = fatal.wait_timeout(PATIENCE).expect("expired in time");
        assert_eq!(done.outcome, Outcome::Expired);
        let rest = waiting
            .wait_timeout(PATIENCE)
            .expect("answered by the shutdown");
        assert_eq!(rest.outcome, Outcome::Shutdown);
        // The worker did not try to join itself (which fails, and would
        // count as the callback's panic), and the shutdown is in force.
        assert_eq!(p.metrics().panics, 0);
        assert!(p
            .try_complete_else_watch(HoldsPurgatory::new(&p, 5), &[1])
            .is_err());
    }
}

#[test]
fn the_last_reference_may_go_on_the_timer_thread() {
    // The baseline keeps an answered operation's heap entry until it
    // surfaces; the timer thread then drops the last reference to the
    // operation (its handle is gone), and with it the last reference to
    // the purgatory: the shutdown runs on the timer thread, which must not
    // wait for the workers (they wait for its sender to go).
    let p = Arc::new(threaded::<HoldsPurgatory>(
        TimerKind::DelayQueue {
            purge_interval: 1000,
        },
        1,
    ));
    let op = HoldsPurgatory::new(&p, 20);
    let let_go = Arc::clone(&op.let_go);
    drop(p.try_complete_else_watch(op, &[1]).unwrap());
    // Cancelling takes the key's list away; the heap entry is left.
    assert_eq!(p.cancel_for_key(&1), 1);
    drop(p);
    assert!(
        eventually(|| let_go.load(Ordering::SeqCst)),
        "the shutdown on the timer thread returned"
    );
}

/// The system's clock, with a token that says whether the purgatory still
/// holds it: its shared state does until it is freed.
struct TokenClock {
    _token: Arc<()>,
}

impl purgatory::Clock for TokenClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

#[test]
fn the_purgatory_is_freed_with_its_last_handle_whoever_answered() {
    for kind in KINDS {
        let token = Arc::new(());
        let journal = Arc::new(Journal::default());
        let never = Arc::new(AtomicBool::new(false));
        let p = Arc::new(
            Purgatory::builder("freed")
                .timer(kind)
                .clock(TokenClock {
                    _token: Arc::clone(&token),
                })
                .driver(Driver::Thread {
                    expiration_threads: 2,
                })
                .build()
                .unwrap(),
        );
        let submit = |id, ms| {
            p.try_complete_else_watch(
                Probe::new(id, &never, Duration::from_millis(ms), &journal),
                &[id as u32 % 7],
            )
            .unwrap()
        };
        // Cells answered every way and given back on several threads: by
        // expiry with no handle left (the workers give them back), forced
        // through handles and completers on other threads, checked; one
        // handle outlives the purgatory.
        let kept = submit(0, 60_000);
        std::thread::scope(|s| {
            for t in 0..3u64 {
                let submit = &submit;
                s.spawn(move || {
                    for i in 0..2_000 {
                        let id = 1 + t * 10_000 + i;
                        let h = submit(id, 1 + i % 5);
                        match i % 3 {
                            0 => drop(h),
                            1 => {
                                let c = h.completer();
                                std::thread::spawn(move || c.force_complete())
                                    .join()
                                    .unwrap();
                                drop(h);
                            }
                            _ => {
                                h.force_complete();
                            }
                        }
                    }
                });
            }
        });
        assert!(eventually(|| p.delayed() == 1), "all but one answered");
        drop(p);
        assert_eq!(kept.wait().outcome, Outcome::Shutdown);
        assert_eq!(Arc::strong_count(&token), 1, "{kind:?}: freed");
    }
}
