//! [`FleetError`]: a fleet file, flag or control request that does not describe a fleet.
//!
//! Every message starts with where the problem is (`fleet.yaml:7:14: backends[2].latency: ...`)
//! so the file, line and field can be found without guessing.

use serde::de::DeserializeOwned;
use std::path::PathBuf;

/// Why a fleet (or a part of one) could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The text is not valid YAML or does not match the fleet schema.
    #[error("{origin}:{line}:{column}: {message}")]
    Parse {
        /// File name (or `--latency`, `control`, ...) the text came from.
        origin: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The field path and what is wrong, e.g. `backends[2].latency: unknown variant`.
        message: String,
    },
    /// A problem without a position (an empty document, for instance).
    #[error("{origin}: {message}")]
    Invalid {
        /// Where the text came from.
        origin: String,
        /// What is wrong.
        message: String,
    },
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

/// Deserializes `text` as YAML, turning serde's error into a [`FleetError`] naming `origin`.
pub(crate) fn from_yaml<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, FleetError> {
    serde_yaml_ng::from_str(text).map_err(|err| yaml_error(&err, origin))
}

fn yaml_error(err: &serde_yaml_ng::Error, origin: &str) -> FleetError {
    let text = err.to_string();
    match err.location() {
        Some(loc) => {
            // serde_yaml_ng appends " at line L column C"; the position goes in front instead.
            let message = match text.rfind(" at line ") {
                Some(cut) => text[..cut].to_owned(),
                None => text,
            };
            FleetError::Parse {
                origin: origin.to_owned(),
                line: loc.line(),
                column: loc.column(),
                message,
            }
        }
        None => FleetError::Invalid {
            origin: origin.to_owned(),
            message: text,
        },
    }
}
