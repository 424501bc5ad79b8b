//! Why summaries could not be merged.

/// The most parts a schedule may be split in: what `tailguard load --shard` accepts.
pub const MAX_PARTS: u64 = 10_000;

/// Why summaries could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("nothing to merge")]
    Empty,
    /// A summary lacks what an exact merge needs.
    #[error(
        "{source_name}: {missing}; write it again with this version's `tailguard load --json`"
    )]
    Incomplete {
        /// The summary's name.
        source_name: String,
        /// What it lacks.
        missing: &'static str,
    },
    /// A histogram could not be decoded.
    #[error("{source_name}: {reason}")]
    Histogram {
        /// The summary's name.
        source_name: String,
        /// The decoder's complaint.
        reason: String,
    },
    /// The same part of a schedule twice: its requests would be counted twice.
    #[error("part {part} is in both {first} and {second}: each part of a schedule counts once")]
    DuplicatePart {
        /// The part.
        part: String,
        /// One summary holding it.
        first: String,
        /// The other.
        second: String,
    },
    /// A part that is not `I/N` with `I < N <= MAX_PARTS`.
    #[error("{source_name}: part {part:?} is not I/N with I below N and N at most {MAX_PARTS}")]
    BadPart {
        /// The summary's name.
        source_name: String,
        /// The part as written (shortened).
        part: String,
    },
    /// The same whole run twice: its requests would be counted twice.
    #[error("{first} and {second} are the same run (same start, counts and histograms): it would count twice")]
    SameRun {
        /// One summary.
        first: String,
        /// The other.
        second: String,
    },
    /// An interval that starts before the one before it in its summary.
    #[error("{source_name}: intervals[{index}] is not in time order")]
    OutOfOrder {
        /// The summary's name.
        source_name: String,
        /// The interval.
        index: usize,
    },
    /// A time no run could have (hostile or damaged input).
    #[error("{source_name}: {field} is {value}, not a time a run could have")]
    Implausible {
        /// The summary's name.
        source_name: String,
        /// Which field.
        field: String,
        /// Its value, as written.
        value: String,
    },
    /// Parts of schedules split different ways.
    #[error("{source_name} is part {part}, but {other} is part of a schedule split in {of}")]
    MixedParts {
        /// The odd one.
        source_name: String,
        /// Its part.
        part: String,
        /// A summary split the other way.
        other: String,
        /// How many parts that one has.
        of: u64,
    },
}
