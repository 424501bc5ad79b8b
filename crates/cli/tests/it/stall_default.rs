//! Issue 45's acceptance on the wall clock, shortened: `tailguard proxy` with its defaults in
//! front of three `tailguard serve` backends (a and b log-normal around 5 ms, c ten times slower
//! and failing 20%), a paused from 4 s to 8 s of its life, `tailguard load -r 200 -c 50 -i 1s`
//! for 12 s through it: every one-second interval has completions, nothing fails, and the
//! slowest request is under a second (the previous default held requests for the whole 4 s
//! pause, p99 about 3 s). The p99 bound here is 200 ms, not the issue's 100 ms: a third of this
//! short run falls in or after the pause, when c (50 ms median) takes more of the traffic, so
//! its p99 sits near 100 ms (102 ms measured) rather than the 91 ms of the full 30 s run, which
//! `bench/proxy/stall.sh` measures against HAProxy (medians of three). The logic is tier 1 on
//! paused time (`proxy/src/attempts/tests.rs`, `sim/tests/it/anchors.rs`). Tier 2: 14 s of wall
//! clock, beside other tests.

use crate::support::{Proxy, DEADLINE};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use tailguard_testsupport::Deadline;

const FAST: &str = "{lognormal: {median: 5ms, sigma: 0.5, max: 1s}}";
const SLOW: &str = "{lognormal: {median: 50ms, sigma: 0.5, max: 2s}}";

/// A `tailguard serve` backend on a free port; killed on drop.
struct Serve(Child, SocketAddr);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(extra: &[&str]) -> Serve {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args(["serve", "--listen", "127.0.0.1:0", "--no-control"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    tailguard_testsupport::process::drain(err);
    let lines = tailguard_testsupport::process::lines(out);
    let until = Deadline::after(DEADLINE);
    let addr = loop {
        let line = lines
            .recv_timeout(until.left())
            .expect("serve's start line");
        if let Some(addr) = line
            .split_whitespace()
            .nth(1)
            .and_then(|u| u.strip_prefix("http://"))
            .and_then(|a| a.parse().ok())
        {
            break addr;
        }
    };
    Serve(child, addr)
}

#[test]
#[ignore = "tier 2: 14 s of wall clock, three backends, a proxy and a load generator"]
fn the_default_proxy_rides_out_a_paused_backend() {
    let a = serve(&[
        "--latency",
        FAST,
        "--fault",
        "at 4s pause",
        "--fault",
        "at 8s resume",
    ]);
    let b = serve(&["--latency", FAST, "--seed", "1"]);
    let c = serve(&["--latency", SLOW, "--error-rate", "20%", "--seed", "2"]);
    let list = [a.1, b.1, c.1].map(|x| format!("\"{x}\"")).join(", ");
    let yaml = format!(
        "servers: [{{ip: 127.0.0.1, port: 0}}]\nservices:\n  - name: web\n    upstreams: [{list}]\n"
    );
    let proxy = Proxy::start_with("stall", &yaml, None);
    let out = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args([
            "load", "-r", "200", "-c", "50", "-i", "1s", "-d", "12s", "-q",
        ])
        .args(["--json", "-"])
        .arg(format!("http://{}/", proxy.addr))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    let ms = |v: &serde_json::Value| v.as_f64().unwrap() / 1e3;
    let lat = &run["latency_us"];
    let intervals = run["intervals"].as_array().unwrap();
    let per_interval: Vec<String> = intervals
        .iter()
        .map(|i| format!("{}:{:.0}ms", i["good"], ms(&i["latency_us"]["p99"])))
        .collect();
    eprintln!(
        "stall, default proxy: p99 {:.1} ms, p99.9 {:.1} ms, max {:.1} ms, failed {}; \
         per interval (answers:p99) {}",
        ms(&lat["p99"]),
        ms(&lat["p999"]),
        ms(&lat["max"]),
        run["failed"],
        per_interval.join(" ")
    );
    assert_eq!(run["failed"], 0);
    assert_eq!(run["bad"], 0, "c's failures are retried elsewhere");
    assert!(
        intervals.iter().all(|i| i["good"].as_u64() > Some(0)),
        "an interval without completions: {per_interval:?}"
    );
    assert!(ms(&lat["p99"]) <= 200.0, "p99 {}", ms(&lat["p99"]));
    assert!(ms(&lat["max"]) <= 1_000.0, "max {}", ms(&lat["max"]));
    drop(proxy);
}
