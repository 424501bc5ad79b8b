//! Aggregating records: histograms and counters, no allocation per record.

use crate::outcome::{Check, Class, Classifier, ErrorKind, Outcome};
use crate::Record;
use std::collections::BTreeMap;
use std::time::Duration;
use tailguard_histogram::Histogram;

/// A request sent more than this after its scheduled time counts as a late send.
pub const LATE_AFTER: Duration = Duration::from_millis(1);

const STATUS_SLOTS: usize = 600;
/// gRPC codes 0 to 16, and one slot for any other.
const GRPC_SLOTS: usize = 18;

/// Histograms and counters over a set of records: one interval of one worker, or a whole run.
///
/// Which requests enter the latency histograms: every request that got an HTTP response, and
/// every request that timed out (at the time it was given up, a lower bound of its real latency).
/// Requests that failed fast (refused, reset, closed, malformed) are counted under `failed` and
/// their error kind, but kept out of the percentiles so a dead server does not look fast.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Latency from the scheduled send (coordinated omission corrected).
    pub latency: Histogram,
    /// Service time from the actual send.
    pub service: Histogram,
    /// Send lag: actual send minus scheduled send, every request.
    pub send_lag: Histogram,
    /// Responses classed good.
    pub good: u64,
    /// Responses classed bad.
    pub bad: u64,
    /// Requests with no response.
    pub failed: u64,
    /// Requests sent more than [`LATE_AFTER`] after their schedule.
    pub late: u64,
    /// Requests that waited more than [`LATE_AFTER`] for a free worker after they were due
    /// (every worker busy: the `--concurrency` cap); the worker adds these, not [`record`](Self::record).
    pub queued: u64,
    /// Second sends of failed requests (`load --retry-after`), counted in the requests too;
    /// the worker adds these.
    pub resent: u64,
    /// Response body bytes.
    pub bytes: u64,
    /// The latest actual send time of any request, on the run's clock.
    pub last_sent: Duration,
    status: Vec<u64>,
    /// Per gRPC status code; the last slot counts codes gRPC does not define.
    grpc: [u64; GRPC_SLOTS],
    errors: [u64; ErrorKind::ALL.len()],
    /// Answers counted bad by a failed check, per check.
    checks: [u64; Check::ALL.len()],
    per_target: Vec<u64>,
    /// The messages of streaming gRPC calls (none for other runs).
    pub messages: Option<Box<Messages>>,
}

/// The messages of streaming gRPC calls: counted as they go, not per call.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Messages {
    /// Messages sent.
    pub sent: u64,
    /// Messages received.
    pub received: u64,
    /// Each reply's latency: on a bidirectional stream from the send of the message it answers
    /// (the n-th reply answers the n-th message), on a server stream from the call's send.
    pub latency: Histogram,
    /// Server streams: from the call's send to its first message.
    pub first: Histogram,
}

impl Messages {
    fn merge(&mut self, other: &Messages) {
        self.sent += other.sent;
        self.received += other.received;
        self.latency.merge(&other.latency);
        self.first.merge(&other.first);
    }

    fn reset(&mut self) {
        (self.sent, self.received) = (0, 0);
        self.latency.reset();
        self.first.reset();
    }
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    /// Empty statistics.
    pub fn new() -> Self {
        Stats {
            latency: Histogram::new(),
            service: Histogram::new(),
            send_lag: Histogram::new(),
            good: 0,
            bad: 0,
            failed: 0,
            late: 0,
            queued: 0,
            resent: 0,
            bytes: 0,
            last_sent: Duration::ZERO,
            status: vec![0; STATUS_SLOTS],
            grpc: [0; GRPC_SLOTS],
            errors: [0; ErrorKind::ALL.len()],
            checks: [0; Check::ALL.len()],
            per_target: Vec::new(),
            messages: None,
        }
    }

    /// The message figures, made at the first message.
    pub fn messages_mut(&mut self) -> &mut Messages {
        self.messages.get_or_insert_with(Box::default)
    }

