//! Every method and outcome, driven by a manual clock, on both timers.

mod common;

use common::{Journal, Probe, KINDS};
use purgatory::{
    Clock, ConfigError, Driver, ManualClock, Outcome, Purgatory, SubmitError, TimerKind,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

fn setup(kind: TimerKind) -> (Purgatory<&'static str, Probe>, ManualClock, Arc<Journal>) {
    common::manual(kind)
}

fn flag(up: bool) -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(up))
}

fn assert_empty(p: &Purgatory<&'static str, Probe>) {
    assert_eq!(p.watched(), 0);
    assert_eq!(p.delayed(), 0);
    // The baseline keeps completed entries (and so their keys) until a purge.
    if p.timer_kind() == TimerKind::Wheel {
        assert_eq!(p.watched_keys(), 0);
        assert_eq!(p.metrics().held_watch_entries, 0);
        assert_eq!(p.metrics().held_timer_entries, 0);
    }
}

#[test]
fn an_operation_whose_condition_holds_completes_at_once_without_being_watched() {
    for kind in KINDS {
        let (p, _clock, journal) = setup(kind);
        let handle = p
            .try_complete_else_watch(Probe::new(1, &flag(true), SEC, &journal), &["t-0"])
            .unwrap();
        assert!(handle.completed_at_once());
        assert_eq!(handle.outcome(), Some(Outcome::Completed));
        assert_eq!(journal.outcomes(), [(1, Outcome::Completed)]);
        assert_empty(&p);
        assert_eq!(p.metrics().held_timer_entries, 0);
        assert_eq!(handle.wait().outcome, Outcome::Completed);
    }
}

#[test]
fn check_and_complete_completes_what_now_holds_and_leaves_the_rest() {
    for kind in KINDS {
        let (p, _clock, journal) = setup(kind);
        let (a, b) = (flag(false), flag(false));
        let ha = p
            .try_complete_else_watch(Probe::new(1, &a, SEC, &journal), &["t-0", "t-1"])
            .unwrap();
        let hb = p
            .try_complete_else_watch(Probe::new(2, &b, SEC, &journal), &["t-1"])
            .unwrap();
        assert!(!ha.completed_at_once());
        assert_eq!((p.watched(), p.delayed(), p.watched_keys()), (3, 2, 2));

        assert_eq!(p.check_and_complete(&"t-1"), 0);
        a.store(true, Ordering::SeqCst);
        assert_eq!(p.check_and_complete(&"t-0"), 1);
        assert_eq!(journal.outcomes(), [(1, Outcome::Completed)]);
        // Gone from both its lists and from the timer at once (the
        // baseline leaves its dead entry in "t-0" until a walk or a purge).
        assert_eq!((p.watched(), p.delayed()), (1, 1));
        if kind == TimerKind::Wheel {
            assert_eq!(p.watched_keys(), 1);
        }
        assert_eq!(p.check_and_complete(&"t-0"), 0);
        assert_eq!(p.check_and_complete(&"no such key"), 0);

        b.store(true, Ordering::SeqCst);
        assert_eq!(p.check_and_complete(&"t-1"), 1);
        assert_empty(&p);
        assert_eq!(hb.wait().outcome, Outcome::Completed);
        let m = p.metrics();
        assert_eq!(
            (m.completed, m.expired, m.cancelled, m.shutdown),
            (2, 0, 0, 0)
        );
    }
}

#[test]
fn the_wheel_holds_nothing_for_completed_operations() {
    let (p, _clock, journal) = setup(TimerKind::Wheel);
    let ready = flag(false);
    for id in 0..100 {
        p.try_complete_else_watch(
            Probe::new(id, &ready, SEC, &journal),
            &["hot", "t-1", "t-2"],
        )
        .unwrap();
    }
    ready.store(true, Ordering::SeqCst);
    assert_eq!(p.check_and_complete(&"hot"), 100);
    let m = p.metrics();
    assert_eq!((m.held_watch_entries, m.held_timer_entries), (0, 0));
    assert_empty(&p);
}

#[test]
fn the_baseline_holds_completed_operations_until_they_surface_or_a_purge() {
    let (p, clock, journal) = setup(TimerKind::DelayQueue {
        purge_interval: 1000,
    });
    let ready = flag(false);
    let handles: Vec<_> = (0..10)
        .map(|id| {
            p.try_complete_else_watch(Probe::new(id, &ready, SEC, &journal), &["a", "b"])
                .unwrap()
        })
        .collect();
    for h in &handles {
        assert!(h.force_complete());
    }
    assert_empty(&p);
    let m = p.metrics();
    // Kafka's old design: dead entries linger in the heap and both lists.
    assert_eq!((m.held_watch_entries, m.held_timer_entries), (20, 10));
    // A walk of list "a" drops its dead entries; "b" keeps them.
    p.check_and_complete(&"a");
    assert_eq!(p.metrics().held_watch_entries, 10);
    // The heap's entries go when they surface.
    clock.advance(SEC);
    assert_eq!(p.advance_clock(), 0);
    assert_eq!(p.metrics().held_timer_entries, 0);
    assert_eq!(journal.outcomes().len(), 10);
}

#[test]
fn the_baseline_purges_every_purge_interval_completions() {
    let (p, _clock, journal) = setup(TimerKind::DelayQueue { purge_interval: 5 });
    let ready = flag(false);
    let handles: Vec<_> = (0..9)
        .map(|id| {
            p.try_complete_else_watch(Probe::new(id, &ready, SEC, &journal), &["a"])
                .unwrap()
        })
        .collect();
    for h in &handles[..5] {
        h.force_complete();
    }
    // The fifth completion purged all five.
    assert_eq!(p.metrics().held_watch_entries, 4);
    assert_eq!(p.metrics().held_timer_entries, 4);
    for h in &handles[5..] {
        h.force_complete();
    }
    assert_eq!(p.metrics().held_watch_entries, 4);
}

