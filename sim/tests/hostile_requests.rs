//! Well-formed requests whose fields are hostile: partitions, offsets,
//! timestamps, sizes, epochs and counts at and past their edges (negative,
//! zero, the type's extremes), for topics that exist and do not, sent to
//! every broker. Each request is answered on its connection (a handler
//! that panicked would drop it), and afterwards the server's checks hold:
//! every parked request answered once, nothing acknowledged or read
//! where it must not be.

use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, encode_request, produce_request, Client};
use broker_sim::wire::Limits;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    BrokerId, DeleteRecordsRequest, FetchRequest, GroupId, ListOffsetsRequest, OffsetCommitRequest,
    OffsetForLeaderEpochRequest, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::time::Duration;

/// A request as sent: what it is, for the report of a failing case, and
/// its frame.
#[derive(Clone)]
struct Sent {
    what: String,
    frame: Vec<u8>,
}

impl std::fmt::Debug for Sent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

fn sent<R: Request + std::fmt::Debug>(request: R, version: i16) -> Sent {
    Sent {
        what: format!("{request:?} at v{version}"),
        frame: encode_request(&request, version, 1).to_vec(),
    }
}

fn int32() -> impl Strategy<Value = i32> {
    prop_oneof![
        Just(0),
        Just(1),
        Just(-1),
        Just(-2),
        Just(i32::MAX),
        Just(i32::MIN),
        any::<i32>()
    ]
}

fn int64() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(0),
        Just(1),
        (-6i64..0),
        Just(i64::MAX),
        Just(i64::MIN),
        Just(i64::from(i32::MAX) + 1),
        any::<i64>()
    ]
}

/// A wait a test can afford: the server may hold the request this long.
fn wait_ms() -> impl Strategy<Value = i32> {
    prop_oneof![Just(0), Just(-1), Just(i32::MIN), 1i32..50]
}

/// The topic that exists ("held", two partitions) or one that does not.
fn topic() -> impl Strategy<Value = TopicName> {
    prop_oneof![Just("held"), Just("absent")].prop_map(|t| TopicName(StrBytes::from_static_str(t)))
}

fn produce() -> impl Strategy<Value = Sent> {
    // acks 0 is not answered.
    let acks = prop_oneof![
        Just(-1i16),
        Just(1),
        any::<i16>().prop_filter("answered", |a| *a != 0)
    ];
    (topic(), int32(), acks, wait_ms(), 3i16..=12).prop_map(
        |(topic, partition, acks, timeout_ms, version)| {
            let records = [(partition, batch(&[b"x", b"y"]))];
            sent(
                produce_request(&topic.0, &records, acks, timeout_ms),
                version,
            )
        },
    )
}

fn fetch() -> impl Strategy<Value = Sent> {
    (
        (topic(), int32(), int64(), int32()),
        (wait_ms(), int32(), int32(), int32()),
        (any::<i8>(), (int32(), int32()), 4i16..=12),
    )
        .prop_map(
            |(
                (topic, partition, offset, epoch),
                (max_wait_ms, min_bytes, max_bytes, partition_max_bytes),
                (isolation, session, version),
            )| {
                let mut p = FetchPartition::default();
                p.partition = partition;
                p.fetch_offset = offset;
                p.partition_max_bytes = partition_max_bytes;
                // Each field only from the version that has it.
                if version >= 9 {
                    p.current_leader_epoch = epoch;
                }
                let mut t = FetchTopic::default();
                t.topic = topic;
                t.partitions = vec![p];
                let mut r = FetchRequest::default();
                r.replica_id = BrokerId(-1);
                r.max_wait_ms = max_wait_ms;
                r.min_bytes = min_bytes;
                r.max_bytes = max_bytes;
                r.isolation_level = isolation;
                if version >= 7 {
                    (r.session_id, r.session_epoch) = session;
                }
                r.topics = vec![t];
                sent(r, version)
            },
        )
}

