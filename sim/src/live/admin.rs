//! The broker side of the requests that set things up rather than move
//! data: InitProducerId, which gives an idempotent producer its id, and
//! CreateTopics, CreatePartitions and DeleteTopics, which an admin client
//! sends. Any broker answers them: the cluster model they change is one.

use super::service::topic_name;
use super::service::BrokerService;
use super::throttling::Mutating;
use super::topic_config::{self, TopicConfig};
use super::topics::valid_topic_name;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, InitProducerIdRequest,
    InitProducerIdResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashSet;
use std::sync::Arc;
use uuid::Uuid;

/// The most partitions one CreateTopics may ask for in a topic (as many
/// as `--partitions` accepts).
const MAX_PARTITIONS: i32 = 100_000;

/// Why a topic was not created: an error code and Kafka's kind of message.
type Refusal = (ResponseError, String);

impl BrokerService {
    /// A new producer id at epoch 0, for a producer with idempotence on;
    /// a transactional one's comes from its coordinator
    /// (`txn_service.rs`).
    pub(crate) fn init_producer_id(
        &self,
        r: InitProducerIdRequest,
        version: i16,
    ) -> InitProducerIdResponse {
        if let Some(id) = &r.transactional_id {
            return self.init_transactional_producer(&r, &id.0, version);
        }
        let mut response = InitProducerIdResponse::default();
        // Kafka gives an idempotent producer a fresh id whether or not it
        // names its current one (asking for a new epoch after an error).
        response.producer_id = ProducerId(self.cluster.new_producer_id());
        response.producer_epoch = 0;
        response
    }

    /// Creates each topic asked for that can be, as the controller does,
    /// and says why for each that cannot; nothing is created with
    /// `validate_only`.
    pub(crate) fn create_topics(
        &self,
        r: CreateTopicsRequest,
        version: i16,
        mutating: &Mutating,
    ) -> CreateTopicsResponse {
        let repeated = named_twice(r.topics.iter().map(|t| &*t.name.0));
        let mut response = CreateTopicsResponse::default();
        response.topics = r
            .topics
            .into_iter()
            .map(|topic| {
                let name = topic.name.0.to_string();
                let mut out = CreatableTopicResult::default();
                out.name = topic.name.clone();
                let created = if repeated.contains(&name) {
                    Err(repeated_refusal(&name))
                } else {
                    self.create_one(&name, &topic, r.validate_only, mutating)
                };
                match created {
                    Ok((partitions, replication_factor, id, config)) => {
                        // Null, as Kafka's controller answers a success
                        // (the crate's default is empty).
                        out.error_message = None;
                        // v7 and later; zero for a topic only validated.
                        out.topic_id = id;
                        if version >= 5 {
                            out.num_partitions = partitions;
                            out.replication_factor = replication_factor;
                            out.configs = Some(self.created_topic_configs(&config));
                        }
                    }
                    Err((error, message)) => {
                        out.error_code = error.code();
                        out.error_message = Some(StrBytes::from_string(message));
                        out.num_partitions = -1;
                        out.replication_factor = -1;
                    }
                }
                out
            })
            .collect();
        response
    }

    /// Checks one topic of a CreateTopics and creates it unless
    /// `validate_only`; its partitions, replication factor, topic id (zero
    /// if only validated) and own settings. Its partitions count against
    /// the mutation quota, validated only or not, as in Kafka.
    fn create_one(
        &self,
        name: &str,
        topic: &CreatableTopic,
        validate_only: bool,
        mutating: &Mutating,
    ) -> Result<(i32, i16, Uuid, Arc<TopicConfig>), Refusal> {
        let cluster = &self.cluster;
        let exists = || {
            Err((
                ResponseError::TopicAlreadyExists,
                format!("Topic '{name}' already exists."),
            ))
        };
        if !valid_topic_name(name) {
            return Err((
                ResponseError::InvalidTopicException,
                format!("'{name}' is not a valid topic name: 1 to 249 characters of a-z, A-Z, 0-9, '.', '_' and '-', other than '.' and '..'."),
            ));
        }
        // Before the checks below, and again at creation (another request
        // may create it in between).
        if cluster.topic(name).is_some() {
            return exists();
        }
        // Its own settings: only those this broker takes, each once.
        let config = TopicConfig::default();
        for c in &topic.configs {
            let invalid = |why: String| Err((ResponseError::InvalidConfig, why));
            if config.get(&c.name).is_some() {
                return invalid(format!("'{}' is given twice.", c.name));
            }
            match topic_config::parse(&c.name, c.value.as_deref()) {
                Ok(v) => config.set(&c.name, Some(v)),
                Err(why) => return invalid(why),
            };
        }
        let brokers = cluster.cfg.brokers;
        let replicas = if topic.assignments.is_empty() {
            let partitions = match topic.num_partitions {
                -1 => cluster.cfg.partitions as i32,
                n if (1..=MAX_PARTITIONS).contains(&n) => n,
                n => {
                    return Err((
                        ResponseError::InvalidPartitions,
                        format!("Number of partitions must be between 1 and {MAX_PARTITIONS}, or -1 for the default; it was {n}."),
                    ))
                }
            };
            let replication_factor = match topic.replication_factor {
                -1 => cluster.cfg.replication_factor.min(brokers),
                n if n >= 1 && (n as u32) <= brokers => n as u32,
                n => {
                    return Err((
                        ResponseError::InvalidReplicationFactor,
                        format!("Replication factor must be between 1 and the {brokers} brokers, or -1 for the default; it was {n}."),
                    ))
                }
            };
            cluster.spread(partitions as u32, replication_factor)
        } else {
            self.assigned_replicas(topic)?
        };
        let partitions = replicas.len() as i32;
        let replication_factor = replicas.first().map_or(0, |r| r.len() as i16);
        mutating.take(replicas.len())?;
        if validate_only {
            return Ok((
                partitions,
                replication_factor,
                Uuid::nil(),
                Arc::new(config),
            ));
        }
        match cluster.create_topic_with(name, replicas, config) {
            Ok(created) => {
                let config = Arc::clone(&created.config);
                Ok((partitions, replication_factor, created.id, config))
            }
            Err(_) => exists(),
        }
    }

