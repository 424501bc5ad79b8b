//! Hostile round three (issue 43), against a live proxy on 127.0.0.1: large gRPC request
//! messages, request bodies the proxy used to drop, interim (1xx) floods, a head and then a
//! close, `Connection` naming end-to-end headers, repeated deadline headers and `HTTP/1.2`.
//! The misbehaving backends are raw sockets written here; each test failed before its fix.

use crate::support;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{exchange, status_of, AsUpstream};
use tailguard_proxy::config::{H1Upstream, ServiceConfig, Upstream};
use tailguard_testsupport::{bounded, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A backend on raw sockets: `answer` gets each accepted connection.
async fn raw_backend<F, Fut>(answer: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            s.set_nodelay(true).unwrap();
            tokio::spawn(answer(s));
        }
    });
    addr
}

/// Reads one request head (and nothing more, as far as one read allows) from `s`.
async fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            return Some(head);
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn proxy_over(upstream: Upstream, h1: H1Upstream) -> tailguard_proxy::Proxy {
    let mut service = ServiceConfig::new("web", vec![upstream]);
    service.pool.h1 = h1;
    support::start(service).await
}

const BOTH: [H1Upstream; 2] = [H1Upstream::Lean, H1Upstream::Hyper];

/// A gRPC message holding `PingRequest { payload }` (field 1, bytes).
fn ping_message(payload: &[u8]) -> Bytes {
    let mut msg = vec![0x0a];
    let mut n = payload.len();
    while n >= 0x80 {
        msg.push((n as u8) | 0x80);
        n >>= 7;
    }
    msg.push(n as u8);
    msg.extend_from_slice(payload);
    let mut out = vec![0];
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(&msg);
    Bytes::from(out)
}

/// Item 1: a gRPC request message past the retry buffer (64 KiB) crosses the proxy whole,
/// sized or not (grpc-go sends no `content-length`). It failed with "stream error sent by
/// user: stream no longer needed": the copy kept for a retry outgrew its limit, and the body
/// never said it had ended, so the HTTP/2 upstream reset the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_request_messages_past_the_retry_buffer_cross_whole() {
    let fleet = support::fleet("backends:\n  - name: b\n    latency: 0s\n").await;
    let proxy = support::start(ServiceConfig::new(
        "web",
        vec![Upstream::new(fleet.backends()[0].1)],
    ))
    .await;
    let stream = TcpStream::connect(proxy.addr()).await.unwrap();
    let (mut tx, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    for size in [100_000, 4_000_000] {
        let message = ping_message(&vec![b'x'; size]);
        // As grpc-go sends it: 16 KiB frames, no length.
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = message
            .chunks(16 * 1024)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let unsized_body = StreamBody::new(futures_util::stream::iter(frames)).boxed();
        let sized = Full::new(message.clone()).map_err(|n| match n {}).boxed();
        for body in [unsized_body, sized] {
            let (code, echoed) = ping(&mut tx, proxy.addr(), body).await;
            assert_eq!(code, Some(0), "{size} bytes");
            assert!(echoed > size, "{size} bytes sent, {echoed} echoed");
        }
    }
}

/// A unary ping over `tx`; the gRPC status and the size of the answer's body.
async fn ping(
    tx: &mut hyper::client::conn::http2::SendRequest<
        http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>,
    >,
    addr: SocketAddr,
    body: http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>,
) -> (Option<u8>, usize) {
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
    let code = head.or_else(|| collected.trailers().and_then(tailguard_proxy::grpc::status));
    (code, collected.to_bytes().len())
}

/// Item 3: a GET or HEAD body of unknown length is forwarded (it was dropped and the client
/// got 200), over both HTTP/1.1 upstream clients and from an HTTP/2 client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_body_of_unknown_length_is_forwarded() {
    let echo = TestServer::start().await;
    for h1 in BOTH {
        let proxy = proxy_over(echo.upstream(), h1).await;
        let chunked = b"GET /echo HTTP/1.1\r\nHost: web\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
        let resp = exchange(proxy.addr(), chunked).await;
        assert_eq!(status_of(&resp), "200", "{h1:?}: {resp}");
        assert!(
            resp.contains("\r\nhello\r\n"),
            "{h1:?}: the body went on: {resp:?}"
        );
        // From an HTTP/2 client: DATA frames, no content-length.
        let frames = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(Frame::data(
            Bytes::from_static(b"hello"),
        ))]);
        let req = Request::get(format!("http://{}/echo", proxy.addr()))
            .body(StreamBody::new(frames).boxed())
            .unwrap();
        let c: hyper_util::client::legacy::Client<_, _> =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .http2_only(true)
                .build_http();
        let resp = bounded(c.request(req)).await.unwrap();
        assert_eq!(resp.status(), 200);
        let body = bounded(resp.into_body().collect())
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(&body[..], b"hello", "{h1:?} from HTTP/2");
    }
}

