//! A re-creation of Kafka's purgatory benchmark (TestPurgatoryPerformance,
//! used in 2015 to justify the timing wheel), with its option names and
//! defaults. See BENCHMARKS.md.
//!
//! Requests arrive at `--rate` per second (exponential gaps), `--num` in all;
//! every request watches the same `--keys` keys, drawn once per run from a
//! key space of `--key-space-size`; each has timeout `--timeout` ms and a
//! completion latency drawn from a log-normal fitted to `--pct50` and
//! `--pct75` ms. A completion thread force-completes each request when its
//! latency has passed; a request whose latency is beyond its timeout expires.
//!
//! `--random-keys` departs from Kafka's benchmark: each request draws its own
//! keys, so key sets seldom repeat (the purgatory's per-key path, where the
//! default workload takes its groups path; see `watchers.rs`).
//!
//! Beside the purgatory (`wheel`) run the DelayQueue baseline (`heap_lazy`),
//! the floor (`floor`: the least any purgatory must do for this workload,
//! specialised to it; see `floor.rs`) and no purgatory at all (`null`).
//!
//! Each run reports its process CPU time (every thread) and its own peak
//! resident memory (Linux: `VmHWM`, reset to the current RSS before the run).
//!
//! `cargo bench --bench purgatory_perf -- --help` lists the options.

mod floor;
mod threads;

use clap::{Parser, ValueEnum};
use floor::Floor;
use purgatory::{Delayed, DelayedOperation, Outcome, Purgatory, TimerKind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The harness's allocator (jemalloc: flat under the purgatory's soak).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Kafka's purgatory benchmark (TestPurgatoryPerformance), run on this
/// purgatory (`wheel`), on the DelayQueue baseline (`heap_lazy`) and on no
/// purgatory at all (`null`: the harness's own cost).
#[derive(Parser, Clone)]
#[command(
    name = "purgatory_perf",
    bin_name = "cargo bench --bench purgatory_perf --"
)]
struct Options {
    /// Target arrival rate, requests per second (exponential gaps).
    #[arg(long, default_value_t = 500_000.0, value_parser = positive)]
    rate: f64,
    /// Requests in all.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    num: u64,
    /// Keys every request watches (1 to 1000), drawn once per run from the
    /// key space.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=1000))]
    keys: u64,
    /// Size of the key space the keys are drawn from.
    #[arg(long = "key-space-size", value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    key_space: u64,
    /// Each request draws its own keys, so key sets seldom repeat (not
    /// Kafka's workload: it measures the purgatory's per-key path).
    #[arg(long)]
    random_keys: bool,
    /// Timeout of every request, ms (at most 10 minutes: the completion
    /// thread keeps a bucket per millisecond of it).
    #[arg(long = "timeout", value_name = "MS", default_value_t = 200, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    timeout_ms: u64,
    /// Median completion latency, ms (log-normal).
    #[arg(long, default_value_t = 20.0, value_parser = positive)]
    pct50: f64,
    /// 75th percentile of the completion latency, ms; at least --pct50.
    #[arg(long, default_value_t = 60.0, value_parser = positive)]
    pct75: f64,
    /// Ramp the rate in Kafka's low (20/60 ms) and high (200/400 ms) cases
    /// and report the highest each implementation sustains (achieved >= 95%
    /// of target); --rate, --pct50 and --pct75 are then not used.
    #[arg(long)]
    find_saturation: bool,
    /// One JSON object per run (and per saturation found), a line each.
    #[arg(long)]
    json: bool,
    /// Run only this implementation.
    #[arg(long = "impl", value_name = "IMPL", value_enum)]
    only: Option<Impl>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
    /// A name filter, as `cargo bench -- FILTER` passes to every bench:
    /// this one runs only if its name contains it.
    #[arg(hide = true)]
    filter: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Impl {
    /// This purgatory.
    Wheel,
    /// The DelayQueue baseline (Kafka's pre-2015 design).
    #[value(name = "heap_lazy")]
    HeapLazy,
    /// The least any purgatory must do for this workload: one queue under
    /// one lock, specialised to one key set and one timeout (`floor.rs`).
    Floor,
    /// No purgatory: each request is answered in its submission, so the
    /// run costs what the harness itself costs (arrivals, latency draws,
    /// operations), the floor under the others' figures.
    Null,
}

/// A finite number above zero.
fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        Ok(_) => Err("must be a finite number above zero".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The options, or an error message and exit status 2.
fn options() -> Options {
    let o = Options::parse();
    if o.pct75 < o.pct50 {
        use clap::CommandFactory;
        Options::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                format!("--pct75 ({}) is below --pct50 ({})", o.pct75, o.pct50),
            )
            .exit();
    }
    o
}

/// Requests answered in the current run. A static, not an `Arc` handed to
/// each operation: Kafka's FakeOperation holds a plain JVM reference to its
/// latch, and an `Arc` clone per request would add a reference count written
/// by both threads to every request.
static ANSWERED: AtomicU64 = AtomicU64::new(0);

/// Kafka's FakeOperation: complete once its latency has passed.
struct FakeOperation {
    completes_at: Instant,
    timeout: Duration,
}

impl DelayedOperation for FakeOperation {
    fn timeout(&self) -> Duration {
        self.timeout
    }
    fn try_complete(&mut self) -> bool {
        Instant::now() >= self.completes_at
    }
    fn on_complete(&mut self, _: Outcome) {
        ANSWERED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Seeded generator with the two draws the workload needs.
struct Rng {
    state: u64,
    /// The second normal draw of the last Box-Muller pair, as Java's
    /// `Random.nextGaussian` (which Kafka's benchmark calls) keeps it.
    spare_normal: Option<f64>,
}

impl Rng {
    fn new(seed: u64) -> Self {
        Rng {
            state: seed,
            spare_normal: None,
        }
    }
    fn unit(&mut self) -> f64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state >> 11) as f64 / (1u64 << 53) as f64
    }
    fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
    fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare_normal.take() {
            return z;
        }
        let (u, v) = (1.0 - self.unit(), self.unit());
        let r = (-2.0 * u.ln()).sqrt();
        let (sin, cos) = (std::f64::consts::TAU * v).sin_cos();
        self.spare_normal = Some(r * sin);
        r * cos
    }
}

