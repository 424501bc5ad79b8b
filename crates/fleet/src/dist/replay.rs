//! Replaying recorded latencies: each request draws one of the values uniformly at random.
//!
//! Seed 002's backends "replay latency captured from a production system". Drawing at random
//! (the empirical distribution) rather than in file order keeps [`crate::BackendSpec::decide`]
//! a pure function of `(elapsed, rng)`, so a live fleet and a simulation agree without sharing a
//! cursor. The file holds one value per line, with a unit (`167ms`) or as a bare number in the
//! file's `unit` (default `ms`); blank lines and lines starting with `#` are skipped.

use rand::Rng;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tailguard_text::duration::{format_duration, parse_duration};

/// A replay source that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file could not be read.
    #[error("cannot read replay file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a latency.
    #[error("{path}:{line}: `{text}` is not a latency ({reason})")]
    Value {
        /// The file (or `values` for an inline list).
        path: String,
        /// 1-based line (or index for an inline list).
        line: usize,
        /// The offending text.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Nothing to replay.
    #[error("{0}: no latency values to replay")]
    Empty(String),
    /// The unit for bare numbers is not a time unit.
    #[error("replay unit `{0}` is not one of ns, us, ms, s")]
    Unit(String),
}

/// The largest replay file read: 64 MiB, about eight million values.
pub const MAX_REPLAY_BYTES: u64 = 64 << 20;

/// Recorded latencies (shared, so cloning a spec does not copy them) and where they came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    values: Arc<[Duration]>,
    source: String,
}

impl Replay {
    /// Replays `values`; `source` names them in messages and displays.
    ///
    /// # Errors
    /// [`ReplayError::Empty`] when there is nothing to draw from.
    pub fn new(values: Vec<Duration>, source: impl Into<String>) -> Result<Self, ReplayError> {
        let source = source.into();
        if values.is_empty() {
            return Err(ReplayError::Empty(source));
        }
        Ok(Replay {
            values: values.into(),
            source,
        })
    }

    /// Reads one value per line from `path`; bare numbers are in `unit` (`ns`, `us`, `ms`, `s`).
    ///
    /// # Errors
    /// [`ReplayError`] naming the file and line of the first bad value.
    pub fn from_file(path: &Path, unit: &str) -> Result<Self, ReplayError> {
        use std::io::Read as _;
        let read_error = |source| ReplayError::Read {
            path: path.to_owned(),
            source,
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_REPLAY_BYTES + 1).read_to_string(&mut text))
            .map_err(read_error)?;
        if text.len() as u64 > MAX_REPLAY_BYTES {
            let too_large = format!("larger than {MAX_REPLAY_BYTES} bytes");
            return Err(read_error(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                too_large,
            )));
        }
        Replay::from_text(&text, unit, &path.display().to_string())
    }

    /// Like [`Replay::from_file`] for text already in memory; `source` names it in errors.
    ///
    /// # Errors
    /// [`ReplayError`] naming `source` and the line of the first bad value.
    pub fn from_text(text: &str, unit: &str, source: &str) -> Result<Self, ReplayError> {
        if !matches!(unit, "ns" | "us" | "ms" | "s") {
            return Err(ReplayError::Unit(unit.to_owned()));
        }
        let mut values = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            values.push(
                parse_value(line, unit).map_err(|reason| ReplayError::Value {
                    path: source.to_owned(),
                    line: i + 1,
                    text: line.to_owned(),
                    reason,
                })?,
            );
        }
        Replay::new(values, source)
    }

    /// One recorded value, chosen uniformly.
    pub fn pick<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        self.values[rng.random_range(0..self.values.len())]
    }

    /// The recorded values.
    pub fn values(&self) -> &[Duration] {
        &self.values
    }

    /// Every value multiplied by `factor`.
    pub fn scaled(&self, factor: f64) -> Replay {
        Replay {
            values: self
                .values
                .iter()
                .map(|d| crate::limits::scale_latency(*d, factor))
                .collect(),
            source: format!("{} x{factor}", self.source),
        }
    }
}

/// One value: with its own unit, or a bare number in `unit`.
fn parse_value(text: &str, unit: &str) -> Result<Duration, String> {
    if text.ends_with(|c: char| c.is_ascii_digit()) {
        parse_duration(&format!("{text}{unit}"))
    } else {
        parse_duration(text)
    }
    .map_err(|e| e.to_string())
}

impl fmt::Display for Replay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.values.len();
        let show: Vec<String> = self
            .values
            .iter()
            .take(3)
            .map(|d| format_duration(*d))
            .collect();
        let more = if n > 3 { ", ..." } else { "" };
        write!(
            f,
            "{{source: {:?}, count: {n}, values: [{}{more}]}}",
            self.source,
            show.join(", ")
        )
    }
}
