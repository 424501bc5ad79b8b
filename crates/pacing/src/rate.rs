//! The rates a schedule takes, and how a message shows one.

use std::time::Duration;

/// The lowest rate a schedule takes: one request per 1,000 s.
pub const MIN_RATE: f64 = 0.001;

/// The highest rate a schedule takes: ten million requests per second, ten times what one
/// generator machine can send.
pub const MAX_RATE: f64 = 10_000_000.0;

/// The latest offset a schedule gives: 2^32 s (136 years). Offsets further out (request
/// `u64::MAX` at [`MIN_RATE`] is 1.8e22 s away) saturate here rather than overflow a
/// `Duration`, so a pacer can always add an offset to its start.
pub const MAX_OFFSET: Duration = Duration::from_secs(1 << 32);

/// True when `rate` is within [`MIN_RATE`] and [`MAX_RATE`] (NaN is not).
pub fn rate_in_range(rate: f64) -> bool {
    (MIN_RATE..=MAX_RATE).contains(&rate)
}

/// A rate as a message shows it: as written when ordinary, in scientific notation when huge
/// or tiny (`1e308`, not 309 digits).
pub fn show_rate(rate: f64) -> String {
    if rate == 0.0 || (1e-3..1e12).contains(&rate.abs()) {
        rate.to_string()
    } else {
        format!("{rate:e}")
    }
}
