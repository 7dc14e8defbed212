//! The broker side of ShareFetch and ShareAcknowledge: a member's
//! acknowledgements applied, then records acquired for it on the
//! partitions of its share session that this broker leads, each
//! acquisition under a lock in the cluster's lock purgatory. A fetch that
//! finds nothing to acquire waits in the broker's share-fetch purgatory.

use super::sessions::{Step, Tp};
use super::{end_timers, AcquisitionLock, LockTimer, ShareKey, SharePart, WireShareFetch};
use crate::live::checks::Checks;
use crate::live::client_quotas::{Client, Quota};
use crate::live::group_service::text;
use crate::live::leader_hints::{node_endpoints, LeaderHints};
use crate::live::service::BrokerService;
use crate::live::throttling::millis;
use crate::wire::Throttle;
use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_acknowledge_request::AcknowledgementBatch as AckBatch;
use kafka_protocol::messages::share_acknowledge_response::{
    self as acked, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::share_fetch_request::AcknowledgementBatch as FetchAckBatch;
use kafka_protocol::messages::share_fetch_response::{
    self as fetched, AcquiredRecords, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
};
use purgatory::Outcome;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// One acknowledgement batch: first and last offset, and the types.
type Ack = (i64, i64, Vec<i8>);

/// What a partition is answered.
#[derive(Default)]
struct Answer {
    error: i16,
    /// Set when the request acknowledged records of it.
    ack_error: Option<i16>,
    records: Bytes,
    acquired: Vec<(i64, i64, i16)>,
}

impl Answer {
    fn error(error: i16) -> Answer {
        Answer {
            error,
            ..Answer::default()
        }
    }
}

impl From<&FetchAckBatch> for AckBatchView {
    fn from(b: &FetchAckBatch) -> Self {
        AckBatchView((b.first_offset, b.last_offset, b.acknowledge_types.clone()))
    }
}

impl From<&AckBatch> for AckBatchView {
    fn from(b: &AckBatch) -> Self {
        AckBatchView((b.first_offset, b.last_offset, b.acknowledge_types.clone()))
    }
}

/// The two requests' acknowledgement batches, as one shape.
struct AckBatchView(Ack);

fn code(e: ResponseError) -> i16 {
    e.code()
}

impl BrokerService {
    /// ShareFetch (v1) for `client`, whose `consumer_byte_rate` quota caps
    /// what one answer may hold and may throttle it, as its
    /// `request_percentage` may. As Kafka answers a throttled share
    /// fetch: with nothing, what it would have carried not counted; its
    /// acknowledgements were applied, and the records it acquired stay
    /// acquired until their lock runs out.
    pub(crate) async fn share_fetch(
        &self,
        r: ShareFetchRequest,
        client: Client<'_>,
        throttle: &Throttle,
    ) -> ShareFetchResponse {
        let mut response = self.share_fetch_response(r, client).await;
        let throttled = match self.request_time_over(client) {
            over if over.is_zero() => {
                let bytes: u64 = (response.responses.iter())
                    .flat_map(|t| t.partitions.iter())
                    .map(|p| p.records.as_ref().map_or(0, |r| r.len() as u64))
                    .sum();
                self.throttled_for(Quota::Fetch, client, bytes)
            }
            over => over,
        };
        if !throttled.is_zero() {
            throttle.mute(throttled);
            response = ShareFetchResponse::default();
            response.throttle_time_ms = millis(throttled);
        }
        response
    }

    async fn share_fetch_response(
        &self,
        r: ShareFetchRequest,
        client: Client<'_>,
    ) -> ShareFetchResponse {
        let checks = Arc::clone(&self.cluster.checks);
        Checks::bump(&checks.share_requests);
        let mut response = ShareFetchResponse::default();
        let group = r
            .group_id
            .as_ref()
            .map(|g| g.0.to_string())
            .unwrap_or_default();
        response.acquisition_lock_timeout_ms = self.lock_duration(&group).as_millis() as i32;
        let member = r
            .member_id
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default();
        let refuse = |mut response: ShareFetchResponse, e: ResponseError, message: &str| {
            response.error_code = e.code();
            response.error_message = Some(text(message));
            response
        };
        if group.is_empty() || member.is_empty() {
            let message = "A share fetch names its group and its member.";
            return refuse(response, ResponseError::InvalidRequest, message);
        }
        let named: Vec<Tp> = r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, p.partition_index)))
            .collect();
        let forgotten: Vec<Tp> = r
            .forgotten_topics_data
            .iter()
            .flat_map(|t| t.partitions.iter().map(|&p| (t.topic_id, p)))
            .collect();
        let acks: Vec<(Tp, Vec<AckBatchView>)> = r
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .filter(|p| !p.acknowledgement_batches.is_empty())
                    .map(|p| {
                        let batches = p.acknowledgement_batches.iter().map(Into::into);
                        ((t.topic_id, p.partition_index), batches.collect())
                    })
            })
            .collect();
        if r.share_session_epoch == 0 && !acks.is_empty() {
            let message = "Acknowledge data present on the initial fetch request.";
            return refuse(response, ResponseError::InvalidRequest, message);
        }
        let sessions = &self.cluster.brokers[self.id as usize].share_sessions;
        let who = (group.as_str(), member.as_str());
        let (step, partitions) =
            match sessions.step(who, r.share_session_epoch, (&named, &forgotten), true) {
                Ok(stepped) => stepped,
                Err(e) => return refuse(response, e, e.to_string().as_str()),
            };
        let group: Arc<str> = Arc::from(group);
        let member: Arc<str> = Arc::from(member);
        let mut answers: BTreeMap<Tp, Answer> = BTreeMap::new();
        for (tp, batches) in acks {
            let error = self.acknowledge(&group, &member, tp, batches);
            answers.entry(tp).or_default().ack_error = Some(error);
        }
        if step == Step::Closed {
            self.release(&group, &member, &partitions);
        } else {
            self.fetch_into(&mut answers, (&group, &member), &partitions, (&r, client))
                .await;
        }
        // A new session is answered in full, a later fetch with what it
        // acquired, failed on or acknowledged.
        if step == Step::Opened {
            for tp in &partitions {
                answers.entry(*tp).or_default();
            }
        }
        let mut hints = LeaderHints::new(self);
        for ((topic, index), a) in answers {
            let mut d = fetched::PartitionData::default();
            d.partition_index = index;
            d.error_code = a.error;
            d.acknowledge_error_code = a.ack_error.unwrap_or(0);
            d.records = Some(a.records);
            d.acquired_records = a
                .acquired
                .into_iter()
                .map(|(first, last, count)| {
                    let mut ar = AcquiredRecords::default();
                    ar.first_offset = first;
                    ar.last_offset = last;
                    ar.delivery_count = count;
                    ar
                })
                .collect();
            if a.error == code(ResponseError::NotLeaderOrFollower) {
                let (leader, epoch) = self.leader_hint(&mut hints, topic, index);
                d.current_leader.leader_id = leader;
                d.current_leader.leader_epoch = epoch;
            }
            match response.responses.iter_mut().find(|t| t.topic_id == topic) {
                Some(t) => t.partitions.push(d),
                None => {
                    let mut t = ShareFetchableTopicResponse::default();
                    t.topic_id = topic;
                    t.partitions.push(d);
                    response.responses.push(t);
                }
            }
        }
        response.node_endpoints = node_endpoints!(hints, fetched::NodeEndpoint);
        response
    }

    /// ShareAcknowledge (v1).
    pub(crate) fn share_acknowledge(&self, r: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse {
        Checks::bump(&self.cluster.checks.share_requests);
        let mut response = ShareAcknowledgeResponse::default();
        let group = r.group_id.map(|g| g.0.to_string()).unwrap_or_default();
        let member = r.member_id.map(|m| m.to_string()).unwrap_or_default();
        if group.is_empty() || member.is_empty() {
            response.error_code = code(ResponseError::InvalidRequest);
            response.error_message = Some(text(
                "A share acknowledgement names its group and its member.",
            ));
            return response;
        }
        let sessions = &self.cluster.brokers[self.id as usize].share_sessions;
        let who = (group.as_str(), member.as_str());
        let (step, partitions) = match sessions.step(who, r.share_session_epoch, (&[], &[]), false)
        {
            Ok(stepped) => stepped,
            Err(e) => {
                response.error_code = e.code();
                response.error_message = Some(text(&e.to_string()));
                return response;
            }
        };
        let group: Arc<str> = Arc::from(group);
        let member: Arc<str> = Arc::from(member);
        let mut hints = LeaderHints::new(self);
        for t in r.topics {
            let mut out = ShareAcknowledgeTopicResponse::default();
            out.topic_id = t.topic_id;
            for p in t.partitions {
                let tp = (t.topic_id, p.partition_index);
                let batches = p.acknowledgement_batches.iter().map(Into::into).collect();
                let mut d = acked::PartitionData::default();
                d.partition_index = p.partition_index;
                d.error_code = self.acknowledge(&group, &member, tp, batches);
                if d.error_code == code(ResponseError::NotLeaderOrFollower) {
                    let (leader, epoch) =
                        self.leader_hint(&mut hints, t.topic_id, p.partition_index);
                    d.current_leader.leader_id = leader;
                    d.current_leader.leader_epoch = epoch;
                }
                out.partitions.push(d);
            }
            response.responses.push(out);
        }
        if step == Step::Closed {
            self.release(&group, &member, &partitions);
        }
        response.node_endpoints = node_endpoints!(hints, acked::NodeEndpoint);
        response
    }

    /// Acquires records for `member` on `partitions`, waiting in the
    /// share-fetch purgatory up to the request's `max_wait_ms` if there is
    /// nothing to acquire yet.
    async fn fetch_into(
        &self,
        answers: &mut BTreeMap<Tp, Answer>,
        (group, member): (&Arc<str>, &Arc<str>),
        partitions: &[Tp],
        (r, client): (&ShareFetchRequest, Client<'_>),
    ) {
        let mut parts = Vec::new();
        for &tp in partitions {
            match self.share_partition(group, tp) {
                Ok(part) => parts.push((tp, part)),
                Err(e) => answers.entry(tp).or_default().error = e,
            }
        }
        let max_records = usize::try_from(r.max_records)
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or(usize::MAX);
        let max_bytes = self.fetch_cap(client, r.max_bytes);
        let budget = (max_records, max_bytes);
        let mut got = self.acquire((group, member), &parts, budget);
        let max_wait = Duration::from_millis(u64::try_from(r.max_wait_ms).unwrap_or(0));
        let nothing = got
            .iter()
            .all(|(_, a)| a.acquired.is_empty() && a.error == 0);
        if nothing && !parts.is_empty() && !max_wait.is_zero() {
            let keys: Vec<u32> = parts.iter().map(|(_, p)| p.partition.key).collect();
            let checks = &self.cluster.checks;
            let op = WireShareFetch {
                broker: self.id,
                parts: parts
                    .iter()
                    .map(|(_, p)| SharePart {
                        partition: Arc::clone(&p.partition),
                        state: Arc::clone(&p.state),
                    })
                    .collect(),
                max_wait,
                checks: Arc::clone(checks),
                answered: false,
            };
            let purgatory = &self.cluster.brokers[self.id as usize].share_fetch;
            let parked_at = std::time::Instant::now();
            let outcome = match purgatory.try_complete_else_watch(op, &keys) {
                Ok(handle) => {
                    Checks::bump(&checks.parked);
                    let done = handle.await;
                    self.check_outcome(done.outcome, parked_at, max_wait);
                    done.outcome
                }
                Err(_) => Outcome::Shutdown,
            };
            got = match outcome {
                Outcome::Completed | Outcome::Expired => {
                    self.acquire((group, member), &parts, budget)
                }
                Outcome::Cancelled | Outcome::Shutdown => parts
                    .iter()
                    .map(|(tp, _)| (*tp, Answer::error(code(ResponseError::NotLeaderOrFollower))))
                    .collect(),
            };
        }
        for (tp, a) in got {
            let slot = answers.entry(tp).or_default();
            slot.error = a.error;
            slot.records = a.records;
            slot.acquired = a.acquired;
        }
    }

    /// The partition of `tp` and `group`'s state on it (made on first use,
    /// from the group's `share.auto.offset.reset`), or the error code.
    fn share_partition(&self, group: &Arc<str>, (topic, index): Tp) -> Result<SharePart, i16> {
        let t = self
            .cluster
            .topic_by_id(topic)
            .ok_or(code(ResponseError::UnknownTopicId))?;
        let partition = usize::try_from(index)
            .ok()
            .and_then(|i| t.partitions.get(i).cloned())
            .ok_or(code(ResponseError::UnknownTopicOrPartition))?;
        let key = ShareKey {
            group: Arc::clone(group),
            topic,
            partition: index,
        };
        let log = partition.log.lock();
        self.leads(&log, -1)?;
        let earliest = self.cluster.groups.share_from_earliest(group);
        let start = || if earliest { log.log_start } else { log.hw };
        let state = self.cluster.shares.get_or_init(&key, log.epoch, start);
        drop(log);
        Ok(SharePart { partition, state })
    }

    /// Acquires what can be on each partition, within `budget` (records,
    /// bytes) in all.
    fn acquire(
        &self,
        (group, member): (&Arc<str>, &Arc<str>),
        parts: &[(Tp, SharePart)],
        (mut records, mut bytes): (usize, usize),
    ) -> Vec<(Tp, Answer)> {
        let shares = &self.cluster.shares;
        let mut freed: Vec<LockTimer> = Vec::new();
        let mut out = Vec::new();
        for (tp, p) in parts {
            let log = p.partition.log.lock();
            if let Err(e) = self.leads(&log, -1) {
                out.push((*tp, Answer::error(e)));
                continue;
            }
            if records == 0 {
                continue;
            }
            let mut state = p.state.lock();
            if state.leader_epoch != log.epoch {
                // Led by another broker since: nobody holds anything here.
                freed.extend(state.release_all(log.epoch).0);
            }
            freed.extend(state.trim_to(log.log_start));
            let lock = shares.next_lock();
            let Some(a) = state.acquire(member, (records, bytes), &log.batches, log.hw, lock)
            else {
                continue;
            };
            let mut data = BytesMut::new();
            for &i in &a.batches {
                data.extend_from_slice(&log.batches[i].bytes);
            }
            records = records.saturating_sub(a.count);
            bytes = bytes.saturating_sub(data.len());
            let checks = &self.cluster.checks;
            Checks::bump_by(&checks.share_acquired, a.count as u64);
            let op = AcquisitionLock {
                cluster: Arc::downgrade(&self.cluster),
                key: ShareKey {
                    group: Arc::clone(group),
                    topic: tp.0,
                    partition: tp.1,
                },
                partition: Arc::clone(&p.partition),
                lock,
                timeout: self.lock_duration(group),
                checks: Arc::clone(checks),
                answered: false,
            };
            match shares.locks.try_complete_else_watch(op, &[lock]) {
                Ok(handle) => {
                    Checks::bump(&checks.parked);
                    freed.extend(state.set_timer(lock, handle.completer()));
                }
                // Shutting down: nothing is held.
                Err(_) => {
                    state.expire(lock);
                    continue;
                }
            }
            out.push((
                *tp,
                Answer {
                    records: data.freeze(),
                    acquired: a.ranges,
                    ..Answer::default()
                },
            ));
        }
        end_timers(freed);
        out
    }

    /// Applies `member`'s acknowledgement batches on `tp`; the error code.
    fn acknowledge(
        &self,
        group: &Arc<str>,
        member: &str,
        tp: Tp,
        batches: Vec<AckBatchView>,
    ) -> i16 {
        let Some(partition) = self.cluster.partition_by_id(tp.0, tp.1) else {
            return code(ResponseError::UnknownTopicOrPartition);
        };
        let key = ShareKey {
            group: Arc::clone(group),
            topic: tp.0,
            partition: tp.1,
        };
        let mut freed = Vec::new();
        let mut error = 0;
        let mut released = false;
        {
            let log = partition.log.lock();
            if let Err(e) = self.leads(&log, -1) {
                return e;
            }
            let Some(state) = self.cluster.shares.get(&key) else {
                return code(ResponseError::InvalidRecordState);
            };
            let mut state = state.lock();
            if state.leader_epoch != log.epoch {
                freed.extend(state.release_all(log.epoch).0);
            }
            for AckBatchView((first, last, types)) in batches {
                released |= types.contains(&2);
                match state.acknowledge(member, (first, last), &types) {
                    Ok(timers) => freed.extend(timers),
                    Err(e) if error == 0 => error = e.code(),
                    Err(_) => {}
                }
            }
        }
        end_timers(freed);
        if released {
            self.cluster.check_share_fetches(&partition);
        }
        error
    }

    /// Gives back what `member` holds on `partitions` (its session closed).
    fn release(&self, group: &Arc<str>, member: &str, partitions: &[Tp]) {
        for &(topic, partition) in partitions {
            let key = ShareKey {
                group: Arc::clone(group),
                topic,
                partition,
            };
            let Some(state) = self.cluster.shares.get(&key) else {
                continue;
            };
            let (timers, available) = state.lock().release_member(member);
            end_timers(timers);
            if available {
                if let Some(p) = self.cluster.partition_by_id(topic, partition) {
                    self.cluster.check_share_fetches(&p);
                }
            }
        }
    }

    /// How long `group`'s members hold what they acquire.
    fn lock_duration(&self, group: &str) -> Duration {
        let groups = &self.cluster.groups;
        groups
            .config_ms(group, "share.record.lock.duration.ms")
            .unwrap_or(self.cluster.shares.lock_duration)
    }

    /// The leader and epoch of a partition named by topic id.
    fn leader_hint(&self, hints: &mut LeaderHints, topic: uuid::Uuid, index: i32) -> (i32, i32) {
        match self.cluster.topic_by_id(topic) {
            Some(t) => hints.leader_of(&t.name, index),
            None => (-1, -1),
        }
    }
}
