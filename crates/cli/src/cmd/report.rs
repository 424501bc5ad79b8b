//! `tailguard report`: render saved results again, or several side by side.

use anyhow::{bail, Context};
use std::path::PathBuf;
use std::process::ExitCode;
use tailguard_bench::saved;
use tailguard_load::sweep::SweepReport;
use tailguard_report::Unit;

/// Arguments of `tailguard report`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Reads `tailguard bench --json` and `tailguard load --json` files, `tailguard load \
--output` records (NDJSON, read through at any size), and `tailguard load --sweep --json` sweeps \
(each knee, and each against the first's). With several files, each arm is named \
FILE/ARM and the same group of every run shares one table.\n\
Example: tailguard report before.json after.json --html compare.html"
)]
pub struct Args {
    /// Saved results (JSON), or a load run's per-request records (NDJSON).
    #[arg(required = true, value_name = "FILE.json")]
    files: Vec<PathBuf>,
    /// Latency unit: auto, us, ms or s.
    #[arg(long, default_value = "auto")]
    unit: Unit,
    /// Also write the HTML report here.
    #[arg(long, value_name = "PATH")]
    html: Option<PathBuf>,
    /// Also write the combined results as JSON here.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

/// Each file's sweep, when every file is a `load --sweep --json` one; `None` when none is;
/// an error when some are and some are not.
fn sweeps(args: &Args) -> anyhow::Result<Option<Vec<(String, SweepReport)>>> {
    let mut found = Vec::new();
    for path in &args.files {
        let text = tailguard_record::read_json_file(path)
            .ok()
            .and_then(|b| String::from_utf8(b).ok());
        if let Some(r) = text.as_deref().and_then(tailguard_load::sweep::read) {
            found.push((label(path), r));
        }
    }
    match found.len() {
        0 => Ok(None),
        n if n == args.files.len() => Ok(Some(found)),
        _ => bail!("sweeps (load --sweep --json) and runs cannot share one report: give only sweeps, or only runs"),
    }
}

fn label(path: &std::path::Path) -> String {
    path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// Runs `tailguard report`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(found) = sweeps(&args)? {
        let shown = super::write_stdout(&tailguard_load::sweep::compare_text(&found, args.unit));
        if let Some(path) = &args.html {
            let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
            let title = format!("tailguard report: {}", names.join(" vs "));
            std::fs::write(path, tailguard_load::sweep::compare_html(&found, &title))
                .with_context(|| format!("cannot write {}", path.display()))?;
            if shown {
                super::out!("# HTML report: {}\n", path.display());
            }
        }
        if args.json.is_some() {
            bail!("--json combines runs; sweeps are already JSON");
        }
        return Ok(if shown {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(super::EXIT_PIPE)
        });
    }
    let mut runs = Vec::new();
    for path in &args.files {
        let label = label(path);
        match saved::read(path, &label) {
            Ok(r) => runs.push((label, r)),
            Err(e) => bail!(e),
        }
    }
    let report = saved::side_by_side(runs);
    let mut text = tailguard_bench::table::text(&report, args.unit);
    // One load run (a summary or its records): its whole report too, every count.
    if let [arm] = report.arms.as_slice() {
        if arm.group == "load" {
            text.push('\n');
            text.push_str(&tailguard_report::text::final_report(&arm.load, args.unit));
        }
    }
    // The files are written even when the reader of the table went away.
    let shown = super::write_stdout(&text);
    let html = super::bench::write_outputs(&report, args.json.as_deref(), args.html.as_deref())?;
    if !shown {
        return Ok(ExitCode::from(super::EXIT_PIPE));
    }
    if let Some(p) = html {
        super::out!("# HTML report: {}\n", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
