//! Machine-readable results: what `--json` writes and `tailguard report` reads back.

use crate::Stats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use tailguard_histogram::log::{self, LogError};
use tailguard_histogram::{Histogram, Percentiles};

/// The largest summary file read back (`tailguard merge`, `tailguard report`): 256 MiB, a day
/// of one-second intervals (about 2.2 KB each with their histograms) with room to spare.
pub const MAX_JSON_BYTES: u64 = 256 << 20;

/// Reads a file of at most [`MAX_JSON_BYTES`] (a summary or a bench report), never more.
///
/// # Errors
/// The OS error, or [`std::io::ErrorKind::InvalidData`] for a larger file.
pub fn read_json_file(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    tailguard_text::files::read_limited(path, MAX_JSON_BYTES)
}

/// The figures shared by a whole run and each of its intervals.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Requests per second asked for (0 = as fast as possible).
    pub target_rate: f64,
    /// Requests per second completed.
    pub achieved_rate: f64,
    /// Requests completed (good + bad + failed).
    pub requests: u64,
    /// Responses 1xx-4xx (or 1xx-3xx with 4xx counted bad).
    pub good: u64,
    /// Responses 5xx.
    pub bad: u64,
    /// Requests without a response.
    pub failed: u64,
    /// good / requests; `None` (JSON `null`) without requests: no figure from no data.
    pub success_rate: Option<f64>,
    /// Latency from the scheduled send, microseconds; `None` when nothing was timed.
    pub latency_us: Option<Percentiles>,
    /// Service time from the actual send, microseconds; `None` when nothing was timed.
    pub service_time_us: Option<Percentiles>,
    /// Send lag (actual minus scheduled send), microseconds; `None` when nothing was sent.
    pub send_lag_us: Option<Percentiles>,
    /// Requests sent more than 1 ms late.
    pub late_sends: u64,
    /// Of the requests, second sends of failed ones (`load --retry-after`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resent: u64,
    /// Response body bytes read.
    pub bytes: u64,
    /// Responses per status code.
    pub status_codes: BTreeMap<String, u64>,
    /// Failures per error kind.
    pub errors: BTreeMap<String, u64>,
    /// Answers counted bad by a failed `--expect-*` check, per check (`status`,
    /// `body-sha256`, `body-contains`); included in `bad`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_checks: BTreeMap<String, u64>,
    /// The exact histograms behind the percentiles, so summaries merge exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hdr: Option<Encoded>,
    /// Streaming gRPC calls' messages; none for unary calls and HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<MessageTotals>,
}

/// The messages of streaming gRPC calls (a run's `requests` count calls).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageTotals {
    /// Messages sent.
    pub sent: u64,
    /// Messages received.
    pub received: u64,
    /// Per-message latency, microseconds: bidirectional streams from each message's send to its
    /// reply, server streams from the call's send to each message.
    pub latency_us: Option<Percentiles>,
    /// Server streams: from the call's send to its first message, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_message_us: Option<Percentiles>,
}

impl MessageTotals {
    /// The figures of `m`.
    pub fn of(m: &crate::stats::Messages) -> MessageTotals {
        MessageTotals {
            sent: m.sent,
            received: m.received,
            latency_us: measured(&m.latency),
            first_message_us: measured(&m.first),
        }
    }
}

/// A summary's histograms in HdrHistogram's compressed encoding (V2, deflate, base64: what an
/// interval log holds per line, and what `Histogram.decodeFromCompressedByteBuffer` reads).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Encoded {
    /// Latency from the scheduled send, microseconds.
    pub latency: String,
    /// Service time, microseconds.
    pub service_time: String,
    /// Send lag, microseconds.
    pub send_lag: String,
}

impl Encoded {
    /// Encodes the histograms of `stats`.
    pub fn of(stats: &Stats) -> Result<Encoded, LogError> {
        Ok(Encoded {
            latency: log::encode(&stats.latency)?,
            service_time: log::encode(&stats.service)?,
            send_lag: log::encode(&stats.send_lag)?,
        })
    }

    /// Decodes the latency, service time and send lag histograms.
    pub fn decode(&self) -> Result<[Histogram; 3], LogError> {
        Ok([
            log::decode(&self.latency)?,
            log::decode(&self.service_time)?,
            log::decode(&self.send_lag)?,
        ])
    }
}

/// The percentiles of `h`, or `None` when it holds no value.
pub fn measured(h: &Histogram) -> Option<Percentiles> {
    (!h.is_empty()).then(|| h.percentiles())
}

impl Totals {
    /// Summarizes `stats` gathered over `elapsed` against `target_rate`.
    pub fn from_stats(stats: &Stats, target_rate: f64, elapsed: Duration) -> Totals {
        let secs = elapsed.as_secs_f64();
        Totals {
            target_rate,
            // What was sent: a request that found no connection never left.
            achieved_rate: if secs > 0.0 {
                stats.sent() as f64 / secs
            } else {
                0.0
            },
            requests: stats.requests(),
            good: stats.good,
            bad: stats.bad,
            failed: stats.failed,
            success_rate: (stats.requests() > 0).then(|| stats.success_rate()),
            latency_us: measured(&stats.latency),
            service_time_us: measured(&stats.service),
            send_lag_us: measured(&stats.send_lag),
            late_sends: stats.late,
            resent: stats.resent,
            bytes: stats.bytes,
            // HTTP statuses by number, gRPC statuses by name (`OK`, `UNAVAILABLE`).
            status_codes: stats
                .status_codes()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .chain(
                    stats
                        .grpc_statuses()
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v)),
                )
                .collect(),
            errors: stats
                .errors()
                .into_iter()
                .map(|(k, v)| (k.name().to_string(), v))
                .collect(),
            failed_checks: stats
                .failed_checks()
                .into_iter()
                .map(|(k, v)| (k.name().to_string(), v))
                .collect(),
            hdr: None,
            messages: stats.messages.as_deref().map(MessageTotals::of),
        }
    }
}

