//! [`Ratio`]: a probability in `[0, 1]`, checked once where it is read.
//!
//! Fleet files write probabilities as fractions (`error: 0.4`); fault strings and query
//! parameters write percentages (`fail 40%`, `?status=503:40`). Both end up as a `Ratio`, so
//! nothing below the edge re-checks a range.
//!
//! # Example
//! ```
//! use tailguard_fleet::Ratio;
//! assert_eq!(Ratio::parse_percent("40%").unwrap().get(), 0.4);
//! assert!(Ratio::new(1.5).is_err());
//! ```

use serde::{Deserialize, Deserializer};
use std::fmt;

/// A probability outside `[0, 1]` or not a number.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RatioError {
    /// The value is not within `[0, 1]` (or `[0%, 100%]`).
    #[error(
        "{0} is not a probability: use a fraction in [0, 1] (or a percentage in fault strings)"
    )]
    OutOfRange(f64),
    /// The text is not a percentage such as `40%` or `0.5%`.
    #[error("`{0}` is not a percentage: write e.g. `40%`")]
    Percent(String),
}

/// A probability in `[0, 1]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct Ratio(f64);

impl Ratio {
    /// Never.
    pub const ZERO: Ratio = Ratio(0.0);
    /// Always.
    pub const ONE: Ratio = Ratio(1.0);

    /// Checks `value` is in `[0, 1]`.
    ///
    /// # Errors
    /// [`RatioError::OutOfRange`] otherwise (NaN included).
    pub fn new(value: f64) -> Result<Ratio, RatioError> {
        if (0.0..=1.0).contains(&value) {
            Ok(Ratio(value))
        } else {
            Err(RatioError::OutOfRange(value))
        }
    }

    /// Reads a percentage: `40%`, `0.5%`, `100%`. The `%` is required, so `1` is never
    /// mistaken for 100%.
    ///
    /// # Errors
    /// [`RatioError::Percent`] when the text is not `<number>%`, `OutOfRange` past 100%.
    pub fn parse_percent(text: &str) -> Result<Ratio, RatioError> {
        let number = text
            .trim()
            .strip_suffix('%')
            .ok_or_else(|| RatioError::Percent(text.to_owned()))?;
        let value: f64 = number
            .trim()
            .parse()
            .map_err(|_| RatioError::Percent(text.to_owned()))?;
        Ratio::new(value / 100.0)
    }

    /// The probability as a fraction.
    pub fn get(self) -> f64 {
        self.0
    }

    /// The smaller of `self` and `limit`, for fitting probabilities under a shared total.
    pub fn at_most(self, limit: f64) -> Ratio {
        Ratio(self.0.min(limit.max(0.0)))
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Rounded so 0.07 shows as 7%, not 7.000000000000001%.
        write!(f, "{}%", (self.0 * 100.0 * 1e6).round() / 1e6)
    }
}

/// A fraction (`0.4`) or a percentage (`40%`), as command-line flags accept.
impl std::str::FromStr for Ratio {
    type Err = RatioError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.trim().ends_with('%') {
            return Ratio::parse_percent(text);
        }
        let value = text
            .trim()
            .parse::<f64>()
            .map_err(|_| RatioError::Percent(text.to_owned()))?;
        Ratio::new(value)
    }
}

impl<'de> Deserialize<'de> for Ratio {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        Ratio::new(f64::deserialize(de)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_the_range() {
        assert_eq!(Ratio::new(0.0).unwrap(), Ratio::ZERO);
        assert_eq!(Ratio::new(1.0).unwrap(), Ratio::ONE);
        assert!(Ratio::new(-0.1).is_err());
        assert!(Ratio::new(f64::NAN).is_err());
        assert_eq!(Ratio::parse_percent("100%").unwrap(), Ratio::ONE);
        assert_eq!(Ratio::parse_percent(" 2.5 %").unwrap().get(), 0.025);
        assert!(matches!(
            Ratio::parse_percent("0.4"),
            Err(RatioError::Percent(_))
        ));
        assert!(matches!(
            Ratio::parse_percent("140%"),
            Err(RatioError::OutOfRange(_))
        ));
    }

    #[test]
    fn flags_take_fractions_or_percentages() {
        assert_eq!("0.4".parse::<Ratio>().unwrap().get(), 0.4);
        assert_eq!("40%".parse::<Ratio>().unwrap().get(), 0.4);
        assert!("2".parse::<Ratio>().is_err());
        assert!("lots".parse::<Ratio>().is_err());
    }

    #[test]
    fn displays_as_a_percentage() {
        assert_eq!(Ratio::new(0.4).unwrap().to_string(), "40%");
        assert_eq!(Ratio::at_most(Ratio::ONE, 0.25).get(), 0.25);
    }
}
