//! The named scenarios: a default workload and the faults on top of it.

use crate::config::{Config, Fault};
use std::time::Duration;

/// A named scenario and what it shows.
pub struct Scenario {
    /// Its name, for `--scenario`.
    pub name: &'static str,
    /// What it does and what to look for.
    pub description: &'static str,
    build: fn(&mut Config),
}

/// Every scenario, in the order `--list-scenarios` prints them.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "default",
        description: "3 brokers, 32 partitions, RF 3, min.insync 2; 4000 produces/s (80% acks=all), \
                      8 consumers (min.bytes 16 KiB, max.wait 500 ms), 100 group members; 30 s.",
        build: |_| {},
    },
    Scenario {
        name: "slow-follower",
        description: "Broker 2 applies fetched data 2 s late from 5 s to 25 s: acks=all latency rises, \
                      after replica.lag.time.max (10 s) it leaves the ISR and latency recovers; \
                      it catches up and rejoins. 40 s.",
        build: |c| {
            c.duration = Duration::from_secs(40);
            c.faults.push(Fault::SlowFollower {
                broker: 2,
                from: Duration::from_secs(5),
                until: Duration::from_secs(25),
                delay: Duration::from_secs(2),
            });
        },
    },
    Scenario {
        name: "broker-crash",
        description: "Broker 1 dies at 10 s: its pending produces and fetches are answered at once with \
                      NOT_LEADER through cancel_for_key, leadership moves to an in-sync replica (with \
                      --serve, once the controller fences it), clients retry. 30 s.",
        build: |c| {
            c.faults.push(Fault::Crash { broker: 1, at: Duration::from_secs(10) });
        },
    },
    Scenario {
        name: "broker-restart",
        description: "Broker 1 dies at 10 s and comes back at 15 s: leadership moves away from it, then, \
                      once it has caught up and rejoined the ISR, back to it as the preferred replica, \
                      from leaders that stay up; what was parked at them for those partitions is answered \
                      with NOT_LEADER through cancel_for_key, and clients retry at the new leader. 30 s.",
        build: |c| {
            c.faults.push(Fault::Crash { broker: 1, at: Duration::from_secs(10) });
            c.faults.push(Fault::Restart { broker: 1, at: Duration::from_secs(15) });
        },
    },
    Scenario {
        name: "idle-fetch",
        description: "200 consumers long-poll the 32 quiet partitions, 6 or 7 on each as independent \
                      groups would (50 produces/s, min.bytes 1 MiB): almost every fetch waits its full \
                      max.wait, so expirations dominate. 30 s.",
        build: |c| {
            c.produce_rate = 50.0;
            c.consumers = 200;
            c.fetch_min_bytes = 1024 * 1024;
        },
    },
    Scenario {
        name: "heartbeats",
        description: "2000 group members heartbeat every 3 s (each heartbeat pushes the session deadline \
                      back: the wheel's reschedule path); 20% stop at 10 s and their 10 s sessions expire. 30 s.",
        build: |c| {
            c.members = 2_000;
            c.faults.push(Fault::StopHeartbeats { fraction: 0.2, at: Duration::from_secs(10) });
        },
    },
    Scenario {
        name: "overload",
        description: "30000 produces/s of ~8 KiB batches (~600 MB/s) into brokers with 200 MB/s of \
                      replication bandwidth: followers fall behind, acks=all produces time out \
                      (timeout 2 s). 20 s.",
        build: |c| {
            c.duration = Duration::from_secs(20);
            c.produce_rate = 30_000.0;
            c.batch_bytes_p50 = 8_192.0;
            c.batch_bytes_p75 = 12_288.0;
            c.produce_timeout = Duration::from_secs(2);
        },
    },
];

/// The configuration of scenario `name`, before flag overrides.
pub fn scenario(name: &str) -> Option<Config> {
    let s = SCENARIOS.iter().find(|s| s.name == name)?;
    let mut config = Config {
        scenario: s.name.to_string(),
        ..Config::default()
    };
    (s.build)(&mut config);
    Some(config)
}
