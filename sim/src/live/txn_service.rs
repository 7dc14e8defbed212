//! The broker side of the transaction APIs: InitProducerId with a
//! transactional id, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn on the
//! cluster's [`TxnCoordinator`](super::txns::TxnCoordinator), served by the
//! broker a transactional id maps to, and TxnOffsetCommit at the group's
//! coordinator.

use super::checks::Checks;
use super::group_service::every_partition_answered;
use super::groups::{CommittedOffset, Offsets};
use super::service::BrokerService;
use super::txns::MAX_TIMEOUT;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
    InitProducerIdResponse, ProducerId, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use std::time::Duration;

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// What a fenced producer is told: PRODUCER_FENCED from the versions that
/// know it (`since`), INVALID_PRODUCER_EPOCH before, as Kafka answers.
fn fenced(version: i16, since: i16) -> i16 {
    if version >= since {
        code(ResponseError::ProducerFenced)
    } else {
        code(ResponseError::InvalidProducerEpoch)
    }
}

impl BrokerService {
    /// NOT_COORDINATOR unless this broker coordinates transactional id `id`
    /// (COORDINATOR_NOT_AVAILABLE while no broker can).
    fn coordinates_txn(&self, id: &str) -> Result<(), i16> {
        self.is_coordinator(self.cluster.txn_coordinator(id))
    }

    /// InitProducerId for a transactional producer (see
    /// [`TxnCoordinator::init_producer`](super::txns::TxnCoordinator::init_producer)).
    pub(crate) fn init_transactional_producer(
        &self,
        r: &InitProducerIdRequest,
        id: &str,
        version: i16,
    ) -> InitProducerIdResponse {
        let mut response = InitProducerIdResponse::default();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        let timeout = Duration::from_millis(u64::try_from(r.transaction_timeout_ms).unwrap_or(0));
        let error = if id.is_empty() {
            // An empty one is malformed, as Kafka's coordinator says.
            Err(code(ResponseError::InvalidRequest))
        } else if timeout.is_zero() || timeout > MAX_TIMEOUT {
            Err(code(ResponseError::InvalidTransactionTimeout))
        } else {
            self.coordinates_txn(id)
        };
        if let Err(e) = error {
            response.error_code = e;
            return response;
        }
        let expected =
            (version >= 3 && r.producer_id.0 >= 0).then_some((r.producer_id.0, r.producer_epoch));
        let (result, written) = self.cluster.txns.init_producer(
            &self.cluster,
            id,
            timeout,
            expected,
            fenced(version, 4),
        );
        self.cluster.replicate_markers(written);
        match result {
            Ok((producer_id, epoch)) => {
                response.producer_id = ProducerId(producer_id);
                response.producer_epoch = epoch;
            }
            Err(e) => response.error_code = e,
        }
        response
    }

    pub(crate) fn add_partitions_to_txn(
        &self,
        r: AddPartitionsToTxnRequest,
        version: i16,
    ) -> AddPartitionsToTxnResponse {
        Checks::bump(&self.checks().txn_requests);
        let id = r.v3_and_below_transactional_id.0.to_string();
        // Every partition must exist: if one does not, none is added and
        // the others are told so.
        let mut found = Vec::new();
        let mut unknown = Vec::new();
        for t in &r.v3_and_below_topics {
            for &i in &t.partitions {
                match self.partition(&t.name.0, i) {
                    Ok(p) if !p.log.lock().deleted => found.push(p),
                    _ => unknown.push((t.name.0.to_string(), i)),
                }
            }
        }
        let error = self.coordinates_txn(&id).and_then(|()| {
            if unknown.is_empty() {
                let producer = (r.v3_and_below_producer_id.0, r.v3_and_below_producer_epoch);
                self.cluster.txns.add_partitions(
                    &self.cluster,
                    &id,
                    producer,
                    fenced(version, 2),
                    found,
                )
            } else {
                Err(code(ResponseError::OperationNotAttempted))
            }
        });
        let mut response = AddPartitionsToTxnResponse::default();
        response.results_by_topic_v3_and_below = r
            .v3_and_below_topics
            .iter()
            .map(|t| {
                let mut out = AddPartitionsToTxnTopicResult::default();
                out.name = t.name.clone();
                out.results_by_partition = t
                    .partitions
                    .iter()
                    .map(|&i| {
                        let mut p = AddPartitionsToTxnPartitionResult::default();
                        p.partition_index = i;
                        p.partition_error_code = if unknown.contains(&(t.name.0.to_string(), i)) {
                            code(ResponseError::UnknownTopicOrPartition)
                        } else {
                            error.err().unwrap_or(0)
                        };
                        p
                    })
                    .collect();
                out
            })
            .collect();
        response
    }

