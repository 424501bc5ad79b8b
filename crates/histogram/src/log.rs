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
    pub fn new(mut out: W, start_epoch_secs: f64, producer: &str) -> Result<Self, LogError> {
        let mut serializer = V2DeflateSerializer::new();
        let start = Duration::from_secs_f64(start_epoch_secs.max(0.0));
        let start_time = std::time::UNIX_EPOCH + start;
        IntervalLogWriterBuilder::new()
            .add_comment(&format!("{producer}: values in microseconds"))
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
        let tag = match tag {
            Some(t) => Some(Tag::new(t).ok_or_else(|| LogError::Tag(t.to_string()))?),
            None => None,
        };
        // An empty builder writes no headers: it only lends us the interval line writer.
        let mut w =
            IntervalLogWriterBuilder::new().begin_log_with(&mut self.out, &mut self.serializer)?;
        w.write_histogram(h.as_hdr(), offset, length, tag)
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
    let mut deserializer = Deserializer::new();
    let mut out = Vec::new();
    for entry in IntervalLogIterator::new(input) {
        let entry = entry.map_err(|e| match e {
            hdrhistogram::serialization::interval_log::LogIteratorError::ParseError { offset } => {
                LogError::Parse { offset }
            }
        })?;
        let LogEntry::Interval(ilh) = entry else {
            continue;
        };
        let index = out.len();
        let decode_err = |reason: String| LogError::Decode { index, reason };
        let bytes = base64_decode(ilh.encoded_histogram()).map_err(decode_err)?;
        let hdr: hdrhistogram::Histogram<u64> = deserializer
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| decode_err(format!("{e:?}")))?;
        out.push(Interval {
            tag: ilh.tag().map(|t| t.as_str().to_string()),
            offset: ilh.start_timestamp(),
            length: ilh.duration(),
            histogram: Histogram::from_hdr(&hdr),
        });
    }
    Ok(out)
}

fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| e.to_string())
}
