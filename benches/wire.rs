//! The wire front under load, over loopback, for each timer in one run:
//! producers with `acks=all` in closed loops while consumers long-poll the
//! same partitions; then 10,000 fetches parked at once over 1,000
//! connections, for the memory each one holds.
//!
//! ```sh
//! cargo bench --bench wire                 # 8 producers, 8 consumers, 10 s per timer
//! cargo bench --bench wire -- --help
//! ```
//!
//! Everything runs in one process (the server on its runtime's two
//! threads, the clients as tasks on one thread of their own), so the CPU
//! figure is the whole process's, load generator included, divided by the
//! requests answered. An ApiVersions ping every millisecond measures the
//! loopback round trip under the same load. Latencies are measured by the clients: a produce from its send
//! to its acknowledgement (the followers' replication included), a fetch's
//! wake-up from the send of the produce whose records it returns to the
//! fetch's response. The server times the same wake-up without the
//! loopback (`srv`): from the high watermark's move that made a parked
//! fetch's data readable to its response being built, for every fetch
//! woken by data.

use broker_sim::config::TimerChoice;
use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{
    batch, tls_client_config, AsyncClient, Client, TlsClientConfig as ClientConfig,
};
use broker_sim::wire::keystore::Keystore;
use broker_sim::wire::tls::{ClientAuth, Tls, TlsConfig};
use broker_sim::wire::Limits;
use bytes::Bytes;
#[path = "common/process.rs"]
mod process;
#[path = "common/timers.rs"]
mod timer_arg;

use clap::Parser;
use hdrhistogram::Histogram;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerId, FetchRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use process::{cpu_seconds, rss_bytes};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use timer_arg::{timers, TimerArg};

/// The harness's allocator (jemalloc: flat under the purgatory's soak).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(about = "The wire front under acks=all produces and long-poll fetches")]
struct Args {
    /// Producer connections, each with one request in flight.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    producers: u32,
    /// Consumer connections, each long-polling one partition.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    consumers: u32,
    /// Seconds of load per timer.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Fetches parked at once for the memory figure (over parked/10 connections).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(10..=100_000))]
    parked: u32,
    /// Replicas per partition: 1 answers acks=all at the append (the fetch
    /// wake-up is then the front's and the purgatory's alone); 3 parks each
    /// produce until the simulated followers (no added latency, a 1 ms
    /// tick) have it.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=3))]
    replication_factor: u32,
    /// Serve and connect over TLS (1.3, rustls on both sides), with the
    /// test keystores' certificate (sim/tests/keystores).
    #[arg(long)]
    tls: bool,
    /// Only this timer (wheel or delayqueue); both by default.
    #[arg(long, value_enum)]
    timer: Option<TimerArg>,
    // Accepted for `cargo bench`'s own flag.
    #[arg(long, hide = true)]
    bench: bool,
}

const PARTITIONS: i32 = 8;
const TOPIC: &str = "load";

fn produce_request(partition: i32, records: Bytes) -> ProduceRequest {
    produce_on(TOPIC, partition, records, -1)
}

fn produce_on(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    let mut p = PartitionProduceData::default();
    p.index = partition;
    p.records = Some(records);
    let mut t = TopicProduceData::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partition_data = vec![p];
    let mut r = ProduceRequest::default();
    r.acks = acks;
    r.timeout_ms = 30_000;
    r.topic_data = vec![t];
    r
}

fn fetch_request(partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    fetch_on(TOPIC, partition, offset, max_wait_ms)
}

fn fetch_on(topic: &str, partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    let mut p = FetchPartition::default();
    p.partition = partition;
    p.fetch_offset = offset;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = vec![p];
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = max_wait_ms;
    r.min_bytes = 1;
    r.max_bytes = 1 << 20;
    r.topics = vec![t];
    r
}

/// The TLS the server serves and the clients' side of it, from the
/// test keystores.
fn tls_setup() -> (Tls, Arc<ClientConfig>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sim/tests/keystores");
    let server = Tls::load(&TlsConfig {
        keystore: Keystore::Pem {
            certificate_chain: dir.join("broker.pem"),
            private_key: dir.join("broker.key"),
            key_password: None,
        },
        client_auth: ClientAuth::None,
        truststore: None,
        principal_rules: "DEFAULT".parse().expect("Kafka's default rule"),
    })
    .expect("the test keystore loads");
    (server, tls_client_config(&dir.join("ca.pem")))
}

