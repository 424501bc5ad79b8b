//! The one latency histogram of tailguard.
//!
//! Every tool (load, serve, proxy, sim, bench) records latencies through [`Histogram`], so their
//! percentiles are directly comparable. It wraps the `hdrhistogram` crate (Gil Tene's
//! HdrHistogram, Rust port) with the settings DESIGN.md fixes once for all:
//!
//! - values are microseconds, from 0 up to one hour, with 3 significant digits (a value is
//!   recorded within 0.1% of itself; there is no 1 ms floor as in fortio's default buckets);
//! - values above one hour are clamped to one hour and counted in [`Histogram::saturated`], so
//!   nothing is silently dropped;
//! - histograms merge ([`Histogram::merge`]), so per-worker histograms can be combined at interval
//!   ends without a shared lock per request;
//! - [`log`] writes and reads the HdrHistogram interval-log format, readable by the Java and Go
//!   HdrHistogram tools (`HistogramLogProcessor`, HdrHistogramVisualizer).
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_histogram::Histogram;
//!
//! let mut h = Histogram::new();
//! for ms in 1..=100 {
//!     h.record(Duration::from_millis(ms));
//! }
//! assert_eq!(h.count(), 100);
//! let p = h.percentiles();
//! assert!((p.p50 as i64 - 50_000).abs() <= 50);
//! assert_eq!(p.max, 100_031); // within 3 significant digits of 100 ms
//! ```

#![warn(missing_docs)]

mod buckets;
pub mod log;
mod percentiles;

pub use buckets::Bucket;
pub use percentiles::{Percentiles, QUANTILES};

use std::time::Duration;

/// The largest value recorded: one hour, in microseconds.
pub const MAX_US: u64 = 3_600 * 1_000_000;

/// Significant decimal digits kept for every value.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Significant decimal digits of a [`Histogram::compact`] histogram.
pub const COMPACT_DIGITS: u8 = 2;

/// A latency histogram in microseconds, 3 significant digits, 0 to 1 hour.
#[derive(Clone, Debug)]
pub struct Histogram {
    inner: hdrhistogram::Histogram<u64>,
    saturated: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for Histogram {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner && self.saturated == other.saturated
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        let inner = hdrhistogram::Histogram::new_with_bounds(1, MAX_US, SIGNIFICANT_DIGITS)
            .expect("static bounds are valid");
        Self {
            inner,
            saturated: 0,
        }
    }

    /// An empty histogram that keeps [`COMPACT_DIGITS`] significant digits (a value within 1%
    /// of itself) in about a seventh of the memory (26 KiB of counts instead of 188 KiB), for
    /// the many one-second windows a live dashboard keeps. Merge it only with other compact
    /// histograms.
    pub fn compact() -> Self {
        let inner = hdrhistogram::Histogram::new_with_bounds(1, MAX_US, COMPACT_DIGITS)
            .expect("static bounds are valid");
        Self {
            inner,
            saturated: 0,
        }
    }

    /// Records one latency.
    pub fn record(&mut self, latency: Duration) {
        self.record_us(duration_us(latency));
    }

    /// Records one value in microseconds; values above [`MAX_US`] are clamped and counted.
    pub fn record_us(&mut self, us: u64) {
        self.record_n_us(us, 1);
    }

    /// Records `count` occurrences of one value in microseconds.
    pub fn record_n_us(&mut self, us: u64, count: u64) {
        if count == 0 {
            return;
        }
        let clamped = if us > MAX_US {
            self.saturated = self.saturated.saturating_add(count);
            MAX_US
        } else {
            us
        };
        self.inner
            .record_n(clamped, count)
            .expect("value is within bounds after clamping");
    }

    /// Records a latency measured by a closed-loop client that meant to send one request every
    /// `expected_interval`, adding the samples it would have seen had it not waited (HdrHistogram's
    /// `recordValueWithExpectedInterval`). Open-loop measurement from the scheduled send time
    /// needs no such correction; this is for closed-loop modes and for importing other tools' data.
    pub fn record_corrected(&mut self, latency: Duration, expected_interval: Duration) {
        let us = duration_us(latency);
        let step = duration_us(expected_interval);
        self.record_us(us);
        if step == 0 {
            return;
        }
        let mut missing = us.saturating_sub(step);
        while missing >= step {
            self.record_us(missing);
            missing -= step;
        }
    }

