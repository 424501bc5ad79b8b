//! Per-request records as NDJSON (`tailguard load --output FILE`), and reading them back.
//!
//! The first line is a [`Header`] (what a reader needs to class the records as the run did),
//! then one line per request, then a [`Footer`] with the counts written and dropped:
//!
//! ```text
//! {"tailguard_records":1,"tool":"tailguard/0.1.0","start_unix_s":1795000000.5,"targets":["GET http://127.0.0.1:8080/"],"four_xx_bad":false}
//! {"due_ns":1000000,"sent_ns":1000412,"latency_us":612,"service_us":200,"status":200,"grpc_status":null,"error":null,"target":0,"bytes":2}
//! {"end":true,"records":1,"dropped":0}
//! ```
//!
//! Times are nanoseconds from the run's start (the schedule's time zero); `latency_us` and
//! `service_us` are whole microseconds, what the histograms hold, so a reader rebuilds the
//! run's histograms and counts exactly ([`read`]).

use crate::outcome::{Check, Classifier, ErrorKind, Outcome, StatusSet};
use crate::{ByName, NameSummary, Record, RecordsFile, RunSummary, Stats, Totals};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::time::Duration;
use tailguard_histogram::duration_us;

/// The format this code writes and reads.
pub const FORMAT: u32 = 1;

/// The longest line read back: a record line is under 300 bytes; a header names up to 10,000
/// targets.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The first line of a records file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The format ([`FORMAT`]).
    pub tailguard_records: u32,
    /// The tool and version that wrote it.
    pub tool: String,
    /// The run's start (the schedule's time zero), seconds since the Unix epoch.
    pub start_unix_s: f64,
    /// Each target index's name (`METHOD URL`, or a request file's name).
    pub targets: Vec<String>,
    /// 4xx answers were counted bad.
    #[serde(default)]
    pub four_xx_bad: bool,
    /// `--expect-status`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_status: Option<String>,
    /// The rate this generator offered, requests per second (0: a closed loop).
    #[serde(default)]
    pub rate: f64,
    /// `constant`, `poisson` or `closed`.
    #[serde(default)]
    pub arrivals: String,
    /// The in-flight cap.
    #[serde(default)]
    pub concurrency: u64,
}

impl Header {
    /// The classifier the run used.
    ///
    /// # Errors
    /// An `expect_status` that does not parse.
    pub fn classifier(&self) -> Result<Classifier, String> {
        let expect = match &self.expect_status {
            Some(s) => Some(s.parse::<StatusSet>()?),
            None => None,
        };
        Ok(Classifier {
            four_xx_bad: self.four_xx_bad,
            expect,
        })
    }
}

/// The last line of a records file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Footer {
    /// Always true: the file is whole.
    pub end: bool,
    /// Record lines written.
    pub records: u64,
    /// Records the writer could not keep up with and dropped (none are in the file).
    pub dropped: u64,
    /// The run's length, seconds (sending, then the last responses).
    #[serde(default)]
    pub duration_s: f64,
    /// Of which sending, seconds (what the achieved rate is over).
    #[serde(default)]
    pub send_phase_s: f64,
    /// The rate offered over the run, requests per second (a ramp's or stages' mean).
    #[serde(default)]
    pub target_rate: f64,
}

/// Writes `rec` as one line (newline included).
pub fn write_line(out: &mut impl Write, rec: &Record) -> std::io::Result<()> {
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let (status, grpc, error) = match rec.outcome {
        Outcome::Status(s) => (Some(s), None, None),
        Outcome::Grpc(c) => (Some(200), Some(c), None),
        Outcome::Error(kind) => (None, None, Some(kind.name())),
    };
    let null = |v: Option<String>| v.unwrap_or_else(|| "null".into());
    write!(
        out,
        "{{\"due_ns\":{},\"sent_ns\":{},\"latency_us\":{},\"service_us\":{},\"status\":{},\"grpc_status\":{},\"error\":{},\"target\":{},\"bytes\":{}",
        ns(rec.scheduled),
        ns(rec.sent),
        duration_us(rec.latency()),
        duration_us(rec.service_time()),
        null(status.map(|s| s.to_string())),
        null(grpc.map(|c| c.to_string())),
        null(error.map(|e| format!("\"{e}\""))),
        rec.target,
        rec.bytes
    )?;
    if let Some(check) = rec.failed_check {
        write!(out, ",\"check\":\"{}\"", check.name())?;
    }
    out.write_all(b"}\n")
}

