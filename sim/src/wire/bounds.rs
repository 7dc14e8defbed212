//! A guard in front of the request decoders: every array count in a
//! request body must fit in the bytes that follow it.
//!
//! The `kafka-protocol` crate's array decoders reserve the announced count
//! before reading an element, so a 14-byte Metadata request announcing 2^31
//! topics makes it ask for hundreds of gigabytes, and the allocation
//! failure aborts the process. This walk goes over the bodies of the
//! requests the front implements, field by field as Kafka's schemas lay
//! them out, and refuses a count that the rest of the frame cannot hold at
//! the element's smallest encoded size. It builds nothing; the decoding
//! stays the crate's.

use kafka_protocol::messages::ApiKey;

/// Why a body was refused.
pub(crate) type Refused = String;

/// A reader over a body that only checks and skips.
struct Walk<'a> {
    rest: &'a [u8],
    /// Whether this version uses the compact (flexible) encodings.
    flexible: bool,
}

impl<'a> Walk<'a> {
    fn skip(&mut self, n: usize) -> Result<(), Refused> {
        if n > self.rest.len() {
            return Err(format!("{n} bytes announced, {} left", self.rest.len()));
        }
        self.rest = &self.rest[n..];
        Ok(())
    }

    fn int(&mut self, bytes: usize) -> Result<i64, Refused> {
        let field = self.rest.get(..bytes).ok_or("truncated")?;
        let mut v = 0i64;
        for &b in field {
            v = (v << 8) | i64::from(b);
        }
        // Sign-extend.
        let shift = 64 - 8 * bytes as u32;
        self.rest = &self.rest[bytes..];
        Ok((v << shift) >> shift)
    }

