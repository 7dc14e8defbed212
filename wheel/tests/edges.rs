//! Every operation of the wheel at its edges.

mod common;

use common::Xorshift;
use timing_wheel::{TimerId, TimingWheel};

fn fire_all<T>(wheel: &mut TimingWheel<T>, now: u64) -> Vec<T> {
    let mut out = Vec::new();
    wheel.advance(now, |_, v| out.push(v));
    out
}

#[test]
fn deadline_zero_at_time_zero_fires_on_the_next_advance() {
    let mut wheel = TimingWheel::new();
    let id = wheel.insert(0, "a").unwrap();
    assert_eq!(wheel.len(), 1);
    assert_eq!(wheel.deadline(id), Some(0));
    assert_eq!(wheel.next_expiration(), Some(0));
    assert_eq!(fire_all(&mut wheel, 0), ["a"]);
    assert!(wheel.is_empty());
    assert_eq!(wheel.next_expiration(), None);
}

#[test]
fn deadline_equal_to_now_and_in_the_past_fire_on_the_next_advance_even_without_time_moving() {
    let mut wheel = TimingWheel::new();
    wheel.advance(1_000, |_, _: &str| unreachable!());
    wheel.insert(1_000, "now").unwrap();
    wheel.insert(10, "past").unwrap();
    let cancelled = wheel.insert(5, "past, cancelled").unwrap();
    assert_eq!(wheel.cancel(cancelled), Some("past, cancelled"));
    let mut fired = fire_all(&mut wheel, 1_000);
    fired.sort();
    assert_eq!(fired, ["now", "past"]);
    assert!(wheel.is_empty());
}

#[test]
fn an_advance_backwards_does_not_move_time_but_fires_the_due_list() {
    let mut wheel = TimingWheel::new();
    wheel.advance(500, |_, _: u32| {});
    wheel.insert(600, 1).unwrap();
    wheel.insert(1, 2).unwrap();
    assert_eq!(fire_all(&mut wheel, 100), [2]);
    assert_eq!(wheel.now(), 500);
    assert_eq!(fire_all(&mut wheel, 599), Vec::<u32>::new());
    assert_eq!(fire_all(&mut wheel, 600), [1]);
}

#[test]
fn entries_on_every_level_boundary_fire_exactly_at_their_tick() {
    let mut deadlines: Vec<u64> = Vec::new();
    for level in 1..=10u32 {
        let boundary = 1u64 << (6 * level);
        deadlines.extend([boundary - 1, boundary, boundary + 1]);
    }
    deadlines.extend([u64::MAX - 1, u64::MAX, 1 << 63]);
    let mut wheel = TimingWheel::new();
    for &d in &deadlines {
        wheel.insert(d, d).unwrap();
    }
    deadlines.sort();
    for &d in &deadlines {
        assert_eq!(
            fire_all(&mut wheel, d - 1),
            Vec::<u64>::new(),
            "early for {d}"
        );
        assert_eq!(fire_all(&mut wheel, d), [d], "late for {d}");
    }
    assert!(wheel.is_empty());
}

#[test]
fn u64_max_deadline_is_accepted_and_fires_only_at_u64_max() {
    let mut wheel = TimingWheel::new();
    let id = wheel.insert(u64::MAX, ()).unwrap();
    assert_eq!(fire_all(&mut wheel, u64::MAX - 1).len(), 0);
    assert_eq!(wheel.deadline(id), Some(u64::MAX));
    assert_eq!(fire_all(&mut wheel, u64::MAX).len(), 1);
    // The clock at its end still takes entries: they are due at once.
    wheel.insert(u64::MAX, ()).unwrap();
    assert_eq!(fire_all(&mut wheel, u64::MAX).len(), 1);
}

#[test]
fn a_wheel_that_has_run_for_ages_neither_overflows_nor_fires_early() {
    // tokio-util's DelayQueue panics past 2^36 ms; ours takes any start.
    for start in [1u64 << 36, 1 << 40, 1 << 62, u64::MAX - 10_000] {
        let mut wheel = TimingWheel::starting_at(start);
        wheel.insert(start + 5, "soon").unwrap();
        wheel.insert(start.saturating_add(5_000), "later").unwrap();
        assert!(fire_all(&mut wheel, start + 4).is_empty());
        assert_eq!(fire_all(&mut wheel, start + 5), ["soon"]);
        assert!(fire_all(&mut wheel, start + 4_999).is_empty());
        assert_eq!(fire_all(&mut wheel, start + 5_000), ["later"]);
    }
}

