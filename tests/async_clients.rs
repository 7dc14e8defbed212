//! The purgatory under an async broker: tasks on a multi-threaded tokio
//! runtime submit fetches and `.await` their handles while other tasks make
//! conditions true, check keys, force some through completers, cancel a
//! key, and finally shut the purgatory down with requests still pending. Nothing here depends on timing: every
//! operation must be answered exactly once whatever interleaving the
//! runtime picks, each awaited handle must resolve with the outcome its
//! operation was told, and the counts must add up.

use request_purgatory::purgatory::{DelayedOperation, Outcome, Purgatory, SubmitError, TimerKind};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const PARTITIONS: u64 = 8;
const REQUESTS: usize = 20_000;

/// What every fetch shares: each partition's high watermark, and how many
/// times each request was answered.
struct Broker {
    high_watermarks: Vec<AtomicU64>,
    answers: Vec<AtomicU8>,
    submitted: AtomicUsize,
}

/// A fetch waiting until its partition's high watermark reaches `needs`.
struct Fetch {
    id: usize,
    partition: usize,
    needs: u64,
    timeout: Duration,
    broker: Arc<Broker>,
    told: Option<Outcome>,
}

impl DelayedOperation for Fetch {
    fn timeout(&self) -> Duration {
        self.timeout
    }
    fn try_complete(&mut self) -> bool {
        self.broker.high_watermarks[self.partition].load(Ordering::Acquire) >= self.needs
    }
    fn on_complete(&mut self, outcome: Outcome) {
        self.told = Some(outcome);
        self.broker.answers[self.id].fetch_add(1, Ordering::Relaxed);
    }
}

fn key(partition: usize) -> String {
    format!("topic-{partition}")
}

fn run(kind: TimerKind) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let purgatory: Arc<Purgatory<String, Fetch>> = Arc::new(
        Purgatory::builder("AsyncFetch")
            .timer(kind)
            .build()
            .unwrap(),
    );
    let broker = Arc::new(Broker {
        high_watermarks: (0..PARTITIONS).map(|_| AtomicU64::new(0)).collect(),
        answers: (0..REQUESTS + 1).map(|_| AtomicU8::new(0)).collect(),
        submitted: AtomicUsize::new(0),
    });

    let (awaited, not_awaited) = runtime.block_on(async {
        let mut clients = Vec::with_capacity(REQUESTS);
        for id in 0..REQUESTS {
            let (purgatory, broker) = (Arc::clone(&purgatory), Arc::clone(&broker));
            clients.push(tokio::spawn(async move {
                let partition = id % PARTITIONS as usize;
                let now = broker.high_watermarks[partition].load(Ordering::Relaxed);
                let fetch = Fetch {
                    id,
                    partition,
                    needs: now + (id as u64 % 40),
                    // From 1 ms to a minute: some expire, most are answered
                    // by their condition, the cancel or the shutdown.
                    timeout: Duration::from_millis(1 + (id as u64 * 7919) % 60_000),
                    broker: Arc::clone(&broker),
                    told: None,
                };
                let handle = purgatory
                    .try_complete_else_watch(fetch, &[key(partition)])
                    .expect("submitted before the shutdown");
                broker.submitted.fetch_add(1, Ordering::Release);
                if id % 5 == 0 {
                    // Answered through the callback only.
                    drop(handle);
                    return None;
                }
                if id % 7 == 3 {
                    // Another task answers it (a remote read finishing),
                    // racing this one's await.
                    let completer = handle.completer();
                    tokio::spawn(async move {
                        tokio::task::yield_now().await;
                        completer.force_complete();
                    });
                }
                let done = handle.await;
                assert_eq!(done.operation.told, Some(done.outcome), "request {id}");
                Some(done.outcome)
            }));
        }

        // Appends: each raises every partition's high watermark by one and
        // checks its key. Partition 3's leadership moves away halfway. They
        // start once every request is in, so that completions, the cancel
        // and the shutdown each answer some awaited request however slowly
        // the clients were scheduled (a request needing more than 30
        // appends is never completed by its condition).
        let appends = {
            let (purgatory, broker) = (Arc::clone(&purgatory), Arc::clone(&broker));
            tokio::spawn(async move {
                while broker.submitted.load(Ordering::Acquire) < REQUESTS {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                for round in 0..30 {
                    for partition in 0..PARTITIONS as usize {
                        broker.high_watermarks[partition].fetch_add(1, Ordering::Release);
                        purgatory.check_and_complete(&key(partition));
                    }
                    if round == 15 {
                        purgatory.cancel_for_key(&key(3));
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        };
        appends.await.unwrap();
        // Whatever is still pending (high watermark not reached, timeout not
        // passed) is answered by the shutdown.
        purgatory.shutdown();

        // A lost answer would leave its client waiting for ever: fail instead.
        let every_client = async {
            let mut awaited = Vec::new();
            let mut not_awaited = 0;
            for client in clients {
                match client.await.unwrap() {
                    Some(outcome) => awaited.push(outcome),
                    None => not_awaited += 1,
                }
            }
            (awaited, not_awaited)
        };
        tokio::time::timeout(Duration::from_secs(60), every_client)
            .await
            .expect("every awaited handle resolves after the shutdown")
    });

    // A submission after the shutdown is refused, its operation handed back
    // without a callback.
    let late = Fetch {
        id: REQUESTS,
        partition: 0,
        needs: u64::MAX,
        timeout: Duration::from_secs(1),
        broker: Arc::clone(&broker),
        told: None,
    };
    match purgatory.try_complete_else_watch(late, &[key(0)]) {
        Err(SubmitError::ShutDown(op)) => assert_eq!(op.told, None),
        Err(other) => panic!("refused for the wrong reason: {other}"),
        Ok(_) => panic!("a shut-down purgatory took an operation"),
    }

    for (id, answers) in broker.answers.iter().enumerate().take(REQUESTS) {
        assert_eq!(answers.load(Ordering::Relaxed), 1, "request {id}");
    }
    assert_eq!(broker.answers[REQUESTS].load(Ordering::Relaxed), 0);
    assert_eq!(awaited.len() + not_awaited, REQUESTS);

    let m = purgatory.metrics();
    assert_eq!(
        m.completed + m.expired + m.cancelled + m.shutdown,
        REQUESTS as u64
    );
    assert_eq!(m.panics, 0);
    // The awaited handles saw a share of each outcome the metrics counted.
    for outcome in [Outcome::Completed, Outcome::Cancelled, Outcome::Shutdown] {
        assert!(awaited.contains(&outcome), "no awaited request {outcome}");
    }
    let seen = |o: Outcome| awaited.iter().filter(|&&a| a == o).count() as u64;
    assert!(seen(Outcome::Completed) <= m.completed);
    assert!(seen(Outcome::Expired) <= m.expired);
    assert!(seen(Outcome::Cancelled) <= m.cancelled);
    assert!(seen(Outcome::Shutdown) <= m.shutdown);
    assert_eq!(purgatory.delayed(), 0);
    assert_eq!(purgatory.watched(), 0);
}

#[test]
fn awaited_handles_on_a_multi_threaded_runtime_resolve_once_each_wheel() {
    run(TimerKind::Wheel);
}

#[test]
fn awaited_handles_on_a_multi_threaded_runtime_resolve_once_each_delay_queue() {
    run(TimerKind::DelayQueue {
        purge_interval: 1000,
    });
}
