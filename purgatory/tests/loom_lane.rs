//! Exhaustive interleavings of a timer lane's entries taken out by a
//! completion without the timer's lock, racing the thread at the clock's
//! expiry, a timeout reset and the move of a thinned-out chunk's last
//! entries under that lock (`src/unchecked/lane.rs`, compiled here against
//! loom's atomics, with three slots a chunk, one entry left making it
//! sparse): every entry ends once (expired, taken out, or moved by the
//! reset), the lane's reference to each value is dropped once, and every
//! chunk is freed once nobody can reach it, by whichever thread gives back
//! its last unit.
#![allow(dead_code)]

#[path = "loom_support/sync.rs"]
mod sync;

#[path = "../src/unchecked/lane.rs"]
mod lane;

/// What a completion asks the CPU for (`lane::prefetch_entry`): no
/// access the model could see.
#[path = "../src/unchecked/prefetch.rs"]
mod prefetch;

use lane::{
    cancel, publish, replace, Elsewhere, NewEntry, SharedLane, Timed, TimerWord, Word, FIRED,
    NO_TIMER,
};
use loom::sync::Mutex;
use loom::thread;
use triomphe::Arc;

struct Op {
    timer: TimerWord,
}

impl Timed for Op {
    fn timer_word(&self) -> &TimerWord {
        &self.timer
    }
}

