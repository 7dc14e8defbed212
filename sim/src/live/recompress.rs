//! A batch rewritten in its topic's codec, as Kafka's leader rewrites one
//! when the topic's `compression.type` names a codec other than the
//! batch's: the same header (producer, sequence, timestamps, offsets) and
//! the same records, compressed anew, with the length and the CRC that
//! follow. A record's bytes do not depend on the codec, so the records are
//! streamed from one codec to the other, never re-encoded or held whole.
//!
//! The codecs are written as Kafka's Java broker writes them, at the
//! topic's level for the codec: gzip, snappy in snappy-java's framing
//! (blocks of 32 KiB), an LZ4 frame of independent 64 KiB blocks (lz4's
//! fast compressor at Kafka's default level, 9, its high-compression one
//! at any other, whose levels run from 2 to 12), and a zstd frame.

use super::batch_header::{seal, ATTRIBUTES, CODEC_MASK, HEADER_LEN, LENGTH, LOG_OVERHEAD};
use super::batch_records::{self, RecordsError};
use super::topic_config::LZ4_DEFAULT_LEVEL;
use bytes::Bytes;
use flate2::write::GzEncoder;
use std::io::{self, Read, Write};
use zstd::zstd_safe::CParameter;

/// snappy-java's stream header: its magic, then its version and the
/// oldest version that reads it (both 1).
const XERIAL_HEADER: &[u8] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// snappy-java's block size.
const SNAPPY_BLOCK: usize = 32 * 1024;

/// Why a batch was not rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RewriteError {
    /// Rewritten, it would be larger than the topic takes
    /// (MESSAGE_TOO_LARGE, as Kafka checks a batch again after it
    /// recompressed it).
    TooLarge,
    /// Its records do not decompress, or the codec is none of Kafka's.
    Records(RecordsError),
}

/// The codec a topic stores its batches in, and the level to compress at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Kafka's id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub codec: u8,
    /// As the topic's `compression.<codec>.level` gives it (gzip's -1 is
    /// zlib's default, 6); ignored for a codec without levels.
    pub level: i32,
}

/// zstd's "ultra" levels (20 to 22, which its command line gates behind
/// `--ultra`) keep their search here but take level 19's window and
/// tables (as powers of two: 8 MiB of window, a chain of 2^24 and a hash
/// of 2^22 entries), which level 22's own exceed many times over, sized
/// as they are for an input without end. Measured on the 2-vCPU AMD EPYC
/// VM with a throwaway program (the `zstd` crate at level 22, one stream
/// of 700 KB of patterned bytes, peak RSS by `/usr/bin/time -f %M`):
/// 725 MB with level 22's tables, 86 MB with these, and 25,762 bytes out
/// either way; a match further back than the window is what these
/// tables can lose.
const ZSTD_LAST_PLAIN_LEVEL: i32 = 19;
const ZSTD_ULTRA_TABLES: (u32, u32, u32) = (23, 24, 22);

/// The lowest level of lz4's high-compression compressor in its frames.
const LZ4_LOWEST_HIGH: u32 = 2;

/// `batch` (a v2 batch whose records were checked) with its records in
/// the codec and at the level of `target`, if it is at most `max_bytes`
/// long then. Past that, the rewriting reads on without keeping what it
/// writes, so a small batch that inflates to gigabytes costs time, not
/// memory.
pub fn recompress(batch: &[u8], target: Target, max_bytes: usize) -> Result<Bytes, RewriteError> {
    let corrupt = RewriteError::Records(RecordsError::Corrupt);
    let (header, records) = match (batch.get(..HEADER_LEN), batch.get(HEADER_LEN..)) {
        (Some(h), Some(r)) => (h, r),
        _ => return Err(RewriteError::Records(RecordsError::Invalid)),
    };
    let source = batch_records::decompressor(batch_records::codec(batch), records)
        .map_err(RewriteError::Records)?;
    let mut out = Capped {
        bytes: header.to_vec(),
        limit: max_bytes,
        over: false,
    };
    out.bytes[ATTRIBUTES + 1] = (out.bytes[ATTRIBUTES + 1] & !CODEC_MASK) | target.codec;
    compress(source, target, &mut out).map_err(|_| corrupt)?;
    if out.over {
        return Err(RewriteError::TooLarge);
    }
    let mut out = out.bytes;
    let length = i32::try_from(out.len() - LOG_OVERHEAD).map_err(|_| RewriteError::TooLarge)?;
    out[LENGTH..LENGTH + 4].copy_from_slice(&length.to_be_bytes());
    seal(&mut out);
    Ok(Bytes::from(out))
}

