//! Consumer groups at scale over the wire front, for each timer in one
//! run: 10,000 members in 1,000 groups join, sync and heartbeat every 3 s
//! (the heartbeat purgatory holds 10,000 sessions, each pushed back by
//! every heartbeat); then 100 whole groups fall silent and their sessions
//! expire, for the lateness of the expiries. `--protocol consumer` runs
//! the consumer group protocol (KIP-848) instead: each member joins and
//! heartbeats with ConsumerGroupHeartbeat, and the coordinator assigns.
//!
//! ```sh
//! cargo bench --bench groups
//! cargo bench --bench groups -- --help
//! ```
//!
//! One connection per group, its members' requests pipelined on it; the
//! clients run in the same process, so the CPU figure is the whole
//! process's per heartbeat. Memory per member is the resident memory the
//! joined groups added (connections included), divided by the members.

use broker_sim::live::{GroupConfig, LiveConfig};
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::Client;
use broker_sim::wire::Limits;
use bytes::Bytes;
#[path = "common/process.rs"]
mod process;
#[path = "common/timers.rs"]
mod timer_arg;

use clap::Parser;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, HeartbeatRequest,
    JoinGroupRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use process::{cpu_seconds, rss_bytes};
use std::time::{Duration, Instant};
use timer_arg::{timers, TimerArg};

