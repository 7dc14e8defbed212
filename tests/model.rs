//! The purgatory against a model of what Kafka's purgatory promises, on
//! random sequences of everything a broker does to it: submit, make a
//! condition true, check a key, cancel a key, force-complete, reset a
//! timeout, drop a handle, let time pass, shut down.
//!
//! The model is a list of pending operations and a clock in whole
//! milliseconds. After every step the purgatory must have answered exactly
//! the operations the model answered, with the same outcomes, in the same
//! order (checks and cancellations oldest first, expirations by deadline then
//! submission), and report the same counts. Each sequence runs on the timing
//! wheel and on the DelayQueue baseline, under several configurations, with
//! a manual clock so that every run is deterministic.

// The purgatory's own test operation: it records each answer in a journal
// (and checks that `on_expiration` ran before an expiry's `on_complete`).
#[path = "../purgatory/tests/common/mod.rs"]
mod common;

use common::{Journal, Probe};
use proptest::prelude::*;
use request_purgatory::purgatory::{ManualClock, Outcome, Purgatory, TimerKind};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const KEYS: [&str; 4] = ["t-0", "t-1", "t-2", "t-3"];

/// One thing the broker does. Indices pick among the operations that
/// exist at that point (modulo their number), so any sequence is valid.
#[derive(Debug, Clone)]
enum Step {
    /// Keys may repeat: a caller is allowed to name a key twice.
    Submit {
        keys: Vec<usize>,
        timeout_ms: u64,
        ready: bool,
    },
    /// The condition of a pending operation becomes true (nothing is
    /// answered until a check under one of its keys).
    MakeReady(usize),
    Check(usize),
    Cancel(usize),
    /// Through a handle still held, pending or not.
    Force(usize),
    Reset {
        op: usize,
        timeout_ms: u64,
    },
    DropHandle(usize),
    /// The clock moves (possibly by nothing) and the owner expires what is due.
    Advance(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (prop::collection::vec(0..KEYS.len(), 1..4), 0..40u64, prop::bool::weighted(0.2))
            .prop_map(|(keys, timeout_ms, ready)| Step::Submit { keys, timeout_ms, ready }),
        2 => any::<usize>().prop_map(Step::MakeReady),
        2 => (0..KEYS.len()).prop_map(Step::Check),
        1 => (0..KEYS.len()).prop_map(Step::Cancel),
        1 => any::<usize>().prop_map(Step::Force),
        1 => (any::<usize>(), 0..40u64).prop_map(|(op, timeout_ms)| Step::Reset { op, timeout_ms }),
        1 => any::<usize>().prop_map(Step::DropHandle),
        3 => (0..15u64).prop_map(Step::Advance),
    ]
}

/// How the purgatory under test is built.
#[derive(Debug, Clone, Copy)]
struct Config {
    timer: TimerKind,
    shards: usize,
    spare_cells: usize,
}

fn config() -> impl Strategy<Value = Config> {
    (
        prop_oneof![
            Just(TimerKind::Wheel),
            (1..5u64).prop_map(|purge_interval| TimerKind::DelayQueue { purge_interval }),
        ],
        prop_oneof![Just(1usize), Just(2), Just(32)],
        prop_oneof![Just(0usize), Just(1), Just(1024)],
    )
        .prop_map(|(timer, shards, spare_cells)| Config {
            timer,
            shards,
            spare_cells,
        })
}

/// A pending operation, as the model sees it.
struct Pending {
    /// Its distinct keys: a key given twice is watched once.
    keys: Vec<usize>,
    deadline: u64,
    ready: bool,
}

#[derive(Default)]
struct Model {
    now: u64,
    /// By id, which is also submission order.
    pending: BTreeMap<u64, Pending>,
    answers: Vec<(u64, Outcome)>,
}

impl Model {
    /// Answers `ids` (already in the order the purgatory must use).
    fn answer(&mut self, ids: Vec<u64>, outcome: Outcome) -> usize {
        for &id in &ids {
            self.pending.remove(&id);
            self.answers.push((id, outcome));
        }
        ids.len()
    }

    /// The pending operations watched under `key`, oldest first; with
    /// `ready_only`, those whose condition holds.
    fn under(&self, key: usize, ready_only: bool) -> Vec<u64> {
        self.pending
            .iter()
            .filter(|(_, p)| (p.ready || !ready_only) && p.keys.contains(&key))
            .map(|(&id, _)| id)
            .collect()
    }

    fn watched(&self) -> usize {
        self.pending.values().map(|p| p.keys.len()).sum()
    }
}

/// The id a step's `pick` names among `ids` (modulo their number).
fn nth<'a>(ids: impl ExactSizeIterator<Item = &'a u64>, pick: usize) -> Option<u64> {
    let len = ids.len();
    ids.copied().nth(pick % len.max(1))
}

