//! The consumer protocol's assignments, which group members exchange
//! through the coordinator inside SyncGroup: decoded (by the crate, after
//! the bounds guard) only so that the coordinator can check them.

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

#[cfg(test)]
mod tests {
    use super::*;

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
