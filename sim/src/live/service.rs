//! What each request means for the served cluster: the broker side of
//! Metadata, Produce, ListOffsets and Fetch, as Kafka answers them. A
//! produce with `acks=all` and a fetch that cannot be answered yet are
//! parked in the broker's purgatories, and the request's task awaits the
//! handle.

use super::acls::allowed;
use super::authorization::Gate;
use super::batch_records::RecordsError;
use super::checks::Checks;
use super::client_quotas::{Client, Quota};
use super::fetch_sessions::{Asked, Context, Told};
use super::leader_epochs;
use super::leader_hints::{self, node_endpoints, LeaderHints};
use super::log::{
    now_ms, transactional_producer, AppendError, AppendRules, Appended, PartitionLog,
};
use super::ops::{fetched_bytes, FetchPart, ProducePart, WireFetch, WireProduce};
use super::produce_framing;
use super::recompress::Target;
use super::request_time::{Timed, Timing};
use super::throttling::{holds_answer, millis, strict_from, Mutating};
use super::topic_config;
use super::topics::{valid_topic_name, Partition, Topic};
use super::{LiveCluster, LiveConfig};
use crate::wire::{Answer, Principal, Service, Throttle};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    self, AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{
    self, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, ProducerId, RequestHeader,
    RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use purgatory::Outcome;
use std::borrow::Cow;
use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// One broker of the served cluster, as its listener's connections see it.
pub struct BrokerService {
    /// The cluster it belongs to.
    pub cluster: Arc<LiveCluster>,
    /// Its node id.
    pub id: u32,
}

/// The APIs and versions the served brokers implement (ApiVersions, the
/// front's own, aside): up to the latest Kafka defines for each, so a
/// client written against current brokers, which may send nothing older,
/// finds what it asks for. Fetch from v13 and Produce from v13 name topics
/// by id; FindCoordinator from v4 and OffsetFetch from v8 ask about several
/// keys or groups at once.
/// Held back: CreateTopics before v2 and WriteTxnMarkers v0 (the codecs
/// start after them),
/// AddPartitionsToTxn v4 and later (brokers' batched verification, not a
/// client's), and EndTxn v5 and TxnOffsetCommit v5, the second version of
/// transactions (KIP-890), which clients run only where a broker's features
/// announce it; they run the first here.
pub const APIS: [(ApiKey, i16, i16); 53] = [
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 4),
    (ApiKey::TxnOffsetCommit, 0, 4),
    (ApiKey::ListTransactions, 0, 1),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 0),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    (ApiKey::ListConfigResources, 0, 1),
    (ApiKey::UpdateFeatures, 0, 2),
    (ApiKey::ShareGroupHeartbeat, 1, 1),
    (ApiKey::ShareGroupDescribe, 1, 1),
    (ApiKey::ShareFetch, 1, 1),
    (ApiKey::ShareAcknowledge, 1, 1),
];

/// The cluster's id, as Metadata and DescribeCluster give it.
pub(crate) const CLUSTER_ID: &str = "broker-sim";

/// What Metadata answers for a topic asked for and not served: the name
/// or (v10 and later) the id it was asked by, and the error.
type UnknownTopic = (Option<String>, Uuid, i16);

/// A produced partition's index, and its base offset and log append time
/// (-1 but for a `LogAppendTime` topic), or why it was refused.
type PartitionAnswer = (i32, Result<Written, Refused>);

/// Where an append went, as a produce's answer gives it: the first
/// offset, the append time (-1: the producer's own timestamps) and the
/// log's start offset.
#[derive(Debug, Clone, Copy)]
struct Written {
    base: i64,
    log_append_time: i64,
    log_start: i64,
}

/// Why a partition's produce was refused: the error code and, for a batch
/// whose records were refused, the message (from Produce v8) and each
/// record at fault in its batch with why.
#[derive(Debug, Clone)]
struct Refused {
    code: i16,
    message: Option<Cow<'static, str>>,
    records: Vec<(i32, &'static str)>,
}

impl From<i16> for Refused {
    fn from(code: i16) -> Refused {
        Refused {
            code,
            message: None,
            records: Vec::new(),
        }
    }
}

impl From<RecordsError> for Refused {
    fn from(e: RecordsError) -> Refused {
        let code = match &e {
            RecordsError::Corrupt => ResponseError::CorruptMessage,
            RecordsError::Refused(faults) if faults.timestamps => ResponseError::InvalidTimestamp,
            RecordsError::Invalid | RecordsError::Refused(_) => ResponseError::InvalidRecord,
        };
        let records = match &e {
            RecordsError::Refused(faults) => (faults.listed.iter())
                .map(|&(record, fault)| (record, fault.message()))
                .collect(),
            _ => Vec::new(),
        };
        Refused {
            code: code.code(),
            message: Some(e.message()),
            records,
        }
    }
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// A ListOffsets answer for `partition` with no offset found (-1, -1).
fn no_offset(partition: i32) -> ListOffsetsPartitionResponse {
    let mut a = ListOffsetsPartitionResponse::default();
    a.partition_index = partition;
    a.timestamp = -1;
    a.offset = -1;
    a
}

/// The leader epoch ListOffsets gives with the offset it found for
/// `timestamp`: for the latest offset the current epoch, as Kafka's
/// leader answers; otherwise the epoch the record there was written in.
fn found_epoch(log: &PartitionLog, timestamp: i64, offset: i64) -> i32 {
    if timestamp == -1 {
        return log.epoch;
    }
    log.epochs.epoch_at(offset).unwrap_or(-1)
}

/// Metadata v0 has no null topic list: there an empty list asks for every
/// topic, as the null one does from v1 (Kafka's `isAllTopics`).
fn every_topic_in_metadata_v0(request: &mut RequestKind, version: i16) {
    if let RequestKind::Metadata(r) = request {
        if version == 0 && r.topics.as_ref().is_some_and(Vec::is_empty) {
            r.topics = None;
        }
    }
}

pub(crate) fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

impl Service for BrokerService {
    fn apis(&self) -> Vec<(ApiKey, i16, i16)> {
        APIS.to_vec()
    }

