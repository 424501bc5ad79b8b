//! Pooled upstream connections over sockets dialed by [`tailguard_http::tcp::connect`] (so
//! every upstream socket has `TCP_NODELAY`).
//!
//! A service's pools ([`Upstreams`]) are shared with every service of the same pool settings
//! and no connection limit (`start::build_services`), and come as one pair per serving thread
//! ([`crate::worker`]), so that a connection's task and the requests on it share a thread:
//! - HTTP/1.1 keep-alive ([`h1`]): free lists per endpoint, the connections tailguard's lean
//!   client ([`lean`]) on cleartext, hyper's over TLS (`proxy --h1-upstream hyper` for all). A
//!   connection is taken by one request at a time and handed back when its response body has
//!   been read to the end, with no task per request (hyper-util's pool spawns one to wait for
//!   the connection to be ready again, a large share of a small request's cost). A kept-alive
//!   connection the endpoint closed before taking the request is retried on another.
//! - HTTP/2 prior knowledge ([`h2`]): one multiplexed connection per endpoint on the `h2`
//!   crate, shared by every request to that endpoint (requests are balanced per request, not
//!   per connection), replaced when it closes, kept while the endpoint keeps it. Each request is
//!   sent and its response read by the request's own task ([`h2_stream`]). The request's
//!   authority is its `:authority` (the forwarded host), so the pool is keyed by endpoint
//!   address, not by URI.
//!
//! An endpoint gone from discovery loses its idle connections and its HTTP/2 connection, and
//! any endpoint left with no connection loses its entries ([`Upstreams::release`], called by
//! [`crate::retain`]).
//!
//! Only the proxy's own endpoint addresses reach the dialer, so it never resolves names.
//!
//! With `client.tls` every connection is TLS ([`tls`]): the HTTP/1.1 pool's connections offer
//! `http/1.1` by ALPN (both versions under `protocol: auto`, when an endpoint that chooses `h2`
//! has its connection handed to the HTTP/2 pool and is remembered in [`h2::Learned`]), the HTTP/2
//! pool's offer `h2`; HTTP/1.1 over TLS uses hyper's client.
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

mod body;
mod connect;
mod h1;
mod h2;
mod h2_stream;
mod lean;
mod tls;

use crate::body::ProxyBody;
pub use body::UpstreamBody;
#[cfg(test)]
pub(crate) use connect::PoolExhausted;
pub use connect::{Conn, Connector, H1Upstream, PoolConfig, SendError};
use std::future::Future;
pub use tls::{ClientAuth, TlsClient, UpstreamTls, UpstreamTlsError};

use body::Back;
use connect::{ByAddr, Limit};
use h1::{Free, H1Pool, Sender};
use h2::{H2Pool, H2Sender, Learned};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// The upstream pools of one service: HTTP/1.1 connections in [`H1Pool`], HTTP/2 in
/// [`H2Pool`] (one multiplexed connection per endpoint), one pair per serving thread
/// ([`crate::worker`]) so that a connection's task and the requests on it share a thread; the
/// connection limit per endpoint is shared by all of them.
#[derive(Clone, Debug)]
pub struct Upstreams {
    per_thread: Arc<[Pools]>,
}

#[derive(Debug)]
struct Pools {
    http1: Arc<H1Pool>,
    http2: Arc<H2Pool>,
}

impl Upstreams {
    /// Pools for `threads` serving threads, sharing one connection limit per endpoint when
    /// `config` sets one, in cleartext.
    pub fn new(config: PoolConfig, threads: usize) -> Self {
        Self::over_tls(config, threads, None, false)
    }

