//! The byte-rate quotas (`client_quotas.rs`) enforced as Kafka's brokers
//! enforce them (`ClientQuotaManager`): each broker measures, for each
//! quota that applies, the bytes its clients produce and fetch
//! (`quota_rate.rs`), and past the quota throttles the client for the
//! time that brings the rate back to it: X = (O - T) / T * W for an
//! observed rate O, a quota T and the rate's window W.
//!
//! The answer says how long (`throttle_time_ms`), and the connection
//! reads nothing more from the client meanwhile (the wire front); a
//! client too old to throttle itself (Produce before v6, Fetch before v8)
//! gets its answer only when the time is over. A throttled fetch is
//! answered without its records, which are not counted, as Kafka answers
//! it; a produce is counted and stored, then throttled. A produce is
//! counted as it comes, where Kafka counts it as it answers: Kafka reads
//! nothing more from a connection while a request is parked, this front
//! reads on, so the throttle must stop the reading before the next
//! request. Each wait is a delayed operation in the
//! broker's throttle purgatory, where Kafka keeps its throttled channels
//! in a `DelayQueue`.

use super::checks::Checks;
use super::client_quotas::{ByteRate, ClientQuotas, Measured};
use super::log::now_ms;
use super::quota_rate::{SampledRate, SAMPLES, SAMPLE_MS};
use super::service::BrokerService;
use parking_lot::Mutex;
use purgatory::{DelayedOperation, Outcome};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a quota's measurements are kept unused (Kafka's inactive
/// sensors expire after an hour too).
const IDLE_MS: i64 = 3_600_000;

/// One broker's measurements of its clients' byte rates.
#[derive(Debug, Default)]
pub struct Throttles {
    sensors: Mutex<HashMap<(ByteRate, Measured), Sensor>>,
    /// The key of the next throttled wait in the purgatory.
    next_wait: AtomicU64,
}

#[derive(Debug)]
struct Sensor {
    rate: SampledRate,
    /// When it last recorded, in ms.
    used: i64,
}

impl Throttles {
    /// Records `bytes` of `client_id` at `now` (ms) against the `rate`
    /// quota that applies to it, if one does; returns how long the client
    /// is throttled for (zero within its quota). A throttled fetch is
    /// answered without its records, so they are taken back.
    pub fn record(
        &self,
        quotas: &ClientQuotas,
        rate: ByteRate,
        client_id: &str,
        bytes: u64,
        now: i64,
    ) -> Duration {
        let Some((limit, measured)) = quotas.applying(rate, client_id) else {
            return Duration::ZERO;
        };
        let mut sensors = self.sensors.lock();
        if !sensors.contains_key(&(rate, measured.clone())) {
            // New ones are rare: the idle go then.
            sensors.retain(|_, s| now - s.used < IDLE_MS);
        }
        let sensor = sensors.entry((rate, measured)).or_insert_with(|| Sensor {
            rate: SampledRate::new(now),
            used: now,
        });
        sensor.rate.record(bytes as f64, now);
        sensor.used = now;
        let observed = sensor.rate.rate(now);
        if observed <= limit {
            return Duration::ZERO;
        }
        if rate == ByteRate::Fetch {
            sensor.rate.record(-(bytes as f64), now);
        }
        let window = sensor.rate.window_ms(now) as f64;
        // At most what the answers can say (an int32 of ms, 24.8 days),
        // however small the quota.
        let ms = ((observed - limit) / limit * window).round();
        Duration::from_millis(ms.min(f64::from(i32::MAX)) as u64)
    }

    /// Forgets every measurement, as a broker's process that crashed.
    pub fn clear(&self) {
        self.sensors.lock().clear();
    }

    /// The most bytes one answer may hold without being throttled whatever
    /// came before: the quota over ten seconds. `None` without a quota.
    pub fn most_in_window(
        &self,
        quotas: &ClientQuotas,
        rate: ByteRate,
        client_id: &str,
    ) -> Option<u64> {
        let (limit, _) = quotas.applying(rate, client_id)?;
        let seconds = ((SAMPLES - 1) * SAMPLE_MS / 1000) as f64;
        Some((limit * seconds).min(u64::MAX as f64) as u64)
    }
}

/// A throttled client's wait (Kafka's `ThrottledChannel`): nothing
/// completes it but its time.
pub struct ThrottledWait {
    pub time: Duration,
}

impl DelayedOperation for ThrottledWait {
    fn timeout(&self) -> Duration {
        self.time
    }

    fn try_complete(&mut self) -> bool {
        false
    }

    fn on_complete(&mut self, _: Outcome) {}
}

