//! The bound on the memory of all the logs together.
//!
//! The logs are kept in memory, and each partition's retention
//! (`retention.bytes`, 1 GiB here by default) bounds one partition only:
//! a load test over a few dozen partitions would fill the machine and end
//! with the process killed, every answer in flight lost. Kafka's logs are
//! on disk and have no such bound. Here, past `LiveConfig::log_memory`
//! (`--serve`'s default is half the memory the process may use), the
//! oldest batches of the whole cluster go, as retention deletes them:
//! only batches below their partition's high watermark, of topics whose
//! cleanup policy deletes (a `compact`-only topic keeps every record),
//! oldest first by their newest record's timestamp, down to seven eighths
//! of the bound. The check runs with the other checks, every 100 ms.

use super::checks::Checks;
use super::LiveCluster;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::Ordering;

impl LiveCluster {
    /// Deletes the oldest batches over all partitions while the logs hold
    /// more than the bound; warns when it starts to.
    pub(super) fn bound_log_memory(&self) {
        let Some(bound) = self.cfg.log_memory else {
            return;
        };
        let topics = self.topics();
        let held: u64 = topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.log.lock().bytes)
            .sum();
        if held <= bound {
            self.log_memory_full.store(false, Ordering::Relaxed);
            return;
        }
        if !self.log_memory_full.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                held,
                bound,
                "the logs hold more than --log-memory-bytes: deleting the oldest batches \
                 over all partitions"
            );
        }
        let alive = |b: u32| self.brokers[b as usize].alive.load(Ordering::Acquire);
        let deletable: Vec<_> = topics
            .iter()
            .filter(|t| t.config.deletes())
            .flat_map(|t| t.partitions.iter())
            .collect();
        // The partitions by their oldest batch, the oldest on top.
        let mut oldest: BinaryHeap<Reverse<(i64, usize)>> = deletable
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let log = p.log.lock();
                let led = log.leader.is_some_and(alive) && !log.deleted;
                led.then(|| log.oldest_deletable())
                    .flatten()
                    .map(|at| Reverse((at, i)))
            })
            .collect();
        let mut excess = held - (bound - bound / 8);
        while excess > 0 {
            let Some(Reverse((_, i))) = oldest.pop() else {
                break;
            };
            // Up to the next partition's oldest batch, so that the oldest
            // over all go first.
            let until = oldest.peek().map_or(i64::MAX, |Reverse((at, _))| *at);
            let mut log = deletable[i].log.lock();
            if log.deleted {
                continue;
            }
            let freed = log.delete_oldest(until, excess);
            if freed > 0 {
                Checks::bump(&self.checks.memory_deletions);
            }
            excess = excess.saturating_sub(freed);
            if let Some(at) = log.oldest_deletable() {
                oldest.push(Reverse((at, i)));
            }
        }
    }
}

/// The bound by default: half of the memory the process may use, the
/// least of the machine's and its control group's (cgroup v2 or v1);
/// `None` where neither can be read.
pub fn default_log_memory() -> Option<u64> {
    let machine = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    let group = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|path| std::fs::read_to_string(path).ok())
    // "max" (v2) or a huge number (v1) where there is no limit.
    .find_map(|v| v.trim().parse::<u64>().ok());
    let usable = match (machine, group) {
        (Some(m), Some(g)) => m.min(g),
        (one, other) => one.or(other)?,
    };
    Some(usable / 2)
}
