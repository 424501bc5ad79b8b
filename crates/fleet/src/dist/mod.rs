//! Latency distributions: what a backend waits before it answers.
//!
//! Six shapes cover the seed experiments: `fixed` (the add-steps servers of seed 000),
//! `uniform`, `normal` clamped to a range (seed 002's "median 167 ms, sd 5 ms, max 200 ms"),
//! `lognormal` (the usual shape of real service latency), a `percentiles` table interpolated
//! linearly between its points, and `replay`, which draws from a recorded list of values.
//! Sampling takes the RNG as an argument, so a seeded run draws the same latencies live and in
//! the simulator.
//!
//! Fleet files write them as a duration (fixed) or a one-key mapping:
//! ```yaml
//! latency: 20ms
//! latency: {uniform: {min: 10ms, max: 30ms}}
//! latency: {normal: {mean: 167ms, sd: 5ms, max: 200ms}}
//! latency: {lognormal: {median: 20ms, sigma: 0.5, max: 1s}}
//! latency: {percentiles: {p0: 150ms, p50: 167ms, p99: 185ms, p100: 200ms}}
//! latency: {replay: {file: trace.txt, unit: ms}}
//! ```
//!
//! # Example
//! ```
//! use rand::SeedableRng;
//! use std::time::Duration;
//! use tailguard_fleet::LatencyDist;
//! let dist: LatencyDist = "{uniform: {min: 10ms, max: 20ms}}".parse().unwrap();
//! let mut rng = rand::rngs::StdRng::seed_from_u64(7);
//! let d = dist.sample(&mut rng);
//! assert!(d >= Duration::from_millis(10) && d <= Duration::from_millis(20));
//! ```

mod de;
mod replay;
mod table;

pub use replay::Replay;
pub use table::PercentileTable;

use rand::Rng;
use rand_distr::{Distribution, LogNormal, Normal};
use std::fmt;
use std::time::Duration;
use tailguard_text::duration::format_duration;

/// A latency distribution, validated when it was built.
#[derive(Clone, Debug, PartialEq)]
pub enum LatencyDist {
    /// Always the same latency.
    Fixed(Duration),
    /// Uniform over `[min, max]`.
    Uniform {
        /// Smallest latency.
        min: Duration,
        /// Largest latency.
        max: Duration,
    },
    /// Normal with the given mean and standard deviation, clamped (not redrawn) into
    /// `[min, max]`.
    Normal {
        /// Mean.
        mean: Duration,
        /// Standard deviation.
        sd: Duration,
        /// Lower clamp (default 0).
        min: Duration,
        /// Upper clamp, if any.
        max: Option<Duration>,
    },
    /// Log-normal: `ln(latency)` is normal with mean `ln(median)` and standard deviation
    /// `sigma`; clamped to `max` if given.
    LogNormal {
        /// Median latency.
        median: Duration,
        /// Shape: the standard deviation of `ln(latency)`.
        sigma: f64,
        /// Upper clamp, if any.
        max: Option<Duration>,
    },
    /// Inverse-CDF sampling from a percentile table.
    Percentiles(PercentileTable),
    /// Uniform draws from recorded values (their empirical distribution).
    Replay(Replay),
}

impl Default for LatencyDist {
    fn default() -> Self {
        LatencyDist::Fixed(Duration::ZERO)
    }
}

impl LatencyDist {
    /// Draws one latency. `Fixed` draws nothing from `rng`; every other shape draws.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        match self {
            LatencyDist::Fixed(d) => *d,
            LatencyDist::Uniform { min, max } => {
                let u: f64 = rng.random();
                min.mul_f64(1.0 - u) + max.mul_f64(u)
            }
            LatencyDist::Normal { mean, sd, min, max } => {
                let seconds = match Normal::new(mean.as_secs_f64(), sd.as_secs_f64()) {
                    Ok(normal) => normal.sample(rng),
                    Err(_) => mean.as_secs_f64(),
                };
                clamp(seconds, *min, *max)
            }
            LatencyDist::LogNormal { median, sigma, max } => {
                let mu = median.as_secs_f64().max(f64::MIN_POSITIVE).ln();
                let seconds = match LogNormal::new(mu, *sigma) {
                    Ok(lognormal) => lognormal.sample(rng),
                    Err(_) => median.as_secs_f64(),
                };
                clamp(seconds, Duration::ZERO, *max)
            }
            LatencyDist::Percentiles(table) => table.quantile(rng.random()),
            LatencyDist::Replay(replay) => replay.pick(rng),
        }
    }

    /// The same distribution with every latency multiplied by `factor` (a "latency x10" fault).
    pub fn scaled(&self, factor: f64) -> LatencyDist {
        let f = |d: Duration| crate::limits::scale_latency(d, factor);
        match self {
            LatencyDist::Fixed(d) => LatencyDist::Fixed(f(*d)),
            LatencyDist::Uniform { min, max } => LatencyDist::Uniform {
                min: f(*min),
                max: f(*max),
            },
            LatencyDist::Normal { mean, sd, min, max } => LatencyDist::Normal {
                mean: f(*mean),
                sd: f(*sd),
                min: f(*min),
                max: max.map(f),
            },
            LatencyDist::LogNormal { median, sigma, max } => LatencyDist::LogNormal {
                median: f(*median),
                sigma: *sigma,
                max: max.map(f),
            },
            LatencyDist::Percentiles(table) => LatencyDist::Percentiles(table.scaled(factor)),
            LatencyDist::Replay(replay) => LatencyDist::Replay(replay.scaled(factor)),
        }
    }
}

/// Seconds to a `Duration` inside `[min, max]`; negative or NaN draws become `min`.
fn clamp(seconds: f64, min: Duration, max: Option<Duration>) -> Duration {
    let d = if seconds.is_finite() && seconds > 0.0 {
        Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
    } else {
        Duration::ZERO
    };
    let d = d.max(min);
    max.map_or(d, |max| d.min(max))
}

impl fmt::Display for LatencyDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = |d: &Duration| format_duration(*d);
        let max = |m: &Option<Duration>| m.map(|m| format!(", max: {}", d(&m))).unwrap_or_default();
        match self {
            LatencyDist::Fixed(v) => write!(f, "{}", d(v)),
            LatencyDist::Uniform { min, max } => {
                write!(f, "{{uniform: {{min: {}, max: {}}}}}", d(min), d(max))
            }
            LatencyDist::Normal {
                mean,
                sd,
                min,
                max: m,
            } => write!(
                f,
                "{{normal: {{mean: {}, sd: {}, min: {}{}}}}}",
                d(mean),
                d(sd),
                d(min),
                max(m)
            ),
            LatencyDist::LogNormal {
                median,
                sigma,
                max: m,
            } => write!(
                f,
                "{{lognormal: {{median: {}, sigma: {sigma}{}}}}}",
                d(median),
                max(m)
            ),
            LatencyDist::Percentiles(table) => write!(f, "{{percentiles: {table}}}"),
            LatencyDist::Replay(replay) => write!(f, "{{replay: {replay}}}"),
        }
    }
}

#[cfg(test)]
mod tests;
