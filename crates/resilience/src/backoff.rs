//! Backoffs: how long to wait before the `n`-th attempt after a failure.
//!
//! - [`Backoff::Constant`]: the same delay every time (the seed's accrual config: 10 s).
//! - [`Backoff::Exponential`]: `start * 2^(n-1)`, capped at `max` (linkerd2-proxy without jitter).
//! - [`Backoff::EqualJittered`]: Finagle's `Backoff.equalJittered`: with `h = start * 2^(n-1)`,
//!   wait `h + U[0, h)`, capped at `max`. Half the delay is guaranteed, half spreads retries so
//!   clients that failed together do not come back together (Linkerd 1's failure accrual
//!   default, 5 s to 300 s).
//! - [`Backoff::FullJittered`]: `U[0, min(max, start * 2^(n-1)))`, Envoy's retry backoff.
//!
//! A backoff is a pure function of the attempt number and an RNG, so the state machines that use
//! it only keep the attempt count.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use rand::SeedableRng;
//! use tailguard_resilience::Backoff;
//!
//! let mut rng = rand::rngs::StdRng::seed_from_u64(1);
//! let s = Duration::from_secs;
//! let exp = Backoff::Exponential { start: s(1), max: s(60) };
//! assert_eq!(exp.delay(1, &mut rng), s(1));
//! assert_eq!(exp.delay(4, &mut rng), s(8));
//! assert_eq!(exp.delay(40, &mut rng), s(60));
//! let jittered = Backoff::EqualJittered { start: s(5), max: s(300) };
//! let d = jittered.delay(2, &mut rng);
//! assert!(d >= s(10) && d < s(20));
//! ```

use rand::{Rng, RngCore};
use std::time::Duration;

/// A backoff policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backoff {
    /// Always the same delay.
    Constant(Duration),
    /// Doubling from `start`, capped at `max`.
    Exponential {
        /// The first delay.
        start: Duration,
        /// The largest delay.
        max: Duration,
    },
    /// Doubling `h` from `start`; wait `h + U[0, h)`, capped at `max`.
    EqualJittered {
        /// The first `h`.
        start: Duration,
        /// The largest delay.
        max: Duration,
    },
    /// Doubling bound from `start`; wait `U[0, bound)`, capped at `max`.
    FullJittered {
        /// The first bound.
        start: Duration,
        /// The largest bound.
        max: Duration,
    },
}

/// A [`Backoff`] that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BackoffError {
    /// A growing backoff must start above zero, or it never grows.
    #[error("backoff start must be above zero")]
    ZeroStart,
    /// The cap must not be below the start.
    #[error("backoff max ({max:?}) is below its start ({start:?})")]
    MaxBelowStart {
        /// The start given.
        start: Duration,
        /// The cap given.
        max: Duration,
    },
}

impl Backoff {
    /// Checks the parameters.
    ///
    /// # Errors
    /// [`BackoffError`] naming the broken constraint.
    pub fn validate(&self) -> Result<(), BackoffError> {
        let (start, max) = match *self {
            Backoff::Constant(_) => return Ok(()),
            Backoff::Exponential { start, max }
            | Backoff::EqualJittered { start, max }
            | Backoff::FullJittered { start, max } => (start, max),
        };
        if start.is_zero() {
            return Err(BackoffError::ZeroStart);
        }
        if max < start {
            return Err(BackoffError::MaxBelowStart { start, max });
        }
        Ok(())
    }

    /// The delay before attempt `attempt` (1 for the first wait; 0 is read as 1).
    pub fn delay(&self, attempt: u32, rng: &mut dyn RngCore) -> Duration {
        match *self {
            Backoff::Constant(d) => d,
            Backoff::Exponential { start, max } => doubled(start, attempt).min(max),
            Backoff::EqualJittered { start, max } => {
                let h = doubled(start, attempt).min(max);
                (h + jitter(h, rng)).min(max)
            }
            Backoff::FullJittered { start, max } => jitter(doubled(start, attempt).min(max), rng),
        }
    }
}

/// `start * 2^(attempt - 1)`, saturating.
fn doubled(start: Duration, attempt: u32) -> Duration {
    let shift = attempt.max(1) - 1;
    let factor = 1u32.checked_shl(shift.min(31)).unwrap_or(u32::MAX);
    start.checked_mul(factor).unwrap_or(Duration::MAX)
}

/// `U[0, bound)`; zero for a zero bound.
fn jitter(bound: Duration, rng: &mut dyn RngCore) -> Duration {
    let ns = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
    if ns == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos(rng.random_range(0..ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn validate_names_the_broken_constraint() {
        let s = Duration::from_secs;
        let bad = Backoff::Exponential {
            start: s(2),
            max: s(1),
        };
        assert!(matches!(
            bad.validate(),
            Err(BackoffError::MaxBelowStart { .. })
        ));
        let zero = Backoff::EqualJittered {
            start: Duration::ZERO,
            max: s(1),
        };
        assert_eq!(zero.validate(), Err(BackoffError::ZeroStart));
        assert_eq!(Backoff::Constant(Duration::ZERO).validate(), Ok(()));
    }

    proptest! {
        #[test]
        fn delays_stay_within_their_bounds(start_ms in 1u64..10_000, extra_ms in 0u64..600_000,
                                           attempt in 0u32..80, seed in any::<u64>()) {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            let start = Duration::from_millis(start_ms);
            let max = start + Duration::from_millis(extra_ms);
            let h = doubled(start, attempt).min(max);
            let exp = Backoff::Exponential { start, max }.delay(attempt, &mut rng);
            prop_assert_eq!(exp, h);
            let equal = Backoff::EqualJittered { start, max }.delay(attempt, &mut rng);
            prop_assert!(equal >= h && equal <= max && (equal < h * 2 || h.is_zero()));
            let full = Backoff::FullJittered { start, max }.delay(attempt, &mut rng);
            prop_assert!(full < h);
        }

        #[test]
        fn exponential_never_shrinks(start_ms in 1u64..10_000, attempt in 1u32..70) {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
            let b = Backoff::Exponential { start: Duration::from_millis(start_ms), max: Duration::MAX };
            prop_assert!(b.delay(attempt + 1, &mut rng) >= b.delay(attempt, &mut rng));
        }
    }
}
