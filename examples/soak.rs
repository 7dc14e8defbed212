//! The purgatory at full load for minutes on end: is every operation
//! answered exactly once, and does the process's resident memory stay flat?
//!
//! ```sh
//! cargo run --release --example soak -- --minutes 60
//! cargo run --release --example soak --features alloc-jemalloc -- --minutes 60
//! cargo run --release --example soak --features alloc-mimalloc -- --minutes 60
//! ```
//!
//! Two submitter threads submit as fast as they can, keeping up to
//! `--pending` operations in flight, each under three keys shared by every
//! request and one of a hundred partition keys. A third thread plays the
//! broker: it moves partitions forward and calls `check_and_complete` on
//! them (most operations complete so), and force-completes one operation in
//! eight from a [`Completer`](purgatory::Completer) as a remote answer
//! would; one in four has a short timeout and a condition that never holds,
//! and expires. The operations are allocated on the submitting threads and
//! freed on whichever thread answers them, as in a broker.
//!
//! Every second it samples the resident size (`/proc/self/statm`) and the
//! bytes the program has allocated and not freed. It exits 1 when, after
//! the first minute, the resident size grows more than `--max-growth`
//! percent above the first minute's last sample, or when an operation is
//! not answered exactly once (each operation notes its first answer; the
//! purgatory's shutdown answers what is pending at the end); else 0.

use clap::Parser;
use purgatory::{Completer, DelayedOperation, Driver, Outcome, Purgatory};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[cfg(all(feature = "alloc-jemalloc", feature = "alloc-mimalloc"))]
compile_error!("choose one of alloc-jemalloc and alloc-mimalloc");

#[cfg(feature = "alloc-jemalloc")]
type Inner = tikv_jemallocator::Jemalloc;
#[cfg(feature = "alloc-jemalloc")]
const INNER: Inner = tikv_jemallocator::Jemalloc;
#[cfg(feature = "alloc-jemalloc")]
const ALLOCATOR_NAME: &str = "jemalloc";

#[cfg(all(feature = "alloc-mimalloc", not(feature = "alloc-jemalloc")))]
type Inner = mimalloc::MiMalloc;
#[cfg(all(feature = "alloc-mimalloc", not(feature = "alloc-jemalloc")))]
const INNER: Inner = mimalloc::MiMalloc;
#[cfg(all(feature = "alloc-mimalloc", not(feature = "alloc-jemalloc")))]
const ALLOCATOR_NAME: &str = "mimalloc";

#[cfg(not(any(feature = "alloc-jemalloc", feature = "alloc-mimalloc")))]
type Inner = std::alloc::System;
#[cfg(not(any(feature = "alloc-jemalloc", feature = "alloc-mimalloc")))]
const INNER: Inner = std::alloc::System;
#[cfg(not(any(feature = "alloc-jemalloc", feature = "alloc-mimalloc")))]
const ALLOCATOR_NAME: &str = "system (glibc malloc)";

/// Counts the bytes in use on top of the chosen allocator, so that the
/// report tells the program's own growth from the allocator's.
#[path = "../benches/compare/alloc.rs"]
mod alloc;

#[global_allocator]
static ALLOCATOR: alloc::Counting<Inner> = alloc::Counting(INNER);

/// The purgatory at full load for minutes: exactly once, and flat memory.
#[derive(Parser)]
#[command(name = "soak", bin_name = "cargo run --release --example soak --")]
struct Options {
    /// How long to run, in minutes (the first one is the warm-up).
    #[arg(long, default_value_t = 60.0)]
    minutes: f64,
    /// Operations in flight at most. The default is a number the two
    /// submitters keep reached on 2 cores, so that the working set is
    /// steady and what grows is what the soak is after; with more, the
    /// number in flight follows the broker thread's pace and the heap with
    /// it.
    #[arg(long, default_value_t = 100_000)]
    pending: u64,
    /// Resident growth allowed after the first minute, in percent.
    #[arg(long, default_value_t = 5.0)]
    max_growth: f64,
}

