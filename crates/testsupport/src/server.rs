//! [`TestServer`]: a real HTTP/1.1 and HTTP/2 backend on 127.0.0.1 whose delay and status a
//! test sets before or while it runs, and which counts what it sees.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{HeaderMap, Request, Response, StatusCode, Version};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tailguard_http::{server, tcp, Nagle};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Builds a [`TestServer`].
#[derive(Clone, Debug)]
pub struct Builder {
    delay: Duration,
    stall: Option<(u64, Duration)>,
    status: u16,
    body: Bytes,
    tls: bool,
    every_loopback: bool,
    record: bool,
}

/// A running test server on 127.0.0.1; stops when dropped.
///
/// It answers every request with its status (200 unless set) and `ok`, after its delay, except
/// two paths: `/echo` streams the request body back as it arrives, and `/trailers` (and every
/// method of the test package, `/tailguard.test.Svc/Get`) answers `msg` followed by gRPC-style
/// trailers (`grpc-status: 0`, or the code of a `?grpc-status=N` query).
#[derive(Debug)]
pub struct TestServer {
    addr: SocketAddr,
    state: Arc<State>,
    runs: Runs,
}

/// Where a server runs, and how it is stopped.
#[derive(Debug)]
enum Runs {
    /// On a thread of its own ([`Builder::spawn`]).
    Thread {
        stop: Option<oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
    /// As a task of the test's runtime ([`Builder::start`]).
    Task(JoinHandle<()>),
}

#[derive(Debug)]
struct State {
    tls: bool,
    body: Bytes,
    stall: Option<(u64, Duration)>,
    /// Nanoseconds.
    delay: AtomicU64,
    status: AtomicU16,
    hits: AtomicU64,
    h2_hits: AtomicU64,
    connections: AtomicU64,
    stall_until: Mutex<Option<Instant>>,
    last: Mutex<Last>,
    /// A header every response carries, when set.
    extra: Mutex<Option<(hyper::header::HeaderName, hyper::header::HeaderValue)>>,
    /// One path answered apart (a health check's): its status and delay, when set.
    apart: Mutex<Option<(String, u16, Duration)>>,
    /// Requests to that path (not counted in `hits`).
    apart_hits: AtomicU64,
    /// Every request received, in order, when recording ([`Builder::record`]).
    received: Option<Mutex<Vec<Received>>>,
}

/// A request as the server received it ([`Builder::record`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// The method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// The headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

/// The most requests a recording server keeps; later ones are not kept.
pub const MAX_RECEIVED: usize = 100_000;

/// What the last request carried.
#[derive(Debug, Default)]
struct Last {
    host: Option<String>,
    authority: Option<String>,
    headers: HeaderMap,
}

impl TestServer {
    /// A server answering `200 ok` at once, until configured otherwise.
    pub fn builder() -> Builder {
        Builder {
            delay: Duration::ZERO,
            stall: None,
            status: 200,
            body: Bytes::from_static(b"ok"),
            tls: false,
            every_loopback: false,
            record: false,
        }
    }

    /// A default server ([`builder`](Self::builder)) running in the test's runtime
    /// ([`Builder::start`]).
    pub async fn start() -> TestServer {
        Self::builder().start().await
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR` (or `https://` for a TLS server) followed by `path`.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.state.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.addr, path)
    }

    /// From now on every response waits `d` before it is sent.
    pub fn set_delay(&self, d: Duration) {
        self.state.delay.store(nanos(d), Ordering::SeqCst);
    }

    /// From now on every response carries the header `name: value` (`None`: no extra header).
    ///
    /// # Panics
    /// When `name` or `value` is not a valid header.
    pub fn set_header(&self, header: Option<(&str, &str)>) {
        let parsed = header.map(|(name, value)| {
            (
                hyper::header::HeaderName::from_bytes(name.as_bytes()).expect("a header name"),
                hyper::header::HeaderValue::from_str(value).expect("a header value"),
            )
        });
        *self
            .state
            .extra
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = parsed;
    }

