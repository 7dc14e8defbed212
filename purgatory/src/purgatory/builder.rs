//! How a purgatory is configured and started: its timer, who drives its
//! time, its clock and tick, its map shards and spare cells.

use super::threads::Threads;
use super::{AtClock, Purgatory, Shared};
use crate::error::ConfigError;
use crate::metrics::Counters;
use crate::spare_cells::SpareCells;
use crate::ticks::{self, Ticks};
use crate::timer_queue::{TimerKind, TimerQueue};
use crate::watchers::Watchers;
use crate::DelayedOperation;
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;
use timing_wheel::{Clock, SystemClock};

/// Who moves the purgatory's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// `1 + expiration_threads` threads take turns at the clock: the one
    /// at it sleeps until the next deadline (woken early when an earlier
    /// one is inserted), takes what is due, lets the clock go to the
    /// others and runs the expired operations' callbacks itself, so an
    /// expiry waits for one thread's wake-up, not a timer thread's and
    /// then a worker's.
    ///
    /// Callbacks should be quick. One that blocks holds up only its own
    /// thread: another takes the clock when it next looks (at most a
    /// hundred ticks later, within 10 ms to 1 s, or at once for a batch
    /// that outlasts its tick or a deadline submitted meanwhile), so up to
    /// `expiration_threads` callbacks may block at once before the expiries
    /// behind them wait.
    Thread {
        /// Threads beside the first (at least 1); each can run callbacks
        /// while another keeps the clock.
        expiration_threads: usize,
    },
    /// No thread: the owner calls [`Purgatory::advance_clock`], which
    /// expires what is due on the calling thread. For tests and simulations
    /// with a [`ManualClock`](timing_wheel::ManualClock).
    Manual,
}

/// Which of a purgatory's threads is starting (see
/// [`PurgatoryBuilder::on_thread_start`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ThreadRole {
    /// The first thread (named `{name}-timer`), the first at the clock.
    /// The threads take turns at the clock and at running expired
    /// operations' callbacks (see [`Driver::Thread`]), so each may do
    /// either.
    Timer,
    /// Thread number `.0` beside the first (named `{name}-expiration-{n}`).
    Expiration(usize),
}

/// What [`PurgatoryBuilder::on_thread_start`] runs.
pub(crate) type ThreadHook = Arc<dyn Fn(ThreadRole) + Send + Sync>;

/// Builds a [`Purgatory`]. Defaults: the timing wheel, two threads taking
/// turns at the clock (one expiration thread beside the first), the system
/// clock, 1 ms ticks, 32 shards.
pub struct PurgatoryBuilder<K, O> {
    _types: PhantomData<fn() -> (K, O)>,
    name: String,
    timer: TimerKind,
    driver: Driver,
    clock: Arc<dyn Clock>,
    /// Whether `clock` is the [`SystemClock`], which is then read directly.
    system_clock: bool,
    tick: Duration,
    shards: usize,
    spare_cells: usize,
    on_thread_start: Option<ThreadHook>,
}

impl<K, O> PurgatoryBuilder<K, O>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    O: DelayedOperation,
{
    /// Which timer: the wheel (default) or the DelayQueue baseline.
    pub fn timer(mut self, timer: TimerKind) -> Self {
        self.timer = timer;
        self
    }

    /// Who moves time: the purgatory's threads (default) or the owner.
    pub fn driver(mut self, driver: Driver) -> Self {
        self.driver = driver;
        self
    }

    /// Manual driving with this clock: shorthand for
    /// `.driver(Driver::Manual).clock(clock)`.
    pub fn manual<C: Clock>(self, clock: C) -> Self {
        self.driver(Driver::Manual).clock(clock)
    }

    /// The clock deadlines are measured on. The default, [`SystemClock`],
    /// is read on Linux as the monotonic clock's nanoseconds rather than
    /// through [`Clock::now`]: the same clock, with cheaper arithmetic for
    /// each submission's deadline. Any other clock is read through `now`.
    pub fn clock<C: Clock>(mut self, clock: C) -> Self {
        self.clock = Arc::new(clock);
        self.system_clock = ticks::is_system::<C>();
        self
    }

