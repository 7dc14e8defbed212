//! Which key sets were submitted lately: decides whether an operation
//! watched under several keys joins a group (see `watchers.rs`).
//!
//! A group pays off when many operations share it: each then touches one
//! list instead of one per key. A group of one costs more than no group: a
//! map entry, an entry in each key's list, and taking all of that apart when
//! its operation completes. So a key set gets a group only when it comes back
//! soon: the table remembers the hash of the last set that landed in each
//! slot, and a set that finds its own hash there is seen again. A workload
//! whose requests share their keys (Kafka's benchmark, a producer writing the
//! same partitions) finds its sets here at once; one whose sets are all
//! different almost never does (fewer than 10 in 10,000 in the test below)
//! and keeps one entry per key, paying only a hash.
//!
//! The table is a hint with no lock: a lost or torn-apart race only sends
//! one operation down the other path, and both paths are correct together
//! (a check under a key finds a set's operations in its group and in the
//! key's own list alike).

use foldhash::fast::FixedState;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, Ordering};

/// Slots in the table: how many distinct key sets can take turns and still
/// be recognised. Sets recurring less often than every few hundred
/// multi-key submissions are rarely pending together, so a group would
/// seldom hold more than one of their operations.
const SLOTS: usize = 256;

pub(crate) struct RecentKeySets {
    slots: Box<[AtomicU64]>,
}

impl Default for RecentKeySets {
    fn default() -> Self {
        RecentKeySets {
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl RecentKeySets {
    /// Whether `keys` came lately; records that it came now.
    pub(crate) fn seen_again<K: Hash>(&self, keys: &[K]) -> bool {
        // The maps' hash function (`watchers.rs`), with a fixed seed: the
        // table only picks a path, so a collision costs a little speed,
        // never correctness, and keys chosen to collide do no harm.
        // Never 0, the value of a slot nothing landed in yet.
        let tag = FixedState::default().hash_one(keys) | 1;
        let slot = &self.slots[(tag >> 1) as usize % SLOTS];
        if slot.load(Ordering::Relaxed) == tag {
            return true;
        }
        slot.store(tag, Ordering::Relaxed);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_is_recognised_the_second_time_and_after() {
        let recent = RecentKeySets::default();
        assert!(!recent.seen_again(&[1u64, 2, 3]));
        assert!(recent.seen_again(&[1u64, 2, 3]));
        assert!(recent.seen_again(&[1u64, 2, 3]));
        assert!(!recent.seen_again(&[3u64, 2, 1]), "order matters");
        assert!(!recent.seen_again(&["a", "b"]));
        assert!(recent.seen_again(&["a", "b"]));
    }

    #[test]
    fn sets_that_all_differ_are_seldom_taken_for_recent_ones() {
        let recent = RecentKeySets::default();
        let again = (0..10_000u64)
            .filter(|&n| recent.seen_again(&[n, n + 1, n + 2]))
            .count();
        assert!(again < 10, "{again} of 10,000 distinct sets seen again");
    }
}
