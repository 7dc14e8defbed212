//! Watch lists whose entries a completion takes out without the list's
//! lock.
//!
//! A list's entries sit in chunks of slots. Inserts, walks (a check of a
//! key) and every change of the chunks themselves run under the list's
//! lock; a completion taking its own entry out does not take it. With the
//! submitting thread taking the lock for every insert and the answering
//! thread for every removal, the lock's word, and the list's reference
//! count beside it, crossed between the two cores twice a request
//! (docs/performance.md).
//!
//! # Why in order
//! Slots are filled in order: an insert writes the slot after the last
//! one. A slab, whose insert takes the slot vacated last, would have the
//! inserting core load a line the removing core had just written on
//! nearly every insert; filled in order, the inserting core writes its own
//! lines. Removal by [`Place`] touches one slot: no neighbour to relink,
//! which matters when a key is watched by a hundred thousand operations.
//!
//! # Taking an entry out
//! A slot holds one reference as a word: a cell's, or a group list's,
//! told apart by the low bit; 0 when empty. A completion moves its word to
//! 0 with a compare-exchange against the reference it expects
//! ([`remove`]); a list taken apart under its lock swaps its slots out.
//! Exactly one of them gets each reference.
//!
//! A walk clones the references it reads, which a completion that took one
//! out meanwhile may be dropping. So a walk raises each chunk's `walking`
//! flag before it reads a slot, and a completion that took a reference out
//! reads its chunk's flag afterwards; if it is up, the completion waits for the
//! list's lock, which the walk holds, before it hands the reference on.
//! A sequentially consistent fence stands between the two accesses on
//! each side, so either the walk reads the slot empty or the completion
//! sees the flag. (Fences rather than sequentially consistent accesses:
//! loom models the former only.)
//!
//! # When a chunk is freed
//! A chunk counts *units*: one per [`Place`] not yet given back, and
//! [`TAIL`] while it is the chunk being filled. A place's unit is given
//! back by the [`remove`] that consumes it, whether or not the entry was
//! still there (a list taken apart leaves the units to the places), so a
//! chunk stays while anybody may still reach it; the list gives its
//! `TAIL` back when it moves on to another chunk. Whoever brings the count
//! to 0 owns the chunk and frees it, under the list's lock so that no walk
//! is reading it. Each chunk holds a reference to its list, so that
//! whoever ends up owning the chunk can lock the list: a list lives while
//! any of its chunks does.
//!
//! The baseline purgatory (`lazy` lists) leaves completed operations in
//! their lists; there, no place is handed out and whoever takes an entry
//! out gives its unit back.
//!
//! # When memory goes back
//! The removal that empties an older chunk frees it at once: a list that
//! held a burst gives it back as the burst drains, and a list left with no
//! entries tells its caller, which takes it out of its map. An entry that
//! stays holds its whole chunk, and in a broker a few in each chunk do (a
//! fetch that waits out its timeout among many that complete early); so a
//! chunk that falls to half full is filled again, in order, before a new
//! one is made. A list's first chunk has four slots (a key watched by one
//! operation at a time never needs more); the next ones double up to 512
//! as the list grows. The slots of a chunk freed are kept for the next one
//! of their size.
//!
//! Entries are walked in no particular order: callers that need one
//! (checks run oldest first) sort what they collect.

use super::sync::{fence, AtomicBool, AtomicUsize, ListGuard, ListMutex, Ordering, WATCH_SLOTS};
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::Arc;

/// An operation's cell, reference-counted as everywhere in the purgatory.
type CellArc<T> = triomphe::Arc<T>;

/// Slots of a list's first chunk, and of its largest.
pub(super) const MIN_SLOTS: usize = WATCH_SLOTS.0;
pub(super) const MAX_SLOTS: usize = WATCH_SLOTS.1;

/// The list's unit in the chunk being filled: a bit of its own, so that a
/// removal tells the last entry of that chunk going from an older chunk's.
const TAIL: usize = 1 << (usize::BITS - 2);

/// The low bit of a group's word.
const GROUP: usize = 1;

