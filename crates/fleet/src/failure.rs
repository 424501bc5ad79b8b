//! Failures: how often a backend answers 5xx, closes the connection, or resets it.
//!
//! One uniform draw picks the outcome: `[0, error)` is an error status, then `close`, then
//! `reset`, and the rest succeeds. The draw happens even when every probability is 0, so the
//! RNG advances the same way whatever the rates (a simulation and a live run stay in step).
//! Failures take the full sampled latency too, as in the add-steps servers (seed 000).
//!
//! ```yaml
//! fail: {error: 0.4, status: 503, close: 0.01, reset: 0.01}
//! ```
//!
//! # Example
//! ```
//! use rand::SeedableRng;
//! use tailguard_fleet::{Failure, Outcome, Ratio};
//! let always = Failure::new(Ratio::ONE, 503, Ratio::ZERO, Ratio::ZERO).unwrap();
//! let mut rng = rand::rngs::StdRng::seed_from_u64(1);
//! assert_eq!(always.draw(&mut rng), Outcome::Respond { status: 503 });
//! ```

use crate::Ratio;
use rand::Rng;
use serde::{Deserialize, Deserializer};
use std::fmt;

/// What the backend does with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Answer with this status after the latency.
    Respond {
        /// HTTP status.
        status: u16,
    },
    /// Close the connection after the latency, without a response.
    Close,
    /// Reset the connection (TCP RST) after the latency.
    Reset,
}

/// A failure mix that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FailureError {
    /// The probabilities add up past 1.
    #[error("error + close + reset = {0} exceeds 1")]
    Sum(f64),
    /// The error status is not a final HTTP status ([`FAILURE_STATUSES`]).
    #[error("status: {0} is not a final HTTP status: use 200 to 599 (usually 500 to 599)")]
    Status(u16),
}

/// The statuses a failure may answer with: the final ones. A 1xx is an interim response
/// (RFC 9110 section 15.2): the client goes on waiting for the real answer (or, for a 101,
/// takes the connection as switched), so it cannot stand in for one. 2xx to 4xx may be
/// wanted on purpose (a 429, a redirect, a 200 where an error was due); 600 and up are not
/// HTTP. The fleet file's `fail.status` and `capacity.status`, a fault's `fail N% status S`
/// and serve's `?status=` all check against this range.
pub const FAILURE_STATUSES: std::ops::RangeInclusive<u16> = 200..=599;

/// `status` if a failure may answer with it ([`FAILURE_STATUSES`]).
///
/// # Errors
/// [`FailureError::Status`] otherwise.
pub fn failure_status(status: u16) -> Result<u16, FailureError> {
    match FAILURE_STATUSES.contains(&status) {
        true => Ok(status),
        false => Err(FailureError::Status(status)),
    }
}

/// Probabilities of each kind of failure, checked to add up to at most 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Failure {
    error: Ratio,
    status: u16,
    close: Ratio,
    reset: Ratio,
}

impl Default for Failure {
    fn default() -> Self {
        Failure {
            error: Ratio::ZERO,
            status: 500,
            close: Ratio::ZERO,
            reset: Ratio::ZERO,
        }
    }
}

impl Failure {
    /// A mix answering `status` with probability `error`, closing with `close`, resetting with
    /// `reset`.
    ///
    /// # Errors
    /// [`FailureError`] when the sum exceeds 1 or `status` is not in [`FAILURE_STATUSES`].
    pub fn new(
        error: Ratio,
        status: u16,
        close: Ratio,
        reset: Ratio,
    ) -> Result<Self, FailureError> {
        let sum = error.get() + close.get() + reset.get();
        if sum > 1.0 + 1e-9 {
            return Err(FailureError::Sum(sum));
        }
        let status = failure_status(status)?;
        Ok(Failure {
            error,
            status,
            close,
            reset,
        })
    }

    /// Probability of an error status.
    pub fn error(&self) -> Ratio {
        self.error
    }

    /// The error status (default 500).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Probability of closing without a response.
    pub fn close(&self) -> Ratio {
        self.close
    }

    /// Probability of a TCP reset.
    pub fn reset(&self) -> Ratio {
        self.reset
    }

    /// The mix with the error probability (and status, if given) replaced. When the total would
    /// pass 1, close and then reset give way: a "fail 100%" window fails every request.
    pub fn with_error(self, error: Ratio, status: Option<u16>) -> Failure {
        let mut out = self;
        out.error = error;
        out.status = status.unwrap_or(self.status);
        out.fit();
        out
    }

