//! The probing balancer live (`loadBalancer: {kind: prequal}`): the proxy probes `serve`
//! backends' load path off the request path and steers away from a backend whose line is long;
//! an endpoint that does not answer probes is judged by what the proxy sees itself; the
//! configuration keys are checked. Backends on 127.0.0.1 only.

use crate::support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{client, load, send, start, AsUpstream};
use tailguard_balance::{Policy, PrequalConfig};
use tailguard_proxy::config::{ServiceConfig, Upstream};
use tailguard_testsupport::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn prequal(upstreams: Vec<Upstream>) -> ServiceConfig {
    let mut s = ServiceConfig::new("web", upstreams);
    s.arm.policy = Policy::Prequal(PrequalConfig::default());
    s.arm.retries = None;
    s.arm.accrual = None;
    s
}

/// The proxy's probe counter for `class` (`ok` or `failed`), summed over endpoints.
async fn probes(admin: SocketAddr, class: &str) -> u64 {
    let (_, _, body) = send(&client(false), admin, "GET", "/metrics").await;
    let text = String::from_utf8_lossy(&body).into_owned();
    text.lines()
        .filter(|l| {
            l.starts_with("tailguard_proxy_probes_total{")
                && l.contains(&format!("class=\"{class}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_steer_traffic_away_from_a_backend_with_a_long_line() {
    // Two backends of two workers at 10 ms, one of one worker at 150 ms.
    let fleet = tailguard_fleet::Fleet::from_yaml_str(
        "backends: [{name: a, latency: 10ms, capacity: 2}, {name: b, latency: 10ms, capacity: 2}, \
         {name: slow, latency: 150ms, capacity: 1}]",
        "test",
    )
    .unwrap();
    let mut options = tailguard_serve::ServeOptions::new(fleet);
    options.listen = "127.0.0.1:0".parse().unwrap();
    options.control = Some("127.0.0.1:0".parse().unwrap());
    let running = tailguard_serve::start(options).await.unwrap();
    let upstreams = running
        .backends()
        .iter()
        .map(|(_, a)| Upstream::new(*a))
        .collect();
    let proxy = start(prequal(upstreams)).await;
    let admin = proxy.admin_addr().unwrap();
    load(proxy.addr(), 4, 40).await;
    let served: Vec<u64> = running
        .tally()
        .served()
        .iter()
        .map(|s| s.requests)
        .collect();
    assert_eq!(
        served.iter().sum::<u64>(),
        160,
        "probes are not requests: {served:?}"
    );
    // Round robin would send the slow backend a third (53); its line tells the probes to stay away.
    assert!(served[2] < 25, "the slow backend got {served:?}");
    let ok = probes(admin, "ok").await;
    assert!(ok >= 100, "three probes per request, answered: {ok}");
    assert_eq!(probes(admin, "failed").await, 0);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_does_not_answer_probes_is_judged_by_what_the_proxy_sees() {
    let backends = [TestServer::start().await, TestServer::start().await];
    let proxy = start(prequal(backends.iter().map(TestServer::upstream).collect())).await;
    let admin = proxy.admin_addr().unwrap();
    load(proxy.addr(), 2, 20).await;
    // The test server answers the probe path with its usual text, not the JSON answer.
    assert!(probes(admin, "failed").await > 0);
    assert_eq!(probes(admin, "ok").await, 0);
    let hits: Vec<u64> = backends.iter().map(TestServer::hits).collect();
    assert!(hits.iter().all(|&h| h >= 20), "both still serve: {hits:?}");
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_whose_probe_lies_does_not_draw_the_traffic() {
    // It answers every request, its probe included, in 200 ms, and says it has nothing in
    // flight and answers at once.
    let liar = TestServer::builder()
        .delay(Duration::from_millis(200))
        .body(r#"{"rif": 0, "latency_us": 0}"#)
        .start()
        .await;
    // Two backends answering in 5 ms, their probes truthfully.
    let honest =
        support::fleet("backends: [{name: a, latency: 5ms}, {name: b, latency: 5ms}]").await;
    let mut upstreams: Vec<Upstream> = honest
        .backends()
        .iter()
        .map(|b| Upstream::new(b.1))
        .collect();
    upstreams.push(liar.upstream());
    let proxy = start(prequal(upstreams)).await;
    let admin = proxy.admin_addr().unwrap();
    load(proxy.addr(), 4, 100).await;
    let hits = liar.hits();
    let distrusted = probes(admin, "distrusted").await;
    eprintln!("the lying backend: {hits} hits of 400 requests, {distrusted} replies distrusted");
    // Round robin would give it a third (133); believing it, nearly all 400.
    assert!(
        hits < 40,
        "the lying backend got {hits} of 400 (probes included)"
    );
    assert!(distrusted > 0);
    proxy.shutdown().await;
}

/// A backend on 127.0.0.1 that answers `200 ok` to every request but one for `probe`, which
/// it never answers; counts its open connections and the most it had at once.
async fn hanging_probe_path(probe: &'static str) -> (SocketAddr, Arc<(AtomicUsize, AtomicUsize)>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let shared = Arc::clone(&counts);
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let counts = Arc::clone(&shared);
            let open = counts.0.fetch_add(1, Ordering::SeqCst) + 1;
            counts.1.fetch_max(open, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while let Ok(n) = conn.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end + 4);
                    if head.contains(probe) {
                        std::future::pending::<()>().await; // hangs until the test ends
                    }
                    let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if conn.write_all(ok).await.is_err() {
                        break;
                    }
                }
                counts.0.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (addr, counts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_probe_path_costs_at_most_a_few_connections() {
    let (addr, counts) = hanging_probe_path("/.well-known/tailguard/load").await;
    let other = TestServer::start().await;
    let proxy = start(prequal(vec![Upstream::new(addr), other.upstream()])).await;
    load(proxy.addr(), 4, 150).await;
    let most = counts.1.load(Ordering::SeqCst);
    eprintln!("at most {most} connections at once to the backend whose probe path hangs");
    // Probes out at once (2) plus the connections of four workers' requests.
    let cap = tailguard_proxy::MAX_PROBES_IN_FLIGHT as usize + 4;
    assert!(most <= cap, "{most} connections at once (at most {cap})");
    assert!(probes(proxy.admin_addr().unwrap(), "skipped").await > 0);
    proxy.shutdown().await;
}

#[test]
fn the_configuration_names_the_probing_keys() {
    let yaml = |balancer: &str| {
        format!(
            "servers: [{{ip: 127.0.0.1, port: 0}}]\nservices:\n  - name: web\n    upstreams: [\"127.0.0.1:1\"]\n    \
             client:\n      loadBalancer: {balancer}\n"
        )
    };
    let cfg = tailguard_proxy::yaml::parse(&yaml(
        "{kind: prequal, probes: 2, poolSize: 8, maxAgeMs: 500, qRif: 0.6, probePath: /load}",
    ))
    .unwrap();
    let s = &cfg.services[0];
    assert_eq!(s.probe_path, "/load");
    let Policy::Prequal(p) = s.arm.policy else {
        panic!("{:?}", s.arm.policy)
    };
    assert_eq!((p.probes_per_query, p.pool_size, p.q_rif), (2, 8, 0.6));
    assert_eq!(p.max_age, Duration::from_millis(500));
    let err = |b: &str| {
        tailguard_proxy::yaml::parse(&yaml(b))
            .unwrap_err()
            .to_string()
    };
    assert!(err("{kind: ewma, probePath: /load}").contains("loadBalancer.probePath"));
    assert!(err("{kind: ewma, probes: 2}")
        .contains("probes: does not apply to kind ewma; it belongs to prequal"));
    assert!(err("{kind: prequal, qRif: 1.5}").contains("quantile"));
    assert!(err("{kind: prequal, probePath: load}").contains("probePath: must start with `/`"));
}
