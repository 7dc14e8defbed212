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
//! A submitter holds `RUNNING` from the moment it creates the state until
//! the operation is watched and scheduled ([`OpState::new_held`],
//! [`OpState::start`]): a check or an expiry that finds the operation
//! half set up leaves its flag, and the submitter's own final check serves
//! it, which is Kafka's second `tryComplete` in `tryCompleteElseWatch`.
//! That right is marked in `owner` as the creating thread's token with
//! `SETTING_UP` set, and the first `start` (or `decide_at_start`) on that
//! thread takes the mark off; any other call finds no mark and does nothing.
//! So `start` is safe to call: it cannot reach the operation beside a runner,
//! however it is misused.
//!
//! A request from the running thread itself (an operation's code calling
//! back into the purgatory) is recognised by the runner's token and returns
//! at once: a check is covered by the one running, a forced outcome is picked
//! up when it returns.
//!
//! Deciding does not move the operation out: `finish` runs on it in place,
//! and the operation stays where it is for its reader (`handover.rs`), so a
//! cell holds room for one operation, not for one pending and one answered.
//! `RUNNING` is never released once `DONE` is set, which is what keeps every
//! later request away from the value the reader takes.

use super::sync::{
    drop_guarded, or_exclusive, set_exclusive, thread_token, AtomicU32, AtomicU64, ByteLock,
    Exclusive, Ordering,
};
use crate::outcome::Outcome;
use std::mem::ManuallyDrop;
use std::task::Waker;

const RUNNING: u32 = 1;
const RECHECK: u32 = 1 << 1;
const FORCED: u32 = 1 << 2;
const DONE: u32 = 1 << 3;
/// The decider has finished with the operation and handed it to the
/// reader (`handover.rs`).
pub(super) const HANDED: u32 = 1 << 4;
/// The reader has taken the operation out (`handover.rs`), or `clear`
/// dropped it.
pub(super) const TAKEN: u32 = 1 << 5;
/// A reader has left a waker (`handover.rs`): the hand-over takes the
/// lock to wake it only when this is set. Not a request: a runner's
/// release lets it through.
pub(super) const WAITING: u32 = 1 << 6;
const OUTCOME_SHIFT: u32 = 8;

/// Set in `owner`, beside the creator's token, while the creator of a
/// [`new_held`](OpState::new_held) state has not started it yet. Tokens
/// count threads from 1, so they never reach this bit.
const SETTING_UP: u64 = 1 << 63;

/// What a caller asks of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    /// Run its condition; complete it if it holds.
    Check,
    /// End it with this outcome, whatever its condition.
    Force(Outcome),
}

/// What one call to [`OpState::drive`] did with its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Served {
    /// This call ran the check, the condition held, and it completed the
    /// operation (ran `finish` with `Completed`).
    Held,
    /// This call decided a forced outcome (its own request's, or one left
    /// by another thread while this one ran the operation) and ran `finish`.
    Decided,
    /// The operation was running on another thread (or the call came from
    /// its own code): the request is left to that thread, which serves it
    /// before it lets go. A forced outcome left so is the one that ends the
    /// operation, unless its check completes it first.
    Left,
    /// A check ran and its condition did not hold.
    NotYet,
    /// Nothing was done: the outcome was decided already, or (a force)
    /// another outcome had been forced first, which is the one that ends it.
    Refused,
}

/// An operation and its completion state.
pub(crate) struct OpState<O> {
    pub(super) flags: AtomicU32,
    /// The token of the thread running the operation's code, or 0. Only
    /// the running thread writes its own token, so reading it back proves
    /// a call comes from inside that code. `SETTING_UP | token` from
    /// `new_held` until the creator's `start`.
    owner: AtomicU64,
    /// The operation. Until the outcome is decided, only the `RUNNING`
    /// thread reaches it; the bit is its lock. After, the thread that
    /// decided hands it to the reader (`handover.rs`), which takes it out.
    /// It is there until `TAKEN` is set (by that take, or by `clear`):
    /// the bit serves as an `Option`'s tag would, without its word.
    pub(super) op: Exclusive<ManuallyDrop<O>>,
    /// The lock under which the reader takes the operation and `waker` is
    /// reached (`handover.rs`). Its one byte sits beside `flags`, where
    /// the word that follows would leave padding, and the hand-over's
    /// phases are bits of `flags`: so the cell of an operation of up to 32
    /// bytes fits in two cache lines.
    pub(super) waker_lock: ByteLock,
    /// The waker of the reader's last poll, if any: reached holding
    /// `waker_lock` (`OpState::lock_waker`) or through `&mut self`.
    pub(super) waker: Exclusive<Option<Waker>>,
}

impl<O> OpState<O> {
    /// A state that nobody holds: the first request takes it. The
    /// purgatory makes every state held, so only tests use this: the loom
    /// model (which compiles this file on its own, as a test) starts from
    /// it, the state a submission leaves behind.
    #[cfg(test)]
    pub(crate) fn new(op: O) -> Self {
        Self::with_flags(op, 0, 0)
    }