/// A connection to `addr`, over TLS if `tls` is given.
async fn connect(addr: SocketAddr, tls: &Option<Arc<ClientConfig>>) -> AsyncClient {
    match tls {
        Some(config) => AsyncClient::connect_tls(addr, Arc::clone(config)).await,
        None => AsyncClient::connect(addr).await,
    }
}

fn server(timer: TimerChoice, replication_factor: u32, tls: Option<Tls>) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live: LiveConfig {
            brokers: replication_factor,
            replication_factor,
            min_insync: replication_factor.min(2),
            follower_latency: vec![Duration::ZERO],
            timer,
            ..LiveConfig::default()
        },
        topics: vec![
            (TOPIC.to_string(), PARTITIONS as u32),
            (PROBE.to_string(), 1),
        ],
        limits: Limits::default(),
        tls,
    })
    .expect("the server starts")
}

fn micros(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

/// What the load phase measured (latencies in ns).
struct Load {
    requests: u64,
    produce: Histogram<u64>,
    wake: Histogram<u64>,
    round_trip: Histogram<u64>,
    /// A parked fetch's wake-up: from the send of the produce that
    /// satisfies it to the fetch's response.
    parked_wake: Histogram<u64>,
}

/// The probe topic: one partition that only the probe uses.
const PROBE: &str = "probe";

/// The load phase: producers and consumers for `seconds`, as tasks on one
/// client thread of their own (a current-thread runtime), beside a pinger
/// whose ApiVersions round trips measure the loopback under the same load.
fn load(
    leaders: &[SocketAddr],
    probe_leader: SocketAddr,
    args: &Args,
    epoch: Instant,
    tls: Option<Arc<ClientConfig>>,
) -> Load {
    let leaders = leaders.to_vec();
    let (producers, consumers, seconds) = (args.producers, args.consumers, args.seconds);
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let stop = Arc::new(AtomicBool::new(false));
            let requests = Arc::new(AtomicU64::new(0));
            let mut tasks = Vec::new();
            let mut produce_tasks = Vec::new();
            for c in 0..consumers {
                let (stop, requests, tls) = (stop.clone(), requests.clone(), tls.clone());
                let partition = c as i32 % PARTITIONS;
                let addr = leaders[partition as usize];
                tasks.push(tokio::spawn(async move {
                    let mut client = connect(addr, &tls).await;
                    let mut offset = 0;
                    let mut wake = Histogram::<u64>::new(3).unwrap();
                    while !stop.load(Ordering::Relaxed) {
                        let r = client
                            .call(&fetch_request(partition, offset, 500), 11)
                            .await;
                        let now = epoch.elapsed().as_nanos() as u64;
                        requests.fetch_add(1, Ordering::Relaxed);
                        let Some(records) = r
                            .responses
                            .first()
                            .and_then(|t| t.partitions.first())
                            .and_then(|p| p.records.clone())
                        else {
                            continue;
                        };
                        let mut buf = records;
                        for set in RecordBatchDecoder::decode_all(&mut buf).unwrap_or_default() {
                            for rec in set.records {
                                offset = offset.max(rec.offset + 1);
                                // The producer's send time, in the record.
                                if let Some(v) = rec.value.filter(|v| v.len() >= 8) {
                                    let sent = u64::from_be_bytes(v[..8].try_into().unwrap());
                                    let _ = wake.record(now.saturating_sub(sent));
                                }
                            }
                        }
                    }
                    wake
                }));
            }
            for p in 0..producers {
                let (stop, requests, tls) = (stop.clone(), requests.clone(), tls.clone());
                let leaders = leaders.clone();
                produce_tasks.push(tokio::spawn(async move {
                    // A connection to each broker, as a client has.
                    let mut clients = Vec::new();
                    for &a in &leaders {
                        clients.push(connect(a, &tls).await);
                    }
                    let mut latency = Histogram::<u64>::new(3).unwrap();
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let partition = (p as i32 + i) % PARTITIONS;
                        i += 1;
                        let sent = epoch.elapsed().as_nanos() as u64;
                        let mut value = sent.to_be_bytes().to_vec();
                        value.extend_from_slice(&[0u8; 92]);
                        let start = Instant::now();
                        let r = clients[partition as usize]
                            .call(&produce_request(partition, batch(&[&value])), 8)
                            .await;
                        let _ = latency.record(start.elapsed().as_nanos() as u64);
                        requests.fetch_add(1, Ordering::Relaxed);
                        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
                    }
                    latency
                }));
            }
            let probe = {
                let (stop, tls) = (stop.clone(), tls.clone());
                let addr = probe_leader;
                tokio::spawn(async move {
                    let mut producer = connect(addr, &tls).await;
                    let mut offset = 0;
                    let mut wake = Histogram::<u64>::new(3).unwrap();
                    while !stop.load(Ordering::Relaxed) {
                        let mut consumer = connect(addr, &tls).await;
                        let fetch = fetch_on(PROBE, 0, offset, 5_000);
                        // The response's arrival is taken in the fetch's own
                        // task: awaiting its handle after the produce's answer
                        // would add the client runtime's hand-over.
                        let parked = tokio::spawn(async move {
                            let r = consumer.call(&fetch, 11).await;
                            (r, Instant::now())
                        });
                        // Long enough for the fetch to be parked.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        let sent = Instant::now();
                        let r = producer
                            .call(&produce_on(PROBE, 0, batch(&[b"probe"]), 1), 8)
                            .await;
                        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
                        let (r, arrived) = parked.await.unwrap();
                        let _ = wake.record(arrived.duration_since(sent).as_nanos() as u64);
                        let got = r.responses[0].partitions[0]
                            .records
                            .clone()
                            .unwrap_or_default();
                        assert!(!got.is_empty(), "woken with the record");
                        offset += 1;
                    }
                    wake
                })
            };
            let pinger = {
                let (stop, tls) = (stop.clone(), tls.clone());
                let addr = leaders[0];
                tokio::spawn(async move {
                    let mut client = connect(addr, &tls).await;
                    let mut rtt = Histogram::<u64>::new(3).unwrap();
                    while !stop.load(Ordering::Relaxed) {
                        let start = Instant::now();
                        client.call(&ApiVersionsRequest::default(), 3).await;
                        let _ = rtt.record(start.elapsed().as_nanos() as u64);
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    rtt
                })
            };
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            stop.store(true, Ordering::Relaxed);
            let mut produce = Histogram::<u64>::new(3).unwrap();
            for t in produce_tasks {
                produce.add(t.await.unwrap()).unwrap();
            }
            // Wake the consumers still parked: one last record per partition.
            for (partition, &addr) in leaders.iter().enumerate() {
                let mut client = connect(addr, &tls).await;
                client
                    .call(&produce_request(partition as i32, batch(&[b"end"])), 8)
                    .await;
            }
            let mut wake = Histogram::<u64>::new(3).unwrap();
            for t in tasks {
                wake.add(t.await.unwrap()).unwrap();
            }
            Load {
                requests: requests.load(Ordering::Relaxed),
                produce,
                wake,
                round_trip: pinger.await.unwrap(),
                parked_wake: probe.await.unwrap(),
            }
        })
    })
    .join()
    .unwrap()
}

