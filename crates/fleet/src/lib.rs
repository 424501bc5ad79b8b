//! The pure behaviour model of test backends: latency distributions, failures, fault schedules, fleet files.
#![warn(missing_docs)]
