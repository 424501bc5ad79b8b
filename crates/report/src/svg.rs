//! Line charts as standalone SVG documents, without dependencies: named series of `(x, y)`
//! points, a legend, axis titles and round tick values.
//!
//! The x axis is linear, or *nines* for percentile curves: a point's x is a percentile `p`
//! drawn at `-log10(1 - p/100)`, so 90%, 99%, 99.9% and 99.99% are equally spaced, the layout
//! of HdrHistogram's percentile plots (a point at 100%, the max, sits on the right edge). The
//! y axis is linear (from zero) or log. A non-finite y breaks a line, so a gap in the data
//! stays a gap.
//!
//! Each series is one `<path class="series" data-series="NAME">`, so tests and stylesheets can
//! find it. The output is a pure function of the chart: the same chart gives the same bytes.
//!
//! # Example
//! ```
//! use tailguard_report::svg::{Chart, Series};
//! let svg = Chart::new("requests per second")
//!     .x_title("seconds")
//!     .y_title("req/s")
//!     .series(Series::new("baseline", vec![(0.0, 98.0), (1.0, 101.0)]))
//!     .series(Series::new("proxy", vec![(0.0, 99.0), (1.0, 100.0)]).dashed())
//!     .svg();
//! assert!(svg.starts_with("<svg"));
//! assert_eq!(svg.matches("class=\"series\"").count(), 2);
//! ```

use std::fmt::Write as _;

/// Series colours, taken in turn (the category10 palette: ten hues that stay apart on white).
pub const PALETTE: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22",
];

/// Room around the plot area: the title above, tick labels and axis titles left and below,
/// the legend right.
const TOP: f64 = 36.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 180.0;
/// Legend text width per character, a generous average for 12px sans-serif.
const CHAR_WIDTH: f64 = 7.0;
const BOTTOM: f64 = 52.0;
/// About this many ticks on a linear axis.
const TICKS: usize = 5;

/// How x values are placed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XAxis {
    /// As given.
    #[default]
    Linear,
    /// Percentiles from 0 to 100, at [`nines`]`(p)`.
    Nines,
}

/// One named line.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    name: String,
    points: Vec<(f64, f64)>,
    dashed: bool,
    color: Option<usize>,
}

impl Series {
    /// A solid line through `points`, in the palette colour of its position in the chart.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            dashed: false,
            color: None,
        }
    }

    /// Draws the line dashed (a second figure of the same subject, e.g. p50 beside p99).
    pub fn dashed(mut self) -> Series {
        self.dashed = true;
        self
    }

    /// Uses palette colour `slot` (modulo its length) instead of the series' position, so two
    /// series of one subject share a colour.
    pub fn color(mut self, slot: usize) -> Series {
        self.color = Some(slot);
        self
    }

    /// The name shown in the legend and written in `data-series`.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A line chart; build it, then render it with [`Chart::svg`].
#[derive(Clone, Debug)]
pub struct Chart {
    title: String,
    x_title: String,
    y_title: String,
    x_axis: XAxis,
    y_log: bool,
    y_range: Option<(f64, f64)>,
    x_format: fn(f64) -> String,
    y_format: fn(f64) -> String,
    width: f64,
    height: f64,
    series: Vec<Series>,
    rules: Vec<(f64, String)>,
}

impl Chart {
    /// An empty 640 × 360 chart with a linear x axis and a linear y axis from zero.
    pub fn new(title: impl Into<String>) -> Chart {
        Chart {
            title: title.into(),
            x_title: String::new(),
            y_title: String::new(),
            x_axis: XAxis::Linear,
            y_log: false,
            y_range: None,
            x_format: number,
            y_format: number,
            width: 640.0,
            height: 360.0,
            series: Vec::new(),
            rules: Vec::new(),
        }
    }

    /// The x axis title.
    pub fn x_title(mut self, title: impl Into<String>) -> Chart {
        self.x_title = title.into();
        self
    }

    /// The y axis title.
    pub fn y_title(mut self, title: impl Into<String>) -> Chart {
        self.y_title = title.into();
        self
    }

    /// Reads x as percentiles on a nines axis ([`XAxis::Nines`]).
    pub fn nines(mut self) -> Chart {
        self.x_axis = XAxis::Nines;
        self
    }

    /// A log y axis (values at or below zero are not drawn) or a linear one.
    pub fn y_log(mut self, log: bool) -> Chart {
        self.y_log = log;
        self
    }

    /// A fixed y range instead of one fitted to the data; values outside sit on the edge.
    pub fn y_range(mut self, lo: f64, hi: f64) -> Chart {
        self.y_range = Some((lo, hi));
        self
    }

    /// How x tick values are written on a linear axis (default [`number`]).
    pub fn x_format(mut self, format: fn(f64) -> String) -> Chart {
        self.x_format = format;
        self
    }

