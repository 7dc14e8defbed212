//! Exhaustive interleavings of the hand-over of a decided operation to its
//! reader (`src/unchecked/handover.rs` with `state.rs`, compiled here
//! against loom's lock, cell and thread parking): a poll racing the answer
//! never panics and is never left pending without a wake-up, a blocked
//! waiter is always woken, a waker replaced by a later poll is the one
//! woken, and the reader never reaches the operation beside the thread
//! that completes it in place (loom's cell fails the model if it does).
#![allow(dead_code)]

#[path = "loom_support/sync.rs"]
mod sync;

#[path = "../src/unchecked/handover.rs"]
mod handover;
#[path = "../src/outcome.rs"]
mod outcome;
#[path = "../src/unchecked/state.rs"]
mod state;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use outcome::Outcome;
use state::{OpState, Request};
use std::sync::Arc;
use std::task::{Wake, Waker};

/// A waker that counts its wake-ups.
struct Counted(AtomicUsize);

impl Wake for Counted {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counted() -> (Arc<Counted>, Waker) {
    let count = Arc::new(Counted(AtomicUsize::new(0)));
    (count.clone(), Waker::from(count))
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

/// Serves `request` on a new thread, with a condition that `holds` or
/// not; whoever decides writes to the operation in place (7 becomes 8)
/// and hands it over.
fn serving(
    op: &loom::sync::Arc<OpState<u32>>,
    request: Request,
    holds: bool,
) -> thread::JoinHandle<()> {
    let op = op.clone();
    thread::spawn(move || {
        op.drive(
            request,
            |_| holds,
            |value, _| {
                *value += 1;
                true
            },
        );
    })
}

/// Answers the operation on a new thread: an expiry.
fn delivering(op: &loom::sync::Arc<OpState<u32>>) -> thread::JoinHandle<()> {
    serving(op, Request::Force(Outcome::Expired), false)
}

#[test]
fn a_poll_racing_the_answer_is_ready_or_pending_and_then_woken() {
    model(|| {
        let op = loom::sync::Arc::new(OpState::new(7));
        let (count, waker) = counted();
        let answer = delivering(&op);
        let first = op.poll_take(&waker).expect("nothing took the result");
        answer.join().unwrap();
        match first {
            Some(value) => assert_eq!(value, (Outcome::Expired, 8)),
            None => {
                // Pending: the delivery must have woken the waker it left,
                // and the next poll finds the result.
                assert_eq!(count.0.load(Ordering::SeqCst), 1, "lost wake-up");
                assert_eq!(op.poll_take(&waker), Ok(Some((Outcome::Expired, 8))));
            }
        }
        assert_eq!(op.outcome(), Some(Outcome::Expired));
        // Only now, after the take, is the result gone.
        assert!(op.poll_take(&waker).is_err());
    });
}

#[test]
fn the_waker_of_the_latest_poll_is_the_one_woken() {
    model(|| {
        let op = loom::sync::Arc::new(OpState::new(7));
        let (old_count, old) = counted();
        let (new_count, new) = counted();
        let answer = delivering(&op);
        let first = op.poll_take(&old).unwrap();
        let second = match first {
            Some(v) => Some(v),
            None => op.poll_take(&new).unwrap(),
        };
        answer.join().unwrap();
        if second.is_none() {
            // The task moved: the delivery must wake where it went.
            assert_eq!(new_count.0.load(Ordering::SeqCst), 1, "lost wake-up");
        } else {
            assert_eq!(new_count.0.load(Ordering::SeqCst), 0);
        }
        assert!(old_count.0.load(Ordering::SeqCst) <= 1);
    });
}

#[test]
fn a_blocked_waiter_is_always_woken() {
    model(|| {
        let op = loom::sync::Arc::new(OpState::new(7));
        let answer = delivering(&op);
        // loom reports a deadlock if the notification could be lost.
        assert_eq!(op.wait_take(), Ok((Outcome::Expired, 8)));
        answer.join().unwrap();
        assert!(op.wait_take().is_err());
    });
}

#[test]
fn a_poll_and_a_blocked_waiter_take_the_result_once_between_them() {
    model(|| {
        let op = loom::sync::Arc::new(OpState::new(7));
        let (_, waker) = counted();
        let answer = delivering(&op);
        let poller = {
            let op = op.clone();
            thread::spawn(move || op.poll_take(&waker))
        };
        let polled = poller.join().unwrap();
        answer.join().unwrap();
        let waited = op.wait_take();
        // Exactly one of the two has the value.
        match polled {
            Ok(Some(v)) => {
                assert_eq!(v, (Outcome::Expired, 8));
                assert!(waited.is_err());
            }
            Ok(None) => assert_eq!(waited, Ok((Outcome::Expired, 8))),
            Err(_) => panic!("taken before anyone took it"),
        }
    });
}

#[test]
fn a_check_that_holds_hands_over_what_it_wrote() {
    model(|| {
        let op = loom::sync::Arc::new(OpState::new(7));
        let answer = serving(&op, Request::Check, true);
        // loom fails the model if the take could reach the value while the
        // completing thread still writes it.
        assert_eq!(op.wait_take(), Ok((Outcome::Completed, 8)));
        answer.join().unwrap();
        assert_eq!(op.outcome(), Some(Outcome::Completed));
    });
}

#[test]
fn an_expiry_left_for_a_running_check_is_the_outcome_taken() {
    model(|| {
        let op = loom::sync::Arc::new(OpState::new(7));
        // A check that does not hold races an expiry: whichever thread
        // decides (the expirer, or the checker that finds its flag) runs
        // `finish` once, and the reader takes the expiry and what it wrote.
        let checker = serving(&op, Request::Check, false);
        let answer = delivering(&op);
        assert_eq!(op.wait_take(), Ok((Outcome::Expired, 8)));
        checker.join().unwrap();
        answer.join().unwrap();
    });
}
