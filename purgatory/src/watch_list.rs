//! One key's watch list: a slab, so removal by the index handed out at
//! insertion touches only that slot (no neighbour to relink, which matters
//! when a key is watched by a hundred thousand operations).
//!
//! The slab's order depends on which slots earlier removals freed; callers
//! that need an order (checks run oldest first) sort what they collect by
//! submission number.

use slab::Slab;

pub(crate) struct WatchList<T>(Slab<T>);

impl<T> Default for WatchList<T> {
    fn default() -> Self {
        WatchList(Slab::new())
    }
}

impl<T> WatchList<T> {
    /// Adds `value`; returns the index that removes it and the address
    /// where it is stored (only a hint to prefetch: the storage moves when
    /// the list grows).
    pub(crate) fn push(&mut self, value: T) -> (usize, usize) {
        let index = self.0.insert(value);
        let address = self.0.get(index).map_or(0, |v| v as *const T as usize);
        (index, address)
    }

    /// Removes the value at `index`, if there is one and `is_it` accepts it.
    pub(crate) fn remove_if(&mut self, index: usize, is_it: impl FnOnce(&T) -> bool) -> Option<T> {
        match self.0.get(index) {
            Some(value) if is_it(value) => Some(self.0.remove(index)),
            _ => None,
        }
    }

    /// Removes the values `keep` rejects, into `removed`.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool, removed: &mut Vec<T>) {
        let doomed: Vec<usize> = self
            .0
            .iter()
            .filter(|(_, v)| !keep(v))
            .map(|(i, _)| i)
            .collect();
        removed.extend(doomed.into_iter().map(|i| self.0.remove(i)));
    }

    /// The values, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.0.iter().map(|(_, v)| v)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// All values, emptying the list.
    pub(crate) fn into_values(self) -> Vec<T> {
        self.0.into_iter().map(|(_, v)| v).collect()
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
        assert_eq!(address, list.0.get(again).unwrap() as *const i32 as usize);
        assert!(again == ids[1] || again == ids[3]);
        assert_eq!(list.remove_if(again, |_| true), Some(9));
        assert!(!list.is_empty());
        assert_eq!(list.into_values().len(), 3);
    }
}
