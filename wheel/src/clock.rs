//! Where time comes from: the system's monotonic clock, or a hand-driven one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A source of monotonic time.
///
/// Implementations must never go backwards. The purgatory reads its clock
/// through this trait, so tests and simulations can drive time by hand with
/// [`ManualClock`].
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Instant;
}

/// The operating system's monotonic clock ([`Instant::now`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to. Clones share the same time, so a test
/// keeps one clone and hands another to the code under test.
///
/// ```
/// use std::time::Duration;
/// use timing_wheel::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let seen_by_code_under_test = clock.clone();
/// let t0 = clock.now();
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(seen_by_code_under_test.now() - t0, Duration::from_millis(250));
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    origin: Instant,
    /// Nanoseconds since `origin`.
    offset: AtomicU64,
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl ManualClock {
    /// A clock standing at the real current instant, which it then keeps
    /// until advanced.
    pub fn new() -> Self {
        Self::starting_at(Instant::now())
    }

    /// A clock standing at `origin`.
    pub fn starting_at(origin: Instant) -> Self {
        ManualClock {
            inner: Arc::new(Inner {
                origin,
                offset: AtomicU64::new(0),
            }),
        }
    }

    /// Moves the clock forward by `by` (saturating after about 584 years).
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        // fetch_update cannot fail with a closure that always returns Some.
        let _ = self
            .inner
            .offset
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                Some(old.saturating_add(nanos))
            });
    }

    /// Moves the clock forward to `to`; an earlier instant leaves it where it is.
    pub fn advance_to(&self, to: Instant) {
        let target = u64::try_from(to.saturating_duration_since(self.inner.origin).as_nanos())
            .unwrap_or(u64::MAX);
        self.inner.offset.fetch_max(target, Ordering::AcqRel);
    }

    /// How far the clock has been advanced in total.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.inner.offset.load(Ordering::Acquire))
    }

    /// The instant the clock started at.
    pub fn origin(&self) -> Instant {
        self.inner.origin
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.inner.origin + self.elapsed()
    }
}
