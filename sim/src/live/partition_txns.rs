//! A partition's transactions, as Kafka's log tracks them for consumers
//! that read only committed records (`isolation.level=read_committed`).
//!
//! A transactional producer's records are stored as they come, and the
//! transaction coordinator ends the transaction with a marker batch (COMMIT
//! or ABORT) in each of its partitions. Until then its records are
//! unstable: the last stable offset (LSO), below which a committed reader
//! may read, stays at the first of them. It also waits for the marker to
//! be replicated (to fall below the high watermark), so that what a reader
//! saw as committed cannot be cut back by a leader change. Readers skip an
//! aborted transaction's records by the list of aborted spans a fetch
//! carries.

use std::collections::HashMap;

/// What a stored batch is to the transactions, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnBatch {
    /// Records in producer `producer_id`'s transaction.
    Data {
        /// Its producer id.
        producer_id: i64,
    },
    /// The marker that ends producer `producer_id`'s transaction here.
    Marker {
        /// Its producer id.
        producer_id: i64,
        /// The producer epoch the coordinator wrote it with (a transaction
        /// aborted by its timeout gets a newer one, fencing the producer).
        epoch: i16,
        /// The epoch of the coordinator that wrote it, as the marker's
        /// value carries it.
        coordinator_epoch: i32,
        /// COMMIT, or ABORT.
        commit: bool,
    },
}

/// An aborted transaction's span in the partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// Its producer id.
    pub producer_id: i64,
    /// The offset of its first record here.
    pub first: i64,
    /// The offset of its ABORT marker.
    pub last: i64,
}

/// The transactions of one partition.
#[derive(Debug, Default)]
pub struct PartitionTxns {
    /// Open transactions: producer id -> the offset of its first record.
    open: HashMap<i64, i64>,
    /// Ended transactions whose marker is not below the high watermark
    /// yet: (first offset, marker offset).
    ending: Vec<(i64, i64)>,
    /// Aborted transactions, in the order of their markers (so by `last`).
    aborted: Vec<AbortedTxn>,
}

impl PartitionTxns {
    /// Takes note of `batch`, stored at offset `base`. A marker for a
    /// transaction with no records here (its partition was added, nothing
    /// was written) changes nothing.
    pub fn record(&mut self, batch: TxnBatch, base: i64) {
        match batch {
            TxnBatch::Data { producer_id } => {
                self.open.entry(producer_id).or_insert(base);
            }
            TxnBatch::Marker {
                producer_id,
                commit,
                ..
            } => {
                if let Some(first) = self.open.remove(&producer_id) {
                    self.ending.push((first, base));
                    if !commit {
                        self.aborted.push(AbortedTxn {
                            producer_id,
                            first,
                            last: base,
                        });
                    }
                }
            }
        }
    }

    /// The last stable offset with the high watermark at `hw`: the first
    /// record of a transaction still open or whose marker is not yet
    /// below `hw`, or `hw` if there is none before it.
    pub fn last_stable(&self, hw: i64) -> i64 {
        let ending = self
            .ending
            .iter()
            .filter(|&&(_, marker)| marker >= hw)
            .map(|&(first, _)| first);
        self.open.values().copied().chain(ending).fold(hw, i64::min)
    }

    /// Forgets the ended transactions whose marker is below `hw`.
    pub fn settle(&mut self, hw: i64) {
        self.ending.retain(|&(_, marker)| marker >= hw);
    }

    /// The aborted transactions a read of offsets `from..to` meets: a
    /// record below `to`, the marker at or after `from`.
    pub fn aborted_in(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        // Each committed fetch asks: skip the spans that ended before it
        // by search, not one by one.
        let ended = self.aborted.partition_point(|a| a.last < from);
        self.aborted[ended..]
            .iter()
            .filter(|a| a.first < to)
            .copied()
            .collect()
    }

    /// Forgets the aborted spans wholly below `start` (deleted records).
    pub fn forget_below(&mut self, start: i64) {
        let gone = self.aborted.partition_point(|a| a.last < start);
        self.aborted.drain(..gone);
    }

    /// Whether `producer_id` has records here in a transaction with no
    /// marker yet.
    pub fn is_open(&self, producer_id: i64) -> bool {
        self.open.contains_key(&producer_id)
    }

    /// The offset of `producer_id`'s first record in its transaction with
    /// no marker yet, if it has one.
    pub fn open_since(&self, producer_id: i64) -> Option<i64> {
        self.open.get(&producer_id).copied()
    }

    /// Forgets everything: the caller records the batches that are left.
    pub fn clear(&mut self) {
        *self = PartitionTxns::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(producer_id: i64) -> TxnBatch {
        TxnBatch::Data { producer_id }
    }

    fn marker(producer_id: i64, commit: bool) -> TxnBatch {
        TxnBatch::Marker {
            producer_id,
            epoch: 0,
            coordinator_epoch: 0,
            commit,
        }
    }

    #[test]
    fn the_last_stable_offset_waits_for_each_marker_to_be_replicated() {
        let mut t = PartitionTxns::default();
        assert_eq!(t.last_stable(10), 10);
        t.record(data(1), 10);
        t.record(data(2), 12);
        t.record(data(1), 14);
        // Open transactions hold it at their first record.
        assert_eq!(t.last_stable(16), 10);
        t.record(marker(1, true), 16);
        // Committed, but the marker is not replicated yet.
        assert_eq!(t.last_stable(16), 10);
        assert_eq!(t.last_stable(17), 12);
        t.record(marker(2, false), 17);
        assert_eq!(t.last_stable(18), 18);
        t.settle(18);
        assert_eq!(t.last_stable(18), 18);
        assert!(!t.is_open(1) && !t.is_open(2));
        // Below the high watermark in any case.
        assert_eq!(t.last_stable(5), 5);
    }

    #[test]
    fn reads_meet_the_aborted_transactions_that_overlap_them() {
        let mut t = PartitionTxns::default();
        t.record(data(7), 0);
        t.record(data(8), 1);
        t.record(marker(7, false), 3);
        t.record(marker(8, true), 4);
        // A marker for a transaction that wrote nothing here.
        t.record(marker(9, false), 5);
        let aborted = AbortedTxn {
            producer_id: 7,
            first: 0,
            last: 3,
        };
        assert_eq!(t.aborted_in(0, 6), vec![aborted]);
        assert_eq!(t.aborted_in(3, 6), vec![aborted]);
        assert_eq!(t.aborted_in(4, 6), vec![]);
        assert_eq!(t.aborted_in(0, 0), vec![]);
        t.forget_below(3);
        assert_eq!(t.aborted_in(0, 6), vec![aborted]);
        t.forget_below(4);
        assert_eq!(t.aborted_in(0, 6), vec![]);
        t.record(data(7), 6);
        t.record(marker(7, false), 7);
        t.clear();
        assert_eq!(t.aborted_in(0, 6), vec![]);
    }
}
