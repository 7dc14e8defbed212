//! The records inside a v2 record batch, read one at a time as a stream,
//! whatever the batch's compression: what a produce's batches are checked
//! against before they are stored, as Kafka's `LogValidator` checks them,
//! and how a stored batch is searched by time.
//!
//! The records are never held whole. A compressed batch is decompressed as
//! it is read, and a record's key, value and headers are skipped, not kept:
//! a small batch that inflates to gigabytes, or a record that announces two
//! billion headers, costs the time to read it, not the memory. Kafka's
//! broker reads them the same way.

use super::batch_header::{
    ATTRIBUTES, BASE_TIMESTAMP, CODEC_MASK, HEADER_LEN, LAST_OFFSET_DELTA, LOG_APPEND_TIME,
    MAX_TIMESTAMP, RECORD_COUNT,
};
use flate2::read::MultiGzDecoder;
use std::io::{self, BufRead, BufReader, Read};

/// The framing Kafka's Java client (through snappy-java) puts around its
/// snappy blocks; librdkafka sends bare snappy instead.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;
/// Snappy cannot inflate by more than this (a copy of 64 bytes takes at
/// least 2): a length header claiming more is corrupt, and is refused before
/// anything is allocated for it.
const SNAPPY_MAX_RATIO: usize = 32;

/// How many records at fault a refusal lists, at most. Kafka lists every
/// one; a compressed batch can hold two billion records in a few
/// megabytes, and the answer is not made that large here. The count says
/// how many there were in all.
pub const LISTED_FAULTS: usize = 1_000;

/// Why a batch's records were refused, and the error a produce is
/// answered with, as Kafka answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordsError {
    /// The records do not match what the header says: a count that is not
    /// the offset range, fewer or more records than counted, a record whose
    /// fields run past it (Kafka's `InvalidRecordException`:
    /// INVALID_RECORD).
    Invalid,
    /// The compressed records do not decompress, or name a codec Kafka does
    /// not define (CORRUPT_MESSAGE).
    Corrupt,
    /// Well-formed records that break a rule of the topic's, each listed
    /// (Kafka's `RecordValidationException`).
    Refused(RecordFaults),
}

/// The records of one batch that break a rule of the topic's: a produce
/// answers each with its index in the batch and why (Kafka's
/// `RecordError`s, from Produce v8), and the whole with INVALID_TIMESTAMP
/// if any broke a timestamp rule, INVALID_RECORD otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordFaults {
    /// The first faults in record order, at most [`LISTED_FAULTS`].
    pub listed: Vec<(i32, Fault)>,
    /// How many records are at fault in all.
    pub total: u32,
    /// Whether any of them broke a timestamp rule.
    pub timestamps: bool,
}

impl RecordFaults {
    fn add(&mut self, record: i32, fault: Fault) {
        if self.listed.len() < LISTED_FAULTS {
            self.listed.push((record, fault));
        }
        self.total += 1;
        self.timestamps |= fault != Fault::NoKeyForCompaction;
    }

    /// What the partition's answer says of the whole (Kafka's
    /// `error_message`; each record's own is [`Fault::message`]).
    pub fn message(&self) -> String {
        let (records, why) = match (self.total, self.timestamps) {
            (1, true) => ("record of the batch was", "for its timestamp"),
            (1, false) => ("record of the batch was", "for a rule of the topic's"),
            (_, true) => (
                "records of the batch were",
                "at least one for its timestamp",
            ),
            (_, false) => (
                "records of the batch were",
                "each for a rule of the topic's",
            ),
        };
        let listed = if self.listed.len() < self.total as usize {
            format!("; the first {} are listed", self.listed.len())
        } else {
            String::new()
        };
        format!("{} {records} refused, {why}{listed}", self.total)
    }
}

/// Why one record was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// No key, in a topic that is compacted (INVALID_RECORD).
    NoKeyForCompaction,
    /// A timestamp further before or after the leader's clock than the
    /// topic's `message.timestamp.before.max.ms` or
    /// `message.timestamp.after.max.ms` allow (INVALID_TIMESTAMP).
    TimestampOutOfRange,
    /// The batch claims the broker's append time (LogAppendTime), which
    /// no producer may, and the record has no timestamp a `CreateTime`
    /// topic could keep in its place (INVALID_TIMESTAMP).
    AppendTimeFromProducer,
}

