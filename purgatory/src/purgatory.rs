//! The purgatory: submission, checks by key, cancellation and shutdown,
//! and the state its handles and threads share. How it is built is in
//! `builder.rs`, its threads in `threads.rs`.

mod at_clock;
mod builder;
mod threads;

use at_clock::AtClock;
pub use builder::{Driver, PurgatoryBuilder, ThreadRole};
use threads::Threads;

use crate::caught;
use crate::cell::{Cell, Pending};
use crate::error::SubmitError;
use crate::handle::Delayed;
use crate::hints::Hints;
use crate::metrics::{Counters, HeldBytes, PurgatoryMetrics};
use crate::outcome::Outcome;
use crate::spare_cells::SpareCells;
use crate::ticks::Ticks;
use crate::timer_queue::{CellRef, TimerKind, TimerQueue};
use crate::unchecked::hand_back::OnLastUse;
use crate::unchecked::{lane, prefetch};
use crate::unchecked::{Request, Served};
use crate::watchers::Watchers;
use crate::DelayedOperation;
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Parks delayed operations under keys and answers each exactly once.
///
/// All methods take `&self`; share the purgatory between threads with an
/// `Arc`. See the [crate docs](crate) for the guarantees and the lock order.
pub struct Purgatory<K, O>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    O: DelayedOperation,
{
    shared: Arc<Shared<K, O>>,
    threads: Mutex<Option<Threads<K, O>>>,
}

/// Whose reference to a cell a completion runs with, which decides whether
/// the result must be stored for a handle to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reader {
    /// A handle's, or the submitter's, from which its handle is made.
    Handle,
    /// The purgatory's own (a watch list's, the timer's): a handle exists
    /// only if another reference does.
    Internal,
}

/// What the purgatory's threads and handles share.
pub(crate) struct Shared<K, O> {
    name: String,
    kind: TimerKind,
    /// The clock, in ticks.
    ticks: Ticks,
    timer: TimerQueue<K, O>,
    watchers: Watchers<K, O>,
    counters: Counters,
    /// Cells of answered operations, for reuse.
    spare: SpareCells<K, O>,
    shutting_down: AtomicBool,
    /// Which thread sleeps until the next deadline, to wake it when an
    /// earlier one arrives.
    at_clock: AtClock,
    /// The baseline's purge interval; `None` for the wheel.
    purge_interval: Option<u64>,
    since_purge: AtomicU64,
    /// Operations submitted so far; numbers each one. Written by every
    /// submission, so on a cache line of its own: beside the fields that
    /// the other threads read on every operation (the timer's, the
    /// clock), each submission would take their line away from them.
    submitted: CachePadded<AtomicU64>,
}

