//! HTTP/2 upstream connections: one multiplexed connection per endpoint.

use super::connect::{Conn, Connector, SendError};
use super::h2_stream::{self, RecvBody};
use super::tls::Chosen;
use crate::body::ProxyBody;
use bytes::Bytes;
use hyper_util::rt::TokioIo;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// HTTP/2 (prior knowledge) connections, one per endpoint, shared by every request to it (a
/// `SendRequest` is a cheap handle onto the multiplexed connection). A closed connection is
/// replaced by the next request; concurrent first requests may each dial, and the one that
/// finishes last keeps its connection in the slot while the others' close when done.
#[derive(Debug)]
pub(super) struct H2Pool {
    pub(super) connector: Connector,
    pub(super) per: Mutex<super::connect::ByAddr<H2Sender>>,
    /// Endpoints that chose `h2` by ALPN when offered both (`protocol: auto` over TLS).
    pub(super) learned: Arc<Learned>,
}

/// A handle onto an endpoint's HTTP/2 connection (the `h2` crate's, cheap to clone), and
/// whether the connection has ended.
#[derive(Clone, Debug)]
pub(super) struct H2Sender {
    tx: ::h2::client::SendRequest<Bytes>,
    closed: Arc<AtomicBool>,
}

impl H2Sender {
    /// The connection has ended (its task saw it close or fail).
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Waits until the connection can take another stream.
    async fn ready(&mut self) -> Result<(), ::h2::Error> {
        std::future::poll_fn(|cx| self.tx.poll_ready(cx)).await
    }

    /// Sends `req` ([`h2_stream::send`]).
    ///
    /// # Errors
    /// The stream's or the connection's error.
    pub(super) async fn send_request(
        &mut self,
        req: http::Request<ProxyBody>,
    ) -> Result<http::Response<RecvBody>, ::h2::Error> {
        h2_stream::send(&mut self.tx, req).await
    }
}

/// hyper's HTTP/2 client settings, which the proxy used before it drove `h2` itself: windows
/// of 2 MiB a stream and 5 MiB the connection, 16 KiB heads, at most 1 MiB buffered to send,
/// no server push.
fn builder() -> ::h2::client::Builder {
    let mut b = ::h2::client::Builder::new();
    b.initial_max_send_streams(100)
        .initial_window_size(2 * 1024 * 1024)
        .initial_connection_window_size(5 * 1024 * 1024)
        .max_header_list_size(16 * 1024)
        .max_send_buffer_size(1024 * 1024)
        .enable_push(false);
    b
}

impl H2Pool {
    /// The endpoint's connection, ready for a request.
    pub(super) async fn checkout(&self, addr: SocketAddr) -> Result<H2Sender, SendError> {
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
    ///
    /// Boxed: the cold path, kept out of every request's future ([`super::h1::H1Pool::dial`]).
    pub(super) async fn dial(&self, addr: SocketAddr) -> Result<H2Sender, SendError> {
        Box::pin(self.dial_unboxed(addr)).await
    }

    /// [`H2Pool::dial`]'s work.
    async fn dial_unboxed(&self, addr: SocketAddr) -> Result<H2Sender, SendError> {
        let conn = self.connector.connect(addr).await?;
        if conn.chosen == Chosen::Http1 {
            // Over TLS the endpoint was offered `h2` alone and chose `http/1.1` anyway (or
            // no longer does HTTP/2): nothing was sent, and HTTP requests go back to HTTP/1.1.
            self.learned.forget(addr);
            return Err(SendError::Connect(
                "the endpoint chose http/1.1 by ALPN when offered only h2".into(),
            ));
        }
        self.adopt(addr, conn).await
    }

    /// HTTP/2 over `conn`, already dialed to `addr`, its task spawned, put in the endpoint's
    /// slot.
    pub(super) async fn adopt(&self, addr: SocketAddr, conn: Conn) -> Result<H2Sender, SendError> {
        let (tx, driver) = builder()
            .handshake::<_, Bytes>(TokioIo::new(conn))
            .await
            .map_err(|e| SendError::Connect(e.into()))?;
        let closed = Arc::new(AtomicBool::new(false));
        let ended = Arc::clone(&closed);
        tokio::spawn(async move {
            if let Err(err) = driver.await {
                tracing::debug!(%err, peer = %addr, "HTTP/2 upstream connection ended with an error");
            }
            ended.store(true, Ordering::Release);
        });
        let tx = H2Sender { tx, closed };
        let mut per = self.per.lock().unwrap_or_else(|p| p.into_inner());
        per.retain(|_, tx| !tx.is_closed());
        per.insert(addr, tx.clone());
        Ok(tx)
    }
}

impl H2Pool {
    /// Lets go of the connections to endpoints not in `present` (each closes once its
    /// streams have ended) and of closed ones, and forgets absent endpoints' `h2` choice.
    pub(super) fn release(&self, present: &HashSet<SocketAddr>) {
        let mut per = self.per.lock().unwrap_or_else(|p| p.into_inner());
        per.retain(|addr, tx| present.contains(addr) && !tx.is_closed());
        drop(per);
        self.learned.set().retain(|addr| present.contains(addr));
    }

    /// Endpoints with a connection slot.
    pub(super) fn len(&self) -> usize {
        self.per.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// Endpoints that chose `h2` by ALPN when offered both (`protocol: auto` over TLS), so that
/// their HTTP requests go over HTTP/2; forgotten when one no longer does.
#[derive(Debug, Default)]
pub(super) struct Learned(Mutex<HashSet<SocketAddr>>);

impl Learned {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<SocketAddr>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `addr` chose h2.
    pub(super) fn knows(&self, addr: SocketAddr) -> bool {
        self.set().contains(&addr)
    }

    pub(super) fn learn(&self, addr: SocketAddr) {
        self.set().insert(addr);
    }

    pub(super) fn forget(&self, addr: SocketAddr) {
        self.set().remove(&addr);
    }

    /// Endpoints remembered.
    pub(super) fn len(&self) -> usize {
        self.set().len()
    }
}
