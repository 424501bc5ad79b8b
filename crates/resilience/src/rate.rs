//! A token bucket: at most `rate` requests a second on average, `burst` at once.
//!
//! # What
//! The bucket holds up to `burst` tokens and gains `rate` a second, counted at each request
//! from the time since the last (`now` passed in). A request takes one token; with none, it is
//! refused and told how long until one is there. One bucket per service (or route) per
//! process: N proxies admit N times the rate.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_resilience::rate::{RateLimit, TokenBucket};
//!
//! let mut b = TokenBucket::new(RateLimit { per_sec: 10.0, burst: 2 }, Duration::ZERO);
//! assert!(b.take(Duration::ZERO).is_ok());
//! assert!(b.take(Duration::ZERO).is_ok());
//! assert_eq!(b.take(Duration::ZERO), Err(Duration::from_millis(100))); // a token in 100 ms
//! assert!(b.take(Duration::from_millis(100)).is_ok());
//! ```

use std::time::Duration;

/// Rate limit settings (`rateLimit: {requestsPerSec, burst}`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    /// Tokens gained a second.
    pub per_sec: f64,
    /// Tokens held at most (requests at once).
    pub burst: u32,
}

/// A [`RateLimit`] that cannot work.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RateLimitError {
    /// The rate must be positive and at most 10 million a second.
    #[error("requestsPerSec must be above 0 and at most 10000000, got {0}")]
    Rate(f64),
    /// The burst must be between 1 and 10 million.
    #[error("burst must be between 1 and 10000000, got {0}")]
    Burst(u32),
}

impl RateLimit {
    /// Checks the settings.
    ///
    /// # Errors
    /// The first [`RateLimitError`] found.
    pub fn validate(&self) -> Result<(), RateLimitError> {
        if !(self.per_sec > 0.0 && self.per_sec <= 1e7) {
            return Err(RateLimitError::Rate(self.per_sec));
        }
        if !(1..=10_000_000).contains(&self.burst) {
            return Err(RateLimitError::Burst(self.burst));
        }
        Ok(())
    }
}

/// One bucket (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenBucket {
    limit: RateLimit,
    tokens: f64,
    stamp: Duration,
}

impl TokenBucket {
    /// A full bucket at `now`.
    pub fn new(limit: RateLimit, now: Duration) -> Self {
        Self {
            limit,
            tokens: f64::from(limit.burst),
            stamp: now,
        }
    }

    /// Takes one token at `now`; `Err(wait)`: none there, one in `wait`.
    ///
    /// # Errors
    /// How long until a token, when none is left.
    pub fn take(&mut self, now: Duration) -> Result<(), Duration> {
        let elapsed = now.saturating_sub(self.stamp).as_secs_f64();
        self.stamp = self.stamp.max(now);
        let burst = f64::from(self.limit.burst);
        self.tokens = (self.tokens + elapsed * self.limit.per_sec).min(burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        let wait = (1.0 - self.tokens) / self.limit.per_sec.max(f64::MIN_POSITIVE);
        Err(Duration::from_secs_f64(wait.min(3600.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn validate_refuses_what_cannot_work() {
        let ok = RateLimit {
            per_sec: 100.0,
            burst: 10,
        };
        assert_eq!(ok.validate(), Ok(()));
        assert!(RateLimit { per_sec: 0.0, ..ok }.validate().is_err());
        assert!(RateLimit {
            per_sec: f64::NAN,
            ..ok
        }
        .validate()
        .is_err());
        assert!(RateLimit { burst: 0, ..ok }.validate().is_err());
    }

    #[test]
    fn a_steady_flood_gets_the_rate() {
        let mut b = TokenBucket::new(
            RateLimit {
                per_sec: 100.0,
                burst: 10,
            },
            Duration::ZERO,
        );
        let granted = (0..10_000u64)
            .filter(|t| b.take(Duration::from_micros(t * 1_000)).is_ok())
            .count();
        // 10 s at 100/s, plus the burst.
        assert!((1_005..=1_011).contains(&granted), "{granted}");
    }

    proptest! {
        /// Over any span, the tokens granted are at most burst + rate x span (and a bucket
        /// asked once a millisecond grants about that many).
        #[test]
        fn never_more_than_burst_plus_rate(per_sec in 1.0f64..5_000.0, burst in 1u32..100, ms in 1u64..5_000) {
            let mut b = TokenBucket::new(RateLimit { per_sec, burst }, Duration::ZERO);
            let mut granted = 0u64;
            for t in 0..=ms {
                for _ in 0..3 {
                    granted += u64::from(b.take(Duration::from_millis(t)).is_ok());
                }
            }
            let most = f64::from(burst) + per_sec * ms as f64 / 1000.0;
            prop_assert!(granted as f64 <= most + 1e-6, "{granted} > {most}");
        }
    }
}
