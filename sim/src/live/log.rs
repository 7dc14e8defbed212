//! One served topic-partition: its stored record batches, byte-exact with
//! their offsets assigned, its idempotent producers' state, its
//! transactions, and its replication state (replicas, ISR, each replica's
//! log end, the high watermark).

use super::batch_header::{
    seal, ATTRIBUTES, BASE_TIMESTAMP, LAST_OFFSET_DELTA, LOG_APPEND_TIME, LOG_OVERHEAD, MAGIC,
    MAX_TIMESTAMP, PARTITION_LEADER_EPOCH, PRODUCER_EPOCH, PRODUCER_ID, TRANSACTIONAL,
};
use super::batch_records::{self, RecordRules, RecordsError};
use super::leader_epochs::LeaderEpochs;
use super::partition_txns::{AbortedTxn, PartitionTxns, TxnBatch};
use super::producers::{MarkerError, ProducerBatch, Producers, SequenceError, Verdict};
use super::recompress::{self, RewriteError, Target};
use super::topic_config::TopicConfig;
use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A batch as stored: its offsets and its bytes, base offset assigned.
#[derive(Debug, Clone)]
pub struct StoredBatch {
    /// Offset of its first record.
    pub base: i64,
    /// One past the offset of its last record.
    pub end: i64,
    /// The whole batch, as the producer sent it but for the base offset
    /// (and, for a topic with a `compression.type` of its own, its codec).
    pub bytes: Bytes,
    /// Its producer id, epoch and sequence numbers, if it has a producer id.
    pub producer: Option<ProducerBatch>,
    /// What it is to a transaction, if anything.
    pub txn: Option<TxnBatch>,
}

/// Where an append's records are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Offset of the first record.
    pub base: i64,
    /// One past the offset of the last record.
    pub end: i64,
    /// The batch was stored before (an idempotent producer resent it):
    /// nothing was stored now, and `base..end` are where it was.
    pub duplicate: bool,
    /// The leader's append time its batches were stamped with (a
    /// `LogAppendTime` topic's; for a resent batch, the first time's).
    pub log_append_time: Option<i64>,
    /// The log's start offset when it was appended, which a produce's
    /// answer gives (Kafka's `LogAppendInfo.logStartOffset`).
    pub log_start: i64,
}

/// Why an append was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendError {
    /// Not v2 batches, a bad CRC, a truncated or trailing batch.
    Corrupt,
    /// Larger than the partition accepts (Kafka's `message.max.bytes`).
    TooLarge,
    /// An idempotent producer's batch that does not follow its last one.
    OutOfOrderSequence,
    /// A batch from an older epoch of its producer than one stored.
    InvalidProducerEpoch,
    /// A transactional batch outside its producer's ongoing transaction
    /// in this partition (as the coordinator knows it).
    Transactional,
    /// A control batch: only the transaction coordinator writes those.
    Control,
    /// A batch with a producer id and no sequence number (Kafka's
    /// INVALID_RECORD): an idempotent producer numbers every batch.
    NoSequence,
    /// A batch whose records do not match its header, or break a rule of
    /// the topic's (a record without a key for a compacted one).
    Records(RecordsError),
}

/// What a partition's topic asks of the batches appended to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendRules {
    /// The largest request's records for the partition, in bytes (Kafka's
    /// `max.message.bytes`).
    pub max_bytes: usize,
    /// The leader's append time to stamp the batches with (a
    /// `LogAppendTime` topic's), in milliseconds since the epoch.
    pub stamp: Option<i64>,
    /// Every record needs a key (a compacted topic's).
    pub keys_required: bool,
    /// The codec the topic stores batches in (`compression.type`), if
    /// not each producer's own, and its level: a batch in another codec
    /// is rewritten in it (one in it stays as sent, as in Kafka, whatever
    /// level it was compressed at).
    pub compression: Option<Target>,
    /// The first and last record timestamps taken, where the topic bounds
    /// them (`message.timestamp.before.max.ms` and `.after.max.ms` about
    /// the leader's clock).
    pub timestamps: Option<(i64, i64)>,
}

/// The state of one partition, under its lock.
#[derive(Debug)]
pub struct PartitionLog {
    /// Brokers holding a replica, preferred leader first; while a
    /// reassignment is under way, the target's then those it removes.
    pub replicas: Vec<u32>,
    /// Replicas a reassignment under way adds (`reassignment.rs`).
    pub adding: Vec<u32>,
    /// Replicas a reassignment under way removes.
    pub removing: Vec<u32>,
    /// The leader, `None` while every replica is down.
    pub leader: Option<u32>,
    /// Leader epoch, bumped on each leader change.
    pub epoch: i32,
    /// Where each leader epoch starts in the log.
    pub epochs: LeaderEpochs,
    /// In-sync replicas, the leader included.
    pub isr: Vec<u32>,
    /// Log end offset of each replica, by position in `replicas`.
    pub replica_leo: Vec<i64>,
    /// The log start offset: records below it were deleted
    /// (DeleteRecords), and reads there are out of range.
    pub log_start: i64,
    /// Each replica's log start offset, as it last learned the leader's.
    pub replica_log_start: Vec<i64>,
    /// When each replica last caught up with the leader.
    pub caught_up_at: Vec<Instant>,
    /// High watermark: the offset below which every ISR member has the log.
    pub hw: i64,
    /// When the high watermark last moved forward (`None`: never), which is
    /// when what it uncovered became readable to consumers.
    pub hw_moved_at: Option<Instant>,
    /// Stored batches in offset order.
    pub batches: Vec<StoredBatch>,
    /// Bytes stored, summed over batches.
    pub bytes: u64,
    /// The idempotent producers that wrote here.
    pub producers: Producers,
    /// The transactions that wrote here.
    pub txns: PartitionTxns,
    /// Its topic was deleted: it has no leader, and requests still holding
    /// it are answered UNKNOWN_TOPIC_OR_PARTITION.
    pub deleted: bool,
    /// Where its `min.insync.replicas` is read.
    pub min_insync: MinInsync,
}

/// Where a partition's `min.insync.replicas` comes from: its topic's
/// config, read as it is now (an AlterConfigs takes effect at once), else
/// the broker's.
#[derive(Debug, Clone)]
pub struct MinInsync {
    /// The topic's own settings.
    pub topic: Arc<TopicConfig>,
    /// The broker's `min.insync.replicas`.
    pub broker: u32,
}

impl Default for MinInsync {
    /// No topic setting, and Kafka's broker default, 1.
    fn default() -> Self {
        MinInsync {
            topic: Arc::default(),
            broker: 1,
        }
    }
}

impl PartitionLog {
    /// An empty partition led by `replicas[0]`, every replica in sync.
    pub fn new(replicas: Vec<u32>, now: Instant) -> Self {
        PartitionLog {
            leader: replicas.first().copied(),
            epoch: 0,
            epochs: LeaderEpochs::new(),
            isr: replicas.clone(),
            replica_leo: vec![0; replicas.len()],
            log_start: 0,
            replica_log_start: vec![0; replicas.len()],
            caught_up_at: vec![now; replicas.len()],
            replicas,
            adding: Vec::new(),
            removing: Vec::new(),
            hw: 0,
            hw_moved_at: None,
            batches: Vec::new(),
            bytes: 0,
            producers: Producers::default(),
            txns: PartitionTxns::default(),
            deleted: false,
            min_insync: MinInsync::default(),
        }
    }

