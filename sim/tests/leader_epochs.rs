//! Leader epochs on the wire (KIP-101, KIP-320): each stored batch carries
//! the epoch of the leader that appended it, OffsetForLeaderEpoch says
//! where an epoch ended (so a consumer can tell that a new leader cut the
//! log back under it), and a Fetch, ListOffsets or OffsetForLeaderEpoch
//! naming a stale epoch is fenced, one naming an epoch not yet known is
//! told so.

use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, produce_request, Client};
use broker_sim::wire::Limits;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    FetchRequest, ListOffsetsRequest, MetadataRequest, OffsetForLeaderEpochRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::time::{Duration, Instant};

const FENCED: i16 = ResponseError::FencedLeaderEpoch.code();
const UNKNOWN: i16 = ResponseError::UnknownLeaderEpoch.code();
const NOT_LEADER: i16 = ResponseError::NotLeaderOrFollower.code();

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Three brokers whose followers fetch `follower_latency` after each
/// append; "orders" has one partition of three replicas.
fn server(follower_latency: Duration) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig {
            follower_latency: vec![follower_latency],
            ..LiveConfig::default()
        },
        topics: vec![("orders".into(), 1)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

/// The partition's leader and epoch, by Metadata.
fn leader(server: &Server) -> (u32, i32) {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name("orders"));
    let mut r = MetadataRequest::default();
    r.topics = Some(vec![t]);
    let alive = |b: u32| {
        server.cluster().brokers[b as usize]
            .alive
            .load(std::sync::atomic::Ordering::Acquire)
    };
    let ask = (0..3).find(|&b| alive(b)).expect("a broker is up");
    let m = client(server, ask).call(&r, 12);
    let p = &m.topics[0].partitions[0];
    (p.leader_id.0 as u32, p.leader_epoch)
}

/// Waits (up to 10 s) for the leadership to move off `old`.
fn new_leader(server: &Server, old: u32) -> (u32, i32) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let (at, epoch) = leader(server);
        if at != old && at != u32::MAX {
            return (at, epoch);
        }
        assert!(Instant::now() < until, "the leadership stays at {old}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A connection to `broker`, once its listener is up: a restarted broker
/// binds its address again a moment after it is back.
fn client(server: &Server, broker: u32) -> Client {
    let addr = server.addrs()[broker as usize];
    let until = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < until, "broker {broker} listens again");
        std::thread::sleep(Duration::from_millis(20));
    }
    Client::connect(addr)
}

/// Produces `n` records in one batch at `broker`; returns the base offset.
fn produce(server: &Server, broker: u32, n: usize, acks: i16) -> i64 {
    let values: Vec<&[u8]> = (0..n).map(|_| &b"r"[..]).collect();
    let r = produce_request("orders", &[(0, batch(&values))], acks, 10_000);
    let answer = client(server, broker).call(&r, 9);
    let p = &answer.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0);
    p.base_offset
}

/// OffsetForLeaderEpoch v4 at `broker`: (error, epoch, end offset).
fn epoch_end(server: &Server, broker: u32, current: i32, asked: i32) -> (i16, i32, i64) {
    let mut p = OffsetForLeaderPartition::default();
    p.partition = 0;
    p.current_leader_epoch = current;
    p.leader_epoch = asked;
    let mut t = OffsetForLeaderTopic::default();
    t.topic = name("orders");
    t.partitions = vec![p];
    let mut r = OffsetForLeaderEpochRequest::default();
    r.replica_id = (-1).into();
    r.topics = vec![t];
    let answer = client(server, broker).call(&r, 4);
    let a = &answer.topics[0].partitions[0];
    (a.error_code, a.leader_epoch, a.end_offset)
}

