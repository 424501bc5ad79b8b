//! Reading the files the proxy is configured with, bounded: the configuration itself, file
//! discovery's endpoint lists, and the TLS certificate and key all come through [`read`] or
//! [`read_async`], which
//!
//! 1. refuse anything but a regular file (a FIFO, a device, a directory, a socket), naming
//!    it, before opening and again on the opened file (the path may be swapped between);
//! 2. open without blocking (`O_NONBLOCK`: opening a FIFO for reading otherwise waits for a
//!    writer, for ever);
//! 3. read at most a stated number of bytes;
//! 4. give up after [`READ_TIMEOUT`]: the read runs on a thread of its own, and a caller
//!    that stops waiting leaves it behind (a hung network file system blocks any system
//!    call; its thread ends when the call does). At most [`MAX_ABANDONED`] reads may be left
//!    behind at once; past that, reads are refused until one ends, so a hung file polled by
//!    discovery costs a few threads, not one per poll.
//!
//! Before this, a FIFO as the configuration path wedged reload for good, and since the read
//! ran on Tokio's blocking pool, which a runtime waits for when it shuts down, SIGTERM too.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The longest a caller waits for one file.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Reads still running after their caller gave up, at most.
pub const MAX_ABANDONED: usize = 4;

static ABANDONED: AtomicUsize = AtomicUsize::new(0);

/// Why a configuration file was not read: the file, then what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct FileError {
    /// The file.
    pub path: String,
    /// What is wrong with it.
    pub problem: Problem,
}

/// What is wrong with a configuration file.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// A FIFO, device, directory or socket (the words say which).
    #[error("not a regular file ({0}); configuration is read from regular files only")]
    NotRegular(&'static str),
    /// Larger than the caller's limit.
    #[error("larger than {0} bytes")]
    TooLarge(u64),
    /// Not read within [`READ_TIMEOUT`].
    #[error("not read within {}s (a hung file system?)", READ_TIMEOUT.as_secs())]
    TimedOut,
    /// [`MAX_ABANDONED`] earlier reads are still stuck.
    #[error("not read: {MAX_ABANDONED} earlier reads of configuration files are still stuck")]
    Stuck,
    /// The operating system's error.
    #[error(transparent)]
    Io(std::io::Error),
}

fn fail(path: &Path, problem: Problem) -> FileError {
    FileError {
        path: path.display().to_string(),
        problem,
    }
}

/// Reads `path` (at most `max` bytes), blocking the calling thread for [`READ_TIMEOUT`] at
/// most. For code off the runtime; async code uses [`read_async`].
///
/// # Errors
/// [`FileError`], naming the file.
pub fn read(path: &Path, max: u64) -> Result<Vec<u8>, FileError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let read = spawn(path, max, move |r| {
        let _ = tx.send(r);
    })?;
    match rx.recv_timeout(READ_TIMEOUT) {
        Ok(result) => result,
        Err(_) => Err(read.abandon(path)),
    }
}

/// [`read`] for async callers: the runtime's thread is never blocked.
///
/// # Errors
/// [`FileError`], naming the file.
pub async fn read_async(path: &Path, max: u64) -> Result<Vec<u8>, FileError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let read = spawn(path, max, move |r| {
        let _ = tx.send(r);
    })?;
    match tokio::time::timeout(READ_TIMEOUT, rx).await {
        Ok(Ok(result)) => result,
        // The reader thread ended without an answer: it panicked.
        Ok(Err(_)) => Err(io_error(path, std::io::Error::other("the reader failed"))),
        Err(_) => Err(read.abandon(path)),
    }
}

/// One read on its own thread: running, done, or abandoned by its caller.
struct Reading(Arc<AtomicU8>);

const RUNNING: u8 = 0;
const DONE: u8 = 1;
const LEFT: u8 = 2;

impl Reading {
    /// The caller stops waiting: counted until the thread ends.
    fn abandon(&self, path: &Path) -> FileError {
        // Counted before it is marked, so the thread's uncount (on seeing the mark) never
        // comes first.
        ABANDONED.fetch_add(1, Ordering::AcqRel);
        if self
            .0
            .compare_exchange(RUNNING, LEFT, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // It ended meanwhile.
            ABANDONED.fetch_sub(1, Ordering::AcqRel);
        }
        tracing::warn!(path = %path.display(), "a configuration file read is stuck; left behind");
        fail(path, Problem::TimedOut)
    }
}

fn spawn(
    path: &Path,
    max: u64,
    reply: impl FnOnce(Result<Vec<u8>, FileError>) + Send + 'static,
) -> Result<Reading, FileError> {
    if ABANDONED.load(Ordering::Acquire) >= MAX_ABANDONED {
        return Err(fail(path, Problem::Stuck));
    }
    let state = Arc::new(AtomicU8::new(RUNNING));
    let theirs = Arc::clone(&state);
    let owned: PathBuf = path.to_owned();
    std::thread::Builder::new()
        .name("tg-config-read".into())
        .spawn(move || {
            let result = read_now(&owned, max);
            let was = theirs.swap(DONE, Ordering::AcqRel);
            if was == LEFT {
                ABANDONED.fetch_sub(1, Ordering::AcqRel);
            }
            reply(result);
        })
        .map_err(|e| io_error(path, e))?;
    Ok(Reading(state))
}

/// Steps 1 to 3 of the module docs, on the calling thread.
fn read_now(path: &Path, max: u64) -> Result<Vec<u8>, FileError> {
    regular(
        path,
        &std::fs::metadata(path).map_err(|e| io_error(path, e))?,
    )?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io_error(path, e))?;
    regular(path, &file.metadata().map_err(|e| io_error(path, e))?)?;
    let mut bytes = Vec::new();
    Read::take(&file as &File, max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, e))?;
    if bytes.len() as u64 > max {
        return Err(fail(path, Problem::TooLarge(max)));
    }
    Ok(bytes)
}

fn regular(path: &Path, meta: &Metadata) -> Result<(), FileError> {
    let t = meta.file_type();
    let kind = if t.is_file() {
        return Ok(());
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a file"
    };
    Err(fail(path, Problem::NotRegular(kind)))
}

fn io_error(path: &Path, source: std::io::Error) -> FileError {
    fail(path, Problem::Io(source))
}

#[cfg(test)]
mod tests;
