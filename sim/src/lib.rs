//! `broker-sim`: a simulated Kafka-like cluster that drives the purgatory
//! with a realistic workload (produces waiting for `acks=all`, consumer and
//! follower fetches waiting for `min.bytes`, group sessions pushed back by
//! heartbeats) under faults, and checks that every request was answered
//! exactly once and correctly.
//!
//! The model: brokers with a produce, a fetch and a heartbeat purgatory
//! each (the real ones, keyed by partition or member); partitions with a
//! leader, followers that replicate by fetching (parked in the leader's fetch
//! purgatory with `min.bytes` 1, as in Kafka), an ISR that shrinks after
//! `replica.lag.time.max` and a high watermark that advances when every
//! in-sync replica has the data; after every append and every follower fetch
//! that moves the HW, `check_and_complete` on the partition. Offsets count
//! bytes, so "bytes readable below the HW" is `HW - offset`.
//!
//! With `--serve` ([`serve`]) the harness also answers real Kafka clients:
//! [`wire`] is the protocol front (listeners, framing, the `kafka-protocol`
//! crate's codecs, responses in request order, a guard against array counts
//! a frame cannot hold) over a [`wire::Service`], and [`live`] is the served
//! cluster behind it (topics whose batches are stored byte-exact, simulated
//! followers, produce and fetch purgatories per broker, and a group
//! coordinator whose joins, syncs and sessions wait in purgatories of their
//! own). The front knows nothing of the simulation, and the cluster nothing
//! of sockets.
#![warn(missing_docs)]
#![forbid(unsafe_code)]
// Whether a type is `Send` is worked out through every type it holds. A
// parked operation here holds the served cluster, which holds the
// purgatories that hold the operation, and rustdoc's walk down that loop
// goes past the default limit of 128 (`cargo build` does not).
#![recursion_limit = "256"]

pub mod advertised;
pub mod cluster;
pub mod config;
pub mod engine;
pub mod limits;
pub mod live;
pub mod ops;
pub mod random_faults;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod serve;
pub mod stats;
pub mod wire;

use std::time::{Duration, Instant};

/// The result of a run.
pub struct RunResult {
    /// Everything counted.
    pub stats: stats::Stats,
    /// Wall-clock time the run took.
    pub wall: Duration,
}

/// Validates `cfg` and runs it on real time until its duration passes or
/// `stop` is set, whichever comes first; then drains what is in flight.
///
/// # Errors
/// As [`run`].
pub fn run_until(
    cfg: &config::Config,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<RunResult, String> {
    let mut cfg = cfg.clone();
    cfg.clock = config::ClockChoice::Real;
    cfg.validate().map_err(|e| e.to_string())?;
    let started = Instant::now();
    let stats = engine::Engine::new(cfg)?.stop_on(stop).run(None);
    Ok(RunResult {
        stats,
        wall: started.elapsed(),
    })
}

/// Validates `cfg` and runs it.
///
/// # Errors
/// An impossible configuration, or purgatories that would not start.
pub fn run(
    cfg: &config::Config,
    progress: Option<engine::Progress<'_>>,
) -> Result<RunResult, String> {
    cfg.validate().map_err(|e| e.to_string())?;
    let started = Instant::now();
    let stats = engine::Engine::new(cfg.clone())?.run(progress);
    Ok(RunResult {
        stats,
        wall: started.elapsed(),
    })
}
