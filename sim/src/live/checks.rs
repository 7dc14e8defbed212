//! The served cluster's checks: every parked request answered exactly
//! once, no `acks=all` produce acknowledged below the high watermark, no
//! fetch answered early with less than `min.bytes`, nothing expired before
//! its timeout.

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counters, updated by the request handlers and the operations.
#[derive(Debug, Default)]
pub struct Checks {
    /// Produce requests received.
    pub produce_requests: AtomicU64,
    /// Fetch requests received.
    pub fetch_requests: AtomicU64,
    /// Metadata requests received.
    pub metadata_requests: AtomicU64,
    /// ListOffsets requests received.
    pub list_offsets_requests: AtomicU64,
    /// OffsetForLeaderEpoch requests received.
    pub leader_epoch_requests: AtomicU64,
    /// Partitions of a Fetch, ListOffsets or OffsetForLeaderEpoch refused
    /// because the client's leader epoch was not the partition's (its
    /// metadata was stale, or ahead of this broker's).
    pub stale_epochs: AtomicU64,
    /// FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
    /// OffsetCommit and OffsetFetch requests received.
    pub group_requests: AtomicU64,
    /// Group members whose session expired.
    pub sessions_expired: AtomicU64,
    /// Operations handed to a purgatory.
    pub parked: AtomicU64,
    /// `on_complete` calls, over all parked operations.
    pub answers: AtomicU64,
    /// `on_complete` called on an operation already answered.
    pub answered_twice: AtomicU64,
    /// Parked operations completed by their condition.
    pub completed: AtomicU64,
    /// Parked operations that expired.
    pub expired: AtomicU64,
    /// Parked operations cancelled (leadership moved).
    pub cancelled: AtomicU64,
    /// Parked operations answered by the shutdown.
    pub shut_down: AtomicU64,
    /// InitProducerId requests (each answered with a new producer id, but
    /// for a transactional one).
    pub init_producer_id_requests: AtomicU64,
    /// Requests of admin tools: topics, partitions, records, configs, log
    /// directories, ACLs, the cluster's description, leader elections.
    pub admin_requests: AtomicU64,
    /// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit
    /// requests.
    pub txn_requests: AtomicU64,
    /// Transactions committed.
    pub txns_committed: AtomicU64,
    /// Transactions aborted by their producer, or by a new instance of it.
    pub txns_aborted: AtomicU64,
    /// Transaction markers written by WriteTxnMarkers: an operator
    /// aborting a hanging transaction.
    pub markers_written: AtomicU64,
    /// Transactions aborted at their timeout.
    pub txns_expired: AtomicU64,
    /// Produce batches an idempotent producer sent again, answered with
    /// where they were first stored and not stored twice.
    pub duplicates: AtomicU64,
    /// Records acknowledged to `acks=all` producers.
    pub acked_records: AtomicU64,
    /// Produce partitions answered with an error, by none of the above.
    pub produce_errors: AtomicU64,
    /// Violation: an `acks=all` produce acknowledged below the high watermark.
    pub acked_below_hw: AtomicU64,
    /// Violation: a fetch answered before `max_wait_ms` with less than `min_bytes`.
    pub fetch_early: AtomicU64,
    /// Violation: an operation expired before its timeout.
    pub expired_early: AtomicU64,
    /// Violation: a partition assigned to two members of a group at once.
    pub assigned_twice: AtomicU64,
    /// Times a partition's oldest batches were deleted for its retention.
    pub retention_deletions: AtomicU64,
    /// Answers throttled by a quota: produces and fetches past a byte
    /// rate, requests past the request time, and creations and deletions
    /// past the partition mutation rate.
    pub throttled: AtomicU64,
    /// Connections closed unread, their address past its connection rate.
    pub connections_throttled: AtomicU64,
    /// Times a partition's oldest batches were deleted for the bound on
    /// all the logs' memory.
    pub memory_deletions: AtomicU64,
    /// How late each expired session was, in microseconds past its
    /// deadline (the last heartbeat plus the session timeout).
    pub session_lateness_us: parking_lot::Mutex<Vec<u64>>,
    /// Parked fetches woken by new data: from the high watermark's move
    /// that made their data readable to their response being built.
    pub fetch_wakeups: WakeUps,
    /// Partitions whose leadership moved: from a broker that crashed, to
    /// a broker back from a crash, or to the preferred replica.
    pub leader_changes: AtomicU64,
    /// ShareFetch and ShareAcknowledge requests received.
    pub share_requests: AtomicU64,
    /// Records handed to share group members (each delivery counted).
    pub share_acquired: AtomicU64,
    /// Share group acquisition locks that ran out.
    pub share_locks_expired: AtomicU64,
}

/// A latency distribution in microseconds, in constant memory however long
/// the broker serves.
#[derive(Debug)]
pub struct WakeUps(Mutex<Histogram<u64>>);