    /// A state whose `RUNNING` right its creator has from the start, so
    /// that it can finish setting the operation up (watch it, schedule it)
    /// before anyone else may run it. Requests that arrive meanwhile only
    /// leave their flags; [`start`](Self::start) serves them. Submission
    /// used to take a lock around the setup instead: that cost two atomic
    /// read-modify-writes at submission and two at completion.
    pub(crate) fn new_held(op: O) -> Self {
        Self::with_flags(op, RUNNING, SETTING_UP | thread_token())
    }

    fn with_flags(op: O, flags: u32, owner: u64) -> Self {
        OpState {
            flags: AtomicU32::new(flags),
            owner: AtomicU64::new(owner),
            op: Exclusive::new(ManuallyDrop::new(op)),
            waker_lock: ByteLock::new(),
            waker: Exclusive::new(None),
        }
    }

    /// Takes the creator's right over a `new_held` state: true once, on the
    /// thread that made it, and false for every other call.
    ///
    /// Only this thread ever wrote its own token with `SETTING_UP` (in
    /// `new_held`), and nobody else writes `owner` before the mark is off:
    /// the others only write it while running, and nobody runs the
    /// operation until this thread lets go of `RUNNING`. So the mark read
    /// back here is this thread's own last write, and clearing it (before
    /// the operation is reached) makes every later call fail, a reentrant
    /// one from `setup` included. Tokens are never reused (`thread_token`),
    /// so no later thread can take a dead creator's mark for its own.
    fn take_setup_right(&self) -> bool {
        let mark = SETTING_UP | thread_token();
        if self.owner.load(Ordering::Relaxed) != mark {
            return false;
        }
        self.owner.store(0, Ordering::Relaxed);
        true
    }

    /// Whether the outcome has been decided.
    pub(crate) fn is_done(&self) -> bool {
        self.flags.load(Ordering::Acquire) & DONE != 0
    }

