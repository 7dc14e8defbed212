//! One list's entries: chunks of slots filled in order, so removal by the
//! index handed out at insertion touches only that slot (no neighbour to
//! relink, which matters when a key is watched by a hundred thousand
//! operations), and an insert writes the slot after the last one.
//!
//! # Why in order
//! In a broker one thread inserts (a request handler) while another
//! removes (the thread that answered the operation). A slab, whose insert
//! takes the slot vacated last, would have the inserting core load a line
//! the removing core had just written, on nearly every insert; filled in
//! order, the inserting core writes its own lines, four entries each.
//!
//! # When memory goes back
//! Each chunk counts the entries it holds. The chunk being filled, with
//! its count, is kept with the list's other fields, under the lock an
//! insert holds anyway, rather than among the chunks; older chunks'
//! counts are written by the removing threads only. The removal that
//! empties an older chunk frees it at once: a list that held a burst
//! gives it back as the burst drains. An entry that stays would hold its
//! whole chunk, and in a broker a few in each chunk do (a fetch that
//! waits out its timeout among many that complete early); so a chunk
//! that falls to half full is filled again, in order, before a new one is
//! made (why half and not a quarter: docs/performance.md). A list's first
//! chunk has four slots (a key watched by one operation at a time never
//! needs more); the next ones double up to 4 KiB as the list grows.
//!
//! The order in which entries are stored is the insertion order within a
//! chunk but not across chunks (a freed chunk's number is reused);
//! callers that need an order (checks run oldest first) sort what they
//! collect by submission number.

/// Slots of the largest chunk: 4 KiB of 16-byte entries.
const MAX_SLOTS: usize = 1 << SLOT_BITS;
/// Slots of a list's first chunk.
const MIN_SLOTS: usize = 4;
/// An index is its chunk's number above these bits and its slot below.
const SLOT_BITS: u32 = 8;

pub(crate) struct WatchList<T> {
    /// The chunk being filled, kept with the list's other fields rather
    /// than among the chunks, whose counts the removing threads write.
    tail: Option<Tail<T>>,
    /// Entries held.
    len: usize,
    /// The chunks filled before; none in a list that never filled its
    /// first (one operation at a time), which then moves and drops as
    /// little as a small vector.
    older: Option<Box<Older<T>>>,
}

struct Older<T> {
    /// Chunks by number. The tail's number holds an empty chunk while the
    /// tail is out (or is one past the end), and so does a freed chunk's
    /// number, kept in `free`.
    chunks: Vec<Chunk<T>>,
    free: Vec<usize>,
    /// Chunks that were at most half full when last seen, to fill
    /// again before making a new one (some may have gone since, or filled
    /// up: checked when taken).
    sparse: Vec<usize>,
    /// The slots of a chunk freed, empty, for the next one of their size
    /// (freeing and allocating a chunk every 256 entries would go through
    /// the allocator's cross-thread path: chunks are freed by the removing
    /// thread).
    spare: Option<Box<[Option<T>]>>,
}

struct Chunk<T> {
    slots: Box<[Option<T>]>,
    /// Slots holding an entry.
    held: usize,
}

struct Tail<T> {
    id: usize,
    chunk: Chunk<T>,
    /// The first slot not yet looked at.
    cursor: usize,
}

impl<T> Chunk<T> {
    fn new(size: usize) -> Self {
        Chunk {
            slots: std::iter::repeat_with(|| None).take(size).collect(),
            held: 0,
        }
    }

    /// A chunk with no slots: what a number not in use holds.
    fn none() -> Self {
        Chunk {
            slots: Box::new([]),
            held: 0,
        }
    }

    /// Holding something, and at most half full.
    fn is_sparse(&self) -> bool {
        self.held > 0 && self.held <= self.slots.len() / 2
    }

    /// Takes the value in `slot` if there is one and `is_it` accepts it.
    fn take_if(&mut self, slot: usize, is_it: impl FnOnce(&T) -> bool) -> Option<T> {
        let stored = self.slots.get_mut(slot)?;
        if !stored.as_ref().is_some_and(is_it) {
            return None;
        }
        self.held -= 1;
        stored.take()
    }
}

impl<T> Tail<T> {
    fn new(id: usize, chunk: Chunk<T>) -> Self {
        Tail {
            id,
            chunk,
            cursor: 0,
        }
    }
}

impl<T> Default for Older<T> {
    fn default() -> Self {
        Older {
            chunks: Vec::new(),
            free: Vec::new(),
            sparse: Vec::new(),
            spare: None,
        }
    }
}

