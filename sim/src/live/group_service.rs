//! The broker side of the consumer-group APIs: FindCoordinator, JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and OffsetFetch, on the
//! cluster's [`GroupCoordinator`](super::groups::GroupCoordinator). A group
//! is served by one broker, the leader of its offsets partition; the others
//! answer NOT_COORDINATOR.

use super::checks::Checks;
use super::groups::{
    Action, ClassicJoin, ClassicJoined, CommittedOffset, DelayedSync, Group, GroupState,
    JoinResult, Member,
};
use super::service::BrokerService;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn code(e: ResponseError) -> i16 {
    e.code()
}

pub(crate) fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The (topic, partitions) an OffsetFetch asks about (`None`: every
/// committed one), from either layout's topics: one group's before v8,
/// each group's from v8 (generated types of their own, with the same
/// fields).
macro_rules! asked_topics {
    ($topics:expr) => {
        $topics.as_ref().map(|topics| {
            topics
                .iter()
                .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                .collect()
        })
    };
}

/// [`Committed`] offsets by topic, in either layout's response types.
macro_rules! answered_topics {
    ($topics:expr, $topic:ident, $partition:ident) => {
        $topics
            .into_iter()
            .map(|(name, partitions)| {
                let mut t = $topic::default();
                t.name = name;
                t.partitions = partitions
                    .into_iter()
                    .map(|c: Committed| {
                        let mut p = $partition::default();
                        p.partition_index = c.partition;
                        p.committed_offset = c.offset;
                        p.committed_leader_epoch = c.leader_epoch;
                        p.metadata = Some(text(&c.metadata));
                        p.error_code = c.error;
                        p
                    })
                    .collect();
                t
            })
            .collect()
    };
}

/// An OffsetCommit's or TxnOffsetCommit's answer: every partition of the
/// request's `topics` with the one `error` of the whole commit, in the
/// response's generated types.
macro_rules! every_partition_answered {
    ($topics:expr, $topic:ident, $partition:ident, $error:expr) => {
        $topics
            .iter()
            .map(|t| {
                let mut out = $topic::default();
                out.name = t.name.clone();
                out.partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let mut a = $partition::default();
                        a.partition_index = p.partition_index;
                        a.error_code = $error;
                        a
                    })
                    .collect();
                out
            })
            .collect()
    };
}
pub(crate) use every_partition_answered;

impl BrokerService {
    /// NOT_COORDINATOR unless this broker coordinates `group` (or
    /// COORDINATOR_NOT_AVAILABLE while no broker can).
    fn coordinates(&self, group: &str) -> Result<(), i16> {
        Checks::bump(&self.cluster.checks.group_requests);
        self.is_coordinator(self.cluster.group_coordinator(group))
    }

    /// Whether this broker is `coordinator` (a group's or a transactional
    /// id's): NOT_COORDINATOR if another is, COORDINATOR_NOT_AVAILABLE if
    /// none can be.
    pub(crate) fn is_coordinator(&self, coordinator: Option<u32>) -> Result<(), i16> {
        match coordinator {
            Some(b) if b == self.id => Ok(()),
            Some(_) => Err(code(ResponseError::NotCoordinator)),
            None => Err(code(ResponseError::CoordinatorNotAvailable)),
        }
    }

    /// FindCoordinator: one key before v4, a batch of keys of one type
    /// from v4 (KIP-699), each answered as if asked alone.
    pub(crate) fn find_coordinator(
        &self,
        r: FindCoordinatorRequest,
        version: i16,
    ) -> FindCoordinatorResponse {
        Checks::bump(&self.cluster.checks.group_requests);
        let mut response = FindCoordinatorResponse::default();
        if version >= 4 {
            response.coordinators = r
                .coordinator_keys
                .iter()
                .map(|key| {
                    let mut c = Coordinator::default();
                    c.key = key.clone();
                    match self.coordinator_of(r.key_type, key) {
                        Ok((node, host, port)) => {
                            c.node_id = BrokerId(node);
                            c.host = text(&host);
                            c.port = port;
                        }
                        Err(e) => {
                            c.error_code = e;
                            c.node_id = BrokerId(-1);
                            c.port = -1;
                        }
                    }
                    c
                })
                .collect();
            return response;
        }
        match self.coordinator_of(r.key_type, &r.key) {
            Ok((node, host, port)) => {
                response.node_id = BrokerId(node);
                response.host = text(&host);
                response.port = port;
                // Kafka gives v1-3 its error's message, which for
                // success is the name NONE (v4's per-key answers leave
                // the message null).
                if version >= 1 {
                    response.error_message = Some(StrBytes::from_static_str("NONE"));
                }
            }
            Err(e) => {
                response.error_code = e;
                response.node_id = BrokerId(-1);
                response.port = -1;
                if version >= 1 {
                    response.error_message = ResponseError::try_from_code(e)
                        .map(|error| StrBytes::from_string(error.to_string()));
                }
            }
        }
        response
    }

