//! The dashboard on the admin port: `/dashboard.json` from a live proxy on loopback (tier 1),
//! and the page itself in headless Chromium over `tailguard serve` backends (tier 2): each
//! endpoint's row agrees with `/endpoints`, and a backend made slow at run time loses its
//! share of traffic within seconds.

use crate::support;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{client, eventually, grpc_call, send, start, AsUpstream, HttpClient};
use tailguard_balance::Policy;
use tailguard_proxy::config::ServiceConfig;
use tailguard_resilience::{AccrualConfig, Backoff, TripPolicy};
use tailguard_testsupport::browser;
use tailguard_testsupport::{bounded, TestServer};
use tokio::time::Instant;

async fn get_json(c: &HttpClient, admin: SocketAddr, path: &str) -> Value {
    let (status, _, body) = send(c, admin, "GET", path).await;
    assert_eq!(status, 200, "{path}");
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The dashboard's service `name`.
fn board_service<'a>(board: &'a Value, name: &str) -> &'a Value {
    board["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no service {name} in {board}"))
}

/// The row of endpoint `addr`.
fn row(service: &Value, addr: SocketAddr) -> &Value {
    service["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["addr"] == addr.to_string())
        .unwrap_or_else(|| panic!("no endpoint {addr} in {service}"))
}

// long: one proxy's figures checked after each kind of request it served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_counts_requests_failures_ejections_and_the_last_error() {
    let (good, bad) = (TestServer::start().await, TestServer::start().await);
    bad.set_status(503);
    let mut service = ServiceConfig::new("web", vec![good.upstream(), bad.upstream()]);
    service.arm.policy = Policy::RoundRobin;
    service.arm.retries = None;
    service.arm.accrual = Some(AccrualConfig {
        policy: TripPolicy::ConsecutiveFailures { failures: 1 },
        backoff: Backoff::Constant(Duration::from_secs(600)),
    });
    let proxy = start(service).await;
    let (addr, admin) = (proxy.addr(), proxy.admin_addr().unwrap());
    let c = client(false);
    let mut statuses = Vec::new();
    for _ in 0..20 {
        statuses.push(send(&c, addr, "GET", "/").await.0.as_u16());
    }
    // Round robin meets the bad endpoint once, first or second; accrual then takes it out.
    let failed = statuses.iter().filter(|s| **s == 503).count();
    assert_eq!(failed, 1, "{statuses:?}");
    let ticked = eventually(Duration::from_secs(10), async || {
        let b = get_json(&c, admin, "/dashboard.json").await;
        board_service(&b, "web")["window"]["requests"] == 20
    })
    .await;
    let board = get_json(&c, admin, "/dashboard.json").await;
    assert!(ticked, "the window never held the 20 requests: {board}");
    let web = board_service(&board, "web");
    let w = &web["window"];
    let success = w["success"].as_f64().unwrap();
    assert!((success - (20 - failed) as f64 / 20.0).abs() < 1e-9, "{w}");
    assert!(w["p50_us"].as_u64().unwrap() > 0, "{w}");
    assert!(w["rps"].as_f64().unwrap() > 0.0, "{w}");
    assert_eq!(web["in_flight"], 0);
    assert_eq!(web["retries_left"], Value::Null, "retries are off");
    assert_eq!(web["cost_unit"], Value::Null, "round robin ignores load");
    assert!(
        web["client"].as_str().unwrap().starts_with("round robin"),
        "{web}"
    );

    let endpoints = get_json(&c, admin, "/endpoints").await;
    let bad_row = row(web, bad.addr());
    let good_row = row(web, good.addr());
    assert_eq!(bad_row["state"], "dead");
    assert_eq!(bad_row["ejections"], 1);
    assert_eq!(bad_row["last_error"]["what"], "HTTP 503");
    let probe = bad_row["probe_in_ms"].as_u64().unwrap();
    assert!(probe > 500_000 && probe <= 600_000, "{bad_row}");
    assert_eq!(bad_row["window"]["success"], 0.0);
    assert_eq!(good_row["state"], "alive");
    assert_eq!(good_row["last_error"], Value::Null);
    assert_eq!(good_row["successes"].as_u64().unwrap(), 20 - failed as u64);
    assert_eq!(good_row["window"]["success"], 1.0);
    // The rows are what /endpoints shows (one slot per address here).
    for e in endpoints["web"].as_array().unwrap() {
        let addr: SocketAddr = e["addr"].as_str().unwrap().parse().unwrap();
        let r = row(web, addr);
        for key in [
            "successes",
            "failures",
            "state",
            "ejections",
            "success_rate",
        ] {
            assert_eq!(r[key], e[key], "{key} of {addr}");
        }
    }
    // Shares over the window add up to one.
    let shares: f64 = web["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["window"]["share"].as_f64())
        .sum();
    assert!((shares - 1.0).abs() < 1e-9, "{web}");

    // `since` asks only for newer samples.
    let all = web["history"].as_array().unwrap();
    assert!(!all.is_empty());
    let last = all.last().unwrap()["seq"].as_u64().unwrap();
    let newer = get_json(&c, admin, &format!("/dashboard.json?since={last}")).await;
    for s in board_service(&newer, "web")["history"].as_array().unwrap() {
        assert!(s["seq"].as_u64().unwrap() > last);
    }
    proxy.shutdown().await;
}

/// gRPC answers HTTP 200 and says how the call went in its trailers: the dashboard counts a
/// failed call as a failure, not as the 200 its headers carry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_status_in_the_trailers_decides_success() {
    let backend = TestServer::start().await;
    let mut service = ServiceConfig::new("rpc", vec![backend.upstream()]);
    service.arm.retries = None;
    service.arm.accrual = None;
    let proxy = start(service).await;
    let (addr, admin) = (proxy.addr(), proxy.admin_addr().unwrap());
    let (h2, c) = (client(true), client(false));
    for _ in 0..3 {
        assert_eq!(grpc_call(&h2, addr, 0).await, Some(0));
        assert_eq!(grpc_call(&h2, addr, 14).await, Some(14));
    }
    let ticked = eventually(Duration::from_secs(10), async || {
        let b = get_json(&c, admin, "/dashboard.json").await;
        board_service(&b, "rpc")["window"]["requests"] == 6
    })
    .await;
    let board = get_json(&c, admin, "/dashboard.json").await;
    assert!(ticked, "{board}");
    let rpc = board_service(&board, "rpc");
    assert_eq!(rpc["window"]["success"], 0.5, "{rpc}");
    let r = row(rpc, backend.addr());
    assert_eq!(r["last_error"]["what"], "gRPC 14 (UNAVAILABLE)");
    assert_eq!(r["window"]["success"], 0.5);
    proxy.shutdown().await;
}

