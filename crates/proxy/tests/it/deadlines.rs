//! Deadlines end to end: the caller's (`grpc-timeout`, `x-tailguard-timeout-ms`) caps the
//! proxy's timeouts, each attempt forwards what remains, no attempt is sent or retried past it,
//! and running out is nobody's failure at the endpoint. Paused time: the numbers are exact.

use crate::support;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use std::time::Duration;
use support::{client, start, views, AsUpstream, HttpClient};
use tailguard_client::RetryConfig;
use tailguard_proxy::config::ServiceConfig;
use tailguard_proxy::DEADLINE_HEADER;
use tailguard_resilience::Backoff;
use tailguard_testsupport::{bounded, TestServer};
use tokio::time::Instant;

/// A service over `backends`, round robin, no accrual, at most `retries` retries.
fn service(backends: &[&TestServer], retries: u32) -> ServiceConfig {
    let list = backends.iter().map(|b| b.upstream()).collect();
    let mut s = ServiceConfig::new("web", list);
    s.arm.policy = tailguard_balance::Policy::RoundRobin;
    s.arm.accrual = None;
    s.arm.retries = Some(RetryConfig {
        max_retries: retries,
        ..RetryConfig::default()
    });
    s
}

/// Sends `req`; status, the `grpc-status` (header or trailer) and `x-tailguard-error`.
async fn call(c: &HttpClient, req: Request<Full<Bytes>>) -> (u16, Option<u8>, String) {
    let resp = bounded(c.request(req)).await.unwrap();
    let status = resp.status().as_u16();
    let why = resp
        .headers()
        .get(tailguard_proxy::ERROR_HEADER)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let head = tailguard_proxy::grpc::status(resp.headers());
    let body = bounded(resp.into_body().collect()).await.unwrap();
    let grpc = head.or_else(|| body.trailers().and_then(tailguard_proxy::grpc::status));
    (status, grpc, why)
}

fn get(proxy: std::net::SocketAddr, ms: &str) -> Request<Full<Bytes>> {
    Request::get(format!("http://{proxy}/"))
        .header(DEADLINE_HEADER, ms)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

fn grpc(proxy: std::net::SocketAddr, timeout: &str, code: u8) -> Request<Full<Bytes>> {
    Request::post(format!("http://{proxy}/trailers?grpc-status={code}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-timeout", timeout)
        .body(Full::new(Bytes::from_static(&[0, 0, 0, 0, 0])))
        .unwrap()
}

/// What each backend last received in `header`.
fn received(backends: &[&TestServer], header: &str) -> Vec<String> {
    let mut seen: Vec<String> = backends
        .iter()
        .map(|b| b.last_headers()[header].to_str().unwrap().to_owned())
        .collect();
    seen.sort();
    seen
}

#[tokio::test(start_paused = true)]
async fn each_attempt_forwards_the_time_that_remains() {
    let (a, b) = (TestServer::start().await, TestServer::start().await);
    for backend in [&a, &b] {
        backend.set_delay(Duration::from_millis(100));
        backend.set_status(503);
    }
    let proxy = start(service(&[&a, &b], 1)).await;
    // HTTP: a 503 after 100 ms, retried on the other backend with 900 ms left.
    let started = Instant::now();
    let (status, _, _) = call(&client(false), get(proxy.addr(), "1000")).await;
    assert_eq!(status, 503);
    assert_eq!(started.elapsed(), Duration::from_millis(200));
    assert_eq!(received(&[&a, &b], DEADLINE_HEADER), ["1000", "900"]);
    // gRPC: UNAVAILABLE after 100 ms, retried with 900 ms left, in grpc-timeout's own form.
    for backend in [&a, &b] {
        backend.set_status(200);
    }
    let (status, code, _) = call(&client(true), grpc(proxy.addr(), "1S", 14)).await;
    assert_eq!((status, code), (200, Some(14)));
    assert_eq!(received(&[&a, &b], "grpc-timeout"), ["1000000u", "900000u"]);
    // A total timeout sooner than the caller's deadline is what the backend is told.
    proxy.shutdown().await;
    let mut s = service(&[&a], 0);
    s.arm.timeouts.total = Some(Duration::from_millis(300));
    let proxy = start(s).await;
    call(&client(false), get(proxy.addr(), "5000")).await;
    assert_eq!(a.last_headers()[DEADLINE_HEADER], "300");
    // A request without a deadline gets no header.
    call(&client(false), get(proxy.addr(), "soon")).await;
    assert!(
        a.last_headers().get(DEADLINE_HEADER).is_none(),
        "malformed: dropped"
    );
    proxy.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_deadline_shorter_than_the_backend_is_a_504_in_time_and_nobodys_failure() {
    let backend = TestServer::start().await;
    backend.set_delay(Duration::from_secs(1));
    let mut s = service(&[&backend], 3);
    s.arm.timeouts.attempt = Some(Duration::from_millis(500));
    let proxy = start(s).await;
    let started = Instant::now();
    let (status, _, why) = call(&client(false), get(proxy.addr(), "100")).await;
    assert_eq!(
        (status, started.elapsed()),
        (504, Duration::from_millis(100))
    );
    assert!(why.contains(DEADLINE_HEADER), "{why}");
    // gRPC: DEADLINE_EXCEEDED.
    let started = Instant::now();
    let (status, code, _) = call(&client(true), grpc(proxy.addr(), "100m", 0)).await;
    assert_eq!((status, code), (200, Some(4)));
    assert_eq!(started.elapsed(), Duration::from_millis(100));
    assert_eq!(
        backend.hits(),
        2,
        "one attempt each, none after the deadline"
    );
    let view = &views(&proxy)[0];
    assert_eq!(
        (view.failures, view.pending),
        (0, 0),
        "the caller's deadline, not the endpoint"
    );
    // Expired on arrival: answered at once, nothing sent.
    let started = Instant::now();
    assert_eq!(call(&client(false), get(proxy.addr(), "0")).await.0, 504);
    let (_, code, _) = call(&client(true), grpc(proxy.addr(), "0m", 0)).await;
    assert_eq!((code, started.elapsed()), (Some(4), Duration::ZERO));
    assert_eq!(backend.hits(), 2);
    proxy.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn no_retry_starts_that_would_wait_past_the_deadline() {
    let (a, b) = (TestServer::start().await, TestServer::start().await);
    for backend in [&a, &b] {
        backend.set_status(503);
    }
    let mut s = service(&[&a, &b], 3);
    if let Some(r) = &mut s.arm.retries {
        r.backoff = Some(Backoff::Constant(Duration::from_millis(200)));
    }
    let proxy = start(s).await;
    // The backoff (200 ms) would end past the deadline (150 ms): the 503 now, not a 504 later.
    let started = Instant::now();
    let (status, _, _) = call(&client(false), get(proxy.addr(), "150")).await;
    assert_eq!((status, started.elapsed()), (503, Duration::ZERO));
    assert_eq!(a.hits() + b.hits(), 1);
    // With time for them, the retries go ahead: three, 200 ms apart.
    let started = Instant::now();
    let (status, _, _) = call(&client(false), get(proxy.addr(), "1000")).await;
    assert_eq!(
        (status, started.elapsed()),
        (503, Duration::from_millis(600))
    );
    assert_eq!(a.hits() + b.hits(), 5);
    proxy.shutdown().await;
}