fn list_offsets() -> impl Strategy<Value = Sent> {
    (topic(), int32(), int64(), int32(), any::<i8>(), 1i16..=10).prop_map(
        |(topic, partition, timestamp, epoch, isolation, version)| {
            let mut p = ListOffsetsPartition::default();
            p.partition_index = partition;
            p.timestamp = timestamp;
            if version >= 4 {
                p.current_leader_epoch = epoch;
            }
            let mut t = ListOffsetsTopic::default();
            t.name = topic;
            t.partitions = vec![p];
            let mut r = ListOffsetsRequest::default();
            r.replica_id = BrokerId(-1);
            if version >= 2 {
                r.isolation_level = isolation;
            }
            r.topics = vec![t];
            sent(r, version)
        },
    )
}

fn offset_for_leader_epoch() -> impl Strategy<Value = Sent> {
    (topic(), int32(), int32(), int32(), 2i16..=4).prop_map(
        |(topic, partition, current, asked, version)| {
            let mut p = OffsetForLeaderPartition::default();
            p.partition = partition;
            p.current_leader_epoch = current;
            p.leader_epoch = asked;
            let mut t = OffsetForLeaderTopic::default();
            t.topic = topic;
            t.partitions = vec![p];
            let mut r = OffsetForLeaderEpochRequest::default();
            if version >= 3 {
                r.replica_id = BrokerId(-1);
            }
            r.topics = vec![t];
            sent(r, version)
        },
    )
}

fn delete_records() -> impl Strategy<Value = Sent> {
    (topic(), int32(), int64(), wait_ms(), 0i16..=2).prop_map(
        |(topic, partition, offset, timeout_ms, version)| {
            let mut p = DeleteRecordsPartition::default();
            p.partition_index = partition;
            p.offset = offset;
            let mut t = DeleteRecordsTopic::default();
            t.name = topic;
            t.partitions = vec![p];
            let mut r = DeleteRecordsRequest::default();
            r.timeout_ms = timeout_ms;
            r.topics = vec![t];
            sent(r, version)
        },
    )
}

fn offset_commit() -> impl Strategy<Value = Sent> {
    let group = prop_oneof![Just(String::new()), Just("readers".into()), "[a-z]{1,3}"];
    let member = prop_oneof![Just(String::new()), "[a-z0-9-]{1,8}"];
    (
        group,
        int32(),
        member,
        (topic(), int32(), int64(), int32()),
        2i16..=8,
    )
        .prop_map(
            |(group, generation, member, (topic, partition, offset, epoch), version)| {
                let mut p = OffsetCommitRequestPartition::default();
                p.partition_index = partition;
                p.committed_offset = offset;
                if version >= 6 {
                    p.committed_leader_epoch = epoch;
                }
                let mut t = OffsetCommitRequestTopic::default();
                t.name = topic;
                t.partitions = vec![p];
                let mut r = OffsetCommitRequest::default();
                r.group_id = GroupId(StrBytes::from_string(group));
                r.generation_id_or_member_epoch = generation;
                r.member_id = StrBytes::from_string(member);
                r.topics = vec![t];
                sent(r, version)
            },
        )
}

#[test]
fn requests_with_fields_past_their_edges_are_answered_and_the_checks_hold() {
    let server = Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig {
            follower_latency: vec![Duration::from_millis(1)],
            ..LiveConfig::default()
        },
        topics: vec![("held".to_string(), 2)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts");
    let addrs = server.addrs().to_vec();
    let hostile = prop_oneof![
        produce(),
        fetch(),
        list_offsets(),
        offset_for_leader_epoch(),
        delete_records(),
        offset_commit(),
    ];
    let mut runner = TestRunner::new(Config::with_cases(1_500));
    runner
        .run(&(hostile, 0..addrs.len()), |(request, at)| {
            let mut c = Client::connect(addrs[at]);
            c.send_raw(&request.frame).expect("sent");
            prop_assert!(c.read_frame().is_some(), "no answer");
            Ok(())
        })
        .unwrap();
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}
