//! A lane: a FIFO timer for entries whose deadlines arrive in order.
//!
//! Most delayed operations of a broker share a handful of timeouts
//! (`request.timeout.ms`, `fetch.max.wait.ms`). Entries of one timeout are
//! inserted as time goes on, so their deadlines arrive sorted: an array
//! filled at its tail and emptied at its head keeps them in deadline order
//! with no buckets and no cascading. An insert writes the next slot, a
//! cancel clears its slot where it stands, and expiry walks slots in the
//! order they were written.
//!
//! The array is a queue of fixed-size chunks. A cleared slot stays until the
//! head passes it; a chunk whose entries were all cancelled is freed at
//! once, wherever it is, so what finished work holds is at most one chunk
//! per entry still pending, as a slab page in the wheel.

use crate::error::PushError;
use std::collections::VecDeque;

/// Slots per chunk: 4 KiB of 16-byte slots for a pointer-sized value (6 KiB
/// for a `u64`, whose `Option` takes a tag word).
const CHUNK: u32 = 256;

/// A lane refuses entries past this many positions from its head, so that
/// positions compared with wrapping arithmetic never alias.
const MAX_SPAN: u32 = 1 << 30;

struct Slot<T> {
    deadline: u64,
    value: Option<T>,
}

struct Chunk<T> {
    /// Slots of this chunk holding a value.
    live: u32,
    slots: [Slot<T>; CHUNK as usize],
}

impl<T> Chunk<T> {
    fn new() -> Box<Self> {
        Box::new(Chunk {
            live: 0,
            slots: std::array::from_fn(|_| Slot {
                deadline: 0,
                value: None,
            }),
        })
    }
}

/// A FIFO timer for values whose deadlines are inserted in non-decreasing
/// order: O(1) insert, cancel and expiry, each touching one slot. (A
/// cancel or expiry at the head also steps over the cleared slots behind
/// it, each once in its life, and over a freed chunk in one step: O(1)
/// amortised.)
///
/// Positions (the ids [`push`](Self::push) returns) are 32-bit and wrap; an
/// old position could only alias a new entry after 2^32 more pushes while
/// it was kept, as a [`TimerId`](crate::TimerId)'s generation could.
///
/// # Example
/// ```
/// use timing_wheel::{Lane, PushError};
///
/// let mut lane = Lane::new();
/// let a = lane.push(100, "a").unwrap();
/// let b = lane.push(105, "b").unwrap();
/// assert_eq!(lane.push(90, "late"), Err(PushError::OutOfOrder("late")));
/// assert_eq!(lane.cancel(a), Some("a"));
/// assert_eq!(lane.next_expiration(), Some(105));
/// let mut fired = Vec::new();
/// lane.advance(110, |_, v| fired.push(v));
/// assert_eq!(fired, ["b"]);
/// assert_eq!(lane.cancel(b), None);
/// ```
pub struct Lane<T> {
    /// `chunks[0]` starts at position `base`; `None` is a chunk freed because
    /// every entry in it was cancelled.
    chunks: VecDeque<Option<Box<Chunk<T>>>>,
    base: u32,
    /// The first position that may hold a value (it does, unless the lane
    /// is empty: see `settle`).
    head: u32,
    /// The position the next push writes.
    tail: u32,
    len: usize,
    /// The deadline of the last push: the next may not be earlier while
    /// the lane holds anything.
    last_deadline: u64,
    /// One emptied chunk kept for the next push, so a lane in steady use
    /// does not allocate.
    spare: Option<Box<Chunk<T>>>,
}

impl<T> Default for Lane<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Lane<T> {
    /// An empty lane.
    pub fn new() -> Self {
        Self::first_position(0)
    }

    /// An empty lane whose first push gets `position` (tests start near
    /// the wrap-around).
    fn first_position(position: u32) -> Self {
        Lane {
            chunks: VecDeque::new(),
            base: position,
            head: position,
            tail: position,
            len: 0,
            last_deadline: 0,
            spare: None,
        }
    }

