//! The quotas (`client_quotas.rs`) enforced as Kafka enforces them. The
//! byte rates as its brokers do (`ClientQuotaManager`): each broker
//! measures, for each quota that applies, the bytes its clients produce
//! and fetch (`quota_rate.rs`), and past the quota throttles the client
//! for the time that brings the rate back to it: X = (O - T) / T * W for
//! an observed rate O, a quota T and the rate's window W.
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
//!
//! The request-time quota is measured the same way, over the time spent
//! handling each request (`request_time.rs`), and its throttle is at most
//! one sample's second, as Kafka bounds it.
//!
//! The partition mutation quota is the controller's (`MutationBuckets`),
//! metered by a token bucket rather than a rate, as Kafka's controller
//! meters it: a request is refused its mutations only once the bucket is
//! in debt, so one large request goes through, and the client is
//! throttled until the debt is paid back.

use super::checks::Checks;
use super::client_quotas::{Client, ClientQuotas, Measured, Quota};
use super::log::now_ms;
use super::quota_rate::{SampledRate, SAMPLES, SAMPLE_MS};
use super::service::BrokerService;
use crate::wire::Throttle;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ApiKey;
use parking_lot::Mutex;
use purgatory::{DelayedOperation, Outcome};
use std::cell::Cell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a quota's measurements are kept unused (Kafka's inactive
/// sensors expire after an hour too).
const IDLE_MS: i64 = 3_600_000;

/// One broker's measurements of its clients' byte rates.
#[derive(Debug, Default)]
pub struct Throttles {
    sensors: Mutex<HashMap<(Quota, Measured), Sensor>>,
    /// The key of the next throttled wait in the purgatory.
    next_wait: AtomicU64,
}

/// A client's partition mutations, as Kafka's controller meters them (a
/// `TokenBucket`): it holds up to eleven seconds of the quota, refills at
/// the quota, and each partition created or deleted takes one token.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    /// When it was last refilled, in ms.
    at: i64,
}

/// How a request's mutations meet an empty bucket: a request that can be
/// told so is refused them (CreateTopics from v6, DeleteTopics from v5,
/// CreatePartitions from v3); an older one is granted them and throttled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    Strict,
    Permissive,
}

/// A request's strictness: strict from `version` of its API on.
pub(crate) fn strict_from(version: i16, strict: i16) -> Strictness {
    if version >= strict {
        Strictness::Strict
    } else {
        Strictness::Permissive
    }
}

#[derive(Debug)]
struct Sensor {
    rate: SampledRate,
    /// When it last recorded, in ms.
    used: i64,
}

impl Throttles {
    /// Records `value` of `client` at `now` (ms) against the `rate`
    /// quota that applies to it, if one does (bytes for the byte rates,
    /// percent-seconds of one thread for the request time); returns how
    /// long the client is throttled for (zero within its quota).
    pub fn record(
        &self,
        quotas: &ClientQuotas,
        rate: Quota,
        client: Client<'_>,
        value: f64,
        now: i64,
    ) -> Duration {
        match quotas.applying(rate, client) {
            Some((limit, measured)) => self.measure(&(rate, measured), limit, value, now),
            None => Duration::ZERO,
        }
    }

    /// Records a connection from `ip` at `now` (ms) against the
    /// `connection_creation_rate` that applies to it, if one does; how long
    /// to hold the connection before closing it unread (zero: accepted).
    pub fn connect(&self, quotas: &ClientQuotas, ip: IpAddr, now: i64) -> Duration {
        match quotas.connection_rate(ip) {
            Some((limit, measured)) => {
                self.measure(&(Quota::Connections, measured), limit, 1.0, now)
            }
            None => Duration::ZERO,
        }
    }

    /// Records `value` for `key` (a quota and whom it is measured for)
    /// against its `limit`; the throttle. What a throttle refuses (a
    /// fetch's records, answered without them; a connection, closed) is
    /// taken back. The key is cloned only for a new measurement.
    pub(crate) fn measure(
        &self,
        key: &(Quota, Measured),
        limit: f64,
        value: f64,
        now: i64,
    ) -> Duration {
        let rate = key.0;
        let mut sensors = self.sensors.lock();
        if !sensors.contains_key(key) {
            // New ones are rare: the idle go then.
            sensors.retain(|_, s| now - s.used < IDLE_MS);
            sensors.insert(
                key.clone(),
                Sensor {
                    rate: SampledRate::new(now),
                    used: now,
                },
            );
        }
        let sensor = sensors.get_mut(key).expect("inserted above");
        sensor.rate.record(value, now);
        sensor.used = now;
        let observed = sensor.rate.rate(now);
        if observed <= limit {
            return Duration::ZERO;
        }
        if matches!(rate, Quota::Fetch | Quota::Connections) {
            sensor.rate.record(-value, now);
        }
        let window = sensor.rate.window_ms(now) as f64;
        // At most what the answers can say (an int32 of ms, 24.8 days),
        // however small the quota; the request time's and the connection
        // rate's at most one sample, as Kafka bounds them.
        let most = match rate {
            Quota::Request | Quota::Connections => SAMPLE_MS as f64,
            _ => f64::from(i32::MAX),
        };
        let ms = ((observed - limit) / limit * window).round();
        Duration::from_millis(ms.min(most) as u64)
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
        rate: Quota,
        client: Client<'_>,
    ) -> Option<u64> {
        let (limit, _) = quotas.applying(rate, client)?;
        let seconds = ((SAMPLES - 1) * SAMPLE_MS / 1000) as f64;
        Some((limit * seconds).min(u64::MAX as f64) as u64)
    }
}

