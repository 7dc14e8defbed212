//! What the engine schedules (events in simulated time, in order) and
//! what it remembers about each request in flight.

use crate::config::Fault;
use crate::ops::PartStatus;
use purgatory::Outcome;

/// Something that happens at a point in time.
pub(super) enum Event {
    ProduceArrival,
    ProduceAtBroker {
        req: u64,
    },
    ProduceAnswer {
        req: u64,
        statuses: Vec<(u32, PartStatus)>,
    },
    RetryProduce {
        batches: Vec<(u32, u64)>,
        acks_all: bool,
        attempt: u32,
    },
    ConsumerSend {
        consumer: u32,
    },
    FetchAtBroker {
        req: u64,
    },
    FetchAnswer {
        req: u64,
        parts: Vec<(u32, u64, u64, PartStatus)>,
        outcome: Outcome,
    },
    FollowerSend {
        follower: u32,
    },
    FollowerFetchAtLeader {
        req: u64,
    },
    FollowerData {
        req: u64,
        parts: Vec<(u32, u64, u64, PartStatus)>,
    },
    FollowerApply {
        req: u64,
        parts: Vec<(u32, u64, u64, PartStatus)>,
    },
    IsrCheck,
    Heartbeat {
        member: u32,
    },
    Fault(Fault),
    EndOfArrivals,
}

pub(super) struct Scheduled {
    pub(super) at: u64,
    pub(super) seq: u64,
    pub(super) event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// What a tracked request was about, to act on its answer.
pub(super) enum Context {
    Produce {
        broker: u32,
        acks_all: bool,
        batches: Vec<(u32, u64)>,
        attempt: u32,
        /// Partitions answered at arrival (refused, or `acks=1`).
        early: Vec<(u32, PartStatus)>,
        arrived_at: u64,
    },
    Fetch {
        consumer: u32,
        broker: u32,
        parts: Vec<(u32, u64)>,
        arrived_at: u64,
    },
    Follower {
        follower: u32,
        leader: u32,
        parts: Vec<(u32, u64)>,
        arrived_at: u64,
    },
}
