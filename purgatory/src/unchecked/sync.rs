//! The synchronisation primitives `state.rs` is written against. The loom
//! test compiles `state.rs` again against loom's versions of the same names.

pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A number that identifies the calling thread: threads are counted from 1
/// as they first ask, so a token is never 0, never reused (as a
/// thread-local's address would be once its thread ends) and never reaches
/// the top bit, which `state.rs` uses as a mark.
pub(crate) fn thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local!(static TOKEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) });
    TOKEN.with(|token| match token.get() {
        0 => {
            let new = NEXT.fetch_add(1, Ordering::Relaxed);
            token.set(new);
            new
        }
        known => known,
    })
}

/// A value that one thread at a time has, by a protocol outside it (the
/// `RUNNING` bit of `state.rs`). It used to be an uncontended mutex; two
/// atomic read-modify-writes per check bought nothing the protocol did not
/// already give. The loom test swaps in loom's `UnsafeCell`, which fails the
/// model if two threads ever reach the value at once.
pub(crate) struct Exclusive<T>(std::cell::UnsafeCell<T>);

// SAFETY: the value is only reached through `get_mut`, whose contract lets
// one thread at a time use it; handing it between threads needs `T: Send`.
unsafe impl<T: Send> Sync for Exclusive<T> {}

impl<T> Exclusive<T> {
    pub(crate) fn new(value: T) -> Self {
        Exclusive(std::cell::UnsafeCell::new(value))
    }

    /// The value, for the holder of the protocol's exclusive right.
    ///
    /// # Safety
    /// No other result of `get_mut` on this value may be alive: the caller
    /// holds the exclusive right, with acquire/release ordering against the
    /// previous and next holder, for as long as it keeps the result.
    pub(crate) unsafe fn get_mut(&self) -> ExclusiveRef<'_, T> {
        // SAFETY: exclusive by the caller's contract.
        ExclusiveRef(unsafe { &mut *self.0.get() })
    }
}

/// What [`Exclusive::get_mut`] hands out.
pub(crate) struct ExclusiveRef<'a, T>(&'a mut T);

impl<T> std::ops::Deref for ExclusiveRef<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0
    }
}

impl<T> std::ops::DerefMut for ExclusiveRef<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
    }
}
