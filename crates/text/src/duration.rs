//! Durations written the way people write them: `167ms`, `1.5s`, `250us`, `2m`, `1m30s`.
//!
//! Every place tailguard reads a duration uses this one syntax: command-line flags, fleet and
//! scenario files, fault strings and `?delay=`, so a value means the same thing wherever it is
//! typed. Decimals are allowed (`0.5s`), which distribution parameters need, and parts add up
//! (`1m30s`, `1h 15m`). A bare `0` is accepted (it needs no unit); any other bare number is
//! rejected because `150` could be milliseconds or seconds.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_text::duration::{format_duration, parse_duration};
//! assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
//! assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
//! assert_eq!(format_duration(Duration::from_millis(167)), "167ms");
//! ```

use serde::de::{self, Deserializer, Visitor};
use std::fmt;
use std::time::Duration;

/// A duration string that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing was given.
    #[error("empty duration")]
    Empty,
    /// The number part is not a non-negative decimal.
    #[error("`{0}` is not a duration: expected a number then a unit, e.g. `150ms` or `1.5s`")]
    Number(String),
    /// A number without a unit, other than `0`.
    #[error("`{0}` has no unit: write e.g. `{0}ms` or `{0}s`")]
    NoUnit(String),
    /// The unit is none of ns, us, µs, ms, s, m, h.
    #[error("unknown unit `{unit}` in `{text}`: use ns, us, ms, s, m or h")]
    Unit {
        /// The whole input.
        text: String,
        /// The unit part.
        unit: String,
    },
    /// Larger than `Duration` can hold.
    #[error("`{0}` is too large")]
    TooLarge(String),
}

/// Parses one or more `<decimal><unit>` parts (summed) with unit ns, us (or µs), ms, s, m (or
/// min) or h; spaces between parts and before a unit are allowed.
///
/// # Errors
/// [`DurationError`] naming what is wrong with `text`.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let mut rest = text;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(split);
        let number =
            Decimal::parse(number).ok_or_else(|| DurationError::Number(text.to_owned()))?;
        let after = after.trim_start();
        let unit_len = after
            .find(|c: char| !c.is_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let nanos_per_unit: u128 = match unit {
            "" if number.is_zero() && text.len() == split => 0,
            "" => return Err(DurationError::NoUnit(text.to_owned())),
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" | "min" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(DurationError::Unit {
                    text: text.to_owned(),
                    unit: unit.to_owned(),
                })
            }
        };
        total = number
            .times(nanos_per_unit)
            .and_then(|n| total.checked_add(n))
            .ok_or_else(|| DurationError::TooLarge(text.to_owned()))?;
        rest = after.trim_start();
    }
    u64::try_from(total)
        .map(Duration::from_nanos)
        .map_err(|_| DurationError::TooLarge(text.to_owned()))
}

/// A non-negative decimal read exactly (no float rounding, so every duration up to
/// `u64::MAX` nanoseconds reads back as written): whole part, and up to 20 digits of fraction.
struct Decimal {
    whole: u128,
    fraction: u128,
    /// `10^digits` of the fraction kept.
    scale: u128,
}

impl Decimal {
    /// Digits with at most one `.` and at least one digit; `None` otherwise or when the whole
    /// part has more digits than any duration needs.
    fn parse(number: &str) -> Option<Decimal> {
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') || whole.len() > 30 {
            return None;
        }
        let fraction = &fraction[..fraction.len().min(20)];
        let digits = |d: &str| {
            if d.is_empty() {
                Some(0)
            } else {
                d.parse().ok()
            }
        };
        Some(Decimal {
            whole: digits(whole)?,
            fraction: digits(fraction)?,
            scale: 10u128.pow(fraction.len() as u32),
        })
    }

    fn is_zero(&self) -> bool {
        self.whole == 0 && self.fraction == 0
    }

    /// This many units of `unit` nanoseconds, rounded to the nearest nanosecond (half up);
    /// `None` on overflow.
    fn times(&self, unit: u128) -> Option<u128> {
        // fraction < 10^20 and unit <= 3.6e12: the product fits a u128 (3.4e38).
        let part = (self.fraction * unit + self.scale / 2) / self.scale;
        self.whole.checked_mul(unit)?.checked_add(part)
    }
}

