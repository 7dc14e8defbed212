//! Everything a run is made of, with Kafka-like defaults, and the checks
//! that refuse impossible combinations.

use std::fmt;
use std::time::Duration;

/// Which purgatory implementation the brokers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerChoice {
    /// The timing-wheel purgatory.
    Wheel,
    /// The binary-heap DelayQueue baseline (purge every 1000 completions).
    DelayQueue,
}

impl TimerChoice {
    /// The name used in flags and reports.
    pub fn name(self) -> &'static str {
        match self {
            TimerChoice::Wheel => "wheel",
            TimerChoice::DelayQueue => "delayqueue",
        }
    }
}

/// How time passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockChoice {
    /// Simulated: a discrete-event loop on a manual clock, deterministic per seed.
    Sim,
    /// Real: the system clock, the purgatories' own timer threads.
    Real,
}

impl ClockChoice {
    /// The name used in flags and reports.
    pub fn name(self) -> &'static str {
        match self {
            ClockChoice::Sim => "sim",
            ClockChoice::Real => "real",
        }
    }
}

/// A fault injected at a given time.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// `broker` applies what it fetches as a follower `delay` late, from
    /// `from` until `until`: it falls behind, the ISR shrinks, then it
    /// catches up and rejoins.
    SlowFollower {
        /// The lagging broker.
        broker: u32,
        /// When it starts lagging.
        from: Duration,
        /// When it recovers.
        until: Duration,
        /// Extra delay before each fetched batch is applied.
        delay: Duration,
    },
    /// `broker` dies at `at`: its pending produces and fetches are answered
    /// with a not-leader error through `cancel_for_key`, leadership moves,
    /// clients retry.
    Crash {
        /// The broker that dies.
        broker: u32,
        /// When.
        at: Duration,
    },
    /// `broker`, crashed by an earlier [`Fault::Crash`], comes back at `at`:
    /// it fetches what it missed, rejoins the ISR of each partition once it
    /// has caught up, and then leads again the partitions it is the
    /// preferred (first) replica of, as Kafka's automatic leader rebalance
    /// hands them back. Requests parked at the leaders it takes over from
    /// are answered with a not-leader error through `cancel_for_key`.
    Restart {
        /// The broker that comes back.
        broker: u32,
        /// When.
        at: Duration,
    },
    /// A `fraction` of the group's members stop heartbeating at `at`; their
    /// sessions expire.
    StopHeartbeats {
        /// Share of members that go silent.
        fraction: f64,
        /// When.
        at: Duration,
    },
}

