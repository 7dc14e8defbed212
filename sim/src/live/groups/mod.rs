//! The group coordinator: consumer groups whose every wait is a delayed
//! operation in a purgatory of its own kind, as in Kafka. A group's
//! rebalance round is a DelayedJoin watched under the group, a follower's
//! SyncGroup waits for the leader's assignment as a DelayedSync, and each
//! member's session is a DelayedHeartbeat that every heartbeat pushes back.
//! A static member (`group.instance.id`) that restarts takes its old
//! place back: its old session is ended and a new one started, in O(1)
//! each, with no rebalance round in a Stable group. A group of the
//! consumer group protocol (KIP-848, `consumer_group.rs`) has no rounds:
//! its members' sessions are DelayedHeartbeats in the same purgatory, and
//! so is each member's rebalance timeout while it has partitions to give
//! up.
//!
//! Lock order: a group's lock is taken by the operations' callbacks, so
//! the coordinator never calls into a purgatory while it holds one; state
//! changes return [`Action`]s that run after the lock is released.

mod assignors;
mod classic_members;
mod consumer_group;
#[cfg(test)]
mod consumer_group_tests;
mod group;
mod ops;
mod share_group;

pub use assignors::{Partitions, ASSIGNORS};
pub use classic_members::{ClassicJoin, ClassicJoined, MigrationPolicy};
pub use consumer_group::{Beat, BeatAnswer, ConsumerGroup, Refusal, TopicRegex, Topics, LEAVE};
pub use group::{Action, CommittedOffset, Group, GroupState, Member, Offsets};
pub use ops::{DelayedHeartbeat, DelayedJoin, DelayedSync, JoinResult, MemberTimer};
pub use share_group::{ShareBeat, ShareGroup};

use super::checks::Checks;
use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use purgatory::{Driver, Outcome, Purgatory, TimerKind};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The coordinator's settings, Kafka's names.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay: Duration,
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout: Duration,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout: Duration,
    /// `offsets.topic.num.partitions`: groups hash over these to find
    /// their coordinator.
    pub offsets_partitions: u32,
    /// `group.consumer.session.timeout.ms`: a consumer-protocol member not
    /// heard from for this long is fenced.
    pub consumer_session_timeout: Duration,
    /// `group.consumer.heartbeat.interval.ms`: how often such a member is
    /// told to heartbeat.
    pub consumer_heartbeat_interval: Duration,
    /// `group.share.session.timeout.ms`: a share group member not heard
    /// from for this long is removed.
    pub share_session_timeout: Duration,
    /// `group.share.heartbeat.interval.ms`.
    pub share_heartbeat_interval: Duration,
    /// `group.consumer.migration.policy`: which conversions between the
    /// two kinds of consumer group are made while they have members.
    pub migration_policy: MigrationPolicy,
    /// `group.max.size`: the most members a classic group takes; a
    /// consumer-protocol group with more does not turn classic.
    pub classic_max_size: u32,
    /// `group.consumer.max.size`: the most members a consumer-protocol
    /// group takes; a classic group with more does not turn
    /// consumer-protocol.
    pub consumer_max_size: u32,
    /// `group.share.max.size`: the most members a share group takes.
    pub share_max_size: u32,
}

/// Kafka's default for `group.max.size` and `group.consumer.max.size`:
/// Java's largest `int`, no limit in practice.
pub const UNLIMITED_GROUP_SIZE: u32 = i32::MAX as u32;

/// Kafka's default for `group.share.max.size`.
pub const DEFAULT_SHARE_GROUP_MAX_SIZE: u32 = 200;

impl GroupConfig {
    /// Whether the consumer-protocol group `c` turns classic once `member`
    /// goes (fenced or leaving), as Kafka's coordinator decides it: every
    /// other member speaks the classic protocol, the policy downgrades,
    /// and the classic group would be within `group.max.size`.
    pub(crate) fn downgrades_without(&self, c: &ConsumerGroup, member: &str) -> bool {
        self.migration_policy.downgrades()
            && c.turns_classic_without(member)
            && c.members.len().saturating_sub(1) <= self.classic_max_size as usize
    }

    /// Whether a classic static member with `instance` taking its place
    /// in `c` turns the group classic (see [`Self::downgrades_without`]).
    pub(crate) fn downgrades_replacing(&self, c: &ConsumerGroup, instance: &str) -> bool {
        self.migration_policy.downgrades()
            && c.turns_classic_replacing(instance)
            && c.members.len() <= self.classic_max_size as usize
    }

