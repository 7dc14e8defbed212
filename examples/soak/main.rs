//! The purgatory at full load for minutes on end: is every operation
//! answered exactly once, and does the process's resident memory stay flat?
//!
//! ```sh
//! cargo run --release --example soak -- --minutes 60
//! cargo run --release --example soak -- --minutes 4 --by-size --busy 2
//! cargo run --release --example soak --features alloc-system -- --minutes 60
//! cargo run --release --example soak --features alloc-mimalloc -- --minutes 60
//! ```
//!
//! Two submitter threads submit as fast as they can, keeping up to
//! `--pending` operations in flight, each under three keys shared by every
//! request and one of a hundred partition keys. A third thread plays the
//! broker: it moves partitions forward and calls `check_and_complete` on
//! them (most operations complete so), and between rounds of 64 checks it
//! force-completes all that were queued for it since (one operation in
//! eight, each through its [`Completer`](purgatory::Completer)) as remote
//! answers would be (`--forced-per-round` caps that); one in four has a
//! short timeout and a condition that never holds, and expires. The
//! operations are allocated on the submitting threads and freed on
//! whichever thread answers them, as in a broker. With `--busy N`,
//! N more threads spin for a minute from 70 s on (`--busy-from`,
//! `--busy-for`), as a shared machine's other work would: the purgatory's
//! threads then run late and answer in bursts.
//!
//! Every second it samples the resident size (`/proc/self/statm`) and the
//! bytes the program has allocated and not freed; every ten it prints them
//! with the forced completions queued for the broker thread (operations
//! still in flight), the spare cells the purgatory keeps, and the part of
//! that heap the purgatory reports holding (`PurgatoryMetrics::held_bytes`):
//! its cells, pending and spare, its watch lists and its timer. With
//! jemalloc (one arena: `allocator.rs` says why; the
//! features `alloc-system` and `alloc-mimalloc` choose glibc's malloc or
//! mimalloc instead), it also prints where jemalloc's resident bytes are:
//! its active pages (the heap and the gaps between its blocks, so that
//! fragmentation shows as their distance to the heap), its metadata, and
//! the freed pages it has not yet given back to the system. It exits 1
//! when, after the first minute, the resident size grows more than
//! `--max-growth` percent, or when an operation is not answered exactly
//! once (each operation notes its first answer; the purgatory's shutdown
//! answers what is pending at the end); else 0.
//!
//! Growth is judged on means of ten one-second samples: each later ten
//! seconds against the last thirty of the first minute. A one-second
//! sample swings by a few percent either way as the allocator holds freed
//! pages between its purges (the heap the program holds does not), so a
//! single sample is a poor baseline and a poor witness of growth; what
//! grows shows in every window after it. The largest one-second sample is
//! reported beside the verdict.
//!
//! With `--by-size` it also counts the heap by block size and, at the end,
//! prints the sizes whose bytes in use moved by 64 KiB or more between its
//! ten-second reports, and those that hold 1 MiB or more (`by_size.rs`): a
//! heap that moves says so, and the block sizes say which structure. With
//! jemalloc, it also prints the size classes whose slabs' room
//! beyond their blocks moved after the first minute, at each sixth of the
//! run and at the end: where the gap between jemalloc's active pages and the
//! heap (fragmentation) is, and when it grew.

use clap::Parser;
use purgatory::{Completer, DelayedOperation, Driver, Outcome, Purgatory};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counts the bytes in use on top of the chosen allocator, so that the
/// report tells the program's own growth from the allocator's.
#[path = "../../benches/compare/alloc.rs"]
mod alloc;
mod allocator;
mod by_size;

use allocator::Bins;

#[global_allocator]
static ALLOCATOR: by_size::BySize<alloc::Counting<allocator::Inner>> =
    by_size::BySize(alloc::Counting(allocator::INNER));

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
    /// Resident growth allowed after the first minute, in percent: of any
    /// ten seconds' mean over the mean of the first minute's last thirty.
    #[arg(long, default_value_t = 5.0)]
    max_growth: f64,
    /// Answered operations' cells the purgatory keeps for reuse
    /// (`PurgatoryBuilder::spare_cells`; its default when not given).
    #[arg(long)]
    spare_cells: Option<usize>,
    /// Forced completions the broker thread answers at most between two
    /// rounds of checks (without it: all that are queued). With 256, the
    /// queue (65,536) fills in the first second and stays full.
    #[arg(long)]
    forced_per_round: Option<usize>,
    /// Count the heap by block size too, and print at the end the sizes
    /// whose bytes in use moved.
    #[arg(long)]
    by_size: bool,
    /// Threads that spin beside the purgatory's for a while (see
    /// `--busy-from`, `--busy-for`): a shared machine's other work, which
    /// makes the thread at the clock late and its expiries come in bursts.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=256))]
    busy: u64,
    /// When the busy threads start spinning, in seconds from the start.
    #[arg(long, default_value_t = 70.0, value_parser = seconds)]
    busy_from: f64,
    /// How long the busy threads spin, in seconds.
    #[arg(long, default_value_t = 60.0, value_parser = seconds)]
    busy_for: f64,
}

