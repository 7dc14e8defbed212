//! A topic's own settings over the wire: set at creation (CreateTopics),
//! changed (IncrementalAlterConfigs, AlterConfigs), described
//! (DescribeConfigs), and applied by the produces that follow:
//! `min.insync.replicas` decides whether an `acks=all` produce is taken,
//! `max.message.bytes` how large a batch may be; and which resources have
//! configs to describe (ListConfigResources).

use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, keyed_batch, produce_request, timed_batch, Client};
use broker_sim::wire::Limits;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    alter_configs_request, incremental_alter_configs_request, AlterConfigsRequest,
    CreateTopicsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::net::SocketAddr;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;
/// Kafka's config sources: a topic's own, the broker's file, Kafka's
/// default.
const TOPIC_SOURCE: i8 = 1;
const BROKER_SOURCE: i8 = 4;
const DEFAULT_SOURCE: i8 = 5;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Three brokers, each partition on all three (min.insync.replicas 2 for
/// topics that set none).
fn server() -> Server {
    server_with(LiveConfig::default())
}

fn server_with(live: LiveConfig) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live,
        topics: Vec::new(),
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

fn passes(server: Server) {
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

/// Creates `name` (one partition of `replicas` replicas) with `configs`;
/// its error and the configs the response reports (name, value, source,
/// read-only).
fn create(
    addr: SocketAddr,
    name: &str,
    replicas: i16,
    configs: &[(&str, &str)],
) -> (i16, Vec<(String, String, i8, bool)>) {
    let mut t = CreatableTopic::default();
    t.name = TopicName(s(name));
    t.num_partitions = 1;
    t.replication_factor = replicas;
    t.configs = configs
        .iter()
        .map(|(n, v)| {
            let mut c = CreatableTopicConfig::default();
            c.name = s(n);
            c.value = Some(s(v));
            c
        })
        .collect();
    let mut r = CreateTopicsRequest::default();
    r.topics = vec![t];
    r.timeout_ms = 5_000;
    let got = Client::connect(addr).call(&r, 7);
    let topic = &got.topics[0];
    let configs = topic
        .configs
        .iter()
        .flatten()
        .map(|c| {
            let value = c.value.as_deref().unwrap_or("").to_string();
            (c.name.to_string(), value, c.config_source, c.read_only)
        })
        .collect();
    (topic.error_code, configs)
}

/// (value, source, read-only) of `config` of the topic or broker `name`.
fn described(addr: SocketAddr, kind: i8, name: &str, config: &str) -> (String, i8, bool) {
    let mut res = DescribeConfigsResource::default();
    res.resource_type = kind;
    res.resource_name = s(name);
    res.configuration_keys = Some(vec![s(config)]);
    let mut r = DescribeConfigsRequest::default();
    r.resources = vec![res];
    let got = Client::connect(addr).call(&r, 4);
    let result = &got.results[0];
    assert_eq!(result.error_code, 0, "{got:?}");
    let c = &result.configs[0];
    let value = c.value.as_deref().unwrap_or("").to_string();
    (value, c.config_source, c.read_only)
}

/// IncrementalAlterConfigs of one resource; its error code.
fn alter(
    addr: SocketAddr,
    kind: i8,
    name: &str,
    changes: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> i16 {
    use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let mut res = AlterConfigsResource::default();
    res.resource_type = kind;
    res.resource_name = s(name);
    res.configs = changes
        .iter()
        .map(|&(n, op, value)| {
            let mut c = AlterableConfig::default();
            c.name = s(n);
            c.config_operation = op;
            c.value = value.map(s);
            c
        })
        .collect();
    let mut r = IncrementalAlterConfigsRequest::default();
    r.resources = vec![res];
    r.validate_only = validate_only;
    let got = Client::connect(addr).call(&r, 1);
    assert_eq!(got.responses[0].resource_name.as_str(), name);
    got.responses[0].error_code
}

/// A produce of one batch of `value` to `topic`'s partition 0, sent to
/// `addr` (its leader); the error code.
fn produce(addr: SocketAddr, topic: &str, acks: i16, value: &[u8]) -> i16 {
    produce_batch(addr, topic, acks, batch(&[value]))
}

/// Produces `records` to `topic`'s partition 0 at `addr`: the error code.
fn produce_batch(addr: SocketAddr, topic: &str, acks: i16, records: bytes::Bytes) -> i16 {
    produce_refused(addr, topic, acks, records).0
}

/// Produces `records` to `topic`'s partition 0 at `addr`: the error code
/// and the records at fault, by their index in the batch.
fn produce_refused(
    addr: SocketAddr,
    topic: &str,
    acks: i16,
    records: bytes::Bytes,
) -> (i16, Vec<i32>) {
    let r = produce_request(topic, &[(0, records)], acks, 5_000);
    let got = Client::connect(addr).call(&r, 9);
    let p = &got.responses[0].partition_responses[0];
    let at_fault = p.record_errors.iter().map(|e| e.batch_index).collect();
    (p.error_code, at_fault)
}

/// The address of the broker leading `topic`'s partition 0.
fn leader(server: &Server, topic: &str) -> SocketAddr {
    let led = server
        .cluster()
        .topic(topic)
        .expect("the topic exists")
        .partitions[0]
        .log
        .lock()
        .leader
        .expect("a leader");
    server.addrs()[led as usize]
}

#[test]
fn a_topics_min_insync_replicas_decides_which_acks_all_produces_are_taken() {
    use broker_sim::config::Fault;
    use std::time::{Duration, Instant};
    // Every follower lags from the start and, once it has missed a
    // record for 300 ms, leaves the ISR: each leader is left alone in it.
    let slow = |broker| Fault::SlowFollower {
        broker,
        from: Duration::ZERO,
        until: Duration::from_secs(3600),
        delay: Duration::from_secs(60),
    };
    let server = server_with(LiveConfig {
        replica_lag: Duration::from_millis(300),
        faults: vec![slow(0), slow(1), slow(2)],
        ..LiveConfig::default()
    });
    let addr = server.addrs()[0];
    let (error, configs) = create(addr, "strict", 3, &[("min.insync.replicas", "3")]);
    assert_eq!(error, 0);
    assert!(
        configs.contains(&(
            "min.insync.replicas".into(),
            "3".into(),
            TOPIC_SOURCE,
            false
        )),
        "{configs:?}"
    );
    assert!(
        configs.contains(&("retention.ms".into(), "-1".into(), 5, false)),
        "{configs:?}"
    );
    assert_eq!(
        described(addr, TOPIC, "strict", "min.insync.replicas"),
        ("3".into(), TOPIC_SOURCE, false)
    );
    let at = leader(&server, "strict");
    assert_eq!(produce(at, "strict", 1, b"taken"), 0);
    let log_of = |topic: &str| {
        let t = server.cluster().topic(topic).expect("the topic exists");
        let log = t.partitions[0].log.lock();
        (log.isr.len(), log.hw, log.log_end())
    };
    let start = Instant::now();
    while log_of("strict").0 > 1 {
        assert!(start.elapsed() < Duration::from_secs(10), "the ISR shrinks");
        std::thread::sleep(Duration::from_millis(20));
    }
    let not_enough = ResponseError::NotEnoughReplicas.code();
    assert_eq!(produce(at, "strict", -1, b"refused"), not_enough);
    // acks=1 is taken, but below min.insync the high watermark stands
    // still, as in Kafka: nobody reads it yet.
    assert_eq!(produce(at, "strict", 1, b"held"), 0);
    let (_, hw, end) = log_of("strict");
    assert!(hw < end, "hw {hw}, log end {end}");
    // Checked only, then deleted: back to the broker's 2, which one
    // replica in sync does not meet either.
    let delete = [("min.insync.replicas", DELETE, None)];
    assert_eq!(alter(addr, TOPIC, "strict", &delete, true), 0);
    assert_eq!(alter(addr, TOPIC, "strict", &delete, false), 0);
    assert_eq!(
        described(addr, TOPIC, "strict", "min.insync.replicas"),
        ("2".into(), BROKER_SOURCE, false)
    );
    assert_eq!(produce(at, "strict", -1, b"still refused"), not_enough);
    // One is enough: taken, and everything held becomes readable.
    let one = [("min.insync.replicas", SET, Some("1"))];
    assert_eq!(alter(addr, TOPIC, "strict", &one, false), 0);
    assert_eq!(produce(at, "strict", -1, b"taken at last"), 0);
    let (_, hw, end) = log_of("strict");
    assert_eq!(hw, end);
    // Set again, by the set operation this time.
    let set = [("min.insync.replicas", SET, Some("3"))];
    assert_eq!(alter(addr, TOPIC, "strict", &set, false), 0);
    assert_eq!(produce(at, "strict", -1, b"refused again"), not_enough);
    // More than the replicas asks for all of them, as in Kafka: a topic
    // of one replica takes acks=all whatever its min.insync.replicas.
    assert_eq!(
        create(addr, "single", 1, &[("min.insync.replicas", "3")]).0,
        0
    );
    let at = leader(&server, "single");
    assert_eq!(produce(at, "single", -1, b"taken"), 0);
    assert_eq!(log_of("single").1, 1);
    passes(server);
}

#[test]
fn a_topics_max_message_bytes_bounds_its_batches() {
    let server = server();
    let addr = server.addrs()[0];
    assert_eq!(create(addr, "small", 3, &[]).0, 0);
    let at = leader(&server, "small");
    let big = vec![b'x'; 500];
    assert_eq!(produce(at, "small", 1, &big), 0);
    let set = [("max.message.bytes", SET, Some("200"))];
    assert_eq!(alter(addr, TOPIC, "small", &set, false), 0);
    let too_large = ResponseError::MessageTooLarge.code();
    assert_eq!(produce(at, "small", 1, &big), too_large);
    assert_eq!(produce(at, "small", 1, b"short"), 0);
    // The legacy AlterConfigs replaces all of a topic's own settings: one
    // naming only min.insync.replicas puts max.message.bytes back.
    use alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let mut c = AlterableConfig::default();
    c.name = s("min.insync.replicas");
    c.value = Some(s("1"));
    let mut res = AlterConfigsResource::default();
    res.resource_type = TOPIC;
    res.resource_name = s("small");
    res.configs = vec![c];
    let mut r = AlterConfigsRequest::default();
    r.resources = vec![res];
    let got = Client::connect(addr).call(&r, 2);
    assert_eq!(got.responses[0].error_code, 0);
    assert_eq!(
        described(addr, TOPIC, "small", "max.message.bytes").1,
        BROKER_SOURCE
    );
    assert_eq!(
        described(addr, TOPIC, "small", "min.insync.replicas"),
        ("1".into(), TOPIC_SOURCE, false)
    );
    assert_eq!(produce(at, "small", 1, &big), 0);
    passes(server);
}

#[test]
fn a_topics_retention_deletes_its_oldest_records_by_size_and_by_age() {
    let server = server();
    let addr = server.addrs()[0];
    let (error, configs) = create(addr, "aging", 3, &[("retention.bytes", "2048")]);
    assert_eq!(error, 0);
    assert!(
        configs.contains(&("retention.bytes".into(), "2048".into(), TOPIC_SOURCE, false)),
        "{configs:?}"
    );
    let at = leader(&server, "aging");
    let start = || {
        let topic = server.cluster().topic("aging").unwrap();
        let log = topic.partitions[0].log.lock();
        (log.log_start, log.log_end())
    };
    for _ in 0..10 {
        assert_eq!(produce(at, "aging", -1, &[b'v'; 500]), 0);
    }
    // Past 2 KiB, the oldest went (acks=all: each below the high
    // watermark when the next came).
    let (by_size, end) = start();
    assert!((5..10).contains(&by_size), "{by_size}");
    // By age: the test client stamps its records 0 (1970), and they go
    // within a sweep (100 ms) once the topic keeps a minute, though nothing
    // more is appended, up to the first recent one.
    let unlimited = [("retention.bytes", SET, Some("-1"))];
    assert_eq!(alter(addr, TOPIC, "aging", &unlimited, false), 0);
    let now = wall_clock_ms();
    for (stamp, value) in [(now, &b"now"[..]), (now - 3_600_000, b"an hour ago")] {
        let r = produce_request("aging", &[(0, timed_batch(&[(stamp, value)]))], -1, 5_000);
        let got = Client::connect(at).call(&r, 9);
        assert_eq!(got.responses[0].partition_responses[0].error_code, 0);
    }
    assert_eq!(
        start().0,
        by_size,
        "kept for ever until retention.ms is set"
    );
    let minute = [("retention.ms", SET, Some("60000"))];
    assert_eq!(alter(addr, TOPIC, "aging", &minute, false), 0);
    std::thread::sleep(std::time::Duration::from_millis(500));
    // The walk stops at the first recent batch, "now" (offset `end`),
    // which keeps the one of an hour ago after it, as Kafka keeps an old
    // segment behind a newer one.
    assert_eq!(start().0, end, "{:?}", start());
    passes(server);
}

#[test]
fn the_brokers_retention_by_age_applies_where_a_topic_sets_none() {
    let server = server_with(LiveConfig {
        retention_ms: Some(60_000),
        ..LiveConfig::default()
    });
    let addr = server.addrs()[0];
    assert_eq!(
        described(addr, BROKER, "0", "log.retention.ms"),
        ("60000".into(), BROKER_SOURCE, true)
    );
    assert_eq!(create(addr, "inherits", 3, &[]).0, 0);
    assert_eq!(create(addr, "forever", 3, &[("retention.ms", "-1")]).0, 0);
    assert_eq!(
        described(addr, TOPIC, "inherits", "retention.ms"),
        ("60000".into(), BROKER_SOURCE, false)
    );
    // A record of an hour ago in each: within a sweep (100 ms) it goes
    // where the broker's minute applies, and stays where the topic keeps
    // records for ever.
    let hour_ago = wall_clock_ms() - 3_600_000;
    for topic in ["inherits", "forever"] {
        let at = leader(&server, topic);
        let r = produce_request(topic, &[(0, timed_batch(&[(hour_ago, b"old")]))], -1, 5_000);
        let got = Client::connect(at).call(&r, 9);
        assert_eq!(got.responses[0].partition_responses[0].error_code, 0);
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let log_start = |topic: &str| {
        server.cluster().topic(topic).unwrap().partitions[0]
            .log
            .lock()
            .log_start
    };
    assert_eq!((log_start("inherits"), log_start("forever")), (1, 0));
    passes(server);
}

#[test]
fn past_the_bound_on_all_logs_the_oldest_batches_of_topics_that_delete_go_first() {
    let server = server_with(LiveConfig {
        log_memory: Some(1 << 20),
        ..LiveConfig::default()
    });
    let addr = server.addrs()[0];
    let compacted = [("cleanup.policy", "compact")];
    for (name, configs) in [("table", &compacted[..]), ("older", &[]), ("newer", &[])] {
        assert_eq!(create(addr, name, 3, configs).0, 0, "{name}");
    }
    let value = [b'm'; 64 << 10];
    let log = |topic: &str| {
        let topic = server.cluster().topic(topic).unwrap();
        let log = topic.partitions[0].log.lock();
        (log.log_start, log.bytes)
    };
    // The compacted topic's batches are the oldest (timestamp 0), then
    // `older`'s, then `newer`'s: 22 batches of 64 KiB past a bound of 1 MiB.
    let (table, older, newer) = (
        leader(&server, "table"),
        leader(&server, "older"),
        leader(&server, "newer"),
    );
    for _ in 0..4 {
        assert_eq!(
            produce_batch(table, "table", -1, keyed_batch(b"k", &[&value])),
            0
        );
    }
    for (at, topic, first, batches) in [(older, "older", 1_000, 6), (newer, "newer", 2_000, 12)] {
        for i in 0..batches {
            let records = timed_batch(&[(first + i, &value[..])]);
            assert_eq!(produce_batch(at, topic, -1, records), 0, "{topic}");
        }
    }
    // Within the 100 ms of a check. A check during the produces may have
    // taken `older` whole already, and the next one trims `newer`'s last
    // appends: wait for both.
    let held = || log("table").1 + log("newer").1;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while (log("older").0 < 6 || held() > (1 << 20) - (1 << 17))
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // `older` went whole, then `newer`'s oldest, down to 7/8 of the bound;
    // the compacted topic kept every record, old as they are.
    assert_eq!(log("table").0, 0);
    assert_eq!(log("older"), (6, 0));
    let newer_start = log("newer").0;
    assert!((1..12).contains(&newer_start), "{newer_start}");
    let held = held();
    assert!(held <= (1 << 20) - (1 << 17), "{held}");
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    let moved = report
        .count("log starts moved by the memory bound")
        .unwrap();
    assert!(moved >= 2, "{}", report.human());
}

#[test]
fn a_compacted_topic_keeps_every_record_until_its_policy_also_deletes() {
    let server = server();
    let addr = server.addrs()[0];
    let configs = [("cleanup.policy", "compact"), ("retention.bytes", "1024")];
    let (error, described_at_creation) = create(addr, "table", 3, &configs);
    assert_eq!(error, 0);
    assert!(
        described_at_creation.contains(&(
            "cleanup.policy".into(),
            "compact".into(),
            TOPIC_SOURCE,
            false
        )),
        "{described_at_creation:?}"
    );
    let at = leader(&server, "table");
    let log_start = || {
        server.cluster().topic("table").unwrap().partitions[0]
            .log
            .lock()
            .log_start
    };
    let keyed = || keyed_batch(b"k", &[&[b'v'; 500]]);
    for _ in 0..6 {
        assert_eq!(produce_batch(at, "table", -1, keyed()), 0);
    }
    // Compacted, and this broker does not compact: every record stays,
    // whatever retention.bytes says (Kafka applies it only with delete).
    assert_eq!(log_start(), 0);
    // As in Kafka, a compacted topic takes no record without a key, and
    // (from Produce v8) says which records and why.
    let r = produce_request("table", &[(0, batch(&[b"no key", b"nor this"]))], -1, 5_000);
    let got = Client::connect(at).call(&r, 9);
    let refused = &got.responses[0].partition_responses[0];
    assert_eq!(refused.error_code, ResponseError::InvalidRecord.code());
    let message = refused.error_message.as_ref().map(|m| m.to_string());
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.starts_with("2 records of the batch were refused")),
        "{message:?}"
    );
    let at_fault: Vec<(i32, bool)> = (refused.record_errors.iter())
        .map(|e| {
            let why = e.batch_index_error_message.as_deref();
            (
                e.batch_index,
                why.is_some_and(|m| m.contains("without key")),
            )
        })
        .collect();
    assert_eq!(at_fault, vec![(0, true), (1, true)]);
    // A list: delete appended, the retention applies from the next append.
    let append = [("cleanup.policy", APPEND, Some("delete"))];
    assert_eq!(alter(addr, TOPIC, "table", &append, false), 0);
    assert_eq!(
        described(addr, TOPIC, "table", "cleanup.policy"),
        ("compact,delete".into(), TOPIC_SOURCE, false)
    );
    assert_eq!(produce_batch(at, "table", -1, keyed()), 0);
    assert!(log_start() > 0);
    // Subtracting both would leave it empty: refused, nothing changes.
    let both = [("cleanup.policy", SUBTRACT, Some("compact,delete"))];
    assert_eq!(
        alter(addr, TOPIC, "table", &both, false),
        ResponseError::InvalidConfig.code()
    );
    let unknown = [("cleanup.policy", SET, Some("compact,snapshot"))];
    assert_eq!(
        alter(addr, TOPIC, "table", &unknown, false),
        ResponseError::InvalidConfig.code()
    );
    assert_eq!(
        described(addr, TOPIC, "table", "cleanup.policy").0,
        "compact,delete"
    );
    passes(server);
}

#[test]
fn a_log_append_time_topic_stamps_each_batch_with_its_append_time() {
    let server = server();
    let addr = server.addrs()[0];
    let stamped = [("message.timestamp.type", "LogAppendTime")];
    assert_eq!(create(addr, "stamped", 3, &stamped).0, 0);
    assert_eq!(
        described(addr, TOPIC, "stamped", "message.timestamp.type"),
        ("LogAppendTime".into(), TOPIC_SOURCE, false)
    );
    let at = leader(&server, "stamped");
    // A record from long ago: its batch says when the leader appended it.
    let produce_old = || {
        let r = produce_request(
            "stamped",
            &[(0, timed_batch(&[(1_000, b"old")]))],
            -1,
            5_000,
        );
        let got = Client::connect(at).call(&r, 9);
        let p = &got.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 0);
        p.log_append_time_ms
    };
    let before = wall_clock_ms();
    let appended_at = produce_old();
    assert!(
        (before..=wall_clock_ms()).contains(&appended_at),
        "{appended_at}"
    );
    // The header's timestamp type and max timestamp (read off the log).
    let header = |i: usize| {
        let log = server.cluster().topic("stamped").unwrap().partitions[0]
            .log
            .lock()
            .batches[i]
            .bytes
            .clone();
        let max = i64::from_be_bytes(log[35..43].try_into().unwrap());
        (log[22] & 0x08 != 0, max)
    };
    assert_eq!(header(0), (true, appended_at));
    // Back to the producer's timestamps: the next batch keeps its own.
    let create_time = [("message.timestamp.type", SET, Some("CreateTime"))];
    assert_eq!(alter(addr, TOPIC, "stamped", &create_time, false), 0);
    assert_eq!(produce_old(), -1);
    assert_eq!(header(1), (false, 1_000));
    // A producer's batch that says it carries the append time: as in
    // Kafka, its records take the time it claims, and without one (-1)
    // each is refused; with one, a CreateTime topic keeps the batch as
    // its own kind.
    let claiming = |claimed: i64| {
        let mut bytes = timed_batch(&[(1_000, b"claimed"), (2_000, b"too")]).to_vec();
        bytes[22] |= 0x08;
        bytes[35..43].copy_from_slice(&claimed.to_be_bytes());
        let crc = crc32c::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        produce_refused(at, "stamped", -1, bytes.into())
    };
    let invalid = ResponseError::InvalidTimestamp.code();
    assert_eq!(claiming(-1), (invalid, vec![0, 1]));
    assert_eq!(claiming(1_500), (0, vec![]));
    assert_eq!(header(2), (false, 2_000));
    // A topic that stamps the append time refuses the claim outright.
    let log_append_time = [("message.timestamp.type", SET, Some("LogAppendTime"))];
    assert_eq!(alter(addr, TOPIC, "stamped", &log_append_time, false), 0);
    assert_eq!(claiming(1_500), (invalid, vec![0, 1]));
    let wrong = [("message.timestamp.type", SET, Some("logappendtime"))];
    assert_eq!(
        alter(addr, TOPIC, "stamped", &wrong, false),
        ResponseError::InvalidConfig.code()
    );
    passes(server);
}

/// The wall clock in milliseconds since the epoch.
fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn what_cannot_be_altered_is_refused_and_nothing_of_the_resource_changes() {
    let server = server();
    let addr = server.addrs()[0];
    assert_eq!(create(addr, "kept", 3, &[]).0, 0);
    // Not taken by this broker, at creation and later.
    let config = [("leader.replication.throttled.replicas", "*")];
    let (error, _) = create(addr, "aged", 3, &config);
    assert_eq!(error, ResponseError::InvalidConfig.code());
    assert!(server.cluster().topic("aged").is_none());
    let invalid_config = ResponseError::InvalidConfig.code();
    // A good change beside a bad one: neither is made.
    let mixed = [
        ("min.insync.replicas", SET, Some("3")),
        ("retention.ms", SET, Some("-2")),
    ];
    assert_eq!(alter(addr, TOPIC, "kept", &mixed, false), invalid_config);
    let append = [("min.insync.replicas", APPEND, Some("3"))];
    assert_eq!(alter(addr, TOPIC, "kept", &append, false), invalid_config);
    let zero = [("max.message.bytes", SET, Some("0"))];
    assert_eq!(alter(addr, TOPIC, "kept", &zero, false), invalid_config);
    assert_eq!(
        described(addr, TOPIC, "kept", "min.insync.replicas"),
        ("2".into(), BROKER_SOURCE, false)
    );
    let set = [("min.insync.replicas", SET, Some("3"))];
    assert_eq!(
        alter(addr, TOPIC, "gone", &set, false),
        ResponseError::UnknownTopicOrPartition.code()
    );
    // A broker's settings are static; the describe says read-only.
    assert_eq!(
        alter(addr, BROKER, "0", &set, false),
        ResponseError::InvalidRequest.code()
    );
    assert!(described(addr, BROKER, "0", "min.insync.replicas").2);
    passes(server);
}

/// One batch of `values`, zstd-compressed, from the protocol crate's
/// encoder.
fn zstd_batch(values: &[&[u8]]) -> bytes::Bytes {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32 - 1,
            timestamp: wall_clock_ms(),
            key: None,
            value: Some(bytes::Bytes::copy_from_slice(v)),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    let mut out = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::Zstd,
    };
    RecordBatchEncoder::encode(&mut out, &records, &options).unwrap();
    out.freeze()
}