#[test]
fn stragglers_among_early_completions_expire_on_time_and_each_once() {
    // A burst under one timeout, most of it answered early: the timer moves
    // the stragglers out of their thinned-out lane chunks (to the wheel),
    // which must change nothing a user sees.
    let (p, clock, journal) = setup(TimerKind::Wheel);
    let timeout = Duration::from_millis(200);
    let handles: Vec<_> = (0..2_000)
        .map(|id| {
            let probe = Probe::new(id, &flag(false), timeout, &journal);
            p.try_complete_else_watch(probe, &["hot", "t-1"]).unwrap()
        })
        .collect();
    let stays = |id: u64| id % 50 == 7;
    for (id, h) in (0u64..).zip(&handles) {
        if !stays(id) {
            assert!(h.force_complete());
        }
    }
    assert_eq!(p.delayed(), 40);
    assert_eq!(p.metrics().held_timer_entries, 40);
    // One straggler answered after the move, one pushed back.
    assert!(handles[7].force_complete());
    assert!(handles[57].reset_timeout(Duration::from_millis(300)));
    clock.advance(Duration::from_millis(199));
    assert_eq!(p.advance_clock(), 0, "none early");
    clock.advance(Duration::from_millis(1));
    assert_eq!(p.advance_clock(), 38);
    clock.advance(Duration::from_millis(100));
    assert_eq!(p.advance_clock(), 1);
    let outcomes = journal.outcomes();
    assert_eq!(outcomes.len(), 2_000, "each answered once");
    for (id, outcome) in outcomes {
        let expired = stays(id) && id != 7;
        assert_eq!(outcome == Outcome::Expired, expired, "{id}");
    }
    assert_empty(&p);
}

#[test]
fn operations_expire_at_their_deadline_and_not_before() {
    for kind in KINDS {
        let (p, clock, journal) = setup(kind);
        let h = p
            .try_complete_else_watch(
                Probe::new(7, &flag(false), Duration::from_millis(200), &journal),
                &["t-0"],
            )
            .unwrap();
        clock.advance(Duration::from_millis(199));
        assert_eq!(p.advance_clock(), 0);
        assert_eq!(p.delayed(), 1);
        clock.advance(Duration::from_millis(1));
        assert_eq!(p.advance_clock(), 1);
        assert_eq!(journal.outcomes(), [(7, Outcome::Expired)]);
        assert_eq!(journal.expirations.load(Ordering::SeqCst), 1);
        assert_eq!(h.wait().outcome, Outcome::Expired);
        assert_empty(&p);
        assert_eq!(p.metrics().expired, 1);
    }
}

#[test]
fn next_expiration_tells_a_manual_driver_when_to_come_back() {
    for kind in KINDS {
        let (p, clock, journal) = setup(kind);
        assert_eq!(p.next_expiration(), None);
        let start = clock.now();
        p.try_complete_else_watch(
            Probe::new(1, &flag(false), Duration::from_millis(30), &journal),
            &["k"],
        )
        .unwrap();
        let next = p.next_expiration().unwrap();
        assert!(next <= start + Duration::from_millis(30));
        assert!(next > start);
        clock.advance_to(start + Duration::from_millis(30));
        assert_eq!(p.advance_clock(), 1);
        assert_eq!(p.next_expiration(), None);
    }
}

#[test]
fn force_complete_answers_once_and_unlinks_at_once() {
    for kind in KINDS {
        let (p, clock, journal) = setup(kind);
        let h = p
            .try_complete_else_watch(Probe::new(3, &flag(false), SEC, &journal), &["a", "b", "c"])
            .unwrap();
        assert!(h.force_complete());
        assert!(!h.force_complete());
        assert_empty(&p);
        clock.advance(2 * SEC);
        assert_eq!(p.advance_clock(), 0, "a completed op must not expire");
        assert_eq!(p.cancel_for_key(&"a"), 0);
        assert_eq!(journal.outcomes(), [(3, Outcome::Completed)]);
        assert_eq!(h.outcome(), Some(Outcome::Completed));
    }
}

#[test]
fn cancel_for_key_answers_every_operation_under_it_as_cancelled() {
    for kind in KINDS {
        let (p, _clock, journal) = setup(kind);
        let f = flag(false);
        p.try_complete_else_watch(Probe::new(1, &f, SEC, &journal), &["moved", "stays"])
            .unwrap();
        p.try_complete_else_watch(Probe::new(2, &f, SEC, &journal), &["moved"])
            .unwrap();
        p.try_complete_else_watch(Probe::new(3, &f, SEC, &journal), &["stays"])
            .unwrap();
        assert_eq!(p.cancel_for_key(&"moved"), 2);
        let mut outcomes = journal.outcomes();
        outcomes.sort_by_key(|&(id, _)| id);
        assert_eq!(outcomes, [(1, Outcome::Cancelled), (2, Outcome::Cancelled)]);
        // Op 1 also left "stays"; op 3 is untouched.
        assert_eq!((p.watched(), p.delayed(), p.watched_keys()), (1, 1, 1));
        assert_eq!(p.cancel_for_key(&"moved"), 0);
        // The key can be watched again afterwards.
        p.try_complete_else_watch(Probe::new(4, &f, SEC, &journal), &["moved"])
            .unwrap();
        f.store(true, Ordering::SeqCst);
        assert_eq!(p.check_and_complete(&"moved"), 1);
        assert_eq!(p.check_and_complete(&"stays"), 1);
        assert_empty(&p);
        assert_eq!(p.metrics().cancelled, 2);
    }
}