/// Parks `n` fetches over n/10 connections; the resident memory they add.
/// Over TLS the connections are tasks' clients on a runtime of their own
/// (not polled while they wait: nothing comes back before the fetches'
/// 60 s), in plaintext blocking ones.
fn parked_memory(
    leaders: &[SocketAddr],
    server: &Server,
    n: u32,
    tls: Option<Arc<ClientConfig>>,
) -> f64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = rss_bytes();
    let connections = (n / 10).max(1) as usize;
    let topic = server.cluster().topic(TOPIC).expect("created ahead");
    // At the log end: they wait for the next append.
    let fetch = |i: usize| {
        let partition = i % PARTITIONS as usize;
        let end = topic.partitions[partition].log.lock().log_end();
        fetch_request(partition as i32, end, 60_000)
    };
    let held: Box<dyn std::any::Any> = match &tls {
        None => {
            let mut clients: Vec<Client> = (0..connections)
                .map(|i| Client::connect(leaders[i % PARTITIONS as usize]))
                .collect();
            for (i, c) in clients.iter_mut().enumerate() {
                for _ in 0..10 {
                    c.send(&fetch(i), 11);
                }
            }
            Box::new(clients)
        }
        Some(_) => Box::new(runtime.block_on(async {
            let mut clients = Vec::with_capacity(connections);
            for i in 0..connections {
                let mut c = connect(leaders[i % PARTITIONS as usize], &tls).await;
                for _ in 0..10 {
                    c.send(&fetch(i), 11).await;
                }
                clients.push(c);
            }
            clients
        })),
    };
    let cluster = server.cluster().clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    while cluster.pending() < n as usize && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let parked = cluster.pending();
    assert_eq!(parked, n as usize, "fetches parked");
    let per = (rss_bytes().saturating_sub(before)) as f64 / parked as f64;
    drop(held);
    per
}

