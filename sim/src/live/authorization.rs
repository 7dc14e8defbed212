//! Every request checked against the ACLs (`--authorizer`), with the
//! operations and the errors Kafka's brokers use for each API
//! (`KafkaApis`):
//!
//! - a request that names one resource it may not touch (a group it may
//!   not join, a transactional id it may not write) is refused whole,
//!   before it reaches its handler, with that resource's error;
//! - a request over several topics or groups is handed on with only
//!   those it may touch, and the others are added to the response, each
//!   with its own error, as Kafka answers them;
//! - a request that lists what exists (all topics, all groups, all
//!   transactions) lists only what the principal may describe;
//! - the "authorized operations" fields say what the principal may do.
//!
//! Without an authorizer nothing here runs: every client may do
//! everything.

use super::authorizer::{code, Authorizer, Requester, CLUSTER_NAME};
use super::service::BrokerService;
use super::LiveCluster;
use crate::wire::Principal;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;
use uuid::Uuid;

/// What the check of a request decided.
pub(crate) enum Gate {
    /// Answered here: the handler never sees it.
    Refuse(Box<ResponseKind>),
    /// Handed on (maybe with parts taken out), and its response amended
    /// by the function, if any, once the handler has answered.
    Pass(Option<Amend>),
}

fn refuse(response: ResponseKind) -> Gate {
    Gate::Refuse(Box::new(response))
}

/// A change to a response: the refused parts put back, or what may not
/// be described taken out.
pub(crate) type Amend = Box<dyn FnOnce(&mut ResponseKind) + Send>;

const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;
const GROUP_DENIED: ResponseError = ResponseError::GroupAuthorizationFailed;
const CLUSTER_DENIED: ResponseError = ResponseError::ClusterAuthorizationFailed;
const TXN_DENIED: ResponseError = ResponseError::TransactionalIdAuthorizationFailed;

/// The principal asking, and the cluster whose ACLs decide: cloned into
/// the amendments that check the response. (Made only where the cluster
/// has an authorizer; were it to have none, everything would be allowed.)
#[derive(Clone)]
struct Asker {
    cluster: Arc<LiveCluster>,
    who: Requester,
}

impl Asker {
    fn authorizer(&self) -> Option<&Authorizer> {
        self.cluster.authorizer.as_ref()
    }

    fn may(&self, operation: i8, resource_type: i8, name: &str) -> bool {
        (self.authorizer()).is_none_or(|z| z.authorize(&self.who, operation, resource_type, name))
    }

    /// Kafka's `authorizeByResourceType`: `operation` on some resource of
    /// the type.
    fn may_on_some(&self, operation: i8, resource_type: i8) -> bool {
        (self.authorizer()).is_none_or(|z| z.authorize_any(&self.who, operation, resource_type))
    }

    /// The bits of what it may do on a resource.
    fn operations(&self, resource_type: i8, name: &str) -> i32 {
        (self.authorizer()).map_or(i32::MIN, |z| z.operations(&self.who, resource_type, name))
    }

    fn topic(&self, operation: i8, name: &str) -> bool {
        self.may(operation, code::TOPIC, name)
    }

    fn group(&self, operation: i8, name: &str) -> bool {
        self.may(operation, code::GROUP, name)
    }

    fn txn(&self, operation: i8, id: &str) -> bool {
        self.may(operation, code::TRANSACTIONAL_ID, id)
    }

    fn cluster(&self, operation: i8) -> bool {
        self.may(operation, code::CLUSTER, CLUSTER_NAME)
    }

    /// The bits of what it may do on a resource, where the request asked
    /// (Kafka's schemas' default, `i32::MIN`, where it did not).
    fn operations_if_asked(&self, asked: i32, resource_type: i8, name: &str) -> i32 {
        if asked == i32::MIN {
            asked
        } else {
            self.operations(resource_type, name)
        }
    }

    /// The cluster's authorized operations, where asked: none at all
    /// without DESCRIBE on it, as Kafka answers.
    fn cluster_operations_if_asked(&self, asked: i32) -> i32 {
        match asked {
            i32::MIN => asked,
            _ if !self.cluster(code::DESCRIBE) => 0,
            _ => self.operations(code::CLUSTER, CLUSTER_NAME),
        }
    }

