//! Small test clients, every wait bounded by [`LIMIT`]: a backend or proxy that never answers
//! fails the test with a message instead of hanging it.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::HeaderMap;
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tailguard_http::{tcp, Nagle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

/// The longest any test request may take. Under paused time it is virtual, and only fires
/// once nothing else is left to run: a real hang.
pub const LIMIT: Duration = Duration::from_secs(30);

/// `work`'s output, or a panic naming the limit when it takes longer than [`LIMIT`].
///
/// # Panics
/// When `work` does not finish within [`LIMIT`].
pub async fn bounded<T>(work: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, work)
        .await
        .unwrap_or_else(|_| panic!("no answer within {LIMIT:?}"))
}

/// A keep-alive HTTP/1.1 client on one connection (with `TCP_NODELAY`).
#[derive(Debug)]
pub struct H1 {
    sender: http1::SendRequest<Full<Bytes>>,
    /// The last response's headers.
    pub headers: HeaderMap,
}

impl H1 {
    /// Connects to `addr`.
    ///
    /// # Panics
    /// When the connection or the handshake fails or takes longer than [`LIMIT`].
    pub async fn connect(addr: SocketAddr) -> H1 {
        let stream = bounded(tcp::connect(addr, Nagle::Off))
            .await
            .expect("connect");
        let (sender, conn) = bounded(http1::handshake(TokioIo::new(stream)))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        H1 {
            sender,
            headers: HeaderMap::new(),
        }
    }

    /// Sends a request with `host: test`; returns status, body and the time from send to the
    /// full body.
    ///
    /// # Panics
    /// When the connection fails or the answer takes longer than [`LIMIT`].
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        body: &str,
    ) -> (u16, String, Duration) {
        let req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "test")
            .body(Full::new(Bytes::from(body.to_owned())))
            .expect("valid request");
        bounded(self.sender.ready())
            .await
            .expect("connection ready");
        let sent = Instant::now();
        let resp = bounded(self.sender.send_request(req))
            .await
            .expect("response");
        let status = resp.status().as_u16();
        let (parts, body) = resp.into_parts();
        self.headers = parts.headers;
        let body = bounded(body.collect()).await.expect("body").to_bytes();
        (
            status,
            String::from_utf8_lossy(&body).into_owned(),
            sent.elapsed(),
        )
    }

    /// A GET of `path`.
    ///
    /// # Panics
    /// As [`request`](Self::request).
    pub async fn get(&mut self, path: &str) -> (u16, String, Duration) {
        self.request("GET", path, "").await
    }
}

/// One GET on a new connection.
///
/// # Panics
/// As [`H1::request`].
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String, Duration) {
    H1::connect(addr).await.get(path).await
}

/// What a raw request got back.
#[derive(Debug, PartialEq, Eq)]
pub enum Raw {
    /// A response with this status.
    Status(u16),
    /// The connection closed without a byte.
    Closed,
    /// The connection was reset.
    Reset,
}

/// One `Connection: close` request written on a new raw TCP connection, read to the end.
///
/// # Panics
/// When the connection fails, the read fails other than by a reset, or the answer takes
/// longer than [`LIMIT`].
pub async fn raw_get(addr: SocketAddr) -> Raw {
    let mut stream = bounded(tcp::connect(addr, Nagle::Off))
        .await
        .expect("connect");
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut buf = Vec::new();
    match bounded(stream.read_to_end(&mut buf)).await {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Raw::Reset,
        Err(e) => panic!("unexpected read error {e}"),
        Ok(_) if buf.is_empty() => Raw::Closed,
        Ok(_) => {
            let head = String::from_utf8_lossy(&buf[..12.min(buf.len())]).into_owned();
            Raw::Status(head[9..12].parse().expect("status line"))
        }
    }
}
