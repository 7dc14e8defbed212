//! `CLOCK_MONOTONIC` in nanoseconds, the clock `Instant` reads on Linux,
//! without `Instant`'s arithmetic (why: `ticks.rs`). The C library's
//! `clock_gettime` reads it in the vDSO, no system call, and falls back to
//! the system call where there is no vDSO (under valgrind, for one).

/// Nanoseconds on the monotonic clock (saturating); `None` if the clock
/// cannot be read.
#[inline]
pub(crate) fn nanos() -> Option<u64> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable `timespec` for the whole call, the
    // only memory `clock_gettime` writes; the clock id is a constant the
    // kernel knows (an unknown one would only return an error).
    let status = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    if status != 0 {
        return None;
    }
    let secs = u64::try_from(now.tv_sec).ok()?;
    let nanos = u64::try_from(now.tv_nsec).ok()?;
    Some(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn it_moves_with_instant() {
        let (first, from) = (nanos().unwrap(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (to, last) = (Instant::now(), nanos().unwrap());
        let elapsed = Duration::from_nanos(last - first);
        // `first..last` holds `from..to`: by a few microseconds, unless
        // the thread was preempted between two reads.
        assert!(elapsed >= to - from, "{elapsed:?} {:?}", to - from);
        assert!(elapsed - (to - from) < Duration::from_millis(100));
    }
}
