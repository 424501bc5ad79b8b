//! The access log (issue 46, item 4): one JSON line per request, written by a thread of its own
//! from a bounded queue; a reader that stops costs lines (counted), never the requests' time.
//! Backends on 127.0.0.1; the log is a real file (or FIFO) in a directory of the test's own.
//! The writer is a thread on the wall clock, so these tests run on it and poll, bounded.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;
use support::{client, config_of, send, AsUpstream};
use tailguard_balance::Policy;
use tailguard_proxy::config::{AccessLogConfig, Config, ServiceConfig};
use tailguard_resilience::rate::RateLimit;
use tailguard_testsupport::TestServer;

/// A directory for one test's files, removed when it drops.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("tailguard-access-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Self(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn logged(service: ServiceConfig, path: &Path, query: bool) -> Config {
    let mut c = config_of(vec![service]);
    c.access_log = Some(AccessLogConfig {
        path: path.to_owned(),
        query,
    });
    c
}

fn web(backends: &[&TestServer]) -> ServiceConfig {
    let mut s = ServiceConfig::new("web", backends.iter().map(|b| b.upstream()).collect());
    s.arm.policy = Policy::RoundRobin;
    s.arm.accrual = None;
    s
}

/// The file's lines, parsed, once it holds `n` (polled up to 10 s).
fn lines(path: &Path, n: usize) -> Vec<serde_json::Value> {
    let until = tailguard_testsupport::Deadline::after(Duration::from_secs(10));
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let got: Vec<&str> = text.lines().collect();
        if got.len() >= n || until.passed() {
            assert_eq!(got.len(), n, "{text}");
            return got
                .iter()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_line_per_request_with_what_happened_to_it() {
    let dir = Dir::new("fields");
    let path = dir.0.join("access.log");
    let (failing, fine) = (TestServer::start().await, TestServer::start().await);
    failing.set_status(503);
    let mut service = web(&[&failing, &fine]);
    service.path_prefix = Some("/api".into());
    service.routes = vec![tailguard_proxy::route::Route {
        name: "limited".into(),
        method: None,
        path: Some(tailguard_proxy::route::PathRegex::new("/api/limited").unwrap()),
        timeout: None,
        retryable: None,
        rate_limit: Some(RateLimit {
            per_sec: 0.001,
            burst: 1,
        }),
    }];
    let proxy = tailguard_proxy::start(logged(service, &path, false))
        .await
        .unwrap();
    let c = client(false);
    let addr = proxy.addr();
    // Round robin from the failing endpoint: the GET is retried on the fine one.
    assert_eq!(send(&c, addr, "GET", "/api/users?id=7").await.0, 200);
    // A POST is not retried: its 503 is the endpoint's; the next goes to the fine one.
    assert_eq!(send(&c, addr, "POST", "/api/orders").await.0, 503);
    assert_eq!(send(&c, addr, "POST", "/api/orders").await.0, 200);
    assert_eq!(send(&c, addr, "GET", "/api/limited").await.0, 200);
    assert_eq!(send(&c, addr, "GET", "/api/limited").await.0, 429);
    assert_eq!(send(&c, addr, "GET", "/elsewhere").await.0, 404);
    // Each line is written as its response body drops: find them by what they say.
    let l = lines(&path, 6);
    let find = |method: &str, status: u64| {
        l.iter()
            .find(|l| l["method"] == method && l["status"] == status)
            .unwrap_or_else(|| panic!("no {method} {status} in {l:?}"))
    };
    let get = find("GET", 200);
    assert_eq!(get["method"], "GET");
    assert_eq!(get["path"], "/api/users", "no query unless asked");
    assert_eq!(get["route"], "[default]");
    assert_eq!(get["upstream"], fine.addr().to_string());
    assert_eq!(
        (get["attempts"].as_u64(), get["retried"].as_bool()),
        (Some(2), Some(true))
    );
    assert_eq!(get["hedged"], false);
    assert_eq!(get["fault"], serde_json::json!([]));
    assert!(get["resp_body_bytes"].as_u64().unwrap() > 0);
    assert!(get["duration_ms"].as_f64().unwrap() >= 0.0);
    let ts = get["ts"].as_str().unwrap();
    assert!(
        humantime::parse_rfc3339(ts).is_ok() && ts.len() == 27,
        "{ts}"
    );
    // The first POST met the failing endpoint, unretried; a body counted on the way up.
    let failed = find("POST", 503);
    assert_eq!(
        (failed["attempts"].as_u64(), failed["retried"].as_bool()),
        (Some(1), Some(false))
    );
    assert_eq!(failed["upstream"], failing.addr().to_string());
    assert_eq!(find("POST", 200)["req_body_bytes"], "payload".len());
    let limited: Vec<_> = l.iter().filter(|l| l["route"] == "limited").collect();
    assert_eq!(limited.len(), 2);
    let refused = find("GET", 429);
    assert_eq!(refused["fault"], serde_json::json!(["over rateLimit"]));
    assert_eq!(refused["upstream"], serde_json::Value::Null);
    assert_eq!(refused["attempts"], 0);
    let lost = find("GET", 404);
    assert!(
        lost["fault"][0].as_str().unwrap().starts_with("no service"),
        "{lost}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_line_count_equals_the_requests_and_a_reopen_starts_a_new_file() {
    let dir = Dir::new("count");
    let path = dir.0.join("access.log");
    let backend = TestServer::start().await;
    let proxy = tailguard_proxy::start(logged(web(&[&backend]), &path, true))
        .await
        .unwrap();
    let addr = proxy.addr();
    let tasks: Vec<_> = (0..4)
        .map(|w| {
            tokio::spawn(async move {
                let c = client(w % 2 == 1);
                for i in 0..250 {
                    let path = format!("/w{w}?i={i}");
                    assert_eq!(send(&c, addr, "GET", &path).await.0, 200);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let l = lines(&path, 1000);
    assert!(l
        .iter()
        .all(|l| l["path"].as_str().unwrap().contains("?i=")));
    // logrotate: move the file, then SIGUSR1 (here the call it makes): new lines, new file.
    let rotated = dir.0.join("access.log.1");
    std::fs::rename(&path, &rotated).unwrap();
    proxy.shared().reopen_access_log();
    let c = client(false);
    for _ in 0..3 {
        assert_eq!(send(&c, addr, "GET", "/after").await.0, 200);
    }
    assert_eq!(lines(&path, 3).len(), 3);
    assert_eq!(lines(&rotated, 1000).len(), 1000);
    assert!(!proxy.metrics_text().contains("access_log_dropped_total 1"));
}

#[tokio::test]
async fn a_path_that_cannot_be_opened_stops_the_start_naming_the_key() {
    let backend = TestServer::start().await;
    let config = logged(
        web(&[&backend]),
        Path::new("/nonexistent-dir-tailguard/access.log"),
        false,
    );
    let e = tailguard_proxy::start(config)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("accessLog.path: cannot open"), "{e}");
}

/// Tier 2: a FIFO whose reader reads a little and then stops. The writer blocks on the full
/// pipe, the queue fills, and lines are dropped and counted; the requests' p99 stays what it
/// is with no log at all (measured in the same run, interleaved).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: wall clock (latency with and without a stuck log reader)"]
async fn a_reader_that_stops_costs_lines_not_latency() {
    let dir = Dir::new("fifo");
    let fifo = dir.0.join("access.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    // The reader opens, reads one buffer, then holds the pipe open without reading.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut f = std::fs::File::open(&fifo).unwrap();
            let mut buf = [0u8; 4096];
            let _ = f.read(&mut buf);
            std::thread::sleep(Duration::from_secs(30));
        })
    };
    let backend = TestServer::start().await;
    let with_log = tailguard_proxy::start(logged(web(&[&backend]), &fifo, false))
        .await
        .unwrap();
    let without = tailguard_proxy::start(config_of(vec![web(&[&backend])]))
        .await
        .unwrap();
    let c = client(false);
    let (mut on, mut off) = (Vec::new(), Vec::new());
    // 20,000 lines are far past the pipe (64 KiB) and the queue (10,000 lines).
    for _ in 0..20_000 {
        for (addr, out) in [(with_log.addr(), &mut on), (without.addr(), &mut off)] {
            let t = tokio::time::Instant::now();
            assert_eq!(send(&c, addr, "GET", "/").await.0, 200);
            out.push(t.elapsed());
        }
    }
    let p99 = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() * 99 / 100]
    };
    let (p_on, p_off) = (p99(&mut on), p99(&mut off));
    let dropped = support::metric_total(&with_log, "tailguard_proxy_access_log_dropped_total");
    eprintln!("p99 with a stuck reader {p_on:?}, without a log {p_off:?}; {dropped} lines dropped");
    assert!(dropped >= 5_000.0, "{dropped} dropped");
    assert!(
        p_on.as_secs_f64() <= p_off.as_secs_f64() * 1.5 + 0.000_5,
        "p99 {p_on:?} with the stuck log, {p_off:?} without"
    );
    drop(reader);
}

/// With the access log and tracing both on (its collector down, so every span is dropped), a
/// 100 KB body goes up and comes back whole over HTTP/1.1 and HTTP/2, a gRPC call keeps its
/// trailers, and each has its line with the bytes counted both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_and_grpc_pass_through_a_logged_and_traced_proxy() {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    let dir = Dir::new("large");
    let path = dir.0.join("access.log");
    let backend = TestServer::start().await;
    let mut config = logged(web(&[&backend]), &path, false);
    let closed_port = tailguard_testsupport::ClosedPort::new();
    let closed = closed_port.addr();
    config.tracing = Some(tailguard_proxy::config::TracingConfig {
        otlp_endpoint: format!("http://{closed}/v1/traces").parse().unwrap(),
        sample_rate: 1.0,
        service_name: "t".into(),
    });
    let proxy = tailguard_proxy::start(config).await.unwrap();
    let payload: Bytes = (0..100_000u32)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    for h2 in [false, true] {
        let c = client(h2);
        let req = http::Request::post(format!("http://{}/echo", proxy.addr()))
            .body(Full::new(payload.clone()))
            .unwrap();
        let resp = tailguard_testsupport::bounded(c.request(req))
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let got = tailguard_testsupport::bounded(resp.into_body().collect())
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(got, payload, "h2 {h2}");
    }
    let c = client(true);
    assert_eq!(support::grpc_call(&c, proxy.addr(), 0).await, Some(0));
    let l = lines(&path, 3);
    for line in &l[..2] {
        assert_eq!(line["req_body_bytes"], 100_000, "{line}");
        assert_eq!(line["resp_body_bytes"], 100_000, "{line}");
        assert_eq!(line["fault"], serde_json::json!([]));
    }
    assert_eq!(
        (l[2]["status"].as_u64(), l[2]["path"].as_str()),
        (Some(200), Some("/trailers"))
    );
    // Every request was traced; the collector being down cost spans only.
    let until = tailguard_testsupport::Deadline::after(Duration::from_secs(10));
    while support::metric_total(&proxy, "tailguard_proxy_trace_spans_dropped_total") < 6.0 {
        assert!(!until.passed(), "spans were not dropped and counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
