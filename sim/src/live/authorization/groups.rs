//! The group APIs (classic, consumer and share groups) and the offsets
//! they commit and fetch.

use super::*;

/// The amendment of a response describing groups (`$kind`, whose groups
/// have the same fields in each API): a group the principal may not
/// describe is answered GROUP_AUTHORIZATION_FAILED and nothing else; the
/// others say what it may do on them, where asked.
macro_rules! groups_described {
    ($a:ident, $kind:ident) => {
        amend!($kind, |response| {
            for g in &mut response.groups {
                if !$a.group(code::DESCRIBE, &g.group_id) {
                    let id = g.group_id.clone();
                    *g = Default::default();
                    g.group_id = id;
                    g.error_code = error(GROUP_DENIED);
                    g.authorized_operations = i32::MIN;
                } else {
                    g.authorized_operations =
                        $a.operations_if_asked(g.authorized_operations, code::GROUP, &g.group_id);
                }
            }
        })
    };
}

/// The refusal of a request of `$kind` about one group, with nothing but
/// its error set.
macro_rules! group_refused {
    ($kind:ident, $response:ty) => {{
        let mut response = <$response>::default();
        response.error_code = error(GROUP_DENIED);
        refuse(ResponseKind::$kind(response))
    }};
}

/// ShareFetch and ShareAcknowledge (`$kind`), whose requests and responses
/// have the same shape: READ on the share group, or the whole request is
/// refused; then READ on each topic (named by id), or its partitions are
/// answered TOPIC_AUTHORIZATION_FAILED.
macro_rules! share_checked {
    ($a:ident, $r:ident, $kind:ident, $response:ty, $topic:ty, $partition:ty) => {{
        let group = ($r.group_id.as_deref()).map_or_else(String::new, |g| g.to_string());
        if !$a.group(code::READ, &group) {
            let mut response = <$response>::default();
            response.error_code = error(GROUP_DENIED);
            return Some(refuse(ResponseKind::$kind(response)));
        }
        let denied = refused(&mut $r.topics, |t| $a.topic_by(code::READ, "", t.topic_id));
        amend!($kind, |response| {
            response.responses.extend(denied.into_iter().map(|t| {
                let mut topic = <$topic>::default();
                topic.topic_id = t.topic_id;
                topic.partitions = (t.partitions.iter())
                    .map(|p| {
                        let mut out = <$partition>::default();
                        out.partition_index = p.partition_index;
                        out.error_code = error(TOPIC_DENIED);
                        out
                    })
                    .collect();
                topic
            }))
        })
    }};
}

