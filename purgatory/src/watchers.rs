//! Watch lists: for each key, the operations watched under it.
//!
//! Each key has its own list behind its own lock ([`List`]), found through
//! a sharded map. An operation keeps an `Arc` of each list it is on and its
//! index there, so completing it goes straight to those lists: no hashing,
//! no map lock, one slot emptied in each (`watch_list.rs`). A list that
//! becomes empty leaves its map at once.
//!
//! # Groups
//! An operation watched under several keys, if its key set came lately
//! (`recent_key_sets.rs`), is not entered in each key's list but in the list
//! of its key *set*, a group, and the group is one entry in each of its
//! keys' lists. (A set that does not come back gets an entry per key: a group
//! of one would cost more.) Submitting and completing then touch one
//! list whatever the number of keys: one lock, one slot, one reference count,
//! where there were one per key. In a broker the same partitions come back
//! request after request (a fetch session's partitions, a producer's batches,
//! and Kafka's benchmark, where every request watches the same keys), so a
//! group is shared by many operations. A group lives while it has operations:
//! the one that empties it takes it out of its map and out of its keys'
//! lists. A check under a key reaches a group's operations through the group's
//! entry; cancelling a key's operations takes its groups apart too, so an
//! operation submitted afterwards lands in a new group with a fresh entry in
//! the key's new list.
//!
//! A key set is a slice of keys as the caller gave it: the same keys in
//! another order make another group, which is correct, only less shared.
//!
//! The DelayQueue baseline keeps one entry per key, and leaves completed
//! operations in place until a walk of the list or a purge finds them, as
//! Kafka's purgatory did before 0.9.
//!
//! Lock order: a shard of the group map, then a shard of the key map, then
//! one list. A list's lock is a leaf: under it only `Arc`s are cloned or
//! moved, and entries removed under it are dropped after it is released.

use crate::cell::Cell;
use crate::no_yield_lock::Mutex;
use crate::recent_key_sets::RecentKeySets;
use crate::timer_queue::CellRef;
use crate::unchecked::prefetch;
use crate::watch_list::WatchList;
use dashmap::DashMap;
use smallvec::SmallVec;
use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Arc;

/// A key's list, or a group's.
// `repr(C)` with the lock first keeps the lock word on the cache line of
// the `Arc`'s counts, which every watch and completion touch anyway.
#[repr(C)]
pub(crate) struct List<K, O> {
    state: Mutex<ListState<K, O>>,
    name: Name<K>,
}

/// Which map a list is found in, and under what.
enum Name<K> {
    Key(K),
    Group(Box<[K]>),
}

struct ListState<K, O> {
    entries: WatchList<Entry<K, O>>,
    /// Taken out of its map: nothing is added any more.
    detached: bool,
    /// A group's entries in its keys' lists; empty (and unallocated) for a
    /// key's list.
    members: Members<K, O>,
}

enum Entry<K, O> {
    Op(CellRef<K, O>),
    /// Only in a key's list.
    Group(ListRef<K, O>),
}

impl<K, O> Entry<K, O> {
    fn is_op(&self, cell: &Cell<K, O>) -> bool {
        matches!(self, Entry::Op(c) if std::ptr::eq(&**c, cell))
    }

    fn is_group(&self, group: &ListRef<K, O>) -> bool {
        matches!(self, Entry::Group(g) if Arc::ptr_eq(g, group))
    }

    fn op(&self) -> Option<&CellRef<K, O>> {
        match self {
            Entry::Op(cell) => Some(cell),
            Entry::Group(_) => None,
        }
    }

    /// A completed operation the baseline may drop.
    fn is_done(&self) -> bool {
        self.op().is_some_and(|cell| cell.state.is_done())
    }
}

pub(crate) type ListRef<K, O> = Arc<List<K, O>>;

