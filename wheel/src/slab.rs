//! The arena that owns the wheel's entries: fixed-size pages, a free list
//! threaded through vacant slots, 32-bit indices.
//!
//! Pages (rather than one growing `Vec`) keep an insert from ever copying the
//! whole population, and bound the unused tail to one page. Once every entry is
//! gone, all pages but the first are released.
//!
//! A broker's wheel is seldom empty, so a burst must not leave its pages
//! behind for as long as one entry survives it. Entries cannot move (an id
//! names its slot), and the free list runs through every page, so a page
//! cannot go on its own as it empties without bookkeeping on every insert
//! and removal (a branch version that kept a free list per page made
//! `expire` at 1e6 a third slower; even one counter per removal cost 4 ns
//! there). Instead, once at most three quarters of the slots are occupied, a
//! sweep walks the pages: it frees those with nothing in them, leaving
//! holes in the page table that later growth fills first, and rebuilds the
//! free list lowest slot first. Its cost, one read of every allocated
//! slot, is paid for by the removals it waited for.
//!
//! A sweep alone frees little after a burst that doubled the population
//! and halved again: the survivors are spread over every page, and each
//! removal's slot is the next insert's (the free list is last in, first
//! out), so the high pages never empty. So a sweep also sets a **ceiling**
//! where the pages below hold the population and an eighth more: it links
//! the vacant slots below it only, and a slot vacated above it stays off
//! the free list. New entries then go below, the entries above leave as
//! they fire or are cancelled, and once the last one has gone (a count of
//! them, kept on removals above the ceiling only) the next sweep frees
//! those pages. Should the pages below fill up first, the population has
//! grown back: the ceiling goes and a sweep links the vacant slots above
//! it.
//!
//! The sweep goes a few pages per call of [`sweep_step`](Slab::sweep_step)
//! (the owner calls it on each removal and advance while one is under way),
//! so that no single call pays for the whole walk: about 0.2 ms for 100,000
//! entries in one go. Meanwhile the old free list is dropped; the pages
//! already swept serve inserts from a second, ascending list, and a slot
//! vacated in a page not yet swept stays off both lists until the sweep
//! reaches it. Whether a slot goes back on the free list is one comparison
//! per removal, with the lower of the sweep's position and the ceiling.

use crate::payload::Payload;

/// Entries per page.
const PAGE: usize = 1024;
const PAGE_BITS: u32 = 10;
/// Pages below which only an empty slab is released, never swept.
const MIN_SWEPT_PAGES: usize = 4;
/// Allocated pages a sweep walks per call.
const SWEEP_STEP: usize = 8;
/// "No index" in free-list links.
pub(crate) const NONE: u32 = u32::MAX;

/// One slot of the arena.
pub(crate) struct Entry<T> {
    pub deadline: u64,
    /// The value and the code of the bucket holding the entry (see
    /// `locate` in `wheel.rs`); vacant when the slot is.
    pub payload: Payload<T>,
    /// Moves on every time the slot is freed; see [`crate::TimerId`].
    pub generation: u32,
    /// Occupied: position in its bucket. Vacant: next free slot, or [`NONE`].
    pub link: u32,
}

impl<T> Entry<T> {
    fn vacant(generation: u32) -> Self {
        Entry {
            deadline: 0,
            payload: Payload::vacant(),
            generation,
            link: NONE,
        }
    }
}

type Page<T> = Box<[Entry<T>; PAGE]>;

pub(crate) struct Slab<T> {
    /// Fixed-size pages: the in-page index is masked to `PAGE - 1`, so the
    /// compiler drops its bounds check. `None` for a page a sweep freed
    /// (a hole), which growth takes back, lowest first, before it adds a
    /// page at the top.
    pages: Vec<Option<Page<T>>>,
    /// Pages allocated now: fewer than `pages.len()` when there are holes.
    allocated: usize,
    /// Below this many occupied slots the owner should call
    /// [`sweep_step`](Self::sweep_step) (or release, at 0).
    sweep_below: usize,
    /// Head of the free list of vacant slots below `fresh`.
    free: u32,
    /// Slots at and above this index have never been handed out since the
    /// last release.
    fresh: u32,
    len: usize,
    /// Generation given to slots of newly created pages. It is kept above
    /// every generation a released page ever had, so ids into a released page
    /// stay stale when the page comes back.
    generation_floor: u32,
    /// Where the sweep under way stops: the page count when it began.
    sweep_end: usize,
    /// The vacant slots of the pages swept so far, lowest first, and the
    /// last of them ([`NONE`]: none). Inserts take from here once the free
    /// list is empty.
    swept: (u32, u32),
    /// The first slot of the next page the sweep under way walks ([`NONE`]
    /// when none is): a slot vacated there or above is left off the free
    /// list, and the sweep links it (pages added during the sweep, above
    /// those it walks, when it ends).
    unswept: u32,
    /// The first slot of the pages being drained ([`NONE`]: none are): the
    /// sweep does not link their vacant slots, and a slot vacated there
    /// stays off the free list until a sweep frees its page.
    ceiling: u32,
    /// The lower of `unswept` and `ceiling`: a slot vacated at or above it
    /// is left off the free list. The one comparison of a removal.
    off_list_from: u32,
    /// Occupied slots above the ceiling, in pages the sweep has walked.
    above_ceiling: usize,
}