    /// The mix with the close probability replaced (reset gives way past a total of 1).
    pub fn with_close(self, close: Ratio) -> Failure {
        let mut out = self;
        out.close = close.at_most(1.0 - out.error.get());
        out.fit();
        out
    }

    /// The mix with the reset probability replaced (capped so the total stays at most 1).
    pub fn with_reset(self, reset: Ratio) -> Failure {
        let mut out = self;
        out.reset = reset;
        out.fit();
        out
    }

    fn fit(&mut self) {
        self.close = self.close.at_most(1.0 - self.error.get());
        self.reset = self
            .reset
            .at_most(1.0 - self.error.get() - self.close.get());
    }

    /// Draws one outcome (always exactly one `f64` from `rng`).
    pub fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> Outcome {
        let u: f64 = rng.random();
        let error = self.error.get();
        let close = error + self.close.get();
        let reset = close + self.reset.get();
        if u < error {
            Outcome::Respond {
                status: self.status,
            }
        } else if u < close {
            Outcome::Close
        } else if u < reset {
            Outcome::Reset
        } else {
            Outcome::Respond { status: 200 }
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{error: {}, status: {}, close: {}, reset: {}}}",
            self.error.get(),
            self.status,
            self.close.get(),
            self.reset.get()
        )
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFailure {
    #[serde(default)]
    error: Ratio,
    #[serde(default = "default_status")]
    status: u16,
    #[serde(default)]
    close: Ratio,
    #[serde(default)]
    reset: Ratio,
}

fn default_status() -> u16 {
    500
}

impl<'de> Deserialize<'de> for Failure {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let raw = RawFailure::deserialize(de)?;
        // `fail.status: ...` names the key; the sum is the whole block's.
        Failure::new(raw.error, raw.status, raw.close, raw.reset).map_err(|e| match e {
            FailureError::Status(_) => serde::de::Error::custom(format!("fail.{e}")),
            FailureError::Sum(_) => serde::de::Error::custom(format!("fail: {e}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn ratio(x: f64) -> Ratio {
        Ratio::new(x).unwrap()
    }

    #[test]
    fn rejects_a_sum_past_one_and_bad_statuses() {
        assert!(matches!(
            Failure::new(ratio(0.6), 500, ratio(0.3), ratio(0.2)),
            Err(FailureError::Sum(_))
        ));
        for status in [0, 100, 101, 199, 600] {
            assert_eq!(
                Failure::new(Ratio::ZERO, status, Ratio::ZERO, Ratio::ZERO),
                Err(FailureError::Status(status))
            );
        }
        assert!(Failure::new(Ratio::ZERO, 200, Ratio::ZERO, Ratio::ZERO).is_ok());
    }

    #[test]
    fn overrides_keep_the_total_at_most_one() {
        let mix = Failure::new(ratio(0.1), 500, ratio(0.2), ratio(0.3)).unwrap();
        let all = mix.with_error(Ratio::ONE, Some(503));
        assert_eq!((all.error(), all.status()), (Ratio::ONE, 503));
        assert_eq!((all.close(), all.reset()), (Ratio::ZERO, Ratio::ZERO));
        let half = mix.with_error(ratio(0.6), None);
        assert_eq!((half.close().get(), half.reset().get()), (0.2, 0.2));
        assert_eq!(mix.with_reset(Ratio::ONE).reset().get(), 0.7);
    }

    #[test]
    fn draw_frequencies_match_the_mix() {
        let mix = Failure::new(ratio(0.2), 503, ratio(0.1), ratio(0.05)).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let n = 100_000;
        let (mut error, mut close, mut reset) = (0, 0, 0);
        for _ in 0..n {
            match mix.draw(&mut rng) {
                Outcome::Respond { status: 503 } => error += 1,
                Outcome::Close => close += 1,
                Outcome::Reset => reset += 1,
                Outcome::Respond { .. } => {}
            }
        }
        // 5 standard deviations of a binomial count: never flakes with a fixed seed anyway.
        for (count, p) in [(error, 0.2), (close, 0.1), (reset, 0.05)] {
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            assert!(
                (count as f64 - n as f64 * p).abs() < 5.0 * sd,
                "{count} vs {p}"
            );
        }
    }
}
