//! Hedged requests: when an attempt is slower than almost all recent ones, send a backup to
//! another endpoint and take whichever answers first.
//!
//! # What
//! Finagle's `BackupRequestFilter`, with time passed in:
//! 1. Completed attempt latencies go into a histogram; every `window` the current histogram
//!    becomes the previous one. Every `refresh`, the hedge delay is recomputed as the
//!    `1 - max_extra_load` quantile of both (p95 for 5% extra load), once `min_samples` are in
//!    (the first time as soon as they are).
//! 2. Each request deposits into a [`RetryBudget`] whose share is `max_extra_load`; a backup is
//!    sent only if the budget allows it, so hedging never adds more than that share of load
//!    (plus `min_per_sec`).
//!
//! The histogram is tailguard's one [`Histogram`]; nothing allocates after construction.
//!
//! # Why
//! "The Tail at Scale" (Dean and Barroso, 2013): a backup after the p95 cuts the p99.9 far more
//! than its 5% extra load costs, because a slow attempt is usually slow for reasons local to
//! its endpoint. No proxy among the anchors exposes this (Linkerd 1 issue 1069); the simulator
//! shows what it buys.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_resilience::{HedgeConfig, Hedger};
//!
//! let ms = Duration::from_millis;
//! let config = HedgeConfig { min_samples: 100, ..HedgeConfig::default() };
//! let mut h = Hedger::new(config);
//! assert_eq!(h.delay(ms(0)), None); // no data yet
//! for i in 0..100u64 {
//!     h.on_request(ms(i));
//!     h.record(ms(10 + i % 20), ms(i));
//! }
//! let delay = h.delay(ms(2_000)).unwrap();
//! assert!(delay >= ms(28) && delay <= ms(30), "{delay:?}");
//! assert!(h.try_hedge(ms(2_000))); // 5% of 100 requests: up to 5 backups
//! ```

use crate::{BudgetError, RetryBudget, RetryBudgetConfig};
use std::time::Duration;
use tailguard_histogram::Histogram;

/// Parameters of a [`Hedger`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HedgeConfig {
    /// The share of extra requests allowed; also sets the delay quantile (`1 - max_extra_load`).
    pub max_extra_load: f64,
    /// Backups always allowed per second, whatever the traffic (0: only the share).
    pub min_per_sec: u32,
    /// How long a latency sample counts (between one and two windows).
    pub window: Duration,
    /// How often the delay is recomputed.
    pub refresh: Duration,
    /// Samples needed before hedging starts.
    pub min_samples: u64,
    /// The shortest delay, so a fast service is not hedged on noise.
    pub min_delay: Duration,
}

impl Default for HedgeConfig {
    /// 5% extra load (backups after the p95), 10 s windows, refreshed every second.
    fn default() -> Self {
        Self {
            max_extra_load: 0.05,
            min_per_sec: 0,
            window: Duration::from_secs(10),
            refresh: Duration::from_secs(1),
            min_samples: 100,
            min_delay: Duration::from_millis(1),
        }
    }
}

/// A [`HedgeConfig`] that cannot work.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum HedgeError {
    /// The extra load must be a share strictly between 0 and 1.
    #[error("hedging: max_extra_load must be between 0 and 1 (exclusive), got {0}")]
    ExtraLoad(f64),
    /// Window and refresh must be positive.
    #[error("hedging: window and refresh must be above zero")]
    ZeroPeriod,
    /// The budget derived from the config.
    #[error("hedging budget: {0}")]
    Budget(#[from] BudgetError),
}

impl HedgeConfig {
    /// Checks the parameters.
    ///
    /// # Errors
    /// The first [`HedgeError`] found.
    pub fn validate(&self) -> Result<(), HedgeError> {
        if !(self.max_extra_load > 0.0 && self.max_extra_load < 1.0) {
            return Err(HedgeError::ExtraLoad(self.max_extra_load));
        }
        if self.window.is_zero() || self.refresh.is_zero() {
            return Err(HedgeError::ZeroPeriod);
        }
        self.budget().validate()?;
        Ok(())
    }

    fn budget(&self) -> RetryBudgetConfig {
        RetryBudgetConfig {
            ttl: self
                .window
                .clamp(Duration::from_secs(1), Duration::from_secs(60)),
            min_per_sec: self.min_per_sec,
            percent: self.max_extra_load,
        }
    }
}