    /// The number of in-sync replicas an `acks=all` produce needs, and
    /// below which the high watermark stands still: `min.insync.replicas`,
    /// but never more than the partition has replicas. So a topic made
    /// with one replica on a broker that asks for two takes `acks=all`
    /// produces, as Kafka's leaders do (its `Partition.effectiveMinIsr`).
    pub fn effective_min_insync(&self) -> usize {
        let configured = self.min_insync.topic.min_insync(self.min_insync.broker);
        configured.min(self.replicas.len())
    }

    /// The replicas other than the leader: those an append is sent to.
    pub fn followers(&self) -> Vec<u32> {
        let leader = self.leader;
        (self.replicas.iter().copied())
            .filter(|&r| Some(r) != leader)
            .collect()
    }

    /// The leader's log end offset: the next offset to assign.
    pub fn log_end(&self) -> i64 {
        self.batches.last().map_or(self.log_start, |b| b.end)
    }

    /// DeleteRecords on the leader: the log starts at `offset` (-1: the
    /// high watermark) from now on, and the batches wholly below it go.
    /// Returns the log start offset; `None` for an offset past the high
    /// watermark (OFFSET_OUT_OF_RANGE), where consumers may not have read.
    pub fn delete_records(&mut self, offset: i64) -> Option<i64> {
        let offset = if offset == -1 { self.hw } else { offset };
        if !(0..=self.hw).contains(&offset) {
            return None;
        }
        if offset > self.log_start {
            self.log_start = offset;
            self.epochs.truncate_from_start(offset);
            let gone = self.batches.partition_point(|b| b.end <= offset);
            for b in self.batches.drain(..gone) {
                self.bytes -= b.bytes.len() as u64;
            }
            self.txns.forget_below(offset);
            if let Some(i) = self.leader.and_then(|l| self.replica_index(l)) {
                self.replica_log_start[i] = offset;
            }
        }
        Some(self.log_start)
    }

    /// Retention, Kafka's `retention.bytes` and `retention.ms` (`None`: no
    /// limit). Past the size, the oldest batches go down to seven eighths
    /// of it, as Kafka deletes whole old segments rather than a batch per
    /// append (so each batch is moved a few times at most by the
    /// deletions); past the time, the oldest batches whose newest record
    /// is older than `retention_ms` before `now_ms` go, up to the first
    /// that is not. Only batches below the high watermark go: as in
    /// Kafka, nothing a consumer may not have read yet. Returns the new
    /// log start offset, if it moved.
    pub fn apply_retention(
        &mut self,
        retention_bytes: Option<u64>,
        retention_ms: Option<u64>,
        now_ms: i64,
    ) -> Option<i64> {
        let target = retention_bytes
            .filter(|&limit| self.bytes > limit)
            .map_or(u64::MAX, |limit| limit - limit / 8);
        let cutoff = retention_ms.map(|ms| now_ms.saturating_sub_unsigned(ms));
        let mut left = self.bytes;
        let mut start = self.log_start;
        for b in &self.batches {
            let too_old = cutoff.is_some_and(|c| header_i64(&b.bytes, MAX_TIMESTAMP) < c);
            if b.end > self.hw || !(left > target || too_old) {
                break;
            }
            left -= b.bytes.len() as u64;
            start = b.end;
        }
        if start == self.log_start {
            return None;
        }
        self.delete_records(start)
    }

    /// The newest timestamp of its oldest batch, if that batch lies wholly
    /// below the high watermark: what the broker's bound on the logs'
    /// memory (`log_memory.rs`) compares across partitions, deleting the
    /// oldest first.
    pub fn oldest_deletable(&self) -> Option<i64> {
        self.batches
            .first()
            .filter(|b| b.end <= self.hw)
            .map(|b| header_i64(&b.bytes, MAX_TIMESTAMP))
    }

    /// Deletes its oldest batches below the high watermark: the first
    /// always, the next ones while they are no newer than `until` and
    /// fewer than `bytes` bytes went. Returns the bytes deleted.
    pub fn delete_oldest(&mut self, until: i64, bytes: u64) -> u64 {
        let mut freed = 0;
        let mut start = self.log_start;
        for (i, b) in self.batches.iter().enumerate() {
            let enough = i > 0 && (freed >= bytes || header_i64(&b.bytes, MAX_TIMESTAMP) > until);
            if b.end > self.hw || enough {
                break;
            }
            freed += b.bytes.len() as u64;
            start = b.end;
        }
        if start > self.log_start {
            self.delete_records(start);
        }
        freed
    }

    /// The low watermark: the lowest log start offset among the replicas
    /// on live brokers (`alive`), as Kafka's leader computes it to answer
    /// DeleteRecords once every live replica has deleted.
    pub fn low_watermark(&self, alive: &dyn Fn(u32) -> bool) -> i64 {
        self.replicas
            .iter()
            .zip(&self.replica_log_start)
            .filter(|(&b, _)| alive(b) || Some(b) == self.leader)
            .map(|(_, &start)| start)
            .min()
            .unwrap_or(self.log_start)
    }

    /// Makes `replicas` the replica set, keeping what each broker that
    /// stays has; a broker new to it starts with an empty log at the log
    /// start, as a replica placed on a broker fetches from there.
    pub fn set_replicas(&mut self, replicas: Vec<u32>, now: Instant) {
        let kept = |b: u32| self.replica_index(b);
        let leo = replicas
            .iter()
            .map(|&b| kept(b).map_or(self.log_start, |i| self.replica_leo[i]))
            .collect();
        let log_start = replicas
            .iter()
            .map(|&b| kept(b).map_or(self.log_start, |i| self.replica_log_start[i]))
            .collect();
        let caught_up_at = replicas
            .iter()
            .map(|&b| kept(b).map_or(now, |i| self.caught_up_at[i]))
            .collect();
        self.replica_leo = leo;
        self.replica_log_start = log_start;
        self.caught_up_at = caught_up_at;
        self.replicas = replicas;
    }

    /// Position of `broker` in `replicas`.
    pub fn replica_index(&self, broker: u32) -> Option<usize> {
        self.replicas.iter().position(|&r| r == broker)
    }

