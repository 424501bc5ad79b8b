//! `tailguard merge`: several generators' results as one run, exactly.

use super::EXIT_SLO;
use anyhow::{bail, Context};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tailguard_histogram::log::{self, RawLog};
use tailguard_load::slo;
use tailguard_record::merge::{merge, Merged};
use tailguard_record::RunSummary;
use tailguard_report::{change, interval, text, Unit};

/// Arguments of `tailguard merge`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Give either `tailguard load --json` summaries, merged into one run \
(counts added, histograms added, intervals aligned by wall-clock time), or HdrHistogram \
interval logs (tailguard's `--hdr-log`, or any tool's), merged per interval and tag.\n\
Example: tailguard merge part-*.json --json all.json --html all.html --slo 'p99<=50ms'\n\
Exit status: 0 merged (every --slo objective met); 1 an --slo objective missed; 2 bad input."
)]
pub struct Args {
    /// The results to merge: JSON summaries, or interval logs.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Latency unit of the report: auto, us, ms or s.
    #[arg(long, default_value = "auto")]
    unit: Unit,
    /// Objectives to check on the merged run, as `tailguard load --slo` (JSON summaries only).
    #[arg(long, value_name = "SPEC")]
    slo: Option<String>,
    /// Write the merged run as JSON here, in `tailguard load --json`'s format.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write the merged run's HTML report here (JSON summaries only).
    #[arg(long, value_name = "PATH")]
    html: Option<PathBuf>,
    /// Write the merged intervals as an HdrHistogram interval log here.
    #[arg(long, value_name = "PATH")]
    hdr_log: Option<PathBuf>,
    /// Interval logs: the window intervals are merged in (default: the logs' interval).
    #[arg(long, value_name = "DURATION", value_parser = tailguard_text::duration::parse_duration)]
    interval: Option<Duration>,
    /// Interval logs: the unit their values are in (tailguard's are us; Java tools' often ns).
    #[arg(long, default_value = "us", value_parser = ["ns", "us", "ms", "s"])]
    log_unit: String,
}

/// A file given to merge.
enum Input {
    Summary(Box<RunSummary>),
    Log(RawLog),
}

/// Runs `tailguard merge`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut summaries = Vec::new();
    let mut logs = Vec::new();
    for path in &args.files {
        match read(path)? {
            Input::Summary(s) => summaries.push((name(path), *s)),
            Input::Log(l) => logs.push(l),
        }
    }
    match (summaries.is_empty(), logs.is_empty()) {
        (false, true) => merge_summaries(&args, summaries),
        (true, false) => merge_logs(&args, &logs),
        _ => bail!(
            "give either JSON summaries or interval logs, not both: a summary already holds \
             its run's histograms"
        ),
    }
}

fn name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Reads a JSON summary or an interval log. A summary may come after the text report, as
/// `kubectl logs` shows a pod's `load --json=-` (the report on stderr, the JSON on stdout).
fn read(path: &Path) -> anyhow::Result<Input> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    if let Some(start) = json_start(&bytes) {
        let mut values = serde_json::Deserializer::from_slice(&bytes[start..]).into_iter();
        let s: RunSummary = values.next().transpose().ok().flatten().with_context(|| {
            format!("{}: not a `tailguard load --json` summary", path.display())
        })?;
        return Ok(Input::Summary(Box::new(s)));
    }
    let l = log::read_raw(&bytes).with_context(|| {
        format!(
            "{}: neither a JSON summary nor an interval log",
            path.display()
        )
    })?;
    if l.intervals.is_empty() {
        bail!("{}: an interval log with no intervals", path.display());
    }
    Ok(Input::Log(l))
}

/// Where a JSON summary starts: at the first line opening with `{`. No line of an interval
/// log or of tailguard's text report does.
fn json_start(bytes: &[u8]) -> Option<usize> {
    let mut offset = 0;
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        let text = line.trim_ascii_start();
        if text.starts_with(b"{") {
            return Some(offset + line.len() - text.len());
        }
        offset += line.len();
    }
    None
}

