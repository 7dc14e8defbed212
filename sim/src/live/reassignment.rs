//! Partition reassignment (KIP-455), as Kafka's controller runs it:
//! AlterPartitionReassignments moves a partition's replicas to the brokers
//! named (or cancels a move under way), ListPartitionReassignments lists
//! the moves under way.
//!
//! A move runs in two steps. First the replica set becomes the target's
//! brokers followed by those leaving (`removing`); the brokers new to it
//! (`adding`) start with an empty log and fetch the partition from its
//! start, out of the ISR. Once every broker of the target is in the ISR,
//! the leaving ones are dropped from the replicas and the ISR, and, if the
//! leader was one of them, the first replica of the target in sync leads
//! in a new epoch (what was parked at the old leader is answered
//! NOT_LEADER_OR_FOLLOWER). A move that adds nobody (a new order, fewer
//! replicas) finishes at once if the target is in sync. A move of a
//! partition nobody leads waits: its new brokers have nobody to fetch
//! from until a leader is back. Until the move finishes, an `acks=all`
//! produce waits for the ISR as always: the new brokers count once they
//! have caught up.
//!
//! Cancelling puts back the replicas from before the move (the set less
//! the brokers it was adding) and drops those brokers from the ISR; if
//! one of them led (the target's first replica, once in sync, takes the
//! leadership as the preferred one), the first replica from before in
//! sync leads again. Refused if nobody of the set from before is in
//! sync, which would take an unclean election. Any broker takes both
//! requests, as a KRaft broker forwards them to the controller; the move
//! has started (or been cancelled) when the answer is sent.

use super::checks::Checks;
use super::log::PartitionLog;
use super::service::BrokerService;
use super::topics::Partition;
use super::LiveCluster;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;
use std::time::Instant;

/// Why a partition's reassignment was refused: Kafka's error and message.
type Refusal = (ResponseError, String);

impl PartitionLog {
    /// Whether a reassignment is under way.
    pub fn reassigning(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    /// Starts moving the replicas to `target` (checked already: brokers
    /// that exist, each once); returns the brokers new to the replica set,
    /// which must catch up. Computed from the replica set as it is, so a
    /// move that replaces one under way starts from where that one got.
    fn start_reassignment(&mut self, target: &[u32], now: Instant) -> Vec<u32> {
        let removing = sorted_difference(&self.replicas, target);
        let adding = sorted_difference(target, &self.replicas);
        let mut replicas = target.to_vec();
        replicas.extend(&removing);
        self.set_replicas(replicas, now);
        self.removing = removing;
        self.adding = adding.clone();
        adding
    }

    /// Finishes the reassignment under way if every replica it keeps is in
    /// sync: the leaving replicas leave the set and the ISR. Returns
    /// whether it finished (the leader may have to move).
    fn finish_reassignment(&mut self, now: Instant) -> bool {
        if !self.reassigning() {
            return false;
        }
        let removing = std::mem::take(&mut self.removing);
        let kept: Vec<u32> = without(&self.replicas, &removing);
        let isr: Vec<u32> = without(&self.isr, &removing);
        if kept.is_empty() || isr.is_empty() || !kept.iter().all(|b| isr.contains(b)) {
            self.removing = removing;
            return false;
        }
        self.set_replicas(kept, now);
        self.isr = isr;
        self.adding.clear();
        true
    }

    /// Cancels the reassignment under way: the replicas from before it,
    /// without the brokers it was adding (in the set and in the ISR).
    fn revert_reassignment(&mut self, now: Instant) -> Result<(), ResponseError> {
        if !self.reassigning() {
            return Err(ResponseError::NoReassignmentInProgress);
        }
        let isr = without(&self.isr, &self.adding);
        if isr.is_empty() {
            // Kafka would need an unclean election (`unclean.leader.enable`,
            // which is never on here).
            return Err(ResponseError::InvalidReplicaAssignment);
        }
        let original = without(&self.replicas, &self.adding);
        self.set_replicas(original, now);
        self.isr = isr;
        self.adding.clear();
        self.removing.clear();
        Ok(())
    }
}

/// What of `a` is not in `b`, in broker order (as Kafka's sets).
fn sorted_difference(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = without(a, b);
    out.sort_unstable();
    out
}

/// `a` without the brokers of `b`, in `a`'s order.
fn without(a: &[u32], b: &[u32]) -> Vec<u32> {
    a.iter().copied().filter(|x| !b.contains(x)).collect()
}

impl LiveCluster {
    /// Starts moving `p` (partition `index` of `topic`) to `target`, or
    /// cancels the move under way (`None`).
    fn reassign(
        &self,
        p: &Arc<Partition>,
        topic: &str,
        index: i32,
        target: Option<&[BrokerId]>,
    ) -> Result<(), Refusal> {
        let target = target.map(|t| self.checked_target(t)).transpose()?;
        let now = Instant::now();
        let mut log = p.log.lock();
        if log.deleted {
            return Err(unknown_partition(topic, index));
        }
        let Some(target) = target else {
            log.revert_reassignment(now).map_err(|e| match e {
                ResponseError::InvalidReplicaAssignment => (
                    e,
                    format!(
                        "Unable to revert partition assignment for {topic}:{index} because it \
                         would require an unclean leader election."
                    ),
                ),
                e => (e, e.to_string()),
            })?;
            // The leader may be a broker the move was adding (the
            // preferred replica of the target, in sync already).
            self.lead_within_replicas(p, log);
            return Ok(());
        };
        let joining = log.start_reassignment(&target, now);
        let end = log.log_end();
        // An offline partition has nobody to fetch from: they catch up
        // once a leader is back and appends again.
        let led = log.leader.is_some();
        drop(log);
        // They fetch the whole log; what is appended meanwhile reaches
        // them as it reaches every follower.
        if led {
            self.replicate_later(p, &joining, end);
        }
        self.finish_reassignment(p);
        Ok(())
    }