    /// Appends the batches in `records` on the leader, assigning offsets
    /// from the log end. Each batch is checked by the crate's decoder (v2
    /// magic, CRC32C) and, if it has a producer id, against its producer's
    /// sequence numbers, before anything is stored, so a refused request
    /// stores nothing; a batch its producer resent stores nothing either,
    /// and the answer says where it was stored first. Transactional
    /// batches are stored only from `txn`, the (producer id, epoch) whose
    /// ongoing transaction the caller found this partition in.
    pub fn append(
        &mut self,
        records: &Bytes,
        rules: &AppendRules,
        txn: Option<(i64, i16)>,
    ) -> Result<Appended, AppendError> {
        if records.len() > rules.max_bytes {
            return Err(AppendError::TooLarge);
        }
        let mut pieces = Vec::new();
        let mut rest = records.clone();
        while !rest.is_empty() {
            if rest.len() < LOG_OVERHEAD {
                return Err(AppendError::Corrupt);
            }
            let length = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
            let total = usize::try_from(length)
                .ok()
                .and_then(|l| l.checked_add(LOG_OVERHEAD))
                .filter(|&t| t <= rest.len())
                .ok_or(AppendError::Corrupt)?;
            let batch = rest.split_to(total);
            let mut check = batch.clone();
            let info = RecordBatchDecoder::decode_batch_info(&mut check)
                .map_err(|_| AppendError::Corrupt)?;
            // One v2 batch exactly (the decoder stops quietly at other magics).
            let [info] = info.as_slice() else {
                return Err(AppendError::Corrupt);
            };
            if info.record_count <= 0 || !check.is_empty() {
                return Err(AppendError::Corrupt);
            }
            if info.control {
                return Err(AppendError::Control);
            }
            if info.producer_id >= 0 && info.base_sequence < 0 {
                return Err(AppendError::NoSequence);
            }
            let record_rules = RecordRules {
                keys_required: rules.keys_required,
                create_time: rules.stamp.is_none(),
                window: rules.timestamps,
            };
            let max_timestamp =
                batch_records::check(&batch, &record_rules).map_err(AppendError::Records)?;
            let batch = match rules.compression {
                Some(target) if target.codec != batch_records::codec(&batch) => {
                    recompress::recompress(&batch, target, rules.max_bytes).map_err(
                        |e| match e {
                            RewriteError::TooLarge => AppendError::TooLarge,
                            RewriteError::Records(e) => AppendError::Records(e),
                        },
                    )?
                }
                _ => batch,
            };
            let batch = match rules.stamp {
                None => as_create_time(batch, max_timestamp),
                Some(_) => batch,
            };
            if info.transactional && txn != Some((info.producer_id, info.producer_epoch)) {
                return Err(AppendError::Transactional);
            }
            let txn_batch = info.transactional.then_some(TxnBatch::Data {
                producer_id: info.producer_id,
            });
            let delta = batch
                .get(LAST_OFFSET_DELTA..LAST_OFFSET_DELTA + 4)
                .map(|d| i32::from_be_bytes([d[0], d[1], d[2], d[3]]))
                .ok_or(AppendError::Corrupt)?;
            let producer = ProducerBatch::new(
                info.producer_id,
                info.producer_epoch,
                info.base_sequence,
                delta,
            );
            pieces.push((batch, i64::from(info.record_count), producer, txn_batch));
        }
        if pieces.is_empty() {
            return Err(AppendError::Corrupt);
        }
        let idempotent: Vec<ProducerBatch> = pieces.iter().filter_map(|p| p.2).collect();
        if !idempotent.is_empty() {
            match self.producers.check(&idempotent) {
                Ok(Verdict::Append) => {}
                Ok(Verdict::Duplicate(base, end)) => {
                    return Ok(Appended {
                        base,
                        end,
                        duplicate: true,
                        log_append_time: self.append_time_at(base),
                        log_start: self.log_start,
                    })
                }
                Err(SequenceError::OutOfOrder) => return Err(AppendError::OutOfOrderSequence),
                Err(SequenceError::OldEpoch) => return Err(AppendError::InvalidProducerEpoch),
            }
        }
        let base = self.log_end();
        for (batch, count, producer, txn) in pieces {
            self.store(batch, count, producer, txn, rules.stamp);
        }
        let end = self.leader_appended();
        Ok(Appended {
            base,
            end,
            duplicate: false,
            log_append_time: rules.stamp,
            log_start: self.log_start,
        })
    }

    /// The append time the batch at `base` was stamped with, if it was.
    fn append_time_at(&self, base: i64) -> Option<i64> {
        let i = self.batches.binary_search_by_key(&base, |b| b.base).ok()?;
        stamped_at(&self.batches[i].bytes)
    }

    /// Stores one batch at the log end, stamped with `stamp` as its append
    /// time if given; returns its base offset.
    fn store(
        &mut self,
        batch: Bytes,
        count: i64,
        producer: Option<ProducerBatch>,
        txn: Option<TxnBatch>,
        stamp: Option<i64>,
    ) -> i64 {
        let base = self.log_end();
        let mut bytes = BytesMut::from(&batch[..]);
        bytes[..8].copy_from_slice(&base.to_be_bytes());
        // Outside the CRC, which covers the attributes onwards.
        bytes[PARTITION_LEADER_EPOCH..PARTITION_LEADER_EPOCH + 4]
            .copy_from_slice(&self.epoch.to_be_bytes());
        if let Some(now_ms) = stamp {
            stamp_append_time(&mut bytes, now_ms);
        }
        self.bytes += bytes.len() as u64;
        if let Some(p) = producer {
            self.producers.record(p, base, base + count);
        }
        if let Some(t) = txn {
            self.note(t, base);
        }
        let producer_id = header_i64(&bytes, PRODUCER_ID);
        if producer_id >= 0 {
            let timestamp = header_i64(&bytes, MAX_TIMESTAMP);
            self.producers.stamp(producer_id, timestamp);
        }
        self.batches.push(StoredBatch {
            base,
            end: base + count,
            bytes: bytes.freeze(),
            producer,
            txn,
        });
        base
    }

    /// Takes note of a transactional batch at `base`, for the readers and
    /// the producers' epochs.
    fn note(&mut self, txn: TxnBatch, base: i64) {
        if let TxnBatch::Marker {
            producer_id,
            epoch,
            coordinator_epoch,
            ..
        } = txn
        {
            (self.producers).end_transaction(producer_id, epoch, coordinator_epoch);
        }
        self.txns.record(txn, base);
    }

    /// The leader has the log up to its end: its replica's log end moves,
    /// and the high watermark with it if nobody else is in sync. Returns
    /// the log end.
    fn leader_appended(&mut self) -> i64 {
        let end = self.log_end();
        if let Some(i) = self.leader.and_then(|l| self.replica_index(l)) {
            self.replica_leo[i] = end;
        }
        self.advance_hw();
        end
    }