/// The hedging state of one client.
#[derive(Clone, Debug)]
pub struct Hedger {
    config: HedgeConfig,
    current: Histogram,
    previous: Histogram,
    scratch: Histogram,
    next_rotation: Duration,
    next_refresh: Duration,
    delay: Option<Duration>,
    budget: RetryBudget,
}

impl Hedger {
    /// A hedger with no data (it does not hedge until `min_samples` are in).
    pub fn new(config: HedgeConfig) -> Self {
        Self {
            config,
            current: Histogram::new(),
            previous: Histogram::new(),
            scratch: Histogram::new(),
            next_rotation: config.window,
            next_refresh: Duration::ZERO,
            delay: None,
            budget: RetryBudget::new(config.budget()),
        }
    }

    /// A request arrived at `now` (a deposit into the backup budget).
    pub fn on_request(&mut self, now: Duration) {
        self.budget.deposit(now);
    }

    /// An attempt completed at `now` after `latency`.
    pub fn record(&mut self, latency: Duration, now: Duration) {
        self.rotate(now);
        self.current.record(latency);
    }

    /// How long to wait before sending a backup, as of `now`; `None` until there is data.
    pub fn delay(&mut self, now: Duration) -> Option<Duration> {
        self.rotate(now);
        // Without a delay yet, it is computed as soon as the samples are in, not a refresh
        // later: a fresh client starts hedging once it knows enough.
        let first = self.delay.is_none()
            && self.previous.count() + self.current.count() >= self.config.min_samples;
        if now >= self.next_refresh || first {
            self.next_refresh = now + self.config.refresh;
            self.scratch.reset();
            self.scratch.merge(&self.previous);
            self.scratch.merge(&self.current);
            self.delay = (self.scratch.count() >= self.config.min_samples).then(|| {
                let q = self.scratch.quantile(1.0 - self.config.max_extra_load);
                q.max(self.config.min_delay)
            });
        }
        self.delay
    }

    /// Asks to send one backup at `now`; true (and charged) when the budget allows.
    pub fn try_hedge(&mut self, now: Duration) -> bool {
        self.budget.try_withdraw(now)
    }

    /// Step 1: start a new window when the current one is over.
    fn rotate(&mut self, now: Duration) {
        if now < self.next_rotation {
            return;
        }
        std::mem::swap(&mut self.current, &mut self.previous);
        let two_windows = self.next_rotation + self.config.window;
        if now >= two_windows {
            self.previous.reset(); // idle for a whole window: nothing recent survives
        }
        self.current.reset();
        let periods = (now - self.next_rotation).as_nanos() / self.config.window.as_nanos().max(1);
        let periods = u32::try_from(periods).unwrap_or(u32::MAX).saturating_add(1);
        self.next_rotation += self.config.window.saturating_mul(periods);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_samples_age_out() {
        let ms = Duration::from_millis;
        let config = HedgeConfig {
            min_samples: 10,
            ..HedgeConfig::default()
        };
        let mut h = Hedger::new(config);
        for i in 0..50 {
            h.record(ms(500), ms(i));
        }
        assert_eq!(h.delay(ms(100)).map(|d| d.as_millis()), Some(500));
        for i in 0..50 {
            h.record(ms(20), ms(10_000 + i));
        }
        // both windows count: p95 still 500 ms
        assert_eq!(h.delay(ms(11_000)).map(|d| d.as_millis()), Some(500));
        for i in 0..50 {
            h.record(ms(20), ms(20_000 + i));
        }
        let d = h.delay(ms(21_000)).unwrap();
        assert!(d.abs_diff(ms(20)) < ms(1), "{d:?}");
        assert_eq!(h.delay(ms(45_000)), None); // idle: no recent data
    }

    #[test]
    fn validate_rejects_a_share_outside_zero_one() {
        let bad = HedgeConfig {
            max_extra_load: 1.0,
            ..HedgeConfig::default()
        };
        assert_eq!(bad.validate(), Err(HedgeError::ExtraLoad(1.0)));
        assert_eq!(HedgeConfig::default().validate(), Ok(()));
    }
}
