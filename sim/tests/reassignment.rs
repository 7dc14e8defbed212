//! Partition reassignment over the wire: AlterPartitionReassignments moves
//! a partition to other brokers (its leader with it) without losing a
//! record, ListPartitionReassignments lists a move while its new replica
//! catches up, and a move is cancelled back to the replicas from before.

use broker_sim::config::Fault;
use broker_sim::live::{LiveConfig, Partition};
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, produce_request, values, Client};
use broker_sim::wire::Limits;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, FetchRequest, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Three brokers; "orders" has three partitions of one replica each.
fn server(faults: Vec<Fault>) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig {
            replication_factor: 1,
            min_insync: 1,
            faults,
            ..LiveConfig::default()
        },
        topics: vec![("orders".into(), 3)],
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

/// As [`server`], with broker 2 never fetching: a replica placed on it
/// never catches up, so a move onto it never finishes.
fn broker_2_never_fetches() -> Server {
    server(vec![Fault::SlowFollower {
        broker: 2,
        from: Duration::ZERO,
        until: Duration::from_secs(3600),
        delay: Duration::from_secs(3600),
    }])
}

/// The partition of "orders" whose one replica is on `broker` (the
/// partitions are spread one per broker), and its index.
fn on_broker(server: &Server, broker: u32) -> (i32, Arc<Partition>) {
    let topic = server.cluster().topic("orders").unwrap();
    let at = (topic.partitions.iter())
        .position(|p| p.log.lock().replicas == [broker])
        .unwrap();
    (at as i32, Arc::clone(&topic.partitions[at]))
}

fn passes(server: Server) {
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

/// AlterPartitionReassignments v0 at broker 1 for `topic`: each partition
/// with its target (`None`: cancel); each partition's error code.
fn alter(server: &Server, topic: &str, moves: &[(i32, Option<&[i32]>)]) -> Vec<(i32, i16)> {
    let mut r = AlterPartitionReassignmentsRequest::default();
    r.timeout_ms = 5_000;
    let mut t = ReassignableTopic::default();
    t.name = name(topic);
    t.partitions = moves
        .iter()
        .map(|&(index, target)| {
            let mut p = ReassignablePartition::default();
            p.partition_index = index;
            p.replicas = target.map(|t| t.iter().map(|&b| BrokerId(b)).collect());
            p
        })
        .collect();
    r.topics = vec![t];
    let answer = Client::connect(server.addrs()[1]).call(&r, 0);
    assert_eq!(answer.error_code, 0);
    answer
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            assert_eq!(p.error_code == 0, p.error_message.is_none(), "{p:?}");
            (p.partition_index, p.error_code)
        })
        .collect()
}

/// ListPartitionReassignments v0 at broker 2 (`None`: every partition).
fn list(server: &Server, asked: Option<&[i32]>) -> ListPartitionReassignmentsResponse {
    let mut r = ListPartitionReassignmentsRequest::default();
    r.timeout_ms = 5_000;
    r.topics = asked.map(|indexes| {
        let mut t = ListPartitionReassignmentsTopics::default();
        t.name = name("orders");
        t.partition_indexes = indexes.to_vec();
        vec![t]
    });
    Client::connect(server.addrs()[2]).call(&r, 0)
}

/// Each listed move: (partition, replicas, adding, removing).
type Move = (i32, Vec<i32>, Vec<i32>, Vec<i32>);

fn moves(r: &ListPartitionReassignmentsResponse) -> Vec<Move> {
    let ids = |b: &[BrokerId]| b.iter().map(|b| b.0).collect::<Vec<_>>();
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            (
                p.partition_index,
                ids(&p.replicas),
                ids(&p.adding_replicas),
                ids(&p.removing_replicas),
            )
        })
        .collect()
}

/// Produces `records` to partition `p` of "orders" at `broker` with
/// `acks=all`; the partition's error code.
fn produce(server: &Server, broker: u32, p: i32, records: &[&[u8]]) -> i16 {
    let r = produce_request("orders", &[(p, batch(records))], -1, 10_000);
    let answer = Client::connect(server.addrs()[broker as usize]).call(&r, 9);
    answer.responses[0].partition_responses[0].error_code
}