    fn uvarint(&mut self) -> Result<u64, Refused> {
        let mut v = 0u64;
        for i in 0..5 {
            let b = *self.rest.first().ok_or("truncated varint")?;
            self.rest = &self.rest[1..];
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than 5 bytes".into())
    }

    /// A length prefix: `None` for null.
    fn length(&mut self, classic_bytes: usize) -> Result<Option<usize>, Refused> {
        if self.flexible {
            Ok(self.uvarint()?.checked_sub(1).map(|n| n as usize))
        } else {
            let n = self.int(classic_bytes)?;
            Ok(usize::try_from(n).ok())
        }
    }

    /// A string or nullable string.
    fn string(&mut self) -> Result<(), Refused> {
        let n = self.length(2)?.unwrap_or(0);
        self.skip(n)
    }

    /// Bytes or nullable bytes.
    fn bytes(&mut self) -> Result<(), Refused> {
        let n = self.length(4)?.unwrap_or(0);
        self.skip(n)
    }

    /// An array whose elements take at least `min` bytes each.
    fn array(
        &mut self,
        min: usize,
        mut element: impl FnMut(&mut Self) -> Result<(), Refused>,
    ) -> Result<(), Refused> {
        let n = self.length(4)?.unwrap_or(0);
        if n.saturating_mul(min) > self.rest.len() {
            return Err(format!("an array of {n} in {} bytes", self.rest.len()));
        }
        for _ in 0..n {
            element(self)?;
        }
        Ok(())
    }

    /// An array of (string, bytes) elements with tagged fields: JoinGroup's
    /// protocols, SyncGroup's assignments.
    fn named_bytes_array(&mut self) -> Result<(), Refused> {
        let min = self.min_len(2) + self.min_len(4) + self.min_tags();
        self.array(min, |w| {
            w.string()?;
            w.bytes()?;
            w.tags()
        })
    }

    /// An array of strings (topic names, group ids).
    fn strings(&mut self) -> Result<(), Refused> {
        let min = self.min_len(2);
        self.array(min, |w| w.string())
    }

    /// An array of topics named by id, each with an array of partition
    /// ids, then tags.
    fn topic_ids_with_partitions(&mut self) -> Result<(), Refused> {
        let min = 16 + self.min_len(4) + self.min_tags();
        self.array(min, |w| {
            w.skip(16)?;
            w.array(4, |w| w.skip(4))?;
            w.tags()
        })
    }

    /// Tagged fields, in flexible versions.
    fn tags(&mut self) -> Result<(), Refused> {
        if !self.flexible {
            return Ok(());
        }
        let n = self.uvarint()? as usize;
        if n.saturating_mul(2) > self.rest.len() {
            return Err(format!("{n} tagged fields in {} bytes", self.rest.len()));
        }
        for _ in 0..n {
            self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.skip(size)?;
        }
        Ok(())
    }

    /// The smallest encoded string, bytes or array: its length prefix.
    fn min_len(&self, classic_bytes: usize) -> usize {
        if self.flexible {
            1
        } else {
            classic_bytes
        }
    }

    fn min_tags(&self) -> usize {
        usize::from(self.flexible)
    }

    /// The topics of an OffsetCommit or a TxnOffsetCommit: for each
    /// partition its index, offset, leader epoch (if `leader_epoch`) and
    /// metadata.
    fn committed_offsets(&mut self, leader_epoch: bool) -> Result<(), Refused> {
        let fixed = 4 + 8 + if leader_epoch { 4 } else { 0 };
        let min_partition = fixed + self.min_len(2) + self.min_tags();
        self.topics(min_partition, |w| {
            w.skip(fixed)?;
            w.string()?; // committed_metadata
            w.tags()
        })
    }

    /// An array of topics (a name, then an array of `partition`s of at
    /// least `min_partition` bytes each, then tags), the shape most
    /// requests share.
    fn topics(
        &mut self,
        min_partition: usize,
        partition: impl FnMut(&mut Self) -> Result<(), Refused>,
    ) -> Result<(), Refused> {
        self.topics_named(false, min_partition, partition)
    }

    /// [`topics`](Self::topics), with each topic named by its 16-byte id
    /// instead of its name if `by_id` (Fetch and Produce from v13).
    fn topics_named(
        &mut self,
        by_id: bool,
        min_partition: usize,
        mut partition: impl FnMut(&mut Self) -> Result<(), Refused>,
    ) -> Result<(), Refused> {
        let min_name = if by_id { 16 } else { self.min_len(2) };
        let min_topic = min_name + self.min_len(4) + self.min_tags();
        self.array(min_topic, |w| {
            if by_id {
                w.skip(16)?;
            } else {
                w.string()?;
            }
            w.array(min_partition, &mut partition)?;
            w.tags()
        })
    }
}

/// Checks a request body (after its header) of `api` at `version`, whose
/// flexible versions start at the crate's header version 2.
pub(crate) fn check(api: ApiKey, version: i16, flexible: bool, body: &[u8]) -> Result<(), Refused> {
    let mut w = Walk {
        rest: body,
        flexible,
    };
    let w = &mut w;
    match api {
        ApiKey::Produce => {
            w.string()?; // transactional_id
            w.skip(2 + 4)?; // acks, timeout_ms
            let min_partition = 4 + w.min_len(4) + w.min_tags();
            // Topics by id from v13.
            w.topics_named(version >= 13, min_partition, |w| {
                w.skip(4)?;
                w.bytes()?;
                w.tags()
            })?;
        }
        ApiKey::Fetch => {
            // The replica id left the fixed fields for a tagged one in v15.
            if version <= 14 {
                w.skip(4)?; // replica_id
            }
            w.skip(4 + 4 + 4 + 1)?; // max_wait, min_bytes, max_bytes, isolation
            if version >= 7 {
                w.skip(8)?; // session id and epoch
            }
            let partition = 4
                + if version >= 9 { 4 } else { 0 }
                + 8
                + if version >= 12 { 4 } else { 0 }
                + if version >= 5 { 8 } else { 0 }
                + 4
                + w.min_tags();
            let by_id = version >= 13;
            w.topics_named(by_id, partition, |w| {
                w.skip(partition - w.min_tags())?;
                w.tags()
            })?;
            if version >= 7 {
                w.topics_named(by_id, 4, |w| w.skip(4))?; // forgotten_topics_data
            }
            if version >= 11 {
                w.string()?; // rack_id
            }
        }
        ApiKey::ListOffsets => {
            w.skip(4)?; // replica_id
            if version >= 2 {
                w.skip(1)?; // isolation_level
            }
            let partition = 4 + if version >= 4 { 4 } else { 0 } + 8 + w.min_tags();
            w.topics(partition, |w| {
                w.skip(partition - w.min_tags())?;
                w.tags()
            })?;
        }
        ApiKey::ElectLeaders => {
            if version >= 1 {
                w.skip(1)?; // election_type
            }
            // topic_partitions: a name, then partition ids of 4 bytes.
            w.topics(4, |w| w.skip(4))?;
        }
        ApiKey::AlterPartitionReassignments => {
            w.skip(4)?; // timeout_ms
                        // Each partition: its index, its target replicas (null to
                        // cancel), tags.
            let partition = 4 + w.min_len(4) + w.min_tags();
            w.topics(partition, |w| {
                w.skip(4)?;
                w.array(4, |w| w.skip(4))?;
                w.tags()
            })?;
        }
        ApiKey::ListPartitionReassignments => {
            w.skip(4)?; // timeout_ms
                        // topics (null for all): a name, then partition ids of 4 bytes.
            w.topics(4, |w| w.skip(4))?;
        }
        ApiKey::OffsetForLeaderEpoch => {
            if version >= 3 {
                w.skip(4)?; // replica_id
            }
            // partition, current_leader_epoch, leader_epoch
            let partition = 4 + 4 + 4 + w.min_tags();
            w.topics(partition, |w| {
                w.skip(partition - w.min_tags())?;
                w.tags()
            })?;
        }
        ApiKey::Metadata => {
            let min_topic = if version >= 10 { 16 } else { 0 } + w.min_len(2) + w.min_tags();
            w.array(min_topic, |w| {
                if version >= 10 {
                    w.skip(16)?; // topic_id
                }
                w.string()?;
                w.tags()
            })?;
        }
        ApiKey::JoinGroup => {
            w.string()?; // group_id
            w.skip(4)?; // session_timeout_ms
            if version >= 1 {
                w.skip(4)?; // rebalance_timeout_ms
            }
            w.string()?; // member_id
            if version >= 5 {
                w.string()?; // group_instance_id
            }
            w.string()?; // protocol_type
            w.named_bytes_array()?;
        }
        ApiKey::SyncGroup => {
            w.string()?; // group_id
            w.skip(4)?; // generation_id
            w.string()?; // member_id
            if version >= 3 {
                w.string()?; // group_instance_id
            }
            if version >= 5 {
                w.string()?; // protocol_type
                w.string()?; // protocol_name
            }
            w.named_bytes_array()?;
        }
        ApiKey::LeaveGroup => {
            w.string()?; // group_id
            if version <= 2 {
                w.string()?; // member_id
            } else {
                let min = 2 * w.min_len(2) + w.min_tags();
                w.array(min, |w| {
                    w.string()?; // member_id
                    w.string()?; // group_instance_id
                    if version >= 5 {
                        w.string()?; // reason
                    }
                    w.tags()
                })?;
            }
        }
        ApiKey::OffsetCommit => {
            w.string()?; // group_id
            if version >= 1 {
                w.skip(4)?; // generation_id
                w.string()?; // member_id
            }
            if version >= 7 {
                w.string()?; // group_instance_id
            }
            if (2..=4).contains(&version) {
                w.skip(8)?; // retention_time_ms
            }
            w.committed_offsets(version >= 6)?;
        }
        ApiKey::OffsetFetch if version >= 8 => {
            let member = if version >= 9 { w.min_len(2) + 4 } else { 0 };
            let min_group = w.min_len(2) + member + w.min_len(4) + w.min_tags();
            w.array(min_group, |w| {
                w.string()?; // group_id
                if version >= 9 {
                    w.string()?; // member_id
                    w.skip(4)?; // member_epoch
                }
                w.topics(4, |w| w.skip(4))?;
                w.tags()
            })?;
        }
        ApiKey::OffsetFetch => {
            w.string()?; // group_id
            w.topics(4, |w| w.skip(4))?;
        }
        ApiKey::FindCoordinator if version >= 4 => {
            w.skip(1)?; // key_type
            let min = w.min_len(2);
            w.array(min, |w| w.string())?; // coordinator_keys
        }
        ApiKey::ListGroups => {
            if version >= 4 {
                let min = w.min_len(2);
                w.array(min, |w| w.string())?; // states_filter
            }
            if version >= 5 {
                let min = w.min_len(2);
                w.array(min, |w| w.string())?; // types_filter
            }
        }
        ApiKey::DescribeGroups | ApiKey::DeleteGroups => {
            let min = w.min_len(2);
            w.array(min, |w| w.string())?; // groups
        }
        ApiKey::DeleteTopics => {
            if version >= 6 {
                let min = w.min_len(2) + 16 + w.min_tags();
                w.array(min, |w| {
                    w.string()?; // name
                    w.skip(16)?; // topic_id
                    w.tags()
                })?;
            } else {
                let min = w.min_len(2);
                w.array(min, |w| w.string())?; // topic_names
            }
        }
        ApiKey::CreateTopics => {
            let min_topic = w.min_len(2) + 4 + 2 + 2 * w.min_len(4) + w.min_tags();
            w.array(min_topic, |w| {
                w.string()?; // name
                w.skip(4 + 2)?; // num_partitions, replication_factor
                let min_assignment = 4 + w.min_len(4) + w.min_tags();
                w.array(min_assignment, |w| {
                    w.skip(4)?; // partition_index
                    w.array(4, |w| w.skip(4))?; // broker_ids
                    w.tags()
                })?;
                let min_config = 2 * w.min_len(2) + w.min_tags();
                w.array(min_config, |w| {
                    w.string()?; // name
                    w.string()?; // value
                    w.tags()
                })?;
                w.tags()
            })?;
        }
        ApiKey::CreatePartitions => {
            let min_topic = w.min_len(2) + 4 + w.min_len(4) + w.min_tags();
            w.array(min_topic, |w| {
                w.string()?; // name
                w.skip(4)?; // count
                let min_assignment = w.min_len(4) + w.min_tags();
                w.array(min_assignment, |w| {
                    w.array(4, |w| w.skip(4))?; // broker_ids
                    w.tags()
                })?;
                w.tags()
            })?;
        }
        ApiKey::DescribeConfigs => {
            let min = 1 + w.min_len(2) + w.min_len(4) + w.min_tags();
            w.array(min, |w| {
                w.skip(1)?; // resource_type
                w.string()?; // resource_name
                let min = w.min_len(2);
                w.array(min, |w| w.string())?; // configuration_keys
                w.tags()
            })?;
        }
        ApiKey::OffsetDelete => {
            w.string()?; // group_id
            w.topics(4, |w| w.skip(4))?;
        }
        ApiKey::AlterConfigs | ApiKey::IncrementalAlterConfigs => {
            let incremental = api == ApiKey::IncrementalAlterConfigs;
            let min_config = w.min_len(2) + usize::from(incremental) + w.min_len(2) + w.min_tags();
            let min = 1 + w.min_len(2) + w.min_len(4) + w.min_tags();
            w.array(min, |w| {
                w.skip(1)?; // resource_type
                w.string()?; // resource_name
                w.array(min_config, |w| {
                    w.string()?; // name
                    if incremental {
                        w.skip(1)?; // config_operation
                    }
                    w.string()?; // value
                    w.tags()
                })?;
                w.tags()
            })?;
        }
        ApiKey::DeleteRecords => {
            let partition = 4 + 8 + w.min_tags();
            w.topics(partition, |w| {
                w.skip(4 + 8)?; // partition_index, offset
                w.tags()
            })?;
        }
        ApiKey::AddPartitionsToTxn => {
            w.string()?; // transactional_id
            w.skip(8 + 2)?; // producer_id, producer_epoch
            w.topics(4, |w| w.skip(4))?;
        }
        ApiKey::TxnOffsetCommit => {
            w.string()?; // transactional_id
            w.string()?; // group_id
            w.skip(8 + 2)?; // producer_id, producer_epoch
            if version >= 3 {
                w.skip(4)?; // generation_id
                w.string()?; // member_id
                w.string()?; // group_instance_id
            }
            w.committed_offsets(version >= 2)?;
        }
        ApiKey::ConsumerGroupHeartbeat => {
            w.string()?; // group_id
            w.string()?; // member_id
            w.skip(4)?; // member_epoch
            w.string()?; // instance_id
            w.string()?; // rack_id
            w.skip(4)?; // rebalance_timeout_ms
            w.strings()?; // subscribed_topic_names
            if version >= 1 {
                w.string()?; // subscribed_topic_regex
            }
            w.string()?; // server_assignor
            w.topic_ids_with_partitions()?; // topic_partitions
        }
        ApiKey::ConsumerGroupDescribe => {
            w.strings()?; // group_ids
        }
        ApiKey::DescribeLogDirs | ApiKey::DescribeProducers => {
            w.topics(4, |w| w.skip(4))?;
        }
        ApiKey::WriteTxnMarkers => {
            let min = 8 + 2 + 1 + w.min_len(4) + 4 + w.min_tags();
            w.array(min, |w| {
                w.skip(8 + 2 + 1)?; // producer_id, producer_epoch, transaction_result
                w.topics(4, |w| w.skip(4))?;
                w.skip(4)?; // coordinator_epoch
                w.tags()
            })?;
        }
        ApiKey::DescribeTopicPartitions | ApiKey::DescribeUserScramCredentials => {
            // Topics or users: each a name alone.
            let min = w.min_len(2) + w.min_tags();
            w.array(min, |w| {
                w.string()?;
                w.tags()
            })?;
        }
        ApiKey::DescribeTransactions => {
            w.strings()?; // transactional_ids
        }
        ApiKey::ListTransactions => {
            w.strings()?; // state_filters
            w.array(8, |w| w.skip(8))?; // producer_id_filters
        }
        ApiKey::ListConfigResources => {
            if version >= 1 {
                w.array(1, |w| w.skip(1))?; // resource_types
            }
        }
        ApiKey::CreateAcls | ApiKey::DeleteAcls => {
            // A creation or a filter: resource type, name, pattern type,
            // principal, host, operation, permission type.
            let min = 1 + w.min_len(2) + 1 + 2 * w.min_len(2) + 2 + w.min_tags();
            w.array(min, |w| {
                w.skip(1)?;
                w.string()?;
                w.skip(1)?;
                w.string()?;
                w.string()?;
                w.skip(2)?;
                w.tags()
            })?;
        }
        ApiKey::AlterUserScramCredentials => {
            // Deletions: name, mechanism. Upsertions: name, mechanism,
            // iterations, salt, salted password.
            let min = w.min_len(2) + 1 + w.min_tags();
            w.array(min, |w| {
                w.string()?;
                w.skip(1)?;
                w.tags()
            })?;
            let min = w.min_len(2) + 1 + 4 + 2 * w.min_len(4) + w.min_tags();
            w.array(min, |w| {
                w.string()?;
                w.skip(1 + 4)?;
                w.bytes()?;
                w.bytes()?;
                w.tags()
            })?;
        }
        ApiKey::UpdateFeatures => {
            w.skip(4)?; // timeout_ms
                        // Name, level, then allow_downgrade (v0) or upgrade_type.
            let min = w.min_len(2) + 2 + 1 + w.min_tags();
            w.array(min, |w| {
                w.string()?;
                w.skip(2 + 1)?;
                w.tags()
            })?;
        }
        ApiKey::ShareGroupHeartbeat => {
            w.string()?; // group_id
            w.string()?; // member_id
            w.skip(4)?; // member_epoch
            w.string()?; // rack_id
            w.strings()?; // subscribed_topic_names
        }
        ApiKey::ShareGroupDescribe => {
            w.strings()?; // group_ids
        }
        ApiKey::ShareFetch | ApiKey::ShareAcknowledge => {
            w.string()?; // group_id
            w.string()?; // member_id
            w.skip(4)?; // share_session_epoch
            if api == ApiKey::ShareFetch {
                // max_wait_ms, min_bytes, max_bytes, max_records, batch_size
                w.skip(5 * 4)?;
            }
            let min_partition = 4 + w.min_len(4) + w.min_tags();
            w.topics_named(true, min_partition, |w| {
                w.skip(4)?; // partition_index
                let min_batch = 8 + 8 + w.min_len(4) + w.min_tags();
                w.array(min_batch, |w| {
                    w.skip(8 + 8)?; // first_offset, last_offset
                    w.array(1, |w| w.skip(1))?; // acknowledge_types
                    w.tags()
                })?;
                w.tags()
            })?;
            if api == ApiKey::ShareFetch {
                w.topic_ids_with_partitions()?; // forgotten_topics_data
            }
        }
        // ApiVersions, FindCoordinator before v4, Heartbeat,
        // InitProducerId, AddOffsetsToTxn, EndTxn, DescribeAcls and
        // DescribeCluster have no arrays; other APIs are refused before
        // decoding.
        _ => return Ok(()),
    }
    // The rest (trailing fields, tagged fields) holds no array the
    // decoders reserve for; the crate checks it.
    Ok(())
}

/// Checks a consumer-protocol assignment (what a group leader hands each
/// member: a version, then topics with their partitions, then user data),
/// as [`check`] does a request.
pub(crate) fn consumer_assignment(bytes: &[u8]) -> Result<(), Refused> {
    let mut w = Walk {
        rest: bytes,
        flexible: false,
    };
    let w = &mut w;
    w.skip(2)?; // version
    w.array(2 + 4, |w| {
        w.string()?;
        w.array(4, |w| w.skip(4))
    })?;
    Ok(())
}

/// The same for a consumer-protocol subscription (a JoinGroup protocol's
/// metadata), version by version: topics and user data, then owned
/// partitions (v1), the generation (v2) and the rack (v3).
pub(crate) fn consumer_subscription(bytes: &[u8]) -> Result<(), Refused> {
    let mut w = Walk {
        rest: bytes,
        flexible: false,
    };
    let w = &mut w;
    let version = w.int(2)?;
    w.strings()?;
    w.bytes()?;
    if version >= 1 {
        w.array(2 + 4, |w| {
            w.string()?;
            w.array(4, |w| w.skip(4))
        })?;
    }
    if version >= 2 {
        w.skip(4)?;
    }
    if version >= 3 {
        w.string()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_beyond_the_frame_is_refused_before_decoding() {
        // Metadata v1: topics announcing 2^31 - 1 entries in 0 bytes.
        let body = 0x7fff_ffffi32.to_be_bytes();
        assert!(check(ApiKey::Metadata, 1, false, &body).is_err());
        // Two topics of one-byte names fit.
        let body = [0, 0, 0, 2, 0, 1, b'a', 0, 1, b'b'];
        assert!(check(ApiKey::Metadata, 1, false, &body).is_ok());
        // A null array (all topics) is fine.
        assert!(check(ApiKey::Metadata, 1, false, &(-1i32).to_be_bytes()).is_ok());
        // Flexible: a compact count of 2^28.
        let body = [0x80, 0x80, 0x80, 0x80, 0x01];
        assert!(check(ApiKey::Metadata, 9, true, &body).is_err());
    }

    #[test]
    fn create_topics_counts_are_checked_at_every_level() {
        // v2: one topic "t", 1 partition, replication factor 1, then an
        // assignment array announcing 2^31 - 1 entries.
        let mut body = vec![0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 1];
        let good = {
            let mut b = body.clone();
            b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]); // no assignments, no configs
            b.extend_from_slice(&[0, 0, 0x13, 0x88, 0]); // timeout_ms, validate_only
            b
        };
        assert!(check(ApiKey::CreateTopics, 2, false, &good).is_ok());
        body.extend_from_slice(&0x7fff_ffffi32.to_be_bytes());
        assert!(check(ApiKey::CreateTopics, 2, false, &body).is_err());
        // Topics announcing more than the frame holds.
        let body = 0x0100_0000i32.to_be_bytes();
        assert!(check(ApiKey::CreateTopics, 2, false, &body).is_err());
    }

