//! The wire front over 127.0.0.1 with ephemeral ports, driven by a test
//! client on the `kafka-protocol` crate's codecs: what a produce with
//! `acks=all` and a long-poll fetch wait for, byte-exact round trips,
//! ordering, bad input, disconnects and the shutdown.

use broker_sim::live::{LiveCluster, LiveConfig};
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{
    batch, commit_request, decode_response, idempotent_batch, produce_request, timed_batch,
    transactional_batch, values, Client,
};
use broker_sim::wire::Limits;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiVersionsRequest, BrokerId, CreatePartitionsRequest,
    CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    EndTxnRequest, FetchRequest, FetchResponse, FindCoordinatorRequest, GroupId,
    InitProducerIdRequest, ListOffsetsRequest, MetadataRequest, OffsetCommitRequest,
    OffsetFetchRequest, ProduceRequest, ProduceResponse, ProducerId, TopicName, TransactionalId,
    WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;
use std::time::{Duration, Instant};

const PRODUCE_V: i16 = 8;
const FETCH_V: i16 = 11;
const METADATA_V: i16 = 9;

fn server(follower_latency: Duration, topics: &[(&str, u32)]) -> Server {
    server_with(
        LiveConfig {
            follower_latency: vec![follower_latency],
            ..LiveConfig::default()
        },
        topics,
        Limits::default(),
    )
}

fn server_with(live: LiveConfig, topics: &[(&str, u32)], limits: Limits) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live,
        topics: topics.iter().map(|(n, p)| (n.to_string(), *p)).collect(),
        limits,
        tls: None,
    })
    .expect("the server starts")
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn fetch(topic: &str, parts: &[(i32, i64)], max_wait_ms: i32, min_bytes: i32) -> FetchRequest {
    let mut t = FetchTopic::default();
    t.topic = name(topic);
    t.partitions = parts
        .iter()
        .map(|(i, offset)| {
            let mut p = FetchPartition::default();
            p.partition = *i;
            p.fetch_offset = *offset;
            p.partition_max_bytes = 1 << 20;
            p
        })
        .collect();
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = max_wait_ms;
    r.min_bytes = min_bytes;
    r.max_bytes = 50 << 20;
    r.topics = vec![t];
    r
}

fn latest(c: &mut Client, topic: &str, partition: i32) -> i64 {
    latest_of(c, topic, partition, 0)
}

/// The latest offset of `topic`'s partition 0 for a reader at `isolation`
/// (1: committed records only).
fn latest_at(c: &mut Client, topic: &str, isolation: i8) -> i64 {
    latest_of(c, topic, 0, isolation)
}

fn latest_of(c: &mut Client, topic: &str, partition: i32, isolation: i8) -> i64 {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = partition;
    p.timestamp = -1;
    let mut t = ListOffsetsTopic::default();
    t.name = name(topic);
    t.partitions = vec![p];
    let mut r = ListOffsetsRequest::default();
    r.replica_id = BrokerId(-1);
    r.isolation_level = isolation;
    r.topics = vec![t];
    let response = c.call(&r, 5);
    let p = &response.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

/// The broker leading `topic`'s `partition`, by Metadata.
fn leader(server: &Server, topic: &str, partition: i32) -> Client {
    let mut c = Client::connect(server.addrs()[0]);
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name(topic));
    let mut r = MetadataRequest::default();
    r.topics = Some(vec![t]);
    r.allow_auto_topic_creation = true;
    let m = c.call(&r, METADATA_V);
    let topic = &m.topics[0];
    assert_eq!(topic.error_code, 0);
    let p = topic
        .partitions
        .iter()
        .find(|p| p.partition_index == partition)
        .unwrap();
    let b = m.brokers.iter().find(|b| b.node_id == p.leader_id).unwrap();
    Client::connect(format!("{}:{}", b.host.as_str(), b.port).parse().unwrap())
}

fn partition_errors(r: &ProduceResponse) -> Vec<(i32, i16, i64)> {
    r.responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .map(|p| (p.index, p.error_code, p.base_offset))
        .collect()
}

