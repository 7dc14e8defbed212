//! The submitter's handle on a delayed operation.

use crate::cell::{Completion, Pending};
use crate::completer::Completer;
use crate::hints::Hints;
use crate::outcome::Outcome;
use crate::purgatory::Shared;
use crate::timer_queue::CellRef;
use crate::unchecked::hand_back::LastUse;
use crate::unchecked::Taken;
use crate::DelayedOperation;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// A submitted operation: wait for it, `.await` it, or complete it from
/// outside. Dropping the handle changes nothing: the operation is still
/// answered (its `on_complete` runs) exactly once.
///
/// The handle is the one place the result is taken from, so it is neither
/// `Clone` nor shared; whoever else needs to end the operation or push its
/// timeout back gets a [`Completer`] from [`completer`](Self::completer).
///
/// ```
/// use std::time::Duration;
/// use purgatory::{DelayedOperation, Outcome, Purgatory};
///
/// struct RemoteRead;
/// impl DelayedOperation for RemoteRead {
///     fn timeout(&self) -> Duration { Duration::from_secs(30) }
///     fn try_complete(&mut self) -> bool { false } // only the remote side knows
///     fn on_complete(&mut self, _: Outcome) {}
/// }
///
/// let purgatory = Purgatory::builder("RemoteFetch").build().unwrap();
/// let handle = purgatory.try_complete_else_watch(RemoteRead, &["topic-0"]).unwrap();
/// let remote = std::thread::spawn(move || {
///     assert!(handle.force_complete()); // the remote read finished
///     handle.wait()
/// });
/// assert_eq!(remote.join().unwrap().outcome, Outcome::Completed);
/// assert_eq!(purgatory.delayed(), 0);
/// assert_eq!(purgatory.watched(), 0);
/// ```
pub struct Delayed<K, O> {
    /// Handed back to the spare cells as it is when the handle drops.
    cell: LastUse<CellRef<K, O>>,
    /// Where the operation's entries were stored, and whether the
    /// submission completed it.
    hints: Hints,
}

impl<K, O> Delayed<K, O>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    O: DelayedOperation,
{
    pub(crate) fn new(cell: CellRef<K, O>, hints: Hints) -> Self {
        Delayed {
            cell: LastUse::new(cell),
            hints,
        }
    }

    /// Whether the submission itself completed the operation (its condition
    /// held on one of the two tries), as Kafka's `tryCompleteElseWatch`
    /// returns.
    pub fn completed_at_once(&self) -> bool {
        self.hints.at_once()
    }

    /// Whether the outcome has been decided. `on_complete` may still be
    /// running; [`outcome`](Self::outcome) is set once it has returned.
    pub fn is_completed(&self) -> bool {
        self.cell.state.is_done()
    }

    /// The outcome, once the operation has been answered.
    pub fn outcome(&self) -> Option<Outcome> {
        self.cell.state.outcome()
    }

    /// A cheap, cloneable, `Send + Sync` way to force-complete this
    /// operation or push its timeout back from anywhere, while the handle
    /// itself is awaited or waited on elsewhere. See [`Completer`].
    pub fn completer(&self) -> Completer<K, O> {
        Completer::new(CellRef::clone(&self.cell), self.hints)
    }

    /// Completes the operation now, as [`Outcome::Completed`], without
    /// checking its condition (Kafka's `forceComplete`): for whoever learns
    /// directly that it holds. It leaves the timer and every watch list at
    /// once, in O(1) each.
    ///
    /// Returns `true` if the operation ends [`Completed`](Outcome::Completed)
    /// by this call: decided here, or, if its `try_complete` is running on
    /// another thread right now, left for that thread, which completes it as
    /// soon as the check returns (with `Completed` either way) while this
    /// returns without waiting. Returns `false` if the outcome had been
    /// decided already, or another one (an expiry, a cancel, a shutdown)
    /// forced first, even if that one's callbacks are still running.
    pub fn force_complete(&self) -> bool {
        Shared::force_complete(&self.cell, self.hints)
    }

    /// Pushes the operation's timeout back (or forward) to `timeout` from
    /// now, keeping everything else: a session whose every heartbeat extends
    /// it.
    ///
    /// Returns `true` if the new deadline is in force: the operation then
    /// expires no earlier than `timeout` from now (it may still complete
    /// sooner by its condition or by force). Returns `false` if the
    /// operation has been answered, or if its timeout has already fired and
    /// its expiry is under way: a heartbeat that comes too late is told so,
    /// not told that the session was extended.
    pub fn reset_timeout(&self, timeout: Duration) -> bool {
        self.cell.home.reset_timeout(&self.cell, timeout)
    }

