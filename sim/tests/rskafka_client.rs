//! rskafka, a Kafka client in Rust with a protocol implementation of its
//! own (InfluxData's; it sends Produce v3-7, Fetch v4, Metadata v0-4),
//! against the served cluster in the same process: topics made and
//! deleted by its controller client, `acks=all` produces, long-poll
//! fetches that wait in the purgatory, offsets, DeleteRecords, and a
//! leader's crash under way.

use broker_sim::config::Fault;
use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::Limits;
use rskafka::client::partition::{Compression, OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn start(live: LiveConfig) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live,
        topics: Vec::new(),
        limits: Limits::default(),
        tls: None,
    })
    .expect("the server starts")
}

/// Runs the client side on a runtime of its own (the server has one).
fn client_side<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(work)
}

async fn connect(server: &Server) -> Client {
    let brokers = server.addrs().iter().map(|a| a.to_string()).collect();
    ClientBuilder::new(brokers)
        .build()
        .await
        .expect("rskafka connects")
}

async fn partition(client: &Client, topic: &str, index: i32) -> PartitionClient {
    client
        .partition_client(topic.to_owned(), index, UnknownTopicHandling::Retry)
        .await
        .expect("a partition client")
}

fn record(value: &[u8]) -> Record {
    Record {
        key: None,
        value: Some(value.to_vec()),
        headers: BTreeMap::new(),
        timestamp: chrono::Utc::now(),
    }
}

/// Every record of the partition from `from`, by offset.
async fn read_all(p: &PartitionClient, from: i64) -> HashMap<i64, Vec<u8>> {
    let mut log = HashMap::new();
    let mut next = from;
    loop {
        let (records, high_watermark) = p.fetch_records(next, 1..1_000_000, 100).await.unwrap();
        for r in &records {
            log.insert(r.offset, r.record.value.clone().unwrap_or_default());
            next = r.offset + 1;
        }
        if records.is_empty() || next >= high_watermark {
            return log;
        }
    }
}

#[test]
fn rskafka_produces_fetches_waits_and_deletes() {
    let server = start(LiveConfig::default());
    client_side(async {
        let client = connect(&server).await;
        let controller = client.controller_client().unwrap();
        controller.create_topic("rsk", 2, 3, 5_000).await.unwrap();
        let topics = client.list_topics().await.unwrap();
        let made = topics.iter().find(|t| t.name == "rsk").expect("listed");
        assert_eq!(made.partitions.len(), 2);
        let p = partition(&client, "rsk", 0).await;

        // Nothing to read: parked, and answered at max_wait, not before.
        let t = Instant::now();
        let (records, high_watermark) = p.fetch_records(0, 1..1_000_000, 500).await.unwrap();
        assert!(records.is_empty() && high_watermark == 0);
        assert!(
            t.elapsed() >= Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );

        // acks=all, one record at a time and then a batch of 50.
        let mut sent = Vec::new();
        for i in 0..100 {
            let value = format!("value-{i}").into_bytes();
            let offsets = p.produce(vec![record(&value)], Compression::NoCompression);
            sent.push((offsets.await.unwrap()[0], value));
        }
        let batch: Vec<Record> = (0..50u8).map(|i| record(&[i; 100])).collect();
        let offsets = p.produce(batch, Compression::NoCompression).await.unwrap();
        assert_eq!(offsets, (100..150).collect::<Vec<i64>>());
        let log = read_all(&p, 0).await;
        assert_eq!(log.len(), 150);
        for (offset, value) in &sent {
            assert_eq!(&log[offset], value);
        }
        assert_eq!(log[&149], vec![49u8; 100]);
        assert_eq!(p.get_offset(OffsetAt::Earliest).await.unwrap(), 0);
        assert_eq!(p.get_offset(OffsetAt::Latest).await.unwrap(), 150);

        // A long poll at the end is woken by the next produce.
        let waiter = Arc::new(partition(&client, "rsk", 0).await);
        let waiting = tokio::spawn({
            let waiter = Arc::clone(&waiter);
            async move {
                let t = Instant::now();
                let (records, _) = waiter
                    .fetch_records(150, 1..1_000_000, 10_000)
                    .await
                    .unwrap();
                (records.len(), t.elapsed())
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        p.produce(vec![record(b"wake")], Compression::NoCompression)
            .await
            .unwrap();
        let (woken, after) = waiting.await.unwrap();
        assert_eq!(woken, 1);
        assert!(after < Duration::from_secs(5), "woken after {after:?}");

        p.delete_records(100, 5_000).await.unwrap();
        assert_eq!(p.get_offset(OffsetAt::Earliest).await.unwrap(), 100);
        controller.delete_topic("rsk", 5_000).await.unwrap();
        let topics = client.list_topics().await.unwrap();
        assert!(topics.iter().all(|t| t.name != "rsk"));
    });
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

#[test]
fn rskafka_keeps_producing_across_a_leader_crash_and_loses_nothing_acknowledged() {
    let crash_at = Duration::from_millis(1500);
    let server = start(LiveConfig {
        faults: vec![Fault::Crash {
            broker: 1,
            at: crash_at,
        }],
        ..LiveConfig::default()
    });
    let started = Instant::now();
    let cluster = server.cluster().clone();
    let dead = server.addrs()[1];
    client_side(async {
        let client = connect(&server).await;
        let controller = client.controller_client().unwrap();
        controller
            .create_topic("crashy", 3, 3, 5_000)
            .await
            .unwrap();
        let mut parts = Vec::new();
        for i in 0..3 {
            parts.push(partition(&client, "crashy", i).await);
        }
        // Round robin until well past the crash, each produce acks=all.
        let mut acked: Vec<Vec<(i64, Vec<u8>)>> = vec![Vec::new(); 3];
        let mut after_crash = [0; 3];
        let mut n = 0u64;
        while started.elapsed() < crash_at + Duration::from_secs(2) {
            for (i, p) in parts.iter().enumerate() {
                let value = n.to_string().into_bytes();
                n += 1;
                let produced = p.produce(vec![record(&value)], Compression::NoCompression);
                let offsets = tokio::time::timeout(Duration::from_secs(20), produced)
                    .await
                    .expect("rskafka retries to an answer")
                    .expect("acknowledged");
                if started.elapsed() > crash_at {
                    after_crash[i] += 1;
                }
                acked[i].push((offsets[0], value));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(!cluster.brokers[1].alive.load(Ordering::Acquire));
        assert!(
            std::net::TcpStream::connect(dead).is_err(),
            "broker 1 is gone"
        );
        assert!(after_crash.iter().all(|&n| n > 0), "{after_crash:?}");
        for (i, p) in parts.iter().enumerate() {
            let log = read_all(p, 0).await;
            for (offset, value) in &acked[i] {
                assert_eq!(
                    log.get(offset),
                    Some(value),
                    "partition {i}, offset {offset}"
                );
            }
        }
    });
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}