fn fetched(r: &FetchResponse) -> Vec<(i32, i16, i64, Bytes)> {
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            (
                p.partition_index,
                p.error_code,
                p.high_watermark,
                p.records.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn passes(server: Server) {
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

#[test]
fn an_acks_all_produce_is_acknowledged_only_once_the_high_watermark_passes_it() {
    let server = server(Duration::from_millis(300), &[("orders", 1)]);
    let mut c = leader(&server, "orders", 0);
    // acks=1 answers after the leader's append: the followers do not have
    // it yet, so the high watermark has not moved.
    let r = c.call(
        &produce_request("orders", &[(0, batch(&[b"one"]))], 1, 5000),
        PRODUCE_V,
    );
    assert_eq!(partition_errors(&r), vec![(0, 0, 0)]);
    assert_eq!(latest(&mut c, "orders", 0), 0);
    // acks=all waits until every in-sync replica has it.
    let start = Instant::now();
    let r = c.call(
        &produce_request("orders", &[(0, batch(&[b"two", b"three"]))], -1, 5000),
        PRODUCE_V,
    );
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(partition_errors(&r), vec![(0, 0, 1)]);
    assert!(latest(&mut c, "orders", 0) >= 3);
    let checks = &server.cluster().checks;
    assert_eq!(
        checks
            .acked_records
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    passes(server);
}

#[test]
fn a_long_poll_fetch_wakes_on_the_append_and_round_trips_bytes_exactly() {
    let server = server(Duration::from_millis(2), &[("orders", 1)]);
    let addr = {
        let c = leader(&server, "orders", 0);
        c.stream.peer_addr().unwrap()
    };
    let poller = std::thread::spawn(move || {
        let mut c = Client::connect(addr);
        let start = Instant::now();
        let r = c.call(&fetch("orders", &[(0, 0)], 10_000, 1), FETCH_V);
        (start.elapsed(), r)
    });
    std::thread::sleep(Duration::from_millis(200));
    let mut c = Client::connect(addr);
    let sent = batch(&[b"hello", b"\x00\xffbinary"]);
    let r = c.call(
        &produce_request("orders", &[(0, sent.clone())], -1, 5000),
        PRODUCE_V,
    );
    assert_eq!(partition_errors(&r), vec![(0, 0, 0)]);
    let (waited, r) = poller.join().unwrap();
    // Woken by the append's high watermark, not by max_wait (10 s).
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    // The server timed the wake-up, from the high watermark's move to the
    // response, within what the client waited.
    let (woken, _, _, max_us) = server.cluster().checks.fetch_wakeups.quantiles();
    assert_eq!(woken, 1, "one fetch woken by data");
    assert!(Duration::from_micros(max_us) <= waited, "{max_us} µs");
    let parts = fetched(&r);
    assert_eq!(parts.len(), 1);
    let (_, error, hw, records) = &parts[0];
    assert_eq!((*error, *hw), (0, 2));
    // The stored batch is the produced one, byte for byte (its base offset
    // was 0 already).
    assert_eq!(records, &sent);
    assert_eq!(
        values(records),
        vec![(0, b"hello".to_vec()), (1, b"\x00\xffbinary".to_vec())]
    );
    passes(server);
}

#[test]
fn a_fetch_with_too_little_data_returns_at_max_wait_never_earlier() {
    let server = server(Duration::from_millis(2), &[("quiet", 1)]);
    let mut c = leader(&server, "quiet", 0);
    c.call(
        &produce_request("quiet", &[(0, batch(&[b"small"]))], -1, 5000),
        PRODUCE_V,
    );
    let start = Instant::now();
    let r = c.call(&fetch("quiet", &[(0, 0)], 300, 1 << 20), FETCH_V);
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    // Answered with what there is.
    let (_, error, _, records) = &fetched(&r)[0];
    assert_eq!(*error, 0);
    assert_eq!(values(records), vec![(0, b"small".to_vec())]);
    // Expired, not woken by data.
    assert_eq!(server.cluster().checks.fetch_wakeups.quantiles().0, 0);
    passes(server);
}

#[test]
fn several_partitions_in_one_request() {
    // With one broker every partition has the same leader.
    let server = server_with(LiveConfig::one_broker(), &[("multi", 4)], Limits::default());
    let mut c = Client::connect(server.addrs()[0]);
    let parts: Vec<(i32, Bytes)> = (0..4)
        .map(|i| (i, batch(&[format!("p{i}").as_bytes()])))
        .collect();
    let r = c.call(&produce_request("multi", &parts, -1, 5000), PRODUCE_V);
    assert_eq!(
        partition_errors(&r),
        (0..4).map(|i| (i, 0, 0)).collect::<Vec<_>>()
    );
    // One of them does not exist: its own error, the others answered.
    let r = c.call(
        &fetch("multi", &[(0, 0), (1, 0), (2, 0), (3, 0), (9, 0)], 1000, 1),
        FETCH_V,
    );
    let mut got = fetched(&r);
    got.sort_by_key(|p| p.0);
    for (i, (index, error, _, records)) in got.iter().take(4).enumerate() {
        assert_eq!((*index, *error), (i as i32, 0));
        assert_eq!(values(records), vec![(0, format!("p{i}").into_bytes())]);
    }
    assert_eq!(
        (got[4].0, got[4].1),
        (9, ResponseError::UnknownTopicOrPartition.code())
    );
    // Too large, a bad CRC, and an unknown topic.
    let mut bad = batch(&[b"x"]).to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    let r = c.call(
        &produce_request("multi", &[(0, Bytes::from(bad))], -1, 5000),
        PRODUCE_V,
    );
    assert_eq!(
        partition_errors(&r)[0].1,
        ResponseError::CorruptMessage.code()
    );
    let r = c.call(
        &produce_request("nope", &[(0, batch(&[b"x"]))], -1, 5000),
        PRODUCE_V,
    );
    assert_eq!(
        partition_errors(&r)[0].1,
        ResponseError::UnknownTopicOrPartition.code()
    );
    let big = batch(&[&vec![7u8; 2 << 20]]);
    let r = c.call(&produce_request("multi", &[(1, big)], -1, 5000), PRODUCE_V);
    assert_eq!(
        partition_errors(&r)[0].1,
        ResponseError::MessageTooLarge.code()
    );
    // An offset past the log end.
    let r = c.call(&fetch("multi", &[(0, 99)], 100, 1), FETCH_V);
    assert_eq!(fetched(&r)[0].1, ResponseError::OffsetOutOfRange.code());
    passes(server);
}

#[test]
fn a_partitions_records_are_one_v2_batch_as_kafka_checks_them() {
    let server = server(Duration::from_millis(2), &[("framed", 1)]);
    let error = |c: &mut Client, topic: &str, records: Bytes, version: i16| {
        let r = c.call(&produce_request(topic, &[(0, records)], -1, 5000), version);
        partition_errors(&r)[0].1
    };
    let invalid = ResponseError::InvalidRecord.code();
    let two = Bytes::from([batch(&[b"a"]), batch(&[b"b"])].concat());
    // Before the leader is asked for: every broker refuses two batches,
    // the one that leads the partition and those that do not.
    for &addr in server.addrs() {
        let mut c = Client::connect(addr);
        for version in [3, PRODUCE_V] {
            assert_eq!(error(&mut c, "framed", two.clone(), version), invalid);
        }
    }
    // After the partition is: a topic that does not exist is that.
    let mut c = leader(&server, "framed", 0);
    assert_eq!(
        error(&mut c, "nope", two, PRODUCE_V),
        ResponseError::UnknownTopicOrPartition.code()
    );
    // No batch at all, and a batch of magic 1 (the header's 17th byte).
    assert_eq!(error(&mut c, "framed", Bytes::new(), PRODUCE_V), invalid);
    let mut old = batch(&[b"c"]).to_vec();
    old[16] = 1;
    assert_eq!(error(&mut c, "framed", old.into(), PRODUCE_V), invalid);
    // None of them stored anything; one batch is.
    assert_eq!(error(&mut c, "framed", batch(&[b"d"]), PRODUCE_V), 0);
    let r = c.call(&fetch("framed", &[(0, 0)], 0, 1), FETCH_V);
    assert_eq!(values(&fetched(&r)[0].3), vec![(0, b"d".to_vec())]);
    passes(server);
}

#[test]
fn pipelined_requests_are_answered_in_request_order() {
    let server = server(Duration::from_millis(2), &[("orders", 1)]);
    let mut c = leader(&server, "orders", 0);
    // A parked fetch first, then requests that could be answered at once.
    let parked = c.send(&fetch("orders", &[(0, 0)], 400, 1), FETCH_V);
    let meta = c.send(&MetadataRequest::default(), METADATA_V);
    let versions = c.send(&ApiVersionsRequest::default(), 3);
    let (first, _) = c.recv::<FetchRequest>(FETCH_V);
    let (second, _) = c.recv::<MetadataRequest>(METADATA_V);
    let (third, v) = c.recv::<ApiVersionsRequest>(3);
    assert_eq!((first, second, third), (parked, meta, versions));
    assert_eq!(v.error_code, 0);
    passes(server);
}

#[test]
fn api_versions_advertises_what_is_implemented_and_refuses_other_versions() {
    let server = server(Duration::from_millis(2), &[]);
    let mut c = Client::connect(server.addrs()[0]);
    let v = c.call(&ApiVersionsRequest::default(), 3);
    let max = |key: i16| {
        v.api_keys
            .iter()
            .find(|k| k.api_key == key)
            .map(|k| (k.min_version, k.max_version))
    };
    // librdkafka needs Produce v3+ and Fetch v4+ for record batches v2.
    assert!(max(0).unwrap().1 >= 3 && max(1).unwrap().1 >= 4);
    assert!(max(3).is_some() && max(2).is_some() && max(18).is_some());
    // Up to the versions current clients start from: topics by id in
    // Fetch, several groups or keys in one OffsetFetch or FindCoordinator.
    assert_eq!(max(0), Some((3, 13)), "Produce");
    assert_eq!(max(1), Some((4, 18)), "Fetch");
    assert_eq!(max(11), Some((0, 9)), "JoinGroup");
    assert_eq!(max(10), Some((0, 6)), "FindCoordinator");
    assert_eq!(max(9), Some((1, 9)), "OffsetFetch");
    assert_eq!(max(47), Some((0, 0)), "OffsetDelete");
    assert_eq!(max(33), Some((0, 2)), "AlterConfigs");
    assert_eq!(max(44), Some((0, 1)), "IncrementalAlterConfigs");
    assert_eq!(max(22), Some((0, 5)), "InitProducerId");
    assert_eq!(max(19), Some((2, 7)), "CreateTopics");
    // Transactions' own APIs, short of their second version (and of
    // AddPartitionsToTxn's versions for brokers).
    assert_eq!(max(24), Some((0, 3)), "AddPartitionsToTxn");
    assert_eq!(max(26), Some((0, 4)), "EndTxn");
    // An ApiVersions version from the future (v99, correlation id 42, no
    // client id): answered at v0 with the error and the versions there are.
    let mut raw = Vec::new();
    let body: [u8; 10] = [0, 18, 0, 99, 0, 0, 0, 42, 0xff, 0xff];
    raw.extend_from_slice(&(body.len() as i32).to_be_bytes());
    raw.extend_from_slice(&body);
    c.send_raw(&raw).unwrap();
    let (got, v0) = c.recv::<ApiVersionsRequest>(0);
    assert_eq!(got, 42);
    assert_eq!(v0.error_code, ResponseError::UnsupportedVersion.code());
    assert!(!v0.api_keys.is_empty());
    passes(server);
}

/// A frame: size prefix, then `body`.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as i32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

/// librdkafka 2.x asks for every topic with Metadata v12 in this frame
/// (captured from confluent-kafka 2.16's `list_topics()`): its null topic
/// list takes 4 bytes where the compact encoding has 1, so 3 bytes are
/// left after the body. Kafka's brokers ignore them, and so must we.
#[test]
fn librdkafkas_all_topics_metadata_request_lists_every_topic() {
    let server = server(Duration::ZERO, &[("orders", 2), ("payments", 1)]);
    let mut c = Client::connect(server.addrs()[0]);
    let request = [
        0x00, 0x03, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x03, 0x00, 0x07, b'r', b'd', b'k', b'a', b'f',
        b'k', b'a', 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
    ];
    c.send_raw(&frame(&request)).unwrap();
    let (id, answer) = decode_response::<MetadataRequest>(c.read_frame().expect("an answer"), 12);
    assert_eq!(id, 3);
    let mut topics: Vec<(String, usize)> = answer
        .topics
        .iter()
        .map(|t| {
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            (name, t.partitions.len())
        })
        .collect();
    topics.sort();
    assert_eq!(
        topics,
        [("orders".to_string(), 2), ("payments".to_string(), 1)]
    );
    passes(server);
}

/// Metadata v0 has no null list: an empty one asks for every topic
/// there, and for none from v1 on.
#[test]
fn an_empty_metadata_v0_request_lists_every_topic() {
    let server = server(Duration::ZERO, &[("orders", 2), ("payments", 1)]);
    let mut c = Client::connect(server.addrs()[0]);
    let mut empty = MetadataRequest::default();
    empty.topics = Some(Vec::new());
    let listed = |c: &mut Client, version: i16| -> Vec<String> {
        c.send(&empty, version);
        let (_, answer) = c.recv::<MetadataRequest>(version);
        let mut names: Vec<String> = (answer.topics.iter())
            .map(|t| t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default())
            .collect();
        names.sort();
        names
    };
    assert_eq!(listed(&mut c, 0), ["orders", "payments"]);
    assert!(listed(&mut c, 1).is_empty());
    assert!(listed(&mut c, 12).is_empty());
    passes(server);
}

/// Asked, a broker without an authorizer tells a client it may do
/// everything, on each topic named in the answer (found or not) and (v8
/// to v10) on the cluster; not asked, the schema's "not asked".
#[test]
fn metadata_tells_the_operations_allowed_when_asked() {
    const NOT_ASKED: i32 = i32::MIN;
    // READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
    // ALTER_CONFIGS; CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
    // DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
    const TOPIC: i32 = 0b1101_1111_1000;
    const CLUSTER: i32 = 0b1_1111_1010_0000;
    let server = server(Duration::ZERO, &[("orders", 1)]);
    let mut c = Client::connect(server.addrs()[0]);
    let ask = |c: &mut Client, version: i16, asked: bool| {
        let mut r = MetadataRequest::default();
        r.topics = Some(
            ["orders", "absent"]
                .iter()
                .map(|n| {
                    let mut t = MetadataRequestTopic::default();
                    t.name = Some(name(n));
                    t
                })
                .collect(),
        );
        r.allow_auto_topic_creation = false;
        r.include_topic_authorized_operations = asked;
        r.include_cluster_authorized_operations = asked && version <= 10;
        let got = c.call(&r, version);
        let topics: Vec<(i16, i32)> = (got.topics.iter())
            .map(|t| (t.error_code, t.topic_authorized_operations))
            .collect();
        (topics, got.cluster_authorized_operations)
    };
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(
        ask(&mut c, 10, true),
        (vec![(0, TOPIC), (unknown, TOPIC)], CLUSTER)
    );
    assert_eq!(
        ask(&mut c, 12, true),
        (vec![(0, TOPIC), (unknown, TOPIC)], NOT_ASKED)
    );
    assert_eq!(
        ask(&mut c, 12, false),
        (vec![(0, NOT_ASKED), (unknown, NOT_ASKED)], NOT_ASKED)
    );
    passes(server);
}

#[test]
fn bad_input_closes_that_connection_and_the_broker_keeps_serving() {
    let server = server_with(
        LiveConfig::default(),
        &[("orders", 1)],
        Limits {
            max_request_bytes: 1 << 20,
            ..Limits::default()
        },
    );
    let addr = server.addrs()[0];
    let mut valid_metadata_header = vec![0, 3, 0, 1, 0, 0, 0, 7, 0, 0];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a 2 GB size prefix", (i32::MAX).to_be_bytes().to_vec()),
        (
            "a frame over the configured limit",
            ((1 << 20) + 1i32).to_be_bytes().to_vec(),
        ),
        ("a negative size", (-5i32).to_be_bytes().to_vec()),
        ("a size below a header", frame(&[0, 3, 0])),
        (
            "an unknown API key",
            frame(&[0x7f, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0]),
        ),
        (
            "a version not implemented",
            frame(&[0, 0, 0, 99, 0, 0, 0, 1, 0, 0]),
        ),
        (
            "a truncated body",
            frame(&[0, 3, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0]),
        ),
        // Metadata v1 announcing 2^31 - 1 topics in a 14-byte frame.
        (
            "an array count beyond the frame",
            frame(&[0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff]),
        ),
        ("garbage after a valid header", {
            valid_metadata_header.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3]);
            frame(&valid_metadata_header)
        }),
    ];
    for (what, bytes) in cases {
        let mut c = Client::connect(addr);
        c.send_raw(&bytes).unwrap();
        assert!(c.closed_by_server(), "{what}: the connection stays open");
        // Every other client is still served.
        let mut ok = Client::connect(addr);
        assert_eq!(
            ok.call(&MetadataRequest::default(), METADATA_V)
                .brokers
                .len(),
            3,
            "after {what}"
        );
    }
    // A frame cut off by a disconnect.
    let mut c = Client::connect(addr);
    c.send_raw(&100i32.to_be_bytes()).unwrap();
    c.send_raw(&[0, 3]).unwrap();
    drop(c);
    let mut ok = Client::connect(addr);
    ok.call(&MetadataRequest::default(), METADATA_V);
    passes(server);
}

fn eventually(done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    done()
}

#[test]
fn a_client_that_disconnects_leaves_nothing_parked() {
    let server = server(Duration::from_millis(2), &[("orders", 1)]);
    let addr = leader(&server, "orders", 0).stream.peer_addr().unwrap();
    let cluster = server.cluster().clone();
    let mut c = Client::connect(addr);
    for _ in 0..50 {
        c.send(&fetch("orders", &[(0, 0)], 60_000, 1), FETCH_V);
    }
    assert!(
        eventually(|| cluster.pending() == 50),
        "{} parked",
        cluster.pending()
    );
    drop(c);
    // The data they wait for arrives: each is answered inside, exactly
    // once, and its response dropped.
    let mut p = Client::connect(addr);
    p.call(
        &produce_request("orders", &[(0, batch(&[b"late"]))], -1, 5000),
        PRODUCE_V,
    );
    assert!(eventually(
        || cluster.pending() == 0 && cluster.watched() == 0
    ));
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    let dropped = report.count("responses to closed").unwrap();
    assert!(dropped <= 50);
}

#[test]
fn the_shutdown_answers_every_parked_request_with_an_error_code() {
    let server = server(Duration::from_secs(3600), &[("orders", 1)]);
    let addr = leader(&server, "orders", 0).stream.peer_addr().unwrap();
    let cluster = server.cluster().clone();
    let waiting: Vec<_> = (0..2)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                if i == 0 {
                    let r = c.call(&fetch("orders", &[(0, 0)], 60_000, 1), FETCH_V);
                    fetched(&r)[0].1
                } else {
                    // The followers never get it: parked until the shutdown.
                    let r = c.call(
                        &produce_request("orders", &[(0, batch(&[b"x"]))], -1, 60_000),
                        PRODUCE_V,
                    );
                    partition_errors(&r)[0].1
                }
            })
        })
        .collect();
    assert!(eventually(|| cluster.pending() == 2));
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    for w in waiting {
        assert_eq!(w.join().unwrap(), ResponseError::NotLeaderOrFollower.code());
    }
}

