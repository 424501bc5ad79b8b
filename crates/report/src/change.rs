//! The change marker: does this interval's p99 stand out from the recent ones?
//!
//! Rule: the baseline is the median p99 of the last five intervals that had responses (the
//! lower of the two middle values when there are four or two). An
//! interval whose p99 is at least twice the baseline gets one `+` per doubling (`+` at 2x,
//! `++` at 4x, `+++` at 8x, at most five); at most half the baseline, one `-` per halving. No
//! marker until three earlier intervals exist. Values under 1 ms count as 1 ms: below that, a
//! p99 of a few hundred samples moves by 2x with the scheduler's noise on a busy machine, and a
//! marker would flag nothing. The first interval counts for the warm-up, but leaves the
//! baseline once two others are in it: it carries the connections' set-up.
//!
//! A gap, an interval in which requests were due or in flight but none completed, counts as
//! history for the warm-up and is marked itself: nothing completed faster than the interval, so
//! its p99 is at least its length (a lower bound: a gap is never marked faster, only slower).
//! It does not enter the baseline (a stall would otherwise make
//! the normal intervals after it read as drops). So a stall early in a run still has its first
//! completions marked, and the normal interval after them is not. An idle interval (nothing
//! due, nothing in flight) is neither marked nor counted.
//!
//! slow_cooker compares the p99 with the mean of the last five p99s, zero-filled, on a log10
//! scale, so its first intervals always print `+` and a 5x slowdown prints nothing. A median
//! of real intervals ignores one earlier spike; a log2 scale flags a doubling.
//!
//! # Example
//! ```
//! use tailguard_report::ChangeMarker;
//! let mut m = ChangeMarker::new();
//! for p99 in [30_000, 5_000, 5_500, 4_500] {
//!     assert_eq!(m.observe(Some(p99)), ""); // warming up; the first is set-up
//! }
//! assert_eq!(m.observe(Some(5_250)), "");
//! assert_eq!(m.observe(Some(45_000)), "+++");
//! assert_eq!(m.observe(Some(1_200)), "--");
//! assert_eq!(m.observe(Some(300)), "--"); // 300µs counts as 1 ms
//! assert_eq!(m.observe_gap(1_000_000), "+++++"); // nothing completed in a 1 s interval
//! ```

use std::collections::VecDeque;

const HISTORY: usize = 5;
const WARM_UP: usize = 3;
const MAX_MARKS: u32 = 5;
/// Below this, differences are noise.
const FLOOR_US: u64 = 1_000;

/// Remembers recent p99s and marks intervals that depart from them.
#[derive(Clone, Debug, Default)]
pub struct ChangeMarker {
    /// The last [`HISTORY`] p99s of intervals with responses.
    recent: VecDeque<u64>,
    /// Intervals observed, gaps included (for the warm-up).
    seen: usize,
    /// The run's first interval is still in `recent`.
    first_in_recent: bool,
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
        let mark = if self.seen >= WARM_UP && !self.recent.is_empty() {
            mark(p99, self.baseline())
        } else {
            String::new()
        };
        self.seen += 1;
        // The set-up interval stands in for a baseline only until two others exist.
        if self.first_in_recent && self.recent.len() >= 2 {
            self.recent.pop_front();
            self.first_in_recent = false;
        }
        if self.recent.len() == HISTORY {
            self.recent.pop_front();
        }
        if self.seen == 1 {
            self.first_in_recent = true;
        }
        self.recent.push_back(p99);
        mark
    }

    /// One interval's marker: by its p99 when a request in it was timed; as a gap when none
    /// was but requests were due or in flight (`stalled`); otherwise idle (no marker).
    pub fn observe_interval(
        &mut self,
        p99_us: Option<u64>,
        stalled: bool,
        length_us: u64,
    ) -> String {
        match p99_us {
            Some(p99) => self.observe(Some(p99)),
            None if stalled => self.observe_gap(length_us),
            None => self.observe(None),
        }
    }

    /// Marks a gap of `length_us` (requests due or in flight, none completed) by its length, a
    /// lower bound of its p99, against the baseline of the intervals with responses. Marked as
    /// soon as one such interval exists; counted for the warm-up; not part of the baseline.
    pub fn observe_gap(&mut self, length_us: u64) -> String {
        self.seen += 1;
        if self.recent.is_empty() {
            return String::new();
        }
        // The length is only a lower bound of the gap's p99: it can show the gap slower than
        // the baseline, never faster.
        let mark = mark(length_us, self.baseline());
        if mark.starts_with('-') {
            return String::new();
        }
        mark
    }

    fn baseline(&self) -> u64 {
        let mut sorted: Vec<u64> = self.recent.iter().copied().collect();
        sorted.sort_unstable();
        sorted[(sorted.len() - 1) / 2]
    }
}