    /// How y tick values are written (default [`number`]).
    pub fn y_format(mut self, format: fn(f64) -> String) -> Chart {
        self.y_format = format;
        self
    }

    /// The size in SVG units (the page may scale it: the document has a `viewBox`).
    pub fn size(mut self, width: f64, height: f64) -> Chart {
        self.width = width;
        self.height = height;
        self
    }

    /// Adds a line.
    pub fn series(mut self, series: Series) -> Chart {
        self.series.push(series);
        self
    }

    /// A labelled horizontal reference line at `y` (a deadline), drawn only when the data's
    /// range includes it: a rule never squashes the data.
    pub fn rule(mut self, y: f64, label: impl Into<String>) -> Chart {
        self.rules.push((y, label.into()));
        self
    }

    /// True when no series has a point that can be drawn.
    pub fn is_empty(&self) -> bool {
        self.series
            .iter()
            .all(|s| s.points.iter().all(|&p| self.unit(p).is_none()))
    }

    /// The chart as a standalone `<svg>` document.
    pub fn svg(&self) -> String {
        let frame = self.frame();
        let (w, h) = (self.width, self.height);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"{w}\" \
             height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">"
        );
        let title = escape(&self.title);
        let _ = writeln!(out, "<title>{title}</title>");
        let _ = writeln!(out, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
        let _ = writeln!(
            out,
            "<text x=\"{LEFT}\" y=\"22\" font-size=\"14\" font-weight=\"bold\">{title}</text>"
        );
        frame.axes(&mut out, &self.x_title, &self.y_title);
        for (y, label) in &self.rules {
            frame.rule(&mut out, self.y_unit(*y), label);
        }
        for (i, s) in self.series.iter().enumerate() {
            let slot = s.color.unwrap_or(i);
            let color = PALETTE[slot % PALETTE.len()];
            let dash = dash(s.dashed, slot);
            frame.line(&mut out, s, self.path(&frame, s), color, dash);
            legend(
                &mut out,
                w - self.right() + 16.0,
                TOP + 18.0 * i as f64,
                s,
                (color, dash),
            );
        }
        out.push_str("</svg>\n");
        out
    }

    /// Room right of the plot: enough for the longest legend entry (a 26-unit line sample,
    /// then the name), and never less than [`RIGHT`].
    fn right(&self) -> f64 {
        let longest = self
            .series
            .iter()
            .map(|s| s.name.chars().count())
            .max()
            .unwrap_or(0);
        RIGHT.max(16.0 + 32.0 + CHAR_WIDTH * longest as f64)
    }

    /// The path data of one series: `M` at its start and after each gap, `L` between.
    fn path(&self, frame: &Frame, s: &Series) -> String {
        let mut d = String::new();
        let mut pen_down = false;
        for &p in &s.points {
            match self.unit(p) {
                Some((x, y)) => {
                    let (px, py) = frame.at(x, y);
                    let op = if pen_down { 'L' } else { 'M' };
                    let _ = write!(d, "{op}{px:.1},{py:.1} ");
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        d.trim_end().to_owned()
    }

    /// A point in axis units, or `None` when it cannot be drawn.
    fn unit(&self, (x, y): (f64, f64)) -> Option<(f64, f64)> {
        let x = match self.x_axis {
            XAxis::Linear => x,
            XAxis::Nines => nines(x),
        };
        let y = self.y_unit(y)?;
        (!x.is_nan() && (x.is_finite() || self.x_axis == XAxis::Nines)).then_some((x, y))
    }

    fn y_unit(&self, y: f64) -> Option<f64> {
        let y = if self.y_log { y.log10() } else { y };
        y.is_finite().then_some(y)
    }

    /// Fits both axes to the drawable points (or the fixed y range).
    fn frame(&self) -> Frame {
        let units: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().filter_map(|&p| self.unit(p)))
            .collect();
        let xs = units.iter().map(|u| u.0).filter(|x| x.is_finite());
        let ys = units.iter().map(|u| u.1);
        let x = match self.x_axis {
            XAxis::Linear => linear_scale(bounds(xs), self.x_format),
            XAxis::Nines => nines_scale(xs.fold(0.0, f64::max)),
        };
        let y = match (self.y_range, self.y_log) {
            (Some((lo, hi)), log) => fixed_scale(lo, hi, log, self.y_format),
            (None, true) => log_scale(bounds(ys), self.y_format),
            (None, false) => {
                let (lo, hi) = bounds(ys).unwrap_or((0.0, 0.0));
                linear_scale(Some((lo.min(0.0), hi.max(0.0))), self.y_format)
            }
        };
        Frame {
            x,
            y,
            left: LEFT,
            top: TOP,
            width: self.width - LEFT - self.right(),
            height: self.height - TOP - BOTTOM,
        }
    }
}

/// The stroke pattern of a series in palette `slot`: solid or dashed as asked, and past the
/// palette's ten colours (which then come round again) dotted, or dash-dotted when dashed, so
/// the first twenty series each have a colour and pattern of their own.
fn dash(dashed: bool, slot: usize) -> &'static str {
    match (dashed, slot / PALETTE.len()) {
        (false, 0) => "",
        (true, 0) => " stroke-dasharray=\"6,4\"",
        (false, _) => " stroke-dasharray=\"1,4\"",
        (true, _) => " stroke-dasharray=\"8,3,1,3\"",
    }
}

/// A legend entry: a short line in the series' colour and dash, then its name.
fn legend(out: &mut String, x: f64, y: f64, s: &Series, (color, dash): (&str, &str)) {
    let _ = writeln!(
        out,
        "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{color}\" \
         stroke-width=\"2\"{dash}/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
        x + 24.0,
        x + 30.0,
        y + 4.0,
        escape(&s.name)
    );
}

/// One axis: its ends and labelled ticks, in axis units (log10 of the value on a log axis).
#[derive(Debug)]
struct Scale {
    lo: f64,
    hi: f64,
    ticks: Vec<(f64, String)>,
}

impl Scale {
    /// Where `u` falls between the ends, from 0 to 1; beyond them, on the edge.
    fn fraction(&self, u: f64) -> f64 {
        ((u - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0)
    }
}

/// The plot area and the two scales mapping axis units into it.
#[derive(Debug)]
struct Frame {
    x: Scale,
    y: Scale,
    left: f64,
    top: f64,
    width: f64,
    height: f64,
}

impl Frame {
    /// The SVG coordinates of a point in axis units.
    fn at(&self, x: f64, y: f64) -> (f64, f64) {
        (
            self.left + self.width * self.x.fraction(x),
            self.top + self.height * (1.0 - self.y.fraction(y)),
        )
    }

