//! Where each leader epoch of a partition's log starts, as Kafka's
//! leader-epoch cache keeps it (KIP-101, KIP-320). A new leader records its
//! epoch at its log end when it takes over; every batch it appends carries
//! that epoch. OffsetForLeaderEpoch answers from here where an epoch ended,
//! so that a consumer that read up to some offset in an epoch can tell
//! whether the log it read was cut back by a later leader (a truncation)
//! or still holds what it read.

use kafka_protocol::error::ResponseError;

/// Kafka's "no epoch" and "no offset" in OffsetForLeaderEpoch answers.
pub const UNDEFINED: (i32, i64) = (-1, -1);

/// Checks the leader epoch a client believes current (`asked`, -1: not
/// given) against the partition's (`current`), as Kafka's brokers check a
/// Fetch, a ListOffsets or an OffsetForLeaderEpoch: an older one is fenced
/// (the client's metadata is stale: it asks again), a newer one unknown
/// (this broker has not learned of it yet: the client retries).
pub fn check_current(current: i32, asked: i32) -> Result<(), ResponseError> {
    match asked {
        -1 => Ok(()),
        a if a < current => Err(ResponseError::FencedLeaderEpoch),
        a if a > current => Err(ResponseError::UnknownLeaderEpoch),
        _ => Ok(()),
    }
}

/// The epochs of one log, oldest first: each with the offset of its first
/// record, epochs and offsets both increasing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderEpochs {
    starts: Vec<(i32, i64)>,
}

impl LeaderEpochs {
    /// A new log's: epoch 0 from offset 0.
    pub fn new() -> Self {
        LeaderEpochs {
            starts: vec![(0, 0)],
        }
    }

    /// A leader of `epoch` appends from `start` on. Later entries (epochs
    /// at or above it, or starting at or past `start`: epochs in which
    /// nothing stayed in the log) give way, as in Kafka's cache.
    pub fn assign(&mut self, epoch: i32, start: i64) {
        self.starts.retain(|&(e, s)| e < epoch && s < start);
        self.starts.push((epoch, start));
    }

    /// The log was cut back to end at `end`: the epochs that started there
    /// or later hold nothing any more.
    pub fn truncate_from_end(&mut self, end: i64) {
        self.starts.retain(|&(_, s)| s < end);
    }

    /// The log now starts at `start`: the epochs wholly below it go, and
    /// the one it falls in starts there, as Kafka's cache does after a
    /// deletion from the start.
    pub fn truncate_from_start(&mut self, start: i64) {
        let covering = self.starts.partition_point(|&(_, s)| s <= start);
        if covering == 0 {
            return;
        }
        self.starts.drain(..covering - 1);
        self.starts[0].1 = start;
    }

    /// The epoch the record at `offset` was written in (`None`: below the
    /// first epoch known).
    pub fn epoch_at(&self, offset: i64) -> Option<i32> {
        let i = self.starts.partition_point(|&(_, s)| s <= offset);
        i.checked_sub(1).map(|i| self.starts[i].0)
    }

    /// The latest epoch with a start recorded.
    pub fn latest(&self) -> Option<i32> {
        self.starts.last().map(|&(e, _)| e)
    }

    /// Where `requested` ended, as OffsetForLeaderEpoch answers it: the
    /// largest epoch at or below it and the start of the first epoch above
    /// it (the log end for the latest epoch); for an epoch older than all
    /// kept, that epoch and the first kept start; [`UNDEFINED`] for an
    /// epoch later than all, or for -1.
    pub fn end_offset_for(&self, requested: i32, log_end: i64) -> (i32, i64) {
        if requested < 0 {
            return UNDEFINED;
        }
        if self.latest() == Some(requested) {
            return (requested, log_end);
        }
        let above = self.starts.partition_point(|&(e, _)| e <= requested);
        let Some(&(_, next_start)) = self.starts.get(above) else {
            return UNDEFINED;
        };
        match above.checked_sub(1) {
            Some(i) => (self.starts[i].0, next_start),
            None => (requested, next_start),
        }
    }
}

