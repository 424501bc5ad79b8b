//! Proxy set-up helpers and a pooled client; the backend is testsupport's [`TestServer`].

pub mod peers;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::net::SocketAddr;
use std::time::Duration;
use tailguard_proxy::config::{Config, ServiceConfig, Upstream};
use tailguard_proxy::Proxy;
use tailguard_testsupport::bounded;
use tailguard_testsupport::TestServer;

/// The backend of the proxy's tests: testsupport's one test server, in the test's runtime
/// (so with paused time its delays are virtual), as a configured upstream.
pub trait AsUpstream {
    /// The upstream that forwards to this backend.
    fn upstream(&self) -> Upstream;
}

impl AsUpstream for TestServer {
    fn upstream(&self) -> Upstream {
        Upstream::new(self.addr())
    }
}

/// A config with one service over `upstreams`, proxy and admin on free ports.
pub fn config(service: ServiceConfig) -> Config {
    config_of(vec![service])
}

/// A config with these services, proxy and admin on free ports, seeded.
pub fn config_of(services: Vec<ServiceConfig>) -> Config {
    let mut c = Config::new("127.0.0.1:0".parse().unwrap(), services);
    c.admin = Some("127.0.0.1:0".parse().unwrap());
    // Seeded: every random pick of a test replays.
    c.seed = Some(1);
    c
}

pub async fn start(service: ServiceConfig) -> Proxy {
    tailguard_proxy::start(config(service)).await.unwrap()
}

/// `config` with `limits.clientErrorDetail: full`: the proxy's own answers name the endpoint
/// and the error chain (the tests that read a failure's cause from the response).
pub fn detailed(mut config: Config) -> Config {
    config.limits.client_error_detail = tailguard_proxy::config::ErrorDetail::Full;
    config
}

/// [`start`] with the full error detail ([`detailed`]).
pub async fn start_detailed(service: ServiceConfig) -> Proxy {
    tailguard_proxy::start(detailed(config(service)))
        .await
        .unwrap()
}

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub fn client(h2: bool) -> HttpClient {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .http2_only(h2)
        .build(c)
}

/// Sends `method` to `path` on the proxy; returns status, headers and body. Bounded like
/// every test client ([`tailguard_testsupport::client::LIMIT`]). A method that carries a body
/// (`POST`, `PUT`, ...) sends `payload`; `GET`, `HEAD`, `DELETE`, `OPTIONS` and `TRACE` send
/// none, as clients do (the proxy sends those with a body on a connection of their own).
pub async fn send(
    client: &HttpClient,
    proxy: SocketAddr,
    method: &str,
    path: &str,
) -> (StatusCode, HeaderMap, Bytes) {
    let bodiless = matches!(method, "GET" | "HEAD" | "DELETE" | "OPTIONS" | "TRACE");
    let body = if bodiless { "" } else { "payload" };
    let req = Request::builder()
        .method(method)
        .uri(format!("http://{proxy}{path}"))
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap();
    let resp = bounded(client.request(req)).await.unwrap();
    let (parts, body) = resp.into_parts();
    (
        parts.status,
        parts.headers,
        bounded(body.collect()).await.unwrap().to_bytes(),
    )
}

