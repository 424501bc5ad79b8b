//! `tailguard merge`: several generators' results as one run, exactly.

mod logs;

use super::EXIT_SLO;
use anyhow::{bail, Context};
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tailguard_histogram::log;
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

/// Runs `tailguard merge`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut summaries = Vec::new();
    let mut logs = Vec::new();
    for path in &args.files {
        match json_offset(path).with_context(|| format!("cannot read {}", path.display()))? {
            Some(offset) => summaries.push((name(path), read_summary(path, offset)?)),
            None => logs.push(path.clone()),
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

/// Reads the JSON summary that starts at byte `offset` of `path` (the file at most
/// [`tailguard_record::MAX_JSON_BYTES`]). A summary may come after the text
/// report, as `kubectl logs` shows a pod's `load --json=-` (the report on stderr, the JSON on
/// stdout).
fn read_summary(path: &Path, offset: u64) -> anyhow::Result<RunSummary> {
    let bytes = tailguard_record::read_json_file(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    let mut values = serde_json::Deserializer::from_slice(&bytes[start..]).into_iter();
    values
        .next()
        .transpose()
        .ok()
        .flatten()
        .with_context(|| format!("{}: not a `tailguard load --json` summary", path.display()))
}

/// Where a JSON summary starts: at the first line opening with `{`, or `None` (an interval
/// log: no line of a log or of tailguard's text report opens with `{`). Reads the file a
/// line at a time, keeping at most the start of each line.
fn json_offset(path: &Path) -> std::io::Result<Option<u64>> {
    use std::io::Read as _;
    let mut input = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut head = Vec::with_capacity(64);
    let mut offset = 0u64;
    loop {
        head.clear();
        let n = (&mut input).take(64).read_until(b'\n', &mut head)?;
        if n == 0 {
            return Ok(None);
        }
        let text = head.trim_ascii_start();
        if text.starts_with(b"{") {
            return Ok(Some(offset + (head.len() - text.len()) as u64));
        }
        offset += n as u64;
        if head.last() != Some(&b'\n') {
            offset += input.skip_until(b'\n')? as u64;
        }
    }
}

fn merge_summaries(args: &Args, parts: Vec<(String, RunSummary)>) -> anyhow::Result<ExitCode> {
    let objectives = match &args.slo {
        Some(spec) => slo::parse(spec)?,
        None => Vec::new(),
    };
    let Merged { mut summary, notes } = merge(&parts)?;
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
        write_summary_log(path, &summary)?;
    }
    if verdicts.iter().all(|v| v.met) {
        Ok(ExitCode::SUCCESS)
    } else {
        super::say("an objective was missed");
        Ok(ExitCode::from(EXIT_SLO))
    }
}

/// The merged intervals as `tailguard load --hdr-log` writes them: latency and service time,
/// decoded from the merged summary an interval at a time.
fn write_summary_log(path: &Path, s: &RunSummary) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut w = log::Writer::new(
        std::io::BufWriter::new(file),
        s.start_unix_s,
        "tailguard merge",
    )?;
    for iv in &s.intervals {
        // Checked by the merge: finite, from 0 to about 31 years.
        let at = Duration::try_from_secs_f64(iv.start_s).unwrap_or_default();
        let len = Duration::try_from_secs_f64(iv.duration_s).unwrap_or_default();
        let hdr = iv
            .totals
            .hdr
            .as_ref()
            .context("a merged interval without histograms")?;
        let [latency, service, _] = hdr.decode()?;
        w.write(&latency, at, len, Some("latency"))?;
        w.write(&service, at, len, Some("service"))?;
    }
    w.flush()
        .with_context(|| format!("cannot write {}", path.display()))
}

fn merge_logs(args: &Args, paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
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
    let options = logs::LogOptions {
        interval: args.interval,
        hdr_log: args.hdr_log.as_deref(),
        log_unit: &args.log_unit,
        unit: args.unit,
    };
    logs::merge_logs(&options, paths)
}
