//! Reading interval logs a line at a time: memory bounded by one line and one histogram,
//! however long the log.

use super::blob::{self, Limits};
use super::{epoch_start, Interval, LogError, RawInterval, RawLog};
use crate::Histogram;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use std::io::BufRead;
use std::time::Duration;

/// The latest interval start accepted, seconds since the epoch: the year 5138, far beyond
/// any real log, far below where later arithmetic overflows.
pub const MAX_EPOCH_S: f64 = 1e11;

/// The longest interval accepted: about 31 years.
pub const MAX_LENGTH_S: f64 = 1e9;

/// An interval placed in wall-clock time.
#[derive(Clone, Debug)]
pub struct Placed {
    /// When it started, seconds since the Unix epoch.
    pub epoch_start: f64,
    /// The interval as written.
    pub interval: RawInterval,
}

/// Reads an interval log from any [`BufRead`], one line at a time (see [`LogReader::next`]).
#[derive(Debug)]
pub struct LogReader<R> {
    input: R,
    line: Vec<u8>,
    line_no: usize,
    intervals: usize,
    limits: Limits,
    /// The `StartTime` header seen so far, seconds since the epoch.
    pub start_epoch_secs: Option<f64>,
    /// The `BaseTime` header seen so far.
    pub base_epoch_secs: Option<f64>,
}

impl<R: BufRead> LogReader<R> {
    /// A reader of any HdrHistogram tool's log, within [`Limits::LOG`].
    pub fn new(input: R) -> Self {
        Self::with_limits(input, Limits::LOG)
    }

    /// A reader whose histograms must fit `limits`.
    pub fn with_limits(input: R, limits: Limits) -> Self {
        LogReader {
            input,
            line: Vec::new(),
            line_no: 0,
            intervals: 0,
            limits,
            start_epoch_secs: None,
            base_epoch_secs: None,
        }
    }

    /// The next interval as written (its timestamp unconverted), or `None` at the end.
    ///
    /// # Errors
    /// A line longer than any allowed histogram needs, a line that is not part of a log, or a
    /// histogram that does not decode within the limits (naming the interval).
    pub fn next_raw(&mut self) -> Result<Option<RawInterval>, LogError> {
        while self.read_line()? {
            let line_no = self.line_no;
            let parse = LogError::Parse { line: line_no };
            let entry = match IntervalLogIterator::new(&self.line).next() {
                None => continue,
                Some(entry) => entry.map_err(|_| parse)?,
            };
            let ilh = match entry {
                LogEntry::StartTime(t) => {
                    self.start_epoch_secs = Some(t.as_secs_f64());
                    continue;
                }
                LogEntry::BaseTime(t) => {
                    self.base_epoch_secs = Some(t.as_secs_f64());
                    continue;
                }
                LogEntry::Interval(ilh) => ilh,
            };
            let index = self.intervals;
            self.intervals += 1;
            let histogram = blob::decode(ilh.encoded_histogram(), self.limits)
                .map_err(|reason| LogError::Decode { index, reason })?;
            return Ok(Some(RawInterval {
                tag: ilh.tag().map(|t| t.as_str().to_string()),
                offset: ilh.start_timestamp(),
                length: ilh.duration(),
                histogram,
            }));
        }
        Ok(None)
    }

    /// The next interval placed in wall-clock time (after `BaseTime`, or after `StartTime`
    /// when its timestamp is an offset, or as written when it is an epoch time itself).
    ///
    /// # Errors
    /// As [`LogReader::next_raw`]; also an offset with nothing to be offset from, and a time
    /// or length no log could have (after [`MAX_EPOCH_S`], longer than [`MAX_LENGTH_S`]).
    pub fn next_placed(&mut self) -> Result<Option<Placed>, LogError> {
        let Some(interval) = self.next_raw()? else {
            return Ok(None);
        };
        let index = self.intervals - 1;
        let epoch_start = epoch_start(self.base_epoch_secs, self.start_epoch_secs, &interval)
            .ok_or(LogError::NoTime { index })?;
        let length = interval.length.as_secs_f64();
        if !(epoch_start <= MAX_EPOCH_S && length <= MAX_LENGTH_S) {
            return Err(LogError::Implausible { line: self.line_no });
        }
        Ok(Some(Placed {
            epoch_start,
            interval,
        }))
    }

    /// Reads the next line into `self.line` (with its `\n`); `false` at the end.
    fn read_line(&mut self) -> Result<bool, LogError> {
        use std::io::Read as _;
        self.line.clear();
        let max = self.limits.max_text() + 256;
        let n = (&mut self.input)
            .take(max as u64 + 1)
            .read_until(b'\n', &mut self.line)?;
        if n == 0 {
            return Ok(false);
        }
        self.line_no += 1;
        if self.line.len() > max {
            return Err(LogError::LineTooLong {
                line: self.line_no,
                max,
            });
        }
        if self.line.last() != Some(&b'\n') {
            self.line.push(b'\n');
        }
        Ok(true)
    }
}

/// Reads every interval of a log held in memory, in tailguard's unit.
///
/// # Errors
/// As [`read_raw`].
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

/// Reads a log held in memory without converting its values (see [`RawLog`]). For a log of
/// any length, read it with a [`LogReader`] instead, which holds one interval at a time.
///
/// # Errors
/// As [`LogReader::next_raw`].
pub fn read_raw(input: &[u8]) -> Result<RawLog, LogError> {
    let mut reader = LogReader::new(input);
    let mut intervals = Vec::new();
    while let Some(i) = reader.next_raw()? {
        intervals.push(i);
    }
    Ok(RawLog {
        start_epoch_secs: reader.start_epoch_secs,
        base_epoch_secs: reader.base_epoch_secs,
        intervals,
    })
}

/// A duration of at most [`MAX_LENGTH_S`]-scale seconds (negative: zero).
pub(super) fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)
}