/// One record line, as read back.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    due_ns: u64,
    sent_ns: u64,
    latency_us: u64,
    service_us: u64,
    status: Option<u16>,
    grpc_status: Option<u8>,
    error: Option<String>,
    target: u32,
    #[serde(default)]
    bytes: u64,
    #[serde(default)]
    check: Option<String>,
}

impl Line {
    /// The record this line was written from (its completion rebuilt from the two durations,
    /// to the microsecond the histograms keep).
    fn record(&self) -> Result<Record, String> {
        let outcome = match (&self.error, self.grpc_status, self.status) {
            (Some(e), _, _) => Outcome::Error(
                *ErrorKind::ALL
                    .iter()
                    .find(|k| k.name() == e)
                    .ok_or_else(|| format!("unknown error {e:?}"))?,
            ),
            (None, Some(c), _) => Outcome::Grpc(c),
            (None, None, Some(s)) => Outcome::Status(s),
            (None, None, None) => return Err("neither a status nor an error".into()),
        };
        let failed_check = match &self.check {
            None => None,
            Some(c) => Some(
                *Check::ALL
                    .iter()
                    .find(|k| k.name() == c)
                    .ok_or_else(|| format!("unknown check {c:?}"))?,
            ),
        };
        let scheduled = Duration::from_nanos(self.due_ns);
        let sent = Duration::from_nanos(self.sent_ns);
        // The earliest completion whose latency and service time, in whole microseconds, are
        // the ones written: both are in the run's histograms, so they come back exactly.
        let after = |at: Duration, us: u64| {
            at.checked_add(Duration::from_micros(us))
                .ok_or_else(|| "a time past what a run can last".to_string())
        };
        let completed = after(scheduled, self.latency_us)?.max(after(sent, self.service_us)?);
        Ok(Record {
            scheduled,
            sent,
            completed,
            outcome,
            bytes: self.bytes,
            target: self.target,
            failed_check,
        })
    }
}

/// A records file read back.
#[derive(Debug)]
pub struct Read {
    /// Its header.
    pub header: Header,
    /// Every record, aggregated with the run's classifier.
    pub stats: Stats,
    /// Every record by its target's name (more than one target).
    pub names: Option<ByName>,
    /// The latest completion, from the start.
    pub last_completed: Duration,
    /// Its footer; `None` when the file ends without one (a run killed mid-way).
    pub footer: Option<Footer>,
}

impl Read {
    /// The run's summary as far as records tell it: every count, the histograms and the
    /// names; not what only the generator knew (the offered rate, the concurrency, the
    /// intervals).
    pub fn summary(&self) -> RunSummary {
        let s = &self.stats;
        let mut per_name = Vec::new();
        if let Some(names) = &self.names {
            let mut seen = std::collections::BTreeSet::new();
            let firsts = self
                .header
                .targets
                .iter()
                .filter(|n| seen.insert(n.as_str()));
            for (name, stats) in firsts.zip(names.names()) {
                let (method, url) = name.split_once(' ').unwrap_or(("", name));
                per_name.push(NameSummary::of(
                    name.clone(),
                    method.into(),
                    url.into(),
                    stats,
                ));
            }
            per_name.sort_by(|a, b| {
                b.requests
                    .cmp(&a.requests)
                    .then_with(|| a.name.cmp(&b.name))
            });
        }
        let dropped = self.footer.map_or(0, |f| f.dropped);
        // The run's own times when the end line has them; else what the records show.
        let h = &self.header;
        let (duration_s, send_phase_s, rate) = match self.footer {
            Some(f) if f.duration_s > 0.0 => (f.duration_s, f.send_phase_s, f.target_rate),
            _ => (
                self.last_completed.as_secs_f64(),
                s.last_sent.as_secs_f64(),
                h.rate,
            ),
        };
        RunSummary {
            tool: h.tool.clone(),
            urls: h.targets.clone(),
            concurrency: h.concurrency,
            arrivals: if h.arrivals.is_empty() {
                "unknown".into()
            } else {
                h.arrivals.clone()
            },
            duration_s,
            send_phase_s,
            totals: Totals::from_stats(s, rate, Duration::from_secs_f64(send_phase_s.max(0.0))),
            per_target: s.per_target().to_vec(),
            per_name,
            histogram: s
                .latency
                .log_buckets()
                .iter()
                .map(|b| [b.from_us, b.to_us, b.count])
                .collect(),
            start_unix_s: self.header.start_unix_s,
            interrupted: self.footer.is_none(),
            records: Some(RecordsFile {
                path: String::new(),
                written: s.requests(),
                dropped,
                error: None,
            }),
            ..RunSummary::default()
        }
    }
}