    /// From now on requests to `path` (a health check's) are answered `code` after `delay`,
    /// whatever the other paths answer, and counted apart ([`TestServer::path_hits`]) rather
    /// than in [`TestServer::hits`]; `None`: `path` is like the others again.
    ///
    /// # Panics
    /// When `code` is not a valid HTTP status.
    pub fn set_path(&self, path: &str, answer: Option<(u16, Duration)>) {
        if let Some((code, _)) = answer {
            assert!(StatusCode::from_u16(code).is_ok(), "invalid status {code}");
        }
        *self
            .state
            .apart
            .lock()
            .unwrap_or_else(PoisonError::into_inner) =
            answer.map(|(code, delay)| (path.to_owned(), code, delay));
    }

    /// Requests to the path set apart by [`TestServer::set_path`].
    pub fn path_hits(&self) -> u64 {
        self.state.apart_hits.load(Ordering::SeqCst)
    }

    /// From now on every response has status `code`.
    ///
    /// # Panics
    /// When `code` is not a valid HTTP status (100 to 999).
    pub fn set_status(&self, code: u16) {
        assert!(StatusCode::from_u16(code).is_ok(), "invalid status {code}");
        self.state.status.store(code, Ordering::SeqCst);
    }

    /// Requests received so far.
    pub fn hits(&self) -> u64 {
        self.state.hits.load(Ordering::SeqCst)
    }

    /// Requests received over HTTP/2 so far.
    pub fn h2_requests(&self) -> u64 {
        self.state.h2_hits.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// The last request's host: its `Host` headers joined with `, ` over HTTP/1.1 (so a
    /// duplicate shows), its `:authority` over HTTP/2.
    pub fn last_host(&self) -> Option<String> {
        self.last().host.clone()
    }

    /// The last request's URI authority (HTTP/2's `:authority`, or an HTTP/1.1 request in
    /// absolute form); `None` for an HTTP/1.1 request in origin form.
    pub fn last_authority(&self) -> Option<String> {
        self.last().authority.clone()
    }

    /// Every request received so far, in order (empty unless built with
    /// [`Builder::record`]).
    pub fn received(&self) -> Vec<Received> {
        self.state.received.as_ref().map_or_else(Vec::new, |r| {
            r.lock().unwrap_or_else(PoisonError::into_inner).clone()
        })
    }

    /// The last request's headers (empty before the first request).
    pub fn last_headers(&self) -> HeaderMap {
        self.last().headers.clone()
    }

    fn last(&self) -> std::sync::MutexGuard<'_, Last> {
        self.state
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        match &mut self.runs {
            Runs::Thread { stop, thread } => {
                if let Some(stop) = stop.take() {
                    let _ = stop.send(());
                }
                if let Some(t) = thread.take() {
                    let _ = t.join();
                }
            }
            Runs::Task(task) => task.abort(),
        }
    }
}

impl Builder {
    /// Every response waits this long before it is sent (until [`TestServer::set_delay`]).
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }

    /// When request number `n` (counting from 1) arrives, the server stalls for `d`: that
    /// request and every request arriving during the stall is answered only when it ends,
    /// like a process paused by a GC or SIGSTOP.
    pub fn stall_after(mut self, n: u64, d: Duration) -> Self {
        self.stall = Some((n, d));
        self
    }

    /// The body of every response but `/echo` and `/trailers` (by default `ok`).
    pub fn body(mut self, body: &'static str) -> Self {
        self.body = Bytes::from_static(body.as_bytes());
        self
    }

    /// The status of every response (until [`TestServer::set_status`]).
    pub fn status(mut self, code: u16) -> Self {
        self.status = code;
        self
    }

