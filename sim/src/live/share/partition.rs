//! One share group's state on one partition (KIP-932's share-partition):
//! which records in flight are available, acquired by a member under a
//! time-limited lock, acknowledged or archived, and how often each was
//! delivered. The records in flight lie in a window from the share-partition
//! start offset (below it every record is done with) to the next offset not
//! yet fetched; records past the window's end are available to whoever
//! fetches next. No clock and no purgatory here: each lock carries the
//! caller's timer (`T`), which the caller ends when the lock's records are
//! all acknowledged or released, and expires through [`expire`].
//!
//! [`expire`]: SharePartition::expire

use super::super::log::StoredBatch;
use super::super::partition_txns::TxnBatch;
use kafka_protocol::error::ResponseError;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// The most records a share-partition keeps in flight: acquisition stops
/// at this many (past it by at most the rest of one batch, as records are
/// handed out in whole batches).
pub const MAX_IN_FLIGHT: usize = 2000;

/// What becomes of an acknowledged record, by the wire's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckType {
    /// 0: not a record the member was given (a gap in the batch): done.
    Gap,
    /// 1: processed: done.
    Accept,
    /// 2: given back, to be delivered again (to anyone).
    Release,
    /// 3: unprocessable: done, not delivered again.
    Reject,
}

impl AckType {
    /// The type numbered `n` on the wire.
    pub fn from_wire(n: i8) -> Option<AckType> {
        Some(match n {
            0 => AckType::Gap,
            1 => AckType::Accept,
            2 => AckType::Release,
            3 => AckType::Reject,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Available,
    Acquired,
    Acknowledged,
    Archived,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    state: State,
    /// How often it was acquired.
    deliveries: i16,
    /// The lock it is acquired under (while `Acquired`).
    lock: u64,
}

/// An acquisition: its member and how many of its records it still holds.
struct Lock<T> {
    member: Arc<str>,
    held: usize,
    timer: Option<T>,
}

/// What one acquisition handed out.
#[derive(Debug)]
pub struct Acquired {
    /// Runs of acquired offsets, first and last inclusive, each with the
    /// delivery count of its records.
    pub ranges: Vec<(i64, i64, i16)>,
    /// The log's batches that hold them (their indices, increasing).
    pub batches: Vec<usize>,
    /// How many records.
    pub count: usize,
}

/// The state of one share group on one partition.
pub struct SharePartition<T> {
    /// The share-partition start offset: every record below is done with.
    start: i64,
    /// The records from `start` on that were fetched, in offset order.
    slots: VecDeque<Slot>,
    locks: HashMap<u64, Lock<T>>,
    /// The partition's leader epoch the acquisitions were made under.
    pub leader_epoch: i32,
    /// How often a record is delivered before it is archived.
    delivery_limit: i16,
}

impl<T> SharePartition<T> {
    /// Nothing in flight; the next record handed out is at `start`.
    pub fn new(start: i64, leader_epoch: i32, delivery_limit: i16) -> Self {
        SharePartition {
            start,
            slots: VecDeque::new(),
            locks: HashMap::new(),
            leader_epoch,
            delivery_limit: delivery_limit.max(1),
        }
    }

    /// The share-partition start offset.
    #[cfg(test)]
    pub fn start(&self) -> i64 {
        self.start
    }

    /// The next offset not yet fetched.
    pub fn end(&self) -> i64 {
        self.start + self.slots.len() as i64
    }

    /// Acquisitions still holding records.
    #[cfg(test)]
    pub fn locks(&self) -> usize {
        self.locks.len()
    }

    /// Whether a fetch would get something: a record given back, or a
    /// record below `limit` (the high watermark) not fetched yet while the
    /// window has room.
    pub fn acquirable(&self, limit: i64) -> bool {
        self.slots.iter().any(|s| s.state == State::Available)
            || (self.end() < limit && self.slots.len() < MAX_IN_FLIGHT)
    }

    /// Hands `member` at most `max_records` records (records past the
    /// window's end in whole batches, so possibly more) whose batches come
    /// to at most `max_bytes` (the first batch whatever its size), under
    /// lock `lock`: first the records given back, then new ones below
    /// `limit` from `batches` (the log, in offset order). A transaction's
    /// marker is no record for a consumer: it is archived as it is passed.
    /// `None` if nothing could be acquired (no lock is then made).
    pub fn acquire(
        &mut self,
        member: &Arc<str>,
        (max_records, max_bytes): (usize, usize),
        batches: &[StoredBatch],
        limit: i64,
        lock: u64,
    ) -> Option<Acquired> {
        let mut out = Acquired {
            ranges: Vec::new(),
            batches: Vec::new(),
            count: 0,
        };
        let mut bytes = 0usize;
        // Room for the batch at `i`, which is taken if so.
        let mut take = |i: usize, out: &mut Acquired| {
            if out.batches.last() == Some(&i) || out.batches.contains(&i) {
                return true;
            }
            let len = batches[i].bytes.len();
            if !out.batches.is_empty() && bytes + len > max_bytes {
                return false;
            }
            bytes += len;
            out.batches.push(i);
            true
        };
        for i in 0..self.slots.len() {
            if out.count >= max_records {
                break;
            }
            if self.slots[i].state != State::Available {
                continue;
            }
            let offset = self.start + i as i64;
            let b = batches.partition_point(|b| b.end <= offset);
            if b == batches.len() || batches[b].base > offset {
                // Gone from the log: nothing to deliver.
                self.slots[i].state = State::Archived;
                continue;
            }
            if !take(b, &mut out) {
                break;
            }
            let slot = &mut self.slots[i];
            slot.state = State::Acquired;
            slot.deliveries = slot.deliveries.saturating_add(1);
            slot.lock = lock;
            push_range(&mut out.ranges, offset, slot.deliveries);
            out.count += 1;
        }
        let mut end = self.end();
        let mut b = batches.partition_point(|b| b.end <= end);
        while out.count < max_records && self.slots.len() < MAX_IN_FLIGHT {
            let Some(batch) = batches.get(b).filter(|batch| batch.end <= limit) else {
                break;
            };
            let marker = matches!(batch.txn, Some(TxnBatch::Marker { .. }));
            if !marker && !take(b, &mut out) {
                break;
            }
            // Offsets missing from the log before the batch (none unless
            // it was compacted) are no records either.
            for _ in end..batch.base {
                self.slots.push_back(done());
            }
            for offset in end.max(batch.base)..batch.end {
                if marker {
                    self.slots.push_back(done());
                } else {
                    self.slots.push_back(Slot {
                        state: State::Acquired,
                        deliveries: 1,
                        lock,
                    });
                    push_range(&mut out.ranges, offset, 1);
                    out.count += 1;
                }
            }
            end = batch.end;
            b += 1;
        }
        out.batches.sort_unstable();
        self.advance();
        if out.count == 0 {
            return None;
        }
        self.locks.insert(
            lock,
            Lock {
                member: Arc::clone(member),
                held: out.count,
                timer: None,
            },
        );
        Some(out)
    }

    /// Gives lock `lock` its timer; hands it back if the lock no longer
    /// holds anything (its records were acknowledged meanwhile).
    pub fn set_timer(&mut self, lock: u64, timer: T) -> Option<T> {
        match self.locks.get_mut(&lock) {
            Some(l) => {
                l.timer = Some(timer);
                None
            }
            None => Some(timer),
        }
    }

    /// `member` acknowledges offsets `first..=last`, each with its type
    /// (`types` holds one for all, or one per offset). Every offset must be
    /// acquired by `member` (INVALID_RECORD_STATE otherwise) and the batch
    /// well formed (INVALID_REQUEST); nothing changes unless all are.
    /// Returns the timers of the locks that hold nothing any more.
    pub fn acknowledge(
        &mut self,
        member: &str,
        (first, last): (i64, i64),
        types: &[i8],
    ) -> Result<Vec<T>, ResponseError> {
        let len = last.wrapping_sub(first).wrapping_add(1);
        let types: Vec<AckType> = types
            .iter()
            .map(|&t| AckType::from_wire(t))
            .collect::<Option<_>>()
            .ok_or(ResponseError::InvalidRequest)?;
        if first > last || types.is_empty() || (types.len() != 1 && types.len() as i64 != len) {
            return Err(ResponseError::InvalidRequest);
        }
        if last >= self.end() {
            return Err(ResponseError::InvalidRequest);
        }
        if first < self.start {
            return Err(ResponseError::InvalidRecordState);
        }
        let from = (first - self.start) as usize;
        let to = (last - self.start) as usize;
        for slot in self.slots.range(from..=to) {
            let owned = self
                .locks
                .get(&slot.lock)
                .is_some_and(|l| &*l.member == member);
            if slot.state != State::Acquired || !owned {
                return Err(ResponseError::InvalidRecordState);
            }
        }
        let mut freed = Vec::new();
        for i in from..=to {
            let kind = types[if types.len() == 1 { 0 } else { i - from }];
            let released = self.released(self.slots[i].deliveries);
            let slot = &mut self.slots[i];
            slot.state = match kind {
                AckType::Accept => State::Acknowledged,
                AckType::Gap | AckType::Reject => State::Archived,
                AckType::Release => released,
            };
            let lock = slot.lock;
            freed.extend(self.let_go(lock));
        }
        self.advance();
        Ok(freed)
    }

    /// Lock `lock` ran out: what it still holds is given back (archived
    /// if delivered as often as allowed). Whether anything became
    /// available.
    pub fn expire(&mut self, lock: u64) -> bool {
        if self.locks.remove(&lock).is_none() {
            return false;
        }
        self.release_where(|slot| slot.lock == lock)
    }

    /// Gives back everything `member` holds (it closed its share session
    /// or left); the timers of its locks, and whether anything became
    /// available.
    pub fn release_member(&mut self, member: &str) -> (Vec<T>, bool) {
        let ids: Vec<u64> = self
            .locks
            .iter()
            .filter(|(_, l)| &*l.member == member)
            .map(|(&id, _)| id)
            .collect();
        self.release_locks(ids)
    }

    /// Gives back everything acquired (the partition's leader changed: the
    /// new leader knows of no acquisition), counting the deliveries.
    pub fn release_all(&mut self, leader_epoch: i32) -> (Vec<T>, bool) {
        self.leader_epoch = leader_epoch;
        let ids: Vec<u64> = self.locks.keys().copied().collect();
        self.release_locks(ids)
    }

    /// Moves the start up to `log_start` if records below it were deleted
    /// from the log; the timers of the locks that hold nothing any more.
    pub fn trim_to(&mut self, log_start: i64) -> Vec<T> {
        let mut freed = Vec::new();
        while self.start < log_start {
            match self.slots.pop_front() {
                Some(slot) => {
                    if slot.state == State::Acquired {
                        freed.extend(self.let_go(slot.lock));
                    }
                    self.start += 1;
                }
                None => self.start = log_start,
            }
        }
        freed
    }

    fn release_locks(&mut self, ids: Vec<u64>) -> (Vec<T>, bool) {
        let mut timers = Vec::new();
        for id in &ids {
            if let Some(l) = self.locks.remove(id) {
                timers.extend(l.timer);
            }
        }
        let available = self.release_where(|slot| ids.contains(&slot.lock));
        (timers, available)
    }

    fn release_where(&mut self, mut held: impl FnMut(&Slot) -> bool) -> bool {
        let limit = self.delivery_limit;
        let mut available = false;
        for slot in self.slots.iter_mut() {
            if slot.state == State::Acquired && held(slot) {
                slot.state = if slot.deliveries >= limit {
                    State::Archived
                } else {
                    available = true;
                    State::Available
                };
            }
        }
        self.advance();
        available
    }

    /// A record given back after `deliveries` deliveries.
    fn released(&self, deliveries: i16) -> State {
        if deliveries >= self.delivery_limit {
            State::Archived
        } else {
            State::Available
        }
    }

    /// One record of `lock` is no longer held by it; its timer once none is.
    fn let_go(&mut self, lock: u64) -> Option<T> {
        let l = self.locks.get_mut(&lock)?;
        l.held -= 1;
        if l.held > 0 {
            return None;
        }
        self.locks.remove(&lock).and_then(|l| l.timer)
    }

    /// Moves the start past the records done with.
    fn advance(&mut self) {
        while self
            .slots
            .front()
            .is_some_and(|s| matches!(s.state, State::Acknowledged | State::Archived))
        {
            self.slots.pop_front();
            self.start += 1;
        }
    }
}

fn done() -> Slot {
    Slot {
        state: State::Archived,
        deliveries: 0,
        lock: 0,
    }
}

/// Adds `offset`, delivered `deliveries` times, to the runs in `ranges`.
fn push_range(ranges: &mut Vec<(i64, i64, i16)>, offset: i64, deliveries: i16) {
    match ranges.last_mut() {
        Some((_, last, d)) if *last + 1 == offset && *d == deliveries => *last = offset,
        _ => ranges.push((offset, offset, deliveries)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// Batches of `sizes` records each, from offset 0, 10 bytes apiece.
    fn log(sizes: &[i64]) -> Vec<StoredBatch> {
        let mut base = 0;
        sizes
            .iter()
            .map(|&n| {
                let b = StoredBatch {
                    base,
                    end: base + n,
                    bytes: Bytes::from(vec![0u8; 10]),
                    producer: None,
                    txn: None,
                };
                base += n;
                b
            })
            .collect()
    }

    fn member(m: &str) -> Arc<str> {
        Arc::from(m)
    }

    const ALL: (usize, usize) = (usize::MAX, usize::MAX);

    #[test]
    fn records_are_handed_out_once_in_whole_batches() {
        let batches = log(&[3, 3, 3]);
        let mut sp: SharePartition<()> = SharePartition::new(0, 0, 5);
        let a = sp
            .acquire(&member("a"), (4, usize::MAX), &batches, 9, 1)
            .unwrap();
        // Four asked for: the second batch is taken whole.
        assert_eq!(a.ranges, vec![(0, 5, 1)]);
        assert_eq!(a.batches, vec![0, 1]);
        let b = sp.acquire(&member("b"), ALL, &batches, 9, 2).unwrap();
        assert_eq!(b.ranges, vec![(6, 8, 1)]);
        assert!(sp.acquire(&member("c"), ALL, &batches, 9, 3).is_none());
        assert!(!sp.acquirable(9));
    }

    #[test]
    fn nothing_above_the_limit_is_handed_out() {
        let batches = log(&[3, 3]);
        let mut sp: SharePartition<()> = SharePartition::new(0, 0, 5);
        // A limit inside a batch leaves the batch.
        let a = sp.acquire(&member("a"), ALL, &batches, 4, 1).unwrap();
        assert_eq!(a.ranges, vec![(0, 2, 1)]);
        assert!(!sp.acquirable(3));
        assert!(sp.acquirable(6));
    }

    #[test]
    fn acknowledged_records_move_the_start_and_free_the_lock() {
        let batches = log(&[4]);
        let mut sp = SharePartition::new(0, 0, 5);
        sp.acquire(&member("a"), ALL, &batches, 4, 1).unwrap();
        assert_eq!(sp.set_timer(1, "timer"), None);
        assert_eq!(sp.acknowledge("a", (0, 1), &[1]), Ok(vec![]));
        assert_eq!(sp.start(), 2);
        assert_eq!(sp.acknowledge("a", (2, 3), &[3, 1]), Ok(vec!["timer"]));
        assert_eq!((sp.start(), sp.end(), sp.locks()), (4, 4, 0));
    }

    #[test]
    fn only_the_holder_acknowledges_and_only_once() {
        let batches = log(&[2]);
        let mut sp: SharePartition<()> = SharePartition::new(0, 0, 5);
        sp.acquire(&member("a"), ALL, &batches, 2, 1).unwrap();
        let state = Err(ResponseError::InvalidRecordState);
        assert_eq!(sp.acknowledge("b", (0, 0), &[1]), state);
        assert_eq!(sp.acknowledge("a", (0, 0), &[1]), Ok(vec![]));
        assert_eq!(sp.acknowledge("a", (0, 0), &[1]), state);
        let bad = Err(ResponseError::InvalidRequest);
        assert_eq!(sp.acknowledge("a", (1, 2), &[1]), bad);
        assert_eq!(sp.acknowledge("a", (1, 1), &[7]), bad);
        assert_eq!(sp.acknowledge("a", (1, 1), &[1, 1]), bad);
    }

    #[test]
    fn a_released_record_is_delivered_again_until_the_limit() {
        let batches = log(&[2]);
        let mut sp: SharePartition<()> = SharePartition::new(0, 0, 2);
        sp.acquire(&member("a"), ALL, &batches, 2, 1).unwrap();
        sp.acknowledge("a", (0, 1), &[2, 1]).unwrap();
        let again = sp.acquire(&member("b"), ALL, &batches, 2, 2).unwrap();
        assert_eq!(again.ranges, vec![(0, 0, 2)]);
        assert_eq!(again.batches, vec![0]);
        // Released at its second delivery, the limit: archived.
        sp.acknowledge("b", (0, 0), &[2]).unwrap();
        assert_eq!(sp.start(), 2);
        assert!(!sp.acquirable(2));
    }

    #[test]
    fn an_expired_lock_gives_back_what_it_still_holds() {
        let batches = log(&[3]);
        let mut sp: SharePartition<()> = SharePartition::new(0, 0, 5);
        sp.acquire(&member("a"), ALL, &batches, 3, 1).unwrap();
        sp.acknowledge("a", (1, 1), &[1]).unwrap();
        assert!(sp.expire(1));
        assert!(!sp.expire(1));
        let again = sp.acquire(&member("b"), ALL, &batches, 3, 2).unwrap();
        assert_eq!(again.ranges, vec![(0, 0, 2), (2, 2, 2)]);
        // Too late for the first holder.
        let state = Err(ResponseError::InvalidRecordState);
        assert_eq!(sp.acknowledge("a", (0, 0), &[1]), state);
    }

    #[test]
    fn a_member_that_leaves_gives_back_its_records() {
        let batches = log(&[2, 2]);
        let mut sp = SharePartition::new(0, 0, 5);
        sp.acquire(&member("a"), (1, usize::MAX), &batches, 4, 1)
            .unwrap();
        sp.set_timer(1, 10);
        sp.acquire(&member("b"), (1, usize::MAX), &batches, 4, 2)
            .unwrap();
        sp.set_timer(2, 20);
        assert_eq!(sp.release_member("a"), (vec![10], true));
        assert_eq!(sp.locks(), 1);
        assert_eq!(sp.release_all(3), (vec![20], true));
        assert_eq!(sp.leader_epoch, 3);
        let again = sp.acquire(&member("c"), ALL, &batches, 4, 3).unwrap();
        assert_eq!(again.ranges, vec![(0, 3, 2)]);
    }

    #[test]
    fn markers_are_passed_and_deleted_records_skipped() {
        let mut batches = log(&[2, 1, 2]);
        batches[1].txn = Some(TxnBatch::Marker {
            producer_id: 7,
            epoch: 0,
            coordinator_epoch: 0,
            commit: true,
        });
        let mut sp: SharePartition<()> = SharePartition::new(0, 0, 5);
        let a = sp.acquire(&member("a"), ALL, &batches, 5, 1).unwrap();
        assert_eq!(a.ranges, vec![(0, 1, 1), (3, 4, 1)]);
        assert_eq!(a.batches, vec![0, 2]);
        sp.acknowledge("a", (0, 1), &[1]).unwrap();
        assert_eq!(sp.start(), 3);
        // The log's start moved past what the member holds.
        assert_eq!(sp.trim_to(5), Vec::<()>::new());
        assert_eq!((sp.start(), sp.end(), sp.locks()), (5, 5, 0));
    }

    #[test]
    fn the_byte_budget_stops_after_the_first_batch() {
        let batches = log(&[1, 1, 1]);
        let mut sp: SharePartition<()> = SharePartition::new(0, 0, 5);
        let a = sp.acquire(&member("a"), (10, 15), &batches, 3, 1).unwrap();
        assert_eq!(a.ranges, vec![(0, 0, 1)]);
        let b = sp.acquire(&member("a"), (10, 0), &batches, 3, 2).unwrap();
        assert_eq!(b.ranges, vec![(1, 1, 1)]);
    }
}
