//! Every compared timer behind one small trait, in 1 ms ticks counted from 0.

use crate::heaps::{IndexedHeap, LazyHeap};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// What the workloads need of a timer.
pub trait Timers {
    const NAME: &'static str;
    type Handle;
    fn new() -> Self;
    /// Adds a timer due at tick `deadline` (> the current time).
    fn insert(&mut self, deadline: u64, value: u64) -> Self::Handle;
    fn cancel(&mut self, handle: Self::Handle) -> bool;
    /// Moves a pending timer to a new deadline.
    fn reschedule(&mut self, handle: Self::Handle, deadline: u64) -> Self::Handle;
    /// Moves time to `now`; fires (and drops) everything due; returns how many.
    fn advance(&mut self, now: u64) -> usize;
}

/// Storing and freeing the value in a slab: no design can do less.
pub struct Floor(slab::Slab<(u64, u64)>);

impl Timers for Floor {
    const NAME: &'static str = "floor";
    type Handle = usize;
    fn new() -> Self {
        Floor(slab::Slab::new())
    }
    fn insert(&mut self, deadline: u64, value: u64) -> usize {
        self.0.insert((deadline, value))
    }
    fn cancel(&mut self, handle: usize) -> bool {
        self.0.try_remove(handle).is_some()
    }
    fn reschedule(&mut self, handle: usize, deadline: u64) -> usize {
        self.0[handle].0 = deadline;
        handle
    }
    fn advance(&mut self, now: u64) -> usize {
        // Only a floor when everything is due (the expire workload).
        let before = self.0.len();
        self.0.retain(|_, e| e.0 > now);
        before - self.0.len()
    }
}

/// This project's wheel.
pub struct Wheel(timing_wheel::TimingWheel<u64>);

impl Timers for Wheel {
    const NAME: &'static str = "wheel";
    type Handle = timing_wheel::TimerId;
    fn new() -> Self {
        Wheel(timing_wheel::TimingWheel::new())
    }
    fn insert(&mut self, deadline: u64, value: u64) -> Self::Handle {
        self.0.insert(deadline, value).expect("far from full")
    }
    fn cancel(&mut self, handle: Self::Handle) -> bool {
        self.0.cancel(handle).is_some()
    }
    fn reschedule(&mut self, handle: Self::Handle, deadline: u64) -> Self::Handle {
        self.0.reschedule(handle, deadline);
        handle
    }
    fn advance(&mut self, now: u64) -> usize {
        self.0.advance(now, |_, v| {
            std::hint::black_box(v);
        })
    }
}

/// Kafka's pre-2015 design.
pub struct HeapLazy(LazyHeap);

impl Timers for HeapLazy {
    const NAME: &'static str = "heap_lazy";
    type Handle = (u32, u32);
    fn new() -> Self {
        HeapLazy(LazyHeap::new())
    }
    fn insert(&mut self, deadline: u64, _value: u64) -> Self::Handle {
        self.0.insert(deadline)
    }
    fn cancel(&mut self, handle: Self::Handle) -> bool {
        self.0.cancel(handle)
    }
    fn reschedule(&mut self, handle: Self::Handle, deadline: u64) -> Self::Handle {
        self.0.cancel(handle);
        self.0.insert(deadline)
    }
    fn advance(&mut self, now: u64) -> usize {
        self.0.advance(now)
    }
}

/// The best a heap can do.
pub struct HeapIndexed(IndexedHeap);

impl Timers for HeapIndexed {
    const NAME: &'static str = "heap_indexed";
    type Handle = (u32, u32);
    fn new() -> Self {
        HeapIndexed(IndexedHeap::new())
    }
    fn insert(&mut self, deadline: u64, _value: u64) -> Self::Handle {
        self.0.insert(deadline)
    }
    fn cancel(&mut self, handle: Self::Handle) -> bool {
        self.0.cancel(handle)
    }
    fn reschedule(&mut self, handle: Self::Handle, deadline: u64) -> Self::Handle {
        self.0.reschedule(handle, deadline);
        handle
    }
    fn advance(&mut self, now: u64) -> usize {
        self.0.advance(now)
    }
}

/// tokio-util's DelayQueue, in a paused current-thread runtime whose clock
/// the bench moves by hand.
pub struct TokioDelayQueue {
    rt: &'static tokio::runtime::Runtime,
    _context: tokio::runtime::EnterGuard<'static>,
    base: tokio::time::Instant,
    now: u64,
    queue: tokio_util::time::DelayQueue<u64>,
}

