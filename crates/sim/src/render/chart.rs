//! The latency-by-percentile chart (seed 002's figure): latency on a linear axis, percentile on
//! a log axis (`-log10(1 - p)`: 90%, 99%, 99.9%, 99.99% equally spaced), one line per arm.

use super::Report;
use std::fmt::Write as _;

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 520.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 220.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
/// Points per decade of the percentile axis.
const STEPS_PER_DECADE: u32 = 100;
const COLORS: [&str; 10] = [
    "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22",
];

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

/// The percentile at position `x` (in decades) of the axis.
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

/// The chart as a standalone SVG document.
pub fn svg(report: &Report) -> String {
    let nines = decades(report);
    let top_ms = report
        .arms
        .iter()
        .map(|a| a.latency.quantile_us(quantile_at(f64::from(nines))) as f64 / 1e3)
        .fold(0.0, f64::max);
    let y_max = nice_ceiling(top_ms);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let px = |x: f64| LEFT + plot_w * x / f64::from(nines);
    let py = |ms: f64| TOP + plot_h * (1.0 - (ms / y_max).min(1.0));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(out, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    let title = format!(
        "{}: latency by percentile (seed {})",
        report.scenario, report.seed
    );
    let _ = writeln!(
        out,
        "<text x=\"{LEFT}\" y=\"24\" font-size=\"15\">{}</text>",
        escape(&title)
    );
    axes(&mut out, nines, y_max, &px, &py);
    deadline(&mut out, report, nines, y_max, &px, &py);
    for (i, arm) in report.arms.iter().enumerate() {
        arm_line(&mut out, i, arm, nines, &px, &py);
    }
    out.push_str("</svg>\n");
    out
}

/// One arm's curve and its legend entry.
fn arm_line(
    out: &mut String,
    index: usize,
    arm: &crate::ArmResult,
    nines: u32,
    px: &dyn Fn(f64) -> f64,
    py: &dyn Fn(f64) -> f64,
) {
    let color = COLORS[index % COLORS.len()];
    let mut points = String::new();
    for k in 0..=nines * STEPS_PER_DECADE {
        let x = f64::from(k) / f64::from(STEPS_PER_DECADE);
        let ms = arm.latency.quantile_us(quantile_at(x)) as f64 / 1e3;
        let _ = write!(points, "{:.1},{:.1} ", px(x), py(ms));
    }
    let _ = writeln!(
        out,
        "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
        points.trim_end()
    );
    let ly = TOP + 20.0 * index as f64;
    let lx = WIDTH - RIGHT + 20.0;
    let _ = writeln!(
        out,
        "<line x1=\"{lx}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"3\"/>\
         <text x=\"{}\" y=\"{}\">{}</text>",
        lx + 20.0,
        lx + 26.0,
        ly + 4.0,
        escape(&arm.name)
    );
}

fn axes(
    out: &mut String,
    nines: u32,
    y_max: f64,
    px: &dyn Fn(f64) -> f64,
    py: &dyn Fn(f64) -> f64,
) {
    let (x0, x1, y0, y1) = (px(0.0), px(f64::from(nines)), py(0.0), py(y_max));
    let _ = writeln!(out, "<g stroke=\"#999\" fill=\"none\">");
    let _ = writeln!(out, "<path d=\"M{x0:.1},{y1:.1} V{y0:.1} H{x1:.1}\"/>");
    for k in 0..=nines {
        let x = px(f64::from(k));
        let _ = writeln!(
            out,
            "<path d=\"M{x:.1},{y0:.1} V{y1:.1}\" stroke=\"#eee\"/>"
        );
    }
    for k in 1..=5 {
        let y = py(y_max * f64::from(k) / 5.0);
        let _ = writeln!(
            out,
            "<path d=\"M{x0:.1},{y:.1} H{x1:.1}\" stroke=\"#eee\"/>"
        );
    }
    out.push_str("</g>\n");
    tick_labels(out, nines, y_max, px, py);
}

/// Percentiles under the x axis, latencies left of the y axis, and the x axis title.
fn tick_labels(
    out: &mut String,
    nines: u32,
    y_max: f64,
    px: &dyn Fn(f64) -> f64,
    py: &dyn Fn(f64) -> f64,
) {
    let (x0, x1, y0) = (px(0.0), px(f64::from(nines)), py(0.0));
    for k in 0..=nines {
        let label = match k {
            0 => "0%".to_owned(),
            1 => "90%".to_owned(),
            k => format!("99.{}%", "9".repeat(k as usize - 2)).replace("99.%", "99%"),
        };
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
            px(f64::from(k)),
            y0 + 18.0
        );
    }
    for k in 0..=5 {
        let ms = y_max * f64::from(k) / 5.0;
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            x0 - 6.0,
            py(ms) + 4.0,
            axis_label(ms)
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">percentile (log scale)</text>",
        (x0 + x1) / 2.0,
        y0 + 38.0
    );
}

/// A dashed line at the deadline, when it is on the chart.
fn deadline(
    out: &mut String,
    report: &Report,
    nines: u32,
    y_max: f64,
    px: &dyn Fn(f64) -> f64,
    py: &dyn Fn(f64) -> f64,
) {
    let ms = report.deadline.as_secs_f64() * 1e3;
    if ms <= 0.0 || ms > y_max {
        return;
    }
    let (x0, x1, y) = (px(0.0), px(f64::from(nines)), py(ms));
    let label = format!(
        "deadline {}",
        tailguard_text::duration::format_duration(report.deadline)
    );
    let _ = writeln!(
        out,
        "<path d=\"M{x0:.1},{y:.1} H{x1:.1}\" stroke=\"#555\" stroke-dasharray=\"6,4\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" fill=\"#555\">{label}</text>",
        x0 + 6.0,
        y - 5.0
    );
}

/// Escapes text for SVG and HTML.
pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A latency tick label; zero needs no unit.
fn axis_label(ms: f64) -> String {
    if ms == 0.0 {
        "0".to_owned()
    } else {
        tailguard_report::Unit::Auto.format((ms * 1e3) as u64)
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
