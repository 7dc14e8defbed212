//! The command line: exit codes and messages a user sees.

mod common;

use common::sim;

#[test]
fn bad_flags_and_impossible_clusters_exit_2_with_a_message() {
    for (args, needle) in [
        (vec!["--replication-factor", "5"], "replication-factor"),
        (vec!["--min-insync", "9"], "min-insync"),
        (vec!["--produce-rate=-3"], "produce-rate"),
        (vec!["--scenario", "no-such"], "unknown scenario"),
        (vec!["--timer", "heap"], "invalid value"),
    ] {
        let (code, _, err) = sim(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
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
    ] {
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
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("result: PASS"), "{out}");
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
