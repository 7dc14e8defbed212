//! Classic members in a consumer-protocol group, and the two conversions
//! between the kinds of group: what lets consumers move from the classic
//! protocol to the consumer group protocol (KIP-848) one at a time, as
//! Kafka's coordinator allows with `group.consumer.migration.policy`
//! `bidirectional`.
//!
//! A classic member (JoinGroup, SyncGroup, Heartbeat) in a
//! consumer-protocol group is assigned its partitions by the coordinator,
//! as the others are, and told about them in the classic protocol's
//! terms: its member epoch is its generation; a JoinGroup is answered at
//! once, with the epoch the member reconciled to given the partitions its
//! subscription says it owns; SyncGroup hands it what it owns in that
//! epoch; and a heartbeat answers REBALANCE_IN_PROGRESS whenever it must
//! rejoin to move on (its epoch is behind the group's, it has partitions
//! to give up, or partitions it waited for are free). It gives partitions
//! up by rejoining without them. It must rejoin, and sync after a join,
//! within its rebalance timeout, or it is fenced.
//!
//! A classic group of the consumer protocol with members becomes a
//! consumer-protocol group when a ConsumerGroupHeartbeat joins it: each
//! member keeps its generation and its assignment, and is told to rejoin
//! by its next heartbeat. A consumer-protocol group whose last
//! ConsumerGroupHeartbeat member leaves or is fenced, while classic members
//! remain, becomes a classic group again: Stable at the group epoch, each
//! member holding its target assignment, then rebalancing.

use super::assignors::Partitions;
use super::consumer_group::{
    ConsumerGroup, ConsumerMember, MemberState, Refusal, Topics, TopicsView,
};
use super::group::{Action, Group, GroupState, Member};
use super::ops::{JoinResult, MemberTimer};
use crate::wire::{decode_assignment, decode_subscription, encode_assignment};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use uuid::Uuid;

/// The protocol type of every group that can hold both kinds of member.
const CONSUMER: &str = "consumer";

/// Which conversions between a classic group and a consumer-protocol group
/// with members the coordinator makes (Kafka's
/// `group.consumer.migration.policy`). A classic member joins a
/// consumer-protocol group whatever the policy, as in Kafka.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrationPolicy {
    /// Neither: the other protocol's member is refused by a group with
    /// members, and a group left with classic members stays
    /// consumer-protocol.
    Disabled,
    /// Classic to consumer-protocol only.
    Upgrade,
    /// Consumer-protocol to classic only.
    Downgrade,
    /// Both ways (Kafka's default).
    #[default]
    Bidirectional,
}

impl MigrationPolicy {
    /// Kafka's names, in the order of the variants.
    pub const NAMES: [&'static str; 4] = ["disabled", "upgrade", "downgrade", "bidirectional"];

    /// A classic group with members turns consumer-protocol when a
    /// ConsumerGroupHeartbeat joins it.
    pub fn upgrades(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Upgrade | MigrationPolicy::Bidirectional
        )
    }

    /// A consumer-protocol group left with classic members only turns
    /// classic.
    pub fn downgrades(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Downgrade | MigrationPolicy::Bidirectional
        )
    }

    /// Its name, as Kafka's broker configs give it.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

impl std::str::FromStr for MigrationPolicy {
    type Err = String;

    /// One of [`NAMES`](Self::NAMES), in any case, as Kafka reads it.
    fn from_str(s: &str) -> Result<Self, String> {
        let all = [
            MigrationPolicy::Disabled,
            MigrationPolicy::Upgrade,
            MigrationPolicy::Downgrade,
            MigrationPolicy::Bidirectional,
        ];
        all.into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!(
                    "`{s}` is not a migration policy: one of {}",
                    Self::NAMES.join(", ")
                )
            })
    }
}

/// What a classic member of a consumer-protocol group keeps of the
/// classic protocol. (Its session timeout, the one its JoinGroup asked
/// for, is the member's own.)
pub struct ClassicMeta {
    /// (protocol name, metadata), in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// What its rebalance timeout (in the member's `revocation` slot)
    /// waits for, while it runs.
    pub awaiting: Option<Awaiting>,
    /// Which of its rebalance timeouts is the current one: a timer of an
    /// earlier one that fires late does nothing.
    pub deadline: u64,
}

/// What a classic member must do within its rebalance timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaiting {
    /// Rejoin: it was told REBALANCE_IN_PROGRESS.
    Join,
    /// Send its SyncGroup, after its JoinGroup.
    Sync,
}