    /// The broker that coordinates `key` of `key_type`, with its endpoint.
    /// Groups (type 0, share groups among them) and transactional ids (1)
    /// map to a broker alike; the share coordinator (2), which only
    /// brokers ask for, to keep the share groups' state in Kafka's
    /// internal topic, is not run here, and is refused as Kafka refuses
    /// it where share groups are off.
    fn coordinator_of(&self, key_type: i8, key: &str) -> Result<(i32, String, i32), i16> {
        if key_type != 0 && key_type != 1 {
            return Err(code(ResponseError::InvalidRequest));
        }
        let broker = self
            .cluster
            .group_coordinator(key)
            .ok_or(code(ResponseError::CoordinatorNotAvailable))?;
        let (host, port) = self
            .cluster
            .endpoints()
            .get(broker as usize)
            .cloned()
            .ok_or(code(ResponseError::CoordinatorNotAvailable))?;
        let node =
            i32::try_from(broker).map_err(|_| code(ResponseError::CoordinatorNotAvailable))?;
        Ok((node, host, port))
    }

    pub(crate) async fn join_group(
        &self,
        r: JoinGroupRequest,
        version: i16,
        (client_id, client_host): (&str, &str),
    ) -> JoinGroupResponse {
        let mut response = JoinGroupResponse::default();
        if version >= 7 {
            response.protocol_type = Some(r.protocol_type.clone());
        }
        let id: Arc<str> = Arc::from(r.group_id.0.as_str());
        let fail = |mut response: JoinGroupResponse, error: i16, member: &str| {
            response.error_code = error;
            response.member_id = text(member);
            response.protocol_name = if version >= 7 {
                None
            } else {
                Some(StrBytes::default())
            };
            response
        };
        if let Err(e) = self.coordinates(&id) {
            return fail(response, e, &r.member_id);
        }
        let groups = &self.cluster.groups;
        let session = millis(r.session_timeout_ms);
        if session < groups.cfg.min_session_timeout || session > groups.cfg.max_session_timeout {
            return fail(
                response,
                code(ResponseError::InvalidSessionTimeout),
                &r.member_id,
            );
        }
        // Before v1 the rebalance timeout is the session timeout.
        let rebalance = if version >= 1 {
            millis(r.rebalance_timeout_ms)
        } else {
            session
        };
        // Static membership came with JoinGroup v5.
        let instance = r
            .group_instance_id
            .as_ref()
            .filter(|_| version >= 5)
            .map(|i| i.to_string());
        let group = groups.group(&id);
        let (rx, actions, member_id) = 'join: {
            let mut g = group.lock();
            if g.deleted {
                return fail(
                    response,
                    code(ResponseError::CoordinatorNotAvailable),
                    &r.member_id,
                );
            }
            let mut actions = Vec::new();
            // A consumer-protocol or share group with members takes no
            // classic member; an empty one turns classic.
            if g.share.as_ref().is_some_and(|s| !s.members.is_empty()) {
                return fail(
                    response,
                    code(ResponseError::InconsistentGroupProtocol),
                    &r.member_id,
                );
            }
            if g.share.take().is_some() {
                g.protocol_type = None;
            }
            if let Some(c) = g.consumer.as_mut().filter(|c| !c.members.is_empty()) {
                // A classic member of a consumer-protocol group: answered at once.
                let join = ClassicJoin {
                    member_id: r.member_id.to_string(),
                    instance_id: instance.clone(),
                    protocol_type: r.protocol_type.to_string(),
                    protocols: r
                        .protocols
                        .iter()
                        .map(|p| (p.name.to_string(), p.metadata.clone()))
                        .collect(),
                    session_timeout: session,
                    rebalance_timeout: rebalance,
                    client_id: client_id.to_string(),
                    client_host: client_host.to_string(),
                    requires_known_id: version >= 4,
                };
                if let Err(refusal) = groups.cfg.consumer_room(c, &r.member_id) {
                    return fail(response, refusal.error.code(), &r.member_id);
                }
                let replacing = instance
                    .as_deref()
                    .filter(|_| r.member_id.is_empty())
                    .is_some_and(|i| groups.cfg.downgrades_replacing(c, i));
                let answer = c.classic_join(join, &*self.cluster, &mut actions);
                if c.owned_twice() {
                    Checks::bump(&self.cluster.checks.assigned_twice);
                }
                if replacing && matches!(answer, Ok(ClassicJoined::Joined { .. })) {
                    g.downgrade(None, &mut actions);
                }
                drop(g);
                groups.run(&id, actions);
                return match answer {
                    Err(refusal) => fail(response, refusal.error.code(), &r.member_id),
                    Ok(ClassicJoined::IdRequired(member)) => {
                        fail(response, code(ResponseError::MemberIdRequired), &member)
                    }
                    Ok(ClassicJoined::Joined {
                        member_id,
                        epoch,
                        protocol,
                    }) => {
                        response.member_id = text(&member_id);
                        response.generation_id = epoch;
                        response.protocol_name = Some(text(&protocol));
                        if version >= 7 {
                            response.protocol_type = Some(text("consumer"));
                        }
                        response
                    }
                };
            }
            if g.consumer.take().is_some() {
                g.protocol_type = None;
            }
            // An empty group takes the newcomer's protocol type; one with
            // members only members of its own type.
            if r.protocols.is_empty()
                || (g.state != GroupState::Empty
                    && g.protocol_type
                        .as_ref()
                        .is_some_and(|t| *t != r.protocol_type.as_str()))
            {
                return fail(
                    response,
                    code(ResponseError::InconsistentGroupProtocol),
                    &r.member_id,
                );
            }
            if !g.takes(&r.member_id, groups.cfg.classic_max_size) {
                // Turned away, and out of the group if it was in it (a
                // member that had not rejoined yet), as Kafka's
                // coordinator does.
                g.pending_ids.remove(r.member_id.as_str());
                if let Some(gone) = g.remove(&r.member_id, &mut actions) {
                    actions.extend(gone.session.map(Action::EndSession));
                }
                drop(g);
                groups.run(&id, actions);
                return fail(response, code(ResponseError::GroupMaxSizeReached), "");
            }
            let mut member_id = r.member_id.to_string();
            // Set when a static member takes its instance's place: the
            // leader before it did (which may have been that place).
            let mut replaced = None;
            if member_id.is_empty() {
                if let Some(instance) = &instance {
                    // A static member joins at once (no two-step join), in
                    // its instance's place if the group knows it.
                    member_id = groups.new_member_id(instance);
                    if let Some(old) = g.static_members.get(instance).cloned() {
                        replaced = Some(g.leader.clone().unwrap_or_default());
                        if let Some((tx, fenced)) =
                            g.replace_static(instance, &old, &member_id, &mut actions)
                        {
                            let _ = tx.send(fenced);
                        }
                    }
                } else {
                    member_id = groups.new_member_id(client_id);
                    if version >= 4 {
                        // The client rejoins with its id (Kafka's two-step join).
                        g.pending_ids.insert(member_id.clone());
                        return fail(response, code(ResponseError::MemberIdRequired), &member_id);
                    }
                }
            } else if instance.is_some() || !g.pending_ids.remove(&member_id) {
                if let Err(e) = g.validate(&member_id, instance.as_deref()) {
                    return fail(response, e, &member_id);
                }
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            let protocols = r
                .protocols
                .iter()
                .map(|p| (p.name.to_string(), p.metadata.clone()))
                .collect();
            let new = !g.members.contains_key(&member_id);
            // A member that joins again with the metadata it has, while its
            // generation is being assigned or, for a follower, while it is
            // in force, gets that generation back and no rebalance starts,
            // as from Kafka's coordinator (it may have missed the answer).
            // The leader's join in a stable group does start one: a leader
            // rejoins when the topics changed under the same subscription.
            let unchanged = g
                .members
                .get(&member_id)
                .is_some_and(|m| m.protocols == protocols);
            let leader = g.leader.as_deref() == Some(member_id.as_str());
            let current = match g.state {
                GroupState::CompletingRebalance => unchanged,
                GroupState::Stable => unchanged && !leader,
                GroupState::Empty | GroupState::PreparingRebalance => false,
            };
            if current && replaced.is_none() {
                if let Some(m) = g.members.get_mut(&member_id) {
                    m.beat(&mut actions);
                }
                let _ = tx.send(g.join_result(&member_id, 0));
                break 'join (rx, actions, member_id);
            }
            if new {
                actions.push(Action::StartSession {
                    member: member_id.clone(),
                    timeout: session,
                });
                if let Some(instance) = &instance {
                    g.static_members.insert(instance.clone(), member_id.clone());
                }
            }
            let m = g
                .members
                .entry(member_id.clone())
                .or_insert_with(|| Member {
                    client_id: client_id.to_string(),
                    client_host: client_host.to_string(),
                    instance_id: instance.clone(),
                    session_timeout: session,
                    rebalance_timeout: rebalance,
                    protocols: Vec::new(),
                    joined: false,
                    join_waiter: None,
                    awaiting_sync: false,
                    assignment: bytes::Bytes::new(),
                    session: None,
                    last_beat: Instant::now(),
                });
            m.protocols = protocols;
            m.session_timeout = session;
            m.rebalance_timeout = rebalance;
            m.beat(&mut actions);
            if let Some(old) = m.join_waiter.replace(tx) {
                // A second join while the first waits: the first is told.
                let _ = old.send(JoinResult {
                    error: code(ResponseError::RebalanceInProgress),
                    member_id: member_id.clone(),
                    ..JoinResult::default()
                });
            }
            g.protocol_type = Some(r.protocol_type.to_string());
            // A static member back in its place in a Stable group keeps
            // its assignment at the current generation, and nobody
            // rebalances, unless its protocols change the group's choice.
            // It is answered as a follower (the leader named is the one
            // before it came back), so that its SyncGroup fetches what it
            // was assigned.
            if let (Some(leader), GroupState::Stable) = (replaced, g.state) {
                if g.select_protocol() == g.protocol {
                    let mut answer = g.join_result(&member_id, 0);
                    answer.leader = leader;
                    answer.members.clear();
                    if let Some(tx) = g
                        .members
                        .get_mut(&member_id)
                        .and_then(|m| m.join_waiter.take())
                    {
                        let _ = tx.send(answer);
                    }
                    break 'join (rx, actions, member_id);
                }
            }
            match g.state {
                GroupState::Empty => {
                    g.state = GroupState::PreparingRebalance;
                    g.join_in_purgatory = true;
                    let delay = groups.cfg.initial_rebalance_delay.min(rebalance);
                    actions.push(Action::SubmitJoin {
                        timeout: delay,
                        initial: !delay.is_zero(),
                    });
                }
                GroupState::PreparingRebalance => actions.push(Action::CheckJoins),
                GroupState::CompletingRebalance | GroupState::Stable => {
                    g.prepare_rebalance(&mut actions);
                }
            }
            if let Some(m) = g.members.get_mut(&member_id) {
                m.joined = true;
            }
            actions.push(Action::CheckJoins);
            (rx, actions, member_id)
        };
        groups.run(&id, actions);
        let result = rx.await.unwrap_or_else(|_| JoinResult {
            error: code(ResponseError::CoordinatorNotAvailable),
            member_id: member_id.clone(),
            ..JoinResult::default()
        });
        response.error_code = result.error;
        response.generation_id = if result.error == 0 {
            result.generation
        } else {
            -1
        };
        response.protocol_name = match (result.protocol, version >= 7) {
            (Some(p), _) => Some(text(&p)),
            (None, true) => None,
            (None, false) => Some(StrBytes::default()),
        };
        if version >= 7 {
            response.protocol_type = result.protocol_type.as_deref().map(text);
        }
        response.leader = text(&result.leader);
        response.member_id = text(&result.member_id);
        response.members = result
            .members
            .into_iter()
            .map(|(id, instance, metadata)| {
                let mut m = JoinGroupResponseMember::default();
                m.member_id = text(&id);
                m.group_instance_id = instance.as_deref().map(text);
                m.metadata = metadata;
                m
            })
            .collect();
        response
    }

