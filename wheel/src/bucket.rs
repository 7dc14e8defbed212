//! A bucket: the slab indices of the entries due in one slot of one level.
//!
//! A removal leaves a hole, and the holes form a free list threaded through
//! the bucket itself, so removing touches nothing but the removed entry's
//! own place (no other entry moves, so no other entry's recorded position
//! must be updated: one cache line fewer per cancel than a swap-remove).
//! Inserting fills the newest hole first, which is almost always still in
//! cache. Holes never outnumber the bucket's peak population, and they are
//! dropped whenever the bucket empties or comes due.
//!
//! A bucket that empties keeps its buffer if it has at most [`KEPT_SLOTS`]
//! slots; a larger one is taken out by the wheel
//! ([`Bucket::take_large_buffer`]), leaving the bucket none, and lent to the
//! next bucket that outgrows [`KEPT_SLOTS`] ([`Bucket::adopt`]). The buckets of
//! a level are used in turn, so a buffer per bucket would keep each one's
//! peak for the whole lap: 64 peaks where a handful of buckets are filling
//! at any time.

/// Marks a hole; the low 31 bits link to the next hole.
const HOLE: u32 = 1 << 31;
/// The end of the hole list.
const NO_HOLE: u32 = u32::MAX;

/// Buffer slots an emptied bucket always keeps (1 KB).
pub(crate) const KEPT_SLOTS: usize = 256;

/// The largest slab index a bucket can hold (the top bit tags holes).
pub(crate) const MAX_INDEX: u32 = HOLE - 1;

#[derive(Debug)]
pub(crate) struct Bucket {
    slots: Vec<u32>,
    /// First hole, or `NO_HOLE`.
    hole: u32,
    live: u32,
}

impl Default for Bucket {
    fn default() -> Self {
        Bucket {
            slots: Vec::new(),
            hole: NO_HOLE,
            live: 0,
        }
    }
}

impl Bucket {
    /// Adds slab index `index` (at most [`MAX_INDEX`]); returns its position.
    #[inline]
    pub(crate) fn push(&mut self, index: u32) -> u32 {
        debug_assert!(index <= MAX_INDEX);
        self.live += 1;
        if self.hole != NO_HOLE {
            let pos = self.hole;
            self.hole = match self.slots[pos as usize] & !HOLE {
                next if next == (NO_HOLE & !HOLE) => NO_HOLE,
                next => next,
            };
            self.slots[pos as usize] = index;
            pos
        } else {
            self.slots.push(index);
            (self.slots.len() - 1) as u32
        }
    }

    /// Whether the next [`push`](Self::push) would grow a buffer already
    /// past [`KEPT_SLOTS`]: the moment to [`adopt`](Self::adopt) a larger one.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.hole == NO_HOLE
            && self.slots.len() == self.slots.capacity()
            && self.slots.len() >= KEPT_SLOTS
    }

    /// Moves the entries into `buffer` (empty, and larger than the bucket's
    /// own), which becomes the bucket's. Positions do not change: the slots
    /// are copied in order, holes included.
    pub(crate) fn adopt(&mut self, mut buffer: Vec<u32>) {
        debug_assert!(buffer.is_empty() && buffer.capacity() > self.slots.len());
        buffer.extend_from_slice(&self.slots);
        self.slots = buffer;
    }

    /// An empty bucket's buffer, if it is larger than an emptied bucket keeps.
    pub(crate) fn take_large_buffer(&mut self) -> Option<Vec<u32>> {
        (self.live == 0 && self.slots.capacity() > KEPT_SLOTS)
            .then(|| std::mem::take(&mut self.slots))
    }

    /// Removes the index at `pos`. Returns whether the bucket is now empty.
    #[inline]
    pub(crate) fn remove(&mut self, pos: u32) -> bool {
        self.live -= 1;
        if self.live == 0 {
            self.empty();
            return true;
        }
        self.slots[pos as usize] = HOLE | (self.hole & !HOLE);
        self.hole = pos;
        false
    }

    /// Where position `pos` is stored (dangling past the end: it is only a
    /// prefetch hint, never dereferenced).
    pub(crate) fn address(&self, pos: u32) -> *const () {
        self.slots.as_ptr().wrapping_add(pos as usize).cast()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Slots in use, holes included: what an adopted buffer must exceed.
    pub(crate) fn slots_len(&self) -> usize {
        self.slots.len()
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.live as usize
    }

    /// The slab index at position `pos`; `None` for a hole or past the end.
    #[inline]
    pub(crate) fn index_at(&self, pos: u32) -> Option<u32> {
        self.slots
            .get(pos as usize)
            .copied()
            .filter(|s| s & HOLE == 0)
    }

    /// The entries, holes skipped.
    pub(crate) fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().copied().filter(|s| s & HOLE == 0)
    }

    /// Moves every entry out into `out` (holes skipped), leaving the bucket
    /// empty.
    pub(crate) fn drain_into(&mut self, out: &mut Vec<u32>) {
        out.extend(self.indices());
        self.live = 0;
        self.empty();
    }

    /// Forgets every slot, keeping the buffer (the owner takes a large one
    /// out with [`take_large_buffer`](Self::take_large_buffer)).
    fn empty(&mut self) {
        self.slots.clear();
        self.hole = NO_HOLE;
    }

    /// Returns the bucket's memory.
    pub(crate) fn shrink(&mut self) {
        debug_assert!(self.is_empty());
        self.slots = Vec::new();
    }

    /// Bytes allocated.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_are_reused_newest_first_and_skipped_when_draining() {
        let mut b = Bucket::default();
        let p: Vec<u32> = (10..15).map(|i| b.push(i)).collect();
        assert_eq!(p, [0, 1, 2, 3, 4]);
        assert!(!b.remove(1));
        assert!(!b.remove(3));
        assert_eq!(b.len(), 3);
        assert_eq!(b.push(20), 3);
        assert_eq!(b.push(21), 1);
        assert_eq!(b.push(22), 5);
        let mut out = Vec::new();
        b.drain_into(&mut out);
        assert_eq!(out, [10, 21, 12, 20, 14, 22]);
        assert!(b.is_empty());
    }

    #[test]
    fn removing_the_last_entry_forgets_the_holes() {
        let mut b = Bucket::default();
        let a = b.push(1);
        let c = b.push(2);
        assert!(!b.remove(a));
        assert!(b.remove(c));
        assert_eq!(b.push(3), 0);
        assert_eq!(b.indices().collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn an_adopted_buffer_keeps_every_position() {
        let mut b = Bucket::default();
        let first: Vec<u32> = (0..KEPT_SLOTS as u32).map(|i| b.push(i)).collect();
        assert!(!b.remove(first[7]));
        assert!(!b.is_full(), "a hole is filled before the buffer grows");
        assert_eq!(b.push(999), first[7]);
        assert!(b.is_full() || b.slots.capacity() > KEPT_SLOTS);
        b.adopt(Vec::with_capacity(4 * KEPT_SLOTS));
        assert_eq!(b.slots.capacity(), 4 * KEPT_SLOTS);
        assert_eq!(b.push(1000), KEPT_SLOTS as u32);
        let mut out = Vec::new();
        b.drain_into(&mut out);
        let mut expected: Vec<u32> = (0..KEPT_SLOTS as u32).collect();
        expected[7] = 999;
        expected.push(1000);
        assert_eq!(out, expected);
        // Emptied, its large buffer can be taken; a small one stays.
        assert_eq!(
            b.take_large_buffer().map(|v| v.capacity()),
            Some(4 * KEPT_SLOTS)
        );
        assert_eq!(b.take_large_buffer(), None);
    }
}