    /// Grid lines at the ticks, the two axis lines, tick labels and axis titles.
    fn axes(&self, out: &mut String, x_title: &str, y_title: &str) {
        let (l, t) = (self.left, self.top);
        let (r, b) = (l + self.width, t + self.height);
        out.push_str("<g stroke=\"#e4e4e4\" fill=\"none\">\n");
        for (u, _) in &self.x.ticks {
            let _ = writeln!(
                out,
                "<path d=\"M{:.1},{t:.1} V{b:.1}\"/>",
                self.at(*u, 0.0).0
            );
        }
        for (u, _) in &self.y.ticks {
            let _ = writeln!(
                out,
                "<path d=\"M{l:.1},{:.1} H{r:.1}\"/>",
                self.at(0.0, *u).1
            );
        }
        let _ = writeln!(
            out,
            "<path d=\"M{l:.1},{t:.1} V{b:.1} H{r:.1}\" stroke=\"#888\"/>\n</g>"
        );
        for (u, label) in &self.x.ticks {
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                self.at(*u, 0.0).0,
                b + 16.0,
                escape(label)
            );
        }
        for (u, label) in &self.y.ticks {
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                l - 6.0,
                self.at(0.0, *u).1 + 4.0,
                escape(label)
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n\
             <text transform=\"rotate(-90)\" x=\"{:.1}\" y=\"16\" text-anchor=\"middle\">{}</text>",
            (l + r) / 2.0,
            b + 38.0,
            escape(x_title),
            -(t + b) / 2.0,
            escape(y_title)
        );
    }

    /// A dashed grey horizontal line with its label, when `y` is inside the y axis.
    fn rule(&self, out: &mut String, y: Option<f64>, label: &str) {
        let Some(y) = y.filter(|y| *y >= self.y.lo && *y <= self.y.hi) else {
            return;
        };
        let (l, r) = (self.left, self.left + self.width);
        let py = self.at(0.0, y).1;
        let _ = writeln!(
            out,
            "<path d=\"M{l:.1},{py:.1} H{r:.1}\" stroke=\"#555\" stroke-dasharray=\"2,3\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" fill=\"#555\">{}</text>",
            l + 6.0,
            py - 4.0,
            escape(label)
        );
    }

    /// One series as a path.
    fn line(&self, out: &mut String, s: &Series, d: String, color: &str, dash: &str) {
        // A lone point has no length; `h0` with round caps draws it as a dot.
        let d = lone_points_as_dots(&d);
        let _ = writeln!(
            out,
            "<path class=\"series\" data-series=\"{}\" fill=\"none\" stroke=\"{color}\" \
             stroke-width=\"2\" stroke-linecap=\"round\" stroke-linejoin=\"round\"{dash} \
             d=\"{d}\"/>",
            escape(&s.name)
        );
    }
}

/// Appends `h0` to each subpath made of a single `M`.
fn lone_points_as_dots(d: &str) -> String {
    let ops: Vec<&str> = d.split(' ').filter(|op| !op.is_empty()).collect();
    let mut out = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        out.push((*op).to_owned());
        let next_is_line = ops.get(i + 1).is_some_and(|n| n.starts_with('L'));
        if op.starts_with('M') && !next_is_line {
            out.push("h0".to_owned());
        }
    }
    out.join(" ")
}