/// One percentile asked for by `--percentiles`, of the latency and the service time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Quantile {
    /// The percentile (`99.9`).
    pub percentile: f64,
    /// Latency at it, microseconds (`None`: nothing timed).
    pub latency_us: Option<u64>,
    /// Service time at it, microseconds.
    pub service_time_us: Option<u64>,
}

impl Quantile {
    /// The percentile's name: `p50`, `p98`, `p99.9`.
    pub fn name(&self) -> String {
        percentile_name(self.percentile)
    }
}

/// `p50`, `p98`, `p99.9`: a percentile's name, its number without trailing zeros.
pub fn percentile_name(p: f64) -> String {
    let text = format!("{p:.6}");
    format!("p{}", text.trim_end_matches('0').trim_end_matches('.'))
}

/// The verdict on one `--slo` objective.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SloVerdict {
    /// The objective as written (`p99<=5ms`).
    pub objective: String,
    /// The measured value, formatted (`3.2ms`, or `no data`).
    pub actual: String,
    /// Whether it was met.
    pub met: bool,
}

impl std::fmt::Display for SloVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let word = if self.met { "met" } else { "MISSED" };
        write!(
            f,
            "# SLO {}: {word} (actual {})",
            self.objective, self.actual
        )
    }
}

/// What went into a run's per-request records file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordsFile {
    /// The file.
    pub path: String,
    /// Record lines written.
    pub written: u64,
    /// Records dropped because the writer fell behind (none of them is in the file).
    pub dropped: u64,
    /// Why writing stopped early, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One interval of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalSummary {
    /// Wall-clock end of the interval, RFC 3339.
    pub timestamp: String,
    /// Offset of the interval's start from the run's start, seconds.
    pub start_s: f64,
    /// Length of the interval, seconds.
    pub duration_s: f64,
    /// Requests due in the interval by the schedule (0 in closed loop).
    pub target: u64,
    /// The change marker printed for this interval (`+`, `--`, or empty).
    pub change: String,
    /// The interval's figures.
    #[serde(flatten)]
    pub totals: Totals,
}

/// A whole run: what was asked, what happened, per interval and in total.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The tool and version that produced this.
    pub tool: String,
    /// Targets, in index order.
    pub urls: Vec<String>,
    /// HTTP method.
    pub method: String,
    /// In-flight request cap.
    pub concurrency: u64,
    /// `constant`, `poisson` or `closed`.
    pub arrivals: String,
    /// Run length, seconds: sending, then waiting for the last responses.
    pub duration_s: f64,
    /// Of which sending, seconds (open loop: from the start to the last send plus one
    /// inter-arrival gap; the achieved rate is over this, not over the drain). 0 when unknown.
    #[serde(default)]
    pub send_phase_s: f64,
    /// The run's figures.
    #[serde(flatten)]
    pub totals: Totals,
    /// Requests per target index.
    pub per_target: Vec<u64>,
    /// Figures per request name, most requests first (a run of one target has none: its
    /// totals are the name's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_name: Vec<crate::NameSummary>,
    /// Latency histogram rows: `[from_us, to_us, count]`.
    pub histogram: Vec<[u64; 3]>,
    /// Client CPU time per request, microseconds (when measurable).
    pub client_cpu_us_per_request: Option<f64>,
    /// Every interval, in order.
    pub intervals: Vec<IntervalSummary>,
    /// Wall-clock start of the run (the schedule's time zero), seconds since the Unix epoch;
    /// 0 when unknown. `tailguard merge` aligns intervals by it.
    #[serde(default)]
    pub start_unix_s: f64,
    /// The report interval, seconds (0 when unknown).
    #[serde(default)]
    pub interval_s: f64,
    /// This generator's part of a shared schedule (`I/N`, from `--shard`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// The arrival schedule's seed (open loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// What a merged summary was merged from (file names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
    /// The run was stopped before its end (Ctrl-C, SIGINT, or its output closed).
    #[serde(default)]
    pub interrupted: bool,
    /// The run length asked for (`--duration`), seconds; `None` for a count-bounded run.
    #[serde(default)]
    pub planned_duration_s: Option<f64>,
    /// The percentiles `--percentiles` asked for, in its order (none: the default table).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub percentiles: Vec<Quantile>,
    /// The verdict on each `--slo` objective, in the order given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<SloVerdict>,
    /// The per-request records file (`--output`), when one was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<RecordsFile>,
    /// Requests due but never sent because the run was stopped early (an interrupt or the
    /// drain limit); not in `requests`.
    #[serde(default)]
    pub unsent: u64,
}

/// For serde: leave a zero count out of the JSON.
fn is_zero(n: &u64) -> bool {
    *n == 0
}
