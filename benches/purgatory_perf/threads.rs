//! CPU time per thread (and the process's) over a run, so that a run says which thread the
//! rate is bound by: at saturation one thread is busy all the time, and
//! its name tells where to look (the generator submits, `completer`
//! force-completes, the purgatory's `-timer` and `-expiration-` threads
//! expire).
//!
//! Read from Linux's `/proc/self/task/*/schedstat` (nanoseconds on a CPU,
//! as the scheduler counts them); elsewhere the list is empty.

use std::collections::HashMap;
use std::time::Duration;

/// CPU time of every live thread of the process, by thread id, with its name.
pub struct Snapshot(HashMap<u32, (String, Duration)>);

/// The live threads' CPU time now.
pub fn snapshot() -> Snapshot {
    let mut threads = HashMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Snapshot(threads);
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let read = |file: &str| std::fs::read_to_string(task.path().join(file)).ok();
        let (Some(comm), Some(stat)) = (read("comm"), read("schedstat")) else {
            continue;
        };
        let Some(ns) = stat.split_whitespace().next().and_then(|n| n.parse().ok()) else {
            continue;
        };
        threads.insert(tid, (comm.trim_end().to_string(), Duration::from_nanos(ns)));
    }
    Snapshot(threads)
}

/// The calling thread's CPU time, from the kernel: for a thread that ends
/// before the run's last snapshot, to report its own.
pub fn own() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The process's CPU time (every thread's), from the kernel.
pub fn process() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// One of the kernel's CPU-time clocks.
fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl Snapshot {
    /// Each thread's CPU time since `before` (a thread born since counts
    /// from zero), by name; the process's main thread is named
    /// `main_name`, and threads that used no CPU are left out.
    pub fn since(&self, before: &Snapshot, main_name: &str) -> Vec<(String, Duration)> {
        let main = std::process::id();
        let mut by_name: Vec<(String, Duration)> = Vec::new();
        for (tid, (name, now)) in &self.0 {
            let then = before.0.get(tid).map_or(Duration::ZERO, |(_, t)| *t);
            let used = now.saturating_sub(then);
            if used.is_zero() {
                continue;
            }
            let name = if *tid == main { main_name } else { name };
            match by_name.iter_mut().find(|(n, _)| n == name) {
                Some((_, total)) => *total += used,
                None => by_name.push((name.to_string(), used)),
            }
        }
        by_name
    }
}
