//! The served cluster's delayed operations, as Kafka's `DelayedProduce`,
//! `DelayedFetch` and `DelayedDeleteRecords`: one per request, watched
//! under every partition it touches, answered with per-partition results.

use super::checks::Checks;
use super::partition_txns::AbortedTxn;
use super::topics::Partition;
use super::LiveCluster;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use purgatory::{DelayedOperation, Outcome};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// One partition of a produce with `acks=all`.
pub struct ProducePart {
    pub partition: Arc<Partition>,
    /// Offset of the first appended record.
    pub base: i64,
    /// The high watermark must reach this (one past the last record).
    pub required: i64,
    /// `None` while undecided, then the error code (0 for success).
    pub error: Option<i16>,
}

/// A produce with `acks=all`, waiting until every in-sync replica has each
/// partition's batches.
pub struct WireProduce {
    pub broker: u32,
    pub parts: Vec<ProducePart>,
    pub timeout: Duration,
    pub outcome: Option<Outcome>,
    pub checks: Arc<Checks>,
}

impl DelayedOperation for WireProduce {
    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn try_complete(&mut self) -> bool {
        for part in self.parts.iter_mut().filter(|p| p.error.is_none()) {
            let log = part.partition.log.lock();
            if log.deleted {
                part.error = Some(ResponseError::UnknownTopicOrPartition.code());
            } else if log.leader != Some(self.broker) {
                part.error = Some(ResponseError::NotLeaderOrFollower.code());
            } else if log.hw >= part.required {
                // As Kafka's checkEnoughReplicasReachOffset: the high
                // watermark passed it, but if the ISR has shrunk below
                // min.insync.replicas meanwhile (the topic's, as it is
                // now), fewer replicas than asked for have it.
                part.error = Some(if log.isr.len() >= log.effective_min_insync() {
                    0
                } else {
                    ResponseError::NotEnoughReplicasAfterAppend.code()
                });
            }
        }
        self.parts.iter().all(|p| p.error.is_some())
    }

    fn on_complete(&mut self, outcome: Outcome) {
        self.checks.answered(self.outcome.is_some());
        self.outcome = Some(outcome);
        let undecided = match outcome {
            // Forced without a check (nothing in the front forces it).
            Outcome::Completed => ResponseError::RequestTimedOut,
            Outcome::Expired => ResponseError::RequestTimedOut,
            // Leadership moved away, or the broker is going down: the
            // client refreshes its metadata and retries.
            Outcome::Cancelled | Outcome::Shutdown => ResponseError::NotLeaderOrFollower,
        };
        // Only parts the condition left undecided look at their log again.
        for part in self.parts.iter_mut().filter(|p| p.error.is_none()) {
            let error = if part.partition.log.lock().deleted {
                ResponseError::UnknownTopicOrPartition
            } else {
                undecided
            };
            part.error = Some(error.code());
        }
    }
}

/// One partition of a fetch.
pub struct FetchPart {
    pub partition: Arc<Partition>,
    pub offset: i64,
    pub max_bytes: usize,
    /// `isolation.level=read_committed`: read below the last stable
    /// offset, not the high watermark.
    pub committed_only: bool,
    /// Set on completion: the error code, the batches read, the high
    /// watermark, last stable offset and log start offset then, and (for a
    /// committed reader) the aborted transactions the read meets.
    pub error: i16,
    pub records: Bytes,
    pub hw: i64,
    pub last_stable: i64,
    pub log_start: i64,
    pub aborted: Vec<AbortedTxn>,
}

/// A fetch waiting until `min_bytes` are readable below the high watermarks
/// of its partitions (the last stable offsets, for a committed reader), or
/// `max_wait`.
pub struct WireFetch {
    pub broker: u32,
    pub parts: Vec<FetchPart>,
    pub min_bytes: u64,
    pub max_bytes: usize,
    pub max_wait: Duration,
    pub outcome: Option<Outcome>,
    /// Set on completion by the condition: the latest move of a high
    /// watermark among the partitions it read from, the move that made
    /// its data readable (or a later one).
    pub readable_since: Option<Instant>,
    pub checks: Arc<Checks>,
}

impl DelayedOperation for WireFetch {
    fn timeout(&self) -> Duration {
        self.max_wait
    }

