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
//! cleared (the user's operation and waker are dropped at once) and kept;
//! submissions take a kept cell before they allocate. Spare cells hold no
//! user data, and shutdown gives them all back.
//!
//! A cell keeps a reference to its purgatory (`Cell::home`) from its
//! allocation to its free, through every reuse: a handle reaches the
//! purgatory through its cell, and a submission and its answer touch no
//! reference count of the purgatory's, which two cores would pass between
//! them twice a request. So spare cells refer back to the purgatory that
//! holds them. Shutdown ends that cycle: [`SpareCells::release`] frees them
//! all, and nothing is kept after it (checked under each magazine's lock,
//! which `release` takes in turn), so the purgatory is freed with its last
//! handle.
//!
//! # Magazines
//! Cells are kept in *magazines* of [`MAGAZINE`] cells, as in Bonwick's
//! slab allocator: each thread has one of its own (by its number, see
//! `thread_stripe.rs`), which it takes cells from and gives cells back to
//! without meeting another thread, and a *depot* under a mutex trades a
//! thread's full magazine for an empty one, or an empty one for a full
//! one. When the submitting and the answering threads differ, the two
//! cross once per magazine instead of once per cell: a shared pool's lock
//! and the slot a cell was pushed to were two cache lines that moved
//! between the cores on every request, both ways.
//!
//! A thread's magazine is a stack: it hands out the cell given back last,
//! the one most likely still in a cache, and its next cell is known, so
//! taking one asks the CPU for the next one's lines (`Cell::prefetch`):
//! a cell that came in a magazine from another thread was last written
//! there, and its miss then overlaps with this submission's work.
//!
//! The depot keeps at most `capacity / MAGAZINE` full magazines (one if
//! `capacity` is smaller); a thread whose magazine is full when the depot
//! is too frees the cell instead. Each thread holds at most one magazine
//! besides, so at most `capacity` cells, plus one magazine per thread that
//! submits or answers, are kept. Threads beyond the numbered ones share one
//! more magazine, under its lock.
//!
//! # Bursts, and trimming what a burst left
//! Answers come in bursts: a late thread at the clock expires a hundred
//! milliseconds of deadlines at once, tens of thousands of cells given back
//! on one thread, which the submitters need again within milliseconds.
//! A depot too small for the burst frees most of them, and the submitters
//! allocate as many again: the allocator then serves a cell-sized class
//! from whatever its freed blocks left, and its pages fragment. In the
//! soak (`examples/soak/main.rs`, jemalloc) that churn alone grew the pages of
//! the cells' size class by 2-3 MiB above the cells in use within
//! minutes when the machine was busy, and never gave them back; with
//! depot room for the bursts (65,536 cells, before trimming came) the
//! class stayed within 0.02 MiB of the cells in use for five minutes.
//!
//! So the depot is sized for bursts, and trims what it does not use, as
//! Bonwick's depot does with its working set: it notes the fewest full
//! magazines it held since its last trim, and frees that many (magazines
//! that sat unused all along) once a round of at least [`TRIM_EVERY`]
//! trades and [`TRIM_PERIOD`] has passed. Cells kept for a burst that never
//! comes back go after one such round; cells that each burst needs stay.
//! A purgatory with no trades (idle, or each thread answering what it
//! submits) trims nothing until trades resume; its spare cells stay within
//! the capacity, and shutdown frees them.
//!
//! The round's length matters as much as its rule. Rounds of 4,096 trades
//! alone (by count, one trade each way per [`MAGAZINE`] operations: some
//! 30 ms at two million a second) freed, between two bursts, the cells
//! that the next burst then allocated again. The freed cells leave holes
//! among the cells in use, which jemalloc's default arenas did not fill
//! again: in the soak with a minute of load beside it, the room between
//! blocks of the cells' size class grew from 860 KiB to 3.1 MiB and
//! stayed, the resident size 7-9% above its first minute. Without
//! trimming the class's room moved by less than 64 KiB and the run
//! passed. With a single arena (`narenas:1`) the room rose as far (4.6
//! MiB after a burst's cells were trimmed) but was filled again a minute
//! later (44 KiB), and the run passed. Rounds of ten seconds (jemalloc's
//! own default decay for freed pages) only free what a whole ten seconds
//! of bursts did not need.

