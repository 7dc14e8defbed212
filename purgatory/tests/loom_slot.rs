//! Exhaustive interleavings of the hand-over of a result to its handle
//! (`src/result/slot.rs`, compiled here against loom's lock and thread
//! parking): a poll racing the delivery never panics and is never left
//! pending without a wake-up, a blocked waiter is always woken, and a
//! waker replaced by a later poll is the one woken.
#![allow(dead_code)]

mod sync {
    use std::time::Instant;

    pub(crate) use loom::sync::MutexGuard;

    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap()
        }

        pub(crate) fn get_mut(&mut self) -> &mut T {
            self.0.get_mut().unwrap()
        }
    }

    struct Unpark(loom::thread::Thread);

    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }

    pub(crate) fn thread_waker() -> std::task::Waker {
        std::task::Waker::from(std::sync::Arc::new(Unpark(loom::thread::current())))
    }

    pub(crate) fn park() {
        loom::thread::park();
    }

    /// Loom has no timed park: the models do not wait with a deadline.
    pub(crate) fn park_until(_deadline: Instant) -> bool {
        loom::thread::park();
        true
    }
}

#[path = "../src/caught.rs"]
mod caught;
#[path = "../src/outcome.rs"]
mod outcome;
#[path = "../src/result/slot.rs"]
mod slot;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use outcome::Outcome;
use slot::ResultSlot;
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

fn delivering(slot: &loom::sync::Arc<ResultSlot<u32>>) -> thread::JoinHandle<()> {
    let slot = slot.clone();
    thread::spawn(move || slot.deliver(Outcome::Expired, 7))
}

#[test]
fn a_poll_racing_the_answer_is_ready_or_pending_and_then_woken() {
    model(|| {
        let slot = loom::sync::Arc::new(ResultSlot::new());
        let (count, waker) = counted();
        let answer = delivering(&slot);
        let first = slot.poll_take(&waker).expect("nothing took the result");
        answer.join().unwrap();
        match first {
            Some(value) => assert_eq!(value, (Outcome::Expired, 7)),
            None => {
                // Pending: the delivery must have woken the waker it left,
                // and the next poll finds the result.
                assert_eq!(count.0.load(Ordering::SeqCst), 1, "lost wake-up");
                assert_eq!(slot.poll_take(&waker), Ok(Some((Outcome::Expired, 7))));
            }
        }
        assert_eq!(slot.outcome(), Some(Outcome::Expired));
        // Only now, after `Ready`, is the result gone.
        assert!(slot.poll_take(&waker).is_err());
    });
}

#[test]
fn the_waker_of_the_latest_poll_is_the_one_woken() {
    model(|| {
        let slot = loom::sync::Arc::new(ResultSlot::new());
        let (old_count, old) = counted();
        let (new_count, new) = counted();
        let answer = delivering(&slot);
        let first = slot.poll_take(&old).unwrap();
        let second = match first {
            Some(v) => Some(v),
            None => slot.poll_take(&new).unwrap(),
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
        let slot = loom::sync::Arc::new(ResultSlot::new());
        let answer = delivering(&slot);
        // loom reports a deadlock if the notification could be lost.
        assert_eq!(slot.wait_take(), Ok((Outcome::Expired, 7)));
        answer.join().unwrap();
        assert!(slot.wait_take().is_err());
    });
}

#[test]
fn a_poll_and_a_blocked_waiter_take_the_result_once_between_them() {
    model(|| {
        let slot = loom::sync::Arc::new(ResultSlot::new());
        let (_, waker) = counted();
        let answer = delivering(&slot);
        let poller = {
            let slot = slot.clone();
            thread::spawn(move || slot.poll_take(&waker))
        };
        let polled = poller.join().unwrap();
        answer.join().unwrap();
        let waited = slot.wait_take();
        // Exactly one of the two has the value.
        match polled {
            Ok(Some(v)) => {
                assert_eq!(v, (Outcome::Expired, 7));
                assert!(waited.is_err());
            }
            Ok(None) => assert_eq!(waited, Ok((Outcome::Expired, 7))),
            Err(_) => panic!("taken before anyone took it"),
        }
    });
}
