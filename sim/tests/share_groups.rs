//! Share groups (KIP-932) on the wire, driven request by request: a member
//! joins, opens a share session, long-polls until records come, and the
//! records it neither acknowledges nor gives back return to the group
//! when its acquisition lock runs out, with their delivery count raised.

use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, produce_request, Client};
use broker_sim::wire::Limits;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic,
};
use kafka_protocol::messages::{
    GroupId, MetadataRequest, ShareFetchRequest, ShareFetchResponse, ShareGroupHeartbeatRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::time::{Duration, Instant};
use uuid::Uuid;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// One broker holding "jobs" (one partition); locks of `lock`.
fn server(lock: Duration) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        live: LiveConfig {
            brokers: 1,
            replication_factor: 1,
            min_insync: 1,
            share_record_lock: lock,
            ..LiveConfig::default()
        },
        topics: vec![("jobs".into(), 1)],
        limits: Limits::default(),
    })
    .expect("the server starts")
}

fn fetch(
    epoch: i32,
    topic: Uuid,
    wait_ms: i32,
    acks: Vec<AcknowledgementBatch>,
) -> ShareFetchRequest {
    let mut p = FetchPartition::default();
    p.partition_index = 0;
    p.acknowledgement_batches = acks;
    let mut t = FetchTopic::default();
    t.topic_id = topic;
    t.partitions = vec![p];
    let mut r = ShareFetchRequest::default();
    r.group_id = Some(GroupId(text("workers")));
    r.member_id = Some(text("member-1"));
    r.share_session_epoch = epoch;
    r.max_wait_ms = wait_ms;
    r.min_bytes = 1;
    r.max_bytes = 1 << 20;
    r.max_records = 100;
    r.batch_size = 100;
    r.topics = vec![t];
    r
}

/// The acquired runs of the one partition: (first, last, delivery count).
fn acquired(r: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    assert_eq!(r.error_code, 0, "{r:?}");
    r.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .flat_map(|p| &p.acquired_records)
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect()
}

#[test]
fn a_parked_share_fetch_is_woken_and_an_unacknowledged_lock_runs_out() {
    let server = server(Duration::from_millis(1000));
    let addr = server.addrs()[0];
    let mut c = Client::connect(addr);
    let mut m = MetadataRequest::default();
    m.topics = None;
    let topic = c.call(&m, 12).topics[0].topic_id;
    let mut hb = ShareGroupHeartbeatRequest::default();
    hb.group_id = GroupId(text("workers"));
    hb.member_id = text("member-1");
    hb.subscribed_topic_names = Some(vec![TopicName(text("jobs"))]);
    let joined = c.call(&hb, 1);
    assert_eq!(joined.error_code, 0, "{joined:?}");
    assert_eq!(
        joined.assignment.unwrap().topic_partitions[0].partitions,
        vec![0]
    );

    // Nothing yet: the share fetch waits, and a produce wakes it.
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let records: [&[u8]; 3] = [b"a", b"b", b"c"];
        let r = produce_request("jobs", &[(0, batch(&records))], -1, 10_000);
        Client::connect(addr).call(&r, 9)
    });
    let asked = Instant::now();
    let first = c.call(&fetch(0, topic, 5000, vec![]), 1);
    let waited = asked.elapsed();
    assert!(
        waited >= Duration::from_millis(250),
        "answered after {waited:?}"
    );
    assert!(waited < Duration::from_secs(4), "answered after {waited:?}");
    assert_eq!(acquired(&first), vec![(0, 2, 1)]);
    assert_eq!(first.acquisition_lock_timeout_ms, 1000);
    producer.join().unwrap();

    // Accept offset 1 only; nothing else is free until the lock runs out.
    let mut ack = AcknowledgementBatch::default();
    ack.first_offset = 1;
    ack.last_offset = 1;
    ack.acknowledge_types = vec![1];
    let quiet = c.call(&fetch(1, topic, 100, vec![ack]), 1);
    assert_eq!(acquired(&quiet), vec![]);
    let p = &quiet.responses[0].partitions[0];
    assert_eq!((p.error_code, p.acknowledge_error_code), (0, 0));

    // Offsets 0 and 2 come back when the lock runs out: the parked fetch
    // is woken by the expiry, within its wait.
    let asked = Instant::now();
    let again = c.call(&fetch(2, topic, 5000, vec![]), 1);
    assert!(asked.elapsed() < Duration::from_secs(4));
    assert_eq!(acquired(&again), vec![(0, 0, 2), (2, 2, 2)]);

    // A stale epoch, and an acknowledgement of what is not held.
    let stale = c.call(&fetch(2, topic, 0, vec![]), 1);
    assert_eq!(
        stale.error_code,
        ResponseError::InvalidShareSessionEpoch.code()
    );
    let mut ack = AcknowledgementBatch::default();
    ack.first_offset = 1;
    ack.last_offset = 1;
    ack.acknowledge_types = vec![1];
    let twice = c.call(&fetch(3, topic, 0, vec![ack]), 1);
    let p = &twice.responses[0].partitions[0];
    assert_eq!(
        p.acknowledge_error_code,
        ResponseError::InvalidRecordState.code()
    );
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}
