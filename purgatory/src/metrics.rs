//! Counters of one purgatory.

use crate::outcome::Outcome;
use crate::thread_stripe;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicI64, Ordering};

/// A snapshot of a purgatory's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgatoryMetrics {
    /// The purgatory's name (Kafka tags its metrics with it: "Produce", "Fetch"...).
    pub name: String,
    /// Watch entries of pending operations (an operation under three keys
    /// counts three): Kafka's `PurgatorySize`.
    pub watched: usize,
    /// Pending operations: Kafka's `NumDelayedOperations`.
    pub delayed: usize,
    /// Operations completed because their condition held (or by `force_complete`).
    pub completed: u64,
    /// Operations that expired.
    pub expired: u64,
    /// Operations cancelled through their key.
    pub cancelled: u64,
    /// Operations answered by shutdown.
    pub shutdown: u64,
    /// Panics caught in operations' methods (`try_complete`, `on_complete`,
    /// `on_expiration`, `timeout`). A panicking `Drop` is caught and logged
    /// but not counted here.
    pub panics: u64,
    /// Entries held in watch lists, completed ones included: equal to
    /// `watched` for the wheel, larger for the DelayQueue baseline until it purges.
    pub held_watch_entries: usize,
    /// Entries held by the timer, completed ones included.
    pub held_timer_entries: usize,
    /// Cells of answered operations kept for reuse (at most
    /// [`PurgatoryBuilder::spare_cells`](crate::PurgatoryBuilder::spare_cells),
    /// plus a magazine per thread); they hold no user data.
    pub spare_cells: usize,
    /// The bytes the purgatory holds, by structure.
    pub held_bytes: HeldBytes,
}

/// The bytes a purgatory holds on the heap, by structure: what to watch
/// for a broker that accounts for its memory, and where a growth is.
///
/// Computed when the snapshot is taken, under each structure's lock in
/// turn, from the room each has allocated (not what the allocator adds
/// around it). Not counted: what an operation or a key owns on the heap
/// (a `Vec` in the operation, a `String` key), the links of an operation
/// whose key set came for the first time (one per key beyond the first,
/// on the heap), and the lists of due operations that the expiring
/// threads keep between turns (each at most the room of a round).
///
/// ```
/// use purgatory::{DelayedOperation, Outcome, Purgatory};
/// use std::time::Duration;
///
/// struct Wait;
/// impl DelayedOperation for Wait {
///     fn try_complete(&mut self) -> bool { false }
///     fn on_complete(&mut self, _: Outcome) {}
///     fn timeout(&self) -> Duration { Duration::from_secs(30) }
/// }
///
/// let purgatory = Purgatory::<u32, Wait>::builder("Fetch").build().unwrap();
/// let handles: Vec<_> = (0..1000)
///     .map(|i| purgatory.try_complete_else_watch(Wait, &[i % 10]).unwrap())
///     .collect();
/// let held = purgatory.metrics().held_bytes;
/// // A thousand cells, with their watch entries and timer entries.
/// assert!(held.pending_cells >= 1000 * std::mem::size_of::<Wait>());
/// assert!(held.watch_lists >= 1000 * std::mem::size_of::<usize>());
/// assert!(held.timer > 0);
/// assert_eq!(held.total(), held.pending_cells + held.spare_cells + held.watch_lists + held.timer);
/// # drop(handles);
/// # purgatory.shutdown();
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeldBytes {
    /// The cells of pending operations (`delayed` of them), each with its
    /// operation inline. The cell of an answered operation whose handle
    /// is still held is counted nowhere until the handle goes.
    pub pending_cells: usize,
    /// The spare cells (`spare_cells` of them).
    pub spare_cells: usize,
    /// The watch lists: their chunks of entries and spare slots, the
    /// lists themselves, each group's copy of its keys, and the key and
    /// group maps' tables.
    pub watch_lists: usize,
    /// The timer: the wheel's entries, buckets and bookkeeping, the lanes'
    /// chunks, and the expiry buffers kept by the thread at the clock (as
    /// its last turn found them). For the DelayQueue baseline, its heap.
    pub timer: usize,
}

impl HeldBytes {
    /// All of them.
    pub fn total(&self) -> usize {
        self.pending_cells + self.spare_cells + self.watch_lists + self.timer
    }
}

