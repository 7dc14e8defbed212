//! Watch lists: for each key, the operations watched under it.
//!
//! Each key has its own list behind its own lock ([`List`]), found through
//! a sharded map. An operation keeps the place of each of its entries, so
//! completing it goes straight to those slots: no hashing, no map lock, no
//! list lock, one slot emptied in each (`unchecked/watch_list.rs`). A list
//! that becomes empty leaves its map at once.
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
//! Each thread remembers the group it last joined (by its number, see
//! `thread_stripe.rs`). A submission whose keys are that group's joins it
//! straight away: no hash of the key set, no map lookup and no shard lock,
//! only a comparison of the keys and the group's own lock, under which a
//! group taken out of its map says so (`detached`); then the submission
//! goes the usual way. A thread's handler serving one producer or one
//! fetch session submits the same key set again and again, and Kafka's
//! benchmark does nothing else.
//!
//! The DelayQueue baseline keeps one entry per key, and leaves completed
//! operations in place until a walk of the list or a purge finds them, as
//! Kafka's purgatory did before 0.9.
//!
//! Lock order: a shard of the group map, then a shard of the key map, then
//! one list. A list's lock is a leaf: under it only references are cloned
//! or moved, and entries removed under it are dropped after it is
//! released.

use crate::cell::Cell;
use crate::no_yield_lock::Mutex;
use crate::recent_key_sets::RecentKeySets;
use crate::thread_stripe;
use crate::timer_queue::CellRef;
use crate::unchecked::prefetch;
use crate::unchecked::watch_list::{self, After, Owner, Place, Shared};
use crossbeam_utils::CachePadded;
use dashmap::DashMap;
use smallvec::SmallVec;
use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Arc;

/// A key's list, or a group's.
pub(crate) struct List<K, O> {
    shared: Shared<Cell<K, O>, List<K, O>, ListState<K, O>>,
    name: Name<K>,
}

impl<K, O> Owner<Cell<K, O>> for List<K, O> {
    type Extra = ListState<K, O>;
    fn shared(&self) -> &Shared<Cell<K, O>, Self, ListState<K, O>> {
        &self.shared
    }
}

/// Which map a list is found in, and under what.
enum Name<K> {
    Key(K),
    Group(Box<[K]>),
}

/// What a list keeps under its lock besides its entries.
pub(crate) struct ListState<K, O> {
    /// Taken out of its map: nothing is added any more.
    detached: bool,
    /// A group's entries in its keys' lists; empty (and unallocated) for a
    /// key's list.
    members: Members<K, O>,
}

/// An entry: an operation's cell, or (only in a key's list) a group.
type Entry<K, O> = watch_list::Entry<Cell<K, O>, List<K, O>>;

fn is_done<K, O>(entry: &Entry<K, O>) -> bool {
    matches!(entry, Entry::Op(cell) if cell.state.is_done())
}

pub(crate) type ListRef<K, O> = Arc<List<K, O>>;

/// A locked list.
type Guard<'a, K, O> = watch_list::Guard<'a, Cell<K, O>, List<K, O>, ListState<K, O>>;

/// The maps' hasher. Every multi-key submission hashes its key set to find
/// its group; with std's SipHash, that hash and the map's probe were about 5%
/// of a one-thread profile, and foldhash took `cargo bench --bench ops --
/// submit_then` from 252.6-255.0 to 244.4-250.2 ns (4 alternating runs).
/// foldhash is seeded per process, as SipHash is, so keys cannot
/// be chosen in advance to collide; it is not built to stand a determined
/// attacker who can time the broker, which a partition name (created by
/// the cluster's admins, not by clients) does not call for.
type MapHasher = foldhash::fast::RandomState;

/// An entry in a list.
pub(crate) struct Link<K, O> {
    /// Where the entry is; none in the baseline's lists, which leave their
    /// entries to walks and purges.
    place: Option<Place<Cell<K, O>, List<K, O>>>,
}

