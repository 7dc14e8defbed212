//! The timer lanes' protocol (`lane.rs`), one thread and several.

use super::lane::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use triomphe::Arc;

/// A value with a timer word, numbered (also the wheel timer's tests').
pub(crate) struct V {
    pub timer: TimerWord,
    pub n: u64,
}

impl Timed for V {
    fn timer_word(&self) -> &TimerWord {
        &self.timer
    }
}

pub(crate) fn v(n: u64) -> Arc<V> {
    Arc::new(V {
        timer: TimerWord::new(),
        n,
    })
}

/// Pushes `cell` and names the entry in its word, as the timer does.
fn push(lane: &mut SharedLane<V>, deadline: u64, cell: &Arc<V>) -> LaneId {
    let pushed = lane
        .push(deadline, Arc::clone(cell))
        .ok()
        .expect("in order");
    let id = pushed.id();
    publish(&**cell, NewEntry::Lane(pushed));
    id
}

/// Where the tests' lanes move what is left in a sparse chunk, as the
/// timer moves it to its wheel: named by plain words 1, 2, 3, ...
#[derive(Default)]
pub(crate) struct Parked {
    last: u64,
    entries: BTreeMap<u64, (u64, Arc<V>)>,
}

impl Elsewhere<V> for Parked {
    fn put(&mut self, deadline: u64, value: Arc<V>) -> Result<u64, Arc<V>> {
        self.last += 1;
        self.entries.insert(self.last, (deadline, value));
        Ok(self.last)
    }

    fn take_back(&mut self, raw: u64) -> Option<Arc<V>> {
        self.entries.remove(&raw).map(|(_, value)| value)
    }
}

impl Parked {
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// What a completion does to an entry here, under the timer's lock:
    /// `None` if `cell`'s word names none.
    fn cancel(&mut self, cell: &Arc<V>) -> Option<Option<u64>> {
        match cell.timer.load() {
            Word::Plain(FIRED | NO_TIMER) | Word::Lane(_) => None,
            Word::Plain(raw) => {
                cell.timer.store_plain(NO_TIMER);
                Some(self.take_back(raw).map(|c| c.n))
            }
        }
    }

    /// Hands out what is due at `now`, marked fired.
    fn due(&mut self, now: u64) -> Vec<Arc<V>> {
        let due: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, (deadline, _))| *deadline <= now)
            .map(|(&raw, _)| raw)
            .collect();
        due.into_iter()
            .filter_map(|raw| self.take_back(raw))
            .inspect(|cell| cell.timer.store_plain(FIRED))
            .collect()
    }

    fn next_expiration(&self) -> Option<u64> {
        self.entries.values().map(|(deadline, _)| *deadline).min()
    }
}

/// A completion's take-out, releasing the chunk as the timer does, where
/// nothing moves out of the lane.
fn cancel_in(lane: &mut SharedLane<V>, cell: &Arc<V>) -> Option<Option<u64>> {
    let mut parked = Parked::default();
    let taken = cancel_or_moved(lane, &mut parked, cell);
    assert_eq!(parked.len(), 0, "nothing moved");
    taken
}

/// A completion's take-out, releasing the chunk as the timer does; an
/// entry the lane moved out is taken out of `parked`.
fn cancel_or_moved(
    lane: &mut SharedLane<V>,
    parked: &mut Parked,
    cell: &Arc<V>,
) -> Option<Option<u64>> {
    let Word::Lane(id) = cell.timer.load() else {
        return parked.cancel(cell);
    };
    let removed = cancel(&**cell, id)?;
    if let Some(token) = removed.release {
        lane.release(token, parked, &mut Vec::new());
    }
    Some(removed.value.map(|c| c.n))
}

fn due(lane: &mut SharedLane<V>, now: u64) -> Vec<(u64, Expiring<V>)> {
    let mut due = Vec::new();
    lane.advance(now, |deadline, e| due.push((deadline, e)));
    due
}

fn chunks_held(lane: &SharedLane<V>) -> usize {
    lane.chunks_held()
}