    /// Keeps every request it receives (method, path, headers, whole body; up to
    /// [`MAX_RECEIVED`]) for [`TestServer::received`].
    pub fn record(mut self) -> Self {
        self.record = true;
        self
    }

    /// Serves HTTPS with a fresh self-signed certificate, offering h2 and http/1.1 by ALPN.
    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Listens on `0.0.0.0` (the port still free), so that every address of 127.0.0.0/8
    /// reaches it on that port: one server behind thousands of endpoint addresses. Tests send
    /// only to loopback addresses; [`TestServer::addr`] is the one on 127.0.0.1.
    pub fn every_loopback_address(mut self) -> Self {
        self.every_loopback = true;
        self
    }

    fn state(self) -> Arc<State> {
        assert!(
            StatusCode::from_u16(self.status).is_ok(),
            "invalid status {}",
            self.status
        );
        Arc::new(State {
            tls: self.tls,
            body: self.body,
            stall: self.stall,
            delay: AtomicU64::new(nanos(self.delay)),
            status: AtomicU16::new(self.status),
            hits: AtomicU64::new(0),
            h2_hits: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            stall_until: Mutex::new(None),
            last: Mutex::new(Last::default()),
            extra: Mutex::new(None),
            apart: Mutex::new(None),
            apart_hits: AtomicU64::new(0),
            received: self.record.then(|| Mutex::new(Vec::new())),
        })
    }