/// Formats with the largest unit that keeps the value whole (`2s`, `167ms`, `250us`), else in
/// seconds with the decimals needed (`1.168163325s`); either form parses back exactly.
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    for (unit, size) in [("h", 3_600_000_000_000), ("m", 60_000_000_000u128)] {
        if nanos.is_multiple_of(size) && nanos >= size {
            return format!("{}{unit}", nanos / size);
        }
    }
    for (unit, size) in [("s", 1_000_000_000u128), ("ms", 1_000_000), ("us", 1_000)] {
        if nanos.is_multiple_of(size) {
            return format!("{}{unit}", nanos / size);
        }
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    let (unit, size) = if nanos >= 1_000_000_000 {
        ("s", 1_000_000_000u128)
    } else {
        ("ms", 1_000_000)
    };
    let fraction = format!("{:0width$}", nanos % size, width = size.ilog10() as usize);
    format!("{}.{}{unit}", nanos / size, fraction.trim_end_matches('0'))
}

/// serde helper: a duration field written as a string such as `150ms` (or the number `0`).
pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Duration, D::Error> {
    // A visitor (rather than parsing after deserializing a String) so the YAML reader still
    // knows the position when the error is raised.
    de.deserialize_any(DurationVisitor)
}

/// A duration field of a serde type, written as in [`parse_duration`] (or the number `0`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub Duration);

impl<'de> serde::Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        deserialize(de).map(Dur)
    }
}

impl From<Dur> for Duration {
    fn from(d: Dur) -> Duration {
        d.0
    }
}

struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as `150ms` or `1.5s`")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        parse_duration(v).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
        self.visit_str(&v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_each_unit() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("150ms").unwrap(), ms(150));
        assert_eq!(parse_duration("1.5s").unwrap(), ms(1500));
        assert_eq!(parse_duration("0.1s").unwrap(), ms(100));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("250µs").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration(" 7 ns ").unwrap(), Duration::from_nanos(7));
    }

    #[test]
    fn adds_up_parts() {
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h 15m").unwrap(), Duration::from_secs(4500));
        assert_eq!(
            parse_duration("1s500ms").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(
            parse_duration("1s 500"),
            Err(DurationError::NoUnit("1s 500".into()))
        );
        assert_eq!(
            parse_duration("0 0"),
            Err(DurationError::NoUnit("0 0".into()))
        );
    }

    #[test]
    fn rejects_with_a_reason() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert_eq!(
            parse_duration("150"),
            Err(DurationError::NoUnit("150".into()))
        );
        assert!(matches!(
            parse_duration("3 fortnights"),
            Err(DurationError::Unit { .. })
        ));
        assert!(matches!(
            parse_duration("-1s"),
            Err(DurationError::Number(_))
        ));
        assert!(matches!(
            parse_duration("1e30h"),
            Err(DurationError::Unit { .. })
        ));
    }

    #[test]
    fn rejects_overflow() {
        assert!(matches!(
            parse_duration("99999999999999h"),
            Err(DurationError::TooLarge(_))
        ));
    }

    #[test]
    fn formats_with_the_largest_whole_unit() {
        assert_eq!(format_duration(Duration::ZERO), "0s");
        assert_eq!(format_duration(Duration::from_secs(2)), "2s");
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::from_micros(250)), "250us");
        assert_eq!(format_duration(Duration::from_nanos(7)), "7ns");
        assert_eq!(
            format_duration(Duration::from_nanos(1_168_163_325)),
            "1.168163325s"
        );
        assert_eq!(format_duration(Duration::from_nanos(2_500_100)), "2.5001ms");
    }

    #[test]
    fn reads_decimals_exactly_at_any_size() {
        assert_eq!(
            parse_duration("18000000001s").unwrap(),
            Duration::from_secs(18_000_000_001)
        );
        assert_eq!(
            parse_duration("18446744073.709551615s").unwrap(),
            Duration::from_nanos(u64::MAX)
        );
        assert!(matches!(
            parse_duration("18446744073.709551616s"),
            Err(DurationError::TooLarge(_))
        ));
        assert_eq!(parse_duration("1.5ns").unwrap(), Duration::from_nanos(2));
        assert_eq!(parse_duration(".5s").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("0.0").unwrap(), Duration::ZERO);
        for bad in [".", "1.2.3s", "1..s"] {
            assert!(
                matches!(parse_duration(bad), Err(DurationError::Number(_))),
                "{bad}"
            );
        }
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(nanos in prop_oneof![0u64..10_000_000_000_000, any::<u64>()]) {
            let d = Duration::from_nanos(nanos);
            prop_assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
    }
}