fn op() -> Arc<Op> {
    Arc::new(Op {
        timer: TimerWord::new(),
    })
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

std::thread_local! {
    /// Entries moved out of a lane on this thread, over every interleaving
    /// a model ran (loom runs a model's threads on the test's own): a model
    /// that means to race a move checks that some did.
    static MOVED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Where the lane moves a thinned-out chunk's last entries (the wheel, in
/// the purgatory): named by plain words 1, 2, 3, ...
#[derive(Default)]
struct Parked(Vec<(u64, u64, Arc<Op>)>);

impl Elsewhere<Op> for Parked {
    fn put(&mut self, deadline: u64, value: Arc<Op>) -> Result<u64, Arc<Op>> {
        MOVED.with(|n| n.set(n.get() + 1));
        let raw = self.0.iter().map(|e| e.0).max().unwrap_or(0) + 1;
        self.0.push((raw, deadline, value));
        Ok(raw)
    }

    fn take_back(&mut self, raw: u64) -> Option<Arc<Op>> {
        let at = self.0.iter().position(|e| e.0 == raw)?;
        Some(self.0.swap_remove(at).2)
    }
}

/// The lane and where it moves entries, under the timer's lock.
#[derive(Default)]
struct Timer {
    lane: SharedLane<Op>,
    parked: Parked,
}

impl Default for SharedLane<Op> {
    fn default() -> Self {
        SharedLane::new(0)
    }
}

/// Pushes `cell` at `deadline` and names the entry in its word.
fn schedule(timer: &Mutex<Timer>, deadline: u64, cell: &Arc<Op>) {
    let pushed = timer
        .lock()
        .unwrap()
        .lane
        .push(deadline, Arc::clone(cell))
        .ok()
        .unwrap();
    publish(&**cell, NewEntry::Lane(pushed));
}

type Shared = std::sync::Arc<Mutex<Timer>>;

fn new_lane() -> Shared {
    std::sync::Arc::new(Mutex::new(Timer::default()))
}

/// A thread completing `cells` in turn; joins with how many it took out.
fn completer(timer: &Shared, cells: Vec<Arc<Op>>) -> thread::JoinHandle<usize> {
    let timer = timer.clone();
    thread::spawn(move || cells.iter().filter(|c| complete(&timer, c)).count())
}

/// What a completion does: takes the entry out if its word still names
/// one, without the lock if the lane holds it, and asks the lane to let go
/// of its chunk (or move what is left in it) if it says so. True if it
/// took it.
fn complete(timer: &Mutex<Timer>, cell: &Arc<Op>) -> bool {
    loop {
        match cell.timer.load() {
            Word::Plain(FIRED | NO_TIMER) => return false,
            Word::Lane(id) => {
                if let Some(removed) = cancel(&**cell, id) {
                    if let Some(token) = removed.release {
                        let mut dropped = Vec::new();
                        let t = &mut *timer.lock().unwrap();
                        t.lane.release(token, &mut t.parked, &mut dropped);
                    }
                    return true;
                }
            }
            // Moved out of the lane: plain words change only under the lock.
            Word::Plain(_) => {
                let mut t = timer.lock().unwrap();
                let Word::Plain(raw) = cell.timer.load() else {
                    continue;
                };
                if raw == FIRED || raw == NO_TIMER {
                    return false;
                }
                cell.timer.store_plain(NO_TIMER);
                return t.parked.take_back(raw).is_some();
            }
        }
    }
}

/// Six entries in two full chunks, and two threads completing the
/// second's: one its first two entries, the other its last.
fn complete_the_second_of_two_chunks(
    lane: &Shared,
) -> (Vec<Arc<Op>>, [thread::JoinHandle<usize>; 2]) {
    let cells: Vec<_> = (0..6).map(|_| op()).collect();
    for (i, cell) in cells.iter().enumerate() {
        schedule(lane, 10 + i as u64, cell);
    }
    let a = completer(lane, vec![cells[3].clone(), cells[4].clone()]);
    let b = completer(lane, vec![cells[5].clone()]);
    (cells, [a, b])
}

/// What the thread at the clock does: takes what fell due under the lock,
/// resolves it after. Returns how many expired.
fn expire(timer: &Mutex<Timer>, now: u64) -> usize {
    let mut due = Vec::new();
    let mut fired = Vec::new();
    {
        let t = &mut *timer.lock().unwrap();
        t.lane.advance(now, |_, e| due.push(e));
        while let Some(at) = t.parked.0.iter().position(|e| e.1 <= now) {
            let (_, _, cell) = t.parked.0.swap_remove(at);
            cell.timer.store_plain(FIRED);
            fired.push(cell);
        }
    }
    fired.len() + due.into_iter().filter_map(|e| e.resolve()).count()
}

fn chunks() -> isize {
    lane::CHUNKS.with(|n| n.get())
}

#[test]
fn completions_racing_an_expiry_end_each_entry_once_and_free_the_chunk() {
    model(|| {
        let before = chunks();
        let lane = new_lane();
        // A full chunk, all due; a completion comes for two of them.
        let cells: Vec<_> = (0..3).map(|_| op()).collect();
        for cell in &cells {
            schedule(&lane, 1, cell);
        }
        let completer = completer(&lane, vec![cells[1].clone(), cells[2].clone()]);
        let expired = expire(&lane, 1);
        let taken = completer.join().unwrap();
        assert_eq!(expired + taken, 3, "each entry once");
        assert_eq!(cells[0].timer.load(), Word::Plain(FIRED));
        let fired = cells
            .iter()
            .filter(|c| c.timer.load() == Word::Plain(FIRED))
            .count();
        assert_eq!(fired, expired);
        // The lane let go when its head left the chunk: whoever gave the
        // last unit back freed it.
        assert!(lane.lock().unwrap().lane.is_empty());
        drop(lane);
        assert_eq!(chunks(), before, "every chunk freed");
        assert!(cells.iter().all(Arc::is_unique));
    });
}

#[test]
fn completions_that_empty_a_chunk_ahead_of_the_head_let_it_go() {
    model(|| {
        let before = chunks();
        let lane = new_lane();
        // The first chunk keeps its entries; the second's three are taken
        // out by two completions while a push starts a third chunk.
        let (cells, [a, b]) = complete_the_second_of_two_chunks(&lane);
        let late = op();
        schedule(&lane, 200, &late);
        assert_eq!(a.join().unwrap() + b.join().unwrap(), 3);
        {
            let lane = &lane.lock().unwrap().lane;
            // The first chunk and the third (the tail's): the second went
            // with the last completion that emptied it (to the spare, if
            // the third was there before).
            assert_eq!(lane.chunks_held(), 2);
            assert_eq!(lane.len(), 4);
            assert_eq!(chunks(), before + lane.chunks_kept() as isize);
        }
        assert_eq!(expire(&lane, 1_000), 4);
        drop(lane);
        assert_eq!(chunks(), before);
        assert!(cells.iter().chain([&late]).all(Arc::is_unique));
    });
}

#[test]
fn a_reset_racing_a_completion_and_an_expiry_leaves_one_entry_or_none() {
    model(|| {
        let before = chunks();
        let lane = new_lane();
        let cell = op();
        schedule(&lane, 1, &cell);
        let completer = completer(&lane, vec![cell.clone()]);
        let resetter = {
            let (lane, cell) = (lane.clone(), cell.clone());
            thread::spawn(move || {
                let t = &mut *lane.lock().unwrap();
                let Word::Lane(old) = cell.timer.load() else {
                    return false;
                };
                let pushed = t.lane.push(5, Arc::clone(&cell)).ok().unwrap();
                // As `WheelTimer::replace` does: the new entry goes again if
                // the word moved first.
                let (removed, moved) = match replace(&*cell, old, NewEntry::Lane(pushed)) {
                    Ok(removed) => (removed, true),
                    Err(NewEntry::Lane(back)) => (lane::discard::<Op>(back), false),
                    Err(NewEntry::Plain(_)) => unreachable!(),
                };
                let mut dropped = Vec::new();
                if let Some(token) = removed.release {
                    t.lane.release(token, &mut t.parked, &mut dropped);
                }
                drop(removed.value);
                moved
            })
        };
        let expired = expire(&lane, 1);
        let taken = completer.join().unwrap() == 1;
        let moved = resetter.join().unwrap();
        // Whatever the order, the entry ends once; a completion after the
        // reset takes out the moved one.
        match cell.timer.load() {
            Word::Plain(FIRED) => assert!(expired == 1 && !taken),
            Word::Plain(NO_TIMER) => assert!(taken && expired == 0),
            Word::Lane(_) => {
                assert!(moved && !taken && expired == 0);
                assert_eq!(expire(&lane, 5), 1);
            }
            Word::Plain(other) => panic!("{other:#x}"),
        }
        drop(lane);
        assert_eq!(chunks(), before);
        assert!(Arc::is_unique(&cell));
    });
}

#[test]
fn a_completion_racing_the_move_of_a_thinned_out_chunks_last_entry_takes_it_once() {
    let moved_before = MOVED.with(|n| n.get());
    model(|| {
        let before = chunks();
        let lane = new_lane();
        // The second chunk thins out to one entry, which the lane moves
        // out as its completion comes for it.
        let (cells, [a, b]) = complete_the_second_of_two_chunks(&lane);
        assert_eq!(a.join().unwrap() + b.join().unwrap(), 3, "each once");
        {
            let t = lane.lock().unwrap();
            assert!(t.parked.0.is_empty());
            assert_eq!(t.lane.chunks_held(), 1, "the first");
            assert_eq!(t.lane.len(), 3);
        }
        assert!(cells[3..].iter().all(Arc::is_unique));
        assert_eq!(expire(&lane, 1_000), 3);
        drop(lane);
        assert_eq!(chunks(), before, "every chunk freed");
        assert!(cells.iter().all(Arc::is_unique));
    });
    assert!(
        MOVED.with(|n| n.get()) > moved_before,
        "in some interleavings the entry was moved"
    );
}
