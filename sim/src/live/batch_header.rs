//! Where each field of a v2 record batch's header sits (Kafka's
//! `DefaultRecordBatch`), in bytes from the batch's start, for the modules
//! that read a header or patch one in place, and the CRC that a patch must
//! write again. Everything past the header (the records) is read by
//! `batch_records`.

/// The base offset (8 bytes), then the length of the rest (4 bytes): how
/// a batch of every magic starts (together Kafka's `LOG_OVERHEAD`).
pub(crate) const LENGTH: usize = 8;
pub(crate) const LOG_OVERHEAD: usize = 12;
/// The epoch of the leader that stored the batch.
pub(crate) const PARTITION_LEADER_EPOCH: usize = 12;
/// The magic byte: 2 for this header.
pub(crate) const MAGIC: usize = 16;
/// The CRC-32C of everything from the attributes on.
pub(crate) const CRC: usize = 17;
/// The attributes, two bytes; their flags are in the second.
pub(crate) const ATTRIBUTES: usize = 21;
pub(crate) const LAST_OFFSET_DELTA: usize = 23;
/// The first record's timestamp, and the largest.
pub(crate) const BASE_TIMESTAMP: usize = 27;
pub(crate) const MAX_TIMESTAMP: usize = 35;
/// The producer's id and epoch.
pub(crate) const PRODUCER_ID: usize = 43;
pub(crate) const PRODUCER_EPOCH: usize = 51;
pub(crate) const RECORD_COUNT: usize = 57;
/// The header's length: the records follow.
pub(crate) const HEADER_LEN: usize = 61;

/// In the attributes' second byte: the compression codec (three bits),
/// the timestamp type (set: the max timestamp is the leader's append
/// time) and the transactional bit.
pub(crate) const CODEC_MASK: u8 = 0x07;
pub(crate) const LOG_APPEND_TIME: u8 = 0x08;
pub(crate) const TRANSACTIONAL: u8 = 0x10;

/// Writes into `batch`'s header the CRC-32C of everything from the
/// attributes on, after a change there (`batch` holds at least a whole
/// header, as every batch here was checked to when it arrived).
pub(crate) fn seal(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[ATTRIBUTES..]);
    batch[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
}
