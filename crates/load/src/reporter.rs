//! Interval reporting: merges the workers' statistics at each interval end, prints the line,
//! feeds the HdrHistogram log, the metrics and the self-check, and keeps the run's totals.

use crate::metrics::Metrics;
use crate::pacer::PacerState;
use crate::selfcheck::{self, Evidence, SelfCheck};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailguard_histogram::{log, Histogram};
use tailguard_pacing::Schedule;
use tailguard_record::{Encoded, IntervalSummary, Stats, Totals};
use tailguard_report::{interval, ChangeMarker, Unit};

/// Counts the requests due by a given time (the interval's `target`): from the schedule, or
/// from a replay's counts per interval.
#[derive(Debug)]
pub(crate) enum DueCounter {
    /// An open loop's schedule.
    Schedule(ScheduleDue),
    /// A replay's requests due in each interval (the first pass counted them).
    Counted {
        per_interval: Vec<u64>,
        interval: Duration,
        /// The first interval not yet counted.
        next: usize,
    },
}

/// The requests a schedule had due.
#[derive(Debug)]
pub(crate) struct ScheduleDue {
    schedule: Schedule,
    part: crate::Part,
    next: u64,
    total: Option<u64>,
    duration: Option<Duration>,
}

impl DueCounter {
    pub(crate) fn new(schedule: Schedule, total: Option<u64>, duration: Option<Duration>) -> Self {
        DueCounter::Schedule(ScheduleDue {
            schedule,
            part: crate::Part::WHOLE,
            next: 0,
            total,
            duration,
        })
    }

    /// A replay's counts: `per_interval[k]` requests due in `[k interval, (k + 1) interval)`.
    pub(crate) fn counted(per_interval: Vec<u64>, interval: Duration) -> Self {
        DueCounter::Counted {
            per_interval,
            interval,
            next: 0,
        }
    }

    /// Counts only `part`'s requests (and its share of a ramp's rate).
    pub(crate) fn part(mut self, part: crate::Part) -> Self {
        if let DueCounter::Schedule(s) = &mut self {
            s.part = part;
        }
        self
    }

    /// The requests due in `[previous call, until)` (a replay's by whole intervals).
    pub(crate) fn advance(&mut self, until: Duration) -> u64 {
        match self {
            DueCounter::Schedule(s) => s.advance(until),
            DueCounter::Counted {
                per_interval,
                interval,
                next,
            } => {
                let mut due = 0;
                while *next < per_interval.len() && *interval * (*next as u32) < until {
                    due += per_interval[*next];
                    *next += 1;
                }
                due
            }
        }
    }

    /// A ramped, staged or replayed run's mean offered rate over `[from, until)`; `None`
    /// otherwise (the rate then is the run's own, exactly).
    pub(crate) fn ramped_rate(&self, from: Duration, until: Duration) -> Option<f64> {
        let len = until.checked_sub(from).filter(|d| !d.is_zero())?;
        match self {
            DueCounter::Schedule(s) => {
                if !s.schedule.is_shaped() {
                    return None;
                }
                let offered = s.schedule.expected(until) - s.schedule.expected(from);
                Some(offered / len.as_secs_f64() / s.part.of as f64)
            }
            DueCounter::Counted {
                per_interval,
                interval,
                ..
            } => {
                let step = interval.as_nanos().max(1);
                // The intervals starting in [from, until).
                let k = |t: Duration| t.as_nanos().div_ceil(step) as usize;
                let (a, b) = (k(from), k(until).min(per_interval.len()));
                let offered: u64 = per_interval.get(a..b).map_or(0, |s| s.iter().sum());
                Some(offered as f64 / len.as_secs_f64())
            }
        }
    }
}

impl ScheduleDue {
    /// This part's requests due in `[previous call, until)`.
    fn advance(&mut self, until: Duration) -> u64 {
        let mut mine = 0;
        while self.total.is_none_or(|n| self.next < n) {
            let due = self.schedule.next_send(self.next);
            if due >= until || self.duration.is_some_and(|d| due >= d) {
                break;
            }
            mine += u64::from(self.part.owns(self.next));
            self.next += 1;
        }
        mine
    }
}