impl Fault {
    /// What the answer says of the record.
    pub fn message(self) -> &'static str {
        match self {
            Fault::NoKeyForCompaction => "Compacted topic cannot accept message without key",
            Fault::TimestampOutOfRange => {
                "A record's timestamp is further from the broker's clock than the topic's \
                 message.timestamp.before.max.ms or message.timestamp.after.max.ms allows"
            }
            Fault::AppendTimeFromProducer => {
                "The batch's timestamp type is LogAppendTime, which only the broker sets"
            }
        }
    }
}

impl RecordsError {
    /// What the produce's answer says of it (Kafka's `error_message`).
    pub fn message(&self) -> std::borrow::Cow<'static, str> {
        match self {
            RecordsError::Invalid => {
                "The records do not match their batch's header: the record count must be the \
                 offset range, the records must fill the batch, each its own length, in offset order"
                    .into()
            }
            RecordsError::Corrupt => {
                "The batch's records do not decompress, or name a compression codec Kafka does \
                 not define"
                    .into()
            }
            RecordsError::Refused(faults) => faults.message().into(),
        }
    }
}

/// What a topic asks of each record of a batch appended to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRules {
    /// Every record needs a key (a compacted topic's).
    pub keys_required: bool,
    /// The topic keeps the producers' timestamps (`CreateTime`), rather
    /// than the leader's append time.
    pub create_time: bool,
    /// The first and last record timestamps taken (inclusive), where a
    /// `CreateTime` topic bounds them.
    pub window: Option<(i64, i64)>,
}

impl RecordRules {
    /// A `CreateTime` topic that neither compacts nor bounds timestamps:
    /// Kafka's defaults.
    pub const DEFAULT: RecordRules = RecordRules {
        keys_required: false,
        create_time: true,
        window: None,
    };
}

impl Default for RecordRules {
    fn default() -> Self {
        RecordRules::DEFAULT
    }
}

/// One record's place and time in its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMeta {
    /// Its offset less the batch's base offset.
    pub offset_delta: i32,
    /// Its timestamp (the batch's base timestamp plus its delta).
    pub timestamp: i64,
}

/// Checks the records of one v2 batch (whose header and CRC were already
/// checked) as a produce's are checked: the count equals the offset range,
/// exactly that many records follow, each record's fields stay inside it,
/// and its offset delta is its place in the batch; a batch that breaks
/// one of these is refused at once. Then each record is held to the
/// topic's `rules` as Kafka's `LogValidator` holds it, and every record
/// that breaks one is listed: a key where the topic compacts; else, on a
/// `CreateTime` topic, a timestamp within the window (a record without
/// one, -1, is not checked); else no LogAppendTime claimed by the batch.
/// A batch that claims LogAppendTime gives each record its largest
/// timestamp, as Kafka reads it; on a `CreateTime` topic that is a
/// timestamp, checked as any other, unless it is -1.
///
/// Returns the largest of the records' own timestamps (-1 if none is
/// larger), which Kafka's leader writes into the header in place of the
/// producer's.
///
/// Kafka rewrites a compressed batch whose records' offset deltas are out
/// of order; batches are stored here as sent, so such a batch is refused.
pub fn check(batch: &[u8], rules: &RecordRules) -> Result<i64, RecordsError> {
    let delta = be_i32(batch, LAST_OFFSET_DELTA).ok_or(RecordsError::Invalid)?;
    let count = be_i32(batch, RECORD_COUNT).ok_or(RecordsError::Invalid)?;
    if count <= 0 || i64::from(delta) + 1 != i64::from(count) {
        return Err(RecordsError::Invalid);
    }
    let append_time = batch
        .get(ATTRIBUTES + 1)
        .is_some_and(|a| a & LOG_APPEND_TIME != 0);
    let claimed = be_i64(batch, MAX_TIMESTAMP).ok_or(RecordsError::Invalid)?;
    let mut faults = RecordFaults::default();
    let mut index = 0;
    // Kafka's `RecordBatch.NO_TIMESTAMP`, where its leader starts.
    let mut max_timestamp = -1;
    walk(batch, |record, has_key| {
        if record.offset_delta != index {
            return Err(RecordsError::Invalid);
        }
        let timestamp = if append_time {
            claimed
        } else {
            record.timestamp
        };
        let fault = if rules.keys_required && !has_key {
            Some(Fault::NoKeyForCompaction)
        } else if rules.create_time && timestamp != -1 {
            rules
                .window
                .filter(|&(first, last)| !(first..=last).contains(&timestamp))
                .map(|_| Fault::TimestampOutOfRange)
        } else if append_time {
            Some(Fault::AppendTimeFromProducer)
        } else {
            None
        };
        if let Some(fault) = fault {
            faults.add(index, fault);
        }
        max_timestamp = max_timestamp.max(record.timestamp);
        index += 1;
        Ok(Step::Next)
    })?;
    if faults.total > 0 {
        return Err(RecordsError::Refused(faults));
    }
    Ok(max_timestamp)
}

