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
//! threads, the clients on threads of their own), so the CPU figure is the
//! whole process's, load generator included, divided by the requests
//! answered. Latencies are measured by the clients: a produce from its send
//! to its acknowledgement (the followers' replication included), a fetch's
//! wake-up from the send of the produce whose records it returns to the
//! fetch's response.

use broker_sim::config::TimerChoice;
use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::client::{batch, Client};
use broker_sim::wire::Limits;
use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{BrokerId, FetchRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// Only this timer (wheel or delayqueue); both by default.
    #[arg(long)]
    timer: Option<String>,
    // Accepted for `cargo bench`'s own flag.
    #[arg(long, hide = true)]
    bench: bool,
}

const PARTITIONS: i32 = 8;
const TOPIC: &str = "load";

fn name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

fn produce_request(partition: i32, records: Bytes) -> ProduceRequest {
    let mut p = PartitionProduceData::default();
    p.index = partition;
    p.records = Some(records);
    let mut t = TopicProduceData::default();
    t.name = name();
    t.partition_data = vec![p];
    let mut r = ProduceRequest::default();
    r.acks = -1;
    r.timeout_ms = 30_000;
    r.topic_data = vec![t];
    r
}

fn fetch_request(partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    let mut p = FetchPartition::default();
    p.partition = partition;
    p.fetch_offset = offset;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = name();
    t.partitions = vec![p];
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = max_wait_ms;
    r.min_bytes = 1;
    r.max_bytes = 1 << 20;
    r.topics = vec![t];
    r
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn server(timer: TimerChoice, replication_factor: u32) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        live: LiveConfig {
            brokers: replication_factor,
            replication_factor,
            min_insync: replication_factor.min(2),
            follower_latency: vec![Duration::ZERO],
            timer,
            ..LiveConfig::default()
        },
        topics: vec![(TOPIC.to_string(), PARTITIONS as u32)],
        limits: Limits::default(),
    })
    .expect("the server starts")
}

fn micros(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

/// The load phase: producers and consumers for `seconds`.
fn load(
    leaders: &[SocketAddr],
    args: &Args,
    epoch: Instant,
) -> (u64, Histogram<u64>, Histogram<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let requests = Arc::new(AtomicU64::new(0));
    let produce = Arc::new(Mutex::new(Histogram::<u64>::new(3).unwrap()));
    let wake = Arc::new(Mutex::new(Histogram::<u64>::new(3).unwrap()));
    let mut threads = Vec::new();
    for c in 0..args.consumers {
        let (stop, requests, wake) = (stop.clone(), requests.clone(), wake.clone());
        let partition = c as i32 % PARTITIONS;
        let addr = leaders[partition as usize];
        threads.push(std::thread::spawn(move || {
            let mut client = Client::connect(addr);
            let mut offset = 0;
            let mut local = Histogram::<u64>::new(3).unwrap();
            while !stop.load(Ordering::Relaxed) {
                let r = client.call(&fetch_request(partition, offset, 500), 11);
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
                            let _ = local.record(now.saturating_sub(sent));
                        }
                    }
                }
            }
            wake.lock().unwrap().add(&local).unwrap();
        }));
    }
    for p in 0..args.producers {
        let (stop, requests, produce) = (stop.clone(), requests.clone(), produce.clone());
        let leaders = leaders.to_vec();
        threads.push(std::thread::spawn(move || {
            // A connection to each broker, as a client has.
            let mut clients: Vec<Client> = leaders.iter().map(|&a| Client::connect(a)).collect();
            let mut local = Histogram::<u64>::new(3).unwrap();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let partition = (p as i32 + i) % PARTITIONS;
                let client = &mut clients[partition as usize];
                i += 1;
                let sent = epoch.elapsed().as_nanos() as u64;
                let mut value = sent.to_be_bytes().to_vec();
                value.extend_from_slice(&[0u8; 92]);
                let start = Instant::now();
                let r = client.call(&produce_request(partition, batch(&[&value])), 8);
                let _ = local.record(start.elapsed().as_nanos() as u64);
                requests.fetch_add(1, Ordering::Relaxed);
                assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
            }
            produce.lock().unwrap().add(&local).unwrap();
        }));
    }
    std::thread::sleep(Duration::from_secs_f64(args.seconds));
    stop.store(true, Ordering::Relaxed);
    // Wake the consumers still parked: one last record per partition.
    for partition in 0..PARTITIONS {
        let mut client = Client::connect(leaders[partition as usize]);
        client.call(&produce_request(partition, batch(&[b"end"])), 8);
    }
    for t in threads {
        t.join().unwrap();
    }
    let produce = Arc::try_unwrap(produce).unwrap().into_inner().unwrap();
    let wake = Arc::try_unwrap(wake).unwrap().into_inner().unwrap();
    (requests.load(Ordering::Relaxed), produce, wake)
}