    /// Adds one record; returns its class (checks included).
    pub fn record(&mut self, rec: &Record, classifier: Classifier) -> Class {
        let failed_check = match classifier.rejects(rec.outcome) {
            true => Some(Check::Status),
            false => rec.failed_check,
        };
        let class = match failed_check {
            Some(check) => {
                self.checks[check as usize] += 1;
                Class::Bad
            }
            None => classifier.classify(rec.outcome),
        };
        match class {
            Class::Good => self.good += 1,
            Class::Bad => self.bad += 1,
            Class::Failed => self.failed += 1,
        }
        self.bytes += rec.bytes;
        let unsent = rec.outcome == Outcome::Error(ErrorKind::NoConnection);
        if unsent {
            // Never sent: no send lag, no service time; its latency counts (it was due).
            self.errors[ErrorKind::NoConnection.index()] += 1;
            self.latency.record(rec.latency());
            self.count_target(rec.target);
            return class;
        }
        let lag = rec.send_lag();
        self.send_lag.record(lag);
        if lag > LATE_AFTER {
            self.late += 1;
        }
        self.last_sent = self.last_sent.max(rec.sent);
        let timed = match rec.outcome {
            Outcome::Status(code) => {
                self.status[usize::from(code).min(STATUS_SLOTS - 1)] += 1;
                true
            }
            Outcome::Grpc(code) => {
                self.grpc[usize::from(code).min(GRPC_SLOTS - 1)] += 1;
                true
            }
            Outcome::Error(kind) => {
                self.errors[kind.index()] += 1;
                kind == ErrorKind::Timeout
            }
        };
        if timed {
            self.latency.record(rec.latency());
            self.service.record(rec.service_time());
        }
        self.count_target(rec.target);
        class
    }

    fn count_target(&mut self, target: u32) {
        let i = target as usize;
        if i >= self.per_target.len() {
            self.per_target.resize(i + 1, 0);
        }
        self.per_target[i] += 1;
    }

    /// All records added.
    pub fn requests(&self) -> u64 {
        self.good + self.bad + self.failed
    }

    /// Requests that were sent: all but those that found no connection
    /// ([`ErrorKind::NoConnection`]).
    pub fn sent(&self) -> u64 {
        self.requests()
            .saturating_sub(self.errors[ErrorKind::NoConnection.index()])
    }

    /// Good responses over all requests (1.0 when there were none).
    pub fn success_rate(&self) -> f64 {
        match self.requests() {
            0 => 1.0,
            n => self.good as f64 / n as f64,
        }
    }

    /// Adds `other` into these statistics.
    pub fn merge(&mut self, other: &Stats) {
        self.latency.merge(&other.latency);
        self.service.merge(&other.service);
        self.send_lag.merge(&other.send_lag);
        self.good += other.good;
        self.bad += other.bad;
        self.failed += other.failed;
        self.late += other.late;
        self.queued += other.queued;
        self.resent += other.resent;
        self.bytes += other.bytes;
        self.last_sent = self.last_sent.max(other.last_sent);
        for (a, b) in self.status.iter_mut().zip(&other.status) {
            *a += b;
        }
        for (a, b) in self.errors.iter_mut().zip(&other.errors) {
            *a += b;
        }
        for (a, b) in self.grpc.iter_mut().zip(&other.grpc) {
            *a += b;
        }
        for (a, b) in self.checks.iter_mut().zip(&other.checks) {
            *a += b;
        }
        if other.per_target.len() > self.per_target.len() {
            self.per_target.resize(other.per_target.len(), 0);
        }
        for (a, b) in self.per_target.iter_mut().zip(&other.per_target) {
            *a += b;
        }
        if let Some(m) = &other.messages {
            self.messages_mut().merge(m);
        }
    }

    /// Returns the statistics gathered so far and starts afresh, keeping allocations.
    pub fn take(&mut self) -> Stats {
        let snapshot = self.clone();
        self.reset();
        snapshot
    }

    /// Empties these statistics, keeping allocations.
    pub fn reset(&mut self) {
        self.latency.reset();
        self.service.reset();
        self.send_lag.reset();
        (self.good, self.bad, self.failed, self.late, self.bytes) = (0, 0, 0, 0, 0);
        self.queued = 0;
        self.resent = 0;
        self.status.iter_mut().for_each(|c| *c = 0);
        self.errors = [0; ErrorKind::ALL.len()];
        self.grpc = [0; GRPC_SLOTS];
        self.checks = [0; Check::ALL.len()];
        self.per_target.iter_mut().for_each(|c| *c = 0);
        if let Some(m) = &mut self.messages {
            m.reset();
        }
    }

    /// Counts per status code, by code (codes outside 100..=599 are counted under 599).
    pub fn status_codes(&self) -> BTreeMap<u16, u64> {
        (0..STATUS_SLOTS)
            .filter(|&i| self.status[i] > 0)
            .map(|i| (i as u16, self.status[i]))
            .collect()
    }

