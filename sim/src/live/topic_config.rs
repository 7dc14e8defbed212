//! A topic's own settings (Kafka's dynamic topic configs): the ones this
//! broker applies, and those it takes and keeps without effect (see
//! [`INERT`]), set at creation (CreateTopics) or later
//! (IncrementalAlterConfigs, AlterConfigs), shared by the topic's
//! partitions and read by every produce. A topic that sets none follows
//! the broker's, or Kafka's default.

use std::sync::atomic::{AtomicI64, Ordering};

/// `min.insync.replicas`: how many in-sync replicas an `acks=all` produce
/// needs, when it is appended and when it is answered.
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";
/// `max.message.bytes`: the largest batch a produce may append.
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";
/// `retention.bytes`: the most a partition keeps (-1: no limit).
pub const RETENTION_BYTES: &str = "retention.bytes";
/// `retention.ms`: how long a batch is kept after its newest record's
/// timestamp (-1: for ever).
pub const RETENTION_MS: &str = "retention.ms";
/// `cleanup.policy`: a list of `delete` (the retentions apply) and
/// `compact` (Kafka keeps at least each key's latest record).
pub const CLEANUP_POLICY: &str = "cleanup.policy";
/// `message.timestamp.type`: `CreateTime` (the producer's timestamps) or
/// `LogAppendTime` (the leader stamps each batch with its append time).
pub const MESSAGE_TIMESTAMP_TYPE: &str = "message.timestamp.type";

/// `compression.type`: the codec the leader stores batches in
/// (`producer`: each as its producer compressed it).
pub const COMPRESSION_TYPE: &str = "compression.type";
/// `message.timestamp.before.max.ms` and `message.timestamp.after.max.ms`:
/// how far before and after the leader's clock a record's own timestamp
/// may be, on a topic of the producer's timestamps (Kafka's default, the
/// largest long, checks nothing).
pub const MESSAGE_TIMESTAMP_BEFORE_MAX_MS: &str = "message.timestamp.before.max.ms";
pub const MESSAGE_TIMESTAMP_AFTER_MAX_MS: &str = "message.timestamp.after.max.ms";
/// `compression.gzip.level`, `compression.lz4.level` and
/// `compression.zstd.level`: the level the leader compresses at when
/// `compression.type` names that codec.
pub const COMPRESSION_GZIP_LEVEL: &str = "compression.gzip.level";
pub const COMPRESSION_LZ4_LEVEL: &str = "compression.lz4.level";
pub const COMPRESSION_ZSTD_LEVEL: &str = "compression.zstd.level";
/// `unclean.leader.election.enable`: whether a partition whose in-sync
/// replicas are all down is given to a live replica out of sync, which
/// loses what that replica does not have (`false`, Kafka's default: it
/// waits offline for an in-sync one).
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";

/// The topic configs this broker applies, by Kafka's names.
pub const APPLIED: [&str; 13] = [
    MIN_INSYNC_REPLICAS,
    MAX_MESSAGE_BYTES,
    RETENTION_BYTES,
    RETENTION_MS,
    CLEANUP_POLICY,
    MESSAGE_TIMESTAMP_TYPE,
    COMPRESSION_TYPE,
    MESSAGE_TIMESTAMP_BEFORE_MAX_MS,
    MESSAGE_TIMESTAMP_AFTER_MAX_MS,
    COMPRESSION_GZIP_LEVEL,
    COMPRESSION_LZ4_LEVEL,
    COMPRESSION_ZSTD_LEVEL,
    UNCLEAN_LEADER_ELECTION_ENABLE,
];

