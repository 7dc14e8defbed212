//! Watch lists: for each key, the operations watched under it.
//!
//! Each key has its own list behind its own lock ([`KeyList`]), found
//! through a sharded map. An operation keeps an `Arc` of every list it is on
//! and its index there, so completing it goes straight to each list: no
//! hashing, no map lock, one slab slot freed per key. That matters when
//! every request watches the same few keys (Kafka's benchmark): submitters
//! and completers then meet only on those lists' locks. A list that becomes
//! empty leaves the map at once. The DelayQueue baseline instead leaves
//! completed operations in place until a walk of the list or a purge finds
//! them, as Kafka's purgatory did before 0.9.
//!
//! Lock order: a map shard, then a key list.
//! A key list lock is a leaf: under it only `Arc`s are cloned or moved, and
//! cells removed under it are dropped after it is released.

use crate::cell::{Cell, LinkSet};
use crate::timer_queue::CellRef;
use crate::watch_list::WatchList;
use dashmap::DashMap;
use parking_lot::Mutex;
use std::hash::Hash;
use std::sync::Arc;

/// One key's watch list.
// `repr(C)` with the lock first keeps the lock word on the cache line of
// the `Arc`'s counts, which every watch and completion touch anyway.
#[repr(C)]
pub(crate) struct KeyList<K, O> {
    entries: Mutex<ListState<K, O>>,
    key: K,
}

struct ListState<K, O> {
    cells: WatchList<CellRef<K, O>>,
    /// Taken out of the map: nothing is added any more.
    detached: bool,
}

pub(crate) type KeyListRef<K, O> = Arc<KeyList<K, O>>;

pub(crate) struct Watchers<K, O> {
    map: DashMap<K, KeyListRef<K, O>>,
    /// The baseline's policy: leave completed operations in their lists.
    lazy: bool,
}

impl<K: Hash + Eq + Clone, O> Watchers<K, O> {
    /// `shards` must be a power of two of at least 2.
    pub(crate) fn new(shards: usize, lazy: bool) -> Self {
        Watchers {
            map: DashMap::with_hasher_and_shard_amount(Default::default(), shards),
            lazy,
        }
    }

    /// Adds `cell` to the list of every key in `keys`, recording each entry
    /// in `links`. The caller holds the operation (see `state.rs`), so no
    /// completion can be unlinking it meanwhile.
    pub(crate) fn watch_all(&self, cell: &CellRef<K, O>, links: &mut LinkSet<K, O>, keys: &[K]) {
        for key in keys {
            let (list, index) = self.push(key, cell);
            links.push((list, index));
        }
    }

    /// Appends `cell` to `key`'s list, creating the list if there is none.
    fn push(&self, key: &K, cell: &CellRef<K, O>) -> (KeyListRef<K, O>, usize) {
        // The shard's read lock is held while the list is locked, so the
        // list cannot be detached in between (detaching needs the write lock).
        if let Some(list) = self.map.get(key) {
            let index = list.entries.lock().cells.push(Arc::clone(cell));
            return (Arc::clone(&list), index);
        }
        let list = self.map.entry(key.clone()).or_insert_with(|| {
            Arc::new(KeyList {
                entries: Mutex::new(ListState {
                    cells: WatchList::default(),
                    detached: false,
                }),
                key: key.clone(),
            })
        });
        let index = list.entries.lock().cells.push(Arc::clone(cell));
        (Arc::clone(&list), index)
    }

    /// Removes a completing `cell` from every list in `links` (wheel
    /// purgatory; the baseline leaves it there). Returns how many watch
    /// entries it had.
    pub(crate) fn close(&self, cell: &Cell<K, O>, links: LinkSet<K, O>) -> usize {
        let count = links.len();
        if !self.lazy {
            self.unlink(cell, links);
        }
        count
    }

    fn unlink(&self, cell: &Cell<K, O>, links: LinkSet<K, O>) {
        for (list, index) in links {
            let (removed, now_empty) = {
                let mut state = list.entries.lock();
                // The slot is empty if `remove_key` took the list's entries.
                let removed = state.cells.remove_if(index, |c| std::ptr::eq(&**c, cell));
                (removed, state.cells.is_empty() && !state.detached)
            };
            drop(removed);
            if now_empty {
                self.detach_if_empty(&list);
            }
        }
    }

    /// Takes `list` out of the map if it is (still) the key's list and
    /// (still) empty: no memory stays behind for a key nobody watches.
    fn detach_if_empty(&self, list: &KeyListRef<K, O>) {
        self.map.remove_if(&list.key, |_, current| {
            if !Arc::ptr_eq(current, list) {
                return false;
            }
            let mut state = current.entries.lock();
            state.detached = state.cells.is_empty();
            state.detached
        });
    }

    /// The pending operations watched under `key`, to check them outside
    /// the lock. The baseline drops completed entries as it walks past them,
    /// as Kafka's `Watchers.checkAndMaybeComplete` did.
    pub(crate) fn pending(&self, key: &K) -> Vec<CellRef<K, O>> {
        let mut dead = Vec::new();
        let (pending, list) = {
            let Some(list) = self.map.get(key) else {
                return Vec::new();
            };
            let mut state = list.entries.lock();
            if self.lazy {
                state.cells.retain(|cell| !cell.state.is_done(), &mut dead);
            }
            let pending: Vec<_> = state.cells.iter().map(Arc::clone).collect();
            (pending, Arc::clone(&list))
        };
        if pending.is_empty() {
            self.detach_if_empty(&list);
        }
        drop(dead);
        oldest_first(pending)
    }

    /// Removes `key`'s list and returns the operations that were on it.
    pub(crate) fn remove_key(&self, key: &K) -> Vec<CellRef<K, O>> {
        let Some((_, list)) = self.map.remove(key) else {
            return Vec::new();
        };
        let cells = {
            let mut state = list.entries.lock();
            state.detached = true;
            std::mem::take(&mut state.cells)
        };
        oldest_first(cells.into_values())
    }

    /// The baseline's purge: drops completed entries from every list.
    pub(crate) fn purge(&self) {
        let mut dead = Vec::new();
        self.map.retain(|_, list| {
            let mut state = list.entries.lock();
            state.cells.retain(|cell| !cell.state.is_done(), &mut dead);
            state.detached = state.cells.is_empty();
            !state.detached
        });
        drop(dead);
    }

    /// Entries held in all lists (the baseline's include completed ones).
    pub(crate) fn held(&self) -> usize {
        self.map
            .iter()
            .map(|list| list.entries.lock().cells.len())
            .sum()
    }

    /// Keys with a non-empty list.
    pub(crate) fn keys(&self) -> usize {
        self.map.len()
    }
}

/// Operations in submission order (outside any lock): checks and
/// cancellations then run oldest first, and in the same order whatever
/// slots earlier removals freed, so the wheel and the baseline agree.
fn oldest_first<K, O>(mut cells: Vec<CellRef<K, O>>) -> Vec<CellRef<K, O>> {
    cells.sort_unstable_by_key(|cell| cell.seq);
    cells
}