    pub(crate) async fn sync_group(&self, r: SyncGroupRequest, version: i16) -> SyncGroupResponse {
        let mut response = SyncGroupResponse::default();
        let id: Arc<str> = Arc::from(r.group_id.0.as_str());
        if let Err(e) = self.coordinates(&id) {
            response.error_code = e;
            return response;
        }
        let groups = &self.cluster.groups;
        // Only JoinGroup, and a commit outside the group's management,
        // make a group: a request of a member of none is refused, and
        // leaves no empty group for ListGroups to show.
        let Some(group) = groups.find(&id) else {
            response.error_code = code(ResponseError::UnknownMemberId);
            return response;
        };
        let member = r.member_id.to_string();
        let instance = r.group_instance_id.as_ref().map(|i| i.to_string());
        let mut actions = Vec::new();
        let wait = {
            let mut g = group.lock();
            if let Some(c) = g.consumer.as_mut() {
                let asked = (r.protocol_type.as_deref(), r.protocol_name.as_deref());
                let generation = r.generation_id;
                let answer = c.classic_sync(
                    &member,
                    instance.as_deref(),
                    generation,
                    asked,
                    &mut actions,
                );
                drop(g);
                groups.run(&id, actions);
                match answer {
                    Ok(assignment) => {
                        response.assignment = assignment;
                        if version >= 5 {
                            response.protocol_type = r.protocol_type;
                            response.protocol_name = r.protocol_name;
                        }
                    }
                    Err(refusal) => response.error_code = refusal.error.code(),
                }
                return response;
            }
            let (protocol_type, protocol) = (g.protocol_type.clone(), g.protocol.clone());
            if version >= 5 {
                response.protocol_type = protocol_type.as_deref().map(text);
                response.protocol_name = protocol.as_deref().map(text);
            }
            let generation = g.generation;
            let leader = g.leader.clone();
            let state = g.state;
            let m = match g.validate(&member, instance.as_deref()) {
                Ok(m) => m,
                Err(e) => {
                    response.error_code = e;
                    return response;
                }
            };
            if r.generation_id != generation {
                response.error_code = code(ResponseError::IllegalGeneration);
                return response;
            }
            m.beat(&mut actions);
            let rebalance_timeout = m.rebalance_timeout;
            match state {
                GroupState::Empty | GroupState::PreparingRebalance => {
                    response.error_code = code(ResponseError::RebalanceInProgress);
                    None
                }
                GroupState::Stable => {
                    response.assignment = m.assignment.clone();
                    None
                }
                GroupState::CompletingRebalance if leader.as_deref() == Some(member.as_str()) => {
                    // The leader's assignment: every member gets its part
                    // (those it leaves out, an empty one).
                    for m in g.members.values_mut() {
                        m.assignment = bytes::Bytes::new();
                    }
                    for a in &r.assignments {
                        if let Some(m) = g.members.get_mut(a.member_id.as_str()) {
                            m.assignment = a.assignment.clone();
                        }
                    }
                    g.state = GroupState::Stable;
                    if g.protocol_type.as_deref() == Some("consumer") {
                        check_assignments(
                            &self.cluster.checks,
                            g.members.values().map(|m| &m.assignment),
                        );
                    }
                    response.assignment = g.members[&member].assignment.clone();
                    actions.push(Action::CheckSyncs);
                    None
                }
                GroupState::CompletingRebalance => Some(DelayedSync {
                    coordinator: Arc::downgrade(groups),
                    group: Arc::clone(&id),
                    member: member.clone(),
                    instance: instance.clone(),
                    generation,
                    timeout: rebalance_timeout,
                    checks: Arc::clone(&self.cluster.checks),
                    result: None,
                }),
            }
        };
        groups.run(&id, actions);
        if let Some(op) = wait {
            let awaiting = |on: bool| {
                if let Some(m) = group.lock().members.get_mut(&member) {
                    m.awaiting_sync = on;
                }
            };
            awaiting(true);
            let parked = groups.syncs.try_complete_else_watch(op, &[Arc::clone(&id)]);
            match parked {
                Ok(handle) => {
                    Checks::bump(&self.cluster.checks.parked);
                    let done = handle.await;
                    awaiting(false);
                    let (error, assignment) = done.operation.result.unwrap_or_default();
                    response.error_code = error;
                    response.assignment = assignment;
                }
                Err(_) => {
                    awaiting(false);
                    response.error_code = code(ResponseError::CoordinatorNotAvailable);
                }
            }
        }
        response
    }

