//! Adaptive concurrency limits: how many attempts a service may have in flight, learned from
//! their round trips, after Netflix's concurrency-limits (Gradient2 and AIMD, each fed by a
//! window of samples).
//!
//! # What
//! A sample is a successful unary attempt's round trip (send to response head) with the number
//! of attempts in flight when it ended; a timed-out attempt is a *drop*. Failures, cancelled
//! backups and streams say nothing about queueing and are not samples. Samples gather in a
//! window of a second (Netflix's `WindowedLimit` default), which closes at the first sample or
//! drop after it; a window of fewer than [`WINDOW_SAMPLES`] samples and no drop says too little
//! and is dropped. At each close the algorithm moves the limit, from the window's mean round
//! trip, its most attempts in flight, and whether it saw a drop:
//!
//! - **gradient** (Gradient2): the long-term round trip is an exponential average over
//!   `long_window` windows (a plain mean over the first ten), cut by 5% whenever it is more than
//!   twice the window's, so it comes back down after a long overload. The gradient is
//!   `rtt_tolerance x long / short`, within 0.5 and 1: 1 while the round trip stays within the
//!   tolerance (no queue is building), less as it grows. The new limit is `limit x gradient +
//!   queue` (`queue` = 4: room to find out whether more would do), smoothed: `limit x (1 -
//!   smoothing) + new x smoothing`. A window whose most in flight stayed under half the limit
//!   leaves it alone (the demand, not the backend, set its round trip), and a drop takes the
//!   gradient to its floor, 0.5.
//! - **aimd**: a drop multiplies the limit by `backoff_ratio`; a window with at least half the
//!   limit in flight adds one.
//!
//! The limit stays within `min` and `max`. Unlike Envoy's gradient controller, nothing here
//! re-measures a minimum round trip by pinning the limit low: the long-term average follows
//! the backend, so there is no periodic burst of refusals.
//!
//! Pure: `now` is passed in; the proxy and the simulator drive the same struct.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_resilience::limit::{ConcurrencyLimit, LimitConfig};
//!
//! let ms = Duration::from_millis;
//! let mut limit = ConcurrencyLimit::new(LimitConfig::gradient(), Duration::ZERO);
//! assert_eq!(limit.limit(), 20);
//! // A backend answering in 10 ms while 20 are in flight: no queue, the limit grows.
//! for i in 0..2_000 {
//!     limit.on_sample(ms(i * 5), ms(10), 20);
//! }
//! assert!(limit.limit() > 20);
//! ```

use std::time::Duration;

/// The fewest samples a window without a drop needs to count.
pub const WINDOW_SAMPLES: u32 = 10;
/// A window's length: it closes at its first sample or drop after this.
pub const WINDOW: Duration = Duration::from_secs(1);
/// Windows averaged plainly before the long-term round trip turns exponential.
const WARMUP: u32 = 10;

/// How the limit moves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Algorithm {
    /// Netflix's Gradient2.
    Gradient {
        /// How far each window's new limit moves the limit (0 to 1).
        smoothing: f64,
        /// How much longer than the long-term round trip a window's may be before the limit
        /// comes down (at least 1).
        rtt_tolerance: f64,
        /// Windows in the long-term round trip's average.
        long_window: u32,
        /// Added to each new limit: room to find out whether more would do.
        queue: u32,
    },
    /// Additive increase, multiplicative decrease.
    Aimd {
        /// What a drop multiplies the limit by (0.5 to 1).
        backoff_ratio: f64,
    },
}

/// An adaptive limit's settings (`concurrencyLimit`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LimitConfig {
    /// The limit before any window closes.
    pub initial: u32,
    /// The least it may fall to.
    pub min: u32,
    /// The most it may grow to.
    pub max: u32,
    /// How it moves.
    pub algorithm: Algorithm,
}

impl LimitConfig {
    /// Gradient2 with Netflix's defaults: initial 20, within 4 and 1000, smoothing 0.2,
    /// tolerance 1.5, a long window of 600, a queue of 4.
    pub fn gradient() -> Self {
        LimitConfig {
            initial: 20,
            min: 4,
            max: 1000,
            algorithm: Algorithm::Gradient {
                smoothing: 0.2,
                rtt_tolerance: 1.5,
                long_window: 600,
                queue: 4,
            },
        }
    }

    /// AIMD: initial 20, within 4 and 1000, backing off to 0.9.
    pub fn aimd() -> Self {
        LimitConfig {
            algorithm: Algorithm::Aimd { backoff_ratio: 0.9 },
            ..Self::gradient()
        }
    }

    /// Checks the settings; the error names the field (as the configuration spells it).
    ///
    /// # Errors
    /// The first field out of its range.
    pub fn validate(&self) -> Result<(), LimitError> {
        let bad = |field: &'static str, range: &'static str, got: String| {
            Err(LimitError { field, range, got })
        };
        if !(1..=MAX_LIMIT).contains(&self.min) {
            return bad("minLimit", "1 to 100000", self.min.to_string());
        }
        if !(self.min..=MAX_LIMIT).contains(&self.max) {
            return bad("maxLimit", "minLimit to 100000", self.max.to_string());
        }
        if !(self.min..=self.max).contains(&self.initial) {
            return bad(
                "initialLimit",
                "minLimit to maxLimit",
                self.initial.to_string(),
            );
        }
        match self.algorithm {
            Algorithm::Gradient {
                smoothing,
                rtt_tolerance,
                long_window,
                queue,
            } => {
                if !(smoothing > 0.0 && smoothing <= 1.0) {
                    return bad("smoothing", "above 0, at most 1", smoothing.to_string());
                }
                if !(1.0..=100.0).contains(&rtt_tolerance) {
                    return bad("rttTolerance", "1 to 100", rtt_tolerance.to_string());
                }
                if !(1..=1_000_000).contains(&long_window) {
                    return bad("longWindow", "1 to 1000000", long_window.to_string());
                }
                if queue > MAX_LIMIT {
                    return bad("queueSize", "0 to 100000", queue.to_string());
                }
            }
            Algorithm::Aimd { backoff_ratio } => {
                if !(0.5..1.0).contains(&backoff_ratio) {
                    return bad("backoffRatio", "0.5 to below 1", backoff_ratio.to_string());
                }
            }
        }
        Ok(())
    }
}

