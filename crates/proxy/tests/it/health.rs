//! Active health checks live (issue 45): `client.healthCheck` checks each endpoint on a
//! connection of its own; an endpoint failing its checks (an error status, a path that hangs)
//! gets no requests until it passes again; one whose checks lie (200 while its requests fail)
//! is still taken out by accrual; when every endpoint fails, the checks are ignored (panic
//! mode); checks never count as requests or attempts. Backends on 127.0.0.1, tokio's paused
//! clock.

use crate::support;

use std::time::Duration;
use support::{client, send, start, views, AsUpstream};
use tailguard_balance::Policy;
use tailguard_proxy::config::ServiceConfig;
use tailguard_resilience::HealthCheckConfig;
use tailguard_testsupport::TestServer;

fn checked(backends: &[&TestServer]) -> ServiceConfig {
    let mut s = ServiceConfig::new("web", backends.iter().map(|b| b.upstream()).collect());
    s.arm.policy = Policy::RoundRobin;
    s.arm.health_check = Some(HealthCheckConfig {
        path: "/health".into(),
        interval: Duration::from_secs(1),
        timeout: Duration::from_millis(200),
        healthy_threshold: 2,
        unhealthy_threshold: 2,
        grpc_service: None,
    });
    s
}

fn health_of(proxy: &tailguard_proxy::Proxy, backend: &TestServer) -> Option<&'static str> {
    let addr = backend.addr().to_string();
    views(proxy)
        .into_iter()
        .find(|v| v.addr == addr)
        .and_then(|v| v.health)
}

/// A check path answering 503, then one that hangs past the timeout: no requests while the
/// checks fail, back after two passes.
#[tokio::test(start_paused = true)]
async fn an_endpoint_failing_its_checks_gets_no_requests_until_they_pass() {
    let a = TestServer::start().await;
    let b = TestServer::start().await;
    a.set_path("/health", Some((503, Duration::ZERO)));
    b.set_path("/health", Some((200, Duration::ZERO)));
    let proxy = start(checked(&[&a, &b])).await;
    let c = client(false);
    tokio::time::sleep(Duration::from_millis(500)).await; // the first checks (within 100 ms)
    assert_eq!(health_of(&proxy, &a), Some("unhealthy"));
    assert_eq!(health_of(&proxy, &b), Some("healthy"));
    for _ in 0..20 {
        assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 200);
    }
    assert_eq!((a.hits(), b.hits()), (0, 20));
    // Checks are not requests: nothing of them in the endpoint's attempts.
    let view = views(&proxy)
        .into_iter()
        .find(|v| v.addr == a.addr().to_string())
        .unwrap();
    assert_eq!(view.successes + view.failures, 0);
    assert!(a.path_hits() >= 1);
    // It passes again: two passes (about two intervals) and it is back.
    a.set_path("/health", Some((200, Duration::ZERO)));
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(health_of(&proxy, &a), Some("healthy"));
    for _ in 0..20 {
        send(&c, proxy.addr(), "GET", "/").await;
    }
    assert_eq!(a.hits(), 10, "round robin again");
    // Now its check path hangs (10 s, past the 200 ms timeout): out after two failures.
    a.set_path("/health", Some((200, Duration::from_secs(10))));
    tokio::time::sleep(Duration::from_millis(2_600)).await;
    assert_eq!(health_of(&proxy, &a), Some("unhealthy"));
    let before = a.hits();
    for _ in 0..10 {
        assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 200);
    }
    assert_eq!(a.hits(), before);
}

/// A check path that lies (200 while requests get 500): accrual takes the endpoint out all
/// the same; a request needs both to say alive.
#[tokio::test(start_paused = true)]
async fn a_lying_check_does_not_keep_a_failing_endpoint_in() {
    let a = TestServer::start().await;
    let b = TestServer::start().await;
    a.set_status(500);
    for s in [&a, &b] {
        s.set_path("/health", Some((200, Duration::ZERO)));
    }
    let proxy = start(checked(&[&a, &b])).await;
    let c = client(false);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(health_of(&proxy, &a), Some("healthy"));
    for _ in 0..40 {
        // Every GET gets a 200 (a failure at `a` is retried on `b`).
        assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 200);
    }
    // Linkerd 1's default accrual: five failures in a row, then out whatever the checks say.
    assert_eq!(a.hits(), 5, "{}", a.hits());
    assert_eq!(health_of(&proxy, &a), Some("healthy"));
}