    /// Adds every value of `other` into this histogram.
    pub fn merge(&mut self, other: &Histogram) {
        self.inner
            .add(&other.inner)
            .expect("histograms share the same bounds");
        self.saturated = self.saturated.saturating_add(other.saturated);
    }

    /// Empties the histogram, keeping its allocation (for interval snapshots).
    pub fn reset(&mut self) {
        self.inner.reset();
        self.saturated = 0;
    }

    /// Returns a copy of the current contents and empties this histogram: the interval snapshot.
    pub fn take(&mut self) -> Histogram {
        let snapshot = self.clone();
        self.reset();
        snapshot
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.inner.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Number of values that were above one hour and clamped.
    pub fn saturated(&self) -> u64 {
        self.saturated
    }

    /// Smallest recorded value in microseconds (0 when empty).
    pub fn min_us(&self) -> u64 {
        if self.is_empty() {
            0
        } else {
            self.inner.min()
        }
    }

    /// Largest recorded value in microseconds (0 when empty), as HdrHistogram reports it: the
    /// highest value equivalent to the largest recorded one.
    pub fn max_us(&self) -> u64 {
        if self.is_empty() {
            0
        } else {
            self.inner.max()
        }
    }

    /// The value at quantile `q` (0.0 to 1.0) in microseconds; 0 when empty.
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.is_empty() {
            0
        } else {
            self.inner.value_at_quantile(q.clamp(0.0, 1.0))
        }
    }

    /// The value at quantile `q` as a duration.
    pub fn quantile(&self, q: f64) -> Duration {
        Duration::from_micros(self.quantile_us(q))
    }

    /// The fraction of recorded values that are at most `us` microseconds (1.0 when empty).
    pub fn fraction_at_or_below_us(&self, us: u64) -> f64 {
        if self.is_empty() {
            return 1.0;
        }
        let below = self.inner.count_between(0, us.min(MAX_US));
        below as f64 / self.count() as f64
    }

    /// The arithmetic mean in microseconds. Never a headline figure: use percentiles.
    pub fn mean_us(&self) -> f64 {
        self.inner.mean()
    }

    /// The standard headline percentiles: min, p50, p90, p95, p99, p99.9, p99.99, max.
    pub fn percentiles(&self) -> Percentiles {
        Percentiles {
            min: self.min_us(),
            p50: self.quantile_us(0.50),
            p90: self.quantile_us(0.90),
            p95: self.quantile_us(0.95),
            p99: self.quantile_us(0.99),
            p999: self.quantile_us(0.999),
            p9999: self.quantile_us(0.9999),
            max: self.max_us(),
        }
    }

    /// The recorded values as `(value in µs, count)` pairs, lowest first, each value the
    /// highest of its bucket: what a histogram keeps when it holds few distinct values
    /// (recording them with [`Histogram::record_n_us`] into a histogram of the same kind gives
    /// the same counts). Values clamped to the top are not marked saturated again.
    ///
    /// The vector is exactly as long as it needs to be (counted first; the iterator gives no
    /// size): a dashboard keeps ten of these per service, and growing by doubling left them up
    /// to twice their size, and a chain of freed smaller ones behind each.
    pub fn recorded_us(&self) -> Vec<(u64, u64)> {
        let mut pairs = Vec::with_capacity(self.inner.iter_recorded().count());
        pairs.extend(
            self.inner
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value())),
        );
        pairs
    }

    /// The underlying `hdrhistogram` value, for serialization and interop.
    pub fn as_hdr(&self) -> &hdrhistogram::Histogram<u64> {
        &self.inner
    }

    /// Wraps an `hdrhistogram` read from elsewhere (a log, another tool), re-bucketing it into
    /// tailguard's bounds.
    pub fn from_hdr(hdr: &hdrhistogram::Histogram<u64>) -> Histogram {
        let mut h = Histogram::new();
        for v in hdr.iter_recorded() {
            h.record_n_us(v.value_iterated_to(), v.count_at_value());
        }
        h
    }
}

/// A duration in whole microseconds, saturating at `u64::MAX`.
pub fn duration_us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
