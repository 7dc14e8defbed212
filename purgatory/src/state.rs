//! The completion state machine of one delayed operation: who may run its
//! code, and who decides its outcome, whatever threads race.
//!
//! Two things are asked of an operation: *check* (run `try_complete`) and
//! *force* (end it with a given outcome: expired, cancelled, shut down or
//! completed from outside). Everything is decided on one atomic word:
//!
//! - `RUNNING`: a thread has the operation; only it runs the operation's
//!   code, so `try_complete` never runs beside itself or beside completion.
//! - `RECHECK`: a check was asked for while it was running.
//! - `FORCED` and an outcome: a forced end was asked for.
//! - `DONE`: the outcome is decided; every later request is a no-op.
//!
//! Nobody waits. A request that finds `RUNNING` leaves its flag and returns;
//! the runner releases with a compare-exchange that fails if any flag
//! arrived meanwhile, and then goes round again. Because requests and release
//! are read-modify-writes of the same word, the word's modification order
//! alone shows that no request is lost: a flag is either set before the
//! release (which then fails and sees it) or after it (when `RUNNING` is
//! clear, so the requester takes the operation itself). This is Kafka's
//! `tryCompletePending` idea, extended to forced outcomes, with the lock
//! folded into the flags. (A first version kept the lock apart from the
//! flags; the loom model found a lost check there on weak memory.)
//!
//! A request from the running thread itself (an operation's code calling
//! back into the purgatory) is recognised by the runner's token and returns
//! at once: a check is covered by the one running, a forced outcome is picked
//! up when it returns.

use crate::outcome::Outcome;
use crate::sync::{thread_token, AtomicU32, AtomicU64, Exclusive, Ordering};

const RUNNING: u32 = 1;
const RECHECK: u32 = 1 << 1;
const FORCED: u32 = 1 << 2;
const DONE: u32 = 1 << 3;
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
    /// The token of the thread running the operation's code, or 0. Only
    /// the running thread writes its own token, so reading it back proves
    /// a call comes from inside that code.
    owner: AtomicU64,
    /// `Some` until the outcome is decided. Only the `RUNNING` thread
    /// reaches it; the bit is its lock.
    op: Exclusive<Option<O>>,
}

impl<O> OpState<O> {
    pub(crate) fn new(op: O) -> Self {
        OpState {
            flags: AtomicU32::new(0),
            owner: AtomicU64::new(0),
            op: Exclusive::new(Some(op)),
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
        check: impl FnMut(&mut O) -> bool,
        finish: impl FnOnce(O, Outcome),
    ) -> bool {
        let mut flags = self.flags.load(Ordering::Acquire);
        loop {
            if flags & DONE != 0 {
                return false;
            }
            let wanted = match request {
                // Another outcome was forced first: it wins.
                Request::Force(_) if flags & FORCED != 0 => return false,
                Request::Force(outcome) => {
                    flags | FORCED | (outcome.code() << OUTCOME_SHIFT) | RUNNING
                }
                Request::Check if flags & RUNNING != 0 => {
                    if self.owner.load(Ordering::Relaxed) == thread_token() {
                        return false; // called back from its own code
                    }
                    flags | RECHECK
                }
                Request::Check => flags | RUNNING,
            };
            match self.flags.compare_exchange_weak(
                flags,
                wanted,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                // Taken while running: the runner will see our flag.
                Ok(before) if before & RUNNING != 0 => return false,
                Ok(_) => return self.run(wanted, check, finish),
                Err(now) => flags = now,
            }
        }
    }

    /// Runs the operation, holding `RUNNING`, until it completes or no
    /// request is left.
    fn run(
        &self,
        mut flags: u32,
        mut check: impl FnMut(&mut O) -> bool,
        finish: impl FnOnce(O, Outcome),
    ) -> bool {
        loop {
            // Every request so far is served by this round.
            if flags & RECHECK != 0 {
                flags = self.flags.fetch_and(!RECHECK, Ordering::AcqRel) & !RECHECK;
            }
            let decided = {
                // SAFETY: this thread holds `RUNNING`: it set the bit with its
                // own compare-exchange in `drive` (or kept it through a failed
                // release below), and only the `RUNNING` thread ever reaches
                // `op`. This access ends with this block, before the bit is
                // released, and the acquire/release on `flags` orders it
                // before the next holder's.
                let mut op = unsafe { self.op.get_mut() };
                let outcome = if flags & FORCED != 0 {
                    Some(Outcome::from_code(flags >> OUTCOME_SHIFT))
                } else if let Some(pending) = op.as_mut() {
                    self.owner.store(thread_token(), Ordering::Relaxed);
                    let holds = check(pending);
                    self.owner.store(0, Ordering::Relaxed);
                    holds.then_some(Outcome::Completed)
                } else {
                    None
                };
                outcome.map(|outcome| {
                    // RUNNING stays set: nobody takes a decided operation.
                    self.flags.fetch_or(DONE, Ordering::AcqRel);
                    (op.take(), outcome)
                })
            };
            if let Some((taken, outcome)) = decided {
                if let Some(taken) = taken {
                    finish(taken, outcome);
                }
                return true;
            }
            // Release, unless a request came in while we ran.
            match self.flags.compare_exchange(
                flags,
                flags & !RUNNING,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return false,
                Err(now) => flags = now,
            }
        }
    }
}