#[test]
fn a_chunk_is_a_page_and_its_header_a_line() {
    assert_eq!(CHUNK_BYTES, 4096);
    assert_eq!(HEADER_BYTES, 64);
}

#[test]
fn a_hint_names_its_slot_and_its_chunk_the_header() {
    let mut lane = SharedLane::new(0);
    let cells: Vec<_> = (0..u64::from(TEST_SLOTS) + 2).map(v).collect();
    for (i, cell) in cells.iter().enumerate() {
        let id = push(&mut lane, i as u64, cell);
        let (chunk, slot) = id.parts();
        let hint = id.hint();
        assert_eq!(hint & 1, 1, "marked as a lane's");
        assert_eq!(hint & !1, chunk + HEADER_BYTES + 16 * slot as usize);
        assert_eq!(hint & !(CHUNK_BYTES - 1), chunk, "aligned to its size");
        assert_eq!(cell.timer.hint(), hint, "the word gives the same hint");
    }
    assert_eq!(v(0).timer.hint(), 0, "nothing scheduled, nothing to fetch");
    while !lane.drain().is_empty() {}
}

#[test]
fn ids_name_their_chunk_and_slot_and_nothing_else_reads_as_one() {
    for chunk in [64usize, 4096 * 7, 1 << 40, (1 << 47) - 64, (1 << 56) + 128] {
        for slot in [0, 1, TEST_SLOTS - 1] {
            let id = LaneId::encode(chunk, slot).unwrap();
            assert!(LaneId::reads_as_lane(id.raw()));
            assert_eq!(id.parts(), (chunk, slot));
        }
    }
    assert!(LaneId::encode(1 << 62, 0).is_none());
    for plain in [NO_TIMER, FIRED, 0, (7 << 32) | ((1 << 31) - 1)] {
        assert!(!LaneId::reads_as_lane(plain), "{plain:#x}");
    }
    let deadlines = [
        0,
        1,
        (1 << 31) - 1,
        1 << 31,
        (1 << 31) + 1,
        u64::from(u32::MAX),
        1 << 40,
        1 << 62,
    ];
    let words: Vec<u64> = deadlines.iter().map(|&d| plain_deadline(d)).collect();
    for (i, &w) in words.iter().enumerate() {
        assert!(!LaneId::reads_as_lane(w) && w != NO_TIMER && w != FIRED);
        assert!(words[..i].iter().all(|&other| other != w), "one-to-one");
    }
}

#[test]
fn a_taken_out_entry_does_not_expire_and_an_expired_one_is_not_taken_out() {
    let mut lane = SharedLane::new(0);
    let (a, b) = (v(1), v(2));
    push(&mut lane, 10, &a);
    push(&mut lane, 11, &b);
    assert_eq!(cancel_in(&mut lane, &a), Some(Some(1)));
    assert_eq!(a.timer.load(), Word::Plain(NO_TIMER));
    assert_eq!(lane.len(), 1);
    assert_eq!(lane.next_expiration(), Some(11));
    let fired: Vec<_> = due(&mut lane, 11)
        .into_iter()
        .filter_map(|(_, e)| e.resolve())
        .collect();
    assert_eq!(fired.iter().map(|c| c.n).collect::<Vec<_>>(), [2]);
    assert_eq!(b.timer.load(), Word::Plain(FIRED));
    assert_eq!(cancel_in(&mut lane, &b), None);
    drop(fired);
    assert!(Arc::is_unique(&a) && Arc::is_unique(&b));
    assert!(lane.is_empty());
}

#[test]
fn a_completion_that_moves_the_word_first_wins_over_an_expiry_in_flight() {
    let mut lane = SharedLane::new(0);
    let a = v(1);
    push(&mut lane, 10, &a);
    // The thread at the clock took the value under its lock ...
    let (_, expiring) = due(&mut lane, 10).pop().unwrap();
    // ... a completion moves the word before the expiry resolves it.
    assert_eq!(cancel_in(&mut lane, &a), Some(None));
    assert!(expiring.resolve().is_none());
    assert_eq!(a.timer.load(), Word::Plain(NO_TIMER));
    assert!(Arc::is_unique(&a));
    assert_eq!(lane.len(), 0);
}

