//! What admin tools ask about consumer groups: ListGroups (the groups a
//! broker coordinates), DescribeGroups (a group's state, protocol and
//! members with their assignments), DeleteGroups and OffsetDelete (a
//! group's committed offsets of some partitions), as Kafka's coordinator
//! answers them.

use super::acls::allowed;
use super::checks::Checks;
use super::group_service::text;
use super::groups::GroupState;
use super::service::BrokerService;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, ListGroupsRequest, ListGroupsResponse, OffsetDeleteRequest, OffsetDeleteResponse,
};
use kafka_protocol::protocol::StrBytes;

/// The group types ListGroups v5 reports: the classic group protocol
/// (JoinGroup and SyncGroup) and the consumer group protocol (KIP-848).
const CLASSIC: &str = "classic";
const CONSUMER: &str = "consumer";

impl BrokerService {
    /// The groups this broker coordinates, in the states and of the types
    /// asked for (all when a filter is empty), by id.
    pub(crate) fn list_groups(&self, r: ListGroupsRequest) -> ListGroupsResponse {
        Checks::bump(&self.cluster.checks.group_requests);
        let wanted = |filter: &[StrBytes], value: &str| {
            filter.is_empty() || filter.iter().any(|f| f.eq_ignore_ascii_case(value))
        };
        let groups = &self.cluster.groups;
        let mut ids = groups.group_ids();
        ids.sort();
        let mut response = ListGroupsResponse::default();
        response.groups = ids
            .into_iter()
            .filter(|id| self.cluster.group_coordinator(id) == Some(self.id))
            .filter_map(|id| {
                let group = groups.find(&id)?;
                let g = group.lock();
                let (state, kind) = match (&g.consumer, &g.share) {
                    (Some(c), _) => (c.state(), CONSUMER),
                    (None, Some(s)) => (s.state(), "share"),
                    (None, None) => (g.state.name(), CLASSIC),
                };
                if !wanted(&r.states_filter, state) || !wanted(&r.types_filter, kind) {
                    return None;
                }
                let mut listed = ListedGroup::default();
                listed.group_id = GroupId(text(&id));
                listed.protocol_type = text(g.protocol_type.as_deref().unwrap_or(""));
                listed.group_state = text(state);
                listed.group_type = text(kind);
                Some(listed)
            })
            .collect();
        response
    }

    /// Each group asked about: NOT_COORDINATOR unless this broker
    /// coordinates it, "Dead" with no members if it does not exist or is a
    /// consumer-protocol group (and, from v6, GROUP_ID_NOT_FOUND);
    /// otherwise its state and members. As Kafka does, the protocol and
    /// the members' metadata and assignments are given only once the group
    /// is Stable (before that they are being renegotiated).
    pub(crate) fn describe_groups(
        &self,
        r: DescribeGroupsRequest,
        version: i16,
    ) -> DescribeGroupsResponse {
        Checks::bump(&self.cluster.checks.group_requests);
        let mut response = DescribeGroupsResponse::default();
        response.groups = r
            .groups
            .into_iter()
            .map(|id| {
                let mut out = DescribedGroup::default();
                out.authorized_operations =
                    allowed::if_asked(r.include_authorized_operations, allowed::GROUP);
                let name = id.0.to_string();
                out.group_id = id;
                if let Err(e) = self.is_coordinator(self.cluster.group_coordinator(&name)) {
                    out.error_code = e;
                    return out;
                }
                let Some(group) = self.cluster.groups.find(&name) else {
                    out.group_state = text("Dead");
                    if version >= 6 {
                        out.error_code = ResponseError::GroupIdNotFound.code();
                        out.error_message = Some(text(&format!("Group {name} not found.")));
                    }
                    return out;
                };
                let g = group.lock();
                // As Kafka: DescribeGroups describes classic groups only.
                if g.consumer.is_some() || g.share.is_some() {
                    out.group_state = text("Dead");
                    if version >= 6 {
                        out.error_code = ResponseError::GroupIdNotFound.code();
                        out.error_message =
                            Some(text(&format!("Group {name} is not a classic group.")));
                    }
                    return out;
                }
                out.group_state = text(g.state.name());
                out.protocol_type = text(g.protocol_type.as_deref().unwrap_or(""));
                let stable = g.state == GroupState::Stable;
                let protocol = g.protocol.as_deref().filter(|_| stable);
                out.protocol_data = text(protocol.unwrap_or(""));
                out.members = g
                    .members
                    .iter()
                    .map(|(member_id, m)| {
                        let mut d = DescribedGroupMember::default();
                        d.member_id = text(member_id);
                        d.client_id = text(&m.client_id);
                        d.group_instance_id = m.instance_id.as_deref().map(text);
                        d.client_host = text(&m.client_host);
                        if let Some(protocol) = protocol {
                            d.member_metadata = m.metadata(protocol);
                            d.member_assignment = m.assignment.clone();
                        }
                        d
                    })
                    .collect();
                out
            })
            .collect();
        response
    }

