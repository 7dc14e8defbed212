//! A cell's last reference handed back to the spare cells as it is, rather
//! than cloned for them and then dropped.
//!
//! The clone and the drop are two locked read-modify-writes on the cell's
//! count per operation, on the completing thread; on x86 each is a full
//! fence, and a profile put 18% of the give-back's samples on the clone's
//! (docs/performance.md, Kept, "A handle hands its cell back as it is").
//! Handing the reference itself over takes two things safe code cannot
//! say:
//! - [`LastUse`] moves a value out of its holder when the holder drops,
//!   where `Drop` gets only `&mut self`.
//! - [`park`] pushes the cell into a lock of the pool that the cell itself
//!   keeps alive (a cell refers to its purgatory, which holds the pool).
//!   Once the cell is in, the parking thread holds nothing that keeps the
//!   pool alive: another thread may take the cell out as soon as the lock
//!   is released, drop it and the purgatory with it. So the lock is
//!   reached through a pointer whose last use is that release.

use crate::cell::Cell;
use crate::no_yield_lock::Mutex;
use crate::timer_queue::CellRef;
use std::mem::ManuallyDrop;
use std::ops::Deref;

/// What a [`LastUse`] does with its value when it drops.
pub(crate) trait OnLastUse {
    fn on_last_use(self);
}

/// Holds a value, lends it out, and hands it to
/// [`OnLastUse::on_last_use`] by value when dropped.
pub(crate) struct LastUse<T: OnLastUse>(ManuallyDrop<T>);

impl<T: OnLastUse> LastUse<T> {
    pub(crate) fn new(value: T) -> Self {
        LastUse(ManuallyDrop::new(value))
    }
}

impl<T: OnLastUse> Deref for LastUse<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: OnLastUse> Drop for LastUse<T> {
    fn drop(&mut self) {
        // SAFETY: the value is taken out once, here; `drop` runs once and
        // nothing reads `self.0` after it, so the emptied `ManuallyDrop`
        // is never used again.
        let value = unsafe { ManuallyDrop::take(&mut self.0) };
        value.on_last_use();
    }
}

/// The lock a cell is parked behind: a magazine of spare cells.
pub(crate) type MagazineLock<K, O> = Mutex<Vec<CellRef<K, O>>>;

/// Pushes `cell` into the magazine `magazine_of` finds from it, if `admit`
/// (called under the magazine's lock, the cell not yet in) agrees;
/// otherwise hands the cell back, for the caller to drop after the lock.
///
/// `magazine_of` gets the cell itself, not its reference, so the magazine
/// it returns either lies in what the cell keeps alive (on the heap: moving
/// the reference moves neither) or outlives this call.
pub(crate) fn park<K, O>(
    cell: CellRef<K, O>,
    magazine_of: impl FnOnce(&Cell<K, O>) -> &MagazineLock<K, O>,
    admit: impl FnOnce(&Cell<K, O>, &mut Vec<CellRef<K, O>>) -> bool,
) -> Result<(), CellRef<K, O>> {
    let magazine: *const MagazineLock<K, O> = magazine_of(&cell);
    // SAFETY: the magazine is alive until the guard below releases it:
    // - if it outlives this call (see above), throughout;
    // - else `cell` keeps it alive: until the push `cell` is held here,
    //   and once it is in, the magazine can go only after the cell is
    //   dropped, which first takes it out of the magazine, under the lock
    //   this thread holds until the guard's release.
    // The release is the last use: no reference to the magazine is used
    // after it, and a `Mutex` is atomics and an `UnsafeCell`, which a
    // reference may outlive once unused (as `Arc`'s own drop relies on).
    let magazine = unsafe { &*magazine };
    let mut mine = magazine.lock();
    if !admit(&cell, &mut mine) {
        drop(mine);
        return Err(cell);
    }
    mine.push(cell);
    drop(mine);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counts<'a>(u32, &'a AtomicUsize);

    impl OnLastUse for Counts<'_> {
        fn on_last_use(self) {
            self.1.fetch_add(self.0 as usize, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_last_use_lends_its_value_then_hands_it_on_once() {
        let handed = AtomicUsize::new(0);
        let held = LastUse::new(Counts(5, &handed));
        let lent: &Counts = &held;
        assert_eq!(lent.0, 5, "lent");
        assert_eq!(handed.load(Ordering::SeqCst), 0);
        drop(held);
        assert_eq!(handed.load(Ordering::SeqCst), 5);
    }

    /// A value whose drop counts, to see that `LastUse` does not drop what
    /// it handed on a second time.
    struct Dropped<'a>(&'a AtomicUsize);

    impl Drop for Dropped<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl OnLastUse for Dropped<'_> {
        fn on_last_use(self) {}
    }

    #[test]
    fn a_last_use_drops_its_value_once() {
        let drops = AtomicUsize::new(0);
        drop(LastUse::new(Dropped(&drops)));
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
}
