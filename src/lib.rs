//! The request purgatory of a Kafka-like broker, as one dependency.
//!
//! Re-exports the workspace's libraries:
//! - [`timing_wheel`]: the hierarchical timing wheel;
//! - [`purgatory`]: delayed operations watched by key, completed exactly once.
//!
//! The project's README follows; its code samples run as this crate's
//! doc-tests, so they stay as a user would paste them.
#![doc = include_str!("../README.md")]
pub use purgatory;
pub use timing_wheel;
