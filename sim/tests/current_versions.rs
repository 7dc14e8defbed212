//! What clients written against current brokers send, and may send
//! nothing older than: topics named by id (Metadata v10+, Fetch and Produce
//! v13+, DeleteTopics v6+), several coordinator keys in one FindCoordinator
//! (v4+) and several groups in one OffsetFetch (v8+), OffsetCommit v9 and
//! ListOffsets' local and tiered offsets.

use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, commit_request, produce_request, values, Client};
use broker_sim::wire::Limits;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    BrokerId, DeleteTopicsRequest, FetchRequest, FetchResponse, FindCoordinatorRequest, GroupId,
    ListOffsetsRequest, MetadataRequest, MetadataResponse, OffsetCommitRequest, OffsetFetchRequest,
    ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use uuid::Uuid;

const METADATA_V: i16 = 12;
const FETCH_V: i16 = 18;
/// Produce by topic id.
const PRODUCE_BY_ID_V: i16 = 13;

/// One broker, which leads and coordinates everything.
fn server(topics: &[(&str, u32)]) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig::one_broker(),
        topics: topics.iter().map(|(n, p)| (n.to_string(), *p)).collect(),
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn passes(server: Server) {
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

/// Metadata for the topics named (every topic for `None`), never creating.
fn metadata(addr: SocketAddr, by: Option<Vec<MetadataRequestTopic>>) -> MetadataResponse {
    let mut r = MetadataRequest::default();
    r.topics = by;
    Client::connect(addr).call(&r, METADATA_V)
}

fn by_name(topic: &str) -> MetadataRequestTopic {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(TopicName(s(topic)));
    t
}

fn by_id(id: Uuid) -> MetadataRequestTopic {
    let mut t = MetadataRequestTopic::default();
    t.name = None;
    t.topic_id = id;
    t
}

fn topic_id(addr: SocketAddr, topic: &str) -> Uuid {
    let m = metadata(addr, Some(vec![by_name(topic)]));
    assert_eq!(m.topics[0].error_code, 0, "{m:?}");
    m.topics[0].topic_id
}

fn fetch_by_id(id: Uuid, offset: i64, max_wait_ms: i32) -> FetchRequest {
    let mut p = FetchPartition::default();
    p.partition = 0;
    p.fetch_offset = offset;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic_id = id;
    t.partitions = vec![p];
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = max_wait_ms;
    r.min_bytes = 1;
    r.max_bytes = 50 << 20;
    r.topics = vec![t];
    r
}

/// The single partition answered: (topic id, error, high watermark, records).
fn answered(r: &FetchResponse) -> (Uuid, i16, i64, Bytes) {
    assert_eq!(r.responses.len(), 1, "{r:?}");
    let t = &r.responses[0];
    assert_eq!(t.partitions.len(), 1, "{r:?}");
    let p = &t.partitions[0];
    let records = p.records.clone().unwrap_or_default();
    (t.topic_id, p.error_code, p.high_watermark, records)
}

/// An `acks=all` produce of one batch to partition 0 of the topic `id`
/// names (at v13).
fn produce_by_id(id: Uuid, values: &[&[u8]]) -> ProduceRequest {
    let mut r = produce("", values);
    r.topic_data[0].name = TopicName::default();
    r.topic_data[0].topic_id = id;
    r
}

fn produce(topic: &str, values: &[&[u8]]) -> ProduceRequest {
    produce_request(topic, &[(0, batch(values))], -1, 5_000)
}

#[test]
fn topics_have_ids_and_a_fetch_by_id_parks_until_data_comes() {
    let server = server(&[("orders", 1), ("audit", 1)]);
    let addr = server.addrs()[0];
    let orders = topic_id(addr, "orders");
    let audit = topic_id(addr, "audit");
    assert!(!orders.is_nil() && !audit.is_nil() && orders != audit);
    // Every topic listed carries its id; asked by id, a topic is found
    // with its name, and an unknown id is UNKNOWN_TOPIC_ID, never made.
    let all = metadata(addr, None);
    let mut listed: Vec<(String, Uuid)> = all
        .topics
        .iter()
        .map(|t| (t.name.as_ref().unwrap().0.to_string(), t.topic_id))
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [("audit".to_string(), audit), ("orders".to_string(), orders)]
    );
    let stranger = Uuid::from_u128(0x5eed);
    let m = metadata(addr, Some(vec![by_id(orders), by_id(stranger)]));
    assert_eq!(m.topics[0].name.as_ref().unwrap().0.as_str(), "orders");
    assert_eq!((m.topics[0].error_code, m.topics[0].topic_id), (0, orders));
    assert_eq!(
        (m.topics[1].error_code, m.topics[1].topic_id),
        (ResponseError::UnknownTopicId.code(), stranger)
    );
    assert!(m.topics[1].name.is_none());
    assert_eq!(metadata(addr, None).topics.len(), 2);

    // A long poll by id waits in the fetch purgatory and is woken by an
    // append by id (parked in the produce purgatory until replicated),
    // each answered under the id it asked by.
    let poller = std::thread::spawn(move || {
        let start = Instant::now();
        let r = Client::connect(addr).call(&fetch_by_id(orders, 0, 10_000), FETCH_V);
        (start.elapsed(), r)
    });
    std::thread::sleep(Duration::from_millis(200));
    let mut producer = Client::connect(addr);
    let acked = producer.call(&produce_by_id(orders, &[b"by id"]), PRODUCE_BY_ID_V);
    assert_eq!(acked.responses[0].topic_id, orders);
    assert_eq!(acked.responses[0].partition_responses[0].error_code, 0);
    let refused = producer.call(&produce_by_id(stranger, &[b"lost"]), PRODUCE_BY_ID_V);
    assert_eq!(
        (
            refused.responses[0].topic_id,
            refused.responses[0].partition_responses[0].error_code
        ),
        (stranger, ResponseError::UnknownTopicId.code())
    );
    let (waited, r) = poller.join().unwrap();
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    let (id, error, hw, records) = answered(&r);
    assert_eq!((id, error, hw), (orders, 0, 1));
    assert_eq!(values(&records), vec![(0, b"by id".to_vec())]);

    // An unknown id is answered at once.
    let start = Instant::now();
    let r = Client::connect(addr).call(&fetch_by_id(stranger, 0, 10_000), FETCH_V);
    assert!(start.elapsed() < Duration::from_secs(5));
    let (id, error, _, _) = answered(&r);
    assert_eq!(
        (id, error),
        (stranger, ResponseError::UnknownTopicId.code())
    );
    passes(server);
}

