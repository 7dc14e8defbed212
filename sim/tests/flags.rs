//! Every flag family at its bounds: a value out of range is refused at
//! parse time with the range, a run that cannot finish says so as a limit
//! of the run, and the report fits an 80-column terminal.

mod common;

use common::sim;

fn refused(args: &[&str], needle: &str) {
    let (code, out, err) = sim(args);
    assert_eq!(code, 2, "{args:?} exits 2: {out}{err}");
    assert!(
        err.contains(needle),
        "{args:?}: wanted '{needle}' in: {err}"
    );
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

/// `(flag, min, max)` for every `[min..=max]` that `--help` shows.
fn ranges_in_help() -> Vec<(String, String, String)> {
    let (code, help, _) = sim(&["--help"]);
    assert_eq!(code, 0);
    let mut ranges = Vec::new();
    let mut flag = None;
    for line in help.lines() {
        let line = line.trim();
        if line.starts_with("--") {
            flag = line.split([' ', '=']).next().map(str::to_string);
        }
        if let (Some(f), Some(open)) = (&flag, line.rfind('[')) {
            if let Some((min, max)) = line[open + 1..]
                .strip_suffix(']')
                .and_then(|r| r.split_once("..="))
            {
                ranges.push((f.clone(), min.to_string(), max.to_string()));
            }
        }
    }
    ranges
}

#[test]
fn every_range_in_help_is_the_one_enforced() {
    let ranges = ranges_in_help();
    assert!(ranges.len() >= 19, "a range for every number: {ranges:?}");
    for (flag, min, max) in ranges {
        // Just past the top, far past it (where arithmetic would wrap), and
        // below the bottom, negative numbers in both spellings included.
        let above = if max.contains('.') || max == "1" {
            format!("{}.5", max.trim_end_matches(".0"))
        } else {
            (max.parse::<u64>().unwrap() + 1).to_string()
        };
        refused(&[&flag, &above], &format!("must be at most {max}"));
        refused(&[&flag, "18446744073709551615"], "must be at most");
        refused(&[&flag, "1e300"], "");
        let below = if min.contains('.') {
            "0".to_string()
        } else {
            "-5".to_string()
        };
        if min != "0" || below == "0" {
            refused(&[&flag, &below], &format!("must be at least {min}"));
            refused(
                &[&format!("{flag}={below}")],
                &format!("must be at least {min}"),
            );
        }
        refused(&[&flag, "-1"], "must be at least");
    }
}

#[test]
fn the_reported_overflows_are_refused_with_the_range() {
    for (args, needle) in [
        (&["--bandwidth-mb", "1e-300"][..], "must be at least 0.001"),
        (
            &["--latency-us", "18446744073709551615"],
            "must be at most 10000000",
        ),
        (&["--batch-bytes", "1e300"], "must be at most 1048576"),
        (
            &["--produce-timeout-ms", "18446744073709551615"],
            "must be at most 3600000",
        ),
        (
            &["--session-timeout-ms", "18446744073709551615"],
            "must be at most 3600000",
        ),
        (
            &["--fetch-max-wait-ms", "18446744073709551615"],
            "must be at most 3600000",
        ),
        (&["--duration-s", "-5"], "must be at least 0.001"),
        (&["--duration-s=-5"], "must be at least 0.001"),
        (&["--duration-s", "nan"], "must be a number"),
        (&["--produce-rate", "inf"], "must be at most 1000000"),
        (&["--brokers", "3.5"], "not a whole number"),
    ] {
        refused(args, needle);
    }
}

#[test]
fn sizes_beyond_the_model_are_refused_before_anything_is_allocated() {
    for (args, needle) in [
        (&["--consumers", "4294967295"][..], "must be at most 10000"),
        (&["--brokers", "100000"], "must be at most 100"),
        (&["--members", "100000000"], "must be at most 1000000"),
        (&["--partitions", "10000000"], "must be at most 100000"),
        (&["--produce-rate", "1e12"], "must be at most 1000000"),
    ] {
        refused(args, needle);
    }
}

#[test]
fn parameters_that_contradict_each_other_are_refused() {
    refused(
        &["--brokers", "2", "--replication-factor", "3"],
        "--replication-factor must be between 1 and the broker count (2)",
    );
    refused(
        &["--min-insync", "4"],
        "--min-insync must be between 1 and the replication factor (3)",
    );
    refused(
        &["--heartbeat-interval-ms", "10000"],
        "must be below --session-timeout-ms (10000)",
    );
}

#[test]
fn crashes_and_restarts_from_the_command_line_are_checked_and_run() {
    for (args, needle) in [
        (&["--crash", "1"][..], "'1' is not BROKER@SECONDS"),
        (&["--crash", "1@soon"], "'soon' is not a number"),
        (&["--crash", "100@3"], "broker '100': must be at most 99"),
        (&["--crash", "1@-3"], "must be at least 0"),
        (&["--crash", "1@90000"], "must be at most 86400"),
        (
            &["--crash", "5@3"],
            "the crashed broker 5 is not a broker (0..3)",
        ),
        (
            &["--restart", "1@3"],
            "broker 1 restarts at 3000 ms, but it is up then",
        ),
        (
            &["--crash", "1@3", "--restart", "1@4", "--restart", "1@5"],
            "broker 1 restarts at 5000 ms, but it is up then",
        ),
    ] {
        refused(args, needle);
    }
    // Two brokers in turn, each down for a while: every leadership moves
    // away and back.
    let (code, out, err) = sim(&[
        "--duration-s",
        "12",
        "--crash",
        "1@2",
        "--restart",
        "1@4.5",
        "--crash",
        "2@6",
        "--restart",
        "2@8",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("result: PASS"), "{out}");
    // Each leaves the ISR of all 32 partitions and rejoins it; the 21 they
    // lead move away and back, and some of broker 1's move twice more if
    // broker 2 goes down before they are back.
    assert!(out.contains("64 ISR shrinks, 64 expands"), "{out}");
    let moved: u64 = out
        .split(" expands, ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the leader changes");
    assert!(moved >= 42, "{out}");
}

#[test]
fn a_long_fetch_wait_is_drained_not_reported_as_lost() {
    let (code, out, err) = sim(&["--fetch-max-wait-ms", "180000", "--duration-s", "3"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("result: PASS"), "{out}");
    assert!(out.contains("at the end: watched 0, delayed 0"), "{out}");
}

#[test]
fn a_workload_the_brokers_cannot_keep_up_with_stops_at_the_in_flight_limit() {
    // 1 kB/s of replication: nothing is ever acknowledged, requests pile up.
    let (code, out, err) = sim(&[
        "--produce-rate",
        "1000000",
        "--acks-all-fraction",
        "1",
        "--bandwidth-mb",
        "0.001",
        "--duration-s",
        "3",
        "--members",
        "0",
        "--consumers",
        "0",
    ]);
    assert_eq!(code, 3, "a limit of the run exits 3: {out}{err}");
    assert!(out.contains("result: INCOMPLETE"), "{out}");
    assert!(out.contains("client requests in flight"), "{out}");
    assert!(out.contains("0 lost, 0 duplicated"), "{out}");
    assert!(!out.contains("FAILED"), "no check fails: {out}");
}

#[test]
fn the_report_fits_80_columns() {
    for scenario in ["default", "broker-crash"] {
        let (code, out, _) = sim(&["--scenario", scenario, "--duration-s", "12"]);
        assert_eq!(code, 0);
        for line in out.lines() {
            assert!(line.chars().count() <= 80, "{} columns: {line}", line.len());
        }
        assert!(out.contains("produce rate: 4000/s configured"), "{out}");
    }
}