/// Everything the interval loop updates.
pub(crate) struct Reporter {
    pub workers: Vec<Arc<Mutex<Stats>>>,
    pub total: Stats,
    pub intervals: Vec<IntervalSummary>,
    pub due: Option<DueCounter>,
    pub rate: f64,
    pub unit: Unit,
    pub quiet: bool,
    pub threads: usize,
    pub change: ChangeMarker,
    pub hdr: Option<log::Writer<BufWriter<File>>>,
    pub metrics: Option<Arc<Metrics>>,
    pub pacer: Option<Arc<PacerState>>,
    /// Set when writing the report failed because its reader is gone (a closed pipe).
    pub output_closed: bool,
    /// Keep each interval's histograms, encoded, in its summary (for `--json`, so runs merge).
    pub keep_histograms: bool,
    /// When an open loop's sending ends: an interval that begins then or later holds only the
    /// last responses (the drain), marked `drain` rather than compared with the others.
    pub send_end: Option<Duration>,
    check: SelfCheck,
    last_end: Duration,
    last_cpu: Option<Duration>,
}

/// What the run knows about an interval's end beyond the statistics.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IntervalEnd {
    /// When it ends, from the run's start.
    pub now: Duration,
    /// Requests released (open loop) or handed out (closed loop) by then, as far as known.
    pub dispatched: u64,
    /// The run's final interval.
    pub last: bool,
}

impl Reporter {
    #[allow(clippy::too_many_arguments)] // One constructor for one loop's state; named fields below.
    pub(crate) fn new(
        workers: Vec<Arc<Mutex<Stats>>>,
        due: Option<DueCounter>,
        rate: f64,
        unit: Unit,
        quiet: bool,
        threads: usize,
        hdr: Option<log::Writer<BufWriter<File>>>,
        metrics: Option<Arc<Metrics>>,
        pacer: Option<Arc<PacerState>>,
    ) -> Self {
        Reporter {
            workers,
            total: Stats::new(),
            intervals: Vec::new(),
            due,
            rate,
            unit,
            quiet,
            threads,
            change: ChangeMarker::new(),
            hdr,
            metrics,
            pacer,
            output_closed: false,
            keep_histograms: false,
            send_end: None,
            check: SelfCheck::default(),
            last_end: Duration::ZERO,
            last_cpu: selfcheck::cpu_time(),
        }
    }

    /// Closes the interval ending at `end.now` (offset from the run start).
    pub(crate) fn close_interval(&mut self, end: IntervalEnd, out: &mut dyn Write) {
        let now = end.now;
        let merged = self.collect();
        let len = now.saturating_sub(self.last_end);
        let target = self.due.as_mut().map_or(0, |d| d.advance(now));
        let rate = self
            .due
            .as_ref()
            .and_then(|d| d.ramped_rate(self.last_end, now))
            .unwrap_or(self.rate);
        let p99 = (!merged.latency.is_empty()).then(|| merged.latency.quantile_us(0.99));
        // Requests were due or in flight, none completed.
        let stalled =
            merged.requests() == 0 && (target > 0 || end.dispatched > self.total.requests());
        let len_us = u64::try_from(len.as_micros()).unwrap_or(u64::MAX);
        let drain = self.send_end.is_some_and(|e| self.last_end >= e) && !self.intervals.is_empty();
        let change = if drain {
            "drain".to_owned()
        } else {
            self.change.observe_interval(p99, stalled, len_us)
        };
        let iv = IntervalSummary {
            timestamp: wall_clock(),
            start_s: self.last_end.as_secs_f64(),
            duration_s: len.as_secs_f64(),
            target,
            change,
            totals: Totals {
                hdr: self
                    .keep_histograms
                    .then(|| Encoded::of(&merged).ok())
                    .flatten(),
                ..Totals::from_stats(&merged, rate, len)
            },
        };
        // A last fragment with nothing in it (the run ended just after a boundary) is not a line.
        let idle_tail =
            end.last && merged.requests() == 0 && target == 0 && !self.intervals.is_empty();
        if !self.quiet && !idle_tail && !self.output_closed {
            let written =
                writeln!(out, "{}", interval::line(&iv, self.unit)).and_then(|_| out.flush());
            if let Err(e) = written {
                self.output_closed = e.kind() == std::io::ErrorKind::BrokenPipe;
            }
        }
        self.log(&merged, len);
        if let Some(m) = &self.metrics {
            m.update(&iv);
        }
        if !end.last {
            self.self_check(&merged, len);
        }
        self.total.merge(&merged);
        if !idle_tail {
            self.intervals.push(iv);
        }
        self.last_end = now;
    }

