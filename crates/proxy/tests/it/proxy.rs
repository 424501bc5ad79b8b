//! The proxy end to end on loopback: retries, balancing, accrual, discovery, hygiene, HTTP/2.

use crate::support;

use std::time::Duration;
use support::{client, eventually, send, start, AsUpstream};
use tailguard_balance::load::PeakEwmaConfig;
use tailguard_balance::{LoadKind, Policy};
use tailguard_proxy::config::{Discovery, HostHeader, ServiceConfig, UpstreamProtocol};
use tailguard_resilience::{AccrualConfig, Backoff, Classifier, TripPolicy};
use tailguard_testsupport::promtool;
use tailguard_testsupport::{bounded, TestServer};

fn round_robin(backends: &[&TestServer]) -> ServiceConfig {
    let mut s = ServiceConfig::new("web", backends.iter().map(|b| b.upstream()).collect());
    s.arm.policy = Policy::RoundRobin;
    s.arm.accrual = None;
    s
}

#[tokio::test]
async fn retries_turn_5xx_into_success_for_get_but_not_post() {
    let (bad, good) = (TestServer::start().await, TestServer::start().await);
    bad.set_status(500);
    let proxy = start(round_robin(&[&bad, &good])).await;
    let c = client(false);
    for _ in 0..20 {
        assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 200);
    }
    assert!(
        bad.hits() >= 5,
        "the failing backend was tried: {}",
        bad.hits()
    );
    let mut post_failures = 0;
    for _ in 0..20 {
        let (status, _, _) = send(&c, proxy.addr(), "POST", "/").await;
        post_failures += u32::from(status == 500);
    }
    assert!(
        (5..=15).contains(&post_failures),
        "round robin sent about half the POSTs to the 500: {post_failures}"
    );
    // The admin server's /metrics, as curl or promtool read it: Prometheus text that
    // Prometheus's own linter accepts.
    let admin = proxy.admin_addr().unwrap();
    let (kind, metrics) = tokio::task::spawn_blocking(move || promtool::scrape(admin))
        .await
        .unwrap();
    assert_eq!(kind, "text/plain; version=0.0.4; charset=utf-8");
    assert!(
        metrics.contains("tailguard_proxy_retries_total{service=\"web\",route=\"[default]\"}"),
        "{metrics}"
    );
    promtool::assert_clean(&metrics);
    proxy.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn peak_ewma_shifts_traffic_away_from_a_backend_made_slow() {
    let backends = [
        TestServer::start().await,
        TestServer::start().await,
        TestServer::start().await,
    ];
    let mut s = round_robin(&backends.iter().collect::<Vec<_>>());
    let ewma = PeakEwmaConfig {
        tau: Duration::from_secs(1),
        default_rtt: Duration::from_millis(1),
        ..PeakEwmaConfig::default()
    };
    s.arm.policy = Policy::p2c(LoadKind::PeakEwma(ewma));
    let proxy = start(s).await;
    let c = client(false);
    for _ in 0..30 {
        send(&c, proxy.addr(), "GET", "/").await;
    }
    backends[0].set_delay(Duration::from_millis(40));
    let shifted = eventually(Duration::from_secs(10), async || {
        let before = backends[0].hits();
        for _ in 0..50 {
            send(&c, proxy.addr(), "GET", "/").await;
        }
        backends[0].hits() - before <= 3
    })
    .await;
    assert!(shifted, "the slow backend still gets traffic");
    proxy.shutdown().await;
}