    pub(crate) fn heartbeat(&self, r: HeartbeatRequest) -> HeartbeatResponse {
        let mut response = HeartbeatResponse::default();
        let id: Arc<str> = Arc::from(r.group_id.0.as_str());
        if let Err(e) = self.coordinates(&id) {
            response.error_code = e;
            return response;
        }
        let Some(group) = self.cluster.groups.find(&id) else {
            response.error_code = code(ResponseError::UnknownMemberId);
            return response;
        };
        let session = {
            let mut g = group.lock();
            if let Some(c) = g.consumer.as_mut() {
                let mut actions = Vec::new();
                let (member, instance) = (r.member_id.as_str(), r.group_instance_id.as_deref());
                let answer = c.classic_heartbeat(member, instance, r.generation_id, &mut actions);
                drop(g);
                self.cluster.groups.run(&id, actions);
                if let Err(refusal) = answer {
                    response.error_code = refusal.error.code();
                }
                return response;
            }
            let (generation, state) = (g.generation, g.state);
            let instance = r.group_instance_id.as_deref();
            let m = match g.validate(r.member_id.as_str(), instance) {
                Ok(m) => m,
                Err(e) => {
                    response.error_code = e;
                    return response;
                }
            };
            if r.generation_id != generation {
                response.error_code = code(ResponseError::IllegalGeneration);
                return response;
            }
            if state == GroupState::PreparingRebalance {
                response.error_code = code(ResponseError::RebalanceInProgress);
            }
            m.last_beat = Instant::now();
            m.session.clone().map(|s| (s, m.session_timeout))
        };
        // Pushed back in O(1). If its expiry is already under way, the
        // expiry sees this heartbeat (`last_beat`) and starts the session
        // again rather than removing the member.
        if let Some((s, timeout)) = session {
            s.reset_timeout(timeout);
        }
        response
    }

