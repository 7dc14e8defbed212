//! One key's watch list: a slab, so removal by the index handed out at
//! insertion touches only that slot (no neighbour to relink, which matters
//! when a key is watched by a hundred thousand operations).
//!
//! The slab's order depends on which slots earlier removals freed; callers
//! that need an order (checks run oldest first) sort what they collect by
//! submission number.
//!
//! # Where an insert lands
//! A list shared by every request is written by two cores in turn: the
//! submitting one inserts, the completing one removes. A slab that chains
//! its vacant slots through the slots themselves gives an insert the slot
//! the other core vacated last, and must read that slot (a line on the
//! other core) to learn the next vacant one. Here the vacant slots are
//! numbers on two stacks beside the slots: removals push onto
//! `vacated_slots`, inserts pop from `free`, and when `free` runs out it
//! takes the vacated ones (or, if fewer than a batch are there, a batch of
//! slots never used). So the slot an insert takes next is known one insert
//! ahead and no removal changes it: each insert asks for the next one's
//! line (see `unchecked/prefetch.rs`), and reads the stack, sixteen numbers
//! to a line, in order. Nor is there a count of entries that both cores
//! would write: it is what the stacks do not hold.
//!
//! # Giving slots back
//! A list shared by every request (a busy partition, or a group of keys)
//! grows with a burst, and a list that never empties would keep the
//! burst's slots. Entries cannot move (an operation holds its index), so
//! once at most a quarter of the slots are occupied and at least half were
//! vacated since, the list gives back the vacant slots above its last
//! entry and restacks the vacant ones lowest first, so that new entries
//! pack low and the next shrink can go further. The removals it waited for
//! pay for that pass. An entry high in the list holds the slots below it
//! until it goes.

use crate::unchecked::prefetch;

/// Lists with fewer slots than this are never shrunk (until they empty and
/// are dropped).
const MIN_SHRUNK: usize = 1024;

/// How many slots an insert that finds `free` empty stacks at a time: the
/// most vacated slots it waits for before taking them rather than fresh
/// ones, and the fresh ones it stacks.
const REFILL: usize = 32;

/// Slot numbers are kept as `u32`, half the room of an index on the stacks.
/// A slot above (in a list of 2^32 slots: 64 GiB of them) is taken fresh
/// and, once vacated, not again until the list shrinks. (Low in the unit
/// tests, which then reach that path with a few hundred slots.)
const STACKED: usize = if cfg!(test) { 64 } else { u32::MAX as usize };

// `repr(C)`: the fields inserts use first, so that they share the cache line
// of the list's lock (see `watchers.rs`); the removals' own after them.
#[repr(C)]
pub(crate) struct WatchList<T> {
    /// Every slot, occupied or not. Each vacant one below `fresh` is on one
    /// of the stacks (or counted in `lost`); none from `fresh` up was used.
    slots: Box<[Option<T>]>,
    /// Vacant slots for inserts to take, the next one on top.
    free: Vec<u32>,
    /// Slots vacated since `free` was last refilled from here.
    vacated_slots: Vec<u32>,
    /// The lowest slot never used since the list last grew or shrank.
    fresh: usize,
    /// Vacant slots too high to stack.
    lost: usize,
    /// Removals since the list last shrank.
    vacated: usize,
}

impl<T> Default for WatchList<T> {
    fn default() -> Self {
        WatchList {
            slots: Box::default(),
            free: Vec::new(),
            vacated_slots: Vec::new(),
            fresh: 0,
            lost: 0,
            vacated: 0,
        }
    }
}

impl<T> WatchList<T> {
    /// Adds `value`; returns the index that removes it and the address
    /// where it is stored (only a hint to prefetch: the storage moves when
    /// the list grows).
    pub(crate) fn push(&mut self, value: T) -> (usize, usize) {
        if self.free.is_empty() {
            self.refill();
        }
        let index = match self.free.pop() {
            Some(i) => i as usize,
            None => self.take_fresh(),
        };
        self.slots[index] = Some(value);
        prefetch::for_write(
            self.free
                .last()
                .map_or(0, |&next| self.address(next as usize)),
        );
        (index, self.address(index))
    }

    /// Refills `free`: with the vacated slots if enough are there (in a
    /// list of more than a few slots) that the inserts will not come back
    /// for more at once, else with fresh ones.
    #[cold]
    fn refill(&mut self) {
        if self.vacated_slots.len() >= (self.slots.len() / 8).clamp(1, REFILL) {
            std::mem::swap(&mut self.free, &mut self.vacated_slots);
            return;
        }
        if self.fresh == self.slots.len() {
            self.grow();
        }
        let end = (self.fresh + REFILL).min(self.slots.len()).min(STACKED);
        if self.fresh < end {
            self.free.extend((self.fresh..end).rev().map(|i| i as u32));
            self.fresh = end;
        }
    }

    /// The lowest fresh slot, taken without stacking (only above
    /// `STACKED`).
    #[cold]
    fn take_fresh(&mut self) -> usize {
        if self.fresh == self.slots.len() {
            self.grow();
        }
        self.fresh += 1;
        self.fresh - 1
    }

