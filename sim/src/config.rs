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

    /// Consumers, each owning a share of the partitions.
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

    /// Consumer-group members heartbeating to the coordinator (broker 0).
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
        if self.brokers == 0 || self.partitions == 0 {
            return fail("--brokers and --partitions must be at least 1".into());
        }
        if self.replication_factor == 0 || self.replication_factor > self.brokers {
            return fail(format!(
                "--replication-factor must be between 1 and the broker count ({}), got {}",
                self.brokers, self.replication_factor
            ));
        }
        if self.min_insync == 0 || self.min_insync > self.replication_factor {
            return fail(format!(
                "--min-insync must be between 1 and the replication factor ({}), got {}",
                self.replication_factor, self.min_insync
            ));
        }
        for (name, value) in [
            ("--produce-rate", self.produce_rate),
            ("--bandwidth-mb", self.bandwidth),
            ("--batch-bytes", self.batch_bytes_p50),
        ] {
            if !value.is_finite() || value < 0.0 {
                return fail(format!("{name} must be a non-negative number, got {value}"));
            }
        }
        if self.bandwidth <= 0.0 || self.batch_bytes_p50 < 1.0 {
            return fail("--bandwidth-mb and --batch-bytes must be positive".into());
        }
        if self.batch_bytes_p75.is_nan() || self.batch_bytes_p75 < self.batch_bytes_p50 {
            return fail("the batch size's 75th percentile must not be below its median".into());
        }
        if !(0.0..=1.0).contains(&self.acks_all_fraction) {
            return fail(format!(
                "--acks-all-fraction must be between 0 and 1, got {}",
                self.acks_all_fraction
            ));
        }
        if self.partitions_per_produce == 0 {
            return fail("--partitions-per-produce must be at least 1".into());
        }
        if self.duration.is_zero() {
            return fail("--duration-s must be positive".into());
        }
        if self.heartbeat_interval.is_zero() && self.members > 0 {
            return fail("--heartbeat-interval-ms must be positive".into());
        }
        if self.fetch_max_bytes == 0 {
            return fail("the fetch size limit must be positive".into());
        }
        for fault in &self.faults {
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
                    if *broker == 0 {
                        return fail(
                            "broker 0 is the group coordinator and cannot be crashed in this model"
                                .into(),
                        );
                    }
                    if self.replication_factor < 2 {
                        return fail("a broker crash needs --replication-factor of at least 2 for leadership to move".into());
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