    fn call(
        self: Arc<Self>,
        header: RequestHeader,
        request: RequestKind,
        principal: Principal,
        throttle: Throttle,
    ) -> impl Future<Output = Answer> + Send + 'static {
        let timing = Timing::of(&self, &header, &request, &principal, &throttle);
        Timed::new(self.answer(header, request, principal, throttle), timing)
    }

    async fn wait_throttle(self: Arc<Self>, time: Duration) {
        self.wait_throttled(time).await;
    }

    fn admit(&self, peer: std::net::IpAddr) -> Duration {
        self.connection_throttle(peer)
    }

    fn credentials(&self) -> Option<Arc<dyn crate::wire::sasl::Credentials>> {
        self.sasl_credentials()
    }

    fn features(&self) -> Option<crate::wire::Features> {
        Some(self.cluster.features.announced())
    }
}

impl BrokerService {
    /// The answer to one request, under the quotas that apply to it.
    async fn answer(
        self: Arc<Self>,
        header: RequestHeader,
        request: RequestKind,
        principal: Principal,
        throttle: Throttle,
    ) -> Answer {
        let version = header.request_api_version;
        let mut request = request;
        every_topic_in_metadata_v0(&mut request, version);
        // Before anything else, as Kafka's brokers check it.
        if let Some(refused) = self.consumer_protocol_off(&request) {
            return Some(refused).into();
        }
        let amend = match self.gate(&principal, version, &mut request) {
            Gate::Refuse(response) => return Some(*response).into(),
            Gate::Pass(amend) => amend,
        };
        // Kafka's quotas take a client without an id as the empty id.
        let client = Client {
            user: principal.name(),
            id: header.client_id.as_deref().unwrap_or_default(),
        };
        let mut answer: Answer = match request {
            RequestKind::Produce(r) => self.produce(r, version, client, throttle).await,
            RequestKind::Fetch(r) => self.fetch(r, version, client, throttle).await,
            RequestKind::ShareFetch(r) => {
                // Boxed, as `respond` below.
                let response = Box::pin(self.share_fetch(r, client, &throttle)).await;
                Some(ResponseKind::ShareFetch(response)).into()
            }
            // Each under the controller mutation quota: a request that can
            // be refused its mutations is refused them from these versions.
            RequestKind::CreateTopics(r) => {
                Checks::bump(&self.checks().admin_requests);
                let mutating = Mutating::new(&self, client, strict_from(version, 6));
                let mut response = self.create_topics(r, version, &mutating);
                response.throttle_time_ms = mutating.finish(&throttle);
                Some(ResponseKind::CreateTopics(response)).into()
            }
            RequestKind::CreatePartitions(r) => {
                Checks::bump(&self.checks().admin_requests);
                let mutating = Mutating::new(&self, client, strict_from(version, 3));
                let mut response = self.create_partitions(r, &mutating);
                response.throttle_time_ms = mutating.finish(&throttle);
                Some(ResponseKind::CreatePartitions(response)).into()
            }
            RequestKind::DeleteTopics(r) => {
                Checks::bump(&self.checks().admin_requests);
                let mutating = Mutating::new(&self, client, strict_from(version, 5));
                let mut response = self.delete_topics(r, &mutating);
                response.throttle_time_ms = mutating.finish(&throttle);
                Some(ResponseKind::DeleteTopics(response)).into()
            }
            // Boxed: its future, as large as the largest of the many
            // answers it awaits, would otherwise be laid out inside every
            // request's, a parked fetch's among them.
            other => Box::pin(self.respond(header, other, &principal))
                .await
                .into(),
        };
        if let (Some(amend), Some(response)) = (amend, answer.response.as_mut()) {
            amend(response);
        }
        answer
    }

