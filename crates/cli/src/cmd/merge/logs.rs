//! `tailguard merge` of interval logs: read as they go and merged window by window, so a
//! long log costs one window's histograms, not the whole log's.

use anyhow::{bail, Context};
use std::fs::File;
use std::io::{BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tailguard_histogram::log::{self, LogError, LogReader, Merger, Placed, Source, MAX_TAGS};
use tailguard_report::Unit;

/// What a merge of logs is asked for.
pub(super) struct LogOptions<'a> {
    /// The window (default: the logs' interval).
    pub interval: Option<Duration>,
    /// Write the merged log here.
    pub hdr_log: Option<&'a Path>,
    /// The unit the logs' values are in.
    pub log_unit: &'a str,
    /// The unit to print them in.
    pub unit: Unit,
}

/// A log file read a line at a time; its errors name it.
pub(super) struct LogFile {
    name: String,
    reader: LogReader<BufReader<File>>,
    /// An interval was read: the file is a log, whatever follows.
    is_log: bool,
}

impl LogFile {
    /// Opens `path` (read from its first line).
    pub(super) fn open(path: &std::path::Path) -> anyhow::Result<LogFile> {
        let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        Ok(LogFile {
            name: path.display().to_string(),
            reader: LogReader::new(BufReader::new(file)),
            is_log: false,
        })
    }
}

impl Source for LogFile {
    fn next_placed(&mut self) -> Result<Option<Placed>, LogError> {
        let next = self.reader.next_placed().map_err(|e| {
            let name = match (&e, self.is_log) {
                (LogError::Parse { .. }, false) => {
                    format!("{}: neither a JSON summary nor an interval log", self.name)
                }
                _ => self.name.clone(),
            };
            LogError::In {
                name,
                source: Box::new(e),
            }
        })?;
        self.is_log |= next.is_some();
        Ok(next)
    }
}

/// One histogram per tag, for the `total` rows (at most [`MAX_TAGS`]).
type Totals = Vec<(Option<String>, hdrhistogram::Histogram<u64>)>;

/// Merges the logs at `paths`, printing a row per window and tag, then the totals.
pub(super) fn merge_logs(args: &LogOptions<'_>, paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let files = paths
        .iter()
        .map(|p| LogFile::open(p))
        .collect::<Result<_, _>>()?;
    let mut merger = Merger::new(files, args.interval)?;
    if let Some(&empty) = merger.ended().first() {
        bail!(
            "{}: an interval log with no intervals",
            paths[empty].display()
        );
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "# merged {} interval logs in {} windows, values in {}",
        paths.len(),
        tailguard_text::duration::format_duration(merger.window()),
        args.log_unit
    );
    let _ = writeln!(
        out,
        "# {:>8} {:<10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "start", "tag", "count", "min", "p50", "p90", "p99", "p999", "max"
    );
    let mut writer = match args.hdr_log {
        Some(path) => {
            let file =
                File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
            let comment = format!("tailguard merge: values in {}", args.log_unit);
            let out = std::io::BufWriter::new(file);
            Some(log::Writer::with_comment(
                out,
                merger.start_epoch_secs(),
                &comment,
            )?)
        }
        None => None,
    };
    let mut totals: Totals = Vec::new();
    while let Some(window) = merger.next_window().map_err(|e| named(e, paths))? {
        for i in &window {
            let start = format!("{:.1}s", i.offset.as_secs_f64());
            let _ = writeln!(out, "{}", row(args, &start, &i.tag, &i.histogram));
            add_total(&mut totals, i)?;
            if let Some(w) = &mut writer {
                w.write_hdr(&i.histogram, i.offset, i.length, i.tag.as_deref())?;
            }
        }
    }
    for (tag, h) in &totals {
        let _ = writeln!(out, "{}", row(args, "total", tag, h));
    }
    let _ = out.flush();
    if let Some(mut w) = writer {
        w.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A merger's error naming the log by its file.
fn named(e: LogError, paths: &[PathBuf]) -> LogError {
    match e {
        LogError::OutOfOrder { log, at } => LogError::In {
            name: paths
                .get(log)
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            source: Box::new(LogError::OutOfOrder { log, at }),
        },
        other => other,
    }
}

fn add_total(totals: &mut Totals, i: &log::RawInterval) -> anyhow::Result<()> {
    if let Some((_, h)) = totals.iter_mut().find(|(t, _)| *t == i.tag) {
        return h.add(&i.histogram).context("adding histograms");
    }
    if totals.len() >= MAX_TAGS {
        bail!("more than {MAX_TAGS} tags in the logs");
    }
    let mut h = i.histogram.clone();
    h.auto(true);
    totals.push((i.tag.clone(), h));
    Ok(())
}

/// One window's (or the total's) row, values shown in the report unit.
fn row(
    args: &LogOptions<'_>,
    start: &str,
    tag: &Option<String>,
    h: &hdrhistogram::Histogram<u64>,
) -> String {
    // Values are shown in microseconds: the unit the logs were written in, converted.
    let to_us = match args.log_unit {
        "ns" => 0.001,
        "ms" => 1_000.0,
        "s" => 1_000_000.0,
        _ => 1.0,
    };
    let show = |v: u64| args.unit.format((v as f64 * to_us).round() as u64);
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
}
