//! The admin port's limits on a live proxy (tier 1): a connection past the limit is answered
//! 503 at once, expensive pages past their rate 429 while cheap ones (`/ready`) still answer,
//! and `/dashboard.json` shows at most 256 endpoint rows a service, counting the rest. The
//! data plane under a hammered admin port is `admin_hammer.rs` (tier 2).

use crate::support;

use support::start;
use tailguard_proxy::config::{ServiceConfig, Upstream};
use tailguard_testsupport::client::H1;

fn unreachable_upstreams(n: u16) -> Vec<Upstream> {
    // No request is sent: the rows are the balancer's view of them.
    (0..n)
        .map(|i| Upstream::new(format!("127.0.0.1:{}", 1000 + i).parse().unwrap()))
        .collect()
}

#[tokio::test]
async fn the_admin_connection_past_the_limit_gets_503_at_once() {
    let proxy = start(ServiceConfig::new("web", unreachable_upstreams(1))).await;
    let admin = proxy.admin_addr().unwrap();
    let mut open = Vec::new();
    for _ in 0..32 {
        let mut c = H1::connect(admin).await;
        assert_eq!(c.get("/live").await.0, 200);
        open.push(c);
    }
    let (status, body, _) = H1::connect(admin).await.get("/").await;
    assert_eq!(
        (status, body.as_str()),
        (
            503,
            "admin: 32 connections open already (the limit); retry later\n"
        )
    );
    // A health check still gets through, in the probe lane.
    assert_eq!(H1::connect(admin).await.get("/live").await.0, 200);
    // The connections within the limit still answer.
    assert_eq!(open[0].get("/ready").await.0, 200);
    proxy.shutdown().await;
}

/// 31 clients at once: 20 answered from the burst, about 10 wait their turn (up to a second,
/// at 10 a second) and the rest are refused at once; meanwhile `/ready` answers.
#[tokio::test]
async fn dashboard_json_past_its_rate_gets_429_and_cheap_pages_still_answer() {
    let proxy = start(ServiceConfig::new("web", unreachable_upstreams(1))).await;
    let admin = proxy.admin_addr().unwrap();
    let mut c = H1::connect(admin).await;
    let asked: Vec<_> = (0..31)
        .map(|_| {
            tokio::spawn(async move {
                let mut c = H1::connect(admin).await;
                let (status, body, took) = c.get("/dashboard.json").await;
                (status, body, took, c.headers.get("retry-after").cloned())
            })
        })
        .collect();
    assert_eq!(c.get("/ready").await.0, 200);
    let mut answers = Vec::new();
    for a in asked {
        answers.push(a.await.unwrap());
    }
    let statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
    let ok = statuses.iter().filter(|&&s| s == 200).count();
    let limited: Vec<_> = answers.iter().filter(|a| a.0 == 429).collect();
    assert!(
        (20..31).contains(&ok) && ok + limited.len() == 31,
        "{statuses:?}"
    );
    let (_, body, took, retry_after) = limited[0];
    assert_eq!(
        body,
        "admin: at most 10 a second of /dashboard.json, /metrics, /endpoints together; \
         retry later\n"
    );
    assert_eq!(retry_after.as_ref().unwrap(), "1");
    // Refused at once, not after waiting.
    assert!(*took < std::time::Duration::from_millis(500), "{took:?}");
    assert_eq!(c.get("/live").await.0, 200);
    proxy.shutdown().await;
}

#[tokio::test]
async fn dashboard_json_shows_256_endpoint_rows_at_most_and_counts_the_rest() {
    let proxy = start(ServiceConfig::new("web", unreachable_upstreams(300))).await;
    let mut c = H1::connect(proxy.admin_addr().unwrap()).await;
    let (status, body, _) = c.get("/dashboard.json").await;
    assert_eq!(status, 200, "{body}");
    let board: serde_json::Value = serde_json::from_str(&body).unwrap();
    let web = &board["services"][0];
    assert_eq!(web["endpoints"].as_array().unwrap().len(), 256);
    assert_eq!(web["endpoints_omitted"], 44);
    assert_eq!(board["cut"], "endpoint rows cut to 256 a service");
    proxy.shutdown().await;
}
