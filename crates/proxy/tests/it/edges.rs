//! Bad input, sockets and the admin server.

use crate::support;

use std::time::Duration;
use support::{client, send, start, AsUpstream};
use tailguard_proxy::config::{ServiceConfig, Upstream, UpstreamProtocol};
use tailguard_testsupport::{bounded, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn raw(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut s = tailguard_http::tcp::connect(addr, tailguard_http::Nagle::Off)
        .await
        .unwrap();
    s.write_all(request).await.unwrap();
    let mut buf = vec![0; 256];
    let n = bounded(s.read(&mut buf)).await.unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn malformed_requests_get_400_garbage_is_closed_and_oversize_headers_431() {
    let backend = TestServer::start().await;
    let proxy = start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    // A first line that is neither HTTP/1.x nor the HTTP/2 preface is closed unanswered (the
    // port also speaks HTTP/2, whose servers must close on a bad preface: h2spec 3.5/2); a
    // request line that parses, with a broken header after it, is HTTP/1.1's 400.
    let reply = raw(proxy.addr(), b"NOT HTTP AT ALL\r\n\r\n").await;
    assert_eq!(reply, "");
    let reply = raw(proxy.addr(), b"GET / HTTP/1.1\r\nhost x\r\n\r\n").await;
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    let mut big = b"GET / HTTP/1.1\r\nhost: x\r\nx-big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 600 * 1024));
    big.extend(b"\r\n\r\n");
    let reply = raw(proxy.addr(), &big).await;
    assert!(reply.starts_with("HTTP/1.1 431"), "{reply}");
    assert_eq!(backend.hits(), 0);
    proxy.shutdown().await;
}

#[tokio::test]
async fn upstream_sockets_have_nodelay() {
    let listener = tailguard_http::tcp::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let connector = tailguard_proxy::Connector::default();
    let io = connector
        .connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    assert!(io.stream().nodelay().unwrap());
}

/// An endpoint that never completes a connection: a listener that never accepts, its accept
/// queue filled, so the kernel drops further SYNs and a connect would wait for minutes of
/// retransmissions. The proxy gives up after its connect timeout, for either upstream version.
#[tokio::test]
async fn an_endpoint_that_never_accepts_gets_502_after_the_connect_timeout() {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut queued = Vec::new();
    for _ in 0..8 {
        let attempt = tokio::net::TcpStream::connect(addr);
        match tokio::time::timeout(Duration::from_millis(300), attempt).await {
            Ok(stream) => queued.push(stream.unwrap()),
            Err(_) => break, // the queue is full: SYNs are now dropped
        }
    }
    assert!(queued.len() < 8, "the accept queue never filled");
    for protocol in [UpstreamProtocol::Http1, UpstreamProtocol::Http2] {
        let mut s = ServiceConfig::new("web", vec![Upstream::new(addr)]);
        s.arm.retries = None;
        s.arm.accrual = None;
        s.protocol = protocol;
        s.pool.connect_timeout = Duration::from_millis(200);
        let proxy = start(s).await;
        let started = tokio::time::Instant::now();
        let (status, headers, _) = send(&client(false), proxy.addr(), "GET", "/").await;
        let took = started.elapsed();
        assert_eq!(status, 502, "{protocol:?}");
        let reason = headers["x-tailguard-error"].to_str().unwrap();
        assert!(reason.contains("connect timeout"), "{protocol:?}: {reason}");
        assert!(
            took < Duration::from_secs(3),
            "{protocol:?}: answered after {took:?}, not after the 200 ms connect timeout"
        );
        proxy.shutdown().await;
    }
    drop((listener, queued));
}

#[tokio::test]
async fn admin_serves_metrics_readiness_and_endpoints() {
    let backend = TestServer::start().await;
    let proxy = start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    let c = client(false);
    assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 200);
    let admin = proxy.admin_addr().unwrap();
    let (status, _, body) = send(&c, admin, "GET", "/metrics").await;
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status, 200);
    assert!(
        text.contains(
            "tailguard_proxy_requests_total{service=\"web\",route=\"[default]\",class=\"2xx\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("tailguard_proxy_attempt_latency_seconds_count"),
        "{text}"
    );
    assert_eq!(send(&c, admin, "GET", "/ready").await.0, 200);
    assert_eq!(send(&c, admin, "GET", "/live").await.0, 200);
    let (_, _, body) = send(&c, admin, "GET", "/endpoints").await;
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let ep = &json["web"][0];
    assert_eq!(ep["addr"], backend.addr().to_string());
    assert_eq!(ep["successes"], 1);
    assert_eq!(ep["state"], "alive");
    proxy.shutdown().await;
}