/// Kafka's topic configs this broker takes, keeps and describes, but
/// which change nothing here: they shape Kafka's files (segments, their
/// indexes, flushes, preallocation) and its log cleaner's schedule, and
/// this broker keeps each partition's batches in memory and compacts
/// nothing (a compacted topic keeps every record, so at least each key's
/// latest). Tools that create topics with them (Kafka Streams' internal
/// repartition topics set `segment.bytes`, for one) are served as
/// Kafka serves them. `message.downconversion.enable` has no effect in
/// Kafka 4 either. Each with the values Kafka takes and its default.
pub const INERT: [Inert; 14] = [
    Inert::new("segment.bytes", Value::Int(14, I32_MAX), "1073741824"),
    Inert::new("segment.ms", Value::Long(1), "604800000"),
    Inert::new("segment.jitter.ms", Value::Long(0), "0"),
    Inert::new("segment.index.bytes", Value::Int(4, I32_MAX), "10485760"),
    Inert::new("index.interval.bytes", Value::Int(0, I32_MAX), "4096"),
    Inert::new("flush.messages", Value::Long(1), LONG_MAX),
    Inert::new("flush.ms", Value::Long(0), LONG_MAX),
    Inert::new("file.delete.delay.ms", Value::Long(0), "60000"),
    Inert::new("preallocate", Value::Boolean, "false"),
    Inert::new("delete.retention.ms", Value::Long(0), "86400000"),
    Inert::new("min.compaction.lag.ms", Value::Long(0), "0"),
    Inert::new("max.compaction.lag.ms", Value::Long(1), LONG_MAX),
    Inert::new("min.cleanable.dirty.ratio", Value::Ratio, "0.5"),
    Inert::new("message.downconversion.enable", Value::Boolean, "true"),
];

const I32_MAX: i64 = i32::MAX as i64;
const LONG_MAX: &str = "9223372036854775807";

/// A topic config taken and kept without effect (see [`INERT`]).
#[derive(Debug, Clone, Copy)]
pub struct Inert {
    /// Its name, as Kafka's.
    pub name: &'static str,
    /// What values it takes.
    pub value: Value,
    /// Kafka's default, as DescribeConfigs gives it.
    pub default: &'static str,
}

impl Inert {
    const fn new(name: &'static str, value: Value, default: &'static str) -> Inert {
        Inert {
            name,
            value,
            default,
        }
    }
}

/// The values an inert config takes, as Kafka's definition of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// An int from the first to the second.
    Int(i64, i64),
    /// A long from the one given.
    Long(i64),
    /// `true` or `false`, in any case.
    Boolean,
    /// A double from 0 to 1.
    Ratio,
}

fn inert(name: &str) -> Option<&'static Inert> {
    INERT.iter().find(|c| c.name == name)
}

/// Each applied config's place in [`APPLIED`], and so its slot.
const MIN_INSYNC_AT: usize = 0;
const MAX_MESSAGE_BYTES_AT: usize = 1;
const RETENTION_BYTES_AT: usize = 2;
const RETENTION_MS_AT: usize = 3;
const CLEANUP_POLICY_AT: usize = 4;
const MESSAGE_TIMESTAMP_TYPE_AT: usize = 5;
const COMPRESSION_TYPE_AT: usize = 6;
const TIMESTAMP_BEFORE_AT: usize = 7;
const TIMESTAMP_AFTER_AT: usize = 8;
const GZIP_LEVEL_AT: usize = 9;
const LZ4_LEVEL_AT: usize = 10;
const ZSTD_LEVEL_AT: usize = 11;
const UNCLEAN_AT: usize = 12;

/// `cleanup.policy`'s values, as bits of its slot.
const DELETE: i64 = 1;
const COMPACT: i64 = 2;

/// `message.timestamp.type`'s values (Kafka's `TimestampType` ids).
const CREATE_TIME: i64 = 0;
const LOG_APPEND_TIME: i64 = 1;

/// `compression.type`'s values: Kafka's codec ids (the attributes' low
/// bits of a batch), and `producer`, each batch's own.
const CODECS: [(&str, i64); 5] = [
    ("uncompressed", 0),
    ("gzip", 1),
    ("snappy", 2),
    ("lz4", 3),
    ("zstd", 4),
];
const PRODUCER: i64 = -1;
/// Kafka's ids of gzip and lz4, and of zstd, which clients before
/// Produce v7 and Fetch v10 do not read.
pub const GZIP: u8 = 1;
pub const LZ4: u8 = 3;
/// Kafka's default lz4 level: the one at which it uses lz4's fast
/// compressor rather than its high-compression one.
pub const LZ4_DEFAULT_LEVEL: i32 = 9;
pub const ZSTD: u8 = 4;

