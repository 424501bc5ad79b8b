//! A service's admission, live (`maxConcurrentRequests`, `concurrencyLimit`, `queue`,
//! `criticality`): critical requests served first and shed last, refusals answered 503 with
//! `Retry-After` (gRPC UNAVAILABLE with a pushback), counted by reason and never blamed on an
//! endpoint, and an adaptive limit that grows over a backend whose latency does not rise with
//! load. Backends on 127.0.0.1, tokio's paused clock.

use crate::support;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use support::{client, metric, start, views, AsUpstream, HttpClient};
use tailguard_client::AdmissionConfig;
use tailguard_proxy::config::ServiceConfig;
use tailguard_resilience::admission::QueueConfig;
use tailguard_testsupport::bounded;
use tailguard_testsupport::TestServer;

/// A GET of `/` through `proxy` marked `class` (none: no header); status and headers.
async fn get(c: &HttpClient, proxy: SocketAddr, class: Option<&str>) -> (u16, http::HeaderMap) {
    let mut req = http::Request::get(format!("http://{proxy}/"));
    if let Some(class) = class {
        req = req.header("x-tailguard-criticality", class);
    }
    let req = req.body(Full::new(Bytes::new())).unwrap();
    let resp = bounded(c.request(req)).await.unwrap();
    let (parts, body) = resp.into_parts();
    bounded(body.collect()).await.unwrap();
    (parts.status.as_u16(), parts.headers)
}

