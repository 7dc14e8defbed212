//! The consumer protocol's subscriptions and assignments, which group
//! members exchange through the coordinator inside JoinGroup and
//! SyncGroup. The coordinator decodes them to check assignments and tell
//! which topics a group reads; for a classic member of a consumer-protocol
//! group it reads the whole subscription and writes the assignment itself.

use super::bounds;
use bytes::Bytes;
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::collections::{BTreeMap, BTreeSet};

/// The versions of the embedded protocol this coordinator reads and
/// writes; a member's higher version is read as the highest, as Kafka's
/// `ConsumerProtocol` does.
const VERSIONS: std::ops::RangeInclusive<i16> = 0..=3;

/// A consumer-protocol subscription, read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// As the member wrote it (an assignment for it is written in it).
    pub version: i16,
    /// The topics it subscribes to.
    pub topics: Vec<String>,
    /// The partitions it owns, by topic name (from version 1; none before).
    pub owned: Vec<(String, Vec<i32>)>,
    /// Its rack (from version 3).
    pub rack: Option<String>,
}

/// The subscription in `bytes`; `None` if they are not one.
pub fn decode_subscription(bytes: &Bytes) -> Option<Subscription> {
    bounds::consumer_subscription(bytes).ok()?;
    let mut buf = bytes.clone();
    let version = bytes::Buf::get_i16(&mut buf);
    let read = version.clamp(*VERSIONS.start(), *VERSIONS.end());
    let s = ConsumerProtocolSubscription::decode(&mut buf, read).ok()?;
    Some(Subscription {
        version,
        topics: s.topics.iter().map(|t| t.to_string()).collect(),
        owned: s
            .owned_partitions
            .into_iter()
            .map(|t| (t.topic.0.to_string(), t.partitions))
            .collect(),
        rack: s.rack_id.map(|r| r.to_string()).filter(|r| !r.is_empty()),
    })
}

/// An assignment of `partitions` (by topic name) in the embedded
/// protocol's `version`, with no user data.
pub fn encode_assignment(partitions: &BTreeMap<String, BTreeSet<i32>>, version: i16) -> Bytes {
    let version = version.clamp(*VERSIONS.start(), *VERSIONS.end());
    let mut assignment = ConsumerProtocolAssignment::default();
    assignment.assigned_partitions = partitions
        .iter()
        .map(|(topic, ps)| {
            let mut t = TopicPartition::default();
            t.topic = TopicName(StrBytes::from_string(topic.clone()));
            t.partitions = ps.iter().copied().collect();
            t
        })
        .collect();
    let mut out = bytes::BytesMut::new();
    out.extend_from_slice(&version.to_be_bytes());
    // Encoding a value built here fails only on a field the version
    // cannot carry, and none of these is such a field.
    if assignment.encode(&mut out, version).is_err() {
        out.truncate(2);
        out.extend_from_slice(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    }
    out.freeze()
}

/// The (topic, partition) pairs of a consumer-protocol assignment; `None`
/// if the bytes are not one (another protocol type, or malformed). An
/// empty assignment (a member given nothing) is `Some` of nothing.
pub fn decode_assignment(bytes: &Bytes) -> Option<Vec<(String, i32)>> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    bounds::consumer_assignment(bytes).ok()?;
    let mut buf = bytes.clone();
    let version = i16::from_be_bytes([buf[0], buf[1]]);
    let _ = bytes::Buf::get_i16(&mut buf);
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3)).ok()?;
    Some(
        assignment
            .assigned_partitions
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |&p| (t.topic.0.to_string(), p))
            })
            .collect(),
    )
}

/// The topics a consumer-protocol subscription names (what a member
/// offers in JoinGroup); `None` if the bytes are not one. Every version
/// starts with its version and the topics, which is all that is read.
pub fn subscribed_topics(bytes: &[u8]) -> Option<Vec<String>> {
    let mut rest = bytes.get(2..)?; // the version
    let count = i32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
    rest = &rest[4..];
    // Each topic takes at least its 2-byte length.
    let count = usize::try_from(count).ok()?;
    if count.saturating_mul(2) > rest.len() {
        return None;
    }
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        let len = i16::from_be_bytes(rest.get(..2)?.try_into().ok()?);
        let len = usize::try_from(len).ok()?;
        let name = rest.get(2..2 + len)?;
        topics.push(String::from_utf8(name.to_vec()).ok()?);
        rest = &rest[2 + len..];
    }
    Some(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_names_its_topics_or_is_not_one() {
        // Version 1, topics "a" and "bc", then user data and owned
        // partitions, which are not read.
        let bytes = [
            0, 1, 0, 0, 0, 2, 0, 1, b'a', 0, 2, b'b', b'c', 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(
            subscribed_topics(&bytes),
            Some(vec!["a".to_string(), "bc".to_string()])
        );
        // 2^31 - 1 topics in 3 bytes; a name running past the end; too
        // short for a count.
        assert_eq!(
            subscribed_topics(&[0, 1, 0x7f, 0xff, 0xff, 0xff, 0, 1, b'a']),
            None
        );
        assert_eq!(subscribed_topics(&[0, 1, 0, 0, 0, 1, 0, 5, b'a']), None);
        assert_eq!(subscribed_topics(&[0, 1, 0, 0]), None);
    }

    #[test]
    fn an_assignment_announcing_more_partitions_than_it_holds_is_not_decoded() {
        // Version 0, one topic "t", 2^31 - 1 partitions in 0 bytes.
        let bytes = Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 1, b't', 0x7f, 0xff, 0xff, 0xff]);
        assert_eq!(decode_assignment(&bytes), None);
        // Version 0, one topic "t" with partitions 0 and 3, no user data.
        let bytes = Bytes::from_static(&[
            0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff,
            0xff,
        ]);
        assert_eq!(
            decode_assignment(&bytes),
            Some(vec![("t".to_string(), 0), ("t".to_string(), 3)])
        );
    }

    #[test]
    fn a_subscription_is_read_whole_and_an_assignment_written_in_its_version() {
        // Version 1: topic "t", null user data, owning t-0 and t-2.
        let bytes = Bytes::from_static(&[
            0, 1, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0,
            2, 0, 0, 0, 0, 0, 0, 0, 2,
        ]);
        let s = decode_subscription(&bytes).expect("a subscription");
        assert_eq!(s.version, 1);
        assert_eq!(s.topics, vec!["t".to_string()]);
        assert_eq!(s.owned, vec![("t".to_string(), vec![0, 2])]);
        assert_eq!(s.rack, None);
        // Owned partitions announced beyond the bytes; a version 0
        // subscription has none.
        assert_eq!(
            decode_subscription(&Bytes::from_static(&[
                0, 1, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff
            ])),
            None
        );
        let v0 = Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(decode_subscription(&v0).expect("v0").owned, Vec::new());
        let by_name = BTreeMap::from([("t".to_string(), BTreeSet::from([0, 3]))]);
        for version in [0, 1, 3, 7] {
            let written = encode_assignment(&by_name, version);
            assert_eq!(&written[..2], &version.min(3).to_be_bytes());
            assert_eq!(
                decode_assignment(&written),
                Some(vec![("t".to_string(), 0), ("t".to_string(), 3)])
            );
        }
    }
}