/// True when `first_line` is a records file's header.
pub fn is_records(first_line: &str) -> bool {
    first_line
        .trim_start()
        .starts_with("{\"tailguard_records\"")
}

/// Reads a records file: the header, every record into [`Stats`], the footer.
///
/// # Errors
/// The first line that is not what it should be, with its number; a line longer than
/// [`MAX_LINE_BYTES`]; lines after the footer.
pub fn read(input: impl BufRead) -> Result<Read, String> {
    let mut lines = tailguard_text::lines::Lines::new(input, MAX_LINE_BYTES);
    let (_, first) = lines.next_line()?.ok_or("an empty file")?;
    let header: Header =
        serde_json::from_str(first).map_err(|e| format!("line 1: not a records header ({e})"))?;
    if header.tailguard_records > FORMAT {
        return Err(format!(
            "written in format {}; this tailguard reads up to {FORMAT}",
            header.tailguard_records
        ));
    }
    let classifier = header.classifier().map_err(|e| format!("line 1: {e}"))?;
    let mut stats = Stats::new();
    let mut names = name_index(&header.targets).map(|(of, n)| ByName::new(of.into(), n));
    let mut last_completed = Duration::ZERO;
    let mut footer = None;
    while let Some((n, text)) = lines.next_line()? {
        if footer.is_some() {
            return Err(format!("line {n}: a line after the end line"));
        }
        if text.trim().is_empty() {
            continue;
        }
        if text.starts_with("{\"end\"") {
            footer = Some(
                serde_json::from_str::<Footer>(text)
                    .map_err(|e| format!("line {n}: not an end line ({e})"))?,
            );
            continue;
        }
        let line: Line =
            serde_json::from_str(text).map_err(|e| format!("line {n}: not a record ({e})"))?;
        let rec = line.record().map_err(|e| format!("line {n}: {e}"))?;
        if rec.target as usize >= header.targets.len().max(1) {
            return Err(format!(
                "line {n}: target {} is not one of the header's {}",
                rec.target,
                header.targets.len()
            ));
        }
        last_completed = last_completed.max(rec.completed);
        let class = stats.record(&rec, classifier);
        if let Some(n) = &mut names {
            n.record(&rec, class);
        }
    }
    Ok(Read {
        header,
        stats,
        names,
        last_completed,
        footer,
    })
}

