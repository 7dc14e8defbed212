//! Converting between `Instant`s and the wheel's ticks.

use crate::error::ConfigError;
use std::time::{Duration, Instant};

/// The length of a tick and the instant of tick 0.
///
/// Deadlines round *up* to a tick and the present rounds *down*, so an entry
/// never fires before its deadline, and at most one tick after it (plus
/// however late the driver calls `advance`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TickScale {
    start: Instant,
    tick_nanos: u128,
}

impl TickScale {
    /// Ticks of `tick` counted from `start`.
    ///
    /// # Errors
    /// [`ConfigError::ZeroTick`] for a zero `tick`.
    pub fn new(start: Instant, tick: Duration) -> Result<Self, ConfigError> {
        let tick_nanos = tick.as_nanos();
        if tick_nanos == 0 {
            return Err(ConfigError::ZeroTick);
        }
        Ok(TickScale { start, tick_nanos })
    }

    /// One-millisecond ticks from `start`.
    pub fn millis(start: Instant) -> Self {
        TickScale {
            start,
            tick_nanos: 1_000_000,
        }
    }

    /// The instant of tick 0.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// The length of a tick.
    pub fn tick(&self) -> Duration {
        duration_from_nanos(self.tick_nanos)
    }

    /// The tick a deadline belongs to: the first tick at or after it
    /// (`u64::MAX` for anything further away than that).
    pub fn deadline_tick(&self, deadline: Instant) -> u64 {
        let nanos = deadline.saturating_duration_since(self.start).as_nanos();
        ticks(nanos, self.tick_nanos, Round::Up)
    }

    /// The tick that `now` is in: the last tick at or before it.
    pub fn now_tick(&self, now: Instant) -> u64 {
        let nanos = now.saturating_duration_since(self.start).as_nanos();
        ticks(nanos, self.tick_nanos, Round::Down)
    }

    /// The tick `timeout` after `now` (rounded up; saturating).
    pub fn tick_after(&self, now: Instant, timeout: Duration) -> u64 {
        let nanos = now.saturating_duration_since(self.start).as_nanos() + timeout.as_nanos();
        ticks(nanos, self.tick_nanos, Round::Up)
    }

    /// The instant a tick starts at; `None` when it lies beyond what
    /// `Instant` can represent.
    pub fn instant_of(&self, tick: u64) -> Option<Instant> {
        self.start
            .checked_add(duration_from_nanos(u128::from(tick) * self.tick_nanos))
    }
}

enum Round {
    Up,
    Down,
}

/// `nanos / tick` in whole ticks, saturating. In 64 bits whenever both fit
/// (584 years of nanoseconds), where the division is one instruction
/// instead of the 128-bit division's library call: a purgatory divides
/// once per submission.
fn ticks(nanos: u128, tick: u128, round: Round) -> u64 {
    let (whole, rest) = match (u64::try_from(nanos), u64::try_from(tick)) {
        (Ok(nanos), Ok(tick)) => (u128::from(nanos / tick), !nanos.is_multiple_of(tick)),
        _ => (nanos / tick, !nanos.is_multiple_of(tick)),
    };
    let ticks = match round {
        Round::Up => whole + u128::from(rest),
        Round::Down => whole,
    };
    u64::try_from(ticks).unwrap_or(u64::MAX)
}

fn duration_from_nanos(nanos: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let secs = u64::try_from(nanos / NANOS_PER_SEC).unwrap_or(u64::MAX);
    Duration::new(secs, (nanos % NANOS_PER_SEC) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up_and_now_rounds_down() {
        let t0 = Instant::now();
        let scale = TickScale::millis(t0);
        let d = t0 + Duration::from_micros(1500);
        assert_eq!(scale.deadline_tick(d), 2);
        assert_eq!(scale.now_tick(d), 1);
        assert_eq!(scale.deadline_tick(t0 + Duration::from_millis(2)), 2);
        assert_eq!(scale.now_tick(t0 + Duration::from_millis(2)), 2);
        assert_eq!(scale.deadline_tick(t0), 0);
    }

    #[test]
    fn instants_before_the_start_are_tick_zero() {
        let t0 = Instant::now() + Duration::from_secs(5);
        let scale = TickScale::millis(t0);
        assert_eq!(scale.now_tick(Instant::now()), 0);
    }

    #[test]
    fn huge_timeouts_saturate() {
        let t0 = Instant::now();
        let scale = TickScale::new(t0, Duration::from_nanos(1)).unwrap();
        assert_eq!(scale.tick_after(t0, Duration::MAX), u64::MAX);
        assert_eq!(
            scale.instant_of(u64::MAX).map(|_| ()),
            t0.checked_add(Duration::from_nanos(u64::MAX)).map(|_| ())
        );
    }

    #[test]
    fn ticks_beyond_64_bits_of_nanoseconds_divide_as_within() {
        let cases = [
            (u128::from(u64::MAX), 1_000_000),
            (u128::from(u64::MAX) + 1, 1_000_000),
            (u128::from(u64::MAX) * 3 + 7, 3),
            (u128::from(u64::MAX) * 1_000_000 + 1, 1_000_000),
            (5_000_000_001, u128::from(u64::MAX) + 2),
            (2_500_000, 1_000_000),
            (3_000_000, 1_000_000),
        ];
        for (nanos, tick) in cases {
            let clamp = |t: u128| u64::try_from(t).unwrap_or(u64::MAX);
            assert_eq!(ticks(nanos, tick, Round::Up), clamp(nanos.div_ceil(tick)));
            assert_eq!(ticks(nanos, tick, Round::Down), clamp(nanos / tick));
        }
    }

    #[test]
    fn zero_tick_is_an_error() {
        assert_eq!(
            TickScale::new(Instant::now(), Duration::ZERO),
            Err(ConfigError::ZeroTick)
        );
    }
}
