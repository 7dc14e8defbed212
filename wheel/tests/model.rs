//! Model-based test: random insert / cancel / reschedule / advance sequences
//! against a `BTreeMap` reference that fires everything with a deadline at or
//! before the time it is advanced to.

mod common;

use common::Xorshift;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use std::collections::{BTreeMap, HashSet};
use timing_wheel::{TimerId, TimingWheel};

#[derive(Debug, Clone)]
enum Op {
    Insert(Deadline),
    Cancel(usize),
    Reschedule(usize, Deadline),
    Advance(Step),
    Drain,
}

/// A deadline relative to the time at which the op runs.
#[derive(Debug, Clone)]
enum Deadline {
    Ahead(u64),
    Behind(u64),
    Absolute(u64),
}

#[derive(Debug, Clone)]
enum Step {
    By(u64),
    To(u64),
}

fn deadline() -> impl Strategy<Value = Deadline> {
    prop_oneof![
        4 => (0u64..200).prop_map(Deadline::Ahead),
        3 => (0u64..300_000).prop_map(Deadline::Ahead),
        1 => any::<u64>().prop_map(|x| Deadline::Ahead(x >> (x % 64))),
        1 => (0u64..1000).prop_map(Deadline::Behind),
        1 => prop_oneof![Just(u64::MAX), Just(u64::MAX - 1), any::<u64>()].prop_map(Deadline::Absolute),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..10).prop_map(Step::By),
        3 => (0u64..5_000).prop_map(Step::By),
        1 => (0u64..100_000_000).prop_map(Step::By),
        1 => any::<u64>().prop_map(|x| Step::By(x >> (x % 64))),
        1 => any::<u64>().prop_map(Step::To),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => deadline().prop_map(Op::Insert),
        2 => any::<usize>().prop_map(Op::Cancel),
        2 => (any::<usize>(), deadline()).prop_map(|(i, d)| Op::Reschedule(i, d)),
        3 => step().prop_map(Op::Advance),
        1 => Just(Op::Drain),
    ]
}

fn resolve(d: &Deadline, now: u64) -> u64 {
    match *d {
        Deadline::Ahead(x) => now.saturating_add(x),
        Deadline::Behind(x) => now.saturating_sub(x),
        Deadline::Absolute(x) => x,
    }
}

