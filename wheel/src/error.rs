//! The wheel's errors.

use std::fmt;

/// Why [`TimingWheel::insert`](crate::TimingWheel::insert) refused a value.
#[derive(Debug, PartialEq, Eq)]
pub enum InsertError<T> {
    /// 2^31 entries are pending already; the value is handed back.
    Full(T),
}

impl<T> InsertError<T> {
    /// The value that was not inserted.
    pub fn into_inner(self) -> T {
        match self {
            InsertError::Full(value) => value,
        }
    }
}

impl<T> fmt::Display for InsertError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InsertError::Full(_) => {
                write!(f, "the timing wheel is full (2^31 pending entries)")
            }
        }
    }
}

impl<T: fmt::Debug> std::error::Error for InsertError<T> {}

/// Why [`Lane::push`](crate::Lane::push) refused a value; the value is
/// handed back.
#[derive(Debug, PartialEq, Eq)]
pub enum PushError<T> {
    /// The deadline is earlier than the last one pushed: a lane keeps its
    /// deadlines in order (a [`TimingWheel`](crate::TimingWheel) takes any).
    OutOfOrder(T),
    /// The lane spans 2^30 positions from its oldest pending entry.
    Full(T),
}

impl<T> PushError<T> {
    /// The value that was not pushed.
    pub fn into_inner(self) -> T {
        match self {
            PushError::OutOfOrder(value) | PushError::Full(value) => value,
        }
    }
}

impl<T> fmt::Display for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::OutOfOrder(_) => {
                write!(f, "the deadline is earlier than the lane's last one")
            }
            PushError::Full(_) => write!(f, "the lane is full (2^30 positions)"),
        }
    }
}

impl<T: fmt::Debug> std::error::Error for PushError<T> {}

/// A configuration the wheel cannot work with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The tick must be at least one nanosecond.
    ZeroTick,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroTick => write!(f, "the tick duration must be greater than zero"),
        }
    }
}

impl std::error::Error for ConfigError {}
