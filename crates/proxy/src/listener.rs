//! The proxy listener: HTTP/1.1 and h2c (prior knowledge) on one port, or with TLS HTTP/1.1 and
//! h2 chosen by ALPN, every accepted socket with `TCP_NODELAY`, a header read timeout against
//! slow clients (which also bounds the TLS handshake), a cap on connections, and a graceful
//! drain on shutdown.
//!
//! hyper answers malformed requests with 400 and oversized headers with 431 itself; the proxy
//! never sees them.

use crate::config::Limits;
use crate::forward;
use crate::Shared;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use tailguard_http::tcp::{self, Nagle};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;

/// Accepts connections until `shutdown` turns true, then waits up to `limits.drain` for the
/// open connections to finish their requests.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    limits: Limits,
    tls: Option<TlsAcceptor>,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let accepted = tokio::select! {
            a = tcp::accept(&listener, Nagle::Off) => a,
            _ = stopped(&mut shutdown) => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(err) => {
                tracing::debug!(%err, "accept failed");
                continue;
            }
        };
        let (shared, stop, tls) = (Arc::clone(&shared), shutdown.clone(), tls.clone());
        tokio::spawn(async move {
            match tls {
                None => connection(stream, peer, shared, limits, stop).await,
                Some(acceptor) => {
                    let handshake = acceptor.accept(stream);
                    match tokio::time::timeout(limits.header_read_timeout, handshake).await {
                        Ok(Ok(tls)) => connection(tls, peer, shared, limits, stop).await,
                        Ok(Err(err)) => tracing::debug!(%err, %peer, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let drained = tokio::time::timeout(limits.drain, slots.acquire_many(all)).await;
    if drained.is_err() {
        tracing::warn!("drain timed out with connections still open");
    }
}

async fn connection<S>(
    stream: S,
    peer: SocketAddr,
    shared: Arc<Shared>,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let client = Arc::new(forward::Peer::new(peer));
    let service = service_fn(move |req| {
        let (shared, client) = (Arc::clone(&shared), Arc::clone(&client));
        async move { Ok::<_, Infallible>(forward::handle(shared, &client, req).await) }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .writev(false)
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = stopped(&mut shutdown) => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(err) = result {
        tracing::debug!(%err, %peer, "connection ended with an error");
    }
}

/// Resolves once `shutdown` is true (or its sender is gone).
pub async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}
