//! Readable latency values: `260µs`, `42.1ms`, `1.71s`, never slow_cooker's integer
//! milliseconds (which print every loopback latency as `0`).
//!
//! # Example
//! ```
//! use tailguard_report::Unit;
//! assert_eq!(Unit::Auto.format(260), "260µs");
//! assert_eq!(Unit::Auto.format(42_140), "42.1ms");
//! assert_eq!(Unit::Auto.format(1_714_000), "1.71s");
//! assert_eq!(Unit::Ms.format(260), "0.260ms");
//! ```

use std::fmt;
use std::str::FromStr;

/// How latency values are printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unit {
    /// µs below 1 ms, ms below 1 s, s above, with three significant digits.
    #[default]
    Auto,
    /// Always microseconds, whole.
    Us,
    /// Always milliseconds, three decimals.
    Ms,
    /// Always seconds, three decimals.
    S,
}

impl Unit {
    /// Formats a value given in microseconds.
    pub fn format(self, us: u64) -> String {
        match self {
            Unit::Us => format!("{us}µs"),
            Unit::Ms => format!("{:.3}ms", us as f64 / 1e3),
            Unit::S => format!("{:.3}s", us as f64 / 1e6),
            Unit::Auto => auto(us),
        }
    }
}

fn auto(us: u64) -> String {
    if us < 1_000 {
        format!("{us}µs")
    } else if us < 1_000_000 {
        format!("{}ms", three_digits(us as f64 / 1e3))
    } else {
        format!("{}s", three_digits(us as f64 / 1e6))
    }
}

/// Three significant digits for values from 1 to 999.9: `1.71`, `42.1`, `167`.
fn three_digits(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// An unknown unit name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownUnit(pub String);

impl fmt::Display for UnknownUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown unit {:?}: use auto, us, ms or s", self.0)
    }
}

impl std::error::Error for UnknownUnit {}

impl FromStr for Unit {
    type Err = UnknownUnit;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Unit::Auto),
            "us" | "µs" => Ok(Unit::Us),
            "ms" => Ok(Unit::Ms),
            "s" => Ok(Unit::S),
            other => Err(UnknownUnit(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_switches_at_unit_boundaries() {
        let cases = [
            (0, "0µs"),
            (999, "999µs"),
            (1_000, "1.00ms"),
            (99_949, "99.9ms"),
            (167_000, "167ms"),
            (999_000, "999ms"),
            (2_000_000, "2.00s"),
            (125_000_000, "125s"),
        ];
        for (us, want) in cases {
            assert_eq!(Unit::Auto.format(us), want, "{us}");
        }
    }

    #[test]
    fn parses_unit_names_and_names_bad_ones() {
        assert_eq!("ms".parse::<Unit>(), Ok(Unit::Ms));
        let err = "min".parse::<Unit>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown unit \"min\": use auto, us, ms or s"
        );
    }
}