/// Every record of partition `p` of "orders" that `broker` serves from
/// offset 0, or its error code.
fn read(server: &Server, broker: u32, p: i32) -> Result<Vec<Vec<u8>>, i16> {
    let mut fp = FetchPartition::default();
    fp.partition = p;
    fp.partition_max_bytes = 1 << 20;
    fp.current_leader_epoch = -1;
    let mut t = FetchTopic::default();
    t.topic = name("orders");
    t.partitions = vec![fp];
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_bytes = 1 << 20;
    r.topics = vec![t];
    let answer = Client::connect(server.addrs()[broker as usize]).call(&r, 11);
    let data = &answer.responses[0].partitions[0];
    match data.error_code {
        0 => Ok(values(&data.records.clone().unwrap_or_default())
            .into_iter()
            .map(|(_, v)| v)
            .collect()),
        e => Err(e),
    }
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// Waits up to 10 s for `done`.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < until, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_partition_moves_with_its_leader_to_the_brokers_named_and_keeps_every_record() {
    let server = server(Vec::new());
    let cluster = server.cluster();
    let partition = Arc::clone(&cluster.topic("orders").unwrap().partitions[0]);
    let (from, epoch) = {
        let log = partition.log.lock();
        (log.leader.unwrap(), log.epoch)
    };
    assert_eq!(produce(&server, from, 0, &[b"a", b"b", b"c"]), 0);
    let to: Vec<i32> = (0..3).filter(|&b| b != from as i32).collect();
    assert_eq!(alter(&server, "orders", &[(0, Some(&to))]), vec![(0, 0)]);
    eventually("the move finishes", || !partition.log.lock().reassigning());
    {
        let log = partition.log.lock();
        let to: Vec<u32> = to.iter().map(|&b| b as u32).collect();
        assert_eq!(log.replicas, to);
        let mut isr = log.isr.clone();
        isr.sort_unstable();
        assert_eq!(isr, to, "both new replicas in sync");
        assert_eq!(log.leader, Some(to[0]), "the first of the target leads");
        assert!(log.epoch > epoch, "in a new epoch");
    }
    assert!(
        moves(&list(&server, None)).is_empty(),
        "nothing left to list"
    );
    let leader = to[0] as u32;
    // The old broker holds the partition no more; the new leader has every
    // record, and takes more, acknowledged once both new replicas have them.
    assert_eq!(
        produce(&server, from, 0, &[b"x"]),
        code(ResponseError::NotLeaderOrFollower)
    );
    assert_eq!(produce(&server, leader, 0, &[b"d"]), 0);
    let expected: Vec<Vec<u8>> = [b"a", b"b", b"c", b"d"]
        .iter()
        .map(|v| v.to_vec())
        .collect();
    eventually("the records are readable at the new leader", || {
        read(&server, leader, 0) == Ok(expected.clone())
    });
    passes(server);
}

