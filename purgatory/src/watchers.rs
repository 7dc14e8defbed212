//! Watch lists: for each key, the operations watched under it, sharded by
//! key hash so that threads working on different partitions do not contend.
//!
//! A list is a slab, and an operation remembers its index in each list it
//! is on, so the wheel purgatory removes a completed operation from every list
//! in O(1) per key without walking any; a list that becomes empty is removed
//! from its shard's map at once. The DelayQueue baseline instead leaves
//! completed operations in place until a walk of the list or a purge finds
//! them, as Kafka's purgatory did before 0.9.
//!
//! Lock order: an operation's `links` lock, then a shard lock. A shard lock
//! is otherwise a leaf: under it only `Arc`s are cloned or moved, and cells
//! removed under it are dropped after it is released.

use crate::cell::Cell;
use crate::timer_queue::CellRef;
use crate::watch_list::WatchList;
use parking_lot::Mutex;
use std::collections::hash_map::{HashMap, RandomState};
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

type List<K, O> = WatchList<CellRef<K, O>>;
type Shard<K, O> = Mutex<HashMap<K, List<K, O>>>;

pub(crate) struct Watchers<K, O> {
    shards: Box<[Shard<K, O>]>,
    hasher: RandomState,
    /// The baseline's policy: leave completed operations in their lists.
    lazy: bool,
}

impl<K: Hash + Eq + Clone, O> Watchers<K, O> {
    pub(crate) fn new(shards: usize, lazy: bool) -> Self {
        Watchers {
            shards: (0..shards).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
            lazy,
        }
    }

    fn shard(&self, key: &K) -> &Shard<K, O> {
        let hash = self.hasher.hash_one(key);
        &self.shards[(hash % self.shards.len() as u64) as usize]
    }

    /// Adds `cell` to the list of every key in `keys`, taking the cell's
    /// links lock once. Stops, adding nothing more, if the cell has started
    /// completing. `watched` is raised while the links lock is held, so a
    /// completion (which lowers it after taking that lock) can never lower
    /// it first and wrap it below zero. Returns how many keys were added.
    pub(crate) fn watch_all(
        &self,
        cell: &CellRef<K, O>,
        keys: &[K],
        watched: &AtomicUsize,
    ) -> usize {
        let mut links = cell.links.lock();
        if links.closed {
            return 0;
        }
        for key in keys {
            let mut shard = self.shard(key).lock();
            // Clone the key only for a new list (a String key allocates).
            let index = match shard.get_mut(key) {
                Some(list) => list.push(Arc::clone(cell)),
                None => shard.entry(key.clone()).or_default().push(Arc::clone(cell)),
            };
            links.keys.push((key.clone(), index));
        }
        watched.fetch_add(keys.len(), Ordering::Relaxed);
        keys.len()
    }

    /// Closes `cell`'s links so no key is added any more, and (wheel
    /// purgatory) removes it from every list it is on. Returns how many
    /// watch entries it had.
    pub(crate) fn close(&self, cell: &Cell<K, O>) -> usize {
        let keys = {
            let mut links = cell.links.lock();
            links.closed = true;
            std::mem::take(&mut links.keys)
        };
        if !self.lazy {
            for (key, index) in &keys {
                let removed = {
                    let mut shard = self.shard(key).lock();
                    // The slot may belong to someone else: after
                    // `remove_key`, a new list can exist under the key.
                    match shard.get_mut(key) {
                        Some(list)
                            if list
                                .get(*index)
                                .is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), cell)) =>
                        {
                            let removed = list.remove(*index);
                            if list.is_empty() {
                                shard.remove(key);
                            }
                            removed
                        }
                        // The key was cancelled: its list is gone already.
                        _ => None,
                    }
                };
                drop(removed);
            }
        }
        keys.len()
    }

    /// The pending operations watched under `key`, to check them outside
    /// the lock. The baseline drops completed entries as it walks past them,
    /// as Kafka's `Watchers.checkAndMaybeComplete` did.
    pub(crate) fn pending(&self, key: &K) -> Vec<CellRef<K, O>> {
        let mut dead = Vec::new();
        let pending = {
            let mut shard = self.shard(key).lock();
            let Some(list) = shard.get_mut(key) else {
                return Vec::new();
            };
            if self.lazy {
                list.retain(|cell| !cell.state.is_done(), &mut dead);
            }
            let pending: Vec<_> = list.iter().map(Arc::clone).collect();
            if list.is_empty() {
                shard.remove(key);
            }
            pending
        };
        drop(dead);
        oldest_first(pending)
    }

    /// Removes `key`'s list and returns the operations that were on it.
    pub(crate) fn remove_key(&self, key: &K) -> Vec<CellRef<K, O>> {
        let list = self.shard(key).lock().remove(key);
        oldest_first(list.map(WatchList::into_values).unwrap_or_default())
    }

    /// The baseline's purge: drops completed entries from every list.
    pub(crate) fn purge(&self) {
        for shard in self.shards.iter() {
            let mut dead = Vec::new();
            {
                let mut map = shard.lock();
                map.retain(|_, list| {
                    list.retain(|cell| !cell.state.is_done(), &mut dead);
                    !list.is_empty()
                });
            }
            drop(dead);
        }
    }

    /// Entries held in all lists (the baseline's include completed ones).
    pub(crate) fn held(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().values().map(WatchList::len).sum::<usize>())
            .sum()
    }

    /// Keys with a non-empty list.
    pub(crate) fn keys(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}

/// Operations in submission order (outside any lock): checks and
/// cancellations then run oldest first, and in the same order whatever
/// slots earlier removals freed, so the wheel and the baseline agree.
fn oldest_first<K, O>(mut cells: Vec<CellRef<K, O>>) -> Vec<CellRef<K, O>> {
    cells.sort_unstable_by_key(|cell| cell.seq);
    cells
}
