//! Per-endpoint connection limits (`hostConnectionPool.maxSize`), counted by a real server.

use crate::support;

use std::time::Duration;
use support::{client, send, start};
use tailguard_proxy::config::{ServiceConfig, Upstream};
use tailguard_proxy::ERROR_HEADER;
use tailguard_testsupport::TestServer;

fn limited(server: &TestServer, max: usize, wait: Duration) -> ServiceConfig {
    let mut s = ServiceConfig::new("web", vec![Upstream::new(server.addr())]);
    s.pool.max_per_endpoint = Some(max);
    s.pool.wait = wait;
    s.arm.retries = None;
    s.arm.accrual = None;
    s
}

#[tokio::test]
async fn requests_beyond_the_cap_wait_for_a_pooled_connection() {
    let server = TestServer::builder()
        .delay(Duration::from_millis(50))
        .spawn();
    let proxy = start(limited(&server, 2, Duration::from_secs(10))).await;
    let addr = proxy.addr();
    let c = client(false);
    let requests: Vec<_> = (0..12)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { send(&c, addr, "GET", "/").await.0 })
        })
        .collect();
    for r in requests {
        assert_eq!(r.await.unwrap(), 200);
    }
    assert_eq!(server.hits(), 12);
    assert_eq!(
        server.connections(),
        2,
        "two connections carried all twelve requests"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_request_that_waits_too_long_gets_503_with_a_reason() {
    let server = TestServer::builder()
        .delay(Duration::from_millis(1500))
        .spawn();
    let proxy = support::start_detailed(limited(&server, 1, Duration::from_millis(100))).await;
    let addr = proxy.addr();
    let c = client(false);
    let first = {
        let c = c.clone();
        tokio::spawn(async move { send(&c, addr, "GET", "/").await.0 })
    };
    // Wait until the first request holds the only connection.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while server.hits() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "first request never arrived"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (status, headers, _) = send(&c, addr, "GET", "/").await;
    assert_eq!(status, 503);
    let reason = headers[ERROR_HEADER].to_str().unwrap().to_owned();
    assert!(
        reason.contains("connection limit reached (1 per endpoint"),
        "{reason}"
    );
    assert!(reason.contains(&server.addr().to_string()), "{reason}");
    assert_eq!(first.await.unwrap(), 200);
    assert_eq!(server.connections(), 1);
    // The endpoint was busy, not broken: accrual and the endpoint view saw no failure.
    let views = proxy.shared().services()[0]
        .endpoints()
        .views(proxy.shared().clock.now());
    assert_eq!((views[0].failures, views[0].pending), (0, 0));
    proxy.shutdown().await;
}