#[tokio::test]
#[ignore = "tier 2: a 300 ms accrual backoff on the wall clock"]
async fn accrual_removes_a_failing_backend_and_the_probe_brings_it_back() {
    let (bad, good) = (TestServer::start().await, TestServer::start().await);
    bad.set_status(503);
    let mut s = round_robin(&[&bad, &good]);
    s.arm.classifier = Classifier::non_retryable_5xx();
    s.arm.retries = None;
    let backoff = Backoff::Constant(Duration::from_millis(300));
    s.arm.accrual = Some(AccrualConfig {
        policy: TripPolicy::ConsecutiveFailures { failures: 3 },
        backoff,
    });
    let proxy = start(s).await;
    let c = client(false);
    for _ in 0..8 {
        send(&c, proxy.addr(), "GET", "/").await;
    }
    let views = proxy.shared().services()[0]
        .endpoints()
        .views(proxy.shared().clock.now());
    assert_eq!(views[0].state, "dead", "{views:?}");
    let hits = bad.hits();
    for _ in 0..10 {
        assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 200);
    }
    assert_eq!(
        bad.hits(),
        hits,
        "no traffic to a dead endpoint during its backoff"
    );
    bad.set_status(200);
    let back = eventually(Duration::from_secs(5), async || {
        send(&c, proxy.addr(), "GET", "/").await;
        proxy.shared().services()[0]
            .endpoints()
            .views(proxy.shared().clock.now())[0]
            .state
            == "alive"
    })
    .await;
    assert!(back, "the probe did not revive the endpoint");
    assert_eq!(bad.hits(), hits + 1, "exactly one probe revived it");
    let metrics = proxy.shared().metrics.encode();
    assert!(
        metrics.contains("class=\"dead\"") && metrics.contains("class=\"alive\""),
        "{metrics}"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn unknown_hosts_get_404_and_broken_upstreams_502_with_a_reason() {
    let backend = TestServer::start().await;
    let mut s = round_robin(&[&backend]);
    s.hosts = vec!["web".into()];
    let proxy = start(s).await;
    let c = client(false);
    let (status, headers, _) = send(&c, proxy.addr(), "GET", "/").await;
    assert_eq!(status, 404);
    assert!(headers["x-tailguard-error"]
        .to_str()
        .unwrap()
        .contains("no service for host"));
    drop(proxy);
    let dead = tailguard_http::tcp::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = dead.local_addr().unwrap();
    drop(dead);
    let s = ServiceConfig::new("gone", vec![tailguard_proxy::config::Upstream::new(addr)]);
    let proxy = start(s).await;
    let (status, headers, body) = send(&c, proxy.addr(), "GET", "/").await;
    assert_eq!(status, 502);
    // By default the client reads the reason alone: no address, no error chain.
    assert_eq!(headers["x-tailguard-error"], "connection refused");
    assert_eq!(&body[..], b"connection refused\n");
    let grpc = support::grpc_call_message(&client(true), proxy.addr()).await;
    assert_eq!(grpc, (Some(14), Some("connection refused".to_owned())));
    // `/endpoints` keeps the detail.
    assert_eq!(
        support::views(&proxy)[0].last_error.as_ref().unwrap().what,
        "connection refused"
    );
    proxy.shutdown().await;
    // With `limits.clientErrorDetail: full`, the endpoint and the cause.
    let s = ServiceConfig::new("gone", vec![tailguard_proxy::config::Upstream::new(addr)]);
    let proxy = support::start_detailed(s).await;
    let (_, headers, _) = send(&c, proxy.addr(), "GET", "/").await;
    let said = headers["x-tailguard-error"].to_str().unwrap();
    assert!(
        said.starts_with(&format!("upstream {addr}: connection refused")),
        "{said}"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn hop_by_hop_headers_are_removed_and_via_and_forwarded_for_added() {
    let backend = TestServer::start().await;
    let proxy = start(round_robin(&[&backend])).await;
    let c = client(false);
    let req = http::Request::get(format!("http://{}/", proxy.addr()))
        .header("connection", "x-secret")
        .header("x-secret", "1")
        .header("proxy-authorization", "basic abc")
        .header("x-kept", "yes")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let resp = bounded(c.request(req)).await.unwrap();
    assert_eq!(resp.headers()["via"], "1.1 tailguard");
    let seen = backend.last_headers();
    assert!(seen.get("x-secret").is_none() && seen.get("proxy-authorization").is_none());
    assert_eq!(seen["x-kept"], "yes");
    assert_eq!(seen["via"], "1.1 tailguard");
    assert_eq!(seen["x-forwarded-for"], "127.0.0.1");
    assert_eq!(seen["host"], proxy.addr().to_string());
    proxy.shutdown().await;
}

#[tokio::test]
async fn http2_requests_pass_with_trailers() {
    let backend = TestServer::start().await;
    let s = round_robin(&[&backend]);
    assert_eq!(s.protocol, UpstreamProtocol::Auto, "gRPC passes by default");
    let proxy = start(s).await;
    let c = client(true);
    let req = http::Request::post(format!("http://{}/trailers", proxy.addr()))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(http_body_util::Full::new(bytes::Bytes::from_static(
            b"\0\0\0\0\0",
        )))
        .unwrap();
    let resp = bounded(c.request(req)).await.unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    let collected = bounded(http_body_util::BodyExt::collect(resp.into_body()))
        .await
        .unwrap();
    assert_eq!(collected.trailers().unwrap()["grpc-status"], "0");
    assert_eq!(backend.last_headers()["te"], "trailers");
    proxy.shutdown().await;
}

/// Over HTTP/2 the forwarded host travels as `:authority` (RFC 9113 8.3.1), with no `Host`
/// header beside it: the client's host, or the rewrite, from HTTP/2 and HTTP/1.1 clients alike.
#[tokio::test]
async fn http2_upstreams_get_the_host_as_authority_and_no_host_header() {
    let backend = TestServer::start().await;
    for rewrite in [None, Some("web.internal")] {
        for h2_client in [true, false] {
            let mut s = round_robin(&[&backend]);
            s.protocol = UpstreamProtocol::Http2;
            if let Some(h) = rewrite {
                s.host_header = HostHeader::Rewrite(h.to_owned());
            }
            let proxy = start(s).await;
            let (status, _, _) = send(&client(h2_client), proxy.addr(), "GET", "/").await;
            assert_eq!(status, 200);
            let expected = rewrite.map_or_else(|| proxy.addr().to_string(), str::to_owned);
            let case = format!("rewrite {rewrite:?}, h2 client {h2_client}");
            assert_eq!(backend.last_authority(), Some(expected), "{case}");
            assert!(!backend.last_headers().contains_key("host"), "{case}");
            proxy.shutdown().await;
        }
    }
    assert_eq!(backend.hits(), 4);
}

#[tokio::test]
async fn file_discovery_applies_an_edit() {
    let (first, second) = (TestServer::start().await, TestServer::start().await);
    let dir = std::env::temp_dir().join(format!("tailguard-proxy-fs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("web.txt");
    std::fs::write(&path, format!("{}\n", first.addr())).unwrap();
    let mut s = round_robin(&[&first]);
    s.discovery = Discovery::File {
        path: path.clone(),
        interval: Duration::from_millis(50),
    };
    let proxy = start(s).await;
    let c = client(false);
    send(&c, proxy.addr(), "GET", "/").await;
    assert_eq!(first.hits(), 1);
    std::fs::write(&path, format!("# moved\n{} 2\n", second.addr())).unwrap();
    let moved = eventually(Duration::from_secs(5), async || {
        send(&c, proxy.addr(), "GET", "/").await;
        second.hits() > 0
    })
    .await;
    assert!(moved, "the edit was not applied");
    let before = first.hits();
    for _ in 0..5 {
        send(&c, proxy.addr(), "GET", "/").await;
    }
    assert_eq!(first.hits(), before);
    proxy.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn shutdown_drains_requests_in_flight_and_reload_swaps_upstreams() {
    let (slow, other) = (TestServer::start().await, TestServer::start().await);
    slow.set_delay(Duration::from_millis(800));
    let proxy = start(round_robin(&[&slow])).await;
    let addr = proxy.addr();
    let admin = proxy.admin_addr().unwrap();
    let c = client(false);
    let mut reloaded = support::config(round_robin(&[&other]));
    reloaded.listen = addr;
    let in_flight = tokio::spawn({
        let c = c.clone();
        async move { send(&c, addr, "GET", "/").await.0 }
    });
    assert!(eventually(Duration::from_secs(2), async || slow.hits() == 1).await);
    proxy.reload(&reloaded).await.unwrap();
    assert_eq!(send(&c, addr, "GET", "/").await.0, 200);
    assert_eq!(other.hits(), 1, "new requests go to the reloaded upstream");
    assert_eq!(send(&c, admin, "GET", "/ready").await.0, 200);
    let shutdown = tokio::spawn(proxy.shutdown());
    // The admin server outlives the listener: health checks see the drain.
    let draining = eventually(Duration::from_secs(2), async || {
        let (status, _, body) = send(&c, admin, "GET", "/ready").await;
        status == 503 && &body[..] == b"draining\n"
    });
    assert!(
        draining.await,
        "/ready turned 503 while the request was in flight"
    );
    shutdown.await.unwrap();
    assert_eq!(
        in_flight.await.unwrap(),
        200,
        "the request in flight finished"
    );
}

/// A request whose connection could not be made sent nothing, so it goes to another endpoint
/// whatever its method, with its streamed body intact (Linkerd's requeue, Envoy's
/// `connect-failure`): POSTs round-robined onto a closed port all arrive whole.
#[tokio::test]
async fn a_refused_connection_is_retried_for_any_method_with_the_body_intact() {
    let closed_port = tailguard_testsupport::ClosedPort::new();
    let closed = closed_port.addr();
    let backend = TestServer::start().await;
    let mut s = ServiceConfig::new(
        "web",
        vec![
            tailguard_proxy::config::Upstream::new(closed),
            backend.upstream(),
        ],
    );
    s.arm.policy = Policy::RoundRobin;
    s.arm.accrual = None;
    let proxy = start(s).await;
    let c = client(false);
    let payload = bytes::Bytes::from(vec![7u8; 256 * 1024]);
    for round in 0..4 {
        let req = http::Request::post(format!("http://{}/echo", proxy.addr()))
            .body(http_body_util::Full::new(payload.clone()))
            .unwrap();
        let resp = bounded(c.request(req)).await.unwrap();
        assert_eq!(resp.status(), 200, "round {round}");
        let body = bounded(http_body_util::BodyExt::collect(resp.into_body()))
            .await
            .unwrap()
            .to_bytes();
        assert!(body == payload, "round {round}: the body arrived whole");
    }
    assert_eq!(backend.hits(), 4);
    proxy.shutdown().await;
}

/// One HTTP/2 (prior knowledge) client connection to `addr`, and the task driving it.
async fn h2_connection<B>(
    addr: std::net::SocketAddr,
) -> (
    hyper::client::conn::http2::SendRequest<B>,
    tokio::task::JoinHandle<hyper::Result<()>>,
)
where
    B: hyper::body::Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = bounded(tailguard_http::tcp::connect(
        addr,
        tailguard_http::Nagle::Off,
    ))
    .await
    .unwrap();
    let (tx, conn) = bounded(hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    ))
    .await
    .unwrap();
    (tx, tokio::spawn(conn))
}

/// One long-lived HTTP/2 client connection (a gRPC channel) is balanced per request, not per
/// connection: its requests spread over every endpoint.
#[tokio::test]
async fn one_h2_client_connection_is_balanced_per_request() {
    let (a, b, c) = (
        TestServer::start().await,
        TestServer::start().await,
        TestServer::start().await,
    );
    let proxy = start(round_robin(&[&a, &b, &c])).await;
    let (mut tx, driver) = h2_connection(proxy.addr()).await;
    for _ in 0..30 {
        let req = http::Request::get(format!("http://{}/", proxy.addr()))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let resp = bounded(tx.send_request(req)).await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    assert_eq!(
        (a.hits(), b.hits(), c.hits()),
        (10, 10, 10),
        "round robin over one client connection"
    );
    drop(tx);
    bounded(driver).await.unwrap().unwrap();
    proxy.shutdown().await;
}

/// Bidirectional streaming (gRPC's streaming calls): each message the client sends comes back
/// echoed before it sends the next, so neither direction is buffered by the proxy, over an
/// HTTP/2 or an HTTP/1.1 upstream.
#[tokio::test]
async fn request_and_response_bodies_stream_message_by_message() {
    use http_body_util::BodyExt;
    let backend = TestServer::start().await;
    for protocol in [UpstreamProtocol::Auto, UpstreamProtocol::Http1] {
        let mut s = round_robin(&[&backend]);
        s.protocol = protocol;
        let proxy = start(s).await;
        let (mut tx, driver) = h2_connection(proxy.addr()).await;
        let (send, recv) = tokio::sync::mpsc::channel::<bytes::Bytes>(1);
        let frames = futures_util::stream::unfold(recv, |mut recv| async move {
            let chunk = recv.recv().await?;
            Some((
                Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(chunk)),
                recv,
            ))
        });
        let req = http::Request::post(format!("http://{}/echo", proxy.addr()))
            .header("content-type", "application/grpc")
            .body(http_body_util::StreamBody::new(Box::pin(frames)))
            .unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(10), async {
            send.send(bytes::Bytes::from_static(b"message 0"))
                .await
                .unwrap();
            tx.send_request(req).await.unwrap()
        })
        .await
        .expect("response head within 10 s");
        assert_eq!(resp.status(), 200, "{protocol:?}");
        let mut body = resp.into_body();
        for i in 0..5 {
            if i > 0 {
                send.send(format!("message {i}").into()).await.unwrap();
            }
            let mut got = Vec::new();
            let want = format!("message {i}");
            while got.len() < want.len() {
                let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
                    .await
                    .unwrap_or_else(|_| panic!("{protocol:?}: message {i} not echoed in 10 s"))
                    .unwrap()
                    .unwrap();
                got.extend_from_slice(frame.data_ref().unwrap());
            }
            assert_eq!(String::from_utf8(got).unwrap(), want, "{protocol:?}");
        }
        drop(send);
        let rest = tokio::time::timeout(Duration::from_secs(10), body.collect())
            .await
            .expect("the response ends with the request")
            .unwrap();
        assert!(
            rest.to_bytes().is_empty(),
            "{protocol:?}: nothing after the messages"
        );
        drop(tx);
        bounded(driver).await.unwrap().unwrap();
        proxy.shutdown().await;
    }
}

/// A discovery change keeps what was learned about the endpoints that remain: a backend
/// taken out by failure accrual stays out when another backend is added to the file.
#[tokio::test]
async fn a_discovery_change_keeps_a_dead_endpoint_dead() {
    let (bad, good, added) = (
        TestServer::start().await,
        TestServer::start().await,
        TestServer::start().await,
    );
    bad.set_status(503);
    let dir = std::env::temp_dir().join(format!("tailguard-proxy-keep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("web.txt");
    std::fs::write(&path, format!("{}\n{}\n", bad.addr(), good.addr())).unwrap();
    let mut s = round_robin(&[&bad, &good]);
    s.discovery = Discovery::File {
        path: path.clone(),
        interval: Duration::from_millis(50),
    };
    s.arm.classifier = Classifier::non_retryable_5xx();
    s.arm.retries = None;
    s.arm.accrual = Some(AccrualConfig {
        policy: TripPolicy::ConsecutiveFailures { failures: 2 },
        backoff: Backoff::Constant(Duration::from_secs(60)),
    });
    let proxy = start(s).await;
    let c = client(false);
    for _ in 0..4 {
        send(&c, proxy.addr(), "GET", "/").await;
    }
    let state = |addr: std::net::SocketAddr| {
        let shared = proxy.shared();
        let views = shared.services()[0].endpoints().views(shared.clock.now());
        views
            .into_iter()
            .find(|v| v.addr == addr.to_string())
            .map(|v| (v.state, v.failures))
    };
    assert_eq!(state(bad.addr()), Some(("dead", 2)));
    std::fs::write(
        &path,
        format!("{}\n{}\n{}\n", bad.addr(), good.addr(), added.addr()),
    )
    .unwrap();
    let applied = eventually(Duration::from_secs(5), async || {
        state(added.addr()).is_some()
    })
    .await;
    assert!(applied, "the edit was not applied");
    assert_eq!(
        state(bad.addr()),
        Some(("dead", 2)),
        "still out, counts kept"
    );
    let before = bad.hits();
    for _ in 0..6 {
        assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 200);
    }
    assert_eq!(bad.hits(), before, "no request went to the dead endpoint");
    assert!(added.hits() > 0);
    proxy.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
