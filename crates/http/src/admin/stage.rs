//! Where a connection is with its first request, as the accept loop sees it from outside the
//! connection's task: what the probe lane ([`super::lane`]) decides which connection to close
//! by, and what tells a connection's watchdog that a request came.
//!
//! The connection's task sets it (its socket when the first bytes arrive, its service when a
//! head is complete); the accept loop reads it. Both run on the admin server's one thread, so
//! a relaxed atomic is enough: it is shared only because tasks must be `Send`.
//!
//! ```text
//! Waiting --first bytes--> Partial --head complete--> Answering (or Refusing)
//! ```

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Where a connection is with its first request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Nothing has arrived.
    Waiting,
    /// Part of a head has arrived, not all of it. A probe's head comes in one write, so it is
    /// here only for as long as its task takes to parse it.
    Partial,
    /// A head came that is not a health check (in the lane); its refusal waits for its turn.
    Refusing,
    /// A request is being answered (in the lane: a health check).
    Answering,
}

/// A connection's [`Stage`], shared by its task and the accept loop.
#[derive(Clone, Debug, Default)]
pub(crate) struct Progress(Arc<AtomicU8>);

impl Progress {
    pub(crate) fn set(&self, stage: Stage) {
        self.0.store(stage as u8, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> Stage {
        match self.0.load(Ordering::Relaxed) {
            0 => Stage::Waiting,
            1 => Stage::Partial,
            2 => Stage::Refusing,
            _ => Stage::Answering,
        }
    }

    /// Whether a whole head has come.
    pub(crate) fn asked(&self) -> bool {
        matches!(self.get(), Stage::Refusing | Stage::Answering)
    }
}

/// A socket that marks its connection [`Stage::Partial`] when its first bytes arrive.
#[derive(Debug)]
pub(crate) struct Watched {
    stream: TcpStream,
    progress: Progress,
}

impl Watched {
    pub(crate) fn new(stream: TcpStream, progress: Progress) -> Self {
        Self { stream, progress }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before && self.progress.get() == Stage::Waiting {
            self.progress.set(Stage::Partial);
        }
        read
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{self, Nagle};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Waiting until the first bytes are read, then Partial; a stage set past it stays.
    #[tokio::test]
    async fn the_first_bytes_read_make_a_connection_partial() {
        let listener = tcp::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let mut client = tcp::connect(listener.local_addr().unwrap(), Nagle::Off)
            .await
            .unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        let progress = Progress::default();
        let mut watched = Watched::new(stream, progress.clone());
        assert_eq!(progress.get(), Stage::Waiting);
        client.write_all(b"GET").await.unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(watched.read(&mut buf).await.unwrap(), 3);
        assert_eq!(progress.get(), Stage::Partial);
        progress.set(Stage::Answering);
        client.write_all(b" /").await.unwrap();
        assert_eq!(watched.read(&mut buf).await.unwrap(), 2);
        assert!(progress.asked());
    }
}
