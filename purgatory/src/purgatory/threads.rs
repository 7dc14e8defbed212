//! The purgatory's threads, which take turns at the clock: the one at the
//! clock sleeps until the next deadline, takes what is due, lets the clock
//! go and runs the expired operations' callbacks itself, then takes the
//! clock again unless another thread has; and how they are stopped, from
//! any thread, their own included.
//!
//! Why turns rather than a timer thread that hands expired operations to
//! workers: on a busy machine each wake-up waits for a core, up to a
//! scheduler slice or tick (milliseconds at equal priority). With a
//! hand-off an expiry waits for two wake-ups in turn, the timer thread's
//! and then the worker's; here for one. Nobody else is woken for a batch
//! that takes less than a tick: a wake-up of a thread that then finds
//! nothing to do still takes a core from a busy thread, and the tail of
//! the next expiry's wait grew with them (docs/performance.md).
//!
//! The others wait for their turn with a timeout (`watch`) while
//! operations are pending, and take the clock when they find it free: so
//! a callback that blocks holds up the expiries behind it for at most that
//! long, and up to `expiration_threads` callbacks may block at once. A batch
//! that outlasts its tick wakes them at once. With nothing pending they
//! wait without a timeout, and the thread that next takes a batch, or a
//! submission that finds nobody at the clock, wakes them (`at_clock.rs`).
//!
//! A clock that ran late finds a backlog: the thread at it takes a round
//! of it (`timer_queue::ROUND`, earliest first) and leaves the rest for the
//! next turn, its own after its callbacks or another thread's once a tick
//! is spent on them, so that what a turn holds stays the size of a round.
//!
//! The clock is a lock that sleeps rather than yields (`no_yield_lock.rs`).

use super::builder::{ThreadHook, ThreadRole};
use super::Shared;
use crate::caught;
use crate::error::ConfigError;
use crate::no_yield_lock::Mutex;
use crate::outcome::Outcome;
use crate::reused_buffer::ReusedBuffer;
use crate::timer_queue::{CellRef, ExpiryBuffers};
use crate::unchecked::Request;
use crate::DelayedOperation;
use std::hash::Hash;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The threads that take turns at the clock. They stop once the purgatory
/// is shutting down (`Shared::shutting_down`).
pub(super) struct Threads<K, O> {
    shared: Arc<Shared<K, O>>,
    /// The clock: whoever holds it is the one that sleeps until the next
    /// deadline. It keeps the expiry's buffers (see `ExpiryBuffers`).
    clock: Arc<Mutex<ExpiryBuffers<K, O>>>,
    threads: Vec<JoinHandle<()>>,
}

impl<K, O> Threads<K, O>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    O: DelayedOperation,
{
    /// Starts `1 + workers` threads (the first named the timer thread, the
    /// others expiration workers: they all do both, in turn), and returns
    /// once each has run the start hook.
    pub(super) fn start(
        shared: &Arc<Shared<K, O>>,
        workers: usize,
        on_start: Option<ThreadHook>,
    ) -> Result<Self, ConfigError> {
        let spawn_err = |e: std::io::Error| ConfigError::Spawn(e.to_string());
        let clock = Arc::new(Mutex::new(ExpiryBuffers::<K, O>::default()));
        // Each thread reports once it has run the hook, and waits until
        // all are known (`AtClock` must know them before one takes the
        // clock); see the end.
        let (started_tx, started) = crossbeam_channel::bounded::<()>(workers + 1);
        let (go_tx, go) = crossbeam_channel::bounded::<()>(0);
        let mut threads = Vec::with_capacity(workers + 1);
        for index in 0..=workers {
            let (role, name) = match index {
                0 => (ThreadRole::Timer, format!("{}-timer", shared.name)),
                n => (
                    ThreadRole::Expiration(n - 1),
                    format!("{}-expiration-{}", shared.name, n - 1),
                ),
            };
            let (thread_shared, thread_clock) = (Arc::clone(shared), Arc::clone(&clock));
            let on_start = on_start.clone();
            let started = started_tx.clone();
            let go = go.clone();
            let thread = std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    starting(on_start, role, &thread_shared.name);
                    let _ = started.send(());
                    // Closed (not sent on) once every thread is known.
                    let _ = go.recv();
                    take_turns(&thread_shared, &thread_clock, index);
                })
                .map_err(spawn_err);
            match thread {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    // The ones started stop at their first turn (the
                    // purgatory is never handed out).
                    shared.shutting_down.store(true, Ordering::SeqCst);
                    drop(go_tx);
                    return Err(e);
                }
            }
        }
        shared
            .at_clock
            .set_threads(threads.iter().map(|t| t.thread().clone()).collect());
        drop(go_tx);
        // Returns once every thread has run its hook (a panicking one
        // included), so that a priority raised there counts from the first
        // operation, not from the thread's first turn on a busy machine.
        started.iter().take(workers + 1).for_each(drop);
        Ok(Threads {
            shared: Arc::clone(shared),
            clock,
            threads,
        })
    }

    /// Stops the turns of a purgatory that is shutting down: once this
    /// returns, no thread takes anything more from the timer. Threads
    /// running callbacks finish them (see `join`).
    pub(super) fn stop(&self) {
        let at_clock = &self.shared.at_clock;
        at_clock.wake_all();
        // Whoever holds the clock now sees the stop when it wakes, and lets
        // the clock go without reading the timer; every later holder sees
        // it first thing. Unless this very thread holds it: a drop while
        // it reads the timer let go of the last reference to the purgatory.
        // Nobody else reads the timer meanwhile then, and this thread
        // sees the stop at its next turn.
        if !at_clock.is_held_here() {
            drop(self.clock.lock());
        }
    }

    /// Waits until the threads have finished what they hold, unless this is
    /// one of them (a callback or a drop on it is shutting down): a thread
    /// cannot wait for itself, and another may be waiting for the clock
    /// this one holds. They then finish on their own.
    pub(super) fn join(self) {
        if self.shared.at_clock.is_one_of_us() {
            return;
        }
        for thread in self.threads {
            // The turns catch callback panics; a join error would be ours.
            if thread.join().is_err() {
                tracing::error!("a purgatory thread panicked");
            }
        }
    }
}

