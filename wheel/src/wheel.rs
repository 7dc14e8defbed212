//! The hierarchical timing wheel itself, in ticks.

use crate::bucket::{Bucket, MAX_INDEX};
use crate::error::InsertError;
use crate::id::TimerId;
use crate::level::{level_for, slot_for, Due, Level, LEVELS, SLOTS, SLOT_BITS};
use crate::slab::{Entry, Slab};

/// Bucket arrays: one per level, and level 0's second one (see
/// [`TimingWheel::levels`]).
const ARRAYS: usize = LEVELS + 1;
/// Where level 0's array for odd windows is; even windows use `levels[0]`.
const LEVEL0_ODD: usize = LEVELS;
/// The last window: nothing comes after it.
const LAST_WINDOW: u64 = u64::MAX >> SLOT_BITS;

/// The bucket code (`Payload::bucket`) of an entry in the due list (see
/// [`TimingWheel::insert`]).
const DUE: u16 = (ARRAYS * SLOTS) as u16;
// Every code `place` makes, DUE the highest, must differ from the vacant tag.
const _: () = assert!(DUE < crate::payload::VACANT);

/// Large bucket buffers kept between two uses: a few more than the buckets
/// that fill at once (those of the next few ticks and the levels above).
const SPARE_BUFFERS: usize = 8;

/// Gives `bucket`, full, the largest spare buffer that has room for more
/// than its slots; with none, it grows its own.
#[cold]
fn lend(spare: &mut Vec<Vec<u32>>, bucket: &mut Bucket) {
    let needed = bucket.slots_len();
    let largest = spare
        .iter()
        .enumerate()
        .max_by_key(|(_, b)| b.capacity())
        .filter(|(_, b)| b.capacity() > needed)
        .map(|(i, _)| i);
    if let Some(i) = largest {
        bucket.adopt(spare.swap_remove(i));
    }
}

/// Level 0's array for the ticks of `window`.
#[inline]
fn level0(window: u64) -> usize {
    (window & 1) as usize * LEVEL0_ODD
}

/// The array and slot an entry's `bucket` code names; `None` for the due
/// list. (`place` makes the codes.)
#[inline]
fn locate(bucket: u16) -> Option<(usize, usize)> {
    (bucket != DUE).then_some((bucket as usize / SLOTS, bucket as usize % SLOTS))
}

/// Counters that show how much work the wheel did, for tests and tuning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WheelStats {
    /// Buckets taken off a level by [`TimingWheel::advance`] (each one non-empty).
    pub buckets_visited: u64,
    /// Entries moved to a lower level because their bucket came due before
    /// they did.
    pub cascaded: u64,
    /// Entries fired by [`TimingWheel::advance`].
    pub fired: u64,
}

/// A hierarchical timing wheel holding values of type `T`, each due at a tick.
///
/// The wheel has no threads, locks or clock of its own: its time moves only
/// when [`advance`](Self::advance) is called, which makes it deterministic to
/// test. (For `Instant`s rather than ticks, see [`Timer`](crate::Timer).)
///
/// # Costs
/// | operation | cost |
/// |---|---|
/// | [`insert`](Self::insert), [`cancel`](Self::cancel), [`reschedule`](Self::reschedule) | O(1): one slab entry and one bucket position touched (amortised: a bucket is a `Vec` whose holes are reused) |
/// | [`advance`](Self::advance) | O(levels) to find each non-empty bucket, plus O(1) per entry fired or moved down a level; empty ticks cost nothing. The next window's level-1 bucket moves down over this window's advances, a share each, not in one |
/// | [`next_expiration`](Self::next_expiration) | O(levels) |
///
/// An entry moves down at most 10 times in its life (once per level below its
/// first); entries cancelled before their bucket comes due, the purgatory's
/// common case, never move.
///
/// # Example
/// ```
/// use timing_wheel::TimingWheel;
///
/// let mut wheel = TimingWheel::new();
/// let produce = wheel.insert(30_000, "produce").unwrap();
/// let fetch = wheel.insert(500, "fetch").unwrap();
/// assert_eq!(wheel.cancel(produce), Some("produce")); // acks arrived in time
///
/// let mut fired = Vec::new();
/// wheel.advance(499, |_, v| fired.push(v));
/// assert!(fired.is_empty()); // never early
/// wheel.advance(500, |_, v| fired.push(v));
/// assert_eq!(fired, ["fetch"]);
/// assert_eq!(wheel.cancel(fetch), None); // fired ids are stale
/// ```
pub struct TimingWheel<T> {
    slab: Slab<T>,
    /// The levels, and at [`LEVEL0_ODD`] level 0's second array. Level 0
    /// holds this window's entries and the next one's, each window in the
    /// array of its parity: so the next window's entries can be sorted into
    /// their buckets while this one runs (see `cascade_ahead`), and an
    /// entry's bucket code stays true when the window turns.
    levels: Box<[Level; ARRAYS]>,
    /// The window whose level-1 bucket `cascade_ahead` is moving down, and
    /// the position below which it has not looked yet.
    ahead: (u64, u32),
    /// Entries inserted or rescheduled at or before `elapsed`: they fire on
    /// the next `advance`, whatever its `now`.
    due: Bucket,
    /// The wheel's current time: every entry due at or before it has fired
    /// (apart from the due list).
    elapsed: u64,
    /// Reused buffer for a bucket being processed, so `advance` never allocates.
    scratch: Vec<u32>,
    /// Large bucket buffers between two uses (see `bucket.rs`): a bucket
    /// that empties gives its buffer here, and the next one to outgrow its
    /// own takes it, so the memory follows the buckets filling now rather
    /// than each bucket's peak.
    spare_buffers: Vec<Vec<u32>>,
    /// Set when buckets or pages grew, so the wheel gives memory back once it
    /// is empty; clear when there is nothing to give back.
    grown: bool,
    stats: WheelStats,
}