impl ClassicMeta {
    /// The protocol it is answered in: the first it offered, as Kafka's
    /// coordinator does.
    pub fn protocol(&self) -> &str {
        self.protocols.first().map_or("", |(name, _)| name)
    }

    /// The embedded protocol's version of its subscription, in which its
    /// assignment is written.
    fn version(&self) -> i16 {
        self.protocols
            .first()
            .and_then(|(_, m)| m.get(..2))
            .map_or(0, |v| i16::from_be_bytes([v[0], v[1]]))
    }
}

/// A classic member's JoinGroup to a consumer-protocol group.
pub struct ClassicJoin {
    /// Empty for a member that does not know its id yet.
    pub member_id: String,
    pub instance_id: Option<String>,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub client_id: String,
    pub client_host: String,
    /// The JoinGroup version asks a new dynamic member to come back with
    /// the id it is given (v4 and later).
    pub requires_known_id: bool,
}

/// How a classic member's JoinGroup is answered.
#[derive(Debug, PartialEq, Eq)]
pub enum ClassicJoined {
    /// MEMBER_ID_REQUIRED, with the id to come back with.
    IdRequired(String),
    /// Joined at this member epoch (its generation), in this protocol.
    Joined {
        member_id: String,
        epoch: i32,
        protocol: String,
    },
}

/// Kafka's `throwIfGenerationIdUnmatched`: a classic member's generation
/// is its member epoch.
fn same_generation(id: &str, epoch: i32, generation: i32) -> Result<(), Refusal> {
    if generation == epoch {
        return Ok(());
    }
    Err(Refusal::new(
        ResponseError::IllegalGeneration,
        format!(
            "The request generation id {generation} is not equal to the member epoch {epoch} \
             of member {id}."
        ),
    ))
}

/// FENCED_INSTANCE_ID: `holder` holds `instance` now, not `member`.
fn fenced(member: &str, instance: &str, holder: &str) -> Refusal {
    Refusal::new(
        ResponseError::FencedInstanceId,
        format!(
            "Static member {member} with instance id {instance} is fenced by existing member \
             {holder}."
        ),
    )
}

/// Partitions by topic name as partitions by topic id, leaving out the
/// topics the cluster does not have.
fn by_id<'a>(
    partitions: impl IntoIterator<Item = (&'a str, i32)>,
    topics: &dyn Topics,
) -> Partitions {
    let mut out = Partitions::new();
    for (name, p) in partitions {
        if let Some((id, _)) = topics.topic(name) {
            out.entry(id).or_default().insert(p);
        }
    }
    out
}

/// Partitions by topic id as partitions by name, through the topics a
/// group subscribes to (an assignment names no others).
fn by_name(partitions: &Partitions, subscribed: &TopicsView) -> BTreeMap<String, BTreeSet<i32>> {
    subscribed
        .iter()
        .filter_map(|(name, (id, _))| Some((name.clone(), partitions.get(id)?.clone())))
        .collect()
}

impl ConsumerGroup {
    /// Kafka's `supportsClassicProtocols`: a member of the consumer
    /// protocol type offering a protocol every classic member offers too.
    fn supports_classic(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        protocol_type == CONSUMER
            && protocols.iter().any(|(name, _)| {
                self.members
                    .values()
                    .filter_map(|m| m.classic.as_ref())
                    .all(|c| c.protocols.iter().any(|(n, _)| n == name))
            })
    }

    /// Kafka's `validateConsumerGroupMember` for a classic member's
    /// request: the member holding `instance` must be `member`, and
    /// `member` must exist and speak the classic protocol. Its id.
    fn classic_member(&self, member: &str, instance: Option<&str>) -> Result<String, Refusal> {
        let id = match instance {
            None => member,
            Some(instance) => match self.static_members.get(instance) {
                None => {
                    return Err(Refusal::new(
                        ResponseError::UnknownMemberId,
                        format!("Member with instance id {instance} is not a member of the group."),
                    ))
                }
                Some(holder) if holder != member => return Err(fenced(member, instance, holder)),
                Some(holder) => holder,
            },
        };
        match self.members.get(id) {
            None => Err(Refusal::new(
                ResponseError::UnknownMemberId,
                format!("Member {id} is not a member of the group."),
            )),
            Some(m) if m.classic.is_none() => Err(Refusal::new(
                ResponseError::UnknownMemberId,
                format!("Member {id} does not use the classic protocol."),
            )),
            Some(_) => Ok(id.to_string()),
        }
    }