/// A run's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The scenario's name.
    pub scenario: String,
    /// Seed of every random draw.
    pub seed: u64,
    /// Purgatory implementation.
    pub timer: TimerChoice,
    /// Simulated or real time.
    pub clock: ClockChoice,
    /// How long clients send requests (in-flight ones are then drained).
    pub duration: Duration,

    /// Brokers in the cluster.
    pub brokers: u32,
    /// Topic-partitions.
    pub partitions: u32,
    /// Replicas per partition.
    pub replication_factor: u32,
    /// `min.insync.replicas`.
    pub min_insync: u32,

    /// One-way network latency.
    pub latency: Duration,
    /// Each broker's outbound bandwidth, in bytes per second.
    pub bandwidth: f64,

    /// Produce requests per second (Poisson arrivals).
    pub produce_rate: f64,
    /// Share of produce requests with `acks=all` (the rest use `acks=1`).
    pub acks_all_fraction: f64,
    /// Partitions per produce request, at most (uniform in 1..=this).
    pub partitions_per_produce: u32,
    /// Median batch size in bytes (log-normal).
    pub batch_bytes_p50: f64,
    /// 75th-percentile batch size in bytes.
    pub batch_bytes_p75: f64,
    /// The produce request's `timeout.ms`.
    pub produce_timeout: Duration,
    /// Client back-off before retrying after an error.
    pub retry_backoff: Duration,

    /// Consumers, each owning a share of the partitions; with more consumers
    /// than partitions, each reads one partition (several read each, as
    /// independent consumer groups do).
    pub consumers: u32,
    /// Consumer `fetch.min.bytes`.
    pub fetch_min_bytes: u64,
    /// Consumer `fetch.max.wait.ms`.
    pub fetch_max_wait: Duration,
    /// Bytes returned per partition per fetch, at most (`max.partition.fetch.bytes`).
    pub fetch_max_bytes: u64,

    /// Follower `replica.fetch.wait.max.ms`.
    pub replica_fetch_wait: Duration,
    /// `replica.lag.time.max.ms`: a follower not caught up for this long leaves the ISR.
    pub replica_lag_max: Duration,

    /// Consumer-group members heartbeating to the coordinator (the first
    /// broker up).
    pub members: u32,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,

    /// Faults to inject.
    pub faults: Vec<Fault>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            scenario: "default".into(),
            seed: 1,
            timer: TimerChoice::Wheel,
            clock: ClockChoice::Sim,
            duration: Duration::from_secs(30),
            brokers: 3,
            partitions: 32,
            replication_factor: 3,
            min_insync: 2,
            latency: Duration::from_micros(250),
            bandwidth: 200e6,
            produce_rate: 4_000.0,
            acks_all_fraction: 0.8,
            partitions_per_produce: 3,
            batch_bytes_p50: 2_048.0,
            batch_bytes_p75: 6_144.0,
            produce_timeout: Duration::from_secs(30),
            retry_backoff: Duration::from_millis(100),
            consumers: 8,
            fetch_min_bytes: 16 * 1024,
            fetch_max_wait: Duration::from_millis(500),
            fetch_max_bytes: 1024 * 1024,
            replica_fetch_wait: Duration::from_millis(500),
            replica_lag_max: Duration::from_secs(10),
            members: 100,
            session_timeout: Duration::from_secs(10),
            heartbeat_interval: Duration::from_secs(3),
            faults: Vec::new(),
        }
    }
}

/// A configuration that cannot run.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn fail<T>(message: String) -> Result<T, ConfigError> {
    Err(ConfigError(message))
}

