//! Idempotent producers' state in one partition, as Kafka keeps it: for
//! each producer id, its epoch and the sequence ranges and offsets of its
//! last five batches.
//!
//! A producer with `enable.idempotence` (the default of Kafka's Java
//! client since 3.0, and of other clients that follow it) numbers its
//! batches per partition and resends a batch whose answer it did not get.
//! The leader uses this state to store each batch once: a resent batch
//! that matches one of the last five is answered with the offsets it was
//! first stored at, a batch that skips or repeats older numbers is refused
//! as out of order, and a batch from an older epoch of the producer is
//! refused as fenced off. The state lives with the partition, not with its
//! leader, so it survives a leader change; a truncation rebuilds it from
//! the batches left.

use std::collections::{HashMap, VecDeque};

/// How many of a producer's last batches are remembered to recognise a
/// resent one (Kafka's number; a producer has at most five requests in
/// flight per connection with idempotence on).
const BATCHES_RETAINED: usize = 5;

/// The producer fields of a v2 batch header that matter here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    /// The producer id, at least 0 (a batch without one is not tracked).
    pub producer_id: i64,
    /// The producer's epoch.
    pub epoch: i16,
    /// The sequence number of the batch's first record.
    pub first_seq: i32,
    /// The sequence number of its last record.
    pub last_seq: i32,
}

impl ProducerBatch {
    /// The fields of a batch whose first record has sequence `first_seq`
    /// and whose last record is `last_offset_delta` records further; `None`
    /// for a batch without a producer id (a producer without idempotence).
    pub fn new(
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        last_offset_delta: i32,
    ) -> Option<Self> {
        (producer_id >= 0).then(|| ProducerBatch {
            producer_id,
            epoch,
            first_seq,
            last_seq: add_sequence(first_seq, last_offset_delta),
        })
    }
}

/// `seq` advanced by `n`, wrapping from `i32::MAX` to 0 as Kafka's
/// sequence numbers do.
fn add_sequence(seq: i32, n: i32) -> i32 {
    let n = n.max(0);
    if seq > i32::MAX - n {
        n - (i32::MAX - seq) - 1
    } else {
        seq + n
    }
}

/// Why an idempotent batch was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceError {
    /// Its first sequence number does not follow the producer's last one
    /// (OUT_OF_ORDER_SEQUENCE_NUMBER).
    OutOfOrder,
    /// It comes from an older epoch of the producer than one already
    /// stored (INVALID_PRODUCER_EPOCH).
    OldEpoch,
}

/// Why a marker written for a producer (WriteTxnMarkers) was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerError {
    /// Its producer epoch is older than the producer's here
    /// (INVALID_PRODUCER_EPOCH).
    OldEpoch,
    /// Its coordinator epoch is older than that of the producer's last
    /// marker here (TRANSACTION_COORDINATOR_FENCED): a coordinator that
    /// lost its role, or an operator's stale view.
    CoordinatorFenced,
}

/// What an append's batches are, checked against the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// New batches, in sequence: store them.
    Append,
    /// A resent batch, stored before at these offsets (base, end): store
    /// nothing and answer with them.
    Duplicate(i64, i64),
}

#[derive(Debug, Clone, Copy)]
struct Stored {
    first_seq: i32,
    last_seq: i32,
    base: i64,
    end: i64,
}

#[derive(Debug)]
struct Producer {
    epoch: i16,
    /// The last batches stored, oldest first.
    batches: VecDeque<Stored>,
    /// The largest timestamp of its last batch, -1 before any.
    last_timestamp: i64,
    /// The largest coordinator epoch of the markers it got here: -1
    /// before any.
    coordinator_epoch: i32,
}

impl Producer {
    fn new(epoch: i16) -> Producer {
        Producer {
            epoch,
            batches: VecDeque::with_capacity(BATCHES_RETAINED),
            last_timestamp: -1,
            coordinator_epoch: -1,
        }
    }
}

/// A producer with state in a partition, as DescribeProducers gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub epoch: i16,
    /// The sequence number of its last record stored, -1 if none.
    pub last_sequence: i32,
    /// The largest timestamp of its last batch, -1 if none.
    pub last_timestamp: i64,
    pub coordinator_epoch: i32,
}

/// The state of every producer that wrote to one partition with a
/// producer id.
#[derive(Debug, Default)]
pub struct Producers {
    by_id: HashMap<i64, Producer>,
}