/// A number of seconds from zero to a day.
fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=86_400.0).contains(&x) => Ok(x),
        Ok(_) => Err("must be a number of seconds from 0 to 86400".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Spins from `from` to `until` after `started` (or until `stop`).
fn spin(started: Instant, from: Duration, until: Duration, stop: &AtomicBool) {
    std::thread::sleep((started + from).saturating_duration_since(Instant::now()));
    let mut x = 0u64;
    while started.elapsed() < until && !stop.load(Ordering::Relaxed) {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
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
    if options.by_size {
        by_size::enable();
    }
    let mut builder = Purgatory::builder("soak").driver(Driver::Thread {
        expiration_threads: 1,
    });
    if let Some(cells) = options.spare_cells {
        builder = builder.spare_cells(cells);
    }
    let purgatory: Arc<Purgatory<u64, Op>> = Arc::new(builder.build().expect("a valid purgatory"));
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
    // Kept only to read how many forced completions wait for the broker.
    let queued = forced_tx;

    let per_round = options.forced_per_round.unwrap_or(usize::MAX);
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
                // By default all that came in since the last round, as a
                // broker answers remote results as they arrive. Capped at
                // 256, the queue filled at once and stayed full: two thirds
                // of what was in flight waited there, and checks walked them.
                for completer in forced_rx.try_iter().take(per_round) {
                    completer.force_complete();
                }
            }
            for completer in forced_rx.try_iter() {
                completer.force_complete();
            }
        })
    };

    println!(
        "soak: {} minutes, allocator {}, at most {} in flight",
        options.minutes,
        allocator::name(),
        options.pending
    );
    println!(
        "{:>6} {:>12} {:>10} {:>10} {:>12} {:>8} {:>12} {:>10} {:>10} {:>10}{}",
        "s",
        "ops/s",
        "rss MiB",
        "heap MiB",
        "in flight",
        "queued",
        "spare cells",
        "cells MiB",
        "lists MiB",
        "timer MiB",
        allocator::HEADER
    );
    let started = Instant::now();
    let busy: Vec<_> = (0..options.busy)
        .map(|_| {
            let stop = Arc::clone(&stop);
            let from = Duration::from_secs_f64(options.busy_from);
            let until = from + Duration::from_secs_f64(options.busy_for);
            std::thread::spawn(move || spin(started, from, until, &stop))
        })
        .collect();
    let total = Duration::from_secs_f64(options.minutes * 60.0);
    let mut growth = Growth::default();
    let mut last = (Instant::now(), 0u64);
    let mut second = 0u64;
    // Its room taken up front: its own growth would count as the heap's.
    let mut by_size = Vec::with_capacity(if options.by_size {
        (options.minutes * 6.0) as usize + 1
    } else {
        0
    });
    // jemalloc's slabs by size class after the warm-up, at each sixth of
    // the run (in whole minutes), and at the end.
    let mut bins = Vec::new();
    let bins_every = ((options.minutes / 6.0).ceil() as u64).max(1) * 60;
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
            // Where the purgatory's part of the heap is: its cells
            // (pending and spare), its watch lists and its timer.
            let metrics = purgatory.metrics();
            let held = metrics.held_bytes;
            let mib = |bytes: usize| bytes as f64 / 1048576.0;
            println!(
                "{second:>6} {rate:>12.0} {:>10.1} {:>10.1} {in_flight:>12} {:>8} {:>12} {:>10.2} {:>10.2} {:>10.2}{}",
                rss as f64 / 1048576.0,
                heap as f64 / 1048576.0,
                queued.len(),
                metrics.spare_cells,
                mib(held.pending_cells + held.spare_cells),
                mib(held.watch_lists),
                mib(held.timer),
                allocator::row()
            );
            if options.by_size && second.is_multiple_of(10) {
                by_size.push((second, by_size::in_use()));
            }
            if options.by_size && (second == 60 || second.is_multiple_of(bins_every)) {
                bins.push((second, allocator::bins()));
            }
        }
        growth.sample(second, rss);
    }
    if options.by_size && bins.last().is_some_and(|(s, _)| *s != second) {
        bins.push((second, allocator::bins()));
    }
    stop.store(true, Ordering::Relaxed);
    for b in busy {
        b.join().expect("a busy thread ran to the end");
    }
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
    match growth.verdict() {
        Some(Verdict {
            baseline,
            window: (window, window_at),
            sample: (sample, sample_at),
        }) => {
            println!(
                "resident: {:.1} MiB over the first minute's last 30 s; ten-second means at most {window:+.1}% \
                 above it after (to {window_at} s; allowed {}%), one-second samples at most {sample:+.1}% \
                 (at {sample_at} s)",
                baseline / 1048576.0,
                options.max_growth
            );
            failed |= window > options.max_growth;
        }
        None => println!(
            "resident: the run was shorter than its one-minute warm-up and ten seconds; growth not judged"
        ),
    }
    if options.by_size {
        print_moves(&by_size);
        print_gaps(&bins);
    }
    println!("result: {}", if failed { "FAIL" } else { "PASS" });
    std::process::ExitCode::from(u8::from(failed))
}

