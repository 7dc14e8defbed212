//! The delayed operations a broker parks: produce waiting for `acks=all`,
//! fetch waiting for `min.bytes`, and a group member's session.
//!
//! They read the partition's leader-side state through atomics (so they can
//! run on the purgatory's threads in real-time mode) and, when completed,
//! send their answer to the engine through a channel.

use crossbeam_channel::Sender;
use purgatory::{Clock, DelayedOperation, Outcome};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a leader publishes about a partition for its parked operations.
#[derive(Debug, Default)]
pub struct PartitionView {
    /// High watermark: bytes below it are on every in-sync replica.
    pub hw: AtomicU64,
    /// The leader's log end offset.
    pub leo: AtomicU64,
    /// Size of the ISR.
    pub isr: AtomicU32,
    /// Leader epoch: moves when leadership moves.
    pub epoch: AtomicU64,
}

/// Per-partition result of a produce or fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartStatus {
    /// Acknowledged (produce) or data returned (fetch).
    Ok,
    /// The broker is not (or no longer) the partition's leader.
    NotLeader,
    /// The ISR is smaller than `min.insync.replicas`: the batch was not
    /// appended.
    NotEnoughReplicas,
    /// The batch was appended and the high watermark passed it, but the ISR
    /// had fallen below `min.insync.replicas` meanwhile: fewer replicas
    /// than asked for hold it.
    NotEnoughReplicasAfterAppend,
    /// The request timed out before the partition was replicated.
    TimedOut,
    /// The broker shut down.
    NotAvailable,
}

impl PartStatus {
    /// Kafka's name for the error (`NONE` for success), for reports.
    pub fn error_name(self) -> &'static str {
        match self {
            PartStatus::Ok => "NONE",
            PartStatus::NotLeader => "NOT_LEADER_OR_FOLLOWER",
            PartStatus::NotEnoughReplicas => "NOT_ENOUGH_REPLICAS",
            PartStatus::NotEnoughReplicasAfterAppend => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
            PartStatus::TimedOut => "REQUEST_TIMED_OUT",
            PartStatus::NotAvailable => "BROKER_NOT_AVAILABLE",
        }
    }
}

/// An operation's answer, as the broker sends it.
#[derive(Debug)]
pub enum Reply {
    /// A produce request was answered.
    Produce {
        /// Request id.
        req: u64,
        /// How the purgatory ended it.
        outcome: Outcome,
        /// Per partition: id, required offset, status.
        parts: Vec<(u32, u64, PartStatus)>,
        /// When.
        at: Instant,
    },
    /// A fetch (consumer or follower) was answered.
    Fetch {
        /// Request id.
        req: u64,
        /// How the purgatory ended it.
        outcome: Outcome,
        /// Per partition: id, offset fetched from, bytes returned, status.
        parts: Vec<(u32, u64, u64, PartStatus)>,
        /// When.
        at: Instant,
    },
    /// A member's session ended.
    Session {
        /// Member id.
        member: u32,
        /// Expired, or completed when it left.
        outcome: Outcome,
        /// When.
        at: Instant,
    },
}

/// A partition of a produce request, appended at `required - bytes`.
pub struct ProducePart {
    /// Partition id.
    pub partition: u32,
    /// The leader's view of it.
    pub view: Arc<PartitionView>,
    /// The log end offset right after this batch: the HW it waits for.
    pub required: u64,
    /// Leader epoch at append.
    pub epoch: u64,
}

/// A produce with `acks=all`, waiting until the HW covers every batch.
pub struct DelayedProduce {
    /// Request id.
    pub req: u64,
    /// Partitions appended to.
    pub parts: Vec<ProducePart>,
    /// `min.insync.replicas`.
    pub min_insync: u32,
    /// The request's timeout.
    pub timeout: Duration,
    /// Stamps the answer.
    pub clock: Arc<dyn Clock>,
    /// Where the answer goes.
    pub replies: Sender<Reply>,
}

impl DelayedProduce {
    /// Kafka's `checkEnoughReplicasReachOffset`: done once the high
    /// watermark passes the batch, acknowledged if the ISR then still has
    /// `min.insync.replicas`; until then it waits, even with the ISR below
    /// that (a shrink moves the high watermark up to what the replicas
    /// left hold, so it is not long).
    fn status(&self, part: &ProducePart) -> Option<PartStatus> {
        // The high watermark first: `publish` stores it last, so the epoch
        // and ISR read after it are those it was published with, or later.
        let hw = part.view.hw.load(Ordering::Acquire);
        if part.view.epoch.load(Ordering::Acquire) != part.epoch {
            Some(PartStatus::NotLeader)
        } else if hw < part.required {
            None
        } else if part.view.isr.load(Ordering::Acquire) >= self.min_insync {
            Some(PartStatus::Ok)
        } else {
            Some(PartStatus::NotEnoughReplicasAfterAppend)
        }
    }
}