    pub(crate) fn leave_group(&self, r: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
        let mut response = LeaveGroupResponse::default();
        let id: Arc<str> = Arc::from(r.group_id.0.as_str());
        if let Err(e) = self.coordinates(&id) {
            response.error_code = e;
            return response;
        }
        // (member id, group.instance.id): from v3 a batch, where an admin
        // tool may name a static member by its instance alone.
        let leaving: Vec<(String, Option<String>)> = if version >= 3 {
            r.members
                .iter()
                .map(|m| {
                    let instance = m.group_instance_id.as_ref().map(|i| i.to_string());
                    (m.member_id.to_string(), instance)
                })
                .collect()
        } else {
            vec![(r.member_id.to_string(), None)]
        };
        let group = self.cluster.groups.find(&id);
        let results: Vec<(String, Option<String>, i16)> = leaving
            .into_iter()
            .map(|(member, instance)| {
                let error = match &group {
                    Some(group) => self.leave(&id, group, &member, instance.as_deref()),
                    None => code(ResponseError::UnknownMemberId),
                };
                (member, instance, error)
            })
            .collect();
        if version >= 3 {
            response.members = results
                .into_iter()
                .map(|(member, instance, error)| {
                    let mut m = MemberResponse::default();
                    m.member_id = text(&member);
                    m.group_instance_id = instance.as_deref().map(text);
                    m.error_code = error;
                    m
                })
                .collect();
        } else {
            response.error_code = results.first().map_or(0, |r| r.2);
        }
        response
    }

