//! Share groups (KIP-932) on the wire, driven request by request: a member
//! joins, opens a share session, long-polls until records come, and the
//! records it neither acknowledges nor gives back return to the group
//! when its acquisition lock runs out, with their delivery count raised.

use broker_sim::live::{GroupConfig, LiveConfig};
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, produce_request, quota_request, Client};
use broker_sim::wire::Limits;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic,
};
use kafka_protocol::messages::{
    GroupId, MetadataRequest, OffsetCommitRequest, ShareFetchRequest, ShareFetchResponse,
    ShareGroupDescribeRequest, ShareGroupHeartbeatRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::time::{Duration, Instant};
use uuid::Uuid;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// One broker holding "jobs" (one partition); locks of `lock`, share
/// sessions of `session`.
fn server(lock: Duration, session: Duration) -> Server {
    server_with(lock, session, GroupConfig::default().share_max_size)
}

/// The same, a share group taking at most `max_size` members.
fn server_with(lock: Duration, session: Duration, max_size: u32) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig {
            share_record_lock: lock,
            groups: GroupConfig {
                share_session_timeout: session,
                share_max_size: max_size,
                ..GroupConfig::default()
            },
            ..LiveConfig::one_broker()
        },
        topics: vec![("jobs".into(), 1)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

fn fetch(
    epoch: i32,
    topic: Uuid,
    wait_ms: i32,
    acks: Vec<AcknowledgementBatch>,
) -> ShareFetchRequest {
    fetch_as("member-1", epoch, topic, wait_ms, acks)
}

/// A ShareFetch of `member` in "workers" for partition 0 of `topic`.
fn fetch_as(
    member: &str,
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
    r.member_id = Some(text(member));
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

/// `member` joining "workers", subscribed to "jobs".
fn join(member: &str) -> ShareGroupHeartbeatRequest {
    let mut hb = ShareGroupHeartbeatRequest::default();
    hb.group_id = GroupId(text("workers"));
    hb.member_id = text(member);
    hb.subscribed_topic_names = Some(vec![TopicName(text("jobs"))]);
    hb
}

/// The id of the one topic.
fn topic_id(c: &mut Client) -> Uuid {
    let mut m = MetadataRequest::default();
    m.topics = None;
    c.call(&m, 12).topics[0].topic_id
}

#[test]
fn a_full_share_group_turns_a_newcomer_away_and_serves_its_members() {
    let server = server_with(Duration::from_secs(30), Duration::from_secs(45), 2);
    let mut c = Client::connect(server.addrs()[0]);
    let mut epochs = Vec::new();
    for member in ["member-1", "member-2"] {
        let joined = c.call(&join(member), 1);
        assert_eq!(joined.error_code, 0);
        epochs.push(joined.member_epoch);
    }
    let refused = c.call(&join("member-3"), 1);
    assert_eq!(
        refused.error_code,
        ResponseError::GroupMaxSizeReached.code()
    );
    assert_eq!(
        refused.error_message.as_ref().map(|m| m.as_str()),
        Some("The share group has reached its maximum capacity of 2 members.")
    );
    // A member still heartbeats; once one leaves, the newcomer is taken.
    let mut beat = join("member-1");
    beat.member_epoch = epochs[0];
    beat.subscribed_topic_names = None;
    assert_eq!(c.call(&beat, 1).error_code, 0);
    let mut leave = join("member-2");
    leave.member_epoch = -1;
    assert_eq!(c.call(&leave, 1).error_code, 0);
    assert_eq!(c.call(&join("member-3"), 1).error_code, 0);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

#[test]
fn a_parked_share_fetch_is_woken_and_an_unacknowledged_lock_runs_out() {
    let server = server(Duration::from_millis(1000), Duration::from_secs(45));
    let addr = server.addrs()[0];
    let mut c = Client::connect(addr);
    let topic = topic_id(&mut c);
    let joined = c.call(&join("member-1"), 1);
    assert_eq!(joined.error_code, 0, "{joined:?}");
    assert_eq!(
        joined.assignment.unwrap().topic_partitions[0].partitions,
        vec![0]
    );
    let mut d = ShareGroupDescribeRequest::default();
    d.group_ids = vec![GroupId(text("workers")), GroupId(text("nobody"))];
    let described = c.call(&d, 1);
    let g = &described.groups[0];
    assert_eq!((g.error_code, g.group_state.as_str()), (0, "Stable"));
    assert_eq!(g.members.len(), 1);
    assert_eq!(g.members[0].member_id.as_str(), "member-1");
    assert_eq!(g.members[0].client_host.as_str(), "/127.0.0.1");
    assert_eq!(
        g.members[0].assignment.topic_partitions[0]
            .topic_name
            .0
            .as_str(),
        "jobs"
    );
    assert_eq!(
        described.groups[1].error_code,
        ResponseError::GroupIdNotFound.code()
    );
    // A share group commits no offsets, as in Kafka.
    let mut commit = OffsetCommitRequest::default();
    commit.group_id = GroupId(text("workers"));
    commit.generation_id_or_member_epoch = -1;
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = 1;
    let mut t = OffsetCommitRequestTopic::default();
    t.name = TopicName(text("jobs"));
    t.partitions = vec![p];
    commit.topics = vec![t];
    let refused = c.call(&commit, 8).topics[0].partitions[0].error_code;
    assert_eq!(refused, ResponseError::GroupIdNotFound.code());

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

/// A member whose session runs out loses what it holds at once (not when
/// its locks would run out): a parked fetch of another member is woken
/// with it. One that leaves by heartbeat keeps its share session until it
/// closes it, which gives its records back.
#[test]
fn a_member_gone_gives_back_what_it_holds() {
    let server = server(Duration::from_secs(60), Duration::from_millis(600));
    let addr = server.addrs()[0];
    let mut c = Client::connect(addr);
    let topic = topic_id(&mut c);
    let records: [&[u8]; 2] = [b"a", b"b"];
    let r = produce_request("jobs", &[(0, batch(&records))], -1, 10_000);
    assert_eq!(
        c.call(&r, 9).responses[0].partition_responses[0].error_code,
        0
    );
    // Read from the log start: the group's own setting.
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::IncrementalAlterConfigsRequest;
    let mut setting = AlterableConfig::default();
    setting.name = text("share.auto.offset.reset");
    setting.value = Some(text("earliest"));
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = 32;
    resource.resource_name = text("workers");
    resource.configs = vec![setting];
    let mut alter = IncrementalAlterConfigsRequest::default();
    alter.resources = vec![resource];
    assert_eq!(c.call(&alter, 1).responses[0].error_code, 0);

    assert_eq!(c.call(&join("one"), 1).error_code, 0);
    assert_eq!(
        acquired(&c.call(&fetch_as("one", 0, topic, 0, vec![]), 1)),
        vec![(0, 1, 1)]
    );
    let mut two = Client::connect(addr);
    assert_eq!(two.call(&join("two"), 1).error_code, 0);
    // "two" keeps its session alive while it waits; "one" says nothing.
    let beating = std::thread::spawn(move || {
        let mut c = Client::connect(addr);
        let mut epoch = 2;
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(200));
            let mut hb = join("two");
            hb.member_epoch = epoch;
            hb.subscribed_topic_names = None;
            let r = c.call(&hb, 1);
            assert_eq!(r.error_code, 0, "{r:?}");
            epoch = r.member_epoch;
        }
    });
    let asked = Instant::now();
    let got = two.call(&fetch_as("two", 0, topic, 5000, vec![]), 1);
    assert!(
        asked.elapsed() < Duration::from_secs(4),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(acquired(&got), vec![(0, 1, 2)]);
    beating.join().unwrap();
    // "one" is gone; "two" leaves and its records come back.
    let mut hb = join("one");
    hb.member_epoch = 1;
    assert_eq!(
        c.call(&hb, 1).error_code,
        ResponseError::UnknownMemberId.code()
    );
    let mut leave = join("two");
    leave.member_epoch = -1;
    leave.subscribed_topic_names = None;
    assert_eq!(c.call(&leave, 1).member_epoch, -1);
    assert_eq!(c.call(&join("three"), 1).error_code, 0);
    let held = c.call(&fetch_as("three", 0, topic, 0, vec![]), 1);
    assert_eq!(acquired(&held), vec![]);
    // Its last share fetch closes the session.
    let closed = two.call(&fetch_as("two", -1, topic, 0, vec![]), 1);
    assert_eq!(closed.error_code, 0, "{closed:?}");
    let again = c.call(&fetch_as("three", 1, topic, 0, vec![]), 1);
    assert_eq!(acquired(&again), vec![(0, 1, 3)]);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

/// A share fetch past the member's `consumer_byte_rate` is answered empty
/// with its throttle time, as Kafka answers it, and what it acquired is
/// held until its lock runs out; the connection reads nothing more
/// meanwhile.
#[test]
fn a_share_fetch_past_its_quota_is_answered_empty_and_throttled() {
    let server = server(Duration::from_millis(1000), Duration::from_secs(45));
    let mut c = Client::connect(server.addrs()[0]);
    let topic = topic_id(&mut c);
    // 1,000 bytes a second: 10,000 in the quota's first ten seconds.
    let quota = quota_request("client-id", Some("wire-test"), "consumer_byte_rate", 1000.0);
    assert_eq!(c.call(&quota, 1).entries[0].error_code, 0);
    assert_eq!(c.call(&join("member-1"), 1).error_code, 0);
    // The session opens, and the group starts at the log end.
    assert_eq!(acquired(&c.call(&fetch(0, topic, 0, vec![]), 1)), vec![]);
    for size in [4_900, 5_300] {
        let records = batch(&[&vec![b's'; size]]);
        let r = produce_request("jobs", &[(0, records)], -1, 10_000);
        let produced = c.call(&r, 9);
        assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    }
    // One answer holds at most the quota's ten seconds: the first batch.
    let first = c.call(&fetch(1, topic, 1000, vec![]), 1);
    assert_eq!(
        (first.throttle_time_ms, acquired(&first)),
        (0, vec![(0, 0, 1)])
    );
    // The second brings 10.3 KB over a window of 10 s: throttled, empty.
    let second = c.call(&fetch(2, topic, 1000, vec![]), 1);
    assert!(second.throttle_time_ms > 0, "{second:?}");
    assert_eq!((second.error_code, second.responses.len()), (0, 0));
    // The next request waits the throttle out; both records come back
    // when their locks run out, delivered twice.
    let asked = Instant::now();
    let third = c.call(&fetch(3, topic, 5000, vec![]), 1);
    let throttled = Duration::from_millis(second.throttle_time_ms as u64);
    assert!(asked.elapsed() + Duration::from_millis(50) >= throttled);
    assert_eq!(third.throttle_time_ms, 0);
    assert_eq!(acquired(&third), vec![(0, 0, 2)]);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("answers throttled by a quota").unwrap() >= 1);
}

/// A share fetch while its client is over its `request_percentage` is
/// answered empty with its throttle time, as Kafka answers it.
#[test]
fn a_share_fetch_past_its_request_time_is_answered_empty() {
    let server = server(Duration::from_millis(1000), Duration::from_secs(45));
    let mut c = Client::connect(server.addrs()[0]);
    let topic = topic_id(&mut c);
    assert_eq!(c.call(&join("member-1"), 1).error_code, 0);
    assert_eq!(acquired(&c.call(&fetch(0, topic, 0, vec![]), 1)), vec![]);
    // A ten-thousandth of a percent of one thread: 10 µs of handling in
    // the quota's first ten seconds, which a few produces exceed.
    let quota = quota_request("client-id", Some("wire-test"), "request_percentage", 0.0001);
    assert_eq!(c.call(&quota, 1).entries[0].error_code, 0);
    let mut produced = 0;
    loop {
        let r = produce_request("jobs", &[(0, batch(&[b"job"]))], -1, 10_000);
        let got = c.call(&r, 9);
        assert_eq!(got.responses[0].partition_responses[0].error_code, 0);
        produced += 1;
        if got.throttle_time_ms > 0 {
            break;
        }
        assert!(produced < 1_000, "never throttled");
    }
    // Over: the share fetch carries nothing, though there are records.
    let over = c.call(&fetch(1, topic, 1000, vec![]), 1);
    assert!((1..=1_000).contains(&over.throttle_time_ms), "{over:?}");
    assert_eq!((over.error_code, over.responses.len()), (0, 0));
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("answers throttled by a quota").unwrap() >= 2);
}
