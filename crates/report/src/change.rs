//! The change marker: does this interval's p99 stand out from the recent ones?
//!
//! Rule: the baseline is the median p99 of the last five intervals that had responses. An
//! interval whose p99 is at least twice the baseline gets one `+` per doubling (`+` at 2x,
//! `++` at 4x, `+++` at 8x, at most five); at most half the baseline, one `-` per halving. No
//! marker until three earlier intervals exist, and none for an interval without responses.
//!
//! slow_cooker compares the p99 with the mean of the last five p99s, zero-filled, on a log10
//! scale, so its first intervals always print `+` and a 5x slowdown prints nothing. A median
//! of real intervals ignores one earlier spike; a log2 scale flags a doubling.
//!
//! # Example
//! ```
//! use tailguard_report::ChangeMarker;
//! let mut m = ChangeMarker::new();
//! for p99 in [1_000, 1_100, 900] {
//!     assert_eq!(m.observe(Some(p99)), ""); // warming up
//! }
//! assert_eq!(m.observe(Some(1_050)), "");
//! assert_eq!(m.observe(Some(9_000)), "+++");
//! assert_eq!(m.observe(Some(240)), "--");
//! ```

use std::collections::VecDeque;

const HISTORY: usize = 5;
const WARM_UP: usize = 3;
const MAX_MARKS: u32 = 5;

/// Remembers recent p99s and marks intervals that depart from them.
#[derive(Clone, Debug, Default)]
pub struct ChangeMarker {
    recent: VecDeque<u64>,
}

impl ChangeMarker {
    /// A marker with no history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks an interval with p99 `p99_us` (`None`: the interval had no responses), then adds
    /// it to the history.
    pub fn observe(&mut self, p99_us: Option<u64>) -> String {
        let Some(p99) = p99_us else {
            return String::new();
        };
        let mark = if self.recent.len() >= WARM_UP {
            mark(p99, self.baseline())
        } else {
            String::new()
        };
        if self.recent.len() == HISTORY {
            self.recent.pop_front();
        }
        self.recent.push_back(p99);
        mark
    }

    fn baseline(&self) -> u64 {
        let mut sorted: Vec<u64> = self.recent.iter().copied().collect();
        sorted.sort_unstable();
        sorted[sorted.len() / 2]
    }
}

fn mark(p99: u64, baseline: u64) -> String {
    // Floor both at 1 µs so a zero baseline does not divide by zero.
    let ratio = p99.max(1) as f64 / baseline.max(1) as f64;
    let doublings = ratio.log2();
    let n = (doublings.abs().floor() as u32).min(MAX_MARKS) as usize;
    if doublings >= 1.0 {
        "+".repeat(n)
    } else if doublings <= -1.0 {
        "-".repeat(n)
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_by_doublings_against_the_median() {
        let cases = [
            (1_000, 1_000, ""),
            (1_999, 1_000, ""),
            (2_000, 1_000, "+"),
            (4_000, 1_000, "++"),
            (1_000_000, 1_000, "+++++"),
            (500, 1_000, "-"),
            (0, 1_000, "-----"),
        ];
        for (p99, base, want) in cases {
            assert_eq!(mark(p99, base), want, "{p99} vs {base}");
        }
    }

    #[test]
    fn one_spike_does_not_move_the_baseline() {
        let mut m = ChangeMarker::new();
        for p99 in [1_000, 1_000, 1_000] {
            m.observe(Some(p99));
        }
        assert_eq!(m.observe(Some(50_000)), "+++++");
        assert_eq!(m.observe(Some(1_000)), "");
        assert_eq!(m.observe(None), "");
        assert_eq!(m.observe(Some(1_100)), "");
    }
}
