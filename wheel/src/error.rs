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
