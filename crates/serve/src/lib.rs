//! Test backends that misbehave on purpose, behind `tailguard serve`.
#![warn(missing_docs)]