#[test]
fn cancel_returns_the_value_once_and_leaves_others_alone() {
    let mut wheel = TimingWheel::new();
    let a = wheel.insert(100, "a").unwrap();
    let b = wheel.insert(100, "b").unwrap();
    let c = wheel.insert(100, "c").unwrap();
    assert_eq!(wheel.cancel(a), Some("a"));
    assert_eq!(wheel.cancel(a), None);
    assert_eq!(wheel.get(b), Some(&"b"));
    assert_eq!(wheel.get(c), Some(&"c"));
    assert_eq!(wheel.len(), 2);
    let mut fired = fire_all(&mut wheel, 100);
    fired.sort();
    assert_eq!(fired, ["b", "c"]);
}

#[test]
fn a_stale_id_never_touches_the_entry_that_reuses_its_slot() {
    let mut wheel = TimingWheel::new();
    let old = wheel.insert(50, "old").unwrap();
    wheel.cancel(old);
    let new = wheel.insert(60, "new").unwrap();
    assert_ne!(old, new);
    assert_eq!(wheel.cancel(old), None);
    assert!(!wheel.reschedule(old, 10));
    assert_eq!(wheel.get(old), None);
    assert_eq!(wheel.deadline(new), Some(60));
    assert_eq!(wheel.cancel(new), Some("new"));
    // Ids of fired entries are stale too.
    let fired = wheel.insert(1, "fired").unwrap();
    fire_all(&mut wheel, 1);
    let reused = wheel.insert(5, "reused").unwrap();
    assert_eq!(wheel.cancel(fired), None);
    assert_eq!(wheel.get(reused), Some(&"reused"));
    // And ids that never came from the wheel.
    assert_eq!(wheel.cancel(TimerId::from_raw(u64::MAX)), None);
    assert_eq!(wheel.cancel(TimerId::from_raw(12345 << 32 | 7)), None);
}

#[test]
fn reschedule_later_and_earlier_across_levels() {
    let mut wheel = TimingWheel::new();
    let id = wheel.insert(10, "x").unwrap();
    // Later, from level 0 to level 3.
    assert!(wheel.reschedule(id, 300_000));
    assert!(fire_all(&mut wheel, 299_999).is_empty());
    // Earlier again, from level 3 down to level 0 of the new time.
    assert!(wheel.reschedule(id, 300_001));
    assert!(wheel.reschedule(id, 299_999 + 3));
    assert!(fire_all(&mut wheel, 300_001).is_empty());
    assert_eq!(fire_all(&mut wheel, 300_002), ["x"]);
    assert!(!wheel.reschedule(id, 400_000), "fired ids are stale");
}

#[test]
fn reschedule_into_the_past_fires_on_the_next_advance_and_keeps_the_id() {
    let mut wheel = TimingWheel::new();
    let id = wheel.insert(5_000, 7).unwrap();
    wheel.advance(100, |_, _| {});
    assert!(wheel.reschedule(id, 50));
    assert_eq!(wheel.deadline(id), Some(50));
    let mut ids = Vec::new();
    wheel.advance(100, |fired, v| ids.push((fired, v)));
    assert_eq!(ids, [(id, 7)]);
}

#[test]
fn heartbeats_keep_pushing_a_session_back_without_new_ids() {
    let mut wheel = TimingWheel::new();
    let session = wheel.insert(10_000, "member").unwrap();
    for beat in 1..=100u64 {
        let now = beat * 3_000;
        assert!(fire_all(&mut wheel, now).is_empty());
        assert!(wheel.reschedule(session, now + 10_000));
    }
    assert!(fire_all(&mut wheel, 309_999).is_empty());
    assert_eq!(fire_all(&mut wheel, 310_000), ["member"]);
}

