//! Broker crashes and restarts drawn from a seed (`--random-faults`), for
//! runs whose faults nobody chose: brokers go down one after another and
//! at times several at once, some for a moment and some past the fencing
//! window, while the clients (simulated, or real ones with `--serve`) go on.
//!
//! Every 0.5-4 s one broker crashes or one that is down restarts, at least
//! one broker staying up; the draws start at a tenth of the run and stop
//! at four fifths of it, when every broker still down restarts, so the run
//! ends with the whole cluster back and time to catch up. The same seed
//! and broker count give the same faults, which
//! [`as_flags`] spells as the `--crash`/`--restart` flags that repeat them.

use crate::config::Fault;
use crate::rng::Rng;
use std::time::Duration;

/// The shortest and longest gap between two draws, in seconds.
const GAP_S: (f64, f64) = (0.5, 4.0);

/// Crashes and restarts for `brokers` brokers over a run of `duration`,
/// drawn from `seed`, in time order. None for a single broker (there is
/// nobody to fail over to) or a run too short for a draw.
pub fn random_faults(seed: u64, brokers: u32, duration: Duration) -> Vec<Fault> {
    let mut faults = Vec::new();
    if brokers < 2 {
        return faults;
    }
    // Its own stream: the workload's draws from the same seed stay as
    // they are without faults.
    let mut rng = Rng::new(seed ^ 0xFA01_7ED5_EED5_0000);
    let start = duration.as_secs_f64() / 10.0;
    let end = duration.as_secs_f64() * 4.0 / 5.0;
    let mut down = vec![false; brokers as usize];
    let mut at = start;
    loop {
        at += GAP_S.0 + rng.unit() * (GAP_S.1 - GAP_S.0);
        if at >= end {
            break;
        }
        let at_d = whole_ms(at);
        let downs: Vec<u32> = (0..brokers).filter(|&b| down[b as usize]).collect();
        let restart = !downs.is_empty() && (downs.len() as u32 == brokers - 1 || rng.chance(0.5));
        if restart {
            let broker = downs[rng.below(downs.len() as u64) as usize];
            down[broker as usize] = false;
            faults.push(Fault::Restart { broker, at: at_d });
        } else {
            let ups: Vec<u32> = (0..brokers).filter(|&b| !down[b as usize]).collect();
            let broker = ups[rng.below(ups.len() as u64) as usize];
            down[broker as usize] = true;
            faults.push(Fault::Crash { broker, at: at_d });
        }
    }
    let back = whole_ms(end);
    for broker in (0..brokers).filter(|&b| down[b as usize]) {
        faults.push(Fault::Restart { broker, at: back });
    }
    faults
}

/// `seconds` to the nearest millisecond, as [`as_flags`] prints it, so
/// that its flags repeat the run exactly (a parsed `"3.235"` is the same
/// `f64` as `3235.0 / 1000.0`).
fn whole_ms(seconds: f64) -> Duration {
    Duration::from_secs_f64((seconds * 1000.0).round() / 1000.0)
}

/// The `--crash`/`--restart` flags that give `faults` (other kinds are
/// left out).
pub fn as_flags(faults: &[Fault]) -> String {
    let flag = |name: &str, broker: u32, at: Duration| {
        format!("--{name} {broker}@{:.3}", at.as_secs_f64())
    };
    faults
        .iter()
        .filter_map(|f| match *f {
            Fault::Crash { broker, at } => Some(flag("crash", broker, at)),
            Fault::Restart { broker, at } => Some(flag("restart", broker, at)),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// Replays `faults` in order: the most brokers down at once, and
    /// whether all are up at the end.
    fn replay(faults: &[Fault], brokers: u32) -> (usize, bool) {
        let mut down = vec![false; brokers as usize];
        let mut most = 0;
        for f in faults {
            match *f {
                Fault::Crash { broker, .. } => {
                    assert!(!down[broker as usize], "broker {broker} crashes while down");
                    down[broker as usize] = true;
                }
                Fault::Restart { broker, .. } => {
                    assert!(down[broker as usize], "broker {broker} restarts while up");
                    down[broker as usize] = false;
                }
                _ => unreachable!("only crashes and restarts"),
            }
            most = most.max(down.iter().filter(|&&d| d).count());
        }
        (most, down.iter().all(|&d| !d))
    }

    #[test]
    fn one_broker_stays_up_and_every_broker_is_back_by_four_fifths_of_the_run() {
        let duration = Duration::from_secs(60);
        let mut most_seen = 0;
        for seed in 0..200 {
            for brokers in [2, 3, 5] {
                let faults = random_faults(seed, brokers, duration);
                assert!(!faults.is_empty());
                let times: Vec<Duration> = faults
                    .iter()
                    .map(|f| match *f {
                        Fault::Crash { at, .. } | Fault::Restart { at, .. } => at,
                        _ => unreachable!(),
                    })
                    .collect();
                assert!(times.windows(2).all(|w| w[0] <= w[1]), "in time order");
                assert!(times[0] >= duration / 10);
                assert!(*times.last().unwrap() <= duration * 4 / 5);
                let (most, all_up) = replay(&faults, brokers);
                assert!(most < brokers as usize, "seed {seed}: all {brokers} down");
                assert!(all_up, "seed {seed}: a broker left down");
                most_seen = most_seen.max(most);
            }
        }
        // Several at once, at times: what a fixed schedule seldom tries.
        assert_eq!(most_seen, 4);
    }

    #[test]
    fn the_same_seed_gives_the_same_faults_and_the_config_accepts_them() {
        let duration = Duration::from_secs(30);
        let a = as_flags(&random_faults(7, 3, duration));
        assert_eq!(a, as_flags(&random_faults(7, 3, duration)));
        assert_ne!(a, as_flags(&random_faults(8, 3, duration)));
        assert!(a.starts_with("--crash "), "{a}");
        let cfg = Config {
            faults: random_faults(7, 3, duration),
            duration,
            ..Config::default()
        };
        cfg.validate().expect("valid faults");
    }

    #[test]
    fn nothing_to_fail_over_to_or_no_time_gives_no_faults() {
        assert!(random_faults(1, 1, Duration::from_secs(60)).is_empty());
        assert!(random_faults(1, 3, Duration::from_millis(500)).is_empty());
    }
}
