//! The broker side of the consumer group protocol (KIP-848):
//! ConsumerGroupHeartbeat, through which a member joins, leaves, stays
//! alive and is handed its partitions, and ConsumerGroupDescribe, on the
//! cluster's [`GroupCoordinator`](super::groups::GroupCoordinator).

use super::acls::allowed;
use super::checks::Checks;
use super::group_service::text;
use super::groups::{
    fence, Beat, BeatAnswer, ConsumerGroup, GroupState, Partitions, Refusal, TopicRegex, Topics,
    ASSIGNORS, LEAVE,
};
use super::service::BrokerService;
use super::LiveCluster;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    self as describe, DescribedGroup,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment, TopicPartitions as AnsweredPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// Kafka's checks of a heartbeat's fields, before the group is looked at.
fn invalid(r: &ConsumerGroupHeartbeatRequest, version: i16) -> Option<Refusal> {
    let bad = |message: &str| Some(Refusal::new(ResponseError::InvalidRequest, message));
    // From v1 the member makes its own id; before, the coordinator makes
    // it at the join.
    if (version >= 1 || r.member_epoch != 0) && r.member_id.is_empty() {
        return bad("MemberId can't be empty.");
    }
    if r.group_id.is_empty() {
        return bad("GroupId can't be empty.");
    }
    if r.instance_id.as_ref().is_some_and(|i| i.is_empty()) {
        return bad("InstanceId can't be empty.");
    }
    if r.rack_id.as_ref().is_some_and(|i| i.is_empty()) {
        return bad("RackId can't be empty.");
    }
    match r.member_epoch {
        0 if r.rebalance_timeout_ms == -1 => {
            return bad("RebalanceTimeoutMs must be provided in first request.")
        }
        0 if r.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) => {
            return bad("TopicPartitions must be empty when (re-)joining.")
        }
        0 if r.subscribed_topic_names.is_none() && r.subscribed_topic_regex.is_none() => {
            return bad(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            )
        }
        -2 if r.instance_id.is_none() => return bad("InstanceId can't be null."),
        e if e < -2 => return bad("MemberEpoch is invalid."),
        _ => {}
    }
    if let Some(a) = &r.server_assignor {
        if !ASSIGNORS.contains(&a.as_str()) {
            let supported = ASSIGNORS.join(", ");
            let message =
                format!("ServerAssignor {a} is not supported. Supported assignors: {supported}.");
            return Some(Refusal::new(ResponseError::UnsupportedAssignor, message));
        }
    }
    None
}

fn partitions(topics: impl Iterator<Item = (Uuid, Vec<i32>)>) -> Partitions {
    let mut out = Partitions::new();
    for (t, ps) in topics {
        out.entry(t).or_default().extend(ps);
    }
    out
}

/// A heartbeat looks up its group's topics in the cluster's own map,
/// copying none it does not need.
impl Topics for LiveCluster {
    fn topic(&self, name: &str) -> Option<(Uuid, u32)> {
        let topics = self.topics.read();
        topics.get(name).map(|t| (t.id, t.partitions.len() as u32))
    }

    fn each(&self, f: &mut dyn FnMut(&str, Uuid, u32)) {
        for t in self.topics.read().values() {
            f(&t.name, t.id, t.partitions.len() as u32);
        }
    }
}