#[test]
fn cancel_and_reschedule_entries_that_a_cascade_moved() {
    let mut wheel = TimingWheel::new();
    // All in level 1's bucket [128, 192) at time 0 (the next window's
    // entries, [64, 128), go straight to level 0).
    let fires = wheel.insert(134, "fires").unwrap();
    let moved = wheel.insert(164, "moved").unwrap();
    let also = wheel.insert(184, "also moved").unwrap();
    // The bucket comes due at 128; advancing to 134 fires one and moves two down.
    assert_eq!(fire_all(&mut wheel, 134), ["fires"]);
    assert_eq!(wheel.stats().cascaded, 2);
    assert_eq!(wheel.cancel(fires), None);
    assert_eq!(wheel.cancel(moved), Some("moved"));
    assert!(wheel.reschedule(also, 135));
    assert_eq!(fire_all(&mut wheel, 135), ["also moved"]);
    assert!(wheel.is_empty());
}

#[test]
fn a_large_bucket_moves_down_over_the_window_before_it_rather_than_at_once() {
    let mut wheel = TimingWheel::new();
    // 64 entries on each tick of [128, 192): all in one level-1 bucket.
    let ids: Vec<(TimerId, u64)> = (0..4096u64)
        .map(|i| {
            let deadline = 128 + i % 64;
            (wheel.insert(deadline, deadline).unwrap(), deadline)
        })
        .collect();
    // Window [64, 128) runs tick by tick: each advance moves about its share.
    let mut before = wheel.stats().cascaded;
    for now in 64..128 {
        assert!(fire_all(&mut wheel, now).is_empty());
        let moved = wheel.stats().cascaded - before;
        assert!((60..=70).contains(&moved), "{moved} moved at {now}");
        before = wheel.stats().cascaded;
        // Entries keep working wherever they are at the moment.
        if now % 16 == 0 {
            let (id, deadline) = ids[now as usize];
            assert_eq!(wheel.cancel(id), Some(deadline));
        }
    }
    assert_eq!(wheel.stats().cascaded, 4096 - 4);
    // Nothing more moves when the bucket's window comes; each tick fires its own.
    let visited = wheel.stats().buckets_visited;
    for now in 128..192 {
        let fired = fire_all(&mut wheel, now);
        assert!(fired.iter().all(|&d| d == now), "{fired:?} at {now}");
    }
    assert_eq!(wheel.stats().cascaded, 4096 - 4);
    assert_eq!(wheel.stats().buckets_visited - visited, 64);
    assert!(wheel.is_empty());
}

#[test]
fn what_is_left_of_a_bucket_moved_ahead_moves_when_its_window_comes() {
    let mut wheel = TimingWheel::new();
    for i in 0..640u64 {
        wheel.insert(128 + i % 64, i).unwrap();
    }
    // A few advances in the window before: part of the bucket moves down.
    fire_all(&mut wheel, 64);
    fire_all(&mut wheel, 65);
    let early = wheel.stats().cascaded;
    assert!(early > 0 && early < 640, "{early}");
    // One jump past the whole window: everything fires, the rest straight
    // from the bucket.
    assert_eq!(fire_all(&mut wheel, 191).len(), 640);
    assert_eq!(wheel.stats().cascaded, early);
    assert!(wheel.is_empty());
}

#[test]
fn a_window_that_opens_a_level_1_span_is_not_moved_ahead() {
    let mut wheel = TimingWheel::new();
    // [4096, 4160) is the first window of the next level-1 span: its
    // entries are on level 2 until the span begins.
    for i in 0..64u64 {
        wheel.insert(4096 + i, i).unwrap();
    }
    fire_all(&mut wheel, 4032);
    fire_all(&mut wheel, 4095);
    assert_eq!(wheel.stats().cascaded, 0);
    assert_eq!(fire_all(&mut wheel, 4096), [0]);
    assert_eq!(wheel.stats().cascaded, 63);
    assert_eq!(fire_all(&mut wheel, 4159).len(), 63);
}

