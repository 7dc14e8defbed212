//! The purgatory's time in ticks: its clock read through a [`TickScale`],
//! or, for the system clock on Linux, the monotonic clock read directly in
//! nanoseconds.
//!
//! Every submission turns "now plus the operation's timeout" into a tick.
//! Through `Instant` that takes std's subtraction of two instants (a call,
//! unless the whole program is optimised at once, that normalises a
//! `Duration` on the way) and 128-bit nanosecond arithmetic; from the
//! clock's nanoseconds it is a subtraction, an addition and a division.
//! In `purgatory_perf` that took 63 to 106 instructions off each
//! submission (docs/performance.md). All of the purgatory's ticks (the
//! deadlines, the present, how long to sleep) come from the one reading,
//! so they agree with each other whatever clock `Instant` reads; instants
//! are only made for [`Purgatory::next_expiration`].
//!
//! [`Purgatory::next_expiration`]: crate::Purgatory::next_expiration

use crate::error::ConfigError;
use std::any::TypeId;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timing_wheel::{Clock, SystemClock, TickScale};

/// The purgatory's clock and the length of its ticks.
pub(crate) struct Ticks {
    clock: Arc<dyn Clock>,
    scale: TickScale,
    direct: Option<Direct>,
}

/// The monotonic clock in nanoseconds: `origin` is a reading taken just
/// before the scale's start, so a tick counted from it is never earlier
/// than the same tick counted from the start; `tick` is the scale's tick
/// as u64 nanoseconds, which the submission divides by.
#[derive(Debug, Clone, Copy)]
struct Direct {
    origin: u64,
    tick: u64,
}

/// Whether a clock of type `C` is the [`SystemClock`].
pub(crate) fn is_system<C: Clock>() -> bool {
    TypeId::of::<C>() == TypeId::of::<SystemClock>()
}

impl Ticks {
    /// Ticks of `tick` on `clock`, counted from now; `system` says that
    /// `clock` is the [`SystemClock`] (see [`is_system`]), which is then
    /// read directly where that is possible.
    ///
    /// # Errors
    /// [`ConfigError::ZeroTick`] for a zero `tick`.
    pub(crate) fn new(
        clock: Arc<dyn Clock>,
        system: bool,
        tick: Duration,
    ) -> Result<Self, ConfigError> {
        // Read before the scale's start: see `Direct`.
        let direct = system.then(monotonic_nanos).flatten().and_then(|origin| {
            let tick = u64::try_from(tick.as_nanos()).ok()?;
            (tick > 0).then_some(Direct { origin, tick })
        });
        let scale = TickScale::new(clock.now(), tick).map_err(|_| ConfigError::ZeroTick)?;
        Ok(Ticks {
            clock,
            scale,
            direct,
        })
    }

    /// The clock's present instant.
    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The length of a tick.
    pub(crate) fn tick(&self) -> Duration {
        self.scale.tick()
    }

    /// The tick the present is in.
    pub(crate) fn now_tick(&self) -> u64 {
        match self.direct_elapsed() {
            Some((elapsed, tick)) => elapsed / tick,
            None => self.scale.now_tick(self.clock.now()),
        }
    }

    /// The first tick at or after `timeout` from now (saturating).
    #[inline]
    pub(crate) fn tick_after(&self, timeout: Duration) -> u64 {
        match self.direct_elapsed() {
            Some((elapsed, tick)) => {
                let nanos = elapsed.saturating_add(saturating_nanos(timeout));
                if nanos == u64::MAX {
                    return u64::MAX;
                }
                nanos / tick + u64::from(!nanos.is_multiple_of(tick))
            }
            None => self.scale.tick_after(self.clock.now(), timeout),
        }
    }

    /// How long from now until `tick` begins (zero if it has); `None` when
    /// that lies beyond what can be represented.
    pub(crate) fn until(&self, tick: u64) -> Option<Duration> {
        match self.direct_elapsed() {
            Some((elapsed, length)) => {
                let at = tick.checked_mul(length)?;
                Some(Duration::from_nanos(at.saturating_sub(elapsed)))
            }
            None => {
                let at = self.scale.instant_of(tick)?;
                Some(at.saturating_duration_since(self.clock.now()))
            }
        }
    }