    /// Pools for `threads` serving threads, over `tls` if any. With `either`
    /// (`protocol: auto`), an HTTP/1.1 connection offers `h2` too by ALPN, and an endpoint
    /// that chooses it gets its HTTP requests over HTTP/2 from then on.
    pub fn over_tls(
        config: PoolConfig,
        threads: usize,
        tls: Option<TlsClient>,
        either: bool,
    ) -> Self {
        let limit = config.max_per_endpoint.map(|max| {
            Arc::new(Limit {
                max,
                wait: config.wait,
                per: Mutex::new(ByAddr::default()),
            })
        });
        let offer = match tls.is_some() && either {
            true => tls::Offer::Either,
            false => tls::Offer::Http1,
        };
        let connector = Connector {
            limit,
            connect_timeout: config.connect_timeout,
            tls,
        };
        let per_thread = (0..threads.max(1))
            .map(|_| {
                let http2 = Arc::new(H2Pool {
                    connector: connector.clone(),
                    per: Mutex::new(ByAddr::default()),
                    learned: Arc::new(Learned::default()),
                });
                Pools {
                    http1: Arc::new(H1Pool {
                        per: Mutex::new(ByAddr::default()),
                        connector: connector.clone(),
                        idle_timeout: config.idle_timeout,
                        sweeping: AtomicBool::new(false),
                        lean: config.h1 == H1Upstream::Lean,
                        offer,
                        h2: Arc::clone(&http2),
                    }),
                    http2,
                }
            })
            .collect();
        Self { per_thread }
    }

    /// A connection of its own to `addr` for a health check: the pools' connector (the connect
    /// timeout, the service's TLS, offering `h2` or `http/1.1` by ALPN as `h2` says), outside
    /// the per-endpoint connection limit and never pooled.
    ///
    /// # Errors
    /// [`SendError::Connect`] when the dial or the handshake fails.
    pub async fn dial_check(&self, addr: SocketAddr, h2: bool) -> Result<Conn, SendError> {
        let offer = if h2 {
            tls::Offer::H2
        } else {
            tls::Offer::Http1
        };
        self.per_thread[0]
            .http2
            .connector
            .dial(addr, None, offer)
            .await
    }

    /// True when `self` and `other` are the same pools (services with the same pool settings
    /// and no connection limit share them).
    pub fn same(&self, other: &Upstreams) -> bool {
        Arc::ptr_eq(&self.per_thread, &other.per_thread)
    }

    /// Frees what the pools keep for endpoints they no longer need, given the addresses of
    /// every service over them now (`present`): an absent endpoint's idle HTTP/1.1
    /// connections close, its HTTP/2 connection is let go (it closes once its streams end)
    /// and it is forgotten as having chosen `h2`; then any endpoint, present or not, left with
    /// no connection loses its free list, its HTTP/2 slot and its connection-limit semaphore.
    /// An address that comes back starts from nothing.
    pub fn release(&self, present: &HashSet<SocketAddr>) {
        for pools in self.per_thread.iter() {
            pools.http1.release(present);
            pools.http2.release(present);
        }
        if let Some(limit) = &self.per_thread[0].http2.connector.limit {
            limit.release();
        }
    }

    /// How many endpoints each map keeps an entry for, summed over the serving threads:
    /// `http1` free lists, `http2` connections, `limit` semaphores, `learned` h2 choices.
    pub fn sizes(&self) -> [(&'static str, usize); 4] {
        let (mut h1, mut h2, mut learned) = (0, 0, 0);
        for pools in self.per_thread.iter() {
            h1 += pools.http1.len();
            h2 += pools.http2.len();
            learned += pools.http2.learned.len();
        }
        let limit = self.per_thread[0]
            .http2
            .connector
            .limit
            .as_ref()
            .map_or(0, |l| l.len());
        [
            ("http1", h1),
            ("http2", h2),
            ("limit", limit),
            ("learned", learned),
        ]
    }

    /// This thread's pools.
    fn pools(&self) -> &Pools {
        let i = crate::worker::index().min(self.per_thread.len() - 1);
        &self.per_thread[i]
    }

    /// A connection to `addr` ready for a request, over HTTP/2 when `h2`. Nothing has been
    /// sent yet, so a failure here ([`SendError::is_connect`]) may be retried with any request.
    ///
    /// # Errors
    /// [`SendError::Connect`] or [`SendError::Exhausted`].
    pub async fn checkout(&self, h2: bool, addr: SocketAddr) -> Result<Checkout<'_>, SendError> {
        self.checkout_at(h2, addr, None).await
    }

