//! Endpoint churn (issue 44): 10,000 addresses `127.0.x.y:P`, all reaching one test server on
//! `0.0.0.0:P`, come and go through a discovery file, 100 at a time, the file rewritten every
//! 200 ms, while `tailguard load` sends 500 req/s through `tailguard proxy` with a metric
//! retention of 1 s. At the end the proxy keeps the series and pool entries of the 100 present
//! endpoints only, and its resident set is within 10 MiB of what it was after the first 100.
//! Tier 2: it runs 25 s of wall clock.

use crate::support::{Proxy, DEADLINE};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;
use tailguard_testsupport::{Deadline, TestServer};

const PRESENT: usize = 100;
const ROUNDS: usize = 100;

/// The `i`-th address on `port`: 127.0.1.1, ..., 127.0.1.250, 127.0.2.1, ...
fn nth(i: usize, port: u16) -> SocketAddr {
    let (x, y) = (1 + i / 250, 1 + i % 250);
    SocketAddr::from((
        [127, 0, u8::try_from(x).unwrap(), u8::try_from(y).unwrap()],
        port,
    ))
}

fn write_set(path: &std::path::Path, round: usize, port: u16) {
    let text: String = (round * PRESENT..(round + 1) * PRESENT)
        .map(|i| format!("{}\n", nth(i, port)))
        .collect();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// `GET path` on `addr` (HTTP/1.0, read to the close): the body.
fn fetch(addr: SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split_once("\r\n\r\n")
        .map_or(text.clone(), |(_, b)| b.to_owned())
}

/// Endpoints with at least one series in the exposition, and the pool gauges.
struct Seen {
    endpoints: usize,
    series: usize,
    pools: Vec<(String, u64)>,
}

fn seen(admin: SocketAddr) -> Seen {
    let text = fetch(admin, "/metrics");
    let per_endpoint: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains("endpoint=\""))
        .collect();
    let mut endpoints: Vec<&str> = per_endpoint
        .iter()
        .filter_map(|l| l.split("endpoint=\"").nth(1)?.split('"').next())
        .collect();
    endpoints.sort_unstable();
    endpoints.dedup();
    let pools = text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("tailguard_proxy_upstream_pool_entries{service=\"web\",pool=\"")
        })
        .filter_map(|rest| {
            let (pool, value) = rest.split_once("\"} ")?;
            Some((pool.to_owned(), value.trim().parse().ok()?))
        })
        .collect();
    Seen {
        endpoints: endpoints.len(),
        series: per_endpoint.len(),
        pools,
    }
}

#[test]
#[ignore = "tier 2: 25 s of wall clock, 10,000 connections"]
fn ten_thousand_endpoints_through_discovery_leave_nothing_behind() {
    let backend = TestServer::builder().every_loopback_address().spawn();
    let port = backend.addr().port();
    let dir = std::env::temp_dir().join(format!("tailguard-churn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("web.txt");
    write_set(&file, 0, port);
    let yaml = format!(
        "admin: {{ip: 127.0.0.1, port: 0, metricsRetainIdleMs: 1000}}\n\
         servers: [{{ip: 127.0.0.1, port: 0}}]\n\
         services:\n  - name: web\n    namer: {{kind: io.l5d.fs, path: {}, intervalMs: 50}}\n    \
         client:\n      failureAccrual: {{kind: none}}\n",
        file.display()
    );
    let proxy = Proxy::start_with("churn", &yaml, None);
    let admin: SocketAddr = proxy
        .wait_for("admin on http://")
        .trim_start_matches("admin on http://")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let pid = proxy.child.id();
    let seconds = ROUNDS * 200 / 1000 + 2;
    let summary = dir.join("load.json");
    let mut load = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args([
            "load",
            "-r",
            "500",
            "-c",
            "32",
            "-d",
            &format!("{seconds}s"),
            "--json",
        ])
        .arg(&summary)
        .arg(format!("http://{}/", proxy.addr))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first 100 endpoints in use: the resident set to compare with.
    let until = Deadline::after(DEADLINE);
    while seen(admin).endpoints < PRESENT {
        assert!(
            !until.passed(),
            "the first {PRESENT} endpoints were not all used"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1000));
    let rss_start = rss_kib(pid);
    // The churn: a new set of 100 every 200 ms (the pace of the test, not a synchronisation).
    let (mut most_endpoints, mut most_series) = (0, 0);
    for round in 1..ROUNDS {
        std::thread::sleep(Duration::from_millis(200));
        write_set(&file, round, port);
        if round % 10 == 0 {
            let s = seen(admin);
            most_endpoints = most_endpoints.max(s.endpoints);
            most_series = most_series.max(s.series);
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let rss_after = rss_kib(pid);
    let status = tailguard_testsupport::process::wait_or_kill(&mut load, Duration::from_secs(30));
    assert!(status.is_some_and(|s| s.success()), "load: {status:?}");
    let load: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(load["failed"], 0, "requests failed through the churn");
    // Nothing is sent any more: within the retention and a sweep, only the last 100 are left.
    let until = Deadline::after(DEADLINE);
    let end = loop {
        let s = seen(admin);
        let pooled = s.pools.iter().map(|(_, n)| *n).max().unwrap_or(0);
        if s.endpoints == PRESENT && pooled <= PRESENT as u64 {
            break s;
        }
        assert!(
            !until.passed(),
            "left behind: {} endpoints with series, pools {:?}",
            s.endpoints,
            s.pools
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let rss_end = rss_kib(pid);
    eprintln!(
        "churn: {} addresses, {PRESENT} at a time; most during: {most_endpoints} endpoints, \
         {most_series} series; end: {} endpoints, {} series, pools {:?}; RSS start {rss_start} \
         KiB, after 10,000 {rss_after} KiB, end {rss_end} KiB; load: {}",
        ROUNDS * PRESENT,
        end.endpoints,
        end.series,
        end.pools,
        ["good", "failed", "status_codes"]
            .map(|k| format!("{k} {}", load[k]))
            .join(", "),
    );
    assert!(
        rss_end <= rss_start + 10 * 1024,
        "RSS grew from {rss_start} KiB to {rss_end} KiB"
    );
    drop(proxy);
    std::fs::remove_dir_all(&dir).unwrap();
}
