//! The synchronisation primitives `state.rs`, `handover.rs`, `lane.rs` and
//! `watch_list.rs` are written against. The loom tests compile them again against loom's
//! versions of the same names.

pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

/// A watch list's lock (`watch_list.rs`).
pub(crate) use crate::no_yield_lock::Mutex as ListMutex;
pub(crate) use std::sync::MutexGuard as ListGuard;

/// Slots of a watch list's first chunk and of its largest: 4 KiB of words.
pub(crate) const WATCH_SLOTS: (usize, usize) = (4, 512);

/// Slots per chunk of a timer lane (`lane.rs`): 4 KiB with the header.
pub(crate) const LANE_SLOTS: u32 = 252;

/// Entries left in a lane chunk at which the lane moves them out and frees
/// it (`lane.rs`).
pub(crate) const LANE_SPARSE: u32 = LANE_SLOTS / 16;
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::thread::Thread;
use std::time::Instant;

/// `word |= bits` for a word nobody else can reach: a plain load and
/// store. Returns the bits before.
pub(crate) fn or_exclusive(word: &mut AtomicU32, bits: u32) -> u32 {
    let word = word.get_mut();
    let before = *word;
    *word |= bits;
    before
}

/// `word = value` for a word nobody else can reach.
pub(crate) fn set_exclusive(word: &mut AtomicU64, value: u64) {
    *word.get_mut() = value;
}

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

/// The lock of a state's waker, under which the reader takes the
/// operation: `parking_lot`'s, which neither poisons nor allocates, in
/// its raw form, apart from what it guards. `parking_lot::Mutex` puts
/// its byte in front of the value and pads it to the value's alignment,
/// a word; alone, the byte goes where the struct that holds it has room
/// (beside the state's 32-bit word, `state.rs`). What it guards is an
/// [`Exclusive`] reached only through a [`ByteLockGuard`]
/// (`OpState::lock_waker`). A newtype so that loom's lock can take its
/// name.
pub(crate) struct ByteLock(parking_lot::RawMutex);

/// A held [`ByteLock`], released when dropped. Not `Send`: the lock is
/// released on the thread that took it.
pub(crate) struct ByteLockGuard<'a> {
    lock: &'a parking_lot::RawMutex,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl ByteLock {
    pub(crate) fn new() -> Self {
        ByteLock(<parking_lot::RawMutex as parking_lot::lock_api::RawMutex>::INIT)
    }

    pub(crate) fn lock(&self) -> ByteLockGuard<'_> {
        parking_lot::lock_api::RawMutex::lock(&self.0);
        ByteLockGuard {
            lock: &self.0,
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for ByteLockGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: a guard is made only by `ByteLock::lock`, which took the
        // lock on this thread (the guard cannot leave it), and dropped
        // once, so the lock is held here, by this thread.
        unsafe { parking_lot::lock_api::RawMutex::unlock(self.lock) }
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

/// A waker that unparks the calling thread; made once per thread. A thread
/// blocked on a result leaves it as a task leaves its own, so a blocked
/// wait is woken exactly as a task is, with no condition variable.
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

/// Drops what holds a user's operation on a thread that must survive a
/// panic in the operation's `Drop` (see `caught.rs`).
pub(crate) fn drop_guarded<T>(value: T) {
    crate::caught::drop_logged(value);
}