/// A request whose body the client botched gets 400 from the proxy: the client's fault, so
/// the service's success on the dashboard stays whole even when 4xx count as failures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_bad_body_is_not_the_services_failure() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let backend = TestServer::start().await;
    let mut service = ServiceConfig::new("web", vec![backend.upstream()]);
    service.arm.classifier.four_xx_is_failure = true;
    let proxy = start(service).await;
    let (addr, admin) = (proxy.addr(), proxy.admin_addr().unwrap());
    let mut s = bounded(tokio::net::TcpStream::connect(addr)).await.unwrap();
    let raw = b"POST / HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\
                Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n";
    bounded(s.write_all(raw)).await.unwrap();
    let mut got = Vec::new();
    bounded(s.read_to_end(&mut got)).await.unwrap();
    assert!(
        got.starts_with(b"HTTP/1.1 400"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    let c = client(false);
    assert_eq!(send(&c, addr, "GET", "/").await.0, 200);
    let ticked = eventually(Duration::from_secs(10), async || {
        let b = get_json(&c, admin, "/dashboard.json").await;
        board_service(&b, "web")["window"]["requests"] == 2
    })
    .await;
    let board = get_json(&c, admin, "/dashboard.json").await;
    assert!(ticked, "{board}");
    assert_eq!(board_service(&board, "web")["window"]["success"], 1.0);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_self_contained_and_read_only() {
    let backend = TestServer::start().await;
    let proxy = start(ServiceConfig::new("web", vec![backend.upstream()])).await;
    let admin = proxy.admin_addr().unwrap();
    let c = client(false);
    let (status, headers, body) = send(&c, admin, "GET", "/").await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    let page = String::from_utf8(body.to_vec()).unwrap();
    assert!(page.contains("dashboard.json"));
    assert!(!page.contains("/*"), "every placeholder filled");
    assert_eq!(browser::network_references(&page), Vec::<String>::new());
    // Read-only: no form, and the script only reads (fetch's default method, GET).
    assert!(!page.contains("<form") && !page.contains("POST"));
    // A bad `since` is the client's error, said plainly.
    let (status, _, body) = send(&c, admin, "GET", "/dashboard.json?since=abc").await;
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&body).contains("since"));
    let (status, _, _) = send(&c, admin, "GET", "/dashboard.json?since=3&_=1").await;
    assert_eq!(status, 200);
    proxy.shutdown().await;
}