#[test]
fn a_topic_deleted_by_id_and_made_again_has_a_new_id() {
    let server = server(&[("orders", 1)]);
    let addr = server.addrs()[0];
    let old = topic_id(addr, "orders");
    // A fetch parked by id is answered when its topic goes.
    let mut parked = Client::connect(addr);
    parked.send(&fetch_by_id(old, 0, 30_000), FETCH_V);
    std::thread::sleep(Duration::from_millis(200));
    let mut delete = DeleteTopicsRequest::default();
    let mut state = DeleteTopicState::default();
    state.name = None;
    state.topic_id = old;
    let mut unknown = DeleteTopicState::default();
    unknown.name = None;
    unknown.topic_id = Uuid::from_u128(7);
    delete.topics = vec![state, unknown];
    delete.timeout_ms = 5_000;
    let start = Instant::now();
    let deleted = Client::connect(addr).call(&delete, 6);
    let results: Vec<(Option<String>, Uuid, i16)> = deleted
        .responses
        .iter()
        .map(|r| {
            let name = r.name.as_ref().map(|n| n.0.to_string());
            (name, r.topic_id, r.error_code)
        })
        .collect();
    assert_eq!(
        results,
        [
            (Some("orders".to_string()), old, 0),
            (
                None,
                Uuid::from_u128(7),
                ResponseError::UnknownTopicId.code()
            ),
        ]
    );
    let (_, r) = parked.recv::<FetchRequest>(FETCH_V);
    assert_eq!(
        answered(&r).1,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    // Made again by a produce's Metadata: a new id; the old one is gone.
    let mut r = MetadataRequest::default();
    r.topics = Some(vec![by_name("orders")]);
    r.allow_auto_topic_creation = true;
    let made = Client::connect(addr).call(&r, METADATA_V);
    let new = made.topics[0].topic_id;
    assert!(!new.is_nil() && new != old, "{made:?}");
    let r = Client::connect(addr).call(&fetch_by_id(old, 0, 0), FETCH_V);
    assert_eq!(answered(&r).1, ResponseError::UnknownTopicId.code());
    let r = Client::connect(addr).call(&fetch_by_id(new, 0, 0), FETCH_V);
    assert_eq!(answered(&r).1, 0);
    passes(server);
}

#[test]
fn one_find_coordinator_answers_each_key_as_if_asked_alone() {
    let server = server(&[]);
    let addr = server.addrs()[0];
    let (host, port) = (addr.ip().to_string(), i32::from(addr.port()));
    for (key_type, expect) in [(0, 0), (1, 0), (2, ResponseError::InvalidRequest.code())] {
        let mut r = FindCoordinatorRequest::default();
        r.key_type = key_type;
        r.coordinator_keys = vec![s("readers"), s("writers")];
        let found = Client::connect(addr).call(&r, 4);
        let answers: Vec<(String, i16)> = found
            .coordinators
            .iter()
            .map(|c| (c.key.to_string(), c.error_code))
            .collect();
        assert_eq!(
            answers,
            [
                ("readers".to_string(), expect),
                ("writers".to_string(), expect)
            ]
        );
        for c in &found.coordinators {
            if expect == 0 {
                assert_eq!((c.node_id.0, c.host.as_str(), c.port), (0, &*host, port));
            } else {
                assert_eq!((c.node_id.0, c.port), (-1, -1));
            }
        }
    }
    // Before v4, one key, with Kafka's message for success and error
    // alike.
    let invalid = ResponseError::InvalidRequest;
    for (key_type, expect, message) in [
        (0, 0, "NONE".to_string()),
        (2, invalid.code(), invalid.to_string()),
    ] {
        let mut r = FindCoordinatorRequest::default();
        r.key_type = key_type;
        r.key = s("readers");
        let found = Client::connect(addr).call(&r, 3);
        assert_eq!(found.error_code, expect);
        assert_eq!(found.error_message.as_deref(), Some(&*message));
    }
    passes(server);
}

/// A committed offset as OffsetFetch reports it: topic, partition, offset
/// and metadata.
type Offset = (String, i32, i64, String);

/// A commit of `offset` in orders' partition 0, with metadata "md".
fn commit(group: &str, generation: i32, member: &str, offset: i64) -> OffsetCommitRequest {
    let mut r = commit_request(group, generation, member, &[("orders", 0, offset)]);
    r.topics[0].partitions[0].committed_metadata = Some(s("md"));
    r
}

#[test]
fn one_offset_fetch_answers_several_groups_and_a_commit_finds_no_group() {
    let server = server(&[("orders", 2)]);
    let addr = server.addrs()[0];
    let mut c = Client::connect(addr);
    // A commit outside any generation makes the group; one from a member
    // of a group nobody made finds none: GROUP_ID_NOT_FOUND from v9, a
    // stale generation before.
    let made = c.call(&commit("simple", -1, "", 42), 9);
    assert_eq!(made.topics[0].partitions[0].error_code, 0);
    let stray = c.call(&commit("nobody", 3, "m-1", 1), 9);
    assert_eq!(
        stray.topics[0].partitions[0].error_code,
        ResponseError::GroupIdNotFound.code()
    );
    let stray = c.call(&commit("nobody", 3, "m-1", 1), 8);
    assert_eq!(
        stray.topics[0].partitions[0].error_code,
        ResponseError::IllegalGeneration.code()
    );

    let group = |id: &str, topics: Option<Vec<(&str, Vec<i32>)>>| {
        let mut g = OffsetFetchRequestGroup::default();
        g.group_id = GroupId(s(id));
        g.topics = topics.map(|topics| {
            topics
                .into_iter()
                .map(|(name, partitions)| {
                    let mut t = OffsetFetchRequestTopics::default();
                    t.name = TopicName(s(name));
                    t.partition_indexes = partitions;
                    t
                })
                .collect()
        });
        g
    };
    let mut r = OffsetFetchRequest::default();
    r.groups = vec![
        group("simple", Some(vec![("orders", vec![0, 1])])),
        group("simple", None),
        group("nobody", None),
    ];
    for version in [8, 9] {
        let got = c.call(&r, version);
        let flat: Vec<(String, i16, Vec<Offset>)> = got
            .groups
            .iter()
            .map(|g| {
                let offsets = g
                    .topics
                    .iter()
                    .flat_map(|t| {
                        t.partitions.iter().map(|p| {
                            let md = p.metadata.as_deref().unwrap_or("").to_string();
                            (
                                t.name.0.to_string(),
                                p.partition_index,
                                p.committed_offset,
                                md,
                            )
                        })
                    })
                    .collect();
                (g.group_id.0.to_string(), g.error_code, offsets)
            })
            .collect();
        let orders = |p: i32, offset: i64, md: &str| ("orders".to_string(), p, offset, md.into());
        assert_eq!(
            flat,
            [
                (
                    "simple".to_string(),
                    0,
                    vec![orders(0, 42, "md"), orders(1, -1, "")]
                ),
                ("simple".to_string(), 0, vec![orders(0, 42, "md")]),
                ("nobody".to_string(), 0, vec![]),
            ],
            "v{version}"
        );
    }
    passes(server);
}

#[test]
fn list_offsets_finds_the_local_start_and_no_tiered_offset() {
    let server = server(&[("orders", 1)]);
    let addr = server.addrs()[0];
    let mut c = Client::connect(addr);
    let acked = c.call(&produce("orders", &[b"a", b"b", b"c"]), 9);
    assert_eq!(acked.responses[0].partition_responses[0].error_code, 0);
    // One request each: a partition asked for twice in one request is
    // answered INVALID_REQUEST.
    let mut at = |timestamp: i64, version: i16| {
        let mut p = ListOffsetsPartition::default();
        p.timestamp = timestamp;
        let mut t = ListOffsetsTopic::default();
        t.name = TopicName(s("orders"));
        t.partitions = vec![p];
        let mut r = ListOffsetsRequest::default();
        r.topics = vec![t];
        r.timeout_ms = 1_000;
        let got = c.call(&r, version);
        let p = &got.topics[0].partitions[0];
        (p.error_code, p.offset)
    };
    for version in [9, 10] {
        let answers: Vec<(i16, i64)> = [-2, -4, -5, -1]
            .into_iter()
            .map(|timestamp| at(timestamp, version))
            .collect();
        // Earliest, earliest kept locally (one log: the same), the last
        // tiered (nothing is: none), latest.
        assert_eq!(answers, [(0, 0), (0, 0), (0, -1), (0, 3)], "v{version}");
    }
    passes(server);
}
