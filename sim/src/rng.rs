//! A small seeded generator (xoshiro256**) and the distributions the
//! workload draws from.
//!
//! Ours rather than `rand`'s so that a seed yields the same stream, and so the
//! same report byte for byte, whatever crate versions a build resolves.

/// A seeded pseudo-random generator.
#[derive(Debug, Clone)]
pub struct Rng([u64; 4]);

impl Rng {
    /// A generator for `seed` (any value, zero included).
    pub fn new(seed: u64) -> Self {
        // splitmix64 spreads the seed over the state, as the authors advise.
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng([next(), next(), next(), next()])
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Exponentially distributed with the given mean (Poisson gaps).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }

    /// A standard normal draw (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit();
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// A log-normal distribution given by two percentiles, as Kafka's
/// purgatory benchmark specifies its latencies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogNormal {
    mu: f64,
    sigma: f64,
}

impl LogNormal {
    /// The log-normal whose median is `p50` and 75th percentile `p75`
    /// (`0 < p50 <= p75`).
    pub fn from_percentiles(p50: f64, p75: f64) -> Self {
        // z(0.75) of the standard normal.
        const Z75: f64 = 0.674_489_750_196_081_7;
        LogNormal {
            mu: p50.ln(),
            sigma: (p75.ln() - p50.ln()) / Z75,
        }
    }

    /// One draw.
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        (self.mu + self.sigma * rng.normal()).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_stream() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }

    #[test]
    fn distributions_have_their_parameters() {
        let mut rng = Rng::new(7);
        let n = 200_000;
        let mean = (0..n).map(|_| rng.exponential(5.0)).sum::<f64>() / n as f64;
        assert!((mean - 5.0).abs() < 0.1, "{mean}");
        let ln = LogNormal::from_percentiles(20.0, 60.0);
        let mut draws: Vec<f64> = (0..n).map(|_| ln.sample(&mut rng)).collect();
        draws.sort_by(f64::total_cmp);
        let p50 = draws[n / 2];
        let p75 = draws[n * 3 / 4];
        assert!((p50 - 20.0).abs() < 1.0, "{p50}");
        assert!((p75 - 60.0).abs() < 3.0, "{p75}");
        assert!((0..1000).all(|_| rng.below(10) < 10));
    }
}