fn main() {
    let args = Args::parse();
    let timers = timers(args.timer);
    println!(
        "{} producers (acks=all), {} long-polling consumers, {} partitions, replication factor {}, {:.0} s per timer; {} parked fetches for memory; {}",
        args.producers, args.consumers, PARTITIONS, args.replication_factor, args.seconds, args.parked,
        if args.tls { "over TLS" } else { "plaintext" }
    );
    println!(
        "{:<11} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>8} {:>8} {:>8} {:>9}",
        "timer",
        "req/s",
        "cpu us",
        "prod p50",
        "p99",
        "p99.9",
        "wake p50",
        "p99",
        "p99.9",
        "rtt p50",
        "p99",
        "parked p50",
        "p99",
        "srv p50",
        "p99",
        "B/parked"
    );
    for timer in timers {
        let (tls, client_tls) = match args.tls {
            true => {
                let (server, client) = tls_setup();
                (Some(server), Some(client))
            }
            false => (None, None),
        };
        let server = server(timer, args.replication_factor, tls);
        let topic = server.cluster().topic(TOPIC).expect("created ahead");
        let leaders: Vec<SocketAddr> = topic
            .partitions
            .iter()
            .map(|p| server.addrs()[p.log.lock().leader.expect("a leader") as usize])
            .collect();
        let probe = server.cluster().topic(PROBE).expect("created ahead");
        let probe_leader =
            server.addrs()[probe.partitions[0].log.lock().leader.expect("a leader") as usize];
        let epoch = Instant::now();
        let (cpu0, t0) = (cpu_seconds(), Instant::now());
        let Load {
            requests,
            produce,
            wake,
            round_trip,
            parked_wake,
        } = load(&leaders, probe_leader, &args, epoch, client_tls.clone());
        let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
        // Timed by the server over the load: every fetch woken by data, from
        // the high watermark's move to its response.
        let (_, srv_p50, srv_p99, _) = server.cluster().checks.fetch_wakeups.quantiles();
        let per_parked = parked_memory(&leaders, &server, args.parked, client_tls);
        let report = server.stop();
        println!(
            "{:<11} {:>9.0} {:>8.1} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>10.0} {:>8.0} {:>8} {:>8} {:>9.0}",
            timer.name(),
            requests as f64 / wall,
            cpu / requests.max(1) as f64 * 1e6,
            micros(&produce, 0.5),
            micros(&produce, 0.99),
            micros(&produce, 0.999),
            micros(&wake, 0.5),
            micros(&wake, 0.99),
            micros(&wake, 0.999),
            micros(&round_trip, 0.5),
            micros(&round_trip, 0.99),
            micros(&parked_wake, 0.5),
            micros(&parked_wake, 0.99),
            srv_p50,
            srv_p99,
            per_parked,
        );
        if !report.violations.is_empty() {
            eprintln!("{}", report.human());
            std::process::exit(1);
        }
    }
    println!("latencies in microseconds; cpu: the whole process (clients included) per request");
}