    /// The instant `tick` begins at on the clock; `None` when it lies
    /// beyond what `Instant` can represent.
    pub(crate) fn instant_of(&self, tick: u64) -> Option<Instant> {
        self.scale.instant_of(tick)
    }

    /// Nanoseconds since the origin and the tick's length, when the clock
    /// is read directly.
    #[inline]
    fn direct_elapsed(&self) -> Option<(u64, u64)> {
        let direct = self.direct?;
        let now = monotonic_nanos()?;
        Some((now.saturating_sub(direct.origin), direct.tick))
    }
}

fn saturating_nanos(duration: Duration) -> u64 {
    duration
        .as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(duration.subsec_nanos()))
}

#[cfg(target_os = "linux")]
use crate::unchecked::monotonic::nanos as monotonic_nanos;

#[cfg(not(target_os = "linux"))]
#[inline]
fn monotonic_nanos() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use timing_wheel::ManualClock;

    fn ticks_on<C: Clock>(clock: C, tick: Duration) -> Result<Ticks, ConfigError> {
        Ticks::new(Arc::new(clock), is_system::<C>(), tick)
    }

    #[test]
    fn a_zero_tick_is_refused() {
        assert!(matches!(
            ticks_on(SystemClock, Duration::ZERO),
            Err(ConfigError::ZeroTick)
        ));
        assert!(matches!(
            ticks_on(ManualClock::new(), Duration::ZERO),
            Err(ConfigError::ZeroTick)
        ));
    }

    #[test]
    fn only_the_system_clock_is_read_directly() {
        assert!(is_system::<SystemClock>());
        assert!(!is_system::<ManualClock>());
        let system = ticks_on(SystemClock, Duration::from_millis(1)).unwrap();
        assert_eq!(system.direct.is_some(), cfg!(target_os = "linux"));
        let manual = ticks_on(ManualClock::new(), Duration::from_millis(1)).unwrap();
        assert!(manual.direct.is_none());
    }

    #[test]
    fn the_direct_reading_agrees_with_the_scale() {
        // Both count from (nearly) the same start, on the same clock on
        // Linux. Ticks of 100 ms leave room for a thread preempted between
        // two reads on a loaded machine.
        let ticks = ticks_on(SystemClock, Duration::from_millis(100)).unwrap();
        for _ in 0..3 {
            let direct = ticks.now_tick();
            let through_scale = ticks.scale.now_tick(Instant::now());
            assert!(
                direct.abs_diff(through_scale) <= 1,
                "{direct} {through_scale}"
            );
            // 250 ms on: the third or fourth tick after, unless preempted.
            let deadline = ticks.tick_after(Duration::from_millis(250));
            assert!((direct + 3..=direct + 5).contains(&deadline), "{deadline}");
            std::thread::sleep(Duration::from_millis(120));
        }
    }

    #[test]
    fn deadlines_round_up_and_saturate() {
        let ticks = ticks_on(SystemClock, Duration::from_secs(3600)).unwrap();
        // Within the first hour: a timeout of one hour ends in tick 1 or 2.
        assert_eq!(ticks.now_tick(), 0);
        assert!(ticks.tick_after(Duration::ZERO) <= 1);
        assert!((1..=2).contains(&ticks.tick_after(Duration::from_secs(3600))));
        assert_eq!(ticks.tick_after(Duration::MAX), u64::MAX);
        assert_eq!(ticks.until(0), Some(Duration::ZERO));
        assert!(ticks.until(1).unwrap() <= Duration::from_secs(3600));
        assert_eq!(ticks.until(u64::MAX), None);
    }

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let clock = ManualClock::new();
        let ticks = ticks_on(clock.clone(), Duration::from_millis(1)).unwrap();
        assert_eq!(ticks.now_tick(), 0);
        assert_eq!(ticks.tick_after(Duration::from_micros(1500)), 2);
        assert_eq!(ticks.until(2), Some(Duration::from_millis(2)));
        clock.advance(Duration::from_millis(5));
        assert_eq!(ticks.now_tick(), 5);
        assert_eq!(ticks.until(2), Some(Duration::ZERO));
        assert_eq!(ticks.instant_of(5), Some(clock.now()));
    }
}
