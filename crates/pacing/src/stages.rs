//! Stages: the offered rate as a list of linear pieces, k6's ramping arrival rate
//! (`30s:0->1000,2m:1000,30s:1000->0`), applied to a schedule by a change of time as a
//! [`crate::Ramp`] is.
//!
//! Stage `k` lasts `d_k` and goes linearly from `from_k` to `to_k` requests per second (either
//! may be 0); the cumulative intensity `L(t)` is a sum of trapezoids, and the request at unit
//! offset `u` is due at `L⁻¹(u)`: inside the stage where `L` passes `u`, the root of a
//! quadratic. A stage at rate 0 throughout offers nothing, so no request is due inside it; after
//! the last stage nothing is due at all (its offsets are past [`Stages::total`]).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The most stages a profile may have.
pub const MAX_STAGES: usize = 1000;

/// One linear piece of the offered rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stage {
    /// How long it lasts (above zero).
    pub duration: Duration,
    /// The rate at its start, requests per second (0 allowed).
    pub from: f64,
    /// The rate at its end.
    pub to: f64,
}

/// A profile of stages, with the requests offered before each one (precomputed).
#[derive(Clone, Debug, PartialEq)]
pub struct Stages {
    stages: Vec<Stage>,
    /// `L` at the start of each stage, and at the end of the last (one more entry).
    offered: Vec<f64>,
    /// When each stage starts, in seconds, and when the last ends.
    starts: Vec<f64>,
}

/// Stages that cannot be run.
#[derive(Clone, Debug, PartialEq)]
pub enum StagesError {
    /// A stage that is not `DURATION:RATE` or `DURATION:FROM->TO`.
    Syntax(String),
    /// A stage that lasts no time.
    ZeroDuration(usize),
    /// A rate that is negative, not finite, or over [`crate::rate::MAX_RATE`].
    BadRate(usize, f64),
    /// No stage offers any request.
    Empty,
    /// More than [`MAX_STAGES`].
    TooMany(usize),
}

impl fmt::Display for StagesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StagesError::Syntax(s) => write!(
                f,
                "stage {s:?} is not DURATION:RATE or DURATION:FROM->TO (e.g. 30s:0->1000,2m:1000)"
            ),
            StagesError::ZeroDuration(i) => write!(f, "stage {} lasts no time", i + 1),
            StagesError::BadRate(i, r) => write!(
                f,
                "stage {}: rate {} is not from 0 to {} requests per second",
                i + 1,
                crate::rate::show_rate(*r),
                crate::rate::MAX_RATE
            ),
            StagesError::Empty => f.write_str("no stage offers a request: every rate is 0"),
            StagesError::TooMany(n) => write!(f, "{n} stages: at most {MAX_STAGES}"),
        }
    }
}

impl std::error::Error for StagesError {}

impl Stages {
    /// A profile of `stages`.
    ///
    /// # Errors
    /// [`StagesError`] for a stage of no time, a rate out of range, no request at all, or
    /// too many stages.
    pub fn new(stages: Vec<Stage>) -> Result<Self, StagesError> {
        if stages.len() > MAX_STAGES {
            return Err(StagesError::TooMany(stages.len()));
        }
        let ok = |r: f64| r.is_finite() && (0.0..=crate::rate::MAX_RATE).contains(&r);
        for (i, s) in stages.iter().enumerate() {
            if s.duration.is_zero() {
                return Err(StagesError::ZeroDuration(i));
            }
            for r in [s.from, s.to] {
                if !ok(r) {
                    return Err(StagesError::BadRate(i, r));
                }
            }
        }
        let (mut offered, mut starts) = (vec![0.0], vec![0.0]);
        for s in &stages {
            let d = s.duration.as_secs_f64();
            offered.push(offered.last().copied().unwrap_or(0.0) + d * (s.from + s.to) / 2.0);
            starts.push(starts.last().copied().unwrap_or(0.0) + d);
        }
        if offered.last().copied().unwrap_or(0.0) <= 0.0 {
            return Err(StagesError::Empty);
        }
        Ok(Self {
            stages,
            offered,
            starts,
        })
    }

    /// The stages, in order.
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// How long the stages last in all.
    pub fn total(&self) -> Duration {
        self.stages.iter().map(|s| s.duration).sum()
    }

    /// The highest rate any stage reaches.
    pub fn peak(&self) -> f64 {
        self.stages
            .iter()
            .flat_map(|s| [s.from, s.to])
            .fold(0.0, f64::max)
    }

    /// The rate offered at `elapsed` (0 after the last stage).
    pub fn rate_at(&self, elapsed: Duration) -> f64 {
        let t = elapsed.as_secs_f64();
        match self.stage_at_time(t) {
            None => 0.0,
            Some(k) => {
                let s = &self.stages[k];
                let into = (t - self.starts[k]) / s.duration.as_secs_f64();
                s.from + (s.to - s.from) * into
            }
        }
    }

    /// `L(elapsed)`: the requests offered in `[0, elapsed]` (all of them after the last
    /// stage).
    pub fn offered(&self, elapsed: Duration) -> f64 {
        let t = elapsed.as_secs_f64();
        match self.stage_at_time(t) {
            None => self.offered.last().copied().unwrap_or(0.0),
            Some(k) => {
                let s = &self.stages[k];
                let (d, x) = (s.duration.as_secs_f64(), t - self.starts[k]);
                self.offered[k] + s.from * x + (s.to - s.from) * x * x / (2.0 * d)
            }
        }
    }

