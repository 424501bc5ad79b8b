//! [`FleetError`]: a fleet file, flag or control request that does not describe a fleet.
//!
//! Every message starts with where the problem is (`fleet.yaml:7:14: backends[2].latency: ...`)
//! so the file, line and field can be found without guessing.

use serde::de::DeserializeOwned;
use std::path::PathBuf;
use tailguard_text::yaml::DocumentError;

/// Why a fleet (or a part of one) could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The text is not valid YAML or does not match the fleet schema (its message starts
    /// with where: `fleet.yaml:7:14: backends[2].latency: ...`).
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// The fleet file could not be read.
    #[error("cannot read fleet file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A name that is neither a file nor a built-in fleet.
    #[error("`{name}` is neither a fleet file nor a built-in fleet (built-ins: {builtins})")]
    Unknown {
        /// What was asked for.
        name: String,
        /// The built-in names, comma-separated.
        builtins: String,
    },
}

/// Deserializes `text` as YAML, naming `origin` in the error.
pub(crate) fn from_yaml<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, FleetError> {
    Ok(tailguard_text::yaml::from_yaml(text, origin)?)
}
