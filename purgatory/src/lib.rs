//! The request purgatory of a Kafka-like broker.
#![warn(missing_docs)]

mod cell;
mod error;
mod handle;
mod metrics;
mod operation;
mod outcome;
mod purgatory;
mod state;
mod sync;
mod timer_queue;
mod watchers;

pub use cell::Completion;
pub use error::{ConfigError, SubmitError};
pub use handle::Delayed;
pub use metrics::PurgatoryMetrics;
pub use operation::DelayedOperation;
pub use outcome::Outcome;
pub use purgatory::{Driver, Purgatory, PurgatoryBuilder};
pub use timer_queue::TimerKind;
pub use timing_wheel::{Clock, ManualClock, SystemClock};
