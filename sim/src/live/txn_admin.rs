//! The transaction admin APIs, with which an operator finds a hanging
//! transaction (Kafka's `kafka-transactions.sh`, kafka-python's
//! `list_transactions`, `describe_transactions`, `describe_producers`):
//! ListTransactions lists the transactional ids a broker coordinates,
//! DescribeTransactions describes one at its coordinator, and
//! DescribeProducers gives each partition's producers as its leader keeps
//! them, with the offset where each one's open transaction began.

use super::checks::Checks;
use super::service::BrokerService;
use super::txns::{TxnView, STATE_NAMES};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::describe_transactions_response::{self, TopicData};
use kafka_protocol::messages::list_transactions_response;
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, DescribeTransactionsRequest,
    DescribeTransactionsResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;

use super::log::now_ms;

impl BrokerService {
    /// The transactional ids this broker coordinates that pass every
    /// filter given, as Kafka's coordinator lists them: by state name
    /// (names Kafka does not define are answered back as unknown), by
    /// producer id, and (v1) those begun more than `duration_filter` ms
    /// ago.
    pub(crate) fn list_transactions(&self, r: ListTransactionsRequest) -> ListTransactionsResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = ListTransactionsResponse::default();
        let states: Vec<&str> = r.state_filters.iter().map(|s| s.as_str()).collect();
        response.unknown_state_filters = (r.state_filters.iter())
            .filter(|s| !STATE_NAMES.contains(&s.as_str()))
            .cloned()
            .collect();
        let now = now_ms();
        let passes = |t: &TxnView| {
            (r.producer_id_filters.is_empty()
                || r.producer_id_filters.contains(&ProducerId(t.producer_id)))
                && (states.is_empty() || states.contains(&t.state.name()))
                && (r.duration_filter < 0 || now.saturating_sub(t.started_ms) > r.duration_filter)
        };
        let cluster = &self.cluster;
        let mine = |id: &str| cluster.txn_coordinator(id) == Some(self.id);
        response.transaction_states = (cluster.txns.views_where(mine).iter())
            .filter(|t| passes(t))
            .map(|t| {
                let mut state = list_transactions_response::TransactionState::default();
                state.transactional_id = transactional_id(&t.transactional_id);
                state.producer_id = ProducerId(t.producer_id);
                state.transaction_state = StrBytes::from_static_str(t.state.name());
                state
            })
            .collect();
        response
    }

    /// Each transactional id asked, described by its coordinator:
    /// NOT_COORDINATOR from another broker, INVALID_REQUEST for an empty
    /// id, TRANSACTIONAL_ID_NOT_FOUND for one never initialised.
    pub(crate) fn describe_transactions(
        &self,
        r: DescribeTransactionsRequest,
    ) -> DescribeTransactionsResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = DescribeTransactionsResponse::default();
        response.transaction_states = (r.transactional_ids.into_iter())
            .map(|id| {
                let mut state = describe_transactions_response::TransactionState::default();
                let found = if id.is_empty() {
                    Err(ResponseError::InvalidRequest)
                } else if self.cluster.txn_coordinator(&id) != Some(self.id) {
                    Err(ResponseError::NotCoordinator)
                } else {
                    (self.cluster.txns.view(&id)).ok_or(ResponseError::TransactionalIdNotFound)
                };
                state.transactional_id = id;
                match found {
                    Err(e) => state.error_code = e.code(),
                    Ok(t) => {
                        state.transaction_state = StrBytes::from_static_str(t.state.name());
                        state.transaction_timeout_ms =
                            i32::try_from(t.timeout.as_millis()).unwrap_or(i32::MAX);
                        state.transaction_start_time_ms = t.started_ms;
                        state.producer_id = ProducerId(t.producer_id);
                        state.producer_epoch = t.epoch;
                        state.topics = topics_of(&t.partitions);
                    }
                }
                state
            })
            .collect();
        response
    }

    /// Each partition asked, from its leader: every producer with state
    /// there (its epoch, last sequence number, last batch's largest
    /// timestamp, the coordinator epoch of its last marker, and where its
    /// open transaction began, or -1). UNKNOWN_TOPIC_OR_PARTITION for a
    /// partition that does not exist, NOT_LEADER_OR_FOLLOWER at a broker
    /// that does not lead it (Kafka also answers at a follower; the
    /// followers here keep no producer state of their own).
    pub(crate) fn describe_producers(
        &self,
        r: DescribeProducersRequest,
    ) -> DescribeProducersResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = DescribeProducersResponse::default();
        response.topics = (r.topics.into_iter())
            .map(|asked| {
                let topic = self.cluster.topic(&asked.name.0);
                let mut answer = TopicResponse::default();
                answer.partitions = (asked.partition_indexes.iter())
                    .map(|&index| {
                        let mut p = PartitionResponse::default();
                        p.partition_index = index;
                        let partition = (topic.as_ref())
                            .and_then(|t| t.partitions.get(usize::try_from(index).ok()?));
                        let Some(partition) = partition else {
                            p.error_code = ResponseError::UnknownTopicOrPartition.code();
                            return p;
                        };
                        let log = partition.log.lock();
                        if log.deleted {
                            p.error_code = ResponseError::UnknownTopicOrPartition.code();
                        } else if log.leader != Some(self.id) {
                            p.error_code = ResponseError::NotLeaderOrFollower.code();
                        } else {
                            p.active_producers = (log.producers.active().iter())
                                .map(|a| {
                                    let mut state = ProducerState::default();
                                    state.producer_id = ProducerId(a.producer_id);
                                    state.producer_epoch = i32::from(a.epoch);
                                    state.last_sequence = a.last_sequence;
                                    state.last_timestamp = a.last_timestamp;
                                    state.coordinator_epoch = a.coordinator_epoch;
                                    state.current_txn_start_offset =
                                        log.txns.open_since(a.producer_id).unwrap_or(-1);
                                    state
                                })
                                .collect();
                        }
                        p
                    })
                    .collect();
                answer.name = asked.name;
                answer
            })
            .collect();
        response
    }
}

fn transactional_id(id: &Arc<str>) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_string()))
}

/// A transaction's partitions grouped by topic, in the order met.
fn topics_of(partitions: &[(Arc<str>, i32)]) -> Vec<TopicData> {
    let mut topics: Vec<TopicData> = Vec::new();
    for (topic, index) in partitions {
        match topics.iter_mut().find(|t| *t.topic.0 == **topic) {
            Some(t) => t.partitions.push(*index),
            None => {
                let mut t = TopicData::default();
                t.topic = TopicName(StrBytes::from_string(topic.to_string()));
                t.partitions = vec![*index];
                topics.push(t);
            }
        }
    }
    topics
}