    /// The answer to any request no quota but the request time's applies
    /// to, from `principal`.
    async fn respond(
        self: Arc<Self>,
        header: RequestHeader,
        request: RequestKind,
        principal: &Principal,
    ) -> Option<ResponseKind> {
        let version = header.request_api_version;
        // Where a group member connects from, as Kafka's group
        // coordinators write it for DescribeGroups; made only for them.
        let host = || (principal.host_address()).map_or_else(String::new, |h| format!("/{h}"));
        match request {
            RequestKind::Metadata(r) => Some(ResponseKind::Metadata(self.metadata(r, version))),
            RequestKind::ListOffsets(r) => {
                Some(ResponseKind::ListOffsets(self.list_offsets(r, version)))
            }
            RequestKind::FindCoordinator(r) => Some(ResponseKind::FindCoordinator(
                self.find_coordinator(r, version),
            )),
            RequestKind::JoinGroup(r) => {
                let client = header
                    .client_id
                    .as_deref()
                    .unwrap_or("consumer")
                    .to_string();
                Some(ResponseKind::JoinGroup(
                    self.join_group(r, version, (&client, &host())).await,
                ))
            }
            RequestKind::SyncGroup(r) => {
                Some(ResponseKind::SyncGroup(self.sync_group(r, version).await))
            }
            RequestKind::Heartbeat(r) => Some(ResponseKind::Heartbeat(self.heartbeat(r))),
            RequestKind::LeaveGroup(r) => {
                Some(ResponseKind::LeaveGroup(self.leave_group(r, version)))
            }
            RequestKind::OffsetCommit(r) => {
                Some(ResponseKind::OffsetCommit(self.offset_commit(r, version)))
            }
            RequestKind::OffsetFetch(r) => {
                Some(ResponseKind::OffsetFetch(self.offset_fetch(r, version)))
            }
            RequestKind::ListGroups(r) => Some(ResponseKind::ListGroups(self.list_groups(r))),
            RequestKind::DescribeGroups(r) => Some(ResponseKind::DescribeGroups(
                self.describe_groups(r, version),
            )),
            RequestKind::ConsumerGroupHeartbeat(r) => {
                let client = header.client_id.as_deref().unwrap_or("consumer");
                Some(ResponseKind::ConsumerGroupHeartbeat(
                    self.consumer_group_heartbeat(r, version, (client, &host())),
                ))
            }
            RequestKind::ConsumerGroupDescribe(r) => Some(ResponseKind::ConsumerGroupDescribe(
                self.consumer_group_describe(r),
            )),
            RequestKind::ShareGroupHeartbeat(r) => {
                let client = header.client_id.as_deref().unwrap_or("consumer");
                Some(ResponseKind::ShareGroupHeartbeat(
                    self.share_group_heartbeat(r, (client, &host())),
                ))
            }
            RequestKind::ShareGroupDescribe(r) => Some(ResponseKind::ShareGroupDescribe(
                self.share_group_describe(r),
            )),

            RequestKind::ShareAcknowledge(r) => {
                Some(ResponseKind::ShareAcknowledge(self.share_acknowledge(r)))
            }
            RequestKind::DeleteGroups(r) => Some(ResponseKind::DeleteGroups(self.delete_groups(r))),
            RequestKind::OffsetDelete(r) => Some(ResponseKind::OffsetDelete(self.offset_delete(r))),
            RequestKind::InitProducerId(r) => {
                Checks::bump(&self.checks().init_producer_id_requests);
                Some(ResponseKind::InitProducerId(
                    self.init_producer_id(r, version),
                ))
            }
            RequestKind::AddPartitionsToTxn(r) => Some(ResponseKind::AddPartitionsToTxn(
                self.add_partitions_to_txn(r, version),
            )),
            RequestKind::AddOffsetsToTxn(r) => Some(ResponseKind::AddOffsetsToTxn(
                self.add_offsets_to_txn(r, version),
            )),
            RequestKind::EndTxn(r) => Some(ResponseKind::EndTxn(self.end_txn(r, version))),
            RequestKind::TxnOffsetCommit(r) => Some(ResponseKind::TxnOffsetCommit(
                self.txn_offset_commit(r, version),
            )),
            RequestKind::DescribeConfigs(r) => Some(ResponseKind::DescribeConfigs(
                self.describe_configs(r, version),
            )),
            RequestKind::IncrementalAlterConfigs(r) => Some(ResponseKind::IncrementalAlterConfigs(
                self.incremental_alter_configs(r),
            )),
            RequestKind::AlterConfigs(r) => Some(ResponseKind::AlterConfigs(self.alter_configs(r))),
            RequestKind::DescribeAcls(r) => Some(ResponseKind::DescribeAcls(self.describe_acls(r))),
            RequestKind::CreateAcls(r) => Some(ResponseKind::CreateAcls(self.create_acls(r))),
            RequestKind::DeleteAcls(r) => Some(ResponseKind::DeleteAcls(self.delete_acls(r))),
            RequestKind::DescribeCluster(r) => Some(ResponseKind::DescribeCluster(
                self.describe_cluster(r, version),
            )),
            RequestKind::DescribeTopicPartitions(r) => Some(ResponseKind::DescribeTopicPartitions(
                self.describe_topic_partitions(r),
            )),
            RequestKind::ListTransactions(r) => {
                Some(ResponseKind::ListTransactions(self.list_transactions(r)))
            }
            RequestKind::DescribeTransactions(r) => Some(ResponseKind::DescribeTransactions(
                self.describe_transactions(r),
            )),
            RequestKind::DescribeProducers(r) => {
                Some(ResponseKind::DescribeProducers(self.describe_producers(r)))
            }
            RequestKind::WriteTxnMarkers(r) => Some(ResponseKind::WriteTxnMarkers(
                self.write_txn_markers(r).await,
            )),
            RequestKind::DescribeUserScramCredentials(r) => {
                Checks::bump(&self.checks().admin_requests);
                Some(ResponseKind::DescribeUserScramCredentials(
                    self.describe_user_scram_credentials(r),
                ))
            }
            RequestKind::DescribeClientQuotas(r) => {
                Checks::bump(&self.checks().admin_requests);
                Some(ResponseKind::DescribeClientQuotas(
                    self.describe_client_quotas(r),
                ))
            }
            RequestKind::AlterClientQuotas(r) => {
                Checks::bump(&self.checks().admin_requests);
                Some(ResponseKind::AlterClientQuotas(self.alter_client_quotas(r)))
            }
            RequestKind::AlterUserScramCredentials(r) => {
                Checks::bump(&self.checks().admin_requests);
                Some(ResponseKind::AlterUserScramCredentials(
                    self.alter_user_scram_credentials(r),
                ))
            }
            RequestKind::UpdateFeatures(r) => {
                Checks::bump(&self.checks().admin_requests);
                Some(ResponseKind::UpdateFeatures(
                    self.update_features(&r, version),
                ))
            }
            RequestKind::ListConfigResources(r) => Some(ResponseKind::ListConfigResources(
                self.list_config_resources(r, version),
            )),
            RequestKind::OffsetForLeaderEpoch(r) => Some(ResponseKind::OffsetForLeaderEpoch(
                self.offset_for_leader_epoch(r),
            )),
            RequestKind::ElectLeaders(r) => {
                Some(ResponseKind::ElectLeaders(self.elect_leaders(r, version)))
            }
            RequestKind::AlterPartitionReassignments(r) => Some(
                ResponseKind::AlterPartitionReassignments(self.alter_partition_reassignments(r)),
            ),
            RequestKind::ListPartitionReassignments(r) => Some(
                ResponseKind::ListPartitionReassignments(self.list_partition_reassignments(r)),
            ),
            RequestKind::DescribeLogDirs(r) => {
                Some(ResponseKind::DescribeLogDirs(self.describe_log_dirs(r)))
            }
            RequestKind::DeleteRecords(r) => {
                Some(ResponseKind::DeleteRecords(self.delete_records(r).await))
            }
            // The front refuses what `apis` does not list.
            _ => None,
        }
    }
}

impl BrokerService {
    pub(crate) fn checks(&self) -> &Checks {
        &self.cluster.checks
    }