    /// Serves `request`. `check` runs the condition with exclusive access;
    /// `finish` is called, at most once over all callers, by the caller that
    /// decides the outcome, with exclusive access too, and returns whether
    /// anyone will read the result: if so, the operation is then handed
    /// over (`handover.rs`), otherwise it stays until the state is dropped
    /// or cleared. Returns what this call did ([`Served`]).
    pub(crate) fn drive(
        &self,
        request: Request,
        check: impl FnMut(&mut O) -> bool,
        finish: impl FnOnce(&mut O, Outcome) -> bool,
    ) -> Served {
        let mut flags = self.flags.load(Ordering::Acquire);
        loop {
            if flags & DONE != 0 {
                return Served::Refused;
            }
            let wanted = match request {
                // Another outcome was forced first: it wins.
                Request::Force(_) if flags & FORCED != 0 => return Served::Refused,
                // The runner will see the flag and decide.
                Request::Force(outcome) if flags & RUNNING != 0 => {
                    flags | FORCED | (outcome.code() << OUTCOME_SHIFT)
                }
                // Nobody runs it: this exchange decides, `DONE` included,
                // so that deciding costs one read-modify-write, not two.
                Request::Force(outcome) => {
                    flags | FORCED | (outcome.code() << OUTCOME_SHIFT) | RUNNING | DONE
                }
                Request::Check if flags & RUNNING != 0 => {
                    if self.owner.load(Ordering::Relaxed) == thread_token() {
                        return Served::Left; // called back from its own code
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
                Ok(before) if before & RUNNING != 0 => return Served::Left,
                Ok(_) => return self.run(wanted, check, finish),
                Err(now) => flags = now,
            }
        }
    }

    /// The creator's end of [`new_held`](Self::new_held): runs `setup` on
    /// the operation, then checks it and serves every request that arrived
    /// meanwhile, as [`drive`](Self::drive) does, and lets go of `RUNNING`
    /// unless the outcome is decided. Returns whether this call decided it.
    ///
    /// Does nothing and returns false unless this is the first `start` or
    /// [`decide_at_start`](Self::decide_at_start) on the thread that made the
    /// state with `new_held`.
    // Inlined into its one caller, the submission, whose setup it runs:
    // called, it costs the submission some 50 instructions more.
    #[inline(always)]
    pub(crate) fn start(
        &self,
        setup: impl FnOnce(&mut O),
        check: impl FnMut(&mut O) -> bool,
        finish: impl FnOnce(&mut O, Outcome) -> bool,
    ) -> bool {
        if !self.take_setup_right() {
            return false;
        }
        {
            // SAFETY: this thread holds `RUNNING`, which `new_held` gave it
            // and `take_setup_right` proved it still has, and no access of
            // its own is alive (`setup` cannot start the state again). The
            // access ends with this block, before `run` reaches the value
            // again under the same right.
            let mut op = unsafe { self.op.get_mut() };
            // Undecided, so the operation is there (`TAKEN` is clear).
            setup(&mut op);
        }
        // Whatever was asked for during the setup is in the word now.
        self.run(self.flags.load(Ordering::Acquire), check, finish) != Served::NotYet
    }

    /// Decides `outcome` for a state its creator still holds, without a
    /// check: for an operation whose first try already held. Does nothing
    /// when [`start`](Self::start) would not.
    pub(crate) fn decide_at_start(
        &self,
        outcome: Outcome,
        finish: impl FnOnce(&mut O, Outcome) -> bool,
    ) {
        if !self.take_setup_right() {
            return;
        }
        // Decided in the word itself, where the reader finds the outcome:
        // by this call, unless a forced outcome was left during the setup,
        // which came first and wins, as in `drive`.
        let mut flags = self.flags.load(Ordering::Acquire);
        loop {
            let wanted = match flags & FORCED {
                0 => flags | FORCED | (outcome.code() << OUTCOME_SHIFT) | DONE,
                _ => flags | DONE,
            };
            match self.flags.compare_exchange_weak(
                flags,
                wanted,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.run(wanted, |_| false, finish);
                    return;
                }
                Err(now) => flags = now,
            }
        }
    }

    /// Runs the operation, holding `RUNNING`, until it completes or no
    /// request is left: `Held`, `Decided` or `NotYet`.
    fn run(
        &self,
        mut flags: u32,
        mut check: impl FnMut(&mut O) -> bool,
        finish: impl FnOnce(&mut O, Outcome) -> bool,
    ) -> Served {
        let mut finish = Some(finish);
        loop {
            // Every request so far is served by this round.
            if flags & RECHECK != 0 {
                flags = self.flags.fetch_and(!RECHECK, Ordering::AcqRel) & !RECHECK;
            }
            let decided = {
                // SAFETY: this thread holds `RUNNING`: it set the bit with its
                // own compare-exchange in `drive`, or has held it since
                // `new_held` (checked by `take_setup_right` in `start` and
                // `decide_at_start`), or kept it through a failed release
                // below; and only the `RUNNING` thread ever reaches `op`
                // until it hands it over. This access ends with this block,
                // before the bit is released or the operation handed over,
                // and the acquire/release on `flags` orders it before the
                // next holder's (the handover's lock, before the reader's).
                let mut op = unsafe { self.op.get_mut() };
                let decided = if flags & FORCED != 0 {
                    Some((Self::outcome_of(flags), Served::Decided))
                } else {
                    // Undecided, so the operation is there.
                    self.owner.store(thread_token(), Ordering::Relaxed);
                    let holds = check(&mut op);
                    self.owner.store(0, Ordering::Relaxed);
                    holds.then_some((Outcome::Completed, Served::Held))
                };
                decided.map(|(outcome, served)| {
                    // RUNNING stays set: nobody takes a decided operation.
                    if flags & DONE == 0 {
                        self.flags.fetch_or(DONE, Ordering::AcqRel);
                    }
                    // Decided once: `finish` is there to take.
                    let read = finish.take().is_some_and(|finish| finish(&mut op, outcome));
                    (served, read)
                })
            };
            if let Some((served, read)) = decided {
                if read {
                    self.hand_over();
                }
                return served;
            }
            // Release, unless a request came in while we ran (a reader's
            // `WAITING` is none: it is kept, and the release tried again).
            loop {
                match self.flags.compare_exchange(
                    flags,
                    flags & !RUNNING,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return Served::NotYet,
                    Err(now) if now ^ flags == WAITING => flags = now,
                    Err(now) => {
                        flags = now;
                        break;
                    }
                }
            }
        }
    }

    /// The outcome decided, read from a word that says it is decided.
    pub(super) fn outcome_of(flags: u32) -> Outcome {
        if flags & FORCED != 0 {
            Outcome::from_code(flags >> OUTCOME_SHIFT)
        } else {
            Outcome::Completed
        }
    }

    /// Drops the operation, if it is still here, and whatever the reader
    /// left (a waker), guarded: for a cell given back to be reused. The
    /// state is inert after: decided, held and taken, with no setup right,
    /// so that no later call reaches the operation, whatever state it was
    /// cleared in.
    pub(crate) fn clear(&mut self) {
        // `&mut self`: plain stores, no locked instruction (a spare cell is
        // cleared on every answer and again when it is reused).
        set_exclusive(&mut self.owner, 0);
        let before = or_exclusive(&mut self.flags, RUNNING | DONE | TAKEN);
        if before & TAKEN == 0 {
            // SAFETY: `&mut self`: no other access can be alive. `TAKEN`
            // was clear, so the operation is there, and the bits now set
            // keep every later call from reaching it: requests find `DONE`,
            // `start` finds no setup right, a take finds `TAKEN`.
            let op = unsafe { ManuallyDrop::take(&mut self.op.get_mut()) };
            drop_guarded(op);
        }
        // SAFETY: `&mut self`, as above.
        let waker = unsafe { self.waker.get_mut().take() };
        drop_guarded(waker);
    }
}

/// The last reference to a state may go on one of the purgatory's threads
/// (its handle went while the operation was being answered): an operation
/// never taken must not take that thread down.
impl<O> Drop for OpState<O> {
    fn drop(&mut self) {
        self.clear();
    }
}