    /// Counts per gRPC status name, only the statuses that occurred (codes gRPC does not define
    /// count as `UNKNOWN`).
    pub fn grpc_statuses(&self) -> BTreeMap<&'static str, u64> {
        let mut out = BTreeMap::new();
        for (code, &n) in self.grpc.iter().enumerate().filter(|(_, n)| **n > 0) {
            let name = crate::outcome::grpc_name(u8::try_from(code).unwrap_or(u8::MAX));
            *out.entry(name).or_insert(0) += n;
        }
        out
    }

    /// Counts per error kind, only the kinds that occurred.
    pub fn errors(&self) -> BTreeMap<ErrorKind, u64> {
        ErrorKind::ALL
            .iter()
            .filter(|k| self.errors[k.index()] > 0)
            .map(|k| (*k, self.errors[k.index()]))
            .collect()
    }

    /// Answers counted bad by a failed check, per check, only the checks that failed.
    pub fn failed_checks(&self) -> BTreeMap<Check, u64> {
        Check::ALL
            .iter()
            .filter(|c| self.checks[**c as usize] > 0)
            .map(|c| (*c, self.checks[*c as usize]))
            .collect()
    }

    /// Requests per target index.
    pub fn per_target(&self) -> &[u64] {
        &self.per_target
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(sched_ms: u64, sent_ms: u64, done_ms: u64, outcome: Outcome, target: u32) -> Record {
        let ms = Duration::from_millis;
        Record {
            scheduled: ms(sched_ms),
            sent: ms(sent_ms),
            completed: ms(done_ms),
            outcome,
            bytes: 10,
            target,
            failed_check: None,
        }
    }

    #[test]
    fn failed_checks_count_bad_under_their_name() {
        let mut s = Stats::new();
        let c = Classifier {
            four_xx_bad: false,
            expect: Some("2xx,404".parse().unwrap()),
        };
        s.record(&rec(0, 0, 5, Outcome::Status(200), 0), c);
        s.record(&rec(0, 0, 5, Outcome::Status(404), 0), c);
        s.record(&rec(0, 0, 5, Outcome::Status(403), 0), c);
        s.record(&rec(0, 0, 5, Outcome::Status(503), 0), c);
        let mut body = rec(0, 0, 5, Outcome::Status(200), 0);
        body.failed_check = Some(Check::BodyContains);
        s.record(&body, c);
        s.record(&rec(0, 0, 1, Outcome::Error(ErrorKind::Reset), 0), c);
        assert_eq!((s.good, s.bad, s.failed), (2, 3, 1));
        let checks: Vec<_> = s.failed_checks().into_iter().collect();
        assert_eq!(checks, [(Check::Status, 2), (Check::BodyContains, 1)]);
        let mut merged = Stats::new();
        merged.merge(&s);
        merged.merge(&s);
        assert_eq!(merged.failed_checks()[&Check::Status], 4);
        merged.reset();
        assert!(merged.failed_checks().is_empty());
    }

    #[test]
    fn counts_classes_codes_errors_and_lateness() {
        let mut s = Stats::new();
        let c = Classifier::default();
        s.record(&rec(0, 0, 5, Outcome::Status(200), 0), c);
        s.record(&rec(0, 3, 9, Outcome::Status(503), 1), c);
        s.record(&rec(0, 0, 1, Outcome::Error(ErrorKind::Connect), 1), c);
        s.record(&rec(0, 0, 100, Outcome::Error(ErrorKind::Timeout), 2), c);
        assert_eq!((s.good, s.bad, s.failed, s.late), (1, 1, 2, 1));
        assert_eq!(s.requests(), 4);
        assert_eq!(
            s.status_codes().into_iter().collect::<Vec<_>>(),
            [(200, 1), (503, 1)]
        );
        let errors: Vec<_> = s.errors().into_iter().collect();
        assert_eq!(errors, [(ErrorKind::Connect, 1), (ErrorKind::Timeout, 1)]);
        // The refused request stays out of the percentiles; the timeout is in.
        assert_eq!(s.latency.count(), 3);
        assert_eq!(s.send_lag.count(), 4);
        assert_eq!(s.per_target(), &[1, 2, 1]);
        assert_eq!(s.bytes, 40);
    }

    #[test]
    fn merge_then_take_round_trip() {
        let c = Classifier::default();
        let mut a = Stats::new();
        let mut b = Stats::new();
        a.record(&rec(0, 0, 5, Outcome::Status(200), 0), c);
        b.record(&rec(0, 0, 7, Outcome::Status(500), 3), c);
        a.merge(&b);
        assert_eq!((a.good, a.bad), (1, 1));
        assert_eq!(a.per_target(), &[1, 0, 0, 1]);
        let snap = a.take();
        assert_eq!(snap.requests(), 2);
        assert_eq!(a.requests(), 0);
        assert!(a.latency.is_empty());
        assert_eq!(a.per_target(), &[0, 0, 0, 0]);
    }
}
