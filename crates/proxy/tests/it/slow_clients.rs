//! Slow and idle clients: a connection without a request in flight for the header read timeout
//! is closed; a request in flight is never cut by it. Paused time: the clock jumps only when
//! every task (proxy, backend, client) is waiting.

use crate::support;

use std::time::Duration;
use support::{start, AsUpstream};
use tailguard_proxy::config::ServiceConfig;
use tailguard_testsupport::{bounded, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

const LIMIT: Duration = Duration::from_secs(10); // the default limits.headerReadTimeoutMs

async fn connect(addr: std::net::SocketAddr) -> TcpStream {
    tailguard_http::tcp::connect(addr, tailguard_http::Nagle::Off)
        .await
        .unwrap()
}

/// Reads until the response `ok` body has arrived; returns what was read.
async fn read_response(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(b"ok") {
        let n = bounded(s.read(&mut buf)).await.unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Waits for the proxy to close `s`; returns how long that took.
async fn closed_after(s: &mut TcpStream) -> Duration {
    let start = Instant::now();
    let mut buf = [0u8; 64];
    match bounded(s.read(&mut buf)).await {
        Ok(0) | Err(_) => start.elapsed(),
        Ok(n) => panic!("unexpected bytes: {:?}", &buf[..n]),
    }
}

#[tokio::test(start_paused = true)]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let backend = TestServer::start().await;
    let proxy = start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    let mut s = connect(proxy.addr()).await;
    s.write_all(b"GET / HTTP/1.1\r\nhost: web\r\n")
        .await
        .unwrap();
    let waited = closed_after(&mut s).await;
    assert!(
        waited >= LIMIT && waited < LIMIT + Duration::from_secs(1),
        "closed after {waited:?}"
    );
    assert_eq!(backend.hits(), 0);
    proxy.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_idle_kept_alive_connection_is_closed_after_the_timeout() {
    let backend = TestServer::start().await;
    let proxy = start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    let mut s = connect(proxy.addr()).await;
    for _ in 0..3 {
        // Each exchange, even after most of the limit has passed, restarts the idle time.
        tokio::time::sleep(LIMIT - Duration::from_secs(1)).await;
        s.write_all(b"GET / HTTP/1.1\r\nhost: web\r\n\r\n")
            .await
            .unwrap();
        let reply = read_response(&mut s).await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    }
    let waited = closed_after(&mut s).await;
    assert!(
        waited >= LIMIT && waited < LIMIT + Duration::from_secs(1),
        "closed after {waited:?}"
    );
    assert_eq!(backend.hits(), 3);
    proxy.shutdown().await;
}

/// A shutdown closes a kept-alive connection waiting for its next request at once, not at the
/// idle timeout or the drain limit: the close and shutdown notices its loops race on every
/// wake-up are read through `Quiet`, which polls them only once they may have come.
#[tokio::test(start_paused = true)]
async fn an_idle_kept_alive_connection_is_closed_at_once_by_a_shutdown() {
    let backend = TestServer::start().await;
    let proxy = start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    let mut s = connect(proxy.addr()).await;
    for _ in 0..2 {
        s.write_all(b"GET / HTTP/1.1\r\nhost: web\r\n\r\n")
            .await
            .unwrap();
        let reply = read_response(&mut s).await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    }
    let shutdown = tokio::spawn(proxy.shutdown());
    let waited = closed_after(&mut s).await;
    assert!(waited < Duration::from_secs(1), "closed after {waited:?}");
    bounded(shutdown).await.unwrap();
    assert_eq!(backend.hits(), 2);
}

/// The frame types an HTTP/2 server sent on `s` until it closed the connection.
async fn h2_frame_types_until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match bounded(s.read(&mut buf)).await {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let mut types = Vec::new();
    let mut at = 0;
    while at + 9 <= got.len() {
        let len = u32::from_be_bytes([0, got[at], got[at + 1], got[at + 2]]) as usize;
        types.push(got[at + 3]);
        at += 9 + len;
    }
    types
}

/// An idle HTTP/2 connection (a gRPC channel between calls) is closed after the same timeout,
/// but with GOAWAY (frame type 7), so the client knows to reconnect rather than fail.
#[tokio::test(start_paused = true)]
async fn an_idle_h2_connection_gets_goaway() {
    const GOAWAY: u8 = 7;
    let backend = TestServer::start().await;
    let proxy = start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    let mut s = connect(proxy.addr()).await;
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap(); // empty SETTINGS
    let start = Instant::now();
    let types = h2_frame_types_until_closed(&mut s).await;
    let waited = start.elapsed();
    assert!(types.contains(&GOAWAY), "frames {types:?}");
    assert!(
        waited >= LIMIT && waited < LIMIT + Duration::from_secs(1),
        "closed after {waited:?}"
    );
    proxy.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_response_slower_than_the_timeout_is_not_cut() {
    let backend = TestServer::start().await;
    backend.set_delay(LIMIT * 2);
    let proxy = start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    let mut s = connect(proxy.addr()).await;
    let start = Instant::now();
    s.write_all(b"GET / HTTP/1.1\r\nhost: web\r\n\r\n")
        .await
        .unwrap();
    let reply = read_response(&mut s).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(start.elapsed() >= LIMIT * 2, "{:?}", start.elapsed());
    proxy.shutdown().await;
}
