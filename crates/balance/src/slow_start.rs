//! Slow start: an endpoint that joins (or comes back) takes a growing share over a window,
//! instead of its full share at once, so a cold replica (empty caches, a JIT not yet warm, a
//! connection pool to fill) is not flooded. Envoy's `slow_start_config`, HAProxy's `slowstart`.
//!
//! # What
//! Envoy's formula: with `t` the time since the endpoint joined, `w` the window, `a` the
//! aggression and `m` the minimum weight, the endpoint's weight factor is
//! `max(m, (t / w)^(1 / a))` while `t < w`, and 1 after. Applied to the cost a load-aware picker
//! compares: `(cost + 1) / factor - 1` (the 1 so an idle endpoint's zero is scaled too), so at
//! `factor = 0.1` the endpoint must be about ten times cheaper than another to win a
//! comparison. Aggression 1 grows the share linearly; above 1 it grows faster
//! early (`(t / w)^(1/2)` at 2), below 1 slower.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_balance::SlowStart;
//!
//! let s = SlowStart { window: Duration::from_secs(10), aggression: 1.0, min_weight: 0.1 };
//! assert_eq!(s.factor(Duration::ZERO), 0.1); // the floor
//! assert!((s.factor(Duration::from_secs(5)) - 0.5).abs() < 1e-9);
//! assert_eq!(s.factor(Duration::from_secs(10)), 1.0); // warm
//! ```

use std::time::Duration;

/// Slow-start parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlowStart {
    /// How long the share takes to grow to full.
    pub window: Duration,
    /// How fast it grows: the exponent is `1 / aggression` (1: linear).
    pub aggression: f64,
    /// The smallest factor, as a fraction (Envoy's `min_weight_percent` / 100).
    pub min_weight: f64,
}

/// A [`SlowStart`] that cannot work.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SlowStartError {
    /// The window must be above zero and at most an hour.
    #[error("slow start: windowMs must be above zero and at most 1 h")]
    Window,
    /// The aggression must be a positive number (at most 100).
    #[error("slow start: aggression must be above 0 and at most 100, got {0}")]
    Aggression(f64),
    /// The minimum weight must be a percentage between 0 and 100.
    #[error("slow start: minWeightPercent must be between 0 and 100, got {0}")]
    MinWeight(f64),
}

impl SlowStart {
    /// Checks the parameters.
    ///
    /// # Errors
    /// The first [`SlowStartError`] found.
    pub fn validate(&self) -> Result<(), SlowStartError> {
        if self.window.is_zero() || self.window > Duration::from_secs(3600) {
            return Err(SlowStartError::Window);
        }
        if !(self.aggression > 0.0 && self.aggression <= 100.0) {
            return Err(SlowStartError::Aggression(self.aggression));
        }
        if !(0.0..=1.0).contains(&self.min_weight) {
            return Err(SlowStartError::MinWeight(self.min_weight * 100.0));
        }
        Ok(())
    }

    /// The weight factor `elapsed` after the endpoint joined: in `[min_weight, 1]` (a tiny
    /// positive floor keeps it dividing), 1 once the window is over.
    pub fn factor(&self, elapsed: Duration) -> f64 {
        if elapsed >= self.window {
            return 1.0;
        }
        let t = elapsed.as_secs_f64() / self.window.as_secs_f64();
        t.powf(1.0 / self.aggression)
            .max(self.min_weight)
            .clamp(1e-6, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn aggression_bends_the_curve() {
        let ms = Duration::from_millis;
        let s = |aggression| SlowStart {
            window: ms(1000),
            aggression,
            min_weight: 0.0,
        };
        assert!((s(1.0).factor(ms(250)) - 0.25).abs() < 1e-9);
        assert!((s(2.0).factor(ms(250)) - 0.5).abs() < 1e-9);
        assert!((s(0.5).factor(ms(500)) - 0.25).abs() < 1e-9);
    }

    #[test]
    fn validate_names_the_bad_key() {
        let good = SlowStart {
            window: Duration::from_secs(30),
            aggression: 1.0,
            min_weight: 0.1,
        };
        assert_eq!(good.validate(), Ok(()));
        let bad = |f: fn(&mut SlowStart)| {
            let mut s = good;
            f(&mut s);
            s.validate().unwrap_err()
        };
        assert_eq!(bad(|s| s.window = Duration::ZERO), SlowStartError::Window);
        assert!(matches!(
            bad(|s| s.aggression = 0.0),
            SlowStartError::Aggression(_)
        ));
        assert!(matches!(
            bad(|s| s.aggression = f64::NAN),
            SlowStartError::Aggression(_)
        ));
        assert!(matches!(
            bad(|s| s.min_weight = 1.5),
            SlowStartError::MinWeight(_)
        ));
    }

    proptest! {
        /// The factor never falls as time passes, stays in (0, 1], and is 1 past the window.
        #[test]
        fn the_factor_grows_to_one(
            window_ms in 1u64..100_000,
            aggression in 0.01f64..100.0,
            min_weight in 0.0f64..=1.0,
            a in 0u64..200_000,
            b in 0u64..200_000,
        ) {
            let s = SlowStart { window: Duration::from_millis(window_ms), aggression, min_weight };
            let (lo, hi) = (a.min(b), a.max(b));
            let (f_lo, f_hi) = (s.factor(Duration::from_millis(lo)), s.factor(Duration::from_millis(hi)));
            prop_assert!(f_lo > 0.0 && f_hi <= 1.0);
            prop_assert!(f_lo <= f_hi + 1e-12);
            prop_assert!(f_lo >= min_weight.min(1.0) - 1e-12);
            prop_assert_eq!(s.factor(Duration::from_millis(window_ms)), 1.0);
        }
    }
}