impl<T> Older<T> {
    /// Puts a tail that filled up back at its number.
    fn put_back(&mut self, id: usize, chunk: Chunk<T>) {
        if id == self.chunks.len() {
            self.chunks.push(Chunk::none());
        }
        // Emptied as fast as it filled, or nearly: not counted as it
        // went, since it was the tail then.
        if chunk.is_sparse() {
            self.sparse.push(id);
        }
        self.chunks[id] = chunk;
        self.settle(id);
    }

    /// Takes out a sparse chunk to fill again, if there is one.
    fn take_sparse(&mut self) -> Option<Tail<T>> {
        while let Some(id) = self.sparse.pop() {
            if self.chunks[id].is_sparse() {
                let chunk = std::mem::replace(&mut self.chunks[id], Chunk::none());
                return Some(Tail::new(id, chunk));
            }
        }
        None
    }

    /// A new chunk of `size` slots, under a free number.
    fn make(&mut self, size: usize) -> Tail<T> {
        let chunk = match self.spare.take() {
            Some(slots) if slots.len() == size => Chunk { slots, held: 0 },
            spare => {
                self.spare = spare;
                Chunk::new(size)
            }
        };
        Tail::new(self.free.pop().unwrap_or(self.chunks.len()), chunk)
    }

    /// Takes the value in chunk `id`'s `slot`, as [`Chunk::take_if`], and
    /// frees the chunk if that emptied it.
    fn take_if(&mut self, id: usize, slot: usize, is_it: impl FnOnce(&T) -> bool) -> Option<T> {
        let chunk = self.chunks.get_mut(id)?;
        let before = chunk.held;
        let value = chunk.take_if(slot, is_it)?;
        self.counted_down(id, before);
        Some(value)
    }

    /// After removals took chunk `id` (not the tail) down from `before`
    /// entries: notes it to be filled again if that left it half full,
    /// and frees it if empty.
    fn counted_down(&mut self, id: usize, before: usize) {
        let chunk = &self.chunks[id];
        if before > chunk.slots.len() / 2 && chunk.is_sparse() {
            self.sparse.push(id);
        }
        self.settle(id);
    }

    /// Frees chunk `id` (not the tail) if it holds nothing.
    fn settle(&mut self, id: usize) {
        let chunk = &mut self.chunks[id];
        if chunk.held > 0 || chunk.slots.is_empty() {
            return;
        }
        let slots = std::mem::replace(chunk, Chunk::none()).slots;
        self.free.push(id);
        if self.spare.as_ref().is_none_or(|s| s.len() <= slots.len()) {
            self.spare = Some(slots);
        }
        // Numbers of chunks gone are skipped when taken; a list that
        // shrinks drops them, so that they do not pile up.
        if self.sparse.len() > self.chunks.len() {
            let chunks = &self.chunks;
            self.sparse.retain(|&id| chunks[id].is_sparse());
        }
    }
}

impl<T> Default for WatchList<T> {
    fn default() -> Self {
        WatchList {
            tail: None,
            len: 0,
            older: None,
        }
    }
}

impl<T> WatchList<T> {
    /// Adds `value`; returns the index that removes it and the address
    /// where it is stored (a hint to prefetch before removing it; chunks
    /// do not move, so it stays right while the entry is there).
    pub(crate) fn push(&mut self, value: T) -> (usize, usize) {
        loop {
            if let Some(tail) = &mut self.tail {
                let chunk = &mut tail.chunk;
                let free = chunk.slots[tail.cursor..].iter().position(Option::is_none);
                if let Some(offset) = free {
                    let slot = tail.cursor + offset;
                    let stored = &mut chunk.slots[slot];
                    *stored = Some(value);
                    let address = stored as *const Option<T> as usize;
                    chunk.held += 1;
                    tail.cursor = slot + 1;
                    self.len += 1;
                    return (tail.id << SLOT_BITS | slot, address);
                }
            }
            self.next_tail();
        }
    }

    /// Puts the tail back among the chunks (freeing it if emptied
    /// meanwhile) and fills a sparse chunk next, or else a new one sized
    /// for the list as it is now (its entries, rounded up to a power of
    /// two, within the bounds).
    #[cold]
    fn next_tail(&mut self) {
        let Some(Tail { id, chunk, .. }) = self.tail.take() else {
            // The list's first chunk: nothing older yet.
            self.tail = Some(Tail::new(0, Chunk::new(MIN_SLOTS)));
            return;
        };
        let older = self.older.get_or_insert_with(Default::default);
        older.put_back(id, chunk);
        let size = (self.len + 1)
            .next_power_of_two()
            .clamp(MIN_SLOTS, MAX_SLOTS);
        self.tail = Some(older.take_sparse().unwrap_or_else(|| older.make(size)));
    }

