//! Each balancer's live behaviour through the real proxy on loopback, counted at the backends.

use crate::support;

use std::time::Duration;
use support::{load, start, AsUpstream};
use tailguard_balance::load::PeakEwmaConfig;
use tailguard_balance::{ApertureConfig, Choices, LoadKind, Policy};
use tailguard_proxy::config::ServiceConfig;
use tailguard_testsupport::TestServer;

async fn backends(delays_ms: &[u64]) -> Vec<TestServer> {
    let mut out = Vec::new();
    for &d in delays_ms {
        let b = TestServer::start().await;
        b.set_delay(Duration::from_millis(d));
        out.push(b);
    }
    out
}

fn service(backends: &[TestServer], policy: Policy) -> ServiceConfig {
    let mut s = ServiceConfig::new("web", backends.iter().map(TestServer::upstream).collect());
    s.arm.policy = policy;
    s.arm.retries = None;
    s.arm.accrual = None;
    s
}

fn hits(backends: &[TestServer]) -> Vec<u64> {
    backends.iter().map(TestServer::hits).collect()
}

#[tokio::test(start_paused = true)]
async fn round_robin_spreads_evenly() {
    let b = backends(&[0, 0, 0, 0]).await;
    let proxy = start(service(&b, Policy::RoundRobin)).await;
    load(proxy.addr(), 8, 25).await;
    assert_eq!(hits(&b), [50, 50, 50, 50]);
    proxy.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn least_loaded_p2c_sends_little_to_an_endpoint_holding_requests() {
    // The slow one holds each request 500 ms; P2C on pending sees it busy and goes elsewhere.
    let b = backends(&[500, 0, 0]).await;
    let proxy = start(service(&b, Policy::p2c(LoadKind::Pending))).await;
    load(proxy.addr(), 8, 30).await;
    let h = hits(&b);
    assert_eq!(h.iter().sum::<u64>(), 240);
    // Round robin would send it 80; it only wins a draw while it holds nothing.
    assert!(h[0] <= 40, "slow endpoint got {h:?}");
    assert!(
        h[1] >= 60 && h[2] >= 60,
        "fast endpoints share the rest: {h:?}"
    );
    proxy.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn best_of_three_peak_ewma_avoids_the_slow_endpoint() {
    // Any three of four include two fast endpoints, so once the slow one has answered once
    // (100 ms against well under 10 ms) it is never the cheapest of a draw again.
    let b = backends(&[100, 0, 0, 0]).await;
    let policy = Policy::BestOf {
        choices: Choices::D(3),
        load: LoadKind::PeakEwma(PeakEwmaConfig::default()),
    };
    let proxy = start(service(&b, policy)).await;
    load(proxy.addr(), 1, 150).await;
    let h = hits(&b);
    assert!(h[0] <= 1, "slow endpoint got {h:?}");
    assert_eq!(h[1..].iter().sum::<u64>(), 150 - h[0]);
    proxy.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn aperture_confines_low_load_to_its_subset_and_widens_under_load() {
    let b = backends(&[0; 10]).await;
    let policy = Policy::Aperture {
        config: ApertureConfig::default(),
        load: LoadKind::Pending,
    };
    let proxy = start(service(&b, policy)).await;
    // One request at a time: about one in flight, an aperture of one endpoint.
    load(proxy.addr(), 1, 100).await;
    let used = |h: &[u64]| h.iter().filter(|&&n| n > 0).count();
    let low = hits(&b);
    assert_eq!(used(&low), 1, "low load spread over {low:?}");
    assert_eq!(low.iter().max(), Some(&100));
    // Forty in flight for about two seconds: the offered-load average rises past two per
    // endpoint and the aperture widens.
    for backend in &b {
        backend.set_delay(Duration::from_millis(50));
    }
    load(proxy.addr(), 40, 40).await;
    let high = hits(&b);
    assert!(used(&high) >= 3, "high load stayed on {high:?}");
    proxy.shutdown().await;
}
