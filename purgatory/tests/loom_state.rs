//! Exhaustive interleavings of the completion state machine
//! (`src/unchecked/state.rs`, compiled here against loom's primitives):
//! condition vs expiry vs cancel, two checkers, a force racing a check, and
//! what a forced completion is told when it races an expiry.
#![allow(dead_code)]

#[path = "loom_support/sync.rs"]
mod sync;

#[path = "../src/unchecked/handover.rs"]
mod handover;
#[path = "../src/outcome.rs"]
mod outcome;
#[path = "../src/unchecked/state.rs"]
mod state;

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use outcome::Outcome;
use state::{OpState, Request, Served};

/// An operation whose condition is a flag, counting what is done to it.
struct Op {
    ready: Arc<AtomicBool>,
    /// Threads inside `try_complete` right now.
    inside: Arc<AtomicUsize>,
}

struct World {
    state: OpState<Op>,
    ready: Arc<AtomicBool>,
    inside: Arc<AtomicUsize>,
    finished: AtomicUsize,
    outcome: AtomicUsize,
}

impl World {
    fn new() -> Arc<World> {
        Self::build(OpState::new)
    }

    /// As a submitter makes it: held by the calling thread until `start`.
    fn new_held() -> Arc<World> {
        Self::build(OpState::new_held)
    }

    fn build(state: fn(Op) -> OpState<Op>) -> Arc<World> {
        let ready = Arc::new(AtomicBool::new(false));
        let inside = Arc::new(AtomicUsize::new(0));
        Arc::new(World {
            state: state(Op {
                ready: ready.clone(),
                inside: inside.clone(),
            }),
            ready,
            inside,
            finished: AtomicUsize::new(0),
            outcome: AtomicUsize::new(usize::MAX),
        })
    }

    /// Whether this call decided the outcome.
    fn serve(&self, request: Request) -> bool {
        matches!(self.serve_detailed(request), Served::Held | Served::Decided)
    }

    fn serve_detailed(&self, request: Request) -> Served {
        self.state
            .drive(request, |op| self.check(op), |op, o| self.finish(op, o))
    }

    /// The submitter's end of `new_held`: a setup that touches the
    /// operation (loom fails the model if anyone else can reach it then),
    /// then the final check.
    fn start(&self) -> bool {
        self.state.start(
            |op| assert_eq!(op.inside.load(Ordering::SeqCst), 0),
            |op| self.check(op),
            |op, o| self.finish(op, o),
        )
    }

    fn check(&self, op: &mut Op) -> bool {
        // Never two checks at once on one operation.
        assert_eq!(op.inside.fetch_add(1, Ordering::SeqCst), 0);
        let holds = op.ready.load(Ordering::SeqCst);
        op.inside.fetch_sub(1, Ordering::SeqCst);
        holds
    }

    /// Runs in place; nobody reads the result (the hand-over has a model
    /// of its own, `loom_handover.rs`).
    fn finish(&self, op: &mut Op, outcome: Outcome) -> bool {
        assert_eq!(op.inside.load(Ordering::SeqCst), 0, "finish beside a check");
        self.outcome.store(outcome as usize, Ordering::SeqCst);
        self.finished.fetch_add(1, Ordering::SeqCst);
        false
    }

    fn outcome(&self) -> Outcome {
        Outcome::from_code(self.outcome.load(Ordering::SeqCst) as u32)
    }
}