impl DelayedOperation for DelayedProduce {
    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn try_complete(&mut self) -> bool {
        self.parts.iter().all(|p| self.status(p).is_some())
    }

    fn on_complete(&mut self, outcome: Outcome) {
        let parts = self
            .parts
            .iter()
            .map(|p| {
                // Cancellation comes with a leader change, which `status`
                // reports as NotLeader for every partition not yet replicated.
                let status = self.status(p).unwrap_or(match outcome {
                    Outcome::Expired | Outcome::Completed => PartStatus::TimedOut,
                    Outcome::Cancelled => PartStatus::NotLeader,
                    Outcome::Shutdown => PartStatus::NotAvailable,
                });
                (p.partition, p.required, status)
            })
            .collect();
        // The engine outlives every operation; a send can only fail while
        // it is being torn down, when nobody is listening any more.
        let _ = self.replies.send(Reply::Produce {
            req: self.req,
            outcome,
            parts,
            at: self.clock.now(),
        });
    }
}

/// A partition of a fetch request.
pub struct FetchPart {
    /// Partition id.
    pub partition: u32,
    /// The leader's view of it.
    pub view: Arc<PartitionView>,
    /// Offset to read from.
    pub offset: u64,
    /// Leader epoch when the fetch arrived.
    pub epoch: u64,
}

/// A fetch waiting for `min_bytes`: a consumer's (reading below the HW) or a
/// follower's (reading below the leader's log end, `min.bytes` 1).
pub struct DelayedFetch {
    /// Request id.
    pub req: u64,
    /// Followers read up to the log end; consumers up to the HW.
    pub follower: bool,
    /// Partitions fetched.
    pub parts: Vec<FetchPart>,
    /// `fetch.min.bytes`.
    pub min_bytes: u64,
    /// Per-partition cap on bytes returned.
    pub max_bytes: u64,
    /// `fetch.max.wait.ms`.
    pub max_wait: Duration,
    /// Stamps the answer.
    pub clock: Arc<dyn Clock>,
    /// Where the answer goes.
    pub replies: Sender<Reply>,
}

impl DelayedFetch {
    fn readable(&self, part: &FetchPart) -> Option<u64> {
        if part.view.epoch.load(Ordering::Acquire) != part.epoch {
            return None;
        }
        let limit = if self.follower {
            part.view.leo.load(Ordering::Acquire)
        } else {
            part.view.hw.load(Ordering::Acquire)
        };
        Some(limit.saturating_sub(part.offset).min(self.max_bytes))
    }
}

impl DelayedOperation for DelayedFetch {
    fn timeout(&self) -> Duration {
        self.max_wait
    }

    fn try_complete(&mut self) -> bool {
        let mut bytes = 0;
        for part in &self.parts {
            match self.readable(part) {
                // Leadership moved: answer now so the client finds the new leader.
                None => return true,
                Some(b) => bytes += b,
            }
        }
        bytes >= self.min_bytes
    }

    fn on_complete(&mut self, outcome: Outcome) {
        let parts = self
            .parts
            .iter()
            .map(|p| match (outcome, self.readable(p)) {
                (Outcome::Cancelled, _) | (_, None) => {
                    (p.partition, p.offset, 0, PartStatus::NotLeader)
                }
                (Outcome::Shutdown, _) => (p.partition, p.offset, 0, PartStatus::NotAvailable),
                (_, Some(bytes)) => (p.partition, p.offset, bytes, PartStatus::Ok),
            })
            .collect();
        let _ = self.replies.send(Reply::Fetch {
            req: self.req,
            outcome,
            parts,
            at: self.clock.now(),
        });
    }
}

/// A group member's session at the coordinator. Only its timeout or the
/// member leaving ends it; every heartbeat pushes the timeout back.
pub struct DelayedHeartbeat {
    /// Member id.
    pub member: u32,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// Stamps the answer.
    pub clock: Arc<dyn Clock>,
    /// Where the answer goes.
    pub replies: Sender<Reply>,
}

impl DelayedOperation for DelayedHeartbeat {
    fn timeout(&self) -> Duration {
        self.session_timeout
    }

    fn try_complete(&mut self) -> bool {
        false
    }

    fn on_complete(&mut self, outcome: Outcome) {
        let _ = self.replies.send(Reply::Session {
            member: self.member,
            outcome,
            at: self.clock.now(),
        });
    }
}
