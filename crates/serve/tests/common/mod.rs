//! Test helpers: start a fleet on loopback port 0, and small clients (hyper and raw TCP).
#![allow(dead_code)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::time::Duration;
use tailguard_fleet::Fleet;
use tailguard_serve::{start, Running, ServeOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Serves the fleet in `yaml` on 127.0.0.1, each backend and the control endpoint on port 0.
pub async fn serve(yaml: &str) -> Running {
    serve_with(yaml, |_| {}).await
}

/// Like [`serve`], with a chance to change the options.
pub async fn serve_with(yaml: &str, tweak: impl FnOnce(&mut ServeOptions)) -> Running {
    let fleet = Fleet::from_yaml_str(yaml, "test").expect("test fleet parses");
    let mut options = ServeOptions::new(fleet);
    options.listen = "127.0.0.1:0".parse().unwrap();
    options.control = Some("127.0.0.1:0".parse().unwrap());
    tweak(&mut options);
    start(options).await.expect("fleet starts")
}

/// The address of backend `i`.
pub fn addr(running: &Running, i: usize) -> SocketAddr {
    running.backends()[i].1
}

/// A keep-alive HTTP/1.1 client on one connection.
pub struct H1 {
    sender: http1::SendRequest<Full<Bytes>>,
    /// The latency the backend reported deciding on, for the last response.
    pub decided: Option<Duration>,
}

impl H1 {
    pub async fn connect(addr: SocketAddr) -> H1 {
        let stream = tailguard_http::tcp::connect(addr, tailguard_http::Nagle::Off)
            .await
            .expect("connect");
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        H1 {
            sender,
            decided: None,
        }
    }

    /// Sends a request; returns status, body and the time from send to the full body.
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
            .unwrap();
        bounded(self.sender.ready())
            .await
            .expect("connection ready");
        let sent = Instant::now();
        let resp = bounded(self.sender.send_request(req))
            .await
            .expect("response");
        let status = resp.status().as_u16();
        self.decided = resp
            .headers()
            .get("x-tailguard-latency-us")
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .map(Duration::from_micros);
        let body = bounded(resp.into_body().collect())
            .await
            .expect("body")
            .to_bytes();
        (
            status,
            String::from_utf8_lossy(&body).into_owned(),
            sent.elapsed(),
        )
    }

    pub async fn get(&mut self, path: &str) -> (u16, String, Duration) {
        self.request("GET", path, "").await
    }
}

/// The longest any test request may take: a backend that never answers fails the test here
/// instead of hanging it. (These tests run on the real clock.)
const REQUEST_LIMIT: Duration = Duration::from_secs(30);

/// `work`'s output, or a panic naming the limit when it takes longer than [`REQUEST_LIMIT`].
async fn bounded<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(REQUEST_LIMIT, work)
        .await
        .unwrap_or_else(|_| panic!("no answer within {REQUEST_LIMIT:?}"))
}

/// One GET on a new connection.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String, Duration) {
    H1::connect(addr).await.get(path).await
}

/// What a raw request got back.
#[derive(Debug, PartialEq, Eq)]
pub enum Raw {
    Status(u16),
    Closed,
    Reset,
}

/// One `Connection: close` request on a new raw TCP connection, read to the end.
pub async fn raw_get(addr: SocketAddr) -> Raw {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
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

/// GET on the control endpoint, as JSON.
pub async fn control_get(running: &Running, path: &str) -> serde_json::Value {
    let (status, body, _) = get(running.control().unwrap(), path).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("json")
}

/// POST a JSON change to the control endpoint; returns status and JSON answer.
pub async fn control_post(running: &Running, path: &str, json: &str) -> (u16, serde_json::Value) {
    let mut client = H1::connect(running.control().unwrap()).await;
    let (status, body, _) = client.request("POST", path, json).await;
    (status, serde_json::from_str(&body).expect("json"))
}

/// Milliseconds as f64.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