/// The first record of a stored batch whose timestamp is at least
/// `timestamp`, if one is.
pub fn first_at_or_after(batch: &[u8], timestamp: i64) -> Option<RecordMeta> {
    let mut found = None;
    walk(batch, |record, _| {
        if record.timestamp >= timestamp {
            found = Some(record);
            return Ok(Step::Stop);
        }
        Ok(Step::Next)
    })
    .ok()?;
    found
}

/// Whether a walk goes on to the next record.
enum Step {
    Next,
    Stop,
}

/// Reads every record of `batch` in order, handing each (and whether it
/// has a key) to `each`, until `each` stops or fails. The batch must hold
/// exactly the number of records its header counts, with nothing after.
fn walk(
    batch: &[u8],
    mut each: impl FnMut(RecordMeta, bool) -> Result<Step, RecordsError>,
) -> Result<(), RecordsError> {
    let count = be_i32(batch, RECORD_COUNT).ok_or(RecordsError::Invalid)?;
    let base_timestamp = be_i64(batch, BASE_TIMESTAMP).ok_or(RecordsError::Invalid)?;
    let records = batch.get(HEADER_LEN..).ok_or(RecordsError::Invalid)?;
    let each = &mut each;
    // A slice is read in place; a decompressor through a buffer of its
    // own, so that a byte costs no call into the codec.
    match codec(batch) {
        0 => walk_records(records, count, base_timestamp, each),
        codec => walk_records(
            BufReader::new(decompressor(codec, records)?),
            count,
            base_timestamp,
            each,
        ),
    }
}

/// The compression codec a batch's attributes name (0: none).
pub fn codec(batch: &[u8]) -> u8 {
    batch.get(ATTRIBUTES + 1).map_or(0, |a| a & CODEC_MASK)
}

/// The records of a batch compressed with `codec`, decompressed as they
/// are read (CORRUPT_MESSAGE for a codec Kafka does not define).
pub fn decompressor(codec: u8, records: &[u8]) -> Result<Box<dyn Read + '_>, RecordsError> {
    Ok(match codec {
        0 => Box::new(records),
        1 => Box::new(MultiGzDecoder::new(records)),
        2 => Box::new(snappy(records)?),
        3 => Box::new(lz4_flex::frame::FrameDecoder::new(records)),
        4 => Box::new(
            ruzstd::decoding::StreamingDecoder::new(records).map_err(|_| RecordsError::Corrupt)?,
        ),
        _ => return Err(RecordsError::Corrupt),
    })
}

fn walk_records<R: BufRead>(
    source: R,
    count: i32,
    base_timestamp: i64,
    each: &mut impl FnMut(RecordMeta, bool) -> Result<Step, RecordsError>,
) -> Result<(), RecordsError> {
    let mut source = Source {
        inner: source,
        read: 0,
    };
    for _ in 0..count {
        let (meta, has_key) = read_record(&mut source, base_timestamp)?;
        if let Step::Stop = each(meta, has_key)? {
            return Ok(());
        }
    }
    // Nothing may follow the counted records.
    if source.at_end()? {
        Ok(())
    } else {
        Err(RecordsError::Invalid)
    }
}

