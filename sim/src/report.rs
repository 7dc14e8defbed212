//! The run's report: a readable one for people, one JSON object for tools.

use crate::config::Config;
use crate::stats::{Check, Stats, TypeStats};
use serde_json::{json, Value};
use std::fmt::Write;
use std::time::Duration;

fn latency_json(t: &TypeStats) -> Value {
    json!({
        "p50": t.percentile_ms(0.50),
        "p99": t.percentile_ms(0.99),
        "p999": t.percentile_ms(0.999),
        "max": t.max_ms(),
    })
}

fn type_json(t: &TypeStats) -> Value {
    json!({
        "sent": t.sent,
        "completed": t.completed,
        "expired": t.expired,
        "errored": t.errored,
        "latency_ms": latency_json(t),
    })
}

/// The JSON report: one object. Its fields: `scenario`, `seed`, `timer`,
/// `clock`; `produce`, `fetch` and `follower_fetch`, each with `sent`,
/// `completed`, `expired`, `errored` and `latency_ms` (`p50`, `p99`, `p999`,
/// `max`); `produce_rate` (`configured`, `achieved`, `arrivals`);
/// `arrivals_s`; `errors` (by request type, then Kafka error name: requests);
/// `retries`, `acks_one`; `group` and `replication` counts; `answered`,
/// `lost`, `duplicated`, `invariant_violations`, `violations_by_check`,
/// `violation_samples`; `result` (`pass`, `fail` or `incomplete`), `limits`
/// (what cut the run short) and `cut_off`; `purgatory` sizes;
/// `simulated_s` and `wall_s`.
pub fn json(cfg: &Config, stats: &Stats, wall: Duration) -> Value {
    let checks: serde_json::Map<String, Value> = Check::ALL
        .iter()
        .map(|c| {
            (
                c.key().to_string(),
                json!(stats.violations_by_check[*c as usize]),
            )
        })
        .collect();
    let mut errors = serde_json::Map::new();
    for ((kind, error), n) in &stats.errors {
        let by_kind = errors
            .entry(kind.replace(' ', "_"))
            .or_insert_with(|| json!({}));
        by_kind[*error] = json!(n);
    }
    json!({
        "scenario": cfg.scenario,
        "seed": cfg.seed,
        "timer": cfg.timer.name(),
        "clock": cfg.clock.name(),
        "produce": type_json(&stats.produce),
        "fetch": type_json(&stats.fetch),
        "follower_fetch": type_json(&stats.follower_fetch),
        "retries": stats.retries,
        "acks_one": stats.acks_one,
        "group": {
            "members": cfg.members,
            "heartbeats": stats.heartbeats,
            "sessions_expired": stats.sessions_expired,
            "sessions_left": stats.sessions_left,
            "sessions_moved": stats.sessions_moved,
        },
        "produce_rate": {
            "configured": cfg.produce_rate,
            "achieved": stats.achieved_produce_rate(),
            "arrivals": stats.produce_arrivals,
        },
        "arrivals_s": stats.arrivals_ended_us as f64 / 1e6,
        "errors": errors,
        "replication": {
            "isr_shrinks": stats.isr_shrinks,
            "isr_expands": stats.isr_expands,
            "leader_changes": stats.leader_changes,
            "cancelled_by_key": stats.cancelled,
        },
        "answered": stats.answered_once(),
        "lost": stats.lost(),
        "duplicated": stats.duplicated(),
        "invariant_violations": stats.violations,
        "result": match Verdict::of(stats) {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Incomplete => "incomplete",
        },
        "limits": stats.limits,
        "cut_off": stats.cut_off,
        "violations_by_check": checks,
        "violation_samples": stats.violation_samples,
        "purgatory": {
            "max_watched": stats.max_watched,
            "max_delayed": stats.max_delayed,
            "watched_at_end": stats.watched_at_end,
            "delayed_at_end": stats.delayed_at_end,
        },
        "simulated_s": stats.elapsed_us as f64 / 1e6,
        "wall_s": wall.as_secs_f64(),
    })
}

/// The run's verdict: a failed check outranks a limit of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every check held and the run did all it was configured to do.
    Pass,
    /// A check failed: the purgatory (or the model) is wrong.
    Fail,
    /// Every check held, but the run hit one of its own limits
    /// ([`Stats::limits`]) and did less than configured.
    Incomplete,
}

impl Verdict {
    /// The verdict of a run that counted `stats`.
    pub fn of(stats: &Stats) -> Verdict {
        match (stats.violations, stats.limits.is_empty()) {
            (0, true) => Verdict::Pass,
            (0, false) => Verdict::Incomplete,
            _ => Verdict::Fail,
        }
    }

    /// The process exit status: 0, 1 or 3 (2 is a configuration refused
    /// before running).
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Pass => 0,
            Verdict::Fail => 1,
            Verdict::Incomplete => 3,
        }
    }
}