    /// The name a topic is asked by: its name, or (by id) the name of the
    /// topic with that id. `None` for an id no topic has: the handler
    /// answers that one as unknown, which tells nothing of any topic.
    fn topic_name(&self, name: &str, id: Uuid) -> Option<String> {
        if !name.is_empty() {
            return Some(name.to_string());
        }
        (self.cluster.topic_by_id(id)).map(|t| t.name.to_string())
    }

    /// Whether the topic asked by `name` or `id` may be touched by
    /// `operation` (an unknown id may: see `topic_name`).
    fn topic_by(&self, operation: i8, name: &str, id: Uuid) -> bool {
        self.topic_name(name, id)
            .is_none_or(|name| self.topic(operation, &name))
    }
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn error(e: ResponseError) -> i16 {
    e.code()
}

/// Takes out of `items` those `allowed` refuses, and returns them.
fn refused<T>(items: &mut Vec<T>, allowed: impl Fn(&T) -> bool) -> Vec<T> {
    items.extract_if(.., |item| !allowed(item)).collect()
}

/// An amendment from a function of the response of one kind: `$kind` is
/// the `ResponseKind` variant.
macro_rules! amend {
    ($kind:ident, |$response:ident| $body:expr) => {
        Gate::Pass(Some(Box::new(move |response: &mut ResponseKind| {
            if let ResponseKind::$kind($response) = response {
                $body
            }
        })))
    };
}

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

/// The topics of `$denied` (a request's, each with a `name` and its
/// `partitions`, each with a `partition_index`) as a response's `$topic`s,
/// every partition answered `$e`, with `$field`s set as well.
macro_rules! topics_refused {
    ($denied:expr, $topic:ty, $partition:ty, $e:expr $(, $field:ident = $value:expr)*) => {
        ($denied.into_iter())
            .map(|t| {
                let mut topic = <$topic>::default();
                topic.name = t.name;
                topic.partitions = (t.partitions.iter())
                    .map(|p| {
                        let mut out = <$partition>::default();
                        out.partition_index = p.partition_index;
                        out.error_code = error($e);
                        $(out.$field = $value;)*
                        out
                    })
                    .collect();
                topic
            })
            .collect::<Vec<_>>()
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

/// AlterConfigs and IncrementalAlterConfigs (`$kind`): each resource the
/// principal may not alter is taken out and answered with its error.
macro_rules! configs_altered {
    ($a:ident, $r:ident, $kind:ident, $result:ty) => {{
        let denied = refused(&mut $r.resources, |c| {
            config_resource(&$a, code::ALTER_CONFIGS, c.resource_type, &c.resource_name).is_ok()
        });
        amend!($kind, |response| {
            response.responses.extend(denied.into_iter().map(|c| {
                let mut out = <$result>::default();
                out.error_message = None;
                let checked =
                    config_resource(&$a, code::ALTER_CONFIGS, c.resource_type, &c.resource_name);
                out.error_code = checked.err().map_or(0, error);
                out.resource_type = c.resource_type;
                out.resource_name = c.resource_name;
                out
            }))
        })
    }};
}

impl BrokerService {
    /// Checks `request` from `principal`, as described in the module
    /// docs; everything passes without an authorizer.
    pub(crate) fn gate(
        &self,
        principal: &Principal,
        version: i16,
        request: &mut RequestKind,
    ) -> Gate {
        if self.cluster.authorizer.is_none() {
            return Gate::Pass(None);
        }
        let asker = Asker {
            cluster: Arc::clone(&self.cluster),
            who: Requester {
                principal: format!("User:{}", principal.name()),
                host: (principal.host()).map_or_else(|| "*".to_string(), |h| h.to_string()),
            },
        };
        data_plane(&asker, version, request)
            .or_else(|| groups(&asker, version, request))
            .or_else(|| transactions(&asker, request))
            .or_else(|| admin(&asker, request))
            .unwrap_or(Gate::Pass(None))
    }
}

/// Produce, Fetch, ListOffsets, Metadata, OffsetForLeaderEpoch,
/// DescribeTopicPartitions.
fn data_plane(asker: &Asker, version: i16, request: &mut RequestKind) -> Option<Gate> {
    let a = asker.clone();
    Some(match request {
        RequestKind::Produce(r) => {
            // Unanswered (acks=0): what is refused is only dropped.
            let answered = r.acks != 0;
            let txn = r.transactional_id.as_deref();
            if txn.is_some_and(|id| !a.txn(code::WRITE, id)) {
                if !answered {
                    r.topic_data.clear();
                    return Some(Gate::Pass(None));
                }
                let refusal = produce_refused(&r.topic_data, TXN_DENIED);
                return Some(refuse(ResponseKind::Produce(refusal)));
            }
            let denied = refused(&mut r.topic_data, |t| {
                a.topic_by(code::WRITE, &t.name, t.topic_id)
            });
            if !answered {
                return Some(Gate::Pass(None));
            }
            let answer = produce_refused(&denied, TOPIC_DENIED);
            amend!(Produce, |response| response
                .responses
                .extend(answer.responses))
        }
        RequestKind::Fetch(r) => {
            // A follower's fetch is the cluster's own (CLUSTER_ACTION); here
            // only simulated followers replicate, so one from the wire is
            // checked as Kafka checks it and refused whole when denied.
            let replica = r.replica_id.0 >= 0 || r.replica_state.replica_id.0 >= 0;
            if replica && !a.cluster(code::CLUSTER_ACTION) {
                let denied = std::mem::take(&mut r.topics);
                return Some(refuse(ResponseKind::Fetch(fetch_refused(&denied))));
            }
            if replica {
                return Some(Gate::Pass(None));
            }
            let denied = refused(&mut r.topics, |t| {
                a.topic_by(code::READ, &t.topic, t.topic_id)
            });
            let answer = fetch_refused(&denied);
            // A fetch session may answer for partitions this request did not
            // name: each topic is checked again in the response.
            amend!(Fetch, |response| {
                for topic in &mut response.responses {
                    if !a.topic_by(code::READ, &topic.topic, topic.topic_id) {
                        for p in &mut topic.partitions {
                            *p = fetch_partition_refused(p.partition_index);
                        }
                    }
                }
                response.responses.extend(answer.responses);
            })
        }
        RequestKind::ListOffsets(r) => {
            let denied = refused(&mut r.topics, |t| a.topic(code::DESCRIBE, &t.name));
            amend!(ListOffsets, |response| {
                response.topics.extend(topics_refused!(
                    denied,
                    list_offsets_response::ListOffsetsTopicResponse,
                    list_offsets_response::ListOffsetsPartitionResponse,
                    TOPIC_DENIED,
                    timestamp = -1,
                    offset = -1
                ))
            })
        }
        RequestKind::Metadata(r) => metadata(a, version, r),
        RequestKind::OffsetForLeaderEpoch(r) => {
            if r.replica_id.0 >= 0 && a.cluster(code::CLUSTER_ACTION) {
                return Some(Gate::Pass(None));
            }
            amend!(OffsetForLeaderEpoch, |response| {
                for topic in &mut response.topics {
                    if !a.topic(code::DESCRIBE, &topic.topic) {
                        for p in &mut topic.partitions {
                            p.error_code = error(TOPIC_DENIED);
                            p.leader_epoch = -1;
                            p.end_offset = -1;
                        }
                    }
                }
            })
        }
        RequestKind::DescribeTopicPartitions(r) => {
            let listed = r.topics.is_empty();
            amend!(DescribeTopicPartitions, |response| {
                if listed {
                    response.topics.retain(|t| {
                        (t.name.as_deref()).is_some_and(|n| a.topic(code::DESCRIBE, n))
                    });
                }
                for topic in &mut response.topics {
                    let name = topic
                        .name
                        .as_deref()
                        .map(|n| n.to_string())
                        .unwrap_or_default();
                    if !a.topic(code::DESCRIBE, &name) {
                        *topic = Default::default();
                        topic.name = Some(TopicName(s(&name)));
                        topic.error_code = error(TOPIC_DENIED);
                    } else {
                        topic.topic_authorized_operations = a.operations_if_asked(
                            topic.topic_authorized_operations,
                            code::TOPIC,
                            &name,
                        );
                    }
                }
            })
        }
        _ => return None,
    })
}

fn produce_refused(
    topics: &[produce_request::TopicProduceData],
    e: ResponseError,
) -> ProduceResponse {
    let mut response = ProduceResponse::default();
    response.responses = (topics.iter())
        .map(|t| {
            let mut topic = produce_response::TopicProduceResponse::default();
            topic.name = t.name.clone();
            topic.topic_id = t.topic_id;
            topic.partition_responses = (t.partition_data.iter())
                .map(|p| {
                    let mut out = produce_response::PartitionProduceResponse::default();
                    out.index = p.index;
                    out.error_code = error(e);
                    out.base_offset = -1;
                    out.log_append_time_ms = -1;
                    out.log_start_offset = -1;
                    out
                })
                .collect();
            topic
        })
        .collect();
    response
}

fn fetch_partition_refused(index: i32) -> fetch_response::PartitionData {
    let mut out = fetch_response::PartitionData::default();
    out.partition_index = index;
    out.error_code = error(TOPIC_DENIED);
    out.high_watermark = -1;
    out.last_stable_offset = -1;
    out.log_start_offset = -1;
    out.preferred_read_replica = BrokerId(-1);
    out
}

fn fetch_refused(topics: &[fetch_request::FetchTopic]) -> FetchResponse {
    let mut response = FetchResponse::default();
    response.responses = (topics.iter())
        .map(|t| {
            let mut topic = fetch_response::FetchableTopicResponse::default();
            topic.topic = t.topic.clone();
            topic.topic_id = t.topic_id;
            topic.partitions = (t.partitions.iter())
                .map(|p| fetch_partition_refused(p.partition))
                .collect();
            topic
        })
        .collect();
    response
}

/// Metadata: topics asked for that the principal may not describe are
/// answered TOPIC_AUTHORIZATION_FAILED, and so is a topic it would create
/// without the right to (CREATE on the cluster or the topic); a request
/// for every topic lists only those it may describe.
fn metadata(a: Asker, version: i16, r: &mut MetadataRequest) -> Gate {
    let may_create = a.cluster.cfg.auto_create && (version < 4 || r.allow_auto_topic_creation);
    let mut denied: Vec<(Option<String>, Uuid)> = Vec::new();
    if let Some(topics) = &mut r.topics {
        let creates_any = a.cluster(code::CREATE);
        for t in refused(topics, |t| {
            let name = t.name.as_deref().map(|n| n.to_string()).unwrap_or_default();
            match a.topic_name(&name, t.topic_id) {
                None => true,
                Some(name) => {
                    a.topic(code::DESCRIBE, &name)
                        && (!may_create
                            || a.cluster.topic(&name).is_some()
                            || creates_any
                            || a.topic(code::CREATE, &name))
                }
            }
        }) {
            let name = t.name.as_deref().map(|n| n.to_string());
            denied.push((name, t.topic_id));
        }
    }
    let listed = r.topics.is_none();
    amend!(Metadata, |response| {
        if listed {
            response
                .topics
                .retain(|t| (t.name.as_deref()).is_some_and(|n| a.topic(code::DESCRIBE, n)));
        }
        for topic in &mut response.topics {
            if let Some(name) = topic.name.as_deref() {
                let name = name.to_string();
                topic.topic_authorized_operations =
                    a.operations_if_asked(topic.topic_authorized_operations, code::TOPIC, &name);
            }
        }
        response.cluster_authorized_operations =
            a.cluster_operations_if_asked(response.cluster_authorized_operations);
        response.topics.extend(denied.into_iter().map(|(name, id)| {
            let mut topic = metadata_response::MetadataResponseTopic::default();
            topic.error_code = error(TOPIC_DENIED);
            // Asked by id, the name is not told; asked by name, the id.
            if id.is_nil() {
                topic.name = name.map(|n| TopicName(s(&n)));
            } else {
                topic.topic_id = id;
            }
            topic
        }));
    })
}

/// The group APIs, classic and consumer and share, and their offsets.
fn groups(asker: &Asker, version: i16, request: &mut RequestKind) -> Option<Gate> {
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

/// The transaction APIs: a transactional id needs WRITE; an idempotent
/// producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
fn transactions(asker: &Asker, request: &mut RequestKind) -> Option<Gate> {
    let a = asker.clone();
    Some(match request {
        RequestKind::InitProducerId(r) => {
            let refusal = match &r.transactional_id {
                Some(id) => (!a.txn(code::WRITE, id)).then_some(TXN_DENIED),
                None => (!a.cluster(code::IDEMPOTENT_WRITE)
                    && !a.may_on_some(code::WRITE, code::TOPIC))
                .then_some(CLUSTER_DENIED),
            };
            let Some(e) = refusal else {
                return Some(Gate::Pass(None));
            };
            let mut response = InitProducerIdResponse::default();
            response.error_code = error(e);
            response.producer_id = ProducerId(-1);
            response.producer_epoch = -1;
            refuse(ResponseKind::InitProducerId(response))
        }
        RequestKind::AddPartitionsToTxn(r) => {
            let whole = !a.txn(code::WRITE, &r.v3_and_below_transactional_id);
            let any_denied = (r.v3_and_below_topics.iter()).any(|t| !a.topic(code::WRITE, &t.name));
            if !whole && !any_denied {
                return Some(Gate::Pass(None));
            }
            // Nothing is added when anything is refused: the topics allowed
            // are answered OPERATION_NOT_ATTEMPTED, as Kafka answers them.
            let mut response = AddPartitionsToTxnResponse::default();
            response.results_by_topic_v3_and_below = (r.v3_and_below_topics.iter())
                .map(|t| {
                    let e = if whole {
                        TXN_DENIED
                    } else if a.topic(code::WRITE, &t.name) {
                        ResponseError::OperationNotAttempted
                    } else {
                        TOPIC_DENIED
                    };
                    let mut topic = add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default();
                    topic.name = t.name.clone();
                    topic.results_by_partition = (t.partitions.iter())
                        .map(|&p| {
                            let mut out =
                                add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default();
                            out.partition_index = p;
                            out.partition_error_code = error(e);
                            out
                        })
                        .collect();
                    topic
                })
                .collect();
            refuse(ResponseKind::AddPartitionsToTxn(response))
        }
        RequestKind::AddOffsetsToTxn(r) => {
            let refusal = if !a.txn(code::WRITE, &r.transactional_id) {
                Some(TXN_DENIED)
            } else {
                (!a.group(code::READ, &r.group_id)).then_some(GROUP_DENIED)
            };
            let Some(e) = refusal else {
                return Some(Gate::Pass(None));
            };
            let mut response = AddOffsetsToTxnResponse::default();
            response.error_code = error(e);
            refuse(ResponseKind::AddOffsetsToTxn(response))
        }
        RequestKind::EndTxn(r) if !a.txn(code::WRITE, &r.transactional_id) => {
            let mut response = EndTxnResponse::default();
            response.error_code = error(TXN_DENIED);
            response.producer_id = ProducerId(-1);
            response.producer_epoch = -1;
            refuse(ResponseKind::EndTxn(response))
        }
        RequestKind::TxnOffsetCommit(r) => {
            let whole = if !a.txn(code::WRITE, &r.transactional_id) {
                Some(TXN_DENIED)
            } else {
                (!a.group(code::READ, &r.group_id)).then_some(GROUP_DENIED)
            };
            let denied = match whole {
                Some(_) => std::mem::take(&mut r.topics),
                None => refused(&mut r.topics, |t| a.topic(code::READ, &t.name)),
            };
            let e = whole.unwrap_or(TOPIC_DENIED);
            let topics: Vec<_> = topics_refused!(
                denied,
                txn_offset_commit_response::TxnOffsetCommitResponseTopic,
                txn_offset_commit_response::TxnOffsetCommitResponsePartition,
                e
            );
            if whole.is_some() {
                let mut response = TxnOffsetCommitResponse::default();
                response.topics = topics;
                return Some(refuse(ResponseKind::TxnOffsetCommit(response)));
            }
            amend!(TxnOffsetCommit, |response| response.topics.extend(topics))
        }
        RequestKind::ListTransactions(_) => amend!(ListTransactions, |response| {
            (response.transaction_states).retain(|t| a.txn(code::DESCRIBE, &t.transactional_id));
        }),
        RequestKind::DescribeTransactions(_) => amend!(DescribeTransactions, |response| {
            for t in &mut response.transaction_states {
                if !a.txn(code::DESCRIBE, &t.transactional_id) {
                    let id = t.transactional_id.clone();
                    *t = Default::default();
                    t.transactional_id = id;
                    t.error_code = error(TXN_DENIED);
                    t.producer_id = ProducerId(-1);
                    t.producer_epoch = -1;
                    t.transaction_start_time_ms = -1;
                } else {
                    t.topics
                        .retain(|topic| a.topic(code::DESCRIBE, &topic.topic));
                }
            }
        }),
        RequestKind::DescribeProducers(_) => amend!(DescribeProducers, |response| {
            for topic in &mut response.topics {
                if !a.topic(code::READ, &topic.name) {
                    for p in &mut topic.partitions {
                        p.error_code = error(TOPIC_DENIED);
                        p.error_message = None;
                        p.active_producers.clear();
                    }
                }
            }
        }),
        RequestKind::WriteTxnMarkers(r) => {
            if a.cluster(code::ALTER) || a.cluster(code::CLUSTER_ACTION) {
                return Some(Gate::Pass(None));
            }
            let mut response = WriteTxnMarkersResponse::default();
            response.markers = (r.markers.iter())
                .map(|m| {
                    let mut marker = write_txn_markers_response::WritableTxnMarkerResult::default();
                    marker.producer_id = m.producer_id;
                    marker.topics = (m.topics.iter())
                        .map(|t| {
                            let mut topic =
                                write_txn_markers_response::WritableTxnMarkerTopicResult::default();
                            topic.name = t.name.clone();
                            topic.partitions = (t.partition_indexes.iter())
                                .map(|&p| {
                                    let mut out = write_txn_markers_response::WritableTxnMarkerPartitionResult::default();
                                    out.partition_index = p;
                                    out.error_code = error(CLUSTER_DENIED);
                                    out
                                })
                                .collect();
                            topic
                        })
                        .collect();
                    marker
                })
                .collect();
            refuse(ResponseKind::WriteTxnMarkers(response))
        }
        _ => return None,
    })
}

/// Topics, configs, ACLs, quotas, credentials, reassignments, elections,
/// log dirs and the cluster's description.
fn admin(asker: &Asker, request: &mut RequestKind) -> Option<Gate> {
    let a = asker.clone();
    Some(match request {
        RequestKind::CreateTopics(r) => {
            let creates_any = a.cluster(code::CREATE);
            let denied = refused(&mut r.topics, |t| {
                creates_any || a.topic(code::CREATE, &t.name)
            });
            amend!(CreateTopics, |response| {
                for t in &mut response.topics {
                    if t.error_code == 0 && !a.topic(code::DESCRIBE_CONFIGS, &t.name) {
                        t.topic_config_error_code = error(TOPIC_DENIED);
                        t.configs = None;
                        t.num_partitions = -1;
                        t.replication_factor = -1;
                    }
                }
                response.topics.extend(denied.into_iter().map(|t| {
                    let mut out = create_topics_response::CreatableTopicResult::default();
                    out.error_message = None;
                    out.name = t.name;
                    out.error_code = error(TOPIC_DENIED);
                    out.num_partitions = -1;
                    out.replication_factor = -1;
                    out
                }))
            })
        }
        RequestKind::CreatePartitions(r) => {
            let denied = refused(&mut r.topics, |t| a.topic(code::ALTER, &t.name));
            amend!(CreatePartitions, |response| {
                response.results.extend(denied.into_iter().map(|t| {
                    let mut out =
                        create_partitions_response::CreatePartitionsTopicResult::default();
                    out.name = t.name;
                    out.error_code = error(TOPIC_DENIED);
                    out.error_message = Some(s("The topic authorization is failed."));
                    out
                }))
            })
        }
        RequestKind::DeleteTopics(r) => {
            // DESCRIBE as well as DELETE, so that a topic's existence is not
            // told to whoever may not see it.
            let allowed = |name: &str| a.topic(code::DESCRIBE, name) && a.topic(code::DELETE, name);
            let by_name = refused(&mut r.topic_names, |n| allowed(n));
            let by_state = refused(&mut r.topics, |t| {
                let name = t.name.as_deref().map(|n| n.to_string()).unwrap_or_default();
                a.topic_name(&name, t.topic_id).is_none_or(|n| allowed(&n))
            });
            amend!(DeleteTopics, |response| {
                let refusal = |name: Option<TopicName>, id: Uuid| {
                    let mut out = delete_topics_response::DeletableTopicResult::default();
                    out.name = name;
                    out.topic_id = id;
                    out.error_code = error(TOPIC_DENIED);
                    out
                };
                (response.responses)
                    .extend(by_name.into_iter().map(|n| refusal(Some(n), Uuid::nil())));
                (response.responses)
                    .extend(by_state.into_iter().map(|t| refusal(t.name, t.topic_id)));
            })
        }
        RequestKind::DeleteRecords(r) => {
            let denied = refused(&mut r.topics, |t| a.topic(code::DELETE, &t.name));
            amend!(DeleteRecords, |response| {
                response.topics.extend(topics_refused!(
                    denied,
                    delete_records_response::DeleteRecordsTopicResult,
                    delete_records_response::DeleteRecordsPartitionResult,
                    TOPIC_DENIED,
                    low_watermark = -1
                ))
            })
        }
        RequestKind::DescribeConfigs(_) => amend!(DescribeConfigs, |response| {
            for result in &mut response.results {
                if let Err(e) = config_resource(
                    &a,
                    code::DESCRIBE_CONFIGS,
                    result.resource_type,
                    &result.resource_name,
                ) {
                    result.error_code = error(e);
                    result.error_message = None;
                    result.configs.clear();
                }
            }
        }),
        RequestKind::AlterConfigs(r) => configs_altered!(
            a,
            r,
            AlterConfigs,
            alter_configs_response::AlterConfigsResourceResponse
        ),
        RequestKind::IncrementalAlterConfigs(r) => configs_altered!(
            a,
            r,
            IncrementalAlterConfigs,
            incremental_alter_configs_response::AlterConfigsResourceResponse
        ),
        RequestKind::DescribeAcls(_) if !a.cluster(code::DESCRIBE) => {
            let mut response = DescribeAclsResponse::default();
            response.error_message = None;
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::DescribeAcls(response))
        }
        RequestKind::CreateAcls(r) if !a.cluster(code::ALTER) => {
            let mut response = CreateAclsResponse::default();
            response.results = (r.creations.iter())
                .map(|_| {
                    let mut out = create_acls_response::AclCreationResult::default();
                    out.error_message = None;
                    out.error_code = error(CLUSTER_DENIED);
                    out
                })
                .collect();
            refuse(ResponseKind::CreateAcls(response))
        }
        RequestKind::DeleteAcls(r) if !a.cluster(code::ALTER) => {
            let mut response = DeleteAclsResponse::default();
            response.filter_results = (r.filters.iter())
                .map(|_| {
                    let mut out = delete_acls_response::DeleteAclsFilterResult::default();
                    out.error_message = None;
                    out.error_code = error(CLUSTER_DENIED);
                    out
                })
                .collect();
            refuse(ResponseKind::DeleteAcls(response))
        }
        RequestKind::DescribeCluster(_) => amend!(DescribeCluster, |response| {
            response.cluster_authorized_operations =
                a.cluster_operations_if_asked(response.cluster_authorized_operations);
        }),
        RequestKind::DescribeUserScramCredentials(_) if !a.cluster(code::DESCRIBE) => {
            let mut response = DescribeUserScramCredentialsResponse::default();
            response.error_message = None;
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::DescribeUserScramCredentials(response))
        }
        RequestKind::AlterUserScramCredentials(r) if !a.cluster(code::ALTER) => {
            let users = (r.deletions.iter().map(|d| d.name.clone()))
                .chain(r.upsertions.iter().map(|u| u.name.clone()));
            let mut response = AlterUserScramCredentialsResponse::default();
            response.results = users
                .map(|user| {
                    let mut out =
                        alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default();
                    out.error_message = None;
                    out.user = user;
                    out.error_code = error(CLUSTER_DENIED);
                    out
                })
                .collect();
            refuse(ResponseKind::AlterUserScramCredentials(response))
        }
        RequestKind::DescribeClientQuotas(_) if !a.cluster(code::DESCRIBE_CONFIGS) => {
            let mut response = DescribeClientQuotasResponse::default();
            response.error_message = None;
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::DescribeClientQuotas(response))
        }
        RequestKind::AlterClientQuotas(r) if !a.cluster(code::ALTER_CONFIGS) => {
            let mut response = AlterClientQuotasResponse::default();
            response.entries = (r.entries.iter())
                .map(|e| {
                    let mut out = alter_client_quotas_response::EntryData::default();
                    out.error_message = None;
                    out.error_code = error(CLUSTER_DENIED);
                    out.entity = (e.entity.iter())
                        .map(|entity| {
                            let mut out = alter_client_quotas_response::EntityData::default();
                            out.entity_type = entity.entity_type.clone();
                            out.entity_name = entity.entity_name.clone();
                            out
                        })
                        .collect();
                    out
                })
                .collect();
            refuse(ResponseKind::AlterClientQuotas(response))
        }
        RequestKind::ListConfigResources(_) if !a.cluster(code::DESCRIBE_CONFIGS) => {
            let mut response = ListConfigResourcesResponse::default();
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::ListConfigResources(response))
        }
        RequestKind::ElectLeaders(r) if !a.cluster(code::ALTER) => {
            let mut response = ElectLeadersResponse::default();
            response.error_code = error(CLUSTER_DENIED);
            response.replica_election_results = (r.topic_partitions.iter().flatten())
                .map(|t| {
                    let mut topic = elect_leaders_response::ReplicaElectionResult::default();
                    topic.topic = t.topic.clone();
                    topic.partition_result = (t.partitions.iter())
                        .map(|&p| {
                            let mut out = elect_leaders_response::PartitionResult::default();
                            out.error_message = None;
                            out.partition_id = p;
                            out.error_code = error(CLUSTER_DENIED);
                            out
                        })
                        .collect();
                    topic
                })
                .collect();
            refuse(ResponseKind::ElectLeaders(response))
        }
        RequestKind::AlterPartitionReassignments(_) if !a.cluster(code::ALTER) => {
            let mut response = AlterPartitionReassignmentsResponse::default();
            response.error_message = None;
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::AlterPartitionReassignments(response))
        }
        RequestKind::ListPartitionReassignments(_) if !a.cluster(code::DESCRIBE) => {
            let mut response = ListPartitionReassignmentsResponse::default();
            response.error_message = None;
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::ListPartitionReassignments(response))
        }
        RequestKind::DescribeLogDirs(_) if !a.cluster(code::DESCRIBE) => {
            let mut response = DescribeLogDirsResponse::default();
            response.error_code = error(CLUSTER_DENIED);
            refuse(ResponseKind::DescribeLogDirs(response))
        }
        _ => return None,
    })
}

/// Whether a config resource (DescribeConfigs' codes: 2 a topic, 4 a
/// broker, 8 a broker's loggers, 16 client metrics, 32 a group) may be
/// described or altered; the error for it if not.
fn config_resource(
    a: &Asker,
    operation: i8,
    resource_type: i8,
    name: &str,
) -> Result<(), ResponseError> {
    let (allowed, e) = match resource_type {
        2 => (a.topic(operation, name), TOPIC_DENIED),
        32 => (a.group(operation, name), GROUP_DENIED),
        _ => (a.cluster(operation), CLUSTER_DENIED),
    };
    if allowed {
        Ok(())
    } else {
        Err(e)
    }
}
