//! The cluster that real Kafka clients talk to: brokers with produce and
//! fetch purgatories, topics whose partitions store record batches
//! byte-exact (with their idempotent producers' sequence state), and
//! simulated followers that replicate them and move the high watermark.
//! It answers decoded requests (the [`Service`](crate::wire::Service)
//! behind the wire front: `service.rs` for data, `group_service.rs` and
//! `group_admin.rs` for consumer groups, `consumer_group_service.rs` for
//! the consumer group protocol (KIP-848), `share_group_service.rs` and
//! `share/` for share groups (KIP-932), `txn_service.rs` for
//! transactions and `txn_admin.rs` for their admin calls, `admin.rs` for
//! producer ids and topics) and knows
//! nothing of sockets.

mod acls;
mod admin;
mod alter_configs;
mod authentication;
mod authorization;
mod authorizer;
mod batch_header;
mod batch_records;
mod checks;
mod client_quotas;
mod configs;
mod consumer_group_service;
mod delete_records;
mod describe_cluster;
mod describe_topic_partitions;
mod elect_leaders;
mod features;
mod fetch_sessions;
mod group_admin;
mod group_service;
mod groups;
mod leader_epochs;
mod leader_hints;
mod list_config_resources;
mod log;
mod log_dirs;
mod log_memory;
mod offset_for_leader_epoch;
mod ops;
mod partition_txns;
mod produce_framing;
mod producers;
mod quota_rate;
mod reassignment;
mod recompress;
mod replication;
mod request_time;
mod scram_credentials;
mod service;
mod share;
mod share_group_service;
mod throttling;
mod topic_config;
mod topics;
mod txn_admin;
mod txn_service;
mod txns;
#[cfg(test)]
mod untrusted_batches;
mod write_txn_markers;

pub use batch_records::RecordsError;
pub use checks::Checks;
pub use groups::{
    GroupConfig, GroupState, MigrationPolicy, DEFAULT_SHARE_GROUP_MAX_SIZE, UNLIMITED_GROUP_SIZE,
};
pub use log::{AppendError, AppendRules, Appended, MinInsync, PartitionLog, StoredBatch};
pub use log_memory::default_log_memory;
pub use producers::{ProducerBatch, Producers, SequenceError, Verdict};
pub use service::{BrokerService, APIS};
pub use topics::{valid_topic_name, Partition, Topic};

use crate::config::{Fault, TimerChoice};
use kafka_protocol::error::ResponseError;
use ops::{WireDeleteRecords, WireFetch, WireProduce};
use parking_lot::RwLock;
use purgatory::{Driver, Purgatory, TimerKind};
use replication::FollowerQueue;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
pub use topic_config::TopicConfig;
use uuid::Uuid;

/// How the served cluster is set up.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// Brokers in the cluster.
    pub brokers: u32,
    /// Partitions of an automatically created topic.
    pub partitions: u32,
    /// Replicas of each partition (at most the brokers).
    pub replication_factor: u32,
    /// `min.insync.replicas`.
    pub min_insync: u32,
    /// Kafka's `auto.create.topics.enable`.
    pub auto_create: bool,
    /// How long a batch takes to reach each follower (by broker id; the
    /// last value repeats for the brokers beyond).
    pub follower_latency: Vec<Duration>,
    /// `replica.lag.time.max.ms`.
    pub replica_lag: Duration,
    /// `message.max.bytes`: the largest batch set accepted per partition.
    pub message_max_bytes: usize,
    /// `log.retention.bytes`: the most each partition keeps; past it the
    /// oldest batches below the high watermark are deleted (the logs are
    /// in memory, so unlike Kafka's default of no limit there is one).
    pub retention_bytes: u64,
    /// `log.retention.ms`: how long a batch is kept after its newest
    /// record's timestamp, for topics that set no `retention.ms`; `None`
    /// keeps records for ever (here the default: Kafka's is 7 days).
    pub retention_ms: Option<u64>,
    /// The most all the logs hold together, in bytes: past it, the oldest
    /// batches over all partitions are deleted (`log_memory.rs`). `None`:
    /// no bound (here the default; `--serve`'s is half the memory).
    pub log_memory: Option<u64>,
    /// The users given passwords on the command line (`--sasl-user`), as
    /// Kafka's JAAS configuration lists PLAIN's users. With any, every
    /// listener is SASL_PLAINTEXT: a client authenticates with PLAIN as one
    /// of them, or with SCRAM-SHA-256 or SCRAM-SHA-512 as any user with a
    /// SCRAM credential (these users get both at the start). Without any,
    /// the listeners are plaintext and authenticate nobody.
    pub sasl_users: BTreeMap<String, String>,
    /// Kafka's `connections.max.reauth.ms` (KIP-368): how long a SASL
    /// login lasts on its connection; the client authenticates again
    /// there before then, or the connection is closed at its next
    /// request. `None`, the default (Kafka's 0): for the connection's life.
    pub sasl_reauth: Option<Duration>,
    /// Kafka's standard authorizer, on (`--authorizer`): every request is
    /// checked against the ACLs that CreateAcls adds, as Kafka's brokers
    /// check them. `None`, the default: no authorizer, every client may do
    /// everything, and the ACL APIs answer SECURITY_DISABLED.
    pub authorization: Option<Authorization>,
    /// The purgatories' timer.
    pub timer: TimerChoice,
    /// Slow followers and crashes, timed from the start (other faults are
    /// the simulated traffic's and are ignored here).
    pub faults: Vec<Fault>,
    /// The group coordinator's settings.
    pub groups: groups::GroupConfig,
    /// Kafka's `broker.session.timeout.ms`: how long after a crash the
    /// controller fences the broker (at the first ISR check after it, so
    /// within 100 ms). Until then the cluster still counts
    /// it in (listed in Metadata, leading its partitions, in their ISRs,
    /// coordinating its groups), though nothing answers there; then its
    /// partitions and groups move. Zero (the default here, so that a
    /// test fails over at once; Kafka's, and `--serve`'s, is 9 s) fences
    /// it at the crash. The sessions of the groups it
    /// coordinates are held meanwhile, as nothing expires them at a
    /// coordinator that is gone.
    pub broker_session_timeout: Duration,
    /// Kafka's `group.share.record.lock.duration.ms`: how long a share
    /// group member holds the records it was handed, for groups that set
    /// no `share.record.lock.duration.ms` of their own.
    pub share_record_lock: Duration,
}

