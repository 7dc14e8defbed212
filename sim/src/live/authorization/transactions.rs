//! Transactions and idempotent producers.

use super::*;

/// The transaction APIs: a transactional id needs WRITE; an idempotent
/// producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
pub(super) fn transactions(asker: &Asker, request: &mut RequestKind) -> Option<Gate> {
    let a = asker.clone();
    Some(match request {
        RequestKind::InitProducerId(r) => {
            let refusal = match &r.transactional_id {
                Some(id) => (!a.txn(code::WRITE, id)).then_some(TXN_DENIED),
                None => (!a.cluster(code::IDEMPOTENT_WRITE)
                    && !a.may_on_some(code::WRITE, code::TOPIC))
                .then_some(CLUSTER_DENIED),
            };
            let Some(e) = refusal else {
                return Some(Gate::Pass(None));
            };
            let mut response = InitProducerIdResponse::default();
            response.error_code = error(e);
            response.producer_id = ProducerId(-1);
            response.producer_epoch = -1;
            refuse(ResponseKind::InitProducerId(response))
        }
        RequestKind::AddPartitionsToTxn(r) => {
            let whole = !a.txn(code::WRITE, &r.v3_and_below_transactional_id);
            let any_denied = (r.v3_and_below_topics.iter()).any(|t| !a.topic(code::WRITE, &t.name));
            if !whole && !any_denied {
                return Some(Gate::Pass(None));
            }
            // Nothing is added when anything is refused: the topics allowed
            // are answered OPERATION_NOT_ATTEMPTED, as Kafka answers them.
            let mut response = AddPartitionsToTxnResponse::default();
            response.results_by_topic_v3_and_below = (r.v3_and_below_topics.iter())
                .map(|t| {
                    let e = if whole {
                        TXN_DENIED
                    } else if a.topic(code::WRITE, &t.name) {
                        ResponseError::OperationNotAttempted
                    } else {
                        TOPIC_DENIED
                    };
                    let mut topic = add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default();
                    topic.name = t.name.clone();
                    topic.results_by_partition = (t.partitions.iter())
                        .map(|&p| {
                            let mut out =
                                add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default();
                            out.partition_index = p;
                            out.partition_error_code = error(e);
                            out
                        })
                        .collect();
                    topic
                })
                .collect();
            refuse(ResponseKind::AddPartitionsToTxn(response))
        }
        RequestKind::AddOffsetsToTxn(r) => {
            let refusal = if !a.txn(code::WRITE, &r.transactional_id) {
                Some(TXN_DENIED)
            } else {
                (!a.group(code::READ, &r.group_id)).then_some(GROUP_DENIED)
            };
            let Some(e) = refusal else {
                return Some(Gate::Pass(None));
            };
            let mut response = AddOffsetsToTxnResponse::default();
            response.error_code = error(e);
            refuse(ResponseKind::AddOffsetsToTxn(response))
        }
        RequestKind::EndTxn(r) if !a.txn(code::WRITE, &r.transactional_id) => {
            let mut response = EndTxnResponse::default();
            response.error_code = error(TXN_DENIED);
            response.producer_id = ProducerId(-1);
            response.producer_epoch = -1;
            refuse(ResponseKind::EndTxn(response))
        }
        RequestKind::TxnOffsetCommit(r) => {
            let whole = if !a.txn(code::WRITE, &r.transactional_id) {
                Some(TXN_DENIED)
            } else {
                (!a.group(code::READ, &r.group_id)).then_some(GROUP_DENIED)
            };
            let denied = match whole {
                Some(_) => std::mem::take(&mut r.topics),
                None => refused(&mut r.topics, |t| a.topic(code::READ, &t.name)),
            };
            let e = whole.unwrap_or(TOPIC_DENIED);
            let topics: Vec<_> = topics_refused!(
                denied,
                txn_offset_commit_response::TxnOffsetCommitResponseTopic,
                txn_offset_commit_response::TxnOffsetCommitResponsePartition,
                e
            );
            if whole.is_some() {
                let mut response = TxnOffsetCommitResponse::default();
                response.topics = topics;
                return Some(refuse(ResponseKind::TxnOffsetCommit(response)));
            }
            amend!(TxnOffsetCommit, |response| response.topics.extend(topics))
        }
        RequestKind::ListTransactions(_) => amend!(ListTransactions, |response| {
            (response.transaction_states).retain(|t| a.txn(code::DESCRIBE, &t.transactional_id));
        }),
        RequestKind::DescribeTransactions(_) => amend!(DescribeTransactions, |response| {
            for t in &mut response.transaction_states {
                if !a.txn(code::DESCRIBE, &t.transactional_id) {
                    let id = t.transactional_id.clone();
                    *t = Default::default();
                    t.transactional_id = id;
                    t.error_code = error(TXN_DENIED);
                    t.producer_id = ProducerId(-1);
                    t.producer_epoch = -1;
                    t.transaction_start_time_ms = -1;
                } else {
                    t.topics
                        .retain(|topic| a.topic(code::DESCRIBE, &topic.topic));
                }
            }
        }),
        RequestKind::DescribeProducers(_) => amend!(DescribeProducers, |response| {
            for topic in &mut response.topics {
                if !a.topic(code::READ, &topic.name) {
                    for p in &mut topic.partitions {
                        p.error_code = error(TOPIC_DENIED);
                        p.error_message = None;
                        p.active_producers.clear();
                    }
                }
            }
        }),
        RequestKind::WriteTxnMarkers(r) => {
            if a.cluster(code::ALTER) || a.cluster(code::CLUSTER_ACTION) {
                return Some(Gate::Pass(None));
            }
            let mut response = WriteTxnMarkersResponse::default();
            response.markers = (r.markers.iter())
                .map(|m| {
                    let mut marker = write_txn_markers_response::WritableTxnMarkerResult::default();
                    marker.producer_id = m.producer_id;
                    marker.topics = (m.topics.iter())
                        .map(|t| {
                            let mut topic =
                                write_txn_markers_response::WritableTxnMarkerTopicResult::default();
                            topic.name = t.name.clone();
                            topic.partitions = (t.partition_indexes.iter())
                                .map(|&p| {
                                    let mut out = write_txn_markers_response::WritableTxnMarkerPartitionResult::default();
                                    out.partition_index = p;
                                    out.error_code = error(CLUSTER_DENIED);
                                    out
                                })
                                .collect();
                            topic
                        })
                        .collect();
                    marker
                })
                .collect();
            refuse(ResponseKind::WriteTxnMarkers(response))
        }
        _ => return None,
    })
}