    /// Whether this broker answers a client for `log`'s partition as its
    /// leader, the client believing `current_epoch` the partition's (-1:
    /// not said); if not, the error code, checked in Kafka's order: the
    /// topic deleted, the epoch stale or unknown (counted), another
    /// leader.
    pub(crate) fn leads(&self, log: &PartitionLog, current_epoch: i32) -> Result<(), i16> {
        if log.deleted {
            return Err(code(ResponseError::UnknownTopicOrPartition));
        }
        if let Err(e) = leader_epochs::check_current(log.epoch, current_epoch) {
            Checks::bump(&self.checks().stale_epochs);
            return Err(code(e));
        }
        if log.leader != Some(self.id) {
            return Err(code(ResponseError::NotLeaderOrFollower));
        }
        Ok(())
    }

    pub(crate) fn partition(&self, topic: &str, index: i32) -> Result<Arc<Partition>, i16> {
        self.cluster
            .topic(topic)
            .and_then(|t| {
                usize::try_from(index)
                    .ok()
                    .and_then(|i| t.partitions.get(i).cloned())
            })
            .ok_or(code(ResponseError::UnknownTopicOrPartition))
    }

    fn metadata(&self, r: MetadataRequest, version: i16) -> MetadataResponse {
        Checks::bump(&self.checks().metadata_requests);
        let cluster = &self.cluster;
        // Before v4 a named topic is always created if missing.
        let may_create = cluster.cfg.auto_create && (version < 4 || r.allow_auto_topic_creation);
        let topics: Vec<Result<Arc<Topic>, UnknownTopic>> = match r.topics {
            None => cluster.topics().into_iter().map(Ok).collect(),
            Some(named) => named
                .into_iter()
                .map(|t| {
                    let Some(name) = t.name.map(|n| n.0.to_string()) else {
                        // By id: never created, UNKNOWN_TOPIC_ID if none.
                        return cluster.topic_by_id(t.topic_id).ok_or((
                            None,
                            t.topic_id,
                            code(ResponseError::UnknownTopicId),
                        ));
                    };
                    if let Some(topic) = cluster.topic(&name) {
                        Ok(topic)
                    } else if !valid_topic_name(&name) {
                        let error = code(ResponseError::InvalidTopicException);
                        Err((Some(name), Uuid::nil(), error))
                    } else if may_create {
                        Ok(cluster.create_topic(&name, cluster.cfg.partitions))
                    } else {
                        let error = code(ResponseError::UnknownTopicOrPartition);
                        Err((Some(name), Uuid::nil(), error))
                    }
                })
                .collect(),
        };
        let mut response = MetadataResponse::default();
        response.cluster_id = Some(StrBytes::from_static_str(CLUSTER_ID));
        // A live broker, as KRaft brokers name one to clients.
        response.controller_id = BrokerId(cluster.controller().map_or(-1, |b| b as i32));
        response.brokers = cluster
            .endpoints()
            .into_iter()
            .enumerate()
            .filter(|(id, _)| !cluster.brokers[*id].fenced.load(Ordering::Acquire))
            .map(|(id, (host, port))| {
                let mut b = MetadataResponseBroker::default();
                b.node_id = BrokerId(id as i32);
                b.host = StrBytes::from_string(host);
                b.port = port;
                b
            })
            .collect();
        // What a client may do, if it asks (v8 on; the cluster's until
        // v10, DescribeCluster's since): everything, with no authorizer.
        // Kafka tells it for each topic named in the answer, found or not,
        // but not for a topic id it does not know.
        let topic_operations = version >= 8 && r.include_topic_authorized_operations;
        response.cluster_authorized_operations = allowed::if_asked(
            (8..=10).contains(&version) && r.include_cluster_authorized_operations,
            allowed::CLUSTER,
        );
        response.topics = topics
            .into_iter()
            .map(|t| {
                let mut out = MetadataResponseTopic::default();
                match t {
                    Err((name, id, error)) => {
                        out.topic_authorized_operations =
                            allowed::if_asked(topic_operations && name.is_some(), allowed::TOPIC);
                        out.name = name.as_deref().map(topic_name);
                        out.topic_id = id;
                        out.error_code = error;
                    }
                    Ok(topic) => {
                        out.name = Some(topic_name(&topic.name));
                        out.topic_id = topic.id;
                        out.topic_authorized_operations =
                            allowed::if_asked(topic_operations, allowed::TOPIC);
                        out.partitions = topic
                            .partitions
                            .iter()
                            .map(|p| self.partition_metadata(p))
                            .collect();
                    }
                }
                out
            })
            .collect();
        response
    }

    pub(crate) fn partition_metadata(&self, p: &Partition) -> MetadataResponsePartition {
        let log = p.log.lock();
        let ids = |v: &[u32]| v.iter().map(|&b| BrokerId(b as i32)).collect::<Vec<_>>();
        let mut out = MetadataResponsePartition::default();
        out.partition_index = p.index;
        out.leader_id = BrokerId(log.leader.map_or(-1, |l| l as i32));
        out.leader_epoch = log.epoch;
        out.replica_nodes = ids(&log.replicas);
        out.isr_nodes = ids(&log.isr);
        let offline: Vec<u32> = log
            .replicas
            .iter()
            .copied()
            .filter(|&b| {
                self.cluster.brokers[b as usize]
                    .fenced
                    .load(Ordering::Acquire)
            })
            .collect();
        out.offline_replicas = ids(&offline);
        if log.leader.is_none() {
            out.error_code = code(ResponseError::LeaderNotAvailable);
        }
        out
    }

    fn list_offsets(&self, r: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
        Checks::bump(&self.checks().list_offsets_requests);
        let committed_only = r.isolation_level == 1;
        // A partition asked for twice is answered INVALID_REQUEST each
        // time, as Kafka answers it (its `duplicatePartitions`).
        let mut asked = HashSet::new();
        let twice: HashSet<(&str, i32)> = (r.topics.iter())
            .flat_map(|t| t.partitions.iter().map(|q| (&*t.name.0, q.partition_index)))
            .filter(|&at| !asked.insert(at))
            .collect();
        let mut response = ListOffsetsResponse::default();
        response.topics = (r.topics.iter())
            .map(|t| {
                let mut out = ListOffsetsTopicResponse::default();
                out.partitions = (t.partitions.iter())
                    .map(|q| {
                        if twice.contains(&(&*t.name.0, q.partition_index)) {
                            let mut a = no_offset(q.partition_index);
                            a.error_code = code(ResponseError::InvalidRequest);
                            a
                        } else {
                            self.list_offset(&t.name.0, q, committed_only, version)
                        }
                    })
                    .collect();
                out.name = t.name.clone();
                out
            })
            .collect();
        response
    }