    pub(crate) fn add_offsets_to_txn(
        &self,
        r: AddOffsetsToTxnRequest,
        version: i16,
    ) -> AddOffsetsToTxnResponse {
        Checks::bump(&self.checks().txn_requests);
        let id = r.transactional_id.0.as_str();
        let error = self.coordinates_txn(id).and_then(|()| {
            self.cluster.txns.add_group(
                &self.cluster,
                id,
                (r.producer_id.0, r.producer_epoch),
                fenced(version, 2),
                &r.group_id.0,
            )
        });
        let mut response = AddOffsetsToTxnResponse::default();
        response.error_code = error.err().unwrap_or(0);
        response
    }

    pub(crate) fn end_txn(&self, r: EndTxnRequest, version: i16) -> EndTxnResponse {
        Checks::bump(&self.checks().txn_requests);
        let id = r.transactional_id.0.as_str();
        let mut response = EndTxnResponse::default();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        if let Err(e) = self.coordinates_txn(id) {
            response.error_code = e;
            return response;
        }
        let (result, written) = self.cluster.txns.end_txn(
            &self.cluster,
            id,
            (r.producer_id.0, r.producer_epoch),
            fenced(version, 2),
            r.committed,
        );
        self.cluster.replicate_markers(written);
        response.error_code = result.err().unwrap_or(0);
        response
    }

    /// Offsets committed inside a transaction: held apart in the group
    /// until the transaction ends (see
    /// [`GroupCoordinator::end_txn_offsets`](super::groups::GroupCoordinator::end_txn_offsets)).
    /// The transaction must be ongoing with the group added to it; from
    /// v3 a member of the group's current generation is checked as an
    /// OffsetCommit's is.
    pub(crate) fn txn_offset_commit(
        &self,
        r: TxnOffsetCommitRequest,
        version: i16,
    ) -> TxnOffsetCommitResponse {
        Checks::bump(&self.checks().txn_requests);
        let group_id = r.group_id.0.as_str();
        let error = self
            .is_coordinator(self.cluster.group_coordinator(group_id))
            .and_then(|()| {
                let offsets: Offsets = r
                    .topics
                    .iter()
                    .flat_map(|t| {
                        t.partitions.iter().map(|p| {
                            (
                                (t.name.0.to_string(), p.partition_index),
                                CommittedOffset {
                                    offset: p.committed_offset,
                                    leader_epoch: p.committed_leader_epoch,
                                    metadata: p.committed_metadata.as_deref().map(str::to_string),
                                },
                            )
                        })
                    })
                    .collect();
                let member = (version >= 3 && r.generation_id >= 0).then(|| {
                    (
                        r.member_id.to_string(),
                        r.group_instance_id.as_ref().map(|i| i.to_string()),
                        r.generation_id,
                    )
                });
                self.cluster.txns.commit_offsets(
                    &self.cluster,
                    (r.producer_id.0, r.producer_epoch),
                    group_id,
                    member,
                    offsets,
                )
            });
        let error = error.err().unwrap_or(0);
        let mut response = TxnOffsetCommitResponse::default();
        response.topics = every_partition_answered!(
            r.topics,
            TxnOffsetCommitResponseTopic,
            TxnOffsetCommitResponsePartition,
            error
        );
        response
    }
}