impl Config {
    /// Refuses configurations that cannot describe a cluster or a workload.
    ///
    /// # Errors
    /// A message naming the offending parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        use crate::limits as l;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        for (range, value) in [
            (l::DURATION_S, self.duration.as_secs_f64()),
            (l::BROKERS, f64::from(self.brokers)),
            (l::PARTITIONS, f64::from(self.partitions)),
            (l::REPLICATION_FACTOR, f64::from(self.replication_factor)),
            (l::MIN_INSYNC, f64::from(self.min_insync)),
            (l::PRODUCE_RATE, self.produce_rate),
            (l::ACKS_ALL_FRACTION, self.acks_all_fraction),
            (
                l::PARTITIONS_PER_PRODUCE,
                f64::from(self.partitions_per_produce),
            ),
            (l::BATCH_BYTES, self.batch_bytes_p50),
            (l::PRODUCE_TIMEOUT_MS, ms(self.produce_timeout)),
            (l::CONSUMERS, f64::from(self.consumers)),
            (l::FETCH_MIN_BYTES, self.fetch_min_bytes as f64),
            (l::FETCH_MAX_WAIT_MS, ms(self.fetch_max_wait)),
            (l::REPLICA_LAG_MAX_MS, ms(self.replica_lag_max)),
            (l::MEMBERS, f64::from(self.members)),
            (l::SESSION_TIMEOUT_MS, ms(self.session_timeout)),
            (l::HEARTBEAT_INTERVAL_MS, ms(self.heartbeat_interval)),
            (l::LATENCY_US, self.latency.as_secs_f64() * 1e6),
            (l::BANDWIDTH_MB, self.bandwidth / 1e6),
        ] {
            range.check_named(value).map_err(ConfigError)?;
        }
        if self.replication_factor > self.brokers {
            return fail(format!(
                "--replication-factor must be between 1 and the broker count ({}), got {}",
                self.brokers, self.replication_factor
            ));
        }
        if self.min_insync > self.replication_factor {
            return fail(format!(
                "--min-insync must be between 1 and the replication factor ({}), got {}",
                self.replication_factor, self.min_insync
            ));
        }
        if self.batch_bytes_p75.is_nan()
            || self.batch_bytes_p75 < self.batch_bytes_p50
            || self.batch_bytes_p75 > crate::limits::MAX_BATCH_BYTES as f64
        {
            return fail(format!(
                "the batch size's 75th percentile must be between its median and {} bytes",
                crate::limits::MAX_BATCH_BYTES
            ));
        }
        if self.members > 0 && self.heartbeat_interval >= self.session_timeout {
            return fail(format!(
                "--heartbeat-interval-ms ({}) must be below --session-timeout-ms ({}), as Kafka's clients require",
                self.heartbeat_interval.as_millis(),
                self.session_timeout.as_millis()
            ));
        }
        for (what, d) in [
            ("the retry back-off", self.retry_backoff),
            ("replica.fetch.wait.max.ms", self.replica_fetch_wait),
        ] {
            if d > Duration::from_secs(3600) {
                return fail(format!("{what} must be at most an hour"));
            }
        }
        if self.fetch_max_bytes == 0 || self.fetch_max_bytes > 1 << 30 {
            return fail("the fetch size limit must be from 1 byte to 1 GiB".into());
        }
        let day = Duration::from_secs(86_400);
        for fault in &self.faults {
            let (times, delay) = match fault {
                Fault::SlowFollower {
                    from, until, delay, ..
                } => (vec![*from, *until], *delay),
                Fault::Crash { at, .. }
                | Fault::Restart { at, .. }
                | Fault::StopHeartbeats { at, .. } => (vec![*at], Duration::ZERO),
            };
            if times.iter().any(|t| *t > day) || delay > Duration::from_secs(3600) {
                return fail(
                    "a fault's times must be within a day and its delay within an hour".into(),
                );
            }
            match fault {
                Fault::SlowFollower {
                    broker,
                    from,
                    until,
                    ..
                } => {
                    if *broker >= self.brokers {
                        return fail(format!(
                            "the slow follower {broker} is not a broker (0..{})",
                            self.brokers
                        ));
                    }
                    if until < from {
                        return fail("the slow follower recovers before it slows down".into());
                    }
                }
                Fault::Crash { broker, .. } => {
                    if *broker >= self.brokers {
                        return fail(format!(
                            "the crashed broker {broker} is not a broker (0..{})",
                            self.brokers
                        ));
                    }
                    if self.replication_factor < 2 {
                        return fail("a broker crash needs --replication-factor of at least 2 for leadership to move".into());
                    }
                }
                Fault::Restart { broker, .. } => {
                    // Each restart needs the broker down by then: its
                    // faults, in time order, alternate crash and restart.
                    let mut down = false;
                    let mut own: Vec<(Duration, bool)> = self
                        .faults
                        .iter()
                        .filter_map(|f| match *f {
                            Fault::Crash { broker: b, at } if b == *broker => Some((at, true)),
                            Fault::Restart { broker: b, at } if b == *broker => Some((at, false)),
                            _ => None,
                        })
                        .collect();
                    own.sort_by_key(|&(at, crash)| (at, !crash));
                    for (when, crash) in own {
                        if crash == down {
                            return fail(format!(
                                "broker {broker} {} at {} ms, but it is {} then",
                                if crash { "crashes" } else { "restarts" },
                                when.as_millis(),
                                if down { "down" } else { "up" },
                            ));
                        }
                        down = crash;
                    }
                }
                Fault::StopHeartbeats { fraction, .. } => {
                    if !(0.0..=1.0).contains(fraction) {
                        return fail(format!(
                            "the silent fraction must be between 0 and 1, got {fraction}"
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
