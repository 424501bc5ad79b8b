//! Merging interval logs window by window: each log is read as it goes, and a window is
//! handed out (and dropped) as soon as every log has moved past it, so memory is bounded by
//! one window (one histogram per tag) and one read-ahead interval per log, not by the logs.

use super::read::{secs, LogReader, Placed};
use super::{LogError, RawInterval, RawLog};
use std::io::BufRead;
use std::time::Duration;

/// The most tags one window may hold (each is a histogram held until the window is done).
pub const MAX_TAGS: usize = 16;

/// Where a [`Merger`] reads intervals from, in the order written.
pub trait Source {
    /// The next interval placed in wall-clock time, or `None` at the end.
    ///
    /// # Errors
    /// Whatever keeps the source from giving it.
    fn next_placed(&mut self) -> Result<Option<Placed>, LogError>;
}

impl<R: BufRead> Source for LogReader<R> {
    fn next_placed(&mut self) -> Result<Option<Placed>, LogError> {
        LogReader::next_placed(self)
    }
}

/// A log already in memory, as a [`Source`].
#[derive(Debug)]
pub struct InMemory<'a> {
    log: &'a RawLog,
    next: usize,
}

impl<'a> InMemory<'a> {
    /// Reads `log` from its first interval.
    pub fn new(log: &'a RawLog) -> Self {
        InMemory { log, next: 0 }
    }
}

impl Source for InMemory<'_> {
    fn next_placed(&mut self) -> Result<Option<Placed>, LogError> {
        let index = self.next;
        let Some(i) = self.log.intervals.get(index) else {
            return Ok(None);
        };
        self.next += 1;
        let epoch_start = self.log.epoch_start(i).ok_or(LogError::NoTime { index })?;
        Ok(Some(Placed {
            epoch_start,
            interval: i.clone(),
        }))
    }
}

/// One tag's intervals of one window, added up.
struct WindowSum {
    tag: Option<String>,
    first: f64,
    last: f64,
    histogram: hdrhistogram::Histogram<u64>,
}

/// One source and the interval read ahead of it.
struct Lane<S> {
    source: S,
    ahead: Option<Placed>,
}

/// Merges logs, of tailguard or of any HdrHistogram tool, exactly and window by window: each
/// interval is placed in wall-clock time, falls in the window of `length` (by default the
/// longest first interval of any log) holding its middle ([`window`]), and is added to the
/// other intervals of that window with the same tag, in its own unit.
///
/// Each log must be in time order, as HdrHistogram tools write them: an interval that falls
/// in an earlier window than the one before it in its log is an error.
pub struct Merger<S> {
    lanes: Vec<Lane<S>>,
    origin: f64,
    window: Duration,
    /// The sums of the window being filled, by tag in order of first appearance.
    current: Option<Vec<WindowSum>>,
}

impl<S> std::fmt::Debug for Merger<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Merger")
            .field("origin", &self.origin)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl<S: Source> Merger<S> {
    /// Reads the first interval of every source (to find the earliest start and, unless
    /// `length` is given, the window length).
    ///
    /// # Errors
    /// As [`Source::next_placed`].
    pub fn new(sources: Vec<S>, length: Option<Duration>) -> Result<Self, LogError> {
        let mut lanes = Vec::with_capacity(sources.len());
        for mut source in sources {
            let ahead = source.next_placed()?;
            lanes.push(Lane { source, ahead });
        }
        let firsts = || lanes.iter().filter_map(|l| l.ahead.as_ref());
        let origin = firsts()
            .map(|p| p.epoch_start)
            .fold(f64::INFINITY, f64::min);
        let window = length.unwrap_or_else(|| {
            firsts()
                .map(|p| p.interval.length)
                .max()
                .unwrap_or(Duration::ZERO)
        });
        Ok(Merger {
            lanes,
            origin,
            window,
            current: None,
        })
    }

    /// The earliest interval start of any log, seconds since the epoch (0 without intervals).
    pub fn start_epoch_secs(&self) -> f64 {
        if self.origin.is_finite() {
            self.origin
        } else {
            0.0
        }
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The sources (by index) with no interval left: before the first window, the empty ones.
    pub fn ended(&self) -> Vec<usize> {
        (0..self.lanes.len())
            .filter(|&i| self.lanes[i].ahead.is_none())
            .collect()
    }

    /// The next window's intervals (one per tag, offsets from [`Merger::start_epoch_secs`]),
    /// or `None` when every log has ended.
    ///
    /// # Errors
    /// A source's error, an interval out of time order, more than [`MAX_TAGS`] tags in a
    /// window, or histograms that cannot be added.
    pub fn next_window(&mut self) -> Result<Option<Vec<RawInterval>>, LogError> {
        // The earliest window any lane has ahead: every lane is read up to its end.
        let Some(target) = self
            .lanes
            .iter()
            .filter_map(|l| l.ahead.as_ref())
            .map(|p| self.window_of(p))
            .min()
        else {
            return Ok(None);
        };
        for lane in 0..self.lanes.len() {
            while let Some(p) = self.lanes[lane].ahead.take() {
                let w = self.window_of(&p);
                if w > target {
                    self.lanes[lane].ahead = Some(p);
                    break;
                }
                if w < target {
                    return Err(LogError::OutOfOrder {
                        log: lane,
                        at: p.epoch_start,
                    });
                }
                self.add(p)?;
                self.lanes[lane].ahead = self.lanes[lane].source.next_placed()?;
            }
        }
        Ok(self.current.take().map(|sums| self.finish(sums)))
    }

    fn window_of(&self, p: &Placed) -> usize {
        let len = p.interval.length.as_secs_f64();
        window(self.origin, self.window.as_secs_f64(), p.epoch_start, len)
    }

    /// Adds `p` to the sums of the window being filled.
    fn add(&mut self, p: Placed) -> Result<(), LogError> {
        let sums = self.current.get_or_insert_with(Vec::new);
        let start = p.epoch_start;
        let end = start + p.interval.length.as_secs_f64();
        if let Some(sum) = sums.iter_mut().find(|s| s.tag == p.interval.tag) {
            sum.first = sum.first.min(start);
            sum.last = sum.last.max(end);
            return sum
                .histogram
                .add(&p.interval.histogram)
                .map_err(|e| LogError::Encode(format!("{e:?}")));
        }
        if sums.len() >= MAX_TAGS {
            return Err(LogError::TooManyTags { max: MAX_TAGS });
        }
        let mut histogram = p.interval.histogram;
        histogram.auto(true);
        sums.push(WindowSum {
            tag: p.interval.tag,
            first: start,
            last: end,
            histogram,
        });
        Ok(())
    }

    fn finish(&self, sums: Vec<WindowSum>) -> Vec<RawInterval> {
        sums.into_iter()
            .map(|s| RawInterval {
                tag: s.tag,
                offset: secs(s.first - self.origin),
                length: secs(s.last - s.first),
                histogram: s.histogram,
            })
            .collect()
    }
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

/// Merges logs held in memory (see [`Merger`], which reads logs of any length as it goes).
///
/// # Errors
/// As [`Merger::next_window`].
pub fn merge(logs: &[RawLog], length: Option<Duration>) -> Result<MergedLog, LogError> {
    let mut merger = Merger::new(logs.iter().map(InMemory::new).collect(), length)?;
    let mut intervals = Vec::new();
    while let Some(window) = merger.next_window()? {
        intervals.extend(window);
    }
    Ok(MergedLog {
        start_epoch_secs: merger.start_epoch_secs(),
        window: merger.window(),
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