    /// One partition's answer to a ListOffsets.
    fn list_offset(
        &self,
        topic: &str,
        q: &ListOffsetsPartition,
        committed_only: bool,
        version: i16,
    ) -> ListOffsetsPartitionResponse {
        let mut a = no_offset(q.partition_index);
        let p = match self.partition(topic, q.partition_index) {
            Ok(p) => p,
            Err(e) => {
                a.error_code = e;
                return a;
            }
        };
        let log = p.log.lock();
        if let Err(e) = self.leads(&log, q.current_leader_epoch) {
            a.error_code = e;
            return a;
        }
        let found = match q.timestamp {
            // Earliest, and (v8) the earliest kept locally: one log here,
            // no tiered storage.
            -2 => Some((log.log_start, -1)),
            -4 if version >= 8 => Some((log.log_start, -1)),
            // The last tiered offset (v9): nothing is tiered, "no offset".
            -5 if version >= 9 => None,
            // Latest: the high watermark, or the last stable offset for a
            // reader of committed records.
            -1 => Some((log.read_limit(committed_only), -1)),
            -3 if version >= 7 => log.offset_of_max_timestamp(),
            t if t >= 0 => log.offset_for_timestamp(t),
            _ => {
                a.error_code = code(ResponseError::InvalidRequest);
                None
            }
        };
        // None: "no such offset" (-1, -1).
        if let Some((offset, timestamp)) = found {
            a.offset = offset;
            a.timestamp = timestamp;
            // v4 and later carry it; earlier ones must leave it unset.
            if version >= 4 {
                a.leader_epoch = found_epoch(&log, q.timestamp, offset);
            }
        }
        a
    }

    /// A produce, counted against `client`'s byte-rate quota (the bytes
    /// of its batches, stored or refused). Kafka counts them as it
    /// answers, and reads nothing from the connection before that; this
    /// front reads on while a produce is parked, so they are counted as
    /// the produce comes, and a throttle stops the reading at once.
    async fn produce(
        &self,
        r: ProduceRequest,
        version: i16,
        client: Client<'_>,
        throttle: Throttle,
    ) -> Answer {
        let bytes: u64 = (r.topic_data.iter())
            .flat_map(|t| t.partition_data.iter())
            .map(|p| p.records.as_ref().map_or(0, |b| b.len() as u64))
            .sum();
        let throttled = self.throttled_for(Quota::Produce, client, bytes);
        throttle.mute(throttled);
        let mut response = self.produce_response(r, version).await;
        if let Some(r) = &mut response {
            r.throttle_time_ms = millis(throttled);
        }
        Answer {
            response: response.map(ResponseKind::Produce),
            hold: if holds_answer(ApiKey::Produce, version) {
                throttled
            } else {
                Duration::ZERO
            },
        }
    }

    async fn produce_response(&self, r: ProduceRequest, version: i16) -> Option<ProduceResponse> {
        let checks = Arc::clone(&self.cluster.checks);
        Checks::bump(&checks.produce_requests);
        let acks = r.acks;
        let valid_acks = matches!(acks, -1..=1);
        // Each topic's partitions with their base offset or error, in
        // request order.
        let mut answers: Vec<(TopicName, Uuid, Vec<PartitionAnswer>)> = Vec::new();
        let mut parked: Vec<ProducePart> = Vec::new();
        let mut moved = Vec::new();
        for topic in r.topic_data {
            // From v13 a topic is named by its id, and answered by it.
            let name = if version >= 13 {
                let found = self.cluster.topic_by_id(topic.topic_id);
                found
                    .map(|t| topic_name(&t.name))
                    .ok_or(code(ResponseError::UnknownTopicId))
            } else {
                Ok(topic.name)
            };
            let mut parts = Vec::new();
            for data in topic.partition_data {
                let result = match &name {
                    _ if !valid_acks => Err(code(ResponseError::InvalidRequiredAcks).into()),
                    Err(e) => Err((*e).into()),
                    Ok(name) => self.append(
                        &name.0,
                        data.index,
                        (data.records, version),
                        acks,
                        &mut parked,
                        &mut moved,
                    ),
                };
                parts.push((data.index, result));
            }
            answers.push((name.unwrap_or_default(), topic.topic_id, parts));
        }
        // The leader's own append may have moved a high watermark (a
        // partition with no followers in sync): parked fetches may complete.
        self.cluster.check_moved(moved);
        if acks == 0 {
            return None;
        }
        if acks == -1 && !parked.is_empty() {
            let timeout = Duration::from_millis(u64::try_from(r.timeout_ms).unwrap_or(0));
            for part in &self.replicated(parked, timeout).await {
                let error = part.error.unwrap_or(code(ResponseError::RequestTimedOut));
                if error == 0 {
                    let hw = part.partition.log.lock().hw;
                    if hw < part.required {
                        Checks::bump(&checks.acked_below_hw);
                    }
                    checks
                        .acked_records
                        .fetch_add((part.required - part.base) as u64, Ordering::Relaxed);
                }
                let answer = answers
                    .iter_mut()
                    .find(|(t, ..)| *t.0 == *part.partition.topic)
                    .and_then(|(.., ps)| ps.iter_mut().find(|(i, _)| *i == part.partition.index));
                // Success keeps what the append answered.
                if let Some((_, slot)) = answer.filter(|_| error != 0) {
                    *slot = Err(error.into());
                }
            }
        }
        let mut response = ProduceResponse::default();
        let mut hints = LeaderHints::new(self);
        response.responses = answers
            .into_iter()
            .map(|(name, id, parts)| {
                let mut t = TopicProduceResponse::default();
                t.partition_responses = parts
                    .into_iter()
                    .map(|(index, result)| {
                        let mut p = PartitionProduceResponse::default();
                        p.index = index;
                        p.log_append_time_ms = -1;
                        match result {
                            Ok(written) => {
                                p.base_offset = written.base;
                                p.log_append_time_ms = written.log_append_time;
                                p.log_start_offset = written.log_start;
                            }
                            Err(e) => {
                                Checks::bump(&checks.produce_errors);
                                p.error_code = e.code;
                                p.base_offset = -1;
                                if version >= 8 {
                                    p.record_errors = (e.records.iter())
                                        .map(|&(i, why)| {
                                            let mut r = produce_response::BatchIndexAndErrorMessage::default();
                                            r.batch_index = i;
                                            r.batch_index_error_message =
                                                Some(StrBytes::from_static_str(why));
                                            r
                                        })
                                        .collect();
                                    p.error_message = e.message.map(|m| match m {
                                        Cow::Borrowed(m) => StrBytes::from_static_str(m),
                                        Cow::Owned(m) => StrBytes::from_string(m),
                                    });
                                }
                            }
                        }
                        if version >= leader_hints::PRODUCE_V
                            && leader_hints::produce_hinted(p.error_code)
                        {
                            let (leader, epoch) = hints.leader_of(&name.0, index);
                            p.current_leader.leader_id = BrokerId(leader);
                            p.current_leader.leader_epoch = epoch;
                        }
                        p
                    })
                    .collect();
                t.name = name;
                t.topic_id = id;
                t
            })
            .collect();
        response.node_endpoints = node_endpoints!(hints, produce_response::NodeEndpoint);
        Some(response)
    }

