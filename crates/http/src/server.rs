//! The server presets: how every tailguard server speaks HTTP/1.1 and HTTP/2 on a connection
//! it has accepted (and checked, [`preface`](crate::preface)). The accept loops stay with
//! their owners, since each has its own life: `serve`'s backends pause and go down, the
//! proxy caps connections and drains, the [admin server](crate::admin) shuts down gracefully.

use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};

/// A builder for HTTP/1.1 and HTTP/2 (told apart by the first bytes) with tailguard's
/// settings: HTTP/1.1 responses written from one flat buffer (for small responses a copy is
/// cheaper than `writev`), HTTP/2 with hyper's timer. No header read timeout here: the
/// proxy's listener watches idleness itself, with one timer per connection.
pub fn builder() -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().writev(false);
    builder.http2().timer(TokioTimer::new());
    builder
}

/// A builder for HTTP/1.1 only, with [`builder`]'s HTTP/1.1 settings: for a connection whose
/// opening [`preface::open`](crate::preface::open) has already read. A server that knows the
/// protocol saves hyper-util's own look at the first bytes, which hands HTTP/1.1's parser the
/// first 24 bytes of the request alone and so makes it read twice and double its 8 KiB buffer.
pub fn h1_builder() -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder.writev(false);
    builder
}

/// A builder for HTTP/2 only, with [`builder`]'s HTTP/2 settings: for a connection already
/// known to be HTTP/2 (after `Upgrade: h2c`, or [`preface::open`](crate::preface::open)).
pub fn h2_builder() -> http2::Builder<TokioExecutor> {
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder.timer(TokioTimer::new());
    builder
}

/// Serves HTTP/1.1 (keep-alive) and HTTP/2 (prior knowledge, or over TLS after ALPN) on one
/// connection (TCP or TLS) with [`builder`]'s settings until the peer closes it. Errors are
/// the peer's doing (a malformed request, a reset) and are logged at debug level, not
/// returned: one bad client must not disturb the server.
pub async fn serve_connection<I, S, B>(stream: I, service: S)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let io = TokioIo::new(stream);
    if let Err(err) = builder().serve_connection(io, service).await {
        tracing::debug!(%err, "connection ended with an error");
    }
}