/// The smallest and largest of `values`, or `None` when there are none.
fn bounds(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// A linear axis from the tick at or below the data to the tick at or above it.
fn linear_scale(bounds: Option<(f64, f64)>, format: fn(f64) -> String) -> Scale {
    let (lo, hi) = bounds.unwrap_or((0.0, 1.0));
    let ticks = nice_ticks(lo, hi, TICKS);
    Scale {
        lo: ticks[0],
        hi: ticks[ticks.len() - 1],
        ticks: ticks.into_iter().map(|v| (v, format(v))).collect(),
    }
}

/// A log axis over whole decades, with 2 and 5 between them when there are at most two.
fn log_scale(bounds: Option<(f64, f64)>, format: fn(f64) -> String) -> Scale {
    let (lo, hi) = bounds.unwrap_or((0.0, 1.0));
    let first = lo.floor() as i32;
    let last = (hi.ceil() as i32).max(first + 1);
    let mut ticks = Vec::new();
    for d in first..=last {
        let decade = 10f64.powi(d);
        ticks.push((f64::from(d), format(decade)));
        if last - first <= 2 && d < last {
            for m in [2.0, 5.0] {
                ticks.push(((m * decade).log10(), format(m * decade)));
            }
        }
    }
    Scale {
        lo: f64::from(first),
        hi: f64::from(last),
        ticks,
    }
}

/// An axis from `lo` to `hi` exactly, with the round ticks that fall inside.
fn fixed_scale(lo: f64, hi: f64, log: bool, format: fn(f64) -> String) -> Scale {
    let fitted = if log {
        log_scale(Some((lo.log10(), hi.log10())), format)
    } else {
        linear_scale(Some((lo, hi)), format)
    };
    let (lo, hi) = if log {
        (lo.log10(), hi.log10())
    } else {
        (lo, hi)
    };
    let slack = (hi - lo).abs() * 1e-9;
    Scale {
        lo,
        hi,
        ticks: fitted
            .ticks
            .into_iter()
            .filter(|(u, _)| *u >= lo - slack && *u <= hi + slack)
            .collect(),
    }
}

/// A nines axis from 0% to the first whole number of nines at or past `max` (at least 90%).
fn nines_scale(max: f64) -> Scale {
    let last = ((max - 1e-6).ceil() as u32).max(1);
    let mut ticks = vec![(0.0, "0%".to_owned()), (nines(50.0), "50%".to_owned())];
    ticks.extend((1..=last).map(|k| (f64::from(k), nines_label(k))));
    Scale {
        lo: 0.0,
        hi: f64::from(last),
        ticks,
    }
}

/// Where percentile `p` (0 to 100) sits on a nines axis: `-log10(1 - p/100)`, so 90% is at 1,
/// 99% at 2 and 99.9% at 3. Infinite at 100 and above, NaN below 0.
pub fn nines(p: f64) -> f64 {
    if p >= 100.0 {
        f64::INFINITY
    } else {
        -(1.0 - p / 100.0).log10()
    }
}

/// The percentile with `k` nines: `90%`, `99%`, `99.9%`, `99.99%`...
pub fn nines_label(k: u32) -> String {
    match k {
        0 => "0%".to_owned(),
        1 => "90%".to_owned(),
        2 => "99%".to_owned(),
        k => format!("99.{}%", "9".repeat(k as usize - 2)),
    }
}

/// About `count` round tick values covering `lo..=hi`: multiples of 1, 2, 2.5 or 5 times a
/// power of ten, starting at or below `lo` and ending at or above `hi`.
pub fn nice_ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        // One value: a unit-wide range around it (zero stays the bottom).
        let half = (lo.abs() * 0.5).max(0.5);
        (if lo == 0.0 { 0.0 } else { lo - half }, lo + half)
    };
    let raw = (hi - lo) / count.max(1) as f64;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * power);
    let first = (lo / step + 1e-9).floor() as i64;
    let last = (hi / step - 1e-9).ceil() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// A tick value without trailing zeros, thousands as `k` and millions as `M`: `0.25`, `40`,
/// `2.5k`, `1M`.
pub fn number(v: f64) -> String {
    let (v, suffix) = if v.abs() >= 1e6 {
        (v / 1e6, "M")
    } else if v.abs() >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    let s = if s == "-0" { "0" } else { s };
    format!("{s}{suffix}")
}

/// Escapes text for SVG and HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
