//! loom's versions of the names `src/unchecked/state.rs`,
//! `src/unchecked/handover.rs`, `src/unchecked/lane.rs` and
//! `src/unchecked/watch_list.rs` are written against
//! (`src/unchecked/sync.rs`), for the loom models, which compile those
//! files again.

use std::time::Instant;

// Not every model uses every name; each compiles this file whole.
#[allow(unused_imports)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
// Only `lane.rs` and `watch_list.rs` use these; each model compiles this
// file whole.
#[allow(unused_imports)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicUsize};

/// A watch list's lock (`watch_list.rs`).
#[allow(unused_imports)]
pub(crate) use self::Mutex as ListMutex;
#[allow(unused_imports)]
pub(crate) use loom::sync::MutexGuard as ListGuard;

/// Two slots a watch-list chunk, so that a model fills one and starts the
/// next in a few steps.
#[allow(dead_code)]
pub(crate) const WATCH_SLOTS: (usize, usize) = (2, 2);

/// Three slots a lane chunk, so that a model fills one and starts the next
/// in a few steps.
pub(crate) const LANE_SLOTS: u32 = 3;

/// One entry left makes a chunk sparse, so that a model moves it out.
pub(crate) const LANE_SPARSE: u32 = 1;

/// `word |= bits` for a word nobody else can reach (`state.rs`'s
/// `clear`): loom checks that nobody else does.
#[allow(dead_code)]
pub(crate) fn or_exclusive(word: &mut AtomicU32, bits: u32) -> u32 {
    word.with_mut(|word| {
        let before = *word;
        *word |= bits;
        before
    })
}

/// `word = value` for a word nobody else can reach.
#[allow(dead_code)]
pub(crate) fn set_exclusive(word: &mut AtomicU64, value: u64) {
    word.with_mut(|word| *word = value);
}

/// loom's `UnsafeCell` fails the model if two threads reach the value
/// at once: the check that `RUNNING`, then the hand-over, really are
/// exclusive.
pub(crate) struct Exclusive<T>(loom::cell::UnsafeCell<T>);

impl<T> Exclusive<T> {
    pub(crate) fn new(value: T) -> Self {
        Exclusive(loom::cell::UnsafeCell::new(value))
    }

    pub(crate) unsafe fn get_mut(&self) -> ExclusiveRef<'_, T> {
        ExclusiveRef(self.0.get_mut(), std::marker::PhantomData)
    }
}

pub(crate) struct ExclusiveRef<'a, T>(loom::cell::MutPtr<T>, std::marker::PhantomData<&'a mut T>);

impl<T> std::ops::Deref for ExclusiveRef<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: loom tracks the access and fails the model on a race.
        unsafe { self.0.deref() }
    }
}

impl<T> std::ops::DerefMut for ExclusiveRef<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above.
        unsafe { self.0.deref() }
    }
}

/// Hands each loom thread its own number the first time it asks (an
/// ordinary atomic: it is bookkeeping of the test, not part of the model).
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
loom::thread_local!(static TOKEN: u64 = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));

pub(crate) fn thread_token() -> u64 {
    TOKEN.with(|t| *t)
}

/// A watch list's lock, in the models.
#[allow(dead_code)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[allow(dead_code)]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> ListGuard<'_, T> {
        self.0.lock().unwrap()
    }
}

/// The waker's lock, apart from what it guards, as in `src/unchecked/sync.rs`.
pub(crate) struct ByteLock(loom::sync::Mutex<()>);

pub(crate) struct ByteLockGuard<'a>(#[allow(dead_code)] loom::sync::MutexGuard<'a, ()>);

impl ByteLock {
    pub(crate) fn new() -> Self {
        ByteLock(loom::sync::Mutex::new(()))
    }

    pub(crate) fn lock(&self) -> ByteLockGuard<'_> {
        ByteLockGuard(self.0.lock().unwrap())
    }
}

struct Unpark(loom::thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

pub(crate) fn thread_waker() -> std::task::Waker {
    std::task::Waker::from(std::sync::Arc::new(Unpark(loom::thread::current())))
}

pub(crate) fn park() {
    loom::thread::park();
}

/// Loom has no timed park: the models do not wait with a deadline.
pub(crate) fn park_until(_deadline: Instant) -> bool {
    loom::thread::park();
    true
}

/// The models' operations do not panic when dropped.
pub(crate) fn drop_guarded<T>(value: T) {
    drop(value);
}
