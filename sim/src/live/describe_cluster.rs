//! DescribeCluster, the broker side: the cluster's id, its controller and
//! its brokers, as admin clients ask for them (Java's `describeCluster`
//! prefers it to Metadata). A crashed broker, once the controller has
//! fenced it, is listed, marked so, only when the request asks for fenced
//! brokers (v2).

use super::acls::allowed;
use super::checks::Checks;
use super::service::{BrokerService, CLUSTER_ID};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;
use std::sync::atomic::Ordering;

/// Kafka's `endpointType` for brokers; a broker refuses to describe the
/// controllers (2), which only controllers answer for.
const BROKERS: i8 = 1;

impl BrokerService {
    pub(crate) fn describe_cluster(
        &self,
        r: DescribeClusterRequest,
        version: i16,
    ) -> DescribeClusterResponse {
        Checks::bump(&self.checks().admin_requests);
        let cluster = &self.cluster;
        let mut response = DescribeClusterResponse::default();
        // Before v1 every request asks for brokers.
        let endpoint_type = if version >= 1 {
            r.endpoint_type
        } else {
            BROKERS
        };
        response.endpoint_type = endpoint_type;
        if endpoint_type != BROKERS {
            response.error_code = ResponseError::UnsupportedEndpointType.code();
            response.error_message = Some(StrBytes::from_string(format!(
                "Endpoint type {endpoint_type} is not supported by a broker."
            )));
            return response;
        }
        response.cluster_id = StrBytes::from_static_str(CLUSTER_ID);
        response.controller_id = BrokerId(cluster.controller().map_or(-1, |b| b as i32));
        response.brokers = cluster
            .endpoints()
            .into_iter()
            .enumerate()
            .map(|(id, endpoint)| {
                let fenced = cluster.brokers[id].fenced.load(Ordering::Acquire);
                (id, endpoint, fenced)
            })
            .filter(|(_, _, fenced)| !fenced || (version >= 2 && r.include_fenced_brokers))
            .map(|(id, (host, port), fenced)| {
                let mut b = DescribeClusterBroker::default();
                b.broker_id = BrokerId(id as i32);
                b.host = StrBytes::from_string(host);
                b.port = port;
                b.is_fenced = fenced;
                b
            })
            .collect();
        response.cluster_authorized_operations =
            allowed::if_asked(r.include_cluster_authorized_operations, allowed::CLUSTER);
        response
    }
}