/// A fetch (v12) of partition `p` of "orders" at `broker`, which waits
/// up to `max_wait_ms` for `min_bytes`: the partition's answer.
fn fetch_one(
    server: &Server,
    broker: u32,
    mut p: FetchPartition,
    max_wait_ms: i32,
    min_bytes: i32,
) -> PartitionData {
    p.partition = 0;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = name("orders");
    t.partitions = vec![p];
    let mut r = FetchRequest::default();
    r.replica_id = (-1).into();
    r.max_bytes = 1 << 20;
    r.max_wait_ms = max_wait_ms;
    r.min_bytes = min_bytes;
    r.topics = vec![t];
    let mut answer = client(server, broker).call(&r, 12);
    answer.responses.remove(0).partitions.remove(0)
}

/// A fetch from offset 0 at `broker` naming `current` as the epoch: its
/// error and the records' bytes.
fn fetch(server: &Server, broker: u32, current: i32) -> (i16, Bytes) {
    let mut p = FetchPartition::default();
    p.current_leader_epoch = current;
    let d = fetch_one(server, broker, p, 0, 0);
    (d.error_code, d.records.unwrap_or_default())
}

/// A fetch from `offset` at `broker` by a client whose last record read
/// was of epoch `last_fetched`, asking to wait up to 10 s for a byte: its
/// error, the diverging epoch and end offset it was answered (-1, -1:
/// none), and the records' bytes.
fn fetch_after(
    server: &Server,
    broker: u32,
    offset: i64,
    last_fetched: i32,
) -> (i16, (i32, i64), Bytes) {
    let mut p = FetchPartition::default();
    p.fetch_offset = offset;
    p.last_fetched_epoch = last_fetched;
    let d = fetch_one(server, broker, p, 10_000, 1);
    let diverging = (d.diverging_epoch.epoch, d.diverging_epoch.end_offset);
    (d.error_code, diverging, d.records.unwrap_or_default())
}

/// The partition leader epochs in the v2 batch headers of `records`, each
/// with the base offset of the first batch that carries it (of a run of
/// batches with the same epoch).
fn batch_epochs(mut records: Bytes) -> Vec<(i64, i32)> {
    let mut out: Vec<(i64, i32)> = Vec::new();
    while records.len() >= 12 {
        let base = i64::from_be_bytes(records[..8].try_into().unwrap());
        let length = i32::from_be_bytes(records[8..12].try_into().unwrap()) as usize;
        let epoch = i32::from_be_bytes(records[12..16].try_into().unwrap());
        if out.last().is_none_or(|&(_, e)| e != epoch) {
            out.push((base, epoch));
        }
        let _ = records.split_to(12 + length);
    }
    out
}

/// ListOffsets v4 at `broker` for `timestamp`: (error, offset, epoch).
fn list_offset(server: &Server, broker: u32, current: i32, timestamp: i64) -> (i16, i64, i32) {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = 0;
    p.current_leader_epoch = current;
    p.timestamp = timestamp;
    let mut t = ListOffsetsTopic::default();
    t.name = name("orders");
    t.partitions = vec![p];
    let mut r = ListOffsetsRequest::default();
    r.replica_id = (-1).into();
    r.topics = vec![t];
    let answer = client(server, broker).call(&r, 4);
    let a = &answer.topics[0].partitions[0];
    (a.error_code, a.offset, a.leader_epoch)
}

/// The first leader (epoch `e0`) takes three records with acks=all and
/// two with acks=1, then crashes before its followers, which fetch 300 ms
/// after an append, have the last two: the second leader (`e1`) starts
/// its epoch at 3, and takes two records with acks=all there. Returns the
/// server, the first leader and its epoch, the second and its epoch.
fn cut_back() -> (Server, (u32, i32), (u32, i32)) {
    let server = server(Duration::from_millis(300));
    let (first, e0) = leader(&server);
    assert_eq!(produce(&server, first, 3, -1), 0);
    assert_eq!(produce(&server, first, 2, 1), 3);
    // At the first leader epoch e0 runs to the log end.
    assert_eq!(epoch_end(&server, first, e0, e0), (0, e0, 5));
    server.cluster().crash(first);
    let (second, e1) = new_leader(&server, first);
    assert!(e1 > e0, "{e1} after {e0}");
    assert_eq!(produce(&server, second, 2, -1), 3);
    (server, (first, e0), (second, e1))
}

