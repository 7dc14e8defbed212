//! The purgatory's timer: the timing wheel with its lanes (`wheel_timer.rs`),
//! or the binary-heap DelayQueue that Kafka replaced with it (the baseline).
//!
//! Both sit behind one mutex, which is a leaf in the lock order: nothing else
//! is locked while it is held, and no user code runs under it (cells removed
//! under the lock are dropped after it is released, since dropping the last
//! reference to a cell drops the user's operation). A completion takes a
//! lane's entry out without it (`unchecked/lane.rs`): most operations are in
//! a lane, so the lock is taken by the submitters and the thread at the
//! clock.

use crate::cell::{Cell, FIRED, NO_TIMER};
use crate::no_yield_lock::InheritingMutex as Mutex;
use crate::reused_buffer::ReusedBuffer;
use crate::unchecked::lane::{self, plain_deadline, Word};
use crate::wheel_timer::{Due, WheelTimer};
use crossbeam_utils::CachePadded;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::time::Duration;

/// A reference to a cell. `triomphe`'s `Arc` has no weak count: 8 bytes
/// less in every cell, and no weak-count check when a cell is reused.
pub(crate) type CellRef<K, O> = triomphe::Arc<Cell<K, O>>;

/// Which timer a purgatory runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerKind {
    /// The hierarchical timing wheel, with a FIFO lane beside it for each
    /// of the (up to 8) timeouts in use: a completed operation leaves the
    /// timer and its watch lists at once.
    Wheel,
    /// The baseline: a binary heap under a mutex, as
    /// `java.util.concurrent.DelayQueue` was used by Kafka's purgatory before
    /// 0.9. Completed operations stay in the heap and in watch lists until
    /// they surface or until a purge, run every `purge_interval` completions,
    /// scans everything.
    DelayQueue {
        /// Completions between two purges (Kafka's default was 1000).
        purge_interval: u64,
    },
}

// One per purgatory, so the size of the wheel's variant costs nothing;
// boxing it would add a pointer to follow on every schedule and cancel.
#[allow(clippy::large_enum_variant)]
pub(crate) enum TimerQueue<K, O> {
    Wheel(CachePadded<Mutex<WheelState<K, O>>>),
    Heap(CachePadded<Mutex<HeapState<K, O>>>),
}

pub(crate) struct WheelState<K, O> {
    wheel: WheelTimer<Cell<K, O>>,
    /// The tick the thread at the clock sleeps until (`u64::MAX`: until woken).
    wake_at: u64,
    /// The room of the thread at the clock's expiry buffers at the start
    /// of its last turn, for the metrics (it holds them, asleep included).
    buffer_bytes: usize,
}

pub(crate) struct HeapState<K, O> {
    heap: BinaryHeap<HeapEntry<K, O>>,
    wake_at: u64,
    /// As the wheel's.
    buffer_bytes: usize,
    /// Ties between equal deadlines break in insertion order.
    seq: u64,
}

pub(crate) struct HeapEntry<K, O> {
    deadline: u64,
    seq: u64,
    cell: CellRef<K, O>,
}

impl<K, O> HeapState<K, O> {
    /// Adds an entry for `cell` at `deadline`; returns whether the timer
    /// thread must wake up earlier than planned.
    /// The cell's `timer` holds the deadline in force (see `Cell::timer`),
    /// so that an entry left behind by a reschedule is known when it
    /// surfaces, as a plain word (`plain_deadline`), which is never `FIRED`
    /// or a lane's id.
    fn push(&mut self, deadline: u64, cell: &CellRef<K, O>) -> bool {
        cell.timer.store_plain(plain_deadline(deadline));
        self.seq += 1;
        self.heap.push(HeapEntry {
            deadline,
            seq: self.seq,
            cell: CellRef::clone(cell),
        });
        deadline < self.wake_at
    }
}