    /// A classic member's JoinGroup: it joins, or rejoins with the
    /// partitions it still owns, and is answered at once with the epoch
    /// it reconciled to.
    pub fn classic_join(
        &mut self,
        join: ClassicJoin,
        topics: &dyn Topics,
        actions: &mut Vec<Action>,
    ) -> Result<ClassicJoined, Refusal> {
        let unknown = join.member_id.is_empty();
        let member_id = if unknown {
            Uuid::new_v4().to_string()
        } else {
            join.member_id.clone()
        };
        if !self.supports_classic(&join.protocol_type, &join.protocols) {
            return Err(Refusal::new(
                ResponseError::InconsistentGroupProtocol,
                format!("Member {member_id}'s protocols are not supported."),
            ));
        }
        if unknown && join.instance_id.is_none() && join.requires_known_id {
            return Ok(ClassicJoined::IdRequired(member_id));
        }
        let Some(subscription) = join
            .protocols
            .first()
            .and_then(|(_, metadata)| decode_subscription(metadata))
        else {
            return Err(Refusal::new(
                ResponseError::InconsistentGroupProtocol,
                format!("Member {member_id}'s subscription is not one of the consumer protocol."),
            ));
        };
        let fresh = match &join.instance_id {
            Some(instance) => match self.static_members.get(instance).cloned() {
                Some(holder) if unknown => {
                    self.take_place(&holder, &member_id, actions);
                    false
                }
                Some(holder) if holder != member_id => {
                    return Err(fenced(&member_id, instance, &holder))
                }
                Some(_) => false,
                None if unknown => true,
                None => {
                    return Err(Refusal::new(
                        ResponseError::UnknownMemberId,
                        format!("Instance id {instance} is unknown."),
                    ))
                }
            },
            None => !self.members.contains_key(&member_id),
        };
        if fresh {
            self.add_classic(&member_id, &join, actions);
        }
        let mut bump = self.epoch == 0;
        let m = self
            .members
            .get_mut(&member_id)
            .expect("found or added above");
        m.last_beat = Instant::now();
        m.away = false;
        m.client_id = join.client_id;
        m.client_host = join.client_host;
        m.instance_id = join.instance_id.or(m.instance_id.take());
        if let Some(rack) = subscription.rack {
            m.rack_id = Some(rack);
        }
        m.rebalance_timeout = join.rebalance_timeout;
        m.session_timeout = join.session_timeout;
        let names: BTreeSet<String> = subscription.topics.into_iter().collect();
        bump |= names != m.topic_names;
        m.topic_names = names;
        if let Some(s) = &m.session {
            actions.push(Action::Beat(s.clone(), join.session_timeout));
        }
        // Its join ends the wait for it, and the wait for its SyncGroup
        // begins.
        if let Some(r) = m.revocation.take() {
            actions.push(Action::EndSession(r));
        }
        let deadline = m.classic.as_ref().map_or(0, |c| c.deadline) + 1;
        m.classic = Some(ClassicMeta {
            protocols: join.protocols,
            awaiting: Some(Awaiting::Sync),
            deadline,
        });
        actions.push(Action::StartConsumerTimer {
            member: member_id.clone(),
            incarnation: m.incarnation,
            timeout: join.rebalance_timeout,
            timer: MemberTimer::Rejoin { deadline },
        });
        self.move_on(bump, topics);
        let owned = by_id(
            subscription
                .owned
                .iter()
                .flat_map(|(t, ps)| ps.iter().map(move |p| (t.as_str(), *p))),
            topics,
        );
        self.reconcile(&member_id, Some(&owned), actions);
        let m = &self.members[&member_id];
        let protocol = m.classic.as_ref().map_or("", ClassicMeta::protocol);
        Ok(ClassicJoined::Joined {
            protocol: protocol.to_string(),
            epoch: m.epoch,
            member_id,
        })
    }

    /// A new classic member, its session started.
    fn add_classic(&mut self, member_id: &str, join: &ClassicJoin, actions: &mut Vec<Action>) {
        let incarnation = self.next_incarnation();
        let member = ConsumerMember::new(
            (&join.client_id, &join.client_host),
            join.instance_id.clone(),
            (join.rebalance_timeout, join.session_timeout),
            incarnation,
        );
        if let Some(instance) = &join.instance_id {
            self.static_members
                .insert(instance.clone(), member_id.to_string());
        }
        self.members.insert(member_id.to_string(), member);
        actions.push(Action::StartConsumerTimer {
            member: member_id.to_string(),
            incarnation,
            timeout: join.session_timeout,
            timer: MemberTimer::Session,
        });
    }