#[test]
fn a_new_leader_cuts_what_was_not_replicated_and_its_epoch_says_where() {
    let (server, (first, e0), (second, e1)) = cut_back();
    // The two records of acks=1 went with the old leader: the new epoch
    // starts at 3, where the old one now ends.
    assert_eq!(epoch_end(&server, second, e1, e0), (0, e0, 3));
    assert_eq!(epoch_end(&server, second, e1, e1), (0, e1, 5));
    assert_eq!(epoch_end(&server, second, -1, e1), (0, e1, 5));
    // An epoch later than any known: "none", no error.
    assert_eq!(epoch_end(&server, second, e1, e1 + 1), (0, -1, -1));
    // A client on stale metadata is fenced, one ahead of this broker told
    // its epoch is unknown, and a broker that does not lead says so.
    assert_eq!(epoch_end(&server, second, e0, e0).0, FENCED);
    assert_eq!(epoch_end(&server, second, e1 + 1, e0).0, UNKNOWN);
    let follower = (0..3).find(|&b| b != first && b != second).unwrap();
    assert_eq!(epoch_end(&server, follower, e1, e0).0, NOT_LEADER);

    // Each batch carries the epoch it was appended in.
    let (error, records) = fetch(&server, second, e1);
    assert_eq!(error, 0);
    assert_eq!(batch_epochs(records), vec![(0, e0), (3, e1)]);
    assert_eq!(fetch(&server, second, e0).0, FENCED);
    assert_eq!(fetch(&server, second, e1 + 1).0, UNKNOWN);
    assert_eq!(fetch(&server, second, -1).0, 0);

    // ListOffsets: the earliest offset's epoch is the one it was written
    // in, the latest's the current one.
    assert_eq!(list_offset(&server, second, e1, -2), (0, 0, e0));
    assert_eq!(list_offset(&server, second, e1, -1), (0, 5, e1));
    assert_eq!(list_offset(&server, second, e0, -1).0, FENCED);

    // Back from its crash, the first leader takes over again (the
    // preferred replica) in a third epoch; the second's ends at 5.
    server.cluster().restart(first);
    let until = Instant::now() + Duration::from_secs(10);
    let e2 = loop {
        let (at, epoch) = leader(&server);
        if at == first {
            break epoch;
        }
        assert!(Instant::now() < until, "the preferred leader is back");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(e2 > e1);
    assert_eq!(epoch_end(&server, first, e2, e1), (0, e1, 5));
    assert_eq!(produce(&server, first, 1, -1), 5);
    let (error, records) = fetch(&server, first, e2);
    assert_eq!(error, 0);
    assert_eq!(batch_epochs(records), vec![(0, e0), (3, e1), (5, e2)]);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

#[test]
fn a_fetch_past_what_the_new_leader_kept_is_told_where_its_epoch_ended() {
    // A reader at 5 whose last record was of e0 (one that read the two
    // records not yet replicated, as a replica does) was in step with the
    // first leader.
    let (server, (_, e0), (second, e1)) = cut_back();
    // The new leader kept epoch e0 up to 3 only: the reader at 5 is told
    // so at once, with no records, though it asked to wait for a byte
    // where there is none yet.
    let asked_at = Instant::now();
    let (error, diverging, records) = fetch_after(&server, second, 5, e0);
    assert!(asked_at.elapsed() < Duration::from_secs(5));
    assert_eq!((error, diverging), (0, (e0, 3)));
    assert!(records.is_empty());
    // Cut back to 3, it reads on in e1; a client naming no epoch (as
    // consumers do) is not checked.
    let (error, diverging, records) = fetch_after(&server, second, 3, e0);
    assert_eq!((error, diverging), (0, (-1, -1)));
    assert_eq!(batch_epochs(records), vec![(3, e1)]);
    assert_eq!(fetch_after(&server, second, 3, -1).1, (-1, -1));
    // An epoch this log never reached cannot be placed.
    let out_of_range = ResponseError::OffsetOutOfRange.code();
    assert_eq!(fetch_after(&server, second, 5, e1 + 1).0, out_of_range);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}