    #[test]
    fn share_fetch_counts_are_checked_at_every_level() {
        // v1: group "g", member "m", epoch 0, five int32s, one topic (an
        // id) with one partition acknowledging one batch of one type.
        let mut good = vec![2, b'g', 2, b'm', 0, 0, 0, 0];
        good.extend_from_slice(&[0; 20]);
        good.push(2); // one topic
        good.extend_from_slice(&[9; 16]);
        good.push(2); // one partition
        good.extend_from_slice(&[0, 0, 0, 0]);
        good.push(2); // one batch
        good.extend_from_slice(&[0; 16]);
        good.extend_from_slice(&[2, 1, 0]); // one type, tags
        good.extend_from_slice(&[0, 0]); // partition and topic tags
        let forgotten = [1, 0]; // none forgotten, tags
        let mut body = good.clone();
        body.extend_from_slice(&forgotten);
        assert!(check(ApiKey::ShareFetch, 1, true, &body).is_ok());
        // The types announcing 2^28 entries.
        let mut huge = good.clone();
        let at = huge.len() - 5;
        huge.splice(at..at + 1, [0x80, 0x80, 0x80, 0x80, 0x01]);
        huge.extend_from_slice(&forgotten);
        assert!(check(ApiKey::ShareFetch, 1, true, &huge).is_err());
        // Forgotten topics announcing more than the frame holds.
        let mut body = good;
        body.extend_from_slice(&[0x80, 0x80, 0x04, 0]);
        assert!(check(ApiKey::ShareFetch, 1, true, &body).is_err());
    }

