//! HTTP/2 conformance of the proxy's listener on loopback: HEAD, bad connection prefaces and
//! the `Upgrade: h2c` request.

use crate::support;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::time::Duration;
use support::AsUpstream;
use tailguard_proxy::config::{ServiceConfig, Upstream, UpstreamProtocol};
use tailguard_testsupport::h2wire::{self, END_HEADERS, END_STREAM, HEADERS};
use tailguard_testsupport::{bounded, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A one-backend `tailguard serve` fleet on 127.0.0.1, answering `b\n`. (The support backend
/// would not do for HEAD: like serve before it was fixed, it sends a HEAD body over HTTP/2.)
async fn serve_backend() -> tailguard_serve::Running {
    let fleet = tailguard_fleet::Fleet::from_yaml_str("backends: [{name: b, latency: 0s}]", "t")
        .expect("fleet parses");
    let mut options = tailguard_serve::ServeOptions::new(fleet);
    options.listen = "127.0.0.1:0".parse().unwrap();
    options.control = None;
    tailguard_serve::start(options).await.expect("fleet starts")
}

/// A proxy over `backend` speaking `protocol` upstream.
async fn proxy_to(backend: SocketAddr, protocol: UpstreamProtocol) -> tailguard_proxy::Proxy {
    let mut service = ServiceConfig::new("web", vec![Upstream::new(backend)]);
    service.protocol = protocol;
    support::start(service).await
}

/// HEAD from an HTTP/2 client, through the proxy to an HTTP/2 and to an HTTP/1.1 upstream:
/// status 200, no reset, an empty body, and the connection carries on (a GET between two
/// HEADs gets its body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_over_http2_passes_with_an_empty_body() {
    let running = serve_backend().await;
    for protocol in [UpstreamProtocol::Http2, UpstreamProtocol::Http1] {
        let proxy = proxy_to(running.backends()[0].1, protocol).await;
        let stream = bounded(TcpStream::connect(proxy.addr())).await.unwrap();
        let (mut tx, conn) = bounded(hyper::client::conn::http2::handshake(
            TokioExecutor::new(),
            TokioIo::new(stream),
        ))
        .await
        .unwrap();
        let driver = tokio::spawn(conn);
        for method in [http::Method::HEAD, http::Method::GET, http::Method::HEAD] {
            let case = format!("{method} to an {protocol:?} upstream");
            let req = http::Request::builder()
                .method(method.clone())
                .uri(format!("http://{}/", proxy.addr()))
                .body(Empty::<Bytes>::new())
                .unwrap();
            let resp = bounded(tx.send_request(req)).await.expect(&case);
            assert_eq!(resp.status(), 200, "{case}");
            let body = bounded(resp.into_body().collect())
                .await
                .expect(&case)
                .to_bytes();
            let want = if method == http::Method::HEAD {
                ""
            } else {
                "b\n"
            };
            assert_eq!(body, want, "{case}");
        }
        drop(tx);
        bounded(driver).await.unwrap().unwrap();
        proxy.shutdown().await;
    }
}

/// The proxy's answer to HEAD over HTTP/2 ends with its HEADERS frame (END_STREAM), with no
/// DATA frame after it, whichever protocol the upstream spoke.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_over_http2_ends_with_the_headers_frame() {
    let running = serve_backend().await;
    for protocol in [UpstreamProtocol::Http2, UpstreamProtocol::Http1] {
        let proxy = proxy_to(running.backends()[0].1, protocol).await;
        let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
        let block = h2wire::request_block("HEAD", "t", "/");
        let head = h2wire::frame(HEADERS, END_STREAM | END_HEADERS, 1, &block);
        let opening = [h2wire::client_opening(), head].concat();
        stream.write_all(&opening).await.unwrap();
        let resp = h2wire::read_response(&mut stream, 1).await;
        assert_eq!(
            resp.status_byte, 0x88,
            "`:status: 200` from an {protocol:?} upstream"
        );
        assert!(resp.ended_with_headers, "{protocol:?} upstream: {resp:?}");
        // Closed first: a graceful shutdown would wait for this raw client's PING answer.
        drop(stream);
        proxy.shutdown().await;
    }
}