/// The controller's meter of its clients' partition mutations (Kafka's
/// controller keeps it; a KRaft broker forwards these requests to it).
#[derive(Debug, Default)]
pub struct MutationBuckets {
    buckets: Mutex<HashMap<Measured, Bucket>>,
}

impl MutationBuckets {
    /// Takes `permits` partition mutations of `client` at `now` (ms)
    /// from its `controller_mutation_rate` bucket, if such a quota applies.
    /// `Err` with the time until the bucket is out of debt when it already
    /// is and the request is [`Strictness::Strict`]; otherwise `Ok` with
    /// how long the client is throttled for (zero but where these tokens
    /// took the bucket into debt in a permissive request).
    pub fn mutate(
        &self,
        quotas: &ClientQuotas,
        client: Client<'_>,
        permits: usize,
        strictness: Strictness,
        now: i64,
    ) -> Result<Duration, Duration> {
        let Some((limit, measured)) = quotas.applying(Quota::Mutations, client) else {
            return Ok(Duration::ZERO);
        };
        let burst = (SAMPLES * SAMPLE_MS / 1000) as f64 * limit;
        let mut buckets = self.buckets.lock();
        if !buckets.contains_key(&measured) {
            buckets.retain(|_, b| now - b.at < IDLE_MS);
        }
        let bucket = buckets.entry(measured).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let refill = limit * (now - bucket.at).max(0) as f64 / 1000.0;
        bucket.tokens = (bucket.tokens + refill).min(burst);
        bucket.at = now;
        // The time until the debt is paid back, at the quota.
        let debt = |tokens: f64| {
            let ms = (-tokens / limit * 1000.0).round().min(f64::from(i32::MAX));
            Duration::from_millis(ms.max(0.0) as u64)
        };
        if strictness == Strictness::Strict && bucket.tokens < 0.0 {
            return Err(debt(bucket.tokens));
        }
        bucket.tokens -= permits as f64;
        Ok(match strictness {
            Strictness::Strict => Duration::ZERO,
            Strictness::Permissive => debt(bucket.tokens),
        })
    }
}

/// One request's partition mutations, taken against its client's
/// `controller_mutation_rate` as the controller applies them to
/// CreateTopics, CreatePartitions and DeleteTopics: each topic's, or
/// its refusal, in turn.
pub(crate) struct Mutating<'a> {
    service: &'a BrokerService,
    client: Client<'a>,
    strictness: Strictness,
    /// The longest throttle met.
    throttle: Cell<Duration>,
}

impl<'a> Mutating<'a> {
    pub(crate) fn new(
        service: &'a BrokerService,
        client: Client<'a>,
        strictness: Strictness,
    ) -> Self {
        Mutating {
            service,
            client,
            strictness,
            throttle: Cell::new(Duration::ZERO),
        }
    }

    /// Takes `permits` mutations for one topic; THROTTLING_QUOTA_EXCEEDED
    /// when the quota refuses them.
    pub(crate) fn take(&self, permits: usize) -> Result<(), (ResponseError, String)> {
        let cluster = &self.service.cluster;
        if !cluster.client_quotas.any() {
            return Ok(());
        }
        let taken = (cluster.mutations).mutate(
            &cluster.client_quotas,
            self.client,
            permits,
            self.strictness,
            now_ms(),
        );
        let throttle = match taken {
            Ok(throttle) | Err(throttle) => throttle,
        };
        self.throttle.set(self.throttle.get().max(throttle));
        taken.map(|_| ()).map_err(|_| {
            let e = ResponseError::ThrottlingQuotaExceeded;
            (e, "The throttling quota has been exceeded.".to_string())
        })
    }