impl<K, O> HeapEntry<K, O> {
    /// Neither completed nor left behind by a reschedule.
    fn is_live(&self) -> bool {
        !self.cell.state.is_done()
            && self.cell.timer.load() == Word::Plain(plain_deadline(self.deadline))
    }
}

impl<K, O> PartialEq for HeapEntry<K, O> {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline, self.seq) == (other.deadline, other.seq)
    }
}
impl<K, O> Eq for HeapEntry<K, O> {}
impl<K, O> PartialOrd for HeapEntry<K, O> {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl<K, O> Ord for HeapEntry<K, O> {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest first.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.deadline, other.seq).cmp(&(self.deadline, self.seq))
    }
}

/// The room [`TimerQueue::expire`] works in, kept by its caller from one
/// call to the next. A thread at the clock that ran late expires a hundred
/// milliseconds of deadlines in one call, tens of thousands of entries:
/// buffers made for each call were blocks of 256-512 KiB allocated and
/// freed several times a second (seen in the soak's live allocations),
/// and the allocator holds freed pages between its purges; jemalloc's
/// unused pages swung between 0.2 and 2.3 MiB there, and stayed at or
/// below 0.8 MiB once these buffers and the spare cells' larger depot
/// came (docs/performance.md, "Expiry buffers kept"). Their room follows
/// recent use (`reused_buffer.rs`).
pub(crate) struct ExpiryBuffers<K, O> {
    /// What the wheel handed out, under the timer's lock.
    entries: ReusedBuffer<(u64, Due<Cell<K, O>>)>,
    /// The cells that fell due, with their deadlines, to put in order.
    fired: ReusedBuffer<(u64, CellRef<K, O>)>,
    /// The baseline's entries that surfaced dead.
    dead: ReusedBuffer<CellRef<K, O>>,
}

impl<K, O> ExpiryBuffers<K, O> {
    /// Bytes of their room.
    fn allocated_bytes(&self) -> usize {
        fn room<T>(buffer: &ReusedBuffer<T>) -> usize {
            buffer.capacity() * std::mem::size_of::<T>()
        }
        room(&self.entries) + room(&self.fired) + room(&self.dead)
    }
}

impl<K, O> Default for ExpiryBuffers<K, O> {
    fn default() -> Self {
        ExpiryBuffers {
            entries: ReusedBuffer::default(),
            fired: ReusedBuffer::default(),
            dead: ReusedBuffer::default(),
        }
    }
}

/// Entries ahead of the one being resolved whose cells
/// [`resolve_all`] asks the CPU for.
const RESOLVE_AHEAD: usize = 8;

/// Resolves what the wheel handed out (after its lock), moving into
/// `fired` the cells whose entry this expiry ends.
///
/// Resolving writes each cell's timer word, and the cells were written
/// by their submitters up to a timeout ago: one cache miss each, which
/// came one after another, the thread at the clock waiting out each in
/// turn (the high case of `purgatory_perf` at 1M/s: about a third of the
/// timer threads' samples on that compare-exchange). Each entry asks for the cell
/// [`RESOLVE_AHEAD`] places on, so the misses overlap; the cell's other
/// lines, which the expiry reads next, come with it.
fn resolve_all<K, O>(
    entries: &mut Vec<(u64, Due<Cell<K, O>>)>,
    fired: &mut Vec<(u64, CellRef<K, O>)>,
) {
    let prefetch = |entries: &[(u64, Due<Cell<K, O>>)], at: usize| {
        if let Some(cell) = entries.get(at).and_then(|(_, due)| due.cell()) {
            Cell::prefetch(cell);
        }
    };
    // Taken from the back, which leaves the rest where they are; put back
    // in their order below.
    let first = fired.len();
    for at in entries.len().saturating_sub(RESOLVE_AHEAD)..entries.len() {
        prefetch(entries, at);
    }
    while let Some((deadline, due)) = entries.pop() {
        if let Some(ahead) = entries.len().checked_sub(RESOLVE_AHEAD) {
            prefetch(entries, ahead);
        }
        if let Some(cell) = due.resolve() {
            fired.push((deadline, cell));
        }
    }
    fired[first..].reverse();
}

