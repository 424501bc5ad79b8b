//! A linear ramp of the offered rate, applied to a schedule by a change of time.

use std::time::Duration;

/// A linear climb of the offered rate at the start of a schedule: from `from` requests per
/// second up (or down) to the schedule's rate over `over`, then the schedule's rate.
///
/// Applied by a change of time, as for any non-homogeneous Poisson process: with the cumulative
/// intensity
///
/// ```text
/// L(t) = from t + (rate - from) t² / (2 over)      for t <= over
/// L(t) = L(over) + rate (t - over)                 after
/// ```
///
/// the request at unit offset `u` (`i` for evenly spaced arrivals, a sum of `Exp(1)` gaps for
/// Poisson ones) is due at `L⁻¹(u)`. Evenly spaced arrivals so follow the rate exactly, and a
/// homogeneous Poisson process becomes one with the ramped intensity. vegeta's linear pacer
/// offers the same climb (a start rate and a slope); here it is an offset from the start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ramp {
    /// The rate at the start, requests per second (above the schedule's rate: a descent).
    pub from: f64,
    /// How long the climb lasts; the schedule's own rate holds after it.
    pub over: Duration,
}

impl Ramp {
    /// `L(elapsed)` for a ramp to `rate`: the requests offered in `[0, elapsed]` (a real
    /// number; an evenly spaced schedule has `floor(L) + 1` due by then, request 0 included).
    pub fn offered(&self, rate: f64, elapsed: Duration) -> f64 {
        let t = elapsed.as_secs_f64();
        let over = self.over.as_secs_f64();
        if t <= over {
            self.from * t + (rate - self.from) * t * t / (2.0 * over)
        } else {
            self.climb(rate) + rate * (t - over)
        }
    }

    /// `L⁻¹(u)` in seconds: when the ramp to `rate` has offered `u` requests.
    pub(crate) fn time_of(&self, rate: f64, u: f64) -> f64 {
        let over = self.over.as_secs_f64();
        let climb = self.climb(rate);
        if u <= climb {
            // The root of a t² + b t = u that is zero at u = 0, in the form that neither
            // cancels when a is small nor divides by a (which is zero for a flat ramp and
            // negative for a descent; b² + 4 a u stays >= rate² > 0 up to L(over), and b > 0).
            let a = (rate - self.from) / (2.0 * over);
            let b = self.from;
            let disc = (b * b + 4.0 * a * u).max(0.0);
            2.0 * u / (b + disc.sqrt())
        } else {
            over + (u - climb) / rate
        }
    }

    /// `L(over)`: the requests offered during the climb.
    fn climb(&self, rate: f64) -> f64 {
        self.over.as_secs_f64() * (self.from + rate) / 2.0
    }
}
