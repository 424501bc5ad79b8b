//! Per-endpoint state freed (issue 44): an endpoint gone from discovery loses its metric
//! series once idle for `admin.metricsRetainIdleMs`, its pool and connection-limit entries go
//! when its connections close, and an address that comes back starts from zero.

use crate::support;
use std::net::SocketAddr;
use std::time::Duration;
use support::{client, config, eventually, send};
use tailguard_balance::Policy;
use tailguard_proxy::config::{Discovery, ServiceConfig, Upstream};
use tailguard_proxy::Proxy;
use tailguard_testsupport::TestServer;

/// The `i`-th of many loopback addresses on `port` (127.0.1.1, 127.0.1.2, ...).
fn nth(i: usize, port: u16) -> SocketAddr {
    let (x, y) = (1 + i / 250, 1 + i % 250);
    SocketAddr::from((
        [127, 0, u8::try_from(x).unwrap(), u8::try_from(y).unwrap()],
        port,
    ))
}

fn write(path: &std::path::Path, addrs: &[SocketAddr]) {
    let text: String = addrs.iter().map(|a| format!("{a}\n")).collect();
    // Written whole then renamed, as a discovery file should be.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The addresses of the first service's current endpoints.
fn current(proxy: &Proxy) -> Vec<String> {
    let mut v: Vec<String> = support::views(proxy).into_iter().map(|v| v.addr).collect();
    v.sort();
    v
}

/// The endpoints with a series in `/metrics`, and the pool gauges (http1, limit).
fn state(proxy: &Proxy) -> (Vec<String>, u64, u64) {
    let text = proxy.metrics_text();
    let mut endpoints: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.contains("endpoint_pending"))
        .filter_map(|l| l.split("endpoint=\"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_owned)
        .collect();
    endpoints.sort();
    endpoints.dedup();
    let gauge = |pool: &str| {
        let prefix =
            format!("tailguard_proxy_upstream_pool_entries{{service=\"web\",pool=\"{pool}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map_or(0, |v| v.trim().parse().unwrap())
    };
    (endpoints, gauge("http1"), gauge("limit"))
}

fn sorted(addrs: &[SocketAddr]) -> Vec<String> {
    let mut v: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    v.sort();
    v
}

#[tokio::test]
async fn endpoints_gone_from_discovery_free_their_series_and_pool_entries() {
    let server = TestServer::builder().every_loopback_address().start().await;
    let port = server.addr().port();
    let set = |round: usize| -> Vec<SocketAddr> {
        (round * 4..round * 4 + 4).map(|i| nth(i, port)).collect()
    };
    let dir = std::env::temp_dir().join(format!("tailguard-retain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("web.txt");
    write(&path, &set(0));
    let mut s = ServiceConfig::new("web", vec![Upstream::new(set(0)[0])]);
    s.arm.policy = Policy::RoundRobin;
    s.arm.accrual = None;
    s.pool.max_per_endpoint = Some(8);
    s.discovery = Discovery::File {
        path: path.clone(),
        interval: Duration::from_millis(20),
    };
    let mut c = config(s);
    c.metrics_retain_idle = Duration::from_millis(1);
    let proxy = tailguard_proxy::start(c).await.unwrap();
    let http = client(false);
    // Six rounds of four addresses each, every address used.
    for round in 0..6 {
        write(&path, &set(round));
        let applied = eventually(Duration::from_secs(10), async || {
            current(&proxy) == sorted(&set(round))
        })
        .await;
        assert!(applied, "round {round} not applied: {:?}", current(&proxy));
        for _ in 0..8 {
            assert_eq!(send(&http, proxy.addr(), "GET", "/").await.0, 200);
        }
    }
    // Only the last round's four keep series, free lists and semaphores (their connections
    // are kept alive, the others' closed).
    let last = sorted(&set(5));
    let freed = eventually(Duration::from_secs(10), async || {
        let (endpoints, h1, limit) = state(&proxy);
        endpoints == last && h1 == 4 && limit == 4
    })
    .await;
    assert!(freed, "left: {:?}", state(&proxy));
    // The first round's addresses come back (reused pod IPs): their series start from zero.
    write(&path, &set(0));
    let applied = eventually(Duration::from_secs(10), async || {
        current(&proxy) == sorted(&set(0))
    })
    .await;
    assert!(applied);
    for _ in 0..8 {
        assert_eq!(send(&http, proxy.addr(), "GET", "/").await.0, 200);
    }
    let text = proxy.metrics_text();
    for a in set(0) {
        let prefix = format!(
            "tailguard_proxy_attempts_total{{service=\"web\",endpoint=\"{a}\",class=\"2xx\"}} "
        );
        let n = text.lines().find_map(|l| l.strip_prefix(&prefix));
        assert_eq!(n, Some("2"), "{a}: {text}");
    }
    proxy.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