    /// Appends the marker ending `producer_id`'s transaction (COMMIT if
    /// `commit`, else ABORT) at producer epoch `epoch`, from a coordinator
    /// at `coordinator_epoch`; returns the log end after it. The caller
    /// is the coordinator, or has checked the marker
    /// ([`write_marker`](Self::write_marker)).
    pub fn append_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
    ) -> i64 {
        let marker = TxnBatch::Marker {
            producer_id,
            epoch,
            coordinator_epoch,
            commit,
        };
        self.store(
            marker_batch(producer_id, epoch, coordinator_epoch, commit),
            1,
            None,
            Some(marker),
            None,
        );
        self.leader_appended()
    }

    /// Appends a marker sent with WriteTxnMarkers (an operator aborting a
    /// hanging transaction) once the producer's state here allows it, as
    /// Kafka's leader checks a marker: not from an older producer epoch
    /// or coordinator epoch than the producer's last here. Returns the log
    /// end after it.
    pub fn write_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
    ) -> Result<i64, MarkerError> {
        (self.producers).check_marker(producer_id, epoch, coordinator_epoch)?;
        Ok(self.append_marker(producer_id, epoch, coordinator_epoch, commit))
    }

    /// Cuts the log back to `end` (a new leader's log end): batches past it
    /// go, and no replica is counted as having more. A transaction marker
    /// cut off is written again at the new log end, as Kafka's coordinator
    /// sends it to the new leader until it is stored: its transaction has
    /// ended, and its records there must not stay unstable. Returns whether
    /// a marker was written again (the caller replicates it).
    pub fn truncate(&mut self, end: i64) -> bool {
        let keep = self.batches.partition_point(|b| b.end <= end);
        let cut: Vec<StoredBatch> = self.batches.drain(keep..).collect();
        for b in &cut {
            self.bytes -= b.bytes.len() as u64;
        }
        if !cut.is_empty() {
            // The producers' and transactions' state is what the batches
            // left say.
            self.producers.clear();
            self.txns.clear();
            for i in 0..self.batches.len() {
                let (base, end) = (self.batches[i].base, self.batches[i].end);
                if let Some(p) = self.batches[i].producer {
                    self.producers.record(p, base, end);
                }
                if let Some(t) = self.batches[i].txn {
                    self.note(t, base);
                }
            }
        }
        let end = self.log_end();
        self.epochs.truncate_from_end(end);
        for leo in &mut self.replica_leo {
            *leo = (*leo).min(end);
        }
        self.hw = self.hw.min(end);
        let mut rewritten = false;
        for b in cut {
            if let Some(TxnBatch::Marker {
                producer_id,
                epoch,
                coordinator_epoch,
                commit,
            }) = b.txn
            {
                if self.txns.is_open(producer_id) {
                    self.append_marker(producer_id, epoch, coordinator_epoch, commit);
                    rewritten = true;
                }
            }
        }
        rewritten
    }

    /// Moves the high watermark to the lowest log end in the ISR; returns
    /// whether it moved. It never moves back, and, as in Kafka, it stands
    /// still while the ISR is smaller than the effective
    /// `min.insync.replicas`: what an `acks=1` produce appends meanwhile
    /// becomes readable once enough replicas have it again.
    pub fn advance_hw(&mut self) -> bool {
        if self.isr.len() < self.effective_min_insync() {
            return false;
        }
        let lowest = self
            .isr
            .iter()
            .filter_map(|&b| self.replica_index(b))
            .map(|i| self.replica_leo[i])
            .min()
            .unwrap_or(self.hw);
        if lowest > self.hw {
            self.hw = lowest;
            self.hw_moved_at = Some(Instant::now());
            self.txns.settle(self.hw);
            true
        } else {
            false
        }
    }

    /// The last stable offset: a committed reader reads below it. Never
    /// below the log start, as in Kafka: a transaction still open whose
    /// first records were deleted (DeleteRecords, retention) holds it at
    /// the log start, not at an offset no reader may ask for.
    pub fn last_stable(&self) -> i64 {
        self.txns.last_stable(self.hw).max(self.log_start)
    }

    /// The highest offset a reader may read below: the high watermark, or
    /// for one that reads only committed records, the last stable offset.
    pub fn read_limit(&self, committed_only: bool) -> i64 {
        if committed_only {
            self.last_stable()
        } else {
            self.hw
        }
    }

    /// The aborted transactions that a read from `offset` up to `limit`
    /// meets, for a reader that skips them.
    pub fn aborted_in(&self, offset: i64, limit: i64) -> Vec<AbortedTxn> {
        self.txns.aborted_in(offset, limit)
    }

    /// Batches from the one holding `offset`, wholly below `limit` (see
    /// [`read_limit`](Self::read_limit)), up to `max_bytes`; the first
    /// batch is returned whole even if larger, as Kafka does, so that a
    /// consumer can always make progress (with a `max_bytes` of 0 nothing
    /// is returned).
    pub fn read(&self, offset: i64, max_bytes: usize, limit: i64) -> Bytes {
        let batches = self.readable(offset, max_bytes, limit);
        let mut out = BytesMut::with_capacity(batches.iter().map(|b| b.bytes.len()).sum());
        for b in batches {
            out.extend_from_slice(&b.bytes);
        }
        out.freeze()
    }

    /// How many bytes [`read`](Self::read) would return.
    pub fn read_len(&self, offset: i64, max_bytes: usize, limit: i64) -> usize {
        self.readable(offset, max_bytes, limit)
            .iter()
            .map(|b| b.bytes.len())
            .sum()
    }

    fn readable(&self, offset: i64, max_bytes: usize, limit: i64) -> &[StoredBatch] {
        let start = self.first_batch(offset);
        let mut len = 0;
        let mut end = start;
        for b in &self.batches[start..] {
            if b.end > limit || max_bytes == 0 || (end > start && len + b.bytes.len() > max_bytes) {
                break;
            }
            len += b.bytes.len();
            end += 1;
        }
        &self.batches[start..end]
    }

    /// ListOffsets by time: the first offset below the high watermark
    /// whose record's timestamp is at least `timestamp`, with that
    /// timestamp (Kafka's `offsetsForTimes`); `None` if no record is that
    /// late.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Option<(i64, i64)> {
        let batch = self
            .committed()
            .iter()
            .find(|b| header_i64(&b.bytes, MAX_TIMESTAMP) >= timestamp)?;
        Some(first_record_at_or_after(batch, timestamp))
    }

    /// ListOffsets' MAX_TIMESTAMP: the offset below the high watermark of
    /// the record with the largest timestamp (the first such), with it.
    pub fn offset_of_max_timestamp(&self) -> Option<(i64, i64)> {
        // `max_by_key` keeps the last of equals: reversed, the first.
        let (max, batch) = self
            .committed()
            .iter()
            .rev()
            .map(|b| (header_i64(&b.bytes, MAX_TIMESTAMP), b))
            .max_by_key(|&(ts, _)| ts)?;
        Some(first_record_at_or_after(batch, max))
    }

    /// The batches wholly below the high watermark.
    fn committed(&self) -> &[StoredBatch] {
        &self.batches[..self.batches.partition_point(|b| b.end <= self.hw)]
    }

    /// Index of the first batch whose end is past `offset`.
    fn first_batch(&self, offset: i64) -> usize {
        self.batches.partition_point(|b| b.end <= offset)
    }
}

/// The producer id and epoch of the first batch in `records`, if it is
/// transactional (a request's batches for one partition come from one
/// producer); what the caller checks with the transaction coordinator
/// before the append, which checks every batch.
pub fn transactional_producer(records: &[u8]) -> Option<(i64, i16)> {
    // Only a v2 batch has these fields (the append refuses the others).
    let attributes = *records.get(ATTRIBUTES + 1)?;
    if records.get(MAGIC) != Some(&2) || attributes & TRANSACTIONAL == 0 {
        return None;
    }
    let epoch = records.get(PRODUCER_EPOCH..PRODUCER_EPOCH + 2)?;
    Some((
        header_i64(records, PRODUCER_ID),
        i16::from_be_bytes([epoch[0], epoch[1]]),
    ))
}

