//! The one admin server: the proxy's admin port, `serve`'s control endpoint and `load`'s
//! `--metrics-addr` all run on it, so they behave alike.
//!
//! - It runs on a thread of its own (`tg-admin`) with its own small current-thread runtime:
//!   building a page never takes a turn from the tasks that serve traffic, however many
//!   clients ask, and what it costs is bounded by its [`Limits`] (a pace for all answers and
//!   connections, connections, requests in flight, a rate for expensive pages; refusals are
//!   503s and 429s, paced as the pages are).
//! - Every accepted socket has `TCP_NODELAY` ([`crate::tcp`]); accept errors such as running
//!   out of descriptors pause the loop instead of spinning it ([`crate::fds::AcceptBackoff`]).
//! - HTTP/1.1 (and prior-knowledge HTTP/2, which costs nothing extra) with a bound on how long
//!   a client may take to send its headers: a client that connects and says nothing holds a
//!   task and a descriptor for [`HEADER_READ_TIMEOUT`] at most.
//! - [`AdminServer::shutdown`] stops accepting, lets requests in flight finish (for
//!   [`DRAIN_LIMIT`] at most) and closes idle keep-alive connections; dropping the server
//!   instead stops accepting at once.
//!
//! The pages are the caller's: a handler from request to response. Binding to 127.0.0.1 by
//! default is the callers' rule (their default addresses), not this module's.
//!
//! # Example
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! use bytes::Bytes;
//! use http_body_util::Full;
//! let listener = tailguard_http::tcp::bind("127.0.0.1:0".parse().unwrap()).await?;
//! let server = tailguard_http::admin::serve(listener, |_req| async {
//!     hyper::Response::new(Full::new(Bytes::from_static(b"ok\n")))
//! })?;
//! assert!(server.addr().ip().is_loopback());
//! server.shutdown().await;
//! # Ok(()) }
//! ```

use crate::fds::AcceptBackoff;
use crate::tcp::{self, Nagle};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

mod limits;

use limits::Gates;
pub use limits::{AdminBody, Limits, HEADER_READ_TIMEOUT};

/// The longest [`AdminServer::shutdown`] waits for requests in flight.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// How long a refused connection is given to send its request and read its refusal.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// How a running server is asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Running,
    /// Stop accepting, finish what is in flight ([`DRAIN_LIMIT`] at most).
    Drain,
    /// Stop now.
    Abort,
}

/// A running admin server.
#[derive(Debug)]
pub struct AdminServer {
    addr: SocketAddr,
    stop: watch::Sender<Stop>,
    done: Option<oneshot::Receiver<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Serves `handler`'s pages on `listener` with the default [`Limits`] until the returned
/// server is shut down or dropped.
///
/// # Errors
/// When the listener's address cannot be read, or the server's thread cannot start.
pub fn serve<F, Fut>(listener: TcpListener, handler: F) -> std::io::Result<AdminServer>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    serve_with(listener, Limits::default(), handler)
}

/// Serves `handler`'s pages on `listener` within `limits`, on a thread of its own, until the
/// returned server is shut down or dropped. The handler runs on that thread: what it reads
/// of shared state it should copy under its locks and render after.
///
/// # Errors
/// When the listener's address cannot be read, or the server's thread cannot start.
pub fn serve_with<F, Fut>(
    listener: TcpListener,
    limits: Limits,
    handler: F,
) -> std::io::Result<AdminServer>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let addr = listener.local_addr()?;
    // The listener moves to the server's own runtime (it was registered with the caller's).
    let listener = listener.into_std()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (stop, stopped) = watch::channel(Stop::Running);
    let (done_tx, done) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("tg-admin".into())
        .spawn(move || {
            runtime.block_on(async move {
                let mut abort = stopped.clone();
                tokio::select! {
                    r = run(listener, Arc::new(Gates::new(limits)), handler, stopped) => {
                        if let Err(err) = r {
                            tracing::warn!(%err, "the admin server stopped");
                        }
                    }
                    _ = abort.wait_for(|s| *s == Stop::Abort) => {}
                }
            });
            // Dropping the runtime ends every connection task it still holds.
            drop(runtime);
            let _ = done_tx.send(());
        })?;
    Ok(AdminServer {
        addr,
        stop,
        done: Some(done),
        thread: Some(thread),
    })
}

