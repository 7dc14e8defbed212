//! A [`TimingWheel`] that speaks `Instant`s.

use crate::error::InsertError;
use crate::id::TimerId;
use crate::scale::TickScale;
use crate::wheel::TimingWheel;
use std::time::{Duration, Instant};

/// A [`TimingWheel`] with a [`TickScale`]: deadlines and the present are
/// `Instant`s, converted to ticks so that nothing fires early.
///
/// ```
/// use std::time::Duration;
/// use timing_wheel::{Clock, ManualClock, Timer};
///
/// let clock = ManualClock::new();
/// let mut timer = Timer::new(clock.now()); // 1 ms ticks
/// timer.insert_after(clock.now(), Duration::from_millis(200), "fetch max.wait").unwrap();
///
/// clock.advance(Duration::from_millis(199));
/// assert_eq!(timer.advance_to(clock.now(), |_, _| {}), 0);
/// clock.advance(Duration::from_millis(1));
/// assert_eq!(timer.advance_to(clock.now(), |_, v| assert_eq!(v, "fetch max.wait")), 1);
/// ```
#[derive(Debug)]
pub struct Timer<T> {
    wheel: TimingWheel<T>,
    scale: TickScale,
}

impl<T> Timer<T> {
    /// An empty timer with 1 ms ticks counted from `start`.
    pub fn new(start: Instant) -> Self {
        Self::with_scale(TickScale::millis(start))
    }

    /// An empty timer with the given ticks.
    pub fn with_scale(scale: TickScale) -> Self {
        Timer {
            wheel: TimingWheel::new(),
            scale,
        }
    }

    /// The tick scale in use.
    pub fn scale(&self) -> &TickScale {
        &self.scale
    }

    /// The wheel underneath, in ticks.
    pub fn wheel(&self) -> &TimingWheel<T> {
        &self.wheel
    }

    /// The wheel underneath, mutably.
    pub fn wheel_mut(&mut self) -> &mut TimingWheel<T> {
        &mut self.wheel
    }

    /// Adds `value` due at `deadline`. See [`TimingWheel::insert`] for
    /// deadlines already past and for the error.
    pub fn insert_at(&mut self, deadline: Instant, value: T) -> Result<TimerId, InsertError<T>> {
        self.wheel.insert(self.scale.deadline_tick(deadline), value)
    }

    /// Adds `value` due `timeout` after `now`; any `Duration`, up to
    /// `Duration::MAX`, is accepted.
    pub fn insert_after(
        &mut self,
        now: Instant,
        timeout: Duration,
        value: T,
    ) -> Result<TimerId, InsertError<T>> {
        self.wheel
            .insert(self.scale.tick_after(now, timeout), value)
    }

    /// See [`TimingWheel::cancel`].
    pub fn cancel(&mut self, id: TimerId) -> Option<T> {
        self.wheel.cancel(id)
    }

    /// Moves a pending entry to a new deadline; see [`TimingWheel::reschedule`].
    pub fn reschedule_at(&mut self, id: TimerId, deadline: Instant) -> bool {
        self.wheel
            .reschedule(id, self.scale.deadline_tick(deadline))
    }

    /// Fires everything due at `now`; see [`TimingWheel::advance`].
    pub fn advance_to(&mut self, now: Instant, fire: impl FnMut(TimerId, T)) -> usize {
        self.wheel.advance(self.scale.now_tick(now), fire)
    }

    /// When [`advance_to`](Self::advance_to) next has work; `None` when
    /// empty or when that lies beyond what `Instant` can represent.
    pub fn next_expiration(&self) -> Option<Instant> {
        self.scale.instant_of(self.wheel.next_expiration()?)
    }

    /// Number of pending entries.
    pub fn len(&self) -> usize {
        self.wheel.len()
    }

    /// Whether no entry is pending.
    pub fn is_empty(&self) -> bool {
        self.wheel.is_empty()
    }

    /// Removes every pending entry; see [`TimingWheel::drain`].
    pub fn drain(&mut self) -> std::vec::IntoIter<(TimerId, T)> {
        self.wheel.drain()
    }
}