/// The largest `maxLimit`.
pub const MAX_LIMIT: u32 = 100_000;

/// A [`LimitConfig`] field out of its range.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{field} must be {range}, got {got}")]
pub struct LimitError {
    /// The field, as the configuration spells it.
    pub field: &'static str,
    /// Its range, in words.
    pub range: &'static str,
    /// What it was.
    pub got: String,
}

/// The samples of the window being gathered.
#[derive(Clone, Debug, PartialEq)]
struct Window {
    start: Duration,
    count: u32,
    sum_ns: u128,
    max_in_flight: u32,
    dropped: bool,
}

impl Window {
    fn new(start: Duration) -> Self {
        Window {
            start,
            count: 0,
            sum_ns: 0,
            max_in_flight: 0,
            dropped: false,
        }
    }

    fn closes(&self, now: Duration) -> bool {
        now.saturating_sub(self.start) >= WINDOW
    }

    /// It says enough to move the limit.
    fn counts(&self) -> bool {
        self.count >= WINDOW_SAMPLES || self.dropped
    }

    /// The mean round trip, in seconds (`None` without samples).
    fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ns as f64 / f64::from(self.count) / 1e9)
    }
}

/// One service's adaptive limit (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct ConcurrencyLimit {
    cfg: LimitConfig,
    limit: f64,
    /// The long-term round trip, seconds, and the windows in it.
    long: f64,
    longs: u32,
    window: Window,
}

impl ConcurrencyLimit {
    /// A limit at its initial value, its first window starting at `now`. `cfg` is assumed
    /// valid ([`LimitConfig::validate`]); out-of-range values are clamped.
    pub fn new(cfg: LimitConfig, now: Duration) -> Self {
        let min = cfg.min.max(1);
        let max = cfg.max.max(min);
        ConcurrencyLimit {
            limit: f64::from(cfg.initial.clamp(min, max)),
            cfg: LimitConfig { min, max, ..cfg },
            long: 0.0,
            longs: 0,
            window: Window::new(now),
        }
    }

    /// Attempts that may be in flight now.
    pub fn limit(&self) -> u32 {
        (self.limit as u32).clamp(self.cfg.min, self.cfg.max)
    }

    /// The long-term round trip, once a window has closed.
    pub fn long_rtt(&self) -> Option<Duration> {
        (self.longs > 0).then(|| Duration::from_secs_f64(self.long))
    }

    /// A successful attempt ended at `now` after `rtt`, with `in_flight` attempts in flight.
    pub fn on_sample(&mut self, now: Duration, rtt: Duration, in_flight: u32) {
        let w = &mut self.window;
        w.count += 1;
        w.sum_ns += rtt.as_nanos();
        w.max_in_flight = w.max_in_flight.max(in_flight);
        self.maybe_close(now);
    }

    /// An attempt timed out at `now`, with `in_flight` attempts in flight.
    pub fn on_drop(&mut self, now: Duration, in_flight: u32) {
        let w = &mut self.window;
        w.dropped = true;
        w.max_in_flight = w.max_in_flight.max(in_flight);
        self.maybe_close(now);
    }

    fn maybe_close(&mut self, now: Duration) {
        if !self.window.closes(now) {
            return;
        }
        let window = std::mem::replace(&mut self.window, Window::new(now));
        if window.counts() {
            self.update(&window);
        }
    }

    fn update(&mut self, w: &Window) {
        let (min, max) = (f64::from(self.cfg.min), f64::from(self.cfg.max));
        let limited_by_demand = f64::from(w.max_in_flight) < self.limit / 2.0;
        let next = match self.cfg.algorithm {
            Algorithm::Aimd { backoff_ratio } if w.dropped => self.limit * backoff_ratio,
            Algorithm::Aimd { .. } if limited_by_demand => self.limit,
            Algorithm::Aimd { .. } => self.limit + 1.0,
            Algorithm::Gradient {
                smoothing,
                rtt_tolerance,
                long_window,
                queue,
            } => {
                let gradient = match w.mean() {
                    _ if w.dropped => 0.5,
                    None => return,
                    Some(short) => {
                        let long = self.learn(short, long_window);
                        if limited_by_demand || short <= 0.0 {
                            return;
                        }
                        (rtt_tolerance * long / short).clamp(0.5, 1.0)
                    }
                };
                let new = self.limit * gradient + f64::from(queue);
                self.limit * (1.0 - smoothing) + new * smoothing
            }
        };
        self.limit = next.clamp(min, max);
    }

    /// Adds a window's mean round trip `short` to the long-term one; returns the latter.
    fn learn(&mut self, short: f64, window: u32) -> f64 {
        self.longs = self.longs.saturating_add(1);
        if self.longs <= WARMUP {
            self.long += (short - self.long) / f64::from(self.longs);
        } else {
            let alpha = 2.0 / (f64::from(window) + 1.0);
            self.long += (short - self.long) * alpha;
        }
        if self.long > 2.0 * short {
            self.long *= 0.95;
        }
        self.long
    }
}

#[cfg(test)]
mod tests;
