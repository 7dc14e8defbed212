//! The data plane's requests: what may be produced, fetched, listed and
//! looked up by topic.

use super::*;

/// Produce, Fetch, ListOffsets, Metadata, OffsetForLeaderEpoch,
/// DescribeTopicPartitions.
pub(super) fn data_plane(asker: &Asker, version: i16, request: &mut RequestKind) -> Option<Gate> {
    let a = asker.clone();
    Some(match request {
        RequestKind::Produce(r) => {
            // Unanswered (acks=0): what is refused is only dropped.
            let answered = r.acks != 0;
            let txn = r.transactional_id.as_deref();
            if txn.is_some_and(|id| !a.txn(code::WRITE, id)) {
                if !answered {
                    r.topic_data.clear();
                    return Some(Gate::Pass(None));
                }
                let refusal = produce_refused(&r.topic_data, TXN_DENIED);
                return Some(refuse(ResponseKind::Produce(refusal)));
            }
            let denied = refused(&mut r.topic_data, |t| {
                a.topic_by(code::WRITE, &t.name, t.topic_id)
            });
            if !answered {
                return Some(Gate::Pass(None));
            }
            let answer = produce_refused(&denied, TOPIC_DENIED);
            amend!(Produce, |response| response
                .responses
                .extend(answer.responses))
        }
        RequestKind::Fetch(r) => {
            // A follower's fetch is the cluster's own (CLUSTER_ACTION); here
            // only simulated followers replicate, so one from the wire is
            // checked as Kafka checks it and refused whole when denied.
            let replica = r.replica_id.0 >= 0 || r.replica_state.replica_id.0 >= 0;
            if replica && !a.cluster(code::CLUSTER_ACTION) {
                let denied = std::mem::take(&mut r.topics);
                return Some(refuse(ResponseKind::Fetch(fetch_refused(&denied))));
            }
            if replica {
                return Some(Gate::Pass(None));
            }
            let denied = refused(&mut r.topics, |t| {
                a.topic_by(code::READ, &t.topic, t.topic_id)
            });
            let answer = fetch_refused(&denied);
            // A fetch session may answer for partitions this request did not
            // name: each topic is checked again in the response.
            amend!(Fetch, |response| {
                for topic in &mut response.responses {
                    if !a.topic_by(code::READ, &topic.topic, topic.topic_id) {
                        for p in &mut topic.partitions {
                            *p = fetch_partition_refused(p.partition_index);
                        }
                    }
                }
                response.responses.extend(answer.responses);
            })
        }
        RequestKind::ListOffsets(r) => {
            let denied = refused(&mut r.topics, |t| a.topic(code::DESCRIBE, &t.name));
            amend!(ListOffsets, |response| {
                response.topics.extend(topics_refused!(
                    denied,
                    list_offsets_response::ListOffsetsTopicResponse,
                    list_offsets_response::ListOffsetsPartitionResponse,
                    TOPIC_DENIED,
                    timestamp = -1,
                    offset = -1
                ))
            })
        }
        RequestKind::Metadata(r) => metadata(a, version, r),
        RequestKind::OffsetForLeaderEpoch(r) => {
            if r.replica_id.0 >= 0 && a.cluster(code::CLUSTER_ACTION) {
                return Some(Gate::Pass(None));
            }
            amend!(OffsetForLeaderEpoch, |response| {
                for topic in &mut response.topics {
                    if !a.topic(code::DESCRIBE, &topic.topic) {
                        for p in &mut topic.partitions {
                            p.error_code = error(TOPIC_DENIED);
                            p.leader_epoch = -1;
                            p.end_offset = -1;
                        }
                    }
                }
            })
        }
        RequestKind::DescribeTopicPartitions(r) => {
            let listed = r.topics.is_empty();
            amend!(DescribeTopicPartitions, |response| {
                if listed {
                    response.topics.retain(|t| {
                        (t.name.as_deref()).is_some_and(|n| a.topic(code::DESCRIBE, n))
                    });
                }
                for topic in &mut response.topics {
                    let name = topic
                        .name
                        .as_deref()
                        .map(|n| n.to_string())
                        .unwrap_or_default();
                    if !a.topic(code::DESCRIBE, &name) {
                        *topic = Default::default();
                        topic.name = Some(TopicName(s(&name)));
                        topic.error_code = error(TOPIC_DENIED);
                    } else {
                        topic.topic_authorized_operations = a.operations_if_asked(
                            topic.topic_authorized_operations,
                            code::TOPIC,
                            &name,
                        );
                    }
                }
            })
        }
        _ => return None,
    })
}

