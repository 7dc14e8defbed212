//! Timer implementations side by side, on the same inputs, in one process,
//! in rotating order. See BENCHMARKS.md.
//!
//! `cargo bench --bench compare -- --help` lists the options.
//!
//! Progress (each measurement and how long it took) goes to stderr.

mod alloc;
mod heaps;
mod impls;
mod svg;

use clap::builder::PossibleValuesParser;
use clap::Parser;
use impls::{Floor, HeapIndexed, HeapLazy, Hhwt, NexusTimer, Timers, TokioDelayQueue, Wheel};
use std::time::Instant;

#[global_allocator]
static ALLOCATOR: alloc::Counting<std::alloc::System> = alloc::Counting(std::alloc::System);

/// A small deterministic generator: every implementation sees the same inputs.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((u128::from(self.0) * u128::from(n)) >> 64) as u64
    }
}

/// One measurement.
#[derive(Clone)]
struct Sample {
    ns_per_op: f64,
    bytes_per_pending: f64,
    /// Bytes still allocated once every timer was cancelled.
    bytes_after_cancel: Option<f64>,
}

/// Fills a timer with `pending` entries due uniformly in `1..=span` ticks;
/// returns the handles and the bytes that took.
fn populate<T: Timers>(
    t: &mut T,
    pending: usize,
    span: u64,
    rng: &mut Rng,
) -> (Vec<Option<T::Handle>>, f64) {
    let mut handles = Vec::with_capacity(pending);
    let before = alloc::in_use();
    for i in 0..pending {
        handles.push(Some(t.insert(1 + rng.below(span), i as u64)));
    }
    let bytes = (alloc::in_use() - before) as f64 / pending as f64;
    (handles, bytes)
}

/// Cancels every timer still held.
fn cancel_all<T: Timers>(t: &mut T, handles: Vec<Option<T::Handle>>) {
    for h in handles.into_iter().flatten() {
        t.cancel(h);
    }
}

/// A steady population of `pending` timers due within 1 ms..30 s; each step
/// cancels a random live one and inserts a new one.
fn insert_cancel<T: Timers>(pending: usize, steps: usize) -> Sample {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let base = alloc::in_use();
    let mut t = T::new();
    let (mut handles, bytes_per_pending) = populate(&mut t, pending, 30_000, &mut rng);
    let start = Instant::now();
    for step in 0..steps {
        let i = rng.below(pending as u64) as usize;
        if let Some(h) = handles[i].take() {
            t.cancel(h);
        }
        handles[i] = Some(t.insert(1 + rng.below(30_000), step as u64));
    }
    let ns_per_op = start.elapsed().as_nanos() as f64 / steps as f64;
    cancel_all(&mut t, handles);
    let after = (alloc::in_use() - base) as f64;
    drop(t);
    Sample {
        ns_per_op,
        bytes_per_pending,
        bytes_after_cancel: Some(after),
    }
}

/// `pending` timers due within 1 s; the clock jumps past all of them. Cost
/// per fired timer.
fn expire<T: Timers>(pending: usize) -> Sample {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut t = T::new();
    let (handles, bytes_per_pending) = populate(&mut t, pending, 1_000, &mut rng);
    // Fired timers' handles are stale; forget them without cancelling.
    std::mem::forget(handles);
    let start = Instant::now();
    let fired = t.advance(1_001);
    let ns_per_op = start.elapsed().as_nanos() as f64 / pending as f64;
    assert_eq!(fired, pending, "{} fired {fired} of {pending}", T::NAME);
    Sample {
        ns_per_op,
        bytes_per_pending,
        bytes_after_cancel: None,
    }
}

/// A steady population; each step pushes a random live timer's deadline to
/// a new point within 30 s (a heartbeat extending a session).
fn reschedule<T: Timers>(pending: usize, steps: usize) -> Sample {
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    let mut t = T::new();
    let (mut handles, bytes_per_pending) = populate(&mut t, pending, 30_000, &mut rng);
    let start = Instant::now();
    for _ in 0..steps {
        let i = rng.below(pending as u64) as usize;
        if let Some(h) = handles[i].take() {
            handles[i] = Some(t.reschedule(h, 1 + rng.below(30_000)));
        }
    }
    let ns_per_op = start.elapsed().as_nanos() as f64 / steps as f64;
    cancel_all(&mut t, handles);
    Sample {
        ns_per_op,
        bytes_per_pending,
        bytes_after_cancel: None,
    }
}

/// Deadlines 0..200 ms, the clock advancing 1 ms per step with the due
/// timers fired, `pending / 100` inserted per step (so about `pending` are
/// waiting): a broker's steady state. Cost per timer (insert and fire).
fn insert_expire_mix<T: Timers>(pending: usize, steps: usize) -> Sample {
    let mut rng = Rng(0x0F0F_1234_ABCD_9876);
    let mut t = T::new();
    let per_ms = (pending / 100).max(1);
    let ms_steps = (steps / per_ms).max(200);
    let mut now = 0u64;
    let mut run = |t: &mut T, ms: usize, rng: &mut Rng| {
        let mut fired = 0;
        for _ in 0..ms {
            for i in 0..per_ms {
                // Handles of fired timers are never used again.
                std::mem::forget(t.insert(now + 1 + rng.below(200), i as u64));
            }
            now += 1;
            fired += t.advance(now);
        }
        fired
    };
    run(&mut t, 300, &mut rng); // warm up to the steady population
    let start = Instant::now();
    let fired = run(&mut t, ms_steps, &mut rng);
    let ns_per_op = start.elapsed().as_nanos() as f64 / (ms_steps * per_ms) as f64;
    std::hint::black_box(fired);
    Sample {
        ns_per_op,
        bytes_per_pending: f64::NAN,
        bytes_after_cancel: None,
    }
}

