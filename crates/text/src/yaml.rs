//! YAML documents read into serde types, with errors that say where.
//!
//! Fleet files, scenarios and the proxy configuration all report a problem the same way: the
//! origin (a file name, or `--latency`, `control`, ...), then line and column when the parser
//! knows them, then the field path and what is wrong, so the file, line and field can be found
//! without guessing.
//!
//! # Example
//! ```
//! #[derive(Debug, serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct Doc { rate: u32 }
//! let err = tailguard_text::yaml::from_yaml::<Doc>("rate: 5\nrat: 6\n", "doc.yaml").unwrap_err();
//! assert!(err.to_string().starts_with("doc.yaml:2:1: unknown field `rat`"), "{err}");
//! ```

use serde::de::DeserializeOwned;

/// A document that does not match its schema, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    /// At a known position: not valid YAML, or a field that does not fit.
    #[error("{origin}:{line}:{column}: {message}")]
    At {
        /// The file name (or `--latency`, `control`, ...) the text came from.
        origin: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The field path and what is wrong, e.g. `backends[2].latency: unknown variant`.
        message: String,
    },
    /// Without a position (an empty document, or a value checked after parsing).
    #[error("{origin}: {message}")]
    Invalid {
        /// Where the text came from.
        origin: String,
        /// What is wrong.
        message: String,
    },
}

impl DocumentError {
    /// A problem without a position, found after parsing.
    pub fn invalid(origin: impl Into<String>, message: impl Into<String>) -> Self {
        DocumentError::Invalid {
            origin: origin.into(),
            message: message.into(),
        }
    }
}

/// Deserializes `text` as YAML, naming `origin` in the error.
///
/// # Errors
/// [`DocumentError`] with the position when the parser knows it.
pub fn from_yaml<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, DocumentError> {
    serde_yaml_ng::from_str(text).map_err(|err| positioned(&err, origin))
}

/// serde_yaml_ng's error as a [`DocumentError`] naming `origin`.
pub fn positioned(err: &serde_yaml_ng::Error, origin: &str) -> DocumentError {
    let text = err.to_string();
    match err.location() {
        Some(loc) => {
            // serde_yaml_ng appends " at line L column C"; the position goes in front instead.
            let message = match text.rfind(" at line ") {
                Some(cut) => text[..cut].to_owned(),
                None => text,
            };
            DocumentError::At {
                origin: origin.to_owned(),
                line: loc.line(),
                column: loc.column(),
                message,
            }
        }
        None => DocumentError::invalid(origin, text),
    }
}
