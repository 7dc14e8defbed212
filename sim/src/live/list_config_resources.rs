//! ListConfigResources: the resources whose configs can be described.
//!
//! v0 is Kafka's ListClientMetricsResources: the client-metrics
//! subscriptions, of which this broker has none (it collects no client
//! metrics). v1 (KIP-1142, Kafka 4.1) lists the resource types asked for,
//! or all five it defines where none is: the groups that set a config of
//! their own (members or not), the client-metrics subscriptions, each live
//! broker's loggers and each live broker (by id), and every topic, in that
//! order. A type outside those five is UNSUPPORTED_VERSION, as Kafka's
//! broker answers it.

use super::checks::Checks;
use super::configs::{BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC};
use super::service::BrokerService;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};
use kafka_protocol::protocol::StrBytes;
use std::sync::atomic::Ordering;

/// The types v1 defines, in the order their resources are listed.
const DEFINED: [i8; 5] = [GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC];

impl BrokerService {
    pub(crate) fn list_config_resources(
        &self,
        r: ListConfigResourcesRequest,
        version: i16,
    ) -> ListConfigResourcesResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = ListConfigResourcesResponse::default();
        let asked = match version {
            0 => vec![CLIENT_METRICS],
            _ if r.resource_types.is_empty() => DEFINED.to_vec(),
            _ => r.resource_types,
        };
        if asked.iter().any(|t| !DEFINED.contains(t)) {
            response.error_code = ResponseError::UnsupportedVersion.code();
            return response;
        }
        let cluster = &self.cluster;
        let live_brokers = || {
            (0..cluster.brokers.len())
                .filter(|&id| !cluster.brokers[id].fenced.load(Ordering::Acquire))
                .map(|id| id.to_string())
                .collect()
        };
        for kind in DEFINED.into_iter().filter(|t| asked.contains(t)) {
            let names: Vec<String> = match kind {
                GROUP => cluster.groups.configured(),
                BROKER_LOGGER | BROKER => live_brokers(),
                // In name order already.
                TOPIC => cluster
                    .topics()
                    .iter()
                    .map(|t| t.name.to_string())
                    .collect(),
                _ => Vec::new(),
            };
            response
                .config_resources
                .extend(names.into_iter().map(|name| {
                    let mut c = ConfigResource::default();
                    c.resource_name = StrBytes::from_string(name);
                    // v0 has no type: all are client metrics.
                    if version >= 1 {
                        c.resource_type = kind;
                    }
                    c
                }));
        }
        response
    }
}
