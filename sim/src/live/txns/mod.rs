//! The transaction coordinator: each transactional id's producer id,
//! epoch and ongoing transaction, as Kafka's coordinator keeps them, and
//! the markers that end a transaction in each of its partitions.
//!
//! A transactional producer gets its producer id and a new epoch from
//! InitProducerId (fencing any older instance with the same id, and
//! aborting what it left open), adds each partition to the transaction
//! before it writes there (AddPartitionsToTxn) and each consumer group
//! whose offsets it commits (AddOffsetsToTxn), and ends it with EndTxn:
//! a COMMIT or ABORT marker is appended to every partition of the
//! transaction, and the offsets it committed become the group's, or are
//! dropped. Each ongoing transaction waits in a purgatory of its own for
//! `transaction.timeout.ms` ([`TxnExpiry`]); one that outlives it is
//! aborted and its producer fenced.
//!
//! Lock order: a transaction's lock, then a partition's log or a group
//! (a marker or the offsets it settles). Nothing holding either of those
//! takes a transaction's lock. A transaction's timeout is parked and
//! forced with its lock held: a forced completion's callback takes no
//! lock, and an expiry's runs on the purgatory's own thread, where it waits
//! for the lock like any request.

mod expiry;

pub use expiry::TxnExpiry;

use super::checks::Checks;
use super::groups::Offsets;
use super::log::now_ms;
use super::topics::Partition;
use super::LiveCluster;
use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use purgatory::{Completer, Driver, Purgatory, TimerKind};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Kafka's `transaction.max.timeout.ms`: the longest timeout a producer
/// may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The epoch this coordinator writes in its markers. Kafka's grows each
/// time a broker takes over a transaction-state partition; here the
/// coordinators' state is the cluster's and outlives any broker, so one
/// epoch serves for the cluster's life.
pub const COORDINATOR_EPOCH: i32 = 0;

/// Where a transactional id's transaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    /// None begun since the producer's InitProducerId.
    Empty,
    /// Partitions or groups were added: it runs until EndTxn or its timeout.
    Ongoing,
    /// The last one was committed.
    CompleteCommit,
    /// The last one was aborted.
    CompleteAbort,
}

impl TxnState {
    /// Kafka's name for it, as ListTransactions and DescribeTransactions
    /// give it and take it as a filter.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }
}

/// Kafka's names for a transaction's states: those kept here, and those
/// it passes through within one request here (a marker is written at
/// once), which a filter may still name.
pub const STATE_NAMES: [&str; 8] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
];

/// A transactional id's transaction as the admin APIs describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnView {
    pub transactional_id: Arc<str>,
    pub producer_id: i64,
    pub epoch: i16,
    pub state: TxnState,
    pub timeout: Duration,
    /// When its last transaction began, in ms since the epoch; -1 before
    /// any.
    pub started_ms: i64,
    /// The partitions of the ongoing transaction: topic and index.
    pub partitions: Vec<(Arc<str>, i32)>,
}

/// One transactional id.
pub struct Txn {
    pub producer_id: i64,
    pub epoch: i16,
    pub timeout: Duration,
    pub state: TxnState,
    /// The partitions of the ongoing transaction, by key.
    pub partitions: BTreeMap<u32, Arc<Partition>>,
    /// The groups whose offsets it commits.
    pub groups: BTreeSet<String>,
    /// How many transactions this id has begun: tells its timeouts apart.
    pub number: u64,
    /// Ends the ongoing transaction's timeout.
    expiry: Option<Completer<Arc<str>, TxnExpiry>>,
    /// When the ongoing transaction times out, as its coordinator's log
    /// records it (its start plus its timeout).
    deadline: Instant,
    /// When the last transaction began, in ms since the epoch; -1 before
    /// any (Kafka's `txnStartTimestamp`).
    started_ms: i64,
}

