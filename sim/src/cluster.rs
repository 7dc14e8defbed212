//! The replicated log of each partition, as its leader sees it: appends,
//! follower positions, the high watermark, ISR shrink and expand, and
//! leader election when a broker dies. Offsets count bytes.

use crate::ops::PartitionView;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One topic-partition.
pub struct Partition {
    /// Its id, also its key in the purgatories.
    pub id: u32,
    /// Brokers holding a replica; the first alive in-sync one leads.
    pub replicas: Vec<u32>,
    /// The current leader; `None` while offline.
    pub leader: Option<u32>,
    /// In-sync replicas, the leader included.
    pub isr: Vec<u32>,
    /// Log end offset of each broker's replica (by broker id).
    pub leo: Vec<u64>,
    /// The leader's view of each follower's log end: its last fetch offset.
    pub follower_pos: Vec<u64>,
    /// When each follower last caught up with the leader (µs).
    pub caught_up_at: Vec<u64>,
    /// The leader's log end when it last answered each follower's fetch.
    pub served_leo: Vec<u64>,
    /// High watermark. As in Kafka, it stands still while the ISR is
    /// smaller than `min_insync`.
    pub hw: u64,
    /// `min.insync.replicas`, capped by the replicas (Kafka's effective
    /// minimum).
    pub min_insync: usize,
    /// Leader epoch.
    pub epoch: u64,
    /// What the leader publishes to parked operations.
    pub view: Arc<PartitionView>,
}

/// How the high watermark or leadership changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// The HW advanced: parked produces and consumer fetches may complete.
    pub hw_moved: bool,
    /// The ISR shrank or grew.
    pub isr_changed: bool,
}

impl Partition {
    /// Partition `id` with replicas on `replicas` (leader first), all in
    /// sync, asking for `min_insync` of them in sync.
    pub fn new(id: u32, replicas: Vec<u32>, brokers: u32, min_insync: u32) -> Self {
        let n = brokers as usize;
        let p = Partition {
            id,
            min_insync: (min_insync as usize).min(replicas.len()),
            leader: replicas.first().copied(),
            isr: replicas.clone(),
            replicas,
            leo: vec![0; n],
            follower_pos: vec![0; n],
            caught_up_at: vec![0; n],
            served_leo: vec![0; n],
            hw: 0,
            epoch: 0,
            view: Arc::new(PartitionView::default()),
        };
        p.publish();
        p
    }