    #[test]
    fn update_features_counts_are_checked() {
        // v1: timeout, one update ("g", level 0, a safe downgrade, no
        // tags), validate_only, tags.
        let mut good = vec![0, 0, 0xea, 0x60, 2, 2, b'g', 0, 0, 2, 0, 0, 0];
        assert!(check(ApiKey::UpdateFeatures, 1, true, &good).is_ok());
        // 2^28 updates in a few bytes.
        good.splice(4..5, [0x80, 0x80, 0x80, 0x80, 0x01]);
        assert!(check(ApiKey::UpdateFeatures, 1, true, &good).is_err());
    }

    #[test]
    fn consumer_group_heartbeat_counts_are_checked() {
        // v0: group "g", member "m", epoch 0, no instance or rack, a
        // rebalance timeout, then the topic names.
        let mut head = vec![2, b'g', 2, b'm', 0, 0, 0, 0, 0, 0, 0, 0, 0x75, 0x30];
        let mut good = head.clone();
        good.extend_from_slice(&[2, 2, b't', 0, 1, 0]); // ["t"], no assignor, no partitions, tags
        assert!(check(ApiKey::ConsumerGroupHeartbeat, 0, true, &good).is_ok());
        // 2^31 - 2 topic names in a few bytes.
        head.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07, 0, 0]);
        assert!(check(ApiKey::ConsumerGroupHeartbeat, 0, true, &head).is_err());
    }

    #[test]
    fn scram_credential_counts_are_checked() {
        // Describe v0: users ["a"], then tags; null users.
        let good = [2, 2, b'a', 0, 0];
        assert!(check(ApiKey::DescribeUserScramCredentials, 0, true, &good).is_ok());
        assert!(check(ApiKey::DescribeUserScramCredentials, 0, true, &[0, 0]).is_ok());
        let many = [0xff, 0xff, 0xff, 0xff, 0x07, 2, b'a', 0, 0];
        assert!(check(ApiKey::DescribeUserScramCredentials, 0, true, &many).is_err());
        // Alter v0: no deletions, one upsertion ("a", SHA-256, 4096
        // iterations, salt "s", salted password "p"), then tags.
        let mut good = vec![1, 2, 2, b'a', 1, 0, 0, 0x10, 0, 2, b's', 2, b'p', 0, 0];
        assert!(check(ApiKey::AlterUserScramCredentials, 0, true, &good).is_ok());
        // The same upsertion announced 2^31 - 2 times.
        good[1] = 0xff;
        good.splice(2..2, [0xff, 0xff, 0xff, 0x07]);
        assert!(check(ApiKey::AlterUserScramCredentials, 0, true, &good).is_err());
    }

    #[test]
    fn list_transactions_filters_must_fit() {
        // v1: states ["Ongoing"], producer ids [7], duration 0, tags.
        let mut good = vec![2, 8];
        good.extend_from_slice(b"Ongoing");
        good.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0, 7]);
        good.extend_from_slice(&[0; 8]);
        good.push(0);
        assert!(check(ApiKey::ListTransactions, 1, true, &good).is_ok());
        // The producer ids announcing 2^31 - 2.
        let mut body = good[..9].to_vec();
        body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]);
        body.extend_from_slice(&good[10..]);
        assert!(check(ApiKey::ListTransactions, 1, true, &body).is_err());
    }

    #[test]
    fn list_config_resources_types_must_fit() {
        // v1: types [2, 32], tags.
        let good = [3, 2, 32, 0];
        assert!(check(ApiKey::ListConfigResources, 1, true, &good).is_ok());
        // Announcing 2^31 - 2 types in one byte.
        let body = [0xff, 0xff, 0xff, 0xff, 0x07, 2, 0];
        assert!(check(ApiKey::ListConfigResources, 1, true, &body).is_err());
    }

    #[test]
    fn offset_for_leader_epoch_partitions_must_fit() {
        // v3: replica id -1, one topic "t" with one partition (0, current
        // epoch 2, epoch 1).
        let mut good = vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1];
        good.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1]);
        assert!(check(ApiKey::OffsetForLeaderEpoch, 3, false, &good).is_ok());
        // The same topic announcing two partitions.
        let mut body = good.clone();
        body[14] = 2;
        assert!(check(ApiKey::OffsetForLeaderEpoch, 3, false, &body).is_err());
        // v2 has no replica id.
        assert!(check(ApiKey::OffsetForLeaderEpoch, 2, false, &good[4..]).is_ok());
        assert!(check(ApiKey::OffsetForLeaderEpoch, 2, false, &body[4..]).is_err());
    }

    #[test]
    fn write_txn_markers_counts_are_checked_at_every_level() {
        // v1: one marker (producer 7, epoch 0, abort) for topic "t"
        // partition [0], coordinator epoch 0, then tags.
        let mut good = vec![2];
        good.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0]);
        good.extend_from_slice(&[2, 2, b't', 2, 0, 0, 0, 0, 0]);
        good.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        assert!(check(ApiKey::WriteTxnMarkers, 1, true, &good).is_ok());
        // Markers, topics and partitions each announcing 2^28.
        for at in [0, 12, 15] {
            let mut body = good.clone();
            body.splice(at..at + 1, [0x81, 0x80, 0x80, 0x80, 0x01]);
            assert!(
                check(ApiKey::WriteTxnMarkers, 1, true, &body).is_err(),
                "count at {at}"
            );
        }
    }
}