fn view(transactional_id: Arc<str>, t: &Txn) -> TxnView {
    TxnView {
        transactional_id,
        producer_id: t.producer_id,
        epoch: t.epoch,
        state: t.state,
        timeout: t.timeout,
        started_ms: t.started_ms,
        partitions: (t.partitions.values())
            .map(|p| (Arc::clone(&p.topic), p.index))
            .collect(),
    }
}

/// A partition that got a marker, for the caller to replicate once the
/// transaction's lock is released: (partition, followers, log end, whether
/// the high watermark moved).
pub type Written = (Arc<Partition>, Vec<u32>, i64, bool);

/// Every transactional id of the cluster.
pub struct TxnCoordinator {
    txns: Mutex<HashMap<Arc<str>, Arc<Mutex<Txn>>>>,
    /// Which transactional id holds each producer id, for the check a
    /// transactional produce makes.
    by_producer: Mutex<HashMap<i64, Arc<str>>>,
    /// The ongoing transactions' timeouts.
    pub expiries: Purgatory<Arc<str>, TxnExpiry>,
    checks: Arc<Checks>,
}

impl TxnCoordinator {
    /// A coordinator with its purgatory on `kind`.
    pub fn new(kind: TimerKind, checks: Arc<Checks>) -> TxnCoordinator {
        TxnCoordinator {
            txns: Mutex::new(HashMap::new()),
            by_producer: Mutex::new(HashMap::new()),
            expiries: Purgatory::builder("TransactionTimeout")
                .timer(kind)
                .driver(Driver::Thread {
                    expiration_threads: 1,
                })
                .build()
                .expect("a valid purgatory configuration"),
            checks,
        }
    }

    fn txn(&self, id: &str) -> Option<Arc<Mutex<Txn>>> {
        self.txns.lock().get(id).cloned()
    }

    /// The transactional id's state that holds `producer_id`, if any.
    fn txn_of_producer(&self, producer_id: i64) -> Option<Arc<Mutex<Txn>>> {
        let id = self.by_producer.lock().get(&producer_id).cloned();
        id.and_then(|id| self.txn(&id))
    }

    /// InitProducerId for `id`: a new producer id at epoch 0 for a new
    /// transactional id; otherwise the next epoch, which fences any
    /// producer still using an older one, after aborting the transaction
    /// it left open. `expected` (a producer id and epoch, from v3) must be
    /// the current ones: a producer recovering from an error asks for the
    /// epoch after its own, and one fenced since is refused.
    pub fn init_producer(
        &self,
        cluster: &LiveCluster,
        id: &str,
        timeout: Duration,
        expected: Option<(i64, i16)>,
        fenced_error: i16,
    ) -> (Result<(i64, i16), i16>, Vec<Written>) {
        let txn = {
            let mut txns = self.txns.lock();
            match txns.get(id) {
                Some(t) => Arc::clone(t),
                None => {
                    let producer_id = cluster.new_producer_id();
                    let txn = Txn {
                        producer_id,
                        epoch: 0,
                        timeout,
                        state: TxnState::Empty,
                        partitions: BTreeMap::new(),
                        groups: BTreeSet::new(),
                        number: 0,
                        expiry: None,
                        deadline: Instant::now(),
                        started_ms: -1,
                    };
                    let id: Arc<str> = Arc::from(id);
                    self.by_producer.lock().insert(producer_id, Arc::clone(&id));
                    txns.insert(id, Arc::new(Mutex::new(txn)));
                    return (Ok((producer_id, 0)), Vec::new());
                }
            }
        };
        let mut t = txn.lock();
        if let Some(expected) = expected {
            if expected != (t.producer_id, t.epoch) {
                return (Err(fenced_error), Vec::new());
            }
        }
        let mut written = Vec::new();
        if t.state == TxnState::Ongoing {
            // The new instance's epoch fences the old one's appends, and the
            // markers are written with it.
            t.epoch = t.epoch.saturating_add(1);
            written = self.end(cluster, &mut t, false);
            Checks::bump(&self.checks.txns_aborted);
        }
        if t.epoch >= i16::MAX - 1 {
            // Epochs run out: a new producer id starts again at 0.
            let mut by_producer = self.by_producer.lock();
            by_producer.remove(&t.producer_id);
            t.producer_id = cluster.new_producer_id();
            by_producer.insert(t.producer_id, Arc::from(id));
            t.epoch = 0;
        } else {
            t.epoch += 1;
        }
        t.timeout = timeout;
        t.state = TxnState::Empty;
        (Ok((t.producer_id, t.epoch)), written)
    }