/// The block sizes whose bytes in use moved by 64 KiB or more over the
/// run, or that hold 1 MiB or more, at a few of the ten-second reports
/// (`snapshots`, in order).
fn print_moves(snapshots: &[(u64, [isize; by_size::CLASSES])]) {
    let Some(last) = snapshots.last() else {
        return;
    };
    // The first report, a few in the first minutes, then every ten minutes and the last.
    let shown: Vec<_> = snapshots
        .iter()
        .filter(|(s, _)| {
            [10, 30, 60, 120, 300].contains(s) || s.is_multiple_of(600) || *s == last.0
        })
        .collect();
    let rows = (0..by_size::CLASSES).map(|class| Row {
        name: format!("<= {}", by_size::limit(class)),
        bytes: shown.iter().map(|(_, v)| v[class] as i64).collect(),
        after: String::new(),
    });
    print_table(
        "heap by block size, KiB in use (sizes that moved by 64 KiB or more, or hold 1 MiB):",
        &shown.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        "",
        rows,
        (64 * 1024, 1024 * 1024),
    );
}

/// jemalloc's small size classes whose slabs' room beyond their blocks
/// moved by 64 KiB or more between the snapshots (`bins`: after the
/// first minute, at each sixth of the run, at the end), or reached 256
/// KiB: where the active pages' distance to the heap (fragmentation) is,
/// and when it grew.
fn print_gaps(bins: &[(u64, Bins)]) {
    let Some((_, last)) = bins.last() else {
        return;
    };
    if last.is_empty() || bins.iter().any(|(_, b)| b.len() != last.len()) {
        return;
    }
    let kib = |b: usize| b as f64 / 1024.0;
    let rows = last
        .iter()
        .enumerate()
        .map(|(class, &(size, slabs, used))| Row {
            name: size.to_string(),
            bytes: bins
                .iter()
                .map(|(_, b)| b[class].1.saturating_sub(b[class].2) as i64)
                .collect(),
            after: format!("{:>10.0}{:>10.0}", kib(slabs), kib(used)),
        });
    print_table(
        "jemalloc's slabs by block size, KiB of room beyond their blocks (classes whose room moved by 64 KiB, or reached 256 KiB):",
        &bins.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        &format!("{:>10}{:>10}", "slabs", "blocks"),
        rows,
        (64 * 1024, 256 * 1024),
    );
}

/// One line of [`print_table`]: a block size, its bytes at each report,
/// and what follows them.
struct Row {
    name: String,
    bytes: Vec<i64>,
    after: String,
}

/// Prints `title`, a column in KiB per report (`seconds`), the rows whose
/// bytes moved between the reports by `moved` or reached `reached` (the
/// pair `(moved, reached)`), with `after` their last column's header,
/// then every row's total per report.
fn print_table(
    title: &str,
    seconds: &[u64],
    after: &str,
    rows: impl Iterator<Item = Row>,
    (moved, reached): (i64, i64),
) {
    let kib = |b: i64| format!("{:>10.0}", b as f64 / 1024.0);
    let header: String = seconds
        .iter()
        .map(|s| format!("{:>10}", format!("{s} s")))
        .collect();
    println!("{title}");
    println!("{:>12}{header}{after}", "block bytes");
    let mut totals = vec![0i64; seconds.len()];
    for row in rows {
        for (total, b) in totals.iter_mut().zip(&row.bytes) {
            *total += b;
        }
        let (low, high) = (row.bytes.iter().min(), row.bytes.iter().max());
        if let (Some(low), Some(high)) = (low, high) {
            if high - low >= moved || *high >= reached {
                let values: String = row.bytes.iter().map(|&b| kib(b)).collect();
                println!("{:>12}{values}{}", row.name, row.after);
            }
        }
    }
    let totals: String = totals.into_iter().map(kib).collect();
    println!("{:>12}{totals}", "all");
}

