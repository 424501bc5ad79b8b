//! The balancer's view of each endpoint (cost, pending, success rate, state) on the admin
//! `/endpoints` and `/metrics` pages, read from a live proxy on loopback.

use crate::support;

use std::time::Duration;
use support::{client, eventually, send, start, AsUpstream, HttpClient};
use tailguard_balance::{LoadKind, Policy};
use tailguard_proxy::config::ServiceConfig;
use tailguard_testsupport::TestServer;

async fn endpoints(c: &HttpClient, admin: std::net::SocketAddr) -> serde_json::Value {
    let (_, _, body) = send(c, admin, "GET", "/endpoints").await;
    serde_json::from_slice(&body).unwrap()
}

async fn metrics(c: &HttpClient, admin: std::net::SocketAddr) -> String {
    let (_, _, body) = send(c, admin, "GET", "/metrics").await;
    String::from_utf8_lossy(&body).into_owned()
}

#[tokio::test]
async fn least_loaded_cost_and_pending_show_requests_in_flight() {
    let backend = TestServer::start().await;
    backend.set_delay(Duration::from_millis(800));
    let mut service = ServiceConfig::new("web", vec![backend.upstream()]);
    service.arm.policy = Policy::p2c(LoadKind::Pending);
    let proxy = start(service).await;
    let (addr, admin) = (proxy.addr(), proxy.admin_addr().unwrap());
    let c = client(false);
    let in_flight: Vec<_> = (0..3)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { send(&c, addr, "GET", "/").await.0 })
        })
        .collect();
    let three = eventually(Duration::from_secs(5), async || {
        endpoints(&c, admin).await["web"][0]["pending"] == 3
    })
    .await;
    assert!(three, "{}", endpoints(&c, admin).await);
    let ep = &endpoints(&c, admin).await["web"][0];
    assert_eq!(ep["cost"], 3.0, "least loaded: cost is the pending count");
    let text = metrics(&c, admin).await;
    let labels = format!("{{service=\"web\",endpoint=\"{}\"}}", backend.addr());
    assert!(
        text.contains(&format!("tailguard_proxy_endpoint_pending{labels} 3")),
        "{text}"
    );
    assert!(
        text.contains(&format!("tailguard_proxy_endpoint_cost{labels} 3.0")),
        "{text}"
    );
    for r in in_flight {
        assert_eq!(r.await.unwrap(), 200);
    }
    let ep = &endpoints(&c, admin).await["web"][0];
    assert_eq!(
        (ep["pending"].clone(), ep["cost"].clone()),
        (0.into(), 0.0.into())
    );
    assert_eq!(
        (ep["successes"].clone(), ep["success_rate"].clone()),
        (3.into(), 1.0.into())
    );
    assert_eq!(ep["state"], "alive");
    proxy.shutdown().await;
}

#[tokio::test]
async fn peak_ewma_cost_follows_latency_and_round_robin_has_none() {
    let (fast, slow) = (TestServer::start().await, TestServer::start().await);
    slow.set_delay(Duration::from_millis(200));
    let mut service = ServiceConfig::new("web", vec![fast.upstream(), slow.upstream()]);
    service.arm.policy = Policy::RoundRobin;
    let rr = start(service.clone()).await;
    service.arm.policy = Policy::p2c(LoadKind::peak_ewma());
    let ewma = start(service).await;
    let c = client(false);
    for _ in 0..4 {
        assert_eq!(send(&c, rr.addr(), "GET", "/").await.0, 200);
        assert_eq!(send(&c, ewma.addr(), "GET", "/").await.0, 200);
    }
    let view = endpoints(&c, rr.admin_addr().unwrap()).await;
    assert!(view["web"][0]["cost"].is_null(), "{view}");
    assert!(!metrics(&c, rr.admin_addr().unwrap())
        .await
        .contains("endpoint_cost{"));
    // Peak EWMA: cost in nanoseconds; a backend that answered in 200 ms costs at least that
    // (decayed by at most a few seconds of a 10 s time constant), one that never answered
    // costs the 30 ms default, and a fast one far less.
    let view = endpoints(&c, ewma.admin_addr().unwrap()).await;
    let cost_of = |addr: std::net::SocketAddr| {
        let list = view["web"].as_array().unwrap();
        let ep = list.iter().find(|e| e["addr"] == addr.to_string()).unwrap();
        ep["cost"].as_f64().unwrap()
    };
    let (f, s) = (cost_of(fast.addr()), cost_of(slow.addr()));
    assert!(f < 30e6, "fast endpoint cost {f}");
    assert!(s == 30e6 || s > 100e6, "slow endpoint cost {s}");
    assert!(f < s, "fast {f} slow {s}");
    rr.shutdown().await;
    ewma.shutdown().await;
}