    /// Takes `member` out of `group` (`id`), or, if `member` is empty, the
    /// static member holding `instance`; its error code.
    fn leave(
        &self,
        id: &Arc<str>,
        group: &Mutex<Group>,
        member: &str,
        instance: Option<&str>,
    ) -> i16 {
        let (member, session) = {
            let mut g = group.lock();
            if let Some(c) = g.consumer.as_mut() {
                let mut actions = Vec::new();
                let left = c.classic_leave(member, instance, &mut actions);
                drop(g);
                self.cluster.groups.run(id, actions);
                return left.map_or_else(|refusal| refusal.error.code(), |_| 0);
            }
            let member = match (member, instance) {
                ("", Some(instance)) => match g.static_members.get(instance) {
                    Some(holder) => holder.clone(),
                    None => return code(ResponseError::UnknownMemberId),
                },
                // One that left between its two join steps.
                (member, None) if g.pending_ids.remove(member) => return 0,
                (member, _) => member.to_string(),
            };
            match g.validate(&member, instance) {
                Ok(m) => (member, m.session.clone()),
                Err(e) => return e,
            }
        };
        match session {
            // Its session ends now: that removes it and rebalances.
            Some(s) => {
                s.force_complete();
            }
            // Its session is still being set up: leave by hand.
            None => {
                let mut actions = Vec::new();
                group.lock().remove(&member, &mut actions);
                self.cluster.groups.run(id, actions);
            }
        }
        0
    }

