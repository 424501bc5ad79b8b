//! The fleet model's integration tests, one binary (a module per area).

mod bounds;
mod fuzz;