/// How each operation ends, drawn at submission.
#[derive(Clone, Copy, PartialEq)]
enum Fate {
    /// Its partition moves past its target: `check_and_complete` ends it.
    Condition,
    /// Force-completed from the broker thread through its completer.
    Forced,
    /// Never ready: its short timeout ends it.
    Expires,
}

struct Op {
    answered: bool,
    partition: usize,
    target: u64,
    fate: Fate,
    timeout: Duration,
    progress: Arc<Vec<AtomicU64>>,
    answers: Arc<Answers>,
}

impl DelayedOperation for Op {
    fn timeout(&self) -> Duration {
        self.timeout
    }
    fn try_complete(&mut self) -> bool {
        self.fate == Fate::Condition
            && self.progress[self.partition].load(Ordering::Acquire) >= self.target
    }
    fn on_complete(&mut self, _: Outcome) {
        let counter = match std::mem::replace(&mut self.answered, true) {
            false => &self.answers.answered,
            true => &self.answers.duplicated,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Answers counted across all operations; each operation notes its own
/// first answer, so a second one is seen exactly.
#[derive(Default)]
struct Answers {
    answered: AtomicU64,
    duplicated: AtomicU64,
}

const PARTITIONS: usize = 100;
const SHARED_KEYS: [u64; 3] = [1_000_001, 1_000_002, 1_000_003];

/// xorshift: cheap and reproducible per thread.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn main() -> std::process::ExitCode {
    let options = Options::parse();
    if !(options.minutes > 0.0 && options.minutes <= 24.0 * 60.0) {
        eprintln!("soak: --minutes must be above 0 and at most 1440");
        return std::process::ExitCode::from(2);
    }
    let purgatory: Arc<Purgatory<u64, Op>> = Arc::new(
        Purgatory::builder("soak")
            .driver(Driver::Thread {
                expiration_threads: 1,
            })
            .build()
            .expect("a valid purgatory"),
    );
    let progress: Arc<Vec<AtomicU64>> =
        Arc::new((0..PARTITIONS).map(|_| AtomicU64::new(0)).collect());
    let answers = Arc::new(Answers::default());
    let submitted = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (forced_tx, forced_rx) = crossbeam_channel::bounded::<Completer<u64, Op>>(65_536);

    let submitters: Vec<_> = (0..2u64)
        .map(|t| {
            let (purgatory, progress, answers, submitted, stop, forced_tx) = (
                Arc::clone(&purgatory),
                Arc::clone(&progress),
                Arc::clone(&answers),
                Arc::clone(&submitted),
                Arc::clone(&stop),
                forced_tx.clone(),
            );
            let pending = options.pending;
            std::thread::spawn(move || {
                let mut rng = 0x9E37_79B9_7F4A_7C15 ^ (t + 1);
                while !stop.load(Ordering::Relaxed) {
                    let in_flight = submitted.load(Ordering::Relaxed)
                        - answers.answered.load(Ordering::Relaxed);
                    if in_flight >= pending {
                        std::thread::yield_now();
                        continue;
                    }
                    submitted.fetch_add(1, Ordering::Relaxed);
                    let partition = (next(&mut rng) % PARTITIONS as u64) as usize;
                    let fate = match next(&mut rng) % 8 {
                        0 => Fate::Forced,
                        1 | 2 => Fate::Expires,
                        _ => Fate::Condition,
                    };
                    let timeout = match fate {
                        Fate::Expires => Duration::from_millis(1 + next(&mut rng) % 200),
                        _ => Duration::from_secs(30),
                    };
                    let op = Op {
                        answered: false,
                        partition,
                        target: progress[partition].load(Ordering::Relaxed)
                            + 1
                            + next(&mut rng) % 4,
                        fate,
                        timeout,
                        progress: Arc::clone(&progress),
                        answers: Arc::clone(&answers),
                    };
                    let keys = [
                        SHARED_KEYS[0],
                        SHARED_KEYS[1],
                        SHARED_KEYS[2],
                        partition as u64,
                    ];
                    match purgatory.try_complete_else_watch(op, &keys) {
                        Ok(handle) => {
                            if fate == Fate::Forced {
                                let completer = handle.completer();
                                // Full: the broker is behind; answer it here.
                                if let Err(e) = forced_tx.try_send(completer) {
                                    e.into_inner().force_complete();
                                }
                            }
                        }
                        // Refused (shut down): answered here, with the op.
                        Err(_) => {
                            answers.answered.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    drop(forced_tx);

    let broker = {
        let (purgatory, progress, stop) = (
            Arc::clone(&purgatory),
            Arc::clone(&progress),
            Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            let mut rng = 42u64;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..64 {
                    let p = (next(&mut rng) % PARTITIONS as u64) as usize;
                    progress[p].fetch_add(1, Ordering::AcqRel);
                    purgatory.check_and_complete(&(p as u64));
                }
                for completer in forced_rx.try_iter().take(256) {
                    completer.force_complete();
                }
            }
            for completer in forced_rx.try_iter() {
                completer.force_complete();
            }
        })
    };

    println!(
        "soak: {} minutes, allocator {ALLOCATOR_NAME}, at most {} in flight",
        options.minutes, options.pending
    );
    println!(
        "{:>6} {:>12} {:>10} {:>10} {:>12}",
        "s", "ops/s", "rss MiB", "heap MiB", "in flight"
    );
    let started = Instant::now();
    let total = Duration::from_secs_f64(options.minutes * 60.0);
    let mut baseline: Option<u64> = None;
    let mut worst_growth = 0.0f64;
    let mut last = (Instant::now(), 0u64);
    let mut second = 0u64;
    while started.elapsed() < total {
        second += 1;
        let wake = started + Duration::from_secs(second);
        std::thread::sleep(wake.saturating_duration_since(Instant::now()));
        let answered = answers.answered.load(Ordering::Relaxed);
        let rate = (answered - last.1) as f64 / last.0.elapsed().as_secs_f64();
        last = (Instant::now(), answered);
        let rss = rss_bytes();
        let heap = alloc::in_use().max(0) as u64;
        let in_flight = submitted.load(Ordering::Relaxed).saturating_sub(answered);
        if second.is_multiple_of(10) || second <= 3 {
            println!(
                "{second:>6} {rate:>12.0} {:>10.1} {:>10.1} {in_flight:>12}",
                rss as f64 / 1048576.0,
                heap as f64 / 1048576.0
            );
        }
        if second == 60 {
            baseline = Some(rss);
        } else if let Some(base) = baseline {
            worst_growth = worst_growth.max((rss as f64 / base as f64 - 1.0) * 100.0);
        }
    }
    stop.store(true, Ordering::Relaxed);
    for s in submitters {
        s.join().expect("a submitter ran to the end");
    }
    broker.join().expect("the broker thread ran to the end");
    // What is still pending is answered by the shutdown.
    purgatory.shutdown();
    let (submitted, answered, duplicated) = (
        submitted.load(Ordering::Relaxed),
        answers.answered.load(Ordering::Relaxed),
        answers.duplicated.load(Ordering::Relaxed),
    );
    let lost = submitted - answered;
    println!(
        "operations: {submitted} submitted, {answered} answered once, {lost} lost, {duplicated} answered twice"
    );
    let mut failed = lost > 0 || duplicated > 0;
    match baseline {
        Some(base) => {
            println!(
                "resident: {:.1} MiB after the first minute, at most {worst_growth:.1}% above it after (allowed {}%)",
                base as f64 / 1048576.0,
                options.max_growth
            );
            failed |= worst_growth > options.max_growth;
        }
        None => {
            println!("resident: the run was shorter than its one-minute warm-up; growth not judged")
        }
    }
    println!("result: {}", if failed { "FAIL" } else { "PASS" });
    std::process::ExitCode::from(u8::from(failed))
}
