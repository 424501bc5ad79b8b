//! The load generator's integration tests, one binary (a module per area, one `common`).

mod common;

mod checks;
mod counts;
mod intervals;
mod latency;
mod preflight;
mod protocols;
mod records;
mod reflection;
mod replay;
mod requests;
