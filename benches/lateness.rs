//! How late the threaded timer fires: operations with timeouts spread over
//! 1-200 ms that nothing completes, so every one expires; each records when
//! its expiry ran against its deadline (submission plus timeout). Early
//! fires must be 0. Both timers and a floor (below) in one run, optionally
//! with busy threads loading the machine.
//!
//! ```sh
//! cargo bench --bench lateness                      # 100,000 operations, 2 busy threads
//! cargo bench --bench lateness -- --load-threads 0  # on an idle machine
//! cargo bench --bench lateness -- --timer wheel     # one timer (to profile it)
//! cargo bench --bench lateness -- --timer wheel,floor # the wheel beside the floor
//! cargo bench --bench lateness -- --nice -20        # the purgatory's threads favoured
//! cargo bench --bench lateness -- --fifo 1          # ... or in a real-time class
//! cargo bench --bench lateness -- --slice-us 100    # ... or with a short slice, at nice 0
//! ```
//!
//! Beside the timers runs `floor`: no purgatory, one thread that knows
//! every deadline and sleeps until each one's tick. Its lateness is the
//! wait for a core that the machine's scheduler imposes on any timer
//! thread, under the same load and priority settings: what a timer can
//! approach but not beat. That holds after the burst; the floor's thread
//! is handed the deadlines when the burst ends, so those due in it are
//! late by the rest of the burst.
//!
//! Beside each timer's figures, the same for the operations that fell due
//! while the submitting thread was still inserting ("in burst") and for
//! the rest ("after"): the burst is load of its own.
//!
//! `--nice` sets the nice value of the purgatory's timer thread and
//! workers, `--fifo` puts them in the `SCHED_FIFO` class at that priority,
//! both through `PurgatoryBuilder::on_thread_start` (Linux; a negative nice
//! value and `--fifo` need `CAP_SYS_NICE`), as an embedder would to keep
//! expiries on time on a busy machine. `--slice-us` leaves them in the
//! ordinary class at nice 0 and only asks the scheduler for a shorter slice
//! (Linux 6.12 and later; no privilege needed), which lets a woken thread
//! run before busy ones without taking a larger share of the CPU.

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
    /// Nice value for the purgatory's timer thread and workers (-20 to
    /// 19; below 0 needs CAP_SYS_NICE). Unset: they run as every thread.
    #[arg(long, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(-20..=19))]
    nice: Option<i32>,
    /// Real-time priority (SCHED_FIFO, 1 to 99) for the purgatory's timer
    /// thread and workers; needs CAP_SYS_NICE.
    #[arg(long, conflicts_with = "nice", value_parser = clap::value_parser!(i32).range(1..=99))]
    fifo: Option<i32>,
    /// Puts the submitting thread in SCHED_FIFO at `--fifo`'s priority as
    /// well (so that nothing of equal weight preempts it mid-burst).
    #[arg(long, requires = "fifo")]
    fifo_submitter: bool,
    /// Asks the scheduler for this slice (µs, 100 to 100,000) for the
    /// purgatory's timer thread and workers, staying in the ordinary class
    /// at nice 0 (Linux 6.12+ `sched_setattr`'s `sched_runtime`; needs no
    /// privilege): a shorter slice lets a woken thread preempt a busy one.
    #[arg(long, conflicts_with_all = ["nice", "fifo"], value_parser = clap::value_parser!(u64).range(100..=100_000))]
    slice_us: Option<u64>,
    /// The purgatory's tick, µs: an operation fires within one tick after
    /// its deadline on an idle machine.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    tick_us: u64,
    /// Which timers to measure, in this order (comma-separated): `floor`
    /// is no timer but a bare thread sleeping until each deadline's tick,
    /// the least lateness this machine's scheduler allows any timer thread.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "wheel,delayqueue,floor"
    )]
    timer: Vec<Which>,
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Which {
    Wheel,
    Delayqueue,
    Floor,
}

