//! HTTP/1.1 upstream connections: keep-alive free lists per endpoint, no task per request.

use super::connect::{Connector, PoolExhausted, SendError};
use super::h2::{H2Pool, H2Sender};
use super::lean::{Home, Lean};
use super::tls::{Chosen, Offer};
use crate::body::ProxyBody;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;
use tailguard_http::client::{self, Writes};
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio::time::Instant;

/// HTTP/1.1 keep-alive connections per endpoint, handed from request to request without a
/// task per request: a connection goes back to its endpoint's free list when the response
/// body has been read to its end (a body dropped midway closes the connection), and the next
/// request takes the most recently freed one (the warmest).
#[derive(Debug)]
pub(super) struct H1Pool {
    pub(super) per: Mutex<super::connect::ByAddr<Arc<Free>>>,
    /// The connection limit and connect timeout, shared with the HTTP/2 pool.
    pub(super) connector: Connector,
    pub(super) idle_timeout: Duration,
    pub(super) sweeping: AtomicBool,
    /// New cleartext connections use the lean client ([`super::lean`]), not hyper's (which
    /// every TLS connection uses).
    pub(super) lean: bool,
    /// What new connections offer by ALPN over TLS: `http/1.1`, or both under `protocol:
    /// auto`, when an endpoint choosing `h2` has its connection go to `h2` (and is learned).
    pub(super) offer: Offer,
    /// Where a connection whose endpoint chose `h2` goes.
    pub(super) h2: Arc<H2Pool>,
}

/// The free connections of one endpoint.
#[derive(Debug, Default)]
pub(super) struct Free {
    pub(super) conns: Mutex<Vec<(Sender, Instant)>>,
    /// Signalled when a connection comes back, for requests waiting at the limit.
    pub(super) returned: Notify,
}

/// A kept-alive connection: hyper's client, or the lean one ([`super::lean`]); or, straight
/// from a dial where the endpoint chose `h2` by ALPN, an HTTP/2 connection (never in a free
/// list).
#[derive(Debug)]
pub(super) enum Sender {
    /// hyper's, with the bound on its requests' interim responses.
    Hyper(
        hyper::client::conn::http1::SendRequest<ProxyBody>,
        tailguard_http::client::Interim,
    ),
    Lean(Box<Lean>),
    H2(H2Sender),
}

impl Sender {
    /// The endpoint closed it (or, for the lean client, sent bytes nobody asked for).
    fn is_closed(&self) -> bool {
        match self {
            Sender::Hyper(tx, _) => tx.is_closed(),
            Sender::Lean(conn) => !conn.is_open(),
            Sender::H2(tx) => tx.is_closed(),
        }
    }
}

impl Free {
    pub(super) fn put(&self, tx: Sender) {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.push((tx, Instant::now()));
        drop(conns);
        self.returned.notify_one();
    }

    /// The most recently freed live connection, if any, as of `now` (`None`: the clock is read
    /// only if there is one). A connection whose task has not yet taken in the end of its last
    /// exchange gets one turn of the scheduler to do so; one still busy after that is dropped.
    pub(super) async fn take(
        &self,
        idle_timeout: Duration,
        now: Option<Instant>,
    ) -> Option<Sender> {
        loop {
            let (mut tx, since) = {
                let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
                conns.pop()?
            };
            let idle = now.map_or_else(
                || since.elapsed(),
                |now| now.saturating_duration_since(since),
            );
            if tx.is_closed() || idle >= idle_timeout {
                continue;
            }
            let Sender::Hyper(hyper_tx, _) = &mut tx else {
                return Some(tx);
            };
            if !hyper_tx.is_ready() {
                tokio::task::yield_now().await;
                if !hyper_tx.is_ready() {
                    // Still busy: the endpoint answered before it had read the whole request
                    // body, which is still streaming. It is let go, not put back: putting it
                    // back would wake a request waiting at the connection limit, which would
                    // take it again at once, in a loop until its wait ran out. Its task ends
                    // when the body has been sent, and so frees its permit.
                    let ready = std::future::poll_fn(|cx| Poll::Ready(hyper_tx.poll_ready(cx)));
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

impl Home for Free {
    fn put_back(&self, conn: Box<Lean>) {
        self.put(Sender::Lean(conn));
    }
}

impl H1Pool {
    pub(super) fn free(self: &Arc<Self>, addr: SocketAddr) -> Arc<Free> {
        let mut per = self.per.lock().unwrap_or_else(|p| p.into_inner());
        let free = per.entry(addr).or_default();
        Arc::clone(free)
    }

    /// Closes the idle connections of endpoints not in `present`, and drops the free list of
    /// every endpoint left with no connection (none idle, none out with a request).
    pub(super) fn release(&self, present: &HashSet<SocketAddr>) {
        let mut per = self.per.lock().unwrap_or_else(|p| p.into_inner());
        per.retain(|addr, free| {
            let mut conns = free.conns.lock().unwrap_or_else(|p| p.into_inner());
            if !present.contains(addr) {
                conns.clear();
            } else {
                conns.retain(|(tx, _)| !tx.is_closed());
            }
            // Only the map holds it: no request has it (a request in flight, or its
            // connection's response body, holds a clone until the connection comes back).
            !conns.is_empty() || Arc::strong_count(free) > 1
        });
    }

    /// Endpoints with a free list.
    pub(super) fn len(&self) -> usize {
        self.per.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// A free connection (`true`), or a new one (`false`) within the connection limit.
    pub(super) async fn checkout(
        self: &Arc<Self>,
        free: &Arc<Free>,
        addr: SocketAddr,
        mut now: Option<Instant>,
    ) -> Result<(Sender, bool), SendError> {
        let Some(limit) = &self.connector.limit else {
            if let Some(tx) = free.take(self.idle_timeout, now).await {
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
            // A wait for a connection makes `now` stale: read again after one.
            if let Some(tx) = free.take(self.idle_timeout, now.take()).await {
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
    ///
    /// Boxed: dialing is the cold path, and its future (the connect, TLS and handshake
    /// states, 1.6 KiB) would otherwise sit in every request's future, copied as each stage's
    /// future starts.
    pub(super) async fn dial(
        self: &Arc<Self>,
        addr: SocketAddr,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Result<Sender, SendError> {
        Box::pin(self.dial_unboxed(addr, permit)).await
    }

    /// [`H1Pool::dial`]'s work.
    async fn dial_unboxed(
        self: &Arc<Self>,
        addr: SocketAddr,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Result<Sender, SendError> {
        let io = self.connector.dial(addr, permit, self.offer).await?;
        if io.chosen == Chosen::H2 {
            self.h2.learned.learn(addr);
            return Ok(Sender::H2(self.h2.adopt(addr, io).await?));
        }
        let io = match self.lean {
            true => match Lean::new(io) {
                Ok(lean) => {
                    self.sweep();
                    return Ok(Sender::Lean(lean));
                }
                Err(tls) => tls,
            },
            false => io,
        };
        let (tx, interim) = client::h1(io, Writes::Flat, addr)
            .await
            .map_err(|e| SendError::Connect(e.into()))?;
        self.sweep();
        Ok(Sender::Hyper(tx, interim))
    }

    /// Starts, once, the task closing connections idle for longer than the idle timeout; it
    /// ends with the pool.
    pub(super) fn sweep(self: &Arc<Self>) {
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