    /// [`Upstreams::checkout`] at `now` if it has been read (`None`: read when needed).
    async fn checkout_at(
        &self,
        h2: bool,
        addr: SocketAddr,
        now: Option<Instant>,
    ) -> Result<Checkout<'_>, SendError> {
        let pools = self.pools();
        let tls = pools.http2.connector.tls.is_some();
        // Only a TLS endpoint can have chosen h2 by ALPN: cleartext requests take no lock here.
        if h2 || (tls && pools.http2.learned.knows(addr)) {
            let tx = pools.http2.checkout(addr).await?;
            return Ok(Checkout(Held::H2 { tx, tls }));
        }
        let free = pools.http1.free(addr);
        let (tx, reused) = pools.http1.checkout(&free, addr, now).await?;
        if let Sender::H2(tx) = tx {
            return Ok(Checkout(Held::H2 { tx, tls }));
        }
        Ok(Checkout(Held::H1 {
            tx,
            reused,
            free,
            pool: &pools.http1,
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
    H2 {
        tx: H2Sender,
        /// Over TLS: the request's `:scheme` is `https`.
        tls: bool,
    },
}

/// How an attempt's request is made once its connection is known (the balanced stage's maker;
/// a closure for a request made whole, as the probe's).
pub trait Make: Sync {
    /// The request, in HTTP/2 form when `h2`.
    fn request(&self, h2: bool) -> http::Request<ProxyBody>;

    /// For the lean HTTP/1.1 client: the request's head written into `out` straight from the
    /// client's parts, for a request that needs nothing an attempt adds (no body, no header of
    /// the attempt's own), so no header map is copied for it. `None`: the request is made by
    /// [`Make::request`].
    fn bare(&self, out: &mut Vec<u8>) -> Option<Bare> {
        let _ = out;
        None
    }

    /// The time the attempt was picked, already read (`None`: the pool reads the clock when
    /// it must know whether a kept-alive connection has been idle too long).
    fn picked_at(&self) -> Option<Instant> {
        None
    }
}

impl<F: Fn(bool) -> http::Request<ProxyBody> + Sync> Make for F {
    fn request(&self, h2: bool) -> http::Request<ProxyBody> {
        self(h2)
    }
}

#[cfg(test)]
pub(crate) use lean::written;
pub use lean::{encode_bare, Bare};

impl<'a> Checkout<'a> {
    /// The connection speaks HTTP/2: the request goes in that form.
    pub fn is_h2(&self) -> bool {
        matches!(self.0, Held::H2 { .. })
    }

    /// Sends the request `make` builds (told whether the connection speaks HTTP/2): over
    /// HTTP/2 in absolute form (its authority the `:authority` sent), over HTTP/1.1 in origin
    /// form with a `Host` header. A kept-alive HTTP/1.1 connection the endpoint closed before
    /// taking the request is replaced (nothing was sent).
    ///
    /// The request is built here, not passed in: on the lean path it goes straight into the
    /// send, so this future holds no copy of it (240 B, moved in and out of its state); a
    /// request without a body goes to the lean client as the bytes of its head ([`Make::bare`]).
    ///
    /// # Errors
    /// [`SendError::Http`] when the connection fails with the request on it, or those of a
    /// replacement connection.
    ///
    /// Not an `async fn`: one copies its arguments, this checkout among them, into its state
    /// when first polled (rust-lang/rust#62958; see `forward::handle`).
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn copies its arguments into its state"
    )]
    pub fn send<'m, M: Make + ?Sized>(
        self,
        make: &'m M,
    ) -> impl Future<Output = Result<http::Response<UpstreamBody>, SendError>> + use<'a, 'm, M>
    {
        async move {
            let (mut tx, mut reused, free, pool, addr) = match self.0 {
                Held::H2 { mut tx, tls } => {
                    let mut req = make.request(true);
                    if tls {
                        let mut uri = std::mem::take(req.uri_mut()).into_parts();
                        uri.scheme = Some(http::uri::Scheme::HTTPS);
                        *req.uri_mut() = http::Uri::from_parts(uri).unwrap_or_default();
                    }
                    let resp = tx
                        .send_request(req)
                        .await
                        .map_err(|e| SendError::Http(e.into()))?;
                    return Ok(resp.map(UpstreamBody::h2));
                }
                Held::H1 {
                    tx,
                    reused,
                    free,
                    pool,
                    addr,
                } => (tx, reused, free, pool, addr),
            };
            if let Sender::Lean(conn) = tx {
                // Given back to the thread's spares once written (`Lean::exchange`); room for
                // a usual head, which `Make::bare` grows if it must.
                let mut head = tailguard_http::spare::head(HEAD_ROOM);
                let resp = match make.bare(&mut head) {
                    Some(bare) => conn.send_bare(head, bare, free).await?,
                    None => conn.send(make.request(false), free).await?,
                };
                return Ok(resp.map(UpstreamBody::lean));
            }
            let mut req = make.request(false);
            loop {
                let (mut hyper_tx, interim) = match tx {
                    Sender::Lean(conn) => {
                        let resp = conn.send(req, free).await?;
                        return Ok(resp.map(UpstreamBody::lean));
                    }
                    Sender::Hyper(hyper_tx, interim) => (hyper_tx, interim),
                    // A replacement whose endpoint now chose `h2`: the request is in HTTP/1.1
                    // form, and nothing was sent.
                    Sender::H2(_) => {
                        return Err(SendError::Connect(
                            "the endpoint chose h2 by ALPN on a new connection".into(),
                        ))
                    }
                };
                interim.watch(&mut req);
                match hyper_tx.try_send_request(req).await {
                    // The flood and the final head came in one read: hyper hands the head on.
                    Ok(_) if interim.flooded() => {
                        return Err(SendError::Http(
                            tailguard_http::h1::parse::Error::InterimFlood.into(),
                        ))
                    }
                    Ok(resp) => {
                        let back = Back {
                            tx: Sender::Hyper(hyper_tx, interim),
                            free,
                        };
                        return Ok(resp.map(|inner| UpstreamBody::over_h1(inner, back)));
                    }
                    Err(mut e) => match e.take_message() {
                        // A kept-alive connection the endpoint closed before it took the request:
                        // nothing was sent, so it goes on another connection (as hyper-util does).
                        Some(unsent) if reused => {
                            req = unsent;
                            (tx, reused) = pool.checkout(&free, addr, None).await?;
                        }
                        _ if interim.flooded() => {
                            return Err(SendError::Http(
                                tailguard_http::h1::parse::Error::InterimFlood.into(),
                            ))
                        }
                        _ => return Err(SendError::Http(e.into_error().into())),
                    },
                }
            }
        }
    }
}

