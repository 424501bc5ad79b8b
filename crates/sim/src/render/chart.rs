//! The latency-by-percentile chart (seed 002's figure): latency on a linear axis, percentile on
//! a nines axis (90%, 99%, 99.9%, 99.99% equally spaced), one line per arm, drawn with
//! [`tailguard_report::svg`], the renderer every tailguard chart uses.

use super::Report;
use tailguard_report::svg::{Chart, Series};
use tailguard_report::Unit;

/// Points per decade of the percentile axis.
const STEPS_PER_DECADE: u32 = 100;

/// How many nines the x axis shows: enough for every arm to have data there (2 to 5).
fn decades(report: &Report) -> u32 {
    let fewest = report
        .arms
        .iter()
        .map(|a| a.latency.count())
        .min()
        .unwrap_or(0)
        .max(1);
    ((fewest as f64).log10().floor() as u32).clamp(2, 5)
}

/// The quantile at position `x` (in decades) of the axis.
fn quantile_at(x: f64) -> f64 {
    1.0 - 10f64.powf(-x)
}

/// A round axis top at or above `v` milliseconds: 1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a
/// power of ten (five ticks divide each evenly enough to read).
fn nice_ceiling(v: f64) -> f64 {
    let v = v.max(1.0);
    let base = 10f64.powf(v.log10().floor());
    [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .into_iter()
        .map(|m| m * base)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * base)
}

/// The chart as a standalone SVG document: latency by percentile, or for an overload scenario
/// ([`overload_svg`]) goodput by second.
pub fn svg(report: &Report) -> String {
    if report.overload.is_some() {
        return overload_svg(report);
    }
    let nines = decades(report);
    let top_ms = report
        .arms
        .iter()
        .map(|a| a.latency.quantile_us(quantile_at(f64::from(nines))) as f64 / 1e3)
        .fold(0.0, f64::max);
    let title = format!(
        "{}: latency by percentile (seed {})",
        report.scenario, report.seed
    );
    let mut chart = Chart::new(title)
        .nines()
        .x_title("percentile")
        .y_title("latency")
        .y_range(0.0, nice_ceiling(top_ms))
        .y_format(axis_label)
        .size(900.0, 520.0);
    let deadline_ms = report.deadline.as_secs_f64() * 1e3;
    if deadline_ms > 0.0 {
        let label = format!(
            "deadline {}",
            tailguard_text::duration::format_duration(report.deadline)
        );
        chart = chart.rule(deadline_ms, label);
    }
    for arm in &report.arms {
        let points = (0..=nines * STEPS_PER_DECADE)
            .map(|k| {
                let q = quantile_at(f64::from(k) / f64::from(STEPS_PER_DECADE));
                (q * 100.0, arm.latency.quantile_us(q) as f64 / 1e3)
            })
            .collect();
        chart = chart.series(Series::new(arm.name.clone(), points));
    }
    chart.svg()
}

/// An overload scenario's chart: each arm's good answers within the deadline per second, as a
/// share of the capacity, over the run's seconds; the capacity is the rule at 1.
fn overload_svg(report: &Report) -> String {
    let (o, window) = report.overload.expect("an overload scenario");
    let title = format!(
        "{}: answers in time per second, of capacity ({} req/s; offered more in seconds {}-{})",
        report.scenario, o.capacity, window.0, window.1
    );
    let mut chart = Chart::new(title)
        .x_title("second of the run")
        .y_title("in time / capacity")
        .y_range(0.0, 1.2)
        .x_format(|s| format!("{s:.0}s"))
        .y_format(|v| format!("{v:.2}"))
        .size(900.0, 520.0)
        .rule(1.0, "capacity");
    for arm in &report.arms {
        let points = arm
            .timeline
            .iter()
            .enumerate()
            .map(|(i, s)| (i as f64 + 0.5, s.within_deadline as f64 / o.capacity))
            .collect();
        chart = chart.series(Series::new(arm.name.clone(), points));
    }
    chart.svg()
}

/// A latency tick label (the axis is in milliseconds); zero needs no unit.
fn axis_label(ms: f64) -> String {
    if ms == 0.0 {
        "0".to_owned()
    } else {
        Unit::Auto.format((ms * 1e3) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ceilings_round_up() {
        assert_eq!(nice_ceiling(1_714.0), 2_000.0);
        assert_eq!(nice_ceiling(199.0), 200.0);
        assert_eq!(nice_ceiling(201.0), 250.0);
        assert_eq!(nice_ceiling(2_640.0), 3_000.0);
        assert_eq!(nice_ceiling(0.2), 1.0);
    }

    #[test]
    fn percentile_axis_is_log() {
        assert!((quantile_at(2.0) - 0.99).abs() < 1e-12);
        assert_eq!(quantile_at(0.0), 0.0);
    }
}
