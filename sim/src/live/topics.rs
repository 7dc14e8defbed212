//! Topics and their partitions; each partition has a number that is its
//! key in the purgatories.

use super::log::PartitionLog;
use super::topic_config::TopicConfig;
use parking_lot::Mutex;
use std::sync::Arc;
use uuid::Uuid;

/// One served partition.
pub struct Partition {
    /// Its key in the purgatories, unique over the cluster.
    pub key: u32,
    /// Its topic's name.
    pub topic: Arc<str>,
    /// Its topic's own settings.
    pub config: Arc<TopicConfig>,
    /// Its index in the topic.
    pub index: i32,
    /// Its log and replication state.
    pub log: Mutex<PartitionLog>,
}

/// One topic.
pub struct Topic {
    /// Its name.
    pub name: Arc<str>,
    /// Its topic id (KIP-516): random, never zero, and new for a topic
    /// made again under the name of a deleted one, so a client that
    /// names the old one by id is told it is gone.
    pub id: Uuid,
    /// Its own settings, shared with its partitions.
    pub config: Arc<TopicConfig>,
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

/// A fresh topic id: random, as Kafka's, and, as Kafka's, never zero nor
/// one whose base64 form starts with '-', which command-line tools would
/// read as an option.
pub fn new_topic_id() -> Uuid {
    loop {
        let id = Uuid::new_v4();
        if !id.is_nil() && id.as_bytes()[0] >> 2 != 62 {
            return id;
        }
    }
}
