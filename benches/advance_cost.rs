//! How long each single `advance` of the timing wheel takes while a burst of
//! spread deadlines drains: the work a timer thread does, and holds the
//! timer's lock for, on one wake-up.
//!
//! ```text
//! cargo bench --bench advance_cost                            # 100,000 entries, timeouts 1..200 ticks
//! cargo bench --bench advance_cost -- --max-timeout 2000      # the same spread over 2,000 ticks
//! ```
//!
//! The shape is the `lateness` bench's on a bare wheel: `--entries`
//! deadlines, each set a timeout spread evenly from 1 to `--max-timeout`
//! ticks, inserted over the first `--burst` ticks (the wheel advancing
//! as the inserts cross each tick); then the wheel advances one tick at a
//! time until it is empty. Each round prints the median, p99 and largest
//! time of one advance, and the ticks of the slowest advances; the last
//! line gives the medians over the rounds. Besides the entries' own
//! moves down a level, a slow advance can be the slab's sweep as the wheel
//! empties (see the `timing_wheel` crate docs, Memory).

use clap::Parser;
use std::time::Instant;
use timing_wheel::TimingWheel;

#[derive(Parser)]
#[command(about = "Time of each advance of the timing wheel while a spread burst drains")]
struct Args {
    /// Entries inserted.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    entries: u64,
    /// Longest timeout, ticks (timeouts are spread evenly from 1).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_timeout: u64,
    /// Ticks over which the entries are inserted.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    burst: u64,
    /// Rounds, each on a new wheel.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    #[arg(long, hide = true)]
    bench: bool,
}

/// One round's figures, µs.
struct Round {
    p50: f64,
    p99: f64,
    max: f64,
}

fn main() {
    let args = Args::parse();
    println!(
        "{} entries, timeouts 1..{} ticks, inserted over {} ticks; time of one advance, µs",
        args.entries, args.max_timeout, args.burst
    );
    let mut rounds: Vec<Round> = (1..=args.rounds).map(|n| round(&args, n)).collect();
    let median = |rounds: &mut Vec<Round>, key: fn(&Round) -> f64| {
        rounds.sort_by(|a, b| key(a).total_cmp(&key(b)));
        key(&rounds[rounds.len() / 2])
    };
    println!(
        "median of {} rounds: p50 {:.1}, p99 {:.1}, max {:.1}",
        args.rounds,
        median(&mut rounds, |r| r.p50),
        median(&mut rounds, |r| r.p99),
        median(&mut rounds, |r| r.max)
    );
}

fn round(args: &Args, n: u32) -> Round {
    let mut wheel = TimingWheel::new();
    // A fixed xorshift, so every round and every build sees the same deadlines.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..args.entries {
        let now = i * args.burst / args.entries;
        if now > wheel.now() {
            wheel.advance(now, |_, _| {});
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let timeout = 1 + x % args.max_timeout;
        if wheel.insert(now + timeout, i).is_err() {
            eprintln!("the wheel is full");
            std::process::exit(1);
        }
    }
    let cascaded_before = wheel.stats().cascaded;
    let mut times: Vec<(f64, u64)> = Vec::new();
    let mut fired = 0u64;
    let mut now = wheel.now();
    while !wheel.is_empty() {
        now += 1;
        let start = Instant::now();
        wheel.advance(now, |_, _| fired += 1);
        times.push((start.elapsed().as_secs_f64() * 1e6, now));
    }
    let moved = wheel.stats().cascaded - cascaded_before;
    let total: f64 = times.iter().map(|t| t.0).sum();
    times.sort_by(|a, b| b.0.total_cmp(&a.0));
    let at = |q: f64| times[((times.len() - 1) as f64 * (1.0 - q)) as usize].0;
    let slowest: Vec<String> = times
        .iter()
        .take(5)
        .map(|(us, tick)| format!("{tick}:{us:.0}"))
        .collect();
    let figures = Round {
        p50: at(0.5),
        p99: at(0.99),
        max: times[0].0,
    };
    println!(
        "round {n}: {} advances taking {:.0} in all, p50 {:.1}, p99 {:.1}, max {:.1}; slowest (tick:µs) {}; after the burst {} fired, {} moved down",
        times.len(),
        total,
        figures.p50,
        figures.p99,
        figures.max,
        slowest.join(" "),
        fired,
        moved
    );
    figures
}
