//! HTTP/2 conformance of the proxy's listener on loopback: HEAD and bad connection prefaces.

mod support;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::time::Duration;
use support::Backend;
use tailguard_proxy::config::{ServiceConfig, Upstream, UpstreamProtocol};
use tailguard_testsupport::h2wire::{self, END_HEADERS, END_STREAM, HEADERS};
use tokio::io::AsyncWriteExt;
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
        let stream = TcpStream::connect(proxy.addr()).await.unwrap();
        let (mut tx, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
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
            let resp = tx.send_request(req).await.expect(&case);
            assert_eq!(resp.status(), 200, "{case}");
            let body = resp.into_body().collect().await.expect(&case).to_bytes();
            let want = if method == http::Method::HEAD {
                ""
            } else {
                "b\n"
            };
            assert_eq!(body, want, "{case}");
        }
        drop(tx);
        driver.await.unwrap().unwrap();
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
    let backend = Backend::spawn().await;
    let mut config = support::config(ServiceConfig::new("web", vec![backend.upstream()]));
    config.limits.header_read_timeout = Duration::from_secs(60);
    config.limits.max_connections = 1;
    let proxy = tailguard_proxy::start(config).await.unwrap();
    for (case, opening) in h2wire::bad_openings() {
        let got = h2wire::closed_after(proxy.addr(), &opening).await;
        if opening.starts_with(h2wire::PREFACE) {
            let code = h2wire::goaway_code(&got);
            assert_eq!(code, Some(h2wire::PROTOCOL_ERROR), "{case}: {got:?}");
        } else {
            assert!(got.starts_with(b"HTTP/1.1 400"), "{case}: {got:?}");
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