impl Default for WakeUps {
    fn default() -> Self {
        // Three significant digits; the range grows as values come.
        WakeUps(Mutex::new(Histogram::new(3).expect("3 significant digits")))
    }
}

impl WakeUps {
    pub(crate) fn record(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        // Saturates at the histogram's range rather than failing.
        self.0.lock().saturating_record(us);
    }

    /// How many, and the median, 99th percentile and largest, in µs.
    pub fn quantiles(&self) -> (u64, u64, u64, u64) {
        let h = self.0.lock();
        (
            h.len(),
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.99),
            h.max(),
        )
    }
}

/// One counter to read.
fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

impl Checks {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn bump_by(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Called by each operation's `on_complete`; `again` if it had already
    /// been answered.
    pub(crate) fn answered(&self, again: bool) {
        Self::bump(&self.answers);
        if again {
            Self::bump(&self.answered_twice);
        }
    }

    /// What went wrong, one line each; empty when every check held.
    /// `pending` is what the purgatories still hold.
    pub fn violations(&self, pending: usize) -> Vec<String> {
        let mut v = Vec::new();
        let (parked, answers) = (get(&self.parked), get(&self.answers));
        if get(&self.answered_twice) > 0 {
            v.push(format!(
                "{} operations answered twice",
                get(&self.answered_twice)
            ));
        }
        if answers < parked {
            v.push(format!(
                "{} of {parked} parked operations never answered",
                parked - answers
            ));
        }
        if pending > 0 {
            v.push(format!("{pending} operations still in the purgatories"));
        }
        for (count, what) in [
            (
                &self.acked_below_hw,
                "acks=all produces acknowledged below the high watermark",
            ),
            (
                &self.fetch_early,
                "fetches answered before max_wait_ms with less than min_bytes",
            ),
            (
                &self.expired_early,
                "operations or sessions expired before their timeout",
            ),
            (
                &self.assigned_twice,
                "partitions assigned to two members of a group at once",
            ),
        ] {
            if get(count) > 0 {
                v.push(format!("{} {what}", get(count)));
            }
        }
        v
    }

    /// The report's lines.
    pub fn summary(&self) -> Vec<(String, u64)> {
        [
            ("produce requests", &self.produce_requests),
            ("fetch requests", &self.fetch_requests),
            ("metadata requests", &self.metadata_requests),
            ("list-offsets requests", &self.list_offsets_requests),
            (
                "offset-for-leader-epoch requests",
                &self.leader_epoch_requests,
            ),
            ("  partitions refused for a stale epoch", &self.stale_epochs),
            ("consumer-group requests", &self.group_requests),
            ("init-producer-id requests", &self.init_producer_id_requests),
            (
                "admin requests (topics, configs, ...)",
                &self.admin_requests,
            ),
            (
                "share-group fetch and acknowledge requests",
                &self.share_requests,
            ),
            (
                "  records handed to share group members",
                &self.share_acquired,
            ),
            ("  acquisition locks run out", &self.share_locks_expired),
            ("transaction requests", &self.txn_requests),
            ("  transactions committed", &self.txns_committed),
            ("  transactions aborted", &self.txns_aborted),
            ("  transactions timed out", &self.txns_expired),
            ("  markers written by an operator", &self.markers_written),
            ("group sessions expired", &self.sessions_expired),
            ("parked in the purgatory", &self.parked),
            ("  completed by their condition", &self.completed),
            ("  expired", &self.expired),
            ("  cancelled", &self.cancelled),
            ("  answered at shutdown", &self.shut_down),
            ("records acknowledged (acks=all)", &self.acked_records),
            ("resent batches stored once", &self.duplicates),
            ("log starts moved by retention", &self.retention_deletions),
            (
                "log starts moved by the memory bound",
                &self.memory_deletions,
            ),
            ("partition leaders moved", &self.leader_changes),
            ("answers throttled by a quota", &self.throttled),
            (
                "connections closed by a connection-rate quota",
                &self.connections_throttled,
            ),
            ("produce partition errors", &self.produce_errors),
        ]
        .into_iter()
        .map(|(name, c)| (name.to_string(), get(c)))
        .chain(self.wakeup_lines())
        .collect()
    }

    /// The fetch wake-up's lines, when some fetch was woken by data.
    fn wakeup_lines(&self) -> Vec<(String, u64)> {
        let (n, p50, p99, max) = self.fetch_wakeups.quantiles();
        if n == 0 {
            return Vec::new();
        }
        vec![
            ("fetches woken by new data".to_string(), n),
            ("  wake-up p50, µs".to_string(), p50),
            ("  wake-up p99, µs".to_string(), p99),
            ("  wake-up max, µs".to_string(), max),
        ]
    }
}
