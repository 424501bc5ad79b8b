//! The proxy listener: HTTP/1.1 and h2c (prior knowledge or `Upgrade: h2c`) on one port, or with
//! TLS HTTP/1.1 and h2 chosen by ALPN, every accepted socket with `TCP_NODELAY`, a header read
//! timeout against slow clients (which also bounds the TLS handshake), a cap on connections,
//! and a graceful drain on shutdown.
//!
//! HTTP/1.1 over cleartext TCP is served by the lean server ([`lean`], `limits.h1Server`),
//! which hands any request it does not serve (malformed, unusual, over the limit) to hyper's
//! server with the bytes read so far; TLS, HTTP/2 and `--h1-server hyper` are hyper's alone.
//! hyper answers malformed requests with 400 and oversized headers with 431 itself; the proxy
//! never sees them. A bad HTTP/2 preface, which hyper lets pass, is refused with GOAWAY by
//! [`preface::open`] before hyper sees the connection, and a first line that is neither an
//! HTTP/1.x request line nor the preface is closed unanswered (an HTTP/2 server must close on
//! an invalid preface, and one port cannot tell a broken preface from garbage; h2spec 3.5/2).
//!
//! # Slow and idle clients
//! A connection with no request in flight (from its headers' arrival to the end of its
//! response body) for `limits.header_read_timeout` is closed: a client that opens a connection
//! or finishes an exchange must complete its next request's headers within that time. One timer
//! per connection, re-armed only when it fires, does this (an HTTP/2 connection is closed with
//! GOAWAY); hyper's own header read timeout
//! would arm and cancel a timer for every request (about 6% of the proxy's CPU per request at
//! 25,000 req/s).

use crate::body::ProxyBody;
use crate::config::{H1Server, Limits};
use crate::forward;
use crate::response_body::ResponseBody;
use crate::shared::Shared;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tailguard_http::fds::AcceptBackoff;
use tailguard_http::h1::server as lean;
use tailguard_http::preface::{self, Protocol};
use tailguard_http::quiet::Quiet;
use tailguard_http::rewind::Rewind;
use tailguard_http::tcp::{self, Nagle};
use tailguard_http::{h2c, server};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

/// How long an idle connection's graceful close may take before it is cut.
const IDLE_GRACE: Duration = Duration::from_millis(500);

/// Accepts up to `max_connections` connections at a time until `shutdown` turns true, then
/// waits up to `limits.drain` for the open connections to finish their requests. When
/// descriptors run out, accepting pauses ([`AcceptBackoff`]) rather than spins.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    limits: Limits,
    max_connections: usize,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(max_connections));
    let mut backoff = AcceptBackoff::default();
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
                let pause = backoff.failed(&err, Instant::now());
                drop(permit);
                if pause.is_zero() {
                    continue;
                }
                tokio::select! {
                    () = tokio::time::sleep(pause) => continue,
                    _ = stopped(&mut shutdown) => break,
                }
            }
        };
        backoff.accepted();
        let (tls, stop) = (shared.tls(), shutdown.clone());
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            match tls {
                None => connection(stream, peer, shared, limits, stop).await,
                // Boxed, as every large state of a connection is ([`connection`]): a task's
                // future is as large as its largest state, and rustls's is several KiB.
                Some(acceptor) => {
                    Box::pin(async move {
                        let handshake = acceptor.accept(stream);
                        match tokio::time::timeout(limits.header_read_timeout, handshake).await {
                            Ok(Ok(tls)) => connection(tls, peer, shared, limits, stop).await,
                            Ok(Err(err)) => tracing::debug!(%err, %peer, "TLS handshake failed"),
                            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                        }
                    })
                    .await
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
    let drained = tokio::time::timeout(limits.drain, slots.acquire_many(all)).await;
    if drained.is_err() {
        tracing::warn!("drain timed out with connections still open");
    }
}

/// A downstream transport, and whether `Upgrade: h2c` may switch it to HTTP/2: only cleartext
/// TCP (RFC 7540 section 3.2); over TLS, ALPN chooses the protocol.
trait Transport: AsyncRead + AsyncWrite + Unpin + Send + Sized + 'static {
    const CLEARTEXT: bool;

    /// The bytes read ahead and the TCP connection itself, for the lean HTTP/1.1 server
    /// (cleartext only); otherwise the connection back.
    fn tcp(io: Rewind<Self>) -> Result<(Bytes, TcpStream), Rewind<Self>> {
        Err(io)
    }
}

impl Transport for TcpStream {
    const CLEARTEXT: bool = true;

    fn tcp(io: Rewind<Self>) -> Result<(Bytes, TcpStream), Rewind<Self>> {
        Ok(io.into_parts())
    }
}

