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

/// The JSON report: one object, the fields listed in the README.
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
        },
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

/// The human report. Everything but the last line is the same for the same
/// seed; the last line has the wall-clock time.
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
        "cluster: {} brokers, {} partitions, replication factor {}, min.insync {}; {:.1} s of arrivals, \
         drained at {:.1} s of {time} time",
        cfg.brokers,
        cfg.partitions,
        cfg.replication_factor,
        cfg.min_insync,
        cfg.duration.as_secs_f64(),
        stats.elapsed_us as f64 / 1e6
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<15}{:>9}{:>11}{:>9}{:>9}{:>10}{:>10}{:>10}{:>10}",
        "requests",
        "sent",
        "completed",
        "expired",
        "errored",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms"
    );
    for (name, t) in [
        ("produce", &stats.produce),
        ("fetch", &stats.fetch),
        ("follower fetch", &stats.follower_fetch),
    ] {
        let _ = writeln!(
            out,
            "{:<15}{:>9}{:>11}{:>9}{:>9}{:>10.2}{:>10.2}{:>10.2}{:>10.2}",
            name,
            t.sent,
            t.completed,
            t.expired,
            t.errored,
            t.percentile_ms(0.5),
            t.percentile_ms(0.99),
            t.percentile_ms(0.999),
            t.max_ms()
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "produce: {:.0}% acks=all; {} acks=1 answered without the purgatory; {} retries",
        cfg.acks_all_fraction * 100.0,
        stats.acks_one,
        stats.retries
    );
    let _ = writeln!(
        out,
        "group: {} members, {} heartbeats pushed a session back, {} sessions expired, {} left",
        cfg.members, stats.heartbeats, stats.sessions_expired, stats.sessions_left
    );
    let _ = writeln!(
        out,
        "replication: {} ISR shrinks, {} ISR expands, {} leader changes, {} operations cancelled by key",
        stats.isr_shrinks, stats.isr_expands, stats.leader_changes, stats.cancelled
    );
    let _ = writeln!(
        out,
        "purgatories: peak watched {}, peak delayed {}; at the end watched {}, delayed {}",
        stats.max_watched, stats.max_delayed, stats.watched_at_end, stats.delayed_at_end
    );
    let answered = stats.answered_once();
    let per_s = answered as f64 / (stats.elapsed_us.max(1) as f64 / 1e6);
    let _ = writeln!(
        out,
        "throughput: {answered} requests answered, {per_s:.0} per second of {time} time"
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
        let _ = writeln!(out, "  {:<88} {verdict}", check.describe());
    }
    let _ = writeln!(
        out,
        "  ({} answered exactly once, {} lost, {} duplicated)",
        answered,
        stats.lost(),
        stats.duplicated()
    );
    for sample in &stats.violation_samples {
        let _ = writeln!(out, "  violation: {sample}");
    }
    let verdict = if stats.violations == 0 {
        "PASS"
    } else {
        "FAIL"
    };
    let _ = writeln!(
        out,
        "result: {verdict} ({} invariant violations)",
        stats.violations
    );
    let _ = writeln!(out, "wall time: {:.2} s", wall.as_secs_f64());
    out
}
