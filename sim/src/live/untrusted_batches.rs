//! Batches a client could send, mangled at random and sealed again with a
//! right length and CRC (so that the mangling reaches past the CRC check),
//! through everything that reads a produce's records: the framing check,
//! the append under each topic codec, key rule and size limit, then what
//! reads the stored batch (fetch, the searches by time, a rewrite into
//! each codec). Each must answer with a typed refusal or a stored batch
//! that reads back, never a panic.

use super::batch_header::{ATTRIBUTES, HEADER_LEN, LAST_OFFSET_DELTA, MAX_TIMESTAMP, RECORD_COUNT};
use super::batch_records::tests::{altered, encoded};
use super::batch_records::{self, RecordRules};
use super::log::{AppendRules, PartitionLog};
use super::produce_framing;
use super::recompress::tests::at_default;
use super::recompress::{recompress, Target};
use bytes::Bytes;
use proptest::prelude::*;
use proptest::sample::Index;
use std::time::Instant;

/// What is done to a well-formed batch before it is sent.
#[derive(Debug, Clone)]
struct Mangling {
    /// Bytes of the records section XORed with a value (never 0).
    flips: Vec<(Index, u8)>,
    /// The records section cut at this point.
    cut: Option<Index>,
    /// Bytes added after the records.
    tail: Vec<u8>,
    count: Option<i32>,
    last_offset_delta: Option<i32>,
    attributes: Option<u8>,
}

fn mangling() -> impl Strategy<Value = Mangling> {
    (
        prop::collection::vec((any::<Index>(), 1u8..), 0..4),
        prop::option::weighted(0.2, any::<Index>()),
        prop::collection::vec(any::<u8>(), 0..6),
        prop::option::weighted(0.2, -2i32..8),
        prop::option::weighted(0.2, -2i32..8),
        prop::option::weighted(0.2, any::<u8>()),
    )
        .prop_map(
            |(flips, cut, tail, count, last_offset_delta, attributes)| Mangling {
                flips,
                cut,
                tail,
                count,
                last_offset_delta,
                attributes,
            },
        )
}

/// `batch` mangled, with its length and CRC computed again.
fn mangled(batch: &Bytes, m: &Mangling) -> Bytes {
    Bytes::from(altered(batch, |bytes| {
        let records = bytes.len() - HEADER_LEN;
        for (at, x) in &m.flips {
            if records > 0 {
                bytes[HEADER_LEN + at.index(records)] ^= x;
            }
        }
        if let Some(at) = m.cut {
            bytes.truncate(HEADER_LEN + at.index(records + 1));
        }
        bytes.extend_from_slice(&m.tail);
        if let Some(count) = m.count {
            bytes[RECORD_COUNT..RECORD_COUNT + 4].copy_from_slice(&count.to_be_bytes());
        }
        if let Some(delta) = m.last_offset_delta {
            bytes[LAST_OFFSET_DELTA..LAST_OFFSET_DELTA + 4].copy_from_slice(&delta.to_be_bytes());
        }
        if let Some(a) = m.attributes {
            bytes[ATTRIBUTES + 1] = a;
        }
    }))
}

/// The rules of the topic the batch is sent to (a window only where the
/// broker does not stamp its own time, as the topic's config gives it).
fn rules() -> impl Strategy<Value = AppendRules> {
    (
        prop::sample::select(vec![200usize, 2_000, 1 << 20]),
        any::<bool>(),
        any::<bool>(),
        prop::option::of((0u8..5, prop::sample::select(vec![-7, -1, 1, 3, 9, 12, 17]))),
        // About the records' own timestamps (0 to 2), so that some fall
        // outside.
        prop::option::weighted(0.3, (-2i64..4, -2i64..4)),
    )
        .prop_map(
            |(max_bytes, stamp, keys_required, compression, window)| AppendRules {
                max_bytes,
                stamp: stamp.then_some(1_700_000_000_000),
                keys_required,
                compression: compression.map(|(codec, level)| Target { codec, level }),
                timestamps: window.filter(|_| !stamp).map(|(a, b)| (a.min(b), a.max(b))),
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn a_mangled_batch_is_refused_or_stored_readable(
        records in prop::collection::vec((0i64..3, any::<bool>()), 1..5),
        codec in 0usize..5,
        m in mangling(),
        rules in rules(),
        asked in -1i64..4,
    ) {
        let keyed: Vec<(i64, Option<&[u8]>)> = records
            .iter()
            .map(|&(t, key)| (t, key.then_some(&b"k"[..])))
            .collect();
        let sent = mangled(&encoded(&keyed, batch_records::tests::CODECS[codec]), &m);
        // As the produce handler does: the framing first.
        if produce_framing::check(13, Some(&sent)).is_err() {
            return Ok(());
        }
        let mut log = PartitionLog::new(vec![0], Instant::now());
        let Ok(appended) = log.append(&sent, &rules, None) else {
            return Ok(());
        };
        // Stored: every reader takes it.
        let end = log.log_end();
        prop_assert_eq!(appended.end, end);
        log.hw = end;
        let stored = log.read(0, 1 << 20, end);
        let record_rules = RecordRules {
            keys_required: rules.keys_required,
            ..RecordRules::default()
        };
        let max = batch_records::check(&stored, &record_rules);
        prop_assert!(max.is_ok());
        // The header's largest timestamp is the records', or the append
        // time the broker stamped.
        let header = i64::from_be_bytes(stored[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].try_into().unwrap());
        prop_assert_eq!(Ok(header), rules.stamp.map_or(max, Ok));
        prop_assert!(log.offset_of_max_timestamp().is_some());
        if let Some((offset, _)) = log.offset_for_timestamp(asked) {
            prop_assert!((0..end).contains(&offset));
        }
        for target in 0..5 {
            match recompress(&stored, at_default(target), 1 << 20) {
                Ok(rewritten) => {
                    prop_assert!(batch_records::check(&rewritten, &record_rules).is_ok())
                }
                Err(e) => prop_assert!(false, "{:?} into codec {}", e, target),
            }
        }
    }
}