impl<K, O> Purgatory<K, O>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    O: DelayedOperation,
{
    /// Tries to complete `op`; if its condition does not hold yet, watches
    /// it under every key in `keys`, schedules its timeout, and tries once
    /// more (the condition may have come true meanwhile). Kafka's
    /// `tryCompleteElseWatch`. A key given more than once is watched once.
    ///
    /// The handle tells whether the operation [completed at
    /// once](Delayed::completed_at_once) and lets the caller wait for it.
    ///
    /// # Errors
    /// [`SubmitError::NoKeys`] for an empty `keys`, [`SubmitError::ShutDown`]
    /// after [`shutdown`](Self::shutdown); both hand `op` back untouched.
    pub fn try_complete_else_watch(
        &self,
        op: O,
        keys: &[K],
    ) -> Result<Delayed<K, O>, SubmitError<O>> {
        if keys.is_empty() {
            return Err(SubmitError::NoKeys(op));
        }
        // One watch per distinct key: a key given twice is watched once.
        let distinct;
        let keys = if has_duplicates(keys) {
            distinct = dedup(keys);
            &distinct[..]
        } else {
            keys
        };
        if self.shared.shutting_down.load(Ordering::SeqCst) {
            return Err(SubmitError::ShutDown(op));
        }
        let shared = &self.shared;
        let seq = shared.submitted.fetch_add(1, Ordering::Relaxed);
        // The first try needs no state machine: nobody else can reach the
        // operation before it is watched.
        let mut op = op;
        let holds = shared.check(&mut op);
        // A panicking `timeout` counts as zero: the operation still gets
        // its one answer, at the timer's next tick.
        let timeout = shared
            .guarded("timeout", || op.timeout())
            .unwrap_or(Duration::ZERO);
        let cell = shared.spare.cell(op, seq, || Arc::clone(shared));
        // The handle takes `cell` itself: a clone here and a drop at the end
        // would be two more atomic read-modify-writes per submission.
        let handle = |cell, hints| Ok(Delayed::new(cell, hints));

        if holds {
            // This thread made `cell` just above, held (`Cell::new`).
            cell.state
                .decide_at_start(Outcome::Completed, |p, outcome| {
                    shared.finish(&cell, p, outcome, Reader::Handle)
                });
            return handle(cell, Hints::NONE.completed_at_once());
        }
        // The timeout runs from here, as a Kafka timer task's delay runs from
        // its `add`; an operation answered at once reads no clock.
        let deadline = shared.ticks.tick_after(timeout);
        // `start` also serves an expiry, a cancel or a shutdown that came in
        // during the setup; only a condition that held counts as completed
        // at once. (No handle exists yet, so nobody else forces `Completed`.)
        let mut at_once = false;
        let mut hints = Hints::NONE;
        let mut timer_address = 0;
        // This is the one call that lets go of it. Until then, a check under
        // a key watched already, or an expiry, only leaves its flag for
        // `start` to serve.
        cell.state.start(
            |pending| {
                shared.watchers.watch_all(&cell, &mut pending.links, keys);
                shared.counters.watched_add(keys.len());
                if shared
                    .timer
                    .schedule(&cell, deadline, timeout, &mut timer_address)
                {
                    shared.at_clock.wake();
                }
                let watch_hint = shared.watchers.hint(&pending.links);
                cell.watch_hint.store(watch_hint, Ordering::Relaxed);
                hints = Hints::new(watch_hint, timer_address);
            },
            |pending| shared.check(&mut pending.op),
            |pending, outcome| {
                at_once = outcome == Outcome::Completed;
                shared.finish(&cell, pending, outcome, Reader::Handle)
            },
        );
        // A shutdown that began during this call may have drained the timer
        // before the operation was in it: answer it here, exactly once.
        if shared.shutting_down.load(Ordering::SeqCst) {
            shared.drive(&cell, Request::Force(Outcome::Shutdown), Reader::Handle);
        }
        if at_once {
            hints = hints.completed_at_once();
        }
        handle(cell, hints)
    }

