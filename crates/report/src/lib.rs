//! Renderers for tailguard results: every tool prints through this crate, so a p99 from
//! `load`, `sim` and `bench` reads the same way.
//!
//! - [`interval`]: slow_cooker's one-line-per-interval report, its defects fixed (the p999
//!   column is the 99.9th percentile, not the max; values carry units and decimals; the change
//!   marker does not fire on the first intervals);
//! - [`change`]: the change marker rule;
//! - [`text`]: the final report (totals, percentiles for latency and service time side by
//!   side, the `FROM TO #REQUESTS` histogram, status codes, error kinds);
//! - [`units`]: readable values (`260µs`, `42.1ms`, `1.71s`);
//! - [`svg`]: a dependency-free SVG line chart (linear or "nines" axis) for HTML reports;
//! - [`web`]: the same charts and units drawn in the browser, for live pages.

#![warn(missing_docs)]

pub mod change;
pub mod interval;
pub mod svg;
pub mod text;
pub mod units;
pub mod web;

pub use change::ChangeMarker;
pub use units::Unit;