#[test]
fn a_cancelled_operation_does_not_disturb_a_new_list_under_the_same_key() {
    let (p, _clock, journal) = setup(TimerKind::Wheel);
    let f = flag(false);
    let old = p
        .try_complete_else_watch(Probe::new(1, &f, SEC, &journal), &["k", "other"])
        .unwrap();
    // Take the key's list away without answering op 1 yet: cancel another key
    // path is not available, so use cancel on "k" after re-watching below.
    assert_eq!(p.cancel_for_key(&"k"), 1);
    assert_eq!(old.outcome(), Some(Outcome::Cancelled));
    let new = p
        .try_complete_else_watch(Probe::new(2, &f, SEC, &journal), &["k"])
        .unwrap();
    assert_eq!(p.watched(), 1);
    assert!(new.force_complete());
    assert_empty(&p);
}

#[test]
fn shutdown_answers_everything_pending_and_refuses_what_comes_after() {
    for kind in KINDS {
        let (p, _clock, journal) = setup(kind);
        let f = flag(false);
        let handles: Vec<_> = (0..5)
            .map(|id| {
                p.try_complete_else_watch(Probe::new(id, &f, SEC, &journal), &["a", "b"])
                    .unwrap()
            })
            .collect();
        p.shutdown();
        assert_empty(&p);
        for h in handles {
            assert_eq!(h.wait().outcome, Outcome::Shutdown);
        }
        assert_eq!(p.metrics().shutdown, 5);
        let refused = p.try_complete_else_watch(Probe::new(9, &f, SEC, &journal), &["a"]);
        match refused {
            Err(SubmitError::ShutDown(op)) => assert_eq!(op.id, 9),
            other => panic!("expected ShutDown, got {other:?}"),
        }
        assert_eq!(p.check_and_complete(&"a"), 0);
        assert_eq!(p.advance_clock(), 0);
        p.shutdown(); // idempotent
        assert_eq!(journal.outcomes().len(), 5);
    }
}

#[test]
fn an_empty_key_list_is_refused_and_the_operation_handed_back() {
    let (p, _clock, journal) = setup(TimerKind::Wheel);
    match p.try_complete_else_watch(Probe::new(5, &flag(true), SEC, &journal), &[]) {
        Err(e @ SubmitError::NoKeys(_)) => {
            assert!(e.to_string().contains("at least one key"));
            assert_eq!(e.into_operation().id, 5);
        }
        other => panic!("expected NoKeys, got {other:?}"),
    }
    assert!(
        journal.outcomes().is_empty(),
        "nothing may be called on a refused op"
    );
    assert_empty(&p);
}

#[test]
fn a_zero_timeout_expires_on_the_next_advance_and_a_huge_one_never_overflows() {
    for kind in KINDS {
        let (p, clock, journal) = setup(kind);
        let f = flag(false);
        let zero = p
            .try_complete_else_watch(Probe::new(1, &f, Duration::ZERO, &journal), &["k"])
            .unwrap();
        let huge = p
            .try_complete_else_watch(Probe::new(2, &f, Duration::MAX, &journal), &["k"])
            .unwrap();
        assert_eq!(p.advance_clock(), 1);
        assert_eq!(zero.outcome(), Some(Outcome::Expired));
        clock.advance(Duration::from_secs(86_400 * 365 * 100));
        assert_eq!(p.advance_clock(), 0);
        assert!(p.next_expiration().is_some());
        assert!(!huge.is_completed());
        f.store(true, Ordering::SeqCst);
        assert_eq!(p.check_and_complete(&"k"), 1);
        assert_eq!(huge.wait().outcome, Outcome::Completed);
        assert_empty(&p);
    }
}

#[test]
fn reset_timeout_pushes_a_session_back() {
    for kind in KINDS {
        let (p, clock, journal) = setup(kind);
        let session = p
            .try_complete_else_watch(
                Probe::new(1, &flag(false), Duration::from_millis(100), &journal),
                &["member-1"],
            )
            .unwrap();
        for _ in 0..10 {
            clock.advance(Duration::from_millis(90));
            assert_eq!(p.advance_clock(), 0);
            assert!(session.reset_timeout(Duration::from_millis(100)));
        }
        clock.advance(Duration::from_millis(99));
        assert_eq!(p.advance_clock(), 0);
        clock.advance(Duration::from_millis(1));
        assert_eq!(p.advance_clock(), 1);
        assert!(!session.reset_timeout(Duration::from_millis(100)));
        assert_eq!(session.wait().outcome, Outcome::Expired);
        assert_empty(&p);
        assert_eq!(p.metrics().held_timer_entries, 0);
    }
}