    /// The stage running at `t` seconds (`None`: after the last one).
    fn stage_at_time(&self, t: f64) -> Option<usize> {
        let end = self.starts.last().copied().unwrap_or(0.0);
        if t >= end {
            return None;
        }
        // The last start at or before t.
        Some(self.starts.partition_point(|&s| s <= t).saturating_sub(1))
    }

    /// `L⁻¹(u)` in seconds: when the stages have offered `u` requests; past the end (by the
    /// last second's worth of a second, so far that no run reaches it) when they never do.
    pub(crate) fn time_of(&self, u: f64) -> f64 {
        let total = self.offered.last().copied().unwrap_or(0.0);
        if u > total {
            return self.starts.last().copied().unwrap_or(0.0) + 1.0 + (u - total);
        }
        // The first stage whose end offers at least u and that offers something.
        let k = self.offered[1..]
            .partition_point(|&l| l < u)
            .min(self.stages.len() - 1);
        let s = &self.stages[k];
        let d = s.duration.as_secs_f64();
        let left = (u - self.offered[k]).max(0.0);
        // a x² + b x = left, the root at 0 for left = 0, without cancelling or dividing by a.
        let a = (s.to - s.from) / (2.0 * d);
        let b = s.from;
        let disc = (b * b + 4.0 * a * left).max(0.0);
        let x = if left == 0.0 {
            0.0
        } else {
            2.0 * left / (b + disc.sqrt())
        };
        self.starts[k] + x.min(d)
    }
}

impl FromStr for Stages {
    type Err = StagesError;

    /// `DURATION:RATE` (a hold) or `DURATION:FROM->TO` (a linear change), comma separated.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let pieces: Vec<&str> = text.split(',').map(str::trim).collect();
        if pieces.len() > MAX_STAGES {
            return Err(StagesError::TooMany(pieces.len()));
        }
        let mut stages = Vec::with_capacity(pieces.len());
        for p in pieces {
            let bad = || StagesError::Syntax(p.to_owned());
            let (d, rates) = p.split_once(':').ok_or_else(bad)?;
            let duration = tailguard_text::duration::parse_duration(d.trim()).map_err(|_| bad())?;
            let rate = |r: &str| r.trim().parse::<f64>().map_err(|_| bad());
            let (from, to) = match rates.split_once("->") {
                Some((a, b)) => (rate(a)?, rate(b)?),
                None => {
                    let r = rate(rates)?;
                    (r, r)
                }
            };
            stages.push(Stage { duration, from, to });
        }
        Stages::new(stages)
    }
}

impl fmt::Display for Stages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.stages.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let d = tailguard_text::duration::format_duration(s.duration);
            if s.from == s.to {
                write!(f, "{d}:{}", s.from)?;
            } else {
                write!(f, "{d}:{}->{}", s.from, s.to)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn stages_read_as_k6_writes_them_and_refuse_what_cannot_run() {
        let s: Stages = "30s:0->1000, 2m:1000,30s:1000->0".parse().unwrap();
        assert_eq!(s.stages().len(), 3);
        assert_eq!(s.total(), Duration::from_secs(180));
        assert_eq!(s.peak(), 1000.0);
        // 15,000 up, 120,000 held, 15,000 down.
        assert_eq!(s.offered(s.total()), 150_000.0);
        assert_eq!(s.offered(Duration::from_secs(30)), 15_000.0);
        assert_eq!(s.rate_at(Duration::from_secs(15)), 500.0);
        assert_eq!(s.rate_at(Duration::from_secs(200)), 0.0);
        assert_eq!(s.to_string(), "30s:0->1000,2m:1000,30s:1000->0");
        for bad in [
            "",
            "30s",
            "30s:",
            "x:10",
            "30s:10->",
            "30s:-1",
            "0s:10",
            "10s:0,5s:0",
        ] {
            assert!(bad.parse::<Stages>().is_err(), "{bad}");
        }
        assert_eq!("10s:0,5s:0".parse::<Stages>(), Err(StagesError::Empty));
        assert!(matches!(
            "1s:1e9".parse::<Stages>(),
            Err(StagesError::BadRate(0, _))
        ));
    }

    proptest! {
        /// `time_of` inverts `offered` wherever the rate is above zero.
        #[test]
        fn time_of_inverts_offered(
            pieces in proptest::collection::vec((1u64..5_000, 0.0f64..5_000.0, 0.0f64..5_000.0), 1..6),
            at in 0.0f64..1.0,
        ) {
            let stages: Vec<Stage> = pieces
                .iter()
                .map(|&(ms, from, to)| Stage { duration: Duration::from_millis(ms), from, to })
                .collect();
            let Ok(s) = Stages::new(stages) else { return Ok(()) };
            let t = s.total().as_secs_f64() * at;
            prop_assume!(s.rate_at(secs(t)) > 1.0);
            let u = s.offered(secs(t));
            let back = s.time_of(u);
            prop_assert!((back - t).abs() < 1e-6 * (1.0 + t), "t {t}, u {u}, back {back}");
        }
    }
}