use crate::cell::Cell;
use crate::no_yield_lock::Mutex;
use crate::purgatory::Shared;
use crate::thread_stripe;
use crate::timer_queue::CellRef;
use crate::unchecked::hand_back::{self, MagazineLock};
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Cells in a full magazine: the depot's lock is taken once per this many
/// submissions (and answers), and a thread keeps at most this many idle.
pub(crate) const MAGAZINE: usize = 32;

/// Trades with the depot between two trims at least: a magazine in or out
/// each, so 131,072 cells through the depot, or some 65,000 operations
/// submitted on one thread and answered on another (one trade each way per
/// [`MAGAZINE`] of them). The clock is read once per this many trades.
pub(crate) const TRIM_EVERY: u32 = 4096;

/// Time between two trims at least: what no trade needed for this long is
/// freed (see the module docs for why not less).
pub(crate) const TRIM_PERIOD: Duration = Duration::from_secs(10);

type Magazine<K, O> = Vec<CellRef<K, O>>;

/// A magazine on a cache line of its own, behind a lock that only its
/// thread takes on the hot path (so the lock's line stays in that thread's
/// cache).
type OwnMagazine<K, O> = CachePadded<MagazineLock<K, O>>;

pub(crate) struct SpareCells<K, O> {
    /// Each thread's magazine, by its number; empty when none are kept.
    own: Box<[OwnMagazine<K, O>]>,
    /// The magazine of threads beyond the numbered ones.
    shared: OwnMagazine<K, O>,
    /// On lines of its own: both threads write its lock at every trade,
    /// and every submission and every give-back reads `own`; when the two
    /// shared a line, each trade cost the other thread a miss.
    depot: CachePadded<Mutex<Depot<K, O>>>,
    /// Cells in a full magazine: [`MAGAZINE`], or fewer for a smaller
    /// capacity.
    magazine: usize,
    /// Full magazines the depot keeps at most.
    full_max: usize,
    /// Set by [`release`](Self::release): no more cells are kept. Read
    /// under a magazine's lock, so that no cell is kept after `release`
    /// has emptied that magazine (a kept cell refers to the purgatory,
    /// which holds the pool: it would never be freed).
    released: AtomicBool,
}

/// Magazines between threads: full ones for a thread that ran dry, empty
/// ones (their buffers) for a thread whose own filled up.
struct Depot<K, O> {
    full: Vec<Magazine<K, O>>,
    empty: Vec<Magazine<K, O>>,
    /// The fewest full magazines held since the last trim.
    low: usize,
    /// Trades since the last trim, or since the clock was last read.
    trades: u32,
    /// When the last trim was (or the pool was made).
    trimmed_at: Instant,
    /// [`TRIM_PERIOD`], but for tests.
    period: Duration,
}

impl<K, O> Depot<K, O> {
    /// Counts a trade; once [`TRIM_EVERY`] of them and the period have
    /// passed since the last trim, takes out the full magazines that no
    /// trade needed since (the oldest), for the caller to free after the
    /// lock.
    fn traded(&mut self) -> Vec<Magazine<K, O>> {
        self.low = self.low.min(self.full.len());
        self.trades += 1;
        if self.trades < TRIM_EVERY {
            return Vec::new();
        }
        self.trades = 0;
        let now = Instant::now();
        if now.duration_since(self.trimmed_at) < self.period {
            return Vec::new();
        }
        self.trimmed_at = now;
        let unused = self.full.drain(..self.low).collect();
        self.low = self.full.len();
        // Their buffers too: an unload takes an empty one or makes one.
        self.empty.truncate(self.full.len());
        unused
    }
}

