//! What one partition's records in a Produce request must be at the
//! request's version, checked once the partition is known to exist and
//! before anything else of it (its leader, its log), as Kafka's request
//! handler checks them (`ProduceRequest.validateRecords`): from v3, exactly
//! one batch, of magic 2, and not in zstd before v7.
//!
//! Only the framing is read here: the length and magic of each batch's
//! header, and the codec in its attributes. The batch's CRC and records
//! are checked by the append.

use super::batch_header::{LENGTH, LOG_OVERHEAD, MAGIC};
use super::batch_records;
use super::topic_config::ZSTD;
use kafka_protocol::error::ResponseError;

/// The header's size up to and with the magic byte.
const UP_TO_MAGIC: usize = MAGIC + 1;
/// The least a length can be: that of a v0 message with no key or value.
const LEAST_LENGTH: i32 = 14;
/// The newest magic: a larger one is not a Kafka batch at all.
const NEWEST_MAGIC: i8 = 2;

/// Whether `records` (a Produce of `version`'s, for one partition) may be
/// appended: INVALID_RECORD for no whole batch, a batch of an older magic
/// or a second batch after the first; UNSUPPORTED_COMPRESSION_TYPE for a
/// zstd batch before v7; CORRUPT_MESSAGE for a header no Kafka client
/// writes (a length below any batch's, a magic above 2).
pub(crate) fn check(version: i16, records: Option<&[u8]>) -> Result<(), ResponseError> {
    let invalid = || ResponseError::InvalidRecord;
    // The request's versions below 3 are not served.
    let records = records.ok_or_else(invalid)?;
    let (magic, length) = next_batch(records)?.ok_or_else(invalid)?;
    if magic != NEWEST_MAGIC {
        return Err(invalid());
    }
    if version < 7 && batch_records::codec(records) == ZSTD {
        return Err(ResponseError::UnsupportedCompressionType);
    }
    match next_batch(&records[length..])? {
        Some(_) => Err(invalid()),
        None => Ok(()),
    }
}

/// The magic and whole length of the batch `records` starts with, `None`
/// where they do not hold a whole one (where Kafka's batch iterator stops),
/// CORRUPT_MESSAGE where its header cannot be a batch's.
fn next_batch(records: &[u8]) -> Result<Option<(i8, usize)>, ResponseError> {
    let Some(field) = records.get(LENGTH..LOG_OVERHEAD) else {
        return Ok(None);
    };
    let length = i32::from_be_bytes([field[0], field[1], field[2], field[3]]);
    if length < LEAST_LENGTH {
        return Err(ResponseError::CorruptMessage);
    }
    let Some(&magic) = records.get(MAGIC).filter(|_| records.len() >= UP_TO_MAGIC) else {
        return Ok(None);
    };
    let magic = magic as i8;
    if !(0..=NEWEST_MAGIC).contains(&magic) {
        return Err(ResponseError::CorruptMessage);
    }
    // `length` is positive, and no larger than i32::MAX.
    let whole = length as usize + LOG_OVERHEAD;
    Ok((records.len() >= whole).then_some((magic, whole)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::batch_header::ATTRIBUTES;

    /// A header-only "batch" of `magic` whose length field says `length`,
    /// padded to that length, with `codec` in its attributes.
    fn framed(magic: u8, length: i32, codec: u8) -> Vec<u8> {
        let mut b = vec![0u8; LOG_OVERHEAD + length.max(LEAST_LENGTH) as usize];
        b[LENGTH..LOG_OVERHEAD].copy_from_slice(&length.to_be_bytes());
        b[MAGIC] = magic;
        b[ATTRIBUTES + 1] = codec;
        b
    }

    fn error(r: Result<(), ResponseError>) -> i16 {
        r.err().map_or(0, |e| e.code())
    }

    #[test]
    fn one_whole_v2_batch_passes() {
        assert_eq!(error(check(3, Some(&framed(2, 60, 0)))), 0);
        // Bytes after it that are not a whole batch are not a second one
        // (Kafka's iterator stops there too).
        let mut tail = framed(2, 60, 0);
        tail.extend_from_slice(&[0; 5]);
        assert_eq!(error(check(3, Some(&tail))), 0);
    }

    #[test]
    fn no_batch_an_old_magic_or_a_second_batch_is_an_invalid_record() {
        let invalid = ResponseError::InvalidRecord.code();
        assert_eq!(error(check(3, None)), invalid);
        assert_eq!(error(check(3, Some(&[]))), invalid);
        // The length says more than is there.
        assert_eq!(error(check(3, Some(&framed(2, 60, 0)[..40]))), invalid);
        assert_eq!(error(check(3, Some(&framed(1, 60, 0)))), invalid);
        assert_eq!(error(check(3, Some(&framed(0, 60, 0)))), invalid);
        let mut two = framed(2, 60, 0);
        two.extend(framed(2, 60, 0));
        assert_eq!(error(check(13, Some(&two))), invalid);
    }

    #[test]
    fn zstd_needs_version_7() {
        let zstd = framed(2, 60, ZSTD);
        let unsupported = ResponseError::UnsupportedCompressionType.code();
        assert_eq!(error(check(6, Some(&zstd))), unsupported);
        assert_eq!(error(check(7, Some(&zstd))), 0);
        assert_eq!(error(check(6, Some(&framed(2, 60, 3)))), 0);
    }

    #[test]
    fn a_header_no_batch_has_is_corrupt() {
        let corrupt = ResponseError::CorruptMessage.code();
        assert_eq!(error(check(3, Some(&framed(2, 13, 0)))), corrupt);
        assert_eq!(error(check(3, Some(&framed(2, -1, 0)))), corrupt);
        assert_eq!(error(check(3, Some(&framed(3, 60, 0)))), corrupt);
        assert_eq!(error(check(3, Some(&framed(0xff, 60, 0)))), corrupt);
        // Also in a second batch's header.
        let mut two = framed(2, 60, 0);
        two.extend(framed(9, 60, 0));
        assert_eq!(error(check(3, Some(&two))), corrupt);
    }
}
