//! A topic's own settings (Kafka's dynamic topic configs): the ones this
//! broker applies, set at creation (CreateTopics) or later
//! (IncrementalAlterConfigs, AlterConfigs), shared by the topic's
//! partitions and read by every produce. A topic that sets none follows
//! the broker's.

use std::sync::atomic::{AtomicU32, Ordering};

/// `min.insync.replicas`: how many in-sync replicas an `acks=all` produce
/// needs, when it is appended and when it is answered.
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";
/// `max.message.bytes`: the largest batch a produce may append.
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";

/// The topic configs this broker applies, by Kafka's names.
pub const APPLIED: [&str; 2] = [MIN_INSYNC_REPLICAS, MAX_MESSAGE_BYTES];

/// A topic's overrides; 0 stands for "the broker's" (neither setting may be
/// 0, which `parse` refuses).
#[derive(Debug, Default)]
pub struct TopicConfig {
    min_insync: AtomicU32,
    max_message_bytes: AtomicU32,
}

impl TopicConfig {
    fn slot(&self, name: &str) -> Option<&AtomicU32> {
        match name {
            MIN_INSYNC_REPLICAS => Some(&self.min_insync),
            MAX_MESSAGE_BYTES => Some(&self.max_message_bytes),
            _ => None,
        }
    }

    /// The topic's own value of `name`, if it sets one.
    pub fn get(&self, name: &str) -> Option<u32> {
        let v = self.slot(name)?.load(Ordering::Acquire);
        (v != 0).then_some(v)
    }

    /// Sets `name` to `value`, or back to the broker's with `None`; `false`
    /// for a name this broker does not apply.
    pub fn set(&self, name: &str, value: Option<u32>) -> bool {
        match self.slot(name) {
            Some(slot) => {
                slot.store(value.unwrap_or(0), Ordering::Release);
                true
            }
            None => false,
        }
    }

    /// The `min.insync.replicas` in force, `broker`'s where the topic sets
    /// none.
    pub fn min_insync(&self, broker: u32) -> usize {
        self.get(MIN_INSYNC_REPLICAS).unwrap_or(broker) as usize
    }

    /// The `max.message.bytes` in force, `broker`'s where the topic sets
    /// none.
    pub fn max_message_bytes(&self, broker: usize) -> usize {
        self.get(MAX_MESSAGE_BYTES).map_or(broker, |v| v as usize)
    }
}

/// Whether this broker applies the topic config `name`, or why not.
pub fn applied(name: &str) -> Result<(), String> {
    if APPLIED.contains(&name) {
        Ok(())
    } else {
        Err(format!(
            "'{name}' is not a topic config this broker applies; it applies {} and {}.",
            APPLIED[0], APPLIED[1]
        ))
    }
}

/// A value for the topic config `name`, or why it is refused
/// (INVALID_CONFIG): a name this broker does not apply, or a value that is
/// not a whole number from 1 up (`max.message.bytes` from 0 in Kafka;
/// here a batch always has bytes, so 0 would refuse every produce).
pub fn parse(name: &str, value: Option<&str>) -> Result<u32, String> {
    applied(name)?;
    let value = value.ok_or_else(|| format!("'{name}' needs a value."))?;
    match value.trim().parse::<u32>() {
        Ok(v) if v >= 1 && v <= i32::MAX as u32 => Ok(v),
        _ => Err(format!(
            "'{value}' is not a valid value for '{name}': a whole number from 1 to {}.",
            i32::MAX
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_follows_the_broker_until_it_sets_its_own() {
        let c = TopicConfig::default();
        assert_eq!((c.min_insync(2), c.max_message_bytes(1000)), (2, 1000));
        assert!(c.set(MIN_INSYNC_REPLICAS, Some(3)));
        assert!(c.set(MAX_MESSAGE_BYTES, Some(500)));
        assert_eq!((c.min_insync(2), c.max_message_bytes(1000)), (3, 500));
        assert!(c.set(MIN_INSYNC_REPLICAS, None));
        assert_eq!((c.min_insync(2), c.get(MIN_INSYNC_REPLICAS)), (2, None));
        assert!(!c.set("retention.ms", Some(1)));
    }

    #[test]
    fn only_whole_numbers_from_one_of_applied_names_are_taken() {
        assert_eq!(parse(MIN_INSYNC_REPLICAS, Some(" 2 ")), Ok(2));
        assert!(parse(MIN_INSYNC_REPLICAS, Some("0")).is_err());
        assert!(parse(MAX_MESSAGE_BYTES, Some("-1")).is_err());
        assert!(parse(MAX_MESSAGE_BYTES, Some("3000000000")).is_err());
        assert!(parse(MAX_MESSAGE_BYTES, None).is_err());
        assert!(parse("retention.ms", Some("1000"))
            .unwrap_err()
            .contains("not a topic config this broker applies"));
    }
}
