//! OffsetForLeaderEpoch, the broker side (KIP-320): where a leader epoch
//! ended in the partition's log, answered by its leader. A consumer asks
//! after a leader change, naming the epoch of the last record it read: if
//! that epoch ended before the consumer's position, the log it read from
//! was cut back, and it resets its position to the epoch's end instead of
//! reading on past a gap.

use super::checks::Checks;
use super::service::BrokerService;
use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderPartition;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

impl BrokerService {
    pub(crate) fn offset_for_leader_epoch(
        &self,
        r: OffsetForLeaderEpochRequest,
    ) -> OffsetForLeaderEpochResponse {
        Checks::bump(&self.checks().leader_epoch_requests);
        let mut response = OffsetForLeaderEpochResponse::default();
        response.topics = r
            .topics
            .into_iter()
            .map(|t| {
                let mut out = OffsetForLeaderTopicResult::default();
                out.partitions = t
                    .partitions
                    .iter()
                    .map(|q| {
                        let mut a = EpochEndOffset::default();
                        a.partition = q.partition;
                        match self.epoch_end(&t.topic.0, q.partition, q) {
                            Ok((epoch, end)) => (a.leader_epoch, a.end_offset) = (epoch, end),
                            Err(e) => a.error_code = e,
                        }
                        a
                    })
                    .collect();
                out.topic = t.topic;
                out
            })
            .collect();
        response
    }

    /// One partition's answer: the epoch asked for (or the last one before
    /// it) and where it ended, or the error.
    fn epoch_end(
        &self,
        topic: &str,
        index: i32,
        q: &OffsetForLeaderPartition,
    ) -> Result<(i32, i64), i16> {
        let p = self.partition(topic, index)?;
        let log = p.log.lock();
        // A replica's own view is never asked for: followers replicate
        // inside the cluster here, so only the leader answers.
        self.leads(&log, q.current_leader_epoch)?;
        // With no epoch known at or below the one asked for, the answer is
        // (-1, -1) and no error, as Kafka's.
        Ok(log.epochs.end_offset_for(q.leader_epoch, log.log_end()))
    }
}
