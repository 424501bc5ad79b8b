//! The headline percentiles every tailguard report prints.

use serde::{Deserialize, Serialize};

/// The quantiles reported everywhere, with their names: p50 to p99.99.
pub const QUANTILES: [(&str, f64); 6] = [
    ("p50", 0.50),
    ("p90", 0.90),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p999", 0.999),
    ("p9999", 0.9999),
];

/// Min, p50, p90, p95, p99, p99.9, p99.99 and max, in microseconds.
///
/// Field names are the JSON contract of `tailguard load --json` and `tailguard sim --json`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Smallest value.
    pub min: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 95th percentile.
    pub p95: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile (the real one, not the max as in slow_cooker).
    pub p999: u64,
    /// 99.99th percentile.
    pub p9999: u64,
    /// Largest value.
    pub max: u64,
}

impl Percentiles {
    /// Every figure with its percentile, from the min (0) to the max (100): a curve's points.
    pub fn by_percent(&self) -> [(f64, u64); 8] {
        [
            (0.0, self.min),
            (50.0, self.p50),
            (90.0, self.p90),
            (95.0, self.p95),
            (99.0, self.p99),
            (99.9, self.p999),
            (99.99, self.p9999),
            (100.0, self.max),
        ]
    }

    /// The value of a named field (`min`, `p50`, ... `max`), for SLO checks and renderers.
    pub fn get(&self, name: &str) -> Option<u64> {
        Some(match name {
            "min" => self.min,
            "p50" => self.p50,
            "p90" => self.p90,
            "p95" => self.p95,
            "p99" => self.p99,
            "p999" => self.p999,
            "p9999" => self.p9999,
            "max" => self.max,
            _ => return None,
        })
    }
}