/// Starts a new peak for [`peak_rss_mib`], so that each run reports its
/// own (Linux 4.0 and later; elsewhere the peak is the process's so far).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident memory since [`reset_peak_rss`], in MiB: `VmHWM`, which
/// belongs to this program's address space. (`getrusage`'s `ru_maxrss`,
/// the fallback, survives `exec`: under `cargo bench` it starts at cargo's
/// own peak, about 50 MiB.)
fn peak_rss_mib() -> f64 {
    let from_proc = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        });
    if let Some(kib) = from_proc {
        return kib / 1024.0;
    }
    // SAFETY: an all-zero rusage is a valid value to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the duration of the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_maxrss as f64 / 1024.0
}

/// The completion thread's queue (Kafka's CompletionQueue): each request
/// in the 1 ms bucket of its completion time, on a ring of buckets one
/// timeout long. Only requests that complete before their timeout are
/// handed over, and the ring is moved to the present before each batch
/// of them, so none lies a lap ahead. A bucket is a `Vec` filled and
/// drained in order: the benchmark's own queue costs a sequential walk per
/// millisecond, not a cache miss per request, leaving the misses to the
/// purgatory under test.
struct CompletionRing<T> {
    origin: Instant,
    buckets: Vec<Vec<T>>,
    /// The first millisecond (since `origin`) whose bucket has not fired.
    next: u64,
    len: usize,
}

impl<T> CompletionRing<T> {
    /// A ring for completion times up to `span` after the present of the
    /// last call to [`complete_until`](Self::complete_until).
    fn new(origin: Instant, span: Duration) -> Self {
        // Two more than the span's milliseconds: rounding the present and
        // a latency down to whole milliseconds loses up to one each.
        let len = (span.as_millis() as usize + 2).next_power_of_two();
        CompletionRing {
            origin,
            buckets: (0..len).map(|_| Vec::new()).collect(),
            next: 0,
            len: 0,
        }
    }

    fn millis(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.origin).as_millis() as u64
    }

    /// Completes `handle` once `at` has passed; if it has already, once the
    /// present millisecond has.
    fn insert(&mut self, at: Instant, handle: T) {
        let ms = self.millis(at).max(self.next);
        let mask = self.buckets.len() as u64 - 1;
        assert!(ms - self.next <= mask, "a completion beyond the ring");
        self.buckets[(ms & mask) as usize].push(handle);
        self.len += 1;
    }

    /// Force-completes (with `complete`) every request whose millisecond
    /// has passed by `now`.
    fn complete_until(&mut self, now: Instant, complete: &impl Fn(T)) {
        let mask = self.buckets.len() as u64 - 1;
        let now = self.millis(now);
        while self.next < now && self.len > 0 {
            let bucket = &mut self.buckets[(self.next & mask) as usize];
            self.len -= bucket.len();
            bucket.drain(..).for_each(complete);
            self.next += 1;
        }
        self.next = self.next.max(now);
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }
}