/// What a slot holds.
pub(crate) enum Entry<C, G> {
    Op(CellArc<C>),
    /// Another list, of a key set (see `watchers.rs`).
    Group(Arc<G>),
}

impl<C, G> Entry<C, G> {
    /// Both kinds of reference point at something aligned to at least 2,
    /// leaving the low bit for the tag.
    const ALIGNED: () = assert!(std::mem::align_of::<C>() >= 2 && std::mem::align_of::<G>() >= 2);

    fn into_word(self) -> usize {
        let () = Self::ALIGNED;
        match self {
            Entry::Op(cell) => CellArc::into_raw(cell) as usize,
            Entry::Group(group) => Arc::into_raw(group) as usize | GROUP,
        }
    }

    /// # Safety
    /// `word` was made by [`into_word`](Self::into_word), and the
    /// reference it stands for is handed to the caller.
    unsafe fn from_word(word: usize) -> Self {
        if word & GROUP == 0 {
            // SAFETY: made by `into_raw` of a cell, by the caller's contract.
            Entry::Op(unsafe { CellArc::from_raw(word as *const C) })
        } else {
            // SAFETY: as above, of a group.
            Entry::Group(unsafe { Arc::from_raw((word & !GROUP) as *const G) })
        }
    }

    /// The word a slot holds for this entry.
    fn word(&self) -> usize {
        match self {
            Entry::Op(cell) => op_word(&**cell),
            Entry::Group(group) => group_word(group),
        }
    }
}

impl<C, G> Clone for Entry<C, G> {
    fn clone(&self) -> Self {
        match self {
            Entry::Op(cell) => Entry::Op(CellArc::clone(cell)),
            Entry::Group(group) => Entry::Group(Arc::clone(group)),
        }
    }
}

/// The word a slot holds for `cell`, for [`remove`] to expect.
pub(crate) fn op_word<C>(cell: &C) -> usize {
    cell as *const C as usize
}

/// The word a slot holds for `group`, for [`remove`] to expect.
pub(crate) fn group_word<G>(group: &Arc<G>) -> usize {
    Arc::as_ptr(group) as usize | GROUP
}

/// What a list is, for this module: something that holds a [`Shared`]
/// list of its own.
pub(crate) trait Owner<C>: Sized {
    /// The caller's state under the list's lock.
    type Extra;
    fn shared(&self) -> &Shared<C, Self, Self::Extra>;
}

/// A list: its chunks under its lock, with `X`, the caller's own state
/// under the same lock.
pub(crate) struct Shared<C, G, X> {
    locked: ListMutex<Locked<C, G, X>>,
}

/// What a list's lock guards.
pub(crate) struct Locked<C, G, X> {
    chunks: Chunks<C, G>,
    /// The caller's state.
    extra: X,
}

/// A locked list.
pub(crate) struct Guard<'a, C, G, X> {
    locked: ListGuard<'a, Locked<C, G, X>>,
    /// The list locked, to check that chunks and lists passed in are its.
    shared: &'a Shared<C, G, X>,
}

impl<'a, C, G, X> std::ops::Deref for Guard<'a, C, G, X> {
    type Target = X;
    fn deref(&self) -> &X {
        &self.locked.extra
    }
}

impl<'a, C, G, X> std::ops::DerefMut for Guard<'a, C, G, X> {
    fn deref_mut(&mut self) -> &mut X {
        &mut self.locked.extra
    }
}

struct Chunk<C, G> {
    /// Units not yet given back (see the module docs).
    units: AtomicUsize,
    /// Up while a walk reads the slots (see the module docs): in the
    /// chunk, whose line a removal writes anyway, rather than in the list,
    /// beside the lock's word that every insert writes.
    walking: AtomicBool,
    /// Its number in its list.
    id: usize,
    /// Its list, kept alive by it.
    owner: Arc<G>,
    slots: Slots,
    _cells: std::marker::PhantomData<CellArc<C>>,
}

/// A chunk's slots: a first chunk's few within it (one allocation for a
/// key watched by one operation at a time), larger ones on their own.
enum Slots {
    Inline([AtomicUsize; MIN_SLOTS]),
    Boxed(Box<[AtomicUsize]>),
}