impl<T> Default for TimingWheel<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> TimingWheel<T> {
    /// An empty wheel whose time is tick 0.
    pub fn new() -> Self {
        Self::starting_at(0)
    }

    /// An empty wheel whose time is `now`.
    pub fn starting_at(now: u64) -> Self {
        TimingWheel {
            slab: Slab::new(),
            levels: Box::new(std::array::from_fn(|_| Level::new())),
            ahead: (0, 0),
            due: Bucket::default(),
            elapsed: now,
            scratch: Vec::new(),
            spare_buffers: Vec::new(),
            grown: false,
            stats: WheelStats::default(),
        }
    }

    /// The wheel's time: the `now` of the last [`advance`](Self::advance)
    /// (or the start).
    pub fn now(&self) -> u64 {
        self.elapsed
    }

    /// Number of pending entries.
    pub fn len(&self) -> usize {
        self.slab.len()
    }

    /// Whether no entry is pending.
    pub fn is_empty(&self) -> bool {
        self.slab.len() == 0
    }

    /// Work counters since the wheel was made.
    pub fn stats(&self) -> WheelStats {
        self.stats
    }

    /// Adds `value`, due at tick `deadline`; any `u64` is accepted.
    ///
    /// A deadline at or before [`now`](Self::now) is not dropped and not
    /// refused: the entry fires on the very next [`advance`](Self::advance),
    /// even one that does not move the time. Until then it can be cancelled
    /// or rescheduled like any other.
    ///
    /// # Errors
    /// [`InsertError::Full`] (handing `value` back) when 2^31 entries are
    /// already pending.
    #[inline]
    pub fn insert(&mut self, deadline: u64, value: T) -> Result<TimerId, InsertError<T>> {
        let Some(index) = self.slab.reserve(MAX_INDEX) else {
            return Err(InsertError::Full(value));
        };
        let place = self.place(index, deadline);
        let generation = self.slab.fill(index, deadline, value, place);
        Ok(TimerId::new(index, generation))
    }

    /// Removes a pending entry and returns its value; `None` for a stale id
    /// (fired, cancelled, drained, or never from this wheel).
    #[inline]
    pub fn cancel(&mut self, id: TimerId) -> Option<T> {
        let (value, place) = self.slab.take(id.index(), id.generation())?;
        self.unplace(place);
        self.shrink_if_sparse();
        Some(value)
    }

    /// Moves a pending entry to a new deadline, keeping its id and its slot.
    /// Returns `false` (and does nothing) for a stale id. A deadline at or
    /// before [`now`](Self::now) behaves as in [`insert`](Self::insert).
    pub fn reschedule(&mut self, id: TimerId, deadline: u64) -> bool {
        let Some(entry) = self.slab.lookup_mut(id.index(), id.generation()) else {
            return false;
        };
        entry.deadline = deadline;
        let old = (entry.payload.bucket(), entry.link);
        self.unplace(old);
        self.link(id.index(), deadline);
        true
    }