#[test]
fn a_reset_that_moves_the_word_first_wins_over_an_expiry_in_flight() {
    let mut lane = SharedLane::new(0);
    let a = v(1);
    let old = push(&mut lane, 10, &a);
    let (_, expiring) = due(&mut lane, 10).pop().unwrap();
    let pushed = lane.push(20, Arc::clone(&a)).ok().unwrap();
    let new = pushed.id();
    let removed = replace(&*a, old, NewEntry::Lane(pushed)).ok().unwrap();
    assert!(removed.value.is_none(), "the expiry holds it");
    assert!(expiring.resolve().is_none());
    assert_eq!(a.timer.load(), Word::Lane(new));
    assert_eq!(lane.next_expiration(), Some(20));
    assert_eq!(cancel_in(&mut lane, &a), Some(Some(1)));
    // A reset that comes after the completion finds the word moved and
    // takes its new entry out again.
    let pushed = lane.push(30, Arc::clone(&a)).ok().unwrap();
    let NewEntry::Lane(back) = replace(&*a, new, NewEntry::Lane(pushed)).err().unwrap() else {
        panic!("handed back as given")
    };
    assert_eq!(discard::<V>(back).value.map(|c| c.n), Some(1));
    assert!(Arc::is_unique(&a));
    assert!(lane.is_empty());
}

#[test]
fn a_chunk_its_completions_emptied_is_let_go_at_once() {
    let mut lane = SharedLane::new(0);
    let mut parked = Parked::default();
    let cells: Vec<_> = (0..u64::from(TEST_SLOTS) * 2).map(v).collect();
    for (i, cell) in cells.iter().enumerate() {
        push(&mut lane, i as u64, cell);
    }
    // The head's chunk: nothing is moved out of it (the head lets go of it
    // soon enough), and its last completion lets it go.
    let (first, second) = cells.split_at(TEST_SLOTS as usize);
    for cell in first {
        assert_eq!(chunks_held(&lane), 2);
        assert_eq!(
            cancel_or_moved(&mut lane, &mut parked, cell),
            Some(Some(cell.n))
        );
    }
    assert_eq!(parked.len(), 0);
    assert_eq!(chunks_held(&lane), 1);
    assert_eq!(lane.chunks_kept(), 2, "the first one, as the spare");
    assert_eq!(lane.next_expiration(), Some(u64::from(TEST_SLOTS)));
    assert!(first.iter().all(Arc::is_unique));
    // The tail's chunk is kept while it can take pushes ...
    let tail = v(0);
    push(&mut lane, 1_000, &tail);
    for cell in second.iter().chain([&tail]) {
        cancel_or_moved(&mut lane, &mut parked, cell);
    }
    // ... and the one before it, written to its end, is not.
    assert_eq!(parked.len(), 0);
    assert!(lane.is_empty());
    assert_eq!(chunks_held(&lane), 1, "the tail's");
}

