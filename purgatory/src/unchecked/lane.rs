//! The timer's lanes, whose entries a completion takes out without the
//! timer's lock.
//!
//! A lane holds the entries of one timeout in deadline order: an insert
//! writes the next slot, expiry reads slots in the order they were written
//! (see `wheel_timer.rs`). Inserts and expiry run under the timer's lock.
//! A completion does not: taking that lock on every completion, as the
//! submitting thread takes it on every submission, made the lock's word
//! and the lane's counts cross between the two cores twice a request, and
//! in `purgatory_perf` (Intel Xeon VM) most of the time of the timer's
//! calls was spent on the lock's two atomic instructions.
//!
//! # Who takes an entry out
//!
//! Each operation's cell has a [`TimerWord`] naming where its entry is: a
//! [`LaneId`] encodes the entry's chunk and slot, so a completion finds it
//! with no lane state. Up to three parties may reach an entry: a
//! completion (`cancel`), the thread at the clock (`advance`, `drain`), and a
//! timeout reset (`replace`); the last two under the lock. The one that
//! moves the timer word away from the entry's id, with a compare-exchange,
//! *resolves* the entry. It alone, besides the lane under its lock, still
//! touches the slot afterwards.
//!
//! # When a chunk is freed
//!
//! A chunk counts what is unresolved in it: one unit per slot (written or
//! not yet written) and one for the lane while the chunk is in its list.
//! Whoever resolves a slot gives its unit back after its last touch of the
//! chunk; the lane gives its own back when its head leaves the chunk, and
//! those of the slots never written when it drops the chunk. The unit that
//! brings the count to 0 frees the chunk: nobody can reach it any more. A
//! completion that leaves only the lane's unit (every entry of the chunk
//! taken out before the head came) tells its caller, which asks the lane,
//! under the lock, to let go of the chunk at once ([`SharedLane::release`]):
//! finished work holds no chunk of its own, as with the wheel's lanes.
//!
//! # When a few entries are left in a chunk
//! In a broker most operations of a timeout complete early and a few wait
//! it out (a fetch on a quiet partition among many on busy ones): each of
//! those would keep its whole chunk, 4 KiB for a 16-byte entry, until the
//! head reaches it, a full timeout later. So the completion that leaves a
//! chunk with [`SPARSE`] entries unresolved asks the lane, as for an
//! emptied one, to let go of it; the lane moves those entries elsewhere
//! (the timer's wheel, about 40 bytes each) under the lock, and frees the
//! chunk. Moving an entry resolves it, like a reset: the lane swaps the
//! slot's value out, stores the entry elsewhere, and moves the timer word
//! from the lane's id to the new one with a compare-exchange. A completion
//! that moved the word first wins (the lane takes its new entry back and
//! drops the value it swapped out; the completion finds the slot empty),
//! as against the thread at the clock. Only the completion that crosses
//! the mark asks, so a chunk that thinned out while it was still the
//! tail's (a lane filled more slowly than its operations complete), or
//! while the head was in it, keeps its entries until the head passes:
//! asking on every completion below the mark would put the timer's lock
//! back on the completion path.
//!
//! The thread at the clock takes the entries that fell due (the slot's value,
//! swapped out) under the lock, and resolves them after it ([`Expiring`]):
//! a completion that moved the word first wins, and the expiry is dropped.

use super::sync::{fence, AtomicPtr, AtomicU32, AtomicU64, Ordering, LANE_SLOTS, LANE_SPARSE};
use std::collections::VecDeque;
use std::ptr::{self, NonNull};

/// Cell of an operation, reference-counted as everywhere in the purgatory.
type Arc<T> = triomphe::Arc<T>;

/// Slots per chunk: with the 64-byte header, a chunk is 4 KiB (and a few
/// in the loom models, whose chunks must fill within a few steps).
const SLOTS: u32 = LANE_SLOTS;

/// A chunk that completions leave with this many unresolved entries is
/// sparse: the lane moves them elsewhere and frees it (see the module
/// docs). A sixteenth of a chunk: at about 40 bytes an entry elsewhere, the
/// move keeps at most a sixth of the chunk's 4 KiB.
const SPARSE: u32 = LANE_SPARSE;

/// A lane refuses entries past this many positions from its head, so that
/// positions compared with wrapping arithmetic never alias.
const MAX_SPAN: u32 = 1 << 30;

/// The timer word before the operation is scheduled, and after a
/// completion took its entry out.
pub(crate) const NO_TIMER: u64 = u64::MAX;

