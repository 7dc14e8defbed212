//! The purgatory's timer: the timing wheel, and beside it a lane for each
//! timeout operations commonly share.
//!
//! A broker's delayed operations mostly share a few timeouts (every produce
//! of a client waits `request.timeout.ms`, every fetch `fetch.max.wait.ms`).
//! Deadlines of one timeout arrive in order, so a lane holds them
//! (`unchecked/lane.rs`): an insert writes the lane's next slot, a
//! completion clears its slot without the timer's lock, and expiry reads
//! slots in the order they were written, with no bucket and no cascading
//! from a higher level. The wheel takes everything else: any timeout beyond
//! the first [`MAX_LANES`] in use, and a deadline that would land behind
//! its lane's last one (two submitters racing across a tick), and the few
//! entries left in a lane's chunk that completions thinned out (the lane
//! moves them here and frees the chunk). Both are exact, so an operation
//! expires at its deadline whichever holds it.
//!
//! Each cell's timer word names its entry: a wheel [`TimerId`] (whose index
//! stays below 2^31) or a lane's [`LaneId`] (with bit 31 set).

use crate::unchecked::lane::{
    discard, publish, replace, Elsewhere, Expiring, LaneId, NewEntry, ReleaseToken, SharedLane,
    Timed, Word, FIRED, NO_TIMER,
};
use std::time::Duration;
use timing_wheel::{TimerId, TimingWheel};

type Arc<T> = triomphe::Arc<T>;

/// Timeouts that can have a lane at one time. A lane left empty is given to
/// the next timeout that has none.
pub(crate) const MAX_LANES: usize = 8;

/// The timer's entries, each a reference to a cell whose timer word names
/// it (see `unchecked/lane.rs`).
pub(crate) struct WheelTimer<C: Timed> {
    wheel: TimingWheel<Arc<C>>,
    lanes: Vec<(Duration, SharedLane<C>)>,
}

/// An entry handed out because it fell due (or at shutdown).
pub(crate) enum Due<C: Timed> {
    Wheel(Arc<C>),
    Lane(Expiring<C>),
}

impl<C: Timed> Due<C> {
    /// The cell, whether or not this entry turns out to be its end: to
    /// prefetch, not to act on.
    pub(crate) fn cell(&self) -> Option<&Arc<C>> {
        match self {
            Due::Wheel(cell) => Some(cell),
            Due::Lane(expiring) => expiring.value(),
        }
    }

    /// The cell if this is the entry's end; `None` if a completion or a
    /// reset took a lane's entry out first. Call it after the timer's
    /// lock: it may drop the timer's reference to the cell.
    pub(crate) fn resolve(self) -> Option<Arc<C>> {
        match self {
            Due::Wheel(cell) => {
                // The wheel no longer answers to the id this replaces.
                cell.timer_word().store_plain(FIRED);
                Some(cell)
            }
            Due::Lane(expiring) => expiring.resolve(),
        }
    }
}

/// The wheel takes what a lane moves out of a sparse chunk.
impl<C> Elsewhere<C> for TimingWheel<Arc<C>> {
    fn put(&mut self, deadline: u64, value: Arc<C>) -> Result<u64, Arc<C>> {
        match self.insert(deadline, value) {
            Ok(id) => Ok(id.into_raw()),
            Err(full) => {
                tracing::error!("timer full; operation left without a timeout");
                Err(full.into_inner())
            }
        }
    }

    fn take_back(&mut self, raw: u64) -> Option<Arc<C>> {
        self.cancel(TimerId::from_raw(raw))
    }
}

impl<C: Timed> WheelTimer<C> {
    pub(crate) fn new() -> Self {
        WheelTimer {
            wheel: TimingWheel::new(),
            lanes: Vec::new(),
        }
    }

    /// Puts `entry` where `deadline`, set `timeout` from now, belongs: its
    /// timeout's lane, or the wheel. The caller names it in the cell's word
    /// ([`publish`] or [`replace`]). Hands `entry` back when the wheel
    /// holds 2^31 entries.
    pub(crate) fn place(
        &mut self,
        deadline: u64,
        timeout: Duration,
        entry: Arc<C>,
    ) -> Result<NewEntry, Arc<C>> {
        let entry = match self.lane_for(timeout, deadline) {
            Some(lane) => match self.lanes[lane].1.push(deadline, entry) {
                Ok(pushed) => return Ok(NewEntry::Lane(pushed)),
                Err(refused) => refused,
            },
            None => entry,
        };
        match self.wheel.insert(deadline, entry) {
            Ok(id) => Ok(NewEntry::Plain(id.into_raw())),
            Err(full) => Err(full.into_inner()),
        }
    }