#[test]
fn idle_time_is_skipped_without_visiting_empty_buckets() {
    let mut wheel = TimingWheel::new();
    let far = 1_000_000_000_000u64; // 31 years of milliseconds
    wheel.insert(far, ()).unwrap();
    // A trillion ticks pass; only the entry's bucket on each level it moves
    // down through is visited, never an empty one.
    assert_eq!(fire_all(&mut wheel, far - 1).len(), 0);
    assert_eq!(fire_all(&mut wheel, far).len(), 1);
    let visited = wheel.stats().buckets_visited;
    assert!(visited <= 11, "visited {visited} buckets");
    assert_eq!(wheel.stats().cascaded, visited - 1);
    // An empty wheel moves a trillion more ticks without visiting anything.
    wheel.advance(2 * far, |_, _| {});
    assert_eq!(wheel.stats().buckets_visited, visited);
}

#[test]
fn a_big_jump_visits_only_occupied_buckets() {
    let mut wheel = TimingWheel::new();
    for i in 0..100u64 {
        wheel.insert(i * 10_000_000, i).unwrap();
    }
    let fired = fire_all(&mut wheel, u64::MAX);
    assert_eq!(fired.len(), 100);
    // Each entry's bucket, plus at most one bucket per level on its way down.
    assert!(wheel.stats().buckets_visited <= 100 * 11);
}

#[test]
fn next_expiration_tells_how_long_to_sleep() {
    let mut wheel = TimingWheel::new();
    assert_eq!(wheel.next_expiration(), None);
    wheel.insert(40, 'a').unwrap();
    assert_eq!(wheel.next_expiration(), Some(40));
    wheel.insert(5_000, 'b').unwrap();
    assert_eq!(wheel.next_expiration(), Some(40));
    wheel.advance(40, |_, _| {});
    // 'b' sits in level 2's bucket starting at 4096: the wheel must wake
    // then to move it down, to level 1's bucket [4992, 5056), then to the
    // exact tick.
    assert_eq!(wheel.next_expiration(), Some(4_096));
    wheel.advance(4_096, |_, _| unreachable!());
    assert_eq!(wheel.next_expiration(), Some(4_992));
    wheel.advance(4_992, |_, _| unreachable!());
    assert_eq!(wheel.next_expiration(), Some(5_000));
    wheel.insert(4_000, 'c').unwrap(); // already due
    assert_eq!(wheel.next_expiration(), Some(4_992));
}

#[test]
fn next_expiration_never_passes_the_earliest_deadline() {
    let mut wheel = TimingWheel::new();
    let mut x = 12345u64;
    for _ in 0..10_000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        wheel.insert(x >> 40, ()).unwrap();
    }
    let mut now = 0;
    while let Some(next) = wheel.next_expiration() {
        assert!(next >= now);
        now = next;
        wheel.advance(now, |_, _| {});
    }
    assert!(wheel.is_empty());
}

#[test]
fn drain_hands_back_everything_once() {
    let mut wheel = TimingWheel::new();
    let ids: Vec<_> = [0u64, 5, 500, 50_000, u64::MAX]
        .iter()
        .map(|&d| wheel.insert(d, d).unwrap())
        .collect();
    wheel.cancel(ids[2]);
    let mut drained: Vec<_> = wheel.drain().collect();
    drained.sort_by_key(|&(_, v)| v);
    assert_eq!(
        drained,
        vec![
            (ids[0], 0),
            (ids[1], 5),
            (ids[3], 50_000),
            (ids[4], u64::MAX)
        ]
    );
    assert!(wheel.is_empty());
    assert_eq!(wheel.next_expiration(), None);
    assert!(ids.iter().all(|&id| wheel.cancel(id).is_none()));
    assert_eq!(wheel.advance(u64::MAX, |_, _| {}), 0);
}

#[test]
fn memory_is_given_back_once_empty() {
    let mut wheel = TimingWheel::new();
    let empty = wheel.allocated_bytes();
    // A million entries: enough pages that the page table itself (16 bytes
    // a page) would exceed the bound below if it were kept.
    let ids: Vec<_> = (0..1_000_000u64)
        .map(|i| wheel.insert(1 + i % 30_000, i).unwrap())
        .collect();
    assert!(wheel.allocated_bytes() > 1_000_000 * 32);
    for id in ids {
        wheel.cancel(id);
    }
    // One page of entries stays, so a wheel hovering near empty does not churn.
    let held = wheel.allocated_bytes() - empty;
    assert!(held <= 1024 * 48, "{held} bytes held after cancelling all");
    // Old ids stay stale across the release.
    let id = wheel.insert(5, 5).unwrap();
    assert_eq!(fire_all(&mut wheel, 5), [5]);
    assert_eq!(wheel.cancel(id), None);
}

