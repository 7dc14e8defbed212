//! A rate measured the way Kafka's quota sensors measure one (`Rate` over
//! a `SampledStat`): what was recorded in the last eleven one-second
//! samples, over the time they span.
//!
//! The span counts at least ten whole samples, however recent the first
//! record: a client's first second would otherwise be measured over a
//! fraction of a second and throttled for a burst any quota allows.

/// Samples kept (Kafka's `quota.window.num`).
pub const SAMPLES: i64 = 11;
/// Each sample's span, in ms (Kafka's `quota.window.size.seconds`).
pub const SAMPLE_MS: i64 = 1000;

#[derive(Debug, Clone, Copy)]
struct Sample {
    /// When it started, in ms.
    start: i64,
    /// What was recorded in it.
    value: f64,
}

/// A sampled rate, per second.
#[derive(Debug)]
pub struct SampledRate {
    samples: Vec<Sample>,
    /// The sample being recorded into.
    current: usize,
}

impl SampledRate {
    /// A rate with nothing recorded, its first sample starting at `now`.
    pub fn new(now: i64) -> Self {
        SampledRate {
            samples: vec![Sample {
                start: now,
                value: 0.0,
            }],
            current: 0,
        }
    }

    /// Adds `value` at `now` (ms), in a new sample once the current one's
    /// second has passed. A negative value takes back one recorded before.
    pub fn record(&mut self, value: f64, now: i64) {
        if now >= self.samples[self.current].start + SAMPLE_MS {
            self.current = (self.current + 1) % SAMPLES as usize;
            let fresh = Sample {
                start: now,
                value: 0.0,
            };
            match self.samples.get_mut(self.current) {
                Some(sample) => *sample = fresh,
                None => self.samples.push(fresh),
            }
        }
        self.samples[self.current].value += value;
    }

    /// The rate at `now`, per second.
    pub fn rate(&mut self, now: i64) -> f64 {
        let window = self.window_ms(now);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total * 1000.0 / window as f64
    }

    /// The time the rate is taken over at `now`, in ms: from the oldest
    /// sample's start, but at least ten whole samples and the part of the
    /// eleventh that passed.
    pub fn window_ms(&mut self, now: i64) -> i64 {
        // Samples older than the whole window count for nothing.
        for s in &mut self.samples {
            if now - s.start >= SAMPLES * SAMPLE_MS {
                *s = Sample {
                    start: now,
                    value: 0.0,
                };
            }
        }
        let oldest = self.samples.iter().map(|s| s.start).min().unwrap_or(now);
        let mut elapsed = now - oldest;
        let whole = elapsed / SAMPLE_MS;
        if whole < SAMPLES - 1 {
            elapsed += (SAMPLES - 1 - whole) * SAMPLE_MS;
        }
        elapsed.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_burst_is_measured_over_ten_seconds_at_least() {
        let mut r = SampledRate::new(0);
        r.record(10_000.0, 0);
        // 10 whole samples assumed, plus the 500 ms that passed.
        assert_eq!(r.window_ms(500), 10_500);
        assert!((r.rate(500) - 10_000.0 / 10.5).abs() < 1e-9);
    }

    #[test]
    fn samples_roll_over_and_the_oldest_drop_out() {
        let mut r = SampledRate::new(0);
        // 1,000 a second for 20 seconds: eleven samples kept.
        for second in 0..20 {
            r.record(1_000.0, second * 1000);
        }
        assert_eq!(r.samples.len(), 11);
        let now = 19_500;
        // From the oldest kept sample's start (9 s) to now.
        assert_eq!(r.window_ms(now), 10_500);
        assert!((r.rate(now) - 11_000.0 / 10.5).abs() < 1e-9);
        // Taken back: the last record counts for nothing.
        r.record(-1_000.0, now);
        assert!((r.rate(now) - 10_000.0 / 10.5).abs() < 1e-9);
        // Long idle: everything has aged out.
        assert_eq!(r.rate(60_000), 0.0);
        assert_eq!(r.window_ms(60_000), 10_000);
    }
}
