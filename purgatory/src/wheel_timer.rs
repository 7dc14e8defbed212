//! The purgatory's timer: the timing wheel, and beside it a lane for each
//! timeout operations commonly share.
//!
//! A broker's delayed operations mostly share a few timeouts (every produce
//! of a client waits `request.timeout.ms`, every fetch `fetch.max.wait.ms`).
//! Deadlines of one timeout arrive in order, so a [`Lane`] holds them: an
//! insert writes the lane's next slot, a cancel clears one slot, and expiry
//! reads slots in the order they were written, with no bucket and no
//! cascading from a higher level. The wheel takes everything else: any
//! timeout beyond the first [`MAX_LANES`] in use, and a deadline that would
//! land behind its lane's last one (two submitters racing across a tick).
//! Both are exact, so an operation expires at its deadline whichever holds
//! it.
//!
//! Ids are one `u64`, as the purgatory stores them in an atomic: a wheel
//! [`TimerId`] (whose index stays below 2^31), or a lane's number with bit
//! 31 set and its position in the upper half.

use std::time::Duration;
use timing_wheel::{Lane, TimerId, TimingWheel};

/// Timeouts that can have a lane at one time. A lane left empty is given to
/// the next timeout that has none.
pub(crate) const MAX_LANES: usize = 8;

/// Set in a lane's ids, clear in the wheel's.
const LANE_BIT: u64 = 1 << 31;

pub(crate) struct WheelTimer<T> {
    wheel: TimingWheel<T>,
    lanes: Vec<(Duration, Lane<T>)>,
}

impl<T> WheelTimer<T> {
    pub(crate) fn new() -> Self {
        WheelTimer {
            wheel: TimingWheel::new(),
            lanes: Vec::new(),
        }
    }

    /// Adds `value`, due at tick `deadline`, set `timeout` from now; returns
    /// its id, or hands `value` back when the wheel holds 2^31 entries.
    pub(crate) fn insert(&mut self, deadline: u64, timeout: Duration, value: T) -> Result<u64, T> {
        let value = match self.lane_for(timeout, deadline) {
            Some(lane) => match self.lanes[lane].1.push(deadline, value) {
                Ok(position) => return Ok(lane_id(lane, position)),
                Err(refused) => refused.into_inner(),
            },
            None => value,
        };
        match self.wheel.insert(deadline, value) {
            Ok(id) => Ok(id.into_raw()),
            Err(full) => Err(full.into_inner()),
        }
    }

    /// Removes the entry `raw` names; `None` if it is not pending.
    pub(crate) fn cancel(&mut self, raw: u64) -> Option<T> {
        match lane_of(raw) {
            Some((lane, position)) => self.lanes.get_mut(lane)?.1.cancel(position),
            None => self.wheel.cancel(TimerId::from_raw(raw)),
        }
    }

    /// Moves the entry `raw` names to `deadline`, set `timeout` from now, and
    /// returns its new id. `Err(None)` if it is not pending; `Err(Some)`
    /// hands it back, taken out, if the wheel has no room for it.
    pub(crate) fn reschedule(
        &mut self,
        raw: u64,
        deadline: u64,
        timeout: Duration,
    ) -> Result<u64, Option<T>> {
        // A wheel entry that stays in the wheel keeps its id.
        let stays = lane_of(raw).is_none() && self.lane_for(timeout, deadline).is_none();
        if stays {
            let id = TimerId::from_raw(raw);
            return match self.wheel.reschedule(id, deadline) {
                true => Ok(raw),
                false => Err(None),
            };
        }
        let value = self.cancel(raw).ok_or(None)?;
        self.insert(deadline, timeout, value).map_err(Some)
    }

    /// Hands every entry due at or before tick `now` to `fire`, with its
    /// deadline.
    pub(crate) fn advance(&mut self, now: u64, mut fire: impl FnMut(u64, T)) {
        self.wheel
            .advance_timed(now, |deadline, _, value| fire(deadline, value));
        for (_, lane) in &mut self.lanes {
            lane.advance_timed(now, |deadline, _, value| fire(deadline, value));
        }
    }

    /// The tick at which [`advance`](Self::advance) next has work.
    pub(crate) fn next_expiration(&self) -> Option<u64> {
        self.lanes
            .iter()
            .filter_map(|(_, lane)| lane.next_expiration())
            .chain(self.wheel.next_expiration())
            .min()
    }

    /// Where the entry `raw` names is stored, for a completion to prefetch
    /// (0: nothing to fetch).
    pub(crate) fn address(&self, raw: u64) -> usize {
        let at = match lane_of(raw) {
            Some((lane, position)) => self.lanes.get(lane).and_then(|(_, l)| l.address(position)),
            None => self
                .wheel
                .addresses(TimerId::from_raw(raw))
                .map(|[entry, _]| entry),
        };
        at.map_or(0, |a| a as usize)
    }

    /// Takes every entry out, due or not.
    pub(crate) fn drain(&mut self) -> Vec<T> {
        let mut all: Vec<T> = self.wheel.drain().map(|(_, value)| value).collect();
        for (_, lane) in &mut self.lanes {
            all.extend(lane.drain().into_iter().map(|(_, value)| value));
        }
        all
    }

    /// Entries pending.
    pub(crate) fn len(&self) -> usize {
        self.wheel.len() + self.lanes.iter().map(|(_, l)| l.len()).sum::<usize>()
    }