/// Runs `f` on a new loom thread with its own reference to `w`.
fn on_thread(
    w: &Arc<World>,
    f: impl FnOnce(&World) -> bool + Send + 'static,
) -> thread::JoinHandle<bool> {
    let w = w.clone();
    thread::spawn(move || f(&w))
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

#[test]
fn condition_expiry_and_cancel_race_to_exactly_one_outcome() {
    model(|| {
        let w = World::new();
        let checker = on_thread(&w, |w| {
            w.ready.store(true, Ordering::SeqCst);
            w.serve(Request::Check)
        });
        let expirer = on_thread(&w, |w| w.serve(Request::Force(Outcome::Expired)));
        let cancelled = w.serve(Request::Force(Outcome::Cancelled));
        let checked = checker.join().unwrap();
        let expired = expirer.join().unwrap();
        assert_eq!(w.finished.load(Ordering::SeqCst), 1);
        assert!(w.state.is_done());
        // At most one caller says it decided, and it agrees with the outcome.
        assert!(usize::from(checked) + usize::from(expired) + usize::from(cancelled) <= 1);
        if cancelled {
            assert_eq!(w.outcome(), Outcome::Cancelled);
        }
        if expired {
            assert_eq!(w.outcome(), Outcome::Expired);
        }
    });
}

#[test]
fn a_check_asked_for_while_another_runs_is_never_lost() {
    model(|| {
        let w = World::new();
        // Thread A checks while the condition is false; thread B makes it
        // true and checks. Whatever the interleaving, the operation must end
        // completed: B's check is served by B or handed to A.
        let a = on_thread(&w, |w| w.serve(Request::Check));
        w.ready.store(true, Ordering::SeqCst);
        w.serve(Request::Check);
        a.join().unwrap();
        assert_eq!(w.finished.load(Ordering::SeqCst), 1);
        assert_eq!(w.outcome(), Outcome::Completed);
    });
}

#[test]
fn a_forced_outcome_asked_for_during_a_check_is_never_lost() {
    model(|| {
        let w = World::new();
        let a = on_thread(&w, |w| w.serve(Request::Check));
        w.serve(Request::Force(Outcome::Expired));
        a.join().unwrap();
        // The condition never held, so only the expiry can have ended it.
        assert_eq!(w.finished.load(Ordering::SeqCst), 1);
        assert_eq!(w.outcome(), Outcome::Expired);
    });
}

#[test]
fn a_check_during_the_submitters_hold_is_never_lost() {
    model(|| {
        let w = World::new_held();
        // The condition comes true and a check is asked for while the
        // submitter still sets the operation up: its `start` must serve it
        // (or let go first, so that the checker runs it itself).
        let checker = on_thread(&w, |w| {
            w.ready.store(true, Ordering::SeqCst);
            w.serve(Request::Check)
        });
        let started = w.start();
        let checked = checker.join().unwrap();
        assert_eq!(w.finished.load(Ordering::SeqCst), 1);
        assert_eq!(w.outcome(), Outcome::Completed);
        assert!(usize::from(started) + usize::from(checked) == 1);
    });
}

#[test]
fn an_expiry_during_the_submitters_hold_ends_it_exactly_once() {
    model(|| {
        let w = World::new_held();
        let expirer = on_thread(&w, |w| w.serve(Request::Force(Outcome::Expired)));
        let started = w.start();
        let expired = expirer.join().unwrap();
        // The condition never holds: only the expiry can end it, decided by
        // the expirer itself or by the submitter that saw its flag.
        assert_eq!(w.finished.load(Ordering::SeqCst), 1);
        assert_eq!(w.outcome(), Outcome::Expired);
        assert!(usize::from(started) + usize::from(expired) == 1);
    });
}

#[test]
fn a_forced_completion_is_reported_exactly_when_it_is_the_outcome() {
    model(|| {
        let w = World::new();
        // The condition never holds: a check runs (so a force may find the
        // operation busy), an expiry and a forced completion race.
        let checker = on_thread(&w, |w| w.serve(Request::Check));
        let expirer = on_thread(&w, |w| w.serve(Request::Force(Outcome::Expired)));
        let forced = w.serve_detailed(Request::Force(Outcome::Completed));
        checker.join().unwrap();
        expirer.join().unwrap();
        assert_eq!(w.finished.load(Ordering::SeqCst), 1);
        // What `Delayed::force_complete` answers from it.
        let reported = matches!(forced, Served::Decided | Served::Left);
        assert_eq!(reported, w.outcome() == Outcome::Completed, "{forced:?}");
    });
}