    fn try_complete(&mut self) -> bool {
        // What `on_complete` would read now, with the same limits.
        let mut budget = self.max_bytes;
        let mut readable = 0u64;
        for part in &self.parts {
            let log = part.partition.log.lock();
            // A leader change answers at once, as Kafka's DelayedFetch does.
            if log.leader != Some(self.broker) {
                return true;
            }
            let limit = log.read_limit(part.committed_only);
            let len = log.read_len(part.offset, part.max_bytes.min(budget), limit);
            budget = budget.saturating_sub(len);
            readable += len as u64;
        }
        readable >= self.min_bytes
    }

    fn on_complete(&mut self, outcome: Outcome) {
        self.checks.answered(self.outcome.is_some());
        self.outcome = Some(outcome);
        // Expired or not, a fetch answers with what is there.
        let mut budget = self.max_bytes;
        for part in &mut self.parts {
            let log = part.partition.log.lock();
            part.hw = log.hw;
            part.last_stable = log.last_stable();
            part.log_start = log.log_start;
            if log.deleted {
                part.error = ResponseError::UnknownTopicOrPartition.code();
                continue;
            }
            // A broker going down answers as one that no longer leads: the
            // client fetches again elsewhere.
            if log.leader != Some(self.broker) || outcome == Outcome::Shutdown {
                part.error = ResponseError::NotLeaderOrFollower.code();
                continue;
            }
            // Deleted (DeleteRecords) while it waited.
            if part.offset < log.log_start {
                part.error = ResponseError::OffsetOutOfRange.code();
                continue;
            }
            if budget == 0 {
                continue;
            }
            let limit = log.read_limit(part.committed_only);
            part.records = log.read(part.offset, part.max_bytes.min(budget), limit);
            if part.committed_only {
                part.aborted = log.aborted_in(part.offset, limit);
            }
            budget = budget.saturating_sub(part.records.len());
            if outcome == Outcome::Completed && !part.records.is_empty() {
                self.readable_since = self.readable_since.max(log.hw_moved_at);
            }
        }
    }
}

/// Bytes returned by a completed fetch, over its partitions.
pub fn fetched_bytes(parts: &[FetchPart]) -> u64 {
    parts.iter().map(|p| p.records.len() as u64).sum()
}

/// One partition of a DeleteRecords request.
pub struct DeletePart {
    pub partition: Arc<Partition>,
    /// The log start offset asked for (the high watermark for -1).
    pub offset: i64,
    /// Set on completion: the error code, or the low watermark reached.
    pub error: i16,
    pub low_watermark: i64,
}

/// A DeleteRecords request waiting, as Kafka's `DelayedDeleteRecords`,
/// until every live replica of each of its partitions has deleted below
/// the asked offset (the low watermark passed it), or its timeout.
pub struct WireDeleteRecords {
    pub broker: u32,
    pub parts: Vec<DeletePart>,
    pub timeout: Duration,
    pub cluster: Weak<LiveCluster>,
    pub outcome: Option<Outcome>,
    pub checks: Arc<Checks>,
}

/// Whether a broker of `cluster` is up (none is once it is gone).
fn liveness(cluster: &Weak<LiveCluster>) -> impl Fn(u32) -> bool {
    let cluster = cluster.upgrade();
    move |b| cluster.as_ref().is_some_and(|c| c.is_unfenced(b))
}

impl DelayedOperation for WireDeleteRecords {
    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn try_complete(&mut self) -> bool {
        let alive = liveness(&self.cluster);
        self.parts.iter().all(|part| {
            let log = part.partition.log.lock();
            // A leader change answers at once.
            log.leader != Some(self.broker) || log.low_watermark(&alive) >= part.offset
        })
    }

    fn on_complete(&mut self, outcome: Outcome) {
        self.checks.answered(self.outcome.is_some());
        self.outcome = Some(outcome);
        let alive = liveness(&self.cluster);
        for part in &mut self.parts {
            let log = part.partition.log.lock();
            part.low_watermark = log.low_watermark(&alive);
            part.error = if log.deleted {
                ResponseError::UnknownTopicOrPartition.code()
            } else if log.leader != Some(self.broker) || outcome == Outcome::Shutdown {
                ResponseError::NotLeaderOrFollower.code()
            } else if part.low_watermark < part.offset {
                ResponseError::RequestTimedOut.code()
            } else {
                0
            };
        }
    }
}