impl Transport for tokio_rustls::server::TlsStream<TcpStream> {
    const CLEARTEXT: bool = false;
}

/// Serves one downstream connection:
///
/// 1. Check its opening ([`preface::open`]): a bad HTTP/2 preface is refused with GOAWAY,
///    which hyper would not do; a first line that is not HTTP at all is closed unanswered.
///    Like any slow client, one that has not opened by the header read timeout is closed.
/// 2. Serve it for the protocol it opened with, held to the header read timeout and shutdown:
///    HTTP/1.1 over cleartext TCP with the lean server ([`lean::serve`]) until a request it
///    does not serve hands the connection to hyper's; otherwise with hyper's server. (hyper-util's server for both would read the
///    opening again, handing HTTP/1.1's parser the first 24 bytes alone: a second read for
///    every connection's first request, and a read buffer doubled to 16 KiB for its life.)
/// 3. If a request switched it to HTTP/2 (`Upgrade: h2c`, answered `101` by [`switch`]), go on
///    serving it as HTTP/2 under the same watchdog, the request being stream 1.
///
/// Each step's state is boxed, so the task holds only what the step it is in needs: inline, a
/// connection's future was as large as all of them together (9.3 KiB of the 25 KiB an idle
/// keep-alive connection cost, with the TLS handshake's), boxed about 1.5 KiB plus hyper's
/// connection and its buffers.
async fn connection<S: Transport>(
    stream: S,
    peer: SocketAddr,
    shared: Arc<Shared>,
    limits: Limits,
    shutdown: watch::Receiver<bool>,
) {
    let limit = limits.header_read_timeout;
    let mut watchdog = Watchdog {
        peer,
        activity: Arc::new(Activity::new()),
        limit,
        shutdown,
    };
    let Some((protocol, stream)) = Box::pin(watchdog.opening(stream)).await else {
        return;
    };
    let client = Arc::new(forward::Peer::new(peer, &limits));
    let max_head = limits.max_request_header_bytes;
    let stream = if protocol == Protocol::Http1 && limits.h1_server == H1Server::Lean {
        match S::tcp(stream) {
            Ok((prefix, tcp)) => {
                // What the lean server calls for each request: the same stages as
                // [`service`]. Written here, not returned by a function, so its future need not
                // be boxed on its own: the lean server boxes each exchange whole, this inside.
                let (shared_, client_) = (Arc::clone(&shared), Arc::clone(&client));
                let on_request = Arc::clone(&watchdog.activity);
                let handler = move |req: Request<lean::RequestBody>| {
                    let (shared, client) = (Arc::clone(&shared_), Arc::clone(&client_));
                    let in_flight = InFlight::start(&on_request);
                    async move {
                        let resp = forward::handle(shared, &client, req, &forward::Stages).await;
                        resp.map(|body| Tracked {
                            body,
                            _in_flight: in_flight,
                        })
                    }
                };
                let settings = lean::Settings { max_head };
                if let Some(rest) = Box::pin(watchdog.lean(tcp, prefix, settings, handler)).await {
                    let service = service(shared, client, &watchdog.activity, S::CLEARTEXT);
                    Box::pin(serve_h1(rest, &mut watchdog, service, max_head)).await;
                }
                return;
            }
            Err(stream) => stream,
        }
    } else {
        stream
    };
    let service = service(shared, client, &watchdog.activity, S::CLEARTEXT);
    if protocol == Protocol::Http2 {
        let conn = Box::pin(h2(max_head).serve_connection(TokioIo::new(stream), service.0));
        Box::pin(watchdog.drive(conn, |c| c.get_mut().as_mut().graceful_shutdown())).await;
        return;
    }
    Box::pin(serve_h1(stream, &mut watchdog, service, max_head)).await;
}

/// The service hyper's servers call for each request on a connection: forwarded through the
/// stages, or switched to HTTP/2 by `Upgrade: h2c` where the transport allows it (`h2c`); and
/// where such a switch is left for [`serve_h1`].
fn service(
    shared: Arc<Shared>,
    client: Arc<forward::Peer>,
    activity: &Arc<Activity>,
    h2c: bool,
) -> (impl HyperService, Upgrades) {
    let on_request = Arc::clone(activity);
    let upgrades: Upgrades = Arc::default();
    let slot = h2c.then(|| Arc::clone(&upgrades));
    let service = service_fn(move |mut req: Request<Incoming>| {
        let (shared, client) = (Arc::clone(&shared), Arc::clone(&client));
        let in_flight = InFlight::start(&on_request);
        let switched = slot.as_deref().and_then(|slot| switch(&mut req, slot));
        async move {
            let resp = match switched {
                Some(resp) => resp.map(ResponseBody::local),
                // Boxed: the request's whole state (about 2.8 KB) then stays where it was
                // built instead of being copied into hyper's task for each HTTP/2 stream.
                None => Box::pin(forward::handle(shared, &client, req, &forward::Stages)).await,
            };
            Ok::<_, Infallible>(resp.map(|body| Tracked {
                body,
                _in_flight: in_flight,
            }))
        }
    });
    (service, upgrades)
}

