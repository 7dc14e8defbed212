//! A mutex whose holder inherits the priority of a real-time thread
//! waiting for it (Linux's priority-inheriting futex, `FUTEX_LOCK_PI`): the
//! timer's lock, which the thread at the clock takes behind submitters.
//!
//! An embedder that favours the purgatory's threads (a real-time class set
//! in `on_thread_start`) still saw them wait milliseconds inside a burst of
//! submissions: the thread at the clock, woken by its alarm, found the timer's
//! lock held by a submitter of ordinary priority that a busy thread had
//! preempted, and slept until that submitter's next turn on a core (1.8-2.3
//! ms in std's mutex, by `perf trace`). With a priority-inheriting futex the
//! kernel runs the holder at the waiter's priority until it lets go, so the
//! wait is the rest of the holder's critical section.
//!
//! Only a thread marked with [`lend_priority_if_real_time`] (the
//! purgatory's own threads, after the embedder's hook) and running in a
//! real-time class waits that way. Everyone else spins briefly, then
//! sleeps on a second word until an unlock wakes one of them, and a woken
//! waiter competes for the lock with threads that arrive meanwhile, as in
//! std's mutex. The kernel's priority-inheriting unlock hands the lock to
//! the sleeping waiter instead, which under contention between threads of
//! one priority makes every other thread wait for that one to wake up:
//! `purgatory_perf` at 1M/s fell from 100% to 71-78% achieved when every
//! waiter of the three locks in `no_yield_lock` inherited. Nobody calls
//! `sched_yield`.
//!
//! The word is 0 when the lock is free, else the holder's thread id, with
//! `FUTEX_WAITERS` set by the kernel while a real-time waiter sleeps in
//! `FUTEX_LOCK_PI` (futex(2), "Priority-inheritance futexes"). Taking a
//! free lock and releasing one nobody waits for are a compare-and-swap
//! each. Where the kernel has no priority-inheriting futexes (`ENOSYS`),
//! real-time waiters sleep as the others do.
//!
//! Like the rest of `no_yield_lock`, it has no poisoning: a panic under it
//! releases it (the guard's drop), and the next thread takes it as it is.

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering};

/// Tries before a waiter sleeps: std's futex mutex spins as long.
const SPINS: u32 = 100;

pub(crate) struct PiMutex<T> {
    /// 0, or the holder's thread id with the kernel's flags.
    word: AtomicU32,
    /// Threads asleep on `wake` (those that do not inherit).
    sleepers: AtomicU32,
    /// Moved on by an unlock that finds sleepers; they sleep on it.
    wake: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard, and only the thread
// whose id the word holds has one, so the mutex hands `T` from thread to
// thread one at a time, as std's `Mutex` does: it needs `T: Send`, not
// `T: Sync`.
unsafe impl<T: Send> Send for PiMutex<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for PiMutex<T> {}

/// Holds the lock; releases it when dropped. Not `Send`: the kernel
/// releases a priority-inheriting futex only for the thread that holds it.
pub(crate) struct PiMutexGuard<'a, T> {
    lock: &'a PiMutex<T>,
    tid: u32,
    _not_send: PhantomData<*const ()>,
}

/// Set once a futex call answered `ENOSYS`: no thread inherits after that.
static NO_PI: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread's kernel id, once asked.
    static TID: Cell<u32> = const { Cell::new(0) };
    /// Whether this thread waits with priority inheritance.
    static LENDS: Cell<bool> = const { Cell::new(false) };
}

/// Makes the calling thread wait for a [`PiMutex`] with priority
/// inheritance if it runs in a real-time class now (`SCHED_FIFO`, `SCHED_RR` or
/// `SCHED_DEADLINE`), and as every other thread if not. The purgatory's
/// threads call it once the embedder's start hook has run.
pub(crate) fn lend_priority_if_real_time() {
    // SAFETY: a system call about this thread, with no pointer.
    let policy = unsafe { libc::sched_getscheduler(0) };
    let real_time = matches!(policy, libc::SCHED_FIFO | libc::SCHED_RR | SCHED_DEADLINE);
    LENDS.with(|lends| lends.set(real_time));
}

/// Linux's `SCHED_DEADLINE`, which the libc crate does not name.
const SCHED_DEADLINE: libc::c_int = 6;

impl<T> PiMutex<T> {
    pub(crate) const fn new(value: T) -> Self {
        PiMutex {
            word: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            wake: AtomicU32::new(0),
            value: UnsafeCell::new(value),
        }
    }

