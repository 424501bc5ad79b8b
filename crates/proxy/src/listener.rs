//! The proxy listener: HTTP/1.1 and h2c (prior knowledge) on one port, or with TLS HTTP/1.1 and
//! h2 chosen by ALPN, every accepted socket with `TCP_NODELAY`, a header read timeout against
//! slow clients (which also bounds the TLS handshake), a cap on connections, and a graceful
//! drain on shutdown.
//!
//! hyper answers malformed requests with 400 and oversized headers with 431 itself; the proxy
//! never sees them.
//!
//! # Slow and idle clients
//! A connection with no request in flight (from its headers' arrival to the end of its
//! response body) for `limits.header_read_timeout` is closed: a client that opens a connection
//! or finishes an exchange must complete its next request's headers within that time. One timer
//! per connection, re-armed only when it fires, does this (an HTTP/2 connection is closed with
//! GOAWAY); hyper's own header read timeout
//! would arm and cancel a timer for every request (about 6% of the proxy's CPU per request at
//! 25,000 req/s).

use crate::config::Limits;
use crate::forward;
use crate::upstream::ProxyBody;
use crate::Shared;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tailguard_http::tcp::{self, Nagle};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

/// How long an idle connection's graceful close may take before it is cut.
const IDLE_GRACE: Duration = Duration::from_millis(500);

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
        let (tls, stop) = (shared.tls(), shutdown.clone());
        let shared = Arc::clone(&shared);
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
    let client = Arc::new(forward::Peer::new(peer, limits.header_read_timeout));
    let activity = Arc::new(Activity::new());
    let on_request = Arc::clone(&activity);
    let service = service_fn(move |req| {
        let (shared, client) = (Arc::clone(&shared), Arc::clone(&client));
        let in_flight = InFlight::start(&on_request);
        async move {
            let resp = forward::handle(shared, &client, req).await;
            Ok::<_, Infallible>(resp.map(|body| Tracked {
                body,
                _in_flight: in_flight,
            }))
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().writev(false);
    builder.http2().timer(TokioTimer::new());
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let limit = limits.header_read_timeout;
    let watchdog = tokio::time::sleep(limit);
    tokio::pin!(watchdog);
    let result = loop {
        tokio::select! {
            r = conn.as_mut() => break r,
            _ = stopped(&mut shutdown) => {
                conn.as_mut().graceful_shutdown();
                break conn.await;
            }
            () = watchdog.as_mut() => {
                let now = Instant::now();
                match activity.idle_for(now) {
                    Some(idle) if idle >= limit => {
                        tracing::debug!(%peer, "no request within the header read timeout");
                        // Politely where the protocol allows: HTTP/2 (a gRPC channel left idle)
                        // gets GOAWAY, so its client reconnects without seeing an error. A
                        // client still sending its headers gets a short grace, then is cut.
                        conn.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(IDLE_GRACE, conn.as_mut()).await;
                        return;
                    }
                    Some(idle) => watchdog.as_mut().reset(now + (limit - idle)),
                    None => watchdog.as_mut().reset(now + limit),
                }
            }
        }
    };
    if let Err(err) = result {
        tracing::debug!(%err, %peer, "connection ended with an error");
    }
}

/// Requests in flight on one downstream connection, and when the last one ended.
#[derive(Debug)]
struct Activity {
    opened: Instant,
    in_flight: AtomicUsize,
    /// Nanoseconds from `opened` to the end of the last request.
    idle_since: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
        }
    }

    /// How long the connection has had no request in flight (`None`: one is in flight).
    fn idle_for(&self, now: Instant) -> Option<Duration> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let since = Duration::from_nanos(self.idle_since.load(Ordering::Acquire));
        Some(now.saturating_duration_since(self.opened + since))
    }
}

/// One request in flight, from its headers' arrival until its response body is done with.
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        Self(Arc::clone(activity))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        let since = a.opened.elapsed().as_nanos();
        a.idle_since
            .store(u64::try_from(since).unwrap_or(u64::MAX), Ordering::Release);
        a.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that holds its request's [`InFlight`] until hyper is done with it.
#[derive(Debug)]
struct Tracked {
    body: ProxyBody,
    _in_flight: InFlight,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = crate::upstream::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Resolves once `shutdown` is true (or its sender is gone).
pub async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}