#[test]
fn memory_per_entry() {
    for n in [1_000u64, 100_000, 1_000_000] {
        let mut wheel = TimingWheel::new();
        let empty = wheel.allocated_bytes();
        let mut x = 7u64;
        for i in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            wheel.insert(1 + (x >> 33) % 30_000, i).unwrap();
        }
        let per_entry = (wheel.allocated_bytes() - empty) as f64 / n as f64;
        println!("pending {n}: {per_entry:.1} bytes per entry");
        // 32 bytes of entry + 4 of bucket index + the spare capacity of pages
        // and bucket vectors.
        assert!(per_entry < 48.0, "{per_entry} bytes per entry at {n}");
    }
}

#[test]
fn addresses_locate_a_pending_entry_and_only_while_it_is_pending() {
    let mut wheel = TimingWheel::new();
    let a = wheel.insert(100, 'a').unwrap();
    let b = wheel.insert(100, 'b').unwrap();
    let [slot_a, place_a] = wheel.addresses(a).unwrap();
    let [slot_b, place_b] = wheel.addresses(b).unwrap();
    assert_ne!(slot_a, slot_b);
    // Neighbours in one bucket: consecutive 4-byte places.
    assert_eq!(place_b as usize - place_a as usize, 4);
    // A reschedule keeps the slot and moves the place to another bucket.
    assert!(wheel.reschedule(a, 5_000));
    let [slot_again, place_again] = wheel.addresses(a).unwrap();
    assert_eq!(slot_again, slot_a);
    assert_ne!(place_again, place_a);
    // Entries in the due list are located too.
    wheel.advance(200, |_, _| {});
    let late = wheel.insert(150, 'c').unwrap();
    assert!(wheel.addresses(late).is_some());
    assert_eq!(wheel.cancel(a), Some('a'));
    assert_eq!(wheel.addresses(a), None, "stale after cancel");
    assert_eq!(wheel.addresses(b), None, "stale after firing");
}

#[test]
fn a_burst_is_given_back_while_one_of_it_is_still_pending() {
    let mut wheel = TimingWheel::new();
    let empty = wheel.allocated_bytes();
    let n = 1_000_000u64;
    let ids: Vec<_> = (0..n)
        .map(|i| wheel.insert(1 + i % 30_000, i).unwrap())
        .collect();
    let peak = wheel.allocated_bytes();
    // One entry from the middle of the burst outlives it: its page stays.
    let kept = 600_000;
    for (i, &id) in ids.iter().enumerate() {
        if i != kept {
            assert_eq!(wheel.cancel(id), Some(i as u64));
        }
    }
    let held = wheel.allocated_bytes() - empty;
    println!("peak {peak} bytes, held {held} bytes with one entry pending");
    assert!(held < 256 * 1024, "{held} of {peak} bytes held");
    // The freed pages' ids stay stale, also once their slots are reused.
    let again: Vec<_> = (0..n)
        .map(|i| wheel.insert(40_000, n + i).unwrap())
        .collect();
    for (i, &id) in ids.iter().enumerate() {
        if i != kept {
            assert_eq!(wheel.cancel(id), None, "stale id {i}");
        }
    }
    assert_eq!(fire_all(&mut wheel, 30_000), [kept as u64]);
    assert_eq!(wheel.cancel(ids[kept]), None);
    assert_eq!(fire_all(&mut wheel, 40_000).len(), n as usize);
    assert!(again.iter().all(|&id| wheel.cancel(id).is_none()));
}

#[test]
fn every_value_is_dropped_once_whichever_way_it_leaves() {
    use std::rc::Rc;
    let value = Rc::new(());
    {
        let mut wheel = TimingWheel::new();
        // Enough entries for several pages, so that a sweep and a page
        // release run too.
        let ids: Vec<_> = (0..5_000u64)
            .map(|i| wheel.insert(1 + i % 300, Rc::clone(&value)).unwrap())
            .collect();
        assert_eq!(Rc::strong_count(&value), 5_001);
        for id in &ids[..4_000] {
            drop(wheel.cancel(*id));
        }
        assert_eq!(Rc::strong_count(&value), 1_001);
        wheel.reschedule(ids[4_000], 10_000);
        assert_eq!(wheel.advance(150, |_, v| drop(v)), 499);
        assert_eq!(Rc::strong_count(&value), 502);
        assert!(wheel.get(ids[4_000]).is_some());
        // The rest stay pending until the wheel itself is dropped.
    }
    assert_eq!(Rc::strong_count(&value), 1);
}