impl AdminServer {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets requests in flight finish ([`DRAIN_LIMIT`] at most), and closes
    /// idle connections.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(Stop::Drain);
        if let Some(done) = self.done.take() {
            let _ = done.await;
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for AdminServer {
    /// Stops at once: the server's thread ends its connections and is joined (it is never
    /// busy for long: pages are built within its limits).
    fn drop(&mut self) {
        let _ = self.stop.send(Stop::Abort);
        if let Some(thread) = self.thread.take() {
            // A page that held the last owner of its own server ends it from within: the
            // thread stops on its own then.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

async fn run<F, Fut>(
    listener: std::net::TcpListener,
    gates: Arc<Gates>,
    handler: F,
    mut stopped: watch::Receiver<Stop>,
) -> std::io::Result<()>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let listener = TcpListener::from_std(listener)?;
    let graceful = GracefulShutdown::new();
    let builder = builder(&gates.limits);
    let mut backoff = AcceptBackoff::default();
    loop {
        // Each connection takes a turn of the pace, so a flood of connections refused one
        // after another is paced as a flood of requests is.
        let accepted = tokio::select! {
            a = async {
                gates.pace().await;
                tcp::accept(&listener, Nagle::Off).await
            } => a,
            _ = stopped.wait_for(|&s| s != Stop::Running) => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff.accepted();
                stream
            }
            Err(err) => {
                let pause = backoff.failed(&err, tokio::time::Instant::now());
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        let Some(place) = gates.connection() else {
            refuse(stream, &gates);
            continue;
        };
        let service = service(handler.clone(), Arc::clone(&gates));
        let conn = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(err) = conn.await {
                tracing::debug!(%err, "admin connection ended with an error");
            }
            drop(place);
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_LIMIT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!("admin requests still in flight after the drain limit");
    }
    Ok(())
}

/// The server presets with the header read timeout of `limits`, and as many HTTP/2 streams
/// as requests may be in flight.
fn builder(limits: &Limits) -> auto::Builder<TokioExecutor> {
    let mut builder = crate::server::builder();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let streams = u32::try_from(limits.max_in_flight).unwrap_or(u32::MAX);
    builder.http2().max_concurrent_streams(streams);
    builder
}

/// One connection's service: each request passes the gates, then `handler` answers it.
fn service<F, Fut>(
    handler: F,
    gates: Arc<Gates>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<AdminBody>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<AdminBody>, Infallible>> + Send,
> + Clone
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    service_fn(move |req: Request<Incoming>| {
        let (handler, gates) = (handler.clone(), Arc::clone(&gates));
        async move {
            let admitted = gates.admit(req.uri().path()).await;
            Ok::<_, Infallible>(match admitted {
                Ok(place) => handler(req).await.map(|b| AdminBody::new(b, Some(place))),
                Err(refusal) => refusal.map(|b| AdminBody::new(b, None)),
            })
        }
    })
}

/// Answers a connection past the limit and closes it, giving the client a moment to read
/// the answer; with as many refusals lingering as connections allowed, closes it at once.
fn refuse(stream: TcpStream, gates: &Gates) {
    let Some(place) = gates.refusal() else {
        return;
    };
    let answer = limits::connection_refusal(gates.limits.max_connections);
    tokio::spawn(async move {
        let _ = tokio::time::timeout(REFUSAL_LINGER, linger(stream, &answer)).await;
        drop(place);
    });
}

async fn linger(mut stream: TcpStream, answer: &[u8]) -> std::io::Result<()> {
    // The answer follows the request's head (an HTTP client reading an answer before it
    // has sent its request drops it), or a moment of silence.
    let mut head = Vec::with_capacity(1024);
    let _ = tokio::time::timeout(REFUSAL_LINGER / 4, async {
        let mut buf = [0u8; 1024];
        while head.len() < 8192 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(n) if n > 0 => head.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
    })
    .await;
    stream.write_all(answer).await?;
    stream.shutdown().await?;
    // Read what the client sent, so that closing does not reset the connection under its
    // answer.
    let mut sink = [0u8; 4096];
    while stream.read(&mut sink).await? > 0 {}
    Ok(())
}

#[cfg(test)]
mod tests;
