//! Pooled upstream connections over sockets dialed by [`tailguard_http::tcp::connect`] (so
//! every upstream socket has `TCP_NODELAY`).
//!
//! Each service has its own pools (Linkerd 1's client per service):
//! - HTTP/1.1 keep-alive: tailguard's own free lists over hyper's connection API. A connection
//!   is taken by one request at a time and handed back when its response body has been read
//!   to the end, with no task per request (hyper-util's pool spawns one to wait for the
//!   connection to be ready again, a large share of a small request's cost). A kept-alive
//!   connection the endpoint closed before taking the request is retried on another.
//! - HTTP/2 prior knowledge: one multiplexed connection per endpoint over hyper's connection
//!   API, shared by every request to that endpoint (requests are balanced per request, not
//!   per connection), replaced when it closes, kept while the endpoint keeps it. The request's
//!   authority is its `:authority` (the forwarded host), so the pool is keyed by endpoint
//!   address, not by URI.
//!
//! Only the proxy's own endpoint addresses reach the dialer, so it never resolves names.
//!
//! # Connection limit
//! With [`PoolConfig::max_per_endpoint`] (`hostConnectionPool.maxSize`), every connection
//! holds one permit of a per-endpoint semaphore (shared by both pools) for as long as it
//! lives:
//! 1. a request finding a free connection uses it, as without a limit;
//! 2. otherwise it waits for whichever comes first: a connection handed back by another
//!    request, or a permit (a connection closed), with which it dials;
//! 3. at most `maxSize` connections to an endpoint ever exist;
//! 4. when neither comes within [`PoolConfig::wait`], the attempt fails with
//!    [`PoolExhausted`], which the proxy answers with 503 and a reason.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::body::{Body, Frame, SizeHint};
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tailguard_http::tcp::{self, Nagle};
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// A request or response body as the proxy forwards it.
pub type ProxyBody = BoxBody<Bytes, BoxError>;

/// The error of a [`ProxyBody`]: hyper's, or the proxy's own (a client's or an upstream's body
/// fault, [`crate::request_body`], [`crate::response_body`]).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Upstream pool settings of one service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Connections per endpoint at most (`None`: no limit).
    pub max_per_endpoint: Option<usize>,
    /// How long a request waits for a connection when its endpoint is at the limit.
    pub wait: Duration,
    /// Idle connections are closed after this.
    pub idle_timeout: Duration,
    /// A connection not established within this fails (an endpoint that drops SYNs would
    /// otherwise hold requests for the kernel's minutes of retransmissions).
    pub connect_timeout: Duration,
}

impl Default for PoolConfig {
    /// No limit, a 1 s wait once a limit is set, idle connections kept 90 s, connections
    /// given 1 s to establish (Finagle's default; Envoy's is 5 s).
    fn default() -> Self {
        Self {
            max_per_endpoint: None,
            wait: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(90),
            connect_timeout: Duration::from_secs(1),
        }
    }
}

/// Dials `addr` with `TCP_NODELAY`, failing with [`io::ErrorKind::TimedOut`] after `limit`.
async fn dial_within(addr: SocketAddr, limit: Duration) -> io::Result<TcpStream> {
    match tokio::time::timeout(limit, tcp::connect(addr, Nagle::Off)).await {
        Ok(connected) => connected,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("connect timeout ({limit:?})"),
        )),
    }
}

/// No connection to an endpoint became free within the wait (step 4 of the module docs).
#[derive(Clone, Copy, Debug, thiserror::Error)]
#[error("connection limit reached ({max} per endpoint, waited {waited:?})")]
pub struct PoolExhausted {
    /// The limit.
    pub max: usize,
    /// How long the request waited.
    pub waited: Duration,
}

/// Per-endpoint semaphores, created on first use (one per address ever dialed).
#[derive(Debug)]
struct Limit {
    max: usize,
    wait: Duration,
    per: Mutex<HashMap<SocketAddr, Arc<Semaphore>>>,
}

impl Limit {
    fn semaphore(&self, addr: SocketAddr) -> Arc<Semaphore> {
        let mut per = self.per.lock().unwrap_or_else(|p| p.into_inner());
        let s = per
            .entry(addr)
            .or_insert_with(|| Arc::new(Semaphore::new(self.max)));
        Arc::clone(s)
    }

    async fn acquire(&self, addr: SocketAddr) -> Result<OwnedSemaphorePermit, PoolExhausted> {
        let permit = self.semaphore(addr).acquire_owned();
        match tokio::time::timeout(self.wait, permit).await {
            Ok(Ok(p)) => Ok(p),
            _ => Err(PoolExhausted {
                max: self.max,
                waited: self.wait,
            }),
        }
    }
}

