//! Client handshakes: an HTTP/1.1 or HTTP/2 connection over a socket the caller has dialed (and
//! perhaps wrapped in TLS), with the connection's driver running as its own task.
//!
//! The driver is spawned on the runtime that calls the handshake: on `load`'s current-thread
//! workers the driver and the requests share a thread, so a request costs no cross-thread
//! wake-up. A task of its own rather than polled inside each request's future, because hyper
//! wakes the request side twice per exchange (response head, then body) and each wake-up
//! would otherwise re-poll the whole HTTP/1.1 dispatcher too (measured in `load` under
//! `--rate 0`: 0.4 to 0.6 µs less CPU per request).
//!
//! Pools are not here: `load` keeps one connection per worker (HTTP/1.1) or one shared
//! (HTTP/2), the proxy keeps free lists per endpoint; each owns its pool.

mod interim;

pub use interim::Interim;

use hyper::body::Body;
use hyper::client::conn::{http1, http2};
use hyper::rt::{Read, Write};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::error::Error as StdError;
use std::future::Future;
use std::net::SocketAddr;

/// How an HTTP/1.1 connection writes a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writes {
    /// Head and body copied into one buffer and sent with one `write`: cheaper for small
    /// bodies (about 280 fewer instructions for a bodiless GET than the queue).
    Flat,
    /// hyper's queue of buffers, sent with `writev`: a large body goes out uncopied.
    Vectored,
}

/// Opens an HTTP/1.1 connection over `io` (to `peer`) and spawns its driver; a driver that
/// ends with an error (the peer reset, a malformed response) logs it at debug level with the
/// peer, and the next request on the handle fails with it. Each request should be watched by
/// the [`Interim`] that comes with the handle ([`Interim::watch`]): the driver drops the
/// connection when the request's interim responses pass their bound.
///
/// # Errors
/// hyper's error when the handshake fails.
pub async fn h1<I, B>(
    io: I,
    writes: Writes,
    peer: SocketAddr,
) -> hyper::Result<(http1::SendRequest<B>, Interim)>
where
    I: Read + Write + Unpin + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let (send, driver) = http1::Builder::new()
        .writev(writes == Writes::Vectored)
        .handshake(io)
        .await?;
    let interim = Interim::default();
    let bound = interim.clone();
    let driver = async move {
        tokio::select! {
            ended = driver => ended,
            () = bound.passed() => {
                tracing::debug!(%peer, "client connection dropped: an interim (1xx) flood");
                Ok(())
            }
        }
    };
    spawn_driver(driver, peer, "HTTP/1.1");
    Ok((send, interim))
}

/// Opens an HTTP/2 connection (prior knowledge, or `h2` chosen by ALPN) over `io` (to `peer`,
/// named in the driver's debug log as for [`h1`]) and spawns its driver, with hyper's timer
/// (needed for keep-alive pings and stream timeouts).
///
/// # Errors
/// hyper's error when the client preface cannot be written (the peer closed or reset).
pub async fn h2<I, B>(io: I, peer: SocketAddr) -> hyper::Result<http2::SendRequest<B>>
where
    I: Read + Write + Unpin + Send + 'static,
    B: Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let (send, driver) = http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .handshake(io)
        .await?;
    spawn_driver(driver, peer, "HTTP/2");
    Ok(send)
}

/// Runs a connection's driver as a task of the current runtime, logging how it ended.
fn spawn_driver<F>(driver: F, peer: SocketAddr, protocol: &'static str)
where
    F: Future<Output = hyper::Result<()>> + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(err) = driver.await {
            tracing::debug!(%err, %peer, protocol, "client connection ended with an error");
        }
    });
}
