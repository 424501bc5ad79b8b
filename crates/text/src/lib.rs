//! How tailguard reads text that people write.
//!
//! - [`duration`]: the one duration syntax (`150ms`, `1.5s`, `1m30s`), used by every flag,
//!   fleet and scenario file, fault string and `?delay=`.
//! - [`lines`]: lines of a file that may be huge, each within a bound, counted.
//! - [`yaml`]: YAML documents (fleet files, scenarios, the proxy configuration) read into serde
//!   types, with errors that say where: `fleet.yaml:7:14: backends[2].latency: ...`.

pub mod duration;
pub mod files;
pub mod lines;
pub mod yaml;
