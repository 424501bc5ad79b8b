//! Arrival schedules: when the i-th request of a run is due.
//!
//! Pure: a schedule never reads a clock or sleeps. The load generator's pacers (one per worker
//! thread, each on a [`Shard`]) ask [`Schedule::next_send`] for each request's offset from the
//! start and sleep until then; the
//! simulator asks the same question in virtual time; tests ask it directly. This is vegeta's
//! "pacer as a pure function" idea, with offsets instead of waits.
//!
//! - [`Arrivals::Constant`]: request `i` is due at `i / rate` (no drift: offsets are computed
//!   from `i`, never accumulated).
//! - [`Arrivals::Poisson`]: exponential gaps with mean `1 / rate`, from a seeded RNG, so the
//!   same seed gives the same schedule.
//!
//! Either may start with a [`Ramp`] ([`Schedule::with_ramp`]): the offered rate climbs linearly
//! from `from` to the schedule's rate over `over`, then holds, as vegeta's linear pacer does
//! ("offered load ramping from 50% to 95% of capacity"). The ramp is a change of time, request
//! `i` due when the ramped rate has offered `i` requests (see [`Ramp`]); a schedule without one
//! keeps its offsets bit for bit.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_pacing::{Arrivals, Ramp, Schedule};
//!
//! let mut s = Schedule::new(Arrivals::Constant, 1000.0, 7).unwrap();
//! assert_eq!(s.next_send(0), Duration::ZERO);
//! assert_eq!(s.next_send(1), Duration::from_millis(1));
//! assert_eq!(s.next_send(1500), Duration::from_millis(1500));
//! assert_eq!(s.due_by(Duration::from_millis(10)), 11); // requests 0..=10
//!
//! // 50% to 95% of a 2,000 req/s capacity over 10 s, then 95%.
//! let ramp = Ramp { from: 1000.0, over: Duration::from_secs(10) };
//! let mut r = Schedule::new(Arrivals::Constant, 1900.0, 7).unwrap().with_ramp(ramp).unwrap();
//! assert_eq!(r.next_send(0), Duration::ZERO);
//! // The climb offers 10 s x (1000 + 1900) / 2 = 14,500 requests, the next second 1,900 more.
//! assert_eq!(r.expected(Duration::from_secs(10)), 14_500.0);
//! assert_eq!(r.due_by(Duration::from_secs(11)), 16_401); // requests 0..=16,400
//! let gap = r.next_send(20_001) - r.next_send(20_000);
//! assert!(gap.abs_diff(Duration::from_secs_f64(1.0 / 1900.0)) < Duration::from_nanos(2));
//! // A zero-length ramp is refused.
//! let flat = Ramp { from: 1000.0, over: Duration::ZERO };
//! assert!(Schedule::new(Arrivals::Constant, 1900.0, 7).unwrap().with_ramp(flat).is_err());
//! ```

#![warn(missing_docs)]

mod ramp;
mod rate;
pub mod stages;

pub use ramp::Ramp;
pub use rate::{rate_in_range, show_rate, MAX_OFFSET, MAX_RATE, MIN_RATE};
pub use stages::{Stage, Stages, StagesError};

use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Seconds as an offset, saturating at [`MAX_OFFSET`] (a NaN or negative time is zero).
fn offset(secs: f64) -> Duration {
    if secs.is_nan() || secs <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(secs).map_or(MAX_OFFSET, |d| d.min(MAX_OFFSET))
}

/// The arrival process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Arrivals {
    /// Evenly spaced sends.
    #[default]
    Constant,
    /// Poisson arrivals: independent exponential gaps.
    Poisson,
}

impl FromStr for Arrivals {
    type Err = PacingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "constant" => Ok(Arrivals::Constant),
            "poisson" => Ok(Arrivals::Poisson),
            other => Err(PacingError::UnknownArrivals(other.to_string())),
        }
    }
}

impl fmt::Display for Arrivals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arrivals::Constant => "constant",
            Arrivals::Poisson => "poisson",
        })
    }
}

/// A schedule that cannot be built.
#[derive(Clone, Debug, PartialEq)]
pub enum PacingError {
    /// The rate is not from [`MIN_RATE`] to [`MAX_RATE`].
    BadRate(f64),
    /// An arrival process name other than `constant` or `poisson`.
    UnknownArrivals(String),
    /// A ramp that does not start at a positive finite rate, or lasts no time.
    BadRamp(Ramp),
}