    /// A static member back under a new id takes its instance's place:
    /// its partitions and target, from epoch 0, as Kafka's coordinator
    /// copies it; the old id's timers end.
    fn take_place(&mut self, holder: &str, new_id: &str, actions: &mut Vec<Action>) {
        let Some(mut m) = self.members.remove(holder) else {
            return;
        };
        actions.extend(m.take_timers().map(Action::EndSession));
        if let Some(t) = self.target.remove(holder) {
            self.target.insert(new_id.to_string(), t);
        }
        m.epoch = 0;
        m.previous_epoch = 0;
        m.away = false;
        m.incarnation = self.next_incarnation();
        if let Some(instance) = &m.instance_id {
            self.static_members
                .insert(instance.clone(), new_id.to_string());
        }
        actions.push(Action::StartConsumerTimer {
            member: new_id.to_string(),
            incarnation: m.incarnation,
            timeout: m.session_timeout,
            timer: MemberTimer::Session,
        });
        self.members.insert(new_id.to_string(), m);
    }

    /// Starts `id`'s rebalance timeout for its rejoin, unless one runs
    /// (one for its SyncGroup then waits for the rejoin instead).
    fn must_rejoin(&mut self, id: &str, actions: &mut Vec<Action>) {
        let Some(m) = self.members.get_mut(id) else {
            return;
        };
        let (incarnation, timeout) = (m.incarnation, m.rebalance_timeout);
        let Some(c) = m.classic.as_mut() else {
            return;
        };
        if c.awaiting.replace(Awaiting::Join).is_none() {
            c.deadline += 1;
            actions.push(Action::StartConsumerTimer {
                member: id.to_string(),
                incarnation,
                timeout,
                timer: MemberTimer::Rejoin {
                    deadline: c.deadline,
                },
            });
        }
    }

    /// A classic member's SyncGroup: the partitions it owns in its epoch,
    /// written in its subscription's version; REBALANCE_IN_PROGRESS if the
    /// group moved on and it has nothing to give up first.
    pub fn classic_sync(
        &mut self,
        member: &str,
        instance: Option<&str>,
        generation: i32,
        (protocol_type, protocol): (Option<&str>, Option<&str>),
        actions: &mut Vec<Action>,
    ) -> Result<Bytes, Refusal> {
        let id = self.classic_member(member, instance)?;
        let m = &self.members[&id];
        let c = m.classic.as_ref().expect("a classic member");
        same_generation(&id, m.epoch, generation)?;
        if protocol_type.is_some_and(|t| t != CONSUMER) {
            return Err(Refusal::new(
                ResponseError::InconsistentGroupProtocol,
                format!("The protocol type of member {id}'s request is not {CONSUMER}."),
            ));
        }
        if protocol.is_some_and(|p| p != c.protocol()) {
            return Err(Refusal::new(
                ResponseError::InconsistentGroupProtocol,
                format!(
                    "The protocol name of member {id}'s request is not {}, returned in the \
                     join response.",
                    c.protocol()
                ),
            ));
        }
        if self.epoch > m.epoch && m.state != MemberState::UnrevokedPartitions {
            self.must_rejoin(&id, actions);
            return Err(Refusal::new(
                ResponseError::RebalanceInProgress,
                format!("A new rebalance is triggered and member {id} should rejoin to catch up."),
            ));
        }
        let assignment = encode_assignment(&by_name(&m.assigned, &self.subscribed), c.version());
        let m = self.members.get_mut(&id).expect("found above");
        m.heard(actions);
        let c = m.classic.as_mut().expect("a classic member");
        if c.awaiting == Some(Awaiting::Sync) {
            c.awaiting = None;
            actions.extend(m.revocation.take().map(Action::EndSession));
        }
        Ok(assignment)
    }

