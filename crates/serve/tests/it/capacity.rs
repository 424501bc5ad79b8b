//! A backend with a capacity serves that many requests at once: the others wait their turn in
//! line (their latency counts from when a worker takes them), and a full line turns requests
//! away at once with its status. The control endpoint shows the workers and the line.
//!
//! On tokio's paused clock (real sockets on 127.0.0.1): the latencies and the windows the
//! assertions check are virtual time, so a busy machine cannot stretch them.

use crate::common;

use common::{addr, backend, serve_paused};
use std::time::Duration;
use tailguard_testsupport::client::{raw_get, Raw};
use tokio::time::Instant;

/// Each request's status and when it ended, from a common start.
async fn timed(target: std::net::SocketAddr, start: Instant) -> (Raw, Duration) {
    let raw = raw_get(target).await;
    (raw, start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn one_worker_serves_in_turn_and_a_full_line_turns_away() {
    let running =
        serve_paused("backends: [{latency: 300ms, capacity: {workers: 1, queue: 1, status: 503}}]")
            .await;
    let target = addr(&running, 0);
    let start = Instant::now();
    let first = tokio::spawn(timed(target, start));
    // The second waits behind the first: wait until the line shows it (bounded poll).
    let second = {
        let mut waited = 0;
        loop {
            let json = backend(&running, 0);
            if json["capacity"]["busy"] == 1 {
                break;
            }
            waited += 1;
            assert!(
                waited < 200,
                "the first request never took the worker: {json}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::spawn(timed(target, start))
    };
    let mut waited = 0;
    loop {
        let json = backend(&running, 0);
        if json["capacity"]["waiting"] == 1 {
            assert_eq!(json["capacity"]["workers"], 1);
            assert_eq!(
                json["capacity"]["configured"],
                "1 workers, queue 1 then 503"
            );
            break;
        }
        waited += 1;
        assert!(waited < 200, "the second request never queued: {json}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The line is full: the third is turned away at once, before the first is answered.
    let (third, at) = timed(target, start).await;
    assert_eq!(third, Raw::Status(503));
    assert!(at < Duration::from_millis(300), "turned away after {at:?}");
    let (first, first_at) = first.await.unwrap();
    let (second, second_at) = second.await.unwrap();
    assert_eq!((first, second), (Raw::Status(200), Raw::Status(200)));
    // The second's 300 ms started when the first's ended.
    assert!(
        second_at >= first_at + Duration::from_millis(300),
        "first {first_at:?}, second {second_at:?}"
    );
    let json = backend(&running, 0);
    assert_eq!(json["requests"]["ok"], 2);
    assert_eq!(json["requests"]["error"], 1);
    assert_eq!(json["capacity"]["busy"], 0);
}

/// On a one-worker backend: a first request takes the worker, a client queues behind it and
/// hangs up, then a last one comes; when the first and the last ended.
async fn behind_a_quitter(running: &tailguard_serve::Running) -> (Duration, Duration) {
    let target = addr(running, 0);
    let start = Instant::now();
    let first = tokio::spawn(timed(target, start));
    let mut waited = 0;
    while backend(running, 0)["capacity"]["busy"] != 1 {
        waited += 1;
        assert!(waited < 200, "the first request never took the worker");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A client queues, then hangs up before its turn.
    let quitter = tokio::spawn(raw_get(target));
    let mut waited = 0;
    while backend(running, 0)["capacity"]["waiting"] != 1 {
        waited += 1;
        assert!(waited < 200, "the quitter never queued");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    quitter.abort();
    let _ = quitter.await;
    let last = tokio::spawn(timed(target, start));
    let (first, first_at) = first.await.unwrap();
    let (last, last_at) = last.await.unwrap();
    assert_eq!((first, last), (Raw::Status(200), Raw::Status(200)));
    (first_at, last_at)
}

#[tokio::test(start_paused = true)]
async fn a_client_that_hangs_up_while_waiting_gives_its_turn_away() {
    let running = serve_paused("backends: [{latency: 200ms, capacity: 1}]").await;
    let (first_at, last_at) = behind_a_quitter(&running).await;
    // The last waited for the first only, not for the quitter's 200 ms too (that would end
    // it 400 ms after the first).
    assert!(last_at >= first_at + Duration::from_millis(200));
    assert!(
        last_at < first_at + Duration::from_millis(330),
        "first {first_at:?}, last {last_at:?}"
    );
}

/// With `serve_abandoned`, the same quitter's work is served to its end: the last request
/// waits for the first and for the quitter's 200 ms, as behind a server that does not notice
/// its client left (the overload scenario's metastable case).
#[tokio::test(start_paused = true)]
async fn serve_abandoned_keeps_a_quitters_work_in_line() {
    let running = common::serve_with("backends: [{latency: 200ms, capacity: 1}]", |o| {
        o.precise_timer = false;
        o.serve_abandoned = true;
    })
    .await;
    let (first_at, last_at) = behind_a_quitter(&running).await;
    assert!(
        last_at >= first_at + Duration::from_millis(400),
        "first {first_at:?}, last {last_at:?}"
    );
    let json = backend(&running, 0);
    assert_eq!(
        json["requests"]["ok"], 3,
        "the quitter's request was served"
    );
    assert_eq!(json["capacity"]["busy"], 0);
}

/// GET the probe path, as (rif, latency_us).
async fn probe(running: &tailguard_serve::Running, i: usize) -> (u64, u64) {
    let (status, body, _) =
        tailguard_testsupport::client::get(addr(running, i), tailguard_serve::PROBE_PATH).await;
    assert_eq!(status, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    (
        json["rif"].as_u64().unwrap(),
        json["latency_us"].as_u64().unwrap(),
    )
}

#[tokio::test(start_paused = true)]
async fn a_probe_reads_requests_in_flight_and_the_latency_they_see() {
    let running = serve_paused("backends: [{latency: 100ms, capacity: 1}]").await;
    let target = addr(&running, 0);
    // Nothing known yet, and the probe is not a request of the backend's.
    assert_eq!(probe(&running, 0).await, (0, 0));
    let json = backend(&running, 0);
    assert_eq!(json["requests"]["ok"], 0);
    // Three requests at once on one worker: 100, 200 and 300 ms, all found 0-2 in flight.
    let start = Instant::now();
    let calls: Vec<_> = (0..3).map(|_| tokio::spawn(timed(target, start))).collect();
    let mut waited = 0;
    loop {
        let (rif, _) = probe(&running, 0).await;
        if rif == 3 {
            break;
        }
        waited += 1;
        assert!(waited < 200, "never three in flight (last {rif})");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for c in calls {
        assert_eq!(c.await.unwrap().0, Raw::Status(200));
    }
    // Idle again. The estimate is the median of the (up to seven) requests whose RIF on arrival
    // was nearest 0: with three requests, all of them: 100, 200 and 300 ms, so about 200 ms.
    let (rif, latency_us) = probe(&running, 0).await;
    assert_eq!(rif, 0);
    assert!(
        (195_000..290_000).contains(&latency_us),
        "estimate {latency_us} µs"
    );
    let json = backend(&running, 0);
    assert_eq!(json["requests"]["ok"], 3, "probes are not counted");
}

#[tokio::test(start_paused = true)]
async fn grpc_calls_feed_the_latency_estimate_too() {
    use tailguard_serve::grpc::{PingRequest, PingResponse, PING_PATH};
    let running = serve_paused("backends: [{latency: 40ms, capacity: 2}]").await;
    assert_eq!(probe(&running, 0).await, (0, 0)); // the first probe starts the estimate
    let url = format!("http://{}", addr(&running, 0));
    let channel = tailguard_testsupport::bounded(
        tonic::transport::Endpoint::from_shared(url)
            .unwrap()
            .connect(),
    )
    .await
    .unwrap();
    let mut client = tonic::client::Grpc::new(channel);
    for _ in 0..3 {
        tailguard_testsupport::bounded(client.ready())
            .await
            .unwrap();
        let codec = tonic_prost::ProstCodec::<PingRequest, PingResponse>::default();
        let req = tonic::Request::new(PingRequest::default());
        let path = http::uri::PathAndQuery::from_static(PING_PATH);
        tailguard_testsupport::bounded(client.unary(req, path, codec))
            .await
            .unwrap();
    }
    // Three calls, one after the other, each 40 ms on an idle worker: the estimate is theirs.
    let (rif, latency_us) = probe(&running, 0).await;
    assert_eq!(rif, 0);
    assert!(
        (39_000..80_000).contains(&latency_us),
        "estimate {latency_us} µs"
    );
}
