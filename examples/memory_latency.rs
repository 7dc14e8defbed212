//! What a cache miss costs on this machine: the price list behind the
//! purgatory's profiles (`docs/performance.md`, "The distance to the
//! floor").
//!
//! `cargo run --release --example memory_latency`
//!
//! Two figures:
//! - a cache line handed between two threads and back (two spinning
//!   threads, so on two cores when the machine has them): what a line
//!   costs that one core wrote and the other reads next, as a cell's does
//!   between the submitting and the completing thread;
//! - one load at a random line of a working set of growing size, each
//!   load's address read from the line before (so the loads cannot
//!   overlap), in a plain heap buffer with the allocator's pages: what a
//!   completion's first load from its cell costs once the cell has left
//!   the caches.
//!
//! With one core the first figure would measure the scheduler's hand-overs
//! instead, so it is skipped there.

use broker_sim::rng::Rng;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A word alone on its cache lines (two, against the adjacent-line
/// prefetcher).
#[repr(align(128))]
struct Line(AtomicU64);

/// Round trips of a line between two threads, in ns each.
fn round_trip(trips: u64) -> f64 {
    let line = Arc::new(Line(AtomicU64::new(0)));
    let other = {
        let line = Arc::clone(&line);
        std::thread::spawn(move || {
            for i in 0..trips {
                while line.0.load(Ordering::Acquire) != 2 * i + 1 {
                    std::hint::spin_loop();
                }
                line.0.store(2 * i + 2, Ordering::Release);
            }
        })
    };
    let start = Instant::now();
    for i in 0..trips {
        line.0.store(2 * i + 1, Ordering::Release);
        while line.0.load(Ordering::Acquire) != 2 * i + 2 {
            std::hint::spin_loop();
        }
    }
    let elapsed = start.elapsed();
    other.join().expect("the other thread");
    elapsed.as_nanos() as f64 / trips as f64
}

/// Words in a 64-byte line.
const WORDS: usize = 8;

/// ns per dependent load at random lines of `bytes` of memory.
fn random_load(bytes: usize, loads: usize, rng: &mut Rng) -> f64 {
    let lines = bytes / 64;
    // A random cycle through every line: each line's first word holds the
    // word index of the next line's.
    let mut order: Vec<usize> = (0..lines).collect();
    for i in (1..lines).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut memory = vec![0usize; lines * WORDS];
    for (i, &line) in order.iter().enumerate() {
        memory[line * WORDS] = order[(i + 1) % lines] * WORDS;
    }
    // Once round the cycle to warm what fits, then timed.
    let mut at = order[0] * WORDS;
    for _ in 0..lines {
        at = memory[at];
    }
    let start = Instant::now();
    for _ in 0..loads {
        at = memory[at];
    }
    let elapsed = start.elapsed();
    black_box(at);
    elapsed.as_nanos() as f64 / loads as f64
}

const USAGE: &str = "usage: memory_latency (no options)";

fn main() {
    if let Some(arg) = std::env::args().nth(1) {
        if arg == "--help" || arg == "-h" {
            println!("{USAGE}");
            return;
        }
        eprintln!("unexpected argument {arg:?}; {USAGE}");
        std::process::exit(2);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("cores available: {cores}");
    if cores < 2 {
        println!("a line between two threads and back: skipped (one core)");
    } else {
        for _ in 0..3 {
            println!(
                "a line between two threads and back: {:.1} ns",
                round_trip(2_000_000)
            );
        }
    }
    let mut rng = Rng::new(1);
    for mib in [1, 2, 4, 8, 12, 16, 32, 64, 128] {
        let ns = random_load(mib << 20, 4_000_000, &mut rng);
        println!("a random load in {mib:>3} MiB: {ns:6.1} ns");
    }
}
