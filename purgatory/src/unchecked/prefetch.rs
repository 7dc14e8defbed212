//! Prefetching what a completion is about to write.
//!
//! Completing an operation removes it from its watch lists and from the
//! wheel, each behind a lock that submitting threads contend for. The
//! entries removed were written when the operation was submitted, usually
//! long enough ago to have left this core's caches, so each removal used to
//! wait for a cache miss while holding a lock, and the misses came one after
//! another. Submission records where the watch entries are
//! (`Link::address`), and a lane's timer entry is found from the id in the
//! cell's timer word (`TimerWord::hint`; a wheel entry's place is the
//! wheel's to know, under its lock, so only a handle has it, below),
//! with its chunk's header, whose count the completion updates (chunks
//! are aligned to their size, so the slot's address names the header:
//! `lane::prefetch_entry`);
//! completion asks the CPU for all of those lines at once, before it takes
//! the first lock.
//!
//! Those addresses are in the cell, and the cell itself is a miss for a
//! thread that completes an operation through its handle: reading them
//! there would make the entries' misses wait for the cell's. So a handle
//! keeps a copy of two of them, its first watch entry's and its timer
//! entry's (`Delayed::hints`), and `force_complete` asks for those before
//! it reads the cell; the three misses then overlap.
//!
//! The thread at the clock, before it completes anything, resolves each
//! entry that fell due by writing its cell's timer word: a miss per cell
//! again, so it asks for the cell eight entries ahead
//! (`timer_queue.rs`, `resolve_all`).
//!
//! A batch of completions (an expiry, a check of a key's list) works
//! through cells that were written long ago as well; while it completes
//! one it asks for all the lines of the one two places ahead
//! (`Shared::drive_all`), so their misses overlap with this one's work.
//! A batch that forces an outcome (an expiry, a cancel) also asks for the
//! next operation's first watch entry, whose address the cell keeps
//! outside the operation (`Cell::watch_hint`) so that it can be read
//! before that operation is held.
//!
//! The addresses are hints: by the time they are used an entry may have
//! moved (a reschedule, a bucket that grew). A prefetch never faults and
//! never changes what the program computes, so a stale one costs a wasted
//! fetch, nothing else.

/// Asks the CPU to bring the cache line at `address` in, ready to be
/// written. Any address is allowed, dangling included: addresses are kept
/// as integers, since nothing ever goes through them. 0 means "not
/// recorded" and is skipped.
#[inline(always)]
pub(crate) fn for_write(address: usize) {
    if address == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is `unsafe` only for its `sse` target feature,
    // which every x86_64 CPU has. The instruction reads no memory the
    // program can observe and raises no fault, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0};
        _mm_prefetch::<_MM_HINT_ET0>(address as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// [`for_write`] for every 64-byte line of the `len` bytes at `start`,
/// which may be anything, as there.
#[inline(always)]
pub(crate) fn lines_for_write(start: usize, len: usize) {
    let end = start.saturating_add(len);
    let mut line = start & !63;
    while line < end {
        for_write(line);
        match line.checked_add(64) {
            Some(next) => line = next,
            None => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_address_is_harmless() {
        let mut live = [7u64; 16];
        for_write(live.as_ptr() as usize);
        let freed = Box::new(1u64);
        let dangling = &*freed as *const u64 as usize;
        drop(freed);
        for_write(dangling);
        for_write(0);
        for_write(usize::MAX);
        lines_for_write(live.as_ptr() as usize + 3, 100);
        lines_for_write(usize::MAX - 10, 1000);
        lines_for_write(dangling, 0);
        // Nothing written, nothing read back changed.
        live[3] += 1;
        assert_eq!(live.iter().sum::<u64>(), 7 * 16 + 1);
    }
}
