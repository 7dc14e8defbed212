//! Running the user's code with its panics caught, so that a panicking
//! operation costs its own answer at most, never a purgatory thread or
//! another operation's answer.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`; a panic becomes `Err` with the panic's message (empty when
/// the payload is not a string).
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| message(&*panic))
}

/// Drops `value`, which holds a user's operation, on a thread that must
/// survive a panic in the operation's `Drop`. The panic is logged but not
/// counted in the metrics: where the last reference to a cell goes, nothing
/// knows which purgatory it belonged to.
pub(crate) fn drop_logged<T>(value: T) {
    if let Err(message) = catch(move || drop(value)) {
        tracing::error!(callback = "drop", %message, "delayed operation panicked");
    }
}

fn message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}