fn merge_summaries(args: &Args, parts: Vec<(String, RunSummary)>) -> anyhow::Result<ExitCode> {
    let objectives = match &args.slo {
        Some(spec) => slo::parse(spec)?,
        None => Vec::new(),
    };
    let Merged {
        mut summary,
        interval_histograms,
        notes,
    } = merge(&parts)?;
    change::mark_all(&mut summary.intervals);
    for note in notes {
        super::say(&format!("note: {note}"));
    }
    let mut out = std::io::stdout().lock();
    let s = &summary;
    let rate = s.totals.target_rate;
    let _ = writeln!(
        out,
        "{}",
        interval::header(rate, None, &s.method, s.concurrency, &s.urls)
    );
    let _ = writeln!(
        out,
        "# merged {} summaries: {}",
        parts.len(),
        s.merged_from.join(" ")
    );
    let _ = writeln!(out, "{}", interval::titles());
    for iv in &s.intervals {
        let _ = writeln!(out, "{}", interval::line(iv, args.unit));
    }
    let _ = write!(out, "{}", text::final_report(s, args.unit));
    let verdicts: Vec<_> = objectives.iter().map(|o| o.judge(s)).collect();
    for v in &verdicts {
        let _ = writeln!(out, "{v}");
    }
    let _ = out.flush();
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(s).context("serializing the summary")? + "\n";
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.html {
        let report = tailguard_bench::saved::from_load("merged", summary.clone());
        super::bench::write_outputs(&report, None, Some(path))?;
    }
    if let Some(path) = &args.hdr_log {
        write_summary_log(path, &summary, &interval_histograms)?;
    }
    if verdicts.iter().all(|v| v.met) {
        Ok(ExitCode::SUCCESS)
    } else {
        super::say("an objective was missed");
        Ok(ExitCode::from(EXIT_SLO))
    }
}

/// The merged intervals as `tailguard load --hdr-log` writes them: latency and service time.
fn write_summary_log(
    path: &Path,
    s: &RunSummary,
    histograms: &[[tailguard_histogram::Histogram; 2]],
) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut w = log::Writer::new(
        std::io::BufWriter::new(file),
        s.start_unix_s,
        "tailguard merge",
    )?;
    for (iv, [latency, service]) in s.intervals.iter().zip(histograms) {
        // Checked by the merge: finite, from 0 to about 31 years.
        let at = Duration::try_from_secs_f64(iv.start_s).unwrap_or_default();
        let len = Duration::try_from_secs_f64(iv.duration_s).unwrap_or_default();
        w.write(latency, at, len, Some("latency"))?;
        w.write(service, at, len, Some("service"))?;
    }
    w.flush()
        .with_context(|| format!("cannot write {}", path.display()))
}

fn merge_logs(args: &Args, logs: &[RawLog]) -> anyhow::Result<ExitCode> {
    for (flag, given) in [
        ("--json", args.json.is_some()),
        ("--html", args.html.is_some()),
        ("--slo", args.slo.is_some()),
    ] {
        if given {
            bail!(
                "{flag} needs JSON summaries: interval logs hold latencies, not statuses or counts"
            );
        }
    }
    let merged = log::merge(logs, args.interval)?;
    // Values are shown in microseconds: the unit the logs were written in, converted.
    let to_us = match args.log_unit.as_str() {
        "ns" => 0.001,
        "ms" => 1_000.0,
        "s" => 1_000_000.0,
        _ => 1.0,
    };
    let show = |v: u64| args.unit.format((v as f64 * to_us).round() as u64);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "# merged {} interval logs in {} windows, values in {}",
        logs.len(),
        tailguard_text::duration::format_duration(merged.window),
        args.log_unit
    );
    let _ = writeln!(
        out,
        "# {:>8} {:<10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "start", "tag", "count", "min", "p50", "p90", "p99", "p999", "max"
    );
    let mut totals: Vec<(Option<String>, hdrhistogram::Histogram<u64>)> = Vec::new();
    let row = |start: &str, tag: &Option<String>, h: &hdrhistogram::Histogram<u64>| {
        let q = |q: f64| show(h.value_at_quantile(q));
        format!(
            "  {start:>8} {:<10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
            tag.as_deref().unwrap_or("-"),
            h.len(),
            show(h.min()),
            q(0.5),
            q(0.9),
            q(0.99),
            q(0.999),
            show(h.max())
        )
    };
    for i in &merged.intervals {
        let start = format!("{:.1}s", i.offset.as_secs_f64());
        let _ = writeln!(out, "{}", row(&start, &i.tag, &i.histogram));
        match totals.iter_mut().find(|(t, _)| *t == i.tag) {
            Some((_, h)) => h.add(&i.histogram).context("adding histograms")?,
            None => totals.push((i.tag.clone(), i.histogram.clone())),
        }
    }
    for (tag, h) in &totals {
        let _ = writeln!(out, "{}", row("total", tag, h));
    }
    let _ = out.flush();
    if let Some(path) = &args.hdr_log {
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let comment = format!("tailguard merge: values in {}", args.log_unit);
        log::write_raw(
            std::io::BufWriter::new(file),
            merged.start_epoch_secs,
            &comment,
            &merged.intervals,
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
