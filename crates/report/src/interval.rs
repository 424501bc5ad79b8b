//! The interval report: one fixed-column line per interval, in slow_cooker's layout.
//!
//! ```text
//! # sending 1000 GET req/s with concurrency=10 to http://127.0.0.1:9000/ ...
//! #                     good/bad/failed   target goal% intvl      min [     p50      p95      p99     p999 ]      max change
//! 2026-11-22T17:10:00Z          10000/0/0    10000  100%   10s    142µs [   260µs    310µs    402µs   1.21ms ]   5.01ms
//! ```
//!
//! Differences from slow_cooker, on purpose: `p999` is the 99.9th percentile (slow_cooker
//! prints the max there), values carry their unit and decimals, and `goal%` prints `-` in
//! closed-loop runs where there is no target.

use crate::Unit;
use std::fmt::Write as _;
use tailguard_histogram::Percentiles;
use tailguard_record::IntervalSummary;

const COUNTS: usize = 18;
const VALUE: usize = 8;

/// The first line: what is being sent, where. `worker_pace` is a closed loop's shortest time
/// between two sends of one worker (slow_cooker's per-worker ticker), if it has one.
pub fn header(
    rate: f64,
    worker_pace: Option<std::time::Duration>,
    method: &str,
    concurrency: u64,
    urls: &[String],
) -> String {
    let target = match urls {
        [one] => one.clone(),
        [first, ..] => format!("{first} and {} more", urls.len() - 1),
        [] => String::from("nothing"),
    };
    let pace = match (rate > 0.0, worker_pace) {
        (true, _) => format!("{} {method} req/s", trim_float(rate)),
        (false, Some(p)) => format!(
            "{method} requests in a closed loop, each worker at most once per {},",
            crate::Unit::Auto.format(u64::try_from(p.as_micros()).unwrap_or(u64::MAX))
        ),
        (false, None) => format!("{method} requests as fast as possible"),
    };
    format!("# sending {pace} with concurrency={concurrency} to {target} ...")
}

/// The column titles, aligned with [`line`].
pub fn titles() -> String {
    let mut s = format!(
        "#{:>19} {:>COUNTS$} {:>8} {:>5} {:>5} {:>VALUE$} [",
        "", "good/bad/failed", "target", "goal%", "intvl", "min"
    );
    for name in ["p50", "p95", "p99", "p999"] {
        let _ = write!(s, " {name:>VALUE$}");
    }
    let _ = write!(s, " ] {:>VALUE$} change", "max");
    s
}

/// One interval's line.
pub fn line(iv: &IntervalSummary, unit: Unit) -> String {
    let t = &iv.totals;
    let counts = format!("{}/{}/{}", t.good, t.bad, t.failed);
    // Wide: counts read from a file may be anything.
    let answered = u128::from(t.good) + u128::from(t.bad);
    let (target, goal) = match (answered * 100).checked_div(u128::from(iv.target)) {
        Some(pct) => (iv.target.to_string(), format!("{}%", pct.min(100))),
        None => ("-".to_string(), "-".to_string()),
    };
    // No timed request in the interval: no value, not a zero.
    let value = |f: fn(&Percentiles) -> u64| match &t.latency_us {
        Some(l) => unit.format(f(l)),
        None => "-".to_string(),
    };
    let mut s = format!(
        "{:<20} {counts:>COUNTS$} {target:>8} {goal:>5} {:>5} {:>VALUE$} [",
        iv.timestamp,
        format!("{}s", trim_float(iv.duration_s)),
        value(|l| l.min),
    );
    for f in [
        |l: &Percentiles| l.p50,
        |l: &Percentiles| l.p95,
        |l: &Percentiles| l.p99,
        |l: &Percentiles| l.p999,
    ] {
        let _ = write!(s, " {:>VALUE$}", value(f));
    }
    let _ = write!(s, " ] {:>VALUE$} {}", value(|l| l.max), iv.change);
    s.trim_end().to_string()
}

/// `10`, `2.5`, `0.333`: a rate or length without trailing zeros.
pub fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailguard_histogram::Percentiles;
    use tailguard_record::Totals;

    fn interval(target: u64, good: u64) -> IntervalSummary {
        IntervalSummary {
            timestamp: "2026-11-22T17:10:00Z".into(),
            start_s: 0.0,
            duration_s: 10.0,
            target,
            change: "+".into(),
            totals: Totals {
                good,
                bad: 1,
                failed: 2,
                latency_us: Some(Percentiles {
                    min: 142,
                    p50: 260,
                    p90: 300,
                    p95: 310,
                    p99: 402,
                    p999: 1_210,
                    p9999: 4_000,
                    max: 5_010,
                }),
                ..Totals::default()
            },
        }
    }

    #[test]
    fn line_is_aligned_with_titles_and_shows_the_real_p999() {
        let l = line(&interval(5000, 4990), Unit::Auto);
        assert_eq!(
            l,
            "2026-11-22T17:10:00Z           4990/1/2     5000   99%   10s    142µs [    260µs    310µs    402µs   1.21ms ]   5.01ms +"
        );
        let t = titles();
        let col = |s: &str, pat: &str| {
            s.char_indices()
                .position(|(_, c)| c == '[')
                .map(|p| (p, pat.len()))
        };
        assert_eq!(col(&t, "["), col(&l, "["), "\n{t}\n{l}");
    }

    #[test]
    fn an_interval_without_timed_requests_shows_dashes_not_zeros() {
        let mut iv = interval(100, 0);
        iv.totals.bad = 0;
        iv.totals.latency_us = None;
        iv.change = "+++++".into();
        assert_eq!(
            line(&iv, Unit::Auto),
            "2026-11-22T17:10:00Z              0/0/2      100    0%   10s        - [        -        -        -        - ]        - +++++"
        );
    }

    #[test]
    fn goal_is_capped_and_dashed_without_target() {
        assert!(line(&interval(100, 500), Unit::Auto).contains(" 100% "));
        let closed = line(&interval(0, 500), Unit::Auto);
        assert!(closed.contains("        -     - "), "{closed}");
    }

    #[test]
    fn header_names_rate_or_max() {
        let urls = vec!["http://a/".to_string(), "http://b/".to_string()];
        assert_eq!(
            header(1000.0, None, "GET", 10, &urls),
            "# sending 1000 GET req/s with concurrency=10 to http://a/ and 1 more ..."
        );
        assert!(header(0.0, None, "GET", 4, &urls[..1]).contains("as fast as possible"));
        let paced = header(
            0.0,
            Some(std::time::Duration::from_millis(100)),
            "GET",
            50,
            &urls,
        );
        assert!(
            paced.contains("each worker at most once per 100"),
            "{paced}"
        );
    }
}
