//! A crashed broker is fenced only `broker_session_timeout` after its
//! crash, as Kafka's controller fences a broker whose heartbeats stopped:
//! until then the metadata still lists it and names it leader, nothing
//! answers there, and an `acks=all` produce it was in sync for waits;
//! then its partitions move, and its groups, whose sessions waited.

use broker_sim::live::{GroupConfig, LiveConfig};
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, produce_request, Client};
use broker_sim::wire::Limits;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, MetadataRequest, MetadataResponse,
    SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::time::{Duration, Instant};

const SESSION: Duration = Duration::from_secs(3);

fn server() -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig {
            broker_session_timeout: SESSION,
            groups: GroupConfig {
                initial_rebalance_delay: Duration::ZERO,
                min_session_timeout: Duration::from_millis(100),
                ..GroupConfig::default()
            },
            ..LiveConfig::default()
        },
        topics: vec![("orders".into(), 3)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

/// Metadata of "orders" from broker `at`.
fn metadata(server: &Server, at: u32) -> MetadataResponse {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(TopicName(StrBytes::from_static_str("orders")));
    let mut r = MetadataRequest::default();
    r.topics = Some(vec![t]);
    Client::connect(server.addrs()[at as usize]).call(&r, 12)
}

/// The brokers listed, and each partition's (leader, epoch).
fn view(m: &MetadataResponse) -> (Vec<i32>, Vec<(i32, i32)>) {
    let brokers = m.brokers.iter().map(|b| b.node_id.0).collect();
    let mut parts: Vec<_> = m.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0, p.leader_epoch))
        .collect();
    parts.sort();
    (brokers, parts.into_iter().map(|(_, l, e)| (l, e)).collect())
}