    /// Checks every operation watched under `key` and completes those whose
    /// condition now holds; returns how many of them this call completed
    /// because their condition held, as Kafka's `checkAndComplete` does. An
    /// operation that this call finishes for another thread's outcome (an
    /// expiry, a cancel, a forced completion or a shutdown that arrived
    /// while this call was checking it) is answered, but not counted here,
    /// nor by the call that asked for that outcome. The checks run on the calling thread, with no
    /// purgatory lock held; an operation another thread is checking at the
    /// same moment is checked again by that thread instead of waited for.
    ///
    /// `key` may be any borrowed form of the key type, as with
    /// `HashMap::get`: a `Purgatory<String, _>` takes a `&str`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use purgatory::{DelayedOperation, Outcome, Purgatory};
    /// # struct Ready;
    /// # impl DelayedOperation for Ready {
    /// #     fn timeout(&self) -> Duration { Duration::from_secs(1) }
    /// #     fn try_complete(&mut self) -> bool { true }
    /// #     fn on_complete(&mut self, _: Outcome) {}
    /// # }
    /// let fetches: Purgatory<String, Ready> = Purgatory::builder("Fetch").build().unwrap();
    /// assert_eq!(fetches.check_and_complete("topic-0"), 0); // nothing watched there
    /// ```
    pub fn check_and_complete<Q>(&self, key: &Q) -> usize
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut pending = self.shared.watchers.pending(key);
        self.shared.drive_all(&mut pending, Request::Check)
    }

    /// Answers every operation watched under `key` with
    /// [`Outcome::Cancelled`] (the partition moved away) and forgets the key.
    /// Returns how many this call cancelled. An operation also watched under
    /// other keys leaves their lists too. `key` may be borrowed, as for
    /// [`check_and_complete`](Self::check_and_complete).
    pub fn cancel_for_key<Q>(&self, key: &Q) -> usize
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut watched = self.shared.watchers.remove_key(key);
        self.shared
            .drive_all(&mut watched, Request::Force(Outcome::Cancelled))
    }

    /// Expires, on the calling thread, every operation whose deadline has
    /// passed on the purgatory's clock; returns how many this call expired.
    /// This is how time moves with [`Driver::Manual`]; with `Driver::Thread`
    /// it is seldom needed, but harmless.
    pub fn advance_clock(&self) -> usize {
        let now = self.shared.ticks.now_tick();
        let mut due = Vec::new();
        self.shared
            .timer
            .expire(now, &mut due, false, &mut Default::default());
        self.shared
            .drive_all(&mut due, Request::Force(Outcome::Expired))
    }

    /// When the next operation is due on the purgatory's clock, if any is
    /// pending: a manual driver may sleep (or skip simulated time) until then.
    /// It can come before the earliest deadline (the wheel moves entries
    /// down a level then); calling `advance_clock` then is harmless.
    pub fn next_expiration(&self) -> Option<std::time::Instant> {
        let tick = self.shared.timer.next_expiration()?;
        Some(
            self.shared
                .ticks
                .instant_of(tick)
                .unwrap_or_else(|| self.shared.ticks.now() + Duration::from_secs(86_400 * 365)),
        )
    }

    /// Watch entries of pending operations, summed over keys (Kafka's
    /// `PurgatorySize`). Counted as entries come and go, on per-thread
    /// stripes: exact while nothing is being submitted or answered, and
    /// otherwise off by at most the operations in flight.
    pub fn watched(&self) -> usize {
        self.shared.counters.watched()
    }

    /// Pending operations (Kafka's `NumDelayedOperations`): submitted and
    /// not yet answered, an operation counting as answered once its
    /// callbacks have returned. Exact while nothing is being submitted or
    /// answered, and otherwise off by at most the operations in flight.
    pub fn delayed(&self) -> usize {
        // Answered first: every operation it counts was submitted before.
        let answered = self.shared.counters.answered();
        let submitted = self.shared.submitted.load(Ordering::Relaxed);
        submitted.saturating_sub(answered) as usize
    }

    /// Which timer this purgatory runs on.
    pub fn timer_kind(&self) -> TimerKind {
        self.shared.kind
    }

    /// The purgatory's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// A snapshot of the counters. Takes every shard lock briefly to count
    /// held entries: for monitoring, not for a hot path.
    pub fn metrics(&self) -> PurgatoryMetrics {
        let c = &self.shared.counters;
        let delayed = self.delayed();
        let spare_cells = self.shared.spare.len();
        PurgatoryMetrics {
            name: self.shared.name.clone(),
            watched: self.watched(),
            delayed,
            completed: c.count(Outcome::Completed),
            expired: c.count(Outcome::Expired),
            cancelled: c.count(Outcome::Cancelled),
            shutdown: c.count(Outcome::Shutdown),
            panics: c.panics(),
            held_watch_entries: self.shared.watchers.held(),
            held_timer_entries: self.shared.timer.held(),
            spare_cells,
            held_bytes: HeldBytes {
                pending_cells: delayed * Cell::<K, O>::ALLOCATED,
                spare_cells: spare_cells * Cell::<K, O>::ALLOCATED,
                watch_lists: self.shared.watchers.held_bytes(),
                timer: self.shared.timer.held_bytes(),
            },
        }
    }

    /// Keys that currently have a watch list.
    pub fn watched_keys(&self) -> usize {
        self.shared.watchers.keys()
    }

    /// Answers every pending operation with [`Outcome::Shutdown`] (those
    /// a thread already took from the timer finish as expired), joins the
    /// threads once they have run their callbacks, and refuses later
    /// submissions with [`SubmitError::ShutDown`]. Idempotent; also run on
    /// drop.
    ///
    /// An operation's callback (or `Drop`) may call it, or drop the last
    /// reference to the purgatory, even on one of the purgatory's own
    /// threads. The threads are then not waited for (that one cannot wait
    /// for itself, and another may be waiting for the clock it holds); they
    /// finish the operations they took on their own.
    pub fn shutdown(&self) {
        if self.shared.shutting_down.swap(true, Ordering::SeqCst) {
            return;
        }
        let threads = self.threads.lock().take();
        if let Some(threads) = &threads {
            threads.stop();
        }
        self.shared.drive_all(
            &mut self.shared.timer.drain(),
            Request::Force(Outcome::Shutdown),
        );
        if let Some(threads) = threads {
            threads.join();
        }
        if self.shared.purge_interval.is_some() {
            // The baseline leaves answered operations in their lists.
            self.shared.watchers.clear();
        }
        // Handles dropped from now on free their cells: the pool keeps
        // none after this, not even one whose drop races with it (a kept
        // cell would keep the purgatory, which holds the pool).
        self.shared.spare.release();
        tracing::debug!(purgatory = %self.shared.name, "shut down");
    }
}