/// `workers` concurrent clients, each sending `each` GETs one after the other through the proxy
/// at `addr`; every answer must be 200.
pub async fn load(addr: SocketAddr, workers: usize, each: usize) {
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            tokio::spawn(async move {
                let c = client(false);
                for _ in 0..each {
                    assert_eq!(send(&c, addr, "GET", "/").await.0, 200);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

/// Polls `check` every 20 ms until it holds or `limit` passes.
pub async fn eventually(limit: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// The first service's endpoints as the admin `/endpoints` page shows them, read in process.
/// A test on tokio's paused clock reads these rather than the page: the admin server answers
/// from a thread of its own, and the paused clock runs on while a test waits for it.
pub fn views(proxy: &Proxy) -> Vec<tailguard_proxy::EndpointView> {
    let shared = proxy.shared();
    shared.services()[0].endpoints().views(shared.clock.now())
}

/// The value of `name` for service `web` in the proxy's metrics, summed over its routes, read
/// in process (as [`views`], for paused clocks); 0 when absent.
pub fn metric(proxy: &Proxy, name: &str) -> f64 {
    let text = proxy.metrics_text();
    let prefix = format!("{name}{{service=\"web\"");
    text.lines()
        .filter(|l| l.starts_with(&prefix) && !l.contains("endpoint="))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A gRPC call (`content-type: application/grpc`, over HTTP/2 with `c`) through `proxy` to the
/// test backend's `/trailers`, which answers a body, then `grpc-status: code` in its trailers
/// (not trailers-only); returns the status the client read.
pub async fn grpc_call(c: &HttpClient, proxy: SocketAddr, code: u8) -> Option<u8> {
    let req = grpc_request(proxy, &format!("/trailers?grpc-status={code}"));
    let resp = bounded(c.request(req)).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        !resp.headers().contains_key("grpc-status"),
        "not trailers-only"
    );
    let collected = bounded(resp.into_body().collect()).await.unwrap();
    collected.trailers().and_then(tailguard_proxy::grpc::status)
}

/// A unary gRPC request (one empty message) to `path` on `proxy`.
fn grpc_request(proxy: SocketAddr, path: &str) -> Request<Full<Bytes>> {
    Request::post(format!("http://{proxy}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from_static(&[0, 0, 0, 0, 0])))
        .unwrap()
}

/// A gRPC call through `proxy` (over HTTP/2 with `c`) that the proxy answers itself: the
/// `grpc-status` and the decoded `grpc-message` of its trailers-only answer.
pub async fn grpc_call_message(c: &HttpClient, proxy: SocketAddr) -> (Option<u8>, Option<String>) {
    let resp = bounded(c.request(grpc_request(proxy, "/pkg.Svc/Call")))
        .await
        .unwrap();
    let headers = resp.headers();
    let message = headers
        .get("grpc-message")
        .map(|v| v.to_str().unwrap().replace("%20", " "));
    (tailguard_proxy::grpc::status(headers), message)
}

/// One unary call of `tailguard serve`'s ping (an empty PingRequest in `body`) on the HTTP/2
/// connection `tx` to `addr`; the `grpc-status` the client read (trailers-only or trailers).
pub async fn ping_call<B>(
    tx: &mut hyper::client::conn::http2::SendRequest<B>,
    addr: SocketAddr,
    body: B,
) -> Option<u8>
where
    B: hyper::body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let req = Request::post(format!("http://{addr}{}", tailguard_serve::grpc::PING_PATH))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(body)
        .unwrap();
    bounded(tx.ready()).await.unwrap();
    let resp = bounded(tx.send_request(req)).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let head = tailguard_proxy::grpc::status(resp.headers());
    let collected = bounded(resp.into_body().collect()).await.unwrap();
    head.or_else(|| collected.trailers().and_then(tailguard_proxy::grpc::status))
}

/// Writes `raw` on a new connection and returns everything read until the proxy closes it or
/// 5 s pass (a write the proxy cut short by answering first is no error).
pub async fn exchange(addr: SocketAddr, raw: &[u8]) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _ = tokio::io::AsyncWriteExt::write_all(&mut s, raw).await;
    let mut out = Vec::new();
    let read = tokio::io::AsyncReadExt::read_to_end(&mut s, &mut out);
    let _ = tokio::time::timeout(Duration::from_secs(5), read).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// The status code of an HTTP/1.1 response read by [`exchange`] (empty: none).
pub fn status_of(resp: &str) -> &str {
    resp.get(9..12).unwrap_or("")
}

/// A `tailguard serve` fleet from the fleet file `yaml`, its backends on free ports of
/// 127.0.0.1, no control endpoint.
pub async fn fleet(yaml: &str) -> tailguard_serve::Running {
    let fleet = tailguard_fleet::Fleet::from_yaml_str(yaml, "test").unwrap();
    let mut options = tailguard_serve::ServeOptions::new(fleet);
    options.listen = "127.0.0.1:0".parse().unwrap();
    options.control = None;
    tailguard_serve::start(options).await.unwrap()
}

/// The value of the unlabelled series `name` in the proxy's metrics; 0 when absent.
pub fn metric_total(proxy: &Proxy, name: &str) -> f64 {
    let text = proxy.metrics_text();
    let prefix = format!("{name} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}