/// A compression level config: its codec, the levels Kafka takes (gzip
/// also takes its default, -1), and Kafka's default.
struct Level {
    name: &'static str,
    codec: u8,
    range: (i64, i64),
    default: i64,
}

/// Kafka's defaults: zlib's own level (6), lz4's fast compressor (any
/// other level is lz4's high-compression one), zstd's 3.
const LEVELS: [Level; 3] = [
    Level {
        name: COMPRESSION_GZIP_LEVEL,
        codec: GZIP,
        range: (1, 9),
        default: -1,
    },
    Level {
        name: COMPRESSION_LZ4_LEVEL,
        codec: LZ4,
        range: (1, 17),
        default: LZ4_DEFAULT_LEVEL as i64,
    },
    Level {
        name: COMPRESSION_ZSTD_LEVEL,
        codec: ZSTD,
        range: (-131_072, 22),
        default: 3,
    },
];

/// Kafka's default level for the level config `name`, if it is one.
pub fn default_level(name: &str) -> Option<i64> {
    LEVELS.iter().find(|l| l.name == name).map(|l| l.default)
}

/// What stands for "the broker's" in a slot: no setting takes it.
const UNSET: i64 = i64::MIN;

/// A topic's overrides of the broker's settings: a slot for each applied
/// config, then one for each inert one.
#[derive(Debug)]
pub struct TopicConfig {
    slots: [AtomicI64; APPLIED.len() + INERT.len()],
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            slots: std::array::from_fn(|_| AtomicI64::new(UNSET)),
        }
    }
}

impl TopicConfig {
    fn slot(&self, name: &str) -> Option<&AtomicI64> {
        let at = (APPLIED.iter().position(|&n| n == name))
            .or_else(|| (INERT.iter().position(|c| c.name == name)).map(|i| APPLIED.len() + i))?;
        Some(&self.slots[at])
    }

    /// The topic's own value of `name`, if it sets one.
    pub fn get(&self, name: &str) -> Option<i64> {
        let v = self.slot(name)?.load(Ordering::Acquire);
        (v != UNSET).then_some(v)
    }

    /// The topic's own value of `APPLIED[i]`: what every produce reads,
    /// without looking its name up (`slots_follow_the_applied_names`).
    fn at(&self, i: usize) -> Option<i64> {
        let v = self.slots[i].load(Ordering::Acquire);
        (v != UNSET).then_some(v)
    }

    /// Sets `name` to `value`, or back to the broker's with `None`; `false`
    /// for a name this broker does not take.
    pub fn set(&self, name: &str, value: Option<i64>) -> bool {
        match self.slot(name) {
            Some(slot) => {
                slot.store(value.unwrap_or(UNSET), Ordering::Release);
                true
            }
            None => false,
        }
    }

    /// The `min.insync.replicas` in force, `broker`'s where the topic sets
    /// none.
    pub fn min_insync(&self, broker: u32) -> usize {
        self.at(MIN_INSYNC_AT)
            .map_or(broker as usize, |v| v as usize)
    }

    /// The `max.message.bytes` in force, `broker`'s where the topic sets
    /// none.
    pub fn max_message_bytes(&self, broker: usize) -> usize {
        self.at(MAX_MESSAGE_BYTES_AT).map_or(broker, |v| v as usize)
    }

    /// The `retention.bytes` in force (`None`: no limit), `broker`'s where
    /// the topic sets none.
    pub fn retention_bytes(&self, broker: u64) -> Option<u64> {
        self.at(RETENTION_BYTES_AT)
            .map_or(Some(broker), |v| u64::try_from(v).ok())
    }

    /// The `retention.ms` in force (`None`: for ever), `broker`'s
    /// (`log.retention.ms`) where the topic sets none.
    pub fn retention_ms(&self, broker: Option<u64>) -> Option<u64> {
        self.at(RETENTION_MS_AT)
            .map_or(broker, |v| u64::try_from(v).ok())
    }