#[test]
fn the_last_entries_of_a_thinned_out_chunk_move_out_and_it_is_let_go() {
    let (slots, sparse) = (TEST_SLOTS as usize, TEST_SPARSE as usize);
    let mut lane = SharedLane::new(0);
    let mut parked = Parked::default();
    let cells: Vec<_> = (0..slots as u64 * 3).map(v).collect();
    for (i, cell) in cells.iter().enumerate() {
        push(&mut lane, i as u64, cell);
    }
    // The middle chunk, between pending entries, taken out from its end
    // but for its first `sparse` entries.
    let middle = &cells[slots..2 * slots];
    let (stay, gone) = middle.split_at(sparse);
    for cell in gone.iter().rev() {
        assert_eq!(chunks_held(&lane), 3);
        assert_eq!(
            cancel_or_moved(&mut lane, &mut parked, cell),
            Some(Some(cell.n))
        );
    }
    // The completion that left `sparse` moved them out, and the chunk went.
    assert_eq!(chunks_held(&lane), 2);
    assert_eq!(lane.chunks_kept(), 3, "the middle one, as the spare");
    assert_eq!(parked.len(), sparse);
    assert_eq!(lane.len(), 2 * slots);
    // Each keeps its deadline there, and its word names it there.
    let deadlines: Vec<u64> = parked.entries.values().map(|(d, _)| *d).collect();
    assert_eq!(deadlines, stay.iter().map(|c| c.n).collect::<Vec<_>>());
    for (cell, raw) in stay.iter().zip(parked.entries.keys()) {
        assert_eq!(cell.timer.load(), Word::Plain(*raw));
    }
    assert_eq!(
        cancel_or_moved(&mut lane, &mut parked, &stay[0]),
        Some(Some(stay[0].n))
    );
    let fired = parked.due(u64::MAX);
    assert_eq!(fired.len(), sparse - 1);
    drop(fired);
    assert!(
        middle.iter().all(Arc::is_unique),
        "one reference each, dropped"
    );
    assert!(stay[1..]
        .iter()
        .all(|c| c.timer.load() == Word::Plain(FIRED)));
    // Nothing moves out of the tail's chunk while it takes pushes.
    let late: Vec<_> = (0..slots as u64).map(|n| v(10_000 + n)).collect();
    for cell in &late[..slots - 1] {
        push(&mut lane, 10_000, cell);
    }
    for cell in &late[sparse..slots - 1] {
        cancel_or_moved(&mut lane, &mut parked, cell);
    }
    assert_eq!(parked.len(), 0);
    assert_eq!(chunks_held(&lane), 3);
    assert_eq!(lane.len(), 2 * slots + sparse);
}

#[test]
fn dropping_a_lane_expires_what_it_holds() {
    let mut lane = SharedLane::new(0);
    let cells: Vec<_> = (0..600).map(v).collect();
    for cell in &cells {
        push(&mut lane, 5, cell);
    }
    cancel_in(&mut lane, &cells[7]);
    drop(lane);
    assert!(cells.iter().all(Arc::is_unique));
    let fired = cells
        .iter()
        .filter(|c| c.timer.load() == Word::Plain(FIRED))
        .count();
    assert_eq!(fired, 599);
}

#[test]
fn completions_racing_expiries_take_each_entry_out_once() {
    use std::sync::Mutex;
    const N: u64 = 200_000;
    // The lane and where it moves the last entries of thinned-out chunks,
    // under one lock as in the timer.
    let timer = Mutex::new((SharedLane::new(0), Parked::default()));
    let (to_cancel, cancels) = std::sync::mpsc::sync_channel::<Arc<V>>(1024);
    let fired = std::thread::scope(|s| {
        let completer = s.spawn(|| {
            let mut taken = 0u64;
            for cell in cancels {
                loop {
                    let Word::Lane(id) = cell.timer.load() else {
                        let mut t = timer.lock().unwrap();
                        taken += u64::from(t.1.cancel(&cell).is_some());
                        break;
                    };
                    if let Some(removed) = cancel(&*cell, id) {
                        taken += 1;
                        if let Some(token) = removed.release {
                            let (lane, parked) = &mut *timer.lock().unwrap();
                            lane.release(token, parked, &mut Vec::new());
                        }
                        break;
                    }
                }
            }
            taken
        });
        let expire = |now| {
            let (lane, parked) = &mut *timer.lock().unwrap();
            let due = due(lane, now);
            let mut fired = parked.due(now);
            fired.extend(due.into_iter().filter_map(|(_, e)| e.resolve()));
            fired
        };
        let mut fired = Vec::new();
        for n in 0..N {
            let cell = v(n);
            push(&mut timer.lock().unwrap().0, n / 4, &cell);
            // Most are taken out, and the chunks thin out to a few.
            if n % 3 != 0 || n % 100 > 5 {
                to_cancel.send(cell).unwrap();
            }
            if n % 64 == 0 {
                fired.extend(expire(n / 4 - n / 64));
            }
        }
        drop(to_cancel);
        let taken = completer.join().unwrap();
        fired.extend(expire(u64::MAX));
        assert_eq!(taken + fired.len() as u64, N, "each entry once");
        fired
    });
    assert!(fired.iter().all(|c| c.timer.load() == Word::Plain(FIRED)));
    drop(fired);
    let (mut lane, parked) = timer.into_inner().unwrap();
    assert!(lane.is_empty());
    assert_eq!(lane.len() + parked.len(), 0);
    assert!(chunks_held(&lane) <= 1);
}