impl std::ops::Deref for Slots {
    type Target = [AtomicUsize];
    fn deref(&self) -> &[AtomicUsize] {
        match self {
            Slots::Inline(slots) => slots,
            Slots::Boxed(slots) => slots,
        }
    }
}

/// The chunk being filled.
struct Tail<C, G> {
    chunk: NonNull<Chunk<C, G>>,
    /// The first slot not yet looked at.
    cursor: usize,
}

struct Chunks<C, G> {
    tail: Option<Tail<C, G>>,
    /// Older chunks by number; `None` for a number not in use, and for the
    /// tail's (which is then within the vector or one past its end).
    older: Vec<Option<NonNull<Chunk<C, G>>>>,
    /// Older chunks allocated.
    live: usize,
    /// Numbers not in use (below `older.len()`), for new chunks.
    free: Vec<usize>,
    /// Chunks that were at most half full when last seen, to fill again
    /// before making a new one (some may have gone since: checked when
    /// taken).
    sparse: Vec<usize>,
    /// The slots of a chunk freed, for the next one of their size (chunks
    /// are freed by removing threads: allocating every 512 entries would go
    /// through the allocator's cross-thread path).
    spare: Option<Box<[AtomicUsize]>>,
    /// The baseline's list: no places, and units go with the entries.
    lazy: bool,
}

/// Where an entry is: its chunk and slot. Holds one unit of the chunk,
/// which [`remove`] gives back; dropped otherwise, it keeps the chunk for
/// good.
///
/// The slot is kept as its address rather than its number: a removal then
/// reaches it without first reading where the chunk keeps its slots, and
/// the address is the hint to prefetch before removing it, which a link
/// then need not keep beside the place (a word less in every cell).
pub(crate) struct Place<C, G> {
    chunk: NonNull<Chunk<C, G>>,
    /// In `chunk`'s slots (within the chunk, or boxed and owned by it), so
    /// valid as long as the chunk, and never moved.
    slot: NonNull<AtomicUsize>,
}

// SAFETY: a place stands for a unit of a chunk, which keeps the chunk (and
// its list) allocated; what it reaches through it is atomics and the
// chunk's list, `Send + Sync` when `G` is.
unsafe impl<C: Send + Sync, G: Send + Sync> Send for Place<C, G> {}
// SAFETY: as above; `&Place` reaches nothing mutable.
unsafe impl<C: Send + Sync, G: Send + Sync> Sync for Place<C, G> {}

// SAFETY: the lock's state owns its chunks, whose slots hold references to
// `C` and `G` (sent and shared with them); other threads reach the chunks
// only through places, by the protocol of the module docs.
unsafe impl<C: Send + Sync, G: Send + Sync> Send for Chunks<C, G> {}

impl<C, G> Place<C, G> {
    fn chunk(&self) -> &Chunk<C, G> {
        // SAFETY: the place's unit keeps the chunk allocated while the
        // place lives.
        unsafe { self.chunk.as_ref() }
    }

    /// The list the entry is in.
    pub(crate) fn list(&self) -> &Arc<G> {
        &self.chunk().owner
    }

    /// Where the entry is stored: a hint to prefetch before removing it.
    pub(crate) fn address(&self) -> usize {
        self.slot.as_ptr() as usize
    }
}

impl<C, G, X> Shared<C, G, X> {
    /// An empty list (`lazy` for the baseline's policy), with `extra`
    /// under its lock.
    pub(crate) fn new(extra: X, lazy: bool) -> Self {
        Shared {
            locked: ListMutex::new(Locked {
                chunks: Chunks {
                    tail: None,
                    older: Vec::new(),
                    live: 0,
                    free: Vec::new(),
                    sparse: Vec::new(),
                    spare: None,
                    lazy,
                },
                extra,
            }),
        }
    }

    pub(crate) fn lock(&self) -> Guard<'_, C, G, X> {
        Guard {
            locked: self.locked.lock(),
            shared: self,
        }
    }
}