    pub(crate) fn offset_commit(
        &self,
        r: OffsetCommitRequest,
        version: i16,
    ) -> OffsetCommitResponse {
        let id: Arc<str> = Arc::from(r.group_id.0.as_str());
        let error = match self.coordinates(&id) {
            Err(e) => e,
            // A group nobody joined: a commit outside any generation makes
            // it (a consumer that assigns its partitions itself, or an
            // admin tool); one from a member finds no group, which Kafka
            // reports as GROUP_ID_NOT_FOUND from v9 and as a stale
            // generation before.
            Ok(())
                if r.generation_id_or_member_epoch >= 0
                    && self.cluster.groups.find(&id).is_none() =>
            {
                if version >= 9 {
                    code(ResponseError::GroupIdNotFound)
                } else {
                    code(ResponseError::IllegalGeneration)
                }
            }
            Ok(()) => {
                let group = self.cluster.groups.group(&id);
                let mut g = group.lock();
                let generation = r.generation_id_or_member_epoch;
                // A consumer with assigned partitions commits outside any
                // generation (-1), while the group has no members.
                let instance = r.group_instance_id.as_deref();
                let error = if g.deleted {
                    code(ResponseError::CoordinatorNotAvailable)
                } else if g.share.is_some() {
                    // As Kafka: a share group keeps no offsets of its own.
                    code(ResponseError::GroupIdNotFound)
                } else if let Some(c) = &g.consumer {
                    let member = r.member_id.as_str();
                    c.validate_commit(member, generation, false, version)
                        .err()
                        .unwrap_or(0)
                } else if generation < 0 && g.members.is_empty() {
                    0
                } else if let Err(e) = g.validate(r.member_id.as_str(), instance) {
                    e
                } else if generation != g.generation {
                    code(ResponseError::IllegalGeneration)
                } else if g.state == GroupState::CompletingRebalance {
                    // As Kafka's coordinator: a member of the current
                    // generation keeps committing while the others
                    // rejoin (a cooperative rebalance consumes and commits
                    // the partitions it keeps); only between a round's
                    // join and its assignment is the commit refused.
                    code(ResponseError::RebalanceInProgress)
                } else {
                    0
                };
                if error == 0 {
                    for t in &r.topics {
                        for p in &t.partitions {
                            g.offsets.insert(
                                (t.name.0.to_string(), p.partition_index),
                                CommittedOffset {
                                    offset: p.committed_offset,
                                    leader_epoch: p.committed_leader_epoch,
                                    metadata: p.committed_metadata.as_deref().map(str::to_string),
                                },
                            );
                        }
                    }
                }
                error
            }
        };
        let mut response = OffsetCommitResponse::default();
        response.topics = every_partition_answered!(
            r.topics,
            OffsetCommitResponseTopic,
            OffsetCommitResponsePartition,
            error
        );
        response
    }

    /// OffsetFetch: one group before v8, a batch of groups from v8, each
    /// answered as if asked alone.
    pub(crate) fn offset_fetch(&self, r: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
        let mut response = OffsetFetchResponse::default();
        if version >= 8 {
            response.groups = r
                .groups
                .iter()
                .map(|g| {
                    let mut out = OffsetFetchResponseGroup::default();
                    out.group_id = g.group_id.clone();
                    let asked = asked_topics!(g.topics);
                    let member = g.member_id.as_deref().map(|m| (m, g.member_epoch));
                    match self.committed(&g.group_id.0, asked, r.require_stable, member) {
                        Ok(topics) => {
                            out.topics = answered_topics!(
                                topics,
                                OffsetFetchResponseTopics,
                                OffsetFetchResponsePartitions
                            )
                        }
                        Err(e) => out.error_code = e,
                    }
                    out
                })
                .collect();
            return response;
        }
        let asked = asked_topics!(r.topics);
        match self.committed(&r.group_id.0, asked, r.require_stable, None) {
            Ok(topics) => {
                response.topics = answered_topics!(
                    topics,
                    OffsetFetchResponseTopic,
                    OffsetFetchResponsePartition
                )
            }
            // The group-level error came with v2.
            Err(e) if version >= 2 => response.error_code = e,
            Err(_) => {}
        }
        response
    }

