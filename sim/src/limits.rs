//! The range of every run parameter, checked when a flag is parsed and again
//! by [`Config::validate`](crate::config::Config::validate).
//!
//! The ranges bound what the model is meant for (a cluster of up to a
//! hundred brokers, a day of simulated time, timeouts up to an hour) and
//! keep the harness's time and size arithmetic far from wrapping: with every
//! parameter inside its range, arrivals, timeouts and the drain limit stay
//! below 2^38 µs; the one sum that can grow with the traffic (a broker's
//! link queue) saturates. Memory that grows with the traffic (requests in flight) is bounded
//! while the run goes, by [`MAX_IN_FLIGHT`].

/// A parameter's accepted values, inclusive at both ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// The command-line flag, for messages.
    pub flag: &'static str,
    /// The smallest accepted value.
    pub min: f64,
    /// The largest accepted value.
    pub max: f64,
}

impl Range {
    /// Parses `text` as a number within the range.
    ///
    /// # Errors
    /// A message saying what is wrong and what is accepted.
    pub fn parse_f64(&self, text: &str) -> Result<f64, String> {
        let value: f64 = text
            .trim()
            .parse()
            .map_err(|_| format!("'{text}' is not a number"))?;
        self.check(value)?;
        Ok(value)
    }

    /// Parses `text` as a whole number within the range.
    ///
    /// # Errors
    /// A message saying what is wrong and what is accepted.
    pub fn parse_u64(&self, text: &str) -> Result<u64, String> {
        let value: i128 = text
            .trim()
            .parse()
            .map_err(|_| format!("'{text}' is not a whole number"))?;
        // i128 holds every u64 and every negative a user might type; beyond
        // it, the number is out of range either way.
        self.check(value as f64)?;
        Ok(value as u64)
    }

    /// Parses `text` as a whole number within the range, as a `u32`.
    ///
    /// # Errors
    /// As [`parse_u64`](Self::parse_u64).
    pub fn parse_u32(&self, text: &str) -> Result<u32, String> {
        let value = self.parse_u64(text)?;
        u32::try_from(value).map_err(|_| format!("must be at most {}", show(self.max)))
    }

    /// Whether `value` is within the range, with the message if not.
    ///
    /// # Errors
    /// "must be at least ..." or "must be at most ...".
    pub fn check(&self, value: f64) -> Result<(), String> {
        if value.is_nan() {
            return Err("must be a number".into());
        }
        if value < self.min {
            return Err(format!("must be at least {}", show(self.min)));
        }
        if value > self.max {
            return Err(format!("must be at most {}", show(self.max)));
        }
        Ok(())
    }

    /// As [`check`](Self::check), the message naming the flag.
    ///
    /// # Errors
    /// "--flag must be at most ..., got ...".
    pub fn check_named(&self, value: f64) -> Result<(), String> {
        self.check(value)
            .map_err(|why| format!("{} {why}, got {}", self.flag, show(value)))
    }
}