    /// Where a pending entry lives in memory: its slot and its place in its
    /// bucket, the two cache lines that [`cancel`](Self::cancel) writes.
    /// `None` for a stale id.
    ///
    /// For callers that keep the wheel behind a lock: they can prefetch
    /// these lines before taking it, so the misses are not paid inside the
    /// critical section. The addresses are only hints and are never
    /// dereferenced here: the slot stays put while the entry is pending, but
    /// its bucket place moves when it is rescheduled or moved down a level,
    /// and a bucket's buffer moves when it grows.
    pub fn addresses(&self, id: TimerId) -> Option<[*const (); 2]> {
        let entry = self.slab.lookup(id.index(), id.generation())?;
        let place = match locate(entry.payload.bucket()) {
            None => self.due.address(entry.link),
            Some((level, slot)) => self.levels[level].address(slot, entry.link),
        };
        Some([(entry as *const Entry<T>).cast(), place])
    }

    /// The deadline of a pending entry.
    pub fn deadline(&self, id: TimerId) -> Option<u64> {
        Some(self.slab.lookup(id.index(), id.generation())?.deadline)
    }

    /// The value of a pending entry.
    pub fn get(&self, id: TimerId) -> Option<&T> {
        self.slab.lookup(id.index(), id.generation())?.payload.get()
    }

    /// The value of a pending entry, mutably.
    pub fn get_mut(&mut self, id: TimerId) -> Option<&mut T> {
        self.slab
            .lookup_mut(id.index(), id.generation())?
            .payload
            .get_mut()
    }

    /// Moves the time to `now` and hands every entry due at or before it to
    /// `fire`, each exactly once, never before its deadline. Returns how many
    /// fired.
    ///
    /// Entries fire in no particular order within one call. A `now` behind
    /// the wheel's time does not move it back; the due list still fires.
    /// Idle time is skipped: the cost is O(levels) per non-empty bucket
    /// reached, plus O(1) per entry, however many ticks pass.
    pub fn advance(&mut self, now: u64, mut fire: impl FnMut(TimerId, T)) -> usize {
        self.advance_timed(now, |_, id, value| fire(id, value))
    }

    /// [`advance`](Self::advance), handing `fire` each entry's deadline as
    /// well: a caller that orders what fired by deadline need not keep the
    /// deadline beside the value.
    pub fn advance_timed(&mut self, now: u64, mut fire: impl FnMut(u64, TimerId, T)) -> usize {
        let mut fired = 0;
        // The due list fires first; its entries may be at any deadline <= now.
        let mut batch = std::mem::take(&mut self.scratch);
        self.due.drain_into(&mut batch);
        if let Some(buffer) = self.due.take_large_buffer() {
            self.keep_buffer(buffer);
        }
        fired += self.fire_all(&batch, &mut fire);
        batch.clear();

        while let Some(due) = self.next_due().filter(|d| d.start <= now) {
            self.stats.buckets_visited += 1;
            // Buckets never start behind `elapsed` (see `level.rs`).
            self.elapsed = due.start;
            self.levels[due.level].take(due.slot, &mut batch);
            if let Some(buffer) = self.levels[due.level]
                .bucket_mut(due.slot)
                .take_large_buffer()
            {
                self.keep_buffer(buffer);
            }
            for &index in &batch {
                let deadline = self.slab.get(index).deadline;
                if deadline <= now {
                    self.fire_one(index, &mut fire);
                    fired += 1;
                } else {
                    // Not due yet: it lands on a lower level, now that the
                    // wheel's time is this bucket's start.
                    self.stats.cascaded += 1;
                    self.link(index, deadline);
                }
            }
            batch.clear();
        }
        self.elapsed = self.elapsed.max(now);
        self.scratch = batch;
        self.cascade_ahead();
        self.shrink_if_sparse();
        fired
    }

    /// The tick at which [`advance`](Self::advance) next has work: the start of
    /// the earliest non-empty bucket, or [`now`](Self::now) if entries are
    /// waiting in the due list. `None` when the wheel is empty.
    ///
    /// A driver may sleep until then. That tick can come before the earliest
    /// deadline (a higher-level bucket starts before its entries are due and
    /// moves them down): advance to it and ask again.
    pub fn next_expiration(&self) -> Option<u64> {
        if !self.due.is_empty() {
            return Some(self.elapsed);
        }
        self.next_due().map(|d| d.start)
    }