    /// GROUP_MAX_SIZE_REACHED, with Kafka's message, if the
    /// consumer-protocol group `c` is full (`group.consumer.max.size`)
    /// and `member` is not one of its members (empty for a new one).
    pub(crate) fn consumer_room(&self, c: &ConsumerGroup, member: &str) -> Result<(), Refusal> {
        full(
            "consumer",
            c.members.len(),
            self.consumer_max_size,
            c.members.contains_key(member),
        )
    }

    /// As [`Self::consumer_room`], for the share group `s`
    /// (`group.share.max.size`).
    pub(crate) fn share_room(&self, s: &ShareGroup, member: &str) -> Result<(), Refusal> {
        full(
            "share",
            s.members.len(),
            self.share_max_size,
            s.members.contains_key(member),
        )
    }
}

/// A group of `kind` with `size` members, at most `max`, refuses a
/// newcomer once full (an existing member is still served).
fn full(kind: &str, size: usize, max: u32, is_member: bool) -> Result<(), Refusal> {
    if size >= max as usize && !is_member {
        return Err(Refusal::new(
            ResponseError::GroupMaxSizeReached,
            format!("The {kind} group has reached its maximum capacity of {max} members."),
        ));
    }
    Ok(())
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay: Duration::from_secs(3),
            min_session_timeout: Duration::from_secs(6),
            max_session_timeout: Duration::from_secs(1800),
            offsets_partitions: 50,
            consumer_session_timeout: Duration::from_secs(45),
            consumer_heartbeat_interval: Duration::from_secs(5),
            share_session_timeout: Duration::from_secs(45),
            share_heartbeat_interval: Duration::from_secs(5),
            migration_policy: MigrationPolicy::default(),
            classic_max_size: UNLIMITED_GROUP_SIZE,
            consumer_max_size: UNLIMITED_GROUP_SIZE,
            share_max_size: DEFAULT_SHARE_GROUP_MAX_SIZE,
        }
    }
}

/// Every group of the cluster and the purgatories their waits park in.
pub struct GroupCoordinator {
    pub cfg: GroupConfig,
    groups: Mutex<HashMap<Arc<str>, Arc<Mutex<Group>>>>,
    pub joins: Purgatory<Arc<str>, DelayedJoin>,
    pub syncs: Purgatory<Arc<str>, DelayedSync>,
    pub sessions: Purgatory<Arc<str>, DelayedHeartbeat>,
    next_member: AtomicU64,
    checks: Arc<Checks>,
    me: Weak<GroupCoordinator>,
    /// Each group's own settings (IncrementalAlterConfigs on a GROUP
    /// resource), by group id and name; a group need not exist to have
    /// them, as in Kafka.
    configs: Mutex<HashMap<String, BTreeMap<String, String>>>,
    /// Told (group, member) when a share group member's session runs out.
    share_member_gone: std::sync::OnceLock<ShareMemberGone>,
}

/// What the cluster does when a share group member's session runs out.
pub type ShareMemberGone = Box<dyn Fn(&str, &str) + Send + Sync>;

/// The group settings a client may set, with their defaults (Kafka's).
pub const GROUP_CONFIGS: [(&str, &str); 6] = [
    ("consumer.session.timeout.ms", "45000"),
    ("consumer.heartbeat.interval.ms", "5000"),
    ("share.auto.offset.reset", "latest"),
    ("share.record.lock.duration.ms", "30000"),
    ("share.session.timeout.ms", "45000"),
    ("share.heartbeat.interval.ms", "5000"),
];

/// A member's key in the sessions purgatory.
fn session_key(group: &str, member: &str) -> Arc<str> {
    Arc::from(format!("{group}\u{0}{member}"))
}

/// One of the coordinator's purgatories, with a timer thread.
fn purgatory<O: purgatory::DelayedOperation>(
    name: &str,
    kind: TimerKind,
) -> Purgatory<Arc<str>, O> {
    Purgatory::builder(name)
        .timer(kind)
        .driver(Driver::Thread {
            expiration_threads: 1,
        })
        .build()
        .expect("a valid purgatory configuration")
}

/// Java's `String.hashCode`, which Kafka hashes group ids with.
/// Fences `member` from the consumer-protocol group `g`: out, its
/// partitions free, its timers ended. If every member left speaks the
/// classic protocol, the group becomes a classic group again, as `cfg`
/// allows ([`GroupConfig::downgrades_without`]).
pub(crate) fn fence(g: &mut Group, member: &str, cfg: &GroupConfig, actions: &mut Vec<Action>) {
    let Some(c) = g.consumer.as_mut() else {
        return;
    };
    if cfg.downgrades_without(c, member) {
        g.downgrade(Some(member), actions);
    } else {
        actions.extend(c.remove(member).into_iter().map(Action::EndSession));
    }
}

fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

