//! Pooled upstream connections: hyper-util's pooling client over sockets dialed by
//! [`tailguard_http::tcp::connect`] (so every upstream socket has `TCP_NODELAY`).
//!
//! Each service has its own pools (Linkerd 1's client per service): HTTP/1.1 keep-alive, and
//! HTTP/2 prior knowledge (one multiplexed connection per endpoint, requests balanced per
//! request, not per connection). Only the proxy's own `http://IP:PORT` URIs reach the
//! connector, so it never resolves names.
//!
//! # Connection limit
//! With [`PoolConfig::max_per_endpoint`] (`hostConnectionPool.maxSize`), the connector holds
//! one permit of a per-endpoint semaphore for as long as each connection lives:
//! 1. a request finding an idle connection uses it, as without a limit;
//! 2. otherwise hyper-util waits for an idle connection and dials at the same time; the dial
//!    first waits for a permit, so at most `maxSize` connections to an endpoint ever exist;
//! 3. whichever comes first serves the request (a connection handed back by another request,
//!    or a new one when a connection closed and freed its permit);
//! 4. when neither comes within [`PoolConfig::wait`], the attempt fails with
//!    [`PoolExhausted`], which the proxy answers with 503 and a reason.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::client::legacy::Client as Pool;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tailguard_http::tcp::{self, Nagle};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A request or response body as the proxy forwards it.
pub type ProxyBody = BoxBody<Bytes, hyper::Error>;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Upstream pool settings of one service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Connections per endpoint at most (`None`: no limit).
    pub max_per_endpoint: Option<usize>,
    /// How long a request waits for a connection when its endpoint is at the limit.
    pub wait: Duration,
    /// Idle connections are closed after this.
    pub idle_timeout: Duration,
}

impl Default for PoolConfig {
    /// No limit, a 1 s wait once a limit is set, idle connections kept 90 s.
    fn default() -> Self {
        Self {
            max_per_endpoint: None,
            wait: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(90),
        }
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

/// Dials `IP:PORT` authorities with `TCP_NODELAY` set, under the per-endpoint limit if any.
#[derive(Clone, Debug, Default)]
pub struct Connector {
    limit: Option<Arc<Limit>>,
}

impl tower::Service<Uri> for Connector {
    type Response = Conn;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Conn, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let limit = self.limit.clone();
        Box::pin(async move {
            let addr: SocketAddr = uri
                .authority()
                .and_then(|a| a.as_str().parse().ok())
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not an IP:PORT"))?;
            let permit = match &limit {
                Some(l) => Some(l.acquire(addr).await?),
                None => None,
            };
            let stream = tcp::connect(addr, Nagle::Off).await?;
            Ok(Conn {
                io: TokioIo::new(stream),
                _permit: permit,
            })
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

impl Connection for Conn {
    fn connected(&self) -> Connected {
        self.io.connected()
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

/// The upstream pools of one service.
#[derive(Clone, Debug)]
pub struct Upstreams {
    http1: Pool<Connector, ProxyBody>,
    http2: Pool<Connector, ProxyBody>,
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
        let connector = Connector { limit };
        let build = |h2: bool| {
            Pool::builder(TokioExecutor::new())
                .pool_idle_timeout(config.idle_timeout)
                .pool_timer(TokioTimer::new())
                .http2_only(h2)
                .build(connector.clone())
        };
        Self {
            http1: build(false),
            http2: build(true),
        }
    }

    /// Sends `req` over HTTP/2 when `h2`, else HTTP/1.1.
    pub async fn send(
        &self,
        req: http::Request<ProxyBody>,
        h2: bool,
    ) -> Result<http::Response<Incoming>, hyper_util::client::legacy::Error> {
        let pool = if h2 { &self.http2 } else { &self.http1 };
        pool.request(req).await
    }
}

impl Default for Upstreams {
    fn default() -> Self {
        Self::new(PoolConfig::default())
    }
}

/// The [`PoolExhausted`] behind a failed send, if that is why it failed.
pub fn exhausted(e: &(dyn std::error::Error + 'static)) -> Option<PoolExhausted> {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(p) = err.downcast_ref::<PoolExhausted>() {
            return Some(*p);
        }
        next = err.source();
    }
    None
}