/// Runs the embedder's hook, if any, on a thread that is starting; a
/// panic in it is logged, and the thread goes on. Then the thread waits for
/// the timer's lock with priority inheritance if the hook made it
/// real-time (see `no_yield_lock.rs`).
fn starting(hook: Option<ThreadHook>, role: ThreadRole, purgatory: &str) {
    if let Some(hook) = hook {
        if let Err(message) = caught::catch(|| hook(role)) {
            tracing::error!(purgatory, ?role, %message, "on_thread_start panicked");
        }
    }
    // A hook that put this thread in a real-time class wants it to run when
    // due, also when it waits for a lock that a submitter holds.
    crate::no_yield_lock::lend_priority_if_real_time();
}

/// How long a thread waiting for its turn sleeps between looks at the
/// clock while operations are pending: a hundred ticks, within 10 ms to
/// 1 s. The longest a callback that blocks holds up the expiries behind
/// it. Shorter costs lateness: each look is a wake-up that takes a core
/// from a busy thread (`cargo bench --bench lateness`, docs/performance.md).
fn watch(tick: Duration) -> Duration {
    tick.saturating_mul(100)
        .clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// Thread `index`'s life: wait for the clock, sleep at it until something
/// is due (woken early when an earlier deadline is inserted), take what is
/// due, let the clock go, and answer it as expired.
fn take_turns<K, O>(shared: &Shared<K, O>, clock: &Mutex<ExpiryBuffers<K, O>>, index: usize)
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    O: DelayedOperation,
{
    let watch = watch(shared.ticks.tick());
    let mut due: ReusedBuffer<CellRef<K, O>> = ReusedBuffer::default();
    loop {
        if shared.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let Some(mut buffers) = clock.try_lock() else {
            wait_for_turn(shared, watch);
            continue;
        };
        shared.at_clock.arrive(index);
        loop {
            if shared.shutting_down.load(Ordering::SeqCst) {
                shared.at_clock.leave();
                return;
            }
            let now = shared.ticks.now_tick();
            let next = shared.timer.expire(now, &mut due, true, &mut buffers);
            if !due.is_empty() {
                break;
            }
            // An insert with an earlier deadline after `expire` recorded
            // the wake-up time unparks us; an unpark before we park makes
            // park return at once, so none is missed.
            match next.and_then(|tick| shared.ticks.until(tick)) {
                Some(wait) => std::thread::park_timeout(wait),
                None => std::thread::park(),
            }
        }
        shared.at_clock.leave();
        drop(buffers);
        // Threads that saw nothing pending wait without a timeout: they
        // must watch the clock while these callbacks run.
        if shared.at_clock.anyone_dozing() {
            shared.at_clock.wake_all();
        }
        due.note_len();
        let until = Instant::now() + shared.ticks.tick();
        let mut batch = due.drain(..);
        shared.drive_until(&mut batch, Request::Force(Outcome::Expired), until);
        if batch.len() > 0 {
            // A tick is spent: the next deadline is another thread's.
            shared.at_clock.wake_all();
            shared.drive_rest(&mut batch, Request::Force(Outcome::Expired));
        }
        drop(batch);
        due.end_use();
    }
}

/// Sleeps until this thread's next look at the clock: after [`watch`]
/// while operations are pending, or until woken when none is.
fn wait_for_turn<K, O>(shared: &Shared<K, O>, watch: Duration)
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    O: DelayedOperation,
{
    if shared.timer.next_expiration().is_some() {
        std::thread::park_timeout(watch);
    } else {
        shared.at_clock.doze(|| {
            if shared.timer.next_expiration().is_none() {
                std::thread::park();
            }
        });
    }
}