impl GroupCoordinator {
    /// A coordinator with its three purgatories on `kind`.
    pub fn new(cfg: GroupConfig, kind: TimerKind, checks: Arc<Checks>) -> Arc<GroupCoordinator> {
        Arc::new_cyclic(|me| GroupCoordinator {
            cfg,
            groups: Mutex::new(HashMap::new()),
            joins: purgatory("Rebalance", kind),
            syncs: purgatory("Sync", kind),
            sessions: purgatory("Heartbeat", kind),
            next_member: AtomicU64::new(1),
            checks,
            me: me.clone(),
            configs: Mutex::new(HashMap::new()),
            share_member_gone: std::sync::OnceLock::new(),
        })
    }

    /// The partition of the offsets topic that `group` maps to, as Kafka's
    /// `abs(groupId.hashCode) % offsets.topic.num.partitions`.
    pub fn offsets_partition(&self, group: &str) -> u32 {
        // Kafka's `Utils.abs` masks the sign bit (it is not `Math.abs`).
        (java_hash(group) & 0x7fff_ffff) as u32 % self.cfg.offsets_partitions.max(1)
    }

    /// The group, made empty if it is new.
    pub fn group(&self, id: &str) -> Arc<Mutex<Group>> {
        let mut groups = self.groups.lock();
        if let Some(g) = groups.get(id) {
            return Arc::clone(g);
        }
        let g = Arc::new(Mutex::new(Group::new()));
        groups.insert(Arc::from(id), Arc::clone(&g));
        g
    }

    /// The group, if it exists (unlike [`group`](Self::group), which
    /// makes it).
    pub fn find(&self, id: &str) -> Option<Arc<Mutex<Group>>> {
        self.groups.lock().get(id).cloned()
    }

    /// DeleteGroups: forgets `id` and its committed offsets if it has no
    /// members (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND if there is
    /// no such group).
    pub fn delete_group(&self, id: &str) -> Result<(), i16> {
        let mut groups = self.groups.lock();
        let group = groups
            .get(id)
            .cloned()
            .ok_or(ResponseError::GroupIdNotFound.code())?;
        let mut g = group.lock();
        let consumers = g.consumer.as_ref().is_some_and(|c| !c.members.is_empty())
            || g.share.as_ref().is_some_and(|s| !s.members.is_empty());
        if consumers || !g.members.is_empty() || g.state != GroupState::Empty || g.join_in_purgatory
        {
            return Err(ResponseError::NonEmptyGroup.code());
        }
        g.deleted = true;
        groups.remove(id);
        Ok(())
    }

    /// Sets what is done when a share group member's session runs out
    /// (once).
    pub fn on_share_member_gone(&self, f: ShareMemberGone) {
        let _ = self.share_member_gone.set(f);
    }

    /// A share group member's session ran out: its share sessions and
    /// records go.
    pub fn share_member_removed(&self, group: &str, member: &str) {
        if let Some(f) = self.share_member_gone.get() {
            f(group, member);
        }
    }

    /// Whether `group`'s share-partitions start at the log start rather
    /// than at the high watermark (`share.auto.offset.reset`).
    pub fn share_from_earliest(&self, group: &str) -> bool {
        self.configs
            .lock()
            .get(group)
            .and_then(|c| c.get("share.auto.offset.reset"))
            .is_some_and(|v| v == "earliest")
    }

    /// `group`'s setting `name` in milliseconds, if it set one.
    pub fn config_ms(&self, group: &str, name: &str) -> Option<Duration> {
        let configs = self.configs.lock();
        let v = configs.get(group)?.get(name)?;
        v.parse().ok().map(Duration::from_millis)
    }

    /// The groups that set a config of their own, members or not, in name
    /// order.
    pub fn configured(&self) -> Vec<String> {
        let configs = self.configs.lock();
        let mut names: Vec<String> = configs
            .iter()
            .filter(|(_, set)| !set.is_empty())
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }

    /// `group`'s settings: each of [`GROUP_CONFIGS`] with its value and
    /// whether it was set (rather than the default).
    pub fn configs_of(&self, group: &str) -> Vec<(&'static str, String, bool)> {
        let configs = self.configs.lock();
        let set = configs.get(group);
        GROUP_CONFIGS
            .iter()
            .map(|&(name, default)| match set.and_then(|c| c.get(name)) {
                Some(v) => (name, v.clone(), true),
                None => (name, default.to_string(), false),
            })
            .collect()
    }