#[test]
fn panics_in_operation_code_are_caught_counted_and_the_rest_still_answered() {
    for kind in KINDS {
        let (p, clock, journal) = setup(kind);
        let f = flag(false);
        let mut bad_check = Probe::new(1, &f, SEC, &journal);
        bad_check.panic_in_check = true;
        let mut bad_complete = Probe::new(2, &f, SEC, &journal);
        bad_complete.panic_in_complete = true;
        let h1 = p.try_complete_else_watch(bad_check, &["k"]).unwrap();
        let h2 = p.try_complete_else_watch(bad_complete, &["k"]).unwrap();
        let h3 = p
            .try_complete_else_watch(Probe::new(3, &f, SEC, &journal), &["k"])
            .unwrap();
        f.store(true, Ordering::SeqCst);
        // Op 1's check panics (counted as "not yet"); ops 2 and 3 complete,
        // op 2's callback panicking after it recorded its outcome.
        assert_eq!(p.check_and_complete(&"k"), 2);
        assert!(
            p.metrics().panics >= 3,
            "two submissions' checks and one completion"
        );
        assert_eq!(h2.wait().outcome, Outcome::Completed);
        assert_eq!(h3.wait().outcome, Outcome::Completed);
        // The timeout still answers the op whose check keeps panicking.
        clock.advance(SEC);
        assert_eq!(p.advance_clock(), 1);
        assert_eq!(h1.wait().outcome, Outcome::Expired);
        assert_empty(&p);
    }
}

#[test]
fn a_panicking_timeout_counts_as_zero_and_the_operation_is_still_answered() {
    for kind in KINDS {
        let (p, clock, journal) = setup(kind);
        let mut op = Probe::new(1, &flag(false), SEC, &journal);
        op.panic_in_timeout = true;
        // The submitter gets its handle, not the panic.
        let h = p.try_complete_else_watch(op, &["k"]).unwrap();
        assert_eq!(p.metrics().panics, 1);
        assert_eq!(p.delayed(), 1);
        clock.advance(Duration::from_millis(1));
        assert_eq!(p.advance_clock(), 1);
        assert_eq!(h.wait().outcome, Outcome::Expired);
        assert_eq!(journal.outcomes(), vec![(1, Outcome::Expired)]);
        assert_empty(&p);
    }
}

#[test]
fn a_panicking_drop_is_caught_where_the_purgatory_drops_the_operation() {
    for kind in KINDS {
        let (p, clock, journal) = setup(kind);
        // No handle kept: the purgatory drops each operation once answered.
        let submit = |ids: std::ops::Range<u64>, ready: &Arc<AtomicBool>| {
            for id in ids {
                let mut op = Probe::new(id, ready, SEC, &journal);
                op.panic_in_drop = true;
                drop(p.try_complete_else_watch(op, &["k"]).unwrap());
            }
        };
        let f = flag(false);
        submit(0..3, &f);
        f.store(true, Ordering::SeqCst);
        // Each drop panics on this thread, inside the purgatory's call,
        // which goes on to answer the rest and returns.
        assert_eq!(p.check_and_complete(&"k"), 3);
        // The same with nothing but the timer left to answer them.
        submit(3..6, &flag(false));
        clock.advance(SEC);
        assert_eq!(p.advance_clock(), 3);
        assert_eq!(journal.outcomes().len(), 6);
        assert_empty(&p);
    }
}

#[test]
fn boxed_operations_are_forwarded_every_call() {
    for kind in KINDS {
        let clock = ManualClock::new();
        let p: Purgatory<&'static str, Box<dyn purgatory::DelayedOperation>> =
            Purgatory::builder("boxed")
                .timer(kind)
                .manual(clock.clone())
                .build()
                .unwrap();
        let journal = Arc::new(Journal::default());
        let f = flag(false);
        // A probe checks in `on_complete` that `on_expiration` ran first
        // exactly when it expired; a failed check would count as a panic.
        let h1 = p
            .try_complete_else_watch(Box::new(Probe::new(1, &f, SEC, &journal)), &["k"])
            .unwrap();
        let h2 = p
            .try_complete_else_watch(Box::new(Probe::new(2, &f, 2 * SEC, &journal)), &["k"])
            .unwrap();
        clock.advance(SEC);
        assert_eq!(p.advance_clock(), 1, "the first box's timeout was read");
        f.store(true, Ordering::SeqCst);
        assert_eq!(p.check_and_complete(&"k"), 1);
        assert_eq!(h1.wait().outcome, Outcome::Expired);
        assert_eq!(h2.wait().outcome, Outcome::Completed);
        assert_eq!(
            journal.outcomes(),
            vec![(1, Outcome::Expired), (2, Outcome::Completed)]
        );
        assert_eq!(journal.expirations.load(Ordering::SeqCst), 1);
        assert_eq!(p.metrics().panics, 0);
    }
}

/// Calls back into the purgatory from its own callbacks.
struct Reentrant {
    purgatory: Arc<Purgatory<&'static str, Reentrant>>,
    ready: Arc<AtomicBool>,
    answered: Arc<AtomicBool>,
}

impl purgatory::DelayedOperation for Reentrant {
    fn timeout(&self) -> Duration {
        SEC
    }
    fn try_complete(&mut self) -> bool {
        // Checking our own key from inside our own check must not deadlock.
        self.purgatory.check_and_complete(&"own");
        self.ready.load(Ordering::SeqCst)
    }
    fn on_complete(&mut self, _: Outcome) {
        // Completing others (and touching our own key) from a callback too.
        self.purgatory.check_and_complete(&"other");
        self.purgatory.cancel_for_key(&"own");
        self.answered.store(true, Ordering::SeqCst);
    }
}

