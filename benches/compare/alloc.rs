//! A global allocator that counts the bytes in use on top of another one,
//! to measure memory per pending timer or operation, and to tell a
//! program's own growth from its allocator's.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicIsize, Ordering};

/// Forwards every call to `A` and counts the bytes handed out.
pub struct Counting<A>(pub A);

static IN_USE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded unchanged to `A`, which upholds
// GlobalAlloc's contract; the counter only observes sizes.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        IN_USE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout (see the impl).
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout (see the impl).
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        IN_USE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

/// Bytes currently allocated through this allocator.
pub fn in_use() -> isize {
    IN_USE.load(Ordering::Relaxed)
}
