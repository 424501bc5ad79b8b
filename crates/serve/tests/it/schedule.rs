//! Scheduled faults and run-time changes on loopback. The schedule's windows run on tokio's
//! paused clock; the run-time changes go through the control endpoint's own thread, in real
//! time, with wide margins.

use crate::common;

use common::{addr, control_get, control_post, ms, serve, serve_paused};
use std::time::Duration;
use tailguard_testsupport::client::{get, H1};
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn a_slow_window_starts_and_ends_on_time() {
    let running =
        serve_paused("backends: [{latency: 2ms, schedule: ['from 300ms to 600ms latency x25']}]")
            .await;
    // The fleet's clock started inside `serve`, a little before t0: offsets from t0 are at
    // most the backend's own elapsed time.
    let t0 = Instant::now();
    let mut client = H1::connect(addr(&running, 0)).await;
    let mut seen = Vec::new();
    while t0.elapsed() < Duration::from_millis(900) {
        let sent = ms(t0.elapsed());
        let (status, _, d) = client.get("/").await;
        assert_eq!(status, 200);
        seen.push((sent, ms(d)));
    }
    let before: Vec<_> = seen.iter().filter(|(s, _)| *s < 280.0).collect();
    let during: Vec<_> = seen
        .iter()
        .filter(|(s, _)| (300.0..560.0).contains(s))
        .collect();
    let after: Vec<_> = seen.iter().filter(|(s, _)| *s > 620.0).collect();
    assert!(
        before.len() > 5 && during.len() >= 3 && after.len() > 5,
        "{seen:?}"
    );
    assert!(
        before.iter().all(|(_, l)| *l < 25.0),
        "slow before the window: {before:?}"
    );
    assert!(
        during.iter().all(|(_, l)| *l >= 50.0),
        "fast inside the window: {during:?}"
    );
    assert!(
        after.iter().all(|(_, l)| *l < 25.0),
        "slow after the window: {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_changes_latency_and_restores_it() {
    let running = serve("backends: [{name: a, latency: 0s}, {name: b, latency: 0s}]").await;
    let (status, json) = control_post(
        &running,
        "/backends/b",
        r#"{"latency": "40ms", "fail": {"error": 1.0, "status": 502}}"#,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(json["latency"], "40ms");
    let (status, _, d) = get(addr(&running, 1), "/").await;
    assert_eq!(status, 502);
    assert!(ms(d) >= 40.0, "{d:?}");
    let (status, _, _) = get(addr(&running, 0), "/").await;
    assert_eq!(status, 200, "backend a must be unchanged");
    control_post(&running, "/backends/1", r#"{"restore": true}"#).await;
    let (status, _, d) = get(addr(&running, 1), "/").await;
    assert_eq!(status, 200);
    assert!(ms(d) < 40.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_holds_requests_until_it_ends() {
    let running = serve("backends: [{latency: 0s}]").await;
    let mut client = H1::connect(addr(&running, 0)).await;
    assert_eq!(client.get("/").await.0, 200);
    let asked = Instant::now();
    let (_, json) = control_post(&running, "/backends/0", r#"{"pause": "300ms"}"#).await;
    assert_eq!(json["state"], "paused");
    let (status, _, _) = client.get("/").await;
    let held = ms(asked.elapsed());
    assert_eq!(status, 200);
    assert!((290.0..800.0).contains(&held), "answered after {held} ms");
    assert_eq!(
        control_get(&running, "/backends/0").await["state"],
        "running"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_refuses_connections_and_up_accepts_again() {
    let running = serve("backends: [{latency: 0s}]").await;
    let target = addr(&running, 0);
    let (_, json) = control_post(&running, "/backends/0", r#"{"down": true}"#).await;
    assert_eq!(json["state"], "down");
    let err = tokio::net::TcpStream::connect(target).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    let (_, json) = control_post(&running, "/backends/0", r#"{"down": false}"#).await;
    assert_eq!(json["state"], "running");
    assert_eq!(get(target, "/").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_changes_are_rejected_and_change_nothing() {
    let running = serve("backends: [{latency: 5ms}]").await;
    let (status, json) = control_post(
        &running,
        "/backends/0",
        r#"{"latency": "1s", "pause": "soon"}"#,
    )
    .await;
    assert_eq!(status, 400);
    assert!(json["error"].as_str().unwrap().contains("soon"), "{json}");
    assert_eq!(control_get(&running, "/backends/0").await["latency"], "5ms");
    let (status, _) = control_post(
        &running,
        "/backends/0",
        r#"{"latency": {"normal": {"mean": "1ms"}}}"#,
    )
    .await;
    assert_eq!(status, 400);
    let (status, json) = control_post(&running, "/backends/nope", "{}").await;
    assert_eq!(status, 404, "{json}");
}

/// A failure answers in place of the real answer, so it must be a final status: a 1xx is an
/// interim response (RFC 9110 section 15.2) and is refused, naming the key; 2xx to 5xx may be
/// returned on purpose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_status_must_be_final() {
    let running = serve("backends: [{latency: 0s}]").await;
    for status in [100, 101, 199, 600] {
        let change = format!(r#"{{"fail": {{"error": 0.5, "status": {status}}}}}"#);
        let (code, json) = control_post(&running, "/backends/0", &change).await;
        assert_eq!(code, 400, "{status}: {json}");
        let error = json["error"].as_str().unwrap();
        assert!(error.contains("fail.status"), "{error}");
        assert!(error.contains(&status.to_string()), "{error}");
        assert!(error.contains("200 to 599"), "{error}");
    }
    assert_eq!(
        control_get(&running, "/backends/0").await["fail"],
        "{error: 0, status: 500, close: 0, reset: 0}"
    );
    for status in [200, 302, 429, 599] {
        let change = format!(r#"{{"fail": {{"error": 0.5, "status": {status}}}}}"#);
        let (code, json) = control_post(&running, "/backends/0", &change).await;
        assert_eq!(code, 200, "{status}: {json}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_per_backend() {
    let running = serve("backends: [{name: m, latency: 0s}]").await;
    for _ in 0..3 {
        get(addr(&running, 0), "/").await;
    }
    let (status, text, _) = get(running.control().unwrap(), "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        text.contains(r#"tailguard_serve_requests_total{backend="m",outcome="ok"} 3"#),
        "{text}"
    );
    let control = running.control().unwrap();
    let (kind, text) =
        tokio::task::spawn_blocking(move || tailguard_testsupport::promtool::scrape(control))
            .await
            .unwrap();
    assert_eq!(kind, "text/plain; version=0.0.4; charset=utf-8");
    tailguard_testsupport::promtool::assert_clean(&text);
}

#[tokio::test]
async fn a_taken_default_control_port_falls_back_and_a_given_one_fails() {
    const ONE: &str = "backends:\n  - name: a\n";
    let first = serve(ONE).await;
    let taken = first.control().expect("control endpoint");
    // A second serve on the default address (the user gave none) takes any free port.
    let second = common::serve_with(ONE, |o| {
        o.control = Some(taken);
        o.control_fallback = true;
    })
    .await;
    let moved = second.control().expect("control endpoint");
    assert_ne!(moved.port(), taken.port());
    assert_eq!(moved.ip(), taken.ip());
    assert!(control_get(&second, "/backends/0").await["name"] == "a");
    // An address the user gave is kept to: taken is an error naming it.
    let fleet = tailguard_fleet::Fleet::from_yaml_str(ONE, "test").unwrap();
    let mut options = tailguard_serve::ServeOptions::new(fleet);
    options.listen = "127.0.0.1:0".parse().unwrap();
    options.control = Some(taken);
    let err = tailguard_serve::start(options)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&taken.to_string()), "{err}");
}
