//! Renderers for tailguard results: slow_cooker-style interval lines, final tables, JSON.
#![warn(missing_docs)]
