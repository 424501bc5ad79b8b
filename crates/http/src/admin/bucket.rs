//! The token bucket every pace of the admin server is made of: tokens refilled at a steady
//! rate up to a burst, one taken per turn. Tokens go below zero for the turns given ahead, so
//! callers that wait are served in order at the rate (a turn is reserved, then slept for); a
//! caller that gives up waiting gives its turn back, or the turns given ahead would pile up
//! past the callers waiting for them (a client that resets its HTTP/2 streams, or a probe lane
//! connection closed while it waited).
//!
//! The clock is an argument, so the bucket is exact in tests.
//!
//! ```text
//! let mut b = Bucket::new(10, 2, t0);
//! assert_eq!(b.reserve(t0, Duration::MAX), Some(Duration::ZERO)); // from the burst
//! ```

use std::time::Duration;
use tokio::time::Instant;

/// Tokens refilled at a steady rate up to a burst (see the module docs).
#[derive(Debug)]
pub(crate) struct Bucket {
    tokens: f64,
    at: Instant,
    rate: f64,
    burst: f64,
}

impl Bucket {
    /// A full bucket of `burst` tokens, refilled at `rate` a second.
    pub(crate) fn new(rate: u32, burst: u32, now: Instant) -> Self {
        Self {
            tokens: f64::from(burst),
            at: now,
            rate: f64::from(rate),
            burst: f64::from(burst),
        }
    }

    /// A turn: how long until it comes (zero: now), or `None` when that is past `max_wait`
    /// (or never comes, at a rate of zero). A turn refused takes no token.
    pub(crate) fn reserve(&mut self, now: Instant, max_wait: Duration) -> Option<Duration> {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * self.rate;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.at = now;
        let wait = if self.tokens >= 1.0 {
            Duration::ZERO
        } else if self.rate > 0.0 {
            Duration::try_from_secs_f64((1.0 - self.tokens) / self.rate).ok()?
        } else {
            return None;
        };
        if wait > max_wait {
            return None;
        }
        self.tokens -= 1.0;
        Some(wait)
    }

    /// Gives back a turn reserved and not taken (its caller gave up waiting), so that the
    /// turns given ahead are never more than the callers still waiting for them.
    pub(crate) fn refund(&mut self) {
        self.tokens = (self.tokens + 1.0).min(self.burst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Turns come in order at the rate after the burst; a turn past the wait is refused and
    /// takes no token; a turn given back is the next one's; a rate of zero never gives one past
    /// the burst.
    #[test]
    fn a_bucket_gives_turns_in_order_at_its_rate() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut b = Bucket::new(10, 2, t0);
        let turns: Vec<_> = (0..4).map(|_| b.reserve(t0, ms(250))).collect();
        assert_eq!(
            turns,
            [Some(ms(0)), Some(ms(0)), Some(ms(100)), Some(ms(200))]
        );
        assert_eq!(b.reserve(t0, ms(250)), None);
        // 300 ms later the two turns given ahead are paid and one token is back.
        assert_eq!(b.reserve(t0 + ms(300), ms(0)), Some(ms(0)));
        assert_eq!(b.reserve(t0 + ms(300), Duration::MAX), Some(ms(100)));
        // A turn given back goes to the next caller.
        b.refund();
        assert_eq!(b.reserve(t0 + ms(300), Duration::MAX), Some(ms(100)));
        let mut never = Bucket::new(0, 1, t0);
        assert_eq!(never.reserve(t0, Duration::MAX), Some(ms(0)));
        assert_eq!(never.reserve(t0 + ms(10_000), Duration::MAX), None);
    }
}
