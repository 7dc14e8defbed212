//! Groups with members of both protocols over the wire, with the test
//! client: a classic member (JoinGroup, SyncGroup, Heartbeat) in a
//! consumer-protocol group, a classic group turning consumer-protocol as a
//! ConsumerGroupHeartbeat joins it and back when its last such member
//! goes, and the classic members' rebalance timeouts in the purgatory;
//! and the limits on group sizes, which the conversions keep within.

use broker_sim::live::{GroupConfig, LiveConfig, MigrationPolicy};
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{commit_request, Client};
use broker_sim::wire::{decode_assignment, encode_assignment, Limits};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    ConsumerProtocolSubscription, FindCoordinatorRequest, GroupId, HeartbeatRequest,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, ListGroupsRequest, SyncGroupRequest,
    TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const GROUP: &str = "mixed";
const TOPIC: &str = "orders";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A cluster with a 4-partition topic whose consumer-protocol members are
/// fenced after `session` without a heartbeat; classic sessions may be as
/// short as 100 ms, and a classic group's first round does not wait.
fn server(session: Duration) -> Server {
    server_with(session, MigrationPolicy::Bidirectional)
}

/// The same, converting groups only as `policy` allows.
fn server_with(session: Duration, policy: MigrationPolicy) -> Server {
    server_of(GroupConfig {
        consumer_session_timeout: session,
        migration_policy: policy,
        ..GroupConfig::default()
    })
}

