//! What a broker implements to park a request.

use crate::outcome::Outcome;
use std::time::Duration;

/// A request parked until its condition holds or its timeout passes.
///
/// The purgatory guarantees, for each operation:
/// - [`on_complete`](Self::on_complete) runs exactly once, with the outcome;
/// - [`try_complete`](Self::try_complete) never runs concurrently with itself
///   or with completion (the methods take `&mut self`, and the purgatory never
///   blocks a thread to provide that: a check that finds the operation busy
///   is handed to the thread that has it);
/// - none of these methods is called while a purgatory lock that another
///   key's work needs is held, so they may call back into the purgatory
///   (`check_and_complete` on other keys, say);
/// - a panic in any of them is caught, counted and logged; a panic in
///   `try_complete` counts as "not yet", so the timeout still answers, and
///   a panic in `timeout` as a zero timeout;
/// - a panic in the operation's `Drop`, where the purgatory drops it (an
///   operation whose handle was dropped), is caught and logged, not counted.
///
/// # Example: a produce with `acks=all`
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use purgatory::{DelayedOperation, Outcome};
///
/// struct DelayedProduce {
///     high_watermark: Arc<AtomicU64>, // the partition's HW, moved by follower fetches
///     required_offset: u64,           // last offset of the appended batch + 1
///     timeout: Duration,              // the request's timeout.ms
///     response: Option<Result<(), &'static str>>,
/// }
///
/// impl DelayedOperation for DelayedProduce {
///     fn timeout(&self) -> Duration {
///         self.timeout
///     }
///     fn try_complete(&mut self) -> bool {
///         self.high_watermark.load(Ordering::Acquire) >= self.required_offset
///     }
///     fn on_complete(&mut self, outcome: Outcome) {
///         self.response = Some(match outcome {
///             Outcome::Completed => Ok(()),
///             Outcome::Expired => Err("REQUEST_TIMED_OUT"),
///             Outcome::Cancelled => Err("NOT_LEADER_OR_FOLLOWER"),
///             Outcome::Shutdown => Err("BROKER_NOT_AVAILABLE"),
///         });
///     }
/// }
/// ```
pub trait DelayedOperation: Send + 'static {
    /// How long after submission the operation expires. Read once, when it
    /// is submitted. Any duration is accepted: zero expires on the timer's
    /// next tick, and very long ones saturate rather than overflow.
    fn timeout(&self) -> Duration;

    /// Checks the condition and, if it holds, does whatever work the answer
    /// needs. Returns `true` to complete the operation (outcome
    /// [`Outcome::Completed`]).
    fn try_complete(&mut self) -> bool;

    /// Called exactly once, with the outcome, after the operation has been
    /// removed from the timer and from every watch list.
    fn on_complete(&mut self, outcome: Outcome);

    /// Called just before `on_complete(Outcome::Expired)` (Kafka's
    /// `onExpiration`, for metrics). Does nothing by default.
    fn on_expiration(&mut self) {}
}

/// Operations of several kinds in one purgatory, boxed: a
/// `Purgatory<K, Box<dyn DelayedOperation>>` takes any of them.
///
/// ```
/// use std::time::Duration;
/// use purgatory::{DelayedOperation, ManualClock, Outcome, Purgatory};
///
/// struct Heartbeat;
/// impl DelayedOperation for Heartbeat {
///     fn timeout(&self) -> Duration { Duration::from_secs(10) }
///     fn try_complete(&mut self) -> bool { false }
///     fn on_complete(&mut self, _: Outcome) {}
/// }
/// struct Ready;
/// impl DelayedOperation for Ready {
///     fn timeout(&self) -> Duration { Duration::from_secs(1) }
///     fn try_complete(&mut self) -> bool { true }
///     fn on_complete(&mut self, _: Outcome) {}
/// }
///
/// let clock = ManualClock::new();
/// let mixed: Purgatory<&str, Box<dyn DelayedOperation>> =
///     Purgatory::builder("Mixed").manual(clock.clone()).build().unwrap();
/// let beat = mixed.try_complete_else_watch(Box::new(Heartbeat), &["member-1"]).unwrap();
/// let ready = mixed.try_complete_else_watch(Box::new(Ready), &["topic-0"]).unwrap();
/// assert!(ready.completed_at_once() && !beat.is_completed());
/// clock.advance(Duration::from_secs(10));
/// assert_eq!(mixed.advance_clock(), 1);
/// assert_eq!(beat.wait().outcome, Outcome::Expired);
/// ```
impl<T: DelayedOperation + ?Sized> DelayedOperation for Box<T> {
    fn timeout(&self) -> Duration {
        (**self).timeout()
    }
    fn try_complete(&mut self) -> bool {
        (**self).try_complete()
    }
    fn on_complete(&mut self, outcome: Outcome) {
        (**self).on_complete(outcome)
    }
    fn on_expiration(&mut self) {
        (**self).on_expiration()
    }
}
