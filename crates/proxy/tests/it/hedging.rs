//! Hedged requests live (`service.hedge`, the `hedge` the simulator runs; Finagle's
//! `BackupRequestFilter`): when an endpoint stalls, a backup to another endpoint answers after
//! the hedge delay, the stalled attempt is cancelled, and the backups never exceed the budget's
//! share of the traffic. Linkerd has no hedging; Envoy hedges only on a fixed per-try timeout.
//! Backends on 127.0.0.1, on tokio's paused clock: the delays, the stall and the budget's
//! window are virtual time, the sockets are real.

use crate::support;

use std::time::Duration;
use support::{client, eventually, metric, send, start, views, AsUpstream};
use tailguard_balance::Policy;
use tailguard_proxy::config::ServiceConfig;
use tailguard_resilience::HedgeConfig;
use tailguard_testsupport::TestServer;

fn service(backends: &[&TestServer], hedge: HedgeConfig) -> ServiceConfig {
    let mut s = ServiceConfig::new("web", backends.iter().map(|b| b.upstream()).collect());
    s.arm.policy = Policy::RoundRobin;
    s.arm.retries = None;
    s.arm.accrual = None;
    s.arm.hedge = Some(hedge);
    s
}

#[tokio::test(start_paused = true)]
async fn a_backup_wins_when_the_first_endpoint_stalls_and_the_stalled_attempt_is_cancelled() {
    // The 31st request to reach `stalling` stalls it for 10 s (it and all that arrive during).
    let stalling = TestServer::builder()
        .stall_after(31, Duration::from_secs(10))
        .start()
        .await;
    let fine = TestServer::start().await;
    // Round robin sends every first attempt to `stalling` once the backups go to `fine`, so
    // all 20 are hedged: a floor of 5 backups a second (50 in the 10 s window) allows them.
    let hedge = HedgeConfig {
        max_extra_load: 0.2,
        min_per_sec: 5,
        min_samples: 20,
        min_delay: Duration::from_millis(50),
        ..HedgeConfig::default()
    };
    let proxy = start(service(&[&stalling, &fine], hedge)).await;
    let addr = proxy.addr();
    let c = client(false);
    // Warm-up: 60 fast answers, 30 from each, to learn the delay and fill the budget.
    for _ in 0..60 {
        assert_eq!(send(&c, addr, "GET", "/").await.0, 200);
    }
    assert_eq!(stalling.hits(), 30);
    // From the next request on, every first attempt to `stalling` hangs: its backup answers.
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let started = tokio::time::Instant::now();
        assert_eq!(send(&c, addr, "GET", "/").await.0, 200);
        slowest = slowest.max(started.elapsed());
    }
    // Without hedging, ten of these would have waited out the 10 s stall; with it, each waits
    // the hedge delay (its 50 ms floor here, in virtual time) and not much more.
    assert!(slowest < Duration::from_millis(100), "slowest {slowest:?}");
    let sent = metric(&proxy, "tailguard_proxy_hedges_total");
    let won = metric(&proxy, "tailguard_proxy_hedge_wins_total");
    assert!(sent >= 10.0, "{sent} backups sent");
    assert!(won >= 10.0 && won <= sent, "{won} of {sent} backups won");
    let delay = metric(&proxy, "tailguard_proxy_hedge_delay_seconds");
    assert!((0.05..1.0).contains(&delay), "hedge delay {delay} s");
    let view = views(&proxy);
    assert!(view[1].hedge_wins >= 10, "{view:?}");
    assert_eq!(view[0].hedge_wins, 0, "{view:?}");
    // The stalled attempts were cancelled when their backups won: none is still pending.
    let drained = eventually(Duration::from_secs(2), async || {
        views(&proxy)[0].pending == 0
    })
    .await;
    assert!(drained, "{:?}", views(&proxy));
    proxy.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn backups_stay_within_the_budget_share_of_requests() {
    let fast = TestServer::start().await;
    let slow = TestServer::start().await;
    let hedge = HedgeConfig {
        max_extra_load: 0.05,
        min_samples: 20,
        min_delay: Duration::from_millis(20),
        ..HedgeConfig::default()
    };
    let proxy = start(service(&[&fast, &slow], hedge)).await;
    let addr = proxy.addr();
    let c = client(false);
    for _ in 0..100 {
        assert_eq!(send(&c, addr, "GET", "/").await.0, 200);
    }
    // Half the answers turn slow, far past the delay learned on fast ones: until the delay
    // catches up, every other request would hedge, and the 5% budget is what stops them.
    slow.set_delay(Duration::from_millis(100));
    support::load(addr, 8, 25).await;
    let requests = 300.0;
    let sent = metric(&proxy, "tailguard_proxy_hedges_total");
    let refused = metric(&proxy, "tailguard_proxy_hedge_budget_exhausted_total");
    assert!(sent >= 1.0, "no backup sent");
    assert!(
        sent <= requests * 0.05 + 1.0,
        "{sent} backups for {requests} requests"
    );
    assert!(refused > 0.0, "the budget never refused");
    // The extra load as the backends saw it: at most one hit per backup (a backup cancelled
    // before it arrived is none).
    let hits = (fast.hits() + slow.hits()) as f64;
    assert!(hits >= requests && hits <= requests + sent, "{hits} hits");
    eprintln!(
        "extra load: {sent} backups ({:.1}%), {refused} refused, {hits} hits for {requests} requests",
        sent / requests * 100.0
    );
    proxy.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_stalled_endpoint_does_not_blind_the_hedge_delay() {
    // One endpoint of three stalls for 3 s with round robin sending it a third of the
    // requests; the 5% budget backs up only a few of them, the rest finish at 3 s. Were those
    // samples of the delay, its p95 would be 3 s and no backup would leave in time again.
    let stalling = TestServer::builder()
        .stall_after(31, Duration::from_secs(3))
        .start()
        .await;
    let fine = [TestServer::start().await, TestServer::start().await];
    let hedge = HedgeConfig {
        min_samples: 20,
        min_delay: Duration::from_millis(10),
        ..HedgeConfig::default()
    };
    let proxy = start(service(&[&stalling, &fine[0], &fine[1]], hedge)).await;
    let addr = proxy.addr();
    let c = client(false);
    for _ in 0..90 {
        assert_eq!(send(&c, addr, "GET", "/").await.0, 200);
    }
    support::load(addr, 8, 20).await;
    for _ in 0..30 {
        assert_eq!(send(&c, addr, "GET", "/").await.0, 200);
    }
    let delay = metric(&proxy, "tailguard_proxy_hedge_delay_seconds");
    let sent = metric(&proxy, "tailguard_proxy_hedges_total");
    eprintln!("hedge delay after the stall: {delay} s, {sent} backups");
    assert!(delay < 0.5, "the stall blinded the hedge delay: {delay} s");
    proxy.shutdown().await;
}

#[test]
fn the_configuration_names_the_hedge_keys() {
    let yaml = |hedge: &str| {
        format!(
            "servers: [{{ip: 127.0.0.1, port: 0}}]\nservices:\n  - name: web\n    \
             upstreams: [\"127.0.0.1:1\"]\n    service:\n      hedge: {hedge}\n"
        )
    };
    let cfg = tailguard_proxy::yaml::parse(&yaml(
        "{maxExtraLoad: 0.1, minPerSec: 2, windowMs: 5000, minSamples: 50, minDelayMs: 10}",
    ))
    .unwrap();
    let h = cfg.services[0].arm.hedge.unwrap();
    assert!((h.max_extra_load - 0.1).abs() < 1e-9);
    assert_eq!((h.min_per_sec, h.min_samples), (2, 50));
    assert_eq!(h.window, Duration::from_secs(5));
    assert_eq!(h.min_delay, Duration::from_millis(10));
    let err = tailguard_proxy::yaml::parse(&yaml("{maxExtraLoad: 1.5}"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("service.hedge"), "{err}");
    let err = tailguard_proxy::yaml::parse(&yaml("{delay: 5}"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("delay"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn grpc_calls_are_hedged_only_for_the_methods_listed() {
    // Every call from the 21st on stalls `stalling` for 10 s.
    let stalling = TestServer::builder()
        .stall_after(21, Duration::from_secs(10))
        .start()
        .await;
    let fine = TestServer::start().await;
    let hedge = HedgeConfig {
        max_extra_load: 0.5,
        min_per_sec: 10,
        min_samples: 20,
        min_delay: Duration::from_millis(50),
        ..HedgeConfig::default()
    };
    let mut s = service(&[&stalling, &fine], hedge);
    s.grpc_hedge =
        tailguard_proxy::config::GrpcMethods::new(&["tailguard.test.Svc/Get".into()]).unwrap();
    let proxy = start(s).await;
    let c = client(true);
    let call = async |method: &str| {
        let req = http::Request::post(format!(
            "http://{}/tailguard.test.Svc/{method}",
            proxy.addr()
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(http_body_util::Full::new(bytes::Bytes::from_static(&[
            0, 0, 0, 0, 0,
        ])))
        .unwrap();
        let started = tokio::time::Instant::now();
        let resp = tailguard_testsupport::bounded(c.request(req))
            .await
            .unwrap();
        let body = http_body_util::BodyExt::collect(resp.into_body());
        let trailers = tailguard_testsupport::bounded(body).await.unwrap();
        let code = trailers.trailers().and_then(tailguard_proxy::grpc::status);
        (code, started.elapsed())
    };
    // Warm-up: 40 calls of the listed method, 20 to each backend, to learn the delay.
    for _ in 0..40 {
        assert_eq!(call("Get").await.0, Some(0));
    }
    // Now every call the balancer sends to `stalling` stalls there: a listed method's gets a
    // backup to `fine` after the hedge delay.
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let (code, took) = call("Get").await;
        assert_eq!(code, Some(0));
        slowest = slowest.max(took);
    }
    assert!(slowest < Duration::from_millis(100), "slowest {slowest:?}");
    let hedged = metric(&proxy, "tailguard_proxy_hedges_total");
    assert!(hedged >= 5.0, "{hedged} backups");
    // A method not listed is never hedged: the one sent to `stalling` waits out the stall.
    let mut slowest = Duration::ZERO;
    for _ in 0..2 {
        let (code, took) = call("Put").await;
        assert_eq!(code, Some(0));
        slowest = slowest.max(took);
    }
    assert!(slowest >= Duration::from_secs(9), "slowest {slowest:?}");
    assert_eq!(metric(&proxy, "tailguard_proxy_hedges_total"), hedged);
    proxy.shutdown().await;
}