    /// Waits in the produce purgatory until every in-sync replica has each
    /// of `parts` (as an `acks=all` produce does), or `timeout` passes, or
    /// leadership moves: each part comes back, in the order given, with its
    /// error set, 0 once replicated.
    pub(crate) async fn replicated(
        &self,
        parts: Vec<ProducePart>,
        timeout: Duration,
    ) -> Vec<ProducePart> {
        let checks = &self.cluster.checks;
        let parked_at = Instant::now();
        let keys: Vec<u32> = parts.iter().map(|p| p.partition.key).collect();
        let op = WireProduce {
            broker: self.id,
            parts,
            timeout,
            outcome: None,
            checks: Arc::clone(checks),
        };
        let purgatory = &self.cluster.brokers[self.id as usize].produce;
        match purgatory.try_complete_else_watch(op, &keys) {
            Ok(handle) => {
                Checks::bump(&checks.parked);
                let done = handle.await;
                self.check_outcome(done.outcome, parked_at, timeout);
                done.operation.parts
            }
            Err(refused) => {
                let mut op = refused.into_operation();
                for part in &mut op.parts {
                    part.error = Some(code(ResponseError::NotLeaderOrFollower));
                }
                op.parts
            }
        }
    }

    /// Appends one partition's batch (from a Produce of the version given
    /// with it) on this broker as leader; an `acks=all` append joins
    /// `parked`.
    fn append(
        &self,
        topic: &str,
        index: i32,
        (records, version): (Option<Bytes>, i16),
        acks: i16,
        parked: &mut Vec<ProducePart>,
        moved: &mut Vec<Arc<Partition>>,
    ) -> Result<Written, Refused> {
        let p = self.partition(topic, index)?;
        // Kafka checks the framing before it asks for the partition's
        // leader.
        produce_framing::check(version, records.as_deref()).map_err(code)?;
        let records = records.unwrap_or_default();
        // A transactional producer's batches go in only while its
        // transaction holds the partition, and the transaction cannot end
        // (its marker be written) until they are in.
        let (appended, followers, hw_moved) = match transactional_producer(&records) {
            Some((producer_id, epoch)) => {
                self.cluster
                    .txns
                    .append_in(producer_id, epoch, p.key, || {
                        self.append_locked(&p, &records, acks, Some((producer_id, epoch)))
                    })??
            }
            None => self.append_locked(&p, &records, acks, None)?,
        };
        let Appended { base, end, .. } = appended;
        if !followers.is_empty() {
            self.cluster.replicate_later(&p, &followers, end);
        }
        if hw_moved {
            moved.push(Arc::clone(&p));
        }
        if acks == -1 {
            parked.push(ProducePart {
                partition: p,
                base,
                required: end,
                error: None,
            });
        }
        Ok(Written {
            base,
            log_append_time: appended.log_append_time.unwrap_or(-1),
            log_start: appended.log_start,
        })
    }

    /// The append itself, under the partition's lock: where it went, the
    /// followers to send it to, and whether the high watermark moved.
    fn append_locked(
        &self,
        p: &Partition,
        records: &Bytes,
        acks: i16,
        txn: Option<(i64, i16)>,
    ) -> Result<(Appended, Vec<u32>, bool), Refused> {
        {
            let mut log = p.log.lock();
            if log.deleted {
                return Err(code(ResponseError::UnknownTopicOrPartition).into());
            }
            if log.leader != Some(self.id) {
                return Err(code(ResponseError::NotLeaderOrFollower).into());
            }
            let cfg = &self.cluster.cfg;
            if acks == -1 && log.isr.len() < log.effective_min_insync() {
                return Err(code(ResponseError::NotEnoughReplicas).into());
            }
            let hw = log.hw;
            let rules = AppendRules {
                max_bytes: p.config.max_message_bytes(cfg.message_max_bytes),
                // A LogAppendTime topic's batches carry this append's time.
                stamp: p.config.log_append_time().then(now_ms),
                keys_required: p.config.compacts(),
                compression: p.config.compression().map(|codec| Target {
                    codec,
                    level: p.config.compression_level(codec),
                }),
                timestamps: p.config.timestamp_window(now_ms),
            };
            let appended = log.append(records, &rules, txn).map_err(|e| match e {
                AppendError::Records(records) => Refused::from(records),
                AppendError::Corrupt => code(ResponseError::CorruptMessage).into(),
                AppendError::TooLarge => code(ResponseError::MessageTooLarge).into(),
                AppendError::OutOfOrderSequence => {
                    code(ResponseError::OutOfOrderSequenceNumber).into()
                }
                AppendError::InvalidProducerEpoch => {
                    code(ResponseError::InvalidProducerEpoch).into()
                }
                AppendError::Transactional => code(ResponseError::InvalidTxnState).into(),
                AppendError::Control | AppendError::NoSequence => {
                    code(ResponseError::InvalidRecord).into()
                }
            })?;
            if appended.duplicate {
                Checks::bump(&self.checks().duplicates);
            } else if retention_moved(p, &mut log, cfg) {
                // The followers learn the new log start with this batch.
                Checks::bump(&self.checks().retention_deletions);
            }
            // A resent batch adds nothing to replicate.
            let followers: Vec<u32> = if appended.duplicate {
                Vec::new()
            } else {
                log.followers()
            };
            Ok((appended, followers, log.hw != hw))
        }
    }

