//! The simulator's integration tests, one binary (a module per area).

mod anchors;
mod bounds;
mod engine;
mod fuzz;
