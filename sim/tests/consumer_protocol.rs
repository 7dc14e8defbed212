//! The consumer group protocol (KIP-848) over the wire, with the test
//! client: partitions handed over only once given up, a member fenced at
//! its rebalance timeout or its session timeout (both delayed operations
//! in the coordinator's purgatory), commits at the member epoch, and
//! groups of other protocol types kept apart.

use broker_sim::live::{GroupConfig, LiveConfig};
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{commit_request, Client};
use broker_sim::wire::Limits;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    DescribeGroupsRequest, FindCoordinatorRequest, GroupId, JoinGroupRequest, ListGroupsRequest,
    OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use uuid::Uuid;

const GROUP: &str = "kip848";
const HEARTBEAT_V: i16 = 1;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A cluster with a 4-partition topic "orders" whose consumer-protocol
/// members are fenced after `session` without a heartbeat.
fn server(session: Duration) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig {
            groups: GroupConfig {
                consumer_session_timeout: session,
                consumer_heartbeat_interval: Duration::from_millis(100),
                ..GroupConfig::default()
            },
            ..LiveConfig::default()
        },
        topics: vec![("orders".into(), 4)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

/// Stops the server: every parked operation (sessions and rebalance
/// timeouts among them) answered once, every check held.
fn passes(server: Server) {
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

fn coordinator(server: &Server, group: &str) -> SocketAddr {
    let mut r = FindCoordinatorRequest::default();
    r.key = s(group);
    let found = Client::connect(server.addrs()[0]).call(&r, 2);
    assert_eq!(found.error_code, 0);
    format!("{}:{}", found.host.as_str(), found.port)
        .parse()
        .unwrap()
}

/// A member's side of the protocol: its id, epoch and what it owns.
struct Member {
    addr: SocketAddr,
    id: String,
    epoch: i32,
    owned: BTreeSet<(Uuid, i32)>,
}

impl Member {
    fn new(addr: SocketAddr, id: &str) -> Member {
        Member {
            addr,
            id: id.to_string(),
            epoch: 0,
            owned: BTreeSet::new(),
        }
    }

    fn send(&self, r: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse {
        Client::connect(self.addr).call(&r, HEARTBEAT_V)
    }

    fn request(&self) -> ConsumerGroupHeartbeatRequest {
        let mut r = ConsumerGroupHeartbeatRequest::default();
        r.group_id = GroupId(s(GROUP));
        r.member_id = s(&self.id);
        r.member_epoch = self.epoch;
        r.rebalance_timeout_ms = -1;
        r
    }

    /// Joins with a rebalance timeout of `rebalance`.
    fn join(&mut self, rebalance: Duration) -> ConsumerGroupHeartbeatResponse {
        let mut r = self.request();
        r.rebalance_timeout_ms = rebalance.as_millis() as i32;
        r.subscribed_topic_names = Some(vec![TopicName(s("orders"))]);
        r.topic_partitions = Some(Vec::new());
        self.answered(r)
    }

    /// What it owns, as a heartbeat's field.
    fn owned_field(&self) -> Vec<TopicPartitions> {
        let mut owned: Vec<TopicPartitions> = Vec::new();
        for (t, p) in &self.owned {
            match owned.iter_mut().find(|o| o.topic_id == *t) {
                Some(o) => o.partitions.push(*p),
                None => {
                    let mut o = TopicPartitions::default();
                    o.topic_id = *t;
                    o.partitions = vec![*p];
                    owned.push(o);
                }
            }
        }
        owned
    }

    /// Heartbeats, saying what it owns, and takes what it is given.
    fn beat(&mut self) -> ConsumerGroupHeartbeatResponse {
        let mut r = self.request();
        r.topic_partitions = Some(self.owned_field());
        self.answered(r)
    }

    fn answered(&mut self, r: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse {
        let got = self.send(r);
        if got.error_code == 0 {
            self.epoch = got.member_epoch;
            if let Some(a) = &got.assignment {
                self.owned = a
                    .topic_partitions
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
                    .collect();
            }
        }
        got
    }
}

/// The members ConsumerGroupDescribe lists, with their epochs.
fn described(addr: SocketAddr) -> (String, Vec<(String, i32)>) {
    let mut r = ConsumerGroupDescribeRequest::default();
    r.group_ids = vec![GroupId(s(GROUP))];
    let got = Client::connect(addr).call(&r, 1);
    let g = &got.groups[0];
    assert_eq!(g.error_code, 0, "{g:?}");
    let members = g
        .members
        .iter()
        .map(|m| {
            assert_eq!(m.client_host.as_str(), "/127.0.0.1", "{m:?}");
            (m.member_id.to_string(), m.member_epoch)
        })
        .collect();
    (g.group_state.to_string(), members)
}

#[test]
fn a_member_keeping_what_it_must_give_up_is_fenced_at_its_rebalance_timeout() {
    let server = server(Duration::from_secs(30));
    let addr = coordinator(&server, GROUP);
    let mut a = Member::new(addr, "member-a");
    let mut b = Member::new(addr, "member-b");
    assert_eq!(a.join(Duration::from_millis(1000)).error_code, 0);
    assert_eq!((a.epoch, a.owned.len()), (1, 4));
    // b joins and waits for a's partitions.
    assert_eq!(b.join(Duration::from_secs(30)).error_code, 0);
    assert_eq!((b.epoch, b.owned.len()), (2, 0));
    // a is told to give two up, and does not.
    let mut keeping_all = a.request();
    keeping_all.topic_partitions = Some(a.owned_field());
    let told = a.send(keeping_all);
    assert_eq!(told.error_code, 0);
    assert_eq!(told.member_epoch, 1, "its epoch waits for the revocation");
    assert_eq!(
        told.assignment.expect("a new assignment").topic_partitions[0]
            .partitions
            .len(),
        2
    );
    // Before its rebalance timeout nothing moves to b.
    assert_eq!(b.beat().error_code, 0);
    assert!(b.owned.is_empty());
    std::thread::sleep(Duration::from_millis(1600));
    // a was fenced: b takes all four at a new epoch.
    assert_eq!(b.beat().error_code, 0);
    assert_eq!((b.epoch, b.owned.len()), (3, 4));
    assert_eq!(a.beat().error_code, ResponseError::UnknownMemberId.code());
    assert_eq!(
        described(addr),
        ("Stable".to_string(), vec![("member-b".to_string(), 3)])
    );
    passes(server);
}

#[test]
fn a_member_not_heard_from_is_fenced_at_its_session_timeout() {
    let session = Duration::from_millis(1500);
    let server = server(session);
    let addr = coordinator(&server, GROUP);
    let mut a = Member::new(addr, "member-a");
    let mut b = Member::new(addr, "member-b");
    a.join(Duration::from_secs(30));
    b.join(Duration::from_secs(30));
    // They settle: two partitions each.
    for _ in 0..3 {
        a.beat();
        b.beat();
    }
    assert_eq!((a.owned.len(), b.owned.len()), (2, 2));
    assert_eq!(described(addr).0, "Stable");
    // b falls silent; a keeps beating and, past b's session, gets all.
    let silent = Instant::now();
    while a.owned.len() < 4 {
        assert!(silent.elapsed() < session * 4, "b was not fenced");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(a.beat().error_code, 0);
    }
    assert!(
        silent.elapsed() >= session,
        "fenced before its session timeout"
    );
    assert_eq!(b.beat().error_code, ResponseError::UnknownMemberId.code());
    // a's heartbeats kept its own session going all along.
    assert_eq!(described(addr).1, vec![("member-a".to_string(), a.epoch)]);
    passes(server);
}

#[test]
fn commits_and_offset_fetches_are_checked_against_the_member_epoch() {
    let server = server(Duration::from_secs(30));
    let addr = coordinator(&server, GROUP);
    let mut a = Member::new(addr, "member-a");
    a.join(Duration::from_secs(30));
    let commit = |epoch: i32, version: i16| {
        let r = commit_request(GROUP, epoch, "member-a", &[("orders", 0, 42)]);
        Client::connect(addr).call(&r, version).topics[0].partitions[0].error_code
    };
    assert_eq!(commit(a.epoch, 9), 0);
    assert_eq!(
        commit(a.epoch + 1, 9),
        ResponseError::StaleMemberEpoch.code()
    );
    assert_eq!(commit(a.epoch, 8), ResponseError::UnsupportedVersion.code());
    let fetch = |epoch: i32| {
        let mut g = OffsetFetchRequestGroup::default();
        g.group_id = GroupId(s(GROUP));
        g.member_id = Some(s("member-a"));
        g.member_epoch = epoch;
        g.topics = None;
        let mut r = OffsetFetchRequest::default();
        r.groups = vec![g];
        let got = Client::connect(addr).call(&r, 9);
        let g = &got.groups[0];
        let offset = g.topics.first().map(|t| t.partitions[0].committed_offset);
        (g.error_code, offset)
    };
    assert_eq!(fetch(a.epoch), (0, Some(42)));
    assert_eq!(fetch(a.epoch - 1).0, ResponseError::StaleMemberEpoch.code());
    passes(server);
}

#[test]
fn groups_of_other_protocol_types_keep_to_their_kind() {
    let server = server(Duration::from_secs(30));
    let addr = coordinator(&server, GROUP);
    let mut a = Member::new(addr, "member-a");
    a.join(Duration::from_secs(30));
    // A classic member of another protocol type (Kafka Connect's, say) is
    // refused by a consumer group with members. (One of the consumer
    // protocol type joins it: tests/mixed_groups.rs.)
    let mut p = JoinGroupRequestProtocol::default();
    p.name = s("sessioned");
    p.metadata = Bytes::from_static(b"worker");
    let mut j = JoinGroupRequest::default();
    j.group_id = GroupId(s(GROUP));
    j.session_timeout_ms = 10_000;
    j.rebalance_timeout_ms = 10_000;
    j.member_id = s("");
    j.protocol_type = s("connect");
    j.protocols = vec![p];
    let joined = Client::connect(addr).call(&j, 5);
    assert_eq!(
        joined.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
    // DescribeGroups describes classic groups only; ListGroups gives the type.
    let mut d = DescribeGroupsRequest::default();
    d.groups = vec![GroupId(s(GROUP))];
    let got = Client::connect(addr).call(&d, 6);
    assert_eq!(
        got.groups[0].error_code,
        ResponseError::GroupIdNotFound.code()
    );
    let mut l = ListGroupsRequest::default();
    l.types_filter = vec![s("consumer")];
    let listed = Client::connect(addr).call(&l, 5);
    let row: Vec<_> = listed
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.0.to_string(),
                g.group_type.to_string(),
                g.group_state.to_string(),
            )
        })
        .collect();
    assert_eq!(
        row,
        vec![(
            GROUP.to_string(),
            "consumer".to_string(),
            "Stable".to_string()
        )]
    );
    // Once it has left, the empty group takes a classic member.
    let mut leave = a.request();
    leave.member_epoch = -1;
    assert_eq!(a.send(leave).error_code, 0);
    let joined = Client::connect(addr).call(&j, 5);
    assert_eq!(joined.error_code, ResponseError::MemberIdRequired.code());
    // And a consumer-protocol member is refused by a classic group of
    // another protocol type.
    j.member_id = joined.member_id.clone();
    let joined = Client::connect(addr).call(&j, 5);
    assert_eq!(joined.error_code, 0);
    let mut c = Member::new(addr, "member-c");
    assert_eq!(
        c.join(Duration::from_secs(30)).error_code,
        ResponseError::GroupIdNotFound.code()
    );
    passes(server);
}

#[test]
fn malformed_heartbeats_are_refused_with_kafkas_errors() {
    let server = server(Duration::from_secs(30));
    let addr = coordinator(&server, GROUP);
    let m = Member::new(addr, "member-a");
    // A join must give its rebalance timeout and subscription.
    let r = m.request();
    let got = m.send(r);
    assert_eq!(got.error_code, ResponseError::InvalidRequest.code());
    assert!(got.error_message.is_some());
    let mut r = m.request();
    r.rebalance_timeout_ms = 1000;
    r.topic_partitions = Some(Vec::new());
    r.subscribed_topic_names = Some(vec![]);
    r.server_assignor = Some(s("sticky-ish"));
    assert_eq!(
        m.send(r).error_code,
        ResponseError::UnsupportedAssignor.code()
    );
    let mut r = m.request();
    r.rebalance_timeout_ms = 1000;
    r.topic_partitions = Some(Vec::new());
    r.subscribed_topic_regex = Some(s("orders("));
    assert_eq!(
        m.send(r).error_code,
        ResponseError::InvalidRegularExpression.code()
    );
    let mut r = m.request();
    r.member_id = s("");
    assert_eq!(m.send(r).error_code, ResponseError::InvalidRequest.code());
    // Only a join makes a group; none of the refused ones did.
    let mut r = m.request();
    r.member_epoch = 3;
    assert_eq!(m.send(r).error_code, ResponseError::GroupIdNotFound.code());
    assert!(server.cluster().group_view(GROUP).is_none());
    // A heartbeat to a broker that does not coordinate the group.
    let other = server.addrs().iter().copied().find(|a| *a != addr).unwrap();
    let stray = Member::new(other, "member-a");
    assert_eq!(
        stray.send(stray.request()).error_code,
        ResponseError::NotCoordinator.code()
    );
    passes(server);
}

#[test]
fn after_the_coordinator_crashes_members_carry_on_at_the_next_one() {
    let server = server(Duration::from_secs(30));
    let old = coordinator(&server, GROUP);
    let mut a = Member::new(old, "member-a");
    a.join(Duration::from_secs(30));
    assert_eq!((a.epoch, a.owned.len()), (1, 4));
    let broker = server.addrs().iter().position(|&x| x == old).unwrap();
    server.cluster().crash(broker as u32);
    // Another live broker coordinates the group now. As Kafka's does after
    // loading the group from its log, it knows the member: its heartbeat
    // goes on at its epoch, with its partitions, and nothing rebalances.
    let mut r = FindCoordinatorRequest::default();
    r.key = s(GROUP);
    let live = server.addrs().iter().copied().find(|&x| x != old).unwrap();
    let found = Client::connect(live).call(&r, 2);
    let new: SocketAddr = format!("{}:{}", found.host.as_str(), found.port)
        .parse()
        .unwrap();
    assert_ne!(new, old);
    a.addr = new;
    let beat = a.beat();
    assert_eq!(beat.error_code, 0);
    assert_eq!(beat.member_epoch, 1);
    assert_eq!(a.owned.len(), 4);
    assert_eq!(
        described(new),
        ("Stable".to_string(), vec![("member-a".to_string(), 1)])
    );
    passes(server);
}
