//! The floor: the least that any purgatory must do for this workload, to
//! measure how far the purgatory under test is from it.
//!
//! Every request of Kafka's benchmark watches the same keys and has the
//! same timeout, so a purgatory specialised to it needs one structure: a
//! queue of slots in submission order, which is also deadline order. It
//! serves as the keys' one watch list and as the timer. A submission
//! appends a slot under the queue's lock; a forced completion finds its
//! slot by its submission number and empties it in place (an eager
//! unlink: the operation leaves at once, O(1)); one expiry thread pops the
//! due slots off the front every millisecond and answers their operations
//! itself. The operation lives in its slot: no allocation per request, no
//! reference count, no handle, no state machine (the one lock decides who
//! answers), no hand-off to workers.
//!
//! What it leaves out, and a general purgatory cannot: more than one key
//! set (a map from key to list), more than one timeout (a wheel), checks
//! by key, a handle that can wait or be polled, callbacks run outside any
//! lock, panics caught. It does what the workload needs and no more: each
//! request is answered once, by its completion or by its expiry.

use parking_lot::Mutex;
use purgatory::{DelayedOperation, Outcome};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A specialised purgatory for one key set and one timeout.
pub struct Floor<O> {
    queue: Mutex<Queue<O>>,
    stop: AtomicBool,
    /// Counted by the completing thread and the expiry thread, one each.
    completed: Padded,
    expired: Padded,
}

/// A counter on a cache line of its own.
#[derive(Default)]
#[repr(align(128))]
struct Padded(AtomicU64);

impl std::ops::Deref for Padded {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

struct Queue<O> {
    slots: VecDeque<Slot<O>>,
    /// The submission number of `slots[0]`.
    head: u64,
}

struct Slot<O> {
    deadline: Instant,
    /// `None` once answered.
    op: Option<O>,
}

impl<O: DelayedOperation> Floor<O> {
    /// The floor and its expiry thread.
    pub fn start() -> (Arc<Self>, JoinHandle<()>) {
        let floor = Arc::new(Floor {
            queue: Mutex::new(Queue {
                slots: VecDeque::new(),
                head: 0,
            }),
            stop: AtomicBool::new(false),
            completed: Default::default(),
            expired: Default::default(),
        });
        let expiry = {
            let floor = Arc::clone(&floor);
            std::thread::Builder::new()
                .name("floor-expiry".into())
                .spawn(move || floor.expire_until_stopped())
                .expect("spawn the floor's expiry thread")
        };
        (floor, expiry)
    }

    /// Tries `op`, and parks it if its condition does not hold; returns its
    /// submission number then. Checked twice, as a purgatory does (before
    /// watching, and once watched), the second time under the lock that
    /// a completion would take.
    pub fn submit(&self, mut op: O) -> Option<u64> {
        if op.try_complete() {
            op.on_complete(Outcome::Completed);
            self.completed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let deadline = Instant::now() + op.timeout();
        let mut queue = self.queue.lock();
        if op.try_complete() {
            drop(queue);
            op.on_complete(Outcome::Completed);
            self.completed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        queue.slots.push_back(Slot {
            deadline,
            op: Some(op),
        });
        Some(queue.head + queue.slots.len() as u64 - 1)
    }

    /// Completes the operation submitted as number `n`, unless it was
    /// answered already.
    pub fn force_complete(&self, n: u64) {
        let taken = {
            let mut queue = self.queue.lock();
            let head = queue.head;
            let taken = n
                .checked_sub(head)
                .and_then(|i| queue.slots.get_mut(i as usize))
                .and_then(|slot| slot.op.take());
            // Emptied slots at the front go at once; the others when the
            // front reaches them (within one timeout).
            while queue.slots.front().is_some_and(|s| s.op.is_none()) {
                queue.slots.pop_front();
                queue.head += 1;
            }
            taken
        };
        if let Some(mut op) = taken {
            op.on_complete(Outcome::Completed);
            self.completed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// (completed, expired) so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.completed.load(Ordering::Relaxed),
            self.expired.load(Ordering::Relaxed),
        )
    }

    /// Stops the expiry thread once everything parked has expired.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn expire_until_stopped(&self) {
        let mut due = Vec::new();
        loop {
            let now = Instant::now();
            let empty = {
                let mut queue = self.queue.lock();
                while queue.slots.front().is_some_and(|s| s.deadline <= now) {
                    if let Some(op) = queue.slots.pop_front().and_then(|s| s.op) {
                        due.push(op);
                    }
                    queue.head += 1;
                }
                queue.slots.is_empty()
            };
            for mut op in due.drain(..) {
                op.on_expiration();
                op.on_complete(Outcome::Expired);
                self.expired.fetch_add(1, Ordering::Relaxed);
            }
            if empty && self.stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