/// A fetch of `topic`'s partition 0 from offset 0 at `addr`, at `version`:
/// the partition's error code and the bytes of its records.
fn fetch(addr: SocketAddr, topic: &str, version: i16) -> (i16, usize) {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{BrokerId, FetchRequest};
    let mut p = FetchPartition::default();
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = TopicName(s(topic));
    t.partitions = vec![p];
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_bytes = 1 << 20;
    r.topics = vec![t];
    let got = Client::connect(addr).call(&r, version);
    let data = &got.responses[0].partitions[0];
    (
        data.error_code,
        data.records.as_ref().map_or(0, |r| r.len()),
    )
}

/// The codec of each batch `topic`'s partition 0 stores.
fn stored_codecs(server: &Server, topic: &str) -> Vec<u8> {
    let topic = server.cluster().topic(topic).expect("the topic exists");
    let log = topic.partitions[0].log.lock();
    log.batches.iter().map(|b| b.bytes[22] & 0x07).collect()
}

#[test]
fn a_topics_compression_type_is_the_codec_its_batches_are_stored_in() {
    let server = server();
    let addr = server.addrs()[0];
    let (error, configs) = create(addr, "squeezed", 3, &[("compression.type", "gzip")]);
    assert_eq!(error, 0);
    assert!(configs.contains(&(
        "compression.type".into(),
        "gzip".into(),
        TOPIC_SOURCE,
        false
    )));
    let at = leader(&server, "squeezed");
    assert_eq!(produce(at, "squeezed", -1, b"plain"), 0);
    assert_eq!(produce_batch(at, "squeezed", -1, zstd_batch(&[b"z"])), 0);
    assert_eq!(
        stored_codecs(&server, "squeezed"),
        vec![1, 1],
        "both in gzip"
    );
    // Back to each producer's own.
    let change = [("compression.type", SET, Some("PRODUCER"))];
    assert_eq!(alter(addr, TOPIC, "squeezed", &change, false), 0);
    assert_eq!(
        described(addr, TOPIC, "squeezed", "compression.type"),
        ("producer".into(), TOPIC_SOURCE, false)
    );
    assert_eq!(produce(at, "squeezed", -1, b"plain"), 0);
    assert_eq!(stored_codecs(&server, "squeezed"), vec![1, 1, 0]);
    // A codec Kafka does not have.
    let (error, _) = create(addr, "brotli", 3, &[("compression.type", "brotli")]);
    assert_eq!(error, ResponseError::InvalidConfig.code());
    passes(server);
}

