//! gRPC through the proxy: a backend failing half its calls with UNAVAILABLE (trailers-only,
//! as a tonic server answers) next to two healthy ones. The proxy must retry the failures,
//! and peak EWMA must not mistake the fast failures for a fast endpoint.
//!
//! Run with `--nocapture` to print the table docs/proxy.md shows.

use crate::support;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use tailguard_balance::Policy;
use tailguard_proxy::config::{ServiceConfig, Upstream};

const CALLS: usize = 2000;

/// Sends `CALLS` unary pings over one HTTP/2 connection, 8 at a time; returns how many
/// ended with `grpc-status: 0`.
async fn ping(addr: SocketAddr) -> usize {
    let stream = tailguard_http::tcp::connect(addr, tailguard_http::Nagle::Off)
        .await
        .unwrap();
    let (tx, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let mut tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            let mut ok = 0;
            for _ in 0..CALLS / 8 {
                // An empty PingRequest: no compression, length 0.
                let body = Full::new(Bytes::from_static(&[0, 0, 0, 0, 0]));
                ok += usize::from(support::ping_call(&mut tx, addr, body).await == Some(0));
            }
            ok
        }));
    }
    let mut ok = 0;
    for t in tasks {
        ok += t.await.unwrap();
    }
    ok
}

/// The share of attempts that went to `bad`, read from the proxy's endpoint views.
fn share(proxy: &tailguard_proxy::Proxy, bad: SocketAddr) -> f64 {
    let shared = proxy.shared();
    let views = shared.services()[0].endpoints().views(shared.clock.now());
    let tried = |v: &tailguard_proxy::EndpointView| v.successes + v.failures;
    let all: u64 = views.iter().map(tried).sum();
    let to_bad: u64 = views
        .iter()
        .filter(|v| v.addr == bad.to_string())
        .map(tried)
        .sum();
    to_bad as f64 / all as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_failing_half_its_grpc_calls_is_retried_around_and_starved() {
    let fleet = "seed: 13\nbackends: [{name: a, latency: 0s}, {name: b, latency: 0s}, \
                 {name: bad, latency: 0s, fail: {error: 0.5}}]";
    let running = support::fleet(fleet).await;
    let addrs: Vec<SocketAddr> = running.backends().iter().map(|b| b.1).collect();
    let bad = addrs[2];
    let upstreams: Vec<Upstream> = addrs.iter().copied().map(Upstream::new).collect();

    let direct = ping(bad).await;

    let mut rr = ServiceConfig::new("ping", upstreams.clone());
    rr.arm.policy = Policy::RoundRobin;
    let rr_proxy = support::start(rr).await;
    let through_rr = ping(rr_proxy.addr()).await;
    let rr_share = share(&rr_proxy, bad);

    let mut no_penalty = ServiceConfig::new("ping", upstreams.clone());
    no_penalty.arm.failure_penalty = None;
    let np_proxy = support::start(no_penalty).await;
    let through_np = ping(np_proxy.addr()).await;
    let np_share = share(&np_proxy, bad);

    let ewma_proxy = support::start(ServiceConfig::new("ping", upstreams)).await;
    let through_ewma = ping(ewma_proxy.addr()).await;
    let ewma_share = share(&ewma_proxy, bad);

    let pct = |n: usize| 100.0 * n as f64 / CALLS as f64;
    println!("| path | calls OK | attempts to the failing backend |");
    println!("|---|---|---|");
    println!(
        "| direct to the failing backend | {:.1}% | 100% |",
        pct(direct)
    );
    println!(
        "| proxy, round robin (+ retries, accrual) | {:.1}% | {:.1}% |",
        pct(through_rr),
        100.0 * rr_share
    );
    println!(
        "| proxy, P2C peak EWMA without the failure penalty | {:.1}% | {:.1}% |",
        pct(through_np),
        100.0 * np_share
    );
    println!(
        "| proxy, defaults (P2C peak EWMA + retries, accrual) | {:.1}% | {:.1}% |",
        pct(through_ewma),
        100.0 * ewma_share
    );

    assert!(
        pct(direct) < 60.0,
        "the backend fails about half: {}",
        pct(direct)
    );
    assert!(
        pct(through_ewma) >= 99.9,
        "OK through the proxy: {}%",
        pct(through_ewma)
    );
    assert!(ewma_share < 0.10, "failing endpoint's share: {ewma_share}");
    assert!(
        ewma_share < rr_share,
        "peak EWMA {ewma_share} vs round robin {rr_share}"
    );

    // gRPC outcomes are counted by code, on the failing endpoint.
    let metrics = ewma_proxy.shared().metrics.encode();
    let unavailable = format!("endpoint=\"{bad}\",grpc_status=\"14\"");
    assert!(metrics.contains(&unavailable), "{metrics}");
    tailguard_testsupport::promtool::assert_clean(&metrics);
    ewma_proxy.shutdown().await;
    rr_proxy.shutdown().await;
    np_proxy.shutdown().await;
}