impl<T> Slab<T> {
    pub(crate) fn new() -> Self {
        Slab {
            pages: Vec::new(),
            allocated: 0,
            sweep_below: 1,
            free: NONE,
            fresh: 0,
            len: 0,
            generation_floor: 0,
            sweep_end: 0,
            swept: (NONE, NONE),
            unswept: NONE,
            ceiling: NONE,
            off_list_from: NONE,
            above_ceiling: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Takes a vacant slot for an entry about to be stored with
    /// [`fill`](Self::fill); `None` when every index up to `max_index` is
    /// taken. The two steps let the caller pick the entry's bucket (which
    /// needs the index) before the entry is written, in one go.
    #[inline]
    pub(crate) fn reserve(&mut self, max_index: u32) -> Option<u32> {
        if self.free != NONE {
            let index = self.free;
            self.free = self.get(index).link;
            return Some(index);
        }
        if self.swept.0 != NONE {
            return Some(self.take_swept());
        }
        if self.allocated < self.pages.len() {
            if let Some(index) = self.refill_hole() {
                return Some(index);
            }
        }
        if self.ceiling != NONE && self.unswept == NONE {
            return self.lift_ceiling(max_index);
        }
        let index = self.fresh;
        if index > max_index {
            return None;
        }
        if index as usize >= self.pages.len() * PAGE {
            let page = self.new_page()?;
            self.pages.push(Some(page));
        }
        self.fresh += 1;
        Some(index)
    }

    /// A page of vacant slots, counted as allocated.
    fn new_page(&mut self) -> Option<Page<T>> {
        let generation = self.generation_floor;
        // Built on the heap, not on the stack: a page of large values
        // could overflow a thread's stack. The length always matches.
        let page: Box<[Entry<T>]> = (0..PAGE).map(|_| Entry::vacant(generation)).collect();
        let page = page.try_into().ok()?;
        self.allocated += 1;
        // A sweep under way, or a drain's pages waiting to be freed, keep
        // the owner calling.
        if self.sweep_below != usize::MAX {
            self.sweep_below = self.sweep_threshold();
        }
        Some(page)
    }

    /// The pages below the ceiling are full: the population has grown back.
    /// Drops the ceiling and begins a sweep that links the vacant slots
    /// above it, then takes a slot.
    #[cold]
    fn lift_ceiling(&mut self, max_index: u32) -> Option<u32> {
        // The pages below hold no vacant slot: a sweep of those above it
        // (a few a call, as any) is enough.
        let first = self.ceiling;
        self.ceiling = NONE;
        self.above_ceiling = 0;
        self.sweep_from(first);
        self.sweep_step();
        self.reserve(max_index)
    }

    /// The first slot of the swept list.
    #[cold]
    fn take_swept(&mut self) -> u32 {
        let index = self.swept.0;
        self.swept.0 = self.get(index).link;
        if self.swept.0 == NONE {
            self.swept.1 = NONE;
        }
        index
    }

    /// Allocates the lowest page a sweep freed again; returns its first
    /// slot and puts the others on the (empty) free list, lowest first.
    /// Finding the hole walks the page table: once per page of inserts.
    /// While a sweep is under way, only a hole it has passed: one ahead of
    /// it would be walked again. Never one above the ceiling.
    #[cold]
    fn refill_hole(&mut self) -> Option<u32> {
        let below = self
            .sweeping()
            .map_or(self.pages.len(), |(next, _)| next)
            .min(self.ceiling as usize / PAGE);
        let page = self.pages[..below].iter().position(Option::is_none)?;
        let mut slots = self.new_page()?;
        let first = u32::try_from(page * PAGE).ok()?;
        for (i, entry) in slots.iter_mut().enumerate().skip(1) {
            entry.link = if i + 1 < PAGE {
                first + i as u32 + 1
            } else {
                self.free
            };
        }
        self.free = first + 1;
        self.pages[page] = Some(slots);
        Some(first)
    }

    /// The population below which a sweep may pay: three quarters of the
    /// slots, once there are enough pages for it to matter (below that, only
    /// an empty slab is worth a look). Its ceiling then leaves about a sixth
    /// of the pages or more to drain.
    fn sweep_threshold(&self) -> usize {
        if self.allocated > MIN_SWEPT_PAGES {
            self.allocated * PAGE / 4 * 3
        } else {
            1
        }
    }

    /// Below this many occupied slots the owner should call
    /// [`sweep_step`](Self::sweep_step), or
    /// [`release_if_empty`](Self::release_if_empty) at 0. One comparison on
    /// the owner's hot path; while a sweep is under way, every call is below.
    #[inline]
    pub(crate) fn sweep_below(&self) -> usize {
        self.sweep_below
    }

    /// Walks the next pages of a sweep, beginning one if none is under way;
    /// returns whether the sweep is over. A sweep frees every page with
    /// nothing in it (page 0 stays) and rebuilds the free list over the
    /// others below its ceiling, lowest slot first.
    ///
    /// Its cost, a read of every allocated slot, is paid for by removals:
    /// the owner begins one once the population is below three quarters of
    /// the slots, which took removing a quarter of them since they were
    /// allocated (a page is only added when every slot is taken), or once
    /// the last entry above the ceiling has gone. While entries above the
    /// ceiling stay (long timeouts pin their pages), the next full sweep
    /// waits for the population to fall to half the slots below it, so
    /// they are not swept over on every removal: at worst a sweep per
    /// halving. A population of less than a page finishes its sweep in one
    /// call, so that a wheel left with a few entries does not keep a
    /// burst's pages until its next call.
    #[cold]
    pub(crate) fn sweep_step(&mut self) -> bool {
        let (mut next, end) = match self.sweeping() {
            Some(sweep) => sweep,
            // Everything above the ceiling has left: only those pages need
            // a walk, which frees them, and the free list stays.
            None if self.ceiling != NONE && self.above_ceiling == 0 => {
                self.sweep_from(self.ceiling)
            }
            None => self.begin_sweep(),
        };
        let mut budget = if self.len < PAGE {
            usize::MAX
        } else {
            SWEEP_STEP
        };
        while next < end && budget > 0 {
            if self.pages[next].is_some() {
                self.sweep_page(next);
                budget -= 1;
            }
            next += 1;
        }
        if next < end {
            self.unswept = (next * PAGE) as u32;
            self.bound_free_list();
            return false;
        }
        self.finish_sweep(end);
        true
    }

    /// The sweep under way, if any: the next page it walks and where it
    /// stops.
    fn sweeping(&self) -> Option<(usize, usize)> {
        (self.unswept != NONE).then_some((self.unswept as usize / PAGE, self.sweep_end))
    }

    /// Drops the free list (the sweep links every vacant slot below its
    /// ceiling again), sets the ceiling if the population leaves pages above
    /// one, and marks every page unswept; returns the sweep's bounds.
    fn begin_sweep(&mut self) -> (usize, usize) {
        self.free = NONE;
        self.swept = (NONE, NONE);
        self.above_ceiling = 0;
        // Room below for the population and an eighth more: what it takes
        // for the entries above to be replaced below as they leave, with
        // room for the population to rise a little meanwhile.
        let below = (self.len + self.len / 8)
            .div_ceil(PAGE)
            .max(MIN_SWEPT_PAGES);
        self.ceiling = if below < self.pages.len() {
            (below * PAGE) as u32
        } else {
            NONE
        };
        self.sweep_from(0)
    }

    /// Marks the pages from slot `first` (the first of a page) on unswept;
    /// returns the sweep's bounds.
    fn sweep_from(&mut self, first: u32) -> (usize, usize) {
        let end = self.pages.len();
        self.sweep_end = end;
        self.unswept = first;
        self.bound_free_list();
        // Slots never handed out are in unswept pages too: growth goes on
        // above them.
        self.fresh = (end * PAGE) as u32;
        // Every removal and advance calls back until the sweep is over.
        self.sweep_below = usize::MAX;
        (first as usize / PAGE, end)
    }

    /// Frees page `number` if nothing is in it (page 0 stays), or else
    /// appends its vacant slots to the swept list, lowest first; above the
    /// ceiling, counts its entries instead.
    fn sweep_page(&mut self, number: usize) {
        let Some(slots) = self.pages[number].as_mut() else {
            return;
        };
        if number != 0 && slots.iter().all(|entry| entry.payload.is_vacant()) {
            let highest = slots.iter().map(|entry| entry.generation).max();
            // Raised at once: a hole the sweep has passed may be refilled
            // before it is over.
            self.generation_floor = self
                .generation_floor
                .max(highest.unwrap_or(0).wrapping_add(1));
            self.pages[number] = None;
            self.allocated -= 1;
            return;
        }
        if number * PAGE >= self.ceiling as usize {
            self.above_ceiling += slots.iter().filter(|e| !e.payload.is_vacant()).count();
            return;
        }
        let first = (number * PAGE) as u32;
        let (mut head, mut tail) = self.swept;
        let mut chain = NONE;
        let mut chain_tail = NONE;
        for (i, entry) in slots.iter_mut().enumerate().rev() {
            if entry.payload.is_vacant() {
                entry.link = chain;
                chain = first + i as u32;
                if chain_tail == NONE {
                    chain_tail = chain;
                }
            }
        }
        if chain != NONE {
            if tail == NONE {
                head = chain;
            } else {
                self.get_mut(tail).link = chain;
            }
            tail = chain_tail;
        }
        self.swept = (head, tail);
    }

    /// Ends a sweep that walked pages `..end`: the swept list, then the
    /// vacant slots of pages added meanwhile, then what was vacated in
    /// swept pages meanwhile, becomes the free list.
    fn finish_sweep(&mut self, end: usize) {
        self.unswept = NONE;
        // Pages added during the sweep: their vacated slots were left off
        // the free list too.
        for number in end..self.pages.len() {
            self.sweep_page(number);
        }
        let (head, tail) = self.swept;
        if tail != NONE {
            let vacated = self.free;
            self.get_mut(tail).link = vacated;
            self.free = head;
        }
        self.swept = (NONE, NONE);
        while matches!(self.pages.last(), Some(None)) {
            self.pages.pop();
        }
        // Every vacant slot below the ceiling is on the free list now, those
        // never handed out included.
        self.fresh = (self.pages.len() * PAGE) as u32;
        if self.ceiling as usize >= self.pages.len() * PAGE {
            self.ceiling = NONE;
        }
        self.bound_free_list();
        self.sweep_below = if self.ceiling == NONE {
            // No drain: none was needed, its pages are gone, or the
            // population grew back and lifted it. The next sweep once the
            // population is down to three quarters of the slots, not to
            // half of what it is now: after a ceiling lifted at the peak of
            // a slow spell, that would keep every page of the spell.
            self.sweep_threshold()
        } else if self.above_ceiling == 0 {
            // What was above emptied during the sweep: free it now.
            usize::MAX
        } else {
            // A drain under way: a new sweep (with a lower ceiling) once the
            // population falls to half the slots below it.
            self.ceiling as usize / 2
        };
    }

    /// Sets `off_list_from` after `unswept` or `ceiling` moved.
    fn bound_free_list(&mut self) {
        self.off_list_from = self.unswept.min(self.ceiling);
    }

    /// A slot vacated at `index` stays off the free list: its page is
    /// still to be swept, or above the ceiling. There, once walked, it is
    /// one entry fewer to wait for; after the last, the owner's next call
    /// begins the sweep that frees those pages.
    #[cold]
    fn left_off(&mut self, index: u32) {
        if index >= self.ceiling && index < self.unswept {
            self.above_ceiling -= 1;
            if self.above_ceiling == 0 && self.unswept == NONE {
                self.sweep_below = usize::MAX;
            }
        }
    }

    /// Stores an entry in the slot [`reserve`](Self::reserve) returned;
    /// returns the slot's generation.
    #[inline]
    pub(crate) fn fill(&mut self, index: u32, deadline: u64, value: T, place: (u16, u32)) -> u32 {
        self.len += 1;
        let entry = self.get_mut(index);
        entry.deadline = deadline;
        entry.payload.fill(value, place.0);
        entry.link = place.1;
        entry.generation
    }

    /// Vacates the occupied slot `index` if `generation` matches; returns
    /// its value and where it was (bucket, position), reading the entry once.
    #[inline]
    pub(crate) fn take(&mut self, index: u32, generation: u32) -> Option<(T, (u16, u32))> {
        let free = self.free;
        let entry = self.lookup_mut(index, generation)?;
        let (value, bucket) = entry.payload.take()?;
        let place = (bucket, entry.link);
        entry.generation = entry.generation.wrapping_add(1);
        entry.link = free;
        if index < self.off_list_from {
            self.free = index;
        } else {
            self.left_off(index);
        }
        self.len -= 1;
        Some((value, place))
    }

    /// Vacates an occupied slot and returns its value.
    ///
    /// The steps of [`take`](Self::take) without its checks, written twice
    /// on purpose: sharing them (through `take`, or a helper both call) made
    /// `compare --workload expire --impl wheel --quick` slower in alternating
    /// runs, 3.6-3.8 -> 3.8-4.2 ns per entry at 1e3 and 21.3-23.3 -> 22.9-24.5
    /// ns at 1e6.
    pub(crate) fn remove(&mut self, index: u32) -> T {
        let free = self.free;
        let entry = self.get_mut(index);
        let (value, _) = entry.payload.take().expect("removing a vacant slot");
        entry.generation = entry.generation.wrapping_add(1);
        entry.link = free;
        if index < self.off_list_from {
            self.free = index;
        } else {
            self.left_off(index);
        }
        self.len -= 1;
        value
    }

    /// The occupied entry at `index` if `generation` matches.
    pub(crate) fn lookup(&self, index: u32, generation: u32) -> Option<&Entry<T>> {
        let entry = self
            .pages
            .get((index >> PAGE_BITS) as usize)?
            .as_ref()?
            .get(index as usize & (PAGE - 1))?;
        (entry.generation == generation && !entry.payload.is_vacant()).then_some(entry)
    }

    /// Mutable [`lookup`](Self::lookup).
    #[inline]
    pub(crate) fn lookup_mut(&mut self, index: u32, generation: u32) -> Option<&mut Entry<T>> {
        let entry = self
            .pages
            .get_mut((index >> PAGE_BITS) as usize)?
            .as_mut()?
            .get_mut(index as usize & (PAGE - 1))?;
        (entry.generation == generation && !entry.payload.is_vacant()).then_some(entry)
    }

    /// The entry at an index known to be in an allocated page (occupied,
    /// or on the free list).
    pub(crate) fn get(&self, index: u32) -> &Entry<T> {
        let page = self.pages[(index >> PAGE_BITS) as usize].as_ref();
        &page.expect("an index into a freed page")[index as usize & (PAGE - 1)]
    }

    /// Mutable [`get`](Self::get).
    pub(crate) fn get_mut(&mut self, index: u32) -> &mut Entry<T> {
        let page = self.pages[(index >> PAGE_BITS) as usize].as_mut();
        &mut page.expect("an index into a freed page")[index as usize & (PAGE - 1)]
    }

    /// When the slab is empty, frees every page but the first.
    pub(crate) fn release_if_empty(&mut self) -> bool {
        if self.len != 0 || self.pages.len() <= 1 {
            return false;
        }
        let highest = self.pages[1..]
            .iter()
            .flatten()
            .flat_map(|page| page.iter())
            .map(|entry| entry.generation)
            .max()
            .unwrap_or(0);
        self.generation_floor = self.generation_floor.max(highest.wrapping_add(1));
        // A sweep under way ends here: nothing is left to link, nor to
        // drain.
        self.swept = (NONE, NONE);
        self.unswept = NONE;
        self.ceiling = NONE;
        self.bound_free_list();
        self.above_ceiling = 0;
        self.pages.truncate(1);
        // The page table itself grew with the peak (a pointer a page: 128 KB
        // of capacity after 1e7 entries); give that back too.
        self.pages.shrink_to_fit();
        // Rebuild the free list over page 0 only: the old one runs through
        // released pages.
        self.free = NONE;
        self.fresh = 0;
        self.allocated = 1;
        self.sweep_below = self.sweep_threshold();
        true
    }

    /// Bytes of entry memory allocated.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.allocated * PAGE * std::mem::size_of::<Entry<T>>()
            + self.pages.capacity() * std::mem::size_of::<Option<Page<T>>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl<T> Slab<T> {
        fn insert(&mut self, deadline: u64, value: T, max_index: u32) -> Option<(u32, u32)> {
            let index = self.reserve(max_index)?;
            Some((index, self.fill(index, deadline, value, (0, 0))))
        }
    }

    #[test]
    fn a_u64_entry_takes_half_a_cache_line() {
        assert_eq!(std::mem::size_of::<Entry<u64>>(), 32);
    }

    #[test]
    fn take_checks_the_generation_and_reports_the_place() {
        let mut slab = Slab::new();
        let index = slab.reserve(NONE - 1).unwrap();
        let generation = slab.fill(index, 7, "x", (3, 9));
        assert!(slab.take(index, generation.wrapping_add(1)).is_none());
        assert!(slab.take(index + 5000, generation).is_none());
        assert_eq!(slab.take(index, generation), Some(("x", (3, 9))));
        assert!(slab.take(index, generation).is_none(), "stale after take");
        assert_eq!(slab.len(), 0);
    }

    #[test]
    fn reserve_refuses_beyond_the_largest_index() {
        let mut slab: Slab<u8> = Slab::new();
        assert_eq!(slab.reserve(0), Some(0));
        assert_eq!(slab.reserve(0), None);
    }

    #[test]
    fn reuses_freed_slots_with_a_new_generation() {
        let mut slab = Slab::new();
        let (a, ga) = slab.insert(5, "a", NONE - 1).unwrap();
        assert_eq!(slab.remove(a), "a");
        let (b, gb) = slab.insert(6, "b", NONE - 1).unwrap();
        assert_eq!(a, b);
        assert_ne!(ga, gb);
        assert!(slab.lookup(a, ga).is_none());
        assert_eq!(slab.lookup(b, gb).unwrap().deadline, 6);
    }

    /// As the wheel drives it: a sweep step whenever the population is
    /// below the threshold.
    fn after_removal(slab: &mut Slab<u64>) {
        if slab.len() < slab.sweep_below() && slab.len() != 0 {
            slab.sweep_step();
        }
    }

    #[test]
    fn a_sweep_spread_over_calls_hands_no_slot_out_twice_and_frees_empty_pages() {
        let mut slab = Slab::new();
        let mut live: std::collections::HashMap<u32, (u32, u64)> = Default::default();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut value = 0u64;
        let mut insert = |slab: &mut Slab<u64>, live: &mut std::collections::HashMap<_, _>| {
            value += 1;
            let (index, generation) = slab.insert(value, value, NONE - 1).unwrap();
            assert!(
                live.insert(index, (generation, value)).is_none(),
                "slot {index} handed out twice"
            );
        };
        for _ in 0..40 * PAGE {
            insert(&mut slab, &mut live);
        }
        let peak = slab.allocated;
        let mut sweeps_seen = 0;
        // Mostly removals, with inserts between them: the population falls
        // through several sweeps, each walked over many calls.
        for round in 0..300_000 {
            if live.is_empty() {
                break;
            }
            if next() % 4 == 0 && round < 200_000 {
                insert(&mut slab, &mut live);
            } else {
                let keys: Vec<u32> = live
                    .keys()
                    .take(1 + (next() % 8) as usize)
                    .copied()
                    .collect();
                let index = keys[(next() % keys.len() as u64) as usize];
                let (generation, value) = live.remove(&index).unwrap();
                assert_eq!(slab.take(index, generation).map(|(v, _)| v), Some(value));
                assert!(slab.lookup(index, generation).is_none());
            }
            sweeps_seen += usize::from(slab.sweeping().is_some());
            after_removal(&mut slab);
            assert_eq!(slab.len(), live.len());
        }
        assert!(sweeps_seen > 0, "no sweep was under way at any step");
        for (&index, &(generation, value)) in &live {
            assert_eq!(
                slab.lookup(index, generation).map(|e| e.deadline),
                Some(value)
            );
        }
        // Emptied: every page but the first goes.
        let left: Vec<_> = live.drain().collect();
        for (index, (generation, _)) in left {
            slab.take(index, generation).unwrap();
            after_removal(&mut slab);
        }
        assert!(slab.release_if_empty() || slab.pages.len() <= 1);
        assert!(
            slab.allocated <= 1,
            "{} of {peak} pages kept",
            slab.allocated
        );
        assert!(slab.sweeping().is_none());
    }

    #[test]
    fn slots_vacated_ahead_of_a_sweep_are_linked_once() {
        let mut slab = Slab::new();
        let mut live: std::collections::HashMap<u32, u32> = Default::default();
        let insert = |slab: &mut Slab<u64>, live: &mut std::collections::HashMap<u32, u32>| {
            let (index, generation) = slab.insert(0, 0, NONE - 1).unwrap();
            assert!(
                live.insert(index, generation).is_none(),
                "slot {index} handed out twice"
            );
        };
        for _ in 0..40 * PAGE {
            insert(&mut slab, &mut live);
        }
        // One entry stays in each of pages 0..30, 700 in each of 30..40:
        // below a quarter, so a sweep begins, and it goes a few pages a call.
        let doomed: Vec<u32> = (0..40 * PAGE as u32)
            .filter(|&i| {
                let (page, slot) = (i as usize / PAGE, i as usize % PAGE);
                if page < 30 {
                    slot != 0
                } else {
                    slot >= 700
                }
            })
            .collect();
        for index in doomed {
            let generation = live.remove(&index).unwrap();
            slab.take(index, generation).unwrap();
            after_removal(&mut slab);
            if slab.sweeping().is_some() {
                break;
            }
        }
        let (next, end) = slab.sweeping().expect("a sweep under way");
        assert!(next < end);
        // Vacate slots in the pages it has yet to reach, and insert as
        // many, while it goes on.
        let ahead: Vec<u32> = ((next * PAGE) as u32..(end * PAGE) as u32)
            .filter(|i| live.contains_key(i))
            .collect();
        let mut ahead = ahead.into_iter();
        // Enough inserts to use up the swept pages' slots, so that pages are
        // added above those the sweep walks; half of what lands there goes
        // again before the sweep ends.
        let above = (end * PAGE) as u32;
        for _ in 0..end {
            if slab.sweeping().is_none() {
                break;
            }
            for _ in 0..50 {
                let Some(index) = ahead.next() else { break };
                let generation = live.remove(&index).unwrap();
                slab.take(index, generation).unwrap();
            }
            // The sweep may reach those slots now: they must be on no list.
            slab.sweep_step();
            for _ in 0..12_000 {
                insert(&mut slab, &mut live);
            }
            let added: Vec<u32> = live
                .keys()
                .filter(|&&i| i >= above)
                .step_by(2)
                .copied()
                .collect();
            for index in added {
                let generation = live.remove(&index).unwrap();
                slab.take(index, generation).unwrap();
            }
        }
        assert!(
            slab.sweeping().is_none(),
            "the sweep went a page or more a call"
        );
        assert!(slab.pages.len() > end, "pages were added during the sweep");
        // Everything vacant is on the free list exactly once: filling the
        // slab takes each slot once.
        let fill = slab.pages.len() * PAGE - live.len();
        for _ in 0..fill {
            insert(&mut slab, &mut live);
        }
        assert_eq!(slab.len(), live.len());
    }

    #[test]
    fn a_sweep_under_way_frees_what_it_reaches_and_keeps_pinned_pages() {
        let mut slab = Slab::new();
        let ids: Vec<_> = (0..20 * PAGE as u64)
            .map(|i| slab.insert(i, i, NONE - 1).unwrap())
            .collect();
        // One entry stays in every fourth page; the rest go.
        for (i, &(index, generation)) in ids.iter().enumerate() {
            if i % (4 * PAGE) != 0 {
                slab.take(index, generation).unwrap();
                after_removal(&mut slab);
            }
        }
        // Calls until the sweep is over (the owner's next removals or
        // advances would make them).
        while slab.sweeping().is_some() {
            slab.sweep_step();
        }
        assert_eq!(slab.len(), 5);
        assert!(slab.allocated < 10, "{} pages kept", slab.allocated);
        // One more sweep, walked to its end, leaves only the five pinned
        // pages (page 0 among them); the removals since the last went to
        // the free list's head, and now new entries pack low.
        while !slab.sweep_step() {}
        assert_eq!(slab.allocated, 5);
        let (low, _) = slab.insert(1, 1, NONE - 1).unwrap();
        assert_eq!(low, 1);
    }

    /// A xorshift step of `state`: a number below `n`.
    fn below(state: &mut u64, n: usize) -> usize {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        (*state % n as u64) as usize
    }

    /// Checks every live entry against the slab, and that no slot is
    /// handed out twice.
    struct Model {
        live: std::collections::HashMap<u32, (u32, u64)>,
        order: std::collections::VecDeque<u32>,
        value: u64,
    }

    impl Model {
        fn new() -> Self {
            Model {
                live: Default::default(),
                order: Default::default(),
                value: 0,
            }
        }

        fn insert(&mut self, slab: &mut Slab<u64>) {
            self.value += 1;
            let (index, generation) = slab.insert(self.value, self.value, NONE - 1).unwrap();
            let old = self.live.insert(index, (generation, self.value));
            assert!(old.is_none(), "slot {index} handed out twice");
            self.order.push_back(index);
        }

        /// `n` inserts; while a sweep runs, the owner's call after each.
        fn insert_sweeping(&mut self, slab: &mut Slab<u64>, n: usize) {
            for _ in 0..n {
                self.insert(slab);
                if slab.sweeping().is_some() {
                    slab.sweep_step();
                }
            }
        }

        /// Removes the entry at slot `index` (already out of `order`); the
        /// owner then calls back as the wheel does.
        fn remove(&mut self, slab: &mut Slab<u64>, index: u32) {
            let (generation, value) = self.live.remove(&index).unwrap();
            assert_eq!(slab.take(index, generation).map(|(v, _)| v), Some(value));
            if slab.len() < slab.sweep_below() && slab.len() != 0 {
                slab.sweep_step();
            }
            assert_eq!(slab.len(), self.live.len());
        }

        /// Removes the oldest entry, as a wheel's deadlines would.
        fn remove_oldest(&mut self, slab: &mut Slab<u64>) {
            let index = self.order.pop_front().unwrap();
            self.remove(slab, index);
        }

        /// Removes one of the `among` oldest entries, picked at random.
        fn remove_among_oldest(&mut self, slab: &mut Slab<u64>, rand: &mut u64, among: usize) {
            let at = below(rand, self.order.len().min(among));
            self.order.swap(0, at);
            self.remove_oldest(slab);
        }

        /// `n` inserts, each followed by the removal of the oldest entry.
        fn turn_over(&mut self, slab: &mut Slab<u64>, n: usize) {
            for _ in 0..n {
                self.insert(slab);
                self.remove_oldest(slab);
            }
        }

        /// Falls to `population` entries, oldest first, then turns over
        /// `n`; checks every entry and returns the pages the slab keeps.
        fn settle(&mut self, slab: &mut Slab<u64>, population: usize, n: usize) -> usize {
            while self.live.len() > population {
                self.remove_oldest(slab);
            }
            self.turn_over(slab, n);
            self.check(slab);
            slab.allocated
        }

        fn check(&self, slab: &Slab<u64>) {
            for (&index, &(generation, value)) in &self.live {
                let found = slab.lookup(index, generation).map(|e| e.deadline);
                assert_eq!(found, Some(value), "slot {index}");
            }
        }
    }

    #[test]
    fn pages_a_doubled_population_took_go_back_once_it_halves() {
        let mut slab = Slab::new();
        let mut model = Model::new();
        let steady = 20 * PAGE;
        // A slow spell: the population doubles, then turns over.
        model.insert_sweeping(&mut slab, 2 * steady);
        model.turn_over(&mut slab, 3 * steady);
        let peak = slab.allocated;
        assert!(peak >= 40, "{peak} pages at the peak");
        // Back to the steady population, which turns over twice: the entries
        // above the ceiling leave, and their pages with them.
        let kept = model.settle(&mut slab, steady, 2 * steady);
        // A sweep leaves room for an eighth more than the population, and
        // the next waits for three quarters: at most a third more, in all.
        assert!(
            kept <= 27,
            "{kept} of {peak} pages kept for {steady} entries"
        );
    }

    #[test]
    fn pages_go_back_after_a_spell_in_which_a_ceiling_was_lifted() {
        let mut slab = Slab::new();
        let mut model = Model::new();
        let steady = 20 * PAGE;
        model.insert_sweeping(&mut slab, 2 * steady);
        // In the spell the population dips below three quarters (a late
        // expiry's burst, spread over every page), which sets a ceiling, and
        // comes back, which lifts it.
        let mut rand = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..steady * 9 / 10 {
            model.remove_among_oldest(&mut slab, &mut rand, usize::MAX);
        }
        let mut set = false;
        for _ in 0..steady * 9 / 10 - 2 * PAGE {
            model.insert(&mut slab);
            set |= slab.ceiling != NONE;
        }
        assert!(set && slab.ceiling == NONE, "no ceiling set and lifted");
        // The rest of the spell fits in the pages there are.
        model.remove_oldest(&mut slab);
        model.turn_over(&mut slab, steady - 1);
        model.insert(&mut slab);
        let peak = slab.allocated;
        // After the spell: 22 pages' worth, more than half the population
        // when the ceiling was lifted, turning over.
        let kept = model.settle(&mut slab, 22 * PAGE, 4 * steady);
        assert!(
            kept <= 29,
            "{kept} of {peak} pages kept for 22 pages' worth"
        );
    }

    #[test]
    fn a_population_that_grows_back_lifts_the_ceiling_and_loses_no_slot() {
        let mut slab = Slab::new();
        let mut model = Model::new();
        model.insert_sweeping(&mut slab, 40 * PAGE);
        // Every other entry goes: a ceiling is set over half the pages.
        let mut kept = std::collections::VecDeque::new();
        while let Some(index) = model.order.pop_front() {
            if index % 2 == 0 {
                model.remove(&mut slab, index);
            } else {
                kept.push_back(index);
            }
        }
        model.order = kept;
        while slab.sweeping().is_some() {
            slab.sweep_step();
        }
        assert_ne!(slab.ceiling, NONE, "no ceiling over {} entries", slab.len());
        let pages = slab.pages.len();
        // Entries leave from above the ceiling too, their slots off the list.
        for _ in 0..PAGE {
            model.remove_oldest(&mut slab);
        }
        // Fill every vacant slot, with the owner's calls while a sweep runs:
        // the ones above the ceiling come back, so no page is added.
        let vacant = pages * PAGE - slab.len();
        model.insert_sweeping(&mut slab, vacant);
        assert_eq!(slab.ceiling, NONE);
        assert_eq!(slab.pages.len(), pages, "pages added with slots vacant");
        assert_eq!(slab.len(), pages * PAGE);
        model.check(&slab);
    }

    #[test]
    fn populations_that_rise_and_fall_at_random_keep_every_entry() {
        // Drains begun, lifted, finished and begun again under them, with
        // entries leaving in any order.
        let mut slab = Slab::new();
        let mut model = Model::new();
        let mut rand = 0x9E37_79B9_7F4A_7C15u64;
        let (mut ceilings, mut lifts) = (0, 0);
        for _ in 0..12 {
            let target = PAGE * (2 + below(&mut rand, 40));
            while model.live.len() != target {
                let had_ceiling = slab.ceiling != NONE && slab.sweeping().is_none();
                if model.live.len() < target && below(&mut rand, 4) != 0 {
                    model.insert(&mut slab);
                    lifts += usize::from(had_ceiling && slab.ceiling == NONE);
                } else if !model.live.is_empty() {
                    // From the oldest few, so that old pages drain.
                    model.remove_among_oldest(&mut slab, &mut rand, 64);
                }
                ceilings += usize::from(slab.ceiling != NONE && slab.sweeping().is_some());
            }
            model.check(&slab);
        }
        assert!(
            ceilings > 0 && lifts > 0,
            "{ceilings} steps under a ceiling, {lifts} lifts"
        );
        // Every vacant slot is reachable once: filling what is allocated,
        // with the owner's calls while a sweep runs, adds at most a page.
        while slab.sweeping().is_some() {
            slab.sweep_step();
        }
        let pages = slab.pages.len();
        let vacant = pages * PAGE - slab.len();
        model.insert_sweeping(&mut slab, vacant);
        assert!(
            slab.pages.len() <= pages + 1,
            "{} pages after {pages}",
            slab.pages.len()
        );
        model.check(&slab);
    }

    #[test]
    fn released_pages_come_back_with_fresh_generations() {
        let mut slab = Slab::new();
        let ids: Vec<_> = (0..3000)
            .map(|i| slab.insert(i, i, NONE - 1).unwrap())
            .collect();
        for &(index, _) in &ids {
            slab.remove(index);
        }
        assert!(slab.release_if_empty());
        assert_eq!(slab.pages.len(), 1);
        let again: Vec<_> = (0..3000)
            .map(|i| slab.insert(i, i, NONE - 1).unwrap())
            .collect();
        for (&(index, old), &(index2, new)) in ids.iter().zip(&again) {
            assert_eq!(index, index2);
            assert_ne!(old, new, "slot {index} reissued an old generation");
            assert!(slab.lookup(index, old).is_none());
        }
    }
}
