//! DescribeConfigs: the served brokers' and topics' settings under Kafka's
//! names, with the values this cluster really runs with (what its
//! configuration says, a topic's own settings, and the fixed behaviour of
//! what it does not configure). Only the topic configs this broker takes
//! (applied, or kept without effect) can be altered; every other entry is
//! read-only.

use super::checks::Checks;
use super::service::BrokerService;
use super::topic_config::{
    self, TopicConfig, Value, CLEANUP_POLICY, COMPRESSION_GZIP_LEVEL, COMPRESSION_LZ4_LEVEL,
    COMPRESSION_TYPE, COMPRESSION_ZSTD_LEVEL, MAX_MESSAGE_BYTES, MESSAGE_TIMESTAMP_AFTER_MAX_MS,
    MESSAGE_TIMESTAMP_BEFORE_MAX_MS, MESSAGE_TIMESTAMP_TYPE, MIN_INSYNC_REPLICAS, RETENTION_BYTES,
    RETENTION_MS, UNCLEAN_LEADER_ELECTION_ENABLE,
};
use super::txns::MAX_TIMEOUT;
use super::LiveConfig;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_response::CreatableTopicConfigs;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

/// Kafka's resource types.
pub(super) const TOPIC: i8 = 2;
pub(super) const BROKER: i8 = 4;
/// A broker's loggers, and the client-metrics subscriptions: listed by
/// ListConfigResources, not described here.
pub(super) const BROKER_LOGGER: i8 = 8;
pub(super) const CLIENT_METRICS: i8 = 16;
/// A group's own settings (Kafka 4's group configs).
pub(super) const GROUP: i8 = 32;

/// Where a value comes from, as Kafka's `ConfigSource` numbers it.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;
const GROUP_CONFIG: i8 = 8;

