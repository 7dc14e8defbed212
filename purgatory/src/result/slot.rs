//! The hand-over of one operation's result from whoever completes it to its
//! handle, which may block on it, poll it as a future, or never look.
//!
//! The slot is one state under one lock: waiting (with the waker of the
//! last poll, if any), ready (the result is there), or taken (the handle
//! has it). A poll decides among the three under that lock, so a result
//! delivered at any moment is either seen by that poll or wakes the waker
//! it leaves: a poll racing the answer returns ready or pending, and a
//! pending poll is always woken. Only a poll after the handle took the
//! result finds it taken.

use super::sync::{park, park_until, thread_waker, Mutex};
use crate::caught;
use crate::outcome::Outcome;
use std::task::Waker;
use std::time::Instant;

/// A thread blocked on the result is one more waker: its poll leaves a
/// waker that unparks it, so the slot needs no condition variable of its
/// own (8 bytes in every cell), and a blocked wait is woken exactly as a
/// task is.
pub(crate) struct ResultSlot<T> {
    state: Mutex<State<T>>,
}

enum State<T> {
    /// Not answered yet; the waker of the last poll, if any.
    Waiting(Option<Waker>),
    /// Answered; the result waits for the handle.
    Ready(Outcome, T),
    /// Answered, and the handle took the result.
    Taken(Outcome),
}

/// What a poll found when the handle had already taken the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taken;

impl<T> ResultSlot<T> {
    pub(crate) fn new() -> Self {
        ResultSlot {
            state: Mutex::new(State::Waiting(None)),
        }
    }

    /// Stores the result and wakes whoever waits for it, after the lock is
    /// released (a waker may run arbitrary code). The state machine
    /// delivers once per operation; a second delivery is ignored.
    pub(crate) fn deliver(&self, outcome: Outcome, value: T) {
        let mut state = self.state.lock();
        let State::Waiting(waker) = &mut *state else {
            drop(state);
            debug_assert!(false, "a result delivered twice");
            caught::drop_logged(value);
            return;
        };
        let waker = waker.take();
        *state = State::Ready(outcome, value);
        drop(state);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The outcome, once delivered.
    pub(crate) fn outcome(&self) -> Option<Outcome> {
        match &*self.state.lock() {
            State::Waiting(_) => None,
            State::Ready(outcome, _) | State::Taken(outcome) => Some(*outcome),
        }
    }

    /// Takes the result if it is there; otherwise keeps `waker`, to be woken
    /// on delivery, and returns `Ok(None)`. `Err(Taken)` if the result was
    /// taken before.
    pub(crate) fn poll_take(&self, waker: &Waker) -> Result<Option<(Outcome, T)>, Taken> {
        let mut state = self.state.lock();
        if let Some(taken) = Self::take(&mut state) {
            return taken.map(Some);
        }
        if let State::Waiting(kept) = &mut *state {
            match kept {
                Some(kept) if kept.will_wake(waker) => {}
                _ => *kept = Some(waker.clone()),
            }
        }
        Ok(None)
    }

    /// Blocks until the result is there and takes it; `Err(Taken)` if it
    /// was taken before.
    pub(crate) fn wait_take(&self) -> Result<(Outcome, T), Taken> {
        let waker = thread_waker();
        loop {
            if let Some(done) = self.poll_take(&waker)? {
                return Ok(done);
            }
            park();
        }
    }

    /// Blocks until the result is there or `deadline` passes, and takes it
    /// (`Ok(None)` on timeout, and then no waker of this thread is left).
    pub(crate) fn wait_take_until(&self, deadline: Instant) -> Result<Option<(Outcome, T)>, Taken> {
        let waker = thread_waker();
        loop {
            if let Some(done) = self.poll_take(&waker)? {
                return Ok(Some(done));
            }
            if !park_until(deadline) {
                let mut state = self.state.lock();
                if let Some(taken) = Self::take(&mut state) {
                    return taken.map(Some);
                }
                if let State::Waiting(kept) = &mut *state {
                    *kept = None;
                }
                return Ok(None);
            }
        }
    }

    /// Takes a ready result; `None` while waiting.
    fn take(state: &mut State<T>) -> Option<Result<(Outcome, T), Taken>> {
        match state {
            State::Waiting(_) => None,
            State::Taken(_) => Some(Err(Taken)),
            State::Ready(outcome, _) => {
                let outcome = *outcome;
                match std::mem::replace(state, State::Taken(outcome)) {
                    State::Ready(_, value) => Some(Ok((outcome, value))),
                    _ => unreachable!("matched as ready just above"),
                }
            }
        }
    }

    /// Empties the slot for reuse: drops a result never taken (guarded, as
    /// it holds the user's operation) and a waker.
    pub(crate) fn clear(&mut self) {
        let state = std::mem::replace(self.state.get_mut(), State::Waiting(None));
        caught::drop_logged(state);
    }
}

/// The last reference to a slot may go on one of the purgatory's threads
/// (its handle went while the operation was being answered): a result never
/// taken, which holds the user's operation, must not take that thread down.
impl<T> Drop for ResultSlot<T> {
    fn drop(&mut self) {
        self.clear();
    }
}
