//! The run's clock: offsets from the start of the run, read from the monotonic clock.
//!
//! This is the one place the load generator reads the time. Records hold offsets, so the
//! pure crates (record, report, pacing) never see an `Instant`.

use std::time::{Duration, Instant};

/// A monotonic clock started at the beginning of the run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    start: Instant,
}

impl Clock {
    /// A clock starting now.
    #[allow(clippy::disallowed_methods)] // The live generator measures real time by design.
    pub(crate) fn start() -> Clock {
        Clock {
            start: Instant::now(),
        }
    }

    /// The instant the run started.
    pub(crate) fn origin(&self) -> Instant {
        self.start
    }

    /// Time since the start.
    pub(crate) fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}
