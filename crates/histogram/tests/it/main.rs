//! The histogram wrapper's integration tests, one binary (a module per area).

mod blobs;
mod fuzz;
