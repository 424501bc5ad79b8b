//! Test fixtures: small real servers on loopback for integration tests.
#![warn(missing_docs)]
