//! A small number for each live thread, to index per-thread stripes.
//!
//! Structures that threads update on every request (the counters, the
//! spare cells) keep one cache-padded stripe per thread, so that a
//! submitter and a completer on different threads never write one line
//! between them. A thread claims the lowest free number on first use and
//! gives it back when it exits, so numbers stay as dense as the threads
//! alive and fit a fixed array of stripes. While a thread lives, no other
//! thread holds its number: a stripe indexed by it is written by its owner
//! alone.

use parking_lot::Mutex;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How many owned stripes a per-thread structure keeps: request handlers,
/// network threads, the timer and its workers make several threads a core
/// in a broker. Threads numbered beyond it share a fallback.
pub(crate) fn count() -> usize {
    let cpus = std::thread::available_parallelism().map_or(4, usize::from);
    (4 * cpus).next_power_of_two().clamp(16, 256)
}

/// The calling thread's number; `None` while the thread is being torn
/// down (its number may have been given back already).
#[inline]
pub(crate) fn current() -> Option<usize> {
    STRIPE.try_with(|claim| claim.0).ok()
}

/// A thread's claim on number `.0`, from its first use until it exits.
struct StripeClaim(usize);

/// The numbers: the lowest free one goes to the next thread.
struct StripeNumbers {
    /// Numbers given back by exited threads, lowest on top.
    free: BinaryHeap<Reverse<usize>>,
    /// The lowest number never handed out.
    next: usize,
}

impl StripeNumbers {
    const fn new() -> Self {
        StripeNumbers {
            free: BinaryHeap::new(),
            next: 0,
        }
    }

    fn take(&mut self) -> usize {
        match self.free.pop() {
            Some(Reverse(n)) => n,
            None => {
                self.next += 1;
                self.next - 1
            }
        }
    }

    fn give_back(&mut self, n: usize) {
        self.free.push(Reverse(n));
    }
}

static STRIPE_NUMBERS: Mutex<StripeNumbers> = Mutex::new(StripeNumbers::new());

impl StripeClaim {
    fn take() -> Self {
        StripeClaim(STRIPE_NUMBERS.lock().take())
    }
}

impl Drop for StripeClaim {
    fn drop(&mut self) {
        // The mutex orders this thread's last writes to its stripes before
        // the next owner's first read.
        STRIPE_NUMBERS.lock().give_back(self.0);
    }
}

thread_local! {
    static STRIPE: StripeClaim = StripeClaim::take();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_reused_lowest_first() {
        let mut numbers = StripeNumbers::new();
        let taken: Vec<usize> = (0..4).map(|_| numbers.take()).collect();
        assert_eq!(taken, [0, 1, 2, 3]);
        numbers.give_back(2);
        numbers.give_back(0);
        assert_eq!(numbers.take(), 0);
        assert_eq!(numbers.take(), 2);
        assert_eq!(numbers.take(), 4);
    }

    #[test]
    fn live_threads_hold_distinct_numbers() {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let numbers: Vec<usize> = (0..8)
            .map(|_| {
                let barrier = std::sync::Arc::clone(&barrier);
                std::thread::spawn(move || {
                    let n = current().unwrap();
                    // All eight alive at once.
                    barrier.wait();
                    assert_eq!(current(), Some(n), "a thread keeps its number");
                    n
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        let mut distinct = numbers.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), numbers.len());
    }
}