/// The screenshot's size: one service's tiles, table and charts.
const SHOT: (u32, u32) = (1280, 1120);

/// A `tailguard serve` fleet of three 40 ms backends on 127.0.0.1, with its control endpoint.
/// (Slower than the peak EWMA's 30 ms default estimate, so the balancer tries all three at
/// once; below it, an endpoint not yet tried waits until the others get slower.)
async fn fleet() -> tailguard_serve::Running {
    let yaml = "seed: 5\nbackends: [{name: a, latency: 40ms}, {name: b, latency: 40ms}, \
                {name: c, latency: 40ms}]";
    let fleet = tailguard_fleet::Fleet::from_yaml_str(yaml, "test").unwrap();
    let mut options = tailguard_serve::ServeOptions::new(fleet);
    options.listen = "127.0.0.1:0".parse().unwrap();
    options.control = Some("127.0.0.1:0".parse().unwrap());
    tailguard_serve::start(options).await.unwrap()
}

/// Sends GETs to `proxy` every 5 ms (about 200 per second) until `stop`.
fn traffic(proxy: SocketAddr, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let c = client(false);
        let mut every = tokio::time::interval(Duration::from_millis(5));
        while !stop.load(Ordering::Relaxed) {
            every.tick().await;
            let c = c.clone();
            // Errors are ignored: requests still in flight fail when the test stops the proxy.
            tokio::spawn(async move {
                let req = Request::get(format!("http://{proxy}/"))
                    .body(Full::new(Bytes::new()))
                    .unwrap();
                if let Ok(Ok(resp)) =
                    tokio::time::timeout(Duration::from_secs(10), c.request(req)).await
                {
                    let _ =
                        tokio::time::timeout(Duration::from_secs(10), resp.into_body().collect())
                            .await;
                }
            });
        }
    })
}

/// The page's DOM after `budget` of its scripts' time, from a browser run off the runtime's
/// workers (the proxy under test shares them).
async fn page_dom(
    chromium: &'static str,
    dir: &std::path::Path,
    url: &str,
    budget: Duration,
) -> String {
    let (dir, url) = (dir.to_owned(), url.to_owned());
    tokio::task::spawn_blocking(move || {
        browser::dump_dom(chromium, &dir, &url, (1280, 1600), budget).stdout
    })
    .await
    .unwrap()
}

/// A screenshot of the page at `url` as `dir/name`, checked to be the size asked and not
/// empty, copied to the path in the environment variable `env` when it is set (how the docs'
/// pictures are remade).
async fn screenshot(
    chromium: &'static str,
    dir: &std::path::Path,
    url: &str,
    name: &str,
    env: &str,
) {
    let shot = dir.join(name);
    let png = {
        let (dir, url, shot) = (dir.to_owned(), url.to_owned(), shot.clone());
        tokio::task::spawn_blocking(move || {
            let budget = ["--virtual-time-budget=2000".to_owned()];
            browser::screenshot(chromium, &dir, &url, SHOT, &shot, &budget)
        })
        .await
        .unwrap()
    };
    assert_eq!(browser::png_size(&png), SHOT);
    assert!(png.len() > 20_000, "the screenshot looks empty");
    if let Ok(to) = std::env::var(env) {
        std::fs::copy(&shot, &to).unwrap();
    }
}

