//! How late the threaded timer fires: operations with timeouts spread over
//! 1-200 ms that nothing completes, so every one expires; each records when
//! its expiry ran against its deadline (submission plus timeout). Early
//! fires must be 0. Both timers in one run, optionally with busy threads
//! loading the machine.
//!
//! ```sh
//! cargo bench --bench lateness                      # 100,000 operations, 2 busy threads
//! cargo bench --bench lateness -- --load-threads 0  # on an idle machine
//! cargo bench --bench lateness -- --timer wheel     # one timer (to profile it)
//! ```

use clap::Parser;
use purgatory::{DelayedOperation, Driver, Outcome, Purgatory, TimerKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The harness's allocator (jemalloc: flat under the purgatory's soak).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(about = "Expiry lateness of the threaded timer")]
struct Args {
    /// Operations submitted.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    ops: u32,
    /// Longest timeout, ms (timeouts are spread evenly from 1 ms).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    max_timeout_ms: u64,
    /// Threads spinning beside the purgatory, to load the machine.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=64))]
    load_threads: u32,
    /// Expiration worker threads.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    workers: u32,
    /// Which timers to measure.
    #[arg(long, value_enum, default_value = "both")]
    timer: Which,
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Which {
    Wheel,
    Delayqueue,
    Both,
}

/// Expires; records how late (ns, negative if early).
struct Op {
    deadline: Instant,
    timeout: Duration,
    lateness: Arc<Mutex<Vec<i64>>>,
}

impl DelayedOperation for Op {
    fn timeout(&self) -> Duration {
        self.timeout
    }
    fn try_complete(&mut self) -> bool {
        false
    }
    fn on_complete(&mut self, outcome: Outcome) {
        let now = Instant::now();
        if outcome == Outcome::Expired {
            let late = match now.checked_duration_since(self.deadline) {
                Some(d) => d.as_nanos() as i64,
                None => -(self.deadline.duration_since(now).as_nanos() as i64),
            };
            self.lateness.lock().unwrap().push(late);
        }
    }
}

fn main() {
    let args = Args::parse();
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..args.load_threads)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    println!(
        "{} operations, timeouts 1..{} ms, {} busy threads, {} expiration worker(s)",
        args.ops, args.max_timeout_ms, args.load_threads, args.workers
    );
    println!(
        "{:<11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "timer", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "early"
    );
    for (name, kind) in [
        ("wheel", TimerKind::Wheel),
        (
            "delayqueue",
            TimerKind::DelayQueue {
                purge_interval: 1000,
            },
        ),
    ] {
        let wanted = match args.timer {
            Which::Both => true,
            Which::Wheel => name == "wheel",
            Which::Delayqueue => name == "delayqueue",
        };
        if !wanted {
            continue;
        }
        let purgatory: Purgatory<u32, Op> = Purgatory::builder("lateness")
            .timer(kind)
            .driver(Driver::Thread {
                expiration_threads: args.workers as usize,
            })
            .build()
            .unwrap();
        let lateness = Arc::new(Mutex::new(Vec::with_capacity(args.ops as usize)));
        let span = args.max_timeout_ms.saturating_sub(1) as f64;
        for i in 0..args.ops {
            let ms = 1.0 + span * (i as f64 * 0.618_033_988_75).fract();
            let timeout = Duration::from_secs_f64(ms / 1000.0);
            let op = Op {
                deadline: Instant::now() + timeout,
                timeout,
                lateness: lateness.clone(),
            };
            // The handle is dropped: the operation answers through its callback.
            drop(purgatory.try_complete_else_watch(op, &[i % 64]).unwrap());
        }
        let deadline =
            Instant::now() + Duration::from_millis(args.max_timeout_ms) + Duration::from_secs(30);
        while purgatory.delayed() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut late = lateness.lock().unwrap().clone();
        late.sort_unstable();
        let q = |q: f64| late[((late.len() - 1) as f64 * q).round() as usize] as f64 / 1e6;
        let early = late.iter().filter(|&&l| l < 0).count();
        println!(
            "{:<11} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>7}",
            name,
            q(0.5),
            q(0.9),
            q(0.99),
            q(0.999),
            q(1.0),
            early
        );
        assert_eq!(late.len(), args.ops as usize, "every operation expired");
    }
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().unwrap();
    }
}
