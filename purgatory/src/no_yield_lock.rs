//! The mutex of the locks that the timer thread and the expiration workers
//! wait on behind a submitter: the timer's, the watch lists' and the spare
//! cells'. Its waiters spin briefly, then sleep in the kernel until the
//! holder releases it; they never call `sched_yield`.
//!
//! Why not parking_lot's: its waiters yield several times before they
//! sleep. On a busy machine the holder of these locks is often a submitter
//! that the timer thread or a worker has just preempted. Under Linux's
//! EEVDF scheduler each yield moves the yielding thread's deadline back a
//! slice, so the waiter, once the lock is free, queues behind every
//! runnable thread for about a millisecond a yield; a sleeper woken by the
//! unlock is placed at once. `cargo bench --bench lateness -- --timer
//! wheel` with two busy threads: 1-5 yields a run instead of 44-167, and
//! a lower p99 inside the submission burst (BENCHMARKS.md).
//!
//! This is `std::sync::Mutex` (a futex on Linux) without its poisoning:
//! no user code runs under these locks, so a panic under one (which would
//! be a bug of ours) leaves no half-done user state behind, and the next
//! thread takes the lock as it is rather than panicking in turn. The
//! poisoning we ignore still costs std two loads of its global panic count
//! per lock and unlock: a line every thread only reads.

use std::sync::{MutexGuard, PoisonError};

pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub(crate) const fn new(value: T) -> Self {
        Mutex(std::sync::Mutex::new(value))
    }

    /// Blocks until the lock is taken; never panics.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
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
