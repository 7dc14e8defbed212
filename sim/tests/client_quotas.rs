//! Client quotas over the wire: set and described (AlterClientQuotas,
//! DescribeClientQuotas), the byte-rate quotas applied to produces and
//! fetches, the request-time quota to every request, and an address's
//! connection rate to its connections: the answer says
//! how long the client is throttled, the connection reads nothing more
//! from it meanwhile, a client too old to throttle itself gets its answer
//! only then, and a fetch throttled by its byte rate is answered without
//! records.

use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, produce_request, quota_request, Client};
use broker_sim::wire::Limits;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    describe_client_quotas_request, BrokerId, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeClientQuotasRequest, FetchRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::time::{Duration, Instant};

/// The test client's id (`wire::client` sends it).
const CLIENT: &str = "wire-test";
/// A quota of a megabyte a second: ten seconds' worth, 10 MB, goes
/// through before the first throttle.
const RATE: f64 = 1_000_000.0;
const BATCH: usize = 500_000;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// One broker, which leads `topic`.
fn server(topic: &str) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig::one_broker(),
        topics: vec![(topic.to_string(), 1)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

/// Sets `key` of the test client's own quota; its error code.
fn set_quota(c: &mut Client, key: &str, value: f64) -> i16 {
    let r = quota_request("client-id", Some(CLIENT), key, value);
    c.call(&r, 1).entries[0].error_code
}

fn produce(c: &mut Client, topic: &str, version: i16) -> (i16, i32) {
    let records = batch(&[&vec![b'q'; BATCH]]);
    let r = c.call(&produce_request(topic, &[(0, records)], 1, 5_000), version);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, r.throttle_time_ms)
}

/// Fetches `topic` from `offset`, at most `most` bytes (but a whole
/// batch), in a new session (epoch 0) or none (-1): the throttle time, the
/// session id and the bytes of records.
fn fetch(c: &mut Client, topic: &str, offset: i64, most: i32, epoch: i32) -> (i32, i32, usize) {
    let mut p = FetchPartition::default();
    p.fetch_offset = offset;
    p.partition_max_bytes = most;
    let mut t = FetchTopic::default();
    t.topic = TopicName(s(topic));
    t.partitions = vec![p];
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_bytes = 50 << 20;
    r.session_epoch = epoch;
    r.topics = vec![t];
    let got = c.call(&r, 11);
    let records = (got.responses.iter())
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
        .sum();
    (got.throttle_time_ms, got.session_id, records)
}

/// Asserts that what `took` waited out the throttle of `throttle_ms`
/// (within 50 ms: the server's clock and this one's).
fn waited_out(took: Duration, throttle_ms: i32) {
    let throttled = Duration::from_millis(throttle_ms as u64);
    assert!(
        took + Duration::from_millis(50) >= throttled,
        "{took:?} for {throttle_ms} ms"
    );
}

/// Produces batches until one is throttled; the bytes sent and the
/// throttle time, in ms.
fn produce_until_throttled(c: &mut Client, topic: &str, version: i16) -> (usize, i32) {
    for sent in 1..=40 {
        let (error, throttle) = produce(c, topic, version);
        assert_eq!(error, 0);
        if throttle > 0 {
            return (sent * BATCH, throttle);
        }
    }
    panic!("never throttled");
}

/// The throttle time that brings `bytes` sent within the first second
/// back to the quota: (O - T) / T * W, W being ten seconds and the part
/// of the first that passed.
fn expected(bytes: usize) -> std::ops::RangeInclusive<i32> {
    let all_at_once = (bytes as f64 / RATE * 1000.0) as i32 - 10_000;
    all_at_once - 1_000..=all_at_once + 1
}

#[test]
fn quotas_are_set_checked_and_described() {
    let server = server("orders");
    let mut c = Client::connect(server.addrs()[0]);
    assert_eq!(set_quota(&mut c, "producer_byte_rate", RATE), 0);
    assert_eq!(set_quota(&mut c, "consumer_byte_rate", 2.0 * RATE), 0);
    let invalid = ResponseError::InvalidRequest.code();
    assert_eq!(set_quota(&mut c, "producer_byte_rate", -1.0), invalid);
    assert_eq!(set_quota(&mut c, "connection_creation_rate", 5.0), invalid);
    let mut component = describe_client_quotas_request::ComponentData::default();
    component.entity_type = s("client-id");
    component.match_type = 0;
    component._match = Some(s(CLIENT));
    let mut r = DescribeClientQuotasRequest::default();
    r.components = vec![component];
    for version in [0, 1] {
        let got = c.call(&r, version);
        assert_eq!(got.error_code, 0);
        let entries = got.entries.unwrap_or_default();
        let values: Vec<(String, f64)> = (entries.iter())
            .flat_map(|e| e.values.iter())
            .map(|v| (v.key.to_string(), v.value))
            .collect();
        assert_eq!(
            values,
            [
                ("consumer_byte_rate".to_string(), 2.0 * RATE),
                ("producer_byte_rate".to_string(), RATE)
            ]
        );
    }
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

#[test]
fn a_producer_past_its_quota_is_throttled_and_read_no_further_meanwhile() {
    let server = server("loads");
    let mut c = Client::connect(server.addrs()[0]);
    // Within no quota: never throttled.
    assert_eq!(produce(&mut c, "loads", 9), (0, 0));
    assert_eq!(set_quota(&mut c, "producer_byte_rate", RATE), 0);
    let (sent, throttle) = produce_until_throttled(&mut c, "loads", 9);
    assert!(sent > 10_000_000, "{sent}");
    assert!(expected(sent).contains(&throttle), "{throttle} for {sent}");
    // The next request waits on the connection for the throttle time.
    let asked = Instant::now();
    c.call(&MetadataRequest::default(), 9);
    waited_out(asked.elapsed(), throttle);
    // Every batch was stored, the throttled one too.
    let topic = server.cluster().topic("loads").unwrap();
    let end = topic.partitions[0].log.lock().log_end();
    assert_eq!(end as usize, sent / BATCH + 1);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("answers throttled by a quota").unwrap() >= 1);
}

