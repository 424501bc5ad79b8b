//! Test fixtures: small real HTTP servers on 127.0.0.1, for integration tests.
//!
//! Each server runs on its own thread with its own Tokio runtime, like a separate process,
//! so a test can drive it from blocking code (`tailguard_load::run`) or from async code alike.
//! Dropping the handle stops the server. [`h2wire`] speaks HTTP/2 at the byte level, for
//! conformance tests; [`promtool`] lints a `/metrics` exposition with Prometheus's own tool.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_testsupport::TestServer;
//!
//! let server = TestServer::builder().delay(Duration::from_millis(5)).spawn();
//! assert!(server.url("/").starts_with("http://127.0.0.1:"));
//! assert_eq!(server.hits(), 0);
//! ```

#![warn(missing_docs)]

pub mod h2wire;
pub mod promtool;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailguard_http::{server, tcp, Nagle};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Builds a [`TestServer`].
#[derive(Clone, Debug)]
pub struct Builder {
    delay: Duration,
    stall: Option<(u64, Duration)>,
    status: u16,
    body: Bytes,
    tls: bool,
}

/// A running test server; stops when dropped.
#[derive(Debug)]
pub struct TestServer {
    addr: SocketAddr,
    state: Arc<State>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug)]
struct State {
    cfg: Builder,
    hits: AtomicU64,
    h2_hits: AtomicU64,
    connections: AtomicU64,
    stall_until: Mutex<Option<Instant>>,
    last_host: Mutex<Option<String>>,
}

/// A moment some time from now on the real clock, for bounded waits on real processes and
/// sockets (poll until it passes, then fail).
#[derive(Clone, Copy, Debug)]
pub struct Deadline(Instant);

impl Deadline {
    /// `wait` from now.
    #[allow(clippy::disallowed_methods)] // a real child process runs on the real clock
    pub fn after(wait: Duration) -> Self {
        Self(Instant::now() + wait)
    }

    /// What is left until the deadline (zero once passed).
    #[allow(clippy::disallowed_methods)] // as above
    pub fn left(self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }

    /// True once the deadline has passed.
    pub fn passed(self) -> bool {
        self.left().is_zero()
    }
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
        }
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR` (or `https://` for a TLS server) followed by `path`.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.state.cfg.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.addr, path)
    }

    /// Requests received so far.
    pub fn hits(&self) -> u64 {
        self.state.hits.load(Ordering::SeqCst)
    }

    /// The last request's host: its `Host` headers joined with `, ` over HTTP/1.1 (so a
    /// duplicate shows), its `:authority` over HTTP/2.
    pub fn last_host(&self) -> Option<String> {
        self.state.last_host.lock().expect("not poisoned").clone()
    }

    /// Requests received over HTTP/2 so far.
    pub fn h2_requests(&self) -> u64 {
        self.state.h2_hits.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::SeqCst)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Builder {
    /// Every response waits this long before it is sent.
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

    /// The status of every response.
    pub fn status(mut self, code: u16) -> Self {
        self.status = code;
        self
    }

    /// Serves HTTPS with a fresh self-signed certificate, offering h2 and http/1.1 by ALPN.
    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Starts the server on 127.0.0.1, on a free port.
    pub fn spawn(self) -> TestServer {
        let state = Arc::new(State {
            cfg: self,
            hits: AtomicU64::new(0),
            h2_hits: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            stall_until: Mutex::new(None),
            last_host: Mutex::new(None),
        });
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel();
        let thread_state = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("test runtime");
            rt.block_on(serve(thread_state, addr_tx, stop_rx));
        });
        let addr = addr_rx.recv().expect("test server started");
        TestServer {
            addr,
            state,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }
}

async fn serve(
    state: Arc<State>,
    addr_tx: std::sync::mpsc::Sender<SocketAddr>,
    mut stop: oneshot::Receiver<()>,
) {
    let listener = tcp::bind("127.0.0.1:0".parse().expect("literal"))
        .await
        .expect("bind 127.0.0.1:0");
    addr_tx
        .send(listener.local_addr().expect("bound"))
        .expect("test waits for the address");
    let acceptor = state.cfg.tls.then(tls_acceptor);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = tcp::accept(&listener, Nagle::Off) => {
                let Ok((stream, _)) = accepted else { continue };
                state.connections.fetch_add(1, Ordering::SeqCst);
                let st = state.clone();
                let svc = hyper::service::service_fn(move |req| handle(st.clone(), req));
                match acceptor.clone() {
                    None => { tokio::spawn(server::serve_connection(stream, svc)); }
                    Some(acceptor) => { tokio::spawn(async move {
                        if let Ok(tls) = acceptor.accept(stream).await {
                            server::serve_connection(tls, svc).await;
                        }
                    }); }
                }
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

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let n = state.hits.fetch_add(1, Ordering::SeqCst) + 1;
    let host = if req.version() == hyper::Version::HTTP_2 {
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
    *state.last_host.lock().expect("not poisoned") = host;
    let now = Instant::now();
    let stall_end = {
        let mut until = state.stall_until.lock().expect("not poisoned");
        if let Some((at, d)) = state.cfg.stall {
            if n == at {
                *until = Some(now + d);
            }
        }
        until.filter(|end| *end > now)
    };
    if let Some(end) = stall_end {
        tokio::time::sleep_until(end).await;
    }
    if !state.cfg.delay.is_zero() {
        tokio::time::sleep(state.cfg.delay).await;
    }
    let mut resp = Response::new(Full::new(state.cfg.body.clone()));
    *resp.status_mut() = hyper::StatusCode::from_u16(state.cfg.status).expect("valid status");
    Ok(resp)
}
