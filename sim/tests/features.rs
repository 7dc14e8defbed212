//! Feature flags (KIP-584) over the wire, with the test client: what
//! ApiVersions announces at v3 and v4, UpdateFeatures' checks, and
//! `group.version` turning the consumer group protocol off and on.

use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::Client;
use broker_sim::wire::Limits;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    ApiVersionsRequest, ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest,
    FindCoordinatorRequest, GroupId, UpdateFeaturesRequest,
};
use kafka_protocol::protocol::StrBytes;
use std::net::SocketAddr;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn server() -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig::default(),
        topics: vec![("orders".into(), 2)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

/// The supported and finalized features ApiVersions announces at
/// `version`, and the epoch.
type Announced = (Vec<(String, i16, i16)>, Vec<(String, i16)>, i64);

fn announced(addr: SocketAddr, version: i16) -> Announced {
    let v = Client::connect(addr).call(&ApiVersionsRequest::default(), version);
    let mut supported: Vec<_> = (v.supported_features.iter())
        .map(|f| (f.name.to_string(), f.min_version, f.max_version))
        .collect();
    supported.sort();
    let mut finalized: Vec<_> = (v.finalized_features.iter())
        .map(|f| {
            assert_eq!(f.min_version_level, f.max_version_level);
            (f.name.to_string(), f.max_version_level)
        })
        .collect();
    finalized.sort();
    (supported, finalized, v.finalized_features_epoch)
}

fn update(feature: &str, level: i16, upgrade_type: i8) -> UpdateFeaturesRequest {
    let mut u = FeatureUpdateKey::default();
    u.feature = s(feature);
    u.max_version_level = level;
    u.upgrade_type = upgrade_type;
    let mut r = UpdateFeaturesRequest::default();
    r.feature_updates = vec![u];
    r
}

/// The broker coordinating `group`, as `addr` finds it.
fn coordinator(addr: SocketAddr, group: &str) -> SocketAddr {
    let mut r = FindCoordinatorRequest::default();
    r.key = s(group);
    let found = Client::connect(addr).call(&r, 2);
    assert_eq!(found.error_code, 0);
    format!("{}:{}", found.host.as_str(), found.port)
        .parse()
        .unwrap()
}

/// A consumer-protocol member's first heartbeat to `group`'s coordinator:
/// its error code.
fn join(addr: SocketAddr, group: &str) -> i16 {
    let addr = coordinator(addr, group);
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = GroupId(s(group));
    r.member_id = s(&format!("{group}-member"));
    r.rebalance_timeout_ms = 30_000;
    r.subscribed_topic_names = Some(vec![kafka_protocol::messages::TopicName(s("orders"))]);
    r.topic_partitions = Some(vec![]);
    Client::connect(addr).call(&r, 1).error_code
}

fn describe(addr: SocketAddr, group: &str) -> i16 {
    let addr = coordinator(addr, group);
    let mut r = ConsumerGroupDescribeRequest::default();
    r.group_ids = vec![GroupId(s(group))];
    let d = Client::connect(addr).call(&r, 1);
    assert_eq!(d.groups.len(), 1);
    d.groups[0].error_code
}

#[test]
fn api_versions_announces_the_features_and_hides_those_from_zero_before_v4() {
    let server = server();
    let addr = server.addrs()[0];
    let finalized = vec![
        ("group.version".to_string(), 1),
        ("metadata.version".to_string(), 22),
    ];
    assert_eq!(
        announced(addr, 4),
        (
            vec![
                ("group.version".into(), 0, 1),
                ("metadata.version".into(), 22, 22)
            ],
            finalized.clone(),
            0
        )
    );
    // Before v4 a supported range may not start at 0, as Kafka answers.
    assert_eq!(
        announced(addr, 3),
        (vec![("metadata.version".into(), 22, 22)], finalized, 0)
    );
    assert!(server.stop().violations.is_empty());
}

#[test]
fn the_group_version_turns_the_consumer_group_protocol_off_and_on() {
    let server = server();
    let addr = server.addrs()[0];
    let mut admin = Client::connect(addr);
    assert_eq!(join(addr, "before"), 0);

    // A downgrade must say so; a level beyond the supported range and a
    // feature not supported here are refused; none changes anything.
    let invalid = ResponseError::InvalidUpdateVersion.code();
    for (feature, level, upgrade_type) in [
        ("group.version", 0, 1),
        ("group.version", 2, 1),
        ("metadata.version", 21, 2),
        ("transaction.version", 2, 1),
    ] {
        let r = admin.call(&update(feature, level, upgrade_type), 1);
        assert_eq!(r.error_code, invalid, "{feature} {level}: {r:?}");
        assert!(r.results.is_empty(), "{r:?}");
    }
    // Validated only: nothing changes.
    let mut check = update("group.version", 0, 2);
    check.validate_only = true;
    assert_eq!(admin.call(&check, 1).error_code, 0);
    assert_eq!(announced(addr, 4).2, 0);

    // A safe downgrade to 0: the protocol is off, and group.version is no
    // longer finalized.
    let r = admin.call(&update("group.version", 0, 2), 1);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        (r.results.iter())
            .map(|f| (f.feature.to_string(), f.error_code))
            .collect::<Vec<_>>(),
        [("group.version".to_string(), 0)]
    );
    let (_, finalized, epoch) = announced(addr, 4);
    assert_eq!(
        (finalized, epoch),
        (vec![("metadata.version".into(), 22)], 1)
    );
    let unsupported = ResponseError::UnsupportedVersion.code();
    assert_eq!(join(addr, "during"), unsupported);
    assert_eq!(describe(addr, "before"), unsupported);

    // Back up (v2: no result per feature): served again.
    let r = admin.call(&update("group.version", 1, 1), 2);
    assert_eq!((r.error_code, r.results.len()), (0, 0), "{r:?}");
    assert_eq!(announced(addr, 4).2, 2);
    assert_eq!(join(addr, "after"), 0);
    assert_eq!(describe(addr, "after"), 0);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}