    /// Starts the server on a free port of 127.0.0.1 (or every address), on a thread of its own with its own
    /// runtime, like a separate process: a test can drive it from blocking code
    /// (`tailguard_load::run`) or from async code alike.
    pub fn spawn(self) -> TestServer {
        let every_loopback = self.every_loopback;
        let state = self.state();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel();
        let thread_state = Arc::clone(&state);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("test runtime");
            rt.block_on(async move {
                let listener = bind(every_loopback).await;
                addr_tx
                    .send(loopback(&listener))
                    .expect("test waits for the address");
                tokio::select! {
                    _ = stop_rx => {}
                    () = accept_loop(thread_state, listener) => {}
                }
            });
        });
        let addr = addr_rx.recv().expect("test server started");
        TestServer {
            addr,
            state,
            runs: Runs::Thread {
                stop: Some(stop_tx),
                thread: Some(thread),
            },
        }
    }

    /// Starts the server on a free port of 127.0.0.1 as a task of the calling runtime: with
    /// paused time its delays and stalls run on the test's virtual clock.
    pub async fn start(self) -> TestServer {
        let every_loopback = self.every_loopback;
        let state = self.state();
        let listener = bind(every_loopback).await;
        let addr = loopback(&listener);
        let task = tokio::spawn(accept_loop(Arc::clone(&state), listener));
        TestServer {
            addr,
            state,
            runs: Runs::Task(task),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A listener on a free port of 127.0.0.1, or of every address (`0.0.0.0`).
async fn bind(every_loopback: bool) -> tokio::net::TcpListener {
    let ip = match every_loopback {
        true => [0, 0, 0, 0],
        false => [127, 0, 0, 1],
    };
    tcp::bind(SocketAddr::from((ip, 0)))
        .await
        .expect("bind a free port")
}

/// The listener's address on 127.0.0.1.
fn loopback(listener: &tokio::net::TcpListener) -> SocketAddr {
    let port = listener.local_addr().expect("bound").port();
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Accepts connections (with `TCP_NODELAY`) and serves each with the server presets, until
/// the server is dropped.
async fn accept_loop(state: Arc<State>, listener: tokio::net::TcpListener) {
    let acceptor = state.tls.then(tls_acceptor);
    loop {
        let Ok((stream, _)) = tcp::accept(&listener, Nagle::Off).await else {
            continue;
        };
        state.connections.fetch_add(1, Ordering::SeqCst);
        let st = Arc::clone(&state);
        let svc = hyper::service::service_fn(move |req| answer(Arc::clone(&st), req));
        match acceptor.clone() {
            None => {
                tokio::spawn(server::serve_connection(stream, svc));
            }
            Some(acceptor) => {
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(stream).await {
                        server::serve_connection(tls, svc).await;
                    }
                });
            }
        }
    }
}

fn tls_acceptor() -> tokio_rustls::TlsAcceptor {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .expect("self-signed certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("default versions")
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .expect("certificate and key match");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// A response body: the configured one, an echo of the request's, or one with trailers.
type Body = BoxBody<Bytes, hyper::Error>;

async fn answer(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let apart = state
        .apart
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if let Some((_, code, delay)) = apart.filter(|(path, _, _)| req.uri().path() == path) {
        state.apart_hits.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(delay).await;
        let mut resp = Response::new(
            Full::new(Bytes::from_static(b"health"))
                .map_err(|never| match never {})
                .boxed(),
        );
        *resp.status_mut() = StatusCode::from_u16(code).expect("checked when set");
        return Ok(resp);
    }
    let n = state.hits.fetch_add(1, Ordering::SeqCst) + 1;
    let host = if req.version() == Version::HTTP_2 {
        state.h2_hits.fetch_add(1, Ordering::SeqCst);
        req.uri().authority().map(ToString::to_string)
    } else {
        let hosts: Vec<_> = req
            .headers()
            .get_all(hyper::header::HOST)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        (!hosts.is_empty()).then(|| hosts.join(", "))
    };
    *state.last.lock().unwrap_or_else(PoisonError::into_inner) = Last {
        host,
        authority: req.uri().authority().map(ToString::to_string),
        headers: req.headers().clone(),
    };
    let req = match &state.received {
        Some(kept) if req.uri().path() != "/echo" => {
            let (parts, body) = req.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
            if kept.len() < MAX_RECEIVED {
                kept.push(Received {
                    method: parts.method.to_string(),
                    path: parts
                        .uri
                        .path_and_query()
                        .map_or("/".into(), ToString::to_string),
                    headers: parts.headers.clone(),
                    body,
                });
            }
            Request::from_parts(parts, None)
        }
        _ => req.map(Some),
    };
    let now = Instant::now();
    let stall_end = {
        let mut until = state
            .stall_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((at, d)) = state.stall {
            if n == at {
                *until = Some(now + d);
            }
        }
        until.filter(|end| *end > now)
    };
    if let Some(end) = stall_end {
        tokio::time::sleep_until(end).await;
    }
    let delay = Duration::from_nanos(state.delay.load(Ordering::SeqCst));
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let body: Body = match req.uri().path() {
        "/echo" => req.into_body().expect("an echo's body is not kept").boxed(),
        // And the methods of the test package `tailguard.test` (`/tailguard.test.Svc/Get`), so
        // gRPC calls can differ by method.
        p if p == "/trailers" || p.starts_with("/tailguard.test.") => {
            // `?grpc-status=14` ends the call with that code instead of 0.
            let code = req
                .uri()
                .query()
                .and_then(|q| q.strip_prefix("grpc-status="))
                .and_then(|c| c.parse::<u8>().ok())
                .unwrap_or(0);
            let mut trailers = HeaderMap::new();
            trailers.insert(
                "grpc-status",
                hyper::header::HeaderValue::from(u16::from(code)),
            );
            Full::new(Bytes::from_static(b"msg"))
                .map_err(|never| match never {})
                .with_trailers(async move { Some(Ok(trailers)) })
                .boxed()
        }
        _ => Full::new(state.body.clone())
            .map_err(|never| match never {})
            .boxed(),
    };
    let mut resp = Response::new(body);
    let status = state.status.load(Ordering::SeqCst);
    *resp.status_mut() = StatusCode::from_u16(status).expect("checked when set");
    let extra = state
        .extra
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if let Some((name, value)) = extra {
        resp.headers_mut().insert(name, value);
    }
    Ok(resp)
}