/// The wall clock in milliseconds since the epoch, as record timestamps are.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A control batch holding the marker that ends `producer_id`'s
/// transaction: one record whose key is the marker's version (0) and type
/// (0 ABORT, 1 COMMIT) and whose value is its version and the
/// coordinator's epoch.
fn marker_batch(producer_id: i64, epoch: i16, coordinator_epoch: i32, commit: bool) -> Bytes {
    let now_ms = now_ms();
    let marker = Record {
        transactional: true,
        control: true,
        partition_leader_epoch: 0,
        producer_id,
        producer_epoch: epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: now_ms,
        key: Some(Bytes::copy_from_slice(&[0, 0, 0, u8::from(commit)])),
        value: Some(Bytes::from(
            [[0, 0].as_slice(), &coordinator_epoch.to_be_bytes()].concat(),
        )),
        headers: Default::default(),
        delete_horizon: false,
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, [&marker], &options)
        .expect("a one-record uncompressed batch encodes");
    buf.freeze()
}

/// Stamps a v2 batch with the leader's append time, as Kafka does for a
/// `LogAppendTime` topic: the attributes say so, the max timestamp is the
/// append time (readers give it to every record of the batch), and the
/// CRC, which covers both, is computed again. The first record's
/// timestamp stays the producer's.
fn stamp_append_time(bytes: &mut [u8], now_ms: i64) {
    bytes[ATTRIBUTES + 1] |= LOG_APPEND_TIME;
    bytes[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    seal(bytes);
}

/// `batch` as a `CreateTime` topic keeps it: its timestamp type
/// `CreateTime` and the largest of its records' timestamps in its header,
/// as Kafka's leader writes them whatever the producer wrote (the searches
/// by time and the retention by time read it). Copied, and its CRC
/// computed again, only where the producer's header differs.
///
/// A batch that claimed LogAppendTime had its records checked at the
/// claimed time (`batch_records::check`); Kafka's leader then keeps that
/// claim as the largest timestamp, which its records' own may exceed. The
/// records' own is kept here, so that a search by time finds them.
fn as_create_time(batch: Bytes, max_timestamp: i64) -> Bytes {
    let append_time = batch[ATTRIBUTES + 1] & LOG_APPEND_TIME != 0;
    if !append_time && header_i64(&batch, MAX_TIMESTAMP) == max_timestamp {
        return batch;
    }
    let mut bytes = BytesMut::from(&batch[..]);
    bytes[ATTRIBUTES + 1] &= !LOG_APPEND_TIME;
    bytes[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    seal(&mut bytes);
    bytes.freeze()
}

/// The append time a stored batch was stamped with, if it was.
fn stamped_at(bytes: &[u8]) -> Option<i64> {
    (bytes[ATTRIBUTES + 1] & LOG_APPEND_TIME != 0).then(|| header_i64(bytes, MAX_TIMESTAMP))
}

/// The big-endian `i64` at `at` in a batch's header (its bytes were checked
/// to hold a whole v2 header when it was stored).
fn header_i64(bytes: &[u8], at: usize) -> i64 {
    bytes
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(-1, i64::from_be_bytes)
}

/// The first record of `batch` whose timestamp is at least `timestamp`
/// (the batch's largest is), with its timestamp, compressed or not.
fn first_record_at_or_after(batch: &StoredBatch, timestamp: i64) -> (i64, i64) {
    // Stamped with its append time: every record has that timestamp.
    if let Some(at) = stamped_at(&batch.bytes) {
        return (batch.base, at);
    }
    // Its records were checked when it was stored; should they not read,
    // its first offset and first timestamp are the nearest answer.
    batch_records::first_at_or_after(&batch.bytes, timestamp).map_or(
        (batch.base, header_i64(&batch.bytes, BASE_TIMESTAMP)),
        |r| (batch.base + i64::from(r.offset_delta), r.timestamp),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::batch_records::{Fault, RecordFaults};
    use crate::live::topic_config::MIN_INSYNC_REPLICAS;
    use crate::wire::client::{batch, idempotent_batch, timed_batch, transactional_batch, values};

    const RULES: AppendRules = AppendRules {
        max_bytes: 1 << 20,
        stamp: None,
        keys_required: false,
        compression: None,
        timestamps: None,
    };

    impl AppendRules {
        fn stamped(&self, at: i64) -> AppendRules {
            AppendRules {
                stamp: Some(at),
                ..*self
            }
        }
    }

    #[test]
    fn min_insync_is_capped_by_the_replicas_and_holds_the_high_watermark() {
        let config = Arc::new(TopicConfig::default());
        let mut log = PartitionLog::new(vec![0, 1, 2], Instant::now());
        log.min_insync = MinInsync {
            topic: Arc::clone(&config),
            broker: 2,
        };
        assert_eq!(log.effective_min_insync(), 2);
        // One replica on a broker asking for two: one is enough.
        let mut alone = PartitionLog::new(vec![0], Instant::now());
        alone.min_insync = log.min_insync.clone();
        assert_eq!(alone.effective_min_insync(), 1);
        alone.append(&batch(&[b"a"]), &RULES, None).unwrap();
        assert_eq!(alone.hw, 1);
        // The topic's own setting, read as it is now, capped as well.
        assert!(config.set(MIN_INSYNC_REPLICAS, Some(5)));
        assert_eq!(log.effective_min_insync(), 3);
        assert!(config.set(MIN_INSYNC_REPLICAS, Some(1)));
        assert_eq!(log.effective_min_insync(), 1);
        assert!(config.set(MIN_INSYNC_REPLICAS, None));

        // Below min.insync the high watermark stands still, though the
        // ISR's every member has the records; it moves once enough do.
        log.isr = vec![0];
        log.append(&batch(&[b"a", b"b"]), &RULES, None).unwrap();
        assert_eq!(log.hw, 0);
        assert!(!log.advance_hw());
        log.replica_leo[1] = 2;
        log.isr.push(1);
        assert!(log.advance_hw());
        assert_eq!(log.hw, 2);
    }

    #[test]
    fn appends_assign_offsets_and_reads_stop_at_the_high_watermark() {
        let now = Instant::now();
        let mut log = PartitionLog::new(vec![0, 1], now);
        let first = batch(&[b"a", b"b"]);
        assert_eq!(
            log.append(&first, &RULES, None).map(|a| (a.base, a.end)),
            Ok((0, 2))
        );
        assert_eq!(
            log.append(&batch(&[b"c"]), &RULES, None)
                .map(|a| (a.base, a.end)),
            Ok((2, 3))
        );
        // The follower has nothing yet.
        assert_eq!((log.hw, log.read_len(0, 1 << 20, log.hw)), (0, 0));
        assert_eq!(log.hw_moved_at, None);
        log.replica_leo[1] = 2;
        assert!(log.advance_hw());
        // Stamped when it moved, not before.
        assert!(log.hw_moved_at.is_some_and(|at| at >= now));
        let moved = log.hw_moved_at;
        assert!(!log.advance_hw());
        assert_eq!(log.hw_moved_at, moved);
        let read = log.read(0, 1 << 20, log.hw);
        assert_eq!(read.len(), first.len());
        // Byte-exact but for the base offset, which was already 0.
        assert_eq!(read, first);
        log.replica_leo[1] = 3;
        log.advance_hw();
        let second = log.read(2, 1 << 20, log.hw);
        assert_eq!(&second[..8], &2i64.to_be_bytes());
        assert_eq!(log.read(0, 1 << 20, log.hw).len(), log.bytes as usize);
        // From inside the log: the batch holding the offset on.
        let from_two: usize = log
            .batches
            .iter()
            .filter(|b| b.end > 2)
            .map(|b| b.bytes.len())
            .sum();
        assert_eq!(log.read_len(2, 1 << 20, log.hw), from_two);
        // The first batch whole, even past the limit; then whole batches.
        let one = log.batches[0].bytes.len();
        assert_eq!(log.read_len(0, 1, log.hw), one);
        assert_eq!(log.read_len(0, one + 1, log.hw), one);
        assert_eq!(log.read_len(0, 0, log.hw), 0);
    }

    #[test]
    fn a_bad_crc_or_a_truncated_batch_stores_nothing() {
        let mut log = PartitionLog::new(vec![0], Instant::now());
        let good = batch(&[b"hello"]);
        let mut bad = BytesMut::from(&good[..]);
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert_eq!(
            log.append(&bad.freeze(), &RULES, None),
            Err(AppendError::Corrupt)
        );
        let truncated = good.slice(..good.len() - 3);
        assert_eq!(
            log.append(&truncated, &RULES, None),
            Err(AppendError::Corrupt)
        );
        assert_eq!(
            log.append(&Bytes::new(), &RULES, None),
            Err(AppendError::Corrupt)
        );
        assert_eq!(
            log.append(
                &good,
                &AppendRules {
                    max_bytes: 4,
                    ..RULES
                },
                None
            ),
            Err(AppendError::TooLarge)
        );
        assert!(log.batches.is_empty());
    }

    #[test]
    fn a_stamped_batch_carries_the_append_time_and_a_crc_that_still_checks() {
        let mut log = PartitionLog::new(vec![0], Instant::now());
        let first = idempotent_batch(&[b"a", b"b"], 7, 0, 0);
        let stamped = log.append(&first, &RULES.stamped(5_000), None).unwrap();
        assert_eq!(stamped.log_append_time, Some(5_000));
        // The decoder checks the CRC: a stale one would fail here. Readers
        // give every record the header's max timestamp (this decoder does
        // not: it reads it off the header).
        let mut bytes = log.batches[0].bytes.clone();
        assert_eq!(header_i64(&bytes, MAX_TIMESTAMP), 5_000);
        let set = RecordBatchDecoder::decode(&mut bytes).expect("a valid batch");
        assert!(set
            .records
            .iter()
            .all(|r| r.timestamp_type == TimestampType::LogAppend));
        assert_eq!(set.records.len(), 2);
        // Found by that time, from its first record.
        log.advance_hw();
        assert_eq!(log.offset_for_timestamp(4_000), Some((0, 5_000)));
        assert_eq!(log.offset_for_timestamp(5_001), None);
        // A resend is answered with the first append's time.
        let again = log.append(&first, &RULES.stamped(9_000), None).unwrap();
        assert_eq!(
            (again.duplicate, again.log_append_time),
            (true, Some(5_000))
        );
        // Unstamped, the producer's timestamps stay.
        let plain = log.append(&batch(&[b"c"]), &RULES, None).unwrap();
        assert_eq!(plain.log_append_time, None);
        let mut bytes = log.batches[1].bytes.clone();
        let set = RecordBatchDecoder::decode(&mut bytes).expect("a valid batch");
        assert_eq!(set.records[0].timestamp_type, TimestampType::Creation);
    }

    /// `batch` with `change` made to its header and its CRC made right.
    fn resealed(batch: &Bytes, change: impl FnOnce(&mut [u8])) -> Bytes {
        let mut bytes = batch.to_vec();
        change(&mut bytes);
        seal(&mut bytes);
        Bytes::from(bytes)
    }

    #[test]
    fn the_header_keeps_the_records_largest_timestamp_whatever_the_producer_said() {
        let mut log = PartitionLog::new(vec![0], Instant::now());
        let sent = timed_batch(&[(3_000, b"a"), (7_000, b"b"), (5_000, b"c")]);
        assert_eq!(header_i64(&sent, MAX_TIMESTAMP), 7_000);
        // A producer's header that says 1: stored as 7,000, which the
        // search by time and the retention read, with a CRC that checks.
        let wrong = resealed(&sent, |b| {
            b[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&1i64.to_be_bytes())
        });
        log.append(&wrong, &RULES, None).unwrap();
        let mut bytes = log.batches[0].bytes.clone();
        assert_eq!(header_i64(&bytes, MAX_TIMESTAMP), 7_000);
        RecordBatchDecoder::decode(&mut bytes).expect("a valid batch");
        log.advance_hw();
        assert_eq!(log.offset_for_timestamp(6_000), Some((1, 7_000)));
        assert_eq!(log.offset_of_max_timestamp(), Some((1, 7_000)));
        // A right one is stored as sent.
        log.append(&sent, &RULES, None).unwrap();
        assert_eq!(log.batches[1].bytes[MAX_TIMESTAMP..], sent[MAX_TIMESTAMP..]);
    }

    #[test]
    fn a_producer_ids_batch_needs_a_sequence_number() {
        let mut log = PartitionLog::new(vec![0], Instant::now());
        let unnumbered = idempotent_batch(&[b"a"], 7, 0, -1);
        assert_eq!(
            log.append(&unnumbered, &RULES, None),
            Err(AppendError::NoSequence)
        );
        assert!(log.batches.is_empty());
        assert!(log
            .append(&idempotent_batch(&[b"a"], 7, 0, 0), &RULES, None)
            .is_ok());
    }

    #[test]
    fn only_the_broker_stamps_its_append_time() {
        let mut log = PartitionLog::new(vec![0], Instant::now());
        let sent = batch(&[b"a", b"b"]);
        let own = header_i64(&sent, MAX_TIMESTAMP);
        let claiming = |claimed: i64| {
            resealed(&sent, |b| {
                b[ATTRIBUTES + 1] |= LOG_APPEND_TIME;
                b[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&claimed.to_be_bytes());
            })
        };
        let every_record = |fault| {
            Err(AppendError::Records(RecordsError::Refused(RecordFaults {
                listed: vec![(0, fault), (1, fault)],
                total: 2,
                timestamps: true,
            })))
        };
        // A LogAppendTime topic refuses a producer's claim to stamp it.
        let refused = every_record(Fault::AppendTimeFromProducer);
        assert_eq!(
            log.append(&claiming(5), &RULES.stamped(5_000), None),
            refused
        );
        // A CreateTime topic refuses it without a time to keep...
        assert_eq!(log.append(&claiming(-1), &RULES, None), refused);
        assert!(log.batches.is_empty());
        // ... and keeps one with a time, as a CreateTime batch whose
        // largest timestamp is its records' own.
        log.append(&claiming(own - 1_000), &RULES, None).unwrap();
        let stored = &log.batches[0].bytes;
        assert_eq!(stored[ATTRIBUTES + 1] & LOG_APPEND_TIME, 0);
        assert_eq!(header_i64(stored, MAX_TIMESTAMP), own);
        assert_eq!(stamped_at(stored), None);
        // Held to the window at the time it claims.
        let window = AppendRules {
            timestamps: Some((own, own + 10)),
            ..RULES
        };
        let out = every_record(Fault::TimestampOutOfRange);
        assert_eq!(log.append(&claiming(own - 1_000), &window, None), out);
    }

    #[test]
    fn a_resent_idempotent_batch_is_stored_once_also_after_a_truncation() {
        let mut log = PartitionLog::new(vec![0, 1], Instant::now());
        let first = idempotent_batch(&[b"a", b"b"], 42, 0, 0);
        let second = idempotent_batch(&[b"c"], 42, 0, 2);
        let stored = |a: Result<Appended, AppendError>| a.map(|a| (a.base, a.end, a.duplicate));
        assert_eq!(stored(log.append(&first, &RULES, None)), Ok((0, 2, false)));
        assert_eq!(stored(log.append(&second, &RULES, None)), Ok((2, 3, false)));
        assert_eq!(stored(log.append(&first, &RULES, None)), Ok((0, 2, true)));
        assert_eq!(log.batches.len(), 2);
        // Out of order, from a fenced epoch, transactional: nothing stored.
        let gap = idempotent_batch(&[b"x"], 42, 0, 5);
        assert_eq!(
            log.append(&gap, &RULES, None),
            Err(AppendError::OutOfOrderSequence)
        );
        let old = idempotent_batch(&[b"x"], 42, 0, 3);
        log.append(&idempotent_batch(&[b"d"], 42, 1, 0), &RULES, None)
            .unwrap();
        assert_eq!(
            log.append(&old, &RULES, None),
            Err(AppendError::InvalidProducerEpoch)
        );
        assert_eq!(log.batches.len(), 3);
        // A new leader without the last two batches: the producer's state
        // is the first batch's again, so the second is new there.
        log.truncate(2);
        assert_eq!(stored(log.append(&first, &RULES, None)), Ok((0, 2, true)));
        assert_eq!(stored(log.append(&second, &RULES, None)), Ok((2, 3, false)));
        assert_eq!(log.producers.len(), 1);
        // A producer without idempotence is not tracked.
        log.append(&batch(&[b"e"]), &RULES, None).unwrap();
        log.append(&batch(&[b"e"]), &RULES, None).unwrap();
        assert_eq!(log.batches.len(), 4);
    }

    #[test]
    fn offsets_by_time_find_the_first_record_that_late_below_the_high_watermark() {
        let mut log = PartitionLog::new(vec![0, 1], Instant::now());
        log.append(
            &timed_batch(&[(100, b"a"), (300, b"b"), (200, b"c")]),
            &RULES,
            None,
        )
        .unwrap();
        log.append(&timed_batch(&[(250, b"d"), (400, b"e")]), &RULES, None)
            .unwrap();
        // Nothing is committed yet: nothing is found.
        assert_eq!(log.offset_for_timestamp(0), None);
        assert_eq!(log.offset_of_max_timestamp(), None);
        log.replica_leo[1] = 3;
        log.advance_hw();
        assert_eq!(log.offset_for_timestamp(0), Some((0, 100)));
        assert_eq!(log.offset_for_timestamp(150), Some((1, 300)));
        assert_eq!(log.offset_for_timestamp(300), Some((1, 300)));
        // The second batch is not below the high watermark yet.
        assert_eq!(log.offset_for_timestamp(350), None);
        assert_eq!(log.offset_of_max_timestamp(), Some((1, 300)));
        log.replica_leo[1] = 5;
        log.advance_hw();
        assert_eq!(log.offset_for_timestamp(350), Some((4, 400)));
        assert_eq!(log.offset_for_timestamp(401), None);
        assert_eq!(log.offset_of_max_timestamp(), Some((4, 400)));
    }

    #[test]
    fn committed_readers_stop_at_open_transactions_and_learn_the_aborted_ones() {
        let mut log = PartitionLog::new(vec![0, 1], Instant::now());
        let txn = transactional_batch(&[b"t1", b"t2"], 5, 0, 0);
        // Only from the producer whose transaction holds the partition,
        // and never a control batch from a client.
        assert_eq!(
            log.append(&txn, &RULES, None),
            Err(AppendError::Transactional)
        );
        assert_eq!(
            log.append(&txn, &RULES, Some((5, 1))),
            Err(AppendError::Transactional)
        );
        assert_eq!(transactional_producer(&txn), Some((5, 0)));
        assert_eq!(transactional_producer(&batch(&[b"x"])), None);
        log.append(&batch(&[b"plain"]), &RULES, None).unwrap();
        log.append(&txn, &RULES, Some((5, 0))).unwrap();
        log.append(&batch(&[b"after"]), &RULES, None).unwrap();
        log.replica_leo[1] = log.log_end();
        log.advance_hw();
        assert_eq!(log.hw, 4);
        // Read uncommitted: everything; committed: up to the open
        // transaction's first record.
        assert_eq!(log.read_limit(false), 4);
        assert_eq!(log.last_stable(), 1);
        let committed = log.read(0, 1 << 20, log.read_limit(true));
        assert_eq!(values(&committed), vec![(0, b"plain".to_vec())]);
        // Aborted: the marker ends it, and once the marker is replicated
        // the records are past the stable offset, listed as aborted.
        let end = log.append_marker(5, 0, 0, false);
        assert_eq!((end, log.last_stable()), (5, 1));
        let marker = log.batches.last().unwrap().bytes.clone();
        assert!(RecordBatchDecoder::decode_batch_info(&mut marker.clone()).unwrap()[0].control);
        log.replica_leo[1] = end;
        log.advance_hw();
        assert_eq!(log.last_stable(), 5);
        let aborted = AbortedTxn {
            producer_id: 5,
            first: 1,
            last: 4,
        };
        assert_eq!(log.aborted_in(0, 5), vec![aborted]);
        assert_eq!(log.aborted_in(5, 5), vec![]);
        // The producer's next transaction continues its sequence numbers;
        // a marker at a newer epoch (an abort at its timeout) fences the
        // old one.
        let next = transactional_batch(&[b"t3"], 5, 0, 2);
        log.append(&next, &RULES, Some((5, 0))).unwrap();
        log.append_marker(5, 1, 0, false);
        let late = transactional_batch(&[b"t4"], 5, 0, 3);
        assert_eq!(
            log.append(&late, &RULES, Some((5, 0))),
            Err(AppendError::InvalidProducerEpoch)
        );
    }

    #[test]
    fn a_marker_cut_off_by_a_new_leader_is_written_again() {
        let mut log = PartitionLog::new(vec![0, 1], Instant::now());
        let txn = transactional_batch(&[b"t"], 9, 2, 0);
        log.append(&txn, &RULES, Some((9, 2))).unwrap();
        log.replica_leo[1] = 1;
        log.advance_hw();
        log.append_marker(9, 2, 0, true);
        // The follower, which has the records but not the marker, leads.
        log.leader = Some(1);
        assert!(log.truncate(1));
        assert_eq!(log.log_end(), 2, "the marker again");
        assert_eq!(log.last_stable(), 0, "until it is replicated");
        log.replica_leo[0] = 2;
        log.advance_hw();
        assert_eq!(log.last_stable(), 2);
        assert_eq!(log.aborted_in(0, 2), vec![]);
        // Nothing is written again when the records went too.
        let mut log = PartitionLog::new(vec![0, 1], Instant::now());
        log.append(&txn, &RULES, Some((9, 2))).unwrap();
        log.append_marker(9, 2, 0, true);
        assert!(!log.truncate(0));
        assert_eq!(log.log_end(), 0);
    }

    #[test]
    fn deleted_records_move_the_log_start_and_the_low_watermark_follows_the_replicas() {
        let mut log = PartitionLog::new(vec![0, 1, 2], Instant::now());
        for v in [b"a", b"b", b"c", b"d"] {
            log.append(&batch(&[v]), &RULES, None).unwrap();
        }
        log.replica_leo = vec![4, 4, 3];
        log.advance_hw();
        assert_eq!(log.hw, 3);
        // Not past the high watermark; -1 is the high watermark.
        assert_eq!(log.delete_records(4), None);
        assert_eq!(log.delete_records(2), Some(2));
        assert_eq!((log.log_start, log.batches.len()), (2, 2));
        // Never back.
        assert_eq!(log.delete_records(1), Some(2));
        let alive = |_: u32| true;
        assert_eq!(
            log.low_watermark(&alive),
            0,
            "the followers have not fetched"
        );
        log.replica_log_start = vec![2, 2, 0];
        assert_eq!(log.low_watermark(&alive), 0);
        // A replica on a dead broker does not hold it back.
        assert_eq!(log.low_watermark(&|b| b != 2), 2);
        assert_eq!(log.delete_records(-1), Some(3));
        assert_eq!(values(&log.read(3, 1 << 20, log.hw)), vec![]);
        assert_eq!(log.read(0, 1 << 20, 4), log.batches[0].bytes);
        // Everything deleted: the log end stays where it was.
        log.replica_leo = vec![4, 4, 4];
        log.advance_hw();
        assert_eq!(log.delete_records(-1), Some(4));
        assert_eq!((log.batches.len(), log.log_end(), log.bytes), (0, 4, 0));
        log.append(&batch(&[b"e"]), &RULES, None).unwrap();
        assert_eq!(log.log_end(), 5);
    }

    #[test]
    fn retention_deletes_the_oldest_batches_below_the_high_watermark_down_to_seven_eighths() {
        let mut log = PartitionLog::new(vec![0, 1], Instant::now());
        let value = [7u8; 1000];
        for _ in 0..10 {
            log.append(&batch(&[&value]), &RULES, None).unwrap();
        }
        let size = log.batches[0].bytes.len() as u64;
        assert_eq!(log.bytes, 10 * size);
        let by_size = |log: &mut PartitionLog, limit| log.apply_retention(Some(limit), None, 0);
        // Within the limit: nothing goes.
        assert_eq!(by_size(&mut log, 10 * size), None);
        // Past it, but the follower has nothing: the high watermark is 0,
        // and nothing a consumer may not have read goes.
        assert_eq!(by_size(&mut log, 4 * size), None);
        log.replica_leo[1] = 8;
        log.advance_hw();
        // Down to 7/8 of 4 batches: 3 batches are left, were all below
        // the high watermark...
        assert_eq!(by_size(&mut log, 4 * size), Some(7));
        assert_eq!((log.log_start, log.batches.len()), (7, 3));
        assert_eq!(log.bytes, 3 * size);
        assert_eq!(log.replica_log_start[0], 7);
        // ...but no further than the high watermark when it is lower.
        log.replica_leo[1] = 9;
        log.advance_hw();
        assert_eq!(by_size(&mut log, size), Some(9));
        assert_eq!((log.log_start, log.batches.len()), (9, 1));
        assert_eq!(log.read(9, 1 << 20, 10), log.batches[0].bytes);
    }

    #[test]
    fn retention_by_time_deletes_the_oldest_batches_until_one_is_recent_enough() {
        let mut log = PartitionLog::new(vec![0], Instant::now());
        for t in [1_000, 2_000, 5_000, 3_000, 9_000] {
            log.append(&timed_batch(&[(t, b"v")]), &RULES, None)
                .unwrap();
        }
        assert_eq!(log.hw, 5);
        let by_time = |log: &mut PartitionLog, ms, now| log.apply_retention(None, Some(ms), now);
        assert_eq!(by_time(&mut log, 10_000, 10_000), None);
        // Older than 7.5 s at 10 s: the first two; the third (5 s) stops
        // the walk, though the fourth (3 s) is older.
        assert_eq!(by_time(&mut log, 7_500, 10_000), Some(2));
        assert_eq!(by_time(&mut log, 1_000, 10_000), Some(4));
        // No further than the high watermark.
        log.append(&timed_batch(&[(1, b"late")]), &RULES, None)
            .unwrap();
        log.hw = 5;
        assert_eq!(by_time(&mut log, 0, 100_000), Some(5));
        assert_eq!(log.batches.len(), 1);
    }

    #[test]
    fn the_oldest_batches_go_first_below_the_high_watermark_as_many_as_asked() {
        let mut log = PartitionLog::new(vec![0], Instant::now());
        for t in [1_000, 2_000, 5_000, 3_000, 9_000] {
            log.append(&timed_batch(&[(t, b"v")]), &RULES, None)
                .unwrap();
        }
        let size = log.batches[0].bytes.len() as u64;
        // Nothing below the high watermark: nothing to delete.
        log.hw = 0;
        assert_eq!(log.oldest_deletable(), None);
        assert_eq!(log.delete_oldest(i64::MAX, u64::MAX), 0);
        log.hw = 4;
        assert_eq!(log.oldest_deletable(), Some(1_000));
        // The first always, however new it is and however little is asked.
        assert_eq!(log.delete_oldest(0, 0), size);
        assert_eq!((log.log_start, log.oldest_deletable()), (1, Some(2_000)));
        // Up to the first newer than the bound: 2 s goes, 5 s stops it.
        assert_eq!(log.delete_oldest(4_000, u64::MAX), size);
        // Up to the bytes asked for.
        assert_eq!(log.delete_oldest(i64::MAX, size + 1), 2 * size);
        assert_eq!(log.log_start, 4);
        // Never at or above the high watermark.
        assert_eq!(log.oldest_deletable(), None);
        assert_eq!(log.delete_oldest(i64::MAX, u64::MAX), 0);
        assert_eq!((log.log_start, log.bytes), (4, size));
    }

    #[test]
    fn an_open_transaction_deleted_under_holds_the_last_stable_offset_at_the_log_start() {
        let mut log = PartitionLog::new(vec![0], Instant::now());
        let open = transactional_batch(&[b"t"], 7, 0, 0);
        log.append(&open, &RULES, Some((7, 0))).unwrap();
        log.append(&batch(&[b"a"]), &RULES, None).unwrap();
        log.append(&batch(&[b"b"]), &RULES, None).unwrap();
        assert_eq!((log.hw, log.last_stable()), (3, 0));
        assert_eq!(log.delete_records(2), Some(2));
        assert_eq!(log.last_stable(), 2);
        assert_eq!(log.read_limit(true), 2);
    }
}