/// One endpoint row of the rendered page: `data-k` -> `data-v` (else the cell's text).
fn dom_row(dom: &str, addr: SocketAddr) -> Option<std::collections::HashMap<String, String>> {
    let start = dom.find(&format!("<tr data-endpoint=\"{addr}\">"))?;
    let end = start + dom[start..].find("</tr>")?;
    let mut out = std::collections::HashMap::new();
    for cell in dom[start..end].split("<td").skip(1) {
        let attr = |name: &str| {
            let key = format!("{name}=\"");
            cell.find(&key).map(|i| {
                let rest = &cell[i + key.len()..];
                rest[..rest.find('"').unwrap_or(0)].to_owned()
            })
        };
        let Some(k) = attr("data-k") else { continue };
        let text = || {
            let rest = &cell[cell.find('>').map_or(0, |i| i + 1)..];
            rest[..rest.find("</td>").unwrap_or(rest.len())].to_owned()
        };
        out.insert(k, attr("data-v").unwrap_or_else(text));
    }
    Some(out)
}

fn number(row: &std::collections::HashMap<String, String>, key: &str) -> f64 {
    row.get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {key} in {row:?}"))
}

// long: one browser session over a live fleet, watched as a backend slows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: headless chromium"]
async fn the_page_shows_each_endpoint_and_a_slowed_backend_losing_share() {
    let Some(chromium) = browser::chromium() else {
        return;
    };
    let dir = browser::workdir("dashboard");
    let running = fleet().await;
    let addrs: Vec<SocketAddr> = running.backends().iter().map(|b| b.1).collect();
    let upstreams = addrs
        .iter()
        .map(|a| tailguard_proxy::config::Upstream::new(*a))
        .collect();
    let proxy = start(ServiceConfig::new("web", upstreams)).await;
    let admin = proxy.admin_addr().unwrap();
    let url = format!("http://{admin}/");
    let c = client(false);
    let stop = Arc::new(AtomicBool::new(false));
    let load = traffic(proxy.addr(), Arc::clone(&stop));
    let warm = eventually(Duration::from_secs(15), async || {
        let b = get_json(&c, admin, "/dashboard.json").await;
        board_service(&b, "web")["window"]["span_ms"].as_u64() >= Some(3_000)
    })
    .await;
    assert!(warm, "no three seconds of traffic on the dashboard");

    // 1. Every endpoint has a row, and the row agrees with /endpoints read around it.
    let before = get_json(&c, admin, "/endpoints").await;
    let dom = page_dom(chromium, &dir, &url, Duration::from_secs(2)).await;
    let after = get_json(&c, admin, "/endpoints").await;
    assert!(dom.contains("<h1>tailguard proxy</h1>"), "{dom}");
    // Drawn charts (the script's own template spells `${w}`, not a number).
    let charts = dom
        .matches("class=\"chart\" viewBox=\"0 0 640 360\"")
        .count();
    assert_eq!(charts, 4, "four charts for one service");
    assert!(dom.contains("data-series=\"p99.9\""));
    for (i, addr) in addrs.iter().enumerate() {
        let row = dom_row(&dom, *addr).unwrap_or_else(|| panic!("no row for {addr}"));
        let total = |v: &Value| {
            let e = &v["web"][i];
            assert_eq!(e["addr"], addr.to_string());
            e["successes"].as_f64().unwrap() + e["failures"].as_f64().unwrap()
        };
        let shown = number(&row, "attempts");
        assert!(
            total(&before) <= shown && shown <= total(&after),
            "{addr}: page {shown}, /endpoints {} then {}",
            total(&before),
            total(&after)
        );
        assert_eq!(row["state"], after["web"][i]["state"].as_str().unwrap());
        assert_eq!(number(&row, "success_rate"), 1.0);
        let share = number(&row, "share");
        assert!((0.10..=0.60).contains(&share), "{addr}: share {share}");
        assert!(
            number(&row, "cost") > 0.0,
            "peak EWMA learned a cost: {row:?}"
        );
    }
    // 2. Backend b turns slow (400 ms instead of 40 ms): its share on the page falls.
    let slow = addrs[1];
    let share_before = number(&dom_row(&dom, slow).unwrap(), "share");
    let control = running.control().unwrap();
    let change = Request::post(format!("http://{control}/backends/b"))
        .body(Full::new(Bytes::from_static(b"{\"latency\": \"400ms\"}")))
        .unwrap();
    let answer = bounded(c.request(change)).await.unwrap();
    assert_eq!(answer.status(), 200);
    let slowed = Instant::now();
    let mut shares = Vec::new();
    let fell = loop {
        let dom = page_dom(chromium, &dir, &url, Duration::from_millis(500)).await;
        let share = number(&dom_row(&dom, slow).unwrap(), "share");
        shares.push((slowed.elapsed().as_secs_f64(), share));
        if share < share_before / 2.0 {
            break true;
        }
        if slowed.elapsed() > Duration::from_secs(20) {
            break false;
        }
    };
    // 3. A screenshot of the page now (the README's, with TAILGUARD_SCREENSHOT=path).
    screenshot(
        chromium,
        &dir,
        &url,
        "dashboard.png",
        "TAILGUARD_SCREENSHOT",
    )
    .await;

    stop.store(true, Ordering::Relaxed);
    let _ = load.await;
    eprintln!("slow backend's share on the page (seconds after the change, share): {shares:?}");
    assert!(
        fell,
        "the slowed backend kept its share ({share_before:.2} before): {shares:?}"
    );
    proxy.shutdown().await;
    browser::clean(&dir);
}

