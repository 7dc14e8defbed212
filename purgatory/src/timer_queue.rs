//! The purgatory's timer: the timing wheel with its lanes (`wheel_timer.rs`),
//! or the binary-heap DelayQueue that Kafka replaced with it (the baseline).
//!
//! Both sit behind one mutex, which is a leaf in the lock order: nothing else
//! is locked while it is held, and no user code runs under it (cells removed
//! under the lock are dropped after it is released, since dropping the last
//! reference to a cell drops the user's operation).

use crate::cell::{Cell, FIRED, NO_TIMER};
use crate::no_yield_lock::InheritingMutex as Mutex;
use crate::wheel_timer::WheelTimer;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::atomic::Ordering;
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
    Wheel(Mutex<WheelState<K, O>>),
    Heap(Mutex<HeapState<K, O>>),
}

pub(crate) struct WheelState<K, O> {
    wheel: WheelTimer<CellRef<K, O>>,
    /// The tick the timer thread sleeps until (`u64::MAX`: until woken).
    wake_at: u64,
}

pub(crate) struct HeapState<K, O> {
    heap: BinaryHeap<HeapEntry<K, O>>,
    wake_at: u64,
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
    /// surfaces. Deadlines are kept below `FIRED`, which a real tick never
    /// reaches.
    fn push(&mut self, deadline: u64, cell: &CellRef<K, O>) -> bool {
        let deadline = deadline.min(FIRED - 1);
        cell.timer.store(deadline, Ordering::Relaxed);
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
        !self.cell.state.is_done() && self.cell.timer.load(Ordering::Relaxed) == self.deadline
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

impl<K, O> TimerQueue<K, O> {
    pub(crate) fn new(kind: TimerKind) -> Self {
        match kind {
            TimerKind::Wheel => TimerQueue::Wheel(Mutex::new(WheelState {
                wheel: WheelTimer::new(),
                wake_at: u64::MAX,
            })),
            TimerKind::DelayQueue { .. } => TimerQueue::Heap(Mutex::new(HeapState {
                heap: BinaryHeap::new(),
                wake_at: u64::MAX,
                seq: 0,
            })),
        }
    }

    /// Schedules `cell` at tick `deadline`, `timeout` from now, unless it
    /// has completed already. Returns whether the timer thread must wake up
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
                // completing threads' `unschedule` waits on.
                let entry = CellRef::clone(cell);
                let mut s = state.lock();
                // Checked under the lock: a completion that unschedules
                // after this sees the id; one before it left DONE for us.
                if cell.state.is_done() {
                    return false;
                }
                match s.wheel.insert(deadline, timeout, entry) {
                    Ok(id) => {
                        cell.timer.store(id, Ordering::Relaxed);
                        *address = s.wheel.address(id);
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
        if let TimerQueue::Wheel(state) = self {
            // Expired operations end here: no lock for them (see `FIRED`).
            if cell.timer.load(Ordering::Relaxed) == FIRED {
                return;
            }
            let removed = {
                let mut s = state.lock();
                // Ids and `NO_TIMER` are only written under this lock (and
                // `FIRED` over an id the wheel no longer has), so a load and
                // a store do what a swap would, without a locked instruction.
                let raw = cell.timer.load(Ordering::Relaxed);
                cell.timer.store(NO_TIMER, Ordering::Relaxed);
                // `NO_TIMER` is not an id: the wheel refuses it.
                s.wheel.cancel(raw)
            };
            drop(removed);
        }
    }

    /// Moves a pending `cell` to a new deadline, `timeout` from now. Returns
    /// `None` if the timer no longer holds it (its timeout fired, or it was
    /// answered): the new deadline is then not in force. Otherwise, whether
    /// the timer thread must wake up earlier than planned.
    pub(crate) fn reschedule(
        &self,
        cell: &CellRef<K, O>,
        deadline: u64,
        timeout: Duration,
    ) -> Option<bool> {
        match self {
            TimerQueue::Wheel(state) => {
                let taken = {
                    let mut s = state.lock();
                    // `NO_TIMER` and `FIRED` are not ids: the wheel refuses
                    // them, as it refuses the id of an entry it handed out.
                    let raw = cell.timer.load(Ordering::Relaxed);
                    match s.wheel.reschedule(raw, deadline, timeout) {
                        Ok(id) => {
                            cell.timer.store(id, Ordering::Relaxed);
                            return Some(deadline < s.wake_at);
                        }
                        Err(None) => return None,
                        Err(Some(taken)) => {
                            cell.timer.store(NO_TIMER, Ordering::Relaxed);
                            taken
                        }
                    }
                };
                // Dropped after the lock, as everywhere (see the module docs).
                drop(taken);
                tracing::error!("timer full; operation left without a timeout");
                None
            }
            // The heap cannot move an entry: push a new one; the old one is
            // skipped when it surfaces, its deadline no longer the cell's.
            TimerQueue::Heap(state) => {
                let mut s = state.lock();
                // `expire` marks what it pops under this lock.
                if cell.state.is_done() || cell.timer.load(Ordering::Relaxed) == FIRED {
                    return None;
                }
                Some(s.push(deadline, cell))
            }
        }
    }

    /// Takes every pending cell due at or before tick `now` into `due`;
    /// returns the tick the timer next has work at (and records it as the
    /// timer thread's wake-up time when `for_timer_thread`).
    pub(crate) fn expire(
        &self,
        now: u64,
        due: &mut Vec<CellRef<K, O>>,
        for_timer_thread: bool,
    ) -> Option<u64> {
        let mut dead = Vec::new();
        // With their deadlines, to put them in order.
        let mut fired = Vec::new();
        let next = match self {
            TimerQueue::Wheel(state) => {
                let next = {
                    let mut s = state.lock();
                    // Cells are not touched under the lock: each is a likely
                    // cache miss, and submissions wait on this lock.
                    s.wheel
                        .advance(now, |deadline, cell| fired.push((deadline, cell)));
                    let next = s.wheel.next_expiration();
                    if for_timer_thread {
                        s.wake_at = next.unwrap_or(u64::MAX);
                    }
                    next
                };
                for (_, cell) in &fired {
                    cell.timer.store(FIRED, Ordering::Relaxed);
                }
                next
            }
            TimerQueue::Heap(state) => {
                let mut s = state.lock();
                while s.heap.peek().is_some_and(|top| top.deadline <= now) {
                    let Some(entry) = s.heap.pop() else { break };
                    if entry.is_live() {
                        // Under the lock, so that no reschedule slips in
                        // between (the baseline's cost; the wheel needs no
                        // mark for that: its entry is gone).
                        entry.cell.timer.store(FIRED, Ordering::Relaxed);
                        fired.push((entry.deadline, entry.cell));
                    } else {
                        dead.push(entry.cell);
                    }
                }
                let next = s.heap.peek().map(|top| top.deadline);
                if for_timer_thread {
                    s.wake_at = next.unwrap_or(u64::MAX);
                }
                next
            }
        };
        drop(dead);
        // Same order from either timer: by deadline, then submission.
        fired.sort_unstable_by_key(|(deadline, cell)| (*deadline, cell.seq));
        due.extend(fired.into_iter().map(|(_, cell)| cell));
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
                let cells = state.lock().wheel.drain();
                mark_fired(&cells);
                cells
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
}

/// Records that the timer handed these cells out (see `FIRED`).
fn mark_fired<K, O>(cells: &[CellRef<K, O>]) {
    for cell in cells {
        cell.timer.store(FIRED, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(seq: u64) -> CellRef<u32, ()> {
        CellRef::new(Cell::new((), seq))
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
        let a_id = a.timer.load(Ordering::Relaxed);
        let mut due = Vec::new();
        timer.expire(5, &mut due, false);
        assert_eq!(due.len(), 1);
        assert_eq!(a.timer.load(Ordering::Relaxed), FIRED);
        // `b` takes the slot `a` had, under a newer generation.
        timer.schedule(&b, 50, Duration::ZERO, &mut 0);
        assert_eq!(
            b.timer.load(Ordering::Relaxed) as u32,
            a_id as u32,
            "same slot"
        );
        assert_ne!(b.timer.load(Ordering::Relaxed), a_id);
        assert_eq!(timer.reschedule(&a, 60, Duration::ZERO), None);
        timer.unschedule(&a);
        // Before `FIRED` is stored the cell still holds its old id: stale,
        // so the entry that reuses the slot is left alone.
        a.timer.store(a_id, Ordering::Relaxed);
        assert_eq!(timer.reschedule(&a, 60, Duration::ZERO), None);
        timer.unschedule(&a);
        assert_eq!(timer.held(), 2);
        assert_eq!(timer.next_expiration(), Some(50));
        timer.unschedule(&b);
        assert_eq!(b.timer.load(Ordering::Relaxed), NO_TIMER);
        timer.unschedule(&lane);
        assert_eq!(timer.held(), 0);
    }

    #[test]
    fn a_lane_entry_fires_once_and_its_position_is_never_reused() {
        let timer = TimerQueue::new(TimerKind::Wheel);
        let (a, b) = (cell(1), cell(2));
        let timeout = Duration::from_millis(5);
        timer.schedule(&a, 5, timeout, &mut 0);
        let a_id = a.timer.load(Ordering::Relaxed);
        let mut due = Vec::new();
        assert_eq!(timer.expire(5, &mut due, false), None);
        assert_eq!(due.len(), 1);
        assert_eq!(a.timer.load(Ordering::Relaxed), FIRED);
        timer.schedule(&b, 10, timeout, &mut 0);
        assert_ne!(b.timer.load(Ordering::Relaxed), a_id);
        a.timer.store(a_id, Ordering::Relaxed);
        assert_eq!(timer.reschedule(&a, 60, timeout), None);
        timer.unschedule(&a);
        assert_eq!(timer.held(), 1);
        // A heartbeat: `b` moves on in its lane. (No timer thread sleeps
        // here, so any deadline is earlier than its wake-up.)
        assert_eq!(timer.reschedule(&b, 20, timeout), Some(true));
        assert_eq!(timer.next_expiration(), Some(20));
        due.clear();
        timer.expire(19, &mut due, false);
        assert!(due.is_empty());
        timer.expire(20, &mut due, false);
        assert_eq!(due.len(), 1);
        assert_eq!(timer.held(), 0);
    }
}