#[test]
fn a_topics_compression_level_is_the_level_its_batches_are_rewritten_at() {
    let server = server();
    let addr = server.addrs()[0];
    const ZSTD_LEVEL: &str = "compression.zstd.level";
    let configs = [("compression.type", "zstd"), (ZSTD_LEVEL, "19")];
    assert_eq!(create(addr, "leveled", 3, &configs).0, 0);
    assert_eq!(
        described(addr, TOPIC, "leveled", ZSTD_LEVEL),
        ("19".into(), TOPIC_SOURCE, false)
    );
    // Kafka's defaults where the topic sets none.
    for (name, default) in [
        ("compression.gzip.level", "-1"),
        ("compression.lz4.level", "9"),
    ] {
        assert_eq!(
            described(addr, TOPIC, "leveled", name),
            (default.into(), DEFAULT_SOURCE, false)
        );
    }
    // The same records, rewritten at 19, then at zstd's fastest level.
    let at = leader(&server, "leveled");
    let values: Vec<Vec<u8>> = (0..500)
        .map(|i| format!("record {i} of a batch that repeats itself {}", i % 7).into_bytes())
        .collect();
    let values: Vec<&[u8]> = values.iter().map(|v| &v[..]).collect();
    let stored_len = |i: usize| {
        let topic = server.cluster().topic("leveled").unwrap();
        let log = topic.partitions[0].log.lock();
        log.batches[i].bytes.len()
    };
    assert_eq!(produce_batch(at, "leveled", -1, batch(&values)), 0);
    let fastest = [(ZSTD_LEVEL, SET, Some("-131072"))];
    assert_eq!(alter(addr, TOPIC, "leveled", &fastest, false), 0);
    assert_eq!(produce_batch(at, "leveled", -1, batch(&values)), 0);
    assert_eq!(stored_codecs(&server, "leveled"), vec![4, 4]);
    assert!(
        stored_len(0) < stored_len(1),
        "{} {}",
        stored_len(0),
        stored_len(1)
    );
    // The levels Kafka takes, and no others (gzip's default, -1, too).
    for (name, value, taken) in [
        ("compression.gzip.level", "-1", true),
        ("compression.gzip.level", "0", false),
        ("compression.gzip.level", "10", false),
        ("compression.lz4.level", "17", true),
        ("compression.lz4.level", "18", false),
        (ZSTD_LEVEL, "-131073", false),
        (ZSTD_LEVEL, "22", true),
        (ZSTD_LEVEL, "23", false),
    ] {
        let error = alter(addr, TOPIC, "leveled", &[(name, SET, Some(value))], true);
        let expected = if taken {
            0
        } else {
            ResponseError::InvalidConfig.code()
        };
        assert_eq!(error, expected, "{name}={value}");
    }
    passes(server);
}