impl fmt::Display for PacingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacingError::BadRate(r) => write!(
                f,
                "rate must be from {MIN_RATE} to {MAX_RATE} requests per second, got {}",
                show_rate(*r)
            ),
            PacingError::UnknownArrivals(s) => {
                write!(f, "unknown arrivals {s:?}: use constant or poisson")
            }
            PacingError::BadRamp(r) if !rate_in_range(r.from) => write!(
                f,
                "a ramp must start from a rate from {MIN_RATE} to {MAX_RATE}, got {}",
                show_rate(r.from)
            ),
            PacingError::BadRamp(_) => f.write_str("a ramp must last longer than zero"),
        }
    }
}

impl std::error::Error for PacingError {}

/// Offsets from the start at which requests are due.
#[derive(Clone, Debug)]
pub struct Schedule {
    arrivals: Arrivals,
    rate: f64,
    rng: Xoshiro256PlusPlus,
    exp: Exp<f64>,
    /// Poisson state: the offset (seconds) of request `next - 1` at the full rate, before
    /// any ramp (times `rate`, the unit-rate offset the ramp maps).
    last_s: f64,
    next: u64,
    ramp: Option<Ramp>,
    /// Stages in place of a rate (the rate is then their peak, what Poisson gaps are drawn at).
    stages: Option<Stages>,
}

impl Schedule {
    /// A schedule of `rate` requests per second; `seed` drives Poisson gaps.
    ///
    /// # Errors
    /// [`PacingError::BadRate`] when `rate` is not from [`MIN_RATE`] to [`MAX_RATE`].
    pub fn new(arrivals: Arrivals, rate: f64, seed: u64) -> Result<Self, PacingError> {
        if !rate_in_range(rate) {
            return Err(PacingError::BadRate(rate));
        }
        Ok(Schedule {
            arrivals,
            rate,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            exp: Exp::new(rate).map_err(|_| PacingError::BadRate(rate))?,
            last_s: 0.0,
            next: 0,
            ramp: None,
            stages: None,
        })
    }

    /// A schedule whose offered rate follows `stages` (k6's ramping arrival rate); `seed`
    /// drives Poisson gaps. Nothing is due after the last stage.
    ///
    /// # Errors
    /// [`PacingError::BadRate`] when the stages' peak is under [`MIN_RATE`].
    pub fn staged(arrivals: Arrivals, stages: Stages, seed: u64) -> Result<Self, PacingError> {
        let mut s = Schedule::new(arrivals, stages.peak(), seed)?;
        s.stages = Some(stages);
        Ok(s)
    }

    /// The stages, if the schedule follows some.
    pub fn stages(&self) -> Option<&Stages> {
        self.stages.as_ref()
    }

    /// Whether the offered rate changes over time (a ramp or stages).
    pub fn is_shaped(&self) -> bool {
        self.ramp.is_some() || self.stages.is_some()
    }

    /// The same schedule, its offered rate climbing linearly from `ramp.from` to
    /// [`rate`](Schedule::rate) over `ramp.over`, then holding.
    ///
    /// # Errors
    /// [`PacingError::BadRamp`] when `ramp.from` is not from [`MIN_RATE`] to [`MAX_RATE`] or
    /// `ramp.over` is zero.
    pub fn with_ramp(mut self, ramp: Ramp) -> Result<Self, PacingError> {
        if !rate_in_range(ramp.from) || ramp.over.is_zero() {
            return Err(PacingError::BadRamp(ramp));
        }
        self.ramp = Some(ramp);
        Ok(self)
    }

    /// The rate in requests per second (after the ramp, if any).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The ramp, if the schedule has one.
    pub fn ramp(&self) -> Option<Ramp> {
        self.ramp
    }

    /// The requests offered in `[0, elapsed]`: `elapsed x rate`, or the ramp's cumulative
    /// intensity (a real number; the mean count of a Poisson schedule).
    pub fn expected(&self, elapsed: Duration) -> f64 {
        if let Some(s) = &self.stages {
            return s.offered(elapsed);
        }
        match self.ramp {
            None => elapsed.as_secs_f64() * self.rate,
            Some(r) => r.offered(self.rate, elapsed),
        }
    }