/// Where an `Upgrade: h2c` switch is left for [`serve_h1`] to finish.
type Upgrades = Arc<Mutex<Option<h2c::Upgrade>>>;

/// What [`service`] gives hyper's servers.
trait HyperService:
    hyper::service::Service<
        Request<Incoming>,
        Response = Response<Tracked>,
        Error = Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + 'static
{
}

impl<T> HyperService for T where
    T: hyper::service::Service<
            Request<Incoming>,
            Response = Response<Tracked>,
            Error = Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + 'static
{
}

/// HTTP/2 with the proxy's settings, for a connection that speaks it from its opening or
/// after h2c.
fn h2(max_head: usize) -> hyper::server::conn::http2::Builder<hyper_util::rt::TokioExecutor> {
    let mut h2 = server::h2_builder();
    h2.max_header_list_size(u32::try_from(max_head).unwrap_or(u32::MAX));
    h2
}

/// Serves `io` with hyper's HTTP/1.1 server, then, if a request switched it to HTTP/2
/// (`Upgrade: h2c`), with hyper's HTTP/2 server.
async fn serve_h1<I>(
    io: I,
    watchdog: &mut Watchdog,
    (service, upgrades): (impl HyperService, Upgrades),
    max_head: usize,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut h1 = server::h1_builder();
    // hyper's HTTP/1.1 read buffer holds the request line and headers; its minimum is 8 KiB,
    // the floor of `limits.maxRequestHeaderBytes` (`config::MAX_REQUEST_HEADER_BYTES_RANGE`).
    h1.max_buf_size(max_head);
    let conn = h1.serve_connection(TokioIo::new(io), service.clone());
    let conn = Box::pin(conn.with_upgrades());
    if !watchdog
        .drive(conn, |c| c.get_mut().as_mut().graceful_shutdown())
        .await
    {
        return;
    }
    if let Some(io) = upgraded(&upgrades, watchdog.limit, watchdog.peer).await {
        let conn = Box::pin(h2(max_head).serve_connection(TokioIo::new(io), service));
        watchdog
            .drive(conn, |c| c.get_mut().as_mut().graceful_shutdown())
            .await;
    }
}