impl Timers for TokioDelayQueue {
    const NAME: &'static str = "tokio_delay_queue";
    type Handle = tokio_util::time::delay_queue::Key;
    fn new() -> Self {
        // One runtime per instance, leaked: the bench makes a handful.
        let rt: &'static tokio::runtime::Runtime = Box::leak(Box::new(
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .expect("a runtime"),
        ));
        let context = rt.enter();
        TokioDelayQueue {
            rt,
            _context: context,
            base: tokio::time::Instant::now(),
            now: 0,
            queue: tokio_util::time::DelayQueue::new(),
        }
    }
    fn insert(&mut self, deadline: u64, value: u64) -> Self::Handle {
        self.queue
            .insert_at(value, self.base + Duration::from_millis(deadline))
    }
    fn cancel(&mut self, handle: Self::Handle) -> bool {
        self.queue.try_remove(&handle).is_some()
    }
    fn reschedule(&mut self, handle: Self::Handle, deadline: u64) -> Self::Handle {
        self.queue
            .reset_at(&handle, self.base + Duration::from_millis(deadline));
        handle
    }
    fn advance(&mut self, now: u64) -> usize {
        let step = Duration::from_millis(now.saturating_sub(self.now));
        self.now = self.now.max(now);
        let queue = &mut self.queue;
        // `unconstrained`: tokio's co-operative budget would otherwise make
        // `poll_expired` answer Pending after 128 items, due or not.
        self.rt.block_on(tokio::task::unconstrained(async {
            tokio::time::advance(step).await;
            let mut fired = 0;
            while std::future::poll_fn(|cx| {
                std::task::Poll::Ready(match queue.poll_expired(cx) {
                    std::task::Poll::Ready(Some(e)) => {
                        std::hint::black_box(e.into_inner());
                        true
                    }
                    _ => false,
                })
            })
            .await
            {
                fired += 1;
            }
            fired
        }))
    }
}

/// nexus-timer's no-cascade wheel.
pub struct NexusTimer {
    wheel: nexus_timer::Wheel<u64>,
    base: Instant,
    buf: Vec<u64>,
}

impl Timers for NexusTimer {
    const NAME: &'static str = "nexus_timer";
    type Handle = nexus_timer::TimerHandle<u64>;
    fn new() -> Self {
        let base = Instant::now();
        NexusTimer {
            wheel: nexus_timer::Wheel::unbounded(4096, base),
            base,
            buf: Vec::new(),
        }
    }
    fn insert(&mut self, deadline: u64, value: u64) -> Self::Handle {
        self.wheel
            .schedule(self.base + Duration::from_millis(deadline), value)
    }
    fn cancel(&mut self, handle: Self::Handle) -> bool {
        self.wheel.cancel(handle).is_some()
    }
    fn reschedule(&mut self, handle: Self::Handle, deadline: u64) -> Self::Handle {
        self.wheel
            .reschedule(handle, self.base + Duration::from_millis(deadline))
    }
    fn advance(&mut self, now: u64) -> usize {
        self.buf.clear();
        self.wheel
            .poll(self.base + Duration::from_millis(now), &mut self.buf)
    }
}

#[derive(Debug)]
pub struct HhwtEntry {
    id: u64,
    value: u64,
}

impl hierarchical_hash_wheel_timer::wheels::cancellable::CancellableTimerEntry for HhwtEntry {
    type Id = u64;
    fn id(&self) -> &u64 {
        &self.id
    }
}

/// hierarchical_hash_wheel_timer's cancellable quad wheel (entries are
/// `Rc`s, cancellation goes through an id map).
pub struct Hhwt {
    wheel: hierarchical_hash_wheel_timer::wheels::cancellable::QuadWheelWithOverflow<HhwtEntry>,
    now: u64,
    next_id: u64,
}

impl Timers for Hhwt {
    const NAME: &'static str = "hierarchical_hash_wheel_timer";
    type Handle = u64;
    fn new() -> Self {
        Hhwt {
            wheel: hierarchical_hash_wheel_timer::wheels::cancellable::QuadWheelWithOverflow::new(),
            now: 0,
            next_id: 0,
        }
    }
    fn insert(&mut self, deadline: u64, value: u64) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let delay = Duration::from_millis(deadline.saturating_sub(self.now).max(1));
        self.wheel
            .insert_ref_with_delay(Rc::new(HhwtEntry { id, value }), delay)
            .expect("a future deadline");
        id
    }
    fn cancel(&mut self, handle: u64) -> bool {
        self.wheel.cancel(&handle).is_ok()
    }
    fn reschedule(&mut self, handle: u64, deadline: u64) -> u64 {
        // No re-keying in its API: cancel and insert anew.
        self.wheel.cancel(&handle).ok();
        self.insert(deadline, handle)
    }
    fn advance(&mut self, now: u64) -> usize {
        use hierarchical_hash_wheel_timer::wheels::Skip;
        let mut fired = 0;
        while self.now < now {
            match self.wheel.can_skip() {
                Skip::Empty => self.now = now,
                Skip::Millis(n) => {
                    let n = u64::from(n).min(now - self.now) as u32;
                    self.wheel.skip(n);
                    self.now += u64::from(n);
                }
                Skip::None => {
                    for e in self.wheel.tick() {
                        std::hint::black_box(e.value);
                        fired += 1;
                    }
                    self.now += 1;
                }
            }
        }
        fired
    }
}
