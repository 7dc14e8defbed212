//! The lock and condition variable `slot.rs` is written against, in the
//! shape of `std::sync`'s (a wait takes the guard and hands it back), which
//! loom's versions share; here they are `parking_lot`'s, which neither
//! poison nor allocate.

pub(crate) use parking_lot::MutexGuard;
use std::time::Instant;

pub(crate) struct Mutex<T>(parking_lot::Mutex<T>);

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(parking_lot::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock()
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.0.get_mut()
    }
}

pub(crate) struct Condvar(parking_lot::Condvar);

impl Condvar {
    pub(crate) fn new() -> Self {
        Condvar(parking_lot::Condvar::new())
    }

    pub(crate) fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.0.wait(&mut guard);
        guard
    }

    /// Waits until notified or `deadline`; the flag says whether it timed out.
    pub(crate) fn wait_until<'a, T>(
        &self,
        mut guard: MutexGuard<'a, T>,
        deadline: Instant,
    ) -> (MutexGuard<'a, T>, bool) {
        let timed_out = self.0.wait_until(&mut guard, deadline).timed_out();
        (guard, timed_out)
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}