/// Expires; records how late (ns, negative if early).
struct Op {
    deadline: Instant,
    timeout: Duration,
    /// Each expiry's deadline and lateness (ns; negative: early).
    lateness: Arc<Mutex<Vec<(Instant, i64)>>>,
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
            self.lateness.lock().unwrap().push((self.deadline, late));
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
        "{} operations, timeouts 1..{} ms, {} busy threads, {} expiration worker(s), {} µs tick{}",
        args.ops,
        args.max_timeout_ms,
        args.load_threads,
        args.workers,
        args.tick_us,
        match (args.nice, args.fifo, args.slice_us) {
            (Some(n), _, _) => format!(", purgatory threads at nice {n}"),
            (_, Some(p), _) => format!(", purgatory threads SCHED_FIFO at {p}"),
            (_, _, Some(s)) => format!(", purgatory threads asking for a {s} µs slice"),
            _ => String::new(),
        }
    );
    println!(
        "{:<11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "timer", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "early"
    );
    for &which in &args.timer {
        let (name, (expired, burst_end)) = match which {
            Which::Wheel => ("wheel", through_purgatory(&args, TimerKind::Wheel)),
            Which::Delayqueue => (
                "delayqueue",
                through_purgatory(
                    &args,
                    TimerKind::DelayQueue {
                        purge_interval: 1000,
                    },
                ),
            ),
            Which::Floor => ("floor", sleeping_thread(&args)),
        };
        let sorted = |during: Option<bool>| {
            let mut late: Vec<i64> = expired
                .iter()
                .filter(|(deadline, _)| during.is_none_or(|d| (*deadline < burst_end) == d))
                .map(|&(_, late)| late)
                .collect();
            late.sort_unstable();
            late
        };
        let late = sorted(None);
        let early = late.iter().filter(|&&l| l < 0).count();
        print_row(name, &late, &early.to_string());
        // Operations that fell due while this thread was still submitting,
        // apart from the others: the submission burst is load of its own.
        for (label, during) in [("  in burst", true), ("  after", false)] {
            let part = sorted(Some(during));
            print_row(label, &part, &format!("n={}", part.len()));
        }
        assert_eq!(late.len(), args.ops as usize, "every operation expired");
    }
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().unwrap();
    }
}

/// The `i`th operation's timeout: spread evenly (by the golden ratio's
/// steps) from 1 ms to `--max-timeout-ms`, the same for every timer.
fn timeout_of(i: u32, args: &Args) -> Duration {
    let span = args.max_timeout_ms.saturating_sub(1) as f64;
    let ms = 1.0 + span * (i as f64 * 0.618_033_988_75).fract();
    Duration::from_secs_f64(ms / 1000.0)
}

/// Submits the operations to a purgatory with `kind` of timer, from this
/// thread in one burst, and waits until they have expired: each one's
/// deadline and lateness, and when the burst ended.
fn through_purgatory(args: &Args, kind: TimerKind) -> (Vec<(Instant, i64)>, Instant) {
    let mut builder = Purgatory::builder("lateness")
        .timer(kind)
        .tick(Duration::from_micros(args.tick_us))
        .driver(Driver::Thread {
            expiration_threads: args.workers as usize,
        });
    let favour = Favour::of(args);
    if favour.is_asked() {
        builder = builder.on_thread_start(move |role| favour.apply(&format!("{role:?}")));
    }
    let purgatory: Purgatory<u32, Op> = builder.build().unwrap();
    if let (true, Some(priority)) = (args.fifo_submitter, args.fifo) {
        set_fifo("submitting", priority);
    }
    let lateness = Arc::new(Mutex::new(Vec::with_capacity(args.ops as usize)));
    for i in 0..args.ops {
        let timeout = timeout_of(i, args);
        let op = Op {
            deadline: Instant::now() + timeout,
            timeout,
            lateness: lateness.clone(),
        };
        // The handle is dropped: the operation answers through its callback.
        drop(purgatory.try_complete_else_watch(op, &[i % 64]).unwrap());
    }
    let burst_end = Instant::now();
    let deadline =
        Instant::now() + Duration::from_millis(args.max_timeout_ms) + Duration::from_secs(30);
    while purgatory.delayed() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let expired = lateness.lock().unwrap().clone();
    (expired, burst_end)
}