/// Cells the thread at the clock takes in one turn at most (but the wheel
/// hands out whole ticks: a tick that holds more is taken whole). A clock that ran late
/// meets tens of thousands of expired operations; taken in rounds, the
/// buffers of its turn stay the size of a round (kept for the next, see
/// [`ReusedBuffer::KEEP`]) instead of growing to the largest backlog the
/// process ever met, and the first callbacks of the backlog run sooner
/// while another thread takes the next round.
pub(crate) const ROUND: usize = 1 << 13;

impl<K, O> TimerQueue<K, O> {
    pub(crate) fn new(kind: TimerKind) -> Self {
        match kind {
            TimerKind::Wheel => TimerQueue::Wheel(CachePadded::new(Mutex::new(WheelState {
                wheel: WheelTimer::new(),
                wake_at: u64::MAX,
                buffer_bytes: 0,
            }))),
            TimerKind::DelayQueue { .. } => {
                TimerQueue::Heap(CachePadded::new(Mutex::new(HeapState {
                    heap: BinaryHeap::new(),
                    wake_at: u64::MAX,
                    buffer_bytes: 0,
                    seq: 0,
                })))
            }
        }
    }

    /// Schedules `cell` at tick `deadline`, `timeout` from now, unless it
    /// has completed already. Returns whether the thread at the clock must wake up
    /// earlier than planned, and records in `address` where the wheel
    /// stored the entry (for the completion to prefetch; the baseline
    /// records nothing).
    pub(crate) fn schedule(
        &self,
        cell: &CellRef<K, O>,
        deadline: u64,
        timeout: Duration,
        address: &mut usize,
    ) -> bool {
        match self {
            TimerQueue::Wheel(state) => {
                // Cloned before locking: the reference count's atomic add
                // would otherwise lengthen the critical section that the
                // timer thread and other submitters wait on.
                let entry = CellRef::clone(cell);
                let mut s = state.lock();
                // Checked under the lock: a completion that unschedules
                // after this sees the id; one before it left DONE for us.
                if cell.state.is_done() {
                    return false;
                }
                match s.wheel.place(deadline, timeout, entry) {
                    Ok(new) => {
                        lane::publish(&**cell, new);
                        *address = s.wheel.address(cell.timer.load());
                    }
                    // 2^31 pending timers cannot be reached before memory
                    // runs out; were it to happen, the op waits for its
                    // condition, cancel or shutdown instead of a timeout.
                    Err(_) => tracing::error!("timer full; operation left without a timeout"),
                }
                deadline < s.wake_at
            }
            TimerQueue::Heap(state) => state.lock().push(deadline, cell),
        }
    }

    /// Removes a completed `cell` from the timer: O(1) for the wheel; nothing
    /// for the baseline, whose entry stays until it surfaces or is purged.
    pub(crate) fn unschedule(&self, cell: &CellRef<K, O>) {
        let TimerQueue::Wheel(state) = self else {
            return;
        };
        loop {
            match cell.timer.load() {
                // Expired operations end here: no lock for them (see `FIRED`).
                Word::Plain(FIRED | NO_TIMER) => return,
                // Without the lock (`unchecked/lane.rs`); `None`: the word
                // moved meanwhile (a reset), so read it again.
                Word::Lane(id) => {
                    if let Some(removed) = lane::cancel(&**cell, id) {
                        if let Some(token) = removed.release {
                            let mut dropped = Vec::new();
                            state.lock().wheel.release(token, &mut dropped);
                            drop(dropped);
                        }
                        // After the lock: it may be the last reference.
                        drop(removed.value);
                        return;
                    }
                }
                Word::Plain(_) => {
                    let removed = {
                        let mut s = state.lock();
                        // Wheel ids, `NO_TIMER` and a move to a lane are
                        // only written under this lock (and `FIRED` over an
                        // id the wheel no longer has).
                        match cell.timer.load() {
                            Word::Plain(FIRED | NO_TIMER) => return,
                            Word::Plain(raw) => {
                                cell.timer.store_plain(NO_TIMER);
                                s.wheel.cancel_in_wheel(raw)
                            }
                            // A reset moved it to a lane: take it out there.
                            Word::Lane(_) => continue,
                        }
                    };
                    drop(removed);
                    return;
                }
            }
        }
    }

