//! A group of the consumer group protocol (KIP-848), as Kafka's group
//! coordinator keeps it: the coordinator assigns the partitions itself and
//! hands each member its share through its heartbeats, one epoch at a time.
//!
//! Three epochs order the changes. The group epoch goes up whenever the
//! membership, a subscription or a subscribed topic's partitions change;
//! the target assignment is computed for that epoch; and each member
//! reaches it through its own member epoch. A partition goes to its new
//! owner only once its old owner has said (in a heartbeat) that it let go
//! of it, so no partition is ever owned by two members at once. A member
//! that keeps a partition it must give up past its rebalance timeout, or
//! that is not heard from within its session timeout, is fenced: removed,
//! its partitions free for the others. Both timeouts are delayed
//! operations in the coordinator's sessions purgatory.

use super::assignors::{self, Partitions, Spec};
use super::classic_members::ClassicMeta;
use super::group::Action;
use super::ops::{MemberTimer, SessionCompleter};
use kafka_protocol::error::ResponseError;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Where a member is on its way to the target assignment (Kafka's
/// `MemberState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// It has its target assignment, or all of it that is free.
    Stable,
    /// It must first give up partitions (`revoking`); its epoch waits.
    UnrevokedPartitions,
    /// It is in the target epoch, waiting for partitions that others
    /// still own.
    UnreleasedPartitions,
}

/// A member of a consumer-protocol group.
pub struct ConsumerMember {
    pub client_id: String,
    /// `/address`, as DescribeGroups gives it (empty where unknown).
    pub client_host: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout: Duration,
    pub session_timeout: Duration,
    pub topic_names: BTreeSet<String>,
    pub topic_regex: Option<TopicRegex>,
    pub assignor: Option<String>,
    pub epoch: i32,
    pub previous_epoch: i32,
    pub state: MemberState,
    /// What it owns (the last assignment it was sent).
    pub assigned: Partitions,
    /// What it must give up and still owns.
    pub revoking: Partitions,
    /// A static member that left for a while (epoch -2): it keeps its
    /// place and partitions until its session runs out.
    pub away: bool,
    /// Its session: expires `session_timeout` after its last heartbeat.
    pub session: Option<SessionCompleter>,
    /// Its rebalance timeout: while it has partitions to give up, or, for
    /// a classic member, while it must rejoin or sync.
    pub revocation: Option<SessionCompleter>,
    /// When it was last heard from.
    pub last_beat: Instant,
    /// Which joining under its id this is: the member chooses its id and
    /// keeps it when it joins again, so a timer of an earlier joining
    /// that fires late must not touch this one.
    pub incarnation: u64,
    /// Set for a member that speaks the classic protocol (JoinGroup,
    /// SyncGroup, Heartbeat) in this group.
    pub classic: Option<ClassicMeta>,
}

/// A ConsumerGroupHeartbeat, its fields read (`None`: not sent, "no
/// change").
pub struct Beat {
    /// Never empty: made by the coordinator for a version 0 join.
    pub member_id: String,
    pub epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout: Option<Duration>,
    pub topic_names: Option<Vec<String>>,
    pub topic_regex: Option<TopicRegex>,
    pub assignor: Option<String>,
    /// The partitions it owns, by topic id.
    pub owned: Option<Partitions>,
    pub client_id: String,
    pub client_host: String,
}

/// What a heartbeat is answered.
#[derive(Debug)]
pub struct BeatAnswer {
    pub member_id: String,
    pub epoch: i32,
    /// Sent when it changed, and to a full request.
    pub assignment: Option<Partitions>,
}

/// A refused heartbeat: the error and Kafka's kind of message.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    pub error: ResponseError,
    pub message: String,
}

impl Refusal {
    pub fn new(error: ResponseError, message: impl Into<String>) -> Refusal {
        Refusal {
            error,
            message: message.into(),
        }
    }
}

/// The leave epochs of a heartbeat: a member leaving, and a static
/// member leaving for a while.
pub const LEAVE: i32 = -1;
pub const LEAVE_STATIC: i32 = -2;

/// Topics by name: (id, partition count).
pub type TopicsView = BTreeMap<String, (Uuid, u32)>;