    /// Doubles the slots.
    #[cold]
    fn grow(&mut self) {
        let new = (self.slots.len() * 2).max(4);
        let mut slots = Vec::with_capacity(new);
        slots.extend(std::mem::take(&mut self.slots));
        slots.resize_with(new, || None);
        self.slots = slots.into_boxed_slice();
    }

    /// The address of slot `index` (only ever prefetched).
    fn address(&self, index: usize) -> usize {
        self.slots.as_ptr().wrapping_add(index) as usize
    }

    /// Removes the value at `index`, if there is one and `is_it` accepts it.
    pub(crate) fn remove_if(&mut self, index: usize, is_it: impl FnOnce(&T) -> bool) -> Option<T> {
        let slot = self.slots.get_mut(index)?;
        if !slot.as_ref().is_some_and(is_it) {
            return None;
        }
        let value = slot.take();
        self.vacate(index);
        self.vacated(1);
        value
    }

    /// Puts the slot `index`, just emptied, on the removals' stack.
    fn vacate(&mut self, index: usize) {
        match u32::try_from(index) {
            Ok(index) if index as usize != STACKED => self.vacated_slots.push(index),
            _ => self.lost += 1,
        }
    }

    /// Counts `n` removals, and shrinks the list if it has become sparse.
    #[inline]
    fn vacated(&mut self, n: usize) {
        self.vacated += n;
        let capacity = self.slots.len();
        if self.len() < capacity / 4 && self.vacated >= capacity / 2 && capacity >= MIN_SHRUNK {
            self.shrink();
        }
    }

    /// Gives back the vacant slots above the last entry. Only a shrink that
    /// gave back at least half of the vacant slots starts a new count: one
    /// held up by an entry high in the list is tried again at the next
    /// removal, which costs little while that entry stays (nothing to
    /// trim, nothing to restack).
    #[cold]
    fn shrink(&mut self) {
        let (capacity, len) = (self.slots.len(), self.len());
        let in_use = self
            .slots
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |i| i + 1);
        if in_use < capacity {
            let mut slots = std::mem::take(&mut self.slots).into_vec();
            slots.truncate(in_use);
            self.slots = slots.into_boxed_slice();
            // Lowest on top: new entries pack low, and the next shrink can
            // go further.
            self.free = (0..in_use.min(STACKED))
                .rev()
                .filter(|&i| self.slots[i].is_none())
                .map(|i| i as u32)
                .collect();
            self.vacated_slots = Vec::new();
            self.fresh = in_use;
            self.lost = in_use - len - self.free.len();
        }
        if self.slots.len() <= len + (capacity - len) / 2 {
            self.vacated = 0;
        }
    }

    /// Removes the values `keep` rejects, into `removed`.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool, removed: &mut Vec<T>) {
        let mut vacant = Vec::new();
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if slot.as_ref().is_some_and(|v| !keep(v)) {
                removed.extend(slot.take());
                vacant.push(index);
            }
        }
        let n = vacant.len();
        vacant.into_iter().for_each(|index| self.vacate(index));
        self.vacated(n);
    }

    /// The values, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.slots.iter().flatten()
    }

    /// Entries held: every slot not on a stack. (Not a field, which both the
    /// inserting and the removing cores would write.)
    pub(crate) fn len(&self) -> usize {
        self.fresh - self.free.len() - self.vacated_slots.len() - self.lost
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All values, emptying the list.
    pub(crate) fn into_values(self) -> Vec<T> {
        self.slots.into_vec().into_iter().flatten().collect()
    }

    /// Slots allocated now, occupied or not.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.slots.len()
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
        // Freed indices are reused (once the fresh ones are taken): why a
        // holder of an old index must check what is there before removing it.
        let pushed: Vec<(usize, usize)> = (10..15).map(|v| list.push(v)).collect();
        for &(index, address) in &pushed {
            assert_eq!(address, &list.slots[index] as *const Option<i32> as usize);
        }
        let again = pushed.iter().map(|&(index, _)| index);
        assert!(again.clone().any(|i| i == ids[1]) && again.clone().any(|i| i == ids[3]));
        for index in again {
            assert!(list.remove_if(index, |_| true).is_some());
        }
        assert!(!list.is_empty());
        assert_eq!(list.into_values().len(), 3);
    }

    #[test]
    fn removals_do_not_change_which_slot_the_next_insert_takes() {
        let mut list = WatchList::default();
        let ids: Vec<usize> = (0..4).map(|v| list.push(v).0).collect();
        list.remove_if(ids[1], |_| true);
        list.remove_if(ids[3], |_| true);
        // `free` ran out: the slots vacated so far are stacked, 3 on top.
        assert_eq!(list.push(10).0, ids[3]);
        // Vacated after that: not taken before slot 1, already in line.
        list.remove_if(ids[0], |_| true);
        assert_eq!(list.push(11).0, ids[1]);
        assert_eq!(list.push(12).0, ids[0]);
        assert_eq!(list.push(13).0, 4, "nothing vacant: a new slot");
        let mut values: Vec<i32> = list.iter().copied().collect();
        values.sort();
        assert_eq!(values, [2, 10, 11, 12, 13]);
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
