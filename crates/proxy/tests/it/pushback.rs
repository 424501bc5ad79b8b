//! A backend's pushback, live (issue 45): `Retry-After` on a 429 or 503 keeps its endpoint out
//! of picks for that long, capped at `client.pushbackMaxMs` (10 s) whatever it asks (a year),
//! never for more than half the endpoints at once; when every endpoint has asked, the proxy
//! answers 503 at once with the soonest `Retry-After` and sends nothing; gRPC's
//! `grpc-retry-pushback-ms` delays a retry, and a negative one forbids it. Backends on
//! 127.0.0.1, on tokio's paused clock.

use crate::support;

use std::time::Duration;
use support::{client, send, start, AsUpstream};
use tailguard_balance::Policy;
use tailguard_proxy::config::ServiceConfig;
use tailguard_testsupport::TestServer;

fn service(backends: &[&TestServer]) -> ServiceConfig {
    let mut s = ServiceConfig::new("web", backends.iter().map(|b| b.upstream()).collect());
    s.arm.policy = Policy::RoundRobin;
    s.arm.accrual = None;
    s
}

/// A 429 asking for a year keeps its endpoint out for the 10 s cap, then it is back; the 429
/// itself reaches the client (it is not retried) and is no failure for accrual.
#[tokio::test(start_paused = true)]
async fn retry_after_of_a_year_keeps_an_endpoint_out_for_the_cap_only() {
    let asking = TestServer::start().await;
    let other = TestServer::start().await;
    let mut s = service(&[&asking, &other]);
    s.arm.accrual = Some(tailguard_resilience::AccrualConfig {
        policy: tailguard_resilience::TripPolicy::ConsecutiveFailures { failures: 1 },
        backoff: tailguard_resilience::Backoff::Constant(Duration::from_secs(60)),
    });
    s.arm.classifier.four_xx_is_failure = true;
    let proxy = start(s).await;
    let c = client(false);
    asking.set_status(429);
    asking.set_header(Some(("retry-after", "31536000")));
    // Round robin: within two requests one reaches `asking` and comes back 429.
    let mut statuses = Vec::new();
    while asking.hits() == 0 {
        statuses.push(send(&c, proxy.addr(), "GET", "/").await.0.as_u16());
    }
    assert_eq!(statuses.last(), Some(&429));
    // `/endpoints` shows the pushback, capped at 10 s.
    let asked = asking.addr().to_string();
    let view = support::views(&proxy)
        .into_iter()
        .find(|v| v.addr == asked)
        .unwrap();
    assert!(
        view.pushed_back_ms
            .is_some_and(|ms| ms > 9_000 && ms <= 10_000),
        "{view:?}"
    );
    asking.set_status(200);
    asking.set_header(None);
    // For the next 9 s every request goes to the other endpoint.
    for _ in 0..30 {
        tokio::time::advance(Duration::from_millis(300)).await;
        assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 200);
    }
    assert_eq!(asking.hits(), 1, "kept out while its pushback lasts");
    // Past the 10 s cap (not a year), it takes requests again: and a 429 that asked was no
    // failure for accrual, even with 4xx counted as failures (one failure would trip it).
    tokio::time::advance(Duration::from_secs(2)).await;
    for _ in 0..4 {
        assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 200);
    }
    assert!(asking.hits() >= 2, "back after the cap: {}", asking.hits());
}

/// Both endpoints answer 503 asking for 3 s (a GET's 503 is retried on the other, so both ask
/// within one request). Only one of two is kept out; once both have asked, the next request is
/// answered 503 at once with `Retry-After`, reaching no backend; after 3 s they are asked again.
#[tokio::test(start_paused = true)]
async fn when_every_endpoint_pushes_back_the_proxy_answers_at_once() {
    let a = TestServer::start().await;
    let b = TestServer::start().await;
    let proxy = start(service(&[&a, &b])).await;
    let c = client(false);
    for s in [&a, &b] {
        s.set_status(503);
        s.set_header(Some(("retry-after", "3")));
    }
    let (status, _, _) = send(&c, proxy.addr(), "GET", "/").await;
    assert_eq!(status, 503);
    assert_eq!(
        a.hits() + b.hits(),
        2,
        "the retry went to the other, which asked too"
    );
    let before = a.hits() + b.hits();
    let (status, headers, body) = send(&c, proxy.addr(), "GET", "/").await;
    assert_eq!(status, 503);
    let wait: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=3).contains(&wait), "Retry-After {wait}");
    assert_eq!(
        headers["x-tailguard-error"],
        "every endpoint asked to wait (Retry-After)"
    );
    assert!(!body.is_empty());
    assert_eq!(
        a.hits() + b.hits(),
        before,
        "nothing sent while all push back"
    );
    for s in [&a, &b] {
        s.set_status(200);
        s.set_header(None);
    }
    tokio::time::advance(Duration::from_secs(3)).await;
    assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 200);
}

/// With `pushbackMaxMs: 0`, `Retry-After` is ignored: the endpoint keeps its share.
#[tokio::test(start_paused = true)]
async fn pushback_off_ignores_retry_after() {
    let asking = TestServer::start().await;
    let other = TestServer::start().await;
    let mut s = service(&[&asking, &other]);
    s.arm.pushback_max = None;
    let proxy = start(s).await;
    let c = client(false);
    asking.set_status(429);
    asking.set_header(Some(("retry-after", "30")));
    for _ in 0..10 {
        send(&c, proxy.addr(), "GET", "/").await;
    }
    assert_eq!(asking.hits(), 5, "round robin, pushback ignored");
}

/// gRFC A6: an UNAVAILABLE carrying `grpc-retry-pushback-ms` is retried no sooner than it asks
/// (capped), and not at all when the value is negative.
#[tokio::test(start_paused = true)]
async fn grpc_pushback_delays_or_forbids_the_retry() {
    let a = TestServer::start().await;
    let b = TestServer::start().await;
    let proxy = start(service(&[&a, &b])).await;
    let c = client(true);
    for s in [&a, &b] {
        s.set_header(Some(("grpc-retry-pushback-ms", "-1")));
    }
    let code = support::grpc_call(&c, proxy.addr(), 14).await;
    assert_eq!(code, Some(14));
    assert_eq!(a.hits() + b.hits(), 1, "a negative pushback: no retry");
    for s in [&a, &b] {
        s.set_header(Some(("grpc-retry-pushback-ms", "250")));
    }
    let started = tokio::time::Instant::now();
    let code = support::grpc_call(&c, proxy.addr(), 14).await;
    assert_eq!(code, Some(14));
    assert!(a.hits() + b.hits() >= 3, "retried: {}", a.hits() + b.hits());
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
}