fn produce_refused(
    topics: &[produce_request::TopicProduceData],
    e: ResponseError,
) -> ProduceResponse {
    let mut response = ProduceResponse::default();
    response.responses = (topics.iter())
        .map(|t| {
            let mut topic = produce_response::TopicProduceResponse::default();
            topic.name = t.name.clone();
            topic.topic_id = t.topic_id;
            topic.partition_responses = (t.partition_data.iter())
                .map(|p| {
                    let mut out = produce_response::PartitionProduceResponse::default();
                    out.index = p.index;
                    out.error_code = error(e);
                    out.base_offset = -1;
                    out.log_append_time_ms = -1;
                    out.log_start_offset = -1;
                    out
                })
                .collect();
            topic
        })
        .collect();
    response
}

fn fetch_partition_refused(index: i32) -> fetch_response::PartitionData {
    let mut out = fetch_response::PartitionData::default();
    out.partition_index = index;
    out.error_code = error(TOPIC_DENIED);
    out.high_watermark = -1;
    out.last_stable_offset = -1;
    out.log_start_offset = -1;
    out.preferred_read_replica = BrokerId(-1);
    out
}

fn fetch_refused(topics: &[fetch_request::FetchTopic]) -> FetchResponse {
    let mut response = FetchResponse::default();
    response.responses = (topics.iter())
        .map(|t| {
            let mut topic = fetch_response::FetchableTopicResponse::default();
            topic.topic = t.topic.clone();
            topic.topic_id = t.topic_id;
            topic.partitions = (t.partitions.iter())
                .map(|p| fetch_partition_refused(p.partition))
                .collect();
            topic
        })
        .collect();
    response
}

/// Metadata: topics asked for that the principal may not describe are
/// answered TOPIC_AUTHORIZATION_FAILED, and so is a topic it would create
/// without the right to (CREATE on the cluster or the topic); a request
/// for every topic lists only those it may describe.
fn metadata(a: Asker, version: i16, r: &mut MetadataRequest) -> Gate {
    let may_create = a.cluster.cfg.auto_create && (version < 4 || r.allow_auto_topic_creation);
    let mut denied: Vec<(Option<String>, Uuid)> = Vec::new();
    if let Some(topics) = &mut r.topics {
        let creates_any = a.cluster(code::CREATE);
        for t in refused(topics, |t| {
            let name = t.name.as_deref().map(|n| n.to_string()).unwrap_or_default();
            match a.topic_name(&name, t.topic_id) {
                None => true,
                Some(name) => {
                    a.topic(code::DESCRIBE, &name)
                        && (!may_create
                            || a.cluster.topic(&name).is_some()
                            || creates_any
                            || a.topic(code::CREATE, &name))
                }
            }
        }) {
            let name = t.name.as_deref().map(|n| n.to_string());
            denied.push((name, t.topic_id));
        }
    }
    let listed = r.topics.is_none();
    amend!(Metadata, |response| {
        if listed {
            response
                .topics
                .retain(|t| (t.name.as_deref()).is_some_and(|n| a.topic(code::DESCRIBE, n)));
        }
        for topic in &mut response.topics {
            if let Some(name) = topic.name.as_deref() {
                let name = name.to_string();
                topic.topic_authorized_operations =
                    a.operations_if_asked(topic.topic_authorized_operations, code::TOPIC, &name);
            }
        }
        response.cluster_authorized_operations =
            a.cluster_operations_if_asked(response.cluster_authorized_operations);
        response.topics.extend(denied.into_iter().map(|(name, id)| {
            let mut topic = metadata_response::MetadataResponseTopic::default();
            topic.error_code = error(TOPIC_DENIED);
            // Asked by id, the name is not told; asked by name, the id.
            if id.is_nil() {
                topic.name = name.map(|n| TopicName(s(&n)));
            } else {
                topic.topic_id = id;
            }
            topic
        }));
    })
}
