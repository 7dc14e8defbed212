//! DescribeTopicPartitions (KIP-966): topics' partitions a page at a
//! time, as Kafka's `DescribeTopicPartitionsRequestHandler` and its
//! metadata cache answer it. Topics go in name order from the cursor's,
//! at most `response_partition_limit` partitions in all (and at most
//! Kafka's `max.request.partition.size.limit`, 2,000); where the page ends
//! inside the topics asked, the next cursor says where the next one
//! starts.

use super::acls::allowed;
use super::checks::Checks;
use super::service::BrokerService;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeSet;

use super::topics::valid_topic_name;

/// Kafka's `max.request.partition.size.limit`: the most partitions one
/// answer holds, whatever the request asks.
const MAX_PARTITIONS: i32 = 2000;

impl BrokerService {
    pub(crate) fn describe_topic_partitions(
        &self,
        r: DescribeTopicPartitionsRequest,
    ) -> DescribeTopicPartitionsResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = DescribeTopicPartitionsResponse::default();
        let every_topic = r.topics.is_empty();
        let (from_topic, from_partition) = r.cursor.as_ref().map_or((String::new(), 0), |c| {
            (c.topic_name.0.to_string(), c.partition_index)
        });
        // Each topic once, in name order, from the cursor's on.
        let names: BTreeSet<String> = if every_topic {
            (self.cluster.topics().iter())
                .map(|t| t.name.to_string())
                .collect()
        } else {
            r.topics.iter().map(|t| t.name.0.to_string()).collect()
        };
        let names: Vec<String> = names.into_iter().filter(|n| *n >= from_topic).collect();
        let cursor_listed = r.cursor.is_none() || names.first() == Some(&from_topic);
        if (!every_topic && !cursor_listed) || from_partition < 0 {
            // Kafka refuses the whole request: each topic asked, refused.
            response.topics = (r.topics.iter())
                .map(|t| refused(&t.name.0, ResponseError::InvalidRequest))
                .collect();
            return response;
        }
        let mut left = r.response_partition_limit.clamp(1, MAX_PARTITIONS) as usize;
        for name in names {
            if left == 0 {
                // The page is full: the next one starts at this topic.
                response.next_cursor = Some(cursor(&name, 0));
                break;
            }
            let Some(topic) = self.cluster.topic(&name) else {
                if !every_topic {
                    let error = if valid_topic_name(&name) {
                        ResponseError::UnknownTopicOrPartition
                    } else {
                        ResponseError::InvalidTopicException
                    };
                    // Kafka gives every topic in its answer the
                    // operations allowed on it, found or not.
                    let mut unknown = refused(&name, error);
                    unknown.topic_authorized_operations = allowed::TOPIC;
                    response.topics.push(unknown);
                }
                continue;
            };
            let first = if name == from_topic {
                usize::try_from(from_partition).unwrap_or(0)
            } else {
                0
            };
            let upper = topic.partitions.len().min(first.saturating_add(left));
            let mut out = DescribeTopicPartitionsResponseTopic::default();
            out.name = Some(TopicName(StrBytes::from_string(name.clone())));
            out.topic_id = topic.id;
            out.topic_authorized_operations = allowed::TOPIC;
            out.partitions = (topic.partitions.get(first..upper).unwrap_or_default())
                .iter()
                .map(|p| {
                    let m = self.partition_metadata(p);
                    let mut out = DescribeTopicPartitionsResponsePartition::default();
                    out.partition_index = m.partition_index;
                    out.leader_id = m.leader_id;
                    out.leader_epoch = m.leader_epoch;
                    out.replica_nodes = m.replica_nodes;
                    out.isr_nodes = m.isr_nodes;
                    // No eligible leader replicas (KIP-966's ELR) here.
                    out.eligible_leader_replicas = Some(Vec::new());
                    out.last_known_elr = Some(Vec::new());
                    out.offline_replicas = m.offline_replicas;
                    out
                })
                .collect();
            left -= out.partitions.len();
            response.topics.push(out);
            if upper < topic.partitions.len() {
                response.next_cursor = Some(cursor(&name, upper as i32));
                break;
            }
        }
        response
    }
}

fn cursor(topic: &str, partition: i32) -> Cursor {
    let mut c = Cursor::default();
    c.topic_name = TopicName(StrBytes::from_string(topic.to_string()));
    c.partition_index = partition;
    c
}

fn refused(name: &str, error: ResponseError) -> DescribeTopicPartitionsResponseTopic {
    let mut t = DescribeTopicPartitionsResponseTopic::default();
    t.name = Some(TopicName(StrBytes::from_string(name.to_string())));
    t.error_code = error.code();
    t
}
