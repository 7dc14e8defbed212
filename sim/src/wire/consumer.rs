//! The consumer protocol's subscriptions and assignments, which group
//! members exchange through the coordinator inside JoinGroup and
//! SyncGroup: decoded only so that the coordinator can check assignments
//! and tell which topics a group reads.

use super::bounds;
use bytes::Bytes;
use kafka_protocol::messages::ConsumerProtocolAssignment;
use kafka_protocol::protocol::Decodable;

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
}
