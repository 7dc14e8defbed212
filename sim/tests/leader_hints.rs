//! KIP-951: a produce (v10+) or fetch (v16+) sent to a broker that does
//! not lead the partition is answered NOT_LEADER_OR_FOLLOWER with the
//! current leader, its epoch and its endpoint, so that the client need not
//! ask for metadata before it retries there.

use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, produce_request, Client};
use broker_sim::wire::Limits;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    FetchRequest, MetadataRequest, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::net::SocketAddr;
use uuid::Uuid;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Three brokers; "orders" has 3 partitions of 3 replicas.
fn server() -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig::default(),
        topics: vec![("orders".into(), 3)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

/// Partition 0's leader and epoch, and the topic's id, by Metadata from
/// `addr`.
fn leader(addr: SocketAddr) -> (i32, i32, Uuid) {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name("orders"));
    let mut r = MetadataRequest::default();
    r.topics = Some(vec![t]);
    let m = Client::connect(addr).call(&r, 12);
    let p = &m.topics[0].partitions[0];
    (p.leader_id.0, p.leader_epoch, m.topics[0].topic_id)
}

/// A produce to partition 0, naming the topic by `id` from v13.
fn produce(addr: SocketAddr, version: i16, id: Uuid) -> ProduceResponse {
    let mut r: ProduceRequest = produce_request("orders", &[(0, batch(&[b"x"]))], -1, 5_000);
    if version >= 13 {
        r.topic_data[0].name = TopicName::default();
        r.topic_data[0].topic_id = id;
    }
    Client::connect(addr).call(&r, version)
}

/// (error, hinted leader, hinted epoch, endpoints as (id, port)).
fn produce_hint(r: &ProduceResponse) -> (i16, i32, i32, Vec<(i32, i32)>) {
    let p = &r.responses[0].partition_responses[0];
    let endpoints = r.node_endpoints.iter().map(|e| (e.node_id.0, e.port));
    (
        p.error_code,
        p.current_leader.leader_id.0,
        p.current_leader.leader_epoch,
        endpoints.collect(),
    )
}

/// A fetch of partition 0 (by topic `id` from v13), and its hint.
fn fetch_hint(addr: SocketAddr, version: i16, id: Uuid) -> (i16, i32, i32, Vec<(i32, i32)>) {
    let mut p = FetchPartition::default();
    p.partition = 0;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = name("orders");
    t.topic_id = id;
    t.partitions = vec![p];
    let mut r = FetchRequest::default();
    r.replica_id = (-1).into();
    r.max_wait_ms = 0;
    r.max_bytes = 1 << 20;
    r.topics = vec![t];
    let answer = Client::connect(addr).call(&r, version);
    let d = &answer.responses[0].partitions[0];
    let endpoints = answer.node_endpoints.iter().map(|e| (e.node_id.0, e.port));
    (
        d.error_code,
        d.current_leader.leader_id.0,
        d.current_leader.leader_epoch,
        endpoints.collect(),
    )
}

fn port(server: &Server, broker: i32) -> i32 {
    i32::from(server.addrs()[broker as usize].port())
}

#[test]
fn a_broker_that_does_not_lead_names_the_leader_from_produce_v10_and_fetch_v16() {
    let server = server();
    let (lead, epoch, id) = leader(server.addrs()[0]);
    let other = (0..3).find(|&b| b != lead).unwrap();
    let at = server.addrs()[other as usize];
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    let hint = (not_leader, lead, epoch, vec![(lead, port(&server, lead))]);
    for version in 10..=13 {
        assert_eq!(
            produce_hint(&produce(at, version, id)),
            hint,
            "produce v{version}"
        );
    }
    let none = (not_leader, -1, -1, vec![]);
    assert_eq!(produce_hint(&produce(at, 9, id)), none);
    for version in 16..=18 {
        assert_eq!(fetch_hint(at, version, id), hint, "fetch v{version}");
    }
    assert_eq!(fetch_hint(at, 15, id), none);
    // The leader itself answers without one, and so does a broker asked
    // about a topic that does not exist.
    let at_leader = server.addrs()[lead as usize];
    assert_eq!(
        produce_hint(&produce(at_leader, 10, id)),
        (0, -1, -1, vec![])
    );
    let missing = produce_hint(&produce(at, 13, Uuid::new_v4()));
    assert_eq!(
        missing,
        (ResponseError::UnknownTopicId.code(), -1, -1, vec![])
    );
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

#[test]
fn after_the_leader_crashes_the_hint_names_the_new_leader_and_epoch() {
    let server = server();
    let (old, epoch, id) = leader(server.addrs()[0]);
    server.cluster().crash(old as u32);
    let up = (0..3).find(|&b| b != old).unwrap();
    let (new, new_epoch, _) = leader(server.addrs()[up as usize]);
    assert_ne!(new, old);
    assert!(new_epoch > epoch);
    let at = (0..3).find(|&b| b != old && b != new).unwrap();
    let r = produce(server.addrs()[at as usize], 10, id);
    assert_eq!(
        produce_hint(&r),
        (
            ResponseError::NotLeaderOrFollower.code(),
            new,
            new_epoch,
            vec![(new, port(&server, new))]
        )
    );
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}