/// The floor under any timer thread: no purgatory, one thread that knows
/// every deadline in advance and sleeps until the next tick at which one
/// falls due (deadlines rounded up to the tick, as the purgatory's are),
/// then counts them all as fired at its wake-up. What it measures after
/// the burst is how late a sleeping thread gets a core, nothing else (in
/// the burst it is no floor: see the module docs). It runs with the
/// purgatory's threads' priority settings; the deadlines are taken in a
/// loop like the purgatory's submissions, but without their work.
fn sleeping_thread(args: &Args) -> (Vec<(Instant, i64)>, Instant) {
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let (deadlines_tx, deadlines_rx) = std::sync::mpsc::channel::<Vec<Instant>>();
    let tick = Duration::from_micros(args.tick_us);
    let favour = Favour::of(args);
    let sleeper = std::thread::spawn(move || {
        favour.apply("floor");
        let start = Instant::now();
        ready_tx.send(()).unwrap();
        let deadlines = deadlines_rx.recv().unwrap();
        let mut fired = Vec::with_capacity(deadlines.len());
        let mut next = 0;
        while let Some(&first) = deadlines.get(next) {
            // The first tick boundary at or after the deadline.
            let ticks = (first - start).as_nanos().div_ceil(tick.as_nanos());
            let wake = start + tick * u32::try_from(ticks).expect("within u32 ticks");
            loop {
                let now = Instant::now();
                if now >= wake {
                    break;
                }
                std::thread::sleep(wake - now);
            }
            let now = Instant::now();
            while let Some(&due) = deadlines.get(next).filter(|&&d| d <= now) {
                fired.push((due, (now - due).as_nanos() as i64));
                next += 1;
            }
        }
        fired
    });
    // Deadlines after the thread's start, as the purgatory's are after its
    // build: none can be due before the clock it rounds by began.
    ready.recv().unwrap();
    let mut deadlines: Vec<Instant> = (0..args.ops)
        .map(|i| Instant::now() + timeout_of(i, args))
        .collect();
    // Sorted here, inside the burst: sorted on the sleeping thread, the
    // deadlines due in the milliseconds the sort takes would count as
    // late after the burst, which is no wait for a core.
    deadlines.sort_unstable();
    let burst_end = Instant::now();
    deadlines_tx.send(deadlines).unwrap();
    (sleeper.join().unwrap(), burst_end)
}

/// One line of the table: `late` (sorted, ns) at p50, p90, p99, p99.9 and
/// its largest, in ms, then `last`.
fn print_row(label: &str, late: &[i64], last: &str) {
    let q = |q: f64| match late.len() {
        0 => f64::NAN,
        n => late[((n - 1) as f64 * q).round() as usize] as f64 / 1e6,
    };
    println!(
        "{:<11} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>7}",
        label,
        q(0.5),
        q(0.9),
        q(0.99),
        q(0.999),
        q(1.0),
        last
    );
}

/// What `--nice`, `--fifo` and `--slice-us` ask for the purgatory's threads
/// (and the floor's).
#[derive(Clone, Copy)]
struct Favour {
    nice: Option<i32>,
    fifo: Option<i32>,
    slice_us: Option<u64>,
}

impl Favour {
    fn of(args: &Args) -> Self {
        Favour {
            nice: args.nice,
            fifo: args.fifo,
            slice_us: args.slice_us,
        }
    }

    fn is_asked(&self) -> bool {
        self.nice.is_some() || self.fifo.is_some() || self.slice_us.is_some()
    }

    /// Applies it to the calling thread, `role`.
    fn apply(&self, role: &str) {
        if let Some(nice) = self.nice {
            set_nice(role, nice);
        }
        if let Some(priority) = self.fifo {
            set_fifo(role, priority);
        }
        if let Some(slice) = self.slice_us {
            set_slice(role, slice);
        }
    }
}

/// Sets the calling thread's nice value; a thread that cannot have it
/// would make the run measure something else, so the run stops.
fn set_nice(role: &str, nice: i32) {
    // SAFETY: `gettid` has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: plain system call on this thread's id; no memory is passed.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if rc != 0 {
        eprintln!(
            "setpriority({nice}) on the {role} thread: {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(2);
    }
}

/// Puts the calling thread in `SCHED_FIFO` at `priority`; stops the run if
/// it cannot.
fn set_fifo(role: &str, priority: i32) {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param for the duration of the call;
    // 0 is the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc != 0 {
        eprintln!(
            "SCHED_FIFO at {priority} on the {role} thread: {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(2);
    }
}

/// `struct sched_attr` as `sched_setattr(2)` takes it (its first version).
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// Keeps the calling thread in `SCHED_OTHER` at nice 0 with a requested
/// slice of `slice_us`; stops the run if the kernel refuses it.
fn set_slice(role: &str, slice_us: u64) {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice: 0,
        priority: 0,
        runtime: slice_us * 1000,
        deadline: 0,
        period: 0,
    };
    // SAFETY: `attr` is a valid, fully initialised sched_attr of the size
    // it declares, alive for the call; 0 is the calling thread.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if rc != 0 {
        eprintln!(
            "a {slice_us} µs slice on the {role} thread: {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(2);
    }
}