/// Dials `IP:PORT` authorities with `TCP_NODELAY` set, under the per-endpoint limit if any,
/// within the connect timeout.
#[derive(Clone, Debug)]
pub struct Connector {
    limit: Option<Arc<Limit>>,
    connect_timeout: Duration,
}

impl Default for Connector {
    /// No connection limit, [`PoolConfig::default`]'s connect timeout.
    fn default() -> Self {
        Self {
            limit: None,
            connect_timeout: PoolConfig::default().connect_timeout,
        }
    }
}

impl Connector {
    /// A connection to `addr`, within the connection limit and the connect timeout.
    ///
    /// # Errors
    /// [`SendError::Exhausted`] at the limit, [`SendError::Connect`] when the dial fails.
    pub async fn connect(&self, addr: SocketAddr) -> Result<Conn, SendError> {
        let permit = match &self.limit {
            Some(l) => Some(l.acquire(addr).await.map_err(SendError::Exhausted)?),
            None => None,
        };
        self.dial(addr, permit).await
    }

    /// A connection to `addr` holding `permit` (already acquired, if there is a limit) until
    /// it closes, within the connect timeout.
    async fn dial(
        &self,
        addr: SocketAddr,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Result<Conn, SendError> {
        let stream = dial_within(addr, self.connect_timeout)
            .await
            .map_err(|e| SendError::Connect(e.into()))?;
        Ok(Conn {
            io: TokioIo::new(stream),
            _permit: permit,
        })
    }
}

/// An upstream connection, holding its endpoint's connection permit until it closes.
#[derive(Debug)]
pub struct Conn {
    io: TokioIo<TcpStream>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Conn {
    /// The socket.
    pub fn stream(&self) -> &TcpStream {
        self.io.inner()
    }
}

impl Read for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

/// The upstream pools of one service: HTTP/1.1 connections in [`H1Pool`], HTTP/2 in
/// [`H2Pool`] (one multiplexed connection per endpoint).
#[derive(Clone, Debug)]
pub struct Upstreams {
    http1: Arc<H1Pool>,
    http2: Arc<H2Pool>,
}

impl Upstreams {
    /// Both pools, sharing one connection limit per endpoint when `config` sets one.
    pub fn new(config: PoolConfig) -> Self {
        let limit = config.max_per_endpoint.map(|max| {
            Arc::new(Limit {
                max,
                wait: config.wait,
                per: Mutex::new(HashMap::new()),
            })
        });
        let connector = Connector {
            limit,
            connect_timeout: config.connect_timeout,
        };
        Self {
            http1: Arc::new(H1Pool {
                per: Mutex::new(HashMap::new()),
                connector: connector.clone(),
                idle_timeout: config.idle_timeout,
                sweeping: AtomicBool::new(false),
            }),
            http2: Arc::new(H2Pool {
                connector,
                per: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// A connection to `addr` ready for a request, over HTTP/2 when `h2`. Nothing has been
    /// sent yet, so a failure here ([`SendError::is_connect`]) may be retried with any request.
    ///
    /// # Errors
    /// [`SendError::Connect`] or [`SendError::Exhausted`].
    pub async fn checkout(&self, h2: bool, addr: SocketAddr) -> Result<Checkout<'_>, SendError> {
        if h2 {
            let tx = self.http2.checkout(addr).await?;
            return Ok(Checkout(Held::H2(tx)));
        }
        let free = self.http1.free(addr);
        let (tx, reused) = self.http1.checkout(&free, addr).await?;
        Ok(Checkout(Held::H1 {
            tx,
            reused,
            free,
            pool: &self.http1,
            addr,
        }))
    }
}

/// A connection checked out for one request, from the pools of `'a`.
#[derive(Debug)]
pub struct Checkout<'a>(Held<'a>);

#[derive(Debug)]
enum Held<'a> {
    H1 {
        tx: Sender,
        reused: bool,
        free: Arc<Free>,
        /// For a replacement, should the connection turn out closed.
        pool: &'a Arc<H1Pool>,
        addr: SocketAddr,
    },
    H2(H2Sender),
}

impl Checkout<'_> {
    /// Sends `req`: over HTTP/2 in absolute form (its authority the `:authority` sent), over
    /// HTTP/1.1 in origin form with a `Host` header. A kept-alive HTTP/1.1 connection the
    /// endpoint closed before taking the request is replaced (nothing was sent).
    ///
    /// # Errors
    /// [`SendError::Http`] when the connection fails with the request on it, or those of a
    /// replacement connection.
    pub async fn send(
        self,
        mut req: http::Request<ProxyBody>,
    ) -> Result<http::Response<UpstreamBody>, SendError> {
        let (mut tx, mut reused, free, pool, addr) = match self.0 {
            Held::H2(mut tx) => {
                let resp = tx.send_request(req).await.map_err(SendError::Http)?;
                return Ok(resp.map(|inner| UpstreamBody { inner, back: None }));
            }
            Held::H1 {
                tx,
                reused,
                free,
                pool,
                addr,
            } => (tx, reused, free, pool, addr),
        };
        loop {
            match tx.try_send_request(req).await {
                Ok(resp) => {
                    let back = Some(Back { tx, free });
                    return Ok(resp.map(|inner| UpstreamBody { inner, back }.check_end()));
                }
                Err(mut e) => match e.take_message() {
                    // A kept-alive connection the endpoint closed before it took the request:
                    // nothing was sent, so it goes on another connection (as hyper-util does).
                    Some(unsent) if reused => {
                        req = unsent;
                        (tx, reused) = pool.checkout(&free, addr).await?;
                    }
                    _ => return Err(SendError::Http(e.into_error())),
                },
            }
        }
    }
}

impl Default for Upstreams {
    fn default() -> Self {
        Self::new(PoolConfig::default())
    }
}

/// Why an upstream request failed.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// No connection could be made.
    #[error("connection failed")]
    Connect(#[source] BoxError),
    /// The endpoint is at its connection limit (module docs, step 4).
    #[error(transparent)]
    Exhausted(PoolExhausted),
    /// The connection failed while the request was on it.
    #[error(transparent)]
    Http(hyper::Error),
}

impl SendError {
    /// No connection was made: nothing reached the endpoint.
    pub fn is_connect(&self) -> bool {
        match self {
            SendError::Connect(_) => true,
            SendError::Exhausted(_) | SendError::Http(_) => false,
        }
    }
}

/// HTTP/2 (prior knowledge) connections, one per endpoint, shared by every request to it (a
/// `SendRequest` is a cheap handle onto the multiplexed connection). A closed connection is
/// replaced by the next request; concurrent first requests may each dial, and the one that
/// finishes last keeps its connection in the slot while the others' close when done.
#[derive(Debug)]
struct H2Pool {
    connector: Connector,
    per: Mutex<HashMap<SocketAddr, H2Sender>>,
}

type H2Sender = hyper::client::conn::http2::SendRequest<ProxyBody>;

impl H2Pool {
    /// The endpoint's connection, ready for a request.
    async fn checkout(&self, addr: SocketAddr) -> Result<H2Sender, SendError> {
        let cached = {
            let per = self.per.lock().unwrap_or_else(|p| p.into_inner());
            per.get(&addr).filter(|tx| !tx.is_closed()).cloned()
        };
        let mut tx = match cached {
            Some(tx) => tx,
            None => self.dial(addr).await?,
        };
        if tx.ready().await.is_err() {
            // Closed between the check and now (GOAWAY, reset): nothing was sent; one redial.
            tx = self.dial(addr).await?;
            tx.ready().await.map_err(|e| SendError::Connect(e.into()))?;
        }
        Ok(tx)
    }