    /// Takes out the wheel entry `raw` names (lane entries are taken out
    /// without the lock: `lane::cancel`).
    pub(crate) fn cancel_in_wheel(&mut self, raw: u64) -> Option<Arc<C>> {
        self.wheel.cancel(TimerId::from_raw(raw))
    }

    /// Moves `cell`'s entry to `deadline`, set `timeout` from now; false if
    /// the timer does not hold it (or, for a lane's entry, the wheel is
    /// full: it stays where it was). References to drop after the lock go
    /// to `dropped`.
    pub(crate) fn reschedule(
        &mut self,
        cell: &Arc<C>,
        deadline: u64,
        timeout: Duration,
        dropped: &mut Vec<Arc<C>>,
    ) -> bool {
        match cell.timer_word().load() {
            Word::Plain(FIRED | NO_TIMER) => false,
            Word::Plain(raw) => {
                let id = TimerId::from_raw(raw);
                if self.lane_for(timeout, deadline).is_none() {
                    // A wheel entry that stays in the wheel keeps its id.
                    return self.wheel.reschedule(id, deadline);
                }
                // Wheel ids are only written under this lock: no completion
                // can move the word meanwhile.
                let Some(entry) = self.wheel.cancel(id) else {
                    return false;
                };
                match self.place(deadline, timeout, entry) {
                    Ok(new) => {
                        publish(&**cell, new);
                        true
                    }
                    Err(full) => {
                        cell.timer_word().store_plain(NO_TIMER);
                        dropped.push(full);
                        false
                    }
                }
            }
            Word::Lane(old) => match self.place(deadline, timeout, Arc::clone(cell)) {
                Ok(new) => self.replace(cell, old, new, dropped),
                // It stays where it was.
                Err(full) => {
                    dropped.push(full);
                    false
                }
            },
        }
    }

    /// Moves `cell`'s word from the lane entry `old` to `new` and takes
    /// `old` out; if a completion or an expiry got to `old` first, takes
    /// `new` out again and returns false.
    fn replace(
        &mut self,
        cell: &Arc<C>,
        old: LaneId,
        new: NewEntry,
        dropped: &mut Vec<Arc<C>>,
    ) -> bool {
        let (removed, moved) = match replace(&**cell, old, new) {
            Ok(removed) => (removed, true),
            Err(NewEntry::Lane(pushed)) => (discard(pushed), false),
            Err(NewEntry::Plain(raw)) => {
                dropped.extend(self.wheel.cancel(TimerId::from_raw(raw)));
                return false;
            }
        };
        dropped.extend(removed.value);
        if let Some(token) = removed.release {
            self.release(token, dropped);
        }
        moved
    }

    /// Lets go of a lane's chunk a completion emptied, or moves the few
    /// entries left in it to the wheel first (see
    /// `lane::Removed::release`). References to drop after the lock go to
    /// `dropped`.
    pub(crate) fn release(&mut self, token: ReleaseToken, dropped: &mut Vec<Arc<C>>) {
        if let Some((_, lane)) = self.lanes.get_mut(token.lane as usize) {
            lane.release(token, &mut self.wheel, dropped);
        }
    }

    /// Hands every entry due at or before tick `now` to `fire`, with its
    /// deadline, to resolve after the lock.
    pub(crate) fn advance(&mut self, now: u64, mut fire: impl FnMut(u64, Due<C>)) {
        self.wheel
            .advance_timed(now, |deadline, _, cell| fire(deadline, Due::Wheel(cell)));
        for (_, lane) in &mut self.lanes {
            lane.advance(now, |deadline, expiring| {
                fire(deadline, Due::Lane(expiring))
            });
        }
    }

    /// The tick at which [`advance`](Self::advance) next has work (or, if
    /// a completion just took a lane's first entry out, a tick with none).
    pub(crate) fn next_expiration(&mut self) -> Option<u64> {
        let lanes = self
            .lanes
            .iter_mut()
            .filter_map(|(_, lane)| lane.next_expiration())
            .min();
        lanes.into_iter().chain(self.wheel.next_expiration()).min()
    }

    /// Where the entry the word `word` names is stored, for a completion to
    /// prefetch with `lane::prefetch_entry` (0: nothing to fetch).
    pub(crate) fn address(&self, word: Word) -> usize {
        match word {
            Word::Lane(id) => id.hint(),
            Word::Plain(raw) => self
                .wheel
                .addresses(TimerId::from_raw(raw))
                .map_or(0, |[entry, _]| entry as usize),
        }
    }

