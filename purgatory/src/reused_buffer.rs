//! A buffer kept from one call to the next, whose room follows what recent
//! calls needed rather than the largest call ever.
//!
//! The thread at the clock expires operations through buffers it keeps
//! between turns, so that a busy timer does not allocate and free blocks of
//! hundreds of KiB several times a second. A slow spell (the thread ran
//! late, and a round takes whole ticks of the backlog) grows them to many
//! times what a normal turn needs, and kept at that size they are memory
//! the process holds for good after one bad second: in a 5-minute soak
//! (`--by-size --busy 3 --busy-for 120`), the blocks of 256-512 KiB in use
//! went from 256 KiB to 1 MiB in its first 30 s and stayed there to the
//! end; with their room following use, they stayed at 256 KiB.
//!
//! So each use notes the largest length the buffer reached, and every
//! [`WINDOW`] uses, a buffer with more than twice the room the largest
//! use of the window needed gives the excess back. Use whose largest in
//! a window stays above half the room never reallocates, and a buffer
//! that grew past [`ReusedBuffer::KEEP`] is let go at once.

use std::ops::{Deref, DerefMut};

/// Uses per window: about a second of a thread at the clock whose tick is
/// a millisecond, and far more in a quiet one.
const WINDOW: u32 = 1024;

/// Room never given back: small enough not to matter, large enough that a
/// quiet timer does not reallocate for every few operations.
const FLOOR: usize = 256;

/// A `Vec` reused call after call (see the module docs). It derefs to the
/// `Vec`; a use fills it, calls [`note_len`](Self::note_len) at its fullest
/// and empties it, then calls [`end_use`](Self::end_use).
pub(crate) struct ReusedBuffer<T> {
    items: Vec<T>,
    /// The largest length noted in this window.
    peak: usize,
    /// Uses ended in this window.
    uses: u32,
}

impl<T> Default for ReusedBuffer<T> {
    fn default() -> Self {
        ReusedBuffer {
            items: Vec::new(),
            peak: 0,
            uses: 0,
        }
    }
}

impl<T> ReusedBuffer<T> {
    /// Items a buffer keeps room for at most (1 MiB of 16-byte ones): room
    /// for what a late thread at the clock meets, not for a one-off burst.
    pub(crate) const KEEP: usize = 1 << 16;

    /// Notes the length now as this use's need.
    #[inline]
    pub(crate) fn note_len(&mut self) {
        self.peak = self.peak.max(self.items.len());
    }

    /// Ends a use: frees an empty buffer that grew past
    /// [`KEEP`](Self::KEEP), and at the end of a window, gives back the
    /// room beyond twice what its largest use needed. Items still in the
    /// buffer stay.
    pub(crate) fn end_use(&mut self) {
        if self.items.capacity() > Self::KEEP && self.items.is_empty() {
            self.items = Vec::new();
        }
        self.uses += 1;
        if self.uses < WINDOW {
            return;
        }
        let need = self.peak.max(self.items.len()).max(FLOOR);
        if self.items.capacity() > 2 * need {
            self.items.shrink_to(need);
        }
        self.peak = 0;
        self.uses = 0;
    }
}

impl<T> Deref for ReusedBuffer<T> {
    type Target = Vec<T>;

    fn deref(&self) -> &Vec<T> {
        &self.items
    }
}

impl<T> DerefMut for ReusedBuffer<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One use that holds `len` items at its fullest.
    fn use_with(buffer: &mut ReusedBuffer<u64>, len: usize) {
        buffer.extend(0..len as u64);
        buffer.note_len();
        buffer.clear();
        buffer.end_use();
    }

    #[test]
    fn a_spell_s_room_goes_back_within_a_window_of_normal_uses() {
        let mut buffer = ReusedBuffer::default();
        for _ in 0..WINDOW {
            use_with(&mut buffer, 400);
        }
        // A slow spell: rounds of whole ticks, 40,000 operations.
        for _ in 0..10 {
            use_with(&mut buffer, 40_000);
        }
        assert!(buffer.capacity() >= 40_000);
        for _ in 0..2 * WINDOW {
            use_with(&mut buffer, 400);
        }
        assert!(
            buffer.capacity() <= 800,
            "{} items of room kept for uses of 400",
            buffer.capacity()
        );
    }

    #[test]
    fn steady_use_keeps_its_room_and_never_reallocates() {
        let mut buffer = ReusedBuffer::default();
        use_with(&mut buffer, 1_000);
        let room = buffer.as_ptr();
        let mut x = 7u64;
        for _ in 0..5 * WINDOW {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            // Uses that vary from 500 to 1,000 items.
            use_with(&mut buffer, 500 + (x >> 33) as usize % 501);
            assert_eq!(buffer.as_ptr(), room, "reallocated in steady use");
        }
    }

    #[test]
    fn a_buffer_past_keep_goes_at_once_and_a_quiet_one_keeps_its_floor() {
        let mut buffer = ReusedBuffer::default();
        use_with(&mut buffer, ReusedBuffer::<u64>::KEEP + 1);
        assert_eq!(buffer.capacity(), 0);
        use_with(&mut buffer, FLOOR);
        for _ in 0..3 * WINDOW {
            use_with(&mut buffer, 1);
        }
        assert!(buffer.capacity() >= FLOOR);
    }

    #[test]
    fn items_left_in_at_the_end_of_a_use_are_kept() {
        let mut buffer = ReusedBuffer::default();
        for i in 0..WINDOW as u64 {
            buffer.push(i);
            buffer.end_use();
        }
        assert_eq!(buffer.len(), WINDOW as usize);
        assert_eq!(buffer[3], 3);
        // Past `KEEP` too.
        let mut large = ReusedBuffer::default();
        large.extend(0..ReusedBuffer::<u64>::KEEP as u64 + 1);
        large.end_use();
        assert_eq!(large.len(), ReusedBuffer::<u64>::KEEP + 1);
    }
}
