//! The broker side of share group membership (KIP-932):
//! ShareGroupHeartbeat, through which a member joins, leaves, stays alive
//! and is handed its partitions, and ShareGroupDescribe, on the cluster's
//! [`GroupCoordinator`](super::groups::GroupCoordinator).

use super::acls::allowed;
use super::checks::Checks;
use super::group_service::text;
use super::groups::{Partitions, Refusal, ShareBeat, ShareGroup, Topics};
use super::service::BrokerService;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_group_describe_response::{self as describe, DescribedGroup};
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    GroupId, ShareGroupDescribeRequest, ShareGroupDescribeResponse, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse, TopicName,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use uuid::Uuid;

/// Kafka's checks of a heartbeat's fields, before the group is looked at.
fn invalid(r: &ShareGroupHeartbeatRequest) -> Option<Refusal> {
    let bad = |message: &str| Some(Refusal::new(ResponseError::InvalidRequest, message));
    if r.group_id.is_empty() {
        return bad("GroupId can't be empty.");
    }
    if r.member_id.is_empty() {
        return bad("MemberId can't be empty.");
    }
    if r.rack_id.as_ref().is_some_and(|i| i.is_empty()) {
        return bad("RackId can't be empty.");
    }
    match r.member_epoch {
        0 if r
            .subscribed_topic_names
            .as_ref()
            .is_none_or(|t| t.is_empty()) =>
        {
            bad("SubscribedTopicNames cannot be null or empty when MemberEpoch is zero.")
        }
        e if e < -1 => bad("MemberEpoch is invalid."),
        _ => None,
    }
}

impl BrokerService {
    /// ShareGroupHeartbeat: what [`ShareGroup::heartbeat`] does, for the
    /// group this broker coordinates.
    pub(crate) fn share_group_heartbeat(
        &self,
        r: ShareGroupHeartbeatRequest,
        (client_id, client_host): (&str, &str),
    ) -> ShareGroupHeartbeatResponse {
        Checks::bump(&self.cluster.checks.group_requests);
        let mut response = ShareGroupHeartbeatResponse::default();
        let refused = |mut response: ShareGroupHeartbeatResponse, r: Refusal| {
            response.error_code = r.error.code();
            response.error_message = Some(text(&r.message));
            response
        };
        let id: Arc<str> = Arc::from(r.group_id.0.as_str());
        if let Err(e) = self.is_coordinator(self.cluster.group_coordinator(&id)) {
            response.error_code = e;
            return response;
        }
        if let Some(refusal) = invalid(&r) {
            return refused(response, refusal);
        }
        let groups = &self.cluster.groups;
        let group = match r.member_epoch {
            0 => groups.group(&id),
            _ => match groups.find(&id) {
                Some(group) => group,
                None => {
                    let message = format!("Group {id} not found.");
                    let refusal = Refusal::new(ResponseError::GroupIdNotFound, message);
                    return refused(response, refusal);
                }
            },
        };
        let beat = ShareBeat {
            member_id: r.member_id.to_string(),
            epoch: r.member_epoch,
            rack_id: r.rack_id.map(|i| i.to_string()),
            topic_names: r
                .subscribed_topic_names
                .map(|names| names.into_iter().map(|n| n.0.to_string()).collect()),
            client_id: client_id.to_string(),
            client_host: client_host.to_string(),
        };
        let session_timeout = groups
            .config_ms(&id, "share.session.timeout.ms")
            .unwrap_or(groups.cfg.share_session_timeout);
        let interval = groups
            .config_ms(&id, "share.heartbeat.interval.ms")
            .unwrap_or(groups.cfg.share_heartbeat_interval);
        let mut actions = Vec::new();
        let answer = {
            let mut g = group.lock();
            if g.deleted {
                response.error_code = ResponseError::CoordinatorNotAvailable.code();
                return response;
            }
            if g.share.is_none() {
                let in_use = !g.members.is_empty()
                    || g.join_in_purgatory
                    || g.consumer.as_ref().is_some_and(|c| !c.members.is_empty());
                if in_use || r.member_epoch != 0 {
                    let message = format!("Group {id} is not a share group.");
                    let refusal = Refusal::new(ResponseError::GroupIdNotFound, message);
                    return refused(response, refusal);
                }
                // An empty group of another kind (or a new one) turns share.
                g.share = Some(ShareGroup::default());
                g.consumer = None;
                g.protocol_type = Some("share".to_string());
                g.protocol = None;
            }
            let s = g.share.as_mut().expect("set above");
            match groups.cfg.share_room(s, &beat.member_id) {
                Ok(()) => s.heartbeat(beat, &*self.cluster, session_timeout, &mut actions),
                Err(refusal) => Err(refusal),
            }
        };
        // A member leaving keeps its share sessions: its close acknowledges
        // what it holds through them next (or its locks run out).
        groups.run(&id, actions);
        match answer {
            Err(refusal) => refused(response, refusal),
            Ok(answer) => {
                response.member_id = Some(r.member_id);
                response.member_epoch = answer.epoch;
                response.heartbeat_interval_ms = interval.as_millis() as i32;
                response.assignment = answer.assignment.map(|a| {
                    let mut out = Assignment::default();
                    out.topic_partitions = a
                        .into_iter()
                        .map(|(t, ps)| {
                            let mut tp = TopicPartitions::default();
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

    /// ShareGroupDescribe: each share group asked about, with its epoch
    /// and members (their assignments named by topic id and name);
    /// GROUP_ID_NOT_FOUND for a group that does not exist or is of another
    /// kind.
    pub(crate) fn share_group_describe(
        &self,
        r: ShareGroupDescribeRequest,
    ) -> ShareGroupDescribeResponse {
        Checks::bump(&self.cluster.checks.group_requests);
        let mut names: BTreeMap<Uuid, String> = BTreeMap::new();
        self.cluster
            .each(&mut |name, id, _| drop(names.insert(id, name.to_string())));
        let assignment = |a: &Partitions| {
            let mut out = describe::Assignment::default();
            out.topic_partitions = a
                .iter()
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
        let mut response = ShareGroupDescribeResponse::default();
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
                let Some(s) = g.as_ref().and_then(|g| g.share.as_ref()) else {
                    out.error_code = ResponseError::GroupIdNotFound.code();
                    out.error_message = Some(text(&match g {
                        Some(_) => format!("Group {id} is not a share group."),
                        None => format!("Group {id} not found."),
                    }));
                    return out;
                };
                out.group_state = text(s.state());
                out.group_epoch = s.epoch;
                out.assignment_epoch = s.epoch;
                out.assignor_name = text("simple");
                out.members = s
                    .members
                    .iter()
                    .map(|(member_id, m)| {
                        let mut d = describe::Member::default();
                        d.member_id = text(member_id);
                        d.rack_id = m.rack_id.as_deref().map(text);
                        d.member_epoch = m.epoch;
                        d.client_id = text(&m.client_id);
                        d.client_host = text(&m.client_host);
                        d.subscribed_topic_names =
                            m.topic_names.iter().map(|n| TopicName(text(n))).collect();
                        d.assignment = assignment(&m.assigned);
                        d
                    })
                    .collect();
                out
            })
            .collect();
        response
    }
}