    /// A fetch for `client`, whose byte-rate quota caps what one answer
    /// may hold and may throttle it.
    async fn fetch(
        &self,
        r: FetchRequest,
        version: i16,
        client: Client<'_>,
        throttle: Throttle,
    ) -> Answer {
        let (response, throttled) = self.fetch_response(r, version, client).await;
        throttle.mute(throttled);
        Answer {
            response: Some(ResponseKind::Fetch(response)),
            hold: if holds_answer(ApiKey::Fetch, version) {
                throttled
            } else {
                Duration::ZERO
            },
        }
    }

    async fn fetch_response(
        &self,
        r: FetchRequest,
        version: i16,
        client: Client<'_>,
    ) -> (FetchResponse, Duration) {
        let checks = Arc::clone(&self.cluster.checks);
        Checks::bump(&checks.fetch_requests);
        let max_bytes = self.fetch_cap(client, r.max_bytes);
        let max_wait = Duration::from_millis(u64::try_from(r.max_wait_ms).unwrap_or(0));
        let min_bytes = u64::try_from(r.min_bytes)
            .unwrap_or(0)
            .min(max_bytes as u64);
        let sessions = &self.cluster.brokers[self.id as usize].fetch_sessions;
        let (context, asked) = match sessions.begin(&r, version) {
            Ok(begun) => begun,
            Err(error) => {
                let mut response = FetchResponse::default();
                response.error_code = error;
                return (response, Duration::ZERO);
            }
        };
        // Valid partitions wait; the others are answered with their error,
        // or with where the log diverged from what the client read.
        let mut parts = Vec::new();
        let mut unread: Vec<((TopicName, Uuid), i32, Unread)> = Vec::new();
        // From v13 topics are named by id (KIP-516), and answered by id.
        let by_id = version >= 13;
        let mut ids: Vec<(Arc<str>, Uuid)> = Vec::new();
        // The partitions asked for: named in this fetch, or (an incremental
        // fetch) those of its session.
        for (part, at) in &asked {
            let name = if by_id {
                let found = self.cluster.topic_by_id(part.topic_id);
                if let Some(t) = &found {
                    if !ids.iter().any(|(_, id)| *id == t.id) {
                        ids.push((Arc::clone(&t.name), t.id));
                    }
                }
                found
                    .map(|t| topic_name(&t.name))
                    .ok_or(code(ResponseError::UnknownTopicId))
            } else {
                Ok(part.topic.clone())
            };
            let checked = name
                .clone()
                .and_then(|name| self.partition(&name.0, part.partition))
                .map_err(Unread::error);
            let checked = checked.and_then(|p| {
                // As Kafka answers a client older than zstd (Fetch v10)
                // that reads a topic stored in it.
                if version < 10 && p.config.compression() == Some(topic_config::ZSTD) {
                    return Err(Unread::error(code(
                        ResponseError::UnsupportedCompressionType,
                    )));
                }
                let log = p.log.lock();
                self.leads(&log, at.leader_epoch).map_err(Unread::error)?;
                let diverging = leader_epochs::diverging(
                    &log.epochs,
                    at.last_fetched_epoch,
                    at.offset,
                    log.log_start,
                    log.log_end(),
                )
                .map_err(|e| Unread::error(code(e)))?;
                if diverging.is_some() {
                    return Err(Unread {
                        error: 0,
                        told: (log.hw, log.last_stable(), log.log_start),
                        diverging,
                    });
                }
                if at.offset < log.log_start || at.offset > log.log_end() {
                    return Err(Unread::error(code(ResponseError::OffsetOutOfRange)));
                }
                drop(log);
                Ok(p)
            });
            match checked {
                Ok(p) => parts.push(FetchPart {
                    partition: p,
                    offset: at.offset,
                    max_bytes: usize::try_from(at.max_bytes).unwrap_or(0),
                    committed_only: r.isolation_level == 1,
                    error: 0,
                    records: Bytes::new(),
                    hw: 0,
                    last_stable: 0,
                    log_start: 0,
                    aborted: Vec::new(),
                }),
                Err(u) => {
                    let name = name.clone().unwrap_or_default();
                    unread.push(((name, part.topic_id), part.partition, u));
                }
            }
        }
        // Not kept while the fetch is parked.
        drop(asked);
        let parked_at = Instant::now();
        let mut woken_at = None;
        // As Kafka: an error or a divergence anywhere, or nothing to wait
        // for, answers now.
        let at_once = !unread.is_empty() || parts.is_empty() || max_wait.is_zero();
        let keys: Vec<u32> = parts.iter().map(|p| p.partition.key).collect();
        let op = WireFetch {
            broker: self.id,
            parts,
            min_bytes: if at_once { 0 } else { min_bytes },
            max_bytes,
            max_wait,
            outcome: None,
            readable_since: None,
            checks: Arc::clone(&checks),
        };
        let purgatory = &self.cluster.brokers[self.id as usize].fetch;
        let done = if keys.is_empty() {
            op
        } else {
            match purgatory.try_complete_else_watch(op, &keys) {
                Ok(handle) => {
                    Checks::bump(&checks.parked);
                    let done = handle.await;
                    self.check_outcome(done.outcome, parked_at, max_wait);
                    let op = done.operation;
                    let errored = op.parts.iter().any(|p| p.error != 0);
                    if done.outcome == Outcome::Completed
                        && !errored
                        && fetched_bytes(&op.parts) < op.min_bytes
                        && parked_at.elapsed() < max_wait
                    {
                        Checks::bump(&checks.fetch_early);
                    }
                    // Woken by data that came while it was parked (data
                    // there at submission answered it at once).
                    woken_at = op.readable_since.filter(|&at| at >= parked_at);
                    op
                }
                Err(refused) => {
                    let mut op = refused.into_operation();
                    for p in &mut op.parts {
                        p.error = code(ResponseError::NotLeaderOrFollower);
                    }
                    op
                }
            }
        };
        // Over its request time already, or over its byte rate with
        // these records.
        let throttle = match self.request_time_over(client) {
            over if over.is_zero() => {
                self.throttled_for(Quota::Fetch, client, fetched_bytes(&done.parts))
            }
            over => over,
        };
        if !throttle.is_zero() {
            // As Kafka answers a throttled fetch: with nothing, and what
            // it would have carried not counted. A session it opened is
            // not kept; one it continued has moved to its next epoch.
            let mut response = FetchResponse::default();
            response.throttle_time_ms = millis(throttle);
            response.session_id = match context {
                Context::Incremental(id) => id,
                Context::Full(id) => {
                    sessions.forget(id);
                    0
                }
                Context::Sessionless => 0,
            };
            return (response, throttle);
        }
        let mut response = FetchResponse::default();
        let mut hints = LeaderHints::new(self);
        response.session_id = context.session_id();
        let committed_only = r.isolation_level == 1;
        let answered = done.parts.into_iter().map(|p| {
            let aborted = p.aborted.iter().map(|a| {
                let mut t = AbortedTransaction::default();
                t.producer_id = ProducerId(a.producer_id);
                t.first_offset = a.first;
                t
            });
            let id = ids
                .iter()
                .find(|(name, _)| *name == p.partition.topic)
                .map_or(Uuid::nil(), |(_, id)| *id);
            (
                (topic_name(&p.partition.topic), id),
                p.partition.index,
                p.error,
                (p.hw, p.last_stable, p.log_start),
                p.records,
                aborted.collect(),
                None,
            )
        });
        let unread = unread
            .into_iter()
            .map(|(t, i, u)| (t, i, u.error, u.told, Bytes::new(), Vec::new(), u.diverging));
        for (topic, index, error, (hw, last_stable, log_start), records, aborted, diverging) in
            answered.chain(unread)
        {
            // In a session, only what is new (a fetch with none answers all).
            if context != Context::Sessionless {
                // The partition as the request named it: by id from v13.
                let asked = Asked {
                    topic: if by_id {
                        TopicName::default()
                    } else {
                        topic.0.clone()
                    },
                    topic_id: if by_id { topic.1 } else { Uuid::nil() },
                    partition: index,
                };
                let told = Told {
                    high_watermark: hw,
                    last_stable,
                    log_start,
                };
                let must = !records.is_empty() || diverging.is_some();
                if !sessions.answer(context, &asked, told, must, error) {
                    continue;
                }
            }
            let mut d = PartitionData::default();
            d.partition_index = index;
            d.error_code = error;
            d.high_watermark = hw;
            d.last_stable_offset = last_stable;
            d.log_start_offset = if error == 0 { log_start } else { -1 };
            // For a reader of committed records, the aborted transactions
            // its records meet; none is listed to other readers.
            d.aborted_transactions = committed_only.then_some(aborted);
            d.preferred_read_replica = BrokerId(-1);
            d.records = Some(records);
            if let Some((epoch, end)) = diverging {
                d.diverging_epoch.epoch = epoch;
                d.diverging_epoch.end_offset = end;
            }
            let (name, id) = topic;
            if version >= leader_hints::FETCH_V && leader_hints::fetch_hinted(error) {
                let (leader, epoch) = hints.leader_of(&name.0, index);
                d.current_leader.leader_id = BrokerId(leader);
                d.current_leader.leader_epoch = epoch;
            }
            let same = |t: &&mut FetchableTopicResponse| t.topic == name && t.topic_id == id;
            match response.responses.iter_mut().find(same) {
                Some(t) => t.partitions.push(d),
                None => {
                    let mut t = FetchableTopicResponse::default();
                    t.topic = name;
                    t.topic_id = id;
                    t.partitions.push(d);
                    response.responses.push(t);
                }
            }
        }
        response.node_endpoints = node_endpoints!(hints, fetch_response::NodeEndpoint);
        if let Some(at) = woken_at {
            checks.fetch_wakeups.record(at.elapsed());
        }
        (response, Duration::ZERO)
    }