/// Item 3: a GET sent with a body goes on a connection that is not reused. A backend that
/// does not read GET bodies takes the body for its next request; if the proxy put that
/// connection back, the next client would get the answer to the smuggled request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_with_a_body_does_not_share_its_connection() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let backend = raw_backend(move |mut s| {
        let log = Arc::clone(&log);
        async move {
            let mut buf = Vec::new();
            // Answers each request it reads, its path in the body, never reading a body; the
            // smuggled request's answer comes a moment later.
            while let Some(head) = read_head(&mut s, &mut buf).await {
                let path = head.split(' ').nth(1).unwrap_or("").to_owned();
                log.lock().unwrap().push(path.clone());
                if path == "/smuggled" {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{path}",
                    path.len()
                );
                if s.write_all(resp.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    })
    .await;
    for h1 in BOTH {
        seen.lock().unwrap().clear();
        let proxy = proxy_over(Upstream::new(backend), h1).await;
        let smuggled = "GET /smuggled HTTP/1.1\r\nHost: web\r\n\r\n";
        let first = format!(
            "GET /first HTTP/1.1\r\nHost: web\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{smuggled}",
            smuggled.len()
        );
        let resp = exchange(proxy.addr(), first.as_bytes()).await;
        assert!(resp.ends_with("/first"), "{h1:?}: {resp}");
        let c = support::client(false);
        let (status, _, body) = support::send(&c, proxy.addr(), "GET", "/next").await;
        assert_eq!(status, 200, "{h1:?}");
        assert_eq!(&body[..], b"/next", "{h1:?}: another request's answer");
    }
}

/// A backend that answers each request with `interim` copies of `head`, then a 204.
async fn interim_backend(head: &'static [u8], interim: usize) -> SocketAddr {
    raw_backend(move |mut s| async move {
        let mut buf = Vec::new();
        while read_head(&mut s, &mut buf).await.is_some() {
            let mut out = head.repeat(interim);
            out.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
            if s.write_all(&out).await.is_err() {
                return;
            }
        }
    })
    .await
}

/// Item 4: at most 16 interim responses and 16 KiB of them before the final one, on both
/// HTTP/1.1 upstream clients; past either the proxy answers 502 and drops the connection.
/// A backend streaming `100 Continue` was read for as long as it sent them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interim_floods_are_answered_502() {
    let cont: &'static [u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
    let hint: &'static [u8] = Box::leak(
        [
            b"HTTP/1.1 103 Early Hints\r\nlink: ".as_slice(),
            &[b'a'; 6000],
            b"\r\n\r\n",
        ]
        .concat()
        .into_boxed_slice(),
    );
    for (head, interim, want) in [
        (cont, 16, StatusCode::NO_CONTENT),
        (cont, 17, StatusCode::BAD_GATEWAY),
        (cont, 200_000, StatusCode::BAD_GATEWAY),
        (hint, 2, StatusCode::NO_CONTENT),
        (hint, 3, StatusCode::BAD_GATEWAY),
    ] {
        let backend = interim_backend(head, interim).await;
        for h1 in BOTH {
            let mut service = ServiceConfig::new("web", vec![Upstream::new(backend)]);
            service.pool.h1 = h1;
            service.arm.retries = None;
            let proxy = support::start_detailed(service).await;
            let c = support::client(false);
            let (status, headers, _) = support::send(&c, proxy.addr(), "GET", "/").await;
            assert_eq!(status, want, "{h1:?}, {interim} x {} bytes", head.len());
            if want == StatusCode::BAD_GATEWAY {
                let why = headers["x-tailguard-error"].to_str().unwrap();
                assert!(why.contains("interim"), "{h1:?}: {why}");
            }
        }
    }
}

/// A proxy, without retries, in front of an endpoint that sends a 200 head declaring 100 bytes
/// and then closes.
async fn head_then_close() -> tailguard_proxy::Proxy {
    let backend = raw_backend(|mut s| async move {
        let mut buf = Vec::new();
        if read_head(&mut s, &mut buf).await.is_some() {
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
                .await;
        }
    })
    .await;
    let mut service = ServiceConfig::new("web", vec![Upstream::new(backend)]);
    service.arm.retries = None;
    support::start(service).await
}

/// Item 5: an endpoint that sends a head and then closes. Every client gets the head and a
/// close before the declared length (some got no status at all), over HTTP/1.1 and HTTP/2;
/// `requests_total{class="2xx"}` counts them and `responses_truncated_total` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_then_a_close_reaches_every_client() {
    let proxy = head_then_close().await;
    let n = 20;
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let addr = proxy.addr();
            tokio::spawn(
                async move { exchange(addr, b"GET / HTTP/1.1\r\nHost: web\r\n\r\n").await },
            )
        })
        .collect();
    for t in tasks {
        let resp = t.await.unwrap();
        assert_eq!(
            status_of(&resp),
            "200",
            "a status, then the close: {resp:?}"
        );
        assert!(resp.ends_with("\r\n\r\n"), "no body bytes: {resp:?}");
    }
    // HTTP/2: HEADERS, then the stream reset.
    let c = support::client(true);
    for _ in 0..5 {
        let req = Request::get(format!("http://{}/", proxy.addr()))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resp = bounded(c.request(req)).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert!(bounded(resp.into_body().collect()).await.is_err());
    }
    let text = proxy.metrics_text();
    let value = |series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series))
            .map_or(0.0, |v| v.trim().parse().unwrap())
    };
    let two = r#"tailguard_proxy_requests_total{service="web",route="[default]",class="2xx"} "#;
    let cut = r#"tailguard_proxy_responses_truncated_total{service="web",route="[default]"} "#;
    assert_eq!(value(two), f64::from(n + 5), "{text}");
    assert_eq!(value(cut), f64::from(n + 5), "{text}");
}