#[test]
fn a_produce_times_out_at_its_timeout_never_earlier() {
    let server = server(Duration::from_secs(3600), &[("orders", 1)]);
    let mut c = leader(&server, "orders", 0);
    let start = Instant::now();
    let r = c.call(
        &produce_request("orders", &[(0, batch(&[b"x"]))], -1, 250),
        PRODUCE_V,
    );
    assert!(start.elapsed() >= Duration::from_millis(250));
    assert_eq!(
        partition_errors(&r)[0].1,
        ResponseError::RequestTimedOut.code()
    );
    passes(server);
}

#[test]
fn pipelined_requests_take_effect_in_the_order_sent() {
    // As Kafka guarantees for one connection: produces without an
    // idempotent producer's sequence numbers are appended, and commits of
    // one partition applied, in the order they were sent, while a parked
    // fetch ahead of them waits.
    let server = server_with(
        LiveConfig::one_broker(),
        &[("ordered", 1)],
        Limits::default(),
    );
    let mut c = Client::connect(server.addrs()[0]);
    let parked = c.send(&fetch("ordered", &[(0, 0)], 500, 1 << 20), FETCH_V);
    let sent: Vec<i32> = (0..300)
        .map(|i| {
            let value = format!("{i}");
            c.send(
                &produce_request("ordered", &[(0, batch(&[value.as_bytes()]))], 1, 5_000),
                PRODUCE_V,
            )
        })
        .collect();
    let commits: Vec<i32> = (1..=300)
        .map(|offset| {
            c.send(
                &commit_request("in-order", -1, "", &[("ordered", 0, offset)]),
                2,
            )
        })
        .collect();
    let (id, _) = c.recv::<FetchRequest>(FETCH_V);
    assert_eq!(id, parked);
    for want in sent {
        let (id, r) = c.recv::<ProduceRequest>(PRODUCE_V);
        assert_eq!((id, partition_errors(&r)[0].1), (want, 0));
    }
    for want in commits {
        let (id, r) = c.recv::<OffsetCommitRequest>(2);
        assert_eq!((id, r.topics[0].partitions[0].error_code), (want, 0));
    }
    let r = c.call(&fetch("ordered", &[(0, 0)], 0, 1), FETCH_V);
    let stored: Vec<String> = values(&fetched(&r)[0].3)
        .into_iter()
        .map(|(_, v)| String::from_utf8(v).unwrap())
        .collect();
    let expected: Vec<String> = (0..300).map(|i| format!("{i}")).collect();
    assert_eq!(stored, expected, "appended in the order sent");
    let mut offsets = OffsetFetchRequest::default();
    offsets.group_id = GroupId(StrBytes::from_static_str("in-order"));
    offsets.topics = None;
    let got = c.call(&offsets, 2);
    assert_eq!(
        got.topics[0].partitions[0].committed_offset, 300,
        "the last commit stands"
    );
    passes(server);
}

#[test]
fn ten_thousand_long_polls_over_a_thousand_connections_park_without_a_thread_each() {
    const CONNECTIONS: usize = 1_000;
    const EACH: usize = 10;
    let server = server_with(
        LiveConfig::one_broker(),
        &[("polled", 8)],
        Limits::default(),
    );
    let addr = server.addrs()[0];
    let cluster = server.cluster().clone();
    let mut clients: Vec<Client> = (0..CONNECTIONS).map(|_| Client::connect(addr)).collect();
    let mut sent = Vec::new();
    for (i, c) in clients.iter_mut().enumerate() {
        let ids: Vec<i32> = (0..EACH)
            .map(|j| {
                let partition = ((i * EACH + j) % 8) as i32;
                c.send(&fetch("polled", &[(partition, 0)], 60_000, 1), FETCH_V)
            })
            .collect();
        sent.push(ids);
    }
    let parked = CONNECTIONS * EACH;
    assert!(
        eventually(|| cluster.pending() == parked),
        "{} of {parked} parked",
        cluster.pending()
    );
    // One append per partition wakes them all.
    let mut producer = Client::connect(addr);
    let parts: Vec<(i32, Bytes)> = (0..8).map(|p| (p, batch(&[b"wake"]))).collect();
    producer.call(&produce_request("polled", &parts, -1, 5000), PRODUCE_V);
    for (c, ids) in clients.iter_mut().zip(&sent) {
        for &id in ids {
            let (got, r) = c.recv::<FetchRequest>(FETCH_V);
            assert_eq!(got, id);
            let (_, error, _, records) = &fetched(&r)[0];
            assert_eq!(*error, 0);
            assert_eq!(values(records), vec![(0, b"wake".to_vec())]);
        }
    }
    assert_eq!((cluster.pending(), cluster.watched()), (0, 0));
    passes(server);
}

#[test]
fn acks_all_below_min_insync_is_refused_and_what_waited_times_out() {
    use broker_sim::config::Fault;
    // Both followers lag from the start; after 300 ms without catching up
    // they leave the ISR (checked every 100 ms), leaving the leader alone,
    // below min.insync.replicas = 2.
    let slow = |broker| Fault::SlowFollower {
        broker,
        from: Duration::ZERO,
        until: Duration::from_secs(3600),
        delay: Duration::from_secs(60),
    };
    let server = server_with(
        LiveConfig {
            replica_lag: Duration::from_millis(300),
            faults: vec![slow(0), slow(1), slow(2)],
            ..LiveConfig::default()
        },
        &[("thin", 1)],
        Limits::default(),
    );
    let mut c = leader(&server, "thin", 0);
    // Parked: the followers do not have it; then the ISR shrinks below
    // min.insync, where the high watermark stands still, as in Kafka. So
    // it is not acknowledged, and waits out its timeout.
    let start = Instant::now();
    let r = c.call(
        &produce_request("thin", &[(0, batch(&[b"x"]))], -1, 2_000),
        PRODUCE_V,
    );
    assert_eq!(
        partition_errors(&r)[0].1,
        ResponseError::RequestTimedOut.code()
    );
    assert!(start.elapsed() >= Duration::from_secs(2));
    let log_of = || {
        let t = server.cluster().topic("thin").expect("the topic exists");
        let log = t.partitions[0].log.lock();
        (log.isr.len(), log.hw, log.log_end())
    };
    assert_eq!(log_of(), (1, 0, 1));
    // Now refused before the append.
    let r = c.call(
        &produce_request("thin", &[(0, batch(&[b"y"]))], -1, 30_000),
        PRODUCE_V,
    );
    assert_eq!(
        partition_errors(&r)[0].1,
        ResponseError::NotEnoughReplicas.code()
    );
    // acks=1 does not need the ISR, but what it appends is not readable
    // until enough replicas have it.
    let r = c.call(
        &produce_request("thin", &[(0, batch(&[b"z"]))], 1, 30_000),
        PRODUCE_V,
    );
    assert_eq!(partition_errors(&r)[0].1, 0);
    assert_eq!(log_of(), (1, 0, 2));
    passes(server);
}