#[test]
fn a_move_waits_for_its_new_replica_is_listed_meanwhile_and_can_be_cancelled() {
    let server = broker_2_never_fetches();
    let on = 0;
    let (p, partition) = on_broker(&server, on as u32);
    assert_eq!(
        alter(&server, "orders", &[(p, Some(&[on, 2]))]),
        vec![(p, 0)]
    );
    let listed = vec![(p, vec![on, 2], vec![2], vec![])];
    assert_eq!(moves(&list(&server, None)), listed);
    assert_eq!(moves(&list(&server, Some(&[p]))), listed);
    let others: Vec<i32> = (0..3).filter(|&i| i != p).collect();
    assert!(list(&server, Some(&others)).topics.is_empty());
    // Until it has caught up, the new replica is out of the ISR, and an
    // `acks=all` produce does not wait for it.
    assert_eq!(produce(&server, on as u32, p, &[b"kept"]), 0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(moves(&list(&server, None)), listed, "still under way");
    // Cancelled: the replicas from before, and nothing more to cancel.
    assert_eq!(alter(&server, "orders", &[(p, None)]), vec![(p, 0)]);
    assert!(moves(&list(&server, None)).is_empty());
    assert_eq!(partition.log.lock().replicas, vec![on as u32]);
    assert_eq!(
        alter(&server, "orders", &[(p, None)]),
        vec![(p, code(ResponseError::NoReassignmentInProgress))]
    );
    assert_eq!(read(&server, on as u32, p), Ok(vec![b"kept".to_vec()]));
    passes(server);
}

#[test]
fn a_cancelled_move_takes_the_leadership_back_from_a_broker_it_was_adding() {
    let server = broker_2_never_fetches();
    let (p, partition) = on_broker(&server, 0);
    let log = || partition.log.lock();
    assert_eq!(produce(&server, 0, p, &[b"a", b"b"]), 0);
    // Broker 1, first of the target, catches up and, as the preferred
    // replica in sync, takes the leadership while broker 2 holds the move.
    assert_eq!(
        alter(&server, "orders", &[(p, Some(&[1, 2]))]),
        vec![(p, 0)]
    );
    eventually("broker 1 leads", || log().leader == Some(1));
    assert!(log().reassigning());
    let epoch = log().epoch;
    assert_eq!(alter(&server, "orders", &[(p, None)]), vec![(p, 0)]);
    {
        let log = log();
        assert_eq!((log.replicas.clone(), log.isr.clone()), (vec![0], vec![0]));
        assert_eq!(log.leader, Some(0), "back on the replica from before");
        assert!(log.epoch > epoch, "in a new epoch");
    }
    assert_eq!(
        produce(&server, 1, p, &[b"x"]),
        code(ResponseError::NotLeaderOrFollower)
    );
    assert_eq!(produce(&server, 0, p, &[b"c"]), 0);
    assert_eq!(
        read(&server, 0, p),
        Ok(vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()])
    );
    passes(server);
}

#[test]
fn a_move_of_an_offline_partition_waits_for_its_leader_to_come_back() {
    let server = server(Vec::new());
    let (p, partition) = on_broker(&server, 0);
    let log = || partition.log.lock();
    assert_eq!(produce(&server, 0, p, &[b"a", b"b"]), 0);
    // Its one replica down (fenced at once here): nobody leads it, and
    // nobody has its records to give broker 1.
    server.cluster().crash(0);
    assert_eq!(log().leader, None);
    assert_eq!(alter(&server, "orders", &[(p, Some(&[1]))]), vec![(p, 0)]);
    std::thread::sleep(Duration::from_millis(300));
    assert!(log().reassigning(), "broker 1 cannot catch up");
    assert_eq!(log().isr, Vec::<u32>::new());
    // Back, broker 0 leads again; broker 1 fetches from it, and the move
    // finishes with broker 1 leading.
    server.cluster().restart(0);
    eventually("the move finishes", || !log().reassigning());
    let (replicas, leader) = {
        let log = log();
        (log.replicas.clone(), log.leader)
    };
    assert_eq!((replicas, leader), (vec![1], Some(1)));
    assert_eq!(read(&server, 1, p), Ok(vec![b"a".to_vec(), b"b".to_vec()]));
    passes(server);
}

#[test]
fn targets_kafka_refuses_are_refused_partition_by_partition() {
    let server = server(Vec::new());
    let invalid = code(ResponseError::InvalidReplicaAssignment);
    let unknown = code(ResponseError::UnknownTopicOrPartition);
    assert_eq!(
        alter(
            &server,
            "orders",
            &[
                (0, Some(&[])),
                (1, Some(&[0, 0])),
                (2, Some(&[7])),
                (9, Some(&[0])),
                (2, Some(&[1, 0])),
            ]
        ),
        vec![
            (0, invalid),
            (1, invalid),
            (2, invalid),
            (9, unknown),
            (2, 0)
        ]
    );
    assert_eq!(
        alter(&server, "missing", &[(0, Some(&[0]))]),
        vec![(0, unknown)]
    );
    passes(server);
}
