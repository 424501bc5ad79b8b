//! The open-loop load generator behind `tailguard load`.
#![warn(missing_docs)]