/// The rewritten batch, kept up to `limit` bytes; past it, what is
/// written is dropped and `over` set (writing never fails, so an encoder
/// runs to the end of its input).
struct Capped {
    bytes: Vec<u8>,
    limit: usize,
    over: bool,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.over && self.bytes.len() + buf.len() <= self.limit {
            self.bytes.extend_from_slice(buf);
        } else {
            self.over = true;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes `source` to `out` compressed as `target` says.
fn compress(mut source: impl Read, target: Target, out: &mut Capped) -> io::Result<()> {
    match target.codec {
        0 => {
            io::copy(&mut source, out)?;
        }
        1 => {
            let level = u32::try_from(target.level)
                .map_or(flate2::Compression::default(), flate2::Compression::new);
            let mut gzip = GzEncoder::new(out, level);
            io::copy(&mut source, &mut gzip)?;
            gzip.finish()?;
        }
        2 => snappy_framed(source, out)?,
        3 => {
            // Kafka's reader decompresses each block on its own, so none
            // may refer back to the one before.
            let mut lz4 = lz4::EncoderBuilder::new()
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .checksum(lz4::ContentChecksum::NoChecksum)
                // 0 is lz4's fast compressor; from 2 its high-compression
                // one, whose levels end at 12 (higher ones are 12). Kafka
                // uses that one at every level but its default, 1 too,
                // which is 2 here, the lowest.
                .level(if target.level == LZ4_DEFAULT_LEVEL {
                    0
                } else {
                    target.level.unsigned_abs().max(LZ4_LOWEST_HIGH)
                })
                .build(out)?;
            io::copy(&mut source, &mut lz4)?;
            let (_, finished) = lz4.finish();
            finished?;
        }
        4 => {
            let mut zstd = zstd::stream::write::Encoder::new(out, target.level)?;
            if target.level > ZSTD_LAST_PLAIN_LEVEL {
                let (window, chain, hash) = ZSTD_ULTRA_TABLES;
                zstd.window_log(window)?;
                zstd.set_parameter(CParameter::ChainLog(chain))?;
                zstd.set_parameter(CParameter::HashLog(hash))?;
            }
            io::copy(&mut source, &mut zstd)?;
            zstd.finish()?;
        }
        _ => return Err(io::Error::other("no such codec")),
    }
    Ok(())
}

/// snappy-java's framing: its header, then each block of up to 32 KiB
/// compressed on its own, led by its compressed length.
fn snappy_framed(mut source: impl Read, out: &mut Capped) -> io::Result<()> {
    out.write_all(XERIAL_HEADER)?;
    let mut encoder = snap::raw::Encoder::new();
    let mut block = vec![0; SNAPPY_BLOCK];
    loop {
        let mut filled = 0;
        while filled < block.len() {
            match source.read(&mut block[filled..])? {
                0 => break,
                n => filled += n,
            }
        }
        if filled == 0 {
            return Ok(());
        }
        let compressed = encoder
            .compress_vec(&block[..filled])
            .map_err(io::Error::other)?;
        let len = i32::try_from(compressed.len()).map_err(io::Error::other)?;
        out.write_all(&len.to_be_bytes())?;
        out.write_all(&compressed)?;
        if filled < block.len() {
            return Ok(());
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::live::batch_header::CRC;
    use crate::live::batch_records::tests::{encoded, CODECS};
    use crate::live::batch_records::RecordRules;
    use crate::live::topic_config::TopicConfig;
    use bytes::BytesMut;
    use kafka_protocol::records::{Compression, RecordBatchDecoder};

    /// A batch of `n` records (the first without a key), each with a
    /// 300-byte value and a header, timestamps out of order.
    fn batch(n: i64, compression: Compression) -> Bytes {
        let keys: Vec<Vec<u8>> = (0..n).map(|i| format!("key-{i}").into_bytes()).collect();
        let records: Vec<(i64, Option<&[u8]>)> = (0..n)
            .map(|i| {
                (
                    1_700_000_000_000 + i % 7,
                    (i > 0).then(|| &keys[i as usize][..]),
                )
            })
            .collect();
        encoded(&records, compression)
    }

    /// `codec` at Kafka's default level for it.
    pub(crate) fn at_default(codec: u8) -> Target {
        let level = TopicConfig::default().compression_level(codec);
        Target { codec, level }
    }

    /// What a consumer reads of a batch: each record's offset, timestamp,
    /// key, value and headers.
    fn read(batch: &Bytes) -> Vec<String> {
        let mut bytes = batch.clone();
        let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
        set.records.iter().map(|r| format!("{r:?}")).collect()
    }

    #[test]
    fn every_codec_becomes_every_other_and_the_records_stay_the_same() {
        for from in CODECS {
            let original = batch(60, from);
            let records = read(&original);
            for (to, _) in CODECS.iter().enumerate() {
                let to = to as u8;
                let rewritten = recompress(&original, at_default(to), 1 << 20).unwrap();
                assert_eq!(batch_records::codec(&rewritten), to);
                // The crate's decoder checks the length and the CRC.
                assert_eq!(read(&rewritten), records, "{from:?} -> {to}");
                assert!(batch_records::check(&rewritten, &RecordRules::default()).is_ok());
                // The offsets, the epoch, the magic, and after the
                // attributes the timestamps, the producer and the count.
                assert_eq!(rewritten[..LENGTH], original[..LENGTH]);
                assert_eq!(rewritten[LENGTH + 4..CRC], original[LENGTH + 4..CRC]);
                assert_eq!(
                    rewritten[ATTRIBUTES + 2..HEADER_LEN],
                    original[ATTRIBUTES + 2..HEADER_LEN]
                );
            }
        }
    }

    #[test]
    fn each_level_kafka_takes_writes_a_batch_every_reader_reads() {
        // Repetitive enough that the levels differ: 2,000 records of 300
        // bytes, about 700 KB uncompressed.
        let original = batch(2_000, Compression::None);
        let records = read(&original);
        let size = |codec, level| {
            let rewritten = recompress(&original, Target { codec, level }, 1 << 22).unwrap();
            assert_eq!(read(&rewritten), records, "{codec} at {level}");
            let rules = RecordRules::default();
            assert!(
                batch_records::check(&rewritten, &rules).is_ok(),
                "{codec} at {level}"
            );
            rewritten.len()
        };
        let gzip = [1, -1, 9].map(|l| size(1, l));
        let lz4 = [1, 9, 3, 12, 17].map(|l| size(3, l));
        let zstd = [-131_072, -5, 1, 3, 19, 20, 22].map(|l| size(4, l));
        // The levels are applied: the extremes differ as they should.
        assert!(gzip[0] > gzip[2], "{gzip:?}");
        assert!(lz4[1] > lz4[3], "fast against high compression: {lz4:?}");
        assert_eq!(lz4[3], lz4[4], "lz4's levels end at 12");
        assert!(lz4[0] < lz4[1], "1 is high compression too: {lz4:?}");
        assert!(zstd[0] > zstd[2] && zstd[2] > zstd[6], "{zstd:?}");
    }

    #[test]
    fn snappy_is_written_in_the_java_clients_framing_a_block_at_a_time() {
        let original = batch(500, Compression::None);
        assert!(original.len() > 4 * SNAPPY_BLOCK, "several blocks");
        let rewritten = recompress(&original, at_default(2), 1 << 20).unwrap();
        assert!(rewritten[HEADER_LEN..].starts_with(XERIAL_HEADER));
        assert_eq!(read(&rewritten), read(&original));
    }

    #[test]
    fn records_that_do_not_decompress_or_an_unknown_codec_are_refused() {
        let mut broken = BytesMut::from(&batch(3, Compression::Gzip)[..]);
        let last = broken.len() - 5;
        broken[last] ^= 0xff;
        let corrupt = Err(RewriteError::Records(RecordsError::Corrupt));
        for to in 0..5 {
            assert_eq!(
                recompress(&broken, at_default(to), 1 << 20),
                corrupt,
                "to {to}"
            );
        }
        assert_eq!(
            recompress(&batch(3, Compression::None), at_default(6), 1 << 20),
            corrupt
        );
    }

    #[test]
    fn a_batch_that_would_outgrow_the_topics_limit_is_too_large_and_not_kept() {
        // 500 records of 300 bytes, a few KB in zstd, about 160 KB without.
        let small = batch(500, Compression::Zstd);
        assert!(small.len() < 16 * 1024);
        let inflated = recompress(&small, at_default(0), 1 << 20).unwrap();
        assert!(inflated.len() > 150_000);
        assert_eq!(
            recompress(&small, at_default(0), 64 * 1024),
            Err(RewriteError::TooLarge)
        );
        // Within the limit exactly, it is taken.
        assert_eq!(
            recompress(&small, at_default(0), inflated.len()).map(|b| b.len()),
            Ok(inflated.len())
        );
    }
}