#[test]
fn an_idempotent_producer_gets_an_id_and_a_resent_batch_is_stored_once() {
    let server = server_with(LiveConfig::one_broker(), &[("idem", 1)], Limits::default());
    let mut c = leader(&server, "idem", 0);
    let init = |c: &mut Client, transactional: Option<&str>| {
        let mut r = InitProducerIdRequest::default();
        r.transactional_id =
            transactional.map(|t| TransactionalId(StrBytes::from_string(t.to_string())));
        r.transaction_timeout_ms = 60_000;
        let a = c.call(&r, 4);
        (a.error_code, a.producer_id.0, a.producer_epoch)
    };
    let (error, id, epoch) = init(&mut c, None);
    assert_eq!((error, epoch), (0, 0));
    assert!(id >= 0);
    assert_ne!(init(&mut c, None).1, id, "a fresh id each time");
    // A transactional id gets an id of its own, at epoch 0.
    let (error, tx, epoch) = init(&mut c, Some("tx"));
    assert_eq!((error, epoch), (0, 0));
    assert!(tx != id);
    assert_eq!(
        init(&mut c, Some("")).0,
        ResponseError::InvalidRequest.code()
    );
    let mut send = |values: &[&[u8]], epoch: i16, seq: i32| {
        let r = c.call(
            &produce_request(
                "idem",
                &[(0, idempotent_batch(values, id, epoch, seq))],
                -1,
                5_000,
            ),
            PRODUCE_V,
        );
        let (_, error, base) = partition_errors(&r)[0];
        (error, base)
    };
    assert_eq!(send(&[b"a", b"b"], 0, 0), (0, 0));
    // Sent again (its answer lost, say): the same offsets, nothing stored.
    assert_eq!(send(&[b"a", b"b"], 0, 0), (0, 0));
    assert_eq!(send(&[b"c"], 0, 2), (0, 2));
    assert_eq!(
        send(&[b"x"], 0, 5),
        (ResponseError::OutOfOrderSequenceNumber.code(), -1)
    );
    // A new epoch starts at 0 and fences the old one.
    assert_eq!(send(&[b"d"], 1, 0), (0, 3));
    assert_eq!(
        send(&[b"x"], 0, 3),
        (ResponseError::InvalidProducerEpoch.code(), -1)
    );
    let r = c.call(&fetch("idem", &[(0, 0)], 0, 0), FETCH_V);
    let read: Vec<Vec<u8>> = values(&fetched(&r)[0].3)
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(
        read,
        [b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]
    );
    assert_eq!(
        server
            .cluster()
            .checks
            .duplicates
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    passes(server);
}

#[test]
fn create_topics_creates_what_it_can_and_says_why_for_the_rest() {
    let server = server(Duration::ZERO, &[("orders", 1)]);
    let mut c = Client::connect(server.addrs()[1]);
    let topic = |n: &str, partitions: i32, rf: i16| {
        let mut t = CreatableTopic::default();
        t.name = name(n);
        t.num_partitions = partitions;
        t.replication_factor = rf;
        t
    };
    let mut manual = topic("manual", -1, -1);
    manual.assignments = [(0, [2, 1]), (1, [1, 0])]
        .into_iter()
        .map(|(i, brokers)| {
            let mut a = CreatableReplicaAssignment::default();
            a.partition_index = i;
            a.broker_ids = brokers.into_iter().map(BrokerId).collect();
            a
        })
        .collect();
    let mut bad_assignment = topic("bad-assignment", -1, -1);
    bad_assignment.assignments = manual.assignments.clone();
    bad_assignment.assignments[1].partition_index = 0;
    let mut configured = topic("configured", 1, 1);
    let mut config = CreatableTopicConfig::default();
    config.name = StrBytes::from_static_str("retention.ms");
    configured.configs = vec![config];
    let mut r = CreateTopicsRequest::default();
    r.timeout_ms = 5_000;
    r.topics = vec![
        topic("wide", 4, 2),
        topic("defaults", -1, -1),
        manual,
        topic("twice", 1, 1),
        topic("twice", 1, 1),
        topic("orders", 1, 1),
        topic("bad name!", 1, 1),
        topic("too-many-replicas", 1, 9),
        topic("no-partitions", 0, 1),
        configured,
        bad_assignment,
    ];
    let answer = c.call(&r, 5);
    let got: Vec<(String, i16, i32, i16)> = answer
        .topics
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.error_code,
                t.num_partitions,
                t.replication_factor,
            )
        })
        .collect();
    let e = |e: ResponseError| e.code();
    let default_partitions = server.cluster().cfg.partitions as i32;
    assert_eq!(
        got,
        [
            ("wide".into(), 0, 4, 2),
            ("defaults".into(), 0, default_partitions, 3),
            ("manual".into(), 0, 2, 2),
            ("twice".into(), e(ResponseError::InvalidRequest), -1, -1),
            ("twice".into(), e(ResponseError::InvalidRequest), -1, -1),
            (
                "orders".into(),
                e(ResponseError::TopicAlreadyExists),
                -1,
                -1
            ),
            (
                "bad name!".into(),
                e(ResponseError::InvalidTopicException),
                -1,
                -1
            ),
            (
                "too-many-replicas".into(),
                e(ResponseError::InvalidReplicationFactor),
                -1,
                -1
            ),
            (
                "no-partitions".into(),
                e(ResponseError::InvalidPartitions),
                -1,
                -1
            ),
            ("configured".into(), e(ResponseError::InvalidConfig), -1, -1),
            (
                "bad-assignment".into(),
                e(ResponseError::InvalidReplicaAssignment),
                -1,
                -1
            ),
        ]
    );
    // A refusal says why; a success says nothing (null, as Kafka's).
    assert!(answer.topics[3].error_message.is_some());
    assert_eq!(answer.topics[0].error_message, None);
    let cluster = server.cluster();
    let leaders = |t: &str| -> Vec<(Option<u32>, Vec<u32>)> {
        cluster
            .topic(t)
            .unwrap()
            .partitions
            .iter()
            .map(|p| {
                let log = p.log.lock();
                (log.leader, log.replicas.clone())
            })
            .collect()
    };
    assert_eq!(
        leaders("manual"),
        [(Some(2), vec![2, 1]), (Some(1), vec![1, 0])]
    );
    assert_eq!(leaders("wide").len(), 4);
    for name in ["twice", "bad-assignment", "configured", "no-partitions"] {
        assert!(cluster.topic(name).is_none(), "{name}");
    }
    // Validation only: answered as if created, nothing created.
    let mut r = CreateTopicsRequest::default();
    r.topics = vec![topic("checked", 2, 1)];
    r.validate_only = true;
    let answer = c.call(&r, 5);
    assert_eq!(answer.topics[0].error_code, 0);
    assert!(cluster.topic("checked").is_none());
    // A new topic takes produces at once.
    let mut c = leader(&server, "wide", 3);
    let r = c.call(
        &produce_request("wide", &[(3, batch(&[b"x"]))], -1, 5_000),
        PRODUCE_V,
    );
    assert_eq!(partition_errors(&r)[0], (3, 0, 0));
    passes(server);
}

#[test]
fn deleting_a_topic_answers_what_is_parked_on_it_and_forgets_it() {
    // Followers 10 s behind: an acks=all produce stays parked.
    let server = server(Duration::from_secs(10), &[("doomed", 1), ("kept", 1)]);
    let mut producer = leader(&server, "doomed", 0);
    let mut fetcher = leader(&server, "doomed", 0);
    let parked_produce = producer.send(
        &produce_request("doomed", &[(0, batch(&[b"x"]))], -1, 30_000),
        PRODUCE_V,
    );
    let parked_fetch = fetcher.send(&fetch("doomed", &[(0, 0)], 30_000, 1 << 20), FETCH_V);
    // A group's committed offsets in both topics (a simple consumer's
    // commit, generation -1).
    let group = "offsets-keeper";
    let mut find = FindCoordinatorRequest::default();
    find.key = StrBytes::from_static_str(group);
    let found = Client::connect(server.addrs()[0]).call(&find, 2);
    // Kafka's message before v4, success included.
    assert_eq!(found.error_message.as_deref(), Some("NONE"));
    let mut coordinator = Client::connect(
        format!("{}:{}", found.host.as_str(), found.port)
            .parse()
            .unwrap(),
    );
    let commit = commit_request(group, -1, "", &[("doomed", 0, 7), ("kept", 0, 7)]);
    assert!(coordinator
        .call(&commit, 2)
        .topics
        .iter()
        .all(|t| t.partitions[0].error_code == 0));
    std::thread::sleep(Duration::from_millis(200));
    let mut delete = DeleteTopicsRequest::default();
    delete.topic_names = vec![name("doomed"), name("never-was")];
    delete.timeout_ms = 5_000;
    let start = Instant::now();
    let deleted = Client::connect(server.addrs()[2]).call(&delete, 4);
    let errors: Vec<i16> = deleted.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(
        errors,
        [0, ResponseError::UnknownTopicOrPartition.code()],
        "{deleted:?}"
    );
    // What was parked on it is answered at once, not at its timeout.
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    let (id, r) = producer.recv::<ProduceRequest>(PRODUCE_V);
    assert_eq!((id, partition_errors(&r)[0].1), (parked_produce, unknown));
    let (id, r) = fetcher.recv::<FetchRequest>(FETCH_V);
    assert_eq!((id, fetched(&r)[0].1), (parked_fetch, unknown));
    assert!(start.elapsed() < Duration::from_secs(5));
    // Gone from Metadata (nothing creates it again unasked), refused to
    // produce, and its offsets forgotten; the other topic's stay.
    let mut m = MetadataRequest::default();
    m.topics = None;
    let topics = Client::connect(server.addrs()[0])
        .call(&m, METADATA_V)
        .topics;
    let names: Vec<String> = topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().0.to_string())
        .collect();
    assert_eq!(names, ["kept"]);
    let r = producer.call(
        &produce_request("doomed", &[(0, batch(&[b"y"]))], -1, 5_000),
        PRODUCE_V,
    );
    assert_eq!(partition_errors(&r)[0].1, unknown);
    let mut fetch_offsets = OffsetFetchRequest::default();
    fetch_offsets.group_id = GroupId(StrBytes::from_static_str(group));
    fetch_offsets.topics = None;
    let committed: Vec<String> = coordinator
        .call(&fetch_offsets, 2)
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .collect();
    assert_eq!(committed, ["kept"]);
    passes(server);
}

#[test]
fn list_offsets_finds_offsets_by_time() {
    let server = server_with(LiveConfig::one_broker(), &[("timed", 1)], Limits::default());
    let mut c = leader(&server, "timed", 0);
    let records = timed_batch(&[(1_000, b"a"), (3_000, b"b"), (2_000, b"c")]);
    let r = c.call(
        &produce_request("timed", &[(0, records)], -1, 5_000),
        PRODUCE_V,
    );
    assert_eq!(partition_errors(&r)[0], (0, 0, 0));
    let at = |c: &mut Client, timestamp: i64, version: i16| {
        let mut p = ListOffsetsPartition::default();
        p.timestamp = timestamp;
        let mut t = ListOffsetsTopic::default();
        t.name = name("timed");
        t.partitions = vec![p];
        let mut r = ListOffsetsRequest::default();
        r.replica_id = BrokerId(-1);
        r.topics = vec![t];
        let a = &c.call(&r, version).topics[0].partitions[0];
        (a.error_code, a.offset, a.timestamp)
    };
    assert_eq!(at(&mut c, 0, 5), (0, 0, 1_000));
    assert_eq!(at(&mut c, 1_500, 5), (0, 1, 3_000));
    assert_eq!(at(&mut c, 3_001, 5), (0, -1, -1), "none that late");
    assert_eq!(at(&mut c, -2, 5), (0, 0, -1), "earliest");
    assert_eq!(at(&mut c, -1, 5), (0, 3, -1), "latest");
    assert_eq!(at(&mut c, -3, 7), (0, 1, 3_000), "the largest timestamp");
    let invalid = ResponseError::InvalidRequest.code();
    assert_eq!(at(&mut c, -3, 6), (invalid, -1, -1), "from v7 only");
    assert_eq!(at(&mut c, -7, 7), (invalid, -1, -1));
    // A partition asked for twice, even under two entries of its topic,
    // is answered INVALID_REQUEST each time, as Kafka answers it; the
    // others in the request are answered.
    let asked = |partitions: &[i32]| {
        let mut t = ListOffsetsTopic::default();
        t.name = name("timed");
        t.partitions = (partitions.iter())
            .map(|&i| {
                let mut p = ListOffsetsPartition::default();
                p.partition_index = i;
                p.timestamp = -1;
                p
            })
            .collect();
        t
    };
    let mut r = ListOffsetsRequest::default();
    r.replica_id = BrokerId(-1);
    r.topics = vec![asked(&[0, 1]), asked(&[0])];
    let answered: Vec<(i32, i16, i64)> = (c.call(&r, 5).topics.iter())
        .flat_map(|t| t.partitions.iter())
        .map(|a| (a.partition_index, a.error_code, a.offset))
        .collect();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(
        answered,
        [(0, invalid, -1), (1, unknown, -1), (0, invalid, -1)]
    );
    passes(server);
}