#[test]
fn callbacks_may_call_back_into_the_purgatory() {
    let clock = ManualClock::new();
    let p: Arc<Purgatory<&'static str, Reentrant>> = Arc::new(
        Purgatory::builder("reentrant")
            .manual(clock.clone())
            .build()
            .unwrap(),
    );
    let ready = flag(false);
    let other_ready = flag(false);
    let (a1, a2) = (flag(false), flag(false));
    p.try_complete_else_watch(
        Reentrant {
            purgatory: Arc::clone(&p),
            ready: Arc::clone(&ready),
            answered: Arc::clone(&a1),
        },
        &["own", "shared"],
    )
    .unwrap();
    p.try_complete_else_watch(
        Reentrant {
            purgatory: Arc::clone(&p),
            ready: Arc::clone(&other_ready),
            answered: Arc::clone(&a2),
        },
        &["other", "shared"],
    )
    .unwrap();
    ready.store(true, Ordering::SeqCst);
    other_ready.store(true, Ordering::SeqCst);
    assert_eq!(p.check_and_complete(&"own"), 1);
    assert!(a1.load(Ordering::SeqCst));
    assert!(
        a2.load(Ordering::SeqCst),
        "completed by the first op's callback"
    );
    assert_eq!((p.watched(), p.delayed()), (0, 0));
    p.shutdown();
}

#[test]
fn impossible_configurations_are_refused_with_a_typed_error() {
    let refused = |b: purgatory::PurgatoryBuilder<&'static str, Probe>| b.build().err();
    let builder = || Purgatory::<&'static str, Probe>::builder("bad");
    assert_eq!(refused(builder().shards(0)), Some(ConfigError::ZeroShards));
    assert_eq!(
        refused(builder().tick(Duration::ZERO)),
        Some(ConfigError::ZeroTick)
    );
    assert_eq!(
        refused(builder().driver(Driver::Thread {
            expiration_threads: 0
        })),
        Some(ConfigError::ZeroExpirationThreads)
    );
    assert_eq!(
        refused(builder().timer(TimerKind::DelayQueue { purge_interval: 0 })),
        Some(ConfigError::ZeroPurgeInterval)
    );
}

#[test]
fn any_shard_count_from_one_up_works() {
    for shards in [1, 3, 64, usize::MAX] {
        let journal = Arc::new(Journal::default());
        let p = Purgatory::builder("shards")
            .shards(shards)
            .manual(ManualClock::new())
            .build()
            .unwrap();
        let f = flag(false);
        p.try_complete_else_watch(Probe::new(1, &f, SEC, &journal), &["a", "b"])
            .unwrap();
        f.store(true, Ordering::SeqCst);
        assert_eq!(p.check_and_complete(&"b"), 1, "{shards} shards");
        assert_empty(&p);
    }
}

#[test]
fn an_operation_watched_under_many_keys_leaves_every_list() {
    // More keys than the operation stores inline.
    let keys = ["a", "b", "c", "d", "e", "f", "g"];
    for kind in KINDS {
        let (p, _clock, journal) = setup(kind);
        let f = flag(false);
        let h = p
            .try_complete_else_watch(Probe::new(1, &f, SEC, &journal), &keys)
            .unwrap();
        let g = p
            .try_complete_else_watch(Probe::new(2, &flag(false), SEC, &journal), &["g"])
            .unwrap();
        assert_eq!((p.watched(), p.watched_keys()), (8, 7));
        assert!(h.force_complete());
        assert_eq!((p.watched(), p.delayed()), (1, 1));
        if kind == TimerKind::Wheel {
            assert_eq!(p.watched_keys(), 1, "only g's list is left");
            assert_eq!(p.metrics().held_watch_entries, 1);
        }
        assert!(g.force_complete());
        assert_empty(&p);
    }
}

#[test]
fn answered_cells_are_reused_and_given_back_on_shutdown() {
    // Only the wheel: the baseline's heap and lists keep their references
    // to answered operations until a purge, so a handle is never the last.
    let (p, clock, journal) = setup(TimerKind::Wheel);
    let f = flag(false);
    let submit = |id| {
        p.try_complete_else_watch(Probe::new(id, &f, SEC, &journal), &["a"])
            .unwrap()
    };
    // Answered and its handle dropped last: kept, with nothing of the user's.
    let (one, two) = (submit(1), submit(2));
    assert!(one.force_complete());
    drop(one.wait());
    assert_eq!(p.metrics().spare_cells, 1);
    // Dropped while pending: the purgatory still holds it, nothing kept.
    drop(two);
    assert_eq!(p.metrics().spare_cells, 1);
    // The next submission takes the spare cell and starts afresh.
    let three = submit(3);
    assert_eq!(p.metrics().spare_cells, 0);
    assert!(!three.is_completed());
    assert_eq!(three.outcome(), None);
    f.store(true, Ordering::SeqCst);
    assert_eq!(p.check_and_complete(&"a"), 2);
    // The purgatory held the last reference to 2 (answered through its
    // callback, as a broker does): kept too.
    assert_eq!(p.metrics().spare_cells, 1);
    assert_eq!(three.wait().outcome, Outcome::Completed);
    clock.advance(2 * SEC);
    assert_eq!(p.advance_clock(), 0);
    let mut seen = journal.outcomes();
    seen.sort_by_key(|(id, _)| *id);
    assert_eq!(
        seen,
        [
            (1, Outcome::Completed),
            (2, Outcome::Completed),
            (3, Outcome::Completed)
        ]
    );
    assert_eq!(p.metrics().spare_cells, 2);
    p.shutdown();
    assert_eq!(p.metrics().spare_cells, 0);
    assert_empty(&p);
}