/// The authorizer's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Authorization {
    /// Kafka's `super.users`: principals (`User:NAME`) that may do
    /// everything, whatever the ACLs say.
    pub super_users: BTreeSet<String>,
    /// Kafka's `allow.everyone.if.no.acl.found`: a resource no ACL names
    /// is open to everyone (off: to super users only).
    pub allow_everyone_if_no_acl_found: bool,
}

/// Each partition's retention by default: 1 GiB, Kafka's segment size.
pub const DEFAULT_RETENTION_BYTES: u64 = 1 << 30;

impl LiveConfig {
    /// A cluster of one broker, which leads every partition and
    /// coordinates every group (one replica; `min.insync.replicas` 1).
    pub fn one_broker() -> Self {
        LiveConfig {
            brokers: 1,
            replication_factor: 1,
            min_insync: 1,
            ..LiveConfig::default()
        }
    }
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            brokers: 3,
            partitions: 3,
            replication_factor: 3,
            min_insync: 2,
            auto_create: true,
            follower_latency: vec![Duration::from_millis(2)],
            replica_lag: Duration::from_secs(30),
            message_max_bytes: 1024 * 1024 + 12,
            retention_bytes: DEFAULT_RETENTION_BYTES,
            retention_ms: None,
            log_memory: None,
            sasl_users: BTreeMap::new(),
            sasl_reauth: None,
            authorization: None,
            timer: TimerChoice::Wheel,
            faults: Vec::new(),
            groups: groups::GroupConfig::default(),
            broker_session_timeout: Duration::ZERO,
            share_record_lock: share::RECORD_LOCK_DURATION,
        }
    }
}

/// One broker: where its connections send their requests.
pub struct Broker {
    /// Its node id.
    pub id: u32,
    /// False while crashed: its process is gone, it serves and
    /// replicates nothing.
    pub alive: AtomicBool,
    /// The controller's view: true from when a crashed broker is fenced
    /// (`LiveConfig::broker_session_timeout` after its crash) until it
    /// restarts. An unfenced broker is listed, leads and is in sync as
    /// far as the cluster knows, whether or not it is alive.
    pub fenced: AtomicBool,
    /// Its lives: one more at each crash and each restart, odd while it
    /// is down (see [`Broker::lives`]).
    lives: tokio::sync::watch::Sender<u64>,
    /// Parked `acks=all` produces, watched by partition key.
    pub produce: Purgatory<u32, WireProduce>,
    /// Parked fetches, watched by partition key.
    pub fetch: Purgatory<u32, WireFetch>,
    /// Parked DeleteRecords requests, watched by partition key.
    pub delete_records: Purgatory<u32, WireDeleteRecords>,
    /// Its consumers' incremental fetch sessions (KIP-227).
    pub fetch_sessions: fetch_sessions::FetchSessions,
    /// Parked share fetches (KIP-932), watched by partition key.
    pub(crate) share_fetch: Purgatory<u32, share::WireShareFetch>,
    /// Its clients' byte rates, measured against their quotas.
    pub(crate) throttles: throttling::Throttles,
    /// Connections throttled by a quota, waiting their time out (each
    /// under a key of its own).
    pub(crate) throttled: Purgatory<u64, throttling::ThrottledWait>,
    /// Its share group members' share sessions.
    pub(crate) share_sessions: share::ShareSessions,
    /// Batches on their way to this broker's follower replicas.
    followers: FollowerQueue,
}

impl Broker {
    /// Tells when this broker crashes and restarts: the count of both,
    /// odd while it is down. When it crashes, the wire front closes its
    /// listener and every connection to it, as a crashed Kafka broker's
    /// would be gone; when it restarts, the listener opens again.
    pub fn lives(&self) -> tokio::sync::watch::Receiver<u64> {
        self.lives.subscribe()
    }

    /// Starts its next life: down if it was up, up if it was down.
    fn next_life(&self) {
        self.lives.send_modify(|life| *life += 1);
    }
}

/// The served cluster.
pub struct LiveCluster {
    /// How it was set up.
    pub cfg: LiveConfig,
    /// Its brokers, by id.
    pub brokers: Vec<Broker>,
    topics: RwLock<HashMap<Arc<str>, Arc<Topic>>>,
    /// Each topic's name by its id; written under `topics`' write lock.
    topic_names: RwLock<HashMap<Uuid, Arc<str>>>,
    next_key: AtomicU32,
    /// The next producer id InitProducerId hands out.
    next_producer_id: AtomicI64,
    /// What the checks counted.
    pub checks: Arc<Checks>,
    /// Consumer groups, served by the leader of each group's offsets
    /// partition.
    pub(crate) groups: Arc<groups::GroupCoordinator>,
    /// Transactional producers, served by the broker a transactional id
    /// maps to as a group id does.
    pub(crate) txns: txns::TxnCoordinator,
    /// Share groups' state on each partition, and their records' locks.
    pub(crate) shares: share::ShareState,
    /// The ACLs, with `--authorizer`.
    pub(crate) authorizer: Option<authorizer::Authorizer>,
    /// Users' SCRAM credentials.
    pub(crate) scram: scram_credentials::ScramCredentials,
    /// The finalized feature levels (KIP-584).
    pub(crate) features: features::FeatureLevels,
    /// The client quotas set.
    pub(crate) client_quotas: client_quotas::ClientQuotas,
    /// The controller's meter of partition mutations, for their quota.
    pub(crate) mutations: throttling::MutationBuckets,
    /// Host and port each broker is reached at (set once bound).
    endpoints: RwLock<Vec<(String, i32)>>,
    stopping: AtomicBool,
    /// The logs held more than `cfg.log_memory` at the last check.
    log_memory_full: AtomicBool,
    replication: parking_lot::Mutex<Option<JoinHandle<()>>>,
    /// The follower thread, to wake it for a batch due before it would.
    follower_thread: std::sync::OnceLock<std::thread::Thread>,
    started: Instant,
    /// Crashes and restarts not yet done: (when, broker, whether it
    /// restarts), in time order.
    faults: parking_lot::Mutex<Vec<(Duration, u32, bool)>>,
    /// Crashed brokers not fenced yet, with when they will be.
    fences: parking_lot::Mutex<Vec<(Instant, u32)>>,
}