/// Reads one record: its length, then within it the attributes, the
/// timestamp and offset deltas, the key, the value and the headers, which
/// must fill it exactly.
fn read_record<R: BufRead>(
    source: &mut Source<R>,
    base_timestamp: i64,
) -> Result<(RecordMeta, bool), RecordsError> {
    let length = source.varint()?;
    let length = u64::try_from(length).map_err(|_| RecordsError::Invalid)?;
    let start = source.read;
    let _attributes = source.byte()?;
    let timestamp_delta = source.varlong()?;
    let offset_delta = source.varint()?;
    let key_length = source.varint()?;
    source.skip_field(key_length)?;
    let value_length = source.varint()?;
    source.skip_field(value_length)?;
    let headers = source.varint()?;
    if headers < 0 {
        return Err(RecordsError::Invalid);
    }
    for _ in 0..headers {
        let key_length = source.varint()?;
        if key_length < 0 {
            return Err(RecordsError::Invalid);
        }
        source.skip_field(key_length)?;
        let value_length = source.varint()?;
        source.skip_field(value_length)?;
        // Headers past the record's length: stop before reading on.
        if source.read - start > length {
            return Err(RecordsError::Invalid);
        }
    }
    if source.read - start != length {
        return Err(RecordsError::Invalid);
    }
    let meta = RecordMeta {
        offset_delta,
        timestamp: base_timestamp.wrapping_add(timestamp_delta),
    };
    Ok((meta, key_length >= 0))
}

/// The records' bytes, with a count of those read so far, so that a
/// record's fields can be held to its length. Skipping moves past bytes
/// in the reader's buffer without copying them.
struct Source<R> {
    inner: R,
    read: u64,
}

impl<R: BufRead> Source<R> {
    fn byte(&mut self) -> Result<u8, RecordsError> {
        let buf = self.inner.fill_buf().map_err(|e| read_error(&e))?;
        let &byte = buf.first().ok_or(RecordsError::Invalid)?;
        self.inner.consume(1);
        self.read += 1;
        Ok(byte)
    }

    /// Skips a key's, value's or header's bytes: a length of -1 is none,
    /// any other negative one is refused.
    fn skip_field(&mut self, length: i32) -> Result<(), RecordsError> {
        if length == -1 {
            return Ok(());
        }
        let mut left = u64::try_from(length).map_err(|_| RecordsError::Invalid)?;
        while left > 0 {
            let buf = self.inner.fill_buf().map_err(|e| read_error(&e))?;
            if buf.is_empty() {
                return Err(RecordsError::Invalid);
            }
            let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            self.inner.consume(n);
            self.read += n as u64;
            left -= n as u64;
        }
        Ok(())
    }

    fn at_end(&mut self) -> Result<bool, RecordsError> {
        let buf = self.inner.fill_buf().map_err(|e| read_error(&e))?;
        Ok(buf.is_empty())
    }

    /// A zigzag varint of at most 32 bits, as Kafka writes lengths and
    /// deltas.
    fn varint(&mut self) -> Result<i32, RecordsError> {
        let raw = self.unsigned(5)?;
        let raw = u32::try_from(raw).map_err(|_| RecordsError::Invalid)?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// A zigzag varint of at most 64 bits (a timestamp delta).
    fn varlong(&mut self) -> Result<i64, RecordsError> {
        let raw = self.unsigned(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    fn unsigned(&mut self, max_bytes: u32) -> Result<u64, RecordsError> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordsError::Invalid)
    }
}

/// Running out of records is an invalid batch; anything else the reader
/// says is a decompression that failed.
fn read_error(e: &io::Error) -> RecordsError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        RecordsError::Invalid
    } else {
        RecordsError::Corrupt
    }
}

/// Snappy records, bare (librdkafka) or in snappy-java's framing (Kafka's
/// Java client): its 16-byte header, then blocks each led by its
/// compressed length. Each block is decompressed when the reader reaches
/// it.
fn snappy(records: &[u8]) -> Result<SnappyBlocks<'_>, RecordsError> {
    if records.starts_with(XERIAL_MAGIC) {
        let blocks = records
            .get(XERIAL_HEADER_LEN..)
            .ok_or(RecordsError::Corrupt)?;
        Ok(SnappyBlocks {
            blocks,
            framed: true,
            block: Vec::new(),
            at: 0,
        })
    } else {
        Ok(SnappyBlocks {
            blocks: records,
            framed: false,
            block: Vec::new(),
            at: 0,
        })
    }
}

