//! DescribeLogDirs, the broker side: the replicas this broker holds, with
//! the bytes each one's log takes, as admin tools (`kafka-log-dirs.sh`,
//! topic-size views) ask each broker. The logs are in memory, so there is
//! one log directory per broker, named `memory:broker-N`, whose total and
//! usable bytes are unknown (-1, as Kafka's schema leaves them).
//!
//! A follower's size counts the batches it has replicated (up to its log
//! end offset). The offset lag is Kafka's for a replica that is not a
//! future (moving) one: its high watermark less its log end offset, never
//! below 0, which is 0 for every replica here.

use super::checks::Checks;
use super::service::{topic_name, BrokerService};
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashSet;

impl BrokerService {
    pub(crate) fn describe_log_dirs(&self, r: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
        Checks::bump(&self.checks().admin_requests);
        // `None`: every partition this broker holds.
        let asked: Option<HashSet<(String, i32)>> = r.topics.map(|topics| {
            topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
                .collect()
        });
        let mut topics = Vec::new();
        for topic in self.cluster.topics() {
            let partitions: Vec<DescribeLogDirsPartition> = topic
                .partitions
                .iter()
                .filter(|p| {
                    asked
                        .as_ref()
                        .is_none_or(|a| a.contains(&(topic.name.to_string(), p.index)))
                })
                .filter_map(|p| {
                    let log = p.log.lock();
                    if log.deleted {
                        return None;
                    }
                    let replica = log.replica_index(self.id)?;
                    let end = log.replica_leo[replica];
                    let size: usize = log
                        .batches
                        .iter()
                        .take_while(|b| b.end <= end)
                        .map(|b| b.bytes.len())
                        .sum();
                    let mut out = DescribeLogDirsPartition::default();
                    out.partition_index = p.index;
                    out.partition_size = size as i64;
                    out.offset_lag = 0;
                    Some(out)
                })
                .collect();
            if !partitions.is_empty() {
                let mut t = DescribeLogDirsTopic::default();
                t.name = topic_name(&topic.name);
                t.partitions = partitions;
                topics.push(t);
            }
        }
        let mut dir = DescribeLogDirsResult::default();
        dir.log_dir = StrBytes::from_string(format!("memory:broker-{}", self.id));
        dir.topics = topics;
        let mut response = DescribeLogDirsResponse::default();
        response.results = vec![dir];
        response
    }
}
