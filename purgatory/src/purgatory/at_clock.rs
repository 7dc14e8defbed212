//! Which of the purgatory's threads is at the clock (sleeping until the
//! next deadline), and how the others are woken: a submission with an
//! earlier deadline wakes the one at the clock, or, while none is, all of
//! them, so that one takes the clock.
//!
//! The threads take turns (see `threads.rs`), so the one to wake changes.
//! A thread records itself here after it takes the clock and before it
//! reads the timer, and withdraws before it lets the clock go. A submission
//! that finds its deadline earlier than the recorded wake-up reads this
//! after it has let go of the timer's lock, so it sees whoever read the
//! timer before its insert, and a thread that reads the timer after the
//! insert sees the new deadline itself: no wake-up is lost. A stale reading
//! wakes a thread that is no longer at the clock; it finds nothing to do
//! and goes back to waiting.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;

/// Nobody at the clock.
const NOBODY: usize = usize::MAX;

pub(crate) struct AtClock {
    /// The threads that take turns, once they are started.
    threads: OnceLock<Box<[Thread]>>,
    /// The index in `threads` of the one at the clock, or [`NOBODY`].
    holder: AtomicUsize,
    /// Threads waiting for their turn without a timeout (the timer was
    /// empty when they looked).
    dozing: AtomicUsize,
}

impl AtClock {
    pub(crate) fn new() -> Self {
        AtClock {
            threads: OnceLock::new(),
            holder: AtomicUsize::new(NOBODY),
            dozing: AtomicUsize::new(0),
        }
    }

    /// Sets the threads, once, before any of them takes the clock.
    pub(super) fn set_threads(&self, threads: Box<[Thread]>) {
        let _ = self.threads.set(threads);
    }

    /// Thread `index` has taken the clock.
    pub(super) fn arrive(&self, index: usize) {
        self.holder.store(index, Ordering::SeqCst);
    }

    /// The thread at the clock is letting it go.
    pub(super) fn leave(&self) {
        self.holder.store(NOBODY, Ordering::SeqCst);
    }

    /// Whether the calling thread is the one at the clock.
    pub(super) fn is_held_here(&self) -> bool {
        self.index_of_current()
            .is_some_and(|me| self.holder.load(Ordering::SeqCst) == me)
    }

    /// Whether the calling thread is one of those taking turns.
    pub(super) fn is_one_of_us(&self) -> bool {
        self.index_of_current().is_some()
    }

    fn index_of_current(&self) -> Option<usize> {
        let me = std::thread::current().id();
        self.threads.get()?.iter().position(|t| t.id() == me)
    }

    /// A submission brought a deadline earlier than the one the clock
    /// sleeps until: wakes the thread at the clock, or, if none is (the
    /// last one is running callbacks), every thread, so that one takes it.
    pub(crate) fn wake(&self) {
        let holder = self.holder.load(Ordering::SeqCst);
        match self.threads.get() {
            Some(threads) if holder != NOBODY => threads[holder].unpark(),
            _ => self.wake_all(),
        }
    }

    /// Wakes every thread (a shutdown, which they must notice, or a clock
    /// left behind).
    pub(super) fn wake_all(&self) {
        for thread in self.threads.get().into_iter().flatten() {
            thread.unpark();
        }
    }

    /// Runs `sleep` counted as a thread waiting for its turn without a
    /// timeout. `sleep` looks at the timer after it is counted, so a thread
    /// that empties the timer and then finds nobody counted
    /// ([`anyone_dozing`](Self::anyone_dozing)) knows that whoever dozes
    /// off later saw the timer empty.
    pub(super) fn doze(&self, sleep: impl FnOnce()) {
        self.dozing.fetch_add(1, Ordering::SeqCst);
        sleep();
        self.dozing.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether a thread waits for its turn without a timeout.
    pub(super) fn anyone_dozing(&self) -> bool {
        self.dozing.load(Ordering::SeqCst) > 0
    }
}
