//! Everything the purgatory keeps about one submitted operation.

use crate::outcome::Outcome;
use crate::purgatory::Shared;
use crate::timer_queue::CellRef;
use crate::unchecked::lane::{Timed, TimerWord};
use crate::unchecked::{prefetch, OpState};
use crate::watchers::Links;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

pub(crate) use crate::unchecked::lane::{FIRED, NO_TIMER};

/// An operation in the purgatory: its state machine (which also hands the
/// answered operation to its handle), where it is watched and scheduled.
pub(crate) struct Cell<K, O> {
    pub state: OpState<Pending<K, O>>,
    /// Where its timer entry is: a wheel id or a lane's, [`NO_TIMER`] or
    /// [`FIRED`]; for the DelayQueue baseline, the deadline tick in force
    /// (compared with its heap entries to skip those a reschedule left
    /// behind) or `FIRED`. Written under the timer's lock, except when a
    /// completion takes a lane's entry out and when an expiry resolves one
    /// (`unchecked/lane.rs`), and the wheel's `FIRED`, stored just after
    /// the lock is released (the stale id it replaces is one the wheel no
    /// longer answers to). The deadline itself is not kept here: the
    /// timer's entry holds it, and hands it out with the entry when it
    /// fires.
    pub timer: TimerWord,
    /// Submission order within the purgatory: operations due at the same
    /// tick expire in this order, whichever timer holds them.
    pub seq: u64,
    /// Where the first of its watch entries is stored (0: none recorded):
    /// a copy of what `Pending::links` holds, readable without holding
    /// the operation, for a batch to prefetch ahead (`Shared::drive_all`).
    pub watch_hint: AtomicUsize,
    /// The purgatory it belongs to, for its handle and completers to reach.
    /// Taken when the cell is allocated and kept through every reuse (see
    /// `spare_cells.rs`), so that a submission does not take a reference of
    /// its own: that count would cross between the submitting and the
    /// answering core twice a request, in a line every submission writes.
    /// The purgatory's spare cells refer back to it; shutdown frees them,
    /// which ends the cycle.
    pub home: Arc<Shared<K, O>>,
}

/// What only the thread that holds an operation (see `unchecked/state.rs`)
/// reaches: the operation, and where it is watched. The submitter fills `links`
/// before it lets go of the operation; whoever completes it empties them.
pub(crate) struct Pending<K, O> {
    pub op: O,
    pub links: Links<K, O>,
}

/// The end of a delayed operation, as its submitter receives it.
#[derive(Debug)]
pub struct Completion<O> {
    /// How it ended.
    pub outcome: Outcome,
    /// The operation itself, after `on_complete` ran: whatever it built for
    /// the response is in here.
    pub operation: O,
}

impl<K, O> Timed for Cell<K, O> {
    fn timer_word(&self) -> &TimerWord {
        &self.timer
    }
}

impl<K, O> Cell<K, O> {
    /// Bytes of a cell's allocation: its reference count (a word, just
    /// before the cell) and the cell.
    pub(crate) const ALLOCATED: usize = std::mem::size_of::<usize>() + std::mem::size_of::<Self>();

    /// A cell for a submission; the calling thread holds the operation
    /// until it calls `state.start` (see `unchecked/state.rs`).
    pub(crate) fn new(op: O, seq: u64, home: Arc<Shared<K, O>>) -> Self {
        Cell {
            state: Self::held(op),
            timer: TimerWord::new(),
            seq,
            watch_hint: AtomicUsize::new(0),
            home,
        }
    }

    /// Makes a spare cell (one that [`clear`](Self::clear) emptied) a new
    /// submission's, as [`new`](Self::new) does, in the same purgatory.
    pub(crate) fn renew(&mut self, op: O, seq: u64) {
        // Every field named, so that a field added to the cell is not
        // forgotten here; `home` is the one kept.
        let Cell {
            state,
            timer,
            seq: order,
            watch_hint,
            home: _,
        } = self;
        *state = Self::held(op);
        *timer = TimerWord::new();
        *order = seq;
        *watch_hint.get_mut() = 0;
    }

    /// A state held by the submitter until it has watched and scheduled the
    /// operation.
    fn held(op: O) -> OpState<Pending<K, O>> {
        OpState::new_held(Pending {
            op,
            links: Links::new(),
        })
    }

    /// Asks the CPU for the lines of `cell`, reference counts included,
    /// ready to be written: for a thread about to complete it (see
    /// `unchecked/prefetch.rs`). At most the first 512 bytes: an operation
    /// type of several KB would otherwise turn each call into a stream of
    /// prefetches (a test keeps `purgatory_perf`'s cell within reach).
    #[inline(always)]
    pub(crate) fn prefetch(cell: &CellRef<K, O>) {
        // The count sits just before the value (a hint: if the layout ever
        // changes, a line is fetched in vain).
        let counts = std::mem::size_of::<usize>();
        let start = (CellRef::as_ptr(cell) as usize).wrapping_sub(counts);
        let len = Self::ALLOCATED.min(512);
        prefetch::lines_for_write(start, len);
    }

    /// Drops what the user left in an answered cell (a result never taken,
    /// a waker), so that a spare cell holds no user data.
    pub(crate) fn clear(&mut self) {
        self.state.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_operations_cell_is_prefetched_whole() {
        // `purgatory_perf`'s operation, under `u64` keys.
        struct Fake {
            _completes_at: std::time::Instant,
            _timeout: std::time::Duration,
        }
        let cell = Cell::<u64, Fake>::ALLOCATED;
        assert!(
            cell <= 512,
            "{cell} bytes, beyond what `Cell::prefetch` fetches"
        );
    }

    #[test]
    fn a_32_byte_operations_cell_fits_two_cache_lines() {
        // The operation is kept once (the handle takes it where it lies),
        // the hand-over's phases are bits of the state word and its lock's
        // byte sits beside that word, a watch link is its place alone, and
        // a lane's timer entry is found from the timer word: with its
        // reference count and its purgatory's, the cell of a 32-byte
        // operation under `u64` keys (`purgatory_perf`'s: an `Instant` and
        // a `Duration`) is 128 bytes, an allocator size class of its own,
        // niche in the operation or not.
        let count = std::mem::size_of::<usize>();
        assert_eq!(count + std::mem::size_of::<Cell<u64, [u64; 4]>>(), 128);
        assert_eq!(
            count + std::mem::size_of::<Cell<u64, (std::time::Instant, std::time::Duration)>>(),
            128
        );
        // Each byte of the operation costs one byte of the cell, not two.
        assert_eq!(count + std::mem::size_of::<Cell<u64, [u64; 2]>>(), 112);
        assert_eq!(count + std::mem::size_of::<Cell<u64, [u64; 6]>>(), 144);
    }
}
