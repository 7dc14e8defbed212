//! The queue on which the timer thread hands expired operations to the
//! expiration workers.
//!
//! A worker with nothing to do blocks at once. A channel that spins and
//! calls `sched_yield` before it blocks (as crossbeam's does) costs little on
//! an idle machine, but on a busy one each yield sends the worker behind
//! every runnable thread, and Linux's EEVDF scheduler moves a yielding
//! thread's deadline back a whole slice: the next batch, arriving while the
//! worker is still in that loop, waited about a millisecond per yield
//! instead of being run when it was sent. Expiries are due once per tick,
//! so the worker is idle almost every time a batch arrives; a futex wait
//! and one wake-up per batch cost nothing beside that.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::Arc;

/// A multi-producer, multi-consumer queue of batches that closes when its
/// last sender goes.
struct Queue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

struct State<T> {
    batches: VecDeque<T>,
    /// Emptied batches that receivers gave back, for senders to fill
    /// again (at most [`SPARE`]).
    spare: Vec<T>,
    senders: usize,
    receivers: usize,
}

/// Emptied batches kept for reuse: a batch in a worker's hands and one
/// waiting is the common most.
const SPARE: usize = 2;

/// The sending side; the queue closes when the last clone is dropped.
pub(super) struct Sender<T>(Arc<Queue<T>>);

/// The receiving side; iterating it blocks for the next batch and ends
/// once the queue is closed and empty.
pub(super) struct Receiver<T>(Arc<Queue<T>>);

/// A connected pair.
pub(super) fn queue<T>() -> (Sender<T>, Receiver<T>) {
    let queue = Arc::new(Queue {
        state: Mutex::new(State {
            batches: VecDeque::new(),
            spare: Vec::new(),
            senders: 1,
            receivers: 1,
        }),
        ready: Condvar::new(),
    });
    (Sender(Arc::clone(&queue)), Receiver(queue))
}

impl<T> Sender<T> {
    /// Queues `batch` and wakes one waiting receiver, and returns an
    /// emptied batch a receiver gave back, if any, to fill next; hands
    /// `batch` back if no receiver is left to take it.
    pub(super) fn send(&self, batch: T) -> Result<Option<T>, T> {
        let mut state = self.0.state.lock();
        if state.receivers == 0 {
            return Err(batch);
        }
        state.batches.push_back(batch);
        let spare = state.spare.pop();
        drop(state);
        self.0.ready.notify_one();
        Ok(spare)
    }
}

impl<T> Receiver<T> {
    /// The next batch, waiting for it; `None` once every sender is gone and
    /// the queue is empty.
    pub(super) fn recv(&self) -> Option<T> {
        let mut state = self.0.state.lock();
        loop {
            if let Some(batch) = state.batches.pop_front() {
                return Some(batch);
            }
            if state.senders == 0 {
                return None;
            }
            self.0.ready.wait(&mut state);
        }
    }
}

impl<T> Receiver<T> {
    /// Gives an emptied batch back for a sender to fill again; kept unless
    /// [`SPARE`] are already.
    pub(super) fn recycle(&self, emptied: T) {
        let mut state = self.0.state.lock();
        if state.spare.len() < SPARE {
            state.spare.push(emptied);
            return;
        }
        // Freed after the lock.
        drop(state);
        drop(emptied);
    }
}

impl<T> Iterator for &Receiver<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.recv()
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.0.state.lock().senders += 1;
        Sender(Arc::clone(&self.0))
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.0.state.lock().receivers += 1;
        Receiver(Arc::clone(&self.0))
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock();
        state.senders -= 1;
        if state.senders == 0 {
            drop(state);
            // Every waiting receiver must see the end.
            self.0.ready.notify_all();
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.0.state.lock().receivers -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn batches_arrive_in_order_and_the_end_follows_the_last_sender() {
        let (tx, rx) = queue();
        let second = tx.clone();
        tx.send(1).unwrap();
        second.send(2).unwrap();
        drop(tx);
        assert_eq!(rx.recv(), Some(1));
        assert_eq!(rx.recv(), Some(2));
        // One sender is left: nothing ends yet.
        let waiter = std::thread::spawn(move || rx.into_iter_all());
        std::thread::sleep(Duration::from_millis(20));
        second.send(3).unwrap();
        drop(second);
        assert_eq!(waiter.join().unwrap(), vec![3]);
    }

    #[test]
    fn every_blocked_receiver_sees_the_end() {
        let (tx, rx) = queue::<u32>();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let rx = rx.clone();
                std::thread::spawn(move || rx.recv())
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        drop(tx);
        for w in waiters {
            assert_eq!(w.join().unwrap(), None);
        }
    }

    #[test]
    fn emptied_batches_given_back_come_out_of_later_sends() {
        let (tx, rx) = queue::<Vec<u32>>();
        assert_eq!(tx.send(vec![1]), Ok(None), "none given back yet");
        let mut batch = rx.recv().unwrap();
        batch.clear();
        let room = batch.as_ptr();
        rx.recycle(batch);
        let spare = tx.send(vec![2]).unwrap().expect("the batch given back");
        assert_eq!(spare.as_ptr(), room, "the same buffer");
        // At most `SPARE` are kept.
        for _ in 0..SPARE + 3 {
            rx.recycle(Vec::with_capacity(8));
        }
        let kept = (0..SPARE + 3)
            .filter_map(|i| tx.send(vec![i as u32]).unwrap())
            .count();
        assert_eq!(kept, SPARE);
    }

    #[test]
    fn a_send_with_no_receiver_left_hands_the_batch_back() {
        let (tx, rx) = queue();
        drop(rx);
        assert_eq!(tx.send(7), Err(7));
    }

    #[test]
    fn batches_sent_from_many_threads_are_each_received_once() {
        let (tx, rx) = queue();
        let receivers: Vec<_> = (0..3)
            .map(|_| {
                let rx = rx.clone();
                std::thread::spawn(move || rx.into_iter_all())
            })
            .collect();
        drop(rx);
        let senders: Vec<_> = (0..4u32)
            .map(|s| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        tx.send(s * 1000 + i).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        senders.into_iter().for_each(|s| s.join().unwrap());
        let mut got: Vec<u32> = receivers
            .into_iter()
            .flat_map(|r| r.join().unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..4000).collect::<Vec<_>>());
    }

    impl<T> Receiver<T> {
        fn into_iter_all(self) -> Vec<T> {
            (&self).collect()
        }
    }
}