    /// What `group` has committed in each partition `asked` (every
    /// committed partition for `None`), or the group's error
    /// (NOT_COORDINATOR and the like). A consumer that asks for stable
    /// offsets (`require_stable`, v7) is told to retry a partition while a
    /// transaction has committed to it and not yet ended. A member of a
    /// consumer-protocol group that names itself (`member`: id and epoch,
    /// v9) is checked as Kafka does.
    fn committed(
        &self,
        group: &str,
        asked: Option<Vec<(TopicName, Vec<i32>)>>,
        require_stable: bool,
        member: Option<(&str, i32)>,
    ) -> Result<Vec<(TopicName, Vec<Committed>)>, i16> {
        self.coordinates(group)?;
        // A group nobody made has nothing committed; it is not made here.
        let group = self.cluster.groups.find(group);
        let g = group.as_ref().map(|g| g.lock());
        if g.as_ref().is_some_and(|g| g.share.is_some()) {
            return Err(code(ResponseError::GroupIdNotFound));
        }
        if let Some(c) = g.as_ref().and_then(|g| g.consumer.as_ref()) {
            c.validate_fetch(member.map(|m| m.0), member.map_or(-1, |m| m.1))?;
        }
        let offsets = g.as_ref().map(|g| &g.offsets);
        let unstable = |topic: &str, p: i32| {
            require_stable
                && g.as_ref().is_some_and(|g| {
                    let key = (topic.to_string(), p);
                    g.txn_offsets.values().any(|o| o.contains_key(&key))
                })
        };
        let entry = |topic: &str, partition: i32| {
            if unstable(topic, partition) {
                return Committed {
                    partition,
                    offset: -1,
                    leader_epoch: -1,
                    metadata: String::new(),
                    error: code(ResponseError::UnstableOffsetCommit),
                };
            }
            let found = offsets.and_then(|o| o.get(&(topic.to_string(), partition)));
            Committed {
                partition,
                offset: found.map_or(-1, |c| c.offset),
                leader_epoch: found.map_or(-1, |c| c.leader_epoch),
                metadata: found.and_then(|c| c.metadata.clone()).unwrap_or_default(),
                error: 0,
            }
        };
        let asked = match asked {
            Some(asked) => asked,
            // Every committed partition, by topic.
            None => {
                let mut by_topic: std::collections::BTreeMap<&str, Vec<i32>> = Default::default();
                for (topic, p) in offsets.into_iter().flat_map(|o| o.keys()) {
                    by_topic.entry(topic).or_default().push(*p);
                }
                by_topic
                    .into_iter()
                    .map(|(topic, mut parts)| {
                        parts.sort_unstable();
                        (TopicName(text(topic)), parts)
                    })
                    .collect()
            }
        };
        Ok(asked
            .into_iter()
            .map(|(name, partitions)| {
                let answers = partitions.iter().map(|&p| entry(&name.0, p)).collect();
                (name, answers)
            })
            .collect())
    }
}

/// One partition's committed offset as OffsetFetch reports it (-1 and no
/// metadata where nothing is committed).
struct Committed {
    partition: i32,
    offset: i64,
    /// From v5.
    leader_epoch: i32,
    metadata: String,
    error: i16,
}

/// After a rebalance, no partition may be assigned to two live members
/// (the leader's assignment, as the consumer protocol encodes it).
fn check_assignments<'a>(checks: &Checks, assignments: impl Iterator<Item = &'a bytes::Bytes>) {
    let mut seen = std::collections::HashSet::new();
    for a in assignments {
        let Some(partitions) = crate::wire::decode_assignment(a) else {
            continue;
        };
        for tp in partitions {
            if !seen.insert(tp) {
                Checks::bump(&checks.assigned_twice);
            }
        }
    }
}