#[test]
fn expired_and_cancelled_cells_without_a_handle_are_reused() {
    let (p, clock, journal) = setup(TimerKind::Wheel);
    let never = flag(false);
    let submit = |id, timeout, key| {
        p.try_complete_else_watch(Probe::new(id, &never, timeout, &journal), &[key])
            .unwrap()
    };
    for id in 0..3 {
        drop(submit(id, SEC, "a"));
    }
    let kept = submit(3, SEC, "b");
    drop(submit(4, 3 * SEC, "b"));
    assert_eq!(p.metrics().spare_cells, 0);
    clock.advance(2 * SEC);
    assert_eq!(p.advance_clock(), 4);
    // The three whose handles were gone; 3's handle still holds its cell.
    assert_eq!(p.metrics().spare_cells, 3);
    assert_eq!(p.cancel_for_key(&"b"), 1);
    assert_eq!(p.metrics().spare_cells, 4);
    assert_eq!(kept.wait().outcome, Outcome::Expired);
    assert_eq!(p.metrics().spare_cells, 5);
    p.shutdown();
    assert_eq!(p.metrics().spare_cells, 0);
    assert_empty(&p);
}

#[test]
fn operations_whose_handles_were_dropped_are_answered_through_their_callbacks() {
    for kind in KINDS {
        let (p, clock, journal) = setup(kind);
        let ready = flag(false);
        let submit = |id, timeout, key| {
            drop(
                p.try_complete_else_watch(Probe::new(id, &ready, timeout, &journal), &[key])
                    .unwrap(),
            );
        };
        submit(1, 3 * SEC, "checked");
        submit(2, SEC, "expires");
        submit(3, 3 * SEC, "cancelled");
        // Answered by the submission itself, with no handle left to read it.
        ready.store(true, Ordering::Relaxed);
        submit(4, SEC, "at-once");
        assert_eq!(p.check_and_complete(&"checked"), 1);
        ready.store(false, Ordering::Relaxed);
        clock.advance(2 * SEC);
        assert_eq!(p.advance_clock(), 1);
        assert_eq!(p.cancel_for_key(&"cancelled"), 1);
        let mut outcomes = journal.outcomes();
        outcomes.sort_by_key(|&(id, _)| id);
        assert_eq!(
            outcomes,
            [
                (1, Outcome::Completed),
                (2, Outcome::Expired),
                (3, Outcome::Cancelled),
                (4, Outcome::Completed)
            ]
        );
        let m = p.metrics();
        assert_eq!((m.completed, m.expired, m.cancelled), (2, 1, 1));
        assert_eq!(p.delayed(), 0);
        assert_empty(&p);
    }
}

#[test]
fn keeping_no_spare_cells_is_allowed() {
    let journal = Arc::new(Journal::default());
    let p: Purgatory<&'static str, Probe> = Purgatory::builder("no-spares")
        .manual(ManualClock::new())
        .spare_cells(0)
        .build()
        .unwrap();
    let h = p
        .try_complete_else_watch(Probe::new(1, &flag(false), SEC, &journal), &["a"])
        .unwrap();
    assert!(h.force_complete());
    drop(h);
    assert_eq!(p.metrics().spare_cells, 0);
    assert_eq!(journal.outcomes(), [(1, Outcome::Completed)]);
}

#[test]
fn operations_with_the_same_keys_share_one_group_reached_from_each_key() {
    let (p, _clock, journal) = setup(TimerKind::Wheel);
    let (early, late) = (flag(false), flag(false));
    let keys = ["t-0", "t-1", "t-2"];
    for id in 0..10 {
        let ready = if id < 4 { &early } else { &late };
        p.try_complete_else_watch(Probe::new(id, ready, SEC, &journal), &keys)
            .unwrap();
    }
    // The set was new to the first operation, which has an entry in each
    // key's list; the other nine share a group, which has one.
    assert_eq!(p.metrics().held_watch_entries, 3 + 9 + 3);
    assert_eq!((p.watched(), p.watched_keys()), (30, 3));
    early.store(true, Ordering::SeqCst);
    // Any of the keys reaches the group's operations, oldest first.
    assert_eq!(p.check_and_complete(&"t-2"), 4);
    let ids: Vec<u64> = journal.outcomes().iter().map(|&(id, _)| id).collect();
    assert_eq!(ids, [0, 1, 2, 3]);
    // Operations 1 to 3 left the group, operation 0 its three keys.
    assert_eq!(p.metrics().held_watch_entries, 6 + 3);
    late.store(true, Ordering::SeqCst);
    assert_eq!(p.check_and_complete(&"t-0"), 6);
    // The last operation out took the group out of every key's list.
    assert_empty(&p);
}

#[test]
fn cancelling_a_key_takes_its_groups_apart_and_later_operations_get_a_new_one() {
    let (p, _clock, journal) = setup(TimerKind::Wheel);
    let f = flag(false);
    let keys = ["moved", "stays"];
    // The first is watched under each key, the second in a group.
    let old: Vec<_> = (0..2)
        .map(|id| {
            p.try_complete_else_watch(Probe::new(id, &f, SEC, &journal), &keys)
                .unwrap()
        })
        .collect();
    assert_eq!(p.metrics().held_watch_entries, 2 + 1 + 2);
    let single = p
        .try_complete_else_watch(Probe::new(2, &f, SEC, &journal), &["stays"])
        .unwrap();
    assert_eq!(p.cancel_for_key(&"moved"), 2);
    for h in &old {
        assert_eq!(h.outcome(), Some(Outcome::Cancelled));
    }
    // The group's entry left "stays"; the single operation is still there.
    assert_eq!(p.metrics().held_watch_entries, 1);
    assert_eq!(p.watched_keys(), 1);
    // The same key set again: a new group, reachable from both keys.
    let new = p
        .try_complete_else_watch(Probe::new(3, &f, SEC, &journal), &keys)
        .unwrap();
    assert_eq!(p.metrics().held_watch_entries, 1 + 1 + 2);
    f.store(true, Ordering::SeqCst);
    assert_eq!(p.check_and_complete(&"moved"), 1);
    assert_eq!(new.outcome(), Some(Outcome::Completed));
    assert_eq!(p.check_and_complete(&"stays"), 1);
    assert_eq!(single.outcome(), Some(Outcome::Completed));
    assert_empty(&p);
}

