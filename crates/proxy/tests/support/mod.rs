//! Backends whose delay and status change at run time, a client, and proxy set-up helpers.

#![allow(dead_code)] // each test binary uses a different part

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailguard_proxy::config::{Config, ServiceConfig, Upstream};
use tailguard_proxy::Proxy;

#[derive(Debug, Default)]
struct State {
    delay_ms: AtomicU64,
    status: AtomicU16,
    hits: AtomicU64,
    connections: AtomicU64,
    last: Mutex<Option<HeaderMap>>,
    last_authority: Mutex<Option<String>>,
}

/// A backend on 127.0.0.1 serving HTTP/1.1 and h2c; `/trailers` answers with gRPC-style
/// trailers, `/echo` streams the request body back as it arrives.
#[derive(Debug)]
pub struct Backend {
    pub addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Backend {
    pub async fn spawn() -> Self {
        let listener = tailguard_http::tcp::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            status: AtomicU16::new(200),
            ..State::default()
        });
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) =
                    tailguard_http::tcp::accept(&listener, tailguard_http::Nagle::Off).await
                else {
                    continue;
                };
                shared.connections.fetch_add(1, Ordering::Relaxed);
                let state = Arc::clone(&shared);
                let service = service_fn(move |req| answer(Arc::clone(&state), req));
                tokio::spawn(tailguard_http::server::serve_connection(stream, service));
            }
        });
        Self { addr, state, task }
    }

    pub fn upstream(&self) -> Upstream {
        Upstream::new(self.addr)
    }

    pub fn set_delay(&self, d: Duration) {
        self.state
            .delay_ms
            .store(d.as_millis() as u64, Ordering::Relaxed);
    }

    pub fn set_status(&self, s: u16) {
        self.state.status.store(s, Ordering::Relaxed);
    }

    pub fn hits(&self) -> u64 {
        self.state.hits.load(Ordering::Relaxed)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::Relaxed)
    }

    /// The last request's URI authority (HTTP/2's `:authority`; none over HTTP/1.1).
    pub fn last_authority(&self) -> Option<String> {
        self.state.last_authority.lock().unwrap().clone()
    }

    pub fn last_headers(&self) -> HeaderMap {
        self.state.last.lock().unwrap().clone().unwrap_or_default()
    }
}

type Body = BoxBody<Bytes, hyper::Error>;

async fn answer(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    state.hits.fetch_add(1, Ordering::Relaxed);
    *state.last.lock().unwrap() = Some(req.headers().clone());
    *state.last_authority.lock().unwrap() = req.uri().authority().map(|a| a.to_string());
    let delay = state.delay_ms.load(Ordering::Relaxed);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let body: Body = if req.uri().path() == "/echo" {
        req.into_body().boxed()
    } else if req.uri().path() == "/trailers" {
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", "0".parse().unwrap());
        let frames = vec![
            Ok(Frame::data(Bytes::from_static(b"msg"))),
            Ok(Frame::trailers(trailers)),
        ];
        StreamBody::new(futures_stream(frames))
            .map_err(|never| match never {})
            .boxed()
    } else {
        Full::new(Bytes::from_static(b"ok"))
            .map_err(|never| match never {})
            .boxed()
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(state.status.load(Ordering::Relaxed)).unwrap();
    Ok(resp)
}

fn futures_stream(
    frames: Vec<Result<Frame<Bytes>, Infallible>>,
) -> impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> {
    futures_util::stream::iter(frames)
}

/// A config with one service over `upstreams`, proxy and admin on free ports.
pub fn config(service: ServiceConfig) -> Config {
    let mut c = Config::new("127.0.0.1:0".parse().unwrap(), vec![service]);
    c.admin = Some("127.0.0.1:0".parse().unwrap());
    c
}

pub async fn start(service: ServiceConfig) -> Proxy {
    tailguard_proxy::start(config(service)).await.unwrap()
}

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub fn client(h2: bool) -> HttpClient {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .http2_only(h2)
        .build(c)
}

/// Sends `method` to `path` on the proxy; returns status, headers and body.
pub async fn send(
    client: &HttpClient,
    proxy: SocketAddr,
    method: &str,
    path: &str,
) -> (StatusCode, HeaderMap, Bytes) {
    let req = Request::builder()
        .method(method)
        .uri(format!("http://{proxy}{path}"))
        .body(Full::new(Bytes::from_static(b"payload")))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    (
        parts.status,
        parts.headers,
        body.collect().await.unwrap().to_bytes(),
    )
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
