//! ElectLeaders over the wire: preferred elections where the leader is
//! already the preferred replica, or where that replica cannot lead, and an
//! unclean election that brings an offline partition back on a replica
//! out of sync, at the price of the records it lacks; and the unclean
//! elections a topic's `unclean.leader.election.enable` asks for.

use broker_sim::config::Fault;
use broker_sim::live::{LiveConfig, Partition};
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, produce_request, Client};
use broker_sim::wire::Limits;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;
use std::time::Duration;

const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn server(live: LiveConfig) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live,
        topics: vec![("orders".into(), 3)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

/// ElectLeaders v2 of `election` at broker `at` for `partitions` of
/// "orders" (`None`: every partition of every topic).
fn elect(
    server: &Server,
    at: usize,
    election: i8,
    partitions: Option<&[i32]>,
) -> ElectLeadersResponse {
    let mut r = ElectLeadersRequest::default();
    r.election_type = election;
    r.timeout_ms = 5_000;
    r.topic_partitions = partitions.map(|p| {
        let mut t = TopicPartitions::default();
        t.topic = name("orders");
        t.partitions = p.to_vec();
        vec![t]
    });
    Client::connect(server.addrs()[at]).call(&r, 2)
}

/// Each partition's error, in answer order.
fn errors(r: &ElectLeadersResponse) -> Vec<(i32, i16)> {
    r.replica_election_results
        .iter()
        .flat_map(|t| t.partition_result.iter())
        .map(|p| (p.partition_id, p.error_code))
        .collect()
}

/// Broker 2 never fetches: it leaves an ISR 200 ms after it falls
/// behind.
fn broker_2_never_fetches() -> LiveConfig {
    LiveConfig {
        faults: vec![Fault::SlowFollower {
            broker: 2,
            from: Duration::ZERO,
            until: Duration::from_secs(3600),
            delay: Duration::from_secs(3600),
        }],
        replica_lag: Duration::from_millis(200),
        ..LiveConfig::default()
    }
}

/// Stops `server`; every check held.
fn passes(server: Server) {
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

#[test]
fn a_preferred_election_is_needed_only_where_the_preferred_replica_can_take_over() {
    let server = server(LiveConfig::default());
    let not_needed = code(ResponseError::ElectionNotNeeded);
    // Every partition is led by its first replica already.
    let r = elect(&server, 1, PREFERRED, Some(&[0, 1, 2]));
    assert_eq!(r.error_code, 0);
    assert_eq!(
        errors(&r),
        vec![(0, not_needed), (1, not_needed), (2, not_needed)]
    );
    // Asked for all, the partitions with nothing to do are left out.
    let r = elect(&server, 0, PREFERRED, None);
    assert_eq!(errors(&r), vec![]);
    // A partition that does not exist.
    let r = elect(&server, 0, PREFERRED, Some(&[7]));
    assert_eq!(
        errors(&r),
        vec![(7, code(ResponseError::UnknownTopicOrPartition))]
    );
    // The preferred replica of a partition is down: it cannot lead.
    let cluster = server.cluster();
    let preferred = cluster.topic("orders").unwrap().partitions[0]
        .log
        .lock()
        .replicas[0];
    cluster.crash(preferred);
    let other = (0..3).find(|&b| b != preferred as usize).unwrap();
    let r = elect(&server, other, PREFERRED, Some(&[0]));
    assert_eq!(
        errors(&r),
        vec![(0, code(ResponseError::PreferredLeaderNotAvailable))]
    );
    // A partition with a leader needs no unclean election.
    let r = elect(&server, other, UNCLEAN, Some(&[0]));
    assert_eq!(errors(&r), vec![(0, not_needed)]);
    // An election type Kafka does not define.
    assert_eq!(
        elect(&server, other, 5, Some(&[0])).error_code,
        code(ResponseError::InvalidRequest)
    );
    passes(server);
}

#[test]
fn an_unclean_election_brings_an_offline_partition_back_on_a_replica_out_of_sync() {
    let server = server(broker_2_never_fetches());
    let cluster = server.cluster();
    let partitions = cluster.topic("orders").unwrap().partitions.clone();
    let log = |p: usize| partitions[p].log.lock();
    // Five records on partition 0: acknowledged once broker 2, which
    // does not fetch them, has left its ISR.
    let leader = log(0).leader.unwrap();
    let r = produce_request(
        "orders",
        &[(0, batch(&[b"a", b"b", b"c", b"d", b"e"]))],
        -1,
        10_000,
    );
    let answer = Client::connect(server.addrs()[leader as usize]).call(&r, 9);
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    assert!(!log(0).isr.contains(&2));
    assert_eq!(log(0).hw, 5);
    // Both go down: partition 0 has nobody in sync to lead it.
    cluster.crash(0);
    cluster.crash(1);
    assert_eq!(log(0).leader, None);
    let offline_epoch = log(0).epoch;
    assert_eq!(
        errors(&elect(&server, 2, PREFERRED, Some(&[0]))),
        vec![(0, code(ResponseError::PreferredLeaderNotAvailable))]
    );
    // Unclean: broker 2 leads with what it has, none of the five.
    assert_eq!(
        errors(&elect(&server, 2, UNCLEAN, Some(&[0]))),
        vec![(0, 0)]
    );
    {
        let log = log(0);
        assert_eq!((log.leader, log.isr.clone()), (Some(2), vec![2]));
        assert_eq!((log.log_end(), log.hw), (0, 0));
        assert!(log.epoch > offline_epoch);
    }
    // It takes records again.
    let r = produce_request("orders", &[(0, batch(&[b"f"]))], 1, 5_000);
    let answer = Client::connect(server.addrs()[2]).call(&r, 9);
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(answer.responses[0].partition_responses[0].base_offset, 0);
    assert_eq!(
        errors(&elect(&server, 2, UNCLEAN, Some(&[0]))),
        vec![(0, code(ResponseError::ElectionNotNeeded))]
    );
    passes(server);
}

/// Sets or creates with `unclean.leader.election.enable=true`: topic
/// `name` altered (IncrementalAlterConfigs), or created with three
/// partitions (CreateTopics); the error code.
fn allow_unclean(server: &Server, name: &str, create: bool) -> i16 {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{CreateTopicsRequest, IncrementalAlterConfigsRequest};
    let s = |v: &str| StrBytes::from_string(v.to_string());
    // Broker 2 stays up throughout.
    let mut client = Client::connect(server.addrs()[2]);
    if create {
        let mut c = CreatableTopicConfig::default();
        c.name = s("unclean.leader.election.enable");
        c.value = Some(s("TRUE"));
        let mut t = CreatableTopic::default();
        t.name = self::name(name);
        t.num_partitions = 3;
        t.replication_factor = 3;
        t.configs = vec![c];
        let mut r = CreateTopicsRequest::default();
        r.topics = vec![t];
        r.timeout_ms = 5_000;
        return client.call(&r, 7).topics[0].error_code;
    }
    let mut c = AlterableConfig::default();
    c.name = s("unclean.leader.election.enable");
    c.value = Some(s("true"));
    let mut res = AlterConfigsResource::default();
    res.resource_type = 2;
    res.resource_name = s(name);
    res.configs = vec![c];
    let mut r = IncrementalAlterConfigsRequest::default();
    r.resources = vec![res];
    client.call(&r, 1).responses[0].error_code
}

/// A partition of `topic` that broker 2 (which never fetches) follows,
/// with `records` produced to it with `acks=all` and acknowledged, once
/// broker 2 has left its ISR.
fn followed(server: &Server, topic: &str, records: &[&[u8]]) -> Arc<Partition> {
    let t = server.cluster().topic(topic).unwrap();
    let p = (t.partitions.iter())
        .find(|p| p.log.lock().leader != Some(2))
        .expect("broker 2 does not lead every partition");
    let leader = p.log.lock().leader.unwrap();
    let r = produce_request(topic, &[(p.index, batch(records))], -1, 10_000);
    let answer = Client::connect(server.addrs()[leader as usize]).call(&r, 9);
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(p.log.lock().hw, records.len() as i64);
    Arc::clone(p)
}

#[test]
fn a_topic_that_allows_unclean_elections_is_led_by_a_replica_out_of_sync() {
    let server = server(broker_2_never_fetches());
    let cluster = server.cluster();
    assert_eq!(allow_unclean(&server, "eager", true), 0);
    // A partition of each topic that broker 2 follows, with five records
    // acknowledged once broker 2 has left its ISR.
    let five: &[&[u8]] = &[b"a", b"b", b"c", b"d", b"e"];
    let (orders, eager) = (
        followed(&server, "orders", five),
        followed(&server, "eager", five),
    );
    // Both others go down: nobody in sync is left.
    cluster.crash(0);
    cluster.crash(1);
    // The topic that allows it is led by broker 2 at once, with what it
    // has: none of the five.
    {
        let log = eager.log.lock();
        assert_eq!((log.leader, log.isr.clone()), (Some(2), vec![2]));
        assert_eq!((log.log_end(), log.hw), (0, 0));
    }
    // The other waits offline, as Kafka's default has it...
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(orders.log.lock().leader, None);
    // ...until it is allowed: the next check elects broker 2.
    assert_eq!(allow_unclean(&server, "orders", false), 0);
    let start = std::time::Instant::now();
    while orders.log.lock().leader.is_none() {
        assert!(start.elapsed() < Duration::from_secs(5), "elected");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(orders.log.lock().leader, Some(2));
    passes(server);
}

#[test]
fn an_out_of_sync_replica_that_restarts_leads_a_topic_that_allows_it() {
    let server = server(broker_2_never_fetches());
    let cluster = server.cluster();
    assert_eq!(allow_unclean(&server, "late", true), 0);
    let p = followed(&server, "late", &[b"a", b"b"]);
    // Every replica goes down, broker 2 (out of sync) first: nobody is
    // left to lead.
    for b in [2, 0, 1] {
        cluster.crash(b);
    }
    assert_eq!(p.log.lock().leader, None);
    // Broker 2 comes back first: it leads, with none of the two records.
    cluster.restart(2);
    let log = p.log.lock();
    assert_eq!((log.leader, log.isr.clone()), (Some(2), vec![2]));
    assert_eq!((log.log_end(), log.hw), (0, 0));
    drop(log);
    passes(server);
}