#[test]
fn a_producer_too_old_to_throttle_itself_gets_its_answer_after_the_throttle() {
    let server = server("slow");
    let mut c = Client::connect(server.addrs()[0]);
    assert_eq!(set_quota(&mut c, "producer_byte_rate", RATE), 0);
    let mut sent = 0;
    let (took, throttle) = loop {
        let asked = Instant::now();
        // Produce v5: before KIP-219, the broker holds the answer.
        let (error, throttle) = produce(&mut c, "slow", 5);
        assert_eq!(error, 0);
        sent += BATCH;
        if throttle > 0 {
            break (asked.elapsed(), throttle);
        }
        assert!(sent < 20_000_000, "never throttled");
    };
    assert!(expected(sent).contains(&throttle), "{throttle} for {sent}");
    waited_out(took, throttle);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

#[test]
fn a_throttled_fetch_carries_no_records_and_the_next_one_reads_on() {
    let server = server("reads");
    let mut c = Client::connect(server.addrs()[0]);
    for _ in 0..30 {
        assert_eq!(produce(&mut c, "reads", 9), (0, 0));
    }
    assert_eq!(set_quota(&mut c, "consumer_byte_rate", RATE), 0);
    // One answer holds at most the quota's ten seconds, 10 MB (whole
    // batches, at least one), whatever the client asks for: 9.5 MB here.
    let (throttle, _, first) = fetch(&mut c, "reads", 0, 50 << 20, -1);
    assert_eq!(throttle, 0);
    assert!(first > 9_000_000 && first <= 10_000_000, "{first}");
    let read = (first / BATCH) as i64;
    // Four more batches are past the quota (11.5 MB over at most 11 s):
    // throttled, without records; a session the fetch would have opened
    // is not kept.
    let (throttle, session, records) = fetch(&mut c, "reads", read, 5 * BATCH as i32, 0);
    assert!(throttle > 0, "{throttle}");
    assert_eq!((session, records), (0, 0));
    // What it would have carried was not counted: once the throttle time
    // is over (the connection waits it out), one batch from the same
    // offset comes within the quota, or (10 MB in a window of just over
    // 10 s) after a throttle of a few ms.
    let mut tries = 0;
    loop {
        let (throttle, _, records) = fetch(&mut c, "reads", read, BATCH as i32, -1);
        if records > 0 {
            let one_batch = batch(&[&vec![b'q'; BATCH]]).len();
            assert_eq!((throttle, records), (0, one_batch));
            break;
        }
        assert!(throttle > 0, "an empty answer is a throttled one");
        tries += 1;
        assert!(tries < 10, "throttled for ever");
    }
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("answers throttled by a quota").unwrap() >= 1);
}

#[test]
fn a_client_past_its_request_time_is_throttled_for_at_most_a_second() {
    let server = server("timed");
    let mut c = Client::connect(server.addrs()[0]);
    // A quota of another client id's: this one's requests are not timed
    // against it.
    let r = quota_request("client-id", Some("another"), "request_percentage", 0.0001);
    assert_eq!(c.call(&r, 1).entries[0].error_code, 0);
    for _ in 0..20 {
        let got = c.call(&MetadataRequest::default(), 12);
        assert_eq!(got.throttle_time_ms, 0);
    }
    // A ten-thousandth of a percent of one thread: 10 µs of handling in
    // the quota's first ten seconds, which a few requests exceed.
    assert_eq!(set_quota(&mut c, "request_percentage", 0.0001), 0);
    let mut asked = 0;
    let throttle = loop {
        let got = c.call(&MetadataRequest::default(), 12);
        asked += 1;
        if got.throttle_time_ms > 0 {
            break got.throttle_time_ms;
        }
        assert!(asked < 1_000, "never throttled");
    };
    // Far over its quota, yet throttled for one sample's second at most.
    assert!((1..=1_000).contains(&throttle), "{throttle}");
    // The next request waits on the connection for the throttle time.
    let started = Instant::now();
    let (error, _) = produce(&mut c, "timed", 9);
    assert_eq!(error, 0);
    waited_out(started.elapsed(), throttle);
    // Still over: a produce before v6 is answered once its throttle is
    // over, and says it.
    let started = Instant::now();
    let (error, throttle) = produce(&mut c, "timed", 5);
    assert_eq!(error, 0);
    assert!((1..=1_000).contains(&throttle), "{throttle}");
    waited_out(started.elapsed(), throttle);
    // Still over: a fetch is answered without records, as Kafka answers
    // it, though there are two batches to read.
    let (throttle, _, records) = fetch(&mut c, "timed", 0, 1 << 20, -1);
    assert!((1..=1_000).contains(&throttle), "{throttle}");
    assert_eq!(records, 0);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("answers throttled by a quota").unwrap() >= 3);
}