const WORKLOADS: [&str; 4] = ["insert_cancel", "expire", "reschedule", "insert_expire_mix"];

/// Every implementation must fire what is due, skip what was cancelled and
/// honour a reschedule before its figures mean anything.
fn self_check<T: Timers>() {
    let mut t = T::new();
    let a = t.insert(10, 1);
    let b = t.insert(20, 2);
    let _c = t.insert(30, 3);
    let d = t.insert(40, 4);
    assert!(t.cancel(b), "{}: cancel", T::NAME);
    std::mem::forget(t.reschedule(d, 15));
    assert_eq!(t.advance(9), 0, "{}: early", T::NAME);
    assert_eq!(t.advance(15), 2, "{}: due", T::NAME);
    assert_eq!(t.advance(100), 1, "{}: the rest", T::NAME);
    std::mem::forget(a);
}

fn measure<T: Timers>(workload: &str, pending: usize, steps: usize) -> Option<Sample> {
    if workload == "self_check" {
        self_check::<T>();
        return None;
    }
    Some(match workload {
        // heap_lazy's purge walks every entry each 1000 steps: at 1e7 its
        // insert_cancel row alone takes about 7 minutes, so it is measured
        // there and in expire only.
        "reschedule" | "insert_expire_mix" if T::NAME == "heap_lazy" && pending >= 10_000_000 => {
            eprintln!("{workload} @ {pending} heap_lazy: skipped (too slow at this size)");
            return None;
        }
        "insert_cancel" => insert_cancel::<T>(pending, steps),
        "expire" => expire::<T>(pending),
        "reschedule" => reschedule::<T>(pending, steps),
        // The floor cannot find due timers without scanning: no floor here.
        "insert_expire_mix" if T::NAME == "floor" => return None,
        _ => insert_expire_mix::<T>(pending, steps),
    })
}

type Runner = fn(&str, usize, usize) -> Option<Sample>;

const IMPLS: [(&str, Runner); 7] = [
    ("wheel", measure::<Wheel>),
    ("heap_lazy", measure::<HeapLazy>),
    ("heap_indexed", measure::<HeapIndexed>),
    ("tokio_delay_queue", measure::<TokioDelayQueue>),
    ("nexus_timer", measure::<NexusTimer>),
    ("hierarchical_hash_wheel_timer", measure::<Hhwt>),
    ("floor", measure::<Floor>),
];

struct Row {
    workload: &'static str,
    pending: usize,
    implementation: &'static str,
    sample: Sample,
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Every timer implementation on the same inputs, in one process, in
/// rotating order; prints a table per workload and population.
#[derive(Parser)]
#[command(name = "compare", bin_name = "cargo bench --bench compare --")]
struct Args {
    /// Shorter runs (3 rounds of 2e5 steps, not 5 of 1e6) and no 1e7
    /// population: about a minute.
    #[arg(long)]
    quick: bool,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    json: bool,
    /// Where to write the insert_cancel plot.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "target/compare-insert_cancel.svg"
    )]
    svg: String,
    /// Populations to measure, comma-separated [default: 1000,100000,1000000,
    /// and 10000000 unless --quick].
    #[arg(long, value_name = "N", value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..))]
    pending: Vec<u64>,
    /// Workloads to run, comma-separated [default: all].
    #[arg(long, value_name = "NAME", value_delimiter = ',', value_parser = PossibleValuesParser::new(WORKLOADS))]
    workload: Vec<String>,
    /// Implementations to run, comma-separated [default: all].
    #[arg(long = "impl", value_name = "IMPL", value_delimiter = ',', value_parser = PossibleValuesParser::new(IMPLS.map(|(name, _)| name)))]
    impls: Vec<String>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
    /// A name filter, as `cargo bench -- FILTER` passes to every bench:
    /// only the workloads whose names contain it run.
    #[arg(hide = true)]
    filter: Option<String>,
}