/// The connection a `101` switched to HTTP/2 ([`switch`]) once the client has sent its
/// preface, or `None` when there was no switch or the client did not follow it up.
async fn upgraded(
    upgrades: &Mutex<Option<h2c::Upgrade>>,
    limit: Duration,
    peer: SocketAddr,
) -> Option<Rewind<TokioIo<Upgraded>>> {
    let upgrade = upgrades
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()?;
    // The client sends its preface as soon as it reads the 101: as slow as a request's headers
    // at most.
    match tokio::time::timeout(limit, upgrade.io()).await {
        Ok(Ok(io)) => Some(io),
        Ok(Err(err)) => {
            tracing::debug!(%err, %peer, "h2c upgrade failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "no HTTP/2 preface after 101");
            None
        }
    }
}

/// Answers an `Upgrade: h2c` request with `101`, leaving the switch in `slot` for
/// [`connection`] to finish once hyper has written the answer. `None` for any other request,
/// and for one with a body: it is forwarded over HTTP/1.1, without its upgrade headers.
fn switch(
    req: &mut Request<Incoming>,
    slot: &Mutex<Option<h2c::Upgrade>>,
) -> Option<Response<ProxyBody>> {
    let (resp, upgrade) = h2c::accept(req)?;
    *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(upgrade);
    Some(resp.map(|()| Empty::new().map_err(|never| match never {}).boxed()))
}

/// What a downstream connection is held to while hyper serves it: requests' headers within
/// the header read timeout of the last activity, and a graceful end on shutdown.
#[derive(Debug)]
struct Watchdog {
    peer: SocketAddr,
    activity: Arc<Activity>,
    limit: Duration,
    shutdown: watch::Receiver<bool>,
}

impl Watchdog {
    /// The connection with its opening checked, and the protocol it opened with; `None` when
    /// it was refused, did not open within the header read timeout, or the proxy is shutting
    /// down.
    async fn opening<S: Transport>(&mut self, stream: S) -> Option<(Protocol, Rewind<S>)> {
        let deadline = self.activity.opened + self.limit;
        tokio::select! {
            checked = tokio::time::timeout_at(deadline, preface::open(stream, preface::NotHttp::Close)) => match checked {
                Ok(Ok(opened)) => Some(opened),
                Ok(Err(err)) => {
                    tracing::debug!(%err, peer = %self.peer, "connection refused at its opening");
                    None
                }
                Err(_) => {
                    tracing::debug!(peer = %self.peer, "no request within the header read timeout");
                    None
                }
            },
            _ = stopped(&mut self.shutdown) => None,
        }
    }

    /// Serves the connection with the lean HTTP/1.1 server; the connection back when a request
    /// it does not serve came (for hyper's server to go on with), `None` when it is done.
    async fn lean<H, F>(
        &mut self,
        tcp: TcpStream,
        prefix: Bytes,
        settings: lean::Settings,
        handler: H,
    ) -> Option<Rewind<TcpStream>>
    where
        H: FnMut(Request<lean::RequestBody>) -> F + Send,
        F: Future<Output = Response<Tracked>> + Send,
    {
        let closing = lean::Closing::default();
        let mut conn = Lean {
            serving: Box::pin(lean::serve(tcp, prefix, settings, &closing, handler)),
            closing: &closing,
            handed: None,
        };
        self.drive(&mut conn, |c| c.closing.ask()).await;
        conn.handed
    }

    /// Drives `conn` to its end; true when it ended by itself (a switch to HTTP/2 may follow),
    /// false when it was ended for shutdown or idleness. One timer, re-armed only when it fires,
    /// watches idleness ([module docs](self)).
    async fn drive<C, E>(&mut self, conn: C, graceful: fn(Pin<&mut C>)) -> bool
    where
        C: Future<Output = Result<(), E>>,
        E: std::fmt::Display,
    {
        tokio::pin!(conn);
        let timer = tokio::time::sleep_until(self.activity.deadline(Instant::now(), self.limit));
        tokio::pin!(timer);
        // The shutdown notice is polled on every wake of this task, and each poll of a waiting
        // one takes its waiter list's lock, which every connection on every serving thread
        // shares: polled only when the notice may have come (its version moved or its sender
        // is gone, an atomic read of a second receiver).
        let probe = self.shutdown.clone();
        let stop = stopped(&mut self.shutdown);
        tokio::pin!(stop);
        let mut stop = Quiet::new(stop);
        let (result, by_itself) = loop {
            // Biased: the connection first (it ends the loop when done), and no random draw
            // each time its task is woken.
            tokio::select! {
                biased;
                r = conn.as_mut() => break (r, true),
                () = stop.when(|| !matches!(probe.has_changed(), Ok(false))) => {
                    graceful(conn.as_mut());
                    break (conn.await, false);
                }
                () = timer.as_mut() => {
                    let now = Instant::now();
                    if self.activity.idle_for(now).is_some_and(|idle| idle >= self.limit) {
                        tracing::debug!(peer = %self.peer, "no request within the header read timeout");
                        // Politely where the protocol allows: HTTP/2 (a gRPC channel left idle)
                        // gets GOAWAY, so its client reconnects without seeing an error. A
                        // client still sending its headers gets a short grace, then is cut.
                        graceful(conn.as_mut());
                        let _ = tokio::time::timeout(IDLE_GRACE, conn.as_mut()).await;
                        return false;
                    }
                    timer.as_mut().reset(self.activity.deadline(now, self.limit));
                }
            }
        };
        if let Err(err) = result {
            tracing::debug!(%err, peer = %self.peer, "connection ended with an error");
        }
        by_itself
    }
}

/// The lean server's connection as [`Watchdog::drive`] runs it: closed gracefully through
/// `closing`, and keeping a handover for hyper's server.
struct Lean<'a, F> {
    serving: Pin<Box<F>>,
    closing: &'a lean::Closing,
    handed: Option<Rewind<TcpStream>>,
}

impl<F: Future<Output = lean::Ended>> Future for Lean<'_, F> {
    type Output = Result<(), Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let lean::Ended::Handover(io) = std::task::ready!(self.serving.as_mut().poll(cx)) {
            self.handed = Some(io);
        }
        Poll::Ready(Ok(()))
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

    /// When the connection will have been idle for `limit`, if nothing starts before then.
    fn deadline(&self, now: Instant, limit: Duration) -> Instant {
        now + self
            .idle_for(now)
            .map_or(limit, |idle| limit.saturating_sub(idle))
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
    body: ResponseBody,
    _in_flight: InFlight,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = crate::body::BoxError;

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