    /// Removes the value at `index`, if there is one and `is_it` accepts it.
    pub(crate) fn remove_if(&mut self, index: usize, is_it: impl FnOnce(&T) -> bool) -> Option<T> {
        let id = index >> SLOT_BITS;
        let slot = index & (MAX_SLOTS - 1);
        let value = match &mut self.tail {
            Some(tail) if tail.id == id => tail.chunk.take_if(slot, is_it)?,
            _ => self.older.as_mut()?.take_if(id, slot, is_it)?,
        };
        self.len -= 1;
        Some(value)
    }

    /// Every chunk, the tail's included.
    fn all_chunks(&self) -> impl Iterator<Item = &Chunk<T>> + '_ {
        let older = self.older.iter().flat_map(|o| o.chunks.iter());
        older.chain(self.tail.iter().map(|t| &t.chunk))
    }

    /// Removes the values `keep` rejects, into `removed`.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool, removed: &mut Vec<T>) {
        let mut take = |chunk: &mut Chunk<T>| {
            let before = removed.len();
            for stored in chunk.slots.iter_mut() {
                if stored.as_ref().is_some_and(|v| !keep(v)) {
                    removed.extend(stored.take());
                }
            }
            let n = removed.len() - before;
            chunk.held -= n;
            n
        };
        if let Some(tail) = &mut self.tail {
            self.len -= take(&mut tail.chunk);
        }
        let Some(older) = &mut self.older else {
            return;
        };
        for id in 0..older.chunks.len() {
            let before = older.chunks[id].held;
            self.len -= take(&mut older.chunks[id]);
            older.counted_down(id, before);
        }
    }

    /// The values, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.all_chunks()
            .flat_map(|chunk| chunk.slots.iter().flatten())
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// All values, emptying the list.
    pub(crate) fn into_values(mut self) -> Vec<T> {
        let mut values = Vec::with_capacity(self.len);
        let tail = self.tail.take().map(|t| t.chunk);
        let older = self.older.take().map(|o| o.chunks).unwrap_or_default();
        for chunk in older.into_iter().chain(tail) {
            values.extend(chunk.slots.into_vec().into_iter().flatten());
        }
        values
    }

    /// Slots allocated now, in chunks or spare.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        let spare = self.older.as_ref().and_then(|o| o.spare.as_ref());
        spare.map_or(0, |s| s.len()) + self.all_chunks().map(|c| c.slots.len()).sum::<usize>()
    }

    /// The chunk that holds `index`'s slot, if in use.
    #[cfg(test)]
    fn chunk(&self, index: usize) -> Option<&Chunk<T>> {
        let id = index >> SLOT_BITS;
        match &self.tail {
            Some(tail) if tail.id == id => Some(&tail.chunk),
            _ => self
                .older
                .as_ref()?
                .chunks
                .get(id)
                .filter(|c| !c.slots.is_empty()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removal_by_index_and_retain() {
        let mut list = WatchList::default();
        let ids: Vec<usize> = (0..5).map(|v| list.push(v).0).collect();
        assert_eq!(list.remove_if(ids[1], |&v| v == 0), None);
        assert_eq!(list.remove_if(ids[1], |&v| v == 1), Some(1));
        assert_eq!(list.remove_if(ids[1], |_| true), None);
        let mut removed = Vec::new();
        list.retain(|&v| v % 2 == 0, &mut removed);
        assert_eq!(removed, [3]);
        let mut left: Vec<i32> = list.iter().copied().collect();
        left.sort();
        assert_eq!(left, [0, 2, 4]);
        assert_eq!(list.len(), 3);
        // Filled in order: a vacated slot is not written again, and the
        // address handed out is where the value is.
        let (again, address) = list.push(9);
        assert!(!ids.contains(&again));
        let slot = &list.chunk(again).unwrap().slots[again & (MAX_SLOTS - 1)];
        assert_eq!(address, slot as *const Option<i32> as usize);
        assert_eq!(list.remove_if(again, |_| true), Some(9));
        assert!(!list.is_empty());
        assert_eq!(list.into_values().len(), 3);
    }

    proptest::proptest! {
        /// Against a map from index to value: every index handed out names
        /// its value until removed, and nothing else is there; the chunks
        /// hold no more than the entries, the tail's unwritten slots and
        /// one spare.
        #[test]
        fn behaves_as_a_map_from_index_to_value(
            steps in proptest::collection::vec((0u8..4, 0usize..64), 1..2000)
        ) {
            let mut list = WatchList::default();
            let mut model = std::collections::BTreeMap::new();
            let mut next = 0u32;
            for (action, pick) in steps {
                let held: Vec<usize> = model.keys().copied().collect();
                match action {
                    0 | 1 => {
                        let (index, _) = list.push(next);
                        proptest::prop_assert!(model.insert(index, next).is_none());
                        next += 1;
                    }
                    2 if !held.is_empty() => {
                        let index = held[pick % held.len()];
                        let value = model.remove(&index);
                        proptest::prop_assert_eq!(list.remove_if(index, |_| true), value);
                        proptest::prop_assert_eq!(list.remove_if(index, |_| true), None);
                    }
                    _ => {
                        let mut removed = Vec::new();
                        list.retain(|v| !(*v as usize + pick).is_multiple_of(3), &mut removed);
                        let gone: Vec<usize> = model
                            .iter()
                            .filter(|(_, v)| (**v as usize + pick).is_multiple_of(3))
                            .map(|(i, _)| *i)
                            .collect();
                        proptest::prop_assert_eq!(removed.len(), gone.len());
                        gone.iter().for_each(|i| { model.remove(i); });
                    }
                }
                proptest::prop_assert_eq!(list.len(), model.len());
                let mut values: Vec<u32> = list.iter().copied().collect();
                values.sort();
                let mut expected: Vec<u32> = model.values().copied().collect();
                expected.sort();
                proptest::prop_assert_eq!(values, expected);
                // Every chunk but the tail holds an entry.
                let holding: std::collections::BTreeSet<usize> =
                    model.keys().map(|i| i >> SLOT_BITS).collect();
                let older = list.older.iter().flat_map(|o| o.chunks.iter());
                for (id, chunk) in older.enumerate() {
                    proptest::prop_assert!(chunk.slots.is_empty() || holding.contains(&id));
                }
            }
        }
    }

    #[test]
    fn a_burst_is_given_back_as_it_drains() {
        let mut list = WatchList::default();
        let first = list.push(u32::MAX).0;
        let burst: Vec<usize> = (0..100_000).map(|v| list.push(v).0).collect();
        assert!(list.capacity() >= 100_000);
        // The burst drains; the entry before it stays.
        for (v, &index) in burst.iter().enumerate() {
            assert_eq!(list.remove_if(index, |&x| x == v as u32), Some(v as u32));
        }
        // The first entry's chunk, the tail's and one spare.
        assert!(
            list.capacity() <= MIN_SLOTS + 2 * MAX_SLOTS,
            "{} slots kept",
            list.capacity()
        );
        assert_eq!(list.iter().copied().collect::<Vec<_>>(), [u32::MAX]);
        assert_eq!(list.remove_if(first, |_| true), Some(u32::MAX));
        assert!(list.is_empty());
    }

    #[test]
    fn an_entry_that_stays_holds_only_its_own_chunk() {
        let mut list = WatchList::default();
        let burst: Vec<usize> = (0..100_000).map(|v| list.push(v).0).collect();
        let (last, rest) = burst.split_last().unwrap();
        let middle = rest.len() / 2;
        // All but the first, one in the middle and the last go.
        for (i, &index) in rest.iter().enumerate().skip(1) {
            if i != middle {
                list.remove_if(index, |_| true);
            }
        }
        assert!(
            list.capacity() <= MIN_SLOTS + 4 * MAX_SLOTS,
            "{} slots kept",
            list.capacity()
        );
        let mut left: Vec<u32> = list.iter().copied().collect();
        left.sort();
        assert_eq!(left, [0, middle as u32, 99_999]);
        assert_eq!(list.remove_if(*last, |_| true), Some(99_999));
    }

    #[test]
    fn entries_that_stay_share_chunks() {
        let mut list = WatchList::default();
        let mut last = None;
        // One entry in 16 stays; each other goes once the next is in.
        for v in 0..200_000u32 {
            let (index, _) = list.push(v);
            if let Some(previous) = last.take() {
                list.remove_if(previous, |_| true);
            }
            if v % 16 != 0 {
                last = Some(index);
            }
        }
        let stayed = 200_000 / 16;
        assert!(list.len() >= stayed);
        assert!(
            list.capacity() <= 2 * list.len() + 3 * MAX_SLOTS,
            "{} slots for {} entries",
            list.capacity(),
            list.len()
        );
    }

    #[test]
    fn chunks_start_small_and_double() {
        let mut list = WatchList::default();
        let (first, _) = list.push(0u32);
        assert_eq!(list.capacity(), MIN_SLOTS);
        // One entry at a time: the list stays in small chunks.
        let mut index = first;
        for v in 1..1_000u32 {
            let (next, _) = list.push(v);
            assert_eq!(list.remove_if(index, |_| true), Some(v - 1));
            index = next;
        }
        assert!(list.capacity() <= 3 * MIN_SLOTS, "{}", list.capacity());
        // Many at once: chunks grow to the largest size.
        (0..10_000u32).for_each(|v| {
            list.push(v);
        });
        assert!(list.all_chunks().any(|c| c.slots.len() == MAX_SLOTS));
    }
}
