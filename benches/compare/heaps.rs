//! The two binary-heap timers: Kafka's pre-2015 design (lazy cancel, purge
//! every 1000 cancellations) and the best a heap can do (an indexed 4-ary
//! heap with O(log n) removal).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A binary heap that leaves cancelled entries in place: they are skipped
/// when they surface, and a purge every `PURGE_EVERY` cancellations rebuilds
/// the heap without them, as `java.util.concurrent.DelayQueue` was used.
pub struct LazyHeap {
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    /// Per slot: its generation and whether it is live.
    slots: Vec<(u32, bool)>,
    free: Vec<u32>,
    cancels: u32,
}

const PURGE_EVERY: u32 = 1000;

impl LazyHeap {
    pub fn new() -> Self {
        LazyHeap {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            cancels: 0,
        }
    }

    pub fn insert(&mut self, deadline: u64) -> (u32, u32) {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push((0, false));
                (self.slots.len() - 1) as u32
            }
        };
        let entry = &mut self.slots[slot as usize];
        entry.1 = true;
        self.heap.push(Reverse((deadline, slot, entry.0)));
        (slot, entry.0)
    }

    fn release(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        entry.0 = entry.0.wrapping_add(1);
        entry.1 = false;
        self.free.push(slot);
    }

    pub fn cancel(&mut self, (slot, generation): (u32, u32)) -> bool {
        let entry = self.slots[slot as usize];
        if !entry.1 || entry.0 != generation {
            return false;
        }
        self.release(slot);
        self.cancels += 1;
        if self.cancels >= PURGE_EVERY {
            self.cancels = 0;
            let slots = &self.slots;
            self.heap
                .retain(|Reverse((_, s, g))| slots[*s as usize] == (*g, true));
        }
        true
    }

    pub fn advance(&mut self, now: u64) -> usize {
        let mut fired = 0;
        while let Some(&Reverse((deadline, slot, generation))) = self.heap.peek() {
            if deadline > now {
                break;
            }
            self.heap.pop();
            if self.slots[slot as usize] == (generation, true) {
                self.release(slot);
                fired += 1;
            }
        }
        fired
    }
}

/// An indexed 4-ary min-heap: every entry knows its position, so removal
/// and re-keying are O(log n) with no dead entries left behind.
pub struct IndexedHeap {
    /// Slab indices, heap-ordered by deadline.
    heap: Vec<u32>,
    /// Per slab slot: deadline, position in `heap`, generation.
    slots: Vec<(u64, u32, u32)>,
    free: Vec<u32>,
}

const NOT_IN_HEAP: u32 = u32::MAX;

impl IndexedHeap {
    pub fn new() -> Self {
        IndexedHeap {
            heap: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    fn key(&self, at: usize) -> u64 {
        self.slots[self.heap[at] as usize].0
    }

    fn place(&mut self, at: usize, slot: u32) {
        self.heap[at] = slot;
        self.slots[slot as usize].1 = at as u32;
    }

    fn sift_up(&mut self, mut at: usize) {
        let slot = self.heap[at];
        let key = self.slots[slot as usize].0;
        while at > 0 {
            let parent = (at - 1) / 4;
            if self.key(parent) <= key {
                break;
            }
            let moved = self.heap[parent];
            self.place(at, moved);
            at = parent;
        }
        self.place(at, slot);
    }

    fn sift_down(&mut self, mut at: usize) {
        let slot = self.heap[at];
        let key = self.slots[slot as usize].0;
        let len = self.heap.len();
        loop {
            let first = 4 * at + 1;
            if first >= len {
                break;
            }
            let mut best = first;
            for child in first + 1..(first + 4).min(len) {
                if self.key(child) < self.key(best) {
                    best = child;
                }
            }
            if self.key(best) >= key {
                break;
            }
            let moved = self.heap[best];
            self.place(at, moved);
            at = best;
        }
        self.place(at, slot);
    }

    pub fn insert(&mut self, deadline: u64) -> (u32, u32) {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push((0, NOT_IN_HEAP, 0));
                (self.slots.len() - 1) as u32
            }
        };
        self.slots[slot as usize].0 = deadline;
        self.heap.push(slot);
        self.sift_up(self.heap.len() - 1);
        (slot, self.slots[slot as usize].2)
    }

    fn take(&mut self, at: usize) {
        let slot = self.heap[at];
        let last = self.heap.pop().expect("non-empty");
        if at < self.heap.len() {
            self.place(at, last);
            self.sift_down(at);
            self.sift_up(at);
        }
        let entry = &mut self.slots[slot as usize];
        entry.1 = NOT_IN_HEAP;
        entry.2 = entry.2.wrapping_add(1);
        self.free.push(slot);
    }

    fn position(&self, (slot, generation): (u32, u32)) -> Option<usize> {
        let &(_, at, g) = self.slots.get(slot as usize)?;
        (at != NOT_IN_HEAP && g == generation).then_some(at as usize)
    }

    pub fn cancel(&mut self, handle: (u32, u32)) -> bool {
        let Some(at) = self.position(handle) else {
            return false;
        };
        self.take(at);
        true
    }

    pub fn reschedule(&mut self, handle: (u32, u32), deadline: u64) -> bool {
        let Some(at) = self.position(handle) else {
            return false;
        };
        self.slots[handle.0 as usize].0 = deadline;
        self.sift_down(at);
        let at = self.slots[handle.0 as usize].1 as usize;
        self.sift_up(at);
        true
    }

    pub fn advance(&mut self, now: u64) -> usize {
        let mut fired = 0;
        while !self.heap.is_empty() && self.key(0) <= now {
            self.take(0);
            fired += 1;
        }
        fired
    }
}