fn refused(proxy: &tailguard_proxy::Proxy, reason: &str) -> f64 {
    let series =
        format!("tailguard_proxy_admission_refused_total{{service=\"web\",reason=\"{reason}\"}} ");
    proxy
        .metrics_text()
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

/// Two places over a backend taking 100 ms, a queue of four: two default requests hold the
/// places, four more fill the queue, three critical ones each displace the newest default,
/// and two sheddable ones find the queue full of better requests. The critical requests are
/// served before the default one left waiting; nothing refused reaches the backend or counts
/// against it.
#[tokio::test(start_paused = true)]
async fn critical_requests_displace_default_ones_and_every_refusal_says_when_to_return() {
    let backend = TestServer::start().await;
    backend.set_delay(Duration::from_millis(100));
    let mut s = ServiceConfig::new("web", vec![backend.upstream()]);
    let mut a = AdmissionConfig::cap(2);
    a.queue = QueueConfig {
        max_size: 4,
        max_wait: Duration::from_secs(10),
    };
    a.criticality = true;
    s.arm.admission = Some(a);
    let proxy = start(s).await;
    let addr = proxy.addr();
    let c = client(false);
    let served = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    let classes = [
        ("default", 2),
        ("default", 4),
        ("critical", 3),
        ("sheddable", 2),
    ];
    for (class, n) in classes {
        for _ in 0..n {
            let (c, served) = (c.clone(), Arc::clone(&served));
            tasks.push(tokio::spawn(async move {
                let (status, headers) = get(&c, addr, Some(class)).await;
                if status == 200 {
                    served.lock().unwrap().push(class);
                }
                (class, status, headers)
            }));
        }
        // Each group arrives once the one before is in place.
        let waiting = tasks.len().saturating_sub(2).min(4) as f64;
        support::eventually(Duration::from_secs(1), async || {
            metric(&proxy, "tailguard_proxy_admission_waiting") >= waiting
                || tasks.iter().all(|t| t.is_finished())
        })
        .await;
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    let count = |class: &str, status: u16| {
        outcomes
            .iter()
            .filter(|(c, s, _)| *c == class && *s == status)
            .count()
    };
    assert_eq!(count("critical", 200), 3, "{outcomes:?}");
    assert_eq!(count("default", 200), 3, "two in flight, one left waiting");
    assert_eq!(count("default", 503), 3, "displaced");
    assert_eq!(count("sheddable", 503), 2);
    for (class, status, headers) in &outcomes {
        if *status == 503 {
            assert_eq!(headers["retry-after"], "1", "{class}");
            let why = headers["x-tailguard-error"].to_str().unwrap();
            let want = match *class {
                "default" => "displaced by a more critical request",
                _ => "admission queue full",
            };
            assert_eq!(why, want);
        }
    }
    // The two first defaults, then every critical request before the default that waited.
    let served = served.lock().unwrap().clone();
    assert_eq!(
        served,
        ["default", "default", "critical", "critical", "critical", "default"]
    );
    assert_eq!(backend.hits(), 6, "nothing refused was sent");
    assert_eq!(
        (refused(&proxy, "displaced"), refused(&proxy, "queue-full")),
        (3.0, 2.0)
    );
    let view = &views(&proxy)[0];
    assert_eq!(
        (view.successes, view.failures),
        (6, 0),
        "not the endpoint's fault"
    );
    tailguard_testsupport::promtool::assert_clean(&proxy.metrics_text());
}

/// With one place, held by a slow call, a gRPC call is refused UNAVAILABLE, told why, and
/// asked to wait a second (gRFC A6's pushback).
#[tokio::test(start_paused = true)]
async fn a_grpc_call_over_the_limit_is_unavailable_with_a_pushback() {
    let backend = TestServer::start().await;
    backend.set_delay(Duration::from_secs(5));
    let mut s = ServiceConfig::new("web", vec![backend.upstream()]);
    s.arm.admission = Some(AdmissionConfig::cap(1));
    let proxy = start(s).await;
    let addr = proxy.addr();
    let slow = tokio::spawn(async move { support::grpc_call(&client(true), addr, 0).await });
    support::eventually(Duration::from_secs(1), async || backend.hits() == 1).await;
    let (code, message) = support::grpc_call_message(&client(true), addr).await;
    assert_eq!(code, Some(14));
    assert_eq!(message.as_deref(), Some("over maxConcurrentRequests"));
    assert_eq!(slow.await.unwrap(), Some(0));
    assert_eq!(refused(&proxy, "queue-full"), 1.0);
}

/// Gradient2's defaults, no cap, a queue of 100 for up to a second.
fn gradient() -> AdmissionConfig {
    let mut a = AdmissionConfig::cap(1_000);
    a.max_in_flight = None;
    a.limit = Some(tailguard_resilience::limit::LimitConfig::gradient());
    a.queue = QueueConfig {
        max_size: 100,
        max_wait: Duration::from_secs(1),
    };
    a
}

/// A backend whose latency does not rise with load: forty callers, one request after another,
/// each 10 ms; the gradient limit starts at 20 and ends above it, and nobody is refused (a
/// queue of 100 for up to a second takes the rest).
#[tokio::test(start_paused = true)]
async fn the_gradient_limit_grows_over_a_backend_that_does_not_slow_down() {
    let backend = TestServer::start().await;
    backend.set_delay(Duration::from_millis(10));
    let mut s = ServiceConfig::new("web", vec![backend.upstream()]);
    s.arm.admission = Some(gradient());
    let proxy = start(s).await;
    let addr = proxy.addr();
    let limit = || metric(&proxy, "tailguard_proxy_admission_limit");
    assert_eq!(limit(), 20.0);
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            tokio::spawn(async move {
                let c = client(false);
                let mut statuses = Vec::new();
                for _ in 0..150 {
                    statuses.push(get(&c, addr, None).await.0);
                }
                statuses
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.extend(t.await.unwrap());
    }
    assert!(statuses.iter().all(|s| *s == 200), "none refused");
    assert!(limit() > 20.0, "the limit grew: {}", limit());
    assert_eq!(metric(&proxy, "tailguard_proxy_admission_in_flight"), 0.0);
    assert_eq!(metric(&proxy, "tailguard_proxy_admission_waiting"), 0.0);
}

/// Every endpoint failing at once (a closed port: refused connections): the failures are the
/// endpoints', answered 502, and teach the limit nothing, so it neither collapses nor refuses
/// anyone; the admission adds nothing to the outage.
#[tokio::test(start_paused = true)]
async fn every_endpoint_failing_at_once_costs_the_limit_nothing() {
    let closed_port = tailguard_testsupport::ClosedPort::new();
    let closed = closed_port.addr();
    let mut s = ServiceConfig::new("web", vec![tailguard_proxy::config::Upstream::new(closed)]);
    s.arm.admission = Some(gradient());
    let proxy = start(s).await;
    let addr = proxy.addr();
    let c = client(false);
    for _ in 0..200 {
        let (status, headers) = get(&c, addr, Some("critical")).await;
        assert_eq!(status, 502);
        assert!(
            !headers.contains_key("retry-after"),
            "not an admission refusal"
        );
    }
    assert_eq!(metric(&proxy, "tailguard_proxy_admission_limit"), 20.0);
    assert_eq!(
        metric(&proxy, "tailguard_proxy_admission_refused_total"),
        0.0
    );
    assert_eq!(metric(&proxy, "tailguard_proxy_admission_in_flight"), 0.0);
}
