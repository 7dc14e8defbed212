//! Criterion suites: the wheel's operations, and the purgatory's
//! watch-then-complete cycle on one thread and on two, its
//! submit-then-force-complete cycle on one, and its expiry alone.
//!
//! `cargo bench --bench ops`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use purgatory::{DelayedOperation, Outcome, Purgatory};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use timing_wheel::TimingWheel;

fn filled(pending: u64) -> (TimingWheel<u64>, Vec<timing_wheel::TimerId>) {
    let mut wheel = TimingWheel::new();
    let ids = (0..pending)
        .map(|i| wheel.insert(1 + (i * 7919) % 30_000, i).expect("room"))
        .collect();
    (wheel, ids)
}

fn wheel_ops(c: &mut Criterion) {
    let mut group = c.benchmark_group("wheel");
    for pending in [1_000u64, 1_000_000] {
        group.bench_with_input(
            BenchmarkId::new("insert_cancel", pending),
            &pending,
            |b, &n| {
                let (mut wheel, mut ids) = filled(n);
                let mut i = 0usize;
                b.iter(|| {
                    let slot = i % ids.len();
                    wheel.cancel(ids[slot]);
                    ids[slot] = wheel
                        .insert(1 + (i as u64 * 104_729) % 30_000, 0)
                        .expect("room");
                    i += 1;
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("reschedule", pending),
            &pending,
            |b, &n| {
                let (mut wheel, ids) = filled(n);
                let mut i = 0usize;
                b.iter(|| {
                    wheel.reschedule(ids[i % ids.len()], 1 + (i as u64 * 104_729) % 30_000);
                    i += 1;
                });
            },
        );
    }
    group.bench_function("advance_1ms_idle_1e6", |b| {
        let (mut wheel, _) = filled(1_000_000);
        b.iter(|| wheel.advance(0, |_, _| {}));
    });
    group.finish();
}

/// Completes as soon as its flag is up.
struct Flagged(Arc<AtomicBool>);

impl DelayedOperation for Flagged {
    fn timeout(&self) -> Duration {
        Duration::from_secs(30)
    }
    fn try_complete(&mut self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    fn on_complete(&mut self, _: Outcome) {}
}

/// Never completes by itself: answered by `force_complete`.
struct Pending;

impl DelayedOperation for Pending {
    fn timeout(&self) -> Duration {
        Duration::from_millis(200)
    }
    fn try_complete(&mut self) -> bool {
        false
    }
    fn on_complete(&mut self, _: Outcome) {}
}

fn purgatory_cycle(c: &mut Criterion) {
    let mut group = c.benchmark_group("purgatory");
    // One thread: watch an op under its partition, then complete it by key.
    group.bench_function("watch_then_check_1_thread", |b| {
        let p: Purgatory<u32, Flagged> = Purgatory::builder("bench").build().expect("valid");
        let mut key = 0u32;
        b.iter(|| {
            let flag = Arc::new(AtomicBool::new(false));
            p.try_complete_else_watch(Flagged(Arc::clone(&flag)), &[key % 32])
                .expect("running");
            flag.store(true, Ordering::Relaxed);
            p.check_and_complete(&(key % 32));
            key += 1;
        });
    });
    // One thread, the shape of Kafka's benchmark: every operation watches
    // the same 3 keys with a 200 ms timeout and is force-completed 64
    // submissions later, still in cache, so what is measured is the
    // purgatory's own work (locks, reference counts, the state's exchanges),
    // not cache misses or another core.
    group.bench_function("submit_then_force_complete_3_shared_keys", |b| {
        let p: Purgatory<u32, Pending> = Purgatory::builder("bench").build().expect("valid");
        let mut in_flight = std::collections::VecDeque::with_capacity(65);
        b.iter(|| {
            in_flight.push_back(
                p.try_complete_else_watch(Pending, &[3, 17, 42])
                    .expect("running"),
            );
            if in_flight.len() > 64 {
                in_flight.pop_front().expect("in flight").force_complete();
            }
        });
    });
    // Two threads on different partitions of one purgatory.
    group.bench_function("watch_then_check_2_threads", |b| {
        let p: Arc<Purgatory<u32, Flagged>> =
            Arc::new(Purgatory::builder("bench").build().expect("valid"));
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            let workers: Vec<_> = (0..2u32)
                .map(|t| {
                    let p = Arc::clone(&p);
                    std::thread::spawn(move || {
                        for i in 0..iters {
                            let key = t * 1_000 + (i % 16) as u32;
                            let flag = Arc::new(AtomicBool::new(false));
                            p.try_complete_else_watch(Flagged(Arc::clone(&flag)), &[key])
                                .expect("running");
                            flag.store(true, Ordering::Relaxed);
                            p.check_and_complete(&key);
                        }
                    })
                })
                .collect();
            for w in workers {
                w.join().expect("worker");
            }
            // Time per cycle, counting both threads' cycles.
            start.elapsed() / 2
        });
    });
    // Expiry alone, on the calling thread: 100,000 operations with timeouts
    // spread over 1-200 ms under 64 keys (the lateness bench's shape), the
    // clock moved 1 ms at a time until all have expired. Per operation.
    group.bench_function("expire_1e5_spread_64_keys", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let rounds = iters.div_ceil(100_000);
            for _ in 0..rounds {
                let clock = purgatory::ManualClock::new();
                let p: Purgatory<u32, Spread> = Purgatory::builder("bench")
                    .manual(clock.clone())
                    .build()
                    .expect("valid");
                for i in 0..100_000u32 {
                    let ms = 1 + (u64::from(i) * 7919) % 200;
                    drop(p.try_complete_else_watch(Spread(Duration::from_millis(ms)), &[i % 64]));
                }
                let start = std::time::Instant::now();
                let mut expired = 0;
                for _ in 0..=200 {
                    clock.advance(Duration::from_millis(1));
                    expired += p.advance_clock();
                }
                total += start.elapsed();
                assert_eq!(expired, 100_000, "every operation expired");
            }
            // Per operation expired, scaled to the iterations asked for.
            total.div_f64(rounds as f64 * 100_000.0) * u32::try_from(iters).unwrap_or(u32::MAX)
        });
    });
    group.finish();
}

/// Never completes by itself, with a timeout of its own.
struct Spread(Duration);

impl DelayedOperation for Spread {
    fn timeout(&self) -> Duration {
        self.0
    }
    fn try_complete(&mut self) -> bool {
        false
    }
    fn on_complete(&mut self, _: Outcome) {}
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(2));
    targets = wheel_ops, purgatory_cycle
}
criterion_main!(benches);