fn run(config: Config, steps: &[Step]) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let purgatory: Purgatory<&'static str, Probe> = Purgatory::builder("model")
        .timer(config.timer)
        .manual(clock.clone())
        .shards(config.shards)
        .spare_cells(config.spare_cells)
        .build()
        .expect("a valid configuration");
    let journal = Arc::new(Journal::default());
    let mut model = Model::default();
    // Every operation's flag, and the handles not dropped yet.
    let mut flags: Vec<Arc<AtomicBool>> = Vec::new();
    let mut handles = BTreeMap::new();

    for (n, step) in steps.iter().enumerate() {
        match step {
            Step::Submit {
                keys,
                timeout_ms,
                ready,
            } => {
                let id = flags.len() as u64;
                let flag = Arc::new(AtomicBool::new(*ready));
                flags.push(Arc::clone(&flag));
                let names: Vec<&'static str> = keys.iter().map(|&k| KEYS[k]).collect();
                let op = Probe::new(id, &flag, Duration::from_millis(*timeout_ms), &journal);
                let handle = purgatory
                    .try_complete_else_watch(op, &names)
                    .map_err(|e| TestCaseError::fail(format!("submit refused: {e}")))?;
                prop_assert_eq!(handle.completed_at_once(), *ready, "step {}", n);
                if *ready {
                    model.answers.push((id, Outcome::Completed));
                } else {
                    model.pending.insert(
                        id,
                        Pending {
                            keys: {
                                let mut distinct = keys.clone();
                                distinct.sort_unstable();
                                distinct.dedup();
                                distinct
                            },
                            deadline: model.now + timeout_ms,
                            ready: false,
                        },
                    );
                }
                handles.insert(id, handle);
            }
            Step::MakeReady(pick) => {
                if let Some(id) = nth(model.pending.keys(), *pick) {
                    flags[id as usize].store(true, Ordering::SeqCst);
                    model.pending.get_mut(&id).unwrap().ready = true;
                }
            }
            Step::Check(key) => {
                let expected = model.answer(model.under(*key, true), Outcome::Completed);
                prop_assert_eq!(
                    purgatory.check_and_complete(&KEYS[*key]),
                    expected,
                    "step {}",
                    n
                );
            }
            Step::Cancel(key) => {
                let expected = model.answer(model.under(*key, false), Outcome::Cancelled);
                prop_assert_eq!(
                    purgatory.cancel_for_key(&KEYS[*key]),
                    expected,
                    "step {}",
                    n
                );
            }
            Step::Force(pick) => {
                if let Some(id) = nth(handles.keys(), *pick) {
                    let pending = model.pending.contains_key(&id);
                    if pending {
                        model.answer(vec![id], Outcome::Completed);
                    }
                    prop_assert_eq!(handles[&id].force_complete(), pending, "step {}", n);
                }
            }
            Step::Reset { op, timeout_ms } => {
                if let Some(id) = nth(handles.keys(), *op) {
                    let now = model.now;
                    let pending = match model.pending.get_mut(&id) {
                        Some(p) => {
                            p.deadline = now + timeout_ms;
                            true
                        }
                        None => false,
                    };
                    let reset = handles[&id].reset_timeout(Duration::from_millis(*timeout_ms));
                    prop_assert_eq!(reset, pending, "step {}", n);
                }
            }
            Step::DropHandle(pick) => {
                if let Some(id) = nth(handles.keys(), *pick) {
                    handles.remove(&id);
                }
            }
            Step::Advance(ms) => {
                model.now += ms;
                clock.advance(Duration::from_millis(*ms));
                let mut due: Vec<(u64, u64)> = model
                    .pending
                    .iter()
                    .filter(|(_, p)| p.deadline <= model.now)
                    .map(|(&id, p)| (p.deadline, id))
                    .collect();
                due.sort_unstable();
                let expected = model.answer(
                    due.into_iter().map(|(_, id)| id).collect(),
                    Outcome::Expired,
                );
                prop_assert_eq!(purgatory.advance_clock(), expected, "step {}", n);
            }
        }
        prop_assert_eq!(
            &journal.outcomes(),
            &model.answers,
            "answers after step {} ({:?})",
            n,
            step
        );
        prop_assert_eq!(purgatory.delayed(), model.pending.len(), "step {}", n);
        prop_assert_eq!(purgatory.watched(), model.watched(), "step {}", n);
        if config.timer == TimerKind::Wheel {
            // Nothing held for answered operations, at any moment.
            let metrics = purgatory.metrics();
            prop_assert_eq!(
                metrics.held_timer_entries,
                model.pending.len(),
                "step {}",
                n
            );
            if model.pending.is_empty() {
                prop_assert_eq!(metrics.held_watch_entries, 0, "step {}", n);
                prop_assert_eq!(purgatory.watched_keys(), 0, "step {}", n);
            }
        }
    }

    // Handles agree with the journal.
    for (id, handle) in &handles {
        let answered = model.answers.iter().find(|(a, _)| a == id).map(|&(_, o)| o);
        prop_assert_eq!(handle.outcome(), answered, "handle of op {}", id);
    }
    let expired = model
        .answers
        .iter()
        .filter(|(_, o)| *o == Outcome::Expired)
        .count();
    prop_assert_eq!(journal.expirations.load(Ordering::SeqCst), expired);

    // Shutdown answers whatever is left, in no promised order.
    let left: Vec<u64> = model.pending.keys().copied().collect();
    purgatory.shutdown();
    let answers = journal.outcomes();
    prop_assert_eq!(&answers[..model.answers.len()], &model.answers[..]);
    let mut at_shutdown: Vec<(u64, Outcome)> = answers[model.answers.len()..].to_vec();
    at_shutdown.sort_unstable_by_key(|&(id, _)| id);
    let expected: Vec<(u64, Outcome)> = left.iter().map(|&id| (id, Outcome::Shutdown)).collect();
    prop_assert_eq!(at_shutdown, expected);
    prop_assert_eq!(purgatory.delayed(), 0);
    prop_assert_eq!(purgatory.watched(), 0);
    for (id, handle) in handles {
        let outcome = handle.wait().outcome;
        let answered = answers.iter().find(|(a, _)| *a == id).map(|&(_, o)| o);
        prop_assert_eq!(Some(outcome), answered, "op {}", id);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn the_purgatory_answers_as_the_model_does(
        config in config(),
        steps in prop::collection::vec(step(), 1..150),
    ) {
        run(config, &steps)?;
    }
}
