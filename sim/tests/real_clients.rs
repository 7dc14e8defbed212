//! Unmodified Kafka clients against the served cluster: kcat (librdkafka)
//! and confluent-kafka for Python (its wheel bundles librdkafka). Each test
//! says it was skipped, and why, when its client is not installed here
//! (`.ci/run` installs both); nothing else fails then.

use broker_sim::config::Fault;
use broker_sim::live::LiveConfig;
use broker_sim::serve::{ServeOptions, Server};
use broker_sim::wire::Limits;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

fn start(live: LiveConfig, topics: &[(&str, u32)]) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        live,
        topics: topics.iter().map(|(n, p)| (n.to_string(), *p)).collect(),
        limits: Limits::default(),
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
    let found = Command::new("python3")
        .args(["-c", "import confluent_kafka"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!(
            "skipped: python3 with confluent-kafka is not installed (PyPI 'confluent-kafka'; .ci/run installs it)"
        );
    }
    found
}

/// Runs the confluent-kafka client script; its JSON line.
fn confluent_client(args: &[&str]) -> serde_json::Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/confluent_client.py"
    );
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn kcat_produces_with_acks_all_and_reads_back_every_record() {
    let Some(kcat) = kcat() else { return };
    let server = start(LiveConfig::default(), &[("orders", 3)]);
    let lines: Vec<String> = (0..300).map(|i| format!("order-{i}")).collect();
    let mut producer = Command::new(kcat)
        .args([
            "-b",
            &bootstrap(&server),
            "-P",
            "-t",
            "orders",
            "-X",
            "acks=all",
        ])
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
    // Every partition, from the start to the end.
    let consumed = Command::new(kcat)
        .args(["-b", &bootstrap(&server), "-C", "-t", "orders", "-e", "-q"])
        .args(["-f", "%s\n"])
        .output()
        .unwrap();
    assert!(consumed.status.success());
    let mut read: Vec<String> = String::from_utf8_lossy(&consumed.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    read.sort();
    let mut want = lines.clone();
    want.sort();
    assert_eq!(read, want);
    let checks = &server.cluster().checks;
    assert_eq!(
        checks
            .acked_records
            .load(std::sync::atomic::Ordering::Relaxed),
        300
    );
    passes(server);
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

#[test]
fn after_a_leader_crashes_clients_retry_on_the_new_leader_and_nothing_acknowledged_is_lost() {
    if !confluent() {
        return;
    }
    let crash_at = Duration::from_millis(1500);
    let server = start(
        LiveConfig {
            faults: vec![Fault::Crash {
                broker: 1,
                at: crash_at,
            }],
            ..LiveConfig::default()
        },
        &[("crashy", 6)],
    );
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
fn acks_all_to_a_lagging_follower_times_out_at_the_request_timeout() {
    if !confluent() {
        return;
    }
    let server = start(
        LiveConfig {
            faults: vec![Fault::SlowFollower {
                broker: 1,
                from: Duration::ZERO,
                until: Duration::from_secs(3600),
                delay: Duration::from_secs(60),
            }],
            replica_lag: Duration::from_secs(3600),
            ..LiveConfig::default()
        },
        &[("slow", 1)],
    );
    let r = confluent_client(&["timeout", &bootstrap(&server), "slow", "800"]);
    assert_eq!(r["error"], "REQUEST_TIMED_OUT", "{r}");
    assert!(r["seconds"].as_f64().unwrap() >= 0.8, "{r}");
    let checks = &server.cluster().checks;
    assert!(checks.expired.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    passes(server);
}
