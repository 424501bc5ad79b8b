//! Files a run reads at start (`--data @FILE`, `@FILE` of URLs, `--targets` and their bodies,
//! `--replay`, `--proto`): regular files only, read within a stated size, so a wrong path
//! (`/dev/zero`, a FIFO, a disk image) costs an error, not the memory or a hang.

/// The largest request body (`--data @FILE`): 64 MiB.
pub const MAX_BODY_BYTES: u64 = 64 << 20;

/// The largest file of URLs: 16 MiB.
pub const MAX_URL_FILE_BYTES: u64 = 16 << 20;

/// The largest `.proto` file: 4 MiB, several times the largest public API definitions.
pub const MAX_PROTO_BYTES: u64 = 4 << 20;

pub use tailguard_text::files::{open_regular, read_limited};