/// The harness's allocator (jemalloc: flat under the purgatory's soak).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(about = "Consumer groups at scale: joins, heartbeats and session expiries")]
struct Args {
    /// Groups.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=5000))]
    groups: u32,
    /// Members per group.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=50))]
    members: u32,
    /// Heartbeat interval, ms.
    #[arg(long, default_value_t = 3000)]
    heartbeat_ms: u64,
    /// Session timeout, ms.
    #[arg(long, default_value_t = 10_000)]
    session_ms: u64,
    /// Heartbeat rounds before some groups fall silent.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Only this timer (wheel or delayqueue); both by default.
    #[arg(long, value_enum)]
    timer: Option<TimerArg>,
    /// The group protocol the members speak.
    #[arg(long, value_enum, default_value_t = Protocol::Classic)]
    protocol: Protocol,
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq)]
enum Protocol {
    /// JoinGroup, SyncGroup and Heartbeat; the leader assigns.
    Classic,
    /// ConsumerGroupHeartbeat (KIP-848); the coordinator assigns.
    Consumer,
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

struct Group {
    client: Client,
    id: String,
    members: Vec<String>,
    /// The classic generation, or each member's epoch (consumer protocol).
    generation: i32,
    epochs: Vec<i32>,
    /// What each member owns (consumer protocol), as its heartbeats say.
    owned: Vec<Vec<TopicPartitions>>,
}

/// A consumer-protocol heartbeat of member `m` of `g`: a join (epoch 0,
/// with its subscription), or one that says what it owns.
fn consumer_beat(g: &Group, m: usize) -> ConsumerGroupHeartbeatRequest {
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = GroupId(s(&g.id));
    r.member_id = s(&g.members[m]);
    r.member_epoch = g.epochs[m];
    r.rebalance_timeout_ms = -1;
    r.topic_partitions = Some(g.owned[m].clone());
    if g.epochs[m] == 0 {
        r.rebalance_timeout_ms = 30_000;
        r.subscribed_topic_names = Some(vec![TopicName(s("orders"))]);
    }
    r
}

/// Takes in member `m`'s answer: its epoch and (when sent) what it now
/// owns. Whether either changed.
fn consumer_answer(g: &mut Group, m: usize, r: &ConsumerGroupHeartbeatResponse) -> bool {
    assert_eq!(r.error_code, 0, "consumer heartbeat: {:?}", r.error_message);
    let mut changed = r.member_epoch != g.epochs[m];
    g.epochs[m] = r.member_epoch;
    if let Some(a) = &r.assignment {
        let owned: Vec<TopicPartitions> = a
            .topic_partitions
            .iter()
            .map(|t| {
                let mut o = TopicPartitions::default();
                o.topic_id = t.topic_id;
                o.partitions = t.partitions.clone();
                o
            })
            .collect();
        changed |= owned != g.owned[m];
        g.owned[m] = owned;
    }
    changed
}

/// Every member of every group heartbeats (pipelined per group) until a
/// whole pass changes no member's epoch: the groups have settled.
fn settle_consumers(groups: &mut [Group]) {
    for _ in 0..50 {
        let mut changed = false;
        for g in groups.iter_mut() {
            for m in 0..g.members.len() {
                let r = consumer_beat(g, m);
                g.client.send(&r, 1);
            }
            for m in 0..g.members.len() {
                let (_, r) = g.client.recv::<ConsumerGroupHeartbeatRequest>(1);
                changed |= consumer_answer(g, m, &r);
            }
        }
        if !changed {
            return;
        }
    }
    panic!("the consumer groups did not settle");
}

fn join_all(server: &Server, args: &Args) -> Vec<Group> {
    let addr = server.addrs()[0];
    let mut groups: Vec<Group> = (0..args.groups)
        .map(|g| Group {
            client: Client::connect(addr),
            id: format!("group-{g}"),
            members: Vec::new(),
            generation: 0,
            epochs: Vec::new(),
            owned: Vec::new(),
        })
        .collect();
    if args.protocol == Protocol::Consumer {
        for (i, g) in groups.iter_mut().enumerate() {
            g.members = (0..args.members)
                .map(|m| format!("member-{i}-{m}"))
                .collect();
            g.epochs = vec![0; g.members.len()];
            g.owned = vec![Vec::new(); g.members.len()];
        }
        settle_consumers(&mut groups);
        return groups;
    }
    for g in &mut groups {
        for _ in 0..args.members {
            let mut p = JoinGroupRequestProtocol::default();
            p.name = s("range");
            p.metadata = Bytes::from_static(b"\0\0\0\0\0\x01\0\x06orders\xff\xff\xff\xff");
            let mut r = JoinGroupRequest::default();
            r.group_id = GroupId(s(&g.id));
            r.session_timeout_ms = args.session_ms as i32;
            r.rebalance_timeout_ms = 30_000;
            r.protocol_type = s("consumer");
            r.protocols = vec![p];
            // v3: the member id is assigned on this first join.
            g.client.send(&r, 3);
        }
    }
    for g in &mut groups {
        let mut leader = String::new();
        for _ in 0..args.members {
            let (_, r) = g.client.recv::<JoinGroupRequest>(3);
            assert_eq!(r.error_code, 0, "join");
            g.members.push(r.member_id.to_string());
            g.generation = r.generation_id;
            leader = r.leader.to_string();
        }
        for m in &g.members {
            let mut r = SyncGroupRequest::default();
            r.group_id = GroupId(s(&g.id));
            r.generation_id = g.generation;
            r.member_id = s(m);
            if *m == leader {
                r.assignments = g
                    .members
                    .iter()
                    .map(|x| {
                        let mut a = SyncGroupRequestAssignment::default();
                        a.member_id = s(x);
                        a
                    })
                    .collect();
            }
            g.client.send(&r, 3);
        }
        for _ in 0..args.members {
            let (_, r) = g.client.recv::<SyncGroupRequest>(3);
            assert_eq!(r.error_code, 0, "sync");
        }
    }
    groups
}

/// One heartbeat from every member of `groups`, spread over `interval`.
fn heartbeat_round(groups: &mut [Group], interval: Duration) -> u64 {
    let start = Instant::now();
    let n = groups.len().max(1);
    let mut sent = 0;
    for (i, g) in groups.iter_mut().enumerate() {
        let due = start + interval.mul_f64(i as f64 / n as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if !g.epochs.is_empty() {
            for m in 0..g.members.len() {
                let r = consumer_beat(g, m);
                g.client.send(&r, 1);
            }
            for m in 0..g.members.len() {
                let (_, r) = g.client.recv::<ConsumerGroupHeartbeatRequest>(1);
                consumer_answer(g, m, &r);
                sent += 1;
            }
            continue;
        }
        for m in &g.members {
            let mut r = HeartbeatRequest::default();
            r.group_id = GroupId(s(&g.id));
            r.generation_id = g.generation;
            r.member_id = s(m);
            g.client.send(&r, 3);
        }
        for _ in 0..g.members.len() {
            let (_, r) = g.client.recv::<HeartbeatRequest>(3);
            assert_eq!(r.error_code, 0, "heartbeat");
            sent += 1;
        }
    }
    if let Some(rest) = (start + interval).checked_duration_since(Instant::now()) {
        std::thread::sleep(rest);
    }
    sent
}

fn quantile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0
}

fn main() {
    let args = Args::parse();
    let timers = timers(args.timer);
    let interval = Duration::from_millis(args.heartbeat_ms);
    let protocol = match args.protocol {
        Protocol::Classic => "classic",
        Protocol::Consumer => "consumer",
    };
    println!(
        "{} groups x {} members ({protocol} protocol), heartbeat every {} ms, session {} ms; {} rounds, then {} groups fall silent",
        args.groups, args.members, args.heartbeat_ms, args.session_ms, args.rounds, args.groups / 10
    );
    println!(
        "{:<11} {:>12} {:>10} {:>10} {:>12} {:>12} {:>12} {:>9}",
        "timer",
        "heartbeats/s",
        "cpu us/hb",
        "B/member",
        "late p50 ms",
        "late p99 ms",
        "late max ms",
        "expired"
    );
    for timer in timers {
        let server = Server::start(ServeOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            advertise: None,
            live: LiveConfig {
                brokers: 1,
                replication_factor: 1,
                min_insync: 1,
                timer,
                groups: GroupConfig {
                    initial_rebalance_delay: Duration::from_secs(1),
                    min_session_timeout: Duration::from_millis(100),
                    consumer_session_timeout: Duration::from_millis(args.session_ms),
                    ..GroupConfig::default()
                },
                ..LiveConfig::default()
            },
            topics: vec![("orders".into(), 8)],
            limits: Limits::default(),
            tls: None,
        })
        .expect("the server starts");
        let before = rss_bytes();
        let mut groups = join_all(&server, &args);
        let members = (args.groups * args.members) as f64;
        let per_member = rss_bytes().saturating_sub(before) as f64 / members;
        let (cpu0, t0) = (cpu_seconds(), Instant::now());
        let mut beats = 0;
        for _ in 0..args.rounds {
            beats += heartbeat_round(&mut groups, interval);
        }
        let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
        // A tenth of the groups fall silent; the rest go on heartbeating
        // until every silent session has expired.
        let silent = groups.len() / 10;
        let expected = silent * args.members as usize;
        let checks = server.cluster().checks.clone();
        let deadline = Instant::now() + Duration::from_millis(args.session_ms) * 3;
        while checks.session_lateness_us.lock().len() < expected && Instant::now() < deadline {
            heartbeat_round(
                &mut groups[silent..],
                interval.min(Duration::from_millis(args.session_ms / 3)),
            );
        }
        let mut late = checks.session_lateness_us.lock().clone();
        late.sort_unstable();
        println!(
            "{:<11} {:>12.0} {:>10.1} {:>10.0} {:>12.2} {:>12.2} {:>12.2} {:>9}",
            timer.name(),
            beats as f64 / wall,
            cpu / beats.max(1) as f64 * 1e6,
            per_member,
            quantile(&late, 0.5),
            quantile(&late, 0.99),
            quantile(&late, 1.0),
            late.len(),
        );
        drop(groups);
        let report = server.stop();
        if !report.violations.is_empty() {
            eprintln!("{}", report.human());
            std::process::exit(1);
        }
    }
    println!("lateness: how long after its deadline (last heartbeat + session timeout) each silent session expired");
}
