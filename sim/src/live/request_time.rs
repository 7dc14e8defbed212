//! The request-time quota (`request_percentage`) as Kafka's brokers apply
//! it (`ClientRequestQuotaManager`): the time a broker spends handling a
//! client's requests, in percent of one thread, is measured over the same
//! eleven one-second samples as the byte rates (`throttling.rs`), and past
//! the quota the client is throttled for (O - T) / T * W, at most one
//! sample's second, as Kafka bounds it.
//!
//! What is timed is the handling: each poll of the request's future, from
//! the first (up to where it parks or answers) to the one that answers a
//! parked request. Kafka times its request handler's thread and its
//! network thread; here decoding and encoding are the front's and are not
//! timed, and the time a request waits parked counts in neither. The first
//! poll's time decides the throttle at once, before the connection's next
//! request is read: this front reads on while a request is parked, so a
//! throttle decided at the answer would let a client pipeline past its
//! quota. The time of the polls after it is counted without a throttle,
//! as Kafka counts its network thread's.
//!
//! The throttle goes in the answer's `throttle_time_ms` (the larger of it
//! and a byte-rate or mutation throttle), in every response that has the
//! field, and the connection reads nothing more meanwhile. A produce
//! before v6 or a fetch before v8 is answered only when the throttle is
//! over, as for the byte rates. Exempt, as in Kafka: a produce with
//! `acks=0`. ApiVersions is the front's and is not timed.
//!
//! A fetch or share fetch whose client is over the quota is answered
//! empty, its records not counted against its byte rate, as Kafka answers
//! it; where Kafka decides that with the fetch's own time counted, here
//! it is decided on the time counted before the fetch (its own is counted
//! once it has been handled), so the fetch that takes a client over the
//! quota keeps its records, and the next one is emptied.

use super::checks::Checks;
use super::client_quotas::{Client, Measured, Quota};
use super::service::BrokerService;
use super::throttling::{holds_answer, millis};
use crate::wire::{Answer, Principal, Throttle};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

pin_project! {
    /// A request's handling, timed poll by poll against its client's
    /// `request_percentage` when one is set.
    pub(crate) struct Timed<F> {
        #[pin]
        call: F,
        timing: Option<Timing>,
    }
}

/// What a timed request needs to count its time and throttle its client.
pub(crate) struct Timing {
    service: Arc<BrokerService>,
    /// The quota's measurement its time counts in, and the quota.
    key: (Quota, Measured),
    limit: f64,
    connection: Throttle,
    /// Whether the client is too old to throttle itself, so that its
    /// answer is held until the throttle is over.
    holds: bool,
    /// Whether the first poll has been counted.
    counted: bool,
    /// The throttle the first poll's time decided.
    throttled: Duration,
}

impl Timing {
    /// The timing of `request`, if a `request_percentage` applies to its
    /// client and the request is not exempt. The quota is looked up once
    /// per request, and a client it does not apply to is not timed.
    pub(crate) fn of(
        service: &Arc<BrokerService>,
        header: &RequestHeader,
        request: &RequestKind,
        principal: &Principal,
        connection: &Throttle,
    ) -> Option<Timing> {
        if !service.cluster.client_quotas.times_requests() {
            return None;
        }
        // Exempt as in Kafka: an `acks=0` produce, which gets no answer to
        // carry a throttle, and WriteTxnMarkers, a cluster action whose
        // answer Kafka sends unthrottled.
        if matches!(request, RequestKind::Produce(r) if r.acks == 0)
            || matches!(request, RequestKind::WriteTxnMarkers(_))
        {
            return None;
        }
        // Kafka's quotas take a client without an id as the empty id.
        let client = Client {
            user: principal.name(),
            id: header.client_id.as_deref().unwrap_or_default(),
        };
        let quotas = &service.cluster.client_quotas;
        let (limit, measured) = quotas.applying(Quota::Request, client)?;
        let api = ApiKey::try_from(header.request_api_key).ok()?;
        Some(Timing {
            service: Arc::clone(service),
            key: (Quota::Request, measured),
            limit,
            connection: connection.clone(),
            holds: holds_answer(api, header.request_api_version),
            counted: false,
            throttled: Duration::ZERO,
        })
    }