/// What a fetch that names the epoch of the last record it read
/// (`last_fetched`, Fetch v12 and later) gets, checked before it reads:
/// `Ok(None)` to read on; `Ok(Some((epoch, end)))` when the log diverged
/// from what it read, the largest epoch at or below `last_fetched` and
/// where it ended here (the fetch is answered at once with that, and no
/// records, for the client to cut its own copy back there); or the
/// error, OFFSET_OUT_OF_RANGE, when that epoch's end cannot be told or
/// the offset lies below the log start. Kafka's leader checks in this
/// order; a client that names no epoch (-1, as consumers do) reads on.
pub fn diverging(
    epochs: &LeaderEpochs,
    last_fetched: i32,
    offset: i64,
    log_start: i64,
    log_end: i64,
) -> Result<Option<(i32, i64)>, ResponseError> {
    if last_fetched < 0 {
        return Ok(None);
    }
    let (epoch, end) = epochs.end_offset_for(last_fetched, log_end);
    if (epoch, end) == UNDEFINED || offset < log_start {
        return Err(ResponseError::OffsetOutOfRange);
    }
    Ok((epoch < last_fetched || end < offset).then_some((epoch, end)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epochs(starts: &[(i32, i64)]) -> LeaderEpochs {
        LeaderEpochs {
            starts: starts.to_vec(),
        }
    }

    #[test]
    fn a_stale_epoch_is_fenced_and_a_newer_one_unknown() {
        assert_eq!(check_current(3, -1), Ok(()));
        assert_eq!(check_current(3, 3), Ok(()));
        assert_eq!(check_current(3, 2), Err(ResponseError::FencedLeaderEpoch));
        assert_eq!(check_current(3, 4), Err(ResponseError::UnknownLeaderEpoch));
    }

    #[test]
    fn an_epoch_ends_where_the_next_one_starts() {
        let e = epochs(&[(0, 0), (2, 100), (5, 250)]);
        assert_eq!(e.end_offset_for(0, 300), (0, 100));
        // Epoch 1 never led here: the last one before it ended at 100.
        assert_eq!(e.end_offset_for(1, 300), (0, 100));
        assert_eq!(e.end_offset_for(2, 300), (2, 250));
        assert_eq!(e.end_offset_for(3, 300), (2, 250));
        // The latest epoch runs to the log end.
        assert_eq!(e.end_offset_for(5, 300), (5, 300));
        assert_eq!(e.end_offset_for(6, 300), UNDEFINED);
        assert_eq!(e.end_offset_for(-1, 300), UNDEFINED);
    }

    #[test]
    fn an_epoch_older_than_the_log_ends_at_its_first_kept_epoch() {
        let e = epochs(&[(3, 40), (4, 90)]);
        assert_eq!(e.end_offset_for(1, 120), (1, 40));
    }

    #[test]
    fn a_new_leader_replaces_epochs_that_kept_nothing() {
        let mut e = LeaderEpochs::new();
        e.assign(1, 10);
        e.assign(2, 10); // epoch 1 appended nothing
        assert_eq!(e, epochs(&[(0, 0), (2, 10)]));
        e.assign(3, 25);
        assert_eq!(e.latest(), Some(3));
        assert_eq!(e.end_offset_for(2, 30), (2, 25));
    }

    #[test]
    fn truncation_from_the_end_drops_the_epochs_cut_off() {
        let mut e = epochs(&[(0, 0), (2, 100), (5, 250)]);
        e.truncate_from_end(250);
        assert_eq!(e, epochs(&[(0, 0), (2, 100)]));
        e.truncate_from_end(120);
        assert_eq!(e, epochs(&[(0, 0), (2, 100)]));
        e.truncate_from_end(0);
        assert_eq!(e.latest(), None);
        assert_eq!(e.end_offset_for(0, 0), UNDEFINED);
    }

    #[test]
    fn deletion_from_the_start_moves_the_covering_epoch_up() {
        let mut e = epochs(&[(0, 0), (2, 100), (5, 250)]);
        e.truncate_from_start(150);
        assert_eq!(e, epochs(&[(2, 150), (5, 250)]));
        assert_eq!(e.end_offset_for(0, 300), (0, 150));
        e.truncate_from_start(250);
        assert_eq!(e, epochs(&[(5, 250)]));
    }

    #[test]
    fn a_fetch_past_where_its_epoch_ended_here_has_diverged() {
        let e = epochs(&[(0, 0), (2, 100), (5, 250)]);
        let check = |last, offset| diverging(&e, last, offset, 0, 300);
        // No epoch named, or what was read is still here: read on.
        assert_eq!(check(-1, 280), Ok(None));
        assert_eq!(check(2, 250), Ok(None));
        assert_eq!(check(2, 120), Ok(None));
        assert_eq!(check(5, 300), Ok(None));
        // Read up to 260 in epoch 2, which ended at 250 here.
        assert_eq!(check(2, 260), Ok(Some((2, 250))));
        // Epoch 3 never led here: its records are not this log's.
        assert_eq!(check(3, 120), Ok(Some((2, 250))));
        // An epoch beyond any known, or an offset below the start.
        assert_eq!(check(6, 280), Err(ResponseError::OffsetOutOfRange));
        assert_eq!(
            diverging(&e, 2, 10, 50, 300),
            Err(ResponseError::OffsetOutOfRange)
        );
    }

    #[test]
    fn each_offset_has_the_epoch_it_was_written_in() {
        let e = epochs(&[(1, 5), (2, 100)]);
        assert_eq!(e.epoch_at(4), None);
        assert_eq!(e.epoch_at(5), Some(1));
        assert_eq!(e.epoch_at(99), Some(1));
        assert_eq!(e.epoch_at(100), Some(2));
        assert_eq!(e.epoch_at(10_000), Some(2));
    }
}
