//! Timeouts (504 with a reason) and the retry budget refusing retries, counted in `/metrics`.
//! Paused time: the clock jumps only when every task is waiting, so the slow backend costs no
//! real time.

use crate::support;

use std::time::Duration;
use support::{client, send, start, AsUpstream};
use tailguard_client::RetryConfig;
use tailguard_proxy::config::ServiceConfig;
use tailguard_resilience::RetryBudgetConfig;
use tailguard_testsupport::TestServer;
use tokio::time::Instant;

fn one(backend: &TestServer) -> ServiceConfig {
    let mut s = ServiceConfig::new("web", vec![backend.upstream()]);
    s.arm.accrual = None;
    s.arm.retries = None;
    s
}

#[tokio::test(start_paused = true)]
async fn attempt_and_total_timeouts_answer_504_with_a_reason() {
    let backend = TestServer::start().await;
    backend.set_delay(Duration::from_secs(5));
    let c = client(false);
    let cases = [
        (Some(Duration::from_millis(300)), None, "attempt timeout"),
        (None, Some(Duration::from_millis(700)), "total timeout"),
        // The total timeout bounds the request even when each attempt would be allowed longer.
        (
            Some(Duration::from_secs(2)),
            Some(Duration::from_millis(700)),
            "total timeout",
        ),
    ];
    for (attempt, total, reason) in cases {
        let mut s = one(&backend);
        s.arm.timeouts.attempt = attempt;
        s.arm.timeouts.total = total;
        let proxy = start(s).await;
        let started = Instant::now();
        let (status, headers, _) = send(&c, proxy.addr(), "GET", "/").await;
        let took = started.elapsed();
        assert_eq!(status, 504, "{attempt:?} {total:?}");
        let said = headers["x-tailguard-error"].to_str().unwrap();
        assert!(said.contains(reason), "{attempt:?} {total:?}: {said}");
        let limit = total.or(attempt).unwrap();
        assert!(
            took >= limit && took < limit + Duration::from_millis(100),
            "{attempt:?} {total:?}: answered after {took:?}"
        );
        proxy.shutdown().await;
    }
}

#[tokio::test]
async fn a_budget_that_allows_no_retry_refuses_each_and_counts_it() {
    let backend = TestServer::start().await;
    backend.set_status(500);
    let mut s = one(&backend);
    s.arm.retries = Some(RetryConfig {
        budget: RetryBudgetConfig {
            ttl: Duration::from_secs(10),
            min_per_sec: 0,
            percent: 0.0,
        },
        ..RetryConfig::default()
    });
    let proxy = start(s).await;
    let c = client(false);
    for _ in 0..5 {
        assert_eq!(send(&c, proxy.addr(), "GET", "/").await.0, 500);
    }
    assert_eq!(backend.hits(), 5, "no request was retried");
    let admin = proxy.admin_addr().unwrap();
    let (_, _, body) = send(&c, admin, "GET", "/metrics").await;
    let text = String::from_utf8_lossy(&body);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && l.contains("service=\"web\""))
            .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(line("tailguard_proxy_retry_budget_exhausted_total"), "5");
    assert_eq!(line("tailguard_proxy_retries_total"), "0");
    proxy.shutdown().await;
}
