//! The completion state machine of one delayed operation: who may run its
//! code, and who decides its outcome, whatever threads race.
//!
//! Two things are asked of an operation: *check* (run `try_complete`) and
//! *force* (end it with a given outcome: expired, cancelled, shut down or
//! completed from outside). The rules:
//!
//! 1. Only the thread holding the operation's lock runs its code, so
//!    `try_complete` never runs beside itself or beside completion.
//! 2. Nobody waits for that lock. A request that finds it held leaves a flag
//!    (`RECHECK`, or `FORCED` plus the outcome) and returns; the holder looks
//!    at the flags again after unlocking and goes round once more. This is
//!    Kafka's `tryCompletePending` protocol, extended to forced outcomes: a
//!    thread calling in from a user callback, or holding a lock of its own,
//!    can never deadlock on an operation.
//! 3. The outcome is decided once, by the lock holder, and `DONE` is set
//!    before the lock is released; after that every request is a no-op.
//!
//! A request from the thread that holds the lock (an operation's own code
//! calling back into the purgatory) is recognised by the holder's token and
//! returns at once: a check is covered by the one running, a forced outcome
//! is picked up when it returns. Without that, a `try_complete` that checks
//! its own key would raise `RECHECK` on itself for ever.
//!
//! Why no request is lost: a requester that fails to take the lock sets
//! `RECHECK` and, if it was the one to set it, tries the lock once more.
//! Either that second try succeeds (and the requester serves itself), or some
//! thread holds the lock that took it after the flag was set (and so sees
//! the flag when it reads the flags under the lock) or before (and so sees
//! it when it re-reads the flags after unlocking).

use crate::outcome::Outcome;
use crate::sync::{thread_token, AtomicU32, AtomicU64, Ordering, TryLock};

/// Set once the outcome is decided.
const DONE: u32 = 1;
/// A check was asked for while the operation was locked.
const RECHECK: u32 = 1 << 1;
/// A forced outcome was asked for; the outcome is in bits 8.. .
const FORCED: u32 = 1 << 2;
const OUTCOME_SHIFT: u32 = 8;

/// What a caller asks of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    /// Run its condition; complete it if it holds.
    Check,
    /// End it with this outcome, whatever its condition.
    Force(Outcome),
}

/// An operation and its completion state.
pub(crate) struct OpState<O> {
    flags: AtomicU32,
    /// The token of the thread holding `op`'s lock, or 0.
    owner: AtomicU64,
    /// `Some` until the outcome is decided; the op is then handed to `finish`.
    op: TryLock<Option<O>>,
}

impl<O> OpState<O> {
    pub(crate) fn new(op: O) -> Self {
        OpState {
            flags: AtomicU32::new(0),
            owner: AtomicU64::new(0),
            op: TryLock::new(Some(op)),
        }
    }

    /// Whether the outcome has been decided.
    pub(crate) fn is_done(&self) -> bool {
        self.flags.load(Ordering::Acquire) & DONE != 0
    }

    /// Serves `request`. `check` runs the condition with exclusive access;
    /// `finish` is called, at most once over all callers, by the caller that
    /// decides the outcome, with the operation moved out. Returns whether this
    /// call decided the outcome.
    pub(crate) fn drive(
        &self,
        request: Request,
        mut check: impl FnMut(&mut O) -> bool,
        finish: impl FnOnce(O, Outcome),
    ) -> bool {
        if let Request::Force(outcome) = request {
            let forced = FORCED | (outcome.code() << OUTCOME_SHIFT);
            let update = self
                .flags
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |f| {
                    (f & (DONE | FORCED) == 0).then_some(f | forced)
                });
            if update.is_err() {
                // Already decided, or another outcome was forced first.
                return false;
            }
        }
        let mut finish = Some(finish);
        loop {
            if self.is_done() {
                return false;
            }
            let Some(mut guard) = self.op.try_lock() else {
                if self.owner.load(Ordering::Acquire) == thread_token() {
                    // Called back from this operation's own code.
                    return false;
                }
                // Someone else holds it: make sure they look again. If the
                // flag was already up, whoever raised it is responsible.
                let before = self.flags.fetch_or(RECHECK, Ordering::AcqRel);
                if before & (RECHECK | DONE) != 0 {
                    return false;
                }
                continue;
            };
            let flags = self.flags.fetch_and(!RECHECK, Ordering::AcqRel);
            if flags & DONE != 0 {
                return false;
            }
            let outcome = if flags & FORCED != 0 {
                Some(Outcome::from_code(flags >> OUTCOME_SHIFT))
            } else {
                let op = guard.as_mut().expect("a pending operation is present");
                self.owner.store(thread_token(), Ordering::Release);
                let holds = check(op);
                self.owner.store(0, Ordering::Release);
                holds.then_some(Outcome::Completed)
            };
            if let Some(outcome) = outcome {
                let op = guard.take().expect("a pending operation is present");
                self.flags.fetch_or(DONE, Ordering::AcqRel);
                drop(guard);
                (finish.take().expect("finish runs once"))(op, outcome);
                return true;
            }
            drop(guard);
            // Asked again while we held it? Go round; otherwise we're done.
            let flags = self.flags.load(Ordering::Acquire);
            if flags & DONE != 0 || flags & (RECHECK | FORCED) == 0 {
                return false;
            }
        }
    }
}