/// The cluster's topics as a group asks about them at each heartbeat: by
/// name, and all of them only for a regex subscription.
pub trait Topics {
    /// The topic called `name`: its id and partition count.
    fn topic(&self, name: &str) -> Option<(Uuid, u32)>;
    /// Calls `f` with every topic's name, id and partition count.
    fn each(&self, f: &mut dyn FnMut(&str, Uuid, u32));
}

impl Topics for TopicsView {
    fn topic(&self, name: &str) -> Option<(Uuid, u32)> {
        self.get(name).copied()
    }

    fn each(&self, f: &mut dyn FnMut(&str, Uuid, u32)) {
        for (name, &(id, n)) in self {
            f(name, id, n);
        }
    }
}

/// One consumer-protocol group.
#[derive(Default)]
pub struct ConsumerGroup {
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    /// The target assignment, computed at `assignment_epoch`.
    pub target: BTreeMap<String, Partitions>,
    /// The subscribed topics as the target assignment saw them.
    pub subscribed: TopicsView,
    /// `group.instance.id` -> the member id holding it.
    pub static_members: HashMap<String, String>,
    /// The last member incarnation handed out.
    incarnations: u64,
}

impl ConsumerGroup {
    /// A new member's incarnation: never 0, which a classic group's
    /// members' timers carry.
    pub(super) fn next_incarnation(&mut self) -> u64 {
        self.incarnations += 1;
        self.incarnations
    }
}

/// A regex subscription, compiled once: it matches whole topic names, as
/// Kafka's RE2/J `matches` does.
pub struct TopicRegex {
    /// As the member sent it.
    pub source: String,
    whole: regex::Regex,
}

impl TopicRegex {
    /// INVALID_REGULAR_EXPRESSION unless `source` compiles.
    pub fn new(source: String) -> Result<TopicRegex, Refusal> {
        match regex::Regex::new(&format!("^(?:{source})$")) {
            Ok(whole) => Ok(TopicRegex { source, whole }),
            Err(_) => Err(Refusal::new(
                ResponseError::InvalidRegularExpression,
                format!("SubscribedTopicRegex `{source}` is not a valid regular expression."),
            )),
        }
    }
}

impl ConsumerMember {
    /// A member that has just joined: epoch 0, subscribed to nothing yet,
    /// owning nothing.
    pub fn new(
        (client_id, client_host): (&str, &str),
        instance_id: Option<String>,
        (rebalance_timeout, session_timeout): (Duration, Duration),
        incarnation: u64,
    ) -> ConsumerMember {
        ConsumerMember {
            client_id: client_id.to_string(),
            client_host: client_host.to_string(),
            instance_id,
            rack_id: None,
            rebalance_timeout,
            session_timeout,
            topic_names: BTreeSet::new(),
            topic_regex: None,
            assignor: None,
            epoch: 0,
            previous_epoch: -1,
            state: MemberState::Stable,
            assigned: Partitions::new(),
            revoking: Partitions::new(),
            away: false,
            session: None,
            revocation: None,
            last_beat: Instant::now(),
            incarnation,
            classic: None,
        }
    }

    /// Takes its timers (its session and its rebalance timeout), for the
    /// caller to end.
    pub fn take_timers(&mut self) -> impl Iterator<Item = SessionCompleter> {
        self.session
            .take()
            .into_iter()
            .chain(self.revocation.take())
    }

    /// A sign of life: its session starts again from now.
    pub fn heard(&mut self, actions: &mut Vec<Action>) {
        self.last_beat = Instant::now();
        if let Some(s) = &self.session {
            actions.push(Action::Beat(s.clone(), self.session_timeout));
        }
    }

    /// Whether `timer` is the rebalance timeout it runs now: the one for
    /// the epoch whose partitions it is giving up, or, for a classic
    /// member, its current wait for a rejoin or a SyncGroup.
    pub fn rebalance_timer_is(&self, timer: MemberTimer) -> bool {
        match timer {
            MemberTimer::Session => false,
            MemberTimer::Revocation { epoch } => {
                self.epoch == epoch && self.state == MemberState::UnrevokedPartitions
            }
            MemberTimer::Rejoin { deadline } => self
                .classic
                .as_ref()
                .is_some_and(|c| c.awaiting.is_some() && c.deadline == deadline),
        }
    }

