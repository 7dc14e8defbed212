//! WriteTxnMarkers as an operator sends it to abort a hanging transaction
//! (Kafka's `kafka-transactions.sh abort`, Java's `Admin.abortTransaction`,
//! kafka-python's `abort_transaction`): a marker for a producer id and
//! epoch, written to partitions this broker leads.
//!
//! Kafka's coordinators send the same request to end a transaction in
//! each partition; here the coordinator writes its markers itself (see
//! [`txns`](super::txns)), so the request comes from operators. A hanging
//! transaction is one a partition holds open while no coordinator will end
//! it (a partition written without being added, a coordinator's state
//! lost): its first record holds the last stable offset, so
//! `read_committed` consumers stop there. The operator finds it with
//! DescribeProducers (its producer id, epoch, coordinator epoch and first
//! offset) and aborts it with an ABORT marker at that epoch.
//!
//! Each partition's marker is checked as Kafka's leader checks one
//! (unknown partition, not the leader, too few replicas in sync, an older
//! producer epoch, an older coordinator epoch than the producer's last
//! marker there), appended, and answered once every in-sync replica has it:
//! the request waits in the produce purgatory as an `acks=all` produce
//! does, for at most Kafka's `request.timeout.ms` default.
//!
//! Differences from Kafka: the markers of a transaction's offsets (the
//! `__consumer_offsets` partitions) are answered UNKNOWN_TOPIC_OR_PARTITION,
//! since the groups keep their offsets without that topic; an operator's
//! marker cut off by a leader change before it was replicated (answered
//! NOT_LEADER_OR_FOLLOWER or REQUEST_TIMED_OUT) is written again at the new
//! leader, as a coordinator's is, while Kafka leaves the retry to the
//! operator; no ACL is enforced (Kafka asks for ALTER or CLUSTER_ACTION on
//! the cluster).

use super::checks::Checks;
use super::ops::ProducePart;
use super::producers::MarkerError;
use super::service::BrokerService;
use super::topics::Partition;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use std::sync::Arc;
use std::time::Duration;

/// How long a marker waits for its replicas: Kafka's `request.timeout.ms`
/// default, which its brokers give the markers they append.
const REPLICATION_TIMEOUT: Duration = Duration::from_secs(30);

/// One partition's marker: where it is answered in the response (the
/// producer's entry, the topic's), and its error once decided.
struct Written {
    producer: usize,
    topic: usize,
    index: i32,
    error: Option<i16>,
}

impl BrokerService {
    /// Writes each marker to each partition named with it, and answers
    /// each partition once its marker is replicated or refused. The
    /// answers are grouped by producer id, as Kafka's are.
    pub(crate) async fn write_txn_markers(
        &self,
        r: WriteTxnMarkersRequest,
    ) -> WriteTxnMarkersResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = WriteTxnMarkersResponse::default();
        let mut written: Vec<Written> = Vec::new();
        let mut parked: Vec<ProducePart> = Vec::new();
        let mut moved = Vec::new();
        for marker in &r.markers {
            let producer =
                match (response.markers.iter()).position(|m| m.producer_id == marker.producer_id) {
                    Some(at) => at,
                    None => {
                        let mut result = WritableTxnMarkerResult::default();
                        result.producer_id = marker.producer_id;
                        response.markers.push(result);
                        response.markers.len() - 1
                    }
                };
            for topic in &marker.topics {
                let topics = &mut response.markers[producer].topics;
                let at = match topics.iter().position(|t| t.name == topic.name) {
                    Some(at) => at,
                    None => {
                        let mut result = WritableTxnMarkerTopicResult::default();
                        result.name = topic.name.clone();
                        topics.push(result);
                        topics.len() - 1
                    }
                };
                for &index in &topic.partition_indexes {
                    let error = match self.write_marker(&topic.name, index, marker) {
                        Ok((part, hw_moved)) => {
                            if hw_moved {
                                moved.push(Arc::clone(&part.partition));
                            }
                            parked.push(part);
                            None
                        }
                        Err(e) => Some(e),
                    };
                    written.push(Written {
                        producer,
                        topic: at,
                        index,
                        error,
                    });
                }
            }
        }
        // A partition with no follower in sync has its marker below the
        // high watermark already: what waits on it may complete.
        self.cluster.check_moved(moved);
        if !parked.is_empty() {
            // The parts come back in the order they were parked, which is
            // that of the entries left undecided.
            let mut replicated = (self.replicated(parked, REPLICATION_TIMEOUT).await).into_iter();
            for w in written.iter_mut().filter(|w| w.error.is_none()) {
                let error = replicated.next().and_then(|p| p.error);
                w.error = Some(error.unwrap_or(ResponseError::RequestTimedOut.code()));
            }
        }
        for w in written {
            let mut p = WritableTxnMarkerPartitionResult::default();
            p.partition_index = w.index;
            p.error_code = w.error.unwrap_or(0);
            response.markers[w.producer].topics[w.topic]
                .partitions
                .push(p);
        }
        response
    }

    /// Appends `marker` to `topic`'s partition `index` if this broker
    /// leads it and the producer's state there allows it: the part to wait
    /// for, and whether the high watermark moved; or the error code.
    fn write_marker(
        &self,
        topic: &TopicName,
        index: i32,
        marker: &WritableTxnMarker,
    ) -> Result<(ProducePart, bool), i16> {
        let partition: Arc<Partition> = self.partition(&topic.0, index)?;
        let mut log = partition.log.lock();
        self.leads(&log, -1)?;
        if log.isr.len() < log.effective_min_insync() {
            return Err(ResponseError::NotEnoughReplicas.code());
        }
        let (hw, base) = (log.hw, log.log_end());
        let end = log
            .write_marker(
                marker.producer_id.0,
                marker.producer_epoch,
                marker.coordinator_epoch,
                marker.transaction_result,
            )
            .map_err(|e| match e {
                MarkerError::OldEpoch => ResponseError::InvalidProducerEpoch.code(),
                MarkerError::CoordinatorFenced => {
                    ResponseError::TransactionCoordinatorFenced.code()
                }
            })?;
        Checks::bump(&self.checks().markers_written);
        let followers = log.followers();
        let hw_moved = log.hw != hw;
        drop(log);
        if !followers.is_empty() {
            self.cluster.replicate_later(&partition, &followers, end);
        }
        let part = ProducePart {
            partition,
            base,
            required: end,
            error: None,
        };
        Ok((part, hw_moved))
    }
}
