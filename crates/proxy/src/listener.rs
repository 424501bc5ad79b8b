//! The proxy listener: HTTP/1.1 and h2c (prior knowledge) on one port, every accepted socket
//! with `TCP_NODELAY`, a header read timeout against slow clients, a cap on connections, and a
//! graceful drain on shutdown.
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
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

/// Accepts connections until `shutdown` turns true, then waits up to `limits.drain` for the
/// open connections to finish their requests.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    limits: Limits,
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
        let (shared, stop) = (Arc::clone(&shared), shutdown.clone());
        tokio::spawn(async move {
            connection(stream, peer, shared, limits, stop).await;
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

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) {
    let service = service_fn(move |req| {
        let shared = Arc::clone(&shared);
        async move { Ok::<_, Infallible>(forward::handle(shared, peer, req).await) }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
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