    /// The timer's resolution: operations expire at most one tick late.
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// How many independently locked parts the map from keys to watch
    /// lists is split into (each key's list also has its own lock). Rounded
    /// up to a power of two between 2 and 65,536.
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards;
        self
    }

    /// How many answered operations' cells may be kept for reuse by later
    /// submissions (default 65,536; 0 keeps none). A cell is kept when the
    /// last reference to an answered operation goes, whether its handle's
    /// or the purgatory's own (a handle dropped at submission); it holds
    /// none of the user's data then.
    /// Reuse spares the allocator the cross-thread frees of a broker, where
    /// one thread submits and another answers, and the fragmentation of
    /// freeing a burst of answers (a late timer's expiries) only to
    /// allocate as many again. What it costs is at most this many cells'
    /// memory held while the purgatory runs (`metrics().spare_cells`),
    /// plus up to one magazine of 32 cells (fewer if `cells` is smaller) per
    /// thread that submits or answers: cells move between threads a
    /// magazine at a time, so that a submitter and a completer do not meet
    /// on every request. Cells kept for a burst are freed once no trade
    /// between threads needed them for ten seconds and 4,096 magazine
    /// trades (some 65,000 operations submitted on one thread and answered
    /// on another), so the default holds memory only while bursts that size
    /// keep coming.
    pub fn spare_cells(mut self, cells: usize) -> Self {
        self.spare_cells = cells;
        self
    }

    /// Runs `hook` on each of the purgatory's threads (with
    /// [`Driver::Thread`]) as it starts, before it does any work: to give
    /// the purgatory's threads a higher priority, pin a thread to a core, or
    /// register it with a profiler. A panic in `hook` is caught and logged;
    /// the thread goes on. [`build`](Self::build) returns once every thread
    /// has run `hook`, so it applies to every operation submitted after.
    ///
    /// Under load, how late operations expire depends on how soon the
    /// thread at the clock gets a core once woken (see the expiry
    /// lateness figures in the repository's BENCHMARKS.md); an embedder
    /// with the privilege can favour them here. A thread that the hook
    /// leaves in a real-time class (`SCHED_FIFO`, `SCHED_RR`,
    /// `SCHED_DEADLINE`) also lends that priority, on Linux, to a submitter
    /// holding the timer's lock when it waits for it, so a submitter
    /// preempted mid-insert does not hold the thread at the clock up until its
    /// next turn. Without the privilege, Linux 6.12 and later let a thread
    /// ask for a shorter scheduler slice at its nice value (`sched_setattr`
    /// with `sched_runtime`, as the `lateness` bench's `--slice-us` does),
    /// which helps less.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use purgatory::{DelayedOperation, Outcome, Purgatory, ThreadRole};
    /// # struct Fetch;
    /// # impl DelayedOperation for Fetch {
    /// #     fn timeout(&self) -> Duration { Duration::from_millis(500) }
    /// #     fn try_complete(&mut self) -> bool { false }
    /// #     fn on_complete(&mut self, _: Outcome) {}
    /// # }
    /// let fetches: Purgatory<u32, Fetch> = Purgatory::builder("Fetch")
    ///     .on_thread_start(|role| {
    ///         if role == ThreadRole::Timer {
    ///             // e.g. setpriority(PRIO_PROCESS, gettid(), -10) on Linux
    ///         }
    ///     })
    ///     .build()
    ///     .unwrap();
    /// ```
    pub fn on_thread_start(mut self, hook: impl Fn(ThreadRole) + Send + Sync + 'static) -> Self {
        self.on_thread_start = Some(Arc::new(hook));
        self
    }

    /// Starts the purgatory (and its threads, with [`Driver::Thread`]:
    /// it returns once they run, each past its
    /// [`on_thread_start`](Self::on_thread_start) hook).
    ///
    /// # Errors
    /// A zero tick, shard count, worker count or purge interval, or a
    /// thread the system would not start.
    pub fn build(self) -> Result<Purgatory<K, O>, ConfigError> {
        if self.shards == 0 {
            return Err(ConfigError::ZeroShards);
        }
        let shards = self.shards.clamp(2, MAX_SHARDS).next_power_of_two();
        if let TimerKind::DelayQueue { purge_interval: 0 } = self.timer {
            return Err(ConfigError::ZeroPurgeInterval);
        }
        if let Driver::Thread {
            expiration_threads: 0,
        } = self.driver
        {
            return Err(ConfigError::ZeroExpirationThreads);
        }
        let ticks = Ticks::new(self.clock, self.system_clock, self.tick)?;
        let shared = Arc::new(Shared::new(
            self.name,
            self.timer,
            ticks,
            shards,
            self.spare_cells,
        ));
        let threads = match self.driver {
            Driver::Manual => None,
            Driver::Thread { expiration_threads } => Some(Threads::start(
                &shared,
                expiration_threads,
                self.on_thread_start,
            )?),
        };
        Ok(Purgatory {
            shared,
            threads: Mutex::new(threads),
        })
    }
}

/// The most map shards [`PurgatoryBuilder::shards`] accepts.
const MAX_SHARDS: usize = 1 << 16;

impl<K, O> Purgatory<K, O>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    O: DelayedOperation,
{
    /// A builder for a purgatory named `name` (used in metrics and logs).
    pub fn builder(name: impl Into<String>) -> PurgatoryBuilder<K, O> {
        PurgatoryBuilder {
            _types: PhantomData,
            name: name.into(),
            timer: TimerKind::Wheel,
            driver: Driver::Thread {
                expiration_threads: 1,
            },
            clock: Arc::new(SystemClock),
            system_clock: true,
            tick: Duration::from_millis(1),
            shards: 32,
            on_thread_start: None,
            spare_cells: 65_536,
        }
    }
}

impl<K: Hash + Eq + Clone, O> Shared<K, O> {
    /// A purgatory's state for settings `build` has checked (a power of
    /// two of shards, a purge interval above 0); no thread is started.
    fn new(
        name: String,
        timer: TimerKind,
        ticks: Ticks,
        shards: usize,
        spare_cells: usize,
    ) -> Self {
        let purge_interval = match timer {
            TimerKind::DelayQueue { purge_interval } => Some(purge_interval),
            TimerKind::Wheel => None,
        };
        Shared {
            name,
            kind: timer,
            ticks,
            timer: TimerQueue::new(timer),
            watchers: Watchers::new(shards, purge_interval.is_some()),
            counters: Counters::new(),
            spare: SpareCells::new(spare_cells),
            shutting_down: AtomicBool::new(false),
            at_clock: AtClock::new(),
            purge_interval,
            since_purge: AtomicU64::new(0),
            submitted: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// A wheel purgatory's state with no threads, for the tests of its
    /// parts: cells need one to belong to (`Cell::home`).
    #[cfg(test)]
    pub(crate) fn detached(spare_cells: usize) -> Arc<Self> {
        let ticks =
            Ticks::new(Arc::new(SystemClock), true, Duration::from_millis(1)).expect("a tick");
        let name = "detached".to_string();
        Arc::new(Self::new(name, TimerKind::Wheel, ticks, 2, spare_cells))
    }
}
