//! Handles to entries in a [`TimingWheel`](crate::TimingWheel).

use std::fmt;

/// Identifies one entry of a [`TimingWheel`](crate::TimingWheel).
///
/// An id is a slot index plus the generation the slot had when the entry was
/// inserted. Every time a slot is freed (the entry fired, was cancelled or was
/// drained) its generation moves on, so an old id never reaches the entry that
/// reuses the slot: [`cancel`](crate::TimingWheel::cancel) and friends answer
/// `None`/`false` for it. Generations are 32 bits wide; an id could only alias a
/// newer entry after its slot has been reused 2^32 times while the id was kept.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerId(u64);

impl TimerId {
    pub(crate) fn new(index: u32, generation: u32) -> Self {
        TimerId((u64::from(generation) << 32) | u64::from(index))
    }

    pub(crate) fn index(self) -> u32 {
        self.0 as u32
    }

    pub(crate) fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The id as one integer, for storing it in an atomic or a packed field.
    pub fn into_raw(self) -> u64 {
        self.0
    }

    /// Rebuilds an id from [`into_raw`](Self::into_raw). Any `u64` is accepted:
    /// an integer that never came from this wheel is simply a stale id.
    pub fn from_raw(raw: u64) -> Self {
        TimerId(raw)
    }
}

impl fmt::Debug for TimerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TimerId({}v{})", self.index(), self.generation())
    }
}
