//! One key's watch list: a slab, so removal by the index handed out at
//! insertion touches only that slot (no neighbour to relink, which matters
//! when a key is watched by a hundred thousand operations).
//!
//! The slab's order depends on which slots earlier removals freed; callers
//! that need an order (checks run oldest first) sort what they collect by
//! submission number.
//!
//! A list shared by every request (a busy partition, or a group of keys)
//! grows with a burst, and a list that never empties would keep the
//! burst's slots. Entries cannot move (an operation holds its index), so
//! once at most a quarter of the slots are occupied and at least half were
//! vacated since, the list gives back the vacant slots above its last
//! entry and rebuilds its free list lowest slot first, so that new entries
//! pack low and the next shrink can go further. The removals it waited for
//! pay for that pass. An entry high in the list holds the slots below it
//! until it goes.

use slab::Slab;

/// Lists with fewer slots than this are never shrunk (until they empty and
/// are dropped).
const MIN_SHRUNK: usize = 1024;

pub(crate) struct WatchList<T> {
    slots: Slab<T>,
    /// Removals since the list last shrank.
    vacated: usize,
}

impl<T> Default for WatchList<T> {
    fn default() -> Self {
        WatchList {
            slots: Slab::new(),
            vacated: 0,
        }
    }
}

impl<T> WatchList<T> {
    /// Adds `value`; returns the index that removes it and the address
    /// where it is stored (only a hint to prefetch: the storage moves when
    /// the list grows).
    pub(crate) fn push(&mut self, value: T) -> (usize, usize) {
        let index = self.slots.insert(value);
        let address = self.slots.get(index).map_or(0, |v| v as *const T as usize);
        (index, address)
    }

    /// Removes the value at `index`, if there is one and `is_it` accepts it.
    pub(crate) fn remove_if(&mut self, index: usize, is_it: impl FnOnce(&T) -> bool) -> Option<T> {
        match self.slots.get(index) {
            Some(value) if is_it(value) => {
                let value = self.slots.remove(index);
                self.vacated(1);
                Some(value)
            }
            _ => None,
        }
    }

    /// Counts `n` removals, and shrinks the list if it has become sparse.
    #[inline]
    fn vacated(&mut self, n: usize) {
        self.vacated += n;
        let capacity = self.slots.capacity();
        if self.slots.len() < capacity / 4 && self.vacated >= capacity / 2 && capacity >= MIN_SHRUNK
        {
            self.shrink();
        }
    }

    /// Gives back the vacant slots above the last entry. Only a shrink that
    /// gave back at least half of the vacant slots starts a new count: one
    /// held up by an entry high in the list is tried again at the next
    /// removal, which costs little while that entry stays (nothing to
    /// trim, nothing to relink).
    #[cold]
    fn shrink(&mut self) {
        let (capacity, len) = (self.slots.capacity(), self.slots.len());
        self.slots.shrink_to_fit();
        if self.slots.capacity() <= len + (capacity - len) / 2 {
            self.vacated = 0;
        }
    }

    /// Removes the values `keep` rejects, into `removed`.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool, removed: &mut Vec<T>) {
        let doomed: Vec<usize> = self
            .slots
            .iter()
            .filter(|(_, v)| !keep(v))
            .map(|(i, _)| i)
            .collect();
        let before = removed.len();
        removed.extend(doomed.into_iter().map(|i| self.slots.remove(i)));
        self.vacated(removed.len() - before);
    }

    /// The values, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.slots.iter().map(|(_, v)| v)
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// All values, emptying the list.
    pub(crate) fn into_values(self) -> Vec<T> {
        self.slots.into_iter().map(|(_, v)| v).collect()
    }

    /// Slots allocated now, occupied or not.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.slots.capacity()
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
        // Freed indices are reused: why a holder of an old index must check
        // what is there before removing it.
        let (again, address) = list.push(9);
        assert_eq!(
            address,
            list.slots.get(again).unwrap() as *const i32 as usize
        );
        assert!(again == ids[1] || again == ids[3]);
        assert_eq!(list.remove_if(again, |_| true), Some(9));
        assert!(!list.is_empty());
        assert_eq!(list.into_values().len(), 3);
    }

    proptest::proptest! {
        /// Against a map from index to value: every index handed out names
        /// its value until removed, and nothing else is there.
        #[test]
        fn behaves_as_a_map_from_index_to_value(
            steps in proptest::collection::vec((0u8..4, 0usize..64), 1..400)
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
            }
        }
    }

    #[test]
    fn a_burst_is_given_back_above_the_last_entry() {
        let mut list = WatchList::default();
        let first = list.push(u32::MAX).0;
        let burst: Vec<usize> = (0..100_000).map(|v| list.push(v).0).collect();
        let peak = list.capacity();
        // The burst drains; the entry before it stays.
        for (v, &index) in burst.iter().enumerate() {
            assert_eq!(list.remove_if(index, |&x| x == v as u32), Some(v as u32));
        }
        assert!(
            list.capacity() < MIN_SHRUNK,
            "{} of {peak} slots kept",
            list.capacity()
        );
        assert_eq!(list.iter().copied().collect::<Vec<_>>(), [u32::MAX]);
        assert_eq!(list.remove_if(first, |_| true), Some(u32::MAX));
        // New entries pack into the lowest slots.
        let again: Vec<usize> = (0..10).map(|v| list.push(v).0).collect();
        assert!(again.iter().all(|&i| i < 16), "{again:?}");
    }

    #[test]
    fn an_entry_high_up_holds_the_slots_below_it_until_it_goes() {
        let mut list = WatchList::default();
        let burst: Vec<usize> = (0..100_000).map(|v| list.push(v).0).collect();
        let (last, rest) = burst.split_last().unwrap();
        // All but the first and the last go: nothing can move, so nothing
        // is given back.
        for &index in &rest[1..] {
            list.remove_if(index, |_| true);
        }
        assert!(list.capacity() >= burst.len());
        // The failed tries did not reset the count: the next removal that
        // can give slots back does.
        list.remove_if(*last, |_| true);
        assert!(
            list.capacity() < MIN_SHRUNK,
            "{} slots kept",
            list.capacity()
        );
        assert_eq!(list.iter().copied().collect::<Vec<_>>(), [0]);
    }
}