#[derive(Debug, Clone)]
enum Op {
    /// Push at the last deadline plus this (minus, when negative).
    Push(i64),
    Cancel(usize),
    /// Take out this many entries in a row, from the picked pending one
    /// on, but for one in 32: chunks left with a few (which then move out
    /// of the lane).
    CancelRun(usize, usize),
    /// Move an entry to the last deadline plus this.
    Reset(usize, i64),
    Advance(u64),
    Drain,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (-3i64..20).prop_map(Op::Push),
        5 => any::<usize>().prop_map(Op::Cancel),
        2 => (any::<usize>(), 0i64..20).prop_map(|(i, d)| Op::Reset(i, d)),
        2 => (0u64..400).prop_map(Op::Advance),
        1 => Just(Op::Drain),
    ]
}

/// Long lanes whose chunks thin out before the head reaches them.
fn thinning_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        40 => (0i64..3).prop_map(Op::Push),
        2 => any::<usize>().prop_map(Op::Cancel),
        1 => (any::<usize>(), 260usize..520).prop_map(|(i, n)| Op::CancelRun(i, n)),
        1 => (any::<usize>(), 0i64..20).prop_map(|(i, d)| Op::Reset(i, d)),
        1 => (0u64..10).prop_map(Op::Advance),
    ]
}