    /// A request's epoch against its own: STALE_MEMBER_EPOCH if they
    /// differ, or ILLEGAL_GENERATION for a classic member, to which the
    /// epoch is its generation.
    fn check_epoch(&self, epoch: i32) -> Result<(), i16> {
        match (epoch == self.epoch, self.classic.is_some()) {
            (true, _) => Ok(()),
            (false, true) => Err(ResponseError::IllegalGeneration.code()),
            (false, false) => Err(ResponseError::StaleMemberEpoch.code()),
        }
    }

    /// Whether it subscribes to the topic called `name`.
    fn subscribes(&self, name: &str) -> bool {
        self.topic_names.contains(name)
            || self
                .topic_regex
                .as_ref()
                .is_some_and(|r| r.whole.is_match(name))
    }

    /// The partitions it owns and those it is giving up.
    fn owns(&self) -> impl Iterator<Item = (Uuid, i32)> + '_ {
        self.assigned
            .iter()
            .chain(&self.revoking)
            .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
    }
}

fn is_subset(owned: Option<&Partitions>, of: &Partitions) -> bool {
    owned.is_some_and(|owned| {
        owned
            .iter()
            .all(|(t, ps)| ps.is_empty() || of.get(t).is_some_and(|mine| ps.is_subset(mine)))
    })
}

/// Whether `owned` (not sent: as if all of them) still holds any of `partitions`.
fn still_owns(owned: Option<&Partitions>, partitions: &Partitions) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned
        .iter()
        .any(|(t, ps)| partitions.get(t).is_some_and(|r| !r.is_disjoint(ps)))
}