/// The reader over snappy blocks: what is left of the compressed bytes,
/// and the block decompressed last with how much of it was read.
struct SnappyBlocks<'a> {
    blocks: &'a [u8],
    framed: bool,
    block: Vec<u8>,
    at: usize,
}

impl SnappyBlocks<'_> {
    /// Decompresses the next block into `block`; false at the end.
    fn next_block(&mut self) -> io::Result<bool> {
        if self.blocks.is_empty() {
            return Ok(false);
        }
        let compressed = if self.framed {
            let length = self
                .blocks
                .get(..4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
                .ok_or_else(|| corrupt("a truncated snappy block length"))?;
            let block = self
                .blocks
                .get(4..4 + length)
                .ok_or_else(|| corrupt("a truncated snappy block"))?;
            self.blocks = &self.blocks[4 + length..];
            block
        } else {
            std::mem::take(&mut self.blocks)
        };
        let length = snap::raw::decompress_len(compressed).map_err(io::Error::other)?;
        if length > compressed.len().saturating_mul(SNAPPY_MAX_RATIO) {
            return Err(corrupt("a snappy block longer than it can inflate to"));
        }
        self.block.resize(length, 0);
        snap::raw::Decoder::new()
            .decompress(compressed, &mut self.block)
            .map_err(io::Error::other)?;
        self.at = 0;
        Ok(true)
    }
}

