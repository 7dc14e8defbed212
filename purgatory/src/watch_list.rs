//! One key's watch list: operations in the order they were watched, with
//! O(1) removal by the index handed out at insertion.
//!
//! A slab of nodes linked both ways. Checks walk it oldest first, as Kafka's
//! queue-based lists do: the request waiting longest is answered first, and
//! the order does not depend on which slots earlier removals freed, so the
//! wheel purgatory and the DelayQueue baseline check in the same order.

use slab::Slab;

const NIL: usize = usize::MAX;

struct Node<T> {
    value: T,
    prev: usize,
    next: usize,
}

pub(crate) struct WatchList<T> {
    nodes: Slab<Node<T>>,
    head: usize,
    tail: usize,
}

impl<T> Default for WatchList<T> {
    fn default() -> Self {
        WatchList {
            nodes: Slab::new(),
            head: NIL,
            tail: NIL,
        }
    }
}

impl<T> WatchList<T> {
    /// Appends `value`; returns the index that removes it.
    pub(crate) fn push(&mut self, value: T) -> usize {
        let index = self.nodes.insert(Node {
            value,
            prev: self.tail,
            next: NIL,
        });
        match self.tail {
            NIL => self.head = index,
            tail => self.nodes[tail].next = index,
        }
        self.tail = index;
        index
    }

    /// The value at `index`, if that slot is in use.
    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        self.nodes.get(index).map(|n| &n.value)
    }

    /// Removes the value at `index`.
    pub(crate) fn remove(&mut self, index: usize) -> Option<T> {
        let node = self.nodes.try_remove(index)?;
        match node.prev {
            NIL => self.head = node.next,
            prev => self.nodes[prev].next = node.next,
        }
        match node.next {
            NIL => self.tail = node.prev,
            next => self.nodes[next].prev = node.prev,
        }
        Some(node.value)
    }

    /// Removes the values `keep` rejects, into `removed`.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool, removed: &mut Vec<T>) {
        let mut at = self.head;
        while at != NIL {
            let next = self.nodes[at].next;
            if !keep(&self.nodes[at].value) {
                removed.extend(self.remove(at));
            }
            at = next;
        }
    }

    /// The values, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        let mut at = self.head;
        std::iter::from_fn(move || {
            let node = self.nodes.get(at)?;
            at = node.next;
            Some(&node.value)
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// All values, oldest first, emptying the list.
    pub(crate) fn into_values(mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        while self.head != NIL {
            out.extend(self.remove(self.head));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_insertion_order_across_removals_and_reuse() {
        let mut list = WatchList::default();
        let ids: Vec<usize> = (0..5).map(|v| list.push(v)).collect();
        assert_eq!(list.remove(ids[1]), Some(1));
        assert_eq!(list.remove(ids[4]), Some(4));
        assert_eq!(list.remove(ids[4]), None);
        list.push(5); // reuses a freed slot, still goes last
        assert_eq!(list.iter().copied().collect::<Vec<_>>(), [0, 2, 3, 5]);
        let mut removed = Vec::new();
        list.retain(|&v| v != 0 && v != 5, &mut removed);
        assert_eq!(removed, [0, 5]);
        assert_eq!(list.iter().copied().collect::<Vec<_>>(), [2, 3]);
        assert_eq!(list.len(), 2);
        assert_eq!(list.into_values(), [2, 3]);
    }

    #[test]
    fn removing_head_and_tail_keeps_the_links_right() {
        let mut list = WatchList::default();
        let a = list.push('a');
        let b = list.push('b');
        assert_eq!(list.remove(a), Some('a'));
        assert_eq!(list.remove(b), Some('b'));
        assert!(list.is_empty());
        list.push('c');
        assert_eq!(list.iter().copied().collect::<Vec<_>>(), ['c']);
        // Freed indices are reused: why a holder of an old index must check
        // what is there before removing it.
        assert!(list.get(a) == Some(&'c') || list.get(b) == Some(&'c'));
    }
}
