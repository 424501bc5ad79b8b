//! Renderers for a [`Report`]: a text table, JSON, an SVG latency-by-percentile chart, and an
//! HTML page holding both.
//!
//! All output is a pure function of the report (fixed decimals, fleet and arm order, no hash
//! iteration), so the same seed gives the same bytes.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_sim::{render, run, Overrides, Scenario};
//!
//! let mut s = Scenario::builtin("slow-middle").unwrap();
//! let o = Overrides { duration: Some(Duration::from_secs(2)), arms: vec!["round-robin".into()], ..Overrides::default() };
//! s.apply(&o).unwrap();
//! let report = run(&s).unwrap();
//! assert!(render::text(&report).contains("round-robin"));
//! assert!(render::json(&report).contains("\"latency_us\""));
//! assert!(render::svg(&report).starts_with("<svg"));
//! ```

mod chart;
mod html;
mod json;
mod text;

pub use chart::svg;
pub use html::html;
pub use json::json;
pub use text::text;

use crate::Report;