/// The same, with `groups`' session, policy and size limits.
fn server_of(groups: GroupConfig) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig {
            groups: GroupConfig {
                consumer_heartbeat_interval: Duration::from_millis(100),
                initial_rebalance_delay: Duration::ZERO,
                min_session_timeout: Duration::from_millis(100),
                ..groups
            },
            ..LiveConfig::default()
        },
        topics: vec![(TOPIC.into(), 4)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

/// Stops the server: every parked operation answered once, every check
/// (no partition owned twice among them) held.
fn passes(server: Server) {
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

fn coordinator(server: &Server) -> SocketAddr {
    let mut r = FindCoordinatorRequest::default();
    r.key = s(GROUP);
    let found = Client::connect(server.addrs()[0]).call(&r, 2);
    assert_eq!(found.error_code, 0);
    format!("{}:{}", found.host.as_str(), found.port)
        .parse()
        .unwrap()
}

type Owned = BTreeSet<i32>;

/// A consumer-protocol member subscribed to the topic.
struct Modern {
    addr: SocketAddr,
    id: String,
    epoch: i32,
    owned: Owned,
    topic_id: uuid::Uuid,
}

impl Modern {
    fn join(addr: SocketAddr, id: &str) -> Modern {
        Modern::join_as(addr, id, None)
    }

    /// Joins, as a static member if `instance` is given.
    fn join_as(addr: SocketAddr, id: &str, instance: Option<&str>) -> Modern {
        let mut m = Modern {
            addr,
            id: id.to_string(),
            epoch: 0,
            owned: Owned::new(),
            topic_id: uuid::Uuid::nil(),
        };
        let mut r = m.request();
        r.instance_id = instance.map(s);
        r.rebalance_timeout_ms = 30_000;
        r.subscribed_topic_names = Some(vec![TopicName(s(TOPIC))]);
        let got = m.answered(r);
        assert_eq!(got.error_code, 0, "{got:?}");
        m
    }

    fn request(&self) -> ConsumerGroupHeartbeatRequest {
        let mut r = ConsumerGroupHeartbeatRequest::default();
        r.group_id = GroupId(s(GROUP));
        r.member_id = s(&self.id);
        r.member_epoch = self.epoch;
        r.rebalance_timeout_ms = -1;
        let mut t =
            kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions::default();
        t.topic_id = self.topic_id;
        t.partitions = self.owned.iter().copied().collect();
        r.topic_partitions = Some(if self.owned.is_empty() {
            vec![]
        } else {
            vec![t]
        });
        r
    }

    /// Heartbeats, saying what it owns, and takes what it is given (so
    /// it gives up at once what it is told to).
    fn beat(&mut self) -> i16 {
        let r = self.request();
        self.answered(r).error_code
    }

    fn answered(&mut self, r: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse {
        let got: ConsumerGroupHeartbeatResponse = Client::connect(self.addr).call(&r, 1);
        if got.error_code == 0 {
            self.epoch = got.member_epoch;
            if let Some(a) = &got.assignment {
                self.owned = a
                    .topic_partitions
                    .iter()
                    .flat_map(|t| {
                        self.topic_id = t.topic_id;
                        t.partitions.clone()
                    })
                    .collect();
            }
        }
        got
    }

    fn leave(&mut self) -> i16 {
        let mut r = self.request();
        r.member_epoch = -1;
        Client::connect(self.addr).call(&r, 1).error_code
    }
}

/// A classic member of the consumer protocol type, subscribed to the
/// topic with the `range` protocol, reporting what it owns (version 1 of
/// the subscription).
struct Classic {
    addr: SocketAddr,
    id: String,
    /// Its `group.instance.id`, for a static member.
    instance: Option<String>,
    generation: i32,
    owned: Owned,
    rebalance: Duration,
}

fn subscription(owned: &Owned) -> Bytes {
    let mut sub = ConsumerProtocolSubscription::default();
    sub.topics = vec![s(TOPIC)];
    if !owned.is_empty() {
        let mut t = TopicPartition::default();
        t.topic = TopicName(s(TOPIC));
        t.partitions = owned.iter().copied().collect();
        sub.owned_partitions = vec![t];
    }
    let mut out = BytesMut::new();
    out.put_i16(1);
    sub.encode(&mut out, 1).unwrap();
    out.freeze()
}

impl Classic {
    fn new(addr: SocketAddr, rebalance: Duration) -> Classic {
        Classic {
            addr,
            id: String::new(),
            instance: None,
            generation: -1,
            owned: Owned::new(),
            rebalance,
        }
    }

    /// The first member of a new classic group: joins and, as its
    /// leader, takes every partition.
    fn first(addr: SocketAddr, rebalance: Duration) -> Classic {
        let mut c = Classic::new(addr, rebalance);
        assert_eq!(c.join().error_code, 0);
        let all: Owned = (0..4).collect();
        let id = c.id.clone();
        assert_eq!(c.sync_with(&[(&id, &all)]), 0);
        c
    }

    /// A new member starting a round of a classic group with members:
    /// given its id, it joins again on a thread of its own, which waits
    /// for the round to end. Returns after `settle`, the join sent.
    fn joining(
        addr: SocketAddr,
        rebalance: Duration,
        settle: Duration,
    ) -> std::thread::JoinHandle<(Classic, JoinGroupResponse)> {
        let mut c = Classic::new(addr, rebalance);
        assert_eq!(
            c.join_once().error_code,
            ResponseError::MemberIdRequired.code()
        );
        let joining = std::thread::spawn(move || {
            let got = c.join_once();
            (c, got)
        });
        std::thread::sleep(settle);
        joining
    }

    /// One JoinGroup (v7), with what it owns.
    fn join_once(&mut self) -> JoinGroupResponse {
        let mut p = JoinGroupRequestProtocol::default();
        p.name = s("range");
        p.metadata = subscription(&self.owned);
        let mut j = JoinGroupRequest::default();
        j.group_id = GroupId(s(GROUP));
        j.session_timeout_ms = 10_000;
        j.rebalance_timeout_ms = self.rebalance.as_millis() as i32;
        j.member_id = s(&self.id);
        j.group_instance_id = self.instance.as_deref().map(s);
        j.protocol_type = s("consumer");
        j.protocols = vec![p];
        let got = Client::connect(self.addr).call(&j, 7);
        if got.error_code == 0 || got.error_code == ResponseError::MemberIdRequired.code() {
            self.id = got.member_id.to_string();
        }
        if got.error_code == 0 {
            self.generation = got.generation_id;
        }
        got
    }

    /// Joins, coming back with its id if asked for one.
    fn join(&mut self) -> JoinGroupResponse {
        let got = self.join_once();
        if got.error_code == ResponseError::MemberIdRequired.code() {
            return self.join_once();
        }
        got
    }

    /// SyncGroup (v5), handing `assignments` if it leads a classic
    /// round; takes what it is given.
    fn sync_with(&mut self, assignments: &[(&str, &Owned)]) -> i16 {
        let mut r = SyncGroupRequest::default();
        r.group_id = GroupId(s(GROUP));
        r.member_id = s(&self.id);
        r.group_instance_id = self.instance.as_deref().map(s);
        r.generation_id = self.generation;
        r.protocol_type = Some(s("consumer"));
        r.protocol_name = Some(s("range"));
        r.assignments = assignments
            .iter()
            .map(|(member, owned)| {
                let mut a = SyncGroupRequestAssignment::default();
                a.member_id = s(member);
                let by_name = BTreeMap::from([(TOPIC.to_string(), (*owned).clone())]);
                a.assignment = encode_assignment(&by_name, 1);
                a
            })
            .collect();
        let got = Client::connect(self.addr).call(&r, 5);
        if got.error_code == 0 {
            let assigned = decode_assignment(&got.assignment).expect("an assignment");
            self.owned = assigned.into_iter().map(|(_, p)| p).collect();
        }
        got.error_code
    }

    fn sync(&mut self) -> i16 {
        self.sync_with(&[])
    }

    /// Heartbeats; refused (told to rejoin, or at a generation it never
    /// joined), rejoins. Then syncs.
    fn catch_up(&mut self) {
        if self.heartbeat() != 0 {
            assert_eq!(self.join().error_code, 0);
        }
        assert_eq!(self.sync(), 0);
    }

    /// LeaveGroup (v2).
    fn leave(&self) -> i16 {
        let mut l = LeaveGroupRequest::default();
        l.group_id = GroupId(s(GROUP));
        l.member_id = s(&self.id);
        Client::connect(self.addr).call(&l, 2).error_code
    }

    fn heartbeat(&self) -> i16 {
        let mut r = HeartbeatRequest::default();
        r.group_id = GroupId(s(GROUP));
        r.member_id = s(&self.id);
        r.group_instance_id = self.instance.as_deref().map(s);
        r.generation_id = self.generation;
        Client::connect(self.addr).call(&r, 4).error_code
    }
}

/// ConsumerGroupDescribe: the state, and each member's type (0 classic,
/// 1 consumer protocol), epoch and assignment.
fn described(addr: SocketAddr) -> (String, BTreeMap<String, (i8, i32, Owned)>) {
    let mut r = ConsumerGroupDescribeRequest::default();
    r.group_ids = vec![GroupId(s(GROUP))];
    let got = Client::connect(addr).call(&r, 1);
    let g = &got.groups[0];
    assert_eq!(g.error_code, 0, "{g:?}");
    let members = g
        .members
        .iter()
        .map(|m| {
            let owned = m
                .assignment
                .topic_partitions
                .iter()
                .flat_map(|t| t.partitions.clone())
                .collect();
            (
                m.member_id.to_string(),
                (m.member_type, m.member_epoch, owned),
            )
        })
        .collect();
    (g.group_state.to_string(), members)
}

/// ListGroups: the group's type and state.
fn listed(addr: SocketAddr) -> (String, String) {
    let got = Client::connect(addr).call(&ListGroupsRequest::default(), 5);
    let g = got
        .groups
        .iter()
        .find(|g| g.group_id.as_str() == GROUP)
        .expect("the group is listed");
    (g.group_type.to_string(), g.group_state.to_string())
}

#[test]
fn a_classic_member_joins_a_consumer_group_and_shares_its_partitions() {
    let server = server(Duration::from_secs(30));
    let addr = coordinator(&server);
    let mut a = Modern::join(addr, "member-a");
    assert_eq!((a.epoch, a.owned.len()), (1, 4));
    let mut c = Classic::new(addr, Duration::from_secs(30));
    // The two-step join, then an answer at once: its generation is its
    // member epoch, and it leads nothing.
    assert_eq!(
        c.join_once().error_code,
        ResponseError::MemberIdRequired.code()
    );
    let joined = c.join_once();
    assert_eq!(joined.error_code, 0, "{joined:?}");
    assert_eq!(joined.generation_id, 2);
    assert_eq!(
        joined
            .protocol_name
            .as_ref()
            .map(|p| p.to_string())
            .as_deref(),
        Some("range")
    );
    assert_eq!(
        joined
            .protocol_type
            .as_ref()
            .map(|p| p.to_string())
            .as_deref(),
        Some("consumer")
    );
    assert!(joined.leader.is_empty() && joined.members.is_empty());
    // a still owns everything: c's share waits for it.
    assert_eq!(c.sync(), 0);
    assert!(c.owned.is_empty());
    assert_eq!(c.heartbeat(), 0);
    // a gives two up; c is then told to rejoin for them.
    assert_eq!(a.beat(), 0);
    assert_eq!(a.owned.len(), 2);
    assert_eq!(a.beat(), 0);
    assert_eq!(c.heartbeat(), ResponseError::RebalanceInProgress.code());
    assert_eq!(c.join().error_code, 0);
    assert_eq!(c.sync(), 0);
    assert_eq!(c.heartbeat(), 0);
    assert_eq!(c.owned.len(), 2);
    assert!(c.owned.is_disjoint(&a.owned));
    let (state, members) = described(addr);
    assert_eq!(state, "Stable");
    assert_eq!(members["member-a"].0, 1);
    assert_eq!(members[&c.id], (0, c.generation, c.owned.clone()));
    // A classic member commits with any version, at its generation.
    let commit = |generation: i32| {
        let r = commit_request(GROUP, generation, &c.id, &[(TOPIC, 0, 7)]);
        Client::connect(addr).call(&r, 8).topics[0].partitions[0].error_code
    };
    assert_eq!(commit(c.generation), 0);
    assert_eq!(
        commit(c.generation + 1),
        ResponseError::IllegalGeneration.code()
    );
    // A classic request naming a consumer-protocol member is refused.
    let mut h = HeartbeatRequest::default();
    h.group_id = GroupId(s(GROUP));
    h.member_id = s("member-a");
    h.generation_id = a.epoch;
    assert_eq!(
        Client::connect(addr).call(&h, 4).error_code,
        ResponseError::UnknownMemberId.code()
    );
    // The last consumer-protocol member leaves: the group turns classic
    // and rebalances; c rejoins as its leader and assigns everything.
    assert_eq!(a.leave(), 0);
    assert_eq!(
        listed(addr),
        ("classic".into(), "PreparingRebalance".into())
    );
    assert_eq!(c.heartbeat(), ResponseError::RebalanceInProgress.code());
    let joined = c.join();
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.leader.as_str(), c.id);
    let all: Owned = (0..4).collect();
    let id = c.id.clone();
    assert_eq!(c.sync_with(&[(&id, &all)]), 0);
    assert_eq!(c.owned, all);
    assert_eq!(listed(addr), ("classic".into(), "Stable".into()));
    passes(server);
}

#[test]
fn a_classic_group_turns_consumer_when_a_consumer_member_joins() {
    let server = server(Duration::from_secs(30));
    let addr = coordinator(&server);
    let mut c1 = Classic::first(addr, Duration::from_secs(10));
    let all: Owned = (0..4).collect();
    assert_eq!(listed(addr), ("classic".into(), "Stable".into()));
    // A second classic member starts a round, waiting for c1 to rejoin.
    let waiting = Classic::joining(addr, Duration::from_secs(10), Duration::from_millis(300));
    // A consumer-protocol member joins: the group turns consumer, the
    // waiting join is told to rejoin, and c1 keeps its partitions.
    let mut a = Modern::join(addr, "member-a");
    let (mut c2, got) = waiting.join().unwrap();
    assert_eq!(got.error_code, ResponseError::RebalanceInProgress.code());
    assert_eq!(listed(addr).0, "consumer");
    assert!(a.owned.is_empty(), "c1 still owns them all");
    // Both classic members came over, c1 with its partitions; c2, which
    // had joined the round, with none.
    let (_, members) = described(addr);
    assert_eq!(members[&c1.id], (0, c1.generation, all.clone()));
    assert_eq!(members[&c2.id], (0, c1.generation, Owned::new()));
    // c1 is told to rejoin; rejoining with all four, it keeps its share
    // and gives the rest up by rejoining again without them.
    assert_eq!(c1.heartbeat(), ResponseError::RebalanceInProgress.code());
    let generation = c1.generation;
    assert_eq!(c1.join().error_code, 0);
    assert_eq!(
        c1.generation, generation,
        "its epoch waits for the revocation"
    );
    assert_eq!(c1.sync(), 0);
    assert!(!c1.owned.is_empty() && c1.owned.len() < 4, "{:?}", c1.owned);
    assert_eq!(c1.heartbeat(), ResponseError::RebalanceInProgress.code());
    assert_eq!(c1.join().error_code, 0);
    assert!(c1.generation > generation);
    assert_eq!(c1.sync(), 0);
    // c2 rejoins under the id it was given; they all settle.
    for _ in 0..4 {
        assert_eq!(a.beat(), 0);
        c1.catch_up();
        c2.catch_up();
    }
    assert!(a.owned.is_disjoint(&c1.owned) && a.owned.is_disjoint(&c2.owned));
    assert!(c1.owned.is_disjoint(&c2.owned));
    let (state, members) = described(addr);
    assert_eq!(state, "Stable");
    let owned: Vec<usize> = members.values().map(|m| m.2.len()).collect();
    assert_eq!(owned.iter().sum::<usize>(), 4, "{members:?}");
    assert!(owned.iter().all(|n| *n >= 1), "{members:?}");
    // A classic LeaveGroup takes c2 out, with no conversion.
    assert_eq!(c2.leave(), 0);
    assert_eq!(listed(addr).0, "consumer");
    assert_eq!(described(addr).1.len(), 2);
    passes(server);
}

#[test]
fn a_classic_member_that_does_not_rejoin_or_sync_in_time_is_fenced() {
    let server = server(Duration::from_secs(30));
    let addr = coordinator(&server);
    let mut a = Modern::join(addr, "member-a");
    let mut c = Classic::new(addr, Duration::from_millis(500));
    assert_eq!(c.join().error_code, 0);
    assert_eq!(c.sync(), 0);
    // A second consumer-protocol member: c is told to rejoin, and does not.
    let mut b = Modern::join(addr, "member-b");
    assert_eq!(c.heartbeat(), ResponseError::RebalanceInProgress.code());
    let told = Instant::now();
    while described(addr).1.contains_key(&c.id) {
        assert!(told.elapsed() < Duration::from_secs(5), "c was not fenced");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(told.elapsed() >= Duration::from_millis(500));
    assert_eq!(c.heartbeat(), ResponseError::UnknownMemberId.code());
    // One that joins and never syncs is fenced at its rebalance timeout too.
    let mut d = Classic::new(addr, Duration::from_millis(500));
    assert_eq!(d.join().error_code, 0);
    let joined = Instant::now();
    while described(addr).1.contains_key(&d.id) {
        assert!(
            joined.elapsed() < Duration::from_secs(5),
            "d was not fenced"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(joined.elapsed() >= Duration::from_millis(500));
    // The consumer-protocol members share everything meanwhile.
    for _ in 0..4 {
        assert_eq!(a.beat(), 0);
        assert_eq!(b.beat(), 0);
    }
    assert_eq!(a.owned.len() + b.owned.len(), 4);
    passes(server);
}

#[test]
fn the_last_consumer_member_fenced_at_its_session_turns_the_group_classic() {
    let session = Duration::from_millis(1500);
    let server = server(session);
    let addr = coordinator(&server);
    let mut a = Modern::join(addr, "member-a");
    let mut c = Classic::new(addr, Duration::from_secs(30));
    assert_eq!(c.join().error_code, 0);
    assert_eq!(c.sync(), 0);
    assert_eq!(a.beat(), 0);
    // a falls silent; c keeps beating until the group turns classic.
    let silent = Instant::now();
    loop {
        assert!(silent.elapsed() < session * 4, "a was not fenced");
        std::thread::sleep(Duration::from_millis(100));
        if listed(addr).0 == "classic" {
            break;
        }
        let beat = c.heartbeat();
        if beat != 0 {
            assert_eq!(beat, ResponseError::RebalanceInProgress.code());
            assert_eq!(c.join().error_code, 0);
            assert_eq!(c.sync(), 0);
        }
    }
    assert!(silent.elapsed() >= session);
    // It is rebalancing at the group epoch c last saw: c is asked to
    // rejoin, not told its generation is gone.
    assert_eq!(c.heartbeat(), ResponseError::RebalanceInProgress.code());
    let joined = c.join();
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.leader.as_str(), c.id);
    assert_eq!(a.beat(), ResponseError::GroupIdNotFound.code());
    passes(server);
}

#[test]
fn a_classic_static_member_taking_the_last_consumer_members_place_turns_the_group_classic() {
    let server = server(Duration::from_secs(30));
    let addr = coordinator(&server);
    let mut a = Modern::join_as(addr, "member-a", Some("instance-a"));
    let mut c = Classic::new(addr, Duration::from_secs(30));
    assert_eq!(c.join().error_code, 0);
    assert_eq!(a.beat(), 0);
    assert_eq!(a.beat(), 0);
    c.catch_up();
    assert_eq!((a.owned.len(), c.owned.len()), (2, 2));
    // instance-a comes back as a classic consumer: it takes a's place and
    // its partitions, and the group turns classic with no rebalance.
    let mut back = Classic::new(addr, Duration::from_secs(30));
    back.instance = Some("instance-a".to_string());
    let joined = back.join_once();
    assert_eq!(joined.error_code, 0, "{joined:?}");
    assert_eq!(listed(addr), ("classic".into(), "Stable".into()));
    assert_eq!(back.sync(), 0);
    assert_eq!(back.owned, a.owned);
    assert_eq!(c.heartbeat(), 0);
    // The old member id is fenced.
    assert_eq!(a.beat(), ResponseError::GroupIdNotFound.code());
    passes(server);
}

#[test]
fn with_migration_disabled_groups_keep_their_kind_but_take_classic_members() {
    let server = server_with(Duration::from_secs(30), MigrationPolicy::Disabled);
    let addr = coordinator(&server);
    // A classic group with a member refuses a consumer-protocol member.
    let mut c = Classic::new(addr, Duration::from_secs(30));
    assert_eq!(c.join().error_code, 0);
    let all: Owned = (0..4).collect();
    let id = c.id.clone();
    assert_eq!(c.sync_with(&[(&id, &all)]), 0);
    assert_eq!(
        modern_joins(addr, "member-a"),
        ResponseError::GroupIdNotFound.code()
    );
    assert_eq!(listed(addr).0, "classic");
    // Once it is empty the group turns consumer-protocol, and a classic
    // member still joins it (whatever the policy, as in Kafka).
    assert_eq!(c.leave(), 0);
    let mut a = Modern::join(addr, "member-a");
    let mut c = Classic::new(addr, Duration::from_secs(30));
    assert_eq!(c.join().error_code, 0);
    assert_eq!(c.sync(), 0);
    // The consumer-protocol member leaves: the group stays consumer-protocol
    // with its classic member, which takes everything.
    assert_eq!(a.leave(), 0);
    assert_eq!(listed(addr).0, "consumer");
    assert_eq!(c.heartbeat(), ResponseError::RebalanceInProgress.code());
    assert_eq!(c.join().error_code, 0);
    assert_eq!(c.sync(), 0);
    assert_eq!(c.owned, all);
    passes(server);
}

/// A ConsumerGroupHeartbeat joining the group as `id`: its error code.
fn modern_joins(addr: SocketAddr, id: &str) -> i16 {
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = GroupId(s(GROUP));
    r.member_id = s(id);
    r.rebalance_timeout_ms = 30_000;
    r.subscribed_topic_names = Some(vec![TopicName(s(TOPIC))]);
    r.topic_partitions = Some(vec![]);
    let got: ConsumerGroupHeartbeatResponse = Client::connect(addr).call(&r, 1);
    got.error_code
}

#[test]
fn full_groups_turn_newcomers_away_and_conversions_keep_within_the_limits() {
    // group.max.size 1, group.consumer.max.size 3.
    let server = server_of(GroupConfig {
        consumer_session_timeout: Duration::from_secs(30),
        classic_max_size: 1,
        consumer_max_size: 3,
        ..GroupConfig::default()
    });
    let addr = coordinator(&server);
    let full = ResponseError::GroupMaxSizeReached.code();
    let mut c1 = Classic::first(addr, Duration::from_secs(30));
    // The classic group is full: a second member is turned away, with no
    // member id, before its two-step join.
    let mut c2 = Classic::new(addr, Duration::from_secs(30));
    let refused = c2.join_once();
    assert_eq!((refused.error_code, refused.member_id.as_str()), (full, ""));
    assert_eq!(c1.heartbeat(), 0, "the member is still served");
    // One member is within group.consumer.max.size: a consumer-protocol
    // member converts the group, and a classic member joins it there.
    let mut a = Modern::join(addr, "member-a");
    assert_eq!(listed(addr).0, "consumer");
    assert_eq!(c2.join().error_code, 0);
    // Three members: the consumer-protocol group is full, for both kinds.
    assert_eq!(modern_joins(addr, "member-b"), full);
    let mut c3 = Classic::new(addr, Duration::from_secs(30));
    assert_eq!(c3.join_once().error_code, full);
    assert_eq!(a.beat(), 0, "a member is still served");
    // The last consumer-protocol member leaves: two classic members are
    // past group.max.size, so the group stays consumer-protocol.
    assert_eq!(a.leave(), 0);
    assert_eq!(listed(addr).0, "consumer");
    assert_eq!(described(addr).1.len(), 2);
    c1.catch_up();
    c2.catch_up();
    passes(server);
}

#[test]
fn in_a_full_round_the_last_classic_member_to_rejoin_is_turned_away() {
    // group.max.size 2: c1 is in the group; c2 and c3 join a round before
    // c1 rejoins it, so two wait and c1 is the one turned away, as
    // Kafka's coordinator counts the members waiting in a round.
    let server = server_of(GroupConfig {
        consumer_session_timeout: Duration::from_secs(30),
        classic_max_size: 2,
        ..GroupConfig::default()
    });
    let addr = coordinator(&server);
    let mut c1 = Classic::first(addr, Duration::from_secs(30));
    let waiting: Vec<_> = (0..2)
        .map(|_| Classic::joining(addr, Duration::from_secs(30), Duration::from_millis(200)))
        .collect();
    let refused = c1.join_once();
    assert_eq!(
        (refused.error_code, refused.member_id.as_str()),
        (ResponseError::GroupMaxSizeReached.code(), "")
    );
    // Out of the group: the round ends with the other two.
    let joined: Vec<_> = waiting.into_iter().map(|w| w.join().unwrap()).collect();
    for (_, got) in &joined {
        assert_eq!(got.error_code, 0, "{got:?}");
    }
    let generation = joined[0].1.generation_id;
    assert!(joined
        .iter()
        .all(|(_, got)| got.generation_id == generation));
    assert_eq!(
        c1.heartbeat(),
        ResponseError::UnknownMemberId.code(),
        "c1 left the group"
    );
    passes(server);
}

#[test]
fn a_classic_group_past_the_consumer_limit_is_not_converted() {
    // group.consumer.max.size 1: two classic members are too many.
    let server = server_of(GroupConfig {
        consumer_session_timeout: Duration::from_secs(30),
        consumer_max_size: 1,
        ..GroupConfig::default()
    });
    let addr = coordinator(&server);
    let mut c1 = Classic::first(addr, Duration::from_secs(30));
    let waiting = Classic::joining(addr, Duration::from_secs(30), Duration::from_millis(200));
    assert_eq!(c1.join().error_code, 0);
    let (mut c2, got) = waiting.join().unwrap();
    assert_eq!(got.error_code, 0);
    let (id1, id2) = (c1.id.clone(), c2.id.clone());
    let (half1, half2): (Owned, Owned) = ((0..2).collect(), (2..4).collect());
    assert_eq!(c1.sync_with(&[(&id1, &half1), (&id2, &half2)]), 0);
    assert_eq!(c2.sync(), 0);
    assert_eq!(listed(addr), ("classic".into(), "Stable".into()));
    assert_eq!(
        modern_joins(addr, "member-a"),
        ResponseError::GroupIdNotFound.code()
    );
    assert_eq!(listed(addr), ("classic".into(), "Stable".into()));
    assert_eq!((c1.heartbeat(), c2.heartbeat()), (0, 0));
    passes(server);
}

#[test]
fn a_consumer_member_takes_a_classic_static_members_place_at_once() {
    let server = server(Duration::from_secs(30));
    let addr = coordinator(&server);
    let mut a = Modern::join(addr, "member-a");
    let mut c = Classic::new(addr, Duration::from_secs(30));
    c.instance = Some("instance-c".to_string());
    assert_eq!(c.join().error_code, 0);
    assert_eq!(a.beat(), 0);
    assert_eq!(a.beat(), 0);
    c.catch_up();
    assert_eq!(c.owned.len(), 2);
    // instance-c restarts on the consumer protocol: no wait for the
    // classic member to leave, and its partitions come with the place.
    let mut back = Modern::join_as(addr, "member-c2", Some("instance-c"));
    assert_eq!(back.owned, c.owned);
    assert_eq!(back.beat(), 0);
    assert_eq!(c.heartbeat(), ResponseError::FencedInstanceId.code());
    let (state, members) = described(addr);
    assert_eq!(state, "Stable");
    assert_eq!(members.len(), 2);
    assert_eq!(members["member-c2"].0, 1);
    passes(server);
}