/// The live counters, striped: each thread adds to its own cache line, so
/// a submitter and a completer on different threads never write one line
/// between them (that line would cross between cores on every request). A
/// read sums the stripes; it is exact whenever no operation is being
/// submitted or answered at that moment, and otherwise off by at most
/// those in flight.
///
/// A stripe is *owned*: while a thread lives, no other thread writes its
/// stripe (see `thread_stripe.rs`), so the owner adds with a plain load and
/// store instead of a locked read-modify-write. There are three counter
/// updates per request (how many operations are pending is derived, not
/// counted: see `Purgatory::delayed`), and a locked instruction also waits
/// for the thread's earlier stores to drain. Threads beyond the owned
/// stripes share one more stripe, with atomic adds.
pub(crate) struct Counters {
    owned: Box<[CachePadded<Stripe>]>,
    shared: CachePadded<Stripe>,
}

#[derive(Default)]
struct Stripe {
    // Signed: an operation submitted on one thread and answered on another
    // adds on one stripe and subtracts on the other.
    watched: AtomicI64,
    outcomes: [AtomicI64; 4],
    panics: AtomicI64,
}

impl Counters {
    pub(crate) fn new() -> Self {
        Counters {
            owned: (0..thread_stripe::count())
                .map(|_| CachePadded::default())
                .collect(),
            shared: CachePadded::default(),
        }
    }

    fn add(&self, field: impl Fn(&Stripe) -> &AtomicI64, delta: i64) {
        // A thread being torn down may have given its number back already:
        // it uses the shared stripe then.
        let owned = thread_stripe::current().and_then(|n| self.owned.get(n));
        match owned {
            Some(stripe) => {
                // Only this thread writes this stripe (see `StripeClaim`).
                let counter = field(stripe);
                counter.store(counter.load(Ordering::Relaxed) + delta, Ordering::Relaxed);
            }
            None => {
                field(&self.shared).fetch_add(delta, Ordering::Relaxed);
            }
        }
    }

    /// The sum over stripes; never below zero (a read racing a submission
    /// and its completion can see the subtraction first).
    fn total(&self, field: impl Fn(&Stripe) -> &AtomicI64) -> u64 {
        let sum: i64 = self
            .owned
            .iter()
            .chain(std::iter::once(&self.shared))
            .map(|s| field(s).load(Ordering::Relaxed))
            .sum();
        u64::try_from(sum).unwrap_or(0)
    }

    pub(crate) fn watched_add(&self, n: usize) {
        self.add(|s| &s.watched, n as i64);
    }

    pub(crate) fn watched_sub(&self, n: usize) {
        self.add(|s| &s.watched, -(n as i64));
    }

    pub(crate) fn record(&self, outcome: Outcome) {
        self.add(|s| &s.outcomes[outcome.code() as usize], 1);
    }

    pub(crate) fn panicked(&self) {
        self.add(|s| &s.panics, 1);
    }

    pub(crate) fn watched(&self) -> usize {
        self.total(|s| &s.watched) as usize
    }

    /// Operations answered, whatever the outcome.
    pub(crate) fn answered(&self) -> u64 {
        Outcome::ALL.into_iter().map(|o| self.count(o)).sum()
    }

    pub(crate) fn count(&self, outcome: Outcome) -> u64 {
        self.total(|s| &s.outcomes[outcome.code() as usize])
    }

    pub(crate) fn panics(&self) -> u64 {
        self.total(|s| &s.panics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    /// More threads alive at once than there are owned stripes (some add on
    /// the shared stripe), in waves whose threads reuse the numbers of the
    /// wave before: no update is lost either way.
    #[test]
    fn concurrent_updates_add_up_exactly() {
        let counters = Arc::new(Counters::new());
        let threads = counters.owned.len() + 8;
        for _wave in 0..3 {
            let barrier = Arc::new(Barrier::new(threads));
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let (counters, barrier) = (Arc::clone(&counters), Arc::clone(&barrier));
                    std::thread::spawn(move || {
                        // Every thread holds its number while all others do.
                        counters.panicked();
                        barrier.wait();
                        for _ in 0..1_000 {
                            counters.watched_add(3);
                            counters.record(Outcome::Completed);
                        }
                        counters.watched_sub(1);
                    })
                })
                .collect();
            for handle in handles {
                handle.join().unwrap();
            }
        }
        let n = 3 * threads as u64;
        assert_eq!(counters.panics(), n);
        assert_eq!(counters.watched() as u64, n * 2_999);
        assert_eq!(counters.count(Outcome::Completed), n * 1_000);
        assert_eq!(counters.count(Outcome::Expired), 0);
    }
}
