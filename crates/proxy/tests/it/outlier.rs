//! Latency outlier ejection live (`client.outlierDetection`, the `outlier` the simulator runs):
//! an endpoint far slower than the others is ejected within a few intervals, `/endpoints`
//! says so, and no request reaches it while it is out. Envoy's outlier detection has no latency
//! mode; this is the one tailguard's simulator showed on `slow-middle`. Backends on 127.0.0.1,
//! on tokio's paused clock: the intervals and delays are virtual time, the sockets are real.

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{client, eventually, send, start, views, AsUpstream};
use tailguard_balance::Policy;
use tailguard_proxy::config::ServiceConfig;
use tailguard_resilience::OutlierConfig;
use tailguard_testsupport::TestServer;

#[tokio::test(start_paused = true)]
async fn a_slow_endpoint_is_ejected_within_its_interval_and_gets_nothing_while_out() {
    let backends = [
        TestServer::start().await,
        TestServer::start().await,
        TestServer::start().await,
    ];
    backends[0].set_delay(Duration::from_millis(5));
    backends[1].set_delay(Duration::from_millis(5));
    backends[2].set_delay(Duration::from_millis(150));
    let mut s = ServiceConfig::new("web", backends.iter().map(TestServer::upstream).collect());
    s.arm.policy = Policy::RoundRobin;
    s.arm.retries = None;
    s.arm.accrual = None;
    s.arm.outlier = Some(OutlierConfig {
        interval: Duration::from_millis(300),
        factor: 3.0,
        min_requests: 3,
        base_ejection: Duration::from_secs(30),
        max_ejection: Duration::from_secs(60),
        max_ejected_percent: 0.5,
    });
    let proxy = start(s).await;
    let addr = proxy.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let c = client(false);
                while !stop.load(Ordering::Relaxed) {
                    assert_eq!(send(&c, addr, "GET", "/").await.0, 200);
                }
            })
        })
        .collect();
    let c = client(false);
    let state = |i: usize| views(&proxy)[i].state;
    let started = tokio::time::Instant::now();
    let ejected = eventually(Duration::from_secs(5), async || state(2) == "ejected").await;
    let took = started.elapsed();
    assert!(ejected, "the 150 ms endpoint was never ejected");
    // Judged every 300 ms once it has 3 samples (three workers give it those within 150 ms):
    // ejected at the first or second judgement, in virtual time (320 ms when written).
    eprintln!("ejected after {took:?}");
    assert!(took < Duration::from_millis(1200), "ejected after {took:?}");
    assert_eq!(state(0), "alive");
    assert_eq!(state(1), "alive");
    // While it is out (30 s), nothing more reaches it (after ten requests' time, so one picked
    // just before the ejection has arrived and been counted).
    for _ in 0..10 {
        assert_eq!(send(&c, addr, "GET", "/").await.0, 200);
    }
    let before = backends[2].hits();
    for _ in 0..40 {
        assert_eq!(send(&c, addr, "GET", "/").await.0, 200);
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    assert_eq!(
        backends[2].hits(),
        before,
        "requests reached the ejected endpoint"
    );
    assert!(backends[0].hits() + backends[1].hits() > 40);
    proxy.shutdown().await;
}

#[test]
fn the_configuration_names_the_outlier_keys() {
    let yaml = |outlier: &str| {
        format!(
            "servers: [{{ip: 127.0.0.1, port: 0}}]\nservices:\n  - name: web\n    \
             upstreams: [\"127.0.0.1:1\"]\n    client:\n      outlierDetection: {outlier}\n"
        )
    };
    let cfg = tailguard_proxy::yaml::parse(&yaml(
        "{intervalMs: 1000, factor: 2.5, minRequests: 10, baseEjectionMs: 5000, maxEjectedPercent: 20}",
    ))
    .unwrap();
    let o = cfg.services[0].arm.outlier.unwrap();
    assert_eq!(o.interval, Duration::from_secs(1));
    assert_eq!((o.factor, o.min_requests), (2.5, 10));
    assert_eq!(o.base_ejection, Duration::from_secs(5));
    assert!((o.max_ejected_percent - 0.2).abs() < 1e-9);
    let err = tailguard_proxy::yaml::parse(&yaml("{factor: 0.5}"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("client.outlierDetection"), "{err}");
    let err = tailguard_proxy::yaml::parse(&yaml("{interval: 5}"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("interval"), "{err}");
}