impl Producers {
    /// Checks one append's batches, in order, as Kafka's leader does: a
    /// batch matching one of its producer's last stored batches makes the
    /// whole append a duplicate of it; otherwise each must follow its
    /// producer's last sequence number (or the one before it in this
    /// append), start at 0 in a new epoch, and not come from an older
    /// epoch. A producer this partition has no state for may start at any
    /// number.
    pub fn check(&self, batches: &[ProducerBatch]) -> Result<Verdict, SequenceError> {
        for (i, batch) in batches.iter().enumerate() {
            let stored = self.by_id.get(&batch.producer_id);
            if let Some(p) = stored.filter(|p| p.epoch == batch.epoch) {
                let same =
                    |s: &&Stored| s.first_seq == batch.first_seq && s.last_seq == batch.last_seq;
                if let Some(s) = p.batches.iter().find(same) {
                    return Ok(Verdict::Duplicate(s.base, s.end));
                }
            }
            // The producer's last batch: earlier in this append, or stored.
            let earlier = batches[..i]
                .iter()
                .rev()
                .find(|b| b.producer_id == batch.producer_id)
                .map(|b| (b.epoch, Some(b.last_seq)));
            let current =
                earlier.or_else(|| stored.map(|p| (p.epoch, p.batches.back().map(|s| s.last_seq))));
            if let Some((epoch, last)) = current {
                if batch.epoch < epoch {
                    return Err(SequenceError::OldEpoch);
                }
                let follows = if batch.epoch != epoch {
                    batch.first_seq == 0
                } else {
                    last.is_none_or(|last| batch.first_seq == add_sequence(last, 1))
                };
                if !follows {
                    return Err(SequenceError::OutOfOrder);
                }
            }
        }
        Ok(Verdict::Append)
    }

    /// Records `batch`, stored at offsets `base..end`.
    pub fn record(&mut self, batch: ProducerBatch, base: i64, end: i64) {
        let p = (self.by_id)
            .entry(batch.producer_id)
            .or_insert_with(|| Producer::new(batch.epoch));
        if p.epoch != batch.epoch {
            p.epoch = batch.epoch;
            p.batches.clear();
        }
        if p.batches.len() == BATCHES_RETAINED {
            p.batches.pop_front();
        }
        p.batches.push_back(Stored {
            first_seq: batch.first_seq,
            last_seq: batch.last_seq,
            base,
            end,
        });
    }

    /// Whether a marker for `producer_id` at `epoch`, written by a
    /// coordinator at `coordinator_epoch`, may be stored, as Kafka's
    /// leader checks one: not from an older producer epoch, nor from an
    /// older coordinator than the producer's last marker here.
    pub fn check_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<(), MarkerError> {
        match self.by_id.get(&producer_id) {
            Some(p) if epoch < p.epoch => Err(MarkerError::OldEpoch),
            Some(p) if coordinator_epoch < p.coordinator_epoch => {
                Err(MarkerError::CoordinatorFenced)
            }
            _ => Ok(()),
        }
    }

    /// A transaction marker written at `epoch` by a coordinator at
    /// `coordinator_epoch` for `producer_id`: a newer epoch than its
    /// batches' (the coordinator aborted its transaction and fenced it)
    /// makes its next batch start at 0 in that epoch, and refuses the
    /// older epoch's. Neither epoch is ever lowered.
    pub fn end_transaction(&mut self, producer_id: i64, epoch: i16, coordinator_epoch: i32) {
        let p = (self.by_id)
            .entry(producer_id)
            .or_insert_with(|| Producer::new(epoch));
        if epoch > p.epoch {
            p.epoch = epoch;
            p.batches.clear();
        }
        p.coordinator_epoch = p.coordinator_epoch.max(coordinator_epoch);
    }

    /// Takes note of the largest timestamp of `producer_id`'s batch just
    /// stored (or of its marker).
    pub fn stamp(&mut self, producer_id: i64, timestamp: i64) {
        if let Some(p) = self.by_id.get_mut(&producer_id) {
            p.last_timestamp = timestamp;
        }
    }

    /// Every producer with state here, by producer id.
    pub fn active(&self) -> Vec<ActiveProducer> {
        let mut active: Vec<ActiveProducer> = (self.by_id.iter())
            .map(|(&producer_id, p)| ActiveProducer {
                producer_id,
                epoch: p.epoch,
                last_sequence: p.batches.back().map_or(-1, |b| b.last_seq),
                last_timestamp: p.last_timestamp,
                coordinator_epoch: p.coordinator_epoch,
            })
            .collect();
        active.sort_by_key(|a| a.producer_id);
        active
    }

    /// Forgets everything: the caller records the batches that are left.
    pub fn clear(&mut self) {
        self.by_id.clear();
    }

