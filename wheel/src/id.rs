//! Handles to entries in a [`TimingWheel`](crate::TimingWheel).

use std::fmt;
use std::num::NonZeroU64;

/// Identifies one entry of a [`TimingWheel`](crate::TimingWheel).
///
/// An id is a slot index plus the generation the slot had when the entry was
/// inserted. Every time a slot is freed (the entry fired, was cancelled or was
/// drained) its generation moves on, so an old id never reaches the entry that
/// reuses the slot: [`cancel`](crate::TimingWheel::cancel) and friends answer
/// `None`/`false` for it. Generations are 32 bits wide; an id could only alias a
/// newer entry after its slot has been reused 2^32 times while the id was kept.
///
/// `Option<TimerId>` is 8 bytes, as `TimerId` is: an owner that keeps one per
/// request pays no tag word for "no timer". Ids are ordered (`Ord`) so that
/// they can key a sorted map; the order is consistent but means nothing.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerId(
    /// The raw id inverted: a real id's index is at most 2^31 - 1, so its
    /// inverse is never 0, and the zero left free gives `Option` its niche.
    NonZeroU64,
);

impl TimerId {
    pub(crate) fn new(index: u32, generation: u32) -> Self {
        Self::from_raw((u64::from(generation) << 32) | u64::from(index))
    }

    pub(crate) fn index(self) -> u32 {
        self.into_raw() as u32
    }

    pub(crate) fn generation(self) -> u32 {
        (self.into_raw() >> 32) as u32
    }

    /// The id as one integer, for storing it in an atomic or a packed field.
    pub fn into_raw(self) -> u64 {
        !self.0.get()
    }

    /// Rebuilds an id from [`into_raw`](Self::into_raw). Any `u64` is accepted:
    /// an integer that never came from this wheel is simply a stale id.
    /// (`u64::MAX`, whose index no wheel hands out, becomes another stale id,
    /// `u64::MAX - 1`; every other integer comes back unchanged.)
    pub fn from_raw(raw: u64) -> Self {
        TimerId(NonZeroU64::new(!raw).unwrap_or(NonZeroU64::MIN))
    }
}

impl fmt::Debug for TimerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TimerId({}v{})", self.index(), self.generation())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_optional_id_costs_no_more_than_an_id() {
        assert_eq!(std::mem::size_of::<Option<TimerId>>(), 8);
    }

    #[test]
    fn raw_ids_round_trip() {
        for (index, generation) in [(0, 0), (7, 1), (crate::bucket::MAX_INDEX, u32::MAX)] {
            let id = TimerId::new(index, generation);
            assert_eq!((id.index(), id.generation()), (index, generation));
            assert_eq!(TimerId::from_raw(id.into_raw()), id);
        }
        assert_eq!(TimerId::from_raw(0).into_raw(), 0);
        assert_eq!(TimerId::from_raw(u64::MAX).into_raw(), u64::MAX - 1);
    }
}
