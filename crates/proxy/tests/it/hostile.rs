//! Hostile and odd clients against a live proxy, over raw sockets on 127.0.0.1: each request
//! gets a clear status, the proxy stays live, and no client's fault ever counts against a
//! healthy backend (`/endpoints` keeps them `alive`).

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;
use support::{exchange, send, status_of, AsUpstream};
use tailguard_proxy::config::ServiceConfig;
use tailguard_testsupport::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn three_backends() -> (Vec<TestServer>, tailguard_proxy::Proxy) {
    let backends = vec![
        TestServer::start().await,
        TestServer::start().await,
        TestServer::start().await,
    ];
    let ups = backends.iter().map(TestServer::upstream).collect();
    let mut service = ServiceConfig::new("web", ups);
    service.path_prefix = Some("/api".into());
    (backends, support::start(service).await)
}

/// Every endpoint's state, as the admin `/endpoints` page shows it.
fn states(proxy: &tailguard_proxy::Proxy) -> Vec<&'static str> {
    support::views(proxy).iter().map(|v| v.state).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_aborted_bodies_are_the_clients_fault_not_the_backends() {
    let (_backends, proxy) = three_backends().await;
    let addr = proxy.addr();
    for _ in 0..40 {
        let bad_chunk = b"POST /api/x HTTP/1.1\r\nHost: web\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n";
        let resp = exchange(addr, bad_chunk).await;
        assert_eq!(status_of(&resp), "400", "{resp}");
        assert!(
            resp.contains("x-tailguard-error: client: malformed request body"),
            "{resp}"
        );
        assert!(!resp.contains("127.0.0.1:"), "no backend is blamed: {resp}");
    }
    for _ in 0..40 {
        // Announces 1 MB, sends 1 KB, closes.
        let mut s = TcpStream::connect(addr).await.unwrap();
        let head = b"POST /api/x HTTP/1.1\r\nHost: web\r\nContent-Length: 1048576\r\n\r\n";
        s.write_all(head).await.unwrap();
        s.write_all(&[b'x'; 1024]).await.unwrap();
        drop(s);
    }
    // The proxy has seen every abort once its client errors are counted.
    let counted = support::eventually(Duration::from_secs(5), async || {
        let m = proxy.shared().metrics.encode();
        m.contains("kind=\"aborted\"") && m.contains("kind=\"malformed\"")
    })
    .await;
    assert!(counted, "{}", proxy.shared().metrics.encode());
    assert_eq!(states(&proxy), ["alive", "alive", "alive"]);
    // And the proxy still serves.
    let (status, _, _) = send(&support::client(false), addr, "GET", "/api/x").await;
    assert_eq!(status, 200);
}