    /// The brokers of `target`, if Kafka's controller takes them: at least
    /// one, each a broker of the cluster (up or not), none twice.
    fn checked_target(&self, target: &[BrokerId]) -> Result<Vec<u32>, Refusal> {
        let invalid = |why: String| (ResponseError::InvalidReplicaAssignment, why);
        if target.is_empty() {
            return Err(invalid(
                "The manual partition assignment includes an empty replica list.".into(),
            ));
        }
        let mut brokers = Vec::with_capacity(target.len());
        for &BrokerId(id) in target {
            let b = u32::try_from(id)
                .ok()
                .filter(|&b| (b as usize) < self.brokers.len())
                .ok_or_else(|| {
                    invalid(format!(
                        "The manual partition assignment includes broker {id}, but no such \
                         broker is registered."
                    ))
                })?;
            if brokers.contains(&b) {
                return Err(invalid(format!(
                    "The manual partition assignment includes the broker {id} more than once."
                )));
            }
            brokers.push(b);
        }
        Ok(brokers)
    }

    /// Finishes `p`'s reassignment if its target is in sync, and moves the
    /// leadership if its leader left.
    pub(crate) fn finish_reassignment(&self, p: &Arc<Partition>) {
        let mut log = p.log.lock();
        if !log.finish_reassignment(Instant::now()) {
            return;
        }
        self.lead_within_replicas(p, log);
    }