    /// Whether the retentions apply: `cleanup.policy` holds `delete` (the
    /// broker's default). A `compact`-only topic keeps every record, as
    /// Kafka keeps a compacted topic's, whatever its size or age: this
    /// broker does not compact, so all of each key's records stay, the
    /// latest among them.
    pub fn deletes(&self) -> bool {
        self.at(CLEANUP_POLICY_AT).is_none_or(|v| v & DELETE != 0)
    }

    /// Whether the topic is compacted (`compact` among its cleanup
    /// policies): as in Kafka, each record written to it needs a key,
    /// although this broker keeps every record rather than compacting.
    pub fn compacts(&self) -> bool {
        self.at(CLEANUP_POLICY_AT).is_some_and(|v| v & COMPACT != 0)
    }

    /// The retentions in force, by size and by age (`None` within: no
    /// limit), each the broker's (`log.retention.bytes`,
    /// `log.retention.ms`) where the topic sets none; `None` for a topic
    /// that keeps every record (see [`deletes`](Self::deletes)).
    pub fn retentions(
        &self,
        broker_bytes: u64,
        broker_ms: Option<u64>,
    ) -> Option<(Option<u64>, Option<u64>)> {
        self.deletes().then(|| {
            (
                self.retention_bytes(broker_bytes),
                self.retention_ms(broker_ms),
            )
        })
    }

    /// Whether the leader stamps each batch with its append time
    /// (`LogAppendTime`); the broker's default is the producer's
    /// timestamps (`CreateTime`), as Kafka's.
    pub fn log_append_time(&self) -> bool {
        self.at(MESSAGE_TIMESTAMP_TYPE_AT) == Some(LOG_APPEND_TIME)
    }

    /// The codec the leader stores the topic's batches in (Kafka's id),
    /// or `None` for the producer's own (`compression.type=producer`,
    /// the default).
    pub fn compression(&self) -> Option<u8> {
        self.at(COMPRESSION_TYPE_AT)
            .and_then(|v| u8::try_from(v).ok())
    }

    /// The level the leader compresses with in `codec` (Kafka's id):
    /// the topic's own `compression.<codec>.level`, else Kafka's default;
    /// 0 for a codec without levels.
    pub fn compression_level(&self, codec: u8) -> i32 {
        let at = match codec {
            GZIP => GZIP_LEVEL_AT,
            LZ4 => LZ4_LEVEL_AT,
            ZSTD => ZSTD_LEVEL_AT,
            _ => return 0,
        };
        let default = LEVELS
            .iter()
            .find(|l| l.codec == codec)
            .map_or(0, |l| l.default);
        // Parsed within the levels Kafka takes, all of which fit.
        self.at(at).unwrap_or(default) as i32
    }

    /// Whether a partition with nobody in sync alive goes to a live
    /// replica out of sync (`unclean.leader.election.enable`; Kafka's
    /// default, and this broker's, is not to).
    pub fn unclean_election(&self) -> bool {
        self.at(UNCLEAN_AT) == Some(1)
    }

    /// The record timestamps a produce may carry when the leader's clock
    /// reads `now_ms`, from `message.timestamp.before.max.ms` and
    /// `message.timestamp.after.max.ms`; `None` where the topic sets
    /// neither (Kafka's defaults bound nothing) or stamps its own append
    /// time, which Kafka does not check against them.
    pub fn timestamp_window(&self, now_ms: impl FnOnce() -> i64) -> Option<(i64, i64)> {
        let (before, after) = (self.at(TIMESTAMP_BEFORE_AT), self.at(TIMESTAMP_AFTER_AT));
        if self.log_append_time() || (before.is_none() && after.is_none()) {
            return None;
        }
        let now = now_ms();
        Some((
            before.map_or(i64::MIN, |b| now.saturating_sub(b)),
            after.map_or(i64::MAX, |a| now.saturating_add(a)),
        ))
    }
}

