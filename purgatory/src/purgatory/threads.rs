//! The timer thread, which sleeps until the next deadline and expires what
//! is due, and the expiration workers, which run the expired operations'
//! callbacks; and how they are stopped, from any thread, their own included.

use super::builder::{ThreadHook, ThreadRole};
use super::handoff::{self, Receiver, Sender};
use super::Shared;
use crate::caught;
use crate::error::ConfigError;
use crate::outcome::Outcome;
use crate::timer_queue::{CellRef, ExpiryBuffers};
use crate::unchecked::Request;
use crate::DelayedOperation;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The timer thread and the expiration workers.
pub(super) struct Threads {
    stop: Arc<AtomicBool>,
    timer: JoinHandle<()>,
    workers: Workers,
}

/// The expiration workers, and the channel that feeds them.
pub(super) struct Workers {
    /// Dropping every sender lets the workers finish the queue and exit.
    feed: Box<dyn Send>,
    threads: Vec<JoinHandle<()>>,
}

impl Threads {
    pub(super) fn start<K, O>(
        shared: &Arc<Shared<K, O>>,
        workers: usize,
        on_start: Option<ThreadHook>,
    ) -> Result<Self, ConfigError>
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        O: DelayedOperation,
    {
        let (tx, rx) = handoff::queue::<Vec<CellRef<K, O>>>();
        let spawn_err = |e: std::io::Error| ConfigError::Spawn(e.to_string());
        // Each thread reports once it has run the hook; see the end.
        let (started_tx, started) = crossbeam_channel::bounded::<()>(workers + 1);
        let mut worker_threads = Vec::with_capacity(workers);
        for n in 0..workers {
            let rx: Receiver<Vec<CellRef<K, O>>> = rx.clone();
            let shared = Arc::clone(shared);
            let on_start = on_start.clone();
            let started = started_tx.clone();
            let worker = std::thread::Builder::new()
                .name(format!("{}-expiration-{n}", shared.name))
                .spawn(move || {
                    starting(on_start, ThreadRole::Expiration(n), &shared.name);
                    let _ = started.send(());
                    for mut batch in &rx {
                        shared.drive_all(&mut batch, Request::Force(Outcome::Expired));
                        // Back to the timer thread, for its next batch.
                        if ExpiryBuffers::<K, O>::worth_keeping(&batch) {
                            rx.recycle(batch);
                        }
                    }
                })
                .map_err(spawn_err)?;
            worker_threads.push(worker);
        }
        let timer_shared = Arc::clone(shared);
        let stop = Arc::new(AtomicBool::new(false));
        let timer_stop = Arc::clone(&stop);
        let timer_tx = tx.clone();
        let timer = std::thread::Builder::new()
            .name(format!("{}-timer", shared.name))
            .spawn(move || {
                starting(on_start, ThreadRole::Timer, &timer_shared.name);
                let _ = started_tx.send(());
                timer_loop(&timer_shared, &timer_stop, &timer_tx)
            })
            .map_err(spawn_err)?;
        // Set once, here, before any submission can need it.
        let _ = shared.timer_thread.set(timer.thread().clone());
        // Returns once every thread has run its hook (a panicking one
        // included), so that a priority raised there counts from the first
        // operation, not from the thread's first turn on a busy machine.
        started.iter().take(workers + 1).for_each(drop);
        Ok(Threads {
            stop,
            timer,
            workers: Workers {
                feed: Box::new(tx),
                threads: worker_threads,
            },
        })
    }

    /// Stops and joins the timer thread; the workers go on with their queue.
    /// `None` when this is the timer thread (an operation dropped there let
    /// go of the last reference to the purgatory): it holds a sender of
    /// the workers' channel, so they cannot finish before it returns, and
    /// are left to finish on their own.
    pub(super) fn stop_timer(self) -> Option<Workers> {
        self.stop.store(true, Ordering::SeqCst);
        self.timer.thread().unpark();
        if is_current(&self.timer) {
            return None;
        }
        join_logged(self.timer, "timer thread");
        Some(self.workers)
    }
}

impl Workers {
    pub(super) fn join(self) {
        drop(self.feed);
        for worker in self.threads {
            // A callback on this very worker may be shutting down (or
            // dropping the last reference): a thread cannot wait for
            // itself. It drains the queue once the callback returns.
            if !is_current(&worker) {
                join_logged(worker, "expiration worker");
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

fn is_current(thread: &JoinHandle<()>) -> bool {
    thread.thread().id() == std::thread::current().id()
}

fn join_logged(thread: JoinHandle<()>, what: &str) {
    // The loops catch callback panics; a join error would be ours.
    if thread.join().is_err() {
        tracing::error!("purgatory {what} panicked");
    }
}

/// Sleeps until the next deadline (or a wake-up), expires what is due, and
/// hands the expired operations to the workers.
fn timer_loop<K, O>(
    shared: &Shared<K, O>,
    stop: &AtomicBool,
    to_workers: &Sender<Vec<CellRef<K, O>>>,
) where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    O: DelayedOperation,
{
    // Kept from one expiry to the next, and the batches' buffers come back
    // from the workers: see `ExpiryBuffers`.
    let mut buffers = ExpiryBuffers::default();
    let mut due = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let now = shared.scale.now_tick(shared.clock.now());
        let next = shared.timer.expire(now, &mut due, true, &mut buffers);
        if !due.is_empty() {
            match to_workers.send(std::mem::take(&mut due)) {
                Ok(spare) => due = spare.unwrap_or_default(),
                Err(_) => break,
            }
        }
        // An insert with an earlier deadline after `expire` recorded the
        // wake-up time unparks us; an unpark before we park makes park
        // return at once, so none is missed.
        match next.and_then(|tick| shared.scale.instant_of(tick)) {
            Some(at) => std::thread::park_timeout(at.saturating_duration_since(shared.clock.now())),
            None => std::thread::park(),
        }
    }
}
