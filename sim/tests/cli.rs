//! The command line: exit codes and messages a user sees.

mod common;
mod pki;

use common::sim;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};

/// Starts `command` (the binary, serving) with its output piped; the
/// process, its output, and the first line of it (broker 0's address).
fn serving(mut command: Command) -> (Child, BufReader<ChildStdout>, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    (child, out, first)
}

/// Waits for a process from [`serving`] to end: its status, the rest of
/// its output, and its error output.
fn ended(mut child: Child, mut out: BufReader<ChildStdout>) -> (ExitStatus, String, String) {
    let status = child.wait().unwrap();
    let (mut rest, mut err) = (String::new(), String::new());
    out.read_to_string(&mut rest).unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, rest, err)
}

#[test]
fn bad_flags_and_impossible_clusters_exit_2_with_a_message() {
    for (args, needle) in [
        (vec!["--replication-factor", "5"], "replication-factor"),
        (vec!["--min-insync", "9"], "min-insync"),
        (vec!["--produce-rate=-3"], "produce-rate"),
        (vec!["--scenario", "no-such"], "unknown scenario"),
        (vec!["--timer", "heap"], "invalid value"),
        (
            vec!["--random-faults", "1", "--crash", "1@2"],
            "cannot be used with",
        ),
        (
            vec!["--random-faults", "1", "--scenario", "broker-crash"],
            "crashes brokers itself",
        ),
        (vec!["--random-faults", "x"], "invalid value"),
        (
            vec![
                "--random-faults",
                "1",
                "--brokers",
                "1",
                "--replication-factor",
                "1",
            ],
            "at least 2 brokers",
        ),
    ] {
        let (code, _, err) = sim(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn fewer_brokers_cap_the_replication_defaults_but_not_values_given() {
    for cluster in [
        &["--brokers", "1"][..],
        &["--brokers", "2"],
        &["--brokers", "2", "--replication-factor", "1"],
    ] {
        let args = [cluster, &["--duration-s", "2"]].concat();
        let (code, out, err) = sim(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains("result: PASS"), "{args:?}: {out}");
    }
    let (code, _, err) = sim(&["--brokers", "1", "--min-insync", "2"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("replication factor (1), got 2"), "{err}");
}

#[test]
fn serve_refuses_what_it_cannot_run() {
    for (args, needle) in [
        (
            vec!["--serve", "--clock", "sim"],
            "--clock sim cannot be served",
        ),
        (vec!["--serve", "--topic", "orders"], "NAME:PARTITIONS"),
        (vec!["--serve", "--topic", "orders:0"], "from 1 to 10000"),
        (
            vec!["--serve", "--topic", "bad/name:3"],
            "not a valid topic name",
        ),
        (
            vec!["--serve", "--max-request-bytes", "10"],
            "max-request-bytes",
        ),
        (vec!["--listen", "127.0.0.1:0"], "--serve"),
        (vec!["--advertise", "localhost"], "--serve"),
        (vec!["--serve", "--listen", "0.0.0.0:0"], "--advertise HOST"),
        (
            vec!["--serve", "--advertise", "0.0.0.0"],
            "not an address clients can connect to",
        ),
        (
            vec!["--serve", "--log-memory-bytes", "1000"],
            "must be at least 1048576",
        ),
        (
            vec!["--serve", "--random-faults", "1"],
            "needs --duration-s",
        ),
        (vec!["--serve", "--super-user", "admin"], "--authorizer"),
        (vec!["--serve", "--sasl-reauth-ms", "1000"], "--sasl-user"),
        (
            vec!["--serve", "--allow-everyone-if-no-acl-found"],
            "--authorizer",
        ),
        (
            vec!["--serve", "--authorizer", "--super-user", "User:"],
            "the name may not be empty",
        ),
        (
            vec!["--serve", "--group-migration-policy", "sideways"],
            "one of disabled, upgrade, downgrade, bidirectional",
        ),
        (vec!["--group-migration-policy", "upgrade"], "--serve"),
        (vec!["--serve", "--group-max-size", "0"], "--group-max-size"),
        (
            vec!["--serve", "--group-consumer-max-size", "2147483648"],
            "--group-consumer-max-size",
        ),
        (
            vec!["--serve", "--group-share-max-size", "1001"],
            "--group-share-max-size",
        ),
    ] {
        let (code, _, err) = sim(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn serve_over_tls_says_so_and_refuses_files_it_cannot_use() {
    let pki = pki::Authority::new("test CA");
    let broker = pki.broker();
    let client = pki.client("client", &[(rcgen::DnType::CommonName, "client")]);
    let (cert, key, ca) = (
        broker.cert.to_str().unwrap(),
        broker.key.to_str().unwrap(),
        pki.ca.to_str().unwrap(),
    );
    let missing = pki.path("missing.pem");
    let missing = missing.to_str().unwrap();
    let serve = ["--serve", "--listen", "127.0.0.1:0", "--no-sim-traffic"];
    for (args, needle) in [
        (vec!["--tls-cert", cert], "--tls-key"),
        (vec!["--tls-key", key], "--tls-cert"),
        (vec!["--tls-cert", missing, "--tls-key", key], missing),
        (
            vec!["--tls-cert", cert, "--tls-key", ca],
            "wanted a PEM private key",
        ),
        (
            vec![
                "--tls-cert",
                cert,
                "--tls-key",
                client.key.to_str().unwrap(),
            ],
            "TLS cannot be set up",
        ),
        (
            vec![
                "--tls-cert",
                cert,
                "--tls-key",
                key,
                "--tls-client-auth",
                "required",
            ],
            "needs the CA certificates",
        ),
        (
            vec!["--tls-cert", cert, "--tls-key", key, "--tls-client-ca", ca],
            "none are asked for",
        ),
        (
            vec![
                "--tls-cert",
                cert,
                "--tls-key",
                key,
                "--tls-client-auth",
                "sometimes",
            ],
            "one of none, requested, required",
        ),
        (
            vec![
                "--tls-cert",
                cert,
                "--tls-key",
                key,
                "--tls-principal-mapping-rules",
                "RULE:^CN=(.*)$",
            ],
            "RULE:pattern/replacement/",
        ),
    ] {
        let args: Vec<&str> = serve.iter().copied().chain(args).collect();
        let (code, _, err) = sim(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let tls = [
        "--tls-cert",
        cert,
        "--tls-key",
        key,
        "--tls-client-auth",
        "requested",
        "--tls-client-ca",
        ca,
        "--duration-s",
        "0.5",
    ];
    let args: Vec<&str> = serve.iter().chain(&tls).copied().collect();
    let (code, out, err) = sim(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("listeners: SSL; client certificates requested"),
        "{out}"
    );
    let sasl = ["--sasl-user", "alice:secret"];
    let args: Vec<&str> = serve.iter().chain(&tls).chain(&sasl).copied().collect();
    let (code, out, err) = sim(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("listeners: SASL_SSL (PLAIN"), "{out}");
}

#[test]
fn serve_over_tls_reads_pkcs12_stores_and_encrypted_keys_and_says_what_does_not_open() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/keystores");
    let file = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let (p12, jks, chain, aes) = (
        file("broker-keytool.p12"),
        file("broker.jks"),
        file("broker.pem"),
        file("broker-aes.key"),
    );
    let trust = file("truststore-keytool.p12");
    let serve = ["--serve", "--listen", "127.0.0.1:0", "--no-sim-traffic"];
    let ok = |args: &[&str], said: &str| {
        let args: Vec<&str> = serve
            .iter()
            .chain(args)
            .chain(&["--duration-s", "0.5"])
            .copied()
            .collect();
        let (code, out, err) = sim(&args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        assert!(out.contains(said), "{args:?}: {out}");
    };
    ok(
        &[
            "--tls-keystore",
            &p12,
            "--tls-keystore-password",
            "store-secret",
        ],
        "listeners: SSL",
    );
    ok(
        &[
            "--tls-cert",
            &chain,
            "--tls-key",
            &aes,
            "--tls-key-password",
            "key-secret",
            "--tls-client-auth",
            "required",
            "--tls-truststore",
            &trust,
            "--tls-truststore-password",
            "trust-secret",
        ],
        "listeners: SSL; client certificates required",
    );
    for (args, needle) in [
        (vec!["--tls-keystore", &p12], "--tls-keystore-password"),
        (
            vec!["--tls-keystore", &p12, "--tls-keystore-password", "guess"],
            "password is wrong",
        ),
        (
            vec![
                "--tls-keystore",
                &jks,
                "--tls-keystore-password",
                "store-secret",
            ],
            "keytool -importkeystore",
        ),
        (
            vec!["--tls-cert", &chain, "--tls-key", &aes],
            "encrypted and no password",
        ),
        (
            vec![
                "--tls-cert",
                &chain,
                "--tls-key",
                &aes,
                "--tls-key-password",
                "guess",
            ],
            "does not decrypt",
        ),
        (
            vec![
                "--tls-keystore",
                &p12,
                "--tls-keystore-password",
                "store-secret",
                "--tls-cert",
                &chain,
            ],
            "cannot be used with",
        ),
        (
            vec![
                "--tls-keystore",
                &p12,
                "--tls-keystore-password",
                "store-secret",
                "--tls-client-auth",
                "required",
                "--tls-truststore",
                &trust,
            ],
            "--tls-truststore-password",
        ),
        (vec!["--tls-key-password", "x"], "--tls-key"),
    ] {
        let args: Vec<&str> = serve.iter().copied().chain(args).collect();
        let (code, _, err) = sim(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn serve_prints_its_ports_and_a_passing_report_at_the_end_of_its_duration() {
    let (code, out, err) = sim(&["--serve", "--listen", "127.0.0.1:0", "--duration-s", "0.5"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.matches("listening on 127.0.0.1:").count(), 3, "{out}");
    // The simulated traffic's report and the wire's, both passing.
    assert!(out.contains("result: PASS"), "{out}");
    assert!(out.contains("PASS: every parked request"), "{out}");
    let (code, out, err) = sim(&[
        "--serve",
        "--listen",
        "127.0.0.1:0",
        "--duration-s",
        "0.5",
        "--no-sim-traffic",
        "--log-memory-bytes",
        "1073741824",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("result: PASS"), "{out}");
    assert!(
        out.contains("logs in memory: at most 1024.0 MiB over all partitions"),
        "{out}"
    );
    // On every address, with the one clients are told.
    let (code, out, err) = sim(&[
        "--serve",
        "--listen",
        "0.0.0.0:0",
        "--advertise",
        "localhost",
        "--duration-s",
        "0.5",
        "--no-sim-traffic",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out.matches(", advertised as localhost:").count(),
        3,
        "{out}"
    );
}

/// The README's `--serve`, as typed: no duration, simulated traffic beside
/// the real clients, stopped by a signal. Both reports pass and it exits 0.
#[test]
fn serve_without_a_duration_runs_its_simulated_traffic_until_the_signal() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_broker-sim"));
    command.args(["--serve", "--listen", "127.0.0.1:0"]);
    let (child, out, first) = serving(command);
    assert!(first.contains("listening on"), "{first}");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let (status, rest, err) = ended(child, out);
    assert_eq!(status.code(), Some(0), "{rest}{err}");
    assert!(rest.contains("simulated traffic beside"), "{rest}{err}");
    assert!(rest.contains("result: PASS"), "{rest}{err}");
    assert!(rest.contains("PASS: every parked request"), "{rest}{err}");
}

#[test]
fn serve_fences_a_crashed_broker_after_kafkas_session_timeout_unless_told_otherwise() {
    // Broker 1 leads one of the three partitions and crashes 0.5 s into a
    // 2 s run: within Kafka's 9 s it is not fenced, so that partition keeps
    // its leader; fenced at the crash, it moves.
    for (window, moved) in [(None, "0"), (Some("0"), "1")] {
        let mut args = vec![
            "--serve",
            "--listen",
            "127.0.0.1:0",
            "--no-sim-traffic",
            "--topic",
            "t:3",
            "--crash",
            "1@0.5",
            "--duration-s",
            "2",
        ];
        args.extend(
            window
                .map(|w| ["--broker-session-timeout-ms", w])
                .iter()
                .flatten(),
        );
        let (code, out, err) = sim(&args);
        assert_eq!(code, 0, "{out}{err}");
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with("partition leaders moved"))
            .unwrap_or_else(|| panic!("no leader count: {out}"));
        assert_eq!(
            line.split_whitespace().last(),
            Some(moved),
            "{window:?}: {out}"
        );
    }
}

/// With its file descriptors used up, the listener pauses between
/// accepts (rather than spinning a core on the failure) and says so at most
/// once a second; once connections close, it accepts again.
#[test]
fn out_of_file_descriptors_the_listener_pauses_and_recovers() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    let mut command = Command::new("sh");
    command
        .args(["-c", "ulimit -n 80 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_broker-sim"))
        .args(["--serve", "--listen", "127.0.0.1:0", "--duration-s", "4"])
        .arg("--no-sim-traffic");
    let (child, out, first) = serving(command);
    let addr = first.trim().rsplit(' ').next().unwrap().to_string();
    let open: Vec<TcpStream> = (0..120)
        .map(|_| TcpStream::connect(&addr).expect("the backlog takes it"))
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    drop(open);
    // ApiVersions v0 on a new connection is answered.
    let mut c = TcpStream::connect(&addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(3)))
        .unwrap();
    let mut request = Vec::new();
    request.extend_from_slice(&18i16.to_be_bytes()); // ApiVersions
    request.extend_from_slice(&0i16.to_be_bytes()); // v0
    request.extend_from_slice(&7i32.to_be_bytes()); // its correlation id
    request.extend_from_slice(&(-1i16).to_be_bytes()); // no client id
    c.write_all(&(request.len() as i32).to_be_bytes()).unwrap();
    c.write_all(&request).unwrap();
    let mut size = [0u8; 4];
    c.read_exact(&mut size).expect("answered after the pause");
    drop(c);
    let (status, _, err) = ended(child, out);
    let warnings = err.matches("accept failed").count();
    assert!((1..=6).contains(&warnings), "{warnings} warnings: {err}");
    assert!(status.success(), "{err}");
}

#[test]
fn list_scenarios_names_every_scenario() {
    let (code, out, _) = sim(&["--list-scenarios"]);
    assert_eq!(code, 0);
    for name in [
        "default",
        "slow-follower",
        "broker-crash",
        "idle-fetch",
        "heartbeats",
        "overload",
    ] {
        assert!(out.contains(name), "{name} missing");
    }
}

#[test]
fn a_short_run_prints_json_with_the_documented_fields() {
    let (code, out, err) = sim(&["--duration-s", "2", "--json", "--timer", "delayqueue"]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    for field in [
        "scenario",
        "seed",
        "timer",
        "clock",
        "produce",
        "fetch",
        "answered",
        "lost",
        "duplicated",
        "invariant_violations",
        "purgatory",
        "wall_s",
    ] {
        assert!(json.get(field).is_some(), "{field} missing");
    }
    for field in ["sent", "completed", "expired", "errored"] {
        assert!(json["produce"][field].is_u64() && json["fetch"][field].is_u64());
    }
    for q in ["p50", "p99", "p999", "max"] {
        assert!(json["fetch"]["latency_ms"][q].is_f64(), "{q}");
    }
    for field in [
        "max_watched",
        "max_delayed",
        "watched_at_end",
        "delayed_at_end",
    ] {
        assert!(json["purgatory"][field].is_u64(), "{field}");
    }
    assert_eq!(json["timer"], "delayqueue");
}

/// Random faults print the flags that repeat them, and a run with them
/// gives the same report as one with those flags; brokers crash and leaders
/// move, and every check holds.
#[test]
fn random_faults_are_printed_as_flags_that_repeat_the_run() {
    let (code, out, err) = sim(&["--random-faults", "5", "--duration-s", "12"]);
    assert_eq!(code, 0, "{out}{err}");
    let flags = err
        .lines()
        .find_map(|l| l.strip_prefix("random faults: "))
        .unwrap_or_else(|| panic!("no faults printed: {err}"));
    assert!(
        flags.contains("--crash") && flags.contains("--restart"),
        "{flags}"
    );
    let leader_changes: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("replication: "))
        .and_then(|l| l.split(", ").nth(2))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no leader changes: {out}"));
    assert!(leader_changes > 0, "{out}");
    let mut again = vec!["--duration-s", "12"];
    again.extend(flags.split_whitespace());
    let (code, replayed, err) = sim(&again);
    assert_eq!(code, 0, "{replayed}{err}");
    let report = |out: &str| {
        out.lines()
            .filter(|l| !l.starts_with("wall time"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(report(&out), report(&replayed));
}
