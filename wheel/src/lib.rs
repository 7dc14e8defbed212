//! A single-threaded hierarchical timing wheel: O(1) insert, cancel and
//! reschedule, idle time skipped for free, any `u64` deadline accepted.
//!
//! This is the timer under the [`purgatory`](../purgatory/index.html) crate,
//! usable on its own. It has no threads, locks or clock inside: the owner
//! moves time with [`TimingWheel::advance`], which makes every behaviour
//! reproducible in a test.
//!
//! # Design
//! - **Levels.** Eleven levels of 64 buckets; level `L`'s buckets are `64^L`
//!   ticks wide, so the top level reaches tick `u64::MAX`. An entry goes to
//!   the level of the highest bit in which its deadline differs from the
//!   current time (the scheme of tokio's wheel): no overflow wheel to create,
//!   no deadline refused, no wrap-around firing early, however long the wheel
//!   has run.
//! - **Cascading.** When a higher-level bucket comes due, entries already due
//!   fire at once and the others move down to the level their deadline now
//!   calls for (Kafka's overflow wheels do the same). Re-inserting with the
//!   exact deadline keeps one-tick precision at every level; the price is at
//!   most one move per level, and entries cancelled before their bucket
//!   comes due (most delayed operations) never move.
//! - **Cascading ahead.** Level 0 has two arrays of 64 buckets, one for this
//!   64-tick window and one for the next, used by turns. An entry due in the
//!   next window goes straight to level 0, and the next window's level-1
//!   bucket moves down while this window runs, a share on each `advance`
//!   in proportion to the ticks gone by, rather than all in the one
//!   `advance` that reaches the window. With 100,000 deadlines spread over
//!   200 ticks, that one advance moved about 32,000 entries and was the
//!   longest, 384-392 µs against 213-217 µs now (`cargo bench --bench
//!   advance_cost`, medians of 10 rounds, three pairs, 2 vCPU Intel Xeon);
//!   in a purgatory it runs under the timer's lock. (A window that opens
//!   a new level-1 span still takes its entries from level 2 at once: one
//!   window in 64.)
//! - **Skipping idle time.** Each level keeps a 64-bit bitmap of its
//!   non-empty buckets. The next due bucket is found with a mask and a
//!   `trailing_zeros` per level, so advancing over a year of empty ticks
//!   costs the same as advancing over one.
//! - **Storage.** Entries live in a slab of 1024-entry pages with a free list
//!   and 32-bit indices; a bucket is an array of slab indices and each entry
//!   records its position there. A cancel leaves a hole that the bucket's
//!   next insert fills (the holes form a free list inside the bucket), so a
//!   cancel touches only the entry and its bucket slot, and an insert the
//!   entry and a bucket slot that is almost always in cache. Firing a bucket
//!   walks an array, not a pointer chain, so its cache misses overlap.
//! - **Ids** carry a generation; see [`TimerId`].
//! - **Deadlines already due** when inserted go to a due list that fires on
//!   the next [`advance`](TimingWheel::advance), whatever its time.
//! - **Lanes.** Beside the wheel, a [`Lane`] keeps entries whose deadlines
//!   arrive in order (those of one timeout: the many delayed operations that
//!   share `request.timeout.ms`) in a FIFO of fixed-size chunks: an insert
//!   writes the next slot, a cancel clears its slot, expiry reads slots in
//!   order, with no cascading. The purgatory gives each of its common
//!   timeouts a lane and everything else to the wheel.
//!
//! # Complexity
//! insert, cancel, reschedule: O(1) (amortised over bucket growth);
//! advance: O(levels) per non-empty bucket reached + O(1) per entry fired or
//! moved; next_expiration: O(levels); memory: O(pending).
//!
//! # Memory
//! An entry takes 32 bytes of slab for `T = u64` (deadline 8, the value 8,
//! generation 4, bucket position 4, bucket number 2, padding: the bucket
//! number doubles as the "vacant" tag, so no `Option` tag word is paid),
//! plus 4 bytes of bucket index, plus spare capacity (the last page of 1024
//! entries, and bucket arrays that grow by doubling). Measured with a
//! counting allocator by `cargo bench --bench compare -- --quick` (deadlines
//! uniform in 1..30,000 ticks; the same on a 2 vCPU AMD EPYC and, at
//! `9306ce7`, on a 2 vCPU Intel Xeon):
//!
//! | pending | bytes per entry |
//! |---|---|
//! | 1,000 | 39.2 |
//! | 100,000 | 37.0 |
//! | 1,000,000 | 39.6 |
//!
//! The `memory_per_entry` test checks the same bound (under 48) on every run.
//! Once every entry is cancelled, about 57 KB stay allocated whatever the
//! peak was (one page and the headers of the twelve bucket arrays): 57,472
//! bytes after 1e3 and 57,448 after 1e5 and 1e6 in the run at `9306ce7`,
//! and 57,448 after 1e7 by
//! `cargo bench --bench compare -- --pending 10000000 --workload insert_cancel`.
//!
//! When the wheel becomes empty it returns all pages but one and every
//! bucket buffer. Before that, an entry cannot move (its [`TimerId`] names
//! its slot), so pages go back by a sweep: once at most three quarters of
//! the slots are occupied, a sweep frees every page with nothing in it and
//! rebuilds the free list lowest slot first, 8 pages per removal or
//! advance (all at once when fewer than 1,024 entries are left), so that
//! no single call pays for the whole walk. It also sets a ceiling over the
//! pages that hold the population and an eighth more: new entries go
//! below it, and once the entries above have fired or been cancelled,
//! their pages go. So a wheel whose population doubled for a while (a
//! slow spell of the thread that answers) and came back gives the extra
//! pages back within one turnover of its entries, though each of them was
//! pinned by a survivor when the population came back; should the
//! population grow first, the ceiling goes (see `slab.rs`).
//!
//! A bucket that empties keeps its buffer if it is at most 1 KB; a larger
//! one leaves it for a pool of at most eight, from which the next bucket
//! to outgrow 1 KB takes the largest (a buffer over four slots per pending
//! entry is a burst's leftover and is freed).
//! A level's 64 buckets fill in turn, so without the pool each would keep
//! its own peak for the whole lap: under a steady 32 entries a tick due
//! 100-199 ticks ahead, the wheel held 171 bytes per pending entry that way
//! and holds 50 with the pool (the
//! `bucket_buffers_follow_the_buckets_in_use_not_each_buckets_peak` test).
//!
//! A wheel that took a burst of 1e6 entries and then had all but one
//! cancelled holds 0.07 MB of its 39.6 MB peak
//! (`cargo run --release --example burst_memory` at the workspace root).
//! Entries that outlive a burst pin their pages: at worst one per page.
//! With every hundredth entry of the same burst left pending, 39.2 MB of
//! the 39.6 MB stays for those 10,000 until they leave (a page is 1,024
//! slots); new inserts fill the vacant slots first.
//!
//! # Example
//! ```
//! use timing_wheel::TimingWheel;
//!
//! let mut wheel = TimingWheel::new();
//! let session = wheel.insert(10_000, "member-1").unwrap();
//! // Every heartbeat pushes the session deadline back.
//! wheel.reschedule(session, 13_000);
//! let mut expired = Vec::new();
//! wheel.advance(12_999, |_, member| expired.push(member));
//! assert!(expired.is_empty());
//! wheel.advance(u64::MAX, |_, member| expired.push(member));
//! assert_eq!(expired, ["member-1"]);
//! ```
#![warn(missing_docs)]
#![deny(unsafe_code)]

mod bucket;
mod clock;
mod error;
mod id;
mod lane;
mod level;
#[allow(unsafe_code)]
mod payload;
mod scale;
mod slab;
mod timer;
mod wheel;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{ConfigError, InsertError, PushError};
pub use id::TimerId;
pub use lane::Lane;
pub use scale::TickScale;
pub use timer::Timer;
pub use wheel::{TimingWheel, WheelStats};