    /// Takes every entry out, due or not, to resolve after the lock.
    pub(crate) fn drain(&mut self) -> Vec<Due<C>> {
        let mut all: Vec<Due<C>> = self
            .wheel
            .drain()
            .map(|(_, cell)| Due::Wheel(cell))
            .collect();
        for (_, lane) in &mut self.lanes {
            all.extend(lane.drain().into_iter().map(Due::Lane));
        }
        all
    }

    /// Entries pending (exact while no completion is taking one out).
    pub(crate) fn len(&self) -> usize {
        self.wheel.len() + self.lanes.iter().map(|(_, l)| l.len()).sum::<usize>()
    }

    /// Bytes of the wheel and the lanes (not what their entries point to).
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.wheel.allocated_bytes()
            + self.lanes.capacity() * std::mem::size_of::<(Duration, SharedLane<C>)>()
            + self
                .lanes
                .iter()
                .map(|(_, lane)| lane.allocated_bytes())
                .sum::<usize>()
    }

    /// The lane that takes `deadline` for `timeout`: the timeout's own if
    /// it keeps the lane in order, else a new or an emptied one.
    fn lane_for(&mut self, timeout: Duration, deadline: u64) -> Option<usize> {
        if let Some(lane) = self.lanes.iter().position(|(t, _)| *t == timeout) {
            return self.lanes[lane].1.accepts(deadline).then_some(lane);
        }
        if self.lanes.len() < MAX_LANES {
            let index = self.lanes.len();
            self.lanes.push((timeout, SharedLane::new(index as u32)));
            return Some(index);
        }
        let lane = self.lanes.iter_mut().position(|(_, l)| l.is_empty())?;
        // Its positions go on from where they were, and its chunks are new:
        // no id it gave out names an entry of the new timeout.
        self.lanes[lane].0 = timeout;
        Some(lane)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unchecked::lane;
    use crate::unchecked::lane_tests::{v, V};

    const MS: Duration = Duration::from_millis(1);

    fn in_lane(cell: &Arc<V>) -> bool {
        matches!(cell.timer.load(), Word::Lane(_))
    }

    /// What `TimerQueue::schedule` does.
    fn insert(timer: &mut WheelTimer<V>, deadline: u64, timeout: Duration, n: u64) -> Arc<V> {
        let cell = v(n);
        let new = timer
            .place(deadline, timeout, Arc::clone(&cell))
            .ok()
            .unwrap();
        publish(&*cell, new);
        cell
    }

    /// What `TimerQueue::unschedule` does, lock or none.
    fn cancel(timer: &mut WheelTimer<V>, cell: &Arc<V>) -> Option<u64> {
        match cell.timer.load() {
            Word::Plain(FIRED | NO_TIMER) => None,
            Word::Plain(raw) => {
                cell.timer.store_plain(NO_TIMER);
                timer.cancel_in_wheel(raw).map(|c| c.n)
            }
            Word::Lane(id) => {
                let removed = lane::cancel(&**cell, id)?;
                if let Some(token) = removed.release {
                    timer.release(token, &mut Vec::new());
                }
                removed.value.map(|c| c.n)
            }
        }
    }

    fn reschedule(
        timer: &mut WheelTimer<V>,
        cell: &Arc<V>,
        deadline: u64,
        timeout: Duration,
    ) -> bool {
        timer.reschedule(cell, deadline, timeout, &mut Vec::new())
    }

    fn fired(timer: &mut WheelTimer<V>, now: u64) -> Vec<u64> {
        let mut due = Vec::new();
        timer.advance(now, |deadline, entry| {
            assert!(deadline <= now, "fired at {now}, due at {deadline}");
            due.push(entry)
        });
        let mut out: Vec<u64> = due
            .into_iter()
            .filter_map(Due::resolve)
            .map(|c| c.n)
            .collect();
        out.sort_unstable();
        out
    }

    #[test]
    fn a_shared_timeout_goes_to_its_lane_and_a_late_deadline_to_the_wheel() {
        let mut timer = WheelTimer::new();
        let a = insert(&mut timer, 200, 200 * MS, 1);
        let b = insert(&mut timer, 201, 200 * MS, 2);
        // Computed before `b`'s but inserted after it: out of the lane's order.
        let c = insert(&mut timer, 200, 200 * MS, 3);
        assert!(in_lane(&a) && in_lane(&b));
        assert!(!in_lane(&c), "the wheel took it");
        assert_eq!(timer.len(), 3);
        // The wheel may name its bucket's start, before the deadline.
        assert!(timer.next_expiration().is_some_and(|at| at <= 200));
        assert_eq!(fired(&mut timer, 199), Vec::<u64>::new());
        assert_eq!(fired(&mut timer, 200), [1, 3]);
        assert_eq!(a.timer.load(), Word::Plain(FIRED));
        assert_eq!(cancel(&mut timer, &a), None, "fired entries are gone");
        assert_eq!(cancel(&mut timer, &b), Some(2));
        assert_eq!(timer.len(), 0);
        assert_eq!(timer.next_expiration(), None);
    }

    #[test]
    fn timeouts_beyond_the_lanes_go_to_the_wheel_until_a_lane_empties() {
        let mut timer = WheelTimer::new();
        let cells: Vec<_> = (0..MAX_LANES as u32)
            .map(|n| insert(&mut timer, 100 + u64::from(n), (n + 1) * MS, n.into()))
            .collect();
        assert!(cells.iter().all(in_lane));
        let extra = insert(&mut timer, 500, 999 * MS, 99);
        assert!(!in_lane(&extra));
        // Lane 0 empties: the next new timeout takes it.
        assert_eq!(cancel(&mut timer, &cells[0]), Some(0));
        let renamed = insert(&mut timer, 50, 777 * MS, 7);
        assert!(in_lane(&renamed));
        assert_eq!(cancel(&mut timer, &cells[0]), None);
        assert_eq!(timer.next_expiration(), Some(50));
        assert_eq!(timer.len(), MAX_LANES + 1);
        let mut all: Vec<u64> = timer
            .drain()
            .into_iter()
            .filter_map(Due::resolve)
            .map(|c| c.n)
            .collect();
        all.sort_unstable();
        assert_eq!(all, [1, 2, 3, 4, 5, 6, 7, 7, 99]);
        assert_eq!(renamed.timer.load(), Word::Plain(FIRED));
    }

    #[test]
    fn a_reschedule_moves_an_entry_between_lane_and_wheel() {
        let mut timer = WheelTimer::new();
        let session = insert(&mut timer, 10_000, 10_000 * MS, 1);
        // A heartbeat: the same timeout from a later now stays in the lane.
        assert!(reschedule(&mut timer, &session, 13_000, 10_000 * MS));
        assert!(in_lane(&session));
        // A deadline behind the lane's last goes to the wheel.
        insert(&mut timer, 14_000, 10_000 * MS, 2);
        assert!(reschedule(&mut timer, &session, 12_000, 10_000 * MS));
        assert!(!in_lane(&session));
        // Within the wheel the id stays.
        let later = insert(&mut timer, 20_000, 3 * MS, 3);
        let stale = insert(&mut timer, 30_000, 4 * MS, 4);
        for n in 5..=MAX_LANES as u32 + 1 {
            insert(&mut timer, 40_000, n * MS, n.into());
        }
        let id = session.timer.load();
        assert!(reschedule(&mut timer, &session, 12_500, 999 * MS));
        assert_eq!(session.timer.load(), id);
        assert_eq!(cancel(&mut timer, &stale), Some(4));
        assert!(!reschedule(&mut timer, &stale, 1, MS));
        assert_eq!(fired(&mut timer, 12_499), Vec::<u64>::new());
        assert_eq!(fired(&mut timer, 14_000), [1, 2]);
        assert_eq!(cancel(&mut timer, &later), Some(3));
        // From the wheel back to a lane of its own timeout.
        let back = insert(&mut timer, 50_000, 3 * MS, 10);
        assert!(reschedule(&mut timer, &back, 50_001, 3 * MS));
        assert!(in_lane(&back));
        assert_eq!(cancel(&mut timer, &back), Some(10));
    }

    #[test]
    fn an_address_names_the_entry_while_it_is_pending() {
        let mut timer = WheelTimer::new();
        let in_a_lane = insert(&mut timer, 5, 5 * MS, 1);
        let in_the_wheel = insert(&mut timer, 4, 5 * MS, 2);
        assert_ne!(timer.address(in_a_lane.timer.load()), 0);
        assert_ne!(timer.address(in_the_wheel.timer.load()), 0);
        cancel(&mut timer, &in_the_wheel);
        assert_eq!(timer.address(in_the_wheel.timer.load()), 0);
        assert_eq!(timer.address(Word::Plain(u64::MAX)), 0);
    }
}