/// Whether `keys` names a key twice. Submissions name a handful of keys,
/// so comparing pairs costs less than hashing them; long lists are hashed.
fn has_duplicates<K: Hash + Eq>(keys: &[K]) -> bool {
    const PAIRWISE: usize = 16;
    if keys.len() <= PAIRWISE {
        keys.iter()
            .enumerate()
            .any(|(i, k)| keys[i + 1..].contains(k))
    } else {
        let mut seen = std::collections::HashSet::with_capacity(keys.len());
        !keys.iter().all(|k| seen.insert(k))
    }
}

/// `keys` without repeats, in the order they first appear.
fn dedup<K: Hash + Eq + Clone>(keys: &[K]) -> Vec<K> {
    let mut seen = std::collections::HashSet::with_capacity(keys.len());
    keys.iter().filter(|k| seen.insert(*k)).cloned().collect()
}

impl<K, O> Drop for Purgatory<K, O>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    O: DelayedOperation,
{
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl<K, O> Shared<K, O>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    O: DelayedOperation,
{
    /// Serves a request on one operation (see `unchecked/state.rs`), with the
    /// user's code guarded against panics. `reader` says whose reference `cell`
    /// is.
    pub(crate) fn drive(&self, cell: &CellRef<K, O>, request: Request, reader: Reader) -> Served {
        cell.state.drive(
            request,
            |pending| self.check(&mut pending.op),
            |pending, outcome| self.finish(cell, pending, outcome, reader),
        )
    }

    /// Runs the operation's condition; a panic counts as "not yet".
    fn check(&self, op: &mut O) -> bool {
        self.guarded("try_complete", || op.try_complete())
            .unwrap_or(false)
    }

    /// Runs user code, catching and counting a panic.
    fn guarded<R>(&self, what: &'static str, f: impl FnOnce() -> R) -> Option<R> {
        match caught::catch(f) {
            Ok(r) => Some(r),
            Err(message) => {
                self.counters.panicked();
                tracing::error!(purgatory = %self.name, callback = what, %message, "delayed operation panicked");
                None
            }
        }
    }

    /// Completes an operation whose outcome this thread decided: out of the
    /// watch lists and the timer first, then the user's callbacks. Returns
    /// whether its handle may read the result, which the state machine then
    /// hands over (`unchecked/handover.rs`).
    fn finish(
        &self,
        cell: &CellRef<K, O>,
        pending: &mut Pending<K, O>,
        outcome: Outcome,
        reader: Reader,
    ) -> bool {
        // The links leave with the watch entries; the operation stays for
        // its handle.
        let links = std::mem::take(&mut pending.links);
        let op = &mut pending.op;
        // Before the first lock: see `unchecked/prefetch.rs`.
        self.watchers.prefetch(&links);
        // An expired operation's entry is out of the wheel already: fetching
        // its lines would only pull them away from the timer's threads.
        if outcome != Outcome::Expired {
            lane::prefetch_entry(cell.timer.hint());
        }
        let keys = self.watchers.close(cell, links);
        self.counters.watched_sub(keys);
        self.timer.unschedule(cell);
        if outcome == Outcome::Expired {
            self.guarded("on_expiration", || op.on_expiration());
        }
        self.guarded("on_complete", || op.on_complete(outcome));
        self.counters.record(outcome);
        tracing::debug!(purgatory = %self.name, %outcome, "delayed operation answered");
        if let Some(interval) = self.purge_interval {
            if self.since_purge.fetch_add(1, Ordering::Relaxed) + 1 >= interval {
                self.since_purge.store(0, Ordering::Relaxed);
                self.timer.purge();
                self.watchers.purge();
            }
        }
        // Handles are only made at submission, so once `cell` is the last
        // reference and not a handle's, nobody can ever read the result:
        // the answer's lock is skipped (an operation whose handle was
        // dropped, as a broker answering through `on_complete` does), and
        // the operation goes with the cell, when this thread's caller drops
        // it. The count cannot rise meanwhile: only this thread holds a
        // reference to clone.
        reader == Reader::Handle || CellRef::count(cell) > 1
    }

    /// Drives each of `cells` (see `drive`); returns how many this call
    /// answered with the request's own outcome: for a check, those whose
    /// condition held. The purgatory may hold the last reference to a cell here
    /// (its handle was dropped at submission, as a broker that answers
    /// through the callback does): it is recycled, not freed on this thread
    /// (see `spare_cells.rs`).
    ///
    /// Each cell was most likely written long ago or on another core: the
    /// lines of the one two places ahead are asked for while this one is
    /// completed, so that their misses overlap (`unchecked/prefetch.rs`).
    ///
    /// `cells` is left empty, its room kept for the caller.
    fn drive_all(&self, cells: &mut Vec<CellRef<K, O>>, request: Request) -> usize {
        self.drive_rest(&mut cells.drain(..), request)
    }

    /// `drive_all` on what is left in `cells`.
    fn drive_rest(
        &self,
        cells: &mut std::vec::Drain<'_, CellRef<K, O>>,
        request: Request,
    ) -> usize {
        Self::prefetch_first(cells);
        let mut answered = 0;
        while let Some(cell) = cells.next() {
            answered += self.drive_next(cell, cells, request);
        }
        answered
    }

    /// `drive_rest`, stopping early once the clock has passed `until`:
    /// what is left stays in `cells`, undriven (dropping `cells` would
    /// drop it unanswered: the caller drives it with `drive_rest`). The
    /// clock is read every [`Self::CLOCK_READ_EVERY`] cells, so a run may
    /// overstay by that many callbacks.
    fn drive_until(
        &self,
        cells: &mut std::vec::Drain<'_, CellRef<K, O>>,
        request: Request,
        until: Instant,
    ) {
        Self::prefetch_first(cells);
        let mut driven = 0usize;
        while let Some(cell) = cells.next() {
            self.drive_next(cell, cells, request);
            driven += 1;
            if driven.is_multiple_of(Self::CLOCK_READ_EVERY) && Instant::now() >= until {
                break;
            }
        }
    }

    /// Cells `drive_until` drives between two reads of the clock, so that
    /// a long batch does not read it once per callback.
    const CLOCK_READ_EVERY: usize = 16;

    /// How far ahead of the cell being driven a batch is prefetched.
    const AHEAD: usize = 2;

    fn prefetch_first(cells: &std::vec::Drain<'_, CellRef<K, O>>) {
        cells
            .as_slice()
            .iter()
            .take(Self::AHEAD)
            .for_each(Cell::prefetch);
    }

    /// One step of a batch: drives `cell`, with the prefetches for `rest`,
    /// the cells after it; returns 1 if this call answered it with the
    /// request's own outcome (see `drive_all`).
    #[inline(always)]
    fn drive_next(
        &self,
        cell: CellRef<K, O>,
        rest: &std::vec::Drain<'_, CellRef<K, O>>,
        request: Request,
    ) -> usize {
        if let Some(ahead) = rest.as_slice().get(Self::AHEAD - 1) {
            Cell::prefetch(ahead);
        }
        // The next cell's lines were asked for a turn ago; its watch
        // entry, which a forced outcome removes, can be asked for now.
        // Not for a check: most checked operations stay watched, and
        // their entries would be pulled away from the submitters for
        // nothing.
        if let (Request::Force(_), Some(next)) = (request, rest.as_slice().first()) {
            prefetch::for_write(next.watch_hint.load(Ordering::Relaxed));
        }
        // A check counts what its condition completed; a force, what it
        // decided. An outcome left by another thread and served here is
        // that thread's, and counted by neither.
        let served = self.drive(&cell, request, Reader::Internal);
        Self::recycle(cell);
        usize::from(match request {
            Request::Check => served == Served::Held,
            Request::Force(_) => served == Served::Decided,
        })
    }

    /// Forces `Completed` on behalf of a handle or a completer; true if
    /// that is the outcome by this call (see `Delayed::force_complete`).
    /// Takes no purgatory: the cell's `home` is a load from the cell.
    pub(crate) fn force_complete(cell: &CellRef<K, O>, hints: Hints) -> bool {
        // Before the cell's first load (reading `home` is one), so that its
        // miss and the entries' overlap (see `unchecked/prefetch.rs`).
        hints.prefetch();
        if cell.state.is_done() {
            return false;
        }
        let served = cell
            .home
            .drive(cell, Request::Force(Outcome::Completed), Reader::Handle);
        matches!(served, Served::Decided | Served::Left)
    }

    pub(crate) fn reset_timeout(&self, cell: &CellRef<K, O>, timeout: Duration) -> bool {
        if cell.state.is_done() {
            return false;
        }
        let deadline = self.ticks.tick_after(timeout);
        // `None`: the timer let go of it; the new deadline is not in force.
        let Some(wake) = self.timer.reschedule(cell, deadline, timeout) else {
            return false;
        };
        if wake {
            self.at_clock.wake();
        }
        true
    }
}

impl<K, O> Shared<K, O> {
    /// Keeps the cell of an answered operation for reuse if `cell` is its
    /// last reference (see `spare_cells.rs`), else drops it. The purgatory
    /// is the cell's own (`Cell::home`).
    pub(crate) fn recycle(cell: CellRef<K, O>) {
        if !cell.home.shutting_down.load(Ordering::Relaxed) {
            SpareCells::give_back(cell);
        }
    }

    /// The pool of spare cells.
    #[inline]
    pub(crate) fn spare(&self) -> &SpareCells<K, O> {
        &self.spare
    }
}

/// A handle's or a completer's reference, when it drops, goes to the
/// purgatory for the cell's reuse if it is the last one.
impl<K, O> OnLastUse for CellRef<K, O> {
    fn on_last_use(self) {
        Shared::recycle(self);
    }
}
