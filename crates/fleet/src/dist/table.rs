//! A latency distribution given as a percentile table, sampled by inverse CDF.
//!
//! Between two listed points the latency is interpolated linearly; below the first point the
//! first value is used and above the last the last value, so `{p50: 10ms, p99: 40ms}` puts half
//! of the mass at exactly 10 ms and 1% at exactly 40 ms. List `p0` and `p100` to spread them.

use std::fmt;
use std::time::Duration;
use tailguard_text::duration::format_duration;

/// A percentile table that cannot be sampled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TableError {
    /// No points.
    #[error("a percentile table needs at least one point, e.g. `{{p50: 10ms}}`")]
    Empty,
    /// A key that is not `p<number>` with the number in `[0, 100]`.
    #[error("`{0}` is not a percentile: write p0 to p100, e.g. `p99.9`")]
    Key(String),
    /// Latency goes down as the percentile goes up.
    #[error(
        "latency must not decrease with the percentile: {lower} at p{at} is below an earlier point"
    )]
    Decreasing {
        /// The percentile whose value is too small.
        at: f64,
        /// Its value.
        lower: String,
    },
}

/// Points `(percentile in [0, 100], latency)`, sorted by percentile, latencies non-decreasing.
#[derive(Clone, Debug, PartialEq)]
pub struct PercentileTable {
    points: Vec<(f64, Duration)>,
}

impl PercentileTable {
    /// Builds a table from `(percentile in [0, 100], latency)` points in any order.
    ///
    /// # Errors
    /// [`TableError`] when there are no points, a percentile is out of range, or latency
    /// decreases as the percentile grows.
    pub fn new(points: impl IntoIterator<Item = (f64, Duration)>) -> Result<Self, TableError> {
        let mut points: Vec<(f64, Duration)> = points
            .into_iter()
            .map(|(p, d)| {
                if (0.0..=100.0).contains(&p) {
                    Ok((p, d))
                } else {
                    Err(TableError::Key(format!("p{p}")))
                }
            })
            .collect::<Result<_, _>>()?;
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points.dedup_by(|b, a| a.0 == b.0);
        if points.is_empty() {
            return Err(TableError::Empty);
        }
        for pair in points.windows(2) {
            if pair[1].1 < pair[0].1 {
                return Err(TableError::Decreasing {
                    at: pair[1].0,
                    lower: format_duration(pair[1].1),
                });
            }
        }
        Ok(PercentileTable { points })
    }

    /// The points, `(percentile, latency)`, by percentile.
    pub fn points(&self) -> &[(f64, Duration)] {
        &self.points
    }

    /// Parses a key such as `p99.9` to 99.9.
    ///
    /// # Errors
    /// [`TableError::Key`] for anything else.
    pub fn parse_key(key: &str) -> Result<f64, TableError> {
        key.strip_prefix('p')
            .and_then(|n| n.parse::<f64>().ok())
            .filter(|p| (0.0..=100.0).contains(p))
            .ok_or_else(|| TableError::Key(key.to_owned()))
    }

    /// The latency at quantile `u` in `[0, 1]` (the inverse CDF).
    pub fn quantile(&self, u: f64) -> Duration {
        let p = u * 100.0;
        let first = self.points[0];
        let last = self.points[self.points.len() - 1];
        if p <= first.0 {
            return first.1;
        }
        if p >= last.0 {
            return last.1;
        }
        // First point past p; it exists and is not the first (both checked above).
        let i = self.points.partition_point(|(q, _)| *q <= p);
        let (q0, d0) = self.points[i - 1];
        let (q1, d1) = self.points[i];
        let t = (p - q0) / (q1 - q0);
        d0 + (d1 - d0).mul_f64(t)
    }

    /// The table with every latency multiplied by `factor`.
    pub fn scaled(&self, factor: f64) -> PercentileTable {
        let points = self
            .points
            .iter()
            .map(|(q, d)| (*q, crate::limits::scale_latency(*d, factor)))
            .collect();
        PercentileTable { points }
    }
}

impl fmt::Display for PercentileTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (q, d)) in self.points.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}p{q}: {}", format_duration(*d))?;
        }
        f.write_str("}")
    }
}
