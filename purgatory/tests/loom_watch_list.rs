//! Exhaustive interleavings of watch-list entries taken out by completions
//! without the list's lock, racing walks (a check), a list taken apart (a
//! cancellation) and the list moving on to another chunk, all under that
//! lock (`src/unchecked/watch_list.rs`, compiled here against loom's
//! atomics and lock, with two slots a chunk): every reference a walk
//! clones is alive, every entry is taken out once, and every chunk is
//! freed once nothing can reach it, by whoever gives back its last unit.
#![allow(dead_code)]

#[path = "loom_support/sync.rs"]
mod sync;

#[path = "../src/unchecked/watch_list.rs"]
mod watch_list;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use std::sync::Arc;
use watch_list::{op_word, remove, After, Entry, Owner, Place, Shared};

/// An operation that counts its drops in a loom atomic, so that a model
/// sees a clone of a reference already dropped.
struct Op {
    drops: Arc<AtomicUsize>,
}

impl Drop for Op {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

type Cell = triomphe::Arc<Op>;

struct List(Shared<Op, List, ()>);

impl Owner<Op> for List {
    type Extra = ();
    fn shared(&self) -> &Shared<Op, List, ()> {
        &self.0
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

fn op(drops: &Arc<AtomicUsize>) -> Cell {
    triomphe::Arc::new(Op {
        drops: Arc::clone(drops),
    })
}

fn new_list() -> Arc<List> {
    Arc::new(List(Shared::new((), false)))
}

fn push(list: &Arc<List>, cell: &Cell) -> Place<Op, List> {
    let place = list.0.lock().push(list, Entry::Op(Cell::clone(cell)));
    place.unwrap()
}

/// What a completion does (`Watchers::take_out`): takes its entry out
/// without the lock, then does what that left under it. True if it found
/// the entry.
fn complete(place: Place<Op, List>, cell: Cell) -> bool {
    let (entry, after) = remove(place, op_word(&*cell));
    let found = entry.is_some();
    drop(entry);
    drop(cell);
    match after {
        After::Nothing | After::MaybeEmpty(_) => {}
        After::Sparse(list, id) => list.0.lock().note_sparse(id),
        After::Free(chunk) => {
            let list = Arc::clone(chunk.list());
            let reference = list.0.lock().free(chunk);
            drop(reference);
        }
    }
    found
}

/// Takes every entry out and lets go of the tail: a list leaving its map.
fn close(list: &Arc<List>) -> usize {
    let mut taken = Vec::new();
    let references = list.0.lock().take_all(&mut taken);
    drop(references);
    taken.len()
}

/// Chunks allocated: each holds a reference to its list.
fn chunks(list: &Arc<List>) -> usize {
    Arc::strong_count(list) - 1
}

#[test]
fn a_walk_clones_only_live_references() {
    model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let list = new_list();
        let cell = op(&drops);
        let place = push(&list, &cell);
        let completer = thread::spawn(move || complete(place, cell));
        let mut seen = 0;
        list.0.lock().walk(|entry| {
            assert_eq!(drops.load(Ordering::SeqCst), 0, "a clone of a dropped cell");
            seen += 1;
            drop(entry);
        });
        assert!(completer.join().unwrap());
        assert!(seen <= 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        close(&list);
        assert_eq!(chunks(&list), 0);
    });
}

#[test]
fn a_close_racing_completions_takes_each_entry_once_and_frees_every_chunk() {
    model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let list = new_list();
        // A full chunk and the tail's.
        let cells: Vec<Cell> = (0..3).map(|_| op(&drops)).collect();
        let places: Vec<_> = cells.iter().map(|c| push(&list, c)).collect();
        let mut work: Vec<_> = places.into_iter().zip(cells).collect();
        let last = work.pop().unwrap();
        let completer = thread::spawn(move || {
            work.into_iter()
                .map(|(place, cell)| complete(place, cell))
                .filter(|found| *found)
                .count()
        });
        let closed = close(&list);
        let completed = completer.join().unwrap();
        assert!(!complete(last.0, last.1), "the close took it");
        assert_eq!(closed + completed, 3, "each entry once");
        assert_eq!(drops.load(Ordering::SeqCst), 3);
        assert_eq!(chunks(&list), 0);
    });
}

#[test]
fn completions_racing_the_tail_moving_on_free_every_chunk_once() {
    model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let list = new_list();
        // A full chunk; both its entries go while the next push seals it
        // and makes (or refills) another.
        let cells: Vec<Cell> = (0..2).map(|_| op(&drops)).collect();
        let places: Vec<_> = cells.iter().map(|c| push(&list, c)).collect();
        let work: Vec<_> = places.into_iter().zip(cells).collect();
        let completer =
            thread::spawn(move || work.into_iter().all(|(place, cell)| complete(place, cell)));
        let late = op(&drops);
        let late_place = push(&list, &late);
        assert!(completer.join().unwrap());
        assert!(complete(late_place, late));
        assert!(list.0.lock().is_empty());
        assert_eq!(drops.load(Ordering::SeqCst), 3);
        // Only the tail is left, and the close lets go of it.
        assert_eq!(chunks(&list), 1);
        close(&list);
        assert_eq!(chunks(&list), 0);
    });
}

#[test]
fn a_sparse_chunk_refilled_while_its_last_entry_goes() {
    model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let list = new_list();
        // Chunk 0 holds a and b; c fills the tail's first slot. a goes, so
        // chunk 0 is half full: noted to be filled again.
        let cells: Vec<Cell> = (0..3).map(|_| op(&drops)).collect();
        let mut places: Vec<_> = cells.iter().map(|c| push(&list, c)).collect();
        let mut cells = cells;
        let (c_place, c) = (places.pop().unwrap(), cells.pop().unwrap());
        let (b_place, b) = (places.pop().unwrap(), cells.pop().unwrap());
        let (a_place, a) = (places.pop().unwrap(), cells.pop().unwrap());
        assert!(complete(a_place, a));
        // b goes while d and e fill the tail and move on: to chunk 0 again
        // if b is still there, else to a new one.
        let completer = thread::spawn(move || complete(b_place, b));
        let (d, e) = (op(&drops), op(&drops));
        let d_place = push(&list, &d);
        let e_place = push(&list, &e);
        assert!(completer.join().unwrap());
        assert!(complete(c_place, c));
        assert!(complete(d_place, d));
        assert!(complete(e_place, e));
        assert!(list.0.lock().is_empty());
        assert_eq!(drops.load(Ordering::SeqCst), 5);
        close(&list);
        assert_eq!(chunks(&list), 0);
    });
}
