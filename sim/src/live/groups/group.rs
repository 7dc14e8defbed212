//! One consumer group's state, as Kafka's group coordinator keeps it. The
//! state changes here are plain data; what they set in motion in the
//! purgatories is returned as [`Action`]s for the caller to run once the
//! group's lock is released (the purgatories' callbacks take that lock).

use super::consumer_group::ConsumerGroup;
use super::ops::{JoinResult, MemberTimer, SessionCompleter};
use super::share_group::ShareGroup;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Kafka's group states (Dead is a group that has no members and no
/// offsets: such a group is simply not kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members.
    Empty,
    /// Waiting for the known members to rejoin.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
}

impl GroupState {
    /// Kafka's name for it, as ListGroups and DescribeGroups give it.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

/// A member of a group.
pub struct Member {
    /// The client id of its JoinGroup, for DescribeGroups.
    pub client_id: String,
    /// Where its JoinGroup came from, as DescribeGroups gives it
    /// (`/address`, as Kafka writes it; empty where unknown).
    pub client_host: String,
    /// Its `group.instance.id`, if it is a static member.
    pub instance_id: Option<String>,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    /// (protocol name, metadata), in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// Rejoined in the current rebalance.
    pub joined: bool,
    /// Its JoinGroup request, waiting for the round to end.
    pub join_waiter: Option<oneshot::Sender<JoinResult>>,
    /// Its SyncGroup request is waiting for the leader's assignment.
    pub awaiting_sync: bool,
    pub assignment: Bytes,
    /// Pushes its session back, or ends it.
    pub session: Option<SessionCompleter>,
    /// When its session was last pushed back: an expiry before
    /// `last_beat + session_timeout` is a violation.
    pub last_beat: Instant,
}

impl Member {
    /// Its metadata for `protocol` (empty if it offered none).
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata.clone())
            .unwrap_or_default()
    }

    /// A sign of life (a join, a sync, a heartbeat): its session starts
    /// again from now.
    pub fn beat(&mut self, actions: &mut Vec<Action>) {
        self.last_beat = Instant::now();
        if let Some(s) = &self.session {
            actions.push(Action::Beat(s.clone(), self.session_timeout));
        }
    }
}

/// One partition's committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    /// The leader epoch of the last record the consumer read before it
    /// (-1: not given), for it to check its position after a rebalance
    /// (KIP-320).
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// Committed offsets by (topic, partition).
pub type Offsets = HashMap<(String, i32), CommittedOffset>;

/// One group.
pub struct Group {
    pub state: GroupState,
    pub generation: i32,
    /// Set by the first member; kept when the group empties, as Kafka
    /// keeps it, so admin tools still list an idle consumer group as one
    /// (the next member to join an empty group sets it anew).
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// By member id, in join order of their ids (ids are made increasing).
    pub members: BTreeMap<String, Member>,
    /// Ids handed out with MEMBER_ID_REQUIRED, not joined yet.
    pub pending_ids: HashSet<String>,
    /// Static members: `group.instance.id` -> the member id it holds now.
    pub static_members: HashMap<String, String>,
    /// Committed offsets.
    pub offsets: Offsets,
    /// Offsets committed in ongoing transactions (TxnOffsetCommit), by
    /// producer id: they become the group's when the transaction commits.
    pub txn_offsets: HashMap<i64, Offsets>,
    /// A DelayedJoin is in the purgatory for this group.
    pub join_in_purgatory: bool,
    /// Deleted (DeleteGroups) while a request held it: what it asks of the
    /// group is answered COORDINATOR_NOT_AVAILABLE, and the client's retry
    /// finds a new one.
    pub deleted: bool,
    /// Set while the group speaks the consumer group protocol (KIP-848):
    /// its members are there, and the classic fields above stay empty.
    /// Either kind of group turns into the other only while it has no
    /// members; the committed offsets stay.
    pub consumer: Option<ConsumerGroup>,
    /// Set while the group is a share group (KIP-932): its members are
    /// there. It turns into another kind only once it has no members.
    pub share: Option<ShareGroup>,
}

/// What the caller runs after releasing the group's lock.
pub enum Action {
    /// Put a DelayedJoin for the group in the joins purgatory.
    SubmitJoin { timeout: Duration, initial: bool },
    /// Check the group's key in the joins purgatory.
    CheckJoins,
    /// Check the group's key in the syncs purgatory (a waiting SyncGroup
    /// may now be answered).
    CheckSyncs,
    /// Start a member's session.
    StartSession { member: String, timeout: Duration },
    /// Push a member's session back.
    Beat(SessionCompleter, Duration),
    /// End a member's session (it left, or was dropped from a round), or
    /// a consumer-protocol member's rebalance timeout.
    EndSession(SessionCompleter),
    /// Start a timer of a member of a consumer-protocol or share group
    /// (of this `incarnation` of it): its session, or a rebalance timeout
    /// that fences it unless it has done what it must by then.
    StartConsumerTimer {
        member: String,
        incarnation: u64,
        timeout: Duration,
        timer: MemberTimer,
    },
}