fn run(ops: Vec<Op>, start: u64) -> Result<(), TestCaseError> {
    let mut wheel = TimingWheel::starting_at(start);
    let mut model: BTreeMap<TimerId, (u64, u32)> = BTreeMap::new();
    // Every id ever issued, live or stale, so cancels hit both.
    let mut issued: Vec<TimerId> = Vec::new();
    let mut ever: HashSet<TimerId> = HashSet::new();
    let mut now = start;
    let mut next_value = 0u32;

    for op in ops {
        match op {
            Op::Insert(d) => {
                let deadline = resolve(&d, now);
                let id = wheel.insert(deadline, next_value).unwrap();
                prop_assert!(ever.insert(id), "id {id:?} issued twice");
                model.insert(id, (deadline, next_value));
                issued.push(id);
                next_value += 1;
            }
            Op::Cancel(i) if !issued.is_empty() => {
                let id = issued[i % issued.len()];
                let expected = model.remove(&id).map(|(_, v)| v);
                prop_assert_eq!(wheel.cancel(id), expected);
            }
            Op::Reschedule(i, d) if !issued.is_empty() => {
                let id = issued[i % issued.len()];
                let deadline = resolve(&d, now);
                let live = model.get_mut(&id).map(|e| e.0 = deadline).is_some();
                prop_assert_eq!(wheel.reschedule(id, deadline), live);
            }
            Op::Advance(s) => {
                let target = match s {
                    Step::By(x) => now.saturating_add(x),
                    Step::To(x) => x,
                };
                let mut fired = Vec::new();
                let count = wheel.advance(target, |id, v| fired.push((id, v)));
                prop_assert_eq!(count, fired.len());
                // The wheel's time never goes back.
                now = now.max(target);
                let mut expected: Vec<(TimerId, u32)> = model
                    .iter()
                    .filter(|(_, &(d, _))| d <= now)
                    .map(|(&id, &(_, v))| (id, v))
                    .collect();
                for (id, _) in &expected {
                    model.remove(id);
                }
                let unique: HashSet<_> = fired.iter().map(|&(id, _)| id).collect();
                prop_assert_eq!(unique.len(), fired.len(), "an entry fired twice");
                fired.sort();
                expected.sort();
                // Same set: nothing early (all fired are due), nothing late
                // (all due fired), each once.
                prop_assert_eq!(fired, expected);
            }
            Op::Drain => {
                let mut drained: Vec<_> = wheel.drain().collect();
                let mut expected: Vec<_> = model.iter().map(|(&id, &(_, v))| (id, v)).collect();
                model.clear();
                drained.sort();
                expected.sort();
                prop_assert_eq!(drained, expected);
            }
            Op::Cancel(_) | Op::Reschedule(..) => {}
        }
        prop_assert_eq!(wheel.len(), model.len());
        prop_assert_eq!(wheel.now(), now);
        for (&id, &(d, v)) in model.iter().take(8) {
            prop_assert_eq!(wheel.deadline(id), Some(d));
            prop_assert_eq!(wheel.get(id), Some(&v));
        }
        // The wheel must wake no later than the earliest deadline.
        match (wheel.next_expiration(), model.values().map(|e| e.0).min()) {
            (None, None) => {}
            (Some(next), Some(earliest)) => {
                prop_assert!(
                    next <= earliest.max(now),
                    "sleeps past {earliest} until {next}"
                );
            }
            (next, earliest) => prop_assert!(false, "next {next:?}, earliest {earliest:?}"),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn behaves_like_a_sorted_map(ops in prop::collection::vec(op(), 1..300)) {
        run(ops, 0)?;
    }

    #[test]
    fn behaves_like_a_sorted_map_after_running_for_ages(
        ops in prop::collection::vec(op(), 1..200),
        start in prop_oneof![Just(1u64 << 36), Just(u64::MAX - 100_000), any::<u64>()],
    ) {
        run(ops, start)?;
    }
}

#[test]
fn a_long_random_run_against_the_model() {
    // One long sequence with a large population, beyond what shrinking-sized
    // cases reach: many entries per bucket, cascades from several levels.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let ops = prop::collection::vec(op(), 20_000..20_001)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    run(ops, 0).unwrap();
}

#[test]
fn bursts_that_drain_to_a_few_survivors() {
    // Each round a burst of 15,000 entries (15 slab pages), then cancels
    // of all but its first 300 and a few scattered ones: sweeps free the
    // pages left empty under live entries, the next burst refills the
    // holes, and every id of a freed page must stay stale. Then stale
    // cancels, reschedules and expiries.
    let mut rand = Xorshift(0x9E37_79B9_7F4A_7C15);
    const BURST: usize = 15_000;
    let mut ops = Vec::new();
    for round in 0..4 {
        for _ in 0..BURST {
            ops.push(Op::Insert(Deadline::Ahead(rand.below(300_000))));
        }
        // `Cancel(i)` picks the i-th id ever issued: this round's start at
        // `round * BURST`.
        for k in 300..BURST {
            if rand.below(1_000) != 0 {
                ops.push(Op::Cancel(round * BURST + k));
            }
        }
        for _ in 0..2_000 {
            ops.push(Op::Cancel(rand.below(1 << 40) as usize));
        }
        for _ in 0..200 {
            ops.push(Op::Reschedule(
                rand.below(1 << 40) as usize,
                Deadline::Ahead(rand.below(1_000)),
            ));
        }
        ops.push(Op::Advance(Step::By(rand.below(200_000))));
    }
    ops.push(Op::Advance(Step::By(300_000)));
    run(ops, 0).unwrap();
}
