//! `limits.maxRequestHeaderBytes` (64 KiB by default): a request whose head is larger is
//! refused with 431 over HTTP/1.1, or refused by HTTP/2's SETTINGS_MAX_HEADER_LIST_SIZE, and
//! never reaches a backend; one under the limit passes. Backends on 127.0.0.1.

use crate::support;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use support::AsUpstream;
use tailguard_proxy::config::ServiceConfig;
use tailguard_testsupport::{bounded, TestServer};
use tokio::net::TcpStream;

/// A GET with one `x-big` header of `size` bytes on a raw HTTP/1.1 connection; the status
/// (0 when the connection closed without one).
async fn h1_status(addr: SocketAddr, size: usize) -> u16 {
    let head = format!(
        "GET / HTTP/1.1\r\nHost: web\r\nx-big: {}\r\nConnection: close\r\n\r\n",
        "a".repeat(size)
    );
    let resp = support::exchange(addr, head.as_bytes()).await;
    support::status_of(&resp).parse().unwrap_or(0)
}

/// The same over HTTP/2 with hyper's client; the status, or `None` when the request failed
/// (a reset stream).
async fn h2_status(addr: SocketAddr, size: usize) -> Option<u16> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut tx, conn) = bounded(hyper::client::conn::http2::handshake(
        TokioExecutor::new(),
        TokioIo::new(stream),
    ))
    .await
    .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get(format!("http://{addr}/"))
        .header("x-big", "a".repeat(size))
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = bounded(tx.send_request(req)).await.ok()?;
    Some(resp.status().as_u16())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_over_the_limit_never_reaches_a_backend() {
    let backend = TestServer::start().await;
    let proxy = support::start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    let addr = proxy.addr();
    assert_eq!(h1_status(addr, 40 * 1024).await, 200, "under the limit");
    assert_eq!(
        h2_status(addr, 40 * 1024).await,
        Some(200),
        "under the limit"
    );
    let passed = backend.hits();
    assert_eq!(passed, 2);
    // The 420 KB header, and one just over the default 64 KiB.
    for size in [420 * 1024, 70 * 1024] {
        assert_eq!(h1_status(addr, size).await, 431, "HTTP/1.1, {size} bytes");
        let h2 = h2_status(addr, size).await;
        assert!(
            matches!(h2, None | Some(431)),
            "HTTP/2, {size} bytes: {h2:?}"
        );
    }
    assert_eq!(backend.hits(), passed, "a large head reached the backend");
    // The proxy still serves.
    assert_eq!(h1_status(addr, 10).await, 200);
    proxy.shutdown().await;
}

#[test]
fn the_limit_is_configured_and_range_checked() {
    let yaml = |limits: &str| {
        format!(
            "servers: [{{ip: 127.0.0.1, port: 0}}]\nlimits: {limits}\nservices:\n  - name: web\n    \
             upstreams: [\"127.0.0.1:1\"]\n"
        )
    };
    let config = tailguard_proxy::yaml::parse(&yaml("{maxRequestHeaderBytes: 8192}")).unwrap();
    assert_eq!(config.limits.max_request_header_bytes, 8192);
    for bad in [
        "{maxRequestHeaderBytes: 10}",
        "{maxRequestHeaderBytes: 8191}",
        "{maxRequestHeaderBytes: 99999999}",
    ] {
        let err = tailguard_proxy::yaml::parse(&yaml(bad))
            .unwrap_err()
            .to_string();
        assert!(err.contains("limits.maxRequestHeaderBytes"), "{err}");
    }
    let err = tailguard_proxy::yaml::parse(&yaml("{escapedSlashes: decode}"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("limits.escapedSlashes"), "{err}");
    // Which HTTP/1.1 server: the lean one unless hyper's is asked for.
    use tailguard_proxy::config::H1Server;
    let config = tailguard_proxy::yaml::parse(&yaml("{drainMs: 1000}")).unwrap();
    assert_eq!(config.limits.h1_server, H1Server::Lean);
    let config = tailguard_proxy::yaml::parse(&yaml("{h1Server: hyper}")).unwrap();
    assert_eq!(config.limits.h1_server, H1Server::Hyper);
    let err = tailguard_proxy::yaml::parse(&yaml("{h1Server: fast}"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("limits.h1Server"), "{err}");
}