/// The group APIs, classic and consumer and share, and their offsets.
pub(super) fn groups(asker: &Asker, version: i16, request: &mut RequestKind) -> Option<Gate> {
    let a = asker.clone();
    let read = |group: &str| a.group(code::READ, group);
    Some(match request {
        RequestKind::JoinGroup(r) if !read(&r.group_id) => {
            let mut response = JoinGroupResponse::default();
            response.error_code = error(GROUP_DENIED);
            response.generation_id = -1;
            refuse(ResponseKind::JoinGroup(response))
        }
        RequestKind::SyncGroup(r) if !read(&r.group_id) => {
            group_refused!(SyncGroup, SyncGroupResponse)
        }
        RequestKind::Heartbeat(r) if !read(&r.group_id) => {
            group_refused!(Heartbeat, HeartbeatResponse)
        }
        RequestKind::LeaveGroup(r) if !read(&r.group_id) => {
            group_refused!(LeaveGroup, LeaveGroupResponse)
        }
        RequestKind::ConsumerGroupHeartbeat(r) if !read(&r.group_id) => {
            group_refused!(ConsumerGroupHeartbeat, ConsumerGroupHeartbeatResponse)
        }
        RequestKind::ShareGroupHeartbeat(r) if !read(&r.group_id) => {
            group_refused!(ShareGroupHeartbeat, ShareGroupHeartbeatResponse)
        }
        RequestKind::OffsetCommit(r) => {
            let whole = !read(&r.group_id);
            let denied = if whole {
                std::mem::take(&mut r.topics)
            } else {
                refused(&mut r.topics, |t| a.topic(code::READ, &t.name))
            };
            let e = if whole { GROUP_DENIED } else { TOPIC_DENIED };
            let topics: Vec<_> = topics_refused!(
                denied,
                offset_commit_response::OffsetCommitResponseTopic,
                offset_commit_response::OffsetCommitResponsePartition,
                e
            );
            if whole {
                let mut response = OffsetCommitResponse::default();
                response.topics = topics;
                return Some(refuse(ResponseKind::OffsetCommit(response)));
            }
            amend!(OffsetCommit, |response| response.topics.extend(topics))
        }
        RequestKind::OffsetFetch(r) => offset_fetch(a, version, r),
        RequestKind::OffsetDelete(r) => {
            if !a.group(code::DELETE, &r.group_id) {
                let mut response = OffsetDeleteResponse::default();
                response.error_code = error(GROUP_DENIED);
                return Some(refuse(ResponseKind::OffsetDelete(response)));
            }
            let denied = refused(&mut r.topics, |t| a.topic(code::READ, &t.name));
            amend!(OffsetDelete, |response| {
                response.topics.extend(topics_refused!(
                    denied,
                    offset_delete_response::OffsetDeleteResponseTopic,
                    offset_delete_response::OffsetDeleteResponsePartition,
                    TOPIC_DENIED
                ))
            })
        }
        RequestKind::FindCoordinator(r) => {
            // Up to v3 one key, in the request's own fields.
            let key_type = r.key_type;
            let key = r.key.to_string();
            amend!(FindCoordinator, |response| {
                let refusal = |key: &str| match key_type {
                    0 => (!a.group(code::DESCRIBE, key)).then_some(GROUP_DENIED),
                    1 => (!a.txn(code::DESCRIBE, key)).then_some(TXN_DENIED),
                    _ => (!a.cluster(code::CLUSTER_ACTION)).then_some(CLUSTER_DENIED),
                };
                for c in &mut response.coordinators {
                    if let Some(e) = refusal(&c.key) {
                        c.node_id = BrokerId(-1);
                        c.host = s("");
                        c.port = -1;
                        c.error_code = error(e);
                        c.error_message = None;
                    }
                }
                if response.coordinators.is_empty() {
                    if let Some(e) = refusal(&key) {
                        response.node_id = BrokerId(-1);
                        response.host = s("");
                        response.port = -1;
                        response.error_code = error(e);
                        response.error_message = None;
                    }
                }
            })
        }
        RequestKind::DescribeGroups(_) => groups_described!(a, DescribeGroups),
        RequestKind::ConsumerGroupDescribe(_) => groups_described!(a, ConsumerGroupDescribe),
        RequestKind::ShareGroupDescribe(_) => groups_described!(a, ShareGroupDescribe),
        RequestKind::ListGroups(_) => amend!(ListGroups, |response| {
            if !a.cluster(code::DESCRIBE) {
                response
                    .groups
                    .retain(|g| a.group(code::DESCRIBE, &g.group_id));
            }
        }),
        RequestKind::DeleteGroups(r) => {
            let denied = refused(&mut r.groups_names, |g| a.group(code::DELETE, g));
            amend!(DeleteGroups, |response| {
                response.results.extend(denied.into_iter().map(|g| {
                    let mut out = delete_groups_response::DeletableGroupResult::default();
                    out.group_id = g;
                    out.error_code = error(GROUP_DENIED);
                    out
                }))
            })
        }
        RequestKind::ShareFetch(r) => share_checked!(
            a,
            r,
            ShareFetch,
            ShareFetchResponse,
            share_fetch_response::ShareFetchableTopicResponse,
            share_fetch_response::PartitionData
        ),
        RequestKind::ShareAcknowledge(r) => share_checked!(
            a,
            r,
            ShareAcknowledge,
            ShareAcknowledgeResponse,
            share_acknowledge_response::ShareAcknowledgeTopicResponse,
            share_acknowledge_response::PartitionData
        ),
        _ => return None,
    })
}

