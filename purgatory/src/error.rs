//! The purgatory's errors.

use std::fmt;

/// Why [`Purgatory::try_complete_else_watch`](crate::Purgatory::try_complete_else_watch)
/// refused an operation. The operation is handed back, untouched: nothing was
/// watched, scheduled or called.
pub enum SubmitError<O> {
    /// The key list was empty: an operation nobody could complete by key.
    NoKeys(O),
    /// The purgatory has been shut down.
    ShutDown(O),
}

impl<O> SubmitError<O> {
    /// The operation that was not submitted.
    pub fn into_operation(self) -> O {
        match self {
            SubmitError::NoKeys(op) | SubmitError::ShutDown(op) => op,
        }
    }
}

impl<O> fmt::Debug for SubmitError<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::NoKeys(_) => f.write_str("SubmitError::NoKeys(..)"),
            SubmitError::ShutDown(_) => f.write_str("SubmitError::ShutDown(..)"),
        }
    }
}

impl<O> fmt::Display for SubmitError<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::NoKeys(_) => {
                f.write_str("a delayed operation needs at least one key to be watched under")
            }
            SubmitError::ShutDown(_) => f.write_str("the purgatory has been shut down"),
        }
    }
}

impl<O> std::error::Error for SubmitError<O> {}

/// A purgatory configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The timer tick must be longer than zero.
    ZeroTick,
    /// At least one watch-list shard is needed.
    ZeroShards,
    /// `Driver::Thread` needs at least one expiration thread beside the
    /// first, to take the clock while a callback runs.
    ZeroExpirationThreads,
    /// The DelayQueue baseline purges every `purge_interval` completions; 0 is not an interval.
    ZeroPurgeInterval,
    /// The operating system refused to start a thread.
    Spawn(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroTick => f.write_str("the timer tick must be greater than zero"),
            ConfigError::ZeroShards => {
                f.write_str("the purgatory needs at least one watch-list shard")
            }
            ConfigError::ZeroExpirationThreads => {
                f.write_str("the threaded driver needs at least one expiration thread")
            }
            ConfigError::ZeroPurgeInterval => f.write_str("the purge interval must be at least 1"),
            ConfigError::Spawn(e) => write!(f, "could not start a purgatory thread: {e}"),
        }
    }
}

impl std::error::Error for ConfigError {}
