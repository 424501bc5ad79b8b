//! What can be wrong with a configuration file, and the limits checked before parsing.

use tailguard_text::yaml::DocumentError;

/// The largest configuration file read: 1 MiB, a hundred times a large real one.
pub const MAX_BYTES: u64 = tailguard_text::yaml::MAX_BYTES as u64;
/// The deepest nesting accepted, block and flow levels together: a real file needs 6 or 7.
/// YAML parsers slow down sharply on deep nesting (100 KB of `[` takes seconds), and a
/// reload must not stall.
pub const MAX_FLOW_DEPTH: usize = tailguard_text::yaml::MAX_DEPTH;

/// A configuration file that cannot start the proxy.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// The file could not be read, or is not a regular file.
    #[error(transparent)]
    File(#[from] crate::config_file::FileError),
    /// Not valid YAML, an unknown key, or a value of the wrong type: where (file, line,
    /// column), then the key.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// A value out of range or an unknown kind.
    #[error("configuration: {key}: {message}")]
    Key {
        /// The key, e.g. `services[web].client.loadBalancer.kind`.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A constraint across keys.
    #[error("configuration: {0}")]
    Invalid(#[from] crate::config::ConfigError),
    /// Larger than [`MAX_BYTES`].
    #[error("configuration: larger than {MAX_BYTES} bytes")]
    TooLarge,
    /// Collections nested deeper than [`MAX_FLOW_DEPTH`].
    #[error("configuration: line {line}: nested deeper than {MAX_FLOW_DEPTH} levels")]
    TooDeep {
        /// The line (from 1) where the limit was passed.
        line: usize,
    },
}
