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

mod blob;
mod merge;
mod read;

pub use blob::Limits;
pub use merge::{merge, window, InMemory, MergedLog, Merger, Source, MAX_TAGS};
pub use read::{read, read_raw, LogReader, Placed, MAX_EPOCH_S, MAX_LENGTH_S};

use crate::Histogram;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
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
    #[error("malformed interval log at line {line}")]
    Parse {
        /// The line (from 1) that is not part of a log.
        line: usize,
    },
    /// A line longer than any histogram within the limits needs.
    #[error(
        "line {line} is longer than {max} bytes, more than any histogram within the limits needs"
    )]
    LineTooLong {
        /// The line, from 1.
        line: usize,
        /// The longest line read.
        max: usize,
    },
    /// A time no log could have (hostile or damaged input).
    #[error("line {line}: an interval starting after the year 5138 or longer than 31 years")]
    Implausible {
        /// The line, from 1.
        line: usize,
    },
    /// An interval that belongs before the interval written before it.
    #[error("log {log} is not in time order: an interval at {at:.3} s since the epoch comes after later ones")]
    OutOfOrder {
        /// Which log (from 0, in the order given).
        log: usize,
        /// When the interval started, seconds since the epoch.
        at: f64,
    },
    /// An error in one of several logs.
    #[error("{name}: {source}")]
    In {
        /// The log's name (a file name).
        name: String,
        /// What is wrong with it.
        source: Box<LogError>,
    },
    /// More tags in one window than a merge holds.
    #[error("more than {max} tags in one window")]
    TooManyTags {
        /// The most tags a window may have.
        max: usize,
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

impl RawLog {
    /// When interval `i` started, seconds since the Unix epoch: its timestamp after `BaseTime`,
    /// or after `StartTime` when the timestamp is an offset, or as written when it is an epoch
    /// time itself. `None` when an offset has nothing to be offset from.
    pub fn epoch_start(&self, i: &RawInterval) -> Option<f64> {
        epoch_start(self.base_epoch_secs, self.start_epoch_secs, i)
    }
}

/// Timestamps below this many seconds are offsets, not epoch times (the Java reader's rule).
const RELATIVE_BELOW_SECS: f64 = 365.0 * 24.0 * 3600.0;

/// When an interval started, seconds since the epoch (see [`RawLog::epoch_start`]).
fn epoch_start(base: Option<f64>, start: Option<f64>, i: &RawInterval) -> Option<f64> {
    let ts = i.offset.as_secs_f64();
    match (base, start) {
        (Some(base), _) => Some(base + ts),
        (None, _) if ts >= RELATIVE_BELOW_SECS => Some(ts),
        (None, Some(start)) => Some(start + ts),
        (None, None) => None,
    }
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

/// Reads a histogram written by [`encode`], within [`Limits::TAILGUARD`]: anything larger
/// than tailguard writes is refused before it is allocated.
pub fn decode(text: &str) -> Result<Histogram, LogError> {
    let hdr = blob::decode(text, Limits::TAILGUARD).map_err(LogError::Encoded)?;
    Ok(Histogram::from_hdr(&hdr))
}
