//! Unmodified Kafka clients against the served cluster: kcat (librdkafka),
//! confluent-kafka for Python (its wheel bundles librdkafka), kafka-python,
//! aiokafka, kafkajs, @platformatic/kafka and sarama (protocol
//! implementations of their own). Each test says it was skipped, and why, when its client is
//! not installed here (`.ci/run` installs them); nothing else fails then.

mod pki;

use broker_sim::config::Fault;
use broker_sim::live::{Authorization, GroupState, LiveConfig};
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::tls::{ClientAuth, Tls};
use broker_sim::wire::Limits;
use rcgen::DnType;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

fn start(live: LiveConfig, topics: &[(&str, u32)]) -> Server {
    serve(live, topics, None)
}

/// As [`start`], the listeners over TLS with a broker certificate from
/// `pki`: SSL, or SASL_SSL with SASL users.
fn start_tls(
    live: LiveConfig,
    topics: &[(&str, u32)],
    pki: &pki::Authority,
    client_auth: ClientAuth,
) -> Server {
    serve(live, topics, Some(pki.broker_tls(client_auth, "DEFAULT")))
}

fn serve(live: LiveConfig, topics: &[(&str, u32)], tls: Option<Tls>) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        live,
        topics: topics.iter().map(|(n, p)| (n.to_string(), *p)).collect(),
        limits: Limits::default(),
        tls,
    })
    .expect("the server starts")
}

fn bootstrap(server: &Server) -> String {
    server.addrs()[0].to_string()
}

fn passes(server: Server) {
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
}

/// A cluster whose new groups wait 300 ms, not Kafka's 3 s, for their
/// members to arrive, and whose consumer-protocol members heartbeat every
/// 500 ms, not 5 s.
fn quick_groups() -> LiveConfig {
    LiveConfig {
        groups: broker_sim::live::GroupConfig {
            initial_rebalance_delay: Duration::from_millis(300),
            consumer_heartbeat_interval: Duration::from_millis(500),
            share_heartbeat_interval: Duration::from_millis(500),
            ..Default::default()
        },
        ..LiveConfig::default()
    }
}

/// A cluster whose broker 1 crashes `at` after the start, with a topic
/// `topic` of 6 partitions.
fn crashing_at(at: Duration, topic: &str) -> Server {
    let live = LiveConfig {
        faults: vec![Fault::Crash { broker: 1, at }],
        ..LiveConfig::default()
    };
    start(live, &[(topic, 6)])
}

/// A cluster whose broker 1 replicates each batch `delay` late and stays
/// in the ISR all the same.
fn slow_follower(delay: Duration, topics: &[(&str, u32)]) -> Server {
    let live = LiveConfig {
        faults: vec![Fault::SlowFollower {
            broker: 1,
            from: Duration::ZERO,
            until: Duration::from_secs(3600),
            delay,
        }],
        replica_lag: Duration::from_secs(3600),
        ..LiveConfig::default()
    };
    start(live, topics)
}

/// kcat, if installed.
fn kcat() -> Option<&'static str> {
    let found = Command::new("kcat")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!("skipped: kcat is not installed (Debian package 'kcat'; .ci/run installs it)");
    }
    found.then_some("kcat")
}

/// Whether python3 can import confluent_kafka.
fn confluent() -> bool {
    python_has("import confluent_kafka", "confluent-kafka")
}

/// Whether python3's confluent-kafka has its share consumer (2.15 and
/// later); says the test is skipped if not.
fn confluent_share() -> bool {
    python_has(
        "from confluent_kafka import AcknowledgeType, ShareConsumer",
        "confluent-kafka>=2.15",
    )
}

/// Whether python3 has kafka-python 3 or later (its script needs 3's
/// admin answers and idempotent default).
fn kafka_python() -> bool {
    python_has(
        "import kafka; assert int(kafka.__version__.split('.')[0]) >= 3",
        "kafka-python>=3",
    )
}

/// Whether python3 can import aiokafka.
fn aiokafka() -> bool {
    python_has("import aiokafka", "aiokafka")
}

/// Whether python3 runs `check` (an import), which PyPI's `package`
/// satisfies; says the test is skipped if not.
fn python_has(check: &str, package: &str) -> bool {
    let found = Command::new("python3")
        .args(["-c", check])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!(
            "skipped: python3 with {package} is not installed (PyPI '{package}'; .ci/run installs it)"
        );
    }
    found
}

/// Where node finds kafkajs (npm's global folder), if node and kafkajs are
/// installed; says the test is skipped if not.
fn kafkajs() -> Option<String> {
    node_package("kafkajs")
}

/// Where node finds @platformatic/kafka, as [`kafkajs`] does.
fn platformatic() -> Option<String> {
    node_package("@platformatic/kafka")
}