    /// The throttle time the answer carries, in ms; the connection reads
    /// nothing more meanwhile.
    pub(crate) fn finish(&self, connection: &Throttle) -> i32 {
        let throttle = self.throttle.get();
        if !throttle.is_zero() {
            Checks::bump(&self.service.checks().throttled);
            connection.mute(throttle);
        }
        millis(throttle)
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

/// Whether a throttled answer to `api` at `version` is held until the
/// throttle is over: a Produce before v6 or a Fetch before v8, whose
/// clients do not throttle themselves (before KIP-219's versions). Other
/// answers go at once, and the muted connection does the rest.
pub(crate) fn holds_answer(api: ApiKey, version: i16) -> bool {
    match api {
        ApiKey::Produce => version < 6,
        ApiKey::Fetch => version < 8,
        _ => false,
    }
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

    /// The most bytes a fetch (or share fetch) of `client` asking for
    /// `asked` may carry: no more than its `consumer_byte_rate` lets
    /// through in its window, as Kafka caps it, or the answer would be
    /// throttled whatever came before it.
    pub(crate) fn fetch_cap(&self, client: Client<'_>, asked: i32) -> usize {
        let asked = usize::try_from(asked).unwrap_or(0);
        let quotas = &self.cluster.client_quotas;
        match self
            .throttles()
            .most_in_window(quotas, Quota::Fetch, client)
        {
            Some(most) => asked.min(usize::try_from(most).unwrap_or(usize::MAX)),
            None => asked,
        }
    }

    /// Counts `bytes` of `client` against its `rate` quota; how long it is
    /// throttled for.
    pub(crate) fn throttled_for(&self, rate: Quota, client: Client<'_>, bytes: u64) -> Duration {
        let quotas = &self.cluster.client_quotas;
        if !quotas.any() {
            return Duration::ZERO;
        }
        let throttle = (self.throttles()).record(quotas, rate, client, bytes as f64, now_ms());
        if !throttle.is_zero() {
            Checks::bump(&self.checks().throttled);
        }
        throttle
    }

    /// Counts a connection from `ip` against its address's
    /// `connection_creation_rate`; how long to hold it before closing it
    /// unread, zero if it is accepted.
    pub(crate) fn connection_throttle(&self, ip: IpAddr) -> Duration {
        let quotas = &self.cluster.client_quotas;
        if !quotas.any() {
            return Duration::ZERO;
        }
        let throttle = self.throttles().connect(quotas, ip, now_ms());
        if !throttle.is_zero() {
            Checks::bump(&self.checks().connections_throttled);
        }
        throttle
    }

    /// How long `client` is throttled for by its `request_percentage`
    /// for the time counted so far, nothing more counted: a fetch is
    /// answered empty while its client is over (Kafka counts the fetch's
    /// own time first; here it is counted once the fetch has been
    /// handled, `request_time.rs`).
    pub(crate) fn request_time_over(&self, client: Client<'_>) -> Duration {
        if !self.cluster.client_quotas.times_requests() {
            return Duration::ZERO;
        }
        let quotas = &self.cluster.client_quotas;
        (self.throttles()).record(quotas, Quota::Request, client, 0.0, now_ms())
    }

    /// Counts `spent` handling a request against the `request_percentage`
    /// of `limit` that `key` names, in percent-seconds of one thread
    /// (Kafka's nanoseconds times 100 over a second's); how long its
    /// client is throttled for.
    pub(crate) fn request_time(
        &self,
        key: &(Quota, Measured),
        limit: f64,
        spent: Duration,
    ) -> Duration {
        let percent_seconds = spent.as_secs_f64() * 100.0;
        (self.throttles()).measure(key, limit, percent_seconds, now_ms())
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
    use crate::live::client_quotas::Client;

    fn anonymous(id: &str) -> Client<'_> {
        Client::anonymous(id)
    }

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
        let record = |client: &str, bytes, now| {
            t.record(&quotas, Quota::Produce, anonymous(client), bytes, now)
        };
        let record = |client: &str, bytes: u64, now| record(client, bytes as f64, now);
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
            t.record(&quotas, Quota::Fetch, anonymous("a"), 1e9, 1_000),
            Duration::ZERO
        );
        // A produce that was throttled still counts: "a" stays over.
        assert_eq!(record("a", 0, 1_000), Duration::from_millis(5_000));
        assert_eq!(
            t.most_in_window(&quotas, Quota::Produce, anonymous("a")),
            Some(10_000)
        );
        assert_eq!(
            t.most_in_window(&quotas, Quota::Fetch, anonymous("a")),
            None
        );
    }

    #[test]
    fn a_throttled_fetch_does_not_count() {
        let quotas = quota(None, "consumer_byte_rate", 1000.0);
        let t = Throttles::default();
        let record =
            |bytes: u64, now| t.record(&quotas, Quota::Fetch, anonymous("a"), bytes as f64, now);
        assert_eq!(record(9_000, 0), Duration::ZERO);
        // 5,000 more would make 14,000 over 10 s: throttled for 4 s...
        assert_eq!(record(5_000, 0), Duration::from_millis(4_000));
        // ...and not sent, so not counted: 1,000 more is within the quota.
        assert_eq!(record(1_000, 0), Duration::ZERO);
    }