/// Each target's name index (names in first-seen order) and the count of names; `None` for
/// one target or none.
fn name_index(targets: &[String]) -> Option<(Vec<u32>, usize)> {
    if targets.len() < 2 {
        return None;
    }
    let mut index = std::collections::HashMap::new();
    let of = targets
        .iter()
        .map(|t| {
            let next = index.len() as u32;
            *index.entry(t.as_str()).or_insert(next)
        })
        .collect();
    Some((of, index.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn outcome() -> impl Strategy<Value = Outcome> {
        prop_oneof![
            (100u16..600).prop_map(Outcome::Status),
            (0u8..20).prop_map(Outcome::Grpc),
            proptest::sample::select(ErrorKind::ALL.to_vec()).prop_map(Outcome::Error),
        ]
    }

    proptest! {
        /// Written and read back, records give the same statistics, exactly.
        #[test]
        fn records_read_back_give_the_same_statistics(
            recs in proptest::collection::vec(
                (0u64..10_000_000_000, 0u64..50_000_000, 0u64..5_000_000_000, outcome(), 0u32..5, proptest::option::of(proptest::sample::select(Check::ALL.to_vec()))),
                0..60,
            ),
            four_xx_bad: bool,
        ) {
            let header = Header {
                tailguard_records: FORMAT,
                tool: "t".into(),
                start_unix_s: 1.5,
                targets: (0..5).map(|i| format!("GET http://h/{}", i % 3)).collect(),
                four_xx_bad,
                expect_status: Some("2xx,404,OK".into()),
                ..Header::default()
            };
            let classifier = header.classifier().unwrap();
            let mut file = serde_json::to_vec(&header).unwrap();
            file.push(b'\n');
            let mut want = Stats::new();
            for &(due, lag, service, outcome, target, check) in &recs {
                let scheduled = Duration::from_nanos(due);
                let sent = scheduled + Duration::from_nanos(lag);
                let rec = Record {
                    scheduled,
                    sent,
                    completed: sent + Duration::from_nanos(service),
                    outcome,
                    bytes: 3,
                    target,
                    failed_check: check,
                };
                want.record(&rec, classifier);
                write_line(&mut file, &rec).unwrap();
            }
            let footer = Footer { end: true, records: recs.len() as u64, dropped: 0, duration_s: 0.0, send_phase_s: 0.0, target_rate: 0.0 };
            file.extend(serde_json::to_vec(&footer).unwrap());
            let got = read(&file[..]).unwrap();
            prop_assert_eq!(got.footer, Some(footer));
            prop_assert_eq!(&got.stats.latency, &want.latency);
            prop_assert_eq!(&got.stats.service, &want.service);
            prop_assert_eq!(&got.stats.send_lag, &want.send_lag);
            prop_assert_eq!((got.stats.good, got.stats.bad, got.stats.failed), (want.good, want.bad, want.failed));
            prop_assert_eq!(got.stats.status_codes(), want.status_codes());
            prop_assert_eq!(got.stats.errors(), want.errors());
            prop_assert_eq!(got.stats.failed_checks(), want.failed_checks());
            prop_assert_eq!(got.stats.per_target(), want.per_target());
            prop_assert_eq!(got.stats.bytes, want.bytes);
            // Three names over five targets; the summary keeps every count.
            let summary = got.summary();
            prop_assert_eq!(summary.totals.requests, recs.len() as u64);
            prop_assert_eq!(summary.per_name.iter().map(|n| n.requests).sum::<u64>(), recs.len() as u64);
            prop_assert!(summary.per_name.len() <= 3);
        }
    }

    /// The error reading `text` gives (a panic, without the statistics' dump, when none).
    fn error(text: &str) -> String {
        match read(text.as_bytes()) {
            Err(e) => e,
            Ok(_) => panic!("{text:?} was read"),
        }
    }

    #[test]
    fn a_bad_line_is_named() {
        let head = "{\"tailguard_records\":1,\"tool\":\"t\",\"start_unix_s\":0,\"targets\":[]}\n";
        let cases = [
            ("", "an empty file"),
            ("{\"x\":1}\n", "line 1: not a records header"),
            (
                "{\"tailguard_records\":9,\"tool\":\"t\",\"start_unix_s\":0,\"targets\":[]}\n",
                "format 9",
            ),
        ];
        for (text, want) in cases {
            let err = error(text);
            assert!(err.contains(want), "{err}");
        }
        let bodies = [
            ("{\"due_ns\":1}\n", "line 2: not a record"),
            ("{\"due_ns\":1,\"sent_ns\":1,\"latency_us\":1,\"service_us\":1,\"status\":null,\"grpc_status\":null,\"error\":\"boom\",\"target\":0}\n", "line 2: unknown error"),
            ("{\"end\":true,\"records\":0,\"dropped\":0}\n{\"end\":true,\"records\":0,\"dropped\":0}\n", "line 3: a line after the end line"),
            ("{\"due_ns\":1,\"sent_ns\":1,\"latency_us\":1,\"service_us\":1,\"status\":200,\"grpc_status\":null,\"error\":null,\"target\":4000000000}\n", "line 2: target 4000000000 is not one of"),
        ];
        for (body, want) in bodies {
            let err = error(&format!("{head}{body}"));
            assert!(err.contains(want), "{err}");
        }
        let without_end = read(head.as_bytes()).unwrap();
        assert_eq!(without_end.footer, None);
    }
}
