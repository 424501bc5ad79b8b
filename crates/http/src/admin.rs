//! The one admin server: the proxy's admin port, `serve`'s control endpoint and `load`'s
//! `--metrics-addr` all run on it, so they behave alike.
//!
//! - It runs on a thread of its own (`tg-admin`) with its own small current-thread runtime:
//!   building a page never takes a turn from the tasks that serve traffic, however many
//!   clients ask, and what it costs is bounded by its [`Limits`] (paces for accepted
//!   connections, for answers and for health checks; connections, requests in flight, a rate
//!   for expensive pages; refusals are 503s and 429s, paced as the pages are).
//! - Health checks (`GET`/`HEAD` of `/ready` and `/live` by default) are always answered:
//!   past every connection place, a few more connections are kept in a probe lane where only
//!   a health check whose head arrives within a second is answered ([`Limits::probe_lane`]).
//! - Every accepted socket has `TCP_NODELAY` ([`crate::tcp`]); accept errors such as running
//!   out of descriptors pause the loop instead of spinning it ([`crate::fds::AcceptBackoff`]).
//! - HTTP/1.1 (and prior-knowledge HTTP/2, which costs nothing extra) with a bound on how long
//!   a client may take to send its headers: a client that connects and says nothing, or
//!   trickles its first request, holds a task and a descriptor for [`HEADER_READ_TIMEOUT`] at
//!   most (hyper's own timeout covers HTTP/1.1 heads once it knows the protocol; a watchdog
//!   covers the first request, whatever the protocol).
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
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch, OwnedSemaphorePermit};

mod bucket;
mod lane;
mod limits;
mod stage;

use lane::Lane;
use limits::Gates;
pub use limits::{AdminBody, Limits, HEADER_READ_TIMEOUT, PROBE_HEAD_TIMEOUT};
use stage::{Progress, Stage};

/// The longest [`AdminServer::shutdown`] waits for requests in flight.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(5);

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
                // The accept loop is a task, not the runtime's main future (which the
                // runtime polls first when woken): after its yield it runs again behind the
                // connections woken meanwhile (see `lane::Lane::make_room`).
                let gates = Arc::new(Gates::new(limits));
                let server = tokio::spawn(run(listener, gates, handler, stopped));
                tokio::select! {
                    r = server => match r {
                        Ok(Ok(())) => {}
                        Ok(Err(err)) => tracing::warn!(%err, "the admin server stopped"),
                        Err(err) => tracing::warn!(%err, "the admin server failed"),
                    },
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

/// The accept loop:
/// 1. a turn of the accepts' pace, then a connection;
/// 2. with a connection place free, the full server serves it;
/// 3. else the probe lane takes it, closing another to make room if need be ([`lane`]), and
///    the loop yields so that it reads what has arrived before the next accept;
/// 4. else it is closed at once.
///
/// On [`Stop::Drain`] it stops accepting and waits for the connections ([`DRAIN_LIMIT`]).
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
    let mut lane = Lane::new(gates.limits.probe_lane);
    let mut backoff = AcceptBackoff::default();
    loop {
        // 1. A connection after its turn.
        let accepted = tokio::select! {
            a = accept(&listener, &gates, &mut backoff) => a,
            _ = stopped.wait_for(|&s| s != Stop::Running) => break,
        };
        let Some(stream) = accepted else { continue };
        // 2. A place: the full server.
        if let Some(place) = gates.connection() {
            let progress = Progress::default();
            let service = service(handler.clone(), Arc::clone(&gates), progress.clone());
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            let conn = graceful.watch(conn.into_owned());
            let limit = gates.limits.header_read_timeout;
            tokio::spawn(connection(conn, progress, limit, place));
        } else if lane.make_room(&gates) {
            // 3. The probe lane.
            let fd = Some(std::os::fd::AsRawFd::as_raw_fd(&stream));
            let progress = Progress::default();
            let conn = lane::serve(
                stream,
                handler.clone(),
                Arc::clone(&gates),
                progress.clone(),
            );
            lane.enter(progress, tokio::spawn(conn).abort_handle(), fd);
            tokio::task::yield_now().await;
        }
        // 4. Neither: `stream` is dropped, closed unanswered.
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

/// Step 1 of the accept loop: a connection after its turn, or `None` after an accept error
/// (and the pause [`AcceptBackoff`] asks for).
async fn accept(
    listener: &TcpListener,
    gates: &Gates,
    backoff: &mut AcceptBackoff,
) -> Option<TcpStream> {
    gates.accept_turn().await;
    match tcp::accept(listener, Nagle::Off).await {
        Ok((stream, _)) => {
            backoff.accepted();
            Some(stream)
        }
        Err(err) => {
            let pause = backoff.failed(&err, tokio::time::Instant::now());
            tokio::time::sleep(pause).await;
            None
        }
    }
}

/// Runs a connection in one of the places, closing it when no request has come within
/// `limit`: hyper's header read timeout starts only once the HTTP/1.1 server has the
/// connection, after hyper-util has read enough to tell the protocol, so a silent client (or
/// one trickling the HTTP/2 preface) would otherwise keep its place for good.
async fn connection<C, E>(conn: C, progress: Progress, limit: Duration, place: OwnedSemaphorePermit)
where
    C: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    tokio::pin!(conn);
    let ended = match tokio::time::timeout(limit, conn.as_mut()).await {
        Ok(ended) => Some(ended),
        Err(_) if progress.asked() => Some(conn.await),
        Err(_) => None,
    };
    if let Some(Err(err)) = ended {
        tracing::debug!(%err, "admin connection ended with an error");
    }
    drop(place);
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

/// One connection's service: each request passes the gates, then `handler` answers it;
/// `progress` tells the connection's watchdog that a request came.
fn service<F, Fut>(
    handler: F,
    gates: Arc<Gates>,
    progress: Progress,
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
        progress.set(Stage::Answering);
        let (handler, gates) = (handler.clone(), Arc::clone(&gates));
        async move {
            let admitted = gates.admit(req.method(), req.uri().path()).await;
            Ok::<_, Infallible>(match admitted {
                Ok(place) => handler(req).await.map(|b| AdminBody::new(b, place)),
                Err(refusal) => refusal.map(|b| AdminBody::new(b, None)),
            })
        }
    })
}

#[cfg(test)]
mod tests;
