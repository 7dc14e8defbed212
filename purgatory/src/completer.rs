//! Ending or extending one operation from places other than where its
//! handle is awaited.

use crate::hints::Hints;
use crate::purgatory::Shared;
use crate::timer_queue::CellRef;
use crate::unchecked::hand_back::LastUse;
use crate::DelayedOperation;
use std::hash::Hash;
use std::time::Duration;

/// Force-completes one operation, or resets its timeout, from anywhere.
///
/// A broker often answers a request from a place other than where it awaits
/// it: a remote read finishes, a replica fetch arrives, a heartbeat comes in
/// on another connection. A completer is what those places keep. It is
/// cheap to clone (two reference counts), `Send + Sync`, and does not take
/// the result: the handle it came from stays the one to `.await` or
/// [`wait`](crate::Delayed::wait) on, and gets the operation back.
///
/// Every method is safe to call at any time, any number of times, from any
/// thread, racing the operation's condition, its expiry, a cancel, a
/// shutdown and the handle's await: the operation is still answered exactly
/// once. A completer kept after the operation was answered only answers
/// `false`; it holds the cell's memory (without the user's operation once
/// the handle took it) until it is dropped.
///
/// ```
/// use std::time::Duration;
/// use purgatory::{DelayedOperation, Outcome, Purgatory};
///
/// struct RemoteRead;
/// impl DelayedOperation for RemoteRead {
///     fn timeout(&self) -> Duration { Duration::from_secs(30) }
///     fn try_complete(&mut self) -> bool { false } // only the remote side knows
///     fn on_complete(&mut self, _: Outcome) {}
/// }
///
/// let reads = Purgatory::builder("RemoteFetch").build().unwrap();
/// let handle = reads.try_complete_else_watch(RemoteRead, &["topic-0"]).unwrap();
/// let completer = handle.completer();
/// // The remote storage answers on its own thread...
/// let remote = std::thread::spawn(move || assert!(completer.force_complete()));
/// // ...while the request handler waits on (or awaits) the handle.
/// assert_eq!(handle.wait().outcome, Outcome::Completed);
/// remote.join().unwrap();
/// ```
pub struct Completer<K, O> {
    /// Handed back to the spare cells as it is when the completer drops.
    cell: LastUse<CellRef<K, O>>,
    /// The handle's prefetch hints (see `unchecked/prefetch.rs`; their
    /// completed-at-once flag is the handle's business); stale ones cost
    /// a wasted prefetch, never a wrong answer.
    hints: Hints,
}

impl<K, O> Completer<K, O>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    O: DelayedOperation,
{
    pub(crate) fn new(cell: CellRef<K, O>, hints: Hints) -> Self {
        Completer {
            cell: LastUse::new(cell),
            hints,
        }
    }

    /// As [`Delayed::force_complete`](crate::Delayed::force_complete):
    /// `true` if the operation ends completed by this call.
    pub fn force_complete(&self) -> bool {
        Shared::force_complete(&self.cell, self.hints)
    }

    /// As [`Delayed::reset_timeout`](crate::Delayed::reset_timeout): `true`
    /// if the new deadline, `timeout` from now, is in force.
    pub fn reset_timeout(&self, timeout: Duration) -> bool {
        self.cell.home.reset_timeout(&self.cell, timeout)
    }

    /// Whether the outcome has been decided.
    pub fn is_completed(&self) -> bool {
        self.cell.state.is_done()
    }
}

impl<K, O> Clone for Completer<K, O> {
    fn clone(&self) -> Self {
        Completer {
            cell: LastUse::new(CellRef::clone(&self.cell)),
            hints: self.hints,
        }
    }
}

impl<K, O> std::fmt::Debug for Completer<K, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completer")
            .field("completed", &self.cell.state.is_done())
            .finish_non_exhaustive()
    }
}
