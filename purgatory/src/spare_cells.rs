//! Spare cells: the memory of answered operations, kept for the next
//! submissions.
//!
//! In a broker an operation is usually submitted on one thread (a request
//! handler) and answered on another (a follower fetch, the timer, a remote
//! read). With glibc's allocator each answer then frees, on one thread, a
//! block that another thread allocated; glibc serialises such frees with the
//! allocating thread's own mallocs on one arena lock. In Kafka's benchmark
//! workload (`purgatory_perf`) a profile put more than a quarter of all CPU
//! time there, most of it in futex waits and wake-ups between the two
//! threads (figures in `docs/performance.md`).
//!
//! So when the last reference to an answered operation's cell goes (its
//! handle is dropped, or the purgatory lets go of a cell whose handle went
//! at submission: after an expiry, a check or a cancel), the cell is
//! cleared (the user's operation and waker are dropped at once) and parked
//! on a bounded stack; submissions take a parked cell before they allocate.
//! A full stack frees the cell as before; an empty one allocates. Spare
//! cells hold no user data, at most `capacity` of them are kept, and
//! shutdown gives them all back.
//!
//! The stack is a `Vec` under a mutex held for one push or pop. It was a
//! lock-free `ArrayQueue`, whose pushes spin in a back-off loop when they
//! find the slot at the tail not yet released by a pop that has already
//! moved the head, which happens when the queue is full or nearly so while
//! the submitting thread takes cells out. In Kafka's benchmark workload at
//! 2M requests/s (high-timeout case: one thread submitting, two answering)
//! that loop took 12% of all CPU time (`docs/performance.md`). A stack also hands out the cell given back last, the one most
//! likely still in a cache.

use crate::cell::Cell;
use crate::timer_queue::CellRef;
use parking_lot::Mutex;

pub(crate) struct SpareCells<K, O> {
    stack: Mutex<Vec<CellRef<K, O>>>,
    /// Cells kept at most (0: none).
    capacity: usize,
}

impl<K, O> SpareCells<K, O> {
    pub(crate) fn new(capacity: usize) -> Self {
        SpareCells {
            stack: Mutex::new(Vec::new()),
            capacity,
        }
    }

    /// A cell for a new operation: a spare one if there is one.
    pub(crate) fn cell(&self, op: O, seq: u64) -> CellRef<K, O> {
        // Checked first, so a pool of none costs no lock.
        let spare = if self.capacity > 0 {
            self.stack.lock().pop()
        } else {
            None
        };
        if let Some(mut spare) = spare {
            // Unique unless a handle's drop is between parking the cell and
            // releasing its own reference (see `give_back`): then allocate.
            if let Some(cell) = CellRef::get_mut(&mut spare) {
                *cell = Cell::new(op, seq);
                return spare;
            }
        }
        CellRef::new(Cell::new(op, seq))
    }

    /// Parks `cell` for reuse if it is answered and `cell` is its last
    /// reference; otherwise leaves it alone. The caller drops its own
    /// reference right after, which makes the parked one unique.
    pub(crate) fn give_back(&self, cell: &mut CellRef<K, O>) {
        if self.capacity == 0 {
            return;
        }
        if !cell.state.is_done() {
            return;
        }
        // `triomphe`'s `get_mut` is a plain load of the count, not a
        // compare-exchange: no need to test uniqueness before it.
        match CellRef::get_mut(cell) {
            Some(unique) => unique.clear(),
            None => return,
        }
        // Cloned before locking, to keep the critical section to a push.
        let parked = CellRef::clone(cell);
        let mut stack = self.stack.lock();
        if stack.len() < self.capacity {
            stack.push(parked);
        }
        // Full: `parked` is dropped here, after the lock (declared before
        // it), and the caller's drop frees the cell as usual.
    }

    /// Spare cells held now.
    pub(crate) fn len(&self) -> usize {
        self.stack.lock().len()
    }

    /// Frees every spare cell.
    pub(crate) fn release(&self) {
        let all = std::mem::take(&mut *self.stack.lock());
        drop(all);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Outcome;
    use std::sync::Arc;

    /// A cell from `spare` whose operation `op` has been answered (its
    /// result delivered and not taken).
    fn answered<O>(spare: &SpareCells<u32, O>, op: O) -> CellRef<u32, O> {
        let cell = spare.cell(op, 1);
        cell.state.decide_at_start(Outcome::Completed, |_, _| true);
        assert!(cell.state.is_done());
        cell
    }

    #[test]
    fn a_given_back_cell_is_reused_cleared() {
        let spare = SpareCells::new(2);
        let mut cell = answered(&spare, "first".to_string());
        let first = CellRef::as_ptr(&cell);
        spare.give_back(&mut cell);
        drop(cell);
        assert_eq!(spare.len(), 1);
        let again = spare.cell("second".to_string(), 2);
        assert_eq!(CellRef::as_ptr(&again), first, "the spare cell is reused");
        assert_eq!(spare.len(), 0);
        // Fresh state: pending, no outcome, the new operation in place.
        assert!(!again.state.is_done());
        assert_eq!(again.state.outcome(), None);
        assert_eq!(again.seq, 2);
        let mut seen = None;
        let decided = again
            .state
            .start(|p| seen = Some(p.op.clone()), |_| false, |_, _| true);
        assert!(!decided);
        assert_eq!(seen.as_deref(), Some("second"));
    }

    #[test]
    fn the_cell_given_back_last_is_reused_first() {
        let spare = SpareCells::new(4);
        let (mut a, mut b) = (answered(&spare, 1u8), answered(&spare, 2u8));
        let (pa, pb) = (CellRef::as_ptr(&a), CellRef::as_ptr(&b));
        spare.give_back(&mut a);
        spare.give_back(&mut b);
        drop((a, b));
        assert_eq!(CellRef::as_ptr(&spare.cell(3, 3)), pb);
        assert_eq!(CellRef::as_ptr(&spare.cell(4, 4)), pa);
    }

    #[test]
    fn shared_pending_and_overflowing_cells_are_not_kept() {
        let spare = SpareCells::new(1);
        // Another reference exists: not the last one, not parked.
        let mut shared = answered(&spare, "shared".to_string());
        let other = CellRef::clone(&shared);
        spare.give_back(&mut shared);
        assert_eq!(spare.len(), 0);
        drop(other);
        // Still pending: never parked (its operation would be lost).
        let mut pending = spare.cell("pending".to_string(), 3);
        spare.give_back(&mut pending);
        assert_eq!(spare.len(), 0);
        // Beyond capacity: freed as usual.
        let (mut a, mut b) = (
            answered(&spare, "a".to_string()),
            answered(&spare, "b".to_string()),
        );
        spare.give_back(&mut a);
        spare.give_back(&mut b);
        drop((a, b));
        assert_eq!(spare.len(), 1);
        spare.release();
        assert_eq!(spare.len(), 0);
        // Keeping none is allowed.
        let none = SpareCells::<u32, String>::new(0);
        let mut c = answered(&none, "c".to_string());
        none.give_back(&mut c);
        assert_eq!(none.len(), 0);
    }

    #[test]
    fn giving_back_drops_the_users_result_at_once() {
        let spare = SpareCells::new(1);
        let op = Arc::new(());
        let mut cell = answered(&spare, Arc::clone(&op));
        assert_eq!(Arc::strong_count(&op), 2, "the result holds the operation");
        spare.give_back(&mut cell);
        assert_eq!(Arc::strong_count(&op), 1, "a spare cell holds no user data");
    }
}