    /// Blocks the calling thread until the operation is answered.
    ///
    /// # Panics
    /// If the result was already taken by polling this handle to `Ready`.
    pub fn wait(self) -> Completion<O> {
        completion(self.cell.state.wait_take().unwrap_or_else(|Taken| taken()))
    }

    /// Blocks until the operation is answered or `timeout` passes; hands
    /// the handle back on timeout.
    ///
    /// # Panics
    /// As [`wait`](Self::wait).
    pub fn wait_timeout(self, timeout: Duration) -> Result<Completion<O>, Self> {
        let Some(deadline) = Instant::now().checked_add(timeout) else {
            return Ok(self.wait());
        };
        match self.cell.state.wait_take_until(deadline) {
            Ok(Some(answered)) => Ok(completion(answered)),
            Ok(None) => Err(self),
            Err(Taken) => taken(),
        }
    }
}

/// What the handle hands out of the operation the state machine gave it.
fn completion<K, O>((outcome, pending): (Outcome, Pending<K, O>)) -> Completion<O> {
    Completion {
        outcome,
        operation: pending.op,
    }
}

#[cold]
fn taken() -> ! {
    panic!("`Delayed` polled after completion")
}

/// Resolves when the operation is answered. A poll that races the answer
/// returns `Ready` or `Pending` (and then wakes its waker once the answer
/// is there); polling again after `Ready` panics, as `std::future::Ready`
/// does. Any executor will do: the waker is woken from whichever thread
/// answers the operation, after the result is stored.
impl<K, O> Future for Delayed<K, O>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    O: DelayedOperation,
{
    type Output = Completion<O>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Completion<O>> {
        match self.cell.state.poll_take(cx.waker()) {
            Ok(Some(answered)) => Poll::Ready(completion(answered)),
            Ok(None) => Poll::Pending,
            Err(Taken) => taken(),
        }
    }
}

impl<K, O> std::fmt::Debug for Delayed<K, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delayed")
            .field("completed", &self.cell.state.is_done())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use crate::{Delayed, DelayedOperation, Outcome, Purgatory, TimerKind};
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    struct Waits(bool);

    impl DelayedOperation for Waits {
        fn timeout(&self) -> Duration {
            Duration::from_secs(1)
        }
        fn try_complete(&mut self) -> bool {
            self.0
        }
        fn on_complete(&mut self, _: Outcome) {}
    }

    fn hints(kind: TimerKind, holds: bool, keys: &[u32]) -> [usize; 2] {
        let purgatory = Purgatory::builder("hints")
            .timer(kind)
            .manual(crate::ManualClock::new())
            .build()
            .unwrap();
        let handle = purgatory
            .try_complete_else_watch(Waits(holds), keys)
            .unwrap();
        assert_eq!(handle.completed_at_once(), holds);
        let hints = handle.hints.addresses();
        // The cell keeps the same watch entry's address, for a batch.
        let in_cell = handle.cell.watch_hint.load(Ordering::Relaxed);
        assert_eq!(in_cell, hints[0]);
        // Its timer entry, in the lane of its timeout, is found from the
        // cell's timer word, as a batch's completion finds it.
        assert_eq!(handle.cell.timer.hint(), hints[1]);
        assert_eq!(handle.force_complete(), !holds);
        hints
    }

    #[test]
    fn a_handle_is_three_words_with_no_padding() {
        // Its cell and two hints, the flag inside one of them, and `None`
        // in the cell's niche: nothing for a copy to move byte by byte.
        let words = 3 * std::mem::size_of::<usize>();
        assert_eq!(std::mem::size_of::<Delayed<u32, Waits>>(), words);
        assert_eq!(std::mem::size_of::<Option<Delayed<u32, Waits>>>(), words);
    }

    #[test]
    fn a_handle_names_the_entries_its_completion_removes() {
        // The wheel: a watch entry and a timer entry, under one key or a group.
        assert!(hints(TimerKind::Wheel, false, &[1]).iter().all(|&a| a != 0));
        assert!(hints(TimerKind::Wheel, false, &[1, 2])
            .iter()
            .all(|&a| a != 0));
        // Answered at once: nothing was stored.
        assert_eq!(hints(TimerKind::Wheel, true, &[1]), [0, 0]);
        // The baseline removes neither entry when it completes.
        let lazy = TimerKind::DelayQueue {
            purge_interval: 1000,
        };
        assert_eq!(hints(lazy, false, &[1]), [0, 0]);
    }
}
