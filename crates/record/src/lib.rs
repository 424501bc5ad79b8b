//! The per-request record and interval aggregation shared by every tailguard tool.
#![warn(missing_docs)]