struct RunResult {
    implementation: &'static str,
    target_rate: f64,
    achieved_rate: f64,
    /// Process CPU time over the run, every thread's.
    cpu: Duration,
    cpu_us_per_request: f64,
    peak_rss_mib: f64,
    completed: u64,
    expired: u64,
    wall: Duration,
    /// CPU time per thread over the run, busiest first.
    threads: Vec<(String, Duration)>,
}

/// What a run submits to: a purgatory, the floor, or nothing.
trait Target: Send + Sync + 'static {
    /// What the completion thread holds for a parked request.
    type Ticket: Send + 'static;
    /// Submits `op` under `keys`; a ticket if it was parked.
    fn submit(&self, op: FakeOperation, keys: &[u64]) -> Option<Self::Ticket>;
    /// Completes a parked request (unless it was answered already).
    fn force_complete(&self, ticket: Self::Ticket);
    /// Shuts down, everything answered; returns (completed, expired).
    fn finish(&self) -> (u64, u64);
}

impl Target for Purgatory<u64, FakeOperation> {
    type Ticket = Delayed<u64, FakeOperation>;
    fn submit(&self, op: FakeOperation, keys: &[u64]) -> Option<Self::Ticket> {
        let handle = self
            .try_complete_else_watch(op, keys)
            .expect("running purgatory");
        (!handle.is_completed()).then_some(handle)
    }
    fn force_complete(&self, handle: Self::Ticket) {
        handle.force_complete();
    }
    fn finish(&self) -> (u64, u64) {
        let m = self.metrics();
        self.shutdown();
        (m.completed, m.expired)
    }
}