/// A transaction marker written again at a new leader: its partition,
/// the followers to send it to, and the log end after it.
type Rewritten = (Arc<Partition>, Vec<u32>, i64);

/// How often the ISR is checked; the follower thread sleeps at most this
/// long, and otherwise until the next batch is due at a follower.
const ISR_CHECK_EVERY: Duration = Duration::from_millis(100);

impl LiveCluster {
    /// A cluster of `cfg.brokers` brokers with no topics; its replication
    /// thread runs until [`shutdown`](Self::shutdown).
    pub fn start(cfg: LiveConfig) -> Arc<LiveCluster> {
        let kind = match cfg.timer {
            TimerChoice::Wheel => TimerKind::Wheel,
            TimerChoice::DelayQueue => TimerKind::DelayQueue {
                purge_interval: 1000,
            },
        };
        let driver = Driver::Thread {
            expiration_threads: 1,
        };
        let brokers = (0..cfg.brokers)
            .map(|id| Broker {
                id,
                alive: AtomicBool::new(true),
                fenced: AtomicBool::new(false),
                lives: tokio::sync::watch::Sender::new(0),
                produce: Purgatory::builder(format!("Produce-{id}"))
                    .timer(kind)
                    .driver(driver)
                    .build()
                    .expect("a valid purgatory configuration"),
                fetch: Purgatory::builder(format!("Fetch-{id}"))
                    .timer(kind)
                    .driver(driver)
                    .build()
                    .expect("a valid purgatory configuration"),
                delete_records: Purgatory::builder(format!("DeleteRecords-{id}"))
                    .timer(kind)
                    .driver(driver)
                    .build()
                    .expect("a valid purgatory configuration"),
                fetch_sessions: fetch_sessions::FetchSessions::default(),
                share_fetch: Purgatory::builder(format!("ShareFetch-{id}"))
                    .timer(kind)
                    .driver(driver)
                    .build()
                    .expect("a valid purgatory configuration"),
                share_sessions: share::ShareSessions::default(),
                throttles: throttling::Throttles::default(),
                throttled: Purgatory::builder(format!("Throttle-{id}"))
                    .timer(kind)
                    .driver(driver)
                    .build()
                    .expect("a valid purgatory configuration"),
                followers: FollowerQueue::default(),
            })
            .collect();
        let checks = Arc::new(Checks::default());
        let groups = groups::GroupCoordinator::new(cfg.groups.clone(), kind, Arc::clone(&checks));
        let txns = txns::TxnCoordinator::new(kind, Arc::clone(&checks));
        let mut faults: Vec<(Duration, u32, bool)> = cfg
            .faults
            .iter()
            .filter_map(|f| match *f {
                Fault::Crash { broker, at } if broker < cfg.brokers => Some((at, broker, false)),
                Fault::Restart { broker, at } if broker < cfg.brokers => Some((at, broker, true)),
                _ => None,
            })
            .collect();
        // A crash and a restart due at once happen in that order.
        faults.sort_by_key(|&(at, _, up)| (at, up));
        let shares = share::ShareState::new(kind, cfg.share_record_lock);
        let scram = scram_credentials::ScramCredentials::seeded(&cfg.sasl_users);
        let authorizer = (cfg.authorization.as_ref()).map(|a| {
            authorizer::Authorizer::new(a.super_users.clone(), a.allow_everyone_if_no_acl_found)
        });
        let cluster = Arc::new(LiveCluster {
            authorizer,
            cfg,
            brokers,
            topics: RwLock::new(HashMap::new()),
            topic_names: RwLock::new(HashMap::new()),
            next_key: AtomicU32::new(0),
            next_producer_id: AtomicI64::new(0),
            checks,
            groups,
            txns,
            shares,
            scram,
            features: Default::default(),
            client_quotas: Default::default(),
            mutations: Default::default(),
            endpoints: RwLock::new(Vec::new()),
            stopping: AtomicBool::new(false),
            log_memory_full: AtomicBool::new(false),
            replication: parking_lot::Mutex::new(None),
            follower_thread: std::sync::OnceLock::new(),
            started: Instant::now(),
            faults: parking_lot::Mutex::new(faults),
            fences: parking_lot::Mutex::new(Vec::new()),
        });
        let gone = Arc::downgrade(&cluster);
        cluster
            .groups
            .on_share_member_gone(Box::new(move |group, member| {
                if let Some(cluster) = gone.upgrade() {
                    cluster.share_member_gone(group, member);
                }
            }));
        let weak = Arc::downgrade(&cluster);
        let thread = std::thread::Builder::new()
            .name("followers".into())
            .spawn(move || {
                let mut last_isr_check = Instant::now();
                while let Some(cluster) = weak.upgrade() {
                    if cluster.stopping.load(Ordering::Acquire) {
                        break;
                    }
                    let now = Instant::now();
                    cluster.faults_due(now);
                    cluster.replicate(now);
                    if now.duration_since(last_isr_check) >= ISR_CHECK_EVERY {
                        // Within 100 ms of its time, as a controller notices
                        // a missed heartbeat at its next check.
                        cluster.fences_due(now);
                        cluster.check_isr(now);
                        cluster.elect_preferred_leaders();
                        cluster.elect_unclean_leaders();
                        cluster.expire_by_time();
                        cluster.bound_log_memory();
                        last_isr_check = now;
                    }
                    let wake = cluster
                        .brokers
                        .iter()
                        .filter_map(|b| b.followers.next_due())
                        .chain([last_isr_check + ISR_CHECK_EVERY])
                        .min()
                        .expect("the ISR check is always there");
                    drop(cluster);
                    // An append due sooner unparks it (`replicate_later`).
                    std::thread::park_timeout(wake.saturating_duration_since(Instant::now()));
                }
            })
            .expect("spawn the follower thread");
        let _ = cluster.follower_thread.set(thread.thread().clone());
        *cluster.replication.lock() = Some(thread);
        cluster
    }

    /// Where each broker listens, for Metadata.
    pub fn set_endpoints(&self, endpoints: Vec<(String, i32)>) {
        *self.endpoints.write() = endpoints;
    }

