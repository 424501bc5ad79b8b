//! Dialing endpoints: the pool settings, the per-endpoint connection limit, the connector
//! (`TCP_NODELAY`, the connect timeout) and what can go wrong getting or using a connection.

use crate::body::BoxError;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tailguard_http::tcp::{self, Nagle};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::client::TlsStream;

use super::tls::{Chosen, Offer, TlsClient};

/// A map by endpoint address, looked up on every request (a pool's free lists): hashed with
/// foldhash, not std's SipHash, which keeps out keys an attacker chooses; these are the
/// configured or discovered endpoints, never a client's input.
pub(super) type ByAddr<V> = HashMap<SocketAddr, V, foldhash::fast::RandomState>;

/// Upstream pool settings of one service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
    /// Which client speaks HTTP/1.1 to the endpoints.
    pub h1: H1Upstream,
}

/// Which client speaks HTTP/1.1 to the endpoints (`proxy --h1-upstream`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum H1Upstream {
    /// tailguard's own ([`super::lean`]): the request written and the response read by the
    /// task that sends it, no connection task.
    #[default]
    Lean,
    /// hyper's client connection, its own task per connection (the reference the lean client
    /// is tested against).
    Hyper,
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
            h1: H1Upstream::Lean,
        }
    }
}

/// Dials `addr` with `TCP_NODELAY`, failing with [`io::ErrorKind::TimedOut`] after `limit`.
pub(super) async fn dial_within(addr: SocketAddr, limit: Duration) -> io::Result<TcpStream> {
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

/// Per-endpoint semaphores, created on first use and dropped once no connection holds a
/// permit and no request waits for one ([`Limit::release`]).
#[derive(Debug)]
pub(super) struct Limit {
    pub(super) max: usize,
    pub(super) wait: Duration,
    pub(super) per: Mutex<ByAddr<Arc<Semaphore>>>,
}

impl Limit {
    pub(super) fn semaphore(&self, addr: SocketAddr) -> Arc<Semaphore> {
        let mut per = self.per.lock().unwrap_or_else(|p| p.into_inner());
        let s = per
            .entry(addr)
            .or_insert_with(|| Arc::new(Semaphore::new(self.max)));
        Arc::clone(s)
    }

    /// Drops the semaphores nobody holds (no permit out, no request waiting): one made again
    /// later starts full, as this one is.
    pub(super) fn release(&self) {
        let mut per = self.per.lock().unwrap_or_else(|p| p.into_inner());
        per.retain(|_, s| Arc::strong_count(s) > 1);
    }

    /// Endpoints with a semaphore.
    pub(super) fn len(&self) -> usize {
        self.per.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub(super) async fn acquire(
        &self,
        addr: SocketAddr,
    ) -> Result<OwnedSemaphorePermit, PoolExhausted> {
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
/// within the connect timeout, then shakes hands over TLS when the service has `client.tls`
/// (within the connect timeout again).
#[derive(Clone, Debug)]
pub struct Connector {
    pub(super) limit: Option<Arc<Limit>>,
    pub(super) connect_timeout: Duration,
    pub(super) tls: Option<TlsClient>,
}

impl Default for Connector {
    /// No connection limit, [`PoolConfig::default`]'s connect timeout, cleartext.
    fn default() -> Self {
        Self {
            limit: None,
            connect_timeout: PoolConfig::default().connect_timeout,
            tls: None,
        }
    }
}

impl Connector {
    /// A connection to `addr`, within the connection limit and the connect timeout (over TLS,
    /// offering `h2` by ALPN: the HTTP/2 pool dials with it).
    ///
    /// # Errors
    /// [`SendError::Exhausted`] at the limit, [`SendError::Connect`] when the dial fails.
    pub async fn connect(&self, addr: SocketAddr) -> Result<Conn, SendError> {
        let permit = match &self.limit {
            Some(l) => Some(l.acquire(addr).await.map_err(SendError::Exhausted)?),
            None => None,
        };
        self.dial(addr, permit, Offer::H2).await
    }

    /// A connection to `addr` holding `permit` (already acquired, if there is a limit) until
    /// it closes, within the connect timeout; over TLS offering `offer` by ALPN.
    pub(super) async fn dial(
        &self,
        addr: SocketAddr,
        permit: Option<OwnedSemaphorePermit>,
        offer: Offer,
    ) -> Result<Conn, SendError> {
        let stream = dial_within(addr, self.connect_timeout)
            .await
            .map_err(|e| SendError::Connect(e.into()))?;
        let Some(tls) = &self.tls else {
            return Ok(Conn {
                io: Io::Plain(TokioIo::new(stream)),
                chosen: Chosen::None,
                _permit: permit,
            });
        };
        let (stream, chosen) = tls
            .handshake(stream, addr, offer, self.connect_timeout)
            .await
            .map_err(|e| SendError::Connect(e.into()))?;
        Ok(Conn {
            io: Io::Tls(TokioIo::new(Box::new(stream))),
            chosen,
            _permit: permit,
        })
    }
}

/// An upstream connection, holding its endpoint's connection permit until it closes.
#[derive(Debug)]
pub struct Conn {
    pub(super) io: Io,
    /// What the endpoint chose by ALPN (always [`Chosen::None`] in cleartext).
    pub(super) chosen: Chosen,
    pub(super) _permit: Option<OwnedSemaphorePermit>,
}

/// The bytes of a connection: the socket itself, or TLS over it.
#[derive(Debug)]
pub(super) enum Io {
    Plain(TokioIo<TcpStream>),
    Tls(TokioIo<Box<TlsStream<TcpStream>>>),
}

impl Conn {
    /// The socket (under TLS, the one TLS runs over).
    pub fn stream(&self) -> &TcpStream {
        match &self.io {
            Io::Plain(io) => io.inner(),
            Io::Tls(io) => io.inner().get_ref().0,
        }
    }

    /// The socket, when the connection is cleartext (the lean client reads and writes it
    /// directly).
    pub(super) fn plain(&self) -> Option<&TcpStream> {
        match &self.io {
            Io::Plain(io) => Some(io.inner()),
            Io::Tls(_) => None,
        }
    }

    /// [`Conn::plain`], to read from.
    pub(super) fn plain_mut(&mut self) -> Option<&mut TcpStream> {
        match &mut self.io {
            Io::Plain(io) => Some(io.inner_mut()),
            Io::Tls(_) => None,
        }
    }
}

/// Forwards one hyper I/O call to whichever stream the connection has.
macro_rules! either {
    ($io:expr, $s:ident => $call:expr) => {
        match $io {
            Io::Plain($s) => $call,
            Io::Tls($s) => $call,
        }
    };
}

impl Read for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        either!(&mut self.io, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl Write for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        either!(&mut self.io, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        either!(&mut self.io, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        either!(&mut self.io, s => Pin::new(s).poll_shutdown(cx))
    }

    fn is_write_vectored(&self) -> bool {
        either!(&self.io, s => s.is_write_vectored())
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        either!(&mut self.io, s => Pin::new(s).poll_write_vectored(cx, bufs))
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
    /// The connection failed while the request was on it (hyper's error, or a stage's below).
    #[error("{0}")]
    Http(BoxError),
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