    /// The transaction of `id`, locked, if `producer_id` and `epoch` are
    /// its current ones: INVALID_PRODUCER_ID_MAPPING for an id the
    /// coordinator does not know or that has another producer id, and
    /// `fenced_error` (PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for older
    /// clients) for an older epoch.
    fn current(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        fenced_error: i16,
        then: impl FnOnce(&mut Txn) -> Result<Vec<Written>, i16>,
    ) -> (Result<(), i16>, Vec<Written>) {
        let Some(txn) = self.txn(id) else {
            return (
                Err(ResponseError::InvalidProducerIdMapping.code()),
                Vec::new(),
            );
        };
        let mut t = txn.lock();
        if t.producer_id != producer_id {
            return (
                Err(ResponseError::InvalidProducerIdMapping.code()),
                Vec::new(),
            );
        }
        if t.epoch != epoch {
            return (Err(fenced_error), Vec::new());
        }
        match then(&mut t) {
            Ok(written) => (Ok(()), written),
            Err(e) => (Err(e), Vec::new()),
        }
    }

    /// Starts the transaction if none is ongoing: its timeout is parked.
    fn begin(&self, cluster: &Arc<LiveCluster>, id: &str, t: &mut Txn) {
        if t.state == TxnState::Ongoing {
            return;
        }
        t.state = TxnState::Ongoing;
        t.number += 1;
        t.deadline = Instant::now() + t.timeout;
        t.started_ms = now_ms();
        let key: Arc<str> = Arc::from(id);
        let op = TxnExpiry {
            cluster: Arc::downgrade(cluster),
            transactional_id: Arc::clone(&key),
            number: t.number,
            timeout: t.timeout,
            checks: Arc::clone(&self.checks),
            answered: false,
        };
        // Refused only while shutting down: the transaction then has no
        // timeout, and ends with the cluster.
        if let Ok(handle) = self.expiries.try_complete_else_watch(op, &[key]) {
            Checks::bump(&self.checks.parked);
            t.expiry = Some(handle.completer());
        }
    }

    /// AddPartitionsToTxn: `partitions` join `id`'s transaction, which
    /// begins if it had not.
    pub fn add_partitions(
        &self,
        cluster: &Arc<LiveCluster>,
        id: &str,
        producer: (i64, i16),
        fenced_error: i16,
        partitions: Vec<Arc<Partition>>,
    ) -> Result<(), i16> {
        self.current(id, producer.0, producer.1, fenced_error, |t| {
            self.begin(cluster, id, t);
            for p in partitions {
                t.partitions.insert(p.key, p);
            }
            Ok(Vec::new())
        })
        .0
    }

    /// AddOffsetsToTxn: the transaction commits offsets of `group`.
    pub fn add_group(
        &self,
        cluster: &Arc<LiveCluster>,
        id: &str,
        producer: (i64, i16),
        fenced_error: i16,
        group: &str,
    ) -> Result<(), i16> {
        self.current(id, producer.0, producer.1, fenced_error, |t| {
            self.begin(cluster, id, t);
            t.groups.insert(group.to_string());
            Ok(Vec::new())
        })
        .0
    }