impl<K, O> SpareCells<K, O> {
    /// A pool that keeps about `capacity` cells (0: none; see the module
    /// docs for the per-thread magazines beside them).
    pub(crate) fn new(capacity: usize) -> Self {
        let magazine = capacity.min(MAGAZINE);
        let stripes = if capacity == 0 {
            0
        } else {
            thread_stripe::count()
        };
        SpareCells {
            own: (0..stripes).map(|_| CachePadded::default()).collect(),
            shared: CachePadded::default(),
            depot: CachePadded::new(Mutex::new(Depot {
                full: Vec::new(),
                empty: Vec::new(),
                low: 0,
                trades: 0,
                trimmed_at: Instant::now(),
                period: TRIM_PERIOD,
            })),
            magazine,
            full_max: capacity.checked_div(magazine).unwrap_or(0),
            released: AtomicBool::new(false),
        }
    }

    /// The calling thread's magazine (the shared one beyond the numbered
    /// threads); only for a pool that [`keeps`](Self::keeps) cells.
    #[inline]
    fn own(&self) -> &MagazineLock<K, O> {
        let own = thread_stripe::current().and_then(|n| self.own.get(n));
        own.unwrap_or(&self.shared)
    }

    /// A cell for a new operation, `op`: a spare one if there is one,
    /// else a new one in `home`, the purgatory that holds this pool.
    pub(crate) fn cell(
        &self,
        op: O,
        seq: u64,
        home: impl FnOnce() -> Arc<Shared<K, O>>,
    ) -> CellRef<K, O> {
        if let Some(mut spare) = self.take() {
            // A parked cell is its last reference (`give_back` hands that
            // one over), so this finds it unique; the test is a plain load.
            if let Some(cell) = CellRef::get_mut(&mut spare) {
                cell.renew(op, seq);
                return spare;
            }
        }
        CellRef::new(Cell::new(op, seq, home()))
    }

    /// The calling thread's next spare cell, if there is one.
    #[inline]
    fn take(&self) -> Option<CellRef<K, O>> {
        if !self.keeps() {
            return None;
        }
        let mut mine = self.own().lock();
        if mine.is_empty() {
            if self.released.load(Ordering::Relaxed) {
                return None;
            }
            self.refill(&mut mine);
        }
        let spare = mine.pop();
        if let Some(next) = mine.last() {
            Cell::prefetch(next);
        }
        spare
    }

    /// Trades the calling thread's empty magazine for a full one from the
    /// depot, if it has one.
    #[cold]
    fn refill(&self, mine: &mut Magazine<K, O>) {
        let mut depot = self.depot.lock();
        let Some(full) = depot.full.pop() else {
            return;
        };
        let empty = std::mem::replace(mine, full);
        depot.empty.push(empty);
        let unused = depot.traded();
        drop(depot);
        drop(unused);
    }

    /// Parks `cell` for reuse, in the pool of its purgatory
    /// (`Cell::home`), if it is answered and `cell` is its last reference;
    /// otherwise drops it. The reference itself is parked, not a clone
    /// (see `unchecked/hand_back.rs`).
    pub(crate) fn give_back(mut cell: CellRef<K, O>) {
        if !cell.home.spare().keeps() || !cell.state.is_done() {
            return;
        }
        // `triomphe`'s `get_mut` is a plain load of the count, not a
        // compare-exchange: no need to test uniqueness before it.
        match CellRef::get_mut(&mut cell) {
            Some(unique) => unique.clear(),
            None => return,
        }
        // Not kept: dropped here, after the lock (it may be the last
        // reference to the purgatory, and with it to this pool).
        let _ = hand_back::park(
            cell,
            |cell| cell.home.spare().own(),
            |cell, mine| cell.home.spare().admits(mine),
        );
    }

    /// Whether this pool keeps cells at all.
    #[inline]
    fn keeps(&self) -> bool {
        !self.own.is_empty()
    }

