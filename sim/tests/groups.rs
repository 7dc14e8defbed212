//! Consumer groups over the wire, with the test client: joins, the
//! leader's assignment, leaves, session expiry, heartbeats, commits and a
//! coordinator crash. The coordinator is configured with short timeouts so
//! that the real clock can be used.

use broker_sim::live::{GroupConfig, GroupState, LiveConfig};
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{commit_request, Client};
use broker_sim::wire::Limits;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, GroupId, HeartbeatRequest,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, ListGroupsRequest, OffsetFetchRequest,
    SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const SESSION: Duration = Duration::from_millis(600);
const JOIN_V: i16 = 5;

fn server(initial_delay: Duration) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig {
            groups: GroupConfig {
                initial_rebalance_delay: initial_delay,
                min_session_timeout: Duration::from_millis(100),
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

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// The coordinator of `group`, by FindCoordinator on broker 0.
fn coordinator(server: &Server, group: &str) -> SocketAddr {
    // Asked of the first broker that is up (a crashed one refuses).
    let up = server
        .addrs()
        .iter()
        .find(|a| std::net::TcpStream::connect(a).is_ok())
        .expect("a broker is up");
    let mut c = Client::connect(*up);
    let mut r = FindCoordinatorRequest::default();
    r.key = s(group);
    let found = c.call(&r, 2);
    assert_eq!(found.error_code, 0);
    format!("{}:{}", found.host.as_str(), found.port)
        .parse()
        .unwrap()
}

fn join_request(group: &str, member: &str) -> JoinGroupRequest {
    let mut p = JoinGroupRequestProtocol::default();
    p.name = s("range");
    p.metadata = Bytes::from_static(b"subscription");
    let mut r = JoinGroupRequest::default();
    r.group_id = GroupId(s(group));
    r.session_timeout_ms = SESSION.as_millis() as i32;
    r.rebalance_timeout_ms = 5_000;
    r.member_id = s(member);
    r.protocol_type = s("consumer");
    r.protocols = vec![p];
    r
}

/// Joins with Kafka's two steps (MEMBER_ID_REQUIRED, then the id).
fn join(addr: SocketAddr, group: &str, member: &str) -> JoinGroupResponse {
    let mut c = Client::connect(addr);
    let first = c.call(&join_request(group, member), JOIN_V);
    if first.error_code != ResponseError::MemberIdRequired.code() {
        return first;
    }
    c.call(&join_request(group, first.member_id.as_str()), JOIN_V)
}

/// The groups `addr` lists in `states` (all with none), as (id, protocol
/// type, state).
fn listed(addr: SocketAddr, states: &[&str]) -> Vec<(String, String, String)> {
    let mut r = ListGroupsRequest::default();
    r.states_filter = states.iter().map(|state| s(state)).collect();
    let got = Client::connect(addr).call(&r, 4);
    assert_eq!(got.error_code, 0);
    got.groups
        .iter()
        .map(|g| {
            (
                g.group_id.0.to_string(),
                g.protocol_type.to_string(),
                g.group_state.to_string(),
            )
        })
        .collect()
}

/// One listed group, for comparing with [`listed`]'s.
fn group_row(id: &str, protocol_type: &str, state: &str) -> (String, String, String) {
    (id.into(), protocol_type.into(), state.into())
}

fn sync(
    addr: SocketAddr,
    group: &str,
    member: &str,
    generation: i32,
    assignments: &[(&str, &[u8])],
) -> (i16, Bytes) {
    let mut r = SyncGroupRequest::default();
    r.group_id = GroupId(s(group));
    r.generation_id = generation;
    r.member_id = s(member);
    r.assignments = assignments
        .iter()
        .map(|(m, a)| {
            let mut x = SyncGroupRequestAssignment::default();
            x.member_id = s(m);
            x.assignment = Bytes::copy_from_slice(a);
            x
        })
        .collect();
    let got = Client::connect(addr).call(&r, 3);
    (got.error_code, got.assignment)
}

fn heartbeat(addr: SocketAddr, group: &str, member: &str, generation: i32) -> i16 {
    let mut r = HeartbeatRequest::default();
    r.group_id = GroupId(s(group));
    r.generation_id = generation;
    r.member_id = s(member);
    Client::connect(addr).call(&r, 3).error_code
}

fn leave(addr: SocketAddr, group: &str, member: &str) -> i16 {
    let mut r = LeaveGroupRequest::default();
    r.group_id = GroupId(s(group));
    r.member_id = s(member);
    Client::connect(addr).call(&r, 2).error_code
}

fn passes(server: Server) {
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

/// Two members join within the initial delay and split the partitions by
/// the leader's assignment; returns (addr, [(member, generation)]; leader
/// first).
fn two_members(server: &Server, group: &str) -> (SocketAddr, Vec<(String, i32)>) {
    let addr = coordinator(server, group);
    let g = group.to_string();
    let other = std::thread::spawn(move || join(addr, &g, ""));
    let mine = join(addr, group, "");
    let other = other.join().unwrap();
    for r in [&mine, &other] {
        assert_eq!(r.error_code, 0);
        assert_eq!(r.generation_id, 1, "one round for both");
        assert_eq!(r.protocol_name.as_deref(), Some("range"));
    }
    let (leader, follower) = if mine.leader == mine.member_id {
        (mine, other)
    } else {
        (other, mine)
    };
    assert_eq!(leader.members.len(), 2, "the leader sees every member");
    assert!(follower.members.is_empty());
    let (l, f) = (leader.member_id.to_string(), follower.member_id.to_string());
    // The follower's SyncGroup waits in the purgatory for the leader's.
    let (g, fm) = (group.to_string(), f.clone());
    let waiting = std::thread::spawn(move || sync(addr, &g, &fm, 1, &[]));
    std::thread::sleep(Duration::from_millis(100));
    let (error, mine) = sync(addr, group, &l, 1, &[(&l, b"p0,p1"), (&f, b"p2,p3")]);
    assert_eq!((error, &mine[..]), (0, &b"p0,p1"[..]));
    let (error, theirs) = waiting.join().unwrap();
    assert_eq!((error, &theirs[..]), (0, &b"p2,p3"[..]));
    (addr, vec![(l, 1), (f, 1)])
}

#[test]
fn two_members_join_one_round_and_split_the_partitions() {
    let server = server(Duration::from_millis(300));
    let (_, members) = two_members(&server, "readers");
    let (state, generation, ids) = server.cluster().group_view("readers").unwrap();
    assert_eq!((state, generation, ids.len()), (GroupState::Stable, 1, 2));
    assert!(members.iter().all(|(m, _)| ids.contains(m)));
    passes(server);
}

#[test]
fn admin_tools_list_and_describe_the_groups_a_broker_coordinates() {
    let server = server(Duration::from_millis(300));
    let (addr, members) = two_members(&server, "readers");
    // Each broker lists the groups it coordinates, and only those.
    let mut listed = Vec::new();
    for &broker in server.addrs() {
        let mut r = ListGroupsRequest::default();
        r.states_filter = vec![s("stable")];
        let got = Client::connect(broker).call(&r, 4);
        assert_eq!(got.error_code, 0);
        for g in &got.groups {
            listed.push((broker, g.group_id.0.to_string(), g.group_state.to_string()));
            assert_eq!(g.protocol_type.as_str(), "consumer");
        }
        r.states_filter = vec![s("Empty")];
        assert!(Client::connect(broker).call(&r, 4).groups.is_empty());
    }
    assert_eq!(
        listed,
        [(addr, "readers".to_string(), "Stable".to_string())]
    );
    let mut r = DescribeGroupsRequest::default();
    r.groups = vec![GroupId(s("readers"))];
    r.include_authorized_operations = true;
    let got = Client::connect(addr).call(&r, 5);
    let readers = &got.groups[0];
    assert_eq!(
        (
            readers.error_code,
            readers.group_state.as_str(),
            readers.protocol_data.as_str()
        ),
        (0, "Stable", "range")
    );
    // What Kafka (with no authorizer) allows on a group: READ, DELETE,
    // DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
    let allowed = [3, 6, 8, 10, 11]
        .iter()
        .fold(0, |bits, op| bits | (1 << op));
    assert_eq!(readers.authorized_operations, allowed);
    let mut described: Vec<(String, Bytes, Bytes)> = readers
        .members
        .iter()
        .map(|m| {
            assert_eq!(
                m.client_id.as_str(),
                "wire-test",
                "the JoinGroup's client id"
            );
            // Where it connected from, as Kafka writes it.
            assert_eq!(m.client_host.as_str(), "/127.0.0.1");
            (
                m.member_id.to_string(),
                m.member_metadata.clone(),
                m.member_assignment.clone(),
            )
        })
        .collect();
    described.sort();
    let mut expected = vec![
        (
            members[0].0.clone(),
            Bytes::from_static(b"subscription"),
            Bytes::from_static(b"p0,p1"),
        ),
        (
            members[1].0.clone(),
            Bytes::from_static(b"subscription"),
            Bytes::from_static(b"p2,p3"),
        ),
    ];
    expected.sort();
    assert_eq!(described, expected);
    // Another broker is not its coordinator; a group nobody made is Dead
    // at its own.
    let mut unknown = DescribeGroupsRequest::default();
    unknown.groups = vec![GroupId(s("nobody"))];
    let got = Client::connect(coordinator(&server, "nobody")).call(&unknown, 5);
    assert_eq!(
        (got.groups[0].error_code, got.groups[0].group_state.as_str()),
        (0, "Dead")
    );
    assert!(got.groups[0].members.is_empty());
    // From v6 it is also GROUP_ID_NOT_FOUND.
    let got = Client::connect(coordinator(&server, "nobody")).call(&unknown, 6);
    assert_eq!(
        (got.groups[0].error_code, got.groups[0].group_state.as_str()),
        (ResponseError::GroupIdNotFound.code(), "Dead")
    );
    let elsewhere = *server.addrs().iter().find(|&&a| a != addr).unwrap();
    let got = Client::connect(elsewhere).call(&r, 5);
    assert_eq!(
        got.groups[0].error_code,
        ResponseError::NotCoordinator.code()
    );
    passes(server);
}

#[test]
fn an_emptied_group_keeps_its_protocol_type_and_takes_a_new_one_from_its_next_member() {
    let server = server(Duration::from_millis(300));
    let (addr, members) = two_members(&server, "idle");
    for (member, _) in &members {
        assert_eq!(leave(addr, "idle", member), 0);
    }
    assert_eq!(
        listed(addr, &["Empty"]),
        [group_row("idle", "consumer", "Empty")]
    );
    let mut d = DescribeGroupsRequest::default();
    d.groups = vec![GroupId(s("idle"))];
    let described = &Client::connect(addr).call(&d, 5).groups[0];
    assert_eq!(
        (
            described.group_state.as_str(),
            described.protocol_type.as_str(),
            described.protocol_data.as_str()
        ),
        ("Empty", "consumer", "")
    );
    // Empty, it takes a member of another protocol type (Kafka Connect's
    // workers, say); with members, it refuses one.
    let mut c = Client::connect(addr);
    let mut connect = join_request("idle", "");
    connect.protocol_type = s("connect");
    let first = c.call(&connect, JOIN_V);
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    connect.member_id = first.member_id.clone();
    let joined = c.call(&connect, JOIN_V);
    assert_eq!(joined.error_code, 0);
    let described = &Client::connect(addr).call(&d, 5).groups[0];
    assert_eq!(described.protocol_type.as_str(), "connect");
    assert_eq!(
        Client::connect(addr)
            .call(&join_request("idle", ""), JOIN_V)
            .error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
    passes(server);
}

#[test]
fn a_follower_joining_again_unchanged_gets_its_generation_and_a_leader_rebalances() {
    let server = server(Duration::from_millis(300));
    let (addr, members) = two_members(&server, "rejoiners");
    let (leader, follower) = (&members[0].0, &members[1].0);
    // The follower missed its answer, say, and asks again: the same
    // generation, at once, and the group stays as it is.
    let again = join(addr, "rejoiners", follower);
    assert_eq!((again.error_code, again.generation_id), (0, 1));
    assert_eq!(again.leader.as_str(), leader.as_str());
    assert!(again.members.is_empty(), "a follower gets no member list");
    let (state, generation, _) = server.cluster().group_view("rejoiners").unwrap();
    assert_eq!((state, generation), (GroupState::Stable, 1));
    assert_eq!(heartbeat(addr, "rejoiners", leader, 1), 0);
    // With other metadata it is a new round.
    let mut changed = join_request("rejoiners", follower);
    changed.protocols[0].metadata = Bytes::from_static(b"another subscription");
    let mut c = Client::connect(addr);
    let pending = std::thread::spawn(move || c.call(&changed, JOIN_V));
    heartbeat_until_told_generation(addr, "rejoiners", leader, 1);
    let led = join(addr, "rejoiners", leader);
    let round = pending.join().unwrap();
    assert_eq!((led.error_code, led.generation_id), (0, 2));
    assert_eq!((round.error_code, round.generation_id), (0, 2));
    assert_eq!(led.members.len(), 2, "the leader gets every member");
    let (error, _) = sync(
        addr,
        "rejoiners",
        leader,
        2,
        &[(leader, b"a"), (follower, b"b")],
    );
    assert_eq!(error, 0);
    let (error, _) = sync(addr, "rejoiners", follower, 2, &[]);
    assert_eq!(error, 0);
    // The leader's join, unchanged, starts a round all the same (the
    // topics under its subscription may have changed).
    let mut c = Client::connect(addr);
    let leader_again = join_request("rejoiners", leader);
    let pending = std::thread::spawn(move || c.call(&leader_again, JOIN_V));
    heartbeat_until_told_generation(addr, "rejoiners", follower, 2);
    let follows = join(addr, "rejoiners", follower);
    let led = pending.join().unwrap();
    assert_eq!((led.error_code, led.generation_id), (0, 3));
    assert_eq!((follows.error_code, follows.generation_id), (0, 3));
    passes(server);
}

/// Heartbeats as `member` of `generation` until told a round began.
fn heartbeat_until_told_generation(addr: SocketAddr, group: &str, member: &str, generation: i32) {
    let start = Instant::now();
    while heartbeat(addr, group, member, generation) == 0 {
        assert!(start.elapsed() < Duration::from_secs(5), "never told");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_leave_rebalances_at_once() {
    let server = server(Duration::from_millis(300));
    let (addr, members) = two_members(&server, "leavers");
    let (stay, gone) = (&members[0].0, &members[1].0);
    assert_eq!(leave(addr, "leavers", gone), 0);
    // The one that stays is told at its next heartbeat, not after a timeout.
    assert_eq!(
        heartbeat(addr, "leavers", stay, 1),
        ResponseError::RebalanceInProgress.code()
    );
    let start = Instant::now();
    let rejoined = join(addr, "leavers", stay);
    // Every known member is back: the round ends at once.
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!((rejoined.error_code, rejoined.generation_id), (0, 2));
    assert_eq!(rejoined.members.len(), 1);
    passes(server);
}

#[test]
fn a_member_that_stops_heartbeating_is_removed_at_its_session_timeout() {
    let server = server(Duration::ZERO);
    let addr = coordinator(&server, "quiet");
    let joined = join(addr, "quiet", "");
    assert_eq!(joined.error_code, 0);
    let member = joined.member_id.to_string();
    let (error, _) = sync(
        addr,
        "quiet",
        &member,
        joined.generation_id,
        &[(&member, b"all")],
    );
    assert_eq!(error, 0);
    // Heartbeats keep it far past its session timeout.
    let start = Instant::now();
    while start.elapsed() < SESSION * 4 {
        assert_eq!(heartbeat(addr, "quiet", &member, joined.generation_id), 0);
        std::thread::sleep(SESSION / 4);
    }
    let last = Instant::now();
    assert_eq!(heartbeat(addr, "quiet", &member, joined.generation_id), 0);
    // Then silence: removed once the session runs out, not before.
    let gone = loop {
        let (_, _, ids) = server.cluster().group_view("quiet").unwrap();
        if ids.is_empty() {
            break last.elapsed();
        }
        assert!(last.elapsed() < SESSION * 10, "never removed");
        std::thread::sleep(Duration::from_millis(2));
    };
    assert!(
        gone >= SESSION,
        "removed after {gone:?}, before its {SESSION:?} session"
    );
    assert!(
        gone < SESSION + Duration::from_millis(500),
        "removed only after {gone:?}"
    );
    assert_eq!(
        heartbeat(addr, "quiet", &member, joined.generation_id),
        ResponseError::UnknownMemberId.code()
    );
    passes(server);
}

fn commit(addr: SocketAddr, group: &str, member: &str, generation: i32, offset: i64) -> i16 {
    let r = commit_request(group, generation, member, &[("orders", 2, offset)]);
    Client::connect(addr).call(&r, 5).topics[0].partitions[0].error_code
}

fn committed(addr: SocketAddr, group: &str) -> i64 {
    let mut t = OffsetFetchRequestTopic::default();
    t.name = TopicName(s("orders"));
    t.partition_indexes = vec![2];
    let mut r = OffsetFetchRequest::default();
    r.group_id = GroupId(s(group));
    r.topics = Some(vec![t]);
    Client::connect(addr).call(&r, 5).topics[0].partitions[0].committed_offset
}

#[test]
fn a_commit_keeps_the_leader_epoch_its_consumer_read_at() {
    let server = server(Duration::ZERO);
    let addr = coordinator(&server, "epochs");
    let member = join(addr, "epochs", "").member_id.to_string();
    sync(addr, "epochs", &member, 1, &[(&member, b"all")]);
    let mut r = commit_request("epochs", 1, &member, &[("orders", 2, 42)]);
    r.topics[0].partitions[0].committed_leader_epoch = 3;
    let answer = Client::connect(addr).call(&r, 8);
    assert_eq!(answer.topics[0].partitions[0].error_code, 0);
    // OffsetFetch gives it back from v5, one group's way and (v8) several
    // groups' way.
    let mut t = OffsetFetchRequestTopic::default();
    t.name = TopicName(s("orders"));
    t.partition_indexes = vec![2];
    let mut one = OffsetFetchRequest::default();
    one.group_id = GroupId(s("epochs"));
    one.topics = Some(vec![t]);
    let epoch_at = |version: i16| {
        let p = &Client::connect(addr).call(&one, version).topics[0].partitions[0];
        (p.committed_offset, p.committed_leader_epoch)
    };
    assert_eq!(epoch_at(5), (42, 3));
    assert_eq!(epoch_at(7), (42, 3));
    // Before v5 the field does not exist: the decoder's default.
    assert_eq!(epoch_at(4), (42, -1));
    use kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopics,
    };
    let mut topics = OffsetFetchRequestTopics::default();
    topics.name = TopicName(s("orders"));
    topics.partition_indexes = vec![2];
    let mut group = OffsetFetchRequestGroup::default();
    group.group_id = GroupId(s("epochs"));
    group.topics = Some(vec![topics]);
    let mut several = OffsetFetchRequest::default();
    several.groups = vec![group];
    let got = Client::connect(addr).call(&several, 8);
    let p = &got.groups[0].topics[0].partitions[0];
    assert_eq!((p.committed_offset, p.committed_leader_epoch), (42, 3));
    // A commit with no epoch (as before OffsetCommit v6) has none.
    assert_eq!(commit(addr, "epochs", &member, 1, 50), 0);
    assert_eq!(epoch_at(5), (50, -1));
    passes(server);
}

#[test]
fn commits_survive_a_members_restart_and_need_the_current_generation() {
    let server = server(Duration::ZERO);
    let addr = coordinator(&server, "committers");
    let joined = join(addr, "committers", "");
    let member = joined.member_id.to_string();
    sync(addr, "committers", &member, 1, &[(&member, b"all")]);
    assert_eq!(committed(addr, "committers"), -1, "nothing committed yet");
    assert_eq!(
        commit(addr, "committers", &member, 7, 10),
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(commit(addr, "committers", &member, 1, 42), 0);
    assert_eq!(leave(addr, "committers", &member), 0);
    // A new incarnation resumes after the last commit.
    let again = join(addr, "committers", "");
    assert_eq!(again.error_code, 0);
    assert_eq!(committed(addr, "committers"), 42);
    passes(server);
}

#[test]
fn members_commit_while_others_rejoin_but_not_between_join_and_assignment() {
    let server = server(Duration::from_millis(300));
    let (addr, members) = two_members(&server, "keepers");
    let (stay, gone) = (&members[0].0, &members[1].0);
    assert_eq!(leave(addr, "keepers", gone), 0);
    let (state, generation, _) = server.cluster().group_view("keepers").unwrap();
    assert_eq!((state, generation), (GroupState::PreparingRebalance, 1));
    // Still generation 1 until the round ends: its commits count.
    assert_eq!(commit(addr, "keepers", stay, 1, 17), 0);
    assert_eq!(committed(addr, "keepers"), 17);
    let rejoined = join(addr, "keepers", stay);
    assert_eq!((rejoined.error_code, rejoined.generation_id), (0, 2));
    let (state, _, _) = server.cluster().group_view("keepers").unwrap();
    assert_eq!(state, GroupState::CompletingRebalance);
    // Joined but not yet assigned: told to wait for the assignment.
    assert_eq!(
        commit(addr, "keepers", stay, 2, 18),
        ResponseError::RebalanceInProgress.code()
    );
    assert_eq!(
        commit(addr, "keepers", stay, 1, 18),
        ResponseError::IllegalGeneration.code()
    );
    let (error, _) = sync(addr, "keepers", stay, 2, &[(stay, b"all")]);
    assert_eq!(error, 0);
    assert_eq!(commit(addr, "keepers", stay, 2, 19), 0);
    assert_eq!(committed(addr, "keepers"), 19);
    passes(server);
}

#[test]
fn requests_for_a_group_nobody_made_make_none_but_a_simple_commit_does() {
    let server = server(Duration::ZERO);
    let addr = coordinator(&server, "ghost");
    assert_eq!(committed(addr, "ghost"), -1);
    let unknown = ResponseError::UnknownMemberId.code();
    assert_eq!(heartbeat(addr, "ghost", "someone", 1), unknown);
    assert_eq!(sync(addr, "ghost", "someone", 1, &[]).0, unknown);
    assert_eq!(leave(addr, "ghost", "someone"), unknown);
    assert_eq!(
        commit(addr, "ghost", "someone", 1, 5),
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(listed(addr, &[]), []);
    // A consumer that assigns its own partitions commits outside any
    // generation: that makes a simple group, with no protocol type.
    assert_eq!(commit(addr, "ghost", "", -1, 7), 0);
    assert_eq!(committed(addr, "ghost"), 7);
    assert_eq!(listed(addr, &[]), [group_row("ghost", "", "Empty")]);
    passes(server);
}

/// Crashes the broker listening at `addr` and waits (up to 10 s) until
/// nothing answers there, as at a crashed broker; returns its id.
fn crash(server: &Server, addr: SocketAddr) -> u32 {
    let broker = server.addrs().iter().position(|a| *a == addr).unwrap();
    server.cluster().crash(broker as u32);
    wait_until(|| std::net::TcpStream::connect(addr).is_err(), "closed");
    broker as u32
}

/// Restarts `broker` and waits (up to 10 s) until it listens again.
fn restart(server: &Server, broker: u32) {
    server.cluster().restart(broker);
    let addr = server.addrs()[broker as usize];
    wait_until(|| std::net::TcpStream::connect(addr).is_ok(), "listening");
}

fn wait_until(done: impl Fn() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "never {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn after_the_coordinators_broker_crashes_members_find_the_new_one_and_follow_it_back() {
    let server = server(Duration::ZERO);
    let old = coordinator(&server, "movers");
    let joined = join(old, "movers", "");
    let member = joined.member_id.to_string();
    sync(old, "movers", &member, 1, &[(&member, b"all")]);
    assert_eq!(commit(old, "movers", &member, 1, 5), 0);
    let dead = crash(&server, old);
    let new = coordinator(&server, "movers");
    assert_ne!(new, old);
    // The group moved whole, as Kafka's next coordinator loads it from
    // its log: the member heartbeats on in its generation, and its
    // commits are there.
    assert_eq!(heartbeat(new, "movers", &member, 1), 0);
    assert_eq!(committed(new, "movers"), 5);
    assert_eq!(commit(new, "movers", &member, 1, 8), 0);
    // It restarts: the group moves back to it, and the member follows.
    restart(&server, dead);
    assert_eq!(coordinator(&server, "movers"), old);
    assert_eq!(
        heartbeat(new, "movers", &member, 1),
        ResponseError::NotCoordinator.code()
    );
    assert_eq!(heartbeat(old, "movers", &member, 1), 0);
    assert_eq!(committed(old, "movers"), 8);
    passes(server);
}

#[test]
fn a_group_in_the_middle_of_a_rebalance_when_its_coordinator_moves_forms_again_at_the_next_one() {
    let server = server(Duration::ZERO);
    let home = coordinator(&server, "halfway");
    let broker = crash(&server, home);
    let interim = coordinator(&server, "halfway");
    let a = join(interim, "halfway", "").member_id.to_string();
    sync(interim, "halfway", &a, 1, &[(&a, b"all")]);
    // A second member's join starts a rebalance, and waits for the first
    // to join again.
    let mut b = Client::connect(interim);
    let asked = b.call(&join_request("halfway", ""), JOIN_V);
    assert_eq!(asked.error_code, ResponseError::MemberIdRequired.code());
    b.send(&join_request("halfway", asked.member_id.as_str()), JOIN_V);
    let rebalancing = ResponseError::RebalanceInProgress.code();
    wait_until(
        || heartbeat(interim, "halfway", &a, 1) == rebalancing,
        "rebalancing",
    );
    // The group moves back to its coordinator, which has no generation of
    // this rebalance: the waiting join is told to look for it, and the
    // members join again there.
    restart(&server, broker);
    assert_eq!(coordinator(&server, "halfway"), home);
    let (_, answer) = b.recv::<kafka_protocol::messages::JoinGroupRequest>(JOIN_V);
    assert_eq!(answer.error_code, ResponseError::NotCoordinator.code());
    assert_eq!(
        heartbeat(home, "halfway", &a, 1),
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(join(home, "halfway", "").error_code, 0);
    passes(server);
}

#[test]
fn bad_session_timeouts_and_unknown_members_are_refused() {
    let server = server(Duration::ZERO);
    let addr = coordinator(&server, "strict");
    let mut c = Client::connect(addr);
    let mut r = join_request("strict", "");
    r.session_timeout_ms = 10;
    assert_eq!(
        c.call(&r, JOIN_V).error_code,
        ResponseError::InvalidSessionTimeout.code()
    );
    let r = join_request("strict", "nobody");
    assert_eq!(
        c.call(&r, JOIN_V).error_code,
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        heartbeat(addr, "strict", "nobody", 0),
        ResponseError::UnknownMemberId.code()
    );
    // A broker that does not coordinate the group says so.
    let other = *server.addrs().iter().find(|a| **a != addr).unwrap();
    assert_eq!(
        heartbeat(other, "strict", "nobody", 0),
        ResponseError::NotCoordinator.code()
    );
    passes(server);
}

/// A consumer-protocol assignment (version 0) of `partitions` of "orders".
fn assignment(partitions: &[i32]) -> Vec<u8> {
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
    use kafka_protocol::messages::ConsumerProtocolAssignment;
    use kafka_protocol::protocol::Encodable;
    let mut tp = TopicPartition::default();
    tp.topic = TopicName(s("orders"));
    tp.partitions = partitions.to_vec();
    let mut a = ConsumerProtocolAssignment::default();
    a.assigned_partitions = vec![tp];
    let mut buf = bytes::BytesMut::new();
    buf.extend_from_slice(&0i16.to_be_bytes());
    a.encode(&mut buf, 0).unwrap();
    buf.to_vec()
}

#[test]
fn a_partition_assigned_to_two_members_fails_the_run() {
    for (second, broken) in [(vec![2, 3], false), (vec![1, 2], true)] {
        let server = server(Duration::from_millis(300));
        let addr = coordinator(&server, "assigned");
        let other = std::thread::spawn(move || join(addr, "assigned", ""));
        let mine = join(addr, "assigned", "");
        let other = other.join().unwrap();
        let (leader, follower) = if mine.leader == mine.member_id {
            (mine, other)
        } else {
            (other, mine)
        };
        let (l, f) = (leader.member_id.to_string(), follower.member_id.to_string());
        let (a, b) = (assignment(&[0, 1]), assignment(&second));
        let (error, _) = sync(addr, "assigned", &l, 1, &[(&l, &a), (&f, &b)]);
        assert_eq!(error, 0);
        let report = server.stop();
        assert_eq!(!report.violations.is_empty(), broken, "{}", report.human());
    }
}

#[test]
fn a_member_waiting_in_a_join_round_longer_than_its_session_is_not_expired() {
    // The first round waits 1 s for others; the session is 300 ms.
    let server = Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig {
            groups: GroupConfig {
                initial_rebalance_delay: Duration::from_secs(1),
                min_session_timeout: Duration::from_millis(100),
                ..GroupConfig::default()
            },
            ..LiveConfig::default()
        },
        topics: vec![],
        limits: Limits::default(),
        tls: None,
    })
    .unwrap();
    let addr = coordinator(&server, "patient");
    let mut c = Client::connect(addr);
    let mut r = join_request("patient", "");
    r.session_timeout_ms = 300;
    let first = c.call(&r, JOIN_V);
    r.member_id = first.member_id.clone();
    let joined = c.call(&r, JOIN_V);
    assert_eq!(
        (joined.error_code, joined.generation_id),
        (0, 1),
        "still a member"
    );
    let member = joined.member_id.to_string();
    // And it is the same while it waits for its assignment: a leader that
    // is slow to sync does not cost the members their sessions.
    assert_eq!(heartbeat(addr, "patient", &member, 1), 0);
    passes(server);
}

/// (member id, instance id) of each member, sorted.
fn instances<'a>(
    members: impl Iterator<Item = (&'a StrBytes, &'a Option<StrBytes>)>,
) -> Vec<(String, Option<String>)> {
    let mut all: Vec<(String, Option<String>)> = members
        .map(|(id, instance)| (id.to_string(), instance.as_ref().map(|i| i.to_string())))
        .collect();
    all.sort();
    all
}

/// A static member's join (`group.instance.id`): no two-step join.
fn join_static(addr: SocketAddr, group: &str, instance: &str, member: &str) -> JoinGroupResponse {
    let mut r = join_request(group, member);
    r.group_instance_id = Some(s(instance));
    Client::connect(addr).call(&r, JOIN_V)
}

fn heartbeat_static(
    addr: SocketAddr,
    group: &str,
    instance: &str,
    member: &str,
    generation: i32,
) -> i16 {
    let mut r = HeartbeatRequest::default();
    r.group_id = GroupId(s(group));
    r.generation_id = generation;
    r.member_id = s(member);
    r.group_instance_id = Some(s(instance));
    Client::connect(addr).call(&r, 3).error_code
}

/// Two static members, "a" and "b", joined in one round and assigned;
/// returns (addr, [(instance, member id)], leader's member id).
fn two_static_members(server: &Server, group: &str) -> (SocketAddr, Vec<(String, String)>, String) {
    let addr = coordinator(server, group);
    let g = group.to_string();
    let b = std::thread::spawn(move || join_static(addr, &g, "b", ""));
    let a = join_static(addr, group, "a", "");
    let b = b.join().unwrap();
    for r in [&a, &b] {
        assert_eq!(
            (r.error_code, r.generation_id),
            (0, 1),
            "one round, no MEMBER_ID_REQUIRED"
        );
    }
    let leader = a.leader.to_string();
    let led = if leader == a.member_id.as_str() {
        &a
    } else {
        &b
    };
    let seen = instances(
        led.members
            .iter()
            .map(|m| (&m.member_id, &m.group_instance_id)),
    );
    let mut expected = vec![
        (a.member_id.to_string(), Some("a".to_string())),
        (b.member_id.to_string(), Some("b".to_string())),
    ];
    expected.sort();
    assert_eq!(seen, expected, "the leader sees each member's instance");
    let (ida, idb) = (a.member_id.to_string(), b.member_id.to_string());
    let follower = if leader == ida {
        idb.clone()
    } else {
        ida.clone()
    };
    let (g, f) = (group.to_string(), follower.clone());
    let waiting = std::thread::spawn(move || sync(addr, &g, &f, 1, &[]));
    std::thread::sleep(Duration::from_millis(100));
    let (error, _) = sync(
        addr,
        group,
        &leader,
        1,
        &[(&ida, b"p0,p1"), (&idb, b"p2,p3")],
    );
    assert_eq!(error, 0);
    assert_eq!(waiting.join().unwrap().0, 0);
    (addr, vec![("a".into(), ida), ("b".into(), idb)], leader)
}

#[test]
fn a_static_member_that_restarts_takes_its_place_back_without_a_rebalance() {
    let server = server(Duration::from_millis(300));
    let (addr, members, leader) = two_static_members(&server, "statics");
    let (old_a, b) = (&members[0].1, &members[1].1);
    // "a" restarts: it joins with no member id and its instance, and gets
    // the current generation at once, as a follower.
    let back = join_static(addr, "statics", "a", "");
    assert_eq!((back.error_code, back.generation_id), (0, 1));
    let new_a = back.member_id.to_string();
    assert_ne!(&new_a, old_a, "a new member id");
    assert_eq!(back.leader.as_str(), leader, "the leader as it was");
    assert!(back.members.is_empty());
    let (error, assignment) = sync(addr, "statics", &new_a, 1, &[]);
    assert_eq!(
        (error, &assignment[..]),
        (0, &b"p0,p1"[..]),
        "its assignment"
    );
    // Nobody rebalanced: "b" heartbeats on at generation 1.
    assert_eq!(heartbeat_static(addr, "statics", "b", b, 1), 0);
    let (state, generation, mut ids) = server.cluster().group_view("statics").unwrap();
    ids.sort();
    let mut expected = vec![new_a.clone(), b.clone()];
    expected.sort();
    assert_eq!((state, generation, ids), (GroupState::Stable, 1, expected));
    // The old id is fenced (it names the instance) or unknown (it does not).
    assert_eq!(
        heartbeat_static(addr, "statics", "a", old_a, 1),
        ResponseError::FencedInstanceId.code()
    );
    assert_eq!(
        heartbeat(addr, "statics", old_a, 1),
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        sync(addr, "statics", old_a, 1, &[]).0,
        ResponseError::UnknownMemberId.code()
    );
    let mut join_old = join_request("statics", old_a);
    join_old.group_instance_id = Some(s("a"));
    assert_eq!(
        Client::connect(addr).call(&join_old, JOIN_V).error_code,
        ResponseError::FencedInstanceId.code()
    );
    assert_eq!(heartbeat_static(addr, "statics", "a", &new_a, 1), 0);
    // DescribeGroups names each member's instance.
    let mut r = DescribeGroupsRequest::default();
    r.groups = vec![GroupId(s("statics"))];
    let described = Client::connect(addr).call(&r, 5);
    let described = instances(
        described.groups[0]
            .members
            .iter()
            .map(|m| (&m.member_id, &m.group_instance_id)),
    );
    let mut expected = vec![
        (new_a.clone(), Some("a".into())),
        (b.clone(), Some("b".into())),
    ];
    expected.sort();
    assert_eq!(described, expected);
    // An admin removes "b" by its instance alone: a rebalance follows.
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = GroupId(s("statics"));
    let mut who = kafka_protocol::messages::leave_group_request::MemberIdentity::default();
    who.group_instance_id = Some(s("b"));
    leave.members = vec![who];
    let left = Client::connect(addr).call(&leave, 3);
    assert_eq!(left.error_code, 0);
    assert_eq!(left.members[0].error_code, 0);
    assert_eq!(left.members[0].group_instance_id.as_deref(), Some("b"));
    assert_eq!(
        heartbeat_static(addr, "statics", "a", &new_a, 1),
        ResponseError::RebalanceInProgress.code()
    );
    let rejoined = join_static(addr, "statics", "a", &new_a);
    assert_eq!((rejoined.error_code, rejoined.generation_id), (0, 2));
    assert_eq!(rejoined.members.len(), 1);
    // Its instance is free again: "b" joins as a new member.
    assert_eq!(
        heartbeat_static(addr, "statics", "b", b, 2),
        ResponseError::UnknownMemberId.code()
    );
    passes(server);
}

#[test]
fn a_second_consumer_with_a_live_members_instance_fences_the_first() {
    let server = server(Duration::from_millis(300));
    let (addr, members, _) = two_static_members(&server, "twins");
    let (a, b) = (members[0].1.clone(), members[1].1.clone());
    // "b" joins again with new metadata: a round starts, and its join
    // waits for "a".
    let mut r = join_request("twins", &b);
    r.group_instance_id = Some(s("b"));
    r.protocols[0].metadata = Bytes::from_static(b"subscription-2");
    let first = std::thread::spawn(move || Client::connect(addr).call(&r, JOIN_V));
    std::thread::sleep(Duration::from_millis(100));
    // Another process starts with instance "b": the waiting join is
    // fenced, and the newcomer joins the round in its place.
    let second = std::thread::spawn(move || join_static(addr, "twins", "b", ""));
    let fenced = first.join().unwrap();
    assert_eq!(fenced.error_code, ResponseError::FencedInstanceId.code());
    std::thread::sleep(Duration::from_millis(100));
    let led = join_static(addr, "twins", "a", &a);
    let second = second.join().unwrap();
    assert_eq!((led.error_code, led.generation_id), (0, 2));
    assert_eq!((second.error_code, second.generation_id), (0, 2));
    assert_ne!(second.member_id.as_str(), b);
    let mut ids: Vec<&str> = led.members.iter().map(|m| m.member_id.as_str()).collect();
    ids.sort();
    let mut expected = vec![a.as_str(), second.member_id.as_str()];
    expected.sort();
    assert_eq!(ids, expected);
    assert_eq!(
        heartbeat_static(addr, "twins", "b", &b, 2),
        ResponseError::FencedInstanceId.code()
    );
    passes(server);
}

#[test]
fn a_static_member_that_stops_heartbeating_loses_its_instance_at_its_session_timeout() {
    let server = server(Duration::ZERO);
    let addr = coordinator(&server, "quiet-static");
    let joined = join_static(addr, "quiet-static", "q", "");
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    let member = joined.member_id.to_string();
    // The sync pushes the session back as it is handled, before its answer
    // comes: the session is measured from before it is sent.
    let start = Instant::now();
    assert_eq!(
        sync(addr, "quiet-static", &member, 1, &[(&member, b"all")]).0,
        0
    );
    loop {
        let (_, _, ids) = server.cluster().group_view("quiet-static").unwrap();
        if ids.is_empty() {
            break;
        }
        assert!(start.elapsed() < SESSION * 10, "never removed");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(start.elapsed() >= SESSION);
    // Back after its session: a new member in a new round, not a takeover.
    let again = join_static(addr, "quiet-static", "q", "");
    assert_eq!((again.error_code, again.generation_id), (0, 2));
    assert_eq!(again.leader, again.member_id);
    passes(server);
}

/// DeleteGroups of `groups` at `addr`: each one's error.
fn delete_groups(addr: SocketAddr, groups: &[&str]) -> Vec<i16> {
    let mut r = DeleteGroupsRequest::default();
    r.groups_names = groups.iter().map(|g| GroupId(s(g))).collect();
    Client::connect(addr)
        .call(&r, 2)
        .results
        .iter()
        .map(|g| g.error_code)
        .collect()
}

#[test]
fn an_admin_deletes_an_empty_group_and_its_offsets_but_not_one_with_members() {
    let server = server(Duration::from_millis(300));
    let (addr, members) = two_members(&server, "doomed");
    let (a, b) = (&members[0].0, &members[1].0);
    assert_eq!(commit(addr, "doomed", a, 1, 17), 0);
    let elsewhere = *server.addrs().iter().find(|&&x| x != addr).unwrap();
    assert_eq!(
        delete_groups(elsewhere, &["doomed"]),
        [ResponseError::NotCoordinator.code()]
    );
    assert_eq!(
        delete_groups(addr, &["doomed"]),
        [ResponseError::NonEmptyGroup.code()]
    );
    assert_eq!(committed(addr, "doomed"), 17);
    for m in [a, b] {
        assert_eq!(leave(addr, "doomed", m), 0);
    }
    let nobody = coordinator(&server, "nobody");
    assert_eq!(
        delete_groups(nobody, &["nobody"]),
        [ResponseError::GroupIdNotFound.code()]
    );
    assert_eq!(delete_groups(addr, &["doomed"]), [0]);
    // Gone, offsets and all; a new member makes it anew.
    assert!(server.cluster().group_view("doomed").is_none());
    assert!(!listed(addr, &[]).iter().any(|g| g.0 == "doomed"));
    assert_eq!(committed(addr, "doomed"), -1);
    assert_eq!(
        delete_groups(addr, &["doomed"]),
        [ResponseError::GroupIdNotFound.code()]
    );
    let again = join(addr, "doomed", "");
    assert_eq!((again.error_code, again.generation_id), (0, 1));
    passes(server);
}

/// A consumer-protocol subscription (v0) to `topics`.
fn subscription(topics: &[&str]) -> Bytes {
    use kafka_protocol::messages::ConsumerProtocolSubscription;
    use kafka_protocol::protocol::Encodable;
    let mut sub = ConsumerProtocolSubscription::default();
    sub.topics = topics.iter().map(|t| s(t)).collect();
    let mut buf = bytes::BytesMut::new();
    buf.extend_from_slice(&0i16.to_be_bytes());
    sub.encode(&mut buf, 0).unwrap();
    buf.freeze()
}

/// One member of `protocol_type` offering `metadata` joins `group` alone
/// and takes the assignment: the group is Stable. Its member id.
fn sole_member(addr: SocketAddr, group: &str, protocol_type: &str, metadata: Bytes) -> String {
    let mut r = join_request(group, "");
    r.protocol_type = s(protocol_type);
    r.protocols[0].metadata = metadata;
    let mut c = Client::connect(addr);
    let first = c.call(&r, JOIN_V);
    r.member_id = first.member_id.clone();
    let joined = c.call(&r, JOIN_V);
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    let member = joined.member_id.to_string();
    assert_eq!(sync(addr, group, &member, 1, &[(&member, b"all")]).0, 0);
    member
}

/// Commits each (topic, partition, offset) for `group` as `member` of
/// generation 1.
fn commit_all(addr: SocketAddr, group: &str, member: &str, offsets: &[(&str, i32, i64)]) {
    let r = commit_request(group, 1, member, offsets);
    let got = Client::connect(addr).call(&r, 5);
    assert!(got.topics.iter().all(|t| t.partitions[0].error_code == 0));
}

/// Every (topic, partition) `group` has an offset committed for.
fn committed_partitions(addr: SocketAddr, group: &str) -> Vec<(String, i32)> {
    let mut r = OffsetFetchRequest::default();
    r.group_id = GroupId(s(group));
    r.topics = None;
    let got = Client::connect(addr).call(&r, 5);
    got.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index))
        })
        .collect()
}

/// OffsetDelete of `partitions` of `group`: the group's error and each
/// partition's.
fn delete_offsets(
    addr: SocketAddr,
    group: &str,
    partitions: &[(&str, i32)],
) -> (i16, Vec<(String, i32, i16)>) {
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    let mut r = kafka_protocol::messages::OffsetDeleteRequest::default();
    r.group_id = GroupId(s(group));
    r.topics = partitions
        .iter()
        .map(|&(topic, partition)| {
            let mut p = OffsetDeleteRequestPartition::default();
            p.partition_index = partition;
            let mut t = OffsetDeleteRequestTopic::default();
            t.name = TopicName(s(topic));
            t.partitions = vec![p];
            t
        })
        .collect();
    let got = Client::connect(addr).call(&r, 0);
    let answers = got
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index, p.error_code))
        })
        .collect();
    (got.error_code, answers)
}