/// A throttle time as the responses carry it, in ms.
pub(crate) fn millis(time: Duration) -> i32 {
    i32::try_from(time.as_millis()).unwrap_or(i32::MAX)
}

impl BrokerService {
    /// This broker's measurements.
    pub(crate) fn throttles(&self) -> &Throttles {
        &self.cluster.brokers[self.id as usize].throttles
    }

    /// Counts `bytes` of `client` against its `rate` quota; how long it is
    /// throttled for.
    pub(crate) fn throttled_for(&self, rate: ByteRate, client: &str, bytes: u64) -> Duration {
        let quotas = &self.cluster.client_quotas;
        let throttle = self
            .throttles()
            .record(quotas, rate, client, bytes, now_ms());
        if !throttle.is_zero() {
            Checks::bump(&self.checks().throttled);
        }
        throttle
    }

    /// Waits `time` out in this broker's throttle purgatory; at once if
    /// the broker is shutting down.
    pub(crate) async fn wait_throttled(&self, time: Duration) {
        if time.is_zero() {
            return;
        }
        let broker = &self.cluster.brokers[self.id as usize];
        let key = broker.throttles.next_wait.fetch_add(1, Ordering::Relaxed);
        if let Ok(handle) = broker
            .throttled
            .try_complete_else_watch(ThrottledWait { time }, &[key])
        {
            handle.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(client: Option<&str>, key: &str, value: f64) -> ClientQuotas {
        let quotas = ClientQuotas::default();
        let r = crate::wire::client::quota_request("client-id", client, key, value);
        assert_eq!(quotas.alter(&r)[0].error_code, 0);
        quotas
    }

    #[test]
    fn past_its_quota_a_client_waits_what_brings_its_rate_back() {
        let quotas = quota(None, "producer_byte_rate", 1000.0);
        let t = Throttles::default();
        let record =
            |client: &str, bytes, now| t.record(&quotas, ByteRate::Produce, client, bytes, now);
        // 10,000 bytes over the first 10 s window: exactly the quota.
        assert_eq!(record("a", 10_000, 0), Duration::ZERO);
        // 5,000 more at 1 s: 15,000 over 10 s (one whole sample, nine
        // assumed), 1,500/s; back to 1,000/s after (1500 - 1000) / 1000 *
        // 10 s = 5 s.
        assert_eq!(record("a", 5_000, 1_000), Duration::from_millis(5_000));
        // The default client quota is each client's own.
        assert_eq!(record("b", 10_000, 1_000), Duration::ZERO);
        // Fetching is another quota, not set.
        assert_eq!(
            t.record(&quotas, ByteRate::Fetch, "a", 1 << 30, 1_000),
            Duration::ZERO
        );
        // A produce that was throttled still counts: "a" stays over.
        assert_eq!(record("a", 0, 1_000), Duration::from_millis(5_000));
        assert_eq!(
            t.most_in_window(&quotas, ByteRate::Produce, "a"),
            Some(10_000)
        );
        assert_eq!(t.most_in_window(&quotas, ByteRate::Fetch, "a"), None);
    }

    #[test]
    fn a_throttled_fetch_does_not_count() {
        let quotas = quota(None, "consumer_byte_rate", 1000.0);
        let t = Throttles::default();
        let record = |bytes, now| t.record(&quotas, ByteRate::Fetch, "a", bytes, now);
        assert_eq!(record(9_000, 0), Duration::ZERO);
        // 5,000 more would make 14,000 over 10 s: throttled for 4 s...
        assert_eq!(record(5_000, 0), Duration::from_millis(4_000));
        // ...and not sent, so not counted: 1,000 more is within the quota.
        assert_eq!(record(1_000, 0), Duration::ZERO);
    }

    #[test]
    fn a_tiny_quota_throttles_for_at_most_what_an_answer_can_say() {
        let quotas = quota(Some("app"), "consumer_byte_rate", 1.0);
        let t = Throttles::default();
        let throttle = t.record(&quotas, ByteRate::Fetch, "app", u64::MAX, 0);
        assert_eq!(throttle, Duration::from_millis(i32::MAX as u64));
        assert_eq!(millis(throttle), i32::MAX);
    }

    #[test]
    fn without_a_quota_nothing_is_measured() {
        let quotas = quota(Some("other"), "consumer_byte_rate", 1.0);
        let t = Throttles::default();
        assert_eq!(
            t.record(&quotas, ByteRate::Fetch, "mine", 1 << 30, 0),
            Duration::ZERO
        );
        assert!(t.sensors.lock().is_empty());
    }
}
