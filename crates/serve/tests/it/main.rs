//! `tailguard serve`'s integration tests, one binary (a module per area, one `common`).

mod common;

mod bounds;
mod capacity;
mod failures;
mod grpc_bounds;
mod h2spec;
mod latency;
mod nagle;
mod protocols;
mod schedule;