/// The text of `name`'s value `v`, as DescribeConfigs gives it.
pub fn show(name: &str, v: i64) -> String {
    match (name, v) {
        (CLEANUP_POLICY, DELETE) => "delete".into(),
        (CLEANUP_POLICY, COMPACT) => "compact".into(),
        (CLEANUP_POLICY, _) => "compact,delete".into(),
        (MESSAGE_TIMESTAMP_TYPE, LOG_APPEND_TIME) => "LogAppendTime".into(),
        (MESSAGE_TIMESTAMP_TYPE, _) => "CreateTime".into(),
        (COMPRESSION_TYPE, v) => CODECS
            .iter()
            .find(|&&(_, id)| id == v)
            .map_or("producer", |&(name, _)| name)
            .into(),
        (UNCLEAN_LEADER_ELECTION_ENABLE, v) => (v != 0).to_string(),
        _ => match inert(name).map(|c| c.value) {
            Some(Value::Boolean) => (v != 0).to_string(),
            Some(Value::Ratio) => {
                // As Java writes a double: a whole one with its ".0".
                let ratio = f64::from_bits(v as u64);
                if ratio.fract() == 0.0 {
                    format!("{ratio:.1}")
                } else {
                    ratio.to_string()
                }
            }
            _ => v.to_string(),
        },
    }
}

/// Whether `name` is a list (IncrementalAlterConfigs may append to and
/// subtract from it).
pub fn is_list(name: &str) -> bool {
    name == CLEANUP_POLICY
}

/// The list `name` (`cleanup.policy`, the one list) of a topic of
/// `config` with `v`'s values added (`add`) or taken out, starting from
/// the default, `delete`, where the topic sets none; or why not: a list
/// left empty is refused.
pub fn combine(config: &TopicConfig, name: &str, v: i64, add: bool) -> Result<i64, String> {
    let current = config.get(name).unwrap_or(DELETE);
    let combined = if add { current | v } else { current & !v };
    if combined == 0 {
        return Err(format!("'{name}' cannot be left empty."));
    }
    Ok(combined)
}

/// Whether this broker takes the topic config `name` (applied or inert),
/// or why not.
pub fn taken(name: &str) -> Result<(), String> {
    if is_taken(name) {
        Ok(())
    } else {
        let inert: Vec<&str> = INERT.iter().map(|c| c.name).collect();
        Err(format!(
            "'{name}' is not a topic config this broker takes; it applies {}, and takes {} \
             without effect.",
            APPLIED.join(", "),
            inert.join(", ")
        ))
    }
}

/// Every topic config this broker takes: the applied, then the inert.
pub fn taken_names() -> impl Iterator<Item = &'static str> {
    APPLIED.into_iter().chain(INERT.iter().map(|c| c.name))
}

/// Whether this broker takes the topic config `name`: a topic may set it,
/// and an admin alter it.
pub fn is_taken(name: &str) -> bool {
    APPLIED.contains(&name) || inert(name).is_some()
}

/// The values Kafka takes for `name`: `min.insync.replicas` from 1,
/// `max.message.bytes` from 0 in Kafka but from 1 here (a batch always has
/// bytes, so 0 would refuse every produce), both at most `i32::MAX` (ints);
/// the retentions longs from -1 (no limit), the timestamp bounds from 0.
fn bounds(name: &str) -> (i64, i64) {
    match name {
        RETENTION_BYTES | RETENTION_MS => (-1, i64::MAX),
        MESSAGE_TIMESTAMP_BEFORE_MAX_MS | MESSAGE_TIMESTAMP_AFTER_MAX_MS => (0, i64::MAX),
        _ => (1, i64::from(i32::MAX)),
    }
}

