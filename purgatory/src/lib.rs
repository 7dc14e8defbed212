//! The request purgatory of a Kafka-like broker: requests that cannot be
//! answered yet are parked, watched under keys (topic-partitions), and
//! answered exactly once, when their condition holds or when they time out.
//!
//! A broker implements [`DelayedOperation`] for each kind of parked request,
//! submits it with [`Purgatory::try_complete_else_watch`], and calls
//! [`Purgatory::check_and_complete`] whenever something changes for a key (a
//! batch was appended, a follower fetched, the high watermark moved).
//! Kafka keeps one purgatory per kind of request; operations of several
//! kinds can also share one as `Box<dyn DelayedOperation>`.
//!
//! # Guarantees
//! - **Exactly once.** Every submitted operation gets exactly one
//!   [`Outcome`], whatever races between its condition, its timeout,
//!   [`force_complete`](Delayed::force_complete) (on the handle or on any
//!   of its [`Completer`]s),
//!   [`cancel_for_key`](Purgatory::cancel_for_key) and
//!   [`shutdown`](Purgatory::shutdown), from any number of threads.
//!   `try_complete` never runs concurrently with itself or with completion.
//!   The state machine behind this is model-checked with loom.
//! - **Nothing held by finished work.** The moment an operation completes it
//!   leaves the timer (a timing-wheel cancel, or its slot in a lane
//!   cleared) and every watch list it is on (its slot emptied in place), O(1)
//!   each; a list that empties is removed, and so is a group of operations
//!   sharing their keys.
//!   There is no purge interval and no reaper walking lists. What stays is
//!   memory without user data: up to
//!   [`spare_cells`](PurgatoryBuilder::spare_cells) emptied cells kept for
//!   reuse (and a magazine of up to 32 per thread), those no trade between
//!   threads needed for a while freed, the rest given back on shutdown;
//!   a lane's cleared 16-byte slots until its head passes them (within one
//!   timeout) or their 4 KiB chunk has no pending entry left (at once); and
//!   a watch list's emptied 8-byte slots until their chunk (at most 4 KiB)
//!   has no pending operation left (at once) or, half full or less, is
//!   filled again by the list's next entries.
//! - **Nobody waits on an operation.** A check or forced outcome that finds
//!   the operation busy on another thread leaves it a note and returns; the
//!   busy thread serves it. Operation code may call back into the purgatory.
//! - **Handles on any executor.** A [`Delayed`] is a `Future` whose waker is
//!   woken from whichever thread answers the operation, after the result
//!   is stored; a poll that races the answer returns `Ready` or `Pending`
//!   and is then woken (model-checked with loom). Places other than the one
//!   that awaits the handle end the operation or push its timeout back
//!   through a [`Completer`]: cloneable, `Send + Sync`, and it never takes
//!   the result.
//! - **Panics in operation code** are caught, counted in
//!   [`PurgatoryMetrics::panics`] and logged with `tracing`; every thread
//!   keeps running. A panicking `try_complete` counts as "not yet", a
//!   panicking `timeout` as zero; an operation's `Drop` that panics where
//!   the purgatory drops it is caught and logged too.
//! - **Nothing lost on shutdown.** [`Purgatory::shutdown`] answers every
//!   pending operation with [`Outcome::Shutdown`] and joins the threads;
//!   later submissions get [`SubmitError::ShutDown`] with the operation back.
//!
//! # Time
//! Operations sharing a timeout (the first 8 timeouts in use, and any later
//! one once a lane empties) wait in that timeout's lane, a FIFO whose
//! deadlines arrive in order, which a completing operation leaves without
//! taking the timer's lock; the others in the timing wheel. With the
//! default [`Driver::Thread`], the purgatory's threads take turns at the
//! clock: the one at it sleeps until the next deadline or non-empty wheel
//! bucket is due (woken early when an earlier deadline is inserted), takes
//! what is due, lets another have the clock and runs the callbacks itself,
//! so an expiry waits for one wake-up; a callback that blocks holds up the
//! others' expiries only until another thread takes the clock.
//! An operation fires within a tick of its deadline when that thread gets
//! a core at once; on a busy machine it waits for one like any thread, and
//! [`PurgatoryBuilder::on_thread_start`] lets the embedder favour the
//! purgatory's threads (a priority, a core of their own). A thread left in
//! a real-time class lends that priority (Linux) to a submitter holding
//! the timer's lock when it waits for it. The expiries of one batch run
//! one after another, so a callback that takes long (or frees memory when
//! the allocator chooses to return pages to the system: see "Memory over
//! hours") delays those behind it.
//! With [`Driver::Manual`] there is no thread: the owner moves time with
//! [`Purgatory::advance_clock`], usually with a [`ManualClock`], which
//! makes tests and simulations deterministic.
//!
//! # Memory
//! A parked operation costs its cell and its share of the timer and of
//! its watch list: 137 bytes each for 1e6 operations of 16 bytes under 3
//! keys (`cargo run --release --example burst_memory`), 121 beyond the
//! operation. The cell (96 bytes and the operation's, with its reference
//! count: two cache lines for an operation of up to 32 bytes) holds the
//! operation, its state word with the hand-over's lock beside it, one
//! watch link inline, its timer id (which also says where a lane's entry
//! is) and submission order, the first watch entry's address as a
//! prefetch hint, the waker of the handle's last poll, and a reference to
//! its purgatory, which it keeps through its reuses (a handle reaches the
//! purgatory through its cell and holds no count of its own, which every
//! submission and answer would touch from two cores). The operation is
//! kept once: the handle takes it where it lies once it is answered, so
//! an operation of `S` bytes costs about `S + 121`. A cell is allocated
//! on the thread that submits and freed on the thread that answers, so
//! the allocator's footprint can grow beyond what is in use. Answers also
//! come in bursts (a thread at the clock that ran late expires tens of
//! thousands at once): the spare cells' depot is sized for them (65,536
//! cells by default) so that a burst's cells serve the next submissions
//! rather than being freed and allocated again, which fragmented
//! jemalloc's pages of the cells' size by 2-3 MiB within minutes on a
//! busy machine. What ten seconds of trades between threads (4,096 at
//! least) did not need is freed; after a burst with no trades behind it,
//! up to the capacity stays (8.0 MB after `burst_memory`'s million
//! operations answered on one thread) until trades resume or shutdown.
//!
//! Operations that wait among many answered early would pin memory: a
//! timer lane's chunk (4 KiB for 252 consecutive submissions of one
//! timeout) and a watch list's chunk (up to 512 entries) go when their last
//! entry does. A lane moves the last sixteenth of a chunk's entries to the
//! wheel (about 40 bytes each) when completions leave no more, and frees
//! the chunk. A watch list fills a chunk fallen to half again before it
//! makes a new one, so its chunks serve later submissions; until then a
//! straggler holds its list's chunk. After a burst of a million
//! operations under one timeout of which one in a hundred stays pending,
//! 17.7 MB stays allocated for those 10,000 (`burst_memory`; 34.8 MB
//! before lanes moved their stragglers out): 7.3 MB of it the spare cells
//! above, 1.1 MB their cells and, by count, about 8 MB the group list's chunks,
//! until the stragglers leave or later submissions fill those chunks.
//! Memory stays below the burst's peak (136.5 MB).
//!
//! What a purgatory holds now, by structure, is in its metrics
//! ([`PurgatoryMetrics::held_bytes`]): the cells of pending operations and
//! the spare ones, the watch lists, the timer. In the soak with 100,000 in
//! flight, for instance, about 14.5 MiB of cells, 1.8-2.6 MiB of watch
//! lists and 4.1-6.5 MiB of timer, of a 24-27 MiB heap (BENCHMARKS.md,
//! "Soak and allocators").
//!
//! # Memory over hours, and the allocator
//! The purgatory's own heap stays flat under load: in the soak (`cargo run
//! --release --example soak`: 100,000 operations in flight, 0.5-1.3M
//! answered a second on 2 cores in a slow stretch of the machine) its
//! heap stayed within 24-27 MiB through the hour, as the flight moved
//! between 55,520 and 100,917 at the ten-second reports. What can
//! grow is the allocator's footprint around it, because a cell is
//! allocated on the thread that submits and freed on the thread that
//! answers. Measured in the soak (BENCHMARKS.md, "Soak and allocators",
//! has the runs):
//! - With 300,000 operations in flight, glibc's malloc grew the resident
//!   size 13.4% past its first minute within three minutes and was still
//!   growing, mimalloc 6.1%; jemalloc 4.0% with its default arenas and
//!   0.9% with one.
//! - jemalloc's default arenas (several per core, a thread keeping to
//!   one) leave the holes of cells freed by the spare cells' trims in one
//!   arena while the next cells come from another: an hour grew 6.6%.
//!   With a single arena (`narenas:1`) the holes were filled again (the
//!   room between blocks 0.4-0.7 MiB in the hours that printed it): the
//!   hour at full load stayed within 1.7% of its first minute, and half
//!   an hour with two threads spinning beside it for a quarter of an
//!   hour within 1.0%.
//! - One arena cost 2.7-6.0% more CPU per request in three of four pairs
//!   of Kafka's purgatory benchmark (`purgatory_perf`, low case at 1M/s).
//!
//! So an embedding broker that runs for long is advised to use jemalloc,
//! with one arena if the rest of its allocations allow (for
//! `tikv-jemallocator`, `_RJEM_MALLOC_CONF=narenas:1` or its
//! `_rjem_malloc_conf` symbol, as the soak's `allocator.rs` sets it);
//! jemalloc's decay (`dirty_decay_ms`) trades the freed pages it keeps,
//! 0-1.6 MiB in the soak's hour, against calls to the system. The purgatory
//! does its part: the spare cells serve a burst's answers to the next
//! submissions instead of freeing them, the wheel gives back the pages a
//! doubled population took, and the expiry's buffers keep the room of
//! recent rounds, not of the largest. [`PurgatoryMetrics::held_bytes`]
//! tells what it holds by structure, so that an embedder can tell its
//! growth from the allocator's.
//!
//! jemalloc returns the freed pages it no longer keeps on whichever thread
//! frees memory once a decay epoch has passed (an `madvise`, and TLB
//! flushes on the other cores), unless its background threads do it
//! (`background_thread:true`; `tikv-jemallocator`'s `background_threads`
//! feature). When the expiry callbacks free memory, that thread is often
//! the purgatory's: in the wire front's consumer-group bench one removal
//! of an expired member spent 3-4 ms returning pages, and the expiries
//! behind it in its batch waited (lateness max 2.9-4.5 ms against 0.9-1.7 ms with the
//! background threads, which the harness and the benches therefore use;
//! docs/performance.md, "The harness's allocator returns pages on threads
//! of its own"). The soak's runs above were measured without them.
//!
//! # Building for speed
//! A submission calls into the spare cells, the watch lists, the timer's
//! lanes and the `timing_wheel` crate's tick arithmetic; a release build
//! without LTO keeps several of those calls out of line (marking them
//! `#[inline]` gained nothing measurable). With LTO in the broker's
//! release profile (`lto = "fat"`, `codegen-units = 1`) the whole program
//! is optimised at once: in Kafka's purgatory benchmark at 2M requests/s
//! (`purgatory_perf`, the `bench-lto` profile against `bench`, five
//! series of six rounds on 2 cores) 1-8% less CPU per request by series
//! mean, lower in 4 to 6 of the 6 rounds of each (BENCHMARKS.md and
//! `docs/performance.md` have the runs).
//!
//! An operation's cell is written at its submission and read again at its
//! answer, often tens of milliseconds later, when it has left the caches:
//! one load from memory per answer (100-400 ns on the machine of
//! `docs/performance.md`). [`Purgatory::check_and_complete`],
//! [`Purgatory::cancel_for_key`] and the timer's expiry ask for each next
//! operation's cell while they answer the one before, so those loads
//! overlap. A loop calling [`Delayed::force_complete`] on one handle after
//! another cannot look ahead that way and waits out each load in turn: to
//! answer many operations at once, answer them through a key they share.
//!
//! # Lock order
//! User code (`try_complete`, `on_complete`, `on_expiration`) runs with no
//! purgatory lock held, only the operation's own `RUNNING` bit, which nobody
//! ever waits for. The internal locks, in the order they may nest:
//!
//! 1. the submitting thread's memory of the group it joined last (no
//!    other thread takes it, but the one that drops the purgatory), then
//! 2. one shard of the map from key sets to their groups (an operation
//!    watched under several keys whose set came lately is entered once, in
//!    its set's group, and the group in each key's list), then
//! 3. one shard of the map from keys to watch lists (both maps hashed over
//!    [`PurgatoryBuilder::shards`]), then
//! 4. one watch list (a key's or a group's).
//!
//! The timer's lock is a leaf: nothing else is taken while it is held, and
//! so are a watch list's, a cell's waker's and the spare cells' depot (taken
//! under a thread's own magazine: `PurgatoryBuilder::spare_cells`). Where an operation is watched needs
//! no lock: only the thread holding its `RUNNING` bit reaches it (the
//! submitter while it sets the operation up, then whoever completes it).
//! Completing an operation takes its watch entries out with no lock (a
//! compare-exchange on each slot), unless a check is walking that list
//! (then it waits for the walk's lock before letting go of the entry),
//! its chunk empties or falls to half full (once a chunk), or it empties
//! the list (then a map's shard too); it takes its lane entry out of the
//! timer with no lock at all. No lock is held while another
//! operation is checked, so the lock cycles behind Kafka's purgatory
//! deadlocks (KAFKA-3994, KAFKA-5970, KAFKA-7697, KAFKA-8334) cannot form.
//! Cells removed under a lock are dropped after it is released, so not even
//! an operation's `Drop` runs under one. A thread that finds the timer's, a
//! watch list's or the spare cells' lock held spins briefly and then sleeps
//! until it is released; it never yields its core, which on a busy machine
//! would leave the thread at the clock queued behind
//! other threads for a scheduler slice per yield (docs/performance.md,
//! "Locks whose waiters sleep rather than yield"). The timer's lock is, on Linux, priority-inheriting for the
//! purgatory's real-time threads (see `on_thread_start`).
//!
//! # Example: produce with `acks=all`, fetch with `min.bytes`
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//! use std::time::Duration;
//! use purgatory::{DelayedOperation, ManualClock, Outcome, Purgatory};
//!
//! /// A partition's log end offset and high watermark.
//! #[derive(Default)]
//! struct Partition { log_end: AtomicU64, high_watermark: AtomicU64 }
//!
//! /// Waits until every in-sync replica has the batch.
//! struct DelayedProduce { partition: Arc<Partition>, required: u64, error: Option<&'static str> }
//!
//! impl DelayedOperation for DelayedProduce {
//!     fn timeout(&self) -> Duration { Duration::from_secs(30) }
//!     fn try_complete(&mut self) -> bool {
//!         self.partition.high_watermark.load(Ordering::Acquire) >= self.required
//!     }
//!     fn on_complete(&mut self, outcome: Outcome) {
//!         self.error = match outcome {
//!             Outcome::Completed => None,
//!             Outcome::Expired => Some("REQUEST_TIMED_OUT"),
//!             Outcome::Cancelled => Some("NOT_LEADER_OR_FOLLOWER"),
//!             Outcome::Shutdown => Some("BROKER_NOT_AVAILABLE"),
//!         };
//!     }
//! }
//!
//! /// Waits until `min_bytes` are readable below the high watermark, or `max_wait`.
//! struct DelayedFetch { partition: Arc<Partition>, from: u64, min_bytes: u64, bytes: u64 }
//!
//! impl DelayedOperation for DelayedFetch {
//!     fn timeout(&self) -> Duration { Duration::from_millis(500) } // fetch.max.wait.ms
//!     fn try_complete(&mut self) -> bool {
//!         let hw = self.partition.high_watermark.load(Ordering::Acquire);
//!         hw.saturating_sub(self.from) >= self.min_bytes
//!     }
//!     fn on_complete(&mut self, _: Outcome) {
//!         // Expired or not, a fetch answers with whatever is there.
//!         let hw = self.partition.high_watermark.load(Ordering::Acquire);
//!         self.bytes = hw.saturating_sub(self.from);
//!     }
//! }
//!
//! let clock = ManualClock::new();
//! let produces = Purgatory::builder("Produce").manual(clock.clone()).build().unwrap();
//! let fetches = Purgatory::builder("Fetch").manual(clock.clone()).build().unwrap();
//! let p0 = Arc::new(Partition::default());
//!
//! // The leader appends 100 bytes; the produce waits for the followers.
//! p0.log_end.store(100, Ordering::Release);
//! let produce = produces
//!     .try_complete_else_watch(DelayedProduce { partition: p0.clone(), required: 100, error: None }, &["topic-0"])
//!     .unwrap();
//! // A consumer wants at least 64 bytes.
//! let fetch = fetches
//!     .try_complete_else_watch(DelayedFetch { partition: p0.clone(), from: 0, min_bytes: 64, bytes: 0 }, &["topic-0"])
//!     .unwrap();
//! assert_eq!((produces.delayed(), fetches.delayed()), (1, 1));
//!
//! // The last follower fetched up to 100: the high watermark moves, and the
//! // broker checks both purgatories for the partition.
//! p0.high_watermark.store(100, Ordering::Release);
//! assert_eq!(produces.check_and_complete(&"topic-0"), 1);
//! assert_eq!(fetches.check_and_complete(&"topic-0"), 1);
//! assert_eq!(produce.wait().operation.error, None);
//! assert_eq!(fetch.wait().operation.bytes, 100);
//! assert_eq!((produces.watched(), fetches.watched()), (0, 0));
//! ```
#![warn(missing_docs)]
#![deny(unsafe_code)]

mod caught;
mod cell;
mod completer;
mod error;
mod handle;
mod hints;
mod metrics;
mod no_yield_lock;
mod operation;
mod outcome;
mod purgatory;
mod recent_key_sets;
mod reused_buffer;
mod spare_cells;
mod thread_stripe;
mod ticks;
mod timer_queue;
#[allow(unsafe_code)]
mod unchecked;
mod watchers;
mod wheel_timer;

pub use cell::Completion;
pub use completer::Completer;
pub use error::{ConfigError, SubmitError};
pub use handle::Delayed;
pub use metrics::{HeldBytes, PurgatoryMetrics};
pub use operation::DelayedOperation;
pub use outcome::Outcome;
pub use purgatory::{Driver, Purgatory, PurgatoryBuilder, ThreadRole};
pub use timer_queue::TimerKind;
pub use timing_wheel::{Clock, ManualClock, SystemClock};
