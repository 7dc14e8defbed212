//! Tests of `watch_list.rs` on one thread (the order of events chosen by
//! the test) and under real threads; the interleavings themselves are
//! model-checked in `tests/loom_watch_list.rs`.

use super::watch_list::{
    group_word, op_word, remove, After, Entry, Owner, Place, Shared, MAX_SLOTS, MIN_SLOTS,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

type Cell = triomphe::Arc<Op>;

struct Op(u32);

struct List(Shared<Op, List, ()>);

impl Owner<Op> for List {
    type Extra = ();
    fn shared(&self) -> &Shared<Op, List, ()> {
        &self.0
    }
}

type TestPlace = Place<Op, List>;

fn list(lazy: bool) -> Arc<List> {
    Arc::new(List(Shared::new((), lazy)))
}

fn op(v: u32) -> Cell {
    triomphe::Arc::new(Op(v))
}

/// Chunks the list has allocated: each holds a reference to it.
fn chunks(list: &Arc<List>) -> usize {
    Arc::strong_count(list) - 1
}

fn push(list: &Arc<List>, cell: &Cell) -> TestPlace {
    let place = list.0.lock().push(list, Entry::Op(Cell::clone(cell)));
    place.expect("an eager list names its entries")
}

/// Removes `cell`'s entry at `place` and does what that leaves to do, as
/// the purgatory does; returns whether the entry was there.
fn take_out(place: TestPlace, cell: &Cell) -> bool {
    let (entry, after) = remove(place, op_word(&**cell));
    match after {
        After::Nothing => {}
        After::Sparse(list, id) => list.0.lock().note_sparse(id),
        After::MaybeEmpty(_) => {}
        After::Free(chunk) => {
            let list = Arc::clone(chunk.list());
            let reference = list.0.lock().free(chunk);
            drop(reference);
        }
    }
    entry.is_some()
}

/// The values of the operations the list holds, sorted.
fn values(list: &Arc<List>) -> Vec<u32> {
    let mut values = Vec::new();
    list.0.lock().walk(|entry| match entry {
        Entry::Op(cell) => values.push(cell.0),
        Entry::Group(_) => panic!("no groups here"),
    });
    values.sort();
    values
}

/// Takes every entry out and lets go of the tail, as a list leaving its
/// map does.
fn close(list: &Arc<List>) -> Vec<u32> {
    let mut removed = Vec::new();
    let references = list.0.lock().take_all(&mut removed);
    drop(references);
    let mut values: Vec<u32> = removed
        .into_iter()
        .map(|entry| match entry {
            Entry::Op(cell) => cell.0,
            Entry::Group(_) => panic!("no groups here"),
        })
        .collect();
    values.sort();
    values
}

#[test]
fn removal_by_place_walk_and_close() {
    let list = list(false);
    let cells: Vec<Cell> = (0..5).map(op).collect();
    let mut places: Vec<Option<TestPlace>> = cells.iter().map(|c| Some(push(&list, c))).collect();
    // A place's address is its entry's slot: what a removal prefetches.
    for (place, cell) in places.iter().zip(&cells) {
        let address = place.as_ref().unwrap().address() as *const AtomicUsize;
        // SAFETY: the place's unit keeps its chunk, and so the slot.
        let word = unsafe { &*address }.load(Ordering::Relaxed);
        assert_eq!(word, op_word(&**cell));
    }
    assert!(take_out(places[1].take().unwrap(), &cells[1]));
    assert_eq!(values(&list), [0, 2, 3, 4]);
    assert_eq!(list.0.lock().len(), 4);
    assert!(!list.0.lock().is_empty());
    // Each cell is referenced by its test's handle and its entry.
    assert_eq!(triomphe::Arc::count(&cells[0]), 2);
    assert_eq!(triomphe::Arc::count(&cells[1]), 1);
    // Taken apart: the entries go, the places keep their units.
    assert_eq!(close(&list), [0, 2, 3, 4]);
    assert!(values(&list).is_empty());
    assert!(chunks(&list) > 0);
    for (i, place) in places.into_iter().enumerate() {
        if let Some(place) = place {
            assert!(!take_out(place, &cells[i]), "taken by the close");
        }
    }
    assert_eq!(chunks(&list), 0, "the last place freed the last chunk");
    assert!(cells.iter().all(|c| triomphe::Arc::count(c) == 1));
}

#[test]
fn a_removal_expects_its_own_reference() {
    let list = list(false);
    let (a, b) = (op(1), op(2));
    let place = push(&list, &a);
    // Another cell's word leaves the entry there, and gives the unit back
    // (as when a cancellation took the entry): the list counts nothing.
    let (entry, after) = remove(place, op_word(&*b));
    assert!(entry.is_none());
    assert!(matches!(after, After::MaybeEmpty(_)));
    assert_eq!(values(&list), [1]);
    let (entry, after) = remove(push(&list, &b), group_word(&list));
    assert!(entry.is_none());
    assert!(matches!(after, After::MaybeEmpty(_)));
    assert_eq!(values(&list), [1, 2]);
    close(&list);
}

#[test]
fn the_last_entry_of_the_tail_says_the_list_may_be_empty() {
    let list = list(false);
    let cell = op(7);
    let place = push(&list, &cell);
    let (entry, after) = remove(place, op_word(&*cell));
    assert!(entry.is_some());
    assert!(matches!(after, After::MaybeEmpty(ref l) if Arc::ptr_eq(l, &list)));
    drop(after);
    assert!(list.0.lock().is_empty());
    close(&list);
    assert_eq!(chunks(&list), 0);
}

#[test]
fn a_lazy_list_names_no_place_and_frees_what_it_takes_out() {
    let list = list(true);
    let cells: Vec<Cell> = (0..3 * MAX_SLOTS as u32).map(op).collect();
    for cell in &cells {
        let place = list.0.lock().push(&list, Entry::Op(Cell::clone(cell)));
        assert!(place.is_none());
    }
    let mut removed = Vec::new();
    let references = list.0.lock().retain(
        |entry| matches!(entry, Entry::Op(c) if c.0 % 2 == 0),
        &mut removed,
    );
    // Chunks it emptied are freed: their references to the list come back.
    assert!(references.is_empty());
    assert_eq!(removed.len(), cells.len() / 2);
    assert_eq!(list.0.lock().len(), cells.len() / 2);
    removed.clear();
    let before = chunks(&list);
    let references = list.0.lock().retain(|_| false, &mut removed);
    assert_eq!(references.len(), before - 1, "every chunk but the tail");
    drop(references);
    assert!(list.0.lock().is_empty());
    // Only the tail is left, and letting go of it frees it.
    assert_eq!(chunks(&list), 1);
    assert!(close(&list).is_empty());
    assert_eq!(chunks(&list), 0);
}

#[test]
fn a_burst_is_given_back_as_it_drains() {
    let list = list(false);
    let first = op(u32::MAX);
    let first_place = push(&list, &first);
    let burst: Vec<Cell> = (0..100_000).map(op).collect();
    let places: Vec<TestPlace> = burst.iter().map(|c| push(&list, c)).collect();
    assert!(list.0.lock().capacity() >= 100_000);
    for (place, cell) in places.into_iter().zip(&burst) {
        assert!(take_out(place, cell));
    }
    // The first entry's chunk, the tail and one spare.
    let kept = list.0.lock().capacity();
    assert!(kept <= MIN_SLOTS + 2 * MAX_SLOTS, "{kept} slots kept");
    assert_eq!(values(&list), [u32::MAX]);
    assert!(take_out(first_place, &first));
    assert!(list.0.lock().is_empty());
    close(&list);
    assert_eq!(chunks(&list), 0);
}

#[test]
fn entries_that_stay_share_chunks() {
    let list = list(false);
    let mut last: Option<(TestPlace, Cell)> = None;
    let mut stayed = Vec::new();
    // One entry in 16 stays; each other goes once the next is in.
    for v in 0..200_000u32 {
        let cell = op(v);
        let place = push(&list, &cell);
        if let Some((previous, previous_cell)) = last.take() {
            take_out(previous, &previous_cell);
        }
        if v % 16 != 0 {
            last = Some((place, cell));
        } else {
            stayed.push((place, cell));
        }
    }
    let held = list.0.lock().len();
    assert!(held >= stayed.len());
    let capacity = list.0.lock().capacity();
    assert!(
        capacity <= 2 * held + 3 * MAX_SLOTS,
        "{capacity} slots for {held} entries"
    );
    for (place, cell) in stayed.into_iter().chain(last) {
        take_out(place, &cell);
    }
    assert!(list.0.lock().is_empty());
    close(&list);
    assert_eq!(chunks(&list), 0);
}

proptest::proptest! {
    /// Against a map from place to value: every place names its value until
    /// removed, walks see exactly what is held, and chunks are freed once
    /// nothing can reach them (the list alone then holds its tail).
    #[test]
    fn behaves_as_a_map_from_place_to_value(
        steps in proptest::collection::vec((0u8..5, 0usize..64), 1..2000)
    ) {
        let list = list(false);
        let mut held: Vec<(TestPlace, Cell)> = Vec::new();
        let mut taken: Vec<(TestPlace, Cell)> = Vec::new();
        let mut next = 0u32;
        for (action, pick) in steps {
            match action {
                0 | 1 => {
                    let cell = op(next);
                    next += 1;
                    held.push((push(&list, &cell), cell));
                }
                2 | 3 if !held.is_empty() => {
                    let (place, cell) = held.swap_remove(pick % held.len());
                    proptest::prop_assert!(take_out(place, &cell));
                }
                4 if !taken.is_empty() => {
                    // A place whose entry a cancellation took.
                    let (place, cell) = taken.swap_remove(pick % taken.len());
                    proptest::prop_assert!(!take_out(place, &cell));
                }
                _ if pick == 0 => {
                    // Taken apart, then used afresh as a new list would be.
                    let values_taken = close(&list);
                    proptest::prop_assert_eq!(values_taken.len(), held.len());
                    taken.append(&mut held);
                }
                _ => {}
            }
            let mut expected: Vec<u32> = held.iter().map(|(_, c)| c.0).collect();
            expected.sort();
            proptest::prop_assert_eq!(values(&list), expected);
            proptest::prop_assert_eq!(list.0.lock().len(), held.len() + taken.len());
        }
        for (place, cell) in held.drain(..) {
            proptest::prop_assert!(take_out(place, &cell));
        }
        for (place, cell) in taken.drain(..) {
            proptest::prop_assert!(!take_out(place, &cell));
        }
        proptest::prop_assert!(list.0.lock().is_empty());
        close(&list);
        proptest::prop_assert_eq!(chunks(&list), 0);
    }
}

#[test]
fn removals_race_inserts_and_walks() {
    // One thread inserts and walks under the lock while another takes its
    // entries out without it: every entry is taken out once, every walk
    // sees live references, and nothing is left.
    const N: u32 = 200_000;
    let list = list(false);
    let (send, receive) = std::sync::mpsc::sync_channel::<(TestPlace, Cell)>(1024);
    let remover = std::thread::spawn(move || {
        let mut removed = 0;
        for (place, cell) in receive {
            assert!(take_out(place, &cell));
            removed += 1;
        }
        removed
    });
    let mut walked = 0usize;
    for v in 0..N {
        let cell = op(v);
        send.send((push(&list, &cell), cell)).unwrap();
        if v % 64 == 0 {
            list.0.lock().walk(|entry| match entry {
                Entry::Op(cell) => {
                    assert!(triomphe::Arc::count(&cell) >= 2);
                    walked += 1;
                }
                Entry::Group(_) => unreachable!(),
            });
        }
    }
    drop(send);
    assert_eq!(remover.join().unwrap(), N);
    assert!(list.0.lock().is_empty());
    assert!(values(&list).is_empty());
    close(&list);
    assert_eq!(chunks(&list), 0);
    assert!(walked > 0);
}

#[test]
#[should_panic(expected = "pushed with another list")]
fn a_push_names_the_list_it_locked() {
    let (a, b) = (list(false), list(false));
    let cell = op(1);
    let _place = a.0.lock().push(&b, Entry::Op(cell));
}
