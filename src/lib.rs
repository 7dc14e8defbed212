//! The request purgatory of a Kafka-like broker, as one dependency.
//!
//! Re-exports the workspace's libraries:
//! - [`timing_wheel`]: the hierarchical timing wheel.
pub use timing_wheel;