#[test]
fn a_crashed_broker_keeps_its_place_until_its_session_runs_out() {
    let server = server();
    let cluster = server.cluster();
    let before = view(&metadata(&server, 0));
    let (dead, _) = before.1[0];
    let alive = (0..3).find(|&b| b != dead).unwrap() as u32;
    // A partition led elsewhere, with the dead broker in its ISR.
    let (other, (other_leader, _)) = before
        .1
        .iter()
        .copied()
        .enumerate()
        .find(|&(_, (l, _))| l != dead)
        .unwrap();
    let crashed_at = Instant::now();
    cluster.crash(dead as u32);
    // Nothing answers there, once the front has closed its listener.
    let closing = Instant::now() + Duration::from_secs(1);
    while std::net::TcpStream::connect(server.addrs()[dead as usize]).is_ok() {
        assert!(Instant::now() < closing, "still listening");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The cluster has not noticed: same brokers, same leaders, same epochs.
    assert_eq!(view(&metadata(&server, alive)), before);
    // An acks=all produce it is in sync for waits for the fencing.
    let r = produce_request("orders", &[(other as i32, batch(&[b"x"]))], -1, 10_000);
    let answer = Client::connect(server.addrs()[other_leader as usize]).call(&r, 9);
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    assert!(
        crashed_at.elapsed() >= SESSION - Duration::from_millis(100),
        "answered {:?} after the crash",
        crashed_at.elapsed()
    );
    // Fenced: gone from the metadata, its partition led by another broker
    // in a new epoch.
    let after = view(&metadata(&server, alive));
    assert!(!after.0.contains(&dead), "{after:?}");
    assert_ne!(after.1[0].0, dead);
    assert_eq!(after.1[0].1, before.1[0].1 + 1);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

#[test]
fn a_broker_back_before_its_session_runs_out_is_fenced_first_then_leads_again() {
    let server = server();
    let cluster = server.cluster();
    let before = view(&metadata(&server, 0));
    let (dead, epoch) = before.1[0];
    cluster.crash(dead as u32);
    cluster.restart(dead as u32);
    // Its crashed incarnation was fenced at the restart: the partition
    // moved away, then (the preferred replica back in sync) back to it.
    let until = Instant::now() + Duration::from_secs(10);
    let alive = (0..3).find(|&b| b != dead).unwrap() as u32;
    loop {
        let (brokers, parts) = view(&metadata(&server, alive));
        if brokers.contains(&dead) && parts[0] == (dead, epoch + 2) {
            break;
        }
        assert!(Instant::now() < until, "{brokers:?} {parts:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// A member of group `group` at broker `at` whose session lasts `session`:
/// joined and synced (generation 1); returns its member id.
fn member(server: &Server, at: u32, group: &str, session: Duration) -> String {
    let mut c = Client::connect(server.addrs()[at as usize]);
    let mut p = JoinGroupRequestProtocol::default();
    p.name = s("range");
    let mut r = JoinGroupRequest::default();
    r.group_id = GroupId(s(group));
    r.session_timeout_ms = session.as_millis() as i32;
    r.rebalance_timeout_ms = 5_000;
    r.protocol_type = s("consumer");
    r.protocols = vec![p];
    let first = c.call(&r, 5);
    r.member_id = first.member_id.clone();
    let joined = c.call(&r, 5);
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    let mut a = SyncGroupRequestAssignment::default();
    a.member_id = joined.member_id.clone();
    let mut sync = SyncGroupRequest::default();
    sync.group_id = GroupId(s(group));
    sync.generation_id = 1;
    sync.member_id = joined.member_id.clone();
    sync.assignments = vec![a];
    assert_eq!(c.call(&sync, 3).error_code, 0);
    joined.member_id.to_string()
}

fn heartbeat(server: &Server, at: u32, group: &str, member: &str) -> i16 {
    let mut r = HeartbeatRequest::default();
    r.group_id = GroupId(s(group));
    r.generation_id = 1;
    r.member_id = s(member);
    Client::connect(server.addrs()[at as usize])
        .call(&r, 3)
        .error_code
}

#[test]
fn a_group_waits_for_its_next_coordinator_however_long_the_fencing_takes() {
    let server = server();
    let cluster = server.cluster();
    let home = cluster.group_coordinator("held").unwrap();
    // Its session is a third of the time the crash goes unnoticed.
    let session = SESSION / 3;
    let m = member(&server, home, "held", session);
    cluster.crash(home);
    // Nothing expired it while its coordinator was gone; the next one
    // knows it.
    kept_once_moved(server, "held", &m, &[home]);
}

/// Waits until group `group` has a coordinator other than those in
/// `away`, and checks that member `m` is still in it there and that no
/// session expired.
fn kept_once_moved(server: Server, group: &str, m: &str, away: &[u32]) {
    let cluster = server.cluster();
    let until = Instant::now() + Duration::from_secs(15);
    let now_at = loop {
        match cluster.group_coordinator(group) {
            Some(at) if !away.contains(&at) => break at,
            _ => assert!(Instant::now() < until, "the group never moved"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(heartbeat(&server, now_at, group, m), 0);
    let expired = &cluster.checks.sessions_expired;
    assert_eq!(expired.load(std::sync::atomic::Ordering::Relaxed), 0);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

/// Where the group's next coordinator has crashed too, unfenced, its
/// sessions wait for that one's fencing as well.
#[test]
fn a_group_whose_next_coordinator_crashed_too_waits_for_its_fencing() {
    let server = server();
    let cluster = server.cluster();
    let home = cluster.group_coordinator("twice").unwrap();
    // The brokers that coordinate a group come in order after its first.
    let next = (home + 1) % 3;
    let session = SESSION / 3;
    let m = member(&server, home, "twice", session);
    cluster.crash(home);
    // Fenced a session and more after the first: the group reaches it
    // unfenced, and its sessions would run out there before its fencing.
    std::thread::sleep(SESSION * 2 / 3);
    cluster.crash(next);
    kept_once_moved(server, "twice", &m, &[home, next]);
}
