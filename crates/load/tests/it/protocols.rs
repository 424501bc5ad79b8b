//! HTTP/1.1, h2c, TLS with ALPN, connection reuse, classification and output files.

use crate::common;

use std::time::Duration;
use tailguard_load::Protocol;
use tailguard_testsupport::TestServer;

#[test]
fn h2c_prior_knowledge_multiplexes_on_one_connection() {
    let server = TestServer::builder().spawn();
    let mut cfg = common::config(&server.url("/"), 0.0, Duration::from_secs(60));
    cfg.protocol = Protocol::Http2;
    cfg.total_requests = Some(300);
    cfg.duration = None;
    let (report, _) = common::run(cfg);
    assert_eq!(report.summary.totals.good, 300);
    // One connection carrying every stream.
    assert_eq!(server.connections(), 1);
    assert_eq!(server.h2_requests(), 300);
}

#[test]
fn tls_negotiates_h2_by_alpn_or_http1_when_asked() {
    for (protocol, h2) in [(Protocol::Auto, 300), (Protocol::Http1, 0)] {
        let server = TestServer::builder().tls().spawn();
        let mut cfg = common::config(&server.url("/"), 0.0, Duration::from_secs(60));
        assert!(server.url("/").starts_with("https://"));
        cfg.protocol = protocol;
        cfg.insecure = true;
        cfg.total_requests = Some(300);
        cfg.duration = None;
        let (report, _) = common::run(cfg);
        assert_eq!(report.summary.totals.good, 300, "{protocol:?}");
        assert_eq!(server.h2_requests(), h2, "{protocol:?}");
    }
}

#[test]
fn tls_without_insecure_rejects_a_self_signed_certificate() {
    let server = TestServer::builder().tls().spawn();
    let mut cfg = common::config(&server.url("/"), 0.0, Duration::from_secs(60));
    cfg.total_requests = Some(5);
    cfg.duration = None;
    let (report, _) = common::run(cfg);
    let t = &report.summary.totals;
    assert_eq!(t.failed, 5);
    assert_eq!(t.errors.get("tls"), Some(&5));
}

#[test]
fn keep_alive_reuses_and_no_reuse_reconnects() {
    // Connections: one per worker, or one per request.
    for (reuse, conns) in [(true, 3), (false, 40)] {
        let server = TestServer::builder().spawn();
        let mut cfg = common::config(&server.url("/"), 0.0, Duration::from_secs(60));
        cfg.concurrency = 3;
        cfg.reuse = reuse;
        cfg.total_requests = Some(40);
        cfg.duration = None;
        let (report, _) = common::run(cfg);
        assert_eq!(report.summary.totals.good, 40);
        assert_eq!(server.connections(), conns, "reuse={reuse}");
    }
}

#[test]
fn five_hundreds_are_bad_and_four_hundreds_bad_only_when_asked() {
    let s503 = TestServer::builder().status(503).spawn();
    let s404 = TestServer::builder().status(404).spawn();
    for (url, four_xx_bad, good, bad) in [
        (s503.url("/"), false, 0, 20),
        (s404.url("/"), false, 20, 0),
        (s404.url("/"), true, 0, 20),
    ] {
        let mut cfg = common::config(&url, 0.0, Duration::from_secs(60));
        cfg.classifier.four_xx_bad = four_xx_bad;
        cfg.total_requests = Some(20);
        cfg.duration = None;
        let (report, _) = common::run(cfg);
        let t = &report.summary.totals;
        assert_eq!(
            (t.good, t.bad),
            (good, bad),
            "{url} four_xx_bad={four_xx_bad}"
        );
    }
}

#[test]
fn timeouts_are_failed_and_counted_in_latency() {
    let server = TestServer::builder()
        .delay(Duration::from_millis(400))
        .spawn();
    let mut cfg = common::config(&server.url("/"), 0.0, Duration::from_secs(60));
    cfg.timeout = Duration::from_millis(50);
    cfg.total_requests = Some(4);
    cfg.concurrency = 4;
    cfg.duration = None;
    let (report, _) = common::run(cfg);
    let t = &report.summary.totals;
    let latency = t.latency_us.unwrap();
    assert_eq!(t.failed, 4);
    assert_eq!(t.errors.get("timeout"), Some(&4));
    assert!(
        latency.min >= 50_000 && latency.max < 100_000,
        "{latency:?}"
    );
}