    /// A new connection to `addr`, its task spawned, put in the endpoint's slot.
    async fn dial(&self, addr: SocketAddr) -> Result<H2Sender, SendError> {
        let conn = self.connector.connect(addr).await?;
        let (tx, driver) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .handshake(conn)
            .await
            .map_err(|e| SendError::Connect(e.into()))?;
        tokio::spawn(async move {
            if let Err(err) = driver.await {
                tracing::debug!(%err, %addr, "upstream HTTP/2 connection ended with an error");
            }
        });
        let mut per = self.per.lock().unwrap_or_else(|p| p.into_inner());
        per.retain(|_, tx| !tx.is_closed());
        per.insert(addr, tx.clone());
        Ok(tx)
    }
}

/// HTTP/1.1 keep-alive connections per endpoint, handed from request to request without a
/// task per request: a connection goes back to its endpoint's free list when the response
/// body has been read to its end (a body dropped midway closes the connection), and the next
/// request takes the most recently freed one (the warmest).
#[derive(Debug)]
struct H1Pool {
    per: Mutex<HashMap<SocketAddr, Arc<Free>>>,
    /// The connection limit and connect timeout, shared with the HTTP/2 pool.
    connector: Connector,
    idle_timeout: Duration,
    sweeping: AtomicBool,
}

/// The free connections of one endpoint.
#[derive(Debug, Default)]
struct Free {
    conns: Mutex<Vec<(Sender, Instant)>>,
    /// Signalled when a connection comes back, for requests waiting at the limit.
    returned: Notify,
}

type Sender = hyper::client::conn::http1::SendRequest<ProxyBody>;

impl Free {
    fn put(&self, tx: Sender) {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.push((tx, Instant::now()));
        drop(conns);
        self.returned.notify_one();
    }

