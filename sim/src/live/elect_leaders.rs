//! ElectLeaders, the broker side: an admin client asks for a preferred
//! election (the first replica leads again, as the automatic rebalance
//! also does every 100 ms here) or an unclean one (an offline partition
//! is handed to a live replica out of sync, at the price of the records
//! it lacks), for the partitions named or for all. Any broker takes the
//! request, as a KRaft broker forwards it to the controller; the election
//! is done when the answer is sent.

use super::checks::Checks;
use super::service::BrokerService;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

/// Kafka's `ElectionType` codes.
const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

impl BrokerService {
    pub(crate) fn elect_leaders(
        &self,
        r: ElectLeadersRequest,
        version: i16,
    ) -> ElectLeadersResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = ElectLeadersResponse::default();
        // v0 has no election type: always the preferred replica.
        let election = if version >= 1 {
            r.election_type
        } else {
            PREFERRED
        };
        if election != PREFERRED && election != UNCLEAN {
            response.error_code = ResponseError::InvalidRequest.code();
            return response;
        }
        let unclean = election == UNCLEAN;
        response.replica_election_results = match r.topic_partitions {
            Some(asked) => asked
                .into_iter()
                .map(|t| {
                    let results = t
                        .partitions
                        .iter()
                        .map(|&index| self.elect_one(&t.topic.0, index, unclean))
                        .collect();
                    election_result(t.topic, results)
                })
                .collect(),
            // Every partition; as Kafka's controller, those whose leader was
            // already the one asked for are left out.
            None => self
                .cluster
                .topics()
                .into_iter()
                .map(|topic| {
                    let results = (0..topic.partitions.len() as i32)
                        .map(|index| self.elect_one(&topic.name, index, unclean))
                        .filter(|r| r.error_code != ResponseError::ElectionNotNeeded.code())
                        .collect();
                    election_result(
                        TopicName(StrBytes::from_string(topic.name.to_string())),
                        results,
                    )
                })
                .collect(),
        };
        response
    }

    fn elect_one(&self, topic: &str, index: i32, unclean: bool) -> PartitionResult {
        let mut result = PartitionResult::default();
        result.partition_id = index;
        let elected = self
            .partition(topic, index)
            .and_then(|p| self.cluster.elect(&p, unclean).map_err(|e| e.code()));
        if let Err(code) = elected {
            result.error_code = code;
            let said = ResponseError::try_from_code(code).map(|e| e.to_string());
            result.error_message = said.map(StrBytes::from_string);
        }
        result
    }
}

fn election_result(topic: TopicName, results: Vec<PartitionResult>) -> ReplicaElectionResult {
    let mut out = ReplicaElectionResult::default();
    out.topic = topic;
    out.partition_result = results;
    out
}