/// The last stage of the request path: a connection to an endpoint, and the request sent on
/// it. The balanced stage ([`crate::balanced`]) calls it through this trait, so that stage's
/// tests can stand in for the network.
pub trait Stage: Sync {
    /// A connection to `addr` (over HTTP/2 when `h2`), then the request `make` builds, sent on
    /// it. `make` is called only once a connection is ready, so a request that found none
    /// keeps its body for another endpoint, and is told whether the connection speaks HTTP/2
    /// (over TLS under `protocol: auto`, the endpoint's ALPN choice decides).
    ///
    /// # Errors
    /// [`SendError`]: no connection ([`SendError::is_connect`]: nothing was sent), the pool at
    /// its limit, or the connection failing with the request on it.
    fn send<'a>(
        &'a self,
        addr: SocketAddr,
        h2: bool,
        make: &'a dyn Make,
    ) -> impl Future<Output = Result<http::Response<UpstreamBody>, SendError>> + Send + 'a;
}

/// Room asked of the thread's spares for the head of a request without a body: the request
/// line and the client's fields with the proxy's own; a longer one grows its buffer.
const HEAD_ROOM: usize = 512;

impl Stage for Upstreams {
    // Not boxed: the attempt's future holds it.
    async fn send(
        &self,
        addr: SocketAddr,
        h2: bool,
        make: &dyn Make,
    ) -> Result<http::Response<UpstreamBody>, SendError> {
        let conn = self.checkout_at(h2, addr, make.picked_at()).await?;
        conn.send(make).await
    }
}

impl Default for Upstreams {
    fn default() -> Self {
        Self::new(PoolConfig::default(), 1)
    }
}