#[test]
fn offset_delete_spares_the_topics_a_groups_members_subscribe_to() {
    let server = server(Duration::ZERO);
    let group = "pruned";
    let addr = coordinator(&server, group);
    let (error, _) = delete_offsets(coordinator(&server, "nobody"), "nobody", &[("orders", 0)]);
    assert_eq!(error, ResponseError::GroupIdNotFound.code());
    // A member subscribed to "orders", with offsets in "orders" and
    // "audit".
    let member = sole_member(addr, group, "consumer", subscription(&["orders"]));
    let offsets = [("orders", 0, 5), ("orders", 1, 6), ("audit", 0, 7)];
    commit_all(addr, group, &member, &offsets);
    let (error, answers) = delete_offsets(addr, group, &[("orders", 0), ("audit", 0)]);
    let subscribed = ResponseError::GroupSubscribedToTopic.code();
    assert_eq!(
        (error, answers),
        (
            0,
            vec![("orders".into(), 0, subscribed), ("audit".into(), 0, 0)]
        )
    );
    let mut left = committed_partitions(addr, group);
    left.sort();
    assert_eq!(left, [("orders".to_string(), 0), ("orders".to_string(), 1)]);
    // Once the group is empty, nothing is spared.
    assert_eq!(leave(addr, group, &member), 0);
    let (error, answers) = delete_offsets(addr, group, &[("orders", 0)]);
    assert_eq!((error, answers), (0, vec![("orders".into(), 0, 0)]));
    assert_eq!(
        committed_partitions(addr, group),
        [("orders".to_string(), 1)]
    );
    // A group of another protocol type has no subscriptions to go by: its
    // offsets stay while it has members.
    let other = "workers";
    let addr = coordinator(&server, other);
    sole_member(addr, other, "connect", Bytes::from_static(b"worker"));
    let (error, answers) = delete_offsets(addr, other, &[("orders", 0)]);
    assert_eq!(
        (error, answers.len()),
        (ResponseError::NonEmptyGroup.code(), 0)
    );
    passes(server);
}
