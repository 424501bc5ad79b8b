//! Figures per request name: a run over many URLs, or a request file's requests, reports each
//! name's counts and latency apart (`per_name` in the JSON).

use crate::outcome::{Class, ErrorKind, Outcome};
use crate::Record;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tailguard_histogram::{log, Histogram, Percentiles};

/// One name's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NameStats {
    /// Answers classed good.
    pub good: u64,
    /// Answers classed bad.
    pub bad: u64,
    /// Requests without an answer.
    pub failed: u64,
    /// Latency from the scheduled send, as [`crate::Stats`] counts it; a compact histogram
    /// (two significant digits), made at the name's first timed request.
    pub latency: Option<Histogram>,
}

impl NameStats {
    /// Every request of the name.
    pub fn requests(&self) -> u64 {
        self.good + self.bad + self.failed
    }
}

/// Figures per name, for records whose `target` maps to a name.
#[derive(Clone, Debug, PartialEq)]
pub struct ByName {
    /// The name of each target index.
    name_of: Arc<[u32]>,
    names: Vec<NameStats>,
}

impl ByName {
    /// Empty figures for `names` names; `name_of[t]` is target `t`'s name (below `names`).
    pub fn new(name_of: Arc<[u32]>, names: usize) -> ByName {
        debug_assert!(name_of.iter().all(|&n| (n as usize) < names));
        ByName {
            name_of,
            names: vec![NameStats::default(); names],
        }
    }

    /// Adds one record, classed `class`.
    pub fn record(&mut self, rec: &Record, class: Class) {
        let Some(&n) = self.name_of.get(rec.target as usize) else {
            return;
        };
        let s = &mut self.names[n as usize];
        match class {
            Class::Good => s.good += 1,
            Class::Bad => s.bad += 1,
            Class::Failed => s.failed += 1,
        }
        let timed = matches!(
            rec.outcome,
            Outcome::Status(_)
                | Outcome::Grpc(_)
                | Outcome::Error(ErrorKind::Timeout | ErrorKind::NoConnection)
        );
        if timed {
            s.latency
                .get_or_insert_with(Histogram::compact)
                .record(rec.latency());
        }
    }

    /// Adds `other`'s figures (same names) into these.
    pub fn merge(&mut self, other: &ByName) {
        for (a, b) in self.names.iter_mut().zip(&other.names) {
            a.good += b.good;
            a.bad += b.bad;
            a.failed += b.failed;
            if let Some(h) = &b.latency {
                a.latency.get_or_insert_with(Histogram::compact).merge(h);
            }
        }
    }

    /// Each name's figures, by name index.
    pub fn names(&self) -> &[NameStats] {
        &self.names
    }
}

/// One name's figures in a run summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NameSummary {
    /// The name (`METHOD URL` unless a request file names it).
    pub name: String,
    /// The method of the first request of that name.
    pub method: String,
    /// The URL of the first request of that name.
    pub url: String,
    /// Requests of the name (good + bad + failed).
    pub requests: u64,
    /// Answers classed good.
    pub good: u64,
    /// Answers classed bad.
    pub bad: u64,
    /// Requests without an answer.
    pub failed: u64,
    /// good / requests (`None` without requests).
    pub success_rate: Option<f64>,
    /// Latency from the scheduled send, microseconds (two significant digits).
    pub latency_us: Option<Percentiles>,
    /// The latency histogram, encoded as an interval log line holds it, so summaries merge
    /// exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hdr: Option<String>,
}

impl NameSummary {
    /// The summary of `stats`, named.
    pub fn of(name: String, method: String, url: String, stats: &NameStats) -> NameSummary {
        let requests = stats.requests();
        let latency = stats.latency.as_ref().filter(|h| !h.is_empty());
        NameSummary {
            name,
            method,
            url,
            requests,
            good: stats.good,
            bad: stats.bad,
            failed: stats.failed,
            success_rate: (requests > 0).then(|| stats.good as f64 / requests as f64),
            latency_us: latency.map(Histogram::percentiles),
            hdr: latency.and_then(|h| log::encode(h).ok()),
        }
    }

    /// Adds `other` (the same name from another summary): counts, and the histograms when
    /// both have them (else the percentiles are dropped: no figure from part of the data).
    pub fn merge(&mut self, other: &NameSummary) {
        let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        add(&mut self.requests, other.requests);
        add(&mut self.good, other.good);
        add(&mut self.bad, other.bad);
        add(&mut self.failed, other.failed);
        self.success_rate = (self.requests > 0).then(|| self.good as f64 / self.requests as f64);
        // Decoded back into compact histograms, so the percentiles read as the run's did.
        let compact = |text: &str| {
            log::decode(text).ok().map(|h| {
                let mut c = Histogram::compact();
                c.merge(&h);
                c
            })
        };
        let merged = match (self.hdr.as_deref(), other.hdr.as_deref()) {
            (Some(a), Some(b)) => compact(a).zip(compact(b)).map(|(mut a, b)| {
                a.merge(&b);
                a
            }),
            (Some(a), None) if other.latency_us.is_none() => compact(a),
            (None, Some(b)) if self.latency_us.is_none() => compact(b),
            _ => None,
        };
        self.latency_us = merged
            .as_ref()
            .filter(|h| !h.is_empty())
            .map(Histogram::percentiles);
        self.hdr = merged.as_ref().and_then(|h| log::encode(h).ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rec(target: u32, outcome: Outcome, ms: u64) -> Record {
        Record {
            scheduled: Duration::ZERO,
            sent: Duration::ZERO,
            completed: Duration::from_millis(ms),
            outcome,
            bytes: 0,
            target,
            failed_check: None,
        }
    }

    #[test]
    fn targets_count_under_their_names_and_merge_exactly() {
        // Targets 0 and 2 share name 0; target 1 is name 1.
        let mut a = ByName::new(Arc::from(vec![0, 1, 0]), 2);
        a.record(&rec(0, Outcome::Status(200), 10), Class::Good);
        a.record(&rec(2, Outcome::Status(503), 20), Class::Bad);
        a.record(&rec(1, Outcome::Error(ErrorKind::Reset), 1), Class::Failed);
        a.record(&rec(7, Outcome::Status(200), 1), Class::Good);
        let mut b = a.clone();
        b.merge(&a);
        let n0 = &b.names()[0];
        assert_eq!((n0.good, n0.bad, n0.failed), (2, 2, 0));
        assert_eq!(n0.latency.as_ref().unwrap().count(), 4);
        let n1 = &b.names()[1];
        assert_eq!((n1.failed, n1.latency.is_none()), (2, true));

        let s0 = NameSummary::of(
            "GET /a".into(),
            "GET".into(),
            "http://h/a".into(),
            &a.names()[0],
        );
        assert_eq!(s0.success_rate, Some(0.5));
        let mut twice = s0.clone();
        twice.merge(&s0);
        assert_eq!(twice.requests, 4);
        let whole = NameSummary::of("GET /a".into(), "GET".into(), "http://h/a".into(), n0);
        assert_eq!(twice.latency_us, whole.latency_us);
        let s1 = NameSummary::of("x".into(), "GET".into(), "u".into(), &a.names()[1]);
        assert_eq!((s1.latency_us, s1.hdr), (None, None));
    }
}