    /// Entries pending.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether [`push`](Self::push) would take `deadline`: the lane is
    /// empty, or the deadline is not earlier than the last one pushed.
    pub fn accepts(&self, deadline: u64) -> bool {
        self.len == 0 || deadline >= self.last_deadline
    }

    /// Adds `value`, due at `deadline`, and returns its position.
    ///
    /// # Errors
    /// [`PushError::OutOfOrder`] if `deadline` is earlier than the last
    /// push's while the lane holds entries (put it in a
    /// [`TimingWheel`](crate::TimingWheel)); [`PushError::Full`] if the lane
    /// spans 2^30 positions from its oldest pending entry. Either hands
    /// `value` back.
    #[inline]
    pub fn push(&mut self, deadline: u64, value: T) -> Result<u32, PushError<T>> {
        if !self.accepts(deadline) {
            return Err(PushError::OutOfOrder(value));
        }
        let offset = self.tail.wrapping_sub(self.base);
        if offset >= MAX_SPAN {
            return Err(PushError::Full(value));
        }
        if offset == self.chunks.len() as u32 * CHUNK {
            self.chunks.push_back(self.spare.take());
        }
        // Present unless just pushed without a spare: a chunk is freed only
        // once every slot it has was written and then cleared, which the
        // tail's chunk never is.
        let chunk = self.chunks[(offset / CHUNK) as usize].get_or_insert_with(Chunk::new);
        chunk.slots[(offset % CHUNK) as usize] = Slot {
            deadline,
            value: Some(value),
        };
        chunk.live += 1;
        self.last_deadline = deadline;
        self.len += 1;
        let position = self.tail;
        self.tail = self.tail.wrapping_add(1);
        Ok(position)
    }

    /// Removes the entry at `position` and returns its value; `None` if it
    /// fired, was cancelled, or never was.
    #[inline]
    pub fn cancel(&mut self, position: u32) -> Option<T> {
        let offset = self.offset_of(position)?;
        let index = (offset / CHUNK) as usize;
        let chunk = self.chunks[index].as_mut()?;
        let value = chunk.slots[(offset % CHUNK) as usize].value.take()?;
        chunk.live -= 1;
        self.len -= 1;
        let written = offset - offset % CHUNK + CHUNK <= self.tail.wrapping_sub(self.base);
        if chunk.live == 0 && written {
            // Nothing can land in it again: free it now, not when the head
            // gets there.
            let chunk = self.chunks[index].take();
            self.keep_spare(chunk);
        }
        if position == self.head {
            self.settle();
        }
        Some(value)
    }

    /// Where the entry at `position` is stored, for a caller that wants to
    /// prefetch it before cancelling; `None` if it is not pending.
    pub fn address(&self, position: u32) -> Option<*const ()> {
        let offset = self.offset_of(position)?;
        let chunk = self.chunks[(offset / CHUNK) as usize].as_ref()?;
        Some(&chunk.slots[(offset % CHUNK) as usize] as *const Slot<T> as *const ())
    }

    /// The deadline of the entry at `position`, if it is pending.
    pub fn deadline(&self, position: u32) -> Option<u64> {
        let offset = self.offset_of(position)?;
        let chunk = self.chunks[(offset / CHUNK) as usize].as_ref()?;
        let slot = &chunk.slots[(offset % CHUNK) as usize];
        slot.value.as_ref().map(|_| slot.deadline)
    }

    /// The earliest pending deadline.
    pub fn next_expiration(&self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        let offset = self.head.wrapping_sub(self.base);
        let chunk = self.chunks[(offset / CHUNK) as usize].as_ref()?;
        Some(chunk.slots[(offset % CHUNK) as usize].deadline)
    }

    /// Hands every entry due at or before `now` to `fire` with its position,
    /// in deadline order (and push order within a deadline). Returns how
    /// many fired.
    pub fn advance(&mut self, now: u64, mut fire: impl FnMut(u32, T)) -> usize {
        self.advance_timed(now, |_, position, value| fire(position, value))
    }

