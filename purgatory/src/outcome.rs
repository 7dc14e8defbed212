//! How a delayed operation ended.

use std::fmt;

/// Why a delayed operation was completed. Each operation gets exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Its condition held: [`try_complete`](crate::DelayedOperation::try_complete)
    /// returned `true`, or someone called
    /// [`force_complete`](crate::Delayed::force_complete).
    Completed,
    /// Its timeout passed first.
    Expired,
    /// A key it was watched under was cancelled
    /// ([`cancel_for_key`](crate::Purgatory::cancel_for_key)), e.g. the
    /// partition's leadership moved away.
    Cancelled,
    /// The purgatory shut down while it was pending.
    Shutdown,
}

impl Outcome {
    pub(crate) const ALL: [Outcome; 4] = [
        Outcome::Completed,
        Outcome::Expired,
        Outcome::Cancelled,
        Outcome::Shutdown,
    ];

    pub(crate) fn code(self) -> u32 {
        self as u32
    }

    pub(crate) fn from_code(code: u32) -> Outcome {
        Self::ALL[code as usize]
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Completed => "completed",
            Outcome::Expired => "expired",
            Outcome::Cancelled => "cancelled",
            Outcome::Shutdown => "shutdown",
        })
    }
}