#[test]
fn advance_timed_tells_each_entrys_own_deadline_wherever_it_waited() {
    let mut wheel = TimingWheel::new();
    wheel.advance(100, |_, _: u64| {});
    // In the due list (already past), on level 0, and high enough to
    // cascade down before it fires.
    let deadlines = [3, 100, 101, 164, 5_000, 300_000, 1 << 40];
    for d in deadlines {
        wheel.insert(d, d).unwrap();
    }
    let mut told = Vec::new();
    for now in [100, 4_999, 5_000, 1 << 41] {
        wheel.advance_timed(now, |deadline, _, value| {
            assert!(deadline <= now);
            told.push((deadline, value));
        });
    }
    told.sort_unstable();
    assert_eq!(told, deadlines.map(|d| (d, d)));
}

#[test]
fn bucket_buffers_follow_the_buckets_in_use_not_each_buckets_peak() {
    // A steady load: every tick 32 entries due 100-199 ticks later, so each
    // level-1 bucket (64 ticks wide) fills to about 2,000 entries in its
    // turn, and three laps of the level go by.
    let mut wheel = TimingWheel::new();
    let empty = wheel.allocated_bytes();
    let mut fired = 0u64;
    for t in 0..3 * 4096u64 {
        for i in 0..32u64 {
            wheel.insert(t + 100 + (t * 32 + i) % 100, i).unwrap();
        }
        fired += wheel.advance(t, |_, _| {}) as u64;
    }
    assert!(fired > 0);
    let held = wheel.allocated_bytes() - empty;
    let per_pending = held as f64 / wheel.len() as f64;
    println!(
        "{held} bytes for {} pending ({per_pending:.1} each)",
        wheel.len()
    );
    // The entries (32 bytes each, in 32 KB pages) and the buffers of the
    // buckets filling now; a buffer kept by each of the level's 64 buckets
    // would add 8 KB each, about 100 bytes per pending entry.
    assert!(per_pending < 64.0, "{per_pending} bytes per pending entry");
}

#[test]
fn pages_a_slow_spell_took_go_back_once_the_load_is_steady_again() {
    // A purgatory's pattern: each tick new entries due 1 to 200 ticks
    // ahead, a share of pending ones cancelled (completed early), the rest
    // fired. For a while the load doubles, as when the thread that answers
    // runs late; then it is steady again and the population turns over.
    let mut wheel = TimingWheel::new();
    let mut rand = Xorshift(0x2545_F491_4F6C_DD1D);
    let mut pending: Vec<TimerId> = Vec::new();
    let mut now = 0;
    let mut run = |wheel: &mut TimingWheel<u64>, ticks: u64, per_tick: u64| {
        for _ in 0..ticks {
            for _ in 0..per_tick {
                pending.push(wheel.insert(now + 1 + rand.below(200), now).unwrap());
            }
            for _ in 0..per_tick / 4 {
                let i = rand.below(pending.len() as u64) as usize;
                wheel.cancel(pending.swap_remove(i));
            }
            now += 1;
            wheel.advance(now, |_, _| {});
            if pending.len() > 4 * wheel.len() {
                pending.retain(|&id| wheel.deadline(id).is_some());
            }
        }
    };
    run(&mut wheel, 600, 300);
    let steady = wheel.allocated_bytes();
    run(&mut wheel, 600, 600);
    let spell = wheel.allocated_bytes();
    run(&mut wheel, 1_200, 300);
    let after = wheel.allocated_bytes();
    println!("steady {steady} bytes, slow spell {spell}, steady again {after}");
    assert!(spell > steady * 3 / 2, "the spell took {spell} bytes");
    assert!(
        after < steady * 13 / 10,
        "{after} bytes held again after {steady} before the spell"
    );
}