    /// Blocks until the lock is taken; never panics.
    #[inline]
    pub(crate) fn lock(&self) -> PiMutexGuard<'_, T> {
        let tid = current_tid();
        if self
            .word
            .compare_exchange(0, tid, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended(tid);
        }
        PiMutexGuard {
            lock: self,
            tid,
            _not_send: PhantomData,
        }
    }

    #[cold]
    fn lock_contended(&self, tid: u32) {
        if self.spin(tid) {
            return;
        }
        if LENDS.with(Cell::get) && !NO_PI.load(Ordering::Relaxed) && self.lock_inheriting() {
            return;
        }
        loop {
            // Announce the sleep before the last try, so that an unlock
            // after that try sees a sleeper (both sides sequentially
            // consistent: the unlock's release, then its read of
            // `sleepers`).
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            let seen = self.wake.load(Ordering::SeqCst);
            let taken = self
                .word
                .compare_exchange(0, tid, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok();
            if !taken {
                // Returns at once if an unlock moved `wake` on since.
                let _ = self.futex(&self.wake, libc::FUTEX_WAIT, seen);
            }
            self.sleepers.fetch_sub(1, Ordering::Relaxed);
            if taken || self.spin(tid) {
                return;
            }
        }
    }

    /// Tries for the lock a little while, unless others sleep for it;
    /// whether it was taken.
    fn spin(&self, tid: u32) -> bool {
        for _ in 0..SPINS {
            std::hint::spin_loop();
            let word = self.word.load(Ordering::Relaxed);
            if word == 0 {
                if self
                    .word
                    .compare_exchange_weak(0, tid, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return true;
                }
            } else if word & libc::FUTEX_WAITERS != 0 || self.sleepers.load(Ordering::Relaxed) != 0
            {
                // Others sleep already: spinning would not get ahead of them.
                return false;
            }
        }
        false
    }

    /// Sleeps in the kernel with the holder running at this thread's
    /// priority until the lock is this thread's; `false` if the kernel has
    /// no priority-inheriting futexes.
    fn lock_inheriting(&self) -> bool {
        loop {
            match self.futex(&self.word, libc::FUTEX_LOCK_PI, 0) {
                Ok(()) => {
                    // The kernel set the word to our id.
                    fence(Ordering::Acquire);
                    return true;
                }
                Err(libc::ENOSYS) => {
                    NO_PI.store(true, Ordering::Relaxed);
                    return false;
                }
                // Interrupted, or the holder was exiting: ask again.
                Err(_) => {}
            }
        }
    }

    #[inline]
    fn unlock(&self, tid: u32) {
        if self
            .word
            .compare_exchange(tid, 0, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            self.unlock_inheriting();
        }
        if self.sleepers.load(Ordering::SeqCst) != 0 {
            self.wake_one();
        }
    }

    /// A real-time waiter sleeps in the kernel: the kernel hands it the
    /// lock.
    #[cold]
    fn unlock_inheriting(&self) {
        fence(Ordering::SeqCst);
        while let Err(errno) = self.futex(&self.word, libc::FUTEX_UNLOCK_PI, 0) {
            if errno != libc::EINTR {
                // Only a bug of ours (an unlock by a thread that does not
                // hold the lock) gets here, and asking again would not
                // help: say so.
                tracing::error!(errno, "FUTEX_UNLOCK_PI failed");
                break;
            }
        }
        fence(Ordering::SeqCst);
    }

    #[cold]
    fn wake_one(&self) {
        self.wake.fetch_add(1, Ordering::SeqCst);
        let _ = self.futex(&self.wake, libc::FUTEX_WAKE, 1);
    }

    /// One futex call on `word` (one of this mutex's); the errno on
    /// failure.
    fn futex(&self, word: &AtomicU32, op: libc::c_int, value: u32) -> Result<(), libc::c_int> {
        // SAFETY: the address is that of an `AtomicU32` of this mutex, which
        // lives as long as `self`, aligned as the kernel requires; the
        // kernel only reads and writes it atomically, and these operations
        // take no timeout or second address.
        let r = unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                op | libc::FUTEX_PRIVATE_FLAG,
                value,
                std::ptr::null::<libc::timespec>(),
                std::ptr::null::<u32>(),
                0,
            )
        };
        if r == -1 {
            Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL))
        } else {
            Ok(())
        }
    }
}

impl<T> Deref for PiMutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (its thread's id is in the
        // word until it drops), so nothing else reaches the value.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for PiMutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only
        // reference through the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for PiMutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.unlock(self.tid);
    }
}