    /// A classic member's Heartbeat: its session goes on; a member that
    /// must rejoin to move on is told REBALANCE_IN_PROGRESS.
    pub fn classic_heartbeat(
        &mut self,
        member: &str,
        instance: Option<&str>,
        generation: i32,
        actions: &mut Vec<Action>,
    ) -> Result<(), Refusal> {
        let id = self.classic_member(member, instance)?;
        let waiting = self.waiting_on_unreleased(&id);
        let epoch = self.epoch;
        let m = self.members.get_mut(&id).expect("found above");
        same_generation(&id, m.epoch, generation)?;
        m.heard(actions);
        let rejoin = m.epoch < epoch
            || m.state == MemberState::UnrevokedPartitions
            || (m.state == MemberState::UnreleasedPartitions && !waiting);
        if rejoin {
            self.must_rejoin(&id, actions);
            return Err(Refusal::new(
                ResponseError::RebalanceInProgress,
                format!("Member {id} must rejoin the group."),
            ));
        }
        Ok(())
    }

    /// Whether a member waiting for partitions still waits for one that
    /// another member owns (Kafka's `waitingOnUnreleasedPartition`).
    fn waiting_on_unreleased(&self, id: &str) -> bool {
        let Some(m) = self.members.get(id) else {
            return false;
        };
        if m.state != MemberState::UnreleasedPartitions {
            return false;
        }
        let others = self.owners(id);
        self.target.get(id).is_some_and(|target| {
            target.iter().any(|(t, ps)| {
                ps.iter().any(|p| {
                    !m.assigned.get(t).is_some_and(|a| a.contains(p)) && others.contains(&(*t, *p))
                })
            })
        })
    }

    /// A classic member's LeaveGroup (one member of its batch): by member
    /// id, or by instance alone (an admin tool). Returns the member's id;
    /// the member is out and its timers end. No conversion follows, as in
    /// Kafka.
    pub fn classic_leave(
        &mut self,
        member: &str,
        instance: Option<&str>,
        actions: &mut Vec<Action>,
    ) -> Result<String, Refusal> {
        let id = match instance {
            Some(instance) if member.is_empty() => {
                self.static_members.get(instance).cloned().ok_or_else(|| {
                    Refusal::new(
                        ResponseError::UnknownMemberId,
                        format!("Instance id {instance} is unknown."),
                    )
                })?
            }
            _ => self.classic_member(member, instance)?,
        };
        actions.extend(self.remove(&id).into_iter().map(Action::EndSession));
        Ok(id)
    }

    /// The consumer-protocol group that the classic group `g` becomes:
    /// each member at the group's generation, owning its assignment,
    /// which is also its target. `None` if a member's subscription or
    /// assignment is not one of the consumer protocol.
    pub fn from_classic(g: &Group, topics: &dyn Topics) -> Option<ConsumerGroup> {
        let mut c = ConsumerGroup::default();
        c.epoch = g.generation;
        c.assignment_epoch = g.generation;
        for (id, m) in &g.members {
            let metadata = match &g.protocol {
                Some(p) => m.metadata(p),
                None => m.protocols.first()?.1.clone(),
            };
            let subscription = decode_subscription(&metadata)?;
            let assignment = decode_assignment(&m.assignment)?;
            let assigned = by_id(assignment.iter().map(|(t, p)| (t.as_str(), *p)), topics);
            let mut member = ConsumerMember::new(
                (&m.client_id, &m.client_host),
                m.instance_id.clone(),
                (m.rebalance_timeout, m.session_timeout),
                c.next_incarnation(),
            );
            member.rack_id = subscription.rack;
            member.topic_names = subscription.topics.into_iter().collect();
            member.epoch = g.generation;
            member.previous_epoch = g.generation;
            member.assigned = assigned.clone();
            member.classic = Some(ClassicMeta {
                protocols: m.protocols.clone(),
                awaiting: None,
                deadline: 0,
            });
            c.members.insert(id.clone(), member);
            c.target.insert(id.clone(), assigned);
            if let Some(instance) = &m.instance_id {
                c.static_members.insert(instance.clone(), id.clone());
            }
        }
        c.subscribed = c.subscribed_topics(topics);
        Some(c)
    }

    /// Whether a classic static member joining under `instance` with no
    /// member id turns this group classic: it takes the place of the
    /// instance's member, and every other member speaks the classic
    /// protocol (Kafka's `validateOnlineDowngradeWithReplacedMemberId`).
    pub fn turns_classic_replacing(&self, instance: &str) -> bool {
        self.static_members.get(instance).is_some_and(|holder| {
            self.members
                .iter()
                .all(|(id, m)| id == holder || m.classic.is_some())
        })
    }