/// The route view: each route's requests a second, success and p50/p99, `[default]` last, on
/// the page a browser draws (`TAILGUARD_ROUTES_SCREENSHOT=docs/img/dashboard-routes.png`
/// remakes the docs' picture).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tier 2: headless chromium"]
async fn the_page_shows_each_routes_figures() {
    let Some(chromium) = browser::chromium() else {
        return;
    };
    let dir = browser::workdir("dashboard-routes");
    let running = fleet().await;
    let upstreams = running
        .backends()
        .iter()
        .map(|b| tailguard_proxy::config::Upstream::new(b.1))
        .collect();
    let mut service = ServiceConfig::new("web", upstreams);
    let route = |name: &str, path: &str| tailguard_proxy::route::Route {
        name: name.into(),
        method: Some(http::Method::GET),
        path: Some(tailguard_proxy::route::PathRegex::new(path).unwrap()),
        timeout: None,
        retryable: None,
        rate_limit: None,
    };
    service.routes = vec![
        route("get-user", "/users/[0-9]+"),
        route("search", "/search"),
    ];
    let proxy = start(service).await;
    let (addr, admin) = (proxy.addr(), proxy.admin_addr().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let c = client(false);
            let mut every = tokio::time::interval(Duration::from_millis(5));
            let paths = ["/users/7", "/users/8", "/search", "/users/9", "/"];
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                every.tick().await;
                let (c, path) = (c.clone(), paths[i % paths.len()]);
                tokio::spawn(async move {
                    let _ =
                        tokio::time::timeout(Duration::from_secs(10), send(&c, addr, "GET", path))
                            .await;
                });
            }
        })
    };
    let c = client(false);
    let warm = eventually(Duration::from_secs(15), async || {
        let b = get_json(&c, admin, "/dashboard.json").await;
        board_service(&b, "web")["window"]["span_ms"].as_u64() >= Some(3_000)
    })
    .await;
    assert!(warm, "no three seconds of traffic on the dashboard");
    let url = format!("http://{admin}/");
    let dom = page_dom(chromium, &dir, &url, Duration::from_secs(2)).await;
    let mut rates = Vec::new();
    for name in ["get-user", "search", "[default]"] {
        let start = dom
            .find(&format!("<tr data-route=\"{name}\">"))
            .unwrap_or_else(|| panic!("no row for route {name}: {dom}"));
        let row = &dom[start..start + dom[start..].find("</tr>").unwrap()];
        let value = |k: &str| -> f64 {
            let key = format!("data-k=\"{k}\" data-v=\"");
            let at = row.find(&key).unwrap_or_else(|| panic!("no {k} in {row}")) + key.len();
            row[at..at + row[at..].find('"').unwrap()].parse().unwrap()
        };
        assert_eq!(value("success"), 1.0, "{row}");
        assert!(
            value("p99") >= 40_000.0,
            "p99 under the backends' 40 ms: {row}"
        );
        rates.push(value("rps"));
    }
    // Three requests in five are get-user's, one search's, one [default]'s.
    assert!(
        rates[0] > 2.0 * rates[1] && rates[0] > 2.0 * rates[2],
        "{rates:?}"
    );
    screenshot(
        chromium,
        &dir,
        &url,
        "routes.png",
        "TAILGUARD_ROUTES_SCREENSHOT",
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let _ = load.await;
}