/// Every endpoint failing its checks: they are ignored (panic mode), requests go on, and the
/// dashboard says so.
#[tokio::test(start_paused = true)]
async fn when_every_endpoint_fails_its_checks_they_are_ignored() {
    let a = TestServer::start().await;
    let b = TestServer::start().await;
    for s in [&a, &b] {
        s.set_path("/health", Some((503, Duration::ZERO)));
    }
    let proxy = start(checked(&[&a, &b])).await;
    let c = client(false);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(health_of(&proxy, &a), Some("unhealthy"));
    assert_eq!(health_of(&proxy, &b), Some("unhealthy"));
    for _ in 0..10 {
        assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 200);
    }
    assert_eq!((a.hits(), b.hits()), (5, 5));
    let board = proxy.dashboard_json();
    assert!(board.contains("\"health_panic\":true"), "{board}");
}

/// A gRPC check (`grpcService`) against `tailguard serve`'s standard health service: the
/// server as a whole (`""`) answers SERVING and passes; a service name it does not know
/// answers NOT_FOUND and fails. On the wall clock, polled within bounds.
#[tokio::test]
async fn a_grpc_check_passes_on_serving_only() {
    let fleet = tailguard_fleet::Fleet::from_yaml_str("backends: [{name: b, latency: 0s}]", "t")
        .expect("fleet parses");
    let mut options = tailguard_serve::ServeOptions::new(fleet);
    options.listen = "127.0.0.1:0".parse().unwrap();
    options.control = None;
    let serve = tailguard_serve::start(options).await.expect("fleet starts");
    let addr = serve.backends()[0].1;
    for (service, want) in [("", "healthy"), ("no.such.Service", "unhealthy")] {
        let mut s = ServiceConfig::new("web", vec![tailguard_proxy::config::Upstream::new(addr)]);
        s.arm.health_check = Some(HealthCheckConfig {
            path: String::new(),
            grpc_service: Some(service.to_owned()),
            interval: Duration::from_millis(50),
            timeout: Duration::from_millis(50),
            healthy_threshold: 1,
            unhealthy_threshold: 1,
        });
        let proxy = start(s).await;
        let addr = addr.to_string();
        let state = || {
            views(&proxy)
                .into_iter()
                .find(|v| v.addr == addr)
                .and_then(|v| v.health)
        };
        let seen =
            support::eventually(Duration::from_secs(5), async || state() == Some(want)).await;
        assert!(seen, "{service:?}: {:?}", state());
    }
}

/// Checks go over the service's TLS (`client.tls`), on a connection of their own: a backend
/// serving only TLS is checked, found failing, then passing, and the pools' connections are
/// not used for it.
#[tokio::test(start_paused = true)]
async fn checks_use_the_services_tls_on_their_own_connection() {
    let backend = TestServer::builder().tls().start().await;
    backend.set_path("/health", Some((503, Duration::ZERO)));
    let mut s = checked(&[&backend]);
    s.tls = Some(tailguard_proxy::config::UpstreamTls {
        disable_validation: true,
        ..tailguard_proxy::config::UpstreamTls::default()
    });
    let proxy = start(s).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(health_of(&proxy, &backend), Some("unhealthy"));
    assert!(backend.path_hits() >= 1, "checked over TLS");
    backend.set_path("/health", Some((200, Duration::ZERO)));
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(health_of(&proxy, &backend), Some("healthy"));
    // One connection per check (a check may be connecting as this reads): none from the
    // pools, which proxied nothing.
    let (conns, checks) = (backend.connections(), backend.path_hits());
    assert!(
        conns >= checks && conns <= checks + 1,
        "{conns} connections, {checks} checks"
    );
    assert_eq!(backend.hits(), 0, "no request was proxied");
}

/// A check path that flaps (a second passing, a second failing, ...): with checks about a
/// second apart (±10%), never three failures in a row, so with `unhealthyThreshold: 3` the
/// endpoint stays in; three in a row take it out.
#[tokio::test(start_paused = true)]
async fn a_flapping_check_needs_its_threshold() {
    let a = TestServer::start().await;
    let b = TestServer::start().await;
    b.set_path("/health", Some((200, Duration::ZERO)));
    let mut s = checked(&[&a, &b]);
    if let Some(h) = &mut s.arm.health_check {
        h.unhealthy_threshold = 3;
    }
    let proxy = start(s).await;
    for round in 0..8 {
        let code = if round % 2 == 0 { 200 } else { 503 };
        a.set_path("/health", Some((code, Duration::ZERO)));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(health_of(&proxy, &a), Some("healthy"), "round {round}");
    }
    a.set_path("/health", Some((503, Duration::ZERO)));
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_eq!(health_of(&proxy, &a), Some("unhealthy"));
}
