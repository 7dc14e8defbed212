//! The mutexes of the locks that the purgatory's threads wait on behind a
//! submitter: the timer's, the watch lists' and the spare cells'; and the
//! clock those threads take turns at. Their waiters spin briefly, then
//! sleep in the kernel until the holder releases the lock; they never call
//! `sched_yield`.
//!
//! Why not parking_lot's: its waiters yield several times before they
//! sleep. On a busy machine the holder of these locks is often a submitter
//! that the thread at the clock has just preempted. Under Linux's
//! EEVDF scheduler each yield moves the yielding thread's deadline back a
//! slice, so the waiter, once the lock is free, queues behind every
//! runnable thread for about a millisecond a yield; a sleeper woken by the
//! unlock is placed at once. `cargo bench --bench lateness -- --timer
//! wheel` with two busy threads: 1-5 yields a run instead of 44-167, and
//! a lower p99 inside the submission burst (docs/performance.md).
//!
//! [`Mutex`] is `std::sync::Mutex` (a futex on Linux) without its
//! poisoning. [`InheritingMutex`], the timer's lock, is on Linux a
//! priority-inheriting one: an embedder that puts the purgatory's threads
//! in a real-time class (through `on_thread_start`) wants them to run as
//! soon as they are due, but a waiter can only run once the holder lets
//! go, and a submitter of ordinary priority, preempted while it holds the
//! timer's lock, lets go at its next turn on a core: milliseconds on a
//! busy machine. With the waiter's priority lent, it finishes its critical
//! section at once ([`PiMutex`](crate::unchecked::pi_mutex::PiMutex)).
//! Only the purgatory's own threads in a real-time class lend theirs
//! ([`lend_priority_if_real_time`], after the hook). The watch lists' and
//! the spare cells' locks stay std's: made priority-inheriting too, they
//! cost `purgatory_perf`'s low case 4% more CPU per request, where the
//! timer's lock alone cost nothing to measure and carried most of the
//! lateness gain (docs/performance.md).
//!
//! Neither poisons: no user code runs under these locks, so a panic under
//! one (which would be a bug of ours) leaves no half-done user state
//! behind, and the next thread takes the lock as it is rather than
//! panicking in turn. The poisoning std's mutex still checks costs two
//! loads of its global panic count per lock and unlock: a line every
//! thread only reads.

use std::sync::{MutexGuard, PoisonError};

#[cfg(target_os = "linux")]
pub(crate) use crate::unchecked::pi_mutex::{
    lend_priority_if_real_time, PiMutex as InheritingMutex,
};

/// Elsewhere no thread inherits, and the timer's lock is the same mutex as
/// the others.
#[cfg(not(target_os = "linux"))]
pub(crate) fn lend_priority_if_real_time() {}
#[cfg(not(target_os = "linux"))]
pub(crate) type InheritingMutex<T> = Mutex<T>;

pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub(crate) const fn new(value: T) -> Self {
        Mutex(std::sync::Mutex::new(value))
    }

    /// Blocks until the lock is taken; never panics.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lock if it is free; never blocks or panics.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_panic_under_the_lock_leaves_it_usable() {
        let lock = Arc::new(Mutex::new(vec![1]));
        let held = Arc::clone(&lock);
        let died = std::thread::spawn(move || {
            let mut guard = held.lock();
            guard.push(2);
            panic!("a bug under the lock");
        })
        .join();
        assert!(died.is_err());
        assert_eq!(*lock.lock(), [1, 2]);
    }

    #[test]
    fn waiters_take_turns() {
        let lock = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = Arc::clone(&lock);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *lock.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*lock.lock(), 40_000);
    }
}
