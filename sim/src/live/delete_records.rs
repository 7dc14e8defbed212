//! DeleteRecords, the broker side: each partition's leader moves its log
//! start offset and drops the batches below it, and the request waits in
//! the leader's DeleteRecords purgatory until every live replica has
//! learned the new start at its next fetch (the low watermark passed it),
//! as Kafka's `DelayedDeleteRecords` waits, or until its timeout.

use super::checks::Checks;
use super::ops::{DeletePart, WireDeleteRecords};
use super::service::BrokerService;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn code(e: ResponseError) -> i16 {
    e.code()
}

impl BrokerService {
    pub(crate) async fn delete_records(&self, r: DeleteRecordsRequest) -> DeleteRecordsResponse {
        Checks::bump(&self.checks().admin_requests);
        // (topic, partition, error or the part that waits).
        let mut answers: Vec<(String, i32, Result<usize, i16>)> = Vec::new();
        let mut parts = Vec::new();
        for t in &r.topics {
            for q in &t.partitions {
                let part = self.delete_below(&t.name.0, q.partition_index, q.offset);
                let answer = part.map(|p| {
                    parts.push(p);
                    parts.len() - 1
                });
                answers.push((t.name.0.to_string(), q.partition_index, answer));
            }
        }
        let timeout = Duration::from_millis(u64::try_from(r.timeout_ms).unwrap_or(0));
        let keys: Vec<u32> = parts.iter().map(|p| p.partition.key).collect();
        let op = WireDeleteRecords {
            broker: self.id,
            parts,
            timeout,
            cluster: Arc::downgrade(&self.cluster),
            outcome: None,
            checks: Arc::clone(&self.cluster.checks),
        };
        let purgatory = &self.cluster.brokers[self.id as usize].delete_records;
        let parked_at = Instant::now();
        let done = if keys.is_empty() {
            op
        } else {
            match purgatory.try_complete_else_watch(op, &keys) {
                Ok(handle) => {
                    Checks::bump(&self.checks().parked);
                    let done = handle.await;
                    self.check_outcome(done.outcome, parked_at, timeout);
                    done.operation
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
        let mut response = DeleteRecordsResponse::default();
        for (topic, index, answer) in answers {
            let mut p = DeleteRecordsPartitionResult::default();
            p.partition_index = index;
            p.low_watermark = -1;
            match answer.map(|i| &done.parts[i]) {
                Ok(part) if part.error == 0 => p.low_watermark = part.low_watermark,
                Ok(part) => p.error_code = part.error,
                Err(e) => p.error_code = e,
            }
            match response.topics.iter_mut().find(|t| *t.name.0 == *topic) {
                Some(t) => t.partitions.push(p),
                None => {
                    let mut t = DeleteRecordsTopicResult::default();
                    t.name = super::service::topic_name(&topic);
                    t.partitions.push(p);
                    response.topics.push(t);
                }
            }
        }
        response
    }

    /// Moves the log start of `topic`'s partition `index` to `offset` on
    /// this broker as its leader, and sends the news to the followers.
    fn delete_below(&self, topic: &str, index: i32, offset: i64) -> Result<DeletePart, i16> {
        let p = self.partition(topic, index)?;
        let (asked, followers, end) = {
            let mut log = p.log.lock();
            if log.deleted {
                return Err(code(ResponseError::UnknownTopicOrPartition));
            }
            if log.leader != Some(self.id) {
                return Err(code(ResponseError::NotLeaderOrFollower));
            }
            let asked = if offset == -1 { log.hw } else { offset };
            log.delete_records(asked)
                .ok_or(code(ResponseError::OffsetOutOfRange))?;
            let followers = log.followers();
            (asked, followers, log.log_end())
        };
        // The followers' next fetches learn the new start.
        self.cluster.replicate_later(&p, &followers, end);
        Ok(DeletePart {
            partition: p,
            offset: asked,
            error: 0,
            low_watermark: -1,
        })
    }
}