    /// EndTxn: commits or aborts `id`'s ongoing transaction. Asking again
    /// for the outcome it had (a retry whose answer was lost) succeeds;
    /// anything else with no transaction ongoing is INVALID_TXN_STATE.
    pub fn end_txn(
        &self,
        cluster: &LiveCluster,
        id: &str,
        producer: (i64, i16),
        fenced_error: i16,
        commit: bool,
    ) -> (Result<(), i16>, Vec<Written>) {
        self.current(id, producer.0, producer.1, fenced_error, |t| {
            match (t.state, commit) {
                (TxnState::Ongoing, _) => {
                    Checks::bump(if commit {
                        &self.checks.txns_committed
                    } else {
                        &self.checks.txns_aborted
                    });
                    Ok(self.end(cluster, t, commit))
                }
                (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                    Ok(Vec::new())
                }
                _ => Err(ResponseError::InvalidTxnState.code()),
            }
        })
    }

    /// Aborts transaction number `number` of `id` if it is still the
    /// ongoing one: its timeout ran out. The producer is fenced (a new
    /// epoch), as Kafka's coordinator fences it.
    pub fn timed_out(&self, cluster: &LiveCluster, id: &str, number: u64) -> Vec<Written> {
        let Some(txn) = self.txn(id) else {
            return Vec::new();
        };
        let mut t = txn.lock();
        if t.state != TxnState::Ongoing || t.number != number {
            return Vec::new();
        }
        t.expiry = None;
        t.epoch = t.epoch.saturating_add(1);
        Checks::bump(&self.checks.txns_expired);
        self.end(cluster, &mut t, false)
    }

    /// Ends the ongoing transaction: a marker at the transaction's epoch in
    /// each of its partitions, and its offsets settled in each group.
    fn end(&self, cluster: &LiveCluster, t: &mut Txn, commit: bool) -> Vec<Written> {
        let mut written = Vec::new();
        for (_, p) in std::mem::take(&mut t.partitions) {
            let mut log = p.log.lock();
            if log.deleted {
                continue;
            }
            let hw = log.hw;
            let end = log.append_marker(t.producer_id, t.epoch, COORDINATOR_EPOCH, commit);
            let followers = log.followers();
            let moved = log.hw != hw;
            drop(log);
            written.push((p, followers, end, moved));
        }
        for group in std::mem::take(&mut t.groups) {
            cluster
                .groups
                .end_txn_offsets(&group, t.producer_id, commit);
        }
        t.state = if commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        if let Some(expiry) = t.expiry.take() {
            // Its `on_complete` takes no lock for a forced completion.
            expiry.force_complete();
        }
        written
    }

    /// Runs `append` if `producer_id` at `epoch` has a transaction ongoing
    /// that holds partition `key`, with the transaction locked so that it
    /// cannot end meanwhile (its marker would then come before these
    /// records); otherwise INVALID_PRODUCER_EPOCH for an older epoch, or
    /// INVALID_TXN_STATE.
    pub fn append_in<R>(
        &self,
        producer_id: i64,
        epoch: i16,
        key: u32,
        append: impl FnOnce() -> R,
    ) -> Result<R, i16> {
        let Some(txn) = self.txn_of_producer(producer_id) else {
            return Err(ResponseError::InvalidTxnState.code());
        };
        let t = txn.lock();
        if t.producer_id != producer_id || epoch < t.epoch {
            return Err(ResponseError::InvalidProducerEpoch.code());
        }
        if t.epoch != epoch || t.state != TxnState::Ongoing || !t.partitions.contains_key(&key) {
            return Err(ResponseError::InvalidTxnState.code());
        }
        Ok(append())
    }

