//! A service's rate limit (`rateLimit: {requestsPerSec, burst}`), live: past it, 429 with
//! `Retry-After` (gRPC: RESOURCE_EXHAUSTED), counted per service and route, nothing sent and
//! nothing blamed on an endpoint; checked before `maxConcurrentRequests`, so a refused request
//! takes no place in flight. Backends on 127.0.0.1, tokio's paused clock.

use crate::support;

use std::time::Duration;
use support::{client, send, start, views, AsUpstream};
use tailguard_proxy::config::ServiceConfig;
use tailguard_resilience::rate::RateLimit;
use tailguard_testsupport::TestServer;

fn limited(backend: &TestServer, per_sec: f64, burst: u32) -> ServiceConfig {
    let mut s = ServiceConfig::new("web", vec![backend.upstream()]);
    s.rate_limit = Some(RateLimit { per_sec, burst });
    s
}

fn rate_limited(proxy: &tailguard_proxy::Proxy) -> f64 {
    let prefix = "tailguard_proxy_rate_limited_total{service=\"web\",route=\"[default]\"} ";
    proxy
        .metrics_text()
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

#[tokio::test(start_paused = true)]
async fn past_the_rate_requests_get_429_with_retry_after_and_reach_nothing() {
    let backend = TestServer::start().await;
    let proxy = start(limited(&backend, 10.0, 5)).await;
    let c = client(false);
    let mut statuses = Vec::new();
    for _ in 0..20 {
        let (status, headers, _) = send(&c, proxy.addr(), "GET", "/").await;
        if status == 429 {
            assert_eq!(headers["retry-after"], "1");
            assert_eq!(headers["x-tailguard-error"], "over rateLimit");
        }
        statuses.push(status.as_u16());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        5,
        "{statuses:?}"
    );
    assert_eq!(backend.hits(), 5);
    assert_eq!(rate_limited(&proxy), 15.0);
    let view = &views(&proxy)[0];
    assert_eq!(
        (view.successes, view.failures),
        (5, 0),
        "not the endpoint's fault"
    );
    // 300 ms later, three more tokens (10 a second); a second later, the burst of five, no
    // more (the bucket holds five).
    for (wait, want) in [(300, 3), (1_000, 5)] {
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let mut ok = 0;
        for _ in 0..15 {
            ok += u32::from(send(&c, proxy.addr(), "GET", "/").await.0 == 200);
        }
        assert_eq!(ok, want, "after {wait} ms");
    }
}

#[tokio::test(start_paused = true)]
async fn a_grpc_call_past_the_rate_gets_resource_exhausted() {
    let backend = TestServer::start().await;
    let proxy = start(limited(&backend, 1.0, 1)).await;
    let c = client(true);
    assert_eq!(support::grpc_call(&c, proxy.addr(), 0).await, Some(0));
    let (code, message) = support::grpc_call_message(&c, proxy.addr()).await;
    assert_eq!(code, Some(8));
    assert_eq!(message.as_deref(), Some("over rateLimit"));
}

/// The rate limit comes first: with one place in flight, held by a slow request, the next is
/// refused by the rate limit (429), taking no place; once a token is back, the in-flight limit
/// refuses (503).
#[tokio::test(start_paused = true)]
async fn the_rate_limit_is_checked_before_the_in_flight_limit() {
    let backend = TestServer::start().await;
    backend.set_delay(Duration::from_secs(5));
    let mut s = limited(&backend, 1.0, 1);
    s.arm.admission = Some(tailguard_client::AdmissionConfig::cap(1));
    let proxy = start(s).await;
    let addr = proxy.addr();
    let slow = tokio::spawn(async move { send(&client(false), addr, "GET", "/").await.0 });
    support::eventually(Duration::from_secs(1), async || backend.hits() == 1).await;
    let c = client(false);
    assert_eq!(send(&c, addr, "GET", "/").await.0, 429);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        send(&c, addr, "GET", "/").await.0,
        503,
        "now the in-flight limit"
    );
    assert_eq!(slow.await.unwrap(), 200);
}