impl BrokerService {
    /// ConsumerGroupHeartbeat: what [`ConsumerGroup::heartbeat`] does,
    /// for the group this broker coordinates.
    pub(crate) fn consumer_group_heartbeat(
        &self,
        r: ConsumerGroupHeartbeatRequest,
        version: i16,
        (client_id, client_host): (&str, &str),
    ) -> ConsumerGroupHeartbeatResponse {
        Checks::bump(&self.cluster.checks.group_requests);
        let mut response = ConsumerGroupHeartbeatResponse::default();
        let refused = |mut response: ConsumerGroupHeartbeatResponse, r: Refusal| {
            response.error_code = r.error.code();
            response.error_message = Some(text(&r.message));
            response
        };
        let id: Arc<str> = Arc::from(r.group_id.0.as_str());
        if let Err(e) = self.is_coordinator(self.cluster.group_coordinator(&id)) {
            response.error_code = e;
            return response;
        }
        if let Some(refusal) = invalid(&r, version) {
            return refused(response, refusal);
        }
        let topic_regex = match r
            .subscribed_topic_regex
            .map(|s| TopicRegex::new(s.to_string()))
        {
            Some(Err(refusal)) => return refused(response, refusal),
            compiled => compiled.transpose().expect("errors returned above"),
        };
        let groups = &self.cluster.groups;
        // Only a join makes a group.
        let group = match r.member_epoch {
            0 => groups.group(&id),
            _ => match groups.find(&id) {
                Some(group) => group,
                None => {
                    let message = format!("Group {id} not found.");
                    return refused(
                        response,
                        Refusal::new(ResponseError::GroupIdNotFound, message),
                    );
                }
            },
        };
        let member_id = if r.member_id.is_empty() {
            Uuid::new_v4().simple().to_string()
        } else {
            r.member_id.to_string()
        };
        let beat = Beat {
            member_id,
            epoch: r.member_epoch,
            instance_id: r.instance_id.map(|i| i.to_string()),
            rack_id: r.rack_id.map(|i| i.to_string()),
            rebalance_timeout: u64::try_from(r.rebalance_timeout_ms)
                .ok()
                .map(Duration::from_millis),
            topic_names: r
                .subscribed_topic_names
                .map(|names| names.into_iter().map(|n| n.0.to_string()).collect()),
            topic_regex,
            assignor: r.server_assignor.map(|s| s.to_string()),
            owned: r
                .topic_partitions
                .map(|t| partitions(t.into_iter().map(|t| (t.topic_id, t.partitions)))),
            client_id: client_id.to_string(),
            client_host: client_host.to_string(),
        };
        let mut actions = Vec::new();
        let mut upgraded = Vec::new();
        let leaving = r.member_epoch == LEAVE;
        let answer = {
            let mut g = group.lock();
            if g.deleted {
                response.error_code = ResponseError::CoordinatorNotAvailable.code();
                return response;
            }
            if g.consumer.is_none() {
                let share_in_use = g.share.as_ref().is_some_and(|s| !s.members.is_empty());
                let classic_in_use =
                    !g.members.is_empty() || g.state != GroupState::Empty || g.join_in_purgatory;
                if share_in_use || r.member_epoch != 0 {
                    let message = format!("Group {id} is not a consumer group.");
                    return refused(
                        response,
                        Refusal::new(ResponseError::GroupIdNotFound, message),
                    );
                }
                let policy = groups.cfg.migration_policy;
                // Not past group.consumer.max.size, as Kafka's coordinator
                // checks before an upgrade.
                let fits = g.members.len() <= groups.cfg.consumer_max_size as usize;
                if classic_in_use && !g.members.is_empty() && policy.upgrades() && fits {
                    // A classic group with members turns consumer-protocol,
                    // its members keeping their assignments.
                    match g.upgrade(&*self.cluster, &mut actions) {
                        Some(answers) => upgraded = answers,
                        None => {
                            let message = format!(
                                "Cannot upgrade the classic group {id} to a consumer group: it \
                                 does not use the consumer protocol, or a member's subscription \
                                 or assignment does not decode."
                            );
                            return refused(
                                response,
                                Refusal::new(ResponseError::GroupIdNotFound, message),
                            );
                        }
                    }
                } else if classic_in_use {
                    let message = format!("Group {id} is not a consumer group.");
                    return refused(
                        response,
                        Refusal::new(ResponseError::GroupIdNotFound, message),
                    );
                } else {
                    // An empty classic or share group (or a new one) turns
                    // consumer.
                    g.share = None;
                    g.consumer = Some(ConsumerGroup::default());
                    g.protocol_type = Some("consumer".to_string());
                    g.protocol = None;
                }
            }
            let c = g.consumer.as_mut().expect("set above");
            let session_timeout = groups
                .config_ms(&id, "consumer.session.timeout.ms")
                .unwrap_or(groups.cfg.consumer_session_timeout);
            if let Err(refusal) = groups.cfg.consumer_room(c, &beat.member_id) {
                return refused(response, refusal);
            }
            if leaving && groups.cfg.downgrades_without(c, &beat.member_id) {
                // Its last member of the consumer protocol leaving, a
                // group of classic members turns classic again.
                let answer = BeatAnswer {
                    member_id: beat.member_id.clone(),
                    epoch: LEAVE,
                    assignment: None,
                };
                fence(&mut g, &beat.member_id, &groups.cfg, &mut actions);
                Ok(answer)
            } else {
                let answer = c.heartbeat(beat, &*self.cluster, session_timeout, &mut actions);
                if c.owned_twice() {
                    Checks::bump(&self.cluster.checks.assigned_twice);
                }
                answer
            }
        };
        for (tx, answer) in upgraded {
            let _ = tx.send(answer);
        }
        groups.run(&id, actions);
        match answer {
            Err(refusal) => refused(response, refusal),
            Ok(answer) => {
                response.member_id = Some(text(&answer.member_id));
                response.member_epoch = answer.epoch;
                let interval = groups
                    .config_ms(&id, "consumer.heartbeat.interval.ms")
                    .unwrap_or(groups.cfg.consumer_heartbeat_interval);
                response.heartbeat_interval_ms = interval.as_millis() as i32;
                response.assignment = answer.assignment.map(|a| {
                    let mut out = Assignment::default();
                    out.topic_partitions = a
                        .into_iter()
                        .map(|(t, ps)| {
                            let mut tp = AnsweredPartitions::default();
                            tp.topic_id = t;
                            tp.partitions = ps.into_iter().collect();
                            tp
                        })
                        .collect();
                    out
                });
                response
            }
        }
    }