// On tokio's paused clock: a case whose connection stays open after its answer waits out
// `exchange`'s 5 s read limit in virtual time.
#[tokio::test(start_paused = true)]
async fn host_and_method_rules() {
    let (_backends, proxy) = three_backends().await;
    let addr = proxy.addr();
    let cases: [(&[u8], &str); 5] = [
        (
            b"GET /api/x HTTP/1.1\r\nHost: web\r\nHost: evil\r\n\r\n",
            "400",
        ),
        (b"GET /api/x HTTP/1.1\r\nConnection: close\r\n\r\n", "400"),
        (b"GET /api/x HTTP/1.0\r\n\r\n", "200"),
        (b"CONNECT web:443 HTTP/1.1\r\nHost: web:443\r\n\r\n", "405"),
        (
            b"GET http://web/api/x HTTP/1.1\r\nHost: evil\r\nConnection: close\r\n\r\n",
            "200",
        ),
    ];
    for (raw, want) in cases {
        let resp = exchange(addr, raw).await;
        assert_eq!(
            status_of(&resp),
            want,
            "{}\n{resp}",
            String::from_utf8_lossy(raw)
        );
    }
    assert_eq!(states(&proxy), ["alive", "alive", "alive"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_prefixes_hold_against_dot_segments_and_partial_names() {
    let (backends, proxy) = three_backends().await;
    let c = support::client(false);
    let addr = proxy.addr();
    for (path, want) in [
        ("/api/x", 200),
        ("/api", 200),
        ("/apix", 404),
        ("/api/../echo", 404),
        ("/api/%2e%2e/echo", 404),
        ("/api/./x/../y", 200),
        ("/api/../../etc/passwd", 400),
    ] {
        let (status, _, _) = send(&c, addr, "GET", path).await;
        assert_eq!(status.as_u16(), want, "{path}");
    }
    let seen: u64 = backends.iter().map(TestServer::hits).sum();
    assert_eq!(
        seen, 3,
        "only the three requests under /api reached a backend"
    );
}

// On tokio's paused clock: the idle limit, the rate grace and the trickle's 100 ms steps are
// virtual time, so a busy machine cannot make the trickle look fast or slow.
#[tokio::test(start_paused = true)]
async fn a_stalled_or_trickling_request_body_gets_408_and_frees_the_backend() {
    let (backend, _) = http1_only().await;
    let upstream = tailguard_proxy::config::Upstream::new(backend);
    let mut service = ServiceConfig::new("web", vec![upstream]);
    service.body.request_idle = Some(Duration::from_millis(300));
    service.body.request_min_rate = Some(100);
    service.body.request_rate_grace = Duration::from_millis(500);
    let proxy = support::start(service).await;
    let addr = proxy.addr();

    // Stalls after its first bytes: a POST's body streams through, a GET's is also copied
    // for a retry; neither waits for the whole body, and both are watched alike.
    for method in ["POST", "GET"] {
        let head = format!("{method} /x HTTP/1.1\r\nHost: web\r\nContent-Length: 100\r\n\r\nabc");
        let stalled = exchange(addr, head.as_bytes()).await;
        assert_eq!(status_of(&stalled), "408", "{method}: {stalled}");
        assert!(stalled.contains("client: request body idle"), "{stalled}");
    }

    // One byte every 100 ms: never idle, far below 100 bytes/s.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"POST /x HTTP/1.1\r\nHost: web\r\nContent-Length: 100\r\n\r\n")
        .await
        .unwrap();
    let trickle = async {
        for _ in 0..100 {
            if s.write_all(b"x").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(3), trickle).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    let resp = String::from_utf8_lossy(&out);
    assert!(
        resp.contains("client: request body slower than 100 bytes/s"),
        "{resp}"
    );
    assert_eq!(states(&proxy), ["alive"]);
}

/// A backend that speaks HTTP/1.1 only (as nginx does by default), reads each request's whole
/// body before it answers, and counts its requests.
async fn http1_only() -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let listener = tailguard_http::tcp::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = std::sync::Arc::new(AtomicU64::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let hits = counted.clone();
            let svc =
                hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    hits.fetch_add(1, Ordering::SeqCst);
                    async move {
                        use http_body_util::BodyExt;
                        let _ = req.into_body().collect().await;
                        let body = http_body_util::Full::new(bytes::Bytes::from_static(b"h1\n"));
                        Ok::<_, std::convert::Infallible>(http::Response::new(body))
                    }
                });
            let io = hyper_util::rt::TokioIo::new(stream);
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(io, svc));
        }
    });
    (addr, hits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_reaches_an_http1_only_backend_by_default() {
    let (backend, hits) = http1_only().await;
    let upstream = tailguard_proxy::config::Upstream::new(backend);
    let proxy = support::start(ServiceConfig::new("web", vec![upstream])).await;
    let c = support::client(true);
    for _ in 0..20 {
        for method in ["GET", "POST", "HEAD"] {
            let (status, _, _) = send(&c, proxy.addr(), method, "/").await;
            assert_eq!(status, 200, "{method}");
        }
    }
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 60);
    assert_eq!(states(&proxy), ["alive"]);
}