impl Group {
    /// The topics its members subscribe to, if it is a consumer group
    /// whose every member's subscription for the chosen protocol can be
    /// read: what OffsetDelete leaves alone. `None` otherwise (another
    /// protocol type, no members, or a subscription that does not decode),
    /// and then, as in Kafka's coordinator, no topic counts as subscribed.
    pub fn subscribed_topics(&self) -> Option<HashSet<String>> {
        if let Some(c) = &self.consumer {
            return (!c.members.is_empty()).then(|| c.subscribed.keys().cloned().collect());
        }
        if self.protocol_type.as_deref() != Some("consumer") || self.members.is_empty() {
            return None;
        }
        let protocol = self.protocol.as_deref()?;
        let mut topics = HashSet::new();
        for member in self.members.values() {
            let metadata = member.metadata(protocol);
            topics.extend(crate::wire::subscribed_topics(&metadata)?);
        }
        Some(topics)
    }

    pub fn new() -> Group {
        Group {
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending_ids: HashSet::new(),
            static_members: HashMap::new(),
            offsets: HashMap::new(),
            txn_offsets: HashMap::new(),
            join_in_purgatory: false,
            deleted: false,
            consumer: None,
            share: None,
        }
    }

    /// Whether every member has rejoined (Kafka's `hasAllMembersJoined`).
    pub fn all_joined(&self) -> bool {
        self.members.values().all(|m| m.joined)
    }

    /// Starts a rebalance unless one is under way: every member must
    /// rejoin within the longest rebalance timeout.
    pub fn prepare_rebalance(&mut self, actions: &mut Vec<Action>) {
        if self.state == GroupState::PreparingRebalance {
            return;
        }
        self.state = GroupState::PreparingRebalance;
        for m in self.members.values_mut() {
            m.joined = false;
        }
        actions.push(Action::CheckSyncs);
        if !self.join_in_purgatory {
            self.join_in_purgatory = true;
            let timeout = self
                .members
                .values()
                .map(|m| m.rebalance_timeout)
                .max()
                .unwrap_or(Duration::ZERO);
            actions.push(Action::SubmitJoin {
                timeout,
                initial: false,
            });
        }
    }

    /// The answer to `member`'s JoinGroup for the current generation:
    /// the leader's carries every member with its metadata for the
    /// chosen protocol.
    pub fn join_result(&self, member: &str, error: i16) -> JoinResult {
        let leader = self.leader.clone().unwrap_or_default();
        let members = if leader == member {
            let protocol = self.protocol.as_deref().unwrap_or_default();
            self.members
                .iter()
                .map(|(id, m)| (id.clone(), m.instance_id.clone(), m.metadata(protocol)))
                .collect()
        } else {
            Vec::new()
        };
        JoinResult {
            error,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader,
            member_id: member.to_string(),
            members,
        }
    }

    /// The protocol every member supports that they rank highest in sum
    /// (Kafka's vote), if any.
    pub fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        first
            .protocols
            .iter()
            .map(|(name, _)| name)
            .filter(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == *name))
            })
            .min_by_key(|name| {
                self.members
                    .values()
                    .map(|m| {
                        m.protocols
                            .iter()
                            .position(|(n, _)| n == *name)
                            .unwrap_or(usize::MAX)
                    })
                    .sum::<usize>()
            })
            .cloned()
    }

    /// Whether the group takes a JoinGroup from `member` (empty for a new
    /// one) under `group.max.size` (`max`), as Kafka's coordinator
    /// decides: an empty group takes anyone; during a rebalance, a member
    /// already waiting for its join, and anyone while fewer than `max`
    /// wait (so that, the limit lowered, the last to rejoin are turned
    /// away); otherwise its members, and newcomers while it has fewer
    /// than `max`.
    pub fn takes(&self, member: &str, max: u32) -> bool {
        let max = max as usize;
        match self.state {
            GroupState::Empty => true,
            GroupState::PreparingRebalance => {
                let waiting = |m: &Member| m.join_waiter.is_some();
                self.members.get(member).is_some_and(waiting)
                    || self.members.values().filter(|m| waiting(m)).count() < max
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.members.contains_key(member) || self.members.len() < max
            }
        }
    }

    /// Removes a member; starts a rebalance if others remain, or leaves the
    /// group empty. Returns the member.
    pub fn remove(&mut self, id: &str, actions: &mut Vec<Action>) -> Option<Member> {
        let member = self.take_member(id)?;
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol = None;
            // A round under way ends with nobody in it.
            actions.push(Action::CheckJoins);
            actions.push(Action::CheckSyncs);
        } else if self.state == GroupState::PreparingRebalance {
            // One fewer to wait for.
            actions.push(Action::CheckJoins);
        } else {
            self.prepare_rebalance(actions);
        }
        Some(member)
    }
}

