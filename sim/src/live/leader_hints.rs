//! KIP-951's leader hints. A produce (v10 and later) or a fetch (v16 and
//! later) answered NOT_LEADER_OR_FOLLOWER (or, for a fetch,
//! FENCED_LEADER_EPOCH) names the partition's current leader and its
//! epoch, and the response lists that leader's endpoint, so that the
//! client sends there at once instead of asking for metadata first. As in
//! Kafka, the hint is what this broker knows: (-1, -1) for a partition
//! with no leader or none known, and no endpoint for a leader that is not
//! up.

use super::service::BrokerService;
use kafka_protocol::error::ResponseError;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

/// The first Produce version that carries hints.
pub(crate) const PRODUCE_V: i16 = 10;
/// The first Fetch version that carries hints.
pub(crate) const FETCH_V: i16 = 16;

/// Whether a produce answered `error` carries a hint.
pub(crate) fn produce_hinted(error: i16) -> bool {
    error == ResponseError::NotLeaderOrFollower.code()
}

/// Whether a fetch answered `error` carries a hint.
pub(crate) fn fetch_hinted(error: i16) -> bool {
    error == ResponseError::NotLeaderOrFollower.code()
        || error == ResponseError::FencedLeaderEpoch.code()
}

/// The hints of one response: each partition's leader as asked, and the
/// endpoints of the leaders named.
pub(crate) struct LeaderHints<'a> {
    broker: &'a BrokerService,
    named: BTreeSet<u32>,
}

impl<'a> LeaderHints<'a> {
    /// The hints `broker` gives.
    pub(crate) fn new(broker: &'a BrokerService) -> Self {
        LeaderHints {
            broker,
            named: BTreeSet::new(),
        }
    }

    /// The current leader of `topic`'s partition `index` and its epoch,
    /// (-1, -1) if there is none or no such partition.
    pub(crate) fn leader_of(&mut self, topic: &str, index: i32) -> (i32, i32) {
        let Ok(partition) = self.broker.partition(topic, index) else {
            return (-1, -1);
        };
        let log = partition.log.lock();
        match log.leader {
            Some(leader) => {
                self.named.insert(leader);
                (leader as i32, log.epoch)
            }
            None => (-1, -1),
        }
    }

    /// (node id, host, port) of each leader named that is up.
    pub(crate) fn endpoints(self) -> Vec<(i32, String, i32)> {
        // Most answers name none: no copy of the endpoints for them.
        if self.named.is_empty() {
            return Vec::new();
        }
        let cluster = &self.broker.cluster;
        let endpoints = cluster.endpoints();
        self.named
            .into_iter()
            .filter(|&b| {
                cluster
                    .brokers
                    .get(b as usize)
                    .is_some_and(|b| !b.fenced.load(Ordering::Acquire))
            })
            .filter_map(|b| {
                let (host, port) = endpoints.get(b as usize)?.clone();
                Some((b as i32, host, port))
            })
            .collect()
    }
}

/// The endpoints of the leaders `hints` named, as the response's own
/// `NodeEndpoint` type: Produce and Fetch each have one, with the same
/// fields.
macro_rules! node_endpoints {
    ($hints:expr, $endpoint:ty) => {
        $hints
            .endpoints()
            .into_iter()
            .map(|(id, host, port)| {
                let mut e = <$endpoint>::default();
                e.node_id = kafka_protocol::messages::BrokerId(id);
                e.host = kafka_protocol::protocol::StrBytes::from_string(host);
                e.port = port;
                e
            })
            .collect()
    };
}
pub(crate) use node_endpoints;