    /// Deletes each group asked for that this broker coordinates and that
    /// has no members, with its committed offsets.
    pub(crate) fn delete_groups(&self, r: DeleteGroupsRequest) -> DeleteGroupsResponse {
        Checks::bump(&self.cluster.checks.group_requests);
        let mut response = DeleteGroupsResponse::default();
        response.results = r
            .groups_names
            .into_iter()
            .map(|id| {
                let name = id.0.to_string();
                let mut out = DeletableGroupResult::default();
                out.group_id = id;
                out.error_code = self
                    .is_coordinator(self.cluster.group_coordinator(&name))
                    .and_then(|()| self.cluster.groups.delete_group(&name))
                    .inspect(|()| self.cluster.shares.forget_group(&name))
                    .err()
                    .unwrap_or(0);
                out
            })
            .collect();
        response
    }

    /// Forgets a group's committed offsets of the partitions named. A group
    /// with members may lose only the offsets of topics none of them
    /// subscribes to (GROUP_SUBSCRIBED_TO_TOPIC for the others), and only
    /// if it is a consumer group, whose subscriptions say which topics
    /// those are (NON_EMPTY_GROUP otherwise); GROUP_ID_NOT_FOUND if there
    /// is no such group.
    pub(crate) fn offset_delete(&self, r: OffsetDeleteRequest) -> OffsetDeleteResponse {
        Checks::bump(&self.cluster.checks.group_requests);
        let mut response = OffsetDeleteResponse::default();
        let id = r.group_id.0.as_str();
        if let Err(e) = self.is_coordinator(self.cluster.group_coordinator(id)) {
            response.error_code = e;
            return response;
        }
        let Some(group) = self.cluster.groups.find(id) else {
            response.error_code = ResponseError::GroupIdNotFound.code();
            return response;
        };
        let mut g = group.lock();
        if g.deleted {
            response.error_code = ResponseError::GroupIdNotFound.code();
            return response;
        }
        let consumer = g.protocol_type.as_deref() == Some("consumer");
        if g.state != GroupState::Empty && !consumer {
            response.error_code = ResponseError::NonEmptyGroup.code();
            return response;
        }
        let subscribed = g.subscribed_topics().unwrap_or_default();
        response.topics = r
            .topics
            .into_iter()
            .map(|t| {
                let topic = t.name.0.to_string();
                let kept = subscribed.contains(&topic);
                let mut out = OffsetDeleteResponseTopic::default();
                out.partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let mut answer = OffsetDeleteResponsePartition::default();
                        answer.partition_index = p.partition_index;
                        if kept {
                            answer.error_code = ResponseError::GroupSubscribedToTopic.code();
                        } else {
                            g.offsets.remove(&(topic.clone(), p.partition_index));
                        }
                        answer
                    })
                    .collect();
                out.name = t.name;
                out
            })
            .collect();
        response
    }
}
