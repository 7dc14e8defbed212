//! One level of the wheel: 64 buckets and a bitmap of the occupied ones.
//!
//! Level `L` has buckets `2^(6L)` ticks wide, so it spans `2^(6(L+1))` ticks.
//! An entry sits on the level of the highest bit in which its deadline differs
//! from the wheel's current time (`elapsed ^ deadline`): level 0 holds what is
//! due within this 64-tick window, level 1 what is due within this 4096-tick
//! window, and so on. Eleven levels cover every `u64` deadline, so nothing ever
//! overflows and no deadline is refused. (The wheel keeps a second level-0
//! array for the next 64-tick window, which takes that window's entries
//! instead of level 1 or 2; see `wheel.rs`.)
//!
//! Because an entry's deadline agrees with `elapsed` on every bit above its
//! level, its bucket is never behind the level's current position: finding the
//! next due bucket is a mask and a `trailing_zeros`, never a scan.

/// Buckets per level.
pub(crate) const SLOTS: usize = 64;
/// log2 of [`SLOTS`]: a tick's window (its 64-tick span on level 0) is
/// `tick >> SLOT_BITS`.
pub(crate) const SLOT_BITS: u32 = 6;
/// Levels needed so that the top one holds bit 63.
pub(crate) const LEVELS: usize = 11;

use crate::bucket::Bucket;

pub(crate) struct Level {
    /// Bit `s` is set when `buckets[s]` is not empty.
    occupied: u64,
    buckets: [Bucket; SLOTS],
}

/// A bucket that has come due: where it is and the tick it starts at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Due {
    pub level: usize,
    pub slot: usize,
    pub start: u64,
}

/// The level on which an entry due at `deadline` sits when the time is `elapsed`.
/// Requires `deadline > elapsed`.
pub(crate) fn level_for(elapsed: u64, deadline: u64) -> usize {
    debug_assert!(deadline > elapsed);
    // `| (SLOTS-1)` keeps level 0 for deadlines inside this 64-tick window.
    let masked = (elapsed ^ deadline) | (SLOTS as u64 - 1);
    let significant = 63 - masked.leading_zeros();
    (significant / SLOT_BITS) as usize
}

/// The bucket of `deadline` on `level`.
pub(crate) fn slot_for(deadline: u64, level: usize) -> usize {
    ((deadline >> (level as u32 * SLOT_BITS)) as usize) & (SLOTS - 1)
}

impl Level {
    pub(crate) fn new() -> Self {
        Level {
            occupied: 0,
            buckets: std::array::from_fn(|_| Bucket::default()),
        }
    }

    pub(crate) fn bucket(&self, slot: usize) -> &Bucket {
        &self.buckets[slot]
    }

    /// Adds `index` to bucket `slot`; returns its position there.
    #[inline]
    pub(crate) fn push(&mut self, slot: usize, index: u32) -> u32 {
        self.occupied |= 1 << slot;
        self.buckets[slot].push(index)
    }

    /// Where position `pos` of bucket `slot` is stored (see
    /// `TimingWheel::addresses`).
    pub(crate) fn address(&self, slot: usize, pos: u32) -> *const () {
        self.buckets[slot].address(pos)
    }

    /// Removes position `pos` of bucket `slot`; returns whether that
    /// emptied the bucket.
    #[inline]
    pub(crate) fn remove(&mut self, slot: usize, pos: u32) -> bool {
        let emptied = self.buckets[slot].remove(pos);
        if emptied {
            self.occupied &= !(1 << slot);
        }
        emptied
    }

    /// Moves bucket `slot`'s entries into `out` and empties it.
    pub(crate) fn take(&mut self, slot: usize, out: &mut Vec<u32>) {
        self.buckets[slot].drain_into(out);
        self.occupied &= !(1 << slot);
    }

    /// Bucket `slot` itself (to lend it a buffer or take one back).
    #[inline]
    pub(crate) fn bucket_mut(&mut self, slot: usize) -> &mut Bucket {
        &mut self.buckets[slot]
    }

    /// The first occupied bucket at or after the position of `elapsed`.
    pub(crate) fn next_due(&self, level: usize, elapsed: u64) -> Option<Due> {
        if self.occupied == 0 {
            return None;
        }
        let shift = level as u32 * SLOT_BITS;
        let here = slot_for(elapsed, level);
        let ahead = self.occupied & (u64::MAX << here);
        // Entries never sit behind the level's position (see the module docs).
        debug_assert_ne!(ahead, 0, "level {level} has entries behind the clock");
        let slot = ahead.trailing_zeros() as usize;
        // The start of this level's current span; the top level spans all of u64.
        let span_bits = shift + SLOT_BITS;
        let level_start = if span_bits >= 64 {
            0
        } else {
            elapsed & !((1u64 << span_bits) - 1)
        };
        Some(Due {
            level,
            slot,
            start: level_start + ((slot as u64) << shift),
        })
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.occupied == 0
    }

    /// Moves every entry of the level into `out`.
    pub(crate) fn drain_into(&mut self, out: &mut Vec<u32>) {
        for bucket in &mut self.buckets {
            bucket.drain_into(out);
        }
        self.occupied = 0;
    }

    /// Returns the memory of the buckets that are empty now (all of them,
    /// once the level is).
    pub(crate) fn shrink_empty(&mut self) {
        for bucket in &mut self.buckets {
            if bucket.is_empty() {
                bucket.shrink();
            }
        }
    }

    /// Bytes of bucket memory allocated on this level.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.buckets.iter().map(Bucket::allocated_bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_boundaries() {
        assert_eq!(level_for(0, 1), 0);
        assert_eq!(level_for(0, 63), 0);
        assert_eq!(level_for(0, 64), 1);
        assert_eq!(level_for(0, 4095), 1);
        assert_eq!(level_for(0, 4096), 2);
        assert_eq!(level_for(63, 64), 1);
        assert_eq!(level_for(64, 127), 0);
        assert_eq!(level_for(0, u64::MAX), 10);
        assert_eq!(level_for(u64::MAX - 1, u64::MAX), 0);
    }

    #[test]
    fn slots() {
        assert_eq!(slot_for(65, 0), 1);
        assert_eq!(slot_for(65, 1), 1);
        assert_eq!(slot_for(u64::MAX, 10), 15);
    }

    #[test]
    fn next_due_on_the_top_level_does_not_overflow() {
        let mut level = Level::new();
        level.push(15, 7);
        let due = level.next_due(10, 0).unwrap();
        assert_eq!(due.start, 15 << 60);
    }

    #[test]
    fn the_bitmap_follows_the_buckets() {
        let mut level = Level::new();
        let a = level.push(3, 10);
        let b = level.push(3, 11);
        assert_eq!(level.next_due(0, 0).map(|d| d.slot), Some(3));
        assert!(!level.remove(3, a));
        assert!(!level.is_empty());
        assert_eq!(level.bucket(3).len(), 1);
        assert!(level.remove(3, b));
        assert!(level.is_empty());
        assert_eq!(level.next_due(0, 0), None);
    }
}