    /// After the replica set changed: a leader that left it hands over to
    /// the first replica in sync and up, and the purgatories are checked
    /// where the high watermark moved (a lagging replica left the ISR).
    fn lead_within_replicas(
        &self,
        p: &Arc<Partition>,
        mut log: parking_lot::MutexGuard<'_, PartitionLog>,
    ) {
        let mut rewritten = Vec::new();
        let mut old = None;
        if log.leader.is_some_and(|l| !log.replicas.contains(&l)) {
            old = log.leader;
            let next = log
                .replicas
                .iter()
                .copied()
                .find(|&b| log.isr.contains(&b) && self.is_unfenced(b));
            rewritten.extend(self.hand_over(p, &mut log, next));
        }
        self.after_leader_change(p, log, old, rewritten);
    }
}

fn unknown_partition(topic: &str, index: i32) -> Refusal {
    (
        ResponseError::UnknownTopicOrPartition,
        format!("Unable to find partition {topic}:{index}."),
    )
}

impl BrokerService {
    pub(crate) fn alter_partition_reassignments(
        &self,
        r: AlterPartitionReassignmentsRequest,
    ) -> AlterPartitionReassignmentsResponse {
        Checks::bump(&self.checks().admin_requests);
        let mut response = AlterPartitionReassignmentsResponse::default();
        response.error_message = None;
        response.responses = r
            .topics
            .into_iter()
            .map(|t| {
                let mut out = ReassignableTopicResponse::default();
                out.partitions = t
                    .partitions
                    .iter()
                    .map(|asked| {
                        let index = asked.partition_index;
                        let moved = match self.cluster.topic(&t.name) {
                            None => Err((
                                ResponseError::UnknownTopicOrPartition,
                                format!("Unable to find a topic named {}.", &*t.name),
                            )),
                            Some(_) => self
                                .partition(&t.name, index)
                                .map_err(|_| unknown_partition(&t.name, index))
                                .and_then(|p| {
                                    self.cluster.reassign(
                                        &p,
                                        &t.name,
                                        index,
                                        asked.replicas.as_deref(),
                                    )
                                }),
                        };
                        let mut result = ReassignablePartitionResponse::default();
                        result.partition_index = index;
                        // A message only with an error, as Kafka's.
                        (result.error_code, result.error_message) = match moved {
                            Ok(()) => (0, None),
                            Err((error, message)) => {
                                (error.code(), Some(StrBytes::from_string(message)))
                            }
                        };
                        result
                    })
                    .collect();
                out.name = t.name;
                out
            })
            .collect();
        response
    }

