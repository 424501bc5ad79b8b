//! Pooled upstream connections: hyper-util's pooling client over sockets dialed by
//! [`tailguard_http::tcp::connect`] (so every upstream socket has `TCP_NODELAY`).
//!
//! Two pools per proxy: HTTP/1.1 keep-alive, and HTTP/2 prior knowledge (one multiplexed
//! connection per endpoint, requests balanced per request, not per connection). Only the
//! proxy's own `http://IP:PORT` URIs reach the connector, so it never resolves names.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::Uri;
use hyper_util::client::legacy::Client as Pool;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tailguard_http::tcp::{self, Nagle};
use tokio::net::TcpStream;

/// A request or response body as the proxy forwards it.
pub type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// Dials `IP:PORT` authorities with `TCP_NODELAY` set.
#[derive(Clone, Copy, Debug, Default)]
pub struct Connector;

impl tower::Service<Uri> for Connector {
    type Response = TokioIo<TcpStream>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TokioIo<TcpStream>>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        Box::pin(async move {
            let addr: SocketAddr = uri
                .authority()
                .and_then(|a| a.as_str().parse().ok())
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not an IP:PORT"))?;
            tcp::connect(addr, Nagle::Off).await.map(TokioIo::new)
        })
    }
}

/// The upstream pools.
#[derive(Clone, Debug)]
pub struct Upstreams {
    http1: Pool<Connector, ProxyBody>,
    http2: Pool<Connector, ProxyBody>,
}

impl Upstreams {
    /// Both pools, keeping idle connections for 90 s.
    pub fn new() -> Self {
        let build = |h2: bool| {
            Pool::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(90))
                .pool_timer(TokioTimer::new())
                .http2_only(h2)
                .build(Connector)
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
        Self::new()
    }
}