/// The floor with its expiry thread.
struct FloorTarget {
    floor: Arc<Floor<FakeOperation>>,
    expiry: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Target for FloorTarget {
    type Ticket = u64;
    fn submit(&self, op: FakeOperation, _: &[u64]) -> Option<u64> {
        self.floor.submit(op)
    }
    fn force_complete(&self, n: u64) {
        self.floor.force_complete(n);
    }
    fn finish(&self) -> (u64, u64) {
        self.floor.stop();
        if let Some(expiry) = self.expiry.lock().expect("not poisoned").take() {
            expiry.join().expect("the floor's expiry thread");
        }
        self.floor.counts()
    }
}

/// No purgatory: each request is answered in its submission.
struct NullTarget;

impl Target for NullTarget {
    type Ticket = std::convert::Infallible;
    fn submit(&self, mut op: FakeOperation, _: &[u64]) -> Option<Self::Ticket> {
        op.on_complete(Outcome::Completed);
        None
    }
    fn force_complete(&self, never: Self::Ticket) {
        match never {}
    }
    fn finish(&self) -> (u64, u64) {
        (ANSWERED.load(Ordering::Relaxed), 0)
    }
}

/// Runs the workload on `imp`.
fn run(imp: Impl, name: &'static str, o: &Options, rate: f64) -> RunResult {
    let purgatory = |kind| {
        Arc::new(
            Purgatory::builder("fake")
                .timer(kind)
                .build()
                .expect("valid purgatory"),
        )
    };
    match imp {
        Impl::Wheel => run_on(purgatory(TimerKind::Wheel), name, o, rate),
        Impl::HeapLazy => run_on(
            purgatory(TimerKind::DelayQueue {
                purge_interval: 1000,
            }),
            name,
            o,
            rate,
        ),
        Impl::Floor => {
            let (floor, expiry) = Floor::start();
            let target = FloorTarget {
                floor,
                expiry: std::sync::Mutex::new(Some(expiry)),
            };
            run_on(Arc::new(target), name, o, rate)
        }
        Impl::Null => run_on(Arc::new(NullTarget), name, o, rate),
    }
}

/// Runs the workload on `target`.
fn run_on<T: Target>(target: Arc<T>, name: &'static str, o: &Options, rate: f64) -> RunResult {
    reset_peak_rss();
    let mut rng = Rng::new(0x5DEE_CE66_D1CE_4E5B);
    // Drawn once per run, as Kafka's benchmark does: every request shares them
    // (unless `--random-keys`).
    let mut keys: Vec<u64> = (0..o.keys)
        .map(|_| (rng.unit() * o.key_space as f64) as u64)
        .collect();
    let sigma = (o.pct75.ln() - o.pct50.ln()) / 0.674_489_750_196_081_7;
    let timeout = Duration::from_millis(o.timeout_ms);
    // Runs follow one another: the previous one waited for all its answers.
    ANSWERED.store(0, Ordering::Relaxed);
    // Completions travel in batches: one channel message per request would
    // cost more than the purgatory itself.
    let (tx, rx) = crossbeam_channel::unbounded::<Vec<(Instant, T::Ticket)>>();
    // Emptied batches go back to the generator: a batch allocated on one
    // thread and freed on the other would contend on the allocator's lock,
    // a cost of this harness, not of the purgatory under test.
    let (empty_tx, empty_rx) = crossbeam_channel::unbounded();

    // The completion thread: force-completes each request when its latency
    // has passed (Kafka's CompletionQueue). It wakes every millisecond and
    // takes the generator's batches then: it never blocks on the channel,
    // so that sending a batch costs the generator no wake-up (Kafka's
    // `DelayQueue.offer` signals the completion thread only for a new
    // earliest request).
    // Named, so that a profile tells its samples from the generator's.
    let completing = Arc::clone(&target);
    let completer = std::thread::Builder::new()
        .name("completer".into())
        .spawn(move || {
            // It ends before the run's last look at the threads: it
            // reports its own CPU time.
            let started = threads::own();
            let complete = |ticket| completing.force_complete(ticket);
            let mut queue = CompletionRing::new(Instant::now(), timeout);
            let mut open = true;
            while open || !queue.is_empty() {
                loop {
                    match rx.try_recv() {
                        Ok(mut batch) => {
                            // The ring then starts at the present, and so
                            // has room for every request of the batch, all
                            // created before it (however long this loop ran).
                            queue.complete_until(Instant::now(), &complete);
                            for (at, handle) in batch.drain(..) {
                                queue.insert(at, handle);
                            }
                            let _ = empty_tx.send(batch);
                        }
                        Err(crossbeam_channel::TryRecvError::Disconnected) => {
                            open = false;
                            break;
                        }
                        Err(crossbeam_channel::TryRecvError::Empty) => break,
                    }
                }
                queue.complete_until(Instant::now(), &complete);
                std::thread::sleep(Duration::from_millis(1));
            }
            threads::own().saturating_sub(started)
        })
        .expect("spawn the completion thread");
    let mut batch = Vec::with_capacity(256);
    let mut batch_started = Instant::now();

    let threads_before = threads::snapshot();
    let cpu_before = threads::process();
    let start = Instant::now();
    let mut next = start;
    let gap_mean = 1e9 / rate;
    for _ in 0..o.num {
        next += Duration::from_nanos(rng.exponential(gap_mean) as u64);
        let mut now = Instant::now();
        // Open loop: ahead of schedule, wait; behind, go on at once.
        if next > now + Duration::from_micros(200) {
            std::thread::sleep(next - now);
            now = Instant::now();
        }
        let latency_ms = (o.pct50.ln() + sigma * rng.normal()).exp();
        let latency = Duration::from_secs_f64(latency_ms / 1e3);
        let completes_at = now + latency;
        let op = FakeOperation {
            completes_at,
            timeout,
        };
        if o.random_keys {
            for key in keys.iter_mut() {
                *key = (rng.unit() * o.key_space as f64) as u64;
            }
        }
        if let Some(ticket) = target.submit(op, &keys) {
            // Beyond its timeout: left to expire.
            if latency < timeout {
                batch.push((completes_at, ticket));
            }
        }
        if batch.len() == batch.capacity()
            || now.duration_since(batch_started) > Duration::from_micros(500)
        {
            let empty = empty_rx
                .try_recv()
                .unwrap_or_else(|_| Vec::with_capacity(256));
            let _ = tx.send(std::mem::replace(&mut batch, empty));
            batch_started = now;
        }
    }
    let _ = tx.send(batch);
    let generated = start.elapsed();
    drop(tx);
    let completer_cpu = completer.join().expect("completion thread");
    // Everything still pending expires within the timeout.
    while ANSWERED.load(Ordering::Relaxed) < o.num {
        std::thread::sleep(Duration::from_millis(5));
    }
    let wall = start.elapsed();
    let cpu = threads::process() - cpu_before;
    let mut threads = threads::snapshot().since(&threads_before, "generator");
    threads.push(("completer".into(), completer_cpu));
    threads.sort_by_key(|t| std::cmp::Reverse(t.1));
    let (completed, expired) = target.finish();
    let answered = ANSWERED.load(Ordering::Relaxed);
    if answered != o.num || completed + expired != o.num {
        eprintln!(
            "{name}: {} requests, {answered} answers, {completed} completed and {expired} expired: not each answered once",
            o.num
        );
        std::process::exit(1);
    }
    RunResult {
        implementation: name,
        target_rate: rate,
        achieved_rate: o.num as f64 / generated.as_secs_f64(),
        cpu,
        cpu_us_per_request: cpu.as_secs_f64() * 1e6 / o.num as f64,
        peak_rss_mib: peak_rss_mib(),
        completed,
        expired,
        wall,
        threads,
    }
}

const IMPLS: [(Impl, &str); 4] = [
    (Impl::Wheel, "wheel"),
    (Impl::HeapLazy, "heap_lazy"),
    (Impl::Floor, "floor"),
    (Impl::Null, "null"),
];

fn print(r: &RunResult, case: &str, json: bool) {
    if json {
        let threads: Vec<String> = r
            .threads
            .iter()
            .map(|(name, cpu)| format!(r#""{name}":{:.3}"#, cpu.as_secs_f64()))
            .collect();
        println!(
            r#"{{"case":"{case}","impl":"{}","target_rate":{:.0},"achieved_rate":{:.0},"cpu_s":{:.3},"cpu_us_per_request":{:.3},"peak_rss_mib":{:.1},"completed":{},"expired":{},"wall_s":{:.3},"thread_cpu_s":{{{}}}}}"#,
            r.implementation,
            r.target_rate,
            r.achieved_rate,
            r.cpu.as_secs_f64(),
            r.cpu_us_per_request,
            r.peak_rss_mib,
            r.completed,
            r.expired,
            r.wall.as_secs_f64(),
            threads.join(",")
        );
    } else {
        println!(
            "{case:<6} {:<10} target {:>10.0}/s achieved {:>10.0}/s ({:>5.1}%)  cpu {:>6.3} s, {:>6.3} us/request  peak rss {:>7.1} MiB  completed {:>8} expired {:>8}",
            r.implementation,
            r.target_rate,
            r.achieved_rate,
            100.0 * r.achieved_rate / r.target_rate,
            r.cpu.as_secs_f64(),
            r.cpu_us_per_request,
            r.peak_rss_mib,
            r.completed,
            r.expired
        );
        let threads: Vec<String> = r
            .threads
            .iter()
            .map(|(name, cpu)| format!("{name} {:.3}", cpu.as_secs_f64()))
            .collect();
        println!("       CPU s by thread: {}", threads.join(", "));
    }
}

fn main() {
    let o = options();
    if o.filter
        .as_ref()
        .is_some_and(|f| !"purgatory_perf".contains(f.as_str()))
    {
        return;
    }
    let impls: Vec<(Impl, &str)> = IMPLS
        .into_iter()
        .filter(|(which, _)| o.only.is_none_or(|only| only == *which))
        .collect();
    if !o.find_saturation {
        for &(imp, name) in &impls {
            print(&run(imp, name, &o, o.rate), "custom", o.json);
        }
        return;
    }
    // Both of Kafka's cases: low timeout-to-latency (20/60 ms) and high (200/400 ms).
    for (case, pct50, pct75) in [("low", 20.0, 60.0), ("high", 200.0, 400.0)] {
        let case_opts = Options {
            pct50,
            pct75,
            ..o.clone()
        };
        for &(imp, name) in &impls {
            // Ramp by 1.5x until the achieved rate falls under 95% of the
            // target. From 100k/s: both implementations sustain that on a
            // 2-core machine, and each run below it takes 10 s or more.
            let mut rate = 100_000.0;
            let mut best = 0.0;
            let sustains = |rate: f64| {
                let r = run(imp, name, &case_opts, rate);
                print(&r, case, case_opts.json);
                r.achieved_rate >= 0.95 * rate
            };
            while rate <= 20e6 && sustains(rate) {
                best = rate;
                rate *= 1.5;
            }
            // Then halve the gap between the last rate sustained and the
            // first one missed, three times (geometric midpoints): the
            // answer is then within 5% instead of within 1.5x.
            let mut missed = rate;
            for _ in 0..3 {
                if best == 0.0 {
                    break;
                }
                let mid = (best * missed).sqrt();
                if sustains(mid) {
                    best = mid;
                } else {
                    missed = mid;
                }
            }
            if case_opts.json {
                println!(r#"{{"case":"{case}","impl":"{name}","saturation_rate":{best:.0}}}"#);
            } else {
                println!("{case:<6} {name:<10} sustains {best:.0} requests/s (achieved >= 95% of target)\n");
            }
        }
    }
}
