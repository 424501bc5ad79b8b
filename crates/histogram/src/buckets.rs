//! Log-spaced buckets for the final `FROM TO #REQUESTS` table (slow_cooker's layout).

use crate::Histogram;

/// Requests whose latency fell in `[from_us, to_us)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Inclusive lower bound, microseconds.
    pub from_us: u64,
    /// Exclusive upper bound, microseconds.
    pub to_us: u64,
    /// Number of values in the bucket.
    pub count: u64,
}

impl Histogram {
    /// Splits the recorded values into buckets whose bounds double, from the power of two at or
    /// below the minimum up to the one above the maximum. Empty histogram, no buckets.
    ///
    /// slow_cooker uses fixed millisecond bounds (0, 2, 8, 32, ...) that put every loopback
    /// request in the first row; doubling bounds from the data keep the table readable at any
    /// scale, microseconds to minutes.
    pub fn log_buckets(&self) -> Vec<Bucket> {
        if self.is_empty() {
            return Vec::new();
        }
        let mut from = prev_power_of_two(self.min_us());
        let top = self.max_us();
        let mut out = Vec::new();
        loop {
            let to = if from == 0 { 1 } else { from * 2 };
            let count = self.as_hdr().count_between(from, to - 1);
            out.push(Bucket {
                from_us: from,
                to_us: to,
                count,
            });
            if to > top {
                break;
            }
            from = to;
        }
        out
    }
}

fn prev_power_of_two(v: u64) -> u64 {
    if v == 0 {
        0
    } else {
        1 << (63 - v.leading_zeros())
    }
}