    pub(crate) fn list_partition_reassignments(
        &self,
        r: ListPartitionReassignmentsRequest,
    ) -> ListPartitionReassignmentsResponse {
        Checks::bump(&self.checks().admin_requests);
        let asked: Vec<(Arc<super::topics::Topic>, Option<Vec<i32>>)> = match r.topics {
            None => self
                .cluster
                .topics()
                .into_iter()
                .map(|t| (t, None))
                .collect(),
            // Topics that do not exist are left out, as Kafka leaves them.
            Some(topics) => topics
                .into_iter()
                .filter_map(|t| {
                    let topic = self.cluster.topic(&t.name)?;
                    Some((topic, Some(t.partition_indexes)))
                })
                .collect(),
        };
        let mut response = ListPartitionReassignmentsResponse::default();
        response.error_message = None;
        response.topics = asked
            .into_iter()
            .filter_map(|(topic, indexes)| {
                let indexes =
                    indexes.unwrap_or_else(|| (0..topic.partitions.len() as i32).collect());
                let partitions: Vec<OngoingPartitionReassignment> = indexes
                    .into_iter()
                    .filter_map(|index| {
                        let p = topic.partitions.get(usize::try_from(index).ok()?)?;
                        let log = p.log.lock();
                        if !log.reassigning() || log.deleted {
                            return None;
                        }
                        let ids = |brokers: &[u32]| -> Vec<BrokerId> {
                            brokers.iter().map(|&b| BrokerId(b as i32)).collect()
                        };
                        let mut out = OngoingPartitionReassignment::default();
                        out.partition_index = index;
                        out.replicas = ids(&log.replicas);
                        out.adding_replicas = ids(&log.adding);
                        out.removing_replicas = ids(&log.removing);
                        Some(out)
                    })
                    .collect();
                (!partitions.is_empty()).then(|| {
                    let mut out = OngoingTopicReassignment::default();
                    out.name = TopicName(StrBytes::from_string(topic.name.to_string()));
                    out.partitions = partitions;
                    out
                })
            })
            .collect();
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A partition on `replicas`, all in sync, with `end` records.
    fn log(replicas: &[u32], end: i64) -> PartitionLog {
        let now = Instant::now();
        let mut log = PartitionLog::new(replicas.to_vec(), now);
        log.replica_leo = vec![end; replicas.len()];
        log
    }

    #[test]
    fn a_move_to_new_brokers_waits_for_them_to_be_in_sync() {
        let now = Instant::now();
        let mut l = log(&[0, 1], 10);
        assert_eq!(l.start_reassignment(&[2, 1], now), vec![2]);
        assert_eq!(
            (l.replicas.clone(), l.adding.clone(), l.removing.clone()),
            (vec![2, 1, 0], vec![2], vec![0])
        );
        // The newcomer starts empty, out of the ISR; the others keep theirs.
        assert_eq!(l.replica_leo, vec![0, 10, 10]);
        assert_eq!(l.isr, vec![0, 1]);
        assert!(!l.finish_reassignment(now), "2 is not in sync");
        assert!(l.reassigning());
        // It caught up (as `follower_caught_up` records it).
        l.replica_leo[0] = 10;
        l.isr.push(2);
        assert!(l.finish_reassignment(now));
        assert_eq!(
            (l.replicas.clone(), l.isr.clone()),
            (vec![2, 1], vec![1, 2])
        );
        assert_eq!(l.replica_leo, vec![10, 10]);
        assert!(!l.reassigning());
    }

    #[test]
    fn a_new_order_or_fewer_replicas_in_sync_finish_at_once() {
        let now = Instant::now();
        let mut l = log(&[0, 1, 2], 5);
        // A new order alone moves nothing: it is done as it starts.
        assert!(l.start_reassignment(&[2, 0, 1], now).is_empty());
        assert!(!l.reassigning());
        assert_eq!(l.replicas, vec![2, 0, 1]);
        assert!(l.start_reassignment(&[1], now).is_empty());
        assert_eq!(
            (l.replicas.clone(), l.removing.clone()),
            (vec![1, 0, 2], vec![0, 2])
        );
        assert!(l.finish_reassignment(now));
        assert_eq!((l.replicas.clone(), l.isr.clone()), (vec![1], vec![1]));
        assert_eq!(l.replica_leo, vec![5]);
    }

    #[test]
    fn a_shrink_waits_for_what_it_keeps_to_be_in_sync() {
        let now = Instant::now();
        let mut l = log(&[0, 1, 2], 5);
        l.isr = vec![0, 2];
        l.start_reassignment(&[0, 1], now);
        assert!(!l.finish_reassignment(now), "1 lags");
        assert_eq!(l.removing, vec![2], "still under way");
        l.isr.push(1);
        assert!(l.finish_reassignment(now));
        assert_eq!(
            (l.replicas.clone(), l.isr.clone()),
            (vec![0, 1], vec![0, 1])
        );
    }

    #[test]
    fn cancelling_puts_back_the_replicas_from_before() {
        let now = Instant::now();
        let mut l = log(&[0, 1], 7);
        assert_eq!(
            l.revert_reassignment(now),
            Err(ResponseError::NoReassignmentInProgress)
        );
        l.start_reassignment(&[2, 3], now);
        l.isr.push(3);
        assert_eq!(l.revert_reassignment(now), Ok(()));
        assert_eq!(
            (l.replicas.clone(), l.isr.clone()),
            (vec![0, 1], vec![0, 1])
        );
        assert_eq!(l.replica_leo, vec![7, 7]);
        assert!(!l.reassigning());
    }

    #[test]
    fn a_cancel_that_would_need_an_unclean_election_is_refused() {
        let now = Instant::now();
        let mut l = log(&[0], 3);
        l.start_reassignment(&[1], now);
        l.isr = vec![1];
        assert_eq!(
            l.revert_reassignment(now),
            Err(ResponseError::InvalidReplicaAssignment)
        );
        assert!(l.reassigning(), "left as it was");
        assert_eq!(l.replicas, vec![1, 0]);
    }

    #[test]
    fn a_second_move_starts_from_where_the_first_got() {
        let now = Instant::now();
        let mut l = log(&[0, 1], 4);
        l.start_reassignment(&[1, 2], now);
        // 2 is being added; the next move drops it and adds 3 instead.
        assert_eq!(l.start_reassignment(&[1, 3], now), vec![3]);
        assert_eq!(
            (l.replicas.clone(), l.removing.clone()),
            (vec![1, 3, 0, 2], vec![0, 2])
        );
        assert_eq!(l.adding, vec![3]);
    }
}