/// The maps' hasher. Every multi-key submission hashes its key set to find
/// its group; with std's SipHash, that hash and the map's probe were about 5%
/// of a one-thread profile, and foldhash took `cargo bench --bench ops --
/// submit_then` from 252.6-255.0 to 244.4-250.2 ns (4 alternating runs).
/// foldhash is seeded per process, as SipHash is, so keys cannot
/// be chosen in advance to collide; it is not built to stand a determined
/// attacker who can time the broker, which a partition name (created by
/// the cluster's admins, not by clients) does not call for.
type MapHasher = foldhash::fast::RandomState;

/// An entry in a list: which list, and where in it.
pub(crate) struct Link<K, O> {
    list: ListRef<K, O>,
    /// The entry's index in the list.
    index: usize,
    /// Where the entry was stored when added, to prefetch before removing
    /// it (see `unchecked/prefetch.rs`).
    address: usize,
}

impl<K, O> Link<K, O> {
    /// Keys the entry stands for: a group's link stands for all of its
    /// keys. (Counted here rather than kept in every cell.)
    fn keys(&self) -> usize {
        match &self.list.name {
            Name::Key(_) => 1,
            Name::Group(keys) => keys.len(),
        }
    }
}

/// A group's entries in its keys' lists.
type Members<K, O> = Vec<Link<K, O>>;

/// Where an operation is watched: its entry in each list (one group's, or
/// one per key). One link is stored inline: an operation under one key, or
/// under a key set that came lately (a group), which is what a broker's
/// requests are once their partitions come round again. Only a key set seen
/// for the first time spills its links to the heap. Room for four inline
/// took 80 bytes more in every cell.
pub(crate) type Links<K, O> = SmallVec<[Link<K, O>; 1]>;

impl<K, O> ListState<K, O> {
    /// Marks the list detached (out of its map) and takes what it holds.
    fn close(&mut self) -> (WatchList<Entry<K, O>>, Members<K, O>) {
        self.detached = true;
        (
            std::mem::take(&mut self.entries),
            std::mem::take(&mut self.members),
        )
    }
}

impl<K, O> List<K, O> {
    fn new(name: Name<K>) -> ListRef<K, O> {
        Arc::new(List {
            state: Mutex::new(ListState {
                entries: WatchList::default(),
                detached: false,
                members: Vec::new(),
            }),
            name,
        })
    }

    fn push(&self, entry: Entry<K, O>) -> (usize, usize) {
        self.state.lock().entries.push(entry)
    }
}

pub(crate) struct Watchers<K, O> {
    keys: DashMap<K, ListRef<K, O>, MapHasher>,
    groups: DashMap<Box<[K]>, ListRef<K, O>, MapHasher>,
    /// Which key sets came lately: only those get a group.
    recent: RecentKeySets,
    /// The baseline's policy: one entry per key, and completed operations
    /// left in their lists.
    lazy: bool,
}

impl<K: Hash + Eq + Clone, O> Watchers<K, O> {
    /// `shards` must be a power of two of at least 2.
    pub(crate) fn new(shards: usize, lazy: bool) -> Self {
        Watchers {
            keys: DashMap::with_hasher_and_shard_amount(Default::default(), shards),
            groups: DashMap::with_hasher_and_shard_amount(Default::default(), shards),
            recent: RecentKeySets::default(),
            lazy,
        }
    }

    /// Watches `cell` under every key in `keys`, recording where in `links`.
    /// The caller holds the operation (see `unchecked/state.rs`), so no
    /// completion can be unlinking it meanwhile.
    pub(crate) fn watch_all(&self, cell: &CellRef<K, O>, links: &mut Links<K, O>, keys: &[K]) {
        if self.lazy || keys.len() == 1 || !self.recent.seen_again(keys) {
            for key in keys {
                links.push(self.push_to_key(key, Entry::Op(CellRef::clone(cell))));
            }
        } else {
            links.push(self.push_to_group(keys, cell));
        }
    }

    /// Appends `entry` to `key`'s list, creating the list if there is none.
    fn push_to_key(&self, key: &K, entry: Entry<K, O>) -> Link<K, O> {
        push_to(
            &self.keys,
            key,
            || key.clone(),
            || List::new(Name::Key(key.clone())),
            entry,
        )
    }