    /// Producers with state here.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether no producer has state here.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(producer_id: i64, epoch: i16, first_seq: i32, records: i32) -> ProducerBatch {
        ProducerBatch::new(producer_id, epoch, first_seq, records - 1).unwrap()
    }

    #[test]
    fn batches_in_sequence_are_appended_and_a_resent_one_is_recognised() {
        let mut p = Producers::default();
        // A producer this partition has not seen may start anywhere.
        assert_eq!(p.check(&[b(7, 0, 40, 3)]), Ok(Verdict::Append));
        p.record(b(7, 0, 40, 3), 100, 103);
        assert_eq!(p.check(&[b(7, 0, 43, 2)]), Ok(Verdict::Append));
        p.record(b(7, 0, 43, 2), 103, 105);
        // Resent: answered with the offsets it was stored at.
        assert_eq!(p.check(&[b(7, 0, 40, 3)]), Ok(Verdict::Duplicate(100, 103)));
        assert_eq!(p.check(&[b(7, 0, 43, 2)]), Ok(Verdict::Duplicate(103, 105)));
        // A gap, or a repeat that matches no stored batch.
        assert_eq!(p.check(&[b(7, 0, 46, 1)]), Err(SequenceError::OutOfOrder));
        assert_eq!(p.check(&[b(7, 0, 41, 1)]), Err(SequenceError::OutOfOrder));
        // Another producer has its own numbers.
        assert_eq!(p.check(&[b(8, 0, 0, 1)]), Ok(Verdict::Append));
        // Several batches in one append follow each other.
        assert_eq!(
            p.check(&[b(7, 0, 45, 2), b(8, 3, 0, 1), b(7, 0, 47, 1)]),
            Ok(Verdict::Append)
        );
        assert_eq!(
            p.check(&[b(7, 0, 45, 2), b(7, 0, 45, 1)]),
            Err(SequenceError::OutOfOrder)
        );
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn only_the_last_five_batches_are_recognised() {
        let mut p = Producers::default();
        for i in 0..7 {
            p.record(b(1, 0, i, 1), i64::from(i), i64::from(i) + 1);
        }
        assert_eq!(p.check(&[b(1, 0, 2, 1)]), Ok(Verdict::Duplicate(2, 3)));
        assert_eq!(p.check(&[b(1, 0, 1, 1)]), Err(SequenceError::OutOfOrder));
        assert_eq!(p.check(&[b(1, 0, 7, 1)]), Ok(Verdict::Append));
    }

    #[test]
    fn a_new_epoch_starts_at_zero_and_fences_the_old_one() {
        let mut p = Producers::default();
        p.record(b(1, 2, 0, 5), 0, 5);
        assert_eq!(p.check(&[b(1, 3, 5, 1)]), Err(SequenceError::OutOfOrder));
        assert_eq!(p.check(&[b(1, 3, 0, 1)]), Ok(Verdict::Append));
        p.record(b(1, 3, 0, 1), 5, 6);
        assert_eq!(p.check(&[b(1, 2, 5, 1)]), Err(SequenceError::OldEpoch));
        // The old epoch's batches are forgotten with it.
        assert_eq!(p.check(&[b(1, 2, 0, 5)]), Err(SequenceError::OldEpoch));
        assert_eq!(p.check(&[b(1, 3, 1, 1)]), Ok(Verdict::Append));
    }

    #[test]
    fn active_producers_say_their_last_sequence_time_and_marker() {
        let mut producers = Producers::default();
        producers.record(b(7, 0, 0, 3), 0, 3);
        producers.stamp(7, 1_000);
        producers.record(b(5, 2, 0, 1), 3, 4);
        // A producer without state is not made by a stamp.
        producers.stamp(9, 2_000);
        let active = producers.active();
        assert_eq!(
            active.iter().map(|a| a.producer_id).collect::<Vec<_>>(),
            [5, 7]
        );
        assert_eq!(
            active[1],
            ActiveProducer {
                producer_id: 7,
                epoch: 0,
                last_sequence: 2,
                last_timestamp: 1_000,
                coordinator_epoch: -1,
            }
        );
        assert_eq!((active[0].last_sequence, active[0].last_timestamp), (0, -1));
        // A marker: the coordinator's epoch, and a new producer epoch
        // leaves no sequence behind.
        producers.end_transaction(7, 1, 0);
        let seven = producers.active()[1];
        assert_eq!(
            (seven.epoch, seven.last_sequence, seven.coordinator_epoch),
            (1, -1, 0)
        );
    }

    #[test]
    fn a_marker_from_an_older_producer_or_coordinator_epoch_is_refused() {
        let mut producers = Producers::default();
        // No state: any marker goes.
        assert_eq!(producers.check_marker(3, 0, -1), Ok(()));
        producers.record(b(3, 2, 0, 1), 0, 1);
        assert_eq!(producers.check_marker(3, 1, 0), Err(MarkerError::OldEpoch));
        // No marker yet: the coordinator epoch is -1, so any goes.
        assert_eq!(producers.check_marker(3, 2, -1), Ok(()));
        producers.end_transaction(3, 2, 4);
        assert_eq!(
            producers.check_marker(3, 2, 3),
            Err(MarkerError::CoordinatorFenced)
        );
        assert_eq!(producers.check_marker(3, 5, 4), Ok(()));
        // An older coordinator's marker stored anyway lowers neither.
        producers.end_transaction(3, 1, 0);
        let three = producers.active()[0];
        assert_eq!((three.epoch, three.coordinator_epoch), (2, 4));
    }

    #[test]
    fn sequence_numbers_wrap_to_zero() {
        let mut p = Producers::default();
        let last = b(1, 0, i32::MAX - 1, 2);
        assert_eq!(last.last_seq, i32::MAX);
        p.record(last, 0, 2);
        assert_eq!(p.check(&[b(1, 0, 0, 1)]), Ok(Verdict::Append));
        assert_eq!(b(1, 0, i32::MAX, 3).last_seq, 1);
        assert_eq!(ProducerBatch::new(-1, -1, -1, 0), None);
    }
}