#[test]
fn configs_of_kafkas_files_and_cleaner_are_taken_and_kept_without_effect() {
    let server = server();
    let addr = server.addrs()[0];
    // As Kafka Streams creates a repartition topic, with a segment.ms
    // that Streams does not set added among its configs.
    let repartition = [
        ("cleanup.policy", "delete"),
        ("segment.bytes", "52428800"),
        ("retention.ms", "-1"),
        ("segment.ms", "600000"),
        ("message.timestamp.type", "CreateTime"),
    ];
    let (error, configs) = create(addr, "app-repartition", 3, &repartition);
    assert_eq!(error, 0);
    assert!(configs.contains(&("segment.ms".into(), "600000".into(), TOPIC_SOURCE, false)));
    assert_eq!(
        described(addr, TOPIC, "app-repartition", "segment.bytes"),
        ("52428800".into(), TOPIC_SOURCE, false)
    );
    assert_eq!(
        described(addr, TOPIC, "app-repartition", "min.cleanable.dirty.ratio"),
        ("0.5".into(), DEFAULT_SOURCE, false)
    );
    // Altered and reset like any other; its records are served as ever.
    let change = [
        ("preallocate", SET, Some("TRUE")),
        ("segment.bytes", DELETE, None),
    ];
    assert_eq!(alter(addr, TOPIC, "app-repartition", &change, false), 0);
    assert_eq!(
        described(addr, TOPIC, "app-repartition", "preallocate"),
        ("true".into(), TOPIC_SOURCE, false)
    );
    assert_eq!(
        described(addr, TOPIC, "app-repartition", "segment.bytes"),
        ("1073741824".into(), DEFAULT_SOURCE, false)
    );
    let at = leader(&server, "app-repartition");
    assert_eq!(produce(at, "app-repartition", -1, b"kept"), 0);
    // Kafka's bounds, and the configs this broker neither applies nor
    // takes (replication throttles, tiered storage).
    for (name, value) in [
        ("segment.bytes", "13"),
        ("segment.ms", "0"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("preallocate", "yes"),
        ("unclean.leader.election.enable", "maybe"),
        ("remote.storage.enable", "false"),
        ("leader.replication.throttled.replicas", "*"),
    ] {
        let error = alter(
            addr,
            TOPIC,
            "app-repartition",
            &[(name, SET, Some(value))],
            true,
        );
        assert_eq!(error, ResponseError::InvalidConfig.code(), "{name}={value}");
    }
    passes(server);
}

#[test]
fn zstd_is_refused_to_clients_older_than_it_as_kafka_refuses_it() {
    let server = server();
    let addr = server.addrs()[0];
    let unsupported = ResponseError::UnsupportedCompressionType.code();
    // Produce v7 brought zstd: a v6 produce of a zstd batch is refused.
    assert_eq!(create(addr, "sent", 3, &[]).0, 0);
    let at = leader(&server, "sent");
    let r = produce_request("sent", &[(0, zstd_batch(&[b"a"]))], -1, 5_000);
    let v6 = Client::connect(at).call(&r, 6);
    assert_eq!(
        v6.responses[0].partition_responses[0].error_code,
        unsupported
    );
    let v7 = Client::connect(at).call(&r, 7);
    assert_eq!(v7.responses[0].partition_responses[0].error_code, 0);
    // Fetch v10 did: a topic stored in zstd is not read before it, and a
    // topic whose batches are zstd only as their producers sent them is.
    assert_eq!(fetch(at, "sent", 9).0, 0);
    assert_eq!(
        create(addr, "stored", 3, &[("compression.type", "zstd")]).0,
        0
    );
    let at = leader(&server, "stored");
    assert_eq!(produce(at, "stored", -1, b"plain"), 0);
    assert_eq!(stored_codecs(&server, "stored"), vec![4]);
    assert_eq!(fetch(at, "stored", 9), (unsupported, 0));
    let (error, bytes) = fetch(at, "stored", 10);
    assert_eq!(error, 0);
    assert!(bytes > 0);
    passes(server);
}

#[test]
fn a_topics_timestamp_bounds_refuse_records_too_far_from_the_leaders_clock() {
    let server = server();
    let addr = server.addrs()[0];
    const AFTER: &str = "message.timestamp.after.max.ms";
    const BEFORE: &str = "message.timestamp.before.max.ms";
    // Kafka's defaults (the largest long) bound nothing.
    assert_eq!(create(addr, "bounded", 3, &[(AFTER, "60000")]).0, 0);
    assert_eq!(
        described(addr, TOPIC, "bounded", BEFORE),
        (i64::MAX.to_string(), DEFAULT_SOURCE, false)
    );
    assert_eq!(
        described(addr, TOPIC, "bounded", AFTER),
        ("60000".into(), TOPIC_SOURCE, false)
    );
    let at = leader(&server, "bounded");
    // Each record's own timestamp, to partition 0: the error and the
    // records at fault.
    let produce_at = |times: &[i64]| {
        let records: Vec<(i64, &[u8])> = times.iter().map(|&t| (t, &b"x"[..])).collect();
        produce_refused(at, "bounded", -1, timed_batch(&records))
    };
    let invalid = ResponseError::InvalidTimestamp.code();
    let hour = 3_600_000;
    let now = wall_clock_ms();
    // An hour ahead is past the minute allowed; a year ago is fine.
    assert_eq!(produce_at(&[now, now + hour]), (invalid, vec![1]));
    // Every record at fault is listed.
    let ahead = now + hour;
    assert_eq!(produce_at(&[ahead, now, ahead]), (invalid, vec![0, 2]));
    assert_eq!(produce_at(&[now - 365 * 24 * hour, now]), (0, vec![]));
    // Bounded before as well: the year-old record is refused now, and a
    // record without a timestamp (-1) is not checked, as in Kafka.
    let change = [(BEFORE, SET, Some("60000"))];
    assert_eq!(alter(addr, TOPIC, "bounded", &change, false), 0);
    assert_eq!(
        produce_at(&[wall_clock_ms() - 365 * 24 * hour]),
        (invalid, vec![0])
    );
    assert_eq!(produce_at(&[-1, wall_clock_ms()]), (0, vec![]));
    // A topic that stamps its own append time does not check them.
    let stamped = [("message.timestamp.type", SET, Some("LogAppendTime"))];
    assert_eq!(alter(addr, TOPIC, "bounded", &stamped, false), 0);
    assert_eq!(produce_at(&[1_000]), (0, vec![]));
    // Neither bound may be negative.
    let negative = [(AFTER, SET, Some("-1"))];
    assert_eq!(
        alter(addr, TOPIC, "bounded", &negative, false),
        ResponseError::InvalidConfig.code()
    );
    passes(server);
}

#[test]
fn list_config_resources_lists_the_resources_of_each_type_asked_for() {
    let server = server();
    let addr = server.addrs()[0];
    assert_eq!(create(addr, "zebra", 3, &[]).0, 0);
    assert_eq!(create(addr, "aardvark", 3, &[]).0, 0);
    // A group with a config of its own and no members is a resource.
    let session = [("consumer.session.timeout.ms", SET, Some("50000"))];
    assert_eq!(alter(addr, 32, "configured", &session, false), 0);
    // (type, name) in the order listed, or the error.
    let list = |types: &[i8], version: i16| {
        let mut r = ListConfigResourcesRequest::default();
        r.resource_types = types.to_vec();
        let got = Client::connect(addr).call(&r, version);
        let listed: Vec<(i8, String)> = got
            .config_resources
            .iter()
            .map(|c| (c.resource_type, c.resource_name.to_string()))
            .collect();
        (got.error_code, listed)
    };
    let brokers = |kind: i8| (0..3).map(move |b| (kind, b.to_string()));
    let every: Vec<(i8, String)> = std::iter::once((32, "configured".to_string()))
        .chain(brokers(8))
        .chain(brokers(BROKER))
        .chain([(TOPIC, "aardvark".into()), (TOPIC, "zebra".into())])
        .collect();
    // v1 with no type asked for: all five (no client-metrics
    // subscriptions here).
    assert_eq!(list(&[], 1), (0, every));
    let topics = vec![(TOPIC, "aardvark".into()), (TOPIC, "zebra".into())];
    assert_eq!(list(&[TOPIC], 1), (0, topics));
    assert_eq!(list(&[16], 1), (0, vec![]));
    // A type v1 does not define refuses the request.
    let unsupported = ResponseError::UnsupportedVersion.code();
    assert_eq!(list(&[TOPIC, 1], 1), (unsupported, vec![]));
    // v0 (ListClientMetricsResources): client metrics only.
    assert_eq!(list(&[], 0), (0, vec![]));
    // A group whose configs are all deleted is no longer listed.
    let back = [("consumer.session.timeout.ms", DELETE, None)];
    assert_eq!(alter(addr, 32, "configured", &back, false), 0);
    assert_eq!(list(&[32], 1), (0, vec![]));
    passes(server);
}