/// A value for the topic config `name`, or why it is refused
/// (INVALID_CONFIG): a name this broker does not take, or a value that is
/// not one Kafka takes for it: a whole number within its bounds (for an
/// inert config, as [`Value`] says; for a compression level, its codec's
/// levels; for `cleanup.policy`, a
/// comma-separated list of `delete` and `compact`; for
/// `message.timestamp.type`, `CreateTime` or `LogAppendTime`, spelt so,
/// as Kafka's validator wants them).
pub fn parse(name: &str, value: Option<&str>) -> Result<i64, String> {
    taken(name)?;
    let value = value.ok_or_else(|| format!("'{name}' needs a value."))?;
    if let Some(config) = inert(name) {
        return parse_inert(config, value.trim()).ok_or_else(|| {
            format!(
                "'{value}' is not a valid value for '{name}': {}.",
                config.value
            )
        });
    }
    if name == CLEANUP_POLICY {
        return parse_policy(value);
    }
    if name == UNCLEAN_LEADER_ELECTION_ENABLE {
        return parse_boolean(value.trim())
            .ok_or_else(|| format!("'{value}' is not a valid value for '{name}': true or false."));
    }
    if name == MESSAGE_TIMESTAMP_TYPE {
        return match value {
            "CreateTime" => Ok(CREATE_TIME),
            "LogAppendTime" => Ok(LOG_APPEND_TIME),
            _ => Err(format!(
                "'{value}' is not a valid value for '{name}': CreateTime or LogAppendTime."
            )),
        };
    }
    if name == COMPRESSION_TYPE {
        // Kafka's validator takes these in any case.
        let lower = value.trim().to_ascii_lowercase();
        return match CODECS.iter().find(|&&(n, _)| n == lower) {
            Some(&(_, id)) => Ok(id),
            None if lower == "producer" => Ok(PRODUCER),
            None => Err(format!(
                "'{value}' is not a valid value for '{name}': uncompressed, zstd, lz4, snappy, \
                 gzip or producer."
            )),
        };
    }
    if let Some(level) = LEVELS.iter().find(|l| l.name == name) {
        let (min, max) = level.range;
        let or_default = if name == COMPRESSION_GZIP_LEVEL {
            format!(", or {}", level.default)
        } else {
            String::new()
        };
        return match value.trim().parse::<i64>() {
            Ok(v) if (min..=max).contains(&v) || (v == level.default && !or_default.is_empty()) => {
                Ok(v)
            }
            _ => Err(format!(
                "'{value}' is not a valid value for '{name}': a whole number from {min} to \
                 {max}{or_default}."
            )),
        };
    }
    let (min, max) = bounds(name);
    match value.trim().parse::<i64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(format!(
            "'{value}' is not a valid value for '{name}': a whole number from {min} to {max}."
        )),
    }
}

/// An inert config's value as its slot keeps it (a ratio as its bits),
/// if Kafka takes it.
fn parse_inert(config: &Inert, value: &str) -> Option<i64> {
    match config.value {
        Value::Int(min, max) => value.parse().ok().filter(|v| (min..=max).contains(v)),
        Value::Long(min) => value.parse().ok().filter(|&v| v >= min),
        Value::Boolean => parse_boolean(value),
        Value::Ratio => {
            let ratio: f64 = value.parse().ok().filter(|r| (0.0..=1.0).contains(r))?;
            // -0.0 is 0, and its bits are the unset slot's.
            Some((ratio + 0.0).to_bits() as i64)
        }
    }
}

/// A boolean config's value as its slot keeps it: `true` or `false` in
/// any case, as Kafka's parser takes them.
fn parse_boolean(value: &str) -> Option<i64> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Some(1),
        "false" => Some(0),
        _ => None,
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Value::Int(min, max) => write!(f, "a whole number from {min} to {max}"),
            Value::Long(min) => write!(f, "a whole number from {min}"),
            Value::Boolean => f.write_str("true or false"),
            Value::Ratio => f.write_str("a number from 0 to 1"),
        }
    }
}

