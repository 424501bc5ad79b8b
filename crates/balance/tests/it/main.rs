//! The balancers' integration tests, one binary (a module per area).

mod snapshot;
mod stress;