/// What taking an entry out left to do under the list's lock.
#[must_use]
pub(crate) enum After<C, G> {
    Nothing,
    /// The chunk fell to half full: [`Guard::note_sparse`].
    Sparse(Arc<G>, usize),
    /// The chunk being filled holds nothing now: the list may be empty.
    MaybeEmpty(Arc<G>),
    /// The chunk is the caller's to free: [`Guard::free`].
    Free(Owned<C, G>),
}

/// A chunk whose units are all given back.
pub(crate) struct Owned<C, G>(NonNull<Chunk<C, G>>);

// SAFETY: as `Place`: the chunk is reached through it alone now.
unsafe impl<C: Send + Sync, G: Send + Sync> Send for Owned<C, G> {}

impl<C, G> Owned<C, G> {
    /// The chunk's list.
    pub(crate) fn list(&self) -> &Arc<G> {
        // SAFETY: owned: allocated until `Guard::free` frees it.
        unsafe { &self.0.as_ref().owner }
    }
}

/// Takes out the entry at `place` if it still holds `expected` (see
/// [`op_word`] and [`group_word`]), and gives the place's unit back.
/// Returns the entry's reference, if it was there, and what is left to do
/// with the list.
pub(crate) fn remove<C, G: Owner<C>>(
    place: Place<C, G>,
    expected: usize,
) -> (Option<Entry<C, G>>, After<C, G>) {
    let chunk = place.chunk();
    // SAFETY: one of the chunk's slots, which the place's unit keeps
    // allocated.
    let slot = unsafe { place.slot.as_ref() };
    let taken = slot
        .compare_exchange(expected, 0, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok();
    if taken {
        // Against the walk's fence: see the module docs.
        fence(Ordering::SeqCst);
        if chunk.walking.load(Ordering::Relaxed) {
            // A walk may have read the word before it was taken: the
            // reference goes on once the walk, and its clones, are done.
            drop(chunk.owner.shared().locked.lock());
        }
    }
    // SAFETY: the compare-exchange moved the word out of its slot, so its
    // reference is this call's.
    let entry = taken.then(|| unsafe { Entry::from_word(expected) });
    let place = ManuallyDrop::new(place);
    // SAFETY: the place's unit, given back; the place is not used again.
    let after = unsafe { give_back(place.chunk) };
    (entry, after)
}

/// Gives back one unit of `chunk`.
///
/// # Safety
/// The caller holds a unit of `chunk`, and does not touch the chunk again
/// unless this returns [`After::Free`].
unsafe fn give_back<C, G>(chunk: NonNull<Chunk<C, G>>) -> After<C, G> {
    // SAFETY: the caller's unit keeps the chunk allocated until the count
    // goes down.
    let c = unsafe { chunk.as_ref() };
    let half = c.slots.len() / 2;
    let mut units = c.units.load(Ordering::Relaxed);
    let mut list = None;
    let left = loop {
        let left = units - 1;
        // A reference to the list is taken while the unit still keeps the
        // chunk, hence the list, alive.
        if (left == TAIL || (left == half && left != 0)) && list.is_none() {
            list = Some(Arc::clone(&c.owner));
        }
        match c
            .units
            .compare_exchange_weak(units, left, Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => break left,
            Err(now) => units = now,
        }
    };
    match (left, list) {
        (0, _) => After::Free(Owned(chunk)),
        (TAIL, Some(list)) => After::MaybeEmpty(list),
        (left, Some(list)) if left == half => After::Sparse(list, c.id),
        _ => After::Nothing,
    }
}

impl<'a, C, G: Owner<C, Extra = X>, X> Guard<'a, C, G, X> {
    /// Adds `entry`; `list` is the list locked here (its chunks keep a
    /// reference to it, and a completion that waits for a walk locks it).
    /// Returns the entry's place (`None` in a lazy list).
    pub(crate) fn push(&mut self, list: &Arc<G>, entry: Entry<C, G>) -> Option<Place<C, G>> {
        assert!(
            std::ptr::eq(list.shared(), self.shared),
            "pushed with another list"
        );
        let chunks = &mut self.locked.chunks;
        let word = entry.into_word();
        loop {
            if let Some(tail) = &mut chunks.tail {
                // SAFETY: the tail's unit keeps it allocated.
                let chunk = unsafe { tail.chunk.as_ref() };
                while tail.cursor < chunk.slots.len() {
                    let slot = tail.cursor;
                    tail.cursor += 1;
                    let stored = &chunk.slots[slot];
                    if stored.load(Ordering::Relaxed) != 0 {
                        continue;
                    }
                    // The list's `TAIL` keeps the count above 0: no chunk
                    // comes back from being freed.
                    chunk.units.fetch_add(1, Ordering::Relaxed);
                    stored.store(word, Ordering::Release);
                    return (!chunks.lazy).then(|| Place {
                        chunk: tail.chunk,
                        slot: NonNull::from(stored),
                    });
                }
            }
            chunks.next_tail(list);
        }
    }

    /// Clones every reference the list holds, to `each`.
    pub(crate) fn walk(&self, mut each: impl FnMut(Entry<C, G>)) {
        self.locked
            .chunks
            .scan(|_, _, entry| each(Entry::clone(entry)));
    }

    /// Takes out the entries `keep` rejects, into `removed`. Returns the
    /// references to the list that chunks freed held, to drop after the
    /// lock.
    #[must_use]
    pub(crate) fn retain(
        &mut self,
        mut keep: impl FnMut(&Entry<C, G>) -> bool,
        removed: &mut Vec<Entry<C, G>>,
    ) -> Vec<Arc<G>> {
        self.take(|entry| !keep(entry), removed)
    }

    /// Takes out every entry, into `removed`, and lets go of the chunk
    /// being filled: for a list out of its map, to which nothing is added
    /// any more.
    #[must_use]
    pub(crate) fn take_all(&mut self, removed: &mut Vec<Entry<C, G>>) -> Vec<Arc<G>> {
        let mut lists = self.take(|_| true, removed);
        let chunks = &mut self.locked.chunks;
        if let Some(tail) = chunks.tail.take() {
            lists.extend(chunks.seal(tail));
        }
        lists
    }

    fn take(
        &mut self,
        mut take: impl FnMut(&Entry<C, G>) -> bool,
        removed: &mut Vec<Entry<C, G>>,
    ) -> Vec<Arc<G>> {
        let chunks = &mut self.locked.chunks;
        let lazy = chunks.lazy;
        let mut emptied = Vec::new();
        chunks.scan(|chunk, slot, entry| {
            let word = entry.word();
            if !take(entry)
                || slot
                    .compare_exchange(word, 0, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err()
            {
                return;
            }
            // SAFETY: moved out of its slot: the reference is ours.
            removed.push(unsafe { Entry::from_word(word) });
            // Lazy: no place will give the unit back.
            if lazy && chunk.units.fetch_sub(1, Ordering::AcqRel) == 1 {
                emptied.push(NonNull::from(chunk));
            }
        });
        // Only older chunks reach 0 (the tail holds `TAIL`).
        emptied
            .into_iter()
            .map(|chunk| chunks.free(chunk))
            .collect()
    }

    /// Notes chunk `id` to be filled again, if it is still at most half
    /// full.
    pub(crate) fn note_sparse(&mut self, id: usize) {
        self.locked.chunks.sparse.push(id);
    }

    /// Frees a chunk whose units are all given back, and returns its
    /// reference to the list, to drop once the lock is released.
    pub(crate) fn free(&mut self, owned: Owned<C, G>) -> Arc<G> {
        assert!(
            std::ptr::eq(owned.list().shared(), self.shared),
            "a chunk freed under another list's lock"
        );
        self.locked.chunks.free(owned.0)
    }

    /// Whether nothing may be reached through the list: no entry, and no
    /// place that has not been given back.
    pub(crate) fn is_empty(&self) -> bool {
        let chunks = &self.locked.chunks;
        let tail_empty = chunks.tail.as_ref().is_none_or(|tail| {
            // SAFETY: the tail's unit keeps it allocated.
            unsafe { tail.chunk.as_ref() }.units.load(Ordering::Acquire) == TAIL
        });
        chunks.live == 0 && tail_empty
    }

    /// Entries held (lazy lists) or places not yet given back (the
    /// others): the two agree once every place's removal has run.
    pub(crate) fn len(&self) -> usize {
        self.locked
            .chunks
            .all()
            .map(|chunk| chunk.units.load(Ordering::Acquire) & !TAIL)
            .sum()
    }

    /// Bytes of the list's chunks, their spare slots and its bookkeeping:
    /// what it holds on the heap besides the list itself and the caller's
    /// state.
    pub(crate) fn allocated_bytes(&self) -> usize {
        let chunks = &self.locked.chunks;
        let word = std::mem::size_of::<usize>();
        let in_chunks: usize = chunks
            .all()
            .map(|chunk| {
                let boxed = match &chunk.slots {
                    Slots::Inline(_) => 0,
                    Slots::Boxed(slots) => slots.len() * word,
                };
                std::mem::size_of::<Chunk<C, G>>() + boxed
            })
            .sum();
        in_chunks
            + chunks.spare.as_ref().map_or(0, |s| s.len() * word)
            + chunks.older.capacity() * std::mem::size_of::<Option<NonNull<Chunk<C, G>>>>()
            + (chunks.free.capacity() + chunks.sparse.capacity()) * word
    }

    /// Slots allocated now, in chunks or spare.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        let chunks = &self.locked.chunks;
        chunks.capacity() + chunks.spare.as_ref().map_or(0, |s| s.len())
    }
}

impl<C, G> Chunks<C, G> {
    /// Shows `each` every entry held, with its chunk and slot, under
    /// the chunks' `walking` flags: `each` may read what the entry points
    /// at, or take it out of its slot, while a removal may be taking it out
    /// without the lock (see the module docs).
    fn scan(&self, mut each: impl FnMut(&Chunk<C, G>, &AtomicUsize, &Entry<C, G>)) {
        for chunk in self.all() {
            chunk.walking.store(true, Ordering::Relaxed);
        }
        fence(Ordering::SeqCst);
        for chunk in self.all() {
            for slot in chunk.slots.iter() {
                let word = slot.load(Ordering::Acquire);
                if word == 0 {
                    continue;
                }
                // SAFETY: a word read in its slot was made by a push; its
                // reference stays alive until after the scan (a removal
                // that took it meanwhile saw the flag and waits for this
                // lock), and is not dropped here.
                let entry = ManuallyDrop::new(unsafe { Entry::from_word(word) });
                each(chunk, slot, &entry);
            }
        }
        for chunk in self.all() {
            chunk.walking.store(false, Ordering::Release);
        }
    }

    /// Slots in all chunks allocated, the tail's included (summed: asked
    /// once a new chunk, which is made once per up to 512 entries).
    fn capacity(&self) -> usize {
        self.all().map(|chunk| chunk.slots.len()).sum()
    }

    /// Every chunk allocated, the tail's included.
    fn all_pointers(&self) -> impl Iterator<Item = NonNull<Chunk<C, G>>> + '_ {
        let older = self.older.iter().flatten().copied();
        older.chain(self.tail.as_ref().map(|tail| tail.chunk))
    }

    fn all(&self) -> impl Iterator<Item = &Chunk<C, G>> + '_ {
        // SAFETY: chunks in the list are allocated while `self` is borrowed:
        // only the lock's holder frees them.
        self.all_pointers().map(|chunk| unsafe { &*chunk.as_ptr() })
    }

    /// Lets go of the tail and fills a sparse chunk next, or else a new
    /// one sized for the list as it is now.
    #[cold]
    fn next_tail(&mut self, list: &Arc<G>) {
        if let Some(tail) = self.tail.take() {
            // The caller holds a reference to the list: not the last.
            drop(self.seal(tail));
        }
        while let Some(id) = self.sparse.pop() {
            let Some(Some(chunk)) = self.older.get(id).copied() else {
                continue;
            };
            // SAFETY: in the list, so allocated.
            let c = unsafe { chunk.as_ref() };
            let half = c.slots.len() / 2;
            // Not from 0: the chunk is then its last giver's to free.
            let refill = c
                .units
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |units| {
                    (units != 0 && units <= half).then_some(units + TAIL)
                });
            if refill.is_ok() {
                self.older[id] = None;
                self.live -= 1;
                self.tail = Some(Tail { chunk, cursor: 0 });
                return;
            }
        }
        let size = (self.capacity() + 1)
            .next_power_of_two()
            .clamp(MIN_SLOTS, MAX_SLOTS);
        let slots = match self.spare.take() {
            spare if size == MIN_SLOTS => {
                self.spare = spare;
                Slots::Inline(std::array::from_fn(|_| AtomicUsize::new(0)))
            }
            Some(slots) if slots.len() == size => Slots::Boxed(slots),
            spare => {
                self.spare = spare;
                Slots::Boxed((0..size).map(|_| AtomicUsize::new(0)).collect())
            }
        };
        let id = self.free.pop().unwrap_or(self.older.len());
        let chunk = Box::new(Chunk {
            units: AtomicUsize::new(TAIL),
            walking: AtomicBool::new(false),
            id,
            owner: Arc::clone(list),
            slots,
            _cells: std::marker::PhantomData,
        });
        self.tail = Some(Tail {
            chunk: NonNull::from(Box::leak(chunk)),
            cursor: 0,
        });
    }

    /// Gives back the list's unit of the chunk that was being filled, and
    /// frees it if nothing else holds it (returning its reference to the
    /// list, which the caller drops after the lock).
    fn seal(&mut self, tail: Tail<C, G>) -> Option<Arc<G>> {
        // SAFETY: the tail's unit keeps it allocated until given back.
        let c = unsafe { tail.chunk.as_ref() };
        let (id, half) = (c.id, c.slots.len() / 2);
        let left = c.units.fetch_sub(TAIL, Ordering::AcqRel) - TAIL;
        if left == 0 {
            return Some(self.free(tail.chunk));
        }
        if id == self.older.len() {
            self.older.push(None);
        }
        self.older[id] = Some(tail.chunk);
        self.live += 1;
        if left <= half {
            self.sparse.push(id);
        }
        None
    }

    /// Frees a chunk whose units are all given back: an older one, or a
    /// tail just let go of (which is not among the older chunks).
    fn free(&mut self, chunk: NonNull<Chunk<C, G>>) -> Arc<G> {
        // Every giver's last touch of the chunk happens before this.
        fence(Ordering::Acquire);
        // SAFETY: no unit is left, so nobody else reaches the chunk, and
        // chunks are made by `Box::leak`.
        let chunk = unsafe { Box::from_raw(chunk.as_ptr()) };
        if let Some(held) = self.older.get_mut(chunk.id) {
            if *held == Some(NonNull::from(&*chunk)) {
                *held = None;
                self.live -= 1;
            }
        }
        // A tail never put among the older chunks has the number one past
        // them, which the next new chunk takes anyway.
        if chunk.id < self.older.len() {
            self.free.push(chunk.id);
        }
        let Chunk { owner, slots, .. } = *chunk;
        // Every place took its entry out or found it taken.
        debug_assert!(slots.iter().all(|s| s.load(Ordering::Relaxed) == 0));
        if let Slots::Boxed(slots) = slots {
            if self.spare.as_ref().is_none_or(|s| s.len() <= slots.len()) {
                self.spare = Some(slots);
            }
        }
        // Numbers of chunks gone are skipped when taken; a list that
        // shrinks drops them, so that they do not pile up.
        if self.sparse.len() > self.older.len() {
            let older = &self.older;
            self.sparse
                .retain(|&id| matches!(older.get(id), Some(Some(_))));
        }
        owner
    }
}

impl<C, G> Drop for Chunks<C, G> {
    fn drop(&mut self) {
        // Every chunk holds a reference to the list that owns this, so
        // none is left when it goes.
        debug_assert!(self.tail.is_none() && self.live == 0);
    }
}
