//! Serving one accepted connection with HTTP/1.1 or HTTP/2, detected from the first bytes.

use hyper::body::Incoming;
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};

/// Serves HTTP/1.1 (keep-alive) and HTTP/2 (prior knowledge, or over TLS after ALPN) on one
/// connection (TCP or TLS) until the peer closes it. Errors are the peer's doing (a malformed
/// request, a reset) and are logged at debug level, not returned: one bad client must not
/// disturb the server.
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
    let builder = auto::Builder::new(TokioExecutor::new());
    if let Err(err) = builder.serve_connection(io, service).await {
        tracing::debug!(%err, "connection ended with an error");
    }
}
