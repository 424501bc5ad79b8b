//! Renderers for tailguard results: every tool prints through this crate, so a p99 from
//! `load`, `sim` and `bench` reads the same way.

#![warn(missing_docs)]

pub mod units;

pub use units::Unit;
