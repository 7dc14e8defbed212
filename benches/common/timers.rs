//! The `--timer` option of the benches that serve the wire front.

use broker_sim::config::TimerChoice;

/// Which purgatory timer to run.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum TimerArg {
    /// The timing wheel.
    Wheel,
    /// The DelayQueue baseline.
    Delayqueue,
}

/// The timers to run: the one asked for, or both, wheel first.
pub fn timers(arg: Option<TimerArg>) -> Vec<TimerChoice> {
    match arg {
        None => vec![TimerChoice::Wheel, TimerChoice::DelayQueue],
        Some(TimerArg::Wheel) => vec![TimerChoice::Wheel],
        Some(TimerArg::Delayqueue) => vec![TimerChoice::DelayQueue],
    }
}