    /// Followers: replicas other than the leader.
    pub fn followers(&self) -> impl Iterator<Item = u32> + '_ {
        self.replicas
            .iter()
            .copied()
            .filter(move |&r| Some(r) != self.leader)
    }

    /// Writes the leader-side state for parked operations to read.
    pub fn publish(&self) {
        let leo = self.leader.map_or(0, |l| self.leo[l as usize]);
        self.view.leo.store(leo, Ordering::Release);
        self.view
            .isr
            .store(self.isr.len() as u32, Ordering::Release);
        self.view.epoch.store(self.epoch, Ordering::Release);
        self.view.hw.store(self.hw, Ordering::Release);
    }

    /// The leader appends `bytes`; returns the new log end.
    pub fn append(&mut self, bytes: u64) -> (u64, Change) {
        let leader = self.leader.expect("append on a led partition") as usize;
        self.leo[leader] += bytes;
        let change = self.recompute_hw();
        self.publish();
        (self.leo[leader], change)
    }

    /// The leader receives a fetch from `follower` at `offset` at time `now`.
    pub fn follower_fetched(&mut self, follower: u32, offset: u64, now: u64) -> Change {
        let f = follower as usize;
        self.follower_pos[f] = offset;
        let leader_leo = self.leader.map_or(0, |l| self.leo[l as usize]);
        // Caught up: it has everything the leader had when it last answered
        // it (Kafka's lastCaughtUpTime), or everything there is.
        if offset >= self.served_leo[f] || offset >= leader_leo {
            self.caught_up_at[f] = now;
        }
        let mut change = Change::default();
        if !self.isr.contains(&follower) && offset >= self.hw && offset >= self.served_leo[f] {
            self.isr.push(follower);
            change.isr_changed = true;
        }
        let moved = self.recompute_hw();
        self.publish();
        Change {
            hw_moved: moved.hw_moved,
            isr_changed: change.isr_changed,
        }
    }

    /// Removes followers not caught up within `lag_max` µs from the ISR.
    pub fn shrink_isr(&mut self, now: u64, lag_max: u64) -> Change {
        let before = self.isr.len();
        let leader = self.leader;
        let caught_up_at = &self.caught_up_at;
        self.isr.retain(|&r| {
            Some(r) == leader || now.saturating_sub(caught_up_at[r as usize]) <= lag_max
        });
        let mut change = self.recompute_hw();
        change.isr_changed = self.isr.len() != before;
        self.publish();
        change
    }

    /// HW = the smallest log end over the ISR (the leader's own, and its
    /// view of each follower's). Never moves back, and stands still while
    /// fewer than `min_insync` are in sync (Kafka's leaders since 3.7), so
    /// a produce waiting for it then waits out its timeout.
    fn recompute_hw(&mut self) -> Change {
        let Some(leader) = self.leader else {
            return Change::default();
        };
        if self.isr.len() < self.min_insync {
            return Change::default();
        }
        let hw = self
            .isr
            .iter()
            .map(|&r| match r == leader {
                true => self.leo[r as usize],
                false => self.follower_pos[r as usize],
            })
            .min()
            .unwrap_or(self.hw);
        let moved = hw > self.hw;
        self.hw = self.hw.max(hw);
        Change {
            hw_moved: moved,
            isr_changed: false,
        }
    }

    /// `dead` has died at `now`: it leaves the ISR, and if it led, the first
    /// alive in-sync replica takes over, followers truncate to the new
    /// leader's log, the epoch moves. With no in-sync replica alive the
    /// partition is offline until one comes back ([`rejoin`](Self::rejoin)),
    /// as in Kafka with `unclean.leader.election.enable` off (its default):
    /// an out-of-sync replica taking over would cut the log below the high
    /// watermark, losing what `acks=all` produces were acknowledged for.
    /// Returns whether leadership moved, and the HW change.
    pub fn remove_broker(&mut self, dead: u32, alive: &[bool], now: u64) -> (bool, Change) {
        let before = self.isr.len();
        self.isr.retain(|&r| r != dead);
        let mut change = Change {
            isr_changed: self.isr.len() != before,
            ..Change::default()
        };
        if self.leader != Some(dead) {
            let moved = self.recompute_hw();
            change.hw_moved = moved.hw_moved;
            self.publish();
            return (false, change);
        }
        let leader = self.isr.iter().copied().find(|&r| alive[r as usize]);
        change.hw_moved = self.hand_over(leader, now);
        (true, change)
    }

    /// `back` has restarted: it leads if nobody does (no in-sync replica
    /// was up) and it holds every committed record; otherwise it is a
    /// follower that rejoins the ISR once it has caught up. Its log needs
    /// no cut here: each leader change cut every replica's, its own
    /// included, to the new leader's log end. Returns whether it took the
    /// leadership.
    pub fn rejoin(&mut self, back: u32, now: u64) -> bool {
        if self.leader.is_some()
            || !self.replicas.contains(&back)
            || self.leo[back as usize] < self.hw
        {
            return false;
        }
        self.isr = vec![back];
        self.hand_over(Some(back), now);
        true
    }

    /// Kafka's preferred leader election: if the first replica is up and in
    /// sync but does not lead, it takes over from the leader (up too: a
    /// dead one was replaced when it died). Returns the leader it took
    /// over from, and whether the HW moved.
    pub fn elect_preferred(&mut self, alive: &[bool], now: u64) -> Option<(u32, bool)> {
        let preferred = *self.replicas.first()?;
        let old = self.leader?;
        if old == preferred || !alive[preferred as usize] || !self.isr.contains(&preferred) {
            return None;
        }
        Some((old, self.hand_over(Some(preferred), now)))
    }

    /// Leadership moves to `leader` (`None`: offline), an in-sync replica,
    /// in a new epoch; every replica is cut to the new leader's log end.
    /// Returns whether the HW moved.
    fn hand_over(&mut self, leader: Option<u32>, now: u64) -> bool {
        self.leader = leader;
        self.epoch += 1;
        let mut hw_moved = false;
        if let Some(l) = leader {
            debug_assert!(self.isr.contains(&l), "only an in-sync replica leads");
            let leader_leo = self.leo[l as usize];
            for r in self.replicas.clone() {
                let r = r as usize;
                self.leo[r] = self.leo[r].min(leader_leo);
                self.follower_pos[r] = self.leo[r];
                self.served_leo[r] = 0;
                self.caught_up_at[r] = now;
            }
            hw_moved = self.recompute_hw().hw_moved;
        }
        self.publish();
        hw_moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hw_waits_for_every_in_sync_follower() {
        let mut p = Partition::new(0, vec![0, 1, 2], 3, 1);
        let (leo, change) = p.append(100);
        assert_eq!((leo, change.hw_moved, p.hw), (100, false, 0));
        assert!(!p.follower_fetched(1, 100, 5).hw_moved);
        assert!(p.follower_fetched(2, 60, 5).hw_moved);
        assert_eq!(p.hw, 60);
        assert!(p.follower_fetched(2, 100, 6).hw_moved);
        assert_eq!(p.view.hw.load(Ordering::Acquire), 100);
    }

    #[test]
    fn a_lagging_follower_leaves_the_isr_and_the_hw_moves_on() {
        let mut p = Partition::new(0, vec![0, 1, 2], 3, 1);
        p.append(100);
        p.served_leo[1] = 100;
        p.follower_fetched(1, 100, 1_000);
        // Follower 1 caught up 9.5 ms ago, follower 2 never did.
        let change = p.shrink_isr(10_500, 10_000);
        assert!(change.isr_changed && change.hw_moved);
        assert_eq!((p.isr.clone(), p.hw), (vec![0, 1], 100));
        // It rejoins once it has caught up.
        p.served_leo[2] = 100;
        assert!(p.follower_fetched(2, 100, 11_000).isr_changed);
        assert_eq!(p.isr, vec![0, 1, 2]);
    }

    #[test]
    fn below_min_insync_the_hw_stands_still_until_enough_are_back() {
        // Asking for more than the replicas asks for all of them.
        assert_eq!(Partition::new(0, vec![0, 1], 3, 3).min_insync, 2);
        let mut p = Partition::new(0, vec![0, 1, 2], 3, 2);
        p.append(100);
        // Neither follower caught up: both leave, and the leader alone
        // holds its records back.
        let change = p.shrink_isr(20_000, 10_000);
        assert!(change.isr_changed && !change.hw_moved);
        assert_eq!((p.isr.clone(), p.hw), (vec![0], 0));
        assert!(!p.append(50).1.hw_moved);
        // Follower 1 catches up to the high watermark, joins, and the
        // HW moves to what the two have.
        p.served_leo[1] = 150;
        let change = p.follower_fetched(1, 150, 21_000);
        assert!(change.isr_changed && change.hw_moved);
        assert_eq!((p.isr.clone(), p.hw), (vec![0, 1], 150));
    }

    #[test]
    fn a_dead_leader_hands_over_to_an_in_sync_replica_without_losing_committed_data() {
        let mut p = Partition::new(0, vec![1, 0, 2], 3, 1);
        p.append(100);
        p.follower_fetched(0, 100, 1);
        p.follower_fetched(2, 80, 1);
        p.leo[0] = 100;
        p.leo[2] = 80;
        assert_eq!(p.hw, 80);
        let (moved, _) = p.remove_broker(1, &[true, false, true], 2);
        assert!(moved);
        assert_eq!(p.leader, Some(0));
        assert_eq!(p.epoch, 1);
        assert!(p.hw >= 80);
        assert_eq!(p.isr, vec![0, 2]);
    }

    #[test]
    fn a_restarted_preferred_replica_leads_again_once_in_sync() {
        let mut p = Partition::new(0, vec![1, 0, 2], 3, 1);
        p.append(100);
        p.follower_fetched(0, 100, 1);
        p.follower_fetched(2, 100, 1);
        p.leo[0] = 100;
        p.leo[2] = 100;
        let dead = [true, false, true];
        p.remove_broker(1, &dead, 2);
        assert_eq!(p.leader, Some(0));
        // Broker 1 is back: not the leader before it is in sync.
        let up = [true; 3];
        assert!(!p.rejoin(1, 3));
        assert_eq!(p.elect_preferred(&up, 3), None);
        p.append(50);
        p.served_leo[1] = 150;
        assert!(p.follower_fetched(1, 150, 4).isr_changed);
        assert_eq!(p.isr, vec![0, 2, 1]);
        assert_eq!(p.elect_preferred(&up, 5), Some((0, false)));
        assert_eq!((p.leader, p.epoch), (Some(1), 2));
        // Nothing more to elect.
        assert_eq!(p.elect_preferred(&up, 6), None);
    }

    #[test]
    fn the_first_replica_back_with_every_committed_record_leads_a_partition_nobody_led() {
        let mut p = Partition::new(0, vec![1, 2], 3, 1);
        p.append(100);
        p.remove_broker(2, &[true, true, false], 1);
        p.remove_broker(1, &[true, false, false], 2);
        assert_eq!((p.leader, p.hw), (None, 100));
        assert!(!p.rejoin(0, 3), "not a replica");
        assert!(!p.rejoin(2, 3), "it lacks committed records");
        assert_eq!(p.leader, None);
        assert!(p.rejoin(1, 4));
        assert_eq!((p.leader, p.isr.clone()), (Some(1), vec![1]));
    }

    #[test]
    fn an_out_of_sync_replica_does_not_take_over_and_cut_committed_data() {
        // Follower 2, at 60, never caught up and leaves the ISR; the leader
        // and follower 0 hold 100, all of it committed.
        let mut p = Partition::new(0, vec![1, 0, 2], 3, 1);
        p.append(100);
        p.served_leo[0] = 100;
        p.follower_fetched(0, 100, 1_000);
        p.leo[0] = 100;
        p.leo[2] = 60;
        p.shrink_isr(10_500, 10_000);
        assert_eq!((p.isr.clone(), p.hw), (vec![1, 0], 100));
        p.remove_broker(0, &[false, true, true], 10_600);
        // The last in-sync replica dies: offline, not led by broker 2.
        let (moved, _) = p.remove_broker(1, &[false, false, true], 10_700);
        assert!(moved);
        assert_eq!((p.leader, p.hw, p.leo[2]), (None, 100, 60));
        assert_eq!(p.view.epoch.load(Ordering::Acquire), p.epoch);
        // Back, the in-sync one leads again with everything committed.
        assert!(p.rejoin(0, 11_000));
        assert_eq!((p.leader, p.leo[0]), (Some(0), 100));
    }
}
