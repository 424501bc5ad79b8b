//! The probing balancer live (`loadBalancer: {kind: prequal}`): the proxy probes `serve`
//! backends' load path off the request path and steers away from a backend whose line is long;
//! an endpoint that does not answer probes is judged by what the proxy sees itself; the
//! configuration keys are checked. Backends on 127.0.0.1 only.

mod support;

use std::net::SocketAddr;
use std::time::Duration;
use support::{client, load, send, start, AsUpstream};
use tailguard_balance::{Policy, PrequalConfig};
use tailguard_proxy::config::{ServiceConfig, Upstream};
use tailguard_testsupport::TestServer;

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
    assert!(err("{kind: ewma, probes: 2}").contains("only for kind prequal"));
    assert!(err("{kind: prequal, qRif: 1.5}").contains("quantile"));
    assert!(err("{kind: prequal, probePath: load}").contains("probePath: must start with `/`"));
}
