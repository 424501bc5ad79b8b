//! Hedged requests: when an attempt is slower than almost all recent ones, send a backup to
//! another endpoint and take whichever answers first.
//!
//! # What
//! Finagle's `BackupRequestFilter`, with time passed in:
//! 1. Successful attempt latencies go into a histogram; every `window` the current histogram
//!    becomes the previous one. Every `refresh`, the hedge delay is recomputed as the
//!    `1 - max_extra_load` quantile of both (p95 for 5% extra load), once `min_samples` are in
//!    (the first time as soon as they are), and kept within `[min_delay, max_delay]`.
//! 2. A stalled endpoint cannot blind it: the delay is never longer than [`STALLED_FACTOR`]
//!    times the median of the endpoints' mean latencies over the same two windows (the lower
//!    middle one of an even count). Otherwise one endpoint stalled for 10 s with a third of the
//!    traffic puts the p95 at 10 s, and no backup leaves when backups are needed most; the
//!    median endpoint is the fleet's typical speed as long as fewer than half stall. (A failed
//!    attempt is no sample at all: its caller records successes only.)
//! 3. Each request deposits into a [`RetryBudget`] whose share is `max_extra_load`; a backup is
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
//! let mut h = Hedger::new(config, 1);
//! assert_eq!(h.delay(ms(0)), None); // no data yet
//! for i in 0..100u64 {
//!     h.on_request(ms(i));
//!     h.record(0, ms(10 + i % 20), ms(i));
//! }
//! let delay = h.delay(ms(2_000)).unwrap();
//! assert!(delay >= ms(28) && delay <= ms(30), "{delay:?}");
//! assert!(h.try_hedge(ms(2_000))); // 5% of 100 requests: up to 5 backups
//! ```

use crate::{BudgetError, RetryBudget, RetryBudgetConfig};
use std::time::Duration;
use tailguard_histogram::Histogram;

/// The longest hedge delay, in multiples of the median endpoint's mean latency (step 2): far
/// above any p95 of a healthy fleet, far below a stall.
pub const STALLED_FACTOR: f64 = 10.0;

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
    /// The longest delay (`None`: no cap), whatever the quantile says.
    pub max_delay: Option<Duration>,
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
            max_delay: None,
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
    /// The longest delay must not be below the shortest.
    #[error("hedging: max_delay ({max:?}) is below min_delay ({min:?})")]
    DelayRange {
        /// The shortest delay.
        min: Duration,
        /// The longest delay.
        max: Duration,
    },
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
        if let Some(max) = self.max_delay.filter(|&m| m < self.min_delay) {
            let min = self.min_delay;
            return Err(HedgeError::DelayRange { min, max });
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
    /// Per endpoint: (sum of latencies in seconds, samples) in the current window and in the
    /// previous one (step 2).
    by_endpoint: Vec<[(f64, u32); 2]>,
    /// The median of the endpoints' mean latencies at the last refresh, in seconds (`None`:
    /// fewer than two endpoints had samples).
    typical: Option<f64>,
    /// The endpoints' means, reused at every refresh.
    means: Vec<f64>,
}

impl Hedger {
    /// A hedger over `endpoints` endpoints with no data (it does not hedge until
    /// `min_samples` are in).
    pub fn new(config: HedgeConfig, endpoints: usize) -> Self {
        Self {
            config,
            current: Histogram::new(),
            previous: Histogram::new(),
            scratch: Histogram::new(),
            next_rotation: config.window,
            next_refresh: Duration::ZERO,
            delay: None,
            budget: RetryBudget::new(config.budget()),
            by_endpoint: vec![[(0.0, 0); 2]; endpoints],
            typical: None,
            means: Vec::with_capacity(endpoints),
        }
    }