    /// The replica lists a CreateTopics assigns by hand: every partition
    /// from 0 once, each with the same number of distinct live-or-not
    /// brokers of this cluster; the counts must then be left at -1.
    fn assigned_replicas(&self, topic: &CreatableTopic) -> Result<Vec<Vec<u32>>, Refusal> {
        let invalid = |why: String| Err((ResponseError::InvalidReplicaAssignment, why));
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err((
                ResponseError::InvalidRequest,
                "Both the number of partitions and the replication factor must be -1 when replicas are assigned.".to_string(),
            ));
        }
        let n = topic.assignments.len();
        if n > MAX_PARTITIONS as usize {
            return invalid(format!(
                "{n} partitions assigned; at most {MAX_PARTITIONS}."
            ));
        }
        let mut replicas: Vec<Option<Vec<u32>>> = vec![None; n];
        for a in &topic.assignments {
            let index = a.partition_index;
            let Some(slot) = usize::try_from(index)
                .ok()
                .and_then(|i| replicas.get_mut(i))
            else {
                return invalid(format!("Partition {index} is out of 0..{n}."));
            };
            if slot.is_some() {
                return invalid(format!("Partition {index} is assigned twice."));
            }
            let brokers = self.replica_list(index, &a.broker_ids)?;
            if brokers.is_empty() {
                return invalid(format!("Partition {index} has no replicas."));
            }
            *slot = Some(brokers);
        }
        let replicas: Vec<Vec<u32>> = replicas.into_iter().flatten().collect();
        if replicas.iter().any(|r| r.len() != replicas[0].len()) {
            return invalid("Every partition must have as many replicas.".to_string());
        }
        Ok(replicas)
    }

    /// Adds partitions to each topic asked for that can take them, as the
    /// controller does (a topic's partitions never go away), and says why
    /// for each that cannot; nothing changes with `validate_only`.
    pub(crate) fn create_partitions(
        &self,
        r: CreatePartitionsRequest,
        mutating: &Mutating,
    ) -> CreatePartitionsResponse {
        let repeated = named_twice(r.topics.iter().map(|t| &*t.name.0));
        let mut response = CreatePartitionsResponse::default();
        response.results = r
            .topics
            .iter()
            .map(|topic| {
                let name = topic.name.0.to_string();
                let mut out = CreatePartitionsTopicResult::default();
                out.name = topic.name.clone();
                let added = if repeated.contains(&name) {
                    Err(repeated_refusal(&name))
                } else {
                    self.add_partitions(&name, topic, r.validate_only, mutating)
                };
                if let Err((error, message)) = added {
                    out.error_code = error.code();
                    out.error_message = Some(StrBytes::from_string(message));
                }
                out
            })
            .collect();
        response
    }

    /// Checks one topic of a CreatePartitions and grows it to `count`
    /// partitions unless `validate_only`: the new ones with the replicas
    /// assigned, or spread as a new topic's, with the topic's replication
    /// factor.
    fn add_partitions(
        &self,
        name: &str,
        topic: &CreatePartitionsTopic,
        validate_only: bool,
        mutating: &Mutating,
    ) -> Result<(), Refusal> {
        let cluster = &self.cluster;
        let Some(current) = cluster.topic(name) else {
            return Err((
                ResponseError::UnknownTopicOrPartition,
                format!("Topic '{name}' does not exist."),
            ));
        };
        let have = current.partitions.len() as i32;
        if topic.count <= have || topic.count > MAX_PARTITIONS {
            return Err((
                ResponseError::InvalidPartitions,
                format!("Topic '{name}' has {have} partitions; the count must be more than that and at most {MAX_PARTITIONS}, it was {}.", topic.count),
            ));
        }
        let replication_factor = current.partitions[0].log.lock().replicas.len();
        let new = (topic.count - have) as usize;
        let replicas = match &topic.assignments {
            None => cluster.spread(new as u32, replication_factor as u32),
            Some(assigned) => {
                let invalid = |why: String| Err((ResponseError::InvalidReplicaAssignment, why));
                if assigned.len() != new {
                    return invalid(format!(
                        "{} assignments for {new} new partitions.",
                        assigned.len()
                    ));
                }
                let mut replicas = Vec::with_capacity(new);
                for (i, a) in assigned.iter().enumerate() {
                    let index = have + i as i32;
                    let brokers = self.replica_list(index, &a.broker_ids)?;
                    if brokers.len() != replication_factor {
                        return invalid(format!(
                            "New partition {}: {} replicas, where the topic has {replication_factor}.",
                            have as usize + i,
                            brokers.len()
                        ));
                    }
                    replicas.push(brokers);
                }
                replicas
            }
        };
        mutating.take(new)?;
        if validate_only {
            return Ok(());
        }
        cluster
            .grow_topic(name, have as usize, replicas)
            .map_err(|now| {
                (
                    ResponseError::InvalidPartitions,
                    format!("Topic '{name}' changed meanwhile: it has {now} partitions."),
                )
            })
    }

    /// Partition `index`'s replicas as assigned by hand: brokers of this
    /// cluster, each named once.
    fn replica_list(&self, index: i32, ids: &[BrokerId]) -> Result<Vec<u32>, Refusal> {
        let brokers = self.cluster.cfg.brokers;
        let mut list = Vec::with_capacity(ids.len());
        for b in ids {
            match u32::try_from(b.0) {
                Ok(id) if id < brokers && !list.contains(&id) => list.push(id),
                _ => {
                    return Err((
                        ResponseError::InvalidReplicaAssignment,
                        format!("Partition {index}: broker {} is not one of this cluster's {brokers} or is named twice.", b.0),
                    ))
                }
            }
        }
        Ok(list)
    }

    /// Deletes each topic named (by name before v6, by name or id since):
    /// UNKNOWN_TOPIC_OR_PARTITION for a name that does not exist,
    /// UNKNOWN_TOPIC_ID for an id that does not.
    pub(crate) fn delete_topics(
        &self,
        r: DeleteTopicsRequest,
        mutating: &Mutating,
    ) -> DeleteTopicsResponse {
        let named = r
            .topic_names
            .into_iter()
            .map(|n| (Some(n), Default::default()));
        let states = r.topics.into_iter().map(|t| (t.name, t.topic_id));
        let mut response = DeleteTopicsResponse::default();
        response.responses = named
            .chain(states)
            .map(|(name, topic_id)| {
                let mut out = DeletableTopicResult::default();
                out.topic_id = topic_id;
                // By id: answered with the name it had.
                let by_id = name.is_none().then_some(topic_id);
                let name = name.or_else(|| {
                    let topic = self.cluster.topic_by_id(topic_id)?;
                    Some(topic_name(&topic.name))
                });
                // Its partitions count against the mutation quota.
                let partitions =
                    |n: &TopicName| self.cluster.topic(&n.0).map(|t| t.partitions.len());
                let refused = match &name {
                    None => Some((
                        ResponseError::UnknownTopicId,
                        format!("No topic has the id {topic_id}."),
                    )),
                    Some(n) => match partitions(n).map(|p| mutating.take(p)) {
                        Some(Err(refusal)) => Some(refusal),
                        Some(Ok(())) if self.cluster.delete_topic(&n.0, by_id).is_some() => None,
                        _ => Some((
                            ResponseError::UnknownTopicOrPartition,
                            format!("Topic '{}' does not exist.", n.0),
                        )),
                    },
                };
                out.name = name;
                if let Some((error, message)) = refused {
                    out.error_code = error.code();
                    out.error_message = Some(StrBytes::from_string(message));
                }
                out
            })
            .collect();
        response
    }
}

/// The names that occur more than once in a request.
fn named_twice<'a>(names: impl Iterator<Item = &'a str>) -> HashSet<String> {
    let mut seen = HashSet::new();
    names
        .filter(|name| !seen.insert(*name))
        .map(str::to_string)
        .collect()
}

/// What a topic named twice in one request is told.
fn repeated_refusal(name: &str) -> Refusal {
    (
        ResponseError::InvalidRequest,
        format!("Topic '{name}' is named more than once in the request."),
    )
}