fn mark(p99: u64, baseline: u64) -> String {
    let ratio = p99.max(FLOOR_US) as f64 / baseline.max(FLOOR_US) as f64;
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

/// Marks every interval of a finished run as `tailguard load` marks them while it runs: what a
/// merged run, whose intervals come from several generators, prints.
pub fn mark_all(intervals: &mut [tailguard_record::IntervalSummary]) {
    let mut marker = ChangeMarker::new();
    for iv in intervals {
        let t = &iv.totals;
        let p99 = t.latency_us.map(|l| l.p99);
        let stalled = t.requests == 0 && iv.target > 0;
        iv.change = marker.observe_interval(p99, stalled, (iv.duration_s * 1e6) as u64);
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
            (5_000, 10_000, "-"),
            (0, 40_000, "-----"),
            // Under 1 ms is noise: 150µs against 900µs is no change, 200µs against 4ms is.
            (150, 900, ""),
            (900, 150, ""),
            (200, 4_000, "--"),
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

    #[test]
    fn a_stall_is_marked_then_forgotten() {
        let mut m = ChangeMarker::new();
        for p99 in [1_000, 1_000, 1_000, 1_000] {
            m.observe(Some(p99));
        }
        // The stall: nothing completes for two 1 s intervals, then the stalled requests do.
        assert_eq!(m.observe_gap(1_000_000), "+++++");
        assert_eq!(m.observe_gap(1_000_000), "+++++");
        assert_eq!(m.observe(Some(2_500_000)), "+++++");
        assert_eq!(m.observe(Some(1_000)), "", "normal again is not a drop");
        assert_eq!(m.observe(Some(1_100)), "");
    }

    #[test]
    fn a_stall_in_the_warm_up_still_marks_its_completions() {
        // One normal interval, a three-interval stall, then the stalled requests complete.
        let mut m = ChangeMarker::new();
        assert_eq!(m.observe(Some(1_000)), "");
        for _ in 0..3 {
            assert_eq!(m.observe_gap(1_000_000), "+++++");
        }
        assert_eq!(m.observe(Some(3_000_000)), "+++++");
        assert_eq!(
            m.observe(Some(1_000)),
            "",
            "the lower middle of [1ms, 3s] is 1ms"
        );
        // A gap before any response has nothing to compare with.
        assert_eq!(ChangeMarker::new().observe_gap(1_000_000), "");
    }

    /// A server that answers only with 2 s timeouts, in 1 s intervals: the gaps between the
    /// timeouts are shorter than the baseline, but a gap's length is only a lower bound of its
    /// p99, so it is never marked faster.
    #[test]
    fn a_gap_is_never_marked_faster() {
        let mut m = ChangeMarker::new();
        for p99 in [2_000_000, 2_000_000, 2_000_000, 2_000_000] {
            m.observe(Some(p99));
        }
        assert_eq!(m.observe_gap(1_000_000), "");
        assert_eq!(m.observe_gap(100_000), "");
        assert_eq!(m.observe_gap(8_000_000), "++");
    }
}