/// A bad opening closes the connection within a bounded time, with GOAWAY (PROTOCOL_ERROR)
/// when the preface was whole, long before the header read timeout; the proxy serves the next
/// client, and a refused connection gives its slot back (one connection allowed at a time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_preface_closes_the_connection_and_the_next_client_is_served() {
    let backend = TestServer::start().await;
    let mut config = support::config(ServiceConfig::new("web", vec![backend.upstream()]));
    config.limits.header_read_timeout = Duration::from_secs(60);
    config.limits.max_connections = Some(1);
    let proxy = tailguard_proxy::start(config).await.unwrap();
    for (case, opening) in h2wire::bad_openings() {
        let got = h2wire::closed_after(proxy.addr(), &opening).await;
        if opening.starts_with(h2wire::PREFACE) {
            let code = h2wire::goaway_code(&got);
            assert_eq!(code, Some(h2wire::PROTOCOL_ERROR), "{case}: {got:?}");
        } else {
            // Neither the preface nor an HTTP/1.x request line: closed unanswered, as an
            // HTTP/2 server must (h2spec 3.5/2).
            assert!(got.is_empty(), "{case}: {got:?}");
        }
        let after = h2wire::closed_after(proxy.addr(), GET_AND_CLOSE).await;
        assert!(
            after.starts_with(b"HTTP/1.1 200"),
            "after {case}: {after:?}"
        );
    }
    assert_eq!(backend.hits(), 4);
    proxy.shutdown().await;
}

const GET_AND_CLOSE: &[u8] = b"GET / HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n";

/// The h2c upgrade request of RFC 7540 section 3.2, with `rest` (headers, blank line, body).
fn upgrade_request(method: &str, path: &str, rest: &str) -> Vec<u8> {
    format!(
        "{method} {path} HTTP/1.1\r\nhost: t\r\nconnection: Upgrade, HTTP2-Settings\r\n\
         upgrade: h2c\r\nhttp2-settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n{rest}"
    )
    .into_bytes()
}

/// Reads an HTTP/1.1 response head.
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(bounded(stream.read_u8()).await.expect("a response head"));
    }
    String::from_utf8(head).unwrap()
}

/// `Upgrade: h2c` on the proxy's listener: `101`, then the request is forwarded and answered
/// on stream 1 of an HTTP/2 connection, which goes on carrying the client's own streams. The
/// backend gets the requests without the upgrade's headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2c_upgrade_is_answered_on_stream_1_and_the_connection_goes_on_as_http2() {
    let backend = TestServer::start().await;
    let proxy = support::start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    stream
        .write_all(&upgrade_request("GET", "/first", "\r\n"))
        .await
        .unwrap();
    let head = read_head(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(head.to_ascii_lowercase().contains("upgrade: h2c"), "{head}");
    stream.write_all(&h2wire::client_opening()).await.unwrap();
    let first = h2wire::read_response(&mut stream, 1).await;
    assert_eq!(
        (first.status_byte, first.body.as_slice()),
        (0x88, &b"ok"[..])
    );
    assert_eq!(backend.hits(), 1);
    let seen = backend.last_headers();
    for hop in ["upgrade", "http2-settings"] {
        assert!(
            !seen.contains_key(hop),
            "{hop} reached the backend: {seen:?}"
        );
    }
    let block = h2wire::request_block("GET", "t", "/second");
    let get = h2wire::frame(HEADERS, END_STREAM | END_HEADERS, 3, &block);
    stream.write_all(&get).await.unwrap();
    let second = h2wire::read_response(&mut stream, 3).await;
    assert_eq!(
        (second.status_byte, second.body.as_slice()),
        (0x88, &b"ok"[..])
    );
    assert_eq!(backend.hits(), 2);
    drop(stream);
    proxy.shutdown().await;
}

/// An upgrade request with a body is not switched: it is forwarded and answered over HTTP/1.1,
/// body included, and the connection stays HTTP/1.1 for the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2c_upgrade_with_a_body_is_served_over_http1() {
    let backend = TestServer::start().await;
    let proxy = support::start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    let post = upgrade_request("POST", "/echo", "content-length: 5\r\n\r\nhello");
    let got = h2wire::closed_after(proxy.addr(), &[post, GET_AND_CLOSE.to_vec()].concat()).await;
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(got.contains("hello") && got.ends_with("ok"), "{got}");
    assert_eq!(got.matches("HTTP/1.1 200").count(), 2, "{got}");
    assert_eq!(backend.hits(), 2);
    assert!(!backend.last_headers().contains_key("upgrade"));
    proxy.shutdown().await;
}