/// npm's global folder, if node resolves `package` there; says the test
/// is skipped if not.
fn node_package(package: &str) -> Option<String> {
    let root = Command::new("npm")
        .args(["root", "-g"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let found = root.filter(|root| {
        Command::new("node")
            .args(["-e", &format!("require.resolve('{package}')")])
            .env("NODE_PATH", root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if found.is_none() {
        eprintln!(
            "skipped: node with {package} is not installed (npm '{package}'; .ci/run installs it)"
        );
    }
    found
}

/// The confluent-kafka client script.
fn client_script() -> &'static str {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/confluent_client.py"
    )
}

/// Runs the confluent-kafka client script; its JSON line.
fn confluent_client(args: &[&str]) -> serde_json::Value {
    python_client("confluent_client.py", args)
}

/// Runs the Python client script `name` (in `tests/clients`) to its end;
/// the JSON line it ends with.
fn python_client(name: &str, args: &[&str]) -> serde_json::Value {
    let script = format!("{}/tests/clients/{name}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "client failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    json_line(&out)
}

/// The JSON line a client script ends its output with; what it printed,
/// if it is not one.
fn json_line(out: &std::process::Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn kcat_produces_with_acks_all_and_reads_back_every_record() {
    let Some(kcat) = kcat() else { return };
    let server = start(LiveConfig::default(), &[("orders", 3)]);
    kcat_round_trip(kcat, &server, "orders", 300, &[]);
    let checks = &server.cluster().checks;
    assert_eq!(
        checks
            .acked_records
            .load(std::sync::atomic::Ordering::Relaxed),
        300
    );
    passes(server);
}

/// kcat produces `count` records to `topic` with acks=all, then reads
/// every partition from the start to the end: each record once. `extra`
/// goes to both kcat runs.
fn kcat_round_trip(kcat: &str, server: &Server, topic: &str, count: usize, extra: &[&str]) {
    let lines: Vec<String> = (0..count).map(|i| format!("{topic}-{i}")).collect();
    let mut producer = Command::new(kcat)
        .args([
            "-b",
            &bootstrap(server),
            "-P",
            "-t",
            topic,
            "-X",
            "acks=all",
        ])
        .args(extra)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    producer
        .stdin
        .take()
        .unwrap()
        .write_all((lines.join("\n") + "\n").as_bytes())
        .unwrap();
    let produced = producer.wait_with_output().unwrap();
    assert!(
        produced.status.success(),
        "{}",
        String::from_utf8_lossy(&produced.stderr)
    );
    let consumed = Command::new(kcat)
        .args(["-b", &bootstrap(server), "-C", "-t", topic, "-e", "-q"])
        .args(["-f", "%s\n"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        consumed.status.success(),
        "{}",
        String::from_utf8_lossy(&consumed.stderr)
    );
    let mut read: Vec<String> = String::from_utf8_lossy(&consumed.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    read.sort();
    let mut want = lines;
    want.sort();
    assert_eq!(read, want);
}

#[test]
fn confluent_kafka_round_trips_every_acknowledged_record() {
    if !confluent() {
        return;
    }
    let server = start(LiveConfig::default(), &[]);
    // The topic is created on first use, as Kafka does.
    let r = confluent_client(&["roundtrip", &bootstrap(&server), "auto-created", "500"]);
    assert_eq!(r["acked"], 500, "{r}");
    assert_eq!(r["read_back"], 500, "{r}");
    assert!(server.cluster().topic("auto-created").is_some());
    passes(server);
}

/// Sets `key` of `client_id`'s quota over the wire, as an admin would.
fn set_client_quota(server: &Server, client_id: &str, key: &str, value: f64) {
    let quota = broker_sim::wire::client::quota_request("client-id", Some(client_id), key, value);
    let mut admin = broker_sim::wire::client::Client::connect(server.addrs()[0]);
    assert_eq!(admin.call(&quota, 1).entries[0].error_code, 0);
}

/// librdkafka under a byte-rate quota set over the wire: past ten
/// seconds' worth at once it is throttled, told so, and slowed to the
/// quota, every record still acknowledged.
#[test]
fn confluent_kafka_is_throttled_to_its_producer_byte_rate() {
    if !confluent() {
        return;
    }
    let server = start(LiveConfig::default(), &[("metered", 1)]);
    set_client_quota(
        &server,
        "metered-producer",
        "producer_byte_rate",
        1_000_000.0,
    );
    // 13 MB at 1 MB/s to the partition's leader (each broker measures
    // its own clients): the first 10-11 MB at once (the quota's window),
    // the rest at the quota, two seconds and more. Unthrottled, it takes
    // a fraction of a second here.
    let args = [
        "quota",
        &bootstrap(&server),
        "metered",
        "13",
        "metered-producer",
    ];
    let r = confluent_client(&args);
    assert_eq!(r["acked"], 13_000, "{r}");
    assert!(r["throttles"].as_u64().unwrap() >= 1, "{r}");
    assert!(r["seconds"].as_f64().unwrap() >= 1.5, "{r}");
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("answers throttled by a quota").unwrap() >= 1);
}

/// librdkafka under a request-time quota (`request_percentage`) far
/// below what its produces take: told it is throttled, never for more
/// than a second (Kafka's bound for this quota), every record still
/// acknowledged.
#[test]
fn confluent_kafka_is_throttled_by_its_request_percentage() {
    if !confluent() {
        return;
    }
    let server = start(LiveConfig::default(), &[("timed", 1)]);
    // A thousandth of a percent of one thread: 0.1 ms of handling in the
    // quota's first ten seconds.
    set_client_quota(&server, "busy-producer", "request_percentage", 0.001);
    let args = ["quota", &bootstrap(&server), "timed", "3", "busy-producer"];
    let r = confluent_client(&args);
    assert_eq!(r["acked"], 3_000, "{r}");
    assert!(r["throttles"].as_u64().unwrap() >= 1, "{r}");
    assert!(r["longest_ms"].as_u64().unwrap() <= 1_000, "{r}");
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("answers throttled by a quota").unwrap() >= 1);
}

/// A share group (KIP-932) read by two confluent-kafka share consumers:
/// records given back, or held by a consumer that closes, are delivered
/// again (with their delivery count) and accepted once; a rejected one
/// is never handed out again; the group's own setting starts it at the
/// log start.
#[test]
fn confluent_share_consumers_take_each_record_once_and_get_back_what_was_given_back() {
    if !confluent_share() {
        return;
    }
    let server = start(quick_groups(), &[]);
    let r = confluent_client(&["share", &bootstrap(&server), "queue", "workers"]);
    assert_eq!(r["reset"][0], "earliest", "{r}");
    assert_eq!(r["sent"], 600, "{r}");
    // All but the rejected one, each once.
    assert_eq!(r["accepted"], 599, "{r}");
    assert_eq!(r["accepted_twice"], 0, "{r}");
    assert_eq!(
        r["rejections"], 1,
        "handed out again after its rejection: {r}"
    );
    assert!(r["released"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["came_back"], r["released"], "{r}");
    // Released once, each came back delivered a second time; a third
    // time where "a" took it again in the batch it held as it closed
    // (which of its fetches takes a released record is up to timing).
    let counts = r["delivery_counts"].as_array().unwrap();
    assert!(!counts.is_empty(), "{r}");
    assert!(counts.iter().all(|c| c == "2" || c == "3"), "{r}");
    assert!(r["held_at_close"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["held_then_accepted"], r["held_at_close"], "{r}");
    assert!(r["per_consumer"]["b"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["errors"], serde_json::json!([]), "{r}");
    let checks = &server.cluster().checks;
    assert!(
        checks
            .share_acquired
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 600
    );
    passes(server);
}

#[test]
fn after_a_leader_crashes_clients_retry_on_the_new_leader_and_nothing_acknowledged_is_lost() {
    if !confluent() {
        return;
    }
    let crash_at = Duration::from_millis(1500);
    let server = crashing_at(crash_at, "crashy");
    let r = confluent_client(&["roundtrip", &bootstrap(&server), "crashy", "8000"]);
    // The crash fell inside the production.
    assert!(
        r["produce_seconds"].as_f64().unwrap() > crash_at.as_secs_f64(),
        "{r}"
    );
    assert!(!server.cluster().brokers[1]
        .alive
        .load(std::sync::atomic::Ordering::Relaxed));
    assert_eq!(
        r["acked"], 8000,
        "every record acknowledged after retries: {r}"
    );
    assert_eq!(r["read_back"], r["acked"], "{r}");
    passes(server);
}

#[test]
fn a_consumer_keeps_its_partitions_and_position_while_its_coordinator_crashes_and_restarts() {
    if !confluent() {
        return;
    }
    let server = start(LiveConfig::default(), &[("steady", 6)]);
    let group = "steady-readers";
    let home = server.cluster().group_coordinator(group).unwrap();
    let address = bootstrap(&server);
    let client =
        std::thread::spawn(move || confluent_client(&["steady", &address, "steady", "12", group]));
    // Once the group has formed and the consumer reads, its coordinator
    // crashes, and restarts 2 s later.
    let formed = std::time::Instant::now() + Duration::from_secs(10);
    while server
        .cluster()
        .group_view(group)
        .is_none_or(|(state, _, _)| state != GroupState::Stable)
    {
        assert!(std::time::Instant::now() < formed, "the group never formed");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(1));
    server.cluster().crash(home);
    std::thread::sleep(Duration::from_secs(2));
    assert_ne!(server.cluster().group_coordinator(group), Some(home));
    server.cluster().restart(home);
    let r = client.join().expect("the client thread");
    assert_eq!(server.cluster().group_coordinator(group), Some(home));
    assert_eq!(r["acked"], r["sent"], "{r}");
    assert_eq!(r["read"], r["acked"], "{r}");
    // Its group moved whole, twice: no rebalance sent it back to its last
    // auto-commit, up to 5 s behind. Its partitions were revoked only as
    // it closed.
    assert_eq!(r["read_twice"], 0, "{r}");
    let rebalances = serde_json::json!([["assigned", 6], ["revoked", 6]]);
    assert_eq!(r["rebalances"], rebalances, "{r}");
    passes(server);
}

#[test]
fn an_idempotent_producer_across_a_leader_crash_has_each_record_stored_once() {
    if !confluent() {
        return;
    }
    let crash_at = Duration::from_millis(1500);
    let server = crashing_at(crash_at, "crashy");
    let r = confluent_client(&["idempotent", &bootstrap(&server), "crashy", "8000", "30000"]);
    assert!(
        r["produce_seconds"].as_f64().unwrap() > crash_at.as_secs_f64(),
        "{r}"
    );
    assert_eq!(r["acked"], 8000, "{r}");
    assert_eq!(r["read_back"], 8000, "{r}");
    assert_eq!(r["read_twice"], 0, "{r}");
    passes(server);
}

#[test]
fn across_a_broker_restart_leadership_moves_back_and_each_acknowledged_record_is_stored_once() {
    if !confluent() {
        return;
    }
    // Its 10,000 records take five seconds or more: broker 1 is down from
    // 1.5 s to 3 s, and soon after takes its partitions back from leaders
    // that stay up, while the producer goes on.
    let (crash_at, restart_at) = (Duration::from_millis(1500), Duration::from_millis(3000));
    let live = LiveConfig {
        faults: vec![
            Fault::Crash {
                broker: 1,
                at: crash_at,
            },
            Fault::Restart {
                broker: 1,
                at: restart_at,
            },
        ],
        ..LiveConfig::default()
    };
    let server = start(live, &[("restarts", 6)]);
    let r = confluent_client(&[
        "idempotent",
        &bootstrap(&server),
        "restarts",
        "10000",
        "30000",
    ]);
    assert!(
        r["produce_seconds"].as_f64().unwrap() > restart_at.as_secs_f64() + 0.5,
        "{r}"
    );
    assert_eq!(r["acked"], 10000, "{r}");
    assert_eq!(r["read_back"], 10000, "{r}");
    assert_eq!(r["read_twice"], 0, "{r}");
    let topic = server.cluster().topic("restarts").unwrap();
    let preferred: Vec<_> = topic
        .partitions
        .iter()
        .map(|p| p.log.lock())
        .filter(|log| log.replicas[0] == 1)
        .map(|log| (log.leader, log.isr.contains(&1)))
        .collect();
    assert!(!preferred.is_empty());
    assert!(
        preferred.iter().all(|&led| led == (Some(1), true)),
        "broker 1 leads its partitions again: {preferred:?}"
    );
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    // Each of them moved away at the crash and back after the restart.
    let moved = report.count("partition leaders moved").unwrap();
    assert_eq!(moved, 2 * preferred.len() as u64, "{}", report.human());
}

/// An idempotent confluent-kafka producer goes on while its topic's
/// partitions move between brokers every 100 ms (AlterPartitionReassignments
/// over the wire, each move taking the leader away from some of them):
/// each acknowledged record is stored once and read back.
#[test]
fn an_idempotent_producer_keeps_every_record_while_its_partitions_move_between_brokers() {
    use broker_sim::wire::client::Client;
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::{AlterPartitionReassignmentsRequest, BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use std::sync::atomic::{AtomicBool, Ordering};

    if !confluent() {
        return;
    }
    let server = start(LiveConfig::default(), &[("moving", 6)]);
    let targets: [&[i32]; 4] = [&[0, 1], &[1, 2], &[2, 0, 1], &[2, 1]];
    let stop = AtomicBool::new(false);
    let (r, moves) = std::thread::scope(|scope| {
        let mover = scope.spawn(|| {
            let mut client = Client::connect(server.addrs()[0]);
            let mut moves = 0;
            for round in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let mut r = AlterPartitionReassignmentsRequest::default();
                let mut topic = ReassignableTopic::default();
                topic.name = TopicName(StrBytes::from_static_str("moving"));
                topic.partitions = (0..6)
                    .map(|p| {
                        let mut move_to = ReassignablePartition::default();
                        move_to.partition_index = p;
                        let target = targets[(round + p as usize) % targets.len()];
                        move_to.replicas = Some(target.iter().map(|&b| BrokerId(b)).collect());
                        move_to
                    })
                    .collect();
                r.topics = vec![topic];
                let answer = client.call(&r, 0);
                for p in answer.responses.iter().flat_map(|t| t.partitions.iter()) {
                    assert_eq!(p.error_code, 0, "{p:?}");
                    moves += 1;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            moves
        });
        let r = confluent_client(&[
            "idempotent",
            &bootstrap(&server),
            "moving",
            "10000",
            "30000",
        ]);
        stop.store(true, Ordering::Relaxed);
        (r, mover.join().unwrap())
    });
    assert!(moves >= 6 * 10, "{moves} moves asked");
    assert_eq!(r["acked"], 10000, "{r}");
    assert_eq!(r["read_back"], 10000, "{r}");
    assert_eq!(r["read_twice"], 0, "{r}");
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(
        report.count("partition leaders moved").unwrap() > 0,
        "{}",
        report.human()
    );
}

/// A topic with `compression.type=zstd` stores what each producer codec
/// sent in zstd, as Kafka's leader rewrites it, and every record reads
/// back; set back to `producer`, it stores each batch as sent.
#[test]
fn confluent_kafka_reads_back_a_zstd_topic_whatever_each_producer_compressed_with() {
    if !confluent() {
        return;
    }
    let server = start(LiveConfig::default(), &[]);
    let r = confluent_client(&["stored", &bootstrap(&server), "squeezed", "zstd"]);
    // DYNAMIC_TOPIC_CONFIG (1): the topic's own.
    assert_eq!(r["described"], serde_json::json!(["zstd", 1]), "{r}");
    assert_eq!(
        r["described_after"],
        serde_json::json!(["producer", 1]),
        "{r}"
    );
    assert_eq!(r["errors"], serde_json::json!([]), "{r}");
    assert_eq!(r["read"], r["sent"], "{r}");
    assert_eq!(r["max_timestamp"], serde_json::json!([119, 119]), "{r}");
    let topic = server.cluster().topic("squeezed").unwrap();
    let stored: Vec<(i64, u8)> = topic.partitions[0]
        .log
        .lock()
        .batches
        .iter()
        .map(|b| (b.base, b.bytes[22] & 0x07))
        .collect();
    // Rewritten into zstd while the topic named it; then kept as the
    // producer sent them: gzip, or uncompressed where librdkafka found
    // that gzip did not shrink a batch (one of a single short record,
    // when a busy machine let its linger run out early).
    let (zstd, producers): (Vec<&(i64, u8)>, Vec<_>) = stored.iter().partition(|b| b.0 < 100);
    assert!(zstd.iter().all(|b| b.1 == 4), "{stored:?}");
    assert!(producers.iter().any(|b| b.1 == 1), "{stored:?}");
    assert!(producers.iter().all(|b| b.1 <= 1), "{stored:?}");
    passes(server);
}

#[test]
fn confluent_kafka_reads_a_log_append_time_topic_with_the_leaders_stamps() {
    if !confluent() {
        return;
    }
    let server = start(LiveConfig::default(), &[]);
    let r = confluent_client(&["timestamps", &bootstrap(&server), "stamped"]);
    assert_eq!(r["errors"], serde_json::json!([]), "{r}");
    let (before, after) = (r["before"].as_i64().unwrap(), r["after"].as_i64().unwrap());
    // librdkafka's TIMESTAMP_LOG_APPEND_TIME is 2; each one the broker's
    // append time, not the producer's 1000.
    for what in ["delivered", "read"] {
        let stamps = r[what].as_array().unwrap();
        assert_eq!(stamps.len(), 10, "{what}: {r}");
        for stamp in stamps {
            assert_eq!(stamp[0], 2, "{what}: {r}");
            let at = stamp[1].as_i64().unwrap();
            assert!((before..=after).contains(&at), "{what}: {r}");
        }
    }
    passes(server);
}

/// librdkafka's batches in every codec: each record read back, and
/// ListOffsets finding a record by time inside the compressed batch, as
/// Kafka does; a compacted topic refusing a record without a key.
#[test]
fn confluent_kafka_finds_records_by_time_inside_batches_of_every_codec() {
    if !confluent() {
        return;
    }
    let server = start(LiveConfig::default(), &[]);
    let r = confluent_client(&["codecs", &bootstrap(&server), "codec"]);
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let c = &r[codec];
        assert_eq!(c["errors"], serde_json::json!([]), "{codec}: {c}");
        let stamps: Vec<i64> = c["stamps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_i64().unwrap())
            .collect();
        let read = c["read"].as_array().unwrap();
        assert_eq!(read.len(), stamps.len(), "{codec}: {c}");
        for (i, record) in read.iter().enumerate() {
            let expected = serde_json::json!([i, format!("{codec}-{i}"), stamps[i]]);
            assert_eq!(record, &expected, "{codec}: {c}");
        }
        // The first record with the largest timestamp, and for each
        // timestamp the first record at least that late.
        let at_least = |t: i64| {
            let i = stamps.iter().position(|&s| s >= t).unwrap();
            serde_json::json!([i, stamps[i]])
        };
        let max = *stamps.iter().max().unwrap();
        assert_eq!(c["found"]["max"], at_least(max), "{codec}: {c}");
        for &t in &stamps {
            assert_eq!(
                c["found"][t.to_string()],
                at_least(t),
                "{codec} at {t}: {c}"
            );
        }
    }
    assert_eq!(
        r["compacted"],
        serde_json::json!({"keyless": "INVALID_RECORD", "keyed": null}),
        "{r}"
    );
    passes(server);
}

/// SCRAM credentials set, refused, replaced and described by
/// confluent-kafka's admin client, with Kafka's checks and answers.
#[test]
fn confluent_kafka_manages_scram_credentials() {
    if !confluent() {
        return;
    }
    let server = start(LiveConfig::default(), &[]);
    let r = confluent_client(&["scram", &bootstrap(&server), "-"]);
    let expected = serde_json::json!({
        "first": {
            "alice": null,
            "bob": null,
            "carol": "UNACCEPTABLE_CREDENTIAL",
            "dave": "RESOURCE_NOT_FOUND",
        },
        "second": {"alice": null, "bob": null},
        "all": {
            "alice": [["SCRAM_SHA_256", 8192], ["SCRAM_SHA_512", 10000]],
            "bob": [["SCRAM_SHA_512", 16384]],
        },
        "some": {
            "alice": [["SCRAM_SHA_256", 8192], ["SCRAM_SHA_512", 10000]],
            "carol": "RESOURCE_NOT_FOUND",
        },
    });
    assert_eq!(r, expected);
    passes(server);
}

/// kcat (librdkafka 2.0, OpenSSL) on SSL listeners that require a client
/// certificate: with one, it produces with acks=all and reads every
/// record back; without one, it gets no metadata.
#[test]
fn kcat_over_ssl_with_a_client_certificate_produces_and_reads_back_every_record() {
    let Some(kcat) = kcat() else { return };
    let pki = pki::Authority::new("test CA");
    let server = start_tls(
        LiveConfig::default(),
        &[("secure", 3)],
        &pki,
        ClientAuth::Required,
    );
    let client = pki.client("kcat", &[(DnType::CommonName, "kcat")]);
    let ca = format!("ssl.ca.location={}", pki.ca.display());
    let tls = [
        "-X",
        "security.protocol=SSL",
        "-X",
        &ca,
        "-X",
        &format!("ssl.certificate.location={}", client.cert.display()),
        "-X",
        &format!("ssl.key.location={}", client.key.display()),
    ];
    kcat_round_trip(kcat, &server, "secure", 200, &tls);
    // The CA alone: the handshake fails, and kcat with it.
    let refused = Command::new(kcat)
        .args(["-b", &bootstrap(&server), "-L", "-m", "3"])
        .args(["-X", "security.protocol=SSL", "-X", &ca])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert_eq!(report.count("records acknowledged (acks=all)"), Some(200));
    assert!(report.count("TLS handshakes failed").unwrap() >= 1);
}

/// One user, alice (password `alice:secret`), and a topic `sasl` of 3
/// partitions.
fn sasl_users() -> LiveConfig {
    LiveConfig {
        sasl_users: [("alice".to_string(), "alice:secret".to_string())].into(),
        ..quick_groups()
    }
}

/// SASL_PLAINTEXT listeners: confluent-kafka authenticates by PLAIN,
/// SCRAM-SHA-256 and SCRAM-SHA-512 as a user given on the command line,
/// gives another user a SCRAM credential with its admin client, and that
/// user reads and commits in a group; wrong credentials, a mechanism the
/// user has no credential for, a deleted credential and a client without
/// SASL are refused.
#[test]
fn confluent_kafka_authenticates_with_plain_and_scram() {
    if !confluent() {
        return;
    }
    authenticates(start(sasl_users(), &[("sasl", 3)]), None);
}

/// The same over SASL_SSL listeners: TLS first, then SASL.
#[test]
fn confluent_kafka_authenticates_with_plain_and_scram_over_tls() {
    if !confluent() {
        return;
    }
    let pki = pki::Authority::new("test CA");
    let server = start_tls(sasl_users(), &[("sasl", 3)], &pki, ClientAuth::None);
    authenticates(server, Some(pki.ca.to_str().unwrap()));
}

/// The confluent script's `sasl` run against `server` (SASL_SSL, trusting
/// the CA file `ca`, if given).
fn authenticates(server: Server, ca: Option<&str>) {
    let mut args = vec!["sasl", "", "sasl", "alice:alice:secret"];
    let bootstrap = bootstrap(&server);
    args[1] = &bootstrap;
    args.extend(ca);
    let mut r = confluent_client(&args);
    // How librdkafka words a connection closed on it varies by version,
    // and on a loaded machine it may not log it at all: then the metadata
    // request's failure says the client was not served.
    let unauthenticated = r["refused"]["no SASL"].take();
    assert!(
        unauthenticated[0].as_str().is_some_and(|why| {
            why.starts_with("Disconnected") || why.starts_with("metadata: Failed to get metadata")
        }),
        "{unauthenticated}"
    );
    let scram = |mechanism: &str| {
        serde_json::json!([format!(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
        )])
    };
    let expected = serde_json::json!({
        "acked": {"PLAIN": 10, "SCRAM-SHA-256": 10, "SCRAM-SHA-512": 10},
        "alter": null,
        "carol_read": 30,
        "carol_committed": 30,
        "carol_errors": [],
        "refused": {
            "carol by PLAIN": ["Authentication failed: Invalid username or password"],
            "carol by SCRAM-SHA-512": scram("SCRAM-SHA-512"),
            "wrong password": scram("SCRAM-SHA-256"),
            "no SASL": null,
            "carol deleted": scram("SCRAM-SHA-256"),
        },
        "delete": null,
    });
    assert_eq!(r, expected);
    passes(server);
}

/// SASL logins that last a second (Kafka's `connections.max.reauth.ms`,
/// KIP-368): confluent-kafka authenticates again on its connections, by
/// SCRAM-SHA-256 while it produces and by PLAIN while it reads, and is
/// never cut off.
#[test]
fn confluent_kafka_authenticates_again_before_its_session_runs_out() {
    if !confluent() {
        return;
    }
    let live = LiveConfig {
        sasl_users: [("alice".to_string(), "alice-pw".to_string())].into(),
        sasl_reauth: Some(Duration::from_secs(1)),
        ..quick_groups()
    };
    let server = start(live, &[("renewed", 3)]);
    let r = confluent_client(&["reauth", &bootstrap(&server), "renewed", "4"]);
    assert_eq!(r["errors"], serde_json::json!([]), "{r}");
    assert!(r["acked"].as_u64().unwrap() >= 100, "{r}");
    assert_eq!(r["read"], r["acked"], "{r}");
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(
        report.count("re-authentications").unwrap() >= 3,
        "{}",
        report.human()
    );
    assert_eq!(
        report.count("connections refused a request"),
        Some(0),
        "{}",
        report.human()
    );
}

/// An authorizer behind SSL listeners that require client certificates:
/// each client is the principal its certificate's subject names, written
/// as Kafka writes it. The super user (by its certificate) lets alice
/// write, read and read in a group with ACLs naming her certificate;
/// alice's records are acknowledged, read and committed, bob is refused,
/// and a client without a certificate gets no answer at all.
#[test]
fn confluent_kafka_over_ssl_is_the_principal_its_certificate_names() {
    if !confluent() {
        return;
    }
    let pki = pki::Authority::new("test CA");
    pki.client(
        "admin",
        &[
            (DnType::OrganizationName, "Acme"),
            (DnType::CommonName, "admin"),
        ],
    );
    pki.client(
        "alice",
        &[
            (DnType::OrganizationName, "Acme"),
            (DnType::OrganizationalUnitName, "payments"),
            (DnType::CommonName, "alice"),
        ],
    );
    pki.client("bob", &[(DnType::CommonName, "bob")]);
    let live = LiveConfig {
        authorization: Some(Authorization {
            super_users: ["User:CN=admin,O=Acme".to_string()].into(),
            allow_everyone_if_no_acl_found: false,
        }),
        ..quick_groups()
    };
    let server = start_tls(live, &[("payments", 3)], &pki, ClientAuth::Required);
    let mut r = confluent_client(&[
        "certificates",
        &bootstrap(&server),
        "payments",
        pki.dir().to_str().unwrap(),
    ]);
    // librdkafka's name for a record that never reached a broker.
    let unanswered = r["no certificate"].take();
    assert!(
        unanswered
            .as_array()
            .is_some_and(|e| !e.is_empty() && !e.contains(&serde_json::Value::Null)),
        "{unanswered}"
    );
    let expected = serde_json::json!({
        "created": [null, null, null],
        "principals": ["User:CN=alice,OU=payments,O=Acme"],
        "alice acked": 60,
        "alice read": 60,
        "alice committed": 60,
        "bob": ["TOPIC_AUTHORIZATION_FAILED"],
        "no certificate": null,
    });
    assert_eq!(r, expected);
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("TLS handshakes failed").unwrap() >= 1);
}

/// An authorizer behind SASL_PLAINTEXT listeners: confluent-kafka's admin
/// client, as the super user, creates, describes and deletes ACLs, and
/// what alice and bob produce, list and read is what those ACLs allow,
/// refused with Kafka's errors otherwise.
#[test]
fn confluent_kafka_is_answered_as_the_acls_allow() {
    if !confluent() {
        return;
    }
    let users = ["admin", "alice", "bob"];
    let live = LiveConfig {
        sasl_users: users
            .iter()
            .map(|u| (u.to_string(), format!("{u}-pw")))
            .collect(),
        authorization: Some(Authorization {
            super_users: ["User:admin".to_string()].into(),
            allow_everyone_if_no_acl_found: false,
        }),
        ..quick_groups()
    };
    let server = start(live, &[("orders", 3), ("secret", 1)]);
    let r = confluent_client(&["acls", &bootstrap(&server), "orders", "secret"]);
    let denied = "TOPIC_AUTHORIZATION_FAILED";
    let expected = serde_json::json!({
        "created": [null, null, null],
        "described": ["ord", "orders", "readers"],
        "bob creates": "CLUSTER_AUTHORIZATION_FAILED",
        "produced": {
            "alice to orders": [null],
            "alice to secret": [denied],
            "bob to orders": [denied],
            "bob to secret": [denied],
        },
        "listed": {"alice": ["orders"], "bob": []},
        "read": {"readers": "from alice", "others": "GROUP_AUTHORIZATION_FAILED"},
        "deleted": 3,
        "alice again": [denied],
    });
    assert_eq!(r, expected);
    passes(server);
}

/// kafka-python (a protocol implementation of its own) on SASL_PLAINTEXT
/// listeners: produces with acks=all by PLAIN, SCRAM-SHA-256 and
/// SCRAM-SHA-512, reads in a group, and is refused a wrong password.
#[test]
fn kafka_python_authenticates_with_plain_and_scram() {
    if !kafka_python() {
        return;
    }
    let server = start(sasl_users(), &[("sasl", 3)]);
    let args = ["sasl", &bootstrap(&server), "sasl", "alice:alice:secret"];
    let r = python_client("kafka_python_client.py", &args);
    let expected = serde_json::json!({
        "acked": {"PLAIN": 5, "SCRAM-SHA-256": 5, "SCRAM-SHA-512": 5},
        "read": 15,
        "wrong_password": "KafkaTimeoutError",
    });
    assert_eq!(r, expected);
    // The wrong password's tries are what failed.
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    assert!(report.count("authentications failed").unwrap() >= 1);
}

#[test]
fn acks_all_to_a_lagging_follower_times_out_at_the_request_timeout() {
    if !confluent() {
        return;
    }
    let server = slow_follower(Duration::from_secs(60), &[("slow", 1)]);
    let r = confluent_client(&["timeout", &bootstrap(&server), "slow", "800"]);
    assert_eq!(r["error"], "REQUEST_TIMED_OUT", "{r}");
    assert!(r["seconds"].as_f64().unwrap() >= 0.8, "{r}");
    let checks = &server.cluster().checks;
    assert!(checks.expired.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    passes(server);
}

#[test]
fn an_idempotent_producer_resending_timed_out_batches_has_each_record_stored_once() {
    if !confluent() {
        return;
    }
    // The follower takes 700 ms per batch and the producer waits 250 ms
    // for an answer: each batch times out in the purgatory and is sent
    // again, with the same sequence numbers, before it is replicated.
    let server = slow_follower(Duration::from_millis(700), &[("resent", 2)]);
    let r = confluent_client(&["idempotent", &bootstrap(&server), "resent", "300", "250"]);
    assert_eq!(r["acked"], 300, "{r}");
    assert_eq!(r["read_back"], 300, "{r}");
    assert_eq!(r["read_twice"], 0, "each record stored once: {r}");
    let checks = &server.cluster().checks;
    let resent = checks.duplicates.load(std::sync::atomic::Ordering::Relaxed);
    assert!(resent >= 1, "some batch was sent again: {r}");
    let stored: i64 = server
        .cluster()
        .topic("resent")
        .unwrap()
        .partitions
        .iter()
        .map(|p| p.log.lock().log_end())
        .sum();
    assert_eq!(stored, 300, "{r}");
    passes(server);
}

#[test]
fn kafka_python_creates_a_topic_produces_idempotently_consumes_in_a_group_and_cleans_up() {
    if !kafka_python() {
        return;
    }
    let server = start(quick_groups(), &[]);
    let args = ["all", &bootstrap(&server), "from-python", "2000"];
    let r = python_client("kafka_python_client.py", &args);
    assert_eq!(r["created_errors"], serde_json::json!([0]), "{r}");
    assert_eq!(r["idempotent"], true, "its default: {r}");
    assert_eq!(r["acked"], 2000, "{r}");
    assert_eq!(r["read_back"], 2000, "{r}");
    assert_eq!(r["read_twice"], 0, "{r}");
    assert_eq!(r["after_commit"], 0, "the group's commits held: {r}");
    // Its admin client lists and describes the groups, then deletes the
    // topic.
    let groups = &r["groups"];
    assert_eq!(
        groups["listed"],
        serde_json::json!(["kafka-python-readers", "watchers"]),
        "{r}"
    );
    let described = &groups["described"];
    assert_eq!(described["group_state"], "Stable", "{r}");
    assert_eq!(described["protocol_type"], "consumer", "{r}");
    let member = &described["members"][0];
    assert_eq!(member["client_id"], "watcher-1", "{r}");
    assert_eq!(
        member["member_assignment"]["assigned_partitions"][0]["partitions"],
        serde_json::json!([0, 1, 2]),
        "{r}"
    );
    // ListConfigResources (v1) of the types it asked for.
    assert_eq!(
        r["config_resources"],
        serde_json::json!({"broker": ["0", "1", "2"], "topic": ["from-python"]}),
        "{r}"
    );
    idempotent_and_deleted(server, &r, "from-python");
}

/// kafka-python's feature admin calls (KIP-584): describe_features from
/// ApiVersions, and update_features refusing a downgrade that does not
/// say so, validating one, making it and upgrading again.
#[test]
fn kafka_python_describes_and_updates_the_features() {
    if !kafka_python() {
        return;
    }
    let server = start(LiveConfig::default(), &[]);
    let r = python_client(
        "kafka_python_client.py",
        &["features", &bootstrap(&server), "-"],
    );
    let on = serde_json::json!({"metadata.version": [22, 22], "group.version": [1, 1]});
    let off = serde_json::json!({"metadata.version": [22, 22], "group.version": null});
    let ok = serde_json::json!({"group.version": "OK"});
    assert_eq!(
        r,
        serde_json::json!({
            "supported": {"metadata.version": [22, 22], "group.version": [0, 1]},
            "before": on,
            "plain_downgrade": "InvalidUpdateVersionError",
            "checked": ok,
            "after_check": on,
            "downgrade": ok,
            "off": off,
            "upgrade": ok,
            "on": on,
        })
    );
    passes(server);
}

/// kafka-python's transaction admin calls: ListTransactions at every
/// broker (each id at its coordinator only), DescribeTransactions, and
/// DescribeProducers with where an open transaction began, before and
/// after it is aborted.
#[test]
fn kafka_python_lists_and_describes_transactions_and_their_producers() {
    if !kafka_python() {
        return;
    }
    let server = start(LiveConfig::default(), &[]);
    let r = python_client(
        "kafka_python_client.py",
        &["transactions", &bootstrap(&server), "txns"],
    );
    let described = &r["described"];
    let (open, done) = (&described["open"], &described["done"]);
    let open_id = open["producer_id"].as_i64().unwrap();
    let done_id = done["producer_id"].as_i64().unwrap();
    assert_ne!(open_id, done_id, "{r}");
    // Each id is listed by its coordinator, and by no other broker.
    let mut expected_listing = serde_json::json!({"0": [], "1": [], "2": []});
    let mut expected_ongoing = expected_listing.clone();
    for (id, txn, pid, state) in [
        ("done", done, done_id, "CompleteCommit"),
        ("open", open, open_id, "Ongoing"),
    ] {
        let at = txn["coordinator"].to_string();
        let entry = serde_json::json!([id, pid, state]);
        expected_listing[&at]
            .as_array_mut()
            .unwrap()
            .push(entry.clone());
        if state == "Ongoing" {
            expected_ongoing[&at].as_array_mut().unwrap().push(entry);
        }
    }
    for at in ["0", "1", "2"] {
        let listed = expected_listing[at].as_array_mut().unwrap();
        listed.sort_by_key(|e| e[0].as_str().unwrap().to_string());
    }
    assert_eq!(r["listed"], expected_listing, "{r}");
    assert_eq!(r["ongoing"], expected_ongoing, "{r}");
    assert_eq!(open["state"], "Ongoing", "{r}");
    assert_eq!(open["epoch"], 0, "{r}");
    assert_eq!(open["timeout_ms"], 60000, "kafka-python's default: {r}");
    let (before, after) = (r["before"].as_i64().unwrap(), r["after"].as_i64().unwrap());
    let started = open["start_ms"].as_i64().unwrap();
    assert!((before..=after).contains(&started), "{r}");
    assert_eq!(
        open["partitions"],
        serde_json::json!([["txns", 0], ["txns", 1]]),
        "{r}"
    );
    assert_eq!(done["state"], "CompleteCommit", "{r}");
    assert_eq!(done["partitions"], serde_json::json!([]), "{r}");
    assert_eq!(r["never_used"], "TransactionalIdNotFoundError", "{r}");
    // Each producer: id, epoch, last sequence, coordinator epoch (-1
    // before any marker), the offset its open transaction began at.
    // Listed by producer id.
    let mut on_zero = vec![
        serde_json::json!([open_id, 0, 0, -1, 0]),
        serde_json::json!([done_id, 0, 0, 0, -1]),
    ];
    on_zero.sort_by_key(|p| p[0].as_i64());
    assert_eq!(
        r["producers"],
        serde_json::json!({"0": on_zero, "1": [[open_id, 0, 0, -1, 0]]}),
        "{r}"
    );
    let aborted = &r["described_after_abort"]["open"];
    assert_eq!(aborted["state"], "CompleteAbort", "{r}");
    assert_eq!(aborted["partitions"], serde_json::json!([]), "{r}");
    let producers = &r["producers_after_abort"];
    for at in ["0", "1"] {
        let open_there = producers[at]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p[0] == open_id)
            .unwrap();
        assert_eq!(
            open_there,
            &serde_json::json!([open_id, 0, 0, 0, -1]),
            "{r}"
        );
    }
    passes(server);
}

/// kafka-python's admin client finds a transaction held open on a
/// partition by its producer (DescribeProducers) and aborts it there as an
/// operator does (WriteTxnMarkers): committed readers move past it at
/// once, the other partition stays held until the producer commits, and
/// the aborted record is never read.
#[test]
fn kafka_python_aborts_an_open_transaction_on_one_partition() {
    if !kafka_python() {
        return;
    }
    let server = start(LiveConfig::default(), &[]);
    let r = python_client(
        "kafka_python_client.py",
        &["abort", &bootstrap(&server), "held"],
    );
    let pid = r["producers"]["0"][0][0].as_i64().unwrap();
    // Each producer: id, epoch, coordinator epoch, open transaction's
    // first offset.
    let open = serde_json::json!([[pid, 0, -1, 0]]);
    assert_eq!(
        r["producers"],
        serde_json::json!({"0": open, "1": open}),
        "{r}"
    );
    assert_eq!(r["ends"], serde_json::json!({"0": 0, "1": 0}), "{r}");
    assert_eq!(r["older_epoch"], "InvalidProducerEpochError", "{r}");
    // Partition 0's transaction is over (the marker from coordinator epoch
    // 0), and its committed end is past the record and the marker as soon
    // as the abort was answered.
    assert_eq!(
        r["producers_after"],
        serde_json::json!({"0": [[pid, 0, 0, -1]], "1": open}),
        "{r}"
    );
    assert_eq!(r["ends_after"], serde_json::json!({"0": 2, "1": 0}), "{r}");
    // The commit's marker on partition 0 ends nothing there.
    assert_eq!(
        r["ends_committed"],
        serde_json::json!({"0": 3, "1": 2}),
        "{r}"
    );
    assert_eq!(r["read"], serde_json::json!(["stuck-1"]), "{r}");
    let written =
        (server.cluster().checks.markers_written).load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(written, 1, "{r}");
    passes(server);
}

/// kafka-python's admin client moves a partition to two other brokers
/// (its leader with it) and another onto all three, sees the moves finish
/// (ListPartitionReassignments), and every record produced before and
/// after is read back; a cancel with no move under way and a broker that
/// does not exist are refused as Kafka refuses them.
#[test]
fn kafka_python_moves_partitions_to_other_brokers_and_every_record_stays() {
    if !kafka_python() {
        return;
    }
    let server = start(LiveConfig::default(), &[]);
    let r = python_client(
        "kafka_python_client.py",
        &["reassign", &bootstrap(&server), "moved"],
    );
    // Each partition on one broker, which leads it.
    for p in ["0", "1"] {
        let leader = &r["before"][p]["leader"];
        let expected = serde_json::json!({"leader": leader, "replicas": [leader], "isr": [leader]});
        assert_eq!(r["before"][p], expected, "{r}");
    }
    assert_eq!(r["moved"], serde_json::json!({"0": null, "1": null}), "{r}");
    assert_eq!(r["listed_after"], serde_json::json!({}), "{r}");
    assert_eq!(
        r["after"]["0"],
        serde_json::json!({"leader": 2, "replicas": [2, 1], "isr": [1, 2]}),
        "{r}"
    );
    assert_eq!(
        r["after"]["1"]["replicas"],
        serde_json::json!([0, 1, 2]),
        "{r}"
    );
    assert_eq!(r["after"]["1"]["isr"], serde_json::json!([0, 1, 2]), "{r}");
    assert_eq!(
        r["cancelled"],
        serde_json::json!({"0": "NoReassignmentInProgressError"}),
        "{r}"
    );
    assert_eq!(
        r["unknown_broker"],
        serde_json::json!({"0": "InvalidReplicationAssignmentError"}),
        "{r}"
    );
    let all: Vec<i64> = (0..120).collect();
    assert_eq!(r["read"], serde_json::json!(all), "{r}");
    passes(server);
}

#[test]
fn sarama_produces_idempotently_long_polls_and_a_group_of_two_commits_every_record() {
    let Some(client) = sarama_client() else {
        return;
    };
    let server = start(quick_groups(), &[("from-go", 3)]);
    let r = sarama_round(&client, &server, "from-go", "sarama-readers", 600);
    assert_eq!(r["partitions"], 3, "{r}");
    // Its fetch waited up to 5 s for a byte: the produce's high watermark
    // move completed it in the purgatory.
    assert!(r["woken_after_ms"].as_i64().unwrap() < 1000, "{r}");
    assert_eq!(r["group_members_with_claims"], 2, "{r}");
    let report = server.stop();
    assert!(report.violations.is_empty(), "{}", report.human());
    let refused = report.count("connections refused").unwrap();
    assert_eq!(refused, 0, "{}", report.human());
}

#[test]
fn sarama_keeps_producing_and_consuming_across_a_leaders_crash() {
    let Some(client) = sarama_client() else {
        return;
    };
    // Its 6,000 synchronous sends take about ten seconds here: the crash
    // falls among them.
    let crash_at = Duration::from_millis(1500);
    let server = crashing_at(crash_at, "crashy-go");
    let r = sarama_round(&client, &server, "crashy-go", "sarama-crash", 6000);
    // Started with the server: its sends went on past the crash.
    assert!(
        r["produce_ms"].as_u64().unwrap() > crash_at.as_millis() as u64,
        "{r}"
    );
    passes(server);
}

/// Runs the sarama client on `topic` with `records` records and checks
/// what every run must show: each record acknowledged, stored once and
/// read back; those and the one that woke its waiting fetch read by the
/// group and committed (the sum of the next offsets). Its JSON line.
fn sarama_round(
    client: &std::path::Path,
    server: &Server,
    topic: &str,
    group: &str,
    records: u64,
) -> serde_json::Value {
    let out = Command::new(client)
        .args([&bootstrap(server), topic, group, &records.to_string()])
        .output()
        .expect("the sarama client runs");
    let r = json_line(&out);
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(r["acked"], records, "{r}");
    assert_eq!(r["read_back"], records, "{r}");
    assert_eq!(r["group_read"], records + 1, "{r}");
    assert_eq!(r["committed"], records + 1, "{r}");
    let stored: i64 = server
        .cluster()
        .topic(topic)
        .unwrap()
        .partitions
        .iter()
        .map(|p| p.log.lock().log_end())
        .sum();
    assert_eq!(stored, records as i64 + 1, "each record stored once");
    r
}

/// The sarama client (`tests/clients/sarama_client.go`) built with the
/// machine's Go and Debian's sarama (a GOPATH of packaged sources), if
/// both are installed; says the test is skipped if not. Built once for the
/// tests that run it side by side: two builds writing the one binary while
/// a test runs it would race.
fn sarama_client() -> Option<std::path::PathBuf> {
    static BUILT: std::sync::OnceLock<Result<Option<std::path::PathBuf>, String>> =
        std::sync::OnceLock::new();
    match BUILT.get_or_init(build_sarama_client) {
        Ok(Some(binary)) => Some(binary.clone()),
        Ok(None) => {
            eprintln!(
                "skipped: Go with sarama is not installed (Debian packages 'golang-go' and \
                 'golang-github-shopify-sarama-dev'; .ci/run installs them)"
            );
            None
        }
        Err(why) => panic!("the sarama client does not build: {why}"),
    }
}

/// Builds the sarama client: `None` where Go or sarama is missing.
fn build_sarama_client() -> Result<Option<std::path::PathBuf>, String> {
    const GOPATH: &str = "/usr/share/gocode";
    let packaged = std::path::Path::new(GOPATH).join("src/github.com/Shopify/sarama");
    let go = Command::new("go")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !go || !packaged.is_dir() {
        return Ok(None);
    }
    let source = format!(
        "{}/tests/clients/sarama_client.go",
        env!("CARGO_MANIFEST_DIR")
    );
    let target = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let binary = target.join("sarama_client");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(&source)
        .env("GO111MODULE", "off")
        .env("GOPATH", GOPATH)
        // Its build cache beside the binary: also where no HOME is set.
        .env("GOCACHE", target.join("go-build"))
        .output()
        .map_err(|e| format!("go does not run: {e}"))?;
    if !built.status.success() {
        return Err(String::from_utf8_lossy(&built.stderr).into_owned());
    }
    Ok(Some(binary))
}

#[test]
fn aiokafka_produces_idempotently_and_a_stable_group_of_two_reads_every_record_once() {
    if !aiokafka() {
        return;
    }
    let server = start(quick_groups(), &[]);
    let args = ["all", &bootstrap(&server), "from-aiokafka", "2000"];
    let r = python_client("aiokafka_client.py", &args);
    assert_eq!(r["created_errors"], serde_json::json!([0]), "{r}");
    assert_eq!(r["stable"], true, "each member holds two partitions: {r}");
    assert_eq!(r["assignments"], serde_json::json!([[0, 2], [1, 3]]), "{r}");
    assert_eq!(r["errors"], serde_json::json!([]), "{r}");
    assert_eq!(r["acked"], 2000, "{r}");
    assert_eq!(r["partitions_written"], 4, "{r}");
    assert_eq!(r["read_back"], 2000, "{r}");
    // The group was stable before the first record: no rebalance fell
    // between a read and its commit.
    assert_eq!(r["read_twice"], 0, "{r}");
    assert_eq!(r["after_commit"], 0, "the group's commits held: {r}");
    idempotent_and_deleted(server, &r, "from-aiokafka");
}

/// The end of a Python client's run (`r`, its JSON line): its producer
/// asked for a producer id, its admin client deleted `topic` and no
/// longer lists it, and the cluster holds it no more; then the server's
/// checks.
fn idempotent_and_deleted(server: Server, r: &serde_json::Value, topic: &str) {
    assert_eq!(r["deleted_errors"], serde_json::json!([0]), "{r}");
    assert_eq!(r["topic_left"], false, "{r}");
    let cluster = server.cluster();
    assert!(cluster.topic(topic).is_none(), "deleted");
    let asked = cluster
        .checks
        .init_producer_id_requests
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(asked >= 1, "its producer asked for an id");
    passes(server);
}

#[test]
fn kafkajs_produces_with_acks_all_and_a_group_of_two_reads_every_record_once() {
    let Some(node_path) = kafkajs() else { return };
    let server = start(quick_groups(), &[]);
    let r = kafkajs_client(&node_path, &[&bootstrap(&server), "from-js", "2000"]);
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(r["created"], true, "{r}");
    assert_eq!(r["acked"], 2000, "{r}");
    assert_eq!(r["partitions_written"], 4, "{r}");
    assert_eq!(r["group"]["state"], "Stable", "{r}");
    assert_eq!(r["group"]["members"], 2, "{r}");
    assert_eq!(r["read"], 2000, "{r}");
    // Its commits while the second member joins count: nothing is read
    // again after the rebalance.
    assert_eq!(r["read_twice"], 0, "{r}");
    assert_eq!(r["late_read"], 40, "the one left took every partition: {r}");
    assert_eq!(r["committed"], 2040, "{r}");
    assert_eq!(r["topic_left"], false, "{r}");
    assert!(server.cluster().topic("from-js").is_none(), "deleted");
    passes(server);
}

/// Runs the kafkajs client script with `args`; the JSON line it ends with.
fn kafkajs_client(node_path: &str, args: &[&str]) -> serde_json::Value {
    node_client("kafkajs_client.js", node_path, args)
}

/// Runs the node client script `name` with `args`, finding its package
/// in `node_path`; the JSON line it ends with.
fn node_client(name: &str, node_path: &str, args: &[&str]) -> serde_json::Value {
    let script = format!("{}/tests/clients/{name}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("node")
        .arg(script)
        .args(args)
        .env("NODE_PATH", node_path)
        .output()
        .expect("node runs");
    json_line(&out)
}

/// What a committed and an uncommitted reader saw of three transactions
/// (t0 committed, t1 aborted, t2 committed) of 10 records each.
fn read_the_committed_transactions(r: &serde_json::Value) {
    assert_eq!(
        r["committed"],
        serde_json::json!({"t0": 10, "t2": 10}),
        "{r}"
    );
    assert_eq!(
        r["uncommitted"],
        serde_json::json!({"t0": 10, "t1": 10, "t2": 10}),
        "{r}"
    );
}

/// Client quotas set and described by @platformatic/kafka's admin, as
/// `kafka-configs --entity-type clients` would: a client id's and the
/// default client's, and a value Kafka's controller refuses.
#[test]
fn platformatic_kafka_sets_and_describes_client_quotas() {
    let Some(node_path) = platformatic() else {
        return;
    };
    let server = start(LiveConfig::default(), &[]);
    let boot = bootstrap(&server);
    let quota = |args: &[&str]| {
        let all: Vec<&str> = ["quota", boot.as_str()]
            .iter()
            .chain(args)
            .copied()
            .collect();
        node_client("platformatic_client.mjs", &node_path, &all)
    };
    let value = |r: &serde_json::Value, key: &str| r["quotas"][key].as_f64();
    let r = quota(&[
        "app",
        "producer_byte_rate=1048576",
        "request_percentage=12.5",
    ]);
    assert_eq!(r["errors"], serde_json::json!([0]), "{r}");
    assert_eq!(value(&r, "producer_byte_rate"), Some(1_048_576.0), "{r}");
    assert_eq!(value(&r, "request_percentage"), Some(12.5), "{r}");
    let r = quota(&["-", "consumer_byte_rate=2097152"]);
    assert_eq!(value(&r, "consumer_byte_rate"), Some(2_097_152.0), "{r}");
    assert_eq!(r["quotas"].as_object().map(|q| q.len()), Some(1), "{r}");
    // A byte rate is a whole number of bytes: refused, nothing changed.
    let r = quota(&["app", "producer_byte_rate=1.5"]);
    assert!(r["error"].is_string(), "{r}");
    let r = quota(&["app", "producer_byte_rate=1048576"]);
    assert_eq!(value(&r, "request_percentage"), Some(12.5), "{r}");
    passes(server);
}

#[test]
fn platformatic_kafka_starts_from_current_versions_and_runs_groups_and_transactions() {
    // A client that sends nothing older than current brokers' versions
    // (FindCoordinator v4+, OffsetFetch v8+ with several groups, Fetch
    // v12+, topics by id where Fetch reaches v13), and pipelines a commit
    // per record without waiting for the last one.
    let Some(node_path) = platformatic() else {
        return;
    };
    let server = start(quick_groups(), &[("plt-txn", 2)]);
    let r = node_client(
        "platformatic_client.mjs",
        &node_path,
        &["groups", &bootstrap(&server), "from-plt", "2000"],
    );
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(r["created"], true, "{r}");
    let id = r["topic_id"].as_str().unwrap_or_default();
    assert!(
        id.len() == 36 && id != "00000000-0000-0000-0000-000000000000",
        "{r}"
    );
    assert_eq!(r["acked"], 2000, "{r}");
    assert_eq!(r["partitions_written"], 4, "{r}");
    assert_eq!(r["group"]["state"], "STABLE", "{r}");
    assert_eq!(r["group"]["members"], 2, "{r}");
    assert_eq!(r["read"], 2040, "{r}");
    assert_eq!(r["read_twice"], 0, "{r}");
    assert_eq!(r["late_read"], 40, "the one left took every partition: {r}");
    // Every record's commit, pipelined, applied in the order sent: the
    // last of each partition stands.
    assert_eq!(r["committed"], 2040, "{r}");
    // One of the four partitions' offsets deleted (OffsetDelete), and the
    // topic's own min.insync.replicas set (IncrementalAlterConfigs).
    assert_eq!(r["offsets_left"], 3, "{r}");
    assert_eq!(r["min_insync"], "3", "{r}");
    assert_eq!(r["topic_left"], false, "{r}");
    assert!(server.cluster().topic("from-plt").is_none(), "deleted");
    let r = node_client(
        "platformatic_client.mjs",
        &node_path,
        &["transactions", &bootstrap(&server), "plt-txn"],
    );
    assert!(r["error"].is_null(), "{r}");
    read_the_committed_transactions(&r);
    passes(server);
}

#[test]
fn platformatic_kafka_consumer_protocol_members_share_the_partitions_and_hand_them_over() {
    // A second implementation of the consumer group protocol (KIP-848),
    // in JavaScript, beside librdkafka's.
    let Some(node_path) = platformatic() else {
        return;
    };
    let server = start(quick_groups(), &[]);
    let r = node_client(
        "platformatic_client.mjs",
        &node_path,
        &["consumer-protocol", &bootstrap(&server), "plt-848", "400"],
    );
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(r["read_all"], true, "{r}");
    assert_eq!(r["both_assigned"], true, "{r}");
    let shares: Vec<i64> = r["shares"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s.as_array().into_iter().flatten())
        .filter_map(serde_json::Value::as_i64)
        .collect();
    let mut sorted = shares.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        vec![0, 1, 2, 3],
        "split with no partition twice: {r}"
    );
    assert_eq!(r["last_share"], serde_json::json!([0, 1, 2, 3]), "{r}");
    assert_eq!(r["late_read"], 40, "{r}");
    assert_eq!(r["read"], 440, "{r}");
    assert_eq!(r["read_twice"], 0, "{r}");
    assert_eq!(r["commits_failed"], serde_json::json!([]), "{r}");
    let (state, epoch, members) = server
        .cluster()
        .consumer_group_view("plt-848-readers")
        .expect("a consumer-protocol group");
    assert!(
        members.is_empty() && state == "Empty" && epoch >= 3,
        "{state} {epoch} {members:?}"
    );
    passes(server);
}

#[test]
fn kafkajs_and_aiokafka_transactions_are_read_committed_or_not() {
    // Two more implementations of the transaction protocol, with their
    // own handling of aborted transactions on the read side.
    let server = start(quick_groups(), &[("js-txn", 2), ("aio-txn", 2)]);
    if let Some(node_path) = kafkajs() {
        let r = kafkajs_client(&node_path, &["transactions", &bootstrap(&server), "js-txn"]);
        assert!(r["error"].is_null(), "{r}");
        read_the_committed_transactions(&r);
    }
    if aiokafka() {
        let r = python_client(
            "aiokafka_client.py",
            &["transactions", &bootstrap(&server), "aio-txn"],
        );
        read_the_committed_transactions(&r);
        // The consume-transform-produce round: its output and its group's
        // offsets committed together.
        assert_eq!(r["out"], serde_json::json!({"T0": 10, "T2": 10}), "{r}");
        assert_eq!(r["read_again"], 0, "{r}");
    }
    passes(server);
}

#[test]
fn confluent_kafka_lists_every_topic_and_a_regex_subscription_takes_up_a_new_one() {
    if !confluent() {
        return;
    }
    let server = start(quick_groups(), &[("rx-a", 2)]);
    let r = confluent_client(&["regex", &bootstrap(&server), "rx"]);
    assert_eq!(r["listed"], true, "{r}");
    assert_eq!(r["read"], 30, "{r}");
    let assignments = r["assignments"].as_array().expect("assignments");
    assert_eq!(
        assignments.first(),
        Some(&serde_json::json!(["rx-a:0", "rx-a:1"])),
        "{r}"
    );
    assert_eq!(
        assignments.last(),
        Some(&serde_json::json!(["rx-a:0", "rx-a:1", "rx-b:0"])),
        "the new topic joined the subscription: {r}"
    );
    passes(server);
}

#[test]
fn two_confluent_consumers_in_a_group_process_every_record_once_across_a_rebalance() {
    if !confluent() {
        return;
    }
    let (generation, _) = two_confluent_consumers(["range"; 2], "pair");
    assert!(
        generation >= 2,
        "a rebalance happened (generation {generation})"
    );
}

#[test]
fn cooperative_consumers_keep_their_partitions_and_hand_over_the_rest_in_two_rounds() {
    if !confluent() {
        return;
    }
    let (generation, first) = two_confluent_consumers(["cooperative-sticky"; 2], "sticky");
    // One round in which the first member gives up what the second is to
    // get, and one in which the second gets it.
    assert!(
        generation >= 3,
        "two rounds at least (generation {generation})"
    );
    // Incremental: when the second member comes, the first gives up only
    // what moves (an eager rebalance takes all four back first).
    gave_up_only_what_moved(&first);
}

/// Whether the first member of [`two_confluent_consumers`], whose
/// callbacks `first` lists, gave up only some of its four partitions when
/// the second came.
fn gave_up_only_what_moved(first: &str) {
    let first_revoke = first.lines().find(|l| l.starts_with("revoked"));
    assert!(
        first_revoke.is_some_and(|l| l != "revoked [0, 1, 2, 3]"),
        "the first member's assignments: {first}"
    );
}

#[test]
fn consumer_protocol_members_are_assigned_by_the_coordinator_and_hand_over_incrementally() {
    if !confluent() {
        return;
    }
    // librdkafka with `group.protocol=consumer` (KIP-848): no JoinGroup or
    // SyncGroup, the coordinator's assignor, partitions moved one epoch at
    // a time, and no partition owned twice (a check of every run).
    let (epoch, first) = two_confluent_consumers(["consumer"; 2], "kip848");
    assert!(epoch >= 2, "the second member raised the epoch ({epoch})");
    // The first member gave up only what went to the second.
    gave_up_only_what_moved(&first);
}

#[test]
fn a_classic_group_moves_to_the_consumer_protocol_one_member_at_a_time_and_back() {
    if !confluent() {
        return;
    }
    // A cooperative classic consumer, then one of the consumer protocol in
    // the same group: the group turns consumer-protocol with the first
    // keeping its partitions, the coordinator splits them, and when the
    // second leaves the group turns classic again. Every record once.
    let (_, first) = two_confluent_consumers(["cooperative-sticky", "consumer"], "migrating");
    gave_up_only_what_moved(&first);
}

#[test]
fn a_consumer_protocol_group_takes_a_classic_member() {
    if !confluent() {
        return;
    }
    // The other way round: an eager classic consumer joins a group of the
    // consumer protocol, is assigned its share by the coordinator, and
    // leaves with LeaveGroup. Every record once.
    let (_, first) = two_confluent_consumers(["consumer", "range"], "joining");
    gave_up_only_what_moved(&first);
}

#[test]
fn a_static_consumer_protocol_member_restarts_into_its_place_and_a_duplicate_is_refused() {
    if !confluent() {
        return;
    }
    let server = start(quick_groups(), &[("statics", 4)]);
    let r = confluent_client(&[
        "static",
        &bootstrap(&server),
        "statics",
        "fixed-848",
        "consumer",
    ]);
    let events = &r["events"];
    // A consumer's callbacks, incremental in this protocol: what it held
    // at the end, and what it gave up on the way, in order.
    let replay = |name: &str| {
        let mut held = std::collections::BTreeSet::new();
        let mut revoked = Vec::new();
        for e in events[name].as_array().into_iter().flatten() {
            let parts: Vec<i64> = e[1]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p.as_i64())
                .collect();
            if e[0] == "assigned" {
                held.extend(parts);
            } else {
                parts.iter().for_each(|p| {
                    held.remove(p);
                });
                revoked.push(parts);
            }
        }
        (held, revoked)
    };
    // "a" closed (leaving with epoch -2) and kept its place: its last
    // callback gave up what it held then, its share.
    let (_, a_revoked) = replay("a");
    let a_share = a_revoked.last().cloned().unwrap_or_default();
    assert_eq!(a_share.len(), 2, "{r}");
    assert_eq!(
        r["described_while_away"],
        serde_json::json!(["a", "b"]),
        "{r}"
    );
    // Back as a new process: the same partitions.
    assert_eq!(
        events["a2"],
        serde_json::json!([["assigned", a_share]]),
        "{r}"
    );
    // "b" holds the other two, and gave up nothing but, if it came first,
    // a's share when a joined: a's return moved nothing of its.
    let (b_held, b_revoked) = replay("b");
    assert_eq!(b_held.len(), 2, "{r}");
    assert!(b_held.iter().all(|p| !a_share.contains(p)), "{r}");
    assert!(
        b_revoked.iter().all(|p| *p == a_share) && b_revoked.len() <= 1,
        "{r}"
    );
    // A third process with the same instance is refused
    // (UNRELEASED_INSTANCE_ID, fatal to it) while the second runs.
    assert_eq!(events["a3"], serde_json::json!([]), "{r}");
    assert_eq!(r["errors"]["a3"], serde_json::json!(["_FATAL"]), "{r}");
    assert_eq!(r["errors"]["a2"], serde_json::json!([]), "{r}");
    assert_eq!(
        (r["read"].as_u64(), r["read_twice"].as_u64()),
        (Some(200), Some(0)),
        "{r}"
    );
    // Two epochs: a's join and b's; the return raised none.
    let (_, epoch, _) = server.cluster().consumer_group_view("fixed-848").unwrap();
    assert_eq!(epoch, 2, "{r}");
    passes(server);
}

#[test]
fn a_static_confluent_consumer_restarts_into_its_place_and_a_duplicate_is_fenced() {
    if !confluent() {
        return;
    }
    let server = start(quick_groups(), &[("statics", 4)]);
    let r = confluent_client(&["static", &bootstrap(&server), "statics", "fixed"]);
    // Each consumer's rebalance callbacks, as ["assigned" | "revoked",
    // partitions], until the end.
    let events = &r["events"];
    let first = |name: &str| events[name][0].clone();
    let (a_share, b_share) = (first("a")[1].clone(), first("b")[1].clone());
    assert_eq!(first("a")[0], "assigned", "{r}");
    assert_eq!(a_share.as_array().map(Vec::len), Some(2), "{r}");
    // "a" closed without leaving: admin tools still see both instances.
    assert_eq!(
        r["described_while_away"],
        serde_json::json!(["a", "b"]),
        "{r}"
    );
    // Back as a new process, and again as a third while the second runs:
    // each gets the instance's partitions, and "b" is never rebalanced.
    for name in ["a2", "a3"] {
        assert_eq!(
            events[name],
            serde_json::json!([["assigned", a_share]]),
            "{r}"
        );
    }
    assert_eq!(
        events["b"],
        serde_json::json!([["assigned", b_share]]),
        "{r}"
    );
    // The process the third replaced is fenced, fatally.
    assert_eq!(r["errors"]["a2"], serde_json::json!(["_FATAL"]), "{r}");
    assert_eq!(
        (r["read"].as_u64(), r["read_twice"].as_u64()),
        (Some(200), Some(0)),
        "{r}"
    );
    let (_, generation, _) = server.cluster().group_view("fixed").unwrap();
    assert_eq!(generation, 1, "one rebalance round in all: {r}");
    passes(server);
}

#[test]
fn confluent_transactions_commit_abort_fence_time_out_and_carry_a_groups_offsets() {
    if !confluent() {
        return;
    }
    let server = start(quick_groups(), &[("txns", 4)]);
    let r = confluent_client(&["transactions", &bootstrap(&server), "txns"]);
    // Committed readers see the committed transactions only; others see
    // the aborted ones too (and the one aborted at its timeout).
    assert_eq!(
        r["committed"],
        serde_json::json!({"t0": 20, "t2": 20, "second": 8}),
        "{r}"
    );
    assert_eq!(
        r["uncommitted"],
        serde_json::json!({"t0": 20, "t1": 20, "t2": 20, "t3": 20, "second": 8, "slow": 12}),
        "{r}"
    );
    // The old instance, and the producer whose transaction timed out, are
    // fenced for good.
    let fenced = serde_json::json!({"name": "_FENCED", "fatal": true});
    assert_eq!(r["fenced"], fenced, "{r}");
    assert_eq!(r["timed_out"], fenced, "{r}");
    // The round's output and its consumed offsets committed together.
    assert_eq!(r["transformed"], 48, "{r}");
    assert_eq!(
        r["out"],
        serde_json::json!({"T0": 20, "T2": 20, "SECOND": 8}),
        "{r}"
    );
    assert_eq!(r["read_again"], 0, "{r}");
    let checks = &server.cluster().checks;
    let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(count(&checks.txns_committed), 4, "{r}");
    assert_eq!(count(&checks.txns_expired), 1, "{r}");
    passes(server);
}

#[test]
fn exactly_once_processing_outputs_each_record_once_across_crashes_of_its_brokers() {
    if !confluent() {
        return;
    }
    // Broker 1, then broker 2 (the processor's group coordinator) down for
    // 5 s each, back within the fencing window: neither leaves the
    // metadata, as with Kafka. Fenced at the crash instead (a window of
    // 0), both leave it, and librdkafka's send_offsets_to_transaction can
    // then wait for good on the group coordinator it let go of (it did in
    // 2 runs of 2, and this test failed).
    let down = |broker: u32, at: u64| {
        [
            Fault::Crash {
                broker,
                at: Duration::from_secs(at),
            },
            Fault::Restart {
                broker,
                at: Duration::from_secs(at + 5),
            },
        ]
    };
    let live = LiveConfig {
        faults: [down(1, 3), down(2, 10)].concat(),
        broker_session_timeout: Duration::from_secs(6),
        ..quick_groups()
    };
    let server = start(live, &[("eos-in", 4), ("eos-in-out", 4)]);
    assert_eq!(server.cluster().group_coordinator("eos"), Some(2));
    let all = server
        .addrs()
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>();
    let r = confluent_client(&["eos", &all.join(","), "eos-in", "20000", "16"]);
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(r["fed"], 20000, "{r}");
    assert_eq!(r["consumed"], 20000, "{r}");
    assert_eq!(r["out"], 20000, "{r}");
    assert_eq!(r["missing"], 0, "{r}");
    assert_eq!(r["twice"], 0, "{r}");
    assert!(r["committed"].as_u64().unwrap() > 10, "{r}");
    passes(server);
}

/// Two confluent-kafka consumers in group `group`, of the first and the
/// second of `strategies` (`consumer` for the consumer group protocol): the
/// first reads 200 records alone, the second joins, 200 more are produced. Checks
/// that each record is processed exactly once between them and that both
/// processed some; returns the group's generation and the first member's
/// stderr (its assignments).
fn two_confluent_consumers(strategies: [&str; 2], group: &str) -> (i32, String) {
    let server = start(quick_groups(), &[("grouped", 4)]);
    let bootstrap = bootstrap(&server);
    let first = confluent_client(&["produce", &bootstrap, "grouped", "200", "a"]);
    assert_eq!(first["acked"], 200, "{first}");
    let consumer = |seconds: &str, strategy: &str| {
        Command::new("python3")
            .args([
                client_script(),
                "group",
                &bootstrap,
                "grouped",
                seconds,
                group,
                strategy,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 runs")
    };
    let a = consumer("14", strategies[0]);
    std::thread::sleep(Duration::from_secs(4));
    // The second member joins: the partitions are split between them.
    let b = consumer("9", strategies[1]);
    std::thread::sleep(Duration::from_secs(4));
    let second = confluent_client(&["produce", &bootstrap, "grouped", "200", "b"]);
    assert_eq!(second["acked"], 200, "{second}");
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let lines = |o: &std::process::Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    };
    let (from_a, from_b) = (lines(&a), lines(&b));
    let a_said = String::from_utf8_lossy(&a.stderr).to_string();
    assert!(
        !from_b.is_empty(),
        "the second member processed records; its stderr: {}",
        String::from_utf8_lossy(&b.stderr)
    );
    let mut all: Vec<String> = from_a.iter().chain(&from_b).cloned().collect();
    all.sort();
    let mut want: Vec<String> = (0..200)
        .flat_map(|i| [format!("a-{i}"), format!("b-{i}")])
        .collect();
    want.sort();
    assert_eq!(
        all, want,
        "each record processed exactly once between the two; the first's stderr: {a_said}"
    );
    let generation = match server.cluster().group_view(group) {
        Some((_, generation, _)) if strategies[0] != "consumer" => generation,
        _ => server.cluster().consumer_group_view(group).unwrap().1,
    };
    passes(server);
    (generation, a_said)
}

#[test]
fn two_kcat_consumers_split_a_group_and_one_leaving_hands_over_its_partitions() {
    let Some(kcat) = kcat() else { return };
    let server = start(quick_groups(), &[("split", 4)]);
    let bootstrap = bootstrap(&server);
    let consumer = |name: &str| {
        Command::new(kcat)
            .args(["-b", &bootstrap, "-G", "kcats", "split", "-u", "-q"])
            .args([
                "-X",
                "auto.offset.reset=earliest",
                "-f",
                &format!("{name} %p %s\\n"),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = consumer("A");
    let mut b = consumer("B");
    // Both in one round: two members, each with its share.
    stable_with(&server, "kcats", 2);
    // B stops (SIGTERM: kcat closes and leaves the group).
    terminate(&b);
    let _ = b.wait();
    // B's partitions handed over: one member left, stable again.
    stable_with(&server, "kcats", 1);
    // A now has every partition: records to any of them reach it.
    let mut p = Command::new(kcat)
        .args([
            "-b", &bootstrap, "-P", "-t", "split", "-X", "acks=all", "-K", ":",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let records: String = (0..40).map(|i| format!("k{i}:v{i}\n")).collect();
    p.stdin
        .take()
        .unwrap()
        .write_all(records.as_bytes())
        .unwrap();
    assert!(p.wait().unwrap().success());
    std::thread::sleep(Duration::from_secs(3));
    terminate(&a);
    let out = a.wait_with_output().unwrap();
    let got = String::from_utf8_lossy(&out.stdout);
    let partitions: std::collections::BTreeSet<&str> =
        got.lines().filter_map(|l| l.split(' ').nth(1)).collect();
    assert_eq!(got.lines().count(), 40, "{got}");
    assert!(
        partitions.len() > 1,
        "records from several partitions reached A: {partitions:?}"
    );
    passes(server);
}

/// Waits (20 s at most) until `group` is stable with `members` members.
fn stable_with(server: &Server, group: &str, members: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let want = Some((broker_sim::live::GroupState::Stable, members));
    while server
        .cluster()
        .group_view(group)
        .map(|(s, _, m)| (s, m.len()))
        != want
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{group} never stable with {members} members"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asks a child to stop as Ctrl-C would (kcat then leaves its group).
fn terminate(child: &std::process::Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}
