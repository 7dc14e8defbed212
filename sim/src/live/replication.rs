//! Simulated followers. Each appended batch reaches each follower's
//! replica one follower latency later (its fetch round trip); a follower
//! that has caught up is in sync, one that has not caught up for
//! `replica_lag` leaves the ISR. When the high watermark moves, the
//! leader's purgatories are checked for the partition, as Kafka does after
//! a follower fetch.

use super::topics::Partition;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Batches on their way to one follower, in the order they are due.
#[derive(Default)]
pub struct FollowerQueue {
    pending: Mutex<VecDeque<(Instant, Arc<Partition>, i64)>>,
}

impl FollowerQueue {
    /// `end` reaches this follower's replica of `partition` at `due`.
    pub fn push(&self, due: Instant, partition: Arc<Partition>, end: i64) {
        self.pending.lock().push_back((due, partition, end));
    }

    /// Takes what is due by `now`.
    pub fn due(&self, now: Instant) -> Vec<(Arc<Partition>, i64)> {
        let mut pending = self.pending.lock();
        let mut out = Vec::new();
        while pending.front().is_some_and(|(due, _, _)| *due <= now) {
            let (_, p, end) = pending.pop_front().expect("checked above");
            out.push((p, end));
        }
        out
    }

    /// When the first batch on its way is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.pending.lock().front().map(|(due, _, _)| *due)
    }

    pub fn clear(&self) {
        self.pending.lock().clear();
    }
}

/// What a follower's fetch changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CaughtUp {
    /// The high watermark moved, the ISR changed or the follower learned a
    /// new log start offset: the leader's purgatories must be checked.
    pub check: bool,
    /// The follower joined the ISR of a partition being reassigned, which
    /// may finish the reassignment.
    pub may_finish_reassignment: bool,
}

/// Applies a follower's fetch up to `end`.
pub fn follower_caught_up(p: &Partition, broker: u32, end: i64, now: Instant) -> CaughtUp {
    let mut log = p.log.lock();
    let Some(i) = log.replica_index(broker) else {
        return CaughtUp::default();
    };
    // A batch cut away by a leader change since it was sent counts only
    // up to the log end.
    let end = end.min(log.log_end());
    if end > log.replica_leo[i] {
        log.replica_leo[i] = end;
    }
    // The fetch answer carries the leader's log start offset: the
    // follower deletes below it too (a parked DeleteRecords waits for it).
    let changed = log.replica_log_start[i] < log.log_start;
    log.replica_log_start[i] = log.replica_log_start[i].max(log.log_start);
    let mut joined = false;
    if log.replica_leo[i] >= log.log_end() {
        log.caught_up_at[i] = now;
        if !log.isr.contains(&broker) && Some(broker) != log.leader {
            log.isr.push(broker);
            joined = true;
        }
    }
    CaughtUp {
        check: log.advance_hw() || changed || joined,
        may_finish_reassignment: joined && log.reassigning(),
    }
}

/// Removes from the ISR every follower of `p` that has not caught up for
/// `lag`, or that the controller fenced; returns whether anything changed.
pub fn shrink_isr(
    p: &Partition,
    lag: Duration,
    now: Instant,
    unfenced: &dyn Fn(u32) -> bool,
) -> bool {
    let mut log = p.log.lock();
    let log_end = log.log_end();
    let leader = log.leader;
    let before = log.isr.len();
    let lagging: Vec<u32> = log
        .isr
        .iter()
        .copied()
        .filter(|&b| Some(b) != leader)
        .filter(|&b| {
            let i = log.replica_index(b).expect("an ISR member is a replica");
            !unfenced(b)
                || (log.replica_leo[i] < log_end && now.duration_since(log.caught_up_at[i]) > lag)
        })
        .collect();
    log.isr.retain(|b| !lagging.contains(b));
    let changed = log.isr.len() != before;
    changed | log.advance_hw()
}
