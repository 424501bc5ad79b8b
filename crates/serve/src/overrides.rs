//! Per-request overrides from the query string, in the style of fortio's echo server.
//!
//! Off unless `--overrides` is given: a benchmark must not be skewed by a stray query. Each
//! parameter is a comma-separated list of `value[:percent]`; a value without a percentage
//! applies to every request, and otherwise one draw picks the entry (or none).
//! - `delay=150ms` or `delay=10ms:50,1s:1`: replace the latency;
//! - `status=503` or `status=503:10,429:5`: answer with that status (200 to 599: a 1xx is
//!   interim, not an answer);
//! - `close=5`, `reset=5`: percent of requests closed / reset without a response;
//! - `size=1024`: answer with that many bytes.
//!
//! A query is hostile input: a size above [`MAX_BODY_BYTES`] (16 MiB) or a delay above
//! [`MAX_LATENCY`] (1 h) is a 400 naming the limit, before anything is allocated or awaited.

use rand::Rng;
use std::time::Duration;
use tailguard_fleet::backend::{MAX_BODY_BYTES, MAX_LATENCY};
use tailguard_fleet::failure::failure_status;
use tailguard_fleet::{Decision, Outcome};
use tailguard_text::duration::parse_duration;

/// A query parameter that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad query parameter `{key}={value}`: {reason}")]
pub struct OverrideError {
    key: String,
    value: String,
    reason: String,
}

/// The overrides in one query string.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    delay: Vec<(Duration, f64)>,
    status: Vec<(u16, f64)>,
    close: f64,
    reset: f64,
    /// Body size to answer with, if given.
    pub size: Option<usize>,
}

impl Overrides {
    /// Parses a query string (`a=1&b=2`); unknown keys are ignored, like fortio.
    ///
    /// # Errors
    /// [`OverrideError`] naming the first bad parameter.
    pub fn parse(query: &str) -> Result<Overrides, OverrideError> {
        let mut out = Overrides::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let bad = |reason: String| OverrideError {
                key: key.to_owned(),
                value: value.to_owned(),
                reason,
            };
            match key {
                "delay" => out.delay = weighted(value, delay).map_err(bad)?,
                "status" => out.status = weighted(value, status).map_err(bad)?,
                "close" => out.close = percent(value).map_err(bad)?,
                "reset" => out.reset = percent(value).map_err(bad)?,
                "size" => out.size = Some(size(value).map_err(bad)?),
                _ => {}
            }
        }
        if out.close + out.reset > 100.0 {
            return Err(OverrideError {
                key: "close+reset".into(),
                value: format!("{}", out.close + out.reset),
                reason: "adds up past 100%".into(),
            });
        }
        Ok(out)
    }

    /// Changes `decision` as the query asks, drawing from `rng` only for weighted entries.
    pub fn apply<R: Rng + ?Sized>(&self, decision: &mut Decision, rng: &mut R) {
        if let Some(delay) = pick(&self.delay, rng) {
            decision.latency = delay;
        }
        if let Some(status) = pick(&self.status, rng) {
            decision.outcome = Outcome::Respond { status };
        }
        if self.close + self.reset > 0.0 {
            let u = rng.random::<f64>() * 100.0;
            if u < self.close {
                decision.outcome = Outcome::Close;
            } else if u < self.close + self.reset {
                decision.outcome = Outcome::Reset;
            }
        }
    }
}

fn delay(v: &str) -> Result<Duration, String> {
    let d = parse_duration(v).map_err(|e| e.to_string())?;
    if d > MAX_LATENCY {
        return Err("a delay must be at most 1h".into());
    }
    Ok(d)
}

fn size(v: &str) -> Result<usize, String> {
    match v.parse::<u64>().map(usize::try_from) {
        Ok(Ok(n)) if n <= MAX_BODY_BYTES => Ok(n),
        Ok(_) => Err(format!("a size must be at most {MAX_BODY_BYTES} bytes")),
        Err(_) => Err("not a byte count".into()),
    }
}

/// A status to answer with in place of the backend's: a final one, as for the fleet file's
/// `fail.status` (a 1xx is interim and cannot be the answer).
fn status(v: &str) -> Result<u16, String> {
    let status = v
        .parse::<u16>()
        .map_err(|_| format!("`{v}` is not an HTTP status"))?;
    failure_status(status).map_err(|e| e.to_string())
}

fn percent(v: &str) -> Result<f64, String> {
    v.trim_end_matches('%')
        .parse::<f64>()
        .ok()
        .filter(|p| (0.0..=100.0).contains(p))
        .ok_or_else(|| format!("`{v}` is not a percentage in [0, 100]"))
}

/// `a[:pa],b[:pb],...` with percentages adding up to at most 100 (a missing one means 100).
fn weighted<T>(
    list: &str,
    value: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<(T, f64)>, String> {
    let mut out = Vec::new();
    let mut total = 0.0;
    for entry in list.split(',') {
        let (v, p) = match entry.split_once(':') {
            Some((v, p)) => (v, percent(p)?),
            None => (entry, 100.0),
        };
        total += p;
        out.push((value(v)?, p));
    }
    if total > 100.0 + 1e-9 {
        return Err(format!("percentages add up to {total}, past 100"));
    }
    Ok(out)
}

/// One entry by weight, or `None` for the remainder; no draw when a single entry has 100%.
fn pick<T: Copy, R: Rng + ?Sized>(list: &[(T, f64)], rng: &mut R) -> Option<T> {
    match list {
        [] => None,
        [(v, p)] if *p >= 100.0 => Some(*v),
        _ => {
            let mut u = rng.random::<f64>() * 100.0;
            for (v, p) in list {
                if u < *p {
                    return Some(*v);
                }
                u -= p;
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_the_documented_example() {
        let o = super::Overrides::parse("delay=150ms&status=503:10").unwrap();
        assert_eq!(o.size, None);
    }

    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn decide(query: &str, rng: &mut Xoshiro256PlusPlus) -> Decision {
        let mut d = Decision {
            latency: Duration::from_millis(1),
            outcome: Outcome::Respond { status: 200 },
        };
        Overrides::parse(query).unwrap().apply(&mut d, rng);
        d
    }

    #[test]
    fn fixed_overrides_apply_to_every_request() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let d = decide("delay=150ms&status=503&other=x", &mut rng);
        assert_eq!(d.latency, Duration::from_millis(150));
        assert_eq!(d.outcome, Outcome::Respond { status: 503 });
        assert_eq!(Overrides::parse("size=12").unwrap().size, Some(12));
    }

    #[test]
    fn weighted_status_hits_its_rate() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let n = 20_000;
        let hits = (0..n)
            .filter(|_| {
                decide("status=503:10", &mut rng).outcome == Outcome::Respond { status: 503 }
            })
            .count();
        assert!((1_800..2_200).contains(&hits), "{hits}");
    }

    #[test]
    fn bad_parameters_are_named() {
        let err = Overrides::parse("delay=fast").unwrap_err().to_string();
        assert!(err.contains("`delay=fast`"), "{err}");
        assert!(Overrides::parse("status=503:60,500:60").is_err());
        assert!(Overrides::parse("status=700").is_err());
        let err = Overrides::parse("status=101").unwrap_err().to_string();
        assert!(
            err.contains("`status=101`") && err.contains("200 to 599"),
            "{err}"
        );
        assert!(Overrides::parse("close=70&reset=40").is_err());
    }
}
