//! The socket wrapper every backend connection runs on.
//!
//! It does three things the behaviour model needs from below hyper:
//! 1. **Pause**: while the backend is paused, reads and writes return `Pending` (nothing is read
//!    or answered, like a process stopped with SIGSTOP) and resume when the gate opens.
//! 2. **Nagle demo** (`--nagle`): a write holding the end of HTTP/1.1 headers and more after
//!    it is cut there, so a response leaves as two `write` calls (headers, then body). With
//!    Nagle's algorithm on, the second waits for the peer's delayed ACK: the ~40 ms of seed 001.
//!    HTTP/2 (gRPC) is cut the same way, after the first HEADERS frame, as a gRPC server that
//!    flushes a response's headers before its message does. On one multiplexed connection the
//!    wait then lasts until the client sends again (its next request carries the ACK), at most
//!    the delayed-ACK time: long at low rates, short at high ones, the seed's gRPC picture.
//!    The rest of a cut write is not cut again.
//! 3. **Reset**: when the connection is killed with [`Kill::Reset`], dropping the wrapper sets
//!    `SO_LINGER` to zero first, so the kernel sends RST instead of FIN.

use crate::gate::Gate;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// How a connection is being ended by the backend (0 in [`ConnCtl`]: not killed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kill {
    /// Close (FIN) without a response.
    Close = 1,
    /// Reset (RST).
    Reset = 2,
}

/// Per-connection control shared by the service (which decides) and the connection task
/// (which drops the connection when told).
#[derive(Debug, Default)]
pub struct ConnCtl {
    kill: AtomicU8,
    notify: Notify,
}

impl ConnCtl {
    /// Asks the connection task to end the connection this way.
    pub fn kill(&self, how: Kill) {
        self.kill.store(how as u8, Ordering::Release);
        self.notify.notify_one();
    }

    /// Resolves once [`ConnCtl::kill`] was called.
    pub async fn killed(&self) {
        self.notify.notified().await;
    }

    fn is_reset(&self) -> bool {
        self.kill.load(Ordering::Acquire) == Kill::Reset as u8
    }
}

type Wait = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A `TcpStream` gated by the backend's pause state.
pub struct GatedIo {
    stream: TcpStream,
    gate: Arc<Gate>,
    ctl: Arc<ConnCtl>,
    split_writes: bool,
    /// The last write was cut: the next one (its rest) goes out whole.
    just_cut: bool,
    read_wait: Option<Wait>,
    write_wait: Option<Wait>,
}

impl std::fmt::Debug for GatedIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatedIo")
            .field("stream", &self.stream)
            .field("split_writes", &self.split_writes)
            .finish_non_exhaustive()
    }
}

impl GatedIo {
    /// Wraps `stream`; `split_writes` turns on the two-part writes of the Nagle demo.
    pub fn new(stream: TcpStream, gate: Arc<Gate>, ctl: Arc<ConnCtl>, split_writes: bool) -> Self {
        GatedIo {
            stream,
            gate,
            ctl,
            split_writes,
            just_cut: false,
            read_wait: None,
            write_wait: None,
        }
    }
}

/// Ready when the gate is open; otherwise parks on `wait` until it opens.
fn poll_open(gate: &Arc<Gate>, wait: &mut Option<Wait>, cx: &mut Context<'_>) -> Poll<()> {
    if wait.is_none() && !gate.is_paused() {
        return Poll::Ready(());
    }
    let fut = wait.get_or_insert_with(|| {
        let gate = gate.clone();
        Box::pin(async move { gate.unpaused().await })
    });
    ready!(fut.as_mut().poll(cx));
    *wait = None;
    Poll::Ready(())
}

/// Where to cut a write for the Nagle demo, if more follows the cut: an HTTP/1.1 response just
/// after its head (the first `\r\n\r\n`); HTTP/2 frames just after the first HEADERS frame.
fn split_point(buf: &[u8]) -> Option<usize> {
    let end = if buf.starts_with(b"HTTP/") {
        buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4
    } else {
        h2_headers_end(buf)?
    };
    (end < buf.len()).then_some(end)
}

/// The end of the first complete HEADERS frame in a run of HTTP/2 frames. (An HTTP/1.1 write
/// cannot pass for frames: `HTT` read as a frame length is far beyond any frame size.)
fn h2_headers_end(buf: &[u8]) -> Option<usize> {
    const HEADERS: u8 = 0x1;
    let mut at = 0;
    while buf.len() >= at + 9 {
        let len =
            usize::from(buf[at]) << 16 | usize::from(buf[at + 1]) << 8 | usize::from(buf[at + 2]);
        let end = at + 9 + len;
        if end > buf.len() {
            return None;
        }
        if buf[at + 3] == HEADERS {
            return Some(end);
        }
        at = end;
    }
    None
}

impl AsyncRead for GatedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(poll_open(&this.gate, &mut this.read_wait, cx));
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for GatedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(poll_open(&this.gate, &mut this.write_wait, cx));
        let cut = (this.split_writes && !this.just_cut)
            .then(|| split_point(buf))
            .flatten();
        this.just_cut = cut.is_some();
        let part = match cut {
            Some(cut) => &buf[..cut],
            None => buf,
        };
        Pin::new(&mut this.stream).poll_write(cx, part)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(poll_open(&this.gate, &mut this.write_wait, cx));
        Pin::new(&mut this.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        // The Nagle demo needs hyper to hand over one flat buffer it can cut in two.
        !self.split_writes && self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

impl Drop for GatedIo {
    fn drop(&mut self) {
        if self.ctl.is_reset() {
            // Zero linger: the close below (the stream's own drop) sends RST and never blocks.
            if let Err(err) = self.stream.set_zero_linger() {
                tracing::debug!(%err, "could not set zero linger for a reset");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split_point;

    #[test]
    fn cuts_after_the_headers_only_when_a_body_follows() {
        assert_eq!(split_point(b"HTTP/1.1 200 OK\r\n\r\nbody"), Some(19));
        assert_eq!(split_point(b"HTTP/1.1 200 OK\r\n\r\n"), None);
        assert_eq!(split_point(b"just body bytes"), None);
        // HTTP/2: SETTINGS ack, HEADERS (3 bytes), DATA (2 bytes): cut after the HEADERS frame.
        let mut frames = vec![0, 0, 0, 4, 1, 0, 0, 0, 0];
        frames.extend([0, 0, 3, 1, 4, 0, 0, 0, 1, 0x88, 0x5f, 0x8b]);
        let head_end = frames.len();
        frames.extend([0, 0, 2, 0, 0, 0, 0, 0, 1, b'o', b'k']);
        assert_eq!(split_point(&frames), Some(head_end));
        assert_eq!(split_point(&frames[..head_end]), None, "nothing follows");
        assert_eq!(
            split_point(&frames[..head_end - 1]),
            None,
            "a partial frame"
        );
    }
}
