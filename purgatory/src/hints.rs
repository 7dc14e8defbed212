//! What a handle keeps beside its cell: where the operation's entries were
//! stored, and whether its submission completed it.

use crate::unchecked::{lane, prefetch};

/// Where the operation's first watch entry and its timer entry were stored
/// at submission, for a completion through the handle to prefetch before it
/// reads the cell (see `unchecked/prefetch.rs`), and whether the submission
/// itself completed the operation.
///
/// That flag is the watch address's low bit, which a watch slot's
/// alignment leaves free, so that a handle is three words with no padding:
/// a handle with a `bool` beside them was copied, on its way out of a
/// submission, in overlapping moves of its padding bytes, and the loads
/// that read them back waited for the stores instead of taking their data.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hints {
    /// The first watch entry's address (0: none recorded), or'ed with
    /// [`AT_ONCE`](Self::AT_ONCE).
    watch: usize,
    /// The timer entry's hint (`lane::prefetch_entry` reads it), 0 if none.
    timer: usize,
}

impl Hints {
    /// The watch word's bit for "completed by the submission".
    const AT_ONCE: usize = 1;

    /// Nothing to prefetch.
    pub(crate) const NONE: Hints = Hints { watch: 0, timer: 0 };

    /// Hints for entries at `watch` and `timer`; `watch` must leave the
    /// low bit clear (a watch slot's address does).
    pub(crate) fn new(watch: usize, timer: usize) -> Self {
        debug_assert_eq!(watch & Self::AT_ONCE, 0, "a watch slot is aligned");
        Hints { watch, timer }
    }

    /// The same hints, marked completed at once.
    pub(crate) fn completed_at_once(self) -> Self {
        Hints {
            watch: self.watch | Self::AT_ONCE,
            ..self
        }
    }

    /// Whether the submission completed the operation.
    pub(crate) fn at_once(self) -> bool {
        self.watch & Self::AT_ONCE != 0
    }

    /// The first watch entry's address, 0 if none was recorded.
    pub(crate) fn watch(self) -> usize {
        self.watch & !Self::AT_ONCE
    }

    /// Both entries' addresses, without the flag.
    #[cfg(test)]
    pub(crate) fn addresses(self) -> [usize; 2] {
        [self.watch(), self.timer]
    }

    /// Asks the CPU for both entries' lines, ready to be written.
    #[inline(always)]
    pub(crate) fn prefetch(self) {
        prefetch::for_write(self.watch());
        lane::prefetch_entry(self.timer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_leaves_the_addresses_alone() {
        let hints = Hints::new(0x1000, 0x2001);
        assert!(!hints.at_once());
        let marked = hints.completed_at_once();
        assert!(marked.at_once());
        assert_eq!(marked.addresses(), [0x1000, 0x2001]);
        assert!(Hints::NONE.completed_at_once().at_once());
        assert_eq!(Hints::NONE.completed_at_once().watch(), 0);
    }
}
