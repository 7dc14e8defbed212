//! A crashed broker is fenced only `broker_session_timeout` after its
//! crash, as Kafka's controller fences a broker whose heartbeats stopped:
//! until then the metadata still lists it and names it leader, nothing
//! answers there, and an `acks=all` produce it was in sync for waits;
//! then its partitions move.

use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, produce_request, Client};
use broker_sim::wire::Limits;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::time::{Duration, Instant};

const SESSION: Duration = Duration::from_secs(3);

fn server() -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        live: LiveConfig {
            broker_session_timeout: SESSION,
            ..LiveConfig::default()
        },
        topics: vec![("orders".into(), 3)],
        limits: Limits::default(),
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