    /// Takes over `old`'s latencies, delay and budget for a new endpoint set: `from[i]` is the
    /// index in `old` of endpoint `i` (`None`: new, no samples yet).
    pub fn inherit(&mut self, old: &Hedger, from: &[Option<usize>]) {
        let by_endpoint = from
            .iter()
            .map(|j| j.and_then(|j| old.by_endpoint.get(j).copied()))
            .map(|e| e.unwrap_or([(0.0, 0); 2]))
            .collect();
        *self = Self {
            by_endpoint,
            means: Vec::with_capacity(from.len()),
            ..old.clone()
        };
    }

    /// A request arrived at `now` (a deposit into the backup budget).
    pub fn on_request(&mut self, now: Duration) {
        self.budget.deposit(now);
    }

    /// An attempt to `endpoint` succeeded at `now` after `latency`.
    pub fn record(&mut self, endpoint: usize, latency: Duration, now: Duration) {
        self.rotate(now);
        let Some(windows) = self.by_endpoint.get_mut(endpoint) else {
            return;
        };
        windows[0].0 += latency.as_secs_f64();
        windows[0].1 = windows[0].1.saturating_add(1);
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
            self.refresh_typical();
            self.scratch.reset();
            self.scratch.merge(&self.previous);
            self.scratch.merge(&self.current);
            let min = self.config.min_delay;
            let stall_cap = self
                .typical
                .map(|t| Duration::from_secs_f64((t * STALLED_FACTOR).min(3600.0)));
            let max = match (self.config.max_delay, stall_cap) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            self.delay = (self.scratch.count() >= self.config.min_samples).then(|| {
                let q = self.scratch.quantile(1.0 - self.config.max_extra_load);
                max.map_or(q, |max| q.min(max)).max(min)
            });
        }
        self.delay
    }

    /// Step 2: the median of the endpoints' mean latencies (the lower middle one of an even
    /// count, so one stalled endpoint of two is the outlier).
    fn refresh_typical(&mut self) {
        self.means.clear();
        let sampled = self.by_endpoint.iter().filter(|w| w[0].1 > 0 || w[1].1 > 0);
        self.means.extend(sampled.map(mean));
        self.means.sort_unstable_by(f64::total_cmp);
        self.typical = (self.means.len() >= 2).then(|| self.means[(self.means.len() - 1) / 2]);
    }

    /// `endpoint`'s mean latency over the current and previous windows (`None` without
    /// samples).
    pub fn endpoint_mean(&self, endpoint: usize) -> Option<Duration> {
        let w = self.by_endpoint.get(endpoint)?;
        (w[0].1 > 0 || w[1].1 > 0).then(|| Duration::from_secs_f64(mean(w).min(3600.0)))
    }

    /// Asks to send one backup at `now`; true (and charged) when the budget allows.
    pub fn try_hedge(&mut self, now: Duration) -> bool {
        self.budget.try_withdraw(now)
    }

    /// [`Hedger::try_hedge`], the budget's per-second floor counted only when `floor` is true.
    pub fn try_hedge_with(&mut self, now: Duration, floor: bool) -> bool {
        self.budget.try_withdraw_with(now, floor)
    }

    /// Step 1: start a new window when the current one is over.
    fn rotate(&mut self, now: Duration) {
        if now < self.next_rotation {
            return;
        }
        std::mem::swap(&mut self.current, &mut self.previous);
        let two_windows = self.next_rotation + self.config.window;
        let idle = now >= two_windows;
        if idle {
            self.previous.reset(); // idle for a whole window: nothing recent survives
        }
        self.current.reset();
        for w in &mut self.by_endpoint {
            w[1] = if idle { (0.0, 0) } else { w[0] };
            w[0] = (0.0, 0);
        }
        let periods = (now - self.next_rotation).as_nanos() / self.config.window.as_nanos().max(1);
        let periods = u32::try_from(periods).unwrap_or(u32::MAX).saturating_add(1);
        self.next_rotation += self.config.window.saturating_mul(periods);
    }
}

