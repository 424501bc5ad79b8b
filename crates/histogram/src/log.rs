//! HdrHistogram interval logs: one compressed histogram per interval, readable by the Java and
//! Go HdrHistogram tools.
//!
//! The format is the Java `HistogramLogWriter` one, written through the `hdrhistogram` crate's
//! V2 deflate serializer. Values are microseconds: with the Java `HistogramLogProcessor`, pass
//! `-outputValueUnitRatio 1000` to read them in milliseconds.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_histogram::{log, Histogram};
//!
//! let mut h = Histogram::new();
//! h.record(Duration::from_micros(250));
//! let mut out = Vec::new();
//! let mut w = log::Writer::new(&mut out, 1_700_000_000.0, "tailguard load").unwrap();
//! w.write(&h, Duration::ZERO, Duration::from_secs(10), Some("latency")).unwrap();
//! drop(w);
//! let intervals = log::read(&out).unwrap();
//! assert_eq!(intervals.len(), 1);
//! assert_eq!(intervals[0].histogram.count(), 1);
//! assert_eq!(intervals[0].tag.as_deref(), Some("latency"));
//! ```

use crate::Histogram;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use std::io::Write;
use std::time::Duration;

/// An error while writing or reading an interval log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The output could not be written.
    #[error("cannot write the interval log: {0}")]
    Io(#[from] std::io::Error),
    /// A histogram could not be compressed.
    #[error("cannot encode a histogram: {0}")]
    Encode(String),
    /// A tag holds a character the format forbids (`,`, space, newline).
    #[error("invalid interval log tag {0:?}: no commas, spaces or newlines")]
    Tag(String),
    /// The input is not an interval log.
    #[error("malformed interval log at byte {offset}")]
    Parse {
        /// Where parsing failed.
        offset: usize,
    },
    /// A histogram encoded on its own (as `--json` embeds them) could not be decoded.
    #[error("cannot decode an encoded histogram: {0}")]
    Encoded(String),
    /// An interval's timestamp is an offset from a start the log does not give.
    #[error("interval {index} is timed from a start time the log does not give (no StartTime or BaseTime)")]
    NoTime {
        /// Zero-based interval index.
        index: usize,
    },
    /// An interval's histogram could not be decoded.
    #[error("cannot decode the histogram of interval {index}: {reason}")]
    Decode {
        /// Zero-based interval index.
        index: usize,
        /// What the decoder said.
        reason: String,
    },
}

/// Writes an interval log to any `Write`.
pub struct Writer<W: Write> {
    out: W,
    serializer: V2DeflateSerializer,
}

impl<W: Write> std::fmt::Debug for Writer<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

impl<W: Write> Writer<W> {
    /// Starts a log: writes a comment naming the producer and the units, then the StartTime and
    /// BaseTime headers (`start_epoch_secs`), so interval timestamps are offsets from the start.
    pub fn new(out: W, start_epoch_secs: f64, producer: &str) -> Result<Self, LogError> {
        Self::with_comment(
            out,
            start_epoch_secs,
            &format!("{producer}: values in microseconds"),
        )
    }

    /// Starts a log as [`Writer::new`] does, with any comment (another unit's logs).
    pub fn with_comment(
        mut out: W,
        start_epoch_secs: f64,
        comment: &str,
    ) -> Result<Self, LogError> {
        let mut serializer = V2DeflateSerializer::new();
        let start = Duration::try_from_secs_f64(start_epoch_secs.max(0.0)).unwrap_or_default();
        let start_time = std::time::UNIX_EPOCH + start;
        IntervalLogWriterBuilder::new()
            .add_comment(comment)
            .with_start_time(start_time)
            .with_base_time(start_time)
            .begin_log_with(&mut out, &mut serializer)?;
        Ok(Self { out, serializer })
    }

    /// Appends one interval: `offset` from the start, lasting `length`, with an optional tag.
    pub fn write(
        &mut self,
        h: &Histogram,
        offset: Duration,
        length: Duration,
        tag: Option<&str>,
    ) -> Result<(), LogError> {
        self.write_hdr(h.as_hdr(), offset, length, tag)
    }

    /// Appends one interval of a histogram in any unit (see [`RawLog`]).
    pub fn write_hdr(
        &mut self,
        h: &hdrhistogram::Histogram<u64>,
        offset: Duration,
        length: Duration,
        tag: Option<&str>,
    ) -> Result<(), LogError> {
        let tag = match tag {
            Some(t) => Some(Tag::new(t).ok_or_else(|| LogError::Tag(t.to_string()))?),
            None => None,
        };
        // An empty builder writes no headers: it only lends us the interval line writer.
        let mut w =
            IntervalLogWriterBuilder::new().begin_log_with(&mut self.out, &mut self.serializer)?;
        w.write_histogram(h, offset, length, tag)
            .map_err(|e| LogError::Encode(format!("{e:?}")))?;
        Ok(())
    }

