//! An entry's value, tagged by its bucket code instead of by `Option`.
//!
//! Every `unsafe` block of the crate is here, and nothing else; the crate
//! root denies `unsafe_code` everywhere but in this module.
//!
//! `Option<T>` costs a tag word for every `T` without a niche: with a `u64`
//! payload an entry took 40 bytes instead of 32. The entry already has a
//! field that means nothing while it is vacant, the code of the bucket that
//! holds it, so [`VACANT`] there is the tag. The 8 bytes are a fifth of
//! the entry memory for the same population (39.6 instead of 47.6 bytes per
//! pending `u64` timer at 1e6, counting buckets and spare capacity), and
//! made a step of `compare`'s `insert_cancel` about 2% cheaper at 1e3 and
//! 1e6 pending in alternating runs of `compare --workload insert_cancel`.
//!
//! Soundness rests on one invariant, kept by this module alone whatever
//! its callers do: **`value` is initialised exactly when `bucket` is not
//! [`VACANT`]**. Each method's worst misuse is a leaked value, never a read
//! of an uninitialised one.

use std::mem::MaybeUninit;

/// The bucket code of a vacant slot. Real codes are below 2^10 (see
/// `place` in `wheel.rs`).
pub(crate) const VACANT: u16 = u16::MAX;

/// A value and the bucket code of the entry holding it, or nothing.
pub(crate) struct Payload<T> {
    value: MaybeUninit<T>,
    /// [`VACANT`], or the code of the bucket holding this entry.
    bucket: u16,
}

impl<T> Payload<T> {
    /// No value.
    pub(crate) const fn vacant() -> Self {
        Payload {
            value: MaybeUninit::uninit(),
            bucket: VACANT,
        }
    }

    #[inline]
    pub(crate) fn is_vacant(&self) -> bool {
        self.bucket == VACANT
    }

    /// The bucket code, [`VACANT`] when there is no value.
    #[inline]
    pub(crate) fn bucket(&self) -> u16 {
        self.bucket
    }

    /// Stores `value`, held in bucket `bucket`. A value already there is
    /// leaked, not dropped (the slab only fills vacant slots), and so is
    /// `value` if `bucket` is [`VACANT`].
    #[inline]
    pub(crate) fn fill(&mut self, value: T, bucket: u16) {
        self.value.write(value);
        self.bucket = bucket;
    }

    /// Records that the value moved to bucket `bucket`. Does nothing when
    /// vacant: a code there would claim a value that is not.
    #[inline]
    pub(crate) fn set_bucket(&mut self, bucket: u16) {
        if !self.is_vacant() {
            self.bucket = bucket;
        }
    }

    /// Takes the value out with its bucket code, leaving the slot vacant.
    #[inline]
    pub(crate) fn take(&mut self) -> Option<(T, u16)> {
        if self.is_vacant() {
            return None;
        }
        let bucket = std::mem::replace(&mut self.bucket, VACANT);
        // SAFETY: `bucket` was not VACANT, so `value` was initialised (the
        // module invariant). It is now marked VACANT, so this read is the
        // only one: the value is moved out once and never dropped here.
        let value = unsafe { self.value.assume_init_read() };
        Some((value, bucket))
    }

    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        // SAFETY: not VACANT, so initialised (the module invariant); the
        // borrow of `self` keeps it from being taken or overwritten.
        (!self.is_vacant()).then(|| unsafe { self.value.assume_init_ref() })
    }

    #[inline]
    pub(crate) fn get_mut(&mut self) -> Option<&mut T> {
        if self.is_vacant() {
            return None;
        }
        // SAFETY: as in `get`; the exclusive borrow of `self` keeps the
        // code from changing while the reference lives.
        Some(unsafe { self.value.assume_init_mut() })
    }
}

impl<T> Drop for Payload<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_u64_entry_loses_its_tag_word() {
        assert_eq!(std::mem::size_of::<Payload<u64>>(), 16);
        assert_eq!(std::mem::size_of::<Payload<u32>>(), 8);
    }

    #[test]
    fn take_moves_the_value_out_once() {
        let mut p = Payload::vacant();
        assert!(p.is_vacant() && p.get().is_none() && p.take().is_none());
        p.fill(String::from("x"), 7);
        assert_eq!(p.bucket(), 7);
        p.get_mut().unwrap().push('y');
        assert_eq!(p.get().map(String::as_str), Some("xy"));
        assert_eq!(p.take(), Some((String::from("xy"), 7)));
        assert!(p.is_vacant() && p.take().is_none());
    }

    #[test]
    fn a_vacant_slot_refuses_a_bucket() {
        let mut p: Payload<String> = Payload::vacant();
        p.set_bucket(3);
        assert!(p.is_vacant() && p.take().is_none());
    }

    /// Counts its drops without owning heap memory, so that a leak shows
    /// in the count (and not as a leak report under Miri).
    struct Dropped<'a>(&'a Cell<usize>);

    impl Drop for Dropped<'_> {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }

    #[test]
    fn values_are_dropped_exactly_once() {
        let drops = Cell::new(0);
        {
            let mut held = Payload::vacant();
            held.fill(Dropped(&drops), 1);
            held.set_bucket(2);
            let mut taken = Payload::vacant();
            taken.fill(Dropped(&drops), 1);
            let (value, bucket) = taken.take().unwrap();
            assert_eq!((drops.get(), bucket), (0, 1));
            drop(value);
            assert_eq!(drops.get(), 1);
        }
        // `held` dropped its value; `taken`, vacant, dropped nothing.
        assert_eq!(drops.get(), 2);
    }

    #[test]
    fn misuse_leaks_but_never_reads_uninitialised_memory() {
        let drops = Cell::new(0);
        let mut p = Payload::vacant();
        p.fill(Dropped(&drops), 1);
        p.fill(Dropped(&drops), 2); // the first value is leaked
        p.set_bucket(VACANT); // and now the second
        assert!(p.take().is_none());
        p.fill(Dropped(&drops), VACANT); // stored as vacant: leaked
        assert!(p.get().is_none());
        drop(p);
        assert_eq!(drops.get(), 0);
    }
}