#[test]
fn a_group_emptied_and_gone_is_not_joined_again_and_key_sets_take_turns() {
    let (p, _clock, journal) = setup(TimerKind::Wheel);
    let f = flag(false);
    let (a, b) = (["a-0", "a-1", "a-2"], ["b-0", "b-1"]);
    let submit = |id, keys: &[&'static str]| {
        p.try_complete_else_watch(Probe::new(id, &f, SEC, &journal), keys)
            .unwrap()
    };
    // The first under each key, the next two in a group.
    let first: Vec<_> = (0..3).map(|id| submit(id, &a)).collect();
    assert_eq!(p.metrics().held_watch_entries, 3 + 2 + 3);
    for h in &first {
        assert!(h.force_complete());
    }
    // The last operation out took the group out of its map and its keys'
    // lists: the next ones with the same keys cannot join it.
    assert_empty(&p);
    let again: Vec<_> = (3..5).map(|id| submit(id, &a)).collect();
    assert_eq!(p.metrics().held_watch_entries, 2 + 3);
    // Another key set in between, then the first one again: one group each.
    let other: Vec<_> = (5..8).map(|id| submit(id, &b)).collect();
    let last = submit(8, &a);
    // `a`'s group: three operations and its three keys' entries; `b`'s
    // first under each key, the other two in a group under both keys.
    assert_eq!(p.metrics().held_watch_entries, (3 + 3) + (2 + 2 + 2));
    assert_eq!(p.watched_keys(), 5);
    f.store(true, Ordering::SeqCst);
    assert_eq!(p.check_and_complete(&"a-2"), 3);
    assert_eq!(p.check_and_complete(&"b-1"), 3);
    for h in again.iter().chain(&other).chain([&last]) {
        assert_eq!(h.outcome(), Some(Outcome::Completed));
    }
    assert_empty(&p);
}

#[test]
fn an_operation_in_a_group_is_cancelled_by_any_of_its_keys_once() {
    for kind in KINDS {
        let (p, _clock, journal) = setup(kind);
        let f = flag(false);
        for id in 0..5 {
            p.try_complete_else_watch(Probe::new(id, &f, SEC, &journal), &["a", "b", "c"])
                .unwrap();
        }
        assert_eq!(p.cancel_for_key(&"b"), 5);
        assert_eq!(p.cancel_for_key(&"a"), 0);
        assert_eq!(p.cancel_for_key(&"c"), 0);
        assert_eq!(journal.outcomes().len(), 5);
        assert_eq!(p.metrics().cancelled, 5);
        assert_empty(&p);
    }
}

#[test]
fn owned_keys_are_checked_and_cancelled_by_a_borrowed_form() {
    for kind in KINDS {
        let clock = ManualClock::new();
        let p: Purgatory<String, Probe> = Purgatory::builder("test")
            .timer(kind)
            .manual(clock)
            .build()
            .unwrap();
        let journal = Arc::new(Journal::default());
        let f = flag(false);
        let keys = ["topic-0".to_string(), "topic-1".to_string()];
        p.try_complete_else_watch(Probe::new(1, &f, SEC, &journal), &keys)
            .unwrap();
        p.try_complete_else_watch(Probe::new(2, &f, SEC, &journal), &keys[1..])
            .unwrap();
        f.store(true, Ordering::SeqCst);
        // A `&str`, not a `&String`: no key is built to look one up.
        assert_eq!(p.check_and_complete("topic-0"), 1);
        assert_eq!(p.check_and_complete("topic-9"), 0);
        assert_eq!(p.cancel_for_key("topic-1"), 1);
        assert_eq!(
            journal.outcomes(),
            [(1, Outcome::Completed), (2, Outcome::Cancelled)]
        );
        assert_eq!((p.watched(), p.delayed()), (0, 0));
    }
}

/// A value a callback sets, for the test to read afterwards.
type Slot<T> = Arc<parking_lot::Mutex<Option<T>>>;

fn slot<T>() -> Slot<T> {
    Arc::new(parking_lot::Mutex::new(None))
}

/// A group member's session whose expiry tries to extend the next member's
/// session in its batch.
struct MemberSession {
    next: Slot<purgatory::Delayed<&'static str, MemberSession>>,
    /// What `reset_timeout` on the next session answered, if it was called.
    extended: Slot<bool>,
    outcome: Slot<Outcome>,
}

impl purgatory::DelayedOperation for MemberSession {
    fn timeout(&self) -> Duration {
        Duration::from_millis(100)
    }
    fn try_complete(&mut self) -> bool {
        false
    }
    fn on_complete(&mut self, outcome: Outcome) {
        *self.outcome.lock() = Some(outcome);
        if let Some(next) = self.next.lock().as_ref() {
            *self.extended.lock() = Some(next.reset_timeout(SEC));
        }
    }
}

