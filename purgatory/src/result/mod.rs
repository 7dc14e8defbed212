//! Where a completed operation's result waits for its handle. `slot.rs` is
//! written against [`sync`]'s names so that the loom model
//! (`tests/loom_slot.rs`) can compile it again against loom's.

mod slot;
mod sync;

pub(crate) use slot::{ResultSlot, Taken};
