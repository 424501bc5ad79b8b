//! A connection whose first bytes were read before hyper took it over, handed back in front.
//!
//! Checking the HTTP/2 preface ([`crate::preface`]) and taking over an `Upgrade: h2c`
//! connection ([`crate::h2c`]) both read from the socket before hyper does; [`Rewind`] replays
//! those bytes (and, for h2c, a synthetic frame) to hyper as if they were still unread.

use bytes::Bytes;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Reads `prefix` first, then `inner`; writes go straight to `inner`.
#[derive(Debug)]
pub struct Rewind<I> {
    prefix: Bytes,
    inner: I,
}

impl<I> Rewind<I> {
    /// `inner`, with `prefix` to be read before anything from it.
    pub fn new(prefix: Bytes, inner: I) -> Self {
        Rewind { prefix, inner }
    }

    /// The bytes not yet read from the prefix, and the connection behind them.
    pub fn into_parts(self) -> (Bytes, I) {
        (self.prefix, self.inner)
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Rewind<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.prefix.is_empty() {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        let n = this.prefix.len().min(buf.remaining());
        buf.put_slice(&this.prefix.split_to(n));
        if this.prefix.is_empty() {
            // An empty slice still holds the whole buffer it was cut from.
            this.prefix = Bytes::new();
        }
        Poll::Ready(Ok(()))
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Rewind<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    // Forwarded, not left to the defaults: h2 gathers frames with vectored writes when the
    // socket takes them, and `tailguard serve --nagle` turns them off on purpose.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn replays_the_prefix_then_reads_on_and_writes_through() {
        let (near, mut far) = tokio::io::duplex(64);
        far.write_all(b" world").await.unwrap();
        far.shutdown().await.unwrap();
        let mut io = Rewind::new(Bytes::from_static(b"hello"), near);
        let mut small = [0u8; 3];
        io.read_exact(&mut small).await.unwrap();
        assert_eq!(&small, b"hel");
        let mut rest = String::new();
        io.read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, "lo world");
        io.write_all(b"out").await.unwrap();
        let mut got = [0u8; 3];
        far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"out");
    }
}