/// Item 8: `Connection` may not name the host, the framing or a header the proxy reads or
/// adds (`Connection: Host, Content-Length` took the client's `Host` away).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_tokens_cannot_take_end_to_end_headers() {
    let echo = TestServer::start().await;
    for h1 in BOTH {
        let proxy = proxy_over(echo.upstream(), h1).await;
        let req = b"POST /echo HTTP/1.1\r\nHost: web\r\nConnection: close, Host, Content-Length, Via, X-Forwarded-For, x-tailguard-timeout-ms\r\nx-tailguard-timeout-ms: 5000\r\nContent-Length: 5\r\n\r\nhello";
        let resp = exchange(proxy.addr(), req).await;
        assert_eq!(status_of(&resp), "200", "{h1:?}: {resp}");
        assert!(resp.ends_with("hello"), "{h1:?}: {resp}");
        assert_eq!(echo.last_host().as_deref(), Some("web"), "{h1:?}");
        let h = echo.last_headers();
        assert!(
            h.contains_key("x-forwarded-for") && h.contains_key("via"),
            "{h:?}"
        );
        assert!(h.contains_key("x-tailguard-timeout-ms"), "{h:?}");
    }
}

/// Item 7: the soonest valid deadline among repeated `x-tailguard-timeout-ms` headers holds
/// (`99999999` then `300` let a 3 s backend answer 200).
#[tokio::test(start_paused = true)]
async fn the_soonest_of_repeated_deadline_headers_holds() {
    let slow = TestServer::builder()
        .delay(Duration::from_secs(3))
        .start()
        .await;
    let proxy = support::start(ServiceConfig::new("web", vec![slow.upstream()])).await;
    for order in [["99999999", "300"], ["300", "99999999"]] {
        let req = format!(
            "GET / HTTP/1.1\r\nHost: web\r\nConnection: close\r\nx-tailguard-timeout-ms: {}\r\nx-tailguard-timeout-ms: {}\r\n\r\n",
            order[0], order[1]
        );
        let started = tokio::time::Instant::now();
        let resp = exchange(proxy.addr(), req.as_bytes()).await;
        assert_eq!(status_of(&resp), "504", "{order:?}: {resp}");
        assert!(started.elapsed() < Duration::from_secs(1), "{order:?}");
    }
}

/// Item 9: `HTTP/1.2` is served as HTTP/1.1 (it was closed unanswered), the first request of a
/// connection and the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_http1_minor_version_is_served() {
    let backend = TestServer::start().await;
    let proxy = support::start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    let two = b"GET / HTTP/1.2\r\nHost: web\r\n\r\nGET / HTTP/1.2\r\nHost: web\r\nConnection: close\r\n\r\n";
    let resp = exchange(proxy.addr(), two).await;
    assert_eq!(resp.matches("HTTP/1.1 200 OK").count(), 2, "{resp}");
}

/// Item 5 with curl: the head of a response cut short, then the close. curl exits 18 (a
/// transfer closed with bytes outstanding) over HTTP/1.1 and 92 (a stream error) over
/// HTTP/2, with the status in hand, where it used to exit 52 (an empty reply).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: curl"]
async fn curl_gets_the_head_of_a_response_cut_short() {
    let curl = support::peers::tool("curl", "curl");
    let proxy = head_then_close().await;
    let url = format!("http://{}/", proxy.addr());
    for (version, exit) in [("--http1.1", 18), ("--http2-prior-knowledge", 92)] {
        for _ in 0..10 {
            let (curl, url) = (curl.clone(), url.clone());
            let out = tokio::task::spawn_blocking(move || {
                std::process::Command::new("timeout")
                    .args(["10"])
                    .arg(&curl)
                    .args(["-s", "-D", "-", "-o", "/dev/null", version, &url])
                    .output()
                    .unwrap()
            })
            .await
            .unwrap();
            // The head as curl read it (its `%{http_code}` says 000 after an HTTP/2 reset).
            let head = String::from_utf8_lossy(&out.stdout);
            let status = head.lines().next().unwrap_or_default();
            assert!(
                status.starts_with("HTTP/") && status.contains(" 200"),
                "{version}: {head}"
            );
            assert_eq!(out.status.code(), Some(exit), "{version}");
        }
    }
}