/// Kafka's `ConfigType` numbers (v3 and later).
#[derive(Clone, Copy)]
enum Kind {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

/// One setting: name, value, where it comes from, its type.
type Entry = (&'static str, String, i8, Kind);

impl BrokerService {
    /// A group's settings, set or default.
    fn group_configs(&self, group: &str) -> Vec<Entry> {
        self.cluster
            .groups
            .configs_of(group)
            .into_iter()
            .map(|(name, value, set)| {
                let source = if set { GROUP_CONFIG } else { DEFAULT_CONFIG };
                let kind = if name == "share.auto.offset.reset" {
                    Kind::String
                } else {
                    Kind::Int
                };
                (name, value, source, kind)
            })
            .collect()
    }

    /// This broker's settings.
    fn broker_configs(&self) -> Vec<Entry> {
        let cfg = &self.cluster.cfg;
        let ms = |d: std::time::Duration| d.as_millis().to_string();
        let set = STATIC_BROKER_CONFIG;
        vec![
            ("broker.id", self.id.to_string(), set, Kind::Int),
            ("num.partitions", cfg.partitions.to_string(), set, Kind::Int),
            (
                "default.replication.factor",
                cfg.replication_factor.to_string(),
                set,
                Kind::Int,
            ),
            (
                "min.insync.replicas",
                cfg.min_insync.to_string(),
                set,
                Kind::Int,
            ),
            (
                "message.max.bytes",
                cfg.message_max_bytes.to_string(),
                set,
                Kind::Int,
            ),
            (
                "auto.create.topics.enable",
                cfg.auto_create.to_string(),
                set,
                Kind::Boolean,
            ),
            (
                "replica.lag.time.max.ms",
                ms(cfg.replica_lag),
                set,
                Kind::Long,
            ),
            (
                "group.initial.rebalance.delay.ms",
                ms(cfg.groups.initial_rebalance_delay),
                set,
                Kind::Int,
            ),
            (
                "group.min.session.timeout.ms",
                ms(cfg.groups.min_session_timeout),
                set,
                Kind::Int,
            ),
            (
                "group.max.session.timeout.ms",
                ms(cfg.groups.max_session_timeout),
                set,
                Kind::Int,
            ),
            (
                "group.consumer.migration.policy",
                cfg.groups.migration_policy.name().to_string(),
                set,
                Kind::String,
            ),
            (
                "group.max.size",
                cfg.groups.classic_max_size.to_string(),
                set,
                Kind::Int,
            ),
            (
                "group.consumer.max.size",
                cfg.groups.consumer_max_size.to_string(),
                set,
                Kind::Int,
            ),
            (
                "group.share.max.size",
                cfg.groups.share_max_size.to_string(),
                set,
                Kind::Int,
            ),
            (
                "offsets.topic.num.partitions",
                cfg.groups.offsets_partitions.to_string(),
                set,
                Kind::Int,
            ),
            (
                "transaction.max.timeout.ms",
                ms(MAX_TIMEOUT),
                DEFAULT_CONFIG,
                Kind::Int,
            ),
            {
                let (value, source) = retention_ms(cfg);
                ("log.retention.ms", value, source, Kind::Long)
            },
            (
                "log.retention.bytes",
                cfg.retention_bytes.to_string(),
                set,
                Kind::Long,
            ),
        ]
    }

    /// A topic's settings: its own where it sets them, the broker's where
    /// it inherits them.
    fn topic_configs(&self, config: &TopicConfig) -> Vec<Entry> {
        let cfg = &self.cluster.cfg;
        // Its own value, else the broker's (or Kafka's default, where the
        // broker has no setting of its own).
        let own = |name: &'static str, broker: (String, i8), kind| match config.get(name) {
            Some(v) => (
                name,
                topic_config::show(name, v),
                DYNAMIC_TOPIC_CONFIG,
                kind,
            ),
            None => (name, broker.0, broker.1, kind),
        };
        let broker = |value: String| (value, STATIC_BROKER_CONFIG);
        let level = |name| {
            let default = topic_config::default_level(name).unwrap_or_default();
            own(name, (default.to_string(), DEFAULT_CONFIG), Kind::Int)
        };
        let mut entries = vec![
            own(
                CLEANUP_POLICY,
                ("delete".into(), DEFAULT_CONFIG),
                Kind::List,
            ),
            own(
                MIN_INSYNC_REPLICAS,
                broker(cfg.min_insync.to_string()),
                Kind::Int,
            ),
            own(
                MAX_MESSAGE_BYTES,
                broker(cfg.message_max_bytes.to_string()),
                Kind::Int,
            ),
            own(RETENTION_MS, retention_ms(cfg), Kind::Long),
            own(
                RETENTION_BYTES,
                broker(cfg.retention_bytes.to_string()),
                Kind::Long,
            ),
            own(
                MESSAGE_TIMESTAMP_TYPE,
                ("CreateTime".into(), DEFAULT_CONFIG),
                Kind::String,
            ),
            own(
                COMPRESSION_TYPE,
                ("producer".into(), DEFAULT_CONFIG),
                Kind::String,
            ),
            own(
                MESSAGE_TIMESTAMP_BEFORE_MAX_MS,
                (i64::MAX.to_string(), DEFAULT_CONFIG),
                Kind::Long,
            ),
            own(
                MESSAGE_TIMESTAMP_AFTER_MAX_MS,
                (i64::MAX.to_string(), DEFAULT_CONFIG),
                Kind::Long,
            ),
            level(COMPRESSION_GZIP_LEVEL),
            level(COMPRESSION_LZ4_LEVEL),
            level(COMPRESSION_ZSTD_LEVEL),
            own(
                UNCLEAN_LEADER_ELECTION_ENABLE,
                ("false".into(), DEFAULT_CONFIG),
                Kind::Boolean,
            ),
        ];
        // Those taken without effect, each with Kafka's default.
        entries.extend(topic_config::INERT.iter().map(|c| {
            let kind = match c.value {
                Value::Int(..) => Kind::Int,
                Value::Long(_) => Kind::Long,
                Value::Boolean => Kind::Boolean,
                Value::Ratio => Kind::Double,
            };
            own(c.name, (c.default.into(), DEFAULT_CONFIG), kind)
        }));
        entries
    }

    /// A new topic's settings, as CreateTopics (v5 and later) reports them.
    pub(crate) fn created_topic_configs(&self, config: &TopicConfig) -> Vec<CreatableTopicConfigs> {
        self.topic_configs(config)
            .into_iter()
            .map(|e| {
                let described = entry(e, true, false, 0);
                let mut c = CreatableTopicConfigs::default();
                c.name = described.name;
                c.value = described.value;
                c.read_only = described.read_only;
                c.config_source = described.config_source;
                c
            })
            .collect()
    }

    /// Each resource asked for: a topic (UNKNOWN_TOPIC_OR_PARTITION if
    /// there is none), this broker (by its id, or empty for the cluster's
    /// defaults; another broker's id is INVALID_REQUEST, as Kafka answers:
    /// a client asks each broker for its own), or INVALID_REQUEST for any
    /// other type.
    pub(crate) fn describe_configs(
        &self,
        r: DescribeConfigsRequest,
        version: i16,
    ) -> DescribeConfigsResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = DescribeConfigsResponse::default();
        response.results = r
            .resources
            .into_iter()
            .map(|resource| {
                let mut out = DescribeConfigsResult::default();
                // Null on success, as Kafka sends it (the codec's default
                // is empty).
                out.error_message = None;
                out.resource_type = resource.resource_type;
                let name = resource.resource_name.to_string();
                // Only a topic's applied settings and a group's can change.
                let writable = |n: &str| match resource.resource_type {
                    TOPIC => topic_config::is_taken(n),
                    GROUP => true,
                    _ => false,
                };
                let entries = match resource.resource_type {
                    TOPIC => match self.cluster.topic(&name) {
                        Some(topic) => Ok(self.topic_configs(&topic.config)),
                        None => Err((ResponseError::UnknownTopicOrPartition, "no such topic")),
                    },
                    BROKER if name.is_empty() || name == self.id.to_string() => {
                        Ok(self.broker_configs())
                    }
                    BROKER => Err((ResponseError::InvalidRequest, "another broker's id")),
                    GROUP => Ok(self.group_configs(&name)),
                    _ => Err((
                        ResponseError::InvalidRequest,
                        "not a topic, broker or group",
                    )),
                };
                out.resource_name = resource.resource_name;
                match entries {
                    Ok(entries) => {
                        let wanted = |n: &str| {
                            resource
                                .configuration_keys
                                .as_ref()
                                .is_none_or(|keys| keys.iter().any(|k| k.as_str() == n))
                        };
                        out.configs = entries
                            .into_iter()
                            .filter(|(n, ..)| wanted(n))
                            .map(|e| {
                                let writable = writable(e.0);
                                entry(e, writable, r.include_synonyms, version)
                            })
                            .collect();
                    }
                    Err((error, message)) => {
                        out.error_code = error.code();
                        out.error_message = Some(StrBytes::from_static_str(message));
                    }
                }
                out
            })
            .collect();
        response
    }
}

/// The broker's `log.retention.ms` and where it comes from: for ever (-1)
/// by default.
fn retention_ms(cfg: &LiveConfig) -> (String, i8) {
    match cfg.retention_ms {
        Some(ms) => (ms.to_string(), STATIC_BROKER_CONFIG),
        None => ("-1".into(), DEFAULT_CONFIG),
    }
}

/// One entry of a result.
fn entry(
    (name, value, source, kind): Entry,
    writable: bool,
    synonyms: bool,
    version: i16,
) -> DescribeConfigsResourceResult {
    let mut e = DescribeConfigsResourceResult::default();
    e.name = StrBytes::from_static_str(name);
    e.value = Some(StrBytes::from_string(value.clone()));
    e.read_only = !writable;
    e.config_source = source;
    if synonyms {
        let mut s = DescribeConfigsSynonym::default();
        s.name = e.name.clone();
        s.value = Some(StrBytes::from_string(value));
        s.source = source;
        e.synonyms = vec![s];
    }
    if version >= 3 {
        e.config_type = kind as i8;
    }
    e
}
