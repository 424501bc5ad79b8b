//! YAML documents read into serde types, with errors that say where.
//!
//! Fleet files, scenarios and the proxy configuration all report a problem the same way: the
//! origin (a file name, or `--latency`, `control`, ...), then line and column when the parser
//! knows them, then the field path and what is wrong, so the file, line and field can be found
//! without guessing.
//!
//! Every document is checked before it is parsed ([`check_shape`]): at most [`MAX_BYTES`],
//! nested at most [`MAX_DEPTH`] levels, so a hostile file costs a scan, not seconds of parsing.
//!
//! # Example
//! ```
//! #[derive(Debug, serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct Doc { rate: u32 }
//! let err = tailguard_text::yaml::from_yaml::<Doc>("rate: 5\nrat: 6\n", "doc.yaml").unwrap_err();
//! assert!(err.to_string().starts_with("doc.yaml:2:1: unknown field `rat`"), "{err}");
//! ```

mod shape;

pub use shape::{check_shape, ShapeError, MAX_BYTES, MAX_DEPTH};

use serde::de::DeserializeOwned;
use std::path::Path;

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

/// Deserializes `text` as YAML, naming `origin` in the error, after [`check_shape`].
///
/// # Errors
/// [`DocumentError`] with the position when the parser knows it; a document larger than
/// [`MAX_BYTES`] or nested deeper than [`MAX_DEPTH`] before parsing.
pub fn from_yaml<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, DocumentError> {
    check_shape(text).map_err(|err| shape_error(&err, origin))?;
    serde_yaml_ng::from_str(text).map_err(|err| positioned(&err, origin))
}

/// A [`ShapeError`] as a [`DocumentError`] naming `origin` (and the line, for depth).
pub fn shape_error(err: &ShapeError, origin: &str) -> DocumentError {
    match err {
        ShapeError::TooLarge(_) => DocumentError::invalid(origin, err.to_string()),
        ShapeError::TooDeep { line } => DocumentError::At {
            origin: origin.to_owned(),
            line: *line,
            column: 1,
            message: err.to_string(),
        },
    }
}

/// Reads a YAML file of at most [`MAX_BYTES`], never more: a larger file (or an endless one,
/// such as `/dev/zero`) is an error after `MAX_BYTES + 1` bytes.
///
/// # Errors
/// The OS error, or [`std::io::ErrorKind::InvalidData`] for a file too large or not UTF-8.
pub fn read_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_BYTES as u64 + 1)
        .read_to_string(&mut text)?;
    if text.len() > MAX_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {MAX_BYTES} bytes"),
        ));
    }
    Ok(text)
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