/// Static membership (`group.instance.id`): a member that names its
/// instance keeps its place across restarts. It joins with no member id
/// and, if its instance is known, takes over the member id's place, its
/// assignment and all, fencing the one it replaces; as in Kafka, no
/// rebalance follows if the group is Stable and its protocol stays.
impl Group {
    /// Takes a member out of the group's maps (the member id and, for a
    /// static member, its instance); nothing else changes.
    pub fn take_member(&mut self, id: &str) -> Option<Member> {
        let member = self.members.remove(id)?;
        if let Some(instance) = &member.instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(id) {
                self.static_members.remove(instance);
            }
        }
        Some(member)
    }

    /// For a group that keeps its members when its coordinator moves (a
    /// Stable classic group, or a consumer-protocol group): starts each
    /// member's session again from now, and returns its timers with the
    /// timeouts they now run for (a consumer-protocol member still giving
    /// up partitions also gets its rebalance timeout afresh, as Kafka's
    /// coordinator schedules both on loading the group). `None` for a
    /// group that loses its members.
    pub fn restart_sessions(&mut self) -> Option<Vec<(SessionCompleter, Duration)>> {
        let now = Instant::now();
        let mut timers = Vec::new();
        if let Some(s) = &mut self.share {
            for m in s.members.values_mut() {
                m.last_beat = now;
                timers.extend(m.session.clone().map(|s| (s, m.session_timeout)));
            }
            return Some(timers);
        }
        if let Some(c) = &mut self.consumer {
            for m in c.members.values_mut() {
                m.last_beat = now;
                timers.extend(m.session.clone().map(|s| (s, m.session_timeout)));
                timers.extend(m.revocation.clone().map(|r| (r, m.rebalance_timeout)));
            }
            return Some(timers);
        }
        if self.state != GroupState::Stable {
            return None;
        }
        for m in self.members.values_mut() {
            m.last_beat = now;
            timers.extend(m.session.clone().map(|s| (s, m.session_timeout)));
        }
        Some(timers)
    }

    /// Forgets every member, static ones included (the group moved away).
    pub fn take_members(&mut self) -> BTreeMap<String, Member> {
        self.static_members.clear();
        std::mem::take(&mut self.members)
    }

    /// Kafka's `validateMember`: a request naming an instance must come
    /// from the member id that holds it (FENCED_INSTANCE_ID otherwise, or
    /// UNKNOWN_MEMBER_ID for an instance the group does not know), and the
    /// member must exist.
    pub fn validate(&mut self, member: &str, instance: Option<&str>) -> Result<&mut Member, i16> {
        if let Some(instance) = instance {
            match self.static_members.get(instance) {
                None => return Err(ResponseError::UnknownMemberId.code()),
                Some(holder) if holder != member => {
                    return Err(ResponseError::FencedInstanceId.code())
                }
                Some(_) => {}
            }
        }
        self.members
            .get_mut(member)
            .ok_or(ResponseError::UnknownMemberId.code())
    }

    /// Whether `member` has been fenced out of `instance` by a newer
    /// member id.
    pub fn fenced(&self, member: &str, instance: Option<&str>) -> bool {
        instance
            .and_then(|i| self.static_members.get(i))
            .is_some_and(|holder| holder != member)
    }

    /// Moves `instance`'s member from `old` to `new`, keeping its
    /// assignment; a JoinGroup the old id has waiting is answered
    /// FENCED_INSTANCE_ID (a SyncGroup it has waiting sees the fence when
    /// next checked), and its session gives way to one for the new id.
    /// Returns the answer for the old id's waiting join, if any.
    pub fn replace_static(
        &mut self,
        instance: &str,
        old: &str,
        new: &str,
        actions: &mut Vec<Action>,
    ) -> Option<(oneshot::Sender<JoinResult>, JoinResult)> {
        let mut member = self.members.remove(old)?;
        let fenced = member.join_waiter.take().map(|tx| {
            let answer = JoinResult {
                error: ResponseError::FencedInstanceId.code(),
                member_id: old.to_string(),
                ..JoinResult::default()
            };
            (tx, answer)
        });
        member.awaiting_sync = false;
        if let Some(session) = member.session.take() {
            actions.push(Action::EndSession(session));
        }
        actions.push(Action::StartSession {
            member: new.to_string(),
            timeout: member.session_timeout,
        });
        actions.push(Action::CheckSyncs);
        self.members.insert(new.to_string(), member);
        if self.leader.as_deref() == Some(old) {
            self.leader = Some(new.to_string());
        }
        self.static_members
            .insert(instance.to_string(), new.to_string());
        fenced
    }
}