/// The resident size's growth after the first minute, from one sample a
/// second: ten-second means against the mean of seconds 31 to 60.
#[derive(Default)]
struct Growth {
    /// Samples of seconds 31 to 60, then of the current ten seconds.
    window: Vec<u64>,
    baseline: Option<f64>,
    /// The largest ten-second mean and one-second sample after the first
    /// minute, in percent over the baseline, with their seconds.
    worst_window: Option<(f64, u64)>,
    worst_sample: Option<(f64, u64)>,
}

/// What [`Growth`] judged: the baseline in bytes, and the largest
/// ten-second mean's and one-second sample's growth in percent over it,
/// each with the second it ended at (a rise shows late and stays; a
/// swing can come at any time).
struct Verdict {
    baseline: f64,
    window: (f64, u64),
    sample: (f64, u64),
}

impl Growth {
    fn sample(&mut self, second: u64, rss: u64) {
        if second <= 30 {
            return;
        }
        self.window.push(rss);
        let Some(base) = self.baseline else {
            if second == 60 {
                self.baseline = Some(mean(&self.window));
                self.window.clear();
            }
            return;
        };
        let over = |bytes: f64| (bytes / base - 1.0) * 100.0;
        keep_worst(&mut self.worst_sample, over(rss as f64), second);
        if self.window.len() == 10 {
            keep_worst(&mut self.worst_window, over(mean(&self.window)), second);
            self.window.clear();
        }
    }

    /// `None` before a first window after the first minute.
    fn verdict(&self) -> Option<Verdict> {
        Some(Verdict {
            baseline: self.baseline?,
            window: self.worst_window?,
            sample: self.worst_sample?,
        })
    }
}

/// Keeps `(growth, second)` in `worst` if it is the largest so far.
fn keep_worst(worst: &mut Option<(f64, u64)>, growth: f64, second: u64) {
    let larger = match *worst {
        Some((largest, _)) => growth > largest,
        None => true,
    };
    if larger {
        *worst = Some((growth, second));
    }
}

fn mean(samples: &[u64]) -> f64 {
    samples.iter().sum::<u64>() as f64 / samples.len() as f64
}

#[cfg(test)]
mod tests {
    use super::{Growth, Verdict};

    /// The verdict on `seconds` of samples from `rss`.
    fn judged(seconds: u64, rss: impl Fn(u64) -> u64) -> Option<Verdict> {
        let mut growth = Growth::default();
        (1..=seconds).for_each(|s| growth.sample(s, rss(s)));
        growth.verdict()
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_one_second_swing_is_reported_but_is_not_growth() {
        let verdict = judged(600, |s| if s == 300 { 110 * MIB } else { 100 * MIB }).unwrap();
        assert_eq!(verdict.baseline, (100 * MIB) as f64);
        let (sample, sample_at) = verdict.sample;
        assert!((sample - 10.0).abs() < 1e-9, "{sample}");
        assert_eq!(sample_at, 300);
        let (window, window_at) = verdict.window;
        assert!((window - 1.0).abs() < 1e-9, "{window}");
        assert_eq!(window_at, 300, "the window of seconds 291 to 300");
    }

    #[test]
    fn a_rise_after_the_first_minute_is_growth() {
        // 100 MiB, then 0.1 MiB more each second from the first minute on.
        let rss = |s: u64| 100 * MIB + s.saturating_sub(60) * MIB / 10;
        let (window, window_at) = judged(180, rss).unwrap().window;
        // The last ten seconds average 11.55 MiB over the baseline.
        assert!((window - 11.55).abs() < 0.01, "{window}");
        assert_eq!(window_at, 180);
    }

    #[test]
    fn the_first_minutes_first_half_is_not_the_baseline() {
        // A warm-up that starts low and settles by 30 s.
        let rss = |s: u64| if s <= 30 { 50 * MIB } else { 100 * MIB };
        let verdict = judged(120, rss).unwrap();
        assert_eq!(verdict.baseline, (100 * MIB) as f64);
        assert_eq!((verdict.window.0, verdict.sample.0), (0.0, 0.0));
    }

    #[test]
    fn no_verdict_before_a_window_after_the_first_minute() {
        assert!(judged(69, |_| MIB).is_none());
        assert!(judged(70, |_| MIB).is_some());
    }
}
