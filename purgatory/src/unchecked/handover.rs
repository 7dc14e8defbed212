//! The hand-over of a decided operation from whoever completed it to its
//! reader (the handle), which may block on it, poll it as a future, or
//! never look.
//!
//! The operation never moves to a result slot of its own: it stays in the
//! state ([`OpState`]), and what moves is the right to reach it. The
//! deciding thread holds that right (`RUNNING`, kept forever once `DONE` is
//! set) until it has run `finish`; then it sets `HANDED` (a release), and
//! the one reader that sets `TAKEN`, under the waker's lock, takes the
//! operation out. The release and the reader's acquire of the word order
//! the decider's last access before the reader's, and only one reader
//! finds `HANDED` without `TAKEN`, so the two never reach the operation
//! together.
//!
//! The hand-over has three phases: waiting (with the waker of the last
//! poll, if any), handed, or taken. A poll reads the phase under the lock,
//! and a poll that leaves a waker marks the word `WAITING`; the decider
//! takes the lock to wake that waker only if it finds the mark when it
//! sets `HANDED`. Both marks are read-modify-writes of one word, so an
//! answer handed over at any moment is either seen by that poll or wakes
//! the waker it leaves: a poll racing the answer returns ready or pending,
//! and a pending poll is always woken. An answer nobody waits on yet (the
//! handle is read later, or was dropped) costs the decider one atomic
//! instruction, not a lock and an unlock besides. Only a poll after the
//! reader took the result finds it taken.

use super::state::{OpState, HANDED, TAKEN, WAITING};
use super::sync::{park, park_until, thread_waker, ByteLockGuard, ExclusiveRef, Ordering};
use crate::outcome::Outcome;
use std::mem::ManuallyDrop;
use std::task::Waker;
use std::time::Instant;

/// What a poll found when the reader had already taken the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taken;

/// The waker's slot, reached holding the state's lock.
pub(super) struct KeptWaker<'a> {
    // Declared first, so dropped before the lock is released.
    waker: ExclusiveRef<'a, Option<Waker>>,
    _held: ByteLockGuard<'a>,
}

impl std::ops::Deref for KeptWaker<'_> {
    type Target = Option<Waker>;
    fn deref(&self) -> &Option<Waker> {
        &self.waker
    }
}

impl std::ops::DerefMut for KeptWaker<'_> {
    fn deref_mut(&mut self) -> &mut Option<Waker> {
        &mut self.waker
    }
}

impl<O> OpState<O> {
    /// Takes the lock of the hand-over, and with it the waker's slot.
    fn lock_waker(&self) -> KeptWaker<'_> {
        let held = self.waker_lock.lock();
        // SAFETY: the slot is reached only here, holding the lock for as
        // long as the reference lives (the guard keeps both, and lets the
        // reference go first), and by `clear` through `&mut self`.
        let waker = unsafe { self.waker.get_mut() };
        KeptWaker { waker, _held: held }
    }

    /// Hands the operation over and wakes whoever waits for it, after the
    /// lock is released (a waker may run arbitrary code). Called once, by
    /// the thread that decided the outcome, after its last access to the
    /// operation.
    pub(super) fn hand_over(&self) {
        // Release: the decider's accesses to the operation come before
        // whatever the reader does once it sees the bit.
        let before = self.flags.fetch_or(HANDED, Ordering::Release);
        // No reader has left a waker, so there is nobody to wake, and one
        // that comes now finds `HANDED` (see `poll_take`): the lock is not
        // needed, which spares an answer nobody waits on yet (a handle
        // read later, or dropped) two read-modify-writes.
        if before & WAITING == 0 {
            return;
        }
        let waker = self.lock_waker().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The outcome, once handed over.
    pub(crate) fn outcome(&self) -> Option<Outcome> {
        let flags = self.flags.load(Ordering::Acquire);
        (flags & HANDED != 0).then(|| Self::outcome_of(flags))
    }

    /// Takes the result if it is there; otherwise keeps `waker`, to be woken
    /// on hand-over, and returns `Ok(None)`. `Err(Taken)` if the result was
    /// taken before.
    pub(crate) fn poll_take(&self, waker: &Waker) -> Result<Option<(Outcome, O)>, Taken> {
        let mut kept = self.lock_waker();
        let mut flags = self.flags.load(Ordering::Acquire);
        if flags & HANDED == 0 {
            match &*kept {
                Some(kept) if kept.will_wake(waker) => {}
                _ => *kept = Some(waker.clone()),
            }
            // The hand-over takes the lock, and the waker, only if it finds
            // `WAITING`. Both set their bit with a read-modify-write of the
            // same word, so one sees the other's: either the hand-over sees
            // `WAITING` and wakes the waker kept here (taking it once this
            // lock is released), or this sees `HANDED` and takes the result
            // now. Once the bit is set, a later poll's waker is found the
            // same way, under the lock, and needs no exchange of its own.
            if flags & WAITING == 0 {
                flags = self.flags.fetch_or(WAITING, Ordering::Acquire);
            }
            if flags & HANDED == 0 {
                return Ok(None);
            }
        }
        self.take(kept).map(Some)
    }

    /// Blocks until the result is there and takes it; `Err(Taken)` if it
    /// was taken before.
    pub(crate) fn wait_take(&self) -> Result<(Outcome, O), Taken> {
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
    pub(crate) fn wait_take_until(&self, deadline: Instant) -> Result<Option<(Outcome, O)>, Taken> {
        let waker = thread_waker();
        loop {
            if let Some(done) = self.poll_take(&waker)? {
                return Ok(Some(done));
            }
            if !park_until(deadline) {
                let mut kept = self.lock_waker();
                if self.flags.load(Ordering::Acquire) & HANDED == 0 {
                    *kept = None;
                    return Ok(None);
                }
                return self.take(kept).map(Some);
            }
        }
    }

    /// Takes a handed-over operation out, holding the waker's lock (`_lock`):
    /// only the caller that sets `TAKEN` under it reaches the operation.
    fn take(&self, _lock: KeptWaker<'_>) -> Result<(Outcome, O), Taken> {
        // Nobody else writes the word once `HANDED` is set: every request
        // finds `DONE` and returns, and only a reader, under the lock, sets
        // `WAITING` or `TAKEN`.
        let flags = self.flags.fetch_or(TAKEN, Ordering::Acquire);
        if flags & TAKEN != 0 {
            return Err(Taken);
        }
        if flags & HANDED == 0 {
            return Err(Taken); // the callers checked; never so
        }
        // SAFETY: `HANDED` is only set by `hand_over`, which the deciding
        // thread calls once after its last access to `op` and holding
        // `RUNNING` and `DONE`, never released, so no request reaches `op`
        // again; its release and this thread's acquire of the word order
        // that access before this one. This thread has just set `TAKEN`,
        // under the lock, and found it clear, so the operation is there and
        // no other take has run or can (only `clear`, with `&mut self`,
        // takes it otherwise, and sets the bit too).
        let op = unsafe { ManuallyDrop::take(&mut self.op.get_mut()) };
        Ok((Self::outcome_of(flags), op))
    }
}