#[test]
fn json_and_hdr_log_hold_the_run() {
    let server = TestServer::builder().spawn();
    let dir = std::env::temp_dir().join(format!("tg-load-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cfg = common::config(&server.url("/"), 500.0, Duration::from_secs(2));
    cfg.json = Some(dir.join("run.json"));
    cfg.hdr_log = Some(dir.join("run.hlog"));
    let (report, text) = common::run(cfg);
    assert!(text.contains("# 1000 requests in"), "{text}");

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    for key in [
        "target_rate",
        "achieved_rate",
        "requests",
        "good",
        "bad",
        "failed",
        "latency_us",
        "service_time_us",
        "status_codes",
        "intervals",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    for key in ["min", "p50", "p90", "p95", "p99", "p999", "p9999", "max"] {
        assert!(json["latency_us"][key].is_u64(), "latency_us.{key}");
        assert!(
            json["intervals"][0]["latency_us"][key].is_u64(),
            "intervals[0].latency_us.{key}"
        );
    }
    assert_eq!(json["requests"], 1000);
    assert_eq!(json["status_codes"]["200"], 1000);
    assert_eq!(
        json["intervals"].as_array().unwrap().len(),
        report.summary.intervals.len()
    );

    let log = std::fs::read(dir.join("run.hlog")).unwrap();
    let intervals = tailguard_histogram::log::read(&log).unwrap();
    let logged: u64 = intervals
        .iter()
        .filter(|i| i.tag.as_deref() == Some("latency"))
        .map(|i| i.histogram.count())
        .sum();
    assert_eq!(logged, 1000);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `-H 'Host: x'` sets the host as curl, wrk and fortio do: `Host` over HTTP/1.1 (one header,
/// not the URL's and the given one both), `:authority` over HTTP/2; `--host` wins over it.
#[test]
fn a_host_header_sets_host_and_authority() {
    let server = TestServer::builder().spawn();
    let cases = [
        (Protocol::Http1, None, "web"),
        (Protocol::Http2, None, "web"),
        (Protocol::Http1, Some("api"), "api"),
        (Protocol::Http2, Some("api"), "api"),
    ];
    for (protocol, flag, expected) in cases {
        let mut cfg = common::config(&server.url("/"), 100.0, Duration::from_millis(50));
        cfg.protocol = protocol;
        cfg.headers
            .append(http::header::HOST, http::HeaderValue::from_static("web"));
        cfg.host = flag.map(str::to_owned);
        let (report, _) = common::run(cfg);
        assert!(report.summary.totals.good >= 4, "{protocol:?} {flag:?}");
        assert_eq!(
            server.last_host().as_deref(),
            Some(expected),
            "{protocol:?} {flag:?}"
        );
    }
}

/// Every request sent is awaited, on HTTP/2 too: a thread whose workers finish first keeps
/// driving the shared connection it dialed until the other threads' last streams complete
/// (it used to end its runtime and cut them: `good 9, failed 1`).
#[test]
fn h2_across_threads_counts_every_request_to_the_last() {
    let server = TestServer::builder()
        .delay(Duration::from_millis(200))
        .spawn();
    for _ in 0..3 {
        let mut cfg = common::config(&server.url("/"), 20.0, Duration::from_secs(60));
        cfg.protocol = Protocol::Http2;
        cfg.threads = 2;
        cfg.concurrency = 50;
        cfg.total_requests = Some(10);
        cfg.duration = None;
        let (report, _) = common::run(cfg);
        let t = &report.summary.totals;
        assert_eq!((t.good, t.failed), (10, 0), "{:?}", t.errors);
    }
}

/// A backend on a thread of its own: each connection's request is answered with `interim`
/// `100 Continue` heads, `gap` apart (none: in 64 KiB writes), then a 200 (if the client
/// still reads).
fn interim_backend(interim: usize, gap: Option<Duration>) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                if s.read(&mut buf).unwrap_or(0) == 0 {
                    return;
                }
                let head: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
                let mut sent = 0;
                while sent < interim {
                    let n = if gap.is_some() {
                        1
                    } else {
                        (64 << 10) / head.len()
                    };
                    if s.write_all(&head.repeat(n.min(interim - sent))).is_err() {
                        return;
                    }
                    sent += n;
                    if let Some(gap) = gap {
                        std::thread::sleep(gap);
                    }
                }
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
            });
        }
    });
    addr
}

/// An interim flood (a 1xx head streamed without end) is an error of its own kind, at once,
/// on both HTTP/1.1 clients; interim heads that come slowly count against `--timeout`. The
/// run ends on time either way: `-r 100 -d 3s -c 30 --timeout 2s` against a flood used to
/// run 20 s and count 21.8 s answers as good.
#[test]
#[ignore = "tier 2: wall clock (a run's length)"]
#[allow(clippy::disallowed_methods)] // How long a real run took, on the wall clock.
fn an_interim_flood_is_an_error_and_the_timeout_holds() {
    use tailguard_load::H1Client;
    let _alone = common::wall_clock();
    let flood = interim_backend(800_000, None);
    let trickle = interim_backend(10, Some(Duration::from_millis(400)));
    for client in [H1Client::Lean, H1Client::Hyper] {
        for (addr, kind) in [(flood, "interim-flood"), (trickle, "timeout")] {
            let mut cfg = common::config(&format!("http://{addr}/"), 100.0, Duration::from_secs(3));
            cfg.concurrency = 30;
            cfg.timeout = Duration::from_secs(2);
            cfg.h1_client = client;
            let started = std::time::Instant::now();
            let (report, _) = common::run(cfg);
            let took = started.elapsed();
            let t = &report.summary.totals;
            println!("{client:?} {kind}: {took:?}, {:?}", t.errors);
            assert!(
                took < Duration::from_millis(5500),
                "{client:?} {kind}: {took:?}"
            );
            assert_eq!(t.good, 0, "{client:?} {kind}");
            // 30 at a time for 3 s: the trickle's other requests wait past their timeout for
            // one of the 30 connections (`no-connection`), the flood's never have to.
            let of = |k: &str| t.errors.get(k).copied().unwrap_or(0);
            let min = if kind == "timeout" { 60 } else { 250 };
            assert!(of(kind) >= min, "{client:?}: {:?}", t.errors);
            assert_eq!(
                of(kind) + of("no-connection"),
                300,
                "{client:?}: {:?}",
                t.errors
            );
        }
    }
}