    /// TxnOffsetCommit: `offsets` of `group`, committed in `producer`'s
    /// ongoing transaction, to which the group was added; `member` (from
    /// v3: the member id, instance id and generation) must be a member of
    /// the group's current generation.
    pub fn commit_offsets(
        &self,
        cluster: &LiveCluster,
        producer: (i64, i16),
        group: &str,
        member: Option<(String, Option<String>, i32)>,
        offsets: Offsets,
    ) -> Result<(), i16> {
        let (producer_id, epoch) = producer;
        let Some(txn) = self.txn_of_producer(producer_id) else {
            return Err(ResponseError::InvalidProducerIdMapping.code());
        };
        let t = txn.lock();
        if t.producer_id != producer_id || epoch != t.epoch {
            return Err(ResponseError::InvalidProducerEpoch.code());
        }
        if t.state != TxnState::Ongoing || !t.groups.contains(group) {
            return Err(ResponseError::InvalidTxnState.code());
        }
        let group = cluster.groups.group(group);
        let mut g = group.lock();
        if g.deleted {
            return Err(ResponseError::CoordinatorNotAvailable.code());
        }
        if let Some(c) = &g.consumer {
            let (member_id, epoch) = member.as_ref().map_or(("", -1), |m| (m.0.as_str(), m.2));
            c.validate_commit(member_id, epoch, true, 0)?;
        } else if let Some((member_id, instance, generation)) = member {
            g.validate(&member_id, instance.as_deref())?;
            if generation != g.generation {
                return Err(ResponseError::IllegalGeneration.code());
            }
        }
        g.txn_offsets
            .entry(producer_id)
            .or_default()
            .extend(offsets);
        Ok(())
    }

    /// Sets the timeout of each ongoing transaction of the ids for which
    /// `of` holds to run until its own deadline or `not_before(id)`,
    /// whichever is later (at once if both have passed). The cluster holds
    /// them so while their coordinator has crashed and is not fenced yet:
    /// nothing runs at a broker that is gone, and Kafka's next coordinator
    /// aborts a transaction only once it has loaded it, and then if its
    /// start plus its timeout has passed.
    pub fn retime(&self, of: impl Fn(&str) -> bool, not_before: impl Fn(&str) -> Instant) {
        for id in self.ids_where(of) {
            let Some(txn) = self.txn(&id) else {
                continue;
            };
            let t = txn.lock();
            if t.state != TxnState::Ongoing {
                continue;
            }
            if let Some(expiry) = &t.expiry {
                let until = t.deadline.max(not_before(&id));
                expiry.reset_timeout(until.saturating_duration_since(Instant::now()));
            }
        }
    }

    /// The transactions of the ids for which `of` holds, by id.
    pub fn views_where(&self, of: impl Fn(&str) -> bool) -> Vec<TxnView> {
        let txns: Vec<(Arc<str>, Arc<Mutex<Txn>>)> = (self.txns.lock().iter())
            .filter(|(id, _)| of(id))
            .map(|(id, t)| (Arc::clone(id), Arc::clone(t)))
            .collect();
        let mut views: Vec<TxnView> = txns
            .into_iter()
            .map(|(id, t)| view(id, &t.lock()))
            .collect();
        views.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        views
    }

    /// The transaction of `id`, if the coordinator knows it.
    pub fn view(&self, id: &str) -> Option<TxnView> {
        let (id, txn) = {
            let txns = self.txns.lock();
            let (id, txn) = txns.get_key_value(id)?;
            (Arc::clone(id), Arc::clone(txn))
        };
        let t = txn.lock();
        Some(view(id, &t))
    }

    /// The transactional ids for which `of` holds.
    pub fn ids_where(&self, of: impl Fn(&str) -> bool) -> std::collections::HashSet<Arc<str>> {
        self.txns
            .lock()
            .keys()
            .filter(|id| of(id))
            .cloned()
            .collect()
    }

    /// Operations its purgatory holds.
    pub fn pending(&self) -> usize {
        self.expiries.delayed()
    }

    /// Watch entries its purgatory holds.
    pub fn watched(&self) -> usize {
        self.expiries.watched()
    }

    /// Answers every parked timeout (the transactions stay as they are).
    pub fn shutdown(&self) {
        self.expiries.shutdown();
    }
}