    /// Whether the calling thread's magazine, `mine` (locked), takes one
    /// more cell: not once the pool is released; when full, only if it
    /// could be traded for an empty one.
    fn admits(&self, mine: &mut Magazine<K, O>) -> bool {
        !self.released.load(Ordering::Relaxed) && (mine.len() < self.magazine || self.unload(mine))
    }

    /// Trades the calling thread's full magazine for an empty one, unless
    /// the depot is full; returns whether it did.
    #[cold]
    fn unload(&self, mine: &mut Magazine<K, O>) -> bool {
        let mut depot = self.depot.lock();
        if depot.full.len() >= self.full_max {
            return false;
        }
        let empty = depot
            .empty
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.magazine));
        let full = std::mem::replace(mine, empty);
        depot.full.push(full);
        let unused = depot.traded();
        drop(depot);
        drop(unused);
        true
    }

    /// Every thread's magazine, the shared one included.
    fn magazines(&self) -> impl Iterator<Item = &OwnMagazine<K, O>> {
        self.own.iter().chain(std::iter::once(&self.shared))
    }

    /// Spare cells held now, in every thread's magazine and in the depot.
    pub(crate) fn len(&self) -> usize {
        let own: usize = self.magazines().map(|m| m.lock().len()).sum();
        own + self.depot.lock().full.iter().map(Vec::len).sum::<usize>()
    }

    /// Sets the least time between two trims (a test's clock: zero trims
    /// at every [`TRIM_EVERY`] trades).
    #[cfg(test)]
    fn trim_period(&self, period: Duration) {
        self.depot.lock().period = period;
    }

    /// Frees every spare cell, and keeps none from now on.
    pub(crate) fn release(&self) {
        self.released.store(true, Ordering::Relaxed);
        let mut all: Vec<Magazine<K, O>> = self
            .magazines()
            .map(|m| std::mem::take(&mut *m.lock()))
            .collect();
        all.append(&mut self.depot.lock().full);
        drop(all);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Outcome;

    /// A pool, in a purgatory without threads for its cells to belong to.
    struct Pool<O> {
        home: Arc<Shared<u32, O>>,
    }

    impl<O> Pool<O> {
        fn new(capacity: usize) -> Self {
            Pool {
                home: Shared::detached(capacity),
            }
        }

        fn cell(&self, op: O, seq: u64) -> CellRef<u32, O> {
            self.home.spare().cell(op, seq, || Arc::clone(&self.home))
        }

        fn give_back(&self, cell: CellRef<u32, O>) {
            assert!(Arc::ptr_eq(&cell.home, &self.home));
            SpareCells::give_back(cell);
        }

        fn len(&self) -> usize {
            self.home.spare().len()
        }

        fn release(&self) {
            self.home.spare().release();
        }

        fn trim_period(&self, period: Duration) {
            self.home.spare().trim_period(period);
        }
    }

    /// Kept cells refer to their purgatory: released, they let it go.
    impl<O> Drop for Pool<O> {
        fn drop(&mut self) {
            self.release();
        }
    }

    #[test]
    fn a_released_pool_lets_its_purgatory_go() {
        let spare = Pool::new(4 * MAGAZINE);
        give_back_answered(&spare, 2 * MAGAZINE + 3);
        let home = Arc::downgrade(&spare.home);
        drop(spare);
        assert_eq!(home.strong_count(), 0, "freed with its last cell");
        // After a release nothing is kept, so nothing holds it again.
        let spare = Pool::new(4 * MAGAZINE);
        spare.release();
        give_back_answered(&spare, 3);
        assert_eq!(spare.len(), 0);
    }

    /// The parking threads hand over their last references to cells, and
    /// with them the last references to the purgatory: released meanwhile,
    /// it must be freed with the last cell, whichever thread drops it.
    #[test]
    fn cells_parked_while_the_pool_is_released_free_it_with_the_last() {
        for _ in 0..200 {
            let spare = Pool::new(4 * MAGAZINE);
            let batches: Vec<Vec<_>> = (0..3)
                .map(|_| {
                    (0..MAGAZINE as u64 + 5)
                        .map(|i| answered(&spare, i))
                        .collect()
                })
                .collect();
            let home = Arc::downgrade(&spare.home);
            let start = Arc::new(std::sync::Barrier::new(batches.len() + 1));
            let givers: Vec<_> = batches
                .into_iter()
                .map(|batch| {
                    let start = Arc::clone(&start);
                    std::thread::spawn(move || {
                        start.wait();
                        batch.into_iter().for_each(SpareCells::give_back);
                    })
                })
                .collect();
            start.wait();
            drop(spare);
            for giver in givers {
                giver.join().unwrap();
            }
            assert_eq!(home.strong_count(), 0, "freed with its last cell");
        }
    }

    /// A cell from `spare` whose operation `op` has been answered (its
    /// result delivered and not taken).
    fn answered<O>(spare: &Pool<O>, op: O) -> CellRef<u32, O> {
        let cell = spare.cell(op, 1);
        cell.state.decide_at_start(Outcome::Completed, |_, _| true);
        assert!(cell.state.is_done());
        cell
    }

    #[test]
    fn a_given_back_cell_is_reused_cleared() {
        let spare = Pool::new(2);
        let cell = answered(&spare, "first".to_string());
        let first = CellRef::as_ptr(&cell);
        spare.give_back(cell);
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
        let spare = Pool::new(4);
        let (a, b) = (answered(&spare, 1u8), answered(&spare, 2u8));
        let (pa, pb) = (CellRef::as_ptr(&a), CellRef::as_ptr(&b));
        spare.give_back(a);
        spare.give_back(b);
        assert_eq!(CellRef::as_ptr(&spare.cell(3, 3)), pb);
        assert_eq!(CellRef::as_ptr(&spare.cell(4, 4)), pa);
    }

    #[test]
    fn shared_and_pending_cells_are_not_kept() {
        let spare = Pool::new(4);
        // Another reference exists: not the last one, not parked.
        let shared = answered(&spare, "shared".to_string());
        let other = CellRef::clone(&shared);
        spare.give_back(shared);
        assert_eq!(spare.len(), 0);
        drop(other);
        // Still pending: never parked (its operation would be lost).
        let pending = spare.cell("pending".to_string(), 3);
        spare.give_back(pending);
        assert_eq!(spare.len(), 0);
        // Keeping none is allowed.
        let none = Pool::<String>::new(0);
        let c = answered(&none, "c".to_string());
        none.give_back(c);
        assert_eq!(none.len(), 0);
    }

    /// Answers `n` operations on this thread and gives their cells back
    /// (made first, so none of them is a cell given back here); returns
    /// where the cells were.
    fn give_back_answered(spare: &Pool<u64>, n: usize) -> Vec<usize> {
        let cells: Vec<_> = (0..n as u64).map(|i| answered(spare, i)).collect();
        cells
            .into_iter()
            .map(|cell| {
                let at = CellRef::as_ptr(&cell) as usize;
                spare.give_back(cell);
                at
            })
            .collect()
    }

    #[test]
    fn a_thread_keeps_one_magazine_and_the_depot_the_capacity() {
        // A capacity below a magazine: magazines of that size, one in the
        // depot.
        let small = Pool::new(3);
        give_back_answered(&small, 10);
        assert_eq!(small.len(), 3 + 3);
        small.release();
        assert_eq!(small.len(), 0);
        // Two magazines' worth of capacity: two full in the depot, the
        // thread's own full beside them, the rest freed.
        let spare = Pool::new(2 * MAGAZINE);
        give_back_answered(&spare, 10 * MAGAZINE);
        assert_eq!(spare.len(), 3 * MAGAZINE);
        // Taken back in full: the own magazine, then the depot's.
        let cells: Vec<_> = (0..3 * MAGAZINE as u64).map(|i| spare.cell(i, i)).collect();
        assert_eq!(spare.len(), 0);
        drop(cells);
    }

    /// A pool holding a burst of 40 magazines given back on another
    /// thread, of which the next submissions take 10 and give them back:
    /// 30 sit unused.
    fn after_a_burst() -> Arc<Pool<u64>> {
        let spare = Arc::new(Pool::new(64 * MAGAZINE));
        // A burst: an answering thread fills 40 magazines at once.
        {
            let spare = Arc::clone(&spare);
            std::thread::spawn(move || give_back_answered(&spare, 40 * MAGAZINE))
                .join()
                .unwrap();
        }
        let held = spare.len();
        assert!(held >= 39 * MAGAZINE, "the burst is kept: {held}");
        let taken: Vec<_> = (0..10 * MAGAZINE as u64)
            .map(|i| spare.cell(i, i))
            .collect();
        drop(taken);
        spare
    }

    /// `n` trades in balance: rounds of a magazine and one cell taken and
    /// given back, a refill and an unload each, as many cells kept as before.
    fn trades(spare: &Pool<u64>, n: u32) {
        for _ in 0..n / 2 {
            give_back_answered(spare, MAGAZINE + 1);
        }
    }

    #[test]
    fn the_depot_frees_what_a_round_of_trades_left_unused() {
        let spare = after_a_burst();
        spare.trim_period(Duration::ZERO);
        trades(&spare, TRIM_EVERY / 2);
        assert!(
            spare.len() >= 29 * MAGAZINE,
            "not before a round: {}",
            spare.len()
        );
        // Two rounds: the first may have begun before the burst.
        trades(&spare, 2 * TRIM_EVERY);
        // What every trade of the round left in the depot is gone; what
        // stays: the magazine this thread trades, its own, and the exited
        // thread's own (a cell more in one of them at most).
        assert!(spare.len() <= 3 * MAGAZINE + 1, "trimmed: {}", spare.len());
        // Cells in steady use are not trimmed: a burst that empties the
        // depot in every round finds the previous burst's cells there.
        let burst = |n| {
            let taken: Vec<_> = (0..n as u64 * MAGAZINE as u64)
                .map(|i| spare.cell(i, i))
                .collect();
            drop(taken);
            give_back_answered(&spare, n * MAGAZINE);
        };
        for _ in 0..3 {
            burst(20);
            trades(&spare, TRIM_EVERY);
        }
        assert!(
            spare.len() >= 20 * MAGAZINE,
            "the burst's cells stay: {}",
            spare.len()
        );
        spare.release();
    }

    #[test]
    fn a_round_lasts_the_trim_period_too() {
        let spare = after_a_burst();
        // However many trades: the period has not passed.
        spare.trim_period(Duration::from_secs(3600));
        trades(&spare, 4 * TRIM_EVERY);
        assert!(spare.len() >= 29 * MAGAZINE, "kept: {}", spare.len());
        // Once it has, the next count of trades frees what sat unused since
        // the last trim, all of the time before included (two rounds'
        // trades: the count stands anywhere in the last one).
        spare.trim_period(Duration::ZERO);
        trades(&spare, 2 * TRIM_EVERY);
        assert!(spare.len() <= 3 * MAGAZINE + 1, "trimmed: {}", spare.len());
        spare.release();
    }

    #[test]
    fn threads_beyond_the_numbered_ones_share_a_magazine() {
        // More threads alive at once than there are numbered magazines:
        // some use the shared one, concurrently. Each keeps the cells it
        // took last: all alive at once, no cell may be in two threads' hands.
        let threads = thread_stripe::count() + 8;
        let capacity = 4 * MAGAZINE;
        let spare = Arc::new(Pool::new(capacity));
        let barrier = Arc::new(std::sync::Barrier::new(threads));
        let workers: Vec<_> = (0..threads as u64)
            .map(|t| {
                let (spare, barrier) = (Arc::clone(&spare), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    // Every thread holds its number while all others do.
                    thread_stripe::current();
                    barrier.wait();
                    let mut kept = Vec::new();
                    for round in 0..50 {
                        give_back_answered(&spare, 3);
                        kept = (0..3).map(|i| spare.cell(t, round * 3 + i)).collect();
                    }
                    kept
                })
            })
            .collect();
        let kept: Vec<(u64, CellRef<u32, u64>)> = workers
            .into_iter()
            .enumerate()
            .flat_map(|(t, w)| w.join().unwrap().into_iter().map(move |c| (t as u64, c)))
            .collect();
        let mut at: Vec<usize> = kept
            .iter()
            .map(|(_, c)| CellRef::as_ptr(c) as usize)
            .collect();
        at.sort_unstable();
        at.dedup();
        assert_eq!(at.len(), 3 * threads, "a cell in two threads' hands");
        for (i, (t, cell)) in kept.iter().enumerate() {
            assert_eq!(cell.seq, 49 * 3 + (i % 3) as u64, "thread {t}'s own cell");
            assert!(!cell.state.is_done());
        }
        // The depot, plus a magazine per numbered thread and the shared one.
        assert!(spare.len() <= capacity + (thread_stripe::count() + 1) * MAGAZINE);
        drop(kept);
        spare.release();
        assert_eq!(spare.len(), 0);
    }

    #[test]
    fn cells_given_back_on_one_thread_serve_submissions_on_another() {
        let spare = Arc::new(Pool::new(4 * MAGAZINE));
        // The answering thread fills two magazines and starts a third.
        let given: Vec<usize> = {
            let spare = Arc::clone(&spare);
            std::thread::spawn(move || give_back_answered(&spare, 2 * MAGAZINE + 1))
                .join()
                .unwrap()
        };
        // Its thread has exited: its number, and the magazine under it, are
        // free for the next thread that claims it, maybe this one. Either
        // way this thread reaches at least the two full magazines.
        let taken: Vec<_> = (0..2 * MAGAZINE as u64).map(|i| spare.cell(i, i)).collect();
        let reused = taken
            .iter()
            .filter(|c| given.contains(&(CellRef::as_ptr(c) as usize)))
            .count();
        assert_eq!(reused, 2 * MAGAZINE);
        for (i, cell) in taken.iter().enumerate() {
            assert_eq!(cell.seq, i as u64);
            assert!(!cell.state.is_done());
        }
    }

    #[test]
    fn giving_back_drops_the_users_result_at_once() {
        let spare = Pool::new(1);
        let op = Arc::new(());
        let cell = answered(&spare, Arc::clone(&op));
        assert_eq!(Arc::strong_count(&op), 2, "the result holds the operation");
        spare.give_back(cell);
        assert_eq!(Arc::strong_count(&op), 1, "a spare cell holds no user data");
    }

    #[test]
    fn what_every_operation_reads_is_not_on_the_depots_lines() {
        use std::mem::{align_of, offset_of, size_of};
        type P = SpareCells<u64, u64>;
        // The 64-byte lines a field's bytes touch, counted from the pool's
        // start, which is aligned to at least that.
        assert!(align_of::<P>() >= 64);
        let lines = |at: usize, len: usize| at / 64..(at + len).div_ceil(64);
        let depot = lines(offset_of!(P, depot), size_of::<Mutex<Depot<u64, u64>>>());
        for (name, at, len) in [
            (
                "own",
                offset_of!(P, own),
                size_of::<Box<[OwnMagazine<u64, u64>]>>(),
            ),
            ("magazine", offset_of!(P, magazine), size_of::<usize>()),
            ("full_max", offset_of!(P, full_max), size_of::<usize>()),
            ("released", offset_of!(P, released), size_of::<AtomicBool>()),
        ] {
            assert!(
                lines(at, len).all(|line| !depot.contains(&line)),
                "{name} shares a line with the depot"
            );
        }
    }
}