/// The timer word once the timer handed the entry out (it fell due, or at
/// shutdown): nothing puts the operation back, so a completion that reads
/// it knows without the timer's lock that there is nothing to take out.
pub(crate) const FIRED: u64 = u64::MAX - 1;

/// Set in every lane id; clear in wheel ids (their index stays below
/// 2^31) and in [`plain_deadline`]s.
const LANE_BIT: u64 = 1 << 31;

/// Gives access to the timer word of a value a lane holds.
pub(crate) trait Timed {
    fn timer_word(&self) -> &TimerWord;
}

/// Where an operation's timer entry is: a lane's [`LaneId`], or a plain
/// value the timer gives its own meaning to (a wheel id, the baseline's
/// deadline), [`NO_TIMER`] or [`FIRED`]. Only this module stores lane ids,
/// so an id read from a word was made by a lane.
pub(crate) struct TimerWord(AtomicU64);

/// What a [`TimerWord`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Word {
    Lane(LaneId),
    Plain(u64),
}

impl TimerWord {
    pub(crate) fn new() -> Self {
        TimerWord(AtomicU64::new(NO_TIMER))
    }

    /// Acquires what the lane wrote in the entry before naming it here.
    pub(crate) fn load(&self) -> Word {
        let raw = self.0.load(Ordering::Acquire);
        match LaneId::is_lane(raw) {
            true => Word::Lane(LaneId(raw)),
            false => Word::Plain(raw),
        }
    }

    /// Where the entry it names is stored, for a completion to prefetch
    /// with [`prefetch_entry`] (a hint: nothing goes through it): a lane's
    /// slot, which the id encodes ([`LaneId::hint`]); 0 for anything else.
    /// A wheel entry's place is the wheel's to know, under the timer's
    /// lock; most operations are in lanes.
    pub(crate) fn hint(&self) -> usize {
        match self.0.load(Ordering::Relaxed) {
            raw if LaneId::is_lane(raw) => LaneId(raw).hint(),
            _ => 0,
        }
    }

    /// Stores a plain value: a wheel id, [`NO_TIMER`], [`FIRED`] or a
    /// [`plain_deadline`]. A value that would read as a lane id stores
    /// [`NO_TIMER`] instead (none of those can).
    pub(crate) fn store_plain(&self, raw: u64) {
        debug_assert!(!LaneId::is_lane(raw), "{raw:#x} reads as a lane id");
        let raw = if LaneId::is_lane(raw) { NO_TIMER } else { raw };
        self.0.store(raw, Ordering::Release);
    }