    /// Counts an outcome, and flags an expiry before its timeout.
    pub(crate) fn check_outcome(&self, outcome: Outcome, parked_at: Instant, timeout: Duration) {
        let checks = self.checks();
        Checks::bump(match outcome {
            Outcome::Completed => &checks.completed,
            Outcome::Expired => &checks.expired,
            Outcome::Cancelled => &checks.cancelled,
            Outcome::Shutdown => &checks.shut_down,
        });
        if outcome == Outcome::Expired && parked_at.elapsed() < timeout {
            Checks::bump(&checks.expired_early);
        }
    }
}

/// Applies `p`'s retentions to its `log` after an append (`cfg`: the
/// broker's, for a topic that sets none); whether the log start moved.
fn retention_moved(p: &Partition, log: &mut PartitionLog, cfg: &LiveConfig) -> bool {
    let Some((by_size, by_age)) = p.config.retentions(cfg.retention_bytes, cfg.retention_ms) else {
        return false;
    };
    // The clock only for a topic that keeps records by age.
    let now = by_age.map_or(0, |_| now_ms());
    log.apply_retention(by_size, by_age, now).is_some()
}

/// A partition a fetch answers without reading it, at once: with its
/// error, or (error 0) with where its log diverged from what the client
/// read (the epoch and its end offset; see `leader_epochs::diverging`).
struct Unread {
    error: i16,
    /// The high watermark, last stable offset and log start offset told
    /// (-1 each with an error).
    told: (i64, i64, i64),
    diverging: Option<(i32, i64)>,
}

impl Unread {
    fn error(code: i16) -> Self {
        Unread {
            error: code,
            told: (-1, -1, -1),
            diverging: None,
        }
    }
}