fn main() {
    let args = Args::parse();
    let (quick, json, svg_path) = (args.quick, args.json, args.svg);
    let populations: Vec<usize> = if !args.pending.is_empty() {
        args.pending.iter().map(|&n| n as usize).collect()
    } else if quick {
        vec![1_000, 100_000, 1_000_000]
    } else {
        vec![1_000, 100_000, 1_000_000, 10_000_000]
    };
    let workloads: Vec<&'static str> = WORKLOADS
        .into_iter()
        .filter(|w| args.workload.is_empty() || args.workload.iter().any(|o| o == w))
        .filter(|w| args.filter.as_ref().is_none_or(|f| w.contains(f.as_str())))
        .collect();
    if workloads.is_empty() {
        return;
    }
    let only_impls = (!args.impls.is_empty()).then_some(args.impls);
    let (steps, rounds) = if quick { (200_000, 3) } else { (1_000_000, 5) };

    for (_, run) in IMPLS {
        run("self_check", 0, 0);
    }
    let mut rows: Vec<Row> = Vec::new();
    for &workload in &workloads {
        for &pending in &populations {
            let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); IMPLS.len()];
            // 1e7 is slow to populate, and heap_lazy's purge walks all 1e7
            // entries every 1000 steps (about 0.3 s each): one round of a
            // tenth of the steps there, or heap_lazy alone takes 5 minutes.
            let (rounds, steps) = if pending >= 10_000_000 {
                (1, steps / 10)
            } else {
                (rounds, steps)
            };
            for round in 0..rounds {
                // Rotate the order each round so no implementation always runs
                // first (cold) or right after a heavy one.
                for k in 0..IMPLS.len() {
                    let i = (k + round) % IMPLS.len();
                    if only_impls
                        .as_ref()
                        .is_some_and(|only| !only.iter().any(|o| o == IMPLS[i].0))
                    {
                        continue;
                    }
                    let began = Instant::now();
                    if let Some(s) = (IMPLS[i].1)(workload, pending, steps) {
                        eprintln!(
                            "{workload} @ {pending} {}: {:.1} ns/op ({:.1} s)",
                            IMPLS[i].0,
                            s.ns_per_op,
                            began.elapsed().as_secs_f64()
                        );
                        samples[i].push(s);
                    }
                }
            }
            for (i, runs) in samples.into_iter().enumerate() {
                if runs.is_empty() {
                    continue;
                }
                let sample = Sample {
                    ns_per_op: median(runs.iter().map(|s| s.ns_per_op).collect()),
                    bytes_per_pending: median(runs.iter().map(|s| s.bytes_per_pending).collect()),
                    bytes_after_cancel: runs[0].bytes_after_cancel,
                };
                rows.push(Row {
                    workload,
                    pending,
                    implementation: IMPLS[i].0,
                    sample,
                });
            }
            if !json {
                print_block(workload, pending, &rows);
            }
        }
    }

    let series: Vec<(String, Vec<(f64, f64)>)> = IMPLS
        .iter()
        .map(|(name, _)| {
            let pts = rows
                .iter()
                .filter(|r| r.workload == "insert_cancel" && r.implementation == *name)
                .map(|r| (r.pending as f64, r.sample.ns_per_op))
                .collect();
            (name.to_string(), pts)
        })
        .collect();
    // Only a run that measured insert_cancel replaces the plot.
    if series.iter().any(|(_, pts)| !pts.is_empty()) {
        let chart = svg::chart(
            "insert_cancel: ns per insert+cancel step (log-log)",
            &series,
        );
        match std::fs::write(&svg_path, chart) {
            Ok(()) if !json => println!("wrote {svg_path}"),
            Ok(()) => {}
            Err(e) => eprintln!("could not write {svg_path}: {e}"),
        }
    }

    if json {
        let results: Vec<String> = rows
            .iter()
            .map(|r| {
                let num = |x: f64| if x.is_finite() { format!("{x:.2}") } else { "null".into() };
                let after = r.sample.bytes_after_cancel.map_or("null".to_string(), |b| format!("{b:.0}"));
                format!(
                    r#"{{"workload":"{}","pending":{},"impl":"{}","ns_per_op":{},"bytes_per_pending":{},"bytes_after_cancel":{}}}"#,
                    r.workload,
                    r.pending,
                    r.implementation,
                    num(r.sample.ns_per_op),
                    num(r.sample.bytes_per_pending),
                    after
                )
            })
            .collect();
        println!("{{\"results\": [{}]}}", results.join(", "));
    }
}

fn print_block(workload: &str, pending: usize, rows: &[Row]) {
    let block: Vec<&Row> = rows
        .iter()
        .filter(|r| r.workload == workload && r.pending == pending)
        .collect();
    let wheel = block
        .iter()
        .find(|r| r.implementation == "wheel")
        .map(|r| r.sample.ns_per_op);
    println!("\n{workload} @ {pending} pending");
    println!(
        "  {:<31}{:>12}{:>14}{:>18}{:>12}",
        "impl", "ns/op", "bytes/pending", "bytes held after", "wheel is"
    );
    for r in block {
        let after = r
            .sample
            .bytes_after_cancel
            .map_or("-".to_string(), |b| format!("{b:.0}"));
        let bytes = if r.sample.bytes_per_pending.is_finite() {
            format!("{:.1}", r.sample.bytes_per_pending)
        } else {
            "-".into()
        };
        let ratio = wheel.map_or("-".to_string(), |w| {
            format!("{:.2}x", w / r.sample.ns_per_op)
        });
        println!(
            "  {:<31}{:>12.1}{:>14}{:>18}{:>12}",
            r.implementation, r.sample.ns_per_op, bytes, after, ratio
        );
    }
}
