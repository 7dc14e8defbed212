//! Share groups (KIP-932): consumers that share a topic's partitions and
//! take records one by one, each acknowledged (or given back) by the member
//! it was handed to. Three kinds of wait, each a delayed operation:
//! - a member's session, a DelayedHeartbeat of the group coordinator
//!   (`groups/share_group.rs`);
//! - a ShareFetch with nothing to hand out, parked in its broker's
//!   share-fetch purgatory under its partitions until records can be
//!   acquired or `max_wait_ms` passes ([`WireShareFetch`]);
//! - each acquisition's lock, in the cluster's lock purgatory, which gives
//!   the records back when it runs out, and which the acknowledgement of
//!   its last record ends at once ([`AcquisitionLock`]).
//!
//! The state of each share group on each partition ([`SharePartition`])
//! is the cluster's, as Kafka keeps it with its share coordinator: it
//! outlives a change of leader, which gives back what was acquired (the
//! new leader knows of no acquisition).

mod partition;
mod service;
mod sessions;

pub(crate) use partition::SharePartition;
pub(crate) use sessions::ShareSessions;

use super::checks::Checks;
use super::topics::Partition;
use super::LiveCluster;
use parking_lot::Mutex;
use purgatory::{Completer, DelayedOperation, Driver, Outcome, Purgatory, TimerKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use uuid::Uuid;

/// Kafka's `group.share.record.lock.duration.ms`: how long a member holds
/// the records it was handed.
pub const RECORD_LOCK_DURATION: Duration = Duration::from_secs(30);

/// Kafka's `group.share.delivery.count.limit`: how often a record is
/// delivered before it is archived.
pub const DELIVERY_COUNT_LIMIT: i16 = 5;

/// One share group on one partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ShareKey {
    pub group: Arc<str>,
    pub topic: Uuid,
    pub partition: i32,
}

/// An acquisition lock's timer, kept with the lock.
pub(crate) type LockTimer = Completer<u64, AcquisitionLock>;

/// A share group's state on a partition, behind its lock.
pub(crate) type Shared = Arc<Mutex<SharePartition<LockTimer>>>;

/// The share groups' state on every partition, and the locks' purgatory.
pub(crate) struct ShareState {
    partitions: Mutex<HashMap<ShareKey, Shared>>,
    /// Every acquisition's lock, by lock id.
    pub locks: Purgatory<u64, AcquisitionLock>,
    next_lock: AtomicU64,
    /// How long an acquisition holds its records.
    pub lock_duration: Duration,
}

impl ShareState {
    pub fn new(kind: TimerKind, lock_duration: Duration) -> ShareState {
        ShareState {
            partitions: Mutex::new(HashMap::new()),
            locks: Purgatory::builder("ShareLocks")
                .timer(kind)
                .driver(Driver::Thread {
                    expiration_threads: 1,
                })
                .build()
                .expect("a valid purgatory configuration"),
            next_lock: AtomicU64::new(1),
            lock_duration,
        }
    }

    /// The share-partition of `key`, made on first use with its start at
    /// `start()` (the group's `share.auto.offset.reset`).
    pub fn get_or_init(&self, key: &ShareKey, epoch: i32, start: impl FnOnce() -> i64) -> Shared {
        let mut all = self.partitions.lock();
        if let Some(sp) = all.get(key) {
            return Arc::clone(sp);
        }
        let sp = Arc::new(Mutex::new(SharePartition::new(
            start(),
            epoch,
            DELIVERY_COUNT_LIMIT,
        )));
        all.insert(key.clone(), Arc::clone(&sp));
        sp
    }

    /// The share-partition of `key`, if it was used.
    pub fn get(&self, key: &ShareKey) -> Option<Shared> {
        self.partitions.lock().get(key).cloned()
    }

    /// Every share-partition of `group`.
    pub fn of_group(&self, group: &str) -> Vec<(ShareKey, Shared)> {
        let all = self.partitions.lock();
        all.iter()
            .filter(|(k, _)| &*k.group == group)
            .map(|(k, sp)| (k.clone(), Arc::clone(sp)))
            .collect()
    }