    /// ConsumerGroupDescribe: each consumer-protocol group asked about,
    /// with its epochs, assignor and members (their assignments and
    /// targets named by topic id and name); GROUP_ID_NOT_FOUND for a
    /// group that does not exist or is a classic one.
    pub(crate) fn consumer_group_describe(
        &self,
        r: ConsumerGroupDescribeRequest,
    ) -> ConsumerGroupDescribeResponse {
        Checks::bump(&self.cluster.checks.group_requests);
        let mut names: BTreeMap<Uuid, String> = BTreeMap::new();
        self.cluster
            .each(&mut |name, id, _| drop(names.insert(id, name.to_string())));
        let assignment = |a: Option<&Partitions>| {
            let mut out = describe::Assignment::default();
            out.topic_partitions = a
                .into_iter()
                .flatten()
                .map(|(t, ps)| {
                    let mut tp = describe::TopicPartitions::default();
                    tp.topic_id = *t;
                    tp.topic_name = TopicName(text(names.get(t).map_or("", String::as_str)));
                    tp.partitions = ps.iter().copied().collect();
                    tp
                })
                .collect();
            out
        };
        let mut response = ConsumerGroupDescribeResponse::default();
        response.groups = r
            .group_ids
            .into_iter()
            .map(|GroupId(id)| {
                let mut out = DescribedGroup::default();
                out.authorized_operations =
                    allowed::if_asked(r.include_authorized_operations, allowed::GROUP);
                out.group_id = GroupId(id.clone());
                if let Err(e) = self.is_coordinator(self.cluster.group_coordinator(&id)) {
                    out.error_code = e;
                    return out;
                }
                let group = self.cluster.groups.find(&id);
                let g = group.as_ref().map(|g| g.lock());
                let Some(c) = g.as_ref().and_then(|g| g.consumer.as_ref()) else {
                    out.error_code = ResponseError::GroupIdNotFound.code();
                    out.error_message = Some(text(&match g {
                        Some(_) => format!("Group {id} is not a consumer group."),
                        None => format!("Group {id} not found."),
                    }));
                    return out;
                };
                out.group_state = text(c.state());
                out.group_epoch = c.epoch;
                out.assignment_epoch = c.assignment_epoch;
                out.assignor_name = text(c.assignor());
                out.members = c
                    .members
                    .iter()
                    .map(|(member_id, m)| {
                        let mut d = describe::Member::default();
                        d.member_id = text(member_id);
                        d.instance_id = m.instance_id.as_deref().map(text);
                        d.rack_id = m.rack_id.as_deref().map(text);
                        d.member_epoch = m.epoch;
                        d.client_id = text(&m.client_id);
                        d.client_host = text(&m.client_host);
                        d.subscribed_topic_names =
                            m.topic_names.iter().map(|n| TopicName(text(n))).collect();
                        d.subscribed_topic_regex = m.topic_regex.as_ref().map(|r| text(&r.source));
                        d.assignment = assignment(Some(&m.assigned));
                        d.target_assignment = assignment(c.target.get(member_id));
                        // 0: a classic member, 1: one of the consumer protocol.
                        d.member_type = if m.classic.is_some() { 0 } else { 1 };
                        d
                    })
                    .collect();
                out
            })
            .collect();
        response
    }
}