    /// The most recently freed live connection, if any. A connection whose task has not yet
    /// taken in the end of its last exchange gets one turn of the scheduler to do so; one
    /// still busy after that is dropped.
    async fn take(&self, idle_timeout: Duration) -> Option<Sender> {
        loop {
            let (mut tx, since) = {
                let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
                conns.pop()?
            };
            if tx.is_closed() || since.elapsed() >= idle_timeout {
                continue;
            }
            if !tx.is_ready() {
                tokio::task::yield_now().await;
                if !tx.is_ready() {
                    // Still busy: the endpoint answered before it had read the whole request
                    // body, which is still streaming. It is let go, not put back: putting it
                    // back would wake a request waiting at the connection limit, which would
                    // take it again at once, in a loop until its wait ran out. Its task ends
                    // when the body has been sent, and so frees its permit.
                    let ready = std::future::poll_fn(|cx| Poll::Ready(tx.poll_ready(cx)));
                    match ready.await {
                        Poll::Ready(Ok(())) => {}
                        Poll::Ready(Err(_)) | Poll::Pending => continue,
                    }
                }
            }
            return Some(tx);
        }
    }
}

impl H1Pool {
    fn free(self: &Arc<Self>, addr: SocketAddr) -> Arc<Free> {
        let mut per = self.per.lock().unwrap_or_else(|p| p.into_inner());
        let free = per.entry(addr).or_default();
        Arc::clone(free)
    }

    /// A free connection (`true`), or a new one (`false`) within the connection limit.
    async fn checkout(
        self: &Arc<Self>,
        free: &Arc<Free>,
        addr: SocketAddr,
    ) -> Result<(Sender, bool), SendError> {
        let Some(limit) = &self.connector.limit else {
            if let Some(tx) = free.take(self.idle_timeout).await {
                return Ok((tx, true));
            }
            return Ok((self.dial(addr, None).await?, false));
        };
        let semaphore = limit.semaphore(addr);
        let deadline = tokio::time::Instant::now() + limit.wait;
        loop {
            let returned = free.returned.notified();
            tokio::pin!(returned);
            returned.as_mut().enable();
            if let Some(tx) = free.take(self.idle_timeout).await {
                return Ok((tx, true));
            }
            tokio::select! {
                permit = Arc::clone(&semaphore).acquire_owned() => {
                    return Ok((self.dial(addr, permit.ok()).await?, false));
                }
                () = &mut returned => {}
                () = tokio::time::sleep_until(deadline) => {
                    return Err(SendError::Exhausted(PoolExhausted {
                        max: limit.max,
                        waited: limit.wait,
                    }));
                }
            }
        }
    }

    /// A new connection to `addr`, its task spawned; it holds `permit` until it closes.
    async fn dial(
        self: &Arc<Self>,
        addr: SocketAddr,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Result<Sender, SendError> {
        let io = self.connector.dial(addr, permit).await?;
        let (tx, conn) = hyper::client::conn::http1::Builder::new()
            .writev(false)
            .handshake(io)
            .await
            .map_err(|e| SendError::Connect(e.into()))?;
        tokio::spawn(async move {
            if let Err(err) = conn.await {
                tracing::debug!(%err, %addr, "upstream connection ended with an error");
            }
        });
        self.sweep();
        Ok(tx)
    }

    /// Starts, once, the task closing connections idle for longer than the idle timeout; it
    /// ends with the pool.
    fn sweep(self: &Arc<Self>) {
        if self.sweeping.swap(true, Ordering::Relaxed) {
            return;
        }
        let pool = Arc::downgrade(self);
        let every = (self.idle_timeout / 2).max(Duration::from_millis(10));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(pool) = pool.upgrade() else { return };
                let per = pool.per.lock().unwrap_or_else(|p| p.into_inner());
                for free in per.values() {
                    let mut conns = free.conns.lock().unwrap_or_else(|p| p.into_inner());
                    conns.retain(|(tx, since)| {
                        !tx.is_closed() && since.elapsed() < pool.idle_timeout
                    });
                }
            }
        });
    }
}

/// A connection to hand back when its response body ends.
#[derive(Debug)]
struct Back {
    tx: Sender,
    free: Arc<Free>,
}

/// An upstream response body. Over HTTP/1.1 it gives its connection back to the pool when it
/// has been read to the end.
#[derive(Debug)]
pub struct UpstreamBody {
    inner: Incoming,
    back: Option<Back>,
}

impl UpstreamBody {
    /// Gives the connection back at once when there is no body to read.
    fn check_end(mut self) -> Self {
        if self.inner.is_end_stream() {
            if let Some(b) = self.back.take() {
                b.free.put(b.tx);
            }
        }
        self
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            _ => false,
        };
        if ended {
            if let Some(b) = self.back.take() {
                b.free.put(b.tx);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