/// `cleanup.policy`'s list as bits; Kafka's own validator takes the same
/// two names, in any order, repeated or not.
fn parse_policy(value: &str) -> Result<i64, String> {
    let mut bits = 0;
    for item in value.split(',').map(str::trim) {
        bits |= match item {
            "delete" => DELETE,
            "compact" => COMPACT,
            _ => {
                return Err(format!(
                    "'{value}' is not a valid value for '{CLEANUP_POLICY}': a list of delete and compact."
                ))
            }
        };
    }
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_applied_names() {
        for (at, name) in [
            (MIN_INSYNC_AT, MIN_INSYNC_REPLICAS),
            (MAX_MESSAGE_BYTES_AT, MAX_MESSAGE_BYTES),
            (RETENTION_BYTES_AT, RETENTION_BYTES),
            (RETENTION_MS_AT, RETENTION_MS),
            (CLEANUP_POLICY_AT, CLEANUP_POLICY),
            (MESSAGE_TIMESTAMP_TYPE_AT, MESSAGE_TIMESTAMP_TYPE),
            (COMPRESSION_TYPE_AT, COMPRESSION_TYPE),
            (TIMESTAMP_BEFORE_AT, MESSAGE_TIMESTAMP_BEFORE_MAX_MS),
            (TIMESTAMP_AFTER_AT, MESSAGE_TIMESTAMP_AFTER_MAX_MS),
            (GZIP_LEVEL_AT, COMPRESSION_GZIP_LEVEL),
            (LZ4_LEVEL_AT, COMPRESSION_LZ4_LEVEL),
            (ZSTD_LEVEL_AT, COMPRESSION_ZSTD_LEVEL),
            (UNCLEAN_AT, UNCLEAN_LEADER_ELECTION_ENABLE),
        ] {
            assert_eq!(APPLIED[at], name);
        }
    }

    #[test]
    fn a_topic_follows_the_broker_until_it_sets_its_own() {
        let c = TopicConfig::default();
        assert_eq!((c.min_insync(2), c.max_message_bytes(1000)), (2, 1000));
        assert!(c.set(MIN_INSYNC_REPLICAS, Some(3)));
        assert!(c.set(MAX_MESSAGE_BYTES, Some(500)));
        assert_eq!((c.min_insync(2), c.max_message_bytes(1000)), (3, 500));
        assert!(c.set(MIN_INSYNC_REPLICAS, None));
        assert_eq!((c.min_insync(2), c.get(MIN_INSYNC_REPLICAS)), (2, None));
        assert!(c.set(RETENTION_BYTES, Some(-1)));
        assert_eq!(c.retention_bytes(1 << 30), None);
        assert_eq!(c.retention_ms(None), None);
        assert_eq!(c.retention_ms(Some(5_000)), Some(5_000));
        assert!(c.set(RETENTION_MS, Some(60_000)));
        assert_eq!(c.retention_ms(Some(5_000)), Some(60_000));
        assert!(c.set(RETENTION_MS, Some(-1)));
        assert_eq!(c.retention_ms(Some(5_000)), None, "the topic's for ever");
        assert!(c.deletes());
        // retention.bytes -1 (no limit), retention.ms the topic's -1.
        assert_eq!(c.retentions(1 << 30, Some(5_000)), Some((None, None)));
        assert!(c.set(
            CLEANUP_POLICY,
            Some(parse(CLEANUP_POLICY, Some("compact")).unwrap())
        ));
        assert!(!c.deletes());
        assert_eq!(c.retentions(1 << 30, Some(5_000)), None);
        assert!(!c.set("remote.storage.enable", Some(1)));
        // Off unless the topic turns it on.
        assert!(!c.unclean_election());
        let on = parse(UNCLEAN_LEADER_ELECTION_ENABLE, Some("True")).unwrap();
        assert!(c.set(UNCLEAN_LEADER_ELECTION_ENABLE, Some(on)));
        assert!(c.unclean_election());
        assert_eq!(show(UNCLEAN_LEADER_ELECTION_ENABLE, on), "true");
        assert!(parse(UNCLEAN_LEADER_ELECTION_ENABLE, Some("1")).is_err());
    }

    #[test]
    fn inert_configs_take_kafkas_values_and_show_them_as_kafka_does() {
        let c = TopicConfig::default();
        let take = |name: &str, value: &str| {
            let v = parse(name, Some(value))?;
            assert!(c.set(name, Some(v)));
            Ok::<String, String>(show(name, c.get(name).unwrap()))
        };
        assert_eq!(take("segment.bytes", "52428800"), Ok("52428800".into()));
        assert!(take("segment.bytes", "13").is_err());
        assert!(take("segment.bytes", "2147483648").is_err());
        assert_eq!(take("segment.ms", "600000"), Ok("600000".into()));
        assert!(take("segment.ms", "0").is_err());
        assert_eq!(take("preallocate", " TRUE "), Ok("true".into()));
        assert_eq!(take("preallocate", "false"), Ok("false".into()));
        assert!(take("preallocate", "yes").is_err());
        assert_eq!(take("min.cleanable.dirty.ratio", "0.25"), Ok("0.25".into()));
        assert_eq!(take("min.cleanable.dirty.ratio", "1"), Ok("1.0".into()));
        assert_eq!(take("min.cleanable.dirty.ratio", "-0.0"), Ok("0.0".into()));
        for refused in ["1.5", "-0.1", "NaN", "inf", "half"] {
            assert!(
                take("min.cleanable.dirty.ratio", refused).is_err(),
                "{refused}"
            );
        }
        // Taken, and changing nothing of what the applied ones say.
        assert_eq!(c.min_insync(2), 2);
        assert!(c.deletes());
        let why = parse("remote.storage.enable", Some("false")).unwrap_err();
        assert!(why.contains("segment.bytes"), "{why}");
    }

    #[test]
    fn only_whole_numbers_within_bounds_of_applied_names_are_taken() {
        assert_eq!(parse(MIN_INSYNC_REPLICAS, Some(" 2 ")), Ok(2));
        assert!(parse(MIN_INSYNC_REPLICAS, Some("0")).is_err());
        assert!(parse(MAX_MESSAGE_BYTES, Some("-1")).is_err());
        assert!(parse(MAX_MESSAGE_BYTES, Some("3000000000")).is_err());
        assert!(parse(MAX_MESSAGE_BYTES, None).is_err());
        assert_eq!(parse(RETENTION_MS, Some("-1")), Ok(-1));
        assert!(parse(RETENTION_BYTES, Some("-2")).is_err());
        let policy = |v| parse(CLEANUP_POLICY, Some(v)).map(|bits| show(CLEANUP_POLICY, bits));
        assert_eq!(policy("delete"), Ok("delete".into()));
        assert_eq!(policy(" delete , compact"), Ok("compact,delete".into()));
        assert!(policy("").is_err());
        assert!(policy("compact,snapshot").is_err());
        let holding = |v| {
            let c = TopicConfig::default();
            c.set(CLEANUP_POLICY, v);
            c
        };
        // From the default, delete.
        assert_eq!(
            combine(&holding(None), CLEANUP_POLICY, COMPACT, true),
            Ok(3)
        );
        assert_eq!(
            combine(&holding(Some(3)), CLEANUP_POLICY, DELETE, false),
            Ok(COMPACT)
        );
        assert!(combine(&holding(Some(DELETE)), CLEANUP_POLICY, DELETE, false).is_err());
        let stamp =
            |v| parse(MESSAGE_TIMESTAMP_TYPE, Some(v)).map(|t| show(MESSAGE_TIMESTAMP_TYPE, t));
        assert_eq!(stamp("LogAppendTime"), Ok("LogAppendTime".into()));
        assert_eq!(stamp("CreateTime"), Ok("CreateTime".into()));
        assert!(stamp("logappendtime").is_err());
        let c = TopicConfig::default();
        assert!(!c.log_append_time());
        c.set(MESSAGE_TIMESTAMP_TYPE, Some(LOG_APPEND_TIME));
        assert!(c.log_append_time());
        let codec = |v| parse(COMPRESSION_TYPE, Some(v)).map(|c| show(COMPRESSION_TYPE, c));
        assert_eq!(codec("ZSTD"), Ok("zstd".into()));
        assert_eq!(codec("producer"), Ok("producer".into()));
        assert!(codec("brotli").is_err());
        c.set(
            COMPRESSION_TYPE,
            Some(parse(COMPRESSION_TYPE, Some("lz4")).unwrap()),
        );
        assert_eq!(c.compression(), Some(3));
        c.set(COMPRESSION_TYPE, Some(PRODUCER));
        assert_eq!(c.compression(), None, "each batch as sent");
        assert!(parse("remote.storage.enable", Some("true"))
            .unwrap_err()
            .contains("not a topic config this broker takes"));
    }
}