    /// Appends `cell` to the group of `keys`, creating the group if there is
    /// none.
    fn push_to_group(&self, keys: &[K], cell: &CellRef<K, O>) -> Link<K, O> {
        let create = || {
            let group = List::new(Name::Group(keys.into()));
            // In its keys' lists before any operation is in it, so a check
            // under any of its keys finds every operation in it.
            let members = keys
                .iter()
                .map(|key| self.push_to_key(key, Entry::Group(Arc::clone(&group))))
                .collect();
            group.state.lock().members = members;
            group
        };
        push_to(
            &self.groups,
            keys,
            || keys.into(),
            create,
            Entry::Op(CellRef::clone(cell)),
        )
    }

    /// Prefetches the entries [`close`](Self::close) is about to remove (see
    /// `unchecked/prefetch.rs`); nothing for the baseline, which leaves them in
    /// place.
    pub(crate) fn prefetch(&self, links: &Links<K, O>) {
        if !self.lazy {
            for link in links {
                prefetch::for_write(link.address);
            }
        }
    }

    /// Where the first of `links`' entries is stored, for a handle to
    /// prefetch before it completes the operation (0 for the baseline).
    pub(crate) fn hint(&self, links: &Links<K, O>) -> usize {
        match links.first() {
            Some(link) if !self.lazy => link.address,
            _ => 0,
        }
    }

    /// Removes a completing `cell` from every list in `links` (wheel
    /// purgatory; the baseline leaves it there). Returns the number of keys
    /// it was watched under.
    pub(crate) fn close(&self, cell: &Cell<K, O>, links: Links<K, O>) -> usize {
        let keys = links.iter().map(Link::keys).sum();
        if !self.lazy {
            for link in links {
                self.remove(&link.list, link.index, |entry| entry.is_op(cell));
            }
        }
        keys
    }

    /// Removes the entry at `index` in `list` if `is_it` recognises it (the
    /// slot is empty if a cancellation took the list's entries), and takes
    /// the list out of its map if that emptied it.
    fn remove(&self, list: &ListRef<K, O>, index: usize, is_it: impl FnOnce(&Entry<K, O>) -> bool) {
        let (removed, now_empty) = {
            let mut state = list.state.lock();
            let removed = state.entries.remove_if(index, is_it);
            (removed, state.entries.is_empty() && !state.detached)
        };
        drop(removed);
        if now_empty {
            self.detach(list, true);
        }
    }

    /// Takes `list` out of its map if it is (still) there and, when
    /// `only_if_empty`, (still) empty: no memory stays behind for keys nobody
    /// watches. Returns the operations it held.
    fn detach(&self, list: &ListRef<K, O>, only_if_empty: bool) -> Vec<CellRef<K, O>> {
        let mut taken = None;
        let mut take = |current: &ListRef<K, O>| {
            if !Arc::ptr_eq(current, list) {
                return false;
            }
            let mut state = current.state.lock();
            if only_if_empty && !state.entries.is_empty() {
                return false;
            }
            taken = Some(state.close());
            true
        };
        match &list.name {
            Name::Key(key) => drop(self.keys.remove_if(key, |_, current| take(current))),
            Name::Group(keys) => drop(self.groups.remove_if(&**keys, |_, current| take(current))),
        }
        match taken {
            Some((entries, members)) => self.dismantle(list, entries, members),
            None => Vec::new(),
        }
    }

    /// What is left to do once `list` is out of its map: a group leaves its
    /// keys' lists, and a key's groups are detached in turn. Returns the
    /// operations that were in them.
    fn dismantle(
        &self,
        list: &ListRef<K, O>,
        entries: WatchList<Entry<K, O>>,
        members: Members<K, O>,
    ) -> Vec<CellRef<K, O>> {
        for member in members {
            self.remove(&member.list, member.index, |entry| entry.is_group(list));
        }
        let mut cells = Vec::new();
        for entry in entries.into_values() {
            match entry {
                Entry::Op(cell) => cells.push(cell),
                Entry::Group(group) => cells.extend(self.detach(&group, false)),
            }
        }
        cells
    }