#[test]
fn a_topic_made_after_a_crash_is_led_and_replicated_by_live_brokers_only() {
    use broker_sim::config::Fault;
    let server = server_with(
        LiveConfig {
            faults: vec![Fault::Crash {
                broker: 1,
                at: Duration::from_millis(100),
            }],
            ..LiveConfig::default()
        },
        &[],
        Limits::default(),
    );
    let cluster = server.cluster();
    assert!(eventually(|| !cluster.brokers[1]
        .alive
        .load(std::sync::atomic::Ordering::Acquire)));
    // One topic by CreateTopics, one on first use.
    let mut t = CreatableTopic::default();
    t.name = name("after");
    t.num_partitions = 6;
    t.replication_factor = 3;
    let mut r = CreateTopicsRequest::default();
    r.topics = vec![t];
    let created = Client::connect(server.addrs()[0]).call(&r, 5);
    assert_eq!(created.topics[0].error_code, 0);
    leader(&server, "on-first-use", 0);
    for topic in ["after", "on-first-use"] {
        for p in &cluster.topic(topic).unwrap().partitions {
            let log = p.log.lock();
            assert!(
                matches!(log.leader, Some(0 | 2)),
                "{topic}: {:?}",
                log.leader
            );
            assert!(!log.isr.contains(&1), "{topic}: {:?}", log.isr);
            assert_eq!(log.replicas.len(), 3, "the dead broker stays a replica");
        }
        // acks=all is answered: the live replicas make min.insync.
        for index in 0..cluster.topic(topic).unwrap().partitions.len() as i32 {
            let mut c = leader(&server, topic, index);
            let r = c.call(
                &produce_request(topic, &[(index, batch(&[b"x"]))], -1, 10_000),
                PRODUCE_V,
            );
            assert_eq!(partition_errors(&r)[0], (index, 0, 0), "{topic}");
        }
    }
    passes(server);
}

/// Whether the server ended the connection without sending a byte more
/// (within 10 s).
fn closed_without_an_answer(c: &mut Client) -> bool {
    use std::io::Read;
    c.stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut byte = [0u8; 1];
    match c.stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => panic!("an answer came"),
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

#[test]
fn a_crashed_broker_closes_its_connections_unanswered_and_refuses_new_ones() {
    // Followers that never catch up: an acks=all produce stays parked.
    let server = server(Duration::from_secs(3600), &[("orders", 3)]);
    let cluster = server.cluster().clone();
    let dead = server.addrs()[1];
    let index = (0..3)
        .find(|&i| leader(&server, "orders", i).stream.peer_addr().unwrap() == dead)
        .expect("broker 1 leads a partition");
    let mut parked = Client::connect(dead);
    parked.send(
        &produce_request("orders", &[(index, batch(&[b"x"]))], -1, 60_000),
        PRODUCE_V,
    );
    parked.send(&fetch("orders", &[(index, 1)], 60_000, 1), FETCH_V);
    let mut idle = Client::connect(dead);
    assert!(eventually(|| cluster.pending() == 2));
    cluster.crash(1);
    // Both parked requests are answered inside at once (the partition moved),
    // and neither answer goes out.
    assert!(closed_without_an_answer(&mut parked));
    assert!(closed_without_an_answer(&mut idle));
    assert!(eventually(|| cluster.pending() == 0));
    assert!(eventually(|| std::net::TcpStream::connect(dead).is_err()));
    // The others serve on, and no longer name broker 1.
    let mut c = Client::connect(server.addrs()[0]);
    let brokers: Vec<i32> = c
        .call(&MetadataRequest::default(), METADATA_V)
        .brokers
        .iter()
        .map(|b| b.node_id.0)
        .collect();
    assert_eq!(brokers, [0, 2]);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    let count = |what: &str| report.count(what).unwrap();
    assert_eq!(count("responses to closed"), 2);
}

/// InitProducerId for transactional id `id` with `timeout_ms`: (error,
/// producer id, epoch).
/// The address of transactional id `id`'s coordinator, found as a
/// group's is.
fn txn_coordinator(c: &mut Client, id: &str) -> String {
    let mut find = FindCoordinatorRequest::default();
    find.key = StrBytes::from_string(id.to_string());
    find.key_type = 1;
    let found = c.call(&find, 2);
    assert_eq!(found.error_code, 0);
    format!("{}:{}", found.host.as_str(), found.port)
}

fn init_txn(c: &mut Client, id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = Some(TransactionalId(StrBytes::from_string(id.to_string())));
    r.transaction_timeout_ms = timeout_ms;
    let a = c.call(&r, 4);
    (a.error_code, a.producer_id.0, a.producer_epoch)
}

/// AddPartitionsToTxn of `topic`'s `partitions` at `version`: each
/// partition's error.
fn add_partitions(
    c: &mut Client,
    id: &str,
    producer: (i64, i16),
    topic: &str,
    partitions: &[i32],
    version: i16,
) -> Vec<i16> {
    let mut t =
        kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
    t.name = name(topic);
    t.partitions = partitions.to_vec();
    let mut r = AddPartitionsToTxnRequest::default();
    r.v3_and_below_transactional_id = TransactionalId(StrBytes::from_string(id.to_string()));
    r.v3_and_below_producer_id = ProducerId(producer.0);
    r.v3_and_below_producer_epoch = producer.1;
    r.v3_and_below_topics = vec![t];
    c.call(&r, version).results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect()
}

fn end_txn(c: &mut Client, id: &str, producer: (i64, i16), commit: bool) -> i16 {
    let mut r = EndTxnRequest::default();
    r.transactional_id = TransactionalId(StrBytes::from_string(id.to_string()));
    r.producer_id = ProducerId(producer.0);
    r.producer_epoch = producer.1;
    r.committed = commit;
    c.call(&r, 3).error_code
}

/// A fetch of partition 0 from `offset` at `isolation`: (last stable
/// offset, the aborted transactions as (producer id, first offset), the
/// values read).
fn read_txn(
    c: &mut Client,
    topic: &str,
    offset: i64,
    isolation: i8,
) -> (i64, Vec<(i64, i64)>, Vec<Vec<u8>>) {
    let mut r = fetch(topic, &[(0, offset)], 0, 0);
    r.isolation_level = isolation;
    let got = c.call(&r, FETCH_V);
    let p = &got.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let aborted = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let read = values(&p.records.clone().unwrap_or_default())
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    (p.last_stable_offset, aborted, read)
}

#[test]
fn a_transactions_records_are_stable_once_its_marker_is_written_and_replicated() {
    let server = server(Duration::from_millis(2), &[("ledger", 1)]);
    // The coordinator of a transactional id, as a group's is found.
    let mut c = Client::connect(server.addrs()[0]);
    let coordinator = txn_coordinator(&mut c, "payments");
    let mut tc = Client::connect(coordinator.parse().unwrap());
    for &addr in server.addrs() {
        if addr.to_string() != coordinator {
            let e = init_txn(&mut Client::connect(addr), "payments", 60_000).0;
            assert_eq!(e, ResponseError::NotCoordinator.code());
        }
    }
    assert_eq!(
        init_txn(&mut tc, "payments", 16 * 60_000).0,
        ResponseError::InvalidTransactionTimeout.code()
    );
    let (error, pid, epoch) = init_txn(&mut tc, "payments", 60_000);
    assert_eq!((error, epoch), (0, 0));
    let mut leader = leader(&server, "ledger", 0);
    let at = leader.stream.peer_addr().unwrap();
    let send = |c: &mut Client, values: &[&[u8]], epoch: i16, seq: i32| {
        let batch = transactional_batch(values, pid, epoch, seq);
        partition_errors(&c.call(
            &produce_request("ledger", &[(0, batch)], -1, 5_000),
            PRODUCE_V,
        ))[0]
    };
    // Not before the partition is in the transaction.
    assert_eq!(
        send(&mut leader, &[b"early"], 0, 0).1,
        ResponseError::InvalidTxnState.code()
    );
    // A partition that does not exist: none is added.
    assert_eq!(
        add_partitions(&mut tc, "payments", (pid, 0), "ledger", &[0, 7], 3),
        [
            ResponseError::OperationNotAttempted.code(),
            ResponseError::UnknownTopicOrPartition.code()
        ]
    );
    assert_eq!(
        add_partitions(&mut tc, "payments", (pid, 0), "ledger", &[0], 3),
        [0]
    );
    c.call(
        &produce_request("ledger", &[(0, batch(&[b"plain"]))], -1, 5_000),
        PRODUCE_V,
    );
    assert_eq!(send(&mut leader, &[b"a1", b"a2"], 0, 0), (0, 0, 1));
    // Replicated (acks=all answered), but open: a committed reader stops
    // before it; another reads it.
    let (stable, aborted, read) = read_txn(&mut leader, "ledger", 0, 1);
    assert_eq!(
        (stable, aborted, read),
        (1, vec![], vec![b"plain".to_vec()])
    );
    assert_eq!(read_txn(&mut leader, "ledger", 0, 0).2.len(), 3);
    assert_eq!(latest_at(&mut leader, "ledger", 1), 1);
    assert_eq!(latest_at(&mut leader, "ledger", 0), 3);
    // Aborted: once the marker is replicated, a committed reader gets the
    // records with the span to skip them by.
    assert_eq!(end_txn(&mut tc, "payments", (pid, 0), false), 0);
    assert!(eventually(|| read_txn(
        &mut Client::connect(at),
        "ledger",
        0,
        1
    )
    .0 == 4));
    let (_, aborted, read) = read_txn(&mut leader, "ledger", 0, 1);
    assert_eq!(aborted, vec![(pid, 1)]);
    assert_eq!(
        read.len(),
        4,
        "the records and the marker; the reader skips them"
    );
    // A retry of the same end is answered as it was; the other is not.
    assert_eq!(end_txn(&mut tc, "payments", (pid, 0), false), 0);
    assert_eq!(
        end_txn(&mut tc, "payments", (pid, 0), true),
        ResponseError::InvalidTxnState.code()
    );
    // A new instance fences the old one: PRODUCER_FENCED from v2,
    // INVALID_PRODUCER_EPOCH before.
    let (_, same, epoch) = init_txn(&mut tc, "payments", 300);
    assert_eq!((same, epoch), (pid, 1));
    assert_eq!(
        add_partitions(&mut tc, "payments", (pid, 0), "ledger", &[0], 3),
        [ResponseError::ProducerFenced.code()]
    );
    assert_eq!(
        add_partitions(&mut tc, "payments", (pid, 0), "ledger", &[0], 1),
        [ResponseError::InvalidProducerEpoch.code()]
    );
    assert_eq!(
        send(&mut leader, &[b"zombie"], 0, 2).1,
        ResponseError::InvalidProducerEpoch.code()
    );
    // Committed at epoch 1 within its 300 ms timeout, then one left open
    // past it: aborted by the coordinator, the producer fenced.
    assert_eq!(
        add_partitions(&mut tc, "payments", (pid, 1), "ledger", &[0], 3),
        [0]
    );
    assert_eq!(send(&mut leader, &[b"b1"], 1, 0).1, 0);
    assert_eq!(end_txn(&mut tc, "payments", (pid, 1), true), 0);
    assert_eq!(
        add_partitions(&mut tc, "payments", (pid, 1), "ledger", &[0], 3),
        [0]
    );
    assert_eq!(send(&mut leader, &[b"late"], 1, 1).1, 0);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        end_txn(&mut tc, "payments", (pid, 1), true),
        ResponseError::ProducerFenced.code()
    );
    assert!(eventually(|| {
        let mut c = Client::connect(at);
        let (stable, aborted, _) = read_txn(&mut c, "ledger", 0, 1);
        stable == latest_at(&mut c, "ledger", 0) && aborted.len() == 2
    }));
    let committed: Vec<Vec<u8>> = read_txn(&mut leader, "ledger", 0, 1).2;
    assert!(committed.contains(&b"b1".to_vec()));
    passes(server);
}