#[test]
fn connections_past_their_address_rate_are_closed_unread() {
    let server = server("conns");
    let addr = server.addrs()[0];
    let mut admin = Client::connect(addr);
    // Two connections a second from this address: twenty in the quota's
    // first ten seconds. The admin's own came before it.
    let r = quota_request("ip", Some("127.0.0.1"), "connection_creation_rate", 2.0);
    assert_eq!(admin.call(&r, 1).entries[0].error_code, 0);
    let mut served = Vec::new();
    for _ in 0..20 {
        let mut c = Client::connect(addr);
        assert_eq!(c.call(&MetadataRequest::default(), 12).throttle_time_ms, 0);
        served.push(c);
    }
    // The 21st is held, then closed without an answer: 21 over 10 s is
    // 2.1 a second, (2.1 - 2) / 2 * 10 s = 500 ms.
    let opened = Instant::now();
    let mut refused = Client::connect(addr);
    refused.send(&MetadataRequest::default(), 12);
    assert!(
        refused.closed_by_server(),
        "the refused connection stays open"
    );
    let held = opened.elapsed();
    assert!(
        held >= Duration::from_millis(400) && held < Duration::from_secs(5),
        "{held:?}"
    );
    // Those served are still served.
    assert_eq!(
        served[0]
            .call(&MetadataRequest::default(), 12)
            .throttle_time_ms,
        0
    );
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    let closed = report.count("connections closed by a connection-rate quota");
    assert_eq!(closed, Some(1));
}

/// CreateTopics of `topics` (name, partitions) at `version`: each
/// topic's error code, and the throttle time.
fn create(c: &mut Client, topics: &[(&str, i32)], version: i16) -> (Vec<i16>, i32) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let mut r = CreateTopicsRequest::default();
    r.topics = (topics.iter())
        .map(|(name, partitions)| {
            let mut t = CreatableTopic::default();
            t.name = TopicName(s(name));
            t.num_partitions = *partitions;
            t.replication_factor = 1;
            t
        })
        .collect();
    r.timeout_ms = 5_000;
    let got = c.call(&r, version);
    (
        got.topics.iter().map(|t| t.error_code).collect(),
        got.throttle_time_ms,
    )
}

#[test]
fn partition_mutations_past_their_quota_are_refused_or_throttled_by_version() {
    let server = server("kept");
    let mut c = Client::connect(server.addrs()[0]);
    // 10 partitions a second: 110 at once (eleven seconds' worth).
    assert_eq!(set_quota(&mut c, "controller_mutation_rate", 10.0), 0);
    // The first two take the bucket 10 into debt; the third is refused,
    // and the answer says when the debt is paid back: in a second.
    let (errors, throttle) = create(&mut c, &[("a", 60), ("b", 60), ("c", 60)], 7);
    let throttled = ResponseError::ThrottlingQuotaExceeded.code();
    assert_eq!(errors, [0, 0, throttled]);
    assert!((900..=1000).contains(&throttle), "{throttle}");
    assert!(server.cluster().topic("c").is_none());
    // Still in debt (another connection, not waiting): a deletion is
    // refused too.
    let mut other = Client::connect(server.addrs()[0]);
    let mut d = DeleteTopicsRequest::default();
    d.topic_names = vec![TopicName(s("a"))];
    d.timeout_ms = 5_000;
    let deleted = other.call(&d, 5);
    assert_eq!(deleted.responses[0].error_code, throttled);
    assert!(deleted.throttle_time_ms > 0);
    assert!(server.cluster().topic("a").is_some());
    // A version before the refusals (CreateTopics v5) is granted its
    // partitions and throttled.
    let (errors, throttle) = create(&mut other, &[("d", 5)], 5);
    assert_eq!(errors, [0]);
    assert!(throttle > 0, "{throttle}");
    assert!(server.cluster().topic("d").is_some());
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("answers throttled by a quota").unwrap() >= 2);
}