/// An endpoint's mean latency in seconds over both windows (0 without samples).
fn mean(windows: &[(f64, u32); 2]) -> f64 {
    let count = u64::from(windows[0].1) + u64::from(windows[1].1);
    if count == 0 {
        return 0.0;
    }
    (windows[0].0 + windows[1].0) / count as f64
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
        let mut h = Hedger::new(config, 1);
        for i in 0..50 {
            h.record(0, ms(500), ms(i));
        }
        assert_eq!(h.delay(ms(100)).map(|d| d.as_millis()), Some(500));
        for i in 0..50 {
            h.record(0, ms(20), ms(10_000 + i));
        }
        // both windows count: p95 still 500 ms
        assert_eq!(h.delay(ms(11_000)).map(|d| d.as_millis()), Some(500));
        for i in 0..50 {
            h.record(0, ms(20), ms(20_000 + i));
        }
        let d = h.delay(ms(21_000)).unwrap();
        assert!(d.abs_diff(ms(20)) < ms(1), "{d:?}");
        assert_eq!(h.delay(ms(45_000)), None); // idle: no recent data
    }

    #[test]
    fn a_stalled_endpoint_cannot_stretch_the_delay() {
        let ms = Duration::from_millis;
        let config = HedgeConfig {
            min_samples: 30,
            ..HedgeConfig::default()
        };
        let mut h = Hedger::new(config, 3);
        // Round robin over three 20 ms endpoints for a second.
        for i in 0..300u64 {
            h.record((i % 3) as usize, ms(20), ms(i));
        }
        assert_eq!(h.delay(ms(300)).map(|d| d.as_millis()), Some(20));
        // Endpoint 2 stalls: its attempts take 10 s, a third of all samples.
        for i in 300..3_000u64 {
            let e = (i % 3) as usize;
            h.record(e, if e == 2 { ms(10_000) } else { ms(20) }, ms(i));
        }
        let d = h.delay(ms(3_000)).unwrap();
        assert!(d <= ms(200), "{d:?}");
        // Two endpoints, one stalled: the lower median is the healthy one.
        let mut h = Hedger::new(config, 2);
        for i in 0..200u64 {
            h.record((i % 2) as usize, ms(20), ms(i));
        }
        h.delay(ms(200));
        for i in 200..2_000u64 {
            let e = (i % 2) as usize;
            h.record(e, if e == 1 { ms(5_000) } else { ms(20) }, ms(i));
        }
        assert!(h.delay(ms(2_000)).unwrap() <= ms(200));
    }

    #[test]
    fn a_slow_fleet_is_not_a_stalled_endpoint_and_max_delay_caps_the_delay() {
        let ms = Duration::from_millis;
        let config = HedgeConfig {
            min_samples: 30,
            ..HedgeConfig::default()
        };
        // Every endpoint equally slow: nothing is left out.
        let mut h = Hedger::new(config, 3);
        for i in 0..600u64 {
            h.record((i % 3) as usize, ms(200 + i % 10), ms(i));
        }
        h.delay(ms(600));
        for i in 600..1_200u64 {
            h.record((i % 3) as usize, ms(200 + i % 10), ms(i));
        }
        assert_eq!(h.delay(ms(1_200)).map(|d| d.as_millis()), Some(209));
        let capped = HedgeConfig {
            max_delay: Some(ms(50)),
            ..config
        };
        let mut h = Hedger::new(capped, 1);
        for i in 0..100u64 {
            h.record(0, ms(200), ms(i));
        }
        assert_eq!(h.delay(ms(100)), Some(ms(50)));
    }

    #[test]
    fn validate_rejects_a_share_outside_zero_one() {
        let bad = HedgeConfig {
            max_extra_load: 1.0,
            ..HedgeConfig::default()
        };
        assert_eq!(bad.validate(), Err(HedgeError::ExtraLoad(1.0)));
        assert_eq!(HedgeConfig::default().validate(), Ok(()));
        let inverted = HedgeConfig {
            min_delay: Duration::from_millis(10),
            max_delay: Some(Duration::from_millis(5)),
            ..HedgeConfig::default()
        };
        assert!(inverted
            .validate()
            .unwrap_err()
            .to_string()
            .contains("below"));
    }
}
