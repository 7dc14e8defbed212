//! Timer implementations side by side on the same inputs, in one process.
//! See BENCHMARKS.md. `cargo bench --bench compare -- [--quick] [--json]`
use std::time::Instant;
use timing_wheel::{TimerId, TimingWheel};

/// What every compared timer offers, in 1 ms ticks.
trait Timers {
    type Handle: Copy;
    const NAME: &'static str;
    fn new() -> Self;
    fn insert(&mut self, deadline: u64, value: u64) -> Self::Handle;
    fn cancel(&mut self, handle: Self::Handle) -> bool;
    /// Fires everything due at `now`; returns how many.
    fn advance(&mut self, now: u64) -> usize;
}

/// Only storing and freeing the value in a slab: the floor.
struct Floor(slab::Slab<(u64, u64)>);

impl Timers for Floor {
    type Handle = usize;
    const NAME: &'static str = "floor";
    fn new() -> Self {
        Floor(slab::Slab::new())
    }
    fn insert(&mut self, deadline: u64, value: u64) -> usize {
        self.0.insert((deadline, value))
    }
    fn cancel(&mut self, handle: usize) -> bool {
        self.0.try_remove(handle).is_some()
    }
    fn advance(&mut self, _now: u64) -> usize {
        let n = self.0.len();
        self.0.clear();
        n
    }
}

struct Wheel(TimingWheel<u64>);

impl Timers for Wheel {
    type Handle = TimerId;
    const NAME: &'static str = "wheel";
    fn new() -> Self {
        Wheel(TimingWheel::new())
    }
    fn insert(&mut self, deadline: u64, value: u64) -> TimerId {
        self.0.insert(deadline, value).expect("wheel full")
    }
    fn cancel(&mut self, handle: TimerId) -> bool {
        self.0.cancel(handle).is_some()
    }
    fn advance(&mut self, now: u64) -> usize {
        self.0.advance(now, |_, v| {
            std::hint::black_box(v);
        })
    }
}

/// A small deterministic generator, so every implementation sees the same inputs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

fn insert_cancel<T: Timers>(pending: usize, steps: usize) -> f64 {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut timers = T::new();
    let mut handles: Vec<T::Handle> = (0..pending)
        .map(|i| timers.insert(1 + rng.below(30_000), i as u64))
        .collect();
    let start = Instant::now();
    for step in 0..steps {
        let i = rng.below(pending as u64) as usize;
        assert!(timers.cancel(handles[i]));
        handles[i] = timers.insert(1 + rng.below(30_000), step as u64);
    }
    start.elapsed().as_nanos() as f64 / steps as f64
}

fn expire<T: Timers>(pending: usize) -> f64 {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut timers = T::new();
    for i in 0..pending {
        timers.insert(1 + rng.below(1_000), i as u64);
    }
    let start = Instant::now();
    let fired = timers.advance(1_001);
    assert_eq!(fired, pending);
    start.elapsed().as_nanos() as f64 / pending as f64
}

fn main() {
    for pending in [1_000, 100_000, 1_000_000] {
        for _ in 0..2 {
            println!(
                "insert_cancel @{pending}: {} {:.1} ns, {} {:.1} ns",
                Floor::NAME,
                insert_cancel::<Floor>(pending, 2_000_000),
                Wheel::NAME,
                insert_cancel::<Wheel>(pending, 2_000_000)
            );
        }
    }
    println!(
        "expire @1e6: {} {:.1} ns",
        Wheel::NAME,
        expire::<Wheel>(1_000_000)
    );
}