    /// [`advance`](Self::advance), handing `fire` each entry's deadline as
    /// well.
    pub fn advance_timed(&mut self, now: u64, mut fire: impl FnMut(u64, u32, T)) -> usize {
        let mut fired = 0;
        while self.len > 0 {
            let offset = self.head.wrapping_sub(self.base);
            let index = (offset / CHUNK) as usize;
            // `settle` leaves the head on a value.
            let Some(chunk) = self.chunks[index].as_mut() else {
                break;
            };
            let slot = &mut chunk.slots[(offset % CHUNK) as usize];
            if slot.deadline > now {
                break;
            }
            let Some(value) = slot.value.take() else {
                break;
            };
            chunk.live -= 1;
            self.len -= 1;
            fire(slot.deadline, self.head, value);
            fired += 1;
            self.settle();
        }
        fired
    }

    /// Removes every entry and returns them with their positions, in order.
    pub fn drain(&mut self) -> Vec<(u32, T)> {
        let mut all = Vec::with_capacity(self.len);
        self.advance(u64::MAX, |position, value| all.push((position, value)));
        all
    }

    /// Bytes this lane has allocated, not counting what `T` points to.
    pub fn allocated_bytes(&self) -> usize {
        let chunk = std::mem::size_of::<Chunk<T>>();
        let held = self.chunks.iter().flatten().count() + usize::from(self.spare.is_some());
        std::mem::size_of::<Self>()
            + self.chunks.capacity() * std::mem::size_of::<Option<Box<Chunk<T>>>>()
            + held * chunk
    }

    /// `position`'s distance from `base`, if it lies between head and tail.
    #[inline]
    fn offset_of(&self, position: u32) -> Option<u32> {
        let from_head = position.wrapping_sub(self.head);
        (from_head < self.tail.wrapping_sub(self.head)).then(|| position.wrapping_sub(self.base))
    }

    /// Moves the head past cleared slots and freed chunks to the next value
    /// (or the tail), and frees the chunks it leaves behind. Each slot is
    /// passed once, so this is O(1) amortised over the pushes.
    fn settle(&mut self) {
        loop {
            let offset = self.head.wrapping_sub(self.base);
            if offset >= CHUNK {
                // The head left the first chunk: it is empty.
                let chunk = self.chunks.pop_front().flatten();
                self.keep_spare(chunk);
                self.base = self.base.wrapping_add(CHUNK);
                // A lane that held a burst gives back the room it took to
                // list the burst's chunks.
                if self.chunks.capacity() > 64 && self.chunks.len() * 4 < self.chunks.capacity() {
                    self.chunks.shrink_to(self.chunks.len() * 2);
                }
                continue;
            }
            if self.head == self.tail {
                break;
            }
            match self.chunks[0].as_ref() {
                // A freed chunk was written to its end, so this stays
                // within the tail.
                None => self.head = self.head.wrapping_add(CHUNK - offset),
                Some(chunk) if chunk.slots[offset as usize].value.is_none() => {
                    self.head = self.head.wrapping_add(1)
                }
                Some(_) => break,
            }
        }
    }