#[test]
fn a_reset_after_the_timer_let_go_says_the_session_was_not_extended() {
    // The timer hands out both sessions at once, by expiry or by shutdown,
    // and answers them in submission order: the first one's callback runs
    // when the second has left the timer but is not answered yet.
    for by_shutdown in [false, true] {
        for kind in KINDS {
            let clock = ManualClock::new();
            let p: Purgatory<&'static str, MemberSession> = Purgatory::builder("sessions")
                .timer(kind)
                .manual(clock.clone())
                .build()
                .unwrap();
            let (next, extended) = (slot(), slot());
            let (first_outcome, second_outcome) = (slot(), slot());
            p.try_complete_else_watch(
                MemberSession {
                    next: Arc::clone(&next),
                    extended: Arc::clone(&extended),
                    outcome: Arc::clone(&first_outcome),
                },
                &["member-1"],
            )
            .unwrap();
            let second = p
                .try_complete_else_watch(
                    MemberSession {
                        next: slot(),
                        extended: slot(),
                        outcome: Arc::clone(&second_outcome),
                    },
                    &["member-2"],
                )
                .unwrap();
            *next.lock() = Some(second);
            let expected = if by_shutdown {
                p.shutdown();
                Outcome::Shutdown
            } else {
                clock.advance(Duration::from_millis(100));
                assert_eq!(p.advance_clock(), 2, "{kind:?}");
                Outcome::Expired
            };
            let case = format!("{kind:?}, by shutdown: {by_shutdown}");
            assert_eq!(*first_outcome.lock(), Some(expected), "{case}");
            assert_eq!(*second_outcome.lock(), Some(expected), "{case}");
            assert_eq!(
                *extended.lock(),
                Some(false),
                "{case}: told it was extended"
            );
            assert_eq!((p.watched(), p.delayed()), (0, 0));
            assert_eq!(p.metrics().held_timer_entries, 0, "{case}");
            // The first operation holds the second handle in its `next`: let it go
            // before the purgatory.
            next.lock().take();
        }
    }
}

/// While its check runs, asks for an expiry (optionally) and then forces
/// itself complete through its own handle, recording what that answered.
struct SelfForcing {
    purgatory: Arc<Purgatory<&'static str, SelfForcing>>,
    handle: Slot<purgatory::Delayed<&'static str, SelfForcing>>,
    expire_first: bool,
    forced: Slot<bool>,
}

impl purgatory::DelayedOperation for SelfForcing {
    fn timeout(&self) -> Duration {
        Duration::from_millis(10)
    }
    fn try_complete(&mut self) -> bool {
        let handle = self.handle.lock();
        if let Some(handle) = handle.as_ref() {
            if self.expire_first {
                // The operation is due: the expiry finds it running here
                // and leaves its outcome for this check to pick up.
                assert_eq!(self.purgatory.advance_clock(), 0);
            }
            *self.forced.lock() = Some(handle.force_complete());
        }
        false
    }
    fn on_complete(&mut self, _: Outcome) {}
}

#[test]
fn force_complete_says_whether_completed_is_the_outcome_it_gets() {
    for kind in KINDS {
        for (expire_first, forced, outcome) in [
            (false, true, Outcome::Completed),
            (true, false, Outcome::Expired),
        ] {
            let clock = ManualClock::new();
            let p: Arc<Purgatory<&'static str, SelfForcing>> = Arc::new(
                Purgatory::builder("forcing")
                    .timer(kind)
                    .manual(clock.clone())
                    .build()
                    .unwrap(),
            );
            let (handle, answer) = (slot(), slot());
            let submitted = p
                .try_complete_else_watch(
                    SelfForcing {
                        purgatory: Arc::clone(&p),
                        handle: Arc::clone(&handle),
                        expire_first,
                        forced: Arc::clone(&answer),
                    },
                    &["key"],
                )
                .unwrap();
            *handle.lock() = Some(submitted);
            clock.advance(Duration::from_millis(10));
            let case = format!("{kind:?}, expiry first: {expire_first}");
            p.check_and_complete(&"key");
            assert_eq!(*answer.lock(), Some(forced), "{case}");
            let handle = handle.lock().take().unwrap();
            assert_eq!(handle.outcome(), Some(outcome), "{case}");
            assert_eq!((p.watched(), p.delayed()), (0, 0), "{case}");
            p.shutdown();
            // The answered operation, in the handle's slot, holds `p`.
            drop(handle.wait());
        }
    }
}

#[test]
fn a_key_given_twice_is_watched_once() {
    for kind in KINDS {
        let (p, clock, journal) = setup(kind);
        let ready = flag(false);
        let h = p
            .try_complete_else_watch(Probe::new(1, &ready, SEC, &journal), &["a", "a", "a"])
            .unwrap();
        assert_eq!((p.watched(), p.delayed(), p.watched_keys()), (1, 1, 1));
        // Many keys, some repeated: hashed rather than compared pairwise.
        let keys: Vec<&'static str> = ["b", "c", "d", "e", "f", "g", "h", "i", "j"]
            .iter()
            .cycle()
            .take(27)
            .copied()
            .collect();
        let h2 = p
            .try_complete_else_watch(Probe::new(2, &ready, SEC, &journal), &keys)
            .unwrap();
        assert_eq!((p.watched(), p.watched_keys()), (10, 10));
        ready.store(true, Ordering::SeqCst);
        assert_eq!(p.check_and_complete(&"a"), 1);
        assert_eq!(p.check_and_complete(&"e"), 1);
        assert_eq!(h.wait().outcome, Outcome::Completed);
        assert_eq!(h2.wait().outcome, Outcome::Completed);
        clock.advance(SEC);
        p.advance_clock();
        assert_empty(&p);
    }
}