    /// Sets (`Some`) or deletes (`None`) each of `changes` for `group`,
    /// all or none: an unknown name or a bad value refuses the lot.
    pub fn alter_configs(
        &self,
        group: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<(), (ResponseError, String)> {
        self.check_configs(changes)?;
        let mut configs = self.configs.lock();
        let set = configs.entry(group.to_string()).or_default();
        for (name, value) in changes {
            match value {
                Some(v) => drop(set.insert(name.clone(), v.clone())),
                None => drop(set.remove(name)),
            }
        }
        Ok(())
    }

    /// Why `changes` cannot be made to a group's settings, if they cannot.
    pub fn check_configs(
        &self,
        changes: &[(String, Option<String>)],
    ) -> Result<(), (ResponseError, String)> {
        for (name, value) in changes {
            if !GROUP_CONFIGS.iter().any(|(n, _)| n == name) {
                let message = format!("Unknown group config name: {name}");
                return Err((ResponseError::InvalidConfig, message));
            }
            let Some(v) = value else { continue };
            // Kafka's bounds: its brokers' defaults for the group
            // settings' least and most.
            let within = |lo: u32, hi: u32| v.parse::<u32>().is_ok_and(|n| (lo..=hi).contains(&n));
            let valid = match name.as_str() {
                "share.auto.offset.reset" => v == "latest" || v == "earliest",
                "share.record.lock.duration.ms" => within(15_000, 60_000),
                "share.session.timeout.ms" | "consumer.session.timeout.ms" => {
                    within(45_000, 60_000)
                }
                _ => within(5_000, 15_000),
            };
            if !valid {
                let message = format!("Invalid value {v} for configuration {name}");
                return Err((ResponseError::InvalidConfig, message));
            }
        }
        Ok(())
    }

    /// Every group id.
    pub fn group_ids(&self) -> Vec<Arc<str>> {
        self.groups.lock().keys().cloned().collect()
    }

    /// A new member id: the client id and a number, as Kafka's are unique.
    pub fn new_member_id(&self, client_id: &str) -> String {
        let n = self.next_member.fetch_add(1, Ordering::Relaxed);
        format!("{client_id}-{n:012}")
    }

    /// Runs what a state change set in motion, with no group lock held.
    pub fn run(&self, group: &Arc<str>, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::SubmitJoin { timeout, initial } => {
                    let op = DelayedJoin {
                        coordinator: self.me.clone(),
                        group: Arc::clone(group),
                        initial,
                        timeout,
                        checks: Arc::clone(&self.checks),
                        answered: false,
                    };
                    match self
                        .joins
                        .try_complete_else_watch(op, std::slice::from_ref(group))
                    {
                        Ok(_) => Checks::bump(&self.checks.parked),
                        Err(refused) => {
                            // Shutting down: end the round by hand.
                            drop(refused);
                            self.complete_join(group, Outcome::Shutdown);
                        }
                    }
                }
                Action::CheckJoins => {
                    self.joins.check_and_complete(group);
                }
                Action::CheckSyncs => {
                    self.syncs.check_and_complete(group);
                }
                Action::StartSession { member, timeout } => {
                    self.start_session(group, &member, timeout)
                }
                Action::Beat(session, timeout) => {
                    session.reset_timeout(timeout);
                }
                Action::EndSession(session) => {
                    session.force_complete();
                }
                Action::StartConsumerTimer {
                    member,
                    incarnation,
                    timeout,
                    timer,
                } => self.start_timer(group, (&member, incarnation), timeout, timer),
            }
        }
    }

    fn start_session(&self, group: &Arc<str>, member: &str, timeout: Duration) {
        // A classic member: its ids are never used twice.
        self.start_timer(group, (member, 0), timeout, MemberTimer::Session);
    }

    /// Puts a member's session or rebalance timeout in the sessions
    /// purgatory and hands the member its completer.
    fn start_timer(
        &self,
        group: &Arc<str>,
        (member, incarnation): (&str, u64),
        timeout: Duration,
        timer: MemberTimer,
    ) {
        let op = DelayedHeartbeat {
            coordinator: self.me.clone(),
            group: Arc::clone(group),
            member: member.to_string(),
            timeout,
            checks: Arc::clone(&self.checks),
            answered: false,
            timer,
            incarnation,
        };
        let key = session_key(group, member);
        // Refused only while shutting down: the member then has no timer.
        if let Ok(handle) = self.sessions.try_complete_else_watch(op, &[key]) {
            Checks::bump(&self.checks.parked);
            let completer = handle.completer();
            let g = self.group(group);
            let mut g = g.lock();
            let gr = &mut *g;
            let slot = match (gr.members.get_mut(member), timer) {
                // A classic group's member: incarnation 0.
                (Some(m), MemberTimer::Session) if incarnation == 0 => Some(&mut m.session),
                (None, MemberTimer::Session) if gr.share.is_some() => gr
                    .share
                    .as_mut()
                    .and_then(|s| s.members.get_mut(member))
                    .filter(|m| m.incarnation == incarnation)
                    .map(|m| &mut m.session),
                (None, _) => gr
                    .consumer
                    .as_mut()
                    .and_then(|c| c.members.get_mut(member))
                    .filter(|m| m.incarnation == incarnation)
                    .and_then(|m| {
                        let slot = match timer {
                            MemberTimer::Session => &mut m.session,
                            _ if !m.rebalance_timer_is(timer) => return None,
                            _ => &mut m.revocation,
                        };
                        Some(slot)
                    }),
                (Some(_), _) => None,
            };
            match slot {
                Some(slot) => {
                    let old = slot.replace(completer);
                    // A rebalance timeout it replaces (set up out of
                    // order) ends; ending one is harmless, unlike a
                    // session, whose end removes its member.
                    if let Some(old) = old.filter(|_| timer != MemberTimer::Session) {
                        drop(g);
                        old.force_complete();
                    }
                }
                // Gone (or done) while its timer was being set up.
                None => {
                    drop(g);
                    completer.force_complete();
                }
            }
        }
    }

    /// A member of a consumer-protocol group did not do in time what its
    /// rebalance timeout waited for (give up its partitions, or, for a
    /// classic member, rejoin or sync): it is fenced, unless it has moved
    /// on meanwhile.
    pub(crate) fn rebalance_late(
        &self,
        id: &Arc<str>,
        member: &str,
        incarnation: u64,
        timer: MemberTimer,
    ) {
        let group = self.group(id);
        let mut actions = Vec::new();
        {
            let mut g = group.lock();
            let Some(c) = g.consumer.as_mut() else {
                return;
            };
            match c.members.get(member) {
                Some(m) if m.incarnation == incarnation && m.rebalance_timer_is(timer) => {}
                _ => return,
            }
            fence(&mut g, member, &self.cfg, &mut actions);
        }
        self.run(id, actions);
    }

    /// Ends a rebalance round: drops the members that did not rejoin, moves
    /// to the next generation and answers every waiting JoinGroup.
    pub(crate) fn complete_join(&self, id: &Arc<str>, outcome: Outcome) {
        let group = self.group(id);
        let mut actions = Vec::new();
        let mut answers: Vec<(tokio::sync::oneshot::Sender<JoinResult>, JoinResult)> = Vec::new();
        {
            let mut g = group.lock();
            g.join_in_purgatory = false;
            if g.consumer.is_some() {
                // The group turned consumer-protocol during the round; its
                // waiting members were answered then.
                return;
            }
            if matches!(outcome, Outcome::Shutdown | Outcome::Cancelled) {
                let error = if outcome == Outcome::Shutdown {
                    ResponseError::CoordinatorNotAvailable
                } else {
                    ResponseError::NotCoordinator
                };
                for (member_id, m) in g.members.iter_mut() {
                    if let Some(tx) = m.join_waiter.take() {
                        let r = JoinResult {
                            error: error.code(),
                            member_id: member_id.clone(),
                            ..JoinResult::default()
                        };
                        answers.push((tx, r));
                    }
                }
            } else {
                let stragglers: Vec<String> = g
                    .members
                    .iter()
                    .filter(|(_, m)| !m.joined)
                    .map(|(id, _)| id.clone())
                    .collect();
                for s in stragglers {
                    if let Some(m) = g.take_member(&s) {
                        if let Some(session) = m.session {
                            actions.push(Action::EndSession(session));
                        }
                    }
                }
                g.generation += 1;
                if g.members.is_empty() {
                    g.state = GroupState::Empty;
                    g.leader = None;
                    g.protocol = None;
                } else {
                    g.protocol = g.select_protocol();
                    if g.leader.as_ref().is_none_or(|l| !g.members.contains_key(l)) {
                        g.leader = g.members.keys().next().cloned();
                    }
                    g.state = GroupState::CompletingRebalance;
                    let error = if g.protocol.is_none() {
                        ResponseError::InconsistentGroupProtocol.code()
                    } else {
                        0
                    };
                    let mut waiting = Vec::new();
                    for (member_id, m) in g.members.iter_mut() {
                        m.beat(&mut actions);
                        if let Some(tx) = m.join_waiter.take() {
                            waiting.push((member_id.clone(), tx));
                        }
                    }
                    for (member_id, tx) in waiting {
                        answers.push((tx, g.join_result(&member_id, error)));
                    }
                }
            }
        }
        for (tx, r) in answers {
            let _ = tx.send(r);
        }
        self.run(id, actions);
    }

    /// A member's session ended: it expired, or the member left (its
    /// session was ended by hand). Removes the member if it is still there.
    pub(crate) fn member_gone(&self, id: &Arc<str>, member: &str, incarnation: u64, expired: bool) {
        let group = self.group(id);
        let mut actions = Vec::new();
        let waiter = {
            let mut g = group.lock();
            if g.consumer.is_some() {
                drop(g);
                return self.consumer_member_gone(id, &group, (member, incarnation), expired);
            }
            if g.share.is_some() {
                drop(g);
                return self.share_member_gone(id, &group, (member, incarnation), expired);
            }
            // A session of the member from before the group turned
            // classic ends: the member's classic one goes on.
            if incarnation != 0 {
                return;
            }
            let Some(m) = g.members.get_mut(member) else {
                return;
            };
            // Alive after all, as Kafka's DelayedHeartbeat sees it: waiting
            // in a join round or for its assignment, or heard from within its
            // session timeout (a heartbeat or a round's end that came while
            // this expiry was under way, too late to push it back). Its
            // session starts again; so no member is ever removed before its
            // session timeout has passed since it was last heard from.
            let waiting = m.join_waiter.is_some() || m.awaiting_sync;
            let since = m.last_beat.elapsed();
            if expired && (waiting || since < m.session_timeout) {
                if waiting {
                    m.last_beat = Instant::now();
                }
                m.session = None;
                let timeout = m.session_timeout.saturating_sub(m.last_beat.elapsed());
                drop(g);
                self.run(
                    id,
                    vec![Action::StartSession {
                        member: member.to_string(),
                        timeout,
                    }],
                );
                return;
            }
            if expired {
                let late = since.saturating_sub(m.session_timeout);
                let late = late.as_micros() as u64;
                self.checks.session_lateness_us.lock().push(late);
                Checks::bump(&self.checks.sessions_expired);
            }
            g.remove(member, &mut actions)
                .and_then(|mut m| m.join_waiter.take())
        };
        if let Some(tx) = waiter {
            let _ = tx.send(JoinResult {
                error: ResponseError::UnknownMemberId.code(),
                member_id: member.to_string(),
                ..JoinResult::default()
            });
        }
        self.run(id, actions);
    }

    /// [`member_gone`](Self::member_gone) for a consumer-protocol member:
    /// fenced unless heard from within its session timeout meanwhile.
    fn consumer_member_gone(
        &self,
        id: &Arc<str>,
        group: &Mutex<Group>,
        (member, incarnation): (&str, u64),
        expired: bool,
    ) {
        let mut g = group.lock();
        let Some(c) = g.consumer.as_mut() else {
            return;
        };
        // Gone, or joined again since this session began.
        let Some(m) = c
            .members
            .get_mut(member)
            .filter(|m| m.incarnation == incarnation)
        else {
            return;
        };
        let since = m.last_beat.elapsed();
        if self.heard_in_time(expired, m.away, since, m.session_timeout) {
            m.session = None;
            let timeout = m.session_timeout - since;
            drop(g);
            let again = (member, incarnation);
            return self.start_timer(id, again, timeout, MemberTimer::Session);
        }
        let mut actions = Vec::new();
        fence(&mut g, member, &self.cfg, &mut actions);
        drop(g);
        self.run(id, actions);
    }

    /// Whether a member whose session `expired`, last heard from `since`
    /// ago, was heard from within its `session_timeout` after all (a
    /// heartbeat that came while the expiry was under way), unless it is
    /// `away` (a static member that left for a while); if not, an expiry
    /// is counted with how late it came.
    fn heard_in_time(
        &self,
        expired: bool,
        away: bool,
        since: Duration,
        session_timeout: Duration,
    ) -> bool {
        if !expired {
            return false;
        }
        if !away && since < session_timeout {
            return true;
        }
        let late = since.saturating_sub(session_timeout).as_micros() as u64;
        self.checks.session_lateness_us.lock().push(late);
        Checks::bump(&self.checks.sessions_expired);
        false
    }

    /// [`member_gone`](Self::member_gone) for a share group member: removed
    /// unless heard from within its session timeout meanwhile.
    fn share_member_gone(
        &self,
        id: &Arc<str>,
        group: &Mutex<Group>,
        (member, incarnation): (&str, u64),
        expired: bool,
    ) {
        let mut g = group.lock();
        let Some(s) = g.share.as_mut() else {
            return;
        };
        let Some(m) = s
            .members
            .get_mut(member)
            .filter(|m| m.incarnation == incarnation)
        else {
            return;
        };
        let since = m.last_beat.elapsed();
        if self.heard_in_time(expired, false, since, m.session_timeout) {
            m.session = None;
            let timeout = m.session_timeout - since;
            drop(g);
            return self.start_timer(id, (member, incarnation), timeout, MemberTimer::Session);
        }
        let timer = s.remove(member);
        drop(g);
        self.run(id, timer.into_iter().map(Action::EndSession).collect());
        self.share_member_removed(id, member);
    }

    /// Drops every group's committed offsets in `topic` (it was deleted).
    pub fn forget_topic(&self, topic: &str) {
        for id in self.group_ids() {
            if let Some(group) = self.find(&id) {
                let mut g = group.lock();
                g.offsets.retain(|(t, _), _| t != topic);
                for offsets in g.txn_offsets.values_mut() {
                    offsets.retain(|(t, _), _| t != topic);
                }
            }
        }
    }

    /// Producer `producer_id`'s transaction ended: the offsets it
    /// committed in `group` become the group's if it committed, and are
    /// dropped if it aborted.
    pub fn end_txn_offsets(&self, group: &str, producer_id: i64, commit: bool) {
        let Some(group) = self.find(group) else {
            return;
        };
        let mut g = group.lock();
        if let Some(offsets) = g.txn_offsets.remove(&producer_id) {
            if commit {
                g.offsets.extend(offsets);
            }
        }
    }

    /// The groups' coordinator moved (its broker died, or the preferred one
    /// is back). As Kafka's new coordinator loads them from their log, a
    /// settled classic group (Stable) and a consumer-protocol group keep
    /// their members, generation or epochs, and assignments, and each
    /// member's session starts afresh: its next heartbeat at the new
    /// coordinator goes on where it left off, with no rebalance. A classic
    /// group in the middle of a rebalance loses its members instead (their
    /// waits are answered NOT_COORDINATOR and they join again at the new
    /// coordinator), a simplification of Kafka's, which goes back to the
    /// last generation it stored. Committed offsets stay in every case.
    /// A session starts `held(group)` longer than its own timeout: the
    /// time until the new coordinator is fenced, where that one has
    /// crashed too ([`hold_sessions`](Self::hold_sessions)).
    pub fn move_groups(&self, moved: impl Fn(&str) -> bool, held: impl Fn(&str) -> Duration) {
        for id in self.group_ids() {
            if !moved(&id) {
                continue;
            }
            if self.restart_sessions(&id, held(&id)) {
                continue;
            }
            let group = self.group(&id);
            let (sessions, waiters) = {
                let mut g = group.lock();
                g.state = GroupState::Empty;
                g.leader = None;
                g.protocol = None;
                g.pending_ids.clear();
                let members = g.take_members();
                let mut sessions = Vec::new();
                let mut waiters = Vec::new();
                for (member_id, m) in members {
                    sessions.extend(m.session);
                    if let Some(tx) = m.join_waiter {
                        waiters.push((tx, member_id));
                    }
                }
                (sessions, waiters)
            };
            for (tx, member_id) in waiters {
                let _ = tx.send(JoinResult {
                    error: ResponseError::NotCoordinator.code(),
                    member_id,
                    ..JoinResult::default()
                });
            }
            self.joins.cancel_for_key(&id);
            self.syncs.cancel_for_key(&id);
            for s in sessions {
                s.force_complete();
            }
        }
    }

    /// The groups' coordinator has crashed and is not fenced yet: nothing
    /// runs there, so no session of theirs may expire before `held` has
    /// passed (the new coordinator then starts each afresh,
    /// [`move_groups`](Self::move_groups)). A classic group in the middle
    /// of a rebalance is left as it is: it starts over at the next one.
    pub fn hold_sessions(&self, coordinated: impl Fn(&str) -> bool, held: Duration) {
        for id in self.group_ids() {
            if !coordinated(&id) {
                continue;
            }
            self.restart_sessions(&id, held);
        }
    }

    /// Starts the sessions of group `id` again from now, each `extra`
    /// longer than its own timeout, if the group keeps its members when
    /// its coordinator moves ([`Group::restart_sessions`]); returns
    /// whether it does.
    fn restart_sessions(&self, id: &str, extra: Duration) -> bool {
        let Some(timers) = self.group(id).lock().restart_sessions() else {
            return false;
        };
        for (timer, timeout) in timers {
            timer.reset_timeout(timeout + extra);
        }
        true
    }

    /// Operations the coordinator's purgatories hold.
    pub fn pending(&self) -> usize {
        self.joins.delayed() + self.syncs.delayed() + self.sessions.delayed()
    }

    /// Watch entries they hold.
    pub fn watched(&self) -> usize {
        self.joins.watched() + self.syncs.watched() + self.sessions.watched()
    }

    /// Answers every parked join, sync and session.
    pub fn shutdown(&self) {
        self.joins.shutdown();
        self.syncs.shutdown();
        self.sessions.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Member `m` of `g` joins, or leaves with `epoch` -1.
    fn beat(c: &GroupCoordinator, g: &Arc<str>, m: &str, epoch: i32) -> i32 {
        let group = c.group(g);
        let mut actions = Vec::new();
        let answer = {
            let mut group = group.lock();
            let consumer = group.consumer.get_or_insert_with(ConsumerGroup::default);
            let beat = Beat {
                member_id: m.to_string(),
                epoch,
                instance_id: None,
                rack_id: None,
                rebalance_timeout: Some(Duration::from_secs(30)),
                topic_names: Some(Vec::new()),
                topic_regex: None,
                assignor: None,
                owned: Some(Partitions::new()),
                client_id: "test".to_string(),
                client_host: String::new(),
            };
            let timeout = Duration::from_secs(45);
            let topics = consumer_group::TopicsView::new();
            consumer.heartbeat(beat, &topics, timeout, &mut actions)
        };
        c.run(g, actions);
        answer.unwrap().epoch
    }

    fn incarnation(c: &GroupCoordinator, g: &str, m: &str) -> Option<u64> {
        let group = c.find(g)?;
        let group = group.lock();
        group
            .consumer
            .as_ref()?
            .members
            .get(m)
            .map(|m| m.incarnation)
    }

    #[test]
    fn a_late_timer_of_an_earlier_joining_leaves_a_member_that_joined_again_alone() {
        let checks = Arc::new(Checks::default());
        let c = GroupCoordinator::new(GroupConfig::default(), TimerKind::Wheel, checks);
        let g: Arc<str> = Arc::from("g");
        beat(&c, &g, "m", 0);
        let first = incarnation(&c, &g, "m").unwrap();
        assert_eq!(beat(&c, &g, "m", -1), -1);
        assert_eq!(incarnation(&c, &g, "m"), None);
        // The member chooses its id, and joins again under it.
        let epoch = beat(&c, &g, "m", 0);
        let second = incarnation(&c, &g, "m").unwrap();
        assert_ne!(first, second);
        // The first joining's session and rebalance timeout, ending late,
        // find another joining and leave it be.
        c.member_gone(&g, "m", first, false);
        c.rebalance_late(&g, "m", first, MemberTimer::Revocation { epoch });
        assert_eq!(incarnation(&c, &g, "m"), Some(second));
        // Its own session's end removes it.
        c.member_gone(&g, "m", second, false);
        assert_eq!(incarnation(&c, &g, "m"), None);
        c.shutdown();
    }

    #[test]
    fn a_groups_settings_are_checked_together_and_kept_apart_from_others() {
        let checks = Arc::new(Checks::default());
        let c = GroupCoordinator::new(GroupConfig::default(), TimerKind::Wheel, checks);
        let set = |name: &str, value: Option<&str>| (name.to_string(), value.map(str::to_string));
        let earliest = set("share.auto.offset.reset", Some("earliest"));
        // One bad change refuses all of them.
        let bad = c.alter_configs(
            "g",
            &[
                earliest.clone(),
                set("share.session.timeout.ms", Some("1000")),
            ],
        );
        assert_eq!(bad.unwrap_err().0, ResponseError::InvalidConfig);
        assert!(c.alter_configs("g", &[set("no.such", Some("1"))]).is_err());
        assert!(!c.share_from_earliest("g"));
        let ok = [earliest, set("consumer.session.timeout.ms", Some("50000"))];
        c.alter_configs("g", &ok).unwrap();
        assert!(c.share_from_earliest("g"));
        assert!(!c.share_from_earliest("other"));
        let session = c.config_ms("g", "consumer.session.timeout.ms");
        assert_eq!(session, Some(Duration::from_millis(50_000)));
        let listed = c.configs_of("g");
        assert_eq!(listed.len(), GROUP_CONFIGS.len());
        assert!(listed.contains(&("share.auto.offset.reset", "earliest".to_string(), true)));
        assert!(listed.contains(&("share.heartbeat.interval.ms", "5000".to_string(), false)));
        // Deleted: back to the default.
        c.alter_configs("g", &[set("share.auto.offset.reset", None)])
            .unwrap();
        assert!(!c.share_from_earliest("g"));
        c.shutdown();
    }

    #[test]
    fn group_ids_hash_as_in_java() {
        // Values of "...".hashCode() in Java.
        assert_eq!(java_hash(""), 0);
        assert_eq!(java_hash("a"), 97);
        assert_eq!(java_hash("readers"), 1_080_410_128);
        assert_eq!(java_hash("console-consumer-12345"), 158_455_506);
        assert_eq!(java_hash("polygenelubricants"), i32::MIN);
    }
}
