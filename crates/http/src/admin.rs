//! The one admin server: the proxy's admin port, `serve`'s control endpoint and `load`'s
//! `--metrics-addr` all run on it, so they behave alike.
//!
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
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The longest a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest [`AdminServer::shutdown`] waits for requests in flight.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// A running admin server.
#[derive(Debug)]
pub struct AdminServer {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

/// Serves `handler`'s pages on `listener` until the returned server is shut down or dropped.
///
/// # Errors
/// When the listener's address cannot be read.
pub fn serve<F, Fut>(listener: TcpListener, handler: F) -> std::io::Result<AdminServer>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let addr = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(accept_loop(listener, handler, stopped));
    Ok(AdminServer {
        addr,
        stop,
        task: Some(task),
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
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn accept_loop<F, Fut>(listener: TcpListener, handler: F, mut stopped: watch::Receiver<bool>)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let graceful = GracefulShutdown::new();
    let mut builder = crate::server::builder();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let mut backoff = AcceptBackoff::default();
    loop {
        let accepted = tokio::select! {
            a = tcp::accept(&listener, Nagle::Off) => a,
            _ = stopped.wait_for(|&s| s) => break,
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
        let handler = handler.clone();
        let service = service_fn(move |req| {
            let page = handler(req);
            async move { Ok::<_, Infallible>(page.await) }
        });
        let conn = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(err) = conn.await {
                tracing::debug!(%err, "admin connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_LIMIT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!("admin requests still in flight after the drain limit");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn ok_server() -> AdminServer {
        let listener = tcp::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        serve(listener, |req: Request<Incoming>| async move {
            let path = req.uri().path().to_owned();
            Response::new(Full::new(Bytes::from(path)))
        })
        .unwrap()
    }

    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = tcp::connect(addr, Nagle::Off).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out))
            .await
            .expect("answered in time")
            .unwrap();
        out
    }

    #[tokio::test]
    async fn serves_the_handler() {
        let server = ok_server().await;
        let answer = get(server.addr(), "/metrics").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("/metrics"), "{answer}");
        server.shutdown().await;
    }

    #[tokio::test]
    async fn shutdown_stops_accepting() {
        let server = ok_server().await;
        let addr = server.addr();
        server.shutdown().await;
        assert!(tcp::connect(addr, Nagle::Off).await.is_err());
    }

    /// A client that connects and never finishes its headers is cut off at the header read
    /// timeout (on tokio's paused clock, so the test takes no time).
    #[tokio::test(start_paused = true)]
    async fn a_silent_client_is_cut_off() {
        let server = ok_server().await;
        let mut s = tcp::connect(server.addr(), Nagle::Off).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let mut buf = Vec::new();
        let read = tokio::time::timeout(HEADER_READ_TIMEOUT * 2, s.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "the connection was closed by the server");
        server.shutdown().await;
    }
}
