//! SASL listeners (`--sasl-user`) over 127.0.0.1, driven by the test
//! client on the `kafka-protocol` crate's codecs: nothing but SASL before
//! a client authenticates, a refusal answered late and the connection
//! closed, and the user authenticated as the one quotas are looked up
//! for. (Real clients by every mechanism: `real_clients.rs`.)

use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, produce_request, quota_request, Client};
use broker_sim::wire::Limits;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

fn sasl_server(topics: &[(&str, u32)]) -> Server {
    let users = [("alice", "alice-secret"), ("bob", "bob-secret")];
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig {
            sasl_users: (users.iter())
                .map(|(u, p)| (u.to_string(), p.to_string()))
                .collect(),
            ..LiveConfig::default()
        },
        topics: topics.iter().map(|(n, p)| (n.to_string(), *p)).collect(),
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

fn metadata(topic: &str) -> MetadataRequest {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(TopicName(StrBytes::from_string(topic.to_string())));
    let mut r = MetadataRequest::default();
    r.topics = Some(vec![t]);
    r
}

/// Where the leader of `topic`'s partition 0 listens, asked as `c`.
fn leader_of(c: &mut Client, topic: &str) -> SocketAddr {
    let m = c.call(&metadata(topic), 9);
    let leader = m.topics[0].partitions[0].leader_id;
    let b = m.brokers.iter().find(|b| b.node_id == leader).unwrap();
    format!("{}:{}", b.host.as_str(), b.port).parse().unwrap()
}

#[test]
fn nothing_but_sasl_is_served_before_a_client_authenticates() {
    let server = sasl_server(&[("sasl", 1)]);
    let addr = server.addrs()[0];

    // ApiVersions is served, and lists the SASL APIs.
    let mut c = Client::connect(addr);
    let versions = c.call(&ApiVersionsRequest::default(), 3);
    let listed = |api: ApiKey| {
        (versions.api_keys.iter())
            .find(|v| v.api_key == api as i16)
            .map(|v| (v.min_version, v.max_version))
    };
    assert_eq!(listed(ApiKey::SaslHandshake), Some((0, 1)));
    assert_eq!(listed(ApiKey::SaslAuthenticate), Some((0, 2)));
    // Anything else closes the connection unanswered.
    c.send(&metadata("sasl"), 9);
    assert!(c.read_frame().is_none(), "answered before authenticating");

    // A token before the handshake closes it too.
    let mut c = Client::connect(addr);
    let mut token = SaslAuthenticateRequest::default();
    token.auth_bytes = bytes::Bytes::from_static(b"\0alice\0alice-secret");
    c.send(&token, 2);
    assert!(c.read_frame().is_none());

    // A mechanism not served is answered with those that are, then the
    // connection closes.
    let mut c = Client::connect(addr);
    let mut handshake = SaslHandshakeRequest::default();
    handshake.mechanism = StrBytes::from_static_str("GSSAPI");
    let r = c.call(&handshake, 1);
    assert_eq!(r.error_code, ResponseError::UnsupportedSaslMechanism.code());
    let mechanisms: Vec<&str> = r.mechanisms.iter().map(|m| m.as_str()).collect();
    assert_eq!(mechanisms, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    assert!(c.read_frame().is_none());

    // A wrong password is answered no sooner than 100 ms, with Kafka's
    // message.
    let start = Instant::now();
    let refused = Client::connect_plain(addr, "alice", "guess").err();
    assert!(start.elapsed() >= Duration::from_millis(100));
    assert_eq!(
        refused,
        Some((
            ResponseError::SaslAuthenticationFailed.code(),
            "Authentication failed: Invalid username or password".to_string()
        ))
    );

    // Authenticated, the connection is served; SASL is then refused.
    let mut alice = Client::connect_plain(addr, "alice", "alice-secret").expect("alice");
    let m = alice.call(&metadata("sasl"), 9);
    assert_eq!(m.topics[0].error_code, 0);
    let again = alice.call(&handshake, 1);
    assert_eq!(again.error_code, ResponseError::IllegalSaslState.code());
    let m = alice.call(&metadata("sasl"), 9);
    assert_eq!(m.topics[0].error_code, 0);

    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    // The mechanism not served and the wrong password; the requests
    // before a login count as refused.
    assert_eq!(report.count("authentications failed"), Some(2));
    assert_eq!(report.count("connections refused a request"), Some(2));
}

#[test]
fn a_users_quota_applies_to_the_user_its_connection_authenticated_as() {
    let server = sasl_server(&[("metered", 1)]);
    let addr = server.addrs()[0];
    let mut admin = Client::connect_plain(addr, "bob", "bob-secret").expect("bob");
    let quota = quota_request("user", Some("alice"), "producer_byte_rate", 1000.0);
    assert_eq!(admin.call(&quota, 1).entries[0].error_code, 0);
    let leader = leader_of(&mut admin, "metered");

    // 20 KB at once: twice what alice's quota lets through in its window.
    let big = vec![b'x'; 20_000];
    let produce = produce_request("metered", &[(0, batch(&[&big]))], -1, 5000);
    let throttle_ms = |user: &str, password: &str| {
        let mut c = Client::connect_plain(leader, user, password).expect("authenticated");
        let r = c.call(&produce, 8);
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        r.throttle_time_ms
    };
    assert_eq!(throttle_ms("bob", "bob-secret"), 0);
    assert!(throttle_ms("alice", "alice-secret") > 0);
    // Another produce of bob's, after alice's: still his own rate.
    assert_eq!(throttle_ms("bob", "bob-secret"), 0);

    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("answers throttled by a quota").unwrap() >= 1);
}

/// Logs in by PLAIN on `c` (a handshake v1, the token at v2); the
/// SaslAuthenticate answer's error code and session lifetime.
fn plain_login(c: &mut Client, user: &str, password: &str) -> (i16, i64) {
    let mut handshake = SaslHandshakeRequest::default();
    handshake.mechanism = StrBytes::from_static_str("PLAIN");
    assert_eq!(c.call(&handshake, 1).error_code, 0);
    let mut token = SaslAuthenticateRequest::default();
    token.auth_bytes = bytes::Bytes::from(format!("\0{user}\0{password}"));
    let answer = c.call(&token, 2);
    (answer.error_code, answer.session_lifetime_ms)
}

#[test]
fn a_login_that_runs_out_is_renewed_on_its_connection_or_the_connection_closes() {
    let server = Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig {
            sasl_users: [("alice", "alice-secret"), ("bob", "bob-secret")]
                .iter()
                .map(|(u, p)| (u.to_string(), p.to_string()))
                .collect(),
            sasl_reauth: Some(Duration::from_millis(1500)),
            ..LiveConfig::default()
        },
        topics: vec![("renewed".into(), 1)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts");
    let addr = server.addrs()[0];

    // The login says how long it lasts; renewed before then, the
    // connection is served past it.
    let mut c = Client::connect(addr);
    assert_eq!(plain_login(&mut c, "alice", "alice-secret"), (0, 1500));
    std::thread::sleep(Duration::from_millis(900));
    assert_eq!(plain_login(&mut c, "alice", "alice-secret"), (0, 1500));
    std::thread::sleep(Duration::from_millis(900));
    assert_eq!(c.call(&metadata("renewed"), 9).topics[0].error_code, 0);

    // Not renewed: the next request closes the connection unanswered.
    std::thread::sleep(Duration::from_millis(1600));
    c.send(&metadata("renewed"), 9);
    assert!(c.read_frame().is_none(), "served after the session ran out");

    // Renewed as someone else: refused, and the connection closed.
    let mut c = Client::connect(addr);
    assert_eq!(plain_login(&mut c, "alice", "alice-secret").0, 0);
    let refused = plain_login(&mut c, "bob", "bob-secret").0;
    assert_eq!(refused, ResponseError::SaslAuthenticationFailed.code());
    assert!(c.closed_by_server());

    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert_eq!(report.count("re-authentications"), Some(1));
    assert_eq!(report.count("authentications failed"), Some(1));
}