    pub(crate) fn endpoints(&self) -> Vec<(String, i32)> {
        self.endpoints.read().clone()
    }

    /// The topic, if it exists.
    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().get(name).cloned()
    }

    /// The topic whose id is `id`, if it exists.
    pub fn topic_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        let name = self.topic_names.read().get(&id).cloned()?;
        self.topic(&name).filter(|t| t.id == id)
    }

    /// Every topic, by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        let mut all: Vec<_> = self.topics.read().values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Creates `name` with `partitions` partitions (the configured
    /// replication factor, leaders spread over the brokers), or returns it
    /// if it exists.
    pub fn create_topic(&self, name: &str, partitions: u32) -> Arc<Topic> {
        let replicas = self.spread(partitions, self.cfg.replication_factor);
        match self.create_topic_with(name, replicas, TopicConfig::default()) {
            Ok(topic) | Err(topic) => topic,
        }
    }

    /// Replica lists for `partitions` new partitions of `replication_factor`
    /// replicas (at most one per broker), their leaders spread over the
    /// brokers.
    pub(crate) fn spread(&self, partitions: u32, replication_factor: u32) -> Vec<Vec<u32>> {
        let n = self.cfg.brokers;
        let rf = replication_factor.min(n);
        let first = self.next_key.load(Ordering::Relaxed);
        (0..partitions)
            .map(|i| (0..rf).map(|r| (first + i + r) % n).collect())
            .collect()
    }

    /// Creates `name` with a partition for each replica list (the first
    /// replica its leader) and its own `config`; `Err` with the topic if
    /// it exists already.
    pub(crate) fn create_topic_with(
        &self,
        name: &str,
        replicas: Vec<Vec<u32>>,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, Arc<Topic>> {
        let mut topics = self.topics.write();
        if let Some(t) = topics.get(name) {
            return Err(Arc::clone(t));
        }
        let name: Arc<str> = Arc::from(name);
        let config = Arc::new(config);
        let now = Instant::now();
        let partitions = replicas
            .into_iter()
            .enumerate()
            .map(|(i, replicas)| {
                Arc::new(Partition {
                    key: self.next_key.fetch_add(1, Ordering::Relaxed),
                    topic: Arc::clone(&name),
                    config: Arc::clone(&config),
                    index: i as i32,
                    log: parking_lot::Mutex::new(self.new_log(replicas, &config, now)),
                })
            })
            .collect();
        let topic = Arc::new(Topic {
            name: Arc::clone(&name),
            id: topics::new_topic_id(),
            config,
            partitions,
        });
        self.topic_names.write().insert(topic.id, Arc::clone(&name));
        topics.insert(name, Arc::clone(&topic));
        Ok(topic)
    }

    /// Adds a partition on each of `replicas` to `name`, which has `have`
    /// partitions (`Err` with the count it has if that changed, or 0 if it
    /// is gone). Requests that looked the topic up before see the old
    /// partitions, which stay as they are.
    pub(crate) fn grow_topic(
        &self,
        name: &str,
        have: usize,
        replicas: Vec<Vec<u32>>,
    ) -> Result<(), usize> {
        let mut topics = self.topics.write();
        let Some(topic) = topics.get(name) else {
            return Err(0);
        };
        if topic.partitions.len() != have {
            return Err(topic.partitions.len());
        }
        let now = Instant::now();
        let mut partitions = topic.partitions.clone();
        for (i, replicas) in replicas.into_iter().enumerate() {
            partitions.push(Arc::new(Partition {
                key: self.next_key.fetch_add(1, Ordering::Relaxed),
                topic: Arc::clone(&topic.name),
                config: Arc::clone(&topic.config),
                index: (have + i) as i32,
                log: parking_lot::Mutex::new(self.new_log(replicas, &topic.config, now)),
            }));
        }
        let grown = Arc::new(Topic {
            name: Arc::clone(&topic.name),
            id: topic.id,
            config: Arc::clone(&topic.config),
            partitions,
        });
        topics.insert(Arc::clone(&grown.name), grown);
        Ok(())
    }

    /// Deletes `name`, if it exists: its partitions lose their leader, the
    /// requests parked on them are answered (UNKNOWN_TOPIC_OR_PARTITION),
    /// and the groups forget their offsets in it. A request that looked
    /// the topic up just before finds it deleted when it reads or appends.
    /// With `id`, only the topic of that id: one made again under the
    /// name since the caller looked the id up is left alone.
    pub(crate) fn delete_topic(&self, name: &str, id: Option<Uuid>) -> Option<Arc<Topic>> {
        let topic = {
            let mut topics = self.topics.write();
            if id.is_some_and(|id| topics.get(name).is_some_and(|t| t.id != id)) {
                return None;
            }
            let topic = topics.remove(name)?;
            self.topic_names.write().remove(&topic.id);
            topic
        };
        for p in &topic.partitions {
            let mut log = p.log.lock();
            log.deleted = true;
            log.leader = None;
            log.isr.clear();
        }
        // Parked requests wait at their partition's leader, but a cancel
        // where nothing waits costs a lookup, and no leader is missed.
        for broker in &self.brokers {
            for p in &topic.partitions {
                broker.produce.cancel_for_key(&p.key);
                broker.fetch.cancel_for_key(&p.key);
                broker.delete_records.cancel_for_key(&p.key);
                broker.share_fetch.cancel_for_key(&p.key);
            }
        }
        self.groups.forget_topic(name);
        self.shares.forget_topic(topic.id);
        Some(topic)
    }

    /// An empty partition on `replicas`, led by the first live one, with
    /// the live ones in sync: a crashed broker neither leads nor counts
    /// towards the ISR of a partition made after it went down.
    fn new_log(&self, replicas: Vec<u32>, config: &Arc<TopicConfig>, now: Instant) -> PartitionLog {
        let mut log = PartitionLog::new(replicas, now);
        log.min_insync = MinInsync {
            topic: Arc::clone(config),
            broker: self.cfg.min_insync,
        };
        log.isr.retain(|&b| self.is_unfenced(b));
        log.leader = log.isr.first().copied();
        log
    }

    /// A producer id never handed out before in this cluster.
    pub(crate) fn new_producer_id(&self) -> i64 {
        self.next_producer_id.fetch_add(1, Ordering::Relaxed)
    }

    /// After an append of `p` up to `end` on its leader: sends the batch on
    /// its way to each follower.
    pub(crate) fn replicate_later(&self, p: &Arc<Partition>, followers: &[u32], end: i64) {
        let now = Instant::now();
        let since_start = now.duration_since(self.started);
        for &f in followers {
            let mut latency = self
                .cfg
                .follower_latency
                .get(f as usize)
                .or(self.cfg.follower_latency.last())
                .copied()
                .unwrap_or_default();
            for fault in &self.cfg.faults {
                if let Fault::SlowFollower {
                    broker,
                    from,
                    until,
                    delay,
                } = *fault
                {
                    if broker == f && (from..until).contains(&since_start) {
                        latency += delay;
                    }
                }
            }
            self.brokers[f as usize]
                .followers
                .push(now + latency, Arc::clone(p), end);
        }
        // The thread may be asleep until a later batch or the ISR check.
        if let Some(t) = self.follower_thread.get() {
            t.unpark();
        }
    }

    /// Each follower takes what has reached it; the leaders check their
    /// purgatories for every partition whose high watermark moved.
    fn replicate(&self, now: Instant) {
        let mut moved = Vec::new();
        let mut reassigned = Vec::new();
        for b in &self.brokers {
            for (p, end) in b.followers.due(now) {
                if !b.alive.load(Ordering::Acquire) {
                    continue;
                }
                let caught_up = replication::follower_caught_up(&p, b.id, end, now);
                if caught_up.may_finish_reassignment {
                    reassigned.push(Arc::clone(&p));
                }
                if caught_up.check {
                    moved.push(p);
                }
            }
        }
        for p in reassigned {
            self.finish_reassignment(&p);
        }
        self.check_moved(moved);
    }

    /// Crashes and restarts the brokers whose time has come, in the order
    /// they were due.
    fn faults_due(&self, now: Instant) {
        let since_start = now.duration_since(self.started);
        let due: Vec<(Duration, u32, bool)> = {
            let mut faults = self.faults.lock();
            let due = faults
                .iter()
                .filter(|(at, _, _)| *at <= since_start)
                .copied()
                .collect();
            faults.retain(|(at, _, _)| *at > since_start);
            due
        };
        for (_, b, up) in due {
            if up {
                self.restart(b);
            } else {
                self.crash(b);
            }
        }
    }

    /// Broker `dead` stops: its connections close (before anything below
    /// is answered, so no client hears from it again), its fetch sessions
    /// and the batches on their way to it are gone, and what was parked
    /// on it is answered at once inside (with NOT_LEADER_OR_FOLLOWER, on
    /// connections that are gone). The controller fences it then, or
    /// `broker_session_timeout` later (`fence`, below).
    pub fn crash(&self, dead: u32) {
        let Some(broker) = self.brokers.get(dead as usize) else {
            return;
        };
        if !broker.alive.load(Ordering::Acquire) {
            return;
        }
        broker.alive.store(false, Ordering::Release);
        broker.next_life();
        broker.followers.clear();
        broker.fetch_sessions.clear();
        broker.share_sessions.clear();
        broker.throttles.clear();
        let led: Vec<u32> = self
            .topics()
            .iter()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| p.log.lock().leader == Some(dead))
            .map(|p| p.key)
            .collect();
        self.cancel_parked(broker, led);
        tracing::info!(broker = dead, "broker crashed");
        let timeout = self.cfg.broker_session_timeout;
        if timeout.is_zero() {
            self.fence(dead);
        } else {
            self.groups
                .hold_sessions(|g| self.group_coordinator(g) == Some(dead), timeout);
            self.fences.lock().push((Instant::now() + timeout, dead));
            self.retime_txns(|id| self.txn_coordinator(id) == Some(dead));
        }
    }

    /// The controller fences crashed broker `dead`: it leaves every ISR,
    /// each partition it led gets the first unfenced in-sync replica as
    /// leader (its log cut back to what that replica has, which holds
    /// every acknowledged record), and the groups it coordinated move.
    fn fence(&self, dead: u32) {
        let broker = &self.brokers[dead as usize];
        self.fences.lock().retain(|&(_, b)| b != dead);
        if broker.fenced.load(Ordering::Acquire) {
            return;
        }
        let coordinators = self.coordinators();
        let coordinated = self
            .txns
            .ids_where(|id| self.txn_coordinator(id) == Some(dead));
        broker.fenced.store(true, Ordering::Release);
        self.move_groups_from(coordinators);
        self.retime_txns(|id| coordinated.contains(id));
        let mut moved = Vec::new();
        let mut rewritten = Vec::new();
        for topic in self.topics() {
            for p in &topic.partitions {
                let mut log = p.log.lock();
                log.isr.retain(|&b| b != dead);
                if log.leader == Some(dead) {
                    let next = self.next_leader(&mut log, p.config.unclean_election());
                    rewritten.extend(self.hand_over(p, &mut log, next));
                }
                if log.advance_hw() {
                    moved.push(Arc::clone(p));
                }
            }
        }
        self.after_hand_overs(rewritten, moved);
        tracing::info!(broker = dead, "broker fenced");
    }

    /// Retimes the ongoing transactions of the ids for which `of` holds
    /// ([`TxnCoordinator::retime`](txns::TxnCoordinator::retime)): one
    /// whose coordinator has crashed and is not fenced yet does not time
    /// out before the fencing, which retimes it again; the others run to
    /// their own deadlines.
    fn retime_txns(&self, of: impl Fn(&str) -> bool) {
        let now = Instant::now();
        // Held a window past the fencing, so that the timeout cannot run
        // out in the moment between the fencing's due time and the fencing.
        let margin = self.cfg.broker_session_timeout;
        self.txns.retime(of, |id| {
            self.unnoticed_until(self.txn_coordinator(id))
                .map_or(now, |at| at + margin)
        });
    }

    /// When the controller fences broker `b`, if it has crashed and is not
    /// fenced yet.
    fn unnoticed_until(&self, b: Option<u32>) -> Option<Instant> {
        let b = b?;
        self.fences
            .lock()
            .iter()
            .find(|&&(_, x)| x == b)
            .map(|&(at, _)| at)
    }

    /// Fences the crashed brokers whose session has run out.
    fn fences_due(&self, now: Instant) {
        let due: Vec<u32> = {
            let fences = self.fences.lock();
            fences
                .iter()
                .filter(|&&(at, _)| at <= now)
                .map(|&(_, b)| b)
                .collect()
        };
        for b in due {
            self.fence(b);
        }
    }

    /// Broker `back`, crashed before, starts again: its listener opens,
    /// the groups whose coordinator it is move back to it, and it fetches
    /// what it missed of each partition it holds a replica of, rejoining
    /// the ISR once it has caught up (and then, as the preferred replica,
    /// taking back its leaderships: `elect_preferred_leaders`). A
    /// partition that nobody led gets it as leader if it holds every
    /// committed record; otherwise it stays offline, as with Kafka's
    /// unclean leader election off, unless its topic sets
    /// `unclean.leader.election.enable`: then it leads with what it has.
    pub fn restart(&self, back: u32) {
        let Some(broker) = self.brokers.get(back as usize) else {
            return;
        };
        if broker.alive.load(Ordering::Acquire) {
            return;
        }
        // Back before its session ran out: the controller fences the
        // crashed incarnation first, as KRaft's does when a broker
        // registers again.
        self.fence(back);
        let coordinators = self.coordinators();
        broker.alive.store(true, Ordering::Release);
        broker.fenced.store(false, Ordering::Release);
        self.move_groups_from(coordinators);
        let mut catch_up = Vec::new();
        let mut followers_back = Vec::new();
        let mut moved = Vec::new();
        let mut rewritten = Vec::new();
        for topic in self.topics() {
            for p in &topic.partitions {
                let mut log = p.log.lock();
                let Some(i) = log.replica_index(back) else {
                    continue;
                };
                if log.deleted {
                    continue;
                }
                // Its log holds no more than the log it left: every leader
                // change since cut each replica's, its own included. What
                // was deleted meanwhile, it deletes too.
                log.replica_log_start[i] = log.replica_log_start[i].max(log.log_start);
                log.replica_leo[i] = log.replica_leo[i].max(log.log_start);
                if log.leader.is_some() {
                    catch_up.push((Arc::clone(p), log.log_end()));
                } else if log.replica_leo[i] >= log.hw || p.config.unclean_election() {
                    log.isr = vec![back];
                    rewritten.extend(self.hand_over(p, &mut log, Some(back)));
                    if log.advance_hw() {
                        moved.push(Arc::clone(p));
                    }
                    // The other live replicas had nobody to fetch from:
                    // they fetch from it now (a reassignment's new ones
                    // among them).
                    let others: Vec<u32> = (log.replicas.iter().copied())
                        .filter(|&r| r != back && self.is_unfenced(r))
                        .collect();
                    followers_back.push((Arc::clone(p), others, log.log_end()));
                }
            }
        }
        for (p, end) in catch_up {
            self.replicate_later(&p, &[back], end);
        }
        for (p, others, end) in followers_back {
            self.replicate_later(&p, &others, end);
        }
        self.after_hand_overs(rewritten, moved);
        // Last: a client that connects finds the broker's state ready.
        broker.next_life();
        tracing::info!(broker = back, "broker restarted");
    }

    /// Kafka's automatic leader rebalance, with no imbalance allowed: each
    /// partition whose preferred (first) replica is up and in sync but
    /// does not lead is handed to it, from a leader that is up. What was
    /// parked at the old leader for it is answered with
    /// NOT_LEADER_OR_FOLLOWER, and its clients go to the new one.
    fn elect_preferred_leaders(&self) {
        let mut moved = Vec::new();
        let mut rewritten = Vec::new();
        let mut led_away: Vec<(u32, u32)> = Vec::new();
        for topic in self.topics() {
            for p in &topic.partitions {
                let mut log = p.log.lock();
                if log.leader.is_none() || log.deleted {
                    continue;
                }
                if let Ok(old) = self.elect_locked(p, &mut log, false, &mut rewritten) {
                    led_away.extend(old.map(|old| (old, p.key)));
                    if log.advance_hw() {
                        moved.push(Arc::clone(p));
                    }
                }
            }
        }
        for (old, key) in led_away {
            self.cancel_parked(&self.brokers[old as usize], vec![key]);
        }
        self.after_hand_overs(rewritten, moved);
    }

    /// Kafka's controller's periodic unclean elections: each partition
    /// with no leader whose topic now allows an unclean election
    /// (`unclean.leader.election.enable` set after it went offline) goes
    /// to a live replica. Kafka checks every five minutes; this broker
    /// with its other checks, every 100 ms.
    fn elect_unclean_leaders(&self) {
        let mut moved = Vec::new();
        let mut rewritten = Vec::new();
        for topic in self.topics() {
            if !topic.config.unclean_election() {
                continue;
            }
            for p in &topic.partitions {
                let mut log = p.log.lock();
                if log.leader.is_some() || log.deleted {
                    continue;
                }
                if self.elect_locked(p, &mut log, true, &mut rewritten).is_ok() && log.advance_hw()
                {
                    moved.push(Arc::clone(p));
                }
            }
        }
        self.after_hand_overs(rewritten, moved);
    }

    /// ElectLeaders for partition `p`, as Kafka's controller runs it: a
    /// preferred election hands the partition to its first replica if that
    /// one is up and in sync (PREFERRED_LEADER_NOT_AVAILABLE otherwise); an
    /// unclean one gives a partition with no leader to a live replica, in
    /// sync if one is, otherwise any, which then holds the log as far as
    /// it has it: records acknowledged beyond that are lost, which is what
    /// `unclean` asks for (ELIGIBLE_LEADERS_NOT_AVAILABLE if none is up).
    /// ELECTION_NOT_NEEDED where the leader is already the one asked for.
    pub(crate) fn elect(&self, p: &Arc<Partition>, unclean: bool) -> Result<(), ResponseError> {
        let mut rewritten = Vec::new();
        let mut log = p.log.lock();
        if log.deleted {
            return Err(ResponseError::UnknownTopicOrPartition);
        }
        let old = self.elect_locked(p, &mut log, unclean, &mut rewritten)?;
        self.after_leader_change(p, log, old, rewritten);
        Ok(())
    }

    /// What follows a change of `p`'s leadership away from `old` (if it
    /// led), made under `log`, its lock: the high watermark may move, what
    /// `old` held parked for `p` is answered, and the markers written again
    /// go to their followers.
    fn after_leader_change(
        &self,
        p: &Arc<Partition>,
        mut log: parking_lot::MutexGuard<'_, PartitionLog>,
        old: Option<u32>,
        rewritten: Vec<Rewritten>,
    ) {
        let moved = log.advance_hw();
        drop(log);
        if let Some(old) = old {
            self.cancel_parked(&self.brokers[old as usize], vec![p.key]);
        }
        self.after_hand_overs(
            rewritten,
            moved.then(|| Arc::clone(p)).into_iter().collect(),
        );
    }

    /// [`elect`](Self::elect) under the partition's lock; returns the
    /// leader it replaced, if any.
    fn elect_locked(
        &self,
        p: &Arc<Partition>,
        log: &mut PartitionLog,
        unclean: bool,
        rewritten: &mut Vec<Rewritten>,
    ) -> Result<Option<u32>, ResponseError> {
        let old = log.leader;
        let next = if unclean {
            if old.is_some() {
                return Err(ResponseError::ElectionNotNeeded);
            }
            let next = self.next_leader(log, true);
            let next = next.ok_or(ResponseError::EligibleLeadersNotAvailable)?;
            log.isr = vec![next];
            next
        } else {
            let preferred = *log
                .replicas
                .first()
                .ok_or(ResponseError::PreferredLeaderNotAvailable)?;
            if old == Some(preferred) {
                return Err(ResponseError::ElectionNotNeeded);
            }
            if !self.is_unfenced(preferred) || !log.isr.contains(&preferred) {
                return Err(ResponseError::PreferredLeaderNotAvailable);
            }
            preferred
        };
        rewritten.extend(self.hand_over(p, log, Some(next)));
        Ok(old)
    }

    /// Who leads `log`'s partition next: its first live in-sync replica;
    /// with none and `unclean`, its first live replica out of sync, which
    /// then is the ISR and leads with what it has.
    fn next_leader(&self, log: &mut PartitionLog, unclean: bool) -> Option<u32> {
        let live = |b: &u32| self.is_unfenced(*b);
        let in_sync = log.isr.iter().copied().find(live);
        if in_sync.is_some() || !unclean {
            return in_sync;
        }
        let out_of_sync = log.replicas.iter().copied().find(live);
        log.isr = out_of_sync.into_iter().collect();
        out_of_sync
    }

    /// What follows leadership changes: the markers written again go to
    /// their followers, and the purgatories are checked where a high
    /// watermark moved.
    fn after_hand_overs(&self, rewritten: Vec<Rewritten>, moved: Vec<Arc<Partition>>) {
        for (p, followers, end) in rewritten {
            self.replicate_later(&p, &followers, end);
        }
        self.check_moved(moved);
    }

    /// Leadership of `p` moves to `next` (`None`: offline, and nobody is in
    /// sync) in a new epoch; the log is cut back to what `next` has, which
    /// holds every acknowledged record. Returns a transaction marker
    /// written again at the new log end, for its followers.
    fn hand_over(
        &self,
        p: &Arc<Partition>,
        log: &mut PartitionLog,
        next: Option<u32>,
    ) -> Option<Rewritten> {
        Checks::bump(&self.checks.leader_changes);
        log.leader = next;
        log.epoch += 1;
        let Some(leader) = next else {
            log.isr.clear();
            return None;
        };
        let i = log.replica_index(leader)?;
        let end = log.replica_leo[i];
        let rewrote = log.truncate(end);
        // Its epoch starts at its log end, where a marker written again
        // (stamped with this epoch) lands.
        log.epochs.assign(log.epoch, end);
        if !rewrote {
            return None;
        }
        let followers: Vec<u32> = log
            .replicas
            .iter()
            .copied()
            .filter(|&r| r != leader && self.is_unfenced(r))
            .collect();
        Some((Arc::clone(p), followers, log.log_end()))
    }

    /// Answers what `broker` holds parked for `keys`, which it no longer
    /// leads (NOT_LEADER_OR_FOLLOWER).
    fn cancel_parked(&self, broker: &Broker, keys: Vec<u32>) {
        for key in keys {
            broker.produce.cancel_for_key(&key);
            broker.fetch.cancel_for_key(&key);
            broker.delete_records.cancel_for_key(&key);
            broker.share_fetch.cancel_for_key(&key);
        }
    }

    /// Each group's coordinator, to compare with after a broker stops or
    /// starts.
    fn coordinators(&self) -> Vec<(Arc<str>, Option<u32>)> {
        self.groups
            .group_ids()
            .into_iter()
            .map(|g| {
                let at = self.group_coordinator(&g);
                (g, at)
            })
            .collect()
    }

    /// Moves the groups whose coordinator is no longer the one in `before`
    /// (it crashed, or the preferred one is back): their members rejoin
    /// at the new one.
    fn move_groups_from(&self, before: Vec<(Arc<str>, Option<u32>)>) {
        let moved: std::collections::HashSet<Arc<str>> = before
            .into_iter()
            .filter(|(g, at)| self.group_coordinator(g) != *at)
            .map(|(g, _)| g)
            .collect();
        if !moved.is_empty() {
            // A group that moves to a broker that has crashed too (not
            // fenced yet) waits for that one's fencing as well.
            let now = Instant::now();
            self.groups.move_groups(
                |g| moved.contains(g),
                |g| {
                    self.unnoticed_until(self.group_coordinator(g))
                        .map_or(Duration::ZERO, |at| at.saturating_duration_since(now))
                },
            );
        }
    }

    /// Time-based retention on the partitions of topics that keep records
    /// for a time (their `retention.ms`, or the broker's), at the leader,
    /// also where nothing is appended (the appends apply both retentions
    /// themselves).
    fn expire_by_time(&self) {
        // Topics that keep records for ever (by default, all) are not even
        // cloned.
        let aging: Vec<(Arc<Topic>, Option<u64>, u64)> = self
            .topics
            .read()
            .values()
            .filter_map(|t| {
                let (bytes, ms) = t
                    .config
                    .retentions(self.cfg.retention_bytes, self.cfg.retention_ms)?;
                Some((Arc::clone(t), bytes, ms?))
            })
            .collect();
        let now = log::now_ms();
        for (topic, bytes, ms) in aging {
            for p in &topic.partitions {
                let mut log = p.log.lock();
                // Its leader's process deletes them.
                let led = log
                    .leader
                    .is_some_and(|l| self.brokers[l as usize].alive.load(Ordering::Acquire));
                if led && !log.deleted && log.apply_retention(bytes, Some(ms), now).is_some() {
                    Checks::bump(&self.checks.retention_deletions);
                }
            }
        }
    }

    fn check_isr(&self, now: Instant) {
        let unfenced = |b: u32| self.is_unfenced(b);
        let moved: Vec<_> = self
            .topics()
            .iter()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| replication::shrink_isr(p, self.cfg.replica_lag, now, &unfenced))
            .cloned()
            .collect();
        self.check_moved(moved);
    }

    /// A group's state, generation and member ids, if the group exists
    /// (for reports and tests).
    pub fn group_view(&self, group: &str) -> Option<(GroupState, i32, Vec<String>)> {
        if !self.groups.group_ids().iter().any(|g| &**g == group) {
            return None;
        }
        let g = self.groups.group(group);
        let g = g.lock();
        Some((g.state, g.generation, g.members.keys().cloned().collect()))
    }

    /// A consumer-protocol group's state, group epoch and member ids, if
    /// the group exists and is one (for reports and tests).
    pub fn consumer_group_view(&self, group: &str) -> Option<(&'static str, i32, Vec<String>)> {
        let g = self.groups.find(group)?;
        let g = g.lock();
        let c = g.consumer.as_ref()?;
        Some((c.state(), c.epoch, c.members.keys().cloned().collect()))
    }

    /// The broker named as the controller: the first live one (a KRaft
    /// broker names a live broker to clients, which send it what old
    /// clusters' controllers took, such as CreateTopics).
    pub fn controller(&self) -> Option<u32> {
        (0..self.cfg.brokers).find(|&b| self.is_unfenced(b))
    }

    /// The broker coordinating `group`: the first unfenced replica of its
    /// offsets partition, whose replicas are placed as a topic's are.
    pub fn group_coordinator(&self, group: &str) -> Option<u32> {
        let n = self.cfg.brokers;
        let p = self.groups.offsets_partition(group);
        let rf = self.cfg.replication_factor.clamp(1, n);
        (0..rf).map(|r| (p + r) % n).find(|&b| self.is_unfenced(b))
    }

    /// The broker coordinating transactional id `id`: chosen as a group's
    /// coordinator is (Kafka hashes both over 50 partitions of a log).
    pub fn txn_coordinator(&self, id: &str) -> Option<u32> {
        self.group_coordinator(id)
    }

    /// Sends markers the transaction coordinator wrote to the followers,
    /// and checks the purgatories where a high watermark moved.
    pub(crate) fn replicate_markers(&self, written: Vec<txns::Written>) {
        let mut moved = Vec::new();
        for (p, followers, end, hw_moved) in written {
            if !followers.is_empty() {
                self.replicate_later(&p, &followers, end);
            }
            if hw_moved {
                moved.push(p);
            }
        }
        self.check_moved(moved);
    }

    /// Transaction `number` of `id` outlived its timeout: aborted.
    pub(crate) fn txn_timed_out(&self, id: &str, number: u64) {
        let written = self.txns.timed_out(self, id, number);
        self.replicate_markers(written);
    }

    /// Checks the leader's purgatories for each partition.
    pub(crate) fn check_moved(&self, partitions: Vec<Arc<Partition>>) {
        for p in partitions {
            let leader = p.log.lock().leader;
            if let Some(b) = leader.and_then(|l| self.brokers.get(l as usize)) {
                b.produce.check_and_complete(&p.key);
                b.fetch.check_and_complete(&p.key);
                b.delete_records.check_and_complete(&p.key);
                b.share_fetch.check_and_complete(&p.key);
            }
        }
    }

    /// Checks the share fetches parked at `p`'s leader (records of it were
    /// given back).
    pub(crate) fn check_share_fetches(&self, p: &Partition) {
        let leader = p.log.lock().leader;
        if let Some(b) = leader.and_then(|l| self.brokers.get(l as usize)) {
            b.share_fetch.check_and_complete(&p.key);
        }
    }

    /// Whether broker `b` counts as up for the cluster: not fenced (it
    /// may have crashed less than `broker_session_timeout` ago).
    pub(crate) fn is_unfenced(&self, b: u32) -> bool {
        self.brokers
            .get(b as usize)
            .is_some_and(|broker| !broker.fenced.load(Ordering::Acquire))
    }

    /// Operations the purgatories still hold.
    pub fn pending(&self) -> usize {
        self.brokers
            .iter()
            .map(|b| {
                b.produce.delayed()
                    + b.fetch.delayed()
                    + b.delete_records.delayed()
                    + b.share_fetch.delayed()
                    + b.throttled.delayed()
            })
            .sum::<usize>()
            + self.shares.locks.delayed()
            + self.groups.pending()
            + self.txns.pending()
    }

    /// Watch entries the purgatories still hold.
    pub fn watched(&self) -> usize {
        self.brokers
            .iter()
            .map(|b| {
                b.produce.watched()
                    + b.fetch.watched()
                    + b.delete_records.watched()
                    + b.share_fetch.watched()
                    + b.throttled.watched()
            })
            .sum::<usize>()
            + self.shares.locks.watched()
            + self.groups.watched()
            + self.txns.watched()
    }

    /// Stops replication and answers every parked request (the shutdown
    /// outcome, which the service turns into a Kafka error code).
    pub fn shutdown(&self) {
        self.stopping.store(true, Ordering::Release);
        if let Some(t) = self.follower_thread.get() {
            t.unpark();
        }
        if let Some(t) = self.replication.lock().take() {
            let _ = t.join();
        }
        for b in &self.brokers {
            b.followers.clear();
            b.produce.shutdown();
            b.fetch.shutdown();
            b.delete_records.shutdown();
            b.share_fetch.shutdown();
            b.throttled.shutdown();
        }
        self.shares.locks.shutdown();
        self.groups.shutdown();
        self.txns.shutdown();
    }
}
