//! The bounds of the behaviour model, shared by its parsers and its decisions.

use std::time::Duration;

/// The longest latency a backend waits: one hour, the top of tailguard's histograms. Every
/// decision is clamped here (a lognormal tail, `latency x1000000` of a slow backend), so
/// adding it to a clock never overflows.
pub const MAX_LATENCY: Duration = Duration::from_secs(3600);

/// The largest `size` body: 16 MiB of `x`.
pub const MAX_BODY_BYTES: usize = 16 << 20;

/// `d` times `factor`, saturating at [`MAX_LATENCY`] (a negative or NaN factor gives zero).
pub fn scale_latency(d: Duration, factor: f64) -> Duration {
    let secs = d.as_secs_f64() * factor;
    if secs.is_nan() || secs <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(secs).map_or(MAX_LATENCY, |l| l.min(MAX_LATENCY))
}