/// WriteTxnMarkers of one ABORT marker for `producer` (id, epoch) at
/// `coordinator_epoch` to `ledger`'s `partitions`: each partition's error,
/// in request order.
fn abort_marker(
    c: &mut Client,
    producer: (i64, i16),
    coordinator_epoch: i32,
    partitions: &[i32],
) -> Vec<(i32, i16)> {
    use kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    let mut t = WritableTxnMarkerTopic::default();
    t.name = name("ledger");
    t.partition_indexes = partitions.to_vec();
    let mut m = WritableTxnMarker::default();
    m.producer_id = ProducerId(producer.0);
    m.producer_epoch = producer.1;
    m.transaction_result = false;
    m.coordinator_epoch = coordinator_epoch;
    m.topics = vec![t];
    let mut r = WriteTxnMarkersRequest::default();
    r.markers = vec![m];
    let answer = c.call(&r, 1);
    assert_eq!(answer.markers.len(), 1);
    assert_eq!(answer.markers[0].producer_id.0, producer.0);
    assert_eq!(answer.markers[0].topics.len(), 1);
    (answer.markers[0].topics[0].partitions.iter())
        .map(|p| (p.partition_index, p.error_code))
        .collect()
}

/// An operator aborts a transaction a partition holds open: the marker is
/// checked as Kafka's leader checks one, answered only once every in-sync
/// replica has it, and committed readers move past the records it aborts.
#[test]
fn an_operator_aborts_an_open_transaction_with_a_marker_answered_once_replicated() {
    let latency = Duration::from_millis(200);
    let server = server(latency, &[("ledger", 1)]);
    let mut c = Client::connect(server.addrs()[0]);
    let mut tc = Client::connect(txn_coordinator(&mut c, "stuck").parse().unwrap());
    let (error, pid, epoch) = init_txn(&mut tc, "stuck", 60_000);
    assert_eq!((error, epoch), (0, 0));
    assert_eq!(
        add_partitions(&mut tc, "stuck", (pid, 0), "ledger", &[0], 3),
        [0]
    );
    let mut leader = leader(&server, "ledger", 0);
    let at = leader.stream.peer_addr().unwrap();
    c.call(
        &produce_request("ledger", &[(0, batch(&[b"plain"]))], -1, 5_000),
        PRODUCE_V,
    );
    let open = transactional_batch(&[b"t1", b"t2"], pid, 0, 0);
    let produced = leader.call(
        &produce_request("ledger", &[(0, open)], -1, 5_000),
        PRODUCE_V,
    );
    assert_eq!(partition_errors(&produced), [(0, 0, 1)]);
    assert_eq!(read_txn(&mut leader, "ledger", 0, 1).0, 1, "held open");
    // Refused: from a broker that does not lead it, for a partition that
    // does not exist, from an older producer epoch.
    let other = *server.addrs().iter().find(|&&a| a != at).unwrap();
    assert_eq!(
        abort_marker(&mut Client::connect(other), (pid, 0), 0, &[0]),
        [(0, ResponseError::NotLeaderOrFollower.code())]
    );
    assert_eq!(
        abort_marker(&mut leader, (pid, -1), 0, &[0, 7]),
        [
            (0, ResponseError::InvalidProducerEpoch.code()),
            (7, ResponseError::UnknownTopicOrPartition.code())
        ]
    );
    assert_eq!(
        read_txn(&mut leader, "ledger", 0, 1).0,
        1,
        "nothing written"
    );
    // Aborted: answered once the followers have the marker, so a
    // committed reader is past it at once, with the span to skip.
    let started = Instant::now();
    assert_eq!(abort_marker(&mut leader, (pid, 0), 0, &[0]), [(0, 0)]);
    assert!(started.elapsed() >= latency, "{:?}", started.elapsed());
    let (stable, aborted, read) = read_txn(&mut leader, "ledger", 0, 1);
    assert_eq!((stable, aborted), (4, vec![(pid, 1)]));
    assert_eq!(
        read.len(),
        4,
        "the records and the marker; the reader skips them"
    );
    // The producer's last marker here came from coordinator epoch 0: an
    // older one is fenced.
    assert_eq!(
        abort_marker(&mut leader, (pid, 0), -1, &[0]),
        [(0, ResponseError::TransactionCoordinatorFenced.code())]
    );
    // The coordinator still ends the transaction it knows of; its marker
    // finds nothing open here, and the aborted records stay aborted.
    assert_eq!(end_txn(&mut tc, "stuck", (pid, 0), true), 0);
    assert!(eventually(|| {
        let mut c = Client::connect(at);
        read_txn(&mut c, "ledger", 0, 1).0 == latest_at(&mut c, "ledger", 0)
    }));
    let (_, aborted, _) = read_txn(&mut leader, "ledger", 0, 1);
    assert_eq!(aborted, vec![(pid, 1)]);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    let written = (report.counts.iter()).find(|(what, _)| what.contains("markers written"));
    assert_eq!(written.map(|(_, n)| *n), Some(1), "{}", report.human());
}

/// A transaction whose coordinator crashes is not timed out while the
/// crash goes unnoticed: nothing runs at a broker that is gone, and
/// Kafka's next coordinator aborts it only once it has taken over. Its
/// timeout is a third of that window here.
#[test]
fn a_transaction_outliving_its_timeout_is_aborted_only_once_its_coordinator_is_fenced() {
    let (window, waited) = abort_after_a_coordinator_crash(|_, _, _| true);
    assert!(
        waited >= window,
        "aborted {waited:?} after its coordinator crashed, before it was fenced"
    );
}

/// A coordinator back before its fencing is fenced first, and the
/// transaction that outlived its timeout meanwhile is aborted then.
#[test]
fn a_transaction_outliving_its_timeout_is_aborted_when_its_coordinator_comes_back() {
    let back = Duration::from_millis(1500);
    let (window, waited) = abort_after_a_coordinator_crash(|cluster, home, crashed| {
        std::thread::sleep(back.saturating_sub(crashed.elapsed()));
        let expired = &cluster.checks.txns_expired;
        assert_eq!(
            expired.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "aborted while its coordinator was down"
        );
        cluster.restart(home);
        false
    });
    assert!(
        waited >= back && waited < window,
        "aborted {waited:?} after its coordinator crashed, back after {back:?}"
    );
}

/// Where the next coordinator has crashed too, unfenced, the transaction
/// waits for that one's fencing as well.
#[test]
fn a_transaction_whose_next_coordinator_crashed_too_waits_for_its_fencing() {
    let later = Duration::from_secs(1);
    let (window, waited) = abort_after_a_coordinator_crash(|cluster, home, crashed| {
        // The brokers that coordinate an id come in order after its first.
        let next = (home + 1) % 3;
        std::thread::sleep(later.saturating_sub(crashed.elapsed()));
        cluster.crash(next);
        true
    });
    assert!(
        waited >= window + later,
        "aborted {waited:?} after its coordinator crashed, before the next one was fenced"
    );
}

/// Begins a transaction with a timeout of a third of the fencing window,
/// crashes its coordinator, runs `then` (with the cluster, the crashed
/// coordinator and when it crashed), and returns the window and how long
/// after the crash the transaction was aborted. Nothing aborts it while
/// its coordinator is down: checked when `then` returns, if it leaves the
/// coordinator down (`true`); one that restarts it checks before that,
/// since the abort may follow the restart at once.
fn abort_after_a_coordinator_crash(
    then: impl FnOnce(&LiveCluster, u32, Instant) -> bool,
) -> (Duration, Duration) {
    let window = Duration::from_secs(3);
    let server = server_with(
        LiveConfig {
            broker_session_timeout: window,
            ..LiveConfig::default()
        },
        &[("ledger", 1)],
        Limits::default(),
    );
    let cluster = server.cluster();
    let home = cluster.txn_coordinator("held").expect("a coordinator");
    let mut tc = Client::connect(server.addrs()[home as usize]);
    let timeout = window / 3;
    let (error, pid, epoch) = init_txn(&mut tc, "held", timeout.as_millis() as i32);
    assert_eq!(error, 0);
    assert_eq!(
        add_partitions(&mut tc, "held", (pid, epoch), "ledger", &[0], 3),
        [0]
    );
    let expired = || {
        cluster
            .checks
            .txns_expired
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let crashed = Instant::now();
    cluster.crash(home);
    if then(cluster, home, crashed) {
        assert_eq!(expired(), 0, "aborted while its coordinator was down");
    }
    assert!(eventually(|| expired() == 1), "the transaction is aborted");
    let waited = crashed.elapsed();
    passes(server);
    (window, waited)
}

/// DeleteRecords of `topic`'s partition 0 below `offset`: (error, low
/// watermark, how long the answer took).
fn delete_records(
    c: &mut Client,
    topic: &str,
    offset: i64,
    timeout_ms: i32,
) -> (i16, i64, Duration) {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    let mut p = DeleteRecordsPartition::default();
    p.offset = offset;
    let mut t = DeleteRecordsTopic::default();
    t.name = name(topic);
    t.partitions = vec![p];
    let mut r = DeleteRecordsRequest::default();
    r.topics = vec![t];
    r.timeout_ms = timeout_ms;
    let start = Instant::now();
    let got = c.call(&r, 2);
    let p = &got.topics[0].partitions[0];
    (p.error_code, p.low_watermark, start.elapsed())
}

#[test]
fn delete_records_waits_until_every_live_replica_has_deleted() {
    // Each follower fetches 300 ms after the leader's news.
    let server = server(Duration::from_millis(300), &[("trimmed", 1)]);
    let mut c = leader(&server, "trimmed", 0);
    let records: Vec<Bytes> = (0..4)
        .map(|i| batch(&[format!("r{i}").as_bytes()]))
        .collect();
    for b in &records {
        let r = c.call(
            &produce_request("trimmed", &[(0, b.clone())], -1, 5_000),
            PRODUCE_V,
        );
        assert_eq!(partition_errors(&r)[0].1, 0);
    }
    // Past the high watermark: refused at once.
    let (error, _, took) = delete_records(&mut c, "trimmed", 5, 5_000);
    assert_eq!(error, ResponseError::OffsetOutOfRange.code());
    assert!(took < Duration::from_millis(200));
    // Answered once the followers' next fetches learned the new start.
    let (error, low, took) = delete_records(&mut c, "trimmed", 2, 5_000);
    assert_eq!((error, low), (0, 2));
    assert!(took >= Duration::from_millis(300), "{took:?}");
    // The records below are gone for readers.
    let mut below = fetch("trimmed", &[(0, 1)], 0, 0);
    below.isolation_level = 0;
    let got = c.call(&below, FETCH_V);
    assert_eq!(
        got.responses[0].partitions[0].error_code,
        ResponseError::OffsetOutOfRange.code()
    );
    let from = c.call(&fetch("trimmed", &[(0, 2)], 0, 0), FETCH_V);
    let p = &from.responses[0].partitions[0];
    assert_eq!(p.log_start_offset, 2);
    let read: Vec<i64> = values(&p.records.clone().unwrap_or_default())
        .into_iter()
        .map(|(offset, _)| offset)
        .collect();
    assert_eq!(read, [2, 3]);
    let mut earliest = ListOffsetsPartition::default();
    earliest.timestamp = -2;
    let mut t = ListOffsetsTopic::default();
    t.name = name("trimmed");
    t.partitions = vec![earliest];
    let mut r = ListOffsetsRequest::default();
    r.replica_id = BrokerId(-1);
    r.topics = vec![t];
    assert_eq!(c.call(&r, 5).topics[0].partitions[0].offset, 2);
    // A produce's answer gives the log's start offset too.
    let more = produce_request("trimmed", &[(0, records[0].clone())], -1, 5_000);
    let answer = c.call(&more, PRODUCE_V);
    let p = &answer.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset, p.log_start_offset), (0, 4, 2));
    // A timeout shorter than the followers' fetch: REQUEST_TIMED_OUT, and
    // no low watermark (-1), as Kafka answers.
    let (error, low, took) = delete_records(&mut c, "trimmed", -1, 100);
    assert_eq!((error, low), (ResponseError::RequestTimedOut.code(), -1));
    assert!(took >= Duration::from_millis(100));
    passes(server);
}

