//! `tailguard demo`'s live page in headless Chromium (tier 2): while the demo runs, the page
//! shows both arms side by side, its numbers agree with `/live.json` and move from one look to
//! the next, and the seed's point is on it (through the proxy, the slowest backend gets far less
//! than the tenth round robin gives it). The demo then exits 0 and its HTML report has a card
//! per arm, as the live page did.
//!
//! The demo binds its page to 127.0.0.1:0 and says where on stdout; the child is killed when
//! the test ends however it ends.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tailguard_testsupport::process::wait_or_kill;
use tailguard_testsupport::{browser, Deadline};

/// The screenshot's size: both cards, their tables and their first two charts.
const SHOT: (u32, u32) = (1400, 1400);

struct Demo(Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` on `addr`, body as JSON (bounded by socket timeouts).
fn get_json(addr: SocketAddr, path: &str) -> serde_json::Value {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let body = &out[out.find("\r\n\r\n").unwrap() + 4..];
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// The card of arm `name` in the DOM.
fn card<'a>(dom: &'a str, name: &str) -> &'a str {
    let start = dom
        .find(&format!("data-arm=\"add-steps/{name}\""))
        .unwrap_or_else(|| panic!("no card for {name} in:\n{dom}"));
    let rest = &dom[start..];
    &rest[..rest.find("</article>").unwrap_or(rest.len())]
}

/// The `data-v` of each cell of backend `name`'s row in `card`.
fn row(card: &str, name: &str) -> HashMap<String, f64> {
    let start = card
        .find(&format!("<tr data-backend=\"{name}\""))
        .unwrap_or_else(|| panic!("no row for {name}"));
    let rest = &card[start..];
    let tr = &rest[..rest.find("</tr>").unwrap()];
    let mut out = HashMap::new();
    for cell in tr.split("data-k=\"").skip(1) {
        let key = &cell[..cell.find('"').unwrap()];
        if let Some(v) = cell.split("data-v=\"").nth(1) {
            if let Ok(v) = v[..v.find('"').unwrap()].parse() {
                out.insert(key.to_owned(), v);
            }
        }
    }
    out
}

/// Requests every backend of an arm received, as its card shows them.
fn shown_requests(card: &str) -> f64 {
    card.split("<tr data-backend=\"")
        .skip(1)
        .map(|r| {
            let name = &r[..r.find('"').unwrap()];
            row(card, name)["requests"]
        })
        .sum()
}

fn json_requests(b: &serde_json::Value, arm: usize) -> f64 {
    b["arms"][arm]["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["requests"].as_f64().unwrap())
        .sum()
}

fn dom(chromium: &str, dir: &Path, url: &str) -> String {
    browser::dump_dom(chromium, dir, url, SHOT, Duration::from_millis(1500)).stdout
}

// long: one live demo, watched through its page from start to end; split, each step would
// need the demo again.
#[test]
#[ignore = "tier 2: headless chromium and a live demo (wall-clock seconds)"]
fn the_demo_page_shows_both_arms_moving_side_by_side() {
    let Some(chromium) = browser::chromium() else {
        return;
    };
    let dir = browser::workdir("demo-live");
    let (html, json) = (dir.join("demo.html"), dir.join("demo.json"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args(["demo", "--duration", "20s", "--live-addr", "127.0.0.1:0"])
        .arg("--html")
        .arg(&html)
        .arg("--json")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = tailguard_testsupport::process::lines(child.stdout.take().unwrap());
    let mut demo = Demo(child);
    let mut said = Vec::new();
    let page: SocketAddr = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no live page line; stdout so far: {said:#?}"));
        if let Some(rest) = line.strip_prefix("# live page: http://") {
            break rest[..rest.find('/').unwrap()].parse().unwrap();
        }
        said.push(line);
    };
    assert!(page.ip().is_loopback());
    let url = format!("http://{page}/");

    // Both arms run at once: wait for three seconds of each (bounded).
    let warm = Deadline::after(Duration::from_secs(15));
    loop {
        let b = get_json(page, "/live.json");
        let ready = b["arms"].as_array().is_some_and(|a| {
            a.len() == 2
                && a.iter()
                    .all(|x| x["window"]["span_ms"].as_u64() >= Some(3_000))
        });
        if ready {
            assert_eq!(b["together"], true);
            break;
        }
        assert!(!warm.passed(), "no three seconds of both arms: {b}");
        std::thread::sleep(Duration::from_millis(200));
    }

    // 1. Both cards, running, agreeing with /live.json read around the look.
    let before = get_json(page, "/live.json");
    let first = dom(chromium, &dir, &url);
    let after = get_json(page, "/live.json");
    assert!(first.contains("tailguard live: add-steps"), "{first}");
    let names: Vec<&str> = before["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["baseline", "proxy"]);
    for (i, name) in names.iter().enumerate() {
        let c = card(&first, name);
        assert!(c.contains("data-state=\"running\""), "{c}");
        assert_eq!(c.matches("class=\"chart\"").count(), 4, "{name}'s charts");
        assert_eq!(
            c.matches("<tr data-backend=").count(),
            10,
            "{name}'s backends"
        );
        let shown = shown_requests(c);
        assert!(
            json_requests(&before, i) <= shown && shown <= json_requests(&after, i),
            "{name}: page {shown}, live.json {} then {}",
            json_requests(&before, i),
            json_requests(&after, i)
        );
    }
    // The seed's point, on the page: round robin gives the 2 s backend its tenth; the proxy
    // starves it.
    let slow_share = |dom: &str, arm: &str| row(card(dom, arm), "step-2s")["share"];
    let (rr, proxy) = (slow_share(&first, "baseline"), slow_share(&first, "proxy"));
    assert!(
        (0.08..=0.12).contains(&rr),
        "round robin's share of step-2s: {rr}"
    );
    assert!(proxy < rr / 2.0, "proxy's share of step-2s {proxy} vs {rr}");

    // 2. A second look: both arms' counts moved.
    let second = dom(chromium, &dir, &url);
    for name in names {
        let (a, b) = (
            shown_requests(card(&first, name)),
            shown_requests(card(&second, name)),
        );
        assert!(b > a, "{name}: {a} then {b} requests");
    }

    // 3. The README's screenshot (TAILGUARD_DEMO_SCREENSHOT=path keeps it), once the charts
    // have most of the run (the demo's 20 s; bounded).
    let late = Deadline::after(Duration::from_secs(20));
    while get_json(page, "/live.json")["arms"][1]["elapsed_ms"].as_u64() < Some(15_000) {
        assert!(!late.passed(), "the demo stalled");
        std::thread::sleep(Duration::from_millis(200));
    }
    let shot = dir.join("demo.png");
    let budget = ["--virtual-time-budget=1500".to_owned()];
    let png = browser::screenshot(chromium, &dir, &url, SHOT, &shot, &budget);
    assert_eq!(browser::png_size(&png), SHOT);
    assert!(png.len() > 20_000, "the screenshot looks empty");
    if let Ok(to) = std::env::var("TAILGUARD_DEMO_SCREENSHOT") {
        std::fs::copy(&shot, &to).unwrap();
    }

    // 4. The demo ends by itself, and its report has a card per arm with their seconds.
    let status = wait_or_kill(&mut demo.0, Duration::from_secs(60)).expect("the demo ends");
    assert!(status.success(), "demo exited with {status}");
    let report = std::fs::read_to_string(&html).unwrap();
    assert_eq!(report.matches("<article>").count(), 2);
    assert!(report.contains("proxy: share of requests by backend"));
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for arm in saved["arms"].as_array().unwrap() {
        assert!(
            arm["seconds"].as_array().unwrap().len() >= 15,
            "{}",
            arm["name"]
        );
    }
    browser::clean(&dir);
}
