//! The request purgatory of a Kafka-like broker, as one dependency.
//!
//! Re-exports the workspace's libraries:
//! - [`timing_wheel`]: the hierarchical timing wheel;
//! - [`purgatory`]: delayed operations watched by key, completed exactly once.
pub use purgatory;
pub use timing_wheel;