#[test]
fn a_partition_past_its_retention_deletes_its_oldest_batches_and_readers_start_after_them() {
    let live = LiveConfig {
        retention_bytes: 1 << 20,
        ..LiveConfig::one_broker()
    };
    let server = server_with(live, &[("kept", 1)], Limits::default());
    let mut c = Client::connect(server.addrs()[0]);
    let value = vec![b'r'; 64 << 10];
    for _ in 0..40 {
        let r = c.call(
            &produce_request("kept", &[(0, batch(&[&value]))], -1, 5_000),
            PRODUCE_V,
        );
        assert_eq!(partition_errors(&r)[0].1, 0);
    }
    let (start, bytes) = {
        let topic = server.cluster().topic("kept").unwrap();
        let log = topic.partitions[0].log.lock();
        (log.log_start, log.bytes)
    };
    // 40 batches of 64 KiB into 1 MiB: the oldest went, whole batches, and
    // what is left stays within the limit.
    assert!(start >= 24, "{start}");
    assert!(bytes <= 1 << 20, "{bytes}");
    let below = c.call(&fetch("kept", &[(0, 0)], 0, 0), FETCH_V);
    assert_eq!(fetched(&below)[0].1, ResponseError::OffsetOutOfRange.code());
    let from = c.call(&fetch("kept", &[(0, start)], 0, 0), FETCH_V);
    let p = &from.responses[0].partitions[0];
    assert_eq!((p.error_code, p.log_start_offset), (0, start));
    assert_eq!(values(&p.records.clone().unwrap_or_default())[0].0, start);
    // The limit is described as the broker's and the topic's setting.
    let (_, configs) = describe_configs(&mut c, 2, "kept", Some(&["retention.bytes"]), 4);
    // 4: the broker's configuration; 5: a long.
    assert_eq!(
        configs,
        [("retention.bytes".into(), "1048576".into(), 4, 5)]
    );
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    let moved = report.count("log starts moved by retention").unwrap();
    assert!(moved >= 2, "{}", report.human());
}

/// DescribeConfigs of one resource: (error, [(name, value, source, type)]).
fn describe_configs(
    c: &mut Client,
    kind: i8,
    name: &str,
    keys: Option<&[&str]>,
    version: i16,
) -> (i16, Vec<(String, String, i8, i8)>) {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let mut d = DescribeConfigsResource::default();
    d.resource_type = kind;
    d.resource_name = StrBytes::from_string(name.to_string());
    d.configuration_keys = keys.map(|k| {
        k.iter()
            .map(|k| StrBytes::from_string(k.to_string()))
            .collect()
    });
    let mut r = DescribeConfigsRequest::default();
    r.resources = vec![d];
    r.include_synonyms = true;
    let got = c.call(&r, version);
    let result = &got.results[0];
    let entries = result
        .configs
        .iter()
        .map(|e| {
            // A topic's own settings can change, the twelve applied and
            // those taken without effect; nothing else can.
            let alterable = kind == 2
                && [
                    "min.insync.replicas",
                    "max.message.bytes",
                    "retention.bytes",
                    "retention.ms",
                    "cleanup.policy",
                    "message.timestamp.type",
                    "compression.type",
                    "message.timestamp.before.max.ms",
                    "message.timestamp.after.max.ms",
                    "compression.gzip.level",
                    "compression.lz4.level",
                    "compression.zstd.level",
                    "segment.bytes",
                    "segment.ms",
                    "segment.jitter.ms",
                    "segment.index.bytes",
                    "index.interval.bytes",
                    "flush.messages",
                    "flush.ms",
                    "file.delete.delay.ms",
                    "preallocate",
                    "delete.retention.ms",
                    "min.compaction.lag.ms",
                    "max.compaction.lag.ms",
                    "min.cleanable.dirty.ratio",
                    "message.downconversion.enable",
                    "unclean.leader.election.enable",
                ]
                .contains(&e.name.as_str());
            assert_eq!(e.read_only, !alterable, "{}", e.name.as_str());
            assert_eq!(e.synonyms.len(), 1, "itself, at its source");
            (
                e.name.to_string(),
                e.value.as_deref().unwrap_or_default().to_string(),
                e.config_source,
                e.config_type,
            )
        })
        .collect();
    (result.error_code, entries)
}

#[test]
fn describe_configs_gives_the_settings_the_cluster_runs_with() {
    let live = LiveConfig {
        min_insync: 1,
        message_max_bytes: 2_000_000,
        ..LiveConfig::default()
    };
    let server = server_with(live, &[("described", 1)], Limits::default());
    let mut c = Client::connect(server.addrs()[1]);
    let (error, topic) = describe_configs(&mut c, 2, "described", None, 4);
    assert_eq!(error, 0);
    let value = |entries: &[(String, String, i8, i8)], name: &str| {
        entries
            .iter()
            .find(|e| e.0 == name)
            .map(|e| (e.1.clone(), e.2, e.3))
    };
    // Its values, where they come from (4: the broker's configuration, 5:
    // a default), their types (3: int, 5: long).
    assert_eq!(
        value(&topic, "min.insync.replicas"),
        Some(("1".into(), 4, 3))
    );
    assert_eq!(
        value(&topic, "max.message.bytes"),
        Some(("2000000".into(), 4, 3))
    );
    assert_eq!(value(&topic, "retention.ms"), Some(("-1".into(), 5, 5)));
    // 1: a boolean.
    assert_eq!(
        value(&topic, "unclean.leader.election.enable"),
        Some(("false".into(), 5, 1))
    );
    // Only the keys asked for; types only from v3.
    let (_, some) = describe_configs(
        &mut c,
        2,
        "described",
        Some(&["cleanup.policy", "nonsense"]),
        2,
    );
    assert_eq!(some, [("cleanup.policy".into(), "delete".into(), 5, 0)]);
    // This broker by its id or none; another broker's id is refused.
    let (error, broker) = describe_configs(&mut c, 4, "1", None, 4);
    assert_eq!(error, 0);
    assert_eq!(value(&broker, "broker.id").map(|v| v.0), Some("1".into()));
    assert_eq!(
        value(&broker, "default.replication.factor").map(|v| v.0),
        Some("3".into())
    );
    assert_eq!(describe_configs(&mut c, 4, "", None, 4).1, broker);
    assert_eq!(
        describe_configs(&mut c, 4, "0", None, 4).0,
        ResponseError::InvalidRequest.code()
    );
    assert_eq!(
        describe_configs(&mut c, 2, "nowhere", None, 4).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(
        describe_configs(&mut c, 8, "1", None, 4).0,
        ResponseError::InvalidRequest.code()
    );
    passes(server);
}

/// CreatePartitions of `topic` to `count`, with `assignments` for the new
/// ones if given: the error.
fn create_partitions(
    c: &mut Client,
    topic: &str,
    count: i32,
    assignments: Option<&[&[i32]]>,
    validate_only: bool,
) -> i16 {
    use kafka_protocol::messages::create_partitions_request::{
        CreatePartitionsAssignment, CreatePartitionsTopic,
    };
    let mut t = CreatePartitionsTopic::default();
    t.name = name(topic);
    t.count = count;
    t.assignments = assignments.map(|all| {
        all.iter()
            .map(|brokers| {
                let mut a = CreatePartitionsAssignment::default();
                a.broker_ids = brokers.iter().map(|&b| BrokerId(b)).collect();
                a
            })
            .collect()
    });
    let mut r = CreatePartitionsRequest::default();
    r.topics = vec![t];
    r.timeout_ms = 5_000;
    r.validate_only = validate_only;
    c.call(&r, 3).results[0].error_code
}

#[test]
fn create_partitions_grows_a_topic_whose_new_partitions_take_records() {
    let server = server(Duration::from_millis(2), &[("growing", 2)]);
    let mut c = Client::connect(server.addrs()[0]);
    let count = || server.cluster().topic("growing").unwrap().partitions.len();
    // Fewer or as many, a wrong replica count, unknown brokers, a topic
    // that is not there: refused, nothing changes.
    assert_eq!(
        create_partitions(&mut c, "growing", 2, None, false),
        ResponseError::InvalidPartitions.code()
    );
    assert_eq!(
        create_partitions(&mut c, "growing", 3, Some(&[&[0, 1]]), false),
        ResponseError::InvalidReplicaAssignment.code()
    );
    assert_eq!(
        create_partitions(&mut c, "growing", 3, Some(&[&[0, 1, 7]]), false),
        ResponseError::InvalidReplicaAssignment.code()
    );
    assert_eq!(
        create_partitions(&mut c, "nowhere", 3, None, false),
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(create_partitions(&mut c, "growing", 4, None, true), 0);
    assert_eq!(count(), 2, "validate_only changes nothing");
    // Two more: one spread, as a new topic's; then one assigned by hand.
    assert_eq!(create_partitions(&mut c, "growing", 3, None, false), 0);
    assert_eq!(
        create_partitions(&mut c, "growing", 4, Some(&[&[2, 0, 1]]), false),
        0
    );
    assert_eq!(count(), 4);
    let log = server.cluster().topic("growing").unwrap().partitions[3]
        .log
        .lock()
        .replicas
        .clone();
    assert_eq!(log, [2, 0, 1]);
    // Clients see them and write to them.
    let mut p3 = leader(&server, "growing", 3);
    let r = p3.call(
        &produce_request("growing", &[(3, batch(&[b"new"]))], -1, 5_000),
        PRODUCE_V,
    );
    assert_eq!(partition_errors(&r)[0], (3, 0, 0));
    passes(server);
}

/// DescribeLogDirs v4 of broker `b`, for `asked` (every partition for
/// `None`): (log dir, [(topic, partition, size)]), sorted.
fn log_dirs(
    server: &Server,
    b: usize,
    asked: Option<Vec<(&str, Vec<i32>)>>,
) -> (String, Vec<(String, i32, i64)>) {
    use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
    use kafka_protocol::messages::DescribeLogDirsRequest;
    let mut r = DescribeLogDirsRequest::default();
    r.topics = asked.map(|topics| {
        topics
            .into_iter()
            .map(|(topic, partitions)| {
                let mut t = DescribableLogDirTopic::default();
                t.topic = name(topic);
                t.partitions = partitions;
                t
            })
            .collect()
    });
    let got = Client::connect(server.addrs()[b]).call(&r, 4);
    assert_eq!(got.error_code, 0);
    assert_eq!(got.results.len(), 1, "one log dir per broker");
    let dir = &got.results[0];
    assert_eq!(
        (dir.error_code, dir.total_bytes, dir.usable_bytes),
        (0, -1, -1)
    );
    let mut held: Vec<(String, i32, i64)> = dir
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                assert_eq!((p.offset_lag, p.is_future_key), (0, false));
                (t.name.0.to_string(), p.partition_index, p.partition_size)
            })
        })
        .collect();
    held.sort();
    (dir.log_dir.to_string(), held)
}

