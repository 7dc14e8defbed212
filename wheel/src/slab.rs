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
//! there). Instead, once at most a quarter of the slots are occupied, one
//! [`sweep`](Slab::sweep) walks the pages: it frees those with nothing in
//! them, leaving holes in the page table that later growth fills first,
//! and rebuilds the free list lowest slot first, so that new entries pack
//! into the low pages and the high ones can drain. Its cost, one read of
//! every allocated slot, is paid for by the removals it waited for.

use crate::payload::Payload;

/// Entries per page.
const PAGE: usize = 1024;
const PAGE_BITS: u32 = 10;
/// Pages below which only an empty slab is released, never swept.
const MIN_SWEPT_PAGES: usize = 4;
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
    /// [`sweep`](Self::sweep) (or release, at 0).
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
        if self.allocated < self.pages.len() {
            return self.refill_hole();
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
        self.sweep_below = self.sweep_threshold();
        Some(page)
    }

    /// Allocates the lowest page a sweep freed again; returns its first
    /// slot and puts the others on the (empty) free list, lowest first.
    /// Finding the hole walks the page table: once per page of inserts.
    #[cold]
    fn refill_hole(&mut self) -> Option<u32> {
        let page = self.pages.iter().position(Option::is_none)?;
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

    /// The population below which a sweep may pay: a quarter of the slots,
    /// once there are enough pages for it to matter (below that, only an
    /// empty slab is worth a look).
    fn sweep_threshold(&self) -> usize {
        if self.allocated > MIN_SWEPT_PAGES {
            self.allocated * PAGE / 4
        } else {
            1
        }
    }

    /// Below this many occupied slots the owner should call
    /// [`sweep`](Self::sweep), or [`release_if_empty`](Self::release_if_empty)
    /// at 0. One comparison on the owner's hot path.
    #[inline]
    pub(crate) fn sweep_below(&self) -> usize {
        self.sweep_below
    }

    /// Frees every page with nothing in it (page 0 stays) and rebuilds the
    /// free list over the others, lowest slot first.
    ///
    /// Its cost, a read of every allocated slot, is paid for by removals:
    /// the owner calls it once the population is below a quarter of the
    /// slots, which took removing three quarters of them since they were
    /// allocated (a page is only added when every slot is taken). Afterwards
    /// the next sweep also waits for the population to halve, so entries
    /// that pin many pages are not swept over on every removal; at worst
    /// (each sweep freeing nothing) that is a sweep per halving.
    #[cold]
    pub(crate) fn sweep(&mut self) {
        let mut free = NONE;
        let mut floor = self.generation_floor;
        for number in (0..self.pages.len()).rev() {
            let Some(slots) = self.pages[number].as_mut() else {
                continue;
            };
            if number != 0 && slots.iter().all(|entry| entry.payload.is_vacant()) {
                let highest = slots.iter().map(|entry| entry.generation).max();
                floor = floor.max(highest.unwrap_or(0).wrapping_add(1));
                self.pages[number] = None;
                self.allocated -= 1;
                continue;
            }
            let first = (number * PAGE) as u32;
            for (i, entry) in slots.iter_mut().enumerate().rev() {
                if entry.payload.is_vacant() {
                    entry.link = free;
                    free = first + i as u32;
                }
            }
        }
        self.generation_floor = floor;
        self.free = free;
        while matches!(self.pages.last(), Some(None)) {
            self.pages.pop();
        }
        // Every vacant slot is on the free list now, those never handed
        // out included.
        self.fresh = (self.pages.len() * PAGE) as u32;
        self.sweep_below = self.sweep_threshold().min(self.len / 2).max(1);
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
        self.free = index;
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
        self.free = index;
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
