//! Topics and their partitions; each partition has a number that is its
//! key in the purgatories.

use super::log::PartitionLog;
use parking_lot::Mutex;
use std::sync::Arc;

/// One served partition.
pub struct Partition {
    /// Its key in the purgatories, unique over the cluster.
    pub key: u32,
    /// Its topic's name.
    pub topic: Arc<str>,
    /// Its index in the topic.
    pub index: i32,
    /// Its log and replication state.
    pub log: Mutex<PartitionLog>,
}

/// One topic.
pub struct Topic {
    /// Its name.
    pub name: Arc<str>,
    /// Its partitions, by index.
    pub partitions: Vec<Arc<Partition>>,
}

/// Whether Kafka would accept `name` as a topic name.
pub fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}