    /// Keeps a freed chunk (every slot cleared, `live` 0) as the spare if
    /// there is none; otherwise it is dropped.
    fn keep_spare(&mut self, chunk: Option<Box<Chunk<T>>>) {
        if self.spare.is_none() {
            self.spare = chunk;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Debug, Clone)]
    enum Op {
        /// Push at the last deadline plus this (minus, when negative).
        Push(i64),
        Cancel(usize),
        Advance(u64),
        Drain,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (-3i64..20).prop_map(Op::Push),
            5 => any::<usize>().prop_map(Op::Cancel),
            2 => (0u64..400).prop_map(Op::Advance),
            1 => Just(Op::Drain),
        ]
    }

    /// Runs `ops` on a lane and on a map keyed by (deadline, push order),
    /// and compares everything observable after each step.
    fn run(ops: &[Op], first: u32) -> Result<(), TestCaseError> {
        let mut lane = Lane::first_position(first);
        let mut model: BTreeMap<(u64, u64), (u32, u64)> = BTreeMap::new();
        let mut issued: Vec<(u32, (u64, u64))> = Vec::new();
        let (mut last, mut now, mut order) = (0u64, 0u64, 0u64);
        for op in ops {
            match *op {
                Op::Push(step) => {
                    let deadline = last.saturating_add_signed(step).max(now);
                    let value = order;
                    match lane.push(deadline, value) {
                        Ok(position) => {
                            prop_assert!(model.is_empty() || deadline >= last);
                            prop_assert!(issued.iter().all(|&(p, _)| p != position));
                            model.insert((deadline, order), (position, value));
                            issued.push((position, (deadline, order)));
                            last = deadline;
                        }
                        Err(PushError::OutOfOrder(v)) => {
                            prop_assert_eq!(v, value);
                            prop_assert!(!model.is_empty() && deadline < last);
                        }
                        Err(PushError::Full(_)) => prop_assert!(false, "full"),
                    }
                    order += 1;
                }
                Op::Cancel(pick) if !issued.is_empty() => {
                    let (position, key) = issued[pick % issued.len()];
                    let expected = model.remove(&key).map(|(_, v)| v);
                    prop_assert_eq!(lane.deadline(position).is_some(), expected.is_some());
                    prop_assert_eq!(lane.cancel(position), expected);
                }
                Op::Cancel(_) => {}
                Op::Advance(by) => {
                    now += by;
                    let mut fired = Vec::new();
                    let count = lane.advance(now, |p, v| fired.push((p, v)));
                    let due: Vec<_> = model.range(..(now + 1, 0)).map(|(_, &e)| e).collect();
                    model.retain(|&(deadline, _), _| deadline > now);
                    prop_assert_eq!(count, due.len());
                    prop_assert_eq!(fired, due);
                }
                Op::Drain => {
                    let all: Vec<_> = model.values().copied().collect();
                    model.clear();
                    prop_assert_eq!(lane.drain(), all);
                }
            }
            prop_assert_eq!(lane.len(), model.len());
            prop_assert_eq!(lane.next_expiration(), model.keys().next().map(|&(d, _)| d));
            // Finished work holds at most a chunk per pending entry, plus
            // the tail's chunk and the spare.
            let chunks = lane.chunks.iter().flatten().count();
            prop_assert!(chunks <= model.len() + 1, "{} chunks", chunks);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn behaves_like_a_sorted_map(ops in prop::collection::vec(op(), 1..2_000)) {
            run(&ops, 0)?;
        }

        #[test]
        fn positions_wrap_around(ops in prop::collection::vec(op(), 1..2_000)) {
            run(&ops, u32::MAX - 700)?;
        }
    }

    #[test]
    fn advance_timed_tells_each_deadline_in_order() {
        let mut lane = Lane::new();
        for (deadline, value) in [(5, 'a'), (5, 'b'), (9, 'c'), (12, 'd')] {
            lane.push(deadline, value).unwrap();
        }
        let mut told = Vec::new();
        lane.advance_timed(10, |deadline, _, value| told.push((deadline, value)));
        assert_eq!(told, [(5, 'a'), (5, 'b'), (9, 'c')]);
    }

    #[test]
    fn a_cancelled_burst_gives_its_chunks_back_at_once() {
        let mut lane = Lane::new();
        let survivor = lane.push(1_000, 0u64).unwrap();
        let burst: Vec<u32> = (1..100_000)
            .map(|n| lane.push(1_000 + n, n).unwrap())
            .collect();
        let peak = lane.allocated_bytes();
        for &position in &burst {
            lane.cancel(position);
        }
        // The survivor's chunk, the tail's (here the same or next), the
        // spare, and the list of chunks, shrunk.
        let after = lane.allocated_bytes();
        assert!(
            after < 4 * size_of::<Chunk<u64>>() + 8_192,
            "{after} of {peak}"
        );
        assert!(peak > 100 * after);
        assert_eq!(lane.len(), 1);
        assert_eq!(lane.next_expiration(), Some(1_000));
        assert_eq!(lane.cancel(survivor), Some(0));
        assert_eq!(lane.next_expiration(), None);
    }
}