impl ConsumerGroup {
    /// Kafka's state name: Empty, Assigning (the target assignment is
    /// behind the group epoch), Reconciling (a member is on its way to
    /// it) or Stable.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.epoch > self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// The assignor the members ask for most (the default when none asks).
    pub fn assignor(&self) -> &str {
        let mut asked: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.assignor {
                *asked.entry(a).or_default() += 1;
            }
        }
        asked
            .into_iter()
            .max_by_key(|(name, n)| (*n, std::cmp::Reverse(*name)))
            .map_or(assignors::ASSIGNORS[0], |(name, _)| name)
    }

    /// Handles one heartbeat: joins, leaves, or moves the member towards
    /// the target assignment; the session and rebalance timers it sets in
    /// motion go to `actions`.
    pub fn heartbeat(
        &mut self,
        beat: Beat,
        topics: &dyn Topics,
        session_timeout: Duration,
        actions: &mut Vec<Action>,
    ) -> Result<BeatAnswer, Refusal> {
        if beat.epoch == LEAVE || beat.epoch == LEAVE_STATIC {
            return self.leave(beat, actions);
        }
        let joining = beat.epoch == 0;
        let full = beat.rebalance_timeout.is_some()
            && (beat.topic_names.is_some() || beat.topic_regex.is_some())
            && beat.owned.is_some();
        let id = beat.member_id.clone();
        match self.members.get(&id) {
            None if !joining => {
                return Err(Refusal::new(
                    ResponseError::UnknownMemberId,
                    format!("Member {id} is not a member of the group."),
                ));
            }
            None => self.add(&beat, session_timeout, actions)?,
            Some(m) => {
                if beat.epoch > m.epoch
                    || (beat.epoch < m.epoch
                        && (beat.epoch != m.previous_epoch
                            || !is_subset(beat.owned.as_ref(), &m.assigned)))
                {
                    return Err(Refusal::new(
                        ResponseError::FencedMemberEpoch,
                        format!(
                            "The member's epoch {} is not the coordinator's {}: it must \
                             abandon its partitions and rejoin.",
                            beat.epoch, m.epoch
                        ),
                    ));
                }
            }
        }
        let mut bump = self.epoch == 0;
        let m = self.members.get_mut(&id).expect("added above");
        m.last_beat = Instant::now();
        // A static member that said it was leaving for a while is back.
        m.away = false;
        m.client_id = beat.client_id;
        m.client_host = beat.client_host;
        if let Some(rack) = beat.rack_id {
            m.rack_id = Some(rack);
        }
        if let Some(t) = beat.rebalance_timeout {
            m.rebalance_timeout = t;
        }
        if let Some(a) = beat.assignor {
            bump |= m.assignor.as_ref() != Some(&a);
            m.assignor = Some(a);
        }
        if let Some(names) = beat.topic_names {
            let names: BTreeSet<String> = names.into_iter().collect();
            bump |= names != m.topic_names;
            m.topic_names = names;
        }
        if let Some(regex) = beat.topic_regex {
            // An empty one matches no topic: not subscribed by regex.
            let regex = Some(regex).filter(|r| !r.source.is_empty());
            bump |= regex.as_ref().map(|r| &r.source) != m.topic_regex.as_ref().map(|r| &r.source);
            m.topic_regex = regex;
        }
        if let Some(s) = &m.session {
            actions.push(Action::Beat(s.clone(), m.session_timeout));
        }
        self.move_on(bump, topics);
        let before = self.members[&id].assigned.clone();
        self.reconcile(&id, beat.owned.as_ref(), actions);
        let m = &self.members[&id];
        let send = joining || full || m.assigned != before;
        Ok(BeatAnswer {
            member_id: id,
            epoch: m.epoch,
            assignment: send.then(|| m.assigned.clone()),
        })
    }

    /// A new member (or a static member back under a new id).
    fn add(
        &mut self,
        beat: &Beat,
        session_timeout: Duration,
        actions: &mut Vec<Action>,
    ) -> Result<(), Refusal> {
        let Some(rebalance_timeout) = beat.rebalance_timeout else {
            return Err(Refusal::new(
                ResponseError::InvalidRequest,
                "RebalanceTimeoutMs must be provided in first request.",
            ));
        };
        let mut member = ConsumerMember::new(
            (&beat.client_id, &beat.client_host),
            beat.instance_id.clone(),
            (rebalance_timeout, session_timeout),
            self.next_incarnation(),
        );
        if let Some(instance) = &beat.instance_id {
            if let Some(holder) = self.static_members.get(instance).cloned() {
                let old = self
                    .members
                    .get(&holder)
                    .expect("a static member is a member");
                // A classic member's place is taken at once, as Kafka's
                // coordinator does (a consumer moving to this protocol
                // under its instance id).
                if !old.away && old.classic.is_none() {
                    return Err(Refusal::new(
                        ResponseError::UnreleasedInstanceId,
                        format!("Static member {holder} with instance id {instance} is still in the group."),
                    ));
                }
                // It takes its old place back: epoch, partitions and all.
                let mut old = self.members.remove(&holder).expect("just found");
                actions.extend(old.take_timers().map(Action::EndSession));
                if let Some(t) = self.target.remove(&holder) {
                    self.target.insert(beat.member_id.clone(), t);
                }
                member.epoch = old.epoch;
                member.previous_epoch = old.previous_epoch;
                member.state = old.state;
                member.assigned = old.assigned;
                member.revoking = old.revoking;
                member.topic_names = old.topic_names;
                member.topic_regex = old.topic_regex;
                member.assignor = old.assignor;
            }
            self.static_members
                .insert(instance.clone(), beat.member_id.clone());
        }
        actions.push(Action::StartConsumerTimer {
            member: beat.member_id.clone(),
            incarnation: member.incarnation,
            timeout: session_timeout,
            timer: MemberTimer::Session,
        });
        self.members.insert(beat.member_id.clone(), member);
        Ok(())
    }

    fn leave(&mut self, beat: Beat, actions: &mut Vec<Action>) -> Result<BeatAnswer, Refusal> {
        let id = beat.member_id;
        let Some(m) = self.members.get_mut(&id) else {
            return Err(Refusal::new(
                ResponseError::UnknownMemberId,
                format!("Member {id} is not a member of the group."),
            ));
        };
        if beat.epoch == LEAVE_STATIC && m.instance_id.is_some() {
            // Its place and partitions are kept for it until its session
            // (no longer pushed back) runs out.
            m.away = true;
        } else {
            actions.extend(self.remove(&id).into_iter().map(Action::EndSession));
        }
        Ok(BeatAnswer {
            member_id: id,
            epoch: beat.epoch,
            assignment: None,
        })
    }

    /// Fences `member`: out of the group, its partitions free, the group
    /// epoch up. Returns its timers, for the caller to end.
    pub fn remove(&mut self, member: &str) -> Vec<SessionCompleter> {
        let Some(mut m) = self.members.remove(member) else {
            return Vec::new();
        };
        if let Some(instance) = &m.instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member) {
                self.static_members.remove(instance);
            }
        }
        self.target.remove(member);
        self.epoch += 1;
        m.take_timers().collect()
    }

    /// Every topic some member subscribes to, by name or by regex, that
    /// exists.
    pub(super) fn subscribed_topics(&self, topics: &dyn Topics) -> TopicsView {
        let mut out = TopicsView::new();
        // Names are looked up; only regexes need every topic.
        for m in self.members.values() {
            for name in &m.topic_names {
                if let Some(t) = topics.topic(name) {
                    out.insert(name.clone(), t);
                }
            }
        }
        let regexes: Vec<&TopicRegex> = self
            .members
            .values()
            .filter_map(|m| m.topic_regex.as_ref())
            .collect();
        if !regexes.is_empty() {
            topics.each(&mut |name, id, n| {
                if regexes.iter().any(|r| r.whole.is_match(name)) {
                    out.insert(name.to_string(), (id, n));
                }
            });
        }
        out
    }

    /// After a member's request: the group epoch goes up if `bump` (its
    /// membership or a subscription changed) or the subscribed topics'
    /// partitions are no longer those the cluster has, and the target
    /// assignment follows the group epoch.
    pub(super) fn move_on(&mut self, bump: bool, topics: &dyn Topics) {
        let subscribed = self.subscribed_topics(topics);
        if bump || subscribed != self.subscribed {
            self.epoch += 1;
            self.subscribed = subscribed;
        }
        if self.epoch > self.assignment_epoch {
            self.assign();
        }
    }

    /// A new target assignment for the group epoch, over the subscribed
    /// topics.
    fn assign(&mut self) {
        let members: BTreeMap<String, BTreeSet<Uuid>> = self
            .members
            .iter()
            .map(|(id, m)| {
                let ids = self
                    .subscribed
                    .iter()
                    .filter(|(name, _)| m.subscribes(name))
                    .map(|(_, (id, _))| *id)
                    .collect();
                (id.clone(), ids)
            })
            .collect();
        let subscribed: BTreeMap<Uuid, u32> = self.subscribed.values().copied().collect();
        let spec = Spec {
            members: &members,
            topics: &subscribed,
        };
        let assignor = self.assignor().to_string();
        self.target = assignors::assign(&assignor, &spec, &self.target);
        self.assignment_epoch = self.epoch;
    }

    /// The partitions the members but `except` own or are giving up.
    pub(super) fn owners(&self, except: &str) -> BTreeSet<(Uuid, i32)> {
        self.members
            .iter()
            .filter(|(id, _)| id.as_str() != except)
            .flat_map(|(_, m)| m.owns())
            .collect()
    }

    /// Moves `id` towards the target assignment as far as its heartbeat
    /// (`owned`) and the other members allow (Kafka's
    /// `CurrentAssignmentBuilder`).
    pub(super) fn reconcile(
        &mut self,
        id: &str,
        owned: Option<&Partitions>,
        actions: &mut Vec<Action>,
    ) {
        let target_epoch = self.assignment_epoch;
        let m = &self.members[id];
        let from_epoch = match m.state {
            MemberState::Stable if m.epoch == target_epoch => return,
            MemberState::Stable | MemberState::UnreleasedPartitions => m.epoch,
            MemberState::UnrevokedPartitions if still_owns(owned, &m.revoking) => return,
            MemberState::UnrevokedPartitions => m.epoch + 1,
        };
        let others = self.owners(id);
        let empty = Partitions::new();
        let target = self.target.get(id).unwrap_or(&empty);
        let m = self.members.get_mut(id).expect("a member");
        let mut keep = Partitions::new();
        let mut revoke = Partitions::new();
        let mut gain = Partitions::new();
        let mut unreleased = false;
        let topics: BTreeSet<Uuid> = target.keys().chain(m.assigned.keys()).copied().collect();
        for t in topics {
            let want = target.get(&t).cloned().unwrap_or_default();
            let have = m.assigned.get(&t).cloned().unwrap_or_default();
            let kept: BTreeSet<i32> = have.intersection(&want).copied().collect();
            let gone: BTreeSet<i32> = have.difference(&kept).copied().collect();
            let mut new: BTreeSet<i32> = want.difference(&kept).copied().collect();
            let before = new.len();
            new.retain(|p| !others.contains(&(t, *p)));
            unreleased |= new.len() != before;
            for (set, out) in [(kept, &mut keep), (gone, &mut revoke), (new, &mut gain)] {
                if !set.is_empty() {
                    out.insert(t, set);
                }
            }
        }
        let (old_state, old_epoch) = (m.state, m.epoch);
        let new_epoch;
        if !revoke.is_empty() && still_owns(owned, &revoke) {
            m.state = MemberState::UnrevokedPartitions;
            new_epoch = from_epoch;
            m.assigned = keep;
            m.revoking = revoke;
        } else {
            for (t, ps) in gain {
                keep.entry(t).or_default().extend(ps);
            }
            m.state = if unreleased {
                MemberState::UnreleasedPartitions
            } else {
                MemberState::Stable
            };
            new_epoch = target_epoch;
            m.assigned = keep;
            m.revoking = Partitions::new();
        }
        if new_epoch != m.epoch {
            m.previous_epoch = m.epoch;
            m.epoch = new_epoch;
        }
        // A rebalance timeout runs while it has partitions to give up,
        // anew for each epoch it must leave. (A classic member's runs
        // while it must rejoin or sync instead.)
        if m.classic.is_some() {
            return;
        }
        let revoking = m.state == MemberState::UnrevokedPartitions;
        let again = old_state != MemberState::UnrevokedPartitions || old_epoch != m.epoch;
        if !revoking || again {
            if let Some(r) = m.revocation.take() {
                actions.push(Action::EndSession(r));
            }
        }
        if revoking && again {
            actions.push(Action::StartConsumerTimer {
                member: id.to_string(),
                incarnation: m.incarnation,
                timeout: m.rebalance_timeout,
                timer: MemberTimer::Revocation { epoch: m.epoch },
            });
        }
    }

    /// Kafka's checks of a commit to this group (OffsetCommit, or
    /// TxnOffsetCommit when `transactional`) by `member` at `epoch`: one
    /// outside any epoch (-1) while the group has no members passes, as
    /// does a transactional one naming no member; a member must exist,
    /// commit with OffsetCommit v9 or later, and at its current epoch.
    pub fn validate_commit(
        &self,
        member: &str,
        epoch: i32,
        transactional: bool,
        version: i16,
    ) -> Result<(), i16> {
        if epoch < 0 && (self.members.is_empty() || (transactional && member.is_empty())) {
            return Ok(());
        }
        let m = self
            .members
            .get(member)
            .ok_or(ResponseError::UnknownMemberId.code())?;
        // A classic member commits with any version, at its generation.
        if !transactional && version < 9 && m.classic.is_none() {
            return Err(ResponseError::UnsupportedVersion.code());
        }
        m.check_epoch(epoch)
    }

    /// An OffsetFetch's check (v9 and later name the member): one naming
    /// no member passes; a named member must exist and be at `epoch`.
    pub fn validate_fetch(&self, member: Option<&str>, epoch: i32) -> Result<(), i16> {
        let Some(member) = member.filter(|_| epoch >= 0) else {
            return Ok(());
        };
        let m = self
            .members
            .get(member)
            .ok_or(ResponseError::UnknownMemberId.code())?;
        m.check_epoch(epoch)
    }

    /// Whether some partition is owned by two members at once: what the
    /// protocol must never allow.
    pub fn owned_twice(&self) -> bool {
        let mut seen = BTreeSet::new();
        self.members
            .values()
            .flat_map(ConsumerMember::owns)
            .any(|tp| !seen.insert(tp))
    }
}
