//! Every `unsafe` block of the crate, and nothing else. The crate root
//! denies `unsafe_code` everywhere but here, so the compiler keeps it so.
//!
//! Each piece buys a measured speed-up or saving of memory (figures in
//! `docs/performance.md`) and offers a safe interface whose
//! soundness does not depend on how the rest of the crate calls it:
//!
//! - [`state`]: an operation's completion state machine. The operation sits
//!   in an `UnsafeCell` whose lock is the state word's `RUNNING` bit, instead
//!   of a mutex of its own (two atomic read-modify-writes per check fewer).
//!   Model-checked with loom (`tests/loom_state.rs`, which compiles `state.rs`
//!   against loom's versions of [`sync`]'s names).
//! - [`handover`]: the decided operation handed to its reader where it
//!   lies, rather than moved to a result slot of its own: a cell holds
//!   room for the operation once, not twice, and a bit of the state word
//!   says whether it is still there. The reader takes it under the
//!   waker's lock; the decider takes that lock only if a reader left a
//!   waker. Model-checked with loom too (`tests/loom_handover.rs`).
//! - [`hand_back`]: a handle's reference to its answered cell given to
//!   the spare cells as it is, rather than cloned for them and dropped:
//!   two locked instructions on the cell's count fewer per operation, on
//!   the completing thread (docs/performance.md). The reference moves out
//!   of the handle in its drop, and is parked in a magazine of a pool
//!   that only the cell keeps alive.
//! - [`pi_mutex`] (Linux): the timer's lock, on a priority-inheriting
//!   futex, so that a purgatory thread in a real-time class waiting behind a
//!   preempted submitter lends it its priority instead of waiting for its
//!   next turn (figures in docs/performance.md). Its word and
//!   the kernel's protocol for it need raw system calls and an
//!   `UnsafeCell`.
//! - [`lane`]: the timer's lanes, whose entries a completion takes out
//!   without the timer's lock, by moving its cell's timer word away from
//!   the entry's id; a chunk counts who may still reach it and is freed by
//!   the last. The id is the chunk's address, and the slots hold raw
//!   references. `purgatory_perf`'s low case at 1M/s: 1.175 -> 0.975 µs
//!   per request (docs/performance.md). Model-checked with loom
//!   (`tests/loom_lane.rs`).
//! - [`watch_list`]: the watch lists, whose entries a completion takes
//!   out without the list's lock, by moving the slot's word (a raw
//!   reference) to 0; a walk that clones references raises a flag that
//!   such a completion waits on, and a chunk counts who may still reach
//!   it and is freed by the last. `purgatory_perf` at 1M/s (Intel Xeon
//!   VM, 6 alternating pairs): 0.859-0.918 -> 0.723-0.749 µs per request
//!   in the low case (docs/performance.md). Model-checked with loom
//!   (`tests/loom_watch_list.rs`).
//! - [`monotonic`] (Linux): the monotonic clock read in nanoseconds
//!   through the C library, for the deadline each submission computes,
//!   rather than as an `Instant` that std's arithmetic then takes apart
//!   (figures in docs/performance.md).
//! - [`prefetch`]: cache-line hints before a completion takes its locks, and
//!   for the cells a batch of completions comes to next;
//!   the intrinsic is `unsafe` only for its target feature.
//! - [`sync`]: the names the files above are written against, which the
//!   loom models swap for loom's: among them `Exclusive`, a value one
//!   thread at a time reaches by a protocol outside it, and `ByteLock`,
//!   `parking_lot`'s raw lock kept apart from the waker it guards, so
//!   that its byte fits beside the state word (a 32-byte operation's cell
//!   in two cache lines; docs/performance.md), released by its guard.

pub(crate) mod hand_back;
pub(crate) mod handover;
pub(crate) mod lane;
#[cfg(test)]
pub(crate) mod lane_tests;
#[cfg(target_os = "linux")]
pub(crate) mod monotonic;
#[cfg(target_os = "linux")]
pub(crate) mod pi_mutex;
pub(crate) mod prefetch;
pub(crate) mod state;
mod sync;
pub(crate) mod watch_list;
#[cfg(test)]
mod watch_list_tests;

pub(crate) use handover::Taken;
pub(crate) use state::{OpState, Request, Served};

#[cfg(test)]
mod tests {
    use super::sync::thread_token;
    use super::{OpState, Request};
    use crate::outcome::Outcome;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A `new_held` state whose setup right is checked: `start` runs
    /// `setup` and reports whether it did.
    fn started(state: &OpState<u32>) -> bool {
        let mut ran = false;
        state.start(|_| ran = true, |_| false, |_, _| false);
        ran
    }