    /// Forgets the share-partitions of a deleted topic (their locks end
    /// as they run out, and find nothing).
    pub fn forget_topic(&self, topic: Uuid) {
        self.partitions.lock().retain(|k, _| k.topic != topic);
    }

    /// Forgets every share-partition of a deleted group.
    pub fn forget_group(&self, group: &str) {
        self.partitions.lock().retain(|k, _| &*k.group != group);
    }

    /// A lock id never used before.
    pub fn next_lock(&self) -> u64 {
        self.next_lock.fetch_add(1, Ordering::Relaxed)
    }
}

impl LiveCluster {
    /// Partition `index` of the topic whose id is `topic`, if both exist.
    pub(crate) fn partition_by_id(&self, topic: Uuid, index: i32) -> Option<Arc<Partition>> {
        let t = self.topic_by_id(topic)?;
        usize::try_from(index)
            .ok()
            .and_then(|i| t.partitions.get(i).cloned())
    }

    /// `member` of share group `group` was not heard from within its
    /// session: its share sessions are closed at every broker and what it
    /// holds is given back at once, rather than when its locks run out. (A
    /// member that leaves by heartbeat keeps its sessions: its close
    /// acknowledges through them next.)
    pub(crate) fn share_member_gone(&self, group: &str, member: &str) {
        for b in &self.brokers {
            b.share_sessions.forget(group, member);
        }
        for (key, sp) in self.shares.of_group(group) {
            let (timers, available) = sp.lock().release_member(member);
            end_timers(timers);
            if !available {
                continue;
            }
            if let Some(p) = self.partition_by_id(key.topic, key.partition) {
                self.check_share_fetches(&p);
            }
        }
    }
}

/// Ends the timers of locks that hold nothing any more; called with no
/// share-partition locked, as a lock's callback takes one.
pub(crate) fn end_timers(timers: Vec<LockTimer>) {
    for t in timers {
        t.force_complete();
    }
}

/// The records one acquisition handed a member, until they are all
/// acknowledged or released (then it is force-completed and does
/// nothing) or its duration runs out (then what it still holds is given
/// back, and the parked share fetches of the partition are checked).
pub(crate) struct AcquisitionLock {
    pub cluster: Weak<LiveCluster>,
    pub key: ShareKey,
    pub partition: Arc<Partition>,
    pub lock: u64,
    pub timeout: Duration,
    pub checks: Arc<Checks>,
    pub answered: bool,
}

impl DelayedOperation for AcquisitionLock {
    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn try_complete(&mut self) -> bool {
        // Ended from outside only.
        false
    }

    fn on_complete(&mut self, outcome: Outcome) {
        self.checks.answered(self.answered);
        self.answered = true;
        if outcome != Outcome::Expired {
            return;
        }
        let Some(cluster) = self.cluster.upgrade() else {
            return;
        };
        let Some(sp) = cluster.shares.get(&self.key) else {
            return;
        };
        let available = sp.lock().expire(self.lock);
        Checks::bump(&self.checks.share_locks_expired);
        if available {
            cluster.check_share_fetches(&self.partition);
        }
    }
}

/// A partition of a parked share fetch: the log, and the group's state on
/// it.
pub(crate) struct SharePart {
    pub partition: Arc<Partition>,
    pub state: Shared,
}

/// A ShareFetch with nothing to hand out yet: complete once a record can
/// be acquired on one of its partitions (or a partition's leader moved),
/// expired after `max_wait_ms`. The request's task then acquires.
pub(crate) struct WireShareFetch {
    pub broker: u32,
    pub parts: Vec<SharePart>,
    pub max_wait: Duration,
    pub checks: Arc<Checks>,
    pub answered: bool,
}

impl DelayedOperation for WireShareFetch {
    fn timeout(&self) -> Duration {
        self.max_wait
    }

    fn try_complete(&mut self) -> bool {
        self.parts.iter().any(|p| {
            let log = p.partition.log.lock();
            if log.leader != Some(self.broker) {
                return true;
            }
            let limit = log.hw;
            drop(log);
            p.state.lock().acquirable(limit)
        })
    }

    fn on_complete(&mut self, _: Outcome) {
        self.checks.answered(self.answered);
        self.answered = true;
    }
}