    /// Flushes the output.
    pub fn flush(&mut self) -> Result<(), LogError> {
        Ok(self.out.flush()?)
    }
}

/// One interval read back from a log.
#[derive(Clone, Debug)]
pub struct Interval {
    /// The interval's tag, if any.
    pub tag: Option<String>,
    /// Offset of the interval's start from the log's base time.
    pub offset: Duration,
    /// Length of the interval.
    pub length: Duration,
    /// The interval's values.
    pub histogram: Histogram,
}

/// Reads every interval of a log held in memory.
pub fn read(input: &[u8]) -> Result<Vec<Interval>, LogError> {
    Ok(read_raw(input)?
        .intervals
        .into_iter()
        .map(|i| Interval {
            tag: i.tag,
            offset: i.offset,
            length: i.length,
            histogram: Histogram::from_hdr(&i.histogram),
        })
        .collect())
}

/// A log read back as its producer wrote it: values in the producer's own unit and precision,
/// which is what merging logs of other HdrHistogram tools needs.
#[derive(Clone, Debug)]
pub struct RawLog {
    /// The `StartTime` header, seconds since the Unix epoch.
    pub start_epoch_secs: Option<f64>,
    /// The `BaseTime` header: interval timestamps are offsets from it.
    pub base_epoch_secs: Option<f64>,
    /// Every interval, in the order written.
    pub intervals: Vec<RawInterval>,
}

/// One interval of a [`RawLog`].
#[derive(Clone, Debug)]
pub struct RawInterval {
    /// The interval's tag, if any.
    pub tag: Option<String>,
    /// The timestamp as written.
    pub offset: Duration,
    /// Length of the interval.
    pub length: Duration,
    /// The interval's values, unconverted.
    pub histogram: hdrhistogram::Histogram<u64>,
}

/// Timestamps below this many seconds are offsets, not epoch times (the Java reader's rule).
const RELATIVE_BELOW_SECS: f64 = 365.0 * 24.0 * 3600.0;

impl RawLog {
    /// When interval `i` started, seconds since the Unix epoch: its timestamp after `BaseTime`,
    /// or after `StartTime` when the timestamp is an offset, or as written when it is an epoch
    /// time itself. `None` when an offset has nothing to be offset from.
    pub fn epoch_start(&self, i: &RawInterval) -> Option<f64> {
        let ts = i.offset.as_secs_f64();
        match (self.base_epoch_secs, self.start_epoch_secs) {
            (Some(base), _) => Some(base + ts),
            (None, _) if ts >= RELATIVE_BELOW_SECS => Some(ts),
            (None, Some(start)) => Some(start + ts),
            (None, None) => None,
        }
    }
}

/// Reads a log without converting its values (see [`RawLog`]).
pub fn read_raw(input: &[u8]) -> Result<RawLog, LogError> {
    let mut deserializer = Deserializer::new();
    let mut log = RawLog {
        start_epoch_secs: None,
        base_epoch_secs: None,
        intervals: Vec::new(),
    };
    for entry in IntervalLogIterator::new(input) {
        let entry = entry.map_err(|e| match e {
            hdrhistogram::serialization::interval_log::LogIteratorError::ParseError { offset } => {
                LogError::Parse { offset }
            }
        })?;
        let ilh = match entry {
            LogEntry::StartTime(t) => {
                log.start_epoch_secs = Some(t.as_secs_f64());
                continue;
            }
            LogEntry::BaseTime(t) => {
                log.base_epoch_secs = Some(t.as_secs_f64());
                continue;
            }
            LogEntry::Interval(ilh) => ilh,
        };
        let index = log.intervals.len();
        let decode_err = |reason: String| LogError::Decode { index, reason };
        let bytes = base64_decode(ilh.encoded_histogram()).map_err(decode_err)?;
        let histogram: hdrhistogram::Histogram<u64> = deserializer
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| decode_err(format!("{e:?}")))?;
        log.intervals.push(RawInterval {
            tag: ilh.tag().map(|t| t.as_str().to_string()),
            offset: ilh.start_timestamp(),
            length: ilh.duration(),
            histogram,
        });
    }
    Ok(log)
}

/// Writes a log of histograms in any unit (see [`RawLog`]): the StartTime and BaseTime headers
/// at `start_epoch_secs`, then each interval at its offset from it.
pub fn write_raw<W: Write>(
    out: W,
    start_epoch_secs: f64,
    comment: &str,
    intervals: &[RawInterval],
) -> Result<(), LogError> {
    let mut w = Writer::with_comment(out, start_epoch_secs, comment)?;
    for i in intervals {
        w.write_hdr(&i.histogram, i.offset, i.length, i.tag.as_deref())?;
    }
    w.flush()
}