/// Runs `ops` on a lane and on a map keyed by (deadline, push order),
/// and compares everything observable after each step.
fn run(ops: &[Op], first: u32) -> Result<(), TestCaseError> {
    let mut lane = SharedLane::starting_at(first);
    let mut parked = Parked::default();
    let mut model: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut cells: Vec<(Arc<V>, (u64, u64))> = Vec::new();
    let (mut last, mut now, mut order) = (0u64, 0u64, 0u64);
    for op in ops {
        match *op {
            Op::Push(step) => {
                let deadline = last.saturating_add_signed(step).max(now);
                let cell = v(order);
                match lane.push(deadline, Arc::clone(&cell)) {
                    Ok(pushed) => {
                        prop_assert!(model.is_empty() || deadline >= last);
                        publish(&*cell, NewEntry::Lane(pushed));
                        model.insert((deadline, order), order);
                        cells.push((cell, (deadline, order)));
                        last = deadline;
                    }
                    Err(back) => {
                        prop_assert_eq!(back.n, order);
                        prop_assert!(!model.is_empty() && deadline < last);
                    }
                }
                order += 1;
            }
            Op::Cancel(pick) if !cells.is_empty() => {
                let (cell, key) = &cells[pick % cells.len()];
                let expected = model.remove(key);
                let taken = cancel_or_moved(&mut lane, &mut parked, cell).flatten();
                prop_assert_eq!(taken, expected);
            }
            Op::Reset(pick, step) if !cells.is_empty() => {
                let i = pick % cells.len();
                let deadline = last.saturating_add_signed(step).max(now);
                let cell = &cells[i].0;
                match cell.timer.load() {
                    Word::Lane(old) => {
                        let pushed = lane.push(deadline, Arc::clone(cell)).ok().unwrap();
                        let removed = replace(&**cell, old, NewEntry::Lane(pushed)).ok().unwrap();
                        prop_assert!(removed.value.is_some());
                        if let Some(token) = removed.release {
                            lane.release(token, &mut parked, &mut Vec::new());
                        }
                    }
                    Word::Plain(FIRED | NO_TIMER) => continue,
                    // Moved out of the lane: back into it, as the timer
                    // moves a wheel entry.
                    Word::Plain(raw) => {
                        prop_assert!(parked.take_back(raw).is_some());
                        let pushed = lane.push(deadline, Arc::clone(cell)).ok().unwrap();
                        publish(&**cell, NewEntry::Lane(pushed));
                    }
                }
                let n = model.remove(&cells[i].1).unwrap();
                let key = (deadline, order);
                order += 1;
                model.insert(key, n);
                cells[i].1 = key;
                last = deadline;
            }
            Op::CancelRun(pick, n) if !cells.is_empty() => {
                let pending: Vec<usize> = (0..cells.len())
                    .filter(|&i| !Arc::is_unique(&cells[i].0))
                    .collect();
                let Some(&from) = pending.get(pick % pending.len().max(1)) else {
                    continue;
                };
                let run = cells.iter().skip(from).take(n).enumerate();
                for (_, (cell, key)) in run.filter(|(i, _)| i % 32 != 0) {
                    let expected = model.remove(key);
                    let taken = cancel_or_moved(&mut lane, &mut parked, cell).flatten();
                    prop_assert_eq!(taken, expected);
                }
            }
            Op::Cancel(_) | Op::CancelRun(..) | Op::Reset(..) => {}
            Op::Advance(by) => {
                now += by;
                let mut in_order: Vec<(u64, u64)> = due(&mut lane, now)
                    .into_iter()
                    .map(|(deadline, e)| (deadline, e.resolve().unwrap().n))
                    .collect();
                prop_assert!(in_order.is_sorted_by_key(|&(deadline, _)| deadline));
                in_order.extend(parked.due(now).iter().map(|c| (0, c.n)));
                let mut fired: Vec<u64> = in_order.into_iter().map(|(_, n)| n).collect();
                fired.sort_unstable();
                let mut expected: Vec<u64> = model.range(..(now + 1, 0)).map(|(_, &n)| n).collect();
                expected.sort_unstable();
                model.retain(|&(deadline, _), _| deadline > now);
                prop_assert_eq!(fired, expected);
            }
            Op::Drain => {
                let mut all: Vec<u64> = lane
                    .drain()
                    .into_iter()
                    .map(|e| e.resolve().unwrap().n)
                    .chain(parked.due(u64::MAX).iter().map(|c| c.n))
                    .collect();
                all.sort_unstable();
                let mut expected: Vec<u64> = model.values().copied().collect();
                expected.sort_unstable();
                model.clear();
                prop_assert_eq!(all, expected);
            }
        }
        prop_assert_eq!(lane.len() + parked.len(), model.len());
        let next = [lane.next_expiration(), parked.next_expiration()];
        prop_assert_eq!(
            next.into_iter().flatten().min(),
            model.keys().next().map(|&(d, _)| d)
        );
        // Finished work holds at most a chunk per pending entry, plus
        // the tail's chunk.
        prop_assert!(
            chunks_held(&lane) <= model.len() + 1,
            "{} chunks",
            chunks_held(&lane)
        );
        // The lane's references are those of its pending entries, and
        // where it moved some, theirs.
        let referenced = cells.iter().filter(|(c, _)| !Arc::is_unique(c)).count();
        prop_assert_eq!(referenced, model.len());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn behaves_like_a_sorted_map(ops in prop::collection::vec(op(), 1..1_500)) {
        run(&ops, 0)?;
    }

    #[test]
    fn moves_the_last_entries_of_thinned_out_chunks(
        ops in prop::collection::vec(thinning_op(), 1..4_000)
    ) {
        run(&ops, 0)?;
    }

    #[test]
    fn positions_wrap_around(ops in prop::collection::vec(op(), 1..1_500)) {
        run(&ops, u32::MAX - 700)?;
    }
}