#[test]
fn describe_log_dirs_lists_each_brokers_replicas_with_the_bytes_it_holds() {
    // Two replicas per partition; broker 2 never receives a batch.
    let server = server_with(
        LiveConfig {
            replication_factor: 2,
            min_insync: 1,
            follower_latency: vec![
                Duration::from_millis(2),
                Duration::from_millis(2),
                Duration::from_secs(3600),
            ],
            ..LiveConfig::default()
        },
        &[("sized", 3)],
        Limits::default(),
    );
    let cluster = server.cluster().clone();
    let replicas: Vec<Vec<u32>> = cluster
        .topic("sized")
        .unwrap()
        .partitions
        .iter()
        .map(|p| p.log.lock().replicas.clone())
        .collect();
    // Every partition gets two batches (three records), acknowledged by
    // its leader.
    for index in 0..3 {
        let mut c = leader(&server, "sized", index);
        for values in [&[b"one".as_slice()][..], &[b"two", b"three"]] {
            let r = c.call(
                &produce_request("sized", &[(index, batch(values))], 1, 5_000),
                PRODUCE_V,
            );
            assert_eq!(partition_errors(&r)[0].1, 0);
        }
    }
    let sizes: Vec<i64> = cluster
        .topic("sized")
        .unwrap()
        .partitions
        .iter()
        .map(|p| p.log.lock().bytes as i64)
        .collect();
    // Followers other than broker 2 catch up within moments.
    assert!(eventually(|| (0..3).all(|i| {
        let log = cluster.topic("sized").unwrap().partitions[i]
            .log
            .lock()
            .replica_leo
            .clone();
        replicas[i]
            .iter()
            .zip(&log)
            .all(|(&b, &leo)| b == 2 || leo == 3)
    })));
    for b in 0..3u32 {
        let (dir, held) = log_dirs(&server, b as usize, None);
        assert_eq!(dir, format!("memory:broker-{b}"));
        let expected: Vec<(String, i32, i64)> = (0..3)
            .filter(|&i| replicas[i].contains(&b))
            .map(|i| {
                let leads = replicas[i][0] == b;
                let size = if b == 2 && !leads { 0 } else { sizes[i] };
                ("sized".to_string(), i as i32, size)
            })
            .collect();
        assert_eq!(held, expected, "broker {b}");
        // Asked for partition 0 and a topic that does not exist: only
        // partition 0, where the broker holds it.
        let (_, some) = log_dirs(
            &server,
            b as usize,
            Some(vec![("sized", vec![0]), ("missing", vec![0])]),
        );
        let expected: Vec<_> = expected.into_iter().filter(|(_, i, _)| *i == 0).collect();
        assert_eq!(some, expected, "broker {b}, partition 0");
    }
    passes(server);
}

#[test]
fn acl_requests_are_answered_security_disabled_as_without_an_authorizer() {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
    let server = server_with(LiveConfig::one_broker(), &[], Limits::default());
    let mut c = Client::connect(server.addrs()[0]);
    let disabled = ResponseError::SecurityDisabled.code();
    for version in 1..=3 {
        let mut r = DescribeAclsRequest::default();
        r.resource_type_filter = 1; // any
        r.pattern_type_filter = 1; // any
        r.operation = 1; // any
        r.permission_type = 1; // any
        let described = c.call(&r, version);
        assert_eq!(described.error_code, disabled, "v{version}");
        assert!(described.resources.is_empty());
        let mut r = CreateAclsRequest::default();
        r.creations = vec![AclCreation::default(), AclCreation::default()];
        let created = c.call(&r, version);
        let errors: Vec<i16> = created.results.iter().map(|x| x.error_code).collect();
        assert_eq!(errors, [disabled, disabled], "v{version}");
        let mut r = DeleteAclsRequest::default();
        r.filters = vec![DeleteAclsFilter::default()];
        let deleted = c.call(&r, version);
        let errors: Vec<i16> = deleted
            .filter_results
            .iter()
            .map(|x| x.error_code)
            .collect();
        assert_eq!(errors, [disabled], "v{version}");
    }
    // The connection is still there.
    c.call(&MetadataRequest::default(), METADATA_V);
    passes(server);
}

#[test]
fn describe_cluster_names_a_live_controller_and_crashed_brokers_as_fenced_until_they_restart() {
    use kafka_protocol::messages::DescribeClusterRequest;
    let server = server(Duration::from_millis(5), &[("orders", 3)]);
    let describe = |addr, version: i16, fenced: bool| {
        let mut r = DescribeClusterRequest::default();
        if version >= 1 {
            r.endpoint_type = 1;
        }
        r.include_fenced_brokers = fenced && version >= 2;
        r.include_cluster_authorized_operations = true;
        let got = Client::connect(addr).call(&r, version);
        assert_eq!(got.error_code, 0, "v{version}");
        assert_eq!(got.cluster_id.as_str(), "broker-sim");
        assert_ne!(got.cluster_authorized_operations, i32::MIN);
        let brokers: Vec<(i32, bool)> = got
            .brokers
            .iter()
            .map(|b| (b.broker_id.0, b.is_fenced))
            .collect();
        (got.controller_id.0, brokers)
    };
    let live = server.addrs()[1];
    for version in 0..=2 {
        let all = vec![(0, false), (1, false), (2, false)];
        assert_eq!(describe(live, version, true), (0, all));
    }
    // The controller crashes: another live broker is named, in Metadata
    // too, and the crashed one is listed only when fenced ones are asked for.
    server.cluster().crash(0);
    assert_eq!(describe(live, 2, false), (1, vec![(1, false), (2, false)]));
    assert_eq!(
        describe(live, 2, true),
        (1, vec![(0, true), (1, false), (2, false)])
    );
    assert_eq!(
        describe(live, 1, true).1.len(),
        2,
        "v1 has no fenced brokers"
    );
    let metadata = Client::connect(live).call(&MetadataRequest::default(), METADATA_V);
    assert_eq!(metadata.controller_id.0, 1);
    // Down, it refuses connections; restarted, it listens at its address
    // again, unfenced, and is the controller again.
    let dead = server.addrs()[0];
    let listening = || std::net::TcpStream::connect(dead).is_ok();
    assert!(eventually(|| !listening()), "broker 0 stops listening");
    server.cluster().restart(0);
    assert!(eventually(listening), "broker 0 listens again");
    let all = vec![(0, false), (1, false), (2, false)];
    assert_eq!(describe(dead, 2, true), (0, all));
    // A broker does not describe the controllers.
    let mut r = DescribeClusterRequest::default();
    r.endpoint_type = 2;
    let got = Client::connect(live).call(&r, 1);
    assert_eq!(
        got.error_code,
        ResponseError::UnsupportedEndpointType.code()
    );
    passes(server);
}

#[test]
fn describe_topic_partitions_pages_through_the_topics_in_name_order() {
    use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
    use kafka_protocol::messages::DescribeTopicPartitionsRequest;
    let server = server(
        Duration::from_millis(5),
        &[("charlie", 1), ("alpha", 3), ("bravo", 2)],
    );
    let addr = server.addrs()[0];
    // (topics asked, or all; limit; cursor) -> (topic, partitions) and
    // the next cursor.
    type Page = (Vec<(String, i16, Vec<i32>)>, Option<(String, i32)>);
    let describe = |topics: &[&str], limit: i32, cursor: Option<(&str, i32)>| -> Page {
        let mut r = DescribeTopicPartitionsRequest::default();
        r.topics = topics
            .iter()
            .map(|&t| {
                let mut request = TopicRequest::default();
                request.name = TopicName(StrBytes::from_string(t.to_string()));
                request
            })
            .collect();
        r.response_partition_limit = limit;
        r.cursor = cursor.map(|(t, p)| {
            let mut c = Cursor::default();
            c.topic_name = TopicName(StrBytes::from_string(t.to_string()));
            c.partition_index = p;
            c
        });
        let got = Client::connect(addr).call(&r, 0);
        let topics = got
            .topics
            .iter()
            .map(|t| {
                let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
                let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
                (name, t.error_code, partitions)
            })
            .collect();
        let next = got
            .next_cursor
            .map(|c| (c.topic_name.0.to_string(), c.partition_index));
        (topics, next)
    };
    let t =
        |name: &str, error: i16, partitions: &[i32]| (name.to_string(), error, partitions.to_vec());
    // Every topic, two partitions a page.
    assert_eq!(
        describe(&[], 2, None),
        (vec![t("alpha", 0, &[0, 1])], Some(("alpha".into(), 2)))
    );
    assert_eq!(
        describe(&[], 2, Some(("alpha", 2))),
        (
            vec![t("alpha", 0, &[2]), t("bravo", 0, &[0])],
            Some(("bravo".into(), 1))
        )
    );
    assert_eq!(
        describe(&[], 2, Some(("bravo", 1))),
        (vec![t("bravo", 0, &[1]), t("charlie", 0, &[0])], None)
    );
    // A page that ends with a topic: the cursor is the next topic's start.
    assert_eq!(
        describe(&[], 3, None),
        (vec![t("alpha", 0, &[0, 1, 2])], Some(("bravo".into(), 0)))
    );
    // Topics asked: an unknown one is answered so, in name order.
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(
        describe(&["charlie", "nope", "bravo"], 10, None),
        (
            vec![
                t("bravo", 0, &[0, 1]),
                t("charlie", 0, &[0]),
                t("nope", unknown, &[])
            ],
            None
        )
    );
    // The cursor's topic must be among those asked.
    let invalid = ResponseError::InvalidRequest.code();
    assert_eq!(
        describe(&["bravo"], 10, Some(("alpha", 0))).0,
        vec![t("bravo", invalid, &[])]
    );
    passes(server);
}

/// On 0.0.0.0, or behind a port mapping, clients are told the advertised
/// address (Kafka's `advertised.listeners`), not where the brokers listen.
#[test]
fn metadata_names_the_advertised_addresses() {
    let server = Server::start(ServeOptions {
        listen: "0.0.0.0:0".parse().unwrap(),
        advertise: Some("broker.example:29092".parse().unwrap()),
        live: LiveConfig::default(),
        topics: vec![],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts");
    let port = server.addrs()[0].port();
    let mut c = Client::connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    let got = c.call(&MetadataRequest::default(), 12);
    let brokers: Vec<(String, i32)> = (got.brokers.iter())
        .map(|b| (b.host.to_string(), b.port))
        .collect();
    let expected: Vec<(String, i32)> = (29092..29095)
        .map(|p| ("broker.example".to_string(), p))
        .collect();
    assert_eq!(brokers, expected);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}
