//! What a burst leaves allocated once it is over: with nothing left, with
//! one long-lived entry surviving it, and with one in a hundred of its own
//! left pending (stragglers that wait out their timeout while the rest
//! complete); figures in `BENCHMARKS.md`.
//!
//! `cargo run --release --example burst_memory [-- N]` (N defaults to 1e6)
//!
//! For the timing wheel alone (N timers, cancelled) and for a purgatory (N
//! operations under the same 3 keys, force-completed): bytes allocated at
//! the peak and after the burst, counted by the allocator the `compare`
//! bench uses (this program's own vector of ids or handles left out).

#[path = "../benches/compare/alloc.rs"]
mod alloc;

use request_purgatory::purgatory::{DelayedOperation, ManualClock, Outcome, Purgatory};
use request_purgatory::timing_wheel::TimingWheel;
use std::time::Duration;

#[global_allocator]
static ALLOCATOR: alloc::Counting<std::alloc::System> = alloc::Counting(std::alloc::System);

/// Answered only by `force_complete` (or its timeout).
struct Parked(Duration);

impl DelayedOperation for Parked {
    fn timeout(&self) -> Duration {
        self.0
    }
    fn try_complete(&mut self) -> bool {
        false
    }
    fn on_complete(&mut self, _: Outcome) {}
}

/// What a vector of ids or handles takes: the program's own, not counted.
fn vec_bytes<T>(v: &Vec<T>) -> isize {
    (v.capacity() * std::mem::size_of::<T>()) as isize
}

fn mb(bytes: isize) -> f64 {
    bytes as f64 / 1e6
}

/// What outlives the burst.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Left {
    Nothing,
    /// One entry with a longer deadline, submitted among the first.
    Survivor,
    /// Every hundredth of the burst's own entries.
    OneIn100,
}

impl Left {
    fn stays(self, i: usize) -> bool {
        self == Left::OneIn100 && i % 100 == 99
    }

    /// Ends each of the burst's `entries` with `end`, but for those that
    /// stay, which it hands back.
    fn end_the_rest<T>(self, entries: Vec<T>, mut end: impl FnMut(T)) -> Vec<T> {
        let kept = (0..entries.len()).filter(|&i| self.stays(i)).count();
        let mut stragglers = Vec::with_capacity(kept);
        for (i, entry) in entries.into_iter().enumerate() {
            match self.stays(i) {
                true => stragglers.push(entry),
                false => end(entry),
            }
        }
        stragglers
    }
}

fn wheel(n: u64, left: Left) {
    let base = alloc::in_use();
    let mut wheel: TimingWheel<u64> = TimingWheel::new();
    if left == Left::Survivor {
        wheel.insert(3_600_000, 0).expect("room");
    }
    let ids: Vec<_> = (0..n)
        .map(|i| wheel.insert(1 + i % 30_000, i).expect("room"))
        .collect();
    let peak = alloc::in_use() - base - vec_bytes(&ids);
    let stragglers = left.end_the_rest(ids, |id| {
        wheel.cancel(id);
    });
    println!(
        "wheel,     left {:<9}: peak {:>7.1} MB, after the burst {:>7.2} MB ({} pending)",
        format!("{left:?}"),
        mb(peak),
        mb(alloc::in_use() - base - vec_bytes(&stragglers)),
        wheel.len()
    );
}

fn purgatory(n: u64, left: Left) {
    let base = alloc::in_use();
    let purgatory: Purgatory<u64, Parked> = Purgatory::builder("burst")
        .manual(ManualClock::new())
        .build()
        .expect("valid purgatory");
    let keys = [3, 17, 42];
    let submit = |timeout| {
        purgatory
            .try_complete_else_watch(Parked(timeout), &keys)
            .expect("running")
    };
    // The survivor comes after the first of the burst, so that it shares
    // their group (its key set is a recent one by then).
    let mut handles = Vec::with_capacity(n as usize);
    handles.push(submit(Duration::from_secs(30)));
    let long = (left == Left::Survivor).then(|| submit(Duration::from_secs(3600)));
    handles.extend((1..n).map(|_| submit(Duration::from_secs(30))));
    let peak = alloc::in_use() - base - vec_bytes(&handles);
    let stragglers = left.end_the_rest(handles, |handle| {
        handle.force_complete();
    });
    println!(
        "purgatory, left {:<9}: peak {:>7.1} MB, after the burst {:>7.2} MB ({} pending, {} spare cells)",
        format!("{left:?}"),
        mb(peak),
        mb(alloc::in_use() - base - vec_bytes(&stragglers)),
        purgatory.delayed(),
        purgatory.metrics().spare_cells
    );
    drop(long);
}

fn main() {
    let n = std::env::args()
        .nth(1)
        .map_or(1_000_000, |v| v.parse().expect("N is a number"));
    let cases = [Left::Nothing, Left::Survivor, Left::OneIn100];
    for left in cases {
        wheel(n, left);
    }
    for left in cases {
        purgatory(n, left);
    }
}
