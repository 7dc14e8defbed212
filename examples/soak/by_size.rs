//! The heap in use broken down by block size, so that a soak whose heap
//! moves can say which sizes of block moved, and from that which
//! structure.
//!
//! Sizes fall in classes of four per doubling (as jemalloc's do): a class
//! is named by the largest size it holds, so a 128-byte cell is in "128"
//! and a 129- to 160-byte one in "160". Counting is off until
//! [`enable`]d, and then costs each allocation and free one relaxed
//! atomic add on a counter that threads allocating the same class share.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

/// Classes cover every `usize`: four below 5 bytes, then four per doubling.
pub const CLASSES: usize = 4 + 62 * 4;

/// Forwards every call to `A` and, once enabled, counts the bytes in use
/// per size class.
pub struct BySize<A>(pub A);

static ENABLED: AtomicBool = AtomicBool::new(false);
static IN_USE: [AtomicIsize; CLASSES] = [const { AtomicIsize::new(0) }; CLASSES];

/// Starts counting. Blocks allocated before are not counted, nor their
/// frees, so the counts are only right for blocks allocated after: call
/// it first thing.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Bytes in use per class (see [`limit`] for a class's sizes).
pub fn in_use() -> [isize; CLASSES] {
    std::array::from_fn(|c| IN_USE[c].load(Ordering::Relaxed))
}

/// The class of a block of `size` bytes.
pub fn class_of(size: usize) -> usize {
    let s = size.max(1);
    if s <= 4 {
        return s - 1;
    }
    // s - 1 lies in [2^k, 2^(k+1)), k >= 2; the class is its quarter.
    let k = (s - 1).ilog2() as usize;
    let quarter = ((s - 1) - (1 << k)) >> (k - 2);
    4 + (k - 2) * 4 + quarter
}

/// The largest size in `class`.
pub fn limit(class: usize) -> usize {
    if class < 4 {
        return class + 1;
    }
    let (k, quarter) = ((class - 4) / 4 + 2, (class - 4) % 4);
    let step = 1usize << (k - 2);
    (1usize << k).saturating_add(step.saturating_mul(quarter + 1))
}

fn count(size: usize, delta: isize) {
    if ENABLED.load(Ordering::Relaxed) {
        IN_USE[class_of(size)].fetch_add(delta, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to `A`, which upholds
// GlobalAlloc's contract; the counters only observe sizes.
unsafe impl<A: GlobalAlloc> GlobalAlloc for BySize<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), layout.size() as isize);
        // SAFETY: forwarded with the caller's layout (see the impl).
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(layout.size(), -(layout.size() as isize));
        // SAFETY: `ptr` came from `alloc` with this layout (see the impl).
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout.size(), -(layout.size() as isize));
        count(new_size, new_size as isize);
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_lies_in_its_class_and_classes_are_in_order() {
        let sizes = (1..5000).chain([65_536, 65_537, 1 << 40, usize::MAX - 1, usize::MAX]);
        for s in sizes {
            let c = class_of(s);
            assert!(c < CLASSES, "{s}");
            assert!(
                s <= limit(c),
                "{s} above its class {c}'s limit {}",
                limit(c)
            );
            assert!(c == 0 || s > limit(c - 1), "{s} fits class {}", c - 1);
        }
        assert_eq!(limit(class_of(128)), 128);
        assert_eq!(limit(class_of(129)), 160);
        assert_eq!(class_of(usize::MAX), CLASSES - 1);
    }
}