    /// The offset from the start at which request `i` is due, at most [`MAX_OFFSET`].
    ///
    /// Constant arrivals answer for any `i`. Poisson arrivals draw gaps in order, so they must
    /// be asked for `i = 0, 1, 2, ...` (asking again for the last `i` is allowed); the first
    /// request is due at once, like the constant schedule's.
    ///
    /// # Panics
    /// With Poisson arrivals, when `i` skips ahead or goes back more than one step.
    pub fn next_send(&mut self, i: u64) -> Duration {
        match self.arrivals {
            Arrivals::Constant if self.stages.is_some() => {
                offset(self.stages.as_ref().map_or(0.0, |s| s.time_of(i as f64)))
            }
            Arrivals::Constant => match self.ramp {
                None => offset(i as f64 / self.rate),
                Some(r) => offset(r.time_of(self.rate, i as f64)),
            },
            Arrivals::Poisson => self.poisson(i),
        }
    }

    /// The offset of the Poisson request drawn last, through the ramp if there is one.
    fn poisson_offset(&self) -> Duration {
        if let Some(s) = &self.stages {
            return offset(s.time_of(self.last_s * self.rate));
        }
        match self.ramp {
            // Without a ramp, exactly the offset drawn (no round trip through `rate`).
            None => offset(self.last_s),
            Some(r) => offset(r.time_of(self.rate, self.last_s * self.rate)),
        }
    }

    fn poisson(&mut self, i: u64) -> Duration {
        if i + 1 == self.next {
            return self.poisson_offset();
        }
        assert_eq!(i, self.next, "Poisson schedules are read in order");
        if i > 0 {
            self.last_s += self.exp.sample(&mut self.rng);
        }
        self.next = i + 1;
        self.poisson_offset()
    }

    /// How many requests a constant schedule has due by `elapsed` (inclusive): the target
    /// count of an interval report; `floor(L(elapsed)) + 1` with a ramp.
    pub fn due_by(&self, elapsed: Duration) -> u64 {
        if let Some(s) = &self.stages {
            return (s.offered(elapsed).floor() as u64).saturating_add(1);
        }
        match self.ramp {
            // Saturating: `as` clamps a huge count to u64::MAX.
            None => ((elapsed.as_secs_f64() * self.rate).floor() as u64).saturating_add(1),
            Some(r) => (r.offered(self.rate, elapsed).floor() as u64).saturating_add(1),
        }
    }
}

/// One thread's share of a schedule: the requests `i` with `i % of == part`, in order, each
/// with the offset the whole schedule gives it.
///
/// The load generator runs one pacer per worker thread, each on its own shard, so requests are
/// released where they are sent (no hand-off between threads) and the union of the shards is
/// exactly the one schedule, Poisson gaps included (a shard draws the gaps of the requests it
/// skips, so every shard sees the same sequence).
#[derive(Clone, Debug)]
pub struct Shard {
    schedule: Schedule,
    /// The next request of this shard.
    next: u64,
    of: u64,
    /// Requests of the whole schedule drawn so far (Poisson draws in order).
    drawn: u64,
}

impl Shard {
    /// Part `part` (0-based) of `of` parts of `schedule`.
    ///
    /// # Panics
    /// When `of` is zero or `part >= of`.
    pub fn new(schedule: Schedule, part: u64, of: u64) -> Shard {
        assert!(part < of, "shard {part} of {of}");
        Shard {
            schedule,
            next: part,
            of,
            drawn: 0,
        }
    }

    /// The shard's next request and its offset, without moving past it.
    pub fn peek(&mut self) -> (u64, Duration) {
        // Draw the skipped requests' gaps (a constant schedule answers any index directly).
        if self.schedule.arrivals == Arrivals::Poisson {
            while self.drawn < self.next {
                self.schedule.next_send(self.drawn);
                self.drawn += 1;
            }
        }
        (self.next, self.schedule.next_send(self.next))
    }

    /// Moves to the shard's following request.
    pub fn advance(&mut self) {
        self.next = self.next.saturating_add(self.of);
    }
}

#[cfg(test)]
mod tests;