    fn collect(&mut self) -> Stats {
        let mut merged = Stats::new();
        for w in &self.workers {
            let mut stats = w.lock().expect("stats lock is never poisoned");
            merged.merge(&stats);
            stats.reset();
        }
        merged
    }

    fn log(&mut self, merged: &Stats, len: Duration) {
        if let Some(w) = self.hdr.as_mut() {
            let start = self.last_end;
            let result = w
                .write(&merged.latency, start, len, Some("latency"))
                .and_then(|_| w.write(&merged.service, start, len, Some("service")))
                .and_then(|_| w.flush());
            if let Err(err) = result {
                crate::say(&format!("warning: {err}; the interval log stops here"));
                self.hdr = None;
            }
        }
    }

    fn self_check(&mut self, merged: &Stats, len: Duration) {
        let cpu_now = selfcheck::cpu_time();
        let cpu = cpu_now.zip(self.last_cpu).map(|(a, b)| a.saturating_sub(b));
        self.last_cpu = cpu_now;
        let lateness = match &self.pacer {
            Some(p) => p.lateness.lock().expect("not poisoned").take(),
            None => Histogram::new(),
        };
        let evidence = Evidence {
            pacer_lateness: &lateness,
            cpu,
            wall: len,
            threads: self.threads,
            queued: merged.queued,
            requests: merged.requests(),
        };
        for line in self.check.observe(&evidence) {
            crate::say(&line);
        }
    }
}

/// The wall-clock time, RFC 3339 to the second, for interval timestamps.
#[allow(clippy::disallowed_methods)] // Timestamps are for humans reading the report.
fn wall_clock() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Seconds since the Unix epoch, for the interval log's StartTime.
#[allow(clippy::disallowed_methods)] // The log header records when the run started.
pub(crate) fn epoch_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailguard_pacing::Arrivals;

    #[test]
    fn due_counter_splits_the_schedule_into_intervals() {
        let s = Schedule::new(Arrivals::Constant, 10.0, 1).unwrap();
        let mut d = DueCounter::new(s, Some(25), Some(Duration::from_secs(60)));
        assert_eq!(d.advance(Duration::from_secs(1)), 10);
        assert_eq!(d.advance(Duration::from_millis(2_050)), 11);
        assert_eq!(d.advance(Duration::from_secs(10)), 4); // capped by the total of 25
        let s = Schedule::new(Arrivals::Constant, 10.0, 1).unwrap();
        let mut d = DueCounter::new(s, None, Some(Duration::from_secs(2)));
        assert_eq!(d.advance(Duration::from_secs(100)), 20);
        assert_eq!(d.ramped_rate(Duration::ZERO, Duration::from_secs(1)), None);
    }

    /// The target column follows a ramp: 50 to 200 req/s over 2 s offers 87.5 requests in
    /// the first second and 162.5 in the second.
    #[test]
    fn due_counter_follows_a_ramp() {
        let ramp = tailguard_pacing::Ramp {
            from: 50.0,
            over: Duration::from_secs(2),
        };
        let s = Schedule::new(Arrivals::Constant, 200.0, 1)
            .unwrap()
            .with_ramp(ramp)
            .unwrap();
        let mut d = DueCounter::new(s, None, Some(Duration::from_secs(3)));
        let second = |n| Duration::from_secs(n);
        assert_eq!(d.advance(second(1)), 88); // requests 0..=87
        assert_eq!(d.advance(second(2)), 162);
        assert_eq!(d.advance(second(3)), 200);
        assert_eq!(d.ramped_rate(second(0), second(1)), Some(87.5));
        assert_eq!(d.ramped_rate(second(1), second(2)), Some(162.5));
        assert_eq!(d.ramped_rate(second(2), second(3)), Some(200.0));
        assert_eq!(d.ramped_rate(second(2), second(2)), None);
    }
}
