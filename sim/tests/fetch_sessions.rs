//! Incremental fetch sessions (KIP-227) over the wire, with the test
//! client: a session opened with a full fetch, later fetches naming only
//! what changed and answered only what is new, a long poll that waits on
//! every partition of its session, forgotten partitions, and the
//! session errors.

use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, produce_request, Client};
use broker_sim::wire::Limits;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// By topic name (v13 and later name topics by id).
const FETCH_V: i16 = 12;
const PRODUCE_V: i16 = 8;

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// One broker leading "orders", three partitions.
fn server() -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig::one_broker(),
        topics: vec![("orders".into(), 3)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

/// A fetch of session `(id, epoch)` naming `parts` (partition, offset)
/// and forgetting `forget`.
fn fetch(session: (i32, i32), parts: &[(i32, i64)], forget: &[i32], wait_ms: i32) -> FetchRequest {
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = wait_ms;
    r.min_bytes = 1;
    r.max_bytes = 50 << 20;
    (r.session_id, r.session_epoch) = session;
    if !parts.is_empty() {
        let mut t = FetchTopic::default();
        t.topic = name("orders");
        t.partitions = parts
            .iter()
            .map(|&(partition, offset)| {
                let mut p = FetchPartition::default();
                p.partition = partition;
                p.fetch_offset = offset;
                p.partition_max_bytes = 1 << 20;
                p
            })
            .collect();
        r.topics = vec![t];
    }
    if !forget.is_empty() {
        let mut f = ForgottenTopic::default();
        f.topic = name("orders");
        f.partitions = forget.to_vec();
        r.forgotten_topics_data = vec![f];
    }
    r
}

/// The partitions answered, with whether each carried records.
fn answered(r: &FetchResponse) -> Vec<(i32, bool)> {
    let mut out: Vec<(i32, bool)> = r
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            (
                p.partition_index,
                p.records.as_ref().is_some_and(|b| !b.is_empty()),
            )
        })
        .collect();
    out.sort();
    out
}

fn produce(addr: SocketAddr, partition: i32) {
    let r = produce_request("orders", &[(partition, batch(&[b"x"]))], 1, 5_000);
    let got = Client::connect(addr).call(&r, PRODUCE_V);
    assert_eq!(got.responses[0].partition_responses[0].error_code, 0);
}