    /// The lane that takes `deadline` for `timeout`: the timeout's own if
    /// it keeps the lane in order, else a new or an emptied one.
    fn lane_for(&mut self, timeout: Duration, deadline: u64) -> Option<usize> {
        if let Some(lane) = self.lanes.iter().position(|(t, _)| *t == timeout) {
            return self.lanes[lane].1.accepts(deadline).then_some(lane);
        }
        if self.lanes.len() < MAX_LANES {
            self.lanes.push((timeout, Lane::new()));
            return Some(self.lanes.len() - 1);
        }
        let lane = self.lanes.iter().position(|(_, l)| l.is_empty())?;
        // Its positions go on from where they were, so no id it gave out
        // names an entry of the new timeout.
        self.lanes[lane].0 = timeout;
        Some(lane)
    }
}

fn lane_id(lane: usize, position: u32) -> u64 {
    (u64::from(position) << 32) | LANE_BIT | lane as u64
}

/// The lane and position a lane id names; `None` for a wheel id. (Any other
/// integer names a lane that does not exist.)
fn lane_of(raw: u64) -> Option<(usize, u32)> {
    let lane = (raw as u32 & !(LANE_BIT as u32)) as usize;
    (raw & LANE_BIT != 0).then_some((lane, (raw >> 32) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn fired(timer: &mut WheelTimer<u32>, now: u64) -> Vec<u32> {
        let mut out = Vec::new();
        timer.advance(now, |deadline, v| {
            assert!(deadline <= now, "{v} fired at {now}, due at {deadline}");
            out.push(v)
        });
        out.sort_unstable();
        out
    }

    #[test]
    fn a_shared_timeout_goes_to_its_lane_and_a_late_deadline_to_the_wheel() {
        let mut timer = WheelTimer::new();
        let a = timer.insert(200, 200 * MS, 1).unwrap();
        let b = timer.insert(201, 200 * MS, 2).unwrap();
        // Computed before `b`'s but inserted after it: out of the lane's order.
        let c = timer.insert(200, 200 * MS, 3).unwrap();
        assert!(lane_of(a).is_some() && lane_of(b).is_some());
        assert_eq!(lane_of(c), None, "the wheel took it");
        assert_eq!(timer.len(), 3);
        // The wheel may name its bucket's start, before the deadline.
        assert!(timer.next_expiration().is_some_and(|at| at <= 200));
        assert_eq!(fired(&mut timer, 199), Vec::<u32>::new());
        assert_eq!(fired(&mut timer, 200), [1, 3]);
        assert_eq!(timer.cancel(a), None, "fired ids are stale");
        assert_eq!(timer.cancel(b), Some(2));
        assert_eq!(timer.len(), 0);
        assert_eq!(timer.next_expiration(), None);
    }

    #[test]
    fn timeouts_beyond_the_lanes_go_to_the_wheel_until_a_lane_empties() {
        let mut timer = WheelTimer::new();
        let ids: Vec<u64> = (0..MAX_LANES as u32)
            .map(|n| timer.insert(100 + u64::from(n), (n + 1) * MS, n).unwrap())
            .collect();
        assert!(ids.iter().all(|&id| lane_of(id).is_some()));
        let extra = timer.insert(500, 999 * MS, 99).unwrap();
        assert_eq!(lane_of(extra), None);
        // Lane 0 empties: the next new timeout takes it, and the id that
        // lane gave out stays stale.
        assert_eq!(timer.cancel(ids[0]), Some(0));
        let renamed = timer.insert(50, 777 * MS, 7).unwrap();
        assert_eq!(lane_of(renamed).map(|(lane, _)| lane), Some(0));
        assert_eq!(timer.cancel(ids[0]), None);
        assert_eq!(timer.next_expiration(), Some(50));
        assert_eq!(timer.len(), MAX_LANES + 1);
        let mut all = timer.drain();
        all.sort_unstable();
        assert_eq!(all, [1, 2, 3, 4, 5, 6, 7, 7, 99]);
    }

    #[test]
    fn a_reschedule_moves_an_entry_between_lane_and_wheel() {
        let mut timer = WheelTimer::new();
        let session = timer.insert(10_000, 10_000 * MS, 1).unwrap();
        // A heartbeat: the same timeout from a later now stays in the lane.
        let session = timer.reschedule(session, 13_000, 10_000 * MS).unwrap();
        assert!(lane_of(session).is_some());
        // A deadline behind the lane's last goes to the wheel.
        timer.insert(14_000, 10_000 * MS, 2).unwrap();
        let moved = timer.reschedule(session, 12_000, 10_000 * MS).unwrap();
        assert_eq!(lane_of(moved), None);
        // Within the wheel the id stays.
        let later = timer.insert(20_000, 3 * MS, 3).unwrap();
        let stale = timer.insert(30_000, 4 * MS, 4).unwrap();
        for n in 5..=MAX_LANES as u32 + 1 {
            timer.insert(40_000, n * MS, n).unwrap();
        }
        assert_eq!(timer.reschedule(moved, 12_500, 999 * MS), Ok(moved));
        assert_eq!(timer.cancel(stale), Some(4));
        assert_eq!(
            timer.reschedule(stale, 1, MS).map_err(|e| e.is_some()),
            Err(false)
        );
        assert_eq!(fired(&mut timer, 12_499), Vec::<u32>::new());
        assert_eq!(fired(&mut timer, 14_000), [1, 2]);
        assert_eq!(timer.cancel(later), Some(3));
    }

    #[test]
    fn an_address_names_the_entry_while_it_is_pending() {
        let mut timer = WheelTimer::new();
        let in_lane = timer.insert(5, 5 * MS, 1).unwrap();
        let in_wheel = timer.insert(4, 5 * MS, 2).unwrap();
        assert_ne!(timer.address(in_lane), 0);
        assert_ne!(timer.address(in_wheel), 0);
        timer.cancel(in_lane);
        assert_eq!(timer.address(in_lane), 0);
        assert_eq!(timer.address(u64::MAX), 0);
    }
}