    #[test]
    fn mutations_take_tokens_and_a_strict_request_is_refused_while_in_debt() {
        let quotas = quota(None, "controller_mutation_rate", 2.0);
        let m = MutationBuckets::default();
        let take =
            |permits, strictness, now| m.mutate(&quotas, anonymous("a"), permits, strictness, now);
        // Eleven seconds of the quota, 22 tokens, at first.
        assert_eq!(take(20, Strictness::Strict, 0), Ok(Duration::ZERO));
        // Into debt, granted: the bucket was not in debt before.
        assert_eq!(take(6, Strictness::Strict, 0), Ok(Duration::ZERO));
        // In debt by 4 tokens: 2 s at 2 a second.
        assert_eq!(
            take(1, Strictness::Strict, 0),
            Err(Duration::from_millis(2_000))
        );
        // A second later, 2 tokens refilled: still 1 s to go.
        assert_eq!(
            take(1, Strictness::Strict, 1_000),
            Err(Duration::from_millis(1_000))
        );
        // A permissive request is granted, and throttled for its debt.
        assert_eq!(
            take(4, Strictness::Permissive, 1_000),
            Ok(Duration::from_millis(3_000))
        );
        // Without a quota, nothing is metered.
        assert_eq!(
            m.mutate(&quotas, anonymous("b"), 1_000, Strictness::Strict, 0),
            Ok(Duration::ZERO)
        );
        let other = quota(Some("x"), "controller_mutation_rate", 1.0);
        assert_eq!(
            m.mutate(&other, anonymous("a"), 1_000, Strictness::Strict, 0),
            Ok(Duration::ZERO)
        );
    }

    #[test]
    fn a_tiny_quota_throttles_for_at_most_what_an_answer_can_say() {
        let quotas = quota(Some("app"), "consumer_byte_rate", 1.0);
        let t = Throttles::default();
        let throttle = t.record(&quotas, Quota::Fetch, anonymous("app"), u64::MAX as f64, 0);
        assert_eq!(throttle, Duration::from_millis(i32::MAX as u64));
        assert_eq!(millis(throttle), i32::MAX);
    }

    #[test]
    fn request_time_throttles_for_at_most_a_second() {
        let quotas = quota(None, "request_percentage", 10.0);
        let record = |t: &Throttles, percent_seconds| {
            t.record(&quotas, Quota::Request, anonymous("a"), percent_seconds, 0)
        };
        let t = Throttles::default();
        // 10% of a thread over the first ten seconds: one second's work.
        assert_eq!(record(&t, 100.0), Duration::ZERO);
        // 0.15 s more: 11.5% over 10 s, (11.5 - 10) / 10 * 10 s = 1.5 s,
        // bounded to one sample.
        assert_eq!(record(&t, 15.0), Duration::from_millis(1_000));
        // 0.05 s more within a fresh quota: (10.5 - 10) / 10 * 10 s.
        let t = Throttles::default();
        assert_eq!(record(&t, 105.0), Duration::from_millis(500));
        // Not taken back, unlike a fetch's bytes: still over.
        assert_eq!(record(&t, 0.0), Duration::from_millis(500));
    }

    #[test]
    fn a_connection_past_its_rate_is_refused_and_not_counted() {
        let quotas = ClientQuotas::default();
        let r = crate::wire::client::quota_request("ip", None, "connection_creation_rate", 2.0);
        assert_eq!(quotas.alter(&r)[0].error_code, 0);
        let t = Throttles::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        // Ten seconds' worth at once: 20 connections.
        for _ in 0..20 {
            assert_eq!(t.connect(&quotas, a, 0), Duration::ZERO);
        }
        // The 21st: 21 over 10 s, (2.1 - 2) / 2 * 10 s = 500 ms.
        assert_eq!(t.connect(&quotas, a, 0), Duration::from_millis(500));
        // Refused, so not counted: the next is refused as long.
        assert_eq!(t.connect(&quotas, a, 0), Duration::from_millis(500));
        // Each address is measured on its own.
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        assert_eq!(t.connect(&quotas, b, 0), Duration::ZERO);
        // Half a second past the first ten, one more fits: 21 over 10.5 s.
        assert_eq!(t.connect(&quotas, a, 10_500), Duration::ZERO);
        assert!(!t.connect(&quotas, a, 10_500).is_zero());
    }

    #[test]
    fn without_a_quota_nothing_is_measured() {
        let quotas = quota(Some("other"), "consumer_byte_rate", 1.0);
        let t = Throttles::default();
        assert_eq!(
            t.record(&quotas, Quota::Fetch, anonymous("mine"), 1e9, 0),
            Duration::ZERO
        );
        assert!(t.sensors.lock().is_empty());
    }
}
