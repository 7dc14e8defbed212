//! The synchronisation primitives `state.rs` is written against. The loom
//! test compiles `state.rs` again against loom's versions of the same names.

pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A non-zero number that identifies the calling thread while it lives: the
/// address of a thread-local.
pub(crate) fn thread_token() -> u64 {
    thread_local!(static TOKEN: u8 = const { 0 });
    TOKEN.with(|t| t as *const u8 as u64)
}

/// A value that one thread at a time has, by a protocol outside it; the lock
/// is never contended and only hands out `&mut T` safely.
pub(crate) struct Exclusive<T>(parking_lot::Mutex<T>);

impl<T> Exclusive<T> {
    pub(crate) fn new(value: T) -> Self {
        Exclusive(parking_lot::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, T> {
        self.0.lock()
    }
}