impl<K, O> Link<K, O> {
    /// Where the entry is stored, to prefetch before removing it (see
    /// `unchecked/prefetch.rs`); 0 in the baseline's lists.
    fn address(&self) -> usize {
        self.place.as_ref().map_or(0, Place::address)
    }

    /// Keys the entry stands for: a group's link stands for all of its
    /// keys (the baseline has no groups).
    fn keys(&self) -> usize {
        match self.place.as_ref().map(|place| &place.list().name) {
            Some(Name::Group(keys)) => keys.len(),
            _ => 1,
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

impl<K, O> List<K, O> {
    fn new(name: Name<K>, lazy: bool) -> ListRef<K, O> {
        let state = ListState {
            detached: false,
            members: Vec::new(),
        };
        Arc::new(List {
            shared: Shared::new(state, lazy),
            name,
        })
    }
}

/// What a list held when it was taken out of its map.
struct Closed<K, O> {
    entries: Vec<Entry<K, O>>,
    members: Members<K, O>,
    /// References to lists (this one) that its last chunk held: dropped
    /// after its lock.
    lists: Vec<ListRef<K, O>>,
}

/// Marks `list` detached (out of its map) and takes what it holds.
fn close<K, O>(list: &ListRef<K, O>) -> Closed<K, O> {
    close_locked(&mut list.shared.lock())
}

/// [`close`], for a list locked already.
fn close_locked<K, O>(state: &mut Guard<'_, K, O>) -> Closed<K, O> {
    let mut entries = Vec::new();
    state.detached = true;
    let members = std::mem::take(&mut state.members);
    let lists = state.take_all(&mut entries);
    Closed {
        entries,
        members,
        lists,
    }
}

/// The group a thread joined last, on a line of its own.
type LastGroup<K, O> = CachePadded<Mutex<Option<ListRef<K, O>>>>;

pub(crate) struct Watchers<K, O> {
    keys: DashMap<K, ListRef<K, O>, MapHasher>,
    groups: DashMap<Box<[K]>, ListRef<K, O>, MapHasher>,
    /// Which key sets came lately: only those get a group.
    recent: RecentKeySets,
    /// The group each thread joined last, by its number; none for threads
    /// beyond the numbered ones. On lines of their own: each is written by
    /// one thread, at every group it joins anew.
    last_group: Box<[LastGroup<K, O>]>,
    /// The baseline's policy: one entry per key, and completed operations
    /// left in their lists.
    lazy: bool,
    /// [`Watchers::clear`], made where its bounds hold, for `drop`.
    clear: fn(&Self),
}

impl<K: Hash + Eq + Clone, O> Watchers<K, O> {
    /// `shards` must be a power of two of at least 2.
    pub(crate) fn new(shards: usize, lazy: bool) -> Self {
        Watchers {
            keys: DashMap::with_hasher_and_shard_amount(Default::default(), shards),
            groups: DashMap::with_hasher_and_shard_amount(Default::default(), shards),
            recent: RecentKeySets::default(),
            // The baseline has no groups.
            last_group: (0..if lazy { 0 } else { thread_stripe::count() })
                .map(|_| CachePadded::new(Mutex::new(None)))
                .collect(),
            lazy,
            clear: Self::clear,
        }
    }

    /// Watches `cell` under every key in `keys`, recording where in `links`.
    /// The caller holds the operation (see `unchecked/state.rs`), so no
    /// completion can be unlinking it meanwhile.
    pub(crate) fn watch_all(&self, cell: &CellRef<K, O>, links: &mut Links<K, O>, keys: &[K]) {
        if self.lazy || keys.len() == 1 {
            return self.push_to_each_key(cell, links, keys);
        }
        let last_group = thread_stripe::current().and_then(|n| self.last_group.get(n));
        if let Some(last_group) = last_group {
            let mut last_group = last_group.lock();
            if let Some(link) = push_to_same_group(last_group.as_ref(), keys, cell) {
                links.push(link);
                return;
            }
            if self.recent.seen_again(keys) {
                let (link, group) = self.push_to_group(keys, cell);
                links.push(link);
                let replaced = last_group.replace(group);
                // The group it replaced, if the last reference, goes after
                // the lock.
                drop(last_group);
                drop(replaced);
                return;
            }
        } else if self.recent.seen_again(keys) {
            links.push(self.push_to_group(keys, cell).0);
            return;
        }
        self.push_to_each_key(cell, links, keys);
    }

    /// Watches `cell` under each of `keys` in the key's own list.
    fn push_to_each_key(&self, cell: &CellRef<K, O>, links: &mut Links<K, O>, keys: &[K]) {
        for key in keys {
            links.push(self.push_to_key(key, Entry::Op(CellRef::clone(cell))));
        }
    }

    /// Appends `entry` to `key`'s list, creating the list if there is none.
    fn push_to_key(&self, key: &K, entry: Entry<K, O>) -> Link<K, O> {
        push_to(
            &self.keys,
            key,
            || key.clone(),
            || List::new(Name::Key(key.clone()), self.lazy),
            entry,
            |_| (),
        )
        .0
    }

    /// Appends `cell` to the group of `keys`, creating the group if there is
    /// none; returns where, and the group.
    fn push_to_group(&self, keys: &[K], cell: &CellRef<K, O>) -> (Link<K, O>, ListRef<K, O>) {
        let create = || {
            let group = List::new(Name::Group(keys.into()), self.lazy);
            // In its keys' lists before any operation is in it, so a check
            // under any of its keys finds every operation in it.
            let members = keys
                .iter()
                .map(|key| self.push_to_key(key, Entry::Group(Arc::clone(&group))))
                .collect();
            group.shared.lock().members = members;
            group
        };
        push_to(
            &self.groups,
            keys,
            || keys.into(),
            create,
            Entry::Op(CellRef::clone(cell)),
            Arc::clone,
        )
    }

    /// Prefetches the entries [`close`](Self::close) is about to remove (see
    /// `unchecked/prefetch.rs`); nothing for the baseline, which leaves them in
    /// place.
    pub(crate) fn prefetch(&self, links: &Links<K, O>) {
        if !self.lazy {
            for link in links {
                prefetch::for_write(link.address());
            }
        }
    }

    /// Where the first of `links`' entries is stored, for a handle to
    /// prefetch before it completes the operation (0 for the baseline).
    pub(crate) fn hint(&self, links: &Links<K, O>) -> usize {
        match links.first() {
            Some(link) if !self.lazy => link.address(),
            _ => 0,
        }
    }

    /// Removes a completing `cell` from every list in `links` (wheel
    /// purgatory; the baseline leaves it there). Returns the number of keys
    /// it was watched under.
    pub(crate) fn close(&self, cell: &Cell<K, O>, links: Links<K, O>) -> usize {
        let keys = links.iter().map(Link::keys).sum();
        for place in links.into_iter().filter_map(|link| link.place) {
            self.take_out(place, watch_list::op_word(cell));
        }
        keys
    }

    /// Takes the entry at `place` out if it still holds `expected` (a
    /// cancellation may have taken it), without the list's lock, and does
    /// under the lock what that left to do: a list left empty leaves its
    /// map.
    fn take_out(&self, place: Place<Cell<K, O>, List<K, O>>, expected: usize) {
        let (entry, after) = watch_list::remove(place, expected);
        drop(entry);
        match after {
            After::Nothing => {}
            After::Sparse(list, id) => list.shared.lock().note_sparse(id),
            // Most often the list's only entry (a key watched by one
            // operation at a time): straight to the map.
            After::MaybeEmpty(list) => drop(self.detach(&list, true)),
            After::Free(chunk) => {
                let list = Arc::clone(chunk.list());
                let (chunks_reference, empty) = {
                    let mut state = list.shared.lock();
                    let reference = state.free(chunk);
                    (reference, state.is_empty() && !state.detached)
                };
                drop(chunks_reference);
                if empty {
                    self.detach(&list, true);
                }
            }
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
            let mut state = current.shared.lock();
            if only_if_empty && !state.is_empty() {
                return false;
            }
            taken = Some(close_locked(&mut state));
            true
        };
        match &list.name {
            Name::Key(key) => drop(self.keys.remove_if(key, |_, current| take(current))),
            Name::Group(keys) => drop(self.groups.remove_if(&**keys, |_, current| take(current))),
        }
        match taken {
            Some(closed) => self.dismantle(list, closed),
            None => Vec::new(),
        }
    }

    /// What is left to do once `list` is out of its map: a group leaves its
    /// keys' lists, and a key's groups are detached in turn. Returns the
    /// operations that were in them.
    fn dismantle(&self, list: &ListRef<K, O>, closed: Closed<K, O>) -> Vec<CellRef<K, O>> {
        let Closed {
            entries,
            members,
            lists,
        } = closed;
        drop(lists);
        for place in members.into_iter().filter_map(|member| member.place) {
            self.take_out(place, watch_list::group_word(list));
        }
        let mut cells = Vec::new();
        for entry in entries {
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
        let mut lists = Vec::new();
        let mut pending = Vec::new();
        let mut groups = Vec::new();
        let list = {
            let Some(list) = self.keys.get(key) else {
                return Vec::new();
            };
            let mut state = list.shared.lock();
            if self.lazy {
                lists = state.retain(|entry| !is_done(entry), &mut dead);
            }
            pending.reserve(state.len());
            state.walk(|entry| match entry {
                Entry::Op(cell) => pending.push(cell),
                Entry::Group(group) => groups.push(group),
            });
            Arc::clone(&list)
        };
        if pending.is_empty() && groups.is_empty() {
            self.detach(&list, true);
        }
        for group in &groups {
            group.shared.lock().walk(|entry| {
                if let Entry::Op(cell) = entry {
                    pending.push(cell);
                }
            });
        }
        drop(dead);
        drop(lists);
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
        let closed = close(&list);
        oldest_first(self.dismantle(&list, closed))
    }

    /// The baseline's purge: drops completed entries from every list.
    pub(crate) fn purge(&self) {
        let mut dead = Vec::new();
        let mut lists = Vec::new();
        self.keys.retain(|_, list| {
            let mut state = list.shared.lock();
            lists.extend(state.retain(|entry| !is_done(entry), &mut dead));
            state.detached = state.is_empty();
            if state.detached {
                lists.extend(state.take_all(&mut dead));
            }
            !state.detached
        });
        drop(dead);
        drop(lists);
    }

    /// Entries held in all lists, groups' and their entries in keys' lists
    /// included (the baseline's include completed operations).
    pub(crate) fn held(&self) -> usize {
        self.sum_over_lists(|list| list.shared.lock().len())
    }

    /// `each` summed over every list, keys' and groups'.
    fn sum_over_lists(&self, each: impl Fn(&ListRef<K, O>) -> usize) -> usize {
        self.keys.iter().map(|l| each(&l)).sum::<usize>()
            + self.groups.iter().map(|l| each(&l)).sum::<usize>()
    }

    /// Takes every list apart, groups first: before the maps go, because a
    /// list's chunks keep it, so lists still in the maps (the baseline's,
    /// with completed operations in them, or any if operations were left
    /// unanswered) would otherwise never be freed; and at the baseline's
    /// shutdown, because their cells refer to the purgatory (`Cell::home`),
    /// which holds the lists.
    pub(crate) fn clear(&self) {
        for last_group in self.last_group.iter() {
            // Dropped after the lock.
            let _forgotten = last_group.lock().take();
        }
        let groups: Vec<ListRef<K, O>> = self.groups.iter().map(|l| Arc::clone(&l)).collect();
        let keys: Vec<ListRef<K, O>> = self.keys.iter().map(|l| Arc::clone(&l)).collect();
        for list in groups.iter().chain(&keys) {
            drop(self.detach(list, false));
        }
    }

    /// Bytes of the lists (chunks, spare slots, bookkeeping, the lists
    /// themselves, a group's copy of its keys) and of the maps' tables; not
    /// what a key owns on the heap. Takes each list's lock in turn.
    pub(crate) fn held_bytes(&self) -> usize {
        // An `Arc`'s allocation: its two counts and the list.
        let list_bytes = 2 * std::mem::size_of::<usize>() + std::mem::size_of::<List<K, O>>();
        let held = |list: &ListRef<K, O>| {
            let state = list.shared.lock();
            let keys = match &list.name {
                Name::Key(_) => 0,
                Name::Group(keys) => std::mem::size_of_val::<[K]>(keys),
            };
            list_bytes
                + keys
                + state.allocated_bytes()
                + state.members.capacity() * std::mem::size_of::<Link<K, O>>()
        };
        let lists = self.sum_over_lists(held);
        let tables = self.keys.capacity() * std::mem::size_of::<(K, ListRef<K, O>)>()
            + self.groups.capacity() * std::mem::size_of::<(Box<[K]>, ListRef<K, O>)>();
        lists + tables
    }

    /// Keys with a non-empty list.
    pub(crate) fn keys(&self) -> usize {
        self.keys.len()
    }
}

impl<K, O> Drop for Watchers<K, O> {
    fn drop(&mut self) {
        (self.clear)(self);
    }
}

/// Appends `entry` to the list `map` holds under `name`, made by `create`
/// (under the map's write lock) if there is none. Returns where the entry
/// is, and what `pushed_to` makes of the list.
fn push_to<N, Q, K, O, R>(
    map: &DashMap<N, ListRef<K, O>, MapHasher>,
    name: &Q,
    owned_name: impl FnOnce() -> N,
    create: impl FnOnce() -> ListRef<K, O>,
    entry: Entry<K, O>,
    pushed_to: impl FnOnce(&ListRef<K, O>) -> R,
) -> (Link<K, O>, R)
where
    N: Borrow<Q> + Hash + Eq,
    Q: Hash + Eq + ?Sized,
{
    // The shard's read lock is held while the list is locked, so the list
    // cannot be detached in between (detaching needs the write lock).
    let link = |list: &ListRef<K, O>| {
        let place = list.shared.lock().push(list, entry);
        (Link { place }, pushed_to(list))
    };
    if let Some(list) = map.get(name) {
        return link(&list);
    }
    link(&map.entry(owned_name()).or_insert_with(create))
}

/// Appends `cell` to `group` if it is the group of `keys` and still in its
/// map; `None` otherwise. Under the group's lock, as a push through the
/// map is: a group leaves its map (`detached`) under that lock too.
fn push_to_same_group<K: Eq, O>(
    group: Option<&ListRef<K, O>>,
    keys: &[K],
    cell: &CellRef<K, O>,
) -> Option<Link<K, O>> {
    let group = group?;
    if !matches!(&group.name, Name::Group(its) if **its == *keys) {
        return None;
    }
    let mut state = group.shared.lock();
    if state.detached {
        return None;
    }
    let place = state.push(group, Entry::Op(CellRef::clone(cell)));
    Some(Link { place })
}

/// Operations in submission order (outside any lock): checks and
/// cancellations then run oldest first, and in the same order whatever
/// slots earlier removals freed, so the wheel and the baseline agree.
fn oldest_first<K, O>(mut cells: Vec<CellRef<K, O>>) -> Vec<CellRef<K, O>> {
    cells.sort_unstable_by_key(|cell| cell.seq);
    cells
}
