//! Every scenario in simulated time, on both timers: all checks pass, the
//! same seed gives the same result, and the two timers agree.

use broker_sim::config::{ClockChoice, Config, Fault, TimerChoice};
use broker_sim::scenario::{scenario, SCENARIOS};
use broker_sim::{report, run};
use std::time::Duration;

fn outcome(cfg: &Config) -> serde_json::Value {
    let result = run(cfg, None).expect("valid scenario");
    let mut json = report::json(cfg, &result.stats, result.wall);
    let map = json.as_object_mut().expect("an object");
    map.remove("wall_s");
    map.remove("timer");
    json
}

fn assert_passes(json: &serde_json::Value, what: &str) {
    assert_eq!(json["invariant_violations"], 0, "{what}: {json:#}");
    assert_eq!(json["lost"], 0, "{what}");
    assert_eq!(json["duplicated"], 0, "{what}");
    assert_eq!(json["purgatory"]["watched_at_end"], 0, "{what}");
    assert_eq!(json["purgatory"]["delayed_at_end"], 0, "{what}");
    let produce = &json["produce"];
    let answered = produce["completed"].as_u64().unwrap()
        + produce["expired"].as_u64().unwrap()
        + produce["errored"].as_u64().unwrap();
    assert_eq!(
        answered,
        produce["sent"].as_u64().unwrap(),
        "{what}: every produce answered"
    );
}

#[test]
fn every_scenario_passes_on_both_timers_and_they_agree() {
    for s in SCENARIOS {
        let mut cfg = scenario(s.name).unwrap();
        let wheel = outcome(&cfg);
        assert_passes(&wheel, s.name);
        cfg.timer = TimerChoice::DelayQueue;
        let baseline = outcome(&cfg);
        assert_passes(&baseline, s.name);
        assert_eq!(wheel, baseline, "{}: the timers disagree", s.name);
    }
}

#[test]
fn a_run_keeps_no_record_of_requests_its_clients_have_answers_for() {
    // The harness keeps what a request is about only while it is in
    // flight, so a long run's memory stays flat.
    for name in ["default", "broker-crash"] {
        let result = run(&scenario(name).unwrap(), None).expect("valid scenario");
        let stats = &result.stats;
        assert!(stats.opened > 100_000, "{name}: {} requests", stats.opened);
        assert_eq!(stats.open.len(), 0, "{name}: records left after the run");
        assert_eq!(stats.answered_once(), stats.opened, "{name}");
    }
}

#[test]
fn the_scenarios_show_what_they_are_about() {
    let run_json = |name: &str| outcome(&scenario(name).unwrap());
    let crash = run_json("broker-crash");
    assert!(crash["replication"]["leader_changes"].as_u64().unwrap() > 0);
    assert!(crash["replication"]["cancelled_by_key"].as_u64().unwrap() > 0);
    // The dead broker leaves the ISR of every partition it was in.
    assert!(crash["replication"]["isr_shrinks"].as_u64().unwrap() >= 32);
    // Every partition the restarted broker led moved away when it died,
    // and back once it had caught up: twice the crash's leader changes.
    let restart = run_json("broker-restart");
    let leader_changes =
        |json: &serde_json::Value| json["replication"]["leader_changes"].as_u64().unwrap();
    assert_eq!(
        leader_changes(&restart),
        2 * leader_changes(&crash),
        "{restart}"
    );
    assert!(restart["replication"]["isr_expands"].as_u64().unwrap() >= 32);
    let slow = run_json("slow-follower");
    assert!(slow["replication"]["isr_shrinks"].as_u64().unwrap() > 0);
    assert!(slow["replication"]["isr_expands"].as_u64().unwrap() > 0);
    let idle = run_json("idle-fetch");
    // 200 consumers on 32 partitions: every one of them long-polls, about
    // once per max.wait (500 ms) for 30 s.
    assert!(
        idle["fetch"]["sent"].as_u64().unwrap() >= 200 * 55,
        "{idle}"
    );
    assert!(
        idle["fetch"]["expired"].as_u64().unwrap() > idle["fetch"]["completed"].as_u64().unwrap()
    );
    let beats = run_json("heartbeats");
    assert!(beats["group"]["sessions_expired"].as_u64().unwrap() > 0);
    assert!(beats["group"]["heartbeats"].as_u64().unwrap() > 1000);
    let overload = run_json("overload");
    assert!(overload["produce"]["expired"].as_u64().unwrap() > 0);
    assert!(
        overload["errors"]["produce"]["NOT_ENOUGH_REPLICAS"]
            .as_u64()
            .unwrap()
            > 0,
        "errors are reported by kind: {}",
        overload["errors"]
    );
    let default = run_json("default");
    let rate = &default["produce_rate"];
    let (configured, achieved) = (
        rate["configured"].as_f64().unwrap(),
        rate["achieved"].as_f64().unwrap(),
    );
    assert!(
        (achieved / configured - 1.0).abs() < 0.02,
        "the achieved rate follows the configured one: {rate}"
    );
}

