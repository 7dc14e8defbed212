//! The bytes a purgatory reports holding follow what it holds: they grow
//! with what is parked, by structure, and go back when it is answered.

mod common;

use common::{Journal, Probe, KINDS};
use purgatory::{ManualClock, Purgatory, TimerKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const WORD: usize = std::mem::size_of::<usize>();

fn setup(kind: TimerKind) -> (Purgatory<u32, Probe>, ManualClock, Arc<Journal>) {
    common::manual(kind)
}

#[test]
fn parked_operations_are_counted_where_they_are_and_go_with_their_answers() {
    const N: usize = 10_000;
    let (p, _clock, journal) = setup(TimerKind::Wheel);
    let empty = p.metrics().held_bytes;
    assert_eq!((empty.pending_cells, empty.spare_cells), (0, 0));

    let ready = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..N as u64)
        .map(|id| {
            let probe = Probe::new(id, &ready, Duration::from_secs(30), &journal);
            p.try_complete_else_watch(probe, &[7]).unwrap()
        })
        .collect();
    let parked = p.metrics();
    let held = parked.held_bytes;
    // Each cell holds its operation, so it is at least as large.
    assert_eq!(held.pending_cells % N, 0);
    let cell = held.pending_cells / N;
    assert!(
        cell >= std::mem::size_of::<Probe>() + WORD,
        "{cell} bytes a cell"
    );
    // A word per entry in the key's list; a deadline and a reference per
    // entry in the timeout's lane.
    assert!(
        held.watch_lists >= empty.watch_lists + N * WORD,
        "{held:?} for {N} watched"
    );
    assert!(
        held.timer >= empty.timer + N * 2 * WORD,
        "{held:?} for {N} timed"
    );
    // Chunks, not one allocation per entry: a bounded overhead.
    assert!(
        held.watch_lists <= empty.watch_lists + N * 2 * WORD,
        "{held:?}"
    );
    assert!(held.timer <= empty.timer + N * 3 * WORD, "{held:?}");
    assert_eq!(
        held.total(),
        held.pending_cells + held.spare_cells + held.watch_lists + held.timer
    );

    ready.store(true, Ordering::SeqCst);
    assert_eq!(p.check_and_complete(&7), N);
    drop(handles);
    let answered = p.metrics();
    let after = answered.held_bytes;
    assert_eq!(after.pending_cells, 0);
    // The answered cells are kept for the next submissions, and counted.
    assert!(answered.spare_cells > 0);
    assert_eq!(after.spare_cells, answered.spare_cells * cell);
    // The list left its map; the lane freed its chunks but two of 4 KiB
    // (its tail's, until it moves on, and a spare) and kept its list of
    // them: what stays is the maps' tables and the timer's bookkeeping.
    assert!(
        after.watch_lists <= empty.watch_lists + 64 * WORD,
        "{after:?} after, {empty:?} before"
    );
    assert!(
        after.timer <= empty.timer + 2 * 4096 + 128 * WORD,
        "{after:?} after, {empty:?} before"
    );
}

#[test]
fn a_group_and_the_wheel_are_counted_too() {
    const N: usize = 3_000;
    let (p, clock, journal) = setup(TimerKind::Wheel);
    let empty = p.metrics().held_bytes;
    let ready = Arc::new(AtomicBool::new(false));
    // One key set, shared (a group), and more timeouts than there are
    // lanes: most entries go to the wheel.
    let handles: Vec<_> = (0..N as u64)
        .map(|id| {
            let timeout = Duration::from_millis(10 + id % 1000);
            let probe = Probe::new(id, &ready, timeout, &journal);
            p.try_complete_else_watch(probe, &[1, 2, 3]).unwrap()
        })
        .collect();
    let held = p.metrics().held_bytes;
    assert!(held.watch_lists >= empty.watch_lists + N * WORD, "{held:?}");
    // A wheel entry keeps its deadline and links besides the reference.
    assert!(held.timer >= empty.timer + N * 3 * WORD, "{held:?}");

    clock.advance(Duration::from_secs(2));
    assert_eq!(p.advance_clock(), N);
    drop(handles);
    let after = p.metrics().held_bytes;
    assert_eq!(after.pending_cells, 0);
    assert!(
        after.watch_lists <= empty.watch_lists + 64 * WORD,
        "{after:?}"
    );
    assert!(after.timer <= held.timer, "{after:?} after {held:?}");
}

#[test]
fn the_baseline_counts_the_dead_entries_it_keeps() {
    let (p, _clock, journal) = setup(TimerKind::DelayQueue {
        purge_interval: 1_000_000,
    });
    let ready = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..1000u64)
        .map(|id| {
            let probe = Probe::new(id, &ready, Duration::from_secs(30), &journal);
            p.try_complete_else_watch(probe, &[id as u32 % 4]).unwrap()
        })
        .collect();
    for handle in &handles {
        assert!(handle.force_complete());
    }
    let m = p.metrics();
    assert_eq!(m.held_bytes.pending_cells, 0);
    // Answered, but still in the heap and the lists until a purge.
    assert_eq!(m.held_timer_entries, 1000);
    assert!(m.held_bytes.timer >= 1000 * 2 * WORD, "{:?}", m.held_bytes);
    assert!(
        m.held_bytes.watch_lists >= 1000 * WORD,
        "{:?}",
        m.held_bytes
    );
}

#[test]
fn every_timer_reports_a_total() {
    for kind in KINDS {
        let (p, _clock, _journal) = setup(kind);
        let held = p.metrics().held_bytes;
        assert_eq!(held.total(), held.watch_lists + held.timer);
    }
}
