//! The proxy's one clock: time since the proxy started, as the `now: Duration` the pure
//! balancer and resilience code takes.
//!
//! Built on `tokio::time::Instant`, so tests running on paused time drive the same code.

use std::time::Duration;
use tokio::time::Instant;

/// A monotonic clock counting from its start.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// A clock reading zero now.
    pub fn start() -> Self {
        Self {
            start: Instant::now(),
        }
    }

    /// Time since [`Clock::start`].
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// The instant this clock reads `at`: a timer's deadline from a reading already taken,
    /// with no second read of the clock.
    pub fn at(&self, at: Duration) -> Instant {
        self.start + at
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "current_thread")]
    async fn a_new_clock_starts_near_zero() {
        let clock = super::Clock::start();
        assert!(clock.now() < std::time::Duration::from_secs(1));
    }
}