#[test]
fn the_same_seed_gives_the_same_report_and_another_seed_another() {
    let mut cfg = scenario("default").unwrap();
    cfg.duration = Duration::from_secs(5);
    cfg.seed = 42;
    let a = run(&cfg, None).unwrap();
    let b = run(&cfg, None).unwrap();
    let strip = |text: String| {
        text.lines()
            .filter(|l| !l.starts_with("wall time"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        strip(report::human(&cfg, &a.stats, a.wall)),
        strip(report::human(&cfg, &b.stats, b.wall))
    );
    cfg.seed = 43;
    let c = run(&cfg, None).unwrap();
    assert_ne!(a.stats.produce.sent, c.stats.produce.sent);
}

#[test]
fn impossible_configurations_are_refused() {
    let base = Config::default();
    let cases: Vec<(&str, Config)> = vec![
        (
            "replication factor above brokers",
            Config {
                replication_factor: 4,
                ..base.clone()
            },
        ),
        (
            "min.insync above replication",
            Config {
                min_insync: 4,
                ..base.clone()
            },
        ),
        (
            "negative rate",
            Config {
                produce_rate: -1.0,
                ..base.clone()
            },
        ),
        (
            "fraction above one",
            Config {
                acks_all_fraction: 1.5,
                ..base.clone()
            },
        ),
        (
            "no partitions",
            Config {
                partitions: 0,
                ..base.clone()
            },
        ),
    ];
    for (what, cfg) in cases {
        assert!(run(&cfg, None).is_err(), "{what} was accepted");
    }
}

#[test]
fn real_time_runs_pass_their_checks_on_both_timers() {
    for timer in [TimerChoice::Wheel, TimerChoice::DelayQueue] {
        for name in ["default", "broker-crash", "broker-restart"] {
            let mut cfg = scenario(name).unwrap();
            cfg.clock = ClockChoice::Real;
            cfg.timer = timer;
            cfg.duration = Duration::from_secs(2);
            cfg.produce_rate = 1_000.0;
            // The crash (and the restart) must happen inside the short run.
            for fault in &mut cfg.faults {
                match fault {
                    Fault::Crash { at, .. } => *at = Duration::from_millis(700),
                    Fault::Restart { at, .. } => *at = Duration::from_millis(1_000),
                    _ => {}
                }
            }
            let json = outcome(&cfg);
            assert_passes(&json, name);
        }
    }
}

#[test]
fn the_group_follows_its_coordinator_to_the_next_broker_up_and_back() {
    let mut cfg = scenario("default").unwrap();
    cfg.duration = Duration::from_secs(12);
    cfg.faults = vec![
        Fault::Crash {
            broker: 0,
            at: Duration::from_secs(4),
        },
        Fault::Restart {
            broker: 0,
            at: Duration::from_secs(8),
        },
    ];
    let json = outcome(&cfg);
    assert_passes(&json, "coordinator moves");
    // Every member's session ended at each move and began again at the
    // new coordinator; none expired on the way.
    let group = &json["group"];
    assert_eq!(
        group["sessions_moved"],
        2 * u64::from(cfg.members),
        "{json}"
    );
    assert_eq!(group["sessions_expired"], 0, "{json}");
    assert_eq!(group["sessions_left"], u64::from(cfg.members), "{json}");
}

#[test]
fn a_broker_restarts_only_once_it_is_down() {
    let with = |faults: Vec<Fault>| Config {
        faults,
        ..Config::default()
    };
    let crash = |at| Fault::Crash {
        broker: 1,
        at: Duration::from_secs(at),
    };
    let restart = |at| Fault::Restart {
        broker: 1,
        at: Duration::from_secs(at),
    };
    let refused = |faults| with(faults).validate().unwrap_err().to_string();
    assert!(refused(vec![restart(5)]).contains("broker 1 restarts at 5000 ms, but it is up then"));
    assert!(refused(vec![restart(5), crash(10)]).contains("restarts at 5000 ms"));
    assert!(refused(vec![crash(1), restart(2), restart(3)]).contains("restarts at 3000 ms"));
    assert!(with(vec![crash(1), restart(2), crash(3), restart(4)])
        .validate()
        .is_ok());
}

#[test]
fn produces_waiting_when_the_isr_falls_below_min_insync_are_not_acknowledged() {
    // Followers starved of bandwidth fall out of every ISR, which leaves
    // the leaders alone below min.insync (2): as in Kafka, the high
    // watermark then stands still, so what waited expires at its timeout
    // (REQUEST_TIMED_OUT), and later produces are NOT_ENOUGH_REPLICAS.
    let mut cfg = scenario("default").unwrap();
    cfg.duration = Duration::from_secs(3);
    cfg.latency = Duration::ZERO;
    cfg.bandwidth = 1e6;
    let json = outcome(&cfg);
    assert_passes(&json, "starved followers");
    let errors = &json["errors"]["produce"];
    assert!(
        errors["NOT_ENOUGH_REPLICAS"].as_u64().unwrap() > 0,
        "{errors}"
    );
    assert!(
        errors.get("NOT_ENOUGH_REPLICAS_AFTER_APPEND").is_none(),
        "{errors}"
    );
    assert!(json["produce"]["expired"].as_u64().unwrap() > 0, "{json}");
}
