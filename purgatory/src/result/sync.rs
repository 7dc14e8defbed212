//! The lock and the parking `slot.rs` is written against, in shapes that
//! loom's versions share: the lock is `parking_lot`'s, which neither poisons
//! nor allocates, and a thread blocked on a result parks itself, woken by a
//! waker that unparks it.

pub(crate) use parking_lot::MutexGuard;
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::thread::Thread;
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

/// Wakes a thread parked on a result.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks the calling thread; made once per thread.
pub(crate) fn thread_waker() -> Waker {
    thread_local!(static WAKER: Waker = Waker::from(Arc::new(Unpark(std::thread::current()))));
    WAKER
        .try_with(Waker::clone)
        // During the thread's teardown: a waker of its own.
        .unwrap_or_else(|_| Waker::from(Arc::new(Unpark(std::thread::current()))))
}

/// Parks the calling thread until it is unparked (or spuriously).
pub(crate) fn park() {
    std::thread::park();
}

/// Parks the calling thread until it is unparked (or spuriously), or
/// until `deadline`; false, without parking, once `deadline` has passed.
pub(crate) fn park_until(deadline: Instant) -> bool {
    let now = Instant::now();
    if now >= deadline {
        return false;
    }
    std::thread::park_timeout(deadline - now);
    true
}