    /// Moves the word from `from` to `to`; false if it held something
    /// else.
    fn swap_from(&self, from: LaneId, to: u64) -> bool {
        self.0
            .compare_exchange(from.0, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// A deadline as a plain word (for the baseline timer, which keeps the
/// deadline in force in the word): one-to-one below 2^62, which a tick
/// count never reaches, and never a lane id, [`NO_TIMER`] or [`FIRED`].
pub(crate) fn plain_deadline(deadline: u64) -> u64 {
    let d = deadline.min(1 << 62);
    (d & (LANE_BIT - 1)) | ((d >> 31) << 32)
}

/// An entry of a lane: its chunk's address and its slot, in one word.
/// Bits 0-7: the slot; 8-30 and 32-63: the chunk's address in 64-byte
/// units; 31: set. The upper half is never all ones, as in [`NO_TIMER`]
/// and [`FIRED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaneId(u64);

impl LaneId {
    /// `None` if the chunk's address cannot be encoded (at or above 2^60,
    /// which no 64-bit system hands a program today).
    fn new(chunk: usize, slot: u32) -> Option<Self> {
        let units = (chunk >> 6) as u64;
        let high = units >> 23;
        (high < u64::from(u32::MAX) && slot < SLOTS).then(|| {
            LaneId(u64::from(slot) | ((units & ((1 << 23) - 1)) << 8) | LANE_BIT | (high << 32))
        })
    }

    fn is_lane(raw: u64) -> bool {
        raw & LANE_BIT != 0 && raw >> 32 != u64::from(u32::MAX)
    }

    fn chunk_address(self) -> usize {
        let units = ((self.0 >> 8) & ((1 << 23) - 1)) | ((self.0 >> 32) << 23);
        (units << 6) as usize
    }

    fn slot(self) -> u32 {
        (self.0 & 0xFF) as u32
    }

    /// The entry's slot, marked as a lane's, for a completion to prefetch
    /// with [`prefetch_entry`] (a hint: nothing goes through it).
    pub(crate) fn hint(self) -> usize {
        let slot = self.chunk_address()
            + SLOT_OFFSET
            + self.slot() as usize * std::mem::size_of::<Slot<()>>();
        slot | LANE_HINT
    }

    fn chunk<T>(self) -> NonNull<Chunk<T>> {
        // Lane ids are only made by `new` from a chunk's address.
        NonNull::new(self.chunk_address() as *mut Chunk<T>).expect("a lane id names a chunk")
    }
}

#[repr(C, align(64))]
struct Header {
    /// Units not yet given back (see the module docs).
    unresolved: AtomicU32,
    /// The position of slot 0.
    base: u32,
    /// Which lane of the timer the chunk belongs to.
    lane: u32,
}

struct Slot<T> {
    deadline: AtomicU64,
    /// A reference to the value (`Arc::into_raw`), or null once taken.
    value: AtomicPtr<T>,
}

/// Aligned to its size, so that a slot's address names its chunk's
/// header as well ([`prefetch_entry`]).
#[repr(C, align(4096))]
struct Chunk<T> {
    header: Header,
    slots: [Slot<T>; SLOTS as usize],
}

const SLOT_OFFSET: usize = std::mem::size_of::<Header>();

/// A chunk's size and alignment.
pub(crate) const CHUNK_BYTES: usize = 4096;
const _: () = assert!(
    std::mem::size_of::<Chunk<()>>() == CHUNK_BYTES
        && std::mem::align_of::<Chunk<()>>() == CHUNK_BYTES
);

/// Set in a hint ([`LaneId::hint`]) that names a lane's slot: slots are
/// 16-byte aligned, so the bit is free.
const LANE_HINT: usize = 1;

/// Asks the CPU for the timer entry a hint names, ready to be written
/// (see `prefetch.rs`): for a lane's slot, also its chunk's header, whose
/// count a completion that takes the entry out gives a unit back to.
/// 0 is skipped; any other value is allowed, as for a prefetch.
#[inline(always)]
pub(crate) fn prefetch_entry(hint: usize) {
    if hint & LANE_HINT != 0 {
        let slot = hint & !LANE_HINT;
        super::prefetch::for_write(slot & !(CHUNK_BYTES - 1));
        super::prefetch::for_write(slot);
    } else {
        super::prefetch::for_write(hint);
    }
}

impl<T> Chunk<T> {
    fn new() -> Box<Self> {
        #[cfg(test)]
        CHUNKS.with(|n| n.set(n.get() + 1));
        Box::new(Chunk {
            header: Header {
                unresolved: AtomicU32::new(0),
                base: 0,
                lane: 0,
            },
            slots: std::array::from_fn(|_| Slot {
                deadline: AtomicU64::new(0),
                value: AtomicPtr::new(ptr::null_mut()),
            }),
        })
    }
}

#[cfg(test)]
std::thread_local! {
    /// Chunks allocated less chunks freed on this thread, for the loom
    /// models (whose threads all run on the test's own).
    pub(crate) static CHUNKS: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
impl<T> Drop for Chunk<T> {
    fn drop(&mut self) {
        CHUNKS.with(|n| n.set(n.get() - 1));
    }
}

/// What giving units of a chunk back left.
enum Left<T> {
    /// Nothing: the chunk, owned now, since nobody else can reach it.
    Nothing(Box<Chunk<T>>),
    /// One unit, perhaps the lane's.
    One,
    /// Exactly [`SPARSE`] units besides the lane's (if it still holds it).
    Sparse,
    More,
}

/// Gives back `units` of `chunk`.
///
/// # Safety
/// The caller holds `units` units of the chunk and touches it no more.
unsafe fn give_back<T>(chunk: NonNull<Chunk<T>>, units: u32) -> Left<T> {
    // SAFETY: the caller's units keep the chunk allocated until this call.
    let unresolved = unsafe { &chunk.as_ref().header.unresolved };
    match unresolved.fetch_sub(units, Ordering::Release) - units {
        0 => {
            // Every other holder's last touch happens before this free.
            fence(Ordering::Acquire);
            // SAFETY: the count reached 0, so nobody else holds a unit or
            // will reach the chunk; chunks are made by `Box`.
            Left::Nothing(unsafe { Box::from_raw(chunk.as_ptr()) })
        }
        1 => Left::One,
        n if n == SPARSE + 1 => Left::Sparse,
        _ => Left::More,
    }
}

/// Asks the lane that holds a chunk to let go of it, once what is left in
/// it is moved elsewhere (see [`SharedLane::release`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReleaseToken {
    /// The timer's lane that held it.
    pub lane: u32,
    base: u32,
    chunk: usize,
}

/// What taking an entry out gave back.
pub(crate) struct Removed<T> {
    /// The lane's reference to the value: `None` if the thread at the clock had
    /// taken it meanwhile (and drops it).
    pub value: Option<Arc<T>>,
    /// Set when perhaps only the lane keeps the entry's chunk, or a few
    /// entries besides: pass it to [`SharedLane::release`] under the
    /// timer's lock.
    pub release: Option<ReleaseToken>,
}

/// Takes the value of the entry `id` out and gives its unit back.
///
/// # Safety
/// The caller resolved `id` (see the module docs) and holds its unit.
unsafe fn take_resolved<T>(id: LaneId) -> Removed<T> {
    let chunk = id.chunk::<T>();
    // SAFETY: the caller's unit keeps the chunk allocated.
    let c = unsafe { chunk.as_ref() };
    let (lane, base) = (c.header.lane, c.header.base);
    let taken = c.slots[id.slot() as usize]
        .value
        .swap(ptr::null_mut(), Ordering::AcqRel);
    // SAFETY: a non-null value is a reference a push made with `into_raw`,
    // and the swap made this call its only owner.
    let value = (!taken.is_null()).then(|| unsafe { Arc::from_raw(taken) });
    // SAFETY: the caller's unit, given back; `c` is not used after this.
    let release = match unsafe { give_back(chunk, 1) } {
        Left::Nothing(freed) => {
            drop(freed);
            None
        }
        Left::One | Left::Sparse => Some(ReleaseToken {
            lane,
            base,
            chunk: chunk.as_ptr() as usize,
        }),
        Left::More => None,
    };
    Removed { value, release }
}

/// A completion takes `cell`'s entry `id` out of its lane; `None` if the
/// word no longer names it (the thread at the clock or a reset got there first:
/// load the word again).
pub(crate) fn cancel<T: Timed>(cell: &T, id: LaneId) -> Option<Removed<T>> {
    if !cell.timer_word().swap_from(id, NO_TIMER) {
        return None;
    }
    // SAFETY: moving the word away from `id` resolved it, and gave this
    // call its unit.
    Some(unsafe { take_resolved(id) })
}

/// An entry written to a lane that no timer word names yet; whoever holds
/// this holds its unit. [`publish`] or [`replace`] names it; [`discard`]
/// takes it out. (Dropped, it would stay until the head passes it, and its
/// chunk would never be freed.)
#[derive(Debug)]
#[must_use]
pub(crate) struct Pushed(LaneId);

/// A timer entry just made, not yet named in its cell's word: a lane's, or
/// a plain word (a wheel id). [`publish`] or [`replace`] names it.
#[derive(Debug)]
#[must_use]
pub(crate) enum NewEntry {
    Lane(Pushed),
    /// A plain word (a wheel id).
    Plain(u64),
}

/// Names `entry` in `cell`'s word, which holds a plain value (an operation
/// being scheduled, or moving out of the wheel, under the timer's lock).
pub(crate) fn publish<T: Timed>(cell: &T, entry: NewEntry) {
    match entry {
        // Released: a completion that reads the id sees what the push wrote.
        NewEntry::Lane(pushed) => cell.timer_word().0.store(pushed.0 .0, Ordering::Release),
        NewEntry::Plain(raw) => cell.timer_word().store_plain(raw),
    }
}

/// Moves `cell`'s word from the lane entry `old` to `new` (a timeout reset,
/// under the timer's lock) and takes `old` out; gives `new` back if the
/// word no longer names `old` (a completion or the thread at the clock resolved
/// it first).
pub(crate) fn replace<T: Timed>(
    cell: &T,
    old: LaneId,
    new: NewEntry,
) -> Result<Removed<T>, NewEntry> {
    let raw = match &new {
        NewEntry::Lane(pushed) => pushed.0 .0,
        NewEntry::Plain(raw) => {
            debug_assert!(!LaneId::is_lane(*raw));
            *raw
        }
    };
    if !cell.timer_word().swap_from(old, raw) {
        return Err(new);
    }
    // SAFETY: moving the word away from `old` resolved it.
    Ok(unsafe { take_resolved(old) })
}

/// Takes out an entry no word names.
pub(crate) fn discard<T>(entry: Pushed) -> Removed<T> {
    // SAFETY: a `Pushed` holds its entry's unit, and is consumed here.
    unsafe { take_resolved(entry.0) }
}

/// Where a lane moves the few entries left in a sparse chunk (the timer's
/// wheel), under the timer's lock.
pub(crate) trait Elsewhere<T> {
    /// Stores `value`, due at `deadline`; the plain word that names it
    /// there (never a lane id, [`NO_TIMER`] or [`FIRED`]), or the value
    /// back if there is no room.
    fn put(&mut self, deadline: u64, value: Arc<T>) -> Result<u64, Arc<T>>;

    /// Takes back what [`put`](Self::put) stored under `raw`.
    fn take_back(&mut self, raw: u64) -> Option<Arc<T>>;
}

/// An entry the thread at the clock took because it fell due: the value is out of
/// its slot, and [`resolve`](Self::resolve) decides, after the timer's
/// lock, whether the expiry is the entry's end.
pub(crate) struct Expiring<T: Timed> {
    id: LaneId,
    value: Option<Arc<T>>,
}

impl<T: Timed> Expiring<T> {
    /// The value, still unresolved: to prefetch, not to act on.
    pub(crate) fn value(&self) -> Option<&Arc<T>> {
        self.value.as_ref()
    }

    /// The value if this expiry moved its word to [`FIRED`]; `None` if a
    /// completion or a reset had moved it first (they took the entry out
    /// and gave its unit back; the value is dropped here, so call this
    /// outside the timer's lock).
    pub(crate) fn resolve(mut self) -> Option<Arc<T>> {
        self.resolve_here()
    }

    fn resolve_here(&mut self) -> Option<Arc<T>> {
        let value = self.value.take()?;
        if !value.timer_word().swap_from(self.id, FIRED) {
            return None;
        }
        // SAFETY: moving the word away resolved the entry; its unit is this
        // call's. The chunk's head is past it, so the lane lets go of the
        // chunk itself once the rest of it is resolved.
        if let Left::Nothing(freed) = unsafe { give_back(self.id.chunk::<T>(), 1) } {
            drop(freed);
        }
        Some(value)
    }
}

impl<T: Timed> Drop for Expiring<T> {
    /// Unresolved, the entry expires here (its value is dropped).
    fn drop(&mut self) {
        drop(self.resolve_here());
    }
}

/// Takes the value of `chunk`'s `slot` for the thread at the clock (under its
/// lock), unless a completion took it first.
///
/// # Safety
/// `chunk` is held by the calling lane (its unit keeps it allocated).
unsafe fn take_due<T: Timed>(chunk: NonNull<Chunk<T>>, slot: u32) -> Option<Expiring<T>> {
    // SAFETY: allocated, by the caller's contract.
    let taken = unsafe { chunk.as_ref() }.slots[slot as usize]
        .value
        .swap(ptr::null_mut(), Ordering::AcqRel);
    let id = LaneId::new(chunk.as_ptr() as usize, slot).expect("the lane made it");
    // SAFETY: a non-null value is a reference a push made with `into_raw`,
    // and the swap made this call its only owner.
    (!taken.is_null()).then(|| Expiring {
        id,
        value: Some(unsafe { Arc::from_raw(taken) }),
    })
}

/// A FIFO timer of values whose deadlines are inserted in non-decreasing
/// order, under the timer's lock; O(1) push, expiry and (without the lock)
/// [`cancel`]. A cleared slot stays until the head passes it or its whole
/// chunk was cleared.
pub(crate) struct SharedLane<T: Timed> {
    /// `chunks[0]` starts at position `base`; `None` is a chunk let go of
    /// because every entry in it was taken out.
    chunks: VecDeque<Option<NonNull<Chunk<T>>>>,
    base: u32,
    /// The first position that may hold a value.
    head: u32,
    /// The position the next push writes.
    tail: u32,
    /// The deadline of the last push: the next may not be earlier while
    /// the lane holds anything.
    last_deadline: u64,
    /// Which lane of the timer this is (written in its chunks).
    index: u32,
    /// One freed chunk kept for the next push.
    spare: Option<Box<Chunk<T>>>,
}

// SAFETY: the lane owns references to its values (`Arc<T>`, sent and
// shared with them) and its chunks, reached by other threads only through
// the protocol above.
unsafe impl<T: Timed + Send + Sync> Send for SharedLane<T> {}
// SAFETY: as above; `&SharedLane` gives access to nothing mutable.
unsafe impl<T: Timed + Send + Sync> Sync for SharedLane<T> {}

impl<T: Timed> SharedLane<T> {
    /// An empty lane, the timer's `index`th.
    pub(crate) fn new(index: u32) -> Self {
        Self::first_position(index, 0)
    }

    /// An empty lane whose first push gets `position` (tests start near
    /// the wrap-around).
    fn first_position(index: u32, position: u32) -> Self {
        SharedLane {
            chunks: VecDeque::new(),
            base: position,
            head: position,
            tail: position,
            last_deadline: 0,
            index,
            spare: None,
        }
    }

    /// Whether no entry is pending (cleared slots are stepped over first).
    pub(crate) fn is_empty(&mut self) -> bool {
        self.settle();
        self.head == self.tail
    }

    /// Whether [`push`](Self::push) would take `deadline`: not earlier
    /// than the last push's, unless the lane is empty.
    pub(crate) fn accepts(&mut self, deadline: u64) -> bool {
        deadline >= self.last_deadline || self.is_empty()
    }

    /// Writes `value`, due at `deadline`, to the next slot; hands `value`
    /// back if the deadline is out of order, the lane spans 2^30 positions,
    /// or a new chunk's address cannot be encoded.
    pub(crate) fn push(&mut self, deadline: u64, value: Arc<T>) -> Result<Pushed, Arc<T>> {
        if !self.accepts(deadline) {
            return Err(value);
        }
        let offset = self.tail.wrapping_sub(self.base);
        if offset >= MAX_SPAN {
            return Err(value);
        }
        if offset == self.chunks.len() as u32 * SLOTS {
            let mut chunk = self.spare.take().unwrap_or_else(Chunk::new);
            chunk.header.unresolved = AtomicU32::new(SLOTS + 1);
            chunk.header.base = self.tail;
            chunk.header.lane = self.index;
            let chunk = NonNull::from(Box::leak(chunk));
            if LaneId::new(chunk.as_ptr() as usize, 0).is_none() {
                // SAFETY: just leaked; nobody else has it.
                drop(unsafe { Box::from_raw(chunk.as_ptr()) });
                return Err(value);
            }
            self.chunks.push_back(Some(chunk));
        }
        let (index, slot) = (offset / SLOTS, offset % SLOTS);
        // The tail's chunk is never let go of early: its unwritten slots
        // keep units.
        let chunk = self.chunks[index as usize].expect("the tail's chunk is held");
        // SAFETY: the lane's unit keeps the chunk allocated.
        let s = unsafe { &chunk.as_ref().slots[slot as usize] };
        s.deadline.store(deadline, Ordering::Relaxed);
        s.value
            .store(Arc::into_raw(value) as *mut T, Ordering::Release);
        self.last_deadline = deadline;
        self.tail = self.tail.wrapping_add(1);
        let id = LaneId::new(chunk.as_ptr() as usize, slot).expect("checked with the chunk");
        Ok(Pushed(id))
    }

    /// Takes every entry due at or before `now`, in order, for the caller
    /// to resolve after the lock.
    pub(crate) fn advance(&mut self, now: u64, mut fire: impl FnMut(u64, Expiring<T>)) {
        loop {
            self.settle();
            if self.head == self.tail {
                return;
            }
            let offset = self.head.wrapping_sub(self.base);
            // `settle` leaves the head in a chunk the lane holds.
            let Some(chunk) = self.chunks[0] else { return };
            // SAFETY: the lane's unit keeps the chunk allocated.
            let slot = unsafe { &chunk.as_ref().slots[offset as usize] };
            let deadline = slot.deadline.load(Ordering::Relaxed);
            if deadline > now {
                return;
            }
            self.head = self.head.wrapping_add(1);
            // SAFETY: `chunks[0]`, held by the lane.
            if let Some(expiring) = unsafe { take_due(chunk, offset) } {
                fire(deadline, expiring);
            }
        }
    }

    /// The earliest pending deadline. (A completion may take that entry out
    /// meanwhile: the thread at the clock then wakes for nothing once.)
    pub(crate) fn next_expiration(&mut self) -> Option<u64> {
        self.settle();
        if self.head == self.tail {
            return None;
        }
        let offset = self.head.wrapping_sub(self.base);
        let chunk = self.chunks[0]?;
        // SAFETY: the lane's unit keeps the chunk allocated.
        Some(
            unsafe { chunk.as_ref() }.slots[offset as usize]
                .deadline
                .load(Ordering::Relaxed),
        )
    }

    /// Takes every entry out, due or not, for the caller to resolve after
    /// the lock, and lets go of every chunk.
    pub(crate) fn drain(&mut self) -> Vec<Expiring<T>> {
        let mut all = Vec::new();
        while self.head != self.tail {
            let offset = self.head.wrapping_sub(self.base);
            let (index, slot) = (offset / SLOTS, offset % SLOTS);
            let Some(chunk) = self.chunks[index as usize] else {
                self.head = self.head.wrapping_add(SLOTS - slot);
                continue;
            };
            // SAFETY: in `chunks`, held by the lane.
            all.extend(unsafe { take_due(chunk, slot) });
            self.head = self.head.wrapping_add(1);
        }
        let unwritten = self.unwritten();
        let last = self.chunks.len().wrapping_sub(1);
        for (i, chunk) in std::mem::take(&mut self.chunks).into_iter().enumerate() {
            let units = 1 + if i == last { unwritten } else { 0 };
            if let Some(chunk) = chunk {
                // SAFETY: the lane's unit and those of the unwritten slots.
                self.keep(unsafe { give_back(chunk, units) });
            }
        }
        self.base = self.tail;
        self.head = self.tail;
        all
    }

    /// Lets go of the chunk `token` names if this lane still holds it and
    /// nothing but the lane's unit is left in it. If a few entries are
    /// left (at most [`SPARSE`]), the chunk is written to its end and the
    /// head is not in it, moves them `elsewhere` first (see the module
    /// docs). References to drop after the timer's lock go to `dropped`.
    pub(crate) fn release(
        &mut self,
        token: ReleaseToken,
        elsewhere: &mut impl Elsewhere<T>,
        dropped: &mut Vec<Arc<T>>,
    ) {
        let Some(index) = self.holds(token) else {
            return;
        };
        let chunk = self.chunks[index].expect("held");
        // SAFETY: the lane's unit keeps the chunk allocated.
        let unresolved = &unsafe { chunk.as_ref() }.header.unresolved;
        let left = unresolved.load(Ordering::Acquire);
        if left != 1 {
            // The head's chunk is let go of by the head itself soon enough,
            // and the tail's still takes pushes.
            let written = index + 1 < self.chunks.len() || self.unwritten() == 0;
            if left > SPARSE + 1 || index == 0 || !written {
                return;
            }
            // SAFETY: held by the lane, written to its end.
            unsafe { Self::move_out(chunk, elsewhere, dropped) };
            // A completion between its compare-exchange and its give-back
            // still holds a unit: its give-back asks again.
            if unresolved.load(Ordering::Acquire) != 1 {
                return;
            }
        }
        self.chunks[index] = None;
        // SAFETY: the lane's unit, the last.
        self.keep(unsafe { give_back(chunk, 1) });
        self.settle();
    }

    /// Where `token`'s chunk is in `chunks`, if the lane still holds it.
    fn holds(&self, token: ReleaseToken) -> Option<usize> {
        let offset = token.base.wrapping_sub(self.base);
        let index = (offset / SLOTS) as usize;
        if !offset.is_multiple_of(SLOTS) || index >= self.chunks.len() {
            return None;
        }
        let chunk = self.chunks[index]?;
        (chunk.as_ptr() as usize == token.chunk).then_some(index)
    }

    /// Moves every entry still in `chunk` `elsewhere`, resolving each as a
    /// reset does; an entry a completion resolved first stays the
    /// completion's (it finds its slot empty and gives its unit back).
    ///
    /// # Safety
    /// `chunk` is held by the calling lane and written to its end.
    unsafe fn move_out(
        chunk: NonNull<Chunk<T>>,
        elsewhere: &mut impl Elsewhere<T>,
        dropped: &mut Vec<Arc<T>>,
    ) {
        for slot in 0..SLOTS {
            // SAFETY: the lane's unit keeps the chunk allocated.
            let s = unsafe { &chunk.as_ref().slots[slot as usize] };
            // A slot emptied stays empty (each is written once): a plain
            // load passes over the many without a locked instruction.
            if s.value.load(Ordering::Relaxed).is_null() {
                continue;
            }
            let taken = s.value.swap(ptr::null_mut(), Ordering::AcqRel);
            if taken.is_null() {
                continue;
            }
            // SAFETY: a non-null value is a reference a push made with
            // `into_raw`, and the swap made this call its only owner.
            let value = unsafe { Arc::from_raw(taken) };
            let id = LaneId::new(chunk.as_ptr() as usize, slot).expect("the lane made it");
            if value.timer_word().load() != Word::Lane(id) {
                // Resolved by a completion, which gives its unit back.
                dropped.push(value);
                continue;
            }
            let cell = Arc::clone(&value);
            let raw = match elsewhere.put(s.deadline.load(Ordering::Relaxed), value) {
                Ok(raw) => raw,
                // Full: like an operation scheduled into a full timer, it
                // waits for its condition without a timeout.
                Err(value) => {
                    dropped.push(value);
                    NO_TIMER
                }
            };
            if cell.timer_word().swap_from(id, raw) {
                // SAFETY: moving the word resolved the entry and gave this
                // call its unit; the lane's own keeps the chunk.
                let _ = unsafe { give_back(chunk, 1) };
            } else if raw != NO_TIMER {
                dropped.extend(elsewhere.take_back(raw));
            }
            // Never the last reference, so dropped here: `elsewhere` or
            // `dropped` holds the lane's.
            drop(cell);
        }
    }

    /// Entries pending: exact while no completion is taking one out.
    pub(crate) fn len(&self) -> usize {
        let unwritten = self.unwritten();
        let held: u64 = self
            .chunks
            .iter()
            .flatten()
            // SAFETY: the lane's unit keeps each chunk allocated.
            .map(|c| {
                u64::from(
                    unsafe { c.as_ref() }
                        .header
                        .unresolved
                        .load(Ordering::Relaxed),
                ) - 1
            })
            .sum();
        held.saturating_sub(u64::from(unwritten)) as usize
    }

    /// Slots of the tail's chunk not written yet.
    fn unwritten(&self) -> u32 {
        (self.chunks.len() as u32 * SLOTS).wrapping_sub(self.tail.wrapping_sub(self.base))
    }

    /// Moves the head past cleared slots and chunks let go of, to the next
    /// value or the tail, and lets go of the chunks it leaves. Each slot is
    /// passed once: O(1) amortised over the pushes.
    fn settle(&mut self) {
        loop {
            let offset = self.head.wrapping_sub(self.base);
            if offset >= SLOTS {
                // The head left the first chunk, written to its end.
                if let Some(chunk) = self.chunks.pop_front().flatten() {
                    // SAFETY: the lane's unit.
                    let left = unsafe { give_back(chunk, 1) };
                    self.keep(left);
                }
                self.base = self.base.wrapping_add(SLOTS);
                if self.chunks.capacity() > 64 && self.chunks.len() * 4 < self.chunks.capacity() {
                    self.chunks.shrink_to(self.chunks.len() * 2);
                }
                continue;
            }
            if self.head == self.tail {
                return;
            }
            match self.chunks[0] {
                None => self.head = self.head.wrapping_add(SLOTS - offset),
                Some(chunk) => {
                    // SAFETY: the lane's unit keeps the chunk allocated.
                    let slot = unsafe { &chunk.as_ref().slots[offset as usize] };
                    if !slot.value.load(Ordering::Relaxed).is_null() {
                        return;
                    }
                    self.head = self.head.wrapping_add(1);
                }
            }
        }
    }

    /// Keeps a chunk freed by the lane's own unit as the spare.
    fn keep(&mut self, left: Left<T>) {
        if let Left::Nothing(chunk) = left {
            if self.spare.is_none() {
                self.spare = Some(chunk);
            }
        }
    }

    /// Bytes of the chunks it holds and keeps, and of its list of them.
    /// (A chunk it let go of, still held by entries that a completion has
    /// yet to resolve, is not counted: it goes with the last of them.)
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.chunks_kept() * std::mem::size_of::<Chunk<T>>()
            + self.chunks.capacity() * std::mem::size_of::<Option<NonNull<Chunk<T>>>>()
    }

    /// Chunks in its list.
    pub(crate) fn chunks_held(&self) -> usize {
        self.chunks.iter().flatten().count()
    }

    /// Those held and the spare.
    pub(crate) fn chunks_kept(&self) -> usize {
        self.chunks_held() + usize::from(self.spare.is_some())
    }
}

impl<T: Timed> Drop for SharedLane<T> {
    /// Every entry left expires (its value dropped): a completion that
    /// still holds a reference to one finds its word moved. A chunk a
    /// completion is still taking an entry out of is freed by that
    /// completion.
    fn drop(&mut self) {
        drop(self.drain());
    }
}

/// What the tests (`lane_tests.rs`) look at inside.
#[cfg(test)]
impl<T: Timed> SharedLane<T> {
    pub(crate) fn starting_at(position: u32) -> Self {
        Self::first_position(0, position)
    }
}

#[cfg(test)]
impl LaneId {
    pub(crate) fn parts(self) -> (usize, u32) {
        (self.chunk_address(), self.slot())
    }

    pub(crate) fn encode(chunk: usize, slot: u32) -> Option<Self> {
        Self::new(chunk, slot)
    }

    pub(crate) fn reads_as_lane(raw: u64) -> bool {
        Self::is_lane(raw)
    }

    pub(crate) fn raw(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
impl Pushed {
    pub(crate) fn id(&self) -> LaneId {
        self.0
    }
}

#[cfg(test)]
pub(crate) const TEST_SLOTS: u32 = SLOTS;
#[cfg(test)]
pub(crate) const TEST_SPARSE: u32 = SPARSE;
#[cfg(test)]
pub(crate) const HEADER_BYTES: usize = SLOT_OFFSET;