/// This thread's kernel id, asked once per thread.
#[inline]
fn current_tid() -> u32 {
    TID.with(|tid| match tid.get() {
        0 => {
            // SAFETY: gettid has no arguments and cannot fail.
            let id = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
            tid.set(id);
            id
        }
        id => id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn a_waiter_that_sleeps_in_the_kernel_gets_the_lock_on_release() {
        let lock = Arc::new(PiMutex::new(0u32));
        let guard = lock.lock();
        let waiter = {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || *lock.lock() += 1)
        };
        wait_for_a_sleeper(&lock);
        assert_eq!(
            lock.word.load(Ordering::Relaxed) & libc::FUTEX_WAITERS,
            0,
            "an ordinary thread does not wait in FUTEX_LOCK_PI"
        );
        drop(guard);
        waiter.join().unwrap();
        assert_eq!(*lock.lock(), 1);
        drop(lock.lock());
        assert_eq!(lock.word.load(Ordering::Relaxed), 0, "free once released");
    }

    #[test]
    fn a_waiter_marked_but_not_real_time_does_not_inherit() {
        let lock = Arc::new(PiMutex::new(()));
        let guard = lock.lock();
        let waiter = {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || {
                lend_priority_if_real_time();
                drop(lock.lock());
            })
        };
        wait_for_a_sleeper(&lock);
        assert_eq!(lock.word.load(Ordering::Relaxed) & libc::FUTEX_WAITERS, 0);
        drop(guard);
        waiter.join().unwrap();
    }

    /// Four threads add `rounds` each under `lock`, each holding it for
    /// `hold_us` every `hold_every` rounds so that the others sleep; the
    /// first one in `SCHED_FIFO` (and lending) if `real_time_first` and
    /// the privilege allows.
    fn count_under_contention(rounds: u64, hold_every: u64, hold_us: u64, real_time_first: bool) {
        let lock = Arc::new(PiMutex::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|n| {
                let lock = Arc::clone(&lock);
                std::thread::spawn(move || {
                    if n == 0 && real_time_first {
                        become_real_time();
                    }
                    for i in 0..rounds {
                        let mut g = lock.lock();
                        *g += 1;
                        if i % hold_every == 0 {
                            std::thread::sleep(Duration::from_micros(hold_us));
                        }
                    }
                })
            })
            .collect();
        // A lost wake-up leaves a thread asleep for ever: fail instead of
        // hanging the test run.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !threads.iter().all(|t| t.is_finished()) {
            assert!(Instant::now() < deadline, "a waiter was never woken");
            std::thread::sleep(Duration::from_millis(5));
        }
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*lock.lock(), 4 * rounds);
        assert_eq!(lock.word.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn contended_increments_are_all_counted() {
        count_under_contention(20_000, 1000, 200, false);
    }

    #[test]
    fn an_inheriting_waiter_and_ordinary_ones_share_the_lock() {
        count_under_contention(5_000, 500, 300, true);
    }

    /// Puts the calling thread in `SCHED_FIFO` at priority 1 and marks it
    /// to lend it; `false` without the privilege.
    fn become_real_time() -> bool {
        let param = libc::sched_param { sched_priority: 1 };
        // SAFETY: plain system call on this thread, with a valid parameter
        // block.
        let ok = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
        lend_priority_if_real_time();
        ok
    }

    /// Waits (at most 5 s) until a thread sleeps on `lock` as an ordinary
    /// waiter.
    fn wait_for_a_sleeper<T>(lock: &PiMutex<T>) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while lock.sleepers.load(Ordering::Relaxed) == 0 {
            assert!(Instant::now() < deadline, "the waiter never slept");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The effective priority in `/proc/thread-self/stat` (field 18):
    /// negative for a real-time priority, ours or inherited.
    fn effective_priority() -> i64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // Fields after the command name, which is in parentheses.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        rest.split(' ').nth(15).unwrap().parse().unwrap()
    }

    #[test]
    fn the_holder_runs_at_the_priority_of_a_real_time_waiter() {
        let lock = Arc::new(PiMutex::new(()));
        let guard = lock.lock();
        let before = effective_priority();
        let waiter = {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || {
                if !become_real_time() {
                    return false; // no privilege here: nothing to check
                }
                drop(lock.lock());
                true
            })
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut boosted = false;
        while !waiter.is_finished() && Instant::now() < deadline {
            if effective_priority() < 0 {
                boosted = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(guard);
        let privileged = waiter.join().unwrap();
        if privileged && !NO_PI.load(Ordering::Relaxed) {
            assert!(before >= 0, "started at an ordinary priority ({before})");
            assert!(boosted, "the holder never inherited the waiter's priority");
            assert!(effective_priority() >= 0, "and gave it back on release");
        } else {
            eprintln!("skipped: SCHED_FIFO not permitted, or no PI futexes");
        }
    }
}