    /// Removes every pending entry and returns them (for shutdown), due or not.
    pub fn drain(&mut self) -> std::vec::IntoIter<(TimerId, T)> {
        let mut indices = Vec::with_capacity(self.len());
        self.due.drain_into(&mut indices);
        for level in self.levels.iter_mut() {
            level.drain_into(&mut indices);
        }
        let drained: Vec<_> = indices
            .into_iter()
            .map(|index| {
                let generation = self.slab.get(index).generation;
                (TimerId::new(index, generation), self.slab.remove(index))
            })
            .collect();
        self.shrink_if_sparse();
        drained.into_iter()
    }

    /// Bytes this wheel has allocated (entries, buckets and bookkeeping),
    /// not counting what `T` itself points to.
    pub fn allocated_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + std::mem::size_of::<[Level; ARRAYS]>()
            + self.slab.allocated_bytes()
            + self
                .levels
                .iter()
                .map(Level::allocated_bytes)
                .sum::<usize>()
            + self.due.allocated_bytes()
            + self.scratch.capacity() * std::mem::size_of::<u32>()
            + self.spare_buffers.capacity() * std::mem::size_of::<Vec<u32>>()
            + self
                .spare_buffers
                .iter()
                .map(|b| b.capacity() * std::mem::size_of::<u32>())
                .sum::<usize>()
    }

    /// The earliest non-empty bucket, its `level` naming its array. This
    /// window's level-0 buckets come first; then the next window's, unless
    /// a bucket above starts no later (one starts at a window's first tick,
    /// and may hold entries due then). Above level 0, lower levels hold
    /// earlier deadlines than higher ones, so the first with anything wins.
    fn next_due(&self) -> Option<Due> {
        let window = self.elapsed >> SLOT_BITS;
        let this = level0(window);
        if let Some(due) = self.levels[this].next_due(0, self.elapsed) {
            return Some(Due { level: this, ..due });
        }
        let next = if window < LAST_WINDOW {
            let array = level0(window + 1);
            self.levels[array]
                .next_due(0, (window + 1) << SLOT_BITS)
                .map(|due| Due {
                    level: array,
                    ..due
                })
        } else {
            None
        };
        let above = (1..LEVELS).find_map(|n| self.levels[n].next_due(n, self.elapsed));
        match (next, above) {
            (Some(next), Some(above)) if next.start < above.start => Some(next),
            (next, above) => above.or(next),
        }
    }

    /// Moves part of the next window's level-1 bucket down to level 0 ahead
    /// of time, in proportion to the ticks of this window gone by, so that
    /// a bucket of many entries moves over the window's advances rather
    /// than all in the one that reaches it (that one advance would hold a
    /// caller's lock, and its thread the CPU, for as long). Whatever is left
    /// when the window turns moves then, when its bucket comes due. Entries
    /// due in the next window that are inserted during this one go straight
    /// to level 0, so the bucket only shrinks meanwhile.
    fn cascade_ahead(&mut self) {
        let window = self.elapsed >> SLOT_BITS;
        let next = window + 1;
        // The next window opens a new level-1 span: its entries are higher
        // up, mixed with the rest of the span's, and move at its start.
        if window == LAST_WINDOW || next.is_multiple_of(SLOTS as u64) {
            return;
        }
        let slot = slot_for(next << SLOT_BITS, 1);
        let left = self.levels[1].bucket(slot).len();
        if left == 0 {
            return;
        }
        if self.ahead.0 != next {
            self.ahead = (next, self.levels[1].bucket(slot).slots_len() as u32);
        }
        let ticks_left = (next << SLOT_BITS) - self.elapsed;
        let mut budget = left.div_ceil(ticks_left as usize);
        let mut pos = self.ahead.1;
        while budget > 0 && pos > 0 {
            pos -= 1;
            let Some(index) = self.levels[1].bucket(slot).index_at(pos) else {
                continue;
            };
            let emptied = self.levels[1].remove(slot, pos);
            let deadline = self.slab.get(index).deadline;
            self.link(index, deadline);
            self.stats.cascaded += 1;
            budget -= 1;
            if emptied {
                if let Some(buffer) = self.levels[1].bucket_mut(slot).take_large_buffer() {
                    self.keep_buffer(buffer);
                }
                break;
            }
        }
        self.ahead.1 = pos;
    }

    /// Puts slab entry `index` into the bucket its deadline calls for.
    fn link(&mut self, index: u32, deadline: u64) {
        let (bucket, pos) = self.place(index, deadline);
        let entry = self.slab.get_mut(index);
        entry.payload.set_bucket(bucket);
        entry.link = pos;
    }

    /// Adds slab index `index` to the bucket `deadline` calls for; returns
    /// the bucket and the position there, for the entry to record.
    #[inline]
    fn place(&mut self, index: u32, deadline: u64) -> (u16, u32) {
        let (bucket, pos) = if deadline <= self.elapsed {
            if self.due.is_full() {
                lend(&mut self.spare_buffers, &mut self.due);
            }
            (DUE, self.due.push(index))
        } else {
            let (level, slot) = Self::array_for(self.elapsed, deadline);
            let target = self.levels[level].bucket_mut(slot);
            if target.is_full() {
                lend(&mut self.spare_buffers, target);
            }
            let pos = self.levels[level].push(slot, index);
            ((level * SLOTS + slot) as u16, pos)
        };
        if pos as usize >= SLOTS {
            self.grown = true;
        }
        (bucket, pos)
    }

    /// The array and slot of an entry due at `deadline` when the time is
    /// `elapsed` (`deadline > elapsed`): level 0 for this window and the
    /// next, each in the array of its window; above, the level of the
    /// highest bit in which `deadline` and `elapsed` differ.
    #[inline]
    fn array_for(elapsed: u64, deadline: u64) -> (usize, usize) {
        let window = deadline >> SLOT_BITS;
        if window <= (elapsed >> SLOT_BITS) + 1 {
            (level0(window), slot_for(deadline, 0))
        } else {
            let level = level_for(elapsed, deadline);
            (level, slot_for(deadline, level))
        }
    }

    /// Removes an entry from the bucket and position it recorded.
    #[inline]
    fn unplace(&mut self, (bucket, pos): (u16, u32)) {
        let emptied = match locate(bucket) {
            None => self.due.remove(pos).then_some(&mut self.due),
            Some((level, slot)) => self.levels[level]
                .remove(slot, pos)
                .then(|| self.levels[level].bucket_mut(slot)),
        };
        if let Some(buffer) = emptied.and_then(Bucket::take_large_buffer) {
            self.keep_buffer(buffer);
        }
    }

    /// The largest buffer kept for reuse: four slots per pending entry. A
    /// bucket is never refilled with more entries than are pending, so a
    /// larger buffer is a burst's leftover.
    #[inline]
    fn kept_bucket_slots(&self) -> usize {
        self.slab.len() * 4
    }

    /// Keeps an emptied bucket's large buffer for the next bucket that
    /// outgrows its own, unless enough are kept or it is a burst's leftover.
    #[cold]
    fn keep_buffer(&mut self, mut buffer: Vec<u32>) {
        if self.spare_buffers.len() < SPARE_BUFFERS && buffer.capacity() <= self.kept_bucket_slots()
        {
            buffer.clear();
            self.spare_buffers.push(buffer);
        }
    }

    /// Fires slab entries already out of their buckets; returns how many.
    fn fire_all(&mut self, batch: &[u32], fire: &mut impl FnMut(u64, TimerId, T)) -> usize {
        for &index in batch {
            self.fire_one(index, fire);
        }
        batch.len()
    }

    /// Fires slab entry `index`, already out of its bucket.
    fn fire_one(&mut self, index: u32, fire: &mut impl FnMut(u64, TimerId, T)) {
        let entry = self.slab.get(index);
        let (deadline, id) = (entry.deadline, TimerId::new(index, entry.generation));
        fire(deadline, id, self.slab.remove(index));
        self.stats.fired += 1;
    }

    /// Returns the memory a burst left behind: once the wheel is empty, all
    /// pages but one and every bucket buffer; before that, once it is
    /// sparse, the pages a sweep finds empty and the empty buckets' buffers
    /// (see `slab.rs`). One comparison unless there is something to do.
    #[inline]
    fn shrink_if_sparse(&mut self) {
        if self.slab.len() >= self.slab.sweep_below() {
            return;
        }
        self.shrink();
    }

    #[cold]
    fn shrink(&mut self) {
        // A sparse wheel needs no large buffers in reserve.
        self.spare_buffers = Vec::new();
        if self.slab.len() != 0 {
            if self.slab.sweep_step() {
                for level in self.levels.iter_mut() {
                    level.shrink_empty();
                }
            }
            return;
        }
        self.slab.release_if_empty();
        if self.grown {
            for level in self.levels.iter_mut() {
                level.shrink_empty();
            }
            self.due.shrink();
            self.scratch = Vec::new();
            self.grown = false;
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for TimingWheel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimingWheel")
            .field("now", &self.elapsed)
            .field("len", &self.len())
            .field("next_expiration", &self.next_expiration())
            .finish()
    }
}
