//! One key's watch list: an array of slots filled in ring order, so removal
//! by the index handed out at insertion touches only that slot (no
//! neighbour to relink, which matters when a key is watched by a hundred
//! thousand operations).
//!
//! Why a ring and not a slab with a free list: a free list hands the next
//! insertion the slot freed last, which in a broker was freed a moment ago by
//! another thread (the one completing operations), so every insertion pulls
//! a cache line over from that thread's core. The ring's cursor instead
//! fills slots one after another: eight fit in a cache line, and by the time
//! the cursor comes round again most of them were freed long ago. The list
//! keeps at least half its slots free (it doubles when it would not), so a
//! free slot is never far: an insertion looks at fewer than two slots on
//! average over a round of the cursor. A single insertion can look at more,
//! when it lands on a run of long-lived entries.
//!
//! The order of entries depends on where the cursor was; callers that need
//! an order (checks run oldest first) sort what they collect by submission
//! number. Slots are never moved, so an index stays valid until its entry
//! is removed; the array does not shrink (an empty list is dropped whole).

pub(crate) struct WatchList<T> {
    slots: Vec<Option<T>>,
    /// Where the next insertion starts looking for a free slot.
    cursor: usize,
    len: usize,
}

/// Slots of a list's first allocation.
const FIRST_SLOTS: usize = 8;

impl<T> Default for WatchList<T> {
    fn default() -> Self {
        WatchList {
            slots: Vec::new(),
            cursor: 0,
            len: 0,
        }
    }
}

impl<T> WatchList<T> {
    /// Adds `value`; returns the index that removes it.
    pub(crate) fn push(&mut self, value: T) -> usize {
        if 2 * self.len >= self.slots.len() {
            // Fill the new half next: it is all free.
            self.cursor = self.slots.len();
            let grown = (2 * self.slots.len()).max(FIRST_SLOTS);
            self.slots.resize_with(grown, || None);
        }
        // At least half the slots are free, so this ends within one round.
        loop {
            if self.cursor >= self.slots.len() {
                self.cursor = 0;
            }
            let index = self.cursor;
            self.cursor += 1;
            let slot = &mut self.slots[index];
            if slot.is_none() {
                *slot = Some(value);
                self.len += 1;
                return index;
            }
        }
    }

    /// Removes the value at `index`, if there is one and `is_it` accepts it.
    pub(crate) fn remove_if(&mut self, index: usize, is_it: impl FnOnce(&T) -> bool) -> Option<T> {
        let slot = self.slots.get_mut(index)?;
        if !slot.as_ref().is_some_and(is_it) {
            return None;
        }
        self.len -= 1;
        slot.take()
    }

    /// Removes the values `keep` rejects, into `removed`.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool, removed: &mut Vec<T>) {
        for slot in &mut self.slots {
            if slot.as_ref().is_some_and(|v| !keep(v)) {
                removed.extend(slot.take());
                self.len -= 1;
            }
        }
    }

    /// The values, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.slots.iter().flatten()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// All values, emptying the list.
    pub(crate) fn into_values(self) -> Vec<T> {
        self.slots.into_iter().flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn removal_by_index_and_retain() {
        let mut list = WatchList::default();
        let ids: Vec<usize> = (0..5).map(|v| list.push(v)).collect();
        assert_eq!(list.remove_if(ids[1], |&v| v == 0), None);
        assert_eq!(list.remove_if(ids[1], |&v| v == 1), Some(1));
        assert_eq!(list.remove_if(ids[1], |_| true), None);
        assert_eq!(list.remove_if(usize::MAX, |_| true), None);
        let mut removed = Vec::new();
        list.retain(|&v| v % 2 == 0, &mut removed);
        assert_eq!(removed, [3]);
        let mut left: Vec<i32> = list.iter().copied().collect();
        left.sort();
        assert_eq!(left, [0, 2, 4]);
        assert_eq!(list.len(), 3);
        let again = list.push(9);
        assert_eq!(list.remove_if(again, |_| true), Some(9));
        assert!(!list.is_empty());
        assert_eq!(list.into_values().len(), 3);
    }

    #[test]
    fn the_cursor_fills_slots_in_order_and_comes_round_to_freed_ones() {
        let mut list = WatchList::default();
        let first: Vec<usize> = (0..4).map(|v| list.push(v)).collect();
        assert_eq!(first, [0, 1, 2, 3]);
        // Half full: the list doubles and goes on in the new half.
        let more: Vec<usize> = (4..8).map(|v| list.push(v)).collect();
        assert_eq!(more, [8, 9, 10, 11]);
        for id in first.into_iter().chain([8, 9]) {
            assert!(list.remove_if(id, |_| true).is_some());
        }
        // Past the end, round to the slots freed at the start.
        let next: Vec<usize> = (8..14).map(|v| list.push(v)).collect();
        assert_eq!(next, [12, 13, 14, 15, 0, 1]);
        assert_eq!(list.len(), 8);
    }

    /// Against a map from index to value, through growth and wrap-around:
    /// every index handed out removes exactly its own value.
    #[test]
    fn agrees_with_a_map_under_random_pushes_and_removals() {
        let mut list = WatchList::default();
        let mut model: HashMap<usize, u64> = HashMap::new();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for value in 0..20_000u64 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // Grow to about 1,000 entries, then hover there.
            if model.len() < 1_000 || seed.is_multiple_of(2) {
                let index = list.push(value);
                assert!(
                    model.insert(index, value).is_none(),
                    "index {index} handed out twice"
                );
            } else {
                let victim = *model
                    .keys()
                    .nth((seed as usize >> 8) % model.len())
                    .unwrap();
                let expected = model.remove(&victim);
                assert_eq!(list.remove_if(victim, |_| true), expected);
            }
            assert_eq!(list.len(), model.len());
        }
        // Twice the largest population at most, rounded to a power of two.
        assert!(list.slots.len() <= 4_096, "{} slots", list.slots.len());
        let mut left = list.into_values();
        let mut expected: Vec<u64> = model.into_values().collect();
        left.sort_unstable();
        expected.sort_unstable();
        assert_eq!(left, expected);
    }
}