    /// Counts one poll's `spent` time; the first's decides the throttle.
    fn count(&mut self, spent: Duration) {
        let throttle = (self.service).request_time(&self.key, self.limit, spent);
        if self.counted {
            return;
        }
        self.counted = true;
        if !throttle.is_zero() {
            Checks::bump(&self.service.checks().throttled);
            self.connection.mute(throttle);
            self.throttled = throttle;
        }
    }

    /// The answer, saying the throttle.
    fn apply(&self, mut answer: Answer) -> Answer {
        if self.throttled.is_zero() {
            return answer;
        }
        if let Some(response) = &mut answer.response {
            raise_throttle(response, millis(self.throttled));
        }
        if self.holds {
            answer.hold = answer.hold.max(self.throttled);
        }
        answer
    }
}

impl<F> Timed<F> {
    /// `call`, timed if `timing` says so.
    pub(crate) fn new(call: F, timing: Option<Timing>) -> Self {
        Timed { call, timing }
    }
}

impl<F: Future<Output = Answer>> Future for Timed<F> {
    type Output = Answer;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        let this = self.project();
        let Some(timing) = this.timing.as_mut() else {
            return this.call.poll(cx);
        };
        let start = Instant::now();
        let polled = this.call.poll(cx);
        timing.count(start.elapsed());
        polled.map(|answer| timing.apply(answer))
    }
}

/// Raises `response`'s `throttle_time_ms` to at least `ms`. Every response
/// of the APIs this broker serves carries the field (in the versions that
/// have it: the codecs leave it out of the others), but WriteTxnMarkers',
/// which is never throttled.
pub(crate) fn raise_throttle(response: &mut ResponseKind, ms: i32) {
    macro_rules! raise {
        ($($api:ident),* $(,)?) => {
            match response {
                $(ResponseKind::$api(r) => r.throttle_time_ms = r.throttle_time_ms.max(ms),)*
                _ => {}
            }
        };
    }
    raise!(
        AddOffsetsToTxn,
        AddPartitionsToTxn,
        AlterClientQuotas,
        AlterConfigs,
        AlterPartitionReassignments,
        AlterUserScramCredentials,
        ApiVersions,
        ConsumerGroupDescribe,
        ConsumerGroupHeartbeat,
        CreateAcls,
        CreatePartitions,
        CreateTopics,
        DeleteAcls,
        DeleteGroups,
        DeleteRecords,
        DeleteTopics,
        DescribeAcls,
        DescribeClientQuotas,
        DescribeCluster,
        DescribeConfigs,
        DescribeGroups,
        DescribeLogDirs,
        DescribeProducers,
        DescribeTopicPartitions,
        DescribeTransactions,
        DescribeUserScramCredentials,
        ElectLeaders,
        EndTxn,
        Fetch,
        FindCoordinator,
        Heartbeat,
        IncrementalAlterConfigs,
        InitProducerId,
        JoinGroup,
        LeaveGroup,
        ListConfigResources,
        ListGroups,
        ListOffsets,
        ListPartitionReassignments,
        ListTransactions,
        Metadata,
        OffsetCommit,
        OffsetDelete,
        OffsetFetch,
        OffsetForLeaderEpoch,
        Produce,
        ShareAcknowledge,
        ShareFetch,
        ShareGroupDescribe,
        ShareGroupHeartbeat,
        SyncGroup,
        TxnOffsetCommit,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{FetchResponse, MetadataResponse, ShareFetchResponse};

    #[test]
    fn a_throttle_is_raised_never_lowered() {
        let mut metadata = ResponseKind::Metadata(MetadataResponse::default());
        raise_throttle(&mut metadata, 250);
        let mut fetch = FetchResponse::default();
        fetch.throttle_time_ms = 900;
        let mut fetch = ResponseKind::Fetch(fetch);
        raise_throttle(&mut fetch, 250);
        let mut share = ResponseKind::ShareFetch(ShareFetchResponse::default());
        raise_throttle(&mut share, 1);
        match (metadata, fetch, share) {
            (ResponseKind::Metadata(m), ResponseKind::Fetch(f), ResponseKind::ShareFetch(s)) => {
                assert_eq!((m.throttle_time_ms, f.throttle_time_ms), (250, 900));
                assert_eq!(s.throttle_time_ms, 1);
            }
            _ => unreachable!(),
        }
    }
}