    #[test]
    fn only_the_creator_starts_a_held_state_and_only_once() {
        let state = OpState::new_held(7);
        let elsewhere = std::thread::scope(|s| s.spawn(|| started(&state)).join().unwrap());
        assert!(!elsewhere, "another thread has no setup right");
        let mut inner = None;
        state.start(
            |_| inner = Some(started(&state)),
            |_| false,
            |_, _| panic!("nothing decides it"),
        );
        assert_eq!(inner, Some(false), "setup cannot start it again");
        assert!(!started(&state), "nor can a second start");
        let mut decided = false;
        state.decide_at_start(Outcome::Completed, |_, _| {
            decided = true;
            false
        });
        assert!(!decided && !state.is_done());
    }

    #[test]
    fn decide_at_start_takes_the_right_too() {
        let state = OpState::new_held(7);
        let mut finished = None;
        state.decide_at_start(Outcome::Expired, |op, outcome| {
            finished = Some((*op, outcome));
            true
        });
        assert_eq!(finished, Some((7, Outcome::Expired)));
        assert!(!started(&state));
        // A state nobody holds has no setup right to take.
        assert!(!started(&OpState::new(7)));
    }

    /// Counts its drops; panics in `Drop` if asked to.
    struct Counted<'a>(&'a AtomicUsize, bool);

    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
            if self.1 {
                panic!("drop");
            }
        }
    }

    fn decided<'a>(op: Counted<'a>, read: bool) -> OpState<Counted<'a>> {
        let state = OpState::new_held(op);
        state.decide_at_start(Outcome::Cancelled, |_, _| read);
        assert!(state.is_done());
        state
    }

    #[test]
    fn a_decided_operation_is_handed_over_once_where_it_lies() {
        let drops = AtomicUsize::new(0);
        let state = decided(Counted(&drops, false), true);
        assert_eq!(state.outcome(), Some(Outcome::Cancelled));
        let waker = std::task::Waker::noop();
        let (outcome, op) = state.poll_take(waker).unwrap().unwrap();
        assert_eq!(outcome, Outcome::Cancelled);
        assert!(state.poll_take(waker).is_err(), "taken once");
        assert!(state.wait_take().is_err());
        drop(state);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        drop(op);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_operation_nobody_takes_goes_with_its_state_once() {
        let drops = AtomicUsize::new(0);
        // Handed over but never taken, and never handed over (no reader):
        // the state keeps it, and drops it once, panic or not.
        for read in [true, false] {
            for panics in [false, true] {
                drops.store(0, Ordering::SeqCst);
                let state = decided(Counted(&drops, panics), read);
                assert_eq!(state.outcome().is_some(), read);
                assert_eq!(drops.load(Ordering::SeqCst), 0);
                drop(state);
                assert_eq!(drops.load(Ordering::SeqCst), 1);
            }
        }
        // Cleared for reuse: dropped then, not again with the state.
        let mut state = decided(Counted(&drops, false), true);
        drops.store(0, Ordering::SeqCst);
        state.clear();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(state);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // Cleared before anything decided it (as nothing in the crate
        // does): inert, so no later call reaches the operation it dropped.
        drops.store(0, Ordering::SeqCst);
        let mut state = OpState::new_held(Counted(&drops, false));
        state.clear();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        let reached = std::cell::Cell::new(false);
        let touch = |_: &mut Counted| reached.set(true);
        let check = |op: &mut Counted| {
            touch(op);
            true
        };
        let finish = |op: &mut Counted, _| {
            touch(op);
            true
        };
        state.start(touch, check, finish);
        state.drive(Request::Check, check, finish);
        state.drive(Request::Force(Outcome::Expired), check, finish);
        assert!(!reached.get() && state.outcome().is_none());
        assert!(state.poll_take(std::task::Waker::noop()).unwrap().is_none());
        drop(state);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn thread_tokens_are_never_reused() {
        let mut seen = HashSet::from([thread_token()]);
        for _ in 0..64 {
            // Each thread ends before the next starts, so a thread-local's
            // address could come round again; a token must not.
            let token = std::thread::spawn(thread_token).join().unwrap();
            assert!(token != 0 && token < 1 << 63);
            assert!(seen.insert(token), "token {token} reused");
        }
        assert_eq!(thread_token(), thread_token());
    }
}