    /// Moves a pending `cell` to a new deadline, `timeout` from now. Returns
    /// `None` if the timer no longer holds it (its timeout fired, or it was
    /// answered): the new deadline is then not in force. Otherwise, whether
    /// the thread at the clock must wake up earlier than planned.
    pub(crate) fn reschedule(
        &self,
        cell: &CellRef<K, O>,
        deadline: u64,
        timeout: Duration,
    ) -> Option<bool> {
        match self {
            TimerQueue::Wheel(state) => {
                let mut dropped = Vec::new();
                let wake = {
                    let mut s = state.lock();
                    s.wheel
                        .reschedule(cell, deadline, timeout, &mut dropped)
                        .then(|| deadline < s.wake_at)
                };
                // Dropped after the lock, as everywhere (see the module docs).
                drop(dropped);
                wake
            }
            // The heap cannot move an entry: push a new one; the old one is
            // skipped when it surfaces, its deadline no longer the cell's.
            TimerQueue::Heap(state) => {
                let mut s = state.lock();
                // `expire` marks what it pops under this lock.
                if cell.state.is_done() || cell.timer.load() == Word::Plain(FIRED) {
                    return None;
                }
                Some(s.push(deadline, cell))
            }
        }
    }

    /// Takes the pending cells due at or before tick `now` into `due`;
    /// returns the tick the timer next has work at (and records it as the
    /// wake-up time of the thread at the clock when `for_clock`). `buffers` are
    /// left empty, their room kept for the next call.
    ///
    /// The thread at the clock (`for_clock`) takes a round: earliest
    /// first (whole ticks from the wheel), until it holds [`ROUND`] cells
    /// or nothing more is due; what is left is due at the tick returned,
    /// for the next turn. Otherwise everything due is taken.
    pub(crate) fn expire(
        &self,
        now: u64,
        due: &mut Vec<CellRef<K, O>>,
        for_clock: bool,
        buffers: &mut ExpiryBuffers<K, O>,
    ) -> Option<u64> {
        let kept = buffers.allocated_bytes();
        let ExpiryBuffers {
            entries,
            fired,
            dead,
        } = buffers;
        let next = match self {
            TimerQueue::Wheel(state) => {
                let next = {
                    let mut s = state.lock();
                    if for_clock {
                        s.buffer_bytes = kept;
                    }
                    // Cells are not touched under the lock: each is a likely
                    // cache miss, and submissions wait on this lock.
                    // The thread at the clock goes tick by tick until a
                    // round is full; anyone else takes all that is due.
                    let mut until = if for_clock {
                        s.wheel.next_expiration()
                    } else {
                        Some(now)
                    };
                    while let Some(at) = until.filter(|&at| at <= now) {
                        s.wheel
                            .advance(at, |deadline, entry| entries.push((deadline, entry)));
                        until = match for_clock && entries.len() < ROUND {
                            true => s.wheel.next_expiration(),
                            false => None,
                        };
                    }
                    let next = s.wheel.next_expiration();
                    if for_clock {
                        s.wake_at = next.unwrap_or(u64::MAX);
                    }
                    next
                };
                // A lane's entry that a completion or a reset took out
                // meanwhile is not this expiry's (`unchecked/lane.rs`).
                entries.note_len();
                resolve_all(entries, fired);
                next
            }
            TimerQueue::Heap(state) => {
                let mut s = state.lock();
                if for_clock {
                    s.buffer_bytes = kept;
                }
                while s.heap.peek().is_some_and(|top| top.deadline <= now)
                    && !(for_clock && fired.len() >= ROUND)
                {
                    let Some(entry) = s.heap.pop() else { break };
                    if entry.is_live() {
                        // Under the lock, so that no reschedule slips in
                        // between (the baseline's cost; the wheel needs no
                        // mark for that: its entry is gone).
                        entry.cell.timer.store_plain(FIRED);
                        fired.push((entry.deadline, entry.cell));
                    } else {
                        dead.push(entry.cell);
                    }
                }
                let next = s.heap.peek().map(|top| top.deadline);
                if for_clock {
                    s.wake_at = next.unwrap_or(u64::MAX);
                }
                next
            }
        };
        dead.note_len();
        dead.clear();
        // Same order from either timer: by deadline, then submission.
        fired.sort_unstable_by_key(|(deadline, cell)| (*deadline, cell.seq));
        fired.note_len();
        due.extend(fired.drain(..).map(|(_, cell)| cell));
        entries.end_use();
        fired.end_use();
        dead.end_use();
        next
    }

