//! Files a run reads at start (`--data @FILE`, `@FILE` of URLs, `--proto`), read within a
//! stated size so a wrong path (`/dev/zero`, a disk image) costs an error, not the memory.

use std::io::Read as _;
use std::path::Path;

/// The largest request body (`--data @FILE`): 64 MiB.
pub const MAX_BODY_BYTES: u64 = 64 << 20;

/// The largest file of URLs: 16 MiB.
pub const MAX_URL_FILE_BYTES: u64 = 16 << 20;

/// The largest `.proto` file: 4 MiB, several times the largest public API definitions.
pub const MAX_PROTO_BYTES: u64 = 4 << 20;

/// Reads `path`, refusing it after `max` bytes.
///
/// # Errors
/// The OS error, or [`std::io::ErrorKind::InvalidData`] naming the limit.
pub fn read_limited(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {max} bytes"),
        ));
    }
    Ok(bytes)
}