impl Read for SnappyBlocks<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn corrupt(what: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

fn be_i32(bytes: &[u8], at: usize) -> Option<i32> {
    let b = bytes.get(at..at + 4)?;
    Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn be_i64(bytes: &[u8], at: usize) -> Option<i64> {
    bytes
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(i64::from_be_bytes)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::live::batch_header::{seal, LENGTH, LOG_OVERHEAD};
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    pub(crate) const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// A record of a producer without idempotence.
    fn record(offset: i64, timestamp: i64, key: Option<&[u8]>, value: Bytes) -> Record {
        Record {
            transactional: false,
            control: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset,
            // One batch: the encoder starts another where the offset less
            // the sequence changes. Its base sequence is -1.
            sequence: offset as i32 - 1,
            timestamp,
            key: key.map(Bytes::copy_from_slice),
            value: Some(value),
            headers: Default::default(),
            delete_horizon: false,
        }
    }

    /// `records` as one batch, by the protocol crate's encoder.
    fn encode(records: &[Record], compression: Compression) -> Bytes {
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        RecordBatchEncoder::encode(&mut buf, records, &options).expect("encodes");
        buf.freeze()
    }

    /// A batch of records with these timestamps and keys, each with a
    /// 300-byte value and a header.
    pub(crate) fn encoded(records: &[(i64, Option<&[u8]>)], compression: Compression) -> Bytes {
        let records: Vec<Record> = records
            .iter()
            .enumerate()
            .map(|(i, &(timestamp, key))| {
                let mut r = record(i as i64, timestamp, key, Bytes::from(vec![b'v'; 300]));
                r.headers = [("h".into(), Some(Bytes::from_static(b"x")))]
                    .into_iter()
                    .collect();
                r
            })
            .collect();
        encode(&records, compression)
    }

    /// `batch` with its header or records changed, and its length and CRC
    /// computed again (so that only the change is wrong).
    pub(crate) fn altered(batch: &Bytes, change: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut bytes = batch.to_vec();
        change(&mut bytes);
        let length = (bytes.len() - LOG_OVERHEAD) as i32;
        bytes[LENGTH..LOG_OVERHEAD].copy_from_slice(&length.to_be_bytes());
        seal(&mut bytes);
        bytes
    }

    const COMPACTED: RecordRules = RecordRules {
        keys_required: true,
        ..RecordRules::DEFAULT
    };

    fn refused(faults: &[(i32, Fault)]) -> Result<i64, RecordsError> {
        Err(RecordsError::Refused(RecordFaults {
            listed: faults.to_vec(),
            total: faults.len() as u32,
            timestamps: faults.iter().any(|&(_, f)| f != Fault::NoKeyForCompaction),
        }))
    }

    fn set_i32(bytes: &mut [u8], at: usize, v: i32) {
        bytes[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }

    #[test]
    fn a_window_bounds_each_records_own_timestamp_but_one_without() {
        let within = |first, last| RecordRules {
            window: Some((first, last)),
            ..RecordRules::DEFAULT
        };
        for codec in CODECS {
            let batch = encoded(&[(100, None), (300, None), (-1, None)], codec);
            assert_eq!(check(&batch, &within(100, 300)), Ok(300), "{codec:?}");
            let late = refused(&[(1, Fault::TimestampOutOfRange)]);
            assert_eq!(check(&batch, &within(0, 299)), late, "{codec:?}");
            let early = refused(&[(0, Fault::TimestampOutOfRange)]);
            assert_eq!(check(&batch, &within(101, 400)), early, "{codec:?}");
            let both = refused(&[
                (0, Fault::TimestampOutOfRange),
                (1, Fault::TimestampOutOfRange),
            ]);
            assert_eq!(check(&batch, &within(101, 299)), both, "{codec:?}");
        }
    }

    #[test]
    fn every_codec_reads_back_each_record_in_place_and_time() {
        let times = [(100, Some(&b"a"[..])), (300, None), (200, Some(b"c"))];
        for codec in CODECS {
            let batch = encoded(&times, codec);
            assert_eq!(check(&batch, &RecordRules::DEFAULT), Ok(300), "{codec:?}");
            let at = |t| first_at_or_after(&batch, t).map(|r| (r.offset_delta, r.timestamp));
            assert_eq!(at(0), Some((0, 100)), "{codec:?}");
            assert_eq!(at(150), Some((1, 300)), "{codec:?}");
            assert_eq!(at(300), Some((1, 300)), "{codec:?}");
            assert_eq!(at(301), None, "{codec:?}");
        }
    }

    #[test]
    fn a_compacted_topic_refuses_each_record_without_a_key() {
        for codec in CODECS {
            let keyed = encoded(&[(1, Some(b"k")), (2, Some(b"l"))], codec);
            assert_eq!(check(&keyed, &COMPACTED), Ok(2), "{codec:?}");
            let two_without = encoded(&[(1, None), (2, Some(b"k")), (3, None)], codec);
            assert_eq!(
                check(&two_without, &RecordRules::DEFAULT),
                Ok(3),
                "{codec:?}"
            );
            assert_eq!(
                check(&two_without, &COMPACTED),
                refused(&[
                    (0, Fault::NoKeyForCompaction),
                    (2, Fault::NoKeyForCompaction)
                ]),
                "{codec:?}"
            );
        }
    }

    #[test]
    fn a_record_without_a_key_is_not_held_to_the_window_as_well() {
        // As in Kafka, a record's missing key is its one fault; the
        // refusal is INVALID_TIMESTAMP if any other record's time is out.
        let rules = RecordRules {
            window: Some((0, 10)),
            ..COMPACTED
        };
        let batch = encoded(
            &[(50, None), (60, Some(b"k")), (5, None)],
            Compression::None,
        );
        let Err(RecordsError::Refused(faults)) = check(&batch, &rules) else {
            panic!("refused");
        };
        assert_eq!(
            faults.listed,
            [
                (0, Fault::NoKeyForCompaction),
                (1, Fault::TimestampOutOfRange),
                (2, Fault::NoKeyForCompaction)
            ]
        );
        assert!(faults.timestamps);
        let keys_only = encoded(&[(5, None)], Compression::None);
        let Err(RecordsError::Refused(faults)) = check(&keys_only, &rules) else {
            panic!("refused");
        };
        assert!(!faults.timestamps);
    }

    #[test]
    fn a_batch_claiming_the_append_time_gives_each_record_the_claimed_time() {
        let claiming = |claimed: i64| {
            let batch = encoded(&[(100, None), (300, None)], Compression::None);
            Bytes::from(altered(&batch, |b| {
                b[ATTRIBUTES + 1] |= LOG_APPEND_TIME;
                b[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&claimed.to_be_bytes());
            }))
        };
        // On a CreateTime topic a claimed time is a timestamp like any
        // other, held to the window; the records' own largest is returned.
        assert_eq!(check(&claiming(200), &RecordRules::DEFAULT), Ok(300));
        let window = RecordRules {
            window: Some((150, 250)),
            ..RecordRules::DEFAULT
        };
        assert_eq!(check(&claiming(200), &window), Ok(300));
        let out = refused(&[
            (0, Fault::TimestampOutOfRange),
            (1, Fault::TimestampOutOfRange),
        ]);
        assert_eq!(check(&claiming(400), &window), out);
        // No claimed time at all, or a LogAppendTime topic: every record
        // is refused.
        let claims = refused(&[
            (0, Fault::AppendTimeFromProducer),
            (1, Fault::AppendTimeFromProducer),
        ]);
        assert_eq!(check(&claiming(-1), &RecordRules::DEFAULT), claims);
        let stamped = RecordRules {
            create_time: false,
            ..RecordRules::DEFAULT
        };
        assert_eq!(check(&claiming(200), &stamped), claims);
        assert_eq!(
            check(&encoded(&[(100, None)], Compression::None), &stamped),
            Ok(100)
        );
    }

    #[test]
    fn a_refusal_lists_the_first_faults_and_counts_them_all() {
        let many = LISTED_FAULTS + 5;
        let batch = encoded(&vec![(1, None); many], Compression::Zstd);
        let Err(RecordsError::Refused(faults)) = check(&batch, &COMPACTED) else {
            panic!("refused");
        };
        assert_eq!(faults.total as usize, many);
        assert_eq!(faults.listed.len(), LISTED_FAULTS);
        let indexes: Vec<i32> = faults.listed.iter().map(|&(i, _)| i).collect();
        assert_eq!(indexes, (0..LISTED_FAULTS as i32).collect::<Vec<_>>());
        let message = faults.message();
        assert!(
            message.starts_with(&format!("{many} records of")),
            "{message}"
        );
        assert!(message.ends_with(&format!("the first {LISTED_FAULTS} are listed")));
        let one = encoded(&[(1, None), (2, Some(b"k"))], Compression::None);
        let Err(RecordsError::Refused(faults)) = check(&one, &COMPACTED) else {
            panic!("refused");
        };
        assert_eq!(
            faults.message(),
            "1 record of the batch was refused, for a rule of the topic's"
        );
    }

    #[test]
    fn a_count_that_is_not_the_records_is_refused() {
        for codec in CODECS {
            let batch = encoded(&[(1, None), (2, None)], codec);
            // Count and offset range agree with each other, not with the
            // records: fewer records than counted, then more.
            for (count, delta) in [(3, 2), (1, 0), (i32::MAX, i32::MAX - 1)] {
                let bad = altered(&batch, |b| {
                    set_i32(b, RECORD_COUNT, count);
                    set_i32(b, LAST_OFFSET_DELTA, delta);
                });
                assert_eq!(
                    check(&bad, &RecordRules::DEFAULT),
                    Err(RecordsError::Invalid),
                    "{codec:?} {count}"
                );
            }
            // The count disagrees with the offset range.
            let bad = altered(&batch, |b| set_i32(b, RECORD_COUNT, 3));
            assert_eq!(
                check(&bad, &RecordRules::DEFAULT),
                Err(RecordsError::Invalid),
                "{codec:?}"
            );
            let bad = altered(&batch, |b| set_i32(b, RECORD_COUNT, 0));
            assert_eq!(
                check(&bad, &RecordRules::DEFAULT),
                Err(RecordsError::Invalid),
                "{codec:?}"
            );
        }
    }

    /// A record is its length varint, then its body; `body` is one record
    /// with one header, whose header count and offset delta are changed.
    fn one_record(offset_delta: u8, headers: &[u8]) -> Vec<u8> {
        let mut body = vec![0u8, 0, offset_delta * 2, 1, 2, b'v'];
        body.extend_from_slice(headers);
        let mut record = vec![(body.len() as u8) * 2];
        record.extend_from_slice(&body);
        record
    }

    fn uncompressed(records: &[Vec<u8>]) -> Vec<u8> {
        let template = encoded(&vec![(1, None); records.len()], Compression::None);
        altered(&template, |b| {
            b.truncate(HEADER_LEN);
            for r in records {
                b.extend_from_slice(r);
            }
        })
    }

    #[test]
    fn a_record_must_fill_its_length_and_count_its_offset() {
        // One header "h" -> "x": count 1 (zigzag 2), key length 1, value 1.
        let good = one_record(0, &[2, 2, b'h', 2, b'x']);
        assert!(check(
            &uncompressed(std::slice::from_ref(&good)),
            &RecordRules::DEFAULT
        )
        .is_ok());
        // Two billion headers announced in a few bytes: refused as soon as
        // they run past the record, with nothing allocated for them.
        let many = one_record(0, &[0xfe, 0xff, 0xff, 0xff, 0x0f, 2, b'h', 2, b'x']);
        assert_eq!(
            check(&uncompressed(&[many]), &RecordRules::DEFAULT),
            Err(RecordsError::Invalid)
        );
        // A header's value longer than what is left of the record.
        let long = one_record(0, &[2, 2, b'h', 40, b'x']);
        assert_eq!(
            check(&uncompressed(&[long]), &RecordRules::DEFAULT),
            Err(RecordsError::Invalid)
        );
        // Offset deltas out of order.
        let records = [one_record(1, &[0]), one_record(0, &[0])];
        assert_eq!(
            check(&uncompressed(&records), &RecordRules::DEFAULT),
            Err(RecordsError::Invalid)
        );
        let records = [one_record(0, &[0]), one_record(1, &[0])];
        assert!(check(&uncompressed(&records), &RecordRules::DEFAULT).is_ok());
        // Bytes after the last counted record.
        let trailing = altered(&Bytes::from(uncompressed(&[good])), |b| b.push(0));
        assert_eq!(
            check(&trailing, &RecordRules::DEFAULT),
            Err(RecordsError::Invalid)
        );
    }

    #[test]
    fn compressed_records_that_do_not_decompress_are_corrupt() {
        for codec in [Compression::Gzip, Compression::Lz4, Compression::Zstd] {
            let batch = encoded(&[(1, None), (2, None)], codec);
            let bad = altered(&batch, |b| {
                let middle = HEADER_LEN + (b.len() - HEADER_LEN) / 2;
                b[HEADER_LEN..middle].fill(0x5a);
            });
            assert!(check(&bad, &RecordRules::DEFAULT).is_err(), "{codec:?}");
        }
        // A bare snappy block whose length header claims far more than it
        // can inflate to is refused before it is allocated.
        let batch = encoded(&[(1, None)], Compression::Snappy);
        let bomb = altered(&batch, |b| {
            b.truncate(HEADER_LEN);
            b[ATTRIBUTES + 1] = (b[ATTRIBUTES + 1] & !CODEC_MASK) | 2;
            b.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0]);
        });
        assert_eq!(
            check(&bomb, &RecordRules::DEFAULT),
            Err(RecordsError::Corrupt)
        );
        // A codec number Kafka does not define.
        let unknown = altered(&batch, |b| b[ATTRIBUTES + 1] |= 0x07);
        assert_eq!(
            check(&unknown, &RecordRules::DEFAULT),
            Err(RecordsError::Corrupt)
        );
    }

    #[test]
    fn a_record_that_inflates_far_is_read_through_not_held() {
        // 64 MiB of one byte compresses to a few kilobytes; the walk reads
        // through it with its own small buffers.
        let huge = record(0, 7, None, Bytes::from(vec![0u8; 64 << 20]));
        let bytes = encode(&[huge], Compression::Zstd);
        assert!(bytes.len() < 1 << 20, "{} bytes", bytes.len());
        assert!(check(&bytes, &RecordRules::DEFAULT).is_ok());
        assert_eq!(
            first_at_or_after(&bytes, 7),
            Some(RecordMeta {
                offset_delta: 0,
                timestamp: 7
            })
        );
    }
}