    /// The tick the timer next has work at.
    pub(crate) fn next_expiration(&self) -> Option<u64> {
        match self {
            TimerQueue::Wheel(state) => state.lock().wheel.next_expiration(),
            TimerQueue::Heap(state) => state.lock().heap.peek().map(|top| top.deadline),
        }
    }

    /// Takes every cell out (for shutdown); the baseline's dead entries too.
    pub(crate) fn drain(&self) -> Vec<CellRef<K, O>> {
        match self {
            TimerQueue::Wheel(state) => {
                let entries = state.lock().wheel.drain();
                entries.into_iter().filter_map(Due::resolve).collect()
            }
            TimerQueue::Heap(state) => {
                let mut s = state.lock();
                let cells: Vec<_> = std::mem::take(&mut s.heap)
                    .into_iter()
                    .map(|e| e.cell)
                    .collect();
                // Under the lock, as in `expire`: no reschedule puts one back.
                mark_fired(&cells);
                cells
            }
        }
    }

    /// The baseline's purge: drops every entry whose operation completed.
    pub(crate) fn purge(&self) {
        if let TimerQueue::Heap(state) = self {
            let dead: Vec<_> = {
                let mut s = state.lock();
                let (live, dead): (Vec<_>, Vec<_>) = std::mem::take(&mut s.heap)
                    .into_vec()
                    .into_iter()
                    .partition(HeapEntry::is_live);
                s.heap = BinaryHeap::from(live);
                dead
            };
            drop(dead);
        }
    }

    /// Entries held, including the baseline's completed-but-not-purged ones.
    pub(crate) fn held(&self) -> usize {
        match self {
            TimerQueue::Wheel(state) => state.lock().wheel.len(),
            TimerQueue::Heap(state) => state.lock().heap.len(),
        }
    }

    /// Bytes of the timer's structures and of the expiry buffers as the
    /// last turn at the clock found them; not the cells they refer to.
    pub(crate) fn held_bytes(&self) -> usize {
        match self {
            TimerQueue::Wheel(state) => {
                let s = state.lock();
                s.wheel.allocated_bytes() + s.buffer_bytes
            }
            TimerQueue::Heap(state) => {
                let s = state.lock();
                s.heap.capacity() * std::mem::size_of::<HeapEntry<K, O>>() + s.buffer_bytes
            }
        }
    }
}