/// The human report, at most 80 columns wide. Everything but the last line
/// is the same for the same seed; the last line has the wall-clock time.
pub fn human(cfg: &Config, stats: &Stats, wall: Duration) -> String {
    let mut out = String::new();
    let time = match cfg.clock {
        crate::config::ClockChoice::Sim => "simulated",
        crate::config::ClockChoice::Real => "real",
    };
    let _ = writeln!(
        out,
        "broker-sim: scenario {}, seed {}, timer {}, clock {}",
        cfg.scenario,
        cfg.seed,
        cfg.timer.name(),
        cfg.clock.name()
    );
    let _ = writeln!(
        out,
        "cluster: {} brokers, {} partitions, replication factor {}, min.insync {}",
        cfg.brokers, cfg.partitions, cfg.replication_factor, cfg.min_insync,
    );
    let _ = writeln!(
        out,
        "time: {:.1} s of arrivals, drained at {:.1} s of {time} time",
        stats.arrivals_ended_us as f64 / 1e6,
        stats.elapsed_us as f64 / 1e6
    );
    let _ = writeln!(
        out,
        "produce rate: {:.0}/s configured, {:.0}/s achieved ({} arrivals)",
        cfg.produce_rate,
        stats.achieved_produce_rate(),
        stats.produce_arrivals
    );
    let types = [
        ("produce", &stats.produce),
        ("fetch", &stats.fetch),
        ("follower fetch", &stats.follower_fetch),
    ];
    let _ = writeln!(out);
    let row = |out: &mut String, cells: [&dyn std::fmt::Display; 5]| {
        let _ = writeln!(
            out,
            "{:<15}{:>12}{:>12}{:>12}{:>12}",
            cells[0], cells[1], cells[2], cells[3], cells[4]
        );
    };
    row(
        &mut out,
        [&"requests", &"sent", &"completed", &"expired", &"errored"],
    );
    for (name, t) in types {
        row(
            &mut out,
            [&name, &t.sent, &t.completed, &t.expired, &t.errored],
        );
    }
    let _ = writeln!(out);
    row(&mut out, [&"latency ms", &"p50", &"p99", &"p99.9", &"max"]);
    for (name, t) in types {
        let ms = |v: f64| format!("{v:.2}");
        row(
            &mut out,
            [
                &name,
                &ms(t.percentile_ms(0.5)),
                &ms(t.percentile_ms(0.99)),
                &ms(t.percentile_ms(0.999)),
                &ms(t.max_ms()),
            ],
        );
    }
    if !stats.errors.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "errors (requests, by request type and error):");
        for ((kind, error), n) in &stats.errors {
            let _ = writeln!(out, "  {:<16}{:<34}{n:>10}", kind, error);
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "produce: {:.0}% acks=all, {} retries; {} acks=1 answered at once",
        cfg.acks_all_fraction * 100.0,
        stats.retries,
        stats.acks_one
    );
    let _ = writeln!(
        out,
        "group: {} members; {} heartbeats pushed a session back",
        cfg.members, stats.heartbeats
    );
    let _ = writeln!(
        out,
        "sessions: {} expired, {} left, {} moved with the coordinator",
        stats.sessions_expired, stats.sessions_left, stats.sessions_moved
    );
    let _ = writeln!(
        out,
        "replication: {} ISR shrinks, {} expands, {} leader changes",
        stats.isr_shrinks, stats.isr_expands, stats.leader_changes
    );
    let _ = writeln!(
        out,
        "cancel_for_key: {} operations answered NOT_LEADER at once",
        stats.cancelled
    );
    let _ = writeln!(
        out,
        "purgatories: peak watched {}, peak delayed {}",
        stats.max_watched, stats.max_delayed
    );
    let _ = writeln!(
        out,
        "at the end: watched {}, delayed {}",
        stats.watched_at_end, stats.delayed_at_end
    );
    let answered = stats.answered_once();
    let per_s = answered as f64 / (stats.elapsed_us.max(1) as f64 / 1e6);
    let _ = writeln!(
        out,
        "throughput: {answered} answered, {per_s:.0} per second of {time} time"
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "checks:");
    for check in Check::ALL {
        let n = stats.violations_by_check[check as usize];
        let verdict = if n == 0 {
            "ok".to_string()
        } else {
            format!("FAILED ({n})")
        };
        let _ = writeln!(out, "  {verdict:<12} {}", check.describe());
    }
    let _ = writeln!(
        out,
        "  ({} answered exactly once, {} lost, {} duplicated)",
        answered,
        stats.lost(),
        stats.duplicated()
    );
    if stats.cut_off > 0 {
        let _ = writeln!(
            out,
            "  ({} still pending at the drain limit, answered by the shutdown)",
            stats.cut_off
        );
    }
    for sample in &stats.violation_samples {
        let _ = writeln!(out, "  violation: {sample}");
    }
    match Verdict::of(stats) {
        Verdict::Pass => {
            let _ = writeln!(out, "result: PASS");
        }
        Verdict::Fail => {
            let _ = writeln!(
                out,
                "result: FAIL ({} invariant violations)",
                stats.violations
            );
        }
        Verdict::Incomplete => {
            let _ = writeln!(
                out,
                "result: INCOMPLETE, a limit of the run, not a failed check:"
            );
            for limit in &stats.limits {
                let _ = writeln!(out, "  {limit}");
            }
        }
    }
    let _ = writeln!(out, "wall time: {:.2} s", wall.as_secs_f64());
    out
}