/// Parks `n` fetches over n/10 connections; the resident memory they add.
fn parked_memory(leaders: &[SocketAddr], server: &Server, n: u32) -> f64 {
    let before = rss_bytes();
    let connections = (n / 10).max(1) as usize;
    let mut clients: Vec<Client> = (0..connections)
        .map(|i| Client::connect(leaders[i % PARTITIONS as usize]))
        .collect();
    let topic = server.cluster().topic(TOPIC).expect("created ahead");
    for (i, c) in clients.iter_mut().enumerate() {
        for _ in 0..10 {
            let partition = i % PARTITIONS as usize;
            // At the log end: they wait for the next append.
            let end = topic.partitions[partition].log.lock().log_end();
            c.send(&fetch_request(partition as i32, end, 60_000), 11);
        }
    }
    let cluster = server.cluster().clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    while cluster.pending() < n as usize && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let parked = cluster.pending();
    assert_eq!(parked, n as usize, "fetches parked");
    let per = (rss_bytes().saturating_sub(before)) as f64 / parked as f64;
    drop(clients);
    per
}

fn main() {
    let args = Args::parse();
    let timers: Vec<TimerChoice> = match args.timer.as_deref() {
        None => vec![TimerChoice::Wheel, TimerChoice::DelayQueue],
        Some("wheel") => vec![TimerChoice::Wheel],
        Some("delayqueue") => vec![TimerChoice::DelayQueue],
        Some(other) => {
            eprintln!("wire: --timer must be wheel or delayqueue, not '{other}'");
            std::process::exit(2);
        }
    };
    println!(
        "{} producers (acks=all), {} long-polling consumers, {} partitions, replication factor {}, {:.0} s per timer; {} parked fetches for memory",
        args.producers, args.consumers, PARTITIONS, args.replication_factor, args.seconds, args.parked
    );
    println!(
        "{:<11} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "timer",
        "req/s",
        "cpu us",
        "prod p50",
        "p99",
        "p99.9",
        "wake p50",
        "p99",
        "p99.9",
        "B/parked"
    );
    for timer in timers {
        let server = server(timer, args.replication_factor);
        let topic = server.cluster().topic(TOPIC).expect("created ahead");
        let leaders: Vec<SocketAddr> = topic
            .partitions
            .iter()
            .map(|p| server.addrs()[p.log.lock().leader.expect("a leader") as usize])
            .collect();
        let epoch = Instant::now();
        let (cpu0, t0) = (cpu_seconds(), Instant::now());
        let (requests, produce, wake) = load(&leaders, &args, epoch);
        let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
        let per_parked = parked_memory(&leaders, &server, args.parked);
        let report = server.stop();
        println!(
            "{:<11} {:>9.0} {:>8.1} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>9.0}",
            timer.name(),
            requests as f64 / wall,
            cpu / requests.max(1) as f64 * 1e6,
            micros(&produce, 0.5),
            micros(&produce, 0.99),
            micros(&produce, 0.999),
            micros(&wake, 0.5),
            micros(&wake, 0.99),
            micros(&wake, 0.999),
            per_parked,
        );
        if !report.violations.is_empty() {
            eprintln!("{}", report.human());
            std::process::exit(1);
        }
    }
    println!("latencies in microseconds; cpu: the whole process (clients included) per request");
}