    /// The pending operations watched under `key`, its groups' included, to
    /// check them outside the lock. The baseline drops completed entries as
    /// it walks past them, as Kafka's `Watchers.checkAndMaybeComplete` did.
    pub(crate) fn pending<Q>(&self, key: &Q) -> Vec<CellRef<K, O>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut dead = Vec::new();
        let mut groups = Vec::new();
        let (mut pending, list) = {
            let Some(list) = self.keys.get(key) else {
                return Vec::new();
            };
            let mut state = list.state.lock();
            if self.lazy {
                state.entries.retain(|entry| !entry.is_done(), &mut dead);
            }
            let mut pending = Vec::with_capacity(state.entries.len());
            for entry in state.entries.iter() {
                match entry {
                    Entry::Op(cell) => pending.push(CellRef::clone(cell)),
                    Entry::Group(group) => groups.push(Arc::clone(group)),
                }
            }
            (pending, Arc::clone(&list))
        };
        if pending.is_empty() && groups.is_empty() {
            self.detach(&list, true);
        }
        for group in &groups {
            let state = group.state.lock();
            pending.extend(
                state
                    .entries
                    .iter()
                    .filter_map(Entry::op)
                    .map(CellRef::clone),
            );
        }
        drop(dead);
        oldest_first(pending)
    }

    /// Removes `key`'s list, and the groups in it, and returns the
    /// operations that were watched under `key`.
    pub(crate) fn remove_key<Q>(&self, key: &Q) -> Vec<CellRef<K, O>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some((_, list)) = self.keys.remove(key) else {
            return Vec::new();
        };
        let (entries, members) = list.state.lock().close();
        oldest_first(self.dismantle(&list, entries, members))
    }

    /// The baseline's purge: drops completed entries from every list.
    pub(crate) fn purge(&self) {
        let mut dead = Vec::new();
        self.keys.retain(|_, list| {
            let mut state = list.state.lock();
            state.entries.retain(|entry| !entry.is_done(), &mut dead);
            state.detached = state.entries.is_empty();
            !state.detached
        });
        drop(dead);
    }

    /// Entries held in all lists, groups' and their entries in keys' lists
    /// included (the baseline's include completed operations).
    pub(crate) fn held(&self) -> usize {
        let held = |list: &ListRef<K, O>| list.state.lock().entries.len();
        self.keys.iter().map(|l| held(&l)).sum::<usize>()
            + self.groups.iter().map(|l| held(&l)).sum::<usize>()
    }

    /// Keys with a non-empty list.
    pub(crate) fn keys(&self) -> usize {
        self.keys.len()
    }
}

/// Appends `entry` to the list `map` holds under `name`, made by `create`
/// (under the map's write lock) if there is none. Returns where the entry is.
fn push_to<N, Q, K, O>(
    map: &DashMap<N, ListRef<K, O>, MapHasher>,
    name: &Q,
    owned_name: impl FnOnce() -> N,
    create: impl FnOnce() -> ListRef<K, O>,
    entry: Entry<K, O>,
) -> Link<K, O>
where
    N: Borrow<Q> + Hash + Eq,
    Q: Hash + Eq + ?Sized,
{
    // The shard's read lock is held while the list is locked, so the list
    // cannot be detached in between (detaching needs the write lock).
    let link = |list: &ListRef<K, O>| {
        let (index, address) = list.push(entry);
        Link {
            list: Arc::clone(list),
            index,
            address,
        }
    };
    if let Some(list) = map.get(name) {
        return link(&list);
    }
    link(&map.entry(owned_name()).or_insert_with(create))
}

/// Operations in submission order (outside any lock): checks and
/// cancellations then run oldest first, and in the same order whatever
/// slots earlier removals freed, so the wheel and the baseline agree.
fn oldest_first<K, O>(mut cells: Vec<CellRef<K, O>>) -> Vec<CellRef<K, O>> {
    cells.sort_unstable_by_key(|cell| cell.seq);
    cells
}