    /// Whether this group, fenced of `member`, is to become a classic
    /// group: `member` is in it, others are too, and all of those speak
    /// the classic protocol.
    pub fn turns_classic_without(&self, member: &str) -> bool {
        self.members.contains_key(member)
            && self.members.len() > 1
            && self
                .members
                .iter()
                .all(|(id, m)| id == member || m.classic.is_some())
    }
}

impl Group {
    /// A classic group with members becomes a consumer-protocol group as
    /// a ConsumerGroupHeartbeat joins it (Kafka's online upgrade): the
    /// JoinGroups waiting in a round are told to rejoin, the classic
    /// sessions end and each member's starts anew. Returns the waiting
    /// JoinGroups with their answers, or `None` (and nothing changes) if
    /// the group is not of the consumer protocol type, or a member's
    /// subscription or assignment is not one of it.
    pub fn upgrade(
        &mut self,
        topics: &dyn Topics,
        actions: &mut Vec<Action>,
    ) -> Option<Vec<(oneshot::Sender<JoinResult>, JoinResult)>> {
        if self.protocol_type.as_deref() != Some(CONSUMER) {
            return None;
        }
        let c = ConsumerGroup::from_classic(self, topics)?;
        let mut answers = Vec::new();
        for (id, mut m) in self.take_members() {
            if let Some(tx) = m.join_waiter.take() {
                let answer = JoinResult {
                    error: ResponseError::RebalanceInProgress.code(),
                    member_id: id.clone(),
                    ..JoinResult::default()
                };
                answers.push((tx, answer));
            }
            actions.extend(m.session.take().map(Action::EndSession));
        }
        for (id, m) in &c.members {
            actions.push(Action::StartConsumerTimer {
                member: id.clone(),
                incarnation: m.incarnation,
                timeout: m.session_timeout,
                timer: MemberTimer::Session,
            });
        }
        self.pending_ids.clear();
        self.state = GroupState::Empty;
        self.leader = None;
        self.protocol = None;
        self.consumer = Some(c);
        // A round under way ends, and SyncGroups waiting in it are told
        // to rejoin.
        actions.push(Action::CheckJoins);
        actions.push(Action::CheckSyncs);
        Some(answers)
    }

    /// A consumer-protocol group whose members all speak the classic
    /// protocol once `leaving` is gone becomes a classic group (Kafka's
    /// online downgrade): Stable at the group epoch (not moved on by the
    /// fence, so that the others' next heartbeats ask them to rejoin
    /// rather than tell them their generation is gone), each member
    /// holding its target assignment, then rebalancing. With no one
    /// `leaving` (a classic static member took the last consumer-protocol
    /// member's place, and its partitions), it does not rebalance. The
    /// members' timers give way to classic sessions.
    pub fn downgrade(&mut self, leaving: Option<&str>, actions: &mut Vec<Action>) {
        let Some(mut c) = self.consumer.take() else {
            return;
        };
        let leaving = leaving.unwrap_or_default();
        if let Some(instance) = c.members.get(leaving).and_then(|m| m.instance_id.clone()) {
            c.static_members.remove(&instance);
        }
        self.generation = c.epoch;
        self.state = GroupState::Stable;
        self.protocol_type = Some(CONSUMER.to_string());
        self.leader = None;
        self.pending_ids.clear();
        let now = Instant::now();
        for (id, mut m) in std::mem::take(&mut c.members) {
            actions.extend(m.take_timers().map(Action::EndSession));
            let Some(classic) = m.classic.filter(|_| id != leaving) else {
                continue;
            };
            let target = c.target.get(&id).cloned().unwrap_or_default();
            let assignment = encode_assignment(&by_name(&target, &c.subscribed), classic.version());
            if let Some(instance) = &m.instance_id {
                self.static_members.insert(instance.clone(), id.clone());
            }
            actions.push(Action::StartSession {
                member: id.clone(),
                timeout: m.session_timeout,
            });
            self.members.insert(
                id,
                Member {
                    client_id: m.client_id,
                    client_host: m.client_host,
                    instance_id: m.instance_id,
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    protocols: classic.protocols,
                    joined: false,
                    join_waiter: None,
                    awaiting_sync: false,
                    assignment,
                    session: None,
                    last_beat: now,
                },
            );
        }
        self.protocol = self.select_protocol();
        self.leader = self.members.keys().next().cloned();
        if self.members.is_empty() {
            self.state = GroupState::Empty;
        } else if !leaving.is_empty() {
            self.prepare_rebalance(actions);
        }
    }
}