/// One histogram in the log's encoding (V2 with deflate, base64): what `--json` embeds so a
/// summary can be merged exactly, and what HdrHistogram's
/// `Histogram.decodeFromCompressedByteBuffer` reads.
pub fn encode(h: &Histogram) -> Result<String, LogError> {
    use base64::Engine as _;
    use hdrhistogram::serialization::Serializer as _;
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h.as_hdr(), &mut bytes)
        .map_err(|e| LogError::Encode(format!("{e:?}")))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Reads a histogram written by [`encode`].
pub fn decode(text: &str) -> Result<Histogram, LogError> {
    let bytes = base64_decode(text).map_err(LogError::Encoded)?;
    let hdr: hdrhistogram::Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| LogError::Encoded(format!("{e:?}")))?;
    Ok(Histogram::from_hdr(&hdr))
}

/// Logs merged by [`merge`]: per window of wall-clock time and per tag, every interval added.
#[derive(Clone, Debug)]
pub struct MergedLog {
    /// The earliest interval start of any log, seconds since the Unix epoch.
    pub start_epoch_secs: f64,
    /// The window length used.
    pub window: Duration,
    /// The merged intervals, offsets from `start_epoch_secs`, by window then tag.
    pub intervals: Vec<RawInterval>,
}

/// One tag's intervals of one window, added up.
struct WindowSum {
    tag: Option<String>,
    first: f64,
    last: f64,
    histogram: hdrhistogram::Histogram<u64>,
}

/// Merges interval logs, of tailguard or of any HdrHistogram tool, exactly: each interval is
/// placed in wall-clock time (see [`RawLog::epoch_start`]), falls in the window of `length`
/// (by default the longest first interval of any log) holding its middle ([`window`]), and is
/// added to the other intervals of that window with the same tag, in its own unit.
pub fn merge(logs: &[RawLog], length: Option<Duration>) -> Result<MergedLog, LogError> {
    let mut placed = Vec::new();
    for log in logs {
        for (index, i) in log.intervals.iter().enumerate() {
            let start = log.epoch_start(i).ok_or(LogError::NoTime { index })?;
            placed.push((start, i));
        }
    }
    let origin = placed.iter().map(|(s, _)| *s).fold(f64::INFINITY, f64::min);
    let window_len = length.unwrap_or_else(|| {
        logs.iter()
            .filter_map(|l| l.intervals.first().map(|i| i.length))
            .max()
            .unwrap_or(Duration::ZERO)
    });
    // Per window, per tag in order of first appearance: the sum and the time it spans.
    let mut merged: std::collections::BTreeMap<usize, Vec<WindowSum>> =
        std::collections::BTreeMap::new();
    for (start, i) in placed {
        let len = i.length.as_secs_f64();
        let w = window(origin, window_len.as_secs_f64(), start, len);
        let tags = merged.entry(w).or_default();
        match tags.iter_mut().find(|s| s.tag == i.tag) {
            Some(sum) => {
                sum.first = sum.first.min(start);
                sum.last = sum.last.max(start + len);
                sum.histogram
                    .add(&i.histogram)
                    .map_err(|e| LogError::Encode(format!("{e:?}")))?;
            }
            None => {
                let mut histogram = i.histogram.clone();
                histogram.auto(true);
                tags.push(WindowSum {
                    tag: i.tag.clone(),
                    first: start,
                    last: start + len,
                    histogram,
                });
            }
        }
    }
    let intervals = merged
        .into_values()
        .flatten()
        .map(|s| RawInterval {
            tag: s.tag,
            offset: Duration::from_secs_f64((s.first - origin).max(0.0)),
            length: Duration::from_secs_f64((s.last - s.first).max(0.0)),
            histogram: s.histogram,
        })
        .collect();
    Ok(MergedLog {
        start_epoch_secs: if origin.is_finite() { origin } else { 0.0 },
        window: window_len,
        intervals,
    })
}

/// Which window of `length` seconds, counted from `origin`, an interval `[start, start + len)`
/// belongs to: the one holding its middle, so intervals of generators that started a little
/// apart (or a short last interval) land in one window. Times are seconds since the epoch.
pub fn window(origin: f64, length: f64, start: f64, len: f64) -> usize {
    if length <= 0.0 {
        return 0;
    }
    let middle = (start + len / 2.0 - origin).max(0.0);
    (middle / length).floor() as usize
}

fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| e.to_string())
}