#[test]
fn a_session_answers_only_what_changed_and_its_long_poll_watches_all_its_partitions() {
    let server = server();
    let addr = server.addrs()[0];
    produce(addr, 0);
    let mut c = Client::connect(addr);
    // A full fetch opens the session: every partition answered.
    let full = c.call(&fetch((0, 0), &[(0, 0), (1, 0), (2, 0)], &[], 0), FETCH_V);
    assert_eq!(full.error_code, 0);
    let id = full.session_id;
    assert_ne!(id, 0, "a session was opened");
    assert_eq!(answered(&full), [(0, true), (1, false), (2, false)]);
    // Past the record in partition 0: nothing is new, so the fetch waits
    // its whole max wait and is answered no partition.
    let start = Instant::now();
    let quiet = c.call(&fetch((id, 1), &[(0, 1)], &[], 300), FETCH_V);
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert_eq!((quiet.error_code, quiet.session_id), (0, id));
    assert_eq!(answered(&quiet), []);
    // Naming nothing, it still waits on all three: a record in partition
    // 2 wakes it, and only partition 2 is answered.
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        produce(addr, 2);
    });
    let start = Instant::now();
    let woken = c.call(&fetch((id, 2), &[], &[], 10_000), FETCH_V);
    producer.join().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "woken by the record"
    );
    assert_eq!(answered(&woken), [(2, true)]);
    // The same epoch again, an unknown session, an epoch without one.
    let stale = c.call(&fetch((id, 2), &[], &[], 0), FETCH_V);
    assert_eq!(
        stale.error_code,
        ResponseError::InvalidFetchSessionEpoch.code()
    );
    assert!(stale.responses.is_empty());
    let unknown = c.call(&fetch((id ^ 1, 1), &[], &[], 0), FETCH_V);
    assert_eq!(
        unknown.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );
    let none = c.call(&fetch((0, 4), &[], &[], 0), FETCH_V);
    assert_eq!(
        none.error_code,
        ResponseError::InvalidFetchSessionEpoch.code()
    );
    // Partition 2 forgotten (and 2's position moved past its record): a
    // record there no longer wakes the session.
    let forgot = c.call(&fetch((id, 3), &[], &[2], 0), FETCH_V);
    assert_eq!(forgot.error_code, 0);
    produce(addr, 2);
    let start = Instant::now();
    let after = c.call(&fetch((id, 4), &[], &[], 300), FETCH_V);
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert_eq!(answered(&after), []);
    // The last fetch of a session closes it: answered as sessionless.
    let last = c.call(&fetch((id, -1), &[(1, 0)], &[], 0), FETCH_V);
    assert_eq!((last.error_code, last.session_id), (0, 0));
    assert_eq!(answered(&last), [(1, false)]);
    let gone = c.call(&fetch((id, 5), &[], &[], 0), FETCH_V);
    assert_eq!(
        gone.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

#[test]
fn a_fetch_before_sessions_and_a_sessionless_one_are_answered_in_full() {
    let server = server();
    let addr = server.addrs()[0];
    let mut c = Client::connect(addr);
    for (version, session) in [(6, (0, -1)), (FETCH_V, (0, -1))] {
        let got = c.call(&fetch(session, &[(0, 0), (1, 0)], &[], 0), version);
        assert_eq!((got.error_code, got.session_id), (0, 0), "v{version}");
        assert_eq!(answered(&got), [(0, false), (1, false)], "v{version}");
    }
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

#[test]
fn a_session_naming_topics_by_id_forgets_them_by_id() {
    use kafka_protocol::messages::MetadataRequest;
    let server = server();
    let addr = server.addrs()[0];
    let mut c = Client::connect(addr);
    let mut all = MetadataRequest::default();
    all.topics = None;
    let id = c.call(&all, 12).topics[0].topic_id;
    // From v13 a fetch names topics by id (their names left empty).
    let by_id = |mut r: FetchRequest| {
        for t in &mut r.topics {
            (t.topic, t.topic_id) = (TopicName::default(), id);
        }
        for f in &mut r.forgotten_topics_data {
            (f.topic, f.topic_id) = (TopicName::default(), id);
        }
        r
    };
    const BY_ID_V: i16 = 13;
    let full = c.call(&by_id(fetch((0, 0), &[(0, 0), (1, 0)], &[], 0)), BY_ID_V);
    let session = full.session_id;
    assert_ne!(session, 0);
    assert_eq!(full.responses[0].topic_id, id);
    assert_eq!(answered(&full), [(0, false), (1, false)]);
    // Partition 1 forgotten by id: a record there wakes nothing; one in
    // partition 0 does, answered by id.
    c.call(&by_id(fetch((session, 1), &[], &[1], 0)), BY_ID_V);
    produce(addr, 1);
    let start = Instant::now();
    let quiet = c.call(&by_id(fetch((session, 2), &[], &[], 300)), BY_ID_V);
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert_eq!(answered(&quiet), []);
    produce(addr, 0);
    let woken = c.call(&by_id(fetch((session, 3), &[], &[], 5_000)), BY_ID_V);
    assert_eq!(answered(&woken), [(0, true)]);
    assert_eq!(woken.responses[0].topic_id, id);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

#[test]
fn a_restarted_broker_has_no_sessions_and_leads_again_with_its_records() {
    let server = server();
    let addr = server.addrs()[0];
    produce(addr, 0);
    let mut c = Client::connect(addr);
    let full = c.call(&fetch((0, 0), &[(0, 0)], &[], 0), FETCH_V);
    let id = full.session_id;
    assert_ne!(id, 0);
    // The only replica of every partition goes down and comes back: it
    // holds every committed record, so it leads them again.
    server.cluster().crash(0);
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(addr).is_ok() {
        assert!(Instant::now() < deadline, "still listening");
        std::thread::sleep(Duration::from_millis(10));
    }
    server.cluster().restart(0);
    let mut c = loop {
        if let Ok(stream) = std::net::TcpStream::connect(addr) {
            drop(stream);
            break Client::connect(addr);
        }
        assert!(Instant::now() < deadline, "listening again");
        std::thread::sleep(Duration::from_millis(10));
    };
    let gone = c.call(&fetch((id, 1), &[], &[], 0), FETCH_V);
    assert_eq!(
        gone.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );
    let again = c.call(&fetch((0, 0), &[(0, 0)], &[], 0), FETCH_V);
    assert_eq!(again.error_code, 0);
    assert_eq!(answered(&again), [(0, true)], "the record is still there");
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}