/// OffsetFetch: a group the principal may not describe is answered
/// GROUP_AUTHORIZATION_FAILED; topics asked for that it may not describe,
/// TOPIC_AUTHORIZATION_FAILED; a group's offsets asked for all topics
/// list only those it may describe.
fn offset_fetch(a: Asker, version: i16, r: &mut OffsetFetchRequest) -> Gate {
    let topic_refused = |name: &TopicName, partitions: &[i32]| {
        (partitions.iter())
            .map(move |&p| (name.clone(), p))
            .collect::<Vec<_>>()
    };
    if version < 8 {
        if !a.group(code::DESCRIBE, &r.group_id) {
            let mut response = OffsetFetchResponse::default();
            response.error_code = error(GROUP_DENIED);
            return refuse(ResponseKind::OffsetFetch(response));
        }
        let listed = r.topics.is_none();
        let denied: Vec<(TopicName, i32)> = (r.topics.as_mut())
            .map(|topics| refused(topics, |t| a.topic(code::DESCRIBE, &t.name)))
            .unwrap_or_default()
            .iter()
            .flat_map(|t| topic_refused(&t.name, &t.partition_indexes))
            .collect();
        return amend!(OffsetFetch, |response| {
            if listed {
                response.topics.retain(|t| a.topic(code::DESCRIBE, &t.name));
            }
            for (name, index) in denied {
                let mut partition = offset_fetch_response::OffsetFetchResponsePartition::default();
                partition.partition_index = index;
                partition.committed_offset = -1;
                partition.committed_leader_epoch = -1;
                partition.error_code = error(TOPIC_DENIED);
                match response.topics.iter_mut().find(|t| t.name == name) {
                    Some(topic) => topic.partitions.push(partition),
                    None => {
                        let mut topic = offset_fetch_response::OffsetFetchResponseTopic::default();
                        topic.name = name;
                        topic.partitions.push(partition);
                        response.topics.push(topic);
                    }
                }
            }
        });
    }
    let denied_groups = refused(&mut r.groups, |g| a.group(code::DESCRIBE, &g.group_id));
    let mut listed = Vec::new();
    let mut denied: Vec<(GroupId, TopicName, i32)> = Vec::new();
    for g in &mut r.groups {
        match &mut g.topics {
            None => listed.push(g.group_id.clone()),
            Some(topics) => {
                for t in refused(topics, |t| a.topic(code::DESCRIBE, &t.name)) {
                    for (name, p) in topic_refused(&t.name, &t.partition_indexes) {
                        denied.push((g.group_id.clone(), name, p));
                    }
                }
            }
        }
    }
    amend!(OffsetFetch, |response| {
        for g in &mut response.groups {
            if listed.contains(&g.group_id) {
                g.topics.retain(|t| a.topic(code::DESCRIBE, &t.name));
            }
        }
        for (group, name, index) in denied {
            let Some(g) = response.groups.iter_mut().find(|g| g.group_id == group) else {
                continue;
            };
            let mut partition = offset_fetch_response::OffsetFetchResponsePartitions::default();
            partition.partition_index = index;
            partition.committed_offset = -1;
            partition.committed_leader_epoch = -1;
            partition.error_code = error(TOPIC_DENIED);
            match g.topics.iter_mut().find(|t| t.name == name) {
                Some(topic) => topic.partitions.push(partition),
                None => {
                    let mut topic = offset_fetch_response::OffsetFetchResponseTopics::default();
                    topic.name = name;
                    topic.partitions.push(partition);
                    g.topics.push(topic);
                }
            }
        }
        response.groups.extend(denied_groups.into_iter().map(|g| {
            let mut out = offset_fetch_response::OffsetFetchResponseGroup::default();
            out.group_id = g.group_id;
            out.error_code = error(GROUP_DENIED);
            out
        }));
    })
}
