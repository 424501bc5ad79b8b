//! The per-request record and its aggregation, shared by every tailguard tool.
//!
//! A [`Record`] is what one request did: when it was *scheduled* (the open-loop send time),
//! when it was actually *sent*, when its response *completed*, its status or error, the bytes
//! read and which target it went to. From those three instants come the three durations every
//! report shows:
//!
//! - latency = completed − scheduled: what a user of the system would have seen (corrected for
//!   coordinated omission: a stalled server delays the requests queued behind it, and that
//!   delay is counted);
//! - service time = completed − sent: what the server took once it had the request;
//! - send lag = sent − scheduled: how late the generator (or its concurrency cap) sent it.
//!
//! [`Stats`] aggregates records into histograms and counters without allocating per record;
//! one `Stats` per worker, merged at interval ends. [`RunSummary`] and [`IntervalSummary`] are
//! the machine-readable results (`--json`). [`live`] keeps a rolling window and five minutes
//! of one-second samples of a request stream, for live pages (the proxy's dashboard).
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_record::{Classifier, Outcome, Record, Stats};
//!
//! let ms = Duration::from_millis;
//! let rec = Record {
//!     scheduled: ms(10),
//!     sent: ms(12),
//!     completed: ms(17),
//!     outcome: Outcome::Status(200),
//!     bytes: 2,
//!     target: 0,
//!     failed_check: None,
//! };
//! assert_eq!(rec.latency(), ms(7));
//! assert_eq!(rec.service_time(), ms(5));
//! let mut stats = Stats::new();
//! stats.record(&rec, Classifier::default());
//! assert_eq!(stats.good, 1);
//! ```

#![warn(missing_docs)]

pub mod live;
pub mod merge;
mod names;
mod outcome;
pub mod records;
mod stats;
mod summary;

pub use names::{ByName, NameStats, NameSummary};
pub use outcome::{
    grpc_as_http, grpc_name, Check, Class, Classifier, ErrorKind, Outcome, StatusSet, GRPC_NAMES,
};
pub use stats::{Messages, Stats, LATE_AFTER};
pub use summary::{
    measured, percentile_name, read_json_file, Encoded, IntervalSummary, MessageTotals, Quantile,
    RecordsFile, RunSummary, SloVerdict, Totals, MAX_JSON_BYTES,
};

use std::time::Duration;

/// What one request did. Times are offsets from the start of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// When the request was due (open-loop schedule).
    pub scheduled: Duration,
    /// When it was handed to a ready connection.
    pub sent: Duration,
    /// When its response completed (last body byte) or it failed.
    pub completed: Duration,
    /// The status code, or why there was none.
    pub outcome: Outcome,
    /// Response body bytes read.
    pub bytes: u64,
    /// Index of the target (URL or endpoint) it went to.
    pub target: u32,
    /// A check on the answer's body that it failed (`--expect-body-*`; the status check is the
    /// classifier's): the answer counts as bad.
    pub failed_check: Option<Check>,
}

impl Record {
    /// Completed minus scheduled: the latency a user saw, coordinated omission included.
    pub fn latency(&self) -> Duration {
        self.completed.saturating_sub(self.scheduled)
    }

    /// Completed minus sent: the time the server (and network) took.
    pub fn service_time(&self) -> Duration {
        self.completed.saturating_sub(self.sent)
    }

    /// Sent minus scheduled: how late the request left.
    pub fn send_lag(&self) -> Duration {
        self.sent.saturating_sub(self.scheduled)
    }
}
