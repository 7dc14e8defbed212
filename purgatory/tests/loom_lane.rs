//! Exhaustive interleavings of a timer lane's entries taken out by a
//! completion without the timer's lock, racing the timer thread's expiry
//! and a timeout reset under that lock (`src/unchecked/lane.rs`, compiled
//! here against loom's atomics, with three slots a chunk): every entry ends
//! once (expired, taken out, or moved by the reset), the lane's reference
//! to each value is dropped once, and every chunk is freed once nobody can
//! reach it, by whichever thread gives back its last unit.
#![allow(dead_code)]

#[path = "loom_support/sync.rs"]
mod sync;

#[path = "../src/unchecked/lane.rs"]
mod lane;

use lane::{
    cancel, publish, replace, NewEntry, SharedLane, Timed, TimerWord, Word, FIRED, NO_TIMER,
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

/// Pushes `cell` at `deadline` and names the entry in its word.
fn schedule(lane: &Mutex<SharedLane<Op>>, deadline: u64, cell: &Arc<Op>) {
    let pushed = lane
        .lock()
        .unwrap()
        .push(deadline, Arc::clone(cell))
        .ok()
        .unwrap();
    publish(&**cell, NewEntry::Lane(pushed));
}

type Shared = std::sync::Arc<Mutex<SharedLane<Op>>>;

fn new_lane() -> Shared {
    std::sync::Arc::new(Mutex::new(SharedLane::new(0)))
}

/// A thread completing `cells` in turn; joins with how many it took out.
fn completer(lane: &Shared, cells: Vec<Arc<Op>>) -> thread::JoinHandle<usize> {
    let lane = lane.clone();
    thread::spawn(move || cells.iter().filter(|c| complete(&lane, c)).count())
}

/// What a completion does: takes the entry out if its word still names
/// one, and lets the chunk go if it emptied it. True if it took it.
fn complete(lane: &Mutex<SharedLane<Op>>, cell: &Arc<Op>) -> bool {
    loop {
        let Word::Lane(id) = cell.timer.load() else {
            return false;
        };
        if let Some(removed) = cancel(&**cell, id) {
            if let Some(token) = removed.release {
                lane.lock().unwrap().release(token);
            }
            return true;
        }
    }
}

/// What the timer thread does: takes what fell due under the lock,
/// resolves it after. Returns how many expired.
fn expire(lane: &Mutex<SharedLane<Op>>, now: u64) -> usize {
    let mut due = Vec::new();
    lane.lock().unwrap().advance(now, |_, e| due.push(e));
    due.into_iter().filter_map(|e| e.resolve()).count()
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
        assert!(lane.lock().unwrap().is_empty());
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
        let cells: Vec<_> = (0..6).map(|_| op()).collect();
        for (i, cell) in cells.iter().enumerate() {
            schedule(&lane, 10 + i as u64, cell);
        }
        let a = completer(&lane, vec![cells[3].clone(), cells[4].clone()]);
        let b = completer(&lane, vec![cells[5].clone()]);
        let late = op();
        schedule(&lane, 200, &late);
        assert_eq!(a.join().unwrap() + b.join().unwrap(), 3);
        {
            let lane = lane.lock().unwrap();
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
                let mut lane = lane.lock().unwrap();
                let Word::Lane(old) = cell.timer.load() else {
                    return false;
                };
                let pushed = lane.push(5, Arc::clone(&cell)).ok().unwrap();
                // As `WheelTimer::replace` does: the new entry goes again if
                // the word moved first.
                let (removed, moved) = match replace(&*cell, old, NewEntry::Lane(pushed)) {
                    Ok(removed) => (removed, true),
                    Err(NewEntry::Lane(back)) => (lane::discard::<Op>(back), false),
                    Err(NewEntry::Plain(_)) => unreachable!(),
                };
                if let Some(token) = removed.release {
                    lane.release(token);
                }
                drop(lane);
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
