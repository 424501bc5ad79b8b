//! Reading a file a user names: regular files only, within a stated size, so a wrong path
//! (`/dev/zero`, a FIFO, a disk image) costs an error, not the memory or a hang.

use std::io::Read as _;
use std::path::Path;

/// Opens `path` for reading if it is a regular file: a FIFO would block the open until a
/// writer came, and a device (`/dev/zero`) never ends.
///
/// # Errors
/// The OS error, or [`std::io::ErrorKind::InvalidInput`] for a file that is not regular.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a pipe or a device would never end, or block)",
        ));
    }
    std::fs::File::open(path)
}

/// Reads `path`, a regular file, refusing it after `max` bytes.
///
/// # Errors
/// The OS error, a file that is not regular, or [`std::io::ErrorKind::InvalidData`] naming
/// the limit.
pub fn read_limited(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_regular(path)?.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {max} bytes"),
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_or_a_device_is_refused_without_blocking() {
        let fifo = std::env::temp_dir().join(format!("tg-fifo-{}", std::process::id()));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = read_limited(&fifo, 10).unwrap_err();
        std::fs::remove_file(&fifo).unwrap();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
        let err = read_limited(Path::new("/dev/zero"), 10).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}