/// A bound as a user would type it: whole numbers without a fraction.
fn show(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

const fn range(flag: &'static str, min: f64, max: f64) -> Range {
    Range { flag, min, max }
}

/// An hour, in milliseconds: the longest timeout accepted.
const HOUR_MS: f64 = 3_600_000.0;

/// Seconds of arrivals: a day of simulated time at most.
pub const DURATION_S: Range = range("--duration-s", 0.001, 86_400.0);
/// Brokers.
pub const BROKERS: Range = range("--brokers", 1.0, 100.0);
/// A broker's id, as `--crash` and `--restart` name it.
pub const BROKER_ID: Range = range("a broker id", 0.0, 99.0);
/// When a fault of `--crash` or `--restart` happens, in seconds.
pub const FAULT_AT_S: Range = range("a fault's time", 0.0, 86_400.0);
/// Topic-partitions.
pub const PARTITIONS: Range = range("--partitions", 1.0, 100_000.0);
/// Replicas per partition (also at most the broker count).
pub const REPLICATION_FACTOR: Range = range("--replication-factor", 1.0, 100.0);
/// `min.insync.replicas` (also at most the replication factor).
pub const MIN_INSYNC: Range = range("--min-insync", 1.0, 100.0);
/// Produce requests per second.
pub const PRODUCE_RATE: Range = range("--produce-rate", 0.0, 1_000_000.0);
/// Share of produces with `acks=all`.
pub const ACKS_ALL_FRACTION: Range = range("--acks-all-fraction", 0.0, 1.0);
/// Partitions per produce request.
pub const PARTITIONS_PER_PRODUCE: Range = range("--partitions-per-produce", 1.0, 1_000.0);
/// Median batch size in bytes (a batch is at most [`MAX_BATCH_BYTES`]).
pub const BATCH_BYTES: Range = range("--batch-bytes", 1.0, 1_048_576.0);
/// The produce request's `timeout.ms`.
pub const PRODUCE_TIMEOUT_MS: Range = range("--produce-timeout-ms", 1.0, HOUR_MS);
/// Consumers.
pub const CONSUMERS: Range = range("--consumers", 0.0, 10_000.0);
/// Consumer `fetch.min.bytes`.
pub const FETCH_MIN_BYTES: Range = range("--fetch-min-bytes", 0.0, 104_857_600.0);
/// Consumer `fetch.max.wait.ms`.
pub const FETCH_MAX_WAIT_MS: Range = range("--fetch-max-wait-ms", 0.0, HOUR_MS);
/// `replica.lag.time.max.ms`.
pub const REPLICA_LAG_MAX_MS: Range = range("--replica-lag-max-ms", 1.0, HOUR_MS);
/// Group members.
pub const MEMBERS: Range = range("--members", 0.0, 1_000_000.0);
/// `session.timeout.ms`.
pub const SESSION_TIMEOUT_MS: Range = range("--session-timeout-ms", 1.0, HOUR_MS);
/// `heartbeat.interval.ms` (also below the session timeout).
pub const HEARTBEAT_INTERVAL_MS: Range = range("--heartbeat-interval-ms", 1.0, HOUR_MS);
/// One-way network latency in microseconds: ten seconds at most.
pub const LATENCY_US: Range = range("--latency-us", 0.0, 10_000_000.0);
/// Each broker's outbound bandwidth in MB/s: 1 kB/s to 1 TB/s.
pub const BANDWIDTH_MB: Range = range("--bandwidth-mb", 0.001, 1_000_000.0);

/// With `--serve`: the largest request frame accepted, in bytes.
pub const MAX_REQUEST_BYTES: Range = range("--max-request-bytes", 1024.0, 1_073_741_824.0);

/// With `--serve`: how long records are kept, in ms (1 s to a year).
pub const RETENTION_MS: Range = range("--retention-ms", 1_000.0, 31_536_000_000.0);

/// With `--serve`: how long a crashed broker stays unfenced, in ms.
pub const BROKER_SESSION_TIMEOUT_MS: Range = range("--broker-session-timeout-ms", 0.0, HOUR_MS);

/// With `--sasl-user`: how long a login lasts, in ms (0: for the
/// connection's life; at most a day).
pub const SASL_REAUTH_MS: Range = range("--sasl-reauth-ms", 0.0, 24.0 * HOUR_MS);

/// With `--serve`: the most members a classic group takes (Kafka's
/// `group.max.size`: at least 1, up to Java's largest `int`).
pub const GROUP_MAX_SIZE: Range = range("--group-max-size", 1.0, 2_147_483_647.0);

/// With `--serve`: the same for a consumer-protocol group (Kafka's
/// `group.consumer.max.size`).
pub const CONSUMER_GROUP_MAX_SIZE: Range = range("--group-consumer-max-size", 1.0, 2_147_483_647.0);

/// With `--serve`: the most members a share group takes (Kafka's
/// `group.share.max.size`: 1 to 1,000).
pub const SHARE_GROUP_MAX_SIZE: Range = range("--group-share-max-size", 1.0, 1000.0);

/// With `--serve`: each partition's retention, in bytes (1 MiB to 1 TiB).
pub const RETENTION_BYTES: Range = range("--retention-bytes", 1_048_576.0, 1_099_511_627_776.0);

/// With `--serve`: the bound on all the logs' memory, in bytes (1 MiB to
/// 1 PiB).
pub const LOG_MEMORY_BYTES: Range =
    range("--log-memory-bytes", 1_048_576.0, 1_125_899_906_842_624.0);

/// The largest batch drawn, in bytes: the log-normal's tail is cut here.
pub const MAX_BATCH_BYTES: u64 = 64 * 1024 * 1024;

/// Client requests in flight at once, at most. Past it the run stops its
/// arrivals, drains what is in flight and reports the limit: a workload
/// the brokers cannot keep up with would otherwise grow without bound.
pub const MAX_IN_FLIGHT: u64 = 500_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_within_and_refuses_outside_with_the_bound() {
        assert_eq!(BROKERS.parse_u32("3"), Ok(3));
        assert_eq!(
            BROKERS.parse_u32("101"),
            Err("must be at most 100".to_string())
        );
        assert_eq!(
            BROKERS.parse_u32("-5"),
            Err("must be at least 1".to_string())
        );
        assert_eq!(
            LATENCY_US.parse_u64("18446744073709551615"),
            Err("must be at most 10000000".to_string())
        );
        assert_eq!(
            LATENCY_US.parse_u64("999999999999999999999999999999999999999999"),
            Err("'999999999999999999999999999999999999999999' is not a whole number".to_string())
        );
        assert!(BATCH_BYTES
            .parse_f64("1e300")
            .unwrap_err()
            .contains("at most"));
        assert!(BANDWIDTH_MB
            .parse_f64("1e-300")
            .unwrap_err()
            .contains("at least 0.001"));
        assert!(BANDWIDTH_MB.parse_f64("NaN").is_err());
        assert!(BANDWIDTH_MB
            .parse_f64("inf")
            .unwrap_err()
            .contains("at most"));
        assert_eq!(ACKS_ALL_FRACTION.parse_f64("0.5"), Ok(0.5));
    }

    #[test]
    fn named_messages_carry_the_flag_and_the_value() {
        assert_eq!(
            DURATION_S.check_named(-5.0),
            Err("--duration-s must be at least 0.001, got -5".to_string())
        );
    }
}
