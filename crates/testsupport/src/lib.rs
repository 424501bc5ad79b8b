//! Test fixtures for every crate's integration tests: the one test backend, bounded clients,
//! HTTP/2 at the byte level, and Prometheus's linter.
//!
//! [`TestServer`] is a real HTTP/1.1 and HTTP/2 (h2c, or h2 over TLS) server on 127.0.0.1
//! whose delay and status a test sets before or while it runs. It runs either on a thread of
//! its own with its own runtime, like a separate process ([`Builder::spawn`]: a test can drive
//! it from blocking code such as `tailguard_load::run`), or as a task of the test's runtime
//! ([`Builder::start`]: with paused time, its delays are virtual). Dropping the handle stops
//! it. [`client`] holds small clients whose every wait is bounded; [`h2wire`] speaks HTTP/2 at
//! the byte level, for conformance tests; [`promtool`] lints a `/metrics` exposition with
//! Prometheus's own tool; [`browser`] runs headless Chromium on a page; [`process`] reads a
//! real process's output and bounds its wait; [`Deadline`] bounds polls of real processes.
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

pub mod browser;
pub mod client;
pub mod h1_requests;
pub mod h1_responses;
pub mod h2wire;
pub mod process;
pub mod promtool;
mod server;

pub use client::bounded;
pub use server::{Builder, Received, TestServer};

use std::time::Duration;
use tokio::time::Instant;

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

/// A port on 127.0.0.1 that refuses every connection and stays taken while this value lives:
/// a socket bound to it that never listens. A listener bound and dropped frees its port, which
/// a test running alongside may bind next, and the "closed" port then answers (a collector
/// that was meant to be down got another test's requests).
///
/// ```
/// let closed = tailguard_testsupport::ClosedPort::new();
/// let refused = std::net::TcpStream::connect(closed.addr()).unwrap_err();
/// assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
/// // Its port stays taken: a listener cannot have it.
/// assert!(std::net::TcpListener::bind(closed.addr()).is_err());
/// ```
#[derive(Debug)]
pub struct ClosedPort {
    _socket: socket2::Socket,
    addr: std::net::SocketAddr,
}

impl ClosedPort {
    /// Takes a free port and never listens on it.
    ///
    /// # Panics
    /// When no socket can be made or bound (the test cannot run).
    pub fn new() -> Self {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
        let any: std::net::SocketAddr = "127.0.0.1:0".parse().expect("an address");
        socket.bind(&any.into()).expect("bind 127.0.0.1:0");
        let addr = socket
            .local_addr()
            .expect("its address")
            .as_socket()
            .expect("an IP address");
        Self {
            _socket: socket,
            addr,
        }
    }

    /// The refusing address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
}

impl Default for ClosedPort {
    fn default() -> Self {
        Self::new()
    }
}