/// Records that the timer handed these cells out (see `FIRED`).
fn mark_fired<K, O>(cells: &[CellRef<K, O>]) {
    for cell in cells {
        cell.timer.store_plain(FIRED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(seq: u64) -> CellRef<u32, ()> {
        CellRef::new(Cell::new((), seq, crate::purgatory::Shared::detached(0)))
    }

    /// The word of a cell whose entry is in the wheel, or a plain mark.
    fn plain(cell: &CellRef<u32, ()>) -> u64 {
        match cell.timer.load() {
            Word::Plain(raw) => raw,
            Word::Lane(id) => panic!("{id:?} is a lane's"),
        }
    }

    #[test]
    fn resolving_keeps_the_order_the_wheel_handed_out() {
        // More than `RESOLVE_AHEAD`, and fewer: the prefetches' window.
        for n in [0, 3, RESOLVE_AHEAD, 40] {
            let mut entries: Vec<_> = (0..n as u64)
                .map(|seq| (seq / 4, Due::Wheel(cell(seq))))
                .collect();
            let mut fired = vec![(0, cell(999))];
            resolve_all(&mut entries, &mut fired);
            assert!(entries.is_empty());
            let order: Vec<_> = fired.iter().map(|(d, c)| (*d, c.seq)).collect();
            let expected: Vec<_> = [(0, 999)]
                .into_iter()
                .chain((0..n as u64).map(|seq| (seq / 4, seq)))
                .collect();
            assert_eq!(order, expected, "{n} entries");
            assert!(fired[1..].iter().all(|(_, c)| plain(c) == FIRED));
        }
    }

    #[test]
    fn a_fired_entry_is_marked_and_no_later_call_reaches_the_wheel() {
        let timer = TimerQueue::new(TimerKind::Wheel);
        // Later than the deadlines below, under the same timeout: they are
        // out of its lane's order, so the wheel (whose slots are reused)
        // takes them.
        let lane = cell(0);
        timer.schedule(&lane, 1_000, Duration::ZERO, &mut 0);
        let (a, b) = (cell(1), cell(2));
        timer.schedule(&a, 5, Duration::ZERO, &mut 0);
        let a_id = plain(&a);
        let mut due = Vec::new();
        timer.expire(5, &mut due, false, &mut Default::default());
        assert_eq!(due.len(), 1);
        assert_eq!(plain(&a), FIRED);
        // `b` takes the slot `a` had, under a newer generation.
        timer.schedule(&b, 50, Duration::ZERO, &mut 0);
        assert_eq!(plain(&b) as u32, a_id as u32, "same slot");
        assert_ne!(plain(&b), a_id);
        assert_eq!(timer.reschedule(&a, 60, Duration::ZERO), None);
        timer.unschedule(&a);
        // Before `FIRED` is stored the cell still holds its old id: stale,
        // so the entry that reuses the slot is left alone.
        a.timer.store_plain(a_id);
        assert_eq!(timer.reschedule(&a, 60, Duration::ZERO), None);
        timer.unschedule(&a);
        assert_eq!(timer.held(), 2);
        assert_eq!(timer.next_expiration(), Some(50));
        timer.unschedule(&b);
        assert_eq!(plain(&b), NO_TIMER);
        timer.unschedule(&lane);
        assert_eq!(timer.held(), 0);
    }

    #[test]
    fn a_lane_entry_fires_once_and_is_not_taken_out_again() {
        let timer = TimerQueue::new(TimerKind::Wheel);
        let (a, b) = (cell(1), cell(2));
        let timeout = Duration::from_millis(5);
        timer.schedule(&a, 5, timeout, &mut 0);
        let Word::Lane(a_id) = a.timer.load() else {
            panic!("not in a lane")
        };
        let mut due = Vec::new();
        assert_eq!(
            timer.expire(5, &mut due, false, &mut Default::default()),
            None
        );
        assert_eq!(due.len(), 1);
        assert_eq!(plain(&a), FIRED);
        timer.schedule(&b, 10, timeout, &mut 0);
        assert_ne!(b.timer.load(), Word::Lane(a_id));
        assert_eq!(timer.reschedule(&a, 60, timeout), None);
        timer.unschedule(&a);
        assert_eq!(plain(&a), FIRED);
        assert_eq!(timer.held(), 1);
        // A heartbeat: `b` moves on in its lane. (No thread sleeps
        // here, so any deadline is earlier than its wake-up.)
        assert_eq!(timer.reschedule(&b, 20, timeout), Some(true));
        assert!(matches!(b.timer.load(), Word::Lane(_)));
        assert_eq!(timer.held(), 1);
        assert_eq!(timer.next_expiration(), Some(20));
        due.clear();
        timer.expire(19, &mut due, false, &mut Default::default());
        assert!(due.is_empty());
        timer.expire(20, &mut due, false, &mut Default::default());
        assert_eq!(due.len(), 1);
        assert_eq!(timer.held(), 0);
        // Only the test's references are left.
        due.clear();
        assert!(triomphe::Arc::is_unique(&a) && triomphe::Arc::is_unique(&b));
    }

    #[test]
    fn the_thread_at_the_clock_takes_a_late_backlog_in_rounds_in_deadline_order() {
        for kind in [
            TimerKind::Wheel,
            TimerKind::DelayQueue {
                purge_interval: 1_000,
            },
        ] {
            let timer = TimerQueue::new(kind);
            // 200 a tick over 100 ticks, half in a lane, half in the wheel.
            let cells: Vec<_> = (0..20_000).map(cell).collect();
            for (n, c) in cells.iter().enumerate() {
                let deadline = 1 + n as u64 / 200;
                let timeout = Duration::from_millis(if n % 2 == 0 { 1 } else { deadline });
                timer.schedule(c, deadline, timeout, &mut 0);
            }
            let (mut all, mut rounds) = (Vec::new(), 0);
            let mut buffers = ExpiryBuffers::default();
            loop {
                let mut due = Vec::new();
                let next = timer.expire(1_000, &mut due, true, &mut buffers);
                assert!(due.len() <= ROUND + 200, "{kind:?}: {}", due.len());
                all.extend(due);
                rounds += 1;
                match next {
                    Some(at) => assert!(at <= 1_000, "what is left is due"),
                    None => break,
                }
            }
            assert_eq!(all.len(), 20_000, "{kind:?}");
            assert!(
                rounds >= 20_000 / (ROUND + 200),
                "{kind:?}: {rounds} rounds"
            );
            let order: Vec<u64> = all.iter().map(|c| c.seq).collect();
            assert!(order.is_sorted(), "{kind:?}: by deadline, then submission");
            // Not at the clock (a manual driver): everything at once.
            for c in &cells[..1_000] {
                timer.schedule(c, 2_000, Duration::from_millis(5), &mut 0);
            }
            let mut due = Vec::new();
            assert_eq!(timer.expire(2_000, &mut due, false, &mut buffers), None);
            assert_eq!(due.len(), 1_000);
        }
    }

    #[test]
    fn a_completed_lane_entry_leaves_without_the_lock_and_its_reference_goes() {
        let timer = TimerQueue::new(TimerKind::Wheel);
        let cells: Vec<_> = (0..1_000).map(cell).collect();
        let timeout = Duration::from_millis(200);
        for (n, c) in cells.iter().enumerate() {
            timer.schedule(c, 200 + n as u64 / 10, timeout, &mut 0);
        }
        assert_eq!(timer.held(), 1_000);
        for c in &cells {
            timer.unschedule(c);
            assert_eq!(plain(c), NO_TIMER);
        }
        assert_eq!(timer.held(), 0);
        assert_eq!(timer.next_expiration(), None);
        assert!(cells.iter().all(triomphe::Arc::is_unique));
        let mut due = Vec::new();
        timer.expire(u64::MAX - 2, &mut due, false, &mut Default::default());
        assert!(due.is_empty());
    }
}
